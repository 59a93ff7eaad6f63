// tools/doctor/format.cpp - numbers for people: shares. Byte sizes: hugepage::format_bytes.
#include "format.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace hugepage::doctor {

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100.0); }

}  // namespace hugepage::doctor
