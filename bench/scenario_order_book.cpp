// bench/scenario_order_book.cpp - scenarios 1 and 3: a matching engine's order book under an
// open-loop request mix, on a quiet machine and on a fragmented one.
//
// The book: per side a std::map of price -> level, each level a std::list of orders (node
// containers), and an id index in an absl::flat_hash_map (id -> side, price, list position).
// glibc and the process-wide peers put all of it in malloc; ours (docs/allocators.md,
// docs/arena.md) puts the index on the 2 MiB pool when it has room (else collapse_allocator) and
// the nodes in a hugepage arena over the same pages. Requests: 40% add (a new order at a random
// price; a cancel instead while the book is above its size), 25% cancel (a random recent id; one
// already gone is a miss, as a cancel racing a fill is), 10% match (the best bid's oldest order
// fills), 25% lookup (an id's order). The working set is the book's live bytes.
//
// Scenario 3 (Scenario_OrderBookFragmented) is the same run with one step before the build:
// fragment_first() fragments the machine's free memory (bench/fragmenter.hpp: no free 2 MiB block
// left in any zone), and the child holding the fragments lives until the row ends. The hugetlb
// pool that ours draws on was reserved before (scripts/bench --scenarios), as a service reserves
// it at boot.
#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common.hpp"
#include "fragmenter.hpp"
#include "nodes.hpp"
#include "registry.hpp"
#include "scenario_engine.hpp"

namespace hugepage_bench {
namespace {

struct order {
  u64 id = 0;
  std::uint32_t qty = 0;
  std::uint32_t price = 0;
};

constexpr std::uint32_t mid_price = 1'000'000;
constexpr std::uint32_t price_levels = 4096;  // per side
// A list node (two pointers and the order) and the index's slot (24 bytes and a control byte).
constexpr std::size_t bytes_per_order = 32 + 16 + 40;

template <class Inner>
struct book {
  using source_type = node_source<Inner>;
  template <class T>
  using node_alloc_of = typename source_type::template alloc<T>;
  using order_list = std::list<order, node_alloc_of<order>>;
  struct level {
    explicit level(order_list o) : orders(std::move(o)) {}
    order_list orders;
  };
  using side_map = std::map<std::uint32_t, level, std::less<>,
                            node_alloc_of<std::pair<const std::uint32_t, level>>>;
  struct locator {
    bool bid = false;
    std::uint32_t price = 0;
    typename order_list::iterator at;
  };
  using index_map = absl::flat_hash_map<u64, locator, absl::Hash<u64>, std::equal_to<u64>,
                                        recording_allocator<std::pair<const u64, locator>, Inner>>;

  source_type source;  // first: outlives the containers
  side_map bids{source.template get<std::pair<const std::uint32_t, level>>()};
  side_map asks{source.template get<std::pair<const std::uint32_t, level>>()};
  index_map index;
  u64 next_id = 0;
  std::size_t target = 0;  // orders the book holds
  u64 misses = 0;

  void add(u64 r) {
    const bool bid = (r & 1) != 0;
    const auto offset = static_cast<std::uint32_t>(index_of(r, price_levels)) + 1;
    const std::uint32_t price = bid ? mid_price - offset : mid_price + offset;
    side_map& side = bid ? bids : asks;
    auto lv = side.find(price);
    if (lv == side.end()) {
      lv = side.emplace(price, level(order_list(source.template get<order>()))).first;
    }
    const u64 id = next_id++;
    lv->second.orders.push_back(order{id, static_cast<std::uint32_t>(r >> 40) | 1, price});
    index.emplace(id, locator{bid, price, std::prev(lv->second.orders.end())});
  }
  void remove(typename index_map::iterator it) {
    const locator& l = it->second;
    side_map& side = l.bid ? bids : asks;
    const auto lv = side.find(l.price);
    lv->second.orders.erase(l.at);
    if (lv->second.orders.empty()) side.erase(lv);
    index.erase(it);
  }
  void cancel(u64 r) {
    const u64 window = std::min<u64>(next_id, target + target / 2);
    const auto it = index.find(next_id - 1 - index_of(r, window));
    if (it == index.end()) {
      ++misses;
      return;
    }
    remove(it);
  }
  void match() {
    if (bids.empty()) return;
    const order& best = std::prev(bids.end())->second.orders.front();
    remove(index.find(best.id));
  }
  std::uint32_t lookup(u64 r) {
    const auto it = index.find(index_of(r, next_id));
    if (it == index.end()) return 0;
    return it->second.at->qty;
  }
  void request(u64 i) {
    const u64 r = mix_index(i ^ 0x5eed);
    const u64 pick = r % 100;
    if (pick < 40) {
      if (index.size() < target) {
        add(r >> 7);
      } else {
        cancel(r >> 7);
      }
    } else if (pick < 65) {
      cancel(r >> 7);
    } else if (pick < 75) {
      match();
    } else {
      benchmark::DoNotOptimize(lookup(r >> 7));
    }
  }
  std::size_t live_bytes() const {
    return index.capacity() * (sizeof(typename index_map::value_type) + 1) +
           index.size() * (sizeof(order) + 2 * sizeof(void*)) + (bids.size() + asks.size()) * 80;
  }
};

struct order_book_plan {
  double rate = 0;
  std::chrono::milliseconds duration{};
};

order_book_plan plan_for(std::size_t working_set) {
  // 100,000 requests a second; 2 s in --quick (working sets below 1 GiB), 30 s in a full run.
  const bool quick = working_set < gib;
  return {100'000.0, std::chrono::milliseconds(quick ? 2000 : 30000)};
}

template <class Inner>
void run_book(benchmark::State& state, std::size_t working_set, const std::string& which) {
  const auto t0 = std::chrono::steady_clock::now();
  auto b = std::make_unique<book<Inner>>();
  b->source.ready();
  b->target = working_set / bytes_per_order;
  b->index.reserve(b->target);
  for (u64 i = 0; i < b->target; ++i) b->add(mix_index(i));
  scenario_figures f;
  f.startup_ms = ms_since(t0);
  const block_record table = largest_block;
  const auto coverage = [table] { return table.p ? coverage_pct(table.p, table.bytes) : -1.0; };
  const order_book_plan plan = plan_for(working_set);
  reset_peak_rss();
  begin_kernel_counts(f);
  {
    sampler s(std::chrono::milliseconds(100), coverage);
    f.sampled_from = s.start();
    f.loop = run_open_loop(plan.rate, plan.duration, [&b](u64 i) { b->request(i); });
    s.stop();
    f.samples = s.samples();
  }
  end_kernel_counts(f);
  f.live_bytes = b->live_bytes();
  f.huge_pct = coverage();
  report_scenario(state, f);
  if constexpr (node_source<Inner>::uses_arena) {
    state.counters["nodes_huge_pct"] = 100 * b->source.huge_fraction();
    const hugepage::arena_stats nodes = b->source.nodes.stats();
    state.counters["nodes_live_mib"] = static_cast<double>(nodes.live_bytes) / mib;
    state.counters["nodes_mapped_mib"] = static_cast<double>(nodes.mapped_bytes) / mib;
  }
  state.counters["cancel_misses"] = static_cast<double>(b->misses);
  state.SetLabel(which == "malloc" ? which : which + ", nodes in an arena on its pages");
}

// The fragmenter's defaults: the child fills free memory down to 2 GiB available, then gives back
// every other page of it, so about half of what it took is free again in single pages (here about
// 8 GiB): room for the order book, which checks for twice its working set. A higher floor leaves
// the zone it reaches last (DMA32) with free 2 MiB blocks. Its time grows with the memory to
// fill: about 5 s a GiB on the 2-core AMD EPYC VM when quiet (2026-11-29: 95-110 s for 20 GiB),
// and a loaded machine stopped it at the 2 minutes of the default before it reached DMA32. So
// 12 s a GiB above what it keeps available, never less than the default.
std::shared_ptr<fragmenter> fragment_first(std::string& why, bool& failed) {
  fragmenter::options o;
  const std::size_t available = mem_available_bytes();
  const std::size_t to_fill =
      available > o.keep_available_bytes ? available - o.keep_available_bytes : 0;
  o.deadline = std::max(o.deadline, std::chrono::milliseconds(12'000 * ((to_fill >> 30) + 1)));
  return fragmented_machine(o, why, failed);
}

// Which machine the order book runs on: as it is, or fragmented first (fragment_first).
enum class machine { as_is, fragmented };

template <machine On>
void order_book(benchmark::State& state, alloc_kind k, std::size_t working_set) {
  std::shared_ptr<fragmenter> fragments;
  if (On == machine::fragmented) {
    std::string why;
    bool failed = false;
    fragments = fragment_first(why, failed);
    if (!fragments) {
      std::replace(why.begin(), why.end(), '\n', ' ');  // one line: a table cell
      if (failed) {
        fail_row(state, "fragment first: " + why);
      } else {
        state.SkipWithError(("fragment first failed: " + why).c_str());
      }
      return;
    }
  }
  drop_cache();
  if (const std::string why = shortage(alloc_kind::std_alloc, working_set * 2); !why.empty()) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) {
    try {
      std::string which;
      with_inner(k, working_set + working_set / 2, which,
                 [&](auto inner) { run_book<decltype(inner)>(state, working_set, which); });
      // The fragments must have been held for the whole row: a child that died let the kernel
      // have its memory back, and the row ran on a machine that was not fragmented.
      if (fragments) {
        if (const std::string how = fragments->child_ended(); !how.empty()) {
          fail_row(state, fmt::format("the fragmenter's child {} during the row (it held {} MiB)",
                                      how, fragments->held_bytes() >> 20));
          return;
        }
      }
    } catch (const std::exception& e) {
      state.SkipWithError(fmt::format("order book failed: {}", e.what()).c_str());
      return;
    }
  }
}

suite_info book_info(const char* name, int order, bench_fns fns, const char* what) {
  suite_info s(name, order, fns);
  s.in_family("scenarios")
      .describe(what)
      .per_op_unit("ms/run")
      .slow()
      .only_for({alloc_kind::std_alloc, alloc_kind::hugetlb_2m})
      .with_sizes({2 * gib}, {32 * mib})
      .scenario()
      .own_process()
      .peers(peer_role::every_full_run);
  return s;
}

const bool order_book_declared = declare(book_info(
    "Scenario_OrderBook", 200, per_allocator(&order_book<machine::as_is>),
    "a matching engine: std::map price levels of std::list orders and an absl::flat_hash_map id "
    "index; 100k requests/s open loop (add/cancel/match/lookup), each timed; one iteration = "
    "build + 2 s (quick) or 30 s of requests"));

const bool fragmented_declared = declare(
    book_info(
        "Scenario_OrderBookFragmented", 201, per_allocator(&order_book<machine::fragmented>),
        "the order book after fragment_first: free memory fragmented (no free 2 MiB block, or "
        "none that THP faults are given), then build and run")
        // Its own process's entries (own_compactions.hpp): vmstat's compact_stall is every
        // process's, and the fragmenter's and the runner's raised it in every row.
        .target(target_info("ours never enters direct compaction during the request loop")
                    .value("own_direct_compactions", "hugetlb_2m")
                    .at_most(0))
        .target(target_info("ours p99.9 within 1.2x of its unfragmented run")
                    .value("lat_p999_ns", "hugetlb_2m")
                    .over_suite("Scenario_OrderBook")
                    .at_most(1.2)));

}  // namespace
}  // namespace hugepage_bench
