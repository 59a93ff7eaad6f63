// test/fuzz/kernel_memory_fuzz.cpp - libFuzzer target for the parsers of kernel_memory.hpp.
//
// The first byte chooses the parser ('0' + n, modulo the count), the rest is the text:
//   0 parse_buddyinfo (and the buddy_zone sums)   1 parse_buddyinfo_line (with its reason)
//   2 parse_zoneinfo (and per_cpu_free_pages)
// Properties: nodes and counts are decimal words of the text; zone names are words of it; the
// sums saturate at UINT64_MAX exactly where the 128-bit sum passes it; the allocation bound of
// fuzz_support.hpp; a refused line says why; the zones written back in the kernel's format
// ("Node %d, zone %8s" and the counts) parse to the same zones.
#define HUGEPAGE_FUZZ_COUNT_ALLOCATIONS
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "hugepage/kernel_memory.hpp"

namespace {

using fuzz::shown;
using u128 = unsigned __int128;

std::uint64_t saturated(u128 v) {
  return v > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(v);
}

// Whether `word` is a word of `text`: a piece of it without blanks (nor a newline, unless
// `one_line`: parse_buddyinfo_line takes its input as one line, a '\n' in it a character).
bool word_of(std::string_view text, std::string_view word, bool one_line = false) {
  return !word.empty() && text.find(word) != std::string_view::npos &&
         word.find_first_of(one_line ? " \t" : " \t\n") == std::string_view::npos;
}

std::string zone_line(const hugepage::buddy_zone& z) {
  std::string out = "Node " + std::to_string(z.node) + ", zone ";
  // %8s: the name right-aligned in 8 columns.
  if (z.zone.size() < 8) out += std::string(8 - z.zone.size(), ' ');
  out += z.zone;
  for (const std::uint64_t c : z.free_blocks) out += " " + std::to_string(c);
  return out;
}

void check_zone(const hugepage::buddy_zone& z, std::string_view text, bool one_line = false) {
  const auto words = fuzz::decimal_words(text);
  FUZZ_CHECK(z.node >= 0 && words.count(static_cast<std::uint64_t>(z.node)) == 1,
             "buddyinfo: the node is a number of the text", std::to_string(z.node));
  FUZZ_CHECK(word_of(text, z.zone, one_line), "buddyinfo: the zone is a word of the text",
             shown(z.zone));
  for (const std::uint64_t c : z.free_blocks) {
    FUZZ_CHECK(words.count(c) == 1, "buddyinfo: a count is a number of the text",
               std::to_string(c));
  }
  // The sums, against 128-bit arithmetic: exact where they fit, UINT64_MAX where they do not.
  for (const std::size_t page : {std::size_t{4096}, std::size_t{65536}}) {
    for (std::size_t from = 0; from <= z.free_blocks.size() + 1; ++from) {
      u128 bytes = 0;
      bool over = false;
      for (std::size_t o = from; o < z.free_blocks.size(); ++o) {
        if (z.free_blocks[o] == 0) continue;
        if (o > 63) {
          over = true;
          continue;
        }
        const u128 block = static_cast<u128>(page) << o;  // page < 2^17, o <= 63: fits
        if (block > UINT64_MAX) {
          over = true;
          continue;
        }
        const u128 add = block * z.free_blocks[o];  // < 2^128
        bytes += add;
        if (bytes > UINT64_MAX) over = true;
      }
      const std::uint64_t expected = over ? UINT64_MAX : saturated(bytes);
      FUZZ_CHECK(z.free_bytes_from(from, page) == expected,
                 "buddyinfo: free_bytes_from is the sum, saturated",
                 "order " + std::to_string(from) + ": " +
                     std::to_string(z.free_bytes_from(from, page)) +
                     " != " + std::to_string(expected));
    }
  }
  for (std::size_t order = 0; order <= z.free_blocks.size(); ++order) {
    u128 blocks = 0;
    bool over = false;
    for (std::size_t o = order; o < z.free_blocks.size(); ++o) {
      const std::size_t shift = o - order;
      if (z.free_blocks[o] == 0) continue;
      if (shift > 63) {
        over = true;
        continue;
      }
      const u128 add = static_cast<u128>(z.free_blocks[o]) << shift;  // < 2^127
      blocks += add;
      if (blocks > UINT64_MAX) over = true;
    }
    const std::uint64_t expected = over ? UINT64_MAX : saturated(blocks);
    FUZZ_CHECK(z.blocks_of(order) == expected, "buddyinfo: blocks_of is the sum, saturated",
               "order " + std::to_string(order));
  }
}

bool same(const hugepage::buddy_zone& a, const hugepage::buddy_zone& b) {
  return a.node == b.node && a.zone == b.zone && a.free_blocks == b.free_blocks;
}

void buddyinfo(std::string_view text) {
  std::vector<hugepage::buddy_zone> zones;
  const auto a = fuzz::measure([&] { return hugepage::parse_buddyinfo(text); }, zones);
  fuzz::check_allocation("parse_buddyinfo", a, text);
  std::string again;
  for (const auto& z : zones) {
    check_zone(z, text);
    again += zone_line(z) + "\n";
  }
  const auto reparsed = hugepage::parse_buddyinfo(again);
  FUZZ_CHECK(reparsed.size() == zones.size(), "buddyinfo round-trips", shown(again));
  for (std::size_t i = 0; i < zones.size(); ++i) {
    FUZZ_CHECK(same(reparsed[i], zones[i]), "buddyinfo round-trips", shown(again));
  }
}

void buddyinfo_line(std::string_view text) {
  std::string why = "unset";
  std::optional<hugepage::buddy_zone> zone;
  const auto a = fuzz::measure([&] { return hugepage::parse_buddyinfo_line(text, &why); }, zone);
  if (!zone) {
    FUZZ_CHECK(why != "unset", "buddyinfo line: a refusal says why", shown(text));
    const bool blank = text.find_first_not_of(" \t\r") == std::string_view::npos;
    FUZZ_CHECK(why.empty() == blank, "buddyinfo line: only a blank line is refused without a word",
               shown(text) + " -> " + shown(why));
    // The reason is the result here (at most the bad word, quoted): the bound still holds.
    fuzz::check_allocation("parse_buddyinfo_line", a, text);
    return;
  }
  fuzz::check_allocation("parse_buddyinfo_line", a, text);
  check_zone(*zone, text, true);
  const auto reparsed = hugepage::parse_buddyinfo_line(zone_line(*zone));
  FUZZ_CHECK(reparsed && same(*reparsed, *zone), "buddyinfo line round-trips",
             shown(zone_line(*zone)));
}

void zoneinfo(std::string_view text) {
  std::vector<hugepage::zone_info> zones;
  const auto a = fuzz::measure([&] { return hugepage::parse_zoneinfo(text); }, zones);
  fuzz::check_allocation("parse_zoneinfo", a, text);
  const auto words = fuzz::decimal_words(text);
  u128 numbers = 0;  // every decimal word, counted as often as it is written
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    const std::size_t end = text.find_first_not_of("0123456789", i);
    const auto n =
        fuzz::decimal_words(text.substr(i, end == std::string_view::npos ? end : end - i));
    numbers += n.empty() ? u128{UINT64_MAX} + 1 : *n.begin();
    if (numbers > UINT64_MAX) numbers = u128{UINT64_MAX} + 1;
    i = end == std::string_view::npos ? text.size() : end;
  }
  const std::uint64_t every_number = saturated(numbers);
  u128 all = 0;
  std::string again;
  for (const auto& z : zones) {
    FUZZ_CHECK(z.node >= 0 && words.count(static_cast<std::uint64_t>(z.node)) == 1,
               "zoneinfo: the node is a number of the text", std::to_string(z.node));
    FUZZ_CHECK(word_of(text, z.zone), "zoneinfo: the zone is a word of the text", shown(z.zone));
    // A sum of the text's counts: at most the sum of all its numbers (saturated).
    FUZZ_CHECK(z.per_cpu_free_pages <= every_number,
               "zoneinfo: a sum is at most the sum of the text's numbers",
               std::to_string(z.per_cpu_free_pages));
    all += z.per_cpu_free_pages;
    again +=
        "Node " + std::to_string(z.node) + ", zone " + z.zone + "\n  pages free     1\n" +
        "  pagesets\n    cpu: 0\n              count: " + std::to_string(z.per_cpu_free_pages) +
        "\n              high:  0\n";
  }
  FUZZ_CHECK(hugepage::per_cpu_free_pages(zones) == saturated(all),
             "zoneinfo: per_cpu_free_pages is the sum, saturated", "");
  const auto reparsed = hugepage::parse_zoneinfo(again);
  FUZZ_CHECK(reparsed.size() == zones.size(), "zoneinfo round-trips", shown(again));
  for (std::size_t i = 0; i < zones.size(); ++i) {
    FUZZ_CHECK(reparsed[i].node == zones[i].node && reparsed[i].zone == zones[i].zone &&
                   reparsed[i].per_cpu_free_pages == zones[i].per_cpu_free_pages,
               "zoneinfo round-trips", shown(again));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (static_cast<unsigned>(data[0] - '0') % 3U) {
    case 0: buddyinfo(text); break;
    case 1: buddyinfo_line(text); break;
    default: zoneinfo(text); break;
  }
  return 0;
}
