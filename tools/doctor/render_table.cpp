// tools/doctor/render_table.cpp - the three reports as human tables (fmt).
//
// What a process controls (its title, comm, mapping and file names, environment) is printed
// through printable(); commands are printed as they are, to be pasted (advise_parts.hpp).
#include "render_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "advice.hpp"
#include "format.hpp"
#include "mapping_coverage.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "rule_catalog.hpp"
#include "system_report.hpp"
#include "text.hpp"
#include "thp_disabler.hpp"

namespace hugepage::doctor {

namespace {

std::string opt_text(const std::optional<std::string>& v) { return v ? *v : "unknown"; }
std::string opt_number(const std::optional<std::uint64_t>& v) {
  return v ? fmt::format("{}", *v) : "-";
}

// A page size as the split of a table entry names it: "1G", "2M", "4K", "64K".
std::string short_page(std::size_t bytes) {
  if (bytes != 0 && bytes % (std::size_t{1} << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes != 0 && bytes % (std::size_t{1} << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes != 0 && bytes % 1024 == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}B", bytes);
}

// "1G 1 GiB + 2M 512 MiB", "THP 510 MiB + 4K 2.0 MiB": hugetlb and base pages by their size,
// THP as THP (its size is the PMD size, in the JSON).
std::string page_split(const std::vector<page_share>& pages) {
  std::string out;
  for (const page_share& share : pages) {
    if (!out.empty()) out += " + ";
    out += fmt::format("{} {}", share.kind == page_kind::thp ? "THP" : short_page(share.page_bytes),
                       format_bytes(share.bytes));
  }
  return out;
}

// "glibc thread arenas (1.20 GiB), glibc mmapped chunks (300 MiB)": the classes an advice's fix
// reaches, readable, with the resident bytes of each where the report has the process's classes
// (`classes`; nullptr for the system report). A class the process has nothing resident in is not
// among them: 0 B.
std::string reach_line(const std::vector<std::string>& reaches,
                       const std::vector<memory_class_usage>* classes) {
  std::string out;
  for (const std::string& name : reaches) {
    if (!out.empty()) out += ", ";
    std::string readable = name;
    std::replace(readable.begin(), readable.end(), '_', ' ');
    out += printable(readable);
    if (classes != nullptr) {
      std::size_t bytes = 0;  // tmpfs_file has one entry per mount
      for (const memory_class_usage& c : *classes) {
        if (name == name_of(c.kind)) bytes += c.resident;
      }
      out += fmt::format(" ({})", format_bytes(bytes));
    }
  }
  return out;
}

void render_advice(std::string& out, const std::vector<advice>& advice, const char* healthy,
                   const std::vector<memory_class_usage>* classes = nullptr) {
  out += "\nAdvice\n";
  if (advice.empty()) {
    out += fmt::format("  none: {}\n", healthy);
    return;
  }
  int n = 1;
  for (const auto& a : advice) {
    // Messages and evidence may quote paths and names the process chose: escaped. Commands are
    // built from trusted words only (advise_parts.hpp) and printed as they are, to be pasted.
    out +=
        fmt::format("  {}. {}: {} [{}]\n", n++, name_of(a.level()), printable(a.message), a.id());
    if (!a.reaches.empty())
      out += fmt::format("     reaches: {}\n", reach_line(a.reaches, classes));
    for (const auto& fact : a.evidence) out += fmt::format("     - {}\n", printable(fact));
    if (!a.trade.empty()) out += fmt::format("     cost: {}\n", printable(a.trade));
    for (const auto& command : a.commands) out += fmt::format("     $ {}\n", command);
  }
}

void render_pools(std::string& out, const system_report& s) {
  if (s.pools.empty()) {
    out += "  no hugetlb pools (CONFIG_HUGETLBFS off, or /sys/kernel/mm/hugepages unreadable)\n";
    return;
  }
  out += fmt::format("  {:<8} {:>5} {:>8} {:>8} {:>9} {:>8} {:>10}\n", "size", "node", "total",
                     "free", "reserved", "surplus", "available");
  const auto row = [&](const hugetlb_pool& p) {
    out += fmt::format("  {:<8} {:>5} {:>8} {:>8} {:>9} {:>8} {:>10}\n", format_bytes(p.page_bytes),
                       p.node ? fmt::format("{}", *p.node) : "all", opt_number(p.total),
                       opt_number(p.free), opt_number(p.reserved), opt_number(p.surplus),
                       p.node ? "-" : opt_number(p.available()));
  };
  for (const auto& p : s.pools) {
    row(p);
    for (const auto& n : s.node_pools) {
      if (n.page_bytes == p.page_bytes) row(n);
    }
  }
}

void render_cgroup(std::string& out, const cgroup_report& c) {
  if (c.limits.empty()) {
    out += fmt::format("  {}\n", c.status.empty() ? "unknown" : printable(c.status));
    return;
  }
  const auto limit = [](bool readable, const std::optional<std::uint64_t>& v) {
    return !readable ? std::string("-") : v ? format_bytes(*v) : std::string("max");
  };
  out += fmt::format("  {:<8} {:<4} {:>12} {:>12} {:>12}  {}\n", "size", "ver", "max", "rsvd.max",
                     "current", "cgroup");
  for (const auto& l : c.limits) {
    out += fmt::format("  {:<8} {:<4} {:>12} {:>12} {:>12}  {}\n", format_bytes(l.page_bytes),
                       l.version, limit(l.has_max, l.max), limit(l.has_rsvd_max, l.rsvd_max),
                       l.current ? format_bytes(*l.current) : "-", printable(l.directory));
  }
}

}  // namespace

std::string render_system(const system_report& s, const std::vector<advice>& advice) {
  std::string out = fmt::format("hugepage-doctor: system (Linux {})\n", s.kernel_release);
  const thp_settings& t = s.thp;
  out += "\nTransparent huge pages (/sys/kernel/mm/transparent_hugepage)\n";
  out += fmt::format("  {:<15} {}\n", "enabled", opt_text(t.enabled));
  if (t.pmd_enabled) {
    out += fmt::format("  {:<15} {}\n", fmt::format("{}kB enabled", s.thp_bytes / 1024),
                       *t.pmd_enabled);
  }
  out += fmt::format("  {:<15} {} (for {} pages, from the files above)\n", "effective",
                     t.pmd_mode ? name_of(*t.pmd_mode) : "unknown", format_bytes(s.thp_bytes));
  out += fmt::format("  {:<15} {}\n", "defrag", opt_text(t.defrag));
  out += fmt::format("  {:<15} {}\n", "shmem_enabled", opt_text(t.shmem_enabled));
  out += fmt::format("  {:<15} {}\n", "page size", format_bytes(s.thp_bytes));
  out += fmt::format(
      "  {:<15} max_ptes_none {}, max_ptes_swap {}, pages_to_scan {}, scan_sleep {} ms, "
      "alloc_sleep {} ms, defrag {}\n",
      "khugepaged", opt_number(t.max_ptes_none), opt_number(t.max_ptes_swap),
      opt_number(t.pages_to_scan), opt_number(t.scan_sleep_millisecs),
      opt_number(t.alloc_sleep_millisecs),
      t.khugepaged_defrag ? (*t.khugepaged_defrag ? "on" : "off") : "-");

  out += "\nhugetlb pools (pages)\n";
  render_pools(out, s);

  out +=
      fmt::format("\nReadiness for more huge pages (free blocks of {} or more, /proc/buddyinfo)\n",
                  format_bytes(s.thp_bytes));
  if (!s.zones) {
    out += "  unknown: /proc/buddyinfo unreadable\n";
  } else {
    out += fmt::format("  {:>4} {:<8} {:>12} {:>16} {:>12}\n", "node", "zone", "free",
                       "in huge blocks", "huge blocks");
    for (const auto& z : *s.zones) {
      out +=
          fmt::format("  {:>4} {:<8} {:>12} {:>16} {:>12}\n", z.node, z.zone,
                      format_bytes(z.free_bytes), format_bytes(z.huge_ready_bytes), z.huge_blocks);
    }
  }

  out += "\nMemory (/proc/meminfo)\n";
  if (!s.meminfo_readable) {
    out += "  unknown: /proc/meminfo unreadable\n";
  } else {
    for (const char* key : {"MemTotal", "MemAvailable", "AnonHugePages", "ShmemHugePages",
                            "FileHugePages", "Hugetlb"}) {
      const auto it = s.meminfo.find(key);
      out +=
          fmt::format("  {:<15} {}\n", key, it == s.meminfo.end() ? "-" : format_bytes(it->second));
    }
  }

  out += "\nTHP activity since boot (/proc/vmstat)\n";
  if (!s.vmstat_readable) {
    out += "  unknown: /proc/vmstat unreadable\n";
  } else {
    for (const char* name : vmstat_counters) {
      const auto it = s.vmstat.find(name);
      out += fmt::format(
          "  {:<26} {}\n", name,
          it == s.vmstat.end() ? "- (not in this kernel)" : fmt::format("{}", it->second));
    }
  }

  out += "\nhugetlb cgroup limits (the cgroup hugepage-doctor runs in)\n";
  render_cgroup(out, s.cgroup);

  out += "\nCapabilities\n";
  out += fmt::format("  {:<18} {}\n", "MADV_COLLAPSE", name_of(s.collapse));
  out += fmt::format(
      "  {:<18} {}\n", "hardware counters",
      s.hardware_counters ? "available" : fmt::format("unavailable: {}", s.counters_reason));
  if (s.cpu_1g_pages) {
    out += fmt::format("  {:<18} {}\n", "1 GiB pages (CPU)",
                       *s.cpu_1g_pages ? "yes (pdpe1gb)" : "no: the CPU lacks pdpe1gb");
  }
  if (!s.mthp.empty()) {
    out += "\nmTHP sizes (transparent_hugepage/hugepages-<size>kB; counters since boot)\n";
    out += fmt::format("  {:<9} {:<8} {:<12} {:>12} {:>12} {:>10}\n", "size", "enabled", "shmem",
                       "anon faults", "fallbacks", "splits");
    for (const mthp_size& m : s.mthp) {
      const auto stat = [&](const char* name) {
        const auto it = m.stats.find(name);
        return it == m.stats.end() ? std::string("-") : fmt::format("{}", it->second);
      };
      out += fmt::format("  {:<9} {:<8} {:<12} {:>12} {:>12} {:>10}\n", format_bytes(m.page_bytes),
                         m.enabled.empty() ? "-" : m.enabled,
                         m.shmem_enabled.empty() ? "-" : m.shmem_enabled, stat("anon_fault_alloc"),
                         stat("anon_fault_fallback"), stat("split"));
    }
  }
  render_advice(out, advice, "this machine is set up for huge pages");
  return out;
}

std::string render_process(const process_report& p, const system_report& s,
                           const std::vector<advice>& advice) {
  std::string out =
      fmt::format("hugepage-doctor: pid {} ({}), {} mappings, read in {:.1f} ms\n", p.pid,
                  p.name.empty() ? "?" : printable(p.name), p.mappings, p.seconds * 1000.0);
  if (!p.title.empty()) out += fmt::format("title: {}\n", printable(p.title));
  out += "\nMemory\n";
  const auto line = [&](const std::string& label, std::uint64_t bytes) {
    out += fmt::format("  {:<26} {:>12}\n", label, format_bytes(bytes));
  };
  line("resident (RSS)", p.rss);
  line("anonymous", p.anonymous);
  line("on THP", p.thp);
  for (const auto& [page, bytes] : p.hugetlb) line("on hugetlb " + format_bytes(page), bytes);
  line("on base pages", p.base);
  line("in MADV_HUGEPAGE ranges", p.thp_advised);
  out += fmt::format("  {:<26} {:>12}\n", "huge share of anonymous", percent(p.huge_fraction()));
  line("shared memory", p.shmem);
  line("shared memory on THP", p.shmem_huge);
  out += fmt::format("  {:<26} {:>12}\n", "huge share of shared", percent(p.shmem_huge_fraction()));
  line("file mappings", p.file);
  line("file mappings on THP", p.file_huge);
  out += fmt::format("  {:<26} {:>12}\n", "huge share of files", percent(p.file_huge_fraction()));
  out += fmt::format("  {:<26} {:>12}\n", "THP allowed (prctl)",
                     p.thp_enabled ? (*p.thp_enabled ? "yes" : "no") : "unknown");
  if (p.thp_enabled && !*p.thp_enabled) {
    out +=
        fmt::format("  {:<26} {:>12}\n", "THP disabled by",
                    p.thp_disabled_by == thp_disabler::process     ? "the process"
                    : p.thp_disabled_by == thp_disabler::inherited ? "inherited from its launcher"
                                                                   : "unknown");
  }

  out += "\nMemory by mechanism (what maps it decides which setting reaches it)\n";
  if (p.classes.empty()) {
    out += "  none\n";
  } else {
    out += fmt::format("  {:<21} {:>11} {:>7} {:>8} {:>11}  {}\n", "class", "resident", "huge%",
                       "mappings", "advised", "note");
    for (const memory_class_usage& c : p.classes) {
      std::string note = printable(c.evidence);
      if (c.kind == memory_class::tmpfs_file) {
        note = printable(c.mount) + " huge=" + printable(c.mount_huge);
      } else if (c.kind == memory_class::glibc_mmapped_chunks &&
                 c.in_small_chunks * 2 > c.resident) {
        // Most bytes in chunks smaller than a THP: nothing that advises whole chunks helps. That
        // takes the place of "chunk headers" (the evidence's start), so the row fits 100 columns.
        note =
            "chunks under " + format_bytes(s.thp_bytes) + note.substr(std::min(note.size(), 13ul));
      } else if (c.views > 0) {
        // Views of memory an earlier mapping maps (ZGC's heap): the evidence's end, short.
        note = fmt::format("{} repeat view{} counted once", c.views, c.views == 1 ? "" : "s");
      }
      out += fmt::format("  {:<21} {:>11} {:>7} {:>8} {:>11}  {}\n", name_of(c.kind),
                         format_bytes(c.resident), percent(c.huge_fraction()), c.mappings,
                         format_bytes(c.advised), note);
    }
  }

  if (p.numa.size() > 1 || p.reach) {
    out += "\nNUMA placement (/proc/PID/numa_maps; THP counts as base pages there)\n";
    if (p.reach) {
      out +=
          fmt::format("  threads may run on CPUs {} (node{} {}); memory allowed on nodes {}\n",
                      printable(p.reach->cpus_allowed), p.reach->run_nodes.size() == 1 ? "" : "s",
                      join_ids(p.reach->run_nodes), printable(p.reach->mems_allowed));
    }
    out += fmt::format("  {:>4} {:>12} {:>12}{}\n", "node", "resident", "hugetlb",
                       p.reach ? "  where" : "");
    for (const auto& [node, u] : p.numa) {
      out += fmt::format("  {:>4} {:>12} {:>12}{}\n", node, format_bytes(u.bytes),
                         format_bytes(u.hugetlb_bytes),
                         !p.reach                 ? ""
                         : p.reach->runs_on(node) ? "  local"
                                                  : "  remote");
    }
    if (p.reach) {
      out += fmt::format("  remote: {} of {} resident ({})\n", format_bytes(p.reach->remote),
                         format_bytes(p.reach->resident), percent(p.reach->remote_share()));
      bool headed = false;
      for (std::size_t i = 0; i < p.reach->largest_nodes.size() && i < 5; ++i) {
        const auto& nodes = p.reach->largest_nodes[i];
        std::uint64_t all = 0, remote = 0;
        std::string split;
        for (const auto& [node, bytes] : nodes) {
          all += bytes;
          if (!p.reach->runs_on(node)) remote += bytes;
          split += fmt::format("{}N{} {}", split.empty() ? "" : ", ", node, format_bytes(bytes));
        }
        if (all == 0) continue;
        if (!headed) {
          out +=
              fmt::format("  {:<14} {:>11} {:>7}  {}\n", "largest", "size", "remote", "per node");
          headed = true;
        }
        out += fmt::format("  {:<14} {:>11} {:>7}  {}\n", fmt::format("{:x}", p.largest[i].start),
                           format_bytes(p.largest[i].size),
                           percent(process_report::share(remote, all)), split);
      }
    }
  }

  out += "\nLargest anonymous and shared memory mappings (by resident size)\n";
  if (p.largest.empty()) {
    out += "  none\n";
  } else {
    out += fmt::format("  {:<14} {:>11} {:>11} {:>11} {:>7} {:<5} {:>8}  {}\n", "start", "size",
                       "resident", "huge", "huge%", "flags", "page", "name");
    bool split = false;
    for (const auto& m : p.largest) {
      out += fmt::format(
          "  {:<14} {:>11} {:>11} {:>11} {:>7} {:<5} {:>8}  {}\n", fmt::format("{:x}", m.start),
          format_bytes(m.size), format_bytes(m.resident), format_bytes(m.huge),
          m.resident == 0 ? "-"
                          : percent(static_cast<double>(m.huge) / static_cast<double>(m.resident)),
          m.flags.empty() ? (m.shared ? "s" : "-") : m.flags + (m.shared ? ",s" : ""),
          format_bytes(m.kernel_page_bytes), m.name.empty() ? "[anon]" : printable(m.name));
      // Under an entry on more than one page size, or joined, its split: a second line keeps the
      // table within 100 columns.
      if (m.pages.size() > 1 || m.mappings_joined > 1) {
        split = true;
        out += fmt::format("  {:<14} {}{}\n", "", m.pages.empty() ? "-" : page_split(m.pages),
                           m.mappings_joined > 1
                               ? fmt::format(" ({} mappings joined: one block)", m.mappings_joined)
                               : "");
      }
    }
    if (split) {
      out += "  below an entry: its resident bytes by page size (1G, 2M: hugetlb; THP;\n";
      out +=
          "  4K: base pages); joined: one block's adjacent mappings (1 GiB pages, then smaller)\n";
    }
  }

  out += "\nAllocator\n";
  const allocator_report& a = p.allocator;
  out +=
      fmt::format("  {:<18} {}{}{}\n", "malloc", printable(a.guess.name),
                  a.guess.version.empty() ? "" : " " + printable(a.guess.version),
                  a.guess.library.empty() ? "" : fmt::format(" ({})", printable(a.guess.library)));
  if (!a.guess.package.empty()) {
    out += fmt::format("  {:<18} {}\n", "package", printable(a.guess.package));
  }
  out += fmt::format("  {:<18} {}\n", "huge page setting", printable(a.hugepage_mode));
  if (!a.environ_readable) {
    out += fmt::format("  {:<18} unreadable\n", "environment");
  } else if (a.environ_overwritten) {
    out += fmt::format("  {:<18} unknown: overwritten by the process title\n", "environment");
  } else if (a.settings.empty()) {
    out += fmt::format("  {:<18} none of MALLOC_CONF, GLIBC_TUNABLES, MIMALLOC_*, TCMALLOC_* set\n",
                       "environment");
  } else {
    for (const auto& [key, value] : a.settings) {
      out += fmt::format("  {:<18} {}={}\n", "environment", printable(key), printable(value));
    }
  }
  if (!p.runtime.kind.empty()) {
    const runtime_report& r = p.runtime;
    out += "\nRuntime\n";
    out += fmt::format("  {:<18} {}{}\n", "kind", printable(r.kind),
                       r.version.empty() ? "" : " " + printable(r.version));
    out += fmt::format("  {:<18} {}\n", "recognised by", printable(r.evidence));
    if (!r.package.empty()) out += fmt::format("  {:<18} {}\n", "package", printable(r.package));
    if (r.kind == "redis") {
      // Redis (disable-thp yes, the default) turns THP off for itself only under enabled=always,
      // where its fork for persistence would copy 2 MiB per written page.
      out += fmt::format(
          "  {:<18} {}\n", "THP for itself",
          !p.thp_enabled ? "unknown"
          : !*p.thp_enabled
              ? "off: prctl(PR_SET_THP_DISABLE), Redis's disable-thp (fork copy-on-write)"
          : s.thp.enabled.value_or("") == "always"
              ? "on, although THP is always (disable-thp no?)"
              : "on; Redis disables it only under enabled=always, and its jemalloc does not "
                "advise the heap under madvise");
    }
    if (r.kind == "jvm") {
      std::string flags;
      for (const auto& f : r.settings) flags += (flags.empty() ? "" : " ") + f;
      out += fmt::format("  {:<18} {}\n", "huge page flags",
                         !r.settings_known ? "unknown"
                         : flags.empty()   ? "none"
                                           : printable(flags));
    }
  }
  if (!p.unit.empty()) out += fmt::format("  {:<18} {}\n", "systemd unit", p.unit);

  out += "\nSystem\n";
  out += fmt::format("  THP enabled={} (effective for {} pages: {}) defrag={}\n",
                     opt_text(s.thp.enabled), format_bytes(s.thp_bytes),
                     s.thp.pmd_mode ? name_of(*s.thp.pmd_mode) : "unknown", opt_text(s.thp.defrag));
  for (const auto& pool : s.pools) {
    out += fmt::format("  hugetlb {} pool: {} total, {} available\n", format_bytes(pool.page_bytes),
                       opt_number(pool.total), opt_number(pool.available()));
  }
  out += "\nhugetlb cgroup limits (the process's cgroup)\n";
  render_cgroup(out, p.cgroup);
  render_advice(out, advice, "nothing to change for this process", &p.classes);
  out += render_coverage(p.coverage, p.coverage.size());
  return out;
}

std::string render_rules() {
  std::size_t width = 0;
  for (const rule& r : rule_catalog()) width = std::max(width, std::string_view(r.id).size());
  std::string out = fmt::format("{:<{}}  {:<7}  {}\n", "id", width, "level", "what it finds");
  for (const rule& r : rule_catalog()) {
    out += fmt::format("{:<{}}  {:<7}  {}\n", r.id, width, name_of(r.level), r.what);
  }
  out +=
      "\nA warning makes the exit status 1; a rule listed as a warning gives a note where what it "
      "finds is small.\n";
  return out;
}

std::string render_probe(const probe_report& r) {
  std::string out = "hugepage-doctor: TLB probe (dependent loads over a random cycle)\n";
  out += fmt::format("  huge pages from: {}\n", r.huge_method);
  out += fmt::format("\n  {:>10} {:>10} {:>10} {:>10} {:>7} {:>9} {:>9}", "working set", "accesses",
                     "base ns", "huge ns", "ratio", "base cov", "huge cov");
  if (r.counters) out += fmt::format(" {:>10} {:>10}", "base walks", "huge walks");
  out += '\n';
  for (const auto& row : r.rows) {
    if (!row.error.empty()) {
      out += fmt::format("  {:>10}  skipped: {}\n", format_bytes(row.working_set), row.error);
      continue;
    }
    out +=
        fmt::format("  {:>10} {:>10} {:>10.2f} {:>10.2f} {:>6.2f}x {:>9} {:>9}",
                    format_bytes(row.working_set), row.accesses, row.base_ns, row.huge_ns,
                    row.ratio(), percent(row.base_huge_fraction), percent(row.huge_huge_fraction));
    if (r.counters) {
      const auto walks = [](const std::optional<double>& v) {
        return v ? fmt::format("{:.3f}", *v) : std::string("-");
      };
      out += fmt::format(" {:>10} {:>10}", walks(row.base_walks), walks(row.huge_walks));
    }
    out += '\n';
  }
  for (const auto& row : r.rows) {
    if (!row.note.empty()) out += fmt::format("  {}\n", row.note);
  }
  out += "\n  ratio: base-page ns / huge-page ns per access (the TLB tax a huge page removes).\n";
  out += "  cov: share of each buffer found on huge pages by backing_of().\n";
  if (r.counters) {
    out += "  walks: dTLB-load-misses per access (page walks on Intel; L2 DTLB misses on AMD).\n";
  } else {
    out += fmt::format("  page walks not counted: {}\n", r.counters_reason);
  }
  out += fmt::format("  took {:.1f} s\n", r.seconds);
  return out;
}

}  // namespace hugepage::doctor
