// tools/doctor/collapse_command.cpp - see collapse_command.hpp.
#include "collapse_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "hugepage/backing.hpp"
#include "hugepage/collapse.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/system.hpp"
#include "process_access.hpp"
#include "test_hook.hpp"

namespace hugepage::doctor {

namespace {

constexpr std::size_t chunk = 2 * units::mib;

// An anonymous mapping: no file behind it (a private mapping of /dev/zero is anonymous too).
bool anonymous_mapping(const mapping_info& m) {
  const std::string_view name = m.name;
  return name.empty() || name == "[heap]" || name == "[stack]" || name.rfind("[anon:", 0) == 0 ||
         (name.rfind("/dev/zero", 0) == 0 && m.permissions.size() == 4 && m.permissions[3] == 'p');
}

// Anonymous memory only: that is where a fragmented heap lives. THPeligible is not required: it
// says whether faults and khugepaged may use THP (0 for an unadvised VMA under enabled=madvise),
// and MADV_COLLAPSE ignores the mode. hugetlb and the kernel's special mappings are left alone;
// VM_NOHUGEPAGE mappings are listed as blocked (blocked_reason()), and so are private file
// mappings with pages they wrote (file_reason()).
bool collapsible(const mapping_info& m) {
  const bool special = m.name == "[vsyscall]" || m.name == "[vvar]" || m.name == "[vdso]" ||
                       m.name == "[vvar_vclock]" || m.name == "[uprobes]";
  return anonymous_mapping(m) && !special && !m.is_hugetlb() && m.permissions.size() == 4 &&
         m.permissions[0] == 'r';
}

// A private file mapping whose written pages are anonymous copies: resident on base pages like a
// heap, but MADV_COLLAPSE takes a file mapping only as page cache (read-only, with
// CONFIG_READ_ONLY_THP_FOR_FS), never its written copies: EINVAL for every chunk.
bool private_file_with_copies(const mapping_info& m) {
  return !anonymous_mapping(m) && !m.is_hugetlb() && m.anonymous > 0 && m.permissions.size() == 4 &&
         m.permissions[3] == 'p' && m.name.front() == '/';
}

const std::string file_reason =
    "a private file mapping: the pages it wrote are anonymous copies, but MADV_COLLAPSE takes a "
    "file mapping only as read-only page cache (CONFIG_READ_ONLY_THP_FOR_FS), never its written "
    "copies, and refuses it with EINVAL.";

// Why the kernel refuses MADV_COLLAPSE on `m` before trying (EINVAL for every chunk), or "".
// PR_SET_THP_DISABLE without PR_THP_DISABLE_EXCEPT_ADVISED shows as THP_enabled 0 in status;
// with it THP_enabled stays 1 and MADV_COLLAPSE is allowed.
std::string blocked_reason(const mapping_info& m, bool thp_disabled) {
  if (thp_disabled) {
    return "THP is disabled for the process (prctl PR_SET_THP_DISABLE; /proc/PID/status "
           "THP_enabled: 0): MADV_COLLAPSE refuses every range with EINVAL. Only the process "
           "(or what starts it, since the setting is inherited across fork and exec) can turn "
           "it back on.";
  }
  if (m.has_flag("nh")) {
    return "the mapping is VM_NOHUGEPAGE (MADV_NOHUGEPAGE; smaps VmFlags nh): MADV_COLLAPSE "
           "refuses it with EINVAL until the process advises it otherwise.";
  }
  return {};
}

// Shared memory on the kernel's internal shmem mount (MAP_SHARED anonymous, SysV, memfd)
// follows shmem_enabled, under which deny makes MADV_COLLAPSE refuse it (EINVAL). The doctor does
// not collapse shared memory (other processes map it too); it lists it when that setting rules a
// collapse out, so that nobody expects one to raise it. Files in tmpfs mounts follow the mount's
// huge= instead.
bool follows_shmem_enabled(const mapping_info& m) {
  const std::string_view name = m.name;
  return !m.is_hugetlb() && m.permissions.size() == 4 && m.permissions[3] == 's' &&
         (name.rfind("/dev/zero", 0) == 0 || name.rfind("/SYSV", 0) == 0 ||
          name.rfind("/memfd:", 0) == 0 || name.rfind("[anon_shmem", 0) == 0);
}

std::string shmem_reason(const std::string& shmem_enabled) {
  return "shared memory (MAP_SHARED anonymous, SysV or memfd) under shmem_enabled=" +
         shmem_enabled + ": MADV_COLLAPSE refuses it with EINVAL.";
}

}  // namespace

std::string blocked_label(const std::string& reason) {
  if (reason.rfind("THP is disabled", 0) == 0) return "THP disabled for the process";
  if (reason == file_reason) return "private file mapping";
  if (reason.rfind("shared memory", 0) == 0) {
    const auto at = reason.find("shmem_enabled=");
    return reason.substr(at, reason.find(':', at) - at);
  }
  return "VM_NOHUGEPAGE";
}

std::string memory_limit_file(std::string_view proc_cgroup_text) {
  // v1: a line "ID:controllers:path" whose controllers name memory; v2: "0::path" alone.
  while (!proc_cgroup_text.empty()) {
    const auto newline = proc_cgroup_text.find('\n');
    const std::string_view line = proc_cgroup_text.substr(0, newline);
    proc_cgroup_text.remove_prefix(newline == std::string_view::npos ? proc_cgroup_text.size()
                                                                     : newline + 1);
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    while (!controllers.empty()) {
      const auto comma = controllers.find(',');
      if (controllers.substr(0, comma) == "memory") return "memory.limit_in_bytes (cgroup v1)";
      controllers.remove_prefix(comma == std::string_view::npos ? controllers.size() : comma + 1);
    }
  }
  return "memory.max (cgroup v2)";
}

std::string explain_refusal(int error, pid_t pid) {
  return explain_refusal(error, process_view(pid));
}

std::string explain_refusal(int error, const process_view& target) {
  const std::string who = "pid " + std::to_string(target.pid());
  switch (error) {
    case EPERM:
    case EACCES:
      return fmt::format(
          "{}: process_madvise(MADV_COLLAPSE) needs CAP_SYS_NICE and ptrace access to {} "
          "(PTRACE_MODE_READ: the same user and no more privileged, or CAP_SYS_PTRACE). Run "
          "as root, or as a user with both capabilities.",
          std::strerror(error), who);
    case EINVAL:
      return "EINVAL: the kernel refused the range: a kernel before 6.1 has no MADV_COLLAPSE; or "
             "the range is not eligible (hugetlb, a special mapping, crossing mappings); or THP "
             "is disabled for the process (prctl PR_SET_THP_DISABLE, or THP enabled=never on "
             "some kernels); or the mapping has VM_NOHUGEPAGE (MADV_NOHUGEPAGE).";
    case EAGAIN:
      return fmt::format(
          "EAGAIN (transient): pages were busy (locked, pinned or under writeback), still on "
          "the last of up to {} passes within the budget. Run again later.",
          collapse_passes);
    case ENOMEM:
      return "ENOMEM (transient): no free 2 MiB block even after compaction, or the memory "
             "cgroup is at its limit. Free memory or compact it (/proc/sys/vm/compact_memory), "
             "then run again.";
    case EBUSY: {
      // Not transient: a cgroup at its limit stays there until the process shrinks or the
      // limit is raised, and more collapsing only fills it further.
      std::error_code ec;
      const auto cgroup = target.read_text("cgroup", ec);
      return fmt::format(
          "EBUSY: the process's memory cgroup could not be charged for the new huge page: it is "
          "at its limit ({}), which each collapse brings closer (a collapse fills partly "
          "populated chunks). Raise the limit, or collapse less (--max-bytes).",
          memory_limit_file(cgroup.value_or("")));
    }
    case ESRCH: return "ESRCH: " + who + " has exited.";
    default: return fmt::format("{}: unexpected refusal", std::strerror(error));
  }
}

namespace {

// The huge share of what is resident in a range: what a collapse can change (it makes no
// unpopulated memory huge but in the chunks it fills). NaN where some bytes are unknown.
double resident_share(const backing_report& b) {
  if (!b.known()) return b.huge_fraction();
  const std::size_t resident = b.resident_bytes();
  return resident == 0 ? 0.0 : static_cast<double>(b.huge_bytes()) / static_cast<double>(resident);
}

}  // namespace

namespace {

// Fills `report` with the candidate ranges of the process of `view` (`mappings`: its smaps):
// rows, largest expected gain first, blocked ranges last; expected gain, growth, blocked bytes.
// `thp_disabled`: status THP_enabled 0. Changes nothing.
void list_candidates(const process_view& view, const std::vector<mapping_info>& mappings,
                     bool thp_disabled, collapse_report& report) {
  const std::string shmem_enabled = read_thp_settings().shmem_enabled.value_or("");
  // deny forbids huge pages to shared memory, MADV_COLLAPSE's too; never stops only faults and
  // khugepaged (Linux 6.18 collapses memfd and MAP_SHARED memory under never).
  const bool shmem_blocked = shmem_enabled == "deny";
  for (const mapping_info& m : mappings) {
    const bool shmem = shmem_blocked && follows_shmem_enabled(m);
    const bool file = private_file_with_copies(m);
    if (!collapsible(m) && !shmem && !file) continue;
    const std::uintptr_t lo = (m.start + chunk - 1) & ~(chunk - 1);
    const std::uintptr_t hi = m.end & ~(chunk - 1);
    if (lo >= hi) continue;
    const backing_report b = backing_of(view, reinterpret_cast<const void*>(lo), hi - lo);
    if (b.base == 0) continue;
    collapse_row row;
    row.start = lo;
    row.end = hi;
    row.name = m.name.empty() ? "[anon]" : m.name;
    row.on_base = b.base;
    row.blocked = shmem  ? shmem_reason(shmem_enabled)
                  : file ? file_reason
                         : blocked_reason(m, thp_disabled);
    row.before = row.after = resident_share(b);
    if (row.blocked.empty()) {
      row.resident_base = b.base;
      row.growth = collapse_growth(view, lo, hi);
      report.expected_gain += b.base;
      if (row.growth) report.growth += *row.growth;
    } else {
      row.growth = 0;
      report.blocked += b.base;
      if (std::find(report.blocked_why.begin(), report.blocked_why.end(), row.blocked) ==
          report.blocked_why.end()) {
        report.blocked_why.push_back(row.blocked);
      }
    }
    report.rows.push_back(std::move(row));
  }
  std::stable_sort(report.rows.begin(), report.rows.end(),
                   [](const collapse_row& a, const collapse_row& b) {
                     if (a.blocked.empty() != b.blocked.empty()) return a.blocked.empty();
                     return a.resident_base != b.resident_base ? a.resident_base > b.resident_base
                                                               : a.on_base > b.on_base;
                   });
}

}  // namespace

std::optional<std::size_t> predicted_collapse_growth(const process_view& target,
                                                     const std::vector<mapping_info>& mappings,
                                                     bool thp_disabled) {
  collapse_report report;
  list_candidates(target, mappings, thp_disabled, report);
  for (const collapse_row& row : report.rows) {
    if (!row.growth) return std::nullopt;
  }
  return report.growth;
}

collapse_report run_collapse(const collapse_options& o, const process_view& view,
                             std::error_code& ec, std::string& error) {
  // The budget bounds the whole run: reading the process's mappings counts too.
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  const pid_t pid = view.pid();
  collapse_report report;
  report.pid = pid;
  report.dry_run = o.dry_run;
  report.budget = o.budget;
  report.max_bytes = o.max_bytes;
  const auto status_text = view.read_text("status", ec);
  const std::optional<process_status> status =
      status_text ? std::optional<process_status>(parse_status(*status_text)) : std::nullopt;
  // A thread's id reads its process's memory, but process_madvise needs the process itself.
  if (const auto tgid = status ? status->number("Tgid") : std::nullopt;
      tgid && *tgid != static_cast<std::uint64_t>(pid)) {
    ec = std::make_error_code(std::errc::invalid_argument);
    error =
        fmt::format("pid {} is a thread of process {}: a collapse works on a process (--pid {})",
                    pid, *tgid, *tgid);
    return report;
  }
  // The target opened once: its smaps, pagemap and maps serve every row's coverage, growth and
  // collapse.
  const std::vector<mapping_info> mappings = view.read_smaps(ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) {
      error = "no process with pid " + std::to_string(pid);
    } else if (ec == std::errc::no_such_process) {
      error = "pid " + std::to_string(pid) + " exited while being read; nothing collapsed";
    } else if (ec == std::errc::permission_denied || ec == std::errc::operation_not_permitted) {
      // Reading smaps and pagemap is all a dry run does and the first step of a collapse: the
      // access rules of the process report. The collapse itself needs more.
      error = explain_unreadable(pid, ec.value(), read_access_facts(view));
      if (!o.dry_run) {
        error +=
            "; the collapse (process_madvise MADV_COLLAPSE) needs CAP_SYS_NICE and ptrace "
            "access to pid " +
            std::to_string(pid) + " besides";
      }
    } else {
      error = "cannot read " + view.path_of("smaps") + ": " + ec.message();
    }
    return report;
  }
  const auto thp_enabled = status ? status->number("THP_enabled") : std::nullopt;
  list_candidates(view, mappings, thp_enabled && *thp_enabled == 0, report);
  test_hook();
  // A process that died while it was read leaves a short smaps and mappings that answer nothing
  // (PROCMAP_QUERY: ESRCH): no candidates, which is no finding. Its pidfd says so.
  if (view.exited()) {
    ec = std::make_error_code(std::errc::no_such_process);
    error = "pid " + std::to_string(pid) + " exited while being read; nothing collapsed";
    return report;
  }
  if (o.dry_run) return report;

  std::size_t submitted = 0;
  // One pass over `row` in what is left of the budget; false when the budget is spent or an
  // error ends the run. The row keeps what its last pass found (a chunk collapsed by an earlier
  // pass is found huge and skipped for free).
  // After a pause, a pass submits at least one chunk: the budget may be exceeded by one chunk,
  // and a pause followed by nothing would be time spent for no try.
  const auto collapse_once = [&](collapse_row& row, bool after_pause) {
    const auto spent = clock::now() - start;
    if (submitted >= o.max_bytes || (spent >= o.budget && !after_pause)) return false;
    hugepage::collapse_budget budget;
    budget.time = std::chrono::duration_cast<std::chrono::nanoseconds>(o.budget - spent);
    budget.bytes = o.max_bytes - submitted;
    if (spent >= o.budget) budget = {std::chrono::nanoseconds::max(), chunk};
    const collapse_result r =
        hugepage::collapse(view, reinterpret_cast<void*>(row.start), row.end - row.start, budget);
    // Attempted: a chunk was submitted (the budget may be spent before the first).
    if (r.calls != 0) {
      row.attempted = true;
      ++row.passes;
    }
    row.collapsed += r.collapsed;
    row.refused = r.refused;
    row.left = r.left;
    // What is resident there: on sparse memory far less than the chunks' address range.
    const auto resume = reinterpret_cast<std::uintptr_t>(r.resume);
    row.left_base =
        r.left == 0 || resume >= row.end
            ? 0
            : backing_of(view, reinterpret_cast<const void*>(resume), row.end - resume).base;
    row.ms += std::chrono::duration<double, std::milli>(r.elapsed).count();
    row.refusals.clear();
    for (const collapse_refusal& x : r.refusals) {
      if (x.chunks != 0) row.refusals.emplace_back(x.error, x.chunks);
    }
    submitted += r.collapsed + r.refused;
    report.collapsed += r.collapsed;
    row.after = resident_share(
        backing_of(view, reinterpret_cast<const void*>(row.start), row.end - row.start));
    if (r.fatal) report.fatal = r.fatal;
    return !r.fatal;
  };
  const auto busy = [](const collapse_row& row) {
    return std::any_of(row.refusals.begin(), row.refusals.end(),
                       [](const auto& refusal) { return refusal.first == EAGAIN; });
  };
  bool going = true;
  for (collapse_row& row : report.rows) {
    if (row.blocked.empty() && !(going = collapse_once(row, false))) break;
  }
  // EAGAIN is the kernel's "a page was busy": locked or pinned for a moment (an I/O into it, a
  // splice). Ranges with such chunks get more passes while the budget lasts, each after a short
  // pause, so that a moment's pin does not leave 2 MiB on base pages.
  for (int pass = 1; going && pass < collapse_passes; ++pass) {
    if (std::none_of(report.rows.begin(), report.rows.end(), busy)) break;
    // A pause that would spend what is left of the budget leaves no time for the pass after it.
    const clock::duration pause = std::chrono::milliseconds(10 * pass);
    if (o.budget - (clock::now() - start) <= pause) break;
    std::this_thread::sleep_for(pause);
    test_hook();
    bool first = true;
    for (collapse_row& row : report.rows) {
      if (!busy(row)) continue;
      if (!(going = collapse_once(row, first))) break;
      first = false;
    }
  }
  // Each refusal the run ends with, explained once.
  std::vector<int> seen;
  const auto explain = [&](int refusal) {
    if (std::find(seen.begin(), seen.end(), refusal) != seen.end()) return;
    seen.push_back(refusal);
    report.explanations.push_back(explain_refusal(refusal, view));
  };
  for (const collapse_row& row : report.rows) {
    for (const auto& refusal : row.refusals) explain(refusal.first);
  }
  if (report.fatal) explain(report.fatal.value());
  if (!report.fatal) {
    for (const collapse_row& row : report.rows) {
      if (!row.blocked.empty()) continue;
      report.remaining += row.attempted ? row.left_base : row.resident_base;
      report.remaining_range += row.attempted ? row.left : row.end - row.start;
    }
    if (report.remaining != 0) {
      report.stopped_by = submitted >= o.max_bytes ? "--max-bytes" : "--budget-ms";
    }
  }
  return report;
}

}  // namespace hugepage::doctor
