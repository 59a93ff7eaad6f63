// hugepage/detail/pagemap.hpp - the PAGEMAP_SCAN ioctl (Linux 6.7) and process_madvise (6.1).
//
// Same contract as os.hpp: every function is noexcept, holds no policy, and reports failure as the
// errno the kernel returned (std::generic_category). backing.hpp and collapse.hpp decide what a
// failure means.
//
// PROCMAP_QUERY (Linux 6.11) answers "which mapping is at this address" from /proc/<pid>/maps
// without reading the whole file and without the page walk that /proc/<pid>/smaps does for every
// mapping of the process: with it, backing_of() costs the same in a 100 GiB process as in a small
// one.
//
// PAGEMAP_SCAN walks a range of /proc/<pid>/pagemap in the kernel and returns runs of pages that
// share the same categories (present, PMD-mapped or hugetlb "huge", file-backed, zero page...),
// one struct page_region per run: a fully huge GiB is one region, not 262,144 pagemap words. It
// needs only the right to open the pagemap file (ptrace-read access for another process) and
// reveals no page frame numbers, so it works unprivileged. Kernels before 6.7 answer ENOTTY
// (unknown ioctl); EINVAL means the kernel rejected a field it does not know.
// Reference: Documentation/admin-guide/mm/pagemap.rst, include/uapi/linux/fs.h.
//
// Debian 12's linux-libc-dev (6.1) predates the ioctl, so its structures and numbers are defined
// here under our own names; where <linux/fs.h> has them, static_asserts check that ours agree.
#pragma once

#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <system_error>

namespace hugepage::detail::pagemap {

// ---- the ioctl's ABI, from include/uapi/linux/fs.h (Linux 6.7) -------------------------------

/// Page categories (PAGE_IS_*).
constexpr std::uint64_t page_is_wpallowed = std::uint64_t{1} << 0;
constexpr std::uint64_t page_is_written = std::uint64_t{1} << 1;
constexpr std::uint64_t page_is_file = std::uint64_t{1} << 2;  ///< not anonymous: shmem or file
constexpr std::uint64_t page_is_present = std::uint64_t{1} << 3;
constexpr std::uint64_t page_is_swapped = std::uint64_t{1} << 4;
constexpr std::uint64_t page_is_pfnzero = std::uint64_t{1} << 5;  ///< the (huge) zero page
constexpr std::uint64_t page_is_huge = std::uint64_t{1} << 6;     ///< PMD-mapped THP or hugetlb
constexpr std::uint64_t page_is_soft_dirty = std::uint64_t{1} << 7;

/// One run of pages with the same categories (struct page_region).
struct page_region {
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t categories;
};

/// The ioctl's argument (struct pm_scan_arg).
struct scan_arg {
  std::uint64_t size;
  std::uint64_t flags;
  std::uint64_t start;
  std::uint64_t end;
  std::uint64_t walk_end;  ///< out: where the walk stopped
  std::uint64_t vec;
  std::uint64_t vec_len;
  std::uint64_t max_pages;
  std::uint64_t category_inverted;
  std::uint64_t category_mask;
  std::uint64_t category_anyof_mask;
  std::uint64_t return_mask;
};
static_assert(sizeof(page_region) == 24 && sizeof(scan_arg) == 96, "the kernel's layout");

/// _IOWR('f', 16, struct pm_scan_arg).
constexpr unsigned long scan_request = _IOWR('f', 16, scan_arg);

#if defined(PAGEMAP_SCAN)
static_assert(PAGEMAP_SCAN == scan_request, "<linux/fs.h> and this header disagree");
static_assert(PAGE_IS_HUGE == page_is_huge && PAGE_IS_PFNZERO == page_is_pfnzero &&
                  PAGE_IS_PRESENT == page_is_present && PAGE_IS_FILE == page_is_file,
              "<linux/fs.h> and this header disagree");
#endif

/// Runs one PAGEMAP_SCAN over [start, end) of the pagemap file `fd`, asking for the categories in
/// `return_mask` of pages that have every category of `required`. Fills up to `capacity` regions
/// of `out`, sets `count` and `walk_end` (where the kernel stopped: `end` when the whole range was
/// walked, earlier when `out` filled up). Returns ENOTTY on kernels before 6.7.
inline std::error_code scan(int fd, std::uintptr_t start, std::uintptr_t end,
                            std::uint64_t required, std::uint64_t return_mask, page_region* out,
                            std::size_t capacity, std::size_t& count,
                            std::uintptr_t& walk_end) noexcept {
  scan_arg arg{};
  arg.size = sizeof arg;
  arg.start = start;
  arg.end = end;
  arg.vec = reinterpret_cast<std::uintptr_t>(out);
  arg.vec_len = capacity;
  arg.category_mask = required;
  arg.return_mask = return_mask;
  long n;
  do {
    n = ::ioctl(fd, scan_request, &arg);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    count = 0;
    walk_end = start;
    return std::error_code(errno, std::generic_category());
  }
  count = static_cast<std::size_t>(n);
  walk_end = static_cast<std::uintptr_t>(arg.walk_end);
  return {};
}

// ---- PROCMAP_QUERY (Linux 6.11): one mapping of /proc/<pid>/maps by address, no page walk ----

/// query_flags: the mapping that covers the address, or else the next one.
constexpr std::uint64_t procmap_covering_or_next = 0x10;

/// The ioctl's argument (struct procmap_query, include/uapi/linux/fs.h).
struct procmap_query {
  std::uint64_t size;
  std::uint64_t query_flags;
  std::uint64_t query_addr;
  std::uint64_t vma_start;      ///< out
  std::uint64_t vma_end;        ///< out
  std::uint64_t vma_flags;      ///< out: PROCMAP_QUERY_VMA_*
  std::uint64_t vma_page_size;  ///< out: the hugetlb page size for hugetlb mappings
  std::uint64_t vma_offset;
  std::uint64_t inode;
  std::uint32_t dev_major;
  std::uint32_t dev_minor;
  std::uint32_t vma_name_size;  ///< in/out; 0: no name wanted
  std::uint32_t build_id_size;  ///< in/out; 0: no build id wanted
  std::uint64_t vma_name_addr;
  std::uint64_t build_id_addr;
};
static_assert(sizeof(procmap_query) == 104, "the kernel's layout");

/// _IOWR('f', 17, struct procmap_query).
constexpr unsigned long procmap_query_request = _IOWR('f', 17, procmap_query);

#if defined(PROCMAP_QUERY)
static_assert(PROCMAP_QUERY == procmap_query_request, "<linux/fs.h> and this header disagree");
#endif

/// The mapping of the /proc/<pid>/maps file `fd` that covers `address`, or the next one above it,
/// as the kernel describes it in `q` (vma_start, vma_end, vma_page_size, inode: 0 for anonymous
/// memory). ENOENT: none; ENOTTY: a kernel before 6.11.
inline std::error_code query_mapping(int fd, std::uintptr_t address, procmap_query& q) noexcept {
  q = procmap_query{};
  q.size = sizeof q;
  q.query_flags = procmap_covering_or_next;
  q.query_addr = address;
  int n;
  do {
    n = ::ioctl(fd, procmap_query_request, &q);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::error_code(errno, std::generic_category());
  return {};
}

/// The mapping of the /proc/<pid>/maps file `fd` that covers `address`, or the next one above it:
/// [start, end) and its page size (larger than the base page for hugetlb). ENOENT: none;
/// ENOTTY: a kernel before 6.11.
inline std::error_code query_mapping(int fd, std::uintptr_t address, std::uintptr_t& start,
                                     std::uintptr_t& end, std::size_t& page_size) noexcept {
  procmap_query q;
  if (const std::error_code ec = query_mapping(fd, address, q)) return ec;
  start = static_cast<std::uintptr_t>(q.vma_start);
  end = static_cast<std::uintptr_t>(q.vma_end);
  page_size = static_cast<std::size_t>(q.vma_page_size);
  return {};
}

// ---- another process: pidfd_open (5.3) and process_madvise (5.10; MADV_COLLAPSE since 6.1) ----

#if defined(__NR_pidfd_open)
constexpr long sys_pidfd_open = __NR_pidfd_open;
#else
constexpr long sys_pidfd_open = 434;       // the same number on every architecture since 5.3
#endif
#if defined(__NR_process_madvise)
constexpr long sys_process_madvise = __NR_process_madvise;
#else
constexpr long sys_process_madvise = 440;  // the same number on every architecture since 5.10
#endif

/// pidfd_open(2): a file descriptor that names process `pid` and cannot be reused for another
/// process after it exits. Returns -1 and sets `ec` on failure (ESRCH: no such process).
inline int pidfd_open(pid_t pid, std::error_code& ec) noexcept {
  ec.clear();
  const long fd = ::syscall(sys_pidfd_open, pid, 0);
  if (fd < 0) ec = std::error_code(errno, std::generic_category());
  return static_cast<int>(fd);
}

/// process_madvise(2) with one range. Returns the bytes advised (for MADV_COLLAPSE: the whole
/// length on success) or -1 and sets `ec`. Needs PTRACE_MODE_READ access to the target (EACCES
/// otherwise, checked first) and CAP_SYS_NICE (EPERM otherwise); EINVAL for an advice the kernel
/// does not accept remotely.
inline long process_madvise(int pidfd, void* p, std::size_t length, int advice,
                            std::error_code& ec) noexcept {
  ec.clear();
  iovec range{p, length};
  long n;
  do {
    n = ::syscall(sys_process_madvise, pidfd, &range, 1UL, advice, 0U);
  } while (n < 0 && errno == EINTR);
  if (n < 0) ec = std::error_code(errno, std::generic_category());
  return n;
}

}  // namespace hugepage::detail::pagemap
