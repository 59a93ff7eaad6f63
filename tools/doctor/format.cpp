// tools/doctor/format.cpp - numbers for people: byte sizes and shares.
#include <fmt/format.h>

#include <cstdint>

#include "report.hpp"

namespace hugepage::doctor {

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const int shift = bytes < (std::uint64_t{1} << 20)   ? 10
                    : bytes < (std::uint64_t{1} << 30) ? 20
                                                       : 30;
  const char* unit = shift == 10 ? "KiB" : shift == 20 ? "MiB" : "GiB";
  // Exact multiples (page sizes, pool sizes) print without decimals: "2 MiB", "1 GiB".
  if (bytes % (std::uint64_t{1} << shift) == 0) return fmt::format("{} {}", bytes >> shift, unit);
  const double value = static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << shift);
  return shift == 30 ? fmt::format("{:.2f} {}", value, unit)
                     : fmt::format("{:.1f} {}", value, unit);
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

}  // namespace hugepage::doctor
