// tools/doctor/advice.cpp - the rules that turn a report into advice.
//
// Each rule is a condition on the report, the facts it rests on, what the fix costs, and the
// commands that apply it. Rules never read the machine, so each has a test built from a
// hand-made report (tools/test/doctor_advice_test.cpp).
//
// Commands are built from values the doctor chose: kernel and configuration paths, numbers it
// computed, and a systemd unit name that passed safe_unit_name(). Every word goes through
// shell_quote(). The one exception is an environment variable the advice sets: its current value
// (from /proc/PID/environ) is merged in so that nothing in it is lost, only when it is printable
// ASCII, and always quoted (environment_setting()). A process's title and mapping names appear
// in messages (escaped when printed), never in a command.
//
// A warning is something to fix (exit status 1); a note is worth knowing but not a fault (a
// stock default, a deliberate choice of the service, a pool that is exactly sized and in use).
#include <fmt/format.h>

#include <algorithm>

#include "hugepage/refusal.hpp"
#include "report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

const char* name_of(advice_level level) noexcept {
  return level == advice_level::note ? "note" : "warning";
}

bool has_warning(const std::vector<advice>& list) noexcept {
  return std::any_of(list.begin(), list.end(),
                     [](const advice& a) { return a.level == advice_level::warning; });
}

namespace {

constexpr const char* thp_dir = "/sys/kernel/mm/transparent_hugepage";
// Where the doctor's persistent settings go: files it names itself, so nothing in them comes
// from a process.
// One file per setting, so applying one piece of advice never undoes another.
std::string tmpfiles_conf(const std::string& file) {
  std::string name = file.substr(file.rfind('/') + 1);
  if (file.find("/hugepages-") != std::string::npos) {
    name = file.substr(file.find("/hugepages-") + 11,
                       file.rfind('/') - file.find("/hugepages-") - 11) +
           "-" + name;
  }
  return "/etc/tmpfiles.d/hugepage-doctor-" + name + ".conf";
}
constexpr const char* sysctl_conf = "/etc/sysctl.d/90-hugepage-doctor-nr_hugepages.conf";

std::string pool_file(std::size_t page_bytes) {
  return detail::pool_directory(page_bytes, {}) + "nr_hugepages";
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

// Zones whose free memory serves ordinary allocations (not the 16 MiB ISA DMA zone).
bool counts_for_readiness(const zone_readiness& z) { return z.zone != "DMA"; }

std::uint64_t counter(const system_report& s, const char* name) {
  const auto it = s.vmstat.find(name);
  return it == s.vmstat.end() ? 0 : it->second;
}

std::optional<std::uint64_t> meminfo(const system_report& s, const char* key) {
  const auto it = s.meminfo.find(key);
  if (!s.meminfo_readable || it == s.meminfo.end()) return std::nullopt;
  return it->second;
}

// Sets a THP sysfs file now, and on every boot through tmpfiles.d ("w" writes the value).
std::vector<std::string> sysfs_setting(const std::string& value, const std::string& file) {
  return {write_command(value, file),
          file_command(tmpfiles_conf(file), {fmt::format("w {} - - - - {}", file, value)})};
}

// The effective PMD-size THP mode (read_thp_mode(): the per-size switch, else the top-level
// file); the top-level word where it could not be read.
std::string effective_enabled(const system_report& s, const char* unknown) {
  if (s.thp.pmd_mode) return name_of(*s.thp.pmd_mode);
  return s.thp.enabled.value_or(unknown);
}

// Which file turns THP off, and the setting that turns it back on for advised ranges.
struct thp_off {
  std::string why;
  std::vector<std::string> evidence;
  std::vector<std::string> commands;
};

thp_off thp_off_of(const system_report& s) {
  if (s.thp.pmd_enabled == std::optional<std::string>("never")) {
    const std::string file = fmt::format("{}/hugepages-{}kB/enabled", thp_dir, s.thp_bytes / 1024);
    const std::string top = s.thp.enabled.value_or("unknown");
    // The per-size file overrides the top-level one: "inherit" follows it where it is on.
    const bool top_on = top == "madvise" || top == "always";
    return {fmt::format("THP is off for {} pages (hugepages-{}kB/enabled=never, which overrides "
                        "enabled={})",
                        format_bytes(s.thp_bytes), s.thp_bytes / 1024, top),
            {file + ": never", fmt::format("{}/enabled: {}", thp_dir, top)},
            sysfs_setting(top_on ? "inherit" : "madvise", file)};
  }
  return {"THP is off (enabled=never)",
          {fmt::format("{}/enabled: never", thp_dir)},
          sysfs_setting("madvise", fmt::format("{}/enabled", thp_dir))};
}

// Free memory is fragmented: at least 256 MiB free, under a tenth of it in THP-sized blocks.
struct fragmentation {
  bool fragmented = false;
  std::uint64_t free = 0, ready = 0;
};

fragmentation fragmentation_of(const system_report& s) {
  fragmentation f;
  if (!s.zones) return f;
  for (const zone_readiness& z : *s.zones) {
    if (!counts_for_readiness(z)) continue;
    f.free += z.free_bytes;
    f.ready += z.huge_ready_bytes;
  }
  f.fragmented = f.free >= (std::uint64_t{256} << 20) && f.ready < f.free / 10;
  return f;
}

// THP faults since boot fell back to base pages often enough to matter.
bool fallbacks_matter(const system_report& s) {
  const std::uint64_t alloc = counter(s, "thp_fault_alloc");
  const std::uint64_t fallback = counter(s, "thp_fault_fallback");
  return fallback >= 100 && fallback * 10 > alloc + fallback;
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

// A pool size the machine can hold: at most 80% of MemTotal in pages of this size, never less
// than the pool has now. nullopt when even one more page would pass that.
std::optional<std::uint64_t> capped_pool_target(const system_report& s, std::size_t page_bytes,
                                                std::uint64_t total, std::uint64_t wanted) {
  if (const auto mem = meminfo(s, "MemTotal"); mem && page_bytes > 0) {
    const std::uint64_t cap = *mem / 10 * 8 / page_bytes;
    wanted = std::min(wanted, cap);
  }
  if (wanted <= total) return std::nullopt;
  return wanted;
}

// A command that sets a pool's size now and at boot: vm.nr_hugepages covers the default size
// through sysctl.d; other sizes only through the kernel command line or the sysfs file.
std::vector<std::string> pool_commands(const system_report& s, std::size_t page_bytes,
                                       std::uint64_t target) {
  std::vector<std::string> out{pool_resize_command(page_bytes, target)};
  const bool default_size = !s.pools.empty() && s.pools.front().page_bytes == page_bytes &&
                            meminfo(s, "Hugepagesize").value_or(page_bytes) == page_bytes;
  if (default_size) {
    out.push_back(file_command(sysctl_conf, {fmt::format("vm.nr_hugepages = {}", target)}));
  } else {
    out.push_back(file_command(tmpfiles_conf(pool_file(page_bytes)),
                               {fmt::format("w {} - - - - {}", pool_file(page_bytes), target)}));
  }
  return out;
}

}  // namespace

std::vector<advice> advise_system(const system_report& s) {
  std::vector<advice> out;
  const std::string enabled = effective_enabled(s, "");
  const std::string defrag = s.thp.defrag.value_or("");

  if (enabled == "never") {
    thp_off off = thp_off_of(s);
    out.push_back({"thp_never", advice_level::warning,
                   off.why +
                       ": MADV_HUGEPAGE, thp_allocator and allocators' THP options all get base "
                       "pages",
                   std::move(off.evidence),
                   "madvise gives huge pages only to ranges that ask for them: no RSS change for "
                   "other programs",
                   std::move(off.commands)});
  }

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
        {"max_ptes_none", advice_level::note,
         fmt::format("khugepaged may collapse a {} range in which only {} base page{} used, "
                     "so sparse THP memory can grow up to {}x in RSS (the kernel default; it "
                     "matters only for sparse, MADV_HUGEPAGE or THP-always memory)",
                     format_bytes(s.thp_bytes), used, used == 1 ? " is" : "s are", per_huge / used),
         evidence, "fewer collapses of partly used ranges: dense memory is unaffected",
         sysfs_setting(fmt::format("{}", per_huge / 8),
                       fmt::format("{}/khugepaged/max_ptes_none", thp_dir))});
  }

  if (enabled == "always" && defrag == "always") {
    out.push_back(
        {"defrag_always_stalls",
         advice_level::warning,
         "THP enabled=always with defrag=always: any page fault may stall in direct "
         "compaction (latency spikes of milliseconds)",
         {fmt::format("{}/enabled: always", thp_dir), fmt::format("{}/defrag: always", thp_dir)},
         "ranges that did not ask get huge pages later, from kcompactd and khugepaged",
         sysfs_setting("defer+madvise", fmt::format("{}/defrag", thp_dir))});
  }
  if (enabled != "never" && !enabled.empty() && defrag == "never") {
    out.push_back({"defrag_never",
                   advice_level::warning,
                   "THP defrag=never: MADV_HUGEPAGE faults do not compact, so advised memory "
                   "silently gets base pages once memory is fragmented",
                   {fmt::format("{}/defrag: never", thp_dir)},
                   "faults in MADV_HUGEPAGE ranges may stall in compaction",
                   sysfs_setting("madvise", fmt::format("{}/defrag", thp_dir))});
  }

  for (const hugetlb_pool& pool : s.pools) {
    const std::uint64_t total = pool.total.value_or(0);
    const auto available = pool.available();
    if (total == 0 || !available || *available != 0) continue;
    const std::vector<std::string> shortage = pool_shortage_evidence(s, pool);
    std::vector<std::string> evidence{
        fmt::format("{}: nr_hugepages {}, free {}, reserved {}", pool_file(pool.page_bytes), total,
                    pool.free.value_or(0), pool.reserved.value_or(0))};
    if (shortage.empty()) {
      out.push_back({"pool_in_use",
                     advice_level::note,
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
        {"pool_exhausted", advice_level::warning,
         fmt::format("the {} hugetlb pool is used up ({} pages) and more was wanted: "
                     "new MAP_HUGETLB mappings of that size fail with ENOMEM",
                     format_bytes(pool.page_bytes), total),
         evidence,
         target ? fmt::format("{} more reserved memory, unusable for anything else",
                              format_bytes((*target - total) * pool.page_bytes))
                : "the pool is already at 80% of MemTotal: reduce what uses it",
         target ? pool_commands(s, pool.page_bytes, *target) : std::vector<std::string>{}});
  }

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
    out.push_back({"fragmented",
                   advice_level::warning,
                   fmt::format("memory is fragmented and THP faults fall back to base pages ({})",
                               percent(static_cast<double>(fault_fallback) /
                                       static_cast<double>(fault_alloc + fault_fallback))),
                   {frag_fact, fallback_fact},
                   "one compaction pass stalls the machine briefly; proactive compaction "
                   "(vm.compaction_proactiveness) costs background CPU",
                   {write_command("1", "/proc/sys/vm/compact_memory")}});
  } else if (fallbacks) {
    advice a{"thp_fault_fallback",
             advice_level::warning,
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
      a.level = advice_level::note;
    }
    out.push_back(std::move(a));
  } else if (frag.fragmented) {
    out.push_back({"fragmented",
                   advice_level::note,
                   "free memory is fragmented, but THP faults are not falling back: nothing "
                   "pays for it yet",
                   {frag_fact, fallback_fact},
                   "",
                   {}});
  }

  for (const hugetlb_limit& limit : s.cgroup.limits) {
    // The directory comes from /proc/self/cgroup: the doctor's own cgroup, not a target's; it
    // is still quoted as a word.
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
      const std::string max_file = file + (limit.version == "v2" ? "max" : "limit_in_bytes");
      out.push_back({"cgroup_limit_below_pool",
                     advice_level::warning,
                     fmt::format("the hugetlb cgroup caps {} pages at {}, below the pool's {}",
                                 format_bytes(limit.page_bytes), format_bytes(*limit.max),
                                 format_bytes(pool_bytes)),
                     {fmt::format("{}: {}", max_file, *limit.max)},
                     "processes in this cgroup may take the whole pool",
                     {write_command("max", max_file)}});
    }
    if (limit.version == "v2" && limit.has_max && limit.max && limit.has_rsvd_max &&
        !limit.rsvd_max) {
      out.push_back({"cgroup_limit_at_fault",
                     advice_level::warning,
                     fmt::format("the hugetlb cgroup limits {} pages at fault time only: a "
                                 "process over {} gets SIGBUS on first touch instead of ENOMEM "
                                 "from mmap",
                                 format_bytes(limit.page_bytes), format_bytes(*limit.max)),
                     {fmt::format("{}max: {}", file, *limit.max), file + "rsvd.max: max"},
                     "",
                     {write_command(fmt::format("{}", *limit.max), file + "rsvd.max")}});
    }
  }

  if (s.cpu_1g_pages && !*s.cpu_1g_pages) {
    out.push_back({"no_1g_pages",
                   advice_level::note,
                   "this CPU has no 1 GiB pages (no pdpe1gb flag): hugetlb and allocators can "
                   "use 2 MiB pages only",
                   {"/proc/cpuinfo flags: no pdpe1gb"},
                   "",
                   {}});
  }
  return out;
}

namespace {

// How a variable's value is a list: GLIBC_TUNABLES is "key=value:key=value", MALLOC_CONF
// "key:value,key:value", java options are words separated by spaces where a later flag wins
// (key_end 0: the entry is appended unless present), a plain variable is one value
// (separator 0: replaced).
struct list_syntax {
  char separator = 0;
  char key_end = 0;
};
constexpr list_syntax glibc_tunables{':', '='};
constexpr list_syntax malloc_conf{',', ':'};
constexpr list_syntax java_options{' ', 0};
constexpr list_syntax single_value{};

std::vector<std::string_view> split_entries(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto at = text.find(separator);
    const std::string_view entry = text.substr(0, at);
    text.remove_prefix(at == std::string_view::npos ? text.size() : at + 1);
    if (!entry.empty()) out.push_back(entry);
  }
  return out;
}

// `add`'s entries merged into `current`: an entry of a key that `current` has replaces the first
// entry of that key where it stands, and later ones of that key are dropped (the last would
// win); every other entry keeps its place; new keys go at the end.
std::string merge_entries(std::string_view current, std::string_view add, list_syntax syntax) {
  if (syntax.separator == 0) return std::string(add);
  std::vector<std::string> out;
  for (const std::string_view entry : split_entries(current, syntax.separator)) {
    out.emplace_back(entry);
  }
  const auto key = [&](std::string_view entry) {
    return syntax.key_end == 0 ? entry : entry.substr(0, entry.find(syntax.key_end));
  };
  for (const std::string_view entry : split_entries(add, syntax.separator)) {
    bool placed = false;
    for (auto it = out.begin(); it != out.end();) {
      if (key(*it) != key(entry)) {
        ++it;
      } else if (!placed) {
        *it++ = std::string(entry);
        placed = true;
      } else {
        it = out.erase(it);
      }
    }
    if (!placed) out.emplace_back(entry);
  }
  std::string joined;
  for (const std::string& entry : out) {
    if (!joined.empty()) joined += syntax.separator;
    joined += entry;
  }
  return joined;
}

// Makes /dev/shm's huge= option persistent: a line in /etc/fstab (systemd-remount-fs applies an
// fstab line's options to /dev/shm at boot) with the options it is mounted with now, added only
// when fstab has no /dev/shm line yet; otherwise it says to edit that line, and changes nothing.
std::string dev_shm_fstab_command(const system_report& s) {
  // Options the kernel wrote (a space as \040) that are not plain option text are not copied:
  // the flags systemd mounts /dev/shm with stand in.
  std::string options = s.dev_shm_options.value_or("");
  const bool plain = !options.empty() && printable_ascii(options) &&
                     options.find_first_of(" #\\'\"") == std::string::npos;
  options = merge_entries(plain ? options : "rw,nosuid,nodev", "huge=within_size", {',', '='});
  return "if grep -Eqs '^[[:space:]]*[^#[:space:]]+[[:space:]]+/dev/shm[[:space:]]' /etc/fstab; "
         "then echo '/etc/fstab has a /dev/shm line: add huge=within_size to its options by "
         "hand' >&2; else printf '%s\\n' " +
         shell_quote("tmpfs /dev/shm tmpfs " + options + " 0 0") + " >> /etc/fstab; fi";
}

// A setting for a service's environment, merged into the value the process has now (from
// /proc/PID/environ) so that nothing already there is lost: the commands, and the clause the
// message ends with (how they apply it, or why it must be done by hand).
struct environment_fix {
  std::vector<std::string> commands;
  std::string how;
  std::vector<std::string> evidence;
};

// The process's value is the one place where text a process controls enters a command: only
// when it is printable ASCII (and, for a unit file, free of '"' and '\'), always quoted.
// Otherwise no command: the operator merges it by hand.
environment_fix environment_setting(const process_report& p, const std::string& name,
                                    const std::string& add, list_syntax syntax) {
  environment_fix fix;
  const allocator_report& a = p.allocator;
  if (!a.environ_readable || a.environ_overwritten) {
    fix.how = fmt::format(
        "add {} to {} by hand, keeping what it holds (the process's "
        "environment cannot be read)",
        add, name);
    return fix;
  }
  std::optional<std::string> current;
  for (const auto& [key, value] : a.settings) {
    if (key == name && !current) current = value;
  }
  const std::string value = current ? merge_entries(*current, add, syntax) : add;
  if (current) {
    fix.evidence.push_back(fmt::format("{}={} now (/proc/PID/environ){}", name, *current,
                                       syntax.separator != 0 ? ": merged, the rest kept" : ""));
  }
  const std::string by_hand =
      fmt::format("add {} to {} by hand, keeping what it holds: its value", add, name);
  if (!printable_ascii(value)) {
    fix.how = by_hand + " has control or non-ASCII bytes, which no printed command carries";
    return fix;
  }
  if (p.unit.empty()) {
    fix.commands = {"export " + shell_quote(name + "=" + value)};
    fix.how = "set it in the environment of whatever starts the process, then restart it";
    return fix;
  }
  const std::string line = systemd_environment(name, value);
  if (line.empty()) {
    fix.how = by_hand + " has '\"' or '\\', which a unit file would unescape";
    return fix;
  }
  // A file of the doctor's own per variable, so it never replaces another drop-in; "zz-" sorts
  // it after the others (override.conf included), whose values the merged one already holds.
  const std::string file =
      fmt::format("/etc/systemd/system/{}.d/zz-hugepage-doctor-{}.conf", p.unit, name);
  fix.commands = {new_file_command(file, {"[Service]", line}),
                  shell_line({"systemctl", "daemon-reload"}),
                  shell_line({"systemctl", "restart", p.unit})};
  fix.how = fmt::format(
      "a drop-in of its own for {} (refused if that file exists: then merge "
      "by hand), then a restart",
      p.unit);
  return fix;
}

// A warning that sets `name` for the process: `text` then how the fix applies.
advice environment_advice(const process_report& p, std::string id, const std::string& text,
                          std::vector<std::string> evidence, std::string trade,
                          const std::string& name, const std::string& add, list_syntax syntax) {
  environment_fix fix = environment_setting(p, name, add, syntax);
  evidence.insert(evidence.end(), fix.evidence.begin(), fix.evidence.end());
  return {std::move(id),       advice_level::warning, text + fix.how,
          std::move(evidence), std::move(trade),      std::move(fix.commands)};
}

// The glibc version as "major.minor" numbers; nullopt when unknown.
std::optional<std::pair<int, int>> version_pair(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) return std::nullopt;
  return std::make_pair(major, minor);
}

void advise_allocator(const process_report& p, const std::string& head, std::vector<advice>& out) {
  const allocator_report& a = p.allocator;
  const std::vector<std::string> evidence{
      "THP enabled=madvise: only advised ranges get huge pages",
      fmt::format("allocator {}{} (mapped: {})", a.guess.name,
                  a.guess.version.empty() ? "" : " " + a.guess.version,
                  a.guess.library.empty() ? "none" : a.guess.library),
      fmt::format("its huge page setting: {}", a.hugepage_mode)};
  const std::string trade =
      "more RSS for sparse heaps, and fork copy-on-write copies 2 MiB at a time";
  if (a.guess.name == "jemalloc") {
    out.push_back(environment_advice(
        p, "jemalloc_without_thp",
        head + "jemalloc runs without thp:always, so its heap is never advised; ", evidence, trade,
        "MALLOC_CONF", "thp:always,metadata_thp:auto", malloc_conf));
  } else if (a.guess.name == "glibc") {
    const auto v = version_pair(a.guess.version);
    if (v && *v < std::make_pair(2, 35)) {
      out.push_back({"glibc_too_old_for_thp",
                     advice_level::note,
                     head + fmt::format("glibc {} has no glibc.malloc.hugetlb tunable (2.35+): "
                                        "put the large containers on hugepage::thp_allocator",
                                        a.guess.version),
                     evidence,
                     "",
                     {}});
      return;
    }
    out.push_back(environment_advice(
        p, "glibc_without_hugetlb_tunable",
        head + "glibc malloc runs without glibc.malloc.hugetlb=1, so it never advises THP; ",
        evidence, trade, "GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", glibc_tunables));
  } else if (a.guess.name == "mimalloc") {
    // mimalloc 2.0 reads MIMALLOC_LARGE_OS_PAGES; 2.1 renamed the option allow_large_os_pages
    // and still reads the old name, so the old name is right for both and for unknown versions.
    const auto v = version_pair(a.guess.version);
    const bool new_name = v && *v >= std::make_pair(2, 1);
    out.push_back(environment_advice(
        p, "mimalloc_without_large_pages",
        head + "mimalloc runs without large OS pages, so its segments are not "
               "advised; ",
        evidence,
        "mimalloc then maps its segments from the hugetlb pool first "
        "(MAP_HUGETLB) while the pool has free pages, and advises THP for the "
        "rest: pool pages other users lack, more RSS for sparse heaps",
        new_name ? "MIMALLOC_ALLOW_LARGE_OS_PAGES" : "MIMALLOC_LARGE_OS_PAGES", "1", single_value));
  } else if (a.guess.name == "tcmalloc") {
    // gperftools tcmalloc has no THP option: only the machine-wide setting reaches its heap.
    out.push_back({"tcmalloc_without_thp",
                   advice_level::note,
                   head + "gperftools tcmalloc has no THP option; its heap gets huge pages only "
                          "with THP enabled=always (machine-wide) or by linking the big "
                          "containers against hugepage::thp_allocator",
                   evidence,
                   "enabled=always raises RSS and fault latency for every process",
                   {}});
  }
}

}  // namespace

std::vector<advice> advise_process(const process_report& p, const system_report& s) {
  std::vector<advice> out;
  const std::size_t anon = p.anonymous + p.hugetlb_total();
  const std::string enabled = effective_enabled(s, "unknown");
  const runtime_report& rt = p.runtime;

  // Redis turns THP off for itself (disable-thp yes, the default since 6.2) because its
  // fork-based persistence would copy 2 MiB per written page: that is its choice, not a fault.
  if (rt.kind == "redis" && p.thp_enabled && !*p.thp_enabled) {
    out.push_back({"redis_disables_thp",
                   advice_level::note,
                   "Redis turned THP off for itself with prctl(PR_SET_THP_DISABLE) "
                   "(disable-thp yes, the default): a fork for BGSAVE or AOF rewrite would "
                   "otherwise copy 2 MiB for every page written meanwhile, and latency spikes",
                   {"/proc/PID/status THP_enabled: 0", "runtime: " + rt.evidence},
                   "",
                   {}});
  }

  // PostgreSQL: shared_buffers is one shared mapping; huge_pages=try (the default) takes it
  // from the hugetlb pool when the pool has room, silently falls back otherwise.
  // The mapping's size, not its resident bytes: shared_buffers fill up as the server works.
  const std::size_t largest_shared = p.largest_shared;
  if (rt.kind == "postgres" && largest_shared >= (std::size_t{64} << 20) &&
      p.hugetlb_total() == 0) {
    const std::size_t page = s.pools.empty() ? s.thp_bytes : s.pools.front().page_bytes;
    const std::uint64_t pages = (largest_shared + page - 1) / std::max<std::size_t>(page, 1);
    std::uint64_t total = 0, available = 0;
    if (!s.pools.empty()) {
      total = s.pools.front().total.value_or(0);
      available = s.pools.front().available().value_or(0);
    }
    advice a{"postgres_huge_pages",
             advice_level::warning,
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

  // Shared memory (tmpfs, memfd, SysV, MAP_SHARED anonymous) follows shmem_enabled, and files on
  // a tmpfs mount follow its huge= option; PostgreSQL's is better on the hugetlb pool (above).
  const std::string shmem_enabled = s.thp.shmem_enabled.value_or("");
  if (rt.kind != "postgres" && p.shmem >= process_advice_threshold &&
      p.shmem_huge_fraction() < 0.5 && (shmem_enabled == "never" || shmem_enabled == "deny")) {
    advice a{"shmem_without_thp",
             advice_level::warning,
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

  if (anon >= process_advice_threshold && p.huge_fraction() < 0.5) {
    const std::string head = fmt::format("{} anonymous memory, {} huge; ", format_bytes(anon),
                                         percent(p.huge_fraction()));
    const allocator_report& a = p.allocator;
    const fragmentation frag = fragmentation_of(s);
    if (p.thp_enabled && !*p.thp_enabled) {
      if (rt.kind != "redis") {
        out.push_back({"process_thp_disabled",
                       advice_level::warning,
                       head + "the process disabled THP for itself with prctl(PR_SET_THP_DISABLE); "
                              "check its launcher or unit for that setting",
                       {"/proc/PID/status THP_enabled: 0"},
                       "",
                       {}});
      }
    } else if (enabled == "never") {
      thp_off off = thp_off_of(s);
      out.push_back({"thp_never", advice_level::warning, head + off.why, std::move(off.evidence),
                     "madvise gives huge pages only to ranges that ask for them",
                     std::move(off.commands)});
    } else if (rt.kind == "jvm") {
      // The Java heap is the JVM's own mapping: malloc settings do not reach it.
      if (!rt.asks_for_huge && enabled == "madvise") {
        out.push_back(environment_advice(
            p, "jvm_without_thp",
            head + "the JVM heap is not advised: add -XX:+UseTransparentHugePages to the "
                   "java options (JAVA_TOOL_OPTIONS); ",
            {"runtime: " + rt.evidence,
             rt.settings_known ? "no -XX:+UseTransparentHugePages or -XX:+UseLargePages"
                               : "java options unknown (cmdline or environment unreadable)",
             "THP enabled=madvise"},
            "the whole heap is committed in 2 MiB steps (more RSS with a sparse heap)",
            "JAVA_TOOL_OPTIONS", "-XX:+UseTransparentHugePages", java_options));
      } else if (rt.asks_for_huge && frag.fragmented && fallbacks_matter(s)) {
        out.push_back({"huge_pages_not_obtained",
                       advice_level::warning,
                       head + "the JVM asks for huge pages, but free memory is fragmented and "
                              "THP faults fall back",
                       {"runtime: " + rt.evidence},
                       "",
                       {write_command("1", "/proc/sys/vm/compact_memory")}});
      }
    } else if (enabled == "madvise" && !a.environ_readable) {
      out.push_back({"allocator_settings_unknown",
                     advice_level::note,
                     head + fmt::format("{}'s settings cannot be read (environment "
                                        "unreadable), so the doctor cannot say why",
                                        a.guess.name),
                     {a.hugepage_mode},
                     "",
                     {}});
    } else if (enabled == "madvise" && a.environ_overwritten && !a.asks_for_huge) {
      out.push_back({"allocator_settings_unknown",
                     advice_level::note,
                     head + fmt::format("the process wrote its title over its environment, so "
                                        "{}'s settings are unknown",
                                        a.guess.name),
                     {"/proc/PID/environ holds no NAME=value pairs"},
                     "",
                     {}});
    } else if (enabled == "madvise" && !a.asks_for_huge) {
      advise_allocator(p, head, out);
    } else if (p.thp_eligible_anon > 0 && frag.fragmented && fallbacks_matter(s)) {
      // Ranges that could be huge were not, and the machine shows why: fragmentation with
      // fallbacks. Without both, compaction would not help.
      out.push_back({"huge_pages_not_obtained",
                     advice_level::warning,
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
      out.push_back({"pool_exhausted", advice_level::warning,
                     fmt::format("the process holds {} of {} hugetlb pages and the pool has "
                                 "none left while more was wanted",
                                 format_bytes(bytes), format_bytes(page_bytes)),
                     shortage, "",
                     target ? pool_commands(s, page_bytes, *target) : std::vector<std::string>{}});
    }
  }
  return out;
}

}  // namespace hugepage::doctor
