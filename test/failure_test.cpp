// failure_test.cpp - the failure modes a production allocator meets, induced for real: a short
// pool, a seccomp filter, prctl, setrlimit, a hugetlb cgroup limit, fork, a partial munmap.
//
// Failures that would disturb the rest of the process (seccomp, prctl, rlimits, cgroups) run in a
// forked child (test::run_in_child), which returns a distinct code for each check that failed.
// The hugetlb pools are shared with other processes: nothing here drains or resizes them; where a
// test needs "the pool is short for this process" it uses a hugetlb cgroup limit instead.
#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/strategy.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::allocation_error;
using hugepage::page_size;
using hugepage::pool_exhausted;
using hugepage::test::pool_back;
using hugepage::test::pool_counts;
using hugepage::test::read_counts;
using hugepage::test::run_in_child;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kHuge = 2 * kMiB;

// While set, ::operator new throws std::bad_alloc (the replacement below): allocation failure at
// one chosen moment, in this thread's code under test.
std::atomic<bool> operator_new_fails{false};

// Lines of /proc/self/maps: the mappings of this process.
// Mappings advised MADV_HUGEPAGE (VmFlags "hg"): the library's THP blocks, and none of the
// sanitizers' own, which map memory of their own at any allocation.
std::size_t advised_mapping_count() {
  std::error_code ec;
  const std::string smaps = hugepage::detail::read_file("/proc/self/smaps", ec);
  std::size_t count = 0;
  for (std::size_t at = smaps.find("VmFlags:"); at != std::string::npos;
       at = smaps.find("VmFlags:", at + 1)) {
    const std::string flags = smaps.substr(at, smaps.find('\n', at) - at) + " ";
    if (flags.find(" hg ") != std::string::npos) ++count;
  }
  return count;
}

std::size_t base_page() { return hugepage::os::base_page_size(); }

// ---- helpers ----------------------------------------------------------------------------------

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Writes a pattern that depends on the address into every 8-byte word of [p, p + length).
void fill(void* p, std::size_t length, std::uint64_t seed) {
  auto* words = static_cast<std::uint64_t*>(p);
  for (std::size_t i = 0; i < length / sizeof(std::uint64_t); ++i) words[i] = seed ^ (i * 0x9e37);
}

// Whether the words of [p + from, p + to) still hold fill()'s pattern for the whole block at p.
bool holds(const void* p, std::size_t from, std::size_t to, std::uint64_t seed) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  for (std::size_t i = from / sizeof(std::uint64_t); i < to / sizeof(std::uint64_t); ++i) {
    if (words[i] != (seed ^ (i * 0x9e37))) return false;
  }
  return true;
}

// In a child: let SIGSEGV and SIGBUS kill the process instead of a sanitizer's report.
void default_fault_signals() {
  std::signal(SIGSEGV, SIG_DFL);
  std::signal(SIGBUS, SIG_DFL);
}

// A cgroup v2 directory with the hugetlb controller: a short "pool" for one child process.
class hugetlb_cgroup : public hugepage::test::scratch_cgroup {
 public:
  hugetlb_cgroup() : scratch_cgroup("hugetlb") {}
  /// Limits the 2 MiB pages this cgroup may fault and reserve.
  bool limit_2m(std::size_t pages) const {
    const std::string bytes = std::to_string(pages * kHuge);
    return write("hugetlb.2MB.max", bytes) && write("hugetlb.2MB.rsvd.max", bytes);
  }
};

// ---- pool shortage ----------------------------------------------------------------------------

// More pages than the pool could ever give, whatever other processes hold.
std::uint64_t pages_beyond_pool(const hugepage::hugetlb_pool& pool) {
  return pool.total.value_or(0) + pool.overcommit.value_or(0) + 1;
}

TEST(PoolShortage, StrictThrowsPoolExhaustedNamingTheFix) {
  const auto pool = hugepage::read_pool(page_size::huge_2m);
  if (!pool || !pool->total) HUGEPAGE_SKIP_OR_FAIL("no 2 MiB hugetlb pool on this kernel");
  const std::uint64_t pages = pages_beyond_pool(*pool);
  const std::uint64_t total = *pool->total;

  for (int attempt = 0;; ++attempt) {
    const pool_counts before = read_counts(page_size::huge_2m);
    const std::uint64_t available_before = hugepage::test::pool_available(page_size::huge_2m);
    const hugepage::statistics stats_before = hugepage::stats();
    hugepage::huge_page_allocator<char> allocator;
    bool thrown = false;
    try {
      char* p = allocator.allocate(pages * kHuge);
      allocator.deallocate(p, pages * kHuge);
    } catch (const pool_exhausted& e) {
      thrown = true;
      EXPECT_EQ(typeid(e), typeid(pool_exhausted)) << "exactly pool_exhausted";
      EXPECT_NE(dynamic_cast<const std::bad_alloc*>(&e), nullptr);
      EXPECT_EQ(e.size(), page_size::huge_2m);
      EXPECT_EQ(e.pages_requested(), pages);
      EXPECT_LE(e.pages_available(), total);
      EXPECT_EQ(e.code(), std::errc::not_enough_memory) << e.code().message();
      const std::string what = e.what();
      EXPECT_TRUE(contains(what, "asked for " + std::to_string(pages) + " x 2 MiB")) << what;
      EXPECT_TRUE(contains(what, std::to_string(e.pages_available()) + " available")) << what;
      // With N pages in the pool, `available` grows by N - total and covers the request.
      const std::uint64_t target = total + pages - e.pages_available();
      EXPECT_TRUE(contains(what, "sysctl -w vm.nr_hugepages=" + std::to_string(target))) << what;
      const std::uint64_t available_after = hugepage::test::pool_available(page_size::huge_2m);
      if (available_before != available_after && attempt < 5) continue;  // the pool moved
      EXPECT_EQ(e.pages_available(), available_before) << what;
    }
    EXPECT_TRUE(thrown) << "asked for " << pages << " pages of a pool of " << total;
    const hugepage::statistics stats_after = hugepage::stats();
    EXPECT_EQ(stats_after.live_mappings, stats_before.live_mappings);
    EXPECT_EQ(stats_after.requested_hugetlb_2m, stats_before.requested_hugetlb_2m);
    EXPECT_EQ(stats_after.fallbacks_to_thp, stats_before.fallbacks_to_thp);
    EXPECT_TRUE(pool_back(page_size::huge_2m, before));
    break;
  }
}

TEST(PoolShortage, StrictIsAlsoABadAlloc) {
  const auto pool = hugepage::read_pool(page_size::huge_2m);
  if (!pool || !pool->total) HUGEPAGE_SKIP_OR_FAIL("no 2 MiB hugetlb pool on this kernel");
  hugepage::huge_page_allocator<std::uint64_t> allocator;
  const std::size_t n = pages_beyond_pool(*pool) * kHuge / sizeof(std::uint64_t);
  EXPECT_THROW((void)allocator.allocate(n), std::bad_alloc);
  EXPECT_THROW((void)allocator.allocate(n), allocation_error);
}

TEST(PoolShortage, Strict1GNamesTheSysfsFile) {
  const auto pool = hugepage::read_pool(page_size::huge_1g);
  if (!pool || !pool->total) {  // the pool need not have pages, only exist
    const std::string reason = hugepage::test::why_no_1g_pages(1);
    if (hugepage::test::required_1g()) FAIL() << "HUGEPAGE_REQUIRE_1G=1, but: " << reason;
    GTEST_SKIP() << reason;
  }
  const std::uint64_t pages = pages_beyond_pool(*pool);
  const std::uint64_t total = *pool->total;
  const pool_counts before = read_counts(page_size::huge_1g);
  const hugepage::statistics stats_before = hugepage::stats();
  hugepage::huge_page_allocator<char, page_size::huge_1g> allocator;
  bool thrown = false;
  try {
    char* p = allocator.allocate(pages * kGiB);
    allocator.deallocate(p, pages * kGiB);
  } catch (const pool_exhausted& e) {
    thrown = true;
    EXPECT_EQ(typeid(e), typeid(pool_exhausted));
    EXPECT_EQ(e.size(), page_size::huge_1g);
    EXPECT_EQ(e.pages_requested(), pages);
    EXPECT_LE(e.pages_available(), total);
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "asked for " + std::to_string(pages) + " x 1 GiB")) << what;
    EXPECT_TRUE(contains(what, std::to_string(e.pages_available()) + " available")) << what;
    const std::uint64_t target = total + pages - e.pages_available();
    EXPECT_TRUE(contains(what, "echo " + std::to_string(target) +
                                   " > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"))
        << what;
    EXPECT_FALSE(contains(what, "sysctl")) << "vm.nr_hugepages sizes only the default pool";
  }
  EXPECT_TRUE(thrown);
  EXPECT_EQ(hugepage::stats().live_mappings, stats_before.live_mappings);
  EXPECT_EQ(hugepage::stats().requested_hugetlb_1g, stats_before.requested_hugetlb_1g);
  EXPECT_TRUE(pool_back(page_size::huge_1g, before));
}

TEST(PoolShortage, FallbackServesFromThpAndCountsIt) {
  const auto pool = hugepage::read_pool(page_size::huge_2m);
  if (!pool || !pool->total) HUGEPAGE_SKIP_OR_FAIL("no 2 MiB hugetlb pool on this kernel");
  const std::size_t bytes = pages_beyond_pool(*pool) * kHuge;
  const pool_counts before = read_counts(page_size::huge_2m);
  const hugepage::statistics s0 = hugepage::stats();

  using fallback_allocator =
      hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::fallback>;
  fallback_allocator allocator;
  char* p = nullptr;
  ASSERT_NO_THROW(p = allocator.allocate(bytes));
  ASSERT_NE(p, nullptr);
  const hugepage::statistics s1 = hugepage::stats();
  EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp + 1);
  EXPECT_EQ(s1.fallbacks_to_base, s0.fallbacks_to_base);
  EXPECT_EQ(s1.obtained_thp, s0.obtained_thp + bytes);
  EXPECT_EQ(s1.obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
  EXPECT_EQ(s1.requested_hugetlb_2m, s0.requested_hugetlb_2m + bytes);
  EXPECT_EQ(s1.live_mappings, s0.live_mappings + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kHuge, 0u);

  // Touch the first 8 MiB only: the rest of the 1.2 GiB costs nothing.
  const std::size_t touched = 8 * kMiB;
  fill(p, touched, 42);
  EXPECT_TRUE(holds(p, 0, touched, 42));
  const hugepage::backing_report r = hugepage::backing_of(p, touched);
  EXPECT_EQ(r.hugetlb_2m + r.hugetlb_1g, 0u) << "served from THP, not the pool";
  EXPECT_EQ(r.not_resident + r.unmapped, 0u);
  if (r.thp == 0) {
    allocator.deallocate(p, bytes);
    HUGEPAGE_SKIP_OR_FAIL("the THP fallback got no huge pages (source " +
                          std::string(hugepage::name_of(r.source)) + ")");
  }
  allocator.deallocate(p, bytes);

  const hugepage::statistics s2 = hugepage::stats();
  EXPECT_EQ(s2.obtained_thp, s0.obtained_thp);
  EXPECT_EQ(s2.requested_hugetlb_2m, s0.requested_hugetlb_2m);
  EXPECT_EQ(s2.live_mappings, s0.live_mappings);
  EXPECT_EQ(s2.fallbacks_to_thp, s0.fallbacks_to_thp + 1) << "an event count, not a level";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// ---- the pre-fault refused: a seccomp filter -------------------------------------------------

// MADV_POPULATE_WRITE refused with EPERM (a seccomp filter) while the pool has every page: the
// strict allocator throws allocation_error that says the call was refused, never a shortage, and
// gives every page back.
TEST(PrefaultRefused, IsNotBlamedOnThePool) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 8);
  const auto before = hugepage::test::read_counts(page_size::huge_2m);
  const int code = hugepage::test::run_in_child([] {
    if (!hugepage::test::fail_syscall(__NR_madvise, EPERM, MADV_POPULATE_WRITE)) return 2;
    hugepage::huge_page_allocator<char> allocator;
    try {
      (void)allocator.allocate(8 * kMiB);
      return 3;
    } catch (const hugepage::pool_exhausted& e) {
      std::fprintf(stderr, "child: blamed on the pool: %s\n", e.what());
      return 4;
    } catch (const hugepage::allocation_error& e) {
      const std::string what = e.what();
      const std::string expected =
          "hugepage: faulting in 4 hugetlb pages of 2 MiB (8 MiB) failed: " +
          std::string(std::strerror(EPERM)) +
          ": the kernel refused the pre-fault itself, not for want of pages";
      if (what != expected || e.code() != std::errc::operation_not_permitted) {
        std::fprintf(stderr, "child: %s\n", what.c_str());
        return 5;
      }
    }
    return hugepage::stats().live_mappings == 0 ? 0 : 6;
  });
  EXPECT_EQ(code, 0) << "see the child's output above";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// ---- MADV_COLLAPSE unavailable: a seccomp filter -----------------------------------------------

// The body of the two seccomp tests; runs in a child. `permanent`: EINVAL (no further attempts)
// versus a transient errno (every allocation tries again).
int collapse_blocked_child(std::uint32_t error, bool permanent) {
  if (!hugepage::test::fail_syscall(__NR_madvise, error, MADV_COLLAPSE)) return 2;
  // The filter works: the probe sees what an old kernel (or a busy one) would answer.
  const hugepage::collapse_support probe = hugepage::probe_collapse();
  if (probe != (permanent ? hugepage::collapse_support::unsupported
                          : hugepage::collapse_support::transient)) {
    return 3;
  }
  const hugepage::statistics s0 = hugepage::stats();
  if (s0.collapse_unsupported) return 4;  // inherited from the parent: the test cannot run

  const std::size_t bytes = 8 * kMiB;
  hugepage::collapse_allocator<char> allocator;
  char* p = nullptr;
  try {
    p = allocator.allocate(bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child: collapse allocation threw: %s\n", e.what());
    return 10;
  }
  fill(p, bytes, 7);
  if (!holds(p, 0, bytes, 7)) return 11;
  const hugepage::statistics s1 = hugepage::stats();
  if (s1.collapse_attempts != s0.collapse_attempts + 1) return 12;
  if (s1.collapse_failures != s0.collapse_failures + 1) return 13;
  if (s1.collapse_unsupported != permanent) return 14;
  if (s1.prefaulted_bytes < s0.prefaulted_bytes + bytes) return 15;
  // MADV_HUGEPAGE + populate fault huge pages at once: the coverage stays high without collapse.
  const hugepage::backing_report r = hugepage::backing_of(p, bytes);
  std::fprintf(stderr, "child: coverage %.2f (source %s)\n", r.huge_fraction(),
               hugepage::name_of(r.source));
  if (r.huge_fraction() < 0.5) return 16;
  if (r.not_resident != 0) return 17;

  char* q = nullptr;
  try {
    q = allocator.allocate(bytes);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child: second collapse allocation threw: %s\n", e.what());
    return 20;
  }
  const hugepage::statistics s2 = hugepage::stats();
  if (permanent) {
    if (s2.collapse_attempts != s1.collapse_attempts) return 21;  // no retry storm
    if (s2.collapse_failures != s1.collapse_failures) return 22;
    // Once the back-off has run out (moved here instead of waiting a minute), the next
    // allocation asks the kernel again: a process whose THP comes back gets collapses again.
    hugepage::detail::global_counters().collapse_retry_at.store(0);
    char* again = allocator.allocate(bytes);
    const hugepage::statistics s2b = hugepage::stats();
    allocator.deallocate(again, bytes);
    if (s2b.collapse_attempts != s2.collapse_attempts + 1) return 26;
    if (!s2b.collapse_unsupported) return 27;
  } else {
    if (s2.collapse_attempts != s1.collapse_attempts + 1) return 23;  // tried again
    if (s2.collapse_failures != s1.collapse_failures + 1) return 24;
    if (s2.collapse_unsupported) return 25;
  }
  allocator.deallocate(q, bytes);
  allocator.deallocate(p, bytes);
  const hugepage::statistics s3 = hugepage::stats();
  if (s3.live_mappings != s0.live_mappings || s3.requested_collapse != s0.requested_collapse) {
    return 30;
  }
  return 0;
}

TEST(CollapseUnavailable, EinvalIsCountedAndBacksOff) {
  if (hugepage::test::seccomp_arch == 0)
    GTEST_SKIP() << "no seccomp architecture constant for this CPU";
  const int code = run_in_child([] { return collapse_blocked_child(EINVAL, true); });
  EXPECT_EQ(code, 0) << "child check " << code << " failed (see collapse_blocked_child)";
}

TEST(CollapseUnavailable, TransientFailureIsCountedAndRetried) {
  if (hugepage::test::seccomp_arch == 0)
    GTEST_SKIP() << "no seccomp architecture constant for this CPU";
  const int code = run_in_child([] { return collapse_blocked_child(EAGAIN, false); });
  EXPECT_EQ(code, 0) << "child check " << code << " failed (see collapse_blocked_child)";
}

// ---- THP disabled for the process -------------------------------------------------------------

TEST(ThpDisabled, AllocatorsWorkAndReportNoThp) {
  const int code = run_in_child([]() -> int {
    if (::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) return 2;
    if (::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) != 1) return 3;
    const std::size_t bytes = 8 * kMiB;
    const hugepage::statistics s0 = hugepage::stats();
    try {
      hugepage::thp_allocator<char> thp;
      char* p = thp.allocate(bytes);
      fill(p, bytes, 1);
      if (!holds(p, 0, bytes, 1)) return 10;
      const hugepage::backing_report r = hugepage::backing_of(p, bytes);
      if (r.thp != 0 || r.huge_bytes() != 0) return 11;
      if (r.base != bytes) return 12;

      hugepage::collapse_allocator<char> collapse;
      char* q = collapse.allocate(bytes);
      fill(q, bytes, 2);
      if (!holds(q, 0, bytes, 2)) return 20;
      const hugepage::backing_report rq = hugepage::backing_of(q, bytes);
      if (rq.thp != 0 || rq.huge_bytes() != 0) return 21;
      if (rq.base != bytes) return 22;
      // MADV_COLLAPSE would fail with EINVAL: no call is made, the failure is counted.
      const hugepage::statistics s1 = hugepage::stats();
      if (s1.collapse_attempts != s0.collapse_attempts) return 23;
      if (s1.collapse_failures != s0.collapse_failures + 1) return 24;
      if (!s1.collapse_unsupported) return 25;
      // One failure per allocation.
      char* again = collapse.allocate(bytes);
      collapse.deallocate(again, bytes);
      if (hugepage::stats().collapse_failures != s0.collapse_failures + 2) return 26;

      thp.deallocate(p, bytes);
      collapse.deallocate(q, bytes);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: threw with THP disabled: %s\n", e.what());
      return 30;
    }
    if (hugepage::stats().live_mappings != s0.live_mappings) return 31;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

// ---- address space exhausted ------------------------------------------------------------------

// Returns 0 when allocate(bytes) throws allocation_error; `code` otherwise.
template <class Allocator>
int expect_allocation_error(std::size_t bytes, int code) {
  Allocator allocator;
  try {
    char* p = allocator.allocate(bytes);
    allocator.deallocate(p, bytes);
    return code;  // no throw
  } catch (const allocation_error& e) {
    std::fprintf(stderr, "child: as expected: %s\n", e.what());
    return 0;
  } catch (const std::bad_alloc&) {
    return code + 1;  // a bad_alloc without the library's message
  }
}

TEST(AddressSpaceExhausted, ThrowsBadAllocAndKeepsWorking) {
  if (hugepage::test::under_asan()) {
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: RLIMIT_AS cannot "
                    "express a limit that leaves the test room";
  }
  const int code = run_in_child([]() -> int {
    std::error_code ec;
    const std::string statm = hugepage::detail::read_file("/proc/self/statm", ec);
    unsigned long vm_pages = 0;
    if (ec || std::sscanf(statm.c_str(), "%lu", &vm_pages) != 1) return 2;
    const rlim_t limit = vm_pages * base_page() + 64 * kMiB;
    const rlimit as{limit, limit};
    if (::setrlimit(RLIMIT_AS, &as) != 0) return 3;

    const hugepage::statistics s0 = hugepage::stats();
    using fallback_allocator =
        hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::fallback>;
    if (const int c = expect_allocation_error<hugepage::thp_allocator<char>>(kGiB, 10)) return c;
    if (const int c = expect_allocation_error<hugepage::collapse_allocator<char>>(kGiB, 12)) {
      return c;
    }
    if (const int c = expect_allocation_error<fallback_allocator>(kGiB, 14)) return c;
    if (const int c = expect_allocation_error<hugepage::huge_page_allocator<char>>(kGiB, 16)) {
      return c;
    }
    const hugepage::statistics s1 = hugepage::stats();
    if (s1.live_mappings != s0.live_mappings) return 20;
    if (s1.mapped_bytes() != s0.mapped_bytes()) return 21;
    if (s1.requested_thp != s0.requested_thp || s1.requested_collapse != s0.requested_collapse ||
        s1.requested_hugetlb_2m != s0.requested_hugetlb_2m) {
      return 22;
    }

    // The process keeps working: a small mapped block and an ordinary container.
    try {
      hugepage::thp_allocator<char> thp;
      char* p = thp.allocate(4 * kMiB);
      fill(p, 4 * kMiB, 3);
      if (!holds(p, 0, 4 * kMiB, 3)) return 30;
      thp.deallocate(p, 4 * kMiB);
      std::vector<int> small(1000, 7);
      if (small[999] != 7) return 31;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: small allocation failed: %s\n", e.what());
      return 32;
    }
    if (hugepage::stats().live_mappings != s0.live_mappings) return 33;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

// ---- MAP_NORESERVE ----------------------------------------------------------------------------

// Why the library never passes MAP_NORESERVE: with it, mmap promises pages it does not have, and
// the first touch past the pool raises SIGBUS. Without it the shortage fails allocate(). A hugetlb
// cgroup limit of 2 pages plays the short pool, so the shared pool is not drained.
TEST(NoReserve, TouchPastTheLimitRaisesSigbusWhileTheLibraryFailsAtAllocate) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 4);
  const hugetlb_cgroup cgroup;
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.limit_2m(2)) << std::strerror(errno);
  const pool_counts before = read_counts(page_size::huge_2m);

  const int code = run_in_child([&cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    const std::size_t length = 4 * kHuge;  // 4 pages; 2 allowed
    // The library's mapping reserves at mmap: the shortage is an exception now.
    try {
      hugepage::huge_page_allocator<char> allocator;
      char* p = allocator.allocate(length);
      allocator.deallocate(p, length);
      return 10;
    } catch (const hugepage::hugetlb_limit_exceeded& e) {
      // The pool has the pages; the reservation limit refused them at mmap, and says so.
      if (e.code() != std::errc::not_enough_memory) return 12;
      if (!contains(e.what(), "hugetlb.2MB.rsvd.max")) return 13;
      if (e.pages_requested() != 4 || e.pages_available() != 2) return 15;
    } catch (const std::exception&) {
      return 11;
    }
    // Within the limit the library works.
    try {
      hugepage::huge_page_allocator<char> allocator;
      char* p = allocator.allocate(2 * kHuge);
      fill(p, 2 * kHuge, 5);
      allocator.deallocate(p, 2 * kHuge);
    } catch (const std::exception&) {
      return 14;
    }
    // MAP_NORESERVE: mmap succeeds, and so do the first two pages.
    void* raw = ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return 20;
    auto* bytes = static_cast<volatile char*>(raw);
    bytes[0] = 1;
    bytes[kHuge] = 1;
    bytes[2 * kHuge] = 1;  // SIGBUS here
    return 21;
  });
  EXPECT_EQ(code, 128 + SIGBUS) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// ---- fork -------------------------------------------------------------------------------------

// A private hugetlb page is copy-on-write across fork: the child's first write takes a new page
// from the pool. With pages free, the child gets its copy and the parent's data is untouched.
TEST(ForkHazard, ChildWriteGetsItsOwnCopyWhenThePoolHasPages) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 2);
  const pool_counts before = read_counts(page_size::huge_2m);
  hugepage::huge_page_allocator<char> allocator;
  char* p = allocator.allocate(kHuge);
  fill(p, kHuge, 11);
  const int code = run_in_child([p]() -> int {
    default_fault_signals();
    if (!holds(p, 0, kHuge, 11)) return 10;  // inherited
    fill(p, kHuge, 12);                      // copy-on-write from the pool
    if (!holds(p, 0, kHuge, 12)) return 11;
    const hugepage::backing_report r = hugepage::backing_of(p, kHuge);
    if (r.hugetlb_2m != kHuge) return 12;  // the copy is a huge page too
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(holds(p, 0, kHuge, 11)) << "the parent's page changed";
  allocator.deallocate(p, kHuge);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// The hazard itself: no page for the copy (here: the child's cgroup allows none) kills the child
// with SIGBUS at the write. The parent keeps its page.
TEST(ForkHazard, ChildWriteWithoutAPoolPageRaisesSigbus) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 1);
  const hugetlb_cgroup cgroup;
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.limit_2m(0));
  const pool_counts before = read_counts(page_size::huge_2m);
  hugepage::huge_page_allocator<char> allocator;
  char* p = allocator.allocate(kHuge);
  fill(p, kHuge, 21);
  const int code = run_in_child([p, &cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    if (!holds(p, 0, kHuge, 21)) return 10;  // reading shares the parent's page
    p[100] = 1;                              // SIGBUS: no page for the copy
    return 11;
  });
  EXPECT_EQ(code, 128 + SIGBUS) << "child check " << code << " failed";
  EXPECT_TRUE(holds(p, 0, kHuge, 21));
  allocator.deallocate(p, kHuge);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// The other side: the parent writes first. As owner of the reservation it gets the page back -
// the kernel unmaps it from the child instead of copying - and the child, which never wrote, is
// killed at its next access ("killed due to inadequate hugepage pool"). Here the process that
// allocates runs in a cgroup that allows exactly its one page, so no copy can be charged.
TEST(ForkHazard, ParentWriteWithoutAPoolPageKillsTheChildAtItsNextAccess) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 2);
  const hugetlb_cgroup cgroup;
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.limit_2m(1));
  const pool_counts before = read_counts(page_size::huge_2m);
  const int code = run_in_child([&cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    hugepage::huge_page_allocator<char> allocator;
    char* p = allocator.allocate(kHuge);
    fill(p, kHuge, 22);
    int go[2];
    if (::pipe(go) != 0) return 3;
    const pid_t reader = ::fork();
    if (reader == 0) {
      char byte;
      if (::read(go[0], &byte, 1) != 1) ::_exit(4);
      ::_exit(holds(p, 0, kHuge, 22) ? 0 : 5);  // killed here
    }
    p[100] = 1;  // the parent writes first: no page for a copy
    if (::write(go[1], "x", 1) != 1) return 6;
    int status = 0;
    ::waitpid(reader, &status, 0);
    allocator.deallocate(p, kHuge);
    if (!WIFSIGNALED(status)) return 7;
    return WTERMSIG(status) == SIGBUS ? 0 : 8;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

struct dont_fork_options : hugepage::default_options {
  static constexpr bool dont_fork = true;
};

TEST(ForkHazard, DontForkMemoryIsNotInherited) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 1);
  const pool_counts before = read_counts(page_size::huge_2m);
  hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::strict, dont_fork_options>
      allocator;
  static_assert(decltype(allocator)::get_strategy().options().dont_fork);
  char* p = allocator.allocate(kHuge);
  fill(p, kHuge, 31);
  std::error_code ec;
  bool flagged = false;
  for (const auto& m : hugepage::read_smaps(0, ec)) {
    if (m.start == reinterpret_cast<std::uintptr_t>(p)) flagged = m.has_flag("dc");
  }
  EXPECT_TRUE(flagged) << "VmFlags lacks dc (MADV_DONTFORK)";
  const int code = run_in_child([p]() -> int {
    default_fault_signals();
    const volatile char* v = p;
    return v[0] == 0 ? 10 : 11;  // SIGSEGV before either
  });
  EXPECT_EQ(code, 128 + SIGSEGV) << "child check " << code << " failed";
  EXPECT_TRUE(holds(p, 0, kHuge, 31));
  allocator.deallocate(p, kHuge);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// ---- fork with dont_fork containers ------------------------------------------------------------
//
// A child inherits the container objects but not their memory. What it may do: leave them alone
// and leave with _exit() (run_in_child does) or exec, and use containers of its own meanwhile.
// What it must not do: read, clear or destroy them (directly, or through exit()'s destructors).

hugepage::strategy no_fork_thp() {
  hugepage::allocation_options o;
  o.dont_fork = true;
  return hugepage::strategy::thp(o);
}

std::string value_of(std::uint64_t key, const char* tag) {
  return std::string(tag) + " holds value " + std::to_string(key);  // beyond the SSO: heap
}

// The containers a program would put on dont_fork memory: node containers on an arena, blocks on
// the allocators.
struct dont_fork_containers {
  using key = std::uint64_t;
  using node_allocator = hugepage::arena_allocator<std::pair<const key, std::string>>;
  template <class T>
  using block_allocator = hugepage::thp_allocator<T, dont_fork_options>;

  std::map<key, std::string, std::less<key>, node_allocator> ordered;
  std::unordered_map<key, std::string, std::hash<key>, std::equal_to<key>, node_allocator> hashed;
  absl::node_hash_map<key, std::string, absl::Hash<key>, std::equal_to<key>, node_allocator> nodes;
  std::vector<std::string, block_allocator<std::string>> strings;
  absl::flat_hash_map<key, std::string, absl::Hash<key>, std::equal_to<key>,
                      block_allocator<std::pair<const key, std::string>>>
      flat;

  dont_fork_containers(hugepage::arena& a, key n, const char* tag)
      : ordered(node_allocator(a)), hashed(node_allocator(a)), nodes(node_allocator(a)) {
    for (key k = 0; k < n; ++k) {
      const std::string v = value_of(k, tag);
      ordered.emplace(k, v);
      hashed.emplace(k, v);
      nodes.emplace(k, v);
      strings.push_back(v);
      flat.emplace(k, v);
    }
  }

  // Whether every container holds exactly the n values of `tag`.
  bool hold(key n, const char* tag) const {
    if (ordered.size() != n || hashed.size() != n || nodes.size() != n || strings.size() != n ||
        flat.size() != n) {
      return false;
    }
    for (key k = 0; k < n; ++k) {
      const std::string v = value_of(k, tag);
      const auto o = ordered.find(k);
      const auto h = hashed.find(k);
      const auto d = nodes.find(k);
      const auto f = flat.find(k);
      if (o == ordered.end() || o->second != v || h == hashed.end() || h->second != v ||
          d == nodes.end() || d->second != v || f == flat.end() || f->second != v ||
          strings[k] != v) {
        return false;
      }
    }
    return true;
  }

  // The block of `strings`.
  std::pair<const char*, std::size_t> strings_block() const {
    return {reinterpret_cast<const char*>(strings.data()),
            strings.capacity() * sizeof(std::string)};
  }
};

// Reads in a child go here, so that the compiler keeps them.
volatile std::size_t read_sink = 0;

constexpr std::uint64_t kValues = 100000;  // the vector's and the flat map's blocks are mapped

bool overlap(std::pair<const char*, std::size_t> a, std::pair<const void*, std::size_t> b) {
  const auto* b_start = static_cast<const char*>(b.first);
  return a.first < b_start + b.second && b_start < a.first + a.second;
}

// The child leaves the inherited containers alone and builds, uses and destroys the same
// containers of its own, on a new arena and the same allocators. Nothing of the child's lands in
// the ranges it did not inherit (the placeholders hold them), and the parent's containers are
// untouched.
TEST(ForkHazard, ChildLeavingInheritedDontForkContainersAloneUsesContainersOfItsOwn) {
  hugepage::arena nodes(no_fork_thp());
  const std::size_t live_before = hugepage::stats().live_mappings;
  const dont_fork_containers inherited(nodes, kValues, "parent");
  // The arena's pages, the vector's block and the flat map's block are each a dont_fork mapping.
  const std::size_t arena_pages = nodes.stats().pages;
  ASSERT_GE(arena_pages, 1u);
  ASSERT_EQ(hugepage::stats().live_mappings, live_before + arena_pages + 2);
  ASSERT_GE(inherited.strings_block().second, kHuge);
  const auto arena_ranges = nodes.mapped_ranges();
  const int code = run_in_child([&]() -> int {
    default_fault_signals();
    const std::size_t live = hugepage::stats().live_mappings;
    {
      hugepage::arena own_nodes(no_fork_thp());
      dont_fork_containers own(own_nodes, kValues, "child");
      if (!own.hold(kValues, "child")) return 10;
      std::vector<std::pair<const void*, std::size_t>> inherited_ranges = arena_ranges;
      inherited_ranges.emplace_back(inherited.strings_block());
      for (const auto& r : inherited_ranges) {
        if (overlap(own.strings_block(), r)) return 11;
        for (const auto& mine : own_nodes.mapped_ranges()) {
          if (overlap({static_cast<const char*>(mine.first), mine.second}, r)) return 12;
        }
      }
      for (std::uint64_t k = 0; k < kValues; k += 2) {  // use them: erase half, rebuild it
        own.ordered.erase(k);
        own.hashed.erase(k);
        own.nodes.erase(k);
        own.flat.erase(k);
      }
      own.strings.clear();
      dont_fork_containers again(own_nodes, kValues, "child");
      if (!again.hold(kValues, "child")) return 13;
      // The arena's own records live outside its pages: the inherited one can be asked.
      if (nodes.stats().pages != arena_pages) return 14;
    }  // the child's containers and arena are destroyed
    if (hugepage::stats().live_mappings != live) return 15;
    return 0;  // and leaves with _exit(): nothing touches the inherited containers
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(inherited.hold(kValues, "parent")) << "the parent's containers changed";
}

// Reading, clearing or destroying an inherited dont_fork container touches memory the child does
// not have, and so does allocating from the arena (its slab headers are in its pages): the
// placeholder turns every such touch into SIGSEGV, for node containers and blocks alike, never
// into a read of something else.
TEST(ForkHazard, ChildTouchingAnInheritedDontForkContainerDiesOfSigsegv) {
  hugepage::arena nodes(no_fork_thp());
  dont_fork_containers inherited(nodes, kValues, "parent");
  struct touch {
    const char* what;
    std::function<void()> run;
  };
  auto& c = inherited;
  hugepage::arena& a = nodes;
  const touch touches[] = {
      {"std::map: find", [&c] { read_sink = c.ordered.find(7)->second.size(); }},
      {"std::map: clear", [&c] { c.ordered.clear(); }},
      {"std::map: destroy", [&c] { std::destroy_at(&c.ordered); }},
      {"std::unordered_map: find", [&c] { read_sink = c.hashed.find(7)->second.size(); }},
      {"std::unordered_map: clear", [&c] { c.hashed.clear(); }},
      {"std::unordered_map: destroy", [&c] { std::destroy_at(&c.hashed); }},
      {"absl::node_hash_map: find", [&c] { read_sink = c.nodes.find(7)->second.size(); }},
      {"absl::node_hash_map: clear", [&c] { c.nodes.clear(); }},
      {"absl::node_hash_map: destroy", [&c] { std::destroy_at(&c.nodes); }},
      {"std::vector<std::string>: read", [&c] { read_sink = c.strings[7].size(); }},
      {"std::vector<std::string>: clear", [&c] { c.strings.clear(); }},
      {"std::vector<std::string>: destroy", [&c] { std::destroy_at(&c.strings); }},
      {"absl::flat_hash_map: find", [&c] { read_sink = c.flat.find(7)->second.size(); }},
      {"absl::flat_hash_map: clear", [&c] { c.flat.clear(); }},
      {"absl::flat_hash_map: destroy", [&c] { std::destroy_at(&c.flat); }},
      {"arena: allocate",
       [&a] { read_sink = reinterpret_cast<std::uintptr_t>(a.allocate(48, 8)); }},
  };
  for (const touch& t : touches) {
    const int code = run_in_child([&t] {
      default_fault_signals();
      t.run();
      return 0;
    });
    EXPECT_EQ(code, 128 + SIGSEGV) << t.what;
  }
  EXPECT_TRUE(inherited.hold(kValues, "parent")) << "the parent's containers changed";
}

// exit() (and returning from main) runs the destructors of statics: a static container on
// dont_fork memory is destroyed in the child, SIGSEGV. _exit() runs none.
TEST(ForkHazard, ChildCallingExitWithAnInheritedDontForkStaticDiesOfSigsegv) {
  using node_allocator = hugepage::arena_allocator<std::pair<const std::uint64_t, std::string>>;
  using map = std::map<std::uint64_t, std::string, std::less<>, node_allocator>;
  static hugepage::arena nodes(no_fork_thp());
  static map table(node_allocator{nodes});
  for (std::uint64_t k = 0; k < 1000; ++k) table.emplace(k, value_of(k, "static"));
  EXPECT_EQ(run_in_child([] {
              default_fault_signals();
              std::exit(0);
              return 1;
            }),
            128 + SIGSEGV);
  EXPECT_EQ(run_in_child([] { return 0; }), 0);  // run_in_child leaves with _exit()
  EXPECT_EQ(table.size(), 1000u);
  EXPECT_EQ(table.at(999), value_of(999, "static"));
}

// The library's own release paths read nothing in a block the child did not inherit: freeing it
// unmaps only the placeholder, never a mapping of the child's own (a block of the same size,
// which the kernel would place in the hole the parent's block left), and an inherited arena's
// destructor unmaps its pages' placeholders. Both keep the statistics exact.
TEST(ForkHazard, ChildReleasingInheritedDontForkMemoryUnmapsNothingOfItsOwn) {
  using allocator_type = hugepage::thp_allocator<char, dont_fork_options>;
  allocator_type allocator;
  char* inherited = allocator.allocate(8 * kMiB);
  std::memset(inherited, 'p', 8 * kMiB);
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(inherited);
  auto nodes = std::make_unique<hugepage::arena>(no_fork_thp());
  void* node = nodes->allocate(64, 8);
  std::memset(node, 'n', 64);
  const int code = run_in_child([&]() -> int {
    default_fault_signals();
    const hugepage::statistics s0 = hugepage::stats();
    char* own = allocator.allocate(8 * kMiB);  // same size, same alignment as the inherited block
    if (reinterpret_cast<std::uintptr_t>(own) == start) return 10;  // landed in the hole
    fill(own, 8 * kMiB, 41);
    allocator.deallocate(inherited, 8 * kMiB);    // the block the child never had
    if (!holds(own, 0, 8 * kMiB, 41)) return 11;  // SIGSEGV here when the child's was unmapped
    allocator.deallocate(own, 8 * kMiB);
    if (hugepage::stats().live_mappings + 1 != s0.live_mappings) return 12;
    nodes.reset();  // unmaps the placeholder of its one page, reading nothing in it
    if (hugepage::stats().live_mappings + 2 != s0.live_mappings) return 13;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_EQ(inherited[8 * kMiB - 1], 'p');  // the parent's memory is untouched
  EXPECT_EQ(static_cast<const char*>(node)[63], 'n');
  nodes->deallocate(node, 64, 8);
  allocator.deallocate(inherited, 8 * kMiB);
}

// A fork while another thread holds the registry's lock must not leave the child a lock that
// nobody releases: its first deallocate of a registered block would hang. Blocks served by a
// fallback (here: an alignment above the hugetlb page, so the pool is not used) are registered.
TEST(ForkHazard, ForkWhileOtherThreadsUseTheRegistryNeverHangsTheChild) {
  static constexpr auto registered =
      hugepage::strategy::hugetlb(page_size::huge_2m, hugepage::fallback);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
        void* p = registered.allocate(kHuge, 2 * kHuge);
        registered.deallocate(p, kHuge, 2 * kHuge);
      }
    });
  }
  int hung = 0, failed = 0;
  for (int i = 0; i < 200 && hung == 0; ++i) {
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      void* p = registered.allocate(kHuge, 2 * kHuge);
      registered.deallocate(p, kHuge, 2 * kHuge);
      ::_exit(0);
    }
    int status = 0;
    pid_t done = 0;
    for (int wait_ms = 0; wait_ms < 5000 && done == 0; ++wait_ms) {
      done = ::waitpid(child, &status, WNOHANG);
      if (done == 0) ::usleep(1000);
    }
    if (done == 0) {
      ++hung;
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(hung, 0) << "a child hung in deallocate()";
  EXPECT_EQ(failed, 0);
}

// ---- partial release inside a huge page ---------------------------------------------------------

// A THP region of 2 huge pages mapped with the os layer, filled with a pattern. Skips when the
// kernel gave base pages (that is fragmentation, not the code under test) or PFNs are hidden.
class ThpPair : public ::testing::Test {
 protected:
  static constexpr std::size_t kLength = 2 * kHuge;
  static constexpr std::uint64_t kSeed = 0x5eed;

  void SetUp() override {
    if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs root for exact backing (kpageflags)");
    std::error_code ec;
    p_ = static_cast<char*>(hugepage::os::map_aligned(kLength, kHuge, ec));
    ASSERT_NE(p_, nullptr) << ec.message();
    ASSERT_FALSE(hugepage::os::advise_huge(p_, kLength));
    fill(p_, kLength, kSeed);
    const hugepage::backing_report r = hugepage::backing_of(p_, kLength);
    ASSERT_TRUE(r.exact) << "pagemap_scan or kpageflags: " << r.note;
    if (r.thp != kLength) {
      HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(r.thp) + " bytes of THP of " +
                            std::to_string(kLength));
    }
  }
  void TearDown() override {
    if (p_ != nullptr) hugepage::os::unmap(p_, kLength);  // holes inside are fine for munmap
  }

  char* p_ = nullptr;
};

TEST_F(ThpPair, MunmapOfOneBasePageSplitsOnlyThatHugePage) {
  const std::size_t hole = kMiB;  // the middle of the first huge page
  ASSERT_FALSE(hugepage::os::unmap(p_ + hole, base_page()));
  EXPECT_TRUE(holds(p_, 0, hole, kSeed));
  EXPECT_TRUE(holds(p_, hole + base_page(), kLength, kSeed));

  const hugepage::backing_report r = hugepage::backing_of(p_, kLength);
  EXPECT_EQ(r.unmapped, base_page());
  EXPECT_EQ(r.thp, kHuge) << "the second huge page is still PMD-mapped";
  EXPECT_EQ(r.base, kHuge - base_page()) << "the rest of the first is on base pages";
  EXPECT_TRUE(r.exact);
  const hugepage::backing_report first = hugepage::backing_of(p_, kHuge);
  EXPECT_EQ(first.thp, 0u) << "the coverage loss is reported, not hidden";
}

TEST_F(ThpPair, DontneedOfOneBasePageSplitsOnlyThatHugePage) {
  const std::size_t hole = kHuge + kMiB;  // the middle of the second huge page
  ASSERT_FALSE(hugepage::os::advise(p_ + hole, base_page(), MADV_DONTNEED));
  EXPECT_TRUE(holds(p_, 0, hole, kSeed));
  EXPECT_TRUE(holds(p_, hole + base_page(), kLength, kSeed));
  const auto* zeros = reinterpret_cast<const std::uint64_t*>(p_ + hole);
  const hugepage::backing_report r = hugepage::backing_of(p_, kLength);  // before reading it
  EXPECT_EQ(r.not_resident, base_page());
  EXPECT_EQ(r.thp, kHuge) << "the first huge page is still PMD-mapped";
  EXPECT_EQ(r.base, kHuge - base_page());
  const hugepage::backing_report second = hugepage::backing_of(p_ + kHuge, kHuge);
  EXPECT_EQ(second.thp, 0u) << "the coverage loss is reported, not hidden";
  EXPECT_EQ(zeros[0], 0u) << "MADV_DONTNEED on private anonymous memory reads back zeros";
  EXPECT_EQ(zeros[base_page() / sizeof(std::uint64_t) - 1], 0u);
}

// ---- bad input to every strategy --------------------------------------------------------------

std::vector<hugepage::strategy> every_strategy() {
  hugepage::allocation_options prefault;
  prefault.prefault = true;
  hugepage::allocation_options no_fork;
  no_fork.dont_fork = true;
  return {hugepage::strategy::thp(),
          hugepage::strategy::thp(prefault),
          hugepage::strategy::collapse(),
          hugepage::strategy::hugetlb(page_size::huge_2m, hugepage::strict),
          hugepage::strategy::hugetlb(page_size::huge_2m, hugepage::fallback, no_fork),
          hugepage::strategy::hugetlb(page_size::huge_1g, hugepage::strict),
          hugepage::strategy::hugetlb(page_size::huge_1g, hugepage::fallback, prefault)};
}

std::string describe(const hugepage::strategy& s) {
  static const char* const methods[] = {"thp", "hugetlb", "collapse"};
  return std::string(methods[static_cast<int>(s.how())]) + "/" + hugepage::name_of(s.size()) +
         (s.policy() == hugepage::fallback ? "/fallback" : "/strict");
}

// ENOMEM at vm.max_map_count is not a pool shortage: allocation_error naming the limit, no retry
// as "pool in concurrent use", no pool command. The child fills its map count with small
// mappings that cannot merge, then asks for two pool pages the pool has.
TEST(BadInput, MappingCountLimitIsAnAllocationErrorNotAPoolShortage) {
  if (hugepage::test::under_asan()) {
    GTEST_SKIP() << "AddressSanitizer maps memory of its own on every allocation: at "
                    "vm.max_map_count it aborts before the library can throw";
  }
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 2);
  const int result = hugepage::test::run_in_child([]() -> int {
    for (int i = 0;; ++i) {
      void* p = ::mmap(nullptr, 4096, i % 2 != 0 ? PROT_READ : PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) break;
    }
    try {
      hugepage::huge_page_allocator<char> allocator;
      (void)allocator.allocate(2 * kHuge);
      return 10;
    } catch (const pool_exhausted& e) {
      std::fprintf(stderr, "child: pool_exhausted: %s\n", e.what());
      return 11;
    } catch (const hugepage::allocation_error& e) {
      const std::string what = e.what();
      std::fprintf(stderr, "child: %s\n", what.c_str());
      if (typeid(e) != typeid(hugepage::allocation_error)) return 12;
      if (e.code() != std::errc::not_enough_memory) return 13;
      if (!contains(what, "mappings and vm.max_map_count is")) return 14;
      if (contains(what, "sysctl") || contains(what, "nr_hugepages")) return 15;
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      return 16;
    }
  });
  EXPECT_EQ(result, 0) << "child check " << result << " failed";
}

// A request beyond the machine's memory gets no advice to reserve an absurd pool.
TEST(BadInput, RequestBeyondPhysicalMemoryGetsNoPoolCommand) {
  if (!hugepage::read_pool(page_size::huge_2m)) HUGEPAGE_SKIP_OR_FAIL("no 2 MiB hugetlb pool");
  hugepage::huge_page_allocator<char> allocator;
  const std::size_t bytes = std::size_t{6} << 60;  // 6 EiB
  try {
    (void)allocator.allocate(bytes);
    FAIL() << "6 EiB was mapped";
  } catch (const pool_exhausted& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "no pool can hold that: pools should take at most")) << what;
    EXPECT_FALSE(contains(what, "sysctl")) << what;
    EXPECT_EQ(e.pages_requested(), bytes / kHuge);
  }
}

TEST(BadInput, MappedLengthOverflowThrowsAllocationError) {
  const pool_counts before = read_counts(page_size::huge_2m);
  const hugepage::statistics s0 = hugepage::stats();
  for (const hugepage::strategy& s : every_strategy()) {
    SCOPED_TRACE(describe(s));
    const std::size_t page = s.page_bytes();
    for (const std::size_t bytes : {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - page + 2}) {
      EXPECT_EQ(s.mapped_length(bytes), 0u) << bytes;
      for (const std::size_t alignment : {std::size_t{1}, std::size_t{64}, std::size_t{4096}}) {
        try {
          void* p = s.allocate(bytes, alignment);
          ADD_FAILURE() << "allocate(" << bytes << ") returned " << p;
          s.deallocate(p, bytes, alignment);
        } catch (const allocation_error& e) {
          EXPECT_EQ(e.code(), std::errc::not_enough_memory);
          EXPECT_TRUE(contains(e.what(), "too large")) << e.what();
        }
      }
    }
    // Rounds without overflow, but no kernel maps it.
    for (const std::size_t bytes : {SIZE_MAX - page + 1, SIZE_MAX / 2, std::size_t{1} << 62}) {
      EXPECT_NE(s.mapped_length(bytes), 0u) << bytes;
      EXPECT_THROW((void)s.allocate(bytes, 1), allocation_error) << bytes;
    }
  }
  const hugepage::statistics s1 = hugepage::stats();
  EXPECT_EQ(s1.live_mappings, s0.live_mappings);
  EXPECT_EQ(s1.mapped_bytes(), s0.mapped_bytes());
  EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// mmap aligns a hugetlb mapping only to its page size; the strategy places pool pages at any
// alignment, under either policy, and counts no fallback.
TEST(BadInput, AlignmentAboveTheHugetlbPageIsServedFromThePool) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 1);
  const pool_counts before = read_counts(page_size::huge_2m);
  for (const hugepage::pool_policy policy : {hugepage::strict, hugepage::fallback}) {
    const auto s = hugepage::strategy::hugetlb(page_size::huge_2m, policy);
    for (const std::size_t alignment : {2 * kHuge, 4 * kHuge, std::size_t{1} << 30}) {
      SCOPED_TRACE(alignment);
      const hugepage::statistics s0 = hugepage::stats();
      void* p = s.allocate(kHuge, alignment);
      const hugepage::statistics s1 = hugepage::stats();
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % alignment, 0u);
      EXPECT_EQ(hugepage::backing_of(p, kHuge).hugetlb_2m, kHuge);
      EXPECT_EQ(s1.obtained_hugetlb_2m, s0.obtained_hugetlb_2m + kHuge);
      EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp);
      s.deallocate(p, kHuge, alignment);
      const hugepage::statistics s2 = hugepage::stats();
      EXPECT_EQ(s2.obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
      EXPECT_EQ(s2.live_mappings, s0.live_mappings);
    }
  }
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

TEST(BadInput, AlignmentOfOneHugetlbPageIsHonoured) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 1);
  const auto s = hugepage::strategy::hugetlb(page_size::huge_2m);
  void* p = s.allocate(kHuge, kHuge);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % kHuge, 0u);
  s.deallocate(p, kHuge, kHuge);
}

// ---- exceptions and the registry under allocation failure ---------------------------------------

// Copying an exception must not throw: the copy made by `throw` or by std::exception_ptr would
// terminate the program. The texts are shared: a copy made while ::operator new fails works and
// points at the same characters.
TEST(Exceptions, CopiesShareTheirTextAndNeedNoMemory) {
  const std::string what(200, 'w');
  const std::string file = "/sys/fs/cgroup/a/long/path/of/a/cgroup/hugetlb.2MB.max";
  const hugepage::hugetlb_limit_exceeded original(
      what, std::make_error_code(std::errc::not_enough_memory), page_size::huge_2m, 4, 1, file,
      8 * kMiB, 6 * kMiB);
  const hugepage::memory_limit_exceeded memory(what, file, 1, 2, 3);
  bool copied = false;
  operator_new_fails.store(true);
  try {
    const hugepage::hugetlb_limit_exceeded copy(original);
    const hugepage::pool_exhausted sliced(original);
    const hugepage::memory_limit_exceeded memory_copy(memory);
    operator_new_fails.store(false);
    copied = true;
    EXPECT_EQ(copy.what(), original.what()) << "the same shared characters";
    EXPECT_EQ(sliced.what(), original.what());
    EXPECT_EQ(memory_copy.what(), memory.what());
    EXPECT_EQ(copy.file(), file);
    EXPECT_EQ(memory_copy.file(), file);
    EXPECT_EQ(copy.pages_requested(), 4u);
    EXPECT_EQ(copy.limit_bytes(), 8 * kMiB);
  } catch (const std::bad_alloc&) {
    operator_new_fails.store(false);
  }
  EXPECT_TRUE(copied) << "copying an exception allocated";
  EXPECT_EQ(std::string(original.what()), what);
}

// A block that needs a record (a hugetlb request served by THP) whose record cannot be stored:
// allocate() throws std::bad_alloc, the block is unmapped, and nothing is counted, fallbacks
// included.
TEST(Exceptions, RegistryInsertThatThrowsCountsNothingAndLeavesNothingMapped) {
  const int code = run_in_child([]() -> int {
    // Every hugetlb mmap refused: the fallback policy serves the request from THP.
    if (!hugepage::test::fail_syscall_when(__NR_mmap, ENOMEM, 3, MAP_HUGETLB, MAP_HUGETLB)) {
      return 2;
    }
    const auto s = hugepage::strategy::hugetlb(page_size::huge_2m, hugepage::fallback);
    const std::size_t maps_before = advised_mapping_count();
    const hugepage::statistics s0 = hugepage::stats();
    bool threw = false;
    operator_new_fails.store(true);
    try {
      void* p = s.allocate(kHuge, 64);
      operator_new_fails.store(false);
      s.deallocate(p, kHuge, 64);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    operator_new_fails.store(false);
    const hugepage::statistics s1 = hugepage::stats();
    if (!threw) return 10;
    if (s1.fallbacks_to_thp != s0.fallbacks_to_thp) return 11;
    if (s1.fallbacks_to_base != s0.fallbacks_to_base) return 12;
    if (s1.live_mappings != s0.live_mappings || s1.mapped_bytes() != s0.mapped_bytes()) return 13;
    if (advised_mapping_count() != maps_before) return 14;
    // The same request with memory for the record: served from THP and counted once.
    void* p = s.allocate(kHuge, 64);
    const hugepage::statistics s2 = hugepage::stats();
    if (s2.fallbacks_to_thp + s2.fallbacks_to_base !=
        s0.fallbacks_to_thp + s0.fallbacks_to_base + 1) {
      return 15;
    }
    if (s2.obtained_hugetlb_2m != s0.obtained_hugetlb_2m) return 16;
    s.deallocate(p, kHuge, 64);
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

}  // namespace

// The global allocation functions of this program: malloc, or std::bad_alloc while
// operator_new_fails is set. (The array and aligned forms of the library forward to these.)
[[gnu::noinline]] void* operator new(std::size_t bytes) {
  if (!operator_new_fails.load(std::memory_order_relaxed)) {
    if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  }
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
