// tools/test/doctor_advise_commands_test.cpp - the commands process advice prints: settings merged
// into what is there, quoted or refused, drop-ins that never replace a file, no process title.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "advice.hpp"
#include "advise_process.hpp"
#include "doctor_advise_support.hpp"
#include "process_environ.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

TEST(DoctorAdvice, JemallocWithoutThpAsADropInOrAnExport) {
  process_report p = big_process("jemalloc");
  auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "jemalloc_without_thp");
  EXPECT_EQ(a.message.rfind("11 GiB anonymous memory, 0.2% huge; jemalloc runs without", 0), 0u)
      << a.message;
  EXPECT_EQ(a.commands,
            std::vector<std::string>{"export MALLOC_CONF=thp:always,metadata_thp:auto"});
  p.unit = "fared.service";
  list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "jemalloc_without_thp").commands,
            (std::vector<std::string>{
                "mkdir -p /etc/systemd/system/fared.service.d && (set -C; printf '%s\\n' "
                "'[Service]' 'Environment=\"MALLOC_CONF=thp:always,metadata_thp:auto\"' > "
                "/etc/systemd/system/fared.service.d/zz-hugepage-doctor-MALLOC_CONF.conf)",
                "systemctl daemon-reload", "systemctl restart fared.service"}));
  EXPECT_NE(only(list, "jemalloc_without_thp").message.find("a drop-in of its own for fared"),
            std::string::npos);
}

// Runs `script` with /bin/sh; its exit status and stdout.
std::pair<int, std::string> run_shell(const std::string& script) {
  FILE* pipe = ::popen(("/bin/sh -c " + shell_quote(script)).c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  char buffer[256];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The value a printed "export NAME=..." command gives NAME in a POSIX shell.
std::string exported(const std::string& command, const std::string& name) {
  return run_shell(command + "; printf '%s' \"$" + name + "\"").second;
}

TEST(DoctorAdvice, EnvironmentSettingKeepsWhatIsThere) {
  // glibc: an existing tunable is kept, an existing hugetlb entry replaced where it stands and
  // its later duplicates dropped (the last one would win).
  auto list =
      advise_process(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}}, "2.36"),
                     healthy_system());
  const advice glibc = only(list, "glibc_without_hugetlb_tunable");
  EXPECT_EQ(glibc.commands,
            std::vector<std::string>{
                "export GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"});
  EXPECT_NE(std::find(glibc.evidence.begin(), glibc.evidence.end(),
                      "GLIBC_TUNABLES=glibc.malloc.arena_max=2 now (/proc/PID/environ): merged, "
                      "the rest kept"),
            glibc.evidence.end());
  list = advise_process(
      big_process("glibc",
                  {{"GLIBC_TUNABLES",
                    "glibc.malloc.hugetlb=0:glibc.malloc.arena_max=2::glibc.malloc.hugetlb=0"}},
                  "2.36"),
      healthy_system());
  EXPECT_EQ(only(list, "glibc_without_hugetlb_tunable").commands,
            std::vector<std::string>{
                "export GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2"});
  // jemalloc: MALLOC_CONF entries are key:value, comma-separated.
  list = advise_process(
      big_process("jemalloc", {{"MALLOC_CONF", "narenas:4,thp:never,dirty_decay_ms:1000"}}),
      healthy_system());
  EXPECT_EQ(only(list, "jemalloc_without_thp").commands,
            std::vector<std::string>{"export MALLOC_CONF=narenas:4,thp:always,dirty_decay_ms:1000,"
                                     "metadata_thp:auto"});
  // Java options: a later flag wins, so the flag is appended to what is there.
  process_report jvm = big_process("glibc", {{"JAVA_TOOL_OPTIONS", "-Xmx1g -Dx=1"}}, "2.36");
  jvm.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                               std::string("java\0Main", 9), jvm.allocator.settings);
  EXPECT_EQ(only(advise_process(jvm, healthy_system()), "jvm_without_thp").commands,
            std::vector<std::string>{
                "export 'JAVA_TOOL_OPTIONS=-Xmx1g -Dx=1 -XX:+UseTransparentHugePages'"});
  // An environment the doctor cannot read: no command that could drop what it holds.
  process_report unknown = big_process("jemalloc");
  unknown.allocator.environ_readable = false;
  unknown.runtime = jvm.runtime;
  const advice java = only(advise_process(unknown, healthy_system()), "jvm_without_thp");
  EXPECT_TRUE(java.commands.empty());
  EXPECT_NE(java.message.find("add -XX:+UseTransparentHugePages to JAVA_TOOL_OPTIONS by hand"),
            std::string::npos)
      << java.message;
}

TEST(DoctorAdvice, GlibcTunablesSplitByGlibcKeepEveryEntry) {
  // /proc/PID/environ as glibc 2.36 leaves it for
  // GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0:glibc.malloc.trim_threshold=1.
  static constexpr char text[] =
      "GLIBC_TUNABLES=glibc.malloc.arena_max=2\0glibc.malloc.hugetlb=0\0"
      "glibc.malloc.trim_threshold=1\0HOME=/root\0";
  const auto list =
      advise_process(big_process("glibc", parse_allocator_environ({text, sizeof text - 1}), "2.36"),
                     healthy_system());
  EXPECT_EQ(only(list, "glibc_without_hugetlb_tunable").commands,
            std::vector<std::string>{"export GLIBC_TUNABLES=glibc.malloc.arena_max=2:"
                                     "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=1"});
}

TEST(DoctorAdvice, EnvironmentValueFromTheProcessIsQuotedOrRefused) {
  // Quotes, $, backticks: printable, so the command carries them, quoted; a shell gives the
  // variable exactly the merged value and runs nothing in it.
  const std::string hostile = "glibc.malloc.arena_max=2'$(touch /tmp/x)`id`\"; x";
  auto list =
      advise_process(big_process("glibc", {{"GLIBC_TUNABLES", hostile}}, "2.36"), healthy_system());
  const auto commands = only(list, "glibc_without_hugetlb_tunable").commands;
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0],
            "export 'GLIBC_TUNABLES=glibc.malloc.arena_max=2'\\''$(touch /tmp/x)`id`\"; "
            "x:glibc.malloc.hugetlb=1'");
  EXPECT_EQ(exported(commands[0], "GLIBC_TUNABLES"), hostile + ":glibc.malloc.hugetlb=1");
  // In a unit file '"' and '\\' would be unescaped by systemd: set by hand; '%' is doubled.
  process_report unit = big_process("glibc", {{"GLIBC_TUNABLES", hostile}}, "2.36");
  unit.unit = "fared.service";
  const advice refused =
      only(advise_process(unit, healthy_system()), "glibc_without_hugetlb_tunable");
  EXPECT_TRUE(refused.commands.empty());
  EXPECT_NE(refused.message.find("add glibc.malloc.hugetlb=1 to GLIBC_TUNABLES by hand"),
            std::string::npos)
      << refused.message;
  unit = big_process("glibc", {{"GLIBC_TUNABLES", "a=50%x y"}}, "2.36");
  unit.unit = "fared.service";
  EXPECT_NE(only(advise_process(unit, healthy_system()), "glibc_without_hugetlb_tunable")
                .commands.at(0)
                .find("'Environment=\"GLIBC_TUNABLES=a=50%%x y:glibc.malloc.hugetlb=1\"'"),
            std::string::npos);
  // Newlines, other control bytes, invalid UTF-8 and any non-ASCII character (one could reorder
  // what a terminal shows): no command at all, in either form.
  const std::string refused_values[] = {"a=1\nreboot", std::string("a=1\0b", 5), "a=\x1b[2J",
                                        "a=\xff",
                                        "a=\xe2\x80\xae"
                                        "1" /* U+202E, right-to-left override */};
  for (const std::string& value : refused_values) {
    for (const char* unit_name : {"", "fared.service"}) {
      process_report p = big_process("glibc", {{"GLIBC_TUNABLES", value}}, "2.36");
      p.unit = unit_name;
      const advice a = only(advise_process(p, healthy_system()), "glibc_without_hugetlb_tunable");
      EXPECT_TRUE(a.commands.empty()) << all_commands({a});
      EXPECT_NE(a.message.find("by hand"), std::string::npos) << a.message;
      EXPECT_EQ(a.level(), advice_level::warning);
    }
  }
}

TEST(DoctorAdvice, DropInsNeverReplaceAFile) {
  // One file per variable: advice for MALLOC_CONF and for GLIBC_TUNABLES never share one.
  process_report jemalloc = big_process("jemalloc");
  process_report glibc = big_process("glibc", {}, "2.36");
  jemalloc.unit = glibc.unit = "fared.service";
  const std::string a =
      only(advise_process(jemalloc, healthy_system()), "jemalloc_without_thp").commands.at(0);
  const std::string b =
      only(advise_process(glibc, healthy_system()), "glibc_without_hugetlb_tunable").commands.at(0);
  const auto file = [](const std::string& command) {
    return command.substr(command.rfind(" > ") + 3);
  };
  EXPECT_EQ(file(a), "/etc/systemd/system/fared.service.d/zz-hugepage-doctor-MALLOC_CONF.conf)");
  EXPECT_NE(file(a), file(b));
}

TEST(DoctorAdvice, DevShmOptionPersistsInFstabKeepingItsOptions) {
  process_report p;
  p.pid = 9;
  p.shmem = p.dev_shm = p.rss = 2 * gib;
  system_report s = healthy_system();  // shmem_enabled never
  s.dev_shm_options = "rw,nosuid,nodev,size=65536k,huge=never,mode=1777";
  const std::string command = only(advise_process(p, s), "shmem_without_thp").commands.back();
  EXPECT_NE(command.find("'tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=65536k,huge=within_size,"
                         "mode=1777 0 0' >> /etc/fstab"),
            std::string::npos)
      << command;
  // Run against a scratch file instead of /etc/fstab: appended once, never to a file that has
  // a /dev/shm line already (commented lines do not count).
  char dir[] = "/tmp/doctor-fstab-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fstab = std::string(dir) + "/fstab";
  std::string local = command;
  for (std::size_t at; (at = local.find("/etc/fstab")) != std::string::npos;) {
    local.replace(at, 10, fstab);
  }
  const std::string commented = "# tmpfs /dev/shm tmpfs defaults 0 0\n";
  run_shell("printf '" + commented + "' > " + fstab);
  EXPECT_EQ(run_shell(local).first, 0);
  const std::string line =
      "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=65536k,huge=within_size,"
      "mode=1777 0 0\n";
  EXPECT_EQ(run_shell("cat " + fstab).second, commented + line);
  run_shell(local);
  EXPECT_EQ(run_shell("cat " + fstab).second, commented + line) << "appended twice";
  const std::string own = "tmpfs\t/dev/shm tmpfs size=1g 0 0\n";
  run_shell("printf '" + own + "' > " + fstab);
  run_shell(local + " 2>/dev/null");
  EXPECT_EQ(run_shell("cat " + fstab).second, "tmpfs\t/dev/shm tmpfs size=1g 0 0\n");
  run_shell("rm -r " + std::string(dir));
  // Options that are not plain text (unknown here): the flags systemd mounts it with.
  s.dev_shm_options = std::nullopt;
  EXPECT_NE(only(advise_process(p, s), "shmem_without_thp")
                .commands.back()
                .find("'tmpfs /dev/shm tmpfs rw,nosuid,nodev,huge=within_size 0 0'"),
            std::string::npos);
}

TEST(DoctorAdvice, NoCommandHoldsTheProcessTitle) {
  for (const char* allocator : {"jemalloc", "glibc", "mimalloc", "tcmalloc", "unknown"}) {
    process_report p = big_process(allocator);
    p.thp_enabled = false;
    const std::string commands =
        all_commands(advise_process(p, healthy_system())) +
        all_commands(advise_process(big_process(allocator), healthy_system()));
    EXPECT_EQ(commands.find("rm -rf"), std::string::npos) << commands;
    EXPECT_EQ(commands.find("reboot"), std::string::npos) << commands;
    EXPECT_EQ(commands.find('\x1b'), std::string::npos) << commands;
  }
}

}  // namespace
}  // namespace hugepage::doctor
