// hugepage/detail/arena_slab.hpp - the pieces of the node arena (arena.hpp) that users never name:
// size classes, the header at the start of each slab, the record of each huge page, and
// AddressSanitizer poisoning.
//
// Layout of one slab, the 2 MiB unit that serves one size class:
//
//   +---------------- arena_slab_bytes (2 MiB), aligned to itself
//   | slab header (lists, free list, bump pointer, counts)           <= slab_data_offset bytes
//   | slot | slot | slot | ...  (slot_bytes each, no per-object header) | unused tail < 1 slot
//   +----------------
//
// A slab is a whole 2 MiB huge page (THP, 2 MiB hugetlb), or one of the 512 slabs carved from a
// 1 GiB page. The header of the slab that holds an object is found by masking the object's address
// with ~(arena_slab_bytes - 1): no lookup table, no per-object header, O(1).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "hugepage/page_size.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define HUGEPAGE_ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HUGEPAGE_ARENA_ASAN 1
#endif
#endif

#if defined(HUGEPAGE_ARENA_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace hugepage::detail {

// ---- AddressSanitizer -------------------------------------------------------------------------

// Freed slots and never-used slab space are poisoned, so a use-after-free through a container that
// lives in an arena is reported as it would be for ::operator new memory.
inline void arena_poison(const void* p, std::size_t bytes) noexcept {
#if defined(HUGEPAGE_ARENA_ASAN)
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

// A slot freed twice is poisoned already: report it instead of corrupting the free list. Without
// AddressSanitizer there is no cheap way to tell, and nothing is checked.
inline void arena_check_not_freed(const void* p) noexcept {
#if defined(HUGEPAGE_ARENA_ASAN)
  if (__asan_address_is_poisoned(p) != 0) {
    std::fprintf(stderr, "hugepage::arena: attempting double-free of %p\n", p);
    std::abort();
  }
#else
  (void)p;
#endif
}

inline void arena_unpoison(const void* p, std::size_t bytes) noexcept {
#if defined(HUGEPAGE_ARENA_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

// ---- size classes -----------------------------------------------------------------------------

// 8-byte steps up to 256 bytes (a node of 24, 40 or 48 bytes gets a slot of exactly that size:
// dense packing is what makes lookups fast), then 64-byte steps up to 1 KiB.
inline constexpr std::size_t arena_fine_step = 8;
inline constexpr std::size_t arena_fine_limit = 256;
inline constexpr std::size_t arena_coarse_step = 64;
/// Largest request (after rounding up to its alignment) served from slabs.
inline constexpr std::size_t arena_max_slot = 1024;
/// Largest alignment served from slabs. Every class size is a multiple of every power of two up
/// to this that divides a request rounded to it, and slot 0 starts at slab_data_offset, so a slot
/// of a class chosen for (bytes, alignment) is aligned to `alignment`.
inline constexpr std::size_t arena_max_alignment = 256;
/// Slab headers sit at one of `arena_header_colours` offsets, `arena_header_stride` apart, in the
/// first bytes of their slab, chosen by the slab's address. Slabs are aligned to 2 MiB or more, so
/// headers at one fixed offset would all fall into the same cache sets: a container that frees
/// into random slabs (churn) would miss in L1 and L2 on the header at nearly every free.
inline constexpr std::size_t arena_header_stride = 128;
inline constexpr std::size_t arena_header_colours = 32;
/// Where the first slot of a slab starts; every header position lies before it.
inline constexpr std::size_t arena_slab_data_offset = arena_header_stride * arena_header_colours;

/// Offset of the header in the slab at `base` (aligned to `slab_bytes`).
inline std::size_t arena_header_offset(const void* base, std::size_t slab_bytes) noexcept {
  return (reinterpret_cast<std::uintptr_t>(base) / slab_bytes) % arena_header_colours *
         arena_header_stride;
}
inline constexpr unsigned arena_class_count =
    arena_fine_limit / arena_fine_step + (arena_max_slot - arena_fine_limit) / arena_coarse_step;

constexpr std::size_t arena_class_bytes(unsigned index) noexcept {
  constexpr unsigned fine = arena_fine_limit / arena_fine_step;
  return index < fine ? (index + 1) * arena_fine_step
                      : arena_fine_limit + (index - fine + 1) * arena_coarse_step;
}

// Class of every request size rounded up to 8 bytes, indexed by rounded size / 8.
struct arena_class_table {
  std::array<unsigned char, arena_max_slot / arena_fine_step + 1> index{};
  constexpr arena_class_table() {
    unsigned c = 0;
    for (std::size_t i = 0; i < index.size(); ++i) {
      const std::size_t bytes = i == 0 ? arena_fine_step : i * arena_fine_step;
      while (arena_class_bytes(c) < bytes) ++c;
      index[i] = static_cast<unsigned char>(c);
    }
  }
};
inline constexpr arena_class_table arena_classes{};

/// Whether a request goes to a slab (true) or straight to the strategy (false).
constexpr bool arena_is_small(std::size_t bytes, std::size_t alignment) noexcept {
  return alignment <= arena_max_alignment && bytes <= arena_max_slot &&
         ((bytes + alignment - 1) & ~(alignment - 1)) <= arena_max_slot;
}

/// Size class of a small request (arena_is_small): the smallest class that holds `bytes` rounded
/// up to `alignment`. A request of 0 bytes counts as `alignment` bytes: rounded to 0 it would take
/// the 8-byte class, whose slots are only 8-aligned.
constexpr unsigned arena_class_of(std::size_t bytes, std::size_t alignment) noexcept {
  const std::size_t a = alignment < arena_fine_step ? arena_fine_step : alignment;
  const std::size_t rounded = bytes == 0 ? a : (bytes + a - 1) & ~(a - 1);
  return arena_classes.index[rounded / arena_fine_step];
}

// ---- slab header ------------------------------------------------------------------------------

/// Size of a slab. A 1 GiB page is carved into slabs of this size, so the size classes a container
/// touches share one page instead of taking a 1 GiB page each.
inline constexpr std::size_t arena_slab_bytes = 2 * units::mib;

/// A huge page the arena mapped: one slab (2 MiB pages) or several (1 GiB pages), each serving a
/// size class or part of a run that holds one large allocation. It goes back to the system only
/// when none of its slabs is in use. Allocated on the heap, beside the page.
struct arena_page {
  char* base = nullptr;
  arena_page* prev = nullptr;  // in the list of pages with a free slab (in_use < slabs)
  arena_page* next = nullptr;
  arena_page* all_prev = nullptr;  // in the list of every page the arena holds
  arena_page* all_next = nullptr;
  std::vector<std::uint64_t> used;  // a bit per slab: in use
  std::size_t slabs = 0;            // slabs the page holds
  std::size_t in_use = 0;           // slabs in use: serving a class or in a run
  bool retained = false;            // empty and kept for reuse

  explicit arena_page(char* start, std::size_t slab_count)
      : base(start), used((slab_count + 63) / 64), slabs(slab_count) {}

  /// The first of `count` adjacent free slabs, or `slabs` when there is no such run.
  std::size_t find_free(std::size_t count) const noexcept {
    std::size_t run = 0;
    for (std::size_t i = 0; i < slabs; ++i) {
      if ((used[i / 64] >> (i % 64) & 1) != 0) {
        run = 0;
      } else if (++run == count) {
        return i + 1 - count;
      }
    }
    return slabs;
  }

  /// Marks slabs [first, first + count) in use (`on`) or free.
  void mark(std::size_t first, std::size_t count, bool on) noexcept {
    for (std::size_t i = first; i < first + count; ++i) {
      const std::uint64_t bit = std::uint64_t{1} << (i % 64);
      used[i / 64] = on ? used[i / 64] | bit : used[i / 64] & ~bit;
    }
  }
};

struct arena_slab {
  arena_slab* prev = nullptr;  // in its class's list of slabs with room
  arena_slab* next = nullptr;
  arena_page* page = nullptr;   // the huge page it was carved from
  void* free = nullptr;         // freed slots, linked through their first word
  char* bump = nullptr;         // first never-used slot
  char* end = nullptr;          // past the last whole slot
  const void* owner = nullptr;  // the arena, for the debug check in deallocate
  std::uint32_t used = 0;       // live slots
  std::uint32_t capacity = 0;   // slots in the slab
  std::uint32_t slot_bytes = 0;
  unsigned cls = 0;
  bool has_room = false;  // in its class's list
};
static_assert(sizeof(arena_slab) <= arena_header_stride, "a header must fit in its stride");
static_assert(arena_slab_data_offset % arena_max_alignment == 0, "slot 0 must stay aligned");

}  // namespace hugepage::detail
