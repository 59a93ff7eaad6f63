// hugepage/backing.hpp - proof of what backs a range of memory.
//
// backing_of(p, bytes) answers, for every base page of the range: on a PMD-mapped transparent
// huge page, on a hugetlb page (2 MiB or 1 GiB), on a base page, not resident, or not mapped.
//
// Two sources, and the report says which it used:
//  - kpageflags (exact, needs CAP_SYS_ADMIN): /proc/<pid>/pagemap gives each page's PFN, and
//    /proc/kpageflags says whether that PFN belongs to a THP (bit 22). A 2 MiB window counts as THP
//    only when it is fully present, virtually and physically aligned and contiguous: that is what
//    a PMD mapping looks like. THP folios mapped by PTEs (after a partial munmap) or smaller mTHP
//    folios give no TLB reach and count as base pages.
//  - smaps (no privilege): residency still comes from pagemap's present bit, hugetlb mappings are
//    known from KernelPageSize, but THP is known only per mapping (AnonHugePages); when the range
//    covers part of a mapping, its share is prorated and the report is marked approximate.
// The huge page sizes of hugetlb mappings come from smaps in both cases.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"

namespace hugepage {

/// Which source a backing_report came from.
enum class backing_source {
  kpageflags,   ///< exact, per page
  smaps,        ///< per mapping; exact only for whole mappings and hugetlb
  unavailable,  ///< nothing readable: see `note`
};

/// Returns "kpageflags", "smaps" or "unavailable".
constexpr const char* name_of(backing_source source) noexcept {
  switch (source) {
    case backing_source::kpageflags: return "kpageflags";
    case backing_source::smaps: return "smaps";
    case backing_source::unavailable: return "unavailable";
  }
  return "unavailable";
}

/// Where the bytes of a range live. The range is widened to whole base pages.
struct backing_report {
  std::size_t bytes = 0;         ///< bytes examined
  std::size_t thp = 0;           ///< on PMD-mapped transparent huge pages
  std::size_t hugetlb_2m = 0;    ///< on 2 MiB hugetlb pages
  std::size_t hugetlb_1g = 0;    ///< on 1 GiB hugetlb pages
  std::size_t base = 0;          ///< resident on base pages
  std::size_t not_resident = 0;  ///< mapped, not faulted in (or swapped out)
  std::size_t unmapped = 0;      ///< not mapped at all
  backing_source source = backing_source::unavailable;
  bool exact = false;  ///< false: THP bytes prorated from smaps, or source unavailable
  std::string note;    ///< why the report is approximate or unavailable; empty otherwise

  std::size_t huge_bytes() const noexcept { return thp + hugetlb_2m + hugetlb_1g; }
  std::size_t resident_bytes() const noexcept { return huge_bytes() + base; }
  /// Share of the examined bytes that is on huge pages, 0..1.
  double huge_fraction() const noexcept {
    return bytes == 0 ? 0.0 : static_cast<double>(huge_bytes()) / static_cast<double>(bytes);
  }
};

namespace detail {

constexpr std::uint64_t pagemap_present = std::uint64_t{1} << 63;
constexpr std::uint64_t pagemap_pfn_mask = (std::uint64_t{1} << 55) - 1;
constexpr std::uint64_t kpf_thp = std::uint64_t{1} << 22;

inline std::string proc_path(pid_t pid, const char* file) {
  return (pid == 0 ? std::string("/proc/self/") : "/proc/" + std::to_string(pid) + "/") + file;
}

// Reads pagemap entries for the base pages [first, first + count); false on a read error.
inline bool read_pagemap(int fd, std::uintptr_t first_page, std::size_t count,
                         std::vector<std::uint64_t>& out) {
  out.resize(count);
  const std::size_t length = count * sizeof(std::uint64_t);
  return pread_full(fd, out.data(), length, first_page * sizeof(std::uint64_t)) ==
         static_cast<long>(length);
}

inline bool read_kpageflags(int fd, std::uint64_t pfn, std::uint64_t& flags) {
  return pread_full(fd, &flags, sizeof flags, pfn * sizeof flags) ==
         static_cast<long>(sizeof flags);
}

// Classifies [lo, hi) inside the non-hugetlb mapping `m` page by page, with kpageflags.
// Returns false when PFNs are hidden (no CAP_SYS_ADMIN) or a read failed.
inline bool classify_exact(const mapping_info& m, std::uintptr_t lo, std::uintptr_t hi,
                           int pagemap_fd, int kpageflags_fd, backing_report& r) {
  const std::size_t page = os::base_page_size();
  const std::size_t window = std::size_t{2} << 20;  // a PMD: 2 MiB on x86-64 and arm64/4K
  const std::size_t per_window = window / page;
  // Whole PMD windows around [lo, hi), clipped to the mapping: a window is huge or not as a whole.
  const std::uintptr_t first = std::max<std::uintptr_t>(lo & ~(window - 1), m.start);
  const std::uintptr_t last = std::min<std::uintptr_t>((hi + window - 1) & ~(window - 1), m.end);
  std::vector<std::uint64_t> entries;
  constexpr std::size_t windows_per_read = 64;
  for (std::uintptr_t chunk = first; chunk < last;) {
    const std::uintptr_t chunk_end =
        std::min<std::uintptr_t>(((chunk & ~(window - 1)) + windows_per_read * window), last);
    if (!read_pagemap(pagemap_fd, chunk / page, (chunk_end - chunk) / page, entries)) return false;
    for (std::uintptr_t w = chunk; w < chunk_end;) {
      const std::uintptr_t w_end =
          std::min<std::uintptr_t>((w & ~(window - 1)) + window, chunk_end);
      const std::size_t base_index = (w - chunk) / page;
      const std::size_t count = (w_end - w) / page;
      bool pmd_mapped = false;
      if (count == per_window) {
        const std::uint64_t head = entries[base_index];
        const std::uint64_t pfn = head & pagemap_pfn_mask;
        pmd_mapped = (head & pagemap_present) != 0 && pfn % per_window == 0;
        for (std::size_t i = 1; pmd_mapped && i < count; ++i) {
          const std::uint64_t e = entries[base_index + i];
          pmd_mapped = (e & pagemap_present) != 0 && (e & pagemap_pfn_mask) == pfn + i;
        }
        if (pmd_mapped) {
          std::uint64_t head_flags = 0, tail_flags = 0;
          if (!read_kpageflags(kpageflags_fd, pfn, head_flags) ||
              !read_kpageflags(kpageflags_fd, pfn + count - 1, tail_flags)) {
            return false;
          }
          pmd_mapped = (head_flags & kpf_thp) != 0 && (tail_flags & kpf_thp) != 0;
        }
      }
      for (std::size_t i = 0; i < count; ++i) {
        const std::uintptr_t address = w + i * page;
        if (address < lo || address >= hi) continue;
        const std::uint64_t e = entries[base_index + i];
        if ((e & pagemap_present) == 0) {
          r.not_resident += page;
        } else if ((e & pagemap_pfn_mask) == 0) {
          return false;  // PFNs hidden from us
        } else if (pmd_mapped) {
          r.thp += page;
        } else {
          r.base += page;
        }
      }
      w = w_end;
    }
    chunk = chunk_end;
  }
  return true;
}

// `amount * part / whole` without overflow (amount, part <= whole): per-mapping sizes times range
// lengths pass 2^64 for mappings of a few GiB.
inline std::size_t prorate(std::size_t amount, std::size_t part, std::size_t whole) noexcept {
  if (whole == 0) return 0;
#if defined(__SIZEOF_INT128__)
  __extension__ using wide = unsigned __int128;
  return static_cast<std::size_t>(static_cast<wide>(amount) * part / whole);
#else
  return static_cast<std::size_t>(static_cast<long double>(amount) * part / whole);
#endif
}

// Counts resident and absent pages of [lo, hi) from pagemap's present bit (readable unprivileged).
inline bool count_present(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi,
                          std::size_t& present, std::size_t& absent) {
  const std::size_t page = os::base_page_size();
  std::vector<std::uint64_t> entries;
  constexpr std::size_t pages_per_read = 32768;
  for (std::uintptr_t at = lo; at < hi;) {
    const std::size_t count = std::min<std::size_t>((hi - at) / page, pages_per_read);
    if (!read_pagemap(pagemap_fd, at / page, count, entries)) return false;
    for (const std::uint64_t e : entries) ((e & pagemap_present) != 0 ? present : absent) += page;
    at += count * page;
  }
  return true;
}

}  // namespace detail

/// Reports what backs [p, p + bytes) in process `pid` (0: this process; another process needs
/// ptrace access to read its pagemap). Never throws for an unreadable or unmapped range: the
/// report says so. Thread-safe, but a concurrent munmap in the range makes the answer stale.
/// Cost: one smaps read, one pagemap read per 256 KiB of entries, two kpageflags reads per 2 MiB.
inline backing_report backing_of(pid_t pid, const void* p, std::size_t bytes) {
  backing_report r;
  const std::size_t page = os::base_page_size();
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0) {
    r.source = backing_source::kpageflags;
    r.exact = true;
    return r;
  }
  const std::uintptr_t lo = address & ~(std::uintptr_t{page} - 1);
  // Clip at the last whole page of the address space: `address + bytes` may wrap around.
  const std::uintptr_t top = UINTPTR_MAX & ~(std::uintptr_t{page} - 1);
  const std::uintptr_t hi = address >= top || bytes > top - address
                                ? top
                                : (address + bytes + page - 1) & ~(std::uintptr_t{page} - 1);
  r.bytes = hi - lo;

  std::error_code ec;
  const std::vector<mapping_info> mappings = read_smaps(pid, ec);
  if (ec) {
    r.note = "cannot read " + detail::proc_path(pid, "smaps") + ": " + ec.message();
    return r;
  }
  const detail::unique_fd pagemap(
      detail::open_read_only(detail::proc_path(pid, "pagemap").c_str()));
  const detail::unique_fd kpageflags(detail::open_read_only("/proc/kpageflags"));

  bool exact_possible = pagemap && kpageflags;
  r.source = exact_possible ? backing_source::kpageflags : backing_source::smaps;
  r.exact = true;
  if (!pagemap) {
    r.note = "pagemap unreadable: residency prorated from smaps";
  } else if (!kpageflags) {
    r.note = "/proc/kpageflags unreadable (needs CAP_SYS_ADMIN): THP prorated from smaps";
  }

  std::uintptr_t cursor = lo;
  for (const mapping_info& m : mappings) {
    if (m.end <= lo) continue;
    if (m.start >= hi) break;
    const std::uintptr_t s = std::max(m.start, lo);
    const std::uintptr_t e = std::min(m.end, hi);
    if (s > cursor) r.unmapped += s - cursor;
    cursor = e;
    const bool whole = s == m.start && e == m.end;
    if (m.is_hugetlb()) {
      std::size_t present = 0, absent = 0;
      if (!pagemap || !detail::count_present(pagemap.get(), s, e, present, absent)) {
        present = detail::prorate(m.private_hugetlb + m.shared_hugetlb, e - s, m.size());
        absent = (e - s) - std::min(present, e - s);
        r.exact = r.exact && whole;
      }
      (m.kernel_page_bytes >= (std::size_t{1} << 30) ? r.hugetlb_1g : r.hugetlb_2m) += present;
      r.not_resident += absent;
      continue;
    }
    if (exact_possible) {
      backing_report part;
      if (detail::classify_exact(m, s, e, pagemap.get(), kpageflags.get(), part)) {
        // pagemap cannot tell a PMD mapping from a whole THP folio mapped by PTEs (a VMA split
        // and merged again leaves one); AnonHugePages counts PMD mappings only, so it caps.
        const std::size_t thp = std::min(part.thp, m.anon_huge);
        if (thp < part.thp && !whole) {
          r.exact = false;
          r.note = "THP folios mapped by PTEs: THP capped by smaps AnonHugePages";
        }
        r.thp += thp;
        r.base += part.base + (part.thp - thp);
        r.not_resident += part.not_resident;
        continue;
      }
      // PFNs are hidden (kpageflags opened, yet no CAP_SYS_ADMIN): use smaps from here on.
      exact_possible = false;
      r.source = backing_source::smaps;
      r.note = "page frame numbers hidden (needs CAP_SYS_ADMIN): THP prorated from smaps";
      if (r.thp != 0) r.exact = false;
    }
    std::size_t present = 0, absent = 0;
    if (!pagemap || !detail::count_present(pagemap.get(), s, e, present, absent)) {
      present = detail::prorate(m.rss, e - s, m.size());
      present = std::min(present, e - s);
      absent = (e - s) - present;
      r.exact = r.exact && whole;
    }
    std::size_t huge = detail::prorate(m.anon_huge, e - s, m.size());
    if (!whole && m.anon_huge != 0) r.exact = false;
    huge = std::min(huge, present);
    r.thp += huge;
    r.base += present - huge;
    r.not_resident += absent;
  }
  if (hi > cursor) r.unmapped += hi - cursor;
  if (r.exact) r.note.clear();
  return r;
}

/// Reports what backs [p, p + bytes) in this process.
inline backing_report backing_of(const void* p, std::size_t bytes) {
  return backing_of(0, p, bytes);
}

}  // namespace hugepage
