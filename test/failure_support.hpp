// test/failure_support.hpp - what the failure tests (failure_test, failure_fork_test,
// failure_input_test) share: a pattern written into and checked in a block, fault signals in a
// child, a hugetlb cgroup as a short pool.
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <string>

#include "hugepage/os.hpp"
#include "support.hpp"

namespace hugepage::test {

inline std::size_t base_page() { return os::base_page_size(); }

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Writes a pattern that depends on the address into every 8-byte word of [p, p + length).
inline void fill(void* p, std::size_t length, std::uint64_t seed) {
  auto* words = static_cast<std::uint64_t*>(p);
  for (std::size_t i = 0; i < length / sizeof(std::uint64_t); ++i) words[i] = seed ^ (i * 0x9e37);
}

// Whether the words of [p + from, p + to) still hold fill()'s pattern for the whole block at p.
inline bool holds(const void* p, std::size_t from, std::size_t to, std::uint64_t seed) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  for (std::size_t i = from / sizeof(std::uint64_t); i < to / sizeof(std::uint64_t); ++i) {
    if (words[i] != (seed ^ (i * 0x9e37))) return false;
  }
  return true;
}

// In a child: let SIGSEGV and SIGBUS kill the process instead of a sanitizer's report.
inline void default_fault_signals() {
  std::signal(SIGSEGV, SIG_DFL);
  std::signal(SIGBUS, SIG_DFL);
}

// A cgroup v2 directory with the hugetlb controller: a short "pool" for one child process.
class hugetlb_cgroup : public scratch_cgroup {
 public:
  hugetlb_cgroup() : scratch_cgroup("hugetlb") {}
  /// Limits the 2 MiB pages this cgroup may fault and reserve.
  bool limit_2m(std::size_t pages) const {
    const std::string bytes = std::to_string(pages * kHuge);
    return write("hugetlb.2MB.max", bytes) && write("hugetlb.2MB.rsvd.max", bytes);
  }
};

}  // namespace hugepage::test
