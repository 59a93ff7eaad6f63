// tools/doctor/render_json.cpp - the three reports as JSON.
//
// The JSON field names are a contract (tools/README.md, "JSON schema"): add fields, never rename
// or remove them without a new json_schema.
#include "render_json.hpp"

#include <fmt/format.h>

#include <cmath>

#include "advice.hpp"
#include "json.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "rule_catalog.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

namespace {

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
                  .set("id", a.id())
                  .set("level", name_of(a.level()))
                  .set("message", a.message)
                  .set("evidence", strings(a.evidence))
                  .set("reaches", strings(a.reaches))
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
  json doc = json::object().set("schema", json_schema).set("mode", mode);
  if (key != nullptr) doc.set(key, std::move(body));
  return doc.set("advice", advice_json(advice)).set("exit_code", exit_code).dump();
}

}  // namespace

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
  json classes = json::array();
  for (const memory_class_usage& c : p.classes) {
    json entry = json::object()
                     .set("class", name_of(c.kind))
                     .set("resident_bytes", c.resident)
                     .set("huge_bytes", c.huge)
                     .set("huge_fraction", c.huge_fraction())
                     .set("mappings", c.mappings)
                     .set("advised_bytes", c.advised)
                     .set("small_mapping_bytes", c.in_small_mappings)
                     .set("small_chunk_bytes", c.in_small_chunks)
                     .set("largest_mapping_bytes", c.largest_mapping)
                     .set("repeated_views", c.views)
                     .set("evidence", c.evidence);
    if (c.kind == memory_class::tmpfs_file)
      entry.set("mount", c.mount)
          .set("mount_huge", c.mount_huge)
          .set("same_superblock", strings(c.same_superblock));
    classes.push(entry);
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
                     .set("thp_disabled_by", name_of(p.thp_disabled_by))
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
                     .set("memory_classes", classes)
                     .set("largest_anonymous", largest)
                     .set("mapping_coverage", coverage)
                     .set("allocator", allocator)
                     .set("cgroup", cgroup_json(p.cgroup))
                     .set("elapsed_seconds", p.seconds);
  if (p.reach) {  // two nodes or more: where its threads run against where its memory is
    json run = json::array();
    for (const int node : p.reach->run_nodes) run.push(node);
    json largest_nodes = json::array();
    for (const auto& nodes : p.reach->largest_nodes) {
      json entry = json::object();
      for (const auto& [node, bytes] : nodes) entry.set(std::to_string(node), bytes);
      largest_nodes.push(entry);
    }
    process.set("numa_reach", json::object()
                                  .set("cpus_allowed", p.reach->cpus_allowed)
                                  .set("mems_allowed", p.reach->mems_allowed)
                                  .set("run_nodes", run)
                                  .set("resident_bytes", p.reach->resident)
                                  .set("remote_bytes", p.reach->remote)
                                  .set("remote_hugetlb_bytes", p.reach->remote_hugetlb)
                                  .set("largest_anonymous_nodes", largest_nodes));
  }
  json doc = json::object()
                 .set("schema", json_schema)
                 .set("mode", "process")
                 .set("process", process)
                 .set("system", system_json(s))
                 .set("advice", advice_json(advice))
                 .set("exit_code", static_cast<int>(exit_code_of(advice)));
  return doc.dump();
}

std::string json_rules() {
  json rules = json::array();
  for (const rule& r : rule_catalog()) {
    rules.push(json::object().set("id", r.id).set("level", name_of(r.level)).set("what", r.what));
  }
  return document("rules", "rules", rules, {}, 0);
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
