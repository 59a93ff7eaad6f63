// tools/doctor/shared_views.hpp - memory mapped more than once, counted once. Shared mappings of
// one object (a memfd, a SysV segment, a file: the same device and inode) whose file offsets
// overlap are views of the same pages, and smaps counts those pages in each view: ZGC maps its
// heap three times (one memfd, its colored-pointer views), which summed per mapping is three
// times the heap. Pure.
#pragma once

#include <optional>
#include <vector>

#include "hugepage/smaps.hpp"

namespace hugepage::doctor {

/// A MAP_PRIVATE view of such an object holds the object's page-cache pages (Rss less Anonymous)
/// where it only read, and its own copies (Anonymous) where it wrote: the page-cache part counts
/// once with the shared views, the copies are private anonymous memory and always count.
/// `mappings` with each shared mapping's counters (Rss, the PMD-mapped and hugetlb bytes, Swap)
/// scaled to the part of its offsets that no earlier mapping of the same object covers: a view
/// that repeats a whole earlier one counts nothing. `repeated[i]` says whether mapping i repeats
/// some of an earlier one. nullopt (and `repeated` all false) when no mapping does: the caller
/// keeps its own. The share is by offsets, not per page: a page resident only in a later view of
/// an offset an earlier view covers is not counted.
std::optional<std::vector<mapping_info>> counted_once(const std::vector<mapping_info>& mappings,
                                                      std::vector<bool>& repeated);

}  // namespace hugepage::doctor
