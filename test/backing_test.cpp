// backing_test.cpp - backing_of() against layouts built by hand with hugepage::os, and
// parse_smaps() against handwritten text. The sources without privilege (smaps, PAGEMAP_SCAN) and
// the huge zero page: backing_sources_test.cpp.
#include "hugepage/backing.hpp"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backing_support.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::backing_report;
using hugepage::backing_source;
using hugepage::mapping_info;

using hugepage::test::best_exact_source;
using hugepage::test::describe;
using hugepage::test::expect_consistent;
using hugepage::test::kHuge;
using hugepage::test::kMiB;
using hugepage::test::map_isolated;
using hugepage::test::page;
using hugepage::test::scan_supported;
using hugepage::test::ThpRegion;
using hugepage::test::touch;
using hugepage::test::vma_of;

// The THP size, the kernel's PMD (hpage_pmd_size): 2 MiB on x86-64, 32 MiB on arm64/16K.
const std::size_t pmd = hugepage::thp_page_bytes();

TEST(BackingOf, ThpRegionIsAllThpFromKpageflags) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 4 * pmd;
  ThpRegion region(length);
  ASSERT_NE(region.get(), nullptr);
  if (region.anon_huge() != length) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(region.anon_huge()) +
                          " bytes of THP for an advised region of 4 PMDs");
  }
  const backing_report r =
      hugepage::backing_of(0, region.get(), length, backing_source::kpageflags);
  EXPECT_EQ(r.bytes, length);
  EXPECT_EQ(r.thp, length) << describe(r);
  EXPECT_EQ(r.base, 0u) << describe(r);
  EXPECT_EQ(r.not_resident, 0u);
  EXPECT_EQ(r.unmapped, 0u);
  EXPECT_EQ(r.source, backing_source::kpageflags);
  EXPECT_TRUE(r.exact);
  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_DOUBLE_EQ(r.huge_fraction(), 1.0);
  expect_consistent(r);

  // A sub-range inside one huge page: still THP, page by page.
  const auto* inner = static_cast<const char*>(region.get()) + pmd + 100;
  const backing_report part =
      hugepage::backing_of(0, inner, 3 * page(), backing_source::kpageflags);
  EXPECT_EQ(part.bytes, 4 * page()) << "widened to whole base pages";
  EXPECT_EQ(part.thp, 4 * page()) << describe(part);
  EXPECT_TRUE(part.exact);
}

// Splitting the VMA inside a huge page splits its PMD into PTEs; merging the VMA back leaves the
// THP folio whole, present, contiguous and THP-flagged, yet mapped by PTEs: no TLB reach. On arm64
// with 16 KiB pages the PMD is 32 MiB, and no 2 MiB piece of the folio is a huge page either.
TEST(BackingOf, ThpFolioMappedByPtesIsNotThp) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 2 * pmd;
  ThpRegion region(length);
  ASSERT_NE(region.get(), nullptr);
  if (region.anon_huge() != length) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(region.anon_huge()) +
                          " bytes of THP for an advised region of 2 PMDs");
  }
  char* p = static_cast<char*>(region.get());
  ASSERT_FALSE(hugepage::os::advise(p + pmd / 2, page(), MADV_NOHUGEPAGE));  // splits the VMA
  ASSERT_FALSE(hugepage::os::advise(p + pmd / 2, page(), MADV_HUGEPAGE));    // merges it again
  const mapping_info vma = vma_of(p);
  ASSERT_EQ(vma.size(), length) << "the VMA did not merge back";
  ASSERT_EQ(vma.anon_huge, pmd) << "the kernel's own count: one PMD mapping left";

  const backing_report r = hugepage::backing_of(0, p, length, backing_source::kpageflags);
  EXPECT_EQ(r.thp, pmd) << describe(r);
  EXPECT_EQ(r.base, pmd) << describe(r);
  EXPECT_TRUE(r.exact) << "whole mapping";
  const backing_report half = hugepage::backing_of(0, p + pmd, pmd, backing_source::kpageflags);
  EXPECT_LE(half.thp, pmd) << describe(half);
  expect_consistent(half);

  // PAGEMAP_SCAN sees the page tables themselves: exact on every sub-range, no cap needed.
  if (scan_supported()) {
    const backing_report first = hugepage::backing_of(0, p, pmd, backing_source::pagemap_scan);
    EXPECT_EQ(first.base, pmd) << describe(first);
    EXPECT_EQ(first.thp, 0u) << describe(first);
    const backing_report second =
        hugepage::backing_of(0, p + pmd, pmd, backing_source::pagemap_scan);
    EXPECT_EQ(second.thp, pmd) << describe(second);
    EXPECT_TRUE(second.exact);
  }
}

// Linux 6.1 to 6.4 leave out of smaps (AnonHugePages and Rss alike) a PMD that NUMA balancing
// made PROT_NONE for a hinting fault, while pagemap shows it present: seen in the lab's two-node
// guest of 6.1, where a GiB that the node's AnonHugePages counted whole read as 348 MiB huge when
// capped by smaps. The resident bytes beyond Rss are such PMDs; only the rest of the gap between
// THP-looking bytes and AnonHugePages is folios mapped by PTEs.
TEST(BackingSources, SplitThpCountsThePmdsSmapsLeftOutAsPmdMapped) {
  mapping_info m;
  m.start = 64 * pmd;
  m.end = m.start + 10 * pmd;
  hugepage::detail::exact_part whole;
  whole.thp_anon = 8 * pmd;  // THP-looking: 4 PMDs smaps saw, 2 it left out, 2 mapped by PTEs
  whole.base = 2 * pmd - 3 * page();
  whole.not_resident = 3 * page();
  m.anon_huge = 4 * pmd;
  m.rss = 4 * pmd + 2 * pmd + whole.base;
  hugepage::detail::thp_split t = hugepage::detail::split_thp(m, whole);
  EXPECT_EQ(t.pmd_anon, 6 * pmd);
  EXPECT_EQ(t.pte_anon, 2 * pmd);
  // Pages faulted in between the smaps read and pagemap's (less than a PMD): no PMD left out.
  whole.base += 5 * page();
  t = hugepage::detail::split_thp(m, whole);
  EXPECT_EQ(t.pmd_anon, 6 * pmd);
  EXPECT_EQ(t.pte_anon, 2 * pmd);
  // Nothing mapped by PTEs: every THP-looking byte is PMD-mapped.
  m.rss -= 2 * pmd;
  t = hugepage::detail::split_thp(m, whole);
  EXPECT_EQ(t.pmd_anon, 8 * pmd);
  EXPECT_EQ(t.pte_anon, 0u);
  // A kernel that counts every PMD (6.5 on): the gap is folios mapped by PTEs, all of it.
  m.anon_huge = 6 * pmd;
  m.rss = 8 * pmd + whole.base;
  t = hugepage::detail::split_thp(m, whole);
  EXPECT_EQ(t.pmd_anon, 6 * pmd);
  EXPECT_EQ(t.pte_anon, 2 * pmd);
  // A shmem mapping: the same for its file THP.
  mapping_info shm = m;
  shm.anon_huge = 0;
  shm.shmem_huge = 2 * pmd;
  hugepage::detail::exact_part file;
  file.thp_file = 4 * pmd;  // 2 PMDs smaps saw, 1 left out, 1 mapped by PTEs
  shm.rss = 3 * pmd;
  t = hugepage::detail::split_thp(shm, file);
  EXPECT_EQ(t.pmd_anon, 0u);
  EXPECT_EQ(t.pmd_file, 3 * pmd);
  EXPECT_EQ(t.pte_file, pmd);
}

// A page given back inside a huge page splits its PMD: the rest of the THP folio stays present,
// contiguous and THP-flagged, mapped by PTEs. No piece of it is a huge page: on arm64 with 16 KiB
// pages the PMD is 32 MiB, and its 2 MiB pieces without the hole are no PMD mapping either.
TEST(BackingOf, APmdWithAHoleIsNotThpInAnyPiece) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 2 * pmd;
  ThpRegion region(length);
  ASSERT_NE(region.get(), nullptr);
  if (region.anon_huge() != length) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(region.anon_huge()) +
                          " bytes of THP for an advised region of 2 PMDs");
  }
  char* p = static_cast<char*>(region.get());
  ASSERT_FALSE(hugepage::os::advise(p + pmd / 2, page(), MADV_DONTNEED));
  ASSERT_EQ(region.anon_huge(), pmd) << "the kernel's own count: one PMD mapping left";
  const backing_report first = hugepage::backing_of(0, p, pmd, backing_source::kpageflags);
  EXPECT_EQ(first.thp, 0u) << describe(first);
  EXPECT_EQ(first.base, pmd - page()) << describe(first);
  const backing_report second = hugepage::backing_of(0, p + pmd, pmd, backing_source::kpageflags);
  EXPECT_EQ(second.thp, pmd) << describe(second);
}

TEST(BackingOf, HalfTouchedThpRegion) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 2 * pmd;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  hugepage::os::advise_huge(p, length);
  static_cast<volatile char*>(p)[0] = 1;  // one write faults the whole first huge page
  const std::size_t anon_huge = vma_of(p).anon_huge;
  const backing_report r = hugepage::backing_of(p, length);
  hugepage::os::unmap(p, length);
  if (anon_huge != pmd) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(anon_huge) + " bytes of THP");
  }
  EXPECT_EQ(r.thp, pmd) << describe(r);
  EXPECT_EQ(r.not_resident, pmd) << describe(r);
  EXPECT_EQ(r.base, 0u);
  EXPECT_TRUE(r.exact);
  expect_consistent(r);
}

TEST(BackingOf, Hugetlb2mRegion) {
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_2m, 2);
  const std::size_t length = 2 * kHuge;
  std::error_code ec;
  void* p = hugepage::os::map_hugetlb(length, hugepage::page_size::huge_2m, ec);
  if (p == nullptr) HUGEPAGE_SKIP_OR_FAIL("MAP_HUGETLB of 2 pages failed: " + ec.message());
  static_cast<volatile char*>(p)[0] = 1;  // the first page only
  const backing_report half = hugepage::backing_of(p, length);
  static_cast<volatile char*>(p)[kHuge] = 1;
  const backing_report full = hugepage::backing_of(p, length);
  const backing_report inner = hugepage::backing_of(static_cast<char*>(p) + 12345, 5 * page());
  hugepage::os::unmap(p, length);

  EXPECT_EQ(half.hugetlb_2m, kHuge) << describe(half);
  EXPECT_EQ(half.not_resident, kHuge) << describe(half);
  EXPECT_EQ(half.thp + half.base + half.hugetlb_1g, 0u) << describe(half);
  expect_consistent(half);

  EXPECT_EQ(full.hugetlb_2m, length) << describe(full);
  EXPECT_EQ(full.not_resident, 0u);
  EXPECT_EQ(full.thp + full.base + full.hugetlb_1g + full.unmapped, 0u) << describe(full);
  EXPECT_TRUE(full.exact);
  EXPECT_DOUBLE_EQ(full.huge_fraction(), 1.0);

  EXPECT_EQ(inner.hugetlb_2m, 6 * page()) << describe(inner);
}

TEST(BackingOf, Hugetlb1gRegion) {
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_1g, 1);
  const std::size_t length = std::size_t{1} << 30;
  std::error_code ec;
  void* p = hugepage::os::map_hugetlb(length, hugepage::page_size::huge_1g, ec);
  if (p == nullptr) HUGEPAGE_SKIP_OR_FAIL("MAP_HUGETLB of a 1 GiB page failed: " + ec.message());
  static_cast<volatile char*>(p)[length - 1] = 1;
  const backing_report r = hugepage::backing_of(p, length);
  const mapping_info vma = vma_of(p);
  hugepage::os::unmap(p, length);

  EXPECT_EQ(vma.kernel_page_bytes, length);
  EXPECT_EQ(r.hugetlb_1g, length) << describe(r);
  EXPECT_EQ(r.hugetlb_2m + r.thp + r.base + r.not_resident + r.unmapped, 0u) << describe(r);
  EXPECT_TRUE(r.exact);
}

TEST(BackingOf, BasePageRegionIsAllBase) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 4 * kMiB;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(hugepage::os::advise(p, length, MADV_NOHUGEPAGE));
  touch(p, length);
  const backing_report r = hugepage::backing_of(p, length);
  hugepage::os::unmap(p, length);
  EXPECT_EQ(r.base, length) << describe(r);
  EXPECT_EQ(r.thp, 0u);
  EXPECT_EQ(r.not_resident, 0u);
  EXPECT_EQ(r.source, best_exact_source());
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.huge_fraction(), 0.0);
}

TEST(BackingOf, PartiallyResidentRegionCountsNotResidentExactly) {
  const std::size_t length = 4 * kMiB;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(hugepage::os::advise(p, length, MADV_NOHUGEPAGE));
  touch(p, length, /*stride_pages=*/2);  // every other page
  const backing_report r = hugepage::backing_of(p, length);
  const backing_report untouched = hugepage::backing_of(static_cast<char*>(p) + page(), page());
  hugepage::os::unmap(p, length);
  EXPECT_EQ(r.not_resident, length / 2) << describe(r);
  EXPECT_EQ(r.base, length / 2) << describe(r);
  EXPECT_EQ(r.thp, 0u);
  EXPECT_EQ(r.unmapped, 0u);
  EXPECT_EQ(untouched.not_resident, page()) << describe(untouched);
  EXPECT_EQ(untouched.bytes, page());
}

TEST(BackingOf, UnmappedRangeIsReportedAsUnmapped) {
  const std::size_t length = 4 * kMiB;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  touch(p, length);
  ASSERT_FALSE(hugepage::os::unmap(p, length));
  const backing_report r = hugepage::backing_of(p, length);
  EXPECT_EQ(r.bytes, length);
  EXPECT_EQ(r.unmapped, length) << describe(r);
  EXPECT_EQ(r.resident_bytes() + r.not_resident, 0u) << describe(r);
  EXPECT_NE(r.source, backing_source::unavailable) << "an unmapped range is an answer";
  EXPECT_TRUE(r.exact) << describe(r);
  EXPECT_DOUBLE_EQ(r.huge_fraction(), 0.0);
}

TEST(BackingOf, RangeStraddlingMappedAndUnmappedIsSplit) {
  const std::size_t length = 6 * kMiB;
  auto* p = static_cast<char*>(map_isolated(length));
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(hugepage::os::advise(p, length, MADV_NOHUGEPAGE));
  touch(p, length);
  ASSERT_FALSE(hugepage::os::unmap(p + 2 * kMiB, 2 * kMiB));  // a hole in the middle

  const backing_report whole = hugepage::backing_of(p, length);
  EXPECT_EQ(whole.base, 4 * kMiB) << describe(whole);
  EXPECT_EQ(whole.unmapped, 2 * kMiB) << describe(whole);
  expect_consistent(whole);

  // Starts mapped, ends in the hole.
  const backing_report head = hugepage::backing_of(p + 1 * kMiB, 2 * kMiB);
  EXPECT_EQ(head.base, 1 * kMiB) << describe(head);
  EXPECT_EQ(head.unmapped, 1 * kMiB) << describe(head);

  // Starts in the hole, ends mapped.
  const backing_report tail = hugepage::backing_of(p + 3 * kMiB, 2 * kMiB);
  EXPECT_EQ(tail.unmapped, 1 * kMiB) << describe(tail);
  EXPECT_EQ(tail.base, 1 * kMiB) << describe(tail);

  // Entirely after the last mapping of the isolated area.
  const backing_report after = hugepage::backing_of(p + length, kMiB);
  EXPECT_EQ(after.unmapped, kMiB) << describe(after);

  hugepage::os::unmap(p, 2 * kMiB);
  hugepage::os::unmap(p + 4 * kMiB, 2 * kMiB);
}

TEST(BackingOf, ZeroBytesIsAnEmptyExactReport) {
  int local = 0;
  const backing_report r = hugepage::backing_of(&local, 0);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.huge_fraction(), 0.0);
}

TEST(BackingOf, LengthPastTheEndOfTheAddressSpaceIsClipped) {
  // Nothing is mapped up here (it is kernel space on x86-64 and arm64); the point is the
  // arithmetic: a length that runs past the end must clip, not wrap around to an empty range.
  const std::uintptr_t top = UINTPTR_MAX & ~(std::uintptr_t{page()} - 1);
  const std::uintptr_t start = top - 16 * page();
  const backing_report r = hugepage::backing_of(reinterpret_cast<const void*>(start), SIZE_MAX);
  EXPECT_EQ(r.bytes, top - start) << describe(r);
  EXPECT_EQ(r.unmapped, r.bytes) << describe(r);

  const backing_report r2 =
      hugepage::backing_of(reinterpret_cast<const void*>(start), SIZE_MAX - start + 1);
  EXPECT_EQ(r2.bytes, top - start) << describe(r2);
}

TEST(BackingOf, NoSuchProcessGivesAClearAnswer) {
  int local = 0;
  const backing_report r = hugepage::backing_of(pid_t{0x3fffffff}, &local, sizeof local);
  EXPECT_EQ(r.source, backing_source::unavailable);
  EXPECT_FALSE(r.exact);
  EXPECT_NE(r.note.find("smaps"), std::string::npos) << r.note;
  EXPECT_EQ(r.resident_bytes(), 0u) << "no made-up numbers";
}

// A process that has exited but is not reaped yet (a zombie) has no address space: its smaps reads
// empty. That is no process with every byte unmapped: the report is unavailable and says why,
// from every source. Once reaped, /proc has no entry for it at all.
TEST(BackingOf, ExitedProcessIsUnavailableNotEmpty) {
  int local = 0;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // not reaped
  const auto expect_unavailable = [](const backing_report& r, const char* because) {
    EXPECT_EQ(r.source, backing_source::unavailable) << describe(r);
    EXPECT_FALSE(r.exact) << describe(r);
    EXPECT_EQ(r.resident_bytes() + r.not_resident + r.unmapped, 0u) << "no made-up numbers";
    EXPECT_NE(r.note.find(because), std::string::npos) << describe(r);
  };
  const std::string exited = "process " + std::to_string(child) + " has exited";
  expect_unavailable(hugepage::backing_of(child, &local, sizeof local), exited.c_str());
  for (const backing_source source :
       {backing_source::pagemap_scan, backing_source::kpageflags, backing_source::smaps}) {
    expect_unavailable(hugepage::backing_of(child, &local, sizeof local, source), exited.c_str());
  }
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  expect_unavailable(hugepage::backing_of(child, &local, sizeof local),
                     "No such file or directory");
}

TEST(BackingOf, AnotherProcess) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 2 * kMiB;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(hugepage::os::advise(p, length, MADV_NOHUGEPAGE));
  touch(p, length / 2);
  int ready[2];
  int done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 0;
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  // The child shares the pages copy-on-write: resident, on base pages, in its address space too.
  const backing_report r = hugepage::backing_of(child, p, length);
  (void)!::write(done[1], &c, 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  for (const int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
  hugepage::os::unmap(p, length);
  EXPECT_EQ(r.base, length / 2) << describe(r);
  EXPECT_EQ(r.not_resident, length / 2) << describe(r);
  EXPECT_EQ(r.source, best_exact_source());
}

// backing_of(p, SIZE_MAX) once reached [vsyscall], above the user address space, where
// pagemap has no entries, and blamed a missing CAP_SYS_ADMIN. It is counted as unmapped, and said.
TEST(BackingOf, RestOfTheAddressSpaceFromAPointerIsTrue) {
  const std::size_t length = 2 * kHuge;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(hugepage::os::advise(p, length, MADV_NOHUGEPAGE));
  touch(p, length);
  const backing_report r = hugepage::backing_of(p, SIZE_MAX);
  const backing_report mine = hugepage::backing_of(p, length);
  EXPECT_EQ(r.source,
            ::geteuid() == 0 || scan_supported() ? best_exact_source() : backing_source::smaps)
      << describe(r);
  EXPECT_EQ(r.note.find("CAP_SYS_ADMIN"), std::string::npos) << "not the reason: " << r.note;
  EXPECT_GE(r.base, mine.base) << describe(r);
  EXPECT_EQ(mine.base, length) << describe(mine);
  const bool vsyscall = vma_of(reinterpret_cast<const void*>(0xffffffffff600000ULL)).size() != 0;
  if (scan_supported()) {
    if (!r.note.empty()) {
      EXPECT_NE(r.note.find("[vsyscall]"), std::string::npos) << "the only reason: " << r.note;
    }
  } else {
    // Before Linux 6.7 the note heads with the missing ioctl, then says what the fallback found:
    // the [vsyscall] page where the kernel maps one (some configurations map none).
    EXPECT_EQ(r.note.rfind("PAGEMAP_SCAN failed", 0), 0u) << r.note;
    EXPECT_EQ(r.note.find("[vsyscall]") != std::string::npos, vsyscall) << r.note;
  }
  // The smaps-based paths walk smaps' records, which list [vsyscall] above the user address space.
  if (::geteuid() == 0) {
    const backing_report k = hugepage::backing_of(0, p, SIZE_MAX, backing_source::kpageflags);
    EXPECT_EQ(k.source, backing_source::kpageflags) << describe(k);
    EXPECT_TRUE(k.exact) << describe(k);
    EXPECT_EQ(k.note.find("CAP_SYS_ADMIN"), std::string::npos) << k.note;
    if (vsyscall) {
      EXPECT_NE(k.note.find("[vsyscall]"), std::string::npos) << k.note;
    }
    // (Not the same `unmapped` as `r`: reading smaps mallocs a buffer that maps memory meanwhile.)
    EXPECT_GE(k.base, mine.base) << describe(k);
    expect_consistent(k);
  }
  expect_consistent(r);
  hugepage::os::unmap(p, length);
}

// ---- parse_smaps ----------------------------------------------------------------------------

constexpr const char* kSample =
    "Rss:                 99 kB\n"  // before any header: ignored
    "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n"
    "Size:                328 kB\n"
    "KernelPageSize:        4 kB\n"
    "MMUPageSize:           4 kB\n"
    "Rss:                 300 kB\n"
    "Pss:                 150 kB\n"
    "Pss_Dirty:             0 kB\n"
    "Shared_Clean:        300 kB\n"
    "Anonymous:             0 kB\n"
    "FilePmdMapped:         0 kB\n"
    "AnonHugePages:         0 kB\n"
    "THPeligible:    0\n"
    "ProtectionKey:         0\n"
    "VmFlags: rd ex mr mw me dw sd \n"
    "7f3a00000000-7f3a00800000 rw-p 00000000 00:00 0 \n"  // no name
    "Size:               8192 kB\n"
    "KernelPageSize:        4 kB\n"
    "Rss:                6144 kB\n"
    "Anonymous:          6144 kB\n"
    "AnonHugePages:      4096 kB\n"
    "Swap:                 12 kB\n"
    "THPeligible:    1\n"
    "SomeFieldFromTheFuture:   77 kB\n"  // unknown field
    "this line is malformed\n"
    "Rss:              lots kB\n"  // malformed value: skipped, the earlier Rss stays
    "VmFlags: rd wr mr mw me ac sd hg\n"
    "\n"
    "7f3a00a00000-7f3a00e00000 rw-p 00000000 00:10 12345\t/anon_hugepage (deleted)\n"
    "Size:               4096 kB\n"
    "KernelPageSize:     2048 kB\n"
    "MMUPageSize:        2048 kB\n"
    "Rss:                   0 kB\n"
    "Private_Hugetlb:    2048 kB\n"
    "Shared_Hugetlb:     2048 kB\n"
    "VmFlags: rd wr mr mw me de ht sd\n"
    "7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          [stack]\n"
    "Rss:                  16 kB";  // no final newline

TEST(ParseSmaps, HandwrittenSample) {
  const std::vector<mapping_info> maps = hugepage::parse_smaps(kSample);
  ASSERT_EQ(maps.size(), 4u);

  const mapping_info& text = maps[0];
  EXPECT_EQ(text.start, 0x400000u);
  EXPECT_EQ(text.end, 0x452000u);
  EXPECT_EQ(text.size(), 0x52000u);
  EXPECT_EQ(text.permissions, "r-xp");
  EXPECT_EQ(text.name, "/usr/bin/dbus-daemon");
  EXPECT_EQ(text.rss, 300u * 1024);
  EXPECT_EQ(text.kernel_page_bytes, 4096u);
  EXPECT_FALSE(text.is_hugetlb());
  EXPECT_FALSE(text.thp_eligible);
  EXPECT_FALSE(text.advised_huge());
  EXPECT_TRUE(text.has_flag("ex"));
  EXPECT_TRUE(text.has_flag("sd"));

  const mapping_info& anon = maps[1];
  EXPECT_EQ(anon.start, UINT64_C(0x7f3a00000000));
  EXPECT_EQ(anon.end, UINT64_C(0x7f3a00800000));
  EXPECT_EQ(anon.name, "") << "a mapping with no name";
  EXPECT_EQ(anon.rss, 6144u * 1024) << "the malformed Rss line must not change it";
  EXPECT_EQ(anon.anonymous, 6144u * 1024);
  EXPECT_EQ(anon.anon_huge, 4096u * 1024);
  EXPECT_EQ(anon.swap, 12u * 1024);
  EXPECT_TRUE(anon.thp_eligible);
  EXPECT_EQ(anon.vm_flags, "rd wr mr mw me ac sd hg");
  EXPECT_TRUE(anon.advised_huge());
  EXPECT_TRUE(anon.has_flag("hg"));
  EXPECT_FALSE(anon.has_flag("nh"));
  EXPECT_FALSE(anon.has_flag("h")) << "whole flags only";
  EXPECT_FALSE(anon.is_hugetlb());

  const mapping_info& huge = maps[2];
  EXPECT_EQ(huge.name, "/anon_hugepage (deleted)");
  EXPECT_EQ(huge.kernel_page_bytes, kHuge);
  EXPECT_TRUE(huge.is_hugetlb());
  EXPECT_EQ(huge.private_hugetlb, kHuge);
  EXPECT_EQ(huge.shared_hugetlb, kHuge);
  EXPECT_EQ(huge.rss, 0u);
  EXPECT_TRUE(huge.has_flag("ht"));
  EXPECT_FALSE(huge.advised_huge());

  const mapping_info& stack = maps[3];
  EXPECT_EQ(stack.name, "[stack]");
  EXPECT_EQ(stack.rss, 16u * 1024) << "the last line has no newline";
}

TEST(ParseSmaps, EmptyAndGarbage) {
  EXPECT_TRUE(hugepage::parse_smaps("").empty());
  EXPECT_TRUE(hugepage::parse_smaps("\n\n").empty());
  EXPECT_TRUE(hugepage::parse_smaps("Rss: 4 kB\nVmFlags: rd\n").empty());
  EXPECT_TRUE(hugepage::parse_smaps("not a header\nxyz-123 rw-p 0 0 0\n12345 rw-p\n").empty());
}

// What does not fit is refused or saturated, never made up: an Rss of 2^54 kB (2^64 bytes) reads
// SIZE_MAX, not 0; a range past 64 bits or reversed is no header (its fields belong to no
// mapping); a value that is not a whole number of kB is skipped; flags split at runs of blanks.
TEST(ParseSmaps, RefusesOrSaturatesWhatDoesNotFit) {
  const auto maps = hugepage::parse_smaps(
      "7f0000000000-7f0000200000 rw-p 00000000 00:00 0\n"
      "Rss:      18014398509481984 kB\n"
      "Swap:                    8 kB\n"
      "Swap:                   12x kB\n"
      "Anonymous:               4 MB\n"
      "VmFlags: rd wr  mr mw me ac  hg\n"
      "10000000000000000-10000000000200000 rw-p 00000000 00:00 0\n"
      "Rss:                  2048 kB\n"
      "7f0000600000-7f0000400000 rw-p 00000000 00:00 0\n"
      "Rss:                  2048 kB\n"
      "7f0000800000-7f0000a00000 rw-p 100000000000000000 00:00 0\n"
      "Rss:                  2048 kB\n"
      "7f0000c00000-7f0000e00000 rw-p 00000000 00:00 18446744073709551616\n"
      "Rss:                  2048 kB\n");
  ASSERT_EQ(maps.size(), 1u) << "wrapped, reversed, overflowing offset and inode: no headers";
  EXPECT_EQ(maps[0].rss, SIZE_MAX) << "2^64 bytes saturate";
  EXPECT_EQ(maps[0].swap, 8u * 1024) << "12x is no number";
  EXPECT_EQ(maps[0].anonymous, 0u) << "smaps sizes are in kB";
  EXPECT_TRUE(maps[0].advised_huge()) << "two spaces before hg";
  EXPECT_TRUE(maps[0].has_flag("mr"));
  EXPECT_FALSE(maps[0].has_flag("w"));
  hugepage::mapping_info tabbed;
  tabbed.vm_flags = "rd\thg";
  EXPECT_TRUE(tabbed.advised_huge());
}

TEST(ParseSmaps, FieldsAfterAMalformedHeaderBelongToNoMapping) {
  const auto maps = hugepage::parse_smaps(
      "7f0000000000-7f0000200000 rw-p 00000000 00:00 0\n"
      "Rss:                 8 kB\n"
      "zzzz-not-a-range rw-p 00000000 00:00 0\n"
      "Rss:              2048 kB\n"
      "AnonHugePages:    2048 kB\n"
      "7f0000400000-7f0000600000 rw-s 00000000 00:01 7 /dev/shm/book\n"
      "Rss:                 4 kB\n"
      "ShmemPmdMapped:   2048 kB\n"
      "FilePmdMapped:    4096 kB\n");
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].rss, 8u * 1024);
  EXPECT_EQ(maps[0].anon_huge, 0u);
  EXPECT_EQ(maps[1].start, 0x7f0000400000u);
  EXPECT_EQ(maps[1].rss, 4u * 1024);
  EXPECT_EQ(maps[1].shmem_huge, 2048u * 1024);
  EXPECT_EQ(maps[1].file_huge, 4096u * 1024);
}

TEST(ParseSmaps, ReadsThisProcess) {
  std::error_code ec;
  const std::vector<mapping_info> maps = hugepage::read_smaps(0, ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_FALSE(maps.empty());
  int local = 0;
  const auto address = reinterpret_cast<std::uintptr_t>(&local);
  bool found_stack = false;
  for (std::size_t i = 0; i < maps.size(); ++i) {
    EXPECT_LT(maps[i].start, maps[i].end);
    if (i > 0) {
      EXPECT_LE(maps[i - 1].end, maps[i].start) << "sorted, not overlapping";
    }
    if (maps[i].start <= address && address < maps[i].end) found_stack = true;
  }
  EXPECT_TRUE(found_stack);

  const std::vector<mapping_info> none = hugepage::read_smaps(pid_t{0x3fffffff}, ec);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory) << ec.message();
}

}  // namespace
