// tools/test/doctor_cli_test.cpp - the real hugepage-doctor binary: bad input, exit codes, JSON,
// and a process with known memory (hugepage-doctor-target) reported within 1%.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

struct result {
  int code = -1;
  std::string out, err;
};

// Runs argv[0] with the arguments, capturing stdout and stderr. `uid` >= 0: drop to that user
// (and its group) in the child first.
result run(const std::vector<std::string>& args, int uid = -1) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
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

result doctor(std::vector<std::string> args, int uid = -1) {
  args.insert(args.begin(), HUGEPAGE_DOCTOR_BINARY);
  return run(args, uid);
}

bool required() {
  const char* v = std::getenv("HUGEPAGE_REQUIRE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// A running hugepage-doctor-target; stops when destroyed (closes its stdin).
class target {
 public:
  explicit target(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      std::vector<std::string> all{HUGEPAGE_DOCTOR_TARGET};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (const auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(98);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    char ch;
    while (::read(out[0], &ch, 1) == 1 && ch != '\n') line_ += ch;
    ::close(out[0]);
  }
  ~target() {
    if (stdin_ >= 0) ::close(stdin_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  target(const target&) = delete;
  target& operator=(const target&) = delete;

  pid_t pid() const { return pid_; }
  bool ready() const { return line_.rfind("ready ", 0) == 0; }
  const std::string& line() const { return line_; }
  std::size_t value(const std::string& key) const {
    const auto at = line_.find(key + "=");
    return at == std::string::npos
               ? 0
               : std::strtoull(line_.c_str() + at + key.size() + 1, nullptr, 10);
  }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::string line_;
};

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
  EXPECT_NE(r.out.find("1  advice given"), std::string::npos);
  EXPECT_NE(r.out.find("2  error"), std::string::npos);
  EXPECT_TRUE(r.err.empty());
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
                     "hugepage-doctor: unknown option '--frobnicate' (try --help)");
  expect_usage_error({"-x"}, "unknown option '-x'");
  expect_usage_error({"stray"}, "unexpected argument 'stray'");
  expect_usage_error({"--probe=yes"}, "--probe takes no value");
  expect_usage_error({"--top", "0", "--pid", "1"}, "--top: '0' is not a positive count");
}

TEST(DoctorCli, PidWithoutValue) {
  expect_usage_error({"--pid"}, "--pid needs a process id");
  expect_usage_error({"--pid="}, "--pid needs a process id");
}

TEST(DoctorCli, PidNotANumber) {
  expect_usage_error({"--pid", "abc"}, "--pid: 'abc' is not a process id (a positive integer)");
  expect_usage_error({"--pid", "-5"}, "--pid: '-5' is not a process id");
  expect_usage_error({"--pid=12x"}, "--pid: '12x' is not a process id");
  expect_usage_error({"--pid", "0"}, "--pid: '0' is not a process id");
  expect_usage_error({"--pid", "99999999999999999999"}, "is not a process id");
}

TEST(DoctorCli, PidAndProbeTogether) {
  expect_usage_error({"--pid", "1", "--probe"}, "--pid and --probe cannot be combined");
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
    EXPECT_NE(r.err.find("hugepage-doctor: cannot read /proc/1/smaps: Permission denied (run as "
                         "root or as the user that owns pid 1)"),
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
  EXPECT_EQ(table.code == 1, table.out.find("\n  1. ") != std::string::npos);

  const result json = doctor({"--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  EXPECT_TRUE(valid_json(json.out)) << json.out;
  EXPECT_NE(json.out.find("\"schema\": \"hugepage-doctor/1\""), std::string::npos);
  EXPECT_NE(json.out.find("\"mode\": \"system\""), std::string::npos);
  EXPECT_NE(json.out.find("\"exit_code\": " + std::to_string(json.code)), std::string::npos);
  EXPECT_TRUE(json.err.empty()) << json.err;
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

}  // namespace
