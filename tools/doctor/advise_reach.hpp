// tools/doctor/advise_reach.hpp - which fix reaches which memory: the table the process advice is
// chosen by. A setting helps only the memory it reaches (a malloc tunable reaches glibc's chunks
// of 2 MiB and up, not a runtime's own heap; shmem_enabled reaches memfd and SysV segments, not a
// file on /dev/shm), so advice is given per memory class, through a mechanism that reaches it.
// Internal to the process advice; reads only the report.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

/// A way to put a process's memory on huge pages.
enum class fix_mechanism {
  glibc_hugetlb_tunable,  ///< GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (glibc 2.35+)
  jemalloc_thp,           ///< MALLOC_CONF=thp:always
  mimalloc_large_pages,   ///< MIMALLOC_LARGE_OS_PAGES=1
  tcmalloc,               ///< gperftools tcmalloc: no THP option
  jvm_thp,                ///< -XX:+UseTransparentHugePages
  v8_heap,                ///< Node.js: no option advises V8's heap (--use-largepages remaps code)
  shmem_enabled,          ///< transparent_hugepage/shmem_enabled, with its value
  tmpfs_huge,             ///< a tmpfs mount's huge= option, with its value
  thp_always,             ///< transparent_hugepage/enabled=always, machine-wide
  service_setting,        ///< the service's own: MariaDB large_pages, PostgreSQL huge_pages,
                          ///< memcached -L, numpy's NUMPY_MADVISE_HUGEPAGE
  collapse,               ///< hugepage-doctor --pid PID --collapse (MADV_COLLAPSE now)
};

/// What a mechanism makes huge of one class.
struct reach {
  std::size_t bytes = 0;  ///< resident bytes of the class it reaches
  std::string limit;      ///< why the rest is out of its reach; "" when it reaches all
  /// The rest is out of reach of any allocation-size fix too: memory advised MADV_NOHUGEPAGE, or
  /// copies in private file mappings (not mappings too small for a huge page).
  bool beyond_size = false;
};

/// The reach of `m` over `c` in process `p`. `value` is the setting's word where the mechanism
/// has several (shmem_enabled: always, within_size, advise, never, deny, force; a mount's huge=:
/// always, within_size, advise, never). `thp_bytes` is the PMD THP size.
reach reach_of(fix_mechanism m, const memory_class_usage& c, const process_report& p,
               const std::string& value = "", std::size_t thp_bytes = 2 * units::mib);

/// Whether `kind` is private anonymous memory (what THP enabled= governs).
bool private_anonymous(memory_class kind) noexcept;

/// Why no setting of the process itself reaches the private anonymous class `c` (its allocator's,
/// its runtime's or its service's own, each checked first: -XX:+UseTransparentHugePages, Node's
/// options, numpy's and memcached's settings, the malloc tunables); "" where one does, or where
/// the program's own MADV_HUGEPAGE covers at least half of it.
std::string out_of_reach_reason(const memory_class_usage& c, const process_report& p,
                                std::size_t thp_bytes = 2 * units::mib);

/// Why nothing of a Go program reaches its heap: its runtime advises none of it, GODEBUG has no
/// setting that would (and disablethp=1, where the process has it, keeps THP off it).
std::string go_heap_reason(const process_report& p);

/// Base-page memory in classes under advice_threshold() that no setting reaches, from which the
/// doctor says so (with what --collapse does) instead of giving an all-clear.
inline constexpr std::size_t unreached_floor = 256 * units::mib;

/// "glibc's thread arenas", "the runtime's own heap", ...
std::string class_phrase(memory_class kind);

/// "glibc's thread arenas (1.20 GiB) and glibc's mmapped chunks (600 MiB)".
std::string classes_phrase(const std::vector<const memory_class_usage*>& classes);

/// The names (name_of) of `classes`, for advice::reaches.
std::vector<std::string> class_names(const std::vector<const memory_class_usage*>& classes);

/// How much anonymous memory (or of one class) is worth advice for `p`: process_advice_threshold,
/// or 64 MiB for a service whose own setting puts its cache or buffer pool on huge pages
/// (memcached -L, MariaDB large_pages): its size is its configuration's, and one flag fixes it.
std::size_t advice_threshold(const process_report& p) noexcept;

/// A class large enough to advise on (advice_threshold of `p`) and under half on huge pages.
bool wants_huge(const memory_class_usage& c, const process_report& p) noexcept;

/// Whether the process has THP disabled except where advised (Linux 6.18's
/// PR_SET_THP_DISABLE with PR_THP_DISABLE_EXCEPT_ADVISED, inherited across fork and exec), which
/// status' THP_enabled does not show (it stays 1; checked on 6.18). Told only under THP
/// enabled=always on 6.18 and later: at least 64 MiB of the process's private anonymous memory
/// lies in unadvised mappings of at least the THP size, none of it THPeligible. Under madvise
/// nothing tells it (only advised ranges are eligible either way).
bool thp_except_advised(const process_report& p, const system_report& s);

/// What THP enabled=always does for a process whose memory it would reach: "" under always (it
/// is there), else the caveat that a process with THP disabled except where advised is not
/// reached, which nothing shows under madvise.
std::string always_caveat(const system_report& s);

/// The fallback that reaches any class of a process whose THP is on: the --collapse command for
/// `p`, and what undoes a collapse. Empty commands where MADV_COLLAPSE does not work here.
struct collapse_fallback {
  std::string text;
  std::vector<std::string> commands;
};
collapse_fallback collapse_of(const process_report& p, const system_report& s);

}  // namespace hugepage::doctor
