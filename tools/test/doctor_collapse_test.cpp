// doctor_collapse_test.cpp - hugepage-doctor --pid PID --collapse [--dry-run] on a child process:
// coverage raised, busy and empty chunks, the time budget, a thread id. What the table lists and
// leaves alone, usage errors: doctor_collapse_listing_test.cpp.
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
using doctor_collapse::kLength;
using doctor_collapse::run_result;
using doctor_collapse::setup;
using doctor_collapse::Target;
using hugepage::test::kHuge;

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

// A target that dies while the doctor reads it leaves a short smaps and mappings that answer
// nothing: no candidates, which must not read as "nothing to collapse" (exit 0). The doctor's
// test hook pauses the dry run after the candidates are listed; the target is killed then.
TEST(DoctorCollapse, ATargetThatDiesWhileReadIsNoFindingInADryRun) {
  Target target;
  ASSERT_GT(target.pid(), 0);
  const run_result run = doctor_with_hook(
      "--pid " + std::to_string(target.pid()) + " --collapse --dry-run --json", [&](int n) {
        if (n == 1) {
          ::kill(target.pid(), SIGKILL);
          ::waitpid(target.pid(), nullptr, 0);
        }
      });
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("pid " + std::to_string(target.pid()) +
                         " exited while being read; nothing collapsed"),
            std::string::npos)
      << run.err;
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
  // Shares of what is resident: all of it huge after, none before (not 15/16 of the range).
  EXPECT_DOUBLE_EQ(range.at("huge_fraction_before").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(range.at("huge_fraction_after").get<double>(), 1.0);
  EXPECT_EQ(json.at("remaining_bytes"), 0);
  EXPECT_TRUE(json.at("stopped_by").is_null());
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

// Every other page populated and --max-bytes stopping the run after two chunks: what remains is
// the base-page memory of the 14 chunks left (14 MiB), not their 28 MiB of address range; the
// bound that covers the rest counts the address range, which --max-bytes does.
TEST(DoctorCollapse, RemainingCountsResidentBytesOfSparseMemory) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("process_madvise(MADV_COLLAPSE) needs root");
  Target target(2 * 4096);
  ASSERT_GT(target.pid(), 0);
  const run_result run = doctor("--pid " + std::to_string(target.pid()) +
                                " --collapse --budget-ms 5000 --max-bytes 4194304 --json");
  EXPECT_EQ(run.status, 0) << run.err;
  const nlohmann::json json = nlohmann::json::parse(run.out);
  const nlohmann::json range = range_at(json, target.address());
  ASSERT_FALSE(range.is_null()) << run.out;
  ASSERT_EQ(range.at("collapsed_bytes"), 2 * kHuge) << run.out;
  EXPECT_EQ(json.at("stopped_by"), "--max-bytes");
  // The other ranges (the target's heap and stack) were never reached: all of theirs remains.
  const std::size_t others = json.at("expected_gain_bytes").get<std::size_t>() - kLength / 2;
  EXPECT_EQ(json.at("remaining_bytes").get<std::size_t>(), others + (kLength - 2 * kHuge) / 2)
      << run.out;
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

}  // namespace
