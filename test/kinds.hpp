// test/kinds.hpp - the four strategy kinds the allocator and pmr tests run over, in one list:
// for each, its allocator, its process-wide resource, the strategy both carry and the counters
// that follow them. Typed tests name the kinds with kind_names (Thp, HugeTlb2m, ...).
//
// The kinds live in an unnamed namespace of hugepage, as they did in each test file before: ctest
// names a typed test by its type's qualified name (AllocatorTest.Name<AllocatorTest/Thp.  #
// TypeParam = hugepage::(anonymous namespace)::thp_kind>), and those names stay as they were.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <memory_resource>
#include <string>
#include <type_traits>

#include "hugepage/allocator.hpp"
#include "hugepage/pmr.hpp"
#include "hugepage/stats.hpp"
#include "support.hpp"

namespace hugepage {
namespace {

struct thp_kind {
  template <class T>
  using allocator = thp_allocator<T>;
  static std::pmr::memory_resource* resource() { return pmr::thp_resource(); }
  static constexpr strategy expected = strategy::thp();
  static constexpr bool strict_pool = false;
  static constexpr std::size_t statistics::*requested = &statistics::requested_thp;
  static constexpr std::size_t statistics::*obtained = &statistics::obtained_thp;
};

struct hugetlb_kind {
  template <class T>
  using allocator = huge_page_allocator<T>;
  static std::pmr::memory_resource* resource() { return pmr::huge_page_resource(); }
  static constexpr strategy expected = strategy::hugetlb();
  static constexpr bool strict_pool = true;
  static constexpr std::size_t statistics::*requested = &statistics::requested_hugetlb_2m;
  static constexpr std::size_t statistics::*obtained = &statistics::obtained_hugetlb_2m;
};

struct hugetlb_fallback_kind {
  template <class T>
  using allocator = huge_page_allocator<T, page_size::huge_2m, fallback>;
  static std::pmr::memory_resource* resource() {
    return pmr::huge_page_resource(page_size::huge_2m, fallback);
  }
  static constexpr strategy expected = strategy::hugetlb(page_size::huge_2m, fallback);
  static constexpr bool strict_pool = false;
  static constexpr std::size_t statistics::*requested = &statistics::requested_hugetlb_2m;
  // What it obtains while the pool has pages; obtained_thp after a fallback.
  static constexpr std::size_t statistics::*obtained = &statistics::obtained_hugetlb_2m;
};

struct collapse_kind {
  template <class T>
  using allocator = collapse_allocator<T>;
  static std::pmr::memory_resource* resource() { return pmr::collapse_resource(); }
  static constexpr strategy expected = strategy::collapse();
  static constexpr bool strict_pool = false;
  static constexpr std::size_t statistics::*requested = &statistics::requested_collapse;
  static constexpr std::size_t statistics::*obtained = &statistics::obtained_thp;
};

/// The allocator of `Kind` for elements of `T`.
template <class Kind, class T>
using alloc_t = typename Kind::template allocator<T>;

/// The kinds, for TYPED_TEST_SUITE(Suite, kinds, kind_names).
using kinds = ::testing::Types<thp_kind, hugetlb_kind, hugetlb_fallback_kind, collapse_kind>;

/// The kinds' names in the tests' names: Suite/Thp.Name, Suite/HugeTlb2m.Name, ...
struct kind_names {
  template <class Kind>
  static std::string GetName(int /*index*/) {
    if (std::is_same_v<Kind, thp_kind>) return "Thp";
    if (std::is_same_v<Kind, hugetlb_kind>) return "HugeTlb2m";
    if (std::is_same_v<Kind, hugetlb_fallback_kind>) return "HugeTlb2mFallback";
    return "Collapse";
  }
};

}  // namespace
}  // namespace hugepage

// Skips (or fails under HUGEPAGE_REQUIRE=1) a strict hugetlb kind when the 2 MiB pool is short.
#define HUGEPAGE_REQUIRE_KIND_POOL(Kind, pages)                     \
  do {                                                              \
    if constexpr (Kind::strict_pool) {                              \
      HUGEPAGE_REQUIRE_POOL(::hugepage::page_size::huge_2m, pages); \
    }                                                               \
  } while (0)
