// mapping_limits_test.cpp - the allocators that map anonymous memory (THP, collapse, a hugetlb
// fallback served from THP) at a process limit: RLIMIT_AS and vm.max_map_count. Each throws
// allocation_error whose message names the size, the errno and the limit (docs/failure-modes.md),
// in the words the hugetlb path uses (refusal.hpp). Each case runs in a child: the limits are
// the child's.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <typeinfo>

#include "hugepage/allocator.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/refusal.hpp"
#include "support.hpp"

namespace {

using hugepage::page_size;

using hugepage::test::kGiB;
using hugepage::test::kMiB;
const std::string kThpCall = "hugepage: mmap of 1 GiB for transparent huge pages failed: ";

using fallback_allocator =
    hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::fallback>;

// Allocates 1 GiB with `Allocator` and checks the exception: exactly allocation_error, ENOMEM,
// and `check(what)`. 0 when all holds; `code` + 0..3 tells what did not.
template <class Allocator>
int expect_refusal(int code, const std::function<bool(const std::string&)>& check) {
  Allocator allocator;
  try {
    char* p = allocator.allocate(kGiB);
    allocator.deallocate(p, kGiB);
    return code;  // no throw
  } catch (const hugepage::allocation_error& e) {
    std::fprintf(stderr, "child: %s: %s\n", typeid(Allocator).name(), e.what());
    if (typeid(e) != typeid(hugepage::allocation_error)) return code + 1;
    if (e.code() != std::errc::not_enough_memory) return code + 2;
    return check(e.what()) ? 0 : code + 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child: another exception: %s\n", e.what());
    return code + 4;
  }
}

// Runs the three allocators against `check`; 0 when each throws as it should.
int every_allocator(const std::function<bool(const std::string&)>& check) {
  if (const int c = expect_refusal<hugepage::thp_allocator<char>>(10, check)) return c;
  if (const int c = expect_refusal<hugepage::collapse_allocator<char>>(20, check)) return c;
  return expect_refusal<fallback_allocator>(30, check);
}

TEST(MappingLimits, AddressSpaceLimitIsNamedByEveryThpAllocator) {
  if (hugepage::test::under_asan()) {
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: RLIMIT_AS cannot "
                    "express a limit that leaves the test room";
  }
  const int code = hugepage::test::run_in_child([]() -> int {
    std::error_code ec;
    const std::string statm = hugepage::detail::read_file("/proc/self/statm", ec);
    unsigned long vm_pages = 0;
    if (ec || std::sscanf(statm.c_str(), "%lu", &vm_pages) != 1) return 2;
    const rlim_t limit = vm_pages * hugepage::os::base_page_size() + 64 * kMiB;
    const rlimit as{limit, limit};
    if (::setrlimit(RLIMIT_AS, &as) != 0) return 3;
    const std::string expected = kThpCall + std::strerror(ENOMEM) +
                                 "; the address-space limit (RLIMIT_AS, ulimit -v) leaves no room "
                                 "for it";
    return every_allocator([&](const std::string& what) { return what == expected; });
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

TEST(MappingLimits, MappingCountLimitIsNamedByEveryThpAllocator) {
  if (hugepage::test::under_asan()) {
    GTEST_SKIP() << "AddressSanitizer maps memory of its own on every allocation: at "
                    "vm.max_map_count it aborts before the library can throw";
  }
  const auto max = hugepage::detail::read_u64("/proc/sys/vm/max_map_count");
  if (!max || *max > 1'000'000) {
    HUGEPAGE_SKIP_OR_FAIL("vm.max_map_count unreadable or too large to fill in a test");
  }
  const int code = hugepage::test::run_in_child([max]() -> int {
    for (int i = 0;; ++i) {  // alternating protections: the kernel cannot merge them
      void* p = ::mmap(nullptr, 4096, i % 2 != 0 ? PROT_READ : PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) break;
    }
    const std::string head = kThpCall + std::strerror(ENOMEM) + "; the process has ";
    const std::string tail = " mappings and vm.max_map_count is " + std::to_string(*max) +
                             ": no room for another mapping";
    return every_allocator([&](const std::string& what) {
      if (what.size() <= head.size() + tail.size() || what.compare(0, head.size(), head) != 0 ||
          what.compare(what.size() - tail.size(), tail.size(), tail) != 0) {
        return false;
      }
      const std::string count = what.substr(head.size(), what.size() - head.size() - tail.size());
      // The kernel refuses a mapping once the count is past the limit (max + 1); [vsyscall],
      // listed in /proc/self/maps but not counted by the kernel, is left out.
      return count.find_first_not_of("0123456789") == std::string::npos &&
             std::stoull(count) + 1 >= *max && std::stoull(count) <= *max + 1;
    });
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

}  // namespace
