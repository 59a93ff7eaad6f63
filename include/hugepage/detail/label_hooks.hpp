// hugepage/detail/label_hooks.hpp - what a labelled allocator or arena adds to allocate and free.
//
// The label is an option (label.hpp): `static constexpr const char* label = "fares";` in the
// allocator's options, `arena_options::label` for an arena. An allocator without one compiles to
// what it was before labels existed: the hooks sit behind `if constexpr`.
#pragma once

#include <cstddef>
#include <type_traits>

#include "hugepage/detail/mapping_registry.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage::detail {

template <class Options, class = void>
struct label_option {
  static constexpr const char* value = nullptr;
};

template <class Options>
struct label_option<Options, std::void_t<decltype(Options::label)>> {
  static constexpr const char* value = Options::label;
};

/// The label of an options (or allocator Config) type: its `label` member, else nullptr.
template <class Options>
inline constexpr const char* label_of = label_option<Options>::value;

/// What a block of `s` asks for (its head, when a 1 GiB strategy gives it a tail).
inline backing asked_backing(const strategy& s) noexcept {
  if (s.how() != method::hugetlb) return backing::thp;
  return s.size() == page_size::huge_1g ? backing::hugetlb_1g : backing::hugetlb_2m;
}

/// Records the block `p` that `s.allocate(bytes, alignment)` returned, when it is mapped (a block
/// below the threshold came from ::operator new and is not recorded). When the record cannot be
/// made (std::bad_alloc) the block is freed and the exception passes on: nothing is lost.
inline void record_labelled(const strategy& s, const char* label, void* p, std::size_t bytes,
                            std::size_t alignment) {
  if (p == nullptr || !s.is_mapped(bytes)) return;
  const strategy::layout l = s.layout_of(bytes);
  try {
    registry().add_labelled(p, label, l.length, l.head, asked_backing(s));
  } catch (...) {
    s.deallocate(p, bytes, alignment);
    throw;
  }
}

/// Forgets the block `p` before `s.deallocate(p, bytes, ...)` unmaps it; waits for an upkeep call
/// working on it (see mapping_registry).
inline void unrecord_labelled(const strategy& s, void* p, std::size_t bytes) noexcept {
  if (p != nullptr && s.is_mapped(bytes)) registry().remove_labelled(p);
}

}  // namespace hugepage::detail
