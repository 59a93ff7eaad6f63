// backing_test.cpp - backing_of() against layouts built by hand with hugepage::os, and
// parse_smaps() against handwritten text.
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

#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "support.hpp"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace {

using hugepage::backing_report;
using hugepage::backing_source;
using hugepage::mapping_info;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kHuge = 2 * kMiB;

std::size_t page() { return hugepage::os::base_page_size(); }

// Maps `length` bytes of private anonymous memory, 2 MiB-aligned, far below the kernel's mmap area
// and with a gap on each side: the VMA merges with nothing, and memory that backing_of() itself
// allocates (its smaps text can be big enough for malloc to mmap it) cannot land in a hole we
// punch. Falls back to os::map_aligned where the address space is too small for the hint.
void* map_isolated(std::size_t length) {
  static std::uintptr_t next = std::uintptr_t{0x3100} << 32;  // 49 TiB: above ASan's shadow
  for (int attempt = 0; attempt < 64; ++attempt) {
    void* hint = reinterpret_cast<void*>(next);
    next += (length + 64 * kMiB + kHuge - 1) & ~(kHuge - 1);
    void* p = ::mmap(hint, length, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == hint) return p;
    if (p != MAP_FAILED) ::munmap(p, length);  // kernels before 4.17 treat the flag as a hint
    if (p == MAP_FAILED && errno != EEXIST) break;
  }
  std::error_code ec;
  return hugepage::os::map_aligned(length, kHuge, ec);
}

// Writes one byte in each base page of [p, p + length) with `stride` base pages between writes.
void touch(void* p, std::size_t length, std::size_t stride_pages = 1) {
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (std::size_t offset = 0; offset < length; offset += stride_pages * page()) {
    bytes[offset] = 1;
  }
}

// The smaps record of the mapping that contains `p` (an empty record when there is none).
mapping_info vma_of(const void* p) {
  std::error_code ec;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (const mapping_info& m : hugepage::read_smaps(0, ec)) {
    if (m.start <= address && address < m.end) return m;
  }
  return {};
}

std::string describe(const backing_report& r) {
  return "bytes " + std::to_string(r.bytes) + ", thp " + std::to_string(r.thp) + ", hugetlb_2m " +
         std::to_string(r.hugetlb_2m) + ", hugetlb_1g " + std::to_string(r.hugetlb_1g) + ", base " +
         std::to_string(r.base) + ", not_resident " + std::to_string(r.not_resident) +
         ", unmapped " + std::to_string(r.unmapped) + ", shmem " + std::to_string(r.thp_shmem) +
         ", zero " + std::to_string(r.zero_page) + ", source " + hugepage::name_of(r.source) +
         ", exact " + (r.exact ? "true" : "false") + ", note '" + r.note + "'";
}

// The parts of a report add up to the bytes examined.
void expect_consistent(const backing_report& r) {
  EXPECT_EQ(r.thp + r.hugetlb_2m + r.hugetlb_1g + r.base + r.not_resident + r.unmapped, r.bytes)
      << describe(r);
}

// Whether this kernel answers PAGEMAP_SCAN (Linux 6.7): one scan of a page of our own stack.
bool scan_supported() {
  static const bool supported = [] {
    int local = 1;
    const backing_report r =
        hugepage::backing_of(0, &local, sizeof local, backing_source::pagemap_scan);
    return r.source == backing_source::pagemap_scan;
  }();
  return supported;
}

// The source backing_of() picks as root: PAGEMAP_SCAN where the kernel has it.
backing_source best_exact_source() {
  return scan_supported() ? backing_source::pagemap_scan : backing_source::kpageflags;
}

#define HUGEPAGE_REQUIRE_ROOT()                                                              \
  do {                                                                                       \
    if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs root for /proc/kpageflags and PFNs"); \
  } while (0)

// A THP-advised, fully touched region of `length` at an isolated address. Skips (or fails under
// HUGEPAGE_REQUIRE=1) when the kernel did not give huge pages: that is fragmentation or THP
// settings, not backing_of().
class ThpRegion {
 public:
  explicit ThpRegion(std::size_t length) : length_(length), p_(map_isolated(length)) {
    if (p_ == nullptr) return;
    hugepage::os::advise_huge(p_, length_);
    touch(p_, length_);
  }
  ~ThpRegion() {
    if (p_ != nullptr) hugepage::os::unmap(p_, length_);
  }
  ThpRegion(const ThpRegion&) = delete;
  ThpRegion& operator=(const ThpRegion&) = delete;
  void* get() const { return p_; }
  /// AnonHugePages of the region's VMA, from smaps: the kernel's own account.
  std::size_t anon_huge() const { return vma_of(p_).anon_huge; }

 private:
  std::size_t length_;
  void* p_;
};

TEST(BackingOf, ThpRegionIsAllThpFromKpageflags) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 8 * kMiB;
  ThpRegion region(length);
  ASSERT_NE(region.get(), nullptr);
  if (region.anon_huge() != length) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(region.anon_huge()) +
                          " bytes of THP for an advised 8 MiB region");
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
  const auto* inner = static_cast<const char*>(region.get()) + kHuge + 100;
  const backing_report part =
      hugepage::backing_of(0, inner, 3 * page(), backing_source::kpageflags);
  EXPECT_EQ(part.bytes, 4 * page()) << "widened to whole base pages";
  EXPECT_EQ(part.thp, 4 * page()) << describe(part);
  EXPECT_TRUE(part.exact);
}

// Splitting the VMA inside a huge page splits its PMD into PTEs; merging the VMA back leaves the
// THP folio whole, present, contiguous and THP-flagged, yet mapped by 512 PTEs: no TLB reach.
TEST(BackingOf, ThpFolioMappedByPtesIsNotThp) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 4 * kMiB;
  ThpRegion region(length);
  ASSERT_NE(region.get(), nullptr);
  if (region.anon_huge() != length) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(region.anon_huge()) +
                          " bytes of THP for an advised 4 MiB region");
  }
  char* p = static_cast<char*>(region.get());
  ASSERT_FALSE(hugepage::os::advise(p + kMiB, page(), MADV_NOHUGEPAGE));  // splits the VMA
  ASSERT_FALSE(hugepage::os::advise(p + kMiB, page(), MADV_HUGEPAGE));    // merges it again
  const mapping_info vma = vma_of(p);
  ASSERT_EQ(vma.size(), length) << "the VMA did not merge back";
  ASSERT_EQ(vma.anon_huge, kHuge) << "the kernel's own count: one PMD mapping left";

  const backing_report r = hugepage::backing_of(0, p, length, backing_source::kpageflags);
  EXPECT_EQ(r.thp, kHuge) << describe(r);
  EXPECT_EQ(r.base, kHuge) << describe(r);
  EXPECT_TRUE(r.exact) << "whole mapping";
  const backing_report half = hugepage::backing_of(0, p + kHuge, kHuge, backing_source::kpageflags);
  EXPECT_LE(half.thp, kHuge) << describe(half);
  expect_consistent(half);

  // PAGEMAP_SCAN sees the page tables themselves: exact on every sub-range, no cap needed.
  if (scan_supported()) {
    const backing_report first = hugepage::backing_of(0, p, kHuge, backing_source::pagemap_scan);
    EXPECT_EQ(first.base, kHuge) << describe(first);
    EXPECT_EQ(first.thp, 0u) << describe(first);
    const backing_report second =
        hugepage::backing_of(0, p + kHuge, kHuge, backing_source::pagemap_scan);
    EXPECT_EQ(second.thp, kHuge) << describe(second);
    EXPECT_TRUE(second.exact);
  }
}

TEST(BackingOf, HalfTouchedThpRegion) {
  HUGEPAGE_REQUIRE_ROOT();
  const std::size_t length = 4 * kMiB;
  void* p = map_isolated(length);
  ASSERT_NE(p, nullptr);
  hugepage::os::advise_huge(p, length);
  static_cast<volatile char*>(p)[0] = 1;  // one write faults the whole first huge page
  const std::size_t anon_huge = vma_of(p).anon_huge;
  const backing_report r = hugepage::backing_of(p, length);
  hugepage::os::unmap(p, length);
  if (anon_huge != kHuge) {
    HUGEPAGE_SKIP_OR_FAIL("the kernel gave " + std::to_string(anon_huge) + " bytes of THP");
  }
  EXPECT_EQ(r.thp, kHuge) << describe(r);
  EXPECT_EQ(r.not_resident, kHuge) << describe(r);
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

// ---- without CAP_SYS_ADMIN: the smaps path --------------------------------------------------

// Drops CAP_SYS_ADMIN from the effective and permitted sets while staying uid 0. /proc/kpageflags
// still opens (its owner is root and DAC grants the owner read), but pagemap hides PFNs from an
// opener without CAP_SYS_ADMIN: backing_of must notice and use smaps.
bool drop_cap_sys_admin() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  const unsigned index = CAP_TO_INDEX(CAP_SYS_ADMIN);
  data[index].effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
  data[index].permitted &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
  data[index].inheritable &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
  return ::syscall(SYS_capset, &header, data) == 0;
}

using hugepage::test::become_nobody;

constexpr int kNoThp = 77;

// In the child: an 8 MiB THP region that is a whole VMA. Whole-mapping numbers must be right and
// exact; a part of the mapping is prorated and says so.
int check_smaps_path(bool (*drop)(), const char* expected_note_word) {
  if (!drop()) return 2;
  const std::size_t length = 8 * kMiB;
  ThpRegion region(length);
  if (region.get() == nullptr) return 4;
  const mapping_info vma = vma_of(region.get());
  if (vma.start != reinterpret_cast<std::uintptr_t>(region.get()) || vma.size() != length) {
    return 5;  // merged with a neighbour: the isolation failed
  }
  if (vma.anon_huge != length) return kNoThp;

  const backing_report r =
      hugepage::backing_of(0, region.get(), length, backing_source::kpageflags);
  std::fprintf(stderr, "child whole: %s\n", describe(r).c_str());
  if (r.source != backing_source::smaps) return 10;
  if (r.bytes != length) return 11;
  if (r.thp != length) return 12;
  if (r.base != 0 || r.not_resident != 0 || r.unmapped != 0) return 13;
  if (!r.exact) return 14;

  // A quarter of the mapping: prorated from AnonHugePages, approximate, with the reason.
  const backing_report q = hugepage::backing_of(0, static_cast<char*>(region.get()) + kHuge, kHuge,
                                                backing_source::kpageflags);
  std::fprintf(stderr, "child part: %s\n", describe(q).c_str());
  if (q.source != backing_source::smaps) return 20;
  if (q.thp != kHuge) return 21;
  if (q.exact) return 22;
  if (q.note.find(expected_note_word) == std::string::npos) return 23;
  return 0;
}

TEST(BackingOf, WithoutCapSysAdminUsesSmaps) {
  HUGEPAGE_REQUIRE_ROOT();
  const int code = hugepage::test::run_in_child(
      [] { return check_smaps_path(drop_cap_sys_admin, "CAP_SYS_ADMIN"); });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the 8 MiB region");
  EXPECT_EQ(code, 0) << "see the child's output above";
}

TEST(BackingOf, AsNobodyUsesSmaps) {
  HUGEPAGE_REQUIRE_ROOT();
  const int code =
      hugepage::test::run_in_child([] { return check_smaps_path(become_nobody, "kpageflags"); });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the 8 MiB region");
  EXPECT_EQ(code, 0) << "see the child's output above";
}

// The smaps path prorates per-mapping sizes over the range: AnonHugePages * range / size. For a
// big mapping that product passes 2^64 (a 256 GiB mapping with 64 MiB of THP), and a fully THP
// container of 8 GiB, the use case the library is for, gets there too.
TEST(BackingOf, SmapsPathDoesNotOverflowOnBigMappings) {
  HUGEPAGE_REQUIRE_ROOT();
  const int code = hugepage::test::run_in_child([]() -> int {
    if (!drop_cap_sys_admin()) return 2;
    const std::size_t length = std::size_t{256} << 30;  // virtual only: MAP_NORESERVE
    const std::size_t touched = 64 * kMiB;
    void* hint = reinterpret_cast<void*>(std::uintptr_t{0x3800} << 32);
    void* p = ::mmap(hint, length, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != hint) return 3;
    hugepage::os::advise_huge(p, length);
    touch(p, touched);
    const mapping_info vma = vma_of(p);
    if (vma.size() != length) return 4;
    if (vma.anon_huge != touched) return kNoThp;
    const backing_report r = hugepage::backing_of(0, p, length, backing_source::kpageflags);
    std::fprintf(stderr, "child: %s\n", describe(r).c_str());
    if (r.source != backing_source::smaps) return 10;
    if (r.thp != touched) return 11;
    if (r.not_resident != length - touched) return 12;
    // Everything but the last page: prorated, approximate, and still about 64 MiB.
    const backing_report q =
        hugepage::backing_of(0, p, length - page(), backing_source::kpageflags);
    std::fprintf(stderr, "child: %s\n", describe(q).c_str());
    if (q.thp + page() < touched || q.thp > touched) return 13;
    return 0;
  });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the 64 MiB touched");
  EXPECT_EQ(code, 0) << "see the child's output above";
}

// ---- PAGEMAP_SCAN: exact without privilege -------------------------------------------------

// In a child: become `nobody` when running as root (an unprivileged run already is).
bool drop_to_nobody_if_root() { return ::geteuid() != 0 || become_nobody(); }

bool same_figures(const backing_report& a, const backing_report& b) {
  return a.bytes == b.bytes && a.thp == b.thp && a.hugetlb_2m == b.hugetlb_2m &&
         a.hugetlb_1g == b.hugetlb_1g && a.base == b.base && a.not_resident == b.not_resident &&
         a.unmapped == b.unmapped && a.thp_shmem == b.thp_shmem && a.thp_file == b.thp_file &&
         a.zero_page == b.zero_page;
}

// As root: the kpageflags source gives the same figures as PAGEMAP_SCAN on [p, p + length).
::testing::AssertionResult agrees_with_kpageflags(const void* p, std::size_t length) {
  if (::geteuid() != 0) return ::testing::AssertionSuccess();
  const backing_report scan = hugepage::backing_of(0, p, length, backing_source::pagemap_scan);
  const backing_report pfn = hugepage::backing_of(0, p, length, backing_source::kpageflags);
  if (pfn.source != backing_source::kpageflags) {
    return ::testing::AssertionFailure() << "kpageflags unusable as root: " << describe(pfn);
  }
  if (same_figures(scan, pfn)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "pagemap_scan: " << describe(scan) << "\nkpageflags:   " << describe(pfn);
}

#define HUGEPAGE_REQUIRE_SCAN()                                                   \
  do {                                                                            \
    if (!scan_supported()) {                                                      \
      HUGEPAGE_SKIP_OR_FAIL("the kernel has no PAGEMAP_SCAN ioctl (Linux 6.7+)"); \
    }                                                                             \
  } while (0)

// A THP region whose second huge page is split by an mprotect of one page in its middle: the
// folio stays whole and present, but is mapped by PTEs now. Exact as `nobody`, from PAGEMAP_SCAN.
TEST(BackingOfScan, HalfHugeHalfSplitIsExactWithoutRoot) {
  HUGEPAGE_REQUIRE_SCAN();
  const int code = hugepage::test::run_in_child([]() -> int {
    if (!drop_to_nobody_if_root()) return 2;
    const std::size_t length = 2 * kHuge;
    ThpRegion region(length);
    auto* p = static_cast<char*>(region.get());
    if (p == nullptr) return 3;
    if (region.anon_huge() != length) return kNoThp;
    if (::mprotect(p + kHuge + kMiB, page(), PROT_READ) != 0) return 4;
    const backing_report r = hugepage::backing_of(p, length);
    std::fprintf(stderr, "child: %s\n", describe(r).c_str());
    if (r.source != backing_source::pagemap_scan) return 10;
    if (!r.exact || !r.note.empty()) return 11;
    if (r.thp != kHuge || r.base != kHuge || r.not_resident != 0 || r.unmapped != 0) return 12;
    // A sub-range straddling the boundary: half a huge page each side, exactly.
    const backing_report mid = hugepage::backing_of(p + kMiB, kHuge);
    std::fprintf(stderr, "child: %s\n", describe(mid).c_str());
    if (mid.thp != kMiB || mid.base != kMiB || !mid.exact) return 13;
    // smaps cannot see the split inside the second VMA's huge page: it prorates, and says so.
    const backing_report smaps = hugepage::backing_of(0, p + kHuge, kMiB, backing_source::smaps);
    if (smaps.source != backing_source::smaps) return 14;
    return 0;
  });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the 4 MiB region");
  EXPECT_EQ(code, 0) << "see the child's output above";
}

TEST(BackingOfScan, HalfHugeHalfSplitAgreesWithKpageflags) {
  HUGEPAGE_REQUIRE_ROOT();
  HUGEPAGE_REQUIRE_SCAN();
  const std::size_t length = 4 * kHuge;
  ThpRegion region(length);
  auto* p = static_cast<char*>(region.get());
  ASSERT_NE(p, nullptr);
  if (region.anon_huge() != length) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for 8 MiB");
  ASSERT_EQ(::mprotect(p + kHuge + kMiB, page(), PROT_READ), 0);
  ASSERT_EQ(::munmap(p + 3 * kHuge + kMiB, page()), 0);  // a hole in the fourth
  const backing_report r = hugepage::backing_of(p, length);
  EXPECT_EQ(r.thp, 2 * kHuge) << describe(r);
  EXPECT_EQ(r.base, 2 * kHuge - page()) << describe(r);
  EXPECT_EQ(r.unmapped, page()) << describe(r);
  expect_consistent(r);
  for (const std::size_t offset : {std::size_t{0}, kMiB, kHuge + kMiB - page(), 3 * kHuge}) {
    for (const std::size_t bytes : {page(), kMiB, kHuge, 3 * kHuge}) {
      if (offset + bytes > length) continue;
      EXPECT_TRUE(agrees_with_kpageflags(p + offset, bytes))
          << "offset " << offset << ", bytes " << bytes;
    }
  }
}

// A read fault of untouched memory maps the shared zero page (a huge zero page in a THP region)
// where the kernel has one: present in the page tables, yet no memory of the process's own, and no
// coverage. A kernel without it (pvm_no_zero_page=1, s390 KVM guests; or use_zero_page 0 for the
// huge one) gives the read fault memory of the process's own, which is resident like any other.
// Which one this kernel does is read from smaps, which counts only memory of the process's own in
// Rss and AnonHugePages, never the zero page; every page was faulted in, so the rest is zero page.
TEST(BackingOfScan, ReadFaultedMemoryIsCountedAsWhatTheKernelMapped) {
  HUGEPAGE_REQUIRE_SCAN();
  const std::size_t length = 2 * kHuge;
  for (const int advice : {MADV_HUGEPAGE, MADV_NOHUGEPAGE}) {
    auto* p = static_cast<char*>(map_isolated(length));
    ASSERT_NE(p, nullptr);
    ASSERT_FALSE(hugepage::os::advise(p, length, advice));
    for (std::size_t offset = 0; offset < length; offset += page()) {
      (void)static_cast<volatile const char*>(p)[offset];
    }
    const auto expect_as_smaps_says = [&](const char* when) {
      const mapping_info vma = vma_of(p);
      ASSERT_EQ(vma.size(), length);
      const backing_report r = hugepage::backing_of(p, length);
      std::fprintf(stderr, "%s, %s: own memory %zu of %zu (THP %zu): %s\n",
                   advice == MADV_HUGEPAGE ? "advised" : "not advised", when, vma.rss, length,
                   vma.anon_huge, vma.rss == 0 ? "the zero page" : "pages of its own");
      EXPECT_EQ(r.source, backing_source::pagemap_scan) << r.note;
      EXPECT_TRUE(r.exact) << describe(r);
      EXPECT_EQ(r.thp, vma.anon_huge) << describe(r);
      EXPECT_EQ(r.base, vma.rss - vma.anon_huge) << describe(r);
      EXPECT_EQ(r.not_resident, length - vma.rss) << describe(r);
      EXPECT_EQ(r.zero_page, length - vma.rss) << describe(r);
      EXPECT_TRUE(agrees_with_kpageflags(p, length));
      EXPECT_TRUE(agrees_with_kpageflags(p + kMiB, kHuge));
      // smaps' Rss never counts the zero page, though pagemap marks it present: over a whole
      // mapping the smaps source tells the two apart exactly.
      const backing_report by_smaps = hugepage::backing_of(0, p, length, backing_source::smaps);
      EXPECT_EQ(by_smaps.source, backing_source::smaps) << by_smaps.note;
      EXPECT_TRUE(by_smaps.exact) << describe(by_smaps);
      EXPECT_EQ(by_smaps.thp, r.thp) << describe(by_smaps);
      EXPECT_EQ(by_smaps.base, r.base) << describe(by_smaps);
      EXPECT_EQ(by_smaps.not_resident, r.not_resident) << describe(by_smaps);
      EXPECT_EQ(by_smaps.zero_page, r.zero_page) << describe(by_smaps);
    };
    expect_as_smaps_says("read");
    // Writing one byte gives the process memory of its own there, whichever page was mapped.
    p[0] = 1;
    expect_as_smaps_says("one byte written");
    EXPECT_GE(vma_of(p).rss, page());
    hugepage::os::unmap(p, length);
  }
}

// kpageflags decides the zero page from each frame's KPF_ZERO_PAGE flag. mlockall(MCL_FUTURE) makes
// every new private mapping populated by write faults: read faults in the child never map the zero
// page, as on a kernel without one, and a page read-faulted, unmapped and freed is soon reused for
// memory written with data. Pinned to one CPU, whose free-page list hands that frame out next.
TEST(BackingOf, WrittenMemoryIsNeverTheZeroPageByKpageflags) {
  HUGEPAGE_REQUIRE_ROOT();
  const int code = hugepage::test::run_in_child([]() -> int {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<int>(::sched_getcpu()), &one);
    if (::sched_setaffinity(0, sizeof one, &one) != 0) return 2;
    if (::mlockall(MCL_CURRENT | MCL_FUTURE) != 0) return 3;
    for (int round = 0; round < 8; ++round) {
      int local = 1;  // whatever a kpageflags call probes or caches, it does so now
      (void)hugepage::backing_of(0, &local, sizeof local, backing_source::kpageflags);
      const std::size_t length = kMiB;
      auto* p = static_cast<unsigned char*>(map_isolated(length));
      if (p == nullptr) return 4;
      std::memset(p, 0xAB, length);
      const backing_report pfn = hugepage::backing_of(0, p, length, backing_source::kpageflags);
      const backing_report scan = hugepage::backing_of(0, p, length, backing_source::pagemap_scan);
      std::fprintf(stderr, "child, round %d: %s\n", round, describe(pfn).c_str());
      if (pfn.source != backing_source::kpageflags || !pfn.exact) return 10;
      if (pfn.base != length || pfn.zero_page != 0 || pfn.not_resident != 0) return 11;
      if (scan.source == backing_source::pagemap_scan && !same_figures(scan, pfn)) return 12;
      hugepage::os::unmap(p, length);
    }
    return 0;
  });
  EXPECT_EQ(code, 0) << "see the child's output above";

  // THP written with data, in this process: THP by both sources.
  const std::size_t length = 2 * kHuge;
  ThpRegion region(length);
  ASSERT_NE(region.get(), nullptr);
  std::memset(region.get(), 0xAB, length);
  if (region.anon_huge() != length) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for 4 MiB");
  const backing_report r =
      hugepage::backing_of(0, region.get(), length, backing_source::kpageflags);
  EXPECT_EQ(r.thp, length) << describe(r);
  EXPECT_EQ(r.zero_page, 0u) << describe(r);
  EXPECT_TRUE(agrees_with_kpageflags(region.get(), length));
}

// Bytes this process has read with read(2) and friends: smaps text counts, ioctls do not.
std::size_t bytes_read_so_far() {
  std::error_code ec;
  const std::string io = hugepage::detail::read_file("/proc/self/io", ec);
  const std::size_t at = io.find("rchar:");
  return at == std::string::npos ? 0 : std::stoull(io.substr(at + 6));
}

// transparent_hugepage/use_zero_page set for a scope, and set back (root).
class HugeZeroPageSetting {
 public:
  explicit HugeZeroPageSetting(const char* value) {
    std::error_code ec;
    saved_ = hugepage::detail::read_file(path, ec);
    ok_ = !ec && write(value);
  }
  ~HugeZeroPageSetting() {
    if (!saved_.empty()) write(saved_.c_str());
  }
  HugeZeroPageSetting(const HugeZeroPageSetting&) = delete;
  HugeZeroPageSetting& operator=(const HugeZeroPageSetting&) = delete;
  bool ok() const { return ok_; }
  static bool write(const char* value) {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const auto length = static_cast<long>(std::strlen(value));
    const bool written = ::write(fd, value, static_cast<std::size_t>(length)) == length;
    ::close(fd);
    return written;
  }

 private:
  static constexpr const char* path = "/sys/kernel/mm/transparent_hugepage/use_zero_page";
  std::string saved_;
  bool ok_ = false;
};

// The verdict that lets backing_of use PAGEMAP_SCAN without smaps, for each kind of kernel.
TEST(BackingOfScan, ProbeVerdictForEachKernel) {
  using hugepage::detail::read_fault_probe;
  using hugepage::detail::scan_alone_is_exact;
  read_fault_probe p;
  EXPECT_FALSE(scan_alone_is_exact(p)) << "no PAGEMAP_SCAN";
  p.scanned = true;
  EXPECT_TRUE(scan_alone_is_exact(p)) << "no huge page at all (THP never): nothing to confuse";
  p.huge = p.huge_pfnzero = p.small_zero_page = true;
  EXPECT_TRUE(scan_alone_is_exact(p)) << "the huge zero page, flagged";
  p.huge_pfnzero = false;
  EXPECT_FALSE(scan_alone_is_exact(p)) << "the huge zero page, unflagged (before the 2025 fix)";
  p.huge_zero_page_off = true;
  EXPECT_TRUE(scan_alone_is_exact(p)) << "use_zero_page 0: a THP of our own";
  p.small_zero_page = p.huge_zero_page_off = false;
  EXPECT_TRUE(scan_alone_is_exact(p)) << "no zero page at all: a THP of our own";
}

// With the huge zero page switched off (as on a kernel that maps no zero page), a read fault in an
// advised 2 MiB allocates a THP: the probe still lets backing_of use PAGEMAP_SCAN without reading
// smaps, and the answer is exact. Switched on again where small read faults map the zero page, the
// verdict rests on nothing any more, and smaps is read again. The probe is made once a process and
// inherited across fork, so the test runs in a fresh process: this binary, executed again.
constexpr const char* kFreshProcess = "HUGEPAGE_TEST_FRESH_PROCESS";
constexpr int kNoProcmapQuery = 78;

// Whether this kernel answers PROCMAP_QUERY (Linux 6.11), without which every backing_of reads
// smaps.
bool procmap_query_supported() {
  const hugepage::detail::unique_fd maps(hugepage::detail::open_read_only("/proc/self/maps"));
  std::uintptr_t start = 0, end = 0;
  std::size_t page_bytes = 0;
  int local = 0;
  return maps && !hugepage::detail::pagemap::query_mapping(
                     maps.get(), reinterpret_cast<std::uintptr_t>(&local), start, end, page_bytes);
}

int without_huge_zero_page_in_a_fresh_process() {
  const std::size_t length = 2 * kHuge;
  auto* p = static_cast<char*>(map_isolated(length));
  if (p == nullptr) return 2;
  if (hugepage::os::advise(p, length, MADV_HUGEPAGE)) return 3;
  for (std::size_t offset = 0; offset < length; offset += page()) {
    (void)static_cast<volatile const char*>(p)[offset];
  }
  const mapping_info vma = vma_of(p);
  std::fprintf(stderr, "fresh process: read faults gave %zu of %zu as THP of its own\n",
               vma.anon_huge, length);
  if (vma.anon_huge != length) return kNoThp;
  if (!hugepage::detail::scan_flags_huge_zero_page()) return 10;
  if (!procmap_query_supported()) return kNoProcmapQuery;
  const std::size_t before = bytes_read_so_far();
  const backing_report r = hugepage::backing_of(p, length);
  const std::size_t read = bytes_read_so_far() - before;
  std::fprintf(stderr, "fresh process: %s; %zu bytes read\n", describe(r).c_str(), read);
  if (r.source != backing_source::pagemap_scan || !r.exact) return 11;
  if (r.thp != length || r.zero_page != 0 || r.base != 0) return 12;
  if (read > 512) return 13;  // the smaps of this process is tens of KiB
  if (!agrees_with_kpageflags(p, length)) return 14;
  if (!HugeZeroPageSetting::write("1")) return 15;
  const bool small_zero_page = hugepage::detail::probe_read_faults().small_zero_page;
  if (hugepage::detail::scan_flags_huge_zero_page() == small_zero_page) return 16;
  const backing_report again = hugepage::backing_of(p, length);
  if (!same_figures(again, r) || !again.exact) return 17;
  return 0;
}

TEST(BackingOfScan, WithoutTheHugeZeroPageTheScanNeedsNoSmaps) {
  if (std::getenv(kFreshProcess) != nullptr) {
    const int code = without_huge_zero_page_in_a_fresh_process();
    std::fflush(nullptr);
    ::_exit(code);
  }
  HUGEPAGE_REQUIRE_ROOT();
  HUGEPAGE_REQUIRE_SCAN();
  HugeZeroPageSetting off("0");
  ASSERT_TRUE(off.ok()) << "cannot write transparent_hugepage/use_zero_page";
  const int code = hugepage::test::run_in_child([]() -> int {
    ::setenv(kFreshProcess, "1", 1);
    ::execl("/proc/self/exe", "/proc/self/exe",
            "--gtest_filter=BackingOfScan.WithoutTheHugeZeroPageTheScanNeedsNoSmaps", nullptr);
    return 127;
  });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the 4 MiB region");
  if (code == kNoProcmapQuery) {
    HUGEPAGE_SKIP_OR_FAIL("no PROCMAP_QUERY (Linux 6.11): every backing_of reads smaps here");
  }
  EXPECT_EQ(code, 0) << "see the fresh process's output above";
}

// Shmem THP: a memfd advised MADV_HUGEPAGE where shmem_enabled allows it, else (as root) a file on
// a tmpfs mounted huge=always in a private mount namespace, which needs no system setting.
int check_shmem_thp(int fd) {
  const std::size_t length = 2 * kHuge;
  if (::ftruncate(fd, static_cast<off_t>(length)) != 0) return 3;
  void* hint = map_isolated(length);  // an aligned, isolated address to map the file at
  if (hint == nullptr) return 4;
  void* p = ::mmap(hint, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (p != hint) return 5;
  hugepage::os::advise_huge(p, length);
  touch(p, length);
  const mapping_info vma = vma_of(p);
  if (vma.shmem_huge != length) {
    std::fprintf(stderr, "child: ShmemPmdMapped %zu of %zu\n", vma.shmem_huge, length);
    return kNoThp;
  }
  if (!drop_to_nobody_if_root()) return 6;
  const backing_report r = hugepage::backing_of(p, length);
  std::fprintf(stderr, "child: %s\n", describe(r).c_str());
  if (r.source != backing_source::pagemap_scan || !r.exact) return 10;
  if (r.thp != length || r.thp_shmem != length || r.thp_file != 0 || r.base != 0) return 11;
  const backing_report part = hugepage::backing_of(static_cast<char*>(p) + kMiB, kHuge);
  if (part.thp_shmem != kHuge) return 12;
  return 0;
}

TEST(BackingOfScan, ShmemThpIsCountedAsShmem) {
  HUGEPAGE_REQUIRE_SCAN();
  int code = hugepage::test::run_in_child([] {
    const int fd = static_cast<int>(::syscall(SYS_memfd_create, "hugepage-test", 0U));
    return fd < 0 ? 2 : check_shmem_thp(fd);
  });
  std::string how = "memfd + MADV_HUGEPAGE";
  if (code == kNoThp && ::geteuid() == 0) {
    how = "tmpfs huge=always";
    code = hugepage::test::run_in_child([] {
      if (::unshare(CLONE_NEWNS) != 0) return 20;
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 21;
      char dir[] = "/tmp/hugepage-shmem-XXXXXX";
      if (::mkdtemp(dir) == nullptr) return 22;
      int result = 23;
      if (::mount("hugepage-test", dir, "tmpfs", 0, "huge=always,size=16m") == 0) {
        const std::string path = std::string(dir) + "/file";
        const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        result = fd < 0 ? 24 : check_shmem_thp(fd);
        // A child that dropped to nobody can no longer unmount: the namespace dies with it.
        if (::geteuid() == 0) ::umount2(dir, MNT_DETACH);
      }
      ::rmdir(dir);
      return result;
    });
  }
  if (code == kNoThp) {
    std::error_code ec;
    const std::string mode = hugepage::detail::selected_mode(
        hugepage::detail::read_file("/sys/kernel/mm/transparent_hugepage/shmem_enabled", ec));
    HUGEPAGE_SKIP_OR_FAIL("no shmem THP: shmem_enabled is '" + mode + "'" +
                          (::geteuid() == 0 ? " and a huge=always tmpfs gave none"
                                            : " (as root a huge=always tmpfs is tried)"));
  }
  EXPECT_EQ(code, 0) << "with " << how << "; see the child's output above";
}

TEST(BackingOfScan, ShmemThpAgreesWithKpageflags) {
  HUGEPAGE_REQUIRE_ROOT();
  HUGEPAGE_REQUIRE_SCAN();
  const int code = hugepage::test::run_in_child([]() -> int {
    if (::unshare(CLONE_NEWNS) != 0) return 20;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 21;
    char dir[] = "/tmp/hugepage-shmem-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return 22;
    int result = 23;
    if (::mount("hugepage-test", dir, "tmpfs", 0, "huge=always,size=16m") == 0) {
      const std::string path = std::string(dir) + "/file";
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      const std::size_t length = 2 * kHuge;
      void* hint = map_isolated(length);
      if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(length)) == 0 && hint != nullptr &&
          ::mmap(hint, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == hint) {
        touch(hint, length);
        const auto* p = static_cast<const char*>(hint);
        result = vma_of(p).shmem_huge != length             ? kNoThp
                 : !agrees_with_kpageflags(p, length)       ? 30
                 : !agrees_with_kpageflags(p + kMiB, kHuge) ? 31
                                                            : 0;
        if (result == 30 || result == 31) {
          std::fprintf(stderr, "%s\n", agrees_with_kpageflags(p, length).message());
        }
        ::munmap(hint, length);
      }
      ::umount2(dir, MNT_DETACH);
    }
    ::rmdir(dir);
    return result;
  });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("a huge=always tmpfs gave no PMD-mapped THP");
  EXPECT_EQ(code, 0) << "see the child's output above";
}

TEST(BackingOfScan, AnotherProcessWithoutRoot) {
  HUGEPAGE_REQUIRE_SCAN();
  const int code = hugepage::test::run_in_child([]() -> int {
    if (!drop_to_nobody_if_root()) return 2;
    const std::size_t length = 2 * kHuge;
    ThpRegion region(length);
    if (region.get() == nullptr) return 3;
    if (region.anon_huge() != length) return kNoThp;
    int ready[2], done[2];
    if (::pipe(ready) != 0 || ::pipe(done) != 0) return 4;
    const pid_t child = ::fork();
    if (child < 0) return 5;
    char c = 0;
    if (child == 0) {
      // The grandchild splits its copy of the second huge page; the parent's stays whole.
      ::mprotect(static_cast<char*>(region.get()) + kHuge + kMiB, page(), PROT_READ);
      (void)!::write(ready[1], &c, 1);
      (void)!::read(done[0], &c, 1);
      ::_exit(0);
    }
    if (::read(ready[0], &c, 1) != 1) return 6;
    const backing_report r = hugepage::backing_of(child, region.get(), length);
    (void)!::write(done[1], &c, 1);
    ::waitpid(child, nullptr, 0);
    std::fprintf(stderr, "child: %s\n", describe(r).c_str());
    if (r.source != backing_source::pagemap_scan || !r.exact) return 10;
    // fork copies PMD-mapped anonymous THP as PMDs: the first huge page is still one.
    if (r.thp != kHuge || r.base != kHuge) return 11;
    return 0;
  });
  if (code == kNoThp) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the 4 MiB region");
  EXPECT_EQ(code, 0) << "see the child's output above";
}

// A kernel without PAGEMAP_SCAN, simulated: a seccomp filter fails every ioctl with ENOTTY, as
// kernels before 6.7 answer the unknown request. The fallbacks take over and say so.
TEST(BackingOfScan, WithoutPagemapScanTheFallbacksSaySo) {
  for (const bool as_nobody : {false, true}) {
    const int code = hugepage::test::run_in_child([as_nobody]() -> int {
      if (as_nobody && !drop_to_nobody_if_root()) return 2;
      const bool root = ::geteuid() == 0;
      const std::size_t length = 2 * kHuge;
      void* p = map_isolated(length);
      if (p == nullptr) return 3;
      hugepage::os::advise(p, length, MADV_NOHUGEPAGE);
      touch(p, length);
      if (!hugepage::test::fail_syscall(__NR_ioctl, ENOTTY)) return 4;
      const backing_report r = hugepage::backing_of(p, length);
      std::fprintf(stderr, "child (uid %d): %s\n", static_cast<int>(::geteuid()),
                   describe(r).c_str());
      if (r.source != (root ? backing_source::kpageflags : backing_source::smaps)) return 10;
      if (r.note.find("PAGEMAP_SCAN failed (ENOTTY") == std::string::npos) return 11;
      if (r.note.find("Linux 6.7") == std::string::npos) return 12;
      if (r.base != length || r.thp != 0 || !r.exact) return 13;
      const backing_report only = hugepage::backing_of(0, p, length, backing_source::pagemap_scan);
      if (only.source != backing_source::unavailable || only.resident_bytes() != 0) return 14;
      return 0;
    });
    EXPECT_EQ(code, 0) << (as_nobody ? "as nobody" : "as this user") << "; see the output above";
  }
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
  if (!r.note.empty()) {
    EXPECT_NE(r.note.find("[vsyscall]"), std::string::npos) << "the only reason: " << r.note;
  }
  // The smaps-based paths walk smaps' records, which list [vsyscall] above the user address space.
  if (::geteuid() == 0) {
    const bool vsyscall = vma_of(reinterpret_cast<const void*>(0xffffffffff600000ULL)).size() != 0;
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
