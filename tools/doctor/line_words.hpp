// tools/doctor/line_words.hpp - lines and blank-separated words of /proc text, for the doctor's
// parsers of maps (allocator_detect.cpp), environ (process_environ.cpp) and numa_maps
// (numa_files.cpp). Internal to those parsers: a line is split off without its newline, a word
// ends at a blank or tab, and nothing here allocates.
#pragma once

#include <cstddef>
#include <string_view>

namespace hugepage::doctor::line_words {

// Splits off the next line (without its newline).
inline std::string_view next_line(std::string_view& text) {
  const auto newline = text.find('\n');
  const std::string_view line = text.substr(0, newline);
  text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  return line;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

inline std::string_view next_word(std::string_view& text) {
  text = trim(text);
  std::size_t n = 0;
  while (n < text.size() && text[n] != ' ' && text[n] != '\t') ++n;
  const std::string_view word = text.substr(0, n);
  text.remove_prefix(n);
  return word;
}

inline bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace hugepage::doctor::line_words
