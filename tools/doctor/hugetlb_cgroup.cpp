// tools/doctor/hugetlb_cgroup.cpp - the hugetlb cgroup limits of a process, for its report.
//
// Where the cgroup lives is the library's answer (hugepage/cgroup.hpp: /proc/PID/cgroup against
// mountinfo); what the doctor adds is the report: every limit file of each size (max, rsvd.max,
// usage, refusals), and why nothing could be read.
#include "hugetlb_cgroup.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "read_text.hpp"

namespace hugepage::doctor {

namespace {

// True when the whitespace-separated list `text` (cgroup.controllers) holds `word`.
bool has_word(std::string_view text, std::string_view word) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find_first_of(" \t\n", at);
    if (text.substr(at, end == std::string_view::npos ? end : end - at) == word) return true;
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return false;
}

// The limits of each of `page_sizes` in `directory` (under root): every size with a readable
// limit file, or with `only_finite` only those where a limit is set.
void read_sizes(const std::string& root, const std::string& directory, bool v2, bool only_finite,
                const std::vector<std::size_t>& page_sizes, cgroup_report& report) {
  for (const std::size_t bytes : page_sizes) {
    hugetlb_limit limit;
    limit.page_bytes = bytes;
    limit.version = v2 ? "v2" : "v1";
    limit.directory = directory;
    const hugetlb_charge_files fault =
        read_hugetlb_charge(directory, bytes, hugetlb_charge::fault, v2, root);
    const hugetlb_charge_files reservation =
        read_hugetlb_charge(directory, bytes, hugetlb_charge::reservation, v2, root);
    if (fault.limit) {
      limit.has_max = true;
      limit.max = *fault.limit;
    }
    if (reservation.limit) {
      limit.has_rsvd_max = true;
      limit.rsvd_max = *reservation.limit;
    }
    limit.current = fault.usage;
    limit.rsvd_current = reservation.usage;
    // How often the limit refused: v2 events "max N", v1 failcnt.
    limit.refused = read_hugetlb_refusals(directory, bytes, v2, root);
    const bool finite = (limit.has_max && limit.max) || (limit.has_rsvd_max && limit.rsvd_max);
    if ((limit.has_max || limit.has_rsvd_max) && (finite || !only_finite)) {
      report.limits.push_back(limit);
    }
  }
}

// A whole number in `text` (a cgroup file: digits and a newline); nullopt for "max" or anything
// else.
std::optional<std::uint64_t> cgroup_number(const std::optional<std::string>& text) {
  if (!text || text->empty() || (*text)[0] < '0' || (*text)[0] > '9') return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : *text) {
    if (c == '\n') break;
    if (c < '0' || c > '9' || value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

// The sum of `fields` ("name value" lines) of a memory.stat text.
std::uint64_t stat_fields(const std::optional<std::string>& text,
                          std::initializer_list<std::string_view> fields) {
  std::uint64_t sum = 0;
  std::string_view rest = text ? std::string_view(*text) : std::string_view();
  while (!rest.empty()) {
    const auto newline = rest.find('\n');
    const std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) continue;
    for (const std::string_view f : fields) {
      if (line.substr(0, space) == f) {
        sum += cgroup_number(std::string(line.substr(space + 1))).value_or(0);
      }
    }
  }
  return sum;
}

}  // namespace

std::optional<cgroup_limit> memory_cgroup_limit(const std::string& root,
                                                std::string_view cgroup_file_text) {
  const auto mounts = read_mountinfo(root);
  if (!mounts) return std::nullopt;
  const std::vector<std::string> directories =
      cgroup_directories_of("memory", parse_proc_cgroup(cgroup_file_text), *mounts);
  std::optional<cgroup_limit> tightest;
  const auto keep = [&](cgroup_limit l) {
    if (!tightest || l.headroom() < tightest->headroom()) tightest = std::move(l);
  };
  constexpr std::uint64_t unlimited = std::uint64_t{1} << 60;  // v1's "no limit" is near 2^63
  for (const std::string& dir : directories) {
    if (const auto v1 = cgroup_number(read_text(root, dir + "/memory.limit_in_bytes"))) {
      if (*v1 >= unlimited) continue;
      keep({dir + "/memory.limit_in_bytes", *v1,
            cgroup_number(read_text(root, dir + "/memory.usage_in_bytes")).value_or(0),
            stat_fields(read_text(root, dir + "/memory.stat"),
                        {"total_active_file", "total_inactive_file"})});
      continue;
    }
    for (const char* name : {"/memory.max", "/memory.high"}) {
      const auto limit = cgroup_number(read_text(root, dir + name));
      if (!limit) continue;  // "max", or no such file (the root, a level without the controller)
      const auto usage = cgroup_number(read_text(root, dir + "/memory.current"));
      if (!usage) break;
      keep({dir + name, *limit, *usage,
            stat_fields(read_text(root, dir + "/memory.stat"), {"active_file", "inactive_file"})});
    }
  }
  return tightest;
}

cgroup_report hugetlb_cgroup_report(const std::string& root, std::string_view cgroup_file_text,
                                    const std::vector<std::size_t>& page_sizes) {
  return hugetlb_cgroup_report(root, parse_proc_cgroup(cgroup_file_text), page_sizes);
}

cgroup_report hugetlb_cgroup_report(const std::string& root,
                                    const std::vector<proc_cgroup_line>& cgroups,
                                    const std::vector<std::size_t>& page_sizes) {
  cgroup_report report;
  const cgroup_paths member = cgroup_paths_of(cgroups, "hugetlb");
  const auto mounts = read_mountinfo(root);
  // Innermost first, the mount point last, as the machine names them (read under `root`).
  const std::vector<std::string> directories =
      mounts ? cgroup_directories_of("hugetlb", cgroups, *mounts) : std::vector<std::string>{};
  // The root of a cgroup2 hierarchy lists its controllers; a v1 hierarchy has no such file.
  const auto controllers = directories.empty()
                               ? std::nullopt
                               : read_text(root, directories.back() + "/cgroup.controllers");
  if (controllers && member.v2 && has_word(*controllers, "hugetlb")) {
    report.path = *member.v2;
    read_sizes(root, directories.front(), true, false, page_sizes, report);
    report.status = "v2";
    // A limit on an ancestor applies too, and the child's files do not show it: report the
    // ancestors (below the root, which has no limit files) that set a finite one.
    for (std::size_t i = 1; i + 1 < directories.size(); ++i) {
      read_sizes(root, directories[i], true, true, page_sizes, report);
    }
    if (report.limits.empty()) {
      report.status = *member.v2 == "/" ? "v2: the root cgroup, which has no hugetlb limits"
                                        : "v2: hugetlb limit files unreadable";
    }
    return report;
  }
  if (!controllers && !directories.empty() && member.v1) {
    report.path = *member.v1;
    read_sizes(root, directories.front(), false, false, page_sizes, report);
    report.status = report.limits.empty() ? "v1 hugetlb controller unreadable" : "v1";
    return report;
  }
  report.path = member.v2.value_or("");
  report.status = "no hugetlb cgroup controller enabled for this process";
  return report;
}

}  // namespace hugepage::doctor
