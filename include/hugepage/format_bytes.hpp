// hugepage/format_bytes.hpp - a byte count as people read it.
//
// The one formatter for sizes in human text: the library's exception messages (refusal.hpp,
// strategy.hpp) and hugepage-doctor's tables and advice. Public, so a tool prints sizes the way
// the library's messages do; the text is a contract (tests compare it byte for byte).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "hugepage/page_size.hpp"

namespace hugepage {

/// `bytes` in the largest binary unit it reaches: "512 B", "1.5 KiB", "67.0 MiB", "1.50 GiB".
/// Exact multiples (page sizes, pool sizes) print without decimals: "2 MiB", "1 GiB".
inline std::string format_bytes(std::uint64_t bytes) {
  char text[48];
  if (bytes < units::kib) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
    return text;
  }
  const std::uint64_t unit = bytes < units::mib   ? units::kib
                             : bytes < units::gib ? units::mib
                                                  : units::gib;
  const char* const name = unit == units::kib ? "KiB" : unit == units::mib ? "MiB" : "GiB";
  if (bytes % unit == 0) {
    std::snprintf(text, sizeof text, "%llu %s", static_cast<unsigned long long>(bytes / unit),
                  name);
  } else {
    // Two decimals for GiB, where a tenth is still 100 MiB.
    std::snprintf(text, sizeof text, unit == units::gib ? "%.2f %s" : "%.1f %s",
                  static_cast<double>(bytes) / static_cast<double>(unit), name);
  }
  return text;
}

}  // namespace hugepage
