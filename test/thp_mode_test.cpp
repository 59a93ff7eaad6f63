// thp_mode_test.cpp - the per-size THP switch (Linux 6.8+) together with the top-level one, set
// for real: what the allocators count, what the kernel backs, whether collapse is attempted.
// Writes /sys/kernel/mm/transparent_hugepage/{enabled,hugepages-<PMD kB>kB/enabled} (root) and
// puts both back when each test ends (test::thp_switches).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "hugepage/hugepage.hpp"
#include "support.hpp"

namespace {

using hugepage::backing_report;
using hugepage::statistics;
using hugepage::thp_mode;

// Four huge pages: 8 MiB, or 128 MiB where the PMD is 32 MiB (arm64 with 16 KiB pages).
const std::size_t kBytes = 4 * hugepage::thp_page_bytes();

struct combination {
  const char* top;
  const char* per_size;
  thp_mode effective;
};

std::ostream& operator<<(std::ostream& out, const combination& c) {
  return out << "enabled=" << c.top << ", per-size=" << c.per_size;
}

class ThpSwitches : public ::testing::TestWithParam<combination> {
 protected:
  void SetUp() override {
    const std::string& why = switches_.why_unusable();
    if (why.empty()) {
      ASSERT_TRUE(switches_.set(GetParam().top, GetParam().per_size))
          << "cannot write the THP switches: " << std::strerror(errno);
      return;
    }
    if (::geteuid() != 0 && !switches_.per_size_absent()) GTEST_SKIP() << why;
    HUGEPAGE_SKIP_OR_FAIL(why);
  }
  hugepage::test::thp_switches switches_;
};

TEST_P(ThpSwitches, ReaderAndSystemStateSayTheEffectiveMode) {
  EXPECT_EQ(hugepage::read_thp_mode(), GetParam().effective);
  const hugepage::system_state state = hugepage::read_system_state(/*probe=*/false);
  EXPECT_EQ(state.thp.enabled, GetParam().top);
  EXPECT_EQ(state.thp.pmd_enabled, GetParam().per_size);
  EXPECT_EQ(state.thp.pmd_mode, GetParam().effective);
}

TEST_P(ThpSwitches, ThpAllocatorCountsWhatTheKernelBacks) {
  const bool huge = GetParam().effective != thp_mode::never;
  const statistics s0 = hugepage::stats();
  {
    std::vector<unsigned char, hugepage::thp_allocator<unsigned char>> v(kBytes, 1);
    const statistics s1 = hugepage::stats();
    const backing_report r = hugepage::backing_of(v.data(), kBytes);
    EXPECT_EQ(s1.obtained_thp - s0.obtained_thp, huge ? kBytes : 0u);
    EXPECT_EQ(s1.obtained_base - s0.obtained_base, huge ? 0u : kBytes);
    if (huge) {
      if (r.thp == 0) HUGEPAGE_SKIP_OR_FAIL("THP got no huge pages here (memory fragmented?)");
      EXPECT_EQ(r.thp, kBytes) << r.note;
    } else {
      EXPECT_EQ(r.thp, 0u) << r.note;
      EXPECT_EQ(r.base, kBytes) << r.note;
    }
  }
  const statistics s2 = hugepage::stats();
  EXPECT_EQ(s2.obtained_thp, s0.obtained_thp);
  EXPECT_EQ(s2.obtained_base, s0.obtained_base);
}

TEST_P(ThpSwitches, CollapseAllocatorCallsMadvCollapseWhereTheModeAllowsIt) {
  const bool huge = GetParam().effective != thp_mode::never;
  const statistics s0 = hugepage::stats();
  {
    std::vector<unsigned char, hugepage::collapse_allocator<unsigned char>> v(kBytes, 1);
    const statistics s1 = hugepage::stats();
    const backing_report r = hugepage::backing_of(v.data(), kBytes);
    EXPECT_EQ(s1.collapse_attempts - s0.collapse_attempts, huge ? 1u : 0u);
    EXPECT_EQ(s1.collapse_failures, s0.collapse_failures);
    EXPECT_EQ(s1.obtained_thp - s0.obtained_thp, huge ? kBytes : 0u);
    EXPECT_EQ(s1.obtained_base - s0.obtained_base, huge ? 0u : kBytes);
    EXPECT_EQ(r.thp, huge ? kBytes : 0u) << r.note;
  }
}

// A hugetlb fallback with every hugetlb mmap refused (seccomp, in a child): counted as a fallback
// to THP where the mode gives huge pages, else to base pages.
TEST_P(ThpSwitches, HugetlbFallbackIsCountedUnderWhatTheKernelBacks) {
  const bool huge = GetParam().effective != thp_mode::never;
  const int code = hugepage::test::run_in_child([&]() -> int {
    if (!hugepage::test::fail_syscall_when(__NR_mmap, ENOMEM, 3, MAP_HUGETLB, MAP_HUGETLB)) {
      return 2;
    }
    const auto s = hugepage::strategy::hugetlb(hugepage::page_size::huge_2m, hugepage::fallback);
    const statistics s0 = hugepage::stats();
    void* p = s.allocate(kBytes, 64);
    std::memset(p, 1, kBytes);
    const statistics s1 = hugepage::stats();
    const backing_report r = hugepage::backing_of(p, kBytes);
    int result = 0;
    if (s1.fallbacks_to_thp - s0.fallbacks_to_thp != (huge ? 1u : 0u)) result = 10;
    if (s1.fallbacks_to_base - s0.fallbacks_to_base != (huge ? 0u : 1u)) result = 11;
    if (s1.obtained_hugetlb_2m != s0.obtained_hugetlb_2m) result = 12;
    if (!huge && r.thp != 0) result = 13;
    if (huge && r.thp != kBytes) result = 14;
    s.deallocate(p, kBytes, 64);
    return result;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

INSTANTIATE_TEST_SUITE_P(Combinations, ThpSwitches,
                         ::testing::Values(combination{"madvise", "never", thp_mode::never},
                                           combination{"never", "madvise", thp_mode::madvise},
                                           combination{"madvise", "inherit", thp_mode::madvise},
                                           combination{"never", "inherit", thp_mode::never}),
                         [](const ::testing::TestParamInfo<combination>& param) {
                           return std::string("enabled_") + param.param.top + "_per_size_" +
                                  param.param.per_size;
                         });

}  // namespace
