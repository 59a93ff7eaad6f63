// NUMA placement on any machine (node 0 exists everywhere): each placement of each method is
// applied by the kernel before the first touch (the policy the kernel holds for the block), the
// pages are where the report says, on huge pages; a node that does not exist and an empty node
// set are clear errors that leave nothing mapped. Two-node behaviour: numa_nodes_test.cpp.
#include "hugepage/numa.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/label.hpp"
#include "hugepage/metrics.hpp"
#include "hugepage/shared_arena_allocator.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/strategy.hpp"
#include "numa_support.hpp"
#include "support.hpp"

namespace hugepage {
namespace {

using test::kHuge;
using test::kMiB;

constexpr std::size_t kBlock = 8 * kMiB;

struct placed_case {
  const char* name;
  numa_placement numa;
  int kernel_mode;  // what get_mempolicy answers for the block
};

const placed_case kPlacements[] = {
    {"local", numa_placement::local(), 0},
    {"bind", numa_placement::bind({0}), 2},
    {"preferred", numa_placement::preferred(0), 1},
    {"interleave", numa_placement::interleave({0}), 3},
};

bool hugetlb_pages_free(std::size_t bytes) {
  return test::pool_available(page_size::huge_2m) >= bytes / kHuge;
}

// Every resident byte of the block is on node 0, as many huge as the report says, and the
// per-node figures add up to the report's.
void expect_all_on_node_zero(const backing_report& r, bool huge) {
  ASSERT_EQ(r.nodes.size(), 1U) << r.nodes_note;
  EXPECT_EQ(r.nodes[0].node, 0);
  EXPECT_EQ(r.nodes[0].bytes, r.resident_bytes());
  EXPECT_EQ(r.nodes[0].huge_bytes, r.huge_bytes());
  EXPECT_EQ(r.bytes_on_node(0), r.resident_bytes());
  EXPECT_EQ(r.bytes_on_node(1), 0U);
  if (huge) {
    EXPECT_EQ(r.huge_bytes_on_node(0), r.bytes);
  }
  EXPECT_TRUE(r.nodes_note.empty()) << r.nodes_note;
}

TEST(NumaPlacement, EveryPlacementOfThpIsAppliedBeforeTheFirstTouch) {
  for (const placed_case& c : kPlacements) {
    SCOPED_TRACE(c.name);
    const strategy s = strategy::thp().placed(c.numa);
    void* p = s.allocate(kBlock, 1);
    const test::kernel_policy policy = test::policy_at(p);
    EXPECT_EQ(policy.mode, c.kernel_mode);
    if (c.kernel_mode != 0) {
      EXPECT_EQ(policy.nodes, 1U);
    }
    std::memset(p, 1, kBlock);
    expect_all_on_node_zero(backing_of(p, kBlock), /*huge=*/false);
    s.deallocate(p, kBlock, 1);
  }
}

TEST(NumaPlacement, EveryPlacementOfCollapseIsHugeOnNodeZero) {
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  for (const placed_case& c : kPlacements) {
    SCOPED_TRACE(c.name);
    const strategy s = strategy::collapse().placed(c.numa);
    void* p = s.allocate(kBlock, 1);
    EXPECT_EQ(test::policy_at(p).mode, c.kernel_mode);
    const backing_report r = backing_of(p, kBlock);
    EXPECT_EQ(r.thp, kBlock);
    expect_all_on_node_zero(r, /*huge=*/true);
    s.deallocate(p, kBlock, 1);
  }
}

TEST(NumaPlacement, EveryPlacementOfHugetlbIsHugeOnNodeZero) {
  if (!hugetlb_pages_free(kBlock)) HUGEPAGE_SKIP_OR_FAIL("the 2 MiB pool has no 4 free pages");
  const test::pool_counts before = test::read_counts(page_size::huge_2m);
  for (const placed_case& c : kPlacements) {
    SCOPED_TRACE(c.name);
    const strategy s = strategy::hugetlb().placed(c.numa);
    void* p = s.allocate(kBlock, 1);
    EXPECT_EQ(test::policy_at(p).mode, c.kernel_mode);
    const backing_report r = backing_of(p, kBlock);
    EXPECT_EQ(r.hugetlb_2m, kBlock);
    expect_all_on_node_zero(r, /*huge=*/true);
    s.deallocate(p, kBlock, 1);
  }
  EXPECT_TRUE(test::pool_back(page_size::huge_2m, before));
}

// The policy the kernel holds at every 2 MiB of [p, p + length) is `mode` on node 0.
::testing::AssertionResult placed_throughout(const char* p, std::size_t length, int mode) {
  for (std::size_t at = 0; at < length; at += kHuge) {
    const test::kernel_policy got = test::policy_at(p + at);
    if (got.mode != mode || got.nodes != 1) {
      return ::testing::AssertionFailure()
             << "at " << at / kMiB << " MiB of " << length / kMiB << " MiB: mode " << got.mode
             << " on nodes mask " << got.nodes << ", not mode " << mode << " on node 0";
    }
  }
  return ::testing::AssertionSuccess();
}

// The most pages of `size` the pool could give: reserved plus the overcommit room.
std::uint64_t most_pool_pages(page_size size) {
  const std::optional<hugetlb_pool> pool = read_pool(size);
  if (!pool) return 0;
  return pool->total.value_or(0) + pool->overcommit.value_or(0);
}

// A 1 GiB strategy maps a block in parts (strategy.hpp, the cascade): a part the pools cannot
// serve becomes THP-advised memory in place, and every part carries the placement from before its
// first touch. The head here is larger than either pool could ever hold, so it falls back to THP;
// the 64 MiB tail (Linux 6.12 and later: before, whole 1 GiB pages, one part) is 2 MiB pool pages
// where the pool has them, else THP too.
TEST(NumaPlacement, EveryPartOfACascadeBlockCarriesItsPlacement) {
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  const std::size_t head = std::max(most_pool_pages(page_size::huge_2m) * kHuge / test::kGiB + 1,
                                    most_pool_pages(page_size::huge_1g) + 1) *
                           test::kGiB;
  const std::size_t bytes = head + 64 * kMiB;
  const test::pool_counts before = test::read_counts(page_size::huge_2m);
  const std::size_t live = test::live_mappings();
  for (const placed_case& c : kPlacements) {
    if (c.numa.is_local()) continue;
    SCOPED_TRACE(c.name);
    const strategy s = strategy::hugetlb(page_size::huge_1g, fallback).placed(c.numa);
    const strategy::layout l = s.layout_of(bytes);
    ASSERT_EQ(l.head, strategy::fixed_mapping_keeps_range_on_failure() ? head : l.length);
    const std::uint64_t to_thp = stats().fallbacks_to_thp;
    char* p = static_cast<char*>(s.allocate(bytes, 1));
    EXPECT_EQ(stats().fallbacks_to_thp, to_thp + 1);
    EXPECT_TRUE(placed_throughout(p, l.length, c.kernel_mode));
    // The head is THP: huge once touched, on node 0.
    std::memset(p, 1, 4 * kHuge);
    const backing_report first = backing_of(p, 4 * kHuge);
    EXPECT_EQ(first.thp, 4 * kHuge);
    expect_all_on_node_zero(first, /*huge=*/true);
    if (l.tail() != 0) {
      std::memset(p + l.head, 1, l.tail());
      const backing_report tail = backing_of(p + l.head, l.tail());
      EXPECT_EQ(tail.huge_bytes(), l.tail())
          << "hugetlb " << tail.hugetlb_2m << ", thp " << tail.thp;
      expect_all_on_node_zero(tail, /*huge=*/true);
    }
    s.deallocate(p, bytes, 1);
  }
  EXPECT_EQ(test::live_mappings(), live);
  EXPECT_TRUE(test::pool_back(page_size::huge_2m, before));
}

// The strict policy's 2 MiB tail: where the 2 MiB pool cannot cover it, THP in place, placed.
// Needs a free 1 GiB page and Linux 6.12 (a tail at all); the tail is larger than the whole
// 2 MiB pool could hold.
TEST(NumaPlacement, TheStrictBlocksTailCarriesItsPlacement) {
  if (!strategy::fixed_mapping_keeps_range_on_failure()) {
    GTEST_SKIP() << "before Linux 6.12 a 1 GiB block has no 2 MiB tail (whole 1 GiB pages)";
  }
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const std::uint64_t most_2m = most_pool_pages(page_size::huge_2m);
  // The tail stays below 15/17 GiB, or the block rounds up to two whole 1 GiB pages.
  if ((most_2m + 1) * kHuge > 900 * kMiB) {
    GTEST_SKIP() << "the 2 MiB pool could hold any tail (" << most_2m << " pages)";
  }
  const std::size_t bytes = test::kGiB + (most_2m + 1) * kHuge;
  const test::pool_counts before = test::read_counts(page_size::huge_1g);
  const strategy s = strategy::hugetlb(page_size::huge_1g).placed(numa_placement::bind({0}));
  const strategy::layout l = s.layout_of(bytes);
  ASSERT_EQ(l.head, test::kGiB);
  ASSERT_EQ(l.tail(), bytes - test::kGiB);
  const std::uint64_t to_thp = stats().fallbacks_to_thp;
  char* p = static_cast<char*>(s.allocate(bytes, 1));
  EXPECT_EQ(stats().fallbacks_to_thp, to_thp + 1);
  EXPECT_TRUE(placed_throughout(p, l.length, 2));
  EXPECT_EQ(backing_of(p, l.head).hugetlb_1g, l.head);
  std::memset(p + l.head, 1, l.tail());
  const backing_report tail = backing_of(p + l.head, l.tail());
  if (test::thp_usable()) {
    EXPECT_EQ(tail.thp, l.tail());
  }
  expect_all_on_node_zero(tail, test::thp_usable());
  s.deallocate(p, bytes, 1);
  EXPECT_TRUE(test::pool_back(page_size::huge_1g, before));
}

struct on_node_zero : default_options {
  static constexpr numa_placement numa = numa_placement::bind({0});
  static constexpr const char* label = "numa-node-zero";
};

TEST(NumaPlacement, AllocatorOptionsPlaceTheContainerAndItsLabelReportsPerNode) {
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  static_assert(collapse_allocator<int, on_node_zero>::get_strategy().options().numa ==
                numa_placement::bind({0}));
  std::vector<char, collapse_allocator<char, on_node_zero>> v(kBlock, 'x');
  EXPECT_EQ(test::policy_at(v.data()).mode, 2);
  const backing_report r = backing_of(v.data(), v.size());
  EXPECT_EQ(r.huge_bytes_on_node(0), kBlock);
  const backing_report label = coverage_of("numa-node-zero");
  EXPECT_EQ(label.huge_bytes_on_node(0), kBlock);
  EXPECT_EQ(label.bytes_on_node(0), kBlock);
  std::ostringstream metrics;
  write_metrics(metrics);
  EXPECT_NE(metrics.str().find("hugepage_label_node_bytes{label=\"numa-node-zero\",node=\"0\"} " +
                               std::to_string(kBlock)),
            std::string::npos)
      << metrics.str();
  EXPECT_NE(
      metrics.str().find("hugepage_label_node_huge_bytes{label=\"numa-node-zero\",node=\"0\"} " +
                         std::to_string(kBlock)),
      std::string::npos);
  std::ostringstream json;
  write_metrics_json(json);
  EXPECT_NE(json.str().find("\"nodes\":{\"0\":{\"bytes\":" + std::to_string(kBlock) +
                            ",\"huge_bytes\":" + std::to_string(kBlock) +
                            "}},\"nodes_unattributed\":0,\"nodes_note\":\"\""),
            std::string::npos)
      << json.str();
  EXPECT_NE(metrics.str().find("hugepage_label_coverage_exact{label=\"numa-node-zero\"} 1\n"),
            std::string::npos)
      << metrics.str();
  // Every resident byte on a node the kernel named: none unattributed.
  EXPECT_NE(
      metrics.str().find("hugepage_label_node_unattributed_bytes{label=\"numa-node-zero\"} 0\n"),
      std::string::npos)
      << metrics.str();
}

TEST(NumaPlacement, ANodeThatDoesNotExistIsAClearErrorAndMapsNothing) {
  if (test::online_node_count() != 1) GTEST_SKIP() << "node 1 exists on this machine";
  const test::pool_counts before = test::read_counts(page_size::huge_2m);
  const std::size_t live = test::live_mappings();
  // At any size: below the threshold too, where nothing would be mapped.
  for (const std::size_t bytes : {std::size_t{64}, kMiB, kBlock}) {
    for (const strategy& s : {strategy::thp(), strategy::collapse(), strategy::hugetlb(),
                              strategy::hugetlb(page_size::huge_2m, fallback)}) {
      for (const numa_placement& numa : {numa_placement::bind({1}), numa_placement::preferred(1),
                                         numa_placement::interleave({0, 1})}) {
        SCOPED_TRACE(std::string(name_of(numa.mode)) + " " + std::to_string(int(s.how())) + " " +
                     std::to_string(bytes));
        try {
          void* p = s.placed(numa).allocate(bytes, 1);
          s.placed(numa).deallocate(p, bytes, 1);
          ADD_FAILURE() << "no error";
        } catch (const pool_exhausted& e) {
          ADD_FAILURE() << "pool_exhausted for a node that does not exist: " << e.what();
        } catch (const allocation_error& e) {
          EXPECT_EQ(e.code(), std::errc::invalid_argument);
          // The path names where the online set was read, apart from the set itself.
          EXPECT_NE(std::string(e.what()).find("node(s) 1 do not exist: the online nodes are " +
                                               numa::online_nodes().text() +
                                               " (/sys/devices/system/node/online)"),
                    std::string::npos)
              << e.what();
        }
      }
    }
  }
  EXPECT_EQ(test::live_mappings(), live);
  EXPECT_TRUE(test::pool_back(page_size::huge_2m, before));
}

TEST(NumaPlacement, AnEmptyOrOutOfRangeNodeSetIsAClearErrorAtAnySize) {
  for (const std::size_t bytes : {std::size_t{64}, kMiB, kBlock}) {
    for (const numa_placement& numa : {numa_placement::bind({}), numa_placement::interleave({}),
                                       numa_placement::bind({64}), numa_placement::preferred(-1)}) {
      SCOPED_TRACE(std::to_string(bytes));
      try {
        void* p = strategy::thp().placed(numa).allocate(bytes, 1);
        strategy::thp().placed(numa).deallocate(p, bytes, 1);
        ADD_FAILURE() << "no error for " << name_of(numa.mode);
      } catch (const allocation_error& e) {
        EXPECT_EQ(e.code(), std::errc::invalid_argument);
        const std::string what = e.what();
        EXPECT_NE(what.find("needs at least one node, numbered 0 to 63"), std::string::npos)
            << what;
        EXPECT_NE(what.find("(online nodes: " + numa::online_nodes().text() + ")"),
                  std::string::npos)
            << what;
        if (numa.nodes.valid()) {
          EXPECT_NE(what.find("it names none"), std::string::npos) << what;
        } else {
          const int named = numa.mode == numa_mode::preferred ? -1 : 64;
          EXPECT_NE(what.find("it names node " + std::to_string(named) + ", outside that range"),
                    std::string::npos)
              << what;
        }
      }
    }
  }
}

// Below the threshold the check comes before ::operator new: a request it could never serve
// (1 PiB under a threshold above it) is the placement's error, not std::bad_alloc.
TEST(NumaPlacement, AnInvalidNodeSetAllocatesNothingBelowTheThreshold) {
  allocation_options all_small;
  all_small.small_threshold = SIZE_MAX;
  constexpr std::size_t pib = std::size_t{1} << 50;
  for (const numa_placement& numa : {numa_placement::bind({}), numa_placement::bind({63})}) {
    const strategy s = strategy::thp(all_small).placed(numa);
    ASSERT_FALSE(s.is_mapped(pib));
    EXPECT_THROW(s.allocate(pib, 8), allocation_error) << name_of(numa.mode);
  }
  // The same request with no placement reaches the heap, which refuses it (ASan's heap aborts on
  // a request past its limit instead of throwing: the control is for the plain build).
  if (!test::under_asan()) {
    EXPECT_THROW(strategy::thp(all_small).allocate(pib, 8), std::bad_alloc);
  }
}

// A valid placement places mapped blocks only: a block below the threshold comes from the heap,
// whose pages it shares with other objects, and keeps the heap's policy (the default here).
TEST(NumaPlacement, ABlockBelowTheThresholdIsNotPlaced) {
  const strategy s = strategy::thp().placed(numa_placement::bind({0}));
  ASSERT_FALSE(s.is_mapped(kMiB));
  void* p = s.allocate(kMiB, 64);
  std::memset(p, 1, kMiB);
  EXPECT_EQ(test::policy_at(p).mode, 0);
  s.deallocate(p, kMiB, 64);
}

TEST(NumaPlacement, ABoundHugetlbBlockLargerThanItsNodesPoolThrowsNamingTheNode) {
  const auto free_here = numa::read_node_pool(0, page_size::huge_2m, "free_hugepages");
  if (!free_here) HUGEPAGE_SKIP_OR_FAIL("no per-node 2 MiB pool file for node 0");
  const test::pool_counts before = test::read_counts(page_size::huge_2m);
  const std::size_t live = test::live_mappings();
  const std::uint64_t pages = *free_here + 1;
  const std::size_t bytes = pages * kHuge;
  const strategy s = strategy::hugetlb().placed(numa_placement::bind({0}));
  try {
    void* p = s.allocate(bytes, 1);
    s.deallocate(p, bytes, 1);
    ADD_FAILURE() << "no error";
  } catch (const node_pool_exhausted& e) {
    EXPECT_EQ(e.node(), 0);
    EXPECT_EQ(e.pages_requested(), pages);
    EXPECT_EQ(e.file(), "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages");
    const std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(pages) + " hugetlb pages of 2 MiB bound to node 0"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("pages of other nodes are not used for a bound block"), std::string::npos);
    EXPECT_NE(what.find("> " + e.file()), std::string::npos) << what;
  }
  // Under the fallback policy the block is THP on the bound node instead.
  const strategy f =
      strategy::hugetlb(page_size::huge_2m, fallback).placed(numa_placement::bind({0}));
  const std::uint64_t fallbacks = stats().fallbacks_to_thp;
  void* p = f.allocate(bytes, 1);
  EXPECT_EQ(stats().fallbacks_to_thp, fallbacks + 1);
  EXPECT_EQ(test::policy_at(p).mode, 2);
  f.deallocate(p, bytes, 1);
  EXPECT_EQ(test::live_mappings(), live);
  EXPECT_TRUE(test::pool_back(page_size::huge_2m, before));
}

TEST(NumaPlacement, PreferredOnTheOnlyNodeCountsNoFallback) {
  const std::uint64_t before = stats().fallbacks_to_other_node;
  allocation_options prefaulted;
  prefaulted.prefault = true;
  const strategy s = strategy::thp(prefaulted).placed(numa_placement::preferred(0));
  void* p = s.allocate(kBlock, 1);
  EXPECT_EQ(backing_of(p, kBlock).bytes_on_node(0), kBlock);
  s.deallocate(p, kBlock, 1);
  EXPECT_EQ(stats().fallbacks_to_other_node, before);
}

TEST(NumaPlacement, AnArenasSlabsFollowItsPlacement) {
  arena a(strategy::thp().placed(numa_placement::bind({0})));
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) blocks.push_back(a.allocate(256, 8));
  for (void* b : blocks) std::memset(b, 1, 256);
  EXPECT_EQ(a.get_strategy().options().numa, numa_placement::bind({0}));
  for (const auto& range : a.mapped_ranges()) EXPECT_EQ(test::policy_at(range.first).mode, 2);
  const backing_report r = a.backing();
  EXPECT_GT(r.resident_bytes(), 0U);
  expect_all_on_node_zero(r, /*huge=*/false);
  for (void* b : blocks) a.deallocate(b, 256, 8);
}

struct interleaved_tag {
  static constexpr numa_placement numa = numa_placement::interleave({0});
};

TEST(NumaPlacement, ASharedArenaTagPlacesItsSlabs) {
  void* p = shared_arena<interleaved_tag>().allocate(512, 8);
  std::memset(p, 1, 512);
  EXPECT_EQ(shared_arena<interleaved_tag>().get_strategy().options().numa.mode,
            numa_mode::interleave);
  EXPECT_EQ(test::policy_at(p).mode, 3);
  shared_arena<interleaved_tag>().deallocate(p, 512, 8);
}

TEST(NumaReport, AnUntouchedRangeIsOnNoNode) {
  const strategy s = strategy::thp();
  void* p = s.allocate(kBlock, 1);
  const backing_report r = backing_of(p, kBlock);
  EXPECT_EQ(r.resident_bytes(), 0U);
  EXPECT_TRUE(r.nodes.empty());
  s.deallocate(p, kBlock, 1);
}

// Part huge, part not (one huge page split): the kpageflags source asks move_pages per PMD window
// it finds huge and per base page elsewhere; the nodes' figures add up to the report's, from
// every source (on whichever node first touch put the block), and only smaps' may be estimated.
TEST(NumaReport, EverySourceGivesTheSameNodesForAMappingPartHuge) {
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  const strategy s = strategy::collapse();
  char* p = static_cast<char*>(s.allocate(kBlock, 1));
  ASSERT_EQ(::madvise(p, kBlock, MADV_NOHUGEPAGE), 0);  // no khugepaged collapse while it reads
  ASSERT_EQ(::madvise(p + kHuge + 4096, 4096, MADV_DONTNEED), 0);
  for (const backing_source source :
       {backing_source::pagemap_scan, backing_source::kpageflags, backing_source::smaps}) {
    SCOPED_TRACE(name_of(source));
    const backing_report r = backing_of(0, p, kBlock, source);
    if (r.source == backing_source::unavailable) continue;
    EXPECT_EQ(r.resident_bytes(), kBlock - 4096);
    EXPECT_LT(r.huge_bytes(), kBlock);
    std::size_t bytes = 0, huge = 0;
    for (const node_bytes& n : r.nodes) {
      bytes += n.bytes;
      huge += n.huge_bytes;
    }
    EXPECT_EQ(bytes, r.resident_bytes()) << r.nodes_note;
    if (r.source != backing_source::smaps) {
      EXPECT_EQ(huge, r.huge_bytes());
      EXPECT_FALSE(r.nodes_estimated) << r.nodes_note;
    } else {
      EXPECT_LE(huge, r.huge_bytes());  // shared out, rounded down per node
      EXPECT_GE(huge + r.nodes.size(), r.huge_bytes());
      EXPECT_EQ(r.nodes_estimated, r.nodes.size() > 1) << r.nodes_note;
    }
  }
  s.deallocate(p, kBlock, 1);
}

TEST(NumaReport, EverySourceGivesTheSameNodes) {
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  const strategy s = strategy::collapse();
  void* p = s.allocate(kBlock, 1);
  for (const backing_source source :
       {backing_source::pagemap_scan, backing_source::kpageflags, backing_source::smaps}) {
    SCOPED_TRACE(name_of(source));
    const backing_report r = backing_of(0, p, kBlock, source);
    if (r.source == backing_source::unavailable) continue;
    EXPECT_EQ(r.bytes_on_node(0), kBlock);
    EXPECT_EQ(r.huge_bytes_on_node(0), r.huge_bytes());
  }
  s.deallocate(p, kBlock, 1);
}

TEST(NumaNodes, OnlineNodesParseTheKernelsList) {
  const node_set nodes = numa::read_online_nodes();
  EXPECT_TRUE(nodes.contains(0));
  EXPECT_EQ(node_set({0, 2, 3}).text(), "0,2,3");
  EXPECT_FALSE(node_set({64}).valid());
  EXPECT_EQ(numa::node_pool_file(1, page_size::huge_1g, "free_hugepages"),
            "/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/free_hugepages");
}

// A preferred node outside the process's cpuset (Mems_allowed) cannot serve, and "preferred"
// promises another node: the block is placed by first touch instead. Bind and interleave are
// kept (mbind refuses them with a clear error). An unknown cpuset (empty) changes nothing.
TEST(NumaNodes, APreferredNodeOutsideTheCpusetBecomesFirstTouch) {
  const node_set only_zero{0};
  EXPECT_EQ(numa::within(numa_placement::preferred(1), only_zero), numa_placement::local());
  EXPECT_EQ(numa::within(numa_placement::preferred(0), only_zero), numa_placement::preferred(0));
  EXPECT_EQ(numa::within(numa_placement::preferred(1), node_set{0, 1}),
            numa_placement::preferred(1));
  EXPECT_EQ(numa::within(numa_placement::preferred(1), node_set{}), numa_placement::preferred(1));
  EXPECT_EQ(numa::within(numa_placement::bind({1}), only_zero), numa_placement::bind({1}));
  EXPECT_EQ(numa::within(numa_placement::interleave({0, 1}), only_zero),
            numa_placement::interleave({0, 1}));
  EXPECT_EQ(numa::within(numa_placement::local(), only_zero), numa_placement::local());
  // This process's own: every online node, unless a cpuset narrows it.
  const std::optional<node_set> allowed = numa::allowed_nodes();
  ASSERT_TRUE(allowed.has_value());
  EXPECT_TRUE(allowed->contains(0));
  EXPECT_EQ(allowed->mask & ~numa::online_nodes().mask, 0U);
}

}  // namespace
}  // namespace hugepage
