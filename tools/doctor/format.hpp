// tools/doctor/format.hpp - byte counts and shares as the doctor prints them (format.cpp).
#pragma once

#include <string>
#include <vector>

#include "hugepage/format_bytes.hpp"

namespace hugepage::doctor {

/// "64.0 MiB", "1.50 GiB", "12 KiB", "0 B": the library's formatter, which its messages use too.
using hugepage::format_bytes;

/// A share as a percentage with one decimal: 0.5 -> "50.0%".
std::string percent(double fraction);

/// Node or CPU numbers as a list: {0, 1} -> "0,1"; "none" for an empty list.
std::string join_ids(const std::vector<int>& ids);

}  // namespace hugepage::doctor
