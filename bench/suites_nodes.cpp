// bench/suites_nodes.cpp - node containers on the arena: std::map, std::unordered_map and
// absl::node_hash_map of u64 -> u64; random lookups (mean, and one by one for p50/p99/p99.9),
// build (inserts) and churn (erase the oldest element, insert a new one).
//
// Nodes of the std rows come from std::allocator (glibc, or a peer's malloc through LD_PRELOAD);
// those of our allocators from a hugepage::unsynchronized_arena over the allocator's strategy
// (arena.hpp), so a row named thp is "arena over THP". A working set of W bytes holds W / 48
// elements (the bytes of W of std::map nodes); container_mib is each container's live bytes.
// Also a std::pmr pool over THP (pmr_pool) and the thread-safe arena (arena_mt, build and churn).
// The Lookup and Churn suites run under --paired too: every backend and jemalloc and mimalloc in
// one process, batches alternated round by round (paired.cpp); the node arena's targets are
// declared with them.
//
// One declare() per suite at the bottom of this file; see registry.hpp for the fields.
#include <absl/container/node_hash_map.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>

#include "common.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "latency.hpp"
#include "nodes.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

// Builds the container of `working_set` for allocator `k`; reports coverage_pct, container_mib,
// rss_mib. Coverage: arena rows, the arena's pages read with backing_of; std rows (no address
// range to ask about), AnonHugePages over Rss of what the build added (smaps_rollup).
template <class C, class Inner>
std::shared_ptr<node_container<C, Inner>> build_container(benchmark::State& state, alloc_kind k,
                                                          std::size_t working_set,
                                                          double& coverage) {
  const u64 n = working_set / bytes_per_element;
  // Nodes plus bucket or slot arrays: within 1/8 of the working set for these containers.
  if (const std::string why = shortage(k, working_set + working_set / 8); !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  try {
    const memory_snapshot before = read_rollup();
    auto c = std::make_shared<node_container<C, Inner>>();
    for (u64 i = 0; i < n; ++i) c->map.emplace(key_of(i), i);
    if constexpr (node_source<Inner>::uses_arena) {
      coverage = 100.0 * c->source.huge_fraction();
    } else {
      const memory_snapshot after = read_rollup();
      const double added = after.resident() - before.resident();
      // Less growth than half the nodes: they went into memory resident before the build
      // (reserved at start-up, or kept from an earlier row), whose backing this cannot tell.
      coverage = added < static_cast<double>(n * bytes_per_element) / 2
                     ? -1.0
                     : 100.0 * (after.huge() - before.huge()) / added;
    }
    return c;
  } catch (const std::exception& e) {
    state.SkipWithError(fmt::format("building the container failed: {}", e.what()).c_str());
    return nullptr;
  }
}

// The cached container of a suite (Lookup rows share one; Churn, which changes it, has its own).
template <class C, class Inner>
node_container<C, Inner>* get_container(benchmark::State& state, alloc_kind k,
                                        std::size_t working_set, const char* purpose) {
  const std::string key =
      fmt::format("nodes/{}/{}/{}/{}", purpose, typeid(C).name(), token_of(k), working_set);
  if (cache.key == key) return static_cast<node_container<C, Inner>*>(cache.object.get());
  drop_cache();
  reset_peak_rss();
  double coverage = 0;
  auto c = build_container<C, Inner>(state, k, working_set, coverage);
  if (!c) return nullptr;
  cache.key = key;
  cache.elements = working_set / bytes_per_element;
  cache.coverage = coverage;
  cache.object = c;
  return c.get();
}

// A row over the cached container of `purpose`: `loop(container, n)` runs google-benchmark's loop
// inside the PMU window, then `wrong(container, n)` says what is wrong with its result (nullptr:
// nothing); a right row reports the window and the container (coverage_pct, container_mib, ...).
template <class C, class Inner, class Loop, class Wrong>
void over_cached(benchmark::State& state, alloc_kind k, std::size_t working_set,
                 const char* purpose, Loop&& loop, Wrong&& wrong) {
  auto* c = get_container<C, Inner>(state, k, working_set, purpose);
  if (c == nullptr) return;
  const u64 n = cache.elements;
  perf_window perf;
  perf.start();
  loop(*c, n);
  perf.stop();
  if (const char* why = wrong(*c, n)) {
    state.SkipWithError(why);
    return;
  }
  perf.report(state);
  report_memory(state, cache.coverage, C::live_bytes(c->map));
}

// ---- suites -------------------------------------------------------------------------------------

// Random hits in the cached container, their mean per lookup or each timed on its own
// (latency.hpp): the tail twin uses the container and keys of <Container>_Lookup, so its p50 sits
// beside that suite's mean and the tail shows what TLB misses add.
template <class C, timing Timing>
struct node_lookup {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    u64 found = 0;
    over_cached<C, Inner>(
        state, k, working_set, "lookup",
        [&](const node_container<C, Inner>& c, u64 n) {
          found = sum_of_lookups<Timing>(state, [&c, n](u64 i) -> u64 {
            const auto it = c.map.find(key_of(index_of(i, n)));
            return it != c.map.end() ? it->second + 1 : 0;
          });
        },
        [&](const node_container<C, Inner>&, u64) {
          return found == 0 && state.iterations() > 8 ? "lookups returned wrong results" : nullptr;
        });
  }
};

// Steady state of a book that purges its oldest order for each new one: the size stays n.
template <class C>
struct node_churn {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    over_cached<C, Inner>(
        state, k, working_set, "churn",
        [&state](node_container<C, Inner>& c, u64 n) {
          for (auto _ : state) {
            c.map.erase(key_of(c.oldest));
            c.map.emplace(key_of(c.oldest + n), c.oldest + n);
            ++c.oldest;
          }
        },
        [](const node_container<C, Inner>& c, u64 n) {
          return c.map.size() != n ? "churn changed the size" : nullptr;
        });
  }
};

template <class C>
struct node_build {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    drop_cache();
    reset_peak_rss();
    const u64 n = working_set / bytes_per_element;
    perf_window perf;
    bool reported = false;
    for (auto _ : state) {
      double coverage = 0;
      perf.start();
      auto c = build_container<C, Inner>(state, k, working_set, coverage);
      perf.stop();
      if (!c) break;
      state.PauseTiming();
      if (!reported) {
        report_memory(state, coverage, C::live_bytes(c->map));
        reported = true;
      }
      c.reset();
      state.ResumeTiming();
    }
    if (state.error_occurred()) return;
    state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
    perf.report(state);
  }
};

// What the process holds for a std::map after most of it is erased, beside what is still live.
// Oldest: an order book drops its oldest 90% (insertion order: the survivors were allocated last,
// together), then clears the rest. Scattered: the same 90% erased evenly, every tenth element
// surviving, so survivors sit on every page: no allocator that cannot move objects gives those
// pages back. Resident = growth of Rss plus hugetlb pages over the process before the build
// (smaps_rollup), read right after the erase: the arena gives an empty page back at the free that
// empties it; jemalloc and mimalloc return freed pages after a delay (decay), glibc from the top of
// its heap only (or on malloc_trim). The runner runs each purge row (suite and size) in a process
// of its own, so no memory that earlier rows freed is reused by the build. One iteration = one
// purge (the build is not timed).
enum class purge { oldest, scattered };

template <purge Which>
struct std_map_purge {
  static constexpr bool scattered = Which == purge::scattered;
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    drop_cache();
    reset_peak_rss();
    const u64 n = working_set / bytes_per_element;
    const u64 survivors = n - n * 9 / 10;
    for (auto _ : state) {
      state.PauseTiming();
      const memory_snapshot before = read_rollup();
      double coverage = 0;
      auto c = build_container<std_map, Inner>(state, k, working_set, coverage);
      if (!c) break;
      const memory_snapshot built = read_rollup();
      state.ResumeTiming();
      for (u64 i = 0; i < n; ++i) {
        if (scattered ? i % 10 != 0 : i < n - survivors) c->map.erase(key_of(i));
      }
      state.PauseTiming();
      const memory_snapshot purged = read_rollup();
      report_memory(state, coverage, std_map::live_bytes(c->map));
      const auto built_live = static_cast<double>(n * bytes_per_element);
      if (built.resident() - before.resident() < built_live / 2) {
        // The nodes went into memory that was resident before the build (mimalloc maps and
        // touches its reserved 1 GiB pages at start-up): the process's growth cannot tell what the
        // allocator holds.
        state.counters["resident_before_build"] = 1;
        c.reset();
        state.ResumeTiming();
        continue;
      }
      const auto live = static_cast<double>(std_map::live_bytes(c->map));
      const double held = purged.resident() - before.resident();
      state.counters["live_kib"] = live / 1024;
      state.counters["resident_mib"] = held / mib;
      state.counters["bloat_x"] = held / live;
      state.counters["built_resident_mib"] = (built.resident() - before.resident()) / mib;
      state.counters["built_live_mib"] = built_live / mib;
      if (!scattered) {
        c->map.clear();
        state.counters["cleared_resident_mib"] =
            (read_rollup().resident() - before.resident()) / mib;
      }
      c.reset();
      state.ResumeTiming();
    }
  }
};

// ---- declarations -------------------------------------------------------------------------------

// The arena over THP and over the 2 MiB pool beside std; 64 MiB to 1 GiB (1 GiB of std::map nodes
// takes about a minute to build on a 2-core VM: builds run in the first round only).
std::vector<alloc_kind> node_allocators() {
  return {alloc_kind::std_alloc, alloc_kind::thp, alloc_kind::hugetlb_2m};
}
// Lookups also on the arena over 1 GiB pages (one 1 GiB slab per size class in use, large arrays on
// 2 MiB pages through the cascade): the page size mimalloc's reserved pages give it; and on what a
// user could do with the standard library instead: a pmr pool over THP.
std::vector<alloc_kind> node_lookup_allocators() {
  std::vector<alloc_kind> kinds = node_allocators();
  kinds.push_back(alloc_kind::hugetlb_1g);
  kinds.push_back(alloc_kind::pmr_pool);
  return kinds;
}
// Build and churn also with the thread-safe arena (its locks' cost; lookups take none).
std::vector<alloc_kind> node_change_allocators() {
  std::vector<alloc_kind> kinds = node_allocators();
  kinds.push_back(alloc_kind::pmr_pool);
  kinds.push_back(alloc_kind::arena_mt);
  return kinds;
}
// The default run stops at 256 MiB: building a 1 GiB node container (22M nodes) takes about a
// minute per configuration on a 2-core machine, which would take the default run far past its
// budget. `scripts/bench --sizes=64M,256M,1G` measures the 1 GiB rows.
std::vector<std::size_t> node_sizes() { return {64 * mib, 256 * mib}; }

/// The node suites' function for every allocator, the node backends included.
template <class Suite>
bench_fns per_node_backend() {
  bench_fns f = per_allocator<Suite>();
  f[static_cast<std::size_t>(alloc_kind::pmr_pool)] = &Suite::template run<pmr_pool_nodes>;
  f[static_cast<std::size_t>(alloc_kind::arena_mt)] = &Suite::template run<arena_mt_nodes>;
  return f;
}

// The node arena's targets. Lookups, judged from 1 GiB (below it the TLB misses are few): against
// glibc, paired in one process, and against the best peer, paired in one process and over the
// rounds. The rest at every size.
void lookup_targets(suite_info& s) {
  s.target(target_info("lookup >= 1.3x glibc (glibc / arena over THP, paired median)")
               .ratio("std", "thp")
               .at_least_(1.3)
               .from(gib)
               .in_paired())
      .target(target_info("lookup: best of ours / best peer <= 1.00 (paired median)")
                  .ratio("ours", "best_peer")
                  .at_most(1.0)
                  .from(gib)
                  .in_paired())
      .target(target_info("lookup: best of ours / best peer <= 1.02 over the rounds")
                  .ratio("ours", "best_peer")
                  .at_most(1.02)
                  .from(256 * mib))
      .target(target_info("build: no slower than glibc (glibc / arena, one build each)")
                  .ratio("std", "thp")
                  .of_counter("build_ns")
                  .at_least_(1.0)
                  .in_paired())
      .target(target_info("build: no slower than the pmr pool (pmr / arena, one build each)")
                  .ratio("pmr_pool", "thp")
                  .of_counter("build_ns")
                  .at_least_(1.0)
                  .in_paired())
      .target(target_info("arena RSS after build <= 1.10x live + one 2 MiB page (one size class)")
                  .value("rss_over_live", "thp")
                  .at_most(1.10)
                  .plus_per_live(2 * mib)
                  .in_paired())
      .target(target_info("arena over THP: >= 99% of its pages huge")
                  .value("coverage_pct", "thp")
                  .at_least_(99)
                  .in_paired())
      .target(target_info("arena over 1 GiB pages: >= 99% of its pages huge")
                  .value("coverage_pct", "hugetlb_1g")
                  .at_least_(99)
                  .in_paired());
}

void churn_targets(suite_info& s) {
  s.target(target_info("churn: no slower than glibc (glibc / arena, paired median)")
               .ratio("std", "thp")
               .at_least_(1.0)
               .in_paired())
      .target(target_info("churn: no slower than the pmr pool (pmr / arena, paired median)")
                  .ratio("pmr_pool", "thp")
                  .at_least_(1.0)
                  .in_paired());
}

template <class C, class Strong>
void declare_node_suites(const char* container, const char* what, int order) {
  suite_info lookup(std::string(container) + "_Lookup", order,
                    per_node_backend<node_lookup<C, timing::mean>>());
  lookup.in_family("node containers")
      .describe(std::string(what) + " random hits; one iteration = one lookup")
      .per_op_unit("ns/lookup")
      .only_for(node_lookup_allocators())
      .with_sizes(node_sizes(), {64 * mib})
      .peers(peer_role::every_full_run)
      .paired(node_contenders<C, Strong, false>());
  lookup_targets(lookup);
  declare(std::move(lookup));
  declare(suite_info(std::string(container) + "_LookupLatency", order + 1,
                     per_node_backend<node_lookup<C, timing::one_by_one>>())
              .in_family("node containers")
              .describe(std::string("Lookup's hits timed one by one: p50/p99/p99.9 per lookup; ") +
                        "one iteration = a batch of timed lookups")
              .per_op_unit("ns/batch")
              .only_for(node_lookup_allocators())
              .with_sizes(node_sizes(), {64 * mib})
              .peers(peer_role::every_full_run)
              .tail_of(std::string(container) + "_Lookup"));
  declare(
      suite_info(std::string(container) + "_Build", order + 2, per_node_backend<node_build<C>>())
          .in_family("node containers")
          .describe(std::string(what) + " emplace of W/48 random keys; one iteration = one build")
          .per_op_unit("ms/build")
          .slow()
          .first_round_only()
          .only_for(node_change_allocators())
          .with_sizes({64 * mib, 256 * mib}, {64 * mib}));
  suite_info churn(std::string(container) + "_Churn", order + 3, per_node_backend<node_churn<C>>());
  churn.in_family("node containers")
      .describe(std::string(what) +
                " erase the oldest element + emplace a new one; one iteration = both")
      .per_op_unit("ns/op")
      .first_round_only()
      .only_for(node_change_allocators())
      .with_sizes({64 * mib, 256 * mib}, {64 * mib})
      .paired(node_contenders<C, Strong, true>());
  churn_targets(churn);
  declare(std::move(churn));
}

// The purge suites: slow, first round only, each row in a process of its own (what the process
// holds after the purge is the measure), on the bloat table.
template <purge Which>
void declare_purge_suite(const char* name, int order, const char* what) {
  declare(suite_info(name, order, per_allocator<std_map_purge<Which>>())
              .in_family("node containers")
              .describe(what)
              .per_op_unit("ms/purge")
              .slow()
              .first_round_only()
              .only_for(node_allocators())
              .with_sizes(node_sizes(), {64 * mib})
              .peers(peer_role::every_full_run)
              .own_process()
              .bloat_table());
}

const bool nodes_declared = [] {
  // An insert that throws leaves std::map and std::unordered_map as they were; not
  // absl::node_hash_map (README, "Node arena": growth records the new capacity before it
  // allocates, an insert marks its slot full before it allocates the node).
  declare_node_suites<std_map, std::true_type>("StdMap", "std::map<u64,u64>", 60);
  declare_node_suites<std_unordered_map, std::true_type>("StdUnorderedMap",
                                                         "std::unordered_map<u64,u64>", 64);
  declare_node_suites<node_hash_map, std::false_type>("NodeHashMap", "absl::node_hash_map<u64,u64>",
                                                      68);
  declare_purge_suite<purge::oldest>(
      "StdMap_PurgeOldest", 72,
      "std::map<u64,u64> of W/48 keys, its oldest 90% erased (insertion order), then cleared: "
      "resident bytes vs live bytes; one iteration = one purge");
  declare_purge_suite<purge::scattered>(
      "StdMap_PurgeScattered", 73,
      "std::map<u64,u64> of W/48 keys, 90% erased evenly (every tenth survives, on every page): "
      "resident bytes vs live bytes; one iteration = one purge");
  return true;
}();

}  // namespace
}  // namespace hugepage_bench
