// hugepage/detail/collapse_chunks.hpp - which 2 MiB chunks of a range collapse() tries.
//
// collapse() (collapse.hpp) walks a range chunk by chunk. PAGEMAP_SCAN tells it, a run at a time,
// which chunks are huge already, which are not wholly mapped and which hold no data, so that it
// calls MADV_COLLAPSE only where a huge page of the range's own data can come of it; mincore(2)
// answers the second question without it.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "hugepage/detail/pagemap.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage::detail {

constexpr std::size_t collapse_chunk = 2 * units::mib;  // a PMD on x86-64 and arm64/4K

// Errors after which no chunk can succeed: stop instead of burning the budget.
inline bool collapse_fatal(int error) noexcept {
  return error == EPERM || error == ESRCH || error == ENOSYS || error == EBADF || error == EACCES;
}

// Regions per scan: 512 lets one scan always cover a whole chunk (512 base pages at most), however
// its pages alternate between present, zero page and holes.
constexpr std::size_t run_capacity = 512;

// Scans [lo, hi) for huge runs (PMD-mapped THP or hugetlb; the huge zero page is huge but holds
// no data, so it is left out) into `runs`. Sets `count` and `scanned_to`: `hi`, or where the
// kernel stopped when `runs` filled up. False when PAGEMAP_SCAN fails (ENOTTY before 6.7).
inline bool huge_runs(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi,
                      pagemap::page_region (&runs)[run_capacity], std::size_t& count,
                      std::uintptr_t& scanned_to) noexcept {
  std::size_t found = 0;
  std::uintptr_t walk_end = lo;
  if (pagemap::scan(pagemap_fd, lo, hi, pagemap::page_is_huge | pagemap::page_is_present,
                    pagemap::page_is_huge | pagemap::page_is_pfnzero, runs, run_capacity, found,
                    walk_end)) {
    return false;
  }
  scanned_to = found == run_capacity && walk_end > lo && walk_end < hi ? walk_end : hi;
  count = 0;
  for (std::size_t i = 0; i < found; ++i) {
    if ((runs[i].categories & pagemap::page_is_pfnzero) == 0) runs[count++] = runs[i];
  }
  return true;
}

// Scans [lo, hi) for the spans of it that are mapped into `spans`, each with whether its pages
// are present, swapped or the zero page. Sets `scanned_to` as huge_runs does. The walk reports no
// page outside a mapping, nor in a VM_PFNMAP mapping (device memory), which cannot collapse either.
inline bool mapped_spans(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi,
                         pagemap::page_region (&spans)[run_capacity], std::size_t& count,
                         std::uintptr_t& scanned_to) noexcept {
  std::uintptr_t walk_end = lo;
  constexpr std::uint64_t kinds =
      pagemap::page_is_present | pagemap::page_is_swapped | pagemap::page_is_pfnzero;
  if (pagemap::scan(pagemap_fd, lo, hi, 0, kinds, spans, run_capacity, count, walk_end)) {
    return false;
  }
  scanned_to = count == run_capacity && walk_end > lo && walk_end < hi ? walk_end : hi;
  return true;
}

// Whether [lo, hi) lies wholly in the spans from `*next` on (sorted; a span may end where the next
// begins). Advances `*next` past spans that end at or before `lo`.
inline bool wholly_mapped(const pagemap::page_region* spans, std::size_t count, std::size_t& next,
                          std::uintptr_t lo, std::uintptr_t hi) noexcept {
  while (next < count && spans[next].end <= lo) ++next;
  std::uintptr_t covered = lo;
  for (std::size_t i = next; i < count && spans[i].start <= covered && covered < hi; ++i) {
    covered = std::max<std::uintptr_t>(covered, spans[i].end);
  }
  return covered >= hi;
}

// Whether [lo, hi) holds a page of data: present and not the zero page, or swapped out. Spans
// from `next` on (as wholly_mapped leaves it). A chunk without one was never written or was given
// back: MADV_COLLAPSE refuses it (EINVAL) where it has no page table, and where it has one fills
// a huge page with zeroes, memory for no data.
inline bool holds_data(const pagemap::page_region* spans, std::size_t count, std::size_t next,
                       std::uintptr_t lo, std::uintptr_t hi) noexcept {
  for (std::size_t i = next; i < count && spans[i].start < hi; ++i) {
    if (spans[i].end <= lo) continue;
    const std::uint64_t c = spans[i].categories;
    if ((c & pagemap::page_is_swapped) != 0 ||
        ((c & pagemap::page_is_present) != 0 && (c & pagemap::page_is_pfnzero) == 0)) {
      return true;
    }
  }
  return false;
}

// Whether [lo, hi) is wholly mapped now (one PAGEMAP_SCAN); true when the scan fails.
inline bool still_mapped(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi) noexcept {
  pagemap::page_region spans[run_capacity];
  std::size_t count = 0, next = 0;
  std::uintptr_t scanned_to = lo;
  if (!mapped_spans(pagemap_fd, lo, hi, spans, count, scanned_to)) return true;
  return scanned_to < hi || wholly_mapped(spans, count, next, lo, hi);
}

// Whether the chunk at `p` of this process is not wholly mapped: mincore(2) answers ENOMEM then.
inline bool chunk_unmapped(void* p) noexcept {
  unsigned char vector[collapse_chunk / 4096];
  return ::mincore(p, collapse_chunk, vector) != 0 && errno == ENOMEM;
}

}  // namespace hugepage::detail
