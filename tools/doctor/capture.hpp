// tools/doctor/capture.hpp - a process's capture: the inputs its report was built from, stored
// in a directory (hugepage-doctor --pid PID --capture DIR), and read back to build the same
// report offline (tools/test/data/services, the DoctorServices test).
//
// One file per input, named as in /proc/PID: smaps, status, cmdline, environ, cgroup, numa_maps,
// mountinfo (cut to the mounts the report uses: /, /dev/shm, hugetlbfs and those holding a mapped
// file), stat, the parent's status as parent_status, and chunks: the glibc chunk headers read
// from the target's memory, which no stored file holds (format: chunks_text); and what the
// doctor learnt beside the files, so that a replayed capture gives the live report: numa_node
// (the machine's one NUMA node, where numa_maps is not read), coverage (the exact coverage of
// each mapping from the page tables, format: coverage_text), glibc_version (where the target's
// libc is the doctor's) and packages (the Debian packages of its allocator and runtime, format:
// packages_text) and views (where each view of an object mapped more than once is resident, format:
// residency_text; only where some object is), mount_namespace ("own" or "same": whether the
// process's mount namespace is not the doctor's). A file the doctor could not read, or a fact it
// did not learn, is absent. The capture holds the process's command line and environment, which may
// hold secrets: every file is mode 0600 in a directory created 0700.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collect_process.hpp"
#include "memory_classes.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

/// What a capture holds: the pid (from stat) and the files the report is built from.
struct process_capture {
  pid_t pid = 0;
  process_files files;
};

/// The chunks file: a first line "read" or "unread", then a space and the evidence when there
/// is any ("unread chunk headers unreadable (EPERM)"); then, where the thread heaps' heap_info
/// headers were read (heaps_read), "heaps" and the start of each heap whose heap_info checks out,
/// in hex ("heaps 7f3a28000000"); then one line per chunk mapping, its start in hex and each
/// chunk's bytes in decimal ("7f3a2c000000 4198400 4198400"). Every line ends with a newline.
/// Pure.
std::string chunks_text(const chunk_headers& chunks);
/// The chunk headers in `text` (chunks_text's format); nullopt when it is not that format. Pure.
std::optional<chunk_headers> parse_chunks(std::string_view text);

/// The coverage file: one line per mapping, its start in hex, the counts of its backing_report
/// in decimal (bytes thp hugetlb_2m hugetlb_1g base not_resident unmapped unknown thp_shmem
/// thp_file zero_page), the source's name, "exact" or "approximate", smaps' huge bytes,
/// "disagrees" or "agrees", then the note when there is one (a newline in it becomes a space).
/// Pure.
std::string coverage_text(const std::vector<mapping_coverage>& coverage);
/// The coverage in `text` (coverage_text's format) of the mappings `mappings` (parsed smaps, in
/// address order); nullopt when it is not that format or names a mapping not among them. Pure.
std::optional<std::vector<mapping_coverage>> parse_coverage(
    std::string_view text, const std::vector<mapping_info>& mappings);

/// The packages file: one line per path, "package version path" (the path is the rest of the
/// line). Pure.
std::string packages_text(
    const std::map<std::string, std::pair<std::string, std::string>>& packages);
/// The packages in `text` (packages_text's format); nullopt when it is not that format. Pure.
std::optional<std::map<std::string, std::pair<std::string, std::string>>> parse_packages(
    std::string_view text);

/// The mountinfo lines the report uses (see above) of `mountinfo`, for a process whose smaps is
/// `smaps`. Pure.
std::string mounts_used(std::string_view mountinfo, std::string_view smaps);

/// Writes the capture of the process whose files are `files` and whose /proc/PID/stat is `stat`
/// into `dir`, which must be an empty directory or not exist (it is then created, its
/// parent must). Never follows a symbolic link at `dir` or inside it; files are created
/// exclusively, mode 0600, stat last. Returns "" on success, else one line saying why; then
/// nothing it wrote is left (a directory it created is removed too).
std::string write_capture(const std::string& dir, const process_files& files,
                          const std::string& stat);

/// Reads the capture in `dir`; nullopt, with `error` naming the file and saying why, when it has
/// no smaps or no stat, a file is not a regular one (never opened blocking: a FIFO is refused),
/// smaps is not the kernel's format, or a stored fact is malformed: a last line without its
/// newline (a file cut short), an empty coverage (every process has mappings), a glibc_version
/// other than digits.digits (or a development build's digits.digits.digits), a packages line whose
/// name or version is not in Debian's alphabet or whose path is not printable ASCII.
std::optional<process_capture> read_capture(const std::string& dir, std::string& error);

}  // namespace hugepage::doctor
