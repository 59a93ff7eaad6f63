// hugepage/detail/collapse_chunks.hpp - which chunks (PMD-size) of a range collapse() tries.
//
// collapse() (collapse.hpp) walks a range chunk by chunk. PAGEMAP_SCAN tells it, a run at a time,
// which chunks are huge already, which are not wholly mapped and which hold no data, so that it
// calls MADV_COLLAPSE only where a huge page of the range's own data can come of it; mincore(2)
// answers the second question without it.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "hugepage/detail/pagemap.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/thp_mode.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace hugepage::detail {

// The unit of MADV_COLLAPSE: the kernel's PMD size (hpage_pmd_size), 2 MiB on x86-64 and arm64
// with 4 KiB pages, 32 MiB with 16 KiB pages. The kernel collapses the whole PMD-size chunks of the
// range it is given and answers success for a range holding none, so a smaller chunk would be
// counted as collapsed with nothing done.
inline std::size_t collapse_chunk_bytes() noexcept { return thp_page_bytes(); }

// Errors after which no chunk can succeed: stop instead of burning the budget.
inline bool collapse_fatal(int error) noexcept {
  return error == EPERM || error == ESRCH || error == ENOSYS || error == EBADF || error == EACCES;
}

// Regions per scan: 512 lets one scan always cover a whole chunk of 4 KiB pages (512 of them),
// however its pages alternate between present, zero page and holes; a chunk of more base pages
// (16 KiB pages: 2048) that one scan saw in part is tried as it is.
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

// Judges a chunk of more pieces than one scan holds (a chunk of 16 KiB pages has 2048 base pages,
// alternating present and absent: 2048 spans) by scans that go on where the last stopped: whether
// [lo, hi) is wholly mapped, and whether it holds data. False when a scan fails.
inline bool judge_chunk(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi, bool& mapped,
                        bool& data) noexcept {
  pagemap::page_region spans[run_capacity];
  mapped = true;
  data = false;
  for (std::uintptr_t at = lo; at < hi;) {
    std::size_t count = 0, next = 0;
    std::uintptr_t scanned_to = at;
    if (!mapped_spans(pagemap_fd, at, hi, spans, count, scanned_to) || scanned_to <= at) {
      return false;
    }
    if (!wholly_mapped(spans, count, next, at, scanned_to)) {
      mapped = false;
      return true;
    }
    data = data || holds_data(spans, count, next, at, scanned_to);
    at = scanned_to;
  }
  return true;
}

// Whether [lo, hi) is wholly mapped now (one PAGEMAP_SCAN); true when the scan fails.
inline bool still_mapped(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi) noexcept {
  pagemap::page_region spans[run_capacity];
  std::size_t count = 0, next = 0;
  std::uintptr_t scanned_to = lo;
  if (!mapped_spans(pagemap_fd, lo, hi, spans, count, scanned_to)) return true;
  return scanned_to < hi || wholly_mapped(spans, count, next, lo, hi);
}

// The first address past the user address space (the kernel's TASK_SIZE_MAX): no mapping reaches
// it, and PAGEMAP_SCAN refuses a range that does (EFAULT). Asked of the kernel: the highest of the
// candidate tops (x86-64: 2^56 with 5-level paging, else 2^47; arm64: 2^52, 2^48, 2^47, 2^39)
// whose last page, or the page below it (x86-64 keeps the top page unmapped), PAGEMAP_SCAN
// accepts. Known once, for every process: the limit is the kernel's, not the process's. Without
// PAGEMAP_SCAN (pagemap_fd < 0, a kernel before 6.7) the widest the CPU allows (x86-64: 2^56 - 4
// KiB where the CPU has 5-level paging, else 2^47 - 4 KiB), not remembered.
inline std::uintptr_t user_address_limit(int pagemap_fd) noexcept {
  static std::atomic<std::uintptr_t> known{0};
  const std::uintptr_t remembered = known.load(std::memory_order_relaxed);
  if (remembered != 0) return remembered;
  const std::uintptr_t page = os::base_page_size();
#if defined(__x86_64__)
  const std::uintptr_t tops[] = {std::uintptr_t{1} << 56, std::uintptr_t{1} << 47};
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool five_level = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 16)) != 0;
  const std::uintptr_t widest = (five_level ? tops[0] : tops[1]) - page;
#elif defined(__aarch64__)
  const std::uintptr_t tops[] = {std::uintptr_t{1} << 52, std::uintptr_t{1} << 48,
                                 std::uintptr_t{1} << 47, std::uintptr_t{1} << 39};
  const std::uintptr_t widest = tops[0];
#else
  static_cast<void>(pagemap_fd);
  static_cast<void>(page);
  return UINTPTR_MAX;  // no limit known: every chunk is looked at
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  pagemap::page_region regions[1];
  for (const std::uintptr_t top : tops) {
    for (const std::uintptr_t end : {top, top - page}) {
      std::size_t count = 0;
      std::uintptr_t walk_end = 0;
      const std::error_code ec = pagemap::scan(
          pagemap_fd, end - page, end, 0, pagemap::page_is_present, regions, 1, count, walk_end);
      if (!ec) {
        known.store(end, std::memory_order_relaxed);
        return end;
      }
      if (ec != std::errc::bad_address) return widest;  // no PAGEMAP_SCAN to ask
    }
  }
  return widest;
#endif
}

// Whether the chunk at `p` of this process is not wholly mapped: mincore(2) answers ENOMEM then.
// Asked in steps of 512 base pages, the vector a step fills.
inline bool chunk_unmapped(void* p) noexcept {
  unsigned char vector[512];
  const std::size_t chunk = collapse_chunk_bytes();
  const std::size_t step = sizeof vector * os::base_page_size();
  char* const at = static_cast<char*>(p);
  for (std::size_t done = 0; done < chunk; done += step) {
    if (::mincore(at + done, std::min(step, chunk - done), vector) != 0 && errno == ENOMEM) {
      return true;
    }
  }
  return false;
}

}  // namespace hugepage::detail
