// tools/doctor/proc_text.cpp - parsers for cgroup, environ, maps, numa_maps.
#include "proc_text.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <system_error>

namespace hugepage::doctor {

namespace {

// Splits off the next line (without its newline).
std::string_view next_line(std::string_view& text) {
  const auto newline = text.find('\n');
  const std::string_view line = text.substr(0, newline);
  text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  return line;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string_view next_word(std::string_view& text) {
  text = trim(text);
  std::size_t n = 0;
  while (n < text.size() && text[n] != ' ' && text[n] != '\t') ++n;
  const std::string_view word = text.substr(0, n);
  text.remove_prefix(n);
  return word;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Whether `s` is all decimal digits (and not empty).
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

// ---- status ------------------------------------------------------------------------------------

std::optional<std::string> status_text_field(std::string_view text, std::string_view key) {
  return parse_status(text).field(std::string(key));
}

// ---- environ, maps -----------------------------------------------------------------------------

namespace {

// glibc before 2.39 (parse_tunables) writes a NUL over the ':' after each tunable it knows, in
// place, so /proc/PID/environ holds GLIBC_TUNABLES=first, then the rest as NUL-separated
// fragments: "glibc.malloc.hugetlb=1", "foo=3:glibc.malloc.hugetlb=1" (an unknown entry keeps
// its ':'), "bar" (an entry without '='). A known tunable's name has dots (glibc.malloc.*), a
// variable's name none, and a variable always has a '='.
bool tunable_fragment(std::string_view entry) {
  const auto equals = entry.find('=');
  if (equals == std::string_view::npos) return !entry.empty();
  return entry.substr(0, equals).find('.') != std::string_view::npos ||
         entry.find(":glibc.") != std::string_view::npos;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_allocator_environ(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> kept;
  bool in_tunables = false;  // the last entry was GLIBC_TUNABLES or one of its fragments
  while (!text.empty()) {
    const auto nul = text.find('\0');
    const std::string_view entry = text.substr(0, nul);
    text.remove_prefix(nul == std::string_view::npos ? text.size() : nul + 1);
    if (in_tunables && tunable_fragment(entry)) {
      kept.back().second += ':';
      kept.back().second += entry;
      continue;
    }
    in_tunables = false;
    const auto equals = entry.find('=');
    if (equals == std::string_view::npos || equals == 0) continue;
    const std::string_view name = entry.substr(0, equals);
    in_tunables = name == "GLIBC_TUNABLES";
    const bool wanted =
        name == "MALLOC_CONF" || name == "_RJEM_MALLOC_CONF" || name == "GLIBC_TUNABLES" ||
        name == "LD_PRELOAD" || name == "JAVA_TOOL_OPTIONS" || name == "JDK_JAVA_OPTIONS" ||
        name == "_JAVA_OPTIONS" || name == "NUMPY_MADVISE_HUGEPAGE" || name == "GODEBUG" ||
        starts_with(name, "MIMALLOC_") || starts_with(name, "TCMALLOC_") ||
        // The .NET GC's large pages and the hard limit they need (DOTNET_, or COMPlus_ before
        // .NET 6).
        name == "DOTNET_GCLargePages" || name == "COMPlus_GCLargePages" ||
        starts_with(name, "DOTNET_GCHeapHardLimit") || starts_with(name, "COMPlus_GCHeapHardLimit");
    if (wanted) kept.emplace_back(std::string(name), std::string(entry.substr(equals + 1)));
  }
  return kept;
}

bool environ_overwritten(std::string_view text) {
  // A real environment is NAME=value entries; a title written over it (setproctitle) is text
  // without '=' followed by NUL padding, or only NULs (setproctitle clears the whole area). One
  // entry without '=' is enough to distrust the rest.
  // glibc's GLIBC_TUNABLES fragments are no title.
  const bool had_bytes = !text.empty();
  bool any_entry = false;
  bool in_tunables = false;
  while (!text.empty()) {
    const auto nul = text.find('\0');
    const std::string_view entry = text.substr(0, nul);
    text.remove_prefix(nul == std::string_view::npos ? text.size() : nul + 1);
    if (entry.empty()) {
      in_tunables = false;
      continue;
    }
    any_entry = true;
    if (in_tunables && tunable_fragment(entry)) continue;
    const auto equals = entry.find('=');
    if (equals == std::string_view::npos || equals == 0) return true;
    in_tunables = entry.substr(0, equals) == "GLIBC_TUNABLES";
  }
  return had_bytes && !any_entry;
}

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

// ---- numa_maps ---------------------------------------------------------------------------------

namespace {

// One line of numa_maps: its start address, page size and pages per node.
struct numa_maps_line {
  std::uintptr_t start = 0;
  std::uint64_t page_kib = 4;
  std::vector<std::pair<int, std::uint64_t>> counts;
};

numa_maps_line parse_numa_maps_line(std::string_view line) {
  numa_maps_line out;
  const std::string_view address = next_word(line);
  for (const char c : address) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0 || out.start >> 60 != 0) {
      out.start = 0;
      break;
    }
    out.start = out.start << 4 | static_cast<std::uintptr_t>(digit);
  }
  while (!line.empty()) {
    const std::string_view word = next_word(line);
    if (word.empty()) break;
    if (starts_with(word, "kernelpagesize_kB=")) {
      out.page_kib = parse_number(word.substr(18)).value_or(4);
    } else if (word.size() > 3 && word[0] == 'N' && word[1] >= '0' && word[1] <= '9') {
      const auto eq = word.find('=');
      if (eq == std::string_view::npos) continue;
      const auto node = parse_number(word.substr(1, eq - 1));
      const auto pages = parse_number(word.substr(eq + 1));
      if (node && pages && *node < 4096) out.counts.emplace_back(static_cast<int>(*node), *pages);
    }
  }
  return out;
}

}  // namespace

std::map<int, numa_usage> parse_numa_maps(std::string_view text) {
  std::map<int, numa_usage> nodes;
  while (!text.empty()) {
    const numa_maps_line line = parse_numa_maps_line(next_line(text));
    for (const auto& [node, pages] : line.counts) {
      numa_usage& u = nodes[node];
      u.bytes += pages * line.page_kib * 1024;
      if (line.page_kib > 4) u.hugetlb_bytes += pages * line.page_kib * 1024;
    }
  }
  return nodes;
}

std::map<std::uintptr_t, std::map<int, std::uint64_t>> parse_numa_maps_by_mapping(
    std::string_view text) {
  std::map<std::uintptr_t, std::map<int, std::uint64_t>> out;
  while (!text.empty()) {
    const numa_maps_line line = parse_numa_maps_line(next_line(text));
    if (line.counts.empty()) continue;
    auto& nodes = out[line.start];
    for (const auto& [node, pages] : line.counts) nodes[node] += pages * line.page_kib * 1024;
  }
  return out;
}

std::vector<int> parse_id_list(std::string_view text) {
  std::vector<int> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    while (!item.empty() && (item.back() == '\n' || item.back() == ' ')) item.remove_suffix(1);
    const std::size_t dash = item.find('-');
    const auto from = parse_number(item.substr(0, dash));
    const auto to = dash == std::string_view::npos ? from : parse_number(item.substr(dash + 1));
    if (!from || !to || *to < *from || *to > 1U << 20) continue;
    for (std::uint64_t n = *from; n <= *to; ++n) out.push_back(static_cast<int>(n));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// ---- cgroups -----------------------------------------------------------------------------------

cgroup_membership parse_cgroup_file(std::string_view text) {
  const cgroup_paths paths = cgroup_paths_of(parse_proc_cgroup(text), "hugetlb");
  cgroup_membership m;
  m.unified = paths.v2;
  m.hugetlb = paths.v1;
  return m;
}

std::optional<std::uint64_t> parse_number(std::string_view text) { return parse_decimal(text); }

// ---- reading -----------------------------------------------------------------------------------

std::optional<std::string> read_text(const std::string& root, const std::string& path,
                                     std::error_code* ec) {
  return read_kernel_text(root, path, ec);
}

std::vector<int> numa_nodes(const std::string& root) {
  std::vector<int> nodes;
  const std::string directory = root + "/sys/devices/system/node";
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return nodes;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (starts_with(name, "node") && all_digits(name.substr(4))) {
      nodes.push_back(static_cast<int>(parse_number(name.substr(4)).value_or(0)));
    }
  }
  ::closedir(dir);
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace hugepage::doctor
