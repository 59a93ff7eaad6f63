// tools/doctor/advise_pool.cpp - hugetlb pools in advice: why one is short, a size the machine can
// hold, the commands that set it now and at boot.
#include <fmt/format.h>

#include <algorithm>

#include "advise_parts.hpp"
#include "hugepage/refusal.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

constexpr const char* sysctl_conf = "/etc/sysctl.d/90-hugepage-doctor-nr_hugepages.conf";

}  // namespace

std::string pool_file(std::size_t page_bytes) {
  return pool_directory(page_bytes, {}) + "nr_hugepages";
}

// Something wanted more of a pool than it holds: surplus pages at the overcommit limit, buddy
// allocations for the pool that failed, or reservations beyond the free pages.
std::vector<std::string> pool_shortage_evidence(const system_report& s, const hugetlb_pool& pool) {
  std::vector<std::string> why;
  const std::uint64_t fail = counter(s, "htlb_buddy_alloc_fail");
  if (fail > 0 && pool.overcommit.value_or(0) > 0) {
    why.push_back(
        fmt::format("htlb_buddy_alloc_fail {} (/proc/vmstat): surplus pages were "
                    "wanted and could not be allocated",
                    fail));
  }
  if (pool.overcommit.value_or(0) > 0 && pool.surplus.value_or(0) >= *pool.overcommit) {
    why.push_back(fmt::format("surplus {} = nr_overcommit_hugepages {}: overcommit used up",
                              pool.surplus.value_or(0), *pool.overcommit));
  }
  if (pool.reserved.value_or(0) > pool.free.value_or(0)) {
    why.push_back(fmt::format("resv_hugepages {} > free_hugepages {}", pool.reserved.value_or(0),
                              pool.free.value_or(0)));
  }
  for (const hugetlb_limit& limit : s.cgroup.limits) {
    if (limit.page_bytes == pool.page_bytes && limit.refused.value_or(0) > 0) {
      why.push_back(fmt::format("hugetlb cgroup {} refused {} time{} ({} {})", limit.directory,
                                *limit.refused, *limit.refused == 1 ? "" : "s",
                                limit.version == "v2" ? "events max" : "failcnt", *limit.refused));
    }
  }
  return why;
}

// A pool size the machine can hold: all pools together within pool_memory_cap() of MemTotal (the
// cap the library's messages keep), never less than the pool has now. nullopt when even one more
// page would pass that.
std::optional<std::uint64_t> capped_pool_target(const system_report& s, std::size_t page_bytes,
                                                std::uint64_t total, std::uint64_t wanted) {
  if (const auto mem = meminfo(s, "MemTotal"); mem && page_bytes > 0) {
    std::uint64_t other_pools = 0;
    for (const hugetlb_pool& pool : s.pools) {
      if (!pool.node && pool.page_bytes != page_bytes) {
        other_pools += pool.total.value_or(0) * pool.page_bytes;
      }
    }
    const std::uint64_t room = pool_memory_cap(*mem);
    wanted = std::min(wanted, room > other_pools ? (room - other_pools) / page_bytes : 0);
  }
  if (wanted <= total) return std::nullopt;
  return wanted;
}

// Commands that set a pool's size now and at boot: vm.nr_hugepages covers the default size (now
// through sysctl -w, as the library's refusal messages print it; at boot through sysctl.d);
// other sizes only through the kernel command line or the sysfs file.
std::vector<std::string> pool_commands(const system_report& s, std::size_t page_bytes,
                                       std::uint64_t target) {
  // The default size is Hugepagesize in /proc/meminfo; without it, the smallest pool's.
  const auto hugepagesize = meminfo(s, "Hugepagesize");
  const bool default_size = hugepagesize
                                ? *hugepagesize == page_bytes
                                : !s.pools.empty() && s.pools.front().page_bytes == page_bytes;
  std::vector<std::string> out{
      pool_resize_command(page_bytes, target, default_size ? page_bytes : 0)};
  if (default_size) {
    out.push_back(file_command(sysctl_conf, {fmt::format("vm.nr_hugepages = {}", target)}));
  } else {
    out.push_back(file_command(tmpfiles_conf(pool_file(page_bytes)),
                               {fmt::format("w {} - - - - {}", pool_file(page_bytes), target)}));
  }
  return out;
}

}  // namespace hugepage::doctor
