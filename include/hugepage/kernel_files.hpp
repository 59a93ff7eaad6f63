// hugepage/kernel_files.hpp - the kernel's process and mount files: one parser, one reader each.
//
// Every kernel file the library and its tools read has one pure parser (the file's text in, a
// struct out: tests feed it samples) and one reader that takes where to read from: `root` ("" for
// the live system, else a directory holding a copy of the tree, such as a capture) and, for a
// process's file, its `pid` (0: this process, /proc/self). A reader returns an empty optional when
// the file cannot be read, never a made-up value: it reads regular files only (a FIFO, a device or
// a directory is EINVAL) and at most detail::max_text_file_bytes, 256 MiB (EFBIG past it).
//
//   file                             parser                   reader
//   /proc/PID/mountinfo              parse_mountinfo          read_mountinfo
//   /proc/PID/cgroup                 parse_proc_cgroup        read_proc_cgroup
//   /proc/PID/statm                  parse_statm              read_statm
//   /proc/sys/kernel/osrelease       parse_kernel_version     kernel_release (uname when live)
//   /proc/cpuinfo                    parse_cpuinfo            read_cpuinfo
//   meminfo, vmstat, status, smaps_rollup: kernel_counters.hpp; buddyinfo, zoneinfo:
//   kernel_memory.hpp (the same shape, one concept per header)
//   <cgroup>/hugetlb.<size>.*        parse_cgroup_limit       read_hugetlb_charge (cgroup.hpp)
//   THP enabled + per-size enabled   effective_thp_mode       read_thp_settings (system.hpp)
//   THP hugepages-<kB>kB/            (mode, number files)     read_mthp_sizes (system.hpp)
//   khugepaged/*                     (number files)           read_thp_settings (system.hpp)
//
// Thread-safe; the parsers allocate only their results (and, for a parser that keeps named
// values, one key buffer): no temporaries per line. Minimum kernel: any (mountinfo 2.6.26).
#pragma once

#include <sys/types.h>
#include <sys/utsname.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hugepage/detail/proc_file.hpp"

namespace hugepage {

namespace detail {

/// The pieces of `text` between `separator`s, empty ones included ("a,,b" -> a, "", b), as a range
/// for a range-for loop: each piece is found when the loop reaches it, so splitting allocates
/// nothing (a vector of pieces would take 16 bytes per line of a file of empty lines).
class split_parts {
 public:
  class iterator {
   public:
    iterator(std::string_view rest, char separator, bool done) noexcept
        : rest_(rest), separator_(separator), done_(done) {
      find();
    }
    std::string_view operator*() const noexcept { return part_; }
    iterator& operator++() noexcept {
      if (end_ == std::string_view::npos) {
        done_ = true;
      } else {
        rest_.remove_prefix(end_ + 1);
        find();
      }
      return *this;
    }
    bool operator!=(const iterator& other) const noexcept { return done_ != other.done_; }
    bool operator==(const iterator& other) const noexcept { return done_ == other.done_; }

   private:
    void find() noexcept {
      end_ = rest_.find(separator_);
      part_ = rest_.substr(0, end_);
    }
    std::string_view rest_;
    std::string_view part_;
    std::size_t end_ = 0;
    char separator_;
    bool done_;
  };

  split_parts(std::string_view text, char separator) noexcept
      : text_(text), separator_(separator) {}
  iterator begin() const noexcept { return iterator(text_, separator_, false); }
  iterator end() const noexcept { return iterator({}, separator_, true); }

 private:
  std::string_view text_;
  char separator_;
};

/// split_parts(text, separator): `for (std::string_view part : split(text, ','))`.
inline split_parts split(std::string_view text, char separator) noexcept {
  return split_parts(text, separator);
}

/// Whether the `separator`-separated `list` holds `token`.
inline bool has_token(std::string_view list, std::string_view token, char separator) noexcept {
  for (const std::string_view part : split(list, separator)) {
    if (part == token) return true;
  }
  return false;
}

/// Undoes the kernel's octal escapes of mountinfo fields: space, tab, newline and backslash are
/// written "\040", "\011", "\012", "\134" (fs/proc_namespace.c, mangle()). A backslash not
/// followed by three octal digits stays as it is.
inline std::string unescape_mount_field(std::string_view field) {
  std::string out;
  const auto octal = [&](std::size_t k) { return field[k] >= '0' && field[k] <= '7'; };
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

/// root + path: the file `path` of the tree at `root` ("" for the live system).
inline std::string under_root(const std::string& root, const std::string& path) {
  return root + path;
}

/// The text of root + path; nullopt when it cannot be read.
inline std::optional<std::string> read_under_root(const std::string& root,
                                                  const std::string& path) {
  std::error_code ec;
  std::string text = read_file(under_root(root, path).c_str(), ec);
  if (ec) return std::nullopt;
  return text;
}

}  // namespace detail

/// The pieces of `text` between `separator`s, empty ones included: "a,,b" gives "a", "", "b",
/// and "" gives one empty piece. The views point into `text`. Pure.
using detail::split;

/// The whole text of `path` under `root` ("" for the live system). procfs and sysfs files report
/// size 0, so it reads until EOF. nullopt when it cannot be read; `ec`, when given, says why. For
/// the kernel files this floor has no parser for (a tool's raw capture of cmdline, environ,
/// numa_maps, a sysfs switch).
inline std::optional<std::string> read_kernel_text(const std::string& root, const std::string& path,
                                                   std::error_code* ec = nullptr) {
  std::error_code error;
  std::string text = detail::read_file(detail::under_root(root, path).c_str(), error);
  if (ec != nullptr) *ec = error;
  if (error) return std::nullopt;
  return text;
}

/// A leading unsigned decimal number in `text` (blanks before it skipped, the rest ignored), as
/// the kernel's files write them; nullopt when there is none or it does not fit 64 bits.
inline std::optional<std::uint64_t> parse_decimal(std::string_view text) noexcept {
  return detail::parse_u64(text);
}

// ---- /proc/PID/mountinfo
// -------------------------------------------------------------------------

/// One line of /proc/PID/mountinfo:
///   "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
///   (id, parent, major:minor, root, mount point, mount options, optional fields, "-",
///   filesystem type, source, superblock options). Paths with their escapes decoded.
struct mount_info {
  std::string device;         ///< major:minor of the superblock: bind mounts of one share it
  std::string root;           ///< the directory of the filesystem mounted here ("/" for all)
  std::string point;          ///< the mount point
  std::string options;        ///< per-mount options ("rw,nosuid,relatime")
  std::string fstype;         ///< "tmpfs", "cgroup2", "proc", ...
  std::string source;         ///< "tmpfs", "/dev/sda1", "none"
  std::string super_options;  ///< superblock options ("rw,size=65536k,huge=within_size")
};

/// Parses mountinfo text, in its order (a later mount on one point hides an earlier one). Lines
/// without the "-" separator after at least six fields, or with fewer than three fields after it,
/// are skipped; runs of spaces count as one. Pure.
inline std::vector<mount_info> parse_mountinfo(std::string_view text) {
  std::vector<mount_info> mounts;
  for (const std::string_view line : detail::split(text, '\n')) {
    // The six fields before "-" and the three after it; the optional fields between are counted
    // and skipped (no per-line list: a line of many fields costs nothing but the walk).
    std::string_view head[6];
    std::string_view tail[3];
    std::size_t before = 0, after = 0;
    bool dash = false;
    for (const std::string_view field : detail::split(line, ' ')) {
      if (field.empty()) continue;
      if (!dash && field == "-") {
        dash = true;
        if (before < 6) break;  // the first "-" is the separator: too few fields before it
      } else if (!dash) {
        if (before < 6) head[before] = field;
        ++before;
      } else if (after < 3) {
        tail[after++] = field;
      }
    }
    if (!dash || before < 6 || after < 3) continue;
    mount_info m;
    m.device = std::string(head[2]);
    m.root = detail::unescape_mount_field(head[3]);
    m.point = detail::unescape_mount_field(head[4]);
    m.options = std::string(head[5]);
    m.fstype = std::string(tail[0]);
    m.source = detail::unescape_mount_field(tail[1]);
    m.super_options = std::string(tail[2]);
    mounts.push_back(std::move(m));
  }
  return mounts;
}

/// Reads /proc/PID/mountinfo under `root` (pid 0: /proc/self); nullopt when unreadable.
/// The text of /proc/PID/mountinfo under `root` (pid 0: /proc/self), as the doctor's captures
/// keep it; nullopt when unreadable.
inline std::optional<std::string> read_mountinfo_text(const std::string& root = "", pid_t pid = 0) {
  return detail::read_under_root(root, detail::proc_path(pid, "mountinfo"));
}

inline std::optional<std::vector<mount_info>> read_mountinfo(const std::string& root = "",
                                                             pid_t pid = 0) {
  const auto text = read_mountinfo_text(root, pid);
  if (!text) return std::nullopt;
  return parse_mountinfo(*text);
}

// ---- /proc/PID/cgroup
// ----------------------------------------------------------------------------

/// One line of /proc/PID/cgroup: "hierarchy-id:controller,list:path". cgroup v2's line is
/// "0::/path"; a v1 named hierarchy lists "name=systemd".
struct proc_cgroup_line {
  std::string hierarchy;    ///< "0" for cgroup v2
  std::string controllers;  ///< comma-separated; empty for cgroup v2
  std::string path;         ///< as written (a path may hold ':')
};

/// Parses /proc/PID/cgroup text: every line with two ':' in it, in order. Pure.
inline std::vector<proc_cgroup_line> parse_proc_cgroup(std::string_view text) {
  std::vector<proc_cgroup_line> lines;
  for (const std::string_view line : detail::split(text, '\n')) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    lines.push_back(proc_cgroup_line{std::string(line.substr(0, first)),
                                     std::string(line.substr(first + 1, second - first - 1)),
                                     std::string(line.substr(second + 1))});
  }
  return lines;
}

/// The text of /proc/PID/cgroup under `root` (pid 0: /proc/self); nullopt when unreadable.
inline std::optional<std::string> read_proc_cgroup_text(const std::string& root = "",
                                                        pid_t pid = 0) {
  return detail::read_under_root(root, detail::proc_path(pid, "cgroup"));
}

/// Reads /proc/PID/cgroup under `root` (pid 0: /proc/self); nullopt when unreadable.
inline std::optional<std::vector<proc_cgroup_line>> read_proc_cgroup(const std::string& root = "",
                                                                     pid_t pid = 0) {
  const auto text = read_proc_cgroup_text(root, pid);
  if (!text) return std::nullopt;
  return parse_proc_cgroup(*text);
}

/// A process's cgroup paths for one controller: in the v1 hierarchy that carries it, and in the
/// v2 hierarchy. Paths that are not absolute (after trailing blanks are trimmed) are left out.
struct cgroup_paths {
  std::optional<std::string> v1;
  std::optional<std::string> v2;
};

/// The paths `lines` give for `controller` ("hugetlb", "memory"). Pure.
inline cgroup_paths cgroup_paths_of(const std::vector<proc_cgroup_line>& lines,
                                    std::string_view controller) {
  cgroup_paths paths;
  for (const proc_cgroup_line& line : lines) {
    std::string_view path = line.path;
    while (!path.empty() && (path.back() == ' ' || path.back() == '\t' || path.back() == '\r')) {
      path.remove_suffix(1);
    }
    if (path.empty() || path.front() != '/') continue;
    if (line.hierarchy == "0" && line.controllers.empty()) {
      paths.v2 = std::string(path);
    } else if (detail::has_token(line.controllers, controller, ',')) {
      paths.v1 = std::string(path);
    }
  }
  return paths;
}

// ---- cgroup limit files
// ---------------------------------------------------------------------------

namespace detail {
// Values at or above this are "no limit" (v1 writes PAGE_COUNTER_MAX pages as a byte count).
inline constexpr std::uint64_t cgroup_unlimited = std::uint64_t{1} << 62;
}  // namespace detail

/// Parses a cgroup limit file (v2 memory.max, hugetlb.<size>.max, rsvd.max; v1 limit_in_bytes):
/// its first line, blanks trimmed, is "max" or a number of bytes. v1's "unlimited" is a huge
/// number (2^62 or more). Returns an empty optional when the text is neither; a set optional
/// holding nullopt for no limit; else the limit in bytes. Pure.
constexpr std::optional<std::optional<std::uint64_t>> parse_cgroup_limit(
    std::string_view text) noexcept {
  text = text.substr(0, text.find('\n'));
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  if (text == "max") return std::optional<std::uint64_t>{};
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  const auto value = detail::parse_u64(text);
  if (!value) return std::nullopt;
  if (*value >= detail::cgroup_unlimited) return std::optional<std::uint64_t>{};
  return std::optional<std::uint64_t>{*value};
}

/// Parses a cgroup v2 events file: the first line that is "max N" (N all digits, blanks and a '\r'
/// after it allowed: how often the limit refused); nullopt when there is no such line or its N is
/// not a number that fits ("max 5x"). Pure.
constexpr std::optional<std::uint64_t> parse_cgroup_events_max(std::string_view text) noexcept {
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (line.substr(0, 4) != "max ") continue;
    line.remove_prefix(4);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (line.empty() || line.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    return detail::parse_u64(line);
  }
  return std::nullopt;
}

// ---- /proc/PID/statm
// -------------------------------------------------------------------------------

/// The first fields of /proc/PID/statm, in base pages.
struct statm_pages {
  std::uint64_t size = 0;      ///< mapped address space (what RLIMIT_AS is checked against)
  std::uint64_t resident = 0;  ///< resident pages (hugetlb pages are not counted)
};

/// Parses statm text ("size resident shared text lib data dt"): its first two words, split at
/// blanks (leading blanks skipped), both all digits and fitting 64 bits; nullopt otherwise
/// ("12", "10x 20"). Pure.
inline std::optional<statm_pages> parse_statm(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  const auto number = [&]() -> std::optional<std::uint64_t> {
    while (!text.empty() && blank(text.front())) text.remove_prefix(1);
    std::size_t n = 0;
    while (n < text.size() && !blank(text[n])) ++n;
    const std::string_view word = text.substr(0, n);
    text.remove_prefix(n);
    if (word.empty() || word.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    return detail::parse_u64(word);
  };
  const auto size = number();
  if (!size) return std::nullopt;
  const auto resident = number();
  if (!resident) return std::nullopt;
  return statm_pages{*size, *resident};
}

/// Reads /proc/PID/statm under `root` (pid 0: /proc/self); nullopt when unreadable or malformed.
inline std::optional<statm_pages> read_statm(const std::string& root = "", pid_t pid = 0) {
  const auto text = detail::read_under_root(root, detail::proc_path(pid, "statm"));
  if (!text) return std::nullopt;
  return parse_statm(*text);
}

// ---- the kernel's version
// --------------------------------------------------------------------------

/// A kernel version: the first two numbers of its release ("6.12.3-amd64" -> 6.12).
struct kernel_version {
  unsigned major = 0;
  unsigned minor = 0;

  /// True when this version is `major_at_least`.`minor_at_least` or later.
  constexpr bool at_least(unsigned major_at_least, unsigned minor_at_least) const noexcept {
    return major > major_at_least || (major == major_at_least && minor >= minor_at_least);
  }
};

/// Parses a release string ("6.18.44-generic"): after optional blanks, digits, a '.' right after
/// them and a digit right after it (what follows the minor number is ignored); nullopt otherwise
/// ("6x.18", "6 junk.18", a number past 32 bits). Pure; allocates nothing.
constexpr std::optional<kernel_version> parse_kernel_version(std::string_view release) noexcept {
  const auto major = detail::parse_u64(release);
  if (!major) return std::nullopt;
  const std::size_t dot = release.find_first_not_of("0123456789", release.find_first_not_of(" \t"));
  if (dot == std::string_view::npos || release[dot] != '.' || dot + 1 >= release.size() ||
      release[dot + 1] < '0' || release[dot + 1] > '9') {
    return std::nullopt;
  }
  const auto minor = detail::parse_u64(release.substr(dot + 1));
  if (!minor || *major > 0xffffffffU || *minor > 0xffffffffU) return std::nullopt;
  return kernel_version{static_cast<unsigned>(*major), static_cast<unsigned>(*minor)};
}

/// The kernel's release ("6.18.44-..."): uname's for the live system, else the first line of
/// root/proc/sys/kernel/osrelease; "" when it cannot be read.
inline std::string kernel_release(const std::string& root = "") {
  if (root.empty()) {
    utsname names{};
    if (::uname(&names) != 0) return {};
    return names.release;
  }
  const auto text = detail::read_under_root(root, "/proc/sys/kernel/osrelease");
  if (!text) return {};
  return text->substr(0, text->find('\n'));
}

// ---- /proc/cpuinfo
// --------------------------------------------------------------------------------

/// What the project needs of /proc/cpuinfo: the first processor's model and feature flags.
struct cpu_info {
  std::string model_name;  ///< "model name" (x86); "" when the file has none
  std::string flags;       ///< "flags" (x86), space-separated; "" when the file has none
  bool has_flags = false;  ///< the file has a "flags" line

  /// Whether `flags` lists `flag` ("pdpe1gb": 1 GiB pages on x86).
  bool has_flag(std::string_view flag) const {
    for (const std::string_view word : detail::split(flags, ' ')) {
      if (word == flag) return true;
    }
    return false;
  }
};

/// Parses /proc/cpuinfo text: the first "model name" and "flags" lines ("key<tabs>: value"). Pure.
inline cpu_info parse_cpuinfo(std::string_view text) {
  cpu_info info;
  bool have_model = false;
  for (const std::string_view line : detail::split(text, '\n')) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
    std::string_view value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (key == "model name" && !have_model) {
      info.model_name = std::string(value);
      have_model = true;
    } else if (key == "flags" && !info.has_flags) {
      info.flags = std::string(value);
      info.has_flags = true;
    }
  }
  return info;
}

/// Reads /proc/cpuinfo under `root`; nullopt when unreadable.
inline std::optional<cpu_info> read_cpuinfo(const std::string& root = "") {
  const auto text = detail::read_under_root(root, "/proc/cpuinfo");
  if (!text) return std::nullopt;
  return parse_cpuinfo(*text);
}

}  // namespace hugepage
