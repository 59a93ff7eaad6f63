// A limit order book (examples/order_book.hpp) whose price levels and order index are member node
// containers, on huge pages through one type alias: every book shares one arena.
#include "order_book.hpp"

#include <cstdint>
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <memory>
#include <random>

// snippet: switch
// The port is this alias. Before: template <class T> using book_allocator = std::allocator<T>;
struct book_nodes {
  static constexpr const char* label = "order-book";  // optional: coverage_of("order-book")
};
template <class T>
using book_allocator = hugepage::shared_arena_allocator<T, book_nodes>;
using order_book = hugepage_examples::basic_order_book<book_allocator>;
// end snippet

int main() {
  using hugepage_examples::side;
  order_book book;  // the members need no arena argument
  std::mt19937_64 rng(42);
  std::int64_t mid = 100'000;
  std::uint64_t next_id = 1, filled = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    mid += static_cast<std::int64_t>(rng() % 3) - 1;  // a slow random walk
    const side which = rng() % 2 == 0 ? side::buy : side::sell;
    // Mostly passive orders a few ticks away from the mid; one in 50 crosses.
    const auto away = static_cast<std::int64_t>(rng() % 200) + 1;
    const bool crosses = rng() % 50 == 0;
    const std::int64_t price =
        which == side::buy ? mid - (crosses ? -5 : away) : mid + (crosses ? -5 : away);
    filled += book.add(next_id++, which, price, static_cast<std::uint32_t>(rng() % 500 + 1)).filled;
    if (rng() % 4 == 0) book.cancel(next_id - 1 - rng() % 1000);  // a recent order
  }

  // snippet: check
  const order_book snapshot = book;  // copyable: the copy shares the arena
  const hugepage::arena& nodes = book_allocator<char>::get_arena();
  const hugepage::arena_stats s = nodes.stats();
  const hugepage::backing_report coverage = nodes.backing();  // read from the kernel
  std::printf("%zu resting orders, %zu MiB of nodes on %zu MiB of huge pages, %.1f%% huge\n",
              book.size(), s.live_bytes >> 20, s.mapped_bytes >> 20,
              100 * coverage.huge_fraction());
  // end snippet
  std::printf("filled %llu; best bid %lld, best ask %lld\n",
              static_cast<unsigned long long>(filled),
              static_cast<long long>(book.best_bid().value_or(0)),
              static_cast<long long>(book.best_ask().value_or(0)));
  const bool ok = snapshot.size() == book.size() && book.best_bid() < book.best_ask() &&
                  hugepage::coverage_of("order-book").bytes == s.mapped_bytes;
  return ok ? 0 : 1;
}
