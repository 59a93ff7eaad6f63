// tools/doctor/read_text.cpp - the doctor's whole-file reader and number parser: the library's.
#include "read_text.hpp"

#include "hugepage/kernel_files.hpp"

namespace hugepage::doctor {

std::optional<std::uint64_t> parse_number(std::string_view text) { return parse_decimal(text); }

std::optional<std::string> read_text(const std::string& root, const std::string& path,
                                     std::error_code* ec) {
  return read_kernel_text(root, path, ec);
}

}  // namespace hugepage::doctor
