// tools/test/doctor_cli_support.hpp - running the real hugepage-doctor binary in the CLI tests:
// a child with captured stdout and stderr, and small readers of its table and JSON output.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/system.hpp"
#include "support.hpp"
#include "target_launcher.hpp"

namespace doctor_cli {

struct result {
  int code = -1;
  std::string out, err;
};

// How run() starts the child.
struct run_options {
  int uid = -1;                       ///< >= 0: drop to that user (and its group) first
  bool close_stdout = false;          ///< start with fd 1 closed
  const char* stdout_path = nullptr;  ///< stdout to this file instead of the pipe
  std::function<bool()> in_child;     ///< runs in the child before exec; false: exit 97
  int keep_fd = -1;                   ///< an fd the child keeps open across exec
};

// Runs argv[0] with the arguments, capturing stdout and stderr.
inline result run(const std::vector<std::string>& args, const run_options& o) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    if (o.stdout_path != nullptr) {
      const int fd = ::open(o.stdout_path, O_WRONLY);
      if (fd < 0 || ::dup2(fd, STDOUT_FILENO) < 0) ::_exit(96);
    }
    if (o.close_stdout) ::close(STDOUT_FILENO);
    if (o.keep_fd >= 0) ::fcntl(o.keep_fd, F_SETFD, 0);
    if (o.in_child && !o.in_child()) ::_exit(97);
    const int uid = o.uid;
    if (uid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
                     ::setuid(static_cast<uid_t>(uid)) != 0)) {
      ::_exit(99);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(98);
  }
  ::close(out[1]);
  ::close(err[1]);
  result r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      } else {
        (i == 0 ? r.out : r.err).append(buffer, static_cast<std::size_t>(n));
      }
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline result run(const std::vector<std::string>& args, int uid = -1) {
  run_options o;
  o.uid = uid;
  return run(args, o);
}

inline result doctor(std::vector<std::string> args, int uid = -1) {
  args.insert(args.begin(), HUGEPAGE_DOCTOR_BINARY);
  return run(args, uid);
}

inline result doctor(std::vector<std::string> args, const run_options& o) {
  args.insert(args.begin(), HUGEPAGE_DOCTOR_BINARY);
  return run(args, o);
}

inline bool required() {
  const char* v = std::getenv("HUGEPAGE_REQUIRE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

using hugepage::test::target;

// ---- a minimal JSON syntax check ----------------------------------------------------------------

struct json_checker {
  const std::string& s;
  std::size_t i = 0;
  void ws() {
    while (i < s.size() && std::strchr(" \t\r\n", s[i]) != nullptr) ++i;
  }
  bool literal(const char* word) {
    const std::size_t n = std::strlen(word);
    if (s.compare(i, n, word) != 0) return false;
    i += n;
    return true;
  }
  bool string() {
    if (s[i] != '"') return false;
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\') {
        ++i;
      } else if (s[i] == '"') {
        ++i;
        return true;
      } else if (static_cast<unsigned char>(s[i]) < 0x20) {
        return false;
      }
    }
    return false;
  }
  bool number() {
    const std::size_t start = i;
    if (s[i] == '-') ++i;
    while (i < s.size() && std::strchr("0123456789.eE+-", s[i]) != nullptr) ++i;
    return i > start;
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    bool ok;
    if (s[i] == '{' || s[i] == '[') {
      const char close = s[i] == '{' ? '}' : ']';
      const bool object = s[i] == '{';
      ++i;
      ws();
      if (s[i] == close) {
        ++i;
        return true;
      }
      for (;;) {
        if (object) {
          ws();
          if (!string()) return false;
          ws();
          if (s[i++] != ':') return false;
        }
        if (!value()) return false;
        ws();
        if (s[i] == ',') {
          ++i;
          continue;
        }
        if (s[i] != close) return false;
        ++i;
        return true;
      }
    }
    if (s[i] == '"') {
      ok = string();
    } else if (s[i] == 't' || s[i] == 'f' || s[i] == 'n') {
      ok = literal("true") || literal("false") || literal("null");
    } else {
      ok = number();
    }
    return ok;
  }
  bool document() {
    if (!value()) return false;
    ws();
    return i == s.size();
  }
};

inline bool valid_json(const std::string& text) {
  json_checker c{text};
  return c.document();
}

// "  on THP      64 MiB\n" -> bytes; -1 when the line is missing. (No std::regex: GCC 12 warns
// inside it under -fsanitize.)
inline double table_bytes(const std::string& table, const std::string& label) {
  const auto at = table.find("\n  " + label + " ");
  if (at == std::string::npos) return -1;
  const char* p = table.c_str() + at + 3 + label.size();
  char* end = nullptr;
  const double value = std::strtod(p, &end);
  if (end == p) return -1;
  const std::string unit(end + 1, std::strcspn(end + 1, "\n"));
  using namespace hugepage::units;
  const double scale = static_cast<double>(unit == "GiB"   ? gib
                                           : unit == "MiB" ? mib
                                           : unit == "KiB" ? kib
                                                           : 1);
  return unit == "B" || scale != 1 ? value * scale : -1;
}

// The number after the first `"key": ` at or after `from`; -1 when missing.
inline double json_number(const std::string& json, const std::string& key,
                          const std::string& from = "") {
  const auto start = from.empty() ? 0 : json.find(from);
  if (start == std::string::npos) return -1;
  const auto at = json.find("\"" + key + "\": ", start);
  if (at == std::string::npos) return -1;
  const char* p = json.c_str() + at + key.size() + 4;
  char* end = nullptr;
  const double value = std::strtod(p, &end);
  return end == p ? -1 : value;
}

inline std::string exposition_problem(const std::string& text) {
  const auto name_ok = [](const std::string& n) {
    if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':';
    });
  };
  std::vector<std::string> typed;
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    for (const char c : line) {
      if (static_cast<unsigned char>(c) < 0x20) return "control byte in: " + line;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream w(line.substr(7));
      std::string name, type;
      w >> name >> type;
      if (!name_ok(name) || (type != "gauge" && type != "counter")) return "bad TYPE: " + line;
      typed.push_back(name);
      continue;
    }
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!name_ok(name)) return "bad metric name: " + line;
    if (std::find(typed.begin(), typed.end(), name) == typed.end()) return "no TYPE: " + line;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const auto eq = line.find("=\"", i);
        if (eq == std::string::npos || !name_ok(line.substr(i, eq - i)))
          return "bad label: " + line;
        for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\') {
            if (i + 1 >= line.size() || std::strchr("\\\"n", line[i + 1]) == nullptr) {
              return "bad escape: " + line;
            }
            ++i;
          }
        }
        if (i >= line.size()) return "open label value: " + line;
        ++i;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return "open labels: " + line;
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') return "no value: " + line;
    const std::string value = line.substr(i + 1);
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') return "bad value: " + line;
    ++samples;
  }
  try {
    (void)nlohmann::json(text).dump();  // throws on invalid UTF-8
  } catch (const std::exception& e) {
    return std::string("invalid UTF-8: ") + e.what();
  }
  return samples == 0 ? "no samples" : "";
}

}  // namespace doctor_cli
