// tools/doctor/allocator_settings.cpp - what a process's allocator does with huge pages, from its
// name, version and environment.
#include "allocator_settings.hpp"

#include <optional>
#include <string_view>

#include "process_report.hpp"

namespace hugepage::doctor {

namespace {

// The value of `key` in a jemalloc option string ("thp:always,metadata_thp:auto"), or "".
std::string jemalloc_option(std::string_view conf, std::string_view key) {
  while (!conf.empty()) {
    const auto comma = conf.find(',');
    const std::string_view item = conf.substr(0, comma);
    conf.remove_prefix(comma == std::string_view::npos ? conf.size() : comma + 1);
    const auto colon = item.find(':');
    if (colon != std::string_view::npos && item.substr(0, colon) == key) {
      return std::string(item.substr(colon + 1));
    }
  }
  return {};
}

// The value glibc takes for `name` from a GLIBC_TUNABLES string ("a=1:b=2"): the last entry for
// it wins, as glibc sets each entry in turn. "" when absent.
std::string glibc_tunable(std::string_view tunables, std::string_view name) {
  std::string value;
  while (!tunables.empty()) {
    const auto colon = tunables.find(':');
    const std::string_view item = tunables.substr(0, colon);
    tunables.remove_prefix(colon == std::string_view::npos ? tunables.size() : colon + 1);
    const auto equals = item.find('=');
    if (equals != std::string_view::npos && item.substr(0, equals) == name) {
      value = std::string(item.substr(equals + 1));
    }
  }
  return value;
}

}  // namespace

allocator_report describe_allocator(const allocator_guess& guess, bool environ_readable,
                                    std::vector<std::pair<std::string, std::string>> settings,
                                    bool environ_overwritten) {
  allocator_report a;
  a.guess = guess;
  a.environ_readable = environ_readable;
  a.environ_overwritten = environ_overwritten;
  a.settings = std::move(settings);
  const auto env = [&](std::string_view name) -> std::optional<std::string> {
    for (const auto& [key, value] : a.settings) {
      if (key == name) return value;
    }
    return std::nullopt;
  };
  if (!environ_readable) {
    a.hugepage_mode = "unknown (environment unreadable)";
    return a;
  }
  if (environ_overwritten) {
    a.hugepage_mode = "unknown (environment overwritten by the process title)";
    return a;
  }
  if (guess.name == "jemalloc") {
    // jemalloc 5.1+: thp:always advises every extent, thp:never forbids, default follows the
    // system; metadata_thp covers its own metadata. Builds with a prefix read _RJEM_MALLOC_CONF.
    const std::string conf = env("MALLOC_CONF").value_or(env("_RJEM_MALLOC_CONF").value_or(""));
    const std::string thp = jemalloc_option(conf, "thp");
    a.hugepage_mode = thp.empty() ? "thp:default" : "thp:" + thp;
    a.asks_for_huge = thp == "always";
  } else if (guess.name == "glibc") {
    // glibc 2.35+: glibc.malloc.hugetlb=1 madvises THP for the heap and large mmaps, =2 maps
    // from the hugetlb pool.
    const std::string hugetlb =
        glibc_tunable(env("GLIBC_TUNABLES").value_or(""), "glibc.malloc.hugetlb");
    if (hugetlb == "1") {
      a.hugepage_mode = "glibc.malloc.hugetlb=1 (THP madvise)";
      a.asks_for_huge = true;
    } else if (hugetlb == "2") {
      a.hugepage_mode = "glibc.malloc.hugetlb=2 (hugetlb pool)";
      a.asks_for_huge = true;
    } else {
      a.hugepage_mode = "off";
    }
  } else if (guess.name == "mimalloc") {
    // mimalloc 2.0 reads MIMALLOC_LARGE_OS_PAGES only; 2.1 renamed the option
    // allow_large_os_pages and reads both names. MIMALLOC_RESERVE_HUGE_OS_PAGES reserves 1 GiB
    // pages in both.
    const auto on = [&](const char* name) {
      const auto value = env(name);
      return value && !value->empty() && *value != "0" && *value != "false";
    };
    if (on("MIMALLOC_RESERVE_HUGE_OS_PAGES") || on("MIMALLOC_RESERVE_HUGE_OS_PAGES_AT")) {
      a.hugepage_mode = "reserve_huge_os_pages";
      a.asks_for_huge = true;
    } else if (on("MIMALLOC_LARGE_OS_PAGES") ||
               (on("MIMALLOC_ALLOW_LARGE_OS_PAGES") && guess.version != "2.0")) {
      a.hugepage_mode = "large_os_pages";
      a.asks_for_huge = true;
    } else if (on("MIMALLOC_ALLOW_LARGE_OS_PAGES")) {
      a.hugepage_mode = "off (MIMALLOC_ALLOW_LARGE_OS_PAGES is the 2.1 name; 2.0 ignores it)";
    } else {
      a.hugepage_mode = "off";
    }
  } else if (guess.name == "tcmalloc") {
    // gperftools tcmalloc has no THP option; Google's TCMalloc (usually linked statically) is
    // hugepage-aware by default. A shared libtcmalloc is gperftools.
    a.hugepage_mode = "none (gperftools has no THP option)";
  } else if (guess.name == "musl") {
    a.hugepage_mode = "none (musl's malloc has no huge page setting)";
  } else {
    a.hugepage_mode = "unknown";
  }
  return a;
}

}  // namespace hugepage::doctor
