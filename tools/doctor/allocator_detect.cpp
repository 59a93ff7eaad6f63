// tools/doctor/allocator_detect.cpp - the paths of /proc/<pid>/maps, and the malloc among them.
#include "allocator_detect.hpp"

#include <algorithm>

#include "line_words.hpp"

namespace hugepage::doctor {

using namespace line_words;

std::vector<std::string> parse_maps_paths(std::string_view text) {
  std::vector<std::string> paths;
  while (!text.empty()) {
    std::string_view line = next_line(text);
    // address perms offset dev inode [path]
    for (int i = 0; i < 5; ++i) next_word(line);
    const std::string_view path = trim(line);
    if (path.empty() || path.front() != '/') continue;
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.emplace_back(path);
  }
  return paths;
}

std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

allocator_guess detect_allocator(const std::vector<std::string>& paths) {
  // Checked in this order: a preloaded or linked allocator wins over glibc, which is always mapped.
  static constexpr std::pair<const char*, const char*> known[] = {
      {"libjemalloc", "jemalloc"},
      {"libtcmalloc", "tcmalloc"},
      {"libmimalloc", "mimalloc"},
  };
  for (const auto& [prefix, name] : known) {
    for (const std::string& path : paths) {
      const std::string_view base = base_name(path);
      if (!starts_with(base, prefix)) continue;
      allocator_guess g{name, path, ""};
      // mimalloc's soname carries its minor version (libmimalloc.so.2.0, .so.2.1); the others'
      // carry an ABI number that says nothing about the options they read.
      if (std::string_view(name) == "mimalloc") {
        if (const auto so = base.find(".so."); so != std::string_view::npos) {
          const std::string_view rest = base.substr(so + 4);
          const auto dot = rest.find('.');
          if (dot != std::string_view::npos) {
            const auto end = rest.find('.', dot + 1);
            g.version = std::string(rest.substr(0, end));
          }
        }
      }
      return g;
    }
  }
  for (const std::string& path : paths) {
    const std::string_view base = base_name(path);
    // libc.so.6, or libc-2.31.so on glibc before 2.34.
    if (base == "libc.so.6") return {"glibc", path, ""};
    // musl's libc is its dynamic loader too: /lib/ld-musl-x86_64.so.1 (Alpine), or the file
    // Debian's loader name links to, /usr/lib/x86_64-linux-musl/libc.so.
    if (starts_with(base, "ld-musl-") ||
        (base == "libc.so" && path.find("-linux-musl/") != std::string::npos)) {
      return {"musl", path, ""};
    }
    if (starts_with(base, "libc-2.") && base.size() > 10) {
      const std::string_view version = base.substr(5, base.size() - 5 - 3);  // "2.31"
      return {"glibc", path, std::string(version)};
    }
  }
  return {"unknown", "", ""};
}

}  // namespace hugepage::doctor
