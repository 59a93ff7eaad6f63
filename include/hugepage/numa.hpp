// hugepage/numa.hpp - NUMA placement of a mapping: the policy type and the raw system calls.
//
// A `numa_placement` says on which memory nodes a mapping's pages are to be allocated:
//   local      first touch: the node of the thread that faults the page (the kernel's default)
//   bind       only the nodes of the set (MPOL_BIND); a node without memory is an error, never
//              a page from another node
//   preferred  one node first, any other when it has none (MPOL_PREFERRED); a node outside the
//              process's cpuset places by first touch instead (within(), counted)
//   interleave the nodes of the set in turn, one huge page each (MPOL_INTERLEAVE: the kernel
//              picks the node of a huge page by its index in huge pages, for THP and hugetlb)
// The strategy applies it with mbind(2) to a fresh mapping before anything touches it
// (strategy.hpp). The system calls are made directly (no libnuma link dependency): mbind and
// move_pages, the latter only to ask on which node each page is (no page is moved).
//
// Nodes are numbered 0..63 here (a mask of 64 bits); a machine with more nodes can still use
// local placement. Kernel: CONFIG_NUMA (every distribution kernel); without it mbind fails with
// ENOSYS and only the local placement is possible.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "hugepage/kernel_files.hpp"
#include "hugepage/page_size.hpp"

namespace hugepage {

/// A set of NUMA nodes 0..63, as a bit mask. Built from a list: `node_set{0, 1}`. A node outside
/// 0..63 makes the set invalid (`valid()` false), which the strategy reports as an error.
struct node_set {
  std::uint64_t mask = 0;
  bool invalid = false;
  int outside = 0;  ///< the first node named outside 0..63, when invalid (for the error)

  constexpr node_set() noexcept = default;
  constexpr node_set(std::initializer_list<int> nodes) noexcept {
    for (const int n : nodes) {
      if (n < 0 || n > 63) {
        if (!invalid) outside = n;
        invalid = true;
      } else {
        mask |= std::uint64_t{1} << n;
      }
    }
  }
  static constexpr node_set of_mask(std::uint64_t bits) noexcept {
    node_set s;
    s.mask = bits;
    return s;
  }
  constexpr bool contains(int node) const noexcept {
    return node >= 0 && node < 64 && (mask >> node & 1U) != 0;
  }
  constexpr bool empty() const noexcept { return mask == 0; }
  constexpr bool valid() const noexcept { return !invalid; }
  /// The lowest node of the set, -1 when empty.
  constexpr int first() const noexcept {
    for (int n = 0; n < 64; ++n) {
      if (contains(n)) return n;
    }
    return -1;
  }
  /// "0", "0,1", "" for the empty set.
  std::string text() const {
    std::string out;
    for (int n = 0; n < 64; ++n) {
      if (!contains(n)) continue;
      if (!out.empty()) out += ',';
      out += std::to_string(n);
    }
    return out;
  }
  friend constexpr bool operator==(const node_set& a, const node_set& b) noexcept {
    return a.mask == b.mask && a.invalid == b.invalid;
  }
  friend constexpr bool operator!=(const node_set& a, const node_set& b) noexcept {
    return !(a == b);
  }
};

/// How a placement chooses nodes.
enum class numa_mode : unsigned char { local, bind, preferred, interleave };

/// "local", "bind", "preferred" or "interleave".
constexpr const char* name_of(numa_mode mode) noexcept {
  switch (mode) {
    case numa_mode::local: return "local";
    case numa_mode::bind: return "bind";
    case numa_mode::preferred: return "preferred";
    case numa_mode::interleave: return "interleave";
  }
  return "local";
}

/// Where the pages of a mapping go (see the top of this file). A literal type: a compile-time
/// option of the STL allocators (default_options::numa) and a run-time option of the strategy
/// and the arenas (allocation_options::numa).
struct numa_placement {
  numa_mode mode = numa_mode::local;
  node_set nodes;

  /// First touch: today's behaviour, no system call.
  static constexpr numa_placement local() noexcept { return {}; }
  /// Only the nodes of `set`.
  static constexpr numa_placement bind(node_set set) noexcept { return {numa_mode::bind, set}; }
  /// `node` first, another node when it has no free memory (counted where the library sees it).
  static constexpr numa_placement preferred(int node) noexcept {
    return {numa_mode::preferred, node_set{node}};
  }
  /// The nodes of `set` in turn, one huge page each.
  static constexpr numa_placement interleave(node_set set) noexcept {
    return {numa_mode::interleave, set};
  }

  constexpr bool is_local() const noexcept { return mode == numa_mode::local; }

  friend constexpr bool operator==(const numa_placement& a, const numa_placement& b) noexcept {
    return a.mode == b.mode && (a.mode == numa_mode::local || a.nodes == b.nodes);
  }
  friend constexpr bool operator!=(const numa_placement& a, const numa_placement& b) noexcept {
    return !(a == b);
  }
};

namespace numa {

/// The nodes of a node list file under /sys/devices/system/node ("0", "0-1", "0,2-3"); {0} on a
/// kernel without CONFIG_NUMA (no such file). Nodes past 63 are left out. Reads the file.
inline node_set read_node_list(const std::string& root, const char* file) {
  const std::optional<std::string> text = read_kernel_text(root, file);
  node_set set;
  if (!text) return node_set{0};
  std::string_view rest(*text);
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t dash = item.find('-');
    const std::optional<std::uint64_t> from = parse_decimal(item.substr(0, dash));
    const std::optional<std::uint64_t> to =
        dash == std::string_view::npos ? from : parse_decimal(item.substr(dash + 1));
    if (!from || !to) continue;
    for (std::uint64_t n = *from; n <= *to && n < 64; ++n) set.mask |= std::uint64_t{1} << n;
  }
  return set.empty() ? node_set{0} : set;
}

/// The online nodes, from /sys/devices/system/node/online (read_node_list).
inline node_set read_online_nodes(const std::string& root = "") {
  return read_node_list(root, "/sys/devices/system/node/online");
}

/// The online nodes, read once (the set changes only with memory hot-plug of a whole node).
inline node_set online_nodes() {
  static const node_set nodes = read_online_nodes();
  return nodes;
}

/// The nodes with memory (has_memory), read once: what Mems_allowed holds outside a cpuset; a
/// node of CPUs only is online but never allowed.
inline node_set memory_nodes() {
  static const node_set nodes = read_node_list("", "/sys/devices/system/node/has_memory");
  return nodes;
}

/// The per-node file of the hugetlb pool of `size` on `node`: `which` is "nr_hugepages",
/// "free_hugepages" or "surplus_hugepages".
inline std::string node_pool_file(int node, page_size size, const char* which) {
  return "/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/hugepages-" +
         (size == page_size::huge_1g ? "1048576kB/" : "2048kB/") + which;
}

/// A number from node_pool_file(node, size, which); nullopt when it cannot be read.
inline std::optional<std::uint64_t> read_node_pool(int node, page_size size, const char* which,
                                                   const std::string& root = "") {
  const std::optional<std::string> text = read_kernel_text(root, node_pool_file(node, size, which));
  if (!text) return std::nullopt;
  return parse_decimal(*text);
}

/// The nodes this process may allocate from: its cpuset's Mems_allowed (get_mempolicy with
/// MPOL_F_MEMS_ALLOWED, one system call, no file read); nullopt where the call fails (a kernel
/// without CONFIG_NUMA).
inline std::optional<node_set> allowed_nodes() noexcept {
  unsigned long mask = 0;
  int mode = 0;
  constexpr unsigned long mpol_f_mems_allowed = 4;
  if (::syscall(SYS_get_mempolicy, &mode, &mask, 65UL, nullptr, mpol_f_mems_allowed) != 0) {
    return std::nullopt;
  }
  return node_set::of_mask(mask);
}

/// The placement a block gets in a process that may use only the nodes `allowed` (its cpuset):
/// `placement` itself, except `preferred` on a node outside `allowed`, which becomes local (first
/// touch). The kernel refuses such a policy (EINVAL), and "preferred" promises another node when
/// its own cannot serve; the strategy counts it as a fallback to another node. Bind and
/// interleave are kept: a set outside the cpuset is an error mbind reports.
constexpr numa_placement within(const numa_placement& placement, node_set allowed) noexcept {
  if (placement.mode == numa_mode::preferred && !allowed.empty() &&
      (placement.nodes.mask & allowed.mask) == 0) {
    return numa_placement::local();
  }
  return placement;
}

// The policy modes and flag of <linux/mempolicy.h>, written out: that header is not on every
// system's include path (no linux-libc-dev), and its values are ABI.
inline constexpr int mpol_preferred = 1;
inline constexpr int mpol_bind = 2;
inline constexpr int mpol_interleave = 3;

/// Applies `placement` to [p, p + length) with mbind(2): for the pages faulted in later (no
/// MPOL_MF_MOVE: the range is fresh). Local placement makes no call. Returns the errno: EINVAL
/// for a node that is not online or not in this process's cpuset, ENOSYS without CONFIG_NUMA.
inline std::error_code apply(void* p, std::size_t length,
                             const numa_placement& placement) noexcept {
  int mode = 0;
  switch (placement.mode) {
    case numa_mode::local: return {};
    case numa_mode::bind: mode = mpol_bind; break;
    case numa_mode::preferred: mode = mpol_preferred; break;
    case numa_mode::interleave: mode = mpol_interleave; break;
  }
  const unsigned long mask = placement.nodes.mask;
  // maxnode counts bits, and the kernel reads one fewer than it is given.
  if (::syscall(SYS_mbind, p, length, mode, &mask, 65UL, 0U) != 0) {
    return std::error_code(errno, std::generic_category());
  }
  return {};
}

/// For each of `count` addresses in `pages`, the node of the page there, into `status`: a node
/// number, or a negative errno (-ENOENT not present, -EFAULT unmapped or the zero page). Of
/// process `pid` (0: this one; another needs ptrace-read access, as its pagemap does). move_pages
/// with no target nodes moves nothing. Returns the call's errno.
inline std::error_code nodes_of_pages(pid_t pid, std::size_t count, const void** pages,
                                      int* status) noexcept {
  if (::syscall(SYS_move_pages, pid, count, pages, nullptr, status, 0) != 0) {
    return std::error_code(errno, std::generic_category());
  }
  return {};
}

}  // namespace numa

}  // namespace hugepage
