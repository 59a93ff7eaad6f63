// tools/doctor/render.cpp - human tables (fmt) and JSON for the three reports.
//
// The JSON field names are a contract (tools/README.md, "JSON schema"): add fields, never rename
// or remove them without bumping "schema".
#include <fmt/format.h>

#include <cmath>

#include "collapse.hpp"
#include "json.hpp"
#include "report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

inline constexpr const char* schema_name = "hugepage-doctor/1";

namespace {

std::string opt_text(const std::optional<std::string>& v) { return v ? *v : "unknown"; }
std::string opt_number(const std::optional<std::uint64_t>& v) {
  return v ? fmt::format("{}", *v) : "-";
}
std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

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

// ---- shared pieces -----------------------------------------------------------------------------

json pool_json(const hugetlb_pool& p) {
  return json::object()
      .set("page_bytes", p.page_bytes)
      .set("node", p.node)
      .set("total", p.total)
      .set("free", p.free)
      .set("reserved", p.reserved)
      .set("surplus", p.surplus)
      .set("overcommit", p.overcommit)
      .set("available", p.node ? std::optional<std::uint64_t>{} : p.available());
}

json cgroup_json(const cgroup_report& c) {
  json limits = json::array();
  for (const hugetlb_limit& l : c.limits) {
    limits.push(json::object()
                    .set("page_bytes", l.page_bytes)
                    .set("version", l.version)
                    .set("directory", l.directory)
                    .set("max_readable", l.has_max)
                    .set("max_bytes", l.max)
                    .set("rsvd_max_readable", l.has_rsvd_max)
                    .set("rsvd_max_bytes", l.rsvd_max)
                    .set("current_bytes", l.current)
                    .set("rsvd_current_bytes", l.rsvd_current)
                    .set("refused", l.refused));
  }
  return json::object().set("status", c.status).set("path", c.path).set("limits", limits);
}

json strings(const std::vector<std::string>& list) {
  json out = json::array();
  for (const auto& s : list) out.push(s);
  return out;
}

json advice_json(const std::vector<advice>& advice) {
  json list = json::array();
  for (const auto& a : advice) {
    list.push(json::object()
                  .set("id", a.id)
                  .set("level", name_of(a.level))
                  .set("message", a.message)
                  .set("evidence", strings(a.evidence))
                  .set("trade", a.trade)
                  .set("commands", strings(a.commands))
                  .set("command", a.commands.empty() ? std::string() : a.commands.front()));
  }
  return list;
}

json mthp_json(const system_report& s) {
  json list = json::array();
  for (const mthp_size& m : s.mthp) {
    json stats = json::object();
    for (const auto& [name, value] : m.stats) stats.set(name, value);
    list.push(json::object()
                  .set("page_bytes", m.page_bytes)
                  .set("enabled", m.enabled.empty() ? json() : json(m.enabled))
                  .set("shmem_enabled", m.shmem_enabled.empty() ? json() : json(m.shmem_enabled))
                  .set("stats", stats));
  }
  return list;
}

json system_json(const system_report& s) {
  const thp_settings& t = s.thp;
  json khugepaged = json::object()
                        .set("max_ptes_none", t.max_ptes_none)
                        .set("max_ptes_swap", t.max_ptes_swap)
                        .set("pages_to_scan", t.pages_to_scan)
                        .set("scan_sleep_millisecs", t.scan_sleep_millisecs)
                        .set("alloc_sleep_millisecs", t.alloc_sleep_millisecs)
                        .set("defrag", t.khugepaged_defrag);
  json thp = json::object()
                 .set("enabled", t.enabled)
                 .set("pmd_enabled", t.pmd_enabled)
                 .set("effective", t.pmd_mode ? json(name_of(*t.pmd_mode)) : json())
                 .set("defrag", t.defrag)
                 .set("shmem_enabled", t.shmem_enabled)
                 .set("khugepaged", khugepaged);
  json pools = json::array();
  for (const auto& p : s.pools) pools.push(pool_json(p));
  json node_pools = json::array();
  for (const auto& p : s.node_pools) node_pools.push(pool_json(p));
  json memory;
  if (s.meminfo_readable) {
    const auto get = [&](const char* key) -> std::optional<std::uint64_t> {
      const auto it = s.meminfo.find(key);
      if (it == s.meminfo.end()) return std::nullopt;
      return it->second;
    };
    memory = json::object()
                 .set("mem_total_bytes", get("MemTotal"))
                 .set("mem_free_bytes", get("MemFree"))
                 .set("mem_available_bytes", get("MemAvailable"))
                 .set("anon_huge_bytes", get("AnonHugePages"))
                 .set("shmem_huge_bytes", get("ShmemHugePages"))
                 .set("file_huge_bytes", get("FileHugePages"))
                 .set("hugetlb_bytes", get("Hugetlb"));
  }
  json readiness;
  if (s.zones) {
    readiness = json::array();
    for (const auto& z : *s.zones) {
      readiness.push(json::object()
                         .set("node", z.node)
                         .set("zone", z.zone)
                         .set("free_bytes", z.free_bytes)
                         .set("huge_ready_bytes", z.huge_ready_bytes)
                         .set("huge_blocks", z.huge_blocks));
    }
  }
  json vmstat;
  if (s.vmstat_readable) {
    vmstat = json::object();
    for (const char* name : vmstat_counters) {
      const auto it = s.vmstat.find(name);
      vmstat.set(name, it == s.vmstat.end() ? json() : json(it->second));
    }
  }
  return json::object()
      .set("kernel", s.kernel_release)
      .set("base_page_bytes", s.base_page_bytes)
      .set("thp_page_bytes", s.thp_bytes)
      .set("thp", thp)
      .set("pools", pools)
      .set("node_pools", node_pools)
      .set("memory", memory)
      .set("readiness", readiness)
      .set("vmstat", vmstat)
      .set("cgroup", cgroup_json(s.cgroup))
      .set("madv_collapse", name_of(s.collapse))
      .set("hardware_counters",
           json::object().set("available", s.hardware_counters).set("reason", s.counters_reason))
      .set("mthp", mthp_json(s))
      .set("cpu_1g_pages", s.cpu_1g_pages);
}

std::string document(const char* mode, const char* key, json body,
                     const std::vector<advice>& advice, int exit_code) {
  json doc = json::object().set("schema", schema_name).set("mode", mode);
  if (key != nullptr) doc.set(key, std::move(body));
  return doc.set("advice", advice_json(advice)).set("exit_code", exit_code).dump();
}

int exit_code_of(const std::vector<advice>& advice) { return has_warning(advice) ? 1 : 0; }

// ---- human -------------------------------------------------------------------------------------

void render_advice(std::string& out, const std::vector<advice>& advice, const char* healthy) {
  out += "\nAdvice\n";
  if (advice.empty()) {
    out += fmt::format("  none: {}\n", healthy);
    return;
  }
  int n = 1;
  for (const auto& a : advice) {
    // Messages and evidence may quote paths and names the process chose: escaped. Commands are
    // built from trusted words only (advice.cpp) and printed as they are, to be pasted.
    out += fmt::format("  {}. {}: {} [{}]\n", n++, name_of(a.level), printable(a.message), a.id);
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
    out += fmt::format("  {}\n", c.status.empty() ? "unknown" : c.status);
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

  if (p.numa.size() > 1) {
    out += "\nNUMA placement (/proc/PID/numa_maps; THP counts as base pages there)\n";
    out += fmt::format("  {:>4} {:>12} {:>12}\n", "node", "resident", "hugetlb");
    for (const auto& [node, u] : p.numa) {
      out += fmt::format("  {:>4} {:>12} {:>12}\n", node, format_bytes(u.bytes),
                         format_bytes(u.hugetlb_bytes));
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
      fmt::format("  {:<18} {}{}{}\n", "malloc", a.guess.name,
                  a.guess.version.empty() ? "" : " " + a.guess.version,
                  a.guess.library.empty() ? "" : fmt::format(" ({})", printable(a.guess.library)));
  if (!a.guess.package.empty()) out += fmt::format("  {:<18} {}\n", "package", a.guess.package);
  out += fmt::format("  {:<18} {}\n", "huge page setting", a.hugepage_mode);
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
    out += fmt::format("  {:<18} {}{}\n", "kind", r.kind, r.version.empty() ? "" : " " + r.version);
    out += fmt::format("  {:<18} {}\n", "recognised by", printable(r.evidence));
    if (!r.package.empty()) out += fmt::format("  {:<18} {}\n", "package", r.package);
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
                                           : flags);
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
  render_advice(out, advice, "nothing to change for this process");
  out += render_coverage(p.coverage, p.coverage.size());
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

std::string json_system(const system_report& s, const std::vector<advice>& advice) {
  return document("system", "system", system_json(s), advice, exit_code_of(advice));
}

std::string json_process(const process_report& p, const system_report& s,
                         const std::vector<advice>& advice) {
  json hugetlb = json::array();
  for (const auto& [page, bytes] : p.hugetlb) {
    hugetlb.push(json::object().set("page_bytes", page).set("bytes", bytes));
  }
  json largest = json::array();
  for (const auto& m : p.largest) {
    json pages = json::array();
    for (const page_share& share : m.pages) {
      pages.push(json::object()
                     .set("page_bytes", share.page_bytes)
                     .set("kind", name_of(share.kind))
                     .set("bytes", share.bytes));
    }
    largest.push(json::object()
                     .set("start", fmt::format("0x{:x}", m.start))
                     .set("size_bytes", m.size)
                     .set("resident_bytes", m.resident)
                     .set("huge_bytes", m.huge)
                     .set("kernel_page_bytes", m.kernel_page_bytes)
                     .set("flags", m.flags)
                     .set("shared", m.shared)
                     .set("name", m.name)
                     .set("pages", pages)
                     .set("mappings_joined", m.mappings_joined));
  }
  json coverage = json::array();
  for (const mapping_coverage& c : p.coverage) {
    coverage.push(json::object()
                      .set("start", fmt::format("0x{:x}", c.mapping.start))
                      .set("end", fmt::format("0x{:x}", c.mapping.end))
                      .set("name", c.mapping.name)
                      .set("resident_bytes", c.exact.resident_bytes())
                      .set("huge_bytes", c.exact.huge_bytes())
                      .set("smaps_huge_bytes", c.smaps_huge)
                      .set("smaps_disagrees", c.smaps_disagrees)
                      .set("source", name_of(c.exact.source))
                      .set("exact", c.exact.exact));
  }
  json settings = json::object();
  for (const auto& [key, value] : p.allocator.settings) settings.set(key, value);
  json numa = json::array();
  for (const auto& [node, u] : p.numa) {
    numa.push(json::object()
                  .set("node", node)
                  .set("bytes", u.bytes)
                  .set("hugetlb_bytes", u.hugetlb_bytes));
  }
  json allocator =
      json::object()
          .set("name", p.allocator.guess.name)
          .set("library", p.allocator.guess.library)
          .set("version",
               p.allocator.guess.version.empty() ? json() : json(p.allocator.guess.version))
          .set("environment_readable", p.allocator.environ_readable)
          .set("environment_overwritten", p.allocator.environ_overwritten)
          .set("settings", settings)
          .set("hugepage_mode", p.allocator.hugepage_mode)
          .set("asks_for_huge", p.allocator.asks_for_huge);
  json process = json::object()
                     .set("pid", static_cast<std::int64_t>(p.pid))
                     .set("name", p.name)
                     .set("title", p.title)
                     .set("mappings", p.mappings)
                     .set("rss_bytes", p.rss)
                     .set("anonymous_bytes", p.anonymous)
                     .set("thp_bytes", p.thp)
                     .set("hugetlb", hugetlb)
                     .set("hugetlb_bytes", p.hugetlb_total())
                     .set("base_bytes", p.base)
                     .set("thp_advised_bytes", p.thp_advised)
                     .set("huge_fraction", p.huge_fraction())
                     .set("thp_enabled", p.thp_enabled)
                     .set("shmem_bytes", p.shmem)
                     .set("shmem_huge_bytes", p.shmem_huge)
                     .set("shmem_huge_fraction", p.shmem_huge_fraction())
                     .set("largest_shared_bytes", p.largest_shared)
                     .set("file_bytes", p.file)
                     .set("file_huge_bytes", p.file_huge)
                     .set("file_huge_fraction", p.file_huge_fraction())
                     .set("runtime", p.runtime.kind.empty()
                                         ? json()
                                         : json::object()
                                               .set("kind", p.runtime.kind)
                                               .set("version", p.runtime.version)
                                               .set("evidence", p.runtime.evidence)
                                               .set("package", p.runtime.package.empty()
                                                                   ? json()
                                                                   : json(p.runtime.package))
                                               .set("settings_known", p.runtime.settings_known)
                                               .set("settings", strings(p.runtime.settings))
                                               .set("asks_for_huge", p.runtime.asks_for_huge))
                     .set("systemd_unit", p.unit.empty() ? json() : json(p.unit))
                     .set("numa", numa)
                     .set("largest_anonymous", largest)
                     .set("mapping_coverage", coverage)
                     .set("allocator", allocator)
                     .set("cgroup", cgroup_json(p.cgroup))
                     .set("elapsed_seconds", p.seconds);
  json doc = json::object()
                 .set("schema", schema_name)
                 .set("mode", "process")
                 .set("process", process)
                 .set("system", system_json(s))
                 .set("advice", advice_json(advice))
                 .set("exit_code", exit_code_of(advice));
  return doc.dump();
}

std::string json_probe(const probe_report& r) {
  json rows = json::array();
  for (const auto& row : r.rows) {
    rows.push(json::object()
                  .set("working_set_bytes", row.working_set)
                  .set("accesses", row.accesses)
                  .set("base_ns_per_access", row.error.empty() ? json(row.base_ns) : json())
                  .set("huge_ns_per_access", row.error.empty() ? json(row.huge_ns) : json())
                  .set("ratio", row.error.empty() ? json(row.ratio()) : json())
                  .set("base_huge_fraction", row.base_huge_fraction)
                  .set("huge_huge_fraction", row.huge_huge_fraction)
                  .set("base_dtlb_misses_per_access", row.base_walks)
                  .set("huge_dtlb_misses_per_access", row.huge_walks)
                  .set("error", row.error.empty() ? json() : json(row.error))
                  .set("note", row.note.empty() ? json() : json(row.note)));
  }
  json probe =
      json::object()
          .set("huge_method", r.huge_method)
          .set("counters",
               json::object().set("available", r.counters).set("reason", r.counters_reason))
          .set("elapsed_seconds", r.seconds)
          .set("rows", rows);
  return document("probe", "probe", probe, {}, 0);
}

}  // namespace hugepage::doctor
