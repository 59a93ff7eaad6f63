// hugepage/detail/backing_sources.hpp - the three sources of backing_of() (see backing.hpp).
//
// Each walks the mappings of a range and fills in a backing_report: PAGEMAP_SCAN runs of pages
// (classify_scan, backing_by_scan, backing_by_query), pagemap words with kpageflags
// (classify_exact, backing_by_pfn), or smaps' per-mapping counters prorated (backing_by_pfn
// without kpageflags). The mappings come from smaps (read_smaps) or from PROCMAP_QUERY.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/backing_report.hpp"
#include "hugepage/detail/errno_text.hpp"
#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/thp_mode.hpp"

namespace hugepage::detail {

// Bits of a /proc/<pid>/pagemap word and of a /proc/kpageflags word
// (Documentation/admin-guide/mm/pagemap.rst).
constexpr std::uint64_t pagemap_present = std::uint64_t{1} << 63;
constexpr std::uint64_t pagemap_pfn_mask = (std::uint64_t{1} << 55) - 1;
constexpr std::uint64_t kpf_anon = std::uint64_t{1} << 12;
constexpr std::uint64_t kpf_thp = std::uint64_t{1} << 22;
constexpr std::uint64_t kpf_zero_page = std::uint64_t{1} << 24;
constexpr std::uint64_t pagemap_exclusive = std::uint64_t{1} << 56;

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

// Whether the present page `entry` (a pagemap word) maps a zero page, from the frame's own
// KPF_ZERO_PAGE flag. A frame number alone proves nothing: some architectures have several zero
// pages, and a kernel that maps none (pvm_no_zero_page=1, s390 KVM guests) gives a read fault a
// page of its own, freed and reused later. pagemap marks no zero page exclusively mapped (it has no
// normal struct page), which spares the read for most written memory; `zero_frames` remembers the
// frames found to be zero pages. False and `ok` false when kpageflags cannot be read.
inline bool is_zero_page(std::uint64_t entry, int kpageflags_fd,
                         std::vector<std::uint64_t>& zero_frames, bool& ok) {
  ok = true;
  if ((entry & pagemap_exclusive) != 0) return false;
  const std::uint64_t pfn = entry & pagemap_pfn_mask;
  if (std::find(zero_frames.begin(), zero_frames.end(), pfn) != zero_frames.end()) return true;
  std::uint64_t flags = 0;
  if (!read_kpageflags(kpageflags_fd, pfn, flags)) {
    ok = false;
    return false;
  }
  if ((flags & kpf_zero_page) == 0) return false;
  zero_frames.push_back(pfn);
  return true;
}

// Whether THP in mapping `m` is shmem (memfd, tmpfs, SysV, shared anonymous) rather than the page
// cache of a regular file. smaps says which counter the mapping's PMD mappings went to.
inline bool is_shmem_mapping(const mapping_info& m) {
  if (m.shmem_huge != 0 || m.file_huge != 0) return m.shmem_huge >= m.file_huge;
  return m.name.empty() || m.name.compare(0, 7, "/memfd:") == 0 ||
         m.name.compare(0, 9, "/dev/zero") == 0 || m.name.compare(0, 5, "/SYSV") == 0 ||
         m.name.compare(0, 8, "/dev/shm") == 0;
}

inline void add_thp(const mapping_info& m, bool file_backed, std::size_t bytes, backing_report& r) {
  r.thp += bytes;
  if (file_backed) (is_shmem_mapping(m) ? r.thp_shmem : r.thp_file) += bytes;
}

// Classifies [lo, hi) inside mapping `m` with PAGEMAP_SCAN. On failure (ENOTTY before Linux 6.7)
// returns the error; `r` then holds part of the answer and must be discarded.
// `m` from PROCMAP_QUERY has no smaps counters (`anon_huge` is SIZE_MAX, no cap): file-backed THP
// there cannot be told shmem or page cache, and the call returns `scan_needs_smaps` instead.
constexpr std::errc scan_needs_smaps = std::errc::operation_in_progress;

inline std::error_code classify_scan(const mapping_info& m, std::uintptr_t lo, std::uintptr_t hi,
                                     int pagemap_fd, std::vector<pagemap::page_region>& regions,
                                     backing_report& r, bool from_query = false) {
  namespace pm = pagemap;
  constexpr std::uint64_t wanted = pm::page_is_present | pm::page_is_huge | pm::page_is_file |
                                   pm::page_is_pfnzero | pm::page_is_swapped;
  if (regions.empty()) regions.resize(1024);
  const bool hugetlb = m.is_hugetlb();
  std::size_t& hugetlb_part = m.kernel_page_bytes >= units::gib ? r.hugetlb_1g : r.hugetlb_2m;
  std::size_t anon_huge = 0;
  std::uintptr_t at = lo;
  while (at < hi) {
    std::size_t count = 0;
    std::uintptr_t walk_end = at;
    if (const std::error_code ec = pm::scan(pagemap_fd, at, hi, 0, wanted, regions.data(),
                                            regions.size(), count, walk_end)) {
      return ec;
    }
    for (std::size_t i = 0; i < count; ++i) {
      const pm::page_region& region = regions[i];
      const auto start = static_cast<std::uintptr_t>(region.start);
      const auto end = static_cast<std::uintptr_t>(region.end);
      // Pages the walk skipped (a VM_PFNMAP mapping: device memory) are not RAM we could count.
      if (start > at) r.not_resident += start - at;
      const std::size_t length = end - start;
      const std::uint64_t c = region.categories;
      if ((c & pm::page_is_present) == 0) {
        r.not_resident += length;
      } else if ((c & pm::page_is_pfnzero) != 0) {
        r.not_resident += length;  // read, never written: no memory of its own, no coverage
        r.zero_page += length;
      } else if (hugetlb) {
        hugetlb_part += length;
      } else if ((c & pm::page_is_huge) != 0 && (c & pm::page_is_file) != 0) {
        if (from_query) return std::make_error_code(scan_needs_smaps);
        add_thp(m, true, length, r);
      } else if ((c & pm::page_is_huge) != 0) {
        anon_huge += length;
      } else {
        r.base += length;
      }
      at = end;
    }
    if (count < regions.size()) {
      // The walk reached `hi`; pages after the last region were skipped by it (as above).
      if (hi > at) r.not_resident += hi - at;
      at = hi;
    } else if (walk_end > at) {
      r.not_resident += walk_end - at;  // the vector filled up: go on where the kernel stopped
      at = walk_end;
    }
  }
  // Kernels before the fix "fs/proc/task_mmu: fix PAGE_IS_PFNZERO detection for the huge zero
  // folio" (2025) report a read-faulted huge zero page as present and huge. It is no anonymous
  // THP, and AnonHugePages does not count it: anonymous huge bytes beyond AnonHugePages are it.
  const std::size_t real = std::min(anon_huge, m.anon_huge);
  r.thp += real;
  r.not_resident += anon_huge - real;
  r.zero_page += anon_huge - real;
  return {};
}

// What classify_exact found for one mapping.
struct exact_part {
  std::size_t thp_anon = 0, thp_file = 0, base = 0, not_resident = 0, zero_page = 0;
};

// Classifies [lo, hi) inside the non-hugetlb mapping `m` page by page, with kpageflags, one PMD
// window at a time: `visit(w, part)` for each window (from w, clipped to the mapping) with what
// lies in [lo, hi) of it. Returns false when PFNs are hidden (no CAP_SYS_ADMIN) or a read failed.
template <class Visit>
bool classify_windows(const mapping_info& m, std::uintptr_t lo, std::uintptr_t hi, int pagemap_fd,
                      int kpageflags_fd, Visit&& visit) {
  const std::size_t page = os::base_page_size();
  // A PMD (hpage_pmd_size): 2 MiB on x86-64 and arm64/4K, 32 MiB on arm64/16K, where a 2 MiB
  // window of a THP could be any piece of a PTE-mapped one.
  const std::size_t window = thp_page_bytes();
  const std::size_t per_window = window / page;
  std::vector<std::uint64_t> zero_frames;
  // Whole PMD windows around [lo, hi), clipped to the mapping: a window is huge or not as a whole.
  // Ends are computed as "from + step, or `to` when that is nearer": a window or read at the top
  // of the address space would wrap past 2^64 to 0.
  const auto up_to = [](std::uintptr_t from, std::size_t step, std::uintptr_t to) {
    return to - from <= step ? to : from + step;
  };
  const auto pages_below = [page](std::uintptr_t a) { return a / page + (a % page != 0 ? 1 : 0); };
  const std::uintptr_t first = std::max<std::uintptr_t>(lo & ~(window - 1), m.start);
  const std::uintptr_t last = std::min<std::uintptr_t>(
      hi > (~std::uintptr_t{0} & ~(window - 1)) ? hi : (hi + window - 1) & ~(window - 1), m.end);
  std::vector<std::uint64_t> entries;
  constexpr std::size_t windows_per_read = 64;
  for (std::uintptr_t chunk = first; chunk < last;) {
    const std::uintptr_t chunk_end = up_to(chunk & ~(window - 1), windows_per_read * window, last);
    const std::uintptr_t chunk_page = chunk / page;
    if (!read_pagemap(pagemap_fd, chunk_page, pages_below(chunk_end) - chunk_page, entries)) {
      return false;
    }
    for (std::uintptr_t w = chunk; w < chunk_end;) {
      const std::uintptr_t w_end = up_to(w & ~(window - 1), window, chunk_end);
      const std::size_t base_index = w / page - chunk_page;
      const std::size_t count = pages_below(w_end) - w / page;
      bool pmd_mapped = false;
      bool huge_zero = false;
      bool anon = true;
      exact_part r;
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
          // The huge zero page is flagged THP too (fs/proc/page.c), but holds nothing of ours.
          huge_zero = pmd_mapped && (head_flags & kpf_zero_page) != 0;
          anon = (head_flags & kpf_anon) != 0;
        }
      }
      for (std::size_t i = 0; i < count; ++i) {
        // Each page touching [lo, hi) counts for its bytes inside it (a caller's list may end off
        // a page boundary).
        const std::uintptr_t address = (w / page + i) * page;
        if (address >= hi) continue;
        const std::uintptr_t from = std::max(address, lo);
        const std::uintptr_t to = hi - address <= page ? hi : address + page;
        if (to <= from) continue;
        const std::size_t bytes = to - from;
        const std::uint64_t e = entries[base_index + i];
        const std::uint64_t pfn = e & pagemap_pfn_mask;
        if ((e & pagemap_present) == 0) {
          r.not_resident += bytes;
        } else if (pfn == 0) {
          return false;  // PFNs hidden from us
        } else if (huge_zero) {
          r.not_resident += bytes;
          r.zero_page += bytes;
        } else if (pmd_mapped) {
          (anon ? r.thp_anon : r.thp_file) += bytes;
        } else {
          bool ok = true;
          const bool zero = is_zero_page(e, kpageflags_fd, zero_frames, ok);
          if (!ok) return false;
          (zero ? r.zero_page : r.base) += bytes;
          if (zero) r.not_resident += bytes;
        }
      }
      visit(w, r);
      w = w_end;
    }
    chunk = chunk_end;
  }
  return true;
}

// classify_windows() summed over [lo, hi).
inline bool classify_exact(const mapping_info& m, std::uintptr_t lo, std::uintptr_t hi,
                           int pagemap_fd, int kpageflags_fd, exact_part& r) {
  return classify_windows(m, lo, hi, pagemap_fd, kpageflags_fd,
                          [&r](std::uintptr_t, const exact_part& part) {
                            r.thp_anon += part.thp_anon;
                            r.thp_file += part.thp_file;
                            r.base += part.base;
                            r.not_resident += part.not_resident;
                            r.zero_page += part.zero_page;
                          });
}

// The THP that classify_exact found over a whole mapping, split into what is mapped by PMDs and
// what is whole THP folios mapped by PTEs: pagemap words and kpageflags look the same for both (a
// mapping split and merged again leaves the second). smaps tells them apart, with a flaw: Linux
// 6.1 to 6.4 leave out of AnonHugePages and Rss alike a PMD that NUMA balancing made PROT_NONE for
// a hinting fault (follow_trans_huge_pmd() refuses it without FOLL_FORCE; 6.5's "smaps: use
// vm_normal_page_pmd()" counts it), while pagemap still shows it present. Resident bytes beyond
// Rss (whole PMDs of them) are such PMDs: PMD-mapped, though smaps did not count them. Pages
// faulted in between the smaps read and pagemap's add to that gap: past a PMD of them, a folio
// mapped by PTEs may be taken for PMD-mapped until a later read.
struct thp_split {
  std::size_t pmd_anon = 0, pmd_file = 0;  // mapped by PMDs
  std::size_t pte_anon = 0, pte_file = 0;  // whole folios mapped by PTEs
};

inline thp_split split_thp(const mapping_info& m, const exact_part& whole) noexcept {
  const std::size_t resident = whole.thp_anon + whole.thp_file + whole.base;
  std::size_t hidden = resident > m.rss ? (resident - m.rss) & ~(thp_page_bytes() - 1) : 0;
  thp_split t;
  t.pmd_anon = std::min(whole.thp_anon, m.anon_huge);
  const std::size_t hidden_anon = std::min(hidden, whole.thp_anon - t.pmd_anon);
  t.pmd_anon += hidden_anon;
  hidden -= hidden_anon;
  t.pmd_file = std::min(whole.thp_file, m.shmem_huge + m.file_huge);
  t.pmd_file += std::min(hidden, whole.thp_file - t.pmd_file);
  t.pte_anon = whole.thp_anon - t.pmd_anon;
  t.pte_file = whole.thp_file - t.pmd_file;
  return t;
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

// Counts resident and absent pages of [lo, hi) from pagemap's present bit (readable unprivileged),
// and in `shared` the resident ones not marked exclusively mapped (the zero page among them).
inline bool count_present(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi,
                          std::size_t& present, std::size_t& absent,
                          std::size_t* shared = nullptr) {
  const std::size_t page = os::base_page_size();
  std::vector<std::uint64_t> entries;
  constexpr std::size_t pages_per_read = 32768;
  // Every page that touches [lo, hi), each counted for its bytes inside it: a range off page
  // boundaries (a caller's list) ends in a part page, which a whole-page step never passed.
  const std::uintptr_t last = hi / page + (hi % page != 0 ? 1 : 0);
  for (std::uintptr_t first = lo / page; first < last;) {
    const std::size_t count = std::min<std::size_t>(last - first, pages_per_read);
    if (!read_pagemap(pagemap_fd, first, count, entries)) return false;
    for (std::size_t i = 0; i < count; ++i) {
      const std::uintptr_t at = (first + i) * page;  // below hi: the last page may end at 2^64
      const std::uintptr_t s = std::max<std::uintptr_t>(at, lo);
      const std::uintptr_t e = hi - at <= page ? hi : at + page;
      ((entries[i] & pagemap_present) != 0 ? present : absent) += e - s;
      if (shared != nullptr &&
          (entries[i] & (pagemap_present | pagemap_exclusive)) == pagemap_present) {
        *shared += e - s;
      }
    }
    first += count;
  }
  return true;
}

// Calls `visit(m, s, e)` for each piece [s, e) of [lo, hi) inside a mapping, and counts the rest
// as unmapped. The [vsyscall] page of x86-64 lies above the user address space: pagemap has no
// entries there, so it is counted as unmapped, and said so.
template <class Visit>
void for_each_piece(const std::vector<mapping_info>& mappings, std::uintptr_t lo, std::uintptr_t hi,
                    backing_report& r, Visit&& visit) {
  std::uintptr_t cursor = lo;
  for (const mapping_info& m : mappings) {
    if (m.end <= lo) continue;
    if (m.start >= hi) break;
    const std::uintptr_t s = std::max(m.start, lo);
    const std::uintptr_t e = std::min(m.end, hi);
    if (s > cursor) r.unmapped += s - cursor;
    cursor = e;
    if (m.name == "[vsyscall]") {
      r.unmapped += e - s;
      if (r.note.empty()) {
        r.note =
            "[vsyscall] is the kernel's page above the user address space: counted as "
            "unmapped";
      }
      continue;
    }
    if (!visit(m, s, e)) return;
  }
  if (hi > cursor) r.unmapped += hi - cursor;
}

// The pagemap_scan source. Returns false (and sets `ec`) when the kernel has no PAGEMAP_SCAN.
// `regions` is the scan's buffer (sized on first use), kept by a caller that scans many ranges.
inline bool backing_by_scan(const std::vector<mapping_info>& mappings, std::uintptr_t lo,
                            std::uintptr_t hi, int pagemap_fd, backing_report& r,
                            std::error_code& ec, std::vector<pagemap::page_region>& regions) {
  r.source = backing_source::pagemap_scan;
  r.exact = true;
  for_each_piece(mappings, lo, hi, r,
                 [&](const mapping_info& m, std::uintptr_t s, std::uintptr_t e) {
                   ec = classify_scan(m, s, e, pagemap_fd, regions, r);
                   return !ec;
                 });
  return !ec;
}

// The kpageflags source when `kpageflags_fd` is open and PFNs are visible, smaps otherwise.
inline void backing_by_pfn(const std::vector<mapping_info>& mappings, std::uintptr_t lo,
                           std::uintptr_t hi, int pagemap_fd, int kpageflags_fd,
                           backing_report& r) {
  bool exact_possible = pagemap_fd >= 0 && kpageflags_fd >= 0;
  r.source = exact_possible ? backing_source::kpageflags : backing_source::smaps;
  r.exact = true;
  if (pagemap_fd < 0) {
    r.note += "pagemap unreadable: residency prorated from smaps";
  } else if (kpageflags_fd < 0) {
    r.note += "/proc/kpageflags unreadable (needs CAP_SYS_ADMIN): THP prorated from smaps";
  }
  for_each_piece(
      mappings, lo, hi, r, [&](const mapping_info& m, std::uintptr_t s, std::uintptr_t e) {
        const bool whole = s == m.start && e == m.end;
        if (m.is_hugetlb()) {
          std::size_t present = 0, absent = 0;
          if (pagemap_fd < 0 || !count_present(pagemap_fd, s, e, present, absent)) {
            present = prorate(m.private_hugetlb + m.shared_hugetlb, e - s, m.size());
            absent = (e - s) - std::min(present, e - s);
            r.exact = r.exact && whole;
          }
          (m.kernel_page_bytes >= units::gib ? r.hugetlb_1g : r.hugetlb_2m) += present;
          r.not_resident += absent;
          return true;
        }
        if (exact_possible) {
          exact_part part;
          if (classify_exact(m, s, e, pagemap_fd, kpageflags_fd, part)) {
            // pagemap cannot tell a PMD mapping from a whole THP folio mapped by PTEs (a VMA split
            // and merged again leaves one); smaps counts PMD mappings (split_thp), so it caps.
            std::size_t anon = part.thp_anon, file = part.thp_file;
            if (anon > m.anon_huge || file > m.shmem_huge + m.file_huge) {
              exact_part all = part;
              thp_split t;
              if (whole || classify_exact(m, m.start, m.end, pagemap_fd, kpageflags_fd, all)) {
                t = split_thp(m, all);
              } else {  // the rest of the mapping unreadable: smaps' counters as they are
                t.pmd_anon = m.anon_huge;
                t.pmd_file = m.shmem_huge + m.file_huge;
                t.pte_anon = t.pte_file = 1;
              }
              // Where the mapping has no THP mapped by PTEs, every THP-looking folio is mapped by a
              // PMD; elsewhere a part of a mapping has at most the mapping's PMD bytes.
              if (t.pte_anon != 0) anon = std::min(anon, t.pmd_anon);
              if (t.pte_file != 0) file = std::min(file, t.pmd_file);
              if ((anon < part.thp_anon || file < part.thp_file) && !whole) {
                r.exact = false;
                r.note = "THP folios mapped by PTEs: THP capped by smaps AnonHugePages";
              }
            }
            add_thp(m, false, anon, r);
            add_thp(m, true, file, r);
            r.base += part.base + (part.thp_anon - anon) + (part.thp_file - file);
            r.not_resident += part.not_resident;
            r.zero_page += part.zero_page;
            return true;
          }
          // PFNs are hidden (kpageflags opened, yet no CAP_SYS_ADMIN): use smaps from here on.
          exact_possible = false;
          r.source = backing_source::smaps;
          r.note = "page frame numbers hidden (needs CAP_SYS_ADMIN): THP prorated from smaps";
          if (r.thp != 0) r.exact = false;
        }
        std::size_t present = 0, absent = 0, zero = 0, shared = 0, hidden = 0;
        if (pagemap_fd < 0 || !count_present(pagemap_fd, s, e, present, absent, &shared)) {
          present = prorate(m.rss, e - s, m.size());
          present = std::min(present, e - s);
          absent = (e - s) - present;
          r.exact = r.exact && whole;
        } else if (present > m.rss) {
          // pagemap's present bit is set for the zero page too, which Rss never counts: over a
          // whole mapping the difference is exactly the zero page; over part of one, where in
          // the mapping its pages lie is unknown. The zero page is never mapped exclusively;
          // what exclusive memory Rss lacks (whole PMDs of it) is PMDs that Linux 6.1 to 6.4
          // leave out of smaps under NUMA balancing (split_thp): mapped by PMDs.
          zero = std::min(present - m.rss, shared);
          hidden = (present - m.rss - zero) & ~(thp_page_bytes() - 1);
          zero = present - m.rss - hidden;
          present = m.rss + hidden;
          const char* const hidden_note =
              "PMDs that smaps left out (NUMA balancing, Linux 6.1-6.4) counted from pagemap";
          if (!whole) {
            r.exact = false;
            r.note = zero != 0 ? "zero page in part of a mapping: residency capped by smaps Rss"
                               : hidden_note;
          } else if (hidden != 0) {
            r.note = hidden_note;
          }
        }
        r.zero_page += zero;
        r.not_resident += zero;
        const std::size_t mapping_huge = m.anon_huge + m.shmem_huge + m.file_huge;
        std::size_t huge = prorate(mapping_huge, e - s, m.size()) + hidden;
        if (!whole && mapping_huge != 0) r.exact = false;
        huge = std::min(huge, present);
        const std::size_t file =
            std::min(huge, prorate(m.shmem_huge + m.file_huge, e - s, m.size()));
        add_thp(m, false, huge - file, r);
        add_thp(m, true, file, r);
        r.base += present - huge;
        r.not_resident += absent;
        return true;
      });
}

enum class query_outcome { done, no_query, no_scan, needs_smaps };

// The pagemap_scan source without smaps: mappings from PROCMAP_QUERY (Linux 6.11), pages from
// PAGEMAP_SCAN. Costs O(mappings in the range + runs of pages), whatever the process's size.
inline query_outcome backing_by_query(int maps_fd, int pagemap_fd, std::uintptr_t lo,
                                      std::uintptr_t hi, backing_report& r, std::error_code& ec) {
  std::vector<pagemap::page_region> regions;
  r.source = backing_source::pagemap_scan;
  r.exact = true;
  std::uintptr_t cursor = lo;
  while (cursor < hi) {
    mapping_info m;
    ec = pagemap::query_mapping(maps_fd, cursor, m.start, m.end, m.kernel_page_bytes);
    if (ec == std::errc::no_such_file_or_directory) {  // no mapping at or above `cursor`
      ec.clear();
      break;
    }
    if (ec) return query_outcome::no_query;
    if (m.start >= hi) break;
    const std::uintptr_t s = std::max(m.start, cursor);
    const std::uintptr_t e = std::min(m.end, hi);
    r.unmapped += s - cursor;
    m.anon_huge = SIZE_MAX;  // the huge zero page is flagged: no cap needed
    ec = classify_scan(m, s, e, pagemap_fd, regions, r, /*from_query=*/true);
    if (ec == scan_needs_smaps) return query_outcome::needs_smaps;
    if (ec) return query_outcome::no_scan;
    cursor = e;
  }
  if (hi > cursor) r.unmapped += hi - cursor;
  return query_outcome::done;
}

// The note for a process whose smaps lists no mapping: it has exited, or it is a kernel thread
// (PF_KTHREAD in the flags of `stat_text`, its /proc/PID/stat; nullopt: unreadable), with no
// address space; any other process that runs user code has mappings, so its smaps was masked (a
// mount over it, an empty file).
inline std::string no_address_space(pid_t pid, const std::optional<std::string>& stat_text) {
  const bool ec = !stat_text;
  const std::string stat = stat_text.value_or(std::string());
  const std::size_t close = stat.rfind(')');
  const char state =
      ec || close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
  // After ")": state, ppid, pgrp, session, tty_nr, tpgid, then flags (proc(5) fields 3-9).
  unsigned long long flags = 0;
  if (!ec && close != std::string::npos) {
    std::size_t at = close + 1;
    for (int field = 0; field < 6 && at != std::string::npos; ++field) at = stat.find(' ', at + 1);
    if (at != std::string::npos) flags = std::strtoull(stat.c_str() + at + 1, nullptr, 10);
  }
  constexpr unsigned long long pf_kthread = 0x00200000;
  const std::string who = "process " + (pid == 0 ? std::string("self") : std::to_string(pid));
  if (state == 'Z' || state == 'X' || ec)
    return who + " has exited: it has no memory left to report";
  if ((flags & pf_kthread) != 0) {
    return who + " has no address space (a kernel thread): it has no memory to report";
  }
  return "smaps of " + who +
         " lists no mapping, though it runs user code: the file is masked or "
         "empty (a mount over /proc?), so its memory is unknown";
}

// [lo, hi): the range widened to whole base pages, clipped at the last whole page of the address
// space (`address + bytes` may wrap around).
inline void page_range(const void* p, std::size_t bytes, std::uintptr_t& lo, std::uintptr_t& hi) {
  const std::size_t page = os::base_page_size();
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  lo = address & ~(std::uintptr_t{page} - 1);
  const std::uintptr_t top = UINTPTR_MAX & ~(std::uintptr_t{page} - 1);
  hi = address >= top || bytes > top - address
           ? top
           : (address + bytes + page - 1) & ~(std::uintptr_t{page} - 1);
}

// The note for a PAGEMAP_SCAN that failed with `ec`.
inline std::string scan_failure_note(const std::error_code& ec) {
  return "PAGEMAP_SCAN failed (" + errno_name_and_text(ec) + ")" +
         (ec == std::errc::inappropriate_io_control_operation
              ? ": kernels before Linux 6.7 lack it, and a file that is not the kernel's pagemap "
                "(a mount over it) refuses it so"
              : "");
}

// Settles the note of a report from backing_by_pfn(): the notes of a fallback go when there was
// none (`fell_back` false), except the [vsyscall] note, a fact about the range; a report left
// approximate says why.
inline void settle_pfn_note(backing_report& r, bool fell_back) {
  if (!fell_back && r.note.compare(0, 10, "[vsyscall]") != 0) r.note.clear();
  if (!r.exact && r.note.empty()) r.note = "THP prorated from smaps' per-mapping counters";
}

// The note of a report from a fallback source: why the better source was passed over, then the
// report's own note, or else the source it used.
inline std::string after_fallback(const std::string& why, const backing_report& r) {
  return why + "; " + (r.note.empty() ? "used " + std::string(name_of(r.source)) : r.note);
}

}  // namespace hugepage::detail
