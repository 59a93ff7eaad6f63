// hugepage/backing_report.hpp - the answer of backing_of(): where the bytes of a range live.
//
// backing.hpp computes it; this header holds only the type, so that the code that fills it in
// (detail/backing_sources.hpp) and the code that reads it need nothing else.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace hugepage {

/// The resident bytes of a range on one NUMA node.
struct node_bytes {
  int node = 0;
  std::size_t bytes = 0;       ///< resident on the node (the zero page excluded)
  std::size_t huge_bytes = 0;  ///< of those, on huge pages (THP or hugetlb)
};

/// Which source a backing_report came from.
enum class backing_source {
  pagemap_scan,  ///< exact, per run of pages, unprivileged (Linux 6.7)
  kpageflags,    ///< exact, per page, needs CAP_SYS_ADMIN
  smaps,         ///< per mapping; exact only for whole mappings and hugetlb
  unavailable,   ///< nothing readable: see `note`
};

/// Returns "pagemap_scan", "kpageflags", "smaps" or "unavailable".
constexpr const char* name_of(backing_source source) noexcept {
  switch (source) {
    case backing_source::pagemap_scan: return "pagemap_scan";
    case backing_source::kpageflags: return "kpageflags";
    case backing_source::smaps: return "smaps";
    case backing_source::unavailable: return "unavailable";
  }
  return "unavailable";
}

/// Where the bytes of a range live. The range is widened to whole base pages. The seven parts
/// `thp + hugetlb_2m + hugetlb_1g + base + not_resident + unmapped + unknown` add up to `bytes`;
/// `thp_shmem`, `thp_file` and `zero_page` are shares of the part named in their comment.
///
/// Unknown is never zero: where no source could be read (/proc/PID/smaps and pagemap closed to
/// this process, a kernel without them), the bytes are `unknown`, `source` is `unavailable`, and
/// huge_fraction() is NaN, which no comparison takes for a share (`known()` says whether every
/// byte was read). A sum of reports (coverage_of) with one unknown part is unknown the same way.
struct backing_report {
  std::size_t bytes = 0;         ///< bytes examined
  std::size_t thp = 0;           ///< on PMD-mapped transparent huge pages (anon, shmem or file)
  std::size_t hugetlb_2m = 0;    ///< on 2 MiB hugetlb pages
  std::size_t hugetlb_1g = 0;    ///< on 1 GiB hugetlb pages
  std::size_t base = 0;          ///< resident on base pages
  std::size_t not_resident = 0;  ///< mapped, not faulted in, swapped out, or on the zero page
  std::size_t unmapped = 0;      ///< not mapped at all
  std::size_t unknown = 0;       ///< not read: no source could say (see the note)
  std::size_t thp_shmem = 0;     ///< of `thp`: shmem THP (memfd, tmpfs, shared anonymous)
  std::size_t thp_file = 0;      ///< of `thp`: page-cache THP of regular files
  std::size_t zero_page = 0;     ///< of `not_resident`: read-faulted, on the shared zero page
  backing_source source = backing_source::unavailable;
  bool exact = false;  ///< false: THP bytes prorated from smaps, or source unavailable
  /// Why the report is approximate or unavailable, or why a better source was passed over
  /// ("PAGEMAP_SCAN unavailable: ..."); empty when the first source answered exactly.
  std::string note;
  /// The resident bytes per NUMA node, from the kernel (move_pages, which moves nothing): one
  /// entry per node holding some, in node order. `bytes` is exact. `huge_bytes` is exact where the
  /// huge pages are known page by page (PAGEMAP_SCAN, Linux 6.7; kpageflags, the source as root)
  /// or every resident byte is huge; elsewhere (the smaps source with resident bytes on more than
  /// one node) it is `huge_bytes()` shared out by each node's bytes: `nodes_estimated` is true and
  /// `nodes_note` says so. Empty when the kernel could not be asked (`nodes_note` says why).
  /// Where move_pages names no node for a present page (Linux 6.1 for pages NUMA balancing has
  /// marked), the node of its frame is read from sysfs's memory blocks (root); bytes left without
  /// one are in `nodes_unattributed`, not in `nodes`.
  std::vector<node_bytes> nodes;
  /// Resident bytes on no entry of `nodes`: the kernel named no node for them (`nodes_note` says
  /// why); 0 otherwise.
  std::size_t nodes_unattributed = 0;
  /// Why `nodes` is empty or its huge bytes estimated; "" otherwise.
  std::string nodes_note;
  /// `huge_bytes` of `nodes` are an estimate, not read from the kernel (the metrics export them as
  /// NaN, null in the JSON).
  bool nodes_estimated = false;

  /// Resident bytes on `node`; 0 for a node not in `nodes`.
  std::size_t bytes_on_node(int node) const noexcept {
    for (const node_bytes& n : nodes) {
      if (n.node == node) return n.bytes;
    }
    return 0;
  }
  /// Huge bytes on `node`; 0 for a node not in `nodes`.
  std::size_t huge_bytes_on_node(int node) const noexcept {
    for (const node_bytes& n : nodes) {
      if (n.node == node) return n.huge_bytes;
    }
    return 0;
  }

  std::size_t huge_bytes() const noexcept { return thp + hugetlb_2m + hugetlb_1g; }
  std::size_t resident_bytes() const noexcept { return huge_bytes() + base; }
  /// Whether every byte was read (`unknown` is 0).
  bool known() const noexcept { return unknown == 0; }
  /// Share of the examined bytes that is on huge pages, 0..1; NaN where some bytes are unknown
  /// (a dashboard must not read "could not look" as "nothing is huge").
  double huge_fraction() const noexcept {
    if (unknown != 0) return std::numeric_limits<double>::quiet_NaN();
    return bytes == 0 ? 0.0 : static_cast<double>(huge_bytes()) / static_cast<double>(bytes);
  }
};

namespace detail {

// Adds `bytes` and `huge` on `node` to `nodes`, kept in node order.
inline void add_node_bytes(std::vector<node_bytes>& nodes, int node, std::size_t bytes,
                           std::size_t huge) {
  auto at = nodes.begin();
  while (at != nodes.end() && at->node < node) ++at;
  if (at == nodes.end() || at->node != node) at = nodes.insert(at, node_bytes{node, 0, 0});
  at->bytes += bytes;
  at->huge_bytes += huge;
}

// Adds `part` (a report of other bytes) to `sum`. The sum is exact when every part is; its source
// is the first part's, and its note the first note seen.
inline void add_report(backing_report& sum, const backing_report& part, bool first) {
  sum.bytes += part.bytes;
  sum.thp += part.thp;
  sum.hugetlb_2m += part.hugetlb_2m;
  sum.hugetlb_1g += part.hugetlb_1g;
  sum.base += part.base;
  sum.not_resident += part.not_resident;
  sum.unmapped += part.unmapped;
  sum.unknown += part.unknown;
  sum.thp_shmem += part.thp_shmem;
  sum.thp_file += part.thp_file;
  sum.zero_page += part.zero_page;
  if (first) {
    sum.source = part.source;
    sum.exact = part.exact;
  } else {
    sum.exact = sum.exact && part.exact;
  }
  if (sum.note.empty()) sum.note = part.note;
  for (const node_bytes& n : part.nodes) add_node_bytes(sum.nodes, n.node, n.bytes, n.huge_bytes);
  sum.nodes_unattributed += part.nodes_unattributed;
  // An estimate's note before any other: it says why the sum is one.
  if (sum.nodes_note.empty() || (part.nodes_estimated && !sum.nodes_estimated)) {
    sum.nodes_note = part.nodes_note;
  }
  sum.nodes_estimated = sum.nodes_estimated || part.nodes_estimated;
}

}  // namespace detail

}  // namespace hugepage
