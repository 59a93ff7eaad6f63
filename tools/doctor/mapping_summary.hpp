// tools/doctor/mapping_summary.hpp - summarising parsed smaps into a process report
// (mapping_summary.cpp).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "hugepage/page_size.hpp"
#include "hugepage/smaps.hpp"
#include "numa_files.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

/// Whether the smaps records `head` and `next` are two parts of one block of the 1 GiB
/// cascade (include/hugepage/strategy.hpp: whole 1 GiB pages over the head of a 1 GiB-aligned
/// range, the rest mapped right after it on 2 MiB pages), to be listed as one entry. True only
/// when all of these hold:
///   - `next` starts where `head` ends, and both are private mappings ('p') with the same
///     permissions;
///   - `head` is a hugetlb mapping starting on a boundary of its own page size;
///   - `next` is shorter than one of `head`'s pages (a tail is what did not fill one more page);
///   - `next` is a private hugetlb mapping of a smaller page size (the 2 MiB pool), or a private
///     anonymous mapping (unnamed or [anon:...]) that is not hugetlb and is advised
///     MADV_HUGEPAGE (the THP tail the library maps when the 2 MiB pool is short).
/// So two ordinary anonymous mappings never join (neither is hugetlb), shared memory never joins,
/// and neither do two hugetlb mappings of one page size, a heap or stack, or a neighbour as long
/// as a head page. An unrelated small mapping can still be joined in the rare case that it
/// meets every rule (one that begins exactly where a 1 GiB mapping ends); smaps cannot tell it
/// apart. Pure.
bool joins_cascade(const mapping_info& head, const mapping_info& next) noexcept;

/// Summarises parsed smaps (library: parse_smaps) into a process report: totals, the `top`
/// largest anonymous mappings, the parts of a cascade block joined into one entry
/// (joins_cascade()). `thp_page_bytes` is the PMD THP size the THP shares are reported in.
/// Pure.
process_report summarize_mappings(const std::vector<mapping_info>& mappings, std::size_t top,
                                  std::size_t thp_page_bytes = 2 * units::mib);

/// The per-node split numa_maps gives on a machine with the one NUMA node `node`, from the smaps
/// counters of `mappings` (numa_maps walks the page tables again: on a large process as long as
/// smaps). All resident pages and hugetlb pages; empty when nothing is resident. Pure.
std::map<int, numa_usage> numa_of_one_node(const std::vector<mapping_info>& mappings, int node);

}  // namespace hugepage::doctor
