// bench/listing.cpp - hugepage_bench --list: the registry as text (with the project's other
// benchmark programs) or as JSON for bench/runner; --machine-facts and --plan, the same kind of
// JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/system.hpp"
#include "latency.hpp"
#include "modes.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_sizes(const std::vector<std::size_t>& sizes) {
  std::string out;
  for (const std::size_t s : sizes) out += fmt::format("{}{}", out.empty() ? "" : ", ", s);
  return "[" + out + "]";
}

const char* name_of(peer_role r) {
  switch (r) {
    case peer_role::none: return "none";
    case peer_role::every_full_run: return "full";
    case peer_role::core: return "core";
  }
  return "?";
}

const char* name_of(table_kind t) {
  switch (t) {
    case table_kind::time: return "time";
    case table_kind::bloat: return "bloat";
    case table_kind::tail: return "tail";
    case table_kind::scenario: return "scenario";
  }
  return "?";
}

std::string json_targets(const suite_info& s) {
  std::string out;
  for (const target_info& t : s.claims.targets) {
    out += fmt::format(
        "{}{{\"claim\": {}, \"paired\": {}, \"of\": {}, \"over\": {}, \"counter\": {}, "
        "\"at_least\": {}, \"bound\": {}, \"slack_bytes\": {}, \"from_bytes\": {}, "
        "\"over_suite\": {}}}",
        out.empty() ? "" : ",\n    ", json_string(t.claim), t.paired, json_string(t.of),
        json_string(t.over), json_string(t.counter), t.at_least, t.bound, t.slack_bytes,
        t.from_bytes, json_string(t.other_suite));
  }
  return "[" + out + "]";
}

std::string json_contenders(const suite_info& s) {
  std::string out;
  for (const paired_entry& e : s.run.contenders) {
    out += fmt::format("{}{{\"name\": {}, \"role\": {}}}", out.empty() ? "" : ", ",
                       json_string(e.name), json_string(e.role));
  }
  return "[" + out + "]";
}

}  // namespace

// The registry as JSON, for bench/runner (schema 2; the runner checks it).
void print_registry_json() {
  std::string allocators;
  for (const alloc_kind k : all_kinds) {
    allocators += fmt::format("{}{}", allocators.empty() ? "" : ", ", json_string(token_of(k)));
  }
  fmt::print("{{\n \"schema\": 2,\n \"allocators\": [{}],\n", allocators);
  fmt::print(" \"latency_batch\": {},\n \"suites\": [\n", latency_batch);
  bool first = true;
  for (const suite_info& s : registry()) {
    std::string applies;
    for (const alloc_kind k : s.run.allocators) {
      applies += fmt::format("{}{}", applies.empty() ? "" : ", ", json_string(token_of(k)));
    }
    fmt::print("{}  {{\"name\": {}, \"order\": {}, \"family\": {}, \"description\": {},\n",
               first ? "" : ",\n", json_string(s.name), s.schedule.order, json_string(s.family),
               json_string(s.description));
    fmt::print(
        "   \"per_op\": {}, \"time_unit\": \"{}\", \"real_time\": {}, \"allocators\": [{}],\n",
        json_string(s.table.per_op), s.run.milliseconds ? "ms" : "ns", s.run.milliseconds, applies);
    fmt::print("   \"sizes\": {}, \"quick_sizes\": {},\n", json_sizes(s.run.sizes),
               json_sizes(s.run.sizes_quick));
    fmt::print(
        "   \"quick\": {}, \"core\": {}, \"first_round_only\": {}, \"peers\": \"{}\", "
        "\"table\": \"{}\", \"tail_of\": {}, \"chart\": {}, \"own_process\": {}, "
        "\"decays_on_purpose\": {},\n"
        "   \"paired\": {},\n   \"targets\": {}}}",
        s.schedule.in_quick, s.schedule.in_core, s.schedule.in_first_round_only,
        name_of(s.schedule.peers_run), name_of(s.table.kind),
        s.table.tail_of_suite.empty() ? "null" : json_string(s.table.tail_of_suite),
        s.table.on_chart, s.run.in_own_process, s.claims.low_coverage_by_design, json_contenders(s),
        json_targets(s));
    first = false;
  }
  fmt::print("\n ]\n}}\n");
}

// One block per family, families in the order of their first suite.
int print_machine_facts_json() {
  const hugepage::system_state sys = hugepage::read_system_state(/*probe=*/false);
  const auto text = [](const std::optional<std::string>& s) {
    return s ? json_string(*s) : std::string("null");
  };
  const auto number = [](const std::optional<std::uint64_t>& n) {
    return n ? std::to_string(*n) : std::string("null");
  };
  // "free" is free_hugepages, which counts pages reserved by mappings not yet faulted;
  // "available" is free minus resv_hugepages (0 when more are reserved than free): what a new
  // reservation can still take, and what the runner's gates use. null where a file is unreadable.
  std::string pools;
  for (const hugepage::hugetlb_pool& p : sys.pools) {
    std::optional<std::uint64_t> available;
    if (p.free && p.reserved) available = *p.free > *p.reserved ? *p.free - *p.reserved : 0;
    pools += fmt::format(
        "{}\n    {{\"page_bytes\": {}, \"total\": {}, \"free\": {}, \"reserved\": {}, "
        "\"available\": {}}}",
        pools.empty() ? "" : ",", p.page_bytes, number(p.total), number(p.free), number(p.reserved),
        number(available));
  }
  // Every size the kernel has a pool directory for, readable or not (pools lists the readable).
  std::string sizes;
  for (const std::size_t bytes : hugepage::pool_page_sizes()) {
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(bytes);
  }
  // The CPU as /proc/cpuinfo names it; pdpe1gb (x86's 1 GiB pages) null where there is no flags
  // line (other architectures) or no file.
  const std::optional<hugepage::cpu_info> cpu = hugepage::read_cpuinfo();
  const std::string model = cpu && !cpu->model_name.empty() ? json_string(cpu->model_name) : "null";
  const std::string pdpe1gb =
      cpu && cpu->has_flags ? (cpu->has_flag("pdpe1gb") ? "true" : "false") : "null";
  fmt::print(
      "{{\n  \"kernel\": {},\n  \"thp\": {{\"mode\": {}, \"enabled\": {}, \"pmd_enabled\": {}, "
      "\"defrag\": {}, \"pmd_bytes\": {}}},\n  \"cpu\": {{\"model\": {}, \"pdpe1gb\": {}}},\n"
      "  \"pool_sizes\": [{}],\n  \"pools\": [{}{}]\n}}\n",
      json_string(sys.kernel_release),
      sys.thp.pmd_mode ? json_string(hugepage::name_of(*sys.thp.pmd_mode)) : "null",
      text(sys.thp.enabled), text(sys.thp.pmd_enabled), text(sys.thp.defrag),
      number(sys.thp.pmd_bytes), model, pdpe1gb, sizes, pools, pools.empty() ? "" : "\n  ");
  return 0;
}

memory_room read_memory_room() {
  memory_room room;
  room.mem_available =
      static_cast<std::size_t>(hugepage::read_meminfo_value("MemAvailable").value_or(0));
  room.cgroup = hugepage::memory_limit().tightest;
  return room;
}

std::string does_not_fit(std::size_t need, const memory_room& room) {
  if (need > room.mem_available) {
    return fmt::format("needs ~{} MiB, MemAvailable {} MiB", need / mib, room.mem_available / mib);
  }
  if (room.cgroup && need > room.cgroup->headroom()) {
    return fmt::format("needs ~{} MiB, the memory cgroup's limit leaves {} MiB ({} {} MiB)",
                       need / mib, room.cgroup->headroom() / mib, room.cgroup->file,
                       room.cgroup->limit / mib);
  }
  return {};
}

int print_plan_json(const memory_room& room, const std::vector<planned_size>& sizes,
                    const std::vector<std::pair<std::string, std::string>>& allocators_left_out) {
  std::string cgroup = "null";
  if (room.cgroup) {
    cgroup = fmt::format(R"({{"file": {}, "limit": {}, "usage": {}, "headroom": {}}})",
                         json_string(room.cgroup->file), room.cgroup->limit, room.cgroup->usage,
                         room.cgroup->headroom());
  }
  std::string rows;
  for (const planned_size& p : sizes) {
    rows += fmt::format(R"({}{}    {{"size": {}, "need": {}, "left_out": {}}})",
                        rows.empty() ? "" : ",", "\n", p.size, p.need,
                        p.left_out.empty() ? "null" : json_string(p.left_out));
  }
  std::string allocators;
  for (const auto& [name, why] : allocators_left_out) {
    allocators +=
        fmt::format(R"({}{}    {{"allocator": {}, "why": {}}})", allocators.empty() ? "" : ",",
                    "\n", json_string(name), json_string(why));
  }
  fmt::print(
      "{{\n  \"mem_available\": {},\n  \"memory_cgroup\": {},\n  \"sizes\": [{}{}],\n"
      "  \"allocators_left_out\": [{}{}]\n}}\n",
      room.mem_available, cgroup, rows, rows.empty() ? "" : "\n  ", allocators,
      allocators.empty() ? "" : "\n  ");
  return 0;
}

void print_registry_text() {
  std::vector<std::string> families;
  for (const suite_info& s : registry()) {
    if (std::find(families.begin(), families.end(), s.family) == families.end()) {
      families.push_back(s.family);
    }
  }
  for (const std::string& family : families) {
    fmt::print("{}{}:\n", family == families.front() ? "" : "\n", family);
    for (const suite_info& s : registry()) {
      if (s.family == family) {
        fmt::print("  {:<30}{}{}\n", s.name, s.description,
                   s.run.contenders.empty() ? "" : " [also --paired]");
      }
    }
  }
  // The benchmarks that are programs of their own (google-benchmark flags only), beside this one.
  fmt::print(
      "\nother benchmark programs (build/bench/, next to this one; google-benchmark flags):\n"
      "  {:<30}{}\n  {:<30}{}\n  {:<30}{}\n  {:<30}{}\n  {:<30}{}\n",
      "hugepage_allocation_bench",
      "the allocation path's own cost: cgroup checks, the mapping registry",
      "hugepage_cascade_bench", "which pages the tail of a block above 1 GiB gets (the cascade)",
      "introspection_bench", "backing_of() per source and collapse() chunk latency", "doctor_bench",
      "hugepage-doctor --pid on a process with 10,000 mappings, every format",
      "hugepage_label_bench",
      "what a label costs: registry record + removal per block (BM_Label_RecordRemove), a 2 MiB "
      "THP allocate + free labelled and not (BM_Thp_AllocateFree); run: hugepage_label_bench "
      "--benchmark_repetitions=5");
  fmt::print(
      "\nrun: hugepage_bench [--quick] [--suites=A,B] [--sizes=4M,1G] [--allocators=std,thp]; "
      "--paired [--rounds=N] [--round-seconds=S] runs the [also --paired] suites with every "
      "contender in one process; bench/run.py runs them all with the peers\n");
}

}  // namespace hugepage_bench
