// tools/doctor/report.hpp - what hugepage-doctor collects, the advice it derives, how it prints.
//
// Three reports, one per mode: system_report (no arguments), process_report (--pid), probe_report
// (--probe). Collection reads the machine through the library (system.hpp, smaps.hpp, backing.hpp,
// perf_counters.hpp) and the parsers of proc_text.hpp; advice is a pure function of a report, so
// tests build a report by hand and check each rule; rendering turns a report into a human table
// (fmt) or JSON (schema in tools/README.md). Nothing here prints before the whole report is built,
// so an error never leaves half a JSON document on stdout.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exit_codes.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/detail/format_bytes.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "proc_text.hpp"

namespace hugepage::doctor {

/// How much a piece of advice weighs: a warning makes the exit status 1, a note does not.
enum class advice_level { warning, note };

/// "warning" or "note".
const char* name_of(advice_level level) noexcept;

/// One piece of advice: what is wrong, the facts it rests on, what the fix costs, and the
/// commands that apply it.
///
/// Every command is built by text.hpp from values the doctor chose or computed (numbers, kernel
/// and configuration paths, a systemd unit name that passed safe_unit_name()), each word
/// shell-quoted. Of what a process controls, only the current value of a variable the advice
/// sets enters one (merged, so nothing in it is lost), and only when it is printable ASCII;
/// its title and mapping names never do.
struct advice {
  std::string id;  ///< stable identifier ("thp_never", "max_ptes_none", ...)
  advice_level level = advice_level::warning;
  std::string message;                ///< one sentence: the problem and its cost
  std::vector<std::string> evidence;  ///< the facts it rests on (files, counters, ranges)
  std::string trade;                  ///< what the fix costs; "" when nothing
  std::vector<std::string> commands;  ///< shell lines that apply it, in order; may be empty
  /// The memory classes (name_of(memory_class)) the fix reaches; empty when it is not about a
  /// class of the process's memory.
  std::vector<std::string> reaches{};
};

/// True when `list` holds a warning (exit status 1).
bool has_warning(const std::vector<advice>& list) noexcept;

/// The exit status a report with `list` ends with: exit_advice when it holds a warning, else
/// exit_healthy.
exit_status exit_code_of(const std::vector<advice>& list) noexcept;

// ---- system ------------------------------------------------------------------------------------

/// Free memory and the part of it in blocks large enough for a huge page, in one zone.
struct zone_readiness {
  int node = 0;
  std::string zone;
  std::uint64_t free_bytes = 0;
  std::uint64_t huge_ready_bytes = 0;  ///< free bytes in blocks of at least the THP size
  std::uint64_t huge_blocks = 0;       ///< THP-sized blocks the free lists hold
};

/// The THP and compaction counters from /proc/vmstat that the doctor reports.
inline constexpr const char* vmstat_counters[] = {
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_fault_fallback_charge",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_split_page",
    "thp_deferred_split_page",
    "compact_stall",
    "compact_fail",
    "compact_success",
    "htlb_buddy_alloc_success",
    "htlb_buddy_alloc_fail",
    "thp_underused_split_page",
};

/// One multi-size THP size: the library's (system.hpp, read_mthp_sizes()).
using hugepage::mthp_size;

/// The machine as the doctor sees it.
struct system_report {
  std::string kernel_release;
  thp_settings thp;
  std::vector<hugetlb_pool> pools;       ///< system-wide, ascending page size
  std::vector<hugetlb_pool> node_pools;  ///< per NUMA node (empty on machines without nodes)
  std::size_t base_page_bytes = 4096;
  std::size_t thp_bytes = 2 * units::mib;
  std::optional<std::vector<zone_readiness>> zones;  ///< empty: buddyinfo unreadable
  std::map<std::string, std::uint64_t> vmstat;       ///< the counters above that exist here
  bool vmstat_readable = false;
  std::map<std::string, std::uint64_t> meminfo;  ///< bytes (kB lines) or counts
  bool meminfo_readable = false;
  cgroup_report cgroup;
  collapse_support collapse = collapse_support::unknown;
  bool hardware_counters = false;
  std::string counters_reason;  ///< why not, when hardware_counters is false
  std::vector<mthp_size> mthp;  ///< read_mthp_sizes() (system.hpp); empty before Linux 6.8
  /// x86: the CPU has 1 GiB pages (pdpe1gb in /proc/cpuinfo); nullopt: cannot tell.
  std::optional<bool> cpu_1g_pages;
  /// The options /dev/shm is mounted with (as /proc/mounts shows them: the mount's and the
  /// superblock's, from mountinfo), so that advice to make a huge= option persistent keeps them;
  /// nullopt when it is not a tmpfs mount here.
  std::optional<std::string> dev_shm_options;
};

/// Collects the system report from `root` ("" for the live system, else a copy of the tree: every
/// file is read under it, through the library's readers where it has one; kernel_files.hpp).
/// `probe_collapse` runs probe_collapse() on the live system.
system_report collect_system(const std::string& root = "", bool probe_collapse = true);

/// The advice for a system. Pure.
std::vector<advice> advise_system(const system_report& system);

// ---- process -----------------------------------------------------------------------------------

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

/// Whether the smaps records `head` and `next` are two parts of one block of the 1 GiB
/// cascade (include/hugepage/strategy.hpp: whole 1 GiB pages over the head of a 1 GiB-aligned
/// range, the rest mapped right after it on 2 MiB pages), to be listed as one entry. True only
/// when all of these hold:
///   - `next` starts where `head` ends, and both are private mappings ('p') with the same
///     permissions;
///   - `head` is a hugetlb mapping starting on a boundary of its own page size;
///   - `next` is shorter than one of `head`'s pages (a tail is what did not fill one more page);
///   - `next` is a private hugetlb mapping of a smaller page size (the 2 MiB pool), or a private
///     anonymous mapping (unnamed or [anon:...]) that is not hugetlb and is advised
///     MADV_HUGEPAGE (the THP tail the library maps when the 2 MiB pool is short).
/// So two ordinary anonymous mappings never join (neither is hugetlb), shared memory never joins,
/// and neither do two hugetlb mappings of one page size, a heap or stack, or a neighbour as long
/// as a head page. An unrelated small mapping can still be joined in the rare case that it
/// meets every rule (one that begins exactly where a 1 GiB mapping ends); smaps cannot tell it
/// apart. Pure.
bool joins_cascade(const mapping_info& head, const mapping_info& next) noexcept;

/// One mapping's coverage: exact from the page tables (PAGEMAP_SCAN where the kernel has it),
/// beside smaps' view of the same mapping.
struct mapping_coverage {
  mapping_info mapping;
  backing_report exact;          ///< what backs the whole mapping (backing.hpp)
  std::size_t smaps_huge = 0;    ///< AnonHugePages + ShmemPmdMapped + FilePmdMapped + hugetlb
  bool smaps_disagrees = false;  ///< smaps' huge bytes differ from the exact ones
};

/// The exact coverage of each of `mappings` (the parsed smaps of `pid`), without reading smaps
/// again: from the page tables where smaps counts a huge page or the mapping is hugetlb, from
/// smaps itself elsewhere (nothing huge to find: resident is Rss, source smaps).
std::vector<mapping_coverage> coverage_of(pid_t pid, const std::vector<mapping_info>& mappings);

/// The `top` entries of `coverage` with the most resident bytes (exact), largest first; entries
/// with nothing resident are left out. Pure.
std::vector<mapping_coverage> top_coverage(std::vector<mapping_coverage> coverage, std::size_t top);

/// The `top` mappings with the most resident bytes: exact huge bytes per mapping, with '!' where
/// smaps' per-mapping counters say otherwise. Empty when smaps is unreadable.
std::string render_coverage(const std::vector<mapping_coverage>& mappings, std::size_t top);

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
  /// "jvm", "postgres", "redis", "mariadb", "memcached", "node", "python" or "" (none)
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

/// Who turned THP off for a process (status THP_enabled: 0). PR_SET_THP_DISABLE is inherited
/// across fork and exec, so a parent with THP off too means the setting came from above.
enum class thp_disabler {
  none,       ///< THP is not disabled for the process
  process,    ///< the process itself (its parent has THP on; a known runtime that does so)
  inherited,  ///< its parent has THP off too: a launcher, unit or shell set it
  unknown,    ///< the parent could not be read
};

/// "none", "process", "inherited" or "unknown".
const char* name_of(thp_disabler who) noexcept;

/// Who disabled THP, from status THP_enabled of the process and of its parent (nullopt:
/// unreadable or not known, as for stored files). Pure.
thp_disabler thp_disabler_of(std::optional<bool> thp_enabled,
                             std::optional<bool> parent_thp_enabled) noexcept;

/// One mount of a process's mount namespace (/proc/PID/mountinfo).
struct mount_entry {
  std::string point;   ///< mount point, escapes decoded
  std::string device;  ///< major:minor of its superblock: bind mounts of one share it
  std::string fstype;  ///< "tmpfs", "ext4", ...
  std::string huge;    ///< tmpfs: the huge= super option, "never" when absent; else ""
};

/// The mounts in mountinfo text, in its order (a later mount on one point hides an earlier).
/// Pure.
std::vector<mount_entry> parse_mountinfo(std::string_view text);

/// A mapping holding glibc mmapped chunks: the kernel merges adjacent ones into one record, and
/// with a neighbouring anonymous mapping (ld.so's below libc), so the chunks may fill only part
/// of it.
struct chunk_mapping {
  std::uintptr_t start = 0;
  std::vector<std::size_t> chunks;  ///< each chunk's bytes, in address order
};

/// The glibc mmapped chunks collect_process found by reading chunk headers in the target
/// (process_vm_readv); not read for stored files.
struct chunk_headers {
  bool read = false;                    ///< false: nothing was read; `evidence` says why
  std::string evidence;                 ///< why not read, or how many candidates were left unread
  std::vector<chunk_mapping> mappings;  ///< ascending start
  /// The 64 MiB-aligned blocks laid out as glibc thread heaps whose heap_info header was read
  /// too (false for stored files, or where reading failed: the layout alone then decides).
  bool heaps_read = false;
  std::vector<std::uintptr_t> heaps;  ///< of them, the starts whose heap_info checks out
};

/// Whether a process whose allocator_guess names `allocator` mallocs with glibc: anything but
/// jemalloc, tcmalloc, mimalloc and musl (a static binary reads as "unknown" and links glibc's).
bool mallocs_with_glibc(std::string_view allocator) noexcept;

/// What classify_memory() needs besides the mappings.
struct class_facts {
  std::string allocator;  ///< allocator_report.guess.name
  std::string runtime;    ///< runtime_report.kind ("jvm" and "node" have their own heaps)
  std::optional<std::vector<mount_entry>> mounts;  ///< nullopt: mountinfo not read
  chunk_headers chunks;
  std::size_t thp_page_bytes = 2 * units::mib;
  std::vector<bool> repeated_views;  ///< counted_once (shared_views.hpp): mapping i repeats memory
};

/// The private anonymous mappings whose first 16 bytes may be a glibc mmapped chunk's header:
/// unnamed rw-p, at least 128 KiB, something resident, not part of a thread arena. Indexes into
/// `mappings`. Pure.
std::vector<std::size_t> chunk_candidates(const std::vector<mapping_info>& mappings);

/// The mappings laid out as glibc thread heaps: a 64 MiB reservation on a 64 MiB boundary, its
/// used part rw-p and the rest ---p right after it, or all of it rw-p. Indexes of the rw-p parts
/// into `mappings`. Pure.
std::vector<std::size_t> thread_heap_candidates(const std::vector<mapping_info>& mappings);

/// Whether the first words of a thread heap candidate starting at `start` with `rw_bytes` rw-p
/// are glibc's heap_info { ar_ptr, prev, size, mprotect_size }: mprotect_size is the rw-p part
/// (page-rounded), 0 < size <= mprotect_size, and the arena lies right after the heap_info of
/// its first heap (32 bytes before glibc 2.35, 48 since): at `start` when prev is null, else in
/// another 64 MiB-aligned heap with prev pointing at one. Pure.
bool is_heap_info(const std::uint64_t (&words)[4], std::uintptr_t start, std::size_t rw_bytes,
                  std::size_t page_bytes) noexcept;

/// The bytes the glibc chunk whose header holds `prev_size` and `size` spans from the start of
/// its mapping (prev_size + size without the flag bits), or 0 when it is no mmapped chunk
/// (IS_MMAPPED clear, other flags set, or not whole pages of `page_bytes`). Pure.
std::size_t mmapped_chunk_span(std::uint64_t prev_size, std::uint64_t size,
                               std::size_t page_bytes) noexcept;

/// A process's resident memory by what maps it (memory_class), largest first, classes with
/// nothing resident left out; their resident bytes sum to the mappings' Rss plus their hugetlb
/// pages. Pure.
std::vector<memory_class_usage> classify_memory(const std::vector<mapping_info>& mappings,
                                                const class_facts& facts);

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
  std::string unit;                ///< systemd service (safe_unit_name), "" when none
  double seconds = 0;              ///< time spent reading the process

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

/// Summarises parsed smaps (library: parse_smaps) into a process report: totals, the `top`
/// largest anonymous mappings, the parts of a cascade block joined into one entry
/// (joins_cascade()). `thp_page_bytes` is the PMD THP size the THP shares are reported in.
/// Pure.
process_report summarize_mappings(const std::vector<mapping_info>& mappings, std::size_t top,
                                  std::size_t thp_page_bytes = 2 * units::mib);

/// The per-node split numa_maps gives on a machine with the one NUMA node `node`, from the smaps
/// counters of `mappings` (numa_maps walks the page tables again: on a large process as long as
/// smaps). All resident pages and hugetlb pages; empty when nothing is resident. Pure.
std::map<int, numa_usage> numa_of_one_node(const std::vector<mapping_info>& mappings, int node);

/// Works out the allocator's hugepage settings from its name and environment. Pure.
allocator_report describe_allocator(const allocator_guess& guess, bool environ_readable,
                                    std::vector<std::pair<std::string, std::string>> settings,
                                    bool environ_overwritten = false);

/// The facts a process report is built from: the /proc/PID files (nullopt: unreadable) and what
/// collect_process() learnt beside them. A capture stores all of it (capture.hpp), so a report
/// replayed from one is built from the same facts as the live report.
struct process_files {
  std::string smaps;
  std::optional<std::string> status, cmdline, environ, cgroup, numa_maps;
  std::optional<std::string> mountinfo;      ///< the target's: which files lie on tmpfs
  std::optional<std::string> parent_status;  ///< its parent's status: who disabled THP
  chunk_headers chunks;                      ///< not a file: read from the target's memory
  /// The machine's NUMA node when it has only one (numa_maps is then not read: the split is
  /// numa_of_one_node()'s); nullopt otherwise, or not known.
  std::optional<int> numa_node;
  /// The exact coverage of every mapping (coverage_of); nullopt: not read (stored files).
  std::optional<std::vector<mapping_coverage>> coverage;
  /// The target's glibc version, where its libc is the file this doctor runs with; "" otherwise.
  std::string glibc_version;
  /// The Debian packages owning the allocator's library and the runtime's file, where the target
  /// sees the same files as the doctor: path -> {package, version} (debian_packages()).
  std::map<std::string, std::pair<std::string, std::string>> packages;
};

/// Who a process is, judged once from its files: its status fields, mapped files, allocator and
/// runtime (versions and packages not yet applied). Both collection (which facts to read) and
/// build_process_report() use it.
struct process_identity {
  std::map<std::string, std::uint64_t> status;  ///< parse_meminfo of status; empty: unreadable
  std::vector<std::string> paths;               ///< mapped files, each once, in address order
  std::vector<std::pair<std::string, std::string>> settings;  ///< allocator environment
  allocator_report allocator;
  runtime_report runtime;
};

/// The identity of the process whose files are `files` and whose parsed smaps is `mappings`.
/// Pure.
process_identity identify_process(const process_files& files,
                                  const std::vector<mapping_info>& mappings);

/// Builds a process report from its facts: mappings, name, allocator, runtime, systemd unit,
/// NUMA split, coverage, versions and packages, hugetlb cgroup limits (read under `root`). Pure
/// but for the cgroup limits and this machine's THP size, so tests feed files captured from
/// real services (tools/test/data/services). The one place a process report is assembled.
process_report build_process_report(pid_t pid, const process_files& files, std::size_t top,
                                    const std::string& root);
/// The same from smaps already parsed (`mappings`, of `files.smaps`).
process_report build_process_report(pid_t pid, const process_files& files,
                                    const std::vector<mapping_info>& mappings, std::size_t top,
                                    const std::string& root);
/// The same with the identity already judged (identify_process of the same files).
process_report build_process_report(pid_t pid, const process_files& files,
                                    const std::vector<mapping_info>& mappings,
                                    const process_identity& identity, std::size_t top,
                                    const std::string& root);

/// The Debian packages that own `paths` (as dpkg lists them; /usr-merged paths also match their
/// /lib spelling) in the dpkg database under `root`: path -> {package, version}. Missing paths
/// are left out; an unreadable database gives an empty map.
std::map<std::string, std::pair<std::string, std::string>> debian_packages(
    const std::string& root, const std::vector<std::string>& paths);

/// The upstream part of a Debian version: "5:7.0.15-1~deb12u10" -> "7.0.15",
/// "2.0.9+ds-2" -> "2.0.9", "17.0.15+6-1~deb12u1" -> "17.0.15+6".
std::string upstream_version(std::string_view debian_version);

/// Why collect_process() returned no report: the exit status and one line for stderr.
struct collect_failure {
  int exit_code = exit_error;
  std::string message;
};

/// Collects the report for `pid`, or says why not. The target's start time is read before and
/// after the other files: a target that exited, or a pid reused meanwhile, is a failure ("exited
/// while being read"), never a partial report. Permission failures name the cause (another
/// user, hidepid, a user namespace, a missing capability). `files`, when given, receives the
/// files the report was built from (for --capture, capture.hpp).
std::optional<process_report> collect_process(pid_t pid, std::size_t top, collect_failure& failure,
                                              process_files* files = nullptr);

/// Whether `pid` is a process with user memory to report or collapse; otherwise fills `failure`:
/// no such process or unreadable (exit_error), a zombie (exit_zombie), a kernel thread
/// (exit_kernel_thread).
bool is_reportable_target(pid_t pid, collect_failure& failure);

/// Facts from /proc/PID/stat: state letter, kernel flags, start time (clock ticks after boot).
struct proc_stat {
  char state = '?';
  std::uint64_t flags = 0;
  std::uint64_t start_time = 0;
  bool kernel_thread() const noexcept { return (flags & 0x00200000U) != 0; }  // PF_KTHREAD
};

/// Parses /proc/PID/stat text (the comm field may hold spaces and parentheses).
std::optional<proc_stat> parse_proc_stat(std::string_view text);

/// Recognises a runtime or server from its mapped files, and reads its huge page settings from
/// `cmdline` (NUL-separated) and its environment `settings` (the java options variables). Pure.
runtime_report detect_runtime(const std::vector<std::string>& paths, std::string_view cmdline,
                              const std::vector<std::pair<std::string, std::string>>& settings);

/// The message for a pid that cannot be read with `err` (EACCES, EPERM, ENOENT), from the facts
/// of this machine: hidepid in `proc_mount_options`, the target's owner `target_uid` (nullopt:
/// unknown), the doctor's `euid`, whether it runs in a user namespace, whether it has
/// CAP_SYS_PTRACE. Pure.
struct access_facts {
  unsigned euid = 0;
  std::optional<unsigned> target_uid;
  std::string hidepid;  ///< "", "1"/"noaccess", "2"/"invisible", "4"/"ptraceable"
  bool user_namespace = false;
  bool cap_sys_ptrace = true;
};
std::string explain_unreadable(pid_t pid, int err, const access_facts& facts);

/// The facts of this machine (access_facts) explain_unreadable() needs for `pid`.
access_facts read_access_facts(pid_t pid);

/// Minimum anonymous memory before the doctor advises on a process's huge page use.
inline constexpr std::size_t process_advice_threshold = 512 * units::mib;

/// The advice for a process, given the system it runs on. Pure.
std::vector<advice> advise_process(const process_report& process, const system_report& system);

// ---- probe -------------------------------------------------------------------------------------

/// One working set of the TLB probe.
struct probe_row {
  std::size_t working_set = 0;
  std::uint64_t accesses = 0;        ///< dependent loads timed, per backing
  double base_ns = 0;                ///< ns per access on base pages
  double huge_ns = 0;                ///< ns per access on huge pages
  double base_huge_fraction = 0;     ///< backing_of coverage of the base-page buffer
  double huge_huge_fraction = 0;     ///< ... of the huge-page buffer
  std::optional<double> base_walks;  ///< dTLB load misses per access, where a PMU exists
  std::optional<double> huge_walks;
  std::string error;  ///< non-empty: this row could not run
  std::string note;   ///< non-empty: why the working set differs from the one asked for
  double ratio() const noexcept { return huge_ns > 0 ? base_ns / huge_ns : 0.0; }
};

/// The TLB probe's result.
struct probe_report {
  std::vector<probe_row> rows;
  bool counters = false;
  std::string counters_reason;
  std::string huge_method;  ///< how the huge buffer was obtained
  double seconds = 0;
};

/// Runs the probe over `working_sets` (bytes). Takes a few seconds.
probe_report run_probe(const std::vector<std::size_t>& working_sets);

// ---- output ------------------------------------------------------------------------------------

std::string render_system(const system_report& system, const std::vector<advice>& advice);
std::string render_process(const process_report& process, const system_report& system,
                           const std::vector<advice>& advice);
std::string render_probe(const probe_report& probe);

std::string json_system(const system_report& system, const std::vector<advice>& advice);
std::string json_process(const process_report& process, const system_report& system,
                         const std::vector<advice>& advice);
std::string json_probe(const probe_report& probe);

/// The same reports in the Prometheus text format (node_exporter textfile collector); metric
/// names in tools/README.md.
std::string prometheus_system(const system_report& system, const std::vector<advice>& advice);
std::string prometheus_process(const process_report& process, const system_report& system,
                               const std::vector<advice>& advice);
std::string prometheus_probe(const probe_report& probe);

/// "64.0 MiB", "1.50 GiB", "12 KiB", "0 B": the library's formatter, which its messages use too.
using hugepage::detail::format_bytes;

/// A share as a percentage with one decimal: 0.5 -> "50.0%".
std::string percent(double fraction);

}  // namespace hugepage::doctor
