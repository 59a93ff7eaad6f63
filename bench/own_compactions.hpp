// bench/own_compactions.hpp - how often this process entered direct compaction, counted by the
// kernel's tracepoint for it rather than read from /proc/vmstat.
//
// vmstat's compact_stall is machine-wide: a fragmenter, the runner or any other process that
// stalls while a row runs raises it, so a target of "ours never stalls in direct compaction"
// read from it judged the machine, not the row. The tracepoint
// compaction:mm_compaction_try_to_compact_pages fires in the context of the task that entered
// direct compaction (kcompactd's background work is its own thread's), so a perf event counting it
// for this thread, inherited by every thread and child started afterwards, counts this process's
// own stalls. It fires on every entry, also one that finds nothing to compact: at least
// compact_stall's share of this process, never less.
//
// Needs tracefs (the event's id file under /sys/kernel/tracing or /sys/kernel/debug/tracing;
// scripts/bench and scripts/test mount tracefs as root where it is missing), the right to read that
// id (root, by tracefs's default mode) and perf_event_open (a counting-only tracepoint event needs
// no more than perf_event_paranoid <= 2 allows). Without them nothing is counted and the row has no
// counter.
#pragma once

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

namespace hugepage_bench {

/// The tracepoint of an entry into direct compaction, as tracefs names it (events/<this>/id).
inline constexpr const char* direct_compaction_event =
    "compaction/mm_compaction_try_to_compact_pages";

/// A tracepoint's id from tracefs ("category/name"), or nothing (no tracefs mounted, unreadable,
/// no such event).
inline std::optional<std::uint64_t> tracepoint_id(const std::string& event) {
  for (const char* tracefs : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    const std::string path = std::string(tracefs) + "/events/" + event + "/id";
    if (std::FILE* f = std::fopen(path.c_str(), "re")) {
      unsigned long long id = 0;
      const bool read = std::fscanf(f, "%llu", &id) == 1;
      std::fclose(f);
      if (read) return id;
    }
  }
  return std::nullopt;
}

/// Counts how often the calling thread, and every thread and child process it starts after
/// start(), hit a tracepoint, until stop(). The kernel sums the inherited counts into the read.
class own_tracepoint_count {
 public:
  explicit own_tracepoint_count(std::string event) : event_(std::move(event)) {}
  own_tracepoint_count(const own_tracepoint_count&) = delete;
  own_tracepoint_count& operator=(const own_tracepoint_count&) = delete;
  ~own_tracepoint_count() { close(); }

  /// Opens the event; false (and nothing counted) where tracefs, the privileges or the kernel
  /// refuse it.
  bool start() {
    close();
    const std::optional<std::uint64_t> id = tracepoint_id(event_);
    if (!id) return false;
    perf_event_attr attr{};
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.size = sizeof attr;
    attr.config = *id;
    attr.inherit = 1;  // the threads and children started after this
    const long fd = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    fd_ = fd < 0 ? -1 : static_cast<int>(fd);
    return fd_ >= 0;
  }

  /// The count since start(), or nothing when start() failed or the read does; closes the event.
  std::optional<std::uint64_t> stop() {
    std::optional<std::uint64_t> out;
    std::uint64_t n = 0;
    if (fd_ >= 0 && ::read(fd_, &n, sizeof n) == static_cast<ssize_t>(sizeof n)) out = n;
    close();
    return out;
  }

 private:
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::string event_;
  int fd_ = -1;
};

}  // namespace hugepage_bench
