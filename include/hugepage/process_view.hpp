// hugepage/process_view.hpp - one process, opened once: its pagemap, its maps, kpageflags.
//
// backing_of(), collapse(), upkeep() and the doctor read the same files of a process: its
// /proc/PID/pagemap (PAGEMAP_SCAN and pagemap words), its /proc/PID/maps (PROCMAP_QUERY, or the
// text) and, for exact coverage without PAGEMAP_SCAN, /proc/kpageflags. A process_view opens the
// first two when it is made and kpageflags the first time it is asked for, keeps the errno of
// each open, and words a failed open once ("cannot open /proc/PID/pagemap: Permission denied").
// Hand one view to several calls and the process is opened once; the overloads that take a pid
// build a view of their own.
//
//   file                 opened            used by
//   pidfd (pidfd_open)   when made         collapse (process_madvise); exited()
//   /proc/PID (the dir)  when made         the files below are opened in it, never by number
//   /proc/PID/pagemap    when made         backing_of, collapse, upkeep, the huge-zero probe
//   /proc/PID/maps       when made         backing_of, collapse (PROCMAP_QUERY); maps_text()
//   /proc/PID/smaps      per read_smaps()  backing_of where the fast path is not taken
//   /proc/PID/<file>     per read_text()   the doctor: status, stat, cmdline, environ, cgroup,
//                                          numa_maps, mountinfo; stat_of(): ns/mnt, root
//   /proc/kpageflags     on first use      backing_of with the kpageflags source
//
// The descriptors stay with the process the view was made for: an exited one reads as such
// (backing_of: "process N has exited", read_smaps and collapse: ESRCH), never as a later process
// given the same pid, and a view of this process made before fork() reads the
// parent's memory in the child (the child makes its own). A process that is a zombie when the
// view is made keeps its directory (its stat and status say what it was; a zombie's pid cannot
// pass to another process) but has no pagemap or maps (ESRCH). `root` puts every file under a
// directory
// ("" for the live system), as kernel_files.hpp's readers do: a copy of a process's maps and smaps
// reads from there; the ioctls answer only on the kernel's own files. Every file is opened as the
// readers open theirs (detail/proc_file.hpp): a regular file only (a FIFO or device is EINVAL,
// never waited on or read without end), and read up to 256 MiB (EFBIG past it).
//
// Needs: read access to the files (for another process, ptrace-read access). Any kernel; the
// ioctls callers run on the descriptors need Linux 6.7 (PAGEMAP_SCAN) and 6.11 (PROCMAP_QUERY).
// Thread-safe: the descriptors are read-only once made, and kpageflags is opened once whichever
// thread asks first.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/smaps.hpp"

namespace hugepage {

/// The pagemap, maps and (on demand) kpageflags files of one process, opened once. Not copyable
/// or movable: make it where it is used, and pass it by reference.
class process_view {
 public:
  /// Opens the pagemap and maps files of process `pid` (0: this process, /proc/self) on the live
  /// system. Never throws and allocates nothing (collapse() and upkeep() build one on an
  /// allocation path); a file that cannot be opened is recorded (pagemap_errno(), maps_errno()).
  explicit process_view(pid_t pid = 0) noexcept : pid_(pid) { open_files(); }

  /// The same under `root` ("" for the live system): every file the view opens is root + its
  /// path. Throws std::bad_alloc.
  process_view(pid_t pid, std::string root) : pid_(pid), root_(std::move(root)) { open_files(); }

  process_view(const process_view&) = delete;
  process_view& operator=(const process_view&) = delete;

  ~process_view() {
    close_fd(pidfd_);
    close_fd(dir_fd_);
    close_fd(pagemap_fd_);
    close_fd(maps_fd_);
    close_fd(kpageflags_fd_.load());
  }

  /// The process (0: this process).
  pid_t pid() const noexcept { return pid_; }
  /// The directory the files are read under ("": the live system).
  const std::string& root() const noexcept { return root_; }

  /// A pidfd of the process (pidfd_open, Linux 5.3), taken when the view was made: the right to
  /// advise it (collapse's process_madvise) that never passes to a later process given the same
  /// pid. -1 for this process (pid 0), under a root, or where pidfd_open failed (pidfd_errno()).
  int pidfd() const noexcept { return pidfd_; }
  /// The errno of pidfd_open; 0 when it is open or was not tried (pid 0, a root).
  int pidfd_errno() const noexcept { return pidfd_errno_; }

  /// Whether the process, alive when the view was made, has exited since (a zombie included): its
  /// pidfd reads readable. False for this process, under a root, and where pidfd_open failed (no
  /// such process then: the files' errno says so). One poll(), no allocation.
  bool exited() const noexcept {
    if (pidfd_ < 0) return false;
    pollfd p{pidfd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

  /// /proc/PID/pagemap, or -1 when it could not be opened (pagemap_errno() says why).
  int pagemap_fd() const noexcept { return pagemap_fd_; }
  /// The errno of the pagemap open; 0 when it is open.
  int pagemap_errno() const noexcept { return pagemap_errno_; }
  /// "cannot open /proc/PID/pagemap: <strerror>"; "" when it is open.
  std::string pagemap_error() const { return error_of("pagemap", pagemap_errno_); }

  /// /proc/PID/maps, or -1 when it could not be opened (maps_errno() says why).
  int maps_fd() const noexcept { return maps_fd_; }
  /// The errno of the maps open; 0 when it is open.
  int maps_errno() const noexcept { return maps_errno_; }
  /// "cannot open /proc/PID/maps: <strerror>"; "" when it is open.
  std::string maps_error() const { return error_of("maps", maps_errno_); }

  /// /proc/kpageflags, opened on the first call (once, whichever thread asks first); -1 when it
  /// cannot be opened (it needs CAP_SYS_ADMIN): kpageflags_errno() says why.
  int kpageflags_fd() const noexcept {
    int fd = kpageflags_fd_.load();
    if (fd != not_tried) return fd;
    char path[path_capacity];
    int opened = -1;
    if (!kpageflags_path(path, sizeof path)) {
      kpageflags_errno_.store(ENAMETOOLONG);
    } else {
      opened = detail::open_regular_file(path);
      if (opened < 0) kpageflags_errno_.store(errno);
    }
    if (!kpageflags_fd_.compare_exchange_strong(fd, opened)) {
      close_fd(opened);  // another thread opened it first: `fd` holds its answer
      return fd;
    }
    return opened;
  }
  /// Whether kpageflags_fd() has been asked for (and so /proc/kpageflags opened, or tried).
  bool kpageflags_tried() const noexcept { return kpageflags_fd_.load() != not_tried; }
  /// The errno of the kpageflags open; 0 when it is open or has not been tried.
  int kpageflags_errno() const noexcept { return kpageflags_errno_.load(); }

  /// The path of the process's `file` ("pagemap", "maps", "smaps"): root + /proc/PID/file, with
  /// /proc/self for pid 0. Throws std::bad_alloc.
  std::string path_of(const char* file) const { return root_ + detail::proc_path(pid_, file); }

  /// The text of /proc/PID/maps, read from the view's descriptor; nullopt (and `ec` set) when it
  /// is not open or a read fails. Throws std::bad_alloc.
  std::optional<std::string> maps_text(std::error_code& ec) const {
    ec.clear();
    if (maps_fd_ < 0) {
      ec = std::error_code(maps_errno_, std::generic_category());
      return std::nullopt;
    }
    std::string text = detail::read_whole_file(maps_fd_, ec);
    if (ec) return std::nullopt;
    return text;
  }

  /// Reads up to `size` bytes of /proc/PID/maps at `offset` into `buffer`: the bytes read (0 at
  /// the end), or -1 with errno set. Allocates nothing (for counting mappings when the process is
  /// at its limit and malloc cannot map more).
  long read_maps(char* buffer, std::size_t size, std::uint64_t offset) const noexcept {
    if (maps_fd_ < 0) {
      errno = maps_errno_;
      return -1;
    }
    return detail::pread_full(maps_fd_, buffer, size, offset);
  }

  /// The process's smaps (root + /proc/PID/smaps), parsed; empty and `ec` set when it cannot be
  /// read. Read anew on every call: smaps walks the process's page tables. Throws std::bad_alloc.
  /// It is opened in the directory the view opened when made (root + /proc/PID), never by number
  /// again: once the process has exited, `ec` is ESRCH, whoever has its pid now.
  std::vector<mapping_info> read_smaps(std::error_code& ec) const {
    const std::string text = smaps_text(ec);
    if (ec) return {};
    return parse_smaps(text);
  }

  /// The text of the process's smaps, as read_smaps() reads it (for a caller that keeps it).
  std::string smaps_text(std::error_code& ec) const {
    ec.clear();
    if (exited()) {
      ec = std::error_code(ESRCH, std::generic_category());
      return {};
    }
    auto text = read_text("smaps", ec);
    if (ec && exited()) ec = std::error_code(ESRCH, std::generic_category());
    return text ? std::move(*text) : std::string();
  }

  /// The text of the process's `file` ("status", "stat", "cmdline", "environ", "cgroup",
  /// "numa_maps", "mountinfo", ...), opened in the view's directory, never by number again: a
  /// process that has exited and been reaped reads as ENOENT or ESRCH, never as a later process
  /// given its pid. A zombie's stat and status still read. nullopt and `ec` set when it cannot be
  /// read (a regular file only, at most 256 MiB, as every reader: detail/proc_file.hpp). Throws
  /// std::bad_alloc.
  std::optional<std::string> read_text(const char* file, std::error_code& ec) const {
    ec.clear();
    if (dir_fd_ < 0) {
      ec = std::error_code(dir_errno_, std::generic_category());
      return std::nullopt;
    }
    const detail::unique_fd fd(detail::open_regular_file_at(dir_fd_, file));
    if (!fd) {
      ec = std::error_code(errno, std::generic_category());
      return std::nullopt;
    }
    std::string text = detail::read_whole_file(fd.get(), ec, false);
    if (ec) return std::nullopt;
    return text;
  }

  /// stat() of the process's `file` in the view's directory, following links ("ns/mnt"; "root"
  /// or "root/usr/lib/...": a file as the process sees it); "" for the directory itself, which
  /// the process's owner owns. 0, or the errno. Where the directory could not be opened (hidepid,
  /// another user's process), "" falls back to the directory by path, so that its owner is known
  /// for saying why.
  int stat_of(const char* file, struct stat& st) const noexcept {
    if (dir_fd_ < 0) {
      if (file[0] != '\0') return dir_errno_;
      char path[path_capacity];
      if (!format_path("", path, sizeof path)) return ENAMETOOLONG;
      return ::stat(path, &st) == 0 ? 0 : errno;
    }
    const int flags = file[0] == '\0' ? AT_EMPTY_PATH : 0;
    return ::fstatat(dir_fd_, file, &st, flags) == 0 ? 0 : errno;
  }

 private:
  static constexpr int not_tried = -2;
  static constexpr std::size_t path_capacity = 4096;  // PATH_MAX

  static void close_fd(int fd) noexcept {
    if (fd >= 0) ::close(fd);
  }

  // root + /proc/PID/file (or /proc/self/file) into `out`; false when it does not fit.
  bool format_path(const char* file, char* out, std::size_t size) const noexcept {
    const int n = pid_ == 0 ? std::snprintf(out, size, "%s/proc/self/%s", root_.c_str(), file)
                            : std::snprintf(out, size, "%s/proc/%ld/%s", root_.c_str(),
                                            static_cast<long>(pid_), file);
    return n >= 0 && static_cast<std::size_t>(n) < size;
  }

  bool kpageflags_path(char* out, std::size_t size) const noexcept {
    const int n = std::snprintf(out, size, "%s/proc/kpageflags", root_.c_str());
    return n >= 0 && static_cast<std::size_t>(n) < size;
  }

  void open_one(const char* file, int& fd, int& error) noexcept {
    if (dir_fd_ < 0) {
      error = dir_errno_;
      return;
    }
    fd = detail::open_regular_file_at(dir_fd_, file);
    error = fd < 0 ? errno : 0;
  }

  // The pidfd first, then the directory and the files in it: if the process is still alive once
  // they are open, they are its own (its pid cannot pass to another process before it exits).
  void open_files() noexcept {
    if (pid_ != 0 && root_.empty()) {
      std::error_code ec;
      pidfd_ = detail::pagemap::pidfd_open(pid_, ec);
      pidfd_errno_ = ec.value();
    }
    char path[path_capacity];
    if (!format_path("", path, sizeof path)) {
      dir_errno_ = ENAMETOOLONG;
    } else {
      dir_fd_ = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      dir_errno_ = dir_fd_ < 0 ? errno : 0;
    }
    open_one("pagemap", pagemap_fd_, pagemap_errno_);
    open_one("maps", maps_fd_, maps_errno_);
    if (exited() && dir_fd_ >= 0) {
      // Exited before the directory was opened: no memory to read. The directory is its own if
      // it is a zombie still (its pid is not free before it is reaped); reaped, the pid may have
      // passed to another process, whose directory this would be.
      close_fd(pagemap_fd_);
      close_fd(maps_fd_);
      pagemap_fd_ = maps_fd_ = -1;
      pagemap_errno_ = maps_errno_ = ESRCH;
      if (!directory_is_a_zombie()) {
        close_fd(dir_fd_);
        dir_fd_ = -1;
        dir_errno_ = ESRCH;
      }
    }
  }

  // Whether the stat file in the view's directory says Z (zombie) or X (dead). Allocates nothing.
  bool directory_is_a_zombie() const noexcept {
    const detail::unique_fd fd(detail::open_regular_file_at(dir_fd_, "stat"));
    if (!fd) return false;
    char text[1024];
    const long n = detail::pread_full(fd.get(), text, sizeof text - 1, 0);
    if (n <= 0) return false;
    text[n] = '\0';
    const char* close = std::strrchr(text, ')');  // the name may hold ')': the last one ends it
    return close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
  }

  std::string error_of(const char* file, int error) const {
    if (error == 0) return {};
    return "cannot open " + path_of(file) + ": " + std::strerror(error);
  }

  pid_t pid_;
  std::string root_;
  int pidfd_ = -1;
  int pidfd_errno_ = 0;
  int dir_fd_ = -1;  // root + /proc/PID (or /proc/self), where every file is opened
  int dir_errno_ = 0;
  int pagemap_fd_ = -1;
  int pagemap_errno_ = 0;
  int maps_fd_ = -1;
  int maps_errno_ = 0;
  mutable std::atomic<int> kpageflags_fd_{not_tried};
  mutable std::atomic<int> kpageflags_errno_{0};
};

}  // namespace hugepage
