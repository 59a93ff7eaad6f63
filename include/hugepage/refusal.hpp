// hugepage/refusal.hpp - why hugetlb pages were refused, and the words that say so.
//
// When the kernel refuses hugetlb pages - the mmap that reserves them (ENOMEM) or the fault-in
// that populates them (MADV_POPULATE_WRITE: EFAULT from a hugetlb cgroup charged at fault time,
// ENOMEM) - the strategy reads the facts that can explain it once (read_hugetlb_refusal), decides
// from them what to do (cause_of: retry, or which exception) and hands the same facts to the
// explanation (explain). The pool, the limits and the address space move under other processes,
// so reading them a second time for the message could contradict the decision. The facts are
// plain data: a test writes them by hand.
//
// The causes, each decided only when the ones before it do not apply:
//   no_pool                the kernel has no pool of the size (reserve only)
//   call_refused           an errno that says nothing about pages (EPERM from a seccomp filter,
//                          EINVAL): the call itself was refused
//   cgroup_limit           a hugetlb cgroup limit has less room than asked: hugetlb.<size>.rsvd.max
//                          at reserve, hugetlb.<size>.max at fault (v1: the limit_in_bytes files)
//   address_space_limit    RLIMIT_AS (ulimit -v) has no room for the mapping, with the room an
//                          aligned reservation takes (reserve only)
//   mapping_count_limit    the process is at vm.max_map_count: no room for another mapping
//   pool_refilled          the pool has room now: it was short when the kernel refused and other
//                          threads or processes use it; the strategy retries
//   beyond_memory          short, and a pool that holds the request would pass what pools may
//                          take: pool_memory_cap() of physical memory, less the other pools
//   pool_short             short: the command that reserves enough
//   fault_elsewhere        fault-in refused, and no hugetlb cgroup limit explains it: the NUMA
//                          nodes this process may use ran short, or others took the pages
//   limit_unseen           fault-in refused, and the hugetlb cgroup hierarchy cannot be read
//
// A process whose cpuset allows fewer nodes than have memory (Mems_allowed) gets pool pages from
// those nodes' pools only: the kernel refuses a reservation their free pages cannot cover, however
// many other nodes hold. The cause stays what the system-wide pool says (the retry decision is
// unchanged); where the allowed nodes' free pages are fewer than asked, the message names them
// and advises their per-node pools or a wider cpuset, never the system-wide size.
//
// pool_resize_command() is the one text of the command that sizes a pool: these messages and
// hugepage-doctor's advice print it.
//
// An anonymous mapping refused (THP, the collapse method, a fallback's THP, an aligned
// reservation) has the same two process limits to blame: read_mapping_refusal, cause_of and
// explain of a mapping_refusal decide and say it with the same words (address_space_limit,
// mapping_count_limit; call_refused where neither explains it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "hugepage/cgroup.hpp"
#include "hugepage/detail/refusal_facts.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/format_bytes.hpp"
#include "hugepage/hugetlb_pool.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage {

/// The most memory all hugetlb pools together should hold: 80% of `physical_memory`, so the
/// kernel, page tables and the processes' other memory keep the rest. Advice that sizes a pool
/// (these messages, hugepage-doctor) never suggests more.
constexpr std::uint64_t pool_memory_cap(std::uint64_t physical_memory) noexcept {
  return physical_memory / 10 * 8;
}

/// The command that sets the pool of `page_bytes` pages to `pages` pages now: `sysctl -w
/// vm.nr_hugepages=N` for the default huge page size (`default_page_bytes`, Hugepagesize in
/// /proc/meminfo; vm.nr_hugepages sizes that pool only), otherwise `echo N >
/// /sys/kernel/mm/hugepages/hugepages-<kB>kB/nr_hugepages`, which works for every size; 0 for
/// `default_page_bytes` always gives the sysfs form. Needs root; not kept across a reboot.
inline std::string pool_resize_command(std::size_t page_bytes, std::uint64_t pages,
                                       std::size_t default_page_bytes = 0) {
  if (default_page_bytes != 0 && page_bytes == default_page_bytes) {
    return "sysctl -w vm.nr_hugepages=" + std::to_string(pages);
  }
  return "echo " + std::to_string(pages) + " > " + detail::pool_directory(page_bytes, {}) +
         "nr_hugepages";
}

/// What the kernel refused.
enum class refusal_stage : unsigned char {
  reserve,  ///< mmap(MAP_HUGETLB): the pages could not be reserved
  fault,    ///< MADV_POPULATE_WRITE: reserved pages could not be faulted in
};

/// Why: see the list at the top of this file.
enum class refusal_cause : unsigned char {
  no_pool,
  call_refused,
  cgroup_limit,
  address_space_limit,
  mapping_count_limit,
  pool_refilled,
  beyond_memory,
  pool_short,
  fault_elsewhere,
  limit_unseen,
};

/// Returns the cause's name as written above ("pool_short", ...).
constexpr const char* name_of(refusal_cause cause) noexcept {
  switch (cause) {
    case refusal_cause::no_pool: return "no_pool";
    case refusal_cause::call_refused: return "call_refused";
    case refusal_cause::cgroup_limit: return "cgroup_limit";
    case refusal_cause::address_space_limit: return "address_space_limit";
    case refusal_cause::mapping_count_limit: return "mapping_count_limit";
    case refusal_cause::pool_refilled: return "pool_refilled";
    case refusal_cause::beyond_memory: return "beyond_memory";
    case refusal_cause::pool_short: return "pool_short";
    case refusal_cause::fault_elsewhere: return "fault_elsewhere";
    case refusal_cause::limit_unseen: return "limit_unseen";
  }
  return "unknown";
}

/// The facts read once after a refusal: what was asked, what the kernel answered, and every level
/// that can explain it.
struct hugetlb_refusal {
  refusal_stage stage = refusal_stage::reserve;
  page_size size = page_size::huge_2m;  ///< the page size asked
  std::uint64_t pages = 0;              ///< pages of `size` asked
  std::error_code error;                ///< the kernel's answer
  /// The system-wide pool of `size`: free, reserved, surplus, total, overcommit. Empty: this
  /// kernel has none.
  std::optional<hugetlb_pool> pool;
  /// The hugetlb cgroup limits on `size` for the charge `stage` meets (rsvd.max at reserve, max at
  /// fault), and whether the hierarchy could be read.
  cgroup_limit_search cgroup;
  std::optional<std::uint64_t> address_space_limit;  ///< RLIMIT_AS (soft) in bytes; empty: none
  std::uint64_t address_space_used = 0;              ///< bytes mapped by the process
  /// Address space the refused call needed, where more than bytes(): an aligned reservation maps
  /// the alignment more. 0: bytes().
  std::uint64_t address_space_needed = 0;
  std::uint64_t mappings = 0;           ///< the process's mappings (/proc/self/maps lines)
  std::uint64_t max_mappings = 0;       ///< vm.max_map_count; 0 when unknown
  std::uint64_t physical_memory = 0;    ///< bytes; 0 when unknown
  std::uint64_t other_pools_bytes = 0;  ///< memory the pools of other page sizes hold
  std::size_t default_page_bytes = 0;   ///< Hugepagesize; 0 when unknown
  /// The nodes this process may use (its cpuset's Mems_allowed) where they are fewer than the
  /// nodes with memory; empty otherwise (all of them, or unknown).
  node_set cpuset_nodes;
  /// The pools of `size` on each node with memory, read where cpuset_nodes is not empty.
  std::vector<hugetlb_pool> node_pools;

  /// The bytes asked.
  std::uint64_t bytes() const noexcept { return pages * bytes_of(size); }
  /// Pages the pool can still reserve (hugetlb_pool::available); 0 when unknown.
  std::uint64_t available() const noexcept { return pool ? pool->available().value_or(0) : 0; }
};

/// Reads the facts after the kernel refused `pages` pages of `size` at `stage` with `error`.
/// Reads sysfs, /proc and the cgroup hierarchy; thread-safe; throws only std::bad_alloc.
inline hugetlb_refusal read_hugetlb_refusal(refusal_stage stage, page_size size,
                                            std::uint64_t pages, std::error_code error,
                                            std::uint64_t address_space_needed = 0) {
  hugetlb_refusal facts;
  facts.stage = stage;
  facts.size = size;
  facts.pages = pages;
  facts.error = error;
  facts.pool = read_pool(size);
  facts.cgroup =
      hugetlb_limit(bytes_of(size), stage == refusal_stage::reserve ? hugetlb_charge::reservation
                                                                    : hugetlb_charge::fault);
  facts.address_space_limit = detail::address_space_limit();
  facts.address_space_used = detail::address_space_used();
  facts.address_space_needed = address_space_needed;
  facts.mappings = detail::mapping_count();
  facts.max_mappings = detail::read_u64("/proc/sys/vm/max_map_count").value_or(0);
  facts.physical_memory = physical_memory_bytes();
  for (const page_size other : {page_size::huge_2m, page_size::huge_1g}) {
    if (other == size) continue;
    if (const auto pool = read_pool(other)) {
      facts.other_pools_bytes += pool->total.value_or(0) * bytes_of(other);
    }
  }
  facts.default_page_bytes = detail::read_default_huge_page_bytes();
  if (const std::optional<node_set> allowed = numa::allowed_nodes()) {
    const std::uint64_t memory = numa::memory_nodes().mask;
    if ((memory & ~allowed->mask) != 0 && (memory & allowed->mask) != 0) {
      facts.cpuset_nodes = node_set::of_mask(memory & allowed->mask);
      for (int n = 0; n < 64; ++n) {
        if ((memory >> n & 1U) == 0) continue;
        if (const auto pool = read_pool(bytes_of(size), n)) facts.node_pools.push_back(*pool);
      }
    }
  }
  return facts;
}

namespace detail {

// The process limit that explains ENOMEM for a mapping that needs `needed` bytes of address
// space: RLIMIT_AS, then vm.max_map_count (no room for one mapping more). call_refused: neither.
inline refusal_cause process_limit_of(const std::optional<std::uint64_t>& address_space_limit,
                                      std::uint64_t address_space_used, std::uint64_t needed,
                                      std::uint64_t mappings, std::uint64_t max_mappings) noexcept {
  if (address_space_limit && (address_space_used > *address_space_limit ||
                              needed > *address_space_limit - address_space_used)) {
    return refusal_cause::address_space_limit;
  }
  if (max_mappings != 0 && mappings + 1 >= max_mappings) {
    return refusal_cause::mapping_count_limit;
  }
  return refusal_cause::call_refused;
}

// The words for a process limit (process_limit_of), appended to the failed call's text.
inline std::string process_limit_text(refusal_cause cause, std::uint64_t mappings,
                                      std::uint64_t max_mappings) {
  if (cause == refusal_cause::address_space_limit) {
    return "; the address-space limit (RLIMIT_AS, ulimit -v) leaves no room for it";
  }
  return "; the process has " + std::to_string(mappings) + " mappings and vm.max_map_count is " +
         std::to_string(max_mappings) + ": no room for another mapping";
}

// The pool size, in bytes, that serves the request: what it holds, plus what is short.
inline std::uint64_t pool_target_bytes(const hugetlb_refusal& f) noexcept {
  const std::uint64_t total = f.pool ? f.pool->total.value_or(0) : 0;
  return (total + f.pages - f.available()) * bytes_of(f.size);
}

// What this pool may hold: the cap on all pools, less what the other sizes' pools hold.
inline std::uint64_t pool_room_bytes(const hugetlb_refusal& f) noexcept {
  const std::uint64_t cap = pool_memory_cap(f.physical_memory);
  return cap > f.other_pools_bytes ? cap - f.other_pools_bytes : 0;
}

// The free pages of the pools of the cpuset's nodes (`inside`) or of the other nodes with memory.
inline std::uint64_t node_free(const hugetlb_refusal& f, bool inside) noexcept {
  std::uint64_t free = 0;
  for (const hugetlb_pool& pool : f.node_pools) {
    if (f.cpuset_nodes.contains(pool.node.value_or(-1)) == inside) free += pool.free.value_or(0);
  }
  return free;
}

// Whether the cpuset explains the shortage: its nodes' free pages are fewer than asked (what the
// kernel compares a reservation with).
inline bool cpuset_short(const hugetlb_refusal& f) noexcept {
  return !f.cpuset_nodes.empty() && node_free(f, true) < f.pages;
}

// "node 0" or "nodes 0,2".
inline std::string nodes_text(node_set nodes) {
  return ((nodes.mask & (nodes.mask - 1)) == 0 ? "node " : "nodes ") + nodes.text();
}

// The words for cpuset_short: the allowed nodes, their free pages, the others', and the per-node
// pool to raise (the first allowed node's; its current size plus what is missing).
inline std::string cpuset_text(const hugetlb_refusal& f) {
  const node_set& allowed = f.cpuset_nodes;
  const bool one = (allowed.mask & (allowed.mask - 1)) == 0;
  const std::uint64_t inside = node_free(f, true);
  std::string each;  // "node 0: 1, node 2: 2"
  std::uint64_t others = 0;
  std::uint64_t total = 0;  // the first allowed node's pool
  for (const hugetlb_pool& pool : f.node_pools) {
    const int n = pool.node.value_or(0);
    if (!allowed.contains(n)) {
      others |= std::uint64_t{1} << n;
      continue;
    }
    each += (each.empty() ? "node " : ", node ") + std::to_string(n) + ": " +
            std::to_string(pool.free.value_or(0));
    if (n == allowed.first()) total = pool.total.value_or(0);
  }
  return "; this process's cpuset allows " + nodes_text(allowed) + (one ? " only" : "") +
         " (Mems_allowed), whose pool" + (one ? " has " : "s have ") + std::to_string(inside) +
         " free" + (one ? "" : " (" + each + ")") + ": the " + std::to_string(node_free(f, false)) +
         " free on " + nodes_text(node_set::of_mask(others)) +
         " cannot serve this process. Reserve more on node " + std::to_string(allowed.first()) +
         ": echo " + std::to_string(total + f.pages - inside) + " > " +
         numa::node_pool_file(allowed.first(), f.size, "nr_hugepages") +
         (one ? "" : " (or another allowed node's)") + ", or widen the cpuset (cpuset.mems)";
}

}  // namespace detail

/// Decides the cause from the facts alone (the list at the top of this file). Pure.
inline refusal_cause cause_of(const hugetlb_refusal& f) noexcept {
  const bool limit = f.cgroup.tightest && f.cgroup.tightest->headroom() < f.bytes();
  if (f.stage == refusal_stage::fault) {
    // Only EFAULT and ENOMEM mean pages were short; EPERM (a seccomp filter), EINVAL (a kernel
    // without MADV_POPULATE_WRITE) are the call refused.
    if (f.error != std::errc::bad_address && f.error != std::errc::not_enough_memory) {
      return refusal_cause::call_refused;
    }
    if (limit) return refusal_cause::cgroup_limit;
    return f.cgroup.readable ? refusal_cause::fault_elsewhere : refusal_cause::limit_unseen;
  }
  if (!f.pool) return refusal_cause::no_pool;
  if (f.error != std::errc::not_enough_memory) return refusal_cause::call_refused;
  // ENOMEM: a reservation limit, the address-space limit or the pool refused - decided from all
  // of them, never from the pool's level alone, which other processes move.
  if (limit) return refusal_cause::cgroup_limit;
  const std::uint64_t needed =
      f.address_space_needed > f.bytes() ? f.address_space_needed : f.bytes();
  const refusal_cause process = detail::process_limit_of(
      f.address_space_limit, f.address_space_used, needed, f.mappings, f.max_mappings);
  if (process != refusal_cause::call_refused) return process;
  const std::uint64_t available = f.available();
  if (available >= f.pages) return refusal_cause::pool_refilled;
  if (f.physical_memory != 0 && detail::pool_target_bytes(f) > detail::pool_room_bytes(f)) {
    return refusal_cause::beyond_memory;
  }
  return refusal_cause::pool_short;
}

/// The message for the facts: what was asked, what the kernel answered, the cause (cause_of) and
/// what fixes it. The text of every exception detail::throw_refusal() throws.
inline std::string explain(const hugetlb_refusal& f) {
  const std::string size = name_of(f.size);
  const std::string plural = f.pages == 1 ? "" : "s";
  std::string what = f.stage == refusal_stage::reserve
                         ? "hugepage: hugetlb mmap of " + std::to_string(f.pages) + " page" +
                               plural + " of " + size
                         : "hugepage: faulting in " + std::to_string(f.pages) + " hugetlb page" +
                               plural + " of " + size;
  what += " (" + format_bytes(f.bytes()) + ") failed: " + f.error.message();
  const auto pool_command = [&](std::uint64_t pages) {
    return pool_resize_command(bytes_of(f.size), pages, f.default_page_bytes);
  };
  const refusal_cause cause = cause_of(f);
  switch (cause) {
    case refusal_cause::no_pool:
      return what + "; this kernel has no " + size + " hugetlb pool (CONFIG_HUGETLBFS, or a CPU " +
             "without " + size + " pages)";
    case refusal_cause::call_refused:
      return f.stage == refusal_stage::fault
                 ? what + ": the kernel refused the pre-fault itself, not for want of pages"
                 : what;
    case refusal_cause::cgroup_limit: {
      const cgroup_limit& limit = *f.cgroup.tightest;
      return what + ": hugetlb cgroup limit: " + limit.file + " = " + format_bytes(limit.limit) +
             ", " + format_bytes(limit.usage) + " charged, room for " +
             std::to_string(limit.headroom() / bytes_of(f.size)) + " of the " +
             std::to_string(f.pages) + " page" + plural + " asked; raise the limit or ask for less";
    }
    case refusal_cause::address_space_limit:
      return what + detail::process_limit_text(cause, f.mappings, f.max_mappings);
    case refusal_cause::mapping_count_limit:
      return what + detail::process_limit_text(cause, f.mappings, f.max_mappings) +
             ", whatever the pool holds";
    case refusal_cause::fault_elsewhere:
      if (detail::cpuset_short(f)) return what + detail::cpuset_text(f);
      return what +
             "; no hugetlb cgroup limit explains it: the pool ran short on the NUMA nodes this "
             "process may use (cpuset, memory policy), or other processes took the pages";
    case refusal_cause::limit_unseen:
      return what + "; a hugetlb cgroup limit (hugetlb." +
             detail::hugetlb_cgroup_size_name(bytes_of(f.size)) +
             ".max) may apply, but this process cannot read its cgroup hierarchy";
    case refusal_cause::pool_refilled:
    case refusal_cause::beyond_memory:
    case refusal_cause::pool_short: break;
  }
  const hugetlb_pool& pool = *f.pool;
  const std::uint64_t available = f.available();
  const std::uint64_t total = pool.total.value_or(0);
  what += ": pool exhausted: asked for " + std::to_string(f.pages) + " x " + size + ", " +
          std::to_string(available) + " available (free " + std::to_string(pool.free.value_or(0)) +
          ", reserved " + std::to_string(pool.reserved.value_or(0)) + ", total " +
          std::to_string(total);
  // Overcommitted (surplus) pages count as available: say so where the pool allows them.
  if (pool.overcommit.value_or(0) != 0) {
    what += ", surplus " + std::to_string(pool.surplus.value_or(0)) + " of overcommit " +
            std::to_string(*pool.overcommit);
  }
  what += ")";
  // The pool has room, or would with more pages, but not on the nodes this process may use.
  if (cause != refusal_cause::beyond_memory && detail::cpuset_short(f)) {
    return what + detail::cpuset_text(f);
  }
  if (cause == refusal_cause::pool_refilled) {
    return what +
           "; it was short when the kernel refused and is in concurrent use: size it for the "
           "peak, e.g. " +
           pool_command(total + f.pages);
  }
  if (cause == refusal_cause::beyond_memory) {
    std::string room = "; no pool can hold that: pools should take at most " +
                       format_bytes(pool_memory_cap(f.physical_memory)) + " (80%) of " +
                       "this machine's " + format_bytes(f.physical_memory);
    if (f.other_pools_bytes != 0) {
      room += ", of which other pools hold " + format_bytes(f.other_pools_bytes);
    }
    return what + room;
  }
  return what + "; reserve enough with: " + pool_command(total + f.pages - available);
}

/// The facts read once after the kernel refused an anonymous mapping (no hugetlb pool involved).
struct mapping_refusal {
  /// What was asked, the start of the message: "hugepage: mmap of 1 GiB for transparent huge
  /// pages failed". explain() adds the errno and the cause.
  std::string call;
  std::error_code error;  ///< the kernel's answer
  /// Address space the refused mmap needed: the block and, for an aligned one, the over-map.
  std::uint64_t address_space_needed = 0;
  std::optional<std::uint64_t> address_space_limit;  ///< RLIMIT_AS (soft) in bytes; empty: none
  std::uint64_t address_space_used = 0;              ///< bytes mapped by the process
  std::uint64_t mappings = 0;                        ///< the process's mappings
  std::uint64_t max_mappings = 0;                    ///< vm.max_map_count; 0 when unknown
};

/// Reads the process limits after the kernel refused the mapping `call` describes with `error`.
/// Throws only std::bad_alloc.
inline mapping_refusal read_mapping_refusal(std::string call, std::error_code error,
                                            std::uint64_t address_space_needed) {
  mapping_refusal facts;
  facts.call = std::move(call);
  facts.error = error;
  facts.address_space_needed = address_space_needed;
  facts.address_space_limit = detail::address_space_limit();
  facts.address_space_used = detail::address_space_used();
  facts.mappings = detail::mapping_count();
  facts.max_mappings = detail::read_u64("/proc/sys/vm/max_map_count").value_or(0);
  return facts;
}

/// address_space_limit or mapping_count_limit where one explains ENOMEM; call_refused otherwise
/// (another errno, or neither limit is reached: the commit limit, say). Pure.
inline refusal_cause cause_of(const mapping_refusal& f) noexcept {
  if (f.error != std::errc::not_enough_memory) return refusal_cause::call_refused;
  return detail::process_limit_of(f.address_space_limit, f.address_space_used,
                                  f.address_space_needed, f.mappings, f.max_mappings);
}

/// The message: the call, the errno's text, and the limit that explains it (the same words as
/// for a hugetlb refusal).
inline std::string explain(const mapping_refusal& f) {
  std::string what = f.call + ": " + f.error.message();
  const refusal_cause cause = cause_of(f);
  if (cause != refusal_cause::call_refused) {
    what += detail::process_limit_text(cause, f.mappings, f.max_mappings);
  }
  return what;
}

namespace detail {

/// Throws allocation_error with explain(f) as its message.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_refusal(const mapping_refusal& f) {
  throw allocation_error(explain(f), f.error);
}

/// Throws the exception for the facts, with explain(f) as its message: hugetlb_limit_exceeded
/// (cgroup_limit), pool_exhausted (the pool short or refilled; the pages available are those of
/// the cpuset's nodes where they are fewer), allocation_error otherwise.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_refusal(const hugetlb_refusal& f) {
  const std::string message = explain(f);
  switch (cause_of(f)) {
    case refusal_cause::cgroup_limit: {
      const cgroup_limit& limit = *f.cgroup.tightest;
      throw hugetlb_limit_exceeded(message, f.error, f.size, f.pages,
                                   limit.headroom() / bytes_of(f.size), limit.file, limit.limit,
                                   limit.usage);
    }
    case refusal_cause::pool_refilled:
    case refusal_cause::beyond_memory:
    case refusal_cause::pool_short:
      throw pool_exhausted(
          message, f.error, f.size, f.pages,
          cpuset_short(f) ? std::min(f.available(), node_free(f, true)) : f.available());
    case refusal_cause::no_pool:
    case refusal_cause::call_refused:
    case refusal_cause::address_space_limit:
    case refusal_cause::mapping_count_limit:
    case refusal_cause::fault_elsewhere:
    case refusal_cause::limit_unseen: break;
  }
  throw allocation_error(message, f.error);
}

/// Throws memory_limit_exceeded: populating `needed` bytes would pass `limit` (a memory cgroup
/// limit, where the kernel answers with the OOM killer or throttling instead of an error).
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_memory_limit_exceeded(
    std::size_t needed, const cgroup_limit& limit) {
  const bool high = limit.file.size() >= 12 &&
                    limit.file.compare(limit.file.size() - 12, 12, "/memory.high") == 0;
  throw memory_limit_exceeded(
      "hugepage: populating " + format_bytes(needed) + " would pass the memory cgroup limit " +
          limit.file + " = " + format_bytes(limit.limit) + " (" + format_bytes(limit.usage) +
          " charged, " + format_bytes(limit.reclaimable) +
          " of it reclaimable file cache; headroom " + format_bytes(limit.headroom()) +
          (high ? "): past memory.high the kernel throttles the process and reclaims hard"
                : "): the kernel would OOM-kill the process instead of failing"),
      limit.file, limit.limit, limit.usage, limit.headroom());
}

}  // namespace detail
}  // namespace hugepage
