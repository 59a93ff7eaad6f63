// hugepage/detail/cgroup_files.hpp - where this process's cgroups are and what their files say.
//
// Parsers over captured text (/proc/self/cgroup, /proc/self/mountinfo) come first, so tests can
// feed them samples; then the readers of the live files that cgroup.hpp builds its limits from.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/stats.hpp"

namespace hugepage::detail {

// Values at or above this are "no limit" (v1 writes PAGE_COUNTER_MAX pages as a byte count).
inline constexpr std::uint64_t cgroup_unlimited = std::uint64_t{1} << 62;

// ---- parsers of captured text -----------------------------------------------------------------

// Undoes mountinfo's octal escapes ("\040" for a space).
inline std::string unescape_mount_field(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    const auto octal = [&](std::size_t k) { return field[k] >= '0' && field[k] <= '7'; };
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

inline std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = text.find(separator, at);
    parts.push_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) return parts;
    at = end + 1;
  }
}

inline bool has_token(std::string_view list, std::string_view token, char separator) {
  for (const std::string_view part : split(list, separator)) {
    if (part == token) return true;
  }
  return false;
}

// A process's cgroup paths from /proc/PID/cgroup ("hierarchy-id:controller,list:path" lines):
// in the v1 hierarchy that carries `controller`, and in the v2 hierarchy ("0::path"). Lines
// whose path is not absolute are skipped.
struct proc_cgroup_paths {
  std::optional<std::string> v1;
  std::optional<std::string> v2;
};

inline proc_cgroup_paths parse_proc_cgroup(std::string_view cgroup_text,
                                           std::string_view controller) {
  proc_cgroup_paths paths;
  for (const std::string_view line : split(cgroup_text, '\n')) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    std::string_view path = line.substr(second + 1);
    while (!path.empty() && (path.back() == ' ' || path.back() == '\t' || path.back() == '\r')) {
      path.remove_suffix(1);
    }
    if (path.empty() || path.front() != '/') continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    if (line.substr(0, first) == "0" && controllers.empty()) {
      paths.v2 = std::string(path);
    } else if (has_token(controllers, controller, ',')) {
      paths.v1 = std::string(path);
    }
  }
  return paths;
}

// The directories of this process's cgroup for `controller`, innermost first, up to and including
// the mount's root; empty when the hierarchy cannot be read. `cgroup_text` and `mountinfo_text`
// are /proc/self/cgroup and /proc/self/mountinfo (parameters, so tests can feed samples).
inline std::vector<std::string> cgroup_directories(std::string_view controller,
                                                   std::string_view cgroup_text,
                                                   std::string_view mountinfo_text) {
  const proc_cgroup_paths paths = parse_proc_cgroup(cgroup_text, controller);
  // mountinfo: id parent dev root mountpoint options [optional...] - fstype source superoptions
  struct mount {
    std::string root, point;
  };
  std::optional<mount> v1_mount, v2_mount;
  for (const std::string_view line : split(mountinfo_text, '\n')) {
    const std::vector<std::string_view> fields = split(line, ' ');
    std::size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 6 || dash + 4 > fields.size()) continue;
    const std::string_view type = fields[dash + 1];
    const mount m{unescape_mount_field(fields[3]), unescape_mount_field(fields[4])};
    if (type == "cgroup2" && !v2_mount) v2_mount = m;
    if (type == "cgroup" && !v1_mount && has_token(fields[dash + 3], controller, ',')) v1_mount = m;
  }
  // A v1 mount of the controller wins: the controller is bound to that hierarchy.
  const std::optional<mount>& where = v1_mount ? v1_mount : v2_mount;
  const std::optional<std::string>& path = v1_mount ? paths.v1 : paths.v2;
  std::vector<std::string> directories;
  if (!where || !path || path->empty() || (*path)[0] != '/') return directories;
  std::string relative = *path;
  if (where->root != "/") {
    if (relative.compare(0, where->root.size(), where->root) != 0 ||
        (relative.size() > where->root.size() && relative[where->root.size()] != '/')) {
      return directories;  // the process's cgroup is outside what this mount shows
    }
    relative.erase(0, where->root.size());
  }
  std::string point = where->point;
  while (point.size() > 1 && point.back() == '/') point.pop_back();
  while (!relative.empty() && relative.back() == '/') relative.pop_back();
  for (;;) {
    directories.push_back(point + relative);
    if (relative.empty()) break;
    relative.erase(relative.rfind('/'));
  }
  return directories;
}

// ---- readers of this process's cgroup files ---------------------------------------------------

inline std::vector<std::string> read_cgroup_directories(std::string_view controller) {
  std::error_code ec;
  const std::string cgroup = read_file("/proc/self/cgroup", ec);
  if (ec) return {};
  const std::string mountinfo = read_file("/proc/self/mountinfo", ec);
  if (ec) return {};
  return cgroup_directories(controller, cgroup, mountinfo);
}

// cgroup_directories() of this process, for "memory" or "hugetlb", re-read at most once a second
// and at once in a child after fork(): parsing mountinfo costs more than reading the limits. A list
// is replaced only when it changed (the process was moved to another cgroup); the one it replaces
// stays allocated, linked from the new one, since another thread may still be reading it.
inline const std::vector<std::string>& cgroup_directories(std::string_view controller) {
  struct node {
    std::vector<std::string> directories;
    const node* replaced;
  };
  struct cache {
    std::atomic<const node*> list{nullptr};
    std::atomic<std::int64_t> checked_at{-1};
    std::atomic<pid_t> pid{0};
  };
  static cache caches[2];
  cache& c = caches[controller == "memory" ? 0 : 1];
  const std::int64_t now = monotonic_seconds();
  const pid_t pid = ::getpid();
  const node* list = c.list.load(std::memory_order_acquire);
  if (list != nullptr && c.checked_at.load(std::memory_order_relaxed) == now &&
      c.pid.load(std::memory_order_relaxed) == pid) {
    return list->directories;
  }
  std::vector<std::string> fresh = read_cgroup_directories(controller);
  if (list == nullptr || list->directories != fresh) {
    const node* published = new node{std::move(fresh), list};
    if (!c.list.compare_exchange_strong(list, published, std::memory_order_acq_rel)) {
      delete published;  // another thread published first; `list` is now its node
    } else {
      list = published;
    }
  }
  c.pid.store(pid, std::memory_order_relaxed);
  c.checked_at.store(now, std::memory_order_relaxed);
  return list->directories;
}

// A limit file: "max" (v2) or a number of bytes; nullopt when absent or unlimited. A file that
// exists but cannot be read (EACCES, EMFILE, ...) sets `unreadable`: a limit may be there.
inline std::optional<std::uint64_t> read_limit(const std::string& file, bool& unreadable) {
  const unique_fd fd(open_read_only(file.c_str()));
  if (!fd) {
    if (errno != ENOENT) unreadable = true;
    return std::nullopt;
  }
  char text[64];
  const long n = pread_full(fd.get(), text, sizeof text - 1, 0);
  if (n < 0) {
    unreadable = true;
    return std::nullopt;
  }
  const auto value = parse_u64(std::string_view(text, static_cast<std::size_t>(n)));
  if (!value || *value >= cgroup_unlimited) return std::nullopt;
  return value;
}

// Sums the named fields of a memory.stat file ("name value" lines).
inline std::uint64_t sum_stat_fields(const std::string& file,
                                     std::initializer_list<std::string_view> names) {
  std::error_code ec;
  const std::string text = read_file(file.c_str(), ec);
  std::uint64_t sum = 0;
  for (const std::string_view line : split(text, '\n')) {
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    for (const std::string_view name : names) {
      if (line.substr(0, space) == name) sum += parse_u64(line.substr(space + 1)).value_or(0);
    }
  }
  return sum;
}

// The kernel's name of a hugetlb size in cgroup files: "2MB", "1GB", "64KB".
inline std::string hugetlb_cgroup_size_name(std::size_t page_bytes) {
  char name[32];
  if (page_bytes >= units::gib && page_bytes % units::gib == 0) {
    std::snprintf(name, sizeof name, "%zuGB", page_bytes / units::gib);
  } else if (page_bytes >= units::mib && page_bytes % units::mib == 0) {
    std::snprintf(name, sizeof name, "%zuMB", page_bytes / units::mib);
  } else {
    std::snprintf(name, sizeof name, "%zuKB", page_bytes / units::kib);
  }
  return name;
}

// Whether `directory` belongs to a v1 hierarchy: its files are named the v1 way.
inline bool is_v1_directory(const std::string& directory, const char* v1_file) {
  return read_u64((directory + "/" + v1_file).c_str()).has_value();
}

}  // namespace hugepage::detail
