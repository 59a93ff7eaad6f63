// test/fuzz/smaps_fuzz.cpp - libFuzzer target for parse_smaps (smaps.hpp). The whole input is
// the text.
//
// Properties: a mapping's start, end and offset are hex words of the text and its inode a
// decimal word; every size is 1024 x a decimal word (smaps says kB), never a wrapped product;
// start <= end; has_flag() finds every two-letter word of VmFlags; the allocation bound of
// fuzz_support.hpp; the mappings written back in the kernel's format (show_map_vma and
// __show_smap) parse to the same mappings.
#define HUGEPAGE_FUZZ_COUNT_ALLOCATIONS
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.hpp"
#include "hugepage/smaps.hpp"

namespace {

using fuzz::shown;

std::string hex(std::uint64_t v, int width) {
  char out[32];
  std::snprintf(out, sizeof out, "%0*" PRIx64, width, v);
  return out;
}

bool same(const hugepage::mapping_info& a, const hugepage::mapping_info& b) {
  return a.start == b.start && a.end == b.end && a.permissions == b.permissions &&
         a.offset == b.offset && a.device == b.device && a.inode == b.inode && a.name == b.name &&
         a.kernel_page_bytes == b.kernel_page_bytes && a.rss == b.rss &&
         a.anonymous == b.anonymous && a.anon_huge == b.anon_huge && a.shmem_huge == b.shmem_huge &&
         a.file_huge == b.file_huge && a.private_hugetlb == b.private_hugetlb &&
         a.shared_hugetlb == b.shared_hugetlb && a.swap == b.swap &&
         a.thp_eligible == b.thp_eligible && a.vm_flags == b.vm_flags;
}

// The mapping as the kernel writes it; empty when a header field cannot be written so that it
// reads back (an empty or blank-holding word: the parser splits at blanks).
std::string smaps_text(const hugepage::mapping_info& m) {
  const auto word = [](const std::string& w) {
    return !w.empty() && w.find_first_of(" \t\n") == std::string::npos;
  };
  if (!word(m.permissions) || !word(m.device) || m.name.find('\n') != std::string::npos ||
      m.vm_flags.find('\n') != std::string::npos ||
      (!m.vm_flags.empty() && m.vm_flags.front() == ' ')) {
    return "";
  }
  std::string out = hex(m.start, 8) + "-" + hex(m.end, 8) + " " + m.permissions + " " +
                    hex(m.offset, 8) + " " + m.device + " " + std::to_string(m.inode);
  out += m.name.empty() ? "\n" : std::string(26, ' ') + m.name + "\n";
  // A saturated size is written as the smallest kB count that saturates again (2^54 kB).
  const auto kb = [&out](const char* key, std::size_t bytes) {
    out += std::string(key) + ":" + std::string(16 - std::string(key).size(), ' ') +
           (bytes == SIZE_MAX ? "18014398509481984" : std::to_string(bytes / 1024)) + " kB\n";
  };
  kb("Size", m.end - m.start);
  kb("KernelPageSize", m.kernel_page_bytes);
  kb("MMUPageSize", m.kernel_page_bytes);
  kb("Rss", m.rss);
  kb("Pss", m.rss);
  kb("Anonymous", m.anonymous);
  kb("AnonHugePages", m.anon_huge);
  kb("ShmemPmdMapped", m.shmem_huge);
  kb("FilePmdMapped", m.file_huge);
  kb("Shared_Hugetlb", m.shared_hugetlb);
  kb("Private_Hugetlb", m.private_hugetlb);
  kb("Swap", m.swap);
  out += std::string("THPeligible:    ") + (m.thp_eligible ? "1" : "0") + "\n";
  out += "VmFlags: " + m.vm_flags + "\n";
  return out;
}

// The text from each candidate header line (its first word holds '-' and does not end with ':',
// as parse_smaps tells a header from a field) to the next.
std::vector<std::string_view> header_blocks(std::string_view text) {
  std::vector<std::string_view> blocks;
  std::size_t open = std::string_view::npos;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    const std::string_view word = line.substr(0, line.find_first_of(" \t"));
    if (!word.empty() && word.back() != ':' && word.find('-') != std::string_view::npos) {
      if (open != std::string_view::npos) blocks.push_back(text.substr(open, at - open));
      open = at;
    }
    at = end + 1;
  }
  if (open != std::string_view::npos) blocks.push_back(text.substr(open));
  return blocks;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<hugepage::mapping_info> mappings;
  const auto a = fuzz::measure([&] { return hugepage::parse_smaps(text); }, mappings);
  fuzz::check_allocation("parse_smaps", a, text);
  const auto words = fuzz::decimal_words(text);
  const auto hexes = fuzz::hex_words(text);
  std::string again;
  bool writable = true;
  const std::vector<std::string_view> blocks = header_blocks(text);
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const hugepage::mapping_info& m = mappings[i];
    const std::string at = hex(m.start, 1) + "-" + hex(m.end, 1);
    FUZZ_CHECK(hexes.count(m.start) == 1 && hexes.count(m.end) == 1,
               "smaps: start and end are hex words of the text", at);
    FUZZ_CHECK(m.start <= m.end, "smaps: a mapping's start is not past its end", at);
    FUZZ_CHECK(m.offset == 0 || hexes.count(m.offset) == 1,
               "smaps: the offset is a hex word of the text", at + " offset " + hex(m.offset, 1));
    FUZZ_CHECK(m.inode == 0 || words.count(m.inode) == 1,
               "smaps: the inode is a number of the text", at);
    const std::pair<const char*, std::size_t> sizes[] = {{"KernelPageSize:", m.kernel_page_bytes},
                                                         {"Rss:", m.rss},
                                                         {"Anonymous:", m.anonymous},
                                                         {"AnonHugePages:", m.anon_huge},
                                                         {"ShmemPmdMapped:", m.shmem_huge},
                                                         {"FilePmdMapped:", m.file_huge},
                                                         {"Private_Hugetlb:", m.private_hugetlb},
                                                         {"Shared_Hugetlb:", m.shared_hugetlb},
                                                         {"Swap:", m.swap}};
    // The mapping's own lines when the text splits into as many blocks as there are mappings
    // (every header taken), else the whole text (a 0 is then always allowed: a line may belong to
    // a refused header).
    const bool own = blocks.size() == mappings.size();
    const std::string_view block = own ? blocks[i] : text;
    for (const auto& [key, bytes] : sizes) {
      // A size is 1024 x a number written after its key in the block; 0 where the block has no
      // such line, a 0 on it, or a number whose kB do not fit 64 bits (which a parser may skip,
      // or saturate: SIZE_MAX).
      bool zero_allowed = !own;
      bool too_big = false;
      std::set<std::uint64_t> after;
      for (std::size_t k = block.find(key); k != std::string_view::npos;
           k = block.find(key, k + 1)) {
        // The key as a line's first word only.
        std::size_t before = k;
        while (before > 0 && (block[before - 1] == ' ' || block[before - 1] == '\t')) --before;
        if (before > 0 && block[before - 1] != '\n') continue;
        std::string_view rest = block.substr(k + std::strlen(key));
        while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) {
          rest.remove_prefix(1);
        }
        const std::size_t digits = rest.find_first_not_of("0123456789");
        if (digits == 0 || rest.empty()) {
          zero_allowed = true;  // a line without a number: read as none
          continue;
        }
        const auto n = fuzz::decimal_words(rest.substr(0, digits));
        if (n.empty() || *n.begin() == 0 || *n.begin() > SIZE_MAX / 1024) zero_allowed = true;
        // A line that is not a whole number and "kB" ("5603b5e00000 120 kB", "1   0 kB", "8",
        // "8kB"): a parser may refuse it.
        std::string_view unit = digits == std::string_view::npos ? "" : rest.substr(digits);
        unit = unit.substr(0, unit.find('\n'));
        while (!unit.empty() && (unit.front() == ' ' || unit.front() == '\t'))
          unit.remove_prefix(1);
        while (!unit.empty() &&
               (unit.back() == ' ' || unit.back() == '\t' || unit.back() == '\r')) {
          unit.remove_suffix(1);
        }
        const bool apart = digits == std::string_view::npos || rest[digits] == ' ' ||
                           rest[digits] == '\t' || rest[digits] == '\r' || rest[digits] == '\n';
        if (unit != "kB" || !apart) zero_allowed = true;
        if (n.empty() || *n.begin() > SIZE_MAX / 1024) too_big = true;
        after.insert(n.begin(), n.end());
      }
      if (after.empty()) zero_allowed = true;
      const bool held = (bytes % 1024 == 0 && after.count(bytes / 1024) == 1) ||
                        (bytes == SIZE_MAX && (too_big || !own));
      FUZZ_CHECK(held || (bytes == 0 && zero_allowed),
                 "smaps: a size is 1024 x its line's number (kB), or 0 for no line",
                 at + ": " + key + " " + std::to_string(bytes));
    }
    // has_flag() finds every two-letter word of VmFlags (the kernel's flags are two letters:
    // show_smap_vma_flags), words split at blanks, whatever their number.
    std::string_view flags = m.vm_flags;
    while (!flags.empty()) {
      const std::size_t start = flags.find_first_not_of(" \t");
      if (start == std::string_view::npos) break;
      flags.remove_prefix(start);
      const std::size_t end = flags.find_first_of(" \t");
      const std::string_view flag = flags.substr(0, end);
      FUZZ_CHECK(flag.size() != 2 || m.has_flag(flag), "smaps: has_flag finds each word of VmFlags",
                 at + ": '" + shown(flag) + "' in '" + shown(m.vm_flags) + "'");
      flags.remove_prefix(end == std::string_view::npos ? flags.size() : end);
    }
    const std::string written = smaps_text(m);
    writable = writable && !written.empty();
    again += written;
  }
  if (!writable) return 0;
  const auto reparsed = hugepage::parse_smaps(again);
  FUZZ_CHECK(reparsed.size() == mappings.size(), "smaps round-trips", shown(again));
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    FUZZ_CHECK(same(reparsed[i], mappings[i]), "smaps round-trips", shown(again));
  }
  return 0;
}
