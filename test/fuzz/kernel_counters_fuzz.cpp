// test/fuzz/kernel_counters_fuzz.cpp - libFuzzer target for the parsers of kernel_counters.hpp
// (and the meminfo field reader they share with refusal_facts.hpp).
//
// The first byte chooses the parser ('0' + n, modulo the count), the rest is the text:
//   0 parse_meminfo (and kb_field, parse_default_huge_page_bytes)   1 parse_vmstat
//   2 parse_status   3 parse_smaps_rollup
// Properties: every number is a decimal word of the text, or 1024 x one (a kB line), or a sum
// the header documents (saturating at UINT64_MAX); every name is a piece of the text; the
// allocation bound of fuzz_support.hpp; a status key's field() and number() never disagree (the
// header's promise); the values written back as "Name: N" lines parse to the same values.
#define HUGEPAGE_FUZZ_COUNT_ALLOCATIONS
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "hugepage/detail/refusal_facts.hpp"
#include "hugepage/kernel_counters.hpp"

namespace {

using fuzz::shown;

bool piece_of(std::string_view text, std::string_view piece) {
  return text.find(piece) != std::string_view::npos;
}

// The value of a status field's text as its number: "N", or "N kB" / "N KB" (times 1024), words
// split at blanks, what follows the unit ignored (the header's reading, written independently).
std::optional<std::uint64_t> field_number(std::string_view value) {
  std::vector<std::string_view> words;
  while (words.size() < 2) {
    const std::size_t start = value.find_first_not_of(" \t");
    if (start == std::string_view::npos) break;
    value.remove_prefix(start);
    const std::size_t end = value.find_first_of(" \t");
    words.push_back(value.substr(0, end));
    value.remove_prefix(end == std::string_view::npos ? value.size() : end);
  }
  if (words.empty() || words[0].find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  const auto n = hugepage::detail::parse_u64(words[0]);
  if (!n) return std::nullopt;
  if (words.size() == 1) return n;
  if ((words[1] == "kB" || words[1] == "KB") && *n <= UINT64_MAX / 1024) return *n * 1024;
  return std::nullopt;
}

void check_values(const char* parser, const hugepage::kernel_values& values,
                  std::string_view text) {
  const auto words = fuzz::decimal_words(text);
  for (const auto& [name, value] : values) {
    FUZZ_CHECK(!name.empty() && piece_of(text, name), "a name is a piece of the text",
               std::string(parser) + ": " + shown(name));
    FUZZ_CHECK(fuzz::held_as_kb_or_bare(words, value),
               "a value is a number of the text, or 1024 x one",
               std::string(parser) + ": " + shown(name) + " = " + std::to_string(value));
  }
}

// Writes `values` back as "Name: N" lines (bare numbers: bytes stay bytes).
std::string meminfo_text(const hugepage::kernel_values& values) {
  std::string out;
  for (const auto& [name, value] : values) out += name + ":\t" + std::to_string(value) + "\n";
  return out;
}

void meminfo(std::string_view text) {
  hugepage::kernel_values values;
  const auto a = fuzz::measure([&] { return hugepage::parse_meminfo(text); }, values);
  fuzz::check_allocation("parse_meminfo", a, text);
  check_values("parse_meminfo", values, text);
  const std::string again = meminfo_text(values);
  FUZZ_CHECK(hugepage::parse_meminfo(again) == values, "meminfo round-trips", shown(again));
  // The one-field reader agrees with the whole parse (the last line of a name wins in both).
  std::optional<std::uint64_t> huge;
  const auto b =
      fuzz::measure([&] { return hugepage::detail::kb_field(text, "Hugepagesize"); }, huge);
  FUZZ_CHECK(b.calls == 0, "kb_field allocates nothing", shown(text));
  const auto it = values.find("Hugepagesize");
  FUZZ_CHECK(huge == (it == values.end() ? std::nullopt : std::optional<std::uint64_t>(it->second)),
             "kb_field agrees with parse_meminfo", shown(text));
  FUZZ_CHECK(hugepage::detail::parse_default_huge_page_bytes(text) == huge.value_or(0),
             "parse_default_huge_page_bytes agrees with parse_meminfo", shown(text));
}

void vmstat(std::string_view text) {
  hugepage::kernel_values values;
  const auto a = fuzz::measure([&] { return hugepage::parse_vmstat(text); }, values);
  fuzz::check_allocation("parse_vmstat", a, text);
  const auto words = fuzz::decimal_words(text);
  std::string again;
  for (const auto& [name, value] : values) {
    FUZZ_CHECK(
        !name.empty() && piece_of(text, name) && name.find_first_of(" \t\r\n") == std::string::npos,
        "vmstat: a name is a word of the text", shown(name));
    FUZZ_CHECK(words.count(value) == 1, "vmstat: a value is a number of the text",
               shown(name) + " = " + std::to_string(value));
    again += name + " " + std::to_string(value) + "\n";
  }
  FUZZ_CHECK(hugepage::parse_vmstat(again) == values, "vmstat round-trips", shown(again));
}

void status(std::string_view text) {
  hugepage::process_status s;
  const auto a = fuzz::measure([&] { return hugepage::parse_status(text); }, s);
  fuzz::check_allocation("parse_status", a, text);
  check_values("parse_status", s.numbers, text);
  std::string again;
  for (const auto& [key, value] : s.text) {
    FUZZ_CHECK(!key.empty() && piece_of(text, key) && piece_of(text, value),
               "status: keys and values are pieces of the text", shown(key));
    again += key + ":\t" + value + "\n";
  }
  // The header's promise: a key's field() and number() never disagree.
  for (const auto& [key, value] : s.text) {
    FUZZ_CHECK(field_number(value) == s.number(key), "status: field() and number() agree",
               shown(key) + ": field '" + shown(value) + "', number " +
                   (s.number(key) ? std::to_string(*s.number(key)) : "none"));
  }
  for (const auto& [key, number] : s.numbers) {
    FUZZ_CHECK(s.field(key).has_value(), "status: a number has its field", shown(key));
  }
  const auto reparsed = hugepage::parse_status(again);
  FUZZ_CHECK(reparsed.text == s.text, "status round-trips (text)", shown(again));
}

void smaps_rollup(std::string_view text) {
  std::optional<hugepage::smaps_totals> totals;
  const auto a = fuzz::measure([&] { return hugepage::parse_smaps_rollup(text); }, totals);
  fuzz::check_allocation("parse_smaps_rollup", a, text);
  FUZZ_CHECK(a.result == 0, "smaps_rollup: keeps nothing on the heap", shown(text));
  if (!totals) return;
  const auto words = fuzz::decimal_words(text);
  FUZZ_CHECK(fuzz::held_as_kb_or_bare(words, totals->rss),
             "smaps_rollup: Rss is a number of the text", std::to_string(totals->rss));
  FUZZ_CHECK(totals->anon_huge == 0 || fuzz::held_as_kb_or_bare(words, totals->anon_huge),
             "smaps_rollup: AnonHugePages is a number of the text (or absent: 0)",
             std::to_string(totals->anon_huge));
  // hugetlb: the documented saturating sum of the two hugetlb lines.
  const auto values = hugepage::parse_meminfo(text);
  const auto get = [&](const char* key) -> unsigned __int128 {
    const auto it = values.find(key);
    return it == values.end() ? 0 : it->second;
  };
  const unsigned __int128 sum = get("Private_Hugetlb") + get("Shared_Hugetlb");
  const std::uint64_t expected = sum > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(sum);
  FUZZ_CHECK(totals->hugetlb == expected, "smaps_rollup: hugetlb is the saturated sum",
             std::to_string(totals->hugetlb));
  const unsigned __int128 resident = static_cast<unsigned __int128>(totals->rss) + totals->hugetlb;
  FUZZ_CHECK(totals->resident() ==
                 (resident > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(resident)),
             "smaps_rollup: resident() saturates", "");
  const unsigned __int128 huge =
      static_cast<unsigned __int128>(totals->anon_huge) + totals->hugetlb;
  FUZZ_CHECK(totals->huge() == (huge > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(huge)),
             "smaps_rollup: huge() saturates", "");
  const std::string again = "Rss:\t" + std::to_string(totals->rss) + "\nAnonHugePages:\t" +
                            std::to_string(totals->anon_huge) + "\nPrivate_Hugetlb:\t" +
                            std::to_string(totals->hugetlb) + "\nShared_Hugetlb:\t0\n";
  const auto reparsed = hugepage::parse_smaps_rollup(again);
  FUZZ_CHECK(reparsed && reparsed->rss == totals->rss && reparsed->anon_huge == totals->anon_huge &&
                 reparsed->hugetlb == totals->hugetlb,
             "smaps_rollup round-trips", shown(again));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (static_cast<unsigned>(data[0] - '0') % 4U) {
    case 0: meminfo(text); break;
    case 1: vmstat(text); break;
    case 2: status(text); break;
    default: smaps_rollup(text); break;
  }
  return 0;
}
