// tools/doctor/collect.cpp - building the system and process reports from the live machine.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string_view>

#include "hugepage/os.hpp"
#include "hugepage/perf_counters.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "report.hpp"

namespace hugepage::doctor {

// ---- system ------------------------------------------------------------------------------------

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
    s.cgroup = read_hugetlb_cgroup(root, *text, sizes);
  } else {
    s.cgroup.status = "/proc/self/cgroup unreadable";
  }

  const perf_counters counters({perf_event::dtlb_loads, perf_event::dtlb_load_misses});
  s.hardware_counters = counters.available(perf_event::dtlb_load_misses);
  if (!s.hardware_counters)
    s.counters_reason = counters.unavailable_reason(perf_event::dtlb_load_misses);
  return s;
}

// ---- process -----------------------------------------------------------------------------------

namespace {

bool is_anonymous(const mapping_info& m) {
  if (m.is_hugetlb()) return true;
  const std::string_view name = m.name;
  return name.empty() || name == "[heap]" || name == "[stack]" || name.rfind("[anon", 0) == 0;
}

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// The value of `key` in a jemalloc option string ("thp:always,metadata_thp:auto"), or "".
std::string jemalloc_option(std::string_view conf, std::string_view key) {
  while (!conf.empty()) {
    const auto comma = conf.find(',');
    const std::string_view item = conf.substr(0, comma);
    conf.remove_prefix(comma == std::string_view::npos ? conf.size() : comma + 1);
    const auto colon = item.find(':');
    if (colon != std::string_view::npos && item.substr(0, colon) == key) {
      return std::string(item.substr(colon + 1));
    }
  }
  return {};
}

}  // namespace

process_report summarize_mappings(const std::vector<mapping_info>& mappings, std::size_t top) {
  process_report p;
  p.mappings = mappings.size();
  std::vector<anon_mapping> anon;
  for (const mapping_info& m : mappings) {
    p.rss += m.rss;
    p.anonymous += m.anonymous;
    p.thp += m.anon_huge + m.shmem_huge + m.file_huge;  // every PMD-mapped THP extends TLB reach
    if (m.advised_huge()) p.thp_advised += m.size();
    const std::size_t hugetlb = m.private_hugetlb + m.shared_hugetlb;
    if (m.is_hugetlb()) p.hugetlb[m.kernel_page_bytes] += hugetlb;
    if (!is_anonymous(m)) continue;
    anon_mapping a;
    a.start = m.start;
    a.size = m.size();
    a.kernel_page_bytes = m.kernel_page_bytes;
    a.resident = m.is_hugetlb() ? hugetlb : m.rss;
    a.huge = m.is_hugetlb() ? hugetlb : m.anon_huge;
    a.name = m.name;
    a.flags = m.has_flag("hg") ? "hg" : m.has_flag("nh") ? "nh" : "";
    anon.push_back(std::move(a));
  }
  p.base = p.rss >= p.thp ? p.rss - p.thp : 0;
  const std::size_t n = std::min(top, anon.size());
  std::partial_sort(anon.begin(), anon.begin() + static_cast<std::ptrdiff_t>(n), anon.end(),
                    [](const anon_mapping& a, const anon_mapping& b) {
                      return a.resident != b.resident ? a.resident > b.resident : a.size > b.size;
                    });
  anon.resize(n);
  p.largest = std::move(anon);
  return p;
}

allocator_report describe_allocator(const allocator_guess& guess, bool environ_readable,
                                    std::vector<std::pair<std::string, std::string>> settings) {
  allocator_report a;
  a.guess = guess;
  a.environ_readable = environ_readable;
  a.settings = std::move(settings);
  const auto env = [&](std::string_view name) -> std::optional<std::string> {
    for (const auto& [key, value] : a.settings) {
      if (key == name) return value;
    }
    return std::nullopt;
  };
  if (!environ_readable) {
    a.hugepage_mode = "unknown (environment unreadable)";
    return a;
  }
  if (guess.name == "jemalloc") {
    // jemalloc 5.1+: thp:always advises every extent, thp:never forbids, default follows the
    // system; metadata_thp covers its own metadata. Builds with a prefix read _RJEM_MALLOC_CONF.
    const std::string conf = env("MALLOC_CONF").value_or(env("_RJEM_MALLOC_CONF").value_or(""));
    const std::string thp = jemalloc_option(conf, "thp");
    a.hugepage_mode = thp.empty() ? "thp:default" : "thp:" + thp;
    a.asks_for_huge = thp == "always";
  } else if (guess.name == "glibc") {
    // glibc 2.35+: glibc.malloc.hugetlb=1 madvises THP for the heap and large mmaps, =2 maps
    // from the hugetlb pool.
    const std::string tunables = env("GLIBC_TUNABLES").value_or("");
    if (contains(tunables, "glibc.malloc.hugetlb=1")) {
      a.hugepage_mode = "glibc.malloc.hugetlb=1 (THP madvise)";
      a.asks_for_huge = true;
    } else if (contains(tunables, "glibc.malloc.hugetlb=2")) {
      a.hugepage_mode = "glibc.malloc.hugetlb=2 (hugetlb pool)";
      a.asks_for_huge = true;
    } else {
      a.hugepage_mode = "off";
    }
  } else if (guess.name == "mimalloc") {
    // mimalloc 2.x: MIMALLOC_ALLOW_LARGE_OS_PAGES (1.x: MIMALLOC_LARGE_OS_PAGES) advises THP;
    // MIMALLOC_RESERVE_HUGE_OS_PAGES reserves 1 GiB pages.
    const auto on = [&](const char* name) {
      const auto value = env(name);
      return value && !value->empty() && *value != "0" && *value != "false";
    };
    if (on("MIMALLOC_RESERVE_HUGE_OS_PAGES") || on("MIMALLOC_RESERVE_HUGE_OS_PAGES_AT")) {
      a.hugepage_mode = "reserve_huge_os_pages";
      a.asks_for_huge = true;
    } else if (on("MIMALLOC_ALLOW_LARGE_OS_PAGES") || on("MIMALLOC_LARGE_OS_PAGES")) {
      a.hugepage_mode = "allow_large_os_pages";
      a.asks_for_huge = true;
    } else {
      a.hugepage_mode = "off";
    }
  } else if (guess.name == "tcmalloc") {
    // gperftools tcmalloc has no THP option; Google's TCMalloc (usually linked statically) is
    // hugepage-aware by default. A shared libtcmalloc is gperftools.
    a.hugepage_mode = "none (gperftools has no THP option)";
  } else {
    a.hugepage_mode = "unknown";
  }
  return a;
}

process_report collect_process(pid_t pid, std::size_t top, std::error_code& ec,
                               std::string& error) {
  const auto started = std::chrono::steady_clock::now();
  const std::string dir = "/proc/" + std::to_string(pid);
  // smaps first: it is the one file we cannot do without, and its errno says it all.
  const std::vector<mapping_info> mappings = read_smaps(pid, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::no_such_process) {
      error = "no process with pid " + std::to_string(pid);
    } else if (ec == std::errc::permission_denied || ec == std::errc::operation_not_permitted) {
      error = "cannot read " + dir + "/smaps: " + ec.message() +
              " (run as root or as the user that owns pid " + std::to_string(pid) + ")";
    } else {
      error = "cannot read " + dir + "/smaps: " + ec.message();
    }
    return {};
  }
  process_report p = summarize_mappings(mappings, top);
  p.pid = pid;
  // The rest is best effort: the process may exit meanwhile, a file may be missing.
  if (const auto status = read_text("", dir + "/status")) {
    p.name = status_text_field(*status, "Name").value_or("");
    const auto fields = parse_meminfo(*status);
    if (const auto it = fields.find("THP_enabled"); it != fields.end()) {
      p.thp_enabled = it->second != 0;
    }
  }
  // status Name is the 15-byte comm; argv[0] from cmdline is what an operator typed.
  if (const auto cmdline = read_text("", dir + "/cmdline"); cmdline && !cmdline->empty()) {
    const std::string argv0 = cmdline->substr(0, cmdline->find('\0'));
    const auto slash = argv0.rfind('/');
    const std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
    if (!base.empty()) p.name = base;
  }
  std::vector<std::string> paths;
  for (const mapping_info& m : mappings) {
    if (!m.name.empty() && m.name.front() == '/' &&
        std::find(paths.begin(), paths.end(), m.name) == paths.end()) {
      paths.push_back(m.name);
    }
  }
  const auto environ = read_text("", dir + "/environ");
  p.allocator = describe_allocator(detect_allocator(paths), environ.has_value(),
                                   environ ? parse_allocator_environ(*environ)
                                           : std::vector<std::pair<std::string, std::string>>{});
  std::vector<std::size_t> sizes;
  for (const std::size_t bytes : pool_page_sizes()) sizes.push_back(bytes);
  if (const auto text = read_text("", dir + "/cgroup")) {
    p.cgroup = read_hugetlb_cgroup("", *text, sizes);
  } else {
    p.cgroup.status = dir + "/cgroup unreadable";
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return p;
}

}  // namespace hugepage::doctor
