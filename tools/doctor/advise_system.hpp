// tools/doctor/advise_system.hpp - the advice for a machine (advise_system.cpp).
#pragma once

#include <vector>

#include "advice.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

/// The advice for a system: each rule of the table in advise_system.cpp in turn. Pure.
std::vector<advice> advise_system(const system_report& system);

}  // namespace hugepage::doctor
