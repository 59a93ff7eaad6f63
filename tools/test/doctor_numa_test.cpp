// The doctor's NUMA view: a process's memory per node against the nodes its threads may run on,
// the remote share of its largest mappings, and the advice (numactl, the library's placement, the
// per-node pool command). Hand-made files on any machine; a live process with a container bound
// to node 1 where there are two nodes (skips naming the reason with fewer, fails under
// HUGEPAGE_REQUIRE_NODES=2): the doctor's per-node figures are numa_maps', and the library's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_process.hpp"
#include "collect_process.hpp"
#include "collect_system.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/strategy.hpp"
#include "numa_files.hpp"
#include "numa_support.hpp"
#include "process_report.hpp"
#include "render_table.hpp"
#include "support.hpp"
#include "system_report.hpp"

namespace hd = hugepage::doctor;
using hugepage::units::mib;

namespace {

const hd::advice* find_advice(const std::vector<hd::advice>& list, const std::string& id) {
  for (const hd::advice& a : list) {
    if (a.id() == id) return &a;
  }
  return nullptr;
}

// A process with 64 MiB of THP at 0x7f0000000000, 48 MiB of it on node 1, whose threads may run
// on CPU 0 only (node 0).
hd::process_files remote_files() {
  hd::process_files f;
  f.smaps =
      "7f0000000000-7f0004000000 rw-p 00000000 00:00 0 \n"
      "Size:              65536 kB\n"
      "KernelPageSize:        4 kB\n"
      "MMUPageSize:           4 kB\n"
      "Rss:               65536 kB\n"
      "Anonymous:         65536 kB\n"
      "AnonHugePages:     65536 kB\n"
      "VmFlags: rd wr mr mw me ac hg \n";
  f.status = "Name:\tsvc\nCpus_allowed_list:\t0\nMems_allowed_list:\t0-1\n";
  f.numa_maps =
      "7f0000000000 default anon=16384 dirty=16384 N0=4096 N1=12288 kernelpagesize_kB=4\n";
  f.node_cpus = {{0, "0\n"}, {1, "1\n"}};
  return f;
}

TEST(DoctorNuma, IdListsAndNumaMapsPerMappingParse) {
  EXPECT_EQ(hd::parse_id_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(hd::parse_id_list(""), std::vector<int>{});
  const auto by = hd::parse_numa_maps_by_mapping(
      "7f0000000000 bind:1 anon=2 N1=2 kernelpagesize_kB=2048\n"
      "7f1000000000 default anon=3 N0=1 N1=2 kernelpagesize_kB=4\n"
      "7f2000000000 default file=/lib/x.so\n");
  ASSERT_EQ(by.size(), 2U);
  EXPECT_EQ(by.at(0x7f0000000000).at(1), 4 * mib);
  EXPECT_EQ(by.at(0x7f1000000000).at(0), 4096U);
  EXPECT_EQ(by.at(0x7f1000000000).at(1), 8192U);
}

TEST(DoctorNuma, RemoteMemoryIsMeasuredAgainstTheNodesTheThreadsRunOn) {
  const hd::process_report p = hd::build_process_report(4242, remote_files(), 10, "");
  ASSERT_TRUE(p.reach);
  EXPECT_EQ(p.reach->run_nodes, std::vector<int>{0});
  EXPECT_EQ(p.reach->cpus_allowed, "0");
  EXPECT_EQ(p.reach->mems_allowed, "0-1");
  EXPECT_EQ(p.reach->resident, 64 * mib);
  EXPECT_EQ(p.reach->remote, 48 * mib);
  ASSERT_EQ(p.reach->largest_nodes.size(), p.largest.size());
  ASSERT_FALSE(p.largest.empty());
  EXPECT_EQ(p.reach->largest_nodes[0].at(1), 48 * mib);

  hd::system_report s;
  const std::vector<hd::advice> advice = hd::advise_process(p, s);
  const hd::advice* remote = find_advice(advice, "numa_remote_memory");
  ASSERT_NE(remote, nullptr);
  EXPECT_NE(remote->message.find("75.0% of the process's resident memory (48 MiB) lies on "
                                 "node 1, where none of its threads may run"),
            std::string::npos)
      << remote->message;
  EXPECT_NE(remote->message.find("numactl --cpunodebind=0 --membind=0"), std::string::npos);
  EXPECT_NE(remote->message.find("hugepage::numa_placement::bind({0})"), std::string::npos);
  EXPECT_EQ(find_advice(advice, "numa_pool_wrong_node"), nullptr);  // no hugetlb pages

  const std::string text = hd::render_process(p, s, advice);
  EXPECT_NE(text.find("threads may run on CPUs 0 (node 0); memory allowed on nodes 0-1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("remote: 48 MiB of 64 MiB resident (75.0%)"), std::string::npos);
  EXPECT_NE(text.find("7f0000000000"), std::string::npos);
  EXPECT_NE(text.find("N0 16 MiB, N1 48 MiB"), std::string::npos) << text;
}

TEST(DoctorNuma, APoolReservedOnTheWrongNodeIsNamedWithThePerNodeCommand) {
  hd::process_report p;
  p.hugetlb[2 * mib] = 32 * mib;
  p.numa[1] = {32 * mib, 32 * mib};
  hd::numa_reach r;
  r.cpus_allowed = "0";
  r.run_nodes = {0};
  r.resident = r.remote = r.remote_hugetlb = 32 * mib;
  p.reach = r;
  hd::system_report s;
  hugepage::hugetlb_pool on0, on1;
  on0.page_bytes = on1.page_bytes = 2 * mib;
  on0.node = 0;
  on0.total = on0.free = 0;
  on1.node = 1;
  on1.total = 16;
  on1.free = 0;
  s.node_pools = {on0, on1};
  const std::vector<hd::advice> advice = hd::advise_process(p, s);
  const hd::advice* wrong = find_advice(advice, "numa_pool_wrong_node");
  ASSERT_NE(wrong, nullptr);
  EXPECT_NE(wrong->message.find("16 of the process's hugetlb pages (32 MiB) came from a pool "
                                "reserved on node 1, where it does not run; node 0's pool has 0 "
                                "pages (0 free)"),
            std::string::npos)
      << wrong->message;
  ASSERT_EQ(wrong->commands.size(), 1U);
  EXPECT_EQ(wrong->commands[0],
            "echo 16 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages");
  EXPECT_NE(wrong->trade.find("hugepagesz=2M hugepages=0:16"), std::string::npos);
}

TEST(DoctorNuma, OneNodeAddsNothing) {
  hd::process_files f = remote_files();
  f.numa_maps.reset();
  f.node_cpus.clear();
  f.numa_node = 0;
  const hd::process_report p = hd::build_process_report(4242, f, 10, "");
  EXPECT_FALSE(p.reach);
  hd::system_report s;
  const std::vector<hd::advice> advice = hd::advise_process(p, s);
  EXPECT_EQ(find_advice(advice, "numa_remote_memory"), nullptr);
  EXPECT_EQ(hd::render_process(p, s, advice).find("NUMA placement"), std::string::npos);
}

TEST(DoctorNumaTwoNodes, PerNodeFiguresAreNumaMapsAndTheLibrarys) {
  HUGEPAGE_REQUIRE_TWO_NODES();
  if (!hugepage::test::thp_usable()) HUGEPAGE_SKIP_OR_FAIL("THP is not usable here");
  constexpr std::size_t block = 32 * mib;
  const hugepage::strategy s =
      hugepage::strategy::collapse().placed(hugepage::numa_placement::bind({1}));
  void* p = s.allocate(block, 1);
  hd::collect_failure failure;
  const std::optional<hd::process_report> report = hd::collect_process(::getpid(), 10, failure);
  ASSERT_TRUE(report) << failure.message;
  ASSERT_TRUE(report->reach);
  const hugepage::backing_report lib = hugepage::backing_of(p, block);
  bool found = false;
  for (std::size_t i = 0; i < report->largest.size(); ++i) {
    if (report->largest[i].start != reinterpret_cast<std::uintptr_t>(p)) continue;
    found = true;
    const auto& nodes = report->reach->largest_nodes[i];
    const std::uint64_t on1 = nodes.count(1) != 0 ? nodes.at(1) : 0;
    EXPECT_EQ(on1, block);
    EXPECT_EQ(nodes.count(0), 0U);
    EXPECT_LE(on1 > lib.bytes_on_node(1) ? on1 - lib.bytes_on_node(1) : lib.bytes_on_node(1) - on1,
              2 * mib);
  }
  EXPECT_TRUE(found) << "the bound block is not among the largest mappings";
  EXPECT_GE(report->numa.at(1).bytes, block);
  // The system report's pools per node are the kernel's per-node files.
  const hd::system_report sys = hd::collect_system("", false);
  for (const hugepage::hugetlb_pool& pool : sys.node_pools) {
    if (pool.page_bytes != 2 * mib) continue;
    EXPECT_EQ(pool.total, hugepage::numa::read_node_pool(*pool.node, hugepage::page_size::huge_2m,
                                                         "nr_hugepages"));
  }
  ASSERT_TRUE(sys.zones);
  EXPECT_TRUE(std::any_of(sys.zones->begin(), sys.zones->end(),
                          [](const hd::zone_readiness& z) { return z.node == 1; }));
  s.deallocate(p, block, 1);
}

}  // namespace
