// arena_bench: node containers with the hugepage arena against what a user could do instead.
//
// Containers: std::map<uint64_t, uint64_t>, std::unordered_map<uint64_t, uint64_t>,
// absl::node_hash_map<uint64_t, uint64_t>. Allocators ("backends"):
//   std      std::allocator (glibc malloc)
//   arena    hugepage::arena_allocator over an unsynchronized_arena (THP pages)
//   arena_mt hugepage::arena_allocator over the thread-safe arena (one mutex per size class)
//   pmr_pool std::pmr::unsynchronized_pool_resource over hugepage::pmr::thp_resource()
// BM_Paired_<Container> adds the arena over 1 GiB pages and jemalloc and mimalloc loaded into the
// same process (below), and alternates all of them round by round (--rounds=N, default 15; with
// --round-seconds=S, more rounds until S seconds of them).
//
// One benchmark row per (container, backend, size). A size is the container's live bytes (--sizes,
// default 64M,256M,1G), so a hash map holds more elements than a std::map of the same size; the
// row's name carries the element count. Each repetition builds the container from random keys, then
// looks up present keys in random order, then runs a steady-state churn of erase + insert; each
// phase is timed by hand. Counters:
//   build_ns, lookup_ns, churn_ns   ns per insert / per lookup / per erase+insert
//   live_mib               the container's live bytes: nodes plus bucket / slot arrays
//   rss_over_live          growth of the process's RSS during the build over live_mib
//   huge_share             AnonHugePages / Rss growth during the build (smaps_rollup)
//   coverage               arena rows: share of the arena's pages on huge pages (backing_of)
// Run with --benchmark_repetitions=N --benchmark_enable_random_interleaving=true and read medians:
// the machine this was written on is shared and noisy.
#include <absl/container/node_hash_map.h>
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/pmr.hpp"
#include "hugepage/system.hpp"

namespace {

using u64 = std::uint64_t;
using value_type = std::pair<const u64, u64>;
constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kLookups = std::size_t{1} << 21;
constexpr std::size_t kChurn = std::size_t{1} << 20;

// ---- backends ---------------------------------------------------------------------------------

struct std_backend {
  static constexpr const char* name = "std";
  template <class T>
  using alloc = std::allocator<T>;
  template <class T>
  alloc<T> get() {
    return {};
  }
  const hugepage::unsynchronized_arena* arena() const { return nullptr; }
  void ready() {}
};

// Takes the arena's first huge page (a slot allocated and freed: the empty page is retained), so
// that an arena that cannot get a page throws before a container is built on it.
template <class Arena>
void take_first_page(Arena& nodes) {
  nodes.deallocate(nodes.allocate(1, 1), 1, 1);
}

template <class Arena>
struct arena_backend {
  static constexpr const char* name = std::is_same_v<Arena, hugepage::arena> ? "arena_mt" : "arena";
  template <class T>
  using alloc = hugepage::arena_allocator<T, Arena>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(nodes);
  }
  const Arena* arena() const { return &nodes; }
  void ready() { take_first_page(nodes); }
  Arena nodes;
};

struct pmr_pool_backend {
  static constexpr const char* name = "pmr_pool";
  template <class T>
  using alloc = std::pmr::polymorphic_allocator<T>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(&pool);
  }
  const hugepage::unsynchronized_arena* arena() const { return nullptr; }
  void ready() {}
  std::pmr::unsynchronized_pool_resource pool{hugepage::pmr::thp_resource()};
};

// ---- containers -------------------------------------------------------------------------------

struct std_map {
  static constexpr const char* name = "StdMap";
  static constexpr bool strong_insert = true;    // an insert that throws changes nothing
  static constexpr std::size_t node_bytes = 48;  // 32-byte tree header + the pair
  static constexpr std::size_t min_bytes_per_element = node_bytes;
  template <class B>
  using type = std::map<u64, u64, std::less<u64>, typename B::template alloc<value_type>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * node_bytes;
  }
};

struct std_unordered_map {
  static constexpr const char* name = "StdUnorderedMap";
  static constexpr bool strong_insert = true;
  static constexpr std::size_t node_bytes = 24;  // next pointer + the pair (hash not cached)
  // A node and at least one bucket pointer per element (the load factor stays <= 1).
  static constexpr std::size_t min_bytes_per_element = node_bytes + sizeof(void*);
  template <class B>
  using type = std::unordered_map<u64, u64, std::hash<u64>, std::equal_to<u64>,
                                  typename B::template alloc<value_type>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * node_bytes + m.bucket_count() * sizeof(void*);
  }
};

struct absl_node_hash_map {
  static constexpr const char* name = "NodeHashMap";
  // A throwing allocator leaves the table inconsistent (README, "Node arena"): growth records the
  // new capacity before it allocates, an insert marks its slot full before it allocates the node.
  static constexpr bool strong_insert = false;
  static constexpr std::size_t node_bytes = 16;  // the pair; the slot array holds pointers
  // The pair, and a slot pointer and a control byte for each of at least 8/7 slots per element
  // (26.3 bytes); 32 keeps the counts powers of two, which absl's tables hold at about half load
  // (live bytes about 1.1x the size asked for).
  static constexpr std::size_t min_bytes_per_element = 32;
  template <class B>
  using type = absl::node_hash_map<u64, u64, absl::Hash<u64>, std::equal_to<u64>,
                                   typename B::template alloc<value_type>>;
  template <class M>
  static std::size_t live_bytes(const M& m) {
    return m.size() * node_bytes + m.capacity() * (sizeof(void*) + 1);  // slots + control bytes
  }
};

// ---- inputs -----------------------------------------------------------------------------------

u64 splitmix(u64& state) {
  u64 z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// n distinct random keys (odd: the churn inserts even ones, never present).
const std::vector<u64>& keys_for(std::size_t n) {
  static std::map<std::size_t, std::vector<u64>> cache;
  auto& keys = cache[n];
  if (keys.empty()) {
    u64 state = n;
    keys.resize(n);
    for (auto& k : keys) k = splitmix(state) | 1;
  }
  return keys;
}

struct proc_memory {
  double rss = 0, anon_huge = 0, hugetlb = 0;  // bytes; hugetlb pages are not in Rss
};

proc_memory read_memory() {
  std::error_code ec;
  const std::string text = hugepage::detail::read_file("/proc/self/smaps_rollup", ec);
  proc_memory m;
  auto field = [&text](const char* name) {
    const auto at = text.find(name);
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + std::strlen(name))) * 1024;
  };
  if (!ec) {
    m.rss = field("\nRss:");
    m.anon_huge = field("\nAnonHugePages:");
    // Both: the kernel may count a private 1 GiB page as shared (seen on Linux 6.18).
    m.hugetlb = field("\nPrivate_Hugetlb:") + field("\nShared_Hugetlb:");
  }
  return m;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- the benchmark ----------------------------------------------------------------------------

template <class C, class B>
void BM_Node(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<u64>& keys = keys_for(n);
  std::vector<u64> probes(kLookups);
  u64 seed = 42;
  for (auto& p : probes) p = keys[splitmix(seed) % n];

  double live_mib = 0, build_ns = 0, lookup_ns = 0, churn_ns = 0, rss_over_live = 0, huge_share = 0,
         coverage = -1;
  for (auto _ : state) {
    state.PauseTiming();
    ::malloc_trim(0);
    {
      auto backend = std::make_unique<B>();
      const proc_memory before = read_memory();
      auto start = std::chrono::steady_clock::now();
      typename C::template type<B> container(backend->template get<value_type>());
      for (const u64 k : keys) container.emplace(k, k);
      build_ns = seconds_since(start) * 1e9 / static_cast<double>(n);
      const proc_memory built = read_memory();
      live_mib = static_cast<double>(C::live_bytes(container)) / kMiB;
      rss_over_live = (built.rss - before.rss) / static_cast<double>(C::live_bytes(container));
      huge_share = (built.anon_huge - before.anon_huge) / std::max(1.0, built.rss - before.rss);
      if (const auto* a = backend->arena()) coverage = a->backing().huge_fraction();
      state.ResumeTiming();

      start = std::chrono::steady_clock::now();
      u64 sum = 0;
      for (const u64 p : probes) sum += container.find(p)->second;
      benchmark::DoNotOptimize(sum);
      lookup_ns = seconds_since(start) * 1e9 / static_cast<double>(kLookups);

      state.PauseTiming();
      u64 churn_seed = 7;
      u64 fresh = 0;
      start = std::chrono::steady_clock::now();
      std::vector<u64> inserted;
      inserted.reserve(kChurn);
      for (std::size_t i = 0; i < kChurn; ++i) {
        // Erase an original key or an earlier insert, insert a new even key: size stays n.
        const u64 victim = (i % 2 == 0 || inserted.empty())
                               ? keys[splitmix(churn_seed) % n]
                               : inserted[splitmix(churn_seed) % inserted.size()];
        container.erase(victim);
        fresh += 2;
        container.emplace(fresh, fresh);
        inserted.push_back(fresh);
      }
      churn_ns = seconds_since(start) * 1e9 / static_cast<double>(kChurn);
    }
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kLookups));
  state.counters["lookup_ns"] = lookup_ns;
  state.counters["build_ns"] = build_ns;
  state.counters["churn_ns"] = churn_ns;
  state.counters["live_mib"] = live_mib;
  state.counters["rss_over_live"] = rss_over_live;
  state.counters["huge_share"] = huge_share;
  if (coverage >= 0) state.counters["coverage"] = coverage;
}

// ---- process-wide peers, in this process ---------------------------------------------------

// jemalloc and mimalloc as Debian ships them (libjemalloc2, libmimalloc2.0), dlopen()ed with
// RTLD_LOCAL: their malloc does not replace glibc's, and the allocator below calls their own entry
// points (jemalloc's mallocx/sdallocx, mimalloc's mi_malloc/mi_free_size), so a peer's container
// runs in the same process as the arena's, batch after batch. Each peer gets its documented
// huge-page setting from its environment variable, set before it is loaded unless the caller set
// it: MALLOC_CONF=thp:always,metadata_thp:auto; MIMALLOC_LARGE_OS_PAGES=1 and, where the 1 GiB pool
// has pages to spare, MIMALLOC_RESERVE_HUGE_OS_PAGES (its documented best: 1 GiB pages at
// start-up).
struct loaded_peer {
  const char* name;
  const char* library;
  void* (*allocate)(std::size_t) = nullptr;
  void (*deallocate)(void*, std::size_t) = nullptr;
  std::string why_not;  // non-empty: not loaded
};

namespace jemalloc_entry {
void* (*mallocx)(std::size_t, int) = nullptr;
void (*sdallocx)(void*, std::size_t, int) = nullptr;
void* allocate(std::size_t n) { return mallocx(n, 0); }
void deallocate(void* p, std::size_t n) { sdallocx(p, n, 0); }
}  // namespace jemalloc_entry

std::size_t free_1g_pages() {
  const auto pool = hugepage::read_pool(hugepage::page_size::huge_1g);
  return pool ? static_cast<std::size_t>(pool->available().value_or(0)) : 0;
}

// 1 GiB pages the arena_1g contender keeps for itself at the largest count (1 GiB of nodes plus
// the page headers spill into a second page); mimalloc may reserve what is free beyond them.
constexpr std::size_t kArena1gPages = 2;

loaded_peer& jemalloc_peer() {
  static loaded_peer peer = [] {
    loaded_peer p{"jemalloc", "libjemalloc.so.2", nullptr, nullptr, {}};
    ::setenv("MALLOC_CONF", "thp:always,metadata_thp:auto", /*overwrite=*/0);
    void* lib = ::dlopen(p.library, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return p.why_not = ::dlerror(), p;
    jemalloc_entry::mallocx =
        reinterpret_cast<void* (*)(std::size_t, int)>(::dlsym(lib, "mallocx"));
    jemalloc_entry::sdallocx =
        reinterpret_cast<void (*)(void*, std::size_t, int)>(::dlsym(lib, "sdallocx"));
    if (jemalloc_entry::mallocx == nullptr || jemalloc_entry::sdallocx == nullptr) {
      return p.why_not = "no mallocx/sdallocx in libjemalloc.so.2", p;
    }
    p.allocate = jemalloc_entry::allocate;
    p.deallocate = jemalloc_entry::deallocate;
    return p;
  }();
  return peer;
}

loaded_peer& mimalloc_peer() {
  static loaded_peer peer = [] {
    loaded_peer p{"mimalloc", "libmimalloc.so.2", nullptr, nullptr, {}};
    ::setenv("MIMALLOC_LARGE_OS_PAGES", "1", /*overwrite=*/0);
    const std::size_t spare = free_1g_pages();
    if (spare > kArena1gPages) {
      ::setenv("MIMALLOC_RESERVE_HUGE_OS_PAGES",
               std::to_string(std::min<std::size_t>(spare - kArena1gPages, 2)).c_str(), 0);
    }
    void* lib = ::dlopen(p.library, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return p.why_not = ::dlerror(), p;
    p.allocate = reinterpret_cast<void* (*)(std::size_t)>(::dlsym(lib, "mi_malloc"));
    p.deallocate = reinterpret_cast<void (*)(void*, std::size_t)>(::dlsym(lib, "mi_free_size"));
    if (p.allocate == nullptr || p.deallocate == nullptr) {
      return p.why_not = "no mi_malloc/mi_free_size in libmimalloc.so.2", p;
    }
    return p;
  }();
  return peer;
}

// A stateless STL allocator over a loaded peer (nodes need at most 16-byte alignment, which both
// peers give every allocation).
template <class T, loaded_peer& (*Peer)()>
struct peer_allocator {
  using value_type = T;
  peer_allocator() = default;
  template <class U>
  peer_allocator(const peer_allocator<U, Peer>&) noexcept {}  // NOLINT: rebinding converts
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= 16, "the peers align to 16 bytes");
    void* p = Peer().allocate(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept { Peer().deallocate(p, n * sizeof(T)); }
  template <class U>
  struct rebind {
    using other = peer_allocator<U, Peer>;
  };
  friend bool operator==(const peer_allocator&, const peer_allocator&) noexcept { return true; }
  friend bool operator!=(const peer_allocator&, const peer_allocator&) noexcept { return false; }
};

template <loaded_peer& (*Peer)()>
struct peer_backend {
  template <class T>
  using alloc = peer_allocator<T, Peer>;
  template <class T>
  alloc<T> get() {
    return {};
  }
  const hugepage::unsynchronized_arena* arena() const { return nullptr; }
  void ready() {}
};

// The arena over 1 GiB pages: 2 MiB slabs carved from them, shared by the size classes.
struct arena_1g_backend {
  template <class T>
  using alloc = hugepage::arena_allocator<T, hugepage::unsynchronized_arena>;
  template <class T>
  alloc<T> get() {
    return alloc<T>(nodes);
  }
  const hugepage::unsynchronized_arena* arena() const { return &nodes; }
  void ready() { take_first_page(nodes); }
  hugepage::unsynchronized_arena nodes{hugepage::strategy::hugetlb(hugepage::page_size::huge_1g)};
};

// ---- paired rounds ----------------------------------------------------------------------------

// On a shared, noisy machine the load changes from second to second. BM_Paired_<Container> builds
// the container once per contender from the same keys, then alternates short batches of lookups
// and of churn between them, round after round, and reports the median over rounds of each
// contender's ns per operation and of the per-round ratios to the arena (>1: the arena is faster):
// the contenders of one round ran within seconds of each other. Contenders: glibc (std), the arena
// over THP, a pmr pool over THP, the arena over 1 GiB pages and jemalloc and mimalloc (where they
// can be had; otherwise the row's label says why not).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

constexpr std::size_t kPairedBatch = 1 << 17;  // lookups per contender per round
constexpr std::size_t kPairedChurn = 1 << 15;  // erase + insert pairs per contender per round

// One container with its backend, behind a type-erased face: build, a batch of lookups, a batch
// of churn, each returning ns per operation.
struct contender {
  std::string name;
  std::function<double(const std::vector<u64>&)> lookups;
  std::function<double(u64&, u64)> churn;
  std::function<double()> coverage;  // < 0: not an arena
  std::shared_ptr<void> owner;
  double build_ns = 0;
  double huge_share = 0;       // huge pages over what the build added to the process (smaps_rollup)
  double rss_over_live = 0;    // what the build added over the container's live bytes
  std::size_t live_bytes = 0;  // the container's, after the build
};

template <class C, class B>
contender make_contender(std::string name, const std::vector<u64>& keys) {
  using map_type = typename C::template type<B>;
  // The container is destroyed with its backend, unless an insert threw into a container without
  // the strong guarantee: then its destructor would free what was never allocated, and it is
  // abandoned instead (its storage ends without a destructor call). The backend's destructor still
  // runs: the arena unmaps its pages; blocks the container held outside them are leaked.
  struct held {
    B backend;
    union {
      map_type map;
    };
    bool abandoned = false;
    held() { ::new (static_cast<void*>(&map)) map_type(backend.template get<value_type>()); }
    held(const held&) = delete;
    held& operator=(const held&) = delete;
    ~held() {
      if (!abandoned) map.~map_type();
    }
  };
  ::malloc_trim(0);
  const proc_memory before = read_memory();
  auto h = std::make_shared<held>();
  // A backend that cannot get its first page (no 1 GiB page) throws here, before any container
  // is built on it.
  h->backend.ready();
  contender c;
  c.name = std::move(name);
  const auto start = std::chrono::steady_clock::now();
  try {
    for (const u64 k : keys) h->map.emplace(k, k);
  } catch (const std::exception& e) {
    if (C::strong_insert) throw;
    h->abandoned = true;
    throw std::runtime_error(std::string(e.what()) +
                             " (during the build: the container was abandoned, not destroyed)");
  }
  c.build_ns = seconds_since(start) * 1e9 / static_cast<double>(keys.size());
  const proc_memory built = read_memory();
  // What the build added to the process, huge (THP and hugetlb) over all of it: the peers have no
  // address range to ask backing_of about.
  const double added = built.rss - before.rss + built.hugetlb - before.hugetlb;
  c.huge_share =
      added > 0 ? (built.anon_huge - before.anon_huge + built.hugetlb - before.hugetlb) / added : 0;
  c.live_bytes = C::live_bytes(h->map);
  c.rss_over_live = added / static_cast<double>(c.live_bytes);
  held* m = h.get();
  c.lookups = [m](const std::vector<u64>& probes) {
    const auto t0 = std::chrono::steady_clock::now();
    u64 sum = 0;
    for (const u64 p : probes) {
      const auto it = m->map.find(p);
      sum += it == m->map.end() ? 1 : it->second;
    }
    benchmark::DoNotOptimize(sum);
    return seconds_since(t0) * 1e9 / static_cast<double>(probes.size());
  };
  // Churn: erase an original key, insert a new even one (never present): size stays n.
  c.churn = [m, &keys](u64& next, u64 batch_seed) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < kPairedChurn; ++i) {
      m->map.erase(keys[splitmix(batch_seed) % keys.size()]);
      next += 2;
      m->map.emplace(next, next);
    }
    return seconds_since(t0) * 1e9 / static_cast<double>(kPairedChurn);
  };
  c.coverage = [m]() -> double {
    if (const auto* a = m->backend.arena()) return a->backing().huge_fraction();
    return -1;
  };
  c.owner = std::move(h);
  return c;
}

// Rounds of BM_Paired: at least --rounds=N, and more until --round-seconds=S of rounds have
// passed (at most kMaxRounds). A ratio near 1 needs many rounds to settle: a round's ratio varies
// by about 5% here, and the hash maps' rounds take a fifth of a second, std::map's three seconds.
int paired_rounds = 15;
int paired_round_seconds = 0;
constexpr int kMaxRounds = 1000;

template <class C>
void BM_Paired(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<u64>& keys = keys_for(n);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<contender> all;
    std::vector<std::string> missing;
    // Builds one contender; one that cannot get its memory (no 1 GiB page, a peer not installed)
    // is left out and named in the label.
    auto add = [&](const char* name, auto make) {
      try {
        all.push_back(make());
      } catch (const std::exception& e) {
        missing.push_back(fmt::format("{}: {}", name, e.what()));
      }
    };
    add("std", [&] { return make_contender<C, std_backend>("std", keys); });
    add("arena", [&] {
      return make_contender<C, arena_backend<hugepage::unsynchronized_arena>>("arena", keys);
    });
    add("pmr", [&] { return make_contender<C, pmr_pool_backend>("pmr", keys); });
    add("arena_1g", [&] { return make_contender<C, arena_1g_backend>("arena_1g", keys); });
    // A peer that could not be loaded is left out, and the label says why.
    auto add_peer = [&](const loaded_peer& peer, auto make) {
      if (peer.why_not.empty()) {
        add(peer.name, make);
      } else {
        missing.push_back(fmt::format("{}: {}", peer.name, peer.why_not));
      }
    };
    add_peer(jemalloc_peer(),
             [&] { return make_contender<C, peer_backend<jemalloc_peer>>("jemalloc", keys); });
    add_peer(mimalloc_peer(),
             [&] { return make_contender<C, peer_backend<mimalloc_peer>>("mimalloc", keys); });
    const auto arena_at =
        std::find_if(all.begin(), all.end(), [](const contender& c) { return c.name == "arena"; });
    if (arena_at == all.end()) {
      state.SkipWithError("the arena over THP could not be built");
      return;
    }
    const std::size_t arena = static_cast<std::size_t>(arena_at - all.begin());

    const std::size_t m = all.size();
    std::vector<std::vector<double>> look(m), churn(m);
    std::vector<u64> fresh(m, 0);
    u64 seed = 42;
    std::vector<u64> probes(kPairedBatch);
    const auto rounds_start = std::chrono::steady_clock::now();
    int rounds = 0;
    for (int round = 0; round < kMaxRounds; ++round) {
      if (round >= paired_rounds && seconds_since(rounds_start) >= paired_round_seconds) break;
      ++rounds;
      // The churn erases some original keys: a probe may miss (the same probes for everyone).
      for (auto& p : probes) p = keys[splitmix(seed) % n];
      // The order rotates with the round, so no contender always runs first after a churn.
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t c = (i + static_cast<std::size_t>(round)) % m;
        look[c].push_back(all[c].lookups(probes));
      }
      const u64 batch_seed = seed;
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t c = (i + static_cast<std::size_t>(round)) % m;
        churn[c].push_back(all[c].churn(fresh[c], batch_seed));
      }
    }
    state.counters["live_mib"] = static_cast<double>(all[arena].live_bytes) / kMiB;
    state.counters["rounds"] = rounds;
    for (std::size_t c = 0; c < m; ++c) {
      const std::string& who = all[c].name;
      std::vector<double> look_ratio, churn_ratio;
      for (int r = 0; r < rounds; ++r) {
        look_ratio.push_back(look[c][r] / look[arena][r]);
        churn_ratio.push_back(churn[c][r] / churn[arena][r]);
      }
      state.counters["lookup_ns_" + who] = median(look[c]);
      state.counters["churn_ns_" + who] = median(churn[c]);
      state.counters["build_ns_" + who] = all[c].build_ns;
      if (c != arena) {
        state.counters["lookup_" + who + "_over_arena"] = median(look_ratio);
        state.counters["lookup_" + who + "_over_arena_min"] =
            *std::min_element(look_ratio.begin(), look_ratio.end());
        state.counters["lookup_" + who + "_over_arena_max"] =
            *std::max_element(look_ratio.begin(), look_ratio.end());
        state.counters["churn_" + who + "_over_arena"] = median(churn_ratio);
      }
      if (const double cov = all[c].coverage(); cov >= 0) state.counters["coverage_" + who] = cov;
      // Growth of the process says nothing when the build reused memory an allocator kept from
      // an earlier row (glibc and the peers do): then it is left out.
      if (all[c].rss_over_live >= 0.5) {
        state.counters["huge_share_" + who] = all[c].huge_share;
        state.counters["rss_over_live_" + who] = all[c].rss_over_live;
      }
    }
    // Ours against each peer, paired per round: <ours>_over_<peer> < 1 means ours was faster.
    for (const char* ours : {"arena", "arena_1g"}) {
      for (const char* peer : {"jemalloc", "mimalloc"}) {
        const auto at = [&all](const char* name) {
          return std::find_if(all.begin(), all.end(),
                              [name](const contender& c) { return c.name == name; }) -
                 all.begin();
        };
        const auto o = static_cast<std::size_t>(at(ours));
        const auto q = static_cast<std::size_t>(at(peer));
        if (o == m || q == m) continue;
        std::vector<double> ratio;
        for (int r = 0; r < rounds; ++r) ratio.push_back(look[o][r] / look[q][r]);
        const std::string key = fmt::format("lookup_{}_over_{}", ours, peer);
        state.counters[key] = median(ratio);
        state.counters[key + "_min"] = *std::min_element(ratio.begin(), ratio.end());
        state.counters[key + "_max"] = *std::max_element(ratio.begin(), ratio.end());
      }
    }
    std::string label;
    for (const auto& why : missing) label += (label.empty() ? "left out: " : "; ") + why;
    state.SetLabel(label);
    state.ResumeTiming();
  }
}

// The thread-safe arena only at the smallest count: it shows the cost of its locks, and the
// largest counts take most of a run's time.
// Registers the rows of container C for each of `sizes`, the container's live bytes: the element
// count is the size over C::min_bytes_per_element, so that every container holds at least that
// many bytes (the hash maps take more elements than std::map for the same size).
template <class C>
void register_container(const std::vector<std::size_t>& sizes) {
  std::vector<std::int64_t> counts;
  for (const std::size_t bytes : sizes) {
    counts.push_back(static_cast<std::int64_t>(bytes / C::min_bytes_per_element));
  }
  auto add = [&](const char* backend, auto fn, bool all_counts) {
    for (const auto n : counts) {
      if (!all_counts && n != counts.front()) continue;
      benchmark::RegisterBenchmark((std::string("BM_") + C::name + "_" + backend).c_str(), fn)
          ->Arg(n)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  };
  add(std_backend::name, BM_Node<C, std_backend>, true);
  add("arena", BM_Node<C, arena_backend<hugepage::unsynchronized_arena>>, true);
  add("arena_mt", BM_Node<C, arena_backend<hugepage::arena>>, false);
  add(pmr_pool_backend::name, BM_Node<C, pmr_pool_backend>, true);
  for (const auto n : counts) {
    benchmark::RegisterBenchmark((std::string("BM_Paired_") + C::name).c_str(), BM_Paired<C>)
        ->Arg(n)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

// Parses --sizes=S[,S...] (bytes with a K, M or G suffix) into `sizes`, --rounds=N into `rounds`
// or --round-seconds=S into `seconds`; false on anything else.
bool parse_flag(const std::string& arg, std::vector<std::size_t>& sizes, int& rounds,
                int& seconds) {
  const std::size_t eq = arg.find('=');
  const std::string name = arg.substr(0, eq);
  const std::string value = arg.substr(eq + 1);
  std::vector<std::size_t> numbers;
  std::size_t at = 0;
  while (at <= value.size()) {
    const std::size_t comma = std::min(value.find(',', at), value.size());
    std::string item = value.substr(at, comma - at);
    int shift = 0;
    if (name == "--sizes" && !item.empty()) {
      const char unit = item.back();
      shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
      if (shift != 0) item.pop_back();
    }
    if (item.empty() || item.size() > 6 ||
        item.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    numbers.push_back(std::stoul(item) << shift);
    at = comma + 1;
  }
  if (name == "--rounds") {
    if (numbers.size() != 1 || numbers[0] < 1 || numbers[0] > kMaxRounds) return false;
    rounds = static_cast<int>(numbers[0]);
    return true;
  }
  if (name == "--round-seconds") {
    if (numbers.size() != 1 || numbers[0] > 3600) return false;
    seconds = static_cast<int>(numbers[0]);
    return true;
  }
  for (const auto n : numbers) {
    if (n < (std::size_t{1} << 20) || n > (std::size_t{64} << 30)) return false;
  }
  sizes = std::move(numbers);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // jemalloc's thread-local state is initial-exec TLS: glibc dlopen()s it only with spare static
  // TLS ("cannot allocate memory in static TLS block"), which is sized at start-up. So the process
  // runs itself again, once, with glibc's tunable for it added to GLIBC_TUNABLES.
  if (std::getenv("ARENA_BENCH_STATIC_TLS") == nullptr) {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    std::string with_tls =
        tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":" : "";
    with_tls += "glibc.rtld.optional_static_tls=65536";
    ::setenv("GLIBC_TUNABLES", with_tls.c_str(), 1);
    ::setenv("ARENA_BENCH_STATIC_TLS", "1", 1);
    ::execv("/proc/self/exe", argv);
    std::perror("arena_bench: running itself with more static TLS failed; jemalloc left out");
  }
  // Our own flags, taken out before google-benchmark sees the rest.
  std::vector<std::size_t> sizes = {64 * kMiB, 256 * kMiB, 1024 * kMiB};
  for (int i = 1; i < argc;) {
    const std::string arg = argv[i];
    if (arg.rfind("--sizes=", 0) == 0 || arg.rfind("--rounds=", 0) == 0 ||
        arg.rfind("--round-seconds=", 0) == 0) {
      if (!parse_flag(arg, sizes, paired_rounds, paired_round_seconds)) {
        std::fprintf(stderr,
                     "arena_bench: bad %s (--sizes=64M,1G: 1M to 64G each; --rounds=N: 1 to 1000; "
                     "--round-seconds=S: 0 to 3600)\n",
                     arg.c_str());
        return 2;
      }
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
    } else {
      ++i;
    }
  }
  benchmark::Initialize(&argc, argv);
  // The peers are loaded now, before any contender takes 1 GiB pages: mimalloc reserves its own at
  // start-up (kArena1gPages stay free for the arena over 1 GiB pages).
  jemalloc_peer();
  mimalloc_peer();
  register_container<std_map>(sizes);
  register_container<std_unordered_map>(sizes);
  register_container<absl_node_hash_map>(sizes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
