// tools/test/doctor_views_test.cpp - memory mapped more than once is counted once: shared
// mappings of one object whose offsets overlap (ZGC's three views of its heap memfd).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "collect_process.hpp"
#include "doctor_samples.hpp"
#include "hugepage/smaps.hpp"
#include "mapping_summary.hpp"
#include "memory_classes.hpp"
#include "process_report.hpp"
#include "shared_views.hpp"

namespace hugepage::doctor {
namespace {

using hugepage::units::kib;
using hugepage::units::mib;

const memory_class_usage* class_of(const process_report& p, memory_class kind) {
  for (const memory_class_usage& c : p.classes) {
    if (c.kind == kind) return &c;
  }
  return nullptr;
}

TEST(DoctorViews, HeaderGivesOffsetDeviceAndInode) {
  const auto maps = parse_smaps(
      "7f0000000000-7f0000200000 rw-s 0001a000 00:01 24      /memfd:java_heap (deleted)\n"
      "Rss:  8 kB\n");
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].offset, 0x1a000u);
  EXPECT_EQ(maps[0].device, "00:01");
  EXPECT_EQ(maps[0].inode, 24u);
  EXPECT_EQ(maps[0].name, "/memfd:java_heap (deleted)");
}

// OpenJDK 17 with -XX:+UseZGC -Xms64m -Xmx64m -XX:+AlwaysPreTouch (keytool, Debian's
// openjdk-17-jre-headless, Linux 6.18): its three heap views and [heap], from its smaps.
TEST(DoctorViews, ZgcHeapMappedThreeTimesCountsOnce) {
  process_files files;
  files.smaps = sample("smaps_zgc_openjdk17.txt");
  const auto maps = parse_smaps(files.smaps);
  ASSERT_EQ(maps.size(), 4u);
  std::size_t per_mapping = 0;
  for (const mapping_info& m : maps) per_mapping += m.rss;
  const process_report p = build_process_report(2, files, 10, "/nonexistent");
  // smaps says 192 MiB in three views of one 64 MiB memfd: the memory is 64 MiB.
  EXPECT_EQ(per_mapping - maps[3].rss, 3 * 64 * mib);
  EXPECT_EQ(p.shmem, 64 * mib);
  EXPECT_EQ(p.rss, 64 * mib + maps[3].rss);
  const memory_class_usage* shared = class_of(p, memory_class::shared_anonymous);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->resident, 64 * mib);
  EXPECT_EQ(shared->mappings, 3u);
  EXPECT_EQ(shared->views, 2u);
  EXPECT_NE(shared->evidence.find("2 mappings map the same memory again (same inode and "
                                  "offsets): counted once"),
            std::string::npos)
      << shared->evidence;
  std::size_t sum = 0;
  for (const memory_class_usage& c : p.classes) sum += c.resident;
  EXPECT_EQ(sum, p.rss + p.hugetlb_total());
}

mapping_info shared_view(std::uintptr_t start, std::size_t size, std::uint64_t offset,
                         std::uint64_t inode, std::size_t rss) {
  mapping_info m;
  m.start = start;
  m.end = start + size;
  m.permissions = "rw-s";
  m.offset = offset;
  m.device = "00:01";
  m.inode = inode;
  m.name = "/memfd:x (deleted)";
  m.rss = rss;
  m.kernel_page_bytes = 4 * kib;
  return m;
}

TEST(DoctorViews, OnlyOverlappingOffsetsOfOneObjectCountOnce) {
  const std::uintptr_t base = 0x7f0000000000;
  std::vector<mapping_info> maps = {
      shared_view(base, 8 * mib, 0, 24, 8 * mib),
      // Half of it again (offsets 4-12 MiB): 4 MiB new.
      shared_view(base + 16 * mib, 8 * mib, 4 * mib, 24, 8 * mib),
      // Another memfd with the same offsets: its own memory.
      shared_view(base + 32 * mib, 8 * mib, 0, 25, 8 * mib),
      // The same inode on another device: another object.
      shared_view(base + 48 * mib, 8 * mib, 0, 24, 8 * mib),
  };
  maps[3].device = "00:05";
  // A private mapping of the same file written all over: its pages are its own copies
  // (Anonymous), never a view.
  mapping_info copy = shared_view(base + 64 * mib, 8 * mib, 0, 24, 8 * mib);
  copy.permissions = "rw-p";
  copy.anonymous = 8 * mib;
  maps.push_back(copy);
  std::vector<bool> repeated;
  const auto once = counted_once(maps, repeated);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ(repeated, (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ((*once)[0].rss, 8 * mib);
  EXPECT_EQ((*once)[1].rss, 4 * mib);
  EXPECT_EQ((*once)[2].rss, 8 * mib);
  EXPECT_EQ((*once)[3].rss, 8 * mib);
  EXPECT_EQ((*once)[4].rss, 8 * mib);
  // No view repeats another: nothing copied, nothing changed.
  maps.erase(maps.begin() + 1);
  EXPECT_FALSE(counted_once(maps, repeated).has_value());
  EXPECT_EQ(repeated, std::vector<bool>(maps.size(), false));
}

// Seen live: a 256 MiB memfd mapped MAP_SHARED (written), mapped again MAP_PRIVATE (read:
// the same page-cache pages), and a 64 MiB MAP_PRIVATE view written (copy-on-write anonymous
// pages). smaps sums 576 MiB; the memory is 320 MiB, 256 of it shared, 64 private anonymous.
// The private views come first in address order (mmap hands out lower addresses later).
TEST(DoctorViews, PrivateViewCountsItsPageCacheOnceAndItsCopiesAsAnonymous) {
  const std::uintptr_t base = 0x7f0000000000;
  mapping_info written = shared_view(base, 64 * mib, 0, 24, 64 * mib);
  written.permissions = "rw-p";
  written.anonymous = 64 * mib;
  mapping_info read = shared_view(base + 64 * mib, 256 * mib, 0, 24, 256 * mib);
  read.permissions = "r--p";
  const std::vector<mapping_info> maps = {
      written, read, shared_view(base + 512 * mib, 256 * mib, 0, 24, 256 * mib)};
  std::vector<bool> repeated;
  const auto once = counted_once(maps, repeated);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ(repeated, (std::vector<bool>{false, true, false}));
  EXPECT_EQ((*once)[0].rss, 64 * mib);
  EXPECT_EQ((*once)[1].rss, 0u);
  EXPECT_EQ((*once)[2].rss, 256 * mib);
  const process_report p = summarize_mappings(*once, 10);
  EXPECT_EQ(p.rss, 320 * mib);
  EXPECT_EQ(p.shmem, 256 * mib);
  EXPECT_EQ(p.anonymous, 64 * mib);
  class_facts facts;
  facts.allocator = "glibc";
  const std::vector<memory_class_usage> classes = classify_memory(*once, facts);
  std::size_t shared = 0, own = 0;
  for (const memory_class_usage& c : classes) {
    if (c.kind == memory_class::shared_anonymous) shared += c.resident;
    // Copies in a private view of a file: the process's own, never THP (private_file_copies).
    if (c.kind == memory_class::file_copies) own += c.resident;
  }
  EXPECT_EQ(shared, 256 * mib);
  EXPECT_EQ(own, 64 * mib);
}

// A 300 MiB memfd mapped twice, written only through the view at the higher address: every page
// is resident in the later view (address order) and in none of the earlier one. Each page counts
// once, where it is resident: 300 MiB, not the earlier view's nothing.
TEST(DoctorViews, APageResidentOnlyInALaterViewCountsThere) {
  const std::uintptr_t base = 0x7f0000000000;
  const std::vector<mapping_info> maps = {
      shared_view(base, 300 * mib, 0, 24, 0),
      shared_view(base + 512 * mib, 300 * mib, 0, 24, 300 * mib)};
  std::vector<bool> repeated;
  // From smaps alone: a view with nothing resident holds nothing.
  auto once = counted_once(maps, repeated);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ(repeated, (std::vector<bool>{false, true}));
  EXPECT_EQ((*once)[0].rss + (*once)[1].rss, 300 * mib);
  // Per page, from pagemap: the same.
  const view_residency resident{{base, {}}, {base + 512 * mib, {{0, 300 * mib}}}};
  once = counted_once(maps, repeated, &resident);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ((*once)[0].rss, 0u);
  EXPECT_EQ((*once)[1].rss, 300 * mib);
  const process_report p = summarize_mappings(*once, 10);
  EXPECT_EQ(p.rss, 300 * mib);
  EXPECT_EQ(p.shmem, 300 * mib);
}

// Two views each with part of the object resident: the first 100 MiB through the first view,
// 50-300 MiB through the second. The union is 300 MiB; the second view adds its 200 MiB the
// first does not hold (smaps says 250 MiB there).
TEST(DoctorViews, PartlyResidentViewsCountTheirUnion) {
  const std::uintptr_t base = 0x7f0000000000;
  const std::vector<mapping_info> maps = {
      shared_view(base, 300 * mib, 0, 24, 100 * mib),
      shared_view(base + 512 * mib, 300 * mib, 0, 24, 250 * mib)};
  const view_residency resident{{base, {{0, 100 * mib}}},
                                {base + 512 * mib, {{50 * mib, 300 * mib}}}};
  std::vector<bool> repeated;
  const auto once = counted_once(maps, repeated, &resident);
  ASSERT_TRUE(once.has_value());
  EXPECT_EQ((*once)[0].rss, 100 * mib);
  EXPECT_EQ((*once)[1].rss, 200 * mib);
  // Where pagemap could not be read for the second, it counts by offsets against what the
  // first holds (0-100 MiB): 200 of its 300 MiB of offsets are new, so 2/3 of its Rss.
  const view_residency first_only{{base, {{0, 100 * mib}}}};
  const auto partly = counted_once(maps, repeated, &first_only);
  ASSERT_TRUE(partly.has_value());
  EXPECT_EQ((*partly)[1].rss, 250 * mib * 2 / 3);
}

TEST(DoctorViews, OnlyOverlappingViewsHaveTheirResidencyRead) {
  const std::uintptr_t base = 0x7f0000000000;
  mapping_info read = shared_view(base + 64 * mib, 8 * mib, 0, 26, 8 * mib);
  read.permissions = "r--p";
  const std::vector<mapping_info> maps = {
      shared_view(base, 8 * mib, 0, 24, 8 * mib),
      shared_view(base + 16 * mib, 8 * mib, 8 * mib, 24, 8 * mib),  // no overlap
      shared_view(base + 32 * mib, 8 * mib, 0, 25, 8 * mib),
      shared_view(base + 48 * mib, 8 * mib, 4 * mib, 25, 8 * mib),
      read,
      shared_view(base + 80 * mib, 8 * mib, 0, 26, 0)};
  EXPECT_EQ(overlapping_views(maps), (std::vector<std::size_t>{2, 3, 4, 5}));
}

TEST(DoctorViews, ResidencyTextRoundTripsAndRefusesWhatNoViewHolds) {
  const std::uintptr_t base = 0x7f0000000000;
  const std::vector<mapping_info> maps = {shared_view(base, 8 * mib, 4 * mib, 24, 0),
                                          shared_view(base + 16 * mib, 8 * mib, 0, 24, 0)};
  const view_residency resident{{base, {{4 * mib, 5 * mib}, {6 * mib, 12 * mib}}},
                                {base + 16 * mib, {}}};
  const std::string text = residency_text(resident);
  EXPECT_EQ(text, "7f0000000000 400000-500000 600000-c00000\n7f0001000000\n");
  EXPECT_EQ(parse_residency(text, maps), resident);
  for (const char* bad : {"7f0000000000 400000-500000",                  // cut short
                          "7f0000000001\n",                              // no such view
                          "7f0000000000 500000-400000\n",                // reversed
                          "7f0000000000 0-100000\n",                     // before its offsets
                          "7f0000000000 400000-d00000\n",                // past its offsets
                          "7f0000000000 600000-700000 400000-500000\n",  // unsorted
                          "7f0000000000  400000-500000\n",               // two spaces
                          "7f0000000000\n7f0000000000\n"}) {             // twice
    EXPECT_FALSE(parse_residency(bad, maps).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hugepage::doctor
