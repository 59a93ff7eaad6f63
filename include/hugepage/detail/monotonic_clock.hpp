// hugepage/detail/monotonic_clock.hpp - the coarse clock that paces re-reads of kernel files.
//
// Facts the library reads on an allocation path (the THP mode, a process's cgroup directories)
// are read at most once a second; the collapse back-off (strategy.hpp) is timed with it too.
// CLOCK_MONOTONIC_COARSE is read from the vDSO without a system call and never goes back.
#pragma once

#include <time.h>

#include <cstdint>

namespace hugepage::detail {

/// Seconds on CLOCK_MONOTONIC_COARSE. Thread-safe.
inline std::int64_t monotonic_seconds() noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::int64_t>(now.tv_sec);
}

}  // namespace hugepage::detail
