// tools/doctor/allocator_settings.hpp - an allocator's huge page settings from its environment
// (allocator_settings.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "allocator_detect.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

/// Works out the allocator's hugepage settings from its name and environment. Pure.
allocator_report describe_allocator(const allocator_guess& guess, bool environ_readable,
                                    std::vector<std::pair<std::string, std::string>> settings,
                                    bool environ_overwritten = false);

}  // namespace hugepage::doctor
