// tools/doctor/collect_system.hpp - reading the system report from the live machine or a copy of
// its tree (collect_system.cpp).
#pragma once

#include <string>

#include "system_report.hpp"

namespace hugepage::doctor {

/// Collects the system report from `root` ("" for the live system, else a copy of the tree: every
/// file is read under it, through the library's readers where it has one; kernel_files.hpp).
/// `probe_collapse` runs probe_collapse() on the live system.
system_report collect_system(const std::string& root = "", bool probe_collapse = true);

}  // namespace hugepage::doctor
