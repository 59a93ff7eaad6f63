// tools/doctor/probe.cpp - --probe: how much this machine's TLB costs a random-access workload.
//
// For each working set, one random cyclic permutation of its 64-byte lines (Sattolo's algorithm:
// a single cycle, so the chase visits every line) is written as pointers into two buffers: one on
// base pages (MADV_NOHUGEPAGE), one on huge pages (the library's collapse strategy: MADV_HUGEPAGE,
// populate, MADV_COLLAPSE). Each load depends on the previous one, so the time per access is the
// latency of a cache miss plus, when the page is not in the TLB, a page walk. The ratio of the two
// is the TLB tax that huge pages remove; backing_of() proves what each buffer was really on. Under
// virtualisation a page walk is two-dimensional (guest and host tables), so the tax is larger.
#include "probe.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>

#include "format.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/cgroup.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/os.hpp"
#include "hugepage/perf_counters.hpp"
#include "hugepage/strategy.hpp"
#include "tlb_probe.hpp"

namespace hugepage::doctor {

namespace {

// The measuring core (the random cycle, the chase on base and on huge pages) is shared with the
// benchmark's machine header (tools/common/tlb_probe.hpp).
constexpr std::size_t line_bytes = tools::probe_line_bytes;

std::size_t resident_bytes() {
  const std::optional<statm_pages> statm = read_statm();
  return statm ? static_cast<std::size_t>(statm->resident) * os::base_page_size() : 0;
}

// What populating memory costs this process beyond the bytes themselves, per byte, measured on a
// buffer of its own: `peak` while the buffer is mapped, `kept` after it is unmapped. Nothing on a
// plain build. Under a sanitizer, every instrumented load and store reads shadow memory; where the
// kernel maps no zero page (pvm_no_zero_page=1, s390 KVM guests) each shadow page read is a page
// charged to the memory cgroup (an eighth of the bytes under AddressSanitizer), and the shadow
// stays after the buffer is gone.
struct populate_overhead {
  double peak = 0;
  double kept = 0;
};

populate_overhead measure_populate_overhead() {
  populate_overhead o;
  constexpr std::size_t bytes = 8 * units::mib;
  std::error_code ec;
  const std::size_t before = resident_bytes();
  void* p = os::map_aligned(bytes, bytes, ec);
  if (p == nullptr || before == 0) return o;
  os::advise(p, bytes, MADV_NOHUGEPAGE);
  auto* buffer = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; i += line_bytes) {
    *reinterpret_cast<void**>(buffer + i) = buffer;  // as write_cycle stores: one per line
  }
  const std::size_t mapped = resident_bytes();
  os::unmap(p, bytes);
  const std::size_t after = resident_bytes();
  const auto share = [](std::size_t extra) { return static_cast<double>(extra) / bytes; };
  if (mapped > before + bytes) o.peak = share(mapped - before - bytes);
  if (after > before) o.kept = share(after - before);
  return o;
}

}  // namespace

probe_report run_probe(const std::vector<std::size_t>& working_sets) {
  const auto started = std::chrono::steady_clock::now();
  probe_report report;
  perf_counters counters({perf_event::dtlb_loads, perf_event::dtlb_load_misses});
  report.counters = counters.available(perf_event::dtlb_load_misses);
  if (!report.counters) {
    report.counters_reason = counters.unavailable_reason(perf_event::dtlb_load_misses);
  }
  report.huge_method = "hugepage::strategy::collapse() (MADV_HUGEPAGE, populate, MADV_COLLAPSE)";
  const std::size_t align = thp_page_bytes();
  const populate_overhead overhead = measure_populate_overhead();

  for (const std::size_t requested : working_sets) {
    probe_row row;
    std::size_t bytes = 0;
    os::round_up(std::max(requested, align), align, bytes);
    // In a memory cgroup, populating past the limit gets the doctor OOM-killed: the working set
    // shrinks (by halves) until the buffer, its cycle (4 bytes a line) and a collapse's spare
    // page fit the headroom, with what populating costs beyond the bytes (a sanitizer's shadow:
    // the base buffer's stays while the huge one is populated), and the row says so.
    const cgroup_limit_search limit = memory_limit();
    if (limit.tightest) {
      const std::uint64_t headroom = limit.tightest->headroom();
      const auto needed = [&](std::size_t b) {
        const double populated = static_cast<double>(b + b / line_bytes * 4);
        return static_cast<std::uint64_t>(populated * (1 + overhead.peak) +
                                          static_cast<double>(b) * overhead.kept) +
               2 * align;
      };
      std::size_t fitted = bytes;
      while (fitted > align && needed(fitted) > headroom) fitted = std::max(fitted / 2, align);
      if (needed(fitted) > headroom) {
        row.working_set = bytes;
        row.error = "the memory cgroup limit " + limit.tightest->file + " leaves " +
                    format_bytes(headroom) + ", less than the smallest working set needs (" +
                    format_bytes(needed(fitted)) + ")";
        report.rows.push_back(row);
        continue;
      }
      if (fitted != bytes) {
        row.note = format_bytes(bytes) + " reduced to " + format_bytes(fitted) +
                   ": the memory cgroup limit " + limit.tightest->file + " leaves " +
                   format_bytes(headroom);
        bytes = fitted;
      }
    }
    row.working_set = bytes;
    const std::size_t lines = bytes / line_bytes;
    row.accesses = std::uint64_t{1} << 20;
    if (lines > UINT32_MAX) {
      row.error = "working set too large for the probe";
      report.rows.push_back(row);
      continue;
    }
    try {
      std::error_code ec;
      const tools::chase_pair pair = tools::chase_base_and_huge(bytes, row.accesses, counters, ec);
      if (ec) {
        row.error = "cannot map " + format_bytes(bytes) + ": " + ec.message();
        report.rows.push_back(row);
        continue;
      }
      row.base_huge_fraction = pair.base_huge_fraction;
      row.base_ns = pair.base.ns;
      row.base_walks = pair.base.walks;
      row.huge_huge_fraction = pair.huge_huge_fraction;
      row.huge_ns = pair.huge.ns;
      row.huge_walks = pair.huge.walks;
    } catch (const std::exception& e) {
      row.error = e.what();
    }
    report.rows.push_back(row);
  }
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace hugepage::doctor
