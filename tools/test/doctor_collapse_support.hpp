// tools/test/doctor_collapse_support.hpp - what the --collapse tests (doctor_collapse_test,
// doctor_collapse_listing_test) share: the doctor run as a command, a child holding known memory.
#pragma once

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

#include "hugepage/backing.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "support.hpp"

namespace doctor_collapse {

using hugepage::test::kHuge;
using hugepage::units::mib;

inline constexpr std::size_t kLength = 32 * mib;

struct run_result {
  int status = -1;
  std::string out, err;
};

// Runs the doctor with `args` (as `nobody` when asked, with `environment` added), capturing
// stdout and stderr.
inline run_result doctor(const std::string& args, bool as_nobody = false,
                         const std::string& environment = "") {
  const std::string err_file = "/tmp/hugepage-doctor-collapse-" + std::to_string(::getpid());
  const std::string command = (environment.empty() ? "" : "env " + environment + " ") +
                              std::string(as_nobody ? "setpriv --reuid=nobody --regid=nogroup "
                                                      "--clear-groups "
                                                    : "") +
                              HUGEPAGE_DOCTOR_BINARY + " " + args + " 2>" + err_file;
  run_result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::error_code ec;
  r.err = hugepage::detail::read_file(err_file.c_str(), ec);
  ::unlink(err_file.c_str());
  return r;
}

// What the child does to its memory before populating it.
enum class setup {
  plain,              // nothing: unadvised, base pages under enabled=madvise
  thp_disabled,       // prctl(PR_SET_THP_DISABLE), then MADV_HUGEPAGE on the region
  nohuge_region,      // MADV_NOHUGEPAGE on the region only
  nohuge_everywhere,  // MADV_NOHUGEPAGE on every mapping of the process
  shared,             // the region is shared memory (MAP_SHARED | MAP_ANONYMOUS), not aligned
  pinned,             // one page of the second chunk spliced into a pipe: a reference the kernel
                      // sees, so MADV_COLLAPSE answers EAGAIN there until the pipe is read
  given_back          // the first chunk given back (MADV_DONTNEED) after it was written: no data,
                      // its page table kept
};

// MADV_NOHUGEPAGE on every mapping /proc/self/maps lists (in a forked child: one thread).
inline bool advise_all_nohuge() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  unsigned long lo = 0, hi = 0;
  char line[4096];
  bool ok = true;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    // [vsyscall] is outside the process's own address space: madvise refuses it.
    if (std::strstr(line, "[vsyscall]") != nullptr) continue;
    ok = ok && ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_NOHUGEPAGE) == 0;
  }
  std::fclose(maps);
  return ok;
}

// A child holding kLength of populated memory, waiting for its stdin to close.
class Target {
 public:
  explicit Target(std::size_t stride = 4096, setup how = setup::plain) {
    std::error_code ec;
    if (how == setup::shared) {
      void* p = ::mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      p_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
    } else {
      p_ = static_cast<char*>(hugepage::os::map_aligned(kLength, 2 * mib, ec));
    }
    if (p_ == nullptr || ::pipe(ready_) != 0 || ::pipe(done_) != 0 || ::pipe(pin_) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      bool ok = true;
      if (how == setup::thp_disabled) {
        ok = ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0 &&
             ::madvise(p_, kLength, MADV_HUGEPAGE) == 0;
      } else if (how == setup::nohuge_region) {
        ok = ::madvise(p_, kLength, MADV_NOHUGEPAGE) == 0;
      } else if (how == setup::nohuge_everywhere) {
        ok = advise_all_nohuge();
      }
      if (!ok) ::_exit(2);
      for (std::size_t i = 0; i < kLength; i += stride) p_[i] = static_cast<char>(i >> 12);
      if (how == setup::given_back && ::madvise(p_, kHuge, MADV_DONTNEED) != 0) ::_exit(2);
      if (how == setup::pinned) {
        iovec page{p_ + kHuge + 8192, 4096};
        if (::vmsplice(pin_[1], &page, 1, 0) != 4096) ::_exit(2);
      }
      char c = 0;
      (void)!::write(ready_[1], &c, 1);
      (void)!::read(done_[0], &c, 1);
      for (std::size_t i = how == setup::given_back ? kHuge : 0; i < kLength; i += stride) {
        if (p_[i] != static_cast<char>(i >> 12)) ::_exit(1);
      }
      ::_exit(0);
    }
    char c = 0;
    if (::read(ready_[0], &c, 1) != 1) pid_ = -1;
  }
  ~Target() { finish(); }
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;
  pid_t pid() const { return pid_; }
  const void* address() const { return p_; }
  /// Reads the page setup::pinned spliced into the pipe: the kernel drops its reference.
  bool unpin() {
    char page[4096];
    return ::read(pin_[0], page, sizeof page) == static_cast<ssize_t>(sizeof page);
  }
  double huge() const { return hugepage::backing_of(pid_, p_, kLength).huge_fraction(); }
  /// Lets the child check its data and exit; returns its exit status.
  int finish() {
    if (pid_ <= 0) return -1;
    char c = 0;
    (void)!::write(done_[1], &c, 1);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    for (const int fd : {ready_[0], ready_[1], done_[0], done_[1], pin_[0], pin_[1]}) ::close(fd);
    hugepage::os::unmap(p_, kLength);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  char* p_ = nullptr;
  pid_t pid_ = -1;
  int ready_[2] = {-1, -1}, done_[2] = {-1, -1}, pin_[2] = {-1, -1};
};

}  // namespace doctor_collapse
