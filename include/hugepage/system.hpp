// hugepage/system.hpp - what this machine offers: THP settings, hugetlb pools, MADV_COLLAPSE.
//
// Read-only introspection of
//   /sys/kernel/mm/transparent_hugepage/{enabled,defrag,shmem_enabled,hpage_pmd_size}
//   /sys/kernel/mm/transparent_hugepage/hugepages-<PMD kB>kB/enabled (Linux 6.8+)
//   /sys/kernel/mm/transparent_hugepage/khugepaged/{max_ptes_none,scan_sleep_millisecs,...}
//   /sys/kernel/mm/hugepages/hugepages-<kB>kB/{nr,free,resv,surplus,nr_overcommit}_hugepages
//   /sys/devices/system/node/node<N>/hugepages/... (per NUMA node; no resv there)
// Each reader of files takes `root`: "" for the live system, else a directory holding a copy of
// the tree (kernel_files.hpp lists the parser and reader of each kernel file).
// A file that cannot be read is reported as an empty optional, never as a made-up zero.
#pragma once

#include <dirent.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"

#ifndef PR_THP_DISABLE_EXCEPT_ADVISED
#define PR_THP_DISABLE_EXCEPT_ADVISED (1 << 1)
#endif

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

/// Whether anonymous memory faults PMD-size transparent huge pages (2 MiB on x86-64). Since Linux
/// 6.8 two files decide it: the per-size `hugepages-<PMD kB>kB/enabled` (always, inherit,
/// madvise, never) overrides the top-level `enabled` unless it says `inherit`. Before 6.8 (no
/// per-size file) the top-level file alone. read_thp_mode() is the one reader the library uses.
enum class thp_mode : unsigned char {
  always,   ///< every anonymous range
  madvise,  ///< ranges advised with MADV_HUGEPAGE only
  never,    ///< no range: faults and khugepaged give base pages
};

/// Returns "always", "madvise" or "never".
constexpr const char* name_of(thp_mode mode) noexcept {
  switch (mode) {
    case thp_mode::always: return "always";
    case thp_mode::madvise: return "madvise";
    case thp_mode::never: return "never";
  }
  return "never";
}

/// Transparent huge page settings.
struct thp_settings {
  std::optional<std::string> enabled;  ///< top-level: always | madvise | never
  /// hugepages-<PMD kB>kB/enabled: always | inherit | madvise | never; empty before Linux 6.8
  std::optional<std::string> pmd_enabled;
  /// What the two files decide for PMD-size THP (thp_mode); empty when unreadable (no THP)
  std::optional<thp_mode> pmd_mode;
  std::optional<std::string> defrag;           ///< always | defer | defer+madvise | madvise | never
  std::optional<std::string> shmem_enabled;    ///< always | within_size | advise | never | ...
  std::optional<std::size_t> pmd_bytes;        ///< hpage_pmd_size
  std::optional<std::uint64_t> max_ptes_none;  ///< khugepaged: empty PTEs it may fill per collapse
  std::optional<std::uint64_t> max_ptes_swap;
  std::optional<std::uint64_t> pages_to_scan;
  std::optional<std::uint64_t> scan_sleep_millisecs;
  std::optional<std::uint64_t> alloc_sleep_millisecs;
  std::optional<bool> khugepaged_defrag;
};

/// One size of multi-size THP (Linux 6.8+): transparent_hugepage/hugepages-<kB>kB/.
struct mthp_size {
  std::size_t page_bytes = 0;
  std::string enabled;        ///< anonymous: always | inherit | madvise | never ("" when absent)
  std::string shmem_enabled;  ///< shmem/tmpfs: always | inherit | within_size | advise | never
  std::map<std::string, std::uint64_t> stats;  ///< the stats/ counters (anon_fault_alloc, ...)
};

/// Whether MADV_COLLAPSE works here.
enum class collapse_support {
  works,        ///< a probe collapsed a populated 2 MiB range
  unsupported,  ///< EINVAL: kernel older than 6.1, or THP disabled (`never`, PR_SET_THP_DISABLE)
  transient,    ///< the call exists but failed this time (EAGAIN, ENOMEM, EBUSY)
  unknown,      ///< the probe could not run (no memory for its 2 MiB)
};

/// Returns a short name for `support` ("works", "unsupported", ...).
constexpr const char* name_of(collapse_support support) noexcept {
  switch (support) {
    case collapse_support::works: return "works";
    case collapse_support::unsupported: return "unsupported";
    case collapse_support::transient: return "transient failure";
    case collapse_support::unknown: return "unknown";
  }
  return "unknown";
}

/// The machine's hugepage state.
struct system_state {
  std::string kernel_release;
  thp_settings thp;
  std::vector<hugetlb_pool> pools;  ///< system-wide pools, by ascending page size
  collapse_support collapse = collapse_support::unknown;
};

/// Whether THP is disabled for the calling process in a way that reaches advised memory:
/// PR_SET_THP_DISABLE (prctl(2)) without Linux 6.18's exception for advised memory
/// (PR_THP_DISABLE_EXCEPT_ADVISED). MADV_COLLAPSE and MADV_HUGEPAGE get no huge page then.
/// False when prctl fails. Thread-safe; one system call.
inline bool thp_disabled_for_process() noexcept {
  const int disabled = ::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
  return disabled > 0 && (disabled & PR_THP_DISABLE_EXCEPT_ADVISED) == 0;
}

namespace detail {
/// The directory of THP's switches; per size: hugepages-<kB>kB/ in it (Linux 6.8+).
inline constexpr const char* thp_directory = "/sys/kernel/mm/transparent_hugepage/";
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

/// hpage_pmd_size's value if it is a power of two at least the base page size, else 2 MiB (the
/// file is absent without THP; 512 MiB on arm64 with 64 KiB base pages).
inline std::size_t valid_thp_bytes(std::optional<std::uint64_t> value) noexcept {
  const std::size_t v = value ? static_cast<std::size_t>(*value) : 0;
  return v >= os::base_page_size() && (v & (v - 1)) == 0 ? v : 2 * units::mib;
}
inline std::optional<std::uint64_t> read_u64_in(const std::string& dir, const char* name) {
  return read_u64((dir + name).c_str());
}

/// The mode of a THP `enabled` word, or nullopt for `inherit` and anything else.
constexpr std::optional<thp_mode> thp_mode_of(std::string_view word) noexcept {
  if (word == "always") return thp_mode::always;
  if (word == "madvise") return thp_mode::madvise;
  if (word == "never") return thp_mode::never;
  return std::nullopt;
}

/// The effective PMD-size THP mode from the texts of the top-level `enabled` file and of the
/// per-size `hugepages-<PMD kB>kB/enabled` (nullopt: no such file, a kernel before 6.8). nullopt
/// when the texts do not say (unreadable, unknown words). Pure; allocates nothing.
constexpr std::optional<thp_mode> effective_thp_mode(
    std::string_view top, std::optional<std::string_view> per_size) noexcept {
  if (per_size) {
    const std::string_view word = bracketed(*per_size);
    if (word != "inherit") return thp_mode_of(word);
  }
  return thp_mode_of(bracketed(top));
}

/// read_thp_mode() for the files at `top_path` and `per_size_path` (absent: no per-size switch).
inline std::optional<thp_mode> read_thp_mode_at(const char* top_path,
                                                const char* per_size_path) noexcept {
  // Stack buffers: read on allocation paths, where std::bad_alloc must not come from here.
  char top[128] = {};
  char per_size[128] = {};
  const long n = read_small_file(top_path, top, sizeof top);
  const long m = read_small_file(per_size_path, per_size, sizeof per_size);
  const std::string_view top_text(top, n > 0 ? static_cast<std::size_t>(n) : 0);
  if (m < 0) return effective_thp_mode(top_text, std::nullopt);
  return effective_thp_mode(top_text, std::string_view(per_size, static_cast<std::size_t>(m)));
}
}  // namespace detail

/// The sysfs directory of a hugetlb pool of `page_bytes` pages, ending in '/': the system-wide
/// /sys/kernel/mm/hugepages/hugepages-<kB>kB/, or with a `node` that node's
/// /sys/devices/system/node/node<N>/hugepages/hugepages-<kB>kB/; prefixed with `root` (a
/// captured tree). Builds the path only: the directory may not exist.
using detail::pool_directory;

/// The THP page size from the text of hpage_pmd_size: `value` when it is a power of two of at
/// least the base page size, else 2 MiB (the file is absent without THP). Pure.
using detail::valid_thp_bytes;

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

/// The size of a transparent huge page: hpage_pmd_size, read once (2 MiB when unreadable; 512 MiB
/// on arm64 with 64 KiB base pages). Thread-safe.
inline std::size_t thp_page_bytes() noexcept {
  static const std::size_t bytes = [] {
    char path[96];  // no allocation: this function is noexcept
    std::snprintf(path, sizeof path, "%shpage_pmd_size", detail::thp_directory);
    return detail::valid_thp_bytes(detail::read_u64(path));
  }();
  return bytes;
}

/// Reads the effective mode of PMD-size THP (thp_mode): the per-size switch of
/// thp_page_bytes(), else the top-level `enabled`. Empty when the files say nothing readable
/// (a kernel without CONFIG_TRANSPARENT_HUGEPAGE). Allocates nothing; thread-safe.
inline std::optional<thp_mode> read_thp_mode() noexcept {
  struct paths {
    std::array<char, 96> top{};
    std::array<char, 96> per_size{};
  };
  static const paths files = [] {
    paths p;
    std::snprintf(p.top.data(), p.top.size(), "%senabled", detail::thp_directory);
    std::snprintf(p.per_size.data(), p.per_size.size(), "%shugepages-%zukB/enabled",
                  detail::thp_directory, thp_page_bytes() / 1024);
    return p;
  }();
  return detail::read_thp_mode_at(files.top.data(), files.per_size.data());
}

/// Reads the THP settings under `root` ("" for the live system, else a copy of the tree): the
/// mode files, hpage_pmd_size, the per-size switch of the PMD size, khugepaged's numbers. The
/// effective mode comes from the same parser as read_thp_mode()'s (detail::effective_thp_mode).
inline thp_settings read_thp_settings(const std::string& root = "") {
  const std::string base = root + detail::thp_directory;
  const auto mode = [&](const std::string& name) -> std::optional<std::string> {
    std::error_code ec;
    const std::string text = detail::read_file((base + name).c_str(), ec);
    if (ec) return std::nullopt;
    return detail::selected_mode(text);
  };
  const auto number = [&](const char* name) { return detail::read_u64((base + name).c_str()); };
  thp_settings s;
  s.enabled = mode("enabled");
  if (const auto pmd = number("hpage_pmd_size")) s.pmd_bytes = static_cast<std::size_t>(*pmd);
  const std::size_t pmd_bytes =
      root.empty() ? thp_page_bytes() : detail::valid_thp_bytes(s.pmd_bytes);
  s.pmd_enabled = mode("hugepages-" + std::to_string(pmd_bytes / 1024) + "kB/enabled");
  s.pmd_mode = detail::effective_thp_mode(
      s.enabled.value_or(""),
      s.pmd_enabled ? std::optional<std::string_view>(*s.pmd_enabled) : std::nullopt);
  s.defrag = mode("defrag");
  s.shmem_enabled = mode("shmem_enabled");
  s.max_ptes_none = number("khugepaged/max_ptes_none");
  s.max_ptes_swap = number("khugepaged/max_ptes_swap");
  s.pages_to_scan = number("khugepaged/pages_to_scan");
  s.scan_sleep_millisecs = number("khugepaged/scan_sleep_millisecs");
  s.alloc_sleep_millisecs = number("khugepaged/alloc_sleep_millisecs");
  if (const auto defrag = number("khugepaged/defrag")) s.khugepaged_defrag = *defrag != 0;
  return s;
}

/// Reads the sizes of multi-size THP under `root` ("" for the live system): one per
/// hugepages-<kB>kB directory, ascending, with its two switches (the bracketed word; "" when the
/// file is absent: sizes below the anonymous minimum have shmem_enabled only) and the stats/
/// counters it has (Linux 6.10+). Empty before Linux 6.8.
inline std::vector<mthp_size> read_mthp_sizes(const std::string& root = "") {
  std::vector<mthp_size> sizes;
  const std::string base = root + detail::thp_directory;
  DIR* d = ::opendir(base.c_str());
  if (d == nullptr) return sizes;
  while (const dirent* e = ::readdir(d)) {
    unsigned long kb = 0;
    char tail[8] = {};
    if (std::sscanf(e->d_name, "hugepages-%lukB%7s", &kb, tail) != 1 || kb == 0) continue;
    mthp_size m;
    m.page_bytes = static_cast<std::size_t>(kb) * 1024;
    const std::string dir = base + e->d_name + "/";
    const auto mode = [&](const char* file) -> std::string {
      std::error_code ec;
      const std::string text = detail::read_file((dir + file).c_str(), ec);
      return ec ? std::string() : detail::selected_mode(text);
    };
    m.enabled = mode("enabled");
    m.shmem_enabled = mode("shmem_enabled");
    for (const char* stat :
         {"anon_fault_alloc", "anon_fault_fallback", "anon_fault_fallback_charge", "shmem_alloc",
          "shmem_fallback", "swpout", "swpout_fallback", "split", "split_failed"}) {
      std::error_code ec;
      const std::string text = detail::read_file((dir + "stats/" + stat).c_str(), ec);
      if (!ec) m.stats[stat] = detail::parse_u64(text).value_or(0);
    }
    sizes.push_back(std::move(m));
  }
  ::closedir(d);
  std::sort(sizes.begin(), sizes.end(),
            [](const mthp_size& a, const mthp_size& b) { return a.page_bytes < b.page_bytes; });
  return sizes;
}

/// Tries MADV_COLLAPSE on a fresh, populated 2 MiB range and says whether it worked. Costs one
/// aligned mapping, one page fault and one collapse (about a millisecond). Thread-safe; does not
/// touch the library statistics.
inline collapse_support probe_collapse() noexcept {
  const std::size_t length = thp_page_bytes();
  std::error_code ec;
  void* p = os::map_aligned(length, length, ec);
  if (p == nullptr) return collapse_support::unknown;
  static_cast<volatile unsigned char*>(p)[0] = 1;
  const std::error_code result = os::collapse(p, length);
  os::unmap(p, length);
  if (!result) return collapse_support::works;
  if (result == std::errc::invalid_argument) return collapse_support::unsupported;
  return collapse_support::transient;
}

/// Physical memory of this machine in bytes (sysconf: _SC_PHYS_PAGES x page size); 0 when unknown.
/// Thread-safe.
inline std::uint64_t physical_memory_bytes() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? static_cast<std::uint64_t>(pages) * os::base_page_size() : 0;
}

/// Reads the whole system state under `root` ("" for the live system, else a copy of the tree);
/// `probe` also runs probe_collapse(), on the live system. Thread-safe.
inline system_state read_system_state(bool probe = true, const std::string& root = "") {
  system_state state;
  state.kernel_release = kernel_release(root);
  state.thp = read_thp_settings(root);
  for (const std::size_t bytes : pool_page_sizes((root + detail::pools_directory).c_str())) {
    if (auto pool = read_pool(bytes, std::nullopt, root)) state.pools.push_back(*pool);
  }
  state.collapse = probe ? probe_collapse() : collapse_support::unknown;
  return state;
}

}  // namespace hugepage
