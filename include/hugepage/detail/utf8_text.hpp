// hugepage/detail/utf8_text.hpp - text made valid UTF-8 for formats that require it.
//
// Label texts are the caller's bytes; the Prometheus text format and JSON both require UTF-8, and
// a scraper or parser may reject the whole document over one bad byte. Each byte that does not
// start a well-formed sequence (Unicode's definition: no overlong forms, no surrogates, nothing
// past U+10FFFF, no truncated sequence) becomes U+FFFD; valid text passes unchanged.
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

}  // namespace hugepage::detail
