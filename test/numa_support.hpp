// test/numa_support.hpp - helpers of the NUMA placement tests: the policy the kernel holds for an
// address, node sets, the two-node requirement.
#pragma once

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hugepage/numa.hpp"

namespace hugepage::test {

/// The memory policy the kernel holds for the page at `p` (get_mempolicy with MPOL_F_ADDR):
/// the mode (0 default, 1 preferred, 2 bind, 3 interleave) and its node mask; mode -1 on failure.
struct kernel_policy {
  int mode = -1;
  std::uint64_t nodes = 0;
};
inline kernel_policy policy_at(const void* p) {
  kernel_policy policy;
  unsigned long mask = 0;
  constexpr unsigned long mpol_f_addr = 2;
  if (::syscall(SYS_get_mempolicy, &policy.mode, &mask, 65UL, p, mpol_f_addr) != 0) {
    policy.mode = -1;
  }
  policy.nodes = mask;
  return policy;
}

/// How many nodes are online.
inline int online_node_count() {
  const std::uint64_t mask = numa::read_online_nodes().mask;
  return __builtin_popcountll(mask);
}

/// HUGEPAGE_REQUIRE_NODES=2: the machine was set up with two nodes, and a test that would skip
/// for want of them fails instead.
inline bool two_nodes_required() {
  const char* value = std::getenv("HUGEPAGE_REQUIRE_NODES");
  return value != nullptr && std::strcmp(value, "2") == 0;
}

}  // namespace hugepage::test

/// Skips a test that needs two NUMA nodes on a machine with fewer, naming the reason; fails it
/// instead under HUGEPAGE_REQUIRE_NODES=2.
#define HUGEPAGE_REQUIRE_TWO_NODES()                                                             \
  do {                                                                                           \
    const int nodes_ = ::hugepage::test::online_node_count();                                    \
    if (nodes_ < 2) {                                                                            \
      const std::string why_ = "needs two NUMA nodes; this machine has " +                       \
                               std::to_string(nodes_) +                                          \
                               " (/sys/devices/system/node/online); run it in a two-node guest"; \
      if (::hugepage::test::two_nodes_required()) {                                              \
        FAIL() << "HUGEPAGE_REQUIRE_NODES=2, but the test would skip: " << why_;                 \
      }                                                                                          \
      GTEST_SKIP() << why_;                                                                      \
    }                                                                                            \
  } while (0)
