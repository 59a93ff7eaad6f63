// tools/doctor/mapping_coverage.hpp - each mapping's exact coverage from the page tables
// (mapping_coverage.cpp).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "hugepage/process_view.hpp"
#include "hugepage/smaps.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

/// The exact coverage of each of `mappings` (the parsed smaps of the process of `target`),
/// without reading smaps again: from the page tables where smaps counts a huge page or the mapping
/// is hugetlb, from smaps itself elsewhere (nothing huge to find: resident is Rss, source smaps).
std::vector<mapping_coverage> coverage_of(const process_view& target,
                                          const std::vector<mapping_info>& mappings);

/// The `top` entries of `coverage` with the most resident bytes (exact), largest first; entries
/// with nothing resident are left out. Pure.
std::vector<mapping_coverage> top_coverage(std::vector<mapping_coverage> coverage, std::size_t top);

/// The `top` mappings with the most resident bytes: exact huge bytes per mapping, with '!' where
/// smaps' per-mapping counters say otherwise. Empty when smaps is unreadable.
std::string render_coverage(const std::vector<mapping_coverage>& mappings, std::size_t top);

}  // namespace hugepage::doctor
