// bench/registry.hpp - the one list of hugepage_bench's suites.
//
// Each suite is declared once, in the suites_<family>.cpp file of its container family, as a
// namespace-scope `const bool` initialised by declare():
//
//   const bool chase_declared = declare(
//       suite_info("Vector_Chase", 21, per_allocator<vector_loads<loads::dependent>>())
//           .in_family("vectors")
//           .describe("dependent loads over a random cyclic permutation of its cache lines")
//           .per_op_unit("ns/step")
//           .quick().core().peers(peer_role::every_full_run).chart());
//
// main.cpp registers google-benchmark rows from this list, `hugepage_bench --list --json` prints
// it, and bench/runner reads that JSON for everything it needs to know about a suite (which
// allocators and sizes, which rounds, which table): nothing else names a suite.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace hugepage_bench {

/// One google-benchmark row body: (state, allocator, working set in bytes).
using bench_fn = void (*)(benchmark::State&, alloc_kind, std::size_t);

constexpr std::size_t kind_count = std::size(all_kinds);

/// The suite's function for every allocator, indexed by alloc_kind.
using bench_fns = std::array<bench_fn, kind_count>;

/// A suite's row body for every byte allocator, indexed by alloc_kind. A suite is written once,
/// as a struct whose member template is its row body over one inner byte allocator:
///
///   struct flat_hash_map_build {
///     template <class Inner>
///     static void run(benchmark::State& state, alloc_kind k, std::size_t working_set);
///   };
///
/// and suites that differ in one choice as one struct template over it
/// (`vector_loads<loads::dependent>`, `node_lookup<std_map, timing::one_by_one>`). The node
/// backends (pmr_pool, arena_mt) have no byte allocator: their entries stay empty, and the node
/// suites fill them (suites_nodes.cpp).
template <class Suite>
bench_fns per_allocator() {
  return {&Suite::template run<std_bytes>,
          &Suite::template run<thp_bytes>,
          &Suite::template run<hugetlb_2m_bytes>,
          &Suite::template run<hugetlb_1g_bytes>,
          &Suite::template run<collapse_bytes>,
          &Suite::template run<thp_prefault_bytes>,
          nullptr,
          nullptr};
}

/// The same, for a suite that is one function for every byte allocator: it picks what to build
/// from the alloc_kind it is given (the scenarios' with_inner) or needs no choice.
inline bench_fns per_allocator(bench_fn row) {
  bench_fns fns{};
  for (const alloc_kind k : all_kinds) {
    if (k != alloc_kind::pmr_pool && k != alloc_kind::arena_mt) {
      fns[static_cast<std::size_t>(k)] = row;
    }
  }
  return fns;
}

/// Default working sets of a full run (functions, not variables: suites are declared during static
/// initialisation, in any order across files).
inline std::vector<std::size_t> full_sizes() {
  return {4 * mib, 16 * mib, 64 * mib, 256 * mib, gib};
}
/// Default working sets of --quick.
inline std::vector<std::size_t> quick_sizes() { return {4 * mib, 64 * mib, 256 * mib}; }

/// Which peer configurations (other mallocs, std rows) run a suite.
enum class peer_role {
  none,            ///< our allocators only
  every_full_run,  ///< the peers run it in a full run, in the rounds that run every suite
  core,            ///< the peers run it in every round, --quick included
};

/// Which table the runner gives a suite.
enum class table_kind {
  time,      ///< time per iteration against glibc std (the default)
  bloat,     ///< resident against live bytes (live_kib, resident_mib, bloat_x counters)
  tail,      ///< percentile columns (lat_p50_ns, ...) beside the table of tail_of()
  scenario,  ///< a service's request loop per configuration (scenario_engine.hpp): latency,
             ///< RSS, coverage and kernel counters, one run per row; run only when named
             ///< (--suites, or the runner's --scenarios), never in a default run
};

/// A claim about a suite's results that the runner judges (met, missed, not measured, or not
/// judged below `from_bytes`), declared beside the suite it is about. `of` and `over` name rows
/// by allocator token ("std" is glibc, "jemalloc"/"mimalloc" the peers), or "ours" (our best
/// row: the highest paired speedup over glibc) and "best_peer" (the peer that ours does worst
/// against; a peer left out makes a pass "not measured").
///   counter "" and over set: the ns of `of` over the ns of `over`, paired per round (median)
///   counter set and over set: the median of that counter of `of` over that of `over`
///   counter set, over "":     the counter of `of` itself, against bound + slack_bytes / live
///                             bytes (container_mib)
///   counter set, over_suite(): that counter of `of` over the same row's in that suite
///                             (the same working set), medians over the rounds
struct target_info {
  std::string claim;    ///< in words, as the report prints it
  bool paired = false;  ///< judged on the paired comparison (--paired), else on the rounds
  std::string of, over, counter;
  std::string other_suite;  ///< the suite of an over_suite() ratio, else ""
  bool at_least = true;     ///< value >= bound, else value <= bound
  double bound = 1.0;
  std::size_t slack_bytes = 0;
  std::size_t from_bytes = 0;

  explicit target_info(std::string words) : claim(std::move(words)) {}
  /// The ns (or `counter`) of row `num` over that of row `den`.
  target_info& ratio(std::string num, std::string den) {
    of = std::move(num);
    over = std::move(den);
    return *this;
  }
  /// Counter `name` of row `row` itself.
  target_info& value(std::string name, std::string row) {
    counter = std::move(name);
    of = std::move(row);
    return *this;
  }
  target_info& of_counter(std::string name) { return counter = std::move(name), *this; }
  /// The counter of row `of` over the same row's counter in `suite` (e.g. a run against its
  /// undisturbed twin).
  target_info& over_suite(std::string suite) { return other_suite = std::move(suite), *this; }
  target_info& at_least_(double b) { return at_least = true, bound = b, *this; }
  target_info& at_most(double b) { return at_least = false, bound = b, *this; }
  target_info& plus_per_live(std::size_t bytes) { return slack_bytes = bytes, *this; }
  target_info& from(std::size_t bytes) { return from_bytes = bytes, *this; }
  target_info& in_paired() { return paired = true, *this; }
};

/// One contender of a paired row (--paired, paired.cpp): the suite's container built with one
/// allocator, behind a type-erased face.
struct contender {
  std::function<double(u64 round)> batch;  ///< one batch of the suite's operation: ns per op
  std::vector<std::pair<std::string, double>> facts;  ///< from the build: build_ns, ...
  std::shared_ptr<void> owner;
};

/// How a suite takes part in --paired: a name ("std", "thp", ..., "jemalloc"), its role
/// ("baseline", "ours", "peer") and how to build it at a working set (throws when it cannot).
struct paired_entry {
  std::string name;
  std::string role;
  std::function<contender(std::size_t)> make;
};

/// What contenders built for one group of paired rows share (the Lookup and Churn rows of one
/// container and working set: the lookups run first): `group` names it, a new group drops the
/// old one, and main drops the last before the peers' libraries' state goes away at exit.
struct paired_cache {
  std::string group;
  std::map<std::string, std::shared_ptr<void>> built;
};
inline paired_cache paired_built;

/// Everything known about one suite: what it is (the three fields), then one part per question a
/// reader may have (how its rows run, when a run includes it, how the runner tabulates it, what
/// its results claim). Built with the chained setters, then declare()d.
struct suite_info {
  std::string name;         ///< rows are BM_<name>/<allocator>/<bytes>
  std::string family;       ///< container family (the suites_<family>.cpp file)
  std::string description;  ///< one line: what one iteration is

  /// How its rows run: the body per allocator, the working sets, the timer, the process.
  struct how_to_run {
    bench_fns functions{};
    std::vector<alloc_kind> allocators = {alloc_kind::std_alloc, alloc_kind::thp,
                                          alloc_kind::hugetlb_2m, alloc_kind::hugetlb_1g,
                                          alloc_kind::collapse};
    std::vector<std::size_t> sizes = full_sizes();
    std::vector<std::size_t> sizes_quick = quick_sizes();
    bool milliseconds = false;    ///< google-benchmark's time unit ms (with real time), else ns
    bool one_iteration = false;   ///< one iteration per row (a scenario: a whole service run)
    bool fresh_blocks = false;    ///< needs every std block to be a fresh mapping (fixes glibc's
                                  ///< mmap threshold)
    bool in_own_process = false;  ///< the runner runs it in a process of its own (it measures
                                  ///< what the process holds, which earlier suites would skew)
    std::vector<paired_entry> contenders;  ///< who runs under --paired; empty: no paired mode

    bool applies(alloc_kind k) const {
      return std::find(allocators.begin(), allocators.end(), k) != allocators.end();
    }
    bench_fn function(alloc_kind k) const { return functions[static_cast<std::size_t>(k)]; }
  };

  /// When a run includes it: its place in the order, which runs and rounds, which peers.
  struct when_to_run {
    int order = 0;          ///< position in the default run and the tables (ascending)
    bool in_quick = false;  ///< part of the binary's --quick default
    bool in_core = false;   ///< the runner runs it in every round (else the heavy rounds)
    bool in_first_round_only = false;  ///< a full run measures it in round 1 only (slow to repeat)
    bool only_when_named = false;      ///< never in a default run: only --suites (or the runner's
                                       ///< --scenarios) runs it
    peer_role peers_run = peer_role::none;
  };

  /// How the runner tabulates its results: which table, in what unit, beside which suite.
  struct how_to_tabulate {
    table_kind kind = table_kind::time;
    std::string per_op = "ns/op";  ///< the time column's unit
    std::string tail_of_suite;  ///< table_kind::tail: the suite whose table shows the percentiles
    bool on_chart = false;      ///< a panel of the runner's chart
  };

  /// What its results claim: the targets the runner judges, and what is low on purpose.
  struct what_it_claims {
    std::vector<target_info> targets;
    bool low_coverage_by_design = false;  ///< its rows lose huge pages on purpose (the decay
                                          ///< stages): the runner flags no low coverage as
                                          ///< misconfigured
  };

  how_to_run run;
  when_to_run schedule;
  how_to_tabulate table;
  what_it_claims claims;

  suite_info(std::string suite_name, int position, bench_fns fns) : name(std::move(suite_name)) {
    schedule.order = position;
    run.functions = fns;
  }

  // What it is.
  suite_info& in_family(std::string f) { return family = std::move(f), *this; }
  suite_info& describe(std::string d) { return description = std::move(d), *this; }

  // How its rows run.
  /// Timed in milliseconds of real time: one iteration builds, faults in or maps memory.
  suite_info& slow() { return run.milliseconds = true, *this; }
  suite_info& only_for(std::vector<alloc_kind> kinds) {
    return run.allocators = std::move(kinds), *this;
  }
  suite_info& with_sizes(std::vector<std::size_t> full, std::vector<std::size_t> quick_run) {
    run.sizes = std::move(full);
    run.sizes_quick = std::move(quick_run);
    return *this;
  }
  suite_info& needs_fresh_blocks() { return run.fresh_blocks = true, *this; }
  suite_info& own_process() { return run.in_own_process = true, *this; }
  /// Runs under --paired: every contender in one process, batches alternated round by round.
  suite_info& paired(std::vector<paired_entry> all) {
    return run.contenders = std::move(all), *this;
  }

  // When a run includes it.
  suite_info& quick() { return schedule.in_quick = true, *this; }
  suite_info& core() { return schedule.in_core = true, *this; }
  suite_info& first_round_only() { return schedule.in_first_round_only = true, *this; }
  suite_info& peers(peer_role r) { return schedule.peers_run = r, *this; }

  // How the runner tabulates it.
  suite_info& per_op_unit(std::string u) { return table.per_op = std::move(u), *this; }
  suite_info& bloat_table() { return table.kind = table_kind::bloat, *this; }
  /// Reports percentiles that the runner shows beside `suite`'s table and chart panel.
  suite_info& tail_of(std::string suite) {
    table.kind = table_kind::tail;
    table.tail_of_suite = std::move(suite);
    return *this;
  }
  suite_info& chart() { return table.on_chart = true, *this; }

  // What its results claim.
  suite_info& target(target_info t) { return claims.targets.push_back(std::move(t)), *this; }
  suite_info& decays_on_purpose() { return claims.low_coverage_by_design = true, *this; }

  /// A scenario, a service's request loop (table_kind::scenario): one iteration per row, run
  /// only when named. Declare it own_process() too: it reports what the process holds.
  suite_info& scenario() {
    run.one_iteration = true;
    schedule.only_when_named = true;
    table.kind = table_kind::scenario;
    return *this;
  }
};

/// Every declared suite, in declaration order (main.cpp sorts by order).
inline std::vector<suite_info>& registry() {
  static std::vector<suite_info> suites;
  return suites;
}

/// Adds `s` to the registry. Returns true, for the `const bool x = declare(...)` idiom that runs
/// it during static initialisation of the family's file.
inline bool declare(suite_info s) {
  for (const alloc_kind k : s.run.allocators) {
    if (s.run.function(k) == nullptr) {
      std::fprintf(stderr, "hugepage_bench: suite %s has no function for %s\n", s.name.c_str(),
                   token_of(k));
      std::abort();
    }
  }
  registry().push_back(std::move(s));
  return true;
}

}  // namespace hugepage_bench
