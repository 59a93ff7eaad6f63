// tools/common/tlb_probe.hpp - the measuring core of hugepage-doctor --probe, shared with the
// benchmark's machine header: what huge pages save a dependent random-access workload. Code of
// the tools, over the library's public API: not part of the library, and not installed.
//
// One random cyclic permutation of a working set's 64-byte lines (Sattolo's algorithm: a single
// cycle, so the chase visits every line) is written as pointers into two buffers: one on base
// pages (MADV_NOHUGEPAGE), one on huge pages (the collapse strategy: MADV_HUGEPAGE, populate,
// MADV_COLLAPSE). Each load depends on the previous one, so the time per access is the latency of
// a cache miss plus, when the page is not in the TLB, a page walk; the ratio of the two is what
// huge pages remove. backing_of() says what each buffer was really on.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/os.hpp"
#include "hugepage/perf_counters.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage::tools {

inline constexpr std::size_t probe_line_bytes = 64;

/// xorshift64*: fast, good enough to shuffle; fixed seed so runs are comparable.
struct probe_random_bits {
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  std::uint64_t operator()() noexcept {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dULL;
  }
};

/// next[i]: the line visited after line i, one cycle through all `lines`.
inline std::vector<std::uint32_t> random_cycle(std::size_t lines) {
  std::vector<std::uint32_t> next(lines);
  for (std::size_t i = 0; i < lines; ++i) next[i] = static_cast<std::uint32_t>(i);
  probe_random_bits rng;
  for (std::size_t i = lines > 0 ? lines - 1 : 0; i > 0; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % i);  // j < i: Sattolo, one cycle
    std::swap(next[i], next[j]);
  }
  return next;
}

inline void write_cycle(unsigned char* buffer, const std::vector<std::uint32_t>& next) {
  for (std::size_t i = 0; i < next.size(); ++i) {
    *reinterpret_cast<void**>(buffer + i * probe_line_bytes) = buffer + next[i] * probe_line_bytes;
  }
}

struct chase_result {
  double ns = 0;                ///< per dependent load
  std::optional<double> walks;  ///< dTLB load misses per load, where a PMU counts them
};

/// Follows the cycle written into `buffer` for `steps` dependent loads (after a warm-up).
inline chase_result chase(unsigned char* buffer, std::size_t lines, std::uint64_t steps,
                          perf_counters& counters) {
  void* p = buffer;
  const std::uint64_t warm = std::min<std::uint64_t>(lines, 1u << 18);
  for (std::uint64_t i = 0; i < warm; ++i) p = *static_cast<void**>(p);
  counters.start();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < steps; ++i) p = *static_cast<void**>(p);
  const auto t1 = std::chrono::steady_clock::now();
  const perf_reading reading = counters.stop();
  asm volatile("" : : "r"(p) : "memory");  // keep the chain alive
  chase_result r;
  r.ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(steps);
  if (const auto misses = reading[perf_event::dtlb_load_misses]) {
    r.walks = *misses / static_cast<double>(steps);
  }
  return r;
}

/// One working set chased on base pages, then on huge pages.
struct chase_pair {
  chase_result base, huge;
  double base_huge_fraction = 0;  ///< backing_of coverage of the base-page buffer
  double huge_huge_fraction = 0;  ///< ... of the huge-page buffer
  double ratio() const noexcept { return huge.ns > 0 ? base.ns / huge.ns : 0.0; }
};

/// Chases a random cycle over `bytes` (a multiple of the THP size, at most 2^32 lines) on base
/// pages and on huge pages, `steps` loads each. Sets `map_error` (and returns nothing measured)
/// when the base buffer cannot be mapped; throws what the collapse strategy throws when the huge
/// one cannot be had.
inline chase_pair chase_base_and_huge(std::size_t bytes, std::uint64_t steps,
                                      perf_counters& counters, std::error_code& map_error) {
  const std::size_t align = thp_page_bytes();
  const std::size_t lines = bytes / probe_line_bytes;
  const std::vector<std::uint32_t> next = random_cycle(lines);
  chase_pair out;
  void* base = os::map_aligned(bytes, align, map_error);
  if (base == nullptr) return out;
  os::advise(base, bytes, MADV_NOHUGEPAGE);
  write_cycle(static_cast<unsigned char*>(base), next);
  out.base_huge_fraction = backing_of(base, bytes).huge_fraction();
  out.base = chase(static_cast<unsigned char*>(base), lines, steps, counters);
  os::unmap(base, bytes);

  const strategy huge = strategy::collapse();
  void* h = huge.allocate(bytes, probe_line_bytes);
  write_cycle(static_cast<unsigned char*>(h), next);
  out.huge_huge_fraction = backing_of(h, bytes).huge_fraction();
  out.huge = chase(static_cast<unsigned char*>(h), lines, steps, counters);
  huge.deallocate(h, bytes, probe_line_bytes);
  return out;
}

}  // namespace hugepage::tools
