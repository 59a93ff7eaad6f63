// bench/suites_nodes.cpp - node containers on the arena: std::map, std::unordered_map and
// absl::node_hash_map of u64 -> u64; random lookups (mean, and one by one for p50/p99/p99.9),
// build (inserts) and churn (erase the oldest element, insert a new one).
//
// Nodes of the std rows come from std::allocator (glibc, or a peer's malloc through LD_PRELOAD);
// those of our allocators from a hugepage::unsynchronized_arena over the allocator's strategy
// (arena.hpp), so a row named thp is "arena over THP". A working set of W bytes holds W / 48
// elements (the bytes of W of std::map nodes); container_mib is each container's live bytes.
// For a pmr pool over THP beside these, see bench/arena_bench.cpp (BM_Paired_*).
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
#include "registry.hpp"

namespace hugepage_bench {
namespace {

constexpr std::size_t bytes_per_element = 48;
using node_value = std::pair<const u64, u64>;

// Where nodes come from: std::allocator for the std rows, else an arena over Inner's strategy.
template <class Inner>
struct node_source {
  static constexpr bool uses_arena = !std::is_same_v<Inner, std_bytes>;
  template <class T>
  using alloc =
      std::conditional_t<uses_arena, hugepage::arena_allocator<T, hugepage::unsynchronized_arena>,
                         std::allocator<T>>;
  node_source() {
    if constexpr (uses_arena) nodes.emplace(Inner::get_strategy());
  }
  template <class T>
  alloc<T> get() {
    if constexpr (uses_arena) {
      return alloc<T>(*nodes);
    } else {
      return {};
    }
  }
  std::optional<hugepage::unsynchronized_arena> nodes;
};

template <class Inner>
using node_alloc = typename node_source<Inner>::template alloc<node_value>;

// The three containers: a type and its live bytes (nodes plus bucket or slot arrays).
struct std_map {
  template <class Inner>
  using type = std::map<u64, u64, std::less<u64>, node_alloc<Inner>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * 48;  // tree header (32) + the pair
  }
};
struct std_unordered_map {
  template <class Inner>
  using type = std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>, node_alloc<Inner>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * 24 + m.bucket_count() * sizeof(void*);
  }
};
struct node_hash_map {
  template <class Inner>
  using type =
      absl::node_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>, node_alloc<Inner>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * 16 + m.capacity() * (sizeof(void*) + 1);
  }
};

// A container with its node source; the source is declared first, so it outlives the container.
template <class C, class Inner>
struct node_container {
  node_source<Inner> source;
  typename C::template type<Inner> map{source.template get<node_value>()};
  u64 oldest = 0;  // churn: elements [oldest, oldest + n) are present
};

// Bytes from /proc/self/smaps_rollup. hugetlb pages are not in Rss: `resident` adds them (private
// and shared: the kernel may count a private 1 GiB page as shared, seen on Linux 6.18).
struct memory_snapshot {
  double rss = 0, anon_huge = 0, hugetlb = 0;
  double resident() const { return rss + hugetlb; }
  double huge() const { return anon_huge + hugetlb; }
};
memory_snapshot read_rollup() {
  const std::string text = read_text("/proc/self/smaps_rollup");
  const auto kib = [&text](const char* key) {
    return static_cast<double>(kb_field(text, key).value_or(0));
  };
  return {kib("Rss"), kib("AnonHugePages"), kib("Private_Hugetlb") + kib("Shared_Hugetlb")};
}

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
      coverage = 100.0 * c->source.nodes->backing().huge_fraction();
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

template <class C, class Inner>
void report_container(benchmark::State& state, const node_container<C, Inner>& c) {
  report_memory(state, cache.coverage, C::live_bytes(c.map));
}

// ---- suites -------------------------------------------------------------------------------------

template <class C, class Inner>
void node_lookup(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  auto* c = get_container<C, Inner>(state, k, working_set, "lookup");
  if (c == nullptr) return;
  const u64 n = cache.elements;
  u64 counter = 0, found = 0;
  perf_window perf;
  perf.start();
  for (auto _ : state) {
    const auto it = c->map.find(key_of(index_of(counter++, n)));
    found += it != c->map.end() ? it->second + 1 : 0;
  }
  perf.stop();
  benchmark::DoNotOptimize(found);
  if (found == 0 && state.iterations() > 8) {
    state.SkipWithError("lookups returned wrong results");
    return;
  }
  perf.report(state);
  report_container(state, *c);
}

// Each lookup timed on its own (latency.hpp): the container and keys of <Container>_Lookup, so the
// p50 sits beside that suite's mean and the tail shows what TLB misses add.
template <class C, class Inner>
void node_lookup_latency(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  auto* c = get_container<C, Inner>(state, k, working_set, "lookup");
  if (c == nullptr) return;
  const u64 n = cache.elements;
  u64 found = 0;
  perf_window perf;
  perf.start();
  time_each(state, [&](u64 i) {
    const auto it = c->map.find(key_of(index_of(i, n)));
    found += it != c->map.end() ? it->second + 1 : 0;
    benchmark::DoNotOptimize(found);
  });
  perf.stop();
  if (found == 0 && state.iterations() > 8) {
    state.SkipWithError("lookups returned wrong results");
    return;
  }
  perf.report(state);
  report_container(state, *c);
}

// Steady state of a book that purges its oldest order for each new one: the size stays n.
template <class C, class Inner>
void node_churn(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  auto* c = get_container<C, Inner>(state, k, working_set, "churn");
  if (c == nullptr) return;
  const u64 n = cache.elements;
  perf_window perf;
  perf.start();
  for (auto _ : state) {
    c->map.erase(key_of(c->oldest));
    c->map.emplace(key_of(c->oldest + n), c->oldest + n);
    ++c->oldest;
  }
  perf.stop();
  if (c->map.size() != n) {
    state.SkipWithError("churn changed the size");
    return;
  }
  perf.report(state);
  report_container(state, *c);
}

template <class C, class Inner>
void node_build(benchmark::State& state, alloc_kind k, std::size_t working_set) {
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
template <class Inner, bool Scattered>
void std_map_purge(benchmark::State& state, alloc_kind k, std::size_t working_set) {
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
      if (Scattered ? i % 10 != 0 : i < n - survivors) c->map.erase(key_of(i));
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
    if (!Scattered) {
      c->map.clear();
      state.counters["cleared_resident_mib"] = (read_rollup().resident() - before.resident()) / mib;
    }
    c.reset();
    state.ResumeTiming();
  }
}

template <class C>
struct suites_of {
  template <class Inner>
  struct lookup {
    static void run(benchmark::State& s, alloc_kind k, std::size_t ws) {
      node_lookup<C, Inner>(s, k, ws);
    }
  };
  template <class Inner>
  struct lookup_latency {
    static void run(benchmark::State& s, alloc_kind k, std::size_t ws) {
      node_lookup_latency<C, Inner>(s, k, ws);
    }
  };
  template <class Inner>
  struct build {
    static void run(benchmark::State& s, alloc_kind k, std::size_t ws) {
      node_build<C, Inner>(s, k, ws);
    }
  };
  template <class Inner>
  struct churn {
    static void run(benchmark::State& s, alloc_kind k, std::size_t ws) {
      node_churn<C, Inner>(s, k, ws);
    }
  };
};

// ---- declarations -------------------------------------------------------------------------------

// The arena over THP and over the 2 MiB pool beside std; 64 MiB to 1 GiB (1 GiB of std::map nodes
// takes about a minute to build on a 2-core VM: builds run in the first round only).
std::vector<alloc_kind> node_allocators() {
  return {alloc_kind::std_alloc, alloc_kind::thp, alloc_kind::hugetlb_2m};
}
// Lookups also on the arena over 1 GiB pages (one 1 GiB slab per size class in use, large arrays on
// 2 MiB pages through the cascade): the page size mimalloc's reserved pages give it.
std::vector<alloc_kind> node_lookup_allocators() {
  std::vector<alloc_kind> kinds = node_allocators();
  kinds.push_back(alloc_kind::hugetlb_1g);
  return kinds;
}
// The default run stops at 256 MiB: building a 1 GiB node container (22M nodes) takes about a
// minute per configuration on a 2-core machine, which would take the default run far past its
// budget. `scripts/bench --sizes=64M,256M,1G` measures the 1 GiB rows.
std::vector<std::size_t> node_sizes() { return {64 * mib, 256 * mib}; }

template <class C>
void declare_node_suites(const char* container, const char* what, int order) {
  declare(suite_info(std::string(container) + "_Lookup", order,
                     per_allocator<suites_of<C>::template lookup>())
              .in_family("node containers")
              .describe(std::string(what) + " random hits; one iteration = one lookup")
              .per_op_unit("ns/lookup")
              .only_for(node_lookup_allocators())
              .with_sizes(node_sizes(), {64 * mib})
              .peers(peer_role::every_full_run));
  declare(suite_info(std::string(container) + "_LookupLatency", order + 1,
                     per_allocator<suites_of<C>::template lookup_latency>())
              .in_family("node containers")
              .describe(std::string("Lookup's hits timed one by one: p50/p99/p99.9 per lookup; ") +
                        "one iteration = a batch of timed lookups")
              .per_op_unit("ns/batch")
              .only_for(node_lookup_allocators())
              .with_sizes(node_sizes(), {64 * mib})
              .peers(peer_role::every_full_run)
              .tail_of(std::string(container) + "_Lookup"));
  declare(
      suite_info(std::string(container) + "_Build", order + 2,
                 per_allocator<suites_of<C>::template build>())
          .in_family("node containers")
          .describe(std::string(what) + " emplace of W/48 random keys; one iteration = one build")
          .per_op_unit("ms/build")
          .slow()
          .first_round_only()
          .only_for(node_allocators())
          .with_sizes({64 * mib, 256 * mib}, {64 * mib}));
  declare(suite_info(std::string(container) + "_Churn", order + 3,
                     per_allocator<suites_of<C>::template churn>())
              .in_family("node containers")
              .describe(std::string(what) +
                        " erase the oldest element + emplace a new one; one iteration = both")
              .per_op_unit("ns/op")
              .first_round_only()
              .only_for(node_allocators())
              .with_sizes({64 * mib, 256 * mib}, {64 * mib}));
}

template <class Inner>
struct purge_oldest {
  static void run(benchmark::State& s, alloc_kind k, std::size_t ws) {
    std_map_purge<Inner, false>(s, k, ws);
  }
};
template <class Inner>
struct purge_scattered {
  static void run(benchmark::State& s, alloc_kind k, std::size_t ws) {
    std_map_purge<Inner, true>(s, k, ws);
  }
};

const bool nodes_declared = [] {
  declare_node_suites<std_map>("StdMap", "std::map<u64,u64>", 60);
  declare_node_suites<std_unordered_map>("StdUnorderedMap", "std::unordered_map<u64,u64>", 64);
  declare_node_suites<node_hash_map>("NodeHashMap", "absl::node_hash_map<u64,u64>", 68);
  declare(suite_info("StdMap_PurgeOldest", 72, per_allocator<purge_oldest>())
              .in_family("node containers")
              .describe("std::map<u64,u64> of W/48 keys, its oldest 90% erased (insertion order), "
                        "then cleared: resident bytes vs live bytes; one iteration = one purge")
              .per_op_unit("ms/purge")
              .slow()
              .first_round_only()
              .only_for(node_allocators())
              .with_sizes(node_sizes(), {64 * mib})
              .peers(peer_role::every_full_run)
              .own_process()
              .bloat_table());
  declare(suite_info("StdMap_PurgeScattered", 73, per_allocator<purge_scattered>())
              .in_family("node containers")
              .describe("std::map<u64,u64> of W/48 keys, 90% erased evenly (every tenth survives, "
                        "on every page): resident bytes vs live bytes; one iteration = one purge")
              .per_op_unit("ms/purge")
              .slow()
              .first_round_only()
              .only_for(node_allocators())
              .with_sizes(node_sizes(), {64 * mib})
              .peers(peer_role::every_full_run)
              .own_process()
              .bloat_table());
  return true;
}();

}  // namespace
}  // namespace hugepage_bench
