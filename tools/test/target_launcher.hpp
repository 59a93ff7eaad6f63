// target_launcher.hpp - starts tools/test/target_process.cpp (hugepage-doctor-target) for the
// doctor's tests and benchmark, and stops it. The includer defines HUGEPAGE_DOCTOR_TARGET, the
// binary's path.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

namespace hugepage::test {

// A running hugepage-doctor-target; stops when destroyed (closes its stdin). `argv0` and `env`
// replace its argv[0] and environment (the hostile-target tests).
class target {
 public:
  explicit target(const std::vector<std::string>& args, const std::string& argv0 = "",
                  const std::vector<std::string>* env = nullptr) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      std::vector<std::string> all{argv0.empty() ? HUGEPAGE_DOCTOR_TARGET : argv0};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (const auto& a : all) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      if (env != nullptr) {
        std::vector<char*> envp;
        for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
        envp.push_back(nullptr);
        ::execve(HUGEPAGE_DOCTOR_TARGET, argv.data(), envp.data());
      } else {
        ::execv(HUGEPAGE_DOCTOR_TARGET, argv.data());
      }
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
  /// Kills and reaps it now (reap=false: leaves a zombie until destruction).
  void kill(bool reap = true) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    if (reap) {
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
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

}  // namespace hugepage::test
