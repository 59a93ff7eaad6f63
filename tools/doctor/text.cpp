// tools/doctor/text.cpp - shell quoting, terminal escaping, systemd unit names.
#include "text.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

#include "hugepage/kernel_files.hpp"

namespace hugepage::doctor {

namespace {

bool shell_plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_./:=,+@%-").find(c) != std::string_view::npos;
}

// Length of the valid UTF-8 sequence at the start of `s` (1..4), or 0 when it is not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_length(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1fU;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0fU;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07U;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xc0U) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3fU);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
  if (cp >= 0xd800 && cp <= 0xdfff) return 0;
  // C1 controls (U+0080..U+009F): some terminals take U+009B as CSI.
  if (cp >= 0x80 && cp <= 0x9f) return 0;
  return n;
}

}  // namespace

std::string shell_quote(std::string_view text) {
  bool plain = !text.empty() && text.front() != '=';
  for (const char c : text) plain = plain && shell_plain(c);
  // '=' in a first word makes an assignment; callers that want NAME=value as an assignment
  // build it from two quoted halves, so a word with '=' is quoted unless it is plain.
  if (plain) return std::string(text);
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::string write_command(std::string_view value, std::string_view path) {
  return "echo " + shell_quote(value) + " > " + shell_quote(path);
}

std::string file_command(std::string_view path, const std::vector<std::string>& lines,
                         bool make_directory) {
  std::string out;
  if (make_directory) {
    const auto slash = path.rfind('/');
    if (slash != std::string_view::npos && slash > 0) {
      out += "mkdir -p " + shell_quote(path.substr(0, slash)) + " && ";
    }
  }
  out += "printf '%s\\n'";
  for (const auto& line : lines) out += ' ' + shell_quote(line);
  out += " > " + shell_quote(path);
  return out;
}

std::string new_file_command(std::string_view path, const std::vector<std::string>& lines) {
  std::string out;
  const auto slash = path.rfind('/');
  if (slash != std::string_view::npos && slash > 0) {
    out += "mkdir -p " + shell_quote(path.substr(0, slash)) + " && ";
  }
  out += "(set -C; printf '%s\\n'";
  for (const auto& line : lines) out += ' ' + shell_quote(line);
  out += " > " + shell_quote(path) + ")";
  return out;
}

bool printable_ascii(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e) return false;
  }
  return true;
}

std::string systemd_environment(std::string_view name, std::string_view value) {
  if (!printable_ascii(name) || !printable_ascii(value)) return {};
  std::string out = "Environment=\"" + std::string(name) + "=";
  for (const char c : value) {
    if (c == '"' || c == '\\') return {};
    out += c;
    if (c == '%') out += '%';
  }
  return out + "\"";
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const std::size_t n = utf8_length(text);
    const auto c = static_cast<unsigned char>(text.front());
    if (n == 0 || c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
      text.remove_prefix(1);
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n);
  }
  return out;
}

bool safe_unit_name(std::string_view name) {
  constexpr std::string_view suffix = ".service";
  if (name.size() <= suffix.size() || name.size() > 255) return false;
  if (name.substr(name.size() - suffix.size()) != suffix) return false;
  if (name.front() == '-' || name.front() == '.') return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == ':' || c == '_' || c == '.' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() > suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The unit whose own cgroup `path` is: /A.slice/.../B.slice/X.service and nothing below. A
// *.service further down (below a user manager, a scope or a delegated service) was named by
// whoever the cgroup was delegated to, and would name a system unit it is not; a process in a
// service's sub-cgroup may sit in a delegated subtree too. A user manager (user@UID.service) is
// a user's whole session, never restarted for one process.
std::string unit_of_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return {};
  path.remove_prefix(1);
  while (!path.empty()) {
    const auto slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    if (slash == std::string_view::npos) {
      if (!ends_with(part, ".service") || part.substr(0, 5) == "user@") return {};
      return std::string(part);
    }
    if (!ends_with(part, ".slice")) return {};
    path.remove_prefix(slash + 1);
  }
  return {};
}

}  // namespace

std::string systemd_unit(std::string_view cgroup_file_text) {
  std::optional<std::string_view> v2, v1;
  const std::vector<proc_cgroup_line> lines = parse_proc_cgroup(cgroup_file_text);
  for (const proc_cgroup_line& line : lines) {
    if (line.hierarchy == "0" && line.controllers.empty()) {
      v2 = line.path;
    } else if (line.controllers == "name=systemd") {
      v1 = line.path;
    }
  }
  // The unified path decides wherever the process has one other than the root (hybrid systems
  // track services there); v1's name=systemd path only on a legacy hierarchy.
  const std::optional<std::string_view>& path = v2 && *v2 != "/" ? v2 : v1;
  const std::string unit = path ? unit_of_path(*path) : std::string();
  return safe_unit_name(unit) ? unit : std::string();
}

}  // namespace hugepage::doctor
