// bench/suites_graph.cpp - the ported pattern of docs/porting.md: a graph in compressed sparse rows
// (examples/csr_graph.hpp, the code of the example, unchanged) whose arrays are hugepage::array on
// the row's allocator, and PageRank over it. The port is the allocator alias alone, so a row here
// is what that one-line change buys on a program shaped like the user's.
//
// One iteration = one PageRank round (pull): a streaming pass over the offsets and the sources and
// one random read of contribution[] per edge, the read that pays the page walk.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "../examples/csr_graph.hpp"
#include "common.hpp"
#include "registry.hpp"

namespace hugepage_bench {
namespace {

// The row's allocator as the family of allocators the example is templated on.
template <class Inner>
struct family_of {
  template <class T>
  using type = rebound<Inner, T>;
};

// Bytes per node: 8 edges a node (4 bytes each), an 8-byte offset, a 4-byte out-degree, and the
// two 8-byte score arrays of pagerank(): 60.
constexpr std::size_t edges_per_node = 8;
constexpr std::size_t bytes_per_node = edges_per_node * 4 + 8 + 4 + 2 * 8;

template <class Inner>
struct graph_state {
  using graph = hugepage_examples::csr_graph<family_of<Inner>::template type>;
  explicit graph_state(graph built) : g(std::move(built)) {}
  graph g;
  hugepage::array<double, rebound<Inner, double>> scores;
};

// The huge share of the graph's arrays and the scores, from the kernel.
template <class Inner>
double graph_coverage(const graph_state<Inner>& s) {
  std::size_t huge = 0, bytes = 0;
  const auto add = [&](const void* p, std::size_t n) {
    const hugepage::backing_report r = backing_noted(p, n);
    huge += std::min<std::size_t>(r.huge_bytes(), n);  // a tail page counts its array's bytes only
    bytes += n;
  };
  add(s.g.offsets().data(), s.g.offsets().size() * sizeof(std::uint64_t));
  add(s.g.sources().data(), s.g.sources().size() * sizeof(std::uint32_t));
  add(s.g.out_degree().data(), s.g.out_degree().size() * sizeof(std::uint32_t));
  add(s.scores.data(), s.scores.size() * sizeof(double));
  return bytes == 0 ? 0.0 : 100.0 * static_cast<double>(huge) / static_cast<double>(bytes);
}

struct pagerank_round {
  template <class Inner>
  static void run(benchmark::State& state, alloc_kind k, std::size_t working_set) {
    using family = family_of<Inner>;
    const std::string key = fmt::format("graph/{}/{}", token_of(k), working_set);
    if (cache.key != key) {
      drop_cache();
      // The edge list is a temporary on the same allocator: about half the working set again.
      if (const std::string why = shortage(k, working_set + working_set / 2); !why.empty()) {
        state.SkipWithError(why.c_str());
        return;
      }
      reset_peak_rss();
      try {
        const auto nodes = static_cast<hugepage_examples::node_id>(working_set / bytes_per_node);
        std::shared_ptr<graph_state<Inner>> s;
        {
          const auto edges = hugepage_examples::random_edges<family::template type>(
              nodes, u64{nodes} * edges_per_node, /*seed=*/42);
          s = std::make_shared<graph_state<Inner>>(
              graph_state<Inner>::graph::from_edges(nodes, edges));
        }
        s->scores = hugepage_examples::pagerank(s->g, /*iterations=*/1);
        cache.key = key;
        cache.block = s->g.sources().data();
        cache.block_bytes = working_set;
        cache.object = std::move(s);
      } catch (const std::exception& e) {
        drop_cache();
        state.SkipWithError(fmt::format("building the graph failed: {}", e.what()).c_str());
        return;
      }
    }
    auto& s = *static_cast<graph_state<Inner>*>(cache.object.get());
    for (auto _ : state) {
      s.scores = hugepage_examples::pagerank(s.g, /*iterations=*/1);
      benchmark::DoNotOptimize(s.scores.data());
    }
    report_memory(state, graph_coverage(s), working_set);
  }
};

const bool pagerank_declared =
    declare(suite_info("Graph_PageRank", 60, per_allocator<pagerank_round>())
                .in_family("graph")
                .describe("examples/csr_graph.hpp ported by its allocator alias: one PageRank "
                          "round over a random graph of 8 edges a node; one iteration = one round")
                .per_op_unit("ms/round")
                .slow()
                .only_for({alloc_kind::std_alloc, alloc_kind::thp, alloc_kind::hugetlb_2m,
                           alloc_kind::collapse})
                .with_sizes({256 * mib, gib}, {64 * mib})
                .peers(peer_role::every_full_run));

}  // namespace
}  // namespace hugepage_bench
