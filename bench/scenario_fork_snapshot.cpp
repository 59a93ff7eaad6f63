// bench/scenario_fork_snapshot.cpp - scenario 4: a service that forks snapshots of its table.
//
// The fare table (scenario_fares.hpp) serves 100,000 requests a second open loop, one in twenty
// an update in place, while another thread forks a child that reads the table for a while and
// exits, a few times over. Every write the parent makes to a huge page it shares with the child
// splits that page (copy-on-write copies 4 KiB), so the table decays while the child lives. A
// sampler reads the table's coverage (backing_of) every 50 ms. Per row: the lowest coverage, and
// for each child the time from its exit to the first sample at >= 99% huge (a child after which
// the table was not back before the next fork, or the end, counts the whole wait:
// unrecovered_cycles says how many).
//
// Rows: std (glibc; the peers run it under their configurations: none has an upkeep), collapse
// (ours: the table on a labelled collapse_allocator, huge at allocation, and an upkeep_thread
// that restores the label's decayed pages every 100 ms, 50 ms at most a call, docs/upkeep.md),
// thp (ours without upkeep: the table on thp_allocator, left to khugepaged).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "registry.hpp"
#include "scenario_engine.hpp"
#include "scenario_fares.hpp"

namespace hugepage_bench {
namespace {

struct snapshot_options : hugepage::default_options {
  static constexpr const char* label = "scenario_fork_snapshot";
};
using snapshot_collapse_bytes = hugepage::collapse_allocator<byte, snapshot_options>;

constexpr double snapshot_rate = 100'000.0;
constexpr u64 snapshot_update_every = 20;
constexpr double recovered_pct = 99.0;

struct fork_plan {
  std::chrono::milliseconds lead, child, gap;  // before the first fork; a child's life; after it
  int cycles;
};

fork_plan plan_for(std::size_t working_set) {
  if (working_set < gib) {  // --quick: fractions of a second
    return {std::chrono::milliseconds(300), std::chrono::milliseconds(300),
            std::chrono::milliseconds(1500), 2};
  }
  return {std::chrono::milliseconds(2000), std::chrono::milliseconds(3000),
          std::chrono::milliseconds(5000), 4};
}

// In the child: reads random words of the table until `life` has passed, then exits. Touches
// nothing else (the parent has other threads; no lock may be taken here).
[[noreturn]] void child_reads(const block_record& table, std::chrono::milliseconds life) {
  const auto* words = static_cast<const volatile u64*>(table.p);
  const u64 n = table.bytes / sizeof(u64);
  const auto end = std::chrono::steady_clock::now() + life;
  u64 sum = 0;
  for (u64 j = 0; std::chrono::steady_clock::now() < end; ++j) {
    for (int k = 0; k < 1024; ++k) sum += words[index_of(j * 1024 + static_cast<u64>(k), n)];
  }
  ::_exit(sum == 42 ? 1 : 0);
}

struct fork_record {
  std::vector<double> fork_ms, exit_ms;  // since the sampler started
  std::string error;
};

void fork_cycles(const block_record& table, const fork_plan& plan,
                 std::chrono::steady_clock::time_point origin, fork_record& out) {
  std::this_thread::sleep_for(plan.lead);
  for (int c = 0; c < plan.cycles; ++c) {
    out.fork_ms.push_back(ms_since(origin));
    const pid_t child = ::fork();
    if (child < 0) {
      out.error = fmt::format("fork: {}", std::strerror(errno));
      out.fork_ms.pop_back();
      return;
    }
    if (child == 0) child_reads(table, plan.child);
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    out.exit_ms.push_back(ms_since(origin));
    std::this_thread::sleep_for(plan.gap);
  }
}

struct recovery {
  double worst_ms = 0;
  int unrecovered = 0;
};

// For each child: from its exit to the first sample at >= 99% before the next fork (or the end).
recovery recovery_of(const std::vector<sample>& samples, const fork_record& r) {
  recovery out;
  const double end = samples.empty() ? 0 : samples.back().at_ms;
  for (std::size_t k = 0; k < r.exit_ms.size(); ++k) {
    const double exit = r.exit_ms[k];
    const double until = k + 1 < r.fork_ms.size() ? r.fork_ms[k + 1] : end;
    const auto back = std::find_if(samples.begin(), samples.end(), [&](const sample& s) {
      return s.at_ms >= exit && s.at_ms <= until && s.coverage_pct >= recovered_pct;
    });
    if (back == samples.end()) {
      ++out.unrecovered;
      out.worst_ms = std::max(out.worst_ms, until - exit);
    } else {
      out.worst_ms = std::max(out.worst_ms, back->at_ms - exit);
    }
  }
  return out;
}

template <class Inner>
void run_snapshots(benchmark::State& state, std::size_t working_set, bool with_upkeep) {
  const u64 routes = routes_for(working_set);
  scenario_figures f;
  auto m = build_fares<Inner>(routes, f.startup_ms);
  const block_record table = largest_block;
  std::optional<hugepage::upkeep_thread> keeper;
  if (with_upkeep) {
    keeper.emplace(std::chrono::milliseconds(100),
                   hugepage::collapse_budget::of_time(std::chrono::milliseconds(50)));
  }
  const hugepage::upkeep_statistics upkeep_before = hugepage::upkeep_stats();
  const fork_plan plan = plan_for(working_set);
  const auto total = plan.lead + plan.cycles * (plan.child + plan.gap);
  reset_peak_rss();
  f.vm_before = read_vmstat_counts();
  fork_record forks;
  {
    sampler s(std::chrono::milliseconds(50), [table] { return table_coverage(table); });
    std::thread forker([&] { fork_cycles(table, plan, s.start(), forks); });
    u64 sum = 0;
    f.loop = run_open_loop(snapshot_rate, total, [&](u64 i) {
      sum += fare_request(*m, routes, i, snapshot_update_every);
    });
    benchmark::DoNotOptimize(sum);
    forker.join();
    s.stop();
    f.samples = s.samples();
  }
  f.vm_after = read_vmstat_counts();
  if (!forks.error.empty()) {
    state.SkipWithError(forks.error.c_str());
    return;
  }
  f.live_bytes = m->capacity() * fare_slot_bytes;
  f.huge_pct = table_coverage(table);
  report_scenario(state, f);
  double lowest = 100;
  std::string series;
  for (const sample& x : f.samples) {
    lowest = std::min(lowest, x.coverage_pct);
    series += fmt::format(" {:.0f}:{:.0f}", x.at_ms, x.coverage_pct);
  }
  const recovery r = recovery_of(f.samples, forks);
  state.counters["fork_cycles"] = static_cast<double>(forks.exit_ms.size());
  state.counters["min_coverage_pct"] = lowest;
  state.counters["start_coverage_pct"] = f.samples.empty() ? -1 : f.samples.front().coverage_pct;
  state.counters["recovery_ms_max"] = r.worst_ms;
  state.counters["unrecovered_cycles"] = r.unrecovered;
  if (with_upkeep) {  // what the upkeep thread's calls did (process-wide figures, upkeep.hpp)
    const hugepage::upkeep_statistics u = hugepage::upkeep_stats();
    state.counters["upkeep_calls"] = static_cast<double>(u.calls - upkeep_before.calls);
    state.counters["upkeep_restored_mib"] =
        static_cast<double>(u.restored_bytes - upkeep_before.restored_bytes) / mib;
    state.counters["upkeep_refused_chunks"] =
        static_cast<double>(u.refused_chunks - upkeep_before.refused_chunks);
    state.counters["upkeep_backed_off_calls"] =
        static_cast<double>(u.backed_off - upkeep_before.backed_off);
  }
  // The series for the log (ms:percent), as a reader of the console output wants it.
  fmt::print(stderr, "Scenario_ForkSnapshot ({}): table coverage over time (ms:%):{}\n",
             working_set, series);
}

void fork_snapshot(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  if (const std::string why = shortage(alloc_kind::std_alloc, working_set * 2); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) {
    try {
      if (k == alloc_kind::std_alloc) {
        run_snapshots<std_bytes>(state, working_set, false);
        state.SetLabel("malloc");
      } else if (k == alloc_kind::collapse) {
        run_snapshots<snapshot_collapse_bytes>(state, working_set, true);
        state.SetLabel("labelled collapse_allocator + upkeep_thread (100 ms, 50 ms budget)");
      } else {
        run_snapshots<thp_bytes>(state, working_set, false);
        state.SetLabel("thp_allocator, no upkeep (khugepaged only)");
      }
    } catch (const std::exception& e) {
      state.SkipWithError(fmt::format("fork snapshot failed: {}", e.what()).c_str());
      return;
    }
  }
}

const bool fork_snapshot_declared = declare(
    suite_info("Scenario_ForkSnapshot", 203, per_allocator(&fork_snapshot))
        .in_family("scenarios")
        .describe("a fare table at 100k requests/s (5% updates) while a child forked now and then "
                  "reads it; coverage every 50 ms, lowest coverage, time from each child's exit "
                  "to >= 99% huge; collapse = ours with upkeep_thread, thp = ours without")
        .per_op_unit("ms/run")
        .slow()
        .only_for({alloc_kind::std_alloc, alloc_kind::thp, alloc_kind::collapse})
        .with_sizes({gib}, {64 * mib})
        .scenario()
        .own_process()
        .decays_on_purpose()
        .peers(peer_role::every_full_run)
        .target(target_info("ours (upkeep_thread) back to >= 99% huge within 1 s of each child's "
                            "exit")
                    .value("recovery_ms_max", "collapse")
                    .at_most(1000))
        // A child after which the table was not back counts the time it was observed, which can
        // be below 1 s when the loop ends early: this target keeps such a run from passing.
        .target(target_info("ours (upkeep_thread): the table back to >= 99% huge after every child")
                    .value("unrecovered_cycles", "collapse")
                    .at_most(0)));

}  // namespace
}  // namespace hugepage_bench
