// tools/doctor/test_hook.hpp - a pause point for the doctor's tests at a moment that matters.
#pragma once

namespace hugepage::doctor {

/// With HUGEPAGE_DOCTOR_TEST_HOOK_FD=N naming a socket, writes one byte to fd N and waits for
/// one byte back, so that a test can change the target at exactly that moment: between reading
/// the target and checking it is still the same process, after a thread id is resolved to its
/// process and before that process is opened, and in a collapse (its dry run too) after listing
/// the target's candidates and between passes.
/// Without the variable, or when N is no socket (a stray variable cannot make the doctor write
/// into a file), it does nothing.
void test_hook();

}  // namespace hugepage::doctor
