// tools/doctor/advice.cpp - advice made from its rule, its level, and the exit status a list of
// advice gives.
#include "advice.hpp"

#include <algorithm>
#include <utility>

namespace hugepage::doctor {

advice::advice(rule_id rule, std::string text, std::vector<std::string> facts, std::string cost,
               std::vector<std::string> lines)
    : message(std::move(text)),
      evidence(std::move(facts)),
      trade(std::move(cost)),
      commands(std::move(lines)),
      rule_(rule),
      level_(rule_of(rule).level) {}

const char* name_of(advice_level level) noexcept {
  return level == advice_level::note ? "note" : "warning";
}

bool has_warning(const std::vector<advice>& list) noexcept {
  return std::any_of(list.begin(), list.end(),
                     [](const advice& a) { return a.level() == advice_level::warning; });
}

exit_status exit_code_of(const std::vector<advice>& list) noexcept {
  return has_warning(list) ? exit_advice : exit_healthy;
}

}  // namespace hugepage::doctor
