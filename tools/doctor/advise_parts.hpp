// tools/doctor/advise_parts.hpp - the parts the advise_*.cpp files build advice from, and the
// advice of one topic that another file calls: THP settings and their commands (advise_thp.cpp),
// counters and free-memory fragmentation (advise_counters.cpp), pool sizes and their commands
// (advise_pool.cpp), settings merged into what a process has (advise_environment.cpp), and the
// advice for allocators, memory classes and services (advise_allocator.cpp, advise_classes.cpp,
// advise_services.cpp) that advise_process.cpp and advise_classes.cpp call. Internal to those
// files and their tests; each part reads only the report, never the machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advice.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {

// ---- THP settings (advise_thp.cpp) -------------------------------------------------------------

inline constexpr const char* thp_dir = "/sys/kernel/mm/transparent_hugepage";

// The tmpfiles.d file that sets the kernel file `file` at boot.
std::string tmpfiles_conf(const std::string& file);

// Sets a THP sysfs file now, and on every boot through tmpfiles.d ("w" writes the value).
std::vector<std::string> sysfs_setting(const std::string& value, const std::string& file);

// The effective PMD-size THP mode (read_thp_mode(): the per-size switch, else the top-level
// file); the top-level word where it could not be read.
std::string effective_enabled(const system_report& s, const char* unknown);

// Which file turns THP off, and the setting that turns it back on for advised ranges.
struct thp_off {
  std::string why;
  std::vector<std::string> evidence;
  std::vector<std::string> commands;
};

thp_off thp_off_of(const system_report& s);

// ---- counters (advise_counters.cpp) ------------------------------------------------------------

// A /proc/vmstat counter of the report; 0 when absent.
std::uint64_t counter(const system_report& s, const char* name);

// A /proc/meminfo value of the report; nullopt when meminfo or the key is missing.
std::optional<std::uint64_t> meminfo(const system_report& s, const char* key);

// Free memory is fragmented: at least 256 MiB free, under a tenth of it in THP-sized blocks.
struct fragmentation {
  bool fragmented = false;
  std::uint64_t free = 0, ready = 0;
};

fragmentation fragmentation_of(const system_report& s);

// THP faults since boot fell back to base pages often enough to matter.
bool fallbacks_matter(const system_report& s);

// ---- hugetlb pools (advise_pool.cpp) -----------------------------------------------------------

// The sysfs file that sizes the pool of `page_bytes` pages.
std::string pool_file(std::size_t page_bytes);

// Something wanted more of a pool than it holds: surplus pages at the overcommit limit, buddy
// allocations for the pool that failed, or reservations beyond the free pages.
std::vector<std::string> pool_shortage_evidence(const system_report& s, const hugetlb_pool& pool);

// A pool size the machine can hold: at most 80% of MemTotal in pages of this size, never less
// than the pool has now. nullopt when even one more page would pass that.
std::optional<std::uint64_t> capped_pool_target(const system_report& s, std::size_t page_bytes,
                                                std::uint64_t total, std::uint64_t wanted);

// A command that sets a pool's size now and at boot.
std::vector<std::string> pool_commands(const system_report& s, std::size_t page_bytes,
                                       std::uint64_t target);

// ---- merged settings (advise_environment.cpp) --------------------------------------------------

// How a variable's value is a list: GLIBC_TUNABLES is "key=value:key=value", MALLOC_CONF
// "key:value,key:value", java options are words separated by spaces where a later flag wins
// (key_end 0: the entry is appended unless present), a plain variable is one value
// (separator 0: replaced).
struct list_syntax {
  char separator = 0;
  char key_end = 0;
};
constexpr list_syntax glibc_tunables{':', '='};
constexpr list_syntax malloc_conf{',', ':'};
constexpr list_syntax java_options{' ', 0};
constexpr list_syntax single_value{};

// Makes /dev/shm's huge= option persistent in /etc/fstab, keeping the options it has now.
std::string dev_shm_fstab_command(const system_report& s);

// Advice of `rule` (a warning) that sets `name` for the process: `text` then how the fix applies.
advice environment_advice(const process_report& p, rule_id rule, const std::string& text,
                          std::vector<std::string> evidence, std::string trade,
                          const std::string& name, const std::string& add, list_syntax syntax);

// ---- allocators (advise_allocator.cpp) ---------------------------------------------------------

// Advice for an allocator that does not ask for huge pages under THP madvise; `head` starts
// each message.
void advise_allocator(const process_report& p, const system_report& s, const std::string& head,
                      std::vector<advice>& out);

// ---- memory classes (advise_classes.cpp) -------------------------------------------------------

// Advice per class of the process's memory (process_report::classes), each through a mechanism
// that reaches the class (advise_reach.hpp); nothing while THP is disabled for the process.
void advise_classes(const process_report& p, const system_report& s, std::vector<advice>& out);

// A setting that reaches `classes` is in place, yet they are under half huge: compaction where
// free memory is fragmented and THP faults fall back, else --collapse. With no classes the
// message has no head: the caller puts its own first. `by_madvise`: the setting works by
// advising MADV_HUGEPAGE (glibc.malloc.hugetlb=1, thp:always, the JVM's flag), so memory that
// is not advised is memory it did not reach.
advice not_obtained(const process_report& p, const system_report& s, const std::string& setting,
                    const std::vector<const memory_class_usage*>& classes, bool by_madvise = false);

// ---- services (advise_services.cpp) ------------------------------------------------------------

// THP disabled for the process: MariaDB's own large pages with the pool they need, or who set it
// and what it costs (Redis has its own note).
void advise_thp_disabled(const process_report& p, const system_report& s, const std::string& head,
                         std::vector<advice>& out);

// A setting that maps memory from the hugetlb pool (the JVM's -XX:+UseLargePages alone,
// MariaDB's --large-pages) whose memory is on base pages: the pool, by how many pages it is
// short, and the command that grows it. nullopt when none applies.
std::optional<advice> pool_setting_advice(const process_report& p, const system_report& s);

// glibc.malloc.hugetlb=2 (chunks and thread arenas from the hugetlb pool) and `classes` on base
// pages: the pool, by how many pages it is short.
advice glibc_pool_advice(const process_report& p, const system_report& s, const std::string& head,
                         const std::vector<const memory_class_usage*>& classes);

// The JVM has -XX:+UseLargePages alone and its heap is on base pages (pool_setting_advice).
bool jvm_heap_on_base_pages(const process_report& p, const system_report& s);

// The JVM heap is not advised: -XX:+UseTransparentHugePages through the options variable that
// wins over a -XX:- it has (JAVA_TOOL_OPTIONS, else _JAVA_OPTIONS), or removing that flag.
advice jvm_thp_advice(const process_report& p, const std::string& head);

// memcached's slabs are 1 MiB chunks no malloc setting reaches: its own -L.
advice memcached_advice(const process_report& p, const std::string& head,
                        const std::vector<const memory_class_usage*>& classes);

// Node.js: nothing advises V8's heap; --collapse as the fallback.
advice node_advice(const process_report& p, const system_report& s, const std::string& head,
                   const std::vector<const memory_class_usage*>& classes);

// numpy with NUMPY_MADVISE_HUGEPAGE=0; nullopt when numpy advises.
std::optional<advice> numpy_advice(const process_report& p, const std::string& head,
                                   const std::vector<const memory_class_usage*>& classes);

// No libc or known allocator is mapped: the allocator is linked into the executable.
bool linked_in_allocator(const process_report& p);
advice linked_in_allocator_advice(const process_report& p, const system_report& s,
                                  const std::string& head,
                                  const std::vector<const memory_class_usage*>& classes);

}  // namespace hugepage::doctor
