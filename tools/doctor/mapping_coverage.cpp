// tools/doctor/mapping_coverage.cpp - exact huge bytes per mapping, beside smaps' counters.
#include "mapping_coverage.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "format.hpp"
#include "hugepage/backing.hpp"
#include "process_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

// smaps' huge bytes of `m`: the PMD-mapped THP of each kind, and hugetlb pages.
std::size_t smaps_huge_of(const mapping_info& m) {
  return m.anon_huge + m.shmem_huge + m.file_huge + m.private_hugetlb + m.shared_hugetlb;
}

// Whether the page tables of `m` need walking to know its huge bytes. smaps counts every huge
// page PAGEMAP_SCAN (or kpageflags) can find (a PMD-mapped THP of any kind: AnonHugePages,
// ShmemPmdMapped, FilePmdMapped; hugetlb pages), so where it counts none there is nothing huge
// to find, and the walk (a second pass over the mapping's page tables, the longest part of a
// report on a large process with base pages) is skipped. [vsyscall] lies outside the page tables:
// the walk counts it as unmapped, so it keeps that path.
bool needs_walk(const mapping_info& m) {
  return smaps_huge_of(m) != 0 || m.is_hugetlb() || m.name == "[vsyscall]";
}

// The coverage of `m` from its smaps record alone, for a mapping with no huge page there. The
// fields shown (resident, huge, smaps' huge, the '!' marker) are smaps' own view, read in the
// same pass over the page tables as every other smaps figure of the report:
//   - resident is Rss, all of it on base pages. Rss leaves out the zero page (as the walk does)
//     and pages with no struct page (VM_PFNMAP, special PTEs of VM_MIXEDMAP device mappings), which
//     the walk counted as resident base pages when they were mapped;
//   - huge is 0, and so is smaps' count: they cannot disagree, so no '!'. A THP that appears
//     between the smaps read and the walk, or a PMD mapping smaps does not count (fsdax), would
//     have shown as a '!'; the report is of the moment smaps was read;
//   - the zero page is not told apart: what is not Rss is counted not resident.
// The source is smaps, and it is exact: whole-mapping counters, nothing prorated.
backing_report from_smaps(const mapping_info& m) {
  backing_report r;
  r.bytes = m.size();
  r.base = std::min(m.rss, r.bytes);
  r.not_resident = r.bytes - r.base;
  r.source = backing_source::smaps;
  r.exact = true;
  return r;
}

}  // namespace

std::vector<mapping_coverage> coverage_of(const process_view& target,
                                          const std::vector<mapping_info>& mappings) {
  std::vector<mapping_info> walked;
  for (const mapping_info& m : mappings) {
    if (needs_walk(m)) walked.push_back(m);
  }
  std::vector<backing_report> exact = backing_of_mappings(target, walked);
  std::vector<mapping_coverage> out;
  out.reserve(mappings.size());
  std::size_t next = 0;  // the next report of `exact`
  for (const mapping_info& m : mappings) {
    mapping_coverage c;
    c.mapping = m;
    c.exact = needs_walk(m) ? std::move(exact[next++]) : from_smaps(m);
    c.smaps_huge = smaps_huge_of(m);
    c.smaps_disagrees = c.exact.exact && c.exact.huge_bytes() != c.smaps_huge;
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<mapping_coverage> top_coverage(std::vector<mapping_coverage> coverage,
                                           std::size_t top) {
  coverage.erase(
      std::remove_if(coverage.begin(), coverage.end(),
                     [](const mapping_coverage& c) { return c.exact.resident_bytes() == 0; }),
      coverage.end());
  std::stable_sort(coverage.begin(), coverage.end(), [](const auto& a, const auto& b) {
    return a.exact.resident_bytes() > b.exact.resident_bytes();
  });
  if (coverage.size() > top) coverage.resize(top);
  return coverage;
}

std::string render_coverage(const std::vector<mapping_coverage>& mappings, std::size_t top) {
  std::vector<const mapping_coverage*> rows;
  for (const mapping_coverage& c : mappings) {
    if (c.exact.resident_bytes() != 0) rows.push_back(&c);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return a->exact.resident_bytes() > b->exact.resident_bytes();
  });
  if (rows.size() > top) rows.resize(top);
  if (rows.empty()) return {};
  // The rows of mappings smaps counts no huge page in come from smaps (coverage_of); the others
  // from the page tables, whose source the title names.
  const mapping_coverage* walked = nullptr;
  bool from_smaps = false, exact = true;
  for (const mapping_coverage* c : rows) {
    exact = exact && c->exact.exact;
    if (c->exact.source == backing_source::smaps) {
      from_smaps = true;
    } else if (walked == nullptr) {
      walked = c;
    }
  }
  std::string out =
      fmt::format("\nHuge pages per mapping (exact, from {}{}{}):\n",
                  name_of(walked != nullptr ? walked->exact.source : backing_source::smaps),
                  walked != nullptr && from_smaps ? "; smaps where it counts no huge page" : "",
                  exact ? "" : ", approximate");
  out += fmt::format("  {:<29} {:>10} {:>10} {:>10}  {}\n", "mapping", "resident", "huge", "smaps",
                     "name");
  bool any = false;
  for (const mapping_coverage* c : rows) {
    any = any || c->smaps_disagrees;
    out += fmt::format("  {:#014x}-{:#014x} {:>10} {:>10} {:>10}{} {}\n", c->mapping.start,
                       c->mapping.end, format_bytes(c->exact.resident_bytes()),
                       format_bytes(c->exact.huge_bytes()), format_bytes(c->smaps_huge),
                       c->smaps_disagrees ? "!" : " ",
                       printable(c->mapping.name.empty() ? "[anon]" : c->mapping.name));
  }
  if (any) {
    out +=
        "  ! smaps' counters differ from the page tables (pages changed between the two reads, "
        "or THP the counters do not show)\n";
  }
  return out;
}

}  // namespace hugepage::doctor
