// doctor_collapse_listing_test.cpp - hugepage-doctor --pid PID --collapse on a child process: what
// its table lists and leaves alone (hostile names, THP disabled, MADV_NOHUGEPAGE, shared memory),
// --max-bytes, permissions, usage errors, and --coverage as nobody. The rest:
// doctor_collapse_test.cpp.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "doctor_collapse_support.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using doctor_collapse::doctor;
using doctor_collapse::run_result;
using doctor_collapse::setup;
using doctor_collapse::Target;
using hugepage::test::kHuge;
using hugepage::units::mib;

// The line of the table that lists the range starting at `address`; "" when none does.
std::string row_of(const std::string& out, const void* address) {
  char start[32];
  std::snprintf(start, sizeof start, "  %#014llx-",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(address)));
  const std::size_t at = out.find(start);
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// A mapping's name is the target's text: the table prints it escaped (tools/README.md, "Safe to
// paste"), so a file name holding an escape sequence reaches the terminal as \x1b, not as ESC.
TEST(DoctorCollapse, HostileMappingNameIsPrintedEscaped) {
  const std::string path = "/tmp/hugepage-doctor-\x1b[31mred\\-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::unlink(path.c_str());  // smaps names it "<path> (deleted)"
  ASSERT_EQ(::ftruncate(fd, 4 * mib), 0);
  std::error_code ec;
  char* region = static_cast<char*>(hugepage::os::map_aligned(4 * mib, kHuge, ec));
  ASSERT_NE(region, nullptr) << ec.message();
  void* file = ::mmap(region, 4 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0);
  ::close(fd);
  ASSERT_EQ(file, static_cast<void*>(region)) << std::strerror(errno);
  // Writes make private copies: anonymous memory on base pages, a candidate to collapse.
  for (std::size_t i = 0; i < 4 * mib; i += 4096) region[i] = 1;
  const run_result dry = doctor("--pid " + std::to_string(::getpid()) + " --collapse --dry-run");
  const std::string row = row_of(dry.out, region);
  hugepage::os::unmap(region, 4 * mib);
  // Exit status 1 when nothing but blocked ranges is on base pages (0 candidates).
  const bool candidates = dry.out.find(": 0 candidate range(s)") == std::string::npos;
  EXPECT_EQ(dry.status, candidates ? 0 : 1) << dry.err << dry.out;
  EXPECT_NE(row.find("/tmp/hugepage-doctor-\\x1b[31mred\\\\-"), std::string::npos) << dry.out;
  // Its written pages are anonymous copies in a file mapping, which MADV_COLLAPSE refuses: listed
  // as such, with no gain.
  EXPECT_NE(row.find("(cannot collapse: private file mapping)"), std::string::npos) << row;
  EXPECT_NE(dry.out.find("Cannot collapse: a private file mapping: "), std::string::npos)
      << dry.out;
  EXPECT_EQ(dry.out.find('\x1b'), std::string::npos) << "a raw escape reached the table";
}

// THP disabled by prctl: every range is listed with 0 expected gain and the reason, and the real
// run attempts none, says so, and exits 1; the kernel shows no change.
TEST(DoctorCollapse, ThpDisabledForTheProcessPromisesNothing) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target(4096, setup::thp_disabled);
  ASSERT_GT(target.pid(), 0);
  const std::string pid = std::to_string(target.pid());
  std::error_code ec;
  const std::string status = hugepage::detail::read_file(("/proc/" + pid + "/status").c_str(), ec);
  ASSERT_NE(status.find("THP_enabled:\t0"), std::string::npos) << status;
  ASSERT_EQ(target.huge(), 0.0) << "THP disabled, yet the advised region got huge pages";

  const run_result dry = doctor("--pid " + pid + " --collapse --dry-run");
  EXPECT_EQ(dry.status, 1) << dry.err << dry.out;
  EXPECT_NE(dry.out.find(": 0 candidate range(s), 0 B resident on base pages"), std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("cannot collapse: 0 expected gain"), std::string::npos) << dry.out;
  const std::string row = row_of(dry.out, target.address());
  EXPECT_NE(row.find("(cannot collapse: THP disabled for the process)"), std::string::npos)
      << dry.out;
  EXPECT_NE(row.find(" 0 B "), std::string::npos) << "0 expected gain: " << row;
  EXPECT_NE(dry.out.find("Cannot collapse: THP is disabled for the process (prctl "
                         "PR_SET_THP_DISABLE"),
            std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("Nothing can be collapsed (exit status 1)"), std::string::npos);
  const run_result json = doctor("--pid " + pid + " --collapse --dry-run --json");
  EXPECT_EQ(json.status, 1) << json.err;
  EXPECT_NE(json.out.find("\"expected_gain_bytes\": 0,\n  \"growth_bytes\": 0"), std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"nothing_collapsed\": \"THP is disabled"), std::string::npos)
      << json.out;

  const run_result run = doctor("--pid " + pid + " --collapse --budget-ms 5000");
  EXPECT_EQ(run.status, 1) << run.err << run.out;
  EXPECT_NE(run.out.find("Collapsed 0 B."), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Nothing collapsed (exit status 1)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Cannot collapse: THP is disabled"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("Refused:"), std::string::npos) << "nothing was attempted\n" << run.out;
  EXPECT_EQ(target.huge(), 0.0) << run.out;
  EXPECT_EQ(target.finish(), 0);
}

// A VM_NOHUGEPAGE region is listed with 0 expected gain and never attempted, while the rest of
// the process is collapsed as before; when every mapping is VM_NOHUGEPAGE nothing can be, and
// both runs exit 1.
TEST(DoctorCollapse, NoHugepageRegionsAreListedAndLeftAlone) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  {
    Target target(4096, setup::nohuge_region);
    ASSERT_GT(target.pid(), 0);
    const std::string pid = std::to_string(target.pid());
    const run_result dry = doctor("--pid " + pid + " --collapse --dry-run");
    const std::string row = row_of(dry.out, target.address());
    EXPECT_NE(row.find("(cannot collapse: VM_NOHUGEPAGE)"), std::string::npos) << dry.out;
    EXPECT_NE(row.find("  0 B "), std::string::npos) << "0 expected gain: " << row;
    EXPECT_NE(dry.out.find("Cannot collapse: the mapping is VM_NOHUGEPAGE"), std::string::npos)
        << dry.out;
    const run_result run = doctor("--pid " + pid + " --collapse --budget-ms 5000");
    EXPECT_LE(run.status, 1) << run.err;
    const std::string after = row_of(run.out, target.address());
    EXPECT_NE(after.find("       -          -         -  "), std::string::npos)
        << "not attempted: " << after;
    EXPECT_EQ(target.huge(), 0.0) << run.out;
    EXPECT_EQ(target.finish(), 0);
  }
  Target target(4096, setup::nohuge_everywhere);
  ASSERT_GT(target.pid(), 0);
  const std::string pid = std::to_string(target.pid());
  const run_result dry = doctor("--pid " + pid + " --collapse --dry-run");
  EXPECT_EQ(dry.status, 1) << dry.out;
  EXPECT_NE(dry.out.find(": 0 candidate range(s)"), std::string::npos) << dry.out;
  const run_result run = doctor("--pid " + pid + " --collapse --budget-ms 5000");
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("Nothing collapsed (exit status 1)"), std::string::npos) << run.out;
  EXPECT_EQ(target.huge(), 0.0) << run.out;
  EXPECT_EQ(target.finish(), 0);
}

// shmem_enabled, put back as it was when the test ends.
class shmem_setting {
 public:
  explicit shmem_setting(std::string was) : was_(std::move(was)) {}
  ~shmem_setting() { set(was_); }
  shmem_setting(const shmem_setting&) = delete;
  shmem_setting& operator=(const shmem_setting&) = delete;
  static bool set(const std::string& mode) {
    const int fd = ::open("/sys/kernel/mm/transparent_hugepage/shmem_enabled", O_WRONLY);
    if (fd < 0) return false;
    const bool ok = ::write(fd, mode.data(), mode.size()) == static_cast<ssize_t>(mode.size());
    ::close(fd);
    return ok;
  }

 private:
  std::string was_;
};

// Shared memory is no candidate (other processes map it too). Under shmem_enabled=deny the kernel
// refuses MADV_COLLAPSE on it, and the dry run lists it as such; under never the kernel takes it
// (only faults and khugepaged are off), so nothing says it cannot. Both checked against the kernel
// itself, with shmem_enabled set for the test and put back.
TEST(DoctorCollapse, SharedMemoryIsNoCandidateAndIsListedOnlyUnderDeny) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("sets shmem_enabled, as root");
  const std::string found = hugepage::read_thp_settings().shmem_enabled.value_or("");
  if (found.empty()) HUGEPAGE_SKIP_OR_FAIL("no shmem_enabled on this kernel");
  const shmem_setting restore(found);
  for (const std::string mode : {"never", "deny"}) {
    SCOPED_TRACE(mode);
    ASSERT_TRUE(shmem_setting::set(mode));
    // The kernel's answer for shared anonymous memory of this process, mapped on a 2 MiB
    // boundary (a huge page of shared memory sits at a 2 MiB offset of its file: only an address
    // congruent to it can map one).
    std::error_code ec;
    void* aligned = hugepage::os::map_aligned(kHuge, kHuge, ec);
    ASSERT_NE(aligned, nullptr) << ec.message();
    char* shared = static_cast<char*>(::mmap(aligned, kHuge, PROT_READ | PROT_WRITE,
                                             MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
    ASSERT_EQ(shared, aligned);
    std::memset(shared, 1, kHuge);
    const int kernel = ::madvise(shared, kHuge, MADV_COLLAPSE) == 0 ? 0 : errno;
    ::munmap(shared, kHuge);
    EXPECT_EQ(kernel, mode == "deny" ? EINVAL : 0) << std::strerror(kernel);

    Target target(4096, setup::shared);
    ASSERT_GT(target.pid(), 0);
    const std::string pid = std::to_string(target.pid());
    const run_result dry = doctor("--pid " + pid + " --collapse --dry-run");
    EXPECT_LE(dry.status, 1) << dry.err;
    const std::string label = "/dev/zero (deleted) (cannot collapse: shmem_enabled=" + mode + ")";
    if (mode == "deny") {
      const std::size_t at = dry.out.find(label);
      ASSERT_NE(at, std::string::npos) << dry.out;
      const std::string row =
          dry.out.substr(dry.out.rfind('\n', at) + 1, at - dry.out.rfind('\n', at));
      EXPECT_NE(row.find("  0 B "), std::string::npos) << "0 expected gain: " << row;
      EXPECT_NE(dry.out.find("Cannot collapse: shared memory (MAP_SHARED anonymous, SysV or "
                             "memfd) under shmem_enabled=deny"),
                std::string::npos)
          << dry.out;
    } else {
      EXPECT_EQ(dry.out.find("/dev/zero (deleted)"), std::string::npos) << dry.out;
    }
    const run_result run = doctor("--pid " + pid + " --collapse --budget-ms 5000");
    EXPECT_LE(run.status, 1) << run.err;
    EXPECT_EQ(target.huge(), 0.0) << "shared memory left alone\n" << run.out;
    EXPECT_EQ(target.finish(), 0);
  }
}

TEST(DoctorCollapse, MaxBytesBoundsTheWork) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target;
  ASSERT_GT(target.pid(), 0);
  if (target.huge() > 0.05) HUGEPAGE_SKIP_OR_FAIL("unadvised memory is on THP already here");
  const run_result run =
      doctor("--pid " + std::to_string(target.pid()) + " --collapse --max-bytes 8388608");
  EXPECT_EQ(run.status, 0) << run.err;
  const double after = target.huge();
  EXPECT_GT(after, 0.0) << run.out;
  EXPECT_LE(after, (8.0 + 2.0) / 32.0 + 1e-9) << "at most the budget plus one chunk\n" << run.out;
  // Exit 0 (something collapsed), but not without a word: how much is left (the target's 22 MiB
  // and more: the forked child has the test's other memory too) and how to go on.
  const auto stopped = run.out.find("Stopped at --max-bytes 8388608: ");
  ASSERT_NE(stopped, std::string::npos) << run.out;
  const std::string line = run.out.substr(stopped, run.out.find('\n', stopped) - stopped);
  EXPECT_NE(line.find(" on base pages in whole 2 MiB chunks was not tried. Run again to go on, or "
                      "raise the bound (--max-bytes "),
            std::string::npos)
      << line;
  const auto raise = line.find("(--max-bytes ") + 13;
  EXPECT_GE(std::stoull(line.substr(raise)), 8388608u + 20 * mib) << line;
}

TEST(DoctorCollapse, AsNobodyOnARootProcessNamesThePermission) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs a root process to point nobody at");
  Target target;  // a root process
  ASSERT_GT(target.pid(), 0);
  const double before = target.huge();
  const run_result run =
      doctor("--pid " + std::to_string(target.pid()) + " --collapse", /*as_nobody=*/true);
  EXPECT_EQ(run.status, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  // Reading a root process's smaps already needs ptrace access: the message names both rights.
  EXPECT_NE(run.err.find("CAP_SYS_NICE"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("ptrace access"), std::string::npos) << run.err;
  EXPECT_DOUBLE_EQ(target.huge(), before);
}

TEST(DoctorCollapse, UsageErrors) {
  EXPECT_EQ(doctor("--collapse").status, 2);
  EXPECT_EQ(doctor("--pid 1 --dry-run").status, 2);
  EXPECT_EQ(doctor("--pid 1 --collapse --budget-ms 0").status, 2);
  EXPECT_EQ(doctor("--pid 1 --collapse --max-bytes x").status, 2);
}

// --pid lists exact huge bytes per mapping, without root: a nobody process whose 4 MiB THP region
// has its second huge page mapped by PTEs (split by madvise NOHUGEPAGE + HUGEPAGE of one page,
// after which the VMA merges back), read by the doctor running as nobody too.
TEST(DoctorCoverage, ExactHugeBytesPerMappingAsNobody) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs root to start processes as nobody");
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);  // a credential change made it non-dumpable
    std::error_code ec;
    auto* p = static_cast<char*>(hugepage::os::map_aligned(2 * kHuge, kHuge, ec));
    std::uintptr_t address = 0;
    if (p != nullptr) {
      hugepage::os::advise_huge(p, 2 * kHuge);
      for (std::size_t i = 0; i < 2 * kHuge; i += 4096) p[i] = 1;
      hugepage::os::advise(p + kHuge + mib, 4096, MADV_NOHUGEPAGE);
      hugepage::os::advise(p + kHuge + mib, 4096, MADV_HUGEPAGE);
      address = reinterpret_cast<std::uintptr_t>(p);
    }
    (void)!::write(ready[1], &address, sizeof address);
    char c = 0;
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  std::uintptr_t address = 0;
  ASSERT_EQ(::read(ready[0], &address, sizeof address), static_cast<ssize_t>(sizeof address));
  ASSERT_NE(address, 0u);
  const hugepage::backing_report truth =
      hugepage::backing_of(child, reinterpret_cast<const void*>(address), 2 * kHuge);
  const run_result r = doctor("--pid " + std::to_string(child) + " --top 100", /*as_nobody=*/true);
  char c = 0;
  (void)!::write(done[1], &c, 1);
  ::waitpid(child, nullptr, 0);
  for (const int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
  if (truth.thp != kHuge) HUGEPAGE_SKIP_OR_FAIL("the kernel gave no THP for the first 2 MiB");
  EXPECT_LE(r.status, 1) << r.err;
  char start[32];
  std::snprintf(start, sizeof start, "%#014llx-", static_cast<unsigned long long>(address));
  const std::size_t row = r.out.find(std::string("  ") + start);
  ASSERT_NE(row, std::string::npos) << start << " not listed:\n" << r.out;
  const std::string line = r.out.substr(row, r.out.find('\n', row) - row);
  EXPECT_NE(r.out.find("exact, from pagemap_scan"), std::string::npos) << r.out;
  // resident 4 MiB, huge exactly 2 MiB (the split half is not), smaps agrees: no '!'.
  EXPECT_NE(line.find("4 MiB      2 MiB      2 MiB "), std::string::npos) << line;
}

}  // namespace
