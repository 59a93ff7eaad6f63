// tools/doctor/cgroup_membership.hpp - where a process sits for hugetlb, from /proc/<pid>/cgroup
// (cgroup_membership.cpp).
//
// The library parses the file and picks a controller's paths (parse_proc_cgroup() and
// cgroup_paths_of(), hugepage/kernel_files.hpp); this gives the two the doctor names: the v2 path
// and the v1 hugetlb path. It takes the text, so tests feed stored samples; a hierarchy the file
// does not list is an empty optional.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hugepage::doctor {

/// Where a process sits in the cgroup hierarchies (/proc/<pid>/cgroup).
struct cgroup_membership {
  std::optional<std::string> unified;  ///< v2 path ("0::/system.slice/x.service")
  std::optional<std::string> hugetlb;  ///< v1 path of the hugetlb controller
};

/// Where /proc/<pid>/cgroup text puts a process for hugetlb (parse_proc_cgroup() and
/// cgroup_paths_of(), kernel_files.hpp).
cgroup_membership parse_cgroup_file(std::string_view text);

}  // namespace hugepage::doctor
