// tools/doctor/collect_system.cpp - the system report, from the live machine (or a root tree).
#include "collect_system.hpp"

#include <string_view>
#include <utility>

#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/kernel_memory.hpp"
#include "hugepage/os.hpp"
#include "hugepage/perf_counters.hpp"
#include "hugepage/system.hpp"
#include "hugetlb_cgroup.hpp"
#include "numa_files.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

system_report collect_system(const std::string& root, bool probe) {
  system_report s;
  // THP settings, pools and the kernel release come from the library's readers, under `root`.
  const system_state state = read_system_state(probe, root);
  s.kernel_release = state.kernel_release;
  s.thp = state.thp;
  s.pools = state.pools;
  s.collapse = state.collapse;
  s.base_page_bytes = os::base_page_size();
  s.thp_bytes = root.empty() ? thp_page_bytes() : valid_thp_bytes(s.thp.pmd_bytes);
  for (const int node : numa_nodes(root)) {
    for (const hugetlb_pool& pool : s.pools) {
      if (auto per_node = read_pool(pool.page_bytes, node, root)) s.node_pools.push_back(*per_node);
    }
  }

  if (const auto mounts = read_mountinfo(root)) {
    // A later mount over the same point hides an earlier one. The options as /proc/mounts shows
    // them: the mount's, then the superblock's after its "rw"/"ro".
    for (const mount_info& m : *mounts) {
      if (m.point != "/dev/shm") continue;
      if (m.fstype != "tmpfs") {
        s.dev_shm_options = std::nullopt;
        continue;
      }
      std::string options = m.options;
      const std::string_view super = m.super_options;
      const std::size_t comma = super.find(',');
      if (super.substr(0, comma) == "rw" || super.substr(0, comma) == "ro") {
        if (comma != std::string_view::npos) options += std::string(super.substr(comma));
      } else if (!super.empty()) {
        options += "," + std::string(super);
      }
      s.dev_shm_options = options;
    }
  }

  if (const auto buddyinfo = read_buddyinfo(root)) {
    std::size_t order = 0;
    while ((s.base_page_bytes << order) < s.thp_bytes && order < 40) ++order;
    std::vector<zone_readiness> zones;
    for (const buddy_zone& z : *buddyinfo) {
      zone_readiness r;
      r.node = z.node;
      r.zone = z.zone;
      r.free_bytes = z.free_bytes(s.base_page_bytes);
      r.huge_ready_bytes = z.free_bytes_from(order, s.base_page_bytes);
      r.huge_blocks = z.blocks_of(order);
      zones.push_back(r);
    }
    s.zones = std::move(zones);
  }
  if (const auto all = read_vmstat(root)) {
    s.vmstat_readable = true;
    for (const char* name : vmstat_counters) {
      if (const auto it = all->find(name); it != all->end()) s.vmstat.insert(*it);
    }
  }
  if (auto meminfo = read_meminfo(root)) {
    s.meminfo_readable = true;
    s.meminfo = std::move(*meminfo);
  }
  std::vector<std::size_t> sizes;
  for (const hugetlb_pool& pool : s.pools) sizes.push_back(pool.page_bytes);
  if (const auto cgroups = read_proc_cgroup(root)) {
    s.cgroup = hugetlb_cgroup_report(root, *cgroups, sizes);
  } else {
    s.cgroup.status = "/proc/self/cgroup unreadable";
  }
  // Multi-size THP (Linux 6.8+): one directory per size, with its own enabled and counters.
  s.mthp = read_mthp_sizes(root);
  if (const auto cpu = read_cpuinfo(root)) {
    // x86 names 1 GiB page support pdpe1gb; other architectures have no such flag.
    if (cpu->has_flags) s.cpu_1g_pages = cpu->has_flag("pdpe1gb");
  }

  const perf_counters counters({perf_event::dtlb_loads, perf_event::dtlb_load_misses});
  s.hardware_counters = counters.available(perf_event::dtlb_load_misses);
  if (!s.hardware_counters)
    s.counters_reason = counters.unavailable_reason(perf_event::dtlb_load_misses);
  return s;
}

}  // namespace hugepage::doctor
