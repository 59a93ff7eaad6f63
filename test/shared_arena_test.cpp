// Tests of shared_arena_allocator (shared_arena_allocator.hpp): the Allocator contract of a
// stateless allocator, node containers as class members default-constructed and copied, slabs
// shared by the containers of one tag (the arena's statistics), coverage read from the kernel,
// labels, fork() while other threads use the shared arena, and frees during static destruction.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hugepage/arena_allocator.hpp"
#include "hugepage/label.hpp"
#include "hugepage/shared_arena_allocator.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::arena;
using hugepage::shared_arena;
using hugepage::shared_arena_allocator;
using u64 = std::uint64_t;

using hugepage::test::thp_usable;

// Whether `p` lies in one of the huge pages `a` holds.
bool in_arena(const arena& a, const void* p) {
  const auto* c = static_cast<const char*>(p);
  for (const auto& [start, length] : a.mapped_ranges()) {
    const auto* s = static_cast<const char*>(start);
    if (c >= s && c < s + length) return true;
  }
  return false;
}

// The size class of a 48-byte std::map<u64, u64> node, the one the tests fill.
std::size_t slabs_of_class(const arena& a, std::size_t slot_bytes) {
  for (const auto& c : a.stats().classes) {
    if (c.slot_bytes == slot_bytes) return c.slabs;
  }
  return 0;
}

// ---- compile-time contract --------------------------------------------------------------------

struct contract_tag {};
using pair_alloc = shared_arena_allocator<std::pair<const int, int>, contract_tag>;
static_assert(std::is_empty_v<pair_alloc>, "stateless: costs a container no space");
static_assert(std::is_nothrow_default_constructible_v<pair_alloc>);
static_assert(std::allocator_traits<pair_alloc>::is_always_equal::value);
static_assert(std::is_same_v<std::allocator_traits<pair_alloc>::rebind_alloc<double>,
                             shared_arena_allocator<double, contract_tag>>,
              "rebinding keeps the tag");
static_assert(
    !std::is_same_v<shared_arena_allocator<int>, shared_arena_allocator<int, contract_tag>>);
static_assert(std::is_same_v<shared_arena_allocator<int>::tag, hugepage::default_arena_tag>);

struct hugetlb_tag {
  static constexpr hugepage::strategy source =
      hugepage::strategy::hugetlb(hugepage::page_size::huge_2m, hugepage::fallback);
  static constexpr std::size_t retained_pages = 3;
};

TEST(SharedArena, OneArenaPerTagWithTheTagsOptions) {
  EXPECT_EQ(&shared_arena<contract_tag>(), &shared_arena<contract_tag>());
  EXPECT_NE(&shared_arena<contract_tag>(), &shared_arena<hugetlb_tag>());
  EXPECT_NE(&shared_arena<contract_tag>(), &shared_arena<>());
  EXPECT_EQ(&pair_alloc::get_arena(), &shared_arena<contract_tag>());
  EXPECT_EQ(&shared_arena_allocator<double>::get_arena(),
            &shared_arena<hugepage::default_arena_tag>());

  const arena& a = shared_arena<contract_tag>();
  EXPECT_TRUE(a.get_strategy() == hugepage::strategy::thp()) << "THP when the tag names none";
  EXPECT_EQ(a.options().retained_pages, hugepage::arena_options{}.retained_pages);
  EXPECT_EQ(a.options().label, nullptr);

  const arena& h = shared_arena<hugetlb_tag>();
  EXPECT_TRUE(h.get_strategy() == hugetlb_tag::source);
  EXPECT_EQ(h.options().retained_pages, 3u);
}

TEST(SharedArena, AllocatorsOfOneTagAreEqualAcrossRebinds) {
  const shared_arena_allocator<int, contract_tag> x;
  const shared_arena_allocator<double, contract_tag> y(x);
  EXPECT_TRUE(x == y);
  EXPECT_FALSE(x != y);
}

TEST(SharedArena, OverflowingCountThrowsBadArrayNewLength) {
  shared_arena_allocator<u64, contract_tag> alloc;
  const std::size_t before = shared_arena<contract_tag>().stats().live_bytes;
  EXPECT_THROW((void)alloc.allocate(SIZE_MAX / 4), std::bad_array_new_length);
  EXPECT_EQ(shared_arena<contract_tag>().stats().live_bytes, before);
}

// ---- class members ----------------------------------------------------------------------------

struct members_tag {};
template <class T>
using members_alloc = shared_arena_allocator<T, members_tag>;

// A class with node containers as members and no constructor: the port is the type aliases.
struct book {
  std::map<u64, u64, std::less<>, members_alloc<std::pair<const u64, u64>>> levels;
  std::unordered_map<u64, std::string, std::hash<u64>, std::equal_to<>,
                     members_alloc<std::pair<const u64, std::string>>>
      names;
  std::set<u64, std::less<>, members_alloc<u64>> ids;
};
static_assert(std::is_default_constructible_v<book> && std::is_copy_constructible_v<book> &&
              std::is_copy_assignable_v<book>);

void fill(book& b, u64 from, u64 count) {
  for (u64 i = from; i < from + count; ++i) {
    b.levels.emplace(i, i * 2);
    b.names.emplace(i, "order " + std::to_string(i));
    b.ids.insert(i * 3);
  }
}

TEST(SharedArena, MembersOfADefaultConstructedClassAreCopiedIntoTheSameArena) {
  const arena& a = shared_arena<members_tag>();
  const auto slots_before = a.stats();
  book original;
  fill(original, 0, 1000);
  const auto one = a.stats();

  book copy(original);  // copy construction
  book assigned;
  fill(assigned, 5000, 10);
  assigned = original;  // copy assignment: its 10 old elements are freed
  EXPECT_EQ(copy.levels, original.levels);
  EXPECT_EQ(copy.names, original.names);
  EXPECT_EQ(copy.ids, original.ids);
  EXPECT_EQ(assigned.levels, original.levels);
  EXPECT_EQ(assigned.ids, original.ids);

  // Every node of all three objects comes from the one arena: three copies hold three times the
  // slots that one held.
  const auto three = a.stats();
  std::size_t slots_one = 0, slots_three = 0, slots_zero = 0;
  for (std::size_t c = 0; c < three.classes.size(); ++c) {
    slots_zero += slots_before.classes[c].live_slots;
    slots_one += one.classes[c].live_slots;
    slots_three += three.classes[c].live_slots;
  }
  EXPECT_EQ(slots_three - slots_zero, 3 * (slots_one - slots_zero));
  EXPECT_TRUE(in_arena(a, &*copy.levels.find(7)));
  EXPECT_TRUE(in_arena(a, &*assigned.ids.find(21)));
  EXPECT_TRUE(in_arena(a, &*copy.names.find(9)));

  original = book();  // move assignment from a temporary: O(1), nodes freed into the arena
  EXPECT_TRUE(original.levels.empty());
  EXPECT_EQ(copy.levels.size(), 1000u);
}

TEST(SharedArena, ContainersDestroyedGiveTheirNodesBack) {
  const arena& a = shared_arena<members_tag>();
  const std::size_t before = a.stats().live_bytes;
  {
    book b;
    fill(b, 0, 2000);
    EXPECT_GT(a.stats().live_bytes, before);
  }
  EXPECT_EQ(a.stats().live_bytes, before);
}

// ---- shared slabs -----------------------------------------------------------------------------

struct sharing_tag {};

TEST(SharedArena, ContainersOfOneTagShareTheSlabsOfAClass) {
  using alloc = shared_arena_allocator<std::pair<const u64, u64>, sharing_tag>;
  using map = std::map<u64, u64, std::less<>, alloc>;
  const arena& shared = shared_arena<sharing_tag>();
  map first, second;
  first.emplace(1, 1);
  const std::size_t slot = shared.stats().classes.empty() ? 0 : [&] {
    for (const auto& c : shared.stats().classes) {
      if (c.live_slots == 1) return c.slot_bytes;
    }
    return std::size_t{0};
  }();
  ASSERT_NE(slot, 0u) << "the first node has a class";
  second.emplace(2, 2);
  EXPECT_EQ(slabs_of_class(shared, slot), 1u) << "the second map's node shares the first's slab";
  EXPECT_EQ(shared.stats().pages, 1u);

  // Two arena objects, one per map (what a per-object arena does): two slabs, two pages.
  arena one, two;
  using own_alloc = hugepage::arena_allocator<std::pair<const u64, u64>>;
  std::map<u64, u64, std::less<>, own_alloc> third{own_alloc(one)}, fourth{own_alloc(two)};
  third.emplace(3, 3);
  fourth.emplace(4, 4);
  EXPECT_EQ(slabs_of_class(one, slot) + slabs_of_class(two, slot), 2u);
  EXPECT_EQ(one.stats().pages + two.stats().pages, 2u);
}

// ---- coverage and labels ----------------------------------------------------------------------

struct coverage_tag {
  static constexpr const char* label = "shared-arena-test";
};

TEST(SharedArena, NodesAreOnHugePagesAsTheKernelReportsAndListedUnderTheTagsLabel) {
  if (!thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not enabled (madvise or always)");
  using alloc = shared_arena_allocator<std::pair<const u64, u64>, coverage_tag>;
  std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<>, alloc> m;
  for (u64 i = 0; i < 1000000; ++i) m.emplace(i * 7919, i);
  const arena& a = shared_arena<coverage_tag>();
  EXPECT_EQ(a.options().label, coverage_tag::label);
  const auto report = a.backing();
  ASSERT_NE(report.source, hugepage::backing_source::unavailable) << report.note;
  EXPECT_EQ(report.bytes, a.stats().mapped_bytes);
  EXPECT_GE(report.huge_fraction(), 0.99)
      << "thp " << report.thp << " of " << report.bytes << " (" << report.note << ")";

  const auto labelled = hugepage::coverage_of(coverage_tag::label);
  EXPECT_EQ(labelled.bytes, a.stats().mapped_bytes) << "every page of the arena is listed";
  EXPECT_GE(labelled.huge_fraction(), 0.99);
}

// ---- fork -------------------------------------------------------------------------------------

struct fork_tag {
  static constexpr std::size_t retained_pages = 0;  // every free of a last slot unmaps
};

// As ArenaThreads.ForkWhileOtherThreadsHoldTheArenasLocksNeverHangsTheChild, for the shared arena:
// it enters the fork list like an arena object, so a child never inherits one of its mutexes held.
// The child also reads and extends the parent's container (the arena's pages are inherited).
TEST(SharedArena, ForkWhileOtherThreadsUseTheArenaNeverHangsTheChild) {
  using alloc = shared_arena_allocator<std::pair<const u64, u64>, fork_tag>;
  std::map<u64, u64, std::less<>, alloc> parents;
  for (u64 i = 0; i < 100; ++i) parents.emplace(i, i);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&stop] {
      shared_arena_allocator<char[48], fork_tag> bytes;
      shared_arena_allocator<char[512], fork_tag> other;
      while (!stop.load(std::memory_order_relaxed)) {
        auto* p = bytes.allocate(1);
        auto* q = other.allocate(1);
        std::memset(p, 0x5a, sizeof(*p));
        other.deallocate(q, 1);
        bytes.deallocate(p, 1);
      }
    });
  }
  int hung = 0, failed = 0;
  for (int i = 0; i < 100 && hung == 0; ++i) {
    const int code = hugepage::test::run_in_child_within(5000, [&parents] {
      parents.emplace(1000, 1000);  // the class the threads hammer, in the parent's container
      std::map<u64, u64, std::less<>, alloc> own;
      own.emplace(1, 1);
      return parents.size() == 101 && parents.at(50) == 50 && own.size() == 1 ? 0 : 1;
    });
    if (code == hugepage::test::child_hung) {
      ++hung;
    } else if (code != 0) {
      ++failed;
    }
  }
  stop = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(hung, 0) << "a child hung on a mutex of the shared arena inherited locked";
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(parents.size(), 100u) << "the children's inserts stay in the children";
}

// A tag used directly, never through an allocator (std::pmr::polymorphic_allocator over the arena,
// say): its arena is made by the first shared_arena<Tag>() call, whichever thread makes it. A
// fork() from another thread meanwhile must leave the child an arena made or not begun: with a
// function-local static the child inherited its guard held and waited on it for ever. Each round
// takes a new tag, so every round forks while a first call runs.
template <int N>
struct first_call_tag {};

template <int... N>
constexpr std::array<arena& (*)() noexcept, sizeof...(N)> first_calls(
    std::integer_sequence<int, N...> /*tags*/) {
  return {&shared_arena<first_call_tag<N>>...};
}

TEST(SharedArena, ForkWhileAnotherThreadMakesATagsArenaNeverHangsTheChild) {
  constexpr auto calls = first_calls(std::make_integer_sequence<int, 200>{});
  int hung = 0, failed = 0, rounds = 0;
  for (const auto call : calls) {
    std::atomic<bool> go{false};
    std::thread maker([&go, call] {
      go.store(true);
      static_cast<void>(call());
    });
    while (!go.load()) {
    }
    const int code = hugepage::test::run_in_child_within(5000, [call] {
      void* p = call().allocate(64, 8);
      std::memset(p, 1, 64);
      call().deallocate(p, 64, 8);
      return 0;
    });
    maker.join();
    ++rounds;
    if (code == hugepage::test::child_hung) {
      ++hung;
      break;  // one is enough: each costs the limit
    }
    if (code != 0) ++failed;
  }
  EXPECT_EQ(hung, 0) << "after " << rounds
                     << " rounds a child waited for ever on an arena half made in the parent";
  EXPECT_EQ(failed, 0);
}

// ---- static destruction -----------------------------------------------------------------------

struct exit_tag {};
using exit_alloc = shared_arena_allocator<std::pair<const u64, u64>, exit_tag>;

// Namespace scope: constructed at start-up, in no order relative to the shared arena's own
// start-up initialisation, and destroyed during exit, after main returns or exit() is called.
std::map<u64, u64, std::less<>, exit_alloc> exit_survivor;

// A container with static storage duration frees its nodes into the shared arena during exit,
// whatever the order of static destructors: the arena is never destroyed.
TEST(SharedArena, StaticContainersFreeIntoTheArenaDuringExit) {
  const int code = hugepage::test::run_in_child([] {
    for (u64 i = 0; i < 10000; ++i) exit_survivor.emplace(i, i);
    static std::set<u64, std::less<>, shared_arena_allocator<u64, exit_tag>> later{1, 2, 3};
    std::exit(exit_survivor.size() == 10000 && later.size() == 3 ? 0 : 1);  // destructors run
    return 1;
  });
  EXPECT_EQ(code, 0) << "exit() with static containers on the shared arena";
}

}  // namespace
