// Tests of the node arena (arena.hpp), arena_allocator and the pmr resource over an arena:
// differential runs against std::allocator, AddressSanitizer poisoning, size classes, over-aligned
// nodes. Release of empty huge pages, 1 GiB pages and coverage: arena_pages_test.cpp; the strong
// guarantee under a hugetlb cgroup limit: arena_throws_test.cpp; threads: arena_threads_test.cpp.
#include "hugepage/arena.hpp"

#include <absl/container/btree_map.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory_resource>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "arena_support.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/arena_resource.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/pmr.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::arena;
using hugepage::arena_allocator;
using hugepage::page_size;
using hugepage::strategy;
using hugepage::unsynchronized_arena;
using hugepage::test::under_asan;

using hugepage::test::kMiB;

using hugepage::test::scaled;

using hugepage::test::thp_usable;

// ---- compile-time contract --------------------------------------------------------------------

using pair_alloc = arena_allocator<std::pair<const int, int>>;
static_assert(std::is_same_v<std::allocator_traits<pair_alloc>::rebind_alloc<double>,
                             arena_allocator<double>>);
static_assert(std::allocator_traits<pair_alloc>::propagate_on_container_copy_assignment::value);
static_assert(std::allocator_traits<pair_alloc>::propagate_on_container_move_assignment::value);
static_assert(std::allocator_traits<pair_alloc>::propagate_on_container_swap::value);
static_assert(!std::allocator_traits<pair_alloc>::is_always_equal::value);
static_assert(!std::is_default_constructible_v<pair_alloc>, "bound to an arena when made");
static_assert(std::is_nothrow_copy_constructible_v<pair_alloc>);
static_assert(!std::is_copy_constructible_v<arena> && !std::is_move_constructible_v<arena>);

TEST(ArenaAllocator, EqualWhenTheArenaIsTheSameAcrossRebinds) {
  arena a;
  arena b;
  const arena_allocator<int> x(a);
  const arena_allocator<double> y(x);
  const arena_allocator<int> z(b);
  EXPECT_TRUE(x == y);
  EXPECT_FALSE(x != y);
  EXPECT_TRUE(x != z);
  EXPECT_EQ(&y.get_arena(), &a);
}

TEST(ArenaAllocator, OverflowingCountThrowsBadArrayNewLength) {
  unsynchronized_arena a;
  arena_allocator<std::uint64_t, unsynchronized_arena> alloc(a);
  EXPECT_THROW((void)alloc.allocate(SIZE_MAX / 4), std::bad_array_new_length);
  EXPECT_EQ(a.stats().mapped_bytes, 0u) << "nothing mapped for a refused request";
}

// ---- size classes, stats, large requests -----------------------------------------------------

TEST(Arena, SlotsOfOneClassArePackedWithoutHeaders) {
  unsynchronized_arena a;
  std::vector<char*> slots;
  for (int i = 0; i < 1000; ++i) slots.push_back(static_cast<char*>(a.allocate(48, 8)));
  for (std::size_t i = 1; i < slots.size(); ++i) {
    EXPECT_EQ(slots[i] - slots[i - 1], 48) << "slot " << i;
  }
  const auto s = a.stats();
  EXPECT_EQ(s.live_bytes, 48u * 1000);
  EXPECT_EQ(s.slot_bytes, 48u * 1000);
  EXPECT_EQ(s.pages, 1u);
  EXPECT_EQ(s.mapped_bytes, a.page_bytes());
  const auto cls = std::find_if(s.classes.begin(), s.classes.end(),
                                [](const auto& c) { return c.slot_bytes == 48; });
  ASSERT_NE(cls, s.classes.end());
  EXPECT_EQ(cls->live_slots, 1000u);
  EXPECT_EQ(cls->slabs, 1u);
  for (char* p : slots) a.deallocate(p, 48, 8);
  EXPECT_EQ(a.stats().live_bytes, 0u);
}

// Slabs are aligned to their 2 MiB size: headers at one fixed offset would all share a cache set,
// and a churn freeing into random slabs would miss on the header at nearly every free (measured in
// bench/arena_bench: node_hash_map erase + insert 543 ns with one offset, 367 ns with colours).
TEST(ArenaLayout, HeadersOfNeighbouringSlabsSitInDifferentCacheLines) {
  constexpr std::size_t slab = std::size_t{2} << 20;
  std::set<std::size_t> offsets;
  for (std::uintptr_t i = 0; i < hugepage::detail::arena_header_colours; ++i) {
    const std::size_t offset =
        hugepage::detail::arena_header_offset(reinterpret_cast<void*>((1000 + i) * slab), slab);
    EXPECT_EQ(offset % 64, 0u) << "slab " << i << ": a header starts a cache line";
    EXPECT_LE(offset + sizeof(hugepage::detail::arena_slab),
              hugepage::detail::arena_slab_data_offset)
        << "slab " << i << ": the header lies before slot 0";
    offsets.insert(offset);
  }
  EXPECT_EQ(offsets.size(), hugepage::detail::arena_header_colours);
}

TEST(ArenaLayout, NoSlotOverlapsItsSlabsHeaderArea) {
  unsynchronized_arena a;
  const std::size_t per_slab =
      (a.slab_bytes() - hugepage::detail::arena_slab_data_offset) / 64;  // 64-byte slots
  std::vector<char*> slots;
  for (std::size_t i = 0; i < 3 * per_slab; ++i) {
    slots.push_back(static_cast<char*>(a.allocate(64, 8)));
  }
  // Three slabs: three pages of 2 MiB, or one page where a page holds 16 slabs (32 MiB THP).
  ASSERT_EQ(a.stats().pages, (3 * a.slab_bytes() + a.page_bytes() - 1) / a.page_bytes());
  for (char* p : slots) {
    const std::size_t in_slab = reinterpret_cast<std::uintptr_t>(p) & (a.slab_bytes() - 1);
    ASSERT_GE(in_slab, hugepage::detail::arena_slab_data_offset);
    std::memset(p, 0xa5, 64);  // a slot over a header would wreck the slab's lists
  }
  for (char* p : slots) a.deallocate(p, 64, 8);
  EXPECT_EQ(a.stats().live_bytes, 0u);
}

TEST(Arena, FreedSlotsAreReusedFirst) {
  unsynchronized_arena a;
  void* keep = a.allocate(24, 8);  // keeps the slab in use
  void* p = a.allocate(24, 8);
  a.deallocate(p, 24, 8);
  EXPECT_EQ(a.allocate(24, 8), p);
  a.deallocate(p, 24, 8);
  a.deallocate(keep, 24, 8);
}

TEST(Arena, RequestsRoundUpToTheNextClass) {
  unsynchronized_arena a;
  // 8-byte steps to 256 bytes, 64-byte steps to 1 KiB.
  const std::pair<std::size_t, std::size_t> cases[] = {{1, 8},     {0, 8},     {9, 16},
                                                       {250, 256}, {257, 320}, {1000, 1024}};
  for (const auto& [bytes, slot] : cases) {
    void* p = a.allocate(bytes, 1);
    void* q = a.allocate(bytes, 1);
    EXPECT_EQ(static_cast<char*>(q) - static_cast<char*>(p), static_cast<std::ptrdiff_t>(slot))
        << bytes << " bytes";
    a.deallocate(q, bytes, 1);
    a.deallocate(p, bytes, 1);
  }
}

TEST(Arena, LargeRequestsGoStraightToTheStrategy) {
  if (!thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not enabled (madvise or always)");
  unsynchronized_arena a;
  const std::size_t mapped_before = hugepage::stats().requested_thp;
  // Two huge pages: 4 MiB, or 64 MiB where the PMD is 32 MiB (arm64 with 16 KiB pages).
  const std::size_t big_bytes = hugepage::test::at_least_pmds(4 * kMiB, 2);
  void* big = a.allocate(big_bytes, 64);
  EXPECT_TRUE(hugepage::test::is_aligned(big, hugepage::thp_page_bytes()))
      << "mapped by the strategy";
  EXPECT_EQ(hugepage::stats().requested_thp, mapped_before + big_bytes);
  void* mid = a.allocate(4096, 8);  // above the slots, below the strategy's threshold
  auto s = a.stats();
  EXPECT_EQ(s.large_bytes, big_bytes + 4096);
  EXPECT_EQ(s.pages, 0u) << "no slab for large requests";
  a.deallocate(mid, 4096, 8);
  a.deallocate(big, big_bytes, 64);
  EXPECT_EQ(a.stats().large_bytes, 0u);
  EXPECT_EQ(hugepage::stats().requested_thp, mapped_before);
}

// ---- over-aligned nodes -----------------------------------------------------------------------

template <std::size_t Align>
struct alignas(Align) aligned_value {
  std::uint64_t value = 0;
  friend bool operator<(const aligned_value& a, const aligned_value& b) {
    return a.value < b.value;
  }
};

template <std::size_t Align>
void expect_aligned_nodes() {
  unsynchronized_arena a;
  using value = aligned_value<Align>;
  arena_allocator<value, unsynchronized_arena> alloc(a);
  std::list<value, arena_allocator<value, unsynchronized_arena>> list(alloc);
  std::set<value, std::less<>, arena_allocator<value, unsynchronized_arena>> set(alloc);
  for (std::uint64_t i = 0; i < 20000; ++i) {
    list.push_back(value{i});
    set.insert(value{i});
  }
  for (const value& v : list) ASSERT_TRUE(hugepage::test::is_aligned(&v, Align)) << Align;
  for (const value& v : set) ASSERT_TRUE(hugepage::test::is_aligned(&v, Align)) << Align;
  for (int i = 0; i < 100; ++i) {
    value* p = alloc.allocate(static_cast<std::size_t>(i % 7 + 1));
    EXPECT_TRUE(hugepage::test::is_aligned(p, Align)) << Align << " x " << i % 7 + 1;
    alloc.deallocate(p, static_cast<std::size_t>(i % 7 + 1));
  }
  EXPECT_GT(a.stats().pages, 0u) << "served from slabs";
}

TEST(Arena, OverAlignedNodesGetAlignedSlots) {
  expect_aligned_nodes<16>();
  expect_aligned_nodes<64>();
  expect_aligned_nodes<128>();
  expect_aligned_nodes<256>();
}

// std::pmr::memory_resource and the allocator requirements promise the alignment at every size,
// 0 bytes included: every power of two from 1 byte to 4 MiB (slabs, ::operator new through the
// strategy, above a slab), through the arena, the pmr resource and the allocator.
TEST(Arena, ZeroByteRequestsAreAlignedAsAsked) {
  unsynchronized_arena a;
  hugepage::pmr::unsynchronized_arena_resource resource(a);
  for (std::size_t align = 1; align <= 4 * kMiB; align *= 2) {
    std::vector<void*> direct, pmr;
    for (int i = 0; i < 16; ++i) {
      direct.push_back(a.allocate(0, align));
      pmr.push_back(resource.allocate(0, align));
      EXPECT_TRUE(hugepage::test::is_aligned(direct.back(), align)) << align << " call " << i;
      EXPECT_TRUE(hugepage::test::is_aligned(pmr.back(), align)) << align << " call " << i;
    }
    for (void* p : direct) a.deallocate(p, 0, align);
    for (void* p : pmr) resource.deallocate(p, 0, align);
  }
  const auto all_aligned = [](auto alloc) {
    using value = typename decltype(alloc)::value_type;
    std::vector<value*> got;
    for (int i = 0; i < 16; ++i) got.push_back(alloc.allocate(0));
    bool aligned = true;
    for (value* p : got) aligned = aligned && hugepage::test::is_aligned(p, alignof(value));
    for (value* p : got) alloc.deallocate(p, 0);
    return aligned;
  };
  EXPECT_TRUE(all_aligned(arena_allocator<aligned_value<64>, unsynchronized_arena>(a)));
  EXPECT_TRUE(all_aligned(arena_allocator<aligned_value<256>, unsynchronized_arena>(a)));
  const auto s = a.stats();
  EXPECT_EQ(s.live_bytes + s.slot_bytes + s.large_bytes + s.slabs, 0u) << "everything freed";
}

TEST(Arena, AlignmentAboveTheSlabsGoesToTheStrategyAligned) {
  unsynchronized_arena a;
  for (const std::size_t align : {512u, 4096u}) {
    void* p = a.allocate(64, align);
    EXPECT_TRUE(hugepage::test::is_aligned(p, align)) << align;
    a.deallocate(p, 64, align);
  }
  EXPECT_EQ(a.stats().pages, 0u);
}

// ---- differential: the same operations with std::allocator ------------------------------------

// Two arenas, two containers (so copy, move and swap cross arenas), each mirrored by a container
// with std::allocator; every result compared, contents compared every few hundred operations.
template <class Map>
std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted_items(const Map& m) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> items(m.begin(), m.end());
  std::sort(items.begin(), items.end());
  return items;
}

template <class ArenaMap, class StdMap>
void run_map_differential(int ops, std::uint32_t seed) {
  arena arenas[2];
  {
    using alloc = typename ArenaMap::allocator_type;
    ArenaMap ours[2] = {ArenaMap(alloc(arenas[0])), ArenaMap(alloc(arenas[1]))};
    StdMap theirs[2];
    std::mt19937_64 rng(seed);
    const std::uint64_t keys = 4096;
    for (int op = 0; op < ops; ++op) {
      const int i = static_cast<int>(rng() & 1);
      const int j = 1 - i;
      const std::uint64_t key = rng() % keys;
      const std::uint64_t roll = rng() % 1000;
      if (roll < 450) {
        const auto a = ours[i].insert({key, op});
        const auto b = theirs[i].insert({key, op});
        ASSERT_EQ(a.second, b.second) << "insert " << key << " at op " << op;
        ASSERT_EQ(a.first->second, b.first->second);
      } else if (roll < 750) {
        ASSERT_EQ(ours[i].erase(key), theirs[i].erase(key)) << "erase " << key << " at " << op;
      } else if (roll < 990) {
        const auto a = ours[i].find(key);
        const auto b = theirs[i].find(key);
        ASSERT_EQ(a == ours[i].end(), b == theirs[i].end()) << "find " << key << " at " << op;
        if (b != theirs[i].end()) {
          ASSERT_EQ(a->second, b->second);
        }
      } else if (roll < 992) {
        ours[i].clear();
        theirs[i].clear();
      } else if (roll < 994) {
        ours[i] = ours[j];  // copy assignment: the allocator propagates
        theirs[i] = theirs[j];
      } else if (roll < 996) {
        ArenaMap copy(ours[j]);  // copy construction: same arena
        ASSERT_TRUE(copy.get_allocator() == ours[j].get_allocator());
        ours[i] = std::move(copy);
        theirs[i] = StdMap(theirs[j]);
      } else if (roll < 998) {
        ours[i] = std::move(ours[j]);
        theirs[i] = std::move(theirs[j]);
        ours[j].clear();  // valid but unspecified: make it known
        theirs[j].clear();
      } else {
        using std::swap;
        swap(ours[0], ours[1]);
        swap(theirs[0], theirs[1]);
      }
      ASSERT_EQ(ours[i].size(), theirs[i].size()) << "at op " << op;
      if (op % 500 == 0) {
        for (int k = 0; k < 2; ++k) ASSERT_EQ(sorted_items(ours[k]), sorted_items(theirs[k]));
      }
    }
    for (int k = 0; k < 2; ++k) ASSERT_EQ(sorted_items(ours[k]), sorted_items(theirs[k]));
    const auto s0 = arenas[0].stats();
    const auto s1 = arenas[1].stats();
    EXPECT_GT(s0.pages + s1.pages, 0u) << "the nodes came from the arenas";
  }
  // Every node went back to the arena it came from, whatever propagated where.
  for (const arena& a : arenas) {
    const auto s = a.stats();
    EXPECT_EQ(s.live_bytes, 0u);
    EXPECT_EQ(s.large_bytes, 0u);
    EXPECT_LE(s.pages, a.options().retained_pages);
  }
}

using hugepage::test::node_alloc;
using hugepage::test::u64;

TEST(ArenaDifferential, StdMap) {
  run_map_differential<std::map<u64, u64, std::less<u64>, node_alloc<u64, u64>>,
                       std::map<u64, u64>>(scaled(600000), 1);
}

TEST(ArenaDifferential, StdUnorderedMap) {
  run_map_differential<
      std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>, node_alloc<u64, u64>>,
      std::unordered_map<u64, u64>>(scaled(600000), 2);
}

TEST(ArenaDifferential, AbslNodeHashMap) {
  run_map_differential<
      absl::node_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>, node_alloc<u64, u64>>,
      absl::node_hash_map<u64, u64>>(scaled(600000), 3);
}

TEST(ArenaDifferential, AbslBtreeMap) {
  run_map_differential<absl::btree_map<u64, u64, std::less<u64>, node_alloc<u64, u64>>,
                       absl::btree_map<u64, u64>>(scaled(600000), 4);
}

// Sequences: std::set, std::list and std::deque, single-arena, the same operations on both.
template <class Ours, class Theirs, class Step>
void run_sequence_differential(int ops, std::uint32_t seed, Step step) {
  unsynchronized_arena a;
  {
    Ours ours{typename Ours::allocator_type(a)};
    Theirs theirs;
    std::mt19937_64 rng(seed);
    for (int op = 0; op < ops; ++op) {
      step(ours, theirs, rng, op);
      ASSERT_EQ(ours.size(), theirs.size()) << "at op " << op;
      if (op % 1000 == 0) {
        ASSERT_TRUE(std::equal(ours.begin(), ours.end(), theirs.begin()));
      }
    }
    ASSERT_TRUE(std::equal(ours.begin(), ours.end(), theirs.begin()));
    Ours copy(ours);  // and the copy is equal too
    ASSERT_TRUE(std::equal(copy.begin(), copy.end(), theirs.begin()));
  }
  EXPECT_EQ(a.stats().live_bytes, 0u);
  EXPECT_EQ(a.stats().large_bytes, 0u);
}

TEST(ArenaDifferential, StdSet) {
  using ours_t = std::set<u64, std::less<u64>, arena_allocator<u64, unsynchronized_arena>>;
  run_sequence_differential<ours_t, std::set<u64>>(
      scaled(600000), 5, [](auto& ours, auto& theirs, auto& rng, int op) {
        const u64 key = rng() % 8192;
        if (rng() % 2 == 0) {
          ASSERT_EQ(ours.insert(key).second, theirs.insert(key).second) << op;
        } else if (rng() % 2 == 0) {
          ASSERT_EQ(ours.erase(key), theirs.erase(key)) << op;
        } else {
          ASSERT_EQ(ours.count(key), theirs.count(key)) << op;
        }
      });
}

TEST(ArenaDifferential, StdList) {
  using ours_t = std::list<u64, arena_allocator<u64, unsynchronized_arena>>;
  run_sequence_differential<ours_t, std::list<u64>>(
      scaled(600000), 6, [](auto& ours, auto& theirs, auto& rng, int op) {
        const u64 roll = rng() % 100;
        if (roll < 30 || theirs.empty()) {
          ours.push_back(static_cast<u64>(op));
          theirs.push_back(static_cast<u64>(op));
        } else if (roll < 55) {
          ours.push_front(static_cast<u64>(op));
          theirs.push_front(static_cast<u64>(op));
        } else if (roll < 75) {
          ours.pop_front();
          theirs.pop_front();
        } else if (roll < 95) {
          ours.pop_back();
          theirs.pop_back();
        } else if (roll < 99) {
          ours.remove_if([](u64 v) { return v % 7 == 0; });
          theirs.remove_if([](u64 v) { return v % 7 == 0; });
        } else {
          ours.reverse();
          theirs.reverse();
        }
      });
}

TEST(ArenaDifferential, StdDeque) {
  using ours_t = std::deque<u64, arena_allocator<u64, unsynchronized_arena>>;
  run_sequence_differential<ours_t, std::deque<u64>>(
      scaled(600000), 7, [](auto& ours, auto& theirs, auto& rng, int op) {
        const u64 roll = rng() % 100;
        if (roll < 30 || theirs.empty()) {
          ours.push_back(static_cast<u64>(op));
          theirs.push_back(static_cast<u64>(op));
        } else if (roll < 55) {
          ours.push_front(static_cast<u64>(op));
          theirs.push_front(static_cast<u64>(op));
        } else if (roll < 75) {
          ours.pop_front();
          theirs.pop_front();
        } else if (roll < 95) {
          ours.pop_back();
          theirs.pop_back();
        } else {
          const std::size_t at = rng() % theirs.size();
          ASSERT_EQ(ours[at], theirs[at]) << op;
        }
      });
}

// ---- std::pmr ---------------------------------------------------------------------------------

TEST(ArenaResource, PmrMapAllocatesFromTheArenaAndComparesByArena) {
  unsynchronized_arena a;
  unsynchronized_arena other;
  hugepage::pmr::unsynchronized_arena_resource r1(a);
  hugepage::pmr::unsynchronized_arena_resource r2(a);
  hugepage::pmr::unsynchronized_arena_resource r3(other);
  EXPECT_TRUE(r1.is_equal(r2));
  EXPECT_FALSE(r1.is_equal(r3));
  EXPECT_FALSE(r1.is_equal(*hugepage::pmr::thp_resource()));
  {
    std::pmr::map<u64, u64> m(&r1);
    for (u64 i = 0; i < 100000; ++i) m.emplace(i, i * 3);
    const auto s = a.stats();
    EXPECT_GE(s.live_bytes, 100000u * (sizeof(u64) * 2 + 3 * sizeof(void*)));
    EXPECT_EQ(m.at(777), 777u * 3);
  }
  EXPECT_EQ(a.stats().live_bytes, 0u);
}

// ---- AddressSanitizer: freed slots are poisoned -----------------------------------------------

TEST(ArenaAsanDeathTest, UseAfterEraseIsReported) {
  if (!under_asan()) {
    GTEST_SKIP() << "needs a build with AddressSanitizer (HUGEPAGE_SANITIZE=ON)";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto use_after_erase = [] {
    using alloc = arena_allocator<std::pair<const u64, u64>, unsynchronized_arena>;
    unsynchronized_arena a;
    std::map<u64, u64, std::less<u64>, alloc> m{alloc(a)};
    for (u64 i = 0; i < 100; ++i) m[i] = i;
    const u64* stale = &m.at(42);
    m.erase(42);
    std::printf("read %llu\n", static_cast<unsigned long long>(*stale));
  };
  EXPECT_DEATH(use_after_erase(), "use-after-poison");
}

TEST(ArenaAsanDeathTest, DoubleFreeIsReported) {
  if (!under_asan()) {
    GTEST_SKIP() << "needs a build with AddressSanitizer (HUGEPAGE_SANITIZE=ON)";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto double_free = [] {
    unsynchronized_arena a;
    void* keep = a.allocate(32, 8);
    void* p = a.allocate(32, 8);
    a.deallocate(p, 32, 8);
    a.deallocate(p, 32, 8);
    a.deallocate(keep, 32, 8);
  };
  EXPECT_DEATH(double_free(), "double-free");
}

TEST(ArenaAsan, LiveNodesAndReusedSlotsAreNotPoisoned) {
  // The same steps without the stale read run clean (also without ASan): the free list and reuse
  // unpoison what they hand out.
  arena a;
  std::map<u64, u64, std::less<u64>, node_alloc<u64, u64>> m{node_alloc<u64, u64>(a)};
  for (int round = 0; round < 3; ++round) {
    for (u64 i = 0; i < 20000; ++i) m[i] = i + round;
    for (u64 i = 0; i < 20000; i += 2) m.erase(i);
    u64 sum = 0;
    for (const auto& [k, v] : m) sum += v - k;
    EXPECT_EQ(sum, 10000u * round);
  }
}

TEST(ArenaAsanDeathTest, UseOfAFreedRunIsReported) {
  if (!under_asan()) {
    GTEST_SKIP() << "needs a build with AddressSanitizer (HUGEPAGE_SANITIZE=ON)";
  }
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto use_after_free = [] {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict));
    void* keep = a.allocate(64, 8);  // the page stays mapped: only the poison can tell
    auto* block = static_cast<unsigned char*>(a.allocate(4 * kMiB, 64));
    block[kMiB] = 1;
    a.deallocate(block, 4 * kMiB, 64);
    std::printf("read %d\n", block[kMiB]);
    a.deallocate(keep, 64, 8);
  };
  EXPECT_DEATH(use_after_free(), "use-after-poison");
}

// A run freed twice is reported as a slot freed twice is, instead of counting its slabs free
// twice: the page's count of slabs in use would wrap and the page would never go back.
TEST(ArenaAsanDeathTest, DoubleFreeOfARunIsReported) {
  if (!under_asan()) {
    GTEST_SKIP() << "needs a build with AddressSanitizer (HUGEPAGE_SANITIZE=ON)";
  }
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto double_free = [] {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict));
    void* keep = a.allocate(64, 8);  // the page stays mapped: only the poison can tell
    void* block = a.allocate(4 * kMiB, 64);
    a.deallocate(block, 4 * kMiB, 64);
    a.deallocate(block, 4 * kMiB, 64);
    a.deallocate(keep, 64, 8);
  };
  EXPECT_DEATH(double_free(), "double-free");
}

}  // namespace
