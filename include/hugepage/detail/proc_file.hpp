// hugepage/detail/proc_file.hpp - reading /proc and /sys files without iostreams.
//
// These files are read on failure paths of allocate() (to explain a pool shortage), so the
// number readers use open/read into a stack buffer and allocate nothing.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace hugepage::detail {

/// Closes a file descriptor on scope exit.
class unique_fd {
 public:
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_;
};

inline int open_read_only(const char* path) noexcept {
  int fd;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// Opens `path` (relative to the directory `dir`, or to the working directory for AT_FDCWD)
/// read-only only when it names a regular file (procfs and sysfs files are regular, with size 0);
/// -1 with errno set otherwise. O_NONBLOCK keeps the open of a FIFO from waiting for a writer,
/// fstat then refuses the FIFO, a device (a symlink to /dev/zero would read forever), a socket or
/// a directory with EINVAL: the path exists (so not ENOENT) but is not a file this library reads;
/// ENXIO would read as "no such device", which is what open(2) says for other reasons. O_NONBLOCK
/// is cleared again before the descriptor is returned, so reads behave as they always did.
inline int open_regular_file_at(int dir, const char* path) noexcept {
  int fd;
  do {
    fd = ::openat(dir, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat st;
  int error = 0;
  if (::fstat(fd, &st) != 0) {
    error = errno;
  } else if (!S_ISREG(st.st_mode)) {
    error = EINVAL;
  } else {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) error = errno;
  }
  if (error != 0) {
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

/// open_regular_file_at() relative to the working directory.
inline int open_regular_file(const char* path) noexcept {
  return open_regular_file_at(AT_FDCWD, path);
}

/// The most a reader takes of one file: 256 MiB. The kernel's text files are far smaller (meminfo
/// and status about 1.5 KiB, mountinfo tens of KiB); the largest, a process's smaps, takes about
/// 1 KiB per mapping, so 256 MiB is some 250,000 mappings, near the default vm.max_map_count
/// (65,530) four times. A larger file (a copy under a root, a 4 GiB sparse file) is refused with
/// EFBIG ("File too large"), never read into memory.
inline constexpr std::size_t max_text_file_bytes = std::size_t{256} << 20;

/// pread(2) that retries EINTR and short reads. Returns the bytes read (less than `length` only
/// at end of file) or -1 with errno set.
inline long pread_full(int fd, void* buffer, std::size_t length, std::uint64_t offset) noexcept {
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, static_cast<char*>(buffer) + done, length - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<long>(done);
}

/// Reads the whole of the regular file open on `fd`, up to max_text_file_bytes (procfs files
/// report size 0, so it reads until EOF): from offset 0 with pread when `positioned` (a descriptor
/// kept for many reads), else with read from where the descriptor stands. Sets `ec` on failure:
/// EFBIG for a file larger than that (said by its size before anything is read, where it has one),
/// else the errno of the read. Throws std::bad_alloc.
inline std::string read_whole_file(int fd, std::error_code& ec, bool positioned = true) {
  ec.clear();
  std::string text;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0 &&
      static_cast<std::uint64_t>(st.st_size) > max_text_file_bytes) {
    ec = std::error_code(EFBIG, std::generic_category());
    return text;
  }
  char buffer[16384];
  for (std::uint64_t offset = 0;;) {
    long n;
    if (positioned) {
      n = pread_full(fd, buffer, sizeof buffer, offset);
    } else {
      do {
        n = static_cast<long>(::read(fd, buffer, sizeof buffer));
      } while (n < 0 && errno == EINTR);
    }
    if (n < 0) {
      ec = std::error_code(errno, std::generic_category());
      return {};
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > max_text_file_bytes) {
      ec = std::error_code(EFBIG, std::generic_category());
      return {};
    }
    text.append(buffer, static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return text;
}

/// Reads a whole regular file (read_whole_file: at most max_text_file_bytes). Sets `ec` on
/// failure: EINVAL when the path is not a regular file (open_regular_file), EFBIG when it is
/// larger than that.
inline std::string read_file(const char* path, std::error_code& ec) {
  ec.clear();
  const unique_fd fd(open_regular_file(path));
  if (!fd) {
    ec = std::error_code(errno, std::generic_category());
    return {};
  }
  return read_whole_file(fd.get(), ec, false);
}

/// "/proc/<pid>/<file>", or "/proc/self/<file>" for pid 0.
inline std::string proc_path(pid_t pid, const char* file) {
  return (pid == 0 ? std::string("/proc/self/") : "/proc/" + std::to_string(pid) + "/") + file;
}

/// Parses a leading unsigned decimal number (after spaces); nullopt if there is none.
constexpr std::optional<std::uint64_t> parse_u64(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i == text.size() || text[i] < '0' || text[i] > '9') return std::nullopt;
  std::uint64_t value = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

/// a + b, or UINT64_MAX when the sum does not fit: kernel counts summed saturate, never wrap.
constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/// a * b, or UINT64_MAX when the product does not fit.
constexpr std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/// a * 2^shift, or UINT64_MAX when that does not fit (a shift past 63 included, unless a is 0).
constexpr std::uint64_t saturating_shift(std::uint64_t a, std::size_t shift) noexcept {
  if (a == 0) return 0;
  if (shift > 63 || a > (UINT64_MAX >> shift)) return UINT64_MAX;
  return a << shift;
}

/// The number of a meminfo-shaped line's value (what follows the colon): its first word all
/// digits, then nothing, "kB" or "KB" (bytes: times 1024), what follows that ignored; nullopt for
/// another unit ("Uid: 0 0 0 0") or an overflow.
constexpr std::optional<std::uint64_t> kb_value(std::string_view rest) noexcept {
  const auto words = [&rest]() {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const std::size_t stop = rest.find_first_of(" \t");
    const std::string_view word = rest.substr(0, stop);
    rest = stop == std::string_view::npos ? std::string_view{} : rest.substr(stop);
    return word;
  };
  const std::string_view number = words();
  if (number.empty() || number.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  const std::optional<std::uint64_t> value = parse_u64(number);
  if (!value) return std::nullopt;
  const std::string_view unit = words();
  if (unit.empty()) return value;
  if ((unit == "kB" || unit == "KB") && *value <= UINT64_MAX / 1024) return *value * 1024;
  return std::nullopt;
}

/// Calls `field(name, bytes)` for each "Name:  N kB" or "Name:  N" line of /proc text in the
/// meminfo shape (meminfo, status, smaps_rollup; the value as kb_value reads it): kB values in
/// bytes, bare numbers as they are. Lines with several numbers ("Uid: 0 0 0 0"), another unit or
/// an overflow are skipped; a line's trailing '\r' is ignored (as parse_status does).
template <class Field>
void for_each_kb_field(std::string_view text, Field&& field) {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    if (name.empty()) continue;
    if (const std::optional<std::uint64_t> bytes = kb_value(line.substr(colon + 1))) {
      field(name, *bytes);
    }
  }
}

/// The field `name` of /proc text in the meminfo shape (for_each_kb_field), in bytes; nullopt when
/// the text has no such line.
inline std::optional<std::uint64_t> kb_field(std::string_view text, std::string_view name) {
  std::optional<std::uint64_t> found;
  for_each_kb_field(text, [&](std::string_view field, std::uint64_t bytes) {
    if (field == name) found = bytes;
  });
  return found;
}

/// Reads at most `size - 1` bytes of a small regular file into `buffer`; -1 when it cannot be
/// read or is not a regular file (open_regular_file). Allocates nothing.
inline long read_small_file(const char* path, char* buffer, std::size_t size) noexcept {
  const unique_fd fd(open_regular_file(path));
  if (!fd || size == 0) return -1;
  return pread_full(fd.get(), buffer, size - 1, 0);
}

/// Reads a file that holds one unsigned number (sysfs style). Allocates nothing.
inline std::optional<std::uint64_t> read_u64(const char* path) noexcept {
  char buffer[64];
  const long n = read_small_file(path, buffer, sizeof buffer);
  if (n <= 0) return std::nullopt;
  return parse_u64(std::string_view(buffer, static_cast<std::size_t>(n)));
}

/// Returns the bracketed choice of a sysfs mode file ("always [madvise] never" -> "madvise"), or
/// the whole trimmed text when there are no brackets. Allocates nothing.
constexpr std::string_view bracketed(std::string_view text) noexcept {
  const auto open = text.find('[');
  const auto close = text.find(']', open == std::string_view::npos ? 0 : open);
  if (open != std::string_view::npos && close != std::string_view::npos) {
    return text.substr(open + 1, close - open - 1);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return text;
}

/// bracketed() as a string.
inline std::string selected_mode(std::string_view text) { return std::string(bracketed(text)); }

}  // namespace hugepage::detail
