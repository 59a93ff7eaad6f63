#include <cstdint>
#include <cstdio>
#include <functional>
#include <hugepage/hugepage.hpp>
#include <map>
#include <utility>
#include <vector>

int main() {
  // THP on request: 2 MiB pages at first touch, where the kernel has free 2 MiB blocks.
  std::vector<double, hugepage::thp_allocator<double>> prices(4 << 20);  // 32 MiB
  // Populated and collapsed inside allocate(): huge before the first request.
  std::vector<std::uint64_t, hugepage::collapse_allocator<std::uint64_t>> ids(4 << 20);
  // The hugetlb pool: guaranteed once allocate() returns, else pool_exhausted (never a SIGBUS).
  std::vector<double, hugepage::huge_page_allocator<double>> fares;
  try {
    fares.resize(4 << 20);
  } catch (const hugepage::pool_exhausted& e) {
    std::printf("%s\n", e.what());  // the pages asked, the pages free, and the fix
  }
  // Node containers: an arena carves whole huge pages into nodes.
  hugepage::arena nodes;
  using node_allocator = hugepage::arena_allocator<std::pair<const std::uint64_t, double>>;
  std::map<std::uint64_t, double, std::less<>, node_allocator> book{node_allocator(nodes)};
  for (std::uint64_t id = 0; id < 500'000; ++id) book.emplace_hint(book.end(), id, 1.0);

  for (double& price : prices) price = 100.0;  // first touch
  const auto report = hugepage::backing_of(prices.data(), prices.size() * sizeof(double));
  std::printf("prices %.1f%% huge, book %.1f%% huge\n", 100 * report.huge_fraction(),
              100 * nodes.backing().huge_fraction());
}
