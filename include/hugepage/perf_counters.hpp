// hugepage/perf_counters.hpp - read the TLB, cycle and page-fault counters of the calling thread.
//
//   hugepage::perf_counters counters;            // every event this machine can count
//   counters.start();
//   run_lookups();
//   const hugepage::perf_reading r = counters.stop();
//   if (const auto walks = r[hugepage::perf_event::dtlb_load_misses]) report(*walks / lookups);
//   else std::puts(counters.unavailable_reason(hugepage::perf_event::dtlb_load_misses).c_str());
//
// Built on perf_event_open(2), counting the calling thread on any CPU:
//  - The hardware events (dTLB loads, dTLB load misses, iTLB load misses, cycles, instructions)
//    form one group, read at once with PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED |
//    TOTAL_TIME_RUNNING and scaled by enabled / running when the PMU multiplexed the group.
//  - The page-fault counter is a software event in a group of its own: a software event in a
//    hardware group cannot open when the hardware leader cannot (no PMU in a VM), and page faults
//    are exactly what a VM without a PMU can still count.
// An event that cannot be opened is reported as unavailable with the reason (errno included) and
// reads as an empty optional, never as zero. Nothing here throws for a missing counter.
//
// Generic events differ by vendor: on Intel, dTLB-loads counts retired loads and dTLB-load-misses
// counts completed page walks; on AMD they count L1 DTLB misses and L2 DTLB misses (which lead to
// page walks). name_of() says so. Page-walk cycles need model-specific raw events: see
// perf_events_pfm.hpp (optional, libpfm4).
//
// Privilege: perf_event_paranoid >= 2 allows only user-space counting to processes without
// CAP_PERFMON (Linux 5.8) or CAP_SYS_ADMIN, so exclude_kernel is set then; Debian's
// perf_event_paranoid = 3 forbids perf_event_open for such processes entirely. Container runtimes
// often block the syscall with seccomp (EPERM). Kernel: Linux 2.6.31; 3.x for the generic events.
#pragma once

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hugepage/detail/errno_text.hpp"
#include "hugepage/detail/perf_events.hpp"

namespace hugepage {

/// The events perf_counters can read.
enum class perf_event : unsigned char {
  dtlb_loads,        ///< generic dTLB-loads (Intel: retired loads; AMD: L1 DTLB misses)
  dtlb_load_misses,  ///< generic dTLB-load-misses (Intel: page walks; AMD: L2 DTLB misses)
  itlb_load_misses,  ///< generic iTLB-load-misses
  cycles,            ///< CPU cycles
  instructions,      ///< retired instructions
  page_faults,       ///< software event: page faults (minor and major)
};

/// Number of perf_event values.
inline constexpr std::size_t perf_event_count = 6;

/// Returns an honest label for `e`, e.g. "dTLB-load-misses (page walks on Intel)".
inline const char* name_of(perf_event e) noexcept {
  switch (e) {
    case perf_event::dtlb_loads:
      return "dTLB-loads (retired loads on Intel, L1 DTLB misses on AMD)";
    case perf_event::dtlb_load_misses:
      return "dTLB-load-misses (page walks on Intel, L2 DTLB misses on AMD)";
    case perf_event::itlb_load_misses: return "iTLB-load-misses";
    case perf_event::cycles: return "cycles";
    case perf_event::instructions: return "instructions";
    case perf_event::page_faults: return "page-faults";
  }
  return "unknown";
}

/// Returns a short identifier for `e` ("dtlb_load_misses"), for column names and JSON keys.
inline const char* short_name_of(perf_event e) noexcept {
  switch (e) {
    case perf_event::dtlb_loads: return "dtlb_loads";
    case perf_event::dtlb_load_misses: return "dtlb_load_misses";
    case perf_event::itlb_load_misses: return "itlb_load_misses";
    case perf_event::cycles: return "cycles";
    case perf_event::instructions: return "instructions";
    case perf_event::page_faults: return "page_faults";
  }
  return "unknown";
}

/// Whether `e` needs the hardware PMU (everything except page faults).
constexpr bool is_hardware(perf_event e) noexcept { return e != perf_event::page_faults; }

/// One reading: a value per event, scaled for multiplexing; an empty optional when the event was
/// not counted (unavailable, not requested, or never scheduled on the PMU).
struct perf_reading {
  std::array<std::optional<double>, perf_event_count> values;

  std::optional<double> operator[](perf_event e) const noexcept {
    return values[static_cast<std::size_t>(e)];
  }

  /// Time the hardware group (or, without one, the page-fault event) was enabled and running.
  /// running < enabled means the PMU multiplexed the group and the values are estimates.
  double time_enabled_ns = 0, time_running_ns = 0;
};

namespace detail {

/// The perf_event_attr that counts `e`, before the read format and the exclusions are set.
inline perf_event_attr attr_of(perf_event e) noexcept {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  const auto cache = [](std::uint64_t id, std::uint64_t result) {
    return id | (std::uint64_t{PERF_COUNT_HW_CACHE_OP_READ} << 8) | (result << 16);
  };
  switch (e) {
    case perf_event::dtlb_loads:
      attr.type = PERF_TYPE_HW_CACHE;
      attr.config = cache(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_RESULT_ACCESS);
      break;
    case perf_event::dtlb_load_misses:
      attr.type = PERF_TYPE_HW_CACHE;
      attr.config = cache(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_RESULT_MISS);
      break;
    case perf_event::itlb_load_misses:
      attr.type = PERF_TYPE_HW_CACHE;
      attr.config = cache(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_RESULT_MISS);
      break;
    case perf_event::cycles:
      attr.type = PERF_TYPE_HARDWARE;
      attr.config = PERF_COUNT_HW_CPU_CYCLES;
      break;
    case perf_event::instructions:
      attr.type = PERF_TYPE_HARDWARE;
      attr.config = PERF_COUNT_HW_INSTRUCTIONS;
      break;
    case perf_event::page_faults:
      attr.type = PERF_TYPE_SOFTWARE;
      attr.config = PERF_COUNT_SW_PAGE_FAULTS;
      break;
  }
  return attr;
}

}  // namespace detail

/// The perf_event_attr (perf_event_open(2)) that counts `e`: its type, config and size set, the
/// rest zero (no read format, no exclusions: the caller sets those). Pure.
using detail::attr_of;

/// Counts events of the calling thread between start() and stop(). Create it on the thread it
/// measures. Not thread-safe; movable, not copyable. Never throws for an unavailable event: that
/// event reads as an empty optional and unavailable_reason() says why.
class perf_counters {
 public:
  /// Opens every event this machine can count.
  perf_counters()
      : perf_counters(std::vector<perf_event>{perf_event::dtlb_loads, perf_event::dtlb_load_misses,
                                              perf_event::itlb_load_misses, perf_event::cycles,
                                              perf_event::instructions, perf_event::page_faults}) {}

  /// Opens only `events`; the others are unavailable with the reason "not requested".
  explicit perf_counters(const std::vector<perf_event>& events) {
    for (auto& reason : reasons_) reason = "not requested";
    for (auto& fd : fds_) fd = -1;
    for (auto& id : ids_) id = 0;
    const std::optional<int> paranoid = detail::perf_event_paranoid();
    exclude_kernel_ = !detail::perf_privileged() && paranoid && *paranoid >= 2;
    for (const perf_event e : events) {
      if (is_hardware(e)) open_one(e, /*group=*/true);
    }
    for (const perf_event e : events) {
      if (!is_hardware(e)) open_one(e, /*group=*/false);
    }
  }

  perf_counters(const perf_counters&) = delete;
  perf_counters& operator=(const perf_counters&) = delete;
  perf_counters(perf_counters&& other) noexcept { take(other); }
  perf_counters& operator=(perf_counters&& other) noexcept {
    if (this != &other) {
      close_all();
      take(other);
    }
    return *this;
  }
  ~perf_counters() { close_all(); }

  /// Whether `e` opened and will be counted.
  bool available(perf_event e) const noexcept { return fds_[index(e)] >= 0; }

  /// "" when `e` is available; otherwise why not, with the errno, e.g.
  /// "no hardware PMU (perf_event_open: ENOENT; ...)".
  const std::string& unavailable_reason(perf_event e) const noexcept { return reasons_[index(e)]; }

  /// Whether any hardware event opened.
  bool any_hardware() const noexcept { return leader_ >= 0; }

  /// Whether user-space-only counting was forced (perf_event_paranoid >= 2, unprivileged).
  bool kernel_excluded() const noexcept { return exclude_kernel_; }

  /// Resets and enables every open event.
  void start() noexcept {
    if (leader_ >= 0) {
      ::ioctl(leader_, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
      ::ioctl(leader_, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
    }
    for (std::size_t i = 0; i < perf_event_count; ++i) {
      if (fds_[i] < 0 || is_hardware(static_cast<perf_event>(i))) continue;
      ::ioctl(fds_[i], PERF_EVENT_IOC_RESET, 0);
      ::ioctl(fds_[i], PERF_EVENT_IOC_ENABLE, 0);
    }
  }

  /// Disables every open event and returns the counts since start().
  perf_reading stop() noexcept {
    for (std::size_t i = 0; i < perf_event_count; ++i) {
      if (fds_[i] >= 0 && !is_hardware(static_cast<perf_event>(i))) {
        ::ioctl(fds_[i], PERF_EVENT_IOC_DISABLE, 0);
      }
    }
    if (leader_ >= 0) ::ioctl(leader_, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
    perf_reading r;
    if (leader_ >= 0) read_group(r);
    for (std::size_t i = 0; i < perf_event_count; ++i) {
      if (fds_[i] < 0 || is_hardware(static_cast<perf_event>(i))) continue;
      std::uint64_t data[3] = {};  // value, time_enabled, time_running
      if (detail::read_retry(fds_[i], data, sizeof data) != static_cast<long>(sizeof data))
        continue;
      r.values[i] = scaled(data[0], data[1], data[2]);
      if (leader_ < 0) {
        r.time_enabled_ns = static_cast<double>(data[1]);
        r.time_running_ns = static_cast<double>(data[2]);
      }
    }
    return r;
  }

 private:
  static std::size_t index(perf_event e) noexcept { return static_cast<std::size_t>(e); }

  static std::optional<double> scaled(std::uint64_t value, std::uint64_t enabled,
                                      std::uint64_t running) noexcept {
    if (running == 0) return std::nullopt;  // never scheduled: not counted, not zero
    const double v = static_cast<double>(value);
    return running >= enabled ? v : v * static_cast<double>(enabled) / static_cast<double>(running);
  }

  void open_one(perf_event e, bool group) {
    const std::size_t i = index(e);
    if (fds_[i] >= 0) return;  // listed twice
    perf_event_attr attr = detail::attr_of(e);
    attr.exclude_hv = 1;
    attr.exclude_kernel = exclude_kernel_ ? 1 : 0;
    if (group) {
      attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
                         PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;
      if (leader_ < 0) attr.disabled = 1;  // members follow the leader
    } else {
      attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
      attr.disabled = 1;
    }
    int fd = detail::open_event(attr, group ? leader_ : -1);
    if ((fd == -EACCES || fd == -EPERM) && attr.exclude_kernel == 0) {
      // perf_event_paranoid may forbid kernel counting in ways we did not predict (an LSM, a
      // distribution patch): retry user-space only.
      perf_event_attr user = attr;
      user.exclude_kernel = 1;
      const int retry = detail::open_event(user, group ? leader_ : -1);
      if (retry >= 0) {
        fd = retry;
        exclude_kernel_ = true;
      }
    }
    if (fd < 0) {
      reasons_[i] = detail::open_failure_reason(-fd, is_hardware(e), attr.exclude_kernel != 0);
      return;
    }
    if (group) {
      std::uint64_t id = 0;
      if (::ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0) {
        reasons_[i] =
            "cannot identify the event (PERF_EVENT_IOC_ID: " + detail::errno_name(errno) + ")";
        ::close(fd);
        return;
      }
      ids_[i] = id;
      if (leader_ < 0) leader_ = fd;
    }
    fds_[i] = fd;
    reasons_[i].clear();
  }

  void read_group(perf_reading& r) noexcept {
    // PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID:
    //   u64 nr, time_enabled, time_running; { u64 value, id } [nr]   (perf_event_open(2))
    std::uint64_t data[3 + 2 * perf_event_count] = {};
    const long n = detail::read_retry(leader_, data, sizeof data);
    if (n < static_cast<long>(3 * sizeof(std::uint64_t))) return;
    const std::uint64_t nr = data[0];
    if (nr > perf_event_count || static_cast<std::size_t>(n) < (3 + 2 * nr) * sizeof data[0]) {
      return;
    }
    r.time_enabled_ns = static_cast<double>(data[1]);
    r.time_running_ns = static_cast<double>(data[2]);
    for (std::uint64_t k = 0; k < nr; ++k) {
      const std::uint64_t value = data[3 + 2 * k];
      const std::uint64_t id = data[4 + 2 * k];
      for (std::size_t i = 0; i < perf_event_count; ++i) {
        if (fds_[i] >= 0 && is_hardware(static_cast<perf_event>(i)) && ids_[i] == id) {
          r.values[i] = scaled(value, data[1], data[2]);
        }
      }
    }
  }

  void close_all() noexcept {
    // Members first, the leader last.
    for (std::size_t i = 0; i < perf_event_count; ++i) {
      if (fds_[i] >= 0 && fds_[i] != leader_) ::close(fds_[i]);
      fds_[i] = -1;
    }
    if (leader_ >= 0) ::close(leader_);
    leader_ = -1;
  }

  void take(perf_counters& other) noexcept {
    fds_ = other.fds_;
    ids_ = other.ids_;
    reasons_ = std::move(other.reasons_);
    leader_ = other.leader_;
    exclude_kernel_ = other.exclude_kernel_;
    for (auto& fd : other.fds_) fd = -1;
    other.leader_ = -1;
  }

  std::array<int, perf_event_count> fds_{};
  std::array<std::uint64_t, perf_event_count> ids_{};
  std::array<std::string, perf_event_count> reasons_;
  int leader_ = -1;
  bool exclude_kernel_ = false;
};

}  // namespace hugepage
