// tools/test/doctor_advise_support.hpp - hand-made system and process states for the advice rule
// tests, and readers of the advice they get.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "advice.hpp"
#include "allocator_settings.hpp"
#include "hugepage/page_size.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor::advice_test {

using hugepage::units::gib;
using hugepage::units::mib;

// A machine with nothing to advise: THP madvise, conservative khugepaged, a pool with room,
// unfragmented memory, no THP fallbacks, no cgroup limits.
inline system_report healthy_system() {
  system_report s;
  s.kernel_release = "6.8.0-test";
  s.thp.enabled = "madvise";
  s.thp.defrag = "madvise";
  s.thp.shmem_enabled = "never";
  s.thp.max_ptes_none = 64;
  hugetlb_pool pool;
  pool.page_bytes = 2 * mib;
  pool.total = 600;
  pool.free = 500;
  pool.reserved = 0;
  pool.surplus = 0;
  pool.overcommit = 0;
  s.pools.push_back(pool);
  s.zones = std::vector<zone_readiness>{{0, "Normal", 4 * gib, 3 * gib, 1536}};
  s.vmstat = {{"thp_fault_alloc", 10000}, {"thp_fault_fallback", 10}};
  s.vmstat_readable = true;
  s.meminfo = {{"MemTotal", 32 * gib}, {"Hugepagesize", 2 * mib}};
  s.meminfo_readable = true;
  s.collapse = collapse_support::works;
  return s;
}

// A stock kernel as installed: THP always (Debian) or madvise, defrag madvise, khugepaged's
// max_ptes_none at its default 511, and a pool sized exactly for what uses it, all in use.
inline system_report stock_system(const char* enabled) {
  system_report s = healthy_system();
  s.thp.enabled = enabled;
  s.thp.max_ptes_none = 511;
  s.pools[0].total = 600;
  s.pools[0].free = 0;
  s.pools[0].reserved = 0;
  return s;
}

inline const advice& only(const std::vector<advice>& list, const std::string& id) {
  static const advice none{rule_id::thp_never, "(no such advice)"};
  for (const auto& a : list) {
    if (a.id() == id) return a;
  }
  ADD_FAILURE() << "no advice " << id;
  return none;
}

inline std::string all_commands(const std::vector<advice>& list) {
  std::string out;
  for (const auto& a : list) {
    for (const auto& c : a.commands) out += c + "\n";
  }
  return out;
}

// A copy, so that find(advise_system(s), ...) does not point into a destroyed temporary.
inline std::optional<advice> find(const std::vector<advice>& list, const std::string& id) {
  const auto it =
      std::find_if(list.begin(), list.end(), [&](const advice& a) { return a.id() == id; });
  if (it == list.end()) return std::nullopt;
  return *it;
}

inline std::string ids(const std::vector<advice>& list) {
  std::string out;
  for (const auto& a : list) out += a.id() + " ";
  return out;
}

// The title a hostile process could give itself: every command must be free of it.
inline const std::string hostile_name = "x;rm -rf ~;$(reboot)`id`\n\x1b[2J";

inline process_report big_process(const std::string& allocator,
                                  std::vector<std::pair<std::string, std::string>> environment = {},
                                  const std::string& version = "") {
  process_report p;
  p.pid = 4242;
  p.name = hostile_name;
  p.anonymous = 11 * gib;
  p.rss = 11 * gib + 100 * mib;
  p.thp = 22 * mib;  // 0.2 %
  p.base = p.rss - p.thp;
  p.thp_enabled = true;
  p.allocator = describe_allocator({allocator, "/lib/lib" + allocator + ".so", version}, true,
                                   std::move(environment));
  return p;
}

// One class of a process's memory: `resident` bytes of which `huge` on huge pages, all in
// mappings of at least 2 MiB unless `small` says otherwise (for glibc's chunks: chunks under 2 MiB,
// each its own mapping).
inline memory_class_usage usage(memory_class kind, std::size_t resident, std::size_t huge = 0,
                                std::size_t small = 0, std::size_t advised = 0) {
  memory_class_usage c;
  c.kind = kind;
  c.resident = resident;
  c.huge = huge;
  c.mappings = 1;
  c.advised = advised;
  c.in_small_mappings = small;
  if (kind == memory_class::glibc_mmapped_chunks) c.in_small_chunks = small;
  c.largest_mapping = resident;
  return c;
}

// big_process() whose anonymous memory is the one class `c` (its classes filled, as
// collect_process fills them).
inline process_report process_with(process_report p, const memory_class_usage& c) {
  p.classes = {c};
  if (c.kind == memory_class::shared_anonymous || c.kind == memory_class::tmpfs_file) {
    p.anonymous = 0;
    p.thp = 0;
    p.shmem = c.resident;
    p.shmem_huge = c.huge;
    p.rss = c.resident;
  } else {
    p.anonymous = c.resident;
    p.thp = c.huge;
    p.rss = c.resident;
  }
  p.base = p.rss - std::min(p.rss, c.huge);
  return p;
}

// The command --collapse that advice gives for big_process()'s pid.
inline const std::string collapse_command = "hugepage-doctor --pid 4242 --collapse";

// The JVM's library where Debian's OpenJDK 17 puts it.
inline const std::string libjvm = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";

// A command line with its NULs, as /proc/PID/cmdline holds it.
template <std::size_t n>
std::string cmdline_of(const char (&text)[n]) {
  return std::string(text, n - 1);
}

// Whether the advice's message says `text`.
inline bool mentions(const advice& a, const std::string& text) {
  return a.message.find(text) != std::string::npos;
}

}  // namespace hugepage::doctor::advice_test
