// label_bench.cpp - what a label costs on the allocation path (label.hpp).
//
//   BM_Label_RecordRemove/N   one record and one removal of a labelled block in the mapping
//                             registry, with N other labelled blocks live: what a labelled
//                             allocator adds to each allocate() + deallocate() of a mapped block.
//   BM_Thp_AllocateFree/L     allocate() + deallocate() of one 2 MiB THP block, never touched:
//                             L = 0 unlabelled, 1 labelled (the mmap, madvise and munmap dominate).
// Build: the hugepage_label_bench target. Run: build/bench/hugepage_label_bench.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/label.hpp"
#include "hugepage/page_size.hpp"

namespace {

using hugepage::units::mib;

struct bench_opts : hugepage::default_options {
  static constexpr const char* label = "label-bench";
};

void BM_Label_RecordRemove(benchmark::State& state) {
  // Addresses that are never dereferenced: the registry only keys on them.
  std::vector<char*> others(static_cast<std::size_t>(state.range(0)));
  auto* base = reinterpret_cast<char*>(std::uintptr_t{1} << 44);
  for (std::size_t i = 0; i < others.size(); ++i) {
    others[i] = base + (i + 1) * 2 * mib;
    hugepage::label_mapping(others[i], bench_opts::label, 2 * mib, hugepage::backing::thp);
  }
  for (auto _ : state) {
    hugepage::label_mapping(base, bench_opts::label, 2 * mib, hugepage::backing::thp);
    hugepage::unlabel_mapping(base);
  }
  for (char* p : others) hugepage::unlabel_mapping(p);
}
BENCHMARK(BM_Label_RecordRemove)->Arg(0)->Arg(1000)->Arg(100000);

template <class Allocator>
void allocate_free(benchmark::State& state) {
  Allocator a;
  for (auto _ : state) {
    char* p = a.allocate(2 * mib);
    benchmark::DoNotOptimize(p);
    a.deallocate(p, 2 * mib);
  }
}

void BM_Thp_AllocateFree(benchmark::State& state) {
  if (state.range(0) == 0) {
    allocate_free<hugepage::thp_allocator<char>>(state);
  } else {
    allocate_free<hugepage::thp_allocator<char, bench_opts>>(state);
  }
}
BENCHMARK(BM_Thp_AllocateFree)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
