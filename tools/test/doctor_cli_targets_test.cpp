// tools/test/doctor_cli_targets_test.cpp - odd targets: zombies, kernel threads, a target that
// exits while read, hidepid.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <future>
#include <thread>
#include <vector>

#include "doctor_cli_support.hpp"

namespace {

using namespace doctor_cli;

// Waits (at most a second) until /proc/PID/stat says Z: a child that exited, unreaped, or whose
// main thread exited while others run.
void wait_until_zombie(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    char state = '?';
    if (FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r")) {
      (void)std::fscanf(f, "%*d (%*[^)]) %c", &state);
      std::fclose(f);
    }
    if (state == 'Z') return;
    ::usleep(5000);
  }
}

// `pid` given with each of `modes` after --pid: refused with `code`, nothing on stdout, and
// `words` on stderr.
void expect_refused_in_every_mode(pid_t pid, const std::vector<std::vector<std::string>>& modes,
                                  int code, const std::string& words) {
  for (const std::vector<std::string>& mode : modes) {
    std::vector<std::string> args{"--pid", std::to_string(pid)};
    args.insert(args.end(), mode.begin(), mode.end());
    const result r = doctor(args);
    EXPECT_EQ(r.code, code) << args.size() << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }
}

TEST(DoctorCli, ZombieHasItsOwnExitCode) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  wait_until_zombie(child);  // not reaped yet: a zombie until waitpid below
  // Every mode that takes --pid: the report, and collapse with and without --dry-run.
  expect_refused_in_every_mode(child, {{}, {"--collapse"}, {"--collapse", "--dry-run"}}, 3,
                               "is a zombie");
  ::waitpid(child, nullptr, 0);
}

// A process whose main thread exited (pthread_exit()) while another thread runs on with 64 MiB:
// /proc/PID shows it as a zombie (State Z, Threads 2) with no memory. It is no zombie, and its
// memory is not nothing: the doctor says what it is and makes no report (exit 2), in every mode.
TEST(DoctorCli, MainThreadExitedWhileAnotherRunsIsNoZombie) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    std::thread([fd = ready[1]] {
      std::vector<char> held(64 << 20, 1);
      (void)!::write(fd, "r", 1);
      for (;;) ::pause();
    }).detach();
    // The exit system call ends the calling thread only (pthread_exit() would unwind through
    // googletest's handlers); the main thread of the group becomes a zombie.
    ::syscall(SYS_exit, 0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  wait_until_zombie(child);  // the main thread's exit takes a moment
  expect_refused_in_every_mode(child, {{}, {"--json"}, {"--collapse", "--dry-run"}}, 2,
                               "its main thread has exited while 1 other thread(s) run on");
  ::kill(child, SIGKILL);
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

// --pid with a thread id whose process exits between the doctor reading the thread's Tgid and
// opening the process by that number (the doctor's test hook pauses it there): another process
// could have the number by then, so the doctor checks that the thread is in what it opened, and
// says the target exited instead of reporting whatever has the pid.
TEST(DoctorCli, AThreadWhoseProcessExitsWhileResolvedIsNoReportOfAnother) {
  int ids[2];
  ASSERT_EQ(::pipe2(ids, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::thread thread([&] {
      const pid_t tid = static_cast<pid_t>(::gettid());
      (void)!::write(ids[1], &tid, sizeof tid);
      ::pause();
    });
    thread.join();
    ::_exit(0);
  }
  ::close(ids[1]);
  pid_t tid = 0;
  ASSERT_EQ(::read(ids[0], &tid, sizeof tid), static_cast<ssize_t>(sizeof tid));
  ::close(ids[0]);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  std::thread killer([&] {
    char byte = 0;
    if (::read(pair[0], &byte, 1) == 1) {  // the thread resolved to its process: it exits now
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      (void)!::write(pair[0], &byte, 1);
    }
  });
  run_options o;
  o.keep_fd = pair[1];
  const std::string fd = std::to_string(pair[1]);
  o.in_child = [fd] { return ::setenv("HUGEPAGE_DOCTOR_TEST_HOOK_FD", fd.c_str(), 1) == 0; };
  const result r = doctor({"--pid", std::to_string(tid), "--json"}, o);
  ::close(pair[1]);
  killer.join();
  ::close(pair[0]);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("pid " + std::to_string(tid) + " exited while being read; no report"),
            std::string::npos)
      << r.err;
}

// --pid with a thread id: /proc/TID opens too, with the process's memory; the doctor says it was
// given a thread and reports the process.
TEST(DoctorCli, ThreadIdReportsItsProcess) {
  std::promise<pid_t> tid;
  std::promise<void> done;
  std::thread thread([&] {
    tid.set_value(static_cast<pid_t>(::gettid()));
    done.get_future().wait();
  });
  const pid_t id = tid.get_future().get();
  const result r = doctor({"--pid", std::to_string(id), "--json"});
  done.set_value();
  thread.join();
  EXPECT_NE(r.err.find(std::to_string(id) + " is a thread of process " +
                       std::to_string(::getpid()) + "; reporting the process"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("process").at("pid").get<int>(), ::getpid());
}

}  // namespace
