// hugepage/detail/refusal_facts.hpp - the readers behind read_hugetlb_refusal() (refusal.hpp)
// that no other header has: the default huge page size and this process's address space.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage::detail {

/// The default huge page size from /proc/meminfo text ("Hugepagesize:  2048 kB"): the pool that
/// vm.nr_hugepages sizes. 0 when the line is missing.
inline std::size_t parse_default_huge_page_bytes(std::string_view meminfo) {
  return static_cast<std::size_t>(kb_field(meminfo, "Hugepagesize").value_or(0));
}

/// Reads the default huge page size (parse_default_huge_page_bytes); 0 when unknown.
inline std::size_t read_default_huge_page_bytes() {
  std::error_code ec;
  const std::string meminfo = read_file("/proc/meminfo", ec);
  return ec ? 0 : parse_default_huge_page_bytes(meminfo);
}

/// The soft RLIMIT_AS in bytes; empty when unlimited (or getrlimit fails).
inline std::optional<std::uint64_t> address_space_limit() noexcept {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<std::uint64_t>(limit.rlim_cur);
}

/// The bytes of address space this process has mapped: what RLIMIT_AS is checked against
/// (statm's size, in base pages). 0 when unreadable.
inline std::uint64_t address_space_used() {
  const std::optional<statm_pages> statm = read_statm();
  return statm ? statm->size * os::base_page_size() : 0;
}

/// The mappings of this process that vm.max_map_count limits: the lines of /proc/self/maps less
/// [vsyscall], which the kernel lists (last, at the top of the address space) but does not count.
/// 0 when unreadable. Reads through a buffer on the stack: at the limit, malloc cannot map more.
/// This process's own file, not another's: no pid to reuse, so no process_view (and none of the
/// pagemap and smaps readers it brings into every container's include closure).
inline std::uint64_t mapping_count() noexcept {
  const unique_fd maps(open_regular_file("/proc/self/maps"));
  if (!maps) return 0;
  char buffer[4096];
  constexpr char vsyscall_line_end[] = "[vsyscall]\n";
  constexpr std::size_t tail_size = sizeof vsyscall_line_end - 1;
  char tail[tail_size] = {};  // the last bytes read, oldest first
  std::uint64_t lines = 0;
  for (std::uint64_t offset = 0;;) {
    const long n = pread_full(maps.get(), buffer, sizeof buffer, offset);
    if (n <= 0) break;
    offset += static_cast<std::uint64_t>(n);
    for (long i = 0; i < n; ++i) {
      lines += buffer[i] == '\n' ? 1 : 0;
      std::memmove(tail, tail + 1, tail_size - 1);
      tail[tail_size - 1] = buffer[i];
    }
  }
  const bool vsyscall_last = std::memcmp(tail, vsyscall_line_end, tail_size) == 0;
  return vsyscall_last && lines > 0 ? lines - 1 : lines;
}

}  // namespace hugepage::detail
