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

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/detail/cgroup_files.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"

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

// Keeps `candidate` in `search` when it is tighter than what is there.
inline void keep_tightest(cgroup_limit_search& search, cgroup_limit candidate) {
  if (!search.tightest || candidate.headroom() < search.tightest->headroom()) {
    search.tightest = std::move(candidate);
  }
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

/// The kernel's name of a hugetlb page size in cgroup file names: 2 MiB -> "2MB", 1 GiB -> "1GB",
/// 64 KiB -> "64KB".
inline std::string hugetlb_cgroup_size_name(std::size_t page_bytes) {
  return detail::hugetlb_cgroup_size_name(page_bytes);
}

/// What the hugetlb cgroup files of one charge, one page size and one cgroup say.
struct hugetlb_charge_files {
  /// The limit file (parse_cgroup_limit): empty when absent, unreadable or malformed; holding
  /// nullopt when it sets no limit ("max", v1's "unlimited").
  std::optional<std::optional<std::uint64_t>> limit;
  std::optional<std::uint64_t> usage;  ///< bytes charged now; empty when unreadable
  bool unreadable = false;             ///< the limit file exists but could not be read
};

/// The name of a hugetlb cgroup file in a v2 (`v2`) or v1 hierarchy: the limit of `charge`
/// ("hugetlb.2MB.max", "hugetlb.2MB.rsvd.limit_in_bytes") or, with `usage`, its usage
/// ("hugetlb.2MB.current", "hugetlb.2MB.rsvd.usage_in_bytes").
inline std::string hugetlb_cgroup_file(std::size_t page_bytes, hugetlb_charge charge, bool v2,
                                       bool usage) {
  return "hugetlb." + detail::hugetlb_cgroup_size_name(page_bytes) +
         (charge == hugetlb_charge::reservation ? ".rsvd" : "") +
         (usage ? (v2 ? ".current" : ".usage_in_bytes") : (v2 ? ".max" : ".limit_in_bytes"));
}

/// Reads the limit and usage files of `charge` on pages of `page_bytes` in the cgroup
/// `directory` (an absolute path, read under `root`: "" for the live system) of a v2 (`v2`) or v1
/// hierarchy. Thread-safe.
inline hugetlb_charge_files read_hugetlb_charge(const std::string& directory,
                                                std::size_t page_bytes, hugetlb_charge charge,
                                                bool v2, const std::string& root = "") {
  hugetlb_charge_files files;
  std::error_code ec;
  const std::string base = root + directory + "/";
  const std::string limit =
      detail::read_file((base + hugetlb_cgroup_file(page_bytes, charge, v2, false)).c_str(), ec);
  if (!ec) {
    files.limit = parse_cgroup_limit(limit);
  } else if (ec != std::errc::no_such_file_or_directory) {
    files.unreadable = true;
  }
  const std::string usage =
      detail::read_file((base + hugetlb_cgroup_file(page_bytes, charge, v2, true)).c_str(), ec);
  if (!ec) files.usage = detail::parse_u64(usage);
  return files;
}

/// How often the fault-time hugetlb limit on pages of `page_bytes` refused a charge in the cgroup
/// `directory` (under `root`): v2 hugetlb.<size>.events "max N", v1 hugetlb.<size>.failcnt. Empty
/// when the file cannot be read or says nothing. Thread-safe.
inline std::optional<std::uint64_t> read_hugetlb_refusals(const std::string& directory,
                                                          std::size_t page_bytes, bool v2,
                                                          const std::string& root = "") {
  std::error_code ec;
  const std::string text = detail::read_file(
      (root + directory + "/hugetlb." + detail::hugetlb_cgroup_size_name(page_bytes) +
       (v2 ? ".events" : ".failcnt"))
          .c_str(),
      ec);
  if (ec) return std::nullopt;
  return v2 ? parse_cgroup_events_max(text) : detail::parse_u64(text);
}

/// The hugetlb cgroup limit on pages of `page_bytes` with the least headroom along this process's
/// hierarchy, for `charge`. Thread-safe.
inline cgroup_limit_search hugetlb_limit(std::size_t page_bytes, hugetlb_charge charge) {
  cgroup_limit_search search;
  const std::vector<std::string>& directories = detail::cgroup_directories("hugetlb");
  search.readable = !directories.empty();
  for (const std::string& dir : directories) {
    // A v1 directory names its files the v1 way; v2 levels without the controller have neither.
    const bool v1 =
        detail::read_u64((dir + "/" + hugetlb_cgroup_file(page_bytes, charge, false, true)).c_str())
            .has_value();
    const hugetlb_charge_files files = read_hugetlb_charge(dir, page_bytes, charge, !v1);
    if (files.unreadable) search.readable = false;
    if (!files.limit || !*files.limit) continue;
    detail::keep_tightest(
        search, cgroup_limit{dir + "/" + hugetlb_cgroup_file(page_bytes, charge, !v1, false),
                             **files.limit, files.usage.value_or(0), 0});
  }
  return search;
}

// ---- another process's cgroup ------------------------------------------------------------------
// For tools that report on any process (hugepage-doctor): the lookup hugetlb_limit() and
// memory_limit() do for this process, on a given /proc/PID/cgroup and mountinfo text (so a tool
// can also read a captured tree).

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

/// cgroup_directories_of() over the parsed files (parse_proc_cgroup(), parse_mountinfo()).
inline std::vector<std::string> cgroup_directories_of(std::string_view controller,
                                                      const std::vector<proc_cgroup_line>& cgroups,
                                                      const std::vector<mount_info>& mounts) {
  return detail::cgroup_directories(controller, cgroups, mounts);
}

}  // namespace hugepage
