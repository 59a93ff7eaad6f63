// tools/doctor/status_fields.hpp - the text fields of /proc/<pid>/status (status_fields.cpp).
//
// The library parses status whole (parse_status(), hugepage/kernel_counters.hpp) and gives its
// numbers; the doctor reads a few fields as text through it: the process's "Name", and the
// "Cpus_allowed_list" and "Mems_allowed_list" its NUMA view splits with parse_id_list()
// (numa_files.hpp). The parser takes the text, so tests feed stored samples; a field that is not
// there is an empty optional.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hugepage::doctor {

/// A text field of /proc/<pid>/status ("Name"): parse_status() (hugepage/kernel_counters.hpp).
/// buddyinfo, vmstat, meminfo and status numbers are the library's parse_buddyinfo(),
/// parse_vmstat(), parse_meminfo() (kernel_memory.hpp, kernel_counters.hpp).
std::optional<std::string> status_text_field(std::string_view text, std::string_view key);

}  // namespace hugepage::doctor
