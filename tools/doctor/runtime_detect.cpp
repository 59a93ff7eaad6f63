// tools/doctor/runtime_detect.cpp - recognising a runtime or server (JVM, PostgreSQL, Redis,
// MariaDB/MySQL, memcached, Node.js, Python with numpy) and its huge page settings.
#include "runtime_detect.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "allocator_detect.hpp"
#include "jvm_options.hpp"
#include "process_report.hpp"
#include "runtime_go.hpp"

namespace hugepage::doctor {

namespace {

// The digits that follow `marker` in `path` ("/usr/lib/postgresql/15/bin" -> "15").
std::string number_after(std::string_view path, std::string_view marker) {
  const auto at = path.find(marker);
  if (at == std::string_view::npos) return {};
  std::string out;
  for (std::size_t i = at + marker.size(); i < path.size() && path[i] >= '0' && path[i] <= '9';
       ++i) {
    out += path[i];
  }
  return out;
}

// The words of a NUL-separated command line.
std::vector<std::string_view> cmdline_words(std::string_view cmdline) {
  std::vector<std::string_view> words;
  while (!cmdline.empty()) {
    const auto nul = cmdline.find('\0');
    words.push_back(cmdline.substr(0, nul));
    cmdline.remove_prefix(nul == std::string_view::npos ? cmdline.size() : nul + 1);
  }
  return words;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// memcached's large pages: -L or --enable-largepages, alone or among other flags without an
// argument ("-vL"), read as getopt does: an option that takes a value ends its word's flags, and
// takes the next word when nothing follows it in its own.
bool memcached_large_pages(std::string_view cmdline) {
  const std::vector<std::string_view> words = cmdline_words(cmdline);
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string_view w = words[i];
    if (w == "--") break;
    if (w == "--enable-largepages") return true;
    if (starts_with(w, "--")) {
      // A long option with its value in the next word ("--memory-limit 64").
      if (w.find('=') == std::string_view::npos && i + 1 < words.size() &&
          !starts_with(words[i + 1], "-")) {
        ++i;
      }
      continue;
    }
    if (w.size() < 2 || w[0] != '-') continue;
    for (std::size_t j = 1; j < w.size(); ++j) {
      if (w[j] == 'L') return true;
      if (std::string_view("apsUmcluPfntDRbBIoeN").find(w[j]) != std::string_view::npos) {
        if (j + 1 == w.size()) ++i;  // its value is the next word
        break;
      }
    }
  }
  return false;
}

// A JVM size ("1g", "512M", "1073741824": bytes, or k, m, g, t in either case); nullopt when
// malformed or over 2^62.
std::optional<std::size_t> jvm_size(std::string_view text) {
  std::size_t unit = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K': unit = std::size_t{1} << 10; break;
      case 'm':
      case 'M': unit = std::size_t{1} << 20; break;
      case 'g':
      case 'G': unit = std::size_t{1} << 30; break;
      case 't':
      case 'T': unit = std::size_t{1} << 40; break;
      default: break;
    }
    if (unit != 1) text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 19) return std::nullopt;
  std::size_t value = 0;
  for (const char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    value = value * 10 + static_cast<std::size_t>(ch - '0');
  }
  if (value > (std::size_t{1} << 62) / unit) return std::nullopt;
  return value * unit;
}

// numpy advises its array buffers of 4 MiB and up MADV_HUGEPAGE on Linux unless
// NUMPY_MADVISE_HUGEPAGE is 0 (numpy 1.20+: any integer, 0 turns it off).
void numpy_settings(runtime_report& r,
                    const std::vector<std::pair<std::string, std::string>>& env) {
  r.settings_known = true;
  r.asks_for_huge = true;
  for (const auto& [name, value] : env) {
    if (name != "NUMPY_MADVISE_HUGEPAGE") continue;
    r.settings.push_back(name + "=" + value);
    const auto first = value.find_first_not_of(' ');
    if (first != std::string::npos && value.find_first_not_of("0 ", first) == std::string::npos) {
      r.asks_for_huge = false;
    }
  }
}

}  // namespace

runtime_report detect_runtime(const std::vector<std::string>& paths, std::string_view cmdline,
                              const std::vector<std::pair<std::string, std::string>>& settings) {
  runtime_report r;
  for (const std::string& path : paths) {
    const std::string_view base = base_name(path);
    if (base == "libjvm.so") {
      r.kind = "jvm";
      r.file = path;
      r.evidence = "libjvm.so mapped (" + path + ")";
      // Debian and most distributions: /usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so.
      r.version = number_after(path, "/java-");
      if (r.version.empty()) r.version = number_after(path, "/jdk-");
      if (r.version.empty()) r.version = number_after(path, "/jdk");
      break;
    }
    if (base == "libcoreclr.so") {
      // .NET: its GC maps its own heap; .../shared/Microsoft.NETCore.App/8.0.1/libcoreclr.so.
      r.kind = "dotnet";
      r.file = path;
      r.evidence = "libcoreclr.so mapped (" + path + ")";
      r.version = number_after(path, "/Microsoft.NETCore.App/");
      r.settings_known = true;
      bool large = false, limit = false;
      for (const auto& [name, value] : settings) {
        const std::string_view n = name;
        const bool knob = n.rfind("DOTNET_", 0) == 0 || n.rfind("COMPlus_", 0) == 0;
        if (!knob) continue;
        const std::string_view knob_name = n.substr(n.find('_') + 1);
        // Hexadecimal numbers, with or without 0x: anything but zeros turns it on.
        const bool nonzero = value.find_first_not_of("0xX") != std::string::npos;
        if (knob_name == "GCLargePages") large = nonzero;
        if (starts_with(knob_name, "GCHeapHardLimit")) limit = limit || nonzero;
        r.settings.push_back(name + "=" + value);
      }
      // Large pages need a hard limit: the GC reserves and commits all of it up front.
      r.asks_for_huge = large && limit;
      r.uses_pool = r.asks_for_huge;
      break;
    }
    if (base == "postgres" && path.find("/postgresql/") != std::string::npos) {
      r.kind = "postgres";
      r.file = path;
      r.evidence = "executable " + path;
      r.version = number_after(path, "/postgresql/");
      break;
    }
    if (base == "redis-server" || base == "redis-check-rdb" || base == "redis-check-aof") {
      // Debian's redis-server is a link to redis-check-rdb: one binary, named by argv[0].
      r.kind = "redis";
      r.file = path;
      r.evidence = "executable " + path;
      break;
    }
    if (base == "mariadbd" || base == "mysqld") {
      r.kind = "mariadb";
      r.file = path;
      r.evidence = "executable " + path;
      // large_pages on the command line (the last one wins); a configuration file can set it
      // too, which the doctor does not read.
      std::optional<bool> large;
      for (std::string_view w : cmdline_words(cmdline)) {
        if (starts_with(w, "--loose-"))
          w.remove_prefix(8);
        else if (starts_with(w, "--"))
          w.remove_prefix(2);
        else
          continue;
        std::string option(w.substr(0, w.find('=')));
        std::replace(option.begin(), option.end(), '_', '-');
        const std::string_view value =
            w.find('=') == std::string_view::npos ? "1" : w.substr(w.find('=') + 1);
        if (option == "skip-large-pages" || option == "disable-large-pages") large = false;
        if (option == "large-pages" || option == "enable-large-pages") {
          large =
              value == "1" || value == "ON" || value == "on" || value == "TRUE" || value == "true";
        }
      }
      if (large) {
        r.settings.emplace_back(*large ? "--large-pages" : "--skip-large-pages");
        r.asks_for_huge = *large;
        r.uses_pool = *large;  // the buffer pool from the hugetlb pool
      }
      break;
    }
    if (base == "memcached") {
      r.kind = "memcached";
      r.file = path;
      r.evidence = "executable " + path;
      r.settings_known = true;
      r.asks_for_huge = memcached_large_pages(cmdline);
      if (r.asks_for_huge) r.settings.emplace_back("-L");
      break;
    }
    // Node by its executable (the first file mapped, lowest address) or libnode: any other file
    // may be called node.
    if (((base == "node" || base == "nodejs") && &path == &paths.front()) ||
        starts_with(base, "libnode.so")) {
      r.kind = "node";
      r.file = path;
      r.evidence = (base == "node" || base == "nodejs" ? "executable " : "") + path;
      break;
    }
  }
  if (r.kind.empty()) {
    // Python is a runtime the doctor advises on only where numpy is loaded: numpy is what asks.
    std::string python, numpy;
    for (const std::string& path : paths) {
      const std::string_view base = base_name(path);
      if (python.empty() && starts_with(base, "python") && base.find(".so") == std::string::npos) {
        python = path;
      }
      if (numpy.empty() && starts_with(base, "_multiarray_umath") &&
          base.find(".so") != std::string_view::npos) {
        numpy = path;
      }
    }
    if (!python.empty() && !numpy.empty()) {
      r.kind = "python";
      r.file = numpy;
      r.evidence = "executable " + python + ", numpy's " + numpy + " mapped";
      numpy_settings(r, settings);
    }
    return r;
  }
  if (r.kind != "jvm") return r;
  // The JVM's huge page flags: the last of + and - wins, in the order the JVM reads its options
  // (jvm_options.hpp); the application's arguments after the main class are not among them.
  const jvm_options read = read_jvm_options(cmdline, settings);
  r.settings_known = true;
  r.options_unread = read.unread;
  std::optional<bool> thp, large, tiered;
  for (const jvm_option& option : read.options) {
    const std::string_view w = option.text;
    if (w == "-XX:+UseTransparentHugePages" || w == "-XX:-UseTransparentHugePages") {
      thp = w[4] == '+';
      r.thp_flag_source = name_of(option.source);
    }
    if (w == "-XX:+UseLargePages") large = true;
    if (w == "-XX:-UseLargePages") large = false;
    if (w == "-XX:+TieredCompilation") tiered = true;
    if (w == "-XX:-TieredCompilation") tiered = false;
    // The heap's size, the large page's and the code cache's, the last of each.
    std::optional<std::size_t> size;
    if (starts_with(w, "-Xmx")) {
      if ((size = jvm_size(w.substr(4)))) r.heap_bytes = *size;
    } else if (starts_with(w, "-XX:MaxHeapSize=")) {
      if ((size = jvm_size(w.substr(16)))) r.heap_bytes = *size;
    } else if (starts_with(w, "-XX:LargePageSizeInBytes=")) {
      if ((size = jvm_size(w.substr(25)))) r.pool_page_bytes = *size;
    } else if (starts_with(w, "-XX:ReservedCodeCacheSize=")) {
      if ((size = jvm_size(w.substr(26)))) r.code_cache_bytes = *size;
    }
  }
  // HotSpot's default code cache: 240 MiB with tiered compilation (the default), 48 MiB without.
  if (r.code_cache_bytes == 0) {
    r.code_cache_bytes = tiered.value_or(true) ? 240 * units::mib : 48 * units::mib;
  }
  // UseTransparentHugePages madvises the heap (needs THP madvise or always); UseLargePages
  // alone maps the heap from the hugetlb pool (needs nr_hugepages for the whole heap).
  if (thp)
    r.settings.emplace_back(*thp ? "-XX:+UseTransparentHugePages" : "-XX:-UseTransparentHugePages");
  if (large) r.settings.emplace_back(*large ? "-XX:+UseLargePages" : "-XX:-UseLargePages");
  if (!r.options_unread.empty())
    r.settings.push_back(r.options_unread + " (argument file, not read)");
  r.asks_for_huge = thp.value_or(false) || large.value_or(false);
  r.thp_off = thp && !*thp;
  // -XX:+UseTransparentHugePages with UseLargePages madvises (THP); UseLargePages alone maps the
  // heap from the hugetlb pool and falls back to base pages, with a warning, when it is short.
  r.uses_pool = large.value_or(false) && !thp.value_or(false);
  return r;
}

bool godebug_disables_thp(const std::string& value) {
  bool off = false;
  std::string_view rest = value;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    if (entry == "disablethp=1") off = true;
    if (entry == "disablethp=0") off = false;
    rest.remove_prefix(comma == std::string_view::npos ? rest.size() : comma + 1);
  }
  return off;
}

void detect_go(runtime_report& r, const std::vector<mapping_info>& mappings,
               const std::vector<std::pair<std::string, std::string>>& settings) {
  if (!r.kind.empty()) return;
  constexpr std::uintptr_t first_arena = 0xc000000000;
  const bool heap = std::any_of(mappings.begin(), mappings.end(), [](const mapping_info& m) {
    return m.start == first_arena && m.name.empty() && m.permissions == "rw-p";
  });
  if (!heap) return;
  r.kind = "go";
  r.evidence = "an anonymous mapping at 0xc000000000, the Go runtime's first heap arena";
  r.settings_known = true;
  for (const auto& [name, value] : settings) {
    if (name == "GODEBUG") r.settings.push_back("GODEBUG=" + value);
  }
}

}  // namespace hugepage::doctor
