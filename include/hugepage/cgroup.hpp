// hugepage/cgroup.hpp - the cgroup limits this process runs under: memory and hugetlb.
//
// Two kinds of limit change what an allocator may promise:
//   memory   v2 memory.max / memory.high against memory.current; v1 memory.limit_in_bytes against
//            memory.usage_in_bytes. Populating past the limit gets the process OOM-killed, not an
//            error, so the library compares a population with the headroom first.
//   hugetlb  v2 hugetlb.<size>.max (charged at page fault) and hugetlb.<size>.rsvd.max (charged
//            at mmap); v1 hugetlb.<size>.limit_in_bytes and .rsvd.limit_in_bytes. A refused
//            fault-time charge is a SIGBUS on first touch; the library populates every hugetlb
//            block at allocation (strategy.hpp), and these readers name the limit that refused.
// Limits apply along the whole hierarchy: the tightest level decides. Kubernetes sets both hugetlb
// limits for pods that request `hugepages-2Mi`; systemd sets memory.max / memory.high.
//
// Where the files are: /proc/self/cgroup names the process's cgroup per hierarchy, and
// /proc/self/mountinfo where each hierarchy is mounted. A controller is read from its cgroup v1
// mount when it has one (hybrid systems keep memory on v1), otherwise from a cgroup2 mount. Levels
// above the cgroup namespace's root (a container's view) cannot be seen; nor can a hierarchy that
// is not mounted at all, or a limit file that exists but cannot be read - `readable` says so. The
// memory headroom check is then skipped: it is a best effort, the hugetlb guarantee is not.
//
// Every reader here is thread-safe and reads the files anew; none throws except std::bad_alloc.
#pragma once

#include <unistd.h>

#include <atomic>
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
#include "hugepage/stats.hpp"

namespace hugepage {

/// One cgroup limit that applies to this process, with the usage charged against it.
struct cgroup_limit {
  std::string file;               ///< the file that sets the limit (an absolute path)
  std::uint64_t limit = 0;        ///< bytes
  std::uint64_t usage = 0;        ///< bytes charged in that cgroup now (its subtree included)
  std::uint64_t reclaimable = 0;  ///< of `usage`, file cache the kernel can reclaim (memory only)

  /// Bytes that can still be charged before the limit is reached: limit - usage + reclaimable,
  /// 0 when the cgroup is at or over its limit.
  std::uint64_t headroom() const noexcept {
    const std::uint64_t charged = usage > reclaimable ? usage - reclaimable : 0;
    return limit > charged ? limit - charged : 0;
  }
};

/// What a search of the hierarchy found.
struct cgroup_limit_search {
  /// The limit with the least headroom along the hierarchy; empty when no level sets one.
  std::optional<cgroup_limit> tightest;
  /// False when the controller's hierarchy is not mounted where this process can read it: a limit
  /// may then apply unseen.
  bool readable = false;
};

namespace detail {

// Values at or above this are "no limit" (v1 writes PAGE_COUNTER_MAX pages as a byte count).
inline constexpr std::uint64_t cgroup_unlimited = std::uint64_t{1} << 62;

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

// The directories of this process's cgroup for `controller`, innermost first, up to and including
// the mount's root; empty when the hierarchy cannot be read. `cgroup_text` and `mountinfo_text`
// are /proc/self/cgroup and /proc/self/mountinfo (parameters, so tests can feed samples).
inline std::vector<std::string> cgroup_directories(std::string_view controller,
                                                   std::string_view cgroup_text,
                                                   std::string_view mountinfo_text) {
  // The process's path in the v1 hierarchy that carries `controller`, and in the v2 hierarchy.
  std::optional<std::string> v1_path, v2_path;
  for (const std::string_view line : split(cgroup_text, '\n')) {
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (line.substr(0, first) == "0" && controllers.empty()) {
      v2_path = path;
    } else if (has_token(controllers, controller, ',')) {
      v1_path = path;
    }
  }
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
  const std::optional<std::string>& path = v1_mount ? v1_path : v2_path;
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

// Keeps `candidate` in `search` when it is tighter than what is there.
inline void keep_tightest(cgroup_limit_search& search, cgroup_limit candidate) {
  if (!search.tightest || candidate.headroom() < search.tightest->headroom()) {
    search.tightest = std::move(candidate);
  }
}

// The kernel's name of a hugetlb size in cgroup files: "2MB", "1GB", "64KB".
inline std::string hugetlb_cgroup_size_name(std::size_t page_bytes) {
  char name[32];
  if (page_bytes >= (std::size_t{1} << 30) && page_bytes % (std::size_t{1} << 30) == 0) {
    std::snprintf(name, sizeof name, "%zuGB", page_bytes >> 30);
  } else if (page_bytes >= (std::size_t{1} << 20) && page_bytes % (std::size_t{1} << 20) == 0) {
    std::snprintf(name, sizeof name, "%zuMB", page_bytes >> 20);
  } else {
    std::snprintf(name, sizeof name, "%zuKB", page_bytes >> 10);
  }
  return name;
}

// Whether `directory` belongs to a v1 hierarchy: its files are named the v1 way.
inline bool is_v1_directory(const std::string& directory, const char* v1_file) {
  return read_u64((directory + "/" + v1_file).c_str()).has_value();
}

}  // namespace detail

/// The memory cgroup limit with the least headroom along this process's hierarchy: v2
/// `memory.max` and `memory.high` (past `high` the kernel throttles and reclaims hard) against
/// `memory.current`; v1 `memory.limit_in_bytes` against `memory.usage_in_bytes`. File cache
/// (active_file + inactive_file in memory.stat) counts as reclaimable. Thread-safe.
inline cgroup_limit_search memory_limit() {
  cgroup_limit_search search;
  const std::vector<std::string>& directories = detail::cgroup_directories("memory");
  search.readable = !directories.empty();
  for (const std::string& dir : directories) {
    const std::string v1_limit = dir + "/memory.limit_in_bytes";
    bool unreadable = false;
    if (const auto limit = detail::read_u64(v1_limit.c_str())) {  // a v1 directory
      if (*limit >= detail::cgroup_unlimited) continue;
      cgroup_limit l{v1_limit, *limit,
                     detail::read_u64((dir + "/memory.usage_in_bytes").c_str()).value_or(0),
                     detail::sum_stat_fields(dir + "/memory.stat",
                                             {"total_active_file", "total_inactive_file"})};
      detail::keep_tightest(search, std::move(l));
      continue;
    }
    // v2 (the root and levels without the controller have no such files). Usage only where a
    // limit is set: most levels have none, and the files cost a read each.
    std::optional<std::uint64_t> usage;
    std::uint64_t reclaimable = 0;
    for (const char* name : {"/memory.max", "/memory.high"}) {
      const auto limit = detail::read_limit(dir + name, unreadable);
      if (!limit) continue;
      if (!usage) {
        usage = detail::read_u64((dir + "/memory.current").c_str());
        if (!usage) break;
        reclaimable =
            detail::sum_stat_fields(dir + "/memory.stat", {"active_file", "inactive_file"});
      }
      detail::keep_tightest(search, cgroup_limit{dir + name, *limit, *usage, reclaimable});
    }
    if (unreadable) search.readable = false;
  }
  return search;
}

/// Bytes this process can still charge to its memory cgroups, or nullopt when no limit is set
/// (or none can be read). Thread-safe.
inline std::optional<std::uint64_t> memory_headroom() {
  const cgroup_limit_search search = memory_limit();
  if (!search.tightest) return std::nullopt;
  return search.tightest->headroom();
}

/// Which hugetlb cgroup limit to look for.
enum class hugetlb_charge : unsigned char {
  fault,        ///< hugetlb.<size>.max (v1: limit_in_bytes): charged when a page is faulted in
  reservation,  ///< hugetlb.<size>.rsvd.max (v1: rsvd.limit_in_bytes): charged at mmap
};

/// The hugetlb cgroup limit on pages of `page_bytes` with the least headroom along this process's
/// hierarchy, for `charge`. Thread-safe.
inline cgroup_limit_search hugetlb_limit(std::size_t page_bytes, hugetlb_charge charge) {
  cgroup_limit_search search;
  const std::vector<std::string>& directories = detail::cgroup_directories("hugetlb");
  search.readable = !directories.empty();
  const std::string prefix = "/hugetlb." + detail::hugetlb_cgroup_size_name(page_bytes) +
                             (charge == hugetlb_charge::reservation ? ".rsvd" : "");
  for (const std::string& dir : directories) {
    const bool v1 = detail::is_v1_directory(dir, (prefix.substr(1) + ".usage_in_bytes").c_str());
    const std::string limit_file = dir + prefix + (v1 ? ".limit_in_bytes" : ".max");
    const std::string usage_file = dir + prefix + (v1 ? ".usage_in_bytes" : ".current");
    bool unreadable = false;
    const auto limit = detail::read_limit(limit_file, unreadable);
    if (unreadable) search.readable = false;
    if (!limit) continue;
    detail::keep_tightest(
        search,
        cgroup_limit{limit_file, *limit, detail::read_u64(usage_file.c_str()).value_or(0), 0});
  }
  return search;
}

// ---- another process's cgroup ------------------------------------------------------------------
// For tools that report on any process (hugepage-doctor): the lookup hugetlb_limit() and
// memory_limit() do for this process, on a given /proc/PID/cgroup and mountinfo text (so a tool
// can also read a captured tree).

/// The kernel's name of a hugetlb page size in cgroup file names: 2 MiB -> "2MB", 1 GiB -> "1GB",
/// 64 KiB -> "64KB".
inline std::string hugetlb_cgroup_size_name(std::size_t page_bytes) {
  return detail::hugetlb_cgroup_size_name(page_bytes);
}

/// The directories of the cgroup that `cgroup_text` (a /proc/PID/cgroup) names for `controller`
/// ("hugetlb", "memory"), innermost first, up to and including the hierarchy's mount point, where
/// `mountinfo_text` (a /proc/PID/mountinfo) mounts it: the controller's cgroup v1 hierarchy when
/// one is mounted, else the cgroup2 one. Empty when the hierarchy is not mounted or the cgroup
/// lies outside what the mount shows.
inline std::vector<std::string> cgroup_directories_of(std::string_view controller,
                                                      std::string_view cgroup_text,
                                                      std::string_view mountinfo_text) {
  return detail::cgroup_directories(controller, cgroup_text, mountinfo_text);
}

}  // namespace hugepage
