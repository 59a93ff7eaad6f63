// tools/test/doctor_advice_test.cpp - each advice rule, from a hand-made system or process state.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>

#include "report.hpp"

namespace hugepage::doctor {
namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t gib = std::size_t{1} << 30;

// A machine with nothing to advise: THP madvise, conservative khugepaged, a pool with room,
// unfragmented memory, no THP fallbacks, no cgroup limits.
system_report healthy_system() {
  system_report s;
  s.kernel_release = "6.8.0-test";
  s.thp.enabled = "madvise";
  s.thp.defrag = "madvise";
  s.thp.shmem_enabled = "never";
  s.thp.max_ptes_none = 64;
  hugetlb_pool pool;
  pool.page_bytes = 2 * mib;
  pool.total = 600;
  pool.free = 500;
  pool.reserved = 0;
  pool.surplus = 0;
  pool.overcommit = 0;
  s.pools.push_back(pool);
  s.zones = std::vector<zone_readiness>{{0, "Normal", 4 * gib, 3 * gib, 1536}};
  s.vmstat = {{"thp_fault_alloc", 10000}, {"thp_fault_fallback", 10}};
  s.vmstat_readable = true;
  s.collapse = collapse_support::works;
  return s;
}

// A copy, so that find(advise_system(s), ...) does not point into a destroyed temporary.
std::optional<advice> find(const std::vector<advice>& list, const std::string& id) {
  const auto it =
      std::find_if(list.begin(), list.end(), [&](const advice& a) { return a.id == id; });
  if (it == list.end()) return std::nullopt;
  return *it;
}

std::string ids(const std::vector<advice>& list) {
  std::string out;
  for (const auto& a : list) out += a.id + " ";
  return out;
}

TEST(DoctorAdvice, HealthySystemGetsNone) {
  const auto advice = advise_system(healthy_system());
  EXPECT_TRUE(advice.empty()) << ids(advice);
}

TEST(DoctorAdvice, ThpNever) {
  system_report s = healthy_system();
  s.thp.enabled = "never";
  const auto advice = advise_system(s);
  const auto a = find(advice, "thp_never");
  ASSERT_NE(a, std::nullopt) << ids(advice);
  EXPECT_EQ(a->command, "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled");
  // With THP off, khugepaged bloat is moot.
  s.thp.max_ptes_none = 511;
  EXPECT_EQ(find(advise_system(s), "max_ptes_none_bloat"), std::nullopt);
}

TEST(DoctorAdvice, MaxPtesNoneDefaultInvitesBloat) {
  system_report s = healthy_system();
  s.thp.max_ptes_none = 511;
  const auto a = find(advise_system(s), "max_ptes_none_bloat");
  ASSERT_NE(a, std::nullopt);
  EXPECT_NE(a->message.find("only 1 base page is used"), std::string::npos) << a->message;
  EXPECT_NE(a->message.find("512x"), std::string::npos) << a->message;
  EXPECT_EQ(a->command, "echo 64 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none");
  s.thp.max_ptes_none = 255;  // below half: at least 257 of 512 pages used
  EXPECT_EQ(find(advise_system(s), "max_ptes_none_bloat"), std::nullopt);
}

TEST(DoctorAdvice, DefragSettings) {
  system_report s = healthy_system();
  s.thp.enabled = "always";
  s.thp.defrag = "always";
  const auto stall = find(advise_system(s), "defrag_always_stalls");
  ASSERT_NE(stall, std::nullopt);
  EXPECT_NE(stall->command.find("defer+madvise"), std::string::npos);
  s.thp.enabled = "madvise";
  s.thp.defrag = "never";
  ASSERT_NE(find(advise_system(s), "defrag_never"), std::nullopt);
}

TEST(DoctorAdvice, EmptyPoolWithHugetlbUsage) {
  system_report s = healthy_system();
  s.pools[0].free = 40;
  s.pools[0].reserved = 40;  // all free pages promised to mappings
  const auto a = find(advise_system(s), "pool_exhausted");
  ASSERT_NE(a, std::nullopt);
  EXPECT_EQ(a->command, "echo 750 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages");
  // A pool that was never reserved is not "exhausted": not everyone wants one.
  s.pools[0].total = 0;
  s.pools[0].free = 0;
  s.pools[0].reserved = 0;
  EXPECT_EQ(find(advise_system(s), "pool_exhausted"), std::nullopt);
}

TEST(DoctorAdvice, FragmentedBuddyinfo) {
  system_report s = healthy_system();
  s.zones = std::vector<zone_readiness>{{0, "DMA", 15 * mib, 14 * mib, 7},
                                        {0, "Normal", 3 * gib, 64 * mib, 32}};
  const auto a = find(advise_system(s), "fragmented");
  ASSERT_NE(a, std::nullopt);
  EXPECT_EQ(a->command, "echo 1 > /proc/sys/vm/compact_memory");
  // Little free memory is not fragmentation.
  s.zones = std::vector<zone_readiness>{{0, "Normal", 100 * mib, 0, 0}};
  EXPECT_EQ(find(advise_system(s), "fragmented"), std::nullopt);
  // Unknown buddyinfo: no rule fires.
  s.zones.reset();
  EXPECT_EQ(find(advise_system(s), "fragmented"), std::nullopt);
}

TEST(DoctorAdvice, ThpFaultFallbacks) {
  system_report s = healthy_system();
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  const auto a = find(advise_system(s), "thp_fault_fallback");
  ASSERT_NE(a, std::nullopt);
  EXPECT_NE(a->message.find("28.6%"), std::string::npos) << a->message;
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
  const auto advice = advise_system(s);
  const auto below = find(advice, "cgroup_limit_below_pool");
  ASSERT_NE(below, std::nullopt) << ids(advice);
  EXPECT_EQ(below->command, "echo max > /sys/fs/cgroup/app.slice/hugetlb.2MB.max");
  const auto at_fault = find(advice, "cgroup_limit_at_fault");
  ASSERT_NE(at_fault, std::nullopt);
  EXPECT_EQ(at_fault->command, "echo 268435456 > /sys/fs/cgroup/app.slice/hugetlb.2MB.rsvd.max");
}

// ---- process rules -----------------------------------------------------------------------------

process_report big_process(const std::string& allocator,
                           std::vector<std::pair<std::string, std::string>> environment = {}) {
  process_report p;
  p.pid = 4242;
  p.name = "fared";
  p.anonymous = 11 * gib;
  p.rss = 11 * gib + 100 * mib;
  p.thp = 22 * mib;  // 0.2 %
  p.base = p.rss - p.thp;
  p.thp_enabled = true;
  p.allocator =
      describe_allocator({allocator, "/lib/lib" + allocator + ".so"}, true, std::move(environment));
  return p;
}

TEST(DoctorAdvice, JemallocWithoutThp) {
  const auto advice = advise_process(big_process("jemalloc"), healthy_system());
  const auto a = find(advice, "jemalloc_without_thp");
  ASSERT_NE(a, std::nullopt) << ids(advice);
  EXPECT_EQ(a->message.rfind("11 GiB anonymous memory, 0.2% huge; THP is madvise and jemalloc "
                             "runs without thp",
                             0),
            0u)
      << a->message;
  EXPECT_EQ(a->command, "MALLOC_CONF=thp:always,metadata_thp:auto fared");
}

TEST(DoctorAdvice, GlibcAndMimallocWithoutHugePages) {
  const auto glibc = advise_process(big_process("glibc"), healthy_system());
  const auto g = find(glibc, "glibc_without_hugetlb_tunable");
  ASSERT_NE(g, std::nullopt) << ids(glibc);
  EXPECT_EQ(g->command, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 fared");
  const auto mi = advise_process(big_process("mimalloc"), healthy_system());
  ASSERT_NE(find(mi, "mimalloc_without_large_pages"), std::nullopt) << ids(mi);
  const auto tc = advise_process(big_process("tcmalloc"), healthy_system());
  ASSERT_NE(find(tc, "allocator_without_thp"), std::nullopt) << ids(tc);
}

TEST(DoctorAdvice, AllocatorAsksButKernelDidNotDeliver) {
  const auto advice =
      advise_process(big_process("jemalloc", {{"MALLOC_CONF", "thp:always"}}), healthy_system());
  EXPECT_EQ(find(advice, "jemalloc_without_thp"), std::nullopt);
  ASSERT_NE(find(advice, "huge_pages_not_obtained"), std::nullopt) << ids(advice);
}

TEST(DoctorAdvice, ProcessDisabledThpOrSystemNever) {
  process_report p = big_process("glibc");
  p.thp_enabled = false;
  ASSERT_NE(find(advise_process(p, healthy_system()), "process_thp_disabled"), std::nullopt);
  system_report never = healthy_system();
  never.thp.enabled = "never";
  ASSERT_NE(find(advise_process(big_process("glibc"), never), "thp_never"), std::nullopt);
}

TEST(DoctorAdvice, SmallOrWellCoveredProcessGetsNone) {
  process_report small = big_process("jemalloc");
  small.anonymous = 100 * mib;
  small.rss = 100 * mib;
  EXPECT_TRUE(advise_process(small, healthy_system()).empty());
  process_report covered = big_process("glibc");
  covered.thp = 10 * gib;
  EXPECT_TRUE(advise_process(covered, healthy_system()).empty());
}

TEST(DoctorAdvice, ProcessOnAnExhaustedPool) {
  process_report p = big_process("glibc");
  p.anonymous = 64 * mib;
  p.hugetlb[2 * mib] = 1200 * mib;
  system_report s = healthy_system();
  s.pools[0].free = 0;
  const auto advice = advise_process(p, s);
  const auto a = find(advice, "pool_exhausted");
  ASSERT_NE(a, std::nullopt) << ids(advice);
  EXPECT_NE(a->message.find("fared holds 1.17 GiB"), std::string::npos) << a->message;
}

}  // namespace
}  // namespace hugepage::doctor
