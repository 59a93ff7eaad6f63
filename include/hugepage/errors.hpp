// hugepage/errors.hpp - the exceptions the allocators throw.
//
// Allocators may throw only std::bad_alloc (and types derived from it) and
// std::bad_array_new_length, so every error here derives from std::bad_alloc and carries a
// message that says what was asked, what the kernel answered and how to fix it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <system_error>
#include <utility>

#include "hugepage/page_size.hpp"

namespace hugepage {

/// A mapping the library asked for was refused. `what()` names the size, the backing and the
/// kernel's errno.
class allocation_error : public std::bad_alloc {
 public:
  allocation_error(std::string message, std::error_code code)
      : message_(std::move(message)), code_(code) {}
  const char* what() const noexcept override { return message_.c_str(); }
  /// The errno the kernel returned (empty when the library refused before asking).
  std::error_code code() const noexcept { return code_; }

 private:
  std::string message_;
  std::error_code code_;
};

/// The hugetlb pool could not cover a request. `what()` says how many pages of which size were
/// asked, how many are available, and the command that reserves enough.
class pool_exhausted : public allocation_error {
 public:
  pool_exhausted(std::string message, std::error_code code, page_size size,
                 std::uint64_t pages_requested, std::uint64_t pages_available)
      : allocation_error(std::move(message), code),
        size_(size),
        requested_(pages_requested),
        available_(pages_available) {}
  page_size size() const noexcept { return size_; }
  std::uint64_t pages_requested() const noexcept { return requested_; }
  std::uint64_t pages_available() const noexcept { return available_; }

 private:
  page_size size_;
  std::uint64_t requested_;
  std::uint64_t available_;
};

namespace detail {

// Every throw goes through these non-inlined helpers: the allocation fast path stays small.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_bad_array_new_length() {
  throw std::bad_array_new_length();
}

[[noreturn, gnu::noinline, gnu::cold]] inline void throw_allocation_error(std::string message,
                                                                          std::error_code code) {
  throw allocation_error(std::move(message), code);
}

}  // namespace detail
}  // namespace hugepage
