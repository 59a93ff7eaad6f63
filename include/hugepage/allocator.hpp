// hugepage/allocator.hpp - STL allocators that put a container's storage on huge pages.
//
//   std::vector<Order, hugepage::thp_allocator<Order>> book;                 // THP on request
//   std::vector<Fare, hugepage::huge_page_allocator<Fare>> fares;            // hugetlb, 2 MiB
//   absl::flat_hash_map<K, V, H, E, hugepage::collapse_allocator<std::pair<const K, V>>> m;
//
// The allocators are stateless (`is_always_equal`): every instance of one type can free what
// another allocated, containers pay no space for them, and move assignment and swap are O(1).
// Everything they decide is decided by a `strategy` (strategy.hpp), shared with the pmr resources.
#pragma once

#include <cstddef>
#include <limits>
#include <type_traits>

#include "hugepage/detail/allocator_members.hpp"
#include "hugepage/detail/label_hooks.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage {

namespace detail {

template <class Options>
constexpr allocation_options options_of() noexcept {
  allocation_options o;
  o.small_threshold = Options::small_threshold;
  o.prefault = Options::prefault;
  o.dont_fork = Options::dont_fork;
  o.numa = Options::numa;
  return o;
}

template <class Options>
struct thp_config {
  static constexpr strategy value = strategy::thp(options_of<Options>());
  static constexpr const char* label = label_of<Options>;  // label.hpp; nullptr: none
};

template <page_size Size, pool_policy Policy, class Options>
struct hugetlb_config {
  static constexpr strategy value = strategy::hugetlb(Size, Policy, options_of<Options>());
  static constexpr const char* label = label_of<Options>;  // label.hpp; nullptr: none
};

template <class Options>
struct collapse_config {
  static constexpr strategy value = strategy::collapse(options_of<Options>());
  static constexpr const char* label = label_of<Options>;  // label.hpp; nullptr: none
};

}  // namespace detail

/// A stateless allocator whose every decision comes from `Config::value`, a `static constexpr
/// strategy`. Use the aliases below; write a Config of your own only for a strategy they lack.
///
/// allocate(n): throws std::bad_array_new_length when n * sizeof(T) overflows, pool_exhausted
/// (strict hugetlb) when the pool is short, allocation_error / std::bad_alloc otherwise.
/// deallocate(p, n): noexcept; n must be the n given to allocate. Thread-safe.
template <class T, class Config>
class basic_allocator : public detail::allocator_members<basic_allocator, T, Config,
                                                         detail::allocator_state::stateless> {
 public:
  constexpr basic_allocator() noexcept = default;
  template <class U>
  constexpr basic_allocator(const basic_allocator<U, Config>& /*other*/) noexcept {}  // NOLINT

  [[nodiscard]] T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      detail::throw_bad_array_new_length();
    }
    void* p = Config::value.allocate(n * sizeof(T), alignof(T));
    // ---- labelled containers (label.hpp): the mapped block enters its label's list ----
    if constexpr (detail::label_of<Config> != nullptr) {
      detail::record_labelled(Config::value, detail::label_of<Config>, p, n * sizeof(T),
                              alignof(T));
    }
    return static_cast<T*>(p);
  }

  void deallocate(T* p, std::size_t n) noexcept {
    // ---- labelled containers (label.hpp): leaves the list before it is unmapped ----
    if constexpr (detail::label_of<Config> != nullptr) {
      detail::unrecord_labelled(Config::value, p, n * sizeof(T));
    }
    Config::value.deallocate(p, n * sizeof(T), alignof(T));
  }

  /// The strategy behind this allocator.
  static constexpr const strategy& get_strategy() noexcept { return Config::value; }

  template <class U>
  friend constexpr bool operator==(const basic_allocator& /*a*/,
                                   const basic_allocator<U, Config>& /*b*/) noexcept {
    return true;
  }
  template <class U>
  friend constexpr bool operator!=(const basic_allocator& /*a*/,
                                   const basic_allocator<U, Config>& /*b*/) noexcept {
    return false;
  }
};

/// Options may name a container (label.hpp): its blocks are then listed under that label, for
/// coverage_of(), upkeep() and write_metrics():
///   struct fares_opts : hugepage::default_options { static constexpr const char* label = "fares";
///   }; std::vector<Fare, hugepage::thp_allocator<Fare, fares_opts>> fares;

/// THP on request: blocks of at least 2 MiB on 2 MiB-aligned anonymous memory advised with
/// MADV_HUGEPAGE. Huge when the kernel can find free 2 MiB blocks at first touch (THP `enabled` at
/// madvise or always); base pages otherwise, silently - check with backing_of().
template <class T, class Options = default_options>
using thp_allocator = basic_allocator<T, detail::thp_config<Options>>;

/// hugetlb pool pages of `Size`. Guaranteed huge once allocate() returns. `Policy` strict: a
/// short pool throws pool_exhausted; fallback: the request is served from THP and counted.
/// `Size` 1 GiB cascades (strategy.hpp): whole GiBs on 1 GiB pages under `Policy`; blocks of
/// 2 MiB to 1 GiB, and a block's tail past its whole GiBs, on 2 MiB pages from the pool where it
/// has room, else THP, counted, under either policy.
template <class T, page_size Size = page_size::huge_2m, pool_policy Policy = pool_policy::strict,
          class Options = default_options>
using huge_page_allocator = basic_allocator<T, detail::hugetlb_config<Size, Policy, Options>>;

/// THP that is huge when allocate() returns: map aligned, populate, MADV_COLLAPSE (Linux 6.1).
/// Costs the page faults and the collapse up front; where collapse is unavailable the memory
/// stays THP-advised and the failure is counted (stats().collapse_failures), also where THP is
/// disabled for the process (PR_SET_THP_DISABLE), which makes no MADV_COLLAPSE call.
template <class T, class Options = default_options>
using collapse_allocator = basic_allocator<T, detail::collapse_config<Options>>;

}  // namespace hugepage
