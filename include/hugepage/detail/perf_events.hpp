// hugepage/detail/perf_events.hpp - perf_event_open(2) and why it fails.
//
// The system call with its retries, and the facts that explain a refusal: perf_event_paranoid,
// the process's capabilities, a seccomp filter, whether the kernel lists a CPU PMU at all.
// perf_counters.hpp and perf_events_pfm.hpp open their events through these.
#pragma once

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>

#include "hugepage/detail/errno_text.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_counters.hpp"

namespace hugepage::detail {

/// /proc/sys/kernel/perf_event_paranoid (may be negative); nullopt when unreadable.
inline std::optional<int> perf_event_paranoid() {
  std::error_code ec;
  const std::string text = read_file("/proc/sys/kernel/perf_event_paranoid", ec);
  if (ec || text.empty()) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str()) return std::nullopt;
  return static_cast<int>(value);
}

/// The value of a "Key:\tvalue" line of this process's status (read_status()), or "".
inline std::string status_field(const char* key) {
  const std::optional<process_status> status = read_status();
  return status ? status->field(key).value_or("") : std::string();
}

/// Whether this process has CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in its effective set, which
/// lifts the perf_event_paranoid restrictions.
inline bool perf_privileged() {
  const std::optional<process_status> status = read_status();
  const std::optional<std::uint64_t> caps = status ? status->mask("CapEff") : std::nullopt;
  if (!caps) return ::geteuid() == 0;
  const std::uint64_t mask = *caps;
  return (mask >> 38 & 1U) != 0 || (mask >> 21 & 1U) != 0;
}

/// Whether a seccomp filter is installed on this thread ("Seccomp: 2").
inline bool seccomp_filtered() { return status_field("Seccomp") == "2"; }

/// Whether the kernel lists a CPU PMU (x86 "cpu", hybrid "cpu_core"/"cpu_atom", arm "armv8_*").
inline bool cpu_pmu_listed() {
  const std::string base = "/sys/bus/event_source/devices/";
  for (const char* name : {"cpu", "cpu_core", "cpu_atom"}) {
    if (::access((base + name).c_str(), F_OK) == 0) return true;
  }
  std::error_code ec;
  // arm64 PMUs are named after the core ("armv8_pmuv3_0", "armv8_cortex_a72"): look for "type".
  const std::string arm = read_file("/sys/bus/event_source/devices/armv8_pmuv3_0/type", ec);
  return !ec;
}

/// Explains why perf_event_open failed with `error` for an event of the given kind.
inline std::string open_failure_reason(int error, bool hardware, bool excluded_kernel) {
  const std::string call = "perf_event_open: " + errno_name(error);
  const std::optional<int> paranoid = perf_event_paranoid();
  const std::string paranoid_text = paranoid ? std::to_string(*paranoid) : "unreadable";
  switch (error) {
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
      if (!hardware) return "event not supported by this kernel (" + call + ")";
      if (!cpu_pmu_listed()) {
        return "no hardware PMU (" + call +
               "; no CPU PMU under /sys/bus/event_source/devices: a VM without vPMU?)";
      }
      return "event not supported by this CPU's PMU (" + call + ")";
    case EACCES:
    case EPERM: {
      const bool privileged = perf_privileged();
      if (paranoid && *paranoid >= 3 && !privileged) {
        return "perf_event_paranoid=3 forbids perf_event_open without CAP_PERFMON (" + call +
               "; lower it with sysctl kernel.perf_event_paranoid=2)";
      }
      if (seccomp_filtered()) {
        return "blocked by seccomp (" + call + "; a seccomp filter is installed, " +
               "perf_event_paranoid=" + paranoid_text + ")";
      }
      if (!privileged && paranoid && *paranoid >= 2 && !excluded_kernel) {
        return "perf_event_paranoid=" + paranoid_text + " forbids kernel counting (" + call + ")";
      }
      return "permission denied (" + call + "; perf_event_paranoid=" + paranoid_text +
             ", an LSM or seccomp policy may block it)";
    }
    case ENOSYS:
      return "perf_event_open not implemented (" + call +
             "; kernel without CONFIG_PERF_EVENTS, or blocked by seccomp)";
    case EMFILE:
    case ENFILE: return "out of file descriptors (" + call + ")";
    case EINVAL: return "event rejected by the kernel (" + call + ")";
    default: return "cannot open (" + call + ": " + std::strerror(error) + ")";
  }
}

/// perf_event_open(2) for the calling thread on any CPU, EINTR retried. Returns the fd or -errno.
inline int open_event(perf_event_attr& attr, int group_fd) noexcept {
  for (;;) {
    const long fd = ::syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1 /* any CPU */,
                              group_fd, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EINTR) return -errno;
  }
}

/// read(2) that retries EINTR.
inline long read_retry(int fd, void* buffer, std::size_t length) noexcept {
  for (;;) {
    const ssize_t n = ::read(fd, buffer, length);
    if (n >= 0 || errno != EINTR) return static_cast<long>(n);
  }
}

}  // namespace hugepage::detail
