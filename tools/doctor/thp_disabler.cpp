// tools/doctor/thp_disabler.cpp - who turned THP off for a process (thp_disabler.hpp).
#include "thp_disabler.hpp"

namespace hugepage::doctor {

const char* name_of(thp_disabler who) noexcept {
  switch (who) {
    case thp_disabler::none: return "none";
    case thp_disabler::process: return "process";
    case thp_disabler::inherited: return "inherited";
    case thp_disabler::unknown: return "unknown";
  }
  return "unknown";
}

thp_disabler thp_disabler_of(std::optional<bool> thp_enabled,
                             std::optional<bool> parent_thp_enabled) noexcept {
  if (!thp_enabled) return thp_disabler::unknown;
  if (*thp_enabled) return thp_disabler::none;
  // PR_SET_THP_DISABLE survives fork and exec: a parent with it set passed it down.
  if (!parent_thp_enabled) return thp_disabler::unknown;
  return *parent_thp_enabled ? thp_disabler::process : thp_disabler::inherited;
}

}  // namespace hugepage::doctor
