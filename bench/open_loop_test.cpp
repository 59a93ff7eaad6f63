// Tests of bench/scenario_engine.hpp's open request loop: how its phases split the requests.
// The fork scenario's p999_child_alive / p999_catch_up / p999_no_child columns are these
// histograms.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

#include "scenario_engine.hpp"

namespace hugepage_bench {
namespace {

using namespace std::chrono_literals;

constexpr double rate = 10'000;  // a request due every 100 us
constexpr auto stall = 50ms;     // 500 requests due during a stall

// Request 1000 stalls while the flag is set, as a request beside a child does; request 1001 clears
// it: the child is gone, and the requests due meanwhile still wait. True for those two requests.
bool child_phase_stall(std::atomic<bool>& flag, u64 i) {
  if (i == 1000) {
    flag.store(true);
    std::this_thread::sleep_for(stall);
    return true;
  }
  if (i == 1001) {
    flag.store(false);
    return true;
  }
  return false;
}

// A stall while the flag is set delays the requests due during it: they end after the flag
// cleared, queued behind the stall, and are the catch-up, apart from both phases. A stall with the
// flag clear and the loop on time is the clear phase's. (A split by the flag alone counted the
// queued requests as clear: the fork scenario laid the child's backlog at upkeep's door.)
TEST(BenchScenarioLoop, TheBacklogAFlaggedStallLeavesIsTheCatchUp) {
  std::atomic<bool> flag{false};
  const loop_result r = run_open_loop(
      rate, 400ms,
      [&](u64 i) {
        if (!child_phase_stall(flag, i) && i == 2500) std::this_thread::sleep_for(stall);
      },
      /*first_phase=*/100, &flag);
  EXPECT_EQ(r.first.count(), 100U);
  EXPECT_EQ(r.latency.count(), 4000U - 100U);
  EXPECT_EQ(r.flag_set.count() + r.catch_up.count() + r.flag_clear.count(), r.latency.count());
  EXPECT_EQ(r.flag_set.count(), 2U);  // 1000, and 1001, which started with the flag set
  EXPECT_GE(r.flag_set.quantile(1.0), 45'000'000);
  // The ~500 due during the stall; a preempted catch-up adds a few more.
  EXPECT_GE(r.catch_up.count(), 450U);
  EXPECT_LE(r.catch_up.count(), 900U);  // the catch-up ends: 1,500 if it never did
  EXPECT_GE(r.catch_up.quantile(1.0), 45'000'000);
  // The second stall, and the backlog behind it, are the clear phase's.
  EXPECT_GE(r.flag_clear.quantile(1.0), 45'000'000);
  EXPECT_GE(r.flag_clear.count(), 3000U);
}

// Whatever else stalls the loop before it is on time again counts in the catch-up, not in the
// clear phase: the fork scenario cannot tell upkeep's work right after a child's exit from the
// child's backlog, and says so by keeping the catch-up apart.
TEST(BenchScenarioLoop, AStallDuringTheCatchUpIsTheCatchUps) {
  std::atomic<bool> flag{false};
  const loop_result r = run_open_loop(
      rate, 300ms,
      [&](u64 i) {
        // Request 1010 is still behind: due 5 ms before the first stall ended.
        if (!child_phase_stall(flag, i) && i == 1010) std::this_thread::sleep_for(30ms);
      },
      0, &flag);
  EXPECT_GE(r.catch_up.quantile(1.0), 75'000'000);  // queued behind both stalls
  // The ~500 due during the first stall and the ~300 during the second: not only those due
  // while the flag was set.
  EXPECT_GE(r.catch_up.count(), 750U);
  // The second stall is not the set phase's: its worst request waited for the first stall only,
  // the catch-up's for both (at least 30 ms more, however late a busy machine wakes a sleep).
  EXPECT_LE(r.flag_set.quantile(1.0) + 20'000'000, r.catch_up.quantile(1.0));
}

// A request that started while the flag was set is the set phase's, even when the flag cleared
// before it ended; and with it the first phase ends, before `first_phase` requests if need be.
TEST(BenchScenarioLoop, TheFlagAtARequestsStartCountsAndEndsTheFirstPhase) {
  std::atomic<bool> flag{false};
  const loop_result r = run_open_loop(
      rate, 200ms,
      [&](u64 i) {
        if (i == 499) {
          flag.store(true);
        } else if (i == 500) {
          std::this_thread::sleep_for(10ms);
          flag.store(false);  // as the forking thread reaps the child mid-request
          std::this_thread::sleep_for(30ms);
        }
      },
      /*first_phase=*/1000, &flag);
  EXPECT_EQ(r.first.count(), 499U);  // 0-498; 499 ended with the flag set
  EXPECT_EQ(r.flag_set.count(), 2U);
  EXPECT_GE(r.flag_set.quantile(1.0), 35'000'000);
}

TEST(BenchScenarioLoop, WithoutAFlagNothingIsSplit) {
  const loop_result r = run_open_loop(
      10'000, 50ms, [](u64) {}, 10);
  EXPECT_EQ(r.first.count(), 10U);
  EXPECT_EQ(r.latency.count(), 490U);
  EXPECT_EQ(r.flag_set.count(), 0U);
  EXPECT_EQ(r.catch_up.count(), 0U);
  EXPECT_EQ(r.flag_clear.count(), 0U);
}

// The episode the request due at `ms` belongs to, or null (on a busy machine a preemption just
// before it may have begun the episode).
const stall_episode* episode_at(const std::vector<stall_episode>& all, double ms) {
  for (const stall_episode& e : all) {
    if (e.from_ms < ms + 0.5 && ms < e.from_ms + e.longest_ms) return &e;
  }
  return nullptr;
}

// The stalls one by one: a stalled request due after the last one ended begins an episode, those
// queued behind it are its own, and each is laid beside the sampler reads and busy spans (a
// child's life) that ran then, on the sampler's clock (here 50 ms ahead of the loop's).
TEST(BenchScenarioLoop, StallsAreEpisodesLaidBesideWhatRanThen) {
  const loop_result r = run_open_loop(rate, 300ms, [](u64 i) {
    if (i == 1000 || i == 2000) std::this_thread::sleep_for(20ms);
    if (i == 2600) std::this_thread::sleep_for(30ms);
  });
  const auto origin = r.start - 50ms;
  const std::vector<sample> reads = {{150.5, 0, -1, 5.0}};  // a read from 150.5 to 155.5 ms
  const std::vector<span> lives = {{245, 280}};             // the 20 ms stall at 250 only
  const std::vector<stall_episode> all = stall_episodes(r, origin, reads, lives);
  const stall_episode* sampled = episode_at(all, 150);
  const stall_episode* busy = episode_at(all, 250);
  const stall_episode* neither = episode_at(all, 310);
  ASSERT_NE(sampled, nullptr);
  ASSERT_NE(busy, nullptr);
  ASSERT_NE(neither, nullptr);
  EXPECT_TRUE(sampled->during_sample);
  EXPECT_FALSE(sampled->during_busy);
  EXPECT_GE(sampled->longest_ms, 19.0);
  EXPECT_GE(sampled->requests, 150U);  // ~190 due during the 20 ms are queued behind it
  EXPECT_LE(sampled->requests, 400U);  // and the episode ends
  EXPECT_FALSE(busy->during_sample);
  EXPECT_TRUE(busy->during_busy);
  EXPECT_FALSE(neither->during_sample);
  EXPECT_FALSE(neither->during_busy);
  EXPECT_GE(neither->longest_ms, 29.0);
  EXPECT_GE(neither->requests, 250U);
  const std::string text = describe_stalls("row", all, reads);
  EXPECT_NE(text.find("row: "), std::string::npos) << text;
  EXPECT_NE(text.find("took 5.00 ms on average, 5.00 at most"), std::string::npos) << text;
  // The one during neither is among the longest listed (on a busy machine a preemption may be
  // longer); the sampled one is not among them.
  const std::string longest = fmt::format(" {:.1f}@{:.0f}", neither->longest_ms, neither->from_ms);
  EXPECT_NE(text.find(longest), std::string::npos) << text;
  EXPECT_EQ(text.find(fmt::format("@{:.0f}", sampled->from_ms)), std::string::npos) << text;
}

// What the loop's thread went through in a stall's window: a request that sleeps waited (a
// voluntary switch) and used little CPU; one that computes for 20 ms of its own CPU time used it.
TEST(BenchScenarioLoop, AStallSaysWhereTheLoopsThreadWas) {
  const loop_result r = run_open_loop(rate, 200ms, [](u64 i) {
    if (i == 500) std::this_thread::sleep_for(20ms);
    if (i == 1500) {
      timespec t0{}, t{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      do {
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      } while ((t.tv_sec - t0.tv_sec) * 1'000'000'000L + (t.tv_nsec - t0.tv_nsec) < 20'000'000L);
    }
  });
  const std::vector<stall_episode> all = stall_episodes(r, r.start, {}, {});
  const stall_episode* slept = episode_at(all, 50);
  const stall_episode* computed = episode_at(all, 150);
  ASSERT_NE(slept, nullptr);
  ASSERT_NE(computed, nullptr);
  EXPECT_GE(slept->usage.waits, 1);
  EXPECT_GE(slept->window_ms, 19.0);
  EXPECT_LT(static_cast<double>(slept->usage.cpu_ns) / 1e6, slept->window_ms - 15.0);
  EXPECT_GE(computed->usage.cpu_ns, 19'000'000);
  EXPECT_GE(computed->window_ms, 19.0);
  const std::string text = describe_stalls("row", all, {});
  EXPECT_NE(text.find("while no child lived: the loop's thread on CPU"), std::string::npos) << text;
  EXPECT_EQ(text.find("; while a child lived:"), std::string::npos) << text;
}

}  // namespace
}  // namespace hugepage_bench
