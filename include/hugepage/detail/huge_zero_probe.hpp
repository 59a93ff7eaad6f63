// hugepage/detail/huge_zero_probe.hpp - does PAGEMAP_SCAN tell the huge zero page from a THP?
//
// backing_of() may skip smaps (which walks every page table of the process) only where the kernel
// flags the huge zero page PAGE_IS_PFNZERO, or maps none. These functions find that out once per
// process, by read-faulting memory of our own and scanning it.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/process_view.hpp"

namespace hugepage::detail {

// What read faults of untouched private anonymous memory of our own gave, as PAGEMAP_SCAN saw it.
struct read_fault_probe {
  bool scanned = false;             // PAGEMAP_SCAN answered
  bool huge = false;                // a THP-advised, aligned 2 MiB: mapped by a PMD
  bool huge_pfnzero = false;        // ... and flagged PAGE_IS_PFNZERO
  bool small_zero_page = false;     // a MADV_NOHUGEPAGE page: the zero page (PAGE_IS_PFNZERO)
  bool huge_zero_page_off = false;  // transparent_hugepage/use_zero_page reads 0
};

// Whether the huge zero page is switched off (transparent_hugepage/use_zero_page is 0): read
// faults in THP-advised memory then allocate a THP of the process's own.
inline bool huge_zero_page_off() noexcept {
  const auto value = read_u64("/sys/kernel/mm/transparent_hugepage/use_zero_page");
  return value && *value == 0;
}

// Whether PAGEMAP_SCAN alone, without smaps' AnonHugePages as a cap, tells THP from the huge zero
// page: the kernel flags the huge zero page PAGE_IS_PFNZERO (fixed in 2025; see classify_scan), or
// it maps no huge zero page to confuse. A PMD mapping without the flag after a read fault is a THP
// of our own where the kernel maps no zero page at all (pvm_no_zero_page=1, s390 KVM guests: the
// small read fault got a page of its own too) or use_zero_page is 0; elsewhere it is the huge zero
// page, unflagged.
inline bool scan_alone_is_exact(const read_fault_probe& p) noexcept {
  if (!p.scanned) return false;
  if (!p.huge || p.huge_pfnzero) return true;  // no huge page at all (THP never): none to confuse
  return !p.small_zero_page || p.huge_zero_page_off;
}

// Read-faults a THP-advised, aligned 2 MiB and a MADV_NOHUGEPAGE page of our own and scans both
// through `self`, a view of this process (scanned = false for a view of another one).
inline read_fault_probe probe_read_faults(const process_view& self) noexcept {
  read_fault_probe probe;
  if (self.pid() != 0 && self.pid() != ::getpid()) return probe;
  const std::size_t window = 2 * units::mib;
  const std::size_t page = os::base_page_size();
  const std::size_t length = 2 * window + page;
  void* raw = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return probe;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + window - 1) & ~(window - 1);
  char* const huge = static_cast<char*>(raw) + (aligned - start);
  char* const small = huge + window;  // its own VMA: the advice differs
  ::madvise(huge, window, MADV_HUGEPAGE);
  ::madvise(small, page, MADV_NOHUGEPAGE);
  (void)*static_cast<volatile const char*>(huge);
  (void)*static_cast<volatile const char*>(small);
  probe.huge_zero_page_off = huge_zero_page_off();
  const int fd = self.pagemap_fd();
  constexpr std::uint64_t wanted =
      pagemap::page_is_present | pagemap::page_is_huge | pagemap::page_is_pfnzero;
  pagemap::page_region region{};
  std::size_t count = 0;
  std::uintptr_t walk_end = 0;
  if (fd >= 0 && !pagemap::scan(fd, aligned, aligned + window, pagemap::page_is_present, wanted,
                                &region, 1, count, walk_end)) {
    probe.huge = count != 0 && (region.categories & pagemap::page_is_huge) != 0;
    probe.huge_pfnzero = probe.huge && (region.categories & pagemap::page_is_pfnzero) != 0;
    const auto at = reinterpret_cast<std::uintptr_t>(small);
    if (!pagemap::scan(fd, at, at + page, pagemap::page_is_present, wanted, &region, 1, count,
                       walk_end)) {
      probe.scanned = true;
      probe.small_zero_page = count != 0 && (region.categories & pagemap::page_is_pfnzero) != 0;
    }
  }
  ::munmap(raw, length);
  return probe;
}

// probe_read_faults(self) with a view of this process of its own.
inline read_fault_probe probe_read_faults() noexcept {
  const process_view self;
  return probe_read_faults(self);
}

// Whether `view` reads this process's own memory on the live system: the probe can scan through
// its pagemap then instead of opening /proc/self's.
inline bool is_live_self(const process_view& view) noexcept {
  return view.root().empty() && (view.pid() == 0 || view.pid() == ::getpid());
}

// Whether backing_of may use PAGEMAP_SCAN without smaps (see scan_alone_is_exact). Probed once per
// process (a forked child keeps the answer: same kernel); where the answer rests on use_zero_page
// being 0, that file is read again each call, as it can be switched back.
inline bool scan_usable_alone(const read_fault_probe& probe) noexcept {
  if (!scan_alone_is_exact(probe)) return false;
  if (probe.huge && !probe.huge_pfnzero && probe.small_zero_page) return huge_zero_page_off();
  return true;
}

// The probe, made on the first call: through `self` where it is given (a view of this process on
// the live system), else through a view of this process of its own, which opens /proc/self's
// pagemap and maps once: the probe read-faults memory of this process, which only this process's
// pagemap shows, so a view of another process cannot serve.
inline const read_fault_probe& read_fault_probe_once(const process_view* self) noexcept {
  static const read_fault_probe probe =
      self != nullptr ? probe_read_faults(*self) : probe_read_faults();
  return probe;
}

inline bool scan_flags_huge_zero_page(const process_view& view) {
  return scan_usable_alone(read_fault_probe_once(is_live_self(view) ? &view : nullptr));
}

inline bool scan_flags_huge_zero_page() {
  return scan_usable_alone(read_fault_probe_once(nullptr));
}

}  // namespace hugepage::detail
