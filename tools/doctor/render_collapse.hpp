// tools/doctor/render_collapse.hpp - a collapse run (collapse_command.hpp) in words: the table,
// the JSON, and why nothing collapsed (render_collapse.cpp).
#pragma once

#include <string>

#include "collapse_command.hpp"

namespace hugepage::doctor {

/// Why nothing was (or, in a dry run, would be) collapsed although the process has memory on
/// base pages that a collapse could raise: the blocked reasons and refusals; "" when something
/// was collapsed or there was nothing to collapse. The doctor exits 1 when it is not "".
std::string nothing_collapsed(const collapse_report& report);

/// Where a bound (--budget-ms, --max-bytes) stopped a run with candidate memory untried: how
/// much remains, and the flag to raise (with a value that would cover the rest at the run's
/// rate) or to run again; "" otherwise.
std::string go_on(const collapse_report& report);

/// The report as a table.
std::string render_collapse(const collapse_report& report);

/// The report as JSON (schema json_schema, mode "collapse"; see tools/README.md).
std::string json_collapse(const collapse_report& report);

}  // namespace hugepage::doctor
