// tools/test/doctor_text_test.cpp - shell quoting, terminal escaping, unit names, /proc/PID
// parsers for liveness and runtime, and the permission messages.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "allocator_detect.hpp"
#include "collect_process.hpp"
#include "debian_packages.hpp"
#include "process_access.hpp"
#include "process_environ.hpp"
#include "text.hpp"

namespace hugepage::doctor {
namespace {

TEST(DoctorText, ShellQuote) {
  EXPECT_EQ(shell_quote("madvise"), "madvise");
  EXPECT_EQ(shell_quote("/sys/kernel/mm/transparent_hugepage/enabled"),
            "/sys/kernel/mm/transparent_hugepage/enabled");
  EXPECT_EQ(shell_quote("MALLOC_CONF=thp:always,metadata_thp:auto"),
            "MALLOC_CONF=thp:always,metadata_thp:auto");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("$(reboot)"), "'$(reboot)'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("=cmd"), "'=cmd'");  // zsh expands a leading '='
  EXPECT_EQ(shell_quote("~root"), "'~root'");
  EXPECT_EQ(shell_quote("a\nb"), "'a\nb'");
  EXPECT_EQ(shell_line({"systemctl", "restart", "x y.service"}), "systemctl restart 'x y.service'");
  EXPECT_EQ(write_command("64", "/proc/sys/x"), "echo 64 > /proc/sys/x");
  EXPECT_EQ(file_command("/etc/a/b.conf", {"[Service]", "Environment=A=1"}, true),
            "mkdir -p /etc/a && printf '%s\\n' '[Service]' Environment=A=1 > /etc/a/b.conf");
}

// The command creates a file, and fails without touching one that exists.
TEST(DoctorText, NewFileCommandNeverReplacesAFile) {
  char dir[] = "/tmp/doctor-new-file-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/unit.d/x.conf";
  const std::string command = new_file_command(path, {"[Service]", "Environment=\"A=1 2\""});
  EXPECT_EQ(command, "mkdir -p " + std::string(dir) + "/unit.d && (set -C; printf '%s\\n' " +
                         "'[Service]' 'Environment=\"A=1 2\"' > " + path + ")");
  const auto sh = [](const std::string& c) {
    return std::system(("/bin/sh -c " + shell_quote(c) + " 2>/dev/null").c_str());
  };
  const auto content = [&] {
    std::string out;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buffer[256];
      std::size_t n;
      while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) out.append(buffer, n);
      std::fclose(f);
    }
    return out;
  };
  EXPECT_EQ(sh(command), 0);
  EXPECT_EQ(content(), "[Service]\nEnvironment=\"A=1 2\"\n");
  EXPECT_EQ(sh("printf 'mine\\n' > " + path), 0);
  EXPECT_NE(sh(command), 0) << "replaced an existing file";
  EXPECT_EQ(content(), "mine\n");
  sh("rm -r " + std::string(dir));
}

TEST(DoctorText, SystemdEnvironmentLine) {
  EXPECT_EQ(systemd_environment("A", "x:y=1"), "Environment=\"A=x:y=1\"");
  EXPECT_EQ(systemd_environment("A", "50% of it"), "Environment=\"A=50%% of it\"");
  EXPECT_EQ(systemd_environment("A", "$HOME'`x`"), "Environment=\"A=$HOME'`x`\"");
  for (const char* refused : {"a\"b", "a\\b", "a\nb", "a\x01", "caf\xc3\xa9", "\xff"}) {
    EXPECT_EQ(systemd_environment("A", refused), "") << refused;
  }
  EXPECT_TRUE(printable_ascii(" ~ 'x' $(y)"));
  EXPECT_FALSE(printable_ascii("\x7f"));
  EXPECT_FALSE(printable_ascii(std::string("a\0b", 3)));
}

TEST(DoctorText, PrintableEscapesControlsAndInvalidUtf8) {
  EXPECT_EQ(printable("redis-server *:6379"), "redis-server *:6379");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // valid UTF-8 stays
  EXPECT_EQ(printable("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(printable("a\nb\tc\x7f"), "a\\x0ab\\x09c\\x7f");
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\xc2\\x9b31m");                               // C1 CSI
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");  // overlong '/'
  EXPECT_EQ(printable("back\\slash"), "back\\\\slash");
  for (int c = 0; c < 256; ++c) {
    const std::string out = printable(std::string(1, static_cast<char>(c)) + "x");
    for (const char ch : out) EXPECT_GE(static_cast<unsigned char>(ch), 0x20) << c;
  }
}

TEST(DoctorText, SystemdUnitFromCgroup) {
  EXPECT_EQ(systemd_unit("0::/system.slice/redis-server.service\n"), "redis-server.service");
  EXPECT_EQ(systemd_unit("0::/system.slice/system-postgresql.slice/postgresql@15-main.service\n"),
            "postgresql@15-main.service");
  EXPECT_EQ(systemd_unit("0::/foo.service\n"), "foo.service");  // Slice=-.slice
  EXPECT_EQ(systemd_unit("12:hugetlb:/\n1:name=systemd:/system.slice/a.service\n0::/\n"),
            "a.service");
  EXPECT_EQ(systemd_unit("0::/user.slice/user-0.slice/session-3.scope\n"), "");
  EXPECT_EQ(systemd_unit("0::/\n"), "");
  EXPECT_EQ(systemd_unit(""), "");
}

// Below a user manager, a scope or a service, the cgroup tree is delegated: its owner names the
// cgroups, so a *.service there names no system unit (restarting it would hit one).
TEST(DoctorText, SystemdUnitNotFromDelegatedCgroup) {
  EXPECT_EQ(
      systemd_unit("0::/user.slice/user-1000.slice/user@1000.service/app.slice/sshd.service\n"),
      "");
  EXPECT_EQ(systemd_unit("0::/user.slice/user-1000.slice/user@1000.service/sshd.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/user.slice/user-1000.slice/user@1000.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/user.slice/user-1000.slice/user@1000.service/init.scope\n"), "");
  EXPECT_EQ(systemd_unit("0::/system.slice/a.service/sshd.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/system.slice/a.service/sub\n"), "");
  EXPECT_EQ(systemd_unit("0::/system.slice/a.service/x.slice/sshd.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/user.slice/user-1000.slice/session-3.scope/sshd.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/system.slice/a.service/\n"), "");
  // On a hybrid hierarchy the unified path decides: a v1 name=systemd path does not stand in.
  EXPECT_EQ(systemd_unit("1:name=systemd:/system.slice/sshd.service\n"
                         "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                         "sshd.service\n"),
            "");
  EXPECT_EQ(systemd_unit("1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/"
                         "sshd.service\n"),
            "");
}

TEST(DoctorText, SystemdUnitNameCharset) {
  // Whoever creates the cgroup chooses the name: anything outside the strict charset is refused.
  EXPECT_EQ(systemd_unit("0::/x;reboot.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/$(id).service\n"), "");
  EXPECT_EQ(systemd_unit("0::/a\\x2db.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/-rf.service\n"), "");
  EXPECT_EQ(systemd_unit("0::/a b.service\n"), "");
  EXPECT_TRUE(safe_unit_name("getty@tty1.service"));
  EXPECT_FALSE(safe_unit_name(".service"));
  EXPECT_FALSE(safe_unit_name("a.socket"));
}

TEST(DoctorText, EnvironOverwrittenByTitle) {
  EXPECT_FALSE(environ_overwritten(std::string("A=1\0B=2\0", 8)));
  EXPECT_FALSE(environ_overwritten(""));
  EXPECT_TRUE(environ_overwritten(std::string("127.0.0.1:6379\0\0\0", 17)));
  EXPECT_TRUE(environ_overwritten(std::string(64, '\0')));  // cleared by setproctitle
}

TEST(DoctorText, ProcStat) {
  const auto st = parse_proc_stat(
      "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->start_time, 123456u);
  EXPECT_FALSE(st->kernel_thread());
  EXPECT_EQ(st->threads, 1u);
  EXPECT_FALSE(st->exiting());
  // A process killed with 6 GiB, read while the kernel freed it: R with PF_EXITING (0x4).
  const auto dying = parse_proc_stat(
      "24807 (t) R 1 24807 24807 0 -1 4194316 100 0 0 0 1 2 0 0 20 0 3 0 123456 1000 10 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
  ASSERT_TRUE(dying.has_value());
  EXPECT_TRUE(dying->exiting());
  EXPECT_EQ(dying->threads, 3u);
  const auto kthread = parse_proc_stat(
      "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 "
      "18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 0 0 0 0 0 0\n");
  ASSERT_TRUE(kthread.has_value());
  EXPECT_TRUE(kthread->kernel_thread());
  EXPECT_FALSE(parse_proc_stat("garbage").has_value());
}

// The parent a process's PPid names is asked only if it started no later than the process: a
// number reused by a process started since belongs to no parent of it.
TEST(DoctorText, AProcessStartedAfterTheTargetIsNotItsParent) {
  const auto at = [](std::uint64_t start) {
    return *parse_proc_stat("7 (p) S 1 7 7 0 -1 4194560 1 0 0 0 1 2 0 0 20 0 1 0 " +
                            std::to_string(start) +
                            " 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
  };
  EXPECT_TRUE(started_no_later(at(100), at(200)));
  EXPECT_TRUE(started_no_later(at(200), at(200)));  // the same clock tick: a fork right away
  EXPECT_FALSE(started_no_later(at(201), at(200)));
}

TEST(DoctorText, AllocatorVersionsFromFileNames) {
  EXPECT_EQ(detect_allocator({"/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0"}).version, "2.0");
  EXPECT_EQ(detect_allocator({"/usr/lib/libmimalloc.so.2.1"}).version, "2.1");
  EXPECT_EQ(detect_allocator({"/lib/x86_64-linux-gnu/libc-2.31.so"}).version, "2.31");
  EXPECT_EQ(detect_allocator({"/usr/lib/x86_64-linux-gnu/libc.so.6"}).version, "");
}

TEST(DoctorText, DebianVersions) {
  EXPECT_EQ(upstream_version("5:7.0.15-1~deb12u10"), "7.0.15");
  EXPECT_EQ(upstream_version("2.0.9+ds-2"), "2.0.9");
  EXPECT_EQ(upstream_version("17.0.15+6-1~deb12u1"), "17.0.15+6");
  EXPECT_EQ(upstream_version("2.36-9+deb12u14"), "2.36");
  EXPECT_EQ(upstream_version("5.3.0"), "5.3.0");
}

TEST(DoctorText, DebianPackagesOwningFiles) {
  char name[] = "/tmp/hugepage-doctor-dpkg-XXXXXX";
  ASSERT_NE(::mkdtemp(name), nullptr);
  const std::string root = name;
  const auto write = [&](const std::string& path, const std::string& text) {
    FILE* f = std::fopen((root + path).c_str(), "w");
    ASSERT_NE(f, nullptr) << path;
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  ASSERT_EQ(std::system(("mkdir -p " + root + "/var/lib/dpkg/info").c_str()), 0);
  write("/var/lib/dpkg/info/libjemalloc2:amd64.list",
        "/.\n/usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n");
  write("/var/lib/dpkg/info/libc6:amd64.list", "/.\n/lib/x86_64-linux-gnu/libc.so.6\n");
  write("/var/lib/dpkg/info/decoy.list", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.22\n");
  write("/var/lib/dpkg/status",
        "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9+deb12u14\n\n"
        "Package: libjemalloc2\nStatus: install ok installed\nVersion: 5.3.0-1\n\n");
  const auto found = debian_packages(
      root, {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6",
             "/usr/lib/x86_64-linux-gnu/libmissing.so"});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found.at("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            std::make_pair(std::string("libjemalloc2"), std::string("5.3.0-1")));
  // /usr-merged: dpkg lists /lib/..., the kernel names /usr/lib/...
  EXPECT_EQ(found.at("/usr/lib/x86_64-linux-gnu/libc.so.6").first, "libc6");
  EXPECT_TRUE(debian_packages(root + "/nothing", {"/x"}).empty());
  ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}

TEST(DoctorText, UnreadableSaysWhy) {
  access_facts f;
  f.euid = 65534;
  f.target_uid = 0;
  std::string m = explain_unreadable(1, EACCES, f);
  EXPECT_NE(m.find("pid 1 belongs to uid 0 and the doctor runs as uid 65534"), std::string::npos)
      << m;
  f.hidepid = "invisible";
  m = explain_unreadable(1, ENOENT, f);
  EXPECT_NE(m.find("hidepid=invisible"), std::string::npos) << m;
  f.euid = 0;
  EXPECT_EQ(explain_unreadable(1, ENOENT, f), "no process with pid 1");
  f.user_namespace = true;
  m = explain_unreadable(1, EACCES, f);
  EXPECT_NE(m.find("user namespace"), std::string::npos) << m;
  EXPECT_EQ(m.find("run as root"), std::string::npos) << m;  // it is root already
  f.user_namespace = false;
  f.cap_sys_ptrace = false;
  EXPECT_NE(explain_unreadable(1, EPERM, f).find("CAP_SYS_PTRACE"), std::string::npos);
}

}  // namespace
}  // namespace hugepage::doctor
