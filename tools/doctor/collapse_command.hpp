// tools/doctor/collapse_command.hpp - hugepage-doctor --pid PID --collapse.
//
// Collecting (which mappings could gain, by how much), acting (hugepage::collapse on another
// process, largest gain first, under a time and byte budget) and rendering are separate functions,
// as in the rest of the doctor: main.cpp decides which run, and each format renders the report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/smaps.hpp"

namespace hugepage::doctor {

/// Passes over a range whose chunks the kernel found busy (EAGAIN), the first included, while the
/// budget lasts.
inline constexpr int collapse_passes = 3;

/// How a --collapse runs (the process is the process_view run_collapse() is given).
struct collapse_options {
  bool dry_run = false;
  std::chrono::milliseconds budget{1000};  ///< total time for all ranges
  std::size_t max_bytes = SIZE_MAX;        ///< total bytes submitted to MADV_COLLAPSE
};

/// One candidate range (a mapping's whole 2 MiB chunks) and what collapsing it did.
struct collapse_row {
  std::uintptr_t start = 0, end = 0;
  std::string name;         ///< as smaps names it, "[anon]" for none: the target's text
  std::size_t on_base = 0;  ///< resident bytes on base pages in whole chunks
  /// Why MADV_COLLAPSE cannot collapse this range ("" when it can): THP disabled for the
  /// process (PR_SET_THP_DISABLE), the mapping is VM_NOHUGEPAGE, or it is shared memory under
  /// shmem_enabled never or deny. Such a range is listed, never attempted, and expects no gain.
  std::string blocked;
  std::size_t resident_base = 0;  ///< expected gain: on_base, or 0 when blocked
  /// Memory the collapse adds: partly populated chunks are filled to 2 MiB (nullopt: unknown,
  /// no PAGEMAP_SCAN)
  std::optional<std::size_t> growth;
  /// Huge share of the range's resident memory (not of its whole address range: a range half
  /// resident and all huge is 100%)
  double before = 0, after = 0;
  std::size_t collapsed = 0;          ///< by all passes
  std::size_t refused = 0, left = 0;  ///< by the last pass
  std::size_t left_base = 0;          ///< resident bytes on base pages in the chunks `left`
  std::vector<std::pair<int, std::size_t>> refusals;  ///< errno, chunks: of the last pass
  double ms = 0;                                      ///< all passes
  int passes = 0;  ///< collapse calls on the range: more than one after EAGAIN
  bool attempted = false;
};

struct collapse_report {
  pid_t pid = 0;
  bool dry_run = false;
  std::vector<collapse_row> rows;  ///< largest expected gain first, blocked ranges last
  std::size_t expected_gain = 0, collapsed = 0;
  std::size_t blocked = 0;               ///< base-page bytes of the blocked rows
  std::vector<std::string> blocked_why;  ///< one per distinct reason rows are blocked
  std::size_t growth = 0;                ///< sum of the rows' known growth
  std::error_code fatal;                 ///< an error that stopped everything (EPERM, ESRCH...)
  /// Base-page bytes of candidate ranges the run left untried when a bound stopped it: ranges
  /// never reached and chunks a pass left (0 in a dry run, or when an error stopped it)
  std::size_t remaining = 0;
  /// The whole 2 MiB chunks of address range those cover (what the bounds count): for the bound
  /// that would cover the rest
  std::size_t remaining_range = 0;
  /// The bound that stopped it with `remaining` left: "--budget-ms" or "--max-bytes" ("" none)
  std::string stopped_by;
  std::chrono::milliseconds budget{0};  ///< the run's bounds (collapse_options)
  std::size_t max_bytes = SIZE_MAX;
  std::vector<std::string> explanations;  ///< one per distinct refusal
};

/// Finds the candidate ranges of the process of `target` and, unless `o.dry_run`, collapses
/// them; every file of it is read, and the collapse made, through `target`. Touches no other
/// process. Sets `ec` and `error` when the process cannot be read at all.
collapse_report run_collapse(const collapse_options& o, const process_view& target,
                             std::error_code& ec, std::string& error);

/// The memory a --collapse of the process of `target` (`mappings`: its smaps) would add by
/// filling partly populated chunks: the growth its dry run reports, from the same candidate
/// ranges. nullopt where a range's growth is unknown (no PAGEMAP_SCAN). `thp_disabled`: status
/// THP_enabled 0. Changes nothing.
std::optional<std::size_t> predicted_collapse_growth(const process_view& target,
                                                     const std::vector<mapping_info>& mappings,
                                                     bool thp_disabled);

/// The memory limit file of the cgroup that `proc_cgroup_text` (a /proc/PID/cgroup) names, by the
/// version in use: "memory.limit_in_bytes (cgroup v1)" where a v1 hierarchy has the memory
/// controller, else "memory.max (cgroup v2)". Pure.
std::string memory_limit_file(std::string_view proc_cgroup_text);

/// What an errno from process_madvise(MADV_COLLAPSE) on the process of `target` means, and what
/// to do about it (EBUSY names its memory cgroup's limit file).
std::string explain_refusal(int error, const process_view& target);

/// The same for `pid`, opened here.
std::string explain_refusal(int error, pid_t pid);

/// A short name for a blocked row's reason (collapse_row::blocked), for the table.
std::string blocked_label(const std::string& reason);

}  // namespace hugepage::doctor
