// NUMA placement on a machine with two nodes or more (the lab's two-node guest: qemu -numa):
// a container bound to node 1 is all on node 1 and huge, an interleaved one holds half its huge
// pages on each node, a bound hugetlb block never takes a page of another node, an arena's slabs
// follow its placement, and the library's figures per node are what numa_maps says (or are
// marked as an estimate where the kernel cannot say which pages are huge). With fewer
// than two nodes every test skips naming the reason, or fails under HUGEPAGE_REQUIRE_NODES=2.
// The hugetlb tests set the per-node pools themselves (root) and put them back.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <list>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/hugetlb_pool.hpp"
#include "hugepage/metrics.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/shared_arena_allocator.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/strategy.hpp"
#include "hugepage/upkeep.hpp"
#include "numa_support.hpp"
#include "support.hpp"
#include "upkeep_support.hpp"

namespace hugepage {
namespace {

using test::kHuge;
using test::kMiB;

constexpr std::size_t kBlock = 32 * kMiB;  // 16 huge pages

std::size_t within(std::size_t a, std::size_t b) { return a > b ? a - b : b - a; }

// The pages of the mapping that starts at `start`, per node, in bytes, from /proc/self/numa_maps
// ("7f... bind:1 anon=16 dirty=16 N1=16 kernelpagesize_kB=2048": the counts are of pages of
// kernelpagesize_kB, 4 kB for THP).
std::map<int, std::size_t> numa_maps_bytes(const void* start) {
  std::ifstream in("/proc/self/numa_maps");
  char address[32];
  std::snprintf(address, sizeof address, "%lx", reinterpret_cast<unsigned long>(start));
  std::map<int, std::size_t> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, line.find(' '), address) != 0) continue;
    std::istringstream words(line);
    std::string word;
    std::size_t page = 4096;
    std::map<int, std::size_t> pages;
    while (words >> word) {
      if (word.size() > 1 && word[0] == 'N' && word.find('=') != std::string::npos) {
        pages[std::stoi(word.substr(1))] = std::stoull(word.substr(word.find('=') + 1));
      } else if (word.compare(0, 18, "kernelpagesize_kB=") == 0) {
        page = std::stoull(word.substr(18)) * 1024;
      }
    }
    for (const auto& [node, count] : pages) out[node] = count * page;
  }
  return out;
}

// The per-node 2 MiB pools, set for a test and put back after it. Needs root.
class node_pools {
 public:
  node_pools() {
    for (int n = 0; n < 2; ++n)
      saved_[n] = numa::read_node_pool(n, page_size::huge_2m, "nr_hugepages");
  }
  ~node_pools() {
    for (int n = 0; n < 2; ++n) {
      if (saved_[n]) set(n, *saved_[n]);
    }
  }
  bool readable() const { return saved_[0] && saved_[1]; }
  static bool set(int node, std::uint64_t pages) {
    std::ofstream out(numa::node_pool_file(node, page_size::huge_2m, "nr_hugepages"));
    out << pages << '\n';
    out.flush();
    return out.good() && numa::read_node_pool(node, page_size::huge_2m, "nr_hugepages") == pages;
  }

 private:
  std::optional<std::uint64_t> saved_[2];
};

struct on_node_one : default_options {
  static constexpr numa_placement numa = numa_placement::bind({1});
};

TEST(NumaTwoNodes, AContainerBoundToNodeOneIsAllOnNodeOneAndHuge) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  std::vector<char, collapse_allocator<char, on_node_one>> v(kBlock, 'x');
  const backing_report r = backing_of(v.data(), v.size());
  EXPECT_EQ(r.bytes_on_node(1), kBlock) << r.nodes_note;
  EXPECT_EQ(r.huge_bytes_on_node(1), kBlock);
  EXPECT_EQ(r.bytes_on_node(0), 0U);
  EXPECT_EQ(test::policy_at(v.data()).mode, 2);
  // THP faulted by the caller's first touch goes there too.
  std::vector<char, thp_allocator<char, on_node_one>> w(kBlock, 'y');
  const backing_report t = backing_of(w.data(), w.size());
  EXPECT_EQ(t.bytes_on_node(1), t.resident_bytes());
  EXPECT_EQ(t.bytes_on_node(0), 0U);
}

TEST(NumaTwoNodes, InterleavedHalfItsHugePagesAreOnEachNode) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  const strategy s = strategy::collapse().placed(numa_placement::interleave({0, 1}));
  void* p = s.allocate(kBlock, 1);
  const backing_report r = backing_of(p, kBlock);
  EXPECT_EQ(r.huge_bytes(), kBlock);
  EXPECT_LE(within(r.huge_bytes_on_node(0), kBlock / 2), kHuge) << r.huge_bytes_on_node(0);
  EXPECT_LE(within(r.huge_bytes_on_node(1), kBlock / 2), kHuge) << r.huge_bytes_on_node(1);
  EXPECT_EQ(r.huge_bytes_on_node(0) + r.huge_bytes_on_node(1), kBlock);
  s.deallocate(p, kBlock, 1);
}

TEST(NumaTwoNodes, TheReportPerNodeIsWhatNumaMapsSays) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  const strategy s = strategy::collapse().placed(numa_placement::interleave({0, 1}));
  void* p = s.allocate(kBlock, 1);
  const backing_report r = backing_of(p, kBlock);
  const std::map<int, std::size_t> maps = numa_maps_bytes(p);
  ASSERT_FALSE(maps.empty()) << "no numa_maps line at " << p;
  for (int node = 0; node < 2; ++node) {
    const auto it = maps.find(node);
    const std::size_t listed = it == maps.end() ? 0 : it->second;
    EXPECT_LE(within(r.bytes_on_node(node), listed), kHuge)
        << "node " << node << ": library " << r.bytes_on_node(node) << ", numa_maps " << listed;
  }
  s.deallocate(p, kBlock, 1);
}

// NUMA balancing's settings, set for a test and put back after it (root): the scanner starts at
// once and marks the whole address space every 100 ms or so.
class fast_numa_balancing {
 public:
  fast_numa_balancing() {
    for (const auto& [file, value] : settings()) {
      std::ifstream in(file);
      std::string old;
      if (!(in >> old)) continue;
      saved_.emplace_back(file, old);
      std::ofstream(file) << value << '\n';
    }
  }
  ~fast_numa_balancing() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
      std::ofstream(it->first) << it->second << '\n';
  }
  bool enabled() const {
    return !saved_.empty() && saved_.front().first == settings().front().first;
  }

 private:
  static std::vector<std::pair<std::string, std::string>> settings() {
    const std::string debug = "/sys/kernel/debug/sched/numa_balancing/";
    return {{"/proc/sys/kernel/numa_balancing", "1"},
            {debug + "scan_delay_ms", "10"},
            {debug + "scan_period_min_ms", "100"},
            {debug + "scan_period_max_ms", "200"},
            {debug + "scan_size_mb", "1024"}};
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

std::uint64_t vmstat(const char* name) {
  std::ifstream in("/proc/vmstat");
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value) {
    if (key == name) return value;
  }
  return 0;
}

// Runs on this CPU, touching nothing, until NUMA balancing's scanner has marked `marks` more pages
// (vmstat `counter`), up to 60 s: whether it did. The scanner works on the task's return to user
// space, so the wait spins rather than sleeps.
bool marked_by_balancing(const char* counter, std::uint64_t marks) {
  const std::uint64_t start = vmstat(counter);
  for (int ms = 0; ms < 60000 && vmstat(counter) < start + marks; ms += 10) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  const std::uint64_t got = vmstat(counter) - start;
  if (got < marks)
    std::fprintf(stderr, "%s: %llu of %llu marked in 60 s\n", counter,
                 static_cast<unsigned long long>(got), static_cast<unsigned long long>(marks));
  return got >= marks;
}

// Linux 6.1's move_pages answers EFAULT for a page NUMA balancing has made PROT_NONE (a hinting
// entry), resident though it is: the per-node figures must not lose it, PMD-mapped or split into
// base pages. As root the frame's node comes from sysfs's memory blocks; without CAP_SYS_ADMIN
// (frames hidden) the bytes are counted as unattributed, with a note.
struct balanced_options : default_options {
  static constexpr const char* label = "numa-balanced";
};

TEST(NumaTwoNodes, PagesNumaBalancingMarkedStayOnTheirNodes) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("sets NUMA balancing's scan settings (root)");
  const fast_numa_balancing balancing;
  if (!balancing.enabled()) HUGEPAGE_SKIP_OR_FAIL("no /proc/sys/kernel/numa_balancing");
  const bool blocks = ::access("/sys/devices/system/memory/block_size_bytes", R_OK) == 0;
  const char* const splitter = "/sys/kernel/debug/split_huge_pages";
  for (const bool split : {false, true}) {
    for (const bool as_nobody : {false, true}) {
      const int code = test::run_in_child([=]() -> int {
        constexpr std::size_t bytes = 2 * kBlock;
        thp_allocator<char, balanced_options> s;
        char* const p = s.allocate(bytes);
        // First touch under a task policy: the mapping keeps the default policy, which NUMA
        // balancing scans (it passes over a bound one).
        for (int node = 0; node < 2; ++node) {
          unsigned long mask = 1UL << node;
          if (::syscall(SYS_set_mempolicy, numa::mpol_bind, &mask, 65UL) != 0) return 2;
          std::memset(p + node * kBlock, 'x', kBlock);
        }
        if (::syscall(SYS_set_mempolicy, 0, nullptr, 0UL) != 0) return 2;
        const char* counter = "numa_huge_pte_updates";
        std::uint64_t marks = bytes / kHuge;
        if (split) {
          // Split into base pages (6.1's scanner passes over a THP folio mapped by PTEs); the
          // scanner then passes over the pages on the node this task runs on: half the block.
          if (::madvise(p, bytes, MADV_NOHUGEPAGE) != 0) return 3;
          std::ofstream out(splitter);
          out << ::getpid() << ",0x" << std::hex << reinterpret_cast<std::uintptr_t>(p) << ",0x"
              << reinterpret_cast<std::uintptr_t>(p + bytes) << '\n';
          out.flush();
          if (!out) return 12;
          counter = "numa_pte_updates";
          // An eighth of the block, not the half: the half (even less 2 MiB) was not marked
          // within 60 s in about one run of ten in the two-node guest, for a reason not found.
          // What is checked below holds for any number of marked pages.
          marks = bytes / test::kPage / 8;
        }
        if (as_nobody && !test::become_nobody()) return 4;
        if (!marked_by_balancing(counter, marks)) return 5;
        const backing_report r = backing_of(p, bytes);
        const std::map<int, std::size_t> maps = numa_maps_bytes(p);
        std::size_t placed = 0;
        for (const node_bytes& n : r.nodes) placed += n.bytes;
        std::fprintf(stderr,
                     "as %s, %s: source %s, resident %zu, per node %zu, unattributed %zu (%s); "
                     "numa_maps N0 %zu N1 %zu\n",
                     as_nobody ? "nobody" : "root", split ? "base pages" : "PMD-mapped",
                     name_of(r.source), r.resident_bytes(), placed, r.nodes_unattributed,
                     r.nodes_note.c_str(), maps.count(0) != 0 ? maps.at(0) : 0,
                     maps.count(1) != 0 ? maps.at(1) : 0);
        if (r.resident_bytes() != bytes) return 6;
        if (placed + r.nodes_unattributed != bytes) return 7;
        if (r.nodes_unattributed != 0 && r.nodes_note.empty()) return 8;
        // The label's metrics say the same: some unattributed where the report had some (the
        // block is not touched, so its marks stay), none as root.
        std::ostringstream metrics;
        write_metrics(metrics);
        const std::string series =
            "hugepage_label_node_unattributed_bytes{label=\"numa-balanced\"} ";
        const std::size_t at = metrics.str().find(series);
        if (at == std::string::npos) return 13;
        const std::uint64_t exported = std::stoull(metrics.str().substr(at + series.size()));
        if ((exported != 0) != (r.nodes_unattributed != 0)) return 14;
        std::ostringstream json;
        write_metrics_json(json);
        if (json.str().find("\"nodes_unattributed\":" + std::to_string(exported)) ==
            std::string::npos) {
          return 15;
        }
        if (!as_nobody && blocks) {
          if (r.nodes_unattributed != 0) return 9;
          for (int node = 0; node < 2; ++node) {
            const auto it = maps.find(node);
            if (r.bytes_on_node(node) != (it == maps.end() ? 0 : it->second)) return 10;
            if (r.huge_bytes_on_node(node) != (split ? 0 : r.bytes_on_node(node))) return 11;
          }
        }
        s.deallocate(p, bytes);
        return 0;
      });
      if (code == 5) HUGEPAGE_SKIP_OR_FAIL("NUMA balancing marked too few pages within 60 s");
      if (code == 12) HUGEPAGE_SKIP_OR_FAIL(std::string("cannot write ") + splitter);
      EXPECT_EQ(code, 0) << (as_nobody ? "as nobody, " : "as root, ")
                         << (split ? "base pages" : "PMD-mapped")
                         << ": 6 resident is not the block, 7 bytes per node and unattributed "
                            "are not the resident bytes, 8 unattributed without a note, 9 "
                            "unattributed as root, 10 a node's bytes are not numa_maps', 11 huge "
                            "bytes per node wrong, 13 no unattributed series for the label, 14 "
                            "it says none where the report has some or the other way, 15 the "
                            "JSON's nodes_unattributed differs";
    }
  }
}

struct blind_options : default_options {
  static constexpr const char* label = "numa-blind";
};

// What the kernel does not show is said, not guessed, as nobody with NUMA balancing marking pages
// (Linux 6.1): a report whose residency had to come from smaps (pagemap closed: a process that
// changed its user is not dumpable) is not exact and says why, since 6.1's smaps leaves out a THP
// it marked; one named node beside unattributed bytes gets no more huge bytes than it holds, and
// they are an estimate; a label of several blocks keeps a note that names no wrong amount.
TEST(NumaTwoNodes, WhatMarkedPagesHideIsSaidNotGuessed) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("sets NUMA balancing's scan settings (root)");
  const fast_numa_balancing balancing;
  if (!balancing.enabled()) HUGEPAGE_SKIP_OR_FAIL("no /proc/sys/kernel/numa_balancing");
  for (const bool dumpable : {false, true}) {
    const int code = test::run_in_child([=]() -> int {
      // One block of a huge half and a base-page half, and a second block of the label.
      thp_allocator<char, blind_options> a;
      constexpr std::size_t huge_part = 4 * kHuge, base_part = 4 * kHuge;
      char* const block = a.allocate(huge_part + base_part);
      char* const huge = block;
      char* const base = block + huge_part;
      char* const other = a.allocate(huge_part);
      if (::madvise(base, base_part, MADV_NOHUGEPAGE) != 0) return 2;
      // Each part half on each node, by first touch under a task policy (the mappings keep the
      // default policy, which NUMA balancing scans).
      for (int node = 0; node < 2; ++node) {
        unsigned long mask = 1UL << node;
        if (::syscall(SYS_set_mempolicy, numa::mpol_bind, &mask, 65UL) != 0) return 2;
        std::memset(huge + node * huge_part / 2, 'x', huge_part / 2);
        std::memset(base + node * base_part / 2, 'x', base_part / 2);
        std::memset(other + node * huge_part / 2, 'x', huge_part / 2);
      }
      if (::syscall(SYS_set_mempolicy, 0, nullptr, 0UL) != 0) return 2;
      // And a hugetlb page where the pool has one (checked only where one was got).
      char* hugetlb = static_cast<char*>(
          ::mmap(nullptr, kHuge, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0));
      if (hugetlb == MAP_FAILED) hugetlb = nullptr;
      if (!test::become_nobody()) return 3;
      if (!dumpable && ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return 3;
      if (!marked_by_balancing("numa_huge_pte_updates", 2 * huge_part / kHuge)) return 5;
      const backing_report h = backing_of(huge, huge_part);
      const backing_report r = backing_of(block, huge_part + base_part);
      const backing_report label = coverage_of(blind_options::label);
      std::fprintf(stderr,
                   "%s: huge part: source %s, exact %d, thp %zu, note '%s'; block: resident %zu "
                   "(huge %zu), unattributed %zu, estimated %d; label nodes_note '%s'\n",
                   dumpable ? "dumpable" : "not dumpable", name_of(h.source), int(h.exact), h.thp,
                   h.note.c_str(), r.resident_bytes(), r.huge_bytes(), r.nodes_unattributed,
                   int(r.nodes_estimated), label.nodes_note.c_str());
      for (const node_bytes& n : r.nodes) {
        std::fprintf(stderr, "  node %d: %zu bytes, %zu huge\n", n.node, n.bytes, n.huge_bytes);
      }
      if (!dumpable) {
        // pagemap is closed to a process that is not dumpable: residency from smaps.
        if (h.source != backing_source::smaps) return 6;
        if (h.exact || h.note.find("NUMA balancing is on") == std::string::npos) return 7;
        if (label.exact) return 7;
        // The metrics say the figure is not exact, and the JSON says why.
        std::ostringstream metrics, json;
        write_metrics(metrics);
        write_metrics_json(json);
        if (metrics.str().find("hugepage_label_coverage_exact{label=\"numa-blind\"} 0\n") ==
                std::string::npos ||
            json.str().find("\"exact\":false,\"note\":\"cannot open /proc/self/pagemap") ==
                std::string::npos ||
            json.str().find("NUMA balancing is on") == std::string::npos) {
          return 12;
        }
        // Resident hugetlb alone is read exactly from smaps: no such note.
        if (hugetlb != nullptr) {
          const backing_report t = backing_of(hugetlb, kHuge);
          if (!t.exact || t.note.find("NUMA balancing") != std::string::npos) return 13;
        }
      } else {
        if (r.resident_bytes() != huge_part + base_part) return 8;
        for (const node_bytes& n : r.nodes) {
          if (n.huge_bytes > n.bytes) return 9;
        }
        if (r.nodes_unattributed != 0 && r.huge_bytes() != 0 && r.base != 0 && !r.nodes_estimated) {
          return 10;
        }
        if (label.nodes_unattributed != 0 &&
            (label.nodes_note.find("nodes_unattributed") == std::string::npos ||
             label.nodes_note.find("iB") != std::string::npos)) {
          return 11;
        }
      }
      a.deallocate(other, huge_part);
      a.deallocate(block, huge_part + base_part);
      if (hugetlb != nullptr) ::munmap(hugetlb, kHuge);
      return 0;
    });
    if (code == 5) HUGEPAGE_SKIP_OR_FAIL("NUMA balancing marked too few huge pages within 60 s");
    EXPECT_EQ(code, 0) << (dumpable ? "dumpable: " : "not dumpable: ")
                       << "6 pagemap was open, 7 the smaps report says exact or no word of NUMA "
                          "balancing, 8 resident bytes lost with pagemap open, 9 a node's huge "
                          "bytes above its bytes, 10 huge bytes per node beside unattributed "
                          "ones not marked estimated, 11 the note names an amount or not "
                          "nodes_unattributed, 12 the metrics say exact or the JSON not why, "
                          "13 resident hugetlb alone lost exactness";
  }
}

TEST(NumaTwoNodes, BoundHugetlbComesFromThatNodesPoolOnly) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("setting per-node pools needs root");
  node_pools pools;
  if (!pools.readable()) HUGEPAGE_SKIP_OR_FAIL("no per-node 2 MiB pool files");
  constexpr std::uint64_t pages = kBlock / kHuge;
  ASSERT_TRUE(node_pools::set(1, 0));
  ASSERT_TRUE(node_pools::set(0, pages + 4)) << "node 0 could not reserve " << pages + 4;
  ASSERT_GE(numa::read_node_pool(0, page_size::huge_2m, "free_hugepages").value_or(0), pages);
  const std::size_t live = test::live_mappings();

  // Node 1's pool is empty while node 0's has the pages: a clear error naming node 1.
  const strategy on_one = strategy::hugetlb().placed(numa_placement::bind({1}));
  try {
    void* p = on_one.allocate(kBlock, 1);
    on_one.deallocate(p, kBlock, 1);
    ADD_FAILURE() << "a block bound to node 1 was served with node 1's pool empty";
  } catch (const node_pool_exhausted& e) {
    EXPECT_EQ(e.node(), 1);
    EXPECT_EQ(e.pages_requested(), pages);
    EXPECT_EQ(e.pages_available(), 0U);
    EXPECT_EQ(e.file(), "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages");
    EXPECT_NE(std::string(e.what()).find("bound to node 1, where node 1 has 0 free"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(test::live_mappings(), live);

  // Preferred falls to node 0, counted.
  const std::uint64_t other = stats().fallbacks_to_other_node;
  const strategy prefers_one = strategy::hugetlb().placed(numa_placement::preferred(1));
  void* q = prefers_one.allocate(kBlock, 1);
  EXPECT_EQ(backing_of(q, kBlock).bytes_on_node(0), kBlock);
  EXPECT_EQ(stats().fallbacks_to_other_node, other + 1);
  prefers_one.deallocate(q, kBlock, 1);

  // Bound to node 0: all there, all hugetlb.
  const strategy on_zero = strategy::hugetlb().placed(numa_placement::bind({0}));
  void* p = on_zero.allocate(kBlock, 1);
  const backing_report r = backing_of(p, kBlock);
  EXPECT_EQ(r.hugetlb_2m, kBlock);
  EXPECT_EQ(r.huge_bytes_on_node(0), kBlock);
  on_zero.deallocate(p, kBlock, 1);

  // With pages on node 1, bound there: all there.
  ASSERT_TRUE(node_pools::set(1, pages));
  void* b = on_one.allocate(kBlock, 1);
  const backing_report one = backing_of(b, kBlock);
  EXPECT_EQ(one.hugetlb_2m, kBlock);
  EXPECT_EQ(one.huge_bytes_on_node(1), kBlock);
  EXPECT_EQ(one.bytes_on_node(0), 0U);
  const std::map<int, std::size_t> maps = numa_maps_bytes(b);
  EXPECT_EQ(maps.count(0), 0U);
  EXPECT_EQ(maps.count(1) != 0 ? maps.at(1) : 0, kBlock);
  on_one.deallocate(b, kBlock, 1);
}

TEST(NumaTwoNodes, AnArenasSlabsFollowItsPlacement) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  arena a(strategy::thp().placed(numa_placement::bind({1})));
  std::vector<void*> blocks;
  for (int i = 0; i < 20000; ++i) blocks.push_back(a.allocate(200, 8));
  for (void* b : blocks) std::memset(b, 1, 200);
  const backing_report r = a.backing();
  EXPECT_GT(r.resident_bytes(), 0U);
  EXPECT_EQ(r.bytes_on_node(1), r.resident_bytes());
  EXPECT_EQ(r.bytes_on_node(0), 0U);
  for (void* b : blocks) a.deallocate(b, 200, 8);
}

struct node_one_tag {
  static constexpr numa_placement numa = numa_placement::bind({1});
};

TEST(NumaTwoNodes, ASharedArenasSlabsFollowItsTag) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  std::list<int, shared_arena_allocator<int, node_one_tag>> nodes(1000, 7);
  const backing_report r = shared_arena<node_one_tag>().backing();
  EXPECT_GT(r.resident_bytes(), 0U);
  EXPECT_EQ(r.bytes_on_node(1), r.resident_bytes());
}

// A kernel setting (one line of /proc or /sys) set for a test and put back after it.
class file_setting {
 public:
  file_setting(std::string file, const char* value) : file_(std::move(file)) {
    std::ifstream in(file_);
    if (!std::getline(in, saved_)) return;
    std::ofstream(file_) << value << '\n';
    set_ = true;
  }
  ~file_setting() {
    if (set_) std::ofstream(file_) << saved_ << '\n';
  }
  file_setting(const file_setting&) = delete;
  file_setting& operator=(const file_setting&) = delete;

 private:
  std::string file_;
  std::string saved_;
  bool set_ = false;
};

// A number of kB from /sys/devices/system/node/nodeN/meminfo ("Node 0 MemFree:  123 kB").
std::uint64_t node_meminfo_kb(int node, const std::string& key) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word, name;
    std::uint64_t value = 0;
    if (words >> word >> word >> name >> value && name == key + ":") return value;
  }
  return 0;
}

struct upkept_on_two : default_options {
  static constexpr const char* label = "numa-upkept";
};

// MADV_COLLAPSE allocates a chunk's huge page on the chunk's node (Linux 6.1: the node of most of
// its pages, __GFP_THISNODE), so ENOMEM there says nothing of the other node: upkeep backs off
// node 0 only and restores node 1's chunks. A labelled block, half first touched on each node,
// split to base pages; node 0 filled by its hugetlb pool; then upkeep calls (each slow chunk under
// TCG backs the process off 1 s: the calls go on until node 1 is huge, 120 s at most). Without the
// per-node back-off node 0's first chunk ends every call and node 1 is never restored.
TEST(NumaTwoNodes, UpkeepBacksOffOnlyTheNodeThatHasNoFreeHugePage) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  REQUIRE_THP_AND_COLLAPSE();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("sets the per-node pools and splits pages (root)");
  std::optional<node_pools> pools(std::in_place);
  if (!pools->readable()) HUGEPAGE_SKIP_OR_FAIL("no per-node 2 MiB pool files");
  const std::optional<std::uint64_t> pool_at_start[2] = {
      numa::read_node_pool(0, page_size::huge_2m, "nr_hugepages"),
      numa::read_node_pool(1, page_size::huge_2m, "nr_hugepages")};
  // NUMA balancing would mark pages PROT_NONE, and Linux 6.1's move_pages names no node for them.
  const file_setting no_balancing("/proc/sys/kernel/numa_balancing", "0");
  auto& c = detail::global_upkeep_counters();
  struct clear_backoffs {  // never left behind for the next test, pass or fail
    detail::upkeep_counters& c;
    ~clear_backoffs() {
      for (int n = 0; n < 64; ++n) {
        c.node_retry_at[n] = 0;
        c.node_backoff[n] = 0;
      }
      c.nodes_backing_off = 0;
    }
  } clear{c};
  constexpr std::size_t bytes = 2 * kBlock;
  thp_allocator<char, upkept_on_two> alloc;
  char* const p = alloc.allocate(bytes);
  struct freed {
    thp_allocator<char, upkept_on_two>& alloc;
    char* p;
    ~freed() { alloc.deallocate(p, bytes); }
  } free_at_end{alloc, p};
  for (int node = 0; node < 2; ++node) {
    unsigned long mask = 1UL << node;
    ASSERT_EQ(::syscall(SYS_set_mempolicy, numa::mpol_bind, &mask, 65UL), 0);
    std::memset(p + node * kBlock, 'a' + node, kBlock);
  }
  ASSERT_EQ(::syscall(SYS_set_mempolicy, 0, nullptr, 0UL), 0);
  // Split to base pages: MADV_NOHUGEPAGE keeps khugepaged off until node 0 is full (it collapsed
  // half of node 0's chunks meanwhile in the 6.1 guest, THP always), the debugfs splitter splits
  // every THP of the range; then the range is advised again, as the library advised it.
  ASSERT_EQ(::madvise(p, bytes, MADV_NOHUGEPAGE), 0);
  const char* const splitter = "/sys/kernel/debug/split_huge_pages";
  {
    std::ofstream out(splitter);
    out << ::getpid() << ",0x" << std::hex << reinterpret_cast<std::uintptr_t>(p) << ",0x"
        << reinterpret_cast<std::uintptr_t>(p + bytes) << '\n';
    out.flush();
    if (!out) HUGEPAGE_SKIP_OR_FAIL(std::string("cannot write ") + splitter);
  }
  const backing_report split = backing_of(p, bytes);
  for (int node = 0; node < 2; ++node) {
    ASSERT_EQ(split.bytes_on_node(node), kBlock) << "node " << node;
    ASSERT_EQ(split.huge_bytes_on_node(node), 0U) << "node " << node;
  }
  // Node 0 full: its pool takes every huge page the kernel can find there.
  const std::uint64_t total_kb = node_meminfo_kb(0, "MemTotal");
  ASSERT_GT(total_kb, 0U);
  node_pools::set(0, total_kb / (kHuge / 1024));
  const std::uint64_t taken =
      numa::read_node_pool(0, page_size::huge_2m, "nr_hugepages").value_or(0);
  std::fprintf(stderr, "node 0: %llu MiB, pool %llu pages, %llu MiB free after\n",
               static_cast<unsigned long long>(total_kb / 1024),
               static_cast<unsigned long long>(taken),
               static_cast<unsigned long long>(node_meminfo_kb(0, "MemFree") / 1024));
  ASSERT_EQ(::madvise(p, bytes, MADV_HUGEPAGE), 0);
  // What khugepaged may have restored since (none seen): node 0's stays as it is.
  const std::size_t huge_on_0 = backing_of(p, kBlock).huge_bytes_on_node(0);
  ASSERT_LT(huge_on_0, kBlock) << "khugepaged restored node 0 first: nothing to refuse";
  const auto wait_out_process_back_off = [&c] {
    for (int i = 0; i < 7000 && detail::steady_ns() < c.retry_at.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  wait_out_process_back_off();
  const upkeep_statistics before = upkeep_stats();
  std::vector<upkeep_result> calls;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
    calls.push_back(upkeep());
    const upkeep_result& r = calls.back();
    std::fprintf(stderr, "call %zu: %s\n", calls.size(), test::describe(r).c_str());
    EXPECT_EQ(r.restored + r.already_huge + r.refused + r.left + r.gone, r.decayed_bytes);
    EXPECT_EQ(r.refusals_of(ENOMEM) * kHuge, r.refused) << "node 0's chunks: ENOMEM only";
    if (backing_of(p + kBlock, kBlock).huge_bytes_on_node(1) == kBlock) break;
    wait_out_process_back_off();  // a slow chunk (TCG), not node 0's ENOMEM
  }
  const backing_report after = backing_of(p, bytes);
  ASSERT_EQ(after.huge_bytes_on_node(1), kBlock) << "node 1's chunks were not restored";
  EXPECT_EQ(after.huge_bytes_on_node(0), huge_on_0);
  EXPECT_EQ(after.bytes_on_node(0), kBlock) << "node 0's chunks left where they were";
  std::size_t restored = 0, refused = 0, backed_off = 0;
  for (const upkeep_result& r : calls) {
    restored += r.restored;
    refused += r.refusals_of(ENOMEM);
    backed_off += r.backed_off ? 1 : 0;
  }
  EXPECT_GE(refused, 1U) << "node 0 was not full";
  const upkeep_statistics mid = upkeep_stats();
  EXPECT_EQ(mid.calls - before.calls, calls.size());
  EXPECT_EQ(mid.restored_bytes - before.restored_bytes, restored);
  EXPECT_EQ(mid.refused_chunks - before.refused_chunks, refused);
  EXPECT_EQ(mid.backed_off - before.backed_off, backed_off);
  EXPECT_NE(c.nodes_backing_off.load() & 1U, 0U) << "node 0 backs off";
  EXPECT_EQ(c.nodes_backing_off.load() & 2U, 0U) << "node 1 does not";

  // A later call: node 1 stays huge, node 0 backed off. Its wait may have run out while a slow
  // chunk's second passed: a call then refuses node 0 again, which backs it off twice as long.
  wait_out_process_back_off();
  upkeep_result later;
  std::uint64_t later_calls = 0;
  for (int i = 0; i < 3; ++i) {
    later = upkeep();
    ++later_calls;
    std::fprintf(stderr, "later call: %s\n", test::describe(later).c_str());
    EXPECT_EQ(later.restored, 0U);
    EXPECT_EQ(later.refusals_of(ENOMEM) * kHuge, later.refused);
    if (later.backed_off) break;
    wait_out_process_back_off();
  }
  EXPECT_TRUE(later.backed_off) << test::describe(later);
  EXPECT_EQ(later.decayed_bytes, kBlock - huge_on_0) << "node 0's chunks only";
  EXPECT_EQ(later.left, kBlock - huge_on_0);
  EXPECT_EQ(later.calls, 0U);
  EXPECT_EQ(backing_of(p + kBlock, kBlock).huge_bytes_on_node(1), kBlock);
  const upkeep_statistics end = upkeep_stats();
  EXPECT_EQ(end.calls, mid.calls + later_calls);
  EXPECT_EQ(end.backed_off, mid.backed_off + (later.backed_off ? 1 : 0));
  EXPECT_EQ(end.restored_bytes, mid.restored_bytes);
  EXPECT_EQ(std::memcmp(p, std::string(kBlock, 'a').data(), kBlock), 0);
  EXPECT_EQ(std::memcmp(p + kBlock, std::string(kBlock, 'b').data(), kBlock), 0);
  pools.reset();  // put back now (a failed ASSERT above puts them back too), to check it
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(numa::read_node_pool(node, page_size::huge_2m, "nr_hugepages"), pool_at_start[node])
        << "node " << node << "'s pool";
  }
}

struct mixed_on_two : default_options {
  static constexpr numa_placement numa = numa_placement::interleave({0, 1});
  static constexpr const char* label = "numa-mixed";
};

// Without PAGEMAP_SCAN (kernels before 6.7; simulated: every ioctl fails with ENOTTY) a mapping
// part huge and part not on two nodes: as root, kpageflags says page by page which pages are
// huge, and the huge bytes per node are exact; without it (nobody) they could only be shared out
// by bytes per node, so the report marks them estimated and the metrics give NaN (JSON null) and
// the reason instead of a number. The truth: an interleaved THP block whose node-0 huge pages are
// all split, so node 0 holds no huge byte.
TEST(NumaTwoNodes, WithoutPagemapScanHugeBytesPerNodeAreExactOrMarkedEstimated) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("the exact case reads kpageflags (root)");
  for (const bool as_nobody : {false, true}) {
    const int code = test::run_in_child([as_nobody]() -> int {
      std::vector<char, thp_allocator<char, mixed_on_two>> v(kBlock, 'x');
      char* const p = v.data();
      // khugepaged must not collapse the split pages again while they are read.
      if (::madvise(p, kBlock, MADV_NOHUGEPAGE) != 0) return 2;
      std::size_t huge_on_one = 0;
      for (std::size_t at = 0; at < kBlock; at += kHuge) {
        const void* page = p + at;
        int node = -1;
        if (numa::nodes_of_pages(0, 1, &page, &node) || node < 0 || node > 1) return 3;
        if (node == 1) {
          huge_on_one += kHuge;
        } else if (::madvise(p + at + 4096, 4096, MADV_DONTNEED) != 0) {  // splits the PMD
          return 4;
        }
      }
      std::fprintf(stderr, "child: %zu MiB of huge pages on node 1\n", huge_on_one / kMiB);
      if (huge_on_one == 0 || huge_on_one == kBlock) return 5;  // not interleaved: no test
      if (as_nobody && !test::become_nobody()) return 6;
      if (!test::fail_syscall(__NR_ioctl, ENOTTY)) return 7;
      const backing_report r = backing_of(p, kBlock);
      std::ostringstream prom, json;
      write_metrics(prom);
      write_metrics_json(json);
      const std::string metrics = prom.str();
      std::fprintf(stderr,
                   "child (uid %d): source %s, huge %zu, node 0 huge %zu, node 1 huge %zu, "
                   "estimated %d, note '%s'\n",
                   static_cast<int>(::geteuid()), name_of(r.source), r.huge_bytes(),
                   r.huge_bytes_on_node(0), r.huge_bytes_on_node(1), r.nodes_estimated ? 1 : 0,
                   r.nodes_note.c_str());
      const std::string sample = "hugepage_label_node_huge_bytes{label=\"numa-mixed\",node=\"";
      if (!as_nobody) {
        if (r.source != backing_source::kpageflags || r.huge_bytes() != huge_on_one) return 10;
        if (r.huge_bytes_on_node(0) != 0 || r.huge_bytes_on_node(1) != huge_on_one) return 11;
        if (r.nodes_estimated || !r.nodes_note.empty()) return 12;
        if (metrics.find(sample + "0\"} 0\n") == std::string::npos ||
            metrics.find(sample + "1\"} " + std::to_string(huge_on_one) + "\n") ==
                std::string::npos) {
          return 13;
        }
        if (json.str().find("\"nodes_note\":\"\"") == std::string::npos) return 14;
        return 0;
      }
      if (r.source != backing_source::smaps || r.nodes.size() != 2) return 20;
      if (!r.nodes_estimated || r.nodes_note.find("estimated") == std::string::npos) return 21;
      if (metrics.find(sample + "0\"} NaN\n") == std::string::npos ||
          metrics.find(sample + "1\"} NaN\n") == std::string::npos) {
        return 22;
      }
      const std::string j = json.str();
      const std::size_t at = j.find("{\"label\":\"numa-mixed\"");
      if (at == std::string::npos) return 23;
      if (j.find("\"1\":{\"bytes\":" + std::to_string(r.bytes_on_node(1)) + ",\"huge_bytes\":null}",
                 at) == std::string::npos) {
        return 24;
      }
      if (j.find("\"nodes_note\":\"huge bytes per node estimated", at) == std::string::npos)
        return 25;
      return 0;
    });
    EXPECT_EQ(code, 0) << (as_nobody ? "as nobody" : "as root") << "; see the child's output above";
  }
}

// The system-wide overcommit of the 2 MiB pool (nr_overcommit_hugepages), set for a test and
// put back after it. Needs root.
class pool_overcommit {
 public:
  static constexpr const char* file =
      "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_overcommit_hugepages";
  pool_overcommit() : saved_(read()) {}
  ~pool_overcommit() {
    if (saved_) set(*saved_);
  }
  bool readable() const { return saved_.has_value(); }
  static bool set(std::uint64_t pages) {
    std::ofstream out(file);
    out << pages << '\n';
    out.flush();
    return out.good() && read() == pages;
  }

 private:
  static std::optional<std::uint64_t> read() {
    std::ifstream in(file);
    std::uint64_t pages = 0;
    if (!(in >> pages)) return std::nullopt;
    return pages;
  }
  std::optional<std::uint64_t> saved_;
};

// Where nr_overcommit_hugepages leaves room, a fault under MPOL_BIND that finds no free page on
// the bound node gets a surplus page allocated there, from that node's memory: a bound block is
// served so, faulted in by allocate(), all on the bound node. Without enough room it is
// node_pool_exhausted, as before.
TEST(NumaTwoNodes, BoundHugetlbTakesSurplusPagesOnItsNodeWhereOvercommitAllows) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("setting pools needs root");
  node_pools pools;
  pool_overcommit overcommit;
  if (!pools.readable() || !overcommit.readable()) {
    HUGEPAGE_SKIP_OR_FAIL("no per-node 2 MiB pool files or no nr_overcommit_hugepages");
  }
  constexpr std::uint64_t pages = kBlock / kHuge;
  ASSERT_TRUE(node_pools::set(1, 0));
  ASSERT_TRUE(node_pools::set(0, pages + 4)) << "node 0 could not reserve " << pages + 4;
  ASSERT_EQ(read_pool(page_size::huge_2m)->surplus.value_or(1), 0U);
  const std::size_t live = test::live_mappings();
  const strategy on_one = strategy::hugetlb().placed(numa_placement::bind({1}));

  // Room for one page fewer than the block: refused before anything is mapped.
  ASSERT_TRUE(pool_overcommit::set(pages - 1));
  try {
    void* p = on_one.allocate(kBlock, 1);
    on_one.deallocate(p, kBlock, 1);
    ADD_FAILURE() << "served with room for " << pages - 1 << " surplus pages";
  } catch (const node_pool_exhausted& e) {
    EXPECT_EQ(e.node(), 1);
    EXPECT_NE(std::string(e.what()).find("node 1 has 0 free, and room for " +
                                         std::to_string(pages - 1) + " surplus pages"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(test::live_mappings(), live);

  // Room for the block: surplus pages on node 1, all of them faulted in by allocate().
  ASSERT_TRUE(pool_overcommit::set(pages));
  void* p = on_one.allocate(kBlock, 1);
  EXPECT_EQ(numa::read_node_pool(1, page_size::huge_2m, "surplus_hugepages"), pages);
  EXPECT_EQ(numa::read_node_pool(0, page_size::huge_2m, "free_hugepages"), pages + 4);
  const backing_report r = backing_of(p, kBlock);
  EXPECT_EQ(r.hugetlb_2m, kBlock);
  EXPECT_EQ(r.huge_bytes_on_node(1), kBlock) << r.nodes_note;
  const std::map<int, std::size_t> maps = numa_maps_bytes(p);
  EXPECT_EQ(maps.count(0), 0U);
  EXPECT_EQ(maps.count(1) != 0 ? maps.at(1) : 0, kBlock);
  on_one.deallocate(p, kBlock, 1);
  EXPECT_EQ(read_pool(page_size::huge_2m)->surplus.value_or(1), 0U);
  EXPECT_EQ(test::live_mappings(), live);
}

// This process moved into a cpuset cgroup whose memory is node 0 only (cgroup v2, as root), and
// back to where it was when the test ends; the cgroup is removed and the cpuset controller left
// as it was found.
class cpuset_of_node_zero {
 public:
  cpuset_of_node_zero() {
    std::ifstream self("/proc/self/cgroup");
    std::string line;
    while (std::getline(self, line)) {
      if (line.compare(0, 3, "0::") == 0) from_ = line.substr(3);
    }
    if (from_ != "/") {
      why_ = "this process is in cgroup '" + from_ + "', not the root of a cgroup v2 hierarchy";
      return;
    }
    std::ifstream controls(root + std::string("/cgroup.subtree_control"));
    std::string words((std::istreambuf_iterator<char>(controls)), std::istreambuf_iterator<char>());
    had_cpuset_ = words.find("cpuset") != std::string::npos;
    if (!had_cpuset_ && !write(root + std::string("/cgroup.subtree_control"), "+cpuset")) {
      why_ = "cannot enable the cpuset controller in " + std::string(root);
      return;
    }
    made_ = ::mkdir(dir.c_str(), 0755) == 0;
    if (!made_ || !write(dir + "/cpuset.mems", "0") ||
        !write(dir + "/cgroup.procs", std::to_string(::getpid()))) {
      why_ = "cannot make " + dir + " with cpuset.mems 0 and move this process there";
      return;
    }
    moved_ = true;
  }
  ~cpuset_of_node_zero() {
    if (moved_) write(root + std::string("/cgroup.procs"), std::to_string(::getpid()));
    if (made_) ::rmdir(dir.c_str());
    if (!had_cpuset_ && !from_.empty())
      write(root + std::string("/cgroup.subtree_control"), "-cpuset");
  }
  bool ok() const { return moved_; }
  const std::string& why() const { return why_; }

 private:
  static constexpr const char* root = "/sys/fs/cgroup";
  const std::string dir = std::string(root) + "/hugepage-numa-test";
  static bool write(const std::string& file, const std::string& text) {
    std::ofstream out(file);
    out << text << '\n';
    out.flush();
    return out.good();
  }
  std::string from_;
  std::string why_;
  bool had_cpuset_ = true;
  bool made_ = false;
  bool moved_ = false;
};

// preferred(1) in a process whose cpuset leaves node 1 out: "preferred" promises another node
// when its own cannot serve, so the block is placed by first touch (node 0 here) and counted
// once as a fallback to another node. bind({1}) there stays a clear error.
TEST(NumaTwoNodes, APreferredNodeOutsideTheCpusetIsAFallbackNotAnError) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("moving into a cpuset cgroup needs root");
  if (numa::read_node_pool(0, page_size::huge_2m, "free_hugepages").value_or(0) < kBlock / kHuge) {
    HUGEPAGE_SKIP_OR_FAIL("node 0's 2 MiB pool has no " + std::to_string(kBlock / kHuge) +
                          " free pages");
  }
  const cpuset_of_node_zero cpuset;
  if (!cpuset.ok()) HUGEPAGE_SKIP_OR_FAIL(cpuset.why());
  ASSERT_EQ(numa::allowed_nodes(), node_set{0});
  allocation_options prefaulted;
  prefaulted.prefault = true;
  for (const strategy& plain : {strategy::thp(prefaulted), strategy::hugetlb()}) {
    SCOPED_TRACE(int(plain.how()));
    const strategy s = plain.placed(numa_placement::preferred(1));
    const std::uint64_t other = stats().fallbacks_to_other_node;
    void* p = s.allocate(kBlock, 1);
    EXPECT_EQ(test::policy_at(p).mode, 0);
    // numa_maps, not backing_of(): NUMA balancing's scan may have made the pages PROT_NONE by
    // now, and move_pages then answers no node for them.
    const std::map<int, std::size_t> maps = numa_maps_bytes(p);
    EXPECT_EQ(maps.count(0) != 0 ? maps.at(0) : 0, kBlock);
    EXPECT_EQ(maps.count(1), 0U);
    EXPECT_EQ(stats().fallbacks_to_other_node, other + 1);
    s.deallocate(p, kBlock, 1);
  }
  try {
    const strategy bound = strategy::thp().placed(numa_placement::bind({1}));
    void* p = bound.allocate(kBlock, 1);
    bound.deallocate(p, kBlock, 1);
    ADD_FAILURE() << "bind({1}) served outside the cpuset";
  } catch (const allocation_error& e) {
    EXPECT_EQ(e.code(), std::errc::invalid_argument);
    // Said as a fact, not a guess: the library reads the cpuset's nodes itself.
    EXPECT_EQ(std::string(e.what()),
              "hugepage: NUMA placement 'bind' on node(s) 1 of 32 MiB refused: node(s) 1 are "
              "outside this process's cpuset, which allows node(s) 0 (Mems_allowed_list in "
              "/proc/self/status); mbind: Invalid argument");
  }
}

// bind({0, 1}) or interleave({0, 1}) in a cpuset of node 0: the kernel narrows the set to the
// nodes the cpuset allows (mbind intersects it with Mems_allowed) and says nothing, and the
// library lets it. Where the block went is what numa_maps and the kernel's policy show.
TEST(NumaTwoNodes, ASetPartlyOutsideTheCpusetIsNarrowedToItsAllowedNodes) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("moving into a cpuset cgroup needs root");
  if (numa::read_node_pool(0, page_size::huge_2m, "free_hugepages").value_or(0) < kBlock / kHuge) {
    HUGEPAGE_SKIP_OR_FAIL("node 0's 2 MiB pool has no " + std::to_string(kBlock / kHuge) +
                          " free pages");
  }
  const cpuset_of_node_zero cpuset;
  if (!cpuset.ok()) HUGEPAGE_SKIP_OR_FAIL(cpuset.why());
  ASSERT_EQ(numa::allowed_nodes(), node_set{0});
  allocation_options prefaulted;
  prefaulted.prefault = true;
  constexpr int mpol_bind = 2, mpol_interleave = 3;
  for (const strategy& plain : {strategy::thp(prefaulted), strategy::hugetlb()}) {
    for (const numa_placement& placement :
         {numa_placement::bind(node_set{0, 1}), numa_placement::interleave(node_set{0, 1})}) {
      SCOPED_TRACE(std::to_string(int(plain.how())) + " " + name_of(placement.mode));
      const strategy s = plain.placed(placement);
      const std::uint64_t other = stats().fallbacks_to_other_node;
      void* p = s.allocate(kBlock, 1);
      const test::kernel_policy policy = test::policy_at(p);
      EXPECT_EQ(policy.mode, placement.mode == numa_mode::bind ? mpol_bind : mpol_interleave);
      EXPECT_EQ(policy.nodes, 1UL) << "the kernel's set is node 0 alone";
      // The block's mapping may have merged with a neighbour of the same policy (one of 2 MiB
      // in the whole suite's run): at least the prefaulted block on node 0, nothing on node 1.
      const std::map<int, std::size_t> maps = numa_maps_bytes(p);
      EXPECT_GE(maps.count(0) != 0 ? maps.at(0) : 0, kBlock);
      EXPECT_EQ(maps.count(1), 0U);
      EXPECT_EQ(stats().fallbacks_to_other_node, other);
      s.deallocate(p, kBlock, 1);
    }
  }
}

// A cpuset of node 0 gets hugetlb pages from node 0's pool only: with it empty and node 1's pool
// full, the kernel refuses the reservation. The refusal says so - the allowed node, its free
// pages, the other node's, node 0's pool file - never that the pool as a whole is short.
TEST(NumaTwoNodes, AHugetlbRefusalInACpusetNamesItsNodesNotTheWholePool) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("setting per-node pools needs root");
  node_pools pools;
  if (!pools.readable()) HUGEPAGE_SKIP_OR_FAIL("no per-node 2 MiB pool files");
  constexpr std::uint64_t pages = kBlock / kHuge;
  ASSERT_TRUE(node_pools::set(0, 0));
  ASSERT_TRUE(node_pools::set(1, 2 * pages)) << "node 1 could not reserve " << 2 * pages;
  const std::uint64_t other_free =
      numa::read_node_pool(1, page_size::huge_2m, "free_hugepages").value_or(0);
  ASSERT_GE(other_free, pages);
  const std::optional<hugetlb_pool> before = read_pool(page_size::huge_2m);
  ASSERT_TRUE(before);
  const cpuset_of_node_zero cpuset;
  if (!cpuset.ok()) HUGEPAGE_SKIP_OR_FAIL(cpuset.why());
  ASSERT_EQ(numa::allowed_nodes(), node_set{0});
  const std::string words =
      "; this process's cpuset allows node 0 only (Mems_allowed), whose pool has 0 free: the " +
      std::to_string(other_free) +
      " free on node 1 cannot serve this process. Reserve more on node 0: echo " +
      std::to_string(pages) +
      " > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages, or widen the "
      "cpuset (cpuset.mems)";
  for (const numa_placement& placement : {numa_placement::local(), numa_placement::preferred(1)}) {
    SCOPED_TRACE(name_of(placement.mode));
    const strategy s = strategy::hugetlb().placed(placement);
    try {
      void* p = s.allocate(kBlock, 1);
      s.deallocate(p, kBlock, 1);
      ADD_FAILURE() << "hugetlb pages served in a cpuset whose node has none free";
    } catch (const pool_exhausted& e) {
      const std::string what = e.what();
      EXPECT_EQ(typeid(e), typeid(pool_exhausted)) << what;
      EXPECT_EQ(e.pages_requested(), pages);
      EXPECT_EQ(e.pages_available(), 0U);
      EXPECT_EQ(e.code(), std::errc::not_enough_memory);
      EXPECT_EQ(what.find("hugepage: hugetlb mmap of " + std::to_string(pages) +
                          " pages of 2 MiB (32 MiB) failed: "),
                0U)
          << what;
      ASSERT_GE(what.size(), words.size()) << what;
      EXPECT_EQ(what.substr(what.size() - words.size()), words) << what;
      EXPECT_EQ(what.find("vm.nr_hugepages"), std::string::npos) << what;
      EXPECT_EQ(what.find("/sys/kernel/mm/hugepages"), std::string::npos) << what;
    }
    const std::optional<hugetlb_pool> after = read_pool(page_size::huge_2m);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->free, before->free);
    EXPECT_EQ(after->reserved, before->reserved);
  }
}

// The 1 GiB pools of both nodes, set for a test and put back after it (where the kernel can
// allocate the pages again). Needs root.
class gib_node_pools {
 public:
  gib_node_pools() {
    for (int n = 0; n < 2; ++n) saved_[n] = numa::read_node_pool(n, gib, "nr_hugepages");
  }
  ~gib_node_pools() {
    for (int n = 0; n < 2; ++n) {
      if (saved_[n]) set(n, *saved_[n]);
    }
  }
  bool readable() const { return saved_[0] && saved_[1]; }
  static bool set(int node, std::uint64_t pages) {
    std::ofstream out(numa::node_pool_file(node, gib, "nr_hugepages"));
    out << pages << '\n';
    out.flush();
    return out.good() && numa::read_node_pool(node, gib, "nr_hugepages") == pages;
  }
  static constexpr page_size gib = page_size::huge_1g;

 private:
  std::optional<std::uint64_t> saved_[2];
};

// The same for 1 GiB pages (node 0's pool emptied, a page on node 1), whatever the placement: the
// reservation is refused before any policy applies.
TEST(NumaTwoNodes, AGibRefusalInACpusetNamesItsNodesWhateverThePlacement) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("setting per-node pools needs root");
  constexpr page_size gib = page_size::huge_1g;
  gib_node_pools pools;
  if (!pools.readable()) HUGEPAGE_SKIP_OR_FAIL("no per-node 1 GiB pool files");
  ASSERT_TRUE(gib_node_pools::set(0, 0));
  if (numa::read_node_pool(1, gib, "free_hugepages").value_or(0) == 0 &&
      !gib_node_pools::set(1, numa::read_node_pool(1, gib, "nr_hugepages").value_or(0) + 1)) {
    HUGEPAGE_SKIP_OR_FAIL("node 1 could not reserve a 1 GiB page");
  }
  const std::optional<std::uint64_t> free1 = numa::read_node_pool(1, gib, "free_hugepages");
  ASSERT_GE(free1.value_or(0), 1U);
  const cpuset_of_node_zero cpuset;
  if (!cpuset.ok()) HUGEPAGE_SKIP_OR_FAIL(cpuset.why());
  const std::string words =
      "; this process's cpuset allows node 0 only (Mems_allowed), whose pool has 0 free: the " +
      std::to_string(*free1) +
      " free on node 1 cannot serve this process. Reserve more on node 0: echo 1 > "
      "/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages, or widen the "
      "cpuset (cpuset.mems)";
  for (const numa_placement& placement :
       {numa_placement::local(), numa_placement::preferred(1), numa_placement::bind({1}),
        numa_placement::interleave({0, 1})}) {
    SCOPED_TRACE(name_of(placement.mode));
    const strategy s = strategy::hugetlb(gib, strict).placed(placement);
    try {
      void* p = s.allocate(std::size_t{1} << 30, 1);
      s.deallocate(p, std::size_t{1} << 30, 1);
      ADD_FAILURE() << "a 1 GiB page served in a cpuset whose node has none free";
    } catch (const pool_exhausted& e) {
      const std::string what = e.what();
      EXPECT_EQ(typeid(e), typeid(pool_exhausted)) << what;
      EXPECT_EQ(e.pages_available(), 0U);
      ASSERT_GE(what.size(), words.size()) << what;
      EXPECT_EQ(what.substr(what.size() - words.size()), words) << what;
    }
    EXPECT_EQ(numa::read_node_pool(1, gib, "free_hugepages"), free1);
  }
}

}  // namespace
}  // namespace hugepage
