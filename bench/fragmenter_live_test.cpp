// The fragmenter (fragmenter.hpp) on this machine, bounded: as root (the child gives back pages
// by frame number, which /proc/self/pagemap shows to root only), with a 2 GiB budget, so that it
// takes seconds (10 s on the 2-core VM). It must lower the count of free blocks of 2 MiB and more,
// hold within its budget, and give everything back when destroyed. ctest label needs_root.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>

#include "fragmenter.hpp"
#include "hugepage/page_size.hpp"
#include "support.hpp"

namespace hugepage_bench {
namespace {

using hugepage::units::mib;

std::string read_proactiveness() {
  std::ifstream in("/proc/sys/vm/compaction_proactiveness");
  std::string value;
  in >> value;
  return value;
}

TEST(BenchFragmenterLive, BoundedRunSplitsLargeBlocksAndGivesAllBack) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs root (page frame numbers in pagemap)");
  const std::size_t budget = 2048 * mib;
  if (mem_available_bytes() < 4 * budget) HUGEPAGE_SKIP_OR_FAIL("needs 4 GiB MemAvailable");
  const auto user_big = [](const std::vector<buddy_zone>& z) {
    return free_blocks_at_least(user_zones(z), 9);
  };
  if (user_big(read_buddyinfo()) < 64) {
    HUGEPAGE_SKIP_OR_FAIL("fewer than 64 free blocks of 2 MiB: already fragmented");
  }
  const std::string proactiveness = read_proactiveness();
  pid_t child = -1;
  std::size_t available_holding = 0, held = 0;
  {
    fragmenter::options o;
    o.keep_available_bytes = 2 * budget;
    o.max_hold_bytes = budget;
    o.deadline = std::chrono::seconds(60);
    const fragmenter f(o);
    child = f.child();
    SCOPED_TRACE(f.summary());
    EXPECT_LE(f.held_bytes(), budget);
    EXPECT_GT(f.freed_bytes(), 0U);
    // Whatever the budget left, the large blocks fell: the child took some of them whole at
    // least (the first phase splits the smaller free blocks first).
    EXPECT_LT(user_big(f.after()), user_big(f.before()));
    EXPECT_TRUE(f.complete() || f.stopped_by() == "max_hold_bytes") << f.stopped_by();
    EXPECT_EQ(::kill(child, 0), 0);
    // kcompactd would rebuild 2 MiB blocks behind the child: proactive compaction is off.
    EXPECT_EQ(read_proactiveness(), "0");
    EXPECT_EQ(std::to_string(f.paused_proactiveness()), proactiveness);
    held = f.held_bytes();
    available_holding = mem_available_bytes();
  }
  EXPECT_EQ(::kill(child, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_EQ(read_proactiveness(), proactiveness);
  // Its memory is back: MemAvailable rose by at least half of what it held (the margin covers the
  // other tenants of a shared machine; the counters may take a moment to settle).
  std::size_t available_after = 0;
  for (int i = 0; i < 50 && available_after < available_holding + held / 2; ++i) {
    if (i > 0) ::usleep(100 * 1000);
    available_after = mem_available_bytes();
  }
  EXPECT_GE(available_after, available_holding + held / 2) << "held " << held;
}

}  // namespace
}  // namespace hugepage_bench
