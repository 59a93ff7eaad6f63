// hugepage/strategy.hpp - the one place where hugepage policy lives.
//
// A `strategy` says how to get memory for one request: from transparent huge pages (THP), from a
// hugetlb pool, or from THP collapsed on the spot (MADV_COLLAPSE). The STL allocators
// (allocator.hpp) and the std::pmr resources (pmr.hpp) are thin adapters over it.
//
// Data flow of allocate(bytes, alignment):
//   bytes < small-request threshold  -> ::operator new (honours over-alignment); RSS stays small
//   else mapped length = bytes rounded up to the huge page size (1 GiB pages: see "cascade")
//        thp:      2 MiB-aligned anonymous mapping + MADV_HUGEPAGE (first touch faults huge pages)
//        collapse: the same, populated at once, then MADV_COLLAPSE
//        hugetlb:  MAP_HUGETLB from the pool, faulted in at once (a refused first touch would be
//                  SIGBUS), at any alignment (mapped into a free range so aligned); on shortage
//                  throw pool_exhausted (strict; refusal.hpp says why) or map THP instead
//                  (fallback), counted
//        optional: pre-fault (MADV_POPULATE_WRITE), MADV_DONTFORK
// deallocate(p, bytes, alignment) recomputes the same decision from `bytes` - no header in front
// of the block, no lookup on the common path - and unmaps exactly the length that was mapped.
//
// The calls, in the order this file defines them (NUMA placement's checks come last):
//   allocate -> detail::allocate_small                        below threshold()
//            -> allocate_mapped -> layout_of                  the length, head and tail
//                               -> map_thp -> os::map_aligned, detail::advise_thp
//                               -> map_hugetlb_block -> pool_pages -> os::map_hugetlb
//                                    refused: read_hugetlb_refusal, cause_of, then retry or
//                                    detail::throw_refusal (refusal.hpp: facts, cause, words)
//                               -> finish: pre-fault, MADV_DONTFORK, collapse_now
//   deallocate -> layout_of (or the registry's record) -> os::unmap
//
// The cascade of a 1 GiB hugetlb strategy (layout_of(), the one place that decides it):
//   bytes < 2 MiB                 -> ::operator new (unless small_threshold says otherwise)
//   2 MiB <= bytes < 1 GiB        -> 2 MiB pages: the 2 MiB pool where it has room, else THP,
//                                    else base pages; never pool_exhausted, whatever the policy
//   bytes >= 1 GiB                -> whole 1 GiB pages for the whole GiBs ("head"); the rest
//                                    ("tail") rounds up to one more 1 GiB page when that wastes at
//                                    most 1/whole_page_waste_divisor of `bytes`, and is otherwise
//                                    mapped on 2 MiB pages like a block below 1 GiB
// A block with a 2 MiB tail is one address range, 1 GiB-aligned: a reservation without memory
// (PROT_NONE, MAP_NORESERVE: no commit charge) with the 1 GiB pages mapped over its head and the
// 2 MiB pages over its tail (MAP_FIXED); one munmap of the whole length releases both. The strict
// policy is strict for the 1 GiB pages only: every head is on 1 GiB pages or allocate() throws
// pool_exhausted, as before; blocks below 1 GiB and tails were never promised 1 GiB pages (they
// went to ::operator new before the cascade), so they take 2 MiB pages where the pool has them and
// THP otherwise, counted in fallbacks_to_thp. Under the fallback policy a head the 1 GiB pool
// cannot serve goes to the 2 MiB pool (fallbacks_to_hugetlb_2m), else THP. Each part is counted
// under what it obtained (stats.hpp).
//
// Why a threshold: a huge page is also the unit of reclaim. Rounding a 100 KiB vector up to 2 MiB
// pins 20 times its size, and a heap of such vectors would multiply RSS. Only requests of at least
// one huge page are mapped; below it the standard allocator serves them.
//
// Kernel: THP needs CONFIG_TRANSPARENT_HUGEPAGE with the effective PMD-size mode at madvise or
// always (read_thp_mode(), thp_mode.hpp: since Linux 6.8 hugepages-2048kB/enabled overrides
// `enabled` unless it says inherit); memory mapped where it is never counts as base. Hugetlb needs
// a reserved pool (vm.nr_hugepages); MADV_COLLAPSE needs Linux 6.1 (older kernels: the memory
// stays THP-advised, the failure is counted once and the call is not made again).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "hugepage/cgroup.hpp"
#include "hugepage/detail/mapping_registry.hpp"
#include "hugepage/detail/mapping_steps.hpp"
#include "hugepage/detail/monotonic_clock.hpp"
#include "hugepage/detail/small_blocks.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/format_bytes.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/refusal.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/thp_mode.hpp"

namespace hugepage {

/// Where a strategy gets huge pages from.
enum class method : unsigned char {
  thp,       ///< THP on request: aligned anonymous memory advised with MADV_HUGEPAGE
  hugetlb,   ///< the hugetlb pool (MAP_HUGETLB): guaranteed huge once mapped
  collapse,  ///< THP populated and collapsed at allocation (MADV_COLLAPSE)
};

/// What a hugetlb strategy does when the pool cannot cover a request.
enum class pool_policy : unsigned char {
  strict,    ///< throw pool_exhausted
  fallback,  ///< serve from THP (or base pages when THP advice is refused) and count it
};
inline constexpr pool_policy strict = pool_policy::strict;
inline constexpr pool_policy fallback = pool_policy::fallback;

/// Run-time options of a strategy.
struct allocation_options {
  /// Requests of fewer bytes go to ::operator new. 0 means one huge page of the strategy's size.
  std::size_t small_threshold = 0;
  /// Populate mapped memory at allocation, so first accesses take no page fault (like the JVM's
  /// AlwaysPreTouch): a service pays the faults at start-up, and a shortage surfaces as
  /// std::bad_alloc from allocate() instead of later. collapse strategies always populate.
  bool prefault = false;
  /// MADV_DONTFORK on mapped memory: a child of fork() does not inherit it, so a private hugetlb
  /// mapping cannot SIGBUS the parent or child on copy-on-write when the pool is empty.
  /// The child inherits the containers but not this memory: an inaccessible placeholder holds each
  /// such range in the child (nothing it maps lands there; an access raises SIGSEGV). A child must
  /// not read, clear or destroy such a container, nor allocate from an arena over such memory, nor
  /// let exit() or a return from main destroy static ones: it leaves with _exit() or exec. It may
  /// use containers of its own meanwhile. Blocks below the threshold go to ::operator new, which
  /// the child inherits as usual.
  bool dont_fork = false;
  /// The NUMA nodes of the mapped blocks (numa.hpp), applied before their first touch: local
  /// (first touch, the default), bind, preferred or interleave. Bound hugetlb blocks come from
  /// the bound nodes' pools only: a short one throws node_pool_exhausted. Blocks below the
  /// threshold come from ::operator new and are not placed: their pages hold the heap's other
  /// objects, which a policy would move with them. An invalid node set is an error at any size.
  numa_placement numa = numa_placement::local();

  friend constexpr bool operator==(const allocation_options& a,
                                   const allocation_options& b) noexcept {
    return a.small_threshold == b.small_threshold && a.prefault == b.prefault &&
           a.dont_fork == b.dont_fork && a.numa == b.numa;
  }
  friend constexpr bool operator!=(const allocation_options& a,
                                   const allocation_options& b) noexcept {
    return !(a == b);
  }
};

/// Compile-time options for the STL allocators. Derive and override a member:
///   struct prefaulted : hugepage::default_options { static constexpr bool prefault = true; };
struct default_options {
  static constexpr std::size_t small_threshold = 0;
  static constexpr bool prefault = false;
  /// What a child of fork() may then do: see allocation_options::dont_fork.
  static constexpr bool dont_fork = false;
  /// NUMA placement (numa.hpp), e.g. `hugepage::numa_placement::bind({1})`.
  static constexpr numa_placement numa = numa_placement::local();
};

/// Options that pre-fault every mapped block at allocation.
struct prefault_options : default_options {
  static constexpr bool prefault = true;
};

/// How to obtain memory for a request. A small literal type: allocators hold one as a
/// `static constexpr` member, pmr resources hold one by value. Thread-safe: all state it touches is
/// the process-wide statistics.
class strategy {
 public:
  /// THP on request.
  static constexpr strategy thp(allocation_options options = {}) noexcept {
    return strategy(method::thp, page_size::huge_2m, pool_policy::strict, options);
  }
  /// The hugetlb pool of `size`.
  static constexpr strategy hugetlb(page_size size = page_size::huge_2m,
                                    pool_policy policy = pool_policy::strict,
                                    allocation_options options = {}) noexcept {
    return strategy(method::hugetlb, size, policy, options);
  }
  /// THP populated and collapsed at allocation.
  static constexpr strategy collapse(allocation_options options = {}) noexcept {
    return strategy(method::collapse, page_size::huge_2m, pool_policy::strict, options);
  }

  constexpr method how() const noexcept { return method_; }
  constexpr page_size size() const noexcept { return size_; }
  constexpr pool_policy policy() const noexcept { return policy_; }
  constexpr const allocation_options& options() const noexcept { return options_; }

  /// This strategy with its blocks placed by `numa` (numa.hpp):
  ///   hugepage::strategy::thp().placed(hugepage::numa_placement::bind({1}))
  constexpr strategy placed(numa_placement numa) const noexcept {
    allocation_options o = options_;
    o.numa = numa;
    return strategy(method_, size_, policy_, o);
  }

  /// The huge page size this strategy maps in (the THP PMD size for thp and collapse).
  std::size_t page_bytes() const noexcept {
    return method_ == method::hugetlb ? bytes_of(size_) : thp_page_bytes();
  }

  /// Whether blocks below one page cascade to 2 MiB pages (a 1 GiB hugetlb strategy).
  constexpr bool cascades() const noexcept {
    return method_ == method::hugetlb && size_ == page_size::huge_1g;
  }

  /// Requests of at least this many bytes are mapped; smaller ones go to ::operator new. By
  /// default one huge page, and 2 MiB for a 1 GiB strategy (see the cascade above).
  std::size_t threshold() const noexcept {
    if (options_.small_threshold != 0) return options_.small_threshold;
    return cascades() ? bytes_of(page_size::huge_2m) : page_bytes();
  }

  /// Whether a request of `bytes` is mapped (true) or served by ::operator new (false).
  bool is_mapped(std::size_t bytes) const noexcept { return bytes >= threshold(); }

  /// A 1 GiB strategy rounds a block's last partial GiB up to a whole 1 GiB page when that adds at
  /// most 1/whole_page_waste_divisor of the block (a 1.95 GiB block takes two pages; a 1.5 GiB
  /// block takes one page and 256 pages of 2 MiB). Measured in the README ("1 GiB pages").
  static constexpr std::size_t whole_page_waste_divisor = 16;

  /// How a mapped request is laid out: `length` bytes mapped, of which the first `head` are on
  /// pages of size() and the rest (the tail) on 2 MiB pages. Only a 1 GiB strategy has a tail.
  struct layout {
    std::size_t length = 0;  ///< 0 when rounding up to page_bytes() overflows
    std::size_t head = 0;    ///< a multiple of page_bytes()
    constexpr std::size_t tail() const noexcept { return length - head; }
  };

  /// The layout of a mapped request of `bytes`: a pure function of `bytes`, so deallocate()
  /// recomputes it. The cascade of 1 GiB strategies is decided here and nowhere else.
  layout layout_of(std::size_t bytes) const noexcept {
    layout l;
    std::size_t whole_pages = 0;
    if (!os::round_up(bytes, page_bytes(), whole_pages)) return l;
    if (!cascades()) return {whole_pages, whole_pages};
    const std::size_t gib = bytes_of(page_size::huge_1g);
    const std::size_t head = bytes & ~(gib - 1);
    if (head != 0 && (whole_pages - bytes <= bytes / whole_page_waste_divisor ||
                      !fixed_mapping_keeps_range_on_failure())) {
      return {whole_pages, whole_pages};
    }
    std::size_t tail = 0;
    os::round_up(bytes - head, bytes_of(page_size::huge_2m), tail);  // no overflow: < 1 GiB
    return {head + tail, head};
  }

  /// A block with a tail maps its parts over a reservation with MAP_FIXED. Before Linux 6.12 a
  /// MAP_FIXED mmap that fails (a short pool) has already unmapped the range, and another thread's
  /// mmap could land in the hole; there, such blocks take whole 1 GiB pages instead. Read once.
  static bool fixed_mapping_keeps_range_on_failure() noexcept {
    static const bool keeps = [] {
      const std::optional<kernel_version> version = parse_kernel_version(kernel_release());
      return version && version->at_least(6, 12);
    }();
    return keeps;
  }

  /// The length a mapped request of `bytes` occupies (layout_of(bytes).length): `bytes` rounded
  /// up to the page size, or for a 1 GiB strategy as the cascade says; 0 when that overflows.
  std::size_t mapped_length(std::size_t bytes) const noexcept { return layout_of(bytes).length; }

  /// Returns memory for `bytes` aligned to `alignment` (a power of two).
  /// Throws pool_exhausted (strict hugetlb, pool short), allocation_error (the kernel refused a
  /// mapping or a pre-fault), std::bad_alloc (::operator new failed).
  void* allocate(std::size_t bytes, std::size_t alignment) const {
    // An invalid node set is the same error at any size, before anything is allocated. A valid
    // one places mapped blocks only: a smaller block shares its pages with the heap's other
    // objects, which a policy on it would move with it (allocation_options::numa).
    if (!options_.numa.is_local()) check_placement();
    if (!is_mapped(bytes)) return detail::allocate_small(bytes, alignment);
    return allocate_mapped(bytes, alignment);
  }

  /// Releases memory from allocate() with the same `bytes` and `alignment`. Never throws.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) const noexcept {
    if (p == nullptr) return;
    if (!is_mapped(bytes)) return detail::deallocate_small(p, bytes, alignment);
    const layout l = layout_of(bytes);
    placement got = planned();
    detail::mapping_registry::entry record{};
    if (detail::registry().take(p, record)) got = {record.obtained, record.tail};
    os::unmap(p, l.length);  // head and tail alike
    account(got, l, /*add=*/false);
  }

  friend constexpr bool operator==(const strategy& a, const strategy& b) noexcept {
    return a.method_ == b.method_ && a.size_ == b.size_ && a.policy_ == b.policy_ &&
           a.options_ == b.options_;
  }
  friend constexpr bool operator!=(const strategy& a, const strategy& b) noexcept {
    return !(a == b);
  }

 private:
  constexpr strategy(method how, page_size size, pool_policy policy,
                     allocation_options options) noexcept
      : method_(how), size_(size), policy_(policy), options_(options) {}

  // ---- mapped requests --------------------------------------------------------------------------

  backing requested_backing() const noexcept {
    if (method_ != method::hugetlb) return backing::thp;
    return size_ == page_size::huge_1g ? backing::hugetlb_1g : backing::hugetlb_2m;
  }

  // What backs the head and the tail of a block (layout).
  struct placement {
    backing head;
    backing tail;
  };
  placement planned() const noexcept { return {requested_backing(), backing::hugetlb_2m}; }

  static bool anonymous(backing b) noexcept { return b == backing::thp || b == backing::base; }

  std::atomic<std::size_t>& requested_counter() const noexcept {
    detail::counters& c = detail::global_counters();
    switch (method_) {
      case method::thp: return c.requested_thp;
      case method::collapse: return c.requested_collapse;
      case method::hugetlb: break;
    }
    return size_ == page_size::huge_1g ? c.requested_hugetlb_1g : c.requested_hugetlb_2m;
  }

  void account(placement got, const layout& l, bool add) const noexcept {
    detail::counters& c = detail::global_counters();
    constexpr auto relaxed = std::memory_order_relaxed;
    auto& head = c.obtained[static_cast<int>(got.head)];
    auto& tail = c.obtained[static_cast<int>(got.tail)];
    if (add) {
      requested_counter().fetch_add(l.length, relaxed);
      head.fetch_add(l.head, relaxed);
      tail.fetch_add(l.tail(), relaxed);
      c.live_mappings.fetch_add(1, relaxed);
    } else {
      requested_counter().fetch_sub(l.length, relaxed);
      head.fetch_sub(l.head, relaxed);
      tail.fetch_sub(l.tail(), relaxed);
      c.live_mappings.fetch_sub(1, relaxed);
    }
  }

  void* allocate_mapped(std::size_t bytes, std::size_t alignment) const {
    const layout l = layout_of(bytes);
    if (l.length == 0) {
      detail::throw_allocation_error(
          "hugepage: request of " + std::to_string(bytes) + " bytes is too large to map",
          std::make_error_code(std::errc::not_enough_memory));
    }
    // A preferred node outside this process's cpuset cannot serve: first touch places the block
    // instead (numa::within), counted as a fallback to another node once the block is returned.
    numa_placement numa = options_.numa;
    if (numa.mode == numa_mode::preferred) {
      if (const std::optional<node_set> allowed = numa::allowed_nodes()) {
        numa = numa::within(numa, *allowed);
      }
    }
    const placement plan = planned();
    placement got = plan;
    void* p = nullptr;
    if (method_ == method::hugetlb) {
      p = map_hugetlb_block(l, alignment, got, numa);
    } else {
      p = map_thp(l.length, std::max(alignment, page_bytes()), got.head, numa);
    }
    if (l.head == 0) got.head = plan.head;  // parts of no bytes compare equal to the plan
    if (l.tail() == 0) got.tail = plan.tail;
    // A record only where deallocate() cannot work it out: another backing, or MADV_DONTFORK.
    if (got.head != plan.head || got.tail != plan.tail || options_.dont_fork) {
      try {
        detail::registry().add(p, {got.head, l.length, options_.dont_fork, got.tail});
      } catch (...) {
        os::unmap(p, l.length);
        throw;
      }
    }
    account(got, l, /*add=*/true);
    // From here on the mapping is accounted for: failures release it through deallocate().
    finish(p, bytes, l, got, numa);
    // Counted only for a block that is returned: a failure above released it, and no request was
    // served.
    if (method_ == method::hugetlb) count_fallbacks(l, got);
    if (numa.mode != options_.numa.mode) {
      detail::global_counters().fallbacks_to_other_node.fetch_add(1, std::memory_order_relaxed);
    }
    return p;
  }

  // One count per block and kind of downgrade, whichever part it hit.
  void count_fallbacks(const layout& l, placement got) const noexcept {
    detail::counters& c = detail::global_counters();
    constexpr auto relaxed = std::memory_order_relaxed;
    const auto hit = [&](backing b) {
      return (l.head != 0 && got.head == b) || (l.tail() != 0 && got.tail == b);
    };
    if (hit(backing::thp)) c.fallbacks_to_thp.fetch_add(1, relaxed);
    if (hit(backing::base)) c.fallbacks_to_base.fetch_add(1, relaxed);
    if (l.head != 0 && got.head == backing::hugetlb_2m && size_ == page_size::huge_1g) {
      c.fallbacks_to_hugetlb_2m.fetch_add(1, relaxed);
    }
  }

  // The address space os::map_aligned asks the kernel for: the block and the room to align it.
  static std::uint64_t aligned_extent(std::size_t length, std::size_t alignment) noexcept {
    const std::size_t page = os::base_page_size();
    const std::size_t over = alignment > page ? alignment - page : 0;
    return length > SIZE_MAX - over ? UINT64_MAX : length + over;
  }

  // THP-advised anonymous memory placed by `numa`; `obtained` as detail::advise_thp says.
  static void* map_thp(std::size_t length, std::size_t alignment, backing& obtained,
                       const numa_placement& numa) {
    std::error_code ec;
    void* p = os::map_aligned(length, alignment, ec);
    if (p == nullptr) {
      detail::throw_refusal(read_mapping_refusal(
          "hugepage: mmap of " + format_bytes(length) + " for transparent huge pages failed", ec,
          aligned_extent(length, alignment)));
    }
    if (!numa.is_local()) {
      if (const std::error_code placed = numa::apply(p, length, numa)) {
        os::unmap(p, length);
        throw_placement_refused(numa, length, placed);
      }
    }
    obtained = detail::advise_thp(p, length);
    return p;
  }

  // The hugetlb blocks, cascade included (see the top of this file). Never returns memory whose
  // first touch can raise SIGBUS: pool pages are populated where a fault could be refused.
  // Every part is placed by `numa` before its first touch: pool pages where they are mapped,
  // THP-advised memory where a part falls back (release_part).
  void* map_hugetlb_block(const layout& l, std::size_t alignment, placement& got,
                          const numa_placement& numa) const {
    const bool must = policy_ == pool_policy::strict;
    if (l.head == 0) {  // below one 1 GiB page: 2 MiB pages, best effort under either policy
      if (void* p = pool_pages(nullptr, l.length, alignment, page_size::huge_2m, false, numa)) {
        return p;
      }
      return map_thp(l.length, std::max(alignment, thp_page_bytes()), got.tail, numa);
    }
    if (l.tail() == 0) {  // whole pages of size()
      if (void* p = pool_pages(nullptr, l.length, alignment, size_, must, numa)) return p;
      // Fallback policy: the 2 MiB pool for a 1 GiB request, else THP at the same length, so
      // that deallocate() unmaps what it would have unmapped for pool pages; pages past `bytes`
      // are never touched and cost no RSS.
      if (cascades()) {
        if (void* p = pool_pages(nullptr, l.length, alignment, page_size::huge_2m, false, numa)) {
          got.head = backing::hugetlb_2m;
          return p;
        }
      }
      return map_thp(l.length, std::max(alignment, thp_page_bytes()), got.head, numa);
    }
    // Head on 1 GiB pages, tail on 2 MiB pages: one reservation, 1 GiB-aligned, with the pool
    // pages mapped over it. The reservation holds no memory (PROT_NONE, MAP_NORESERVE), so it
    // counts against no commit limit (vm.overcommit_memory=2): only a part the pools cannot serve
    // becomes THP-advised anonymous memory (pool_pages leaves it so).
    std::error_code ec;
    char* const p =
        static_cast<char*>(os::reserve_aligned(l.length, std::max(alignment, bytes_of(size_)), ec));
    if (p == nullptr) {
      detail::throw_refusal(read_mapping_refusal(
          "hugepage: could not reserve " + format_bytes(l.length) + " of address space", ec,
          aligned_extent(l.length, std::max(alignment, bytes_of(size_)))));
    }
    try {
      if (pool_pages(p, l.head, alignment, size_, must, numa) == nullptr) {
        got.head = pool_pages(p, l.head, alignment, page_size::huge_2m, false, numa) != nullptr
                       ? backing::hugetlb_2m
                       : detail::advise_thp(p, l.head);
      }
      if (pool_pages(p + l.head, l.tail(), alignment, page_size::huge_2m, false, numa) == nullptr) {
        got.tail = detail::advise_thp(p + l.head, l.tail());
      }
    } catch (...) {
      os::unmap(p, l.length);  // the whole range, whatever each part became
      throw;
    }
    return p;
  }

  // `length` bytes of pool pages of `size`, faulted in (see populate_hugetlb_at_allocation). At
  // `at`, a part of a reservation of our own, or anywhere when `at` is null. When the pool cannot
  // serve: throws where `must` (strict, pages of size()), else returns nullptr, the range at `at`
  // THP-advised anonymous memory again, placed by `numa` (release_part).
  void* pool_pages(void* at, std::size_t length, std::size_t alignment, page_size size, bool must,
                   const numa_placement& numa) const {
    // A refused mmap is retried a few times when the pool has room again by the time we look:
    // other threads returned pages in between, so the shortage is already over.
    const std::uint64_t pages = length / bytes_of(size);
    const bool bound = numa.mode == numa_mode::bind;
    if (bound) {
      const node_pool pool = read_bound_pool(size, pages, length);
      if (pool.free + pool.surplus_room < pages) {
        if (must) throw_node_pool_short(size, pages, pool);
        if (at != nullptr) release_part(nullptr, at, length, numa);  // the reservation: memory
        return nullptr;
      }
    }
    for (int attempt = 0;; ++attempt) {
      std::error_code ec;
      void* p = at == nullptr && alignment > bytes_of(size)
                    ? detail::map_hugetlb_aligned(length, alignment, size, ec)
                    : os::map_hugetlb(length, size, ec, at);
      if (p != nullptr) {
        // Placed before the first touch: the pages come from the placement's nodes' pools.
        if (!numa.is_local()) {
          if (const std::error_code placed = numa::apply(p, length, numa)) {
            release_part(p, at, length, numa);
            throw_placement_refused(numa, length, placed);
          }
        }
        // Always faulted in here (see populate_hugetlb_at_allocation): a refusal is an error now,
        // never a SIGBUS at the caller's first touch.
        ec = os::populate(p, length, bytes_of(size), /*touch_fallback=*/false);
        if (!ec) {
          if (options_.prefault) {
            detail::global_counters().prefaulted_bytes.fetch_add(length, std::memory_order_relaxed);
          }
          count_other_node(p, length, bytes_of(size), numa);
          return p;
        }
        release_part(p, at, length, numa);
        if (must && bound) {  // another thread or process took the bound nodes' pages meanwhile
          node_pool pool = read_bound_pool(size, pages, length);
          if (pool.short_node < 0) pool.short_node = numa.nodes.first();
          throw_node_pool_short(size, pages, pool);
        }
        if (must) {
          detail::throw_refusal(
              read_hugetlb_refusal(refusal_stage::fault, size, length / bytes_of(size), ec));
        }
        return nullptr;
      }
      if (at != nullptr) release_part(nullptr, at, length, numa);  // a failed MAP_FIXED
      if (!must) return nullptr;
      // Read once: the retry and the message are decided from the same facts (refusal.hpp).
      const bool aligned_reservation = at == nullptr && alignment > bytes_of(size);
      const hugetlb_refusal refusal =
          read_hugetlb_refusal(refusal_stage::reserve, size, length / bytes_of(size), ec,
                               aligned_reservation ? length + alignment : length);
      if (cause_of(refusal) != refusal_cause::pool_refilled || attempt == 2) {
        detail::throw_refusal(refusal);
      }
    }
  }

  // Undoes a part of pool_pages(): unmaps a mapping of its own, or turns the part of a
  // reservation back into THP-advised anonymous memory placed by `numa` (a failed MAP_FIXED may
  // have left a hole on kernels before 6.12, and unpopulated pool pages must not stay; the fresh
  // mapping holds no policy of the part it replaces). Where that fails, throws: the caller unmaps
  // the whole block rather than return a part that could SIGBUS or sit on another node.
  static void release_part(void* p, void* at, std::size_t length, const numa_placement& numa) {
    if (at == nullptr) {
      os::unmap(p, length);
      return;
    }
    const std::error_code ec = os::map_anonymous_at(at, length);
    if (ec) {
      detail::throw_allocation_error(
          "hugepage: could not remap " + format_bytes(length) +
              " of a block after its pool pages were refused: " + ec.message(),
          ec);
    }
    if (const std::error_code placed = numa::apply(at, length, numa)) {
      throw_placement_refused(numa, length, placed);
    }
    os::advise_huge(at, length);
  }

  // populate_hugetlb_at_allocation: every hugetlb block is faulted in by allocate(). A private
  // mapping's reservation is a global count, and the first touch can still be refused: a hugetlb
  // cgroup limit charged at fault time (hugetlb.<size>.max; Kubernetes sets it), possibly on an
  // ancestor this process cannot see (a cgroup namespace); a cpuset or memory policy whose nodes
  // have run out of free pages while other nodes have them. The kernel answers each with SIGBUS.
  // Populated here, the same refusal is an error (EFAULT/ENOMEM from MADV_POPULATE_WRITE). The
  // zeroing of the pages moves from the first touch to allocate(), and the pages past `bytes`
  // in the last page are zeroed too (they were reserved already).

  // Optional steps after mapping: fork behaviour, pre-fault and collapse of THP memory (hugetlb
  // memory was populated in pool_pages where needed).
  void finish(void* p, std::size_t bytes, const layout& l, placement got,
              const numa_placement& numa) const {
    if (options_.dont_fork) os::advise(p, l.length, MADV_DONTFORK);
    if (!(options_.prefault || method_ == method::collapse)) return;
    // The anonymous part of the block: all of it, its head or its tail.
    const std::size_t from = l.head != 0 && anonymous(got.head) ? 0 : l.head;
    std::size_t to = l.tail() != 0 && anonymous(got.tail) ? l.length : l.head;
    // A fallback THP mapping of a 1 GiB-page request spans whole 1 GiB; populate only what the
    // caller asked for, rounded to the page that backs it.
    std::size_t extent = l.length;
    os::round_up(bytes, thp_page_bytes(), extent);
    to = std::min(to, extent);
    if (from >= to) return;
    char* const start = static_cast<char*>(p) + from;
    const std::size_t length = to - from;
    // MADV_COLLAPSE copies into a fresh huge page before it frees the old ones: one page more.
    const bool collapse = method_ == method::collapse && got.head == backing::thp;
    try {
      check_memory_headroom(length + (collapse ? thp_page_bytes() : 0));
      const std::error_code ec = os::populate(start, length, os::base_page_size());
      if (ec) {
        detail::throw_allocation_error(
            "hugepage: could not pre-fault " + format_bytes(length) + ": " + ec.message(), ec);
      }
    } catch (...) {  // the block is accounted for: release it the way deallocate() would
      deallocate(p, bytes, 1);
      throw;
    }
    detail::global_counters().prefaulted_bytes.fetch_add(length, std::memory_order_relaxed);
    if (collapse) {
      collapse_now(start, length);
    } else if (method_ == method::collapse && detail::thp_disabled_for_process()) {
      count_collapse_impossible();
    }
    count_other_node(start, length, thp_page_bytes(), numa);
  }

  // Populating past a memory cgroup limit gets the process OOM-killed; refuse before touching.
  // Another thread or process in the cgroup can still take the headroom in between: this check
  // turns the common case into an error, it cannot reserve memory.
  static void check_memory_headroom(std::size_t needed) {
    const cgroup_limit_search search = memory_limit();
    if (search.tightest && search.tightest->headroom() < needed) {
      detail::throw_memory_limit_exceeded(needed, *search.tightest);
    }
  }

  // One MADV_COLLAPSE per allocation, never a retry loop. After EINVAL (kernel < 6.1, THP
  // `never`, PR_SET_THP_DISABLE) no call is made for collapse_retry_seconds: an old kernel pays one
  // failing syscall a minute, and a process whose THP comes back on gets collapses again. The
  // memory stays THP-advised either way.
  static constexpr std::int64_t collapse_retry_seconds = 60;

  static void collapse_now(void* p, std::size_t length) noexcept {
    detail::counters& c = detail::global_counters();
    constexpr auto relaxed = std::memory_order_relaxed;
    const std::int64_t now = detail::monotonic_seconds();
    if (c.collapse_unsupported.load(relaxed) && now < c.collapse_retry_at.load(relaxed)) return;
    c.collapse_attempts.fetch_add(1, relaxed);
    const std::error_code ec = os::collapse(p, length);
    const bool unsupported = ec == std::errc::invalid_argument;
    if (unsupported) c.collapse_retry_at.store(now + collapse_retry_seconds, relaxed);
    c.collapse_unsupported.store(unsupported, relaxed);
    if (ec) c.collapse_failures.fetch_add(1, relaxed);
  }

  // THP disabled for the process (PR_SET_THP_DISABLE): the block is on base pages and
  // MADV_COLLAPSE would fail with EINVAL. No call is made; the failure is counted as one (and
  // collapse_unsupported says why), every allocation, since knowing costs no syscall of note.
  static void count_collapse_impossible() noexcept {
    detail::counters& c = detail::global_counters();
    c.collapse_failures.fetch_add(1, std::memory_order_relaxed);
    c.collapse_unsupported.store(true, std::memory_order_relaxed);
  }

  // ---- NUMA placement (numa.hpp) ----------------------------------------------------------------

  // A placement that names no node, one past 63 or one that is not online is refused before
  // anything is mapped (mbind itself takes a set with some online node and ignores the rest).
  void check_placement() const {
    const numa_placement& numa = options_.numa;
    if (!numa.nodes.valid() || numa.nodes.empty()) {
      detail::throw_allocation_error(
          std::string("hugepage: NUMA placement '") + name_of(numa.mode) +
              "' needs at least one node, numbered 0 to 63; it names " +
              (numa.nodes.valid()
                   ? std::string("none")
                   : "node " + std::to_string(numa.nodes.outside) + ", outside that range") +
              " (online nodes: " + numa::online_nodes().text() + ")",
          std::make_error_code(std::errc::invalid_argument));
    }
    if ((numa.nodes.mask & ~numa::online_nodes().mask) != 0) {
      throw_placement_refused(numa, 0, std::make_error_code(std::errc::invalid_argument));
    }
  }

  // mbind refused `numa` for a block of `length`: say which nodes do not exist, else the errno.
  [[noreturn, gnu::noinline, gnu::cold]] static void throw_placement_refused(
      const numa_placement& numa, std::size_t length, std::error_code ec) {
    const node_set online = numa::online_nodes();
    const node_set missing = node_set::of_mask(numa.nodes.mask & ~online.mask);
    std::string message = std::string("hugepage: NUMA placement '") + name_of(numa.mode) +
                          "' on node(s) " + numa.nodes.text() +
                          (length != 0 ? " of " + format_bytes(length) : std::string()) +
                          " refused: ";
    if (!missing.empty()) {
      message += "node(s) " + missing.text() + " do not exist: the online nodes are " +
                 online.text() + " (/sys/devices/system/node/online)";
      ec = std::make_error_code(std::errc::invalid_argument);
    } else if (const std::optional<node_set> allowed = numa::allowed_nodes();
               ec == std::errc::invalid_argument && allowed &&
               (numa.nodes.mask & allowed->mask) == 0) {
      message += "node(s) " + numa.nodes.text() + " are outside this process's cpuset, which " +
                 "allows node(s) " + allowed->text() +
                 " (Mems_allowed_list in /proc/self/status); mbind: " + ec.message();
    } else if (ec == std::errc::invalid_argument) {
      message += "mbind: " + ec.message() +
                 " (nodes outside this process's cpuset? see Mems_allowed_list in "
                 "/proc/self/status)";
    } else {
      message += "mbind: " + ec.message();
    }
    detail::throw_allocation_error(message, ec);
  }

  // The free pages of `size` on each bound node, read before a bound block is mapped: the mmap
  // reserves from the pool of all nodes, but the fault under MPOL_BIND must find its page on a
  // bound node. Where nr_overcommit_hugepages leaves room for surplus pages, a fault that finds
  // none free on a bound node has the kernel allocate a surplus page there (from that node's
  // memory, under the policy): that room counts too. 1 GiB pages are never surplus. Whether the
  // node's memory has the room shows when the block is faulted in by allocate(): a refusal there
  // throws node_pool_exhausted too. Throws for a bound node that does not exist.
  struct node_pool {
    std::uint64_t free = 0;          // on all bound nodes
    std::uint64_t surplus_room = 0;  // surplus pages the system-wide pool may still take
    int short_node = -1;             // the first bound node with fewer free pages than asked
    std::uint64_t short_free = 0;    // its free pages
  };
  node_pool read_bound_pool(page_size size, std::uint64_t pages, std::size_t length) const {
    node_pool pool;
    const node_set& nodes = options_.numa.nodes;
    for (int n = 0; n < 64; ++n) {
      if (!nodes.contains(n)) continue;
      const std::optional<std::uint64_t> free = numa::read_node_pool(n, size, "free_hugepages");
      if (!free && !numa::online_nodes().contains(n)) {
        throw_placement_refused(options_.numa, length,
                                std::make_error_code(std::errc::invalid_argument));
      }
      const std::uint64_t here = free.value_or(0);
      pool.free += here;
      if (here < pages && pool.short_node < 0) {
        pool.short_node = n;
        pool.short_free = here;
      }
    }
    if (size != page_size::huge_1g && pool.free < pages) {
      if (const std::optional<hugetlb_pool> all = read_pool(size)) {
        const std::uint64_t overcommit = all->overcommit.value_or(0);
        const std::uint64_t surplus = all->surplus.value_or(0);
        pool.surplus_room = overcommit > surplus ? overcommit - surplus : 0;
      }
    }
    return pool;
  }

  // A bound block the bound nodes' pools cannot cover: node_pool_exhausted naming the node.
  [[noreturn, gnu::noinline, gnu::cold]] void throw_node_pool_short(page_size size,
                                                                    std::uint64_t pages,
                                                                    const node_pool& pool) const {
    const node_set& nodes = options_.numa.nodes;
    const int node = pool.short_node >= 0 ? pool.short_node : nodes.first();
    const std::string file = numa::node_pool_file(node, size, "nr_hugepages");
    const std::uint64_t reserved = numa::read_node_pool(node, size, "nr_hugepages").value_or(0);
    const std::uint64_t free_there = pool.short_node >= 0 ? pool.short_free : pool.free;
    const std::uint64_t missing = pages > pool.free ? pages - pool.free : pages;
    std::string message = "hugepage: " + std::to_string(pages) + " hugetlb pages of " +
                          name_of(size) + " bound to node " + nodes.text() + ", where node " +
                          std::to_string(node) + " has " + std::to_string(free_there) + " free";
    if (nodes.first() != node || node_set::of_mask(nodes.mask & ~(std::uint64_t{1} << node)).mask) {
      message += " (" + std::to_string(pool.free) + " on all bound nodes)";
    }
    if (pool.surplus_room != 0) {
      message += ", and room for " + std::to_string(pool.surplus_room) +
                 " surplus pages (nr_overcommit_hugepages), which take the node's memory";
    }
    message += "; pages of other nodes are not used for a bound block. Reserve more on node " +
               std::to_string(node) + ": echo " + std::to_string(reserved + missing) + " > " + file;
    throw node_pool_exhausted(message, std::make_error_code(std::errc::not_enough_memory), size,
                              pages, pool.free, node, file);
  }

  // A block placed `preferred` that got a page of another node is counted once. One query per
  // `step` bytes (a huge page): the pages must be faulted in.
  static void count_other_node(void* p, std::size_t length, std::size_t step,
                               const numa_placement& numa) noexcept {
    if (numa.mode != numa_mode::preferred || step == 0) return;
    const int wanted = numa.nodes.first();
    constexpr std::size_t batch = 64;
    const void* pages[batch];
    int status[batch];
    for (std::size_t at = 0; at < length;) {
      std::size_t count = 0;
      for (; count < batch && at < length; ++count, at += step) {
        pages[count] = static_cast<const char*>(p) + at;
      }
      if (numa::nodes_of_pages(0, count, pages, status)) return;
      for (std::size_t i = 0; i < count; ++i) {
        if (status[i] >= 0 && status[i] != wanted) {
          detail::global_counters().fallbacks_to_other_node.fetch_add(1, std::memory_order_relaxed);
          return;
        }
      }
    }
  }

  method method_;
  page_size size_;
  pool_policy policy_;
  allocation_options options_;
};

namespace detail {

// The library's function-local statics (the registry, whose constructor registers the fork
// handlers, and the values read once) initialise under a guard on first use. A fork() while
// another thread holds such a guard leaves the child waiting on it for ever. So they are all
// initialised at program start, before any thread of the program can fork.
inline const bool statics_initialised =
    (static_cast<void>(registry()), static_cast<void>(os::base_page_size()),
     static_cast<void>(thp_page_bytes()), static_cast<void>(read_thp_mode()),
     static_cast<void>(strategy::fixed_mapping_keeps_range_on_failure()),
     static_cast<void>(numa::online_nodes()), true);

}  // namespace detail

}  // namespace hugepage
