// backing_sources_test.cpp - backing_of() by each of its sources: smaps without CAP_SYS_ADMIN or
// as nobody, PAGEMAP_SCAN without privilege and against /proc/kpageflags, the huge zero page,
// shmem THP, another process. The rest: backing_test.cpp.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backing_support.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/detail/frame_nodes.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "support.hpp"

namespace {

using hugepage::backing_report;
using hugepage::backing_source;
using hugepage::mapping_info;

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
  // Before Linux 6.7 there is no PAGEMAP_SCAN to agree with: the figures above are the check.
  if (scan_supported()) {
    EXPECT_TRUE(agrees_with_kpageflags(region.get(), length));
  }
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

// The node of a physical frame, from a sysfs tree of memory blocks written here: a block under
// one node is that node's, a block under two is no one node's, a frame in no block has none.
TEST(FrameNodes, MemoryBlocksNameTheNodeOfAFrame) {
  char dir[] = "/tmp/frame-nodes-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr) << std::strerror(errno);
  const std::string root = dir;
  std::vector<std::string> made;
  const auto make_dir = [&](const std::string& path) {
    ASSERT_EQ(::mkdir((root + path).c_str(), 0755), 0) << path << ": " << std::strerror(errno);
    made.push_back(path);
  };
  const auto make_file = [&](const std::string& path, const char* text) {
    std::ofstream(root + path) << text;
    made.push_back(path);
  };
  for (const char* path : {"/sys", "/sys/devices", "/sys/devices/system",
                           "/sys/devices/system/memory", "/sys/devices/system/node",
                           "/sys/devices/system/node/node0", "/sys/devices/system/node/node1"}) {
    make_dir(path);
  }
  // Blocks of 128 MiB (hex, as the kernel writes it): 0 on node 0, 1 on both, 2 on node 1.
  make_file("/sys/devices/system/memory/block_size_bytes", "8000000\n");
  make_file("/sys/devices/system/node/online", "0-1\n");
  make_file("/sys/devices/system/node/node0/memory0", "");
  make_file("/sys/devices/system/node/node0/memory1", "");
  make_file("/sys/devices/system/node/node1/memory1", "");
  make_file("/sys/devices/system/node/node1/memory2", "");
  make_file("/sys/devices/system/node/node1/memory_failure", "");
  const std::uint64_t per_block = (std::uint64_t{128} << 20) / hugepage::os::base_page_size();
  hugepage::detail::frame_nodes frames(root);
  EXPECT_EQ(frames.node_of(0), 0);
  EXPECT_EQ(frames.node_of(per_block - 1), 0);
  EXPECT_EQ(frames.node_of(per_block), -1) << "a block of two nodes";
  EXPECT_EQ(frames.node_of(2 * per_block + 5), 1);
  EXPECT_EQ(frames.node_of(3 * per_block), -1) << "a frame in no block";
  hugepage::detail::frame_nodes none(root + "/nowhere");
  EXPECT_EQ(none.node_of(0), -1) << "no sysfs memory blocks";
  for (auto it = made.rbegin(); it != made.rend(); ++it) ::remove((root + *it).c_str());
  ::rmdir(dir);
}

}  // namespace
