// hugepage_cascade_bench: what the tail of a block above 1 GiB should be on (strategy.hpp,
// "cascade"). Dependent loads over a random cyclic permutation of the cache lines of a working set
// of W bytes, on three layouts of the same W:
//   whole_1g: W rounded up to whole 1 GiB pages (what rounding the tail up buys, and pins)
//   cascade:  the 1 GiB strategy's own layout (1 GiB pages, then 2 MiB pages: pool, else THP)
//   thp:      THP alone (2 MiB pages where the kernel finds them)
// Counters: resident_mib (memory the block holds, from backing_of over its mapped length) and
// huge_pct. Needs two free 1 GiB pages for whole_1g at W > 1 GiB; a row that cannot get its
// pages reports an error instead of a number.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hugepage/hugepage.hpp"

namespace {

using hugepage::units::gib;
using hugepage::units::mib;
constexpr std::size_t line = 64;

enum layout_kind : int { whole_1g, cascade, thp };

struct block {
  hugepage::strategy how = hugepage::strategy::thp();
  std::size_t bytes = 0;  // as asked of the strategy
  std::uint64_t* data = nullptr;
  int kind = -1;
  std::size_t working_set = 0;
  ~block() { release(); }
  void release() {
    if (data != nullptr) how.deallocate(data, bytes, line);
    data = nullptr;
    kind = -1;
  }
};

// One block at a time, kept across the repetitions of a row (building the chain takes seconds).
block& cached(int kind, std::size_t working_set) {
  static block b;
  if (b.kind == kind && b.working_set == working_set) return b;
  b.release();
  switch (kind) {
    case whole_1g:
      b.how = hugepage::strategy::hugetlb(hugepage::page_size::huge_1g);
      b.bytes = (working_set + gib - 1) / gib * gib;
      break;
    case cascade:
      b.how = hugepage::strategy::hugetlb(hugepage::page_size::huge_1g);
      b.bytes = working_set;
      break;
    default: b.how = hugepage::strategy::thp(); b.bytes = working_set;
  }
  b.data = static_cast<std::uint64_t*>(b.how.allocate(b.bytes, line));
  b.kind = kind;
  b.working_set = working_set;
  // Sattolo's shuffle: one cycle through every line, so each load depends on the previous one.
  const std::size_t n = working_set / line;
  std::vector<std::uint32_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
  std::mt19937_64 rng(42);
  for (std::size_t i = n - 1; i > 0; --i) {
    std::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(order[i], order[pick(rng)]);
  }
  constexpr std::size_t words = line / sizeof(std::uint64_t);
  for (std::size_t i = 0; i < n; ++i) {
    b.data[order[i] * words] = static_cast<std::uint64_t>(order[(i + 1) % n]) * words;
  }
  return b;
}

void BM_TailLayout_Chase(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const std::size_t working_set = static_cast<std::size_t>(state.range(1)) * mib;
  block* b = nullptr;
  try {
    b = &cached(kind, working_set);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const std::uint64_t* data = b->data;
  std::uint64_t at = 0;
  for (auto _ : state) at = data[at];
  benchmark::DoNotOptimize(at);
  const hugepage::backing_report r = hugepage::backing_of(b->data, b->how.mapped_length(b->bytes));
  state.counters["resident_mib"] = static_cast<double>(r.bytes - r.not_resident - r.unmapped) / mib;
  state.counters["huge_pct"] = 100.0 * r.huge_fraction();
  state.counters["hugetlb_1g_mib"] = static_cast<double>(r.hugetlb_1g) / mib;
  static const char* const names[] = {"whole_1g", "cascade", "thp"};
  state.SetLabel(names[kind]);
}

// Working sets just above 1 GiB (the tail is small: rounding up wastes most), in the middle, and
// near 2 GiB (rounding up wastes little).
BENCHMARK(BM_TailLayout_Chase)
    ->ArgsProduct({{whole_1g, cascade, thp}, {1088, 1536, 1984}})
    ->Iterations(20'000'000)
    ->Repetitions(5)
    ->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
