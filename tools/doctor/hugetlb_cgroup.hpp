// tools/doctor/hugetlb_cgroup.hpp - the hugetlb cgroup limits of a process, for its report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "hugepage/kernel_files.hpp"

namespace hugepage::doctor {

/// The hugetlb limits of one page size in one cgroup. Bytes; std::nullopt: no limit ("max").
struct hugetlb_limit {
  std::size_t page_bytes = 0;
  std::string version;    ///< "v2" or "v1"
  std::string directory;  ///< the cgroup directory read
  bool has_max = false;   ///< the max file was readable
  std::optional<std::uint64_t> max;
  bool has_rsvd_max = false;  ///< the rsvd.max file was readable (Linux 5.7+)
  std::optional<std::uint64_t> rsvd_max;
  std::optional<std::uint64_t> current;  ///< usage now, when readable
  std::optional<std::uint64_t> rsvd_current;
  std::optional<std::uint64_t> refused;  ///< times the limit refused (v2 events "max", v1 failcnt)
};

/// What the doctor learned about hugetlb cgroups for one process.
struct cgroup_report {
  std::string status;  ///< "v2", "v1", or why nothing could be read
  std::string path;    ///< the process's cgroup path ("/" for the root)
  std::vector<hugetlb_limit> limits;
};

/// The hugetlb limits that apply to the cgroup named in `cgroup_file_text` (a /proc/PID/cgroup),
/// for each of `page_sizes`, under `root` ("" for the live system). The hierarchy is found as the
/// library finds it (cgroup_directories_of(), hugepage/cgroup.hpp) from
/// root/proc/self/mountinfo. v2: the cgroup's own files, and the ancestors below the root that
/// set a finite limit; v1: the cgroup's files. (hugetlb_cgroup.cpp)
cgroup_report hugetlb_cgroup_report(const std::string& root, std::string_view cgroup_file_text,
                                    const std::vector<std::size_t>& page_sizes);
/// The memory cgroup limit with the least headroom along the hierarchy of the cgroup named in
/// `cgroup_file_text` (a /proc/PID/cgroup), read under `root` as hugetlb_cgroup_report() reads:
/// v2 memory.max and memory.high against memory.current, v1 memory.limit_in_bytes against
/// memory.usage_in_bytes, by the version in use; file cache (memory.stat) counts as reclaimable.
/// nullopt when no level sets a limit or none can be read.
std::optional<cgroup_limit> memory_cgroup_limit(const std::string& root,
                                                std::string_view cgroup_file_text);

/// hugetlb_cgroup_report() over the parsed /proc/PID/cgroup.
cgroup_report hugetlb_cgroup_report(const std::string& root,
                                    const std::vector<proc_cgroup_line>& cgroups,
                                    const std::vector<std::size_t>& page_sizes);

}  // namespace hugepage::doctor
