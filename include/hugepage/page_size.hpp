// hugepage/page_size.hpp - the huge page sizes the library can ask the kernel for.
//
// x86-64 offers 2 MiB (PMD) and 1 GiB (PUD) pages; arm64 with a 4 KiB granule offers the same two.
// Transparent huge pages are always PMD-sized; hugetlb pools exist per size under
// /sys/kernel/mm/hugepages/hugepages-<kB>kB/.
#pragma once

#include <cstddef>

namespace hugepage {

/// Binary byte units: the one definition. The library, the doctor, the benchmark and the tests
/// name these rather than define their own (a size written inline, 1 << 30, is no definition).
namespace units {
inline constexpr std::size_t kib = std::size_t{1} << 10;
inline constexpr std::size_t mib = std::size_t{1} << 20;
inline constexpr std::size_t gib = std::size_t{1} << 30;
}  // namespace units

/// A huge page size.
enum class page_size : unsigned char {
  huge_2m,  ///< 2 MiB: a PMD entry. THP and the default hugetlb pool.
  huge_1g,  ///< 1 GiB: a PUD entry. hugetlb only; the pool is usually reserved at boot.
};

/// Returns the size of one page of `size`, in bytes.
constexpr std::size_t bytes_of(page_size size) noexcept {
  return size == page_size::huge_1g ? units::gib : 2 * units::mib;
}

/// Returns log2 of the page size: the shift that `MAP_HUGE_SHIFT` encodes.
constexpr int shift_of(page_size size) noexcept { return size == page_size::huge_1g ? 30 : 21; }

/// Returns "2 MiB" or "1 GiB".
constexpr const char* name_of(page_size size) noexcept {
  return size == page_size::huge_1g ? "1 GiB" : "2 MiB";
}

}  // namespace hugepage
