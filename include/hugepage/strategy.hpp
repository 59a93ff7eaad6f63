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

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include "hugepage/cgroup.hpp"
#include "hugepage/detail/mapping_registry.hpp"
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
    // Only reachable with a huge `bytes` under a threshold set above it; says so to the compiler,
    // which otherwise warns that such a size reaches ::operator new.
    if (bytes > static_cast<std::size_t>(PTRDIFF_MAX)) throw std::bad_alloc();
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
    // A record only where deallocate() cannot work it out: another backing, or MADV_DONTFORK.
    if (obtained != requested_backing() || options_.dont_fork) {
      try {
        detail::registry().add(p, {obtained, length, options_.dont_fork});
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

  // Pool pages, populated here when a fault could be refused later (see hugetlb_faults_limited),
  // or THP under the fallback policy. Never returns memory whose first touch can raise SIGBUS.
  void* map_from_pool(std::size_t length, std::size_t alignment, backing& obtained) const {
    // mmap aligns hugetlb mappings to their page size and no further.
    const bool alignable = alignment <= bytes_of(size_);
    if (!alignable && policy_ == pool_policy::strict) {
      detail::throw_allocation_error("hugepage: alignment " + std::to_string(alignment) +
                                         " exceeds the hugetlb page size " + name_of(size_),
                                     std::make_error_code(std::errc::invalid_argument));
    }
    // A refused mmap is retried a few times when the pool has room again by the time we look:
    // other threads returned pages in between, so the shortage is already over.
    for (int attempt = 0; alignable; ++attempt) {
      std::error_code ec;
      void* p = os::map_hugetlb(length, size_, ec);
      if (p != nullptr) {
        if (!options_.prefault && !hugetlb_faults_limited(size_)) return p;
        ec = os::populate(p, length, bytes_of(size_));
        if (!ec) {
          detail::global_counters().prefaulted_bytes.fetch_add(length, std::memory_order_relaxed);
          return p;
        }
        os::unmap(p, length);
        if (policy_ == pool_policy::strict) throw_fault_refused(length, ec);
        break;
      }
      if (policy_ == pool_policy::fallback) break;
      if (!pool_refilled_since(length, ec) || attempt == 2) throw_pool_failure(length, ec);
    }
    // Fallback: THP, at the same length, so that deallocate() unmaps what it would have unmapped
    // for a pool page; pages past `bytes` are never touched and cost no RSS.
    void* p = map_thp(length, std::max(alignment, thp_page_bytes()), obtained);
    detail::counters& c = detail::global_counters();
    (obtained == backing::thp ? c.fallbacks_to_thp : c.fallbacks_to_base)
        .fetch_add(1, std::memory_order_relaxed);
    return p;
  }

  // Whether a hugetlb cgroup limit charged at fault time (hugetlb.<size>.max, v1 limit_in_bytes)
  // may refuse pages of `size` - or the hierarchy cannot be read to tell. The kernel answers such
  // a refusal with SIGBUS at first touch, so these blocks are populated at allocation, where it is
  // an error instead. Read at most once a second, and again in a child after fork(): a process
  // moved into a limited cgroup is noticed within a second.
  static bool hugetlb_faults_limited(page_size size) {
    struct cache {
      std::atomic<std::int64_t> checked_at{-1};
      std::atomic<pid_t> pid{0};
      std::atomic<bool> limited{true};
    };
    static cache caches[2];
    cache& c = caches[size == page_size::huge_1g ? 1 : 0];
    constexpr auto relaxed = std::memory_order_relaxed;
    const std::int64_t now = detail::monotonic_seconds();
    const pid_t pid = ::getpid();
    if (c.checked_at.load(relaxed) == now && c.pid.load(relaxed) == pid) {
      return c.limited.load(relaxed);
    }
    const cgroup_limit_search search = hugetlb_limit(bytes_of(size), hugetlb_charge::fault);
    const bool limited = !search.readable || search.tightest.has_value();
    c.limited.store(limited, relaxed);
    c.pid.store(pid, relaxed);
    c.checked_at.store(now, relaxed);
    return limited;
  }

  // After a refused mmap: true when the pool now has room for `length` and nothing else explains
  // the refusal, so the caller retries.
  bool pool_refilled_since(std::size_t length, std::error_code ec) const {
    if (ec != std::errc::not_enough_memory) return false;
    const auto pool = read_pool(size_);
    const std::uint64_t pages = length / bytes_of(size_);
    return pool && pool->available().value_or(0) >= pages && !reservation_limit_refuses(length) &&
           !address_space_limit_refuses(length);
  }

  std::optional<cgroup_limit> reservation_limit_refuses(std::size_t length) const {
    cgroup_limit_search search = hugetlb_limit(bytes_of(size_), hugetlb_charge::reservation);
    if (search.tightest && search.tightest->headroom() < length) return search.tightest;
    return std::nullopt;
  }

  static bool address_space_limit_refuses(std::size_t length) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return false;
    std::error_code ec;
    const std::string statm = detail::read_file("/proc/self/statm", ec);
    const std::uint64_t pages = detail::parse_u64(statm).value_or(0);
    return pages * os::base_page_size() + length > limit.rlim_cur;
  }

  // The pages of a populated hugetlb mapping could not all be faulted in (EFAULT: a hugetlb
  // cgroup refused the charge; ENOMEM). Strict policy only.
  [[noreturn, gnu::noinline, gnu::cold]] void throw_fault_refused(std::size_t length,
                                                                  std::error_code ec) const {
    const std::uint64_t pages = length / bytes_of(size_);
    const std::string what = "hugepage: faulting in " + std::to_string(pages) + " hugetlb page" +
                             (pages == 1 ? "" : "s") + " of " + name_of(size_) + " (" +
                             detail::describe_bytes(length) + ") failed: " + ec.message();
    const cgroup_limit_search search = hugetlb_limit(bytes_of(size_), hugetlb_charge::fault);
    if (search.tightest) throw_limit_exceeded(what, ec, pages, *search.tightest);
    detail::throw_allocation_error(
        what + (search.readable ? "; no hugetlb cgroup limit is set, so the pool ran short"
                                : "; a hugetlb cgroup limit (hugetlb." +
                                      detail::hugetlb_cgroup_size_name(bytes_of(size_)) +
                                      ".max) may apply, but this process cannot read its cgroup "
                                      "hierarchy (no cgroup file system mounted)"),
        ec);
  }

  [[noreturn]] void throw_limit_exceeded(const std::string& what, std::error_code ec,
                                         std::uint64_t pages, const cgroup_limit& limit) const {
    const std::uint64_t allowed = limit.headroom() / bytes_of(size_);
    throw hugetlb_limit_exceeded(what + ": hugetlb cgroup limit: " + limit.file + " = " +
                                     detail::describe_bytes(limit.limit) + ", " +
                                     detail::describe_bytes(limit.usage) + " charged, room for " +
                                     std::to_string(allowed) + " of the " + std::to_string(pages) +
                                     " pages asked; raise the limit or ask for less",
                                 ec, size_, pages, allowed, limit.file, limit.limit, limit.usage);
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
    if (ec != std::errc::not_enough_memory) detail::throw_allocation_error(what, ec);
    // ENOMEM: the reservation was refused - by a reservation limit, the address-space limit, or
    // the pool. The cause is decided from these facts, never from the pool's level alone, which
    // other processes move.
    if (const auto limit = reservation_limit_refuses(length)) {
      throw_limit_exceeded(what, ec, pages, *limit);
    }
    if (address_space_limit_refuses(length)) {
      detail::throw_allocation_error(
          what + "; the address-space limit (RLIMIT_AS, ulimit -v) leaves no room for it", ec);
    }
    const std::uint64_t available = pool->available().value_or(0);
    const std::uint64_t total = pool->total.value_or(0);
    const std::string figures = std::to_string(available) + " available (free " +
                                std::to_string(pool->free.value_or(0)) + ", reserved " +
                                std::to_string(pool->reserved.value_or(0)) + ", total " +
                                std::to_string(total) + ")";
    std::string advice;
    if (available >= pages) {
      // The pool had fewer pages when the kernel refused and has been refilled since (three
      // times, see map_from_pool): other threads or processes hold pages at the same moments.
      advice =
          "; it was short when the kernel refused and is in concurrent use: size it for the "
          "peak, e.g. " +
          pool_command(total + pages);
    } else if (physical_memory_bytes() != 0 &&
               total + pages - available > physical_memory_bytes() / page) {
      advice = "; no pool can hold that: it is more than this machine's memory (" +
               detail::describe_bytes(physical_memory_bytes()) + ")";
    } else {
      advice = "; reserve enough with: " + pool_command(total + pages - available);
    }
    throw pool_exhausted(what + ": pool exhausted: asked for " + std::to_string(pages) + " x " +
                             name_of(size_) + ", " + figures + advice,
                         ec, size_, pages, available);
  }

  // The command that sizes this strategy's pool to `pages`.
  std::string pool_command(std::uint64_t pages) const {
    return size_ == page_size::huge_2m
               ? "sysctl -w vm.nr_hugepages=" + std::to_string(pages)
               : "echo " + std::to_string(pages) + " > " +
                     detail::pool_directory(bytes_of(size_), {}) + "nr_hugepages";
  }

  // Optional steps after mapping: fork behaviour, pre-fault and collapse of THP memory (hugetlb
  // memory was populated in map_from_pool where needed).
  void finish(void* p, std::size_t bytes, std::size_t length, backing obtained) const {
    if (options_.dont_fork) os::advise(p, length, MADV_DONTFORK);
    const bool anonymous = obtained == backing::thp || obtained == backing::base;
    if (!anonymous || !(options_.prefault || method_ == method::collapse)) return;
    // A fallback THP mapping of a 1 GiB-page request spans whole 1 GiB; populate only what the
    // caller asked for, rounded to the page that backs it.
    std::size_t extent = length;
    os::round_up(bytes, thp_page_bytes(), extent);
    extent = std::min(extent, length);
    // MADV_COLLAPSE copies into a fresh huge page before it frees the old ones: one page more.
    const bool collapse = method_ == method::collapse && obtained == backing::thp;
    check_memory_headroom(p, bytes, extent + (collapse ? thp_page_bytes() : 0));
    const std::error_code ec = os::populate(p, extent, os::base_page_size());
    if (ec) {
      deallocate(p, bytes, 1);
      detail::throw_allocation_error(
          "hugepage: could not pre-fault " + detail::describe_bytes(extent) + ": " + ec.message(),
          ec);
    }
    detail::global_counters().prefaulted_bytes.fetch_add(extent, std::memory_order_relaxed);
    if (collapse) collapse_now(p, extent);
  }

  // Populating past a memory cgroup limit gets the process OOM-killed; refuse before touching.
  // Another thread or process in the cgroup can still take the headroom in between: this check
  // turns the common case into an error, it cannot reserve memory.
  void check_memory_headroom(void* p, std::size_t bytes, std::size_t needed) const {
    const cgroup_limit_search search = memory_limit();
    if (!search.tightest || search.tightest->headroom() >= needed) return;
    const cgroup_limit& limit = *search.tightest;
    deallocate(p, bytes, 1);
    throw memory_limit_exceeded(
        "hugepage: populating " + detail::describe_bytes(needed) +
            " would pass the memory cgroup limit " + limit.file + " = " +
            detail::describe_bytes(limit.limit) + " (" + detail::describe_bytes(limit.usage) +
            " charged, " + detail::describe_bytes(limit.reclaimable) +
            " of it reclaimable file cache; headroom " + detail::describe_bytes(limit.headroom()) +
            "): the kernel would OOM-kill the process instead of failing",
        limit.file, limit.limit, limit.usage, limit.headroom());
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
