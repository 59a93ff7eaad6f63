// tools/doctor/status_fields.cpp - text fields of /proc/<pid>/status, through the library's parser.
#include "status_fields.hpp"

#include "hugepage/kernel_counters.hpp"

namespace hugepage::doctor {

std::optional<std::string> status_text_field(std::string_view text, std::string_view key) {
  return parse_status(text).field(std::string(key));
}

}  // namespace hugepage::doctor
