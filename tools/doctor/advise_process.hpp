// tools/doctor/advise_process.hpp - the advice for a process (advise_process.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "advice.hpp"
#include "hugepage/page_size.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

/// Minimum anonymous memory before the doctor advises on a process's huge page use.
inline constexpr std::size_t process_advice_threshold = 512 * units::mib;

/// The advice for a process, given the system it runs on. Pure.
std::vector<advice> advise_process(const process_report& process, const system_report& system);

}  // namespace hugepage::doctor
