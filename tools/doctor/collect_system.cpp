// tools/doctor/collect_system.cpp - the system report, from the live machine (or a root tree).
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "hugepage/os.hpp"
#include "hugepage/perf_counters.hpp"
#include "hugepage/system.hpp"
#include "report.hpp"

namespace hugepage::doctor {

system_report collect_system(const std::string& root, bool probe) {
  system_report s;
  // THP settings and pools come from the library, which reads the live /sys.
  const system_state state = read_system_state(probe);
  s.kernel_release = state.kernel_release;
  s.thp = state.thp;
  s.pools = state.pools;
  s.collapse = state.collapse;
  s.base_page_bytes = os::base_page_size();
  s.thp_bytes = thp_page_bytes();
  for (const int node : numa_nodes(root)) {
    for (const hugetlb_pool& pool : s.pools) {
      if (auto per_node = read_pool(pool.page_bytes, node)) s.node_pools.push_back(*per_node);
    }
  }

  if (const auto text = read_text(root, "/proc/self/mounts")) {
    // "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0"; a later mount over the same point hides an
    // earlier one.
    std::string_view rest = *text;
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      const std::string line(rest.substr(0, nl));
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      char point[256], type[64], options[1024];
      if (std::sscanf(line.c_str(), "%*s %255s %63s %1023s", point, type, options) == 3 &&
          std::string_view(point) == "/dev/shm") {
        s.dev_shm_options =
            std::string_view(type) == "tmpfs" ? std::optional<std::string>(options) : std::nullopt;
      }
    }
  }

  if (const auto text = read_text(root, "/proc/buddyinfo")) {
    std::size_t order = 0;
    while ((s.base_page_bytes << order) < s.thp_bytes && order < 40) ++order;
    std::vector<zone_readiness> zones;
    for (const buddy_zone& z : parse_buddyinfo(*text)) {
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
  if (const auto text = read_text(root, "/proc/vmstat")) {
    s.vmstat_readable = true;
    const auto all = parse_vmstat(*text);
    for (const char* name : vmstat_counters) {
      if (const auto it = all.find(name); it != all.end()) s.vmstat.insert(*it);
    }
  }
  if (const auto text = read_text(root, "/proc/meminfo")) {
    s.meminfo_readable = true;
    s.meminfo = parse_meminfo(*text);
  }
  std::vector<std::size_t> sizes;
  for (const hugetlb_pool& pool : s.pools) sizes.push_back(pool.page_bytes);
  if (const auto text = read_text(root, "/proc/self/cgroup")) {
    s.cgroup = hugetlb_cgroup_report(root, *text, sizes);
  } else {
    s.cgroup.status = "/proc/self/cgroup unreadable";
  }

  // Multi-size THP (Linux 6.8+): one directory per size, with its own enabled and counters.
  const std::string thp_dir = root + "/sys/kernel/mm/transparent_hugepage";
  if (DIR* d = ::opendir(thp_dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      unsigned long kb = 0;
      char tail[8] = {};
      if (std::sscanf(e->d_name, "hugepages-%lukB%7s", &kb, tail) != 1 || kb == 0) continue;
      mthp_size m;
      m.page_bytes = static_cast<std::size_t>(kb) * 1024;
      const std::string dir = std::string("/sys/kernel/mm/transparent_hugepage/") + e->d_name;
      // "always inherit madvise [never]": the bracketed word is the setting. Sizes below the
      // anonymous minimum (8 KiB on x86) have shmem_enabled only.
      const auto bracketed = [&](const std::string& file) -> std::string {
        const auto text = read_text(root, dir + "/" + file);
        return text ? detail::selected_mode(*text) : std::string();
      };
      m.enabled = bracketed("enabled");
      m.shmem_enabled = bracketed("shmem_enabled");
      for (const char* stat :
           {"anon_fault_alloc", "anon_fault_fallback", "anon_fault_fallback_charge", "shmem_alloc",
            "shmem_fallback", "swpout", "swpout_fallback", "split", "split_failed"}) {
        if (const auto text = read_text(root, dir + "/stats/" + stat)) {
          m.stats[stat] = std::strtoull(text->c_str(), nullptr, 10);
        }
      }
      s.mthp.push_back(std::move(m));
    }
    ::closedir(d);
    std::sort(s.mthp.begin(), s.mthp.end(),
              [](const mthp_size& a, const mthp_size& b) { return a.page_bytes < b.page_bytes; });
  }
  if (const auto cpuinfo = read_text(root, "/proc/cpuinfo")) {
    // x86 names 1 GiB page support pdpe1gb; other architectures have no such flag.
    const auto flags = cpuinfo->find("\nflags");
    if (flags != std::string::npos) {
      const auto end = cpuinfo->find('\n', flags + 1);
      const std::string line = cpuinfo->substr(flags, end - flags);
      s.cpu_1g_pages = line.find(" pdpe1gb") != std::string::npos;
    }
  }

  const perf_counters counters({perf_event::dtlb_loads, perf_event::dtlb_load_misses});
  s.hardware_counters = counters.available(perf_event::dtlb_load_misses);
  if (!s.hardware_counters)
    s.counters_reason = counters.unavailable_reason(perf_event::dtlb_load_misses);
  return s;
}

}  // namespace hugepage::doctor
