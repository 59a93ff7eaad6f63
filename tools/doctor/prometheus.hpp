// tools/doctor/prometheus.hpp - the reports in the Prometheus text format (prometheus.cpp).
#pragma once

#include <string>
#include <vector>

#include "advice.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

/// The same reports in the Prometheus text format (node_exporter textfile collector); metric
/// names in tools/README.md.
std::string prometheus_system(const system_report& system, const std::vector<advice>& advice);

std::string prometheus_process(const process_report& process, const system_report& system,
                               const std::vector<advice>& advice);

std::string prometheus_probe(const probe_report& probe);

}  // namespace hugepage::doctor
