// test/pmr_test.cpp - the std::pmr resources: containers, coverage asserted from the kernel,
// is_equal semantics, configured instances and the process-wide instances.
#include "hugepage/pmr.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "contents.hpp"
#include "hugepage/allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/system.hpp"
#include "kinds.hpp"
#include "support.hpp"

namespace hugepage {
namespace {

using units::kib;
using units::mib;
constexpr std::size_t huge_2m_bytes = bytes_of(page_size::huge_2m);

// ---- the resource kinds under test: kinds.hpp ---------------------------------------------------

using test::holds_keys;
using test::holds_sequence;
using test::value_of;

// ---- helpers -----------------------------------------------------------------------------------

using hugepage::test::is_aligned;
using hugepage::test::live_mappings;

// ---- typed tests over the four process-wide resources ------------------------------------------

template <class Kind>
class PmrResourceTest : public ::testing::Test {};

TYPED_TEST_SUITE(PmrResourceTest, kinds, kind_names);

TYPED_TEST(PmrResourceTest, ResourceCarriesItsStrategy) {
  const auto* r = dynamic_cast<const pmr::strategy_resource*>(TypeParam::resource());
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->get_strategy() == TypeParam::expected);
}

TYPED_TEST(PmrResourceTest, VectorKeepsContentsThroughGrowthCopyMoveAndSwap) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 40);
  std::pmr::memory_resource* const resource = TypeParam::resource();
  using vector = std::pmr::vector<std::uint64_t>;
  constexpr std::size_t n = 6 * mib / sizeof(std::uint64_t) + 3;
  const std::size_t live_before = live_mappings();
  {
    vector a(resource);
    for (std::size_t i = 0; i < n; ++i) a.push_back(value_of(i));
    EXPECT_EQ(a.get_allocator().resource(), resource);
    EXPECT_TRUE(holds_sequence(a, n)) << "after growth";
    EXPECT_GT(live_mappings(), live_before) << "a 6 MiB vector must take the mapped path";
    EXPECT_TRUE(is_aligned(a.data(), huge_2m_bytes));

    vector b(a, resource);
    EXPECT_NE(b.data(), a.data());
    EXPECT_TRUE(holds_sequence(b, n)) << "copy";

    const std::uint64_t* const buffer = a.data();
    vector c(std::move(a));
    EXPECT_EQ(c.get_allocator().resource(), resource);
    EXPECT_EQ(c.data(), buffer) << "move construction takes the buffer";
    EXPECT_TRUE(holds_sequence(c, n)) << "move construction";

    // A distinct resource object with the same strategy is equal: move assignment takes the
    // buffer instead of copying element by element.
    pmr::strategy_resource twin(TypeParam::expected);
    ASSERT_TRUE(twin.is_equal(*resource));
    vector d(10, 7, &twin);
    d = std::move(c);
    EXPECT_EQ(d.data(), buffer) << "equal resources: the buffer moves";
    EXPECT_EQ(d.get_allocator().resource(), &twin) << "pmr allocators do not propagate";
    EXPECT_TRUE(holds_sequence(d, n)) << "move assignment between equal resources";

    // An unequal resource must copy.
    vector e(std::pmr::new_delete_resource());
    e = std::move(d);
    EXPECT_NE(e.data(), buffer) << "unequal resources: elements are moved one by one";
    EXPECT_TRUE(holds_sequence(e, n)) << "move assignment between unequal resources";

    b.push_back(value_of(n));
    vector f(std::move(b));
    vector g(3, 0, resource);
    const std::uint64_t* const f_buffer = f.data();
    g.swap(f);
    EXPECT_EQ(g.data(), f_buffer);
    EXPECT_TRUE(holds_sequence(g, n + 1)) << "swap";

    g.resize(1000);
    g.shrink_to_fit();
    EXPECT_TRUE(holds_sequence(g, 1000)) << "shrink_to_fit below the threshold";
  }
  EXPECT_EQ(live_mappings(), live_before) << "every mapping released";
}

TYPED_TEST(PmrResourceTest, UnorderedMapKeepsContentsThroughRehash) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 32);
  std::pmr::memory_resource* const resource = TypeParam::resource();
  using map = std::pmr::unordered_map<std::uint64_t, std::uint64_t>;
  constexpr std::size_t n = 300000;
  const std::size_t live_before = live_mappings();
  {
    map m(resource);
    for (std::uint64_t k = 0; k < n; ++k) m.emplace(k, value_of(k));
    EXPECT_TRUE(holds_keys(m, n)) << "after growth";
    EXPECT_GT(live_mappings(), live_before) << "the bucket array of 300k entries is mapped";
    m.rehash(std::size_t{1} << 20);
    EXPECT_GE(m.bucket_count(), std::size_t{1} << 20);
    EXPECT_TRUE(holds_keys(m, n)) << "after rehash";

    map copy(m, resource);
    EXPECT_TRUE(holds_keys(copy, n)) << "copy";
    copy.erase(std::uint64_t{0});
    EXPECT_TRUE(holds_keys(m, n)) << "the copy is independent";
    map moved(std::move(m));
    EXPECT_TRUE(holds_keys(moved, n)) << "move";
    map assigned(resource);
    assigned = std::move(moved);
    EXPECT_TRUE(holds_keys(assigned, n)) << "move assignment";
    assigned.swap(copy);
    EXPECT_TRUE(holds_keys(copy, n)) << "swap";
    EXPECT_EQ(assigned.size(), n - 1);
  }
  EXPECT_EQ(live_mappings(), live_before);
}

TYPED_TEST(PmrResourceTest, LargeBlockIsOnHugePages) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 16);
  if constexpr (!TypeParam::strict_pool) {
    const auto mode = hugepage::read_thp_mode();
    if (!mode || *mode == hugepage::thp_mode::never) {
      HUGEPAGE_SKIP_OR_FAIL("2 MiB THP is off (effective mode never, or the sysfs files missing)");
    }
  }
  // 64 MiB for the THP kinds; 32 MiB of pool pages for the hugetlb kinds.
  const std::size_t bytes = TypeParam::expected.how() == method::hugetlb ? 32 * mib : 64 * mib;
  const statistics before = stats();
  std::pmr::vector<std::uint64_t> v(bytes / sizeof(std::uint64_t), TypeParam::resource());
  ASSERT_TRUE(is_aligned(v.data(), huge_2m_bytes));
  const backing_report r = backing_of(v.data(), bytes);
  if (::geteuid() == 0) {
    EXPECT_TRUE(r.exact) << "pagemap_scan or kpageflags: " << r.note;
  }
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_EQ(r.not_resident + r.unmapped, 0u) << "fully touched";
  const bool on_pool = TypeParam::expected.how() == method::hugetlb &&
                       stats().fallbacks_to_thp == before.fallbacks_to_thp &&
                       stats().fallbacks_to_base == before.fallbacks_to_base;
  if (on_pool) {
    EXPECT_EQ(r.hugetlb_2m, bytes) << "whole hugetlb pages";
    EXPECT_EQ(r.thp + r.base + r.hugetlb_1g, 0u);
  } else {
    EXPECT_GE(r.huge_fraction(), 0.99) << "thp " << r.thp << ", base " << r.base << "; " << r.note;
    EXPECT_EQ(r.hugetlb_2m + r.hugetlb_1g, 0u);
  }
}

TYPED_TEST(PmrResourceTest, StatisticsFollowOneBlock) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 8);
  std::pmr::memory_resource* const resource = TypeParam::resource();
  constexpr std::size_t bytes = 16 * mib;
  const statistics before = stats();
  void* const p = resource->allocate(bytes, alignof(std::max_align_t));
  const statistics during = stats();
  EXPECT_EQ(during.*TypeParam::requested - before.*TypeParam::requested, bytes);
  std::size_t statistics::*obtained = TypeParam::obtained;
  if (during.fallbacks_to_thp != before.fallbacks_to_thp) obtained = &statistics::obtained_thp;
  EXPECT_EQ(during.*obtained - before.*obtained, bytes);
  EXPECT_EQ(during.mapped_bytes() - before.mapped_bytes(), bytes);
  EXPECT_EQ(during.live_mappings, before.live_mappings + 1);

  resource->deallocate(p, bytes, alignof(std::max_align_t));
  const statistics after = stats();
  EXPECT_EQ(after.*TypeParam::requested, before.*TypeParam::requested);
  EXPECT_EQ(after.obtained_hugetlb_2m, before.obtained_hugetlb_2m);
  EXPECT_EQ(after.obtained_hugetlb_1g, before.obtained_hugetlb_1g);
  EXPECT_EQ(after.obtained_thp, before.obtained_thp);
  EXPECT_EQ(after.obtained_base, before.obtained_base);
  EXPECT_EQ(after.live_mappings, before.live_mappings);
}

TYPED_TEST(PmrResourceTest, OverAlignedBlocksAreAlignedOnEveryPath) {
  HUGEPAGE_REQUIRE_KIND_POOL(TypeParam, 8);
  std::pmr::memory_resource* const resource = TypeParam::resource();
  for (const std::size_t alignment : {std::size_t{64}, std::size_t{4096}}) {
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{100000}, 4 * mib + 1}) {
      const std::size_t live_before = live_mappings();
      auto* const p = static_cast<unsigned char*>(resource->allocate(bytes, alignment));
      EXPECT_EQ(live_mappings(), live_before + (bytes >= huge_2m_bytes ? 1 : 0)) << bytes;
      EXPECT_TRUE(is_aligned(p, alignment)) << bytes << " bytes aligned to " << alignment;
      p[0] = 1;
      p[bytes - 1] = 2;
      EXPECT_EQ(p[0] + p[bytes - 1], bytes == 1 ? 4 : 3);
      resource->deallocate(p, bytes, alignment);
      EXPECT_EQ(live_mappings(), live_before);
    }
  }
}

TYPED_TEST(PmrResourceTest, ZeroBytesAllocateAndDeallocate) {
  std::pmr::memory_resource* const resource = TypeParam::resource();
  const std::size_t live_before = live_mappings();
  void* const p = resource->allocate(0, 1);
  EXPECT_NE(p, nullptr);
  resource->deallocate(p, 0, 1);
  EXPECT_EQ(live_mappings(), live_before);
}

// ---- identity and equality ---------------------------------------------------------------------

TEST(PmrResources, ProcessWideFunctionsReturnTheSamePointerEachCall) {
  EXPECT_EQ(pmr::thp_resource(), pmr::thp_resource());
  EXPECT_EQ(pmr::collapse_resource(), pmr::collapse_resource());
  EXPECT_EQ(pmr::huge_page_resource(), pmr::huge_page_resource());
  EXPECT_EQ(pmr::huge_page_resource(), pmr::huge_page_resource(page_size::huge_2m, strict));
  EXPECT_EQ(pmr::huge_page_resource(page_size::huge_2m, fallback),
            pmr::huge_page_resource(page_size::huge_2m, fallback));
  EXPECT_EQ(pmr::huge_page_resource(page_size::huge_1g),
            pmr::huge_page_resource(page_size::huge_1g, strict));
  EXPECT_EQ(pmr::huge_page_resource(page_size::huge_1g, fallback),
            pmr::huge_page_resource(page_size::huge_1g, fallback));

  const std::vector<std::pmr::memory_resource*> all = {
      pmr::thp_resource(),
      pmr::collapse_resource(),
      pmr::huge_page_resource(page_size::huge_2m, strict),
      pmr::huge_page_resource(page_size::huge_2m, fallback),
      pmr::huge_page_resource(page_size::huge_1g, strict),
      pmr::huge_page_resource(page_size::huge_1g, fallback),
  };
  for (std::size_t i = 0; i < all.size(); ++i) {
    ASSERT_NE(all[i], nullptr);
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      EXPECT_NE(all[i], all[j]) << i << " and " << j << " are distinct resources";
      EXPECT_FALSE(all[i]->is_equal(*all[j])) << i << " and " << j << " differ in strategy";
    }
  }
}

TEST(PmrResources, ProcessWideResourcesHaveDefaultOptions) {
  const auto strategy_of = [](std::pmr::memory_resource* r) {
    return dynamic_cast<pmr::strategy_resource&>(*r).get_strategy();
  };
  EXPECT_TRUE(strategy_of(pmr::thp_resource()) == strategy::thp());
  EXPECT_TRUE(strategy_of(pmr::collapse_resource()) == strategy::collapse());
  EXPECT_TRUE(strategy_of(pmr::huge_page_resource(page_size::huge_1g, fallback)) ==
              strategy::hugetlb(page_size::huge_1g, fallback));
  EXPECT_EQ(strategy_of(pmr::huge_page_resource(page_size::huge_1g)).threshold(),
            bytes_of(page_size::huge_2m))
      << "a 1 GiB resource cascades to 2 MiB pages below one page";
}

TEST(PmrResources, ShareTheStrategiesOfTheAllocators) {
  // One implementation, two interfaces.
  EXPECT_TRUE(pmr::thp_memory_resource().get_strategy() == thp_allocator<int>::get_strategy());
  EXPECT_TRUE(pmr::collapse_memory_resource().get_strategy() ==
              collapse_allocator<int>::get_strategy());
  EXPECT_TRUE(pmr::huge_page_memory_resource().get_strategy() ==
              huge_page_allocator<int>::get_strategy());
  EXPECT_TRUE(pmr::huge_page_memory_resource(page_size::huge_1g, fallback).get_strategy() ==
              (huge_page_allocator<int, page_size::huge_1g, fallback>::get_strategy()));
  EXPECT_FALSE(pmr::thp_memory_resource().get_strategy() ==
               collapse_allocator<int>::get_strategy());
}

TEST(PmrResources, IsEqualFollowsTheStrategy) {
  const pmr::thp_memory_resource thp;
  const pmr::collapse_memory_resource collapse;
  const pmr::huge_page_memory_resource hugetlb;
  const pmr::huge_page_memory_resource hugetlb_fallback(page_size::huge_2m, fallback);
  const pmr::huge_page_memory_resource hugetlb_1g(page_size::huge_1g);

  // Same strategy: equal, also between a local instance and the process-wide one, both ways.
  EXPECT_TRUE(thp.is_equal(*pmr::thp_resource()));
  EXPECT_TRUE(pmr::thp_resource()->is_equal(thp));
  EXPECT_TRUE(collapse.is_equal(*pmr::collapse_resource()));
  EXPECT_TRUE(hugetlb.is_equal(*pmr::huge_page_resource()));
  EXPECT_TRUE(hugetlb_fallback.is_equal(*pmr::huge_page_resource(page_size::huge_2m, fallback)));
  EXPECT_TRUE(hugetlb_1g.is_equal(*pmr::huge_page_resource(page_size::huge_1g)));
  EXPECT_TRUE(thp.is_equal(thp));
  EXPECT_TRUE(*pmr::thp_resource() == thp) << "operator== of memory_resource";
  const pmr::strategy_resource generic(strategy::thp());
  EXPECT_TRUE(generic.is_equal(thp)) << "the class does not matter, the strategy does";

  // Different strategy: not equal.
  EXPECT_FALSE(thp.is_equal(collapse));
  EXPECT_FALSE(collapse.is_equal(thp));
  EXPECT_FALSE(thp.is_equal(hugetlb));
  EXPECT_FALSE(hugetlb.is_equal(hugetlb_fallback));
  EXPECT_FALSE(hugetlb.is_equal(hugetlb_1g));
  EXPECT_FALSE(collapse.is_equal(hugetlb_fallback));

  // Never equal to the standard resources, in either direction.
  for (std::pmr::memory_resource* standard :
       {std::pmr::new_delete_resource(), std::pmr::null_memory_resource()}) {
    EXPECT_FALSE(thp.is_equal(*standard));
    EXPECT_FALSE(hugetlb.is_equal(*standard));
    EXPECT_FALSE(collapse.is_equal(*standard));
    EXPECT_FALSE(standard->is_equal(thp));
    EXPECT_FALSE(standard->is_equal(*pmr::huge_page_resource()));
  }
}

TEST(PmrResources, EqualResourcesFreeEachOthersBlocks) {
  pmr::thp_memory_resource local;
  const std::size_t live_before = live_mappings();
  void* const p = pmr::thp_resource()->allocate(8 * mib, 64);
  EXPECT_EQ(live_mappings(), live_before + 1);
  local.deallocate(p, 8 * mib, 64);
  EXPECT_EQ(live_mappings(), live_before);

  // And the STL allocator with the same strategy.
  thp_allocator<unsigned char> stl;
  unsigned char* const q = stl.allocate(8 * mib);
  pmr::thp_resource()->deallocate(q, 8 * mib, alignof(unsigned char));
  EXPECT_EQ(live_mappings(), live_before);
}

// ---- configured instances ----------------------------------------------------------------------

TEST(PmrConfigured, OptionsMakeADifferentResource) {
  allocation_options big_threshold;
  big_threshold.small_threshold = 4 * mib;
  allocation_options prefault;
  prefault.prefault = true;
  const pmr::thp_memory_resource a(big_threshold);
  const pmr::thp_memory_resource b(big_threshold);
  const pmr::thp_memory_resource c(prefault);
  EXPECT_TRUE(a.is_equal(b)) << "same options: same strategy";
  EXPECT_FALSE(a.is_equal(*pmr::thp_resource())) << "the threshold decides what deallocate does";
  EXPECT_FALSE(a.is_equal(c));
  EXPECT_FALSE(c.is_equal(*pmr::thp_resource()));
  EXPECT_EQ(a.get_strategy().options(), big_threshold);
  EXPECT_EQ(a.get_strategy().threshold(), 4 * mib);
  EXPECT_TRUE(c.get_strategy().options().prefault);
}

TEST(PmrConfigured, SmallThresholdDecidesWhatIsMapped) {
  allocation_options options;
  options.small_threshold = 4 * mib;
  pmr::thp_memory_resource raised(options);
  const statistics before = stats();
  void* const below = raised.allocate(3 * mib, 16);
  EXPECT_EQ(stats().live_mappings, before.live_mappings) << "3 MiB is under a 4 MiB threshold";
  void* const at = raised.allocate(4 * mib, 16);
  EXPECT_EQ(stats().live_mappings, before.live_mappings + 1);
  EXPECT_EQ(stats().requested_thp - before.requested_thp, 4 * mib);
  raised.deallocate(at, 4 * mib, 16);
  raised.deallocate(below, 3 * mib, 16);

  options.small_threshold = 64 * kib;
  pmr::thp_memory_resource lowered(options);
  void* const small = lowered.allocate(64 * kib, 16);
  EXPECT_EQ(stats().live_mappings, before.live_mappings + 1) << "64 KiB is mapped";
  EXPECT_EQ(stats().requested_thp - before.requested_thp, huge_2m_bytes)
      << "rounded to a huge page";
  EXPECT_TRUE(is_aligned(small, huge_2m_bytes));
  lowered.deallocate(small, 64 * kib, 16);
  EXPECT_EQ(stats().live_mappings, before.live_mappings);
  EXPECT_EQ(stats().requested_thp, before.requested_thp);
}

TEST(PmrConfigured, PrefaultMakesBlocksResidentBeforeTouch) {
  constexpr std::size_t bytes = 8 * mib;
  allocation_options options;
  options.small_threshold = 4 * mib;
  options.prefault = true;
  pmr::thp_memory_resource prefaulted(options);
  const statistics before = stats();
  void* const p = prefaulted.allocate(bytes, 64);
  const backing_report r = backing_of(p, bytes);
  EXPECT_EQ(r.not_resident, 0u) << r.note;
  EXPECT_EQ(r.resident_bytes(), bytes);
  EXPECT_EQ(stats().prefaulted_bytes - before.prefaulted_bytes, bytes);
  prefaulted.deallocate(p, bytes, 64);

  // The same request without the option leaves the block untouched.
  void* const q = pmr::thp_resource()->allocate(bytes, 64);
  const backing_report untouched = backing_of(q, bytes);
  EXPECT_EQ(untouched.not_resident, bytes) << untouched.note;
  EXPECT_EQ(stats().prefaulted_bytes - before.prefaulted_bytes, bytes);
  pmr::thp_resource()->deallocate(q, bytes, 64);
}

TEST(PmrConfigured, HugePageResourceWithOptions) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 4);
  allocation_options options;
  options.prefault = true;
  pmr::huge_page_memory_resource resource(page_size::huge_2m, strict, options);
  EXPECT_FALSE(resource.is_equal(*pmr::huge_page_resource()));
  void* const p = resource.allocate(4 * mib, 64);
  const backing_report r = backing_of(p, 4 * mib);
  EXPECT_EQ(r.hugetlb_2m, 4 * mib) << "pre-faulted pool pages; " << r.note;
  resource.deallocate(p, 4 * mib, 64);
}

TEST(PmrConfigured, ThpHonoursAlignmentAboveTheHugePageSize) {
  // The THP path maps at max(alignment, huge page): an 8 MiB alignment is honoured.
  for (std::pmr::memory_resource* r : {pmr::thp_resource(), pmr::collapse_resource()}) {
    const std::size_t live_before = live_mappings();
    void* const p = r->allocate(4 * mib, 8 * mib);
    EXPECT_TRUE(is_aligned(p, 8 * mib));
    static_cast<unsigned char*>(p)[4 * mib - 1] = 1;
    r->deallocate(p, 4 * mib, 8 * mib);
    EXPECT_EQ(live_mappings(), live_before);
  }
}

}  // namespace
}  // namespace hugepage
