// tools/doctor/render_table.hpp - the reports as human tables (render_table.cpp).
#pragma once

#include <string>
#include <vector>

#include "advice.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

std::string render_system(const system_report& system, const std::vector<advice>& advice);

std::string render_process(const process_report& process, const system_report& system,
                           const std::vector<advice>& advice);

std::string render_probe(const probe_report& probe);

/// The catalog of rules (--list-rules): a line per rule, its id, level and what it finds.
std::string render_rules();

}  // namespace hugepage::doctor
