// A container placed on a NUMA node, proven per node by the library and by numa_maps.
// Run it in a two-node machine (or the lab's two-node guest); with one node, node 1 does not
// exist and the example says so.
#include <cstdio>
#include <fstream>
#include <hugepage/hugepage.hpp>
#include <string>
#include <vector>

// snippet: bind
struct on_node_1 : hugepage::default_options {
  static constexpr hugepage::numa_placement numa = hugepage::numa_placement::bind({1});
};
using table_on_node_1 = std::vector<double, hugepage::collapse_allocator<double, on_node_1>>;
// end snippet

// Prints the numa_maps line of the mapping at `p`: "N1=16" per node, in pages of
// kernelpagesize_kB (4 kB for THP, whose pages numa_maps counts one by one).
void print_numa_maps(const void* p) {
  std::ifstream maps("/proc/self/numa_maps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx ", reinterpret_cast<unsigned long>(p));
  for (std::string line; std::getline(maps, line);) {
    if (line.rfind(start, 0) == 0) std::printf("numa_maps: %s\n", line.c_str());
  }
}

int main() {
  try {
    table_on_node_1 table((32 << 20) / sizeof(double), 1.0);  // 32 MiB: 16 huge pages
    // snippet: check
    const hugepage::backing_report r =
        hugepage::backing_of(table.data(), table.size() * sizeof(double));
    for (const hugepage::node_bytes& n : r.nodes) {
      std::printf("node %d: %zu bytes, %zu of them on huge pages\n", n.node, n.bytes, n.huge_bytes);
    }
    // end snippet
    print_numa_maps(table.data());
  } catch (const hugepage::allocation_error& e) {
    std::printf("%s\n", e.what());  // one node here: "node(s) 1 do not exist"
  }
  // snippet: interleave
  // An arena's slabs, one huge page on each online node in turn, chosen at run time.
  hugepage::arena shared_tables(hugepage::strategy::thp().placed(
      hugepage::numa_placement::interleave(hugepage::numa::online_nodes())));
  // end snippet
  void* slot = shared_tables.allocate(256, 8);
  shared_tables.deallocate(slot, 256, 8);
}
