// Tests of bench/fragmenter.hpp without root: the /proc/buddyinfo parser on text captured on the
// 2-core VM, its errors, and a fragmenter whose floor stops it before it touches anything.
#include "fragmenter.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "support.hpp"

namespace hugepage_bench {
namespace {

// /proc/buddyinfo on the 2-core Linux 6.18 VM (24 GiB), before a fragmentation.
constexpr const char* captured =
    "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1"
    "      3 \n"
    "Node 0, zone    DMA32   2918    263    241    237    248    245    211    187    168    142"
    "    581 \n"
    "Node 0, zone   Normal  70786   6649  35692  29640  18116  11348   7472   4757   2882   1338"
    "    713 \n";

TEST(BenchFragmenter, ParsesCapturedBuddyinfo) {
  const std::vector<buddy_zone> zones = parse_buddyinfo(captured);
  ASSERT_EQ(zones.size(), 3U);
  EXPECT_EQ(zones[0].node_zone, "0/DMA");
  EXPECT_EQ(zones[1].node_zone, "0/DMA32");
  EXPECT_EQ(zones[2].node_zone, "0/Normal");
  const std::array<std::uint64_t, 11> normal{70786, 6649, 35692, 29640, 18116, 11348,
                                             7472,  4757, 2882,  1338,  713};
  EXPECT_EQ(zones[2].free_blocks, normal);
  EXPECT_EQ(zones[0].free_blocks[10], 3U);
  EXPECT_EQ(free_blocks_at_least(zones, 9), 1 + 3 + 142 + 581 + 1338 + 713U);
  EXPECT_EQ(free_blocks_at_least(zones, 10), 3 + 581 + 713U);
  EXPECT_EQ(free_blocks_at_least(zones, 0), free_blocks_at_least(zones, -1));
}

TEST(BenchFragmenter, UserZonesLeaveOutDmaOnly) {
  const std::vector<buddy_zone> zones = user_zones(parse_buddyinfo(captured));
  ASSERT_EQ(zones.size(), 2U);
  EXPECT_EQ(zones[0].node_zone, "0/DMA32");
  EXPECT_EQ(zones[1].node_zone, "0/Normal");
  EXPECT_EQ(free_blocks_at_least(zones, 9), 142 + 581 + 1338 + 713U);
}

TEST(BenchFragmenter, FewerOrdersAndTwoNodes) {
  const auto zones = parse_buddyinfo("Node 0, zone Normal 1 2 3\n\nNode 1, zone Normal 4\n");
  ASSERT_EQ(zones.size(), 2U);
  EXPECT_EQ(zones[1].node_zone, "1/Normal");
  EXPECT_EQ(zones[0].free_blocks[2], 3U);
  EXPECT_EQ(zones[0].free_blocks[3], 0U);
  EXPECT_EQ(zones[1].free_blocks[0], 4U);
}

void expect_error(const std::string& text, const std::string& message) {
  try {
    parse_buddyinfo(text);
    ADD_FAILURE() << "no error for: " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(BenchFragmenter, BadTextIsAClearError) {
  expect_error("", "buddyinfo: no zone");
  expect_error("\n  \n", "buddyinfo: no zone");
  expect_error("Node 0, zone Normal 1 x 3\n",
               "buddyinfo line 1: bad count 'x': 'Node 0, zone Normal 1 x 3'");
  expect_error("Node 0, zone Normal 1\nNode 0 zone DMA 1\n",
               "buddyinfo line 2: not 'Node N, zone NAME' and counts: 'Node 0 zone DMA 1'");
  expect_error("Node 0, zone Normal\n",
               "buddyinfo line 1: not 'Node N, zone NAME' and counts: 'Node 0, zone Normal'");
  expect_error("Node 0, zone Normal 1 2 3 4 5 6 7 8 9 10 11 12\n",
               "buddyinfo line 1: more than 11 orders: 'Node 0, zone Normal 1 2 3 4 5 6 7 8 9 "
               "10 11 12'");
  expect_error("Node 0, zone Normal -1\n",
               "buddyinfo line 1: bad count '-1': 'Node 0, zone Normal -1'");
}

TEST(BenchFragmenter, ReadsThisMachine) {
  const std::vector<buddy_zone> zones = read_buddyinfo();
  ASSERT_FALSE(zones.empty());
  EXPECT_GT(mem_available_bytes(), 0U);
}

// A floor above what is available: the child touches nothing, reports, and holds nothing; it
// lives until the fragmenter is destroyed, and is reaped then.
TEST(BenchFragmenter, FloorAboveMemAvailableStopsAtOnce) {
  pid_t child = -1;
  {
    fragmenter::options o;
    o.keep_available_bytes = mem_available_bytes() + (std::size_t{64} << 30);
    o.deadline = std::chrono::seconds(20);
    o.pause_proactive_compaction = false;
    const fragmenter f(o);
    EXPECT_EQ(f.stopped_by(), "keep_available_bytes");
    EXPECT_EQ(f.held_bytes(), 0U);
    EXPECT_EQ(f.freed_bytes(), 0U);
    EXPECT_EQ(f.taken_bytes(), 0U);
    EXPECT_FALSE(f.before().empty());
    EXPECT_EQ(f.after().size(), f.before().size());
    child = f.child();
    ASSERT_GT(child, 0);
    EXPECT_EQ(::kill(child, 0), 0) << "the child must hold until destruction";
    EXPECT_NE(f.summary().find("stopped: keep_available_bytes"), std::string::npos) << f.summary();
  }
  EXPECT_EQ(::kill(child, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// The scenarios' hook: a fragmenter that did not complete is no fragmented machine; why says so,
// and its child is gone when the call returns.
TEST(BenchFragmenter, FragmentedMachineIsNullWhenIncomplete) {
  if (free_blocks_at_least(user_zones(read_buddyinfo()), 9) == 0) {
    HUGEPAGE_SKIP_OR_FAIL(
        "no free 2 MiB block here: a fragmenter that does nothing would complete");
  }
  fragmenter::options o;
  o.keep_available_bytes = mem_available_bytes() + (std::size_t{64} << 30);
  o.pause_proactive_compaction = false;
  std::string why;
  bool failed = true;
  EXPECT_EQ(fragmented_machine(o, why, failed), nullptr);
  EXPECT_FALSE(failed) << "the machine was not fragmented; the fragmenter did not fail";
  EXPECT_EQ(why.rfind("not fragmented: fragmenter: child ", 0), 0U) << why;
  EXPECT_NE(why.find("stopped: keep_available_bytes"), std::string::npos) << why;
}

}  // namespace
}  // namespace hugepage_bench
