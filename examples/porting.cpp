// The snippets of docs/porting.md: each way to move a program's big memory to huge pages, as a
// type change, and how to check the result.
#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <hugepage/hugepage.hpp>
#include <map>
#include <memory>
#include <memory_resource>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

// snippet: containers
// Before: std::vector<double> prices;  absl::flat_hash_map<std::uint64_t, double> by_id;
std::vector<double, hugepage::thp_allocator<double>> prices;
absl::flat_hash_map<std::uint64_t, double, absl::Hash<std::uint64_t>, std::equal_to<std::uint64_t>,
                    hugepage::thp_allocator<std::pair<const std::uint64_t, double>>>
    by_id;
// end snippet

// snippet: members
// One tag, one arena: every container declared with it shares the arena's huge pages and slabs.
struct market_nodes {
  static constexpr const char* label = "market";  // optional: coverage_of("market")
};
template <class T>
using market_allocator = hugepage::shared_arena_allocator<T, market_nodes>;

// Before: std::map<std::int64_t, std::uint64_t> levels;  std::set<std::uint64_t> halted;
struct instrument {
  std::map<std::int64_t, std::uint64_t, std::less<std::int64_t>,
           market_allocator<std::pair<const std::int64_t, std::uint64_t>>>
      levels;
  std::set<std::uint64_t, std::less<std::uint64_t>, market_allocator<std::uint64_t>> halted;
};
struct venue {
  std::unordered_map<std::uint64_t, instrument, std::hash<std::uint64_t>,
                     std::equal_to<std::uint64_t>,
                     market_allocator<std::pair<const std::uint64_t, instrument>>>
      instruments;  // instrument is copyable and default-constructible, as before
};
// end snippet

// A C-style consumer that takes over an array it frees later with the size it was given.
struct legacy_table {
  hugepage::array_block<std::uint32_t> rows;
};
void legacy_free(legacy_table& t) {
  // snippet: delete
  // Before: delete[] t.rows;   (the size travels with the pointer: array_block)
  hugepage::delete_array(t.rows);
  // end snippet
}

// snippet: owners
// Before: std::uint32_t* offsets = new std::uint32_t[n + 1];  (edges = offsets[n], never kept)
//         std::uint32_t* targets = new std::uint32_t[offsets[n]];  ...  delete[] targets;
struct csr_storage {
  hugepage::array<std::uint32_t> offsets;  // n + 1 entries
  hugepage::array<std::uint32_t> targets;  // offsets[n] entries: each array keeps its count
  std::uint32_t* neighbours(std::size_t v) { return targets.data() + offsets[v]; }  // a view
};
// end snippet

// snippet: shallow_const
// Before: std::uint32_t* ids_;  std::uint32_t* ids() const { return ids_; }
class id_table {
 public:
  explicit id_table(std::size_t n) : ids_(hugepage::make_array<std::uint32_t>(n)) {}
  std::uint32_t* ids() const { return ids_.data(); }  // a T* from a const method, as before

 private:
  mutable hugepage::array<std::uint32_t> ids_;  // mutable: the pointer's constness, not its data's
};
// end snippet

// snippet: per_symbol
// A book per symbol, instantiated per symbol: a tag per instantiation gives each its own arena
// (book<aapl> frees its pages without waiting for book<msft>); one fixed tag would share one.
template <class Symbol>
struct symbol_nodes {
  static constexpr const char* label = "book";  // every book's pages in coverage_of("book")
};
template <class Symbol>
class book {
  template <class T>
  using alloc = hugepage::shared_arena_allocator<T, symbol_nodes<Symbol>>;
  std::map<std::int64_t, std::uint64_t, std::less<std::int64_t>,
           alloc<std::pair<const std::int64_t, std::uint64_t>>>
      bids_;

 public:
  void add(std::int64_t price, std::uint64_t quantity) { bids_[price] += quantity; }
};
// end snippet
struct aapl {};

int main() {
  const std::size_t n = std::size_t{4} << 20;
  prices.assign(n, 1.0);
  by_id.emplace(1, 2.0);

  venue v;
  for (std::uint64_t id = 0; id < 1000; ++id) {
    instrument& i = v.instruments[id];
    for (std::int64_t p = 0; p < 200; ++p) i.levels.emplace(p, 1);
  }
  const venue copy = v;  // copyable: the copy's nodes are in the same arena

  {
    // snippet: arrays
    // Before: double* ranks = new double[n]();     (value-initialised: zeros)
    hugepage::array<double> ranks = hugepage::make_array<double>(n);
    // Before: std::uint32_t* ids = new std::uint32_t[n];   (left for the program to write)
    hugepage::array<std::uint32_t> ids = hugepage::make_array_for_overwrite<std::uint32_t>(n);
    // Before: std::unique_ptr<int[]> seen(new int[n]());
    hugepage::unique_array<int> seen = hugepage::make_unique_array<int>(n);
    // Uses are unchanged: ranks[i], seen[i]; where a T* is passed on, ranks.data(), seen.get().
    // Before: delete[] ranks;   Now: the destructor, or ranks.reset() to free it early.
    // end snippet
    for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::uint32_t>(i);
    ranks[7] = seen[7] + 0.5;
    std::memset(ranks.data(), 0, sizeof(double));

    // snippet: transfer
    // Hand the storage on with its exact size, and take it back (or delete_array it).
    hugepage::array_block<std::uint32_t> block = ids.release();  // ids is empty now
    legacy_table table{block};
    hugepage::array<std::uint32_t> back = hugepage::array<std::uint32_t>::adopt(table.rows);
    table.rows = back.release();
    // end snippet
    legacy_free(table);
  }

  // snippet: pmr
  // Every std::pmr container built without a resource, from here on (set it before any is built):
  std::pmr::set_default_resource(hugepage::pmr::thp_resource());
  std::pmr::vector<double> series(n);  // 32 MiB: mapped on huge pages
  // Or per container, e.g. a pmr node container over a shared arena:
  hugepage::pmr::arena_resource nodes(hugepage::shared_arena<market_nodes>());
  std::pmr::map<std::uint64_t, double> quotes(&nodes);
  // end snippet
  quotes.emplace(1, series[0]);
  // A container keeps the resource it was built with: resetting the default changes only those
  // built later.
  std::pmr::set_default_resource(nullptr);

  {
    hugepage::array<double> ranks = hugepage::make_array<double>(n);
    // snippet: grow
    // Before: ranks = static_cast<double*>(realloc(ranks, 2 * n * sizeof(double)));
    hugepage::array<double> bigger = hugepage::make_array_for_overwrite<double>(2 * n);
    std::copy(ranks.begin(), ranks.end(), bigger.begin());  // the rest left unwritten, as realloc
    ranks = std::move(bigger);                              // the old block is freed here
    // end snippet
    csr_storage g{hugepage::make_array<std::uint32_t>(3), hugepage::make_array<std::uint32_t>(2)};
    g.offsets[1] = 1;
    g.offsets[2] = 2;
    const id_table t(4);
    t.ids()[0] = static_cast<std::uint32_t>(g.neighbours(1) - g.targets.data());
    book<aapl> b;
    b.add(100, static_cast<std::uint64_t>(ranks.size()));
    // snippet: single
    // Before: auto venue_state = std::make_shared<instrument>();
    auto venue_state = std::allocate_shared<instrument>(market_allocator<instrument>());
    // end snippet
    venue_state->levels.emplace(1, 1);
  }

  // snippet: check
  const hugepage::backing_report p = hugepage::backing_of(prices.data(), n * sizeof(double));
  const hugepage::backing_report m = hugepage::coverage_of("market");  // the shared arena's pages
  std::printf("prices %.1f%% huge, market nodes %.1f%% huge in %zu MiB\n", 100 * p.huge_fraction(),
              100 * m.huge_fraction(), m.bytes >> 20);
  // end snippet
  return copy.instruments.size() == 1000 && quotes.size() == 1 ? 0 : 1;
}
