// tools/test/doctor_cli_usage_test.cpp - bad input: usage errors, unreadable and missing pids,
// an unwritable stdout; --help documents the exit codes; --list-rules prints the catalog of rules.
#include <functional>

#include "cli_flags.hpp"
#include "doctor_cli_support.hpp"

namespace {

using namespace doctor_cli;

TEST(DoctorCli, HelpDocumentsExitCodes) {
  const result r = doctor({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Exit status"), std::string::npos);
  EXPECT_NE(r.out.find("1  advice given: at least one warning"), std::string::npos);
  EXPECT_NE(r.out.find("2  error"), std::string::npos);
  EXPECT_NE(r.out.find("3  --pid names a zombie"), std::string::npos);
  EXPECT_NE(r.out.find("4  --pid names a kernel thread"), std::string::npos);
  // Both forms in the synopsis: the report and the collapse.
  EXPECT_NE(r.out.find("\n       hugepage-doctor --pid PID --collapse [--dry-run] [--budget-ms N] "
                       "[--max-bytes N] [--json]\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\n       hugepage-doctor --list-rules [--json]\n"), std::string::npos)
      << r.out;
  EXPECT_TRUE(r.err.empty());
}

// Each row of the flag table (cli_flags.hpp), the one source of the parser and of --help: its
// line is in --help (or its name in the line of the flag that describes it); given with the
// flags it needs, it parses (then --help answers, exit 0); given with each flag it excludes, it
// is refused with the parser's message.
TEST(DoctorCliFlags, EveryRowIsInTheHelpParsesAndKeepsItsRelations) {
  namespace hd = hugepage::doctor;
  const result help = doctor({"--help"});
  ASSERT_EQ(help.code, 0) << help.err;
  const auto long_name = [](const char* names) {
    const std::string all(names);
    return all.substr(all.rfind(',') + 1);
  };
  const auto row_of = [&](const std::string& name) -> const hd::cli_flag& {
    for (const hd::cli_flag& f : hd::cli_flags) {
      if (long_name(f.names) == name) return f;
    }
    ADD_FAILURE() << "no row " << name;
    return hd::cli_flags[0];
  };
  // The flag with a valid value, then what it needs, transitively.
  const std::function<void(const std::string&, std::vector<std::string>&)> with =
      [&](const std::string& name, std::vector<std::string>& args) {
        if (std::find(args.begin(), args.end(), name) != args.end()) return;  // given already
        const hd::cli_flag& f = row_of(name);
        args.push_back(name);
        if (f.value != nullptr) args.push_back(name == "--format" ? "json" : "1");
        if (*f.needs != '\0') with(f.needs, args);
      };
  for (const hd::cli_flag& f : hd::cli_flags) {
    const std::string name = long_name(f.names);
    SCOPED_TRACE(name);
    if (f.section == hd::flag_section::described_elsewhere) {
      EXPECT_NE(help.out.find(name), std::string::npos) << "not named in --help";
    } else {
      std::string label = f.label != nullptr ? f.label : f.names;
      if (f.label == nullptr && f.value != nullptr) label += std::string(" ") + f.value;
      EXPECT_NE(help.out.find("\n  " + label + " "), std::string::npos) << help.out;
    }
    std::vector<std::string> args;
    with(name, args);
    if (name != "--help" && name != "--version") args.push_back("--help");
    const result parsed = doctor(args);
    EXPECT_EQ(parsed.code, 0) << parsed.err;
    const std::string excluded = f.excludes;
    for (std::size_t at = 0; at < excluded.size();) {
      const std::size_t comma = std::min(excluded.find(',', at), excluded.size());
      std::vector<std::string> both;
      with(name, both);
      with(excluded.substr(at, comma - at), both);
      const result refused = doctor(both);
      EXPECT_EQ(refused.code, 2) << refused.out;
      EXPECT_NE(refused.err.find(" excludes "), std::string::npos) << refused.err;
      at = comma + 1;
    }
  }
}

TEST(DoctorCli, UnwritableStdoutIsAnError) {
  // `hugepage-doctor --help >&-` and a full disk: the output was not delivered, so not 0.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"--version"}, {"--json"}, {}}) {
    run_options closed;
    closed.close_stdout = true;
    result r = doctor(args, closed);
    EXPECT_EQ(r.code, 2) << (args.empty() ? "" : args[0]) << ": " << r.err;
    EXPECT_NE(r.err.find("cannot write to stdout"), std::string::npos) << r.err;
    run_options full;
    full.stdout_path = "/dev/full";
    r = doctor(args, full);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("cannot write to stdout: No space left on device"), std::string::npos)
        << r.err;
  }
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& message) {
  for (const bool json : {false, true}) {
    std::vector<std::string> all = args;
    if (json) all.insert(all.begin(), "--json");
    const result r = doctor(all);
    EXPECT_EQ(r.code, 2) << message;
    EXPECT_TRUE(r.out.empty()) << "stdout must stay empty on error: " << r.out;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  }
}

TEST(DoctorCli, GarbageFlags) {
  expect_usage_error({"--frobnicate"},
                     "hugepage-doctor: The following argument was not expected: --frobnicate "
                     "(try --help)");
  expect_usage_error({"-x"}, "not expected: -x");
  expect_usage_error({"stray"}, "not expected: stray");
  expect_usage_error({"--probe=yes"}, "probe was given a disallowed flag override");
  expect_usage_error({"--top", "0", "--pid", "1"}, "--top: '0' is not a positive count");
  expect_usage_error({"--format", "xml"}, "--format: xml not in {table,json,prometheus}");
}

TEST(DoctorCli, ProcessOnlyFlagsWithoutPid) {
  // Each shapes a --pid run; without one it would change nothing, silently.
  expect_usage_error({"--top", "5"}, "hugepage-doctor: --top requires --pid (try --help)");
  expect_usage_error({"--top", "5", "--probe"}, "--top requires --pid");
  expect_usage_error({"--collapse"}, "--collapse requires --pid");
  expect_usage_error({"--dry-run", "--pid", "1"}, "--dry-run requires --collapse");
  expect_usage_error({"--budget-ms", "10", "--pid", "1"}, "--budget-ms requires --collapse");
  expect_usage_error({"--max-bytes", "4096", "--pid", "1"}, "--max-bytes requires --collapse");
  // A collapse lists every candidate range: --top would be ignored.
  expect_usage_error({"--pid", "1", "--collapse", "--top", "5"},
                     "hugepage-doctor: --top excludes --collapse (try --help)");
}

TEST(DoctorCli, PidWithoutValue) {
  expect_usage_error({"--pid"}, "--pid: 1 required PID missing");
  expect_usage_error({"--pid="}, "--pid: 1 required PID missing");
}

TEST(DoctorCli, PidNotANumber) {
  expect_usage_error({"--pid", "abc"}, "--pid: 'abc' is not a process id (a positive integer)");
  expect_usage_error({"--pid", "-5"}, "--pid: '-5' is not a process id");
  expect_usage_error({"--pid=12x"}, "--pid: '12x' is not a process id");
  expect_usage_error({"--pid", "0"}, "--pid: '0' is not a process id");
  expect_usage_error({"--pid", "99999999999999999999"}, "is not a process id");
}

TEST(DoctorCli, PidAndProbeTogether) {
  expect_usage_error({"--pid", "1", "--probe"}, "--pid excludes --probe");
}

TEST(DoctorCli, ListRulesPrintsTheCatalogAsATableOrJson) {
  const result table = doctor({"--list-rules"});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_TRUE(table.err.empty()) << table.err;
  const result json = doctor({"--list-rules", "--json"});
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(doctor({"--list-rules", "--format", "json"}).out, json.out);
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc.at("schema"), "hugepage-doctor/1");
  EXPECT_EQ(doc.at("mode"), "rules");
  EXPECT_EQ(doc.at("exit_code"), 0);
  EXPECT_TRUE(doc.at("advice").empty());
  const auto& rules = doc.at("rules");
  ASSERT_GE(rules.size(), 50u) << json.out;
  EXPECT_EQ(rules[0].at("id"), "thp_never");
  // The table: a header, then each rule of the JSON on a line of its own, in the same order:
  // the id padded to the longest, two spaces, the level padded to "warning", two spaces, what.
  std::istringstream lines(table.out);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind("id ", 0), 0u) << line;
  const std::size_t what_at = line.find("what it finds");
  ASSERT_NE(what_at, std::string::npos) << line;
  for (const auto& rule : rules) {
    const std::string id = rule.at("id"), level = rule.at("level"), what = rule.at("what");
    EXPECT_TRUE(level == "warning" || level == "note") << id;
    ASSERT_TRUE(std::getline(lines, line)) << "no line for " << id;
    EXPECT_EQ(line.substr(0, line.find(' ')), id) << line;
    EXPECT_EQ(line.substr(what_at - 9, 9), (level + "         ").substr(0, 9)) << line;
    EXPECT_EQ(line.substr(what_at), what) << line;
  }
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line, "");
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(line.rfind("A warning makes the exit status 1", 0), 0u) << line;
}

TEST(DoctorCli, ListRulesRefusesWhatShapesAReport) {
  // The catalog reads nothing: a report's options would be ignored, silently.
  expect_usage_error({"--list-rules", "--pid", "1"}, "excludes --list-rules (try --help)");
  expect_usage_error({"--list-rules", "--probe"}, "--probe excludes --list-rules");
  expect_usage_error({"--list-rules", "--top", "5"}, "--top requires --pid");
  expect_usage_error({"--list-rules", "--collapse"}, "--collapse requires --pid");
  expect_usage_error({"--list-rules=yes"}, "list-rules was given a disallowed flag override");
  const result r = doctor({"--list-rules", "--format", "prometheus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err, "hugepage-doctor: --list-rules prints a table or JSON, not prometheus\n");
}

TEST(DoctorCli, NoSuchPid) {
  // A pid that just exited and was reaped: free, and not reused this soon.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  for (const bool json : {false, true}) {
    const result r = json ? doctor({"--json", "--pid", std::to_string(child)})
                          : doctor({"--pid", std::to_string(child)});
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err, "hugepage-doctor: no process with pid " + std::to_string(child) + "\n");
  }
}

TEST(DoctorCli, PidItMayNotRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run the doctor as nobody against pid 1";
  // /work (or wherever the build lives) must be reachable for nobody.
  if (::access(HUGEPAGE_DOCTOR_BINARY, X_OK) != 0) GTEST_SKIP() << "binary not executable";
  for (const bool json : {false, true}) {
    const result r = json ? doctor({"--json", "--pid", "1"}, 65534) : doctor({"--pid", "1"}, 65534);
    if (r.code == 98 || r.code == 99) GTEST_SKIP() << "cannot exec the doctor as nobody";
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("hugepage-doctor: cannot read /proc/1/smaps: Permission denied (pid 1 "
                         "belongs to uid 0 and the doctor runs as uid 65534: run it as root or "
                         "as uid 0)"),
              std::string::npos)
        << r.err;
  }
}

TEST(DoctorCli, DryRunItMayNotReadNamesTheOwnerNotPtrace) {
  // A dry run reads /proc/PID/smaps and pagemap only: what stops it is who owns the process, as
  // for the report, not the capabilities process_madvise needs, nor Yama's ptrace_scope (which
  // governs ptrace attach, never reading).
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run the doctor as nobody against pid 1";
  if (::access(HUGEPAGE_DOCTOR_BINARY, X_OK) != 0) GTEST_SKIP() << "binary not executable";
  for (const bool json : {false, true}) {
    std::vector<std::string> args{"--collapse", "--dry-run", "--pid", "1"};
    if (json) args.insert(args.begin(), "--json");
    const result r = doctor(args, 65534);
    if (r.code == 98 || r.code == 99) GTEST_SKIP() << "cannot exec the doctor as nobody";
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err,
              "hugepage-doctor: cannot read /proc/1/smaps: Permission denied (pid 1 belongs to "
              "uid 0 and the doctor runs as uid 65534: run it as root or as uid 0)\n");
  }
}

}  // namespace
