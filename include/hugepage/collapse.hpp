// hugepage/collapse.hpp - collapse a range into huge pages now, in bounded steps.
//
// collapse(p, bytes, budget) walks [p, p + bytes) in PMD-size aligned chunks (hpage_pmd_size: 2 MiB
// on x86-64 and arm64 with 4 KiB pages, 32 MiB with 16 KiB pages) and asks the kernel to collapse
// each one with MADV_COLLAPSE (Linux 6.1), for this process, or with process_madvise(pidfd,
// MADV_COLLAPSE) for another one (collapse(pid, ...): CAP_SYS_NICE and ptrace access to the
// target). It stops when the time or byte budget is spent and says where to continue, so a
// latency-critical service can raise its coverage a few milliseconds at a time. Chunks that are
// already huge, not wholly mapped or hold no data (PAGEMAP_SCAN, Linux 6.7; see detail/pagemap.hpp)
// cost nothing: they are skipped without a syscall each, and an unmapped chunk is counted as such,
// never as a refusal (also one the process unmaps between the scan and the call, which the kernel
// answers with ENOMEM). The part of a range past the user address space (the kernel's
// TASK_SIZE_MAX, found once with PAGEMAP_SCAN, which refuses addresses past it with EFAULT;
// detail/collapse_chunks.hpp) or past 2^64 is unmapped too, without a call. Refusals are counted by
// errno, never thrown.
//
// Cost of one chunk: MADV_COLLAPSE allocates a 2 MiB page (compacting memory if it must), copies
// the 512 base pages into it and remaps. On the 2-core Linux 6.18 VM (Intel Xeon) this project is
// developed on, BM_Collapse_Chunk (bench/introspection_bench.cpp, 5 repetitions, CPUs shared with
// other work) measured p50 0.65 ms and p99 6 to 20 ms per chunk, 1.4 GiB/s: budgets of a few ms
// are meaningful, sub-millisecond ones are not. A time budget is exceeded by at most one chunk:
// it is checked before each chunk, never during one. A positive time budget always buys progress:
// a call tries (or passes) at least its first chunk, however long the scan before it took.
//
// What happens to a collapsed range afterwards, under `enabled=madvise` without MADV_HUGEPAGE
// (no VM_HUGEPAGE on the VMA), tested in test/collapse_test.cpp: it stays PMD-mapped - khugepaged
// neither scans nor splits such a VMA, and nothing splits a THP on its own while it is mapped
// whole. Splits come from the process: a partial munmap/mprotect/madvise(DONTNEED) inside a huge
// page, or a write after fork (copy-on-write splits the writer's PMD into base pages). Memory given
// back and faulted in again comes back on base pages: faults only allocate THP where the mode
// allows it, so a service that wants its coverage to survive such churn should also MADV_HUGEPAGE
// the range. Under memory pressure, Linux 6.12+ may also split THP that are mostly zero-filled
// (transparent_hugepage/shrink_underused), but only when khugepaged/max_ptes_none is below 511.
// Whatever max_ptes_none, the same shrinker splits a THP left partly mapped (a write after fork,
// a partial madvise(DONTNEED)) and maps its zero-filled subpages to the zero page (upkeep.hpp).
//
// MADV_COLLAPSE ignores khugepaged's max_ptes_none: a chunk with a single page populated is filled
// with zeroes and its resident memory grows to 2 MiB. A chunk with no page of data is filled too
// where it has a page table (pages given back, or read faults on the zero page) and refused with
// EINVAL where it has none; collapse() skips both (`empty`). Collapse populated ranges. (All
// checked on Linux 6.18.)
// collapse_growth(view, lo, hi) says beforehand how much a collapse would add that way.
//
// Errors (man 2 madvise, Documentation/admin-guide/mm/transhuge.rst):
//   EINVAL  kernel before 6.1, a chunk not THP-eligible (hugetlb, VM_NOHUGEPAGE, not anonymous or
//           shmem/file-backed as supported, crossing mappings), THP disabled for the process
//           (PR_SET_THP_DISABLE) or `enabled=never` on some kernels (not Linux 6.18: its
//           MADV_COLLAPSE ignores both THP mode files, checked in every combination)
//   EAGAIN  a page was busy (locked, under writeback, pinned): retry later
//   ENOMEM  no free 2 MiB block even after compaction, or the memory cgroup is at its limit
//           (madvise answers ENOMEM for a range not wholly mapped too: such chunks are counted
//           in `unmapped`, not here)
//   EBUSY   the memory cgroup charge failed
//   EACCES  (another process) no ptrace-read access to it (PTRACE_MODE_READ: another user's
//           process, or one that is not dumpable); the kernel checks this first (mm_access)
//   EPERM   (another process) ptrace access, but no CAP_SYS_NICE (process_madvise's own check)
//   ESRCH   (another process) it has exited
//   EBADF   (another process) the view holds no pidfd of it (a view made under a root)
#pragma once

#include <sys/mman.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "hugepage/detail/collapse_chunks.hpp"
#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/process_view.hpp"

namespace hugepage {

/// How much one collapse() call may do. The budget is checked before each PMD-size chunk, so a call
/// exceeds it by at most one chunk; with a positive time budget a call always gets past its first
/// chunk (tried or passed), so a loop of calls ends however loaded the machine.
struct collapse_budget {
  /// Wall-clock time for the call.
  std::chrono::nanoseconds time = std::chrono::nanoseconds::max();
  /// Bytes submitted to MADV_COLLAPSE (chunks found already huge are free).
  std::size_t bytes = SIZE_MAX;

  /// A budget of `time` only. (Beware `collapse_budget{{}, n}`: `{}` is a zero time budget.)
  static collapse_budget of_time(std::chrono::nanoseconds time) noexcept {
    return {time, SIZE_MAX};
  }
  /// A budget of `bytes` only.
  static collapse_budget of_bytes(std::size_t bytes) noexcept {
    return {std::chrono::nanoseconds::max(), bytes};
  }
};

/// Refusals of one errno.
struct collapse_refusal {
  int error = 0;           ///< errno (EAGAIN, ENOMEM, EBUSY, EINVAL, EPERM, ...)
  std::size_t chunks = 0;  ///< PMD-size chunks refused with it
};

namespace detail {
// The chunks of `refusals` (a result's table, by errno) refused with `error`; 0 for error 0.
inline std::size_t refused_with(const std::array<collapse_refusal, 8>& refusals,
                                int error) noexcept {
  for (const collapse_refusal& r : refusals) {
    if (r.error == error && error != 0) return r.chunks;
  }
  return 0;
}
}  // namespace detail

/// What a collapse() call did, in bytes that always add up to the range's: `already_huge + empty +
/// collapsed + refused + unmapped + left + unaligned == bytes`. `unaligned` is the head and tail
/// outside whole chunks; the part of the range past the user address space (or past the end of
/// the address space, where p + bytes wraps) is in `unmapped`, whole chunks or not.
struct collapse_result {
  std::size_t already_huge = 0;  ///< chunks found huge already (PMD-mapped THP or hugetlb)
  /// Chunks of anonymous memory holding no data (no page written, or all given back; the zero
  /// page is no data): a collapse would refuse them or fill them with zeroes, so no call is made.
  /// Needs PAGEMAP_SCAN and PROCMAP_QUERY (Linux 6.11) to tell anonymous memory; shared memory
  /// and files keep data in the page cache that no page table shows, so theirs are tried.
  std::size_t empty = 0;
  std::size_t collapsed = 0;  ///< chunks collapsed by this call
  std::size_t refused = 0;    ///< chunks the kernel refused this call (see `refusals`)
  std::size_t left = 0;       ///< chunks not visited: the budget ran out; from `resume` on
  /// Chunks not wholly mapped (a hole, or device memory the page walk skips): nothing there can
  /// become a huge page, so no call is made for them (without PAGEMAP_SCAN, a chunk of this
  /// process is counted here when MADV_COLLAPSE answers ENOMEM and mincore(2) finds it unmapped).
  /// Also every byte past the user address space limit (detail::user_address_limit: the kernel's
  /// TASK_SIZE_MAX, 2^47 - 4 KiB on x86-64 with 4-level paging) and past 2^64: never a call there.
  std::size_t unmapped = 0;
  std::size_t unaligned = 0;            ///< bytes outside whole PMD-size chunks: never collapsible
  std::size_t calls = 0;                ///< MADV_COLLAPSE / process_madvise calls made
  std::chrono::nanoseconds elapsed{0};  ///< the whole call
  std::chrono::nanoseconds slowest_chunk{0};  ///< the longest single MADV_COLLAPSE
  /// Where to continue: call again with [resume, end of range). The end of the range when done.
  void* resume = nullptr;
  /// By errno, in order of first appearance; unused entries have error 0. A fixed array, so that
  /// collapse() allocates nothing and can run on an allocation path. Past eight distinct errnos
  /// (never seen: the kernel has six answers) the last entry counts the rest.
  std::array<collapse_refusal, 8> refusals{};
  /// Set when the call stopped early on an error no other chunk can escape (EPERM, ESRCH...).
  std::error_code fatal;
  /// Whether the skipping of huge and unmapped chunks worked (false before Linux 6.7: every chunk
  /// is tried).
  bool scanned = false;

  /// Whether every chunk has been visited.
  bool done() const noexcept { return left == 0; }
  /// Chunks refused with `error`.
  std::size_t refusals_of(int error) const noexcept {
    return detail::refused_with(refusals, error);
  }
};

namespace detail {

// Counts a chunk refused with `error` in `refusals` (a result's table) under its errno; past
// eight errnos, under the last entry.
inline void count_refusal(std::array<collapse_refusal, 8>& refusals, int error) noexcept {
  for (collapse_refusal& x : refusals) {
    if (x.error == error || x.error == 0) {
      x.error = error;
      ++x.chunks;
      return;
    }
  }
  ++refusals.back().chunks;
}

// count_refusal on the table of `r`.
inline void count_refusal(collapse_result& r, int error) noexcept {
  count_refusal(r.refusals, error);
}

// Whether the mapping at `address` of the /proc/<pid>/maps file `maps_fd` is anonymous (no file,
// shared memory's included): a chunk of it with no data in its page tables has none anywhere.
// Shared memory and files keep data in the page cache that no page table shows. Caches the
// mapping in [`lo`, `hi`); false when it cannot tell (no fd, a kernel before PROCMAP_QUERY).
inline bool anonymous_mapping_at(int maps_fd, std::uintptr_t address, std::uintptr_t& lo,
                                 std::uintptr_t& hi, bool& anonymous) noexcept {
  if (address >= lo && address < hi) return anonymous;
  pagemap::procmap_query q;
  if (maps_fd < 0 || pagemap::query_mapping(maps_fd, address, q) || q.vma_start > address) {
    return false;
  }
  lo = static_cast<std::uintptr_t>(q.vma_start);
  hi = static_cast<std::uintptr_t>(q.vma_end);
  anonymous = q.inode == 0 && q.dev_major == 0 && q.dev_minor == 0;
  return anonymous;
}

// Where the first mapping at or above `from` begins (its chunk), in [from, hi]; `hi` when there
// is none. False (and `from`) when it cannot tell: no maps fd, a kernel before PROCMAP_QUERY.
inline bool next_mapping(int maps_fd, std::uintptr_t from, std::uintptr_t hi,
                         std::uintptr_t& next) noexcept {
  next = from;
  if (maps_fd < 0) return false;
  pagemap::procmap_query q;
  const std::error_code ec = pagemap::query_mapping(maps_fd, from, q);
  if (ec == std::errc::no_such_file_or_directory) {
    next = hi;
    return true;
  }
  if (ec) return false;
  const std::size_t collapse_chunk = collapse_chunk_bytes();
  const auto start = static_cast<std::uintptr_t>(q.vma_start) & ~(collapse_chunk - 1);
  next = std::min(std::max(start, from), hi);
  return true;
}

// The core of both collapse() overloads. `pidfd` < 0: this process (madvise). `maps_fd`: its
// /proc/<pid>/maps, to tell anonymous mappings, whose chunks without data are skipped (< 0: none
// is skipped for that).
inline collapse_result collapse_range(int pidfd, int pagemap_fd, void* p, std::size_t bytes,
                                      const collapse_budget& budget, int maps_fd = -1) noexcept {
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  collapse_result r;
  // Addresses as integers for the arithmetic, pointers derived from `p` for the calls.
  char* const base = static_cast<char*>(p);
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  // The part of the range in user space, [address, end). The rest, past the kernel's limit or past
  // the end of the address space (address + bytes wraps), can hold no mapping: it is unmapped,
  // counted without a call, and the parts of the result still add up to `bytes`.
  const std::uintptr_t user_limit = user_address_limit(pagemap_fd);
  const std::uintptr_t end = address >= user_limit          ? address
                             : bytes > user_limit - address ? user_limit
                                                            : address + bytes;
  r.unmapped = bytes - (end - address);
  const std::size_t collapse_chunk = collapse_chunk_bytes();
  // Where a finished call resumes: the end of the range (modulo 2^64 where it wraps). Past user
  // space it is an address, not a pointer into memory: made from the integer.
  void* const range_end =
      r.unmapped == 0
          ? static_cast<void*>(base + bytes)
          : reinterpret_cast<void*>(address + bytes);  // NOLINT(performance-no-int-to-ptr)
  const std::uintptr_t lo = (address + collapse_chunk - 1) & ~(collapse_chunk - 1);
  const std::uintptr_t hi = end & ~(collapse_chunk - 1);
  if (lo >= hi || lo < address) {  // no whole chunk (or the rounding wrapped)
    r.unaligned = end - address;
    r.resume = range_end;
    r.elapsed = clock::now() - start;
    return r;
  }
  r.unaligned = (lo - address) + (end - hi);
  r.scanned = pagemap_fd >= 0;
  pagemap::page_region runs[run_capacity];
  std::size_t run_count = 0;
  std::size_t run = 0;
  pagemap::page_region spans[run_capacity];
  std::size_t span_count = 0;
  std::size_t span = 0;
  std::uintptr_t scanned_to = lo;
  std::size_t submitted = 0;
  constexpr std::size_t scan_window = units::gib;  // look ahead 512 chunks at a time
  std::size_t window = scan_window;                // wider over stretches with nothing mapped
  std::uintptr_t vma_lo = 0, vma_hi = 0;           // the mapping last asked about
  bool vma_anonymous = false;
  std::uintptr_t at = lo;
  for (; at < hi; at += collapse_chunk) {
    if (r.scanned && at >= scanned_to) {
      // Skipping chunks costs no call, but a vast sparse range costs scans: the time budget is
      // checked before each, except the first of a positive budget (progress, below).
      if (budget.time <= decltype(budget.time)::zero() ||
          (at > lo && clock::now() - start >= budget.time)) {
        break;
      }
      const std::uintptr_t limit = hi - at > window ? at + window : hi;
      std::uintptr_t mapped_to = limit;
      r.scanned = huge_runs(pagemap_fd, at, limit, runs, run_count, scanned_to) &&
                  mapped_spans(pagemap_fd, at, limit, spans, span_count, mapped_to);
      if (r.scanned && span_count == 0 && mapped_to == limit) {
        // Nothing mapped up to `limit`: on to the next mapping, all of it unmapped, no call. A
        // vast empty stretch (a range reaching the top of user space) costs one query, or without
        // PROCMAP_QUERY windows that double, not a step per chunk.
        std::uintptr_t next = limit;
        if (!next_mapping(maps_fd, limit, hi, next)) {
          window = std::min<std::size_t>(window * 2, std::size_t{1} << 40);
        }
        r.unmapped += next - at;
        scanned_to = next;
        at = next - collapse_chunk;  // the loop steps to `next`
        continue;
      }
      window = scan_window;
      // Up to the last chunk both scans saw whole; a chunk they saw in part is tried as it is.
      scanned_to = std::max(std::min(scanned_to, mapped_to) & ~(collapse_chunk - 1), at);
      run = span = 0;
    }
    if (r.scanned && at + collapse_chunk <= scanned_to) {
      if (!wholly_mapped(spans, span_count, span, at, at + collapse_chunk)) {
        r.unmapped += collapse_chunk;
        continue;
      }
      while (run < run_count && runs[run].end <= at) ++run;
      if (run < run_count && runs[run].start <= at && runs[run].end >= at + collapse_chunk) {
        r.already_huge += collapse_chunk;
        continue;
      }
      if (!holds_data(spans, span_count, span, at, at + collapse_chunk) &&
          anonymous_mapping_at(maps_fd, at, vma_lo, vma_hi, vma_anonymous)) {
        r.empty += collapse_chunk;
        continue;
      }
    }
    bool mapped = true, data = true;
    if (r.scanned && at + collapse_chunk > scanned_to &&
        judge_chunk(pagemap_fd, at, at + collapse_chunk, mapped, data)) {
      // Seen in part (more pieces than a scan holds): judged by scans of its own.
      if (!mapped) {
        r.unmapped += collapse_chunk;
        continue;
      }
      if (!data && anonymous_mapping_at(maps_fd, at, vma_lo, vma_hi, vma_anonymous)) {
        r.empty += collapse_chunk;
        continue;
      }
    }
    // A positive time budget always buys progress: a call that has neither passed a chunk nor
    // submitted one tries this one, however long its scan took, so a loop of calls ends on a
    // loaded machine too (one ran out of a 3 ms budget in the scan, and resumed where it began).
    const bool progressed = at > lo || submitted > 0;
    if (submitted >= budget.bytes || budget.time <= decltype(budget.time)::zero() ||
        (progressed && clock::now() - start >= budget.time)) {
      break;
    }
    const clock::time_point chunk_start = clock::now();
    std::error_code ec;
    if (pidfd < 0) {
      ec = os::collapse(base + (at - address), collapse_chunk);
    } else {
      pagemap::process_madvise(pidfd, base + (at - address), collapse_chunk, MADV_COLLAPSE, ec);
    }
    r.slowest_chunk =
        std::max<std::chrono::nanoseconds>(r.slowest_chunk, clock::now() - chunk_start);
    ++r.calls;
    submitted += collapse_chunk;
    if (!ec) {
      r.collapsed += collapse_chunk;
      continue;
    }
    // madvise's ENOMEM for a range not wholly mapped: the process unmapped it since the scan, or
    // (without PAGEMAP_SCAN) the chunk has a hole.
    if (ec.value() == ENOMEM && (r.scanned ? !still_mapped(pagemap_fd, at, at + collapse_chunk)
                                           : pidfd < 0 && chunk_unmapped(base + (at - address)))) {
      r.unmapped += collapse_chunk;
      continue;
    }
    r.refused += collapse_chunk;
    count_refusal(r.refusals, ec.value());
    if (collapse_fatal(ec.value())) {
      r.fatal = ec;
      at += collapse_chunk;
      break;
    }
  }
  r.left = hi - std::min(at, hi);
  r.resume = r.left == 0 ? range_end : base + (at - address);
  r.elapsed = clock::now() - start;
  return r;
}

// The result of a call that could not start (no pidfd for the target: `ec`): nothing visited,
// every whole chunk left, the head and tail unaligned, `fatal` set.
inline collapse_result collapse_not_started(void* p, std::size_t bytes,
                                            const std::error_code& ec) noexcept {
  collapse_result r = collapse_range(-1, -1, p, bytes, collapse_budget{{}, 0});
  r.fatal = ec;
  return r;
}

}  // namespace detail

/// Collapses [p, p + bytes) of this process into transparent huge pages, PMD-size chunk by chunk,
/// until `budget` is spent. Only whole, aligned PMD-size chunks inside the range are collapsible
/// (`unaligned` says how much is not). Chunks already huge are skipped (PAGEMAP_SCAN). Never
/// throws and allocates nothing (usable on an allocation path; about 40 KiB of stack for its scan
/// buffers); refusals are counted in the result. The time budget is also checked before each scan
/// of the next GiB, so a vast sparse range stops in time although its skips make no calls.
/// Continue a partial call with collapse(result.resume, end - result.resume, budget); a finished
/// call's `resume` is p + bytes (modulo 2^64 for a range that wraps). Any range is accepted, up to
/// collapse(p, SIZE_MAX): its parts past user space cost nothing, and an empty stretch costs one
/// PROCMAP_QUERY (Linux 6.11) or a few scans of doubling windows, not a step per chunk. Thread-safe
/// (other threads may touch the range meanwhile; the kernel copies under the page table lock).
/// Opens this process's pagemap and maps for the call: collapse(view, ...) opens them once for
/// many calls.
inline collapse_result collapse(void* p, std::size_t bytes,
                                const collapse_budget& budget = {}) noexcept {
  const process_view self;
  return detail::collapse_range(-1, self.pagemap_fd(), p, bytes, budget, self.maps_fd());
}

/// Collapses [p, p + bytes) of the process of `view`, reading its pagemap and maps through the
/// view (opened once, for any number of calls): collapse(p, bytes, budget) for a view of this
/// process (pid 0), collapse(pid, p, bytes, budget) for another one. Another process is only ever
/// advised through the pidfd the view took when made (the right to advise it): a process that has
/// exited gives ESRCH, never acts on a later process given its pid. A view without a pidfd advises
/// nothing: one made under a root (it reads a copy, and holds no pidfd; pid 0 too) gives EBADF, one
/// whose pidfd_open failed gives that errno (pidfd_errno()). Where the view's pagemap could not be
/// opened, every chunk is tried (`scanned` false). Never throws; allocates nothing.
inline collapse_result collapse(const process_view& view, void* p, std::size_t bytes,
                                const collapse_budget& budget = {}) noexcept {
  if (view.pid() == 0 && view.root().empty()) {  // this process, read live
    return detail::collapse_range(-1, view.pagemap_fd(), p, bytes, budget, view.maps_fd());
  }
  std::error_code ec;
  if (view.exited()) {
    ec = std::error_code(ESRCH, std::generic_category());
    return detail::collapse_not_started(p, bytes, ec);
  }
  if (view.pidfd() >= 0) {
    return detail::collapse_range(view.pidfd(), view.pagemap_fd(), p, bytes, budget,
                                  view.maps_fd());
  }
  // No pidfd: a root's view never had one (opening one now could name a later process).
  ec = std::error_code(view.root().empty() && view.pidfd_errno() != 0 ? view.pidfd_errno() : EBADF,
                       std::generic_category());
  return detail::collapse_not_started(p, bytes, ec);
}

/// Collapses [p, p + bytes) of process `pid` with process_madvise(2) (Linux 6.1 for
/// MADV_COLLAPSE): needs ptrace-read access to it and CAP_SYS_NICE; otherwise the result's `fatal`
/// is EACCES (no ptrace access: checked first) or EPERM (no CAP_SYS_NICE), and nothing changed. The
/// target keeps running; chunks it unmaps meanwhile are counted in `unmapped` (the kernel's ENOMEM
/// for them is no refusal), and no other memory is touched. Opens the process's pagemap and maps
/// for the call: collapse(view, ...) opens them once.
inline collapse_result collapse(pid_t pid, void* p, std::size_t bytes,
                                const collapse_budget& budget = {}) {
  const process_view view(pid);  // its pidfd first, then its files
  return collapse(view, p, bytes, budget);
}

/// The memory a collapse of [lo, hi) of the process of `view` would add, in bytes: MADV_COLLAPSE
/// fills every PMD-size chunk that has a page of data present but is not huge yet with zeroes up to
/// 2 MiB (chunks already huge, without data or only on the zero page add nothing). `lo` and `hi`
/// are 2 MiB aligned. Read from the view's pagemap with PAGEMAP_SCAN (Linux 6.7): nullopt where
/// the pagemap is not open or the scan fails; changes nothing. Throws std::bad_alloc.
inline std::optional<std::size_t> collapse_growth(const process_view& view, std::uintptr_t lo,
                                                  std::uintptr_t hi) {
  namespace pm = detail::pagemap;
  const std::size_t chunk = detail::collapse_chunk_bytes();
  if (view.pagemap_fd() < 0) return std::nullopt;
  std::vector<std::size_t> present((hi - lo) / chunk, 0);
  std::vector<bool> huge(present.size(), false);
  pm::page_region regions[256];
  for (std::uintptr_t at = lo; at < hi;) {
    std::size_t count = 0;
    std::uintptr_t walk_end = at;
    if (pm::scan(view.pagemap_fd(), at, hi, pm::page_is_present,
                 pm::page_is_huge | pm::page_is_pfnzero, regions, 256, count, walk_end)) {
      return std::nullopt;
    }
    for (std::size_t i = 0; i < count; ++i) {
      if ((regions[i].categories & pm::page_is_pfnzero) != 0) continue;  // no data of its own
      for (std::uintptr_t a = regions[i].start; a < regions[i].end;) {
        const std::size_t index = (a - lo) / chunk;
        const std::uintptr_t next =
            std::min<std::uintptr_t>(lo + (index + 1) * chunk, regions[i].end);
        present[index] += next - a;
        if ((regions[i].categories & pm::page_is_huge) != 0) huge[index] = true;
        a = next;
      }
    }
    if (count < 256 || walk_end <= at) break;
    at = walk_end;
  }
  std::size_t growth = 0;
  for (std::size_t i = 0; i < present.size(); ++i) {
    if (!huge[i] && present[i] != 0) growth += chunk - present[i];
  }
  return growth;
}

}  // namespace hugepage
