// hugepage/detail/utf8_text.hpp - text made valid UTF-8 for formats that require it.
//
// Label texts are the caller's bytes; the Prometheus text format and JSON both require UTF-8, and
// a scraper or parser may reject the whole document over one bad byte. Each byte that does not
// start a well-formed sequence (Unicode's definition: no overlong forms, no surrogates, nothing
// past U+10FFFF, no truncated sequence) becomes U+FFFD; valid text passes unchanged.
//
// U+FFFD makes distinct texts equal ("t\xff", "t\xfe" and "t" U+FFFD all read "t" U+FFFD): where
// texts name things that must stay distinct (a container's label in the metrics), escaped_text()
// writes them injectively instead, and without control characters.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hugepage::detail {

/// Length of the well-formed UTF-8 sequence at the start of `t` (1 to 4), or 0 if there is none.
inline std::size_t utf8_sequence_length(std::string_view t) noexcept {
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(t[i]); };
  const auto tail = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i < t.size() && at(i) >= lo && at(i) <= hi;
  };
  const unsigned b = at(0);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return tail(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const unsigned lo = b == 0xE0 ? 0xA0 : 0x80;  // E0: no overlong form
    const unsigned hi = b == 0xED ? 0x9F : 0xBF;  // ED: no surrogate
    return tail(1, lo, hi) && tail(2) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const unsigned lo = b == 0xF0 ? 0x90 : 0x80;  // F0: no overlong form
    const unsigned hi = b == 0xF4 ? 0x8F : 0xBF;  // F4: nothing past U+10FFFF
    return tail(1, lo, hi) && tail(2) && tail(3) ? 4 : 0;
  }
  return 0;
}

/// `text` with each byte that starts no well-formed UTF-8 sequence replaced by U+FFFD.
inline std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

/// `text` as valid UTF-8 without control characters, injectively: a backslash becomes two
/// backslashes; each byte that starts no well-formed sequence, and each byte of a control character
/// (U+0000 to U+001F, U+007F, U+0080 to U+009F), becomes a backslash, 'x' and two upper-case hex
/// digits (byte FF: \xFF). Reading those back gives `text`, so distinct texts stay distinct;
/// everything else, U+FFFD included, passes unchanged.
inline std::string escaped_text(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  const auto escape = [&out](unsigned char byte) {
    out += "\\x";
    out += hex[byte >> 4];
    out += hex[byte & 0xF];
  };
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence_length(text.substr(i));
    const auto b = static_cast<unsigned char>(text[i]);
    const bool c1 = n == 2 && b == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
    if (n == 0 || b < 0x20 || b == 0x7F || c1) {
      for (std::size_t k = 0; k < (n == 0 ? 1 : n); ++k)
        escape(static_cast<unsigned char>(text[i + k]));
      i += n == 0 ? 1 : n;
    } else if (b == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace hugepage::detail
