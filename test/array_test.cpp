// Tests of hugepage::array (array.hpp): value- and default-initialisation observed on memory the
// allocator hands out dirty, a throwing constructor (elements destroyed, memory freed), release and
// adopt with the exact size, unique_ptr with array_deleter, non-trivial elements destroyed last
// first, and coverage of a big array read from the kernel.
#include "hugepage/array.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using u64 = std::uint64_t;

// ---- a checking allocator ---------------------------------------------------------------------

// What dirty_allocator has handed out and not taken back, and every size it was given.
struct ledger {
  static inline std::size_t live_blocks = 0;
  static inline std::size_t live_bytes = 0;
  static inline std::size_t wrong_sizes = 0;  // deallocate(p, n) with another n than allocate
  static inline std::vector<std::pair<const void*, std::size_t>> blocks;
};

// A stateless allocator over std::allocator that fills each block with 0xAB before returning it
// (so what the array writes, and what it leaves unwritten, can be seen) and checks that each
// block is freed with the size it was allocated with.
template <class T>
struct dirty_allocator {
  using value_type = T;
  dirty_allocator() = default;
  template <class U>
  dirty_allocator(const dirty_allocator<U>& /*other*/) noexcept {}  // NOLINT
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>().allocate(n);
    std::memset(static_cast<void*>(p), 0xAB, n * sizeof(T));
    ++ledger::live_blocks;
    ledger::live_bytes += n * sizeof(T);
    ledger::blocks.emplace_back(p, n);
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept {
    for (auto it = ledger::blocks.begin(); it != ledger::blocks.end(); ++it) {
      if (it->first != p) continue;
      if (it->second != n) ++ledger::wrong_sizes;
      ledger::blocks.erase(it);
      break;
    }
    --ledger::live_blocks;
    ledger::live_bytes -= n * sizeof(T);
    std::allocator<T>().deallocate(p, n);
  }
  friend bool operator==(dirty_allocator, dirty_allocator) noexcept { return true; }
  friend bool operator!=(dirty_allocator, dirty_allocator) noexcept { return false; }
};

// An element that counts itself and records the order of its destructions.
struct tracked {
  static inline int live = 0;
  static inline int constructed = 0;
  static inline int throw_at = -1;  // the construction that throws; -1: none
  static inline std::vector<int> destroyed;
  int id;
  std::string text;  // non-trivial member: its destructor must run
  tracked() : id(constructed) {
    if (constructed == throw_at) throw std::runtime_error("element " + std::to_string(id));
    ++constructed;
    ++live;
    text = "element number " + std::to_string(id);
  }
  ~tracked() {
    --live;
    destroyed.push_back(id);
  }
  static void clear() {
    live = constructed = 0;
    throw_at = -1;
    destroyed.clear();
  }
};

// An aggregate with no constructor: value-initialisation zeroes it, default leaves it.
struct plain {
  u64 a;
  int b;
};

class ArrayTest : public ::testing::Test {
 protected:
  void SetUp() override { tracked::clear(); }
  void TearDown() override {
    EXPECT_EQ(ledger::live_blocks, 0u) << "a block was not freed";
    EXPECT_EQ(ledger::live_bytes, 0u);
    EXPECT_EQ(ledger::wrong_sizes, 0u) << "a block was freed with another size";
    ledger::wrong_sizes = 0;
  }
};

template <class T>
using dirty_array = hugepage::array<T, dirty_allocator<T>>;

// ---- compile-time contract --------------------------------------------------------------------

static_assert(sizeof(hugepage::array<int>) == sizeof(int*) + sizeof(std::size_t),
              "a stateless allocator costs no space");
static_assert(std::is_nothrow_move_constructible_v<hugepage::array<int>>);
static_assert(std::is_nothrow_move_assignable_v<hugepage::array<int>>);
static_assert(!std::is_copy_constructible_v<hugepage::array<int>>);
static_assert(!std::is_copy_assignable_v<hugepage::array<int>>);
static_assert(std::is_same_v<hugepage::array<int>::allocator_type, hugepage::thp_allocator<int>>);

// ---- construction semantics -------------------------------------------------------------------

TEST_F(ArrayTest, MakeArrayValueInitialisesLikeNewWithParentheses) {
  auto ints = hugepage::make_array<int, dirty_allocator<int>>(1000);
  auto plains = hugepage::make_array<plain, dirty_allocator<plain>>(100);
  ASSERT_EQ(ints.size(), 1000u);
  for (int x : ints) ASSERT_EQ(x, 0);
  for (const plain& p : plains) ASSERT_TRUE(p.a == 0 && p.b == 0);
}

TEST_F(ArrayTest, MakeArrayForOverwriteDefaultInitialisesLikeNewWithout) {
  auto ints = hugepage::make_array_for_overwrite<int, dirty_allocator<int>>(1000);
  ASSERT_EQ(ints.size(), 1000u);
  int untouched = 0;
  for (int x : ints) untouched += x == static_cast<int>(0xABABABABu) ? 1 : 0;
  EXPECT_EQ(untouched, 1000) << "default-initialisation writes nothing";

  auto objects = hugepage::make_array_for_overwrite<tracked, dirty_allocator<tracked>>(10);
  EXPECT_EQ(tracked::live, 10) << "a class's default constructor runs for every element";
  EXPECT_EQ(objects[9].id, 9);
}

TEST_F(ArrayTest, ElementsAreDestroyedLastFirstAndFreedWithTheirSize) {
  {
    auto objects = hugepage::make_array<tracked, dirty_allocator<tracked>>(5);
    EXPECT_EQ(tracked::live, 5);
    EXPECT_EQ(objects[3].text, "element number 3");
    EXPECT_EQ(ledger::live_blocks, 1u);
  }
  EXPECT_EQ(tracked::live, 0);
  EXPECT_EQ(tracked::destroyed, (std::vector<int>{4, 3, 2, 1, 0})) << "as delete[] does";
}

TEST_F(ArrayTest, ZeroElementsAllocateNothing) {
  auto none = hugepage::make_array<tracked, dirty_allocator<tracked>>(0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
  EXPECT_EQ(none.begin(), none.end());
  EXPECT_EQ(ledger::live_blocks, 0u);
}

// ---- exceptions -------------------------------------------------------------------------------

TEST_F(ArrayTest, AThrowingConstructorDestroysWhatWasBuiltAndFreesTheMemory) {
  tracked::throw_at = 6;
  try {
    auto objects = hugepage::make_array<tracked, dirty_allocator<tracked>>(10);
    FAIL() << "the seventh constructor throws";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "element 6");
  }
  EXPECT_EQ(tracked::live, 0);
  EXPECT_EQ(tracked::destroyed, (std::vector<int>{5, 4, 3, 2, 1, 0})) << "last first, as new[]";
  EXPECT_EQ(ledger::live_blocks, 0u) << "the memory went back";

  tracked::clear();
  tracked::throw_at = 0;
  using alloc = dirty_allocator<tracked>;
  EXPECT_THROW((void)(hugepage::make_array_for_overwrite<tracked, alloc>(3)), std::runtime_error);
  EXPECT_EQ(ledger::live_blocks, 0u);
}

TEST_F(ArrayTest, AnOverflowingCountThrowsBadArrayNewLength) {
  const auto before = hugepage::stats().live_mappings;
  EXPECT_THROW((void)hugepage::make_array<u64>(SIZE_MAX / 4), std::bad_array_new_length);
  EXPECT_THROW((void)hugepage::make_unique_array<u64>(SIZE_MAX / 4), std::bad_array_new_length);
  EXPECT_EQ(hugepage::stats().live_mappings, before);
}

// ---- ownership --------------------------------------------------------------------------------

TEST_F(ArrayTest, ReleaseAndAdoptHandTheStorageOnWithItsExactSize) {
  auto first = hugepage::make_array<tracked, dirty_allocator<tracked>>(7);
  const tracked* where = first.data();
  hugepage::array_block<tracked, dirty_allocator<tracked>> block = first.release();
  EXPECT_TRUE(first.empty());
  EXPECT_EQ(first.data(), nullptr);
  EXPECT_EQ(block.data, where);
  EXPECT_EQ(block.size, 7u);
  EXPECT_EQ(tracked::live, 7) << "release destroys nothing";

  auto second = dirty_array<tracked>::adopt(block);
  EXPECT_EQ(second.size(), 7u);
  EXPECT_EQ(second[6].id, 6);
  second.reset();
  EXPECT_EQ(tracked::live, 0);
  EXPECT_EQ(tracked::destroyed.size(), 7u) << "each element destroyed once";

  auto third = hugepage::make_array<tracked, dirty_allocator<tracked>>(3);
  hugepage::delete_array<tracked, dirty_allocator<tracked>>(third.release());
  EXPECT_EQ(tracked::live, 0);

  // A named block is emptied by delete_array: a second call frees nothing twice.
  auto fourth = hugepage::make_array<tracked, dirty_allocator<tracked>>(2);
  hugepage::array_block<tracked, dirty_allocator<tracked>> named = fourth.release();
  hugepage::delete_array(named);
  EXPECT_EQ(named.data, nullptr);
  EXPECT_EQ(named.size, 0u);
  hugepage::delete_array(named);
  EXPECT_EQ(ledger::live_blocks, 0u);
  EXPECT_EQ(tracked::destroyed.size(), 12u) << "each element destroyed once";
}

// The allocator is part of a block's type: a block cannot reach an array of another allocator.
static_assert(!std::is_convertible_v<hugepage::array_block<int, hugepage::huge_page_allocator<int>>,
                                     hugepage::array_block<int>>);
static_assert(
    std::is_same_v<decltype(hugepage::array<int>().release()), hugepage::array_block<int>>);

TEST_F(ArrayTest, MoveCarriesTheStorageAndAssignmentFreesTheOld) {
  auto a = hugepage::make_array<tracked, dirty_allocator<tracked>>(4);
  auto b = hugepage::make_array<tracked, dirty_allocator<tracked>>(2);
  const tracked* where = a.data();
  b = std::move(a);
  EXPECT_EQ(tracked::live, 4) << "b's two elements were destroyed";
  EXPECT_EQ(b.data(), where);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  dirty_array<tracked> c(std::move(b));
  EXPECT_EQ(c.size(), 4u);
  EXPECT_EQ(ledger::live_blocks, 1u);
}

TEST_F(ArrayTest, UniquePtrWithArrayDeleterFreesTheWholeBlock) {
  {
    hugepage::unique_array<tracked, dirty_allocator<tracked>> p =
        hugepage::make_unique_array<tracked, dirty_allocator<tracked>>(9);
    EXPECT_EQ(p.get_deleter().size, 9u);
    EXPECT_EQ(p[8].id, 8);
    auto q = hugepage::make_unique_array_for_overwrite<int, dirty_allocator<int>>(16);
    EXPECT_EQ(q[15], static_cast<int>(0xABABABABu));
  }
  EXPECT_EQ(tracked::live, 0);
}

TEST_F(ArrayTest, AStatefulAllocatorTravelsWithTheStorage) {
  using alloc = hugepage::arena_allocator<u64, hugepage::unsynchronized_arena>;
  hugepage::unsynchronized_arena nodes;
  auto a = hugepage::make_array<u64, alloc>(100, alloc(nodes));
  EXPECT_EQ(nodes.stats().live_bytes, 100 * sizeof(u64));
  EXPECT_EQ(&a.get_allocator().get_arena(), &nodes);
  hugepage::array<u64, alloc> b(std::move(a));
  EXPECT_EQ(&b.get_allocator().get_arena(), &nodes);
  hugepage::unsynchronized_arena other;
  hugepage::array<u64, alloc> c(alloc{other});
  c = std::move(b);  // c's allocator is now the one of the storage it holds
  EXPECT_EQ(&c.get_allocator().get_arena(), &nodes);
  c.reset();
  EXPECT_EQ(nodes.stats().live_bytes, 0u) << "freed into the arena it came from";
}

// ---- huge pages -------------------------------------------------------------------------------

TEST_F(ArrayTest, ABigArrayIsOnHugePagesAsTheKernelReports) {
  const auto mode = hugepage::read_thp_mode();
  if (!mode || *mode == hugepage::thp_mode::never) {
    HUGEPAGE_SKIP_OR_FAIL("THP is not enabled (madvise or always)");
  }
  auto ranks = hugepage::make_array<double>(std::size_t{8} << 20);  // 64 MiB, zeroed: touched
  const auto report = hugepage::backing_of(ranks.data(), ranks.size() * sizeof(double));
  ASSERT_NE(report.source, hugepage::backing_source::unavailable) << report.note;
  EXPECT_EQ(report.bytes, ranks.size() * sizeof(double));
  EXPECT_GE(report.huge_fraction(), 0.99)
      << "thp " << report.thp << " of " << report.bytes << " (" << report.note << ")";
  EXPECT_EQ(ranks[12345], 0.0);
}

}  // namespace
