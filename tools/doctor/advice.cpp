// tools/doctor/advice.cpp - the rules that turn a report into advice.
//
// Each rule is a few lines: a condition on the report, one sentence saying what it costs, and the
// command that fixes it. Rules never read the machine, so each has a test built from a
// hand-made report (tools/test/doctor_advice_test.cpp). Commands change runtime settings only;
// making them persistent (sysctl.d, kernel command line) is left to the reader's configuration
// management.
#include <fmt/format.h>

#include <algorithm>

#include "report.hpp"

namespace hugepage::doctor {

namespace {

constexpr const char* thp_dir = "/sys/kernel/mm/transparent_hugepage";

std::string pool_file(std::size_t page_bytes) {
  return fmt::format("/sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages", page_bytes / 1024);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

// Zones whose free memory serves ordinary allocations (not the 16 MiB ISA DMA zone).
bool counts_for_readiness(const zone_readiness& z) { return z.zone != "DMA"; }

}  // namespace

std::vector<advice> advise_system(const system_report& s) {
  std::vector<advice> out;
  const std::string enabled = s.thp.enabled.value_or("");
  const std::string defrag = s.thp.defrag.value_or("");

  if (enabled == "never") {
    out.push_back({"thp_never",
                   "THP is off (enabled=never): MADV_HUGEPAGE, thp_allocator and allocators' THP "
                   "options all get base pages",
                   fmt::format("echo madvise > {}/enabled", thp_dir)});
  }

  // khugepaged fills up to max_ptes_none empty PTEs of a 2 MiB range to collapse it: with the
  // default (511 of 512) one touched 4 KiB page can become 2 MiB of RSS.
  const std::uint64_t per_huge = s.thp_bytes / std::max<std::size_t>(s.base_page_bytes, 1);
  if (enabled != "never" && !enabled.empty() && s.thp.max_ptes_none &&
      *s.thp.max_ptes_none >= per_huge / 2 && per_huge > 1) {
    const std::uint64_t used = per_huge - std::min(per_huge - 1, *s.thp.max_ptes_none);
    out.push_back(
        {"max_ptes_none_bloat",
         fmt::format("khugepaged max_ptes_none={}: it may collapse a {} range in which only {} "
                     "base page{} used, inflating the RSS of sparse THP memory up to {}x",
                     *s.thp.max_ptes_none, format_bytes(s.thp_bytes), used,
                     used == 1 ? " is" : "s are", per_huge / used),
         fmt::format("echo {} > {}/khugepaged/max_ptes_none", per_huge / 8, thp_dir)});
  }

  if (enabled == "always" && defrag == "always") {
    out.push_back({"defrag_always_stalls",
                   "THP enabled=always with defrag=always: any page fault may stall in direct "
                   "compaction",
                   fmt::format("echo defer+madvise > {}/defrag", thp_dir)});
  }
  if (enabled != "never" && !enabled.empty() && defrag == "never") {
    out.push_back({"defrag_never",
                   "THP defrag=never: MADV_HUGEPAGE faults do not compact, so advised memory "
                   "silently gets base pages once memory is fragmented",
                   fmt::format("echo madvise > {}/defrag", thp_dir)});
  }

  for (const hugetlb_pool& pool : s.pools) {
    const std::uint64_t total = pool.total.value_or(0);
    const auto available = pool.available();
    if (total == 0 || !available || *available != 0) continue;
    const std::uint64_t target = total + std::max<std::uint64_t>(total / 4, 1);
    out.push_back({"pool_exhausted",
                   fmt::format("the {} hugetlb pool is used up ({} pages, none available): new "
                               "MAP_HUGETLB mappings of that size fail with ENOMEM",
                               format_bytes(pool.page_bytes), total),
                   fmt::format("echo {} > {}", target, pool_file(pool.page_bytes))});
  }

  if (s.zones) {
    std::uint64_t free = 0, ready = 0;
    for (const zone_readiness& z : *s.zones) {
      if (!counts_for_readiness(z)) continue;
      free += z.free_bytes;
      ready += z.huge_ready_bytes;
    }
    if (free >= (std::uint64_t{256} << 20) && ready < free / 10) {
      out.push_back(
          {"fragmented",
           fmt::format("memory is fragmented: {} free, only {} of it in {} blocks; new "
                       "THP faults and pool growth will fall back or fail",
                       format_bytes(free), format_bytes(ready), format_bytes(s.thp_bytes)),
           "echo 1 > /proc/sys/vm/compact_memory"});
    }
  }

  const auto counter = [&](const char* name) -> std::uint64_t {
    const auto it = s.vmstat.find(name);
    return it == s.vmstat.end() ? 0 : it->second;
  };
  const std::uint64_t fault_alloc = counter("thp_fault_alloc");
  const std::uint64_t fault_fallback = counter("thp_fault_fallback");
  if (fault_fallback >= 100 && fault_fallback * 10 > fault_alloc + fault_fallback) {
    out.push_back(
        {"thp_fault_fallback",
         fmt::format("{} of THP page faults since boot fell back to base pages ({} of {}): "
                     "the kernel could not find free {} blocks",
                     percent(static_cast<double>(fault_fallback) /
                             static_cast<double>(fault_alloc + fault_fallback)),
                     fault_fallback, fault_alloc + fault_fallback, format_bytes(s.thp_bytes)),
         defrag == "never" || defrag == "defer"
             ? fmt::format("echo defer+madvise > {}/defrag", thp_dir)
             : std::string("echo 1 > /proc/sys/vm/compact_memory")});
  }

  for (const hugetlb_limit& limit : s.cgroup.limits) {
    const std::string file =
        fmt::format("/sys/fs/cgroup{}/hugetlb.{}.",
                    limit.directory.rfind("/sys/fs/cgroup", 0) == 0 ? limit.directory.substr(14)
                                                                    : limit.directory,
                    cgroup_size_name(limit.page_bytes));
    std::uint64_t pool_bytes = 0;
    for (const hugetlb_pool& pool : s.pools) {
      if (pool.page_bytes == limit.page_bytes)
        pool_bytes = pool.total.value_or(0) * pool.page_bytes;
    }
    if (limit.has_max && limit.max && *limit.max < pool_bytes) {
      out.push_back(
          {"cgroup_limit_below_pool",
           fmt::format("the hugetlb cgroup {} caps {} pages at {}, below the pool's {}",
                       limit.directory, format_bytes(limit.page_bytes), format_bytes(*limit.max),
                       format_bytes(pool_bytes)),
           fmt::format("echo max > {}{}", file, limit.version == "v2" ? "max" : "limit_in_bytes")});
    }
    if (limit.version == "v2" && limit.has_max && limit.max && limit.has_rsvd_max &&
        !limit.rsvd_max) {
      out.push_back(
          {"cgroup_limit_at_fault",
           fmt::format("the hugetlb cgroup {} limits {} pages at fault time only: a "
                       "process over {} gets SIGBUS on first touch instead of ENOMEM "
                       "from mmap",
                       limit.directory, format_bytes(limit.page_bytes), format_bytes(*limit.max)),
           fmt::format("echo {} > {}rsvd.max", *limit.max, file)});
    }
  }
  return out;
}

std::vector<advice> advise_process(const process_report& p, const system_report& s) {
  std::vector<advice> out;
  const std::string who = p.name.empty() ? fmt::format("pid {}", p.pid) : p.name;
  const std::size_t anon = p.anonymous + p.hugetlb_total();
  const std::string enabled = s.thp.enabled.value_or("unknown");

  if (anon >= process_advice_threshold && p.huge_fraction() < 0.5) {
    const std::string head = fmt::format("{} anonymous memory, {} huge; ", format_bytes(anon),
                                         percent(p.huge_fraction()));
    const allocator_report& a = p.allocator;
    if (p.thp_enabled && !*p.thp_enabled) {
      out.push_back(
          {"process_thp_disabled",
           head + who + " disabled THP for itself with prctl(PR_SET_THP_DISABLE)",
           fmt::format("restart {} without PR_SET_THP_DISABLE (check its launcher)", who)});
    } else if (enabled == "never") {
      out.push_back({"thp_never", head + "THP is off (enabled=never)",
                     fmt::format("echo madvise > {}/enabled", thp_dir)});
    } else if (enabled == "madvise" && !a.asks_for_huge) {
      const std::string tail = fmt::format("THP is madvise and {} runs without ", a.guess.name);
      if (a.guess.name == "jemalloc") {
        out.push_back({"jemalloc_without_thp",
                       head + tail + "thp: its heap is never advised, so it stays on base pages",
                       fmt::format("MALLOC_CONF=thp:always,metadata_thp:auto {}", who)});
      } else if (a.guess.name == "glibc") {
        out.push_back(
            {"glibc_without_hugetlb_tunable",
             head + tail + "glibc.malloc.hugetlb: malloc never advises THP (glibc 2.35+ can)",
             fmt::format("GLIBC_TUNABLES=glibc.malloc.hugetlb=1 {}", who)});
      } else if (a.guess.name == "mimalloc") {
        out.push_back({"mimalloc_without_large_pages",
                       head + tail + "large OS pages: its segments are not advised",
                       fmt::format("MIMALLOC_ALLOW_LARGE_OS_PAGES=1 {}", who)});
      } else {
        out.push_back({"allocator_without_thp",
                       head + fmt::format("THP is madvise and {} has no THP option: nothing "
                                          "advises its heap",
                                          a.guess.name),
                       fmt::format("echo always > {}/enabled  (or put the big containers on "
                                   "hugepage::thp_allocator)",
                                   thp_dir)});
      }
    } else {
      out.push_back(
          {"huge_pages_not_obtained",
           head + fmt::format("THP is {} and {} asks for huge pages, yet the kernel did not "
                              "provide them: free memory is fragmented or the memory is sparse",
                              enabled, p.allocator.guess.name),
           "echo 1 > /proc/sys/vm/compact_memory"});
    }
  }

  for (const auto& [page_bytes, bytes] : p.hugetlb) {
    for (const hugetlb_pool& pool : s.pools) {
      if (pool.page_bytes != page_bytes) continue;
      const std::uint64_t total = pool.total.value_or(0);
      const auto available = pool.available();
      if (!available || *available != 0) continue;
      out.push_back({"pool_exhausted",
                     fmt::format("{} holds {} of {} hugetlb pages and the pool has none left: its "
                                 "next hugetlb mapping fails (or falls back to base pages)",
                                 who, format_bytes(bytes), format_bytes(page_bytes)),
                     fmt::format("echo {} > {}", total + std::max<std::uint64_t>(total / 4, 1),
                                 pool_file(page_bytes))});
    }
  }
  return out;
}

}  // namespace hugepage::doctor
