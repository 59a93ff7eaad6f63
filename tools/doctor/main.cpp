// tools/doctor/main.cpp - hugepage-doctor: is this machine, or this process, paying the TLB tax?
//
// Parses the command line (CLI11), collects one report (collect_*.cpp), derives advice
// (advise_*.cpp), prints a table, JSON or Prometheus text (render_*.cpp, prometheus.cpp).
// A function that judges a report and emits advice is a verb, advise_*, and lives in a file
// advise_*.cpp, as do the parts only those files use (advise_parts.hpp, advise_reach.hpp); the data
// they make keeps the noun, advice (struct advice and advice_level: advice.hpp, advice_level.hpp).
// Every error is one line on stderr and a non-zero status, with nothing on stdout: output is
// built whole before it is printed, and a failed write to stdout is an error too.
#include <fmt/format.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "advice.hpp"
#include "advise_process.hpp"
#include "advise_system.hpp"
#include "capture.hpp"
#include "cli_flags.hpp"
#include "collapse_command.hpp"
#include "collect_process.hpp"
#include "collect_system.hpp"
#include "exit_codes.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/process_view.hpp"
#include "json.hpp"
#include "probe.hpp"
#include "process_report.hpp"
#include "prometheus.hpp"
#include "render_collapse.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "system_report.hpp"
#include "test_hook.hpp"
#include "text.hpp"

namespace {

using namespace hugepage::doctor;

// --help: the flags from their table (cli_flags.hpp), the schema name and the exit statuses from
// their homes.
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
)" + flag_help(flag_section::mode, json_schema) +
         "\nOptions:\n" + flag_help(flag_section::option, json_schema) + "\n" + exit_status_help();
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
  // Every flag from its row (cli_flags.hpp). Values are taken as text and checked here, for one
  // wording of every mistake.
  std::map<std::string, std::string> text;  // by long name
  std::map<std::string, CLI::Option*> flag;
  const auto long_name = [](const char* names) {
    const std::string_view all(names);
    return std::string(all.substr(all.rfind(',') + 1));  // npos + 1 == 0: the whole
  };
  for (const cli_flag& f : cli_flags) {
    const std::string name = long_name(f.names);
    flag[name] = f.value == nullptr ? app.add_flag(f.names)->disable_flag_override()
                                    : app.add_option(f.names, text[name])->type_name(f.value);
  }
  flag.at("--format")->check(CLI::IsMember({"table", "json", "prometheus"}));
  for (const cli_flag& f : cli_flags) {
    CLI::Option* const self = flag.at(long_name(f.names));
    if (*f.needs != '\0') self->needs(flag.at(f.needs));
    for (const std::string_view other : hugepage::split(f.excludes, ',')) {
      if (!other.empty()) self->excludes(flag.at(std::string(other)));
    }
  }
  const auto given = [&flag](const char* name) { return flag.at(name)->count() != 0; };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    return fail(message + " (try --help)");
  }
  if (given("--help")) {
    code = emit(usage_text(), exit_healthy);
    return -1;
  }
  if (given("--version")) {
    code = emit("hugepage-doctor " HUGEPAGE_DOCTOR_VERSION "\n", exit_healthy);
    return -1;
  }
  o.probe = given("--probe");
  o.list_rules = given("--list-rules");
  o.collapse = given("--collapse");
  o.collapse_with.dry_run = given("--dry-run");
  if (given("--format")) o.format = text["--format"];
  if (given("--json")) o.format = "json";
  o.capture = text["--capture"];
  const std::string &pid = text["--pid"], &top = text["--top"];
  const std::string &budget_ms = text["--budget-ms"], &max_bytes = text["--max-bytes"];
  if (given("--pid")) {
    const auto value = positive(pid, 0x7fffffff);
    if (!value)
      return fail("--pid: '" + pid + "' is not a process id (a positive integer) (try --help)");
    o.pid = static_cast<pid_t>(*value);
  }
  // The bounds: about 35 years of milliseconds, a PiB of bytes.
  constexpr long long most_ms = 1LL << 40, most_bytes = 1LL << 50;
  if (given("--budget-ms")) {
    const auto value = positive(budget_ms, most_ms);
    if (!value) {
      return fail(fmt::format("--budget-ms: '{}' is not a whole number from 1 to {} (try --help)",
                              budget_ms, most_ms));
    }
    o.collapse_with.budget = std::chrono::milliseconds(*value);
  }
  if (given("--max-bytes")) {
    const auto value = positive(max_bytes, most_bytes);
    if (!value) {
      return fail(fmt::format("--max-bytes: '{}' is not a whole number from 1 to {} (try --help)",
                              max_bytes, most_bytes));
    }
    o.collapse_with.max_bytes = static_cast<std::size_t>(*value);
  }
  if (given("--capture") && o.capture.empty()) return fail("--capture: an empty path (try --help)");
  if (given("--top")) {
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
      test_hook();
      target.emplace(static_cast<pid_t>(*tgid));
      // The process opened by its number is the thread's only if the thread is in it now: had
      // the process exited meanwhile, another could have its pid.
      struct stat thread {};
      const std::string task = "task/" + std::to_string(*o.pid);
      if (target->stat_of(task.c_str(), thread) != 0) {
        return fail("pid " + std::to_string(*o.pid) + " exited while being read; no report");
      }
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
