// hugepage/detail/errno_text.hpp - the symbolic names of errno values, for messages.
//
// Messages name the errno ("ENOTTY") as well as strerror's text: the name is what a reader looks
// up in a man page, and the text is localized. One table, used by every message of the library
// and of hugepage-doctor.
#pragma once

#include <cerrno>
#include <string>
#include <system_error>

namespace hugepage::detail {

/// The symbolic name of errno value `error` ("ENOENT"), or nullptr for one not listed here: those
/// the calls of this library can return.
constexpr const char* errno_symbol(int error) noexcept {
  switch (error) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EINVAL: return "EINVAL";
    case ENOTTY: return "ENOTTY";
    case ENODEV: return "ENODEV";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case EBUSY: return "EBUSY";
    case E2BIG: return "E2BIG";
    case ESRCH: return "ESRCH";
    case EFAULT: return "EFAULT";
    case ENOSPC: return "ENOSPC";
    default: return nullptr;
  }
}

/// The errno's symbolic name ("ENOENT"), or "errno N".
inline std::string errno_name(int error) {
  const char* name = errno_symbol(error);
  return name != nullptr ? std::string(name) : "errno " + std::to_string(error);
}

/// "ENOTTY, Inappropriate ioctl for device": the name where errno_symbol() has one, then the
/// text; only the text for other errors.
inline std::string errno_name_and_text(const std::error_code& ec) {
  const bool is_errno =
      ec.category() == std::generic_category() || ec.category() == std::system_category();
  const char* name = is_errno ? errno_symbol(ec.value()) : nullptr;
  return name != nullptr ? std::string(name) + ", " + ec.message() : ec.message();
}

}  // namespace hugepage::detail
