// tools/doctor/render_collapse.cpp - a collapse run in words: the table, the JSON and why nothing
// collapsed (render_collapse.hpp).
#include "render_collapse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "collapse_command.hpp"
#include "format.hpp"
#include "json.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {
const std::string budget_spent =
    "the budget (--budget-ms, --max-bytes) ran out before a chunk collapsed";

// Whether the budget left a candidate range, or chunks of one, untried (and no error stopped
// the run).
bool budget_cut(const collapse_report& report) {
  if (report.fatal) return false;
  return std::any_of(report.rows.begin(), report.rows.end(), [](const collapse_row& row) {
    return row.blocked.empty() && (!row.attempted || row.left != 0);
  });
}
}  // namespace

std::string go_on(const collapse_report& report) {
  if (report.dry_run || report.remaining == 0 || report.stopped_by.empty()) return {};
  const std::string stopped = fmt::format(
      "Stopped at {} {}: {} on base pages in whole 2 MiB chunks was not tried. Run again to go on, "
      "or raise the bound",
      report.stopped_by,
      report.stopped_by == "--max-bytes" ? std::to_string(report.max_bytes)
                                         : std::to_string(report.budget.count()),
      format_bytes(report.remaining));
  // The bounds count chunks of address range, collapsed or not: what is left of them is what
  // the rest needs, however little of it is resident.
  const double left = static_cast<double>(report.remaining_range);
  if (report.stopped_by == "--max-bytes") {
    return fmt::format("{} (--max-bytes {} would cover the rest).", stopped,
                       report.max_bytes + report.remaining_range);
  }
  if (report.collapsed == 0) {
    // No chunk collapsed within the budget: no rate to size a budget from.
    return stopped + ": no chunk collapsed within it, so this run gives no rate to size it from.";
  }
  // At this run's rate, rounded up to whole seconds.
  const double ms = static_cast<double>(report.budget.count());
  const double needed =
      ms * (static_cast<double>(report.collapsed) + left) / static_cast<double>(report.collapsed);
  const auto rounded = static_cast<long long>(std::ceil(needed / 1000.0) * 1000.0);
  return fmt::format("{} (--budget-ms {} would cover the rest at this run's rate).", stopped,
                     std::max<long long>(rounded, report.budget.count() + 1));
}

std::string nothing_collapsed(const collapse_report& report) {
  if (report.expected_gain + report.blocked == 0) return {};  // nothing on base pages to raise
  if (report.dry_run ? report.expected_gain != 0 : report.collapsed != 0) return {};
  std::string why;
  for (const std::string& e : report.blocked_why) why += (why.empty() ? "" : " ") + e;
  if (!report.dry_run) {
    for (const std::string& e : report.explanations) why += (why.empty() ? "" : " ") + e;
    if (budget_cut(report)) why += (why.empty() ? "" : " ") + budget_spent;
  }
  return why;
}

std::string render_collapse(const collapse_report& report) {
  std::size_t candidates = 0;
  for (const collapse_row& row : report.rows) candidates += row.blocked.empty() ? 1 : 0;
  std::string out = fmt::format(
      "{} pid {}: {} candidate range(s), {} resident on base pages in whole 2 MiB chunks; "
      "filling partly populated chunks adds {}\n",
      report.dry_run ? "Would collapse (dry run, nothing changed) in" : "Collapse in", report.pid,
      candidates, format_bytes(report.expected_gain), format_bytes(report.growth));
  if (candidates != report.rows.size()) {
    out += fmt::format("{} range(s) with {} on base pages cannot collapse: 0 expected gain\n",
                       report.rows.size() - candidates, format_bytes(report.blocked));
  }
  out += fmt::format("  {:<33} {:>10} {:>10} {:>8} {:>8} {:>10} {:>9}  {}\n", "range", "gain",
                     "+memory", "before", "after", "collapsed", "ms", "mapping");
  for (const collapse_row& row : report.rows) {
    out += fmt::format(
        "  {:#014x}-{:#014x} {:>10} {:>10} {:>7.1f}% {:>7} {:>10} {:>9}  {}\n", row.start, row.end,
        format_bytes(row.resident_base), row.growth ? format_bytes(*row.growth) : "?",
        100 * row.before, row.attempted ? fmt::format("{:.1f}%", 100 * row.after) : "-",
        row.attempted ? format_bytes(row.collapsed) : "-",
        row.attempted ? fmt::format("{:.2f}", row.ms) : "-",
        // The mapping's name is the target's text: escaped, never put into a command.
        row.blocked.empty()
            ? printable(row.name)
            : printable(row.name) + " (cannot collapse: " + blocked_label(row.blocked) + ")");
  }
  if (!report.dry_run) out += fmt::format("Collapsed {}.\n", format_bytes(report.collapsed));
  if (const std::string more = go_on(report); !more.empty()) out += more + "\n";
  for (const std::string& e : report.blocked_why) out += "Cannot collapse: " + e + "\n";
  for (const std::string& e : report.explanations) out += "Refused: " + e + "\n";
  if (const std::string why = nothing_collapsed(report); !why.empty()) {
    // The lines above give the blocked ranges and refusals; a budget spent is said here.
    const bool budget = !report.dry_run && budget_cut(report);
    out += fmt::format("{} (exit status 1){}\n",
                       report.dry_run ? "Nothing can be collapsed" : "Nothing collapsed",
                       budget ? ": " + budget_spent + "." : ".");
  }
  return out;
}

std::string json_collapse(const collapse_report& report) {
  json ranges = json::array();
  for (const collapse_row& row : report.rows) {
    json refusals = json::array();
    for (const auto& [error, chunks] : row.refusals) {
      refusals.push(json::object().set("errno", error).set("chunks", chunks));
    }
    ranges.push(json::object()
                    .set("start", row.start)
                    .set("end", row.end)
                    .set("mapping", row.name)
                    .set("expected_gain_bytes", row.resident_base)
                    .set("base_bytes", row.on_base)
                    .set("blocked", row.blocked.empty() ? json() : json(row.blocked))
                    .set("growth_bytes", row.growth)
                    .set("huge_fraction_before", row.before)
                    .set("huge_fraction_after", row.attempted ? json(row.after) : json())
                    .set("attempted", row.attempted)
                    .set("collapsed_bytes", row.collapsed)
                    .set("refused_bytes", row.refused)
                    .set("left_bytes", row.left)
                    .set("milliseconds", row.ms)
                    .set("passes", row.passes)
                    .set("refusals", refusals));
  }
  json explanations = json::array();
  for (const std::string& e : report.explanations) explanations.push(e);
  const std::string why = nothing_collapsed(report);
  return json::object()
      .set("schema", json_schema)
      .set("mode", "collapse")
      .set("pid", static_cast<std::int64_t>(report.pid))
      .set("dry_run", report.dry_run)
      .set("expected_gain_bytes", report.expected_gain)
      .set("growth_bytes", report.growth)
      .set("collapsed_bytes", report.collapsed)
      .set("blocked_bytes", report.blocked)
      .set("nothing_collapsed", why.empty() ? json() : json(why))
      .set("remaining_bytes", report.remaining)
      .set("stopped_by", report.stopped_by.empty() ? json() : json(report.stopped_by))
      .set("go_on", go_on(report).empty() ? json() : json(go_on(report)))
      .set("ranges", ranges)
      .set("refusals_explained", explanations)
      .dump();
}

}  // namespace hugepage::doctor
