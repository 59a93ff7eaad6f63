// cgroup_test.cpp - cgroup.hpp's readers, and the allocators under real cgroup limits: hugetlb
// limits charged at fault time (hugetlb.2MB.max) and at mmap (.rsvd.max), and memory limits.
//
// Each limited case runs in a forked child that joins a cgroup made for the test, so the rest of
// the test process and the shared pools are untouched. A child reports a distinct exit code per
// failed check; a signal (SIGBUS, an OOM kill) shows as 128 + signal.
#include "hugepage/cgroup.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <typeinfo>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/stats.hpp"
#include "support.hpp"

namespace {

using hugepage::page_size;
using hugepage::test::pool_back;
using hugepage::test::pool_counts;
using hugepage::test::read_counts;
using hugepage::test::run_in_child;
using hugepage::test::scratch_cgroup;

using hugepage::test::kHuge;
using hugepage::test::kMiB;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// Writes every byte of [p, p + n) and reads it back.
bool write_every_byte(char* p, std::size_t n, char seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<char>(seed + i);
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<char>(seed + i)) return false;
  }
  return true;
}

// In a child: let SIGBUS kill the process instead of a sanitizer's report.
void default_fault_signals() {
  std::signal(SIGSEGV, SIG_DFL);
  std::signal(SIGBUS, SIG_DFL);
}

// ---- finding the files ------------------------------------------------------------------------

constexpr const char* kHybridCgroup =
    "9:name=systemd:/\n4:memory:/app/worker\n1:cpu:/\n0::/app.slice/worker.service\n";
constexpr const char* kHybridMounts =
    "25 30 0:22 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n"
    "31 25 0:27 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory\n"
    "32 25 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "40 25 0:35 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(CgroupDirectories, HybridTakesMemoryFromV1AndHugetlbFromV2) {
  using hugepage::detail::cgroup_directories;
  EXPECT_EQ(cgroup_directories("memory", kHybridCgroup, kHybridMounts),
            (std::vector<std::string>{"/sys/fs/cgroup/memory/app/worker",
                                      "/sys/fs/cgroup/memory/app", "/sys/fs/cgroup/memory"}));
  EXPECT_EQ(
      cgroup_directories("hugetlb", kHybridCgroup, kHybridMounts),
      (std::vector<std::string>{"/sys/fs/cgroup/unified/app.slice/worker.service",
                                "/sys/fs/cgroup/unified/app.slice", "/sys/fs/cgroup/unified"}));
}

TEST(CgroupDirectories, ContainerViewStopsAtTheNamespaceRoot) {
  // A container with its own cgroup namespace sees its cgroup as "/", mounted at /sys/fs/cgroup.
  EXPECT_EQ(hugepage::detail::cgroup_directories(
                "hugetlb", "0::/\n", "50 40 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"),
            (std::vector<std::string>{"/sys/fs/cgroup"}));
}

TEST(CgroupDirectories, MountOfASubtreeAndEscapedMountPoint) {
  const char* mounts = "60 40 0:30 /app.slice /mnt/my\\040cg rw - cgroup2 none rw\n";
  EXPECT_EQ(hugepage::detail::cgroup_directories("hugetlb", "0::/app.slice/web\n", mounts),
            (std::vector<std::string>{"/mnt/my cg/web", "/mnt/my cg"}));
  // A cgroup outside the mounted subtree cannot be read through it.
  EXPECT_TRUE(
      hugepage::detail::cgroup_directories("hugetlb", "0::/system.slice/db\n", mounts).empty());
  EXPECT_TRUE(
      hugepage::detail::cgroup_directories("hugetlb", "0::/app.slicex/db\n", mounts).empty());
}

TEST(CgroupDirectories, NothingMountedIsUnreadable) {
  EXPECT_TRUE(hugepage::detail::cgroup_directories("hugetlb", "0::/a\n", "").empty());
  EXPECT_TRUE(hugepage::detail::cgroup_directories("memory", "", kHybridMounts).empty());
  EXPECT_TRUE(hugepage::detail::cgroup_directories("memory", "garbage\n::\n", "- - -\n").empty());
}

TEST(CgroupLimit, HeadroomCountsReclaimableCacheAndNeverWraps) {
  hugepage::cgroup_limit l{"memory.max", 100, 80, 30};
  EXPECT_EQ(l.headroom(), 50u);
  l.usage = 150;
  l.reclaimable = 20;
  EXPECT_EQ(l.headroom(), 0u);
  l.reclaimable = 200;
  EXPECT_EQ(l.headroom(), 100u);
}

TEST(CgroupLimit, HugetlbSizeNames) {
  EXPECT_EQ(hugepage::detail::hugetlb_cgroup_size_name(2 * kMiB), "2MB");
  EXPECT_EQ(hugepage::detail::hugetlb_cgroup_size_name(std::size_t{1} << 30), "1GB");
  EXPECT_EQ(hugepage::detail::hugetlb_cgroup_size_name(64 * 1024), "64KB");
  EXPECT_EQ(hugepage::detail::hugetlb_cgroup_size_name(32 * kMiB), "32MB");
}

// ---- hugetlb limits ---------------------------------------------------------------------------

// A scratch hugetlb cgroup, or the reason to skip.
#define HUGETLB_CGROUP_OR_SKIP(name)                                             \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a hugetlb cgroup"; \
  const scratch_cgroup name("hugetlb");                                          \
  if (!(name).error().empty()) HUGEPAGE_SKIP_OR_FAIL((name).error())

constexpr std::size_t kPagesAsked = 4;
constexpr std::size_t kPagesAllowed = 2;

// hugetlb.2MB.max alone: the charge comes at fault time. Before the library populated such blocks,
// mmap succeeded and the first write past the limit raised SIGBUS.
TEST(HugetlbFaultLimit, StrictThrowsNamingMaxAndNeverSignals) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kPagesAsked);
  HUGETLB_CGROUP_OR_SKIP(cgroup);
  ASSERT_TRUE(cgroup.write("hugetlb.2MB.max", std::to_string(kPagesAllowed * kHuge)));
  const pool_counts before = read_counts(page_size::huge_2m);
  const int code = run_in_child([&cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    hugepage::huge_page_allocator<char> allocator;
    try {
      char* p = allocator.allocate(kPagesAsked * kHuge);
      write_every_byte(p, kPagesAsked * kHuge, 1);  // SIGBUS here without the fix
      allocator.deallocate(p, kPagesAsked * kHuge);
      return 10;
    } catch (const hugepage::hugetlb_limit_exceeded& e) {
      if (!ends_with(e.file(), "/hugetlb.2MB.max")) return 11;
      if (!contains(e.what(), e.file() + " = 4 MiB")) return 12;
      if (e.pages_requested() != kPagesAsked || e.pages_available() != kPagesAllowed) return 13;
      if (e.limit_bytes() != kPagesAllowed * kHuge || e.usage_bytes() != 0) return 14;
      if (e.code() != std::errc::bad_address) return 15;
    } catch (...) {
      return 16;
    }
    if (hugepage::stats().live_mappings != 0) return 17;
    // Within the limit: pool pages, every byte writable.
    char* p = allocator.allocate(kPagesAllowed * kHuge);
    if (!write_every_byte(p, kPagesAllowed * kHuge, 2)) return 18;
    allocator.deallocate(p, kPagesAllowed * kHuge);
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

TEST(HugetlbFaultLimit, FallbackServesThpAndCountsItWithAndWithoutPrefault) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kPagesAsked);
  HUGETLB_CGROUP_OR_SKIP(cgroup);
  ASSERT_TRUE(cgroup.write("hugetlb.2MB.max", std::to_string(kPagesAllowed * kHuge)));
  const pool_counts before = read_counts(page_size::huge_2m);
  const int code = run_in_child([&cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    const auto check = [](auto allocator, int base) -> int {
      const hugepage::statistics s0 = hugepage::stats();
      char* p = allocator.allocate(kPagesAsked * kHuge);
      const hugepage::statistics s1 = hugepage::stats();
      if (s1.fallbacks_to_thp != s0.fallbacks_to_thp + 1) return base + 1;
      if (s1.obtained_thp != s0.obtained_thp + kPagesAsked * kHuge) return base + 2;
      if (s1.obtained_hugetlb_2m != s0.obtained_hugetlb_2m) return base + 3;
      if (!write_every_byte(p, kPagesAsked * kHuge, 3)) return base + 4;
      allocator.deallocate(p, kPagesAsked * kHuge);
      if (hugepage::stats().obtained_thp != s0.obtained_thp) return base + 5;
      return 0;
    };
    using fallback = hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::fallback>;
    using fallback_prefault =
        hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::fallback,
                                      hugepage::prefault_options>;
    if (const int failed = check(fallback(), 10)) return failed;
    return check(fallback_prefault(), 20);
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

TEST(HugetlbReservationLimit, StrictThrowsNamingRsvdMax) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kPagesAsked);
  HUGETLB_CGROUP_OR_SKIP(cgroup);
  ASSERT_TRUE(cgroup.write("hugetlb.2MB.rsvd.max", std::to_string(kPagesAllowed * kHuge)));
  const pool_counts before = read_counts(page_size::huge_2m);
  const int code = run_in_child([&cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    hugepage::huge_page_allocator<char> allocator;
    try {
      char* p = allocator.allocate(kPagesAsked * kHuge);
      allocator.deallocate(p, kPagesAsked * kHuge);
      return 10;
    } catch (const hugepage::hugetlb_limit_exceeded& e) {
      if (!ends_with(e.file(), "/hugetlb.2MB.rsvd.max")) return 11;
      if (!contains(e.what(), "hugetlb.2MB.rsvd.max = 4 MiB")) return 12;
      if (e.pages_requested() != kPagesAsked || e.pages_available() != kPagesAllowed) return 13;
      if (e.code() != std::errc::not_enough_memory) return 14;
    } catch (...) {
      return 15;
    }
    char* p = allocator.allocate(kPagesAllowed * kHuge);
    if (!write_every_byte(p, kPagesAllowed * kHuge, 4)) return 16;
    allocator.deallocate(p, kPagesAllowed * kHuge);
    // The fallback policy serves the large request from THP instead.
    hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::fallback> lenient;
    char* q = lenient.allocate(kPagesAsked * kHuge);
    if (!write_every_byte(q, kPagesAsked * kHuge, 5)) return 17;
    if (hugepage::stats().fallbacks_to_thp != 1) return 18;
    lenient.deallocate(q, kPagesAsked * kHuge);
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

#ifdef HUGEPAGE_EXAMPLE_HUGETLB
// examples/hugetlb.cpp asks for 16 pages strictly and 16 with fallback; under a limit of 2 faulted
// pages it must print the refusal and carry on, not die of SIGBUS.
TEST(HugetlbFaultLimit, HugetlbExampleRunsWithoutASignal) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 16);
  HUGETLB_CGROUP_OR_SKIP(cgroup);
  ASSERT_TRUE(cgroup.write("hugetlb.2MB.max", std::to_string(kPagesAllowed * kHuge)));
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const int code = run_in_child([&]() -> int {
    if (!cgroup.join()) return 2;
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::close(pipe_fds[0]);
    ::execl(HUGEPAGE_EXAMPLE_HUGETLB, HUGEPAGE_EXAMPLE_HUGETLB, static_cast<char*>(nullptr));
    return 3;
  });
  ::close(pipe_fds[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) output.append(buffer, n);
  ::close(pipe_fds[0]);
  EXPECT_EQ(code, 0) << output;
  EXPECT_TRUE(contains(output, "hugetlb.2MB.max")) << output;
  EXPECT_TRUE(contains(output, "fallbacks to THP so far: 1")) << output;
}
#endif

// ---- memory limits ----------------------------------------------------------------------------

// Sets the memory limit the cgroup's hierarchy uses: memory.max (v2) or memory.limit_in_bytes.
bool limit_memory(const scratch_cgroup& cgroup, std::size_t bytes) {
  return cgroup.write("memory.max", std::to_string(bytes)) ||
         cgroup.write("memory.limit_in_bytes", std::to_string(bytes));
}

// Populating past memory.max gets the process OOM-killed; the library refuses first.
TEST(MemoryLimit, PopulatingPastTheHeadroomThrowsAndTheChildLivesOn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a memory cgroup";
  const scratch_cgroup cgroup("memory");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(limit_memory(cgroup, 96 * kMiB)) << std::strerror(errno);
  const int code = run_in_child([&cgroup]() -> int {
    if (!cgroup.join()) return 2;
    const hugepage::cgroup_limit_search search = hugepage::memory_limit();
    if (!search.readable || !search.tightest) return 3;
    if (search.tightest->limit != 96 * kMiB) return 4;
    if (search.tightest->file.rfind(cgroup.path(), 0) != 0) return 5;
    const auto refuses = [](auto allocator, int base) -> int {
      try {
        char* p = allocator.allocate(256 * kMiB);
        allocator.deallocate(p, 256 * kMiB);
        return base + 1;
      } catch (const hugepage::memory_limit_exceeded& e) {
        if (e.limit_bytes() != 96 * kMiB || e.headroom_bytes() > 96 * kMiB) return base + 2;
        if (!contains(e.what(), e.file() + " = 96 MiB")) return base + 3;
        if (!contains(e.what(), "OOM-kill")) return base + 4;
      }
      if (hugepage::stats().live_mappings != 0) return base + 5;
      // Below the headroom the same allocator works, populated.
      char* p = allocator.allocate(16 * kMiB);
      if (!write_every_byte(p, 16 * kMiB, 6)) return base + 6;
      allocator.deallocate(p, 16 * kMiB);
      return 0;
    };
    using prefaulted = hugepage::thp_allocator<char, hugepage::prefault_options>;
    if (const int failed = refuses(prefaulted(), 10)) return failed;
    return refuses(hugepage::collapse_allocator<char>(), 20);
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed (137: OOM-killed)";
}

}  // namespace
