// examples/order_book.hpp - a limit order book whose price levels are node containers: the core of
// examples/order_book.cpp, templated on the allocator family so that a program (or a benchmark)
// switches between std::allocator and huge pages with one type alias.
//
//   template <class T>
//   using nodes = hugepage::shared_arena_allocator<T, my_tag>;  // or std::allocator<T>
//   hugepage_examples::basic_order_book<nodes> book;        // default-constructible, copyable
//   book.add(/*id=*/1, hugepage_examples::side::sell, /*price=*/10'050, /*quantity=*/200);
//   book.add(2, hugepage_examples::side::buy, 10'060, 50);  // crosses: 50 filled at 10'050
//   book.cancel(1);
//
// Self-contained: the standard library only. Not thread-safe (one book, one thread, as in most
// matching engines); a const book may be read from several threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

namespace hugepage_examples {

enum class side : std::uint8_t { buy, sell };

/// A resting order.
struct order {
  std::uint64_t id = 0;
  std::int64_t price = 0;  ///< in ticks
  std::uint32_t quantity = 0;
  side which = side::buy;
};

/// What add() did: the quantity filled against resting orders and the orders it emptied.
struct fill_result {
  std::uint64_t filled = 0;
  std::uint64_t orders_filled = 0;
  bool rested = false;  ///< whether a remainder now rests in the book
};

/// A price-time priority limit order book. `Alloc` is an allocator family: `Alloc<T>` allocates
/// T (std::allocator, hugepage::shared_arena_allocator<T, Tag>, ...; it must be
/// default-constructible, as the members are built without arguments).
///
/// Members: both sides are std::multimap (one node per resting order, keyed so that the best price
/// comes first; equal keys keep arrival order), and an std::unordered_map from order id to its
/// node for cancel. All three are members built with no constructor argument.
template <template <class> class Alloc = std::allocator>
class basic_order_book {
  // Bids are keyed by the negated price so that both sides are the same type, best first.
  using level_map = std::multimap<std::int64_t, order, std::less<std::int64_t>,
                                  Alloc<std::pair<const std::int64_t, order>>>;
  using index_map =
      std::unordered_map<std::uint64_t, typename level_map::iterator, std::hash<std::uint64_t>,
                         std::equal_to<std::uint64_t>,
                         Alloc<std::pair<const std::uint64_t, typename level_map::iterator>>>;

 public:
  basic_order_book() = default;
  /// A copy: the sides copied, the index rebuilt against them (it holds iterators).
  basic_order_book(const basic_order_book& other) : bids_(other.bids_), asks_(other.asks_) {
    index_.reserve(other.index_.size());
    for (auto it = bids_.begin(); it != bids_.end(); ++it) index_.emplace(it->second.id, it);
    for (auto it = asks_.begin(); it != asks_.end(); ++it) index_.emplace(it->second.id, it);
  }
  /// Copy and swap: when the copy throws (the allocator's exceptions), the book is unchanged.
  basic_order_book& operator=(const basic_order_book& other) {
    if (this != &other) *this = basic_order_book(other);
    return *this;
  }
  basic_order_book(basic_order_book&&) noexcept = default;
  basic_order_book& operator=(basic_order_book&&) noexcept = default;
  ~basic_order_book() = default;

  /// A limit order: fills against the other side while prices cross (best price first, then
  /// arrival), and the remainder rests. An id already resting is refused (nothing changes;
  /// returns an empty result). Throws what the allocator throws; the book is then as it was
  /// except for fills already made.
  fill_result add(std::uint64_t id, side which, std::int64_t price, std::uint32_t quantity) {
    fill_result r;
    if (index_.count(id) != 0) return r;
    level_map& other = which == side::buy ? asks_ : bids_;
    while (quantity > 0 && !other.empty()) {
      auto best = other.begin();
      order& resting = best->second;
      if (which == side::buy ? resting.price > price : resting.price < price) break;
      const std::uint32_t traded = std::min(quantity, resting.quantity);
      quantity -= traded;
      resting.quantity -= traded;
      r.filled += traded;
      if (resting.quantity == 0) {
        index_.erase(resting.id);
        other.erase(best);
        ++r.orders_filled;
      }
    }
    if (quantity > 0) {
      level_map& mine = which == side::buy ? bids_ : asks_;
      const auto it = mine.emplace(key_of(which, price), order{id, price, quantity, which});
      try {
        index_.emplace(id, it);
      } catch (...) {
        mine.erase(it);
        throw;
      }
      r.rested = true;
    }
    return r;
  }

  /// Removes the resting order `id`; false when there is none.
  bool cancel(std::uint64_t id) {
    const auto found = index_.find(id);
    if (found == index_.end()) return false;
    const auto it = found->second;
    (it->second.which == side::buy ? bids_ : asks_).erase(it);
    index_.erase(found);
    return true;
  }

  /// The best bid and ask prices, when that side has orders.
  std::optional<std::int64_t> best_bid() const {
    if (bids_.empty()) return std::nullopt;
    return bids_.begin()->second.price;
  }
  std::optional<std::int64_t> best_ask() const {
    if (asks_.empty()) return std::nullopt;
    return asks_.begin()->second.price;
  }

  /// Quantity resting at `price` on `which` side.
  std::uint64_t volume_at(side which, std::int64_t price) const {
    const level_map& mine = which == side::buy ? bids_ : asks_;
    std::uint64_t total = 0;
    const auto range = mine.equal_range(key_of(which, price));
    for (auto it = range.first; it != range.second; ++it) total += it->second.quantity;
    return total;
  }

  /// Resting orders, both sides.
  std::size_t size() const noexcept { return index_.size(); }
  std::size_t bids() const noexcept { return bids_.size(); }
  std::size_t asks() const noexcept { return asks_.size(); }

 private:
  static std::int64_t key_of(side which, std::int64_t price) noexcept {
    return which == side::buy ? -price : price;
  }

  level_map bids_;
  level_map asks_;
  index_map index_;
};

}  // namespace hugepage_examples
