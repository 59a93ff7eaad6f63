// tools/doctor/cli_flags.hpp - the command line's flags, once: each row yields its parser
// declaration (main.cpp) and its lines of --help (flag_help()), so the two cannot disagree.
#pragma once

#include <string>
#include <string_view>

namespace hugepage::doctor {

/// Where a flag is described in --help: among the modes, the options, or inside another flag's
/// text (the collapse's bounds are words of --collapse's line).
enum class flag_section { mode, option, described_elsewhere };

/// One flag of hugepage-doctor.
struct cli_flag {
  const char* names;  ///< as the parser takes them: "--pid", "-h,--help"
  const char* value;  ///< the value's name ("PID", "N"); nullptr for a flag without a value
  flag_section section;
  const char* label;  ///< the left column of --help ("--pid PID"); nullptr: names and value
  /// The right column of --help, lines separated by '\n' (each further line is indented to the
  /// column); "@schema@" stands for the JSON schema's name.
  const char* help;
  const char* needs;     ///< a flag it is meaningless without ("" none)
  const char* excludes;  ///< flags it cannot go with, comma-separated ("" none)
};

/// Every flag, in the order --help lists them and the parser declares them (of two flags that
/// exclude each other, its message names the one declared first).
inline constexpr cli_flag cli_flags[] = {
    {"--json", nullptr, flag_section::option, nullptr, "the same as --format json", "", ""},
    {"--format", "F", flag_section::option, "--format F",
     "table (default), json (schema \"@schema@\") or prometheus (the\n"
     "node_exporter textfile format); both documented in tools/README.md",
     "", "--json"},
    {"--pid", "PID", flag_section::mode, nullptr,
     "one process: RSS, bytes on THP, on hugetlb (per size) and on base pages, shared\n"
     "memory and file THP in their own classes, its largest anonymous and shared\n"
     "mappings with their bytes per page size (a 1 GiB-page block and its 2 MiB-page\n"
     "tail as one), its memory by the mechanism that allocated it (glibc's main arena,\n"
     "thread arenas and mmapped chunks, another allocator's arenas, a runtime's heap,\n"
     "its own mmap, shared memory, tmpfs, hugetlb, files) with the huge bytes each\n"
     "got, its runtime (JVM, PostgreSQL, Redis), its allocator (and version) and their\n"
     "huge page settings, and advice that names the classes each setting reaches.\n"
     "Needs the right to read /proc/PID/smaps (root, or the same user).",
     "", ""},
    {"--top", "N", flag_section::option, nullptr,
     "with --pid: how many of the largest mappings to list (default 10)", "--pid", ""},
    {"--capture", "DIR", flag_section::option, nullptr,
     "with --pid: also store the files the report is built from in DIR (created 0700,\n"
     "or empty; files 0600): its smaps, status, stat, cmdline, environ, cgroup,\n"
     "numa_maps, mounts, parent's status, the glibc chunk headers read from its\n"
     "memory, and the facts read beside them (NUMA node, per-mapping coverage, glibc\n"
     "version, packages), so that the report built from DIR is this one. They hold\n"
     "the process's command line and environment, secrets included",
     "--pid", ""},
    {"--probe", nullptr, flag_section::mode, nullptr,
     "measures ns per access of a dependent random chase at 4 MiB, 64 MiB and\n"
     "1 GiB, on base pages and on huge pages, and prints the ratio (~10 s, ~1.1 GiB;\n"
     "in a memory cgroup, working sets shrink to fit its headroom, and say so)",
     "", "--pid"},
    // The catalog reads nothing: a report's options would be ignored.
    {"--list-rules", nullptr, flag_section::mode, nullptr,
     "the advice the doctor can give: each rule's id, its level (a warning may come\n"
     "as a note where what it finds is small) and what it finds; as a table or JSON",
     "", "--pid,--probe"},
    // A collapse lists every candidate range: --top shapes nothing.
    {"--collapse", nullptr, flag_section::option, nullptr,
     "with --pid: collapse its mappings into huge pages now (process_madvise\n"
     "MADV_COLLAPSE, Linux 6.1; needs CAP_SYS_NICE and ptrace access), largest gain\n"
     "first; --dry-run lists them and changes nothing; --budget-ms N (default 1000)\n"
     "and --max-bytes N bound the work",
     "--pid", "--capture,--top"},
    {"-h,--help", nullptr, flag_section::option, "-h, --help", "print this help and exit", "", ""},
    {"--version", nullptr, flag_section::option, nullptr, "print the version and exit", "", ""},
    {"--dry-run", nullptr, flag_section::described_elsewhere, nullptr, "", "--collapse", ""},
    {"--budget-ms", "N", flag_section::described_elsewhere, nullptr, "", "--collapse", ""},
    {"--max-bytes", "N", flag_section::described_elsewhere, nullptr, "", "--collapse", ""},
};

/// The lines of --help for the flags of `section`, in the table's order, each "  LABEL  HELP"
/// with the help in a column at 16; `schema` replaces "@schema@". Pure.
inline std::string flag_help(flag_section section, std::string_view schema) {
  constexpr std::size_t column = 16;
  std::string out;
  for (const cli_flag& f : cli_flags) {
    if (f.section != section) continue;
    std::string label = f.label != nullptr ? f.label : f.names;
    if (f.label == nullptr && f.value != nullptr) label += std::string(" ") + f.value;
    std::string line = "  " + label;
    line += std::string(line.size() < column - 1 ? column - line.size() : 1, ' ');
    std::string help = f.help;
    for (std::size_t at; (at = help.find("@schema@")) != std::string::npos;) {
      help.replace(at, 8, schema);
    }
    for (std::size_t at = 0; (at = help.find('\n', at)) != std::string::npos; at += column + 1) {
      help.insert(at + 1, std::string(column, ' '));
    }
    out += line + help + "\n";
  }
  return out;
}

}  // namespace hugepage::doctor
