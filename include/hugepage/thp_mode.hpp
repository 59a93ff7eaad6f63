// hugepage/thp_mode.hpp - whether this process gets transparent huge pages: the PMD-size THP
// mode, the THP page size and a process-wide THP disable.
//
// Read-only, from
//   /sys/kernel/mm/transparent_hugepage/enabled and hpage_pmd_size
//   /sys/kernel/mm/transparent_hugepage/hugepages-<PMD kB>kB/enabled (Linux 6.8+)
//   prctl(PR_GET_THP_DISABLE)
// The allocation path reads these on every THP mapping (strategy.hpp), so they allocate nothing
// and this header carries nothing else of system.hpp's report (read_thp_settings reads the same
// files in full, through the same parser).
#pragma once

#include <sys/prctl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"

#ifndef PR_THP_DISABLE_EXCEPT_ADVISED
#define PR_THP_DISABLE_EXCEPT_ADVISED (1 << 1)
#endif

namespace hugepage {

/// Whether anonymous memory faults PMD-size transparent huge pages (2 MiB on x86-64). Since Linux
/// 6.8 two files decide it: the per-size `hugepages-<PMD kB>kB/enabled` (always, inherit,
/// madvise, never) overrides the top-level `enabled` unless it says `inherit`. Before 6.8 (no
/// per-size file) the top-level file alone. read_thp_mode() is the one reader the library uses.
enum class thp_mode : unsigned char {
  always,   ///< every anonymous range
  madvise,  ///< ranges advised with MADV_HUGEPAGE only
  never,    ///< no range: faults and khugepaged give base pages
};

/// Returns "always", "madvise" or "never".
constexpr const char* name_of(thp_mode mode) noexcept {
  switch (mode) {
    case thp_mode::always: return "always";
    case thp_mode::madvise: return "madvise";
    case thp_mode::never: return "never";
  }
  return "never";
}

/// Whether THP is disabled for the calling process in a way that reaches advised memory:
/// PR_SET_THP_DISABLE (prctl(2)) without Linux 6.18's exception for advised memory
/// (PR_THP_DISABLE_EXCEPT_ADVISED). MADV_COLLAPSE and MADV_HUGEPAGE get no huge page then.
/// False when prctl fails. Thread-safe; one system call.
inline bool thp_disabled_for_process() noexcept {
  const int disabled = ::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0);
  return disabled > 0 && (disabled & PR_THP_DISABLE_EXCEPT_ADVISED) == 0;
}

namespace detail {
/// The directory of THP's switches; per size: hugepages-<kB>kB/ in it (Linux 6.8+).
inline constexpr const char* thp_directory = "/sys/kernel/mm/transparent_hugepage/";
/// hpage_pmd_size's value if it is a power of two at least the base page size, else 2 MiB (the
/// file is absent without THP; 512 MiB on arm64 with 64 KiB base pages).
inline std::size_t valid_thp_bytes(std::optional<std::uint64_t> value) noexcept {
  const std::size_t v = value ? static_cast<std::size_t>(*value) : 0;
  return v >= os::base_page_size() && (v & (v - 1)) == 0 ? v : 2 * units::mib;
}

/// The mode of a THP `enabled` word, or nullopt for `inherit` and anything else.
constexpr std::optional<thp_mode> thp_mode_of(std::string_view word) noexcept {
  if (word == "always") return thp_mode::always;
  if (word == "madvise") return thp_mode::madvise;
  if (word == "never") return thp_mode::never;
  return std::nullopt;
}

/// The effective PMD-size THP mode from the texts of the top-level `enabled` file and of the
/// per-size `hugepages-<PMD kB>kB/enabled` (nullopt: no such file, a kernel before 6.8). nullopt
/// when the texts do not say (unreadable, unknown words). Pure; allocates nothing.
constexpr std::optional<thp_mode> effective_thp_mode(
    std::string_view top, std::optional<std::string_view> per_size) noexcept {
  if (per_size) {
    const std::string_view word = bracketed(*per_size);
    if (word != "inherit") return thp_mode_of(word);
  }
  return thp_mode_of(bracketed(top));
}

/// read_thp_mode() for the files at `top_path` and `per_size_path` (absent: no per-size switch).
inline std::optional<thp_mode> read_thp_mode_at(const char* top_path,
                                                const char* per_size_path) noexcept {
  // Stack buffers: read on allocation paths, where std::bad_alloc must not come from here.
  char top[128] = {};
  char per_size[128] = {};
  const long n = read_small_file(top_path, top, sizeof top);
  const long m = read_small_file(per_size_path, per_size, sizeof per_size);
  const std::string_view top_text(top, n > 0 ? static_cast<std::size_t>(n) : 0);
  if (m < 0) return effective_thp_mode(top_text, std::nullopt);
  return effective_thp_mode(top_text, std::string_view(per_size, static_cast<std::size_t>(m)));
}
}  // namespace detail

/// The THP page size from the text of hpage_pmd_size: `value` when it is a power of two of at
/// least the base page size, else 2 MiB (the file is absent without THP). Pure.
using detail::valid_thp_bytes;

/// The size of a transparent huge page: hpage_pmd_size, read once (2 MiB when unreadable; 512 MiB
/// on arm64 with 64 KiB base pages). Thread-safe.
inline std::size_t thp_page_bytes() noexcept {
  static const std::size_t bytes = [] {
    char path[96];  // no allocation: this function is noexcept
    std::snprintf(path, sizeof path, "%shpage_pmd_size", detail::thp_directory);
    return detail::valid_thp_bytes(detail::read_u64(path));
  }();
  return bytes;
}

/// Reads the effective mode of PMD-size THP (thp_mode): the per-size switch of
/// thp_page_bytes(), else the top-level `enabled`. Empty when the files say nothing readable
/// (a kernel without CONFIG_TRANSPARENT_HUGEPAGE). Allocates nothing; thread-safe.
inline std::optional<thp_mode> read_thp_mode() noexcept {
  struct paths {
    std::array<char, 96> top{};
    std::array<char, 96> per_size{};
  };
  static const paths files = [] {
    paths p;
    std::snprintf(p.top.data(), p.top.size(), "%senabled", detail::thp_directory);
    std::snprintf(p.per_size.data(), p.per_size.size(), "%shugepages-%zukB/enabled",
                  detail::thp_directory, thp_page_bytes() / 1024);
    return p;
  }();
  return detail::read_thp_mode_at(files.top.data(), files.per_size.data());
}

}  // namespace hugepage
