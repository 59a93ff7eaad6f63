// bench/paired.cpp - hugepage_bench --paired: a suite's rows side by side in one process.
//
// On a shared, noisy machine the load changes from second to second. For each suite that declares
// contenders (registry.hpp, paired()) and each working set, one row BM_<Suite>/paired/<bytes>
// builds the suite's container once per contender, then runs short batches of the suite's
// operation for each contender in turn, round after round, the order rotating with the round, so
// the contenders of one round ran within seconds of each other. The row reports each contender's
// ns per operation in every round (ns_<name>_r<round>), so the runner pairs them per round as it
// pairs the rounds of separate processes, and what each build cost (build_ns_<name>,
// container_mib_<name>, coverage_pct_<name>, ...). A contender that cannot be built (no 1 GiB
// page, a peer not installed) is left out, and the row's label says why.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <string>
#include <vector>

#include "modes.hpp"
#include "peers.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run_paired(benchmark::State& state, const suite_info& suite, std::size_t working_set,
                const paired_options& o) {
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::pair<const paired_entry*, contender>> all;
    std::string label;
    for (const paired_entry& e : suite.run.contenders) {
      try {
        all.emplace_back(&e, e.make(working_set));
      } catch (const std::exception& ex) {
        label += fmt::format("{}{}: {}", label.empty() ? "left out: " : "; ", e.name, ex.what());
      }
    }
    if (all.empty()) {
      state.SkipWithError(("no contender could be built; " + label).c_str());
      return;
    }
    const std::size_t m = all.size();
    std::vector<std::vector<double>> ns(m);
    const auto start = std::chrono::steady_clock::now();
    int rounds = 0;
    for (int round = 0; round < paired_max_rounds; ++round) {
      if (round >= o.rounds && seconds_since(start) >= o.round_seconds) break;
      ++rounds;
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t c = (i + static_cast<std::size_t>(round)) % m;
        ns[c].push_back(all[c].second.batch(static_cast<u64>(round)));
      }
    }
    state.counters["rounds"] = rounds;
    for (std::size_t c = 0; c < m; ++c) {
      const std::string& who = all[c].first->name;
      for (int r = 0; r < rounds; ++r) {
        state.counters[fmt::format("ns_{}_r{}", who, r + 1)] = ns[c][static_cast<std::size_t>(r)];
      }
      for (const auto& [name, value] : all[c].second.facts) {
        state.counters[name + "_" + who] = value;
      }
    }
    state.SetLabel(label);
    state.ResumeTiming();
  }
}

}  // namespace

std::vector<const suite_info*> pairable(const std::vector<const suite_info*>& suites) {
  std::vector<const suite_info*> out;
  for (const suite_info* s : suites) {
    if (!s->run.contenders.empty()) out.push_back(s);
  }
  return out;
}

void register_paired(const std::vector<const suite_info*>& suites,
                     const std::vector<std::size_t>& sizes, const paired_options& o) {
  // The peers are loaded now, before any contender takes 1 GiB pages: mimalloc reserves its own
  // at start-up (paired_arena_1g_pages stay free for the arena over 1 GiB pages).
  jemalloc_peer();
  mimalloc_peer();
  // Size-major, then suite: the Lookup and Churn rows of one container share its builds.
  for (const std::size_t size : sizes) {
    for (const suite_info* s : suites) {
      const std::string name = fmt::format("BM_{}/paired/{}", s->name, size);
      benchmark::RegisterBenchmark(
          name.c_str(), [s, size, o](benchmark::State& state) { run_paired(state, *s, size, o); })
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace hugepage_bench
