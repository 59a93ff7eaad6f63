// bench/fragmenter.hpp - a fragmented machine for the benchmark's scenarios: free memory that
// holds no free 2 MiB block, so that a THP fault must compact (or fall back).
//
// A child process maps memory without huge pages and touches it, so that the kernel splits its
// free blocks into base pages, then gives back the base pages of odd page frame number: each one
// has its buddy held, so the buddy allocator cannot merge it into anything larger. Large blocks
// its limits left whole, and 2 MiB pages on the per-cpu free lists (which /proc/buddyinfo does not
// show), it takes whole with THP faults. It holds all that until the fragmenter is destroyed (or
// its parent dies). Uses the C library and the standard library only; no part of hugepage.
// docs/benchmark.md, "A fragmented machine".
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hugepage_bench {

/// Free blocks of one zone, per order (0: 4 KiB, 9: 2 MiB, 10: 4 MiB on x86-64), as
/// /proc/buddyinfo lists them.
struct buddy_zone {
  std::string node_zone;  // "Node 0, zone Normal" written "0/Normal"
  std::array<std::uint64_t, 11> free_blocks{};
};

/// Parses /proc/buddyinfo text, each line with hugepage::parse_buddyinfo_line()
/// (hugepage/kernel_memory.hpp). Throws std::invalid_argument naming the line on anything else
/// (a line that is not "Node N, zone NAME c0 c1 ...", more than 11 orders, a bad count), where
/// the library's parse_buddyinfo() skips it.
std::vector<buddy_zone> parse_buddyinfo(std::string_view text);
/// parse_buddyinfo of /proc/buddyinfo (hugepage::read_buddyinfo_text()); throws
/// std::runtime_error when it cannot be read.
std::vector<buddy_zone> read_buddyinfo();

/// Free blocks of order >= `order`, summed over `zones`.
std::uint64_t free_blocks_at_least(const std::vector<buddy_zone>& zones, int order);

/// The zones an ordinary (movable) page can come from: all but ZONE_DMA, the first 16 MiB, which
/// lowmem_reserve keeps for ISA DMA (its protection against Normal allocations exceeds its size).
std::vector<buddy_zone> user_zones(const std::vector<buddy_zone>& zones);

/// MemAvailable from /proc/meminfo, in bytes (0 when unreadable).
std::size_t mem_available_bytes();

class fragmenter {
 public:
  struct options {
    std::size_t keep_available_bytes = std::size_t{2} << 30;  // MemAvailable never below this
    std::size_t max_hold_bytes = std::size_t{16} << 30;       // the child's resident bytes at most
    std::chrono::milliseconds deadline{std::chrono::minutes(2)};
    // Sets /proc/sys/vm/compaction_proactiveness to 0 (root only) while the child holds, and puts
    // it back on destruction: kcompactd's proactive compaction otherwise rebuilds free 2 MiB
    // blocks from the freed pages within a minute (docs/benchmark.md).
    bool pause_proactive_compaction = true;
  };

  /// Forks the child and waits for its result (at most the deadline and a few seconds). Throws
  /// std::runtime_error when the child cannot be started or dies before it reports.
  explicit fragmenter(options opts);
  fragmenter(const fragmenter&) = delete;
  fragmenter& operator=(const fragmenter&) = delete;
  ~fragmenter();  // kills the child and waits for it: its memory is back when this returns

  const std::vector<buddy_zone>& before() const { return before_; }
  const std::vector<buddy_zone>& after() const { return after_; }
  /// Bytes the child holds (resident, after it gave back its odd pages).
  std::size_t held_bytes() const { return held_; }
  /// Bytes the child gave back as single base pages.
  std::size_t freed_bytes() const { return freed_; }
  /// Of held_bytes(), what the child took as whole 2 MiB blocks (left whole by the limits).
  std::size_t taken_bytes() const { return taken_; }
  /// Of taken_bytes(), the 2 MiB pages the kernel served from its per-cpu free lists (invisible
  /// in /proc/buddyinfo) without compaction.
  std::size_t from_per_cpu_bytes() const { return from_per_cpu_; }
  /// No free block of order >= 9 in any user zone (user_zones) after the child's work.
  bool complete() const;
  /// Why the child stopped: "complete", "keep_available_bytes", "max_hold_bytes", "deadline",
  /// "no progress" (256 THP faults in a row left the count of large blocks where it was),
  /// "mmap failed".
  const std::string& stopped_by() const { return reason_; }
  std::chrono::milliseconds took() const { return took_; }
  pid_t child() const { return child_; }
  /// "" while the child still holds the fragments; else how it ended ("was killed by SIGKILL",
  /// "exited with status 1"), the child then reaped.
  std::string child_ended();
  /// The proactiveness this fragmenter set to 0 and restores, or -1 when it left it alone (not
  /// asked, or not root).
  int paused_proactiveness() const { return saved_proactiveness_; }
  /// before/after per zone (orders 9 and 10, free MiB), what is held, why it stopped.
  std::string summary() const;

 private:
  void stop_child() noexcept;

  pid_t child_ = -1;
  std::vector<buddy_zone> before_, after_;
  std::size_t held_ = 0, freed_ = 0, taken_ = 0, from_per_cpu_ = 0;
  std::string reason_;
  std::chrono::milliseconds took_{0};
  int saved_proactiveness_ = -1;
};

/// A fragmented machine for a scenario: the fragmenter, held while the returned pointer lives,
/// when it ended "complete" or with "no progress" (the blocks left were refused to THP faults);
/// its summary goes to stderr. nullptr with `why` (the summary, or the error) otherwise, and
/// `failed` true when the fragmenter itself failed (its child died or could not start), false
/// when the machine could not be fragmented.
std::shared_ptr<fragmenter> fragmented_machine(const fragmenter::options& opts, std::string& why,
                                               bool& failed);

}  // namespace hugepage_bench
