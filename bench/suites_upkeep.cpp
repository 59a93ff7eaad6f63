// bench/suites_upkeep.cpp - upkeep() as a benchmark: random lookups in a labelled THP table while
// it is fresh, after a fork() has split its huge pages, after upkeep() has restored them, and
// after the same decay left to khugepaged alone.
//
// The four stages are four suites whose rows (one per working set, THP only) run in order in one
// process; they share one table, which each stage brings to its state once per working set, the
// first time one of its rows runs. Repetitions and google-benchmark's own calls of a row measure
// the same state; a stage asked for after a later one (random interleaving, a filter that skips
// rows) rebuilds the table and replays the stages before it, so every stage starts from the same
// history. Coverage is the label's, read from the kernel (coverage_of) after each run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
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

namespace hugepage_bench {
namespace {

struct upkeep_options : hugepage::default_options {
  static constexpr const char* label = "bench_upkeep";
};
using table_type = std::vector<u64, hugepage::thp_allocator<u64, upkeep_options>>;

enum class stage { fresh, decayed, after_upkeep, khugepaged_only };

/// Each upkeep() call's budget, as the service in docs/upkeep.md would give it.
constexpr std::chrono::milliseconds upkeep_call_budget{50};
/// Calls made at most before the stage gives up waiting for coverage to stop improving.
constexpr int upkeep_most_calls = 1000;

struct decay_state {
  table_type table;
  stage at = stage::fresh;
  std::string error;               // why the stages cannot go on ("" while they can)
  std::vector<double> upkeep_ms;   // each call's elapsed time, in call order
  std::size_t restored_bytes = 0;  // by all the calls
  std::size_t refused_chunks = 0;  // refused by the kernel in all the calls
  std::size_t backed_off = 0;      // calls that collapsed nothing: an earlier refusal's back-off
  double khugepaged_wait_s = 0;    // how long the khugepaged_only stage waited
  explicit decay_state(std::size_t words) : table(words) {}
};

// Why the table cannot be on THP in this process, or "" when it can.
std::string thp_unavailable() {
  const std::optional<hugepage::thp_mode> mode = hugepage::read_thp_mode();
  if (mode && *mode == hugepage::thp_mode::never) {
    return "THP is off (transparent_hugepage/enabled = never): the table cannot be huge";
  }
  if (hugepage::thp_disabled_for_process()) {
    return "THP is disabled for this process (prctl PR_SET_THP_DISABLE): the table cannot be huge";
  }
  return {};
}

// Splits the huge pages of `bytes` at `p` as a service does by accident: fork() a child that only
// waits on a pipe, write one byte per 2 MiB in the parent while it lives (copy-on-write copies
// 4 KiB and splits the parent's huge page), then let it exit. Returns "" or what failed.
std::string fork_and_write(unsigned char* p, std::size_t bytes) {
  int ready[2];
  int release[2];
  if (::pipe(ready) != 0) return fmt::format("pipe: {}", std::strerror(errno));
  if (::pipe(release) != 0) {
    ::close(ready[0]);
    ::close(ready[1]);
    return fmt::format("pipe: {}", std::strerror(errno));
  }
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    for (const int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
    return fmt::format("fork: {}", std::strerror(errno));
  }
  if (child == 0) {
    ::close(release[1]);  // the read below ends once the parent closes its end
    char c = 0;
    (void)!::write(ready[1], &c, 1);
    (void)!::read(release[0], &c, 1);
    ::_exit(0);
  }
  ::close(release[0]);
  ::close(ready[1]);
  char c = 0;
  const bool child_ready = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  if (child_ready) {
    for (std::size_t i = 0; i < bytes; i += hugepage::bytes_of(hugepage::page_size::huge_2m)) {
      p[i] = static_cast<unsigned char>(p[i] + 1);
    }
  }
  ::close(release[1]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return child_ready ? std::string() : std::string("the forked child did not start");
}

double label_coverage_pct() {
  return 100.0 * hugepage::coverage_of(upkeep_options::label).huge_fraction();
}

// One khugepaged period: it sleeps scan_sleep_millisecs between passes of pages_to_scan pages.
// At most 10 s, so that the stage stays short on a machine with a longer period.
std::chrono::milliseconds khugepaged_period() {
  const auto ms = hugepage::read_thp_settings().scan_sleep_millisecs;
  const std::chrono::milliseconds most{10000};
  return ms ? std::min(std::chrono::milliseconds(static_cast<long>(*ms)), most) : most;
}

void advance(decay_state& s, stage next) {
  auto* bytes = reinterpret_cast<unsigned char*>(s.table.data());
  const std::size_t size = s.table.size() * sizeof(u64);
  if (next == stage::decayed) {
    s.error = fork_and_write(bytes, size);
  } else if (next == stage::after_upkeep) {
    double before = label_coverage_pct();
    for (int i = 0; i < upkeep_most_calls; ++i) {
      const hugepage::upkeep_result r =
          hugepage::upkeep(hugepage::collapse_budget::of_time(upkeep_call_budget));
      if (r.thp_disabled) {
        s.error = "upkeep: THP is disabled for this process";
        return;
      }
      if (r.scan_error) {
        s.error = fmt::format("upkeep cannot find decayed pages (PAGEMAP_SCAN, Linux 6.7): {}",
                              r.scan_error.message());
        return;
      }
      s.upkeep_ms.push_back(std::chrono::duration<double, std::milli>(r.elapsed).count());
      s.restored_bytes += r.restored;
      s.refused_chunks += r.refused;
      s.backed_off += r.backed_off ? 1 : 0;
      const double now = label_coverage_pct();
      if (now <= before) break;  // this call improved nothing: the last one counted
      before = now;
    }
  } else if (next == stage::khugepaged_only) {
    // The table is huge again (upkeep): the same decay, then only the kernel's own thread.
    s.error = fork_and_write(bytes, size);
    if (!s.error.empty()) return;
    const std::chrono::milliseconds wait = khugepaged_period();
    std::this_thread::sleep_for(wait);
    s.khugepaged_wait_s = std::chrono::duration<double>(wait).count();
  }
  s.at = next;
}

// The table of `working_set` bytes brought to stage `want`, or nullptr after SkipWithError.
decay_state* table_at(benchmark::State& state, std::size_t working_set, stage want) {
  if (const std::string why = thp_unavailable(); !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  const std::string key = fmt::format("upkeep/{}", working_set);
  auto* s = cache.key == key ? static_cast<decay_state*>(cache.object.get()) : nullptr;
  if (s == nullptr || s->at > want) {
    drop_cache();
    if (const std::string why = shortage(alloc_kind::thp, working_set); !why.empty()) {
      state.SkipWithError(why.c_str());
      return nullptr;
    }
    try {
      auto built = std::make_shared<decay_state>(working_set / sizeof(u64));
      for (std::size_t i = 0; i < built->table.size(); ++i) built->table[i] = key_of(i);
      cache.key = key;
      cache.block = built->table.data();
      cache.block_bytes = built->table.size() * sizeof(u64);
      cache.elements = built->table.size();
      cache.object = std::move(built);
    } catch (const std::exception& e) {
      drop_cache();
      state.SkipWithError(fmt::format("building the table failed: {}", e.what()).c_str());
      return nullptr;
    }
    s = static_cast<decay_state*>(cache.object.get());
  }
  while (s->error.empty() && s->at < want)
    advance(*s, static_cast<stage>(static_cast<int>(s->at) + 1));
  if (!s->error.empty()) {
    state.SkipWithError(s->error.c_str());
    return nullptr;
  }
  return s;
}

// Nearest-rank percentile of `v` (p in 0..100).
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

// The row of stage Want (thp only: the allocator is not a choice here).
template <stage Want>
void lookups(benchmark::State& state, alloc_kind /*k*/, std::size_t working_set) {
  decay_state* s = table_at(state, working_set, Want);
  if (s == nullptr) return;
  const u64* data = s->table.data();
  const u64 n = s->table.size();
  // Dependent lookups: each index derives from the value the previous one loaded, so every
  // lookup waits for its page walk (a latency, as a service's lookup on its request path).
  u64 counter = 0, value = 0;
  perf_window perf;
  perf.start();
  for (auto _ : state) value = data[index_of(counter++ ^ value, n)];
  perf.stop();
  benchmark::DoNotOptimize(value);
  perf.report(state);
  report_memory(state, label_coverage_pct(), n * sizeof(u64));
  if (Want == stage::after_upkeep) {
    double total = 0;
    for (const double ms : s->upkeep_ms) total += ms;
    state.counters["upkeep_calls"] = static_cast<double>(s->upkeep_ms.size());
    state.counters["upkeep_p50_ms"] = percentile(s->upkeep_ms, 50);
    state.counters["upkeep_p99_ms"] = percentile(s->upkeep_ms, 99);
    state.counters["upkeep_total_ms"] = total;
    state.counters["restored_mib"] = static_cast<double>(s->restored_bytes) / mib;
    state.counters["refused_chunks"] = static_cast<double>(s->refused_chunks);
    state.counters["backed_off_calls"] = static_cast<double>(s->backed_off);
  }
  if (Want == stage::khugepaged_only) state.counters["khugepaged_wait_s"] = s->khugepaged_wait_s;
}

// ---- declarations -------------------------------------------------------------------------------

// Not in --quick: the khugepaged_only stage waits one khugepaged period (10 s by default) per
// working set. A full run measures them in its first round, at 256 MiB and 1 GiB.
suite_info upkeep_suite(const char* name, int order, bench_fns fns, const char* what,
                        bool decayed = false) {
  suite_info s(name, order, fns);
  if (decayed) s.decays_on_purpose();
  s.in_family("upkeep")
      .describe(what)
      .per_op_unit("ns/lookup")
      .only_for({alloc_kind::thp})
      .with_sizes({256 * mib, gib}, {64 * mib})
      .first_round_only();
  return s;
}

const bool fresh_declared = declare(upkeep_suite(
    "Upkeep_Fresh", 90, per_allocator(&lookups<stage::fresh>),
    "dependent random lookups in a labelled THP vector<u64> as built (stage 1 of 4); one "
    "iteration = one lookup"));
const bool decayed_declared = declare(upkeep_suite(
    "Upkeep_Decayed", 91, per_allocator(&lookups<stage::decayed>),
    "the same after fork() + one write per 2 MiB in the parent while the child lives (stage 2)",
    true));
const bool after_upkeep_declared = declare(
    upkeep_suite("Upkeep_AfterUpkeep", 92, per_allocator(&lookups<stage::after_upkeep>),
                 "the same after upkeep() calls of 50 ms until coverage stops improving (stage 3; "
                 "upkeep_p50_ms, upkeep_p99_ms, upkeep_total_ms)"));
const bool khugepaged_declared = declare(upkeep_suite(
    "Upkeep_KhugepagedOnly", 93, per_allocator(&lookups<stage::khugepaged_only>),
    "the same decay again, then one khugepaged period (scan_sleep_millisecs, at most 10 s) "
    "without upkeep (stage 4)",
    true));

}  // namespace
}  // namespace hugepage_bench
