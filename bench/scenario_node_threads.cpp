// bench/scenario_node_threads.cpp - scenario 6: node containers of several threads at once.
//
// N threads (2, 4 and 8: on the 2-core VM the last two oversubscribe it) each own a std::map of
// u64 -> u64 holding working_set / N bytes of nodes, and churn it as fast as they can for the
// row's time: each operation erases a random key, inserts a new one (one node freed, one
// allocated) and looks one up, timed one by one (closed loop: the figures are each operation's
// time, preemption by the other threads included). Rows: std (glibc; jemalloc and mimalloc under
// their configurations: a cache per thread), arena_mt (ours: shared_arena_allocator with one tag
// for every thread, i.e. one process-wide arena whose size classes each have one mutex) and thp
// (ours: shared_arena_allocator with one tag per thread, an arena per thread). requests_per_s is
// the operations of all threads per second; the lat_ figures are over all of them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"
#include "hugepage/shared_arena_allocator.hpp"
#include "registry.hpp"
#include "scenario_engine.hpp"

namespace hugepage_bench {
namespace {

constexpr std::size_t node_bytes = 48;  // a std::map node of u64 -> u64 (and malloc's header)

struct one_tag {};
template <int I>
struct thread_tag {};

template <class Alloc>
using node_map = std::map<u64, u64, std::less<>, Alloc>;

struct thread_result {
  latency_histogram latency;
  std::int64_t max_ns = 0;
  u64 ops = 0;
};

// One thread's work: builds its map of `n` keys, waits for the start, churns until `stop`.
template <class Alloc>
void churn(std::size_t n, u64 seed, std::atomic<int>& ready, const std::atomic<bool>& go,
           const std::atomic<bool>& stop, thread_result& out) {
  node_map<Alloc> m;
  u64 next = 0;
  for (; next < n; ++next) m.emplace(key_of(seed + next), next);
  ready.fetch_add(1);
  while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  const auto timer = static_cast<std::int64_t>(timer_cost_ns());
  u64 sum = 0;
  u64 oldest = 0;  // keys [oldest, next) are in the map: erase the oldest, insert the next
  for (u64 i = 0; !stop.load(std::memory_order_relaxed); ++i) {
    const auto t0 = latency_clock::now();
    m.erase(key_of(seed + oldest++));
    m.emplace(key_of(seed + next), next);
    ++next;
    const auto it = m.find(key_of(seed + oldest + index_of(i, next - oldest)));
    if (it != m.end()) sum += it->second;
    const std::int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(latency_clock::now() - t0).count() -
        timer;
    out.latency.add(ns);
    out.max_ns = std::max(out.max_ns, ns);
    ++out.ops;
  }
  benchmark::DoNotOptimize(sum);
}

// The allocator of thread i: one tag for all (Shared), or thread_tag<i> (i below 8).
template <bool Shared, int I>
using thread_alloc =
    std::conditional_t<Shared, hugepage::shared_arena_allocator<std::pair<const u64, u64>, one_tag>,
                       hugepage::shared_arena_allocator<std::pair<const u64, u64>, thread_tag<I>>>;

using churn_fn = void (*)(std::size_t, u64, std::atomic<int>&, const std::atomic<bool>&,
                          const std::atomic<bool>&, thread_result&);

template <bool Shared, int... I>
std::vector<churn_fn> arena_fns(std::integer_sequence<int, I...>) {
  return {&churn<thread_alloc<Shared, I>>...};
}

std::vector<churn_fn> fns_for(alloc_kind k) {
  if (k == alloc_kind::std_alloc) {
    return std::vector<churn_fn>(8, &churn<std::allocator<std::pair<const u64, u64>>>);
  }
  if (k == alloc_kind::arena_mt) return arena_fns<true>(std::make_integer_sequence<int, 8>());
  return arena_fns<false>(std::make_integer_sequence<int, 8>());
}

template <int Threads>
void node_threads(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  static_assert(Threads <= 8, "one tag per thread: thread_tag<0..7>");
  if (const std::string why = shortage(alloc_kind::std_alloc, working_set * 2); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  const std::chrono::milliseconds duration(working_set < gib ? 1000 : 10000);
  const std::size_t per_thread = working_set / node_bytes / Threads;
  for (auto _ : state) {
    try {
      const std::vector<churn_fn> fns = fns_for(k);
      std::vector<thread_result> results(Threads);
      std::atomic<int> ready{0};
      std::atomic<bool> go{false}, stop{false};
      scenario_figures f;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> threads;
      for (int t = 0; t < Threads; ++t) {
        threads.emplace_back(fns[static_cast<std::size_t>(t)], per_thread,
                             static_cast<u64>(t) << 40, std::ref(ready), std::cref(go),
                             std::cref(stop), std::ref(results[static_cast<std::size_t>(t)]));
      }
      while (ready.load() < Threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      f.startup_ms = ms_since(t0);
      reset_peak_rss();
      f.vm_before = read_vmstat_counts();
      const auto start = latency_clock::now();
      {
        sampler s(std::chrono::milliseconds(100), {});
        go.store(true, std::memory_order_release);
        std::this_thread::sleep_for(duration);
        stop.store(true);
        for (std::thread& t : threads) t.join();
        s.stop();
        f.samples = s.samples();
      }
      f.vm_after = read_vmstat_counts();
      f.loop.seconds = std::chrono::duration<double>(latency_clock::now() - start).count();
      f.loop.timer_ns = timer_cost_ns();
      for (const thread_result& r : results) {
        f.loop.latency.merge(r.latency);
        f.loop.max_ns = std::max(f.loop.max_ns, r.max_ns);
        f.loop.requests += r.ops;
      }
      f.live_bytes = per_thread * Threads * node_bytes;
      report_scenario(state, f);
      state.counters["threads"] = Threads;
      std::string label;
      if (k == alloc_kind::std_alloc) {
        label = "std::allocator (malloc)";
      } else if (k == alloc_kind::arena_mt) {
        label = "shared_arena_allocator, one tag for every thread";
      } else {
        label = "shared_arena_allocator, one tag per thread";
      }
      state.SetLabel(fmt::format("{}; {} threads on {} CPUs", label, Threads,
                                 std::thread::hardware_concurrency()));
    } catch (const std::exception& e) {
      state.SkipWithError(fmt::format("node threads failed: {}", e.what()).c_str());
      return;
    }
  }
}

template <int Threads>
bench_fns threads_fns() {
  bench_fns fns{};
  for (const alloc_kind k : {alloc_kind::std_alloc, alloc_kind::arena_mt, alloc_kind::thp}) {
    fns[static_cast<std::size_t>(k)] = &node_threads<Threads>;
  }
  return fns;
}

suite_info threads_info(const char* name, int order, bench_fns fns, const char* what) {
  suite_info s(name, order, fns);
  s.in_family("scenarios")
      .describe(what)
      .per_op_unit("ms/run")
      .slow()
      .only_for({alloc_kind::std_alloc, alloc_kind::arena_mt, alloc_kind::thp})
      .with_sizes({256 * mib}, {32 * mib})
      .scenario()
      .own_process()
      .peers(peer_role::every_full_run);
  return s;
}

const bool threads2_declared = declare(threads_info(
    "Scenario_NodeThreads2", 205, threads_fns<2>(),
    "2 threads each churning its own std::map (erase, insert, lookup per operation, timed one "
    "by one, closed loop); arena_mt = ours with one tag for all threads (one shared arena), thp "
    "= ours with one tag per thread"));
const bool threads4_declared =
    declare(threads_info("Scenario_NodeThreads4", 206, threads_fns<4>(),
                         "the same with 4 threads (oversubscribed on 2 CPUs)"));
const bool threads8_declared =
    declare(threads_info("Scenario_NodeThreads8", 207, threads_fns<8>(),
                         "the same with 8 threads (oversubscribed on 2 CPUs)"));

}  // namespace
}  // namespace hugepage_bench
