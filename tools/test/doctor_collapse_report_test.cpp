// doctor_collapse_report_test.cpp - why a --collapse run exits 1, from hand-made reports.
#include <gtest/gtest.h>

#include <cerrno>
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

}  // namespace
