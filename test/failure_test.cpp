// failure_test.cpp - the failure modes a production allocator meets, induced for real: a short
// pool, a seccomp filter, prctl, setrlimit, a hugetlb cgroup limit, fork, a partial munmap.
//
// Failures that would disturb the rest of the process (seccomp, prctl, rlimits, cgroups) run in a
// forked child (test::run_in_child), which returns a distinct code for each check that failed.
// Fork hazards: failure_fork_test.cpp; partial release, bad input and the exceptions themselves:
// failure_input_test.cpp.
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

#include "failure_support.hpp"
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

using hugepage::test::base_page;
using hugepage::test::contains;
using hugepage::test::default_fault_signals;
using hugepage::test::fill;
using hugepage::test::holds;
using hugepage::test::hugetlb_cgroup;
using hugepage::test::kGiB;
using hugepage::test::kHuge;
using hugepage::test::kMiB;

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

}  // namespace
