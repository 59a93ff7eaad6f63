// tools/doctor/process_environ.hpp - the allocator settings in /proc/<pid>/environ
// (process_environ.cpp).
//
// environ is NUL-separated NAME=value entries as the process started with them. The doctor keeps
// the variables that decide how an allocator or runtime uses huge pages (describe_allocator() in
// allocator_settings.hpp and detect_runtime() in runtime_detect.hpp read them), and tells an
// environment a process wrote its title over from one it can trust. Both take the text, so tests
// feed stored samples.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hugepage::doctor {

/// Splits /proc/<pid>/environ (NUL-separated NAME=value) and keeps the variables that configure
/// an allocator's use of huge pages: MALLOC_CONF, _RJEM_MALLOC_CONF, GLIBC_TUNABLES, MIMALLOC_*,
/// TCMALLOC_*, LD_PRELOAD, JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, _JAVA_OPTIONS, and numpy's
/// NUMPY_MADVISE_HUGEPAGE. In the order found. GLIBC_TUNABLES is put back whole from the
/// fragments glibc before 2.39 leaves after it (it splits the value at each ':' in place).
std::vector<std::pair<std::string, std::string>> parse_allocator_environ(std::string_view text);

/// True when /proc/<pid>/environ text is not NAME=value pairs: the process wrote its title over
/// its environment (Redis, PostgreSQL), so its settings cannot be read from it.
bool environ_overwritten(std::string_view text);

}  // namespace hugepage::doctor
