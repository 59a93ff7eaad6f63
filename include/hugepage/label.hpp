// hugepage/label.hpp - containers by name: what each one asked for, got, and holds now.
//
//   struct fares_opts : hugepage::default_options { static constexpr const char* label = "fares";
//   }; std::vector<Fare, hugepage::thp_allocator<Fare, fares_opts>> fares; hugepage::arena_options
//   book_opts; book_opts.label = "book"; hugepage::arena nodes(hugepage::strategy::thp(),
//   book_opts);
//
//   hugepage::coverage_of("fares").huge_fraction();   // from the kernel, now
//   for (const hugepage::label_report& l : hugepage::labels()) ...
//
// A labelled allocator records each block it maps (address, length, the backing asked for and
// the one obtained) in the mapping registry (detail/mapping_registry.hpp), and removes it before
// the unmap: one mutex and one hash-table insert or erase per mapped block, nothing for a request
// below the threshold (::operator new). An unlabelled allocator does none of it. Blocks of two
// options types with the same label text are one container. An arena lists its huge pages (not
// the large blocks it passes on to its strategy). The pmr resources take no label.
//
// What backs a label now is read from the kernel, block by block, with backing_of(): between two
// calls huge pages decay (a write after fork() copies 4 KiB, a partial mprotect or munmap splits a
// huge page), and upkeep() (upkeep.hpp) restores them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/detail/label_hooks.hpp"
#include "hugepage/detail/mapping_registry.hpp"
#include "hugepage/stats.hpp"

namespace hugepage {

/// One label's figures: what its live blocks asked for and obtained (kept at allocation), and
/// what backs them now (read from the kernel when the report is made).
struct label_report {
  std::string label;
  std::size_t blocks = 0;  ///< live mapped blocks (an arena's huge pages)
  // Mapped bytes, by what was asked for.
  std::size_t requested_thp = 0;  ///< thp and collapse allocators, THP arenas
  std::size_t requested_hugetlb_2m = 0;
  std::size_t requested_hugetlb_1g = 0;
  // Mapped bytes, by what was obtained at map time (stats.hpp's `backing`).
  std::size_t obtained_hugetlb_2m = 0;
  std::size_t obtained_hugetlb_1g = 0;
  std::size_t obtained_thp = 0;
  std::size_t obtained_base = 0;  ///< THP advice refused
  /// Blocks since start that obtained less than they asked for (a hugetlb request served by THP
  /// or base pages, THP advice refused).
  std::uint64_t fallbacks = 0;
  /// What backs the live blocks now, summed over them (coverage_of(label)).
  backing_report coverage;

  std::size_t mapped_bytes() const noexcept {
    return obtained_hugetlb_2m + obtained_hugetlb_1g + obtained_thp + obtained_base;
  }
};

namespace detail {

inline backing_report coverage_of_blocks(const std::vector<mapping_registry::labelled_view>& blocks,
                                         const char* label) {
  backing_report sum;
  sum.source = backing_source::pagemap_scan;
  sum.exact = true;
  bool first = true;
  for (const mapping_registry::labelled_view& v : blocks) {
    if (label != nullptr && v.label != label) continue;
    add_report(sum, backing_of(v.p, v.block.length), first);
    first = false;
  }
  return sum;
}

}  // namespace detail

/// What backs the live blocks of `label` now, from the kernel (backing_of() over each block,
/// summed; `bytes` is their mapped length). A label with no live block, or never seen, gives an
/// empty report (bytes 0), and so does nullptr (no label: not the sum over every label). A block
/// freed while the report is made may be counted as unmapped.
inline backing_report coverage_of(const char* label) {
  std::vector<detail::mapping_registry::labelled_view> blocks;
  // The registry's snapshot reads nullptr as every label.
  if (label != nullptr) detail::registry().snapshot(label, blocks);
  return detail::coverage_of_blocks(blocks, nullptr);
}

/// Every label seen since start (those whose blocks are all freed too, with zeroes), in the order
/// first seen, with what backs each one now.
inline std::vector<label_report> labels() {
  const auto totals = detail::registry().label_list();
  std::vector<detail::mapping_registry::labelled_view> blocks;
  detail::registry().snapshot(nullptr, blocks);
  std::vector<label_report> out;
  out.reserve(totals.size());
  const auto at = [](backing b) { return static_cast<int>(b); };
  for (const auto& t : totals) {
    label_report r;
    r.label = t.name;
    r.blocks = t.blocks;
    r.requested_thp = t.requested[at(backing::thp)];
    r.requested_hugetlb_2m = t.requested[at(backing::hugetlb_2m)];
    r.requested_hugetlb_1g = t.requested[at(backing::hugetlb_1g)];
    r.obtained_hugetlb_2m = t.obtained[at(backing::hugetlb_2m)];
    r.obtained_hugetlb_1g = t.obtained[at(backing::hugetlb_1g)];
    r.obtained_thp = t.obtained[at(backing::thp)];
    r.obtained_base = t.obtained[at(backing::base)];
    r.fallbacks = t.fallbacks;
    // The snapshot names each block's label by the first pointer seen with its text.
    r.coverage = detail::coverage_of_blocks(blocks, t.name);
    out.push_back(std::move(r));
  }
  return out;
}

/// Counts the mapping [p, p + length), which the caller mapped itself, under `label` as a
/// labelled allocator counts its blocks: in labels() and coverage_of(label), as asking for
/// `asked`, and kept up by upkeep like them, until unlabel_mapping(p). `label` has static storage
/// (a string literal); `p` stays mapped until unlabel_mapping(p) returns. Throws std::bad_alloc
/// (then nothing is counted).
inline void label_mapping(void* p, const char* label, std::size_t length, backing asked) {
  detail::registry().add_labelled(p, label, length, length, asked);
}

/// Stops counting the mapping `p` (label_mapping()), first waiting for an upkeep call working on
/// it (one MADV_COLLAPSE of 2 MiB): `p` may be unmapped once it returns. Nothing when `p` is not
/// counted.
inline void unlabel_mapping(void* p) noexcept { detail::registry().remove_labelled(p); }

}  // namespace hugepage
