// bench/latency.hpp - single operations timed one by one, for the tail-latency suites.
//
// A mean hides the lookups that miss the TLB, walk the page tables and then miss the cache: they
// show up in the tail first. A tail suite times each operation with two clock readings around it,
// into a small batch buffer (so that recording a sample is outside the timed window), folds each
// batch into a histogram, and reports p50, p99 and p99.9. The cost of the clock readings
// themselves (measured once: the median of back-to-back readings) is subtracted from every sample
// and reported as timer_ns, so a reader can judge how much of a small sample is the timer.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hugepage_bench {

using latency_clock = std::chrono::steady_clock;

/// Nanoseconds between two readings of latency_clock with nothing between them: the median of
/// many pairs, measured once per process.
inline double timer_cost_ns() {
  static const double cost = [] {
    constexpr std::size_t pairs = 20001;
    std::vector<std::int64_t> d(pairs);
    for (std::size_t i = 0; i < pairs; ++i) {
      const auto t0 = latency_clock::now();
      const auto t1 = latency_clock::now();
      d[i] = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    }
    std::nth_element(d.begin(), d.begin() + pairs / 2, d.end());
    return static_cast<double>(d[pairs / 2]);
  }();
  return cost;
}

/// Latencies in ns: exact below 1024 ns, then 32 buckets per power of two (3% resolution).
class latency_histogram {
 public:
  void add(std::int64_t ns) noexcept {
    ++counts_[bucket_of(ns < 0 ? 0 : static_cast<std::uint64_t>(ns))];
    ++total_;
  }
  std::uint64_t count() const noexcept { return total_; }
  /// Adds the samples of `other` (e.g. another thread's).
  void merge(const latency_histogram& other) noexcept {
    for (std::size_t b = 0; b < buckets; ++b) counts_[b] += other.counts_[b];
    total_ += other.total_;
  }

  /// The smallest latency that at least fraction `q` of the samples do not exceed (the lower
  /// edge of its bucket); 0 without samples.
  double quantile(double q) const noexcept {
    if (total_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (std::size_t b = 0; b < buckets; ++b) {
      seen += counts_[b];
      if (seen >= rank) return static_cast<double>(lower_edge(b));
    }
    return static_cast<double>(lower_edge(buckets - 1));
  }

  static std::size_t bucket_of(std::uint64_t ns) noexcept {
    if (ns < exact) return static_cast<std::size_t>(ns);
    const int msb = 63 - __builtin_clzll(ns);  // >= 10
    const std::size_t b = exact + static_cast<std::size_t>(msb - exact_bits) * sub +
                          static_cast<std::size_t>((ns >> (msb - sub_bits)) & (sub - 1));
    return std::min(b, buckets - 1);
  }
  static std::uint64_t lower_edge(std::size_t b) noexcept {
    if (b < exact) return b;
    const std::size_t octave = (b - exact) / sub, at = (b - exact) % sub;
    const int msb = static_cast<int>(octave) + exact_bits;
    return (std::uint64_t{1} << msb) + (static_cast<std::uint64_t>(at) << (msb - sub_bits));
  }

 private:
  static constexpr int exact_bits = 10, sub_bits = 5;
  static constexpr std::size_t exact = std::size_t{1} << exact_bits,
                               sub = std::size_t{1} << sub_bits;
  static constexpr std::size_t buckets = exact + (40 - exact_bits) * sub;  // up to ~18 minutes
  std::array<std::uint64_t, buckets> counts_{};
  std::uint64_t total_ = 0;
};

/// Operations timed per google-benchmark iteration of a tail suite.
constexpr std::size_t latency_batch = 64;

/// Runs the tail suite's loop: each iteration times `latency_batch` calls of `op(i)` one by one
/// (i counts the operations), then reports lat_p50_ns, lat_p99_ns, lat_p999_ns (timer cost
/// subtracted), timer_ns and lat_samples as counters.
template <class Op>
void time_each(benchmark::State& state, Op&& op) {
  const double timer = timer_cost_ns();
  const auto timer_ns = static_cast<std::int64_t>(timer);
  latency_histogram hist;
  std::array<std::int64_t, latency_batch> batch{};
  std::uint64_t i = 0;
  for (auto _ : state) {
    for (std::int64_t& sample : batch) {
      const auto t0 = latency_clock::now();
      op(i++);
      const auto t1 = latency_clock::now();
      sample = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count() - timer_ns;
    }
    for (const std::int64_t sample : batch) hist.add(sample);
  }
  state.counters["lat_p50_ns"] = hist.quantile(0.50);
  state.counters["lat_p99_ns"] = hist.quantile(0.99);
  state.counters["lat_p999_ns"] = hist.quantile(0.999);
  state.counters["timer_ns"] = timer;
  state.counters["lat_samples"] = static_cast<double>(hist.count());
}

/// How a lookup suite times its lookups: their mean over the loop (google-benchmark's time per
/// iteration), or each one on its own (time_each: p50/p99/p99.9 counters).
enum class timing { mean, one_by_one };

/// The loop of a lookup suite and of its tail twin: `lookup(i)` for i = 0, 1, 2, ..., one call per
/// iteration (timing::mean), or time_each's batches (timing::one_by_one). `lookup` returns what it
/// found (0 for nothing); the sum of those is returned, for the suite's check that the lookups
/// found what they should.
template <timing Timing, class Lookup>
std::uint64_t sum_of_lookups(benchmark::State& state, Lookup&& lookup) {
  std::uint64_t found = 0;
  if constexpr (Timing == timing::one_by_one) {
    time_each(state, [&](std::uint64_t i) {
      found += lookup(i);
      benchmark::DoNotOptimize(found);  // the load of the value is part of the timed lookup
    });
  } else {
    std::uint64_t counter = 0;
    for (auto _ : state) found += lookup(counter++);
    benchmark::DoNotOptimize(found);
  }
  return found;
}

}  // namespace hugepage_bench
