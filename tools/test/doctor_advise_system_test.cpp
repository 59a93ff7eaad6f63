// tools/test/doctor_advise_system_test.cpp - each system advice rule, from a hand-made state.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "advice.hpp"
#include "advise_system.hpp"
#include "doctor_advise_support.hpp"
#include "format.hpp"
#include "hugepage/refusal.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

TEST(DoctorAdvice, HealthySystemGetsNone) {
  const auto list = advise_system(healthy_system());
  EXPECT_TRUE(list.empty()) << ids(list);
}

TEST(DoctorAdvice, StockSystemIsHealthy) {
  // Exit 0 must be reachable on a machine nobody tuned: the stock max_ptes_none and a fully
  // used, exactly sized pool are notes, not warnings.
  for (const char* enabled : {"always", "madvise"}) {
    const auto list = advise_system(stock_system(enabled));
    EXPECT_FALSE(has_warning(list)) << enabled << ": " << ids(list);
    EXPECT_EQ(only(list, "max_ptes_none").level(), advice_level::note);
    EXPECT_EQ(only(list, "pool_in_use").level(), advice_level::note);
    EXPECT_TRUE(only(list, "pool_in_use").commands.empty());
    EXPECT_EQ(find(list, "pool_exhausted"), std::nullopt) << ids(list);
  }
}

TEST(DoctorAdvice, ThpNever) {
  system_report s = healthy_system();
  s.thp.enabled = "never";
  const auto list = advise_system(s);
  const advice& a = only(list, "thp_never");
  EXPECT_EQ(a.level(), advice_level::warning);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_EQ(a.commands[0], "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled");
  EXPECT_EQ(a.commands[1],
            "printf '%s\\n' 'w /sys/kernel/mm/transparent_hugepage/enabled - - - - madvise' > "
            "/etc/tmpfiles.d/hugepage-doctor-enabled.conf");
  EXPECT_TRUE(has_warning(list));
}

TEST(DoctorAdvice, MaxPtesNoneIsANoteWithItsEvidence) {
  system_report s = healthy_system();
  s.thp.max_ptes_none = 511;
  s.vmstat["thp_underused_split_page"] = 0;
  const auto list = advise_system(s);
  const advice& a = only(list, "max_ptes_none");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_NE(a.message.find("up to 512x"), std::string::npos) << a.message;
  ASSERT_EQ(a.evidence.size(), 2u);
  EXPECT_EQ(a.evidence[0], "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none: 511");
  EXPECT_NE(a.evidence[1].find("split underused THPs"), std::string::npos);
  ASSERT_FALSE(a.commands.empty());
  EXPECT_EQ(a.commands[0],
            "echo 64 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none");
  EXPECT_FALSE(has_warning(list));
}

TEST(DoctorAdvice, DefragSettings) {
  system_report s = healthy_system();
  s.thp.enabled = "always";
  s.thp.defrag = "always";
  const auto stall = find(advise_system(s), "defrag_always_stalls");
  ASSERT_NE(stall, std::nullopt);
  EXPECT_EQ(stall->commands.at(0),
            "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag");
  s.thp.enabled = "madvise";
  s.thp.defrag = "never";
  ASSERT_NE(find(advise_system(s), "defrag_never"), std::nullopt);
}

TEST(DoctorAdvice, ExhaustedOnlyWhenSomethingWantedMore) {
  system_report s = healthy_system();
  s.pools[0].free = 40;
  s.pools[0].reserved = 40;  // all free pages promised to mappings: in use, not short
  auto list = advise_system(s);
  EXPECT_EQ(find(list, "pool_exhausted"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "pool_in_use").level(), advice_level::note);
  // Reservations beyond the free pages: something wanted more.
  s.pools[0].reserved = 41;
  list = advise_system(s);
  const advice& a = only(list, "pool_exhausted");
  EXPECT_EQ(a.level(), advice_level::warning);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_EQ(a.commands[0], "sysctl -w vm.nr_hugepages=750");
  EXPECT_EQ(a.commands[1],
            "printf '%s\\n' 'vm.nr_hugepages = 750' > "
            "/etc/sysctl.d/90-hugepage-doctor-nr_hugepages.conf");
  // Surplus pages at the overcommit limit, with failed buddy allocations.
  s.pools[0].reserved = 0;
  s.pools[0].free = 0;
  s.pools[0].overcommit = 10;
  s.pools[0].surplus = 10;
  s.vmstat["htlb_buddy_alloc_fail"] = 3;
  EXPECT_EQ(only(advise_system(s), "pool_exhausted").evidence.size(), 3u);
  // A cgroup limit that refused (v2 hugetlb.2MB.events "max 2") also shows demand.
  s.vmstat.erase("htlb_buddy_alloc_fail");
  s.pools[0].surplus = 0;
  s.pools[0].overcommit = 0;
  EXPECT_EQ(find(advise_system(s), "pool_exhausted"), std::nullopt);
  hugetlb_limit limit;
  limit.page_bytes = 2 * mib;
  limit.version = "v2";
  limit.directory = "/sys/fs/cgroup/app.slice";
  limit.refused = 2;
  s.cgroup.limits.push_back(limit);
  const advice refused = only(advise_system(s), "pool_exhausted");
  EXPECT_EQ(refused.evidence.back(),
            "hugetlb cgroup /sys/fs/cgroup/app.slice refused 2 times (events max 2)");
  // A pool that was never reserved is not "exhausted": not everyone wants one.
  s.pools[0].total = 0;
  s.pools[0].free = 0;
  EXPECT_EQ(find(advise_system(s), "pool_exhausted"), std::nullopt);
}

// The default pool is sized with sysctl, as the library's refusal messages say; another size
// through its sysfs file. Which is the default comes from Hugepagesize.
TEST(DoctorAdvice, PoolCommandsAsTheLibraryPrintsThem) {
  system_report s = healthy_system();
  hugetlb_pool gigantic;
  gigantic.page_bytes = gib;
  gigantic.total = 2;
  gigantic.free = 0;
  gigantic.reserved = 1;
  gigantic.surplus = 0;
  gigantic.overcommit = 0;
  s.pools.push_back(gigantic);
  s.pools[0].free = 0;
  s.pools[0].reserved = 1;
  auto pool_advice = [&](std::size_t page_bytes) {
    for (const advice& a : advise_system(s)) {
      if (a.id() == "pool_exhausted" &&
          a.message.find(format_bytes(page_bytes)) != std::string::npos)
        return a.commands;
    }
    return std::vector<std::string>{};
  };
  EXPECT_EQ(pool_advice(2 * mib),
            (std::vector<std::string>{pool_resize_command(2 * mib, 750, 2 * mib),
                                      "printf '%s\\n' 'vm.nr_hugepages = 750' > "
                                      "/etc/sysctl.d/90-hugepage-doctor-nr_hugepages.conf"}));
  EXPECT_EQ(pool_advice(2 * mib).at(0), "sysctl -w vm.nr_hugepages=750");
  EXPECT_EQ(pool_advice(gib).at(0),
            "echo 3 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages");
  // Booted with default_hugepagesz=1G: vm.nr_hugepages sizes the 1 GiB pool.
  s.meminfo["Hugepagesize"] = gib;
  EXPECT_EQ(pool_advice(gib).at(0), "sysctl -w vm.nr_hugepages=3");
  EXPECT_EQ(pool_advice(2 * mib).at(0),
            "echo 750 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
}

TEST(DoctorAdvice, PoolAdviceCappedByPhysicalMemory) {
  system_report s = healthy_system();
  s.meminfo["MemTotal"] = 2 * gib;  // 80%: 819 pages of 2 MiB
  s.pools[0].total = 800;
  s.pools[0].free = 0;
  s.pools[0].reserved = 1;
  EXPECT_EQ(only(advise_system(s), "pool_exhausted").commands.at(0),
            "sysctl -w vm.nr_hugepages=819");
  s.pools[0].total = 900;  // already past the cap: no command, the cost says why
  const advice a = only(advise_system(s), "pool_exhausted");
  EXPECT_TRUE(a.commands.empty()) << all_commands({a});
  EXPECT_NE(a.trade.find("80% of MemTotal"), std::string::npos);
}

// The cap holds all pools together: a 1 GiB pool leaves the 2 MiB pool 614 MiB of the 1.6 GiB.
TEST(DoctorAdvice, PoolAdviceCapCountsThePoolsOfOtherSizes) {
  system_report s = healthy_system();
  s.meminfo["MemTotal"] = 2 * gib;
  s.pools[0].total = 200;
  s.pools[0].free = 0;
  s.pools[0].reserved = 1;
  EXPECT_FALSE(only(advise_system(s), "pool_exhausted").commands.empty());
  hugetlb_pool giant;
  giant.page_bytes = gib;
  giant.total = 1;
  giant.free = 1;
  s.pools.push_back(giant);
  s.pools[0].total = 400;  // 800 MiB: past the 614 MiB left beside the 1 GiB pool
  const advice a = only(advise_system(s), "pool_exhausted");
  EXPECT_TRUE(a.commands.empty()) << all_commands({a});
}

// A pool nothing faulted in or reserved: a note with the bytes and the command that shrinks it
// (now and at boot), a warning from 10% of MemTotal.
TEST(DoctorAdvice, IdlePoolIsFlaggedWithTheCommandThatShrinksIt) {
  system_report s = healthy_system();  // 32 GiB
  s.pools[0].total = 600;
  s.pools[0].free = 600;
  auto list = advise_system(s);
  const advice a = only(list, "pool_idle");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_FALSE(has_warning(list)) << ids(list);
  EXPECT_EQ(a.message,
            "the 2 MiB hugetlb pool holds 1.17 GiB (600 pages) that no process uses (none "
            "faulted in, none reserved): memory nothing else can use");
  EXPECT_EQ(a.evidence,
            (std::vector<std::string>{
                "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages: nr_hugepages 600, free "
                "600, reserved 0, surplus 0",
                "MemTotal 32 GiB (/proc/meminfo): the pool holds 3.7% of it"}));
  EXPECT_NE(a.trade.find("PostgreSQL huge_pages=on, MariaDB large_pages) would find it empty"),
            std::string::npos)
      << a.trade;
  EXPECT_EQ(a.commands,
            (std::vector<std::string>{pool_resize_command(2 * mib, 0, 2 * mib),
                                      "printf '%s\\n' 'vm.nr_hugepages = 0' > "
                                      "/etc/sysctl.d/90-hugepage-doctor-nr_hugepages.conf"}));
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=0");
  // 10% of MemTotal and more: a warning.
  s.pools[0].total = s.pools[0].free = 1639;  // 3.2 GiB of 32 GiB
  EXPECT_EQ(only(advise_system(s), "pool_idle").level(), advice_level::warning);
  s.pools[0].total = s.pools[0].free = 1638;
  EXPECT_EQ(only(advise_system(s), "pool_idle").level(), advice_level::note);
}

TEST(DoctorAdvice, IdlePoolsAreJudgedOnTheirTotal) {
  // A 2 MiB pool with 9.1% of MemTotal and a 1 GiB pool with 9.4%, each idle: 18.5% of RAM is
  // idle, a warning on each, though neither reaches 10% alone.
  system_report s = healthy_system();  // 32 GiB
  s.pools[0].total = s.pools[0].free = 1490;
  hugetlb_pool gig;
  gig.page_bytes = 1 * gib;
  gig.total = gig.free = 3;
  gig.reserved = gig.surplus = gig.overcommit = 0;
  s.pools.push_back(gig);
  auto list = advise_system(s);
  ASSERT_EQ(std::count_if(list.begin(), list.end(),
                          [](const advice& a) {
                            return a.id() == "pool_idle" && a.level() == advice_level::warning;
                          }),
            2)
      << ids(list);
  EXPECT_EQ(only(list, "pool_idle").evidence.back(),
            "idle in all pools together: 5.91 GiB, 18.5% of MemTotal");
  // One of them in use: the other alone, under 10%, is a note.
  s.pools[1].free = 2;
  list = advise_system(s);
  EXPECT_EQ(only(list, "pool_idle").level(), advice_level::note);
  EXPECT_FALSE(has_warning(list)) << ids(list);
}

TEST(DoctorAdvice, PoolInUseOrSmallIsNotIdle) {
  system_report s = healthy_system();  // 32 GiB
  s.pools[0].total = s.pools[0].free = 600;
  s.pools[0].reserved = 1;  // promised to a mapping: in use
  EXPECT_EQ(find(advise_system(s), "pool_idle"), std::nullopt);
  s.pools[0].reserved = 0;
  s.pools[0].free = 599;  // one page faulted in
  EXPECT_EQ(find(advise_system(s), "pool_idle"), std::nullopt);
  s.pools[0].free = 601;  // a surplus page exists only while something holds it
  s.pools[0].surplus = 1;
  s.pools[0].overcommit = 4;
  EXPECT_EQ(find(advise_system(s), "pool_idle"), std::nullopt);
  s.pools[0].surplus = 0;
  s.pools[0].overcommit = 0;
  // Small: below 512 MiB and below 5% of MemTotal.
  s.pools[0].total = s.pools[0].free = 255;
  EXPECT_EQ(find(advise_system(s), "pool_idle"), std::nullopt);
  s.pools[0].total = s.pools[0].free = 256;  // 512 MiB
  EXPECT_EQ(only(advise_system(s), "pool_idle").level(), advice_level::note);
  // On a 2 GiB machine 5% is enough (120 MiB), 10% a warning (210 MiB).
  s.meminfo["MemTotal"] = 2 * gib;
  s.pools[0].total = s.pools[0].free = 51;
  EXPECT_EQ(find(advise_system(s), "pool_idle"), std::nullopt);
  s.pools[0].total = s.pools[0].free = 60;
  EXPECT_EQ(only(advise_system(s), "pool_idle").level(), advice_level::note);
  s.pools[0].total = s.pools[0].free = 105;
  EXPECT_EQ(only(advise_system(s), "pool_idle").level(), advice_level::warning);
  // An empty pool holds nothing.
  s.pools[0].total = s.pools[0].free = 0;
  EXPECT_EQ(find(advise_system(s), "pool_idle"), std::nullopt);
}

TEST(DoctorAdvice, IdleGiganticPoolSaysItIsHardToGetBack) {
  system_report s = healthy_system();  // 32 GiB; its 2 MiB pool is in use
  hugetlb_pool gigantic;
  gigantic.page_bytes = gib;
  gigantic.total = 2;
  gigantic.free = 2;
  gigantic.reserved = 0;
  gigantic.surplus = 0;
  s.pools.push_back(gigantic);
  const advice a = only(advise_system(s), "pool_idle");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_NE(a.message.find("the 1 GiB hugetlb pool holds 2 GiB (2 pages)"), std::string::npos);
  EXPECT_NE(a.trade.find("1 GiB pages are rarely found again"), std::string::npos) << a.trade;
  EXPECT_EQ(a.commands,
            (std::vector<std::string>{
                "echo 0 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
                "printf '%s\\n' 'w /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages - "
                "- - - 0' > /etc/tmpfiles.d/hugepage-doctor-1048576kB-nr_hugepages.conf"}));
  gigantic.total = gigantic.free = 1;
  s.pools.back() = gigantic;
  EXPECT_NE(only(advise_system(s), "pool_idle").message.find("holds 1 GiB (1 page) that"),
            std::string::npos);
}

TEST(DoctorAdvice, CompactionOnlyWithFragmentationAndFallbacks) {
  system_report s = healthy_system();
  s.zones = std::vector<zone_readiness>{{0, "DMA", 15 * mib, 14 * mib, 7},
                                        {0, "Normal", 3 * gib, 64 * mib, 32}};
  // Fragmented, but faults do not fall back: a note, no command.
  auto list = advise_system(s);
  EXPECT_EQ(only(list, "fragmented").level(), advice_level::note);
  EXPECT_EQ(all_commands(list).find("compact_memory"), std::string::npos);
  // Fragmented and falling back: compaction, with both facts.
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  list = advise_system(s);
  const advice& a = only(list, "fragmented");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_EQ(a.commands, std::vector<std::string>{"echo 1 > /proc/sys/vm/compact_memory"});
  EXPECT_EQ(a.evidence.size(), 2u);
  // Little free memory is not fragmentation; unknown buddyinfo neither.
  s.zones = std::vector<zone_readiness>{{0, "Normal", 100 * mib, 0, 0}};
  EXPECT_EQ(find(advise_system(s), "fragmented"), std::nullopt);
  s.zones.reset();
  EXPECT_EQ(find(advise_system(s), "fragmented"), std::nullopt);
}

TEST(DoctorAdvice, ThpFaultFallbacks) {
  system_report s = healthy_system();
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  auto a = find(advise_system(s), "thp_fault_fallback");
  ASSERT_NE(a, std::nullopt);
  EXPECT_NE(a->message.find("28.6%"), std::string::npos) << a->message;
  EXPECT_EQ(a->level(), advice_level::note);  // memory not fragmented now: nothing to run
  EXPECT_TRUE(a->commands.empty());
  s.thp.defrag = "defer";
  a = find(advise_system(s), "thp_fault_fallback");
  ASSERT_NE(a, std::nullopt);
  EXPECT_EQ(a->level(), advice_level::warning);
  EXPECT_EQ(a->commands.at(0), "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag");
  s.vmstat = {{"thp_fault_alloc", 100000}, {"thp_fault_fallback", 400}};
  EXPECT_EQ(find(advise_system(s), "thp_fault_fallback"), std::nullopt);
}

TEST(DoctorAdvice, CgroupLimits) {
  system_report s = healthy_system();
  hugetlb_limit limit;
  limit.page_bytes = 2 * mib;
  limit.version = "v2";
  limit.directory = "/sys/fs/cgroup/app.slice";
  limit.has_max = true;
  limit.max = 256 * mib;  // pool is 1200 MiB
  limit.has_rsvd_max = true;
  limit.rsvd_max = std::nullopt;  // "max"
  s.cgroup.status = "v2";
  s.cgroup.limits.push_back(limit);
  const auto list = advise_system(s);
  EXPECT_EQ(only(list, "cgroup_limit_below_pool").commands.at(0),
            "echo max > /sys/fs/cgroup/app.slice/hugetlb.2MB.max");
  EXPECT_EQ(only(list, "cgroup_limit_at_fault").commands.at(0),
            "echo 268435456 > /sys/fs/cgroup/app.slice/hugetlb.2MB.rsvd.max");
}

// Whoever creates the doctor's cgroup names it: a directory with control or non-ASCII bytes
// enters no command, and the message says which file to write by hand.
TEST(DoctorAdvice, CgroupLimitsInAnUnprintableDirectory) {
  for (const std::string& directory :
       {std::string("/sys/fs/cgroup/ev\x1b[31m\xff.service"),
        std::string("/sys/fs/cgroup/\xc3\xa9t\xc3\xa9"), std::string("/sys/fs/cgroup/a\nb")}) {
    system_report s = healthy_system();
    hugetlb_limit limit;
    limit.page_bytes = 2 * mib;
    limit.version = "v2";
    limit.directory = directory;
    limit.has_max = true;
    limit.max = 256 * mib;  // pool is 1200 MiB
    limit.has_rsvd_max = true;
    limit.rsvd_max = std::nullopt;  // "max"
    s.cgroup.status = "v2";
    s.cgroup.limits.push_back(limit);
    const auto list = advise_system(s);
    const advice& below = only(list, "cgroup_limit_below_pool");
    EXPECT_TRUE(below.commands.empty()) << below.commands.at(0);
    EXPECT_EQ(below.message,
              "the hugetlb cgroup caps 2 MiB pages at 256 MiB, below the pool's 1.17 GiB: write "
              "max to its hugetlb.2MB.max by hand (the cgroup's path has control or non-ASCII "
              "bytes, which no printed command carries)");
    const advice& at_fault = only(list, "cgroup_limit_at_fault");
    EXPECT_TRUE(at_fault.commands.empty()) << at_fault.commands.at(0);
    EXPECT_EQ(at_fault.message,
              "the hugetlb cgroup limits 2 MiB pages at fault time only: a process over 256 MiB "
              "gets SIGBUS on first touch instead of ENOMEM from mmap: write 268435456 to its "
              "hugetlb.2MB.rsvd.max by hand (the cgroup's path has control or non-ASCII bytes, "
              "which no printed command carries)");
    EXPECT_EQ(advice_level::warning, below.level());
  }
}

TEST(DoctorAdvice, CpuWithout1GPages) {
  system_report s = healthy_system();
  s.cpu_1g_pages = false;
  const auto list = advise_system(s);
  EXPECT_EQ(only(list, "no_1g_pages").level(), advice_level::note);
  EXPECT_FALSE(has_warning(list));
  s.cpu_1g_pages = true;
  EXPECT_TRUE(advise_system(s).empty());
}

}  // namespace
}  // namespace hugepage::doctor
