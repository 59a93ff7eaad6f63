// tools/doctor/advice.cpp - advice levels, and the exit status a list of advice gives.
#include "advice.hpp"

#include <algorithm>

namespace hugepage::doctor {

const char* name_of(advice_level level) noexcept {
  return level == advice_level::note ? "note" : "warning";
}

bool has_warning(const std::vector<advice>& list) noexcept {
  return std::any_of(list.begin(), list.end(),
                     [](const advice& a) { return a.level == advice_level::warning; });
}

exit_status exit_code_of(const std::vector<advice>& list) noexcept {
  return has_warning(list) ? exit_advice : exit_healthy;
}

}  // namespace hugepage::doctor
