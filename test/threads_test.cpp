// threads_test.cpp - many threads allocating and freeing large blocks at once (RELIABILITY.md #4,
// #15): no crash, data intact, statistics and hugetlb pool counters back at their start.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/stats.hpp"
#include "support.hpp"

namespace {

using hugepage::page_size;
using hugepage::test::pool_back;
using hugepage::test::pool_counts;
using hugepage::test::read_counts;

using hugepage::test::kMiB;
constexpr int kThreads = 8;
constexpr std::size_t kBlocksPerThread = 4;
constexpr std::size_t kMaxBlock = 64 * kMiB;
// Peak memory: at most 4 blocks and 128 MiB live per thread (1 GiB in all), and at most 256 MiB of
// hugetlb requests live at once, so that other users of the shared pool are not starved.
constexpr std::size_t kMaxLivePerThread = 128 * kMiB;
constexpr std::size_t kHugetlbBudget = 256 * kMiB;
constexpr auto kDuration = std::chrono::seconds(3);

enum kind : int { kThp, kCollapse, kHugetlb, kKinds };
constexpr const char* kKindNames[kKinds] = {"thp", "collapse", "hugetlb-2m-fallback"};

using thp_alloc = hugepage::thp_allocator<unsigned char>;
using collapse_alloc = hugepage::collapse_allocator<unsigned char>;
using hugetlb_alloc =
    hugepage::huge_page_allocator<unsigned char, page_size::huge_2m, hugepage::fallback>;

unsigned char* allocate(int k, std::size_t bytes) {
  switch (k) {
    case kThp: return thp_alloc().allocate(bytes);
    case kCollapse: return collapse_alloc().allocate(bytes);
    default: return hugetlb_alloc().allocate(bytes);
  }
}

void deallocate(int k, unsigned char* p, std::size_t bytes) {
  switch (k) {
    case kThp: return thp_alloc().deallocate(p, bytes);
    case kCollapse: return collapse_alloc().deallocate(p, bytes);
    default: return hugetlb_alloc().deallocate(p, bytes);
  }
}

struct block {
  int kind = kThp;
  unsigned char* p = nullptr;
  std::size_t bytes = 0;
  std::uint64_t seed = 0;
};

// One word per base page, plus the block's last word: every page is touched, and a block that
// overlapped another (or lost a page) shows up as a wrong word.
constexpr std::size_t kStride = 4096;

std::uint64_t expected_word(const block& b, std::size_t offset) {
  return b.seed ^ (offset * 0x9e3779b97f4a7c15ull);
}

// Offsets of the checked words: one per stride that does not overlap the last word, then the last.
template <class F>
void for_each_word(const block& b, F&& f) {
  if (b.bytes < 8) return;
  for (std::size_t offset = 0; offset + 16 <= b.bytes; offset += kStride) f(offset);
  f(b.bytes - 8);
}

void write_pattern(const block& b) {
  for_each_word(b, [&](std::size_t offset) {
    const std::uint64_t word = expected_word(b, offset);
    std::memcpy(b.p + offset, &word, sizeof word);
  });
}

bool verify_pattern(const block& b) {
  bool ok = true;
  for_each_word(b, [&](std::size_t offset) {
    std::uint64_t word;
    std::memcpy(&word, b.p + offset, sizeof word);
    ok = ok && word == expected_word(b, offset);
  });
  return ok;
}

struct shared_state {
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> hugetlb_live{0};
  std::atomic<std::uint64_t> corrupt{0};
  std::array<std::atomic<std::uint64_t>, kKinds> mapped_allocations{};
  std::atomic<std::uint64_t> small_allocations{0};
  std::mutex mutex;
  std::vector<std::string> errors;

  void error(const std::string& text) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (errors.size() < 10) errors.push_back(text);
  }
};

void worker(int index, shared_state& shared) {
  std::mt19937_64 random(0x1234567 + static_cast<std::uint64_t>(index));
  std::vector<block> live;
  std::size_t live_bytes = 0;

  const auto release = [&](std::size_t i) {
    const block b = live[i];
    if (!verify_pattern(b)) {
      shared.corrupt.fetch_add(1);
      shared.error(std::string("corrupt ") + kKindNames[b.kind] + " block of " +
                   std::to_string(b.bytes) + " bytes");
    }
    deallocate(b.kind, b.p, b.bytes);
    if (b.kind == kHugetlb) shared.hugetlb_live.fetch_sub(b.bytes);
    live_bytes -= b.bytes;
    live[i] = live.back();
    live.pop_back();
  };

  while (!shared.stop.load(std::memory_order_relaxed)) {
    // Sizes: a quarter below one huge page (::operator new), most of the rest a few huge pages
    // (some exact multiples of 2 MiB), one in eight up to 64 MiB.
    std::size_t bytes;
    const auto shape = random() % 8;
    if (shape < 2) {
      bytes = 1 + random() % (2 * kMiB - 1);
    } else if (shape < 4) {
      bytes = (1 + random() % 8) * 2 * kMiB;
    } else if (shape < 7) {
      bytes = 2 * kMiB + random() % (8 * kMiB);
    } else {
      bytes = 2 * kMiB + random() % (kMaxBlock - 2 * kMiB + 1);
    }
    int k = static_cast<int>(random() % kKinds);
    if (k == kHugetlb) {
      std::size_t live_now = shared.hugetlb_live.load();
      do {
        if (live_now + bytes > kHugetlbBudget) {
          k = kThp;
          break;
        }
      } while (!shared.hugetlb_live.compare_exchange_weak(live_now, live_now + bytes));
    }
    while (!live.empty() &&
           (live.size() >= kBlocksPerThread || live_bytes + bytes > kMaxLivePerThread)) {
      release(random() % live.size());
    }
    block b;
    b.kind = k;
    b.bytes = bytes;
    b.seed = random();
    try {
      b.p = allocate(k, bytes);
    } catch (const std::exception& e) {
      shared.error(std::string(kKindNames[k]) + " allocate(" + std::to_string(bytes) +
                   ") threw: " + e.what());
      if (k == kHugetlb) shared.hugetlb_live.fetch_sub(bytes);
      continue;
    }
    if (bytes >= 2 * kMiB) {
      shared.mapped_allocations[k].fetch_add(1);
    } else {
      shared.small_allocations.fetch_add(1);
    }
    write_pattern(b);
    live.push_back(b);
    live_bytes += bytes;
  }
  while (!live.empty()) release(live.size() - 1);
}

TEST(Threads, EightThreadsAllocateAndFreeLargeBlocks) {
  const pool_counts pool_before = read_counts(page_size::huge_2m);
  const hugepage::statistics s0 = hugepage::stats();

  shared_state shared;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i, std::ref(shared));
  std::this_thread::sleep_for(kDuration);
  shared.stop = true;
  for (std::thread& t : threads) t.join();

  for (const std::string& e : shared.errors) ADD_FAILURE() << e;
  EXPECT_EQ(shared.corrupt.load(), 0u);
  for (int k = 0; k < kKinds; ++k) {
    EXPECT_GT(shared.mapped_allocations[k].load(), 0u) << kKindNames[k] << " never exercised";
    std::printf("%s: %llu mapped allocations\n", kKindNames[k],
                static_cast<unsigned long long>(shared.mapped_allocations[k].load()));
  }
  std::printf(
      "small: %llu, fallbacks to THP: %llu\n",
      static_cast<unsigned long long>(shared.small_allocations.load()),
      static_cast<unsigned long long>(hugepage::stats().fallbacks_to_thp - s0.fallbacks_to_thp));
  EXPECT_GT(shared.small_allocations.load(), 0u);
  EXPECT_EQ(shared.hugetlb_live.load(), 0u);

  const hugepage::statistics s1 = hugepage::stats();
  EXPECT_EQ(s1.mapped_bytes(), s0.mapped_bytes());
  EXPECT_EQ(s1.live_mappings, s0.live_mappings);
  EXPECT_EQ(s1.requested_thp, s0.requested_thp);
  EXPECT_EQ(s1.requested_collapse, s0.requested_collapse);
  EXPECT_EQ(s1.requested_hugetlb_2m, s0.requested_hugetlb_2m);
  EXPECT_EQ(s1.requested_hugetlb_1g, s0.requested_hugetlb_1g);
  EXPECT_EQ(s1.obtained_thp, s0.obtained_thp);
  EXPECT_EQ(s1.obtained_base, s0.obtained_base);
  EXPECT_EQ(s1.obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
  EXPECT_GE(s1.collapse_attempts, s0.collapse_attempts);
  EXPECT_TRUE(pool_back(page_size::huge_2m, pool_before));
}

// Strict hugetlb from many threads at once, within a budget the pool covers: every allocation is
// served from the pool, and the pool comes back.
TEST(Threads, StrictHugetlbFromManyThreads) {
  constexpr std::size_t kPerThread = 4;  // 2 MiB pages live per thread: 64 MiB in all
  HUGEPAGE_REQUIRE_POOL(page_size::huge_2m, kThreads * kPerThread);
  const pool_counts pool_before = read_counts(page_size::huge_2m);
  const hugepage::statistics s0 = hugepage::stats();
  std::atomic<std::uint64_t> failures{0};
  std::atomic<std::uint64_t> exhausted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures, &exhausted] {
      hugepage::huge_page_allocator<std::uint64_t> allocator;
      const std::size_t n = 2 * kMiB / sizeof(std::uint64_t);
      for (int round = 0; round < 20; ++round) {
        std::vector<std::uint64_t*> pages;
        for (std::size_t i = 0; i < kPerThread; ++i) {
          try {
            std::uint64_t* p = allocator.allocate(n);
            for (std::size_t w = 0; w < n; w += 512) p[w] = static_cast<std::uint64_t>(t) + w;
            pages.push_back(p);
          } catch (const hugepage::pool_exhausted&) {
            exhausted.fetch_add(1);  // another process took pages meanwhile
          }
        }
        for (std::uint64_t* p : pages) {
          for (std::size_t w = 0; w < n; w += 512) {
            if (p[w] != static_cast<std::uint64_t>(t) + w) failures.fetch_add(1);
          }
          allocator.deallocate(p, n);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0u);
  if (exhausted.load() != 0) {
    std::printf("note: %llu allocations found the shared pool short\n",
                static_cast<unsigned long long>(exhausted.load()));
  }
  const hugepage::statistics s1 = hugepage::stats();
  EXPECT_EQ(s1.live_mappings, s0.live_mappings);
  EXPECT_EQ(s1.requested_hugetlb_2m, s0.requested_hugetlb_2m);
  EXPECT_EQ(s1.obtained_hugetlb_2m, s0.obtained_hugetlb_2m);
  EXPECT_EQ(s1.fallbacks_to_thp, s0.fallbacks_to_thp) << "strict never falls back";
  EXPECT_TRUE(pool_back(page_size::huge_2m, pool_before));
}

// Eight threads race for a pool that holds one of their blocks at a time. The kernel refuses the
// second reservation; by the time the refused thread looks, others may have returned pages. Every
// refusal must still be a pool_exhausted with figures that are true of the refusal - never a
// cgroup or address-space diagnosis made from a pool level read after the fact.
TEST(Threads, RacingForAShortPoolOnlyEverThrowsPoolExhausted) {
  const std::uint64_t available = hugepage::test::pool_available(page_size::huge_2m);
  if (available < 6) {
    HUGEPAGE_SKIP_OR_FAIL("needs 6 free 2 MiB pool pages, " + std::to_string(available) +
                          " available");
  }
  const std::uint64_t pages = available / 2 + 1;  // one block at a time
  const std::size_t bytes = pages * 2 * kMiB;
  const pool_counts before = read_counts(page_size::huge_2m);
  std::atomic<std::uint64_t> served{0}, short_at_refusal{0}, refilled_since{0}, wrong{0};
  std::mutex mutex;
  std::string first_wrong;
  std::atomic<int> ready{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const auto done = [&] {
    return (served.load() > 100 && short_at_refusal.load() + refilled_since.load() > 100) ||
           std::chrono::steady_clock::now() > deadline;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      hugepage::huge_page_allocator<unsigned char> allocator;
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      while (!done()) {
        try {
          unsigned char* p = allocator.allocate(bytes);
          served.fetch_add(1);
          std::this_thread::yield();  // hold it a moment: let the others collide with it
          allocator.deallocate(p, bytes);
        } catch (const hugepage::pool_exhausted& e) {
          const std::string what = e.what();
          const bool exact_type = typeid(e) == typeid(hugepage::pool_exhausted);
          const bool short_now =
              e.pages_available() < pages &&
              what.find("reserve enough with: sysctl -w vm.nr_hugepages=") != std::string::npos;
          const bool refilled =
              e.pages_available() >= pages && what.find("in concurrent use") != std::string::npos;
          if (exact_type && e.pages_requested() == pages && (short_now || refilled)) {
            (short_now ? short_at_refusal : refilled_since).fetch_add(1);
            continue;
          }
          wrong.fetch_add(1);
          const std::lock_guard<std::mutex> lock(mutex);
          if (first_wrong.empty()) first_wrong = what;
        } catch (const std::exception& e) {
          wrong.fetch_add(1);
          const std::lock_guard<std::mutex> lock(mutex);
          if (first_wrong.empty()) first_wrong = e.what();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::printf("served %llu, refused while short %llu, refused and refilled since %llu\n",
              static_cast<unsigned long long>(served.load()),
              static_cast<unsigned long long>(short_at_refusal.load()),
              static_cast<unsigned long long>(refilled_since.load()));
  EXPECT_EQ(wrong.load(), 0u) << first_wrong;
  EXPECT_GT(served.load(), 0u);
  EXPECT_GT(short_at_refusal.load() + refilled_since.load(), 0u) << "the race never happened";
  EXPECT_TRUE(pool_back(page_size::huge_2m, before));
}

}  // namespace
