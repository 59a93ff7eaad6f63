// upkeep.cpp - a service that keeps its big containers huge and exports what they hold
// (docs/upkeep.md): labels, upkeep on a thread or in an idle loop, metrics.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <iostream>
#include <map>
#include <utility>
#include <vector>

// snippet: labels
// Name the containers that matter: one options type per container.
struct fares_opts : hugepage::default_options {
  static constexpr const char* label = "fares";
};
using fare_table = std::vector<double, hugepage::thp_allocator<double, fares_opts>>;

// An arena's huge pages under a label of its own.
hugepage::arena_options book_options() {
  hugepage::arena_options o;
  o.label = "book";
  return o;
}
// end snippet

int main() {
  fare_table fares(16 << 20, 1.0);  // 128 MiB
  hugepage::arena nodes(hugepage::strategy::thp(), book_options());
  using node_allocator = hugepage::arena_allocator<std::pair<const std::uint64_t, double>>;
  std::map<std::uint64_t, double, std::less<>, node_allocator> book{node_allocator(nodes)};
  for (std::uint64_t id = 0; id < 10'000; ++id) book.emplace(id, 1.0);

  {
    // snippet: thread
    // Once per process: every 10 s, up to 20 ms of MADV_COLLAPSE for the labels' decayed pages.
    hugepage::upkeep_thread keeper(std::chrono::seconds(10), hugepage::collapse_budget::of_time(
                                                                 std::chrono::milliseconds(20)));
    // end snippet
  }

  // snippet: idle
  // Or from the service's own idle loop, a few milliseconds at a time:
  const hugepage::upkeep_result r =
      hugepage::upkeep(hugepage::collapse_budget::of_time(std::chrono::milliseconds(5)));
  if (r.thp_disabled) std::fprintf(stderr, "THP is disabled for this process: upkeep cannot act\n");
  std::printf("restored %zu of %zu decayed bytes (%zu left for the next call)\n", r.restored,
              r.decayed_bytes, r.left);
  // end snippet

  // snippet: coverage
  const hugepage::backing_report fares_now = hugepage::coverage_of("fares");
  std::printf("fares %.1f%% huge\n", 100 * fares_now.huge_fraction());
  for (const hugepage::label_report& l : hugepage::labels()) {
    std::printf("%s: %zu blocks, %zu bytes mapped, %.1f%% huge now, %llu fallbacks\n",
                l.label.c_str(), l.blocks, l.mapped_bytes(), 100 * l.coverage.huge_fraction(),
                static_cast<unsigned long long>(l.fallbacks));
  }
  // end snippet

  // snippet: metrics
  // The body of a GET /metrics answer (Content-Type: text/plain; version=0.0.4):
  hugepage::write_metrics(std::cout);
  // end snippet
}
