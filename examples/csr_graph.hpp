// examples/csr_graph.hpp - a graph in compressed sparse rows and PageRank over it: the core of
// examples/csr_graph.cpp, templated on the allocator family of its arrays, so that a program (or
// a benchmark) switches between std::allocator and huge pages with one type alias.
//
//   template <class T> using big = hugepage::thp_allocator<T>;      // or std::allocator<T>
//   auto edges = hugepage_examples::random_edges<big>(1 << 20, 8 << 20, /*seed=*/1);
//   auto graph = hugepage_examples::csr_graph<big>::from_edges(1 << 20, edges);
//   auto ranks = hugepage_examples::pagerank(graph, /*iterations=*/10);
//
// Every array is a hugepage::array<T, Alloc<T>>: with std::allocator<T> it is what `new T[n]`
// was, with thp_allocator<T> its blocks are on huge pages. The graph stores incoming edges (a pull
// PageRank reads the scores of each node's in-neighbours: random reads over the whole score
// array, which is where 4 KiB pages cost a TLB miss per edge).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <utility>

#include "hugepage/array.hpp"

namespace hugepage_examples {

using node_id = std::uint32_t;
using edge_index = std::uint64_t;

/// Edges as two parallel arrays: edge i goes from src[i] to dst[i].
template <template <class> class Alloc>
struct edge_list {
  hugepage::array<node_id, Alloc<node_id>> src;
  hugepage::array<node_id, Alloc<node_id>> dst;
};

/// `count` edges between uniformly random nodes of [0, nodes).
template <template <class> class Alloc>
edge_list<Alloc> random_edges(node_id nodes, edge_index count, std::uint64_t seed) {
  edge_list<Alloc> e{hugepage::make_array_for_overwrite<node_id, Alloc<node_id>>(count),
                     hugepage::make_array_for_overwrite<node_id, Alloc<node_id>>(count)};
  std::mt19937_64 rng(seed);
  for (edge_index i = 0; i < count; ++i) {
    const std::uint64_t r = rng();
    e.src[i] = static_cast<node_id>((r & 0xffffffffu) % nodes);
    e.dst[i] = static_cast<node_id>((r >> 32) % nodes);
  }
  return e;
}

/// A directed graph in compressed sparse rows of incoming edges: the in-neighbours of node u are
/// sources()[offsets()[u]] .. sources()[offsets()[u + 1] - 1]. Movable, not copyable (its arrays
/// are owners).
template <template <class> class Alloc = std::allocator>
class csr_graph {
 public:
  template <class T>
  using array = hugepage::array<T, Alloc<T>>;

  /// Builds the graph of `edges` over `nodes` nodes: count (value-initialised counters), prefix
  /// sum, scatter (default-initialised, every slot written once).
  static csr_graph from_edges(node_id nodes, const edge_list<Alloc>& edges) {
    const edge_index m = edges.src.size();
    auto offsets = hugepage::make_array<edge_index, Alloc<edge_index>>(std::size_t{nodes} + 1);
    auto out_degree = hugepage::make_array<node_id, Alloc<node_id>>(nodes);
    for (edge_index i = 0; i < m; ++i) {
      ++offsets[edges.dst[i] + std::size_t{1}];
      ++out_degree[edges.src[i]];
    }
    for (std::size_t u = 0; u < nodes; ++u) offsets[u + 1] += offsets[u];
    auto cursor = hugepage::make_array_for_overwrite<edge_index, Alloc<edge_index>>(nodes);
    for (std::size_t u = 0; u < nodes; ++u) cursor[u] = offsets[u];
    auto sources = hugepage::make_array_for_overwrite<node_id, Alloc<node_id>>(m);
    for (edge_index i = 0; i < m; ++i) sources[cursor[edges.dst[i]]++] = edges.src[i];
    // The arrays move into the graph: ownership passes on, no copy.
    return csr_graph(std::move(offsets), std::move(sources), std::move(out_degree));
  }

  node_id num_nodes() const noexcept { return static_cast<node_id>(out_degree_.size()); }
  edge_index num_edges() const noexcept { return sources_.size(); }
  const array<edge_index>& offsets() const noexcept { return offsets_; }
  const array<node_id>& sources() const noexcept { return sources_; }
  const array<node_id>& out_degree() const noexcept { return out_degree_; }

 private:
  csr_graph(array<edge_index> offsets, array<node_id> sources, array<node_id> out_degree) noexcept
      : offsets_(std::move(offsets)),
        sources_(std::move(sources)),
        out_degree_(std::move(out_degree)) {}

  array<edge_index> offsets_;
  array<node_id> sources_;
  array<node_id> out_degree_;
};

/// PageRank by power iteration (pull): `iterations` rounds with damping `damping`; the score of
/// nodes without out-edges is spread evenly. Returns the scores, which sum to 1.
template <template <class> class Alloc>
hugepage::array<double, Alloc<double>> pagerank(const csr_graph<Alloc>& g, int iterations,
                                                double damping = 0.85) {
  const std::size_t n = g.num_nodes();
  auto scores = hugepage::make_array_for_overwrite<double, Alloc<double>>(n);
  auto contribution = hugepage::make_array_for_overwrite<double, Alloc<double>>(n);
  for (double& s : scores) s = 1.0 / static_cast<double>(n);
  const auto& offsets = g.offsets();
  const auto& sources = g.sources();
  const auto& out_degree = g.out_degree();
  for (int round = 0; round < iterations; ++round) {
    double dangling = 0;
    for (std::size_t v = 0; v < n; ++v) {
      if (out_degree[v] == 0) {
        dangling += scores[v];
        contribution[v] = 0;
      } else {
        contribution[v] = scores[v] / out_degree[v];
      }
    }
    const double base = (1.0 - damping + damping * dangling) / static_cast<double>(n);
    for (std::size_t u = 0; u < n; ++u) {
      double sum = 0;
      for (edge_index e = offsets[u]; e < offsets[u + 1]; ++e) sum += contribution[sources[e]];
      scores[u] = base + damping * sum;
    }
  }
  return scores;
}

}  // namespace hugepage_examples
