// hugepage/backing.hpp - proof of what backs a range of memory.
//
// backing_of(p, bytes) answers, for every base page of the range: on a PMD-mapped transparent
// huge page, on a hugetlb page (2 MiB or 1 GiB), on a base page, not resident, or not mapped.
//
// Three sources, tried in this order; the report says which it used and, in `note`, why an
// earlier one was passed over:
//  - pagemap_scan (exact, unprivileged, Linux 6.7): the PAGEMAP_SCAN ioctl on /proc/<pid>/pagemap
//    returns runs of pages with their categories. "Huge" there means mapped by a PMD (THP) or from
//    a hugetlb pool, which is exactly what gives TLB reach: a THP folio mapped by PTEs (after a
//    partial munmap or mprotect inside it) counts as base pages, shmem and file THP count as THP
//    (and in `thp_shmem` / `thp_file`), and the shared zero page - what a read fault of untouched
//    memory maps, a whole huge zero page under THP - counts as not resident (`zero_page`). Needs
//    only the right to open pagemap: the same user, or ptrace-read access for another process.
//    The mappings come from PROCMAP_QUERY (Linux 6.11), so smaps - which walks every page table
//    of the process - is not read; it is on 6.7 to 6.10, for file THP (shmem or page cache?),
//    and where the kernel does not flag the huge zero page. See detail/pagemap.hpp.
//  - kpageflags (exact, needs CAP_SYS_ADMIN): /proc/<pid>/pagemap gives each page's PFN, and
//    /proc/kpageflags says whether that PFN belongs to a THP (bit 22). A 2 MiB window counts as THP
//    only when it is fully present, virtually and physically aligned and contiguous: that is what
//    a PMD mapping looks like. THP folios mapped by PTEs or smaller mTHP folios give no TLB reach
//    and count as base pages; frames that kpageflags flags as a zero page (KPF_ZERO_PAGE, bit 24)
//    count as not resident.
//  - smaps (no privilege, any kernel): residency still comes from pagemap's present bit, less the
//    zero page (present, but never in Rss), hugetlb mappings are known from KernelPageSize, but
//    THP is known only per mapping (AnonHugePages, ShmemPmdMapped, FilePmdMapped); when the range
//    covers part of a mapping, its share is prorated and the report is marked approximate
//    (`exact == false`).
// The huge page sizes of hugetlb mappings come from smaps in every case.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/backing_report.hpp"
#include "hugepage/detail/backing_nodes.hpp"
#include "hugepage/detail/backing_sources.hpp"
#include "hugepage/detail/huge_zero_probe.hpp"
#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/smaps.hpp"

namespace hugepage {

namespace detail {

// backing_of(view, p, bytes, source) before an unavailable report's bytes are made unknown.
inline backing_report backing_from(const process_view& view, const void* p, std::size_t bytes,
                                   backing_source source) {
  backing_report r;
  if (bytes == 0) {
    r.source = source;
    r.exact = source != backing_source::unavailable;
    return r;
  }
  std::uintptr_t lo = 0, hi = 0;
  detail::page_range(p, bytes, lo, hi);
  r.bytes = hi - lo;
  if (source == backing_source::unavailable) {
    r.note = "no source requested";
    return r;
  }
  if (view.exited()) {  // its pid may be another process's by now: read nothing by number
    r.note =
        "process " + std::to_string(view.pid()) + " has exited: it has no memory left to report";
    return r;
  }
  std::error_code ec;
  const int pagemap = view.pagemap_fd();
  const auto scan_failed = [&r](const std::error_code& error) {
    backing_report failed;
    failed.bytes = r.bytes;
    failed.note = detail::scan_failure_note(error);
    return failed;
  };
  if (source == backing_source::pagemap_scan && pagemap >= 0 &&
      detail::scan_flags_huge_zero_page(view)) {
    // The fast way first: no smaps read (it walks every page table of the process).
    backing_report q;
    q.bytes = r.bytes;
    const auto outcome = view.maps_fd() >= 0
                             ? detail::backing_by_query(view.maps_fd(), pagemap, lo, hi, q, ec)
                             : detail::query_outcome::no_query;
    if (outcome == detail::query_outcome::done) return q;
    if (outcome == detail::query_outcome::no_scan) return scan_failed(ec);
    ec.clear();  // no PROCMAP_QUERY (before 6.11), or file THP to classify: smaps below
  }
  const std::vector<mapping_info> mappings = view.read_smaps(ec);
  if (ec) {
    r.note = "cannot read " + view.path_of("smaps") + ": " + ec.message();
    return r;
  }
  if (mappings.empty()) {  // a zombie's smaps reads empty: no process is all unmapped
    std::error_code unread;
    r.note = detail::no_address_space(view.pid(), view.read_text("stat", unread));
    return r;
  }
  if (source == backing_source::pagemap_scan) {
    if (pagemap < 0) {
      r.note = view.pagemap_error();
      return r;
    }
    std::vector<detail::pagemap::page_region> regions;
    if (!detail::backing_by_scan(mappings, lo, hi, pagemap, r, ec, regions)) {
      return scan_failed(ec);
    }
    return r;
  }
  const int kpageflags = source == backing_source::kpageflags ? view.kpageflags_fd() : -1;
  detail::backing_by_pfn(mappings, lo, hi, pagemap, kpageflags, r);
  // No fallback: smaps asked for, or kpageflags exact.
  detail::settle_pfn_note(r, !(source == backing_source::smaps || (r.exact && r.source == source)));
  detail::note_smaps_blind_spot(view, r);
  return r;
}

}  // namespace detail

/// Reports what backs [p, p + bytes) in the process of `view`, from `source` only: pagemap_scan,
/// kpageflags (which falls to smaps when PFNs are hidden, and says so) or smaps. When `source`
/// cannot be used the report's source is `unavailable`, its bytes are `unknown` and `note` says
/// why. For comparing sources and benchmarks; backing_of(view, p, bytes) picks the best source
/// itself. Opens nothing but kpageflags (on the view, the first time it is the source) and smaps
/// (where the fast path is not taken). Thread-safe.
inline backing_report backing_of(const process_view& view, const void* p, std::size_t bytes,
                                 backing_source source) {
  backing_report r = detail::backing_from(view, p, bytes, source);
  if (r.source == backing_source::unavailable) {
    r.thp = r.hugetlb_2m = r.hugetlb_1g = r.base = r.not_resident = r.unmapped = 0;
    r.thp_shmem = r.thp_file = r.zero_page = 0;
    r.unknown = r.bytes;
    r.exact = false;
  } else if (r.resident_bytes() != 0 && view.root().empty()) {  // a live process, not a capture
    std::uintptr_t lo = 0, hi = 0;
    detail::page_range(p, bytes, lo, hi);
    const detail::huge_pages_from from =
        source == backing_source::pagemap_scan   ? detail::huge_pages_from::scan
        : r.source == backing_source::kpageflags ? detail::huge_pages_from::kpageflags
                                                 : detail::huge_pages_from::totals;
    detail::add_nodes(view, from, lo, hi, r);
  }
  return r;
}

/// Reports what backs [p, p + bytes) in process `pid` (0: this process; another process needs
/// ptrace-read access to read its pagemap), from `source` only: backing_of(view, p, bytes, source)
/// with a view of its own. Thread-safe.
inline backing_report backing_of(pid_t pid, const void* p, std::size_t bytes,
                                 backing_source source) {
  const process_view view(pid);
  return backing_of(view, p, bytes, source);
}

/// Reports what backs [p, p + bytes) in the process of `view` (see process_view.hpp: one view
/// serves many calls and opens the process once). Never throws for an unreadable or unmapped
/// range: the report says so. Tries pagemap_scan, then kpageflags, then smaps (see the top of
/// this file); `note` says why a source was passed over. Thread-safe, but a concurrent munmap in
/// the range makes the answer stale. Cost: one PROCMAP_QUERY per mapping in the range and one
/// PAGEMAP_SCAN per 1024 runs of pages with the same categories (measured in
/// docs/coverage-and-collapse.md); the fallbacks read smaps, then one pagemap word per 4 KiB and
/// two kpageflags words per 2 MiB.
inline backing_report backing_of(const process_view& view, const void* p, std::size_t bytes) {
  backing_report r = backing_of(view, p, bytes, backing_source::pagemap_scan);
  if (r.source != backing_source::unavailable || bytes == 0) return r;
  // No smaps, or no address space (the process has exited): no other source can do better.
  if (r.note.compare(0, 12, "cannot read ") == 0 || r.note.compare(0, 8, "process ") == 0) {
    return r;
  }
  const std::string why = r.note;
  r = backing_of(view, p, bytes, backing_source::kpageflags);
  r.note = detail::after_fallback(why, r);
  return r;
}

/// Reports what backs [p, p + bytes) in process `pid` (0: this process; another process needs
/// ptrace-read access to read its pagemap): backing_of(view, p, bytes) with a view of its own,
/// opened once for all the sources it tries.
inline backing_report backing_of(pid_t pid, const void* p, std::size_t bytes) {
  const process_view view(pid);
  return backing_of(view, p, bytes);
}

/// What backs each whole mapping of `mappings`, the smaps of the process of `view` that the
/// caller has already read (read_smaps): one report per mapping, in order, as
/// backing_of(view, m.start, m.size()) gives it from the same smaps (PAGEMAP_SCAN, else
/// kpageflags, else smaps' counters; `note` says why a source was passed over), without reading
/// smaps again. PAGEMAP_SCAN is given up at its first failure (an unopenable pagemap, a kernel
/// before 6.7) and the reason heads the note of that mapping and every later one; kpageflags is
/// opened then, once. A failure that is about one range (EFAULT: a mapping past the user address
/// space; EINVAL: one off page boundaries) heads that mapping's note only. The list is trusted,
/// where backing_of reads the process's own maps: a listed range the process does not map counts as
/// not_resident (backing_of: unmapped); a [vsyscall] mapping counts as unmapped with a note saying
/// why (backing_of's PROCMAP_QUERY path counts it unmapped with none); a mapping whose end is below
/// its start gives a report of 0 bytes, counted nowhere, with the note "invalid mapping: its end is
/// below its start". For a report of every mapping of a process (the doctor's): backing_of reads
/// smaps on every call where its fast path is not taken, which for every mapping of a process
/// costs the square of its size; this costs one PAGEMAP_SCAN per mapping and run of pages.
/// `nodes` is left empty (the per-node split of every mapping is numa_maps' job, which the doctor
/// reads). Throws std::bad_alloc only; thread-safe.
inline std::vector<backing_report> backing_of_mappings(const process_view& view,
                                                       const std::vector<mapping_info>& mappings) {
  std::vector<backing_report> out;
  out.reserve(mappings.size());
  // Why PAGEMAP_SCAN is passed over; "" while it answers.
  std::string why = view.pagemap_error();
  std::vector<mapping_info> one(1);                   // the walkers take a list of mappings
  std::vector<detail::pagemap::page_region> regions;  // one scan buffer for every mapping
  for (const mapping_info& m : mappings) {
    one[0] = m;
    backing_report r;
    if (m.end < m.start) {  // no range at all: nothing is counted, and the note says why
      r.note = "invalid mapping: its end is below its start";
      out.push_back(std::move(r));
      continue;
    }
    r.bytes = m.size();
    std::error_code ec;
    std::string this_why = why;
    if (why.empty()) {
      if (detail::backing_by_scan(one, m.start, m.end, view.pagemap_fd(), r, ec, regions)) {
        out.push_back(std::move(r));
        continue;
      }
      this_why = detail::scan_failure_note(ec);
      // EFAULT (past the user address space) and EINVAL for a range not on page boundaries are
      // about this range: later mappings still scan. Any other failure is the scan's own.
      const bool page_aligned =
          m.start % os::base_page_size() == 0 && m.end % os::base_page_size() == 0;
      if (ec != std::errc::bad_address && (ec != std::errc::invalid_argument || page_aligned)) {
        why = this_why;
      }
      r = backing_report{};
      r.bytes = m.size();
    }
    detail::backing_by_pfn(one, m.start, m.end, view.pagemap_fd(), view.kpageflags_fd(), r);
    detail::settle_pfn_note(r, !(r.exact && r.source == backing_source::kpageflags));
    detail::note_smaps_blind_spot(view, r);
    r.note = detail::after_fallback(this_why, r);
    out.push_back(std::move(r));
  }
  return out;
}

/// backing_of_mappings(view, mappings) with a view of process `pid` (0: this process) of its own.
inline std::vector<backing_report> backing_of_mappings(pid_t pid,
                                                       const std::vector<mapping_info>& mappings) {
  const process_view view(pid);
  return backing_of_mappings(view, mappings);
}

/// Reports what backs [p, p + bytes) in this process.
inline backing_report backing_of(const void* p, std::size_t bytes) {
  return backing_of(0, p, bytes);
}

}  // namespace hugepage
