// tools/doctor/advise_counters.cpp - the counters advice rests on: vmstat, meminfo, free-memory
// fragmentation.
#include "advise_parts.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

namespace {

// Zones whose free memory serves ordinary allocations (not the 16 MiB ISA DMA zone).
bool counts_for_readiness(const zone_readiness& z) { return z.zone != "DMA"; }

}  // namespace

std::uint64_t counter(const system_report& s, const char* name) {
  const auto it = s.vmstat.find(name);
  return it == s.vmstat.end() ? 0 : it->second;
}

std::optional<std::uint64_t> meminfo(const system_report& s, const char* key) {
  const auto it = s.meminfo.find(key);
  if (!s.meminfo_readable || it == s.meminfo.end()) return std::nullopt;
  return it->second;
}

fragmentation fragmentation_of(const system_report& s) {
  fragmentation f;
  if (!s.zones) return f;
  for (const zone_readiness& z : *s.zones) {
    if (!counts_for_readiness(z)) continue;
    f.free += z.free_bytes;
    f.ready += z.huge_ready_bytes;
  }
  f.fragmented = f.free >= 256 * units::mib && f.ready < f.free / 10;
  return f;
}

// THP faults since boot fell back to base pages often enough to matter.
bool fallbacks_matter(const system_report& s) {
  const std::uint64_t alloc = counter(s, "thp_fault_alloc");
  const std::uint64_t fallback = counter(s, "thp_fault_fallback");
  return fallback >= 100 && fallback * 10 > alloc + fallback;
}

}  // namespace hugepage::doctor
