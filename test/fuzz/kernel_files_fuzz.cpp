// test/fuzz/kernel_files_fuzz.cpp - libFuzzer target for the parsers of kernel_files.hpp.
//
// The first byte chooses the parser ('0' + n, taken modulo the count), the rest is the text:
//   0 parse_mountinfo    1 parse_proc_cgroup (and cgroup_paths_of)   2 parse_cgroup_limit
//   3 parse_cgroup_events_max   4 parse_statm   5 parse_kernel_version   6 parse_cpuinfo
//   7 parse_decimal
// Properties (besides no crash and no sanitizer report): every number returned is a decimal word
// of the text; every string returned is a piece of it (mountinfo's decoded fields excepted);
// the allocation bound of fuzz_support.hpp (nothing at all for the constexpr parsers); and the
// result written back in the kernel's format parses to the same result.
#define HUGEPAGE_FUZZ_COUNT_ALLOCATIONS
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "hugepage/kernel_files.hpp"

namespace {

using fuzz::shown;

bool piece_of(std::string_view text, std::string_view piece) {
  return text.find(piece) != std::string_view::npos;
}

// mountinfo's escapes (mangle() in fs/proc_namespace.c: space, tab, newline, backslash); a field
// that is "-" alone (the kernel's paths start with '/') is escaped too, or it would read as the
// separator.
std::string mangle(std::string_view field) {
  if (field == "-") return "\\055";
  std::string out;
  for (const char c : field) {
    if (c == ' ') {
      out += "\\040";
    } else if (c == '\t') {
      out += "\\011";
    } else if (c == '\n') {
      out += "\\012";
    } else if (c == '\\') {
      out += "\\134";
    } else {
      out += c;
    }
  }
  return out;
}

bool same(const hugepage::mount_info& a, const hugepage::mount_info& b) {
  return a.device == b.device && a.root == b.root && a.point == b.point && a.options == b.options &&
         a.fstype == b.fstype && a.source == b.source && a.super_options == b.super_options;
}

void mountinfo(std::string_view text) {
  std::vector<hugepage::mount_info> mounts;
  const auto a = fuzz::measure([&] { return hugepage::parse_mountinfo(text); }, mounts);
  fuzz::check_allocation("parse_mountinfo", a, text);
  std::string again;
  for (const auto& m : mounts) {
    // Fields kept as written are pieces of the text, without blanks or newlines.
    for (const std::string* raw : {&m.device, &m.options, &m.fstype, &m.super_options}) {
      FUZZ_CHECK(
          !raw->empty() && piece_of(text, *raw) && raw->find_first_of(" \n") == std::string::npos,
          "mountinfo: a field kept as written is a word of the text", shown(*raw));
    }
    again += "1 2 " + m.device + " " + mangle(m.root) + " " + mangle(m.point) + " " + m.options +
             " shared:1 - " + m.fstype + " " + mangle(m.source) + " " + m.super_options + "\n";
  }
  const auto reparsed = hugepage::parse_mountinfo(again);
  FUZZ_CHECK(reparsed.size() == mounts.size(), "mountinfo round-trips", shown(again));
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    FUZZ_CHECK(same(mounts[i], reparsed[i]), "mountinfo round-trips", shown(again));
  }
}

void proc_cgroup(std::string_view text) {
  std::vector<hugepage::proc_cgroup_line> lines;
  const auto a = fuzz::measure([&] { return hugepage::parse_proc_cgroup(text); }, lines);
  fuzz::check_allocation("parse_proc_cgroup", a, text);
  std::string again;
  for (const auto& l : lines) {
    const std::string whole = l.hierarchy + ":" + l.controllers + ":" + l.path;
    FUZZ_CHECK(piece_of(text, whole), "proc cgroup: a line is a line of the text", shown(whole));
    FUZZ_CHECK(l.hierarchy.find_first_of(":\n") == std::string::npos &&
                   l.controllers.find_first_of(":\n") == std::string::npos &&
                   l.path.find('\n') == std::string::npos,
               "proc cgroup: fields split at the first two colons", shown(whole));
    again += whole + "\n";
  }
  const auto reparsed = hugepage::parse_proc_cgroup(again);
  FUZZ_CHECK(reparsed.size() == lines.size(), "proc cgroup round-trips", shown(again));
  for (std::size_t i = 0; i < lines.size(); ++i) {
    FUZZ_CHECK(reparsed[i].hierarchy == lines[i].hierarchy &&
                   reparsed[i].controllers == lines[i].controllers &&
                   reparsed[i].path == lines[i].path,
               "proc cgroup round-trips", shown(again));
  }
  for (const char* controller : {"hugetlb", "memory", ""}) {
    const auto paths = hugepage::cgroup_paths_of(lines, controller);
    for (const auto* path : {&paths.v1, &paths.v2}) {
      if (!*path) continue;
      FUZZ_CHECK(!(*path)->empty() && (*path)->front() == '/' && piece_of(text, **path),
                 "cgroup_paths_of: a path is absolute and a piece of the text", shown(**path));
    }
  }
}

void cgroup_limit(std::string_view text) {
  std::optional<std::optional<std::uint64_t>> limit;
  const auto a = fuzz::measure([&] { return hugepage::parse_cgroup_limit(text); }, limit);
  fuzz::check_no_allocation("parse_cgroup_limit", a);
  if (!limit) return;
  const std::string_view first = text.substr(0, text.find('\n'));
  if (!*limit) {
    // "max", or v1's unlimited: a number of 2^62 or more (which the words hold).
    bool huge = false;
    for (const std::uint64_t w : fuzz::decimal_words(first)) huge = huge || w >= (1ULL << 62);
    FUZZ_CHECK(piece_of(first, "max") || huge, "cgroup limit: no limit is what the text says",
               shown(text));
    FUZZ_CHECK(hugepage::parse_cgroup_limit("max\n") == limit, "cgroup limit round-trips", "max");
    return;
  }
  FUZZ_CHECK(fuzz::decimal_words(first).count(**limit) == 1,
             "cgroup limit: the limit is a number of the first line", shown(text));
  const std::string again = std::to_string(**limit) + "\n";
  FUZZ_CHECK(hugepage::parse_cgroup_limit(again) == limit, "cgroup limit round-trips", again);
}

void cgroup_events_max(std::string_view text) {
  std::optional<std::uint64_t> count;
  const auto a = fuzz::measure([&] { return hugepage::parse_cgroup_events_max(text); }, count);
  fuzz::check_no_allocation("parse_cgroup_events_max", a);
  if (!count) return;
  FUZZ_CHECK(fuzz::decimal_words(text).count(*count) == 1,
             "cgroup events: the count is a number of the text", shown(text));
  const std::string again = "low 0\nhigh 0\nmax " + std::to_string(*count) + "\noom 0\n";
  FUZZ_CHECK(hugepage::parse_cgroup_events_max(again) == count, "cgroup events round-trips", again);
}

void statm(std::string_view text) {
  std::optional<hugepage::statm_pages> pages;
  const auto a = fuzz::measure([&] { return hugepage::parse_statm(text); }, pages);
  fuzz::check_allocation("parse_statm", a, text);
  FUZZ_CHECK(a.calls == 0, "statm: allocates nothing (its result is two numbers)", shown(text));
  if (!pages) return;
  const auto words = fuzz::decimal_words(text);
  FUZZ_CHECK(words.count(pages->size) == 1 && words.count(pages->resident) == 1,
             "statm: both numbers are numbers of the text", shown(text));
  const std::string again =
      std::to_string(pages->size) + " " + std::to_string(pages->resident) + " 0 0 0 0 0\n";
  const auto reparsed = hugepage::parse_statm(again);
  FUZZ_CHECK(reparsed && reparsed->size == pages->size && reparsed->resident == pages->resident,
             "statm round-trips", again);
}

void kernel_version(std::string_view text) {
  std::optional<hugepage::kernel_version> version;
  const auto a = fuzz::measure([&] { return hugepage::parse_kernel_version(text); }, version);
  fuzz::check_no_allocation("parse_kernel_version", a);
  if (!version) return;
  const auto words = fuzz::decimal_words(text);
  FUZZ_CHECK(words.count(version->major) == 1 && words.count(version->minor) == 1,
             "kernel version: major and minor are numbers of the text", shown(text));
  const std::string again =
      std::to_string(version->major) + "." + std::to_string(version->minor) + ".0-generic";
  const auto reparsed = hugepage::parse_kernel_version(again);
  FUZZ_CHECK(reparsed && reparsed->major == version->major && reparsed->minor == version->minor,
             "kernel version round-trips", again);
}

void cpuinfo(std::string_view text) {
  hugepage::cpu_info info;
  const auto a = fuzz::measure([&] { return hugepage::parse_cpuinfo(text); }, info);
  fuzz::check_allocation("parse_cpuinfo", a, text);
  FUZZ_CHECK(piece_of(text, info.model_name) && piece_of(text, info.flags),
             "cpuinfo: model and flags are pieces of the text", shown(info.model_name));
  FUZZ_CHECK(info.has_flags || info.flags.empty(), "cpuinfo: no flags line, no flags", "");
  std::string again = "processor\t: 0\nmodel name\t: " + info.model_name + "\n";
  if (info.has_flags) again += "flags\t\t: " + info.flags + "\n";
  const auto reparsed = hugepage::parse_cpuinfo(again);
  FUZZ_CHECK(reparsed.model_name == info.model_name && reparsed.flags == info.flags &&
                 reparsed.has_flags == info.has_flags,
             "cpuinfo round-trips", shown(again));
  // has_flag finds exactly the space-separated words of the flags line.
  std::string_view flags = info.flags;
  while (!flags.empty()) {
    const std::size_t space = flags.find(' ');
    const std::string_view word = flags.substr(0, space);
    FUZZ_CHECK(info.has_flag(word), "cpuinfo: has_flag finds each word of flags", shown(word));
    flags.remove_prefix(space == std::string_view::npos ? flags.size() : space + 1);
  }
}

void decimal(std::string_view text) {
  std::optional<std::uint64_t> value;
  const auto a = fuzz::measure([&] { return hugepage::parse_decimal(text); }, value);
  fuzz::check_no_allocation("parse_decimal", a);
  if (!value) return;
  FUZZ_CHECK(fuzz::decimal_words(text).count(*value) == 1,
             "decimal: the number is a number of the text", shown(text));
  FUZZ_CHECK(hugepage::parse_decimal(std::to_string(*value)) == value, "decimal round-trips",
             std::to_string(*value));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (static_cast<unsigned>(data[0] - '0') % 8U) {
    case 0: mountinfo(text); break;
    case 1: proc_cgroup(text); break;
    case 2: cgroup_limit(text); break;
    case 3: cgroup_events_max(text); break;
    case 4: statm(text); break;
    case 5: kernel_version(text); break;
    case 6: cpuinfo(text); break;
    default: decimal(text); break;
  }
  return 0;
}
