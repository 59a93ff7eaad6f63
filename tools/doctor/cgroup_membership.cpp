// tools/doctor/cgroup_membership.cpp - where /proc/<pid>/cgroup puts a process for hugetlb,
// through the library's parser.
#include "cgroup_membership.hpp"

#include "hugepage/kernel_files.hpp"

namespace hugepage::doctor {

cgroup_membership parse_cgroup_file(std::string_view text) {
  const cgroup_paths paths = cgroup_paths_of(parse_proc_cgroup(text), "hugetlb");
  cgroup_membership m;
  m.unified = paths.v2;
  m.hugetlb = paths.v1;
  return m;
}

}  // namespace hugepage::doctor
