// Tests for perf_counters.hpp: the plumbing with a software event (page faults of a known number
// of touched pages), the unavailable path of the hardware events, and a seccomp-blocked child.
//
// HUGEPAGE_REQUIRE_PMU=1 turns missing hardware counters into failures (run it on real hardware).
#include "hugepage/perf_counters.hpp"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support.hpp"

namespace {

using hugepage::perf_counters;
using hugepage::perf_event;
using hugepage::perf_event_count;
using hugepage::perf_reading;

bool pmu_required() {
  const char* value = std::getenv("HUGEPAGE_REQUIRE_PMU");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

constexpr perf_event hardware_events[] = {perf_event::dtlb_loads, perf_event::dtlb_load_misses,
                                          perf_event::itlb_load_misses, perf_event::cycles,
                                          perf_event::instructions};

// Maps `pages` fresh base pages that may not become huge pages (so each write faults once).
struct base_pages {
  explicit base_pages(std::size_t pages) : length(pages * hugepage::os::base_page_size()) {
    p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
    if (p != nullptr) ::madvise(p, length, MADV_NOHUGEPAGE);
  }
  ~base_pages() {
    if (p != nullptr) ::munmap(p, length);
  }
  base_pages(const base_pages&) = delete;
  base_pages& operator=(const base_pages&) = delete;

  void touch_all() const {
    auto* bytes = static_cast<volatile unsigned char*>(p);
    for (std::size_t at = 0; at < length; at += hugepage::os::base_page_size()) bytes[at] = 1;
  }

  std::size_t length;
  void* p = nullptr;
};

bool mentions_errno(const std::string& reason) {
  for (const char* name : {"ENOENT", "EACCES", "EPERM", "ENOSYS", "EOPNOTSUPP", "EINVAL", "ENODEV",
                           "EMFILE", "ENFILE", "errno "}) {
    if (reason.find(name) != std::string::npos) return true;
  }
  return false;
}

TEST(PerfCounters, NamesAreDistinctAndHonest) {
  for (std::size_t i = 0; i < perf_event_count; ++i) {
    const auto e = static_cast<perf_event>(i);
    EXPECT_STRNE(hugepage::name_of(e), "unknown");
    for (std::size_t j = i + 1; j < perf_event_count; ++j) {
      EXPECT_STRNE(hugepage::name_of(e), hugepage::name_of(static_cast<perf_event>(j)));
    }
  }
  EXPECT_NE(std::string(hugepage::name_of(perf_event::dtlb_load_misses)).find("page walks"),
            std::string::npos);
}

TEST(PerfCounters, PageFaultsCountTouchedPages) {
  perf_counters counters({perf_event::page_faults});
  if (!counters.available(perf_event::page_faults)) {
    HUGEPAGE_SKIP_OR_FAIL("page-fault software event unavailable: " +
                          counters.unavailable_reason(perf_event::page_faults));
  }
  EXPECT_EQ(counters.unavailable_reason(perf_event::page_faults), "");
  constexpr std::size_t pages = 512;
  const base_pages region(pages);
  ASSERT_NE(region.p, nullptr);

  counters.start();
  region.touch_all();
  const perf_reading reading = counters.stop();

  const auto faults = reading[perf_event::page_faults];
  ASSERT_TRUE(faults.has_value());
  EXPECT_GE(*faults, static_cast<double>(pages));
  EXPECT_LE(*faults, static_cast<double>(pages) + 64) << "far more faults than pages touched";
  EXPECT_GT(reading.time_enabled_ns, 0.0);
  EXPECT_GT(reading.time_running_ns, 0.0);
  // operator[] and values agree.
  EXPECT_EQ(reading.values[static_cast<std::size_t>(perf_event::page_faults)], faults);
}

TEST(PerfCounters, RestartCountsOnlyTheNewInterval) {
  perf_counters counters({perf_event::page_faults});
  if (!counters.available(perf_event::page_faults)) {
    HUGEPAGE_SKIP_OR_FAIL(counters.unavailable_reason(perf_event::page_faults));
  }
  const base_pages first(256);
  ASSERT_NE(first.p, nullptr);
  counters.start();
  first.touch_all();
  const auto a = counters.stop()[perf_event::page_faults];

  counters.start();
  first.touch_all();  // already resident: no new faults
  const auto b = counters.stop()[perf_event::page_faults];
  ASSERT_TRUE(a && b);
  EXPECT_GE(*a, 256.0);
  EXPECT_LT(*b, 16.0) << "reset between intervals did not happen";
}

TEST(PerfCounters, UnrequestedEventsAreUnavailable) {
  const perf_counters counters({perf_event::page_faults});
  for (const perf_event e : hardware_events) {
    EXPECT_FALSE(counters.available(e));
    EXPECT_EQ(counters.unavailable_reason(e), "not requested");
  }
  EXPECT_FALSE(counters.any_hardware());
}

TEST(PerfCounters, HardwareEventsAreCountedOrExplained) {
  perf_counters counters;
  counters.start();
  volatile std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) sum = sum + i;
  const perf_reading reading = counters.stop();

  bool any = false;
  for (const perf_event e : hardware_events) {
    SCOPED_TRACE(hugepage::name_of(e));
    if (counters.available(e)) {
      any = true;
      EXPECT_EQ(counters.unavailable_reason(e), "");
      EXPECT_TRUE(reading[e].has_value()) << "available, but the group was never scheduled";
      continue;
    }
    if (pmu_required()) {
      ADD_FAILURE() << "HUGEPAGE_REQUIRE_PMU=1, but unavailable: "
                    << counters.unavailable_reason(e);
    }
    const std::string& reason = counters.unavailable_reason(e);
    EXPECT_FALSE(reason.empty());
    EXPECT_TRUE(mentions_errno(reason)) << reason;
    EXPECT_FALSE(reading[e].has_value()) << "an unavailable counter must read empty, not zero";
  }
  EXPECT_EQ(counters.any_hardware(), any);
  if (pmu_required()) {
    EXPECT_TRUE(reading[perf_event::cycles].has_value());
    EXPECT_GT(reading[perf_event::instructions].value_or(0), 100000.0);
  }
}

TEST(PerfCounters, NoPmuSaysSo) {
  const perf_counters counters({perf_event::cycles});
  if (counters.available(perf_event::cycles)) {
    GTEST_SKIP() << "this machine has a PMU: the no-PMU path cannot be seen here";
  }
  const std::string& reason = counters.unavailable_reason(perf_event::cycles);
  // The reasons name their cause; this VM has no PMU (ENOENT), a container may block the call.
  const bool explained = reason.find("no hardware PMU") != std::string::npos ||
                         reason.find("not supported") != std::string::npos ||
                         reason.find("paranoid") != std::string::npos ||
                         reason.find("seccomp") != std::string::npos ||
                         reason.find("permission") != std::string::npos;
  EXPECT_TRUE(explained) << reason;
}

TEST(PerfCounters, MoveKeepsTheCounters) {
  perf_counters counters({perf_event::page_faults});
  if (!counters.available(perf_event::page_faults)) {
    HUGEPAGE_SKIP_OR_FAIL(counters.unavailable_reason(perf_event::page_faults));
  }
  perf_counters moved(std::move(counters));
  EXPECT_TRUE(moved.available(perf_event::page_faults));
  const base_pages region(64);
  ASSERT_NE(region.p, nullptr);
  moved.start();
  region.touch_all();
  EXPECT_GE(moved.stop()[perf_event::page_faults].value_or(0), 64.0);
}

TEST(PerfCounters, SeccompBlockedIsUnavailableWithReason) {
#if !defined(__x86_64__) && !defined(__aarch64__)
  GTEST_SKIP() << "the test's seccomp filter knows only x86-64 and arm64";
#endif
  const int code = hugepage::test::run_in_child([] {
    if (!hugepage::test::fail_syscall(SYS_perf_event_open, EACCES)) {
      std::fprintf(stderr, "cannot install the seccomp filter: %s\n", std::strerror(errno));
      return 10;
    }
    perf_counters counters;
    int failures = 0;
    for (std::size_t i = 0; i < perf_event_count; ++i) {
      const auto e = static_cast<perf_event>(i);
      const std::string& reason = counters.unavailable_reason(e);
      if (counters.available(e)) {
        std::fprintf(stderr, "%s opened through the filter\n", hugepage::name_of(e));
        ++failures;
      } else if (reason.find("seccomp") == std::string::npos ||
                 reason.find("EACCES") == std::string::npos) {
        std::fprintf(stderr, "%s: reason lacks seccomp/EACCES: %s\n", hugepage::name_of(e),
                     reason.c_str());
        ++failures;
      }
    }
    if (counters.any_hardware()) ++failures;
    counters.start();
    const perf_reading reading = counters.stop();
    for (const auto& value : reading.values) {
      if (value.has_value()) ++failures;  // unavailable reads empty, never zero
    }
    return failures == 0 ? 0 : 20;
  });
  EXPECT_EQ(code, 0) << "see the child's messages above";
}

}  // namespace
