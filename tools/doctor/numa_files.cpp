// tools/doctor/numa_files.cpp - numa_maps per node and per mapping, kernel id lists, the node
// directory.
#include "numa_files.hpp"

#include <dirent.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "line_words.hpp"
#include "read_text.hpp"

namespace hugepage::doctor {

using namespace line_words;

namespace {

// Whether `s` is all decimal digits (and not empty).
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// One line of numa_maps: its start address, page size and pages per node.
struct numa_maps_line {
  std::uintptr_t start = 0;
  std::uint64_t page_kib = 4;
  std::vector<std::pair<int, std::uint64_t>> counts;
};

numa_maps_line parse_numa_maps_line(std::string_view line) {
  numa_maps_line out;
  const std::string_view address = next_word(line);
  for (const char c : address) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0 || out.start >> 60 != 0) {
      out.start = 0;
      break;
    }
    out.start = out.start << 4 | static_cast<std::uintptr_t>(digit);
  }
  while (!line.empty()) {
    const std::string_view word = next_word(line);
    if (word.empty()) break;
    if (starts_with(word, "kernelpagesize_kB=")) {
      out.page_kib = parse_number(word.substr(18)).value_or(4);
    } else if (word.size() > 3 && word[0] == 'N' && word[1] >= '0' && word[1] <= '9') {
      const auto eq = word.find('=');
      if (eq == std::string_view::npos) continue;
      const auto node = parse_number(word.substr(1, eq - 1));
      const auto pages = parse_number(word.substr(eq + 1));
      if (node && pages && *node < 4096) out.counts.emplace_back(static_cast<int>(*node), *pages);
    }
  }
  return out;
}

}  // namespace

std::map<int, numa_usage> parse_numa_maps(std::string_view text) {
  std::map<int, numa_usage> nodes;
  while (!text.empty()) {
    const numa_maps_line line = parse_numa_maps_line(next_line(text));
    for (const auto& [node, pages] : line.counts) {
      numa_usage& u = nodes[node];
      u.bytes += pages * line.page_kib * 1024;
      if (line.page_kib > 4) u.hugetlb_bytes += pages * line.page_kib * 1024;
    }
  }
  return nodes;
}

std::map<std::uintptr_t, std::map<int, std::uint64_t>> parse_numa_maps_by_mapping(
    std::string_view text) {
  std::map<std::uintptr_t, std::map<int, std::uint64_t>> out;
  while (!text.empty()) {
    const numa_maps_line line = parse_numa_maps_line(next_line(text));
    if (line.counts.empty()) continue;
    auto& nodes = out[line.start];
    for (const auto& [node, pages] : line.counts) nodes[node] += pages * line.page_kib * 1024;
  }
  return out;
}

std::vector<int> parse_id_list(std::string_view text) {
  std::vector<int> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.remove_suffix(1);
    const std::size_t dash = item.find('-');
    const auto from = parse_number(item.substr(0, dash));
    const auto to = dash == std::string_view::npos ? from : parse_number(item.substr(dash + 1));
    if (!from || !to || *to < *from || *to > 1U << 20) continue;
    for (std::uint64_t n = *from; n <= *to; ++n) out.push_back(static_cast<int>(n));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> numa_nodes(const std::string& root) {
  std::vector<int> nodes;
  const std::string directory = root + "/sys/devices/system/node";
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return nodes;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (starts_with(name, "node") && all_digits(name.substr(4))) {
      nodes.push_back(static_cast<int>(parse_number(name.substr(4)).value_or(0)));
    }
  }
  ::closedir(dir);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace hugepage::doctor
