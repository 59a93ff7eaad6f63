// allocation_bench.cpp - the cost of the allocation path itself (not of lookups): what the safety
// checks add to allocate()/deallocate() of one block.
//
//   BM_Hugetlb_AllocateFree      2 MiB from the pool, strict: mapped and faulted in by allocate()
//                                (so that no first touch can raise SIGBUS).
//   BM_Hugetlb_MapTouchUnmap     the same page mapped raw, touched once, unmapped: what the first
//                                touch costs without the library, for comparison.
//   BM_*Limit_Read               reading the cgroup limits along the hierarchy.
//   BM_Registry_TakeAdd/N        one deallocate + allocate lookup in the mapping registry with N
//                                records live (fallback blocks, dont_fork blocks): O(1) expected.
//   BM_Prefault_AllocateFree     2 MiB of THP pre-faulted, which reads the memory cgroup headroom.
// Build: the hugepage_allocation_bench target. Run: build/bench/hugepage_allocation_bench.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <system_error>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/cgroup.hpp"
#include "hugepage/mapping_records.hpp"
#include "hugepage/os.hpp"
#include "hugepage/strategy.hpp"
#include "hugepage/system.hpp"

namespace {

constexpr std::size_t kHuge = 2 * hugepage::units::mib;

void BM_Hugetlb_AllocateFree(benchmark::State& state) {
  const auto pool = hugepage::read_pool(hugepage::page_size::huge_2m);
  if (!pool || pool->available().value_or(0) < 1) {
    state.SkipWithError("needs one free 2 MiB hugetlb page (sysctl -w vm.nr_hugepages=1)");
    return;
  }
  constexpr auto strategy = hugepage::strategy::hugetlb();
  for (auto _ : state) {
    void* p = strategy.allocate(kHuge, 64);
    benchmark::DoNotOptimize(p);
    strategy.deallocate(p, kHuge, 64);
  }
}
BENCHMARK(BM_Hugetlb_AllocateFree);

void BM_Hugetlb_MapTouchUnmap(benchmark::State& state) {
  for (auto _ : state) {
    std::error_code ec;
    void* p = hugepage::os::map_hugetlb(kHuge, hugepage::page_size::huge_2m, ec);
    if (p == nullptr) {
      state.SkipWithError(("MAP_HUGETLB: " + ec.message()).c_str());
      return;
    }
    static_cast<volatile char*>(p)[0] = 1;
    hugepage::os::unmap(p, kHuge);
  }
}
BENCHMARK(BM_Hugetlb_MapTouchUnmap);

void BM_Prefault_AllocateFree(benchmark::State& state) {
  using allocator = hugepage::thp_allocator<char, hugepage::prefault_options>;
  for (auto _ : state) {
    char* p = allocator().allocate(kHuge);
    benchmark::DoNotOptimize(p);
    allocator().deallocate(p, kHuge);
  }
  const auto limit = hugepage::memory_limit();
  state.SetLabel(limit.tightest ? "memory limit " + limit.tightest->file : "no memory limit");
}
BENCHMARK(BM_Prefault_AllocateFree);

void BM_MemoryLimit_Read(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(hugepage::memory_limit());
}
BENCHMARK(BM_MemoryLimit_Read);

void BM_HugetlbLimit_Read(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(hugepage::hugetlb_limit(kHuge, hugepage::hugetlb_charge::fault));
  }
}
BENCHMARK(BM_HugetlbLimit_Read);

// One record taken and put back while `records` others are live. The keys are made up (nothing
// else registers while this runs) and removed again at the end.
void BM_Registry_TakeAdd(benchmark::State& state) {
  const auto records = static_cast<std::uintptr_t>(state.range(0));
  const auto key = [](std::uintptr_t i) { return reinterpret_cast<void*>((i + 1) * kHuge); };
  for (std::uintptr_t i = 0; i < records; ++i) {
    hugepage::record_mapping(key(i), kHuge, hugepage::backing::thp);
  }
  std::uintptr_t i = 0;
  for (auto _ : state) {
    void* p = key(i);
    benchmark::DoNotOptimize(hugepage::take_mapping_record(p, hugepage::backing::hugetlb_2m));
    hugepage::record_mapping(p, kHuge, hugepage::backing::thp);
    i = i + 1 == records ? 0 : i + 1;
  }
  for (std::uintptr_t j = 0; j < records; ++j)
    hugepage::take_mapping_record(key(j), hugepage::backing::thp);
  state.SetLabel(std::to_string(records) + " records live");
}
BENCHMARK(BM_Registry_TakeAdd)->Arg(1)->Arg(1000)->Arg(100000);

}  // namespace

BENCHMARK_MAIN();
