// tools/doctor/collect_process.hpp - the process report's facts, read from /proc/PID and the
// process's memory, and the one place a report is built from them (collect_process.cpp). Nothing
// here prints: an error never leaves half a report on stdout.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exit_codes.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/smaps.hpp"
#include "memory_classes.hpp"
#include "process_report.hpp"
#include "shared_views.hpp"

namespace hugepage::doctor {

/// The facts a process report is built from: the /proc/PID files (nullopt: unreadable) and what
/// collect_process() learnt beside them. A capture stores all of it (capture.hpp), so a report
/// replayed from one is built from the same facts as the live report.
struct process_files {
  std::string smaps;
  std::optional<std::string> status, cmdline, environ, cgroup, numa_maps;
  std::optional<std::string> mountinfo;      ///< the target's: which files lie on tmpfs
  std::optional<std::string> parent_status;  ///< its parent's status: who disabled THP
  chunk_headers chunks;                      ///< not a file: read from the target's memory
  /// The machine's NUMA node when it has only one (numa_maps is then not read: the split is
  /// numa_of_one_node()'s); nullopt otherwise, or not known.
  std::optional<int> numa_node;
  /// Each node's CPUs (/sys/devices/system/node/nodeN/cpulist), read with numa_maps; empty when
  /// not read.
  std::map<int, std::string> node_cpus;
  /// The exact coverage of every mapping (coverage_of); nullopt: not read (stored files).
  std::optional<std::vector<mapping_coverage>> coverage;
  /// The target's glibc version, where its libc is the file this doctor runs with; "" otherwise.
  std::string glibc_version;
  /// The Debian packages owning the allocator's library and the runtime's file, where the target
  /// sees the same files as the doctor: path -> {package, version} (debian_packages()).
  std::map<std::string, std::pair<std::string, std::string>> packages;
  /// Where each view of an object mapped more than once is resident (view_residency_of());
  /// nullopt: not read (stored files, or a capture made before it was kept).
  std::optional<view_residency> views;
  /// Whether its mount namespace (/proc/PID/ns/mnt) is not the doctor's; nullopt: not known.
  std::optional<bool> own_mount_namespace;
  /// What a --collapse would add filling partly populated chunks (predicted_collapse_growth()),
  /// read only where a memory cgroup limit is set; nullopt: not read or unknown.
  std::optional<std::size_t> collapse_growth;
};

/// Who a process is, judged once from its files: its status fields, mapped files, allocator and
/// runtime (versions and packages not yet applied). Both collection (which facts to read) and
/// build_process_report() use it.
struct process_identity {
  std::map<std::string, std::uint64_t> status;  ///< parse_meminfo of status; empty: unreadable
  std::vector<std::string> paths;               ///< mapped files, each once, in address order
  std::vector<std::pair<std::string, std::string>> settings;  ///< allocator environment
  allocator_report allocator;
  runtime_report runtime;
};

/// The identity of the process whose files are `files` and whose parsed smaps is `mappings`.
/// Pure.
process_identity identify_process(const process_files& files,
                                  const std::vector<mapping_info>& mappings);

/// Builds a process report from its files: mappings, name, allocator, runtime, systemd unit,
/// NUMA split, coverage, versions and packages, hugetlb cgroup limits (read under `root`). Pure
/// but for the cgroup limits and this machine's THP size, so tests feed files captured from
/// real services (tools/test/data/services). The one place a process report is assembled: a live
/// target (collect_process) and a capture (read_capture) are both files by now.
process_report build_process_report(pid_t pid, const process_files& files, std::size_t top,
                                    const std::string& root);

/// Why collect_process() returned no report: the exit status and one line for stderr.
struct collect_failure {
  int exit_code = exit_error;
  std::string message;
};

/// Collects the report for `pid`, or says why not. The target's start time is read before and
/// after the other files: a target that exited, or a pid reused meanwhile, is a failure ("exited
/// while being read"), never a partial report. Permission failures name the cause (another
/// user, hidepid, a user namespace, a missing capability). `files`, when given, receives the
/// files the report was built from (for --capture, capture.hpp).
/// Every file of the target is read through `target`, opened once (process_view).
std::optional<process_report> collect_process(const process_view& target, std::size_t top,
                                              collect_failure& failure,
                                              process_files* files = nullptr);

/// The same for `pid`, opened here.
std::optional<process_report> collect_process(pid_t pid, std::size_t top, collect_failure& failure,
                                              process_files* files = nullptr);

/// Whether `target` is a process with user memory to report or collapse; otherwise fills
/// `failure`: no such process or unreadable (exit_error), a zombie (exit_zombie), a kernel thread
/// (exit_kernel_thread).
bool is_reportable_target(const process_view& target, collect_failure& failure);

/// The same for `pid`, opened here.
bool is_reportable_target(pid_t pid, collect_failure& failure);

/// Facts from /proc/PID/stat: state letter, kernel flags, start time (clock ticks after boot).
struct proc_stat {
  char state = '?';
  std::uint64_t flags = 0;
  std::uint64_t threads = 0;  ///< num_threads: the thread group's live threads
  std::uint64_t start_time = 0;
  bool kernel_thread() const noexcept { return (flags & 0x00200000U) != 0; }  // PF_KTHREAD
  /// The main thread is exiting (PF_EXITING): its memory is being torn down, and /proc/PID shows
  /// none or part of it, before the state says Z.
  bool exiting() const noexcept { return (flags & 0x4U) != 0; }
};

/// Whether the process of `parent` started no later than that of `child`: a process that started
/// after another cannot be its parent (its number was reused after the parent exited). Pure.
inline bool started_no_later(const proc_stat& parent, const proc_stat& child) noexcept {
  return parent.start_time <= child.start_time;
}

/// Parses /proc/PID/stat text (the comm field may hold spaces and parentheses).
std::optional<proc_stat> parse_proc_stat(std::string_view text);

}  // namespace hugepage::doctor
