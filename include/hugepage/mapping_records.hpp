// hugepage/mapping_records.hpp - the records strategy::deallocate() consults for the mappings it
// cannot work out from a block's size alone.
//
// deallocate() recomputes a block's length and backing from its size. A mapping whose backing
// differs from what its strategy asked for (a hugetlb request served by THP, THP advice refused)
// is recorded when it is mapped and its record taken when it is freed, so the statistics
// (stats.hpp) count what it really was. These are those records, in the library's one table
// (detail/mapping_registry.hpp: a hash table, O(1) expected at any count, behind one mutex): for an
// allocator of your own over mappings it makes, and for measuring the table (hugepage_bench's
// BM_Registry_TakeAdd). A record names a mapping its caller owns: a record left for a pointer a
// strategy later returns changes what that block's deallocate() counts.
#pragma once

#include <cstddef>

#include "hugepage/detail/mapping_registry.hpp"
#include "hugepage/stats.hpp"

namespace hugepage {

/// Records that the mapping at `p`, `length` bytes, is backed by `obtained`. Throws
/// std::bad_alloc (then nothing is recorded).
inline void record_mapping(void* p, std::size_t length, backing obtained) {
  detail::registry().add(p, {obtained, length, false});
}

/// Removes the record of `p` and returns its backing, or `otherwise` when `p` has none: what
/// strategy::deallocate() does for each mapped block while any record is live. Thread-safe.
inline backing take_mapping_record(void* p, backing otherwise) noexcept {
  return detail::registry().take(p, otherwise);
}

}  // namespace hugepage
