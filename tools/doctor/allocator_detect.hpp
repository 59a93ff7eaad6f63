// tools/doctor/allocator_detect.hpp - the malloc a process runs, recognised from the files it maps
// (allocator_detect.cpp).
//
// /proc/<pid>/maps names each mapped file; the doctor keeps their paths (runtime_detect.hpp reads
// the same list for a runtime or server) and recognises jemalloc, tcmalloc, mimalloc, glibc and
// musl among them, with a version where the file name gives one. Every function takes text or
// paths, so tests feed stored samples; an allocator linked into the executable maps no file of
// its own and is not seen here.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hugepage::doctor {

/// The last component of `path` ("/usr/lib/x86_64-linux-gnu/libc.so.6" -> "libc.so.6").
std::string_view base_name(std::string_view path);

/// The paths named in /proc/<pid>/maps text (each once, in order of first appearance).
std::vector<std::string> parse_maps_paths(std::string_view text);

/// The malloc a process runs, judged from its mapped libraries.
struct allocator_guess {
  allocator_guess() = default;
  allocator_guess(std::string name_, std::string library_ = "",  // NOLINT: brace lists in tests
                  std::string version_ = "")
      : name(std::move(name_)), library(std::move(library_)), version(std::move(version_)) {}

  std::string name;     ///< "jemalloc", "tcmalloc", "mimalloc", "glibc", or "unknown"
  std::string library;  ///< the mapped file it was recognised by ("" when none)
  /// The version its file name gives ("2.0" from libmimalloc.so.2.0, "2.31" from libc-2.31.so);
  /// "" when the name does not say. collect_process() may fill it in from other evidence.
  std::string version;
  std::string package;  ///< the Debian package that owns `library`, with its version, or ""
};

/// Recognises libjemalloc, libtcmalloc(_minimal), libmimalloc and glibc's libc among `paths`. An
/// allocator linked statically into the executable is not visible here and reads as glibc.
allocator_guess detect_allocator(const std::vector<std::string>& paths);

}  // namespace hugepage::doctor
