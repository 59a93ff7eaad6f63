// bench/suites_fault_in.cpp - the cost of getting memory, and what huge pages cost in memory: first
// touch of a fresh block (FaultIn) and one live object per 2 MiB (Bloat_Sparse).
//
// One declare() per suite at the bottom of this file; see registry.hpp for the fields.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "common.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

// ---- suites
// --------------------------------------------------------------------------------------

// Both suites time one fresh block per iteration: allocate the working set, write to it, and free
// it (the free is not timed). What they write, and what they report of the first block:

// FaultIn: the first touch of every base page; the block's coverage.
struct every_page {
  void write(byte* p, std::size_t bytes) const {
    for (std::size_t at = 0; at < bytes; at += page) p[at] = 1;  // first touch
  }
  static void report(benchmark::State& state, byte* p, std::size_t bytes) {
    report_memory(state, coverage_pct(p, bytes), bytes);
  }
  static constexpr bool counts_bytes = true;  // bytes_per_second
  const std::size_t page = hugepage::os::base_page_size();
};

// Bloat_Sparse, the other side of the trade: sparse live data. One 64-byte object per 2 MiB pins a
// whole huge page under THP or hugetlb, and one base page under 4 KiB pages.
struct one_object_per_2m {
  static constexpr std::size_t stride = 2 * mib, object = 64;
  void write(byte* p, std::size_t bytes) const {
    for (std::size_t at = 0; at < bytes; at += stride) std::memset(p + at, 1, object);
  }
  static void report(benchmark::State& state, byte* p, std::size_t bytes) {
    const std::size_t objects = (bytes + stride - 1) / stride;
    const hugepage::backing_report r = hugepage::backing_of(p, bytes);
    const double live = static_cast<double>(objects * object);
    const double resident = static_cast<double>(r.resident_bytes());
    state.counters["live_kib"] = live / kib;
    state.counters["resident_mib"] = resident / mib;
    state.counters["bloat_x"] = resident / live;
    report_memory(state, 100.0 * r.huge_fraction(), bytes);
  }
  static constexpr bool counts_bytes = false;
};

template <class Touch>
struct fresh_block {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    drop_cache();
    if (const std::string why = shortage(k, working_set); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    reset_peak_rss();
    Inner alloc;
    const Touch touch;
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
      touch.write(p, working_set);
      benchmark::DoNotOptimize(p);
      benchmark::ClobberMemory();
      perf.stop();
      state.PauseTiming();
      if (!reported) {
        reported = true;
        Touch::report(state, p, working_set);
      }
      alloc.deallocate(p, working_set);
      state.ResumeTiming();
    }
    if (state.error_occurred()) return;
    if constexpr (Touch::counts_bytes) {
      state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(working_set));
    }
    perf.report(state);
  }
};

// ---- declarations
// -------------------------------------------------------------------------------

// thp_prefault exists to compare pre-faulting with first-touch faulting: FaultIn only.
const bool fault_in_declared =
    declare(suite_info("FaultIn", 40, per_allocator<fresh_block<every_page>>())
                .in_family("fault-in and bloat")
                .describe("allocate + first touch of the working set (bytes_per_second); one "
                          "iteration = one fault-in")
                .per_op_unit("ms/fault-in")
                .slow()
                .only_for({alloc_kind::std_alloc, alloc_kind::thp, alloc_kind::hugetlb_2m,
                           alloc_kind::hugetlb_1g, alloc_kind::collapse, alloc_kind::thp_prefault})
                .needs_fresh_blocks()
                .peers(peer_role::every_full_run));

const bool bloat_sparse_declared =
    declare(suite_info("Bloat_Sparse", 50, per_allocator<fresh_block<one_object_per_2m>>())
                .in_family("fault-in and bloat")
                .describe("one live 64-byte object per 2 MiB: resident bytes vs live bytes")
                .per_op_unit("ms/op")
                .slow()
                .needs_fresh_blocks()
                .bloat_table());

}  // namespace
}  // namespace hugepage_bench
