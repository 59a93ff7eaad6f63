// tools/doctor/proc_text.hpp - parsers for the process files the library does not read itself.
//
// The kernel files both read (buddyinfo, zoneinfo, vmstat, meminfo, status, smaps_rollup,
// mountinfo, cgroup limits) have the library's parsers and readers (hugepage/kernel_memory.hpp,
// kernel_counters.hpp, kernel_files.hpp, cgroup.hpp). What is left here, doctor-only:
//   /proc/<pid>/status           a text field ("Name"); its numbers are parse_status()'s
//   /proc/<pid>/environ          allocator settings (MALLOC_CONF, GLIBC_TUNABLES, ...)
//   /proc/<pid>/maps             mapped libraries: which malloc the process runs
//   /proc/<pid>/numa_maps        the pages of each NUMA node
//   /proc/<pid>/cgroup           where the process sits for hugetlb (v2 path, v1 hugetlb path)
// and the doctor's one number parser, whole-file reader and NUMA node list.
// Every parser takes the text, so tests feed stored samples; read_text() takes a root directory
// ("" for the live system), so tests feed a fake tree. Unknown fields and malformed lines are
// skipped; a file that cannot be read is an empty optional, never a made-up zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/kernel_memory.hpp"

namespace hugepage::doctor {

// ---- status ------------------------------------------------------------------------------------

/// A text field of /proc/<pid>/status ("Name"): parse_status() (hugepage/kernel_counters.hpp).
/// buddyinfo, vmstat, meminfo and status numbers are the library's parse_buddyinfo(),
/// parse_vmstat(), parse_meminfo() (kernel_memory.hpp, kernel_counters.hpp).
std::optional<std::string> status_text_field(std::string_view text, std::string_view key);

// ---- environ, maps -----------------------------------------------------------------------------

/// Splits /proc/<pid>/environ (NUL-separated NAME=value) and keeps the variables that configure
/// an allocator's use of huge pages: MALLOC_CONF, _RJEM_MALLOC_CONF, GLIBC_TUNABLES, MIMALLOC_*,
/// TCMALLOC_*, LD_PRELOAD, JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, _JAVA_OPTIONS, and numpy's
/// NUMPY_MADVISE_HUGEPAGE. In the order found. GLIBC_TUNABLES is put back whole from the
/// fragments glibc before 2.39 leaves after it (it splits the value at each ':' in place).
std::vector<std::pair<std::string, std::string>> parse_allocator_environ(std::string_view text);

/// True when /proc/<pid>/environ text is not NAME=value pairs: the process wrote its title over
/// its environment (Redis, PostgreSQL), so its settings cannot be read from it.
bool environ_overwritten(std::string_view text);

/// The last component of `path` ("/usr/lib/x86_64-linux-gnu/libc.so.6" -> "libc.so.6").
std::string_view base_name(std::string_view path);

/// The paths named in /proc/<pid>/maps text (each once, in order of first appearance).
std::vector<std::string> parse_maps_paths(std::string_view text);

/// The malloc a process runs, judged from its mapped libraries.
struct allocator_guess {
  allocator_guess() = default;
  allocator_guess(std::string name_, std::string library_ = "",  // NOLINT: brace lists in tests
                  std::string version_ = "")
      : name(std::move(name_)), library(std::move(library_)), version(std::move(version_)) {}

  std::string name;     ///< "jemalloc", "tcmalloc", "mimalloc", "glibc", or "unknown"
  std::string library;  ///< the mapped file it was recognised by ("" when none)
  /// The version its file name gives ("2.0" from libmimalloc.so.2.0, "2.31" from libc-2.31.so);
  /// "" when the name does not say. collect_process() may fill it in from other evidence.
  std::string version;
  std::string package;  ///< the Debian package that owns `library`, with its version, or ""
};

/// Recognises libjemalloc, libtcmalloc(_minimal), libmimalloc and glibc's libc among `paths`. An
/// allocator linked statically into the executable is not visible here and reads as glibc.
allocator_guess detect_allocator(const std::vector<std::string>& paths);

// ---- numa_maps ---------------------------------------------------------------------------------

/// A process's resident memory on one NUMA node (/proc/<pid>/numa_maps). Bytes.
struct numa_usage {
  std::uint64_t bytes = 0;          ///< all pages on the node
  std::uint64_t hugetlb_bytes = 0;  ///< of which hugetlb pages (kernelpagesize_kB above 4 KiB)
};

/// Parses /proc/<pid>/numa_maps: "N<node>=<pages>" per mapping, times its kernelpagesize_kB.
/// (THP pages count as base pages there: the file cannot tell them apart.)
std::map<int, numa_usage> parse_numa_maps(std::string_view text);

/// The same per mapping: its start address -> node -> bytes.
std::map<std::uintptr_t, std::map<int, std::uint64_t>> parse_numa_maps_by_mapping(
    std::string_view text);

/// Parses a kernel list of numbers ("0-3,8,10-11", as Cpus_allowed_list and cpulist write them),
/// ascending, each once; an item that is not a number or range is skipped.
std::vector<int> parse_id_list(std::string_view text);

// ---- cgroups -----------------------------------------------------------------------------------

/// Where a process sits in the cgroup hierarchies (/proc/<pid>/cgroup).
struct cgroup_membership {
  std::optional<std::string> unified;  ///< v2 path ("0::/system.slice/x.service")
  std::optional<std::string> hugetlb;  ///< v1 path of the hugetlb controller
};

/// Where /proc/<pid>/cgroup text puts a process for hugetlb (parse_proc_cgroup() and
/// cgroup_paths_of(), kernel_files.hpp).
cgroup_membership parse_cgroup_file(std::string_view text);

// ---- reading -----------------------------------------------------------------------------------

/// A decimal number at the start of `text` (leading blanks skipped, the rest ignored); nullopt
/// when there is none or it overflows. The doctor's one number parser: the library's.
std::optional<std::uint64_t> parse_number(std::string_view text);

/// Reads root + path; std::nullopt when it cannot be read (`ec` gets why, when given). The
/// doctor's one reader of a whole file: the library reads the facts it has readers for.
std::optional<std::string> read_text(const std::string& root, const std::string& path,
                                     std::error_code* ec = nullptr);

/// Lists the NUMA nodes under root/sys/devices/system/node (ascending); empty when there is none.
std::vector<int> numa_nodes(const std::string& root);

}  // namespace hugepage::doctor
