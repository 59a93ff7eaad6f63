// tools/doctor/shared_views.hpp - memory mapped more than once, counted once. Shared mappings of
// one object (a memfd, a SysV segment, a file: the same device and inode) whose file offsets
// overlap are views of the same pages, and smaps counts those pages in each view: ZGC maps its
// heap three times (one memfd, its colored-pointer views), which summed per mapping is three
// times the heap. Pure, but for view_residency_of() (pagemap).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hugepage/process_view.hpp"
#include "hugepage/smaps.hpp"

namespace hugepage::doctor {

/// Where a view's object pages are resident, in the object's file offsets: sorted, disjoint
/// [from, to) byte ranges. For a MAP_PRIVATE view only its page-cache pages (pagemap's present
/// and file bits), never its copies.
using resident_offsets = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

/// The residency of some views, by mapping start (view_residency_of() reads it live; a capture
/// stores it).
using view_residency = std::map<std::uintptr_t, resident_offsets>;

/// The resident offsets of the views overlapping_views() names among `mappings` (the parsed
/// smaps of the process of `target`), from its pagemap's present and file bits. Views whose
/// pagemap cannot be read are left out (counted by offsets). Allocates its result and one 64 KiB
/// buffer.
view_residency view_residency_of(const process_view& target,
                                 const std::vector<mapping_info>& mappings);

/// The indices of the mappings whose residency decides what counted_once() keeps: views of an
/// object whose file offsets overlap those of another view of it. Pure.
std::vector<std::size_t> overlapping_views(const std::vector<mapping_info>& mappings);

/// A MAP_PRIVATE view of such an object holds the object's page-cache pages (Rss less Anonymous)
/// where it only read, and its own copies (Anonymous) where it wrote: the page-cache part counts
/// once with the shared views, the copies are private anonymous memory and always count.
/// `mappings` with each shared mapping's counters (Rss, the PMD-mapped and hugetlb bytes, Swap)
/// scaled to the part that no earlier mapping of the same object holds: each page counts once,
/// in the first view (shared ones first, then in address order) where it is resident. Where
/// `residency` holds a view's resident offsets, that is per page: a page resident only in a later
/// view counts there (a view mapped but never touched holds nothing). Without them (a capture
/// made before they were stored) the share is by offsets: an earlier view is taken to hold all
/// of its range, or none of it where its Rss is 0. `repeated[i]` says whether mapping i repeats
/// offsets of an earlier one. nullopt (and `repeated` all false) when no mapping does: the caller
/// keeps its own.
std::optional<std::vector<mapping_info>> counted_once(const std::vector<mapping_info>& mappings,
                                                      std::vector<bool>& repeated,
                                                      const view_residency* residency = nullptr);

/// The text of the views file of a capture: one line per view, its start in hex, then each
/// resident range of file offsets as " from-to" in hex. Pure.
std::string residency_text(const view_residency& residency);
/// The residency in `text` (residency_text's format) of views among `mappings`; nullopt when it
/// is not that format, names a mapping not among them, or a range is reversed, unsorted or
/// outside the view's offsets. Pure.
std::optional<view_residency> parse_residency(std::string_view text,
                                              const std::vector<mapping_info>& mappings);

}  // namespace hugepage::doctor
