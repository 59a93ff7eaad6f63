// tools/test/doctor_cli_hostile_test.cpp - hostile targets: nothing a process controls reaches a
// command unquoted or the terminal unescaped; settings and unit names that do go into commands.
#include "doctor_cli_support.hpp"

namespace {

using namespace doctor_cli;

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
  target t({"--malloc-chunks", "150", "--chunk-kib", "4096", "--memfd-name",
            hostile_title.substr(0, 200), "--comm", "H\x1b[2J\"\\;$(x)\xff"},
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
  target t({"--malloc-chunks", "150", "--chunk-kib", "4096"}, "", &env);
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
  target t({"--malloc-chunks", "150", "--chunk-kib", "4096"}, "HOSTILE;reboot");
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

// A cgroup below a user manager, named like a system service: whoever owns the user manager
// names it, so no drop-in and no restart for that system unit; the export stands in.
TEST(DoctorCli, ServiceNamedCgroupBelowAUserManagerIsNoUnit) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to create a cgroup";
  if (unit_hierarchy().empty()) {
    HUGEPAGE_SKIP_OR_FAIL("no cgroup v2 at /sys/fs/cgroup and no v1 name=systemd hierarchy");
  }
  target t({"--malloc-chunks", "150", "--chunk-kib", "4096"}, "HOSTILE;reboot");
  ASSERT_TRUE(t.ready()) << t.line();
  const std::string top = "hugepage-doctor-test-" + std::to_string(::getpid()) + ".slice";
  test_cgroup slice(top);
  test_cgroup user(top + "/user-1000.slice");
  test_cgroup manager(top + "/user-1000.slice/user@1000.service");
  test_cgroup app(top + "/user-1000.slice/user@1000.service/app.slice");
  test_cgroup leaf(top + "/user-1000.slice/user@1000.service/app.slice/sshd.service");
  ASSERT_TRUE(leaf.add(t.pid()));
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc.at("process").at("systemd_unit").is_null()) << r.out;
  std::size_t commands = 0;
  bool exported = false;
  for (const auto& a : doc.at("advice")) {
    for (const auto& c : a.at("commands")) {
      const std::string command = c.get<std::string>();
      ++commands;
      EXPECT_EQ(command.find("systemctl"), std::string::npos) << command;
      EXPECT_EQ(command.find("/etc/systemd/system"), std::string::npos) << command;
      exported = exported || command.rfind("export ", 0) == 0;
    }
  }
  EXPECT_GT(commands, 0u) << r.out;
  EXPECT_TRUE(exported) << r.out;
}

}  // namespace
