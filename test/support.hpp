// test/support.hpp - helpers shared by the tests: environment skips, child processes, RSS, pools.
#pragma once

#include <grp.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/system.hpp"

namespace hugepage::test {

/// True when scripts/test reserved the pools and wants every environment-dependent test to run.
inline bool required() {
  const char* value = std::getenv("HUGEPAGE_REQUIRE");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

/// True when scripts/test also reserved a 1 GiB page.
inline bool required_1g() {
  const char* value = std::getenv("HUGEPAGE_REQUIRE_1G");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

/// Pages of `size` a new private mapping can reserve now (0 when the pool is unreadable).
inline std::uint64_t pool_available(page_size size) {
  const auto pool = read_pool(size);
  return pool ? pool->available().value_or(0) : 0;
}

/// Free / reserved / surplus counts of a pool, for "back at their starting values" checks.
struct pool_counts {
  std::uint64_t free = 0, reserved = 0, surplus = 0, total = 0;
  friend bool operator==(const pool_counts& a, const pool_counts& b) {
    return a.free == b.free && a.reserved == b.reserved && a.surplus == b.surplus &&
           a.total == b.total;
  }
};
inline pool_counts read_counts(page_size size) {
  const auto pool = read_pool(size);
  if (!pool) return {};
  return {pool->free.value_or(0), pool->reserved.value_or(0), pool->surplus.value_or(0),
          pool->total.value_or(0)};
}
inline std::ostream& operator<<(std::ostream& out, const pool_counts& c) {
  return out << "{free " << c.free << ", reserved " << c.reserved << ", surplus " << c.surplus
             << ", total " << c.total << "}";
}

/// Hugetlb mappings this process holds now (smaps records with a huge KernelPageSize).
inline std::size_t own_hugetlb_mappings() {
  std::error_code ec;
  std::size_t count = 0;
  for (const auto& m : hugepage::read_smaps(0, ec)) count += m.is_hugetlb() ? 1 : 0;
  return count;
}

/// Whether the pool counts are back at `before`. Other processes share the pool, so a mismatch
/// is retried for two seconds; if it persists, this process must at least hold no hugetlb mapping
/// (every reservation and page it could have taken belongs to one).
inline ::testing::AssertionResult pool_back(page_size size, const pool_counts& before) {
  pool_counts now = read_counts(size);
  for (int i = 0; i < 20 && !(now == before); ++i) {
    ::usleep(100 * 1000);
    now = read_counts(size);
  }
  if (now == before) return ::testing::AssertionSuccess();
  const std::size_t mine = own_hugetlb_mappings();
  if (mine == 0) {
    std::fprintf(stderr,
                 "note: %s pool moved from {free %llu, reserved %llu} to {free %llu, reserved "
                 "%llu}, but this process holds no hugetlb mapping: other processes use the pool\n",
                 hugepage::name_of(size), static_cast<unsigned long long>(before.free),
                 static_cast<unsigned long long>(before.reserved),
                 static_cast<unsigned long long>(now.free),
                 static_cast<unsigned long long>(now.reserved));
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << hugepage::name_of(size) << " pool was " << before << ", now " << now
         << ", and this process still holds " << mine << " hugetlb mapping(s)";
}

#if defined(__x86_64__)
inline constexpr std::uint32_t seccomp_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
inline constexpr std::uint32_t seccomp_arch = AUDIT_ARCH_AARCH64;
#else
inline constexpr std::uint32_t seccomp_arch = 0;  // the filter below cannot be built
#endif

/// One condition of a seccomp filter: the low 32 bits of argument number `arg` (0-5), masked with
/// `mask`, equal `value`.
struct arg_condition {
  unsigned arg = 0;
  std::uint32_t mask = 0;
  std::uint32_t value = 0;
};

/// Installs a seccomp filter (call it in a child: it cannot be removed) that fails syscall `nr`
/// with `error` when every one of `conditions` holds, and allows everything else, including every
/// syscall of another ABI (it is no sandbox).
inline bool fail_syscall_when_all(std::uint32_t nr, std::uint32_t error,
                                  std::initializer_list<arg_condition> conditions) {
  if (seccomp_arch == 0) return false;
  const auto fail = static_cast<std::uint32_t>(SECCOMP_RET_ERRNO | (error & SECCOMP_RET_DATA));
  const auto count = static_cast<std::uint8_t>(conditions.size());
  std::vector<sock_filter> filter = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, seccomp_arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      // Another syscall: past the conditions (3 instructions each) and the failure, to allow.
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, static_cast<std::uint8_t>(3 * count + 1)),
  };
  std::uint8_t left = count;
  for (const arg_condition& c : conditions) {
    if (c.arg > 5) return false;
    --left;
    const auto low =
        static_cast<std::uint32_t>(offsetof(seccomp_data, args) + c.arg * sizeof(std::uint64_t) +
                                   (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 4 : 0));
    filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, low));
    filter.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, c.mask));
    // Not met: past the later conditions and the failure, to allow.
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, c.value & c.mask, 0,
                              static_cast<std::uint8_t>(3 * left + 1)));
  }
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, fail));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog program{};
  program.len = static_cast<unsigned short>(filter.size());
  program.filter = filter.data();
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

/// fail_syscall_when_all() with one condition: argument `arg`, masked with `mask`, equals `value`.
inline bool fail_syscall_when(std::uint32_t nr, std::uint32_t error, unsigned arg,
                              std::uint32_t mask, std::uint32_t value) {
  return fail_syscall_when_all(nr, error, {arg_condition{arg, mask, value}});
}

/// Fails syscall `nr` with `error` (see fail_syscall_when) - only when the low 32 bits of its
/// third argument equal `third` if given.
inline bool fail_syscall(std::uint32_t nr, std::uint32_t error,
                         std::optional<std::uint32_t> third = std::nullopt) {
  return fail_syscall_when(nr, error, 2, third ? 0xffffffffu : 0u, third.value_or(0));
}

/// A cgroup made for one test, with `controller` ("hugetlb", "memory") enabled, removed at
/// destruction. Made where the controller lives: its cgroup v1 mount, else a cgroup2 mount (one is
/// mounted in a temporary directory when none is). A child process joins it to run under limits
/// the rest of the machine does not see. Needs root; error() says why it is unusable.
class scratch_cgroup {
 public:
  explicit scratch_cgroup(const char* controller) {
    std::string v1_root, v2_root;
    for (const hugepage::mount_info& m :
         hugepage::read_mountinfo().value_or(std::vector<hugepage::mount_info>{})) {
      if (m.fstype == "cgroup2" && v2_root.empty()) v2_root = m.point;
      if (m.fstype == "cgroup" && v1_root.empty() &&
          hugepage::detail::has_token(m.super_options, controller, ',')) {
        v1_root = m.point;
      }
    }
    std::string root = v1_root;
    if (root.empty()) {
      if (v2_root.empty() && !mount_cgroup2(v2_root)) return;
      root = v2_root;
      const std::string controllers = read(root + "/cgroup.controllers");
      if (!hugepage::detail::has_token(trimmed(controllers), controller, ' ')) {
        error_ = std::string("the ") + controller + " controller is not available in " + root +
                 " (cgroup.controllers: " + trimmed(controllers) + ")";
        return;
      }
      const std::string subtree = read(root + "/cgroup.subtree_control");
      if (!hugepage::detail::has_token(trimmed(subtree), controller, ' ') &&
          !write_file(root + "/cgroup.subtree_control", std::string("+") + controller)) {
        error_ = "cannot enable " + std::string(controller) + " in " + root +
                 "/cgroup.subtree_control: " + std::strerror(errno);
        return;
      }
    }
    static std::atomic<int> serial{0};
    const std::string path = root + "/hugepage-test-" + std::to_string(::getpid()) + "-" +
                             std::to_string(serial.fetch_add(1));
    if (::mkdir(path.c_str(), 0755) != 0) {
      error_ = "cannot create " + path + ": " + std::strerror(errno);
      return;
    }
    path_ = path;
  }
  ~scratch_cgroup() {
    if (!path_.empty()) ::rmdir(path_.c_str());
    if (!mounted_.empty()) {
      ::umount2(mounted_.c_str(), MNT_DETACH);
      ::rmdir(mounted_.c_str());
    }
  }
  scratch_cgroup(const scratch_cgroup&) = delete;
  scratch_cgroup& operator=(const scratch_cgroup&) = delete;

  /// Empty when usable; otherwise why not.
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  /// Writes `text` to the cgroup's `file`.
  bool write(const std::string& file, const std::string& text) const {
    return write_file(path_ + "/" + file, text);
  }
  /// Moves the calling process into the cgroup (call it in a child).
  bool join() const { return write("cgroup.procs", "0"); }

 private:
  bool mount_cgroup2(std::string& root) {
    char dir[] = "/tmp/hugepage-cgroup2-XXXXXX";
    if (::mkdtemp(dir) == nullptr) {
      error_ = std::string("no cgroup2 file system mounted, and mkdtemp failed: ") +
               std::strerror(errno);
      return false;
    }
    if (::mount("none", dir, "cgroup2", 0, nullptr) != 0) {
      error_ = std::string("no cgroup2 file system mounted, and mounting one failed: ") +
               std::strerror(errno);
      ::rmdir(dir);
      return false;
    }
    root = mounted_ = dir;
    return true;
  }
  static std::string read(const std::string& path) {
    std::error_code ec;
    return hugepage::detail::read_file(path.c_str(), ec);
  }
  static std::string trimmed(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }
  static bool write_file(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
  }

  std::string path_;
  std::string error_;
  std::string mounted_;
};

/// The two switches of PMD-size THP (thp_mode.hpp), set for one test and put back as they were
/// when it ends, whether it passed or not. Needs root and a kernel with the per-size switch
/// (Linux 6.8); why_unusable() says why not. The library reads the switches at most once a
/// second, so set() waits that long. The switches are machine-wide: an instance holds an
/// exclusive lock on lock_path from before it reads them until it has put them back, so tests
/// run side by side (ctest -j) take turns; without it, one test's "as they were" could be
/// another's setting, and the machine would be left with it.
class thp_switches {
 public:
  thp_switches() {
    lock_ = ::open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock_ >= 0) {
      while (::flock(lock_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
    per_size_ = "/sys/kernel/mm/transparent_hugepage/hugepages-" +
                std::to_string(hugepage::thp_page_bytes() / 1024) + "kB/enabled";
    std::error_code ec;
    const std::string top = hugepage::detail::read_file(top_path, ec);
    if (ec) {
      why_ = std::string("THP is absent: ") + top_path + ": " + ec.message();
      return;
    }
    const std::string per_size = hugepage::detail::read_file(per_size_.c_str(), ec);
    if (ec) {
      why_ = "no per-size THP switch (a kernel before 6.8): " + per_size_ + ": " + ec.message();
      return;
    }
    if (::geteuid() != 0) {
      why_ = "writing the THP switches needs root";
      return;
    }
    top_ = hugepage::detail::selected_mode(top);
    per_size_mode_ = hugepage::detail::selected_mode(per_size);
  }
  ~thp_switches() {
    if (why_.empty()) {
      write(per_size_, per_size_mode_);
      write(top_path, top_);
    }
    if (lock_ >= 0) ::close(lock_);  // releases the lock
  }
  thp_switches(const thp_switches&) = delete;
  thp_switches& operator=(const thp_switches&) = delete;

  const std::string& why_unusable() const { return why_; }
  /// Where the per-size switch is absent (nothing else unusable): a kernel before 6.8.
  bool per_size_absent() const { return why_.rfind("no per-size", 0) == 0; }
  /// Sets the top-level and the per-size switch; false (errno set) when a write failed.
  bool set(const std::string& top, const std::string& per_size) const {
    if (!write(top_path, top) || !write(per_size_, per_size)) return false;
    ::usleep(1'100'000);
    return true;
  }

  static constexpr const char* top_path = "/sys/kernel/mm/transparent_hugepage/enabled";
  static constexpr const char* lock_path = "/tmp/hugepage-test-thp-switches.lock";

 private:
  static bool write(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
  }

  int lock_ = -1;
  std::string why_;
  std::string per_size_;
  std::string top_;
  std::string per_size_mode_;
};

/// Sizes in bytes for the tests' arithmetic: the library's units (page_size.hpp) under one name.
inline constexpr std::size_t kMiB = units::mib;
inline constexpr std::size_t kGiB = units::gib;
/// One 2 MiB huge page, in bytes.
inline constexpr std::size_t kHuge = bytes_of(page_size::huge_2m);
/// The base page size, read at run time: the unit of madvise, mprotect and pagemap (4 KiB on
/// x86-64; 4, 16 or 64 KiB on arm64). A 4096-byte madvise is EINVAL with 16 KiB pages.
inline const std::size_t kPage = hugepage::os::base_page_size();

/// `bytes`, or `pmds` whole THP pages (thp_page_bytes(), the kernel's PMD size) where that is more:
/// a size written for 2 MiB pages that must reach the THP allocators' threshold or hold whole huge
/// pages, on any page size (the PMD is 32 MiB on arm64 with 16 KiB pages).
inline std::size_t at_least_pmds(std::size_t bytes, std::size_t pmds) {
  return std::max(bytes, pmds * thp_page_bytes());
}

/// Whether 2 MiB THP is usable: its effective mode (the per-size switch over the top-level one)
/// is madvise or always.
inline bool thp_usable() {
  const auto mode = read_thp_mode();
  return mode && *mode != thp_mode::never;
}

/// Whether the effective PMD THP mode is always: unadvised memory then faults huge pages, so a
/// test that needs base pages populates under MADV_NOHUGEPAGE.
inline bool thp_always() {
  const auto mode = read_thp_mode();
  return mode && *mode == thp_mode::always;
}

/// Mappings the library holds now.
inline std::size_t live_mappings() { return hugepage::stats().live_mappings; }

/// Whether `p` is a multiple of `alignment`.
inline bool is_aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

/// Resident set size of this process, from /proc/self/statm.
inline std::size_t rss_bytes() {
  const auto statm = hugepage::read_statm();
  return statm ? statm->resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// Forks a child that runs `body` and _exits with its result; returns the child's pid (-1: no fork).
inline pid_t start_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  int code = 125;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child: uncaught exception: %s\n", e.what());
    code = 124;
  }
  std::fflush(nullptr);
  ::_exit(code);
}

inline int child_result(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

/// Becomes the unprivileged user `nobody` (for a child of a test run as root): /proc/kpageflags
/// (root, 0400) no longer opens, nor a file of mode 0.
inline bool become_nobody() {
  const passwd* nobody = ::getpwnam("nobody");
  const uid_t uid = nobody != nullptr ? nobody->pw_uid : 65534;
  const gid_t gid = nobody != nullptr ? nobody->pw_gid : 65534;
  if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) return false;
  // A credential change makes the process non-dumpable, and /proc/self/* then belongs to root;
  // an ordinary unprivileged process is dumpable.
  return ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0;
}

/// Runs `body` in a forked child; returns its exit status (or 128 + signal). Output of the child
/// goes to the test's stderr. gtest assertions do not cross the fork: the body returns a code.
/// The child leaves with _exit(): no static destructor of the test program runs in it.
inline int run_in_child(const std::function<int()>& body) {
  const pid_t pid = start_child(body);
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return child_result(status);
}

/// What run_in_child_within() returns for a child that was still running at the limit.
inline constexpr int child_hung = -2;

/// run_in_child(), but a child still running after `limit_ms` is killed and reported as
/// child_hung: a child that deadlocks fails the test instead of hanging it.
inline int run_in_child_within(int limit_ms, const std::function<int()>& body) {
  const pid_t pid = start_child(body);
  if (pid < 0) return -1;
  int status = 0;
  pid_t done = 0;
  for (int waited_ms = 0; waited_ms < limit_ms && done == 0; ++waited_ms) {
    done = ::waitpid(pid, &status, WNOHANG);
    if (done == 0) ::usleep(1000);
  }
  if (done == 0) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return child_hung;
  }
  return done < 0 ? -1 : child_result(status);
}

/// Built with AddressSanitizer? (Its shadow memory makes RLIMIT_AS tests meaningless.)
constexpr bool under_asan() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

}  // namespace hugepage::test

/// Skips the test with `reason`, or fails it when HUGEPAGE_REQUIRE=1 says the environment was
/// prepared and nothing may be skipped.
#define HUGEPAGE_SKIP_OR_FAIL(reason)                                        \
  do {                                                                       \
    if (::hugepage::test::required()) {                                      \
      FAIL() << "HUGEPAGE_REQUIRE=1, but the test would skip: " << (reason); \
    }                                                                        \
    GTEST_SKIP() << (reason);                                                \
  } while (0)

namespace hugepage::test {

/// Why 1 GiB pages cannot be had here, in words: no CPU support, no pool, or an empty pool.
inline std::string why_no_1g_pages(std::uint64_t pages) {
  std::error_code ec;
  const std::string cpuinfo = hugepage::detail::read_file("/proc/cpuinfo", ec);
#if defined(__x86_64__)
  if (!ec && cpuinfo.find(" pdpe1gb") == std::string::npos) {
    return "this CPU has no 1 GiB pages (no pdpe1gb flag in /proc/cpuinfo)";
  }
#endif
  const auto pool = read_pool(page_size::huge_1g);
  if (!pool)
    return "this kernel shows no 1 GiB hugetlb pool (/sys/kernel/mm/hugepages/hugepages-1048576kB)";
  const std::uint64_t available = pool->available().value_or(0);
  const std::uint64_t wanted =
      pool->total.value_or(0) + (pages > available ? pages - available : 0);
  return "needs " + std::to_string(pages) + " free 1 GiB page(s), " + std::to_string(available) +
         " available (reserve them with: echo " + std::to_string(wanted) +
         " > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages; it can fail when memory "
         "is fragmented)";
}

}  // namespace hugepage::test

/// Skips unless `pages` pages of `size` can be reserved now. A missing 1 GiB page skips with the
/// reason (no CPU support, no pool) unless HUGEPAGE_REQUIRE_1G=1 says scripts/test reserved one.
#define HUGEPAGE_REQUIRE_POOL(size, pages)                                                  \
  do {                                                                                      \
    const std::uint64_t available_ = ::hugepage::test::pool_available(size);                \
    if (available_ < (pages)) {                                                             \
      if ((size) == ::hugepage::page_size::huge_1g) {                                       \
        const std::string reason_ = ::hugepage::test::why_no_1g_pages(pages);               \
        if (::hugepage::test::required_1g()) {                                              \
          FAIL() << "HUGEPAGE_REQUIRE_1G=1, but the test would skip: " << reason_;          \
        }                                                                                   \
        GTEST_SKIP() << reason_;                                                            \
      }                                                                                     \
      HUGEPAGE_SKIP_OR_FAIL("needs " + std::to_string(pages) + " free hugetlb pages of " +  \
                            ::hugepage::name_of(size) + ", " + std::to_string(available_) + \
                            " available");                                                  \
    }                                                                                       \
  } while (0)
