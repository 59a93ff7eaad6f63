// hugepage/errors.hpp - the exceptions the allocators throw.
//
// Allocators may throw only std::bad_alloc (and types derived from it) and
// std::bad_array_new_length, so every error here derives from std::bad_alloc and carries a
// message that says what was asked, what the kernel answered and how to fix it.
//
// Copying one never throws (static_asserts below): the texts are shared, immutable and
// reference-counted (detail/shared_text.hpp), as std::runtime_error's message is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <system_error>
#include <type_traits>

#include "hugepage/detail/shared_text.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage {

/// A mapping the library asked for was refused. `what()` names the size, the backing and the
/// kernel's errno.
class allocation_error : public std::bad_alloc {
 public:
  allocation_error(const std::string& message, std::error_code code)
      : message_(message), code_(code) {}
  const char* what() const noexcept override { return message_.c_str(); }
  /// The errno the kernel returned (empty when the library refused before asking).
  std::error_code code() const noexcept { return code_; }

 private:
  detail::shared_text message_;
  std::error_code code_;
};

/// The hugetlb pool could not cover a request. `what()` says how many pages of which size were
/// asked, how many are available, and the command that reserves enough.
class pool_exhausted : public allocation_error {
 public:
  pool_exhausted(const std::string& message, std::error_code code, page_size size,
                 std::uint64_t pages_requested, std::uint64_t pages_available)
      : allocation_error(message, code),
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

/// A hugetlb cgroup limit refused the pages, though the pool may have them: `hugetlb.<size>.max`
/// (charged when pages are faulted in, which the library does at allocation wherever such a limit
/// is set) or `hugetlb.<size>.rsvd.max` (charged at mmap); v1's `limit_in_bytes` files likewise.
/// A pool_exhausted, since for this process the pool is short: `pages_available()` is what the
/// limit still allows.
class hugetlb_limit_exceeded : public pool_exhausted {
 public:
  hugetlb_limit_exceeded(const std::string& message, std::error_code code, page_size size,
                         std::uint64_t pages_requested, std::uint64_t pages_available,
                         const std::string& file, std::uint64_t limit, std::uint64_t usage)
      : pool_exhausted(message, code, size, pages_requested, pages_available),
        file_(file),
        limit_(limit),
        usage_(usage) {}
  /// The limit file that refused: ".../hugetlb.2MB.max", ".../hugetlb.2MB.rsvd.max", ...
  std::string file() const { return std::string(file_.view()); }
  std::uint64_t limit_bytes() const noexcept { return limit_; }
  std::uint64_t usage_bytes() const noexcept { return usage_; }

 private:
  detail::shared_text file_;
  std::uint64_t limit_;
  std::uint64_t usage_;
};

/// The hugetlb pool of a node a block is bound to (numa_placement::bind) cannot cover it, whatever
/// other nodes hold: the library never takes a page from another node. `what()` names the node,
/// the pages asked and free there, and the per-node file to raise.
class node_pool_exhausted : public pool_exhausted {
 public:
  node_pool_exhausted(const std::string& message, std::error_code code, page_size size,
                      std::uint64_t pages_requested, std::uint64_t pages_available, int node,
                      const std::string& file)
      : pool_exhausted(message, code, size, pages_requested, pages_available),
        node_(node),
        file_(file) {}
  /// The first bound node that was short.
  int node() const noexcept { return node_; }
  /// Its pool's size: "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages".
  std::string file() const { return std::string(file_.view()); }

 private:
  int node_;
  detail::shared_text file_;
};

/// Populating a block (pre-fault, collapse) would pass a memory cgroup limit, where the kernel
/// answers with the OOM killer instead of an error; the library refused before touching it.
class memory_limit_exceeded : public allocation_error {
 public:
  memory_limit_exceeded(const std::string& message, const std::string& file, std::uint64_t limit,
                        std::uint64_t usage, std::uint64_t headroom)
      : allocation_error(message, std::make_error_code(std::errc::not_enough_memory)),
        file_(file),
        limit_(limit),
        usage_(usage),
        headroom_(headroom) {}
  /// The limit file: ".../memory.max", ".../memory.high" or ".../memory.limit_in_bytes".
  std::string file() const { return std::string(file_.view()); }
  std::uint64_t limit_bytes() const noexcept { return limit_; }
  std::uint64_t usage_bytes() const noexcept { return usage_; }
  /// What could still be charged when the library looked.
  std::uint64_t headroom_bytes() const noexcept { return headroom_; }

 private:
  detail::shared_text file_;
  std::uint64_t limit_;
  std::uint64_t usage_;
  std::uint64_t headroom_;
};

static_assert(std::is_nothrow_copy_constructible_v<allocation_error> &&
                  std::is_nothrow_copy_constructible_v<pool_exhausted> &&
                  std::is_nothrow_copy_constructible_v<hugetlb_limit_exceeded> &&
                  std::is_nothrow_copy_constructible_v<node_pool_exhausted> &&
                  std::is_nothrow_copy_constructible_v<memory_limit_exceeded>,
              "an exception whose copy throws terminates the program when it is thrown");
static_assert(std::is_nothrow_copy_assignable_v<allocation_error> &&
                  std::is_nothrow_copy_assignable_v<hugetlb_limit_exceeded> &&
                  std::is_nothrow_copy_assignable_v<memory_limit_exceeded>,
              "copy assignment of an exception must not throw either");

namespace detail {

// Every throw goes through these non-inlined helpers: the allocation fast path stays small.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_bad_array_new_length() {
  throw std::bad_array_new_length();
}

[[noreturn, gnu::noinline, gnu::cold]] inline void throw_allocation_error(
    const std::string& message, std::error_code code) {
  throw allocation_error(message, code);
}

}  // namespace detail
}  // namespace hugepage
