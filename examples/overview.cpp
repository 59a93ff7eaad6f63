// The fragments quoted in the documentation, compiled: each region between "snippet:" and
// "end snippet" is checked against its page by the ReadmeSnippets test.
#include <absl/container/flat_hash_map.h>

#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <utility>
#include <vector>

struct Order {
  long id;
  double price;
};
struct Fare {
  long route;
  double amount;
};
struct Quote {
  double bid, ask;
};
using K = long;
using V = double;
using Hash = absl::Hash<K>;
using Eq = std::equal_to<K>;

namespace options_example {
// snippet: options
struct eager : hugepage::default_options {
  static constexpr bool prefault = true;                   // pay the page faults at start-up
  static constexpr std::size_t small_threshold = 1 << 20;  // map blocks of 1 MiB and more
};
using quote_vector = std::vector<Quote, hugepage::thp_allocator<Quote, eager>>;
// end snippet
}  // namespace options_example

int main() {
  // snippet: containers
  std::vector<Order, hugepage::thp_allocator<Order>> book;       // THP on request
  std::vector<Fare, hugepage::huge_page_allocator<Fare>> fares;  // hugetlb pool, guaranteed
  absl::flat_hash_map<K, V, Hash, Eq, hugepage::collapse_allocator<std::pair<const K, V>>> rules;
  // end snippet
  book.resize(1 << 20);
  // fares stays empty: a strict hugetlb allocator throws without a pool (see hugetlb.cpp).
  rules.reserve(1 << 20);

  const std::vector<Order, hugepage::thp_allocator<Order>>& v = book;
  // snippet: coverage
  hugepage::backing_report r = hugepage::backing_of(v.data(), v.size() * sizeof(v[0]));
  std::printf("THP %zu, hugetlb %zu + %zu, base %zu, not resident %zu, unmapped %zu bytes\n", r.thp,
              r.hugetlb_2m, r.hugetlb_1g, r.base, r.not_resident, r.unmapped);
  std::printf("%.1f%% huge, source %s%s%s\n", 100 * r.huge_fraction(), hugepage::name_of(r.source),
              r.exact ? "" : ", approximate: ", r.note.c_str());
  // end snippet
  options_example::quote_vector quotes(1 << 20);
  return quotes.size() == (1 << 20) && r.bytes > 0 ? 0 : 1;
}
