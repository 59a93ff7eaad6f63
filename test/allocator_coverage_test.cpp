// test/allocator_coverage_test.cpp - the STL allocators' coverage asserted from the kernel
// (backing_of, pool counters), small requests served from the heap, and the options (pre-fault,
// MADV_DONTFORK). Containers over every kind: allocator_test.cpp.
//
// Statistics are per process and gtest runs one test at a time, so stats() deltas are exact. The
// hugetlb pool counters are system-wide: only the 1 GiB test compares them, and only while it owns
// the page it allocated.
#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace hugepage {
namespace {

using units::gib;
using units::kib;
using units::mib;
constexpr std::size_t huge_2m_bytes = bytes_of(page_size::huge_2m);

using hugepage::test::is_aligned;
using hugepage::test::live_mappings;

// ---- coverage, asserted from the kernel --------------------------------------------------------

// Exact: PAGEMAP_SCAN (Linux 6.7, any user) or kpageflags (root).
void expect_exact_source(const backing_report& r) {
  if (r.source != backing_source::pagemap_scan) {
    if (::geteuid() != 0) return;  // an older kernel, without root: smaps, approximate
    EXPECT_EQ(r.source, backing_source::kpageflags) << r.note;
  }
  EXPECT_TRUE(r.exact) << r.note;
}

template <class Allocator>
void expect_64_mib_vector_is_huge() {
  constexpr std::size_t bytes = 64 * mib;
  std::vector<std::uint64_t, Allocator> v(bytes / sizeof(std::uint64_t));  // every page touched
  ASSERT_TRUE(is_aligned(v.data(), huge_2m_bytes));
  const backing_report r = backing_of(v.data(), bytes);
  expect_exact_source(r);
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_GE(r.huge_fraction(), 0.99) << "thp " << r.thp << ", base " << r.base << ", not resident "
                                     << r.not_resident << "; " << r.note;
  EXPECT_EQ(r.not_resident, 0u) << "fully touched";
  EXPECT_EQ(r.hugetlb_2m + r.hugetlb_1g, 0u) << "THP, not hugetlb";
  EXPECT_EQ(r.unmapped, 0u);
}

TEST(AllocatorCoverage, ThpVectorOf64MiBIsHuge) {
  const auto mode = hugepage::read_thp_mode();
  if (!mode || *mode == hugepage::thp_mode::never) {
    HUGEPAGE_SKIP_OR_FAIL("2 MiB THP is off (effective mode never, or the sysfs files missing)");
  }
  expect_64_mib_vector_is_huge<thp_allocator<std::uint64_t>>();
}

TEST(AllocatorCoverage, CollapseVectorOf64MiBIsHuge) {
  const auto mode = hugepage::read_thp_mode();
  if (!mode || *mode == hugepage::thp_mode::never) {
    // The kernel would collapse (MADV_COLLAPSE ignores the sysfs mode), but collapse_allocator
    // follows the setting: base pages, counted as obtained_base (docs/failure-modes.md).
    HUGEPAGE_SKIP_OR_FAIL(
        "2 MiB THP is off (effective mode never, or the sysfs files missing): "
        "collapse_allocator makes no MADV_COLLAPSE call");
  }
  if (probe_collapse() != collapse_support::works) {
    HUGEPAGE_SKIP_OR_FAIL(std::string("MADV_COLLAPSE: ") + name_of(probe_collapse()));
  }
  expect_64_mib_vector_is_huge<collapse_allocator<std::uint64_t>>();
}

TEST(AllocatorCoverage, HugePageVectorIsOnHugetlb2MiBPages) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 8);
  constexpr std::size_t count = 5 * mib / sizeof(std::uint32_t) + 7;  // 5 MiB + 28 bytes
  constexpr std::size_t mapped = 6 * mib;                             // 3 whole pages
  std::vector<std::uint32_t, huge_page_allocator<std::uint32_t>> v(count);
  ASSERT_TRUE(is_aligned(v.data(), huge_2m_bytes));
  const backing_report whole = backing_of(v.data(), mapped);
  EXPECT_EQ(whole.bytes, mapped);
  EXPECT_EQ(whole.hugetlb_2m, mapped) << "every page of the mapping is a resident hugetlb page";
  EXPECT_EQ(whole.thp + whole.base + whole.hugetlb_1g + whole.not_resident + whole.unmapped, 0u);
  EXPECT_TRUE(whole.exact) << whole.note;

  const backing_report used = backing_of(v.data(), v.size() * sizeof(std::uint32_t));
  EXPECT_EQ(used.hugetlb_2m, used.bytes);
  EXPECT_DOUBLE_EQ(used.huge_fraction(), 1.0);
}

TEST(AllocatorCoverage, OneGiBVectorIsOnOneGiBPage) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  using allocator = huge_page_allocator<unsigned char, page_size::huge_1g>;
  static_assert(allocator::get_strategy().options().small_threshold == 0);
  ASSERT_EQ(allocator::get_strategy().threshold(), huge_2m_bytes)
      << "a 1 GiB allocator maps from 2 MiB (the cascade)";

  const test::pool_counts start = test::read_counts(page_size::huge_1g);
  const statistics stats_before = stats();
  {
    // The page is faulted in by allocate() (no first touch can be refused later): taken from
    // the pool, no reservation left outstanding.
    allocator a;
    unsigned char* const p = a.allocate(gib);
    const test::pool_counts mapped = test::read_counts(page_size::huge_1g);
    EXPECT_EQ(mapped.reserved, start.reserved) << "mapped: " << mapped << ", start: " << start;
    EXPECT_EQ(mapped.free, start.free - 1) << "mapped: " << mapped << ", start: " << start;
    p[0] = 1;
    EXPECT_EQ(test::read_counts(page_size::huge_1g), mapped) << "the touch took nothing more";
    a.deallocate(p, gib);
    EXPECT_EQ(test::read_counts(page_size::huge_1g), start);
  }
  {
    // Exactly 1 GiB, value-initialised: the page is touched.
    std::vector<std::uint64_t, huge_page_allocator<std::uint64_t, page_size::huge_1g>> v(
        gib / sizeof(std::uint64_t));
    ASSERT_TRUE(is_aligned(v.data(), gib));
    const test::pool_counts live = test::read_counts(page_size::huge_1g);
    EXPECT_EQ(live.free, start.free - 1) << "live: " << live << ", start: " << start;
    EXPECT_EQ(live.reserved, start.reserved) << "live: " << live;
    EXPECT_EQ(live.total, start.total);
    EXPECT_EQ(stats().requested_hugetlb_1g - stats_before.requested_hugetlb_1g, gib);
    EXPECT_EQ(stats().obtained_hugetlb_1g - stats_before.obtained_hugetlb_1g, gib);

    const backing_report r = backing_of(v.data(), gib);
    EXPECT_EQ(r.hugetlb_1g, gib) << r.note;
    EXPECT_EQ(r.hugetlb_2m + r.thp + r.base + r.not_resident + r.unmapped, 0u);
    v.back() = 7;
    EXPECT_EQ(v.back(), 7u);
    EXPECT_EQ(v.front(), 0u);
  }
  EXPECT_EQ(test::read_counts(page_size::huge_1g), start) << "the page is back in the pool";
  EXPECT_EQ(stats().requested_hugetlb_1g, stats_before.requested_hugetlb_1g);
}

TEST(AllocatorCoverage, OneGiBAllocatorServesBlocksBelowTwoMiBFromTheHeap) {
  // Below 2 MiB a 1 GiB allocator uses ::operator new: nothing is mapped, no pool page is taken.
  const statistics before = stats();
  std::vector<std::uint64_t, huge_page_allocator<std::uint64_t, page_size::huge_1g>> v(
      huge_2m_bytes / sizeof(std::uint64_t) - 1, 9);
  EXPECT_EQ(stats().live_mappings, before.live_mappings);
  EXPECT_EQ(stats().requested_hugetlb_1g, before.requested_hugetlb_1g);
  EXPECT_EQ(v.back(), 9u);
}

TEST(AllocatorCoverage, OneGiBAllocatorMapsFourMiBOnTwoMiBPages) {
  // 2 MiB pool pages where the pool has two, else THP: never the heap, never a 1 GiB page.
  const statistics before = stats();
  std::vector<std::uint64_t, huge_page_allocator<std::uint64_t, page_size::huge_1g>> v(
      4 * mib / sizeof(std::uint64_t), 9);
  const statistics during = stats();
  EXPECT_EQ(during.live_mappings, before.live_mappings + 1);
  EXPECT_EQ(during.requested_hugetlb_1g, before.requested_hugetlb_1g + 4 * mib);
  EXPECT_EQ(during.obtained_hugetlb_1g, before.obtained_hugetlb_1g);
  EXPECT_EQ(during.obtained_hugetlb_2m + during.obtained_thp + during.obtained_base,
            before.obtained_hugetlb_2m + before.obtained_thp + before.obtained_base + 4 * mib);
  ASSERT_TRUE(is_aligned(v.data(), huge_2m_bytes));
  const backing_report r = backing_of(v.data(), 4 * mib);
  EXPECT_EQ(r.hugetlb_1g, 0u);
  if (during.obtained_hugetlb_2m != before.obtained_hugetlb_2m) {
    EXPECT_EQ(r.hugetlb_2m, 4 * mib) << r.note;
  }
  EXPECT_EQ(v.back(), 9u);
}

// ---- small requests ----------------------------------------------------------------------------

TEST(AllocatorSmallRequests, ThousandSmallVectorsDoNotCostThousandHugePages) {
  constexpr std::size_t count = 1000;
  constexpr std::size_t each = 100 * kib;
  constexpr std::size_t live_bytes = count * each;
  using vector = std::vector<unsigned char, thp_allocator<unsigned char>>;
  std::vector<vector> vectors;
  vectors.reserve(count);
  const statistics before = stats();
  const std::size_t rss_before = test::rss_bytes();
  ASSERT_GT(rss_before, 0u) << "/proc/self/statm unreadable";
  for (std::size_t i = 0; i < count; ++i) vectors.emplace_back(each, static_cast<unsigned char>(i));
  const std::size_t rss_after = test::rss_bytes();
  const std::size_t growth = rss_after > rss_before ? rss_after - rss_before : 0;
  EXPECT_LT(growth, 2 * live_bytes)
      << "RSS grew by " << growth << " bytes for " << live_bytes << " live bytes";
  EXPECT_LT(growth, count * huge_2m_bytes / 4);
  EXPECT_EQ(stats().live_mappings, before.live_mappings) << "small requests are never mapped";
  EXPECT_EQ(stats().requested_thp, before.requested_thp);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    wrong += vectors[i].front() != static_cast<unsigned char>(i) ||
             vectors[i].back() != static_cast<unsigned char>(i);
  }
  EXPECT_EQ(wrong, 0u);
}

TEST(AllocatorSmallRequests, ThresholdIsOneHugePage) {
  using allocator = thp_allocator<unsigned char>;
  EXPECT_EQ(allocator::get_strategy().threshold(), thp_page_bytes());
  allocator a;
  const std::size_t live_before = live_mappings();
  unsigned char* const below = a.allocate(thp_page_bytes() - 1);
  EXPECT_EQ(live_mappings(), live_before) << "one byte under a huge page: small path";
  unsigned char* const at = a.allocate(thp_page_bytes());
  EXPECT_EQ(live_mappings(), live_before + 1) << "one huge page: mapped";
  a.deallocate(at, thp_page_bytes());
  a.deallocate(below, thp_page_bytes() - 1);
  EXPECT_EQ(live_mappings(), live_before);
}

struct small_threshold_64k : default_options {
  static constexpr std::size_t small_threshold = 64 * kib;
};

TEST(AllocatorSmallRequests, ConfiguredThresholdMapsSmallerRequests) {
  thp_allocator<unsigned char, small_threshold_64k> a;
  const statistics before = stats();
  unsigned char* const p = a.allocate(64 * kib);
  EXPECT_EQ(stats().live_mappings, before.live_mappings + 1);
  EXPECT_EQ(stats().requested_thp - before.requested_thp, thp_page_bytes())
      << "rounded to a huge page";
  unsigned char* const q = a.allocate(64 * kib - 1);
  EXPECT_EQ(stats().live_mappings, before.live_mappings + 1) << "under the threshold";
  a.deallocate(q, 64 * kib - 1);
  a.deallocate(p, 64 * kib);
  EXPECT_EQ(stats().requested_thp, before.requested_thp);
}

// ---- options: pre-fault and MADV_DONTFORK -----------------------------------------------------

template <class Allocator>
void expect_resident_at_allocation(std::size_t bytes) {
  Allocator a;
  const statistics before = stats();
  unsigned char* const p = a.allocate(bytes);
  const backing_report r = backing_of(p, bytes);  // nothing touched the block yet
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_EQ(r.not_resident, 0u) << "pre-faulted at allocation; " << r.note;
  EXPECT_EQ(r.resident_bytes(), bytes);
  EXPECT_EQ(stats().prefaulted_bytes - before.prefaulted_bytes, bytes);
  a.deallocate(p, bytes);
}

TEST(AllocatorOptions, PrefaultMakesThpBlockResidentBeforeTouch) {
  expect_resident_at_allocation<thp_allocator<unsigned char, prefault_options>>(
      test::at_least_pmds(16 * mib, 2));
}

TEST(AllocatorOptions, PrefaultMakesHugetlbBlockResidentBeforeTouch) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 8);
  expect_resident_at_allocation<
      huge_page_allocator<unsigned char, page_size::huge_2m, strict, prefault_options>>(8 * mib);
}

TEST(AllocatorOptions, CollapseAlwaysPrefaults) {
  expect_resident_at_allocation<collapse_allocator<unsigned char>>(test::at_least_pmds(8 * mib, 2));
}

TEST(AllocatorOptions, UntouchedThpBlockIsNotResidentWithoutPrefault) {
  const std::size_t bytes = test::at_least_pmds(16 * mib, 2);
  thp_allocator<unsigned char> a;
  const statistics before = stats();
  unsigned char* const p = a.allocate(bytes);
  const backing_report r = backing_of(p, bytes);
  EXPECT_EQ(r.not_resident, bytes) << "no page faulted before the first touch; " << r.note;
  EXPECT_EQ(r.resident_bytes(), 0u);
  EXPECT_EQ(stats().prefaulted_bytes, before.prefaulted_bytes);
  p[0] = 1;  // one touch faults one page (huge or base), not the block
  const backing_report touched = backing_of(p, bytes);
  EXPECT_GT(touched.resident_bytes(), 0u);
  EXPECT_LE(touched.resident_bytes(), thp_page_bytes());
  a.deallocate(p, bytes);
}

struct dont_fork_options : default_options {
  static constexpr bool dont_fork = true;
};

// Writes a value into a fresh block and returns what a forked child that reads it exits with:
// 0 when it read the value, 128 + signal when it died.
template <class Allocator>
int child_reading_a_block() {
  const std::size_t n = test::at_least_pmds(4 * mib, 1) / sizeof(std::uint64_t);
  Allocator a;
  std::uint64_t* const p = a.allocate(n);
  p[0] = 42;
  p[n - 1] = 43;
  const int status = test::run_in_child([p, n] {
    std::signal(SIGSEGV, SIG_DFL);  // die of it, even under a sanitizer's handler
    const volatile std::uint64_t* q = p;
    return q[0] == 42 && q[n - 1] == 43 ? 0 : 1;
  });
  EXPECT_EQ(p[0], 42u) << "the parent keeps its memory";
  EXPECT_EQ(p[n - 1], 43u);
  a.deallocate(p, n);
  return status;
}

TEST(AllocatorOptions, DontForkHidesThpBlockFromChild) {
  EXPECT_EQ((child_reading_a_block<thp_allocator<std::uint64_t, dont_fork_options>>()),
            128 + SIGSEGV);
}

TEST(AllocatorOptions, DontForkHidesHugetlbBlockFromChild) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 4);
  EXPECT_EQ(
      (child_reading_a_block<
          huge_page_allocator<std::uint64_t, page_size::huge_2m, strict, dont_fork_options>>()),
      128 + SIGSEGV);
}

TEST(AllocatorOptions, WithoutDontForkChildReadsTheBlock) {
  EXPECT_EQ(child_reading_a_block<thp_allocator<std::uint64_t>>(), 0);
}

TEST(AllocatorOptions, WithoutDontForkChildReadsTheHugetlbBlock) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 4);
  EXPECT_EQ(child_reading_a_block<huge_page_allocator<std::uint64_t>>(), 0);
}

}  // namespace
}  // namespace hugepage
