// hugepage/kernel_memory.hpp - the kernel's free-memory files: one parser, one reader each.
//
// Whether the kernel can find a huge page now is a question of free blocks: the buddy allocator
// keeps free memory in naturally aligned blocks of 2^order base pages per zone (/proc/buddyinfo),
// and each CPU keeps a short list of free pages beside them (/proc/zoneinfo, "count:" of each
// pageset), which buddyinfo does not show. As in kernel_files.hpp, each file has one pure parser
// and one reader that takes `root` ("" for the live system, else a copy of the tree):
//
//   file              parser                              reader
//   /proc/buddyinfo   parse_buddyinfo (line by line:      read_buddyinfo
//                     parse_buddyinfo_line)
//   /proc/zoneinfo    parse_zoneinfo                      read_zoneinfo
//
// Thread-safe; the parsers allocate only their results: no temporaries per line. Minimum kernel:
// any.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"

namespace hugepage {

namespace detail {

/// The words of a line, split at runs of blanks (' ', '\t'), each without trailing '\r's, one at
/// a time: no list of them is built.
class line_words {
 public:
  explicit line_words(std::string_view line) noexcept : rest_(line) {}
  /// The next word; "" when there is none.
  std::string_view next() noexcept {
    for (;;) {
      const std::size_t start = rest_.find_first_not_of(" \t");
      if (start == std::string_view::npos) return {};
      rest_.remove_prefix(start);
      const std::size_t end = rest_.find_first_of(" \t");
      std::string_view word = rest_.substr(0, end);
      rest_.remove_prefix(end == std::string_view::npos ? rest_.size() : end);
      while (!word.empty() && word.back() == '\r') word.remove_suffix(1);
      if (!word.empty()) return word;
    }
  }

 private:
  std::string_view rest_;
};

/// `word` as a number when it is all digits and fits; nullopt otherwise.
inline std::optional<std::uint64_t> digits_value(std::string_view word) {
  if (word.empty() || word.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  return parse_u64(word);
}

/// The node of a "N," word ("0," -> 0) in "Node N, zone NAME"; nullopt otherwise.
inline std::optional<int> node_of_zone_line(std::string_view word) {
  if (word.size() < 2 || word.back() != ',') return std::nullopt;
  const auto node = digits_value(word.substr(0, word.size() - 1));
  if (!node || *node > 1U << 20) return std::nullopt;
  return static_cast<int>(*node);
}

}  // namespace detail

// ---- /proc/buddyinfo
// -----------------------------------------------------------------------------

/// One line of /proc/buddyinfo: free blocks of each order (2^order base pages) in one zone.
struct buddy_zone {
  int node = 0;
  std::string zone;                        ///< "DMA", "DMA32", "Normal", "Movable"
  std::vector<std::uint64_t> free_blocks;  ///< index: order

  /// Free bytes in the zone; UINT64_MAX when they do not fit 64 bits (free_bytes_from).
  std::uint64_t free_bytes(std::size_t base_page) const noexcept {
    return free_bytes_from(0, base_page);
  }
  /// Free bytes held in blocks of at least `order`, every order counted; UINT64_MAX when they do
  /// not fit 64 bits (a huge count, or a free block at an order past 63): saturated, not wrapped.
  std::uint64_t free_bytes_from(std::size_t order, std::size_t base_page) const noexcept {
    std::uint64_t bytes = 0;
    for (std::size_t o = order; o < free_blocks.size(); ++o) {
      const std::uint64_t block = detail::saturating_shift(base_page, o);
      bytes = detail::saturating_add(bytes, detail::saturating_mul(free_blocks[o], block));
    }
    return bytes;
  }
  /// How many naturally aligned blocks of `order` the free lists hold (larger blocks split);
  /// UINT64_MAX when that does not fit 64 bits.
  std::uint64_t blocks_of(std::size_t order) const noexcept {
    std::uint64_t blocks = 0;
    for (std::size_t o = order; o < free_blocks.size(); ++o) {
      blocks = detail::saturating_add(blocks, detail::saturating_shift(free_blocks[o], o - order));
    }
    return blocks;
  }
};

/// Parses one line of /proc/buddyinfo: "Node N, zone NAME c0 c1 ..." (mm/vmstat.c writes
/// "Node %d, zone %8s" and one count per order; any number of orders, none included). Returns
/// nullopt for anything else, and says why in `why` when given: "" for a blank line, else
/// "not 'Node N, zone NAME' and counts" or "bad count 'W'" (not all digits, or an overflow). Pure.
inline std::optional<buddy_zone> parse_buddyinfo_line(std::string_view line,
                                                      std::string* why = nullptr) {
  const auto refuse = [why](const char* reason,
                            std::string_view word = {}) -> std::optional<buddy_zone> {
    if (why != nullptr) *why = std::string(reason) + std::string(word) + (word.empty() ? "" : "'");
    return std::nullopt;
  };
  detail::line_words words(line);
  std::string_view w[4];
  std::size_t n = 0;
  while (n < 4 && !(w[n] = words.next()).empty()) ++n;
  if (n == 0) return refuse("");
  const std::optional<int> node = n == 4 ? detail::node_of_zone_line(w[1]) : std::nullopt;
  if (w[0] != "Node" || !node || w[2] != "zone") {
    return refuse("not 'Node N, zone NAME' and counts");
  }
  // The counts are checked before anything is built: a refused line allocates nothing.
  std::size_t orders = 0;
  for (detail::line_words check = words;;) {
    const std::string_view word = check.next();
    if (word.empty()) break;
    if (!detail::digits_value(word)) return refuse("bad count '", word);
    ++orders;
  }
  buddy_zone zone;
  zone.node = *node;
  zone.zone = std::string(w[3]);
  zone.free_blocks.reserve(orders);
  for (std::string_view word = words.next(); !word.empty(); word = words.next()) {
    zone.free_blocks.push_back(*detail::digits_value(word));
  }
  return zone;
}

/// Parses /proc/buddyinfo: the zones of the lines parse_buddyinfo_line() reads, in order; other
/// lines are skipped, not half-read. Pure.
inline std::vector<buddy_zone> parse_buddyinfo(std::string_view text) {
  std::vector<buddy_zone> zones;
  for (const std::string_view line : detail::split(text, '\n')) {
    if (auto zone = parse_buddyinfo_line(line)) zones.push_back(std::move(*zone));
  }
  return zones;
}

/// The text of /proc/buddyinfo under `root`; nullopt when unreadable.
inline std::optional<std::string> read_buddyinfo_text(const std::string& root = "") {
  return detail::read_under_root(root, "/proc/buddyinfo");
}

/// Reads /proc/buddyinfo under `root`; nullopt when unreadable.
inline std::optional<std::vector<buddy_zone>> read_buddyinfo(const std::string& root = "") {
  const auto text = read_buddyinfo_text(root);
  if (!text) return std::nullopt;
  return parse_buddyinfo(*text);
}

// ---- /proc/zoneinfo
// ------------------------------------------------------------------------------

/// What /proc/zoneinfo adds to buddyinfo for one zone.
struct zone_info {
  int node = 0;
  std::string zone;
  /// Pages on the per-cpu free lists ("count:" of each CPU's pageset), summed over CPUs;
  /// UINT64_MAX when the sum does not fit 64 bits.
  std::uint64_t per_cpu_free_pages = 0;
};

/// Parses /proc/zoneinfo: a zone per "Node N, zone NAME" line, with the "count:" lines after it
/// summed (lines before the first zone are skipped). Pure.
inline std::vector<zone_info> parse_zoneinfo(std::string_view text) {
  std::vector<zone_info> zones;
  for (const std::string_view line : detail::split(text, '\n')) {
    detail::line_words words(line);
    std::string_view w[5];  // a fifth word only to know there are more than four
    std::size_t n = 0;
    while (n < 5 && !(w[n] = words.next()).empty()) ++n;
    if (n == 4 && w[0] == "Node" && w[2] == "zone") {
      if (const auto node = detail::node_of_zone_line(w[1])) {
        zones.push_back(zone_info{*node, std::string(w[3]), 0});
        continue;
      }
    }
    if (n >= 2 && w[0] == "count:" && !zones.empty()) {
      if (const auto count = detail::digits_value(w[1])) {
        zones.back().per_cpu_free_pages =
            detail::saturating_add(zones.back().per_cpu_free_pages, *count);
      }
    }
  }
  return zones;
}

/// Reads /proc/zoneinfo under `root`; nullopt when unreadable.
inline std::optional<std::vector<zone_info>> read_zoneinfo(const std::string& root = "") {
  const auto text = detail::read_under_root(root, "/proc/zoneinfo");
  if (!text) return std::nullopt;
  return parse_zoneinfo(*text);
}

/// Pages on every zone's per-cpu free lists (zone_info::per_cpu_free_pages, summed; UINT64_MAX
/// when that does not fit). Pure.
inline std::uint64_t per_cpu_free_pages(const std::vector<zone_info>& zones) noexcept {
  std::uint64_t pages = 0;
  for (const zone_info& z : zones) pages = detail::saturating_add(pages, z.per_cpu_free_pages);
  return pages;
}

}  // namespace hugepage
