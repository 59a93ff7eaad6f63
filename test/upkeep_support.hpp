// upkeep_support.hpp - what the upkeep and metrics tests share: labelled THP blocks that start
// fully huge, the skip when THP or MADV_COLLAPSE is missing, and an upkeep_result in words.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "hugepage/allocator.hpp"
#include "hugepage/collapse.hpp"
#include "hugepage/system.hpp"
#include "hugepage/upkeep.hpp"
#include "support.hpp"

namespace hugepage::test {

// The chunk upkeep restores and fork_and_write splits: the kernel's PMD size.
inline const std::size_t upkeep_chunk = thp_page_bytes();

template <class Options>
using labelled = hugepage::thp_allocator<char, Options>;

inline std::string describe(const upkeep_result& r) {
  std::string s =
      "blocks " + std::to_string(r.blocks) + ", examined " + std::to_string(r.examined_bytes) +
      ", decayed " + std::to_string(r.decayed_bytes) + ", uncertain " +
      std::to_string(r.uncertain) + ", restored " + std::to_string(r.restored) + ", already_huge " +
      std::to_string(r.already_huge) + ", refused " + std::to_string(r.refused) + ", left " +
      std::to_string(r.left) + ", gone " + std::to_string(r.gone) + ", skipped_hugetlb " +
      std::to_string(r.skipped_hugetlb) + ", skipped_base " + std::to_string(r.skipped_base) +
      ", vanished " + std::to_string(r.vanished) + ", calls " + std::to_string(r.calls) +
      ", thp_disabled " + std::to_string(r.thp_disabled) + ", backed_off " +
      std::to_string(r.backed_off) + ", elapsed " + std::to_string(r.elapsed.count() / 1000) +
      " us, examining " + std::to_string(r.examining.count() / 1000) + " us, slowest chunk " +
      std::to_string(r.slowest_chunk.count() / 1000) + " us, refusals {";
  for (const auto& x : r.refusals) {
    if (x.chunks != 0) s += " errno " + std::to_string(x.error) + ": " + std::to_string(x.chunks);
  }
  return s + " }" + (r.scan_error ? ", scan error " + r.scan_error.message() : "");
}

// Skips unless advised memory gets huge pages at first touch and MADV_COLLAPSE works.
#define REQUIRE_THP_AND_COLLAPSE()                                                      \
  do {                                                                                  \
    if (hugepage::read_thp_mode() == hugepage::thp_mode::never) {                       \
      HUGEPAGE_SKIP_OR_FAIL("THP is off (effective 2 MiB mode never)");                 \
    }                                                                                   \
    if (hugepage::probe_collapse() != hugepage::collapse_support::works) {              \
      HUGEPAGE_SKIP_OR_FAIL("MADV_COLLAPSE does not work here (Linux 6.1+ is needed)"); \
    }                                                                                   \
  } while (0)

// A labelled block of `bytes`, every base page's first byte written (its index), huge where the
// kernel allows at first touch and collapsed where it did not (so every test starts from full
// coverage).
template <class Options>
class Block {
 public:
  explicit Block(std::size_t bytes) : bytes_(bytes) {
    p_ = labelled<Options>().allocate(bytes);
    for (std::size_t i = 0; i < bytes; i += kPage) p_[i] = static_cast<char>(i / kPage);
    hugepage::collapse(p_, bytes);
  }
  ~Block() { labelled<Options>().deallocate(p_, bytes_); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  char* get() const { return p_; }
  std::size_t size() const { return bytes_; }
  bool intact() const {
    for (std::size_t i = 0; i < bytes_; i += kPage) {
      if (p_[i] != static_cast<char>(i / kPage + (i % upkeep_chunk == 0 ? 1 : 0))) return false;
    }
    return true;
  }

 private:
  std::size_t bytes_;
  char* p_;
};

}  // namespace hugepage::test
