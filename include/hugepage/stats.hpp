// hugepage/stats.hpp - process-wide counters of what the library mapped.
//
// Updated with relaxed atomics, once per mapping and once per unmapping: requests served by the
// standard allocator (below the small-request threshold) are not counted, so the small-object hot
// path stays free of shared cache lines. A snapshot is consistent per field, not across fields.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hugepage {

/// What backs a mapping the library made, as far as the kernel told us at map time. Whether THP
/// advice was honoured page by page is backing_of()'s job.
enum class backing : unsigned char {
  hugetlb_2m,  ///< hugetlb pool, 2 MiB pages: guaranteed
  hugetlb_1g,  ///< hugetlb pool, 1 GiB pages: guaranteed
  thp,         ///< THP-advised anonymous memory (collapsed, when MADV_COLLAPSE succeeded)
  base,        ///< plain anonymous memory: the THP advice was refused
};

/// A snapshot of the library's counters. "Bytes" are mapped lengths (rounded to the page size).
/// A block of a 1 GiB strategy can sit on two page sizes (strategy::layout): each part counts
/// under what obtained it, and the whole length under requested_hugetlb_1g.
struct statistics {
  // Bytes currently mapped, by what the caller asked for.
  std::size_t requested_thp = 0;       ///< thp_allocator / thp_resource
  std::size_t requested_collapse = 0;  ///< collapse_allocator / collapse_resource
  std::size_t requested_hugetlb_2m = 0;
  std::size_t requested_hugetlb_1g = 0;
  // Bytes currently mapped, by what was obtained.
  std::size_t obtained_hugetlb_2m = 0;
  std::size_t obtained_hugetlb_1g = 0;
  std::size_t obtained_thp = 0;
  std::size_t obtained_base = 0;
  std::size_t live_mappings = 0;  ///< mappings currently held
  // Events since start.
  /// hugetlb requests served (in part) from THP: fallback policy, or a 1 GiB strategy's 2 MiB
  /// cascade (strategy.hpp) where the 2 MiB pool is short. Fallbacks count only blocks that
  /// allocate() returned.
  std::uint64_t fallbacks_to_thp = 0;
  /// hugetlb requests served (in part) from base pages: the pool short and THP refused, or the
  /// effective THP mode never (read_thp_mode()). A THP request that lands on base pages is no
  /// fallback: it shows in obtained_base.
  std::uint64_t fallbacks_to_base = 0;
  /// Whole 1 GiB pages of a 1 GiB fallback request served from the 2 MiB pool instead.
  std::uint64_t fallbacks_to_hugetlb_2m = 0;
  std::uint64_t collapse_attempts = 0;  ///< MADV_COLLAPSE calls made
  /// ... that failed (any errno), and collapse_allocator allocations that could not try because
  /// THP is disabled for the process (PR_SET_THP_DISABLE: no call is made, one failure each).
  std::uint64_t collapse_failures = 0;
  /// The last MADV_COLLAPSE failed with EINVAL (calls are suspended for a minute, then retried),
  /// or the last collapse_allocator allocation found THP disabled for the process.
  bool collapse_unsupported = false;
  std::uint64_t prefaulted_bytes = 0;  ///< bytes populated at allocation (pre-fault policy)
  /// Blocks placed `preferred` on a node (numa_placement) that got pages of another node, seen
  /// where the pages are faulted in by allocate(): hugetlb, collapse and pre-faulted blocks; and
  /// every block whose preferred node is outside this process's cpuset (Mems_allowed), which
  /// first touch places instead.
  std::uint64_t fallbacks_to_other_node = 0;

  /// Bytes currently mapped, over all backings.
  std::size_t mapped_bytes() const noexcept {
    return obtained_hugetlb_2m + obtained_hugetlb_1g + obtained_thp + obtained_base;
  }
};

namespace detail {

struct counters {
  std::atomic<std::size_t> requested_thp{0}, requested_collapse{0}, requested_hugetlb_2m{0},
      requested_hugetlb_1g{0};
  std::atomic<std::size_t> obtained[4] = {};  // indexed by backing
  std::atomic<std::size_t> live_mappings{0};
  std::atomic<std::uint64_t> fallbacks_to_thp{0}, fallbacks_to_base{0}, fallbacks_to_hugetlb_2m{0};
  std::atomic<std::uint64_t> collapse_attempts{0}, collapse_failures{0};
  std::atomic<bool> collapse_unsupported{false};
  std::atomic<std::int64_t> collapse_retry_at{0};  // monotonic seconds
  std::atomic<std::uint64_t> prefaulted_bytes{0};
  std::atomic<std::uint64_t> fallbacks_to_other_node{0};
};

inline counters& global_counters() noexcept {
  static counters instance;  // trivially destructible atomics: safe to use during exit
  return instance;
}

}  // namespace detail

/// Returns a snapshot of the process-wide counters. Thread-safe.
inline statistics stats() noexcept {
  const detail::counters& c = detail::global_counters();
  constexpr auto relaxed = std::memory_order_relaxed;
  statistics s;
  s.requested_thp = c.requested_thp.load(relaxed);
  s.requested_collapse = c.requested_collapse.load(relaxed);
  s.requested_hugetlb_2m = c.requested_hugetlb_2m.load(relaxed);
  s.requested_hugetlb_1g = c.requested_hugetlb_1g.load(relaxed);
  s.obtained_hugetlb_2m = c.obtained[static_cast<int>(backing::hugetlb_2m)].load(relaxed);
  s.obtained_hugetlb_1g = c.obtained[static_cast<int>(backing::hugetlb_1g)].load(relaxed);
  s.obtained_thp = c.obtained[static_cast<int>(backing::thp)].load(relaxed);
  s.obtained_base = c.obtained[static_cast<int>(backing::base)].load(relaxed);
  s.live_mappings = c.live_mappings.load(relaxed);
  s.fallbacks_to_thp = c.fallbacks_to_thp.load(relaxed);
  s.fallbacks_to_base = c.fallbacks_to_base.load(relaxed);
  s.fallbacks_to_hugetlb_2m = c.fallbacks_to_hugetlb_2m.load(relaxed);
  s.collapse_attempts = c.collapse_attempts.load(relaxed);
  s.collapse_failures = c.collapse_failures.load(relaxed);
  s.collapse_unsupported = c.collapse_unsupported.load(relaxed);
  s.prefaulted_bytes = c.prefaulted_bytes.load(relaxed);
  s.fallbacks_to_other_node = c.fallbacks_to_other_node.load(relaxed);
  return s;
}

}  // namespace hugepage
