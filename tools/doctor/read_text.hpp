// tools/doctor/read_text.hpp - the doctor's one reader of a whole file and its one number parser
// (read_text.cpp), both the library's.
//
// The kernel files the library has readers and parsers for (buddyinfo, zoneinfo, vmstat,
// meminfo, status, smaps_rollup, mountinfo, hugetlb cgroup limits: hugepage/kernel_memory.hpp,
// kernel_counters.hpp, kernel_files.hpp, cgroup.hpp) are read through them; the other whole files
// the doctor reads (a memory cgroup's files, dpkg's status and file lists, a node's cpulist,
// uid_map) go through read_text(). It takes a root directory ("" for the live system), so tests
// feed a fake tree; a file that cannot be read is an empty optional, never a made-up zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace hugepage::doctor {

/// A decimal number at the start of `text` (leading blanks skipped, the rest ignored); nullopt
/// when there is none or it overflows. The doctor's one number parser: the library's.
std::optional<std::uint64_t> parse_number(std::string_view text);

/// Reads root + path; std::nullopt when it cannot be read (`ec` gets why, when given). The
/// doctor's one reader of a whole file: the library reads the facts it has readers for.
std::optional<std::string> read_text(const std::string& root, const std::string& path,
                                     std::error_code* ec = nullptr);

}  // namespace hugepage::doctor
