// tools/doctor/rule_catalog.cpp - the rows of the catalog. tools/README.md says, per id, when in
// detail; `what` is the one sentence --list-rules prints.
#include "rule_catalog.hpp"

#include <cstddef>
#include <iterator>

namespace hugepage::doctor {

namespace {

constexpr advice_level warning = advice_level::warning;
constexpr advice_level note = advice_level::note;

constexpr rule rows[] = {
    {rule_id::thp_never, "thp_never", warning,
     "THP is off (the effective PMD-size mode is never), for the machine or for a large process "
     "on it"},
    {rule_id::max_ptes_none, "max_ptes_none", note,
     "khugepaged may collapse a range of which one base page is used, so sparse THP memory can "
     "grow many times in RSS"},
    {rule_id::defrag_always_stalls, "defrag_always_stalls", warning,
     "THP enabled=always with defrag=always: any page fault may stall in direct compaction"},
    {rule_id::defrag_never, "defrag_never", warning,
     "THP defrag=never: faults in MADV_HUGEPAGE ranges do not compact, so advised memory gets "
     "base pages once memory is fragmented"},
    {rule_id::pool_in_use, "pool_in_use", note,
     "a hugetlb pool is fully in use and nothing shows a request it could not serve"},
    {rule_id::pool_exhausted, "pool_exhausted", warning,
     "a hugetlb pool is used up and more was wanted: new mappings of its size fail"},
    {rule_id::pool_idle, "pool_idle", warning,
     "a large hugetlb pool that no process uses holds memory nothing else can use (a note until "
     "idle pools hold a tenth of MemTotal)"},
    {rule_id::fragmented, "fragmented", warning,
     "free memory is fragmented, and THP faults fall back to base pages (a note while they do "
     "not)"},
    {rule_id::thp_fault_fallback, "thp_fault_fallback", warning,
     "THP faults fell back to base pages often, without fragmented free memory now"},
    {rule_id::cgroup_limit_below_pool, "cgroup_limit_below_pool", warning,
     "the doctor's hugetlb cgroup caps a page size below the size of its pool"},
    {rule_id::cgroup_limit_at_fault, "cgroup_limit_at_fault", warning,
     "the hugetlb cgroup limits pages at fault time only: SIGBUS on first touch instead of ENOMEM "
     "from mmap"},
    {rule_id::no_1g_pages, "no_1g_pages", note, "the CPU has no 1 GiB pages (no pdpe1gb flag)"},
    {rule_id::process_thp_disabled, "process_thp_disabled", warning,
     "THP is disabled for the process (prctl PR_SET_THP_DISABLE), and by whom"},
    {rule_id::redis_disables_thp, "redis_disables_thp", note,
     "Redis turned THP off for itself, for its fork-based persistence"},
    {rule_id::mariadb_large_pages, "mariadb_large_pages", warning,
     "MariaDB with THP off has its buffer pool on base pages: large_pages=ON and the pool it "
     "needs"},
    {rule_id::mariadb_pool_short, "mariadb_pool_short", warning,
     "MariaDB has --large-pages, yet its buffer pool is on base pages: the hugetlb pool was "
     "short at start"},
    {rule_id::jvm_pool_short, "jvm_pool_short", warning,
     "the JVM has -XX:+UseLargePages, yet its heap is on base pages: the hugetlb pool was short "
     "at start, or the page size does not exist"},
    {rule_id::jvm_memory_beside_heap, "jvm_memory_beside_heap", note,
     "the JVM's heap is on hugetlb pages, its other memory on base pages, which no JVM flag "
     "reaches"},
    {rule_id::postgres_huge_pages, "postgres_huge_pages", warning,
     "PostgreSQL's shared memory is on base pages: huge_pages = on and the pool it needs"},
    {rule_id::shmem_without_thp, "shmem_without_thp", warning,
     "shared anonymous memory on base pages because shmem_enabled does not reach it"},
    {rule_id::shmem_not_advised, "shmem_not_advised", warning,
     "shmem_enabled=advise, and the program advises too little of its shared memory"},
    {rule_id::tmpfs_mount_without_huge, "tmpfs_mount_without_huge", warning,
     "files on a tmpfs mount whose huge= option does not reach them"},
    {rule_id::shmem_deny_overrides_mount, "shmem_deny_overrides_mount", warning,
     "a tmpfs mount's huge= would reach its files, but shmem_enabled=deny overrides it"},
    {rule_id::tmpfs_pages_predate_huge, "tmpfs_pages_predate_huge", warning,
     "a tmpfs mount's huge= reaches its files, but their pages were written before it was set"},
    {rule_id::jvm_without_thp, "jvm_without_thp", warning,
     "the JVM heap is not advised under THP madvise: -XX:+UseTransparentHugePages"},
    {rule_id::jemalloc_without_thp, "jemalloc_without_thp", warning,
     "jemalloc runs without thp:always under THP madvise, so its arenas are never advised"},
    {rule_id::glibc_without_hugetlb_tunable, "glibc_without_hugetlb_tunable", warning,
     "glibc malloc runs without glibc.malloc.hugetlb=1 under THP madvise, so it never advises "
     "THP"},
    {rule_id::mimalloc_without_large_pages, "mimalloc_without_large_pages", warning,
     "mimalloc runs without large OS pages under THP madvise, so its segments are not advised"},
    {rule_id::glibc_too_old_for_thp, "glibc_too_old_for_thp", note,
     "glibc before 2.35 has no glibc.malloc.hugetlb tunable: no malloc setting advises its heap"},
    {rule_id::locked_before_advice, "locked_before_advice", warning,
     "locked memory was faulted in on base pages before anything could advise it"},
    {rule_id::thp_disabled_except_advised, "thp_disabled_except_advised", warning,
     "THP enabled=always, yet the process has THP disabled except where advised"},
    {rule_id::dotnet_gc_large_pages, "dotnet_gc_large_pages", warning,
     ".NET's GC heap is on base pages: the runtime's own large pages switch"},
    {rule_id::memory_cgroup_limit, "memory_cgroup_limit", warning,
     "the advice given grows the process's RSS past its memory cgroup's room"},
    {rule_id::numa_remote_memory, "numa_remote_memory", warning,
     "much of the process's memory lies on NUMA nodes where none of its threads may run"},
    {rule_id::numa_pool_wrong_node, "numa_pool_wrong_node", warning,
     "the process's hugetlb pages came from a pool reserved on a node where it does not run"},
    {rule_id::file_copies_out_of_reach, "file_copies_out_of_reach", note,
     "copies the process wrote in private file mappings are on base pages, which no setting "
     "reaches"},
    {rule_id::tcmalloc_without_thp, "tcmalloc_without_thp", note,
     "gperftools tcmalloc has no THP option: only THP enabled=always reaches its heap"},
    {rule_id::musl_without_thp, "musl_without_thp", note,
     "musl's malloc has no huge page setting, and no other allocator loads into it"},
    {rule_id::allocator_settings_unknown, "allocator_settings_unknown", note,
     "the allocator's settings cannot be read: the environment is unreadable or overwritten"},
    {rule_id::glibc_tunable_does_not_reach, "glibc_tunable_does_not_reach", warning,
     "glibc.malloc.hugetlb is set but does not reach this memory of glibc's"},
    {rule_id::glibc_hugetlb_pool_short, "glibc_hugetlb_pool_short", warning,
     "glibc.malloc.hugetlb=2, yet malloc's memory is on base pages: the hugetlb pool was short"},
    {rule_id::glibc_chunks_out_of_reach, "glibc_chunks_out_of_reach", note,
     "glibc memory that no malloc setting reaches (thread arenas, mappings under the THP size)"},
    {rule_id::memcached_large_pages, "memcached_large_pages", warning,
     "memcached's 1 MiB slabs are never advised: its own -L"},
    {rule_id::numpy_madvise_disabled, "numpy_madvise_disabled", warning,
     "NUMPY_MADVISE_HUGEPAGE=0 turns off numpy's own advice on its array buffers"},
    {rule_id::node_heap_unreachable, "node_heap_unreachable", note,
     "Node.js maps V8's heap itself, and no setting advises it"},
    {rule_id::go_heap_out_of_reach, "go_heap_out_of_reach", note,
     "the Go runtime advises none of its heap, and no GODEBUG setting would"},
    {rule_id::runtime_heap_out_of_reach, "runtime_heap_out_of_reach", note,
     "a runtime's own heap that the doctor knows no setting for"},
    {rule_id::anonymous_mmap_out_of_reach, "anonymous_mmap_out_of_reach", note,
     "the program's own mappings without MADV_HUGEPAGE, which no malloc or runtime setting "
     "reaches"},
    {rule_id::base_pages_out_of_reach, "base_pages_out_of_reach", note,
     "classes each under the advice threshold hold much memory on base pages that no setting "
     "reaches"},
    {rule_id::allocator_linked_in, "allocator_linked_in", note,
     "no libc or known allocator is mapped: the allocator is linked into the executable"},
    {rule_id::small_mappings_out_of_reach, "small_mappings_out_of_reach", note,
     "memory in mappings under the THP size, which no setting makes huge"},
    {rule_id::huge_pages_not_obtained, "huge_pages_not_obtained", warning,
     "a setting that reaches the memory is in place, but free memory is fragmented and THP "
     "faults fall back"},
    {rule_id::advised_but_not_huge, "advised_but_not_huge", warning,
     "a setting reaches the memory, yet it is not all huge (a note from 40% huge)"},
    {rule_id::setting_does_not_reach, "setting_does_not_reach", warning,
     "a setting that works by MADV_HUGEPAGE is in place, but advised under half of the memory"},
};

// Each row at the index of its key, one row per key: rule_of() indexes by key.
constexpr bool in_key_order() {
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    if (static_cast<std::size_t>(rows[i].key) != i) return false;
  }
  return true;
}
static_assert(in_key_order(), "rule_catalog.cpp: the rows must follow rule_id's order");
static_assert(std::size(rows) == static_cast<std::size_t>(rule_id::count),
              "rule_catalog.cpp: one row per rule_id");

}  // namespace

const rule& rule_of(rule_id key) noexcept { return rows[static_cast<std::size_t>(key)]; }

const std::vector<rule>& rule_catalog() {
  static const std::vector<rule> all(std::begin(rows), std::end(rows));
  return all;
}

}  // namespace hugepage::doctor
