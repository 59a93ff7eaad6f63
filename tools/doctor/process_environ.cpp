// tools/doctor/process_environ.cpp - the allocator variables of /proc/<pid>/environ, and an
// environment overwritten by a title.
#include "process_environ.hpp"

#include "line_words.hpp"

namespace hugepage::doctor {

using namespace line_words;

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

}  // namespace hugepage::doctor
