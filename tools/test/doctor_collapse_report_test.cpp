// doctor_collapse_report_test.cpp - why a --collapse run exits 1, from hand-made reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "collapse_command.hpp"
#include "render_collapse.hpp"

namespace {

using hugepage::doctor::collapse_report;
using hugepage::doctor::collapse_row;
using hugepage::doctor::explain_refusal;
using hugepage::doctor::nothing_collapsed;
using hugepage::doctor::render_collapse;

constexpr std::size_t chunk = std::size_t{2} << 20;
const std::string budget = "the budget (--budget-ms, --max-bytes) ran out before a chunk collapsed";

// One range of three chunks on base pages, its first chunk busy and refused, the other two left
// untried (`left` chunks) or not.
collapse_report busy_range(std::size_t left) {
  collapse_report r;
  r.pid = 42;
  collapse_row row;
  row.start = 0x7f0000000000;
  row.end = row.start + 3 * chunk;
  row.name = "[anon]";
  row.on_base = row.resident_base = 3 * chunk;
  row.attempted = true;
  row.passes = 1;
  row.refused = chunk;
  row.left = left * chunk;
  row.refusals = {{EAGAIN, 1}};
  r.rows = {row};
  r.expected_gain = 3 * chunk;
  r.explanations = {explain_refusal(EAGAIN, 42)};
  return r;
}

// A busy chunk refused and the rest cut off by the byte budget: both are the reason.
TEST(DoctorCollapseReport, ARefusalAndABudgetCutAreBothTheReason) {
  const collapse_report r = busy_range(2);
  const std::string why = nothing_collapsed(r);
  EXPECT_EQ(why, explain_refusal(EAGAIN, 42) + " " + budget);
  EXPECT_NE(render_collapse(r).find("Nothing collapsed (exit status 1): " + budget + ".\n"),
            std::string::npos)
      << render_collapse(r);
}

// Every chunk tried: the refusal alone, said in its Refused line.
TEST(DoctorCollapseReport, ARefusalAloneIsTheReason) {
  collapse_report r = busy_range(0);
  r.rows[0].refused = 3 * chunk;
  r.rows[0].refusals = {{EAGAIN, 3}};
  EXPECT_EQ(nothing_collapsed(r), explain_refusal(EAGAIN, 42));
  const std::string table = render_collapse(r);
  EXPECT_NE(table.find("Refused: " + explain_refusal(EAGAIN, 42) + "\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Nothing collapsed (exit status 1).\n"), std::string::npos) << table;
}

// A range never reached: the budget.
TEST(DoctorCollapseReport, ARangeNeverReachedIsTheBudget) {
  collapse_report r = busy_range(0);
  r.rows[0].attempted = false;
  r.rows[0].refusals.clear();
  r.rows[0].refused = 0;
  r.rows[0].left = 3 * chunk;
  r.explanations.clear();
  EXPECT_EQ(nothing_collapsed(r), budget);
}

// EBUSY is a cgroup at its limit, named by the version in use, and no transient refusal.
TEST(DoctorCollapseReport, ACgroupAtItsLimitNamesItsVersionsFile) {
  using hugepage::doctor::memory_limit_file;
  EXPECT_EQ(memory_limit_file("0::/system.slice/x.service\n"), "memory.max (cgroup v2)");
  EXPECT_EQ(memory_limit_file("12:cpu,cpuacct:/a\n4:memory:/docker/abc\n0::/\n"),
            "memory.limit_in_bytes (cgroup v1)");
  EXPECT_EQ(memory_limit_file("3:blkio,memory:/x\n"), "memory.limit_in_bytes (cgroup v1)");
  EXPECT_EQ(memory_limit_file("5:memory_recursive_prot:/x\n0::/x\n"), "memory.max (cgroup v2)");
  const std::string busy = explain_refusal(EBUSY, ::getpid());
  EXPECT_EQ(busy.find("transient"), std::string::npos) << busy;
  EXPECT_NE(busy.find("at its limit (memory."), std::string::npos) << busy;
}

// A run stopped by its time budget after collapsing two of eight chunks: what remains, and a
// budget that covers it at the run's rate (1000 ms for 4 MiB: 4000 ms for 16 MiB).
TEST(DoctorCollapseReport, ARunStoppedByItsBudgetSaysWhatRemainsAndHowToGoOn) {
  collapse_report r = busy_range(0);
  r.rows[0].refusals.clear();
  r.rows[0].refused = 0;
  r.rows[0].collapsed = 2 * chunk;
  r.rows[0].left = chunk;
  collapse_row untried = r.rows[0];
  untried.start = r.rows[0].end;
  untried.end = untried.start + 5 * chunk;
  untried.attempted = false;
  untried.collapsed = 0;
  untried.resident_base = 5 * chunk;
  r.rows.push_back(untried);
  r.explanations.clear();
  r.collapsed = 2 * chunk;
  r.remaining = 6 * chunk;
  r.remaining_range = 6 * chunk;
  r.stopped_by = "--budget-ms";
  r.budget = std::chrono::milliseconds(1000);
  EXPECT_EQ(hugepage::doctor::go_on(r),
            "Stopped at --budget-ms 1000: 12 MiB on base pages in whole 2 MiB chunks was not "
            "tried. Run again to go on, or raise the bound (--budget-ms 4000 would cover the rest "
            "at this run's rate).");
  EXPECT_NE(render_collapse(r).find("Collapsed 4 MiB.\n" + hugepage::doctor::go_on(r) + "\n"),
            std::string::npos)
      << render_collapse(r);
  EXPECT_EQ(nothing_collapsed(r), "");
  r.dry_run = true;
  EXPECT_EQ(hugepage::doctor::go_on(r), "");
}

// Stopped by the budget before any chunk collapsed: no rate, so no budget presented as covering
// the rest (twice this one, or the default, need not).
TEST(DoctorCollapseReport, ABudgetThatCollapsedNothingGivesNoRate) {
  collapse_report r = busy_range(0);
  r.rows[0].refusals.clear();
  r.rows[0].refused = 0;
  r.rows[0].attempted = false;
  r.explanations.clear();
  r.collapsed = 0;
  r.remaining = 8 * chunk;
  r.remaining_range = 8 * chunk;
  r.stopped_by = "--budget-ms";
  r.budget = std::chrono::milliseconds(30);
  EXPECT_EQ(hugepage::doctor::go_on(r),
            "Stopped at --budget-ms 30: 16 MiB on base pages in whole 2 MiB chunks was not tried. "
            "Run again to go on, or raise the bound: no chunk collapsed within it, so this run "
            "gives no rate to size it from.");
}

// Stopped by --max-bytes on sparse memory: 6 MiB resident on base pages in 12 MiB of chunks; the
// bound counts chunks, so the one that covers the rest adds their address range.
TEST(DoctorCollapseReport, MaxBytesCoversTheRestsAddressRange) {
  collapse_report r = busy_range(0);
  r.explanations.clear();
  r.collapsed = 2 * chunk;
  r.remaining = 3 * chunk;
  r.remaining_range = 6 * chunk;
  r.stopped_by = "--max-bytes";
  r.max_bytes = 2 * chunk;
  EXPECT_EQ(hugepage::doctor::go_on(r),
            "Stopped at --max-bytes 4194304: 6 MiB on base pages in whole 2 MiB chunks was not "
            "tried. Run again to go on, or raise the bound (--max-bytes 16777216 would cover the "
            "rest).");
}

}  // namespace
