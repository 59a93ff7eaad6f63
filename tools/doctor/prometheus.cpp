// tools/doctor/prometheus.cpp - the reports in the Prometheus text exposition format, for
// node_exporter's textfile collector (hugepage-doctor --format prometheus > x.prom).
//
// Metric names start with hugepage_doctor_ and are listed in tools/README.md. Every family gets
// its # HELP and # TYPE lines once, before its first sample. Label values a process controls
// (comm) go through printable() first, so they hold no control byte and only valid UTF-8, then
// get the format's own escapes.
#include "prometheus.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>
#include <vector>

#include "advice.hpp"
#include "hugepage/prometheus_exposition.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

using labels = std::vector<std::pair<std::string, std::string>>;

// The shared writer (hugepage/prometheus_exposition.hpp); label values a process controls go
// through printable() before the format's own escapes, and values are formatted here.
class exposition {
 public:
  void add(const std::string& name, const char* type, const char* help, const labels& l,
           double value) {
    labels shown = l;
    for (auto& label : shown) label.second = printable(label.second);
    std::string text;
    if (std::isnan(value)) {
      text = "NaN";
    } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
      text = fmt::format("{}", static_cast<long long>(value));
    } else {
      text = fmt::format("{}", value);
    }
    out_.add(name, type, help, shown, text);
  }
  void gauge(const std::string& name, const char* help, const labels& l, double value) {
    add(name, "gauge", help, l, value);
  }
  void counter(const std::string& name, const char* help, const labels& l, double value) {
    add(name, "counter", help, l, value);
  }
  std::string str() const { return out_.str(); }

 private:
  prometheus_exposition out_;
};

std::string num(std::uint64_t v) { return fmt::format("{}", v); }

void system_metrics(exposition& e, const system_report& s) {
  const thp_settings& t = s.thp;
  e.gauge("hugepage_doctor_thp_info", "THP settings (sysfs), as labels; always 1",
          {{"enabled", t.enabled.value_or("unknown")},
           {"pmd_enabled", t.pmd_enabled.value_or("absent")},
           {"effective", t.pmd_mode ? name_of(*t.pmd_mode) : "unknown"},
           {"defrag", t.defrag.value_or("unknown")},
           {"shmem_enabled", t.shmem_enabled.value_or("unknown")}},
          1);
  if (t.max_ptes_none) {
    e.gauge("hugepage_doctor_khugepaged_max_ptes_none",
            "khugepaged max_ptes_none: empty PTEs a collapse may fill", {},
            static_cast<double>(*t.max_ptes_none));
  }
  e.gauge("hugepage_doctor_thp_page_bytes", "PMD THP size in bytes", {},
          static_cast<double>(s.thp_bytes));
  const auto pool = [&](const hugetlb_pool& p) {
    const std::string node = p.node ? num(static_cast<std::uint64_t>(*p.node)) : "all";
    const auto one = [&](const char* state, const std::optional<std::uint64_t>& v) {
      if (v) {
        e.gauge("hugepage_doctor_hugetlb_pool_pages",
                "hugetlb pool pages by page size, NUMA node (all: system-wide) and state",
                {{"size_bytes", num(p.page_bytes)}, {"node", node}, {"state", state}},
                static_cast<double>(*v));
      }
    };
    one("total", p.total);
    one("free", p.free);
    one("reserved", p.reserved);
    one("surplus", p.surplus);
    if (!p.node) one("available", p.available());
  };
  for (const auto& p : s.pools) pool(p);
  for (const auto& p : s.node_pools) pool(p);
  if (s.zones) {
    for (const auto& z : *s.zones) {
      const labels l{{"node", num(static_cast<std::uint64_t>(z.node))}, {"zone", z.zone}};
      e.gauge("hugepage_doctor_zone_free_bytes", "free memory per zone (/proc/buddyinfo)", l,
              static_cast<double>(z.free_bytes));
      e.gauge("hugepage_doctor_zone_huge_ready_bytes",
              "free memory in blocks of at least the THP size, per zone", l,
              static_cast<double>(z.huge_ready_bytes));
    }
  }
  for (const auto& [name, value] : s.vmstat) {
    e.counter("hugepage_doctor_vmstat_total", "THP and compaction events since boot (/proc/vmstat)",
              {{"counter", name}}, static_cast<double>(value));
  }
  for (const mthp_size& m : s.mthp) {
    const std::string size = num(m.page_bytes);
    e.gauge("hugepage_doctor_mthp_info", "mTHP size settings, as labels; always 1",
            {{"size_bytes", size},
             {"enabled", m.enabled.empty() ? "absent" : m.enabled},
             {"shmem_enabled", m.shmem_enabled.empty() ? "absent" : m.shmem_enabled}},
            1);
    for (const auto& [name, value] : m.stats) {
      e.counter("hugepage_doctor_mthp_events_total", "mTHP counters per size (stats/ directory)",
                {{"size_bytes", size}, {"counter", name}}, static_cast<double>(value));
    }
  }
  if (s.cpu_1g_pages) {
    e.gauge("hugepage_doctor_cpu_1g_pages", "1 if the CPU has 1 GiB pages (pdpe1gb)", {},
            *s.cpu_1g_pages ? 1 : 0);
  }
}

void advice_metrics(exposition& e, const std::vector<advice>& list) {
  std::size_t warnings = 0;
  for (const auto& a : list) {
    e.gauge("hugepage_doctor_advice", "one sample per piece of advice; always 1",
            {{"id", a.id()}, {"level", name_of(a.level())}}, 1);
    if (a.level() == advice_level::warning) ++warnings;
  }
  e.gauge("hugepage_doctor_warnings", "pieces of advice at warning level (exit status 1 if > 0)",
          {}, static_cast<double>(warnings));
}

}  // namespace

std::string prometheus_system(const system_report& s, const std::vector<advice>& list) {
  exposition e;
  system_metrics(e, s);
  advice_metrics(e, list);
  return e.str();
}

std::string prometheus_process(const process_report& p, const system_report& s,
                               const std::vector<advice>& list) {
  exposition e;
  const std::string pid = num(static_cast<std::uint64_t>(p.pid));
  e.gauge("hugepage_doctor_process_info",
          "the process, its allocator and runtime, as labels; always 1",
          {{"pid", pid},
           {"comm", p.name},
           {"allocator", p.allocator.guess.name},
           {"allocator_version", p.allocator.guess.version},
           {"runtime", p.runtime.kind},
           {"runtime_version", p.runtime.version},
           {"unit", p.unit}},
          1);
  const auto bytes = [&](const char* kind, std::size_t v) {
    e.gauge("hugepage_doctor_process_bytes", "resident bytes of the process by kind (smaps)",
            {{"pid", pid}, {"kind", kind}}, static_cast<double>(v));
  };
  bytes("rss", p.rss);
  bytes("anonymous", p.anonymous);
  bytes("anon_thp", p.thp);
  bytes("shmem", p.shmem);
  bytes("shmem_thp", p.shmem_huge);
  bytes("file", p.file);
  bytes("file_thp", p.file_huge);
  bytes("base", p.base);
  bytes("thp_advised", p.thp_advised);
  for (const auto& [page, v] : p.hugetlb) {
    e.gauge("hugepage_doctor_process_hugetlb_bytes", "resident hugetlb bytes by page size",
            {{"pid", pid}, {"size_bytes", num(page)}}, static_cast<double>(v));
  }
  const auto fraction = [&](const char* memory_class, double v) {
    e.gauge("hugepage_doctor_process_huge_fraction",
            "share of each class of memory on huge pages, 0..1",
            {{"pid", pid}, {"class", memory_class}}, v);
  };
  fraction("anonymous", p.huge_fraction());
  fraction("shmem", p.shmem_huge_fraction());
  fraction("file", p.file_huge_fraction());
  for (const auto& [node, u] : p.numa) {
    const std::string n = num(static_cast<std::uint64_t>(node));
    e.gauge("hugepage_doctor_process_node_bytes",
            "resident bytes of the process per NUMA node (numa_maps), all pages and hugetlb",
            {{"pid", pid}, {"node", n}, {"kind", "all"}}, static_cast<double>(u.bytes));
    e.gauge("hugepage_doctor_process_node_bytes",
            "resident bytes of the process per NUMA node (numa_maps), all pages and hugetlb",
            {{"pid", pid}, {"node", n}, {"kind", "hugetlb"}}, static_cast<double>(u.hugetlb_bytes));
  }
  for (const mapping_coverage& c : p.coverage) {
    const auto mapping = [&](const char* kind, std::size_t v) {
      e.gauge("hugepage_doctor_process_mapping_bytes",
              "the largest mappings by resident bytes: resident and huge bytes from the page "
              "tables, and the huge bytes smaps counts",
              {{"pid", pid},
               {"start", fmt::format("0x{:x}", c.mapping.start)},
               {"name", c.mapping.name},
               {"kind", kind}},
              static_cast<double>(v));
    };
    mapping("resident", c.exact.resident_bytes());
    mapping("huge", c.exact.huge_bytes());
    mapping("smaps_huge", c.smaps_huge);
  }
  for (const memory_class_usage& c : p.classes) {
    labels l{{"pid", pid}, {"class", name_of(c.kind)}};
    if (c.kind == memory_class::tmpfs_file) l.emplace_back("mount", c.mount);
    e.gauge("hugepage_doctor_process_class_resident_bytes",
            "resident bytes of the process by what maps them (memory class; tmpfs per mount)", l,
            static_cast<double>(c.resident));
    e.gauge("hugepage_doctor_process_class_huge_bytes",
            "of them on huge pages (PMD-mapped THP or hugetlb)", l, static_cast<double>(c.huge));
  }
  if (p.thp_enabled) {
    e.gauge("hugepage_doctor_process_thp_allowed", "0 when the process set PR_SET_THP_DISABLE",
            {{"pid", pid}}, *p.thp_enabled ? 1 : 0);
  }
  e.gauge("hugepage_doctor_process_read_seconds", "time spent reading the process", {{"pid", pid}},
          p.seconds);
  system_metrics(e, s);
  advice_metrics(e, list);
  return e.str();
}

std::string prometheus_probe(const probe_report& r) {
  exposition e;
  for (const auto& row : r.rows) {
    if (!row.error.empty()) continue;
    const std::string ws = num(row.working_set);
    e.gauge("hugepage_doctor_probe_ns_per_access",
            "ns per dependent load over a random cycle, by working set and backing",
            {{"working_set_bytes", ws}, {"backing", "base"}}, row.base_ns);
    e.gauge("hugepage_doctor_probe_ns_per_access",
            "ns per dependent load over a random cycle, by working set and backing",
            {{"working_set_bytes", ws}, {"backing", "huge"}}, row.huge_ns);
    e.gauge("hugepage_doctor_probe_ratio", "base-page ns / huge-page ns per access",
            {{"working_set_bytes", ws}}, row.ratio());
  }
  return e.str();
}

}  // namespace hugepage::doctor
