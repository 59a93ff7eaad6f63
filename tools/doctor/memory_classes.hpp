// tools/doctor/memory_classes.hpp - a process's resident memory by what maps it, and the glibc
// chunks that tell it (memory_classes.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/page_size.hpp"
#include "hugepage/smaps.hpp"
#include "mounts.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

/// A mapping holding glibc mmapped chunks: the kernel merges adjacent ones into one record, and
/// with a neighbouring anonymous mapping (ld.so's below libc), so the chunks may fill only part
/// of it.
struct chunk_mapping {
  std::uintptr_t start = 0;
  std::vector<std::size_t> chunks;  ///< each chunk's bytes, in address order
};

/// The glibc mmapped chunks collect_process found by reading chunk headers in the target
/// (process_vm_readv); not read for stored files.
struct chunk_headers {
  bool read = false;                    ///< false: nothing was read; `evidence` says why
  std::string evidence;                 ///< why not read, or how many candidates were left unread
  std::vector<chunk_mapping> mappings;  ///< ascending start
  /// The 64 MiB-aligned blocks laid out as glibc thread heaps whose heap_info header was read
  /// too (false where reading failed, or for a capture older than its chunks file's heaps line:
  /// the layout alone then decides).
  bool heaps_read = false;
  std::vector<std::uintptr_t> heaps;  ///< of them, the starts whose heap_info checks out
};

/// Whether a process whose allocator_guess names `allocator` mallocs with glibc: anything but
/// jemalloc, tcmalloc, mimalloc and musl (a static binary reads as "unknown" and links glibc's).
bool mallocs_with_glibc(std::string_view allocator) noexcept;

/// What classify_memory() needs besides the mappings.
struct class_facts {
  std::string allocator;  ///< allocator_report.guess.name
  std::string runtime;    ///< runtime_report.kind ("jvm" and "node" have their own heaps)
  std::optional<std::vector<mount_entry>> mounts;  ///< nullopt: mountinfo not read
  chunk_headers chunks;
  std::size_t thp_page_bytes = 2 * units::mib;
  std::vector<bool> repeated_views;  ///< counted_once (shared_views.hpp): mapping i repeats memory
};

/// The private anonymous mappings whose first 16 bytes may be a glibc mmapped chunk's header:
/// unnamed rw-p, at least 128 KiB, something resident, not part of a thread arena. Indexes into
/// `mappings`. Pure.
std::vector<std::size_t> chunk_candidates(const std::vector<mapping_info>& mappings);

/// The mappings laid out as glibc thread heaps: a 64 MiB reservation on a 64 MiB boundary, its
/// used part rw-p and the rest ---p right after it, or all of it rw-p. Indexes of the rw-p parts
/// into `mappings`. Pure.
std::vector<std::size_t> thread_heap_candidates(const std::vector<mapping_info>& mappings);

/// Whether the first words of a thread heap candidate starting at `start` with `rw_bytes` rw-p
/// are glibc's heap_info { ar_ptr, prev, size, mprotect_size }: mprotect_size is the rw-p part
/// (page-rounded), 0 < size <= mprotect_size, and the arena lies right after the heap_info of
/// its first heap (32 bytes before glibc 2.35, 48 since): at `start` when prev is null, else in
/// another 64 MiB-aligned heap with prev pointing at one. Pure.
bool is_heap_info(const std::uint64_t (&words)[4], std::uintptr_t start, std::size_t rw_bytes,
                  std::size_t page_bytes) noexcept;

/// The bytes the glibc chunk whose header holds `prev_size` and `size` spans from the start of
/// its mapping (prev_size + size without the flag bits), or 0 when it is no mmapped chunk
/// (IS_MMAPPED clear, other flags set, or not whole pages of `page_bytes`). Pure.
std::size_t mmapped_chunk_span(std::uint64_t prev_size, std::uint64_t size,
                               std::size_t page_bytes) noexcept;

/// A process's resident memory by what maps it (memory_class), largest first, classes with
/// nothing resident left out; their resident bytes sum to the mappings' Rss plus their hugetlb
/// pages. Pure.
std::vector<memory_class_usage> classify_memory(const std::vector<mapping_info>& mappings,
                                                const class_facts& facts);

}  // namespace hugepage::doctor
