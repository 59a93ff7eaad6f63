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
  bool has_flag(std::string_view flag) const noexcept {
    const std::string_view flags = vm_flags;
    for (std::size_t i = 0; i + flag.size() <= flags.size(); i += 3) {
      if (flags.substr(i, flag.size()) == flag &&
          (i + flag.size() == flags.size() || flags[i + flag.size()] == ' ')) {
        return true;
      }
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
    value = value * 16 + static_cast<std::uintptr_t>(digit);
  }
  out = value;
  return true;
}

// "7f12a0000000-7f12a4000000 rw-p 00000000 00:00 0   [heap]" -> a record; false if not a header.
inline bool parse_mapping_header(std::string_view line, mapping_info& m) {
  std::string_view rest = line;
  const std::string_view range = next_token(rest);
  const auto dash = range.find('-');
  if (dash == std::string_view::npos) return false;
  if (!parse_hex(range.substr(0, dash), m.start) || !parse_hex(range.substr(dash + 1), m.end)) {
    return false;
  }
  m.permissions = std::string(next_token(rest));
  std::uintptr_t offset = 0;
  if (!parse_hex(next_token(rest), offset)) offset = 0;
  m.offset = offset;
  m.device = std::string(next_token(rest));
  const auto inode = parse_u64(next_token(rest));
  m.inode = inode ? *inode : 0;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  m.name = std::string(rest);
  return true;
}

}  // namespace detail

/// Parses the text of an smaps file. Unknown fields are ignored; a malformed line is skipped.
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
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      m.vm_flags = std::string(rest);
      continue;
    }
    const auto value = detail::parse_u64(rest);
    if (!value) continue;
    const std::size_t bytes = static_cast<std::size_t>(*value) * units::kib;  // smaps says kB
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
    } else if (name == "THPeligible") {
      m.thp_eligible = *value != 0;
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
