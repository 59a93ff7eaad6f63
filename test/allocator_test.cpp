// test/allocator_test.cpp - the STL allocators: with every standard and Abseil container, bad
// input and statistics, over the four kinds of kinds.hpp. Coverage asserted from the kernel
// (backing_of, pool counters), small requests and options: allocator_coverage_test.cpp.
//
// Statistics are per process and gtest runs one test at a time, so stats() deltas are exact. The
// hugetlb pool counters are system-wide: only the 1 GiB test compares them, and only while it owns
// the page it allocated.
#include "hugepage/allocator.hpp"

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

#include "contents.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/system.hpp"
#include "kinds.hpp"
#include "support.hpp"

namespace hugepage {
namespace {

using units::mib;
constexpr std::size_t huge_2m_bytes = bytes_of(page_size::huge_2m);

// ---- the allocator kinds under test: kinds.hpp --------------------------------------------------

using test::holds_keys;
using test::holds_sequence;
using test::value_of;

// ---- compile-time allocator requirements -------------------------------------------------------

template <class A, class B, class = void>
struct comparable : std::false_type {};
template <class A, class B>
struct comparable<A, B, std::void_t<decltype(std::declval<const A&>() == std::declval<const B&>())>>
    : std::true_type {};

template <class Kind>
constexpr bool meets_allocator_requirements() {
  using A = alloc_t<Kind, int>;
  using B = alloc_t<Kind, double>;
  using traits = std::allocator_traits<A>;
  static_assert(std::is_same_v<typename traits::value_type, int>);
  static_assert(std::is_same_v<typename A::template rebind<double>::other, B>);
  static_assert(std::is_same_v<typename traits::template rebind_alloc<double>, B>);
  static_assert(std::is_same_v<typename traits::template rebind_alloc<int>, A>);
  static_assert(std::is_same_v<typename traits::size_type, std::size_t>);
  static_assert(std::is_same_v<typename traits::pointer, int*>);
  static_assert(traits::is_always_equal::value);
  static_assert(traits::propagate_on_container_move_assignment::value);
  static_assert(!traits::propagate_on_container_copy_assignment::value);
  static_assert(!traits::propagate_on_container_swap::value);
  static_assert(std::is_empty_v<A>, "stateless: containers pay no space for it");
  static_assert(std::is_nothrow_default_constructible_v<A>);
  static_assert(std::is_nothrow_copy_constructible_v<A>);
  static_assert(std::is_nothrow_constructible_v<A, const B&>, "converting constructor");
  static_assert(noexcept(std::declval<A&>().deallocate(nullptr, 0)));
  static_assert(A{} == A{} && !(A{} != A{}));
  static_assert(A{} == B{} && B{} == A{} && !(A{} != B{}), "rebound copies free each other's");
  static_assert(A(B{}) == A{});
  static_assert(A::get_strategy() == B::get_strategy());
  return true;
}
static_assert(meets_allocator_requirements<thp_kind>());
static_assert(meets_allocator_requirements<hugetlb_kind>());
static_assert(meets_allocator_requirements<hugetlb_fallback_kind>());
static_assert(meets_allocator_requirements<collapse_kind>());

// Allocators of different strategies cannot free each other's memory, so they do not compare.
static_assert(!comparable<thp_allocator<int>, collapse_allocator<int>>::value);
static_assert(
    !comparable<huge_page_allocator<int>, huge_page_allocator<int, page_size::huge_1g>>::value);
static_assert(!comparable<huge_page_allocator<int>,
                          huge_page_allocator<int, page_size::huge_2m, fallback>>::value);

// Each alias carries the strategy it names.
static_assert(thp_allocator<int>::get_strategy().how() == method::thp);
static_assert(collapse_allocator<int>::get_strategy().how() == method::collapse);
static_assert(huge_page_allocator<int>::get_strategy().how() == method::hugetlb);
static_assert(huge_page_allocator<int>::get_strategy().size() == page_size::huge_2m);
static_assert(huge_page_allocator<int>::get_strategy().policy() == pool_policy::strict);
static_assert(huge_page_allocator<int, page_size::huge_1g, fallback>::get_strategy().size() ==
              page_size::huge_1g);
static_assert(huge_page_allocator<int, page_size::huge_1g, fallback>::get_strategy().policy() ==
              pool_policy::fallback);
static_assert(thp_allocator<int, prefault_options>::get_strategy().options().prefault);
static_assert(!thp_allocator<int>::get_strategy().options().prefault);

// ---- helpers -----------------------------------------------------------------------------------

template <class Map>
void fill_map(Map& m, std::size_t n) {
  for (std::uint64_t k = 0; k < n; ++k) m.emplace(k, value_of(k));
}

// Copy, move, move assignment and swap of a filled map; checks contents after each.
template <class Map>
void check_map_value_semantics(Map& m, std::size_t n) {
  Map copy(m);
  EXPECT_TRUE(holds_keys(copy, n)) << "copy";
  copy.erase(std::uint64_t{0});
  EXPECT_TRUE(holds_keys(m, n)) << "the copy is independent";
  Map moved(std::move(m));
  EXPECT_TRUE(holds_keys(moved, n)) << "move construction";
  Map assigned;
  assigned.emplace(n + 1, 1);
  assigned = std::move(moved);
  EXPECT_TRUE(holds_keys(assigned, n)) << "move assignment";
  using std::swap;
  swap(assigned, copy);
  EXPECT_EQ(assigned.size(), n - 1);
  EXPECT_TRUE(holds_keys(copy, n)) << "swap";
}

using hugepage::test::is_aligned;
using hugepage::test::live_mappings;

// ---- typed tests over the four allocator kinds -------------------------------------------------

template <class Kind>
class AllocatorTest : public ::testing::Test {};

// The sizes below are written for a 2 MiB huge page and scaled by a kind's threshold over 2 MiB:
// 1, but 16 for THP on arm64 with 16 KiB pages, whose PMD (and so the threshold) is 32 MiB.
template <class Kind>
std::size_t scale_of() {
  return alloc_t<Kind, unsigned char>::get_strategy().threshold() / huge_2m_bytes;
}

// Whether a request of `bytes` of this kind takes the mapped path.
template <class Kind>
bool mapped(std::size_t bytes) {
  return alloc_t<Kind, unsigned char>::get_strategy().is_mapped(bytes);
}

TYPED_TEST_SUITE(AllocatorTest, kinds, kind_names);

TYPED_TEST(AllocatorTest, VectorKeepsContentsThroughGrowthCopyMoveAndSwap) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 32);
  using vector = std::vector<std::uint64_t, alloc_t<TypeParam, std::uint64_t>>;
  const std::size_t n = scale_of<TypeParam>() * 6 * mib / sizeof(std::uint64_t) + 3;
  const std::size_t live_before = live_mappings();
  {
    vector a;
    for (std::size_t i = 0; i < n; ++i) a.push_back(value_of(i));
    EXPECT_TRUE(holds_sequence(a, n)) << "after growth";
    EXPECT_GT(live_mappings(), live_before)
        << "a vector of three huge pages must take the mapped path";
    EXPECT_TRUE(is_aligned(a.data(), huge_2m_bytes)) << "mapped blocks start on a huge page";

    vector b(a);
    EXPECT_NE(b.data(), a.data());
    EXPECT_TRUE(holds_sequence(b, n)) << "copy";
    b[0] = 1;
    EXPECT_TRUE(holds_sequence(a, n)) << "the copy is independent";
    b[0] = value_of(0);

    const std::uint64_t* const buffer = a.data();
    vector c(std::move(a));
    EXPECT_EQ(c.data(), buffer) << "move construction takes the buffer";
    EXPECT_TRUE(holds_sequence(c, n)) << "move construction";

    vector d(1000, 7);
    d = std::move(c);
    EXPECT_EQ(d.data(), buffer) << "propagate_on_container_move_assignment: the buffer moves";
    EXPECT_TRUE(holds_sequence(d, n)) << "move assignment";

    b.push_back(value_of(n));
    const std::uint64_t* const b_buffer = b.data();
    std::swap(b, d);
    EXPECT_EQ(b.data(), buffer);
    EXPECT_EQ(d.data(), b_buffer);
    EXPECT_TRUE(holds_sequence(b, n)) << "swap";
    EXPECT_TRUE(holds_sequence(d, n + 1)) << "swap";

    // Shrinking below the threshold moves the data from a mapping to the small path.
    d.resize(1000);
    d.shrink_to_fit();
    EXPECT_TRUE(holds_sequence(d, 1000)) << "shrink_to_fit below the threshold";
  }
  EXPECT_EQ(live_mappings(), live_before) << "every mapping released";
}

TYPED_TEST(AllocatorTest, VectorOfOverAlignedElementsIsAlignedAfterGrowth) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 16);
  struct alignas(4096) page4k {
    std::uint64_t first = 0;
    unsigned char rest[4096 - sizeof(std::uint64_t)] = {};
  };
  std::vector<page4k, alloc_t<TypeParam, page4k>> v;
  constexpr std::size_t n = 4 * mib / sizeof(page4k) + 1;  // crosses the threshold
  for (std::size_t i = 0; i < n; ++i) {
    v.emplace_back();
    v.back().first = value_of(i);
    ASSERT_TRUE(is_aligned(v.data(), 4096)) << "capacity " << v.capacity();
  }
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i].first, value_of(i)) << i;
}

TYPED_TEST(AllocatorTest, DequeKeepsContents) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 40);
  const std::size_t live_before = live_mappings();
  {
    // Many small elements: the deque's blocks and map are below the threshold.
    using small_deque = std::deque<std::uint64_t, alloc_t<TypeParam, std::uint64_t>>;
    constexpr std::size_t n = 300000;
    small_deque d;
    for (std::size_t i = n / 2; i-- > 0;) d.push_front(value_of(i));
    for (std::size_t i = n / 2; i < n; ++i) d.push_back(value_of(i));
    EXPECT_TRUE(holds_sequence(d, n));
    small_deque copy(d);
    EXPECT_TRUE(holds_sequence(copy, n)) << "copy";
    small_deque moved(std::move(d));
    EXPECT_TRUE(holds_sequence(moved, n)) << "move";
    small_deque assigned(3, 3);
    assigned = std::move(copy);
    EXPECT_TRUE(holds_sequence(assigned, n)) << "move assignment";
    assigned.pop_back();
    std::swap(assigned, moved);
    EXPECT_TRUE(holds_sequence(assigned, n)) << "swap";
    EXPECT_TRUE(holds_sequence(moved, n - 1)) << "swap";
  }
  {
    // 2 MiB elements: libstdc++ gives each its own block, so every block is mapped.
    struct block {
      std::uint64_t words[huge_2m_bytes / sizeof(std::uint64_t)];
    };
    using big_deque = std::deque<block, alloc_t<TypeParam, block>>;
    constexpr std::size_t n = 6;
    big_deque d;
    for (std::size_t i = 0; i < n; ++i) {
      block& b = d.emplace_back();
      b.words[0] = value_of(i);
      b.words[std::size(b.words) - 1] = value_of(i + 100);
    }
    if (mapped<TypeParam>(sizeof(block))) {
      EXPECT_GE(live_mappings(), live_before + n) << "each 2 MiB element block is mapped";
    } else {
      EXPECT_EQ(live_mappings(), live_before) << "2 MiB blocks are below the threshold";
    }
    const auto holds = [](const big_deque& q, std::size_t count) {
      if (q.size() != count) return false;
      for (std::size_t i = 0; i < count; ++i) {
        if (q[i].words[0] != value_of(i) ||
            q[i].words[std::size(q[i].words) - 1] != value_of(i + 100)) {
          return false;
        }
      }
      return true;
    };
    EXPECT_TRUE(holds(d, n));
    big_deque copy(d);
    EXPECT_TRUE(holds(copy, n)) << "copy";
    big_deque moved(std::move(d));
    EXPECT_TRUE(holds(moved, n)) << "move";
    copy.pop_back();
    std::swap(copy, moved);
    EXPECT_TRUE(holds(copy, n)) << "swap";
    EXPECT_TRUE(holds(moved, n - 1)) << "swap";
  }
  EXPECT_EQ(live_mappings(), live_before);
}

TYPED_TEST(AllocatorTest, StringKeepsContents) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 32);
  using string = std::basic_string<char, std::char_traits<char>, alloc_t<TypeParam, char>>;
  const std::size_t n = scale_of<TypeParam>() * 5 * mib + 11;
  const auto expected = [](std::size_t i) { return static_cast<char>('a' + i % 26); };
  const auto holds = [&](const string& s, std::size_t count) {
    if (s.size() != count) return false;
    for (std::size_t i = 0; i < count; ++i) {
      if (s[i] != expected(i)) return false;
    }
    return s.c_str()[count] == '\0';
  };
  const std::size_t live_before = live_mappings();
  {
    string s;
    for (std::size_t i = 0; i < n; ++i) s.push_back(expected(i));
    EXPECT_TRUE(holds(s, n)) << "after growth";
    EXPECT_GT(live_mappings(), live_before)
        << "a string of 2.5 huge pages must take the mapped path";
    string copy(s);
    EXPECT_TRUE(holds(copy, n)) << "copy";
    EXPECT_NE(copy.data(), s.data());
    const char* const buffer = s.data();
    string moved(std::move(s));
    EXPECT_EQ(moved.data(), buffer);
    EXPECT_TRUE(holds(moved, n)) << "move";
    string assigned("short");
    assigned = std::move(moved);
    EXPECT_EQ(assigned.data(), buffer);
    EXPECT_TRUE(holds(assigned, n)) << "move assignment";
    copy.append(copy.substr(0, 26));
    std::swap(copy, assigned);
    EXPECT_TRUE(holds(copy, n)) << "swap";
    EXPECT_EQ(assigned.size(), n + 26);
    EXPECT_EQ(assigned.compare(0, n, copy), 0);
  }
  EXPECT_EQ(live_mappings(), live_before);
}

TYPED_TEST(AllocatorTest, MapKeepsContents) {
  // Tree nodes are small: all of them take the small path.
  using map = std::map<std::uint64_t, std::uint64_t, std::less<>,
                       alloc_t<TypeParam, std::pair<const std::uint64_t, std::uint64_t>>>;
  constexpr std::size_t n = 100000;
  const std::size_t live_before = live_mappings();
  {
    map m;
    fill_map(m, n);
    EXPECT_TRUE(holds_keys(m, n));
    EXPECT_EQ(live_mappings(), live_before) << "map nodes are below the threshold";
    check_map_value_semantics(m, n);
  }
  EXPECT_EQ(live_mappings(), live_before);
}

// Fills a hash map of 300k entries (its table is mapped), rehashes it to 1M buckets, and checks
// the contents after each step and through copy, move and swap; every mapping is gone after.
template <class Map>
void expect_map_keeps_contents_through_rehash(const char* table, std::size_t scale) {
  const std::size_t n = 300000 * scale;  // a table of more than a huge page
  const std::size_t live_before = live_mappings();
  {
    Map m;
    fill_map(m, n);
    EXPECT_TRUE(holds_keys(m, n)) << "after growth";
    EXPECT_GT(live_mappings(), live_before) << "the " << table << " of 300k entries is mapped";
    m.rehash(scale << 20);
    EXPECT_GE(m.bucket_count(), scale << 20);
    EXPECT_TRUE(holds_keys(m, n)) << "after rehash";
    check_map_value_semantics(m, n);
  }
  EXPECT_EQ(live_mappings(), live_before);
}

TYPED_TEST(AllocatorTest, UnorderedMapKeepsContentsThroughRehash) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 32);
  using map =
      std::unordered_map<std::uint64_t, std::uint64_t, std::hash<std::uint64_t>, std::equal_to<>,
                         alloc_t<TypeParam, std::pair<const std::uint64_t, std::uint64_t>>>;
  expect_map_keeps_contents_through_rehash<map>("bucket array", scale_of<TypeParam>());
}

TYPED_TEST(AllocatorTest, FlatHashMapKeepsContentsThroughRehash) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 48);
  using map =
      absl::flat_hash_map<std::uint64_t, std::uint64_t, absl::Hash<std::uint64_t>,
                          std::equal_to<std::uint64_t>,
                          alloc_t<TypeParam, std::pair<const std::uint64_t, std::uint64_t>>>;
  expect_map_keeps_contents_through_rehash<map>("slot array", scale_of<TypeParam>());
}

TYPED_TEST(AllocatorTest, NodeHashMapKeepsContentsThroughRehash) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 32);
  using map =
      absl::node_hash_map<std::uint64_t, std::uint64_t, absl::Hash<std::uint64_t>,
                          std::equal_to<std::uint64_t>,
                          alloc_t<TypeParam, std::pair<const std::uint64_t, std::uint64_t>>>;
  const std::size_t n = 300000 * scale_of<TypeParam>();
  const std::size_t live_before = live_mappings();
  {
    map m;
    fill_map(m, n);
    EXPECT_TRUE(holds_keys(m, n)) << "after growth";
    EXPECT_GT(live_mappings(), live_before) << "the slot array of 300k entries is mapped";
    const auto* node = &*m.find(std::uint64_t{12345});
    m.rehash(scale_of<TypeParam>() << 20);
    EXPECT_EQ(&*m.find(std::uint64_t{12345}), node) << "nodes stay put across a rehash";
    EXPECT_TRUE(holds_keys(m, n)) << "after rehash";
    check_map_value_semantics(m, n);
  }
  EXPECT_EQ(live_mappings(), live_before);
}

TYPED_TEST(AllocatorTest, AllocateSharedBuildsTheObjectInAMapping) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 8);
  struct big_object {
    std::uint64_t words[4 * mib / sizeof(std::uint64_t)];
  };
  // One mapping where 4 MiB reach the threshold; none where it is more (32 MiB THP).
  const std::size_t mappings = mapped<TypeParam>(sizeof(big_object)) ? 1 : 0;
  const std::size_t live_before = live_mappings();
  {
    auto p = std::allocate_shared<big_object>(alloc_t<TypeParam, big_object>{});
    EXPECT_EQ(live_mappings(), live_before + mappings)
        << "object and control block share one mapping";
    EXPECT_EQ(p->words[0], 0u) << "value-initialised";
    EXPECT_EQ(p->words[std::size(p->words) - 1], 0u) << "value-initialised";
    for (std::size_t i = 0; i < std::size(p->words); i += 4096) p->words[i] = value_of(i);
    std::shared_ptr<big_object> copy = p;
    EXPECT_EQ(p.use_count(), 2);
    p.reset();
    EXPECT_EQ(live_mappings(), live_before + mappings) << "still owned by the copy";
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < std::size(copy->words); i += 4096) {
      wrong += copy->words[i] != value_of(i);
    }
    EXPECT_EQ(wrong, 0u);

    // A small object through the same allocator takes the small path.
    auto small = std::allocate_shared<std::uint64_t>(alloc_t<TypeParam, std::uint64_t>{}, 42u);
    EXPECT_EQ(*small, 42u);
    EXPECT_EQ(live_mappings(), live_before + mappings);
  }
  EXPECT_EQ(live_mappings(), live_before) << "the last owner unmaps the block";
}

TYPED_TEST(AllocatorTest, OverflowingCountThrowsExactlyBadArrayNewLength) {
  const auto expect_bad_array_new_length = [](auto allocator, std::size_t n) {
    try {
      (void)allocator.allocate(n);
      ADD_FAILURE() << "allocate(" << n << ") returned";
    } catch (const std::exception& e) {
      EXPECT_EQ(typeid(e), typeid(std::bad_array_new_length)) << "threw " << typeid(e).name();
    }
  };
  struct three {
    unsigned char bytes[3];
  };
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  expect_bad_array_new_length(alloc_t<TypeParam, std::uint64_t>{}, max / 8 + 1);
  expect_bad_array_new_length(alloc_t<TypeParam, std::uint64_t>{}, max);
  expect_bad_array_new_length(alloc_t<TypeParam, three>{}, max / 3 + 1);
}

TYPED_TEST(AllocatorTest, CountTooLargeToMapThrowsBadAlloc) {
  // n * sizeof(T) does not overflow, but rounding it up to a huge page does.
  alloc_t<TypeParam, std::uint64_t> a;
  const statistics before = stats();
  EXPECT_THROW((void)a.allocate(std::numeric_limits<std::size_t>::max() / 8), std::bad_alloc);
  EXPECT_EQ(stats().live_mappings, before.live_mappings);
  EXPECT_EQ(stats().mapped_bytes(), before.mapped_bytes());
}

TYPED_TEST(AllocatorTest, ZeroElementsAllocateAndDeallocate) {
  alloc_t<TypeParam, std::uint64_t> a;
  const statistics before = stats();
  std::uint64_t* const p = a.allocate(0);
  std::uint64_t* const q = a.allocate(0);
  EXPECT_NE(p, nullptr);
  EXPECT_NE(p, q) << "each allocation is distinct";
  a.deallocate(p, 0);
  a.deallocate(q, 0);
  EXPECT_EQ(stats().live_mappings, before.live_mappings) << "nothing mapped for 0 elements";

  std::vector<std::uint64_t, alloc_t<TypeParam, std::uint64_t>> v;
  v.reserve(0);
  v.shrink_to_fit();
  EXPECT_TRUE(v.empty());
}

TYPED_TEST(AllocatorTest, OverAlignedTypesAreAlignedOnEveryPath) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 16);
  struct alignas(64) line {
    std::uint64_t word;
  };
  struct alignas(4096) page4k {
    std::uint64_t word;
  };
  const auto check = [](auto allocator, std::size_t n, const char* path) {
    using T = typename decltype(allocator)::value_type;
    const std::size_t live_before = live_mappings();
    T* const p = allocator.allocate(n);
    const bool mapped = live_mappings() == live_before + 1;
    EXPECT_EQ(mapped, n * sizeof(T) >= decltype(allocator)::get_strategy().threshold()) << path;
    EXPECT_TRUE(is_aligned(p, alignof(T)))
        << path << ": " << static_cast<const void*>(p) << " is not aligned to " << alignof(T);
    p[0].word = 1;
    p[n - 1].word = 2;
    EXPECT_EQ(p[n - 1].word, 2u) << path;
    if (n > 1) {
      EXPECT_EQ(p[0].word, 1u) << path;
    }
    allocator.deallocate(p, n);
    EXPECT_EQ(live_mappings(), live_before) << path;
  };
  check(alloc_t<TypeParam, line>{}, 1, "small, 64");
  check(alloc_t<TypeParam, line>{}, 1000, "small, 64");
  check(alloc_t<TypeParam, line>{}, 4 * mib / sizeof(line) + 1, "mapped, 64");
  check(alloc_t<TypeParam, page4k>{}, 1, "small, 4096");
  check(alloc_t<TypeParam, page4k>{}, 100, "small, 4096");
  check(alloc_t<TypeParam, page4k>{}, 4 * mib / sizeof(page4k) + 1, "mapped, 4096");
}

TYPED_TEST(AllocatorTest, StatisticsFollowOneMapping) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 8);
  const std::size_t bytes = scale_of<TypeParam>() * 16 * mib;
  alloc_t<TypeParam, unsigned char> a;
  const statistics before = stats();
  unsigned char* const p = a.allocate(bytes);
  const statistics during = stats();

  EXPECT_EQ(during.*TypeParam::requested - before.*TypeParam::requested, bytes);
  std::size_t statistics::*obtained = TypeParam::obtained;
  if (during.fallbacks_to_thp != before.fallbacks_to_thp) obtained = &statistics::obtained_thp;
  // THP off (effective 2 MiB mode never): a THP or collapse request is counted as base pages
  // (docs/failure-modes.md), and collapse_allocator makes no MADV_COLLAPSE call.
  const bool thp_request = TypeParam::obtained == &statistics::obtained_thp;
  const bool thp_off = thp_request && !test::thp_usable();
  if (thp_off) obtained = &statistics::obtained_base;
  EXPECT_EQ(during.*obtained - before.*obtained, bytes);
  EXPECT_EQ(during.mapped_bytes() - before.mapped_bytes(), bytes) << "one backing only";
  EXPECT_EQ(during.live_mappings, before.live_mappings + 1);
  if (std::is_same_v<TypeParam, collapse_kind>) {
    EXPECT_EQ(during.prefaulted_bytes - before.prefaulted_bytes, bytes) << "collapse populates";
    if (thp_off) {
      EXPECT_EQ(during.collapse_attempts, before.collapse_attempts) << "THP never: no call";
    } else if (!before.collapse_unsupported) {
      EXPECT_EQ(during.collapse_attempts, before.collapse_attempts + 1) << "one MADV_COLLAPSE";
    }
  } else {
    EXPECT_EQ(during.prefaulted_bytes, before.prefaulted_bytes) << "no pre-fault by default";
    EXPECT_EQ(during.collapse_attempts, before.collapse_attempts);
  }

  a.deallocate(p, bytes);
  const statistics after = stats();
  EXPECT_EQ(after.requested_thp, before.requested_thp);
  EXPECT_EQ(after.requested_collapse, before.requested_collapse);
  EXPECT_EQ(after.requested_hugetlb_2m, before.requested_hugetlb_2m);
  EXPECT_EQ(after.requested_hugetlb_1g, before.requested_hugetlb_1g);
  EXPECT_EQ(after.obtained_hugetlb_2m, before.obtained_hugetlb_2m);
  EXPECT_EQ(after.obtained_hugetlb_1g, before.obtained_hugetlb_1g);
  EXPECT_EQ(after.obtained_thp, before.obtained_thp);
  EXPECT_EQ(after.obtained_base, before.obtained_base);
  EXPECT_EQ(after.live_mappings, before.live_mappings);
}

TYPED_TEST(AllocatorTest, MappedLengthIsRoundedToWholeHugePages) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 4);
  alloc_t<TypeParam, unsigned char> a;
  const std::size_t page = scale_of<TypeParam>() * huge_2m_bytes;  // the kind's huge page
  const statistics before = stats();
  unsigned char* const p = a.allocate(page + 1);
  EXPECT_EQ(stats().*TypeParam::requested - before.*TypeParam::requested, 2 * page);
  p[page] = 1;
  a.deallocate(p, page + 1);
  EXPECT_EQ(stats().*TypeParam::requested, before.*TypeParam::requested);
}

}  // namespace
}  // namespace hugepage
