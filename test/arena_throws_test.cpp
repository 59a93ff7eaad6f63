// Tests of the node arena when its page source throws: the strong guarantee of an insert under a
// hugetlb cgroup limit, standard containers and absl's tables. The rest: arena_test.cpp.
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
#include "hugepage/arena.hpp"
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
using hugepage::arena_options;
using hugepage::page_size;
using hugepage::strategy;

using hugepage::test::book_t;
using hugepage::test::kHuge;
using hugepage::test::node_alloc;
using hugepage::test::u64;

// ---- strong guarantee when the pool runs out --------------------------------------------------

// A hugetlb cgroup limit of 3 pages plays the short pool (the shared pool is not drained): the
// strict strategy refuses the 4th slab, insert throws, and the container is as it was.
TEST(ArenaStrongGuarantee, InsertThatNeedsAPageThePoolLacksThrowsAndChangesNothing) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 4);
  const hugepage::test::scratch_cgroup cgroup("hugetlb");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  const std::string limit = std::to_string(3 * kHuge);
  ASSERT_TRUE(cgroup.write("hugetlb.2MB.max", limit) && cgroup.write("hugetlb.2MB.rsvd.max", limit))
      << std::strerror(errno);
  const auto before = hugepage::test::read_counts(page_size::huge_2m);
  const int code = hugepage::test::run_in_child([&cgroup]() -> int {
    if (!cgroup.join()) return 2;
    arena a(strategy::hugetlb(page_size::huge_2m, hugepage::strict), arena_options{0});
    book_t book{node_alloc<u64, u64>(a)};
    std::map<u64, u64> mirror;
    u64 key = 0;
    try {
      for (;; ++key) {
        book.emplace(key, key * 3);
        mirror.emplace(key, key * 3);
      }
    } catch (const hugepage::allocation_error& e) {
      // A short pool would be pool_exhausted; here the pool has the pages and the cgroup's
      // reservation limit said no, which the strategy names.
      const bool named = typeid(e) == typeid(hugepage::pool_exhausted) ||
                         std::string(e.what()).find("hugetlb.2MB.rsvd.max") != std::string::npos;
      if (!named) {
        std::fprintf(stderr, "child: unexpected message: %s\n", e.what());
        return 3;
      }
      if (e.code() != std::errc::not_enough_memory) return 4;
    }
    if (a.stats().pages != 3) return 5;
    if (book.size() != mirror.size() || book.count(key) != 0) return 6;
    if (!std::equal(book.begin(), book.end(), mirror.begin())) return 7;
    // Freed space is usable again; a page freed whole can be mapped again.
    book.erase(book.begin(), book.find(mirror.size() / 2));
    try {
      book.emplace(key, key * 3);
    } catch (const std::bad_alloc&) {
      return 9;
    }
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_2m, before));
}

}  // namespace

// ---- containers on an arena whose page source throws ------------------------------------------

// The standard containers give the strong guarantee for a one-element insert; absl's hash tables
// (Abseil 20220623, as installed) give none: growth records the new capacity before it allocates
// the slot array, and an insert marks its slot full before node_hash_map allocates the node. A
// child in a hugetlb cgroup that allows `limit` bytes of pages plays the short pool; the strict
// strategy refuses the next page with hugetlb_limit_exceeded (a pool_exhausted).

using map_on_arena = std::map<u64, u64, std::less<u64>, node_alloc<u64, u64>>;
using unordered_on_arena =
    std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>, node_alloc<u64, u64>>;
using list_on_arena = std::list<std::pair<u64, u64>, arena_allocator<std::pair<u64, u64>>>;
using node_table_on_arena =
    absl::node_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>, node_alloc<u64, u64>>;
using flat_table_on_arena =
    absl::flat_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>, node_alloc<u64, u64>>;

template <class Container>
void add_element(Container& c, u64 key) {
  if constexpr (std::is_same_v<Container, list_on_arena>) {
    c.emplace_back(key, key * 3);
  } else {
    c.emplace(key, key * 3);
  }
}

template <class Container>
std::vector<std::pair<u64, u64>> elements_of(const Container& c) {
  std::vector<std::pair<u64, u64>> out(c.begin(), c.end());
  std::sort(out.begin(), out.end());
  return out;
}

// The message of the strict strategy when the cgroup's reservation limit `limit_text` (all of it
// charged) leaves no room for one more page of `page_text` (hugetlb.<cgroup_size>.rsvd.max).
std::string refusal(const hugepage::test::scratch_cgroup& cgroup, const char* page_text,
                    const char* page_bytes_text, const char* cgroup_size, const char* limit_text) {
  return std::string("hugepage: hugetlb mmap of 1 page of ") + page_text + " (" + page_bytes_text +
         ") failed: Cannot allocate memory: hugetlb cgroup limit: " + cgroup.path() + "/hugetlb." +
         cgroup_size + ".rsvd.max = " + limit_text + ", " + limit_text +
         " charged, room for 0 of the 1 page asked; raise the limit or ask for less";
}

// Whether `e` is exactly hugetlb_limit_exceeded with the message `expected`; says what it got.
bool is_refusal(const std::exception& e, const std::string& expected) {
  if (typeid(e) == typeid(hugepage::hugetlb_limit_exceeded) && e.what() == expected) return true;
  std::fprintf(stderr, "child: got %s: %s\nchild: expected hugetlb_limit_exceeded: %s\n",
               typeid(e).name(), e.what(), expected.c_str());
  return false;
}

// Child body: inserts keys 0, 1, ... until the arena throws, then checks the strong guarantee:
// the exact exception, the container as it was before the throwing insert (`holds`: with elements
// in it), still usable (after an erase, an insert fits again) and destructible, and every page
// back with it.
template <class Container>
int insert_until_refused_changes_nothing(const hugepage::test::scratch_cgroup& cgroup,
                                         strategy source, const std::string& expected, bool holds) {
  if (!cgroup.join()) return 2;
  arena a(source, arena_options{0});
  {
    Container c{typename Container::allocator_type(a)};
    std::vector<std::pair<u64, u64>> mirror;
    u64 key = 0;
    try {
      for (;; ++key) {
        add_element(c, key);
        mirror.emplace_back(key, key * 3);
      }
    } catch (const std::exception& e) {
      if (!is_refusal(e, expected)) return 3;
    }
    if (holds == mirror.empty() || elements_of(c) != mirror) return 4;
    if (!mirror.empty()) {
      const std::pair<u64, u64> gone = *c.begin();
      c.erase(c.begin());
      mirror.erase(std::find(mirror.begin(), mirror.end(), gone));
      try {
        add_element(c, key);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: insert after an erase: %s\n", e.what());
        return 5;
      }
      mirror.emplace_back(key, key * 3);
      std::sort(mirror.begin(), mirror.end());
      if (elements_of(c) != mirror) return 6;
    }
  }
  const auto s = a.stats();
  if (s.live_bytes != 0 || s.large_bytes != 0 || s.slabs != 0 || s.pages != 0) return 7;
  return 0;
}

// Child body for an absl table: the exact exception after `inserted` elements, then the table's
// bookkeeping no longer matches what it holds: it reports `counted` elements and `capacity`,
// counting a slot marked full whose node was never allocated, or a capacity whose slot array was
// never allocated. Its destructor would free what the arena never gave, so the table is abandoned:
// constructed in storage that is never destroyed. The arena's destructor still gives every page
// back. Should Abseil make its tables exception-safe, these checks fail: then the README's
// "Errors" line on absl tables must change.
template <class Table>
int insert_until_refused_abandons_the_table(const hugepage::test::scratch_cgroup& cgroup,
                                            strategy source, page_size size,
                                            const std::string& expected, std::size_t inserted,
                                            std::size_t counted, std::size_t capacity) {
  if (!cgroup.join()) return 2;
  const auto before = hugepage::test::read_counts(size);
  {
    arena a(source, arena_options{0});
    alignas(Table) unsigned char storage[sizeof(Table)];
    Table& table = *::new (static_cast<void*>(storage)) Table(typename Table::allocator_type(a));
    u64 key = 0;
    try {
      for (;; ++key) add_element(table, key);
    } catch (const std::exception& e) {
      if (!is_refusal(e, expected)) return 3;
    }
    if (key != inserted) return 4;
    if (table.size() != counted || table.capacity() != capacity) {
      std::fprintf(stderr, "child: size %zu, capacity %zu\n", table.size(), table.capacity());
      return 5;
    }
  }  // the table is abandoned; the arena unmaps its pages
  if (!hugepage::test::pool_back(size, before)) return 7;
  return 0;
}

// The first page refused: the arena over 1 GiB pages in a process allowed none (what
// BM_Paired's arena_1g contender meets on a machine without 1 GiB pages).
TEST(ArenaThrows, FirstPageRefusedLeavesStdContainersEmptyAndTablesOfAbslInconsistent) {
  if (!hugepage::read_pool(page_size::huge_1g)) {
    if (hugepage::test::required_1g()) FAIL() << hugepage::test::why_no_1g_pages(1);
    GTEST_SKIP() << hugepage::test::why_no_1g_pages(1);
  }
  const hugepage::test::scratch_cgroup cgroup("hugetlb");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.write("hugetlb.1GB.max", "0") && cgroup.write("hugetlb.1GB.rsvd.max", "0"))
      << std::strerror(errno);
  const strategy gigantic = strategy::hugetlb(page_size::huge_1g, hugepage::strict);
  const std::string expected = refusal(cgroup, "1 GiB", "1 GiB", "1GB", "0 B");
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  const auto in_child = [&](auto body) { return hugepage::test::run_in_child(body); };
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_changes_nothing<map_on_arena>(cgroup, gigantic, expected,
                                                                        false);
            }),
            0)
      << "std::map";
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_changes_nothing<unordered_on_arena>(cgroup, gigantic,
                                                                              expected, false);
            }),
            0)
      << "std::unordered_map";
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_changes_nothing<list_on_arena>(cgroup, gigantic, expected,
                                                                         false);
            }),
            0)
      << "std::list";
  // The first insert grows the empty table to capacity 1 and throws allocating its slot array:
  // capacity() says 1 over no array at all (the static empty group the table started with).
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_abandons_the_table<node_table_on_arena>(
                  cgroup, gigantic, page_size::huge_1g, expected, 0, 0, 1);
            }),
            0)
      << "absl::node_hash_map";
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_abandons_the_table<flat_table_on_arena>(
                  cgroup, gigantic, page_size::huge_1g, expected, 0, 0, 1);
            }),
            0)
      << "absl::flat_hash_map";
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// A later page refused: a strict arena over 2 MiB pages (one slab each) in a process allowed two
// pages (the std containers, full pages of nodes behind them) or one (the absl tables).
TEST(ArenaThrows, LaterPageRefusedLeavesStdContainersUnchangedAndTablesOfAbslInconsistent) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 4);
  const hugepage::test::scratch_cgroup two("hugetlb");
  const hugepage::test::scratch_cgroup one("hugetlb");
  if (!two.error().empty()) HUGEPAGE_SKIP_OR_FAIL(two.error());
  if (!one.error().empty()) HUGEPAGE_SKIP_OR_FAIL(one.error());
  ASSERT_TRUE(two.write("hugetlb.2MB.max", std::to_string(2 * kHuge)) &&
              two.write("hugetlb.2MB.rsvd.max", std::to_string(2 * kHuge)))
      << std::strerror(errno);
  ASSERT_TRUE(one.write("hugetlb.2MB.max", std::to_string(kHuge)) &&
              one.write("hugetlb.2MB.rsvd.max", std::to_string(kHuge)))
      << std::strerror(errno);
  const strategy pool = strategy::hugetlb(page_size::huge_2m, hugepage::strict);
  const std::string after_two = refusal(two, "2 MiB", "2 MiB", "2MB", "4 MiB");
  const std::string after_one = refusal(one, "2 MiB", "2 MiB", "2MB", "2 MiB");
  const auto before = hugepage::test::read_counts(page_size::huge_2m);
  const auto in_child = [&](auto body) { return hugepage::test::run_in_child(body); };
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_changes_nothing<map_on_arena>(two, pool, after_two, true);
            }),
            0)
      << "std::map";
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_changes_nothing<unordered_on_arena>(two, pool, after_two,
                                                                              true);
            }),
            0)
      << "std::unordered_map";
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_changes_nothing<list_on_arena>(two, pool, after_two,
                                                                         true);
            }),
            0)
      << "std::list";
  // The slot array of capacity 1 takes the one page; the first node needs a second: the slot
  // was marked full first, so the empty table counts one element.
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_abandons_the_table<node_table_on_arena>(
                  one, pool, page_size::huge_2m, after_one, 0, 1, 1);
            }),
            0)
      << "absl::node_hash_map";
  // One element in place; the second insert grows to capacity 3, whose slot array (another size
  // class) needs a second page: the capacity is 3 over the old array of 1.
  EXPECT_EQ(in_child([&] {
              return insert_until_refused_abandons_the_table<flat_table_on_arena>(
                  one, pool, page_size::huge_2m, after_one, 1, 1, 3);
            }),
            0)
      << "absl::flat_hash_map";
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_2m, before));
}
