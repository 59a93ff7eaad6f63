// tools/doctor/system_report.hpp - the machine as the doctor sees it: THP and pool settings, free
// blocks, counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hugepage/page_size.hpp"
#include "hugepage/system.hpp"
#include "hugetlb_cgroup.hpp"

namespace hugepage::doctor {

/// Free memory and the part of it in blocks large enough for a huge page, in one zone.
struct zone_readiness {
  int node = 0;
  std::string zone;
  std::uint64_t free_bytes = 0;
  std::uint64_t huge_ready_bytes = 0;  ///< free bytes in blocks of at least the THP size
  std::uint64_t huge_blocks = 0;       ///< THP-sized blocks the free lists hold
};

/// The THP and compaction counters from /proc/vmstat that the doctor reports.
inline constexpr const char* vmstat_counters[] = {
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_split_page",
    "thp_deferred_split_page",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "htlb_buddy_alloc_success",
    "htlb_buddy_alloc_fail",
    "thp_underused_split_page",
};

/// One multi-size THP size: the library's (system.hpp, read_mthp_sizes()).
using hugepage::mthp_size;

/// The machine as the doctor sees it.
struct system_report {
  std::string kernel_release;
  thp_settings thp;
  std::vector<hugetlb_pool> pools;       ///< system-wide, ascending page size
  std::vector<hugetlb_pool> node_pools;  ///< per NUMA node (empty on machines without nodes)
  std::size_t base_page_bytes = 4096;
  std::size_t thp_bytes = 2 * units::mib;
  std::optional<std::vector<zone_readiness>> zones;  ///< empty: buddyinfo unreadable
  std::map<std::string, std::uint64_t> vmstat;       ///< the counters above that exist here
  bool vmstat_readable = false;
  std::map<std::string, std::uint64_t> meminfo;  ///< bytes (kB lines) or counts
  bool meminfo_readable = false;
  cgroup_report cgroup;
  collapse_support collapse = collapse_support::unknown;
  bool hardware_counters = false;
  std::string counters_reason;  ///< why not, when hardware_counters is false
  std::vector<mthp_size> mthp;  ///< read_mthp_sizes() (system.hpp); empty before Linux 6.8
  /// x86: the CPU has 1 GiB pages (pdpe1gb in /proc/cpuinfo); nullopt: cannot tell.
  std::optional<bool> cpu_1g_pages;
  /// The options /dev/shm is mounted with (as /proc/mounts shows them: the mount's and the
  /// superblock's, from mountinfo), so that advice to make a huge= option persistent keeps them;
  /// nullopt when it is not a tmpfs mount here.
  std::optional<std::string> dev_shm_options;
};

}  // namespace hugepage::doctor
