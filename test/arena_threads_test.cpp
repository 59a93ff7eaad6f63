// The thread-safe arena under concurrency: threads allocating and freeing at once, objects freed by
// a thread other than the one that allocated them, containers of several threads in one arena,
// fork() while other threads hold the arena's locks.
// Run under ThreadSanitizer by scripts/test (ctest -R '^ArenaThreads[.]').
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::arena;
using hugepage::arena_allocator;
using hugepage::page_size;
using hugepage::strategy;

constexpr int kThreads = 4;
constexpr int scaled(int ops) { return hugepage::test::under_asan() ? ops / 4 : ops; }

// A block handed from one thread to another; its bytes say who wrote it.
struct block {
  unsigned char* p = nullptr;
  std::size_t bytes = 0;
  unsigned char tag = 0;
};

// A queue guarded by a mutex: the synchronization that orders an allocation before its free.
class handoff {
 public:
  void push(block b) {
    const std::lock_guard<std::mutex> lock(mutex_);
    blocks_.push_back(b);
  }
  bool pop(block& b) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (blocks_.empty()) return false;
    b = blocks_.front();
    blocks_.pop_front();
    return true;
  }

 private:
  std::mutex mutex_;
  std::deque<block> blocks_;
};

bool intact(const block& b) {
  for (std::size_t i = 0; i < b.bytes; ++i) {
    if (b.p[i] != b.tag) return false;
  }
  return true;
}

// Each thread allocates blocks of random small sizes, frees half of its own and hands the other
// half to the next thread, which checks and frees them. With `large_every` > 0, every so many
// operations a block of 2-4 MiB (a run of slabs on an arena over 1 GiB pages).
void allocate_and_free_across_threads(arena& a, int ops, int large_every = 0) {
  handoff queues[kThreads];
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      std::vector<block> own;
      for (int i = 0; i < ops; ++i) {
        block b;
        b.bytes = large_every > 0 && i % large_every == large_every - 1
                      ? (std::size_t{2} << 20) + rng() % (std::size_t{2} << 20)
                      : 1 + rng() % 300;
        b.tag = static_cast<unsigned char>(rng());
        b.p = static_cast<unsigned char*>(a.allocate(b.bytes, 8));
        std::memset(b.p, b.tag, b.bytes);
        if (rng() % 2 == 0) {
          queues[(t + 1) % kThreads].push(b);
        } else {
          own.push_back(b);
        }
        if (own.size() > 64) {
          if (!intact(own.front())) corrupted.fetch_add(1);
          a.deallocate(own.front().p, own.front().bytes, 8);
          own.erase(own.begin());
        }
        block theirs;
        while (queues[t].pop(theirs)) {
          if (!intact(theirs)) corrupted.fetch_add(1);
          a.deallocate(theirs.p, theirs.bytes, 8);  // allocated by thread t - 1
        }
      }
      for (const block& b : own) a.deallocate(b.p, b.bytes, 8);
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& queue : queues) {  // what arrived after its consumer finished
    block b;
    while (queue.pop(b)) {
      if (!intact(b)) corrupted.fetch_add(1);
      a.deallocate(b.p, b.bytes, 8);
    }
  }
  EXPECT_EQ(corrupted.load(), 0) << "a slot was handed out twice";
  const auto s = a.stats();
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(s.slot_bytes, 0u);
  for (const auto& c : s.classes) EXPECT_EQ(c.live_slots, 0u) << c.slot_bytes;
  EXPECT_LE(s.pages, a.options().retained_pages);
}

TEST(ArenaThreads, ConcurrentAllocationAndCrossThreadFrees) {
  arena a;
  allocate_and_free_across_threads(a, scaled(200000));
}

TEST(ArenaThreads, HugetlbArenaAcrossThreadsLeavesThePoolAsItWas) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, 16);
  const auto before = hugepage::test::read_counts(page_size::huge_2m);
  {
    arena a(strategy::hugetlb(page_size::huge_2m, hugepage::strict), hugepage::arena_options{0});
    allocate_and_free_across_threads(a, scaled(100000));
    EXPECT_EQ(a.stats().pages, 0u);
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_2m, before));
}

// Over 1 GiB pages, the slabs of every class and the runs of large blocks are carved from one page
// under the page lock while other threads allocate and free in their classes; the page goes back
// once all its slabs are free.
TEST(ArenaThreads, GigabytePageCarvedIntoSlabsAcrossThreadsLeavesThePoolAsItWas) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  {
    arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict), hugepage::arena_options{0});
    allocate_and_free_across_threads(a, scaled(100000), scaled(100000) / 10);
    EXPECT_EQ(a.stats().pages, 0u);
    EXPECT_EQ(a.stats().slabs, 0u);
    EXPECT_EQ(a.stats().run_slabs, 0u);
  }
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// One 1 GiB page is all a hugetlb cgroup limit lets the process have, and it holds slabs for every
// size class. Threads that find the arena without a page, or whose page another thread is
// unmapping, all ask for one at once: one mapping succeeds and the others must take slabs from it
// (or wait for the unmapped page to be back in the pool), not throw hugetlb_limit_exceeded.
TEST(ArenaThreads, ThreadsRacingForTheOnlyGigabytePageShareIt) {
  HUGEPAGE_REQUIRE_POOL(page_size::huge_1g, 1);
  const hugepage::test::scratch_cgroup cgroup("hugetlb");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  ASSERT_TRUE(cgroup.write("hugetlb.1GB.max", "1073741824")) << cgroup.path();
  const auto before = hugepage::test::read_counts(page_size::huge_1g);
  const int child = hugepage::test::run_in_child([&] {
    if (!cgroup.join()) return 2;
    std::atomic<int> refused{0};
    // Each thread its own size class: a slab each, all carved from the one page.
    const auto use = [&refused](arena& a, std::size_t bytes, int times) {
      for (int i = 0; i < times; ++i) {
        try {
          void* p = a.allocate(bytes, 8);
          std::memset(p, 0x3c, bytes);
          a.deallocate(p, bytes, 8);
        } catch (const std::exception& e) {
          if (refused.fetch_add(1) == 0) std::fprintf(stderr, "child: %s\n", e.what());
        }
      }
    };
    // The first page, wanted by every thread at the same moment, 40 times over.
    for (int round = 0; round < 40; ++round) {
      arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict), hugepage::arena_options{0});
      std::atomic<int> ready{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          ready.fetch_add(1);
          while (ready.load() < kThreads) std::this_thread::yield();
          use(a, std::size_t{16} << t, 1);
        });
      }
      for (auto& thread : threads) thread.join();
    }
    if (refused.load() != 0) return 3;
    // No page retained: each last free unmaps the page while other threads want it back.
    {
      arena a(strategy::hugetlb(page_size::huge_1g, hugepage::strict), hugepage::arena_options{0});
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] { use(a, std::size_t{16} << t, scaled(200)); });
      }
      for (auto& thread : threads) thread.join();
      if (a.stats().pages != 0) return 4;
    }
    return refused.load() == 0 ? 0 : 5;
  });
  EXPECT_EQ(child, 0) << "3: a thread was refused the first page while another mapped it; 5: a "
                         "thread was refused a page while another gave the only one back";
  EXPECT_TRUE(hugepage::test::pool_back(page_size::huge_1g, before));
}

// A map per thread, all in one arena; the maps are destroyed by the main thread.
TEST(ArenaThreads, MapsOfSeveralThreadsShareOneArena) {
  arena a;
  using alloc = arena_allocator<std::pair<const std::uint64_t, std::uint64_t>>;
  using map = std::map<std::uint64_t, std::uint64_t, std::less<>, alloc>;
  std::vector<map> maps;
  for (int t = 0; t < kThreads; ++t) maps.emplace_back(alloc(a));
  std::vector<std::thread> threads;
  const std::uint64_t n = static_cast<std::uint64_t>(scaled(50000));
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&maps, t, n] {
      map& m = maps[static_cast<std::size_t>(t)];
      for (std::uint64_t round = 0; round < 3; ++round) {
        for (std::uint64_t i = 0; i < n; ++i) m[i] = i * static_cast<std::uint64_t>(t + 1);
        for (std::uint64_t i = 0; i < n; i += 3) m.erase(i);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    const map& m = maps[static_cast<std::size_t>(t)];
    EXPECT_EQ(m.size(), n - (n + 2) / 3);
    for (const auto& [k, v] : m) ASSERT_EQ(v, k * static_cast<std::uint64_t>(t + 1));
  }
  EXPECT_GT(a.stats().live_bytes, 0u);
  maps.clear();  // freed by a thread that allocated none of them
  EXPECT_EQ(a.stats().live_bytes, 0u);
}

// fork() while other threads are inside allocate and deallocate: the child finds every mutex of
// the arena unlocked and its lists consistent. Without the fork handler a child often inherits a
// class's mutex (or the pages' mutex) held by a thread it does not have, and its first allocation
// waits for ever: the time limit turns that into a failure.
TEST(ArenaThreads, ForkWhileOtherThreadsHoldTheArenasLocksNeverHangsTheChild) {
  arena a(strategy::thp(), hugepage::arena_options{0});  // every free of a last slot unmaps
  constexpr std::size_t kHammered = 48;                  // one class for the threads...
  constexpr std::size_t kUntouched = 512;                // ...one only the child uses
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&a, &stop] {
      while (!stop.load(std::memory_order_relaxed)) {
        // One live object at a time: each allocation takes a slab (class and pages mutex), each
        // free gives it back.
        void* p = a.allocate(kHammered, 8);
        std::memset(p, 0x5a, kHammered);
        a.deallocate(p, kHammered, 8);
      }
    });
  }
  int hung = 0, failed = 0;
  constexpr int kForks = 200;
  for (int i = 0; i < kForks && hung == 0; ++i) {
    const int code = hugepage::test::run_in_child_within(5000, [&a] {
      void* mine = a.allocate(kHammered, 8);    // the class the threads hammer
      void* other = a.allocate(kUntouched, 8);  // a new slab: the pages' mutex
      std::memset(mine, 1, kHammered);
      std::memset(other, 2, kUntouched);
      a.deallocate(other, kUntouched, 8);
      a.deallocate(mine, kHammered, 8);
      return a.stats().classes[hugepage::detail::arena_class_of(kUntouched, 8)].live_slots == 0 ? 0
                                                                                                : 1;
    });
    if (code == hugepage::test::child_hung) {
      ++hung;
    } else if (code != 0) {
      ++failed;
    }
  }
  stop = true;
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(hung, 0) << "a child hung on a mutex of the arena inherited locked";
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(a.stats().live_bytes, 0u);
}

}  // namespace
