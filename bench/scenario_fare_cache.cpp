// bench/scenario_fare_cache.cpp - scenario 2: a read-mostly fare cache. One absl::flat_hash_map
// of several GiB in a full run (scenario_fares.hpp), random lookups at 200,000 a second open
// loop, one in a hundred an update in place. glibc and the peers put the table in malloc; ours
// puts it on the 2 MiB pool when the pool has room, else on collapse_allocator (huge when
// allocate() returns); the hugetlb_1g row puts it on 1 GiB pages (the allocator's cascade,
// docs/allocators.md: what the docs recommend for a table of several GiB where the machine has
// them), and is left out, with the reason, where it does not. Start-up (build and fault-in) is the
// row's startup_ms: compare it only with the baseline of the same round (a guest's memory given
// back to the host faults in slowly).
#include <chrono>
#include <cstddef>
#include <exception>
#include <string>

#include "common.hpp"
#include "registry.hpp"
#include "scenario_engine.hpp"
#include "scenario_fares.hpp"

namespace hugepage_bench {
namespace {

constexpr double fare_rate = 200'000.0;
constexpr u64 fare_update_every = 100;

template <class Inner>
void run_fares(benchmark::State& state, u64 routes, std::chrono::milliseconds duration) {
  scenario_figures f;
  auto m = build_fares<Inner>(routes, f.startup_ms);
  const block_record table = largest_block;
  reset_peak_rss();
  begin_kernel_counts(f);
  {
    sampler s(std::chrono::milliseconds(100), [table] { return table_coverage(table); });
    f.sampled_from = s.start();
    u64 sum = 0;
    f.loop = run_open_loop(fare_rate, duration,
                           [&](u64 i) { sum += fare_request(*m, routes, i, fare_update_every); });
    benchmark::DoNotOptimize(sum);
    s.stop();
    f.samples = s.samples();
  }
  end_kernel_counts(f);
  f.live_bytes = m->capacity() * fare_slot_bytes;
  f.huge_pct = table_coverage(table);
  report_scenario(state, f);
}

void fare_cache(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  const u64 routes = routes_for(working_set);
  const std::size_t array = fare_array_bytes(routes);
  if (const std::string why = shortage(alloc_kind::std_alloc, array); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  // 2 s in --quick (working sets below 1 GiB), 30 s in a full run.
  const std::chrono::milliseconds duration(working_set < gib ? 2000 : 30000);
  if (k == alloc_kind::hugetlb_1g) {
    if (const std::string why = shortage(k, array); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
  }
  for (auto _ : state) {
    try {
      std::string which;
      if (k == alloc_kind::hugetlb_1g) {
        which = "1 GiB pages (huge_page_allocator<huge_1g>, 2 MiB below 1 GiB)";
        run_fares<hugetlb_1g_bytes>(state, routes, duration);
      } else {
        with_inner(k, array, which,
                   [&](auto inner) { run_fares<decltype(inner)>(state, routes, duration); });
      }
      state.SetLabel(which);
    } catch (const std::exception& e) {
      state.SkipWithError(fmt::format("fare cache failed: {}", e.what()).c_str());
      return;
    }
  }
}

const bool fare_cache_declared = declare(
    suite_info("Scenario_FareCache", 202, per_allocator(&fare_cache))
        .in_family("scenarios")
        .describe("a read-mostly absl::flat_hash_map fare cache: 200k requests/s open loop, 1% "
                  "updates in place, each timed; one iteration = build + 2 s (quick) or 30 s")
        .per_op_unit("ms/run")
        .slow()
        .only_for({alloc_kind::std_alloc, alloc_kind::hugetlb_2m, alloc_kind::hugetlb_1g})
        .with_sizes({4 * gib}, {64 * mib})
        .scenario()
        .own_process()
        .peers(peer_role::every_full_run));

}  // namespace
}  // namespace hugepage_bench
