// process_view_test.cpp - process_view: a process opened once, its errors worded once, and the
// same answers through a view as through the calls that take a pid.
#include "hugepage/process_view.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/collapse.hpp"
#include "hugepage/detail/huge_zero_probe.hpp"
#include "hugepage/os.hpp"
#include "hugepage/upkeep.hpp"
#include "support.hpp"

namespace {

using hugepage::backing_report;
using hugepage::backing_source;
using hugepage::process_view;

constexpr std::size_t kMiB = hugepage::units::mib;
constexpr pid_t kNoSuchPid = 0x3fffffff;  // above pid_max's ceiling (2^22): never a process

// 8 MiB of private anonymous memory on base pages (MADV_NOHUGEPAGE: nothing makes it huge
// between two reads), its first 3 MiB written.
class base_block {
 public:
  base_block() {
    std::error_code ec;
    p_ = hugepage::os::map_aligned(length, 2 * kMiB, ec);
    if (p_ == nullptr) return;
    ::madvise(p_, length, MADV_NOHUGEPAGE);
    for (std::size_t at = 0; at < written; at += hugepage::os::base_page_size()) {
      static_cast<volatile char*>(p_)[at] = 1;
    }
  }
  base_block(const base_block&) = delete;
  base_block& operator=(const base_block&) = delete;
  ~base_block() {
    if (p_ != nullptr) ::munmap(p_, length);
  }
  void* get() const { return p_; }

  static constexpr std::size_t length = 8 * kMiB;
  static constexpr std::size_t written = 3 * kMiB;

 private:
  void* p_ = nullptr;
};

// Every count of a report, and its source, note and exactness.
std::string describe(const backing_report& r) {
  char line[512];
  std::snprintf(line, sizeof line,
                "source %s exact %d bytes %zu thp %zu base %zu not_resident %zu zero %zu "
                "unmapped %zu unknown %zu note '%s'",
                hugepage::name_of(r.source), r.exact ? 1 : 0, r.bytes, r.thp, r.base,
                r.not_resident, r.zero_page, r.unmapped, r.unknown, r.note.c_str());
  return line;
}

// How many of this process's descriptors are open on `target` ("/proc/kpageflags").
int descriptors_on(const std::string& target) {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (const dirent* entry = ::readdir(dir)) {
    char link[PATH_MAX];
    const std::string path = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n > 0 && std::string(link, static_cast<std::size_t>(n)) == target) ++count;
  }
  ::closedir(dir);
  return count;
}

TEST(ProcessView, NoSuchProcessGivesTheExactError) {
  const process_view view(kNoSuchPid);
  EXPECT_EQ(view.pid(), kNoSuchPid);
  EXPECT_EQ(view.pagemap_fd(), -1);
  EXPECT_EQ(view.pagemap_errno(), ENOENT);
  EXPECT_EQ(view.pagemap_error(),
            "cannot open /proc/1073741823/pagemap: No such file or directory");
  EXPECT_EQ(view.maps_fd(), -1);
  EXPECT_EQ(view.maps_errno(), ENOENT);
  EXPECT_EQ(view.maps_error(), "cannot open /proc/1073741823/maps: No such file or directory");
  std::error_code ec;
  EXPECT_FALSE(view.maps_text(ec).has_value());
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  EXPECT_FALSE(view.kpageflags_tried()) << "nothing asked for kpageflags";
  // backing_of_mappings passes PAGEMAP_SCAN over with the view's words, first in every note.
  hugepage::mapping_info m;
  m.start = 0x10000000;
  m.end = m.start + 2 * kMiB;
  const std::vector<backing_report> reports = hugepage::backing_of_mappings(view, {m});
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].note.rfind(view.pagemap_error() + "; ", 0), 0u) << describe(reports[0]);
  // The process's own files: an open of a pagemap that is no kernel file is not worded here.
  EXPECT_EQ(process_view().pagemap_error(), "");
  EXPECT_EQ(process_view().maps_error(), "");
}

// A view of this process answers what backing_of(p, n) answers, for every source, however many
// calls it serves; backing_of_mappings(view, ...) what backing_of gives each whole mapping.
TEST(ProcessView, OfSelfAnswersAsBackingOf) {
  const base_block block;
  ASSERT_NE(block.get(), nullptr);
  const process_view view;
  ASSERT_GE(view.pagemap_fd(), 0) << view.pagemap_error();
  ASSERT_GE(view.maps_fd(), 0) << view.maps_error();
  for (int round = 0; round < 2; ++round) {
    const backing_report by_view = hugepage::backing_of(view, block.get(), block.length);
    const backing_report by_call = hugepage::backing_of(block.get(), block.length);
    EXPECT_EQ(describe(by_view), describe(by_call));
    EXPECT_TRUE(by_view.exact) << describe(by_view);
    EXPECT_EQ(by_view.base, block.written) << describe(by_view);
    EXPECT_EQ(by_view.not_resident, block.length - block.written) << describe(by_view);
    EXPECT_EQ(by_view.thp + by_view.unmapped + by_view.unknown, 0u) << describe(by_view);
    for (const backing_source source :
         {backing_source::pagemap_scan, backing_source::kpageflags, backing_source::smaps}) {
      EXPECT_EQ(describe(hugepage::backing_of(view, block.get(), block.length, source)),
                describe(hugepage::backing_of(0, block.get(), block.length, source)))
          << hugepage::name_of(source);
    }
  }
  std::error_code ec;
  const std::vector<hugepage::mapping_info> mappings = view.read_smaps(ec);
  ASSERT_FALSE(ec) << ec.message();
  std::vector<hugepage::mapping_info> ours;
  for (const hugepage::mapping_info& m : mappings) {
    if (m.start <= reinterpret_cast<std::uintptr_t>(block.get()) &&
        m.end > reinterpret_cast<std::uintptr_t>(block.get())) {
      ours.push_back(m);
    }
  }
  ASSERT_EQ(ours.size(), 1u) << "the block is one mapping";
  const std::vector<backing_report> each = hugepage::backing_of_mappings(view, ours);
  ASSERT_EQ(each.size(), 1u);
  const backing_report whole =
      hugepage::backing_of(view, reinterpret_cast<const void*>(ours[0].start), ours[0].size());
  EXPECT_EQ(describe(each[0]), describe(whole));
  // The maps text through the view is the process's own.
  const auto text = view.maps_text(ec);
  ASSERT_TRUE(text.has_value()) << ec.message();
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", static_cast<unsigned long>(ours[0].start));
  EXPECT_NE(text->find(start), std::string::npos) << "the block's line";
}

// kpageflags is opened only by a call that needs it, once for the view, closed with it.
TEST(ProcessView, OpensKpageflagsOnlyWhenAsked) {
  const base_block block;
  ASSERT_NE(block.get(), nullptr);
  const int before = descriptors_on("/proc/kpageflags");
  ASSERT_GE(before, 0);
  {
    const process_view view;
    const backing_report scan =
        hugepage::backing_of(view, block.get(), block.length, backing_source::pagemap_scan);
    hugepage::backing_of(view, block.get(), block.length, backing_source::smaps);
    EXPECT_FALSE(view.kpageflags_tried());
    EXPECT_EQ(descriptors_on("/proc/kpageflags"), before);
    if (scan.source == backing_source::pagemap_scan) {
      hugepage::backing_of(view, block.get(), block.length);  // PAGEMAP_SCAN answers: no fallback
      EXPECT_FALSE(view.kpageflags_tried()) << describe(scan);
    }
    hugepage::backing_of(view, block.get(), block.length, backing_source::kpageflags);
    hugepage::backing_of(view, block.get(), block.length, backing_source::kpageflags);
    EXPECT_TRUE(view.kpageflags_tried());
    if (::geteuid() == 0) {
      EXPECT_GE(view.kpageflags_fd(), 0);
      EXPECT_EQ(view.kpageflags_errno(), 0);
      EXPECT_EQ(descriptors_on("/proc/kpageflags"), before + 1) << "opened once";
    } else {
      EXPECT_EQ(view.kpageflags_fd(), -1);
      EXPECT_NE(view.kpageflags_errno(), 0);
    }
  }
  EXPECT_EQ(descriptors_on("/proc/kpageflags"), before) << "closed with the view";
}

// Hides `path` behind an empty file (a bind mount, in the caller's own mount namespace).
bool hide(const char* path) {
  char blank[] = "/tmp/hugepage-view-XXXXXX";
  const int fd = ::mkstemp(blank);
  if (fd < 0) return false;
  ::close(fd);
  const bool hidden = ::mount(blank, path, nullptr, MS_BIND, nullptr) == 0;
  ::unlink(blank);  // the mount keeps the inode
  return hidden;
}

// The view reads the files it opened when it was made: hiding them afterwards (a mount over
// pagemap and maps) changes nothing for it, while a call that opens them anew reads the empty
// files that hide them, which answer no PAGEMAP_SCAN.
TEST(ProcessView, ReadsTheFilesItOpenedWhenMade) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("hiding /proc files needs root (mount namespace)");
  const int code = hugepage::test::run_in_child([]() -> int {
    const base_block block;
    if (block.get() == nullptr) return 2;
    const process_view view;
    const backing_report before = hugepage::backing_of(view, block.get(), block.length);
    if (before.source != backing_source::pagemap_scan) return 77;  // no PAGEMAP_SCAN here
    if (::unshare(CLONE_NEWNS) != 0) return 3;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 4;
    if (!hide("/proc/self/pagemap") || !hide("/proc/self/maps")) return 5;
    const backing_report after = hugepage::backing_of(view, block.get(), block.length);
    std::fprintf(stderr, "child: view %s\n", describe(after).c_str());
    if (describe(after) != describe(before)) return 10;
    std::error_code ec;
    const auto text = view.maps_text(ec);
    if (!text || text->find("[stack]") == std::string::npos) return 11;
    const backing_report fresh =
        hugepage::backing_of(0, block.get(), block.length, backing_source::pagemap_scan);
    std::fprintf(stderr, "child: fresh %s\n", describe(fresh).c_str());
    if (fresh.source != backing_source::unavailable) return 12;
    if (fresh.note.find("PAGEMAP_SCAN failed") == std::string::npos) return 13;
    if (!process_view().maps_text(ec) || !process_view().maps_text(ec)->empty()) return 14;
    return 0;
  });
  if (code == 77) HUGEPAGE_SKIP_OR_FAIL("PAGEMAP_SCAN (Linux 6.7) does not answer here");
  EXPECT_EQ(code, 0);
}

// Any file of the process reads through the view's directory (read_text, stat_of), never by its
// number again. A process that is a zombie when the view is made keeps its directory: its stat
// says Z, its memory files are ESRCH. Once it is reaped, what the view reads is an error, never
// the files of a later process that got its pid.
TEST(ProcessView, ReadsAnyFileOfItsProcessInItsDirectory) {
  std::error_code ec;
  const process_view self;
  const auto status = self.read_text("status", ec);
  ASSERT_TRUE(status) << ec.message();
  EXPECT_NE(status->find("\nPid:\t" + std::to_string(::getpid()) + "\n"), std::string::npos);
  struct stat st {};
  EXPECT_EQ(self.stat_of("", st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  struct stat ours {
  }, through{};
  ASSERT_EQ(::stat("/proc/self/ns/mnt", &ours), 0);
  ASSERT_EQ(self.stat_of("ns/mnt", through), 0);
  EXPECT_EQ(ours.st_ino, through.st_ino);
  EXPECT_FALSE(self.read_text("no-such-file", ec));
  EXPECT_EQ(ec, std::errc::no_such_file_or_directory);
  EXPECT_FALSE(self.read_text("task", ec)) << "a directory is no text";
  EXPECT_EQ(ec, std::errc::invalid_argument);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // a zombie
  const process_view zombie(child);
  EXPECT_TRUE(zombie.exited());
  const auto stat = zombie.read_text("stat", ec);
  ASSERT_TRUE(stat) << ec.message();
  EXPECT_NE(stat->find(") Z "), std::string::npos) << *stat;
  EXPECT_EQ(zombie.pagemap_errno(), ESRCH);
  EXPECT_EQ(zombie.maps_errno(), ESRCH);
  EXPECT_TRUE(zombie.read_smaps(ec).empty());
  EXPECT_EQ(ec, std::errc::no_such_process);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(zombie.read_text("stat", ec)) << "reaped: nothing of it is left to read";
  EXPECT_TRUE(ec == std::errc::no_such_process || ec == std::errc::no_such_file_or_directory)
      << ec.message();
  EXPECT_NE(zombie.stat_of("ns/mnt", st), 0);
}

// Under a root, every file the view opens is root + its path: maps and smaps read from a copy,
// and the error names the path it tried.
TEST(ProcessView, RootPutsEveryFileUnderIt) {
  char dir[] = "/tmp/hugepage-view-root-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string root = dir;
  const std::string proc = root + "/proc/4242";
  ASSERT_EQ(::mkdir((root + "/proc").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(proc.c_str(), 0755), 0);
  const std::string maps = "7f0000000000-7f0000400000 rw-p 00000000 00:00 0 \n";
  const std::string smaps = maps +
                            "Size:               4096 kB\n"
                            "KernelPageSize:       4 kB\n"
                            "Rss:                 1024 kB\n"
                            "AnonHugePages:          0 kB\n";
  std::ofstream(proc + "/maps") << maps;
  std::ofstream(proc + "/smaps") << smaps;
  {
    const process_view view(4242, root);
    EXPECT_EQ(view.root(), root);
    EXPECT_EQ(view.path_of("smaps"), proc + "/smaps");
    EXPECT_EQ(view.pagemap_errno(), ENOENT);
    EXPECT_EQ(view.pagemap_error(), "cannot open " + proc + "/pagemap: No such file or directory");
    EXPECT_EQ(view.maps_error(), "");
    std::error_code ec;
    EXPECT_EQ(view.maps_text(ec).value_or("(unread)"), maps);
    const std::vector<hugepage::mapping_info> read = view.read_smaps(ec);
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_EQ(read.size(), 1u);
    EXPECT_EQ(read[0].start, 0x7f0000000000u);
    EXPECT_EQ(read[0].rss, 1024 * 1024u);
    EXPECT_EQ(view.kpageflags_fd(), -1) << "no kpageflags under the root";
    EXPECT_EQ(view.kpageflags_errno(), ENOENT);
  }
  std::remove((proc + "/maps").c_str());
  std::remove((proc + "/smaps").c_str());
  ::rmdir(proc.c_str());
  ::rmdir((root + "/proc").c_str());
  ::rmdir(dir);
}

// collapse() and upkeep() through a view: its pagemap skips what is unmapped, without a call; a
// view of no process, or of another process for upkeep, starts nothing.
TEST(ProcessView, CollapseAndUpkeepTakeAView) {
  std::error_code ec;
  void* p = hugepage::os::map_aligned(4 * kMiB, 2 * kMiB, ec);
  ASSERT_NE(p, nullptr) << ec.message();
  ASSERT_EQ(::munmap(p, 4 * kMiB), 0);
  const process_view self;
  const hugepage::collapse_result r = hugepage::collapse(self, p, 4 * kMiB);
  EXPECT_TRUE(r.scanned);
  EXPECT_EQ(r.unmapped, 4 * kMiB);
  EXPECT_EQ(r.calls, 0u);
  EXPECT_TRUE(r.done());

  const process_view nobody(kNoSuchPid);
  const hugepage::collapse_result gone = hugepage::collapse(nobody, p, 4 * kMiB);
  EXPECT_EQ(gone.fatal, std::errc::no_such_process);
  EXPECT_EQ(gone.left, 4 * kMiB);
  EXPECT_EQ(gone.calls, 0u);

  const hugepage::upkeep_result u = hugepage::upkeep(nobody);
  EXPECT_EQ(u.scan_error, std::errc::invalid_argument);
  EXPECT_EQ(u.blocks + u.calls, 0u);
}

// A child that maps 4 MiB of base pages at `at`, fills them, says so on `ready` and waits for a
// byte on `go` (or its death). Returns its pid, -1 when fork failed.
pid_t start_filler(char* at, std::size_t bytes, int ready, int go) {
  return hugepage::test::start_child([=] {
    void* p = ::mmap(at, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    char byte = 'f';  // tells the parent, which waits for a byte on `ready`, that mmap failed
    if (p != at) return ::write(ready, &byte, 1) == 1 ? 1 : 2;
    ::madvise(p, bytes, MADV_NOHUGEPAGE);
    std::memset(p, 7, bytes);
    byte = 'r';
    if (::write(ready, &byte, 1) != 1) return 2;
    return ::read(go, &byte, 1) >= 0 ? 0 : 3;
  });
}

TEST(ProcessView, NeverReadsOrAdvisesALaterProcessGivenItsPid) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs root to set ns_last_pid");
  const std::size_t bytes = 4 * kMiB;
  // An address free in this process, so free in its forks (a fixed one may be ASan's shadow).
  void* const free_range =
      ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(free_range, MAP_FAILED);
  ASSERT_EQ(::munmap(free_range, bytes), 0);
  char* const at = static_cast<char*>(free_range);
  int ready[2], go[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(go), 0);
  const pid_t a = start_filler(at, bytes, ready[1], go[0]);
  ASSERT_GT(a, 0);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ASSERT_EQ(byte, 'r') << "the child could not map its block";
  const process_view view(a);
  ASSERT_EQ(view.pagemap_errno(), 0);
  ASSERT_EQ(::kill(a, SIGKILL), 0);
  ASSERT_EQ(::waitpid(a, nullptr, 0), a);
  // B: a later process given a's pid (other processes on the machine may take it first: retry).
  pid_t b = -1;
  for (int attempt = 0; attempt < 50 && b != a; ++attempt) {
    if (b > 0) {
      ::kill(b, SIGKILL);
      ::waitpid(b, nullptr, 0);
    }
    std::ofstream("/proc/sys/kernel/ns_last_pid") << a - 1;
    b = start_filler(at, bytes, ready[1], go[0]);
    ASSERT_GT(b, 0);
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    ASSERT_EQ(byte, 'r') << "the child could not map its block";
  }
  if (b != a) {
    ::kill(b, SIGKILL);
    ::waitpid(b, nullptr, 0);
    HUGEPAGE_SKIP_OR_FAIL("pid " + std::to_string(a) + " was not given again in 50 tries");
  }
  const backing_report r = hugepage::backing_of(view, at, bytes);
  EXPECT_EQ(r.note,
            "process " + std::to_string(a) + " has exited: it has no memory left to report");
  EXPECT_EQ(r.source, backing_source::unavailable);
  EXPECT_EQ(r.base, 0u);
  EXPECT_EQ(r.unknown, bytes);
  std::error_code ec;
  EXPECT_TRUE(view.read_smaps(ec).empty());
  EXPECT_EQ(ec, std::errc::no_such_process);

  const hugepage::collapse_result c = hugepage::collapse(view, at, bytes);
  EXPECT_EQ(c.fatal, std::errc::no_such_process);
  EXPECT_EQ(c.collapsed, 0u);
  EXPECT_EQ(c.calls, 0u);
  // B's memory is as it made it: base pages, none collapsed.
  const backing_report of_b = hugepage::backing_of(b, at, bytes);
  EXPECT_EQ(of_b.thp, 0u) << of_b.note;
  EXPECT_EQ(of_b.base, bytes) << of_b.note;
  ::kill(b, SIGKILL);
  ::waitpid(b, nullptr, 0);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
}

// The first backing_of(view) of a process probes the kernel's huge zero page through the view
// when it is a view of this process: it opens no /proc/self/pagemap of its own. Run in a fresh
// process (the probe is made once per process): /proc/self/exe with kProbeChild set, which does
// this before main. The view is made, then pagemap and maps are hidden (a mount over them): a probe
// through a file opened now reads the empty file and says PAGEMAP_SCAN cannot be used alone.
constexpr const char* kProbeChild = "HUGEPAGE_TEST_FIRST_PROBE_CHILD";

int first_probe_child() {
  const base_block block;
  if (block.get() == nullptr) return 2;
  const process_view view;
  if (::unshare(CLONE_NEWNS) != 0) return 3;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 4;
  if (!hide("/proc/self/pagemap") || !hide("/proc/self/maps")) return 5;
  const backing_report r = hugepage::backing_of(view, block.get(), block.length);
  std::fprintf(stderr, "child: %s\n", describe(r).c_str());
  if (r.source != backing_source::pagemap_scan || !r.exact) return 10;
  return hugepage::detail::scan_flags_huge_zero_page() ? 0 : 11;
}

const bool first_probe_ran = [] {
  if (std::getenv(kProbeChild) == nullptr) return false;
  std::fflush(nullptr);
  ::_exit(first_probe_child());
}();

TEST(ProcessView, FirstBackingOfProbesThroughAViewOfSelf) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("hiding /proc files needs root (mount namespace)");
  if (!hugepage::detail::scan_flags_huge_zero_page()) {
    HUGEPAGE_SKIP_OR_FAIL("PAGEMAP_SCAN cannot be used alone here: the probe says no either way");
  }
  EXPECT_FALSE(first_probe_ran);
  std::fflush(nullptr);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::setenv(kProbeChild, "1", 1);
    ::execl("/proc/self/exe", "process_view_test", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// backing_of_mappings with a list the process did not give: a mapping whose end is below its
// start is 0 bytes with a note, and PAGEMAP_SCAN's EFAULT for a range past the user address space
// and EINVAL for one off page boundaries head that mapping's note only: a real mapping after them
// is scanned as backing_of scans it.
TEST(ProcessView, MappingsOutsideTheContractStayTheirOwn) {
  const base_block block;
  ASSERT_NE(block.get(), nullptr);
  const process_view view;
  if (hugepage::backing_of(view, block.get(), block.length).source !=
      backing_source::pagemap_scan) {
    HUGEPAGE_SKIP_OR_FAIL("PAGEMAP_SCAN (Linux 6.7) does not answer here");
  }
  hugepage::mapping_info inverted;
  inverted.start = 0x2000;
  inverted.end = 0x1000;
  hugepage::mapping_info past;  // straddles the top of x86-64's 47-bit user address space
  past.start = 0x7fffffffe000;
  past.end = 0x800000001000;
  hugepage::mapping_info real;
  real.start = reinterpret_cast<std::uintptr_t>(block.get());
  real.end = real.start + block.length;
  hugepage::mapping_info unaligned;  // inside the block, off page boundaries at both ends
  unaligned.start = real.start + 1;
  unaligned.end = real.start + 3 * 4096 + 3;
  const std::vector<backing_report> all =
      hugepage::backing_of_mappings(view, {inverted, past, unaligned, real});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[2].note.rfind("PAGEMAP_SCAN failed (EINVAL", 0), 0u) << describe(all[2]);
  const std::vector<backing_report> reports = {all[0], all[1], all[3]};
  EXPECT_EQ(reports[0].bytes, 0u) << describe(reports[0]);
  EXPECT_EQ(reports[0].source, backing_source::unavailable);
  EXPECT_EQ(reports[0].note, "invalid mapping: its end is below its start");
  EXPECT_EQ(reports[1].bytes, past.end - past.start);
  EXPECT_EQ(reports[1].note.rfind("PAGEMAP_SCAN failed (EFAULT", 0), 0u) << describe(reports[1]);
  EXPECT_EQ(describe(reports[2]), describe(hugepage::backing_of(view, block.get(), block.length)));
  EXPECT_EQ(reports[2].note, "");
  EXPECT_EQ(reports[2].base, base_block::written);
}

// backing_of_mappings with a mapping up to the top of the address space: the parts of its report
// add up to its bytes. A window rounded up past 2^64 wrapped to 0 and counted nothing (parts 0 of
// 2^64 - 2^60 bytes), and a page ending at 2^64 counted 2^64 - 4 KiB. A view of no process (no
// pagemap: prorated from smaps) takes a mapping over the whole address space.
TEST(ProcessView, AMappingToTheTopOfTheAddressSpaceAddsUp) {
  const std::uintptr_t page = hugepage::os::base_page_size();
  const std::uintptr_t top = ~std::uintptr_t{0};
  hugepage::mapping_info high;  // far above any user address space: pagemap has nothing there
  high.start = std::uintptr_t{1} << 60;
  high.end = top & ~(page - 1);
  hugepage::mapping_info last;  // the last page, ending off a page boundary
  last.start = top & ~(page - 1);
  last.end = top;
  hugepage::mapping_info whole;
  whole.start = 0;
  whole.end = top & ~(page - 1);
  whole.rss = 8 * kMiB;
  const process_view self;
  const process_view none(kNoSuchPid);
  struct input {
    const process_view& view;
    hugepage::mapping_info m;
  };
  for (const input& in : {input{self, high}, input{self, last}, input{none, whole}}) {
    const std::vector<backing_report> reports = hugepage::backing_of_mappings(in.view, {in.m});
    ASSERT_EQ(reports.size(), 1u);
    const backing_report& r = reports[0];
    EXPECT_EQ(r.bytes, in.m.end - in.m.start) << describe(r);
    const std::size_t parts =
        r.thp + r.hugetlb_2m + r.hugetlb_1g + r.base + r.not_resident + r.unmapped + r.unknown;
    EXPECT_EQ(parts, r.bytes) << describe(r);
    EXPECT_LE(r.zero_page, r.not_resident) << describe(r);
  }
}

// A process_view under a root opens its files as the readers do (regular files only): a FIFO
// named maps fails at once instead of waiting for a writer for ever, smaps as a symlink to
// /dev/zero is refused instead of read until memory runs out, and backing_of says so in its note
// instead of ending the program. A regular file larger than the readers' bound (a 4 GiB sparse
// smaps) is refused with EFBIG before a byte is read.
TEST(ProcessView, UnderARootOpensRegularFilesOnly) {
  char dir[] = "/tmp/hugepage-view-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string root = dir;
  const std::string proc = root + "/proc/4243";
  ASSERT_EQ(::mkdir((root + "/proc").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(proc.c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((proc + "/maps").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("/dev/zero", (proc + "/smaps").c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", (proc + "/pagemap").c_str()), 0);
  const int code = hugepage::test::run_in_child_within(10000, [&root] {
    const process_view view(4243, root);
    if (view.maps_errno() != EINVAL || view.pagemap_errno() != EINVAL) return 1;
    std::error_code ec;
    if (view.maps_text(ec) || ec != std::errc::invalid_argument) return 2;
    if (!view.read_smaps(ec).empty() || ec != std::errc::invalid_argument) return 3;
    static char data[4096];
    const backing_report r = hugepage::backing_of(view, data, sizeof data);
    std::fprintf(stderr, "child: %s\n", describe(r).c_str());
    if (r.source != backing_source::unavailable || r.unknown != r.bytes) return 4;
    if (r.note.find("Invalid argument") == std::string::npos) return 5;
    return 0;
  });
  EXPECT_EQ(code, 0) << (code == hugepage::test::child_hung ? "the view waited for ever"
                                                            : "see the child's output above");
  std::remove((proc + "/smaps").c_str());
  {
    const int fd = ::open((proc + "/smaps").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{4} << 30), 0);  // 4 GiB, no block written
    ::close(fd);
  }
  const int large = hugepage::test::run_in_child_within(10000, [&root] {
    const process_view view(4243, root);
    std::error_code ec;
    if (!view.read_smaps(ec).empty() || ec != std::errc::file_too_large) return 1;
    return 0;
  });
  EXPECT_EQ(large, 0) << "a 4 GiB smaps is refused with EFBIG, not read";
  for (const char* name : {"/maps", "/smaps", "/pagemap"}) std::remove((proc + name).c_str());
  ::rmdir(proc.c_str());
  ::rmdir((root + "/proc").c_str());
  ::rmdir(dir);
}

}  // namespace
