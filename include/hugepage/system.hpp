// hugepage/system.hpp - what this machine offers: THP settings, hugetlb pools, MADV_COLLAPSE, read
// in full as one report (read_system_state) for the doctor, the benchmarks and the tests.
//
// The two pieces the allocation path needs live in their own headers, which this one includes:
// the pools (hugetlb_pool.hpp) and the THP mode and page size (thp_mode.hpp).
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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/hugetlb_pool.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/thp_mode.hpp"

namespace hugepage {

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
