// tools/doctor/advise_process.cpp - the rules that turn a process report into advice (the rules'
// conventions: advise_system.cpp): per memory class where the report has them (advise_classes.cpp),
// else by the process's totals.
#include "advise_process.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "advise_reach.hpp"
#include "format.hpp"
#include "process_report.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

// Redis turns THP off for itself (disable-thp yes, the default since 6.2) because its
// fork-based persistence would copy 2 MiB per written page: that is its choice, not a fault.
void judge_redis(const process_report& p, const system_report& /*s*/, std::vector<advice>& out) {
  const runtime_report& rt = p.runtime;
  if (rt.kind == "redis" && p.thp_enabled && !*p.thp_enabled) {
    out.push_back({rule_id::redis_disables_thp,
                   "Redis turned THP off for itself with prctl(PR_SET_THP_DISABLE) "
                   "(disable-thp yes, the default): a fork for BGSAVE or AOF rewrite would "
                   "otherwise copy 2 MiB for every page written meanwhile, and latency spikes",
                   {"/proc/PID/status THP_enabled: 0", "runtime: " + rt.evidence},
                   "",
                   {}});
  }
}

// THP disabled for the process (prctl), and by whom (advise_thp_disabled). From unreached_floor
// on base pages a note (no quiet all-clear: nothing else is advised while THP is off), from the
// advice threshold a warning.
void judge_thp_disabled(const process_report& p, const system_report& s, std::vector<advice>& out) {
  const std::size_t anon = p.anonymous + p.hugetlb_total();
  if (p.thp_enabled && !*p.thp_enabled && anon >= unreached_floor && p.huge_fraction() < 0.5) {
    const std::size_t first = out.size();
    advise_thp_disabled(p, s,
                        fmt::format("{} anonymous memory, {} huge; ", format_bytes(anon),
                                    percent(p.huge_fraction())),
                        out);
    if (anon >= advice_threshold(p)) return;
    for (std::size_t i = first; i < out.size(); ++i) out[i].lower_to_note();
  }
}

// A setting that maps from the hugetlb pool, short of pages: the pool, by how many.
void judge_pool_setting(const process_report& p, const system_report& s, std::vector<advice>& out) {
  if (auto pool = pool_setting_advice(p, s)) out.push_back(std::move(*pool));
}

// postgres_huge_pages: PostgreSQL's shared memory on base pages.
// PostgreSQL: shared_buffers is one shared mapping; huge_pages=try (the default) takes it
// from the hugetlb pool when the pool has room, silently falls back otherwise.
// The mapping's size, not its resident bytes: shared_buffers fill up as the server works.
void judge_postgres(const process_report& p, const system_report& s, std::vector<advice>& out) {
  const runtime_report& rt = p.runtime;
  const std::size_t largest_shared = p.largest_shared;
  if (rt.kind == "postgres" && largest_shared >= 64 * units::mib && p.hugetlb_total() == 0) {
    const std::size_t page = s.pools.empty() ? s.thp_bytes : s.pools.front().page_bytes;
    const std::uint64_t pages = (largest_shared + page - 1) / std::max<std::size_t>(page, 1);
    std::uint64_t total = 0, available = 0;
    if (!s.pools.empty()) {
      total = s.pools.front().total.value_or(0);
      available = s.pools.front().available().value_or(0);
    }
    advice a{rule_id::postgres_huge_pages,
             fmt::format("PostgreSQL's shared memory ({}) is on base pages: set huge_pages = on "
                         "in postgresql.conf (try, the default, falls back silently) with a "
                         "pool of at least {} pages of {}",
                         format_bytes(largest_shared), pages, format_bytes(page)),
             {fmt::format("largest shared mapping {} (shared_buffers and friends)",
                          format_bytes(largest_shared)),
              fmt::format("hugetlb pool: {} pages, {} available", total, available),
              "runtime: " + rt.evidence},
             fmt::format("{} reserved for PostgreSQL, unusable for anything else; with "
                         "huge_pages = on the server refuses to start when the pool is short",
                         format_bytes(pages * page)),
             {}};
    if (available < pages) {
      if (const auto target = capped_pool_target(s, page, total, total + pages - available)) {
        a.commands = pool_commands(s, page, *target);
      }
    }
    out.push_back(std::move(a));
  }
}

// the memory itself: by class where the classes are known (advise_classes), else
// shmem_without_thp and the advice on the anonymous memory as a whole.
void judge_memory(const process_report& p, const system_report& s, std::vector<advice>& out) {
  const std::size_t anon = p.anonymous + p.hugetlb_total();
  const std::string enabled = effective_enabled(s, "unknown");
  const runtime_report& rt = p.runtime;
  if (!p.classes.empty()) {
    advise_classes(p, s, out);
  } else {
    // A report without memory classes (from stored files): advice by the process's totals.
    // Shared memory (tmpfs, memfd, SysV, MAP_SHARED anonymous) follows shmem_enabled, and files on
    // a tmpfs mount follow its huge= option; PostgreSQL's is better on the hugetlb pool (above).
    const std::string shmem_enabled = s.thp.shmem_enabled.value_or("");
    if (rt.kind != "postgres" && p.shmem >= process_advice_threshold &&
        p.shmem_huge_fraction() < 0.5 && (shmem_enabled == "never" || shmem_enabled == "deny")) {
      advice a{rule_id::shmem_without_thp,
               fmt::format("{} of shared memory, {} huge; shmem_enabled={} gives it base pages "
                           "only",
                           format_bytes(p.shmem), percent(p.shmem_huge_fraction()), shmem_enabled),
               {fmt::format("{}/shmem_enabled: {}", thp_dir, shmem_enabled),
                fmt::format("{} resident in shared mappings", format_bytes(p.shmem))},
               "advise: only ranges with MADV_HUGEPAGE (and tmpfs mounts with huge=) get huge "
               "pages; a sparse shared file grows in 2 MiB steps",
               sysfs_setting("advise", fmt::format("{}/shmem_enabled", thp_dir))};
      if (p.dev_shm >= p.shmem / 2) {
        // Most of it is POSIX shared memory in /dev/shm: that mount's own option decides.
        a.evidence.push_back(
            fmt::format("{} of it in files under /dev/shm", format_bytes(p.dev_shm)));
        a.commands.push_back(shell_line({"mount", "-o", "remount,huge=within_size", "/dev/shm"}));
        a.commands.push_back(dev_shm_fstab_command(s));
      }
      out.push_back(std::move(a));
    }

    if (anon >= advice_threshold(p) && p.huge_fraction() < 0.5) {
      const std::string head = fmt::format("{} anonymous memory, {} huge; ", format_bytes(anon),
                                           percent(p.huge_fraction()));
      const allocator_report& a = p.allocator;
      const fragmentation frag = fragmentation_of(s);
      if (p.thp_enabled && !*p.thp_enabled) {
        // advise_thp_disabled, above
      } else if (enabled == "never") {
        thp_off off = thp_off_of(s);
        out.push_back({rule_id::thp_never, head + off.why, std::move(off.evidence),
                       "madvise gives huge pages only to ranges that ask for them",
                       std::move(off.commands)});
      } else if (rt.kind == "jvm") {
        // The Java heap is the JVM's own mapping: malloc settings do not reach it.
        if (!rt.asks_for_huge && enabled == "madvise") {
          out.push_back(jvm_thp_advice(p, head));
        } else if (rt.asks_for_huge && !rt.uses_pool && frag.fragmented && fallbacks_matter(s)) {
          out.push_back({rule_id::huge_pages_not_obtained,
                         head + "the JVM asks for huge pages, but free memory is fragmented and "
                                "THP faults fall back",
                         {"runtime: " + rt.evidence},
                         "",
                         {write_command("1", "/proc/sys/vm/compact_memory")}});
        }
      } else if (rt.kind == "memcached") {
        if (rt.asks_for_huge) {
          advice not_huge = not_obtained(p, s, "memcached -L", {});
          not_huge.message = head + not_huge.message;
          out.push_back(std::move(not_huge));
        } else {
          out.push_back(memcached_advice(p, head, {}));
        }
      } else if (rt.kind == "node" && enabled == "madvise") {
        out.push_back(node_advice(p, s, head, {}));
      } else if (auto numpy = numpy_advice(p, head, {}); numpy && enabled == "madvise") {
        out.push_back(std::move(*numpy));
      } else if (linked_in_allocator(p) && rt.kind.empty() && enabled == "madvise") {
        out.push_back(linked_in_allocator_advice(p, s, head, {}));
      } else if (enabled == "madvise" && !a.environ_readable) {
        out.push_back({rule_id::allocator_settings_unknown,
                       head + fmt::format("{}'s settings cannot be read (environment "
                                          "unreadable), so the doctor cannot say why",
                                          a.guess.name),
                       {a.hugepage_mode},
                       "",
                       {}});
      } else if (enabled == "madvise" && a.environ_overwritten && !a.asks_for_huge) {
        out.push_back({rule_id::allocator_settings_unknown,
                       head + fmt::format("the process wrote its title over its environment, so "
                                          "{}'s settings are unknown",
                                          a.guess.name),
                       {"/proc/PID/environ holds no NAME=value pairs"},
                       "",
                       {}});
      } else if (enabled == "madvise" && !a.asks_for_huge) {
        advise_allocator(p, s, head, out);
      } else if (p.thp_eligible_anon > 0 && frag.fragmented && fallbacks_matter(s)) {
        // Ranges that could be huge were not, and the machine shows why: fragmentation with
        // fallbacks. Without both, compaction would not help.
        out.push_back({rule_id::huge_pages_not_obtained,
                       head + fmt::format("THP is {} and {} asks for huge pages, but free memory "
                                          "is fragmented and THP faults fall back",
                                          enabled, a.guess.name),
                       {fmt::format("{} in THP-eligible ranges", format_bytes(p.thp_eligible_anon)),
                        fmt::format("{} free, {} in {} blocks", format_bytes(frag.free),
                                    format_bytes(frag.ready), format_bytes(s.thp_bytes))},
                       "one compaction pass stalls the machine briefly",
                       {write_command("1", "/proc/sys/vm/compact_memory")}});
      }
    }
  }
}

// pool_exhausted: the process's hugetlb pool has none left while more was wanted.
void judge_pool_exhausted(const process_report& p, const system_report& s,
                          std::vector<advice>& out) {
  for (const auto& [page_bytes, bytes] : p.hugetlb) {
    for (const hugetlb_pool& pool : s.pools) {
      if (pool.page_bytes != page_bytes) continue;
      const std::uint64_t total = pool.total.value_or(0);
      const auto available = pool.available();
      if (!available || *available != 0) continue;
      const std::vector<std::string> shortage = pool_shortage_evidence(s, pool);
      if (shortage.empty()) continue;  // in use, exactly sized: the system report notes it
      const auto target =
          capped_pool_target(s, page_bytes, total, total + std::max<std::uint64_t>(total / 4, 1));
      out.push_back({rule_id::pool_exhausted,
                     fmt::format("the process holds {} of {} hugetlb pages and the pool has "
                                 "none left while more was wanted",
                                 format_bytes(bytes), format_bytes(page_bytes)),
                     shortage, "",
                     target ? pool_commands(s, page_bytes, *target) : std::vector<std::string>{}});
    }
  }
}

// numa_remote_memory: much of the process's memory lies on nodes where none of its threads may
// run (two nodes or more). numa_pool_wrong_node: its hugetlb pages came from such a node, since
// the pool is reserved there rather than where it runs.
void judge_numa(const process_report& p, const system_report& s, std::vector<advice>& out) {
  if (!p.reach || p.reach->run_nodes.empty()) return;
  const numa_reach& r = *p.reach;
  if (r.remote * 10 <= r.resident || r.remote < s.thp_bytes) return;
  std::vector<int> remote_nodes;
  std::vector<std::string> evidence;
  for (const auto& [node, u] : p.numa) {
    if (!r.runs_on(node)) remote_nodes.push_back(node);
    evidence.push_back(fmt::format("node {}: {} resident, {} of it hugetlb ({}; numa_maps)", node,
                                   format_bytes(u.bytes), format_bytes(u.hugetlb_bytes),
                                   r.runs_on(node) ? "local" : "remote"));
  }
  evidence.push_back(
      fmt::format("Cpus_allowed_list {} (node{} {}), Mems_allowed_list {} "
                  "(/proc/PID/status)",
                  printable(r.cpus_allowed), r.run_nodes.size() == 1 ? "" : "s",
                  join_ids(r.run_nodes), printable(r.mems_allowed)));
  const std::string run = join_ids(r.run_nodes);
  out.push_back(
      {rule_id::numa_remote_memory,
       fmt::format("{} of the process's resident memory ({}) lies on node{} {}, where "
                   "none of its threads may run: each cache miss there is a remote "
                   "access. Start it under numactl --cpunodebind={} --membind={}, or "
                   "place its large containers with the library's "
                   "hugepage::numa_placement::bind({{{}}})",
                   percent(r.remote_share()), format_bytes(r.remote),
                   remote_nodes.size() == 1 ? "" : "s", join_ids(remote_nodes), run, run, run),
       evidence,
       "memory bound to a node is not taken from another when that node is full: an "
       "allocation fails (hugetlb) or the kernel reclaims and OOM-kills there",
       {}});
  if (r.remote_hugetlb == 0 || p.hugetlb.empty()) return;
  // The pages came from a pool reserved where the process does not run: name it, and raise the
  // pool of a node where it runs by as many pages.
  const std::size_t page_bytes = p.hugetlb.begin()->first;
  const int home = r.run_nodes.front();
  std::uint64_t home_total = 0, home_free = 0;
  std::vector<std::string> pools;
  for (const hugetlb_pool& pool : s.node_pools) {
    if (pool.page_bytes != page_bytes || !pool.node) continue;
    pools.push_back(fmt::format("node {}: {} pages of {} ({} free){}", *pool.node,
                                pool.total.value_or(0), format_bytes(page_bytes),
                                pool.free.value_or(0), r.runs_on(*pool.node) ? "" : ", remote"));
    if (*pool.node == home) {
      home_total = pool.total.value_or(0);
      home_free = pool.free.value_or(0);
    }
  }
  const std::uint64_t pages = r.remote_hugetlb / page_bytes;
  const std::string file =
      fmt::format("/sys/devices/system/node/node{}/hugepages/hugepages-{}kB/nr_hugepages", home,
                  page_bytes / 1024);
  out.push_back(
      {rule_id::numa_pool_wrong_node,
       fmt::format("{} of the process's hugetlb pages ({}) came from a pool reserved on node{} {}, "
                   "where it does not run; node {}'s pool has {} pages ({} free)",
                   pages, format_bytes(r.remote_hugetlb), remote_nodes.size() == 1 ? "" : "s",
                   join_ids(remote_nodes), home, home_total, home_free),
       pools,
       fmt::format("the pages are reserved on node {} for good (hugepagesz={} hugepages={}:{} on "
                   "the kernel command line at boot); the remote pool can be lowered once the "
                   "process has restarted",
                   home, page_bytes >= units::gib ? "1G" : "2M", home, home_total + pages),
       {fmt::format("echo {} > {}", home_total + pages, file)}});
}

// memory_cgroup_limit: advice given above that grows RSS (a setting or a collapse that puts the
// classes it reaches on huge pages, each filling whole THP-sized blocks) weighed against the
// process's memory cgroup limit: past it the kernel reclaims and then OOM-kills.
void judge_memory_limit(const process_report& p, const system_report& s, std::vector<advice>& out) {
  if (!p.memory_limit) return;
  const cgroup_limit& l = *p.memory_limit;
  std::size_t growth = 0;
  std::vector<std::string> grown;
  // A --collapse collapses all the process's candidate ranges at once: its growth, as the dry
  // run predicts it (filling partly populated chunks), counted once, whichever advice names it.
  bool collapse_counted = false;
  for (const advice& a : out) {
    if (a.commands.empty() || a.reaches.empty()) continue;
    const auto collapse = [](const std::string& c) {
      return c.rfind("hugepage-doctor ", 0) == 0 && c.find(" --collapse") != std::string::npos;
    };
    if (p.collapse_growth && std::any_of(a.commands.begin(), a.commands.end(), collapse)) {
      if (!collapse_counted) growth += *p.collapse_growth;
      collapse_counted = true;
      if (std::all_of(a.commands.begin(), a.commands.end(), collapse)) {
        if (std::find(grown.begin(), grown.end(), a.id()) == grown.end()) grown.push_back(a.id());
        continue;
      }
    }
    for (const memory_class_usage& c : p.classes) {
      if (std::find(a.reaches.begin(), a.reaches.end(), name_of(c.kind)) == a.reaches.end() ||
          c.kind == memory_class::hugetlb) {
        continue;
      }
      // Whole huge pages over each mapping's resident memory: a lower bound of the growth.
      growth += c.pool_bytes > c.resident ? c.pool_bytes - c.resident : 0;
    }
    if (std::find(grown.begin(), grown.end(), a.id()) == grown.end()) grown.push_back(a.id());
  }
  const std::uint64_t room = l.headroom();
  if (grown.empty() || (room >= growth && room >= l.limit / 10)) return;
  const std::string file = l.file.substr(l.file.rfind('/') + 1);
  const std::uint64_t charged = l.usage > l.reclaimable ? l.usage - l.reclaimable : 0;
  std::string ids;
  for (const std::string& id : grown) ids += (ids.empty() ? "" : ", ") + id;
  out.push_back({rule_id::memory_cgroup_limit,
                 fmt::format("the process's memory cgroup has {} left before its limit ({} of {} "
                             "charged, {}): the advice above ({}) grows its RSS, by at least {} "
                             "here as huge pages fill whole {} blocks (--collapse --dry-run "
                             "predicts a collapse's growth), {}; raise {} first, or past the "
                             "limit the kernel reclaims and then OOM-kills the process",
                             format_bytes(room), format_bytes(charged), format_bytes(l.limit), file,
                             ids, format_bytes(growth), format_bytes(s.thp_bytes),
                             room < growth ? "which does not fit"
                                           : "which fits, leaving under a tenth of the limit",
                             file),
                 {fmt::format("{}: {}", l.file, l.limit),
                  fmt::format("charged {} ({} reclaimable file cache)", format_bytes(l.usage),
                              format_bytes(l.reclaimable))},
                 "",
                 {}});
}

// A judge: appends the advice it finds in a process on its system.
using process_judge = void (*)(const process_report& p, const system_report& s,
                               std::vector<advice>& out);

// In the order the advice is listed.
constexpr process_judge process_judges[] = {
    judge_redis,  judge_thp_disabled, judge_pool_setting,   judge_postgres,
    judge_memory, judge_memory_limit, judge_pool_exhausted, judge_numa,
};

}  // namespace

std::vector<advice> advise_process(const process_report& p, const system_report& s) {
  std::vector<advice> out;
  for (const process_judge judge : process_judges) judge(p, s, out);
  return out;
}

}  // namespace hugepage::doctor
