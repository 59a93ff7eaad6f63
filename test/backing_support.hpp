// test/backing_support.hpp - what the backing_of() tests (backing_test, backing_sources_test)
// share: isolated mappings built by hand, a THP region, a report described and checked.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>

#include "hugepage/backing.hpp"
#include "hugepage/os.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace hugepage::test {

inline std::size_t page() { return os::base_page_size(); }

// Maps `length` bytes of private anonymous memory, 2 MiB-aligned, far below the kernel's mmap area
// and with a gap on each side: the VMA merges with nothing, and memory that backing_of() itself
// allocates (its smaps text can be big enough for malloc to mmap it) cannot land in a hole we
// punch. Falls back to os::map_aligned where the address space is too small for the hint.
inline void* map_isolated(std::size_t length) {
  static std::uintptr_t next = std::uintptr_t{0x3100} << 32;  // 49 TiB: above ASan's shadow
  for (int attempt = 0; attempt < 64; ++attempt) {
    void* hint = reinterpret_cast<void*>(next);
    const std::size_t align = std::max(kHuge, thp_page_bytes());  // a PMD of any page size
    next += (length + 64 * kMiB + align - 1) & ~(align - 1);
    void* p = ::mmap(hint, length, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == hint) return p;
    if (p != MAP_FAILED) ::munmap(p, length);  // kernels before 4.17 treat the flag as a hint
    if (p == MAP_FAILED && errno != EEXIST) break;
  }
  std::error_code ec;
  return os::map_aligned(length, std::max(kHuge, thp_page_bytes()), ec);
}

// Writes one byte in each base page of [p, p + length) with `stride` base pages between writes.
inline void touch(void* p, std::size_t length, std::size_t stride_pages = 1) {
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (std::size_t offset = 0; offset < length; offset += stride_pages * page()) {
    bytes[offset] = 1;
  }
}

// The smaps record of the mapping that contains `p` (an empty record when there is none).
inline mapping_info vma_of(const void* p) {
  std::error_code ec;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (const mapping_info& m : read_smaps(0, ec)) {
    if (m.start <= address && address < m.end) return m;
  }
  return {};
}

inline std::string describe(const backing_report& r) {
  return "bytes " + std::to_string(r.bytes) + ", thp " + std::to_string(r.thp) + ", hugetlb_2m " +
         std::to_string(r.hugetlb_2m) + ", hugetlb_1g " + std::to_string(r.hugetlb_1g) + ", base " +
         std::to_string(r.base) + ", not_resident " + std::to_string(r.not_resident) +
         ", unmapped " + std::to_string(r.unmapped) + ", shmem " + std::to_string(r.thp_shmem) +
         ", zero " + std::to_string(r.zero_page) + ", source " + name_of(r.source) + ", exact " +
         (r.exact ? "true" : "false") + ", note '" + r.note + "'";
}

// The parts of a report add up to the bytes examined.
inline void expect_consistent(const backing_report& r) {
  EXPECT_EQ(r.thp + r.hugetlb_2m + r.hugetlb_1g + r.base + r.not_resident + r.unmapped, r.bytes)
      << describe(r);
}

// Whether this kernel answers PAGEMAP_SCAN (Linux 6.7): one scan of a page of our own stack.
inline bool scan_supported() {
  static const bool supported = [] {
    int local = 1;
    const backing_report r = backing_of(0, &local, sizeof local, backing_source::pagemap_scan);
    return r.source == backing_source::pagemap_scan;
  }();
  return supported;
}

// The source backing_of() picks as root: PAGEMAP_SCAN where the kernel has it.
inline backing_source best_exact_source() {
  return scan_supported() ? backing_source::pagemap_scan : backing_source::kpageflags;
}

#define HUGEPAGE_REQUIRE_ROOT()                                                              \
  do {                                                                                       \
    if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("needs root for /proc/kpageflags and PFNs"); \
  } while (0)

// A THP-advised, fully touched region of `length` at an isolated address. Skips (or fails under
// HUGEPAGE_REQUIRE=1) when the kernel did not give huge pages: that is fragmentation or THP
// settings, not backing_of().
class ThpRegion {
 public:
  explicit ThpRegion(std::size_t length) : length_(length), p_(map_isolated(length)) {
    if (p_ == nullptr) return;
    os::advise_huge(p_, length_);
    touch(p_, length_);
  }
  ~ThpRegion() {
    if (p_ != nullptr) os::unmap(p_, length_);
  }
  ThpRegion(const ThpRegion&) = delete;
  ThpRegion& operator=(const ThpRegion&) = delete;
  void* get() const { return p_; }
  /// AnonHugePages of the region's VMA, from smaps: the kernel's own account.
  std::size_t anon_huge() const { return vma_of(p_).anon_huge; }

 private:
  std::size_t length_;
  void* p_;
};

}  // namespace hugepage::test
