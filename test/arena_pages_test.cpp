// Tests of the node arena's pages: release of empty huge pages (RSS and the hugetlb pool read from
// the kernel), an arena over 1 GiB pages, coverage of its slabs. The rest: arena_test.cpp.
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
using hugepage::unsynchronized_arena;
using hugepage::test::under_asan;

using hugepage::test::book_t;
using hugepage::test::kHuge;
using hugepage::test::kMiB;
using hugepage::test::node_alloc;
using hugepage::test::scaled;
using hugepage::test::thp_usable;
using hugepage::test::u64;

// ---- release: RSS and the pool follow the live bytes ------------------------------------------

// Resident bytes of this process's mappings in the arena's slab ranges... are the slabs' own
// resident bytes; once a slab is unmapped, only process-wide RSS can show it left. Both are read.
TEST(ArenaRelease, RssFollowsLiveBytesWhenTheOldestNodesAreErased) {
  if (!thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not enabled (madvise or always)");
  arena a(strategy::thp(), arena_options{1});
  const std::size_t rss_start = hugepage::test::rss_bytes();
  {
    book_t book{node_alloc<u64, u64>(a)};
    const u64 n = 1500000;  // 48-byte nodes: ~69 MiB
    for (u64 i = 0; i < n; ++i) book.emplace_hint(book.end(), i, i);
    const auto built = a.stats();
    const std::size_t rss_built = hugepage::test::rss_bytes();
    // Slabs cost live bytes plus the partly filled last page; RSS grew by about that much.
    EXPECT_LE(built.mapped_bytes, built.slot_bytes * 110 / 100 + a.page_bytes());
    EXPECT_GE(rss_built - rss_start, built.slot_bytes * 95 / 100) << "RSS read from the kernel";

    for (u64 i = 0; i < n * 9 / 10; ++i) book.erase(i);  // the oldest 90%, in insertion order
    const auto after = a.stats();
    const std::size_t rss_after = hugepage::test::rss_bytes();
    EXPECT_GT(after.released_pages, 0u);
    // Survivors fill whole pages except the two at the ends of their run; one empty page retained.
    EXPECT_LE(after.mapped_bytes,
              after.slot_bytes * 110 / 100 + (2 + a.options().retained_pages) * a.page_bytes());
    // The kernel's view: what left is at least the released pages, within 2 huge pages of noise.
    EXPECT_LE(rss_after + after.released_pages * a.page_bytes(), rss_built + 2 * kHuge)
        << "built " << rss_built << ", after erase " << rss_after;
    book.clear();
    const auto cleared = a.stats();
    EXPECT_EQ(cleared.live_bytes, 0u);
    EXPECT_EQ(cleared.pages, a.options().retained_pages) << "only the retained cap stays";
    // AddressSanitizer's shadow of the pages (1/8 of them) stays resident after they go.
    const std::size_t shadow = under_asan() ? built.mapped_bytes / 8 : 0;
    EXPECT_LE(hugepage::test::rss_bytes(), rss_start + (cleared.pages + 2) * kHuge + shadow);
  }
}

TEST(ArenaRelease, RetainedCapZeroGivesEveryEmptyPageBack) {
  unsynchronized_arena a(strategy::thp(), arena_options{0});
  std::vector<void*> p;
  for (int i = 0; i < 100000; ++i) p.push_back(a.allocate(64, 8));
  EXPECT_EQ(a.stats().pages, (100000 * 64) / (a.page_bytes() - 256) + 1);
  for (void* q : p) a.deallocate(q, 64, 8);
  const auto s = a.stats();
  EXPECT_EQ(s.pages, 0u);
  EXPECT_EQ(s.mapped_bytes, 0u);
  EXPECT_EQ(s.released_pages, (100000 * 64) / (a.page_bytes() - 256) + 1);
}

// This process's resident hugetlb bytes, from its smaps (exact, unlike the shared pool counters).
std::size_t own_hugetlb_rss() {
  std::error_code ec;
  std::size_t bytes = 0;
  for (const auto& m : hugepage::read_smaps(0, ec)) {
    if (m.is_hugetlb()) bytes += m.private_hugetlb + m.shared_hugetlb;
  }
  return bytes;
}

TEST(ArenaRelease, HugetlbPagesGoBackToThePoolAndCountersReturn) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 24);
  const auto before = hugepage::test::read_counts(page_size::huge_2m);
  const std::size_t own_before = own_hugetlb_rss();
  {
    arena a(strategy::hugetlb(page_size::huge_2m, hugepage::strict), arena_options{1});
    {
      book_t book{node_alloc<u64, u64>(a)};
      const u64 n = 600000;  // ~28 MiB of nodes: 14 pages
      for (u64 i = 0; i < n; ++i) book.emplace_hint(book.end(), i, i);
      const auto built = a.stats();
      EXPECT_EQ(own_hugetlb_rss() - own_before, built.mapped_bytes) << "every slab is hugetlb";
      const auto coverage = a.backing();
      EXPECT_EQ(coverage.hugetlb_2m, built.mapped_bytes) << coverage.note;

      for (u64 i = 0; i < n * 9 / 10; ++i) book.erase(i);
      const auto after = a.stats();
      EXPECT_GE(after.released_pages, built.pages - 3);
      EXPECT_EQ(own_hugetlb_rss() - own_before, after.mapped_bytes)
          << "released pages left this process";
    }
    EXPECT_EQ(own_hugetlb_rss() - own_before, a.stats().mapped_bytes);
    EXPECT_LE(a.stats().pages, 1u);
  }
  EXPECT_EQ(own_hugetlb_rss(), own_before);
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_2m, before));
}

// ---- an arena over 1 GiB pages ----------------------------------------------------------------

// Every size class takes a 2 MiB slab of the one 1 GiB page: a container that touches a dozen
// classes (a hash map's early bucket arrays, its nodes) pins one 1 GiB page, not a dozen.
TEST(ArenaGigantic, SizeClassesShareOnePageAndItGoesBackWhenAllItsSlabsAreFree) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  const std::size_t own_before = own_hugetlb_rss();
  {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict),
                           arena_options{0});
    ASSERT_EQ(a.page_bytes(), std::size_t{1} << 30);
    std::vector<std::pair<void*, std::size_t>> live;
    for (const std::size_t bytes : {24u, 48u, 64u, 200u, 512u, 1024u}) {
      for (int i = 0; i < 1000; ++i) live.emplace_back(a.allocate(bytes, 8), bytes);
    }
    const auto s = a.stats();
    EXPECT_EQ(s.pages, 1u) << "six classes, one 1 GiB page";
    EXPECT_EQ(s.slabs, 6u);
    EXPECT_EQ(s.mapped_bytes, std::size_t{1} << 30);
    EXPECT_EQ(own_hugetlb_rss() - own_before, std::size_t{1} << 30) << "one page resident";
    const auto coverage = a.backing();
    EXPECT_EQ(coverage.hugetlb_1g, std::size_t{1} << 30) << coverage.note;
    for (const auto& [p, bytes] : live) {
      // Each object's slab is a 2 MiB piece of the page; slot 0 starts after the header area.
      const auto offset = reinterpret_cast<std::uintptr_t>(p) & (a.slab_bytes() - 1);
      ASSERT_GE(offset, hugepage::detail::arena_slab_data_offset);
    }
    for (const auto& [p, bytes] : live) a.deallocate(p, bytes, 8);
    const auto after = a.stats();
    EXPECT_EQ(after.pages, 0u);
    EXPECT_EQ(after.slabs, 0u);
    EXPECT_EQ(after.released_pages, 1u);
    EXPECT_EQ(own_hugetlb_rss(), own_before) << "the page left the process";
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// A slab freed by one class serves the next class that needs one; the page is not given back
// while any of its slabs is in use, and an empty page within the retained cap stays.
TEST(ArenaGigantic, FreedSlabsAreReusedByOtherClassesInsideThePage) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict),
                           arena_options{1});
    const std::size_t per_slab = (a.slab_bytes() - hugepage::detail::arena_slab_data_offset) / 64;
    void* keep = a.allocate(32, 8);  // holds the page in use throughout
    std::vector<void*> nodes;
    for (std::size_t i = 0; i < 3 * per_slab; ++i) nodes.push_back(a.allocate(64, 8));
    std::set<std::uintptr_t> slabs;
    for (void* p : nodes) slabs.insert(reinterpret_cast<std::uintptr_t>(p) & ~(a.slab_bytes() - 1));
    ASSERT_EQ(slabs.size(), 3u);
    EXPECT_EQ(a.stats().slabs, 4u);
    for (void* p : nodes) a.deallocate(p, 64, 8);
    EXPECT_EQ(a.stats().slabs, 1u);
    EXPECT_EQ(a.stats().pages, 1u) << "a slab in use keeps the page";
    EXPECT_EQ(a.stats().released_pages, 0u);
    void* other = a.allocate(128, 8);
    EXPECT_EQ(slabs.count(reinterpret_cast<std::uintptr_t>(other) & ~(a.slab_bytes() - 1)), 1u)
        << "a freed slab was reused";
    a.deallocate(other, 128, 8);
    a.deallocate(keep, 32, 8);
    const auto s = a.stats();
    EXPECT_EQ(s.slabs, 0u);
    EXPECT_EQ(s.pages, 1u) << "the empty page is retained";
    EXPECT_EQ(s.retained_pages, 1u);
    // Reusing the retained page: no new page mapped.
    void* again = a.allocate(48, 8);
    EXPECT_EQ(a.stats().pages, 1u);
    EXPECT_EQ(a.stats().retained_pages, 0u);
    a.deallocate(again, 48, 8);
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// Over 1 GiB pages, a block the strategy would map (2 MiB and more) that fits in a page takes a
// run of adjacent slabs of the arena's page, so a hash table's bucket array shares the page with
// its nodes instead of going to 2 MiB pages; a freed run serves the next run or class.
TEST(ArenaGigantic, LargeBlocksTakeRunsOfSlabsOnTheSamePage) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  const std::size_t own_before = own_hugetlb_rss();
  {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict),
                           arena_options{0});
    const auto page_of = [&a](const void* p) {
      return reinterpret_cast<std::uintptr_t>(p) & ~(a.page_bytes() - 1);
    };
    void* node = a.allocate(64, 8);
    void* five = a.allocate(5 * kMiB, 64);
    void* hundred = a.allocate(100 * kMiB, 4096);
    EXPECT_EQ(page_of(five), page_of(node)) << "the run is on the nodes' page";
    EXPECT_EQ(page_of(hundred), page_of(node));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(five) % a.slab_bytes(), 0u);
    std::memset(five, 0x5a, 5 * kMiB);
    std::memset(hundred, 0xa5, 100 * kMiB);
    auto s = a.stats();
    EXPECT_EQ(s.pages, 1u);
    EXPECT_EQ(s.run_slabs, 3u + 50u);
    EXPECT_EQ(s.large_bytes, 105 * kMiB);
    EXPECT_EQ(own_hugetlb_rss() - own_before, std::size_t{1} << 30) << "nothing on other pages";
    // Below the strategy's threshold: not a run (::operator new, as before).
    void* small_block = a.allocate(kMiB, 8);
    EXPECT_EQ(a.stats().run_slabs, 53u);
    a.deallocate(small_block, kMiB, 8);

    a.deallocate(five, 5 * kMiB, 64);
    EXPECT_EQ(a.stats().run_slabs, 50u);
    void* four = a.allocate(4 * kMiB, 64);
    EXPECT_EQ(four, five) << "the freed run was reused first-fit";
    for (std::size_t i = 0; i < 100 * kMiB; i += 4096) {
      ASSERT_EQ(static_cast<unsigned char*>(hundred)[i], 0xa5) << "a neighbour overwrote it";
    }
    a.deallocate(four, 4 * kMiB, 64);
    a.deallocate(hundred, 100 * kMiB, 4096);
    a.deallocate(node, 64, 8);
    s = a.stats();
    EXPECT_EQ(s.run_slabs, 0u);
    EXPECT_EQ(s.large_bytes, 0u);
    EXPECT_EQ(s.pages, 0u) << "no slab in use: the page went back";
    EXPECT_EQ(own_hugetlb_rss(), own_before);
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// A std::unordered_map on 1 GiB pages: its nodes, small bucket arrays (slabs of their classes) and
// large bucket arrays (runs) share one page.
TEST(ArenaGigantic, UnorderedMapTakesOnePage) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  const std::size_t own_before = own_hugetlb_rss();
  {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict));
    using alloc = arena_allocator<std::pair<const u64, u64>, unsynchronized_arena>;
    std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>, alloc> m{alloc(a)};
    const u64 n = 1000000;  // a bucket array of 8 MiB or more: a run
    for (u64 i = 0; i < n; ++i) m.emplace(i * 7919, i);
    const auto s = a.stats();
    EXPECT_GE(s.slabs, 2u) << "nodes and small bucket arrays";
    EXPECT_EQ(s.run_slabs, (m.bucket_count() * sizeof(void*) + a.slab_bytes() - 1) / a.slab_bytes())
        << "the bucket array is a run";
    EXPECT_EQ(s.pages, 1u);
    EXPECT_EQ(own_hugetlb_rss() - own_before, std::size_t{1} << 30);
    EXPECT_EQ(a.backing().hugetlb_1g, std::size_t{1} << 30);
    for (u64 i = 0; i < n; ++i) ASSERT_EQ(m.at(i * 7919), i);
  }
  EXPECT_EQ(own_hugetlb_rss(), own_before);
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// Runs and class slabs mixed at random over 1 GiB pages, with a retained page: no two live blocks
// overlap, every block keeps what was written to it, runs are aligned and lie on a page the arena
// holds, and stats() adds up after every step. A slip in the page bitmap, the page lists or the
// retained count shows here as an overlap, a lost write or a count that drifts.
TEST(ArenaGigantic, RandomRunsAndSlabsNeverOverlapAndStatsAddUp) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 2);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict),
                           arena_options{1});
    struct live_block {
      unsigned char* p;
      std::size_t bytes;
      std::size_t alignment;
      unsigned char tag;
    };
    // The first and last byte and the first byte of every slab the block spans.
    const auto marks = [&a](const live_block& b, auto&& visit) {
      visit(b.p[0]);
      visit(b.p[b.bytes - 1]);
      for (std::size_t i = a.slab_bytes(); i < b.bytes; i += a.slab_bytes()) visit(b.p[i]);
    };
    std::vector<live_block> live;
    std::mt19937_64 rng(20261123);
    std::size_t runs = 0, large = 0, small = 0;
    const std::size_t per_slab = a.slab_bytes();
    const auto check = [&](bool blocks) -> ::testing::AssertionResult {
      const auto s = a.stats();
      if (s.run_slabs != runs || s.large_bytes != large || s.live_bytes != small) {
        return ::testing::AssertionFailure()
               << "run_slabs " << s.run_slabs << " (" << runs << "), large_bytes " << s.large_bytes
               << " (" << large << "), live_bytes " << s.live_bytes << " (" << small << ")";
      }
      if (s.retained_pages > 1 || s.pages > 2 ||
          s.slabs + s.run_slabs > s.pages * (s.page_bytes / per_slab)) {
        return ::testing::AssertionFailure()
               << "pages " << s.pages << ", retained " << s.retained_pages << ", slabs " << s.slabs;
      }
      if (!live.empty() && s.retained_pages >= s.pages) {
        return ::testing::AssertionFailure() << "every page retained, yet blocks live";
      }
      if (!blocks) return ::testing::AssertionSuccess();
      // Every page a live block sits on is in use, so not among the retained ones.
      std::set<std::uintptr_t> in_use;
      for (const live_block& b : live) {
        in_use.insert(reinterpret_cast<std::uintptr_t>(b.p) & ~(s.page_bytes - 1));
      }
      if (s.retained_pages + in_use.size() > s.pages) {
        return ::testing::AssertionFailure()
               << s.retained_pages << " retained and " << in_use.size() << " in use of " << s.pages;
      }
      std::vector<live_block> sorted = live;
      std::sort(sorted.begin(), sorted.end(),
                [](const live_block& x, const live_block& y) { return x.p < y.p; });
      for (std::size_t i = 0; i + 1 < sorted.size(); ++i) {
        if (sorted[i].p + sorted[i].bytes > sorted[i + 1].p) {
          return ::testing::AssertionFailure()
                 << sorted[i].bytes << " bytes at " << static_cast<void*>(sorted[i].p)
                 << " overlap " << sorted[i + 1].bytes << " bytes at "
                 << static_cast<void*>(sorted[i + 1].p);
        }
      }
      const auto ranges = a.mapped_ranges();
      for (const live_block& b : live) {
        if (reinterpret_cast<std::uintptr_t>(b.p) % b.alignment != 0) {
          return ::testing::AssertionFailure() << "misaligned block of " << b.bytes;
        }
        bool bad = false;
        marks(b, [&](unsigned char& c) { bad = bad || c != b.tag; });
        if (bad) return ::testing::AssertionFailure() << "block of " << b.bytes << " overwritten";
        if (b.bytes < kHuge) continue;
        const bool held = std::any_of(ranges.begin(), ranges.end(), [&b](const auto& r) {
          const auto* start = static_cast<const unsigned char*>(r.first);
          return b.p >= start && b.p + b.bytes <= start + r.second;
        });
        if (!held) return ::testing::AssertionFailure() << "a run outside the arena's pages";
      }
      return ::testing::AssertionSuccess();
    };
    const auto free_one = [&](std::size_t i) {
      const live_block b = live[i];
      live[i] = live.back();
      live.pop_back();
      a.deallocate(b.p, b.bytes, b.alignment);
      if (b.bytes >= kHuge) {
        runs -= (b.bytes + per_slab - 1) / per_slab;
        large -= b.bytes;
      } else {
        small -= b.bytes;
      }
    };
    const std::size_t alignments[] = {8, 64, 4096, kHuge};
    const int steps = scaled(4000);
    for (int step = 0; step < steps; ++step) {
      const auto action = rng() % 10;
      if (action < 3 && large < 384 * kMiB) {  // a run
        live_block b{};
        b.bytes = kHuge + rng() % (30 * kMiB);
        b.alignment = alignments[rng() % 4];
        b.tag = static_cast<unsigned char>(rng());
        b.p = static_cast<unsigned char*>(a.allocate(b.bytes, b.alignment));
        marks(b, [&b](unsigned char& c) { c = b.tag; });
        live.push_back(b);
        runs += (b.bytes + per_slab - 1) / per_slab;
        large += b.bytes;
      } else if (action < 6 && live.size() < 40000) {  // a batch of nodes of one class
        const std::size_t bytes = 1 + rng() % 1024;
        const std::size_t count = 1 + rng() % 3000;
        for (std::size_t n = 0; n < count; ++n) {
          live_block b{};
          b.bytes = bytes;
          b.alignment = 8;
          b.tag = static_cast<unsigned char>(rng());
          b.p = static_cast<unsigned char*>(a.allocate(b.bytes, b.alignment));
          marks(b, [&b](unsigned char& c) { c = b.tag; });
          live.push_back(b);
          small += b.bytes;
        }
      } else if (action == 9 && rng() % 8 == 0) {  // free everything: the pages empty out
        while (!live.empty()) free_one(live.size() - 1);
      } else if (!live.empty()) {  // free a share of what lives, slabs and runs alike
        const std::size_t count = 1 + rng() % (live.size() / 2 + 1);
        for (std::size_t n = 0; n < count && !live.empty(); ++n) free_one(rng() % live.size());
      }
      ASSERT_TRUE(check(step % 25 == 0)) << "step " << step;
    }
    while (!live.empty()) free_one(live.size() - 1);
    ASSERT_TRUE(check(true));
    const auto s = a.stats();
    EXPECT_EQ(s.slabs, 0u);
    EXPECT_EQ(s.run_slabs, 0u);
    EXPECT_EQ(s.pages, 1u) << "the one retained page";
    EXPECT_EQ(s.retained_pages, 1u);
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// A hugetlb cgroup limit of one 1 GiB page plays the short pool (the shared pool is not drained):
// a run that fits on no page the arena holds needs a second page, the strict strategy refuses it,
// allocate throws, and the arena is as it was: one page, the same runs and slabs, and that page
// goes on serving runs and nodes from the slabs it has left.
TEST(ArenaGigantic, RunThatNeedsAPageThePoolLacksGoesToTheStrategysTwoMibPages) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 320);
  const hugepage::test::scratch_cgroup cgroup("hugetlb");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  const std::string limit = std::to_string(std::size_t{1} << 30);
  ASSERT_TRUE(cgroup.write("hugetlb.1GB.max", limit) && cgroup.write("hugetlb.1GB.rsvd.max", limit))
      << std::strerror(errno);
  const auto before_1g = hugepage::test::read_counts(page_size::huge_1g);
  const auto before_2m = hugepage::test::read_counts(page_size::huge_2m);
  const int code = hugepage::test::run_in_child([&cgroup]() -> int {
    if (!cgroup.join()) return 2;
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict),
                           arena_options{1});
    const auto page_of = [&a](const void* p) {
      return reinterpret_cast<std::uintptr_t>(p) & ~(a.page_bytes() - 1);
    };
    void* node = a.allocate(64, 8);
    void* first = a.allocate(600 * kMiB, 64);  // 300 slabs after the node's slab
    const auto held = a.stats();
    // 211 slabs left and no second 1 GiB page to be had: the strategy's cascade serves it on
    // 2 MiB pages, as a strict 1 GiB strategy does for any block below 1 GiB.
    auto* second = static_cast<unsigned char*>(a.allocate(600 * kMiB, 64));
    std::memset(second, 0x5a, 600 * kMiB);
    const auto after = a.stats();
    if (after.pages != 1 || after.run_slabs != held.run_slabs || after.slabs != held.slabs ||
        after.large_bytes != held.large_bytes + 600 * kMiB) {
      return 3;
    }
    if (page_of(second) == page_of(node)) return 4;
    const auto backing = hugepage::backing_of(second, 600 * kMiB);
    if (backing.hugetlb_2m != 600 * kMiB) return 5;
    a.deallocate(second, 600 * kMiB, 64);  // back to the strategy, not to the page
    if (a.stats().run_slabs != held.run_slabs || a.stats().pages != 1) return 6;
    void* fits = a.allocate(400 * kMiB, 64);  // 200 of the 211 slabs left
    void* other = a.allocate(512, 8);         // a slab of another class
    if (page_of(fits) != page_of(node) || page_of(other) != page_of(node)) return 7;
    a.deallocate(other, 512, 8);
    a.deallocate(fits, 400 * kMiB, 64);
    a.deallocate(first, 600 * kMiB, 64);
    a.deallocate(node, 64, 8);
    const auto empty = a.stats();
    if (empty.pages != 1 || empty.retained_pages != 1 || empty.run_slabs != 0) return 8;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before_1g));
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_2m, before_2m));
}

// Two pages held, the older one emptied and retained behind the one in use: the next run that
// fits only on an empty page takes the retained one instead of mapping a third (the list of pages
// with a free slab keeps its tail right when a page leaves it and comes back at the back).
TEST(ArenaGigantic, RetainedPageBehindAPageInUseServesTheNextRun) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 2);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  {
    unsynchronized_arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict),
                           arena_options{2});
    void* half = a.allocate(512 * kMiB, 64);  // the first page
    void* most = a.allocate(700 * kMiB, 64);  // does not fit beside it: a second page
    a.deallocate(half, 512 * kMiB, 64);       // the first page empties and is retained
    ASSERT_EQ(a.stats().pages, 2u);
    ASSERT_EQ(a.stats().retained_pages, 1u);
    void* again = a.allocate(700 * kMiB, 64);  // fits only on the retained page
    EXPECT_EQ(again, half);
    auto s = a.stats();
    EXPECT_EQ(s.pages, 2u) << "no third page";
    EXPECT_EQ(s.retained_pages, 0u);
    EXPECT_EQ(s.run_slabs, 700u);
    a.deallocate(again, 700 * kMiB, 64);
    a.deallocate(most, 700 * kMiB, 64);
    s = a.stats();
    EXPECT_EQ(s.pages, 2u);
    EXPECT_EQ(s.retained_pages, 2u);
    EXPECT_EQ(s.run_slabs, 0u);
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// ---- coverage ---------------------------------------------------------------------------------

TEST(ArenaCoverage, ThpSlabsAreHugeAsTheKernelReports) {
  if (!thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not enabled (madvise or always)");
  unsynchronized_arena a;
  using alloc = arena_allocator<std::pair<const u64, u64>, unsynchronized_arena>;
  std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>, alloc> m{alloc(a)};
  for (u64 i = 0; i < 1000000; ++i) m.emplace(i * 7919, i);
  const auto report = a.backing();
  ASSERT_NE(report.source, hugepage::backing_source::unavailable) << report.note;
  EXPECT_EQ(report.bytes, a.stats().mapped_bytes);
  EXPECT_GE(report.huge_fraction(), 0.99)
      << "thp " << report.thp << " of " << report.bytes << " (" << report.note << ")";
}

}  // namespace
