// bench/suites_vectors.cpp - std::vector<u64> suites: independent random loads (throughput) and a
// dependent chase (latency).
//
// One declare() per suite at the bottom of this file; see registry.hpp for the fields.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

// ---- the shared vector
// ---------------------------------------------------------------------------

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

// Which loads a vector suite makes: independent random loads (throughput), or a chase whose
// every load's address is the previous load's value (latency).
enum class loads { independent, dependent };

template <loads Loads>
struct vector_loads {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    vector_type<Inner>* v = get_vector<Inner>(state, k, working_set);
    if (v == nullptr) return;
    const u64* data = v->data();
    const u64 n = v->size();
    u64 counter = 0, loaded = 0;
    perf_window perf;
    perf.start();
    if constexpr (Loads == loads::independent) {
      for (auto _ : state) loaded += data[index_of(counter++, n)];
    } else {
      for (auto _ : state) loaded = data[loaded];  // the cycle of get_vector
    }
    perf.stop();
    benchmark::DoNotOptimize(loaded);
    perf.report(state);
    report_cached_block(state, k);
  }
};

// ---- declarations -------------------------------------------------------------------------------

std::vector<std::size_t> chase_sizes() {
  std::vector<std::size_t> sizes = full_sizes();
  sizes.push_back(gib + gib / 2);
  return sizes;
}

const bool gather_declared =
    declare(suite_info("Vector_Gather", 20, per_allocator<vector_loads<loads::independent>>())
                .in_family("vectors")
                .describe("independent random loads from a vector<u64> (throughput); one "
                          "iteration = one load")
                .per_op_unit("ns/load"));

const bool chase_declared =
    declare(suite_info("Vector_Chase", 21, per_allocator<vector_loads<loads::dependent>>())
                .in_family("vectors")
                .describe("dependent loads over a random cyclic permutation of its cache lines "
                          "(latency); one iteration = one step")
                .per_op_unit("ns/step")
                // 1.5 GiB: the 1 GiB allocator's cascade at work (one 1 GiB page + 256 of 2 MiB)
                // beside the 2 MiB rows; below 1 GiB it is on 2 MiB pages like them.
                .with_sizes(chase_sizes(), quick_sizes())
                .quick()
                .core()
                .peers(peer_role::every_full_run)
                .chart());

}  // namespace
}  // namespace hugepage_bench
