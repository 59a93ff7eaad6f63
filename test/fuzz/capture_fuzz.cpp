// test/fuzz/capture_fuzz.cpp - libFuzzer target for the doctor's capture reader (read_capture,
// tools/doctor/capture.cpp) and its per-file parsers (parse_chunks, parse_coverage,
// parse_packages).
//
// The input is a capture directory: its parts, split at '\x01', are the files smaps, stat,
// status, cmdline, environ, cgroup, numa_maps, mountinfo, parent_status, chunks, numa_node,
// coverage, glibc_version, packages, views, mount_namespace in that order; a part that is "\x02"
// alone, and every part past the last, is an absent file. They are written to a fresh directory
// under /dev/shm and read back. Properties: a refusal names a file of the directory; a capture read
// holds each stored text unchanged; its pid and node are decimal words of their files; chunks,
// coverage and packages written back (chunks_text, coverage_text, packages_text) parse to the same
// values; and the capture written again (write_capture) reads back the same (mountinfo cut to the
// mounts the report uses, as write_capture documents).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capture.hpp"
#include "fuzz_support.hpp"

namespace {

using fuzz::shown;
using hugepage::doctor::process_capture;
using hugepage::doctor::process_files;

constexpr const char* names[] = {
    "smaps",     "stat",          "status", "cmdline",   "environ",  "cgroup",        "numa_maps",
    "mountinfo", "parent_status", "chunks", "numa_node", "coverage", "glibc_version", "packages"};

void remove_tree(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ::unlink((dir + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// A directory of our own under /dev/shm (memory: the reader reads files, not the disk).
const std::string& scratch() {
  static const std::string dir = [] {
    char path[] = "/dev/shm/hugepage-fuzz-capture-XXXXXX";
    if (::mkdtemp(path) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    return std::string(path);
  }();
  static const bool cleaned = [] {
    std::atexit([] {
      remove_tree(dir + "/in");
      remove_tree(dir + "/again");
      ::rmdir(dir.c_str());
    });
    return true;
  }();
  (void)cleaned;
  return dir;
}

void write_text(const std::string& path, std::string_view text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size()) std::abort();
  std::fclose(f);
}

bool same(const hugepage::doctor::chunk_headers& a, const hugepage::doctor::chunk_headers& b) {
  if (a.read != b.read || a.evidence != b.evidence || a.heaps_read != b.heaps_read ||
      a.heaps != b.heaps || a.mappings.size() != b.mappings.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.mappings.size(); ++i) {
    if (a.mappings[i].start != b.mappings[i].start ||
        a.mappings[i].chunks != b.mappings[i].chunks) {
      return false;
    }
  }
  return true;
}

bool same(const std::vector<hugepage::doctor::mapping_coverage>& a,
          const std::vector<hugepage::doctor::mapping_coverage>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& x = a[i].exact;
    const auto& y = b[i].exact;
    if (a[i].mapping.start != b[i].mapping.start || a[i].smaps_huge != b[i].smaps_huge ||
        a[i].smaps_disagrees != b[i].smaps_disagrees || x.bytes != y.bytes || x.thp != y.thp ||
        x.hugetlb_2m != y.hugetlb_2m || x.hugetlb_1g != y.hugetlb_1g || x.base != y.base ||
        x.not_resident != y.not_resident || x.unmapped != y.unmapped || x.unknown != y.unknown ||
        x.thp_shmem != y.thp_shmem || x.thp_file != y.thp_file || x.zero_page != y.zero_page ||
        x.source != y.source || x.exact != y.exact || x.note != y.note) {
      return false;
    }
  }
  return true;
}

void check_same_files(const process_files& a, const process_files& b, const char* property,
                      bool mountinfo_too) {
  FUZZ_CHECK(a.smaps == b.smaps && a.status == b.status && a.cmdline == b.cmdline &&
                 a.environ == b.environ && a.cgroup == b.cgroup && a.numa_maps == b.numa_maps &&
                 a.parent_status == b.parent_status && a.numa_node == b.numa_node &&
                 a.glibc_version == b.glibc_version && a.packages == b.packages,
             property, "a stored text or fact differs");
  FUZZ_CHECK(!mountinfo_too || a.mountinfo == b.mountinfo, property, "mountinfo differs");
  FUZZ_CHECK(same(a.chunks, b.chunks), property, "chunks differ");
  FUZZ_CHECK(a.coverage.has_value() == b.coverage.has_value() &&
                 (!a.coverage || same(*a.coverage, *b.coverage)),
             property, "coverage differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string dir = scratch() + "/in";
  const std::string again = scratch() + "/again";
  remove_tree(dir);
  remove_tree(again);
  ::mkdir(dir.c_str(), 0700);
  std::optional<std::string> stored[std::size(names)];
  std::string_view rest = input;
  for (std::size_t i = 0; i < std::size(names) && !input.empty(); ++i) {
    const std::size_t end = rest.find('\x01');
    const std::string_view part = rest.substr(0, end);
    if (part != "\x02") {
      stored[i] = std::string(part);
      write_text(dir + "/" + names[i], part);
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }

  std::string error;
  const std::optional<process_capture> capture = hugepage::doctor::read_capture(dir, error);
  if (!capture) {
    FUZZ_CHECK(!error.empty() && error.compare(0, dir.size(), dir) == 0,
               "capture: a refusal names the directory and its file", shown(error));
    return 0;
  }
  FUZZ_CHECK(error.empty(), "capture: no error with a capture", shown(error));
  const process_files& f = capture->files;
  // Stored texts come back unchanged.
  const std::optional<std::string>* kept[] = {
      &f.status, &f.cmdline, &f.environ, &f.cgroup, &f.numa_maps, &f.mountinfo, &f.parent_status};
  const std::size_t kept_index[] = {2, 3, 4, 5, 6, 7, 8};
  FUZZ_CHECK(stored[0] && f.smaps == *stored[0], "capture: smaps as stored", "");
  for (std::size_t k = 0; k < std::size(kept); ++k) {
    FUZZ_CHECK(*kept[k] == stored[kept_index[k]], "capture: a stored text comes back unchanged",
               names[kept_index[k]]);
  }
  // Numbers are numbers of their files.
  FUZZ_CHECK(capture->pid > 0 && stored[1] &&
                 fuzz::decimal_words(*stored[1]).count(static_cast<std::uint64_t>(capture->pid)),
             "capture: the pid is a number of stat", std::to_string(capture->pid));
  if (f.numa_node) {
    FUZZ_CHECK(*f.numa_node >= 0 && stored[10] &&
                   fuzz::decimal_words(*stored[10]).count(static_cast<std::uint64_t>(*f.numa_node)),
               "capture: the node is a number of numa_node", std::to_string(*f.numa_node));
  }
  if (stored[9]) {
    const auto words = fuzz::decimal_words(*stored[9]);
    const auto hexes = fuzz::hex_words(*stored[9]);
    for (const auto& m : f.chunks.mappings) {
      FUZZ_CHECK(hexes.count(m.start) == 1, "capture: a chunk mapping's start is in chunks", "");
      for (const std::size_t bytes : m.chunks) {
        FUZZ_CHECK(words.count(bytes) == 1, "capture: a chunk's bytes are a number of chunks",
                   std::to_string(bytes));
      }
    }
    for (const std::uintptr_t heap : f.chunks.heaps) {
      FUZZ_CHECK(hexes.count(heap) == 1, "capture: a heap's start is in chunks", "");
    }
  }
  if (f.coverage) {
    const auto words = fuzz::decimal_words(*stored[11]);
    for (const auto& c : *f.coverage) {
      for (const std::size_t n : {c.exact.bytes, c.exact.thp, c.exact.base, c.smaps_huge}) {
        FUZZ_CHECK(words.count(n) == 1, "capture: a coverage count is a number of coverage",
                   std::to_string(n));
      }
    }
  }
  if (!f.glibc_version.empty()) {
    FUZZ_CHECK(stored[12] && *stored[12] == f.glibc_version + "\n",
               "capture: glibc_version as stored", shown(f.glibc_version));
  }
  // The per-file formats round-trip.
  const std::string chunks = hugepage::doctor::chunks_text(f.chunks);
  const auto chunks_again = hugepage::doctor::parse_chunks(chunks);
  FUZZ_CHECK(chunks_again && same(*chunks_again, f.chunks), "capture: chunks round-trip",
             shown(chunks));
  if (f.coverage) {
    const std::string coverage = hugepage::doctor::coverage_text(*f.coverage);
    const auto coverage_again =
        hugepage::doctor::parse_coverage(coverage, hugepage::parse_smaps(f.smaps));
    FUZZ_CHECK(coverage_again && same(*coverage_again, *f.coverage),
               "capture: coverage round-trips", shown(coverage));
  }
  const std::string packages = hugepage::doctor::packages_text(f.packages);
  FUZZ_CHECK(hugepage::doctor::parse_packages(packages) == f.packages,
             "capture: packages round-trip", shown(packages));
  // The whole capture, written again, reads back the same.
  const std::string written = hugepage::doctor::write_capture(again, f, *stored[1]);
  FUZZ_CHECK(written.empty(), "capture: a capture read can be written again", shown(written));
  std::string error_again;
  const auto reread = hugepage::doctor::read_capture(again, error_again);
  FUZZ_CHECK(reread.has_value(), "capture: a capture written again reads back", shown(error_again));
  FUZZ_CHECK(reread->pid == capture->pid, "capture: written again, the pid is the same", "");
  check_same_files(reread->files, f, "capture: written again, it reads back the same", false);
  const std::optional<std::string> used =
      f.mountinfo ? std::optional<std::string>(hugepage::doctor::mounts_used(*f.mountinfo, f.smaps))
                  : std::nullopt;
  FUZZ_CHECK(reread->files.mountinfo == used,
             "capture: written again, mountinfo is cut to the mounts used", "");
  return 0;
}
