// Tests of bench/scenario_engine.hpp's open request loop: how its phases split the requests.
// The fork scenario's p999_child_alive / p999_no_child columns are these histograms.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "scenario_engine.hpp"

namespace hugepage_bench {
namespace {

using namespace std::chrono_literals;

// A stall while the flag is set delays the requests due during it: they end after the flag
// cleared, queued behind the stall, and count with the flag's phase. A stall with the flag clear
// counts in the clear phase. (Before, the queued requests counted as clear: the fork scenario laid
// the child's backlog at upkeep's door.)
TEST(BenchScenarioLoop, ABacklogLeftByTheFlagsPhaseCountsWithIt) {
  constexpr double rate = 10'000;  // a request due every 100 us
  constexpr auto stall = 50ms;     // 500 requests due during each stall
  std::atomic<bool> flag{false};
  const loop_result r = run_open_loop(
      rate, 400ms,
      [&](u64 i) {
        if (i == 1000) {  // ends while the flag is set, as a request beside a child does
          flag.store(true);
          std::this_thread::sleep_for(stall);
        } else if (i == 1001) {  // the child is gone; the requests due meanwhile still wait
          flag.store(false);
        } else if (i == 2500) {
          std::this_thread::sleep_for(stall);
        }
      },
      /*first_phase=*/100, &flag);
  EXPECT_EQ(r.flag_set.count() + r.flag_clear.count(), r.latency.count());
  EXPECT_EQ(r.latency.count(), 4000U - 100U);
  // The stalled request and the ~500 due behind it; a preempted catch-up adds a few more.
  EXPECT_GE(r.flag_set.count(), 450U);
  EXPECT_LE(r.flag_set.count(), 1400U);
  // The queued requests' waits are in the set phase: its slowest is the stall.
  EXPECT_GE(r.flag_set.quantile(1.0), 45'000'000);
  // The second stall, with the flag clear, is the clear phase's.
  EXPECT_GE(r.flag_clear.quantile(1.0), 45'000'000);
}

TEST(BenchScenarioLoop, WithoutAFlagNothingIsSplit) {
  const loop_result r = run_open_loop(
      10'000, 50ms, [](u64) {}, 10);
  EXPECT_EQ(r.first.count(), 10U);
  EXPECT_EQ(r.latency.count(), 490U);
  EXPECT_EQ(r.flag_set.count(), 0U);
  EXPECT_EQ(r.flag_clear.count(), 0U);
}

}  // namespace
}  // namespace hugepage_bench
