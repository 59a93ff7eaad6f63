// cascade_test.cpp - a 1 GiB allocator puts every block of 2 MiB or more on huge pages: 1 GiB pages
// for whole GiBs, 2 MiB pages (pool, else THP) below and for the tail (strategy.hpp, "cascade").
// Coverage is read from the kernel (backing_of); pool counters must be back at their start.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hugepage/hugepage.hpp"
#include "support.hpp"

namespace {

using hugepage::backing_report;
using hugepage::page_size;
using hugepage::statistics;
using hugepage::strategy;
using hugepage::test::pool_back;
using hugepage::test::pool_counts;
using hugepage::test::read_counts;
using hugepage::test::run_in_child;

using hugepage::test::kGiB;
using hugepage::test::kHuge;
using hugepage::test::kMiB;

template <class T, hugepage::pool_policy Policy = hugepage::strict>
using one_gib_allocator = hugepage::huge_page_allocator<T, page_size::huge_1g, Policy>;

// ---- the rule ---------------------------------------------------------------------------------

TEST(CascadeLayout, BlocksBelowOneGiBAreOnTwoMiBPages) {
  const strategy s = strategy::hugetlb(page_size::huge_1g);
  EXPECT_TRUE(s.cascades());
  EXPECT_EQ(s.threshold(), kHuge);
  EXPECT_FALSE(s.is_mapped(kHuge - 1));
  EXPECT_TRUE(s.is_mapped(kHuge));
  for (const std::size_t bytes : {kHuge, kHuge + 1, 1000 * kMiB, kGiB - 1}) {
    SCOPED_TRACE(bytes);
    const strategy::layout l = s.layout_of(bytes);
    EXPECT_EQ(l.head, 0u) << "no 1 GiB page below 1 GiB";
    EXPECT_EQ(l.length % kHuge, 0u);
    EXPECT_GE(l.length, bytes);
    EXPECT_LT(l.length - bytes, kHuge);
  }
  // A configured threshold still rules below 2 MiB.
  hugepage::allocation_options small;
  small.small_threshold = 64 * 1024;
  const strategy t = strategy::hugetlb(page_size::huge_1g, hugepage::strict, small);
  EXPECT_EQ(t.threshold(), 64 * 1024u);
  EXPECT_EQ(t.layout_of(64 * 1024).length, kHuge);
  EXPECT_EQ(t.layout_of(64 * 1024).head, 0u);
}

TEST(CascadeLayout, TailRoundsUpOnlyWithinTheWasteBound) {
  const strategy s = strategy::hugetlb(page_size::huge_1g);
  const std::size_t divisor = strategy::whole_page_waste_divisor;
  // Whole GiBs: whole pages, nothing else.
  for (const std::size_t gibs : {1, 2, 3}) {
    const strategy::layout l = s.layout_of(gibs * kGiB);
    EXPECT_EQ(l.length, gibs * kGiB);
    EXPECT_EQ(l.head, gibs * kGiB);
  }
  // 1.5 GiB: one 1 GiB page and 256 pages of 2 MiB.
  const strategy::layout half = s.layout_of(kGiB + kGiB / 2);
  EXPECT_EQ(half.head, kGiB);
  EXPECT_EQ(half.tail(), kGiB / 2);
  // 1 GiB + 1 byte: one page and one 2 MiB page, not two 1 GiB pages.
  const strategy::layout byte = s.layout_of(kGiB + 1);
  EXPECT_EQ(byte.head, kGiB);
  EXPECT_EQ(byte.tail(), kHuge);
  // The bound, on both sides: rounding up to 2 GiB may waste at most bytes / divisor.
  const std::size_t edge = 2 * kGiB * divisor / (divisor + 1);  // waste == bytes / divisor
  for (std::size_t bytes = edge - 3 * kHuge; bytes < edge + 3 * kHuge; bytes += kHuge / 2) {
    SCOPED_TRACE(bytes);
    const strategy::layout l = s.layout_of(bytes);
    const bool within = 2 * kGiB - bytes <= bytes / divisor;
    EXPECT_EQ(l.head, within ? 2 * kGiB : kGiB);
    EXPECT_EQ(l.length, within ? 2 * kGiB : kGiB + (bytes - kGiB + kHuge - 1) / kHuge * kHuge);
    EXPECT_LE(l.length - bytes, std::max(bytes / divisor, kHuge));
  }
  // Other strategies keep one page size.
  const strategy two = strategy::hugetlb(page_size::huge_2m);
  EXPECT_FALSE(two.cascades());
  EXPECT_EQ(two.layout_of(kGiB + 1).head, two.layout_of(kGiB + 1).length);
  EXPECT_FALSE(strategy::thp().cascades());
}

// ---- a growing vector -------------------------------------------------------------------------

struct row {
  std::uint64_t a, b, c;  // 24 bytes: doubling reaches exactly 1.5 GiB at 2^26 rows
};
static_assert(sizeof(row) == 24);

TEST(CascadeVector, PushBackToOneAndAHalfGiBStaysOnHugePages) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const pool_counts start_1g = read_counts(page_size::huge_1g);
  const pool_counts start_2m = read_counts(page_size::huge_2m);
  const statistics s0 = hugepage::stats();
  constexpr std::size_t rows = std::size_t{1} << 26;
  constexpr std::size_t final_bytes = rows * sizeof(row);
  static_assert(final_bytes == kGiB + kGiB / 2);
  const strategy& s = one_gib_allocator<row>::get_strategy();
  int checked = 0;
  {
    std::vector<row, one_gib_allocator<row>> v;
    // Each block is checked when it is full, just before push_back moves to the next one.
    const auto check_block = [&] {
      const std::size_t bytes = v.capacity() * sizeof(row);
      if (bytes < kHuge) return;
      const backing_report r = hugepage::backing_of(v.data(), bytes);
      EXPECT_GE(static_cast<double>(r.huge_bytes()), 0.99 * static_cast<double>(bytes))
          << bytes << " bytes: hugetlb_1g " << r.hugetlb_1g << ", hugetlb_2m " << r.hugetlb_2m
          << ", thp " << r.thp << ", base " << r.base << "; " << r.note;
      if (bytes < kGiB) {
        EXPECT_EQ(r.hugetlb_1g, 0u) << bytes;
      }
      ++checked;
    };
    for (std::size_t i = 0; i < rows; ++i) {
      if (v.size() == v.capacity()) check_block();
      v.push_back({i, i + 1, i + 2});
    }
    ASSERT_EQ(v.capacity(), rows) << "libstdc++ doubles the capacity";
    check_block();

    const strategy::layout l = s.layout_of(final_bytes);
    EXPECT_EQ(l.head, kGiB);
    EXPECT_EQ(l.length, final_bytes);
    const backing_report whole = hugepage::backing_of(v.data(), l.length);
    EXPECT_EQ(whole.hugetlb_1g, kGiB) << whole.note;
    EXPECT_EQ(whole.hugetlb_2m + whole.thp, kGiB / 2) << whole.note;
    // Memory the finished vector holds (pool pages and anonymous pages alike), within the bound;
    // whole 1 GiB pages would hold 2 GiB.
    const std::size_t held = whole.hugetlb_1g + whole.hugetlb_2m + whole.thp + whole.base;
    EXPECT_LE(held, final_bytes + final_bytes / strategy::whole_page_waste_divisor);

    const statistics s1 = hugepage::stats();
    EXPECT_EQ(s1.requested_hugetlb_1g - s0.requested_hugetlb_1g, final_bytes);
    EXPECT_EQ(s1.obtained_hugetlb_1g - s0.obtained_hugetlb_1g, kGiB);
    EXPECT_EQ(s1.obtained_hugetlb_2m + s1.obtained_thp - s0.obtained_hugetlb_2m - s0.obtained_thp,
              kGiB / 2);
    EXPECT_EQ(s1.live_mappings, s0.live_mappings + 1);
    EXPECT_EQ(v[rows - 1].c, rows + 1);
    EXPECT_EQ(v[rows / 2].a, rows / 2);
  }
  EXPECT_EQ(checked, 10) << "blocks of 3 MiB to 1.5 GiB";
  const statistics s2 = hugepage::stats();
  EXPECT_EQ(s2.requested_hugetlb_1g, s0.requested_hugetlb_1g);
  EXPECT_EQ(s2.obtained_hugetlb_1g, s0.obtained_hugetlb_1g);
  EXPECT_EQ(s2.obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
  EXPECT_EQ(s2.obtained_thp, s0.obtained_thp);
  EXPECT_EQ(s2.live_mappings, s0.live_mappings);
  EXPECT_TRUE(pool_back(page_size::huge_1g, start_1g));
  EXPECT_TRUE(pool_back(page_size::huge_2m, start_2m));
}

// ---- 1000 MiB: the 2 MiB pool, THP, base pages ------------------------------------------------

constexpr std::size_t kThousand = 1000 * kMiB;

TEST(CascadeThousandMiB, OnTheTwoMiBPool) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kThousand / kHuge);
  const pool_counts start = read_counts(page_size::huge_2m);
  const statistics s0 = hugepage::stats();
  {
    std::vector<unsigned char, one_gib_allocator<unsigned char>> v(kThousand, 3);
    const statistics s1 = hugepage::stats();
    EXPECT_EQ(s1.requested_hugetlb_1g - s0.requested_hugetlb_1g, kThousand);
    EXPECT_EQ(s1.obtained_hugetlb_1g, s0.obtained_hugetlb_1g);
    if (s1.obtained_hugetlb_2m - s0.obtained_hugetlb_2m != kThousand) {
      // Another process took the pages between the check above and the mmap.
      EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp + 1);
      HUGEPAGE_SKIP_OR_FAIL("the 2 MiB pool was drained by another process meanwhile");
    }
    EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp);
    EXPECT_EQ(s1.fallbacks_to_base, s0.fallbacks_to_base);
    const backing_report r = hugepage::backing_of(v.data(), kThousand);
    EXPECT_EQ(r.hugetlb_2m, kThousand) << r.note;
    EXPECT_EQ(r.hugetlb_1g + r.thp + r.base + r.not_resident + r.unmapped, 0u);
    EXPECT_EQ(v[kThousand - 1], 3);
  }
  EXPECT_EQ(hugepage::stats().obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
  EXPECT_EQ(hugepage::stats().requested_hugetlb_1g, s0.requested_hugetlb_1g);
  EXPECT_TRUE(pool_back(page_size::huge_2m, start));
}

// A hugetlb cgroup for one child: an "empty" 2 MiB pool for that process only (the shared pool
// is never drained). `reservations` false limits faults only: mmap succeeds, first touch would
// SIGBUS, so the library must populate at allocation and fall back when that fails.
class two_mib_limit : public hugepage::test::scratch_cgroup {
 public:
  explicit two_mib_limit(bool reservations) : scratch_cgroup("hugetlb") {
    if (!error().empty()) return;
    if (!write("hugetlb.2MB.max", "0") || (reservations && !write("hugetlb.2MB.rsvd.max", "0"))) {
      failed_ =
          std::string("cannot write the hugetlb limits of ") + path() + ": " + std::strerror(errno);
    }
  }
  std::string why_unusable() const { return error().empty() ? failed_ : error(); }

 private:
  std::string failed_;
};

constexpr int kNoThp = 77;  // the child got no THP at all: the machine's memory, not the library

// In a child joined to `cgroup`: 1000 MiB through the strict and the fallback 1 GiB allocator,
// expected on `expected` (thp or base) and counted once as that fallback; nothing thrown.
int thousand_mib_in_child(const two_mib_limit& cgroup, hugepage::backing expected,
                          bool disable_thp) {
  return run_in_child([&]() -> int {
    std::signal(SIGBUS, SIG_DFL);
    if (!cgroup.join()) return 2;
    if (disable_thp && ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) return 3;
    const auto one = [&](auto allocator, int base) -> int {
      const statistics s0 = hugepage::stats();
      unsigned char* p = nullptr;
      try {
        p = allocator.allocate(kThousand);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: threw: %s\n", e.what());
        return base + 1;
      }
      std::memset(p, 5, kThousand);  // SIGBUS here if a pool page was left unpopulated
      const statistics s1 = hugepage::stats();
      const backing_report r = hugepage::backing_of(p, kThousand);
      std::fprintf(stderr, "child: thp %zu, base %zu, hugetlb_2m %zu (%s)\n", r.thp, r.base,
                   r.hugetlb_2m, r.note.c_str());
      int code = 0;
      const bool thp = expected == hugepage::backing::thp;
      const std::size_t obtained =
          thp ? s1.obtained_thp - s0.obtained_thp : s1.obtained_base - s0.obtained_base;
      const std::uint64_t fallbacks = thp ? s1.fallbacks_to_thp - s0.fallbacks_to_thp
                                          : s1.fallbacks_to_base - s0.fallbacks_to_base;
      if (obtained != kThousand) code = base + 2;
      if (fallbacks != 1) code = base + 3;
      if (s1.obtained_hugetlb_2m != s0.obtained_hugetlb_2m) code = base + 4;
      if (s1.requested_hugetlb_1g - s0.requested_hugetlb_1g != kThousand) code = base + 5;
      if (r.hugetlb_2m + r.hugetlb_1g + r.not_resident + r.unmapped != 0) code = base + 6;
      if (thp && r.thp == 0 && code == 0) code = kNoThp;
      if (thp && r.thp != 0 && static_cast<double>(r.thp) < 0.99 * kThousand) code = base + 7;
      if (!thp && r.base != kThousand) code = base + 8;
      allocator.deallocate(p, kThousand);
      const statistics s2 = hugepage::stats();
      if (s2.obtained_thp != s0.obtained_thp || s2.obtained_base != s0.obtained_base ||
          s2.live_mappings != s0.live_mappings) {
        code = base + 9;
      }
      return code;
    };
    if (const int code = one(one_gib_allocator<unsigned char>(), 10)) return code;
    return one(one_gib_allocator<unsigned char, hugepage::fallback>(), 20);
  });
}

TEST(CascadeThousandMiB, OnThpWhenTheTwoMiBPoolIsEmpty) {
  const two_mib_limit cgroup(/*reservations=*/true);
  if (!cgroup.why_unusable().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.why_unusable());
  const pool_counts start = read_counts(page_size::huge_2m);
  const int code = thousand_mib_in_child(cgroup, hugepage::backing::thp, false);
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("THP got no huge pages here (memory fragmented?)");
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, start));
}

TEST(CascadeThousandMiB, OnThpWhenOnlyFaultsAreLimitedAndNeverSigbus) {
  const two_mib_limit cgroup(/*reservations=*/false);
  if (!cgroup.why_unusable().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.why_unusable());
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kThousand / kHuge);  // mmap itself must succeed
  const pool_counts start = read_counts(page_size::huge_2m);
  const int code = thousand_mib_in_child(cgroup, hugepage::backing::thp, false);
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("THP got no huge pages here (memory fragmented?)");
  EXPECT_EQ(code, 0) << "child check " << code << " failed (135: SIGBUS)";
  EXPECT_TRUE(pool_back(page_size::huge_2m, start));
}

TEST(CascadeThousandMiB, OnBasePagesWithThpDisabledCountedAndNothingThrown) {
  const two_mib_limit cgroup(/*reservations=*/true);
  if (!cgroup.why_unusable().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.why_unusable());
  const int code = thousand_mib_in_child(cgroup, hugepage::backing::base, true);
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

// ---- a block on two page sizes ----------------------------------------------------------------

TEST(CascadeComposite, TailFallsToThpAloneWhenTheTwoMiBPoolIsEmpty) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const two_mib_limit cgroup(/*reservations=*/true);
  if (!cgroup.why_unusable().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.why_unusable());
  const pool_counts start = read_counts(page_size::huge_1g);
  const int result = run_in_child([&]() -> int {
    std::signal(SIGBUS, SIG_DFL);
    if (!cgroup.join()) return 2;
    const std::size_t bytes = kGiB + kGiB / 2;
    const statistics s0 = hugepage::stats();
    one_gib_allocator<unsigned char> allocator;
    unsigned char* p = allocator.allocate(bytes);
    std::memset(p, 9, bytes);
    const statistics s1 = hugepage::stats();
    const backing_report head = hugepage::backing_of(p, kGiB);
    const backing_report tail = hugepage::backing_of(p + kGiB, bytes - kGiB);
    std::fprintf(stderr, "child: head 1g %zu; tail thp %zu, base %zu\n", head.hugetlb_1g, tail.thp,
                 tail.base);
    int code = 0;
    if (!hugepage::test::is_aligned(p, kGiB)) code = 10;
    if (head.hugetlb_1g != kGiB) code = 11;
    if (tail.hugetlb_2m + tail.hugetlb_1g + tail.not_resident + tail.unmapped != 0) code = 12;
    if (tail.thp == 0 && code == 0) code = kNoThp;
    if (s1.obtained_hugetlb_1g - s0.obtained_hugetlb_1g != kGiB) code = 13;
    if (s1.obtained_thp - s0.obtained_thp != kGiB / 2) code = 14;
    if (s1.fallbacks_to_thp - s0.fallbacks_to_thp != 1) code = 15;
    if (s1.requested_hugetlb_1g - s0.requested_hugetlb_1g != bytes) code = 16;
    allocator.deallocate(p, bytes);
    const statistics s2 = hugepage::stats();
    if (s2.obtained_hugetlb_1g != s0.obtained_hugetlb_1g || s2.obtained_thp != s0.obtained_thp ||
        s2.live_mappings != s0.live_mappings) {
      code = 17;
    }
    if (hugepage::test::own_hugetlb_mappings() != 0) code = 18;  // one munmap released both
    return code;
  });
  if (result == kNoThp) HUGEPAGE_SKIP_OR_FAIL("THP got no huge pages here (memory fragmented?)");
  EXPECT_EQ(result, 0) << "child check " << result << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_1g, start));
}

// Sets the hugetlb.1GB limits of `cgroup` to 0, so a child that joins it is refused 1 GiB pages;
// skips (fails under HUGEPAGE_REQUIRE) where that cannot be done. No such files where the kernel
// has no 1 GiB pages: a 1 GiB skip, not an environment failure.
#define HUGEPAGE_REFUSE_1G_PAGES_IN(cgroup)                                                        \
  do {                                                                                             \
    if (!(cgroup).error().empty()) HUGEPAGE_SKIP_OR_FAIL((cgroup).error());                        \
    if (!(cgroup).write("hugetlb.1GB.max", "0") || !(cgroup).write("hugetlb.1GB.rsvd.max", "0")) { \
      const std::string reason = "cannot limit 1 GiB pages in " + (cgroup).path() + ": " +         \
                                 std::strerror(errno) + " (" +                                     \
                                 hugepage::test::why_no_1g_pages(1) + ")";                         \
      if (hugepage::test::required_1g()) FAIL() << "HUGEPAGE_REQUIRE_1G=1, but: " << reason;       \
      GTEST_SKIP() << reason;                                                                      \
    }                                                                                              \
  } while (false)

TEST(CascadeComposite, FallbackPolicySendsRefusedGiBsToTwoMiBPagesNotBasePages) {
  // The 1 GiB pages are refused to this child (hugetlb.1GB limits of 0): the whole 1.5 GiB goes
  // to the 2 MiB pool where it has room, else THP, and says so in the statistics.
  hugepage::test::scratch_cgroup cgroup("hugetlb");
  HUGEPAGE_REFUSE_1G_PAGES_IN(cgroup);
  const pool_counts start = read_counts(page_size::huge_2m);
  const int result = run_in_child([&]() -> int {
    std::signal(SIGBUS, SIG_DFL);
    if (!cgroup.join()) return 2;
    const std::size_t bytes = kGiB + kGiB / 2;
    const statistics s0 = hugepage::stats();
    one_gib_allocator<unsigned char, hugepage::fallback> allocator;
    unsigned char* p = nullptr;
    try {
      p = allocator.allocate(bytes);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: threw: %s\n", e.what());
      return 3;
    }
    std::memset(p, 4, bytes);
    const statistics s1 = hugepage::stats();
    const backing_report r = hugepage::backing_of(p, bytes);
    std::fprintf(stderr, "child: hugetlb_2m %zu, thp %zu, base %zu, hugetlb_1g %zu\n", r.hugetlb_2m,
                 r.thp, r.base, r.hugetlb_1g);
    int code = 0;
    if (r.hugetlb_1g != 0) code = 10;
    if (r.not_resident + r.unmapped != 0) code = 11;
    if (r.huge_bytes() == r.hugetlb_2m && r.hugetlb_2m != bytes) code = 12;
    if (r.thp == 0 && r.hugetlb_2m == 0 && code == 0) code = kNoThp;
    if (s1.obtained_hugetlb_1g != s0.obtained_hugetlb_1g) code = 13;
    if (s1.obtained_hugetlb_2m + s1.obtained_thp - s0.obtained_hugetlb_2m - s0.obtained_thp !=
        bytes) {
      code = 14;
    }
    if (s1.obtained_hugetlb_2m - s0.obtained_hugetlb_2m != r.hugetlb_2m) code = 15;
    if (s1.requested_hugetlb_1g - s0.requested_hugetlb_1g != bytes) code = 16;
    // The head counts as a downgrade to 2 MiB pool pages or to THP; the tail, on THP, as one more.
    const bool head_on_pool = r.hugetlb_2m >= kGiB;
    if (s1.fallbacks_to_hugetlb_2m - s0.fallbacks_to_hugetlb_2m != (head_on_pool ? 1u : 0u)) {
      code = 17;
    }
    if ((s1.fallbacks_to_thp != s0.fallbacks_to_thp) != (r.thp != 0)) code = 18;
    allocator.deallocate(p, bytes);
    const statistics s2 = hugepage::stats();
    if (s2.obtained_hugetlb_2m != s0.obtained_hugetlb_2m || s2.obtained_thp != s0.obtained_thp ||
        s2.live_mappings != s0.live_mappings) {
      code = 19;
    }
    if (hugepage::test::own_hugetlb_mappings() != 0) code = 20;
    return code;
  });
  if (result == kNoThp) HUGEPAGE_SKIP_OR_FAIL("THP got no huge pages here (memory fragmented?)");
  EXPECT_EQ(result, 0) << "child check " << result << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, start));
}

// ---- alignment above 2 MiB ----------------------------------------------------------------------

// mmap aligns a hugetlb mapping only to its page size; the strategy places 2 MiB pool pages at any
// alignment, so an over-aligned block below 1 GiB still takes the pool, as the cascade says.
TEST(CascadeAlignment, BlockBelowOneGiBAlignedAboveTwoMiBTakesTheTwoMiBPool) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 8);
  const pool_counts start = read_counts(page_size::huge_2m);
  for (const hugepage::pool_policy policy : {hugepage::strict, hugepage::fallback}) {
    const strategy s = strategy::hugetlb(page_size::huge_1g, policy);
    for (const std::size_t alignment : {4 * kMiB, 64 * kMiB, kGiB}) {
      SCOPED_TRACE(alignment);
      const std::size_t bytes = 8 * kMiB;
      const statistics s0 = hugepage::stats();
      void* p = s.allocate(bytes, alignment);
      const statistics s1 = hugepage::stats();
      EXPECT_TRUE(hugepage::test::is_aligned(p, alignment)) << p;
      const backing_report r = hugepage::backing_of(p, bytes);
      EXPECT_EQ(r.hugetlb_2m, bytes) << r.note;
      EXPECT_EQ(s1.obtained_hugetlb_2m - s0.obtained_hugetlb_2m, bytes);
      EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp);
      EXPECT_EQ(s1.fallbacks_to_base, s0.fallbacks_to_base);
      s.deallocate(p, bytes, alignment);
      EXPECT_EQ(hugepage::stats().obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
    }
  }
  EXPECT_EQ(hugepage::test::own_hugetlb_mappings(), 0u);
  EXPECT_TRUE(pool_back(page_size::huge_2m, start));
}

// An arena over 1 GiB pages asks for 1 GiB-aligned pages. Where the 1 GiB pages are refused
// (hugetlb.1GB limits of 0 for this child), the fallback policy takes the 2 MiB pool for them.
TEST(CascadeAlignment, ArenaOverOneGiBFallbackTakesTheTwoMiBPoolWhenOneGiBPagesAreRefused) {
  hugepage::test::scratch_cgroup cgroup("hugetlb");
  HUGEPAGE_REFUSE_1G_PAGES_IN(cgroup);
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kGiB / kHuge);
  const pool_counts start = read_counts(page_size::huge_2m);
  const int result = run_in_child([&]() -> int {
    if (!cgroup.join()) return 2;
    const statistics s0 = hugepage::stats();
    int code = 0;
    {
      hugepage::unsynchronized_arena arena(
          strategy::hugetlb(page_size::huge_1g, hugepage::fallback));
      void* node = nullptr;
      try {
        node = arena.allocate(64, 8);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: threw: %s\n", e.what());
        return 3;
      }
      auto* page = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(node) &
                                                    ~std::uintptr_t{kGiB - 1});
      const statistics s1 = hugepage::stats();
      const backing_report r = hugepage::backing_of(page, kGiB);
      std::fprintf(stderr, "child: hugetlb_2m %zu, thp %zu, base %zu (%s)\n", r.hugetlb_2m, r.thp,
                   r.base, r.note.c_str());
      if (r.hugetlb_2m != kGiB) code = 10;
      if (s1.obtained_hugetlb_2m - s0.obtained_hugetlb_2m != kGiB) code = 11;
      if (s1.fallbacks_to_hugetlb_2m - s0.fallbacks_to_hugetlb_2m != 1) code = 12;
      if (s1.fallbacks_to_thp != s0.fallbacks_to_thp) code = 13;
      if (s1.obtained_thp != s0.obtained_thp) code = 14;
      arena.deallocate(node, 64, 8);
    }
    const statistics s2 = hugepage::stats();
    if (s2.obtained_hugetlb_2m != s0.obtained_hugetlb_2m || s2.live_mappings != s0.live_mappings) {
      code = 15;
    }
    if (hugepage::test::own_hugetlb_mappings() != 0) code = 16;
    return code;
  });
  EXPECT_EQ(result, 0) << "child check " << result << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, start));
}

// ---- the reservation of a block on two page sizes commits nothing -----------------------------

// Under vm.overcommit_memory=2 every private writable mapping counts against the commit limit.
// Here every such mmap the size of the block is refused (seccomp, in a child; smaller ones are
// left to the sanitizers' own allocators): a block whose parts the pools serve must still be
// mapped, since its reservation holds no memory.
TEST(CascadeComposite, ReservationCommitsNoMemory) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 32);
  const pool_counts start_1g = read_counts(page_size::huge_1g);
  const pool_counts start_2m = read_counts(page_size::huge_2m);
  const std::size_t bytes = kGiB + 64 * kMiB;
  ASSERT_EQ(strategy::hugetlb(page_size::huge_1g).layout_of(bytes).head, kGiB);
  const int result = run_in_child([&]() -> int {
    constexpr std::uint32_t kinds =
        MAP_PRIVATE | MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE | MAP_HUGETLB | MAP_FIXED;
    // A committed private anonymous mmap of 1 GiB to 2 GiB (low word of the length): the block's
    // size, plus what an aligned mapping adds to it.
    if (!hugepage::test::fail_syscall_when_all(
            __NR_mmap, ENOMEM,
            {{3, kinds, MAP_PRIVATE | MAP_ANONYMOUS}, {1, 0xc0000000u, 0x40000000u}})) {
      return 2;
    }
    std::error_code ec;
    void* committed = hugepage::os::map_aligned(bytes, kHuge, ec);
    if (committed != nullptr || ec != std::errc::not_enough_memory) return 3;  // the filter works
    const strategy s = strategy::hugetlb(page_size::huge_1g);
    unsigned char* p = nullptr;
    try {
      p = static_cast<unsigned char*>(s.allocate(bytes, 1));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: threw: %s\n", e.what());
      return 4;
    }
    std::memset(p, 7, bytes);
    const backing_report head = hugepage::backing_of(p, kGiB);
    const backing_report tail = hugepage::backing_of(p + kGiB, bytes - kGiB);
    int code = 0;
    if (head.hugetlb_1g != kGiB) code = 10;
    if (tail.hugetlb_2m != bytes - kGiB) code = 11;
    s.deallocate(p, bytes, 1);
    if (hugepage::test::own_hugetlb_mappings() != 0) code = 12;
    return code;
  });
  EXPECT_EQ(result, 0) << "child check " << result << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_1g, start_1g));
  EXPECT_TRUE(pool_back(page_size::huge_2m, start_2m));
}

}  // namespace
