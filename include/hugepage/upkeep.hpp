// hugepage/upkeep.hpp - keep labelled containers huge: restore the huge pages they lost.
//
// A THP block that was huge does not stay so. A write after fork() while the child lives copies
// one 4 KiB page and splits the writer's huge page; a partial mprotect, munmap or
// madvise(DONTNEED) splits it too. khugepaged restores such memory slowly (by default 4096 pages
// every 10 s, for the whole machine). upkeep(budget) restores it now, for labelled blocks only
// (label.hpp), within a budget:
//   1. Under the registry's lock, copy the list of labelled blocks; release the lock.
//   2. For each block on THP (hugetlb blocks never decay: skipped), find with PAGEMAP_SCAN (Linux
//      6.7; before it, from pagemap words and kpageflags, which needs CAP_SYS_ADMIN) its decayed
//      PMD-size chunks: wholly resident, not huge, holding data. Chunks with pages
//      not faulted in, or all on the zero page, are left alone: MADV_COLLAPSE would fill them
//      and grow the RSS. Some pages on the zero page do not stop a chunk being decayed: a split
//      by the kernel's shrinker maps its zero-filled subpages there (decayed_chunks below).
//   3. Largest loss first, chunk by chunk: pin the block (checking it is still registered with
//      the same generation), MADV_COLLAPSE the chunk, unpin. The budget is checked before each
//      chunk, so a call exceeds it by at most one chunk; the first chunk is always tried.
//
// Why a pin: between the check that a block is still ours and the madvise, another thread could
// free it, and a third map something else at the same address: the collapse would then work on
// memory this library does not own. A generation number alone cannot close that window (the
// check and the call are two steps); a pin held across the call can. deallocate() of a pinned
// block waits for the unpin (one MADV_COLLAPSE of 2 MiB) before it unmaps, so while the kernel
// works the range is the block's. No lock that allocation or freeing takes is held during the
// kernel call: they go on for other blocks; the pin is a count in the block's record. upkeep()
// calls themselves run one at a time, under a mutex of their own (two at once would collapse and
// count the same chunks twice). In a child of fork() the pins are cleared and that mutex is new
// (the threads that held them are not there).
//
// Back-off: a chunk refused with EBUSY (the memory cgroup at its limit) ends the call, and calls
// for the next 1 s, doubling to 64 s while refusals go on, examine the blocks but collapse nothing
// (backed_off); a chunk slower than slow_chunk ends the call and backs off 1 s. ENOMEM (no free
// 2 MiB block after compaction) concerns the chunk's NUMA node only, where MADV_COLLAPSE allocates
// its huge page: that node backs off the same way (its chunks stay in `left`), the others' chunks
// go on; a call that finds only such chunks is backed_off. The node is asked of move_pages, only
// while some node is backed off (else only after an ENOMEM); where it names none (Linux 6.1's
// EFAULT for a page NUMA balancing marked, no CONFIG_NUMA, a node past 63) ENOMEM backs off the
// whole process. Any other refusal (EAGAIN: a busy page; EINVAL: the chunk is not eligible, a VMA
// boundary inside it) skips that chunk only. A success ends the back-off (of its node, and the
// process's). Refusals are counted per errno.
//
// THP disabled for the process with prctl(PR_SET_THP_DISABLE) makes MADV_COLLAPSE fail: upkeep
// reports thp_disabled and does nothing. With Linux 6.18's PR_THP_DISABLE_EXCEPT_ADVISED the
// library's blocks (all advised with MADV_HUGEPAGE) stay eligible and upkeep acts.
//
// upkeep_thread runs upkeep(budget) every period on a thread of its own; a child of fork() does
// not have that thread (its copy of the object is inert and its destructor joins nothing).
//
// A tail budget (tail_budget, upkeep_pacer) states what upkeep may cost a latency-bound service:
// at most `stall` of collapse work in each `interval`. Each chunk's cost is measured, and a chunk
// is started only when the cost expected of it (the recent chunks') fits what is left of the
// interval's share; after each chunk the pacer pauses in proportion to its cost, so the work is
// spread over the interval instead of run back to back. While the service holds it (hold(): a
// child of fork() still shares the pages, or the request loop is busy), upkeep does nothing and a
// call under way stops before its next chunk. docs/upkeep.md says how to set it.
#pragma once

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "hugepage/collapse.hpp"
#include "hugepage/detail/backing_sources.hpp"
#include "hugepage/detail/fork_locks.hpp"
#include "hugepage/detail/immortal.hpp"
#include "hugepage/detail/mapping_registry.hpp"
#include "hugepage/detail/mapping_steps.hpp"
#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/stats.hpp"

namespace hugepage {

/// A chunk whose MADV_COLLAPSE takes longer than this (the kernel compacting memory for it) ends
/// the upkeep() call and backs off for a second.
inline constexpr std::chrono::milliseconds upkeep_slow_chunk{50};

/// What one upkeep() call did. Bytes are whole PMD-size chunks. The decayed bytes are accounted
/// for exactly: decayed_bytes == restored + already_huge + refused + left + gone.
struct upkeep_result {
  std::size_t blocks = 0;          ///< labelled THP blocks examined
  std::size_t examined_bytes = 0;  ///< their THP bytes
  std::size_t decayed_bytes = 0;   ///< of those, resident on base pages (or partly the zero page)
  /// Of decayed_bytes, chunks that may be huge already: without PAGEMAP_SCAN (before Linux 6.7) a
  /// THP folio mapped whole by PTEs (a mapping split and merged again) looks like one mapped by a
  /// PMD, and smaps says only how many bytes of a mapping are such folios, not where. Every
  /// THP-looking chunk of such a mapping is tried, after the other decayed chunks; MADV_COLLAPSE
  /// answers success for those PMD-mapped already, so `restored` counts them too.
  std::size_t uncertain = 0;
  std::size_t restored = 0;      ///< collapsed into huge pages by this call
  std::size_t already_huge = 0;  ///< found huge again when visited (khugepaged, a fault)
  std::size_t refused = 0;       ///< refused by the kernel (see `refusals`)
  std::size_t left = 0;          ///< decayed, not visited: the budget ran out or a back-off
  /// Decayed when examined, gone when visited: the block was freed meanwhile (`vanished`), or the
  /// chunk was unmapped or given back (no data left to restore).
  std::size_t gone = 0;
  std::size_t skipped_hugetlb = 0;  ///< blocks on hugetlb pages only: they never decay
  std::size_t skipped_base = 0;     ///< blocks whose THP advice was refused at map time
  std::size_t vanished = 0;         ///< blocks freed (or freed and mapped again) meanwhile
  std::size_t calls = 0;            ///< MADV_COLLAPSE calls made
  /// THP is disabled for this process (PR_SET_THP_DISABLE without the exception for advised
  /// memory): nothing can be restored, nothing was tried.
  bool thp_disabled = false;
  /// The call collapsed nothing (it examined the blocks): an earlier refusal or slow chunk set a
  /// back-off still running.
  bool backed_off = false;
  /// The service held upkeep (upkeep_pacer::hold): the call did nothing, or stopped before a
  /// chunk, leaving the rest in `left`.
  bool held = false;
  /// On a tail budget (upkeep_pacer): the call did nothing, paying back what earlier calls spent
  /// over their stall.
  bool paid_back = false;
  /// Decay could not be found, nothing was tried: PAGEMAP_SCAN failed, or on a kernel without it
  /// (before 6.7: the chunks are judged from pagemap and kpageflags then) the frame numbers are
  /// hidden (EPERM: no CAP_SYS_ADMIN).
  std::error_code scan_error;
  std::chrono::nanoseconds elapsed{0};
  /// Of `elapsed`, the time spent finding the decayed chunks, which the budget does not bound:
  /// one PAGEMAP_SCAN per block, or before Linux 6.7 smaps, pagemap and kpageflags read (17-170 ms
  /// for 32 MiB-1 GiB in the lab's TCG guest of Linux 6.1).
  std::chrono::nanoseconds examining{0};
  std::chrono::nanoseconds slowest_chunk{0};
  /// Chunks refused, by errno, in order of first appearance (collapse.hpp).
  std::array<collapse_refusal, 8> refusals{};

  /// Chunks refused with `error`.
  std::size_t refusals_of(int error) const noexcept {
    return detail::refused_with(refusals, error);
  }
};

/// Process-wide upkeep figures since start (write_metrics()).
struct upkeep_statistics {
  std::uint64_t calls = 0;           ///< upkeep() calls
  std::uint64_t restored_bytes = 0;  ///< bytes collapsed by them
  std::uint64_t refused_chunks = 0;  ///< chunks the kernel refused
  std::uint64_t backed_off = 0;      ///< calls that collapsed nothing: back-off
  std::uint64_t thp_disabled = 0;    ///< calls that could not act: THP disabled for the process
  std::uint64_t held = 0;            ///< calls that did nothing or stopped: the service held upkeep
  /// Refused chunks by errno; unused entries have error 0.
  std::array<collapse_refusal, 8> refusals{};
};

namespace detail {

struct upkeep_counters {
  std::atomic<std::uint64_t> calls{0}, restored_bytes{0}, refused_chunks{0}, backed_off{0},
      thp_disabled{0}, held{0};
  std::atomic<int> refusal_errno[8] = {};
  std::atomic<std::uint64_t> refusal_chunks[8] = {};
  // Back-off: no work before retry_at (steady clock, ns); the next refusal backs off `backoff`.
  std::atomic<std::int64_t> retry_at{0};
  std::atomic<std::int64_t> backoff{0};
  // The same per NUMA node, for ENOMEM on a chunk whose node is named: no chunk of node n is tried
  // before node_retry_at[n]. `nodes_backing_off` has bit n set while node_backoff[n] is not zero
  // (refused since its last success); while it is zero no chunk's node is looked up.
  std::atomic<std::uint64_t> nodes_backing_off{0};
  std::atomic<std::int64_t> node_retry_at[64] = {};
  std::atomic<std::int64_t> node_backoff[64] = {};
};

inline upkeep_counters& global_upkeep_counters() noexcept {
  static upkeep_counters instance;  // trivially destructible atomics: safe during exit
  return instance;
}

inline void count_upkeep_refusal(int error, std::size_t chunks) noexcept {
  upkeep_counters& c = global_upkeep_counters();
  for (int i = 0; i < 8; ++i) {
    int expected = 0;
    if (c.refusal_errno[i].load(std::memory_order_relaxed) == error ||
        c.refusal_errno[i].compare_exchange_strong(expected, error, std::memory_order_relaxed) ||
        expected == error || i == 7) {
      c.refusal_chunks[i].fetch_add(chunks, std::memory_order_relaxed);
      return;
    }
  }
}

inline std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The next wait of a back-off that waited `last` (0: none): 1 s, doubling to 64 s.
constexpr std::int64_t next_backoff(std::int64_t last) noexcept {
  constexpr std::int64_t second = 1'000'000'000;
  return std::min<std::int64_t>(std::max<std::int64_t>(last * 2, second), 64 * second);
}

// The NUMA node of the page at `p` (move_pages, which moves nothing); -1 where the kernel names
// none (not present, Linux 6.1's EFAULT for a page NUMA balancing marked, no CONFIG_NUMA) or it is
// past the 64 nodes a back-off is kept for.
inline int node_of_page(const void* p) noexcept {
  int status = -1;
  if (numa::nodes_of_pages(0, 1, &p, &status)) return -1;
  return status >= 0 && status < 64 ? status : -1;
}

/// A run of decayed chunks [start, end), PMD-size aligned.
struct chunk_run {
  std::uintptr_t start;
  std::uintptr_t end;
};

// Appends the decayed chunks of [lo, hi) to `out`: whole PMD-size chunks all of whose pages are
// present, none PMD-mapped, and at least one of them a page of data (not the zero page). A chunk
// where the kernel put some pages on the zero page is decayed: the deferred-split shrinker, when
// it splits a THP that copy-on-write or a partial madvise left partly mapped, maps the subpages
// that hold only zeroes to the zero page (Linux 6.12+). A chunk wholly on the zero page holds no
// data: collapse() calls it empty and so does upkeep (collapsing it would grow the RSS by 2 MiB).
// The kernel merges neighbouring pages of the same categories into one region; a region cut where
// the buffer filled continues the next scan.
inline std::error_code decayed_chunks(int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi,
                                      std::vector<chunk_run>& out) noexcept {
  constexpr std::uint64_t wanted =
      pagemap::page_is_present | pagemap::page_is_huge | pagemap::page_is_pfnzero;
  const std::uintptr_t mask = collapse_chunk_bytes() - 1;
  pagemap::page_region regions[run_capacity];
  // The pending run of present pages not PMD-mapped, [run_start, run_end), and the chunks with
  // data in it not yet emitted, [data_lo, data_hi) (data_lo == data_hi: none).
  std::uintptr_t run_start = 0, run_end = 0, data_lo = 0, data_hi = 0;
  const std::size_t first = out.size();  // runs before it are another range's: never extended
  const auto emit = [&](std::uintptr_t a, std::uintptr_t b) noexcept {
    a = std::max(a, (run_start + mask) & ~mask);  // whole chunks of the run only
    if (a >= b) return;
    try {
      if (out.size() > first && out.back().end == a) {
        out.back().end = b;
      } else {
        out.push_back({a, b});
      }
    } catch (...) {  // no memory: the chunks are not restored this time
    }
  };
  const auto flush = [&]() noexcept {
    emit(data_lo, std::min(data_hi, run_end & ~mask));
    run_start = run_end = data_lo = data_hi = 0;
  };
  for (std::uintptr_t at = lo; at < hi;) {
    std::size_t count = 0;
    std::uintptr_t walk_end = at;
    const std::error_code ec = pagemap::scan(pagemap_fd, at, hi, pagemap::page_is_present, wanted,
                                             regions, run_capacity, count, walk_end);
    if (ec) return ec;
    for (std::size_t i = 0; i < count; ++i) {
      const pagemap::page_region& r = regions[i];
      if ((r.categories & pagemap::page_is_huge) != 0) {
        flush();
        continue;
      }
      if (run_end != r.start || run_end == 0) {
        flush();
        run_start = r.start;
      }
      run_end = r.end;
      if ((r.categories & pagemap::page_is_pfnzero) != 0) continue;
      // Data in the chunks [c_lo, c_hi). Those with data before a gap of zero-page-only chunks
      // are wholly in the run (it goes on past them): emit them now.
      const std::uintptr_t c_lo = r.start & ~mask;
      const std::uintptr_t c_hi = (r.end + mask) & ~mask;
      if (data_lo != data_hi && c_lo <= data_hi) {
        data_hi = std::max(data_hi, c_hi);
      } else {
        if (data_lo != data_hi) emit(data_lo, data_hi);
        data_lo = c_lo;
        data_hi = c_hi;
      }
    }
    if (walk_end <= at || count < run_capacity) break;
    at = walk_end;
  }
  flush();
  return {};
}

// What decayed_chunks_by_pfn knows of one mapping of `vmas`, found the first time a chunk in it
// looks huge: whether its THP-looking folios are mapped by PMDs, by PTEs, or some of each.
struct mapping_thp {
  bool known = false;
  thp_split split;
};

// decayed_chunks() without PAGEMAP_SCAN (kernels before 6.7): each whole chunk of [lo, hi) judged
// from its pagemap words and the frames' kpageflags, as backing_of's kpageflags source judges it
// (classify_exact) within the process's mappings `vmas` (sorted): decayed when every page is
// present, none in a PMD-mapped THP and not all on the zero page. A chunk that mappings' bounds
// cut (a partial mprotect or munmap) cannot be PMD-mapped, whatever its frames: classified piece
// by piece, it is base pages. A whole THP folio mapped by PTEs (a mapping split and merged again)
// looks huge too; smaps and the whole mapping's frames say how many bytes of the mapping are such
// folios (split_thp), not which: where all its THP-looking chunks are, they are decayed; where
// some are, every THP-looking chunk of the mapping goes to `uncertain` (MADV_COLLAPSE of one that
// is PMD-mapped already costs little and answers success). `states` caches per mapping, for the
// call. Needs frame numbers (CAP_SYS_ADMIN) and kpageflags: EPERM otherwise (smaps' per-mapping
// counters cannot say which chunk decayed).
inline std::error_code decayed_chunks_by_pfn(int pagemap_fd, int kpageflags_fd,
                                             const std::vector<mapping_info>& vmas,
                                             std::vector<mapping_thp>& states, std::uintptr_t lo,
                                             std::uintptr_t hi, std::vector<chunk_run>& out,
                                             std::vector<chunk_run>& uncertain) noexcept {
  if (kpageflags_fd < 0) return std::make_error_code(std::errc::operation_not_permitted);
  const std::size_t collapse_chunk = collapse_chunk_bytes();
  const std::uintptr_t mask = collapse_chunk - 1;
  const std::uintptr_t first_chunk = (lo + mask) & ~mask;
  if (first_chunk < lo || first_chunk >= hi || hi - first_chunk < collapse_chunk) return {};
  const std::uintptr_t last_chunk = hi & ~mask;  // the chunks are [first_chunk, last_chunk)
  const std::size_t first = out.size();  // runs before them are another range's: never extended
  const std::size_t first_uncertain = uncertain.size();
  const auto append = [](std::vector<chunk_run>& runs, std::size_t from, std::uintptr_t at,
                         std::uintptr_t end) {
    if (runs.size() > from && runs.back().end == at) {
      runs.back().end = end;
    } else {
      runs.push_back({at, end});
    }
  };
  // Each chunk's pieces (one per mapping it meets), summed, in one pass over each mapping's part:
  // what it holds, how much of it is mapped, and the mappings where some piece looks huge.
  struct chunk_sum {
    exact_part part;
    std::size_t mapped = 0;
    std::size_t thp_vma = SIZE_MAX;  // the mapping of its THP-looking piece (one at most)
  };
  try {
    if (states.size() != vmas.size()) states.assign(vmas.size(), mapping_thp{});
    std::vector<chunk_sum> chunks((last_chunk - first_chunk) / collapse_chunk);
    std::size_t v = 0;
    while (v < vmas.size() && vmas[v].end <= first_chunk) ++v;
    for (; v < vmas.size() && vmas[v].start < last_chunk; ++v) {
      const mapping_info& m = vmas[v];
      const std::uintptr_t s = std::max(m.start, first_chunk);
      const std::uintptr_t e = std::min(m.end, last_chunk);
      // A mapping wholly inside the range: its windows sum to the whole (split_thp's input).
      const bool inside = s == m.start && e == m.end && !states[v].known;
      exact_part whole;
      const bool read = classify_windows(
          m, s, e, pagemap_fd, kpageflags_fd, [&](std::uintptr_t w, const exact_part& part) {
            if (w < s || w >= e) return;
            chunk_sum& c = chunks[(w - first_chunk) / collapse_chunk];
            c.part.thp_anon += part.thp_anon;
            c.part.thp_file += part.thp_file;
            c.part.base += part.base;
            c.part.not_resident += part.not_resident;
            c.part.zero_page += part.zero_page;
            c.mapped += std::min<std::uintptr_t>((w | mask) + 1, e) - w;
            if (part.thp_anon + part.thp_file != 0) c.thp_vma = v;
            whole.thp_anon += part.thp_anon;
            whole.thp_file += part.thp_file;
            whole.base += part.base;
            whole.not_resident += part.not_resident;
            whole.zero_page += part.zero_page;
          });
      if (!read) return std::make_error_code(std::errc::operation_not_permitted);  // frames hidden
      if (inside) {
        states[v].split = split_thp(m, whole);
        states[v].known = true;
      }
    }
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      chunk_sum& c = chunks[i];
      const std::uintptr_t at = first_chunk + i * collapse_chunk;
      if (c.mapped != collapse_chunk) continue;  // a hole: not wholly mapped
      bool maybe_huge = false;  // THP-looking, in a mapping with some THP mapped by PTEs
      if (c.thp_vma != SIZE_MAX) {
        const mapping_info& m = vmas[c.thp_vma];
        mapping_thp& state = states[c.thp_vma];
        if (!state.known) {  // the mapping reaches past the range: read all of it, once
          exact_part whole;
          if (!classify_exact(m, m.start, m.end, pagemap_fd, kpageflags_fd, whole)) {
            return std::make_error_code(std::errc::operation_not_permitted);
          }
          state.split = split_thp(m, whole);
          state.known = true;
        }
        const thp_split& t = state.split;
        // All mapped by PTEs: base pages. Some: which ones is unknown.
        if (t.pmd_anon == 0) c.part.base += std::exchange(c.part.thp_anon, 0);
        if (t.pmd_file == 0) c.part.base += std::exchange(c.part.thp_file, 0);
        maybe_huge =
            (c.part.thp_anon != 0 && t.pte_anon != 0) || (c.part.thp_file != 0 && t.pte_file != 0);
      }
      if (maybe_huge) {
        append(uncertain, first_uncertain, at, at + collapse_chunk);
      } else if (c.part.thp_anon + c.part.thp_file == 0 &&
                 c.part.not_resident == c.part.zero_page && c.part.base != 0) {
        append(out, first, at, at + collapse_chunk);
      }
    }
  } catch (...) {  // no memory: not restored this time
  }
  return {};
}

// Serialises upkeep() calls: two at once would examine the same blocks and both collapse (and
// count) the same chunks. Only upkeep() takes it, never allocate or deallocate, so holding it
// across the kernel calls stalls no allocation. A fork() does not wait for it (a call may run for
// its whole budget): the child, where no call is running, gets it new and unlocked.
class upkeep_serial {
 public:
  upkeep_serial() noexcept {
    entry_.owner = this;
    entry_.lock = &nothing;
    entry_.unlock = &nothing;
    entry_.in_child = &renew;
    arena_fork_locks().add(entry_);
  }
  std::mutex& mutex() noexcept { return mutex_; }

 private:
  static void nothing(void*) noexcept {}
  static void renew(void* self) noexcept {
    ::new (&static_cast<upkeep_serial*>(self)->mutex_) std::mutex();
  }
  std::mutex mutex_;
  fork_lock_entry entry_;
};

inline std::mutex& upkeep_mutex() noexcept {
  static immortal<upkeep_serial> storage;
  return storage.get()->mutex();
}

// Made at program start, before a thread can fork while another holds the guard of the static.
inline const bool upkeep_mutex_initialised = (static_cast<void>(upkeep_mutex()), true);

// The chunks (addresses, sorted) the kernel refused in the last upkeep() calls and that were still
// decayed when last examined. The next call tries them after every other decayed chunk: a chunk
// refused for good (EINVAL: a VMA boundary inside it, no writable entry on Linux before 6.18)
// would otherwise take a byte budget's share first in every call, ahead of chunks that can be
// restored. Guarded by upkeep_mutex(); an address reused by another block costs that chunk its
// turn once.
inline std::vector<std::uintptr_t>& refused_before() noexcept {
  static immortal<std::vector<std::uintptr_t>> storage;
  return *storage.get();
}
inline constexpr std::size_t refused_remembered = 4096;

// What a tail budget adds to an upkeep call (upkeep_pacer::run).
struct upkeep_pacing {
  std::chrono::nanoseconds work;      // collapse time the call may spend
  std::chrono::nanoseconds expected;  // in and out: the cost expected of the next chunk
  std::chrono::nanoseconds spent;     // out: collapse time spent
  std::int64_t rest_per_work;         // pause after a chunk: its cost times this
  const std::atomic<int>* holds;      // the service holds upkeep while > 0
};

struct upkeep_candidate {
  void* p;
  std::uint64_t generation;
  std::size_t decayed;
  std::size_t first_run;  // index into the runs vector
  std::size_t run_count;
  // The order its chunks are tried in: 0 decayed, 1 uncertain (may be PMD-mapped already:
  // decayed_chunks_by_pfn), 2 refused by an earlier call (refused_before).
  int group;
};

}  // namespace detail

/// Restores the huge pages labelled THP blocks have lost, largest loss first, until `budget` is
/// spent (checked before each PMD-size chunk: a call exceeds it by at most one chunk). Examining
/// costs one PAGEMAP_SCAN per block (before Linux 6.7: smaps, pagemap and kpageflags) and is not
/// bounded by the budget; a positive time budget always buys the first chunk, so that a call
/// whose examining alone outlasts it still makes progress. Never throws; takes no lock
/// during a kernel call that allocate or deallocate need (see the top of this file). Thread-safe:
/// calls run one at a time, so a call made during another waits for it and then finds its work
/// done. Scans through `self`, a view of this process (process_view.hpp) that the caller keeps for
/// many calls: a view of another process, or one whose pagemap could not be opened, sets
/// `scan_error` (EINVAL, or the open's errno) and nothing is examined.
inline upkeep_result upkeep(const process_view& self, const collapse_budget& budget = {}) noexcept;

namespace detail {
inline upkeep_result upkeep_paced(const process_view& self, const collapse_budget& budget,
                                  upkeep_pacing* pace) noexcept {
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  upkeep_result r;
  detail::upkeep_counters& c = detail::global_upkeep_counters();
  constexpr auto relaxed = std::memory_order_relaxed;
  c.calls.fetch_add(1, relaxed);
  const auto finish = [&]() noexcept {
    r.elapsed = clock::now() - start;
    return r;
  };
  if (detail::thp_disabled_for_process()) {
    r.thp_disabled = true;
    c.thp_disabled.fetch_add(1, relaxed);
    return finish();
  }
  // One call at a time: a call that waited here finds what the other one restored as huge.
  const std::lock_guard<std::mutex> serial(detail::upkeep_mutex());
  std::vector<detail::mapping_registry::labelled_view> blocks;
  std::vector<detail::chunk_run> runs;
  std::vector<detail::upkeep_candidate> candidates;
  try {
    detail::registry().snapshot(nullptr, blocks);
    runs.reserve(64);
  } catch (...) {
    return finish();  // no memory for the list: nothing examined
  }
  if (self.pid() != 0 && self.pid() != ::getpid()) {
    r.scan_error = std::make_error_code(std::errc::invalid_argument);
    return finish();
  }
  if (self.pagemap_fd() < 0) {
    r.scan_error = std::error_code(self.pagemap_errno(), std::generic_category());
    return finish();
  }
  // Without PAGEMAP_SCAN (its first ENOTTY) the chunks are judged from pagemap and kpageflags,
  // within the mappings that smaps lists (read once per call).
  const std::size_t collapse_chunk = detail::collapse_chunk_bytes();
  // The chunks refused before (detail::refused_before), and those refused or passed over now.
  std::vector<std::uintptr_t> earlier, refused_now;
  try {
    earlier = detail::refused_before();
  } catch (...) {  // no memory: every chunk in the usual order
  }
  bool by_pfn = false;
  std::vector<mapping_info> vmas;
  std::vector<detail::mapping_thp> vma_states;
  std::vector<detail::chunk_run> maybe;  // the block's uncertain chunks (by_pfn only)
  const auto find_decayed = [&](std::uintptr_t lo, std::uintptr_t hi) noexcept {
    if (!by_pfn) {
      const std::error_code ec = detail::decayed_chunks(self.pagemap_fd(), lo, hi, runs);
      if (ec != std::errc::inappropriate_io_control_operation) return ec;
      if (self.kpageflags_fd() < 0) return std::make_error_code(std::errc::operation_not_permitted);
      std::error_code read;
      try {
        vmas = self.read_smaps(read);
      } catch (...) {
        read = std::make_error_code(std::errc::not_enough_memory);
      }
      if (read) return read;
      by_pfn = true;
    }
    return detail::decayed_chunks_by_pfn(self.pagemap_fd(), self.kpageflags_fd(), vmas, vma_states,
                                         lo, hi, runs, maybe);
  };
  for (const auto& v : blocks) {
    const auto& b = v.block;
    const auto base = reinterpret_cast<std::uintptr_t>(v.p);
    // The THP parts of the block: its head, its tail, or both (strategy::layout).
    std::uintptr_t parts[2][2] = {{0, 0}, {0, 0}};
    int count = 0;
    if (b.head != 0 && b.obtained == backing::thp) parts[count++][0] = base;
    if (count == 1) parts[0][1] = base + b.head;
    if (b.length != b.head && b.tail == backing::thp) {
      parts[count][0] = base + b.head;
      parts[count++][1] = base + b.length;
    }
    if (count == 0) {
      const bool base_pages = (b.head != 0 && b.obtained == backing::base) ||
                              (b.length != b.head && b.tail == backing::base);
      ++(base_pages ? r.skipped_base : r.skipped_hugetlb);
      continue;
    }
    ++r.blocks;
    detail::upkeep_candidate k{v.p, b.generation, 0, runs.size(), 0, 0};
    maybe.clear();
    for (int i = 0; i < count; ++i) {
      r.examined_bytes += parts[i][1] - parts[i][0];
      const std::error_code ec = find_decayed(parts[i][0], parts[i][1]);
      if (ec) {
        r.scan_error = ec;
        return finish();
      }
    }
    k.run_count = runs.size() - k.first_run;
    for (std::size_t i = k.first_run; i < runs.size(); ++i)
      k.decayed += runs[i].end - runs[i].start;
    // The uncertain chunks: a candidate of their own, after every certain one.
    detail::upkeep_candidate u{v.p, b.generation, 0, runs.size(), 0, 1};
    try {
      runs.insert(runs.end(), maybe.begin(), maybe.end());
    } catch (...) {  // no memory: not tried this time
    }
    u.run_count = runs.size() - u.first_run;
    for (std::size_t i = u.first_run; i < runs.size(); ++i)
      u.decayed += runs[i].end - runs[i].start;
    r.uncertain += u.decayed;
    // The decayed chunks an earlier call refused: a candidate of their own, tried last.
    detail::upkeep_candidate again{v.p, b.generation, 0, 0, 0, 2};
    if (!earlier.empty() && k.decayed != 0) {
      try {
        std::vector<detail::chunk_run> fresh, refused;
        for (std::size_t i = k.first_run; i < k.first_run + k.run_count; ++i) {
          for (std::uintptr_t at = runs[i].start; at < runs[i].end; at += collapse_chunk) {
            const bool seen = std::binary_search(earlier.begin(), earlier.end(), at);
            std::vector<detail::chunk_run>& to = seen ? refused : fresh;
            if (!to.empty() && to.back().end == at) {
              to.back().end = at + collapse_chunk;
            } else {
              to.push_back({at, at + collapse_chunk});
            }
          }
        }
        if (!refused.empty()) {
          runs.resize(k.first_run);
          k.run_count = fresh.size();
          runs.insert(runs.end(), fresh.begin(), fresh.end());
          again.first_run = runs.size();
          again.run_count = refused.size();
          runs.insert(runs.end(), refused.begin(), refused.end());
          for (const detail::chunk_run& run : refused) again.decayed += run.end - run.start;
          k.decayed -= again.decayed;
          // The uncertain runs sat after the certain ones: put them back after these.
          u.first_run = runs.size();
          if (u.run_count != 0) runs.insert(runs.end(), maybe.begin(), maybe.end());
        }
      } catch (...) {  // no memory: tried in the usual order
      }
    }
    for (const detail::upkeep_candidate& one : {k, u, again}) {
      r.decayed_bytes += one.decayed;
      if (one.decayed == 0) continue;
      try {
        candidates.push_back(one);
      } catch (...) {
        r.left += one.decayed;
      }
    }
  }
  r.examining = clock::now() - start;
  if (candidates.empty()) {
    detail::refused_before().clear();  // nothing decayed: nothing refused is left to order
    return finish();
  }
  if (detail::steady_ns() < c.retry_at.load(relaxed)) {
    r.backed_off = true;
    r.left = r.decayed_bytes;
    c.backed_off.fetch_add(1, relaxed);
    return finish();
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.group != b.group ? a.group < b.group : a.decayed > b.decayed;
  });
  // Back-off after a refusal that no other chunk escapes now; `slow` for a slow chunk.
  const auto back_off = [&](bool slow) noexcept {
    std::int64_t wait = detail::next_backoff(0);
    if (!slow) {
      wait = detail::next_backoff(c.backoff.load(relaxed));
      c.backoff.store(wait, relaxed);
    }
    c.retry_at.store(detail::steady_ns() + wait, relaxed);
  };
  // Node `node` refused a chunk for want of a free huge page there (ENOMEM): its chunks wait, the
  // other nodes' go on. A success there ends it.
  const auto back_off_node = [&](int node) noexcept {
    const std::int64_t wait = detail::next_backoff(c.node_backoff[node].load(relaxed));
    c.node_backoff[node].store(wait, relaxed);
    c.node_retry_at[node].store(detail::steady_ns() + wait, relaxed);
    c.nodes_backing_off.fetch_or(std::uint64_t{1} << node, relaxed);
  };
  const auto end_node_back_off = [&](int node) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << node;
    if ((c.nodes_backing_off.load(relaxed) & bit) == 0) return;
    c.node_backoff[node].store(0, relaxed);
    c.node_retry_at[node].store(0, relaxed);
    c.nodes_backing_off.fetch_and(~bit, relaxed);
  };
  std::size_t submitted = 0;
  std::size_t done_here = 0;                // chunks this call collapsed or tried
  std::size_t node_waits = 0;               // chunks passed over: their node is backed off
  std::vector<std::uintptr_t> tried_again;  // chunks refused before that this call tried
  bool stop = false;
  std::size_t candidate = 0;
  for (; candidate < candidates.size() && !stop; ++candidate) {
    const detail::upkeep_candidate& k = candidates[candidate];
    std::size_t visited = 0;  // decayed bytes of this block dealt with
    bool give_up_block = false;
    for (std::size_t i = k.first_run; i < k.first_run + k.run_count && !stop && !give_up_block;
         ++i) {
      for (std::uintptr_t at = runs[i].start; at < runs[i].end; at += collapse_chunk) {
        // A positive time budget always buys the call's first chunk, however long examining
        // took: without PAGEMAP_SCAN (smaps, pagemap and kpageflags read) it can take longer
        // than the whole budget, and calls would never restore anything.
        if (submitted >= budget.bytes || budget.time <= std::chrono::nanoseconds::zero() ||
            (done_here != 0 && clock::now() - start >= budget.time)) {
          stop = true;
          break;
        }
        // Its node, only while some node is backed off: a chunk of a node still waiting stays
        // in `left` (before the pacer's pause: passing over it costs no collapse work); a
        // success on a node ends that node's back-off. A query: the block need not be pinned.
        int node = -1;
        const bool looked = c.nodes_backing_off.load(relaxed) != 0;
        if (looked) {
          node = detail::node_of_page(static_cast<const char*>(k.p) +
                                      (at - reinterpret_cast<std::uintptr_t>(k.p)));
          if (node >= 0 && detail::steady_ns() < c.node_retry_at[node].load(relaxed)) {
            ++node_waits;
            continue;
          }
        }
        if (pace != nullptr) {
          // A chunk whose expected cost does not fit what is left is not started; the first of a
          // call is (it measures the cost, and the pacer carries any overspend to the next
          // intervals), so that chunks dearer than the whole stall still progress at its share.
          if (done_here != 0 && pace->spent + pace->expected > pace->work) {
            stop = true;
            break;
          }
          if (done_here != 0) {
            const auto rest = std::min<std::chrono::nanoseconds>(
                pace->expected * pace->rest_per_work, budget.time - (clock::now() - start));
            if (rest > std::chrono::nanoseconds::zero()) std::this_thread::sleep_for(rest);
          }
          if (pace->holds->load(std::memory_order_acquire) > 0) {
            r.held = true;
            stop = true;
            break;
          }
        }
        if (!detail::registry().pin(k.p, k.generation)) {
          ++r.vanished;
          give_up_block = true;
          r.gone += k.decayed - std::min(visited, k.decayed);  // nothing of it is left to do
          break;
        }
        // Pinned: until unpin() the block cannot be unmapped, so the range is still its own.
        // The chunk's pointer derived from the block's, not made from an integer.
        char* const chunk = static_cast<char*>(k.p) + (at - reinterpret_cast<std::uintptr_t>(k.p));
        const clock::time_point chunk_start = clock::now();
        const collapse_result one =
            detail::collapse_range(-1, self.pagemap_fd(), chunk, collapse_chunk, {});
        // ENOMEM: the huge page is allocated on the chunk's own node (Linux 6.1: __GFP_THISNODE),
        // so the refusal says nothing of the other nodes.
        if (!looked && one.refused != 0 && one.refusals[0].error == ENOMEM)
          node = detail::node_of_page(chunk);
        detail::registry().unpin(k.p);
        ++done_here;
        if (pace != nullptr) {
          // The next chunk is expected to cost this one's, or a little less than the costliest
          // of the recent ones: a slow chunk weighs for a few chunks after it.
          const std::chrono::nanoseconds cost = clock::now() - chunk_start;
          pace->spent += cost;
          pace->expected = std::max(cost, pace->expected - (pace->expected - cost) / 4);
        }
        visited += collapse_chunk;
        r.calls += one.calls;
        submitted += one.calls * collapse_chunk;
        r.restored += one.collapsed;
        r.already_huge += one.already_huge;
        r.gone += one.unmapped + one.empty;
        r.slowest_chunk = std::max(r.slowest_chunk, one.slowest_chunk);
        if (one.collapsed != 0) {
          c.backoff.store(0, relaxed);
          if (node >= 0) end_node_back_off(node);
        }
        if (one.refused != 0) {
          r.refused += one.refused;
          const int error = one.refusals[0].error;
          detail::count_refusal(r.refusals, error);
          c.refused_chunks.fetch_add(1, relaxed);
          detail::count_upkeep_refusal(error, 1);
          if (error == ENOMEM && node >= 0) {
            back_off_node(node);  // the node's other chunks wait with it
          } else if (error == ENOMEM || error == EBUSY) {
            // No node named, or the memory cgroup at its limit (EBUSY), which no node escapes.
            back_off(/*slow=*/false);
            stop = true;
            break;
          } else {
            // EAGAIN, EINVAL and the rest concern this chunk: the next one is still tried, and
            // the next call tries this one last.
            try {
              refused_now.push_back(at);
            } catch (...) {
            }
          }
        }
        if (k.group == 2) {
          try {
            tried_again.push_back(at);
          } catch (...) {
          }
        }
        if (one.slowest_chunk > upkeep_slow_chunk) {
          back_off(/*slow=*/true);
          stop = true;
          break;
        }
      }
    }
    if (!give_up_block) r.left += k.decayed - std::min(visited, k.decayed);
  }
  for (; candidate < candidates.size(); ++candidate) r.left += candidates[candidate].decayed;
  // Every chunk it came to was on a node backed off: the call collapsed nothing, as under the
  // process's back-off.
  if (done_here == 0 && node_waits != 0 && !r.held) {
    r.backed_off = true;
    c.backed_off.fetch_add(1, relaxed);
  }
  // Remembered for the next call: the chunks refused now, and those refused before that are still
  // decayed and were not tried now.
  try {
    std::sort(tried_again.begin(), tried_again.end());
    for (const detail::upkeep_candidate& k : candidates) {
      if (k.group != 2) continue;
      for (std::size_t i = k.first_run; i < k.first_run + k.run_count; ++i) {
        for (std::uintptr_t at = runs[i].start; at < runs[i].end; at += collapse_chunk) {
          if (!std::binary_search(tried_again.begin(), tried_again.end(), at))
            refused_now.push_back(at);
        }
      }
    }
    std::sort(refused_now.begin(), refused_now.end());
    refused_now.erase(std::unique(refused_now.begin(), refused_now.end()), refused_now.end());
    if (refused_now.size() > detail::refused_remembered)
      refused_now.resize(detail::refused_remembered);
    detail::refused_before().swap(refused_now);
  } catch (...) {  // no memory: the last list stays
  }
  c.restored_bytes.fetch_add(r.restored, relaxed);
  if (r.held) c.held.fetch_add(1, relaxed);
  return finish();
}
}  // namespace detail

inline upkeep_result upkeep(const process_view& self, const collapse_budget& budget) noexcept {
  return detail::upkeep_paced(self, budget, nullptr);
}

/// upkeep_statistics since start. Thread-safe.
inline upkeep_statistics upkeep_stats() noexcept {
  const detail::upkeep_counters& c = detail::global_upkeep_counters();
  constexpr auto relaxed = std::memory_order_relaxed;
  upkeep_statistics s;
  s.calls = c.calls.load(relaxed);
  s.restored_bytes = c.restored_bytes.load(relaxed);
  s.refused_chunks = c.refused_chunks.load(relaxed);
  s.backed_off = c.backed_off.load(relaxed);
  s.thp_disabled = c.thp_disabled.load(relaxed);
  s.held = c.held.load(relaxed);
  for (int i = 0; i < 8; ++i) {
    s.refusals[i] = {c.refusal_errno[i].load(relaxed),
                     static_cast<std::size_t>(c.refusal_chunks[i].load(relaxed))};
  }
  return s;
}

/// Restores the huge pages labelled THP blocks have lost: upkeep(self, budget) with a view of
/// this process opened for the call.
inline upkeep_result upkeep(const collapse_budget& budget = {}) noexcept {
  const process_view self;
  return upkeep(self, budget);
}

/// What upkeep may cost a latency-bound service: at most `stall` of collapse work in each
/// `interval`, i.e. a share stall / interval of one CPU, spread over the interval. The service
/// states it from the latency it can spare; docs/upkeep.md shows how to choose it.
struct tail_budget {
  std::chrono::nanoseconds stall;     ///< collapse work allowed per interval
  std::chrono::nanoseconds interval;  ///< the period of the calls
};

/// Holds upkeep while it lives (upkeep_pacer::hold, upkeep_thread::hold): no chunk is started
/// until every hold is released. Movable; a moved-from or default hold holds nothing.
class upkeep_hold {
 public:
  upkeep_hold() noexcept = default;
  explicit upkeep_hold(std::atomic<int>& holds) noexcept : holds_(&holds) {
    holds_->fetch_add(1, std::memory_order_acq_rel);
  }
  upkeep_hold(upkeep_hold&& other) noexcept : holds_(std::exchange(other.holds_, nullptr)) {}
  upkeep_hold& operator=(upkeep_hold&& other) noexcept {
    if (this != &other) {
      release();
      holds_ = std::exchange(other.holds_, nullptr);
    }
    return *this;
  }
  upkeep_hold(const upkeep_hold&) = delete;
  upkeep_hold& operator=(const upkeep_hold&) = delete;
  ~upkeep_hold() { release(); }
  /// Releases it now (the destructor then does nothing).
  void release() noexcept {
    if (holds_ != nullptr) holds_->fetch_sub(1, std::memory_order_acq_rel);
    holds_ = nullptr;
  }

 private:
  std::atomic<int>* holds_ = nullptr;
};

/// upkeep() on a tail budget: run() once per interval does that interval's share. Each chunk's
/// cost is measured; after the first chunk of a call, a chunk is started only when the cost
/// expected of it fits what is left of `stall`, and after each chunk the call pauses for its cost
/// times (interval / stall - 1), so that the work is spread over the interval. What a call spends
/// over its stall (its first chunk may cost more than the whole stall) is owed: the next calls
/// get less, and a call that owes a whole stall does nothing (`paid_back`), so that over many
/// intervals the share stays stall / interval. Nothing is done while a hold() lives; a call under
/// way stops before its next chunk. The back-off of upkeep() (refusals, slow chunks) applies as
/// well. Thread-safe: calls run one at a time.
class upkeep_pacer {
 public:
  /// Throws std::invalid_argument unless 0 < stall <= interval.
  explicit upkeep_pacer(tail_budget budget) : budget_(budget) {
    if (budget.stall <= std::chrono::nanoseconds::zero() || budget.interval < budget.stall) {
      throw std::invalid_argument("hugepage: tail_budget needs 0 < stall <= interval");
    }
  }
  upkeep_pacer(const upkeep_pacer&) = delete;
  upkeep_pacer& operator=(const upkeep_pacer&) = delete;

  /// One interval's share of the work (the call lasts about one interval when there is work).
  upkeep_result run(const process_view& self) noexcept {
    upkeep_result r;
    if (held()) {
      r.held = true;
      detail::global_upkeep_counters().held.fetch_add(1, std::memory_order_relaxed);
      return r;
    }
    // What earlier calls spent over their stall is paid first: an interval that owes its whole
    // stall does nothing (`paid_back`).
    const std::lock_guard<std::mutex> one_at_a_time(mutex_);
    if (debt_ >= budget_.stall) {
      debt_ -= budget_.stall;
      r.paid_back = true;
      return r;
    }
    detail::upkeep_pacing pace{budget_.stall - debt_, expected_, std::chrono::nanoseconds::zero(),
                               budget_.interval / budget_.stall - 1, &holds_};
    r = detail::upkeep_paced(self, collapse_budget::of_time(budget_.interval), &pace);
    expected_ = pace.expected;
    debt_ = std::max(std::chrono::nanoseconds::zero(), pace.spent - pace.work);
    expected_ns_.store(expected_.count(), std::memory_order_relaxed);
    return r;
  }
  upkeep_result run() noexcept {
    const process_view self;
    return run(self);
  }

  /// Holds upkeep until the returned object is destroyed or released: e.g. from just before a
  /// fork() until the child is reaped, or while the request loop is busy.
  [[nodiscard]] upkeep_hold hold() noexcept { return upkeep_hold(holds_); }
  bool held() const noexcept { return holds_.load(std::memory_order_acquire) > 0; }
  /// The cost expected of the next chunk (zero before the first was measured).
  std::chrono::nanoseconds chunk_cost() const noexcept {
    return std::chrono::nanoseconds(expected_ns_.load(std::memory_order_relaxed));
  }
  const tail_budget& budget() const noexcept { return budget_; }

 private:
  tail_budget budget_;
  std::atomic<int> holds_{0};
  std::atomic<std::int64_t> expected_ns_{0};  // expected_, for chunk_cost()
  std::mutex mutex_;                          // guards the members below: run() one at a time
  std::chrono::nanoseconds expected_{0};      // the cost expected of the next chunk
  std::chrono::nanoseconds debt_{0};          // collapse time spent over the stall, to pay
};

/// Runs upkeep(budget) every `period` on a thread of its own, from construction to destruction
/// (which stops and joins it: at most one chunk's wait). Exactly one per process is enough.
///
///   static hugepage::upkeep_thread keeper(std::chrono::seconds(10),
///                                         hugepage::collapse_budget::of_time(std::chrono::milliseconds(20)));
///
/// fork(): a pthread_atfork handler (detail/fork_locks.hpp) holds the object's mutex across the
/// fork; in the child the object is inert (no thread runs there), its destructor joins nothing,
/// and last() keeps what the parent's thread last found. A child that wants upkeep makes its own.
class upkeep_thread {
 public:
  /// Starts the thread. `period` must be positive (std::invalid_argument otherwise: a period of
  /// zero would call upkeep() back to back); nanoseconds::max() or any period past the steady
  /// clock's range means no call until destruction. Throws std::system_error when the thread
  /// cannot be created.
  upkeep_thread(std::chrono::nanoseconds period, collapse_budget budget)
      : period_(period), budget_(budget), owner_(::getpid()) {
    if (period <= std::chrono::nanoseconds::zero())
      throw std::invalid_argument("hugepage: upkeep_thread period must be positive");
    start();
  }

 private:
  void start() {
    fork_entry_.owner = this;
    fork_entry_.lock = &lock_for_fork;
    fork_entry_.unlock = &unlock_after_fork;
    fork_entry_.in_child = &forget_thread;
    const int error = ::pthread_create(&thread_, nullptr, &run, this);
    if (error != 0)
      throw std::system_error(error, std::generic_category(), "hugepage: upkeep thread");
    running_ = true;
    detail::arena_fork_locks().add(fork_entry_);
  }

 public:
  /// Starts the thread on a tail budget: an upkeep_pacer's run() every budget.interval, from
  /// one interval's start to the next. Throws std::invalid_argument unless 0 < stall <=
  /// interval, std::system_error when the thread cannot be created.
  explicit upkeep_thread(tail_budget budget)
      : pacer_(std::make_unique<upkeep_pacer>(budget)),
        period_(budget.interval),
        budget_(collapse_budget::of_time(budget.stall)),
        owner_(::getpid()) {
    start();
  }

  upkeep_thread(const upkeep_thread&) = delete;
  upkeep_thread& operator=(const upkeep_thread&) = delete;

  /// Holds upkeep until the returned object is destroyed or released (upkeep_pacer::hold): no
  /// call restores anything meanwhile, and a call under way stops before its next chunk (on a
  /// tail budget) or is the last to run (otherwise).
  [[nodiscard]] upkeep_hold hold() noexcept {
    return pacer_ ? pacer_->hold() : upkeep_hold(holds_);
  }

  ~upkeep_thread() {
    detail::arena_fork_locks().remove(fork_entry_);
    bool join = false;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      join = running_ && owner_ == ::getpid();
    }
    wake_.notify_all();
    if (join) ::pthread_join(thread_, nullptr);
  }

  /// What the last call found (a default result before the first).
  upkeep_result last() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return last_;
  }

  /// Calls made so far.
  std::uint64_t runs() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return runs_;
  }

 private:
  static void* run(void* self) noexcept {
    auto& t = *static_cast<upkeep_thread*>(self);
    std::unique_lock<std::mutex> lock(t.mutex_);
    using clock = std::chrono::steady_clock;
    clock::time_point last = clock::now();
    for (;;) {
      // now + period saturated: past the clock's range the sum would wrap to the past. On a tail
      // budget the period runs from one call's start to the next (a call lasts about a period).
      const clock::time_point now = t.pacer_ ? std::min(last, clock::now()) : clock::now();
      if (t.period_ >= clock::time_point::max() - now) {
        t.wake_.wait(lock, [&t] { return t.stop_; });
      } else {
        t.wake_.wait_until(lock, now + t.period_, [&t] { return t.stop_; });
      }
      if (t.stop_) return nullptr;
      lock.unlock();  // never held during the kernel calls
      last = clock::now();
      upkeep_result r;
      if (t.pacer_) {
        r = t.pacer_->run();
      } else if (t.holds_.load(std::memory_order_acquire) > 0) {
        r.held = true;
        detail::global_upkeep_counters().held.fetch_add(1, std::memory_order_relaxed);
      } else {
        r = upkeep(t.budget_);
      }
      lock.lock();
      t.last_ = r;
      ++t.runs_;
    }
  }

  static void lock_for_fork(void* self) noexcept {
    static_cast<upkeep_thread*>(self)->mutex_.lock();
  }
  static void unlock_after_fork(void* self) noexcept {
    static_cast<upkeep_thread*>(self)->mutex_.unlock();
  }
  // The child has no such thread, and the condition variable may count its wait.
  static void forget_thread(void* self) noexcept {
    auto& t = *static_cast<upkeep_thread*>(self);
    t.running_ = false;
    t.stop_ = true;
    new (&t.wake_) std::condition_variable();
  }

  std::unique_ptr<upkeep_pacer> pacer_;  // on a tail budget only
  std::atomic<int> holds_{0};            // hold() without a tail budget
  std::chrono::nanoseconds period_;
  collapse_budget budget_;
  pid_t owner_;
  mutable std::mutex mutex_;  // guards the members below
  std::condition_variable wake_;
  bool stop_ = false;
  bool running_ = false;
  upkeep_result last_;
  std::uint64_t runs_ = 0;
  pthread_t thread_{};
  detail::fork_lock_entry fork_entry_;
};

}  // namespace hugepage
