// Collapse on demand: a vector on base pages (a std::allocator, nothing advised) is raised to huge
// pages a few milliseconds at a time, as a latency-critical service would between requests.
// The region between "snippet:" and "end snippet" is quoted in docs/ (ReadmeSnippets).
#include <chrono>
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <vector>

int main() {
  std::vector<double> prices(std::size_t{64} << 17);  // 64 MiB, faulted on whatever pages came
  // snippet: collapse
  using namespace std::chrono_literals;
  char* at = reinterpret_cast<char*>(prices.data());
  char* const end = at + prices.size() * sizeof(double);
  while (at < end) {
    hugepage::collapse_result r = hugepage::collapse(at, static_cast<std::size_t>(end - at),
                                                     hugepage::collapse_budget::of_time(2ms));
    if (r.fatal) break;  // EPERM, ...: no chunk can succeed
    at = static_cast<char*>(r.resume);
    // ... serve requests; refusals (EAGAIN, ENOMEM, ...) are in r.refusals, never thrown
  }
  hugepage::backing_report b = hugepage::backing_of(prices.data(), prices.size() * sizeof(double));
  std::printf("%.1f%% huge (%s)\n", 100 * b.huge_fraction(), hugepage::name_of(b.source));
  // end snippet
  return 0;
}
