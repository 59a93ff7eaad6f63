// tools/doctor/runtime_detect.hpp - recognising a runtime or server and its huge page settings
// (runtime_detect.cpp).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "process_report.hpp"

namespace hugepage::doctor {

/// Recognises a runtime or server from its mapped files, and reads its huge page settings from
/// `cmdline` (NUL-separated) and its environment `settings` (the java options variables). Pure.
runtime_report detect_runtime(const std::vector<std::string>& paths, std::string_view cmdline,
                              const std::vector<std::pair<std::string, std::string>>& settings);

}  // namespace hugepage::doctor
