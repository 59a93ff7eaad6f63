// doctor_bench - what `hugepage-doctor --pid` costs on a process with many mappings.
//
// Rows:
//   BM_DoctorPid/<format>/<mappings>  one run of the doctor binary (fork, exec, report, exit)
//       against hugepage-doctor-target with <mappings> anonymous mappings of 212 KiB (2 GiB at
//       10,000), 8 KiB of each touched; format 0: table, 1: json, 2: prometheus. Real time.
//       Counter: read_ms, the doctor's own time reading the process (JSON elapsed_seconds; for
//       the other formats the same read is done, so only json reports it).
//   BM_DoctorPidSixteenGib/<format>/<huge>  the same against a target with 10,000 such mappings
//       and 16 GiB resident besides: huge 1, one MADV_HUGEPAGE region (on THP where the kernel
//       has free 2 MiB blocks); huge 0, plain anonymous memory on base pages, the page-table walk
//       at its longest. 3 runs per repetition, 5 repetitions, median reported. The target is
//       started once per configuration and kept across repetitions (populating 16 GiB takes
//       tens of seconds); the row is skipped with the reason when MemAvailable is short.
//   BM_CoverageOf/<mappings>  the per-mapping coverage alone, in this process against the same
//       target: smaps read and parsed once, then one report per mapping
//       (backing_of_mappings).
//   BM_BackingOfEachMapping/<mappings>  the same with backing_of() per mapping, as the table did
//       before: where its PROCMAP_QUERY fast path is not taken (kernels before 6.11, or a zero
//       page PAGEMAP_SCAN does not flag) every call reads smaps again.
// The target is started once per row and is not timed.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/smaps.hpp"
#include "target_launcher.hpp"

namespace {

using hugepage::test::target;

// hugepage-doctor-target with `mappings` mappings of 212 KiB, 8 KiB of each touched.
target many_mappings(std::size_t mappings) {
  return target(
      {"--mappings", std::to_string(mappings), "--mapping-kib", "212", "--touch-kib", "8"});
}

// Runs the doctor on `pid` in `format`; its stdout, or "" on failure.
std::string doctor(pid_t pid, const char* format, int& status) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    const std::string p = std::to_string(pid);
    ::execl(HUGEPAGE_DOCTOR_BINARY, HUGEPAGE_DOCTOR_BINARY, "--pid", p.c_str(), "--format", format,
            static_cast<char*>(nullptr));
    ::_exit(98);
  }
  ::close(out[1]);
  std::string text;
  char buffer[65536];
  ssize_t n;
  while ((n = ::read(out[0], buffer, sizeof buffer)) > 0) {
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  ::waitpid(child, &status, 0);
  return text;
}

const char* const formats[] = {"table", "json", "prometheus"};

// Times the doctor on `t` in formats[format].
void doctor_rows(benchmark::State& state, const target& t, std::int64_t format_index) {
  const char* format = formats[format_index];
  double read_seconds = 0;
  for (auto _ : state) {
    int status = 0;
    const std::string out = doctor(t.pid(), format, status);
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1 || out.empty()) {
      state.SkipWithError("the doctor failed");
      return;
    }
    const auto at = out.find("\"elapsed_seconds\": ");
    if (at != std::string::npos) read_seconds = std::strtod(out.c_str() + at + 19, nullptr);
  }
  state.SetLabel(format);
  if (read_seconds > 0) state.counters["read_ms"] = read_seconds * 1000.0;
}

void BM_DoctorPid(benchmark::State& state) {
  const target t = many_mappings(static_cast<std::size_t>(state.range(1)));
  if (!t.ready()) {
    state.SkipWithError("the target could not map its memory");
    return;
  }
  doctor_rows(state, t, state.range(0));
}

void BM_DoctorPidSixteenGib(benchmark::State& state) {
  using hugepage::units::gib;
  using hugepage::units::mib;
  constexpr std::size_t resident_mib = 16 * gib / mib;
  const bool huge = state.range(1) != 0;
  // One 16 GiB target at a time, kept while rows of the same kind follow each other.
  static std::unique_ptr<target> kept;
  static int kept_huge = -1;
  if (kept_huge != static_cast<int>(huge)) {
    kept.reset();
    kept_huge = -1;
    // 16 GiB, the 10,000 mappings' 80 MiB, and 512 MiB for page tables, the doctor and the rest
    // (as DoctorCliSpeed asks).
    const std::size_t needed = 16 * gib + 80 * mib + 512 * mib;
    // MemAvailable leaves hugetlb pools out, so a reserved pool lowers it as it should.
    const std::size_t available = hugepage::read_meminfo_value("MemAvailable").value_or(0);
    if (available < needed) {
      state.SkipWithError(("needs " + std::to_string(needed >> 20) + " MiB of MemAvailable, " +
                           std::to_string(available >> 20) + " MiB available")
                              .c_str());
      return;
    }
    kept = std::make_unique<target>(std::vector<std::string>{
        huge ? "--thp" : "--anon", std::to_string(resident_mib), "--mappings", "10000",
        "--mapping-kib", "212", "--touch-kib", "8"});
    kept_huge = static_cast<int>(huge);
  }
  if (!kept->ready()) {
    state.SkipWithError("the target could not map its memory");
    return;
  }
  doctor_rows(state, *kept, state.range(0));
  state.SetLabel(std::string(formats[state.range(0)]) + (huge ? " thp" : " base"));
}

// Times `cover(pid, mappings)` after one read of the target's smaps per iteration, as the doctor
// does per report.
template <class Cover>
void coverage_rows(benchmark::State& state, Cover cover) {
  const target t = many_mappings(static_cast<std::size_t>(state.range(0)));
  if (!t.ready()) {
    state.SkipWithError("the target could not map its memory");
    return;
  }
  for (auto _ : state) {
    std::error_code ec;
    cover(t.pid(), hugepage::read_smaps(t.pid(), ec));
  }
}

// The doctor's way: one pass over all mappings.
void BM_CoverageOf(benchmark::State& state) {
  coverage_rows(state, [](pid_t pid, const std::vector<hugepage::mapping_info>& mappings) {
    const auto reports = hugepage::backing_of_mappings(pid, mappings);
    benchmark::DoNotOptimize(reports.data());
  });
}

// The public call per mapping, for comparison.
void BM_BackingOfEachMapping(benchmark::State& state) {
  coverage_rows(state, [](pid_t pid, const std::vector<hugepage::mapping_info>& mappings) {
    for (const auto& m : mappings) {
      benchmark::DoNotOptimize(
          hugepage::backing_of(pid, reinterpret_cast<const void*>(m.start), m.size()));
    }
  });
}

}  // namespace

BENCHMARK(BM_DoctorPid)
    ->ArgsProduct({{0, 1, 2}, {10000}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DoctorPidSixteenGib)
    ->ArgsProduct({{0, 1, 2}, {1, 0}})
    ->Iterations(3)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CoverageOf)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BackingOfEachMapping)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
