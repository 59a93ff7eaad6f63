// tools/doctor/advise_allocator.cpp - advice for an allocator that does not ask for huge pages.
#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <utility>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "advise_reach.hpp"
#include "process_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

// The glibc version as "major.minor" numbers; nullopt when unknown.
std::optional<std::pair<int, int>> version_pair(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "%d.%d", &major, &minor) != 2) return std::nullopt;
  return std::make_pair(major, minor);
}

}  // namespace

void advise_allocator(const process_report& p, const system_report& s, const std::string& head,
                      std::vector<advice>& out) {
  const allocator_report& a = p.allocator;
  const std::vector<std::string> evidence{
      "THP enabled=madvise: only advised ranges get huge pages",
      fmt::format("allocator {}{} (mapped: {})", a.guess.name,
                  a.guess.version.empty() ? "" : " " + a.guess.version,
                  a.guess.library.empty() ? "none" : a.guess.library),
      fmt::format("its huge page setting: {}", a.hugepage_mode)};
  const std::string trade =
      "more RSS for sparse heaps, and fork copy-on-write copies 2 MiB at a time";
  if (a.guess.name == "jemalloc") {
    out.push_back(environment_advice(
        p, rule_id::jemalloc_without_thp,
        head + "jemalloc runs without thp:always, so its heap is never advised (thp:always "
               "reaches jemalloc's own arenas, not memory the program maps itself); ",
        evidence, trade, "MALLOC_CONF", "thp:always,metadata_thp:auto", malloc_conf));
  } else if (a.guess.name == "glibc") {
    const auto v = version_pair(a.guess.version);
    if (v && *v < std::make_pair(2, 35)) {
      // No malloc setting: what reaches the memory of a program that cannot be changed is
      // MADV_COLLAPSE and the machine-wide mode; the library only where it can be.
      const collapse_fallback fallback = collapse_of(p, s);
      out.push_back({rule_id::glibc_too_old_for_thp,
                     head + fmt::format("glibc {} has no glibc.malloc.hugetlb tunable (2.35+), so "
                                        "no malloc setting advises its heap; THP enabled=always "
                                        "(machine-wide) reaches it{}, or {}; where the program "
                                        "can be changed, put its large containers on "
                                        "hugepage::thp_allocator",
                                        a.guess.version, always_caveat(s), fallback.text),
                     evidence, "", fallback.commands});
      return;
    }
    out.push_back(environment_advice(
        p, rule_id::glibc_without_hugetlb_tunable,
        head + "glibc malloc runs without glibc.malloc.hugetlb=1, so it never advises THP; ",
        evidence, trade, "GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", glibc_tunables));
  } else if (a.guess.name == "mimalloc") {
    // mimalloc 2.0 reads MIMALLOC_LARGE_OS_PAGES; 2.1 renamed the option allow_large_os_pages
    // and still reads the old name, so the old name is right for both and for unknown versions.
    const auto v = version_pair(a.guess.version);
    const bool new_name = v && *v >= std::make_pair(2, 1);
    out.push_back(environment_advice(
        p, rule_id::mimalloc_without_large_pages,
        head + "mimalloc runs without large OS pages, so its segments are not "
               "advised; ",
        evidence,
        "mimalloc then maps its segments from the hugetlb pool first "
        "(MAP_HUGETLB) while the pool has free pages, and advises THP for the "
        "rest: pool pages other users lack, more RSS for sparse heaps",
        new_name ? "MIMALLOC_ALLOW_LARGE_OS_PAGES" : "MIMALLOC_LARGE_OS_PAGES", "1", single_value));
  } else if (a.guess.name == "tcmalloc") {
    // gperftools tcmalloc has no THP option: only the machine-wide setting reaches its heap.
    out.push_back({rule_id::tcmalloc_without_thp,
                   head + "gperftools tcmalloc has no THP option; its heap gets huge pages only "
                          "with THP enabled=always (machine-wide) or by linking the big "
                          "containers against hugepage::thp_allocator",
                   evidence,
                   "enabled=always raises RSS and fault latency for every process",
                   {}});
  }
}

}  // namespace hugepage::doctor
