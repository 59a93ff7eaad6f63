// bench/scenario_engine.hpp - what the scenario suites (scenario_*.cpp) share: an open-loop
// request loop with every request timed, a sampler of RSS and coverage over time, /proc/vmstat
// deltas, the process's huge share from smaps_rollup, and the counters every scenario row reports.
//
// A scenario row is one configuration running a service's request loop once (one long iteration,
// real time). Requests are paced open-loop: request i is due at start + i / rate, and its latency
// runs from when it was due to when it returned, so a request that waited behind a slow one (a
// THP fault that ran direct compaction, a copy-on-write storm after fork) counts the wait.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "latency.hpp"
#include "own_compactions.hpp"

namespace hugepage_bench {

// ---- the kernel's counters ----------------------------------------------------------------------

/// The /proc/vmstat counters a scenario reports as deltas over its request loop (vm_<name>).
/// They are machine-wide: another process compacting at the same time counts too.
inline constexpr std::array<const char*, 8> vmstat_names = {
    "compact_stall",      "compact_fail",  "compact_success",    "thp_fault_alloc",
    "thp_fault_fallback", "thp_split_pmd", "thp_collapse_alloc", "thp_deferred_split_page"};

using vmstat_counts = std::array<std::optional<u64>, vmstat_names.size()>;

/// The counters of vmstat_names in /proc/vmstat (hugepage::read_vmstat()); a counter the kernel
/// lacks, or all of them when the file is unreadable, stays empty.
inline vmstat_counts read_vmstat_counts() {
  vmstat_counts out{};
  const std::optional<hugepage::kernel_values> all = hugepage::read_vmstat();
  if (!all) return out;
  for (std::size_t i = 0; i < vmstat_names.size(); ++i) {
    if (const auto it = all->find(vmstat_names[i]); it != all->end()) out[i] = it->second;
  }
  return out;
}

/// Huge share of the process's resident memory: (AnonHugePages + hugetlb) / (Rss + hugetlb) from
/// /proc/self/smaps_rollup, in percent; -1 when unreadable.
inline double process_huge_pct() {
  const std::optional<hugepage::smaps_totals> rollup = hugepage::read_smaps_rollup();
  if (!rollup) return -1;
  const auto resident = static_cast<double>(rollup->resident());
  return resident > 0 ? 100.0 * static_cast<double>(rollup->huge()) / resident : 0.0;
}

// ---- the request loop ---------------------------------------------------------------------------

/// What the loop's thread went through over a window (getrusage(RUSAGE_THREAD) deltas): its CPU
/// time, page faults, and context switches, voluntary (it waited: a lock, a fault's I/O) and
/// involuntary (another task took its CPU).
struct thread_usage {
  std::int64_t cpu_ns = 0;
  long faults = 0, waits = 0, preemptions = 0;
};

inline thread_usage read_thread_usage() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  thread_usage t;
  t.cpu_ns = (static_cast<std::int64_t>(u.ru_utime.tv_sec) + u.ru_stime.tv_sec) * 1'000'000'000 +
             (static_cast<std::int64_t>(u.ru_utime.tv_usec) + u.ru_stime.tv_usec) * 1'000;
  t.faults = u.ru_minflt + u.ru_majflt;
  t.waits = u.ru_nvcsw;
  t.preemptions = u.ru_nivcsw;
  return t;
}

inline thread_usage& operator+=(thread_usage& a, const thread_usage& b) {
  a.cpu_ns += b.cpu_ns;
  a.faults += b.faults;
  a.waits += b.waits;
  a.preemptions += b.preemptions;
  return a;
}

inline thread_usage operator-(thread_usage a, const thread_usage& b) {
  a.cpu_ns -= b.cpu_ns;
  a.faults -= b.faults;
  a.waits -= b.waits;
  a.preemptions -= b.preemptions;
  return a;
}

/// A request that took at least stall_ns: when it was due (ns after the loop's start), how long it
/// took from then, and what the loop's thread went through in the window that ends with it (since
/// the last stall or the last of the loop's periodic readings, at most ~1,000 requests before).
struct stall {
  std::int64_t due_ns = 0, ns = 0;
  std::int64_t window_ns = 0;
  thread_usage usage;
};
inline constexpr std::int64_t stall_ns = 1'000'000;
inline constexpr std::size_t max_stalls = 100'000;  // a bound on the memory a bad row takes

/// What one open-loop request loop measured.
struct loop_result {
  latency_histogram latency;  ///< ns from due to done, timer cost subtracted
  /// The requests of run_open_loop's first phase (e.g. before a fork), apart; `latency` holds the
  /// others then.
  latency_histogram first;
  /// With run_open_loop's `flag` (the fork scenario: set while a child lives), the requests of
  /// `latency` again, in three phases:
  /// - `flag_set`: the flag was set when the request started or when it ended;
  /// - `catch_up`: after the flag cleared, the requests the loop was still behind on since one of
  ///   `flag_set` (queued behind that phase, and delayed by anything else that ran meanwhile);
  /// - `flag_clear`: the others, from the first request after the flag cleared that started on
  ///   time.
  /// Empty without a flag.
  latency_histogram flag_set, catch_up, flag_clear;
  /// Every request of at least stall_ns (the first max_stalls), one by one, to tell afterwards
  /// what ran when the loop stalled (stall_episodes()).
  std::vector<stall> stalls;
  latency_clock::time_point start;  ///< when request 0 was due
  std::int64_t max_ns = 0;
  u64 requests = 0;
  double seconds = 0;      ///< wall time of the loop
  double timer_ns = 0;     ///< cost of a pair of clock readings, subtracted from each sample
  double late_end_ms = 0;  ///< how far behind its schedule the last request started
};

/// Runs `op(i)` for i in [0, rate * duration), request i due at start + i / rate (open loop: a
/// request due while an earlier one runs waits, and its wait is part of its latency). The clock
/// is spun on between requests, so the CPU stays busy as a service polling its queue does.
/// The first phase, whose requests go to `first` instead of `latency`, is the first `first_phase`
/// requests, and ends earlier at the first request that sees `flag` set: the event the flag marks
/// starts the second phase however its thread's clock and the loop's request count line up. The
/// others, where `flag` is given, also go to `flag_set`, `catch_up` or `flag_clear`.
template <class Op>
loop_result run_open_loop(double rate_per_s, std::chrono::milliseconds duration, Op&& op,
                          u64 first_phase = 0, const std::atomic<bool>* flag = nullptr) {
  loop_result r;
  r.timer_ns = timer_cost_ns();
  const auto timer = static_cast<std::int64_t>(r.timer_ns);
  const double period_ns = 1e9 / rate_per_s;
  const auto n = static_cast<u64>(rate_per_s * std::chrono::duration<double>(duration).count());
  const auto flag_is_set = [flag] {
    return flag != nullptr && flag->load(std::memory_order_relaxed);
  };
  bool in_first = first_phase != 0;
  bool behind_set_phase = false;  // the loop has not been on time since a request of flag_set
  const auto start = latency_clock::now();
  r.start = start;
  auto now = start;
  thread_usage usage = read_thread_usage();
  auto usage_at = start;
  for (u64 i = 0; i < n; ++i) {
    const auto due = start + std::chrono::nanoseconds(
                                 static_cast<std::int64_t>(static_cast<double>(i) * period_ns));
    const bool on_time = now <= due;  // nothing earlier delays this request
    while (now < due) now = latency_clock::now();
    const bool set_at_start = flag_is_set();
    op(i);
    now = latency_clock::now();
    const bool set = set_at_start || flag_is_set();
    const std::int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - due).count() - timer;
    if (in_first && (i >= first_phase || set)) in_first = false;
    if (in_first) {
      r.first.add(ns);
    } else {
      r.latency.add(ns);
      if (flag != nullptr) {
        if (set) {
          behind_set_phase = true;
          r.flag_set.add(ns);
        } else if (behind_set_phase && !on_time) {
          r.catch_up.add(ns);
        } else {
          behind_set_phase = false;
          r.flag_clear.add(ns);
        }
      }
    }
    if (ns >= stall_ns && r.stalls.size() < max_stalls) {
      const thread_usage u = read_thread_usage();
      r.stalls.push_back({(due - start).count(), ns, (now - usage_at).count(), u - usage});
      usage = u;
      usage_at = now;
    } else if (i % 1024 == 0) {  // about every 10 ms at 100k/s: a window for the next stall
      usage = read_thread_usage();
      usage_at = latency_clock::now();
    }
    r.max_ns = std::max(r.max_ns, ns);
    if (i + 1 == n) r.late_end_ms = static_cast<double>(ns) / 1e6;
  }
  r.requests = n;
  r.seconds = std::chrono::duration<double>(latency_clock::now() - start).count();
  return r;
}

// ---- sampling over time -------------------------------------------------------------------------

/// One sample: when (ms since the sampler started), the process's RSS (hugetlb included), the
/// coverage of the scenario's main container (-1 when it has none), and how long reading them
/// took (the sampler is a thread of the process it measures: its reads can stall the loop).
struct sample {
  double at_ms = 0, rss_mib = 0, coverage_pct = -1, took_ms = 0;
};

/// A thread that samples every `every` until stopped (or destroyed). `coverage` (may be empty)
/// returns the main container's huge share in percent.
class sampler {
 public:
  sampler(std::chrono::milliseconds every, std::function<double()> coverage)
      : every_(every), coverage_(std::move(coverage)), start_(std::chrono::steady_clock::now()) {
    thread_ = std::thread([this] { loop(); });
  }
  sampler(const sampler&) = delete;
  sampler& operator=(const sampler&) = delete;
  ~sampler() { stop(); }

  void stop() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  /// The samples so far (a copy: the thread may still be adding).
  std::vector<sample> samples() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return samples_;
  }
  std::chrono::steady_clock::time_point start() const { return start_; }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      sample s;
      s.at_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                    .count();
      s.rss_mib = read_rss().rss_mib;
      if (coverage_) s.coverage_pct = coverage_();
      s.took_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
              .count() -
          s.at_ms;
      lock.lock();
      samples_.push_back(s);
      wake_.wait_for(lock, every_, [this] { return stopping_; });
    }
  }

  std::chrono::milliseconds every_;
  std::function<double()> coverage_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<sample> samples_;
  std::thread thread_;
};

// ---- what ran when the loop stalled -------------------------------------------------------------

/// An interval of the run in ms since the sampler's start (a child's life, a sample's reads).
struct span {
  double from_ms = 0, to_ms = 0;
};

/// The loop's stalls as episodes. A stalled request due after every earlier stalled one had ended
/// begins an episode: what stalled the loop ran between its due time and its end. The stalled
/// requests due before that end queued behind it and belong to it. Each episode is laid beside
/// what ran then: a sampler read (coverage from pagemap, RSS) and a `busy` span (a child's life).
struct stall_episode {
  double from_ms = 0, first_ms = 0, longest_ms = 0;  ///< its start; its first request; its worst
  std::size_t requests = 0;
  bool during_sample = false, during_busy = false;
  double window_ms = 0;  ///< the loop thread's windows of its requests (stall::window_ns), summed
  thread_usage usage;    ///< what the loop's thread went through in them
};

inline bool overlaps(double from, double to, const span& s) {
  return from <= s.to_ms && s.from_ms <= to;
}

/// The episodes of `loop`, on the clock of a sampler that started at `origin`.
inline std::vector<stall_episode> stall_episodes(const loop_result& loop,
                                                 latency_clock::time_point origin,
                                                 const std::vector<sample>& samples,
                                                 const std::vector<span>& busy) {
  const double shift = std::chrono::duration<double, std::milli>(loop.start - origin).count();
  std::vector<span> reads;
  for (const sample& s : samples) reads.push_back({s.at_ms, s.at_ms + s.took_ms});
  std::vector<stall_episode> out;
  double episode_end = -1;
  for (const stall& x : loop.stalls) {
    const double due = shift + static_cast<double>(x.due_ns) / 1e6;
    const double ms = static_cast<double>(x.ns) / 1e6;
    if (out.empty() || due > episode_end) {
      stall_episode e;
      e.from_ms = due;
      e.first_ms = ms;
      const auto hit = [&](const span& s) { return overlaps(due, due + ms, s); };
      e.during_sample = std::any_of(reads.begin(), reads.end(), hit);
      e.during_busy = std::any_of(busy.begin(), busy.end(), hit);
      out.push_back(e);
    }
    stall_episode& e = out.back();
    ++e.requests;
    e.window_ms += static_cast<double>(x.window_ns) / 1e6;
    e.usage += x.usage;
    e.longest_ms = std::max(e.longest_ms, ms);
    episode_end = std::max(episode_end, due + ms);
  }
  return out;
}

/// One line for the log: how many episodes of the loop's stalls, how many began while a sampler
/// read or a busy span (a child's life) ran, and the longest of those that began during neither,
/// with when; and, apart for episodes while no child lived and while one did, what the loop's
/// thread went through in their windows (CPU share, preemptions, waits, page faults).
/// `HUGEPAGE_BENCH_STALL_LOG=path` appends every episode to that file as well, tab-separated: row,
/// start ms, first request ms, longest ms, requests, sample, busy, window ms, CPU ms, preemptions,
/// waits, page faults.
inline std::string describe_stalls(const std::string& row, const std::vector<stall_episode>& all,
                                   const std::vector<sample>& samples) {
  std::size_t sampled = 0, busy = 0, neither = 0;
  std::vector<const stall_episode*> rest;
  for (const stall_episode& e : all) {
    if (e.during_sample) ++sampled;
    if (e.during_busy) ++busy;
    if (!e.during_sample && !e.during_busy) {
      ++neither;
      rest.push_back(&e);
    }
  }
  std::sort(rest.begin(), rest.end(), [](const stall_episode* a, const stall_episode* b) {
    return a->longest_ms > b->longest_ms;
  });
  double read_max = 0, read_sum = 0;
  for (const sample& s : samples) {
    read_max = std::max(read_max, s.took_ms);
    read_sum += s.took_ms;
  }
  std::string text = fmt::format(
      "{}: {} stall episode(s) of >= {} ms; {} began during a sampler read (its {} reads took "
      "{:.2f} ms on average, {:.2f} at most), {} while a child lived, {} during neither",
      row, all.size(), stall_ns / 1'000'000, sampled, samples.size(),
      samples.empty() ? 0.0 : read_sum / static_cast<double>(samples.size()), read_max, busy,
      neither);
  if (!rest.empty()) text += "; the longest of those (ms at ms):";
  for (std::size_t i = 0; i < rest.size() && i < 8; ++i) {
    text += fmt::format(" {:.1f}@{:.0f}", rest[i]->longest_ms, rest[i]->from_ms);
  }
  // Where the loop's thread was: on its CPU (the work itself was slow), preempted (another task
  // ran there), waiting (a lock, a fault's I/O); and its page faults (copy-on-write after fork).
  const auto usage_of = [&](const char* what, bool busy_ones) {
    thread_usage u;
    double window = 0;
    for (const stall_episode& e : all) {
      if (e.during_busy != busy_ones) continue;
      u += e.usage;
      window += e.window_ms;
    }
    if (window <= 0) return;
    text += fmt::format(
        "; {}: the loop's thread on CPU {:.0f}% of its {:.0f} ms of windows, {} preemption(s), "
        "{} wait(s), {} page fault(s)",
        what, 100 * static_cast<double>(u.cpu_ns) / 1e6 / window, window, u.preemptions, u.waits,
        u.faults);
  };
  usage_of("while no child lived", false);
  usage_of("while a child lived", true);
  if (const char* path = std::getenv("HUGEPAGE_BENCH_STALL_LOG"); path != nullptr && *path) {
    if (FILE* f = std::fopen(path, "a")) {
      for (const stall_episode& e : all) {
        fmt::print(f, "{}\t{:.3f}\t{:.3f}\t{:.3f}\t{}\t{}\t{}\t{:.3f}\t{:.3f}\t{}\t{}\t{}\n", row,
                   e.from_ms, e.first_ms, e.longest_ms, e.requests,
                   e.during_sample ? "sample" : "-", e.during_busy ? "busy" : "-", e.window_ms,
                   static_cast<double>(e.usage.cpu_ns) / 1e6, e.usage.preemptions, e.usage.waits,
                   e.usage.faults);
      }
      std::fclose(f);
    }
  }
  return text;
}

// ---- what every scenario row reports ------------------------------------------------------------

/// The figures of one scenario row, reported as counters by report_scenario().
struct scenario_figures {
  loop_result loop;
  double startup_ms = 0;        ///< building and faulting in the containers
  std::size_t live_bytes = 0;   ///< what the containers hold (their elements and arrays)
  double huge_pct = -1;         ///< the main container's memory on huge pages (backing_of)
  std::vector<sample> samples;  ///< during the request loop
  /// When the sampler started (its samples' and `busy`'s clock); unset: no stall line is logged.
  std::optional<std::chrono::steady_clock::time_point> sampled_from;
  std::vector<span> busy;  ///< spans where a stall is expected (a child's life)
  vmstat_counts vm_before{}, vm_after{};
  /// This process's own entries into direct compaction over the loop (own_compactions.hpp);
  /// empty where the tracepoint cannot be counted.
  std::optional<u64> direct_compactions;
  std::shared_ptr<own_tracepoint_count> compactions;  ///< open between the two calls below
};

/// Before a row's loop, on the thread that runs it (before it starts any other): the vmstat
/// counters, and this process's direct compactions from here on.
inline void begin_kernel_counts(scenario_figures& f) {
  f.vm_before = read_vmstat_counts();
  f.compactions = std::make_shared<own_tracepoint_count>(direct_compaction_event);
  f.compactions->start();
}

/// After the loop: the vmstat counters again, and the direct compactions counted.
inline void end_kernel_counts(scenario_figures& f) {
  f.vm_after = read_vmstat_counts();
  if (f.compactions) f.direct_compactions = f.compactions->stop();
  f.compactions.reset();
}

inline double median_rss(const std::vector<sample>& samples) {
  std::vector<double> v;
  for (const sample& s : samples) v.push_back(s.rss_mib);
  if (v.empty()) return read_rss().rss_mib;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

/// Counters: lat_p50_ns, lat_p99_ns, lat_p999_ns, lat_max_ns, timer_ns, requests, requests_per_s,
/// late_end_ms, startup_ms, live_mib, peak_rss_mib, steady_rss_mib (median of the samples during
/// the loop), rss_over_live, huge_pct (when known), process_huge_pct, vm_<name> deltas (those the
/// kernel has), own_direct_compactions (where counted); with `sampled_from`, a line on stderr of
/// the loop's stalls (describe_stalls()).
inline void report_scenario(benchmark::State& state, const scenario_figures& f) {
  const loop_result& l = f.loop;
  state.counters["lat_p50_ns"] = l.latency.quantile(0.50);
  state.counters["lat_p99_ns"] = l.latency.quantile(0.99);
  state.counters["lat_p999_ns"] = l.latency.quantile(0.999);
  state.counters["lat_max_ns"] = static_cast<double>(l.max_ns);
  state.counters["timer_ns"] = l.timer_ns;
  state.counters["requests"] = static_cast<double>(l.requests);
  state.counters["requests_per_s"] =
      l.seconds > 0 ? static_cast<double>(l.requests) / l.seconds : 0;
  state.counters["late_end_ms"] = l.late_end_ms;
  state.counters["startup_ms"] = f.startup_ms;
  const double live_mib = static_cast<double>(f.live_bytes) / mib;
  const double steady = median_rss(f.samples);
  state.counters["live_mib"] = live_mib;
  state.counters["peak_rss_mib"] = read_rss().peak_rss_mib;
  state.counters["steady_rss_mib"] = steady;
  if (live_mib > 0) state.counters["rss_over_live"] = steady / live_mib;
  if (f.huge_pct >= 0) state.counters["huge_pct"] = f.huge_pct;
  const double process = process_huge_pct();
  if (process >= 0) state.counters["process_huge_pct"] = process;
  for (std::size_t i = 0; i < vmstat_names.size(); ++i) {
    if (f.vm_before[i] && f.vm_after[i]) {
      state.counters[std::string("vm_") + vmstat_names[i]] =
          static_cast<double>(*f.vm_after[i] - *f.vm_before[i]);
    }
  }
  if (f.direct_compactions) {
    state.counters["own_direct_compactions"] = static_cast<double>(*f.direct_compactions);
  }
  if (f.sampled_from) {  // the stalls one by one, for the log
    fmt::print(stderr, "{}\n",
               describe_stalls(current_row, stall_episodes(l, *f.sampled_from, f.samples, f.busy),
                               f.samples));
  }
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ---- what a child or helper process did ---------------------------------------------------------

/// How a process ended, from waitpid()'s status: "exited with status 0", "killed by SIGBUS".
inline std::string wait_status_text(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return abbrev != nullptr ? fmt::format("killed by SIG{}", abbrev)
                             : fmt::format("killed by signal {}", sig);
  }
  return fmt::format("ended with wait status {:#x}", status);
}

/// The signal a scenario's child raises once it has done its work, before it reports:
/// HUGEPAGE_BENCH_CHILD_SIGNAL=KILL or BUS (or a number), so that a test can see a killed child
/// fail its row. 0 (none) when unset. Read in the parent, before fork.
inline int injected_child_signal() {
  const char* text = std::getenv("HUGEPAGE_BENCH_CHILD_SIGNAL");
  if (text == nullptr || *text == 0) return 0;
  if (std::strcmp(text, "KILL") == 0) return SIGKILL;
  if (std::strcmp(text, "BUS") == 0) return SIGBUS;
  const int n = std::atoi(text);
  return n > 0 && n < NSIG ? n : 0;
}

/// In a child: raises `sig` (no core file: the child holds the parent's GiBs).
inline void raise_in_child(int sig) {
  if (sig == 0) return;
  const rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

/// Marks the row failed: the runner shows "FAILED: why" in its place and keeps no figure of it.
/// For a row whose child or helper did not do its work, never for what the machine lacks (a
/// skip says that).
inline void fail_row(benchmark::State& state, const std::string& why) {
  std::string one_line = "FAILED: " + why;
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  state.SkipWithError(one_line.c_str());
}

// ---- ours: the allocator the docs recommend per container ---------------------------------------

/// The 2 MiB pool with fallback to THP (counted): a pool that turns out short mid-build degrades.
using pool_2m_bytes = hugepage::huge_page_allocator<byte, hugepage::page_size::huge_2m,
                                                    hugepage::pool_policy::fallback>;

/// Whether the 2 MiB pool has free pages for `bytes` (the recommendation: a big hash map on the
/// pool when it has room, else on collapse_allocator).
inline bool pool_2m_has_room(std::size_t bytes) {
  const auto pool = hugepage::read_pool(hugepage::page_size::huge_2m);
  const u64 pages = (bytes + 2 * mib - 1) / (2 * mib);
  return pool && pool->available().value_or(0) >= pages;
}

/// Calls fn(std::allocator<byte>) for a std row and, for ours, fn(Inner) with the recommended
/// inner byte allocator for `pool_bytes` of pooled memory; `which` says which was chosen.
template <class Fn>
void with_inner(alloc_kind k, std::size_t pool_bytes, std::string& which, Fn&& fn) {
  if (k == alloc_kind::std_alloc) {
    which = "malloc";
    fn(std_bytes{});
  } else if (pool_2m_has_room(pool_bytes)) {
    which = "2 MiB pool (huge_page_allocator)";
    fn(pool_2m_bytes{});
  } else {
    which = "collapse_allocator (2 MiB pool short)";
    fn(collapse_bytes{});
  }
}

}  // namespace hugepage_bench
