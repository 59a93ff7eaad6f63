// bench/nodes.hpp - the node containers of suites_nodes.cpp (std::map, std::unordered_map,
// absl::node_hash_map of u64 -> u64), where their nodes come from per row, and the process's
// memory as smaps_rollup counts it.
#pragma once

#include <absl/container/node_hash_map.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/pmr.hpp"
#include "peers.hpp"
#include "registry.hpp"

namespace hugepage_bench {

inline constexpr std::size_t bytes_per_element = 48;
using node_value = std::pair<const u64, u64>;

// Where nodes come from, per row: std::allocator for std; for our byte allocators an arena over
// the allocator's strategy (thp = "arena over THP"); a std::pmr pool over
// hugepage::pmr::thp_resource() (pmr_pool); the thread-safe arena over THP (arena_mt); a peer
// loaded into the process (--paired only).
struct pmr_pool_nodes {};
struct arena_mt_nodes {};
template <loaded_peer& (*Peer)()>
struct peer_nodes {};

template <class Inner>
struct node_source {
  static constexpr bool uses_arena = true;
  template <class T>
  using alloc = hugepage::arena_allocator<T, hugepage::unsynchronized_arena>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(nodes);
  }
  double huge_fraction() const { return nodes.backing().huge_fraction(); }
  /// Takes the arena's first page (a slot allocated and freed: the empty page is kept), so that
  /// an arena that cannot get one throws before a container is built on it.
  void ready() { nodes.deallocate(nodes.allocate(1, 1), 1, 1); }
  hugepage::unsynchronized_arena nodes{Inner::get_strategy()};
};
template <>
struct node_source<arena_mt_nodes> {
  static constexpr bool uses_arena = true;
  template <class T>
  using alloc = hugepage::arena_allocator<T, hugepage::arena>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(nodes);
  }
  double huge_fraction() const { return nodes.backing().huge_fraction(); }
  void ready() { nodes.deallocate(nodes.allocate(1, 1), 1, 1); }
  hugepage::arena nodes{hugepage::strategy::thp()};
};
template <>
struct node_source<std_bytes> {
  static constexpr bool uses_arena = false;
  template <class T>
  using alloc = std::allocator<T>;
  template <class T>
  alloc<T> get() {
    return {};
  }
  double huge_fraction() const { return 0; }
  void ready() {}
};
template <>
struct node_source<pmr_pool_nodes> {
  static constexpr bool uses_arena = false;
  template <class T>
  using alloc = std::pmr::polymorphic_allocator<T>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(&pool);
  }
  double huge_fraction() const { return 0; }
  void ready() {}
  std::pmr::unsynchronized_pool_resource pool{hugepage::pmr::thp_resource()};
};
template <loaded_peer& (*Peer)()>
struct node_source<peer_nodes<Peer>> {
  static constexpr bool uses_arena = false;
  template <class T>
  using alloc = peer_allocator<T, Peer>;
  template <class T>
  alloc<T> get() {
    return {};
  }
  double huge_fraction() const { return 0; }
  void ready() {
    if (!Peer().why_not.empty()) throw std::runtime_error(Peer().why_not);
  }
};

template <class Inner>
using node_alloc = typename node_source<Inner>::template alloc<node_value>;

// The three containers: a type and its live bytes (nodes plus bucket or slot arrays).
struct std_map {
  template <class Inner>
  using type = std::map<u64, u64, std::less<u64>, node_alloc<Inner>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * 48;  // tree header (32) + the pair
  }
};
struct std_unordered_map {
  template <class Inner>
  using type = std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>, node_alloc<Inner>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * 24 + m.bucket_count() * sizeof(void*);
  }
};
struct node_hash_map {
  template <class Inner>
  using type =
      absl::node_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>, node_alloc<Inner>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * 16 + m.capacity() * (sizeof(void*) + 1);
  }
};

// A container with its node source; the source is declared first, so it outlives the container.
template <class C, class Inner>
struct node_container {
  node_source<Inner> source;
  typename C::template type<Inner> map{source.template get<node_value>()};
  u64 oldest = 0;  // churn: elements [oldest, oldest + n) are present
};

// Bytes from /proc/self/smaps_rollup. hugetlb pages are not in Rss: `resident` adds them (private
// and shared: the kernel may count a private 1 GiB page as shared, seen on Linux 6.18).
struct memory_snapshot {
  double rss = 0, anon_huge = 0, hugetlb = 0;
  double resident() const { return rss + hugetlb; }
  double huge() const { return anon_huge + hugetlb; }
};
inline memory_snapshot read_rollup() {
  const hugepage::smaps_totals t = hugepage::read_smaps_rollup().value_or(hugepage::smaps_totals{});
  return {static_cast<double>(t.rss), static_cast<double>(t.anon_huge),
          static_cast<double>(t.hugetlb)};
}

// ---- --paired: every backend's container in one process ----------------------------------------

// Lookups and erase+insert pairs per contender per round: a batch takes a few milliseconds, so
// every contender of a round runs within a second of the others.
inline constexpr std::size_t paired_lookups = std::size_t{1} << 17;
inline constexpr std::size_t paired_churn = std::size_t{1} << 15;

/// A node container built for --paired, with what its build cost. The Lookup and Churn rows of
/// one container and working set share it (paired_containers): the lookups run first.
template <class C, class Inner>
struct paired_container {
  node_container<C, Inner> c;
  std::vector<std::pair<std::string, double>> facts;
};

/// Builds (or finds) container C of `working_set` bytes with nodes from `Inner`. Throws, with the
/// reason, when it cannot be had; a container without the strong guarantee that an insert threw
/// into is abandoned, not destroyed (its destructor would free what was never allocated).
template <class C, class Inner, class Strong>
std::shared_ptr<paired_container<C, Inner>> paired_build(alloc_kind k, std::size_t working_set) {
  const std::string group = fmt::format("{}/{}", typeid(C).name(), working_set);
  if (paired_built.group != group) paired_built = paired_cache{group, {}};
  auto& slot = paired_built.built[typeid(Inner).name()];
  if (slot) return std::static_pointer_cast<paired_container<C, Inner>>(slot);
  if (const std::string why = shortage(k, working_set + working_set / 8); !why.empty()) {
    throw std::runtime_error(why);
  }
  const u64 n = working_set / bytes_per_element;
  const memory_snapshot before = read_rollup();
  auto* raw = new paired_container<C, Inner>();
  raw->c.source.ready();
  const auto start = std::chrono::steady_clock::now();
  try {
    for (u64 i = 0; i < n; ++i) raw->c.map.emplace(key_of(i), i);
  } catch (const std::exception& e) {
    if (!Strong::value) {
      throw std::runtime_error(std::string(e.what()) +
                               " (during the build: the container was abandoned, not destroyed)");
    }
    delete raw;
    throw;
  }
  std::shared_ptr<paired_container<C, Inner>> p(raw);
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const memory_snapshot built = read_rollup();
  const double added = built.resident() - before.resident();
  const auto live = static_cast<double>(C::live_bytes(p->c.map));
  p->facts = {{"build_ns", build_s * 1e9 / static_cast<double>(n)},
              {"container_mib", live / static_cast<double>(mib)}};
  // Growth of the process says nothing when the build reused memory an allocator kept from an
  // earlier container (glibc and the peers do): then it is left out.
  if (added >= live / 2) {
    p->facts.emplace_back("rss_over_live", added / live);
    p->facts.emplace_back("huge_pct", 100.0 * (built.huge() - before.huge()) / added);
  }
  if constexpr (node_source<Inner>::uses_arena) {
    p->facts.emplace_back("coverage_pct", 100.0 * p->c.source.huge_fraction());
  } else if (added >= live / 2) {
    p->facts.emplace_back("coverage_pct", 100.0 * (built.huge() - before.huge()) / added);
  }
  slot = p;
  return p;
}

/// The contender of container C with nodes from Inner: a batch of random hits (Churn false: the
/// same keys for every contender of a round) or of erase-the-oldest + emplace (Churn true).
template <class C, class Inner, class Strong, bool Churn>
contender node_contender(alloc_kind k, std::size_t working_set) {
  auto p = paired_build<C, Inner, Strong>(k, working_set);
  contender out;
  out.facts = p->facts;
  out.owner = p;
  auto* c = &p->c;
  const u64 n = working_set / bytes_per_element;
  out.batch = [c, n](u64 round) {
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (Churn) {
      for (std::size_t i = 0; i < paired_churn; ++i) {
        c->map.erase(key_of(c->oldest));
        c->map.emplace(key_of(c->oldest + n), c->oldest + n);
        ++c->oldest;
      }
    } else {
      u64 sum = 0;
      for (std::size_t i = 0; i < paired_lookups; ++i) {
        const auto it = c->map.find(key_of(index_of(round * paired_lookups + i, n)));
        sum += it == c->map.end() ? 1 : it->second;
      }
      benchmark::DoNotOptimize(sum);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return ns / static_cast<double>(Churn ? paired_churn : paired_lookups);
  };
  return out;
}

/// The contenders of --paired for container C: glibc, the arena over THP, a pmr pool over THP,
/// the arena over 1 GiB pages, jemalloc and mimalloc. `Strong`: whether an insert that throws
/// leaves C as it was.
template <class C, class Strong, bool Churn>
std::vector<paired_entry> node_contenders() {
  const auto entry = [](const char* name, const char* role, alloc_kind k, auto make) {
    return paired_entry{name, role, [k, make](std::size_t ws) { return make(k, ws); }};
  };
  return {
      entry("std", "baseline", alloc_kind::std_alloc, node_contender<C, std_bytes, Strong, Churn>),
      entry("thp", "ours", alloc_kind::thp, node_contender<C, thp_bytes, Strong, Churn>),
      entry("pmr_pool", "ours", alloc_kind::pmr_pool,
            node_contender<C, pmr_pool_nodes, Strong, Churn>),
      entry("hugetlb_1g", "ours", alloc_kind::hugetlb_1g,
            node_contender<C, hugetlb_1g_bytes, Strong, Churn>),
      entry("jemalloc", "peer", alloc_kind::std_alloc,
            node_contender<C, peer_nodes<jemalloc_peer>, Strong, Churn>),
      entry("mimalloc", "peer", alloc_kind::std_alloc,
            node_contender<C, peer_nodes<mimalloc_peer>, Strong, Churn>),
  };
}

}  // namespace hugepage_bench
