// hugepage/strategy.hpp - the one place where hugepage policy lives.
//
// A `strategy` says how to get memory for one request: from transparent huge pages (THP), from a
// hugetlb pool, or from THP collapsed on the spot (MADV_COLLAPSE). The STL allocators
// (allocator.hpp) and the std::pmr resources (pmr.hpp) are thin adapters over it.
//
// Data flow of allocate(bytes, alignment):
//   bytes < small-request threshold  -> ::operator new (honours over-alignment); RSS stays small
//   else mapped length = bytes rounded up to the huge page size
//        thp:      2 MiB-aligned anonymous mapping + MADV_HUGEPAGE (first touch faults huge pages)
//        collapse: the same, populated at once, then MADV_COLLAPSE
//        hugetlb:  MAP_HUGETLB from the pool; on shortage throw pool_exhausted (strict) or map THP
//                  instead (fallback), counted
//        optional: pre-fault (MADV_POPULATE_WRITE), MADV_DONTFORK
// deallocate(p, bytes, alignment) recomputes the same decision from `bytes` - no header in front
// of the block, no lookup on the common path - and unmaps exactly the length that was mapped.
//
// Why a threshold: a huge page is also the unit of reclaim. Rounding a 100 KiB vector up to 2 MiB
// pins 20 times its size, and a heap of such vectors would multiply RSS. Only requests of at least
// one huge page are mapped; below it the standard allocator serves them.
//
// Kernel: THP needs CONFIG_TRANSPARENT_HUGEPAGE with `enabled` at madvise or always; hugetlb needs
// a reserved pool (vm.nr_hugepages); MADV_COLLAPSE needs Linux 6.1 (older kernels: the memory
// stays THP-advised, the failure is counted once and the call is not made again).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/detail/immortal.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/system.hpp"

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
  bool dont_fork = false;

  friend constexpr bool operator==(const allocation_options& a,
                                   const allocation_options& b) noexcept {
    return a.small_threshold == b.small_threshold && a.prefault == b.prefault &&
           a.dont_fork == b.dont_fork;
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
  static constexpr bool dont_fork = false;
};

/// Options that pre-fault every mapped block at allocation.
struct prefault_options : default_options {
  static constexpr bool prefault = true;
};

namespace detail {

// Mappings whose backing differs from what their strategy asked for (a hugetlb request served by
// THP, THP advice refused). Rare by construction, so a mutex is fine; deallocate() looks here only
// while the set is non-empty, which costs one relaxed load on the common path.
class fallback_registry {
 public:
  void add(void* p, backing b) {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.emplace_back(p, b);  // may throw std::bad_alloc: the caller unmaps
    size_.store(entries_.size(), std::memory_order_relaxed);
  }

  /// Removes `p` and returns its backing, or returns `otherwise` when `p` is not registered.
  backing take(void* p, backing otherwise) noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return otherwise;
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = std::find_if(entries_.begin(), entries_.end(),
                                 [p](const auto& entry) { return entry.first == p; });
    if (it == entries_.end()) return otherwise;
    const backing b = it->second;
    *it = entries_.back();
    entries_.pop_back();
    size_.store(entries_.size(), std::memory_order_relaxed);
    return b;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<void*, backing>> entries_;
  std::atomic<std::size_t> size_{0};
};

inline fallback_registry& registry() noexcept {
  static immortal<fallback_registry> instance;
  return *instance.get();
}

inline std::string describe_bytes(std::size_t bytes) {
  char text[48];
  if (bytes >= (std::size_t{1} << 30) && bytes % (std::size_t{1} << 30) == 0) {
    std::snprintf(text, sizeof text, "%zu GiB", bytes >> 30);
  } else if (bytes >= (std::size_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
  }
  return text;
}

inline std::string errno_text(std::error_code code) {
  return code ? code.message() : std::string("no error");
}

}  // namespace detail

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

  /// The huge page size this strategy maps in (the THP PMD size for thp and collapse).
  std::size_t page_bytes() const noexcept {
    return method_ == method::hugetlb ? bytes_of(size_) : thp_page_bytes();
  }

  /// Requests of at least this many bytes are mapped; smaller ones go to ::operator new.
  std::size_t threshold() const noexcept {
    return options_.small_threshold != 0 ? options_.small_threshold : page_bytes();
  }

  /// Whether a request of `bytes` is mapped (true) or served by ::operator new (false).
  bool is_mapped(std::size_t bytes) const noexcept { return bytes >= threshold(); }

  /// The length a mapped request of `bytes` occupies: `bytes` rounded up to the page size;
  /// 0 when that overflows.
  std::size_t mapped_length(std::size_t bytes) const noexcept {
    std::size_t length = 0;
    return os::round_up(bytes, page_bytes(), length) ? length : 0;
  }

  /// Returns memory for `bytes` aligned to `alignment` (a power of two).
  /// Throws pool_exhausted (strict hugetlb, pool short), allocation_error (the kernel refused a
  /// mapping or a pre-fault), std::bad_alloc (::operator new failed).
  void* allocate(std::size_t bytes, std::size_t alignment) const {
    if (!is_mapped(bytes)) return allocate_small(bytes, alignment);
    return allocate_mapped(bytes, alignment);
  }

  /// Releases memory from allocate() with the same `bytes` and `alignment`. Never throws.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) const noexcept {
    if (p == nullptr) return;
    if (!is_mapped(bytes)) return deallocate_small(p, bytes, alignment);
    const std::size_t length = mapped_length(bytes);
    const backing obtained = detail::registry().take(p, requested_backing());
    os::unmap(p, length);
    account(obtained, length, /*add=*/false);
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

  // ---- small requests: the standard allocator's path, over-alignment included -----------------

  static void* allocate_small(std::size_t bytes, std::size_t alignment) {
    if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return ::operator new (bytes, std::align_val_t{alignment});
    }
    return ::operator new(bytes);
  }

  static void deallocate_small(void* p, std::size_t bytes, std::size_t alignment) noexcept {
#if defined(__cpp_sized_deallocation)
    if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return ::operator delete (p, bytes, std::align_val_t{alignment});
    }
    ::operator delete(p, bytes);
#else
    (void)bytes;
    if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      return ::operator delete (p, std::align_val_t{alignment});
    }
    ::operator delete(p);
#endif
  }

  // ---- mapped requests --------------------------------------------------------------------------

  backing requested_backing() const noexcept {
    if (method_ != method::hugetlb) return backing::thp;
    return size_ == page_size::huge_1g ? backing::hugetlb_1g : backing::hugetlb_2m;
  }

  std::atomic<std::size_t>& requested_counter() const noexcept {
    detail::counters& c = detail::global_counters();
    switch (method_) {
      case method::thp: return c.requested_thp;
      case method::collapse: return c.requested_collapse;
      case method::hugetlb: break;
    }
    return size_ == page_size::huge_1g ? c.requested_hugetlb_1g : c.requested_hugetlb_2m;
  }

  void account(backing obtained, std::size_t length, bool add) const noexcept {
    detail::counters& c = detail::global_counters();
    constexpr auto relaxed = std::memory_order_relaxed;
    if (add) {
      requested_counter().fetch_add(length, relaxed);
      c.obtained[static_cast<int>(obtained)].fetch_add(length, relaxed);
      c.live_mappings.fetch_add(1, relaxed);
    } else {
      requested_counter().fetch_sub(length, relaxed);
      c.obtained[static_cast<int>(obtained)].fetch_sub(length, relaxed);
      c.live_mappings.fetch_sub(1, relaxed);
    }
  }

  void* allocate_mapped(std::size_t bytes, std::size_t alignment) const {
    const std::size_t length = mapped_length(bytes);
    if (length == 0) {
      detail::throw_allocation_error(
          "hugepage: request of " + std::to_string(bytes) + " bytes is too large to map",
          std::make_error_code(std::errc::not_enough_memory));
    }
    void* p = nullptr;
    backing obtained = requested_backing();
    if (method_ == method::hugetlb) {
      p = map_from_pool(length, alignment, obtained);
    } else {
      p = map_thp(length, std::max(alignment, page_bytes()), obtained);
    }
    if (obtained != requested_backing()) {
      try {
        detail::registry().add(p, obtained);
      } catch (...) {
        os::unmap(p, length);
        throw;
      }
    }
    account(obtained, length, /*add=*/true);
    // From here on the mapping is accounted for: failures release it through deallocate().
    finish(p, bytes, length, obtained);
    return p;
  }

  // THP-advised anonymous memory; `obtained` becomes base when the kernel refuses the advice
  // (a kernel without CONFIG_TRANSPARENT_HUGEPAGE answers EINVAL).
  static void* map_thp(std::size_t length, std::size_t alignment, backing& obtained) {
    std::error_code ec;
    void* p = os::map_aligned(length, alignment, ec);
    if (p == nullptr) {
      detail::throw_allocation_error("hugepage: mmap of " + detail::describe_bytes(length) +
                                         " for transparent huge pages failed: " + ec.message(),
                                     ec);
    }
    obtained = os::advise_huge(p, length) ? backing::base : backing::thp;
    return p;
  }

  void* map_from_pool(std::size_t length, std::size_t alignment, backing& obtained) const {
    // mmap aligns hugetlb mappings to their page size and no further.
    const bool alignable = alignment <= bytes_of(size_);
    if (!alignable && policy_ == pool_policy::strict) {
      detail::throw_allocation_error("hugepage: alignment " + std::to_string(alignment) +
                                         " exceeds the hugetlb page size " + name_of(size_),
                                     std::make_error_code(std::errc::invalid_argument));
    }
    std::error_code ec;
    void* p = alignable ? os::map_hugetlb(length, size_, ec) : nullptr;
    if (p != nullptr) return p;
    if (policy_ == pool_policy::strict) throw_pool_failure(length, ec);
    // Fallback: THP, at the same length, so that deallocate() unmaps what it would have unmapped
    // for a pool page; pages past `bytes` are never touched and cost no RSS.
    p = map_thp(length, std::max(alignment, thp_page_bytes()), obtained);
    detail::counters& c = detail::global_counters();
    (obtained == backing::thp ? c.fallbacks_to_thp : c.fallbacks_to_base)
        .fetch_add(1, std::memory_order_relaxed);
    return p;
  }

  [[noreturn, gnu::noinline, gnu::cold]] void throw_pool_failure(std::size_t length,
                                                                 std::error_code ec) const {
    const std::size_t page = bytes_of(size_);
    const std::uint64_t pages = length / page;
    const auto pool = read_pool(size_);
    const std::string what = "hugepage: hugetlb mmap of " + std::to_string(pages) + " page" +
                             (pages == 1 ? "" : "s") + " of " + name_of(size_) + " (" +
                             detail::describe_bytes(length) + ") failed: " + ec.message();
    if (!pool) {
      detail::throw_allocation_error(what + "; this kernel has no " + name_of(size_) +
                                         " hugetlb pool (CONFIG_HUGETLBFS, or a CPU without " +
                                         name_of(size_) + " pages)",
                                     ec);
    }
    const std::uint64_t available = pool->available().value_or(0);
    if (ec != std::errc::not_enough_memory || available >= pages) {
      detail::throw_allocation_error(what + "; the pool has " + std::to_string(available) +
                                         " available, so a hugetlb cgroup limit (hugetlb." +
                                         (page == (1u << 21) ? "2MB" : "1GB") +
                                         ".max) or the address-space limit refused it",
                                     ec);
    }
    const std::uint64_t target = pool->total.value_or(0) + (pages - available);
    const std::string fix = size_ == page_size::huge_2m
                                ? "sysctl -w vm.nr_hugepages=" + std::to_string(target)
                                : "echo " + std::to_string(target) +
                                      " > /sys/kernel/mm/hugepages/hugepages-" +
                                      std::to_string(page / 1024) + "kB/nr_hugepages";
    throw pool_exhausted(what + ": pool exhausted: asked for " + std::to_string(pages) + " x " +
                             name_of(size_) + ", " + std::to_string(available) +
                             " available (free " + std::to_string(pool->free.value_or(0)) +
                             ", reserved " + std::to_string(pool->reserved.value_or(0)) +
                             ", total " + std::to_string(pool->total.value_or(0)) +
                             "); reserve enough with: " + fix,
                         ec, size_, pages, available);
  }

  // Optional steps after mapping: fork behaviour, pre-fault, collapse.
  void finish(void* p, std::size_t bytes, std::size_t length, backing obtained) const {
    if (options_.dont_fork) os::advise(p, length, MADV_DONTFORK);
    const bool populate = options_.prefault || method_ == method::collapse;
    if (populate) {
      // A fallback THP mapping of a 1 GiB-page request spans whole 1 GiB; populate only what the
      // caller asked for, rounded to the page that backs it.
      std::size_t extent = length;
      if (obtained == backing::thp || obtained == backing::base) {
        os::round_up(bytes, thp_page_bytes(), extent);
        extent = std::min(extent, length);
      }
      const std::size_t stride = obtained == backing::hugetlb_2m || obtained == backing::hugetlb_1g
                                     ? bytes_of(size_)
                                     : os::base_page_size();
      const std::error_code ec = os::populate(p, extent, stride);
      if (ec) {
        deallocate(p, bytes, 1);
        detail::throw_allocation_error(
            "hugepage: could not pre-fault " + detail::describe_bytes(extent) + ": " + ec.message(),
            ec);
      }
      detail::global_counters().prefaulted_bytes.fetch_add(extent, std::memory_order_relaxed);
      if (method_ == method::collapse && obtained == backing::thp) collapse_now(p, extent);
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

  method method_;
  page_size size_;
  pool_policy policy_;
  allocation_options options_;
};

}  // namespace hugepage
