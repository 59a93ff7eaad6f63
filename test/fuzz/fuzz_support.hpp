// test/fuzz/fuzz_support.hpp - what the libFuzzer targets share: counting allocations, the
// numbers a text holds, and a failure that names the broken property.
//
// Each target replaces the global operator new/delete (HUGEPAGE_FUZZ_COUNT_ALLOCATIONS in exactly
// one translation unit of the target) so that a property can say how much a parser allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <string>
#include <string_view>

namespace fuzz {

/// The heap bytes of this process: live now, the most live since the last reset, and allocations
/// made since the last reset. Counted by the replaced operator new (each block carries its size).
struct heap_counters {
  std::size_t live = 0;
  std::size_t peak = 0;
  std::size_t calls = 0;
};
inline heap_counters heap;

/// Fails the run: prints what broke and the input's size, then aborts (libFuzzer saves the input).
[[noreturn]] inline void fail(const char* property, const std::string& detail) {
  std::fprintf(stderr, "\nPROPERTY BROKEN: %s\n  %s\n", property, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Whether `property` is one HUGEPAGE_FUZZ_SKIP names (comma-separated pieces of property
/// names): for a long run that hunts past a known, open bug. Never set in scripts/test.
inline bool skipped(const char* property) {
  static const std::string skip = [] {
    const char* env = std::getenv("HUGEPAGE_FUZZ_SKIP");
    return std::string(env == nullptr ? "" : env);
  }();
  std::size_t at = 0;
  while (at < skip.size()) {
    std::size_t end = skip.find(',', at);
    if (end == std::string::npos) end = skip.size();
    const std::string piece = skip.substr(at, end - at);
    if (!piece.empty() && std::strstr(property, piece.c_str()) != nullptr) return true;
    at = end + 1;
  }
  return false;
}

#define FUZZ_CHECK(condition, property, detail)                                     \
  do {                                                                              \
    if (!(condition) && !::fuzz::skipped(property)) ::fuzz::fail(property, detail); \
  } while (0)

/// What a call allocated: the bytes still live after it (its result) and the most live at once
/// above the start (result and temporaries together), and how many allocations it made.
struct allocation {
  std::size_t result = 0;
  std::size_t peak = 0;
  std::size_t calls = 0;
};

/// Runs `f` and measures its allocations. The result `f` returns must be kept alive by `f`'s
/// caller for `result` to mean anything: measure() stores it in `out`.
template <class F, class Out>
allocation measure(F&& f, Out& out) {
  const std::size_t start = heap.live;
  heap.peak = start;
  heap.calls = 0;
  out = f();
  allocation a;
  a.result = heap.live > start ? heap.live - start : 0;
  a.peak = heap.peak - start;
  a.calls = heap.calls;
  return a;
}

/// The length of the longest line of `text` (lines end at '\n').
inline std::size_t longest_line(std::string_view text) {
  std::size_t longest = 0;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    if (end - at > longest) longest = end - at;
    at = end + 1;
  }
  return longest;
}

/// The allocation property of every parser here: the most it holds at once is at most
///   4 x its result + 16 x the input's longest line + 4 KiB.
/// A result built by doubling peaks at 1.5 x its size; one line's words as string_views take at
/// most 8 bytes per input byte (a word and a blank: 2 bytes, 16 bytes of view), 12 x with growth.
/// What this forbids: temporaries that grow with the number of lines (the whole text split into
/// a vector of lines), or with the input when the result is small.
inline void check_allocation(const char* parser, const allocation& a, std::string_view input) {
  const std::size_t bound = 4 * a.result + 16 * longest_line(input) + 4096;
  const char* property = "a parser holds at most 4 x its result + 16 x the longest line + 4 KiB";
  if (a.peak > bound && !skipped(property)) {
    fail(property, std::string(parser) + ": peak " + std::to_string(a.peak) + " bytes, result " +
                       std::to_string(a.result) + " bytes, input " + std::to_string(input.size()) +
                       " bytes, longest line " + std::to_string(longest_line(input)) + ", bound " +
                       std::to_string(bound));
  }
}

/// For the parsers documented to allocate nothing.
inline void check_no_allocation(const char* parser, const allocation& a) {
  const char* property = "a parser documented to allocate nothing allocates nothing";
  if (a.calls != 0 && !skipped(property)) {
    fail(property, std::string(parser) + ": " + std::to_string(a.calls) + " allocations");
  }
}

/// The numbers `text` holds as decimal words: each maximal run of ASCII digits, as its value
/// (runs that do not fit 64 bits are left out).
inline std::set<std::uint64_t> decimal_words(std::string_view text) {
  std::set<std::uint64_t> out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    std::uint64_t value = 0;
    bool fits = true;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      const auto digit = static_cast<std::uint64_t>(text[i] - '0');
      if (value > (UINT64_MAX - digit) / 10) fits = false;
      if (fits) value = value * 10 + digit;
    }
    if (fits) out.insert(value);
  }
  return out;
}

/// The numbers `text` holds as hexadecimal words: each maximal run of hex digits, as its value
/// (runs that do not fit 64 bits left out).
inline std::set<std::uint64_t> hex_words(std::string_view text) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::set<std::uint64_t> out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (hex(text[i]) < 0) {
      ++i;
      continue;
    }
    std::uint64_t value = 0;
    bool fits = true;
    for (; i < text.size() && hex(text[i]) >= 0; ++i) {
      if (value > (UINT64_MAX >> 4)) fits = false;
      if (fits) value = value << 4 | static_cast<std::uint64_t>(hex(text[i]));
    }
    if (fits) out.insert(value);
  }
  return out;
}

/// Whether `value` is a number of `words`, or (kB lines) 1024 x one of them.
inline bool held_as_kb_or_bare(const std::set<std::uint64_t>& words, std::uint64_t value) {
  return words.count(value) != 0 || (value % 1024 == 0 && words.count(value / 1024) != 0);
}

/// The text, made printable for a failure message (at most 200 bytes).
inline std::string shown(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    }
  }
  if (text.size() > 200) out += "...";
  return out;
}

}  // namespace fuzz

#ifdef HUGEPAGE_FUZZ_COUNT_ALLOCATIONS
// The replaced allocation functions: each block carries its size in a 16-byte header.
namespace fuzz::detail {
inline void* counted_new(std::size_t size) {
  auto* block = static_cast<unsigned char*>(std::malloc(size + 16));
  if (block == nullptr) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(block) = size;
  heap.live += size;
  ++heap.calls;
  if (heap.live > heap.peak) heap.peak = heap.live;
  return block + 16;
}
inline void counted_delete(void* p) noexcept {
  if (p == nullptr) return;
  auto* block = static_cast<unsigned char*>(p) - 16;
  heap.live -= *reinterpret_cast<std::size_t*>(block);
  std::free(block);
}
}  // namespace fuzz::detail

void* operator new(std::size_t size) { return fuzz::detail::counted_new(size); }
void* operator new[](std::size_t size) { return fuzz::detail::counted_new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return fuzz::detail::counted_new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return fuzz::detail::counted_new(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { fuzz::detail::counted_delete(p); }
void operator delete[](void* p) noexcept { fuzz::detail::counted_delete(p); }
void operator delete(void* p, std::size_t) noexcept { fuzz::detail::counted_delete(p); }
void operator delete[](void* p, std::size_t) noexcept { fuzz::detail::counted_delete(p); }
#endif
