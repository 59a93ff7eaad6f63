// tools/doctor/advise_classes.cpp - advice per class of a process's memory, each through a
// mechanism that reaches it (advise_reach.hpp). A setting already in place that does not reach a
// class is a warning that says why and what would; where no setting reaches it, a note with
// --collapse and what undoes it.
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

using classes_t = std::vector<const memory_class_usage*>;

std::size_t resident_of(const classes_t& classes) {
  std::size_t total = 0;
  for (const memory_class_usage* c : classes) total += c->resident;
  return total;
}

std::size_t huge_of(const classes_t& classes) {
  std::size_t total = 0;
  for (const memory_class_usage* c : classes) total += std::min(c->huge, c->resident);
  return total;
}

std::size_t advised_of(const classes_t& classes) {
  std::size_t total = 0;
  for (const memory_class_usage* c : classes) total += std::min(c->advised, c->resident);
  return total;
}

// A setting that works by MADV_HUGEPAGE advised under half of `classes`: most of it is memory
// the setting never reached.
bool mostly_unadvised(const classes_t& classes) {
  return !classes.empty() && advised_of(classes) * 2 < resident_of(classes);
}

// "0 B of 700 MiB advised".
std::string advised_evidence(const classes_t& classes) {
  return fmt::format("{} of {} advised", format_bytes(advised_of(classes)),
                     format_bytes(resident_of(classes)));
}

// "glibc's thread arenas (1.20 GiB), 0.3% huge; "
std::string head_of(const classes_t& classes) {
  if (classes.empty()) return "";  // a report without classes: the caller's head
  return fmt::format("{}, {} huge; ", classes_phrase(classes),
                     percent(process_report::share(huge_of(classes), resident_of(classes))));
}

// The allocator's advice (advise_allocator) for `classes`, saying what it reaches.
void allocator_advice(const process_report& p, const system_report& s, const classes_t& classes,
                      std::vector<advice>& out) {
  std::vector<advice> list;
  advise_allocator(p, s, head_of(classes), list);
  for (advice& one : list) {
    if (one.level() == advice_level::warning) {
      one.message += "; the setting reaches " + classes_phrase(classes);
    }
    one.reaches = class_names(classes);
    out.push_back(std::move(one));
  }
}

// The classes of which `m` reaches at least half (`reached`), and the others (`missed`), with the
// first reason it gives for what it misses.
struct split {
  classes_t reached, missed;
  std::string limit;
  bool beyond_size = false;  ///< that reason is no mapping size (reach::beyond_size)
};

split split_by(fix_mechanism m, const classes_t& classes, const process_report& p,
               const system_report& s, const std::string& value = "") {
  split out;
  for (const memory_class_usage* c : classes) {
    const reach r = reach_of(m, *c, p, value, s.thp_bytes);
    if (r.bytes * 2 >= c->resident) {
      out.reached.push_back(c);
    } else {
      out.missed.push_back(c);
      if (out.limit.empty()) {
        out.limit = r.limit;
        out.beyond_size = r.beyond_size;
      }
    }
  }
  return out;
}

advice with_reach(advice a, const classes_t& classes) {
  a.reaches = class_names(classes);
  return a;
}

// What reaches `classes` when no setting of the process does: THP enabled=always and --collapse
// for what lies in mappings of at least the THP size; nothing for smaller mappings.
collapse_fallback fallback_for(const process_report& p, const system_report& s,
                               const classes_t& classes) {
  const split by_collapse = split_by(fix_mechanism::collapse, classes, p, s);
  collapse_fallback out;
  if (!by_collapse.reached.empty()) {
    out = collapse_of(p, s);
    out.text =
        "THP enabled=always (machine-wide) reaches it" + always_caveat(s) + ", or " + out.text;
  }
  if (!by_collapse.missed.empty()) {
    if (!out.text.empty()) out.text += "; ";
    if (by_collapse.beyond_size) {
      out.text += by_collapse.limit;  // no block size helps: the advice, or the mapping, decides
      return out;
    }
    out.text += fmt::format(
        "{}: neither THP enabled=always nor MADV_COLLAPSE makes such a mapping huge, only "
        "allocating in blocks of at least {} (hugepage::thp_allocator for large containers)",
        by_collapse.limit, format_bytes(s.thp_bytes));
  }
  return out;
}

// No setting of the process reaches these classes: a note with the fallback.
advice out_of_reach(const process_report& p, const system_report& s, rule_id rule,
                    const std::string& why, const classes_t& classes) {
  const collapse_fallback fallback = fallback_for(p, s, classes);
  // What the reader can check: how much of it the program advised, either way.
  std::vector<std::string> evidence{advised_evidence(classes)};
  std::size_t refused = 0;
  for (const memory_class_usage* c : classes) refused += std::min(c->refused, c->resident);
  if (refused != 0) {
    evidence.push_back(fmt::format("{} advised MADV_NOHUGEPAGE", format_bytes(refused)));
  }
  return with_reach({rule, head_of(classes) + why + "; " + fallback.text, std::move(evidence), "",
                     fallback.commands},
                    classes);
}

void advise_glibc(const process_report& p, const system_report& s, const classes_t& classes,
                  std::vector<advice>& out) {
  const allocator_report& a = p.allocator;
  const std::string head = head_of(classes);
  if (!a.environ_readable || a.environ_overwritten) {
    out.push_back(with_reach({rule_id::allocator_settings_unknown,
                              head + "glibc's settings are unknown (its environment is "
                                     "unreadable or overwritten by its title)",
                              {a.hugepage_mode},
                              "",
                              {}},
                             classes));
    return;
  }
  const split by_tunable = split_by(fix_mechanism::glibc_hugetlb_tunable, classes, p, s);
  if (!a.asks_for_huge) {
    if (!by_tunable.reached.empty()) allocator_advice(p, s, by_tunable.reached, out);
    if (!by_tunable.missed.empty()) {
      out.push_back(out_of_reach(p, s, rule_id::glibc_chunks_out_of_reach,
                                 by_tunable.limit + ", and no other malloc setting reaches it",
                                 by_tunable.missed));
    }
    return;
  }
  if (!by_tunable.reached.empty() && a.hugepage_mode.rfind("glibc.malloc.hugetlb=2", 0) == 0) {
    // =2 draws on the pool, not THP: judged by the pool.
    out.push_back(glibc_pool_advice(p, s, head_of(by_tunable.reached), by_tunable.reached));
  } else if (!by_tunable.reached.empty()) {
    out.push_back(not_obtained(p, s, a.hugepage_mode, by_tunable.reached,
                               a.hugepage_mode.rfind("glibc.malloc.hugetlb=1", 0) == 0));
  }
  if (!by_tunable.missed.empty()) {
    // The tunable is set and does not reach this memory: no all-clear.
    const collapse_fallback fallback = fallback_for(p, s, by_tunable.missed);
    out.push_back(with_reach(
        {rule_id::glibc_tunable_does_not_reach,
         head_of(by_tunable.missed) +
             fmt::format("the process has {}, but {}; ", a.hugepage_mode, by_tunable.limit) +
             fallback.text,
         {fmt::format("allocator glibc: {}", a.hugepage_mode)},
         "enabled=always raises RSS and fault latency for every process",
         fallback.commands},
        by_tunable.missed));
  }
}

void advise_allocator_arenas(const process_report& p, const system_report& s,
                             const classes_t& classes, std::vector<advice>& out) {
  const allocator_report& a = p.allocator;
  const std::string head = head_of(classes);
  if (a.guess.name == "musl") {
    // musl's malloc reads no setting, and the allocators Debian builds for glibc do not load
    // into a musl process: nothing in its environment advises its heap.
    out.push_back(out_of_reach(p, s, rule_id::musl_without_thp,
                               "musl's malloc has no huge page setting, GLIBC_TUNABLES means "
                               "nothing to it, and Debian's jemalloc, mimalloc and tcmalloc are "
                               "built for glibc and do not load into a musl program",
                               classes));
    return;
  }
  if (!a.environ_readable || a.environ_overwritten) {
    out.push_back(with_reach({rule_id::allocator_settings_unknown,
                              head + fmt::format("{}'s settings are unknown (its environment is "
                                                 "unreadable or overwritten by its title)",
                                                 a.guess.name),
                              {a.hugepage_mode},
                              "",
                              {}},
                             classes));
    return;
  }
  if (a.asks_for_huge && a.guess.name == "jemalloc" && mostly_unadvised(classes)) {
    // thp:always advises every extent jemalloc maps: memory it left unadvised is not its own,
    // but a program's direct mmap taken for its arenas.
    const collapse_fallback fallback = fallback_for(p, s, classes);
    out.push_back(with_reach(
        {rule_id::setting_does_not_reach,
         head +
             fmt::format("the process has MALLOC_CONF {}, which advises every extent of "
                         "jemalloc's own arenas, yet only {} of this memory is advised: the "
                         "rest is not jemalloc's, the program maps it itself, and no "
                         "MALLOC_CONF setting reaches it; ",
                         a.hugepage_mode, format_bytes(advised_of(classes))) +
             fallback.text,
         {fmt::format("allocator jemalloc: {}", a.hugepage_mode), advised_evidence(classes)},
         "",
         fallback.commands},
        classes));
    return;
  }
  if (a.asks_for_huge) {
    out.push_back(not_obtained(p, s, a.hugepage_mode, classes, a.guess.name == "jemalloc"));
    return;
  }
  allocator_advice(p, s, classes, out);
}

void advise_runtime_heap(const process_report& p, const system_report& s, const classes_t& classes,
                         std::vector<advice>& out) {
  const runtime_report& rt = p.runtime;
  const std::string head = head_of(classes);
  if (rt.kind == "jvm") {
    if (rt.uses_pool) {
      // The heap on base pages: the pool advice (pool_setting_advice) says by how much.
      if (jvm_heap_on_base_pages(p, s)) return;
      out.push_back(out_of_reach(
          p, s, rule_id::jvm_memory_beside_heap,
          "the JVM's heap is on hugetlb pages (-XX:+UseLargePages); this is its other memory "
          "(metaspace, GC data, thread stacks, malloc), which neither -XX:+UseLargePages nor "
          "-XX:+UseTransparentHugePages reaches",
          classes));
      return;
    }
    if (rt.asks_for_huge) {
      out.push_back(not_obtained(p, s, "the JVM's huge page flag", classes, true));
      return;
    }
    out.push_back(with_reach(jvm_thp_advice(p, head), classes));
    return;
  }
  if (rt.kind == "node") {
    out.push_back(node_advice(p, s, head, classes));
    return;
  }
  if (rt.kind == "go") {
    out.push_back(out_of_reach(p, s, rule_id::go_heap_out_of_reach, go_heap_reason(p), classes));
    return;
  }
  if (rt.kind == "dotnet") {
    // The .NET GC's documented switch: GCLargePages with a heap hard limit, which takes the
    // whole limit from the hugetlb pool at start (MAP_HUGETLB on Linux).
    const collapse_fallback fallback = collapse_of(p, s);
    advice a{rule_id::dotnet_gc_large_pages,
             head,
             {"runtime: " + rt.evidence},
             "the whole hard limit is taken from the hugetlb pool at start, used or not, and "
             "the runtime does not start when the pool is short",
             fallback.commands};
    std::string settings;
    for (const std::string& setting : rt.settings)
      settings += (settings.empty() ? "" : " ") + setting;
    if (rt.asks_for_huge) {
      a.message += fmt::format(
          "the process has {}, yet its GC heap is on base pages: the GC maps its large pages "
          "from the hugetlb pool at start and needs the whole hard limit there (the pool has "
          "{} free pages); ",
          settings, s.pools.empty() ? 0 : s.pools.front().free.value_or(0));
    } else {
      a.message +=
          "the .NET GC maps its own heap, which no malloc setting reaches; the runtime's own "
          "switch is DOTNET_GCLargePages=1 together with a heap hard limit "
          "(DOTNET_GCHeapHardLimit, hexadecimal bytes, or GCHeapHardLimitPercent), which puts "
          "the GC heap on pages from the hugetlb pool (size the pool for the limit first); ";
    }
    a.message += "without a restart, " + fallback.text;
    for (const std::string& setting : rt.settings) a.evidence.push_back(setting);
    out.push_back(with_reach(std::move(a), classes));
    return;
  }
  out.push_back(out_of_reach(p, s, rule_id::runtime_heap_out_of_reach,
                             "the runtime maps its own heap, which no malloc setting reaches and "
                             "the doctor knows no setting of this runtime for",
                             classes));
}

// Locked memory (mlockall(MCL_FUTURE), mlock) is faulted in whole when it is mapped, before malloc
// or the program can advise it: under madvise it is on base pages whatever the allocator's
// setting, and no fallback is to blame. MADV_COLLAPSE collapses locked memory (checked on Linux
// 6.18). Where locked memory is at least half of `classes`: that advice, and no other.
bool advise_locked(const process_report& p, const system_report& s, const classes_t& classes,
                   std::vector<advice>& out) {
  const std::size_t resident = resident_of(classes);
  if (p.locked * 2 < resident || huge_of(classes) * 2 >= resident) return false;
  const collapse_fallback fallback = fallback_for(p, s, classes);
  out.push_back(with_reach(
      {rule_id::locked_before_advice,
       head_of(classes) +
           fmt::format("{} of the process is locked (status VmLck: mlockall(MCL_FUTURE) or "
                       "mlock): the lock faults each mapping in on base pages as it is made, "
                       "before malloc or the program can advise it, so no setting that advises "
                       "(glibc.malloc.hugetlb, MALLOC_CONF thp:always, a runtime's flag) reaches "
                       "it, and THP fallbacks are not the cause; ",
                       format_bytes(p.locked)) +
           fallback.text,
       {fmt::format("VmLck {}", format_bytes(p.locked))},
       "",
       fallback.commands},
      classes));
  return true;
}

void advise_private(const process_report& p, const system_report& s, const classes_t& classes,
                    std::vector<advice>& out) {
  const std::string enabled = effective_enabled(s, "unknown");
  if (enabled == "madvise" && advise_locked(p, s, classes, out)) return;
  if (enabled == "never") {
    thp_off off = thp_off_of(s);
    out.push_back(with_reach(
        {rule_id::thp_never, head_of(classes) + off.why, std::move(off.evidence),
         "madvise gives huge pages only to ranges that ask for them", std::move(off.commands)},
        classes));
    return;
  }
  if (enabled == "always" && thp_except_advised(p, s)) {
    // enabled=always is set and reaches none of it: the process's own prctl keeps THP to
    // advised ranges. What advises (allocator, runtime) and MADV_COLLAPSE still reach it.
    const collapse_fallback fallback = collapse_of(p, s);
    out.push_back(with_reach(
        {rule_id::thp_disabled_except_advised,
         head_of(classes) +
             "THP enabled=always is set, yet none of this memory is THP-eligible: the process has "
             "THP disabled except where advised (prctl(PR_SET_THP_DISABLE) with "
             "PR_THP_DISABLE_EXCEPT_ADVISED, Linux 6.18: set by it, or inherited across fork and "
             "exec from its launcher), so only ranges advised MADV_HUGEPAGE get huge pages: a "
             "setting of its allocator or runtime that advises its memory reaches it, and " +
             fallback.text,
         {fmt::format("{} of private anonymous memory THPeligible",
                      format_bytes(p.thp_eligible_anon)),
          "/proc/PID/status THP_enabled: 1 (it does not show this prctl)"},
         "",
         fallback.commands},
        classes));
    return;
  }
  if (enabled == "always") {
    // THP reaches every private class already; what misses is in mappings too small.
    const split by_always = split_by(fix_mechanism::thp_always, classes, p, s);
    if (!by_always.reached.empty()) {
      out.push_back(not_obtained(p, s, "THP enabled=always", by_always.reached));
    }
    if (!by_always.missed.empty() && p.runtime.kind == "memcached" && !p.runtime.asks_for_huge) {
      // memcached's slabs: its own -L reaches them where THP cannot.
      out.push_back(memcached_advice(p, head_of(by_always.missed), by_always.missed));
    } else if (!by_always.missed.empty()) {
      out.push_back(
          with_reach({rule_id::small_mappings_out_of_reach,
                      head_of(by_always.missed) + by_always.limit + ": no setting makes them huge",
                      {},
                      "",
                      {}},
                     by_always.missed));
    }
    return;
  }
  if (enabled != "madvise") return;
  const runtime_report& rt = p.runtime;
  if (linked_in_allocator(p) && rt.kind.empty()) {
    out.push_back(linked_in_allocator_advice(p, s, head_of(classes), classes));
    return;
  }
  // A JVM's or V8's heap is its own anonymous mmap: where no class of the report says
  // runtime_heap, the runtime's anonymous mappings are taken for it.
  const bool heap_in_mmap =
      (rt.kind == "jvm" || rt.kind == "node") &&
      std::none_of(p.classes.begin(), p.classes.end(), [](const memory_class_usage& c) {
        return c.kind == memory_class::runtime_heap;
      });
  classes_t glibc, arenas, heap, own;
  for (const memory_class_usage* c : classes) {
    if (heap_in_mmap && c->kind == memory_class::anonymous_mmap) {
      heap.push_back(c);
      continue;
    }
    switch (c->kind) {
      case memory_class::glibc_main_arena:
      case memory_class::glibc_thread_arenas:
      case memory_class::glibc_mmapped_chunks: glibc.push_back(c); break;
      case memory_class::allocator_arenas: arenas.push_back(c); break;
      case memory_class::runtime_heap: heap.push_back(c); break;
      default: own.push_back(c); break;
    }
  }
  if (rt.kind == "python") {
    // numpy's array buffers: malloc'd, in glibc's chunks or where their headers were not told
    // (anonymous mappings of their own); its madvise reaches both.
    classes_t buffers = glibc;
    buffers.insert(buffers.end(), own.begin(), own.end());
    if (!buffers.empty()) {
      if (auto numpy = numpy_advice(p, head_of(buffers), buffers)) {
        out.push_back(std::move(*numpy));
        glibc.clear();
        own.clear();
      }
    }
  }
  if (!glibc.empty()) {
    if (rt.kind == "memcached") {
      out.push_back(rt.asks_for_huge ? not_obtained(p, s, "memcached -L", glibc)
                                     : memcached_advice(p, head_of(glibc), glibc));
    } else {
      advise_glibc(p, s, glibc, out);
    }
  }
  if (!arenas.empty()) advise_allocator_arenas(p, s, arenas, out);
  if (!heap.empty()) advise_runtime_heap(p, s, heap, out);
  if (!own.empty()) {
    std::size_t advised = 0, refused = 0;
    for (const memory_class_usage* c : own) {
      advised += std::min(c->advised, c->resident);
      refused += std::min(c->refused, c->resident);
    }
    if (advised * 2 >= resident_of(own)) {
      out.push_back(not_obtained(p, s, "the program's MADV_HUGEPAGE", own));
    } else if (refused * 2 > resident_of(own)) {
      out.push_back(out_of_reach(p, s, rule_id::anonymous_mmap_out_of_reach,
                                 "the program maps it itself and advises it MADV_NOHUGEPAGE: no "
                                 "malloc or runtime setting reaches it",
                                 own));
    } else {
      out.push_back(out_of_reach(p, s, rule_id::anonymous_mmap_out_of_reach,
                                 "the program maps it itself without MADV_HUGEPAGE: no malloc "
                                 "or runtime setting reaches it, only the program's own madvise",
                                 own));
    }
  }
}

void advise_shared(const process_report& p, const system_report& s, const memory_class_usage& c,
                   std::vector<advice>& out) {
  const std::string value = s.thp.shmem_enabled.value_or("");
  const classes_t classes{&c};
  const reach r = reach_of(fix_mechanism::shmem_enabled, c, p, value, s.thp_bytes);
  if (r.bytes * 2 >= c.resident) {
    out.push_back(not_obtained(p, s, "shmem_enabled=" + value, classes));
    return;
  }
  // advise is enough where the program advises; within_size reaches the rest.
  const bool advised = std::min(c.advised, c.resident) * 2 >= c.resident;
  const std::string target = advised ? "advise" : "within_size";
  const std::string file = fmt::format("{}/shmem_enabled", thp_dir);
  out.push_back(with_reach(
      {value == "advise" ? rule_id::shmem_not_advised : rule_id::shmem_without_thp,
       head_of(classes) +
           fmt::format("{}: shmem_enabled={} reaches it; what it holds now stays on base pages "
                       "until the program maps it again (restart it)",
                       r.limit, target),
       {fmt::format("{}: {}", file, value.empty() ? "unknown" : value),
        fmt::format("{} of it advised MADV_HUGEPAGE", format_bytes(c.advised))},
       target == "advise"
           ? "advise: only ranges with MADV_HUGEPAGE get huge pages"
           : "machine-wide: every shared anonymous mapping and memfd grows in 2 MiB steps up to "
             "its size, more memory for sparse ones",
       sysfs_setting(target, file)},
      classes));
}

void advise_tmpfs(const process_report& p, const system_report& s, const memory_class_usage& c,
                  std::vector<advice>& out) {
  const std::string shmem = s.thp.shmem_enabled.value_or("");
  const classes_t classes{&c};
  const std::string huge = c.mount_huge.empty() ? "never" : c.mount_huge;
  const std::string mount = c.mount.empty() ? "its tmpfs mount" : printable(c.mount);
  if (shmem == "force") {
    out.push_back(not_obtained(p, s, "shmem_enabled=force", classes));
    return;
  }
  const reach by_mount = reach_of(fix_mechanism::tmpfs_huge, c, p, huge, s.thp_bytes);
  if (shmem != "deny" && by_mount.bytes * 2 >= c.resident) {
    out.push_back(with_reach(
        {rule_id::tmpfs_pages_predate_huge,
         head_of(classes) +
             fmt::format("{} has huge={}, which reaches these files, but pages written before "
                         "it was set stay small until the files are written again: restart the "
                         "program or re-create the files",
                         mount, huge),
         {fmt::format("{} mounted with huge={}", mount, huge)},
         "",
         {}},
        classes));
    return;
  }
  // The mount already right, only deny in the way: shmem_deny_overrides_mount.
  const bool only_deny = shmem == "deny" && by_mount.bytes * 2 >= c.resident;
  advice a{only_deny ? rule_id::shmem_deny_overrides_mount : rule_id::tmpfs_mount_without_huge,
           head_of(classes)};
  a.evidence.push_back(fmt::format("{} mounted with huge={}", mount, huge));
  if (!shmem.empty()) a.evidence.push_back(fmt::format("{}/shmem_enabled: {}", thp_dir, shmem));
  if (only_deny) {
    a.message += fmt::format(
        "{} already has huge={}, which would reach these files, but shmem_enabled=deny "
        "overrides every tmpfs mount's huge=: set shmem_enabled to never (or advise, "
        "within_size, always: anything but deny and force leaves each mount its own huge=); "
        "pages already in the files stay on base pages until the files are written again: "
        "restart the program or re-create the files",
        mount, huge);
    a.commands = sysfs_setting("never", fmt::format("{}/shmem_enabled", thp_dir));
    a.trade = "never: shared anonymous memory and memfd get base pages (as under deny)";
    out.push_back(with_reach(std::move(a), classes));
    return;
  }
  if (shmem == "deny") {
    a.message += "shmem_enabled=deny overrides every tmpfs mount's huge=; ";
    a.commands = sysfs_setting("never", fmt::format("{}/shmem_enabled", thp_dir));
  } else {
    a.message += by_mount.limit + "; ";
    if (!shmem.empty() && shmem != "never") {
      a.message += fmt::format(
          "shmem_enabled={} does not reach them: a file on a tmpfs mount follows the mount's "
          "huge= (only force and deny override every mount); ",
          shmem);
    }
  }
  const bool safe_mount = !c.mount.empty() && c.mount[0] == '/' && printable_ascii(c.mount) &&
                          c.mount.find_first_of(" \\'\"#") == std::string::npos;
  a.message += fmt::format(
      "remount {} with huge=within_size, which reaches them; pages already in the files stay on "
      "base pages until the files are written again: restart the program or re-create the files "
      "after the remount",
      mount);
  if (p.own_mount_namespace) {
    // A container's mount: the host's mount point of that name is another mount, and the
    // host's /etc/fstab does not make the container's. The remount acts in its namespace.
    if (safe_mount) {
      a.commands.push_back(shell_line({"nsenter", "-t", std::to_string(p.pid), "-m", "mount", "-o",
                                       "remount,huge=within_size", c.mount}));
    }
    const std::string remount =
        safe_mount ? fmt::format("the command remounts its {} from inside that namespace", mount)
                   : fmt::format("a remount of its {} must run inside that namespace", mount);
    a.message += fmt::format(
        "; the process has a mount namespace of its own (a container): {} (nsenter -t {} -m), "
        "not the host's, and lasts until the container restarts; the host's /etc/fstab does not "
        "reach it, so set huge=within_size where the container's mounts are defined",
        remount, p.pid);
    a.evidence.push_back("/proc/PID/ns/mnt differs from the doctor's: its own mount namespace");
  } else if (safe_mount) {
    a.commands.push_back(shell_line({"mount", "-o", "remount,huge=within_size", c.mount}));
    if (c.mount == "/dev/shm") {
      a.commands.push_back(dev_shm_fstab_command(s));
    } else {
      a.message += fmt::format(
          "; to keep it after a reboot, add huge=within_size to {}'s line in /etc/fstab by hand",
          c.mount);
    }
  }
  if (!safe_mount && !c.mount.empty()) {
    a.message +=
        "; no command is printed: the mount point holds characters the doctor will not put into "
        "a command (a space, a quote, a backslash, #, or a byte that is not printable ASCII)";
  }
  a.trade = "files on the mount grow in 2 MiB steps up to their size: more memory for sparse ones";
  out.push_back(with_reach(std::move(a), classes));
}

// Classes each under advice_threshold(), from unreached_floor together on base pages: as notes,
// the advice a class over it gets where a setting reaches it, else why nothing does and --collapse.
void advise_unreached(const process_report& p, const system_report& s, std::vector<advice>& out) {
  if (effective_enabled(s, "unknown") != "madvise") return;
  classes_t left, reachable, shared;
  std::string why;
  std::size_t base = 0, total = 0;
  for (const memory_class_usage& c : p.classes) {
    const bool priv = private_anonymous(c.kind);
    const bool shmem =
        c.kind == memory_class::shared_anonymous || c.kind == memory_class::tmpfs_file;
    if ((!priv && !shmem) || wants_huge(c, p) || c.huge_fraction() >= 0.5) continue;
    const std::size_t on_base = c.resident - std::min(c.huge, c.resident);
    total += on_base;
    // A class of a few MiB counts in the total but gets no advice of its own (noise).
    if (on_base < unreached_floor / 16) continue;
    if (shmem) {
      if (p.runtime.kind != "postgres") shared.push_back(&c);
      continue;
    }
    const std::string reason = out_of_reach_reason(c, p, s.thp_bytes);
    if (reason.empty()) {
      reachable.push_back(&c);
      continue;
    }
    left.push_back(&c);
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", class_phrase(c.kind), reason);
    base += on_base;
  }
  if (total < unreached_floor) return;
  const std::string under = fmt::format("each class under {}, together {} on base pages",
                                        format_bytes(advice_threshold(p)), format_bytes(total));
  std::vector<advice> more;
  if (!reachable.empty()) advise_private(p, s, reachable, more);
  for (const memory_class_usage* c : shared) {
    c->kind == memory_class::shared_anonymous ? advise_shared(p, s, *c, more)
                                              : advise_tmpfs(p, s, *c, more);
  }
  for (advice& a : more) {
    a.lower_to_note();
    a.evidence.push_back(under);
    out.push_back(std::move(a));
  }
  if (left.empty() || base == 0) return;
  out.push_back(
      out_of_reach(p, s, rule_id::base_pages_out_of_reach,
                   fmt::format("{} on base pages that no setting of the process reaches ({})",
                               format_bytes(base), why),
                   left));
  out.back().evidence.push_back(under);
}

// Copies in private file mappings from unreached_floor on base pages: a note, whatever the THP
// mode (no setting reaches them, so none is named), never a quiet all-clear.
void advise_file_copies(const process_report& p, const system_report& s, std::vector<advice>& out) {
  for (const memory_class_usage& c : p.classes) {
    if (c.kind != memory_class::file_copies) continue;
    const std::size_t on_base = c.resident - std::min(c.huge, c.resident);
    if (on_base < unreached_floor) return;
    const reach r = reach_of(fix_mechanism::collapse, c, p, "", s.thp_bytes);
    out.push_back(with_reach(
        {rule_id::file_copies_out_of_reach,
         head_of({&c}) +
             fmt::format("the process wrote {} in MAP_PRIVATE mappings of files (smaps "
                         "Anonymous of a file mapping): its own memory, not page cache, and {}; "
                         "only the program can have it huge, by reading the file into anonymous "
                         "memory it advises MADV_HUGEPAGE (hugepage::thp_allocator) instead of "
                         "writing a private mapping of the file",
                         format_bytes(c.resident), r.limit),
         {fmt::format("{} in {} private file mappings", format_bytes(c.resident), c.mappings)},
         "",
         {}},
        {&c}));
    return;
  }
}

}  // namespace

advice not_obtained(const process_report& p, const system_report& s, const std::string& setting,
                    const std::vector<const memory_class_usage*>& classes, bool by_madvise) {
  if (by_madvise && mostly_unadvised(classes)) {
    // The setting is in place and advised under half of this memory: it did not reach the rest.
    const collapse_fallback fallback = fallback_for(p, s, classes);
    return with_reach({rule_id::setting_does_not_reach,
                       head_of(classes) +
                           fmt::format("{} is set, but only {} of this memory is advised "
                                       "MADV_HUGEPAGE: the setting does not reach the rest; ",
                                       setting, format_bytes(advised_of(classes))) +
                           fallback.text,
                       {advised_evidence(classes)},
                       "",
                       fallback.commands},
                      classes);
  }
  const fragmentation frag = fragmentation_of(s);
  if (frag.fragmented && fallbacks_matter(s)) {
    return with_reach(
        {rule_id::huge_pages_not_obtained,
         head_of(classes) + fmt::format("{} reaches it, but free memory is fragmented and THP "
                                        "faults fall back",
                                        setting),
         {fmt::format("{} free, {} in {} blocks", format_bytes(frag.free), format_bytes(frag.ready),
                      format_bytes(s.thp_bytes))},
         "one compaction pass stalls the machine briefly",
         {write_command("1", "/proc/sys/vm/compact_memory")}},
        classes);
  }
  // Advised and not all huge. A range holds huge pages only in its whole aligned THP-sized
  // parts (a chunk of 4 MiB + 4 KiB holds one or two), so advised memory may be partly huge at
  // best: from 40% on a note, not a warning.
  const double share =
      classes.empty() ? 0.0 : process_report::share(huge_of(classes), resident_of(classes));
  const collapse_fallback fallback = collapse_of(p, s);
  advice a{rule_id::advised_but_not_huge,
           head_of(classes) +
               fmt::format("{} reaches it, yet it is not all huge: a range advised MADV_HUGEPAGE "
                           "is huge only in its whole {}-aligned parts (a range not aligned to "
                           "{} holds fewer), THP faults that found no free {} block fell back "
                           "to base pages, and khugepaged collapses the rest only slowly; ",
                           setting, format_bytes(s.thp_bytes), format_bytes(s.thp_bytes),
                           format_bytes(s.thp_bytes)) +
               fallback.text,
           {},
           "",
           fallback.commands};
  if (share >= 0.4) a.lower_to_note();
  if (!classes.empty()) a.evidence.push_back(advised_evidence(classes));
  return with_reach(std::move(a), classes);
}

void advise_classes(const process_report& p, const system_report& s, std::vector<advice>& out) {
  if (p.thp_enabled && !*p.thp_enabled) return;  // advise_thp_disabled
  classes_t priv;
  for (const memory_class_usage& c : p.classes) {
    if (!wants_huge(c, p)) continue;
    if (private_anonymous(c.kind)) {
      priv.push_back(&c);
    } else if (c.kind == memory_class::shared_anonymous && p.runtime.kind != "postgres") {
      advise_shared(p, s, c, out);  // PostgreSQL's is better on the hugetlb pool
    } else if (c.kind == memory_class::tmpfs_file) {
      advise_tmpfs(p, s, c, out);
    }
  }
  if (!priv.empty()) advise_private(p, s, priv, out);
  advise_unreached(p, s, out);
  advise_file_copies(p, s, out);
}

}  // namespace hugepage::doctor
