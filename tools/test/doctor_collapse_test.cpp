// doctor_collapse_test.cpp - hugepage-doctor --pid PID --collapse [--dry-run] on a child process.
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

#include "hugepage/backing.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

namespace {

using hugepage::units::mib;

constexpr std::size_t kLength = 32 * mib;
constexpr std::size_t kHuge = 2 * mib;

struct run_result {
  int status = -1;
  std::string out, err;
};

// Runs the doctor with `args` (as `nobody` when asked, with `environment` added), capturing
// stdout and stderr.
run_result doctor(const std::string& args, bool as_nobody = false,
                  const std::string& environment = "") {
  const std::string err_file = "/tmp/hugepage-doctor-collapse-" + std::to_string(::getpid());
  const std::string command = (environment.empty() ? "" : "env " + environment + " ") +
                              std::string(as_nobody ? "setpriv --reuid=nobody --regid=nogroup "
                                                      "--clear-groups "
                                                    : "") +
                              HUGEPAGE_DOCTOR_BINARY + " " + args + " 2>" + err_file;
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::error_code ec;
  r.err = hugepage::detail::read_file(err_file.c_str(), ec);
  ::unlink(err_file.c_str());
  return r;
}

// What the child does to its memory before populating it.
enum class setup {
  plain,              // nothing: unadvised, base pages under enabled=madvise
  thp_disabled,       // prctl(PR_SET_THP_DISABLE), then MADV_HUGEPAGE on the region
  nohuge_region,      // MADV_NOHUGEPAGE on the region only
  nohuge_everywhere,  // MADV_NOHUGEPAGE on every mapping of the process
  shared,             // the region is shared memory (MAP_SHARED | MAP_ANONYMOUS), not aligned
  pinned,             // one page of the second chunk spliced into a pipe: a reference the kernel
                      // sees, so MADV_COLLAPSE answers EAGAIN there until the pipe is read
  given_back          // the first chunk given back (MADV_DONTNEED) after it was written: no data,
                      // its page table kept
};

// MADV_NOHUGEPAGE on every mapping /proc/self/maps lists (in a forked child: one thread).
bool advise_all_nohuge() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  unsigned long lo = 0, hi = 0;
  char line[4096];
  bool ok = true;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    // [vsyscall] is outside the process's own address space: madvise refuses it.
    if (std::strstr(line, "[vsyscall]") != nullptr) continue;
    ok = ok && ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_NOHUGEPAGE) == 0;
  }
  std::fclose(maps);
  return ok;
}

// A child holding kLength of populated memory, waiting for its stdin to close.
class Target {
 public:
  explicit Target(std::size_t stride = 4096, setup how = setup::plain) {
    std::error_code ec;
    if (how == setup::shared) {
      void* p = ::mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      p_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
    } else {
      p_ = static_cast<char*>(hugepage::os::map_aligned(kLength, 2 * mib, ec));
    }
    if (p_ == nullptr || ::pipe(ready_) != 0 || ::pipe(done_) != 0 || ::pipe(pin_) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      bool ok = true;
      if (how == setup::thp_disabled) {
        ok = ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 &&
             ::madvise(p_, kLength, MADV_HUGEPAGE) == 0;
      } else if (how == setup::nohuge_region) {
        ok = ::madvise(p_, kLength, MADV_NOHUGEPAGE) == 0;
      } else if (how == setup::nohuge_everywhere) {
        ok = advise_all_nohuge();
      }
      if (!ok) ::_exit(2);
      for (std::size_t i = 0; i < kLength; i += stride) p_[i] = static_cast<char>(i >> 12);
      if (how == setup::given_back && ::madvise(p_, kHuge, MADV_DONTNEED) != 0) ::_exit(2);
      if (how == setup::pinned) {
        iovec page{p_ + kHuge + 8192, 4096};
        if (::vmsplice(pin_[1], &page, 1, 0) != 4096) ::_exit(2);
      }
      char c = 0;
      (void)!::write(ready_[1], &c, 1);
      (void)!::read(done_[0], &c, 1);
      for (std::size_t i = how == setup::given_back ? kHuge : 0; i < kLength; i += stride) {
        if (p_[i] != static_cast<char>(i >> 12)) ::_exit(1);
      }
      ::_exit(0);
    }
    char c = 0;
    if (::read(ready_[0], &c, 1) != 1) pid_ = -1;
  }
  ~Target() { finish(); }
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;
  pid_t pid() const { return pid_; }
  const void* address() const { return p_; }
  /// Reads the page setup::pinned spliced into the pipe: the kernel drops its reference.
  bool unpin() {
    char page[4096];
    return ::read(pin_[0], page, sizeof page) == static_cast<ssize_t>(sizeof page);
  }
  double huge() const { return hugepage::backing_of(pid_, p_, kLength).huge_fraction(); }
  /// Lets the child check its data and exit; returns its exit status.
  int finish() {
    if (pid_ <= 0) return -1;
    char c = 0;
    (void)!::write(done_[1], &c, 1);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    for (const int fd : {ready_[0], ready_[1], done_[0], done_[1], pin_[0], pin_[1]}) ::close(fd);
    hugepage::os::unmap(p_, kLength);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  char* p_ = nullptr;
  pid_t pid_ = -1;
  int ready_[2] = {-1, -1}, done_[2] = {-1, -1}, pin_[2] = {-1, -1};
};

TEST(DoctorCollapse, DryRunChangesNothingThenCollapseRaisesCoverage) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target;
  ASSERT_GT(target.pid(), 0);
  const double before = target.huge();
  if (before > 0.05) HUGEPAGE_SKIP_OR_FAIL("unadvised memory is on THP already here");
  const std::string pid = std::to_string(target.pid());

  const run_result dry = doctor("--pid " + pid + " --collapse --dry-run");
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_NE(dry.out.find("dry run, nothing changed"), std::string::npos) << dry.out;
  // The totals cover every anonymous mapping of the target, a fork of this test: under ASan
  // they also hold the sanitizer's shadow and allocator regions.
  if (!hugepage::test::under_asan()) {
    EXPECT_NE(dry.out.find("32 MiB resident on base pages"), std::string::npos)
        << "the expected gain:\n"
        << dry.out;
    EXPECT_NE(dry.out.find("chunks adds 0 B"), std::string::npos) << "fully populated:\n"
                                                                  << dry.out;
  }
  EXPECT_DOUBLE_EQ(target.huge(), before) << "--dry-run changed the process";
  const run_result json = doctor("--pid " + pid + " --collapse --dry-run --json");
  EXPECT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"mode\": \"collapse\""), std::string::npos) << json.out;
  if (!hugepage::test::under_asan()) {
    EXPECT_NE(json.out.find("\"expected_gain_bytes\": 33554432"), std::string::npos) << json.out;
  }
  EXPECT_DOUBLE_EQ(target.huge(), before) << "--dry-run --json changed the process";

  const run_result run = doctor("--pid " + pid + " --collapse --budget-ms 5000");
  EXPECT_EQ(run.status, 0) << run.err;
  std::fputs(run.out.c_str(), stderr);
  EXPECT_GE(target.huge(), 0.99) << run.out;
  EXPECT_EQ(target.finish(), 0) << "the target's data survived and it kept running";
}

// Every other page populated: collapsing fills each chunk, adding the other half.
TEST(DoctorCollapse, DryRunShowsTheMemoryAFillWouldAdd) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs ptrace access to a child, as root");
  Target target(2 * 4096);
  ASSERT_GT(target.pid(), 0);
  const run_result dry = doctor("--pid " + std::to_string(target.pid()) + " --collapse --dry-run");
  EXPECT_EQ(dry.status, 0) << dry.err;
  if (hugepage::test::under_asan()) GTEST_SKIP() << "the totals include ASan's own regions";
  EXPECT_NE(dry.out.find("16 MiB resident on base pages in whole 2 MiB chunks; filling partly "
                         "populated chunks adds 16 MiB"),
            std::string::npos)
      << dry.out;
}

// The range of `json` (the doctor's collapse JSON) that starts at `address`; null when none does.
nlohmann::json range_at(const nlohmann::json& json, const void* address) {
  for (const auto& range : json.at("ranges")) {
    if (range.at("start") == reinterpret_cast<std::uintptr_t>(address)) return range;
  }
  return nullptr;
}

// Runs the doctor with its test hook on a socket: `at_hook(n)` runs at its n-th pause (from 1),
// the doctor waiting until it returns. Returns the run and, in `pauses`, how many there were.
run_result doctor_with_hook(const std::string& args, const std::function<void(int)>& at_hook,
                            int* pauses = nullptr) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return {};  // inherited by the doctor
  int n = 0;
  std::thread hook([&] {
    char byte = 0;
    while (::read(pair[0], &byte, 1) == 1) {
      at_hook(++n);
      (void)!::write(pair[0], &byte, 1);
    }
  });
  const run_result r =
      doctor(args, false, "HUGEPAGE_DOCTOR_TEST_HOOK_FD=" + std::to_string(pair[1]));
  ::shutdown(pair[1], SHUT_RDWR);
  hook.join();
  ::close(pair[0]);
  ::close(pair[1]);
  if (pauses != nullptr) *pauses = n;
  return r;
}

// A page pinned for the whole run (spliced into a pipe nobody reads): the kernel answers EAGAIN
// for its chunk on every pass. The doctor collapses the other 15 chunks, tries the busy one on
// each of its passes, and explains the refusal it ends with.
TEST(DoctorCollapse, ABusyChunkIsTriedOnEveryPassThenExplained) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target(4096, setup::pinned);
  ASSERT_GT(target.pid(), 0);
  const run_result run =
      doctor("--pid " + std::to_string(target.pid()) + " --collapse --budget-ms 5000 --json");
  EXPECT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = nlohmann::json::parse(run.out);
  const nlohmann::json range = range_at(json, target.address());
  ASSERT_FALSE(range.is_null()) << run.out;
  EXPECT_EQ(range.at("passes"), 3);
  EXPECT_EQ(range.at("collapsed_bytes"), kLength - kHuge);
  EXPECT_EQ(range.at("refused_bytes"), kHuge);
  EXPECT_EQ(range.at("refusals"), nlohmann::json::parse(R"([{"errno": )" + std::to_string(EAGAIN) +
                                                        R"(, "chunks": 1}])"));
  EXPECT_EQ(json.at("refusals_explained"),
            nlohmann::json::array({"EAGAIN (transient): pages were busy (locked, pinned or under "
                                   "writeback), still on the last of up to 3 passes within the "
                                   "budget. Run again later."}));
  const auto coverage = hugepage::backing_of(target.pid(), target.address(), kLength);
  EXPECT_EQ(coverage.thp, kLength - kHuge);
  EXPECT_EQ(coverage.base, kHuge);
  EXPECT_EQ(target.finish(), 0);
}

// The pin goes away between the first pass and the second (the doctor's test hook pauses it
// there): the second pass collapses the chunk, and nothing is left to explain.
TEST(DoctorCollapse, AChunkBusyForAMomentIsCollapsedOnTheNextPass) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target(4096, setup::pinned);
  ASSERT_GT(target.pid(), 0);
  int hook_calls = 0;
  const run_result run = doctor_with_hook(
      "--pid " + std::to_string(target.pid()) + " --collapse --budget-ms 5000 --json",
      [&](int n) {
        if (n == 2) {  // the first is before the first pass
          EXPECT_TRUE(target.unpin());
        }
      },
      &hook_calls);
  EXPECT_EQ(hook_calls, 2) << "before the first pass and the second, the last one needed";
  EXPECT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = nlohmann::json::parse(run.out);
  const nlohmann::json range = range_at(json, target.address());
  ASSERT_FALSE(range.is_null()) << run.out;
  EXPECT_EQ(range.at("passes"), 2);
  EXPECT_EQ(range.at("collapsed_bytes"), kLength);
  EXPECT_EQ(range.at("refused_bytes"), 0);
  EXPECT_EQ(range.at("refusals"), nlohmann::json::array());
  EXPECT_EQ(json.at("refusals_explained"), nlohmann::json::array());
  EXPECT_EQ(hugepage::backing_of(target.pid(), target.address(), kLength).thp, kLength);
  EXPECT_EQ(target.finish(), 0);
}

// A pause is followed by a try: the budget runs out during the pause before the second pass (the
// test hook holds the doctor there for 300 ms of a 200 ms budget, and unpins the page), and the
// second pass still submits the busy chunk, one chunk past the budget, and collapses it.
TEST(DoctorCollapse, APauseIsFollowedByATryEvenWhenItSpendsTheBudget) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target(4096, setup::pinned);
  ASSERT_GT(target.pid(), 0);
  int hook_calls = 0;
  const run_result run = doctor_with_hook(
      "--pid " + std::to_string(target.pid()) + " --collapse --budget-ms 200 --json",
      [&](int n) {
        if (n != 2) return;  // between the first pass and the second
        EXPECT_TRUE(target.unpin());
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      },
      &hook_calls);
  EXPECT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = nlohmann::json::parse(run.out);
  const nlohmann::json range = range_at(json, target.address());
  ASSERT_FALSE(range.is_null()) << run.out;
  EXPECT_EQ(range.at("passes"), 2);
  EXPECT_EQ(range.at("collapsed_bytes"), kLength);
  EXPECT_EQ(hook_calls, 2);
  EXPECT_EQ(target.finish(), 0);
}

// A chunk without data (written, then given back) is not submitted: the kernel would fill it with
// zeroes (2 MiB of memory for nothing) where its page table is left, or refuse it (EINVAL) where
// none is. The other 15 chunks collapse; no refusal, nothing grew.
TEST(DoctorCollapse, AChunkWithoutDataIsLeftAlone) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target(4096, setup::given_back);
  ASSERT_GT(target.pid(), 0);
  const run_result run =
      doctor("--pid " + std::to_string(target.pid()) + " --collapse --budget-ms 5000 --json");
  EXPECT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = nlohmann::json::parse(run.out);
  const nlohmann::json range = range_at(json, target.address());
  ASSERT_FALSE(range.is_null()) << run.out;
  EXPECT_EQ(range.at("collapsed_bytes"), kLength - kHuge);
  EXPECT_EQ(range.at("refused_bytes"), 0);
  EXPECT_EQ(json.at("refusals_explained"), nlohmann::json::array());
  const auto first = hugepage::backing_of(target.pid(), target.address(), kHuge);
  EXPECT_EQ(first.thp, 0u) << "no huge page of zeroes";
  EXPECT_EQ(first.base, 0u);
  EXPECT_EQ(hugepage::backing_of(target.pid(), static_cast<const char*>(target.address()) + kHuge,
                                 kLength - kHuge)
                .thp,
            kLength - kHuge);
  EXPECT_EQ(target.finish(), 0);
}

// The budget bounds the whole run: spent while the doctor reads the target (its test hook holds it
// there for 20 ms), it leaves no time for a chunk. No range counts as attempted, and the table
// says why it exits 1.
TEST(DoctorCollapse, ABudgetSpentOnReadingAttemptsNothingAndSaysSo) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target;
  ASSERT_GT(target.pid(), 0);
  for (const bool json : {false, true}) {
    SCOPED_TRACE(json ? "json" : "table");
    const run_result run =
        doctor_with_hook("--pid " + std::to_string(target.pid()) + " --collapse --budget-ms 10" +
                             (json ? " --json" : ""),
                         [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    EXPECT_EQ(run.status, 1) << run.err << run.out;
    const std::string why =
        "the budget (--budget-ms, --max-bytes) ran out before a chunk collapsed";
    if (json) {
      const nlohmann::json report = nlohmann::json::parse(run.out);
      // After the reasons of ranges that are blocked, if any: the fork has this test's.
      const std::string said = report.at("nothing_collapsed");
      EXPECT_EQ(said.substr(said.size() - std::min(said.size(), why.size())), why) << said;
      const nlohmann::json range = range_at(report, target.address());
      ASSERT_FALSE(range.is_null()) << run.out;
      EXPECT_EQ(range.at("attempted"), false);
      EXPECT_EQ(range.at("passes"), 0);
      EXPECT_TRUE(range.at("huge_fraction_after").is_null());
    } else {
      EXPECT_NE(run.out.find("Nothing collapsed (exit status 1): " + why + ".\n"),
                std::string::npos)
          << run.out;
    }
  }
  EXPECT_DOUBLE_EQ(target.huge(), 0.0);
  EXPECT_EQ(target.finish(), 0);
}

// A thread's id reads the same memory, but a collapse needs the process: an error naming it.
TEST(DoctorCollapse, AThreadIdNamesItsProcess) {
  std::promise<pid_t> tid;
  std::promise<void> done;
  std::thread thread([&] {
    tid.set_value(static_cast<pid_t>(::syscall(SYS_gettid)));
    done.get_future().wait();
  });
  const pid_t id = tid.get_future().get();
  for (const char* mode : {" --collapse --dry-run", " --collapse"}) {
    const run_result r = doctor("--pid " + std::to_string(id) + mode);
    EXPECT_EQ(r.status, 2) << mode;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err, "hugepage-doctor: pid " + std::to_string(id) + " is a thread of process " +
                         std::to_string(::getpid()) + ": a collapse works on a process (--pid " +
                         std::to_string(::getpid()) + ")\n")
        << mode;
  }
  done.set_value();
  thread.join();
}

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
