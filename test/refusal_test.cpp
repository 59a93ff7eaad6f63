// refusal_test.cpp - the diagnosis of refused hugetlb pages (refusal.hpp): the cause decided from
// facts written by hand, the exact words and exception for each cause, the pool command per page
// size, the byte formatter, and the facts as this machine reports them.
#include "hugepage/refusal.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <typeinfo>
#include <utility>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/detail/refusal_facts.hpp"
#include "hugepage/format_bytes.hpp"
#include "support.hpp"

namespace {

using hugepage::format_bytes;
using hugepage::hugetlb_refusal;
using hugepage::page_size;
using hugepage::refusal_cause;
using hugepage::refusal_stage;
using hugepage::units::gib;
using hugepage::units::kib;
using hugepage::units::mib;

std::error_code errc(int value) { return {value, std::generic_category()}; }
std::string text_of(int value) { return std::strerror(value); }

hugepage::hugetlb_pool pool_of(std::size_t page_bytes, std::uint64_t total, std::uint64_t free,
                               std::uint64_t reserved) {
  hugepage::hugetlb_pool pool;
  pool.page_bytes = page_bytes;
  pool.total = total;
  pool.free = free;
  pool.reserved = reserved;
  pool.surplus = 0;
  pool.overcommit = 0;
  return pool;
}

// A refused reservation of `pages` 2 MiB pages on a machine with 16 GiB, a 2 MiB default size,
// no cgroup limit, no RLIMIT_AS, and a pool of `total` pages with `free` free and none reserved.
hugetlb_refusal refused(std::uint64_t pages, std::uint64_t total, std::uint64_t free,
                        page_size size = page_size::huge_2m) {
  hugetlb_refusal f;
  f.stage = refusal_stage::reserve;
  f.size = size;
  f.pages = pages;
  f.error = errc(ENOMEM);
  f.pool = pool_of(hugepage::bytes_of(size), total, free, 0);
  f.cgroup.readable = true;
  f.address_space_used = 64 * mib;
  f.physical_memory = 16 * gib;
  f.default_page_bytes = 2 * mib;
  return f;
}

hugetlb_refusal fault_refused(std::uint64_t pages, int error) {
  hugetlb_refusal f = refused(pages, 100, 100);
  f.stage = refusal_stage::fault;
  f.error = errc(error);
  return f;
}

hugepage::cgroup_limit limit_of(const std::string& file, std::uint64_t limit, std::uint64_t usage) {
  hugepage::cgroup_limit l;
  l.file = file;
  l.limit = limit;
  l.usage = usage;
  return l;
}

const std::string k2mShort =
    "hugepage: hugetlb mmap of 32 pages of 2 MiB (64 MiB) failed: " + text_of(ENOMEM);

// ---- the byte formatter ------------------------------------------------------------------------

TEST(FormatBytes, ExactMultiplesWithoutDecimalsOthersWithOneOrTwo) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(kib), "1 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(2 * mib), "2 MiB");
  EXPECT_EQ(format_bytes(8 * mib), "8 MiB");
  EXPECT_EQ(format_bytes(68640 * kib), "67.0 MiB");
  EXPECT_EQ(format_bytes(3 * mib + mib / 2), "3.5 MiB");
  EXPECT_EQ(format_bytes(gib), "1 GiB");
  EXPECT_EQ(format_bytes(gib + gib / 2), "1.50 GiB");
  EXPECT_EQ(format_bytes(gib - 1), "1024.0 MiB");
  EXPECT_EQ(format_bytes(std::uint64_t{6} << 60), "6442450944 GiB");
}

// ---- the pool command --------------------------------------------------------------------------

TEST(PoolResizeCommand, SysctlOnlyForTheDefaultSizeSysfsForEverySize) {
  using hugepage::pool_resize_command;
  EXPECT_EQ(pool_resize_command(2 * mib, 750, 2 * mib), "sysctl -w vm.nr_hugepages=750");
  EXPECT_EQ(pool_resize_command(gib, 4, 2 * mib),
            "echo 4 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages");
  // Booted with default_hugepagesz=1G: vm.nr_hugepages sizes the 1 GiB pool, not the 2 MiB one.
  EXPECT_EQ(pool_resize_command(2 * mib, 3, gib),
            "echo 3 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  EXPECT_EQ(pool_resize_command(gib, 3, gib), "sysctl -w vm.nr_hugepages=3");
  // No default size given (the doctor, which pairs it with a sysctl.d or tmpfiles.d line).
  EXPECT_EQ(pool_resize_command(2 * mib, 750),
            "echo 750 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  EXPECT_EQ(pool_resize_command(64 * kib, 8),
            "echo 8 > /sys/kernel/mm/hugepages/hugepages-64kB/nr_hugepages");
  EXPECT_EQ(pool_resize_command(0, 8, 0),
            "echo 8 > /sys/kernel/mm/hugepages/hugepages-0kB/nr_hugepages");
}

TEST(DefaultHugePageSize, ParsedFromMeminfoText) {
  using hugepage::detail::parse_default_huge_page_bytes;
  EXPECT_EQ(parse_default_huge_page_bytes("MemTotal:       16314980 kB\n"
                                          "HugePages_Total:    1100\n"
                                          "Hugepagesize:       2048 kB\n"
                                          "Hugetlb:         4349952 kB\n"),
            2 * mib);
  EXPECT_EQ(parse_default_huge_page_bytes("Hugepagesize:    1048576 kB\n"), gib);
  EXPECT_EQ(parse_default_huge_page_bytes("XHugepagesize:  64 kB\nHugepagesize:  2048 kB\n"),
            2 * mib)
      << "only a line that starts with the key";
  EXPECT_EQ(parse_default_huge_page_bytes("MemTotal: 1 kB\nHugetlb: 0 kB\n"), 0u);
  EXPECT_EQ(parse_default_huge_page_bytes(""), 0u);
}

// ---- the cause and its words, one cause at a time ----------------------------------------------

TEST(Explain, ShortPoolNamesTheFiguresAndTheSysctlForTheDefaultSize) {
  const hugetlb_refusal f = refused(32, 0, 0);
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 0 available (free 0, "
                            "reserved 0, total 0); reserve enough with: sysctl -w "
                            "vm.nr_hugepages=32");
}

TEST(Explain, ShortPoolCountsReservedPagesAsTaken) {
  hugetlb_refusal f = refused(32, 100, 40);
  f.pool->reserved = 20;  // 20 of the 40 free pages are promised: 20 available
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 20 available (free 40, "
                            "reserved 20, total 100); reserve enough with: sysctl -w "
                            "vm.nr_hugepages=112");
}

TEST(Explain, ShortPoolOfAnotherSizeNamesItsSysfsFile) {
  const hugetlb_refusal f = refused(3, 2, 1, page_size::huge_1g);
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 3 pages of 1 GiB (3 GiB) failed: " + text_of(ENOMEM) +
                ": pool exhausted: asked for 3 x 1 GiB, 1 available (free 1, reserved "
                "0, total 2); reserve enough with: echo 4 > "
                "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages");
}

TEST(Explain, ShortPoolWhereTheDefaultSizeIsUnknownNamesTheSysfsFile) {
  hugetlb_refusal f = refused(32, 0, 0);
  f.default_page_bytes = 0;
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 0 available (free 0, "
                            "reserved 0, total 0); reserve enough with: echo 32 > "
                            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
}

TEST(Explain, OvercommitRoomIsShownWhereItCountsAsAvailable) {
  hugetlb_refusal f = refused(32, 10, 10);
  f.pool->overcommit = 16;
  f.pool->surplus = 4;  // 12 more may be overcommitted: 22 available
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 22 available (free 10, "
                            "reserved 0, total 10, surplus 4 of overcommit 16); reserve enough "
                            "with: sysctl -w vm.nr_hugepages=20");
}

TEST(Explain, RefilledPoolSaysConcurrentUseAndSizesForThePeak) {
  const hugetlb_refusal f = refused(32, 100, 40);
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled);
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 40 available (free 40, "
                            "reserved 0, total 100); it was short when the kernel refused and is "
                            "in concurrent use: size it for the peak, e.g. sysctl -w "
                            "vm.nr_hugepages=132");
}

// The pool of `size` on `node`: `total` pages, `free` free.
hugepage::hugetlb_pool node_pool_of(int node, std::uint64_t total, std::uint64_t free,
                                    page_size size = page_size::huge_2m) {
  hugepage::hugetlb_pool pool = pool_of(hugepage::bytes_of(size), total, free, 0);
  pool.node = node;
  pool.reserved.reset();
  pool.overcommit.reset();
  return pool;
}

TEST(Explain, ACpusetWhoseNodesAreShortNamesThemAndTheirPoolsNotTheSysctl) {
  // Mems_allowed 0 of nodes 0 and 1: node 0's pool is empty, node 1 holds all 128 free pages.
  hugetlb_refusal f = refused(32, 128, 128);
  f.cpuset_nodes = hugepage::node_set{0};
  f.node_pools = {node_pool_of(0, 0, 0), node_pool_of(1, 128, 128)};
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled) << "the retry decision is the pool's";
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 128 available (free 128, "
                            "reserved 0, total 128); this process's cpuset allows node 0 only "
                            "(Mems_allowed), whose pool has 0 free: the 128 free on node 1 cannot "
                            "serve this process. Reserve more on node 0: echo 32 > "
                            "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/"
                            "nr_hugepages, or widen the cpuset (cpuset.mems)");
  // The pool short everywhere: the advice is still the allowed node's pool.
  f.pool = pool_of(2 * mib, 12, 12, 0);
  f.node_pools = {node_pool_of(0, 8, 8), node_pool_of(1, 4, 4)};
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
  EXPECT_EQ(explain(f), k2mShort +
                            ": pool exhausted: asked for 32 x 2 MiB, 12 available (free 12, "
                            "reserved 0, total 12); this process's cpuset allows node 0 only "
                            "(Mems_allowed), whose pool has 8 free: the 4 free on node 1 cannot "
                            "serve this process. Reserve more on node 0: echo 32 > "
                            "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/"
                            "nr_hugepages, or widen the cpuset (cpuset.mems)");
}

TEST(Explain, ACpusetOfSeveralNodesNamesEachOnesFreePages) {
  hugetlb_refusal f = refused(2, 3, 3, page_size::huge_1g);
  f.cpuset_nodes = hugepage::node_set{0, 2};
  f.node_pools = {
      node_pool_of(0, 1, 0, page_size::huge_1g), node_pool_of(1, 1, 1, page_size::huge_1g),
      node_pool_of(2, 1, 1, page_size::huge_1g), node_pool_of(3, 1, 1, page_size::huge_1g)};
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 2 pages of 1 GiB (2 GiB) failed: " + text_of(ENOMEM) +
                ": pool exhausted: asked for 2 x 1 GiB, 3 available (free 3, reserved 0, total "
                "3); this process's cpuset allows nodes 0,2 (Mems_allowed), whose pools have 1 "
                "free (node 0: 0, node 2: 1): the 2 free on nodes 1,3 cannot serve this process. "
                "Reserve more on node 0: echo 2 > "
                "/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages (or "
                "another allowed node's), or widen the cpuset (cpuset.mems)");
}

TEST(Explain, ACpusetWhoseNodesHaveRoomLeavesTheWordsAsTheyWere) {
  hugetlb_refusal f = refused(32, 100, 40);
  const std::string plain = explain(f);
  f.cpuset_nodes = hugepage::node_set{0};
  f.node_pools = {node_pool_of(0, 50, 32), node_pool_of(1, 50, 8)};
  EXPECT_EQ(explain(f), plain);
}

TEST(Explain, AFaultRefusedInACpusetWhoseNodesAreShortSaysSo) {
  hugetlb_refusal f = fault_refused(4, ENOMEM);
  f.cpuset_nodes = hugepage::node_set{1};
  f.node_pools = {node_pool_of(0, 100, 100), node_pool_of(1, 2, 2)};
  EXPECT_EQ(cause_of(f), refusal_cause::fault_elsewhere);
  EXPECT_EQ(explain(f),
            "hugepage: faulting in 4 hugetlb pages of 2 MiB (8 MiB) failed: " + text_of(ENOMEM) +
                "; this process's cpuset allows node 1 only (Mems_allowed), whose pool has 2 "
                "free: the 100 free on node 0 cannot serve this process. Reserve more on node 1: "
                "echo 4 > /sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages,"
                " or widen the cpuset (cpuset.mems)");
}

TEST(Explain, BeyondMemoryGivesNoCommand) {
  hugetlb_refusal f = refused(9000, 100, 40);  // 9000 x 2 MiB > 16 GiB
  EXPECT_EQ(cause_of(f), refusal_cause::beyond_memory);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 9000 pages of 2 MiB (17.58 GiB) failed: " + text_of(ENOMEM) +
                ": pool exhausted: asked for 9000 x 2 MiB, 40 available (free 40, "
                "reserved 0, total 100); no pool can hold that: pools should take at most "
                "12.80 GiB (80%) of this machine's 16 GiB");
  f.physical_memory = 0;  // unknown: the command, however large
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
}

// A pool that fits in memory on its own, but not beside the other size's pool: no command that
// would pin memory the machine needs. 6000 x 2 MiB (11.7 GiB) fits under 12.8 GiB, not beside
// 4 GiB of 1 GiB pages.
TEST(Explain, BeyondMemoryCountsThePoolsOfOtherSizes) {
  hugetlb_refusal f = refused(6000, 0, 0);
  EXPECT_EQ(cause_of(f), refusal_cause::pool_short);
  f.other_pools_bytes = 4 * gib;
  EXPECT_EQ(cause_of(f), refusal_cause::beyond_memory);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 6000 pages of 2 MiB (11.72 GiB) failed: " + text_of(ENOMEM) +
                ": pool exhausted: asked for 6000 x 2 MiB, 0 available (free 0, "
                "reserved 0, total 0); no pool can hold that: pools should take at most "
                "12.80 GiB (80%) of this machine's 16 GiB, of which other pools hold 4 GiB");
  EXPECT_EQ(hugepage::pool_memory_cap(10 * gib), 8 * gib);
}

// ENOMEM at vm.max_map_count is no pool shortage: no retry, no pool command.
TEST(Explain, MappingCountLimitIsNotBlamedOnThePool) {
  hugetlb_refusal f = refused(2, 1100, 1100);
  f.mappings = 65529;
  f.max_mappings = 65530;
  EXPECT_EQ(cause_of(f), refusal_cause::mapping_count_limit);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 2 pages of 2 MiB (4 MiB) failed: " + text_of(ENOMEM) +
                "; the process has 65529 mappings and vm.max_map_count is 65530: no "
                "room for another mapping, whatever the pool holds");
  f.mappings = 100;
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled);
  f.max_mappings = 0;  // unknown
  f.mappings = 70000;
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled);
}

// An aligned reservation maps the alignment more than the block: RLIMIT_AS counts that too.
TEST(Explain, AddressSpaceLimitCountsTheAlignedReservation) {
  hugetlb_refusal f = refused(8, 100, 100);  // 16 MiB
  f.address_space_limit = 64 * mib + 32 * mib;
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled);
  f.address_space_needed = 16 * mib + 64 * mib;  // aligned to 64 MiB
  EXPECT_EQ(cause_of(f), refusal_cause::address_space_limit);
}

TEST(Explain, NoPoolOfThatSize) {
  hugetlb_refusal f = refused(1, 0, 0, page_size::huge_1g);
  f.pool.reset();
  EXPECT_EQ(cause_of(f), refusal_cause::no_pool);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 1 page of 1 GiB (1 GiB) failed: " + text_of(ENOMEM) +
                "; this kernel has no 1 GiB hugetlb pool (CONFIG_HUGETLBFS, or a CPU "
                "without 1 GiB pages)");
}

TEST(Explain, AnErrnoOtherThanEnomemIsTheCallRefusedAsItIs) {
  hugetlb_refusal f = refused(32, 0, 0);
  f.error = errc(EINVAL);
  EXPECT_EQ(cause_of(f), refusal_cause::call_refused);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 32 pages of 2 MiB (64 MiB) failed: " + text_of(EINVAL));
}

TEST(Explain, ReservationLimitNamesTheFileAndTheRoomLeft) {
  hugetlb_refusal f = refused(4, 100, 100);
  f.cgroup.tightest = limit_of("/sys/fs/cgroup/app/hugetlb.2MB.rsvd.max", 4 * mib, 0);
  EXPECT_EQ(cause_of(f), refusal_cause::cgroup_limit);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 4 pages of 2 MiB (8 MiB) failed: " + text_of(ENOMEM) +
                ": hugetlb cgroup limit: /sys/fs/cgroup/app/hugetlb.2MB.rsvd.max = 4 "
                "MiB, 0 B charged, room for 2 of the 4 pages asked; raise the limit or "
                "ask for less");
  f.cgroup.tightest->limit = 8 * mib;  // room for all four: not the limit
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled);
}

TEST(Explain, ReservationLimitOfOnePageIsSingular) {
  hugetlb_refusal f = refused(1, 100, 100);
  f.cgroup.tightest = limit_of("/sys/fs/cgroup/app/hugetlb.2MB.rsvd.max", 2 * mib, 2 * mib);
  EXPECT_EQ(cause_of(f), refusal_cause::cgroup_limit);
  EXPECT_EQ(explain(f),
            "hugepage: hugetlb mmap of 1 page of 2 MiB (2 MiB) failed: " + text_of(ENOMEM) +
                ": hugetlb cgroup limit: /sys/fs/cgroup/app/hugetlb.2MB.rsvd.max = 2 "
                "MiB, 2 MiB charged, room for 0 of the 1 page asked; raise the limit or "
                "ask for less");
}

TEST(Explain, AddressSpaceLimit) {
  hugetlb_refusal f = refused(32, 100, 100);
  f.address_space_limit = 128 * mib;  // 64 MiB used + 64 MiB asked: fits exactly
  EXPECT_EQ(cause_of(f), refusal_cause::pool_refilled);
  f.address_space_used += 1;
  EXPECT_EQ(cause_of(f), refusal_cause::address_space_limit);
  EXPECT_EQ(explain(f),
            k2mShort + "; the address-space limit (RLIMIT_AS, ulimit -v) leaves no room for it");
}

// An anonymous mapping refused: the same two process limits, in the same words, and the errno
// alone where neither explains it (the commit limit, a seccomp filter).
TEST(Explain, MappingRefusalNamesTheProcessLimit) {
  hugepage::mapping_refusal f;
  f.call = "hugepage: mmap of 1 GiB for transparent huge pages failed";
  f.error = errc(ENOMEM);
  f.address_space_needed = gib + 2 * mib - 4 * kib;
  f.address_space_limit = 1200 * mib;
  f.address_space_used = 80 * mib;
  f.mappings = 200;
  f.max_mappings = 65530;
  EXPECT_EQ(cause_of(f), refusal_cause::call_refused);  // 80 MiB + 1 GiB + 2 MiB fit in 1200
  EXPECT_EQ(explain(f), f.call + ": " + text_of(ENOMEM));
  f.address_space_used = 200 * mib;
  EXPECT_EQ(cause_of(f), refusal_cause::address_space_limit);
  EXPECT_EQ(explain(f),
            f.call + ": " + text_of(ENOMEM) +
                "; the address-space limit (RLIMIT_AS, ulimit -v) leaves no room for it");
  f.address_space_used = 2 * gib;  // past the limit already: no wrap in the sum
  f.address_space_needed = UINT64_MAX;
  EXPECT_EQ(cause_of(f), refusal_cause::address_space_limit);
  f.address_space_limit.reset();
  f.mappings = 65529;
  EXPECT_EQ(cause_of(f), refusal_cause::mapping_count_limit);
  EXPECT_EQ(explain(f), f.call + ": " + text_of(ENOMEM) +
                            "; the process has 65529 mappings and vm.max_map_count is 65530: no "
                            "room for another mapping");
  f.error = errc(EPERM);
  EXPECT_EQ(cause_of(f), refusal_cause::call_refused);
  EXPECT_EQ(explain(f), f.call + ": " + text_of(EPERM));
}

// Each cause is decided only where the ones before it do not apply (the list in refusal.hpp).
TEST(CauseOf, DecidesInTheDocumentedOrder) {
  hugetlb_refusal f = refused(32, 0, 0);  // short pool...
  f.address_space_limit = 32 * mib;       // ...and no address space...
  EXPECT_EQ(cause_of(f), refusal_cause::address_space_limit);
  f.cgroup.tightest = limit_of("/x/hugetlb.2MB.rsvd.max", 0, 0);  // ...and a limit...
  EXPECT_EQ(cause_of(f), refusal_cause::cgroup_limit);
  f.error = errc(EPERM);  // ...and an errno that is not about pages
  EXPECT_EQ(cause_of(f), refusal_cause::call_refused);
  f.pool.reset();
  EXPECT_EQ(cause_of(f), refusal_cause::no_pool);
}

TEST(Explain, FaultRefusedByACallErrnoIsNotBlamedOnPages) {
  hugetlb_refusal f = fault_refused(4, EPERM);
  f.pool.reset();  // the pool plays no part once pages were reserved
  f.cgroup.tightest = limit_of("/x/hugetlb.2MB.max", 0, 0);
  EXPECT_EQ(cause_of(f), refusal_cause::call_refused);
  EXPECT_EQ(explain(f),
            "hugepage: faulting in 4 hugetlb pages of 2 MiB (8 MiB) failed: " + text_of(EPERM) +
                ": the kernel refused the pre-fault itself, not for want of pages");
}

TEST(Explain, FaultRefusedByTheFaultTimeLimit) {
  hugetlb_refusal f = fault_refused(4, EFAULT);
  f.cgroup.tightest = limit_of("/sys/fs/cgroup/app/hugetlb.2MB.max", 4 * mib, 0);
  EXPECT_EQ(cause_of(f), refusal_cause::cgroup_limit);
  EXPECT_EQ(explain(f),
            "hugepage: faulting in 4 hugetlb pages of 2 MiB (8 MiB) failed: " + text_of(EFAULT) +
                ": hugetlb cgroup limit: /sys/fs/cgroup/app/hugetlb.2MB.max = 4 MiB, "
                "0 B charged, room for 2 of the 4 pages asked; raise the limit or ask "
                "for less");
}

TEST(Explain, FaultRefusedWithNoLimitToBlame) {
  hugetlb_refusal f = fault_refused(1, ENOMEM);
  f.cgroup.tightest = limit_of("/x/hugetlb.2MB.max", 4 * mib, 0);  // room enough
  f.address_space_limit = 0;  // RLIMIT_AS is checked at mmap, not at fault
  EXPECT_EQ(cause_of(f), refusal_cause::fault_elsewhere);
  EXPECT_EQ(explain(f),
            "hugepage: faulting in 1 hugetlb page of 2 MiB (2 MiB) failed: " + text_of(ENOMEM) +
                "; no hugetlb cgroup limit explains it: the pool ran short on the "
                "NUMA nodes this process may use (cpuset, memory policy), or other "
                "processes took the pages");
}

TEST(Explain, FaultRefusedWhereTheCgroupHierarchyCannotBeRead) {
  hugetlb_refusal f = fault_refused(2, EFAULT);
  f.size = page_size::huge_1g;
  f.cgroup.readable = false;
  EXPECT_EQ(cause_of(f), refusal_cause::limit_unseen);
  EXPECT_EQ(explain(f),
            "hugepage: faulting in 2 hugetlb pages of 1 GiB (2 GiB) failed: " + text_of(EFAULT) +
                "; a hugetlb cgroup limit (hugetlb.1GB.max) may apply, but this "
                "process cannot read its cgroup hierarchy");
}

// The message states the cause the decision took, and no other: each cause has its own words.
TEST(Explain, WordsTheCauseTheDecisionTookAndNoOther) {
  const std::vector<std::pair<refusal_cause, const char*>> words = {
      {refusal_cause::no_pool, "hugetlb pool (CONFIG_HUGETLBFS"},
      {refusal_cause::cgroup_limit, ": hugetlb cgroup limit: "},
      {refusal_cause::address_space_limit, "RLIMIT_AS"},
      {refusal_cause::mapping_count_limit, "vm.max_map_count"},
      {refusal_cause::pool_refilled, "in concurrent use"},
      {refusal_cause::beyond_memory, "no pool can hold that"},
      {refusal_cause::pool_short, "reserve enough with"},
      {refusal_cause::fault_elsewhere, "no hugetlb cgroup limit explains it"},
      {refusal_cause::limit_unseen, "cannot read its cgroup hierarchy"},
  };
  std::vector<hugetlb_refusal> all;
  for (const std::uint64_t pages : {1u, 32u, 9000u}) {
    for (const std::uint64_t free : {0u, 40u}) {
      for (const int error : {ENOMEM, EFAULT, EPERM}) {
        for (int variant = 0; variant < 10; ++variant) {
          hugetlb_refusal f = variant & 4 ? fault_refused(pages, error) : refused(pages, 100, free);
          f.error = errc(error);
          if (variant & 1) f.cgroup.tightest = limit_of("/x/hugetlb.2MB.max", 2 * mib, 0);
          if (variant & 2) f.address_space_limit = 128 * mib;
          if (variant == 3) f.pool.reset();
          if (variant == 5) f.cgroup.readable = false;
          if (variant >= 8) f.mappings = f.max_mappings = 10;
          all.push_back(f);
        }
      }
    }
  }
  for (const hugetlb_refusal& f : all) {
    const refusal_cause cause = cause_of(f);
    const std::string what = explain(f);
    for (const auto& [other, phrase] : words) {
      EXPECT_EQ(what.find(phrase) != std::string::npos, other == cause)
          << name_of(cause) << " worded as: " << what;
    }
  }
}

// ---- the exception thrown for the facts --------------------------------------------------------

template <class Exception>
Exception thrown_for(const hugetlb_refusal& f) {
  try {
    hugepage::detail::throw_refusal(f);
  } catch (const Exception& e) {
    EXPECT_EQ(typeid(e), typeid(Exception)) << "exactly " << typeid(Exception).name();
    EXPECT_EQ(std::string(e.what()), explain(f));
    EXPECT_EQ(e.code(), f.error);
    return e;
  }
  ADD_FAILURE() << "nothing thrown";
  return Exception(std::string(), {}, page_size::huge_2m, 0, 0);
}

TEST(ThrowRefusal, ShortOrRefilledPoolIsPoolExhaustedWithWhatIsAvailable) {
  hugetlb_refusal f = refused(32, 100, 40);
  f.pool->reserved = 30;
  const hugepage::pool_exhausted e = thrown_for<hugepage::pool_exhausted>(f);
  EXPECT_EQ(e.size(), page_size::huge_2m);
  EXPECT_EQ(e.pages_requested(), 32u);
  EXPECT_EQ(e.pages_available(), 10u);
  const hugepage::pool_exhausted refilled = thrown_for<hugepage::pool_exhausted>(refused(3, 4, 4));
  EXPECT_EQ(refilled.pages_available(), 4u);
  const hugepage::pool_exhausted beyond =
      thrown_for<hugepage::pool_exhausted>(refused(9000, 100, 40));
  EXPECT_EQ(beyond.pages_requested(), 9000u);
  EXPECT_EQ(beyond.pages_available(), 40u);
}

TEST(ThrowRefusal, ACpusetWhoseNodesAreShortIsPoolExhaustedWithTheirFreePagesAsAvailable) {
  hugetlb_refusal f = refused(32, 128, 128);
  f.cpuset_nodes = hugepage::node_set{0};
  f.node_pools = {node_pool_of(0, 3, 3), node_pool_of(1, 125, 125)};
  const hugepage::pool_exhausted e = thrown_for<hugepage::pool_exhausted>(f);
  EXPECT_EQ(e.pages_requested(), 32u);
  EXPECT_EQ(e.pages_available(), 3u);
}

TEST(ThrowRefusal, CgroupLimitIsHugetlbLimitExceededWithTheRoomLeftAsAvailable) {
  hugetlb_refusal f = fault_refused(4, EFAULT);
  f.size = page_size::huge_1g;
  f.cgroup.tightest = limit_of("/sys/fs/cgroup/app/hugetlb.1GB.max", 3 * gib, gib);
  try {
    hugepage::detail::throw_refusal(f);
  } catch (const hugepage::hugetlb_limit_exceeded& e) {
    EXPECT_EQ(typeid(e), typeid(hugepage::hugetlb_limit_exceeded));
    EXPECT_EQ(std::string(e.what()), explain(f));
    EXPECT_EQ(e.code(), std::errc::bad_address);
    EXPECT_EQ(e.size(), page_size::huge_1g);
    EXPECT_EQ(e.pages_requested(), 4u);
    EXPECT_EQ(e.pages_available(), 2u);
    EXPECT_EQ(e.file(), "/sys/fs/cgroup/app/hugetlb.1GB.max");
    EXPECT_EQ(e.limit_bytes(), 3 * gib);
    EXPECT_EQ(e.usage_bytes(), gib);
    return;
  }
  FAIL() << "nothing thrown";
}

TEST(ThrowRefusal, EveryOtherCauseIsAnAllocationError) {
  hugetlb_refusal no_pool = refused(1, 0, 0);
  no_pool.pool.reset();
  hugetlb_refusal call = refused(1, 0, 0);
  call.error = errc(EINVAL);
  hugetlb_refusal address_space = refused(32, 100, 100);
  address_space.address_space_limit = 64 * mib;
  hugetlb_refusal unseen = fault_refused(1, EFAULT);
  unseen.cgroup.readable = false;
  hugetlb_refusal mappings = refused(2, 100, 100);
  mappings.mappings = mappings.max_mappings = 65530;
  for (const hugetlb_refusal& f : {no_pool, call, address_space, fault_refused(1, ENOMEM),
                                   fault_refused(1, EINVAL), unseen, mappings}) {
    try {
      hugepage::detail::throw_refusal(f);
    } catch (const hugepage::allocation_error& e) {
      EXPECT_EQ(typeid(e), typeid(hugepage::allocation_error)) << name_of(cause_of(f));
      EXPECT_EQ(std::string(e.what()), explain(f));
      EXPECT_EQ(e.code(), f.error);
      continue;
    }
    ADD_FAILURE() << "nothing thrown for " << name_of(cause_of(f));
  }
}

TEST(ThrowMemoryLimitExceeded, NamesTheFileAndWhatTheKernelWouldDo) {
  hugepage::cgroup_limit max =
      limit_of("/sys/fs/cgroup/memory/app/memory.limit_in_bytes", 96 * mib, 80 * mib);
  max.reclaimable = 2 * mib;
  try {
    hugepage::detail::throw_memory_limit_exceeded(20 * mib, max);
    FAIL() << "nothing thrown";
  } catch (const hugepage::memory_limit_exceeded& e) {
    EXPECT_EQ(std::string(e.what()),
              "hugepage: populating 20 MiB would pass the memory cgroup limit "
              "/sys/fs/cgroup/memory/app/memory.limit_in_bytes = 96 MiB (80 MiB charged, 2 MiB of "
              "it reclaimable file cache; headroom 18 MiB): the kernel would OOM-kill the process "
              "instead of failing");
    EXPECT_EQ(e.headroom_bytes(), 18 * mib);
    EXPECT_EQ(e.code(), std::errc::not_enough_memory);
  }
  const hugepage::cgroup_limit high = limit_of("/sys/fs/cgroup/app/memory.high", gib, gib);
  try {
    hugepage::detail::throw_memory_limit_exceeded(2 * mib, high);
    FAIL() << "nothing thrown";
  } catch (const hugepage::memory_limit_exceeded& e) {
    EXPECT_EQ(std::string(e.what()),
              "hugepage: populating 2 MiB would pass the memory cgroup limit "
              "/sys/fs/cgroup/app/memory.high = 1 GiB (1 GiB charged, 0 B of it reclaimable file "
              "cache; headroom 0 B): past memory.high the kernel throttles the process and "
              "reclaims hard");
  }
}

// ---- the facts as this machine reports them ----------------------------------------------------

// The default size read is the pool vm.nr_hugepages sizes: /proc/sys/vm/nr_hugepages and that
// pool's nr_hugepages are the same number.
TEST(ReadHugetlbRefusal, DefaultSizeIsThePoolThatVmNrHugepagesSizes) {
  const hugetlb_refusal f =
      hugepage::read_hugetlb_refusal(refusal_stage::reserve, page_size::huge_2m, 1, errc(ENOMEM));
  if (f.default_page_bytes == 0) HUGEPAGE_SKIP_OR_FAIL("no Hugepagesize in /proc/meminfo");
  const auto sysctl = hugepage::detail::read_u64("/proc/sys/vm/nr_hugepages");
  ASSERT_TRUE(sysctl.has_value());
  const auto pool = hugepage::read_pool(f.default_page_bytes);
  ASSERT_TRUE(pool && pool->total) << f.default_page_bytes;
  EXPECT_EQ(*pool->total, *sysctl);
}

TEST(ReadHugetlbRefusal, ReadsWhatWasAskedThePoolAndTheMachine) {
  const hugetlb_refusal f =
      hugepage::read_hugetlb_refusal(refusal_stage::fault, page_size::huge_1g, 3, errc(EFAULT));
  EXPECT_EQ(f.stage, refusal_stage::fault);
  EXPECT_EQ(f.size, page_size::huge_1g);
  EXPECT_EQ(f.pages, 3u);
  EXPECT_EQ(f.bytes(), 3 * gib);
  EXPECT_EQ(f.error, std::errc::bad_address);
  const auto pool = hugepage::read_pool(page_size::huge_1g);
  ASSERT_EQ(f.pool.has_value(), pool.has_value());
  if (pool) {
    EXPECT_EQ(f.pool->page_bytes, gib);
    EXPECT_EQ(f.pool->total, pool->total);  // nothing here resizes the pools
  }
  EXPECT_EQ(f.physical_memory, hugepage::physical_memory_bytes());
  EXPECT_GT(f.address_space_used, 0u);
  // A process whose cpuset holds every node with memory reads no node pools.
  const auto allowed = hugepage::numa::allowed_nodes();
  if (allowed && (hugepage::numa::memory_nodes().mask & ~allowed->mask) == 0) {
    EXPECT_TRUE(f.cpuset_nodes.empty()) << f.cpuset_nodes.text();
    EXPECT_TRUE(f.node_pools.empty());
  }
}

TEST(ReadHugetlbRefusal, ReadsTheAddressSpaceLimit) {
  const int code = hugepage::test::run_in_child([] {
    const auto used = hugepage::detail::address_space_used();
    const rlim_t limit = used + 256 * mib;
    const rlimit as{limit, RLIM_INFINITY};
    if (::setrlimit(RLIMIT_AS, &as) != 0) return 2;
    const hugetlb_refusal f =
        hugepage::read_hugetlb_refusal(refusal_stage::reserve, page_size::huge_2m, 1, errc(ENOMEM));
    if (f.address_space_limit != std::optional<std::uint64_t>(limit)) return 3;
    if (f.address_space_used == 0 || f.address_space_used > limit) return 4;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
  rlimit now{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &now), 0);
  const hugetlb_refusal here =
      hugepage::read_hugetlb_refusal(refusal_stage::reserve, page_size::huge_2m, 1, errc(ENOMEM));
  EXPECT_EQ(here.address_space_limit.has_value(), now.rlim_cur != RLIM_INFINITY);
}

// End to end: a strict allocator refused by RLIMIT_AS says so, from the facts it decided on.
TEST(StrictAllocator, RefusedByTheAddressSpaceLimitSaysSo) {
  if (!hugepage::read_pool(page_size::huge_2m)) HUGEPAGE_SKIP_OR_FAIL("no 2 MiB hugetlb pool");
  if (hugepage::test::under_asan()) {
    GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow memory: RLIMIT_AS cannot "
                    "express a limit that leaves the test room";
  }
  const int code = hugepage::test::run_in_child([] {
    const rlim_t limit = hugepage::detail::address_space_used() + 64 * mib;
    const rlimit as{limit, limit};
    if (::setrlimit(RLIMIT_AS, &as) != 0) return 2;
    hugepage::huge_page_allocator<char> allocator;
    try {
      (void)allocator.allocate(gib);
      return 3;
    } catch (const hugepage::allocation_error& e) {
      const std::string what = e.what();
      const std::string expected =
          "hugepage: hugetlb mmap of 512 pages of 2 MiB (1 GiB) failed: " + text_of(ENOMEM) +
          "; the address-space limit (RLIMIT_AS, ulimit -v) leaves no "
          "room for it";
      if (typeid(e) != typeid(hugepage::allocation_error) || what != expected) {
        std::fprintf(stderr, "child: %s: %s\n", typeid(e).name(), what.c_str());
        return 4;
      }
    }
    return hugepage::stats().live_mappings == 0 ? 0 : 5;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed";
}

}  // namespace
