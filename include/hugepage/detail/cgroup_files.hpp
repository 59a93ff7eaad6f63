// hugepage/detail/cgroup_files.hpp - where a process's cgroups are and what their files say.
//
// The hierarchy is found from /proc/PID/cgroup and /proc/PID/mountinfo, parsed by their one
// parser each (kernel_files.hpp); then the readers of the limit files cgroup.hpp builds on.
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

#include "hugepage/detail/monotonic_clock.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage::detail {

// The directories of a process's cgroup for `controller`, innermost first, up to and including
// the mount's root; empty when the hierarchy cannot be read. `cgroups` and `mounts` are the
// process's /proc/PID/cgroup and /proc/PID/mountinfo, parsed (kernel_files.hpp).
inline std::vector<std::string> cgroup_directories(std::string_view controller,
                                                   const std::vector<proc_cgroup_line>& cgroups,
                                                   const std::vector<mount_info>& mounts) {
  const cgroup_paths paths = cgroup_paths_of(cgroups, controller);
  const mount_info* v1_mount = nullptr;
  const mount_info* v2_mount = nullptr;
  for (const mount_info& m : mounts) {
    if (m.fstype == "cgroup2" && v2_mount == nullptr) v2_mount = &m;
    if (m.fstype == "cgroup" && v1_mount == nullptr &&
        has_token(m.super_options, controller, ',')) {
      v1_mount = &m;
    }
  }
  // A v1 mount of the controller wins: the controller is bound to that hierarchy.
  const mount_info* where = v1_mount != nullptr ? v1_mount : v2_mount;
  const std::optional<std::string>& path = v1_mount != nullptr ? paths.v1 : paths.v2;
  std::vector<std::string> directories;
  if (where == nullptr || !path || path->empty() || (*path)[0] != '/') return directories;
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

// cgroup_directories() over the texts of /proc/PID/cgroup and /proc/PID/mountinfo.
inline std::vector<std::string> cgroup_directories(std::string_view controller,
                                                   std::string_view cgroup_text,
                                                   std::string_view mountinfo_text) {
  return cgroup_directories(controller, parse_proc_cgroup(cgroup_text),
                            parse_mountinfo(mountinfo_text));
}

// ---- readers of this process's cgroup files ---------------------------------------------------

// cgroup_directories() of process `pid` (0: this one) under `root`; empty when its cgroup file or
// its mountinfo cannot be read.
inline std::vector<std::string> read_cgroup_directories(std::string_view controller,
                                                        const std::string& root = "",
                                                        pid_t pid = 0) {
  const auto cgroups = read_proc_cgroup(root, pid);
  if (!cgroups) return {};
  const auto mounts = read_mountinfo(root, pid);
  if (!mounts) return {};
  return cgroup_directories(controller, *cgroups, *mounts);
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

// A limit file (parse_cgroup_limit) at root + `file`: the limit in bytes; nullopt when absent,
// unlimited or malformed. A file that exists but cannot be read (EACCES, EMFILE, ...) sets
// `unreadable`: a limit may be there.
inline std::optional<std::uint64_t> read_limit(const std::string& file, bool& unreadable,
                                               const std::string& root = "") {
  std::error_code ec;
  const std::string text = read_file((root + file).c_str(), ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) unreadable = true;
    return std::nullopt;
  }
  const auto value = parse_cgroup_limit(text);
  return value ? *value : std::nullopt;
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

}  // namespace hugepage::detail
