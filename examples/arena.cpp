// A node arena: a std::map whose nodes live on huge pages and go back to the system when erased.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <hugepage/hugepage.hpp>
#include <map>
#include <memory_resource>
#include <utility>

int main() {
  // snippet: arena
  hugepage::arena nodes;  // THP by default; strategy::hugetlb(...) or ::collapse() also work
  using node_allocator = hugepage::arena_allocator<std::pair<const std::uint64_t, double>>;
  std::map<std::uint64_t, double, std::less<>, node_allocator> book{node_allocator(nodes)};

  for (std::uint64_t id = 0; id < 2'000'000; ++id) book.emplace_hint(book.end(), id, 1.0);
  const auto built = nodes.stats();
  const auto coverage = nodes.backing();  // read from the kernel
  std::printf("%zu MiB of nodes on %zu MiB of huge pages, %.1f%% huge\n", built.live_bytes >> 20,
              built.mapped_bytes >> 20, 100 * coverage.huge_fraction());

  book.erase(book.begin(), book.lower_bound(1'800'000));  // purge the oldest 90%
  std::printf("after the purge: %zu MiB mapped, %llu huge pages given back\n",
              nodes.stats().mapped_bytes >> 20,
              static_cast<unsigned long long>(nodes.stats().released_pages));
  // end snippet

  // snippet: pmr
  hugepage::unsynchronized_arena local;  // no locks: one thread uses it
  hugepage::pmr::unsynchronized_arena_resource resource(local);
  std::pmr::map<std::uint64_t, std::uint64_t> orders(&resource);
  // end snippet
  orders.emplace(1, 2);
  return orders.size() == 1 ? 0 : 1;
}
