// hugepage/smaps.hpp - parsing /proc/<pid>/smaps: one record per mapping.
//
// smaps is the only per-mapping account of huge pages a non-root reader gets: AnonHugePages
// (PMD-mapped THP), Private_/Shared_Hugetlb, and KernelPageSize (which names hugetlb mappings).
// Adjacent mappings with the same flags merge, so a record is a VMA, not an allocation. Fields this
// parser does not know are skipped, so newer kernels' additions do not break it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage {

/// One mapping of /proc/<pid>/smaps. Sizes in bytes.
struct mapping_info {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  std::string permissions;   ///< "rw-p"
  std::uint64_t offset = 0;  ///< offset into the mapped file (or memfd, SysV segment, shmem)
  std::string device;        ///< the file's device, "00:01"
  std::uint64_t inode = 0;   ///< the file's inode; 0 for private anonymous memory
  std::string name;          ///< path, [heap], [stack], "/anon_hugepage (deleted)", or empty
  std::size_t kernel_page_bytes = 0;  ///< KernelPageSize: 2 MiB or 1 GiB for hugetlb mappings
  std::size_t rss = 0;
  std::size_t anonymous = 0;
  std::size_t anon_huge = 0;   ///< AnonHugePages: PMD-mapped anonymous THP
  std::size_t shmem_huge = 0;  ///< ShmemPmdMapped: PMD-mapped shmem/tmpfs THP
  std::size_t file_huge = 0;   ///< FilePmdMapped: PMD-mapped page-cache THP
  std::size_t private_hugetlb = 0;
  std::size_t shared_hugetlb = 0;
  std::size_t swap = 0;
  bool thp_eligible = false;  ///< THPeligible
  std::string vm_flags;       ///< "rd wr mr mw me ac hg" (hg: MADV_HUGEPAGE, nh: MADV_NOHUGEPAGE)

  std::size_t size() const noexcept { return end - start; }
  /// Whether the mapping comes from a hugetlb pool (its kernel page is larger than a base page).
  bool is_hugetlb() const noexcept { return kernel_page_bytes > os::base_page_size(); }
  /// Whether the mapping was advised with MADV_HUGEPAGE.
  bool advised_huge() const noexcept { return has_flag("hg"); }
  /// Whether `vm_flags` holds `flag` as a whole word (words split at runs of blanks).
  bool has_flag(std::string_view flag) const noexcept {
    std::string_view flags = vm_flags;
    while (!flags.empty()) {
      const std::size_t word = flags.find_first_not_of(" \t");
      if (word == std::string_view::npos) break;
      flags.remove_prefix(word);
      const std::size_t blank = flags.find_first_of(" \t");
      if (flags.substr(0, blank) == flag) return true;
      if (blank == std::string_view::npos) break;
      flags.remove_prefix(blank);
    }
    return false;
  }
};

namespace detail {

inline std::string_view next_token(std::string_view& text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  std::size_t n = 0;
  while (n < text.size() && text[n] != ' ' && text[n] != '\t') ++n;
  const std::string_view token = text.substr(0, n);
  text.remove_prefix(n);
  return token;
}

// A whole word of hex digits that fits `out`; false (and `out` unchanged) otherwise.
inline bool parse_hex(std::string_view text, std::uintptr_t& out) {
  if (text.empty()) return false;
  std::uintptr_t value = 0;
  for (const char ch : text) {
    int digit;
    if (ch >= '0' && ch <= '9') {
      digit = ch - '0';
    } else if (ch >= 'a' && ch <= 'f') {
      digit = ch - 'a' + 10;
    } else if (ch >= 'A' && ch <= 'F') {
      digit = ch - 'A' + 10;
    } else {
      return false;
    }
    if (value > (~std::uintptr_t{0} >> 4)) return false;  // one more digit would not fit
    value = value * 16 + static_cast<std::uintptr_t>(digit);
  }
  out = value;
  return true;
}

// "7f12a0000000-7f12a4000000 rw-p 00000000 00:00 0   [heap]" -> a record; false if not a header:
// the range, offset and inode must be whole numbers that fit, and the range must not be empty or
// reversed (the kernel writes no such mapping; a record of one would count made-up bytes).
inline bool parse_mapping_header(std::string_view line, mapping_info& m) {
  std::string_view rest = line;
  const std::string_view range = next_token(rest);
  const auto dash = range.find('-');
  if (dash == std::string_view::npos) return false;
  std::uintptr_t start = 0, end = 0;
  if (!parse_hex(range.substr(0, dash), start) || !parse_hex(range.substr(dash + 1), end) ||
      end <= start) {
    return false;
  }
  const std::string_view permissions = next_token(rest);
  std::uintptr_t offset = 0;
  if (!parse_hex(next_token(rest), offset)) return false;
  const std::string_view device = next_token(rest);
  const std::string_view inode_word = next_token(rest);
  if (inode_word.empty() || inode_word.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  const auto inode = parse_u64(inode_word);
  if (!inode) return false;
  m.start = start;
  m.end = end;
  m.permissions = std::string(permissions);
  m.offset = offset;
  m.device = std::string(device);
  m.inode = *inode;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  m.name = std::string(rest);
  return true;
}

// The value of an smaps field line after its "Name:": a whole number of digits that fits 64 bits,
// then "kB" (`kb` true) or nothing ("THPeligible:    1"), then nothing but blanks and a '\r'.
// False for anything else ("lots kB", "12x kB", "4 MB", "1 2").
inline bool parse_smaps_value(std::string_view rest, std::uint64_t& number, bool& kb) {
  const std::string_view digits = next_token(rest);
  std::string_view unit = next_token(rest);
  while (!unit.empty() && unit.back() == '\r') unit.remove_suffix(1);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t' || rest.front() == '\r')) {
    rest.remove_prefix(1);
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos ||
      !rest.empty() || (unit != "kB" && !unit.empty())) {
    return false;
  }
  const auto value = parse_u64(digits);
  if (!value) return false;
  number = *value;
  kb = !unit.empty();
  return true;
}

}  // namespace detail

/// Parses the text of an smaps file. Unknown fields are ignored; a malformed line is skipped: a
/// header whose range, offset or inode is not a whole number that fits, or whose range is empty or
/// reversed (and the fields after it, which belong to no mapping), and a field whose value is not
/// a whole number with the unit its field has (kB; THPeligible none). A kB value past SIZE_MAX
/// bytes reads SIZE_MAX (saturated, never wrapped).
/// Allocates only its result (no per-line temporaries).
inline std::vector<mapping_info> parse_smaps(std::string_view text) {
  std::vector<mapping_info> mappings;
  bool in_mapping = false;  // fields after a malformed header belong to no mapping
  while (!text.empty()) {
    const auto newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (line.empty()) continue;
    std::string_view rest = line;
    const std::string_view key = detail::next_token(rest);
    if (key.empty()) continue;
    if (key.back() != ':') {
      if (key.find('-') == std::string_view::npos) continue;  // junk: not a header, not a field
      mapping_info m;
      in_mapping = detail::parse_mapping_header(line, m);
      if (in_mapping) mappings.push_back(std::move(m));
      continue;
    }
    if (!in_mapping) continue;
    mapping_info& m = mappings.back();
    const std::string_view name = key.substr(0, key.size() - 1);
    if (name == "VmFlags") {
      while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
      m.vm_flags.assign(rest.data(), rest.size());
      continue;
    }
    std::uint64_t number = 0;
    bool kb = false;
    if (!detail::parse_smaps_value(rest, number, kb)) continue;
    if (name == "THPeligible") {
      if (!kb) m.thp_eligible = number != 0;
      continue;
    }
    if (!kb) continue;  // the sizes are all in kB
    const std::uint64_t in_bytes = detail::saturating_mul(number, units::kib);
    const std::size_t bytes = in_bytes > SIZE_MAX ? SIZE_MAX : static_cast<std::size_t>(in_bytes);
    if (name == "KernelPageSize") {
      m.kernel_page_bytes = bytes;
    } else if (name == "Rss") {
      m.rss = bytes;
    } else if (name == "Anonymous") {
      m.anonymous = bytes;
    } else if (name == "AnonHugePages") {
      m.anon_huge = bytes;
    } else if (name == "ShmemPmdMapped") {
      m.shmem_huge = bytes;
    } else if (name == "FilePmdMapped") {
      m.file_huge = bytes;
    } else if (name == "Private_Hugetlb") {
      m.private_hugetlb = bytes;
    } else if (name == "Shared_Hugetlb") {
      m.shared_hugetlb = bytes;
    } else if (name == "Swap") {
      m.swap = bytes;
    }
  }
  return mappings;
}

/// The text of /proc/<pid>/smaps (pid 0: this process), for a caller that keeps it (the doctor's
/// captures). Sets `ec` when it cannot be read (no such process: ENOENT; not ours: EACCES).
inline std::string read_smaps_text(pid_t pid, std::error_code& ec) {
  return detail::read_file(detail::proc_path(pid, "smaps").c_str(), ec);
}

/// Reads and parses /proc/<pid>/smaps (pid 0: this process). Sets `ec` when it cannot be read
/// (no such process: ENOENT; not ours: EACCES).
inline std::vector<mapping_info> read_smaps(pid_t pid, std::error_code& ec) {
  const std::string text = read_smaps_text(pid, ec);
  if (ec) return {};
  return parse_smaps(text);
}

}  // namespace hugepage
