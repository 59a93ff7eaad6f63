// hugepage_bench - what huge pages buy big containers, per allocator and working set.
//
// Rows are named BM_<Suite>/<allocator>/<working_set_bytes> (a runner parses this), e.g.
// BM_FlatHashMap_Lookup/thp/1073741824. Allocators: std, thp, hugetlb_2m, hugetlb_1g, collapse,
// and thp_prefault (BM_FaultIn only). Suites:
//   FlatHashMap_Lookup, FlatHashMap_LookupMiss  absl::flat_hash_map<u64,u64> random hits / misses;
//                                               one iteration = one lookup
//   Vector_Gather   independent random loads from a vector<u64> (throughput); one iteration = one
//   load Vector_Chase    dependent loads over a random cyclic permutation of its cache lines
//   (latency) FlatHashMap_Build  reserve + try_emplace of N keys; one iteration = one build FaultIn
//   allocate + first touch of the working set (bytes_per_second); one iteration Bloat_Sparse    one
//   live 64-byte object per 2 MiB: resident bytes vs live bytes
// Counters per row: page_faults (per iteration), page_walks_per_op / dtlb_loads_per_op /
// cycles_per_op / instructions_per_op only where the PMU counts them, coverage_pct (huge-page
// share of the container, from hugepage::backing_of), container_mib, rss_mib and peak_rss_mib.
//
// Flags of our own (removed before google-benchmark sees argv): --quick, --sizes=4M,64M,1G,
// --allocators=std,thp,..., --suites=FlatHashMap_Lookup,..., --cpu=N. Everything else goes to
// google-benchmark (--benchmark_repetitions, --benchmark_format=json, --benchmark_out, ...).
#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

namespace {

using u64 = std::uint64_t;
constexpr std::size_t kib = std::size_t{1} << 10;
constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;

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
block_record largest_block;

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

enum class alloc_kind { std_alloc, thp, hugetlb_2m, hugetlb_1g, collapse, thp_prefault };
constexpr alloc_kind all_kinds[] = {alloc_kind::std_alloc,  alloc_kind::thp,
                                    alloc_kind::hugetlb_2m, alloc_kind::hugetlb_1g,
                                    alloc_kind::collapse,   alloc_kind::thp_prefault};

const char* token_of(alloc_kind k) {
  switch (k) {
    case alloc_kind::std_alloc: return "std";
    case alloc_kind::thp: return "thp";
    case alloc_kind::hugetlb_2m: return "hugetlb_2m";
    case alloc_kind::hugetlb_1g: return "hugetlb_1g";
    case alloc_kind::collapse: return "collapse";
    case alloc_kind::thp_prefault: return "thp_prefault";
  }
  return "?";
}

using byte = unsigned char;
using std_bytes = std::allocator<byte>;
using thp_bytes = hugepage::thp_allocator<byte>;
using hugetlb_2m_bytes = hugepage::huge_page_allocator<byte, hugepage::page_size::huge_2m>;
// The library serves requests below one page of the strategy (1 GiB here) from ::operator new;
// the bench maps from 2 MiB up, so that every hugetlb_1g row really is on a 1 GiB page.
struct from_2m_options : hugepage::default_options {
  static constexpr std::size_t small_threshold = std::size_t{2} << 20;
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

std::optional<hugepage::page_size> pool_of(alloc_kind k) {
  if (k == alloc_kind::hugetlb_2m) return hugepage::page_size::huge_2m;
  if (k == alloc_kind::hugetlb_1g) return hugepage::page_size::huge_1g;
  return std::nullopt;
}

// ---- /proc readers
// -------------------------------------------------------------------------------

std::string read_text(const char* path) {
  std::error_code ec;
  return hugepage::detail::read_file(path, ec);
}

// A "Key:   N kB" field of a /proc file, in bytes; nullopt when absent.
std::optional<std::size_t> kb_field(const std::string& text, const char* key) {
  const std::string needle = std::string(key) + ":";
  std::size_t at = text.rfind("\n" + needle);
  at = at == std::string::npos ? (text.compare(0, needle.size(), needle) == 0 ? 0 : at) : at + 1;
  if (at == std::string::npos) return std::nullopt;
  const auto value = hugepage::detail::parse_u64(std::string_view(text).substr(at + needle.size()));
  if (!value) return std::nullopt;
  return static_cast<std::size_t>(*value) * kib;
}

std::size_t mem_available() {
  return kb_field(read_text("/proc/meminfo"), "MemAvailable").value_or(0);
}

struct rss_figures {
  double rss_mib = 0, peak_rss_mib = 0;
};

// RSS plus this process's hugetlb pages, which the kernel leaves out of RSS (statm, VmRSS).
rss_figures read_rss() {
  const std::string status = read_text("/proc/self/status");
  const std::string statm = read_text("/proc/self/statm");
  unsigned long size = 0, resident = 0;
  rss_figures r;
  const double hugetlb = static_cast<double>(kb_field(status, "HugetlbPages").value_or(0));
  if (std::sscanf(statm.c_str(), "%lu %lu", &size, &resident) == 2) {
    r.rss_mib =
        (static_cast<double>(resident) * static_cast<double>(hugepage::os::base_page_size()) +
         hugetlb) /
        mib;
  }
  r.peak_rss_mib = (static_cast<double>(kb_field(status, "VmHWM").value_or(0)) + hugetlb) / mib;
  return r;
}

// Resets VmHWM, so that peak_rss_mib belongs to the container being built (Linux 4.0).
void reset_peak_rss() {
  const hugepage::detail::unique_fd fd(::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC));
  if (fd) (void)!::write(fd.get(), "5", 1);
}

// ---- counters
// ------------------------------------------------------------------------------------

// perf counters of the benchmark thread, opened once per thread.
hugepage::perf_counters& counters() {
  thread_local hugepage::perf_counters instance;
  return instance;
}

#if defined(HUGEPAGE_WITH_LIBPFM)
// Page-walk cycles, where libpfm4 knows a raw event for this CPU.
hugepage::pfm::raw_counter& walk_cycles() {
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

bool warned_inexact = false;

double coverage_pct(const void* p, std::size_t bytes) {
  const hugepage::backing_report r = hugepage::backing_of(p, bytes);
  if (!r.exact && !warned_inexact) {
    warned_inexact = true;
    fmt::print(stderr, "note: coverage is approximate ({}: {})\n", hugepage::name_of(r.source),
               r.note);
  }
  return 100.0 * r.huge_fraction();
}

void report_memory(benchmark::State& state, double coverage, std::size_t container_bytes) {
  const rss_figures rss = read_rss();
  state.counters["coverage_pct"] = coverage;
  state.counters["container_mib"] = static_cast<double>(container_bytes) / mib;
  state.counters["rss_mib"] = rss.rss_mib;
  state.counters["peak_rss_mib"] = rss.peak_rss_mib;
}

// ---- preconditions
// -------------------------------------------------------------------------------

// Why `bytes` for allocator `k` cannot be had now, or "" when it can.
std::string shortage(alloc_kind k, std::size_t bytes) {
  if (const auto size = pool_of(k)) {
    const std::size_t page = hugepage::bytes_of(*size);
    const u64 pages = (bytes + page - 1) / page;
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

// ---- one cached container
// ------------------------------------------------------------------------

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
  std::chrono::steady_clock::time_point coverage_at;
};
cached_container cache;

void drop_cache() {
  cache = cached_container{};
  largest_block = {};
}

// Returns the refreshed coverage of the cached container (recomputed at most once a second).
double cached_coverage() {
  const auto now = std::chrono::steady_clock::now();
  if (now - cache.coverage_at > std::chrono::seconds(1)) {
    cache.coverage = coverage_pct(cache.block, cache.block_bytes);
    cache.coverage_at = std::chrono::steady_clock::now();
  }
  return cache.coverage;
}

// Capacity and element count of a flat_hash_map whose slot array is `working_set` bytes: capacity
// 2^k - 1, filled to absl's maximum load (7/8) so that reserve() allocates exactly once.
struct map_shape {
  std::size_t capacity;
  u64 elements;
};
map_shape shape_of_map(std::size_t working_set) {
  std::size_t slots = 16;
  while (slots * 2 * sizeof(std::pair<u64, u64>) <= working_set) slots *= 2;
  const std::size_t capacity = slots - 1;
  return {capacity, capacity - capacity / 8};
}
std::size_t map_bytes(std::size_t working_set) {
  const map_shape s = shape_of_map(working_set);
  return (s.capacity + 1) * (sizeof(std::pair<u64, u64>) + 1) + 64;
}

template <class Inner>
map_type<Inner>* get_map(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  const std::string key = fmt::format("map/{}/{}", token_of(k), working_set);
  if (cache.key == key) return static_cast<map_type<Inner>*>(cache.object.get());
  drop_cache();
  if (const std::string why = shortage(k, map_bytes(working_set)); !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  reset_peak_rss();
  const map_shape shape = shape_of_map(working_set);
  try {
    auto map = std::make_shared<map_type<Inner>>();
    map->reserve(shape.elements);
    for (u64 i = 0; i < shape.elements; ++i) map->try_emplace(key_of(i), i);
    cache.key = key;
    cache.block = largest_block.p;
    cache.block_bytes = largest_block.bytes;
    cache.elements = shape.elements;
    cache.object = std::move(map);
  } catch (const std::exception& e) {
    drop_cache();
    state.SkipWithError(fmt::format("building the map failed: {}", e.what()).c_str());
    return nullptr;
  }
  return static_cast<map_type<Inner>*>(cache.object.get());
}

// A vector<u64> of `working_set` bytes whose cache lines form one random cycle: the first word of
// line i holds the index of the first word of the next line (Sattolo's algorithm).
template <class Inner>
vector_type<Inner>* get_vector(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  const std::string key = fmt::format("vector/{}/{}", token_of(k), working_set);
  if (cache.key == key) return static_cast<vector_type<Inner>*>(cache.object.get());
  drop_cache();
  constexpr std::size_t words_per_line = 64 / sizeof(u64);
  const std::size_t lines = working_set / 64;
  // The permutation is a temporary of 4 bytes per line on the standard heap.
  if (const std::string why = shortage(k, working_set); !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  if (const std::string why = shortage(alloc_kind::std_alloc, lines * sizeof(std::uint32_t));
      !why.empty()) {
    state.SkipWithError(why.c_str());
    return nullptr;
  }
  reset_peak_rss();
  try {
    auto v = std::make_shared<vector_type<Inner>>(lines * words_per_line);
    {
      std::vector<std::uint32_t> next(lines);
      for (std::size_t i = 0; i < lines; ++i) next[i] = static_cast<std::uint32_t>(i);
      u64 counter = 0x9e3779b97f4a7c15ULL;
      for (std::size_t i = lines - 1; i > 0; --i) {  // Sattolo: one cycle through every line
        const std::size_t j = static_cast<std::size_t>(index_of(counter++, i));
        std::swap(next[i], next[j]);
      }
      for (std::size_t i = 0; i < lines; ++i) {
        (*v)[i * words_per_line] = u64{next[i]} * words_per_line;
      }
    }
    cache.key = key;
    cache.block = v->data();
    cache.block_bytes = v->size() * sizeof(u64);
    cache.elements = v->size();
    cache.object = std::move(v);
  } catch (const std::exception& e) {
    drop_cache();
    state.SkipWithError(fmt::format("building the vector failed: {}", e.what()).c_str());
    return nullptr;
  }
  return static_cast<vector_type<Inner>*>(cache.object.get());
}

// ---- suites
// --------------------------------------------------------------------------------------

template <class Inner, bool Hit>
void flat_hash_map_lookup(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  map_type<Inner>* map = get_map<Inner>(state, k, working_set);
  if (map == nullptr) return;
  const u64 n = cache.elements;
  u64 counter = 0, found = 0;
  perf_window perf;
  perf.start();
  for (auto _ : state) {
    // Hits: the key of a random inserted index. Misses: keys of indices past the inserted ones,
    // which the bijective mixer keeps distinct from every inserted key.
    const u64 i = index_of(counter++, n);
    if constexpr (Hit) {
      const auto it = map->find(key_of(i));
      found += it != map->end() ? it->second : 0;
    } else {
      found += map->contains(key_of(n + i)) ? 1 : 0;
    }
  }
  perf.stop();
  benchmark::DoNotOptimize(found);
  if (Hit ? found == 0 && n > 1 && state.iterations() > 8 : found != 0) {
    state.SkipWithError("lookups returned wrong results");
    return;
  }
  perf.report(state);
  report_memory(state, cached_coverage(), cache.block_bytes);
}

template <class Inner>
void vector_gather(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  vector_type<Inner>* v = get_vector<Inner>(state, k, working_set);
  if (v == nullptr) return;
  const u64* data = v->data();
  const u64 n = v->size();
  u64 counter = 0, sum = 0;
  perf_window perf;
  perf.start();
  for (auto _ : state) sum += data[index_of(counter++, n)];
  perf.stop();
  benchmark::DoNotOptimize(sum);
  perf.report(state);
  report_memory(state, cached_coverage(), cache.block_bytes);
}

template <class Inner>
void vector_chase(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  vector_type<Inner>* v = get_vector<Inner>(state, k, working_set);
  if (v == nullptr) return;
  const u64* data = v->data();
  u64 at = 0;
  perf_window perf;
  perf.start();
  for (auto _ : state) at = data[at];  // each load's address is the previous load's value
  perf.stop();
  benchmark::DoNotOptimize(at);
  perf.report(state);
  report_memory(state, cached_coverage(), cache.block_bytes);
}

template <class Inner>
void flat_hash_map_build(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  if (const std::string why = shortage(k, map_bytes(working_set)); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  reset_peak_rss();
  const map_shape shape = shape_of_map(working_set);
  std::optional<map_type<Inner>> map;
  double coverage = -1;
  std::size_t bytes = 0;
  perf_window perf;
  for (auto _ : state) {
    perf.start();
    try {
      map.emplace();
      map->reserve(shape.elements);
      for (u64 i = 0; i < shape.elements; ++i) map->try_emplace(key_of(i), i);
    } catch (const std::exception& e) {
      perf.stop();
      map.reset();
      state.SkipWithError(fmt::format("build failed: {}", e.what()).c_str());
      break;
    }
    perf.stop();
    state.PauseTiming();
    if (coverage < 0) {
      bytes = largest_block.bytes;
      coverage = coverage_pct(largest_block.p, largest_block.bytes);
      report_memory(state, coverage, bytes);
    }
    map.reset();
    state.ResumeTiming();
  }
  if (state.error_occurred()) return;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(shape.elements));
  perf.report(state);
}

template <class Inner>
void fault_in(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  if (const std::string why = shortage(k, working_set); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  reset_peak_rss();
  Inner alloc;
  const std::size_t page = hugepage::os::base_page_size();
  double coverage = -1;
  perf_window perf;
  for (auto _ : state) {
    perf.start();
    byte* p = nullptr;
    try {
      p = alloc.allocate(working_set);
    } catch (const std::exception& e) {
      perf.stop();
      state.SkipWithError(fmt::format("allocate failed: {}", e.what()).c_str());
      break;
    }
    for (std::size_t at = 0; at < working_set; at += page) p[at] = 1;  // first touch
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
    perf.stop();
    state.PauseTiming();
    if (coverage < 0) {
      coverage = coverage_pct(p, working_set);
      report_memory(state, coverage, working_set);
    }
    alloc.deallocate(p, working_set);
    state.ResumeTiming();
  }
  if (state.error_occurred()) return;
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(working_set));
  perf.report(state);
}

// The other side of the trade: sparse live data. One 64-byte object per 2 MiB pins a whole huge
// page under THP or hugetlb, and one base page under 4 KiB pages.
template <class Inner>
void bloat_sparse(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  drop_cache();
  if (const std::string why = shortage(k, working_set); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  reset_peak_rss();
  Inner alloc;
  constexpr std::size_t stride = 2 * mib, object = 64;
  const std::size_t objects = (working_set + stride - 1) / stride;
  bool reported = false;
  perf_window perf;
  for (auto _ : state) {
    perf.start();
    byte* p = nullptr;
    try {
      p = alloc.allocate(working_set);
    } catch (const std::exception& e) {
      perf.stop();
      state.SkipWithError(fmt::format("allocate failed: {}", e.what()).c_str());
      break;
    }
    for (std::size_t at = 0; at < working_set; at += stride) std::memset(p + at, 1, object);
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
    perf.stop();
    state.PauseTiming();
    if (!reported) {
      reported = true;
      const hugepage::backing_report r = hugepage::backing_of(p, working_set);
      const double live = static_cast<double>(objects * object);
      const double resident = static_cast<double>(r.resident_bytes());
      state.counters["live_kib"] = live / kib;
      state.counters["resident_mib"] = resident / mib;
      state.counters["bloat_x"] = resident / live;
      report_memory(state, 100.0 * r.huge_fraction(), working_set);
    }
    alloc.deallocate(p, working_set);
    state.ResumeTiming();
  }
  if (state.error_occurred()) return;
  perf.report(state);
}

// ---- registration
// --------------------------------------------------------------------------------

enum class suite {
  flat_hash_map_lookup,
  flat_hash_map_lookup_miss,
  vector_gather,
  vector_chase,
  flat_hash_map_build,
  fault_in,
  bloat_sparse
};
constexpr suite all_suites[] = {suite::flat_hash_map_lookup, suite::flat_hash_map_lookup_miss,
                                suite::vector_gather,        suite::vector_chase,
                                suite::flat_hash_map_build,  suite::fault_in,
                                suite::bloat_sparse};

const char* name_of(suite s) {
  switch (s) {
    case suite::flat_hash_map_lookup: return "FlatHashMap_Lookup";
    case suite::flat_hash_map_lookup_miss: return "FlatHashMap_LookupMiss";
    case suite::vector_gather: return "Vector_Gather";
    case suite::vector_chase: return "Vector_Chase";
    case suite::flat_hash_map_build: return "FlatHashMap_Build";
    case suite::fault_in: return "FaultIn";
    case suite::bloat_sparse: return "Bloat_Sparse";
  }
  return "?";
}

using bench_fn = void (*)(benchmark::State&, alloc_kind, std::size_t);

template <class Inner>
bench_fn function_of(suite s) {
  switch (s) {
    case suite::flat_hash_map_lookup: return &flat_hash_map_lookup<Inner, true>;
    case suite::flat_hash_map_lookup_miss: return &flat_hash_map_lookup<Inner, false>;
    case suite::vector_gather: return &vector_gather<Inner>;
    case suite::vector_chase: return &vector_chase<Inner>;
    case suite::flat_hash_map_build: return &flat_hash_map_build<Inner>;
    case suite::fault_in: return &fault_in<Inner>;
    case suite::bloat_sparse: return &bloat_sparse<Inner>;
  }
  return nullptr;
}

bench_fn function_of(alloc_kind k, suite s) {
  switch (k) {
    case alloc_kind::std_alloc: return function_of<std_bytes>(s);
    case alloc_kind::thp: return function_of<thp_bytes>(s);
    case alloc_kind::hugetlb_2m: return function_of<hugetlb_2m_bytes>(s);
    case alloc_kind::hugetlb_1g: return function_of<hugetlb_1g_bytes>(s);
    case alloc_kind::collapse: return function_of<collapse_bytes>(s);
    case alloc_kind::thp_prefault: return function_of<thp_prefault_bytes>(s);
  }
  return nullptr;
}

// thp_prefault exists to compare pre-faulting with first-touch faulting: FaultIn only.
bool applies(alloc_kind k, suite s) {
  return k != alloc_kind::thp_prefault || s == suite::fault_in;
}

// ---- flags
// ---------------------------------------------------------------------------------------

struct options {
  bool quick = false;
  std::vector<std::size_t> sizes;  // empty: the defaults
  bool sizes_given = false;
  std::vector<alloc_kind> allocators;
  std::vector<suite> suites;
  std::optional<int> cpu;
};

[[noreturn]] void usage_error(const std::string& message) {
  fmt::print(stderr, "hugepage_bench: {}\n", message);
  std::exit(2);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

std::size_t parse_size(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  std::size_t unit = 1;
  const std::string suffix = end;
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    unit = kib;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    unit = mib;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    unit = gib;
  else if (!suffix.empty())
    usage_error("bad size '" + text + "' (use 4M, 256M, 1G or bytes)");
  if (end == text.c_str() || value <= 0) usage_error("bad size '" + text + "'");
  return static_cast<std::size_t>(value * static_cast<double>(unit));
}

options parse_flags(int& argc, char** argv) {
  options o;
  int out = 1;
  const auto value_of = [](const char* arg, const char* flag) -> const char* {
    const std::size_t n = std::strlen(flag);
    return std::strncmp(arg, flag, n) == 0 && arg[n] == '=' ? arg + n + 1 : nullptr;
  };
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--quick") == 0) {
      o.quick = true;
    } else if (const char* sizes = value_of(arg, "--sizes")) {
      o.sizes_given = true;
      for (const std::string& s : split(sizes)) o.sizes.push_back(parse_size(s));
    } else if (const char* allocators = value_of(arg, "--allocators")) {
      for (const std::string& a : split(allocators)) {
        const auto* k = std::find_if(std::begin(all_kinds), std::end(all_kinds),
                                     [&](alloc_kind c) { return a == token_of(c); });
        if (k == std::end(all_kinds)) {
          usage_error("unknown allocator '" + a +
                      "' (std, thp, hugetlb_2m, hugetlb_1g, collapse, thp_prefault)");
        }
        o.allocators.push_back(*k);
      }
    } else if (const char* suites = value_of(arg, "--suites")) {
      for (std::string s : split(suites)) {
        if (s.rfind("BM_", 0) == 0) s = s.substr(3);
        const auto* found = std::find_if(std::begin(all_suites), std::end(all_suites),
                                         [&](suite c) { return s == name_of(c); });
        if (found == std::end(all_suites)) usage_error("unknown suite '" + s + "'");
        o.suites.push_back(*found);
      }
    } else if (const char* cpu = value_of(arg, "--cpu")) {
      o.cpu = std::atoi(cpu);
    } else {
      argv[out++] = argv[i];
      continue;
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return o;
}

// ---- context
// -------------------------------------------------------------------------------------

std::string cpu_model() {
  const std::string text = read_text("/proc/cpuinfo");
  const auto at = text.find("model name");
  if (at == std::string::npos) return "unknown";
  const auto colon = text.find(':', at);
  const auto end = text.find('\n', colon);
  return text.substr(colon + 2, end - colon - 2);
}

std::string describe_pools() {
  std::string text;
  for (const std::size_t bytes : hugepage::pool_page_sizes()) {
    const auto pool = hugepage::read_pool(bytes);
    if (!pool) continue;
    if (!text.empty()) text += "; ";
    text += fmt::format(
        "{}: total {}, free {}, available {}",
        bytes >= gib ? fmt::format("{} GiB", bytes / gib) : fmt::format("{} MiB", bytes / mib),
        pool->total.value_or(0), pool->free.value_or(0), pool->available().value_or(0));
  }
  return text.empty() ? "none" : text;
}

// "a, b: reason; c: other reason" for the counters that cannot be read; "" when all can.
std::string describe_counters() {
  std::vector<std::pair<std::string, std::string>> groups;  // reason, events
  for (std::size_t i = 0; i < hugepage::perf_event_count; ++i) {
    const auto e = static_cast<hugepage::perf_event>(i);
    if (counters().available(e)) continue;
    const std::string& reason = counters().unavailable_reason(e);
    const auto it = std::find_if(groups.begin(), groups.end(),
                                 [&](const auto& g) { return g.first == reason; });
    if (it == groups.end()) {
      groups.emplace_back(reason, hugepage::short_name_of(e));
    } else {
      it->second += std::string(", ") + hugepage::short_name_of(e);
    }
  }
  std::string text;
  for (const auto& [reason, events] : groups) {
    text += fmt::format("{}{}: {}", text.empty() ? "" : "; ", events, reason);
  }
  return text;
}

std::string size_token(std::size_t bytes) {
  if (bytes % gib == 0) return fmt::format("{}G", bytes / gib);
  if (bytes % mib == 0) return fmt::format("{}M", bytes / mib);
  return fmt::format("{}", bytes);
}

// The console reporter prints the custom context itself; other formats only store it.
bool print_context = false;

void add_context(const std::string& key, const std::string& value) {
  if (print_context) fmt::print(stderr, "{:<22} {}\n", key + ":", value);
  benchmark::AddCustomContext(key, value);
}

}  // namespace

int main(int argc, char** argv) {
  options o = parse_flags(argc, argv);

  if (o.cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(*o.cpu, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
      usage_error(fmt::format("cannot pin to CPU {}: {}", *o.cpu, std::strerror(errno)));
    }
  }

  // google-benchmark's own flags: --quick shortens min_time unless the caller sets it later.
  std::vector<char*> args(argv, argv + argc);
  std::string quick_min_time = "--benchmark_min_time=0.1";
  if (o.quick) args.insert(args.begin() + 1, quick_min_time.data());
  args.push_back(nullptr);
  int bench_argc = static_cast<int>(args.size()) - 1;

  // What to run.
  if (o.suites.empty()) {
    if (o.quick) {
      o.suites = {suite::flat_hash_map_lookup, suite::vector_chase};
    } else {
      o.suites.assign(std::begin(all_suites), std::end(all_suites));
    }
  }
  if (o.allocators.empty()) o.allocators.assign(std::begin(all_kinds), std::end(all_kinds));
  if (!o.sizes_given) {
    o.sizes = o.quick ? std::vector<std::size_t>{4 * mib, 64 * mib, 256 * mib}
                      : std::vector<std::size_t>{4 * mib, 16 * mib, 64 * mib, 256 * mib, gib};
  }

  std::vector<std::string> skipped;
  const std::size_t available = mem_available();
  std::vector<std::size_t> sizes;
  for (const std::size_t size : o.sizes) {
    // A row needs its container (a map is ~1.06x its working set) plus temporaries: ask for
    // 1.25x and a 512 MiB margin, so the run never pushes the machine into reclaim.
    const std::size_t need = size + size / 4 + 512 * mib;
    if (need > available) {
      skipped.push_back(fmt::format("size {} (needs ~{} MiB, MemAvailable {} MiB)",
                                    size_token(size), need / mib, available / mib));
    } else {
      sizes.push_back(size);
    }
  }
  std::vector<alloc_kind> allocators;
  for (const alloc_kind k : o.allocators) {
    if (k == alloc_kind::hugetlb_1g) {
      const auto pool = hugepage::read_pool(hugepage::page_size::huge_1g);
      const u64 free_pages = pool ? pool->available().value_or(0) : 0;
      if (free_pages == 0) {
        skipped.push_back(pool ? "hugetlb_1g (no 1 GiB page available in the pool)"
                               : "hugetlb_1g (this kernel/CPU has no 1 GiB hugetlb pool)");
        continue;
      }
    }
    allocators.push_back(k);
  }

  // Context, printed once at the top (stderr, so JSON on stdout stays clean) and stored in JSON.
  const hugepage::system_state sys = hugepage::read_system_state(/*probe=*/true);
  for (int i = 1; i < bench_argc; ++i) {
    const char* format = "--benchmark_format=";
    if (std::strncmp(args[i], format, std::strlen(format)) == 0) {
      print_context = std::strcmp(args[i] + std::strlen(format), "console") != 0;
    }
  }
  add_context("cpu_model", cpu_model());
  add_context("kernel", sys.kernel_release);
  add_context("thp_enabled", sys.thp.enabled.value_or("unreadable"));
  add_context("thp_defrag", sys.thp.defrag.value_or("unreadable"));
  add_context("madv_collapse", hugepage::name_of(sys.collapse));
  add_context("hugetlb_pools", describe_pools());
  add_context("mem_available_mib", std::to_string(available / mib));
  const std::string unavailable = describe_counters();
  add_context("counters_unavailable", unavailable.empty() ? "none" : unavailable);
  if (counters().kernel_excluded()) add_context("counters_scope", "user space only (paranoid)");
#if defined(HUGEPAGE_WITH_LIBPFM)
  add_context("walk_cycles_event", walk_cycles().available()
                                       ? walk_cycles().name()
                                       : "unavailable: " + walk_cycles().unavailable_reason());
#else
  add_context("walk_cycles_event", "not built (configure with -DHUGEPAGE_WITH_LIBPFM=ON)");
#endif
  for (const char* name : {"LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES"}) {
    if (const char* value = std::getenv(name)) add_context(name, value);
  }
  for (char** env = environ; *env != nullptr; ++env) {
    if (std::strncmp(*env, "MIMALLOC_", 9) != 0) continue;
    const char* eq = std::strchr(*env, '=');
    if (eq != nullptr) add_context(std::string(*env, static_cast<std::size_t>(eq - *env)), eq + 1);
  }
  if (o.cpu) add_context("cpu_pinned", std::to_string(*o.cpu));
  // glibc raises its mmap threshold (up to 32 MiB) each time a mapped block is freed, after which
  // a freed 4-16 MiB block is reused from the heap, already faulted in: FaultIn and Bloat_Sparse
  // would then measure reuse, not first touch. A fixed threshold keeps every std block a fresh
  // mapping. (A preloaded allocator ignores this; its page_faults column shows what it did.)
  const bool fresh_blocks = std::any_of(o.suites.begin(), o.suites.end(), [](suite s) {
    return s == suite::fault_in || s == suite::bloat_sparse;
  });
  if (fresh_blocks && ::mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1) {
    add_context("glibc_mmap_threshold", "fixed at 128 KiB (FaultIn/Bloat_Sparse selected)");
  }
  std::string skipped_text;
  for (const std::string& s : skipped) skipped_text += (skipped_text.empty() ? "" : "; ") + s;
  add_context("skipped", skipped_text.empty() ? "none" : skipped_text);
  for (const std::string& s : skipped) fmt::print(stderr, "hugepage_bench: skipping {}\n", s);

  // Size-major, then allocator, then suite: rows that share a cached container are neighbours.
  for (const std::size_t size : sizes) {
    for (const alloc_kind k : allocators) {
      for (const suite s : o.suites) {
        if (!applies(k, s)) continue;
        const bench_fn fn = function_of(k, s);
        const std::string name = fmt::format("BM_{}/{}/{}", name_of(s), token_of(k), size);
        auto* b = benchmark::RegisterBenchmark(
            name.c_str(), [fn, k, size](benchmark::State& state) { fn(state, k, size); });
        b->Unit(s == suite::flat_hash_map_build || s == suite::fault_in || s == suite::bloat_sparse
                    ? benchmark::kMillisecond
                    : benchmark::kNanosecond);
        if (s == suite::flat_hash_map_build || s == suite::fault_in || s == suite::bloat_sparse) {
          b->UseRealTime();
        }
      }
    }
  }

  benchmark::Initialize(&bench_argc, args.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  drop_cache();
  return 0;
}
