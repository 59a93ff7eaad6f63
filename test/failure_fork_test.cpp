// failure_fork_test.cpp - fork and memory from the library: copy-on-write of hugetlb pages with and
// without a page in the pool, MADV_DONTFORK memory and containers in the child, fork while other
// threads use the registry. The other failure modes: failure_test.cpp.
#include <absl/container/flat_hash_map.h>
#include <absl/container/node_hash_map.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "failure_support.hpp"
#include "hugepage/allocator.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/strategy.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::page_size;
using hugepage::test::pool_back;
using hugepage::test::pool_counts;
using hugepage::test::read_counts;
using hugepage::test::run_in_child;

using hugepage::test::default_fault_signals;
using hugepage::test::fill;
using hugepage::test::holds;
using hugepage::test::hugetlb_cgroup;
using hugepage::test::kHuge;
using hugepage::test::kMiB;

// ---- fork -------------------------------------------------------------------------------------

// A private hugetlb page is copy-on-write across fork: the child's first write takes a new page
// from the pool. With pages free, the child gets its copy and the parent's data is untouched.
TEST(ForkHazard, ChildWriteGetsItsOwnCopyWhenThePoolHasPages) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 2);
  const pool_counts before = read_counts(page_size::huge_2m);
  hugepage::huge_page_allocator<char> allocator;
  char* p = allocator.allocate(kHuge);
  fill(p, kHuge, 11);
  const int code = run_in_child([p]() -> int {
    default_fault_signals();
    if (!holds(p, 0, kHuge, 11)) return 10;  // inherited
    fill(p, kHuge, 12);                      // copy-on-write from the pool
    if (!holds(p, 0, kHuge, 12)) return 11;
    const hugepage::backing_report r = hugepage::backing_of(p, kHuge);
    if (r.hugetlb_2m != kHuge) return 12;  // the copy is a huge page too
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(holds(p, 0, kHuge, 11)) << "the parent's page changed";
  allocator.deallocate(p, kHuge);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// The hazard itself: no page for the copy (here: the child's cgroup allows none) kills the child
// with SIGBUS at the write. The parent keeps its page.
TEST(ForkHazard, ChildWriteWithoutAPoolPageRaisesSigbus) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 1);
  const hugetlb_cgroup cgroup;
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.limit_2m(0));
  const pool_counts before = read_counts(page_size::huge_2m);
  hugepage::huge_page_allocator<char> allocator;
  char* p = allocator.allocate(kHuge);
  fill(p, kHuge, 21);
  const int code = run_in_child([p, &cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    if (!holds(p, 0, kHuge, 21)) return 10;  // reading shares the parent's page
    p[100] = 1;                              // SIGBUS: no page for the copy
    return 11;
  });
  EXPECT_EQ(code, 128 + SIGBUS) << "child check " << code << " failed";
  EXPECT_TRUE(holds(p, 0, kHuge, 21));
  allocator.deallocate(p, kHuge);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// The other side: the parent writes first. As owner of the reservation it gets the page back -
// the kernel unmaps it from the child instead of copying - and the child, which never wrote, is
// killed at its next access ("killed due to inadequate hugepage pool"). Here the process that
// allocates runs in a cgroup that allows exactly its one page, so no copy can be charged.
TEST(ForkHazard, ParentWriteWithoutAPoolPageKillsTheChildAtItsNextAccess) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 2);
  const hugetlb_cgroup cgroup;
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.limit_2m(1));
  const pool_counts before = read_counts(page_size::huge_2m);
  const int code = run_in_child([&cgroup]() -> int {
    default_fault_signals();
    if (!cgroup.join()) return 2;
    hugepage::huge_page_allocator<char> allocator;
    char* p = allocator.allocate(kHuge);
    fill(p, kHuge, 22);
    int go[2];
    if (::pipe(go) != 0) return 3;
    const pid_t reader = ::fork();
    if (reader == 0) {
      char byte;
      if (::read(go[0], &byte, 1) != 1) ::_exit(4);
      ::_exit(holds(p, 0, kHuge, 22) ? 0 : 5);  // killed here
    }
    p[100] = 1;  // the parent writes first: no page for a copy
    if (::write(go[1], "x", 1) != 1) return 6;
    int status = 0;
    ::waitpid(reader, &status, 0);
    allocator.deallocate(p, kHuge);
    if (!WIFSIGNALED(status)) return 7;
    return WTERMSIG(status) == SIGBUS ? 0 : 8;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

struct dont_fork_options : hugepage::default_options {
  static constexpr bool dont_fork = true;
};

TEST(ForkHazard, DontForkMemoryIsNotInherited) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 1);
  const pool_counts before = read_counts(page_size::huge_2m);
  hugepage::huge_page_allocator<char, page_size::huge_2m, hugepage::strict, dont_fork_options>
      allocator;
  static_assert(decltype(allocator)::get_strategy().options().dont_fork);
  char* p = allocator.allocate(kHuge);
  fill(p, kHuge, 31);
  std::error_code ec;
  bool flagged = false;
  for (const auto& m : hugepage::read_smaps(0, ec)) {
    if (m.start == reinterpret_cast<std::uintptr_t>(p)) flagged = m.has_flag("dc");
  }
  EXPECT_TRUE(flagged) << "VmFlags lacks dc (MADV_DONTFORK)";
  const int code = run_in_child([p]() -> int {
    default_fault_signals();
    const volatile char* v = p;
    return v[0] == 0 ? 10 : 11;  // SIGSEGV before either
  });
  EXPECT_EQ(code, 128 + SIGSEGV) << "child check " << code << " failed";
  EXPECT_TRUE(holds(p, 0, kHuge, 31));
  allocator.deallocate(p, kHuge);
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

// ---- fork with dont_fork containers ------------------------------------------------------------
//
// A child inherits the container objects but not their memory. What it may do: leave them alone
// and leave with _exit() (run_in_child does) or exec, and use containers of its own meanwhile.
// What it must not do: read, clear or destroy them (directly, or through exit()'s destructors).

hugepage::strategy no_fork_thp() {
  hugepage::allocation_options o;
  o.dont_fork = true;
  return hugepage::strategy::thp(o);
}

std::string value_of(std::uint64_t key, const char* tag) {
  return std::string(tag) + " holds value " + std::to_string(key);  // beyond the SSO: heap
}

// The containers a program would put on dont_fork memory: node containers on an arena, blocks on
// the allocators.
struct dont_fork_containers {
  using key = std::uint64_t;
  using node_allocator = hugepage::arena_allocator<std::pair<const key, std::string>>;
  template <class T>
  using block_allocator = hugepage::thp_allocator<T, dont_fork_options>;

  std::map<key, std::string, std::less<key>, node_allocator> ordered;
  std::unordered_map<key, std::string, std::hash<key>, std::equal_to<key>, node_allocator> hashed;
  absl::node_hash_map<key, std::string, absl::Hash<key>, std::equal_to<key>, node_allocator> nodes;
  std::vector<std::string, block_allocator<std::string>> strings;
  absl::flat_hash_map<key, std::string, absl::Hash<key>, std::equal_to<key>,
                      block_allocator<std::pair<const key, std::string>>>
      flat;

  dont_fork_containers(hugepage::arena& a, key n, const char* tag)
      : ordered(node_allocator(a)), hashed(node_allocator(a)), nodes(node_allocator(a)) {
    for (key k = 0; k < n; ++k) {
      const std::string v = value_of(k, tag);
      ordered.emplace(k, v);
      hashed.emplace(k, v);
      nodes.emplace(k, v);
      strings.push_back(v);
      flat.emplace(k, v);
    }
  }

  // Whether every container holds exactly the n values of `tag`.
  bool hold(key n, const char* tag) const {
    if (ordered.size() != n || hashed.size() != n || nodes.size() != n || strings.size() != n ||
        flat.size() != n) {
      return false;
    }
    for (key k = 0; k < n; ++k) {
      const std::string v = value_of(k, tag);
      const auto o = ordered.find(k);
      const auto h = hashed.find(k);
      const auto d = nodes.find(k);
      const auto f = flat.find(k);
      if (o == ordered.end() || o->second != v || h == hashed.end() || h->second != v ||
          d == nodes.end() || d->second != v || f == flat.end() || f->second != v ||
          strings[k] != v) {
        return false;
      }
    }
    return true;
  }

  // The block of `strings`.
  std::pair<const char*, std::size_t> strings_block() const {
    return {reinterpret_cast<const char*>(strings.data()),
            strings.capacity() * sizeof(std::string)};
  }
};

// Reads in a child go here, so that the compiler keeps them.
volatile std::size_t read_sink = 0;

constexpr std::uint64_t kValues = 100000;  // the vector's and the flat map's blocks are mapped

bool overlap(std::pair<const char*, std::size_t> a, std::pair<const void*, std::size_t> b) {
  const auto* b_start = static_cast<const char*>(b.first);
  return a.first < b_start + b.second && b_start < a.first + a.second;
}

// The child leaves the inherited containers alone and builds, uses and destroys the same
// containers of its own, on a new arena and the same allocators. Nothing of the child's lands in
// the ranges it did not inherit (the placeholders hold them), and the parent's containers are
// untouched.
TEST(ForkHazard, ChildLeavingInheritedDontForkContainersAloneUsesContainersOfItsOwn) {
  hugepage::arena nodes(no_fork_thp());
  const std::size_t live_before = hugepage::stats().live_mappings;
  const dont_fork_containers inherited(nodes, kValues, "parent");
  // The arena's pages, the vector's block and the flat map's block are each a dont_fork mapping.
  const std::size_t arena_pages = nodes.stats().pages;
  ASSERT_GE(arena_pages, 1u);
  ASSERT_EQ(hugepage::stats().live_mappings, live_before + arena_pages + 2);
  ASSERT_GE(inherited.strings_block().second, kHuge);
  const auto arena_ranges = nodes.mapped_ranges();
  const int code = run_in_child([&]() -> int {
    default_fault_signals();
    const std::size_t live = hugepage::stats().live_mappings;
    {
      hugepage::arena own_nodes(no_fork_thp());
      dont_fork_containers own(own_nodes, kValues, "child");
      if (!own.hold(kValues, "child")) return 10;
      std::vector<std::pair<const void*, std::size_t>> inherited_ranges = arena_ranges;
      inherited_ranges.emplace_back(inherited.strings_block());
      for (const auto& r : inherited_ranges) {
        if (overlap(own.strings_block(), r)) return 11;
        for (const auto& mine : own_nodes.mapped_ranges()) {
          if (overlap({static_cast<const char*>(mine.first), mine.second}, r)) return 12;
        }
      }
      for (std::uint64_t k = 0; k < kValues; k += 2) {  // use them: erase half, rebuild it
        own.ordered.erase(k);
        own.hashed.erase(k);
        own.nodes.erase(k);
        own.flat.erase(k);
      }
      own.strings.clear();
      dont_fork_containers again(own_nodes, kValues, "child");
      if (!again.hold(kValues, "child")) return 13;
      // The arena's own records live outside its pages: the inherited one can be asked.
      if (nodes.stats().pages != arena_pages) return 14;
    }  // the child's containers and arena are destroyed
    if (hugepage::stats().live_mappings != live) return 15;
    return 0;  // and leaves with _exit(): nothing touches the inherited containers
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_TRUE(inherited.hold(kValues, "parent")) << "the parent's containers changed";
}

// Reading, clearing or destroying an inherited dont_fork container touches memory the child does
// not have, and so does allocating from the arena (its slab headers are in its pages): the
// placeholder turns every such touch into SIGSEGV, for node containers and blocks alike, never
// into a read of something else.
TEST(ForkHazard, ChildTouchingAnInheritedDontForkContainerDiesOfSigsegv) {
  hugepage::arena nodes(no_fork_thp());
  dont_fork_containers inherited(nodes, kValues, "parent");
  struct touch {
    const char* what;
    std::function<void()> run;
  };
  auto& c = inherited;
  hugepage::arena& a = nodes;
  const touch touches[] = {
      {"std::map: find", [&c] { read_sink = c.ordered.find(7)->second.size(); }},
      {"std::map: clear", [&c] { c.ordered.clear(); }},
      {"std::map: destroy", [&c] { std::destroy_at(&c.ordered); }},
      {"std::unordered_map: find", [&c] { read_sink = c.hashed.find(7)->second.size(); }},
      {"std::unordered_map: clear", [&c] { c.hashed.clear(); }},
      {"std::unordered_map: destroy", [&c] { std::destroy_at(&c.hashed); }},
      {"absl::node_hash_map: find", [&c] { read_sink = c.nodes.find(7)->second.size(); }},
      {"absl::node_hash_map: clear", [&c] { c.nodes.clear(); }},
      {"absl::node_hash_map: destroy", [&c] { std::destroy_at(&c.nodes); }},
      {"std::vector<std::string>: read", [&c] { read_sink = c.strings[7].size(); }},
      {"std::vector<std::string>: clear", [&c] { c.strings.clear(); }},
      {"std::vector<std::string>: destroy", [&c] { std::destroy_at(&c.strings); }},
      {"absl::flat_hash_map: find", [&c] { read_sink = c.flat.find(7)->second.size(); }},
      {"absl::flat_hash_map: clear", [&c] { c.flat.clear(); }},
      {"absl::flat_hash_map: destroy", [&c] { std::destroy_at(&c.flat); }},
      {"arena: allocate",
       [&a] { read_sink = reinterpret_cast<std::uintptr_t>(a.allocate(48, 8)); }},
  };
  for (const touch& t : touches) {
    const int code = run_in_child([&t] {
      default_fault_signals();
      t.run();
      return 0;
    });
    EXPECT_EQ(code, 128 + SIGSEGV) << t.what;
  }
  EXPECT_TRUE(inherited.hold(kValues, "parent")) << "the parent's containers changed";
}

// exit() (and returning from main) runs the destructors of statics: a static container on
// dont_fork memory is destroyed in the child, SIGSEGV. _exit() runs none.
TEST(ForkHazard, ChildCallingExitWithAnInheritedDontForkStaticDiesOfSigsegv) {
  using node_allocator = hugepage::arena_allocator<std::pair<const std::uint64_t, std::string>>;
  using map = std::map<std::uint64_t, std::string, std::less<>, node_allocator>;
  static hugepage::arena nodes(no_fork_thp());
  static map table(node_allocator{nodes});
  for (std::uint64_t k = 0; k < 1000; ++k) table.emplace(k, value_of(k, "static"));
  EXPECT_EQ(run_in_child([] {
              default_fault_signals();
              std::exit(0);
              return 1;
            }),
            128 + SIGSEGV);
  EXPECT_EQ(run_in_child([] { return 0; }), 0);  // run_in_child leaves with _exit()
  EXPECT_EQ(table.size(), 1000u);
  EXPECT_EQ(table.at(999), value_of(999, "static"));
}

// The library's own release paths read nothing in a block the child did not inherit: freeing it
// unmaps only the placeholder, never a mapping of the child's own (a block of the same size,
// which the kernel would place in the hole the parent's block left), and an inherited arena's
// destructor unmaps its pages' placeholders. Both keep the statistics exact.
TEST(ForkHazard, ChildReleasingInheritedDontForkMemoryUnmapsNothingOfItsOwn) {
  using allocator_type = hugepage::thp_allocator<char, dont_fork_options>;
  allocator_type allocator;
  char* inherited = allocator.allocate(8 * kMiB);
  std::memset(inherited, 'p', 8 * kMiB);
  const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(inherited);
  auto nodes = std::make_unique<hugepage::arena>(no_fork_thp());
  void* node = nodes->allocate(64, 8);
  std::memset(node, 'n', 64);
  const int code = run_in_child([&]() -> int {
    default_fault_signals();
    const hugepage::statistics s0 = hugepage::stats();
    char* own = allocator.allocate(8 * kMiB);  // same size, same alignment as the inherited block
    if (reinterpret_cast<std::uintptr_t>(own) == start) return 10;  // landed in the hole
    fill(own, 8 * kMiB, 41);
    allocator.deallocate(inherited, 8 * kMiB);    // the block the child never had
    if (!holds(own, 0, 8 * kMiB, 41)) return 11;  // SIGSEGV here when the child's was unmapped
    allocator.deallocate(own, 8 * kMiB);
    if (hugepage::stats().live_mappings + 1 != s0.live_mappings) return 12;
    nodes.reset();  // unmaps the placeholder of its one page, reading nothing in it
    if (hugepage::stats().live_mappings + 2 != s0.live_mappings) return 13;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  EXPECT_EQ(inherited[8 * kMiB - 1], 'p');  // the parent's memory is untouched
  EXPECT_EQ(static_cast<const char*>(node)[63], 'n');
  nodes->deallocate(node, 64, 8);
  allocator.deallocate(inherited, 8 * kMiB);
}

// A fork while another thread holds the registry's lock must not leave the child a lock that
// nobody releases: its first deallocate of a registered block would hang. Blocks served by a
// fallback (here: an alignment above the hugetlb page, so the pool is not used) are registered.
TEST(ForkHazard, ForkWhileOtherThreadsUseTheRegistryNeverHangsTheChild) {
  static constexpr auto registered =
      hugepage::strategy::hugetlb(page_size::huge_2m, hugepage::fallback);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
        void* p = registered.allocate(kHuge, 2 * kHuge);
        registered.deallocate(p, kHuge, 2 * kHuge);
      }
    });
  }
  int hung = 0, failed = 0;
  for (int i = 0; i < 200 && hung == 0; ++i) {
    std::fflush(nullptr);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      void* p = registered.allocate(kHuge, 2 * kHuge);
      registered.deallocate(p, kHuge, 2 * kHuge);
      ::_exit(0);
    }
    int status = 0;
    pid_t done = 0;
    for (int wait_ms = 0; wait_ms < 5000 && done == 0; ++wait_ms) {
      done = ::waitpid(child, &status, WNOHANG);
      if (done == 0) ::usleep(1000);
    }
    if (done == 0) {
      ++hung;
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(hung, 0) << "a child hung in deallocate()";
  EXPECT_EQ(failed, 0);
}

}  // namespace
