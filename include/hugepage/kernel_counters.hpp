// hugepage/kernel_counters.hpp - the kernel's "key value" files: one parser, one reader each.
//
// Files made of one named number per line, in two shapes:
//   "Name:   value [kB]"   /proc/meminfo, /proc/PID/status, /proc/PID/smaps_rollup
//   "name value"           /proc/vmstat
// Each has one pure parser (text in, values out) and one reader that takes where to read from
// (`root`: "" for the live system, else a directory holding a copy of the tree, such as a capture)
// and, for a process's file, its `pid` (0: this process, /proc/self), as kernel_files.hpp's do:
//
//   file                     parser               reader (text: read_*_text)
//   /proc/meminfo            parse_meminfo        read_meminfo, read_meminfo_value
//   /proc/vmstat             parse_vmstat         read_vmstat
//   /proc/PID/status         parse_status         read_status
//   /proc/PID/smaps_rollup   parse_smaps_rollup   read_smaps_rollup
//
// A kB value is returned in bytes; a bare number (HugePages_Total, THP_enabled) as it is. A line
// with another unit, several numbers ("Uid: 0 0 0 0") or an overflow has no number; a reader
// returns an empty optional when the file cannot be read, never a made-up zero.
// Thread-safe; the parsers allocate only their results (and one buffer for a line's name): no
// temporaries per line. Minimum kernel: any (smaps_rollup 4.14,
// MemAvailable 3.14, status THP_enabled 5.0: an absent line is an absent key).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"

namespace hugepage {

/// Named numbers of a kernel file: kB values in bytes, bare numbers as they are.
using kernel_values = std::map<std::string, std::uint64_t>;

// ---- /proc/meminfo
// -------------------------------------------------------------------------------

/// Parses "Name:   value [kB]" lines (meminfo's shape; detail::for_each_kb_field says which lines
/// count). Pure.
inline kernel_values parse_meminfo(std::string_view text) {
  kernel_values values;
  std::string key;  // one buffer for every line's name: a name found again allocates nothing
  detail::for_each_kb_field(text, [&values, &key](std::string_view name, std::uint64_t bytes) {
    key.assign(name.data(), name.size());
    values[key] = bytes;
  });
  return values;
}

/// The text of /proc/meminfo under `root`; nullopt when unreadable.
inline std::optional<std::string> read_meminfo_text(const std::string& root = "") {
  return detail::read_under_root(root, "/proc/meminfo");
}

/// Reads /proc/meminfo under `root`; nullopt when unreadable.
inline std::optional<kernel_values> read_meminfo(const std::string& root = "") {
  const auto text = read_meminfo_text(root);
  if (!text) return std::nullopt;
  return parse_meminfo(*text);
}

/// One value of /proc/meminfo under `root` ("MemAvailable", "Hugepagesize"), in bytes for kB
/// lines; nullopt when the file cannot be read or has no such line.
inline std::optional<std::uint64_t> read_meminfo_value(std::string_view name,
                                                       const std::string& root = "") {
  const auto text = read_meminfo_text(root);
  if (!text) return std::nullopt;
  return detail::kb_field(*text, name);
}

// ---- /proc/vmstat
// --------------------------------------------------------------------------------

/// Parses "name value" lines (/proc/vmstat): the first two words, the second all digits and
/// without overflow; other lines are skipped. Pure.
inline kernel_values parse_vmstat(std::string_view text) {
  kernel_values values;
  std::string key;  // one buffer for every line's name
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  for (std::string_view line : detail::split(text, '\n')) {
    const auto next_word = [&]() {
      while (!line.empty() && blank(line.front())) line.remove_prefix(1);
      std::size_t n = 0;
      while (n < line.size() && !blank(line[n])) ++n;
      const std::string_view word = line.substr(0, n);
      line.remove_prefix(n);
      return word;
    };
    const std::string_view name = next_word();
    const std::string_view number = next_word();
    if (name.empty() || number.empty() ||
        number.find_first_not_of("0123456789") != std::string_view::npos) {
      continue;
    }
    if (const auto value = detail::parse_u64(number)) {
      key.assign(name.data(), name.size());
      values[key] = *value;
    }
  }
  return values;
}

/// Reads /proc/vmstat under `root`; nullopt when unreadable.
inline std::optional<kernel_values> read_vmstat(const std::string& root = "") {
  const auto text = detail::read_under_root(root, "/proc/vmstat");
  if (!text) return std::nullopt;
  return parse_vmstat(*text);
}

// ---- /proc/PID/status
// ----------------------------------------------------------------------------

/// A process's status file: every "Key:\tvalue" line as text, and its numbers.
struct process_status {
  /// Value of each key, blanks and '\r' trimmed. A key written twice: the first line wins, here
  /// and in `numbers`, so field() and number() never disagree.
  std::map<std::string, std::string> text;
  kernel_values numbers;  ///< the lines parse_meminfo() reads: kB in bytes; first wins

  /// The text of `key` ("Name", "Seccomp"); nullopt when there is no such line.
  std::optional<std::string> field(const std::string& key) const {
    const auto it = text.find(key);
    if (it == text.end()) return std::nullopt;
    return it->second;
  }
  /// The number of `key` ("Tgid", "THP_enabled", "VmHWM" in bytes); nullopt when absent.
  std::optional<std::uint64_t> number(const std::string& key) const {
    const auto it = numbers.find(key);
    if (it == numbers.end()) return std::nullopt;
    return it->second;
  }
  /// A hexadecimal mask (CapEff, CapPrm, ...); nullopt when absent or not hex.
  std::optional<std::uint64_t> mask(const std::string& key) const {
    const auto value = field(key);
    if (!value || value->empty() || value->size() > 16 ||
        value->find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return std::nullopt;
    }
    std::uint64_t bits = 0;
    for (const char c : *value) {
      const int digit = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      bits = bits << 4U | static_cast<std::uint64_t>(digit);
    }
    return bits;
  }
};

/// Parses /proc/PID/status text: lines without ':' or with an empty key are skipped; a key is
/// trimmed of blanks. Of a key written twice the first line counts, and a key's number is read
/// from that line's value alone (detail::kb_value), so field() and number() never disagree. Pure.
inline process_status parse_status(std::string_view text) {
  process_status status;
  std::string key_buffer;  // one buffer for every line's key: a key found again allocates nothing
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    while (!key.empty() && (key.front() == ' ' || key.front() == '\t')) key.remove_prefix(1);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
    if (key.empty()) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) {
      value.remove_prefix(1);
    }
    while (!value.empty() && blank(value.back())) value.remove_suffix(1);
    key_buffer.assign(key.data(), key.size());
    if (status.text.find(key_buffer) != status.text.end()) continue;
    const auto at = status.text.emplace(key_buffer, std::string(value)).first;
    if (const std::optional<std::uint64_t> number = detail::kb_value(value)) {
      status.numbers.emplace(at->first, *number);
    }
  }
  return status;
}

/// The text of /proc/PID/status under `root` (pid 0: /proc/self); nullopt when unreadable.
inline std::optional<std::string> read_status_text(const std::string& root = "", pid_t pid = 0) {
  return detail::read_under_root(root, detail::proc_path(pid, "status"));
}

/// Reads /proc/PID/status under `root` (pid 0: /proc/self); nullopt when unreadable.
inline std::optional<process_status> read_status(const std::string& root = "", pid_t pid = 0) {
  const auto text = read_status_text(root, pid);
  if (!text) return std::nullopt;
  return parse_status(*text);
}

// ---- /proc/PID/smaps_rollup
// ----------------------------------------------------------------------

/// The sums of a process's smaps (Linux 4.14+) that say how much of it is huge. Bytes.
struct smaps_totals {
  std::uint64_t rss = 0;        ///< Rss: resident base and THP pages (hugetlb pages are not)
  std::uint64_t anon_huge = 0;  ///< AnonHugePages: PMD-mapped anonymous THP
  std::uint64_t hugetlb = 0;    ///< Private_Hugetlb + Shared_Hugetlb (UINT64_MAX past 64 bits)
  /// rss + hugetlb; UINT64_MAX when that does not fit (sums here saturate, never wrap).
  std::uint64_t resident() const noexcept { return detail::saturating_add(rss, hugetlb); }
  /// anon_huge + hugetlb; UINT64_MAX when that does not fit.
  std::uint64_t huge() const noexcept { return detail::saturating_add(anon_huge, hugetlb); }
};

/// Parses smaps_rollup text; nullopt without an Rss line (not a rollup). An absent huge line
/// counts 0 (kernels before the line). Pure.
inline std::optional<smaps_totals> parse_smaps_rollup(std::string_view text) {
  // The four fields it keeps, taken as the lines go (the last of each, as parse_meminfo keeps):
  // nothing allocated, where a map of every field would grow with the text's distinct names.
  bool has_rss = false;
  std::uint64_t rss = 0, anon_huge = 0, private_hugetlb = 0, shared_hugetlb = 0;
  detail::for_each_kb_field(text, [&](std::string_view name, std::uint64_t bytes) {
    if (name == "Rss") {
      rss = bytes;
      has_rss = true;
    } else if (name == "AnonHugePages") {
      anon_huge = bytes;
    } else if (name == "Private_Hugetlb") {
      private_hugetlb = bytes;
    } else if (name == "Shared_Hugetlb") {
      shared_hugetlb = bytes;
    }
  });
  if (!has_rss) return std::nullopt;
  return smaps_totals{rss, anon_huge, detail::saturating_add(private_hugetlb, shared_hugetlb)};
}

/// Reads /proc/PID/smaps_rollup under `root` (pid 0: /proc/self); nullopt when unreadable or
/// not a rollup.
inline std::optional<smaps_totals> read_smaps_rollup(const std::string& root = "", pid_t pid = 0) {
  const auto text = detail::read_under_root(root, detail::proc_path(pid, "smaps_rollup"));
  if (!text) return std::nullopt;
  return parse_smaps_rollup(*text);
}

}  // namespace hugepage
