// introspection_bench - what exact coverage and budgeted collapse cost.
//
// Rows:
//   BM_BackingOf_Source/<source>/<layout>/<MiB>  one backing_of() of a THP-advised, populated range
//       from one source (0 pagemap_scan, 1 kpageflags, 2 smaps); layout 0: fully huge, 1: half
//       split (every other huge page mapped by PTEs, same VMA). Counters: gib_per_s (GiB of range
//       examined per second of real time; time per GiB is its inverse), huge_pct (what the
//       source reported). kpageflags needs root: skipped otherwise.
//   BM_Collapse_Chunk/<MiB>  one collapse() call with a 2 MiB byte budget on a populated, unadvised
//       range (the range is rebuilt on base pages, untimed, when every chunk is huge). Manual time:
//       the call itself. Counters: p50_us, p99_us (chunk latency), gib_per_s.
// Sizes stop at 4 GiB by default (the 2-core development VM has 24 GiB shared);
// HUGEPAGE_BENCH_MAX_MIB=16384 adds 16 GiB on a machine with the memory for it.
#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/collapse.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"

namespace {

using hugepage::units::gib;
using hugepage::units::mib;
constexpr std::size_t huge = 2 * mib;

constexpr hugepage::backing_source sources[] = {hugepage::backing_source::pagemap_scan,
                                                hugepage::backing_source::kpageflags,
                                                hugepage::backing_source::smaps};

// An aligned, THP-advised, populated range; `split`: every other huge page split into PTEs by
// an madvise(NOHUGEPAGE) + madvise(HUGEPAGE) of one page inside it (the VMA merges back).
class Range {
 public:
  Range(std::size_t bytes, bool split) : bytes_(bytes) {
    std::error_code ec;
    p_ = static_cast<char*>(hugepage::os::map_aligned(bytes, huge, ec));
    if (p_ == nullptr) return;
    hugepage::os::advise_huge(p_, bytes);
    hugepage::os::populate(p_, bytes, hugepage::os::base_page_size());
    if (!split) return;
    const std::size_t page = hugepage::os::base_page_size();
    for (std::size_t at = huge; at < bytes; at += 2 * huge) {
      hugepage::os::advise(p_ + at + mib, page, MADV_NOHUGEPAGE);
      hugepage::os::advise(p_ + at + mib, page, MADV_HUGEPAGE);
    }
  }
  ~Range() {
    if (p_ != nullptr) hugepage::os::unmap(p_, bytes_);
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  char* get() const { return p_; }

 private:
  std::size_t bytes_;
  char* p_ = nullptr;
};

void BM_BackingOf_Source(benchmark::State& state) {
  const auto source = sources[state.range(0)];
  const bool split = state.range(1) != 0;
  const std::size_t bytes = static_cast<std::size_t>(state.range(2)) * mib;
  state.SetLabel(std::string(hugepage::name_of(source)) + (split ? "/half_split" : "/huge"));
  if (source == hugepage::backing_source::kpageflags && ::geteuid() != 0) {
    state.SkipWithError("kpageflags needs root (CAP_SYS_ADMIN)");
    return;
  }
  const Range range(bytes, split);
  if (range.get() == nullptr) {
    state.SkipWithError("cannot map the range");
    return;
  }
  hugepage::backing_report r;
  for (auto _ : state) {
    r = hugepage::backing_of(0, range.get(), bytes, source);
    benchmark::DoNotOptimize(r.thp);
  }
  if (r.source != source) {
    state.SkipWithError(("source unavailable: " + r.note).c_str());
    return;
  }
  state.counters["gib_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(bytes) / gib,
                         benchmark::Counter::kIsRate);
  state.counters["huge_pct"] = 100.0 * r.huge_fraction();
}

void BM_Collapse_Chunk(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) * mib;
  const std::size_t page = hugepage::os::base_page_size();
  std::error_code ec;
  auto* p = static_cast<char*>(hugepage::os::map_aligned(bytes, huge, ec));
  if (p == nullptr) {
    state.SkipWithError("cannot map the range");
    return;
  }
  const auto rebuild = [&] {  // fresh base pages: unadvised memory under enabled=madvise
    hugepage::os::advise(p, bytes, MADV_DONTNEED);
    for (std::size_t i = 0; i < bytes; i += page) p[i] = 1;
  };
  rebuild();
  std::vector<double> latencies;
  std::size_t at = 0, collapsed = 0, refused = 0;
  double seconds = 0;
  for (auto _ : state) {
    if (at == bytes) {
      state.PauseTiming();
      rebuild();
      at = 0;
      state.ResumeTiming();
    }
    const auto start = std::chrono::steady_clock::now();
    const hugepage::collapse_result r =
        hugepage::collapse(p + at, bytes - at, hugepage::collapse_budget::of_bytes(huge));
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(s);
    seconds += s;
    latencies.push_back(s);
    collapsed += r.collapsed;
    refused += r.refused;
    at = static_cast<std::size_t>(static_cast<char*>(r.resume) - p);
  }
  hugepage::os::unmap(p, bytes);
  if (collapsed == 0) {
    state.SkipWithError("MADV_COLLAPSE collapsed nothing (kernel before 6.1, or THP disabled)");
    return;
  }
  std::sort(latencies.begin(), latencies.end());
  const auto quantile = [&](double q) {
    return 1e6 * latencies[static_cast<std::size_t>(q * static_cast<double>(latencies.size() - 1))];
  };
  state.counters["p50_us"] = quantile(0.50);
  state.counters["p99_us"] = quantile(0.99);
  state.counters["gib_per_s"] = static_cast<double>(collapsed) / static_cast<double>(gib) / seconds;
  state.counters["refused_chunks"] = static_cast<double>(refused / huge);
}

// Ranges of 64 MiB to HUGEPAGE_BENCH_MAX_MIB (default 4096; 16384 for the full set on a machine
// with the memory for it).
void backing_sizes(benchmark::internal::Benchmark* b) {
  const char* env = std::getenv("HUGEPAGE_BENCH_MAX_MIB");
  const long max_mib = env != nullptr ? std::strtol(env, nullptr, 10) : 4096;
  for (int source = 0; source < 3; ++source) {
    for (int split = 0; split < 2; ++split) {
      for (const long size_mib : {64L, 256L, 1024L, 4096L, 16384L}) {
        if (size_mib <= max_mib) b->Args({source, split, size_mib});
      }
    }
  }
}

BENCHMARK(BM_BackingOf_Source)->Apply(backing_sizes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Collapse_Chunk)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
