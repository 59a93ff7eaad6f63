// hugepage/pmr.hpp - std::pmr::memory_resource counterparts of the allocators.
//
//   std::pmr::vector<double> v(hugepage::pmr::thp_resource());
//   hugepage::pmr::huge_page_memory_resource fares(hugepage::page_size::huge_1g,
//                                                  hugepage::fallback);
//
// Same strategies as the STL allocators (strategy.hpp), not a second implementation. Two resources
// compare equal when their strategies are equal: either can free what the other allocated.
#pragma once

#include <memory_resource>

#include "hugepage/detail/immortal.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage::pmr {

/// A memory_resource that allocates through a strategy. Thread-safe.
class strategy_resource : public std::pmr::memory_resource {
 public:
  explicit constexpr strategy_resource(hugepage::strategy s) noexcept : strategy_(s) {}
  const hugepage::strategy& get_strategy() const noexcept { return strategy_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return strategy_.allocate(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    strategy_.deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    const auto* that = dynamic_cast<const strategy_resource*>(&other);
    return that != nullptr && that->strategy_ == strategy_;
  }

  hugepage::strategy strategy_;
};

/// THP on request, configured.
class thp_memory_resource : public strategy_resource {
 public:
  explicit constexpr thp_memory_resource(allocation_options options = {}) noexcept
      : strategy_resource(hugepage::strategy::thp(options)) {}
};

/// The hugetlb pool of `size`, configured.
class huge_page_memory_resource : public strategy_resource {
 public:
  explicit constexpr huge_page_memory_resource(page_size size = page_size::huge_2m,
                                               pool_policy policy = pool_policy::strict,
                                               allocation_options options = {}) noexcept
      : strategy_resource(hugepage::strategy::hugetlb(size, policy, options)) {}
};

/// THP collapsed at allocation, configured.
class collapse_memory_resource : public strategy_resource {
 public:
  explicit constexpr collapse_memory_resource(allocation_options options = {}) noexcept
      : strategy_resource(hugepage::strategy::collapse(options)) {}
};

/// The process-wide THP resource (default options). Thread-safe.
inline std::pmr::memory_resource* thp_resource() noexcept {
  static hugepage::detail::immortal<thp_memory_resource> instance;
  return instance.get();
}

namespace detail {
template <page_size Size, pool_policy Policy>
std::pmr::memory_resource* huge_page_resource_of() noexcept {
  static hugepage::detail::immortal<huge_page_memory_resource> instance(Size, Policy);
  return instance.get();
}
}  // namespace detail

/// The process-wide hugetlb resource of `size` and `policy` (default options). Thread-safe.
inline std::pmr::memory_resource* huge_page_resource(
    page_size size = page_size::huge_2m, pool_policy policy = pool_policy::strict) noexcept {
  if (size == page_size::huge_1g) {
    return policy == pool_policy::strict
               ? detail::huge_page_resource_of<page_size::huge_1g, pool_policy::strict>()
               : detail::huge_page_resource_of<page_size::huge_1g, pool_policy::fallback>();
  }
  return policy == pool_policy::strict
             ? detail::huge_page_resource_of<page_size::huge_2m, pool_policy::strict>()
             : detail::huge_page_resource_of<page_size::huge_2m, pool_policy::fallback>();
}

/// The process-wide collapse resource (default options). Thread-safe.
inline std::pmr::memory_resource* collapse_resource() noexcept {
  static hugepage::detail::immortal<collapse_memory_resource> instance;
  return instance.get();
}

}  // namespace hugepage::pmr
