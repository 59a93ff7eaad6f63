// tools/doctor/report.hpp - what hugepage-doctor collects, the advice it derives, how it prints.
//
// Three reports, one per mode: system_report (no arguments), process_report (--pid), probe_report
// (--probe). Collection reads the machine through the library (system.hpp, smaps.hpp, backing.hpp,
// perf_counters.hpp) and the parsers of proc_text.hpp; advice is a pure function of a report, so
// tests build a report by hand and check each rule; rendering turns a report into a human table
// (fmt) or JSON (schema in tools/README.md). Nothing here prints before the whole report is built,
// so an error never leaves half a JSON document on stdout.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "proc_text.hpp"

namespace hugepage::doctor {

/// One piece of advice: what is wrong, and the command that fixes it.
struct advice {
  std::string id;       ///< stable identifier ("thp_never", "max_ptes_none_bloat", ...)
  std::string message;  ///< one sentence
  std::string command;  ///< the shell command (or environment) that applies it
};

// ---- system ------------------------------------------------------------------------------------

/// Free memory and the part of it in blocks large enough for a huge page, in one zone.
struct zone_readiness {
  int node = 0;
  std::string zone;
  std::uint64_t free_bytes = 0;
  std::uint64_t huge_ready_bytes = 0;  ///< free bytes in blocks of at least the THP size
  std::uint64_t huge_blocks = 0;       ///< THP-sized blocks the free lists hold
};

/// The THP and compaction counters from /proc/vmstat that the doctor reports.
inline constexpr const char* vmstat_counters[] = {
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_split_page",
    "thp_deferred_split_page",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "htlb_buddy_alloc_success",
    "htlb_buddy_alloc_fail",
};

/// The machine as the doctor sees it.
struct system_report {
  std::string kernel_release;
  thp_settings thp;
  std::vector<hugetlb_pool> pools;       ///< system-wide, ascending page size
  std::vector<hugetlb_pool> node_pools;  ///< per NUMA node (empty on machines without nodes)
  std::size_t base_page_bytes = 4096;
  std::size_t thp_bytes = std::size_t{2} << 20;
  std::optional<std::vector<zone_readiness>> zones;  ///< empty: buddyinfo unreadable
  std::map<std::string, std::uint64_t> vmstat;       ///< the counters above that exist here
  bool vmstat_readable = false;
  std::map<std::string, std::uint64_t> meminfo;  ///< bytes (kB lines) or counts
  bool meminfo_readable = false;
  cgroup_report cgroup;
  collapse_support collapse = collapse_support::unknown;
  bool hardware_counters = false;
  std::string counters_reason;  ///< why not, when hardware_counters is false
};

/// Collects the system report from `root` ("" for the live system; the THP settings and pools
/// always come from the live system through the library). `probe_collapse` runs probe_collapse().
system_report collect_system(const std::string& root = "", bool probe_collapse = true);

/// The advice for a system. Pure.
std::vector<advice> advise_system(const system_report& system);

// ---- process -----------------------------------------------------------------------------------

/// One anonymous mapping, for the "largest mappings" table.
struct anon_mapping {
  std::uintptr_t start = 0;
  std::size_t size = 0;
  std::size_t resident = 0;  ///< Rss, or the hugetlb pages of a hugetlb mapping
  std::size_t huge = 0;      ///< AnonHugePages or hugetlb bytes
  std::size_t kernel_page_bytes = 0;
  std::string name;   ///< "", "[heap]", "/anon_hugepage (deleted)", "[anon:name]"
  std::string flags;  ///< "hg" (MADV_HUGEPAGE), "nh" (MADV_NOHUGEPAGE) or ""
};

/// The allocator of a process and its hugepage settings.
struct allocator_report {
  allocator_guess guess;
  bool environ_readable = false;
  std::vector<std::pair<std::string, std::string>> settings;  ///< relevant environment variables
  std::string hugepage_mode;   ///< e.g. "thp:always", "glibc.malloc.hugetlb=1", "off", "default"
  bool asks_for_huge = false;  ///< the settings make the allocator advise or map huge pages
};

/// A process as the doctor sees it. Bytes.
struct process_report {
  pid_t pid = 0;
  std::string name;
  std::size_t mappings = 0;
  std::size_t rss = 0;        ///< resident base and THP pages (hugetlb pages are not in Rss)
  std::size_t anonymous = 0;  ///< anonymous resident bytes (excluding hugetlb)
  std::size_t thp = 0;        ///< AnonHugePages
  std::map<std::size_t, std::size_t> hugetlb;  ///< page size -> resident bytes
  std::size_t base = 0;                        ///< rss - thp
  std::size_t thp_advised = 0;                 ///< bytes in MADV_HUGEPAGE mappings
  std::optional<bool> thp_enabled;             ///< status THP_enabled (false: PR_SET_THP_DISABLE)
  std::vector<anon_mapping> largest;
  allocator_report allocator;
  cgroup_report cgroup;
  double seconds = 0;  ///< time spent reading the process

  std::size_t hugetlb_total() const noexcept {
    std::size_t total = 0;
    for (const auto& entry : hugetlb) total += entry.second;
    return total;
  }
  /// Share of anonymous memory (hugetlb included) on huge pages, 0..1.
  double huge_fraction() const noexcept {
    const double all = static_cast<double>(anonymous + hugetlb_total());
    return all == 0 ? 0.0 : static_cast<double>(thp + hugetlb_total()) / all;
  }
};

/// Summarises parsed smaps (library: parse_smaps) into a process report: totals, the `top`
/// largest anonymous mappings. Pure.
process_report summarize_mappings(const std::vector<mapping_info>& mappings, std::size_t top);

/// Works out the allocator's hugepage settings from its name and environment. Pure.
allocator_report describe_allocator(const allocator_guess& guess, bool environ_readable,
                                    std::vector<std::pair<std::string, std::string>> settings);

/// Collects the report for `pid`. On failure sets `ec` (ENOENT: no such process; EACCES, EPERM:
/// not allowed) and `error` to a one-line message.
process_report collect_process(pid_t pid, std::size_t top, std::error_code& ec, std::string& error);

/// Minimum anonymous memory before the doctor advises on a process's huge page use.
inline constexpr std::size_t process_advice_threshold = std::size_t{512} << 20;

/// The advice for a process, given the system it runs on. Pure.
std::vector<advice> advise_process(const process_report& process, const system_report& system);

// ---- probe -------------------------------------------------------------------------------------

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

// ---- output ------------------------------------------------------------------------------------

std::string render_system(const system_report& system, const std::vector<advice>& advice);
std::string render_process(const process_report& process, const system_report& system,
                           const std::vector<advice>& advice);
std::string render_probe(const probe_report& probe);

std::string json_system(const system_report& system, const std::vector<advice>& advice);
std::string json_process(const process_report& process, const system_report& system,
                         const std::vector<advice>& advice);
std::string json_probe(const probe_report& probe);

/// "64.0 MiB", "1.50 GiB", "12 KiB", "0 B".
std::string format_bytes(std::uint64_t bytes);

}  // namespace hugepage::doctor
