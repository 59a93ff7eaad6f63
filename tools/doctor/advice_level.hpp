// tools/doctor/advice_level.hpp - how much a piece of advice weighs (advice.cpp).
#pragma once

namespace hugepage::doctor {

/// How much a piece of advice weighs: a warning makes the exit status 1, a note does not.
enum class advice_level { warning, note };

/// "warning" or "note".
const char* name_of(advice_level level) noexcept;

}  // namespace hugepage::doctor
