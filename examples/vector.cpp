#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <vector>

int main() {
  std::vector<double, hugepage::thp_allocator<double>> prices(8 << 20);  // 64 MiB on THP
  for (double& price : prices) price = 100.0;                            // first touch
  const auto report = hugepage::backing_of(prices.data(), prices.size() * sizeof(double));
  std::printf("%.1f%% on huge pages (source: %s)\n", 100 * report.huge_fraction(),
              hugepage::name_of(report.source));
}
