// tools/doctor/runtime_go.hpp - recognising a Go program, which links its runtime into the
// executable (no library names it), by where its heap lies, and its GODEBUG.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hugepage/smaps.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

/// Where `r` recognised nothing and `mappings` hold an anonymous rw-p mapping at 0xc000000000
/// (the first heap arena the Go runtime asks for on 64-bit Linux), `r` becomes kind "go", with
/// GODEBUG from `settings` among its settings. Pure.
void detect_go(runtime_report& r, const std::vector<mapping_info>& mappings,
               const std::vector<std::pair<std::string, std::string>>& settings);

/// Whether GODEBUG `value` turns THP off for the Go heap (disablethp=1, the last entry wins).
bool godebug_disables_thp(const std::string& value);

}  // namespace hugepage::doctor
