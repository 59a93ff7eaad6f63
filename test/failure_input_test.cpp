// failure_input_test.cpp - failures a caller causes or meets in one call: a partial munmap or
// MADV_DONTNEED inside a THP pair, bad input (the mapping count limit, lengths and alignments), the
// exceptions' own allocation (while ::operator new fails). The other failure modes:
// failure_test.cpp.
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
using hugepage::test::fill;
using hugepage::test::holds;
using hugepage::test::kHuge;
using hugepage::test::kMiB;

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
