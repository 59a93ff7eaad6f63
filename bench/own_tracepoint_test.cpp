// Tests of bench/own_compactions.hpp: a tracepoint counted for this process and what it starts
// afterwards, never for another process. The scenarios' own_direct_compactions column is such a
// count (of compaction/mm_compaction_try_to_compact_pages); direct compaction cannot be caused on
// demand, so the counting is tested on the fork tracepoint, which fires in the forking task.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "own_compactions.hpp"
#include "support.hpp"

namespace hugepage_bench {
namespace {

constexpr const char* fork_event = "sched/sched_process_fork";

// Forks a child that forks `grandchildren` children of its own, and reaps them all.
void fork_family(int grandchildren) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < grandchildren; ++i) {
      const pid_t g = ::fork();
      if (g == 0) ::_exit(0);
      if (g > 0) ::waitpid(g, nullptr, 0);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(BenchOwnTracepoint, CountsThisProcessItsThreadsAndChildrenStartedAfterwards) {
  if (!tracepoint_id(fork_event)) {
    HUGEPAGE_SKIP_OR_FAIL("no tracefs event ids readable here (tracefs not mounted, or not root)");
  }
  own_tracepoint_count forks(fork_event);
  ASSERT_TRUE(forks.start()) << "perf_event_open of a tracepoint refused: " << std::strerror(errno);
  fork_family(2);  // 1 here, 2 in the child
  // The thread's creation is a clone, which the event counts too, and 1 in the thread.
  std::thread after([] { fork_family(0); });
  after.join();
  const std::optional<std::uint64_t> n = forks.stop();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 5U);
}

// What started before start() is outside the count: a thread, and a child process, each told to
// fork only after it. (Another process's stalls would raise vmstat's compact_stall; never this.)
TEST(BenchOwnTracepoint, WhatStartedBeforeIsNotCounted) {
  if (!tracepoint_id(fork_event)) {
    HUGEPAGE_SKIP_OR_FAIL("no tracefs event ids readable here (tracefs not mounted, or not root)");
  }
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t early = ::fork();
  ASSERT_GE(early, 0);
  if (early == 0) {
    char c = 0;
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    const pid_t g = ::fork();
    if (g == 0) ::_exit(0);
    ::_exit(g > 0 && ::waitpid(g, nullptr, 0) == g ? 0 : 2);
  }
  std::atomic<bool> release{false};
  std::thread before([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    fork_family(0);
  });
  own_tracepoint_count forks(fork_event);
  ASSERT_TRUE(forks.start());
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  release.store(true);
  before.join();
  int status = 0;
  ASSERT_EQ(::waitpid(early, &status, 0), early);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(go[0]);
  ::close(go[1]);
  const std::optional<std::uint64_t> n = forks.stop();
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 0U);
}

TEST(BenchOwnTracepoint, DirectCompactionHasItsTracepoint) {
  if (!tracepoint_id(fork_event)) {
    HUGEPAGE_SKIP_OR_FAIL("no tracefs event ids readable here (tracefs not mounted, or not root)");
  }
  // Where tracefs is readable, the scenarios' event exists (CONFIG_COMPACTION) and opens.
  own_tracepoint_count c(direct_compaction_event);
  ASSERT_TRUE(c.start());
  EXPECT_TRUE(c.stop().has_value());
}

TEST(BenchOwnTracepoint, AnEventThatDoesNotExistCountsNothing) {
  own_tracepoint_count c("compaction/no_such_event");
  EXPECT_FALSE(c.start());
  EXPECT_FALSE(c.stop().has_value());
}

}  // namespace
}  // namespace hugepage_bench
