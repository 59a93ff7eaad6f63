// hugepage/perf_events_pfm.hpp - named raw PMU events (page-walk cycles) through libpfm4.
//
// OPTIONAL: needs libpfm4 (Debian: libpfm4-dev, link with -lpfm). No other header includes this
// one; hugepage_bench uses it when built with -DHUGEPAGE_WITH_LIBPFM=ON.
//
// The generic perf events (perf_counters.hpp) count page walks on Intel but not the cycles the
// walks take. Those need model-specific raw events, such as DTLB_LOAD_MISSES.WALK_ACTIVE (Skylake
// to Ice Lake: event 0x08, umask 0x10, cmask 1; Sapphire Rapids: event 0x12). libpfm4 knows the
// encodings of each CPU model, so a name is enough:
//
//   hugepage::pfm::raw_counter walks({"DTLB_LOAD_MISSES.WALK_ACTIVE",
//                                     "DTLB_LOAD_MISSES.WALK_DURATION"});   // first that opens
//   if (walks.available()) { walks.start(); work(); const auto cycles = walks.stop(); }
//   else std::puts(walks.unavailable_reason().c_str());
#pragma once

// The kernel's header first: libpfm4's copy of the same definitions steps aside only when
// <linux/perf_event.h> came before it, and perf_counters.hpp includes the kernel's.
#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hugepage/perf_counters.hpp"

namespace hugepage::pfm {

/// Initializes libpfm4 once. Returns "" on success, or the libpfm error text. Thread-safe.
inline const std::string& initialize() {
  static const std::string error = [] {
    const int rc = pfm_initialize();
    return rc == PFM_SUCCESS ? std::string() : std::string("pfm_initialize: ") + pfm_strerror(rc);
  }();
  return error;
}

/// Encodes `name` ("DTLB_LOAD_MISSES.WALK_ACTIVE" or libpfm's "DTLB_LOAD_MISSES:WALK_ACTIVE") for
/// perf_event_open, counting user space (and the kernel unless `user_only`). Returns nullopt and
/// sets `error` when libpfm does not know the event on this CPU.
inline std::optional<perf_event_attr> encode(const std::string& event, bool user_only,
                                             std::string& error) {
  if (!initialize().empty()) {
    error = initialize();
    return std::nullopt;
  }
  std::string name = event;
  for (char& c : name) {
    if (c == '.') c = ':';  // Intel's spelling to libpfm's
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  pfm_perf_encode_arg_t arg;
  std::memset(&arg, 0, sizeof arg);
  arg.attr = &attr;
  arg.size = sizeof arg;
  const int plm = user_only ? PFM_PLM3 : PFM_PLM0 | PFM_PLM3;
  const int rc = pfm_get_os_event_encoding(name.c_str(), plm, PFM_OS_PERF_EVENT, &arg);
  if (rc != PFM_SUCCESS) {
    error = name + ": " + pfm_strerror(rc);
    return std::nullopt;
  }
  attr.size = sizeof attr;
  return attr;
}

/// One raw event of the calling thread, the first of `candidates` that libpfm encodes and the
/// kernel opens. Not thread-safe; not copyable.
class raw_counter {
 public:
  explicit raw_counter(const std::vector<std::string>& candidates) {
    const bool user_only = [] {
      const std::optional<int> paranoid = detail::perf_event_paranoid();
      return !detail::perf_privileged() && paranoid && *paranoid >= 2;
    }();
    for (const std::string& candidate : candidates) {
      std::string error;
      std::optional<perf_event_attr> attr = encode(candidate, user_only, error);
      if (!attr) {
        reason_ += (reason_.empty() ? "" : "; ") + error;
        continue;
      }
      attr->disabled = 1;
      attr->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
      const int fd = detail::open_event(*attr, -1);
      if (fd < 0) {
        reason_ += (reason_.empty() ? "" : "; ") + candidate + ": " +
                   detail::open_failure_reason(-fd, /*hardware=*/true, user_only);
        continue;
      }
      fd_ = fd;
      name_ = candidate;
      reason_.clear();
      return;
    }
    if (candidates.empty()) reason_ = "no event named";
  }
  raw_counter(const raw_counter&) = delete;
  raw_counter& operator=(const raw_counter&) = delete;
  ~raw_counter() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool available() const noexcept { return fd_ >= 0; }
  /// The candidate that opened; "" when none did.
  const std::string& name() const noexcept { return name_; }
  /// "" when available; else why each candidate failed.
  const std::string& unavailable_reason() const noexcept { return reason_; }

  void start() noexcept {
    if (fd_ < 0) return;
    ::ioctl(fd_, PERF_EVENT_IOC_RESET, 0);
    ::ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0);
  }
  /// The count since start(), scaled for multiplexing; nullopt when not counted.
  std::optional<double> stop() noexcept {
    if (fd_ < 0) return std::nullopt;
    ::ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
    std::uint64_t data[3] = {};
    if (detail::read_retry(fd_, data, sizeof data) != static_cast<long>(sizeof data)) {
      return std::nullopt;
    }
    if (data[2] == 0) return std::nullopt;
    const double value = static_cast<double>(data[0]);
    return data[2] >= data[1] ? value
                              : value * static_cast<double>(data[1]) / static_cast<double>(data[2]);
  }

 private:
  int fd_ = -1;
  std::string name_;
  std::string reason_;
};

}  // namespace hugepage::pfm
