// tools/doctor/rule_catalog.hpp - every piece of advice the doctor can give, one row each: its
// id, its level and what it finds (rule_catalog.cpp). Advice is made from a row (advice.hpp), so
// an id or a level is written here and nowhere else; `hugepage-doctor --list-rules` prints the
// rows, and tools/README.md's table of identifiers lists them in the same order (a test checks).
//
// A new rule: an enumerator here and its row in rule_catalog.cpp, at the same place (two static
// checks there refuse anything else).
#pragma once

#include <vector>

#include "advice_level.hpp"

namespace hugepage::doctor {

/// One piece of advice the doctor can give. In the order --list-rules lists them: the system's,
/// then a process's.
enum class rule_id : unsigned char {
  thp_never,
  max_ptes_none,
  defrag_always_stalls,
  defrag_never,
  pool_in_use,
  pool_exhausted,
  pool_idle,
  fragmented,
  thp_fault_fallback,
  cgroup_limit_below_pool,
  cgroup_limit_at_fault,
  no_1g_pages,
  process_thp_disabled,
  redis_disables_thp,
  mariadb_large_pages,
  mariadb_pool_short,
  jvm_pool_short,
  jvm_memory_beside_heap,
  postgres_huge_pages,
  shmem_without_thp,
  shmem_not_advised,
  tmpfs_mount_without_huge,
  shmem_deny_overrides_mount,
  tmpfs_pages_predate_huge,
  jvm_without_thp,
  jemalloc_without_thp,
  glibc_without_hugetlb_tunable,
  mimalloc_without_large_pages,
  glibc_too_old_for_thp,
  locked_before_advice,
  thp_disabled_except_advised,
  dotnet_gc_large_pages,
  memory_cgroup_limit,
  numa_remote_memory,
  numa_pool_wrong_node,
  file_copies_out_of_reach,
  tcmalloc_without_thp,
  musl_without_thp,
  allocator_settings_unknown,
  glibc_tunable_does_not_reach,
  glibc_hugetlb_pool_short,
  glibc_chunks_out_of_reach,
  memcached_large_pages,
  numpy_madvise_disabled,
  node_heap_unreachable,
  go_heap_out_of_reach,
  runtime_heap_out_of_reach,
  anonymous_mmap_out_of_reach,
  base_pages_out_of_reach,
  allocator_linked_in,
  small_mappings_out_of_reach,
  huge_pages_not_obtained,
  advised_but_not_huge,
  setting_does_not_reach,
  count,  ///< not a rule: how many there are (a new rule goes above)
};

/// A row of the catalog.
struct rule {
  rule_id key;
  /// The stable identifier advice carries in every output ("thp_never", ...).
  const char* id;
  /// The highest level the advice has: a warning may be given as a note where what the rule
  /// finds is small (advice::lower_to_note()); a note is never raised to a warning.
  advice_level level;
  /// One sentence: what the rule finds.
  const char* what;
};

/// The row of `key` (a rule, not count).
const rule& rule_of(rule_id key) noexcept;

/// Every row, in the order of rule_id.
const std::vector<rule>& rule_catalog();

}  // namespace hugepage::doctor
