// bench/scenario_sparse_idle.cpp - scenario 5: a process with a big table beside a large,
// sparsely touched heap, serving for a moment and then idle. What huge pages cost it in RSS.
//
// Beside the fare table (scenario_fares.hpp, the working set), as many bytes again are malloc'd
// in blocks of 64 KiB to 1 MiB, one byte touched per 64 KiB. Live bytes: the table's array and
// one 4 KiB page per touched byte (what the heap holds on base pages). A short request loop
// (lookups, 200,000 a second), then the process sleeps while a sampler reads its RSS every
// 250 ms. A process-wide huge-page setting (THP always, a malloc that advises all its memory)
// puts a 2 MiB page under a touched byte at fault, and khugepaged, at its pace, collapses the
// sparse ranges of an idle process toward their virtual size; ours puts only the table on huge
// pages (the 2 MiB pool when it has room, else collapse_allocator) and leaves the heap to the
// machine's THP mode. The vm_ deltas of this scenario span the loop and the idle time.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"
#include "registry.hpp"
#include "scenario_engine.hpp"
#include "scenario_fares.hpp"

namespace hugepage_bench {
namespace {

constexpr std::size_t touch_stride = 64 * kib;
constexpr std::size_t base_page = 4 * kib;

// The sparse heap: blocks of 64 KiB to 1 MiB (in 4 KiB steps) up to `bytes`, all allocated first
// (as a service sizes its buffers at start-up), then one byte touched per 64 KiB. Frees them when
// destroyed.
struct sparse_heap {
  std::vector<std::pair<void*, std::size_t>> blocks;
  std::size_t touched = 0;
  explicit sparse_heap(std::size_t bytes) {
    for (std::size_t total = 0; total < bytes;) {
      const std::size_t size = 64 * kib + index_of(blocks.size() ^ 0x5a, 241) * base_page;
      void* p = std::malloc(size);  // 64 KiB to 1 MiB
      if (p == nullptr) throw std::bad_alloc();
      blocks.emplace_back(p, size);
      total += size;
    }
    for (const auto& [p, size] : blocks) {
      auto* bytes_of = static_cast<volatile unsigned char*>(p);
      for (std::size_t at = 0; at < size; at += touch_stride) {
        bytes_of[at] = 1;
        ++touched;
      }
    }
  }
  sparse_heap(const sparse_heap&) = delete;
  sparse_heap& operator=(const sparse_heap&) = delete;
  ~sparse_heap() {
    for (const auto& block : blocks) std::free(block.first);
  }
};

template <class Inner>
void run_sparse(benchmark::State& state, std::size_t working_set) {
  const bool quick = working_set < gib;
  const std::chrono::milliseconds loop_time(quick ? 1000 : 5000);
  const std::chrono::milliseconds idle(quick ? 3000 : 60000);
  const u64 routes = routes_for(working_set);
  scenario_figures f;
  const auto t0 = std::chrono::steady_clock::now();
  auto m = build_fares<Inner>(routes, f.startup_ms);
  const block_record table = largest_block;
  sparse_heap heap(working_set);
  f.startup_ms = ms_since(t0);
  reset_peak_rss();
  begin_kernel_counts(f);
  {
    sampler s(std::chrono::milliseconds(100), [table] { return table_coverage(table); });
    f.sampled_from = s.start();
    u64 sum = 0;
    f.loop = run_open_loop(200'000.0, loop_time,
                           [&](u64 i) { sum += fare_request(*m, routes, i, ~u64{0}); });
    benchmark::DoNotOptimize(sum);
    s.stop();
    f.samples = s.samples();
  }
  std::vector<sample> idle_samples;
  {
    sampler s(std::chrono::milliseconds(250), {});
    std::this_thread::sleep_for(idle);
    s.stop();
    idle_samples = s.samples();
  }
  end_kernel_counts(f);
  f.live_bytes = m->capacity() * fare_slot_bytes + heap.touched * base_page;
  f.huge_pct = table_coverage(table);
  report_scenario(state, f);
  double highest = 0;
  std::string series;
  for (const sample& x : idle_samples) {
    highest = std::max(highest, x.rss_mib);
    series += fmt::format(" {:.0f}:{:.0f}", x.at_ms, x.rss_mib);
  }
  const double live_mib = static_cast<double>(f.live_bytes) / mib;
  const double end = idle_samples.empty() ? read_rss().rss_mib : idle_samples.back().rss_mib;
  state.counters["idle_s"] = std::chrono::duration<double>(idle).count();
  state.counters["idle_rss_start_mib"] = idle_samples.empty() ? end : idle_samples.front().rss_mib;
  state.counters["idle_rss_end_mib"] = end;
  state.counters["idle_rss_max_mib"] = highest;
  state.counters["idle_rss_over_live"] = end / live_mib;
  state.counters["heap_mib"] = static_cast<double>(working_set) / mib;
  fmt::print(stderr, "Scenario_SparseIdle ({}): RSS while idle (ms:MiB):{}\n", working_set, series);
}

void sparse_idle(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  const std::size_t array = fare_array_bytes(routes_for(working_set));
  if (const std::string why = shortage(alloc_kind::std_alloc, array + working_set); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) {
    try {
      std::string which;
      with_inner(k, array, which,
                 [&](auto inner) { run_sparse<decltype(inner)>(state, working_set); });
      state.SetLabel(which + "; heap: malloc");
    } catch (const std::exception& e) {
      state.SkipWithError(fmt::format("sparse idle failed: {}", e.what()).c_str());
      return;
    }
  }
}

const bool sparse_idle_declared = declare(
    suite_info("Scenario_SparseIdle", 204, per_allocator(&sparse_idle))
        .in_family("scenarios")
        .describe("a fare table beside as many bytes of malloc'd 64 KiB-1 MiB blocks, one byte "
                  "touched per 64 KiB; 1 s (quick) or 5 s of lookups, then idle 3 s or 60 s: RSS "
                  "over live bytes while idle")
        .per_op_unit("ms/run")
        .slow()
        .only_for({alloc_kind::std_alloc, alloc_kind::hugetlb_2m})
        .with_sizes({gib}, {64 * mib})
        .scenario()
        .own_process()
        .peers(peer_role::every_full_run)
        .target(target_info("ours RSS within 1.10x of live bytes at the end of the idle time")
                    .value("idle_rss_over_live", "hugetlb_2m")
                    .at_most(1.10)
                    .from(512 * mib)));

}  // namespace
}  // namespace hugepage_bench
