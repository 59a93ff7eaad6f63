// A graph in compressed sparse rows (examples/csr_graph.hpp) and PageRank over it, with every big
// array on huge pages through one type alias.
#include "csr_graph.hpp"

#include <cmath>
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <memory>

// snippet: switch
// The port is this alias. Before: template <class T> using big_allocator = std::allocator<T>;
template <class T>
using big_allocator = hugepage::thp_allocator<T>;
using graph = hugepage_examples::csr_graph<big_allocator>;
// end snippet

int main() {
  constexpr hugepage_examples::node_id nodes = 1 << 20;
  constexpr hugepage_examples::edge_index edges = std::size_t{8} << 20;
  const graph g =
      graph::from_edges(nodes, hugepage_examples::random_edges<big_allocator>(nodes, edges, 1));
  const auto ranks = hugepage_examples::pagerank(g, 10);

  // snippet: check
  const auto& sources = g.sources();  // 32 MiB of node ids, read in edge order
  const hugepage::backing_report coverage =
      hugepage::backing_of(sources.data(), sources.size() * sizeof(sources[0]));
  const hugepage::backing_report scores =
      hugepage::backing_of(ranks.data(), ranks.size() * sizeof(ranks[0]));
  std::printf("edges %.1f%% huge, scores %.1f%% huge (%s)\n", 100 * coverage.huge_fraction(),
              100 * scores.huge_fraction(), hugepage::name_of(coverage.source));
  // end snippet

  double sum = 0;
  for (double r : ranks) sum += r;
  std::printf("%u nodes, %llu edges, ranks sum to %.6f\n", g.num_nodes(),
              static_cast<unsigned long long>(g.num_edges()), sum);
  return std::fabs(sum - 1.0) < 1e-6 ? 0 : 1;
}
