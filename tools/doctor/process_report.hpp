// tools/doctor/process_report.hpp - a process as the doctor sees it: its totals, largest
// mappings, memory classes, coverage, allocator and runtime (the names of its kinds:
// process_report.cpp). Collected by collect_process.hpp, judged by advise_process.hpp, printed by
// render_table.hpp, render_json.hpp and prometheus.hpp.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocator_detect.hpp"
#include "hugepage/backing_report.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/smaps.hpp"
#include "hugetlb_cgroup.hpp"
#include "numa_files.hpp"
#include "thp_disabler.hpp"

namespace hugepage::doctor {

/// What kind of page a share of a mapping's resident bytes lies on.
enum class page_kind { hugetlb, thp, base };

/// "hugetlb", "thp" or "base".
const char* name_of(page_kind kind) noexcept;

/// The resident bytes of a listed entry that lie on pages of one size and kind.
struct page_share {
  std::size_t page_bytes = 0;  ///< the hugetlb page, the PMD THP size, or the base page
  page_kind kind = page_kind::base;
  std::size_t bytes = 0;
  friend bool operator==(const page_share& a, const page_share& b) noexcept {
    return a.page_bytes == b.page_bytes && a.kind == b.kind && a.bytes == b.bytes;
  }
};

/// One entry of the "largest mappings" table: an anonymous or shared-memory mapping, or the
/// adjacent mappings of one block of the 1 GiB cascade joined (joins_cascade()).
struct anon_mapping {
  std::uintptr_t start = 0;
  std::size_t size = 0;
  std::size_t resident = 0;           ///< Rss, or the hugetlb pages of a hugetlb mapping
  std::size_t huge = 0;               ///< AnonHugePages or hugetlb bytes
  std::size_t kernel_page_bytes = 0;  ///< of the first mapping (a joined block's head)
  std::string name;                   ///< "", "[heap]", "/anon_hugepage (deleted)", "[anon:name]"
  std::string flags;                  ///< "hg" (MADV_HUGEPAGE), "nh" (MADV_NOHUGEPAGE) or ""
  bool shared = false;                ///< shared memory (MAP_SHARED anonymous, SysV, memfd, tmpfs)
  /// How the resident bytes split over page sizes: largest page first (hugetlb before THP of the
  /// same size), shares of 0 bytes left out; they sum to `resident`.
  std::vector<page_share> pages;
  std::size_t mappings_joined = 1;  ///< smaps records this entry covers
};

/// One mapping's coverage: exact from the page tables (PAGEMAP_SCAN where the kernel has it),
/// beside smaps' view of the same mapping.
struct mapping_coverage {
  mapping_info mapping;
  backing_report exact;          ///< what backs the whole mapping (backing.hpp)
  std::size_t smaps_huge = 0;    ///< AnonHugePages + ShmemPmdMapped + FilePmdMapped + hugetlb
  bool smaps_disagrees = false;  ///< smaps' huge bytes differ from the exact ones
};

/// The allocator of a process and its hugepage settings.
struct allocator_report {
  allocator_guess guess;
  bool environ_readable = false;
  /// The environment area holds the process title instead of NAME=value pairs (Redis,
  /// PostgreSQL and others overwrite it with setproctitle): settings are unknown, not "none".
  bool environ_overwritten = false;
  std::vector<std::pair<std::string, std::string>> settings;  ///< relevant environment variables
  std::string hugepage_mode;   ///< e.g. "thp:always", "glibc.malloc.hugetlb=1", "off", "default"
  bool asks_for_huge = false;  ///< the settings make the allocator advise or map huge pages
};

/// The language runtime or server a process is, where the doctor knows its huge page settings.
struct runtime_report {
  /// "jvm", "postgres", "redis", "mariadb", "memcached", "node", "python", "go", "dotnet" or ""
  /// (none)
  std::string kind;
  std::string version;   ///< from a library or binary path ("17"), "" when unknown
  std::string evidence;  ///< what it was recognised by (a mapped file the kernel names)
  std::string file;      ///< that file
  std::string package;   ///< the Debian package that owns it, with its version, or ""
  /// The runtime's own huge page settings, as read ("-XX:+UseTransparentHugePages", ...).
  std::vector<std::string> settings;
  bool settings_known = false;  ///< false: the command line or environment was unreadable
  bool asks_for_huge = false;   ///< the settings make the runtime advise or map huge pages
  bool uses_pool = false;  ///< maps from the hugetlb pool (-XX:+UseLargePages alone, MariaDB's)
  /// JVM: -Xmx, -XX:LargePageSizeInBytes (0: not set), -XX:ReservedCodeCacheSize or its default;
  /// where the winning UseTransparentHugePages came from ("the command line", "_JAVA_OPTIONS",
  /// ...; "" none), thp_off: it is -XX:-; options_unread: an @argfile the doctor did not read.
  std::size_t heap_bytes = 0, pool_page_bytes = 0, code_cache_bytes = 0;
  std::string thp_flag_source, options_unread;
  bool thp_off = false;
};

/// What maps a share of a process's memory. The class decides which setting can reach it: a
/// malloc tunable reaches glibc's arenas but not a runtime's own heap, shmem_enabled reaches
/// memfd and SysV segments but not a file on /dev/shm, which follows that mount's huge= option.
enum class memory_class {
  glibc_main_arena,      ///< [heap]: glibc malloc's sbrk heap
  glibc_thread_arenas,   ///< glibc's per-thread heaps (64 MiB-aligned reservations)
  glibc_mmapped_chunks,  ///< glibc malloc chunks above the mmap threshold, one mapping each
  allocator_arenas,      ///< another malloc's memory (jemalloc, mimalloc, tcmalloc), [heap] too
  runtime_heap,          ///< a JIT or garbage-collected runtime's own heap (JVM, V8, Go)
  anonymous_mmap,        ///< other private anonymous memory: the program's own mmap(2), stacks
  shared_anonymous,      ///< shmem on the kernel's own mount (MAP_SHARED anonymous, memfd, SysV):
                         ///< follows shmem_enabled
  tmpfs_file,            ///< a file on a tmpfs mount (/dev/shm, ...): follows that mount's huge=
  hugetlb,               ///< hugetlb pool pages, whatever mapped them
  file,                  ///< page cache of regular files
  /// copy-on-write copies in private file mappings (smaps Anonymous: of a mapping of a file,
  /// memfd or tmpfs file): the process's own memory, not page cache, which neither THP
  /// enabled= nor MADV_COLLAPSE reaches (a file mapping's copies are base pages; Linux 6.18)
  file_copies,
};

/// "glibc_main_arena", "runtime_heap", ...: the names JSON and Prometheus carry.
const char* name_of(memory_class kind) noexcept;

/// The resident memory of one class (for tmpfs_file: of one mount).
struct memory_class_usage {
  memory_class kind = memory_class::anonymous_mmap;
  std::size_t resident = 0;  ///< resident bytes (the pool pages for the hugetlb class)
  std::size_t huge = 0;      ///< of them on huge pages (PMD-mapped THP or hugetlb)
  std::size_t mappings = 0;  ///< smaps records in the class
  std::size_t advised = 0;   ///< resident bytes in MADV_HUGEPAGE mappings
  /// resident bytes in MADV_NOHUGEPAGE mappings (VmFlags nh), which THP enabled=always and
  /// MADV_COLLAPSE leave on base pages
  std::size_t refused = 0;
  /// Resident bytes in smaps records (VMAs) under the PMD THP size, which neither THP always nor
  /// MADV_COLLAPSE makes huge (chunks the kernel merged into a larger record not counted).
  std::size_t in_small_mappings = 0;
  /// glibc_mmapped_chunks: resident bytes in chunks under the PMD THP size (a record's shared out
  /// by chunk size), which glibc.malloc.hugetlb=1 never advises (only chunks of that size up).
  std::size_t in_small_chunks = 0;
  std::size_t largest_mapping = 0;  ///< size of the class's largest mapping
  std::size_t pool_bytes = 0;       ///< as hugetlb=2 takes it: per chunk/mapping, whole PMD pages
  std::size_t views = 0;  ///< mappings repeating memory an earlier one maps (counted once)
  std::string evidence;   ///< how the class was told ("chunk headers", "64 MiB-aligned heaps", ...)
  std::string mount;      ///< tmpfs_file: the mount point
  std::string mount_huge;  ///< tmpfs_file: the mount's huge= option ("never" when absent)
  /// tmpfs_file: the other mount points of the mount's superblock (a bind mount of it, or the
  /// mount it binds): a remount through any of them changes huge= for all.
  std::vector<std::string> same_superblock;
  double huge_fraction() const noexcept {
    return resident == 0
               ? 0.0
               : static_cast<double>(std::min(huge, resident)) / static_cast<double>(resident);
  }
};

/// Where a process's threads may run, against where its memory is (two NUMA nodes or more).
struct numa_reach {
  std::string cpus_allowed;    ///< status Cpus_allowed_list, as the kernel writes it
  std::string mems_allowed;    ///< status Mems_allowed_list
  std::vector<int> run_nodes;  ///< nodes with a CPU of Cpus_allowed_list
  std::size_t resident = 0;    ///< numa_maps' bytes on every node
  std::size_t remote = 0;      ///< of them, on nodes outside run_nodes
  std::size_t remote_hugetlb = 0;
  /// The largest mappings (process_report::largest, same order): bytes per node from numa_maps.
  std::vector<std::map<int, std::uint64_t>> largest_nodes;
  double remote_share() const noexcept {
    return resident == 0 ? 0.0 : static_cast<double>(remote) / static_cast<double>(resident);
  }
  bool runs_on(int node) const noexcept {
    for (const int n : run_nodes) {
      if (n == node) return true;
    }
    return false;
  }
};

/// A process as the doctor sees it. Bytes.
///
/// Three classes of memory, each with its own huge share: private anonymous (heap, stacks,
/// MAP_PRIVATE|MAP_ANONYMOUS; THP counted by AnonHugePages), shared memory (tmpfs, memfd, SysV,
/// MAP_SHARED|MAP_ANONYMOUS; ShmemPmdMapped) and file mappings (page cache; FilePmdMapped).
/// hugetlb pages are counted apart, per page size, and in the anonymous class's fraction.
struct process_report {
  pid_t pid = 0;
  std::string name;   ///< comm (status Name): process-controlled, print escaped
  std::string title;  ///< the command line, NULs as spaces: process-controlled, print escaped
  std::size_t mappings = 0;
  std::size_t rss = 0;         ///< resident base and THP pages (hugetlb pages are not in Rss)
  std::size_t anonymous = 0;   ///< private anonymous resident bytes (excluding hugetlb)
  std::size_t thp = 0;         ///< AnonHugePages
  std::size_t shmem = 0;       ///< resident bytes of shared-memory mappings
  std::size_t shmem_huge = 0;  ///< ShmemPmdMapped
  std::size_t file = 0;        ///< resident bytes of file mappings
  std::size_t file_huge = 0;   ///< FilePmdMapped
  std::map<std::size_t, std::size_t> hugetlb;  ///< page size -> resident bytes
  std::size_t base = 0;                        ///< rss - all PMD-mapped THP
  std::size_t thp_advised = 0;                 ///< bytes in MADV_HUGEPAGE mappings
  std::size_t thp_eligible_anon = 0;           ///< anonymous resident bytes in THPeligible ranges
  std::size_t largest_shared = 0;   ///< size of the largest shared-memory mapping (not hugetlb)
  std::size_t dev_shm = 0;          ///< resident bytes of shared memory in files under /dev/shm
  std::optional<bool> thp_enabled;  ///< status THP_enabled (false: PR_SET_THP_DISABLE)
  std::size_t locked = 0;           ///< status VmLck: mlock()ed or mlockall()ed bytes
  /// Its mount namespace is not the doctor's (a container): its mounts are not the host's
  bool own_mount_namespace = false;
  /// The tightest memory cgroup limit over it (memory_cgroup_limit()); nullopt: none, or unread
  std::optional<cgroup_limit> memory_limit;
  /// What a --collapse would add filling partly populated chunks, as its dry run predicts it
  /// (process_files::collapse_growth); nullopt: not read
  std::optional<std::size_t> collapse_growth;
  std::vector<anon_mapping> largest;
  /// Resident memory by what maps it (memory_class), largest first; classes with nothing
  /// resident are left out. The classes' resident bytes sum to rss plus hugetlb_total().
  std::vector<memory_class_usage> classes;
  thp_disabler thp_disabled_by = thp_disabler::none;
  /// The `top` mappings of any kind with the most resident bytes, with their exact huge bytes
  /// from the page tables (top_coverage); empty for a report built from stored files.
  std::vector<mapping_coverage> coverage;
  allocator_report allocator;
  runtime_report runtime;
  cgroup_report cgroup;
  std::map<int, numa_usage> numa;  ///< per NUMA node (numa_maps); empty when unreadable
  /// Where the threads may run and allocate (status Cpus_allowed_list, Mems_allowed_list) and
  /// the nodes of those CPUs; nullopt on a one-node machine or from stored files without them.
  std::optional<numa_reach> reach;
  std::string unit;    ///< systemd service (safe_unit_name), "" when none
  double seconds = 0;  ///< time spent reading the process

  std::size_t hugetlb_total() const noexcept {
    std::size_t total = 0;
    for (const auto& entry : hugetlb) total += entry.second;
    return total;
  }
  /// Share of private anonymous memory (hugetlb included) on huge pages, 0..1.
  double huge_fraction() const noexcept {
    return share(thp + hugetlb_total(), anonymous + hugetlb_total());
  }
  /// Share of shared memory on PMD-mapped THP, 0..1.
  double shmem_huge_fraction() const noexcept { return share(shmem_huge, shmem); }
  /// Share of file mappings on PMD-mapped THP, 0..1.
  double file_huge_fraction() const noexcept { return share(file_huge, file); }
  /// part / whole, 0 for an empty whole, never above 1 (the counters are read at slightly
  /// different moments).
  static double share(std::size_t part, std::size_t whole) noexcept {
    if (whole == 0) return 0.0;
    return part >= whole ? 1.0 : static_cast<double>(part) / static_cast<double>(whole);
  }
};

}  // namespace hugepage::doctor
