// Tests of bench/latency.hpp: the histogram's buckets and percentiles, and the timed loop's
// counters. The tail columns of the runner's tables are these numbers.
#include "latency.hpp"

#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace hugepage_bench {
namespace {

TEST(BenchLatency, BucketsAreExactBelowOneMicrosecond) {
  for (std::uint64_t ns : {0ULL, 1ULL, 57ULL, 1023ULL}) {
    EXPECT_EQ(latency_histogram::lower_edge(latency_histogram::bucket_of(ns)), ns);
  }
}

TEST(BenchLatency, BucketsAboveOneMicrosecondAreWithinThreePercent) {
  for (std::uint64_t ns = 1024; ns < (std::uint64_t{1} << 36); ns = ns * 3 / 2 + 7) {
    const std::uint64_t edge = latency_histogram::lower_edge(latency_histogram::bucket_of(ns));
    EXPECT_LE(edge, ns);
    EXPECT_GE(static_cast<double>(edge), static_cast<double>(ns) * (1 - 1.0 / 32)) << ns;
    // The next bucket starts above ns: buckets are contiguous and ordered.
    EXPECT_GT(latency_histogram::lower_edge(latency_histogram::bucket_of(ns) + 1), ns);
  }
}

TEST(BenchLatency, QuantilesOfAKnownDistribution) {
  latency_histogram h;
  EXPECT_EQ(h.quantile(0.5), 0);
  for (int i = 1; i <= 1000; ++i) h.add(i < 1000 ? 100 : 5000);  // one slow sample in 1000
  h.add(-3);  // a sample below the subtracted timer cost counts as 0
  EXPECT_EQ(h.count(), 1001U);
  EXPECT_EQ(h.quantile(0.50), 100);
  EXPECT_EQ(h.quantile(0.99), 100);
  EXPECT_EQ(h.quantile(1.0), 4992);  // 5000 in its bucket [4992, 5120)
  EXPECT_EQ(h.quantile(0.0), 0);
}

TEST(BenchLatency, NinetyNinthPercentileSeesTheSlowOnePercent) {
  latency_histogram h;
  for (int i = 0; i < 980; ++i) h.add(50);
  for (int i = 0; i < 20; ++i) h.add(700);
  EXPECT_EQ(h.quantile(0.50), 50);
  EXPECT_EQ(h.quantile(0.99), 700);
  EXPECT_EQ(h.quantile(0.999), 700);
}

TEST(BenchLatency, TimerCostIsMeasuredAndSmall) {
  const double cost = timer_cost_ns();
  EXPECT_GE(cost, 0);
  EXPECT_LT(cost, 10'000) << "a pair of steady_clock readings should take well under 10 us";
  EXPECT_EQ(timer_cost_ns(), cost) << "measured once per process";
}

}  // namespace
}  // namespace hugepage_bench
