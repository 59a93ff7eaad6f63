// hugepage/detail/mapping_steps.hpp - steps strategy.hpp composes into its policy: pool pages at
// a larger alignment than mmap gives, and what THP-advised memory will be backed by.
#pragma once

#include <sys/prctl.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <system_error>

#include "hugepage/detail/monotonic_clock.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/thp_mode.hpp"

namespace hugepage::detail {

using hugepage::thp_disabled_for_process;  // thp_mode.hpp

/// mmap aligns a hugetlb mapping to its page size and no further. For a larger alignment: find
/// a free range so aligned (a reservation that holds no memory), free it and map the pool pages
/// exactly there. MAP_FIXED_NOREPLACE never replaces what another thread may have mapped there
/// in between; that race (EEXIST) is retried with a fresh range. nullptr and `ec` on failure.
inline void* map_hugetlb_aligned(std::size_t length, std::size_t alignment, page_size size,
                                 std::error_code& ec) noexcept {
  for (int attempt = 0; attempt < 3; ++attempt) {
    void* range = os::reserve_aligned(length, alignment, ec);
    if (range == nullptr) return nullptr;
    os::unmap(range, length);
    void* p = os::map_hugetlb(length, size, ec, range, /*replace=*/false);
    if (p != nullptr || ec != std::errc::file_exists) return p;
  }
  return nullptr;
}

/// Whether THP advice is accepted but cannot be honoured: the effective PMD-size THP mode is
/// never (read_thp_mode(): the per-size switch, else the top-level `enabled`; read at most once a
/// second), or this process has PR_SET_THP_DISABLE without the exception for advised memory
/// (Linux 6.18, PR_THP_DISABLE_EXCEPT_ADVISED). madvise succeeds either way.
inline bool thp_refused() noexcept {
  if (thp_disabled_for_process()) return true;
  static std::atomic<std::int64_t> checked_at{-1};
  static std::atomic<bool> never{false};
  constexpr auto relaxed = std::memory_order_relaxed;
  const std::int64_t now = monotonic_seconds();
  if (checked_at.load(relaxed) != now) {
    never.store(read_thp_mode() == thp_mode::never, relaxed);
    checked_at.store(now, relaxed);
  }
  return never.load(relaxed);
}

/// Advises `length` bytes at `p` for THP and returns what will back them: base pages where the
/// kernel refuses the advice (EINVAL without CONFIG_TRANSPARENT_HUGEPAGE) or THP is off
/// (thp_refused), THP otherwise.
inline backing advise_thp(void* p, std::size_t length) noexcept {
  return os::advise_huge(p, length) || thp_refused() ? backing::base : backing::thp;
}

}  // namespace hugepage::detail
