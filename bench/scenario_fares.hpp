// bench/scenario_fares.hpp - the read-mostly table of scenarios 2, 4 and 5: an
// absl::flat_hash_map of route id -> fare, sized to a working set, built with one reserve() so
// that no rehash holds two arrays at once.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common.hpp"
#include "scenario_engine.hpp"

namespace hugepage_bench {

struct fare {
  u64 cents = 0;
  std::uint32_t seats = 0;
  std::uint32_t version = 0;
  u64 updated = 0;
};

template <class Inner>
using fare_map = absl::flat_hash_map<u64, fare, absl::Hash<u64>, std::equal_to<u64>,
                                     recording_allocator<std::pair<const u64, fare>, Inner>>;

/// Bytes of a flat_hash_map's array per slot: the pair and its control byte.
constexpr std::size_t fare_slot_bytes = sizeof(std::pair<const u64, fare>) + 1;

/// Routes that fill a fare table of about `working_set` bytes (at most 1.1x) at absl's largest
/// load (7/8): the array is (capacity + 1) slots, capacity the power of two minus one that
/// reserve() picks.
inline u64 routes_for(std::size_t working_set) {
  u64 capacity = 1;
  while ((capacity * 2 + 2) * fare_slot_bytes <= working_set + working_set / 10) {
    capacity = capacity * 2 + 1;
  }
  return capacity - capacity / 8;
}

/// Bytes of the array the table of `routes` maps (what ours asks the pool for).
inline std::size_t fare_array_bytes(u64 routes) {
  u64 capacity = 1;
  while (capacity - capacity / 8 < routes) capacity = capacity * 2 + 1;
  return (capacity + 1) * fare_slot_bytes + 64;
}

/// A fare table of `routes` routes (keys key_of(0..routes-1)), built and faulted in; `ms` gets
/// the time it took. The table's array is largest_block afterwards.
template <class Inner>
std::unique_ptr<fare_map<Inner>> build_fares(u64 routes, double& ms) {
  const auto t0 = std::chrono::steady_clock::now();
  auto m = std::make_unique<fare_map<Inner>>();
  m->reserve(routes);
  for (u64 i = 0; i < routes; ++i) m->emplace(key_of(i), fare{1000 + i % 50000, 100, 0, 0});
  ms = ms_since(t0);
  return m;
}

/// The read-mostly request of scenarios 2 and 4: a lookup of a random route, or every
/// `update_every`-th request an update of one (a write into the table's array).
template <class Map>
u64 fare_request(Map& m, u64 routes, u64 i, u64 update_every) {
  const u64 r = mix_index(i ^ 0xfa7e);
  const auto it = m.find(key_of(index_of(r, routes)));
  if (it == m.end()) return 0;
  if (i % update_every == 0) {
    it->second.cents += 1;
    it->second.version += 1;
    it->second.updated = i;
  }
  return it->second.cents;
}

/// The table's array: its huge share (backing_of) in percent, -1 without one.
inline double table_coverage(const block_record& table) {
  return table.p ? coverage_pct(table.p, table.bytes) : -1.0;
}

}  // namespace hugepage_bench
