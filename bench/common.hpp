// bench/common.hpp - what every suite family of hugepage_bench shares: keys, the allocators
// under test, /proc readers, perf counter windows, preconditions and the one cached container.
//
// Header-only, included by main.cpp and by each suites_*.cpp; globals are C++17 inline variables,
// so every file sees one instance.
#pragma once

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hugepage/hugepage.hpp"
#if defined(HUGEPAGE_WITH_LIBPFM)
#include "hugepage/perf_events_pfm.hpp"
#endif

namespace hugepage_bench {

using u64 = std::uint64_t;
using hugepage::units::gib;
using hugepage::units::kib;
using hugepage::units::mib;

// ---- keys: generated in registers, no key array ------------------------------------------------

// Both mixers are bijections on 64 bits, so distinct inputs give distinct outputs.
inline u64 mix_index(u64 x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline u64 key_of(u64 i) {  // murmur3's fmix64: key of the i-th inserted element
  i ^= i >> 33;
  i *= 0xff51afd7ed558ccdULL;
  i ^= i >> 33;
  i *= 0xc4ceb9fe1a85ec53ULL;
  return i ^ (i >> 33);
}
// A uniform index in [0, n) from a counter (Lemire's multiply-high reduction).
inline u64 index_of(u64 counter, u64 n) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<u64>((static_cast<u128>(mix_index(counter)) * n) >> 64);
}

// ---- allocators
// ----------------------------------------------------------------------------------

// The largest live block allocated through recording_allocator: the backing array of a
// flat_hash_map, found without reaching into absl's internals.
struct block_record {
  const void* p = nullptr;
  std::size_t bytes = 0;
};
inline block_record largest_block;
/// The row running now (BM_<suite>/<allocator>/<bytes>), for lines a row writes to the log.
inline std::string current_row;

template <class T, class Inner>
class recording_allocator {
 public:
  using value_type = T;
  using inner_type = typename std::allocator_traits<Inner>::template rebind_alloc<T>;
  using propagate_on_container_move_assignment = std::true_type;
  using is_always_equal = std::true_type;
  template <class U>
  struct rebind {
    using other = recording_allocator<U, Inner>;
  };
  recording_allocator() noexcept = default;
  template <class U>
  recording_allocator(const recording_allocator<U, Inner>& /*other*/) noexcept {}  // NOLINT

  T* allocate(std::size_t n) {
    T* p = inner_type().allocate(n);
    if (n * sizeof(T) >= largest_block.bytes) largest_block = {p, n * sizeof(T)};
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (largest_block.p == p) largest_block = {};
    inner_type().deallocate(p, n);
  }
  template <class U>
  friend bool operator==(const recording_allocator&, const recording_allocator<U, Inner>&) {
    return true;
  }
  template <class U>
  friend bool operator!=(const recording_allocator&, const recording_allocator<U, Inner>&) {
    return false;
  }
};

// The last two are node backends only (suites_nodes.cpp): a std::pmr pool over
// hugepage::pmr::thp_resource(), and the thread-safe arena over THP.
enum class alloc_kind {
  std_alloc,
  thp,
  hugetlb_2m,
  hugetlb_1g,
  collapse,
  thp_prefault,
  pmr_pool,
  arena_mt
};
constexpr alloc_kind all_kinds[] = {
    alloc_kind::std_alloc, alloc_kind::thp,          alloc_kind::hugetlb_2m, alloc_kind::hugetlb_1g,
    alloc_kind::collapse,  alloc_kind::thp_prefault, alloc_kind::pmr_pool,   alloc_kind::arena_mt};

inline const char* token_of(alloc_kind k) {
  switch (k) {
    case alloc_kind::std_alloc: return "std";
    case alloc_kind::thp: return "thp";
    case alloc_kind::hugetlb_2m: return "hugetlb_2m";
    case alloc_kind::hugetlb_1g: return "hugetlb_1g";
    case alloc_kind::collapse: return "collapse";
    case alloc_kind::thp_prefault: return "thp_prefault";
    case alloc_kind::pmr_pool: return "pmr_pool";
    case alloc_kind::arena_mt: return "arena_mt";
  }
  return "?";
}

using byte = unsigned char;
using std_bytes = std::allocator<byte>;
using thp_bytes = hugepage::thp_allocator<byte>;
using hugetlb_2m_bytes = hugepage::huge_page_allocator<byte, hugepage::page_size::huge_2m>;
// The 1 GiB allocator as users get it: its cascade (strategy.hpp) maps from 2 MiB up, so rows
// below 1 GiB are on 2 MiB pages (pool, else THP) and a 1.5 GiB row on one 1 GiB page and 256 of
// 2 MiB. The threshold is spelled out so that the rows keep mapping from 2 MiB if the default
// moves.
struct from_2m_options : hugepage::default_options {
  static constexpr std::size_t small_threshold = 2 * hugepage::units::mib;
};
using hugetlb_1g_bytes =
    hugepage::huge_page_allocator<byte, hugepage::page_size::huge_1g, hugepage::pool_policy::strict,
                                  from_2m_options>;
using collapse_bytes = hugepage::collapse_allocator<byte>;
using thp_prefault_bytes = hugepage::thp_allocator<byte, hugepage::prefault_options>;

template <class Inner, class T>
using rebound = typename std::allocator_traits<Inner>::template rebind_alloc<T>;
template <class Inner>
using map_type = absl::flat_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>,
                                     recording_allocator<std::pair<const u64, u64>, Inner>>;
template <class Inner>
using vector_type = std::vector<u64, rebound<Inner, u64>>;

inline std::optional<hugepage::page_size> pool_of(alloc_kind k) {
  if (k == alloc_kind::hugetlb_2m) return hugepage::page_size::huge_2m;
  if (k == alloc_kind::hugetlb_1g) return hugepage::page_size::huge_1g;
  return std::nullopt;
}

// ---- /proc readers: the library's (hugepage/kernel_counters.hpp) -------------------------------

inline std::size_t mem_available() {
  return hugepage::read_meminfo_value("MemAvailable").value_or(0);
}

struct rss_figures {
  double rss_mib = 0, peak_rss_mib = 0;
};

// RSS plus this process's hugetlb pages, which the kernel leaves out of RSS (statm, VmRSS).
inline rss_figures read_rss() {
  const hugepage::process_status status =
      hugepage::read_status().value_or(hugepage::process_status{});
  rss_figures r;
  const double hugetlb = static_cast<double>(status.number("HugetlbPages").value_or(0));
  if (const std::optional<hugepage::statm_pages> statm = hugepage::read_statm()) {
    r.rss_mib = (static_cast<double>(statm->resident) *
                     static_cast<double>(hugepage::os::base_page_size()) +
                 hugetlb) /
                mib;
  }
  r.peak_rss_mib = (static_cast<double>(status.number("VmHWM").value_or(0)) + hugetlb) / mib;
  return r;
}

// Resets VmHWM, so that peak_rss_mib belongs to the container being built (Linux 4.0).
inline void reset_peak_rss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!::write(fd, "5", 1);
  ::close(fd);
}

// ---- counters -----------------------------------------------------------------------------------

// perf counters of the benchmark thread, opened once per thread.
inline hugepage::perf_counters& counters() {
  thread_local hugepage::perf_counters instance;
  return instance;
}

#if defined(HUGEPAGE_WITH_LIBPFM)
// Page-walk cycles, where libpfm4 knows a raw event for this CPU.
inline hugepage::pfm::raw_counter& walk_cycles() {
  thread_local hugepage::pfm::raw_counter instance(
      {"DTLB_LOAD_MISSES.WALK_ACTIVE", "DTLB_LOAD_MISSES.WALK_DURATION"});
  return instance;
}
#endif

// Sums readings over the timed windows of one benchmark run.
class perf_window {
 public:
  void start() noexcept {
#if defined(HUGEPAGE_WITH_LIBPFM)
    walk_cycles().start();
#endif
    counters().start();
  }
  void stop() noexcept {
    const hugepage::perf_reading r = counters().stop();
#if defined(HUGEPAGE_WITH_LIBPFM)
    if (const auto cycles = walk_cycles().stop()) walk_cycles_ = walk_cycles_.value_or(0) + *cycles;
#endif
    for (std::size_t i = 0; i < hugepage::perf_event_count; ++i) {
      if (r.values[i]) total_[i] = total_[i].value_or(0) + *r.values[i];
    }
  }
  std::optional<double> operator[](hugepage::perf_event e) const {
    return total_[static_cast<std::size_t>(e)];
  }

  // Adds the per-iteration counters that were counted; an uncounted one is left out, never 0.
  void report(benchmark::State& state) const {
    using hugepage::perf_event;
    const auto add = [&](const char* name, perf_event e) {
      if (const auto v = (*this)[e]) state.counters[name] = benchmark::Counter(*v, avg);
    };
    add("page_faults", perf_event::page_faults);
    add("page_walks_per_op", perf_event::dtlb_load_misses);
    add("dtlb_loads_per_op", perf_event::dtlb_loads);
    add("cycles_per_op", perf_event::cycles);
    add("instructions_per_op", perf_event::instructions);
    if (walk_cycles_) state.counters["walk_cycles_per_op"] = benchmark::Counter(*walk_cycles_, avg);
  }

 private:
  static constexpr auto avg = benchmark::Counter::kAvgIterations;
  std::array<std::optional<double>, hugepage::perf_event_count> total_{};
  std::optional<double> walk_cycles_;  // set only with libpfm and a known raw event
};

inline bool warned_inexact = false;

inline hugepage::backing_report backing_noted(const void* p, std::size_t bytes) {
  hugepage::backing_report r = hugepage::backing_of(p, bytes);
  if (!r.exact && !warned_inexact) {
    warned_inexact = true;
    fmt::print(stderr, "note: coverage is approximate ({}: {})\n", hugepage::name_of(r.source),
               r.note);
  }
  return r;
}

inline double coverage_pct(const void* p, std::size_t bytes) {
  return 100.0 * backing_noted(p, bytes).huge_fraction();
}

/// Share of the bytes `r` examined that is on 1 GiB pages, in percent (as huge_fraction()).
inline double on_1g_pct(const hugepage::backing_report& r) {
  return r.bytes == 0 ? 0.0
                      : 100.0 * static_cast<double>(r.hugetlb_1g) / static_cast<double>(r.bytes);
}

/// `coverage` < 0: unknown (no counter: the tables show "-").
inline void report_memory(benchmark::State& state, double coverage, std::size_t container_bytes) {
  const rss_figures rss = read_rss();
  if (coverage >= 0) state.counters["coverage_pct"] = coverage;
  state.counters["container_mib"] = static_cast<double>(container_bytes) / mib;
  state.counters["rss_mib"] = rss.rss_mib;
  state.counters["peak_rss_mib"] = rss.peak_rss_mib;
}

// ---- preconditions ------------------------------------------------------------------------------

// Why `bytes` for allocator `k` cannot be had now, or "" when it can.
inline std::string shortage(alloc_kind k, std::size_t bytes) {
  if (const auto size = pool_of(k)) {
    const std::size_t page = hugepage::bytes_of(*size);
    // The 1 GiB allocator takes 1 GiB pages for the head of a block only (its cascade puts the
    // rest, and blocks below 1 GiB, on 2 MiB pages, which never fail under its policy).
    const std::size_t on_own_pages = k == alloc_kind::hugetlb_1g
                                         ? hugetlb_1g_bytes::get_strategy().layout_of(bytes).head
                                         : bytes;
    const u64 pages = (on_own_pages + page - 1) / page;
    const auto pool = hugepage::read_pool(*size);
    const u64 available = pool ? pool->available().value_or(0) : 0;
    if (available >= pages) return {};
    return fmt::format("hugetlb pool of {} too small: needs {} pages, {} available (total {})",
                       hugepage::name_of(*size), pages, available,
                       pool ? pool->total.value_or(0) : 0);
  }
  const std::size_t available = mem_available();
  const std::size_t margin = 256 * mib;
  if (available >= bytes + margin) return {};
  return fmt::format("not enough free memory: needs {} MiB (+256 MiB margin), MemAvailable {} MiB",
                     bytes / mib, available / mib);
}

// ---- one cached container -----------------------------------------------------------------------

// Containers are built once and reused across the runs and repetitions of the rows that share
// them (Lookup and LookupMiss share a map; Gather and Chase a vector). Exactly one is kept: the
// next one, or a suite that needs its own memory, frees it first, so memory stays bounded by one
// working set (the hugetlb pools included). Rows are registered so that sharers are neighbours;
// with --benchmark_enable_random_interleaving containers are rebuilt (outside the timed region).
struct cached_container {
  std::string key;
  std::shared_ptr<void> object;
  const void* block = nullptr;  // the container's storage
  std::size_t block_bytes = 0;
  u64 elements = 0;
  double coverage = 0;
  double on_1g = 0;  // share of the block on 1 GiB pages, percent
  std::chrono::steady_clock::time_point coverage_at;
};
inline cached_container cache;

inline void drop_cache() {
  cache = cached_container{};
  largest_block = {};
}

// Returns the refreshed coverage of the cached container (recomputed at most once a second).
inline double cached_coverage() {
  const auto now = std::chrono::steady_clock::now();
  if (now - cache.coverage_at > std::chrono::seconds(1)) {
    const hugepage::backing_report r = backing_noted(cache.block, cache.block_bytes);
    cache.coverage = 100.0 * r.huge_fraction();
    cache.on_1g = on_1g_pct(r);
    cache.coverage_at = std::chrono::steady_clock::now();
  }
  return cache.coverage;
}

/// Reports the cached container's block (report_memory, with its refreshed coverage) and, for the
/// 1 GiB allocator's rows, which page sizes served it (on_1g_pct: its cascade puts blocks below
/// 1 GiB and the tails of larger ones on 2 MiB pages).
inline void report_cached_block(benchmark::State& state, alloc_kind k) {
  report_memory(state, cached_coverage(), cache.block_bytes);
  if (k == alloc_kind::hugetlb_1g) state.counters["on_1g_pct"] = cache.on_1g;
}

}  // namespace hugepage_bench
