// tools/doctor/format.cpp - numbers for people: shares. Byte sizes: hugepage::format_bytes.
#include "format.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace hugepage::doctor {

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

std::string join_ids(const std::vector<int>& ids) {
  if (ids.empty()) return "none";
  std::string out;
  for (const int id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

}  // namespace hugepage::doctor
