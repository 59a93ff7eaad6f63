// tools/test/doctor_cli_test.cpp - the real hugepage-doctor binary: bad input, exit codes, JSON,
// and a process with known memory (hugepage-doctor-target) reported within 1%.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"
#include "target_launcher.hpp"

namespace {

struct result {
  int code = -1;
  std::string out, err;
};

// How run() starts the child.
struct run_options {
  int uid = -1;                       ///< >= 0: drop to that user (and its group) first
  bool close_stdout = false;          ///< start with fd 1 closed
  const char* stdout_path = nullptr;  ///< stdout to this file instead of the pipe
  std::function<bool()> in_child;     ///< runs in the child before exec; false: exit 97
  int keep_fd = -1;                   ///< an fd the child keeps open across exec
};

// Runs argv[0] with the arguments, capturing stdout and stderr.
result run(const std::vector<std::string>& args, const run_options& o) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    if (o.stdout_path != nullptr) {
      const int fd = ::open(o.stdout_path, O_WRONLY);
      if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(96);
    }
    if (o.close_stdout) ::close(STDOUT_FILENO);
    if (o.keep_fd >= 0) ::fcntl(o.keep_fd, F_SETFD, 0);
    if (o.in_child && !o.in_child()) ::_exit(97);
    const int uid = o.uid;
    if (uid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
                     ::setuid(static_cast<uid_t>(uid)) != 0)) {
      ::_exit(99);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(98);
  }
  ::close(out[1]);
  ::close(err[1]);
  result r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      } else {
        (i == 0 ? r.out : r.err).append(buffer, static_cast<std::size_t>(n));
      }
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

result run(const std::vector<std::string>& args, int uid = -1) {
  run_options o;
  o.uid = uid;
  return run(args, o);
}

result doctor(std::vector<std::string> args, int uid = -1) {
  args.insert(args.begin(), HUGEPAGE_DOCTOR_BINARY);
  return run(args, uid);
}

result doctor(std::vector<std::string> args, const run_options& o) {
  args.insert(args.begin(), HUGEPAGE_DOCTOR_BINARY);
  return run(args, o);
}

bool required() {
  const char* v = std::getenv("HUGEPAGE_REQUIRE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

using hugepage::test::target;

// ---- a minimal JSON syntax check ----------------------------------------------------------------

struct json_checker {
  const std::string& s;
  std::size_t i = 0;
  void ws() {
    while (i < s.size() && std::strchr(" \t\r\n", s[i]) != nullptr) ++i;
  }
  bool literal(const char* word) {
    const std::size_t n = std::strlen(word);
    if (s.compare(i, n, word) != 0) return false;
    i += n;
    return true;
  }
  bool string() {
    if (s[i] != '"') return false;
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\') {
        ++i;
      } else if (s[i] == '"') {
        ++i;
        return true;
      } else if (static_cast<unsigned char>(s[i]) < 0x20) {
        return false;
      }
    }
    return false;
  }
  bool number() {
    const std::size_t start = i;
    if (s[i] == '-') ++i;
    while (i < s.size() && std::strchr("0123456789.eE+-", s[i]) != nullptr) ++i;
    return i > start;
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    bool ok;
    if (s[i] == '{' || s[i] == '[') {
      const char close = s[i] == '{' ? '}' : ']';
      const bool object = s[i] == '{';
      ++i;
      ws();
      if (s[i] == close) {
        ++i;
        return true;
      }
      for (;;) {
        if (object) {
          ws();
          if (!string()) return false;
          ws();
          if (s[i++] != ':') return false;
        }
        if (!value()) return false;
        ws();
        if (s[i] == ',') {
          ++i;
          continue;
        }
        if (s[i] != close) return false;
        ++i;
        return true;
      }
    }
    if (s[i] == '"') {
      ok = string();
    } else if (s[i] == 't' || s[i] == 'f' || s[i] == 'n') {
      ok = literal("true") || literal("false") || literal("null");
    } else {
      ok = number();
    }
    return ok;
  }
  bool document() {
    if (!value()) return false;
    ws();
    return i == s.size();
  }
};

bool valid_json(const std::string& text) {
  json_checker c{text};
  return c.document();
}

// "  on THP      64 MiB\n" -> bytes; -1 when the line is missing. (No std::regex: GCC 12 warns
// inside it under -fsanitize.)
double table_bytes(const std::string& table, const std::string& label) {
  const auto at = table.find("\n  " + label + " ");
  if (at == std::string::npos) return -1;
  const char* p = table.c_str() + at + 3 + label.size();
  char* end = nullptr;
  const double value = std::strtod(p, &end);
  if (end == p) return -1;
  const std::string unit(end + 1, std::strcspn(end + 1, "\n"));
  const double scale = unit == "GiB" ? 1 << 30 : unit == "MiB" ? 1 << 20 : unit == "KiB" ? 1024 : 1;
  return unit == "B" || scale != 1 ? value * scale : -1;
}

// The number after the first `"key": ` at or after `from`; -1 when missing.
double json_number(const std::string& json, const std::string& key, const std::string& from = "") {
  const auto start = from.empty() ? 0 : json.find(from);
  if (start == std::string::npos) return -1;
  const auto at = json.find("\"" + key + "\": ", start);
  if (at == std::string::npos) return -1;
  const char* p = json.c_str() + at + key.size() + 4;
  char* end = nullptr;
  const double value = std::strtod(p, &end);
  return end == p ? -1 : value;
}

// ---- bad input
// ------------------------------------------------------------------------------------

TEST(DoctorCli, HelpDocumentsExitCodes) {
  const result r = doctor({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("Exit status"), std::string::npos);
  EXPECT_NE(r.out.find("1  advice given: at least one warning"), std::string::npos);
  EXPECT_NE(r.out.find("2  error"), std::string::npos);
  EXPECT_NE(r.out.find("3  --pid names a zombie"), std::string::npos);
  EXPECT_NE(r.out.find("4  --pid names a kernel thread"), std::string::npos);
  EXPECT_TRUE(r.err.empty());
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

// ---- the three modes
// -----------------------------------------------------------------------------

TEST(DoctorCli, SystemReportAndJson) {
  const result table = doctor({});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  EXPECT_NE(table.out.find("Transparent huge pages"), std::string::npos);
  EXPECT_NE(table.out.find("hugetlb pools"), std::string::npos);
  EXPECT_NE(table.out.find("MADV_COLLAPSE"), std::string::npos);
  EXPECT_NE(table.out.find("hardware counters"), std::string::npos);
  // Exit 1 exactly when a warning is printed; notes alone leave it 0.
  EXPECT_EQ(table.code == 1, table.out.find(". warning: ") != std::string::npos) << table.out;

  const result json = doctor({"--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  EXPECT_TRUE(valid_json(json.out)) << json.out;
  EXPECT_NE(json.out.find("\"schema\": \"hugepage-doctor/1\""), std::string::npos);
  EXPECT_NE(json.out.find("\"mode\": \"system\""), std::string::npos);
  EXPECT_NE(json.out.find("\"exit_code\": " + std::to_string(json.code)), std::string::npos);
  EXPECT_TRUE(json.err.empty()) << json.err;
}

// The doctor reports the effective PMD-size THP mode, and advises on it, where the per-size
// switch and the top-level one disagree (set for real; put back when the test ends).
TEST(DoctorCli, ReportsTheEffectiveThpModeOfBothSwitches) {
  const hugepage::test::thp_switches switches;
  if (!switches.why_unusable().empty()) {
    if (::geteuid() != 0 && !switches.per_size_absent()) GTEST_SKIP() << switches.why_unusable();
    if (required()) FAIL() << "HUGEPAGE_REQUIRE=1, but: " << switches.why_unusable();
    GTEST_SKIP() << switches.why_unusable();
  }
  const std::string kb = std::to_string(hugepage::thp_page_bytes() / 1024);
  struct combination {
    const char* top;
    const char* per_size;
    const char* effective;
  };
  for (const combination& c :
       {combination{"madvise", "never", "never"}, combination{"never", "madvise", "madvise"}}) {
    SCOPED_TRACE(std::string("enabled=") + c.top + ", per-size=" + c.per_size);
    ASSERT_TRUE(switches.set(c.top, c.per_size)) << std::strerror(errno);
    const result table = doctor({});
    ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
    EXPECT_NE(table.out.find(kb + "kB enabled  " + c.per_size + "\n"), std::string::npos)
        << table.out;
    EXPECT_NE(table.out.find(std::string("effective       ") + c.effective + " "),
              std::string::npos)
        << table.out;
    const bool off = std::string(c.effective) == "never";
    EXPECT_EQ(table.out.find("THP is off") != std::string::npos, off) << table.out;
    if (off) {
      // The command turns the per-size switch back to the top-level setting.
      EXPECT_NE(table.out.find("echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-" +
                               kb + "kB/enabled"),
                std::string::npos)
          << table.out;
    }
    const result json = doctor({"--json"});
    ASSERT_TRUE(valid_json(json.out)) << json.out;
    const auto thp = nlohmann::json::parse(json.out).at("system").at("thp");
    EXPECT_EQ(thp.at("enabled"), c.top);
    EXPECT_EQ(thp.at("pmd_enabled"), c.per_size);
    EXPECT_EQ(thp.at("effective"), c.effective);
  }
}

class DoctorKnownProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    process_ = std::make_unique<target>(std::vector<std::string>{"--thp", "64", "--hugetlb", "16"});
    if (!process_->ready()) {
      if (required()) FAIL() << "target failed: " << process_->line();
      GTEST_SKIP() << "target could not map its memory: " << process_->line();
    }
    if (static_cast<double>(process_->value("thp_bytes")) < mib * 64 * 0.99) {
      if (required()) FAIL() << "kernel gave little THP: " << process_->line();
      GTEST_SKIP() << "the kernel gave the target little THP (fragmented?): " << process_->line();
    }
  }
  static constexpr double mib = 1 << 20;
  std::unique_ptr<target> process_;
};

TEST_F(DoctorKnownProcess, TableWithinOnePercent) {
  const result r = doctor({"--pid", std::to_string(process_->pid())});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_NEAR(table_bytes(r.out, "on THP"), 64 * mib, 0.64 * mib) << r.out;
  EXPECT_NEAR(table_bytes(r.out, "on hugetlb 2 MiB"), 16 * mib, 0.16 * mib) << r.out;
  EXPECT_GE(table_bytes(r.out, "resident (RSS)"), 64 * mib) << r.out;
  EXPECT_NE(r.out.find("glibc"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/anon_hugepage"), std::string::npos) << r.out;
}

TEST_F(DoctorKnownProcess, JsonWithinOnePercent) {
  const result r = doctor({"--pid", std::to_string(process_->pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  ASSERT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_NEAR(json_number(r.out, "thp_bytes"), 64 * mib, 0.64 * mib);
  EXPECT_NEAR(json_number(r.out, "bytes", "\"page_bytes\": 2097152,"), 16 * mib, 0.16 * mib);
  EXPECT_NEAR(json_number(r.out, "hugetlb_bytes"), 16 * mib, 0.16 * mib);
  EXPECT_EQ(json_number(r.out, "pid"), process_->pid());
  EXPECT_NE(r.out.find("\"mode\": \"process\""), std::string::npos);
  EXPECT_NE(r.out.find("\"name\": \"glibc\""), std::string::npos);
}

TEST(DoctorCli, LargeProcessIsFast) {
  // 4000 separate mappings, 1 GiB touched: smaps is read once, pagemap not at all.
  target big({"--mappings", "4000", "--mapping-kib", "256"});
  if (!big.ready()) GTEST_SKIP() << "target failed: " << big.line();
  const auto start = std::chrono::steady_clock::now();
  const result r = doctor({"--pid", std::to_string(big.pid()), "--json"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_GE(json_number(r.out, "mappings"), 4000);
  EXPECT_LT(json_number(r.out, "elapsed_seconds"), 1.0);
  EXPECT_LT(seconds, 5.0);
}

// The starts of the per-mapping coverage rows in each format, in order.
std::vector<std::uintptr_t> table_coverage_starts(const std::string& out) {
  std::vector<std::uintptr_t> starts;
  const auto at = out.find("\nHuge pages per mapping (exact, from ");
  if (at == std::string::npos) return starts;
  std::istringstream lines(out.substr(at + 1));
  std::string line;
  std::getline(lines, line);  // the title
  std::getline(lines, line);  // the column names
  while (std::getline(lines, line) && line.rfind("  0x", 0) == 0) {
    starts.push_back(std::strtoull(line.c_str() + 2, nullptr, 16));
  }
  return starts;
}

std::vector<std::uintptr_t> prometheus_coverage_starts(const std::string& out,
                                                       const std::string& kind) {
  std::vector<std::uintptr_t> starts;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("hugepage_doctor_process_mapping_bytes{", 0) != 0) continue;
    if (line.find(",kind=\"" + kind + "\"}") == std::string::npos) continue;
    const auto at = line.find("start=\"");
    if (at != std::string::npos)
      starts.push_back(std::strtoull(line.c_str() + at + 7, nullptr, 16));
  }
  return starts;
}

TEST(DoctorCli, TenThousandMappingsInEveryFormatReadSmapsOnce) {
  // 10,000 mappings of 212 KiB (2 GiB mapped), 8 KiB of each touched. The doctor opens
  // /proc/PID/smaps once in every format (an LD_PRELOAD library counts the opens: smaps is the
  // page-table walk that made the per-mapping table cost the square of the process's size), and
  // every format carries the whole report, the per-mapping coverage included.
  target big({"--mappings", "10000", "--mapping-kib", "212", "--touch-kib", "8"});
  ASSERT_TRUE(big.ready()) << big.line();
  const std::string pid = std::to_string(big.pid());
  const std::string smaps = "/proc/" + pid + "/smaps";
  std::map<std::string, result> out;
  for (const std::string format : {"table", "json", "prometheus"}) {
    const int counter = ::memfd_create("smaps-opens", 0);  // inherited across exec
    ASSERT_GE(counter, 0) << std::strerror(errno);
    run_options o;
    o.in_child = [&] {
      std::string asan = "verify_asan_link_order=0";  // the counter goes first, before libasan
      if (const char* old = std::getenv("ASAN_OPTIONS")) asan = std::string(old) + ":" + asan;
      return ::setenv("LD_PRELOAD", HUGEPAGE_COUNT_OPENS, 1) == 0 &&
             ::setenv("HUGEPAGE_COUNT_OPENS_PATH", smaps.c_str(), 1) == 0 &&
             ::setenv("HUGEPAGE_COUNT_OPENS_FD", std::to_string(counter).c_str(), 1) == 0 &&
             ::setenv("ASAN_OPTIONS", asan.c_str(), 1) == 0;
    };
    out[format] = doctor({"--pid", pid, "--format", format}, o);
    struct stat st {};
    ASSERT_EQ(::fstat(counter, &st), 0);
    ::close(counter);
    const result& r = out[format];
    ASSERT_TRUE(r.code == 0 || r.code == 1) << format << ": " << r.err;
    EXPECT_EQ(st.st_size, 1) << format << ": opens of " << smaps;
  }
  // The table: the header's count, the advice, and the coverage table of the 10 largest.
  const std::string& table = out["table"].out;
  const auto header = table.find(" mappings, read in ");
  ASSERT_NE(header, std::string::npos) << table;
  EXPECT_GE(std::strtoull(table.c_str() + table.rfind(", ", header) + 2, nullptr, 10), 10000u);
  EXPECT_NE(table.find("\nAdvice"), std::string::npos) << table;
  const std::vector<std::uintptr_t> rows = table_coverage_starts(table);
  EXPECT_EQ(rows.size(), 10u) << table;
  // JSON: the same report, the same rows.
  const nlohmann::json doc = nlohmann::json::parse(out["json"].out);
  const nlohmann::json& process = doc.at("process");
  EXPECT_GE(process.at("mappings").get<std::size_t>(), 10000u);
  EXPECT_TRUE(doc.at("advice").is_array());
  std::vector<std::uintptr_t> json_rows;
  for (const auto& row : process.at("mapping_coverage")) {
    json_rows.push_back(std::strtoull(row.at("start").get<std::string>().c_str(), nullptr, 16));
    EXPECT_GT(row.at("resident_bytes").get<std::size_t>(), 0u);
    EXPECT_EQ(row.at("source").get<std::string>(), "pagemap_scan");
    EXPECT_TRUE(row.at("exact").get<bool>());
  }
  // Each run reads the process anew; the largest mappings do not change while the target waits.
  EXPECT_EQ(json_rows, rows);
  // Prometheus: three samples per row, and the process's other families.
  const std::string& prom = out["prometheus"].out;
  EXPECT_EQ(prometheus_coverage_starts(prom, "resident"), rows);
  EXPECT_EQ(prometheus_coverage_starts(prom, "huge"), rows);
  EXPECT_EQ(prometheus_coverage_starts(prom, "smaps_huge"), rows);
  EXPECT_NE(prom.find("\nhugepage_doctor_process_read_seconds{"), std::string::npos);
  EXPECT_NE(prom.find("\nhugepage_doctor_warnings "), std::string::npos) << prom.substr(0, 2000);
}

// ---- a block of the 1 GiB cascade ---------------------------------------------------------------

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::size_t kGiB = std::size_t{1} << 30;
constexpr std::size_t kBlock = kGiB + kGiB / 2;

// Skips where the 1 GiB allocator lays a 1.5 GiB block on two whole 1 GiB pages (kernels before
// 6.12, strategy.hpp): there is no tail to join.
#define SKIP_WITHOUT_COMPOSITE_BLOCKS()                                                          \
  do {                                                                                           \
    const auto layout_ =                                                                         \
        hugepage::huge_page_allocator<char, hugepage::page_size::huge_1g>::get_strategy()        \
            .layout_of(kBlock);                                                                  \
    if (layout_.head == layout_.length) {                                                        \
      GTEST_SKIP() << "before Linux 6.12 the 1 GiB allocator maps 1.5 GiB on whole 1 GiB pages"; \
    }                                                                                            \
  } while (0)

// The entry of a --pid --json document that starts at `start` (null when none does).
nlohmann::json entry_at(const std::string& out, std::uintptr_t start) {
  const auto doc = nlohmann::json::parse(out);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%jx", static_cast<std::uintmax_t>(start));
  for (const auto& entry : doc.at("process").at("largest_anonymous")) {
    if (entry.at("start") == hex) return entry;
  }
  return nullptr;
}

// A target that could not allocate the block: skipped (or failed under HUGEPAGE_REQUIRE) only
// when another process drained a pool since the check; any other error is the library's.
#define SKIP_IF_POOL_RACED(t)                                                                  \
  do {                                                                                         \
    if (!(t).ready()) {                                                                        \
      ASSERT_NE((t).line().find("pool exhausted"), std::string::npos) << (t).line();           \
      HUGEPAGE_SKIP_OR_FAIL("a pool was drained by another process meanwhile: " + (t).line()); \
    }                                                                                          \
  } while (0)

TEST(DoctorCascadeBlock, OneGiBPageAndTwoMiBPagesAreOneEntry) {
  SKIP_WITHOUT_COMPOSITE_BLOCKS();
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_1g, 1);
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_2m, kGiB / 2 / (2 * kMiB));
  target t({"--block-1g", std::to_string(kBlock / kMiB)});
  SKIP_IF_POOL_RACED(t);
  ASSERT_EQ(t.value("block_1g"), kGiB) << t.line();
  if (t.value("block_2m") != kGiB / 2) {
    // The tail went to THP: the 2 MiB pool was short when the block was mapped.
    HUGEPAGE_SKIP_OR_FAIL("the 2 MiB pool was drained by another process meanwhile: " + t.line());
  }
  const std::string pid = std::to_string(t.pid());
  const result json = doctor({"--pid", pid, "--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  const nlohmann::json entry = entry_at(json.out, t.value("block_start"));
  ASSERT_FALSE(entry.is_null()) << t.line() << "\n" << json.out;
  EXPECT_EQ(entry.at("size_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("resident_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("huge_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("mappings_joined"), 2) << entry.dump(2);
  EXPECT_EQ(entry.at("pages"), nlohmann::json::parse(R"json([
    {"page_bytes": 1073741824, "kind": "hugetlb", "bytes": 1073741824},
    {"page_bytes": 2097152, "kind": "hugetlb", "bytes": 536870912}])json"))
      << entry.dump(2);

  const result table = doctor({"--pid", pid});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  char row[64];
  std::snprintf(row, sizeof row, "\n  %-14jx    1.50 GiB    1.50 GiB    1.50 GiB  100.0%% ",
                static_cast<std::uintmax_t>(t.value("block_start")));
  const auto at = table.out.find(row);
  ASSERT_NE(at, std::string::npos) << row << "\n" << table.out;
  // The entry's second line: its split.
  const std::string split =
      "\n                 1G 1 GiB + 2M 512 MiB (2 mappings joined: one block)\n";
  EXPECT_EQ(table.out.compare(table.out.find('\n', at + 1), split.size(), split), 0) << table.out;
}

TEST(DoctorCascadeBlock, OneGiBPageAndThpTailAreOneEntry) {
  // The 2 MiB pool is emptied for the target alone by a hugetlb cgroup limit of 0 (the shared pool
  // is never drained), so the library leaves the tail on THP.
  SKIP_WITHOUT_COMPOSITE_BLOCKS();
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to limit the 2 MiB pool in a cgroup";
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_1g, 1);
  hugepage::test::scratch_cgroup cgroup("hugetlb");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  if (!cgroup.write("hugetlb.2MB.max", "0") || !cgroup.write("hugetlb.2MB.rsvd.max", "0")) {
    HUGEPAGE_SKIP_OR_FAIL("cannot write the hugetlb limits of " + cgroup.path() + ": " +
                          std::strerror(errno));
  }
  target t({"--cgroup", cgroup.path(), "--block-1g", std::to_string(kBlock / kMiB)});
  SKIP_IF_POOL_RACED(t);
  ASSERT_EQ(t.value("block_1g"), kGiB) << t.line();
  ASSERT_EQ(t.value("block_2m"), 0u) << t.line();
  const std::size_t thp = t.value("block_thp");
  if (thp < kGiB / 2 / 100 * 99) {
    HUGEPAGE_SKIP_OR_FAIL("THP got little of the tail here (memory fragmented?): " + t.line());
  }
  const result json = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  const nlohmann::json entry = entry_at(json.out, t.value("block_start"));
  ASSERT_FALSE(entry.is_null()) << t.line() << "\n" << json.out;
  EXPECT_EQ(entry.at("size_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("resident_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("mappings_joined"), 2) << entry.dump(2);
  EXPECT_EQ(entry.at("flags"), "hg") << entry.dump(2);
  const auto& pages = entry.at("pages");
  ASSERT_GE(pages.size(), 2u) << entry.dump(2);
  EXPECT_EQ(pages[0],
            nlohmann::json::parse(
                R"json({"page_bytes": 1073741824, "kind": "hugetlb", "bytes": 1073741824})json"));
  EXPECT_EQ(pages[1].at("kind"), "thp");
  EXPECT_EQ(pages[1].at("page_bytes"), hugepage::thp_page_bytes());
  // smaps and backing_of() (PAGEMAP_SCAN) count the same THP, within one huge page.
  EXPECT_NEAR(pages[1].at("bytes").get<double>(), static_cast<double>(thp), 2.0 * kMiB);
  std::size_t sum = 0;
  for (const auto& share : pages) sum += share.at("bytes").get<std::size_t>();
  EXPECT_EQ(sum, kBlock) << entry.dump(2);
}

TEST(DoctorCli, ProbeJson) {
  const result r = doctor({"--probe", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_NE(r.out.find("\"mode\": \"probe\""), std::string::npos);
  EXPECT_NE(r.out.find("\"working_set_bytes\": 1073741824"), std::string::npos) << r.out;
  EXPECT_GT(json_number(r.out, "base_ns_per_access"), 0);
  // The huge buffers were checked with backing_of(): MADV_COLLAPSE works on this kernel, so they
  // are (nearly) all huge; where it does not, the row still runs and says so.
  EXPECT_GE(json_number(r.out, "huge_huge_fraction"), 0.0);
}

// In a memory cgroup too small for the 1 GiB row, --probe shrinks that row to fit the headroom
// and says so, instead of being OOM-killed while it populates.
TEST(DoctorCli, ProbeSizesItselfToTheMemoryCgroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a memory cgroup";
  const hugepage::test::scratch_cgroup cgroup("memory");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  const std::string limit = std::to_string(std::size_t{320} << 20);
  ASSERT_TRUE(cgroup.write("memory.max", limit) || cgroup.write("memory.limit_in_bytes", limit));
  run_options o;
  o.in_child = [&cgroup] { return cgroup.join(); };
  const result r = doctor({"--probe", "--json"}, o);
  ASSERT_EQ(r.code, 0) << "137 is an OOM kill; stderr: " << r.err;
  EXPECT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_NE(r.out.find("1 GiB reduced to "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(cgroup.path()), std::string::npos) << "names the limit file: " << r.out;
  EXPECT_EQ(r.out.find("\"working_set_bytes\": 1073741824"), std::string::npos) << r.out;
  EXPECT_GT(json_number(r.out, "base_ns_per_access"), 0);
}

// The Prometheus text exposition format, checked line by line: every sample's family declared
// by # HELP and # TYPE before it, valid metric and label names, label values with only the
// format's escapes, a number as value, no control byte, valid UTF-8. "" when it is fine.
std::string exposition_problem(const std::string& text) {
  const auto name_ok = [](const std::string& n) {
    if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    });
  };
  std::vector<std::string> typed;
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    for (const char c : line) {
      if (static_cast<unsigned char>(c) < 0x20) return "control byte in: " + line;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream w(line.substr(7));
      std::string name, type;
      w >> name >> type;
      if (!name_ok(name) || (type != "gauge" && type != "counter")) return "bad TYPE: " + line;
      typed.push_back(name);
      continue;
    }
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!name_ok(name)) return "bad metric name: " + line;
    if (std::find(typed.begin(), typed.end(), name) == typed.end()) return "no TYPE: " + line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const auto eq = line.find("=\"", i);
        if (eq == std::string::npos || !name_ok(line.substr(i, eq - i)))
          return "bad label: " + line;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\') {
            if (i + 1 >= line.size() || std::strchr("\\\"n", line[i + 1]) == nullptr) {
              return "bad escape: " + line;
            }
            ++i;
          }
        }
        if (i >= line.size()) return "open label value: " + line;
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return "open labels: " + line;
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return "no value: " + line;
    const std::string value = line.substr(i + 1);
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') return "bad value: " + line;
    ++samples;
  }
  try {
    (void)nlohmann::json(text).dump();  // throws on invalid UTF-8
  } catch (const std::exception& e) {
    return std::string("invalid UTF-8: ") + e.what();
  }
  return samples == 0 ? "no samples" : "";
}

TEST(DoctorCli, PrometheusFormat) {
  const result r = doctor({"--format", "prometheus"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_EQ(exposition_problem(r.out), "") << r.out;
  EXPECT_NE(r.out.find("\nhugepage_doctor_hugetlb_pool_pages{size_bytes=\"2097152\",node=\"all\","
                       "state=\"total\"} "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# TYPE hugepage_doctor_vmstat_total counter\n"), std::string::npos);
  const auto at = r.out.find("\nhugepage_doctor_warnings ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(std::strtol(r.out.c_str() + at + 26, nullptr, 10) > 0, r.code == 1) << r.out;
  EXPECT_EQ(exposition_problem("x 1\n"), "no TYPE: x 1");  // the checker itself
  EXPECT_EQ(exposition_problem("# TYPE x gauge\nx{a=\"\x1b\"} 1\n"),
            "control byte in: x{a=\"\x1b\"} 1");
}

// ---- odd targets --------------------------------------------------------------------------------

TEST(DoctorCli, ZombieHasItsOwnExitCode) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  // Not reaped yet: a zombie until waitpid below.
  for (int i = 0; i < 200; ++i) {
    char state = '?';
    if (FILE* f = std::fopen(("/proc/" + std::to_string(child) + "/stat").c_str(), "r")) {
      (void)std::fscanf(f, "%*d (%*[^)]) %c", &state);
      std::fclose(f);
    }
    if (state == 'Z') break;
    ::usleep(5000);
  }
  // Every mode that takes --pid: the report, and collapse with and without --dry-run.
  for (const std::vector<std::string>& mode :
       std::vector<std::vector<std::string>>{{}, {"--collapse"}, {"--collapse", "--dry-run"}}) {
    std::vector<std::string> args{"--pid", std::to_string(child)};
    args.insert(args.end(), mode.begin(), mode.end());
    const result r = doctor(args);
    EXPECT_EQ(r.code, 3) << args.size() << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("is a zombie"), std::string::npos) << r.err;
  }
  ::waitpid(child, nullptr, 0);
}

TEST(DoctorCli, KernelThreadHasItsOwnExitCode) {
  // kthreadd is pid 2 on every Linux with kernel threads visible in this pid namespace.
  std::string comm;
  if (FILE* f = std::fopen("/proc/2/comm", "r")) {
    char buffer[64] = {};
    if (std::fgets(buffer, sizeof buffer, f) != nullptr) comm = buffer;
    std::fclose(f);
  }
  if (comm != "kthreadd\n") GTEST_SKIP() << "pid 2 is not kthreadd here (a pid namespace?)";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--pid", "2", "--json"},
                                             {"--pid", "2", "--collapse"},
                                             {"--pid", "2", "--collapse", "--dry-run", "--json"}}) {
    const result r = doctor(args);
    EXPECT_EQ(r.code, 4) << args.back() << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err,
              "hugepage-doctor: pid 2 is a kernel thread: it has no user memory to report\n");
  }
}

TEST(DoctorCli, TargetThatExitsWhileReadGivesNoReport) {
  for (const bool reap : {true, false}) {
    target t({});
    ASSERT_TRUE(t.ready()) << t.line();
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    // The doctor stops between reading the target and checking it again; the target dies then.
    std::thread killer([&] {
      char byte = 0;
      if (::read(pair[0], &byte, 1) == 1) {
        t.kill(reap);
        if (!reap) ::usleep(50000);  // let it become a zombie
        (void)!::write(pair[0], &byte, 1);
      }
    });
    run_options o;
    o.keep_fd = pair[1];
    const std::string fd = std::to_string(pair[1]);
    o.in_child = [fd] { return ::setenv("HUGEPAGE_DOCTOR_TEST_HOOK_FD", fd.c_str(), 1) == 0; };
    const result r = doctor({"--pid", std::to_string(t.pid()), "--json"}, o);
    ::close(pair[1]);
    killer.join();
    ::close(pair[0]);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << "no partial report: " << r.out;
    EXPECT_NE(r.err.find("exited while being read; no report"), std::string::npos) << r.err;
  }
}

TEST(DoctorCli, HidepidSaysWhy) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to mount a proc with hidepid=2";
  run_options o;
  o.uid = 65534;
  o.in_child = [] {
    return ::unshare(CLONE_NEWNS) == 0 &&
           ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") == 0;
  };
  const result r = doctor({"--pid", "1"}, o);
  if (r.code == 97) {
    HUGEPAGE_SKIP_OR_FAIL("cannot mount proc with hidepid=2 in a private mount namespace here");
  }
  if (r.code == 98 || r.code == 99) GTEST_SKIP() << "cannot exec the doctor as nobody";
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("no process with pid 1 visible: /proc is mounted hidepid="),
            std::string::npos)
      << r.err;
}

// ---- hostile targets ----------------------------------------------------------------------------

// A shell-words splitter (POSIX sh rules for quotes and backslashes). It refuses what a shell
// would expand or treat as a command boundary when unquoted ($, `, |, &, <, newline, glob
// characters, a leading ~ or #), except the operators "&&", "||", ";", "(", ")", ">", ">>" and
// ">&", which come back as tokens of their own (the words around them are checked like any
// other). nullopt: the line is not plain shell.
struct shell_token {
  std::string text;
  bool op = false;
};

std::optional<std::vector<shell_token>> shell_words(const std::string& line) {
  std::vector<shell_token> out;
  std::string word;
  bool in_word = false;
  const auto finish = [&] {
    if (in_word) out.push_back({word, false});
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      finish();
    } else if (c == '\'') {
      const auto close = line.find('\'', i + 1);
      if (close == std::string::npos) return std::nullopt;
      word += line.substr(i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else if (c == '"') {
      in_word = true;
      for (++i;; ++i) {
        if (i >= line.size()) return std::nullopt;
        if (line[i] == '"') break;
        if (line[i] == '$' || line[i] == '`') return std::nullopt;
        if (line[i] == '\\' && i + 1 < line.size() && std::strchr("$`\"\\\n", line[i + 1])) ++i;
        word += line[i];
      }
    } else if (c == '\\') {
      if (i + 1 >= line.size()) return std::nullopt;
      word += line[++i];
      in_word = true;
    } else if ((c == '&' || c == '|') && i + 1 < line.size() && line[i + 1] == c && !in_word) {
      out.push_back({std::string(2, c), true});
      ++i;
    } else if (c == '>' && !in_word) {
      const bool two = i + 1 < line.size() && (line[i + 1] == '>' || line[i + 1] == '&');
      out.push_back({two ? line.substr(i, 2) : ">", true});
      i += two ? 1 : 0;
    } else if (c == ';' || c == '(' || c == ')') {
      finish();
      out.push_back({std::string(1, c), true});
    } else if (std::strchr("$`|&<>\n*?[{}", c) != nullptr || (!in_word && (c == '~' || c == '#'))) {
      return std::nullopt;
    } else {
      word += c;
      in_word = true;
    }
  }
  finish();
  return out;
}

TEST(DoctorCli, ShellWordsSplitter) {
  // The splitter itself, so the hostile test below can trust it.
  auto w = shell_words("printf '%s\\n' 'a b' c\\ d > /x && echo \"q\"");
  ASSERT_TRUE(w.has_value());
  ASSERT_EQ(w->size(), 9u);
  EXPECT_EQ((*w)[1].text, "%s\\n");
  EXPECT_EQ((*w)[2].text, "a b");
  EXPECT_EQ((*w)[3].text, "c d");
  EXPECT_TRUE((*w)[4].op);
  EXPECT_EQ((*w)[8].text, "q");
  w = shell_words("(set -C; printf x >> /y) || echo 'no' >&2");
  ASSERT_TRUE(w.has_value());
  ASSERT_EQ(w->size(), 14u);
  EXPECT_TRUE((*w)[0].op);
  EXPECT_EQ((*w)[2].text, "-C");
  EXPECT_TRUE((*w)[3].op);
  EXPECT_EQ((*w)[6].text, ">>");
  EXPECT_EQ((*w)[8].text, ")");
  EXPECT_EQ((*w)[9].text, "||");
  EXPECT_EQ((*w)[12].text, ">&");
  for (const char* bad :
       {"a $(b)", "a `b`", "a | b", "'open", "a\nb", "x *", "\"$HOME\"", "~/x", "a & b"}) {
    EXPECT_FALSE(shell_words(bad).has_value()) << bad;
  }
}

// Text a hostile process controls, each piece carrying the marker HOSTILE.
const std::string hostile_title =
    "HOSTILE;reboot $(reboot) `reboot` | rm -rf ~ \x1b[31m\x1b]0;title\x07 \xff\xfe\xc2\x9b"
    "'\"\\ end";

bool is_cgroup2(const char* path) {
  struct stat st {};
  return ::stat((std::string(path) + "/cgroup.procs").c_str(), &st) == 0 &&
         ::stat((std::string(path) + "/cgroup.controllers").c_str(), &st) == 0;
}

// The hierarchy systemd names units in: cgroup v2 at /sys/fs/cgroup, or v1 name=systemd at
// /sys/fs/cgroup/systemd (hybrid machines); "" when neither is mounted.
std::string unit_hierarchy() {
  struct stat st {};
  if (is_cgroup2("/sys/fs/cgroup")) return "/sys/fs/cgroup";
  if (::stat("/sys/fs/cgroup/systemd/cgroup.procs", &st) == 0) return "/sys/fs/cgroup/systemd";
  return "";
}

// A child cgroup of unit_hierarchy() for one test; the target is moved back and the directory
// removed at the end.
class test_cgroup {
 public:
  explicit test_cgroup(const std::string& name)
      : base_(unit_hierarchy()), path_(base_ + "/" + name) {
    if (::geteuid() != 0 || base_.empty()) return;
    ok_ = ::mkdir(path_.c_str(), 0755) == 0;
  }
  ~test_cgroup() {
    if (!ok_) return;
    for (const pid_t pid : added_) write_pid(base_ + "/cgroup.procs", pid);
    ::rmdir(path_.c_str());
  }
  test_cgroup(const test_cgroup&) = delete;
  test_cgroup& operator=(const test_cgroup&) = delete;
  bool add(pid_t pid) {
    if (!ok_ || !write_pid(path_ + "/cgroup.procs", pid)) return false;
    added_.push_back(pid);
    return true;
  }

 private:
  static bool write_pid(const std::string& file, pid_t pid) {
    FILE* f = std::fopen(file.c_str(), "w");
    if (f == nullptr) return false;
    const bool written = std::fprintf(f, "%d\n", static_cast<int>(pid)) > 0;
    return std::fclose(f) == 0 && written;
  }
  std::string base_, path_;
  bool ok_ = false;
  std::vector<pid_t> added_;
};

// Every command line of a --json document, checked: it parses as plain shell words, and no word
// holds text the target controls.
// The one exception: a word that is exactly one of `kept`, the merged value of a variable the
// advice sets, which keeps what the target had in it (counted in `kept_seen`).
void expect_safe_commands(const nlohmann::json& doc, const std::string& context,
                          std::size_t& commands_seen, const std::vector<std::string>& kept = {},
                          std::size_t* kept_seen = nullptr) {
  for (const auto& a : doc.at("advice")) {
    for (const auto& c : a.at("commands")) {
      const std::string line = c.get<std::string>();
      ++commands_seen;
      const auto words = shell_words(line);
      ASSERT_TRUE(words.has_value()) << context << ": not plain shell: " << line;
      for (const auto& w : *words) {
        if (std::find(kept.begin(), kept.end(), w.text) != kept.end()) {
          if (kept_seen != nullptr) ++*kept_seen;
          continue;
        }
        EXPECT_EQ(w.text.find("HOSTILE"), std::string::npos) << context << ": " << line;
        EXPECT_EQ(w.text.find("reboot"), std::string::npos) << context << ": " << line;
        for (const char ch : w.text) {
          EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 && ch != '\n')
              << context << ": control byte in " << line;
        }
      }
    }
  }
}

TEST(DoctorCli, HostileTargetCannotReachACommandOrTheTerminal) {
  // 600 MiB of plain anonymous memory without huge pages: enough for allocator advice, which
  // carries a command. Its title, environment and a mapping name are hostile.
  const std::vector<std::string> env{"MALLOC_CONF=HOSTILE;reboot",
                                     "GLIBC_TUNABLES=HOSTILE$(reboot)",
                                     "LD_PRELOAD=",
                                     "JAVA_TOOL_OPTIONS=HOSTILE `reboot`",
                                     "PATH=/usr/bin:/bin",
                                     std::string("HOSTILE_VAR=") + hostile_title};
  target t({"--anon", "600", "--memfd-name", hostile_title.substr(0, 200), "--comm",
            "H\x1b[2J\"\\;$(x)\xff"},
           hostile_title, &env);
  ASSERT_TRUE(t.ready()) << t.line();
  std::size_t commands_seen = 0, kept_seen = 0;
  // The target's GLIBC_TUNABLES is kept in the one the advice sets: as one word, exactly.
  const std::vector<std::string> kept{"GLIBC_TUNABLES=HOSTILE$(reboot):glibc.malloc.hugetlb=1"};
  const auto check = [&](const std::string& context) {
    const result table = doctor({"--pid", std::to_string(t.pid())});
    ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
    for (const char ch : table.out) {
      const auto c = static_cast<unsigned char>(ch);
      ASSERT_TRUE(c >= 0x20 || ch == '\n') << context << ": raw control byte " << int(c);
    }
    EXPECT_EQ(table.out.find("\xff"), std::string::npos) << context << ": invalid UTF-8 shown";
    EXPECT_EQ(table.out.find("\xc2\x9b"), std::string::npos) << context << ": C1 CSI shown";
    EXPECT_NE(table.out.find("HOSTILE;reboot"), std::string::npos)
        << context << ": the title is shown, escaped";
    // Table commands are the lines after "$ ".
    std::size_t at = 0;
    while ((at = table.out.find("     $ ", at)) != std::string::npos) {
      const auto end = table.out.find('\n', at);
      const std::string line = table.out.substr(at + 7, end - at - 7);
      const auto words = shell_words(line);
      ASSERT_TRUE(words.has_value()) << context << ": " << line;
      for (const auto& w : *words) {
        if (w.text == kept[0]) continue;
        EXPECT_EQ(w.text.find("HOSTILE"), std::string::npos) << line;
      }
      at = end;
    }
    const result json = doctor({"--pid", std::to_string(t.pid()), "--json"});
    ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(json.out)) << context << ": " << json.out;
    EXPECT_EQ(doc.at("exit_code").get<int>(), json.code);
    EXPECT_NE(doc.at("process").at("title").get<std::string>().find("HOSTILE;reboot"),
              std::string::npos);
    expect_safe_commands(doc, context, commands_seen, kept, &kept_seen);
    const result prom = doctor({"--pid", std::to_string(t.pid()), "--format", "prometheus"});
    ASSERT_TRUE(prom.code == 0 || prom.code == 1) << prom.err;
    EXPECT_EQ(exposition_problem(prom.out), "") << context << prom.out;
    // status Name already escapes a backslash as \\ (the kernel's), printable() doubles that,
    // the label value doubles it again; the quote gets \", ESC and 0xff their \x form.
    EXPECT_NE(prom.out.find(R"(comm="H\\x1b[2J\"\\\\\\\\;$(x)\\xff")"), std::string::npos)
        << context << ": comm escaped: " << prom.out;
    EXPECT_NE(prom.out.find("hugepage_doctor_process_bytes{pid=\"" + std::to_string(t.pid()) +
                            "\",kind=\"anonymous\"}"),
              std::string::npos);
  };
  check("plain");
  // In a cgroup named like a service by someone hostile: refused as a unit name.
  {
    test_cgroup hostile("HOSTILE;reboot $(reboot).service");
    if (hostile.add(t.pid())) check("hostile cgroup name");
  }
  EXPECT_GT(commands_seen, 0u) << "the target drew no advice with a command: nothing was tested";
  EXPECT_GT(kept_seen, 0u) << "no command kept the target's GLIBC_TUNABLES";
}

// The advice for a target run with glibc.malloc.arena_max=2 keeps that tunable.
TEST(DoctorCli, CommandKeepsTheTargetsGlibcTunables) {
  if (hugepage::read_thp_mode() != hugepage::thp_mode::madvise) {
    GTEST_SKIP() << "the glibc tunable is advised under THP enabled=madvise only";
  }
  const std::vector<std::string> env{"GLIBC_TUNABLES=glibc.malloc.arena_max=2",
                                     "PATH=/usr/bin:/bin"};
  target t({"--anon", "600"}, "", &env);
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_EQ(r.code, 1) << r.err << r.out;
  const auto doc = nlohmann::json::parse(r.out);
  std::vector<std::string> commands;
  for (const auto& a : doc.at("advice")) {
    if (a.at("id") == "glibc_without_hugetlb_tunable") commands = a.at("commands");
  }
  EXPECT_EQ(commands,
            std::vector<std::string>{
                "export GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"})
      << r.out;
}

TEST(DoctorCli, ServiceUnitFromCgroupGoesIntoTheDropIn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to create a cgroup";
  if (unit_hierarchy().empty()) {
    HUGEPAGE_SKIP_OR_FAIL("no cgroup v2 at /sys/fs/cgroup and no v1 name=systemd hierarchy");
  }
  target t({"--anon", "600"}, "HOSTILE;reboot");
  ASSERT_TRUE(t.ready()) << t.line();
  const std::string unit = "hugepage-doctor-test-" + std::to_string(::getpid()) + ".service";
  test_cgroup group(unit);
  ASSERT_TRUE(group.add(t.pid()));
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("process").at("systemd_unit"), unit);
  std::size_t seen = 0;
  expect_safe_commands(doc, "unit", seen);
  bool restart = false;
  for (const auto& a : doc.at("advice")) {
    for (const auto& c : a.at("commands")) restart = restart || c == "systemctl restart " + unit;
  }
  EXPECT_TRUE(restart) << r.out;
}

}  // namespace
