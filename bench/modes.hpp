// bench/modes.hpp - hugepage_bench's modes besides the rounds: --list (listing.cpp), --paired
// (paired.cpp), --headroom (headroom.cpp) and --plan (listing.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "registry.hpp"

namespace hugepage_bench {

/// Prints the registry as text: one block per family, then the other benchmark programs.
void print_registry_text();
/// Prints the registry as JSON for bench/runner.
void print_registry_json();
/// Prints the machine facts bench/runner shows in its header, as the library reads them: the
/// kernel release, THP (thp_mode: what `enabled` and the PMD size's per-size switch decide, and the
/// switches themselves), the hugetlb pools. JSON; a file that cannot be read is null. Returns the
/// exit status.
int print_machine_facts_json();

/// The memory a run may take: MemAvailable, and the tightest memory cgroup limit where one is set
/// (a working set past it is OOM-killed, whatever MemAvailable says).
struct memory_room {
  std::size_t mem_available = 0;
  std::optional<hugepage::cgroup_limit> cgroup;
};
/// Reads both now.
memory_room read_memory_room();
/// Why `need` bytes do not fit in `room`, in words ("needs ~N MiB, MemAvailable M MiB"), or ""
/// when they fit.
std::string does_not_fit(std::size_t need, const memory_room& room);

/// One working set of --plan: what the run would need, and why it would be left out ("" when it
/// runs).
struct planned_size {
  std::size_t size = 0;
  std::size_t need = 0;
  std::string left_out;
};
/// Prints what a run with the same flags would run, reserving and running nothing: the memory
/// room, each working set with its need and why it is left out, the allocators left out (name,
/// why). JSON, for scripts/bench and run-large.sh. Returns the exit status.
int print_plan_json(const memory_room& room, const std::vector<planned_size>& sizes,
                    const std::vector<std::pair<std::string, std::string>>& allocators_left_out);

/// Rounds of --paired: at least `rounds`, and more until `round_seconds` of rounds have passed
/// (at most paired_max_rounds). A ratio near 1 needs many rounds to settle: a round's ratio
/// varies by about 5% on a small VM.
struct paired_options {
  int rounds = 15;
  int round_seconds = 0;
};
constexpr int paired_max_rounds = 1000;

/// The suites of `suites` that declare contenders.
std::vector<const suite_info*> pairable(const std::vector<const suite_info*>& suites);
/// Registers one BM_<Suite>/paired/<bytes> row per suite and working set.
void register_paired(const std::vector<const suite_info*>& suites,
                     const std::vector<std::size_t>& sizes, const paired_options& o);

/// Prints, as JSON, what huge pages save a dependent random chase at each working set (the
/// measuring core of hugepage-doctor --probe). Returns the exit status.
int print_headroom(const std::vector<std::size_t>& sizes);

}  // namespace hugepage_bench
