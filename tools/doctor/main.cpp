// tools/doctor/main.cpp - hugepage-doctor: is this machine, or this process, paying the TLB tax?
//
// Parses the command line (CLI11), collects one report, derives advice, prints a table or JSON.
// Every error is one line on stderr and a non-zero status, with nothing on stdout: output is
// built whole before it is printed, and a failed write to stdout is an error too.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "advice.hpp"
#include "advise_process.hpp"
#include "advise_system.hpp"
#include "capture.hpp"
#include "collapse_command.hpp"
#include "collect_process.hpp"
#include "collect_system.hpp"
#include "exit_codes.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/process_view.hpp"
#include "json.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "prometheus.hpp"
#include "render_collapse.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace {

using namespace hugepage::doctor;

// --help: the text, the schema name and the exit statuses from their homes.
std::string usage_text() {
  return R"(Usage: hugepage-doctor [--json | --format FORMAT] [--pid PID [--top N] [--capture DIR] | --probe]
       hugepage-doctor --pid PID --collapse [--dry-run] [--budget-ms N] [--max-bytes N] [--json]
       hugepage-doctor --list-rules [--json]

Says whether a Linux machine, or one process on it, gets the huge pages it could, and how to fix
what is missing. Each piece of advice names the facts it rests on, what the fix costs, and the
commands that apply it (built from values the doctor chose, every word shell-quoted; of what
a process controls only the current value of a variable being set, merged and quoted, and only
when it is printable ASCII: never its title or paths).

Modes:
  (none)        the system: THP settings, mTHP sizes, khugepaged, hugetlb pools (per NUMA node),
                free 2 MiB blocks (/proc/buddyinfo), THP counters (/proc/vmstat), hugetlb cgroup
                limits, MADV_COLLAPSE, 1 GiB page support, hardware counters
  --pid PID     one process: RSS, bytes on THP, on hugetlb (per size) and on base pages, shared
                memory and file THP in their own classes, its largest anonymous and shared
                mappings with their bytes per page size (a 1 GiB-page block and its 2 MiB-page
                tail as one), its memory by the mechanism that allocated it (glibc's main arena,
                thread arenas and mmapped chunks, another allocator's arenas, a runtime's heap,
                its own mmap, shared memory, tmpfs, hugetlb, files) with the huge bytes each
                got, its runtime (JVM, PostgreSQL, Redis), its allocator (and version) and their
                huge page settings, and advice that names the classes each setting reaches.
                Needs the right to read /proc/PID/smaps (root, or the same user).
  --probe       measures ns per access of a dependent random chase at 4 MiB, 64 MiB and
                1 GiB, on base pages and on huge pages, and prints the ratio (~10 s, ~1.1 GiB;
                in a memory cgroup, working sets shrink to fit its headroom, and say so)
  --list-rules  the advice the doctor can give: each rule's id, its level (a warning may come
                as a note where what it finds is small) and what it finds; as a table or JSON

Options:
  --json        the same as --format json
  --format F    table (default), json (schema ")" +
         std::string(json_schema) + R"(") or prometheus (the
                node_exporter textfile format); both documented in tools/README.md
  --top N       with --pid: how many of the largest mappings to list (default 10)
  --capture DIR with --pid: also store the files the report is built from in DIR (created 0700,
                or empty; files 0600): its smaps, status, stat, cmdline, environ, cgroup,
                numa_maps, mounts, parent's status, the glibc chunk headers read from its
                memory, and the facts read beside them (NUMA node, per-mapping coverage, glibc
                version, packages), so that the report built from DIR is this one. They hold
                the process's command line and environment, secrets included
  --collapse    with --pid: collapse its mappings into huge pages now (process_madvise
                MADV_COLLAPSE, Linux 6.1; needs CAP_SYS_NICE and ptrace access), largest gain
                first; --dry-run lists them and changes nothing; --budget-ms N (default 1000)
                and --max-bytes N bound the work
  -h, --help    print this help and exit
  --version     print the version and exit

)" + exit_status_help();
}

struct options {
  std::string format = "table";
  bool probe = false;
  bool list_rules = false;
  std::optional<pid_t> pid;
  std::size_t top = 10;
  std::string capture;    // --capture DIR; "" when not asked
  bool collapse = false;  // see collapse_command.hpp
  collapse_options collapse_with;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "hugepage-doctor: %s\n", printable(message).c_str());
  return exit_error;
}

// A positive decimal number no larger than `max`; nullopt otherwise.
std::optional<long long> positive(std::string_view text, long long max) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  long long value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value <= 0 || value > max) return std::nullopt;
  return value;
}

// Writes the whole of `text` to stdout and flushes it; exit_error (with a message) when stdout
// is closed, full or a broken pipe, so a failed write never ends with status 0.
int emit(const std::string& text, int code) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0 ||
      std::ferror(stdout) != 0) {
    return fail(std::string("cannot write to stdout: ") + std::strerror(errno));
  }
  return code;
}

// Returns exit_healthy and fills `o`, -1 when --help/--version printed (`code` holds the
// status), or exit_error.
int parse(int argc, char** argv, options& o, int& code) {
  CLI::App app{"hugepage-doctor"};
  // Help and version are ours (usage_text, and a write failure must be an error), and CLI11's
  // multi-line messages are folded into one line below.
  app.set_help_flag();
  bool help = false, version = false, json = false;
  // Numbers are taken as text and checked here, for one wording of every mistake.
  std::string pid, top;
  app.add_flag("-h,--help", help)->disable_flag_override();
  app.add_flag("--version", version)->disable_flag_override();
  app.add_flag("--json", json)->disable_flag_override();
  auto* format =
      app.add_option("--format", o.format)->check(CLI::IsMember({"table", "json", "prometheus"}));
  auto* pid_option = app.add_option("--pid", pid)->type_name("PID");
  // --top shapes the process report: alone it would be ignored, so it is a usage error.
  auto* top_option = app.add_option("--top", top)->type_name("N")->needs(pid_option);
  auto* capture_option =
      app.add_option("--capture", o.capture)->type_name("DIR")->needs(pid_option);
  auto* probe = app.add_flag("--probe", o.probe)->disable_flag_override();
  probe->excludes(pid_option);
  // The catalog reads nothing: a report's options would be ignored.
  auto* list_rules = app.add_flag("--list-rules", o.list_rules)->disable_flag_override();
  list_rules->excludes(pid_option);
  list_rules->excludes(probe);
  format->excludes(app.get_option("--json"));
  std::string budget_ms, max_bytes;
  auto* collapse = app.add_flag("--collapse", o.collapse)->disable_flag_override();
  collapse->needs(pid_option);
  collapse->excludes(capture_option);
  collapse->excludes(top_option);  // a collapse lists every candidate range: --top shapes nothing
  app.add_flag("--dry-run", o.collapse_with.dry_run)->disable_flag_override()->needs(collapse);
  auto* budget_option = app.add_option("--budget-ms", budget_ms)->type_name("N")->needs(collapse);
  auto* max_bytes_option =
      app.add_option("--max-bytes", max_bytes)->type_name("N")->needs(collapse);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    return fail(message + " (try --help)");
  }
  if (help) {
    code = emit(usage_text(), exit_healthy);
    return -1;
  }
  if (version) {
    code = emit("hugepage-doctor " HUGEPAGE_DOCTOR_VERSION "\n", exit_healthy);
    return -1;
  }
  if (json) o.format = "json";
  if (*pid_option) {
    const auto value = positive(pid, 0x7fffffff);
    if (!value)
      return fail("--pid: '" + pid + "' is not a process id (a positive integer) (try --help)");
    o.pid = static_cast<pid_t>(*value);
  }
  // The bounds: about 35 years of milliseconds, a PiB of bytes.
  constexpr long long most_ms = 1LL << 40, most_bytes = 1LL << 50;
  if (*budget_option) {
    const auto value = positive(budget_ms, most_ms);
    if (!value) {
      return fail(fmt::format("--budget-ms: '{}' is not a whole number from 1 to {} (try --help)",
                              budget_ms, most_ms));
    }
    o.collapse_with.budget = std::chrono::milliseconds(*value);
  }
  if (*max_bytes_option) {
    const auto value = positive(max_bytes, most_bytes);
    if (!value) {
      return fail(fmt::format("--max-bytes: '{}' is not a whole number from 1 to {} (try --help)",
                              max_bytes, most_bytes));
    }
    o.collapse_with.max_bytes = static_cast<std::size_t>(*value);
  }
  if (*capture_option && o.capture.empty()) return fail("--capture: an empty path (try --help)");
  if (*top_option) {
    const auto value = positive(top, 100000);
    if (!value) return fail("--top: '" + top + "' is not a positive count (try --help)");
    o.top = static_cast<std::size_t>(*value);
  }
  return exit_healthy;
}

// --pid: the process is opened once, as a process_view, and every step reads it through that
// view: the checks, the report or the collapse, the capture. A thread id opens /proc/TID too, with
// its process's memory: the report is of the process, and says so, so that a report titled with
// another pid surprises no one (the view is made once more, for the process). A collapse acts on
// memory, so it is not redirected: given a thread id, it refuses and names the process.
int run_on_process(const options& o, bool json, bool prometheus) {
  if (o.collapse && prometheus) return fail("--collapse prints a table or JSON, not prometheus");
  std::optional<hugepage::process_view> target;
  target.emplace(*o.pid);
  if (!o.collapse) {
    std::error_code ec;
    const auto status = target->read_text("status", ec);
    const auto tgid = status ? hugepage::parse_status(*status).number("Tgid") : std::nullopt;
    if (tgid && *tgid != 0 && *tgid != std::uint64_t(*o.pid)) {
      std::fprintf(stderr,
                   "hugepage-doctor: %d is a thread of process %llu; reporting the process\n",
                   *o.pid, static_cast<unsigned long long>(*tgid));
      target.emplace(static_cast<pid_t>(*tgid));
    }
  }
  collect_failure failure;
  if (o.collapse) {
    if (!is_reportable_target(*target, failure)) {
      fail(failure.message);
      return failure.exit_code;
    }
    std::error_code ec;
    std::string error;
    const collapse_report report = run_collapse(o.collapse_with, *target, ec, error);
    if (ec) return fail(error);
    // An error that stopped everything is one line on stderr, nothing on stdout, as elsewhere.
    if (report.fatal) return fail(explain_refusal(report.fatal.value(), *target));
    return emit(json ? json_collapse(report) : render_collapse(report),
                nothing_collapsed(report).empty() ? exit_healthy : exit_advice);
  }
  process_files files;
  const std::optional<process_report> process =
      collect_process(*target, o.top, failure, o.capture.empty() ? nullptr : &files);
  if (!process) {
    fail(failure.message);
    return failure.exit_code;
  }
  if (!o.capture.empty()) {
    // stat as it is now: the process was checked to be the same one at the end of reading.
    std::error_code ec;
    const auto stat = target->read_text("stat", ec);
    if (!stat) {
      return fail("pid " + std::to_string(target->pid()) + " exited while being read; no report");
    }
    const std::string error = write_capture(o.capture, files, *stat);
    if (!error.empty()) return fail(error);
  }
  const system_report system = collect_system();
  const std::vector<advice> advice = advise_process(*process, system);
  return emit(json         ? json_process(*process, system, advice)
              : prometheus ? prometheus_process(*process, system, advice)
                           : render_process(*process, system, advice),
              exit_code_of(advice));
}

int run(options o) {
  const bool json = o.format == "json";
  const bool prometheus = o.format == "prometheus";
  if (o.list_rules) {
    if (prometheus) return fail("--list-rules prints a table or JSON, not prometheus");
    return emit(json ? json_rules() : render_rules(), exit_healthy);
  }
  if (o.probe) {
    const probe_report probe =
        run_probe({4 * hugepage::units::mib, 64 * hugepage::units::mib, hugepage::units::gib});
    bool any = false;
    for (const auto& row : probe.rows) any = any || row.error.empty();
    if (!any) {
      return fail("probe failed: " +
                  (probe.rows.empty() ? std::string("no working sets") : probe.rows[0].error));
    }
    return emit(json         ? json_probe(probe)
                : prometheus ? prometheus_probe(probe)
                             : render_probe(probe),
                exit_healthy);
  }
  if (o.pid) return run_on_process(o, json, prometheus);
  const system_report system = collect_system();
  const std::vector<advice> advice = advise_system(system);
  return emit(json         ? json_system(system, advice)
              : prometheus ? prometheus_system(system, advice)
                           : render_system(system, advice),
              exit_code_of(advice));
}

}  // namespace

int main(int argc, char** argv) {
  // A closed or broken stdout must be an error status, not a silent death or success.
  std::signal(SIGPIPE, SIG_IGN);
  options o;
  int code = exit_healthy;
  const int parsed = parse(argc, argv, o, code);
  if (parsed == -1) return code;
  if (parsed != exit_healthy) return parsed;
  try {
    return run(o);
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
}
