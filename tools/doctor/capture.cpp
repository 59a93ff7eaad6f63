// tools/doctor/capture.cpp - writing and reading a process's capture (capture.hpp).
#include "capture.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

#include "hugepage/smaps.hpp"
#include "mounts.hpp"
#include "shared_views.hpp"
#include "text.hpp"

namespace hugepage::doctor {

std::string chunks_text(const chunk_headers& chunks) {
  std::string out = chunks.read ? "read" : "unread";
  if (!chunks.evidence.empty()) out += " " + chunks.evidence;
  out += "\n";
  if (chunks.heaps_read) {
    out += "heaps";
    for (const std::uintptr_t start : chunks.heaps) {
      char hex[32];
      std::snprintf(hex, sizeof hex, " %llx", static_cast<unsigned long long>(start));
      out += hex;
    }
    out += "\n";
  }
  for (const chunk_mapping& m : chunks.mappings) {
    char start[32];
    std::snprintf(start, sizeof start, "%llx", static_cast<unsigned long long>(m.start));
    out += start;
    for (const std::size_t bytes : m.chunks) out += " " + std::to_string(bytes);
    out += "\n";
  }
  return out;
}

namespace {

// Splits `text` at '\n' (a last line without one counts).
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    out.push_back(text.substr(0, newline));
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
  }
  return out;
}

// A whole unsigned number in `base`; nullopt for anything else.
std::optional<unsigned long long> number(std::string_view word, int base) {
  if (word.empty() || word.size() > 20) return std::nullopt;
  const std::string text(word);
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, base);
  if (errno != 0 || end != text.c_str() + text.size() || text[0] == '-' || text[0] == '+') {
    return std::nullopt;
  }
  return value;
}

// Whether `word` is made of ASCII letters, digits and the characters of `others` (Debian's
// alphabet for package names and versions), starting with a letter or digit.
bool debian_word(std::string_view word, std::string_view others) {
  const auto allowed = [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           others.find(c) != std::string_view::npos;
  };
  return !word.empty() && std::isalnum(static_cast<unsigned char>(word[0])) != 0 &&
         std::all_of(word.begin(), word.end(), allowed);
}

}  // namespace

std::optional<chunk_headers> parse_chunks(std::string_view text) {
  const auto lines = lines_of(text);
  if (lines.empty()) return std::nullopt;
  chunk_headers out;
  const std::string_view first = lines[0];
  const std::string_view word = first.substr(0, first.find(' '));
  if (word != "read" && word != "unread") return std::nullopt;
  out.read = word == "read";
  if (first.size() > word.size()) out.evidence = std::string(first.substr(word.size() + 1));
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::string_view rest = lines[i];
    std::vector<std::string_view> words;
    while (!rest.empty()) {
      const auto space = rest.find(' ');
      words.push_back(rest.substr(0, space));
      rest.remove_prefix(space == std::string_view::npos ? rest.size() : space + 1);
    }
    if (i == 1 && !words.empty() && words[0] == "heaps" && lines[i].back() != ' ') {
      // The thread heaps whose heap_info was read (a capture older than this line has none:
      // the layout alone decided, as heaps_read false says).
      out.heaps_read = true;
      for (std::size_t w = 1; w < words.size(); ++w) {
        const auto start = number(words[w], 16);
        if (!start || (!out.heaps.empty() && out.heaps.back() >= *start)) return std::nullopt;
        out.heaps.push_back(static_cast<std::uintptr_t>(*start));
      }
      continue;
    }
    if (words.size() < 2) return std::nullopt;
    const auto start = number(words[0], 16);
    if (!start) return std::nullopt;
    chunk_mapping m{static_cast<std::uintptr_t>(*start), {}};
    for (std::size_t w = 1; w < words.size(); ++w) {
      const auto bytes = number(words[w], 10);
      if (!bytes || *bytes == 0) return std::nullopt;
      m.chunks.push_back(static_cast<std::size_t>(*bytes));
    }
    if (!out.mappings.empty() && out.mappings.back().start >= m.start) return std::nullopt;
    out.mappings.push_back(std::move(m));
  }
  return out;
}

std::string coverage_text(const std::vector<mapping_coverage>& coverage) {
  std::string out;
  for (const mapping_coverage& c : coverage) {
    const backing_report& e = c.exact;
    char start[32];
    std::snprintf(start, sizeof start, "%llx", static_cast<unsigned long long>(c.mapping.start));
    out += start;
    for (const std::size_t n : {e.bytes, e.thp, e.hugetlb_2m, e.hugetlb_1g, e.base, e.not_resident,
                                e.unmapped, e.unknown, e.thp_shmem, e.thp_file, e.zero_page}) {
      out += " " + std::to_string(n);
    }
    out += std::string(" ") + name_of(e.source) + (e.exact ? " exact " : " approximate ") +
           std::to_string(c.smaps_huge) + (c.smaps_disagrees ? " disagrees" : " agrees");
    if (!e.note.empty()) {
      std::string note = e.note;
      std::replace(note.begin(), note.end(), '\n', ' ');
      out += " " + note;
    }
    out += "\n";
  }
  return out;
}

std::optional<std::vector<mapping_coverage>> parse_coverage(
    std::string_view text, const std::vector<mapping_info>& mappings) {
  static constexpr backing_source sources[] = {backing_source::pagemap_scan,
                                               backing_source::kpageflags, backing_source::smaps,
                                               backing_source::unavailable};
  std::vector<mapping_coverage> out;
  for (std::string_view rest : lines_of(text)) {
    std::vector<std::string_view> words;  // the 16 fields, then the note (the rest, spaces kept)
    while (!rest.empty() && words.size() < 16) {
      const auto space = rest.find(' ');
      words.push_back(rest.substr(0, space));
      rest.remove_prefix(space == std::string_view::npos ? rest.size() : space + 1);
    }
    if (words.size() < 16) return std::nullopt;
    const auto start = number(words[0], 16);
    if (!start) return std::nullopt;
    const auto at =
        std::lower_bound(mappings.begin(), mappings.end(), *start,
                         [](const mapping_info& m, unsigned long long s) { return m.start < s; });
    if (at == mappings.end() || at->start != *start) return std::nullopt;  // not in smaps
    mapping_coverage c;
    c.mapping = *at;
    backing_report& e = c.exact;
    std::size_t* const counts[] = {&e.bytes,     &e.thp,          &e.hugetlb_2m, &e.hugetlb_1g,
                                   &e.base,      &e.not_resident, &e.unmapped,   &e.unknown,
                                   &e.thp_shmem, &e.thp_file,     &e.zero_page};
    for (std::size_t i = 0; i < std::size(counts); ++i) {
      const auto n = number(words[1 + i], 10);
      if (!n) return std::nullopt;
      *counts[i] = static_cast<std::size_t>(*n);
    }
    const auto source = std::find_if(std::begin(sources), std::end(sources),
                                     [&](backing_source b) { return words[12] == name_of(b); });
    const auto smaps_huge = number(words[14], 10);
    if (source == std::end(sources) || (words[13] != "exact" && words[13] != "approximate") ||
        !smaps_huge || (words[15] != "disagrees" && words[15] != "agrees")) {
      return std::nullopt;
    }
    e.source = *source;
    e.exact = words[13] == "exact";
    e.note = std::string(rest);
    c.smaps_huge = static_cast<std::size_t>(*smaps_huge);
    c.smaps_disagrees = words[15] == "disagrees";
    out.push_back(std::move(c));
  }
  return out;
}

std::string packages_text(
    const std::map<std::string, std::pair<std::string, std::string>>& packages) {
  std::string out;
  for (const auto& [path, owner] : packages) {
    out += owner.first + " " + owner.second + " " + path + "\n";
  }
  return out;
}

std::optional<std::map<std::string, std::pair<std::string, std::string>>> parse_packages(
    std::string_view text) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (std::string_view rest : lines_of(text)) {
    const auto first = rest.find(' ');
    if (first == 0 || first == std::string_view::npos) return std::nullopt;
    const auto second = rest.find(' ', first + 1);
    if (second == first + 1 || second == std::string_view::npos || second + 1 == rest.size()) {
      return std::nullopt;
    }
    // Debian's own alphabets: a package name, a version, and a path that is printable ASCII.
    if (!debian_word(rest.substr(0, first), "+-.") ||
        !debian_word(rest.substr(first + 1, second - first - 1), "+-.~:") ||
        rest[second + 1] != '/' || !printable_ascii(rest.substr(second + 1))) {
      return std::nullopt;
    }
    out[std::string(rest.substr(second + 1))] = {
        std::string(rest.substr(0, first)),
        std::string(rest.substr(first + 1, second - first - 1))};
  }
  return out;
}

std::string mounts_used(std::string_view mountinfo, std::string_view smaps) {
  std::vector<std::string> paths;
  for (const mapping_info& m : parse_smaps(smaps)) {
    if (!m.name.empty() && m.name.front() == '/') paths.push_back(m.name);
  }
  std::string out;
  for (const std::string_view line : lines_of(mountinfo)) {
    const auto entries = parse_mount_entries(line);
    if (entries.size() != 1) continue;
    const mount_entry& e = entries[0];
    bool keep = e.point == "/" || e.point == "/dev/shm" || e.fstype == "hugetlbfs";
    const std::string prefix = e.point + "/";
    for (std::size_t i = 0; i < paths.size() && !keep; ++i) {
      keep = paths[i].compare(0, prefix.size(), prefix) == 0;
    }
    if (keep) {
      out += line;
      out += "\n";
    }
  }
  return out;
}

namespace {

// Writes all of `text` to a new file `name` in `dir_fd` (never through a link: O_EXCL).
int write_file(int dir_fd, const char* name, const std::string& text) {
  const int fd = ::openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return err;
    }
    done += static_cast<std::size_t>(n);
  }
  return ::close(fd) == 0 ? 0 : errno;
}

// Whether the directory `dir_fd` has no entry but . and ..; sets `err` when it cannot be read.
bool empty_directory(int dir_fd, int& err) {
  const int fd = ::dup(dir_fd);
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (d == nullptr) {
    err = errno;
    if (fd >= 0) ::close(fd);
    return false;
  }
  bool empty = true;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  }
  ::closedir(d);
  return empty;
}

}  // namespace

std::string write_capture(const std::string& dir, const process_files& files,
                          const std::string& stat) {
  const std::string where = "--capture " + dir + ": ";
  if (dir.empty()) return where + "no directory given";
  // "link/" would make the kernel follow a symbolic link at "link" whatever O_NOFOLLOW says.
  if (dir.size() > 1 && dir.back() == '/') {
    return where + "a path that ends in '/' (name the directory without it)";
  }
  bool created = false;
  if (::mkdir(dir.c_str(), 0700) == 0) {
    created = true;
  } else if (errno != EEXIST) {
    return where + std::strerror(errno);
  }
  // O_NOFOLLOW: a symbolic link planted at DIR is refused (ELOOP or ENOTDIR), not followed.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    const int err = errno;
    return where + (err == ELOOP || err == ENOTDIR ? "not a directory (a symbolic link is refused)"
                                                   : std::strerror(err));
  }
  int err = 0;
  if (!empty_directory(dir_fd, err)) {
    ::close(dir_fd);
    return where + (err != 0 ? std::strerror(err)
                             : "not empty (a capture is written to a new or empty directory)");
  }
  std::vector<std::pair<const char*, const std::string*>> parts;
  const std::string mountinfo = files.mountinfo ? mounts_used(*files.mountinfo, files.smaps) : "";
  const std::string chunks = chunks_text(files.chunks);
  parts.emplace_back("smaps", &files.smaps);
  const std::pair<const char*, const std::optional<std::string>*> optional_parts[] = {
      {"status", &files.status},       {"cmdline", &files.cmdline},
      {"environ", &files.environ},     {"cgroup", &files.cgroup},
      {"numa_maps", &files.numa_maps}, {"parent_status", &files.parent_status}};
  for (const auto& [name, text] : optional_parts) {
    if (text->has_value()) parts.emplace_back(name, &**text);
  }
  if (files.mountinfo) parts.emplace_back("mountinfo", &mountinfo);
  parts.emplace_back("chunks", &chunks);
  const std::string numa_node = files.numa_node ? std::to_string(*files.numa_node) + "\n" : "";
  if (files.numa_node) parts.emplace_back("numa_node", &numa_node);
  const std::string coverage = files.coverage ? coverage_text(*files.coverage) : "";
  if (files.coverage) parts.emplace_back("coverage", &coverage);
  const std::string glibc_version = files.glibc_version + "\n";
  if (!files.glibc_version.empty()) parts.emplace_back("glibc_version", &glibc_version);
  const std::string packages = packages_text(files.packages);
  if (!files.packages.empty()) parts.emplace_back("packages", &packages);
  // Only where some object is mapped more than once: the file's absence is then no loss.
  const std::string views = files.views ? residency_text(*files.views) : "";
  if (!views.empty()) parts.emplace_back("views", &views);
  const std::string ns =
      files.own_mount_namespace ? (*files.own_mount_namespace ? "own\n" : "same\n") : "";
  if (files.own_mount_namespace) parts.emplace_back("mount_namespace", &ns);
  parts.emplace_back("stat", &stat);  // last: a capture without stat is no capture
  std::vector<const char*> written;
  for (const auto& [name, text] : parts) {
    err = write_file(dir_fd, name, *text);
    if (err != 0) {
      // The file that failed is ours too (created exclusively), unless it was there already
      // (EEXIST: put there meanwhile, not ours to remove).
      if (err != EEXIST) written.push_back(name);
      for (const char* w : written) ::unlinkat(dir_fd, w, 0);
      ::close(dir_fd);
      if (created) ::rmdir(dir.c_str());
      return where + "cannot write " + name + ": " + std::strerror(err) + " (nothing kept)";
    }
    written.push_back(name);
  }
  ::close(dir_fd);
  return "";
}

namespace {

// The file `name` of the capture in `dir`: nullopt when it is absent; `problem` says why when it
// is there but cannot be read, or is not a regular file (a FIFO would block the replay, a device
// never end): it is opened without blocking and checked before anything is read.
std::optional<std::string> stored(const std::string& dir, const char* name, std::string& problem) {
  const std::string path = dir + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) problem = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    problem = path + ": not a regular file";
    return std::nullopt;
  }
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      problem = path + ": " + std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// Whether `text` is whole: empty, or its last line ends with a newline (a file cut short, mid
// number, reads as another number otherwise).
bool whole_lines(std::string_view text) { return text.empty() || text.back() == '\n'; }

// Whether `text` is smaps as the kernel writes it: whole lines, each a mapping's header (which
// parse_smaps takes, in address order) or a "Key: value" field of one, numbers whole, and each
// mapping ending with its VmFlags line (the kernel's last).
bool smaps_format(std::string_view text) {
  if (text.empty() || !whole_lines(text)) return false;
  std::size_t headers = 0;
  bool flags_seen = true;  // the previous mapping's VmFlags
  for (const std::string_view line : lines_of(text)) {
    const auto space = line.find(' ');
    const std::string_view key = line.substr(0, space);
    if (key.empty()) return false;
    if (key.back() != ':') {
      if (!flags_seen) return false;
      ++headers;
      flags_seen = false;
      continue;
    }
    if (headers == 0) return false;
    if (key == "VmFlags:") {
      flags_seen = true;
      continue;
    }
    std::string_view value = space == std::string_view::npos ? "" : line.substr(space);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    const std::string_view digits = value.substr(0, value.find(' '));
    const std::string_view unit = value.substr(digits.size());
    if (!number(digits, 10) || (!unit.empty() && unit != " kB")) return false;
  }
  if (!flags_seen) return false;
  const std::vector<mapping_info> mappings = parse_smaps(text);
  for (std::size_t i = 1; i < mappings.size(); ++i) {
    if (mappings[i].start < mappings[i - 1].end) return false;
  }
  return mappings.size() == headers;
}

// Whether `version` is a glibc version as gnu_get_libc_version gives it: "2.36", or a development
// build's "2.40.9000": two or three groups of one to four digits, joined by single dots.
bool glibc_version_format(std::string_view version) {
  int groups = 0;
  std::size_t digits = 0;
  for (const char c : version) {
    if (c >= '0' && c <= '9') {
      if (++digits > 4) return false;
    } else if (c == '.' && digits > 0) {
      ++groups;
      digits = 0;
    } else {
      return false;
    }
  }
  if (digits == 0) return false;
  ++groups;
  return groups == 2 || groups == 3;
}

}  // namespace

std::optional<process_capture> read_capture(const std::string& dir, std::string& error) {
  process_capture out;
  std::map<std::string, std::optional<std::string>> texts;
  for (const char* name : {"smaps", "stat", "status", "cmdline", "environ", "cgroup", "numa_maps",
                           "mountinfo", "parent_status", "chunks", "numa_node", "coverage",
                           "glibc_version", "packages", "views", "mount_namespace"}) {
    std::string problem;
    texts[name] = stored(dir, name, problem);
    if (!problem.empty()) {
      error = problem;
      return std::nullopt;
    }
  }
  const auto& smaps = texts["smaps"];
  const auto& stat = texts["stat"];
  if (!smaps || !stat) {
    error = dir + ": no " + (smaps ? "stat" : "smaps") + " (not a capture)";
    return std::nullopt;
  }
  const auto pid = number(stat->substr(0, stat->find(' ')), 10);
  if (!pid || *pid == 0 || *pid > 0x7fffffff) {
    error = dir + "/stat: no process id";
    return std::nullopt;
  }
  if (!smaps_format(*smaps)) {
    error = dir + "/smaps: not the smaps format";
    return std::nullopt;
  }
  out.pid = static_cast<pid_t>(*pid);
  process_files& f = out.files;
  f.smaps = *smaps;
  f.status = texts["status"];
  f.cmdline = texts["cmdline"];
  f.environ = texts["environ"];
  f.cgroup = texts["cgroup"];
  f.numa_maps = texts["numa_maps"];
  f.mountinfo = texts["mountinfo"];
  f.parent_status = texts["parent_status"];
  if (const auto& chunks = texts["chunks"]) {
    const auto parsed = whole_lines(*chunks) ? parse_chunks(*chunks) : std::nullopt;
    if (!parsed) {
      error = dir + "/chunks: not the chunks format";
      return std::nullopt;
    }
    f.chunks = *parsed;
  } else {
    f.chunks.evidence = "not in the capture";
  }
  if (const auto& node = texts["numa_node"]) {
    const auto lines = lines_of(*node);
    const auto value =
        whole_lines(*node) && lines.size() == 1 ? number(lines[0], 10) : std::nullopt;
    if (!value || *value > 0x7fffffff) {
      error = dir + "/numa_node: not a node number";
      return std::nullopt;
    }
    f.numa_node = static_cast<int>(*value);
  }
  if (const auto& coverage = texts["coverage"]) {
    // Every process has mappings, each with its coverage: an empty file is a damaged one.
    if (coverage->empty() || !whole_lines(*coverage)) {
      error = dir + "/coverage: not the coverage format, or a mapping not in smaps";
      return std::nullopt;
    }
    f.coverage = parse_coverage(*coverage, parse_smaps(f.smaps));
    if (!f.coverage) {
      error = dir + "/coverage: not the coverage format, or a mapping not in smaps";
      return std::nullopt;
    }
  }
  if (const auto& version = texts["glibc_version"]) {
    const auto lines = lines_of(*version);
    if (!whole_lines(*version) || lines.size() != 1 || lines[0].empty()) {
      error = dir + "/glibc_version: not one line";
      return std::nullopt;
    }
    if (!glibc_version_format(lines[0])) {
      error = dir + "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)";
      return std::nullopt;
    }
    f.glibc_version = std::string(lines[0]);
  }
  if (const auto& packages = texts["packages"]) {
    const auto parsed = whole_lines(*packages) ? parse_packages(*packages) : std::nullopt;
    if (!parsed) {
      error = dir + "/packages: not the packages format";
      return std::nullopt;
    }
    f.packages = *parsed;
  }
  if (const auto& ns = texts["mount_namespace"]) {
    if (*ns != "own\n" && *ns != "same\n") {
      error = dir + "/mount_namespace: neither own nor same";
      return std::nullopt;
    }
    f.own_mount_namespace = *ns == "own\n";
  }
  if (const auto& views = texts["views"]) {
    f.views = parse_residency(*views, parse_smaps(f.smaps));
    if (!f.views || f.views->empty()) {
      error = dir + "/views: not the views format, or a mapping not in smaps";
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace hugepage::doctor
