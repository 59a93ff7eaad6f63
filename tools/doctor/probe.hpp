// tools/doctor/probe.hpp - the TLB probe: ns per access on base and huge pages (probe.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hugepage::doctor {

/// One working set of the TLB probe.
struct probe_row {
  std::size_t working_set = 0;
  std::uint64_t accesses = 0;        ///< dependent loads timed, per backing
  double base_ns = 0;                ///< ns per access on base pages
  double huge_ns = 0;                ///< ns per access on huge pages
  double base_huge_fraction = 0;     ///< backing_of coverage of the base-page buffer
  double huge_huge_fraction = 0;     ///< ... of the huge-page buffer
  std::optional<double> base_walks;  ///< dTLB load misses per access, where a PMU exists
  std::optional<double> huge_walks;
  std::string error;  ///< non-empty: this row could not run
  std::string note;   ///< non-empty: why the working set differs from the one asked for
  double ratio() const noexcept { return huge_ns > 0 ? base_ns / huge_ns : 0.0; }
};

/// The TLB probe's result.
struct probe_report {
  std::vector<probe_row> rows;
  bool counters = false;
  std::string counters_reason;
  std::string huge_method;  ///< how the huge buffer was obtained
  double seconds = 0;
};

/// Runs the probe over `working_sets` (bytes). Takes a few seconds.
probe_report run_probe(const std::vector<std::size_t>& working_sets);

}  // namespace hugepage::doctor
