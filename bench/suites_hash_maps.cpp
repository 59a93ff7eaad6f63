// bench/suites_hash_maps.cpp - absl::flat_hash_map<u64,u64> suites: lookups (hits, misses, one by
// one for the tail) and building.
//
// One declare() per suite at the bottom of this file; see registry.hpp for the fields.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "common.hpp"
#include "latency.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

// ---- the shared map
// ------------------------------------------------------------------------------

// Capacity and element count of a flat_hash_map whose slot array is `working_set` bytes: capacity
// 2^k - 1, filled to absl's maximum load (7/8) so that reserve() allocates exactly once.
struct map_shape {
  std::size_t capacity;
  u64 elements;
};
map_shape shape_of_map(std::size_t working_set) {
  std::size_t slots = 16;
  while (slots * 2 * sizeof(std::pair<u64, u64>) <= working_set) slots *= 2;
  const std::size_t capacity = slots - 1;
  return {capacity, capacity - capacity / 8};
}
std::size_t map_bytes(std::size_t working_set) {
  const map_shape s = shape_of_map(working_set);
  return (s.capacity + 1) * (sizeof(std::pair<u64, u64>) + 1) + 64;
}

template <class Inner>
map_type<Inner>* get_map(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  const std::string key = fmt::format("map/{}/{}", token_of(k), working_set);
  if (cache.key == key) return static_cast<map_type<Inner>*>(cache.object.get());
  drop_cache();
  if (const std::string why = shortage(k, map_bytes(working_set)); !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  reset_peak_rss();
  const map_shape shape = shape_of_map(working_set);
  try {
    auto map = std::make_shared<map_type<Inner>>();
    map->reserve(shape.elements);
    for (u64 i = 0; i < shape.elements; ++i) map->try_emplace(key_of(i), i);
    cache.key = key;
    cache.block = largest_block.p;
    cache.block_bytes = largest_block.bytes;
    cache.elements = shape.elements;
    cache.object = std::move(map);
  } catch (const std::exception& e) {
    drop_cache();
    state.SkipWithError(fmt::format("building the map failed: {}", e.what()).c_str());
    return nullptr;
  }
  return static_cast<map_type<Inner>*>(cache.object.get());
}

// ---- suites
// --------------------------------------------------------------------------------------

// Which keys a lookup suite asks for: hits, the key of a random inserted index; misses, keys of
// indices past the inserted ones, which the bijective mixer keeps distinct from every inserted key.
enum class keys { hits, misses };

// Random lookups in the cached map. Timed one by one (latency.hpp): the map and hits of
// FlatHashMap_Lookup, so the p50 sits beside that suite's mean per lookup and the tail is what the
// TLB adds.
template <keys Keys, timing Timing>
struct flat_hash_map_lookup {
  static constexpr bool hit = Keys == keys::hits;
  static_assert(hit || Timing == timing::mean, "the tail suite times hits");
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    map_type<Inner>* map = get_map<Inner>(state, k, working_set);
    if (map == nullptr) return;
    const u64 n = cache.elements;
    perf_window perf;
    perf.start();
    const u64 found = sum_of_lookups<Timing>(state, [map, n](u64 counter) -> u64 {
      const u64 i = index_of(counter, n);
      if constexpr (hit) {
        const auto it = map->find(key_of(i));
        return it != map->end() ? it->second : 0;
      } else {
        return map->contains(key_of(n + i)) ? 1 : 0;
      }
    });
    perf.stop();
    if (hit ? found == 0 && n > 1 && state.iterations() > 8 : found != 0) {
      state.SkipWithError("lookups returned wrong results");
      return;
    }
    perf.report(state);
    report_cached_block(state, k);
  }
};

struct flat_hash_map_build {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    drop_cache();
    if (const std::string why = shortage(k, map_bytes(working_set)); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    reset_peak_rss();
    const map_shape shape = shape_of_map(working_set);
    std::optional<map_type<Inner>> map;
    double coverage = -1;
    std::size_t bytes = 0;
    perf_window perf;
    for (auto _ : state) {
      perf.start();
      try {
        map.emplace();
        map->reserve(shape.elements);
        for (u64 i = 0; i < shape.elements; ++i) map->try_emplace(key_of(i), i);
      } catch (const std::exception& e) {
        perf.stop();
        map.reset();
        state.SkipWithError(fmt::format("build failed: {}", e.what()).c_str());
        break;
      }
      perf.stop();
      state.PauseTiming();
      if (coverage < 0) {
        bytes = largest_block.bytes;
        coverage = coverage_pct(largest_block.p, largest_block.bytes);
        report_memory(state, coverage, bytes);
      }
      map.reset();
      state.ResumeTiming();
    }
    if (state.error_occurred()) return;
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(shape.elements));
    perf.report(state);
  }
};

// ---- declarations -------------------------------------------------------------------------------

const bool lookup_declared =
    declare(suite_info("FlatHashMap_Lookup", 10,
                       per_allocator<flat_hash_map_lookup<keys::hits, timing::mean>>())
                .in_family("hash maps")
                .describe("absl::flat_hash_map<u64,u64> random hits; one iteration = one lookup")
                .per_op_unit("ns/lookup")
                .quick()
                .core()
                .peers(peer_role::core)
                .chart()
                // Our best huge-page row no slower than the best peer, once the table is past
                // the reach of the TLB with base pages.
                .target(target_info("lookup: best of ours / best peer <= 1.02 over the rounds")
                            .ratio("ours", "best_peer")
                            .at_most(1.02)
                            .from(256 * mib)));

const bool lookup_miss_declared =
    declare(suite_info("FlatHashMap_LookupMiss", 11,
                       per_allocator<flat_hash_map_lookup<keys::misses, timing::mean>>())
                .in_family("hash maps")
                .describe("random misses in the Lookup map; one iteration = one lookup")
                .per_op_unit("ns/lookup"));

const bool lookup_latency_declared =
    declare(suite_info("FlatHashMap_LookupLatency", 12,
                       per_allocator<flat_hash_map_lookup<keys::hits, timing::one_by_one>>())
                .in_family("hash maps")
                .describe("Lookup's hits timed one by one: p50/p99/p99.9 per lookup (timer cost "
                          "subtracted); one iteration = a batch of 64 timed lookups")
                .per_op_unit("ns/batch")
                .quick()
                .core()
                .peers(peer_role::core)
                .tail_of("FlatHashMap_Lookup"));

const bool build_declared =
    declare(suite_info("FlatHashMap_Build", 30, per_allocator<flat_hash_map_build>())
                .in_family("hash maps")
                .describe("reserve + try_emplace of N keys; one iteration = one build")
                .per_op_unit("ms/build")
                .slow()
                .first_round_only());

}  // namespace
}  // namespace hugepage_bench
