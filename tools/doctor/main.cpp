// tools/doctor/main.cpp - hugepage-doctor: is this machine, or this process, paying the TLB tax?
//
// Parses the command line, collects one report, derives advice, prints a table or JSON. Every
// error is one line on stderr and exit status 2, with nothing on stdout: output is built whole
// before it is printed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "collapse.hpp"
#include "report.hpp"

namespace {

using namespace hugepage::doctor;

constexpr int exit_healthy = 0;
constexpr int exit_advice = 1;
constexpr int exit_error = 2;

constexpr const char* usage_text =
    R"(Usage: hugepage-doctor [--json] [--pid PID [--top N] | --probe]

Says whether a Linux machine, or one process on it, gets the huge pages it could, and how to fix
what is missing. Each piece of advice comes with the command that applies it.

Modes:
  (none)        the system: THP settings, khugepaged, hugetlb pools (per NUMA node), free
                2 MiB blocks (/proc/buddyinfo), THP counters (/proc/vmstat), hugetlb cgroup
                limits, MADV_COLLAPSE, hardware counters
  --pid PID     one process: RSS, bytes on THP, on hugetlb (per size) and on base pages, its
                largest anonymous mappings, its allocator and that allocator's huge page
                settings. Needs the right to read /proc/PID/smaps (root, or the same user).
  --probe       measures ns per access of a dependent random chase at 4 MiB, 64 MiB and
                1 GiB, on base pages and on huge pages, and prints the ratio (~10 s, ~1.1 GiB)

Options:
  --json        print JSON instead of tables (schema "hugepage-doctor/1", see tools/README.md)
  --top N       with --pid: how many of the largest anonymous mappings to list (default 10)
  --collapse    with --pid: collapse its mappings into huge pages now (process_madvise
                MADV_COLLAPSE, Linux 6.1; needs CAP_SYS_NICE and ptrace access), largest gain
                first; --dry-run lists them and changes nothing; --budget-ms N (default 1000)
                and --max-bytes N bound the work
  -h, --help    print this help and exit
  --version     print the version and exit

Exit status:
  0  healthy: no advice (--probe: the probe ran)
  1  advice given
  2  error: bad usage, no such process, permission denied, probe failed; one line on stderr,
     nothing on stdout
)";

struct options {
  bool json = false;
  bool probe = false;
  std::optional<pid_t> pid;
  std::size_t top = 10;
  bool collapse = false;  // issue 10: see collapse.hpp
  collapse_options collapse_with;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "hugepage-doctor: %s\n", message.c_str());
  return exit_error;
}

int usage_error(const std::string& message) { return fail(message + " (try --help)"); }

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

// Returns exit_healthy and fills `o`, -1 for --help/--version (already printed), or exit_error.
int parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::optional<std::string_view> inline_value;
    if (arg.size() > 2 && arg.substr(0, 2) == "--") {
      if (const auto eq = arg.find('='); eq != std::string_view::npos) {
        inline_value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      }
    }
    const auto value = [&](const char* what) -> std::optional<std::string_view> {
      if (inline_value) return inline_value;
      if (i + 1 < argc) return std::string_view(argv[++i]);
      (void)what;
      return std::nullopt;
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(usage_text, stdout);
      return -1;
    }
    if (arg == "--version") {
      std::puts("hugepage-doctor 0.1.0");
      return -1;
    }
    if (arg == "--json" || arg == "--probe") {
      if (inline_value) return usage_error(std::string(arg) + " takes no value");
      (arg == "--json" ? o.json : o.probe) = true;
      continue;
    }
    if (arg == "--pid") {
      const auto text = value("process id");
      if (!text || text->empty()) return usage_error("--pid needs a process id");
      const auto pid = positive(*text, 0x7fffffff);
      if (!pid) {
        return usage_error("--pid: '" + std::string(*text) +
                           "' is not a process id (a positive integer)");
      }
      o.pid = static_cast<pid_t>(*pid);
      continue;
    }
    if (arg == "--collapse" || arg == "--dry-run") {
      if (inline_value) return usage_error(std::string(arg) + " takes no value");
      (arg == "--collapse" ? o.collapse : o.collapse_with.dry_run) = true;
      continue;
    }
    if (arg == "--budget-ms" || arg == "--max-bytes") {
      const auto text = value("number");
      const auto n = text ? positive(*text, 1LL << 50) : std::nullopt;
      if (!n) return usage_error(std::string(arg) + " needs a positive number");
      if (arg == "--budget-ms") {
        o.collapse_with.budget = std::chrono::milliseconds(*n);
      } else {
        o.collapse_with.max_bytes = static_cast<std::size_t>(*n);
      }
      continue;
    }
    if (arg == "--top") {
      const auto text = value("count");
      if (!text || text->empty()) return usage_error("--top needs a count");
      const auto n = positive(*text, 100000);
      if (!n) return usage_error("--top: '" + std::string(*text) + "' is not a positive count");
      o.top = static_cast<std::size_t>(*n);
      continue;
    }
    if (!arg.empty() && arg.front() == '-') {
      return usage_error("unknown option '" + std::string(argv[i]) + "'");
    }
    return usage_error("unexpected argument '" + std::string(arg) + "'");
  }
  if (o.pid && o.probe) return usage_error("--pid and --probe cannot be combined");
  if (o.collapse && !o.pid) return usage_error("--collapse needs --pid");
  if (o.collapse_with.dry_run && !o.collapse) return usage_error("--dry-run needs --collapse");
  return exit_healthy;
}

int run(const options& o) {
  if (o.probe) {
    const probe_report probe =
        run_probe({std::size_t{4} << 20, std::size_t{64} << 20, std::size_t{1} << 30});
    bool any = false;
    for (const auto& row : probe.rows) any = any || row.error.empty();
    if (!any) {
      return fail("probe failed: " +
                  (probe.rows.empty() ? std::string("no working sets") : probe.rows[0].error));
    }
    const std::string out = o.json ? json_probe(probe) : render_probe(probe);
    std::fputs(out.c_str(), stdout);
    return exit_healthy;
  }
  if (o.pid && o.collapse) {
    collapse_options c = o.collapse_with;
    c.pid = *o.pid;
    std::error_code ec;
    std::string error;
    const collapse_report report = run_collapse(c, ec, error);
    if (ec) return fail(error);
    // An error that stopped everything is one line on stderr, nothing on stdout, as elsewhere.
    if (report.fatal) return fail(explain_refusal(report.fatal.value(), c.pid));
    std::fputs((o.json ? json_collapse(report) : render_collapse(report)).c_str(), stdout);
    return exit_healthy;
  }
  if (o.pid) {
    std::error_code ec;
    std::string error;
    const process_report process = collect_process(*o.pid, o.top, ec, error);
    if (ec) return fail(error);
    const system_report system = collect_system();
    const std::vector<advice> advice = advise_process(process, system);
    std::string out =
        o.json ? json_process(process, system, advice) : render_process(process, system, advice);
    if (!o.json) {  // issue 10: exact per-mapping coverage; see collapse.hpp
      std::error_code coverage_ec;
      out += render_coverage(coverage_by_mapping(*o.pid, coverage_ec), o.top);
    }
    std::fputs(out.c_str(), stdout);
    return advice.empty() ? exit_healthy : exit_advice;
  }
  const system_report system = collect_system();
  const std::vector<advice> advice = advise_system(system);
  const std::string out = o.json ? json_system(system, advice) : render_system(system, advice);
  std::fputs(out.c_str(), stdout);
  return advice.empty() ? exit_healthy : exit_advice;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  const int parsed = parse(argc, argv, o);
  if (parsed == -1) return exit_healthy;
  if (parsed != exit_healthy) return parsed;
  try {
    const int code = run(o);
    if (std::fflush(stdout) != 0) return fail("cannot write the report to stdout");
    return code;
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error: ") + e.what());
  }
}
