// tools/doctor/thp_disabler.hpp - who turned THP off for a process (thp_disabler.cpp).
#pragma once

#include <optional>

namespace hugepage::doctor {

/// Who turned THP off for a process (status THP_enabled: 0). PR_SET_THP_DISABLE is inherited
/// across fork and exec, so a parent with THP off too means the setting came from above.
enum class thp_disabler {
  none,       ///< THP is not disabled for the process
  process,    ///< the process itself (its parent has THP on; a known runtime that does so)
  inherited,  ///< its parent has THP off too: a launcher, unit or shell set it
  unknown,    ///< the parent could not be read
};

/// "none", "process", "inherited" or "unknown".
const char* name_of(thp_disabler who) noexcept;

/// Who disabled THP, from status THP_enabled of the process and of its parent (nullopt:
/// unreadable or not known, as for stored files). Pure.
thp_disabler thp_disabler_of(std::optional<bool> thp_enabled,
                             std::optional<bool> parent_thp_enabled) noexcept;

}  // namespace hugepage::doctor
