// tools/doctor/render_json.hpp - the reports as JSON, schema in tools/README.md (render_json.cpp).
#pragma once

#include <string>
#include <vector>

#include "advice.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

std::string json_system(const system_report& system, const std::vector<advice>& advice);

std::string json_process(const process_report& process, const system_report& system,
                         const std::vector<advice>& advice);

std::string json_probe(const probe_report& probe);

/// The catalog of rules (--list-rules --json): mode "rules", a "rules" array of {id, level,
/// what}.
std::string json_rules();

}  // namespace hugepage::doctor
