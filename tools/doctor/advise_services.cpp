// tools/doctor/advise_services.cpp - advice through a service's own setting: MariaDB's large
// pages, memcached's -L, numpy's madvise; what no setting reaches (V8's heap, a linked-in
// allocator); THP disabled for the process.
#include <fmt/format.h>

#include <algorithm>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "advise_reach.hpp"
#include "format.hpp"
#include "process_report.hpp"
#include "system_report.hpp"
#include "text.hpp"
#include "thp_disabler.hpp"

namespace hugepage::doctor {

namespace {

// Whether glibc malloc runs with glibc.malloc.hugetlb=1, as allocator_settings.cpp read it from
// GLIBC_TUNABLES (the last entry for the name wins; "glibc.malloc.hugetlb=10" is no 1).
bool glibc_tunable_set(const process_report& p) {
  return p.allocator.hugepage_mode.rfind("glibc.malloc.hugetlb=1 ", 0) == 0;
}

// The hugetlb page the kernel hands out by default (meminfo Hugepagesize), else the smallest pool.
std::size_t default_hugetlb_page(const system_report& s) {
  if (const auto size = meminfo(s, "Hugepagesize"); size && *size > 0) return *size;
  return s.pools.empty() ? s.thp_bytes : s.pools.front().page_bytes;
}

// The mapping a database's buffer pool is: the largest private anonymous mapping among those
// with the most resident bytes (MariaDB also reserves terabytes of address space it never
// touches); nullptr when none is listed.
const anon_mapping* buffer_pool_mapping(const process_report& p) {
  const anon_mapping* pool = nullptr;
  for (const anon_mapping& m : p.largest) {
    if (!m.shared && m.resident > 0 && (pool == nullptr || m.size > pool->size)) pool = &m;
  }
  return pool;
}

// Whether the buffer pool is on base pages. Another hugetlb mapping of the server (MariaDB maps
// a smaller one for its log buffer) says nothing about the buffer pool's.
bool buffer_pool_on_base_pages(const process_report& p, const system_report& s) {
  const anon_mapping* pool = buffer_pool_mapping(p);
  if (pool == nullptr) return p.hugetlb_total() == 0;
  return pool->kernel_page_bytes <= s.base_page_bytes;
}

// The size of the buffer pool's mapping, else the largest of the classes.
std::size_t largest_private_mapping(const process_report& p) {
  if (const anon_mapping* pool = buffer_pool_mapping(p)) return pool->size;
  std::size_t largest = 0;
  for (const memory_class_usage& c : p.classes) {
    if (c.kind == memory_class::anonymous_mmap || c.kind == memory_class::runtime_heap) {
      largest = std::max(largest, c.largest_mapping);
    }
  }
  return largest;
}

// What MariaDB's buffer pool needs from the hugetlb pool of the default page size.
struct buffer_pool_need {
  std::size_t page = 0;   ///< the default hugetlb page
  std::size_t bytes = 0;  ///< the buffer pool's mapping
  std::uint64_t pages = 0, total = 0, available = 0, missing = 0;
};

// What `bytes` mapped from the hugetlb pool of `page` (0: the default page) needs of that pool.
buffer_pool_need pool_need_of(std::size_t bytes, std::size_t page, const system_report& s) {
  buffer_pool_need n;
  n.page = std::max<std::size_t>(page != 0 ? page : default_hugetlb_page(s), 1);
  n.bytes = bytes;
  n.pages = (n.bytes + n.page - 1) / n.page;
  for (const hugetlb_pool& pool : s.pools) {
    if (pool.page_bytes != n.page) continue;
    n.total = pool.total.value_or(0);
    n.available = pool.available().value_or(0);
  }
  n.missing = n.pages > n.available ? n.pages - n.available : 0;
  return n;
}

buffer_pool_need buffer_pool_need_of(const process_report& p, const system_report& s) {
  return pool_need_of(largest_private_mapping(p), 0, s);
}

// The JVM's heap: its private mapping with the most resident bytes (p.largest is in that order);
// nullptr when none is listed (a report from stored files).
const anon_mapping* jvm_heap_mapping(const process_report& p) {
  for (const anon_mapping& m : p.largest) {
    if (!m.shared && m.resident > 0) return &m;
  }
  return nullptr;
}

// ", 253 short: reserve 253 more pages of 2 MiB" or " now, enough".
std::string shortfall(const buffer_pool_need& n) {
  return n.missing > 0 ? fmt::format(", {} short: reserve {} more {} of {}", n.missing, n.missing,
                                     n.missing == 1 ? "page" : "pages", format_bytes(n.page))
                       : " now, enough";
}

// A MariaDB advice: `why` first among the facts, then the buffer pool and the pool, the pages
// it reserves as the cost, and the command that grows the pool by what it misses.
advice mariadb_advice(rule_id rule, std::string message, std::string why, const buffer_pool_need& n,
                      const process_report& p, const system_report& s) {
  advice a{
      rule,
      std::move(message),
      {std::move(why),
       fmt::format("largest private anonymous mapping {} (the buffer pool)", format_bytes(n.bytes)),
       fmt::format("hugetlb pool of {}: {} pages, {} available", format_bytes(n.page), n.total,
                   n.available),
       "runtime: " + p.runtime.evidence},
      fmt::format("{} reserved for the server, unusable for anything else",
                  format_bytes(n.pages * n.page)),
      {}};
  a.reaches = {name_of(memory_class::anonymous_mmap)};
  if (n.missing > 0) {
    if (const auto target = capped_pool_target(s, n.page, n.total, n.total + n.missing)) {
      a.commands = pool_commands(s, n.page, *target);
    }
  }
  return a;
}

advice mariadb_large_pages(const process_report& p, const system_report& s) {
  const buffer_pool_need n = buffer_pool_need_of(p, s);
  if (p.runtime.asks_for_huge) {
    // --large-pages without pool pages: MariaDB falls back to base pages and still starts.
    return mariadb_advice(
        rule_id::mariadb_pool_short,
        fmt::format("MariaDB has {}, yet its buffer pool ({}) is on base pages: when the "
                    "hugetlb pool is short at start it falls back to base pages and runs on (only "
                    "its error log says so); it needs {} pages of {}, the pool has {} free{}; "
                    "then restart it",
                    p.runtime.settings.back(), format_bytes(n.bytes), n.pages, format_bytes(n.page),
                    n.available,
                    n.missing > 0 ? fmt::format(", {} short: grow the pool by {} {}", n.missing,
                                                n.missing, n.missing == 1 ? "page" : "pages")
                                  : " now, enough"),
        "the buffer pool's mapping is on base pages (smaps KernelPageSize)", n, p, s);
  }
  return mariadb_advice(
      rule_id::mariadb_large_pages,
      fmt::format("{} with prctl(PR_SET_THP_DISABLE), so its buffer pool ({}) is on base "
                  "pages: set large_pages=ON under [mysqld] in "
                  "its configuration, which maps the buffer pool from the hugetlb pool (and "
                  "silently falls back to base pages when the pool is short); it needs {} "
                  "pages of {}, the pool has {} free{}",
                  p.thp_disabled_by == thp_disabler::process ? "MariaDB turned THP off for itself"
                                                             : "THP is off for MariaDB",
                  format_bytes(n.bytes), n.pages, format_bytes(n.page), n.available,
                  n.missing > 0 ? fmt::format(", {} short", n.missing) : ", enough"),
      "/proc/PID/status THP_enabled: 0", n, p, s);
}

}  // namespace

bool jvm_heap_on_base_pages(const process_report& p, const system_report& s) {
  if (p.runtime.kind != "jvm" || !p.runtime.uses_pool) return false;
  if (const anon_mapping* heap = jvm_heap_mapping(p)) {
    return heap->kernel_page_bytes <= s.base_page_bytes && heap->resident >= s.thp_bytes;
  }
  return p.hugetlb_total() == 0 && p.anonymous >= 64 * units::mib;
}

std::optional<advice> pool_setting_advice(const process_report& p, const system_report& s) {
  const runtime_report& rt = p.runtime;
  if (rt.kind == "mariadb" && rt.uses_pool && !(p.thp_enabled && !*p.thp_enabled) &&
      buffer_pool_on_base_pages(p, s) && largest_private_mapping(p) >= 64 * units::mib) {
    // With THP off (MariaDB turns it off for itself) advise_thp_disabled says this.
    return mariadb_large_pages(p, s);
  }
  if (!jvm_heap_on_base_pages(p, s)) return std::nullopt;
  // -XX:+UseLargePages alone: the heap reserved from the hugetlb pool at start, all of -Xmx;
  // a short pool and the JVM warns on its own output and runs on with base pages.
  const anon_mapping* heap = jvm_heap_mapping(p);
  const std::size_t bytes = rt.heap_bytes != 0 ? rt.heap_bytes : heap != nullptr ? heap->size : 0;
  if (bytes == 0) return std::nullopt;
  // The JVM maps more than its heap from the pool, and before it: the code cache (all of
  // ReservedCodeCacheSize) and G1's structures beside the heap, each its own mapping rounded up
  // to whole pages: two mark bitmaps of heap/64 (JDK 17; one from JDK 20), the block offset
  // table, card table and card counts of heap/512 each. An estimate: other collectors need less.
  buffer_pool_need n = pool_need_of(bytes, rt.pool_page_bytes, s);
  const auto heap_class = [&p] {
    return std::any_of(p.classes.begin(), p.classes.end(),
                       [](const auto& c) { return c.kind == memory_class::runtime_heap; });
  };
  // -XX:LargePageSizeInBytes names a size the kernel has no pool of (3m): a pool command would
  // write a sysfs directory that cannot exist; the size is what to change.
  if (rt.pool_page_bytes != 0 &&
      std::none_of(s.pools.begin(), s.pools.end(),
                   [&n](const hugetlb_pool& pool) { return pool.page_bytes == n.page; })) {
    std::string sizes;
    for (const hugetlb_pool& pool : s.pools) {
      sizes += (sizes.empty() ? "" : ", ") + format_bytes(pool.page_bytes);
    }
    advice a{
        rule_id::jvm_pool_short,
        fmt::format("the JVM has -XX:+UseLargePages with -XX:LargePageSizeInBytes={}, which "
                    "is not a huge page size here (the kernel lists {} in "
                    "/sys/kernel/mm/hugepages), and its heap ({}) is on base pages: set "
                    "-XX:LargePageSizeInBytes to a size listed there, or leave it out for "
                    "the default; then restart it",
                    format_bytes(n.page), sizes.empty() ? "none" : sizes, format_bytes(n.bytes)),
        {fmt::format("-XX:LargePageSizeInBytes={}: no hugepages-{}kB directory",
                     format_bytes(n.page), n.page / units::kib),
         "runtime: " + rt.evidence},
        "",
        {}};
    a.reaches = {name_of(heap_class() ? memory_class::runtime_heap : memory_class::anonymous_mmap)};
    return a;
  }
  const auto pages_of = [&](std::size_t b) { return (b + n.page - 1) / n.page; };
  const std::uint64_t heap_pages = n.pages, code_pages = pages_of(rt.code_cache_bytes);
  const std::uint64_t gc_pages = 2 * pages_of(bytes / 64) + 3 * pages_of(bytes / 512);
  n.pages = heap_pages + code_pages + gc_pages;
  n.missing = n.pages > n.available ? n.pages - n.available : 0;
  advice a{
      rule_id::jvm_pool_short,
      fmt::format("the JVM has -XX:+UseLargePages (without -XX:+UseTransparentHugePages), "
                  "which maps its heap from the hugetlb pool, yet its heap ({}) is on base "
                  "pages: when the pool is short at start the JVM falls back to base pages "
                  "and runs on (only a warning on its own output says so); it needs about {} "
                  "pages of {} ({} for the heap, {} for the code cache of {}, about {} for the "
                  "garbage collector's structures, which it maps from the pool first), the pool "
                  "has {} free{}; then restart it",
                  format_bytes(n.bytes), n.pages, format_bytes(n.page), heap_pages, code_pages,
                  format_bytes(rt.code_cache_bytes), gc_pages, n.available, shortfall(n)),
      {heap != nullptr ? fmt::format("the heap's mapping ({} resident) is on base pages "
                                     "(smaps KernelPageSize)",
                                     format_bytes(heap->resident))
                       : "no hugetlb pages in the process",
       rt.heap_bytes != 0
           ? fmt::format("heap {} (-Xmx or -XX:MaxHeapSize)", format_bytes(n.bytes))
           : fmt::format("heap {} (its largest resident mapping; no -Xmx)", format_bytes(n.bytes)),
       fmt::format("code cache {} (-XX:ReservedCodeCacheSize or its default)",
                   format_bytes(rt.code_cache_bytes)),
       fmt::format("hugetlb pool of {}: {} pages, {} available", format_bytes(n.page), n.total,
                   n.available),
       "runtime: " + rt.evidence},
      fmt::format("{} reserved for the JVM, unusable for anything else",
                  format_bytes(n.pages * n.page)),
      {}};
  a.reaches = {name_of(heap_class() ? memory_class::runtime_heap : memory_class::anonymous_mmap)};
  if (n.missing > 0) {
    if (const auto target = capped_pool_target(s, n.page, n.total, n.total + n.missing)) {
      a.commands = pool_commands(s, n.page, *target);
    }
  }
  return a;
}

advice jvm_thp_advice(const process_report& p, const std::string& head) {
  const runtime_report& rt = p.runtime;
  // The variable whose -XX:+UseTransparentHugePages wins over the -XX:- the JVM has: the JVM
  // reads JAVA_TOOL_OPTIONS first and _JAVA_OPTIONS last, so a -XX:- on the command line or in
  // JDK_JAVA_OPTIONS overrides JAVA_TOOL_OPTIONS, and only _JAVA_OPTIONS overrides it.
  const bool late = rt.thp_off && rt.thp_flag_source != "JAVA_TOOL_OPTIONS";
  const std::string name = late ? "_JAVA_OPTIONS" : "JAVA_TOOL_OPTIONS";
  std::string why =
      late ? fmt::format(
                 "the JVM has -XX:-UseTransparentHugePages from {}, which a flag in "
                 "JAVA_TOOL_OPTIONS cannot override (the JVM reads that first): remove it from {}, "
                 "or add -XX:+UseTransparentHugePages to _JAVA_OPTIONS, which the JVM reads last "
                 "and which wins (it prints \"Picked up _JAVA_OPTIONS\" on its error output); ",
                 rt.thp_flag_source, rt.thp_flag_source)
           : "the JVM heap is not advised: add -XX:+UseTransparentHugePages to the java options "
             "(JAVA_TOOL_OPTIONS), which reaches it; ";
  return environment_advice(
      p, rule_id::jvm_without_thp, head + why,
      {"runtime: " + rt.evidence,
       !rt.settings_known ? "java options unknown (cmdline or environment unreadable)"
       : rt.thp_off       ? "-XX:-UseTransparentHugePages from " + rt.thp_flag_source
                          : "no -XX:+UseTransparentHugePages or -XX:+UseLargePages",
       "THP enabled=madvise"},
      "the whole heap is committed in 2 MiB steps (more RSS with a sparse heap)", name,
      "-XX:+UseTransparentHugePages", java_options);
}

advice glibc_pool_advice(const process_report& p, const system_report& s, const std::string& head,
                         const std::vector<const memory_class_usage*>& classes) {
  // Each mapping glibc makes takes whole pages: the classes' pool_bytes, where known, else
  // their base-page bytes.
  std::size_t base = 0, pool = 0;
  for (const memory_class_usage* c : classes) {
    base += c->resident - std::min(c->huge, c->resident);
    pool += c->pool_bytes;
  }
  buffer_pool_need n = pool_need_of(std::max(base, pool), 0, s);
  advice a{rule_id::glibc_hugetlb_pool_short,
           head + fmt::format("GLIBC_TUNABLES has glibc.malloc.hugetlb=2, which maps malloc's "
                              "chunks and thread arenas from the hugetlb pool, yet {} of this "
                              "memory is on base pages: glibc falls back to base pages, without "
                              "a word, for each mapping it makes while the pool has no free page; "
                              "it needs at least {} pages of {} (each mapping glibc makes takes "
                              "whole pages: a 132 KiB chunk takes one), the pool has {} free{}; "
                              "then restart the process",
                              format_bytes(base), n.pages, format_bytes(n.page), n.available,
                              shortfall(n)),
           {fmt::format("allocator glibc: {}", p.allocator.hugepage_mode),
            fmt::format("hugetlb pool of {}: {} pages, {} available", format_bytes(n.page), n.total,
                        n.available)},
           fmt::format("{} reserved for the process, unusable for anything else",
                       format_bytes(n.pages * n.page)),
           {}};
  a.reaches = class_names(classes);
  if (n.missing > 0) {
    if (const auto target = capped_pool_target(s, n.page, n.total, n.total + n.missing)) {
      a.commands = pool_commands(s, n.page, *target);
    }
  }
  return a;
}

void advise_thp_disabled(const process_report& p, const system_report& s, const std::string& head,
                         std::vector<advice>& out) {
  const runtime_report& rt = p.runtime;
  if (rt.kind == "mariadb" && buffer_pool_on_base_pages(p, s)) {
    out.push_back(mariadb_large_pages(p, s));
  }
  if (rt.kind == "redis") return;  // its own choice, noted apart
  // A database that turns THP off for itself chose to: its own large pages are the fix (above).
  if (rt.kind == "mariadb" && p.thp_disabled_by == thp_disabler::process) return;
  std::string who;
  switch (p.thp_disabled_by) {
    case thp_disabler::process:
      // Its parent has THP on. A launcher that called prctl and then exec'd it looks the same.
      who =
          "THP is off for the process (prctl(PR_SET_THP_DISABLE)) but not for its parent: the "
          "process turned it off, or a launcher that exec'd it did (the setting survives "
          "exec): look for a huge page option of the program or of its launcher";
      break;
    case thp_disabler::inherited:
      who =
          "THP is disabled by prctl(PR_SET_THP_DISABLE), inherited across fork and exec from "
          "whatever started it: its launcher, systemd unit or shell set it (its parent has THP "
          "off too)";
      break;
    default:
      who =
          "THP is disabled for the process with prctl(PR_SET_THP_DISABLE), by the process or by "
          "whatever started it (inherited across exec); its parent cannot tell which (unreadable, "
          "or PID 1, which also adopts orphans)";
      break;
  }
  out.push_back({rule_id::process_thp_disabled,
                 head + who +
                     "; its anonymous memory stays on base pages, so every TLB miss on it pays "
                     "a page walk, and MADV_COLLAPSE (--collapse) refuses it too",
                 {"/proc/PID/status THP_enabled: 0",
                  fmt::format("disabled by: {}", name_of(p.thp_disabled_by))},
                 "",
                 {}});
}

advice memcached_advice(const process_report& p, const std::string& head,
                        const std::vector<const memory_class_usage*>& classes) {
  advice a{rule_id::memcached_large_pages,
           head + fmt::format("memcached's slabs are 1 MiB malloc chunks, which "
                              "glibc.malloc.hugetlb=1{} never advises (it advises chunks of at "
                              "least 2 MiB): start memcached with -L (--enable-largepages), which "
                              "allocates its whole memory limit at start in one block aligned to "
                              "the huge page and advises it MADV_HUGEPAGE{}",
                              glibc_tunable_set(p) ? " (in the GLIBC_TUNABLES it has)" : "",
                              classes.empty() ? "" : "; -L reaches " + classes_phrase(classes)),
           {"runtime: " + p.runtime.evidence, "no -L on its command line",
            fmt::format("allocator {}: {}", p.allocator.guess.name, p.allocator.hugepage_mode)},
           "the whole -m limit is allocated at start, whether the cache fills it or not",
           {}};
  a.reaches = class_names(classes);
  return a;
}

advice node_advice(const process_report& p, const system_report& s, const std::string& head,
                   const std::vector<const memory_class_usage*>& classes) {
  const collapse_fallback fallback = collapse_of(p, s);
  advice a{rule_id::node_heap_unreachable,
           head +
               fmt::format("Node.js maps V8's heap itself, and no setting advises it under THP "
                           "madvise (node's --use-largepages remaps its code only){}; THP "
                           "enabled=always (machine-wide) reaches it, and ",
                           glibc_tunable_set(p) ? "; the GLIBC_TUNABLES it has reaches only "
                                                  "glibc malloc's chunks, not V8's heap"
                                                : "") +
               fallback.text,
           {"runtime: " + p.runtime.evidence},
           "enabled=always raises RSS and fault latency for every process",
           fallback.commands};
  a.reaches = class_names(classes);
  return a;
}

std::optional<advice> numpy_advice(const process_report& p, const std::string& head,
                                   const std::vector<const memory_class_usage*>& classes) {
  const runtime_report& rt = p.runtime;
  if (rt.kind != "python" || rt.asks_for_huge || rt.settings.empty()) return std::nullopt;
  advice a{rule_id::numpy_madvise_disabled,
           head + fmt::format("{} in its environment turns off numpy's own MADV_HUGEPAGE on its "
                              "array buffers of 4 MiB and up{}: remove it from the environment "
                              "that starts the process (numpy advises them by default on Linux)",
                              rt.settings.back(),
                              classes.empty() ? "" : " (" + classes_phrase(classes) + ")"),
           {"runtime: " + rt.evidence, rt.settings.back() + " (/proc/PID/environ)"},
           "more RSS for sparsely written arrays",
           {}};
  a.reaches = class_names(classes);
  return a;
}

bool linked_in_allocator(const process_report& p) {
  return p.allocator.guess.name == "unknown" && p.allocator.guess.library.empty();
}

advice linked_in_allocator_advice(const process_report& p, const system_report& s,
                                  const std::string& head,
                                  const std::vector<const memory_class_usage*>& classes) {
  const collapse_fallback fallback = collapse_of(p, s);
  advice a{rule_id::allocator_linked_in,
           head +
               "no libc or known allocator is mapped, so its allocator is linked into the "
               "executable (a static binary): the doctor cannot tell which malloc it is; a "
               "static glibc (Debian's busybox-static, for one) reads GLIBC_TUNABLES as a shared "
               "one does, so GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in its environment reaches its "
               "malloc chunks of 2 MiB and up, and MALLOC_CONF a linked-in jemalloc; THP "
               "enabled=always (machine-wide) reaches it regardless, and " +
               fallback.text,
           {"no libc.so, libjemalloc, libtcmalloc or libmimalloc in its mappings"},
           "enabled=always raises RSS and fault latency for every process",
           fallback.commands};
  a.reaches = class_names(classes);
  return a;
}

}  // namespace hugepage::doctor
