// tools/doctor/mapping_coverage.cpp - exact huge bytes per mapping, beside smaps' counters.
#include <fmt/format.h>

#include <algorithm>

#include "hugepage/backing.hpp"
#include "report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

std::vector<mapping_coverage> coverage_of(pid_t pid, const std::vector<mapping_info>& mappings) {
  std::vector<backing_report> exact = detail::backing_of_mappings(pid, mappings);
  std::vector<mapping_coverage> out;
  out.reserve(mappings.size());
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const mapping_info& m = mappings[i];
    mapping_coverage c;
    c.mapping = m;
    c.exact = std::move(exact[i]);
    c.smaps_huge = m.anon_huge + m.shmem_huge + m.file_huge + m.private_hugetlb + m.shared_hugetlb;
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
  const backing_source source = rows.front()->exact.source;
  std::string out = fmt::format("\nHuge pages per mapping (exact, from {}{}):\n", name_of(source),
                                rows.front()->exact.exact ? "" : ", approximate");
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
