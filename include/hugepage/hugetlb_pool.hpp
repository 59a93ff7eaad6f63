// hugepage/hugetlb_pool.hpp - the hugetlb pools: how many pages of each size are reserved, free,
// promised and overcommitted, system-wide or on one NUMA node.
//
// Read-only, from
//   /sys/kernel/mm/hugepages/hugepages-<kB>kB/{nr,free,resv,surplus,nr_overcommit}_hugepages
//   /sys/devices/system/node/node<N>/hugepages/hugepages-<kB>kB/... (per node; no resv there)
// The allocation path reads a pool when the kernel refuses pages (refusal.hpp), so this header
// carries the pool and nothing else of system.hpp's report. A file that cannot be read is an
// empty optional, never a made-up zero.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage {

/// One hugetlb pool (one page size), system-wide or on one NUMA node.
struct hugetlb_pool {
  std::size_t page_bytes = 0;
  std::optional<int> node;                  ///< empty: the system-wide pool
  std::optional<std::uint64_t> total;       ///< nr_hugepages
  std::optional<std::uint64_t> free;        ///< free_hugepages (includes reserved ones)
  std::optional<std::uint64_t> reserved;    ///< resv_hugepages: promised to mappings, not faulted
  std::optional<std::uint64_t> surplus;     ///< surplus_hugepages (overcommitted)
  std::optional<std::uint64_t> overcommit;  ///< nr_overcommit_hugepages

  /// Pages a new private mapping can still reserve: free minus reserved (plus overcommit room).
  std::optional<std::uint64_t> available() const noexcept {
    if (!free) return std::nullopt;
    const std::uint64_t resv = reserved.value_or(0);
    std::uint64_t room = *free > resv ? *free - resv : 0;
    if (overcommit && surplus && *overcommit > *surplus) room += *overcommit - *surplus;
    return room;
  }
};

namespace detail {
/// The directory of the system-wide hugetlb pools: hugepages-<kB>kB/ in it.
inline constexpr const char* pools_directory = "/sys/kernel/mm/hugepages";

inline std::string pool_directory(std::size_t page_bytes, std::optional<int> node,
                                  const std::string& root = "") {
  char path[160];
  if (node) {
    std::snprintf(path, sizeof path, "/sys/devices/system/node/node%d/hugepages/hugepages-%zukB/",
                  *node, page_bytes / units::kib);
  } else {
    std::snprintf(path, sizeof path, "%s/hugepages-%zukB/", pools_directory,
                  page_bytes / units::kib);
  }
  return root + path;
}

inline std::optional<std::uint64_t> read_u64_in(const std::string& dir, const char* name) {
  return read_u64((dir + name).c_str());
}
}  // namespace detail

/// The sysfs directory of a hugetlb pool of `page_bytes` pages, ending in '/': the system-wide
/// /sys/kernel/mm/hugepages/hugepages-<kB>kB/, or with a `node` that node's
/// /sys/devices/system/node/node<N>/hugepages/hugepages-<kB>kB/; prefixed with `root` (a
/// captured tree). Builds the path only: the directory may not exist.
using detail::pool_directory;

/// Reads the hugetlb pool of `page_bytes` (system-wide, or of NUMA `node`). Returns nullopt when
/// the kernel has no such pool. Thread-safe.
/// `root`: where to read ("" for the live system, else a copy of the tree).
inline std::optional<hugetlb_pool> read_pool(std::size_t page_bytes,
                                             std::optional<int> node = std::nullopt,
                                             const std::string& root = "") {
  const std::string dir = detail::pool_directory(page_bytes, node, root);
  hugetlb_pool pool;
  pool.page_bytes = page_bytes;
  pool.node = node;
  pool.total = detail::read_u64_in(dir, "nr_hugepages");
  if (!pool.total) return std::nullopt;
  pool.free = detail::read_u64_in(dir, "free_hugepages");
  pool.reserved = detail::read_u64_in(dir, "resv_hugepages");
  pool.surplus = detail::read_u64_in(dir, "surplus_hugepages");
  if (!node) pool.overcommit = detail::read_u64_in(dir, "nr_overcommit_hugepages");
  return pool;
}

/// Reads the hugetlb pool of `size`.
inline std::optional<hugetlb_pool> read_pool(page_size size) { return read_pool(bytes_of(size)); }

/// Lists the page sizes (bytes, ascending) that have a hugetlb pool under `directory`.
inline std::vector<std::size_t> pool_page_sizes(const char* directory = detail::pools_directory) {
  std::vector<std::size_t> sizes;
  DIR* dir = ::opendir(directory);
  if (dir == nullptr) return sizes;
  while (const dirent* entry = ::readdir(dir)) {
    std::size_t kb = 0;
    if (std::sscanf(entry->d_name, "hugepages-%zukB", &kb) == 1) sizes.push_back(kb * units::kib);
  }
  ::closedir(dir);
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

/// Physical memory of this machine in bytes (sysconf: _SC_PHYS_PAGES x page size); 0 when unknown.
/// Thread-safe.
inline std::uint64_t physical_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? static_cast<std::uint64_t>(pages) * os::base_page_size() : 0;
}

}  // namespace hugepage
