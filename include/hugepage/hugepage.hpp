// hugepage/hugepage.hpp - the whole library.
//
//   allocator.hpp  thp_allocator, huge_page_allocator, collapse_allocator
//   pmr.hpp        std::pmr resources over the same strategies
//   arena.hpp      a node arena: small objects (map, list, hash nodes) on huge pages
//   arena_allocator.hpp  the STL allocator over an arena
//   arena_resource.hpp   the std::pmr resource over an arena
//   shared_arena_allocator.hpp  a stateless node allocator over a process-wide arena per tag
//   array.hpp      array<T>, make_array: an owning sized array, the port of new T[n]
//   strategy.hpp   where every hugepage decision is made
//   mapping_records.hpp  the records deallocate() consults for mappings unlike their request
//   backing.hpp    backing_of(): what the kernel actually gave
//   backing_report.hpp  the answer of backing_of(): where the bytes of a range live
//   collapse.hpp   collapse(): huge pages now, in budgeted steps, here or in another process
//   label.hpp      containers by name: coverage_of(label), labels()
//   upkeep.hpp     upkeep(): restore the huge pages labelled containers lost; upkeep_thread
//   metrics.hpp    write_metrics(): Prometheus text and JSON from inside the service
//   prometheus_exposition.hpp  the Prometheus text format: one writer, escaping and grouping
//   numa.hpp       NUMA placement of a container (bind, preferred, interleave) and its proof
//   system.hpp     THP settings, hugetlb pools, MADV_COLLAPSE support, as one report
//   hugetlb_pool.hpp  one hugetlb pool: reserved, free, promised, overcommitted pages
//   thp_mode.hpp   the THP mode and page size this process's mappings get
//   cgroup.hpp     the memory and hugetlb cgroup limits this process runs under
//   kernel_files.hpp  one parser and one reader per kernel file (mountinfo, cgroup, statm, ...)
//   kernel_counters.hpp  the "key value" files: meminfo, vmstat, PID/status, PID/smaps_rollup
//   kernel_memory.hpp    the free-memory files: buddyinfo, zoneinfo
//   process_view.hpp  one process opened once: pagemap, maps, kpageflags (backing_of, collapse)
//   errors.hpp     the exceptions: allocation_error, pool_exhausted and the cgroup refusals
//   refusal.hpp    why hugetlb pages were refused, in words, and the command that sizes a pool
//   stats.hpp      what the library has mapped
//   perf_counters.hpp  the TLB, cycle and page-fault counters of the calling thread
//   perf_events_pfm.hpp  named raw PMU events through libpfm4; optional, not included
//   smaps.hpp      /proc/<pid>/smaps parser
//   os.hpp         the noexcept mmap/madvise layer
//   page_size.hpp  the huge page sizes: 2 MiB, 1 GiB
//   format_bytes.hpp  a byte count in words, as the library's messages write it
#pragma once

#include "hugepage/allocator.hpp"
#include "hugepage/arena.hpp"
#include "hugepage/arena_allocator.hpp"
#include "hugepage/arena_resource.hpp"
#include "hugepage/array.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/backing_report.hpp"
#include "hugepage/cgroup.hpp"
#include "hugepage/collapse.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/format_bytes.hpp"
#include "hugepage/hugetlb_pool.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/kernel_memory.hpp"
#include "hugepage/label.hpp"
#include "hugepage/mapping_records.hpp"
#include "hugepage/metrics.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/perf_counters.hpp"
#include "hugepage/pmr.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/prometheus_exposition.hpp"
#include "hugepage/refusal.hpp"
#include "hugepage/shared_arena_allocator.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/strategy.hpp"
#include "hugepage/system.hpp"
#include "hugepage/thp_mode.hpp"
#include "hugepage/upkeep.hpp"
