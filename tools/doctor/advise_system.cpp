// tools/doctor/advise_system.cpp - the rules that turn a system report into advice.
//
// Each rule is a condition on the report, the facts it rests on, what the fix costs, and the
// commands that apply it; its id and level are its row of rule_catalog.cpp. Rules never read
// the machine, so each has a test built from a hand-made report
// (tools/test/doctor_advise_*_test.cpp).
//
// Commands are built from values the doctor chose: kernel and configuration paths, numbers it
// computed, and a systemd unit name that passed safe_unit_name(). Every word goes through
// shell_quote(). Two exceptions enter a command only when printable_ascii(), and always quoted:
// an environment variable the advice sets, whose current value (from /proc/PID/environ) is merged
// in so that nothing in it is lost (environment_setting()), and the doctor's own hugetlb cgroup
// directory. A process's title and mapping names appear in messages (escaped when printed),
// never in a command.
//
// A warning is something to fix (exit status 1); a note is worth knowing but not a fault (a
// stock default, a deliberate choice of the service, a pool that is exactly sized and in use).
#include "advise_system.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "format.hpp"
#include "hugepage/cgroup.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

// thp_never: THP is off for the whole machine.
void judge_thp_never(const system_report& s, std::vector<advice>& out) {
  const std::string enabled = effective_enabled(s, "");
  if (enabled == "never") {
    thp_off off = thp_off_of(s);
    out.push_back({rule_id::thp_never,
                   off.why +
                       ": MADV_HUGEPAGE, thp_allocator and allocators' THP options all get base "
                       "pages",
                   std::move(off.evidence),
                   "madvise gives huge pages only to ranges that ask for them: no RSS change for "
                   "other programs",
                   std::move(off.commands)});
  }
}

// max_ptes_none: khugepaged may collapse sparse ranges.
void judge_max_ptes_none(const system_report& s, std::vector<advice>& out) {
  const std::string enabled = effective_enabled(s, "");
  // khugepaged fills up to max_ptes_none empty PTEs of a 2 MiB range to collapse it: with the
  // default (511 of 512) one touched 4 KiB page can become 2 MiB of RSS. That is the stock
  // setting and costs nothing unless sparse THP memory exists, so it is a note; Linux 6.12+
  // also splits underused THPs under memory pressure (thp_underused_split_page), but only when
  // max_ptes_none is below 511.
  const std::uint64_t per_huge = s.thp_bytes / std::max<std::size_t>(s.base_page_bytes, 1);
  if (enabled != "never" && !enabled.empty() && s.thp.max_ptes_none &&
      *s.thp.max_ptes_none >= per_huge / 2 && per_huge > 1) {
    const std::uint64_t used = per_huge - std::min(per_huge - 1, *s.thp.max_ptes_none);
    std::vector<std::string> evidence{
        fmt::format("{}/khugepaged/max_ptes_none: {}", thp_dir, *s.thp.max_ptes_none)};
    if (s.vmstat.count("thp_underused_split_page") != 0) {
      evidence.push_back(
          fmt::format("thp_underused_split_page {} (/proc/vmstat): this kernel can split "
                      "underused THPs, once max_ptes_none is below {}",
                      counter(s, "thp_underused_split_page"), per_huge - 1));
    }
    out.push_back(
        {rule_id::max_ptes_none,
         fmt::format("khugepaged may collapse a {} range in which only {} base page{} used, "
                     "so sparse THP memory can grow up to {}x in RSS (the kernel default; it "
                     "matters only for sparse, MADV_HUGEPAGE or THP-always memory)",
                     format_bytes(s.thp_bytes), used, used == 1 ? " is" : "s are", per_huge / used),
         evidence, "fewer collapses of partly used ranges: dense memory is unaffected",
         sysfs_setting(fmt::format("{}", per_huge / 8),
                       fmt::format("{}/khugepaged/max_ptes_none", thp_dir))});
  }
}

// defrag_always_stalls, defrag_never: the THP defrag setting.
void judge_defrag(const system_report& s, std::vector<advice>& out) {
  const std::string enabled = effective_enabled(s, "");
  const std::string defrag = s.thp.defrag.value_or("");
  if (enabled == "always" && defrag == "always") {
    out.push_back(
        {rule_id::defrag_always_stalls,
         "THP enabled=always with defrag=always: any page fault may stall in direct "
         "compaction (latency spikes of milliseconds)",
         {fmt::format("{}/enabled: always", thp_dir), fmt::format("{}/defrag: always", thp_dir)},
         "ranges that did not ask get huge pages later, from kcompactd and khugepaged",
         sysfs_setting("defer+madvise", fmt::format("{}/defrag", thp_dir))});
  }
  if (enabled != "never" && !enabled.empty() && defrag == "never") {
    out.push_back({rule_id::defrag_never,
                   "THP defrag=never: MADV_HUGEPAGE faults do not compact, so advised memory "
                   "silently gets base pages once memory is fragmented",
                   {fmt::format("{}/defrag: never", thp_dir)},
                   "faults in MADV_HUGEPAGE ranges may stall in compaction",
                   sysfs_setting("madvise", fmt::format("{}/defrag", thp_dir))});
  }
}

// pool_idle: hugetlb pages nothing uses.
void judge_idle_pools(const system_report& s, std::vector<advice>& out) {
  // A pool nothing has faulted in or reserved holds memory no other use can have. It is worth
  // saying once it is big: 512 MiB, or 5% of MemTotal on a small machine; from 10% of MemTotal
  // idle in all pools together it is a cost to fix. Surplus pages exist only while in use, so
  // any surplus is use.
  const auto mem_total = meminfo(s, "MemTotal");
  const auto idle = [](const hugetlb_pool& pool) {
    const std::uint64_t total = pool.total.value_or(0);
    return total != 0 && pool.free && *pool.free >= total && pool.reserved.value_or(0) == 0 &&
           pool.surplus.value_or(0) == 0;
  };
  std::uint64_t idle_bytes = 0;
  std::size_t idle_pools = 0;
  for (const hugetlb_pool& pool : s.pools) {
    if (!idle(pool)) continue;
    idle_bytes += pool.total.value_or(0) * pool.page_bytes;
    ++idle_pools;
  }
  const bool large = mem_total && idle_bytes >= *mem_total / 10;
  for (const hugetlb_pool& pool : s.pools) {
    if (!idle(pool)) continue;
    const std::uint64_t total = pool.total.value_or(0);
    const std::uint64_t bytes = total * pool.page_bytes;
    if (!large && bytes < 512 * hugepage::units::mib && !(mem_total && bytes >= *mem_total / 20)) {
      continue;
    }
    std::vector<std::string> evidence{fmt::format(
        "{}: nr_hugepages {}, free {}, reserved {}, surplus {}", pool_file(pool.page_bytes), total,
        *pool.free, pool.reserved.value_or(0), pool.surplus.value_or(0))};
    if (mem_total) {
      evidence.push_back(fmt::format(
          "MemTotal {} (/proc/meminfo): the pool holds {} of it", format_bytes(*mem_total),
          percent(static_cast<double>(bytes) / static_cast<double>(*mem_total))));
      if (idle_pools > 1) {
        evidence.push_back(fmt::format(
            "idle in all pools together: {}, {} of MemTotal", format_bytes(idle_bytes),
            percent(static_cast<double>(idle_bytes) / static_cast<double>(*mem_total))));
      }
    }
    const bool one_gib = pool.page_bytes >= hugepage::units::gib;
    advice a{
        rule_id::pool_idle,
        fmt::format("the {} hugetlb pool holds {} ({} page{}) that no process uses (none "
                    "faulted in, none reserved): memory nothing else can use",
                    format_bytes(pool.page_bytes), format_bytes(bytes), total,
                    total == 1 ? "" : "s"),
        std::move(evidence),
        fmt::format("a service that takes its pages from the pool when it starts (PostgreSQL "
                    "huge_pages=on, MariaDB large_pages) would find it empty; shrink it only if "
                    "none is meant to run here{}",
                    one_gib ? ", since 1 GiB pages are rarely found again once memory is in use "
                              "(reserve them at boot: hugepagesz=1G hugepages=N)"
                            : ""),
        pool_commands(s, pool.page_bytes, 0)};
    if (!large) a.lower_to_note();
    out.push_back(std::move(a));
  }
}

// pool_in_use, pool_exhausted: a hugetlb pool with nothing available.
void judge_used_pools(const system_report& s, std::vector<advice>& out) {
  for (const hugetlb_pool& pool : s.pools) {
    const std::uint64_t total = pool.total.value_or(0);
    const auto available = pool.available();
    if (total == 0 || !available || *available != 0) continue;
    const std::vector<std::string> shortage = pool_shortage_evidence(s, pool);
    std::vector<std::string> evidence{
        fmt::format("{}: nr_hugepages {}, free {}, reserved {}", pool_file(pool.page_bytes), total,
                    pool.free.value_or(0), pool.reserved.value_or(0))};
    if (shortage.empty()) {
      out.push_back({rule_id::pool_in_use,
                     fmt::format("the {} hugetlb pool is fully in use ({} pages); nothing "
                                 "shows a request it could not serve",
                                 format_bytes(pool.page_bytes), total),
                     evidence,
                     "",
                     {}});
      continue;
    }
    evidence.insert(evidence.end(), shortage.begin(), shortage.end());
    const auto target = capped_pool_target(s, pool.page_bytes, total,
                                           total + std::max<std::uint64_t>(total / 4, 1));
    out.push_back(
        {rule_id::pool_exhausted,
         fmt::format("the {} hugetlb pool is used up ({} pages) and more was wanted: "
                     "new MAP_HUGETLB mappings of that size fail with ENOMEM",
                     format_bytes(pool.page_bytes), total),
         evidence,
         target ? fmt::format("{} more reserved memory, unusable for anything else",
                              format_bytes((*target - total) * pool.page_bytes))
                : "the pool is already at 80% of MemTotal: reduce what uses it",
         target ? pool_commands(s, pool.page_bytes, *target) : std::vector<std::string>{}});
  }
}

// fragmented, thp_fault_fallback: free memory and the THP fault counters.
void judge_compaction(const system_report& s, std::vector<advice>& out) {
  const std::string defrag = s.thp.defrag.value_or("");
  // Compaction is advised only when both the free lists and the fault counters show the cost.
  const fragmentation frag = fragmentation_of(s);
  const bool fallbacks = fallbacks_matter(s);
  const std::uint64_t fault_alloc = counter(s, "thp_fault_alloc");
  const std::uint64_t fault_fallback = counter(s, "thp_fault_fallback");
  const std::string fallback_fact =
      fmt::format("thp_fault_fallback {} of {} THP faults since boot (/proc/vmstat)",
                  fault_fallback, fault_alloc + fault_fallback);
  const std::string frag_fact =
      fmt::format("{} free, {} of it in blocks of {} or more (/proc/buddyinfo)",
                  format_bytes(frag.free), format_bytes(frag.ready), format_bytes(s.thp_bytes));
  if (frag.fragmented && fallbacks) {
    out.push_back({rule_id::fragmented,
                   fmt::format("memory is fragmented and THP faults fall back to base pages ({})",
                               percent(static_cast<double>(fault_fallback) /
                                       static_cast<double>(fault_alloc + fault_fallback))),
                   {frag_fact, fallback_fact},
                   "one compaction pass stalls the machine briefly; proactive compaction "
                   "(vm.compaction_proactiveness) costs background CPU",
                   {write_command("1", "/proc/sys/vm/compact_memory")}});
  } else if (fallbacks) {
    advice a{rule_id::thp_fault_fallback,
             fmt::format("{} of THP page faults since boot fell back to base pages",
                         percent(static_cast<double>(fault_fallback) /
                                 static_cast<double>(fault_alloc + fault_fallback))),
             {fallback_fact, frag_fact},
             "",
             {}};
    if (defrag == "never" || defrag == "defer") {
      a.trade = "MADV_HUGEPAGE faults may stall in compaction";
      a.commands = sysfs_setting("defer+madvise", fmt::format("{}/defrag", thp_dir));
    } else {
      // Free memory is not fragmented now: the fallbacks are old, or from a memory cgroup
      // (thp_fault_fallback_charge). Nothing to run.
      a.lower_to_note();
    }
    out.push_back(std::move(a));
  } else if (frag.fragmented) {
    advice a{rule_id::fragmented,
             "free memory is fragmented, but THP faults are not falling back: nothing pays for "
             "it yet",
             {frag_fact, fallback_fact}};
    a.lower_to_note();
    out.push_back(std::move(a));
  }
}

// cgroup_limit_below_pool, cgroup_limit_at_fault: the doctor's hugetlb cgroup.
void judge_cgroup_limits(const system_report& s, std::vector<advice>& out) {
  for (const hugetlb_limit& limit : s.cgroup.limits) {
    // The directory comes from /proc/self/cgroup and mountinfo: the doctor's own cgroup, named
    // by whoever created it. Like a process's environment value, it enters a command only when
    // printable_ascii(), quoted as a word; otherwise the message says to write the file by hand.
    const std::string prefix = "hugetlb." + hugetlb_cgroup_size_name(limit.page_bytes) + ".";
    const std::string file = limit.directory + "/" + prefix;
    const bool printable_directory = printable_ascii(limit.directory);
    const auto by_hand = [&](const std::string& value, const std::string& name) {
      if (printable_directory) return std::string();
      return fmt::format(
          ": write {} to its {} by hand (the cgroup's path has control or non-ASCII bytes, "
          "which no printed command carries)",
          value, prefix + name);
    };
    const auto command = [&](const std::string& value, const std::string& name) {
      if (!printable_directory) return std::vector<std::string>{};
      return std::vector<std::string>{write_command(value, file + name)};
    };
    std::uint64_t pool_bytes = 0;
    for (const hugetlb_pool& pool : s.pools) {
      if (pool.page_bytes == limit.page_bytes)
        pool_bytes = pool.total.value_or(0) * pool.page_bytes;
    }
    if (limit.has_max && limit.max && *limit.max < pool_bytes) {
      const std::string max_name = limit.version == "v2" ? "max" : "limit_in_bytes";
      out.push_back({rule_id::cgroup_limit_below_pool,
                     fmt::format("the hugetlb cgroup caps {} pages at {}, below the pool's {}{}",
                                 format_bytes(limit.page_bytes), format_bytes(*limit.max),
                                 format_bytes(pool_bytes), by_hand("max", max_name)),
                     {fmt::format("{}{}: {}", file, max_name, *limit.max)},
                     "processes in this cgroup may take the whole pool",
                     command("max", max_name)});
    }
    if (limit.version == "v2" && limit.has_max && limit.max && limit.has_rsvd_max &&
        !limit.rsvd_max) {
      const std::string max = fmt::format("{}", *limit.max);
      out.push_back({rule_id::cgroup_limit_at_fault,
                     fmt::format("the hugetlb cgroup limits {} pages at fault time only: a "
                                 "process over {} gets SIGBUS on first touch instead of ENOMEM "
                                 "from mmap{}",
                                 format_bytes(limit.page_bytes), format_bytes(*limit.max),
                                 by_hand(max, "rsvd.max")),
                     {fmt::format("{}max: {}", file, *limit.max), file + "rsvd.max: max"},
                     "",
                     command(max, "rsvd.max")});
    }
  }
}

// no_1g_pages: the CPU has no 1 GiB pages.
void judge_1g_pages(const system_report& s, std::vector<advice>& out) {
  if (s.cpu_1g_pages && !*s.cpu_1g_pages) {
    out.push_back({rule_id::no_1g_pages,
                   "this CPU has no 1 GiB pages (no pdpe1gb flag): hugetlb and allocators can "
                   "use 2 MiB pages only",
                   {"/proc/cpuinfo flags: no pdpe1gb"},
                   "",
                   {}});
  }
}

// A judge: appends the advice it finds in a report (the rules it gives are in its comment).
using system_judge = void (*)(const system_report& s, std::vector<advice>& out);

// In the order the advice is listed.
constexpr system_judge system_judges[] = {
    judge_thp_never,  judge_max_ptes_none, judge_defrag,        judge_idle_pools,
    judge_used_pools, judge_compaction,    judge_cgroup_limits, judge_1g_pages,
};

}  // namespace

std::vector<advice> advise_system(const system_report& s) {
  std::vector<advice> out;
  for (const system_judge judge : system_judges) judge(s, out);
  return out;
}

}  // namespace hugepage::doctor
