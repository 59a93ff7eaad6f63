// hugepage/os.hpp - the thin OS layer: map, unmap, advise, collapse, populate.
//
// Contract, stated once: every function is noexcept, allocates nothing, logs nothing and holds no
// policy. Success is an empty std::error_code (or a non-null pointer); failure is the errno the
// kernel returned, as std::generic_category. What to do about a failure (fall back, count, throw)
// is decided one layer up, in strategy.hpp.
//
// Kernel requirements: mmap/munmap/madvise everywhere; MAP_HUGETLB needs CONFIG_HUGETLBFS and a
// pool; MADV_HUGEPAGE needs CONFIG_TRANSPARENT_HUGEPAGE; MADV_POPULATE_WRITE needs Linux 5.14
// (older kernels: we touch the pages instead); MADV_COLLAPSE needs Linux 6.1.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "hugepage/page_size.hpp"

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace hugepage::os {

/// Returns the base page size (4 KiB on x86-64). Thread-safe.
inline std::size_t base_page_size() noexcept {
  static const std::size_t size = [] {
    const long value = ::sysconf(_SC_PAGESIZE);
    return value > 0 ? static_cast<std::size_t>(value) : std::size_t{4096};
  }();
  return size;
}

/// Rounds `value` up to a multiple of the power of two `unit`; returns false on overflow.
inline bool round_up(std::size_t value, std::size_t unit, std::size_t& out) noexcept {
  if (value > SIZE_MAX - (unit - 1)) return false;
  out = (value + unit - 1) & ~(unit - 1);
  return true;
}

namespace detail {
inline std::error_code last_error() noexcept {
  return std::error_code(errno, std::generic_category());
}
}  // namespace detail

namespace detail {
// An anonymous mapping of `length` bytes whose start is a multiple of `alignment`. The kernel only
// aligns large anonymous mappings to 2 MiB since Linux 6.7, and never to 1 GiB, so we over-map by
// `alignment` and trim both ends: the result is one exact mapping that a single munmap releases.
inline void* map_anonymous_aligned(std::size_t length, std::size_t alignment, int prot, int flags,
                                   std::error_code& ec) noexcept {
  ec.clear();
  const std::size_t page = base_page_size();
  if (alignment < page) alignment = page;
  if (length == 0 || length > SIZE_MAX - alignment) {
    ec = std::make_error_code(std::errc::not_enough_memory);
    return nullptr;
  }
  const std::size_t padded = length + alignment - page;
  void* raw = ::mmap(nullptr, padded, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (raw == MAP_FAILED) {
    ec = last_error();
    return nullptr;
  }
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::size_t head = ((start + alignment - 1) & ~(std::uintptr_t{alignment} - 1)) - start;
  const std::size_t tail = padded - head - length;
  char* aligned = static_cast<char*>(raw) + head;
  if (head != 0) ::munmap(raw, head);
  if (tail != 0) ::munmap(aligned + length, tail);
  return aligned;
}
}  // namespace detail

/// Maps `length` bytes (a multiple of `alignment`, itself a power of two at least the base page
/// size) of private anonymous memory whose start is a multiple of `alignment`. Returns nullptr and
/// sets `ec` on failure. One munmap(p, length) releases it.
inline void* map_aligned(std::size_t length, std::size_t alignment, std::error_code& ec) noexcept {
  return detail::map_anonymous_aligned(length, alignment, PROT_READ | PROT_WRITE, 0, ec);
}

/// Reserves `length` bytes of address space whose start is a multiple of `alignment`, without
/// memory: PROT_NONE and MAP_NORESERVE, so it counts against no commit limit
/// (vm.overcommit_memory=2) until parts are mapped over it (MAP_FIXED). Returns nullptr and sets
/// `ec` on failure.
inline void* reserve_aligned(std::size_t length, std::size_t alignment,
                             std::error_code& ec) noexcept {
  return detail::map_anonymous_aligned(length, alignment, PROT_NONE, MAP_NORESERVE, ec);
}

/// Maps `length` bytes (a multiple of the page size) from the hugetlb pool of `size`. A private
/// mapping takes its reservation from the pool here, so a short pool fails now with ENOMEM rather
/// than with SIGBUS at first touch; for that reason MAP_NORESERVE is never used.
///
/// With `at` (a multiple of the page size) the pages replace [at, at + length), which must be a
/// range the caller mapped itself (MAP_FIXED). Where that mmap fails, Linux 6.12 and later leave
/// the old mapping in place; older kernels may leave the range unmapped.
/// With `at` and `replace` false, [at, at + length) must be free and stays untouched when it is
/// not (MAP_FIXED_NOREPLACE): fails with EEXIST, also on kernels before 4.17, which take the
/// address as a hint only.
inline void* map_hugetlb(std::size_t length, page_size size, std::error_code& ec,
                         void* at = nullptr, bool replace = true) noexcept {
  ec.clear();
  const int fixed = at == nullptr ? 0 : replace ? MAP_FIXED : MAP_FIXED_NOREPLACE;
  const int flags =
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift_of(size) << MAP_HUGE_SHIFT) | fixed;
  void* p = ::mmap(at, length, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    ec = detail::last_error();
    return nullptr;
  }
  if (at != nullptr && p != at) {  // a hint taken elsewhere: the range was not free
    ::munmap(p, length);
    ec = std::make_error_code(std::errc::file_exists);
    return nullptr;
  }
  return p;
}

/// Fresh private anonymous memory over [at, at + length), a range the caller mapped itself
/// (MAP_FIXED): what was there is discarded.
inline std::error_code map_anonymous_at(void* at, std::size_t length) noexcept {
  void* p =
      ::mmap(at, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? detail::last_error() : std::error_code{};
}

/// Unmaps exactly [p, p + length). For hugetlb memory `length` must be a multiple of the page
/// size (munmap(2): EINVAL otherwise).
inline std::error_code unmap(void* p, std::size_t length) noexcept {
  return ::munmap(p, length) == 0 ? std::error_code{} : detail::last_error();
}

/// madvise(2) with errno turned into an error_code.
inline std::error_code advise(void* p, std::size_t length, int advice) noexcept {
  return ::madvise(p, length, advice) == 0 ? std::error_code{} : detail::last_error();
}

/// Asks for transparent huge pages on [p, p + length). Advice only: the kernel may still use
/// 4 KiB pages (fragmentation, `enabled=never`, PR_SET_THP_DISABLE) and then says nothing.
inline std::error_code advise_huge(void* p, std::size_t length) noexcept {
  return advise(p, length, MADV_HUGEPAGE);
}

/// Collapses the populated range [p, p + length) into huge pages now (MADV_COLLAPSE, Linux 6.1).
/// EINVAL: the kernel lacks it, or THP is disabled for this range; EAGAIN, ENOMEM, EBUSY:
/// transient, the range stays as it was.
inline std::error_code collapse(void* p, std::size_t length) noexcept {
  return advise(p, length, MADV_COLLAPSE);
}

/// Faults in [p, p + length) for writing so that later accesses take no page fault. Uses
/// MADV_POPULATE_WRITE (Linux 5.14), which reports failure (ENOMEM; EFAULT where a hugetlb page
/// cannot be had or charged) instead of raising SIGBUS. Older kernels: one zero byte per `stride`
/// written through /proc/self/mem, which faults the page in the same reporting way; only where
/// that file cannot be opened are the bytes written directly, which is correct only for fresh
/// anonymous memory - the only memory this library populates.
/// `touch_fallback` false (hugetlb memory, whose touch can raise SIGBUS): where neither way is
/// open, fails with the errno of /proc/self/mem instead of writing directly.
inline std::error_code populate(void* p, std::size_t length, std::size_t stride,
                                bool touch_fallback = true) noexcept {
  std::error_code ec = advise(p, length, MADV_POPULATE_WRITE);
  if (ec != std::errc::invalid_argument) return ec;
  const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (fd < 0 && !touch_fallback) return detail::last_error();
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  for (std::size_t offset = 0; offset < length; offset += stride) {
    if (fd < 0) {
      static_cast<volatile unsigned char*>(p)[offset] = 0;
      continue;
    }
    const unsigned char zero = 0;
    if (::pwrite(fd, &zero, 1, static_cast<off_t>(start + offset)) != 1) {
      ec = detail::last_error();
      ::close(fd);
      return ec;
    }
  }
  if (fd >= 0) ::close(fd);
  return {};
}

}  // namespace hugepage::os
