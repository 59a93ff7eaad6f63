// arena_bench: node containers with the hugepage arena against what a user could do instead.
//
// Containers: std::map<uint64_t, uint64_t>, std::unordered_map<uint64_t, uint64_t>,
// absl::node_hash_map<uint64_t, uint64_t>. Allocators ("backends"):
//   std      std::allocator (glibc malloc)
//   arena    hugepage::arena_allocator over an unsynchronized_arena (THP pages)
//   arena_mt hugepage::arena_allocator over the thread-safe arena (one mutex per size class)
//   pmr_pool std::pmr::unsynchronized_pool_resource over hugepage::pmr::thp_resource()
//
// One benchmark row per (container, backend, element count). Each repetition builds the container
// from random keys, then looks up present keys in random order, then runs a steady-state churn of
// erase + insert; each phase is timed by hand. Counters:
//   build_ns, lookup_ns, churn_ns   ns per insert / per lookup / per erase+insert
//   live_mib               the container's live bytes: nodes plus bucket / slot arrays
//   rss_over_live          growth of the process's RSS during the build over live_mib
//   huge_share             AnonHugePages / Rss growth during the build (smaps_rollup)
//   coverage               arena rows: share of the arena's pages on huge pages (backing_of)
// Run with --benchmark_repetitions=N --benchmark_enable_random_interleaving=true and read medians:
// the machine this was written on is shared and noisy.
#include <absl/container/node_hash_map.h>
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/pmr.hpp"

namespace {

using u64 = std::uint64_t;
using value_type = std::pair<const u64, u64>;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kLookups = std::size_t{1} << 21;
constexpr std::size_t kChurn = std::size_t{1} << 20;

// ---- backends ---------------------------------------------------------------------------------

struct std_backend {
  static constexpr const char* name = "std";
  template <class T>
  using alloc = std::allocator<T>;
  template <class T>
  alloc<T> get() {
    return {};
  }
  const hugepage::unsynchronized_arena* arena() const { return nullptr; }
};

template <class Arena>
struct arena_backend {
  static constexpr const char* name = std::is_same_v<Arena, hugepage::arena> ? "arena_mt" : "arena";
  template <class T>
  using alloc = hugepage::arena_allocator<T, Arena>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(nodes);
  }
  const Arena* arena() const { return &nodes; }
  Arena nodes;
};

struct pmr_pool_backend {
  static constexpr const char* name = "pmr_pool";
  template <class T>
  using alloc = std::pmr::polymorphic_allocator<T>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(&pool);
  }
  const hugepage::unsynchronized_arena* arena() const { return nullptr; }
  std::pmr::unsynchronized_pool_resource pool{hugepage::pmr::thp_resource()};
};

// ---- containers -------------------------------------------------------------------------------

struct std_map {
  static constexpr const char* name = "StdMap";
  static constexpr std::size_t node_bytes = 48;  // 32-byte tree header + the pair
  template <class B>
  using type = std::map<u64, u64, std::less<u64>, typename B::template alloc<value_type>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * node_bytes;
  }
};

struct std_unordered_map {
  static constexpr const char* name = "StdUnorderedMap";
  static constexpr std::size_t node_bytes = 24;  // next pointer + the pair (hash not cached)
  template <class B>
  using type = std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>,
                                  typename B::template alloc<value_type>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * node_bytes + m.bucket_count() * sizeof(void*);
  }
};

struct absl_node_hash_map {
  static constexpr const char* name = "NodeHashMap";
  static constexpr std::size_t node_bytes = 16;  // the pair; the slot array holds pointers
  template <class B>
  using type = absl::node_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>,
                                   typename B::template alloc<value_type>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * node_bytes + m.capacity() * (sizeof(void*) + 1);  // slots + control bytes
  }
};

// ---- inputs -----------------------------------------------------------------------------------

u64 splitmix(u64& state) {
  u64 z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// n distinct random keys (odd: the churn inserts even ones, never present).
const std::vector<u64>& keys_for(std::size_t n) {
  static std::map<std::size_t, std::vector<u64>> cache;
  auto& keys = cache[n];
  if (keys.empty()) {
    u64 state = n;
    keys.resize(n);
    for (auto& k : keys) k = splitmix(state) | 1;
  }
  return keys;
}

struct proc_memory {
  double rss = 0, anon_huge = 0;
};

proc_memory read_memory() {
  std::error_code ec;
  const std::string text = hugepage::detail::read_file("/proc/self/smaps_rollup", ec);
  proc_memory m;
  auto field = [&text](const char* name) {
    const auto at = text.find(name);
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + std::strlen(name))) * 1024;
  };
  if (!ec) {
    m.rss = field("\nRss:");
    m.anon_huge = field("\nAnonHugePages:");
  }
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- the benchmark ----------------------------------------------------------------------------

template <class C, class B>
void BM_Node(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<u64>& keys = keys_for(n);
  std::vector<u64> probes(kLookups);
  u64 seed = 42;
  for (auto& p : probes) p = keys[splitmix(seed) % n];

  double live_mib = 0, build_ns = 0, lookup_ns = 0, churn_ns = 0, rss_over_live = 0, huge_share = 0,
         coverage = -1;
  for (auto _ : state) {
    state.PauseTiming();
    ::malloc_trim(0);
    {
      auto backend = std::make_unique<B>();
      const proc_memory before = read_memory();
      auto start = std::chrono::steady_clock::now();
      typename C::template type<B> container(backend->template get<value_type>());
      for (const u64 k : keys) container.emplace(k, k);
      build_ns = seconds_since(start) * 1e9 / static_cast<double>(n);
      const proc_memory built = read_memory();
      live_mib = static_cast<double>(C::live_bytes(container)) / kMiB;
      rss_over_live = (built.rss - before.rss) / static_cast<double>(C::live_bytes(container));
      huge_share = (built.anon_huge - before.anon_huge) / std::max(1.0, built.rss - before.rss);
      if (const auto* a = backend->arena()) coverage = a->backing().huge_fraction();
      state.ResumeTiming();

      start = std::chrono::steady_clock::now();
      u64 sum = 0;
      for (const u64 p : probes) sum += container.find(p)->second;
      benchmark::DoNotOptimize(sum);
      lookup_ns = seconds_since(start) * 1e9 / static_cast<double>(kLookups);

      state.PauseTiming();
      u64 churn_seed = 7;
      u64 fresh = 0;
      start = std::chrono::steady_clock::now();
      std::vector<u64> inserted;
      inserted.reserve(kChurn);
      for (std::size_t i = 0; i < kChurn; ++i) {
        // Erase an original key or an earlier insert, insert a new even key: size stays n.
        const u64 victim = (i % 2 == 0 || inserted.empty())
                               ? keys[splitmix(churn_seed) % n]
                               : inserted[splitmix(churn_seed) % inserted.size()];
        container.erase(victim);
        fresh += 2;
        container.emplace(fresh, fresh);
        inserted.push_back(fresh);
      }
      churn_ns = seconds_since(start) * 1e9 / static_cast<double>(kChurn);
    }
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kLookups));
  state.counters["lookup_ns"] = lookup_ns;
  state.counters["build_ns"] = build_ns;
  state.counters["churn_ns"] = churn_ns;
  state.counters["live_mib"] = live_mib;
  state.counters["rss_over_live"] = rss_over_live;
  state.counters["huge_share"] = huge_share;
  if (coverage >= 0) state.counters["coverage"] = coverage;
}

// ---- paired rounds ----------------------------------------------------------------------------

// On a shared, noisy machine the load changes from second to second. BM_Paired_<Container> builds
// the container once per backend (std, arena, pmr_pool) from the same keys, then alternates short
// batches of lookups and of churn between them, round after round, and reports the median over
// rounds of each backend's ns per operation and of the per-round ratios: the three backends of one
// round ran within a second of each other.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

template <class C>
void BM_Paired(benchmark::State& state) {
  constexpr int kRounds = 15;
  constexpr std::size_t kBatch = 1 << 17;  // lookups per backend per round
  constexpr std::size_t kChurnBatch = 1 << 15;
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<u64>& keys = keys_for(n);
  for (auto _ : state) {
    state.PauseTiming();
    std_backend sb;
    arena_backend<hugepage::unsynchronized_arena> ab;
    pmr_pool_backend pb;
    typename C::template type<std_backend> s_map(sb.get<value_type>());
    typename C::template type<arena_backend<hugepage::unsynchronized_arena>> a_map(
        ab.get<value_type>());
    typename C::template type<pmr_pool_backend> p_map(pb.get<value_type>());
    double build[3];
    auto timed_build = [&keys, n](auto& m) {
      const auto start = std::chrono::steady_clock::now();
      for (const u64 k : keys) m.emplace(k, k);
      return seconds_since(start) * 1e9 / static_cast<double>(n);
    };
    build[0] = timed_build(s_map);
    build[1] = timed_build(a_map);
    build[2] = timed_build(p_map);
    const auto arena_stats = ab.nodes.stats();
    const double arena_coverage = ab.nodes.backing().huge_fraction();

    std::vector<double> look[3], churn[3];
    u64 seed = 42;
    u64 fresh[3] = {0, 0, 0};
    std::vector<u64> probes(kBatch);
    auto lookups = [&probes](auto& m) {
      const auto start = std::chrono::steady_clock::now();
      u64 sum = 0;
      for (const u64 p : probes) {
        const auto it = m.find(p);
        sum += it == m.end() ? 1 : it->second;
      }
      benchmark::DoNotOptimize(sum);
      return seconds_since(start) * 1e9 / static_cast<double>(probes.size());
    };
    // Churn: erase an original key, insert a new even one (never present): size stays n.
    auto churn_batch = [&keys, n](auto& m, u64& next, u64 batch_seed) {
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < kChurnBatch; ++i) {
        m.erase(keys[splitmix(batch_seed) % n]);
        next += 2;
        m.emplace(next, next);
      }
      return seconds_since(start) * 1e9 / static_cast<double>(kChurnBatch);
    };
    for (int round = 0; round < kRounds; ++round) {
      // The churn erases some original keys: a probe may miss (the same probes for every backend).
      for (auto& p : probes) p = keys[splitmix(seed) % n];
      look[0].push_back(lookups(s_map));
      look[1].push_back(lookups(a_map));
      look[2].push_back(lookups(p_map));
      const u64 batch_seed = seed;
      churn[0].push_back(churn_batch(s_map, fresh[0], batch_seed));
      churn[1].push_back(churn_batch(a_map, fresh[1], batch_seed));
      churn[2].push_back(churn_batch(p_map, fresh[2], batch_seed));
    }
    std::vector<double> look_std_over_arena, look_pmr_over_arena, churn_std_over_arena,
        churn_pmr_over_arena;
    for (int r = 0; r < kRounds; ++r) {
      look_std_over_arena.push_back(look[0][r] / look[1][r]);
      look_pmr_over_arena.push_back(look[2][r] / look[1][r]);
      churn_std_over_arena.push_back(churn[0][r] / churn[1][r]);
      churn_pmr_over_arena.push_back(churn[2][r] / churn[1][r]);
    }
    state.counters["lookup_ns_std"] = median(look[0]);
    state.counters["lookup_ns_arena"] = median(look[1]);
    state.counters["lookup_ns_pmr"] = median(look[2]);
    state.counters["lookup_std_over_arena"] = median(look_std_over_arena);
    state.counters["lookup_pmr_over_arena"] = median(look_pmr_over_arena);
    state.counters["churn_ns_std"] = median(churn[0]);
    state.counters["churn_ns_arena"] = median(churn[1]);
    state.counters["churn_ns_pmr"] = median(churn[2]);
    state.counters["churn_std_over_arena"] = median(churn_std_over_arena);
    state.counters["churn_pmr_over_arena"] = median(churn_pmr_over_arena);
    state.counters["build_ns_std"] = build[0];
    state.counters["build_ns_arena"] = build[1];
    state.counters["build_ns_pmr"] = build[2];
    state.counters["arena_live_mib"] = static_cast<double>(arena_stats.live_bytes) / kMiB;
    state.counters["arena_large_mib"] = static_cast<double>(arena_stats.large_bytes) / kMiB;
    state.counters["arena_mapped_mib"] = static_cast<double>(arena_stats.mapped_bytes) / kMiB;
    state.counters["arena_classes"] = static_cast<double>(
        std::count_if(arena_stats.classes.begin(), arena_stats.classes.end(),
                      [](const hugepage::arena_class_stats& c) { return c.pages != 0; }));
    state.counters["arena_coverage"] = arena_coverage;
    state.ResumeTiming();
  }
}

// The thread-safe arena only at the smallest count: it shows the cost of its locks, and the
// largest counts take most of a run's time.
template <class C>
void register_container(const std::vector<std::int64_t>& counts) {
  auto add = [&](const char* backend, auto fn, bool all_counts) {
    for (const auto n : counts) {
      if (!all_counts && n != counts.front()) continue;
      benchmark::RegisterBenchmark((std::string("BM_") + C::name + "_" + backend).c_str(), fn)
          ->Arg(n)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  };
  add(std_backend::name, BM_Node<C, std_backend>, true);
  add("arena", BM_Node<C, arena_backend<hugepage::unsynchronized_arena>>, true);
  add("arena_mt", BM_Node<C, arena_backend<hugepage::arena>>, false);
  add(pmr_pool_backend::name, BM_Node<C, pmr_pool_backend>, true);
  for (const auto n : counts) {
    benchmark::RegisterBenchmark((std::string("BM_Paired_") + C::name).c_str(), BM_Paired<C>)
        ->Arg(n)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Element counts: 64 MiB and 1 GiB of std::map nodes (48 bytes each); the same counts for the
  // hash maps, whose live bytes (live_mib) are smaller per element.
  const std::vector<std::int64_t> sizes = {(64 << 20) / 48, (std::int64_t{1} << 30) / 48};
  register_container<std_map>(sizes);
  register_container<std_unordered_map>(sizes);
  register_container<absl_node_hash_map>(sizes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
