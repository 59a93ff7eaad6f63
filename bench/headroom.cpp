// bench/headroom.cpp - hugepage_bench --headroom: the headroom this machine offers, for the
// runner's machine header. Dependent loads over a random cycle of each working set on base pages
// and on huge pages, measured as hugepage-doctor --probe measures them (the same code:
// tools/common/tlb_probe.hpp). A working set that does not fit in MemAvailable or the memory
// cgroup's limit is left out, with the reason.
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <system_error>
#include <vector>

#include "common.hpp"
#include "modes.hpp"
#include "tlb_probe.hpp"

namespace hugepage_bench {

int print_headroom(const std::vector<std::size_t>& sizes) {
  hugepage::perf_counters perf({hugepage::perf_event::dtlb_load_misses});
  const std::size_t align = hugepage::thp_page_bytes();
  constexpr std::uint64_t steps = std::uint64_t{1} << 20;  // as the doctor's probe
  fmt::print(
      "{{\"method\": \"dependent loads over a random cycle of 64-byte lines, {} per "
      "backing: base pages (MADV_NOHUGEPAGE) vs huge pages (collapse strategy), as "
      "hugepage-doctor --probe\",\n \"rows\": [",
      steps);
  bool first = true;
  for (const std::size_t requested : sizes) {
    std::size_t bytes = 0;
    hugepage::os::round_up(std::max(requested, align), align, bytes);
    std::string error;
    hugepage::tools::chase_pair pair;
    // One buffer at a time, and the cycle's 4 bytes a line, with the rows' own margin.
    const std::size_t need = bytes + bytes / 16 + 512 * mib;
    if (const std::string why = does_not_fit(need, read_memory_room()); !why.empty()) {
      error = why;
    } else if (bytes / hugepage::tools::probe_line_bytes > UINT32_MAX) {
      error = "working set too large for the probe";
    } else {
      try {
        std::error_code ec;
        pair = hugepage::tools::chase_base_and_huge(bytes, steps, perf, ec);
        if (ec) error = "cannot map: " + ec.message();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    fmt::print("{}\n  {{\"working_set\": {}", first ? "" : ",", bytes);
    first = false;
    if (!error.empty()) {
      std::string quoted;
      for (const char c : error)
        quoted += c == '"' || c == '\\' ? std::string{'\\', c} : std::string{c};
      fmt::print(", \"error\": \"{}\"}}", quoted);
      continue;
    }
    fmt::print(
        ", \"base_ns\": {:.3f}, \"huge_ns\": {:.3f}, \"base_huge_pct\": {:.1f}, "
        "\"huge_huge_pct\": {:.1f}",
        pair.base.ns, pair.huge.ns, 100 * pair.base_huge_fraction, 100 * pair.huge_huge_fraction);
    if (pair.base.walks && pair.huge.walks) {
      fmt::print(", \"base_walks\": {:.4f}, \"huge_walks\": {:.4f}", *pair.base.walks,
                 *pair.huge.walks);
    }
    fmt::print("}}");
  }
  fmt::print("\n ]\n}}\n");
  return 0;
}

}  // namespace hugepage_bench
