// tools/test/doctor_advise_process_test.cpp - each process advice rule (allocators, runtimes,
// memory classes, pools), from a hand-made state.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "advice.hpp"
#include "advise_process.hpp"
#include "allocator_settings.hpp"
#include "doctor_advise_support.hpp"
#include "mapping_summary.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "system_report.hpp"
#include "text.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

TEST(DoctorAdvice, GlibcTunableOnlyWhereGlibcHasIt) {
  auto list = advise_process(big_process("glibc", {}, "2.36"), healthy_system());
  EXPECT_EQ(only(list, "glibc_without_hugetlb_tunable").commands,
            std::vector<std::string>{"export GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});
  list = advise_process(big_process("glibc", {}, "2.31"), healthy_system());
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  const advice old = only(list, "glibc_too_old_for_thp");
  EXPECT_EQ(old.level(), advice_level::note);
  // What reaches a program that cannot be changed comes first: --collapse and enabled=always.
  EXPECT_EQ(old.commands, std::vector<std::string>{collapse_command});
  EXPECT_NE(old.message.find("THP enabled=always (machine-wide) reaches it"), std::string::npos)
      << old.message;
  EXPECT_NE(old.message.find("hugepage-doctor --pid PID --collapse raises it now"),
            std::string::npos)
      << old.message;
}

TEST(DoctorAdvice, MimallocNameForItsVersion) {
  // 2.0 reads only MIMALLOC_LARGE_OS_PAGES; 2.1 renamed it and reads both.
  auto list = advise_process(big_process("mimalloc", {}, "2.0"), healthy_system());
  EXPECT_EQ(only(list, "mimalloc_without_large_pages").commands,
            std::vector<std::string>{"export MIMALLOC_LARGE_OS_PAGES=1"});
  list = advise_process(big_process("mimalloc", {}, "2.1"), healthy_system());
  EXPECT_EQ(only(list, "mimalloc_without_large_pages").commands,
            std::vector<std::string>{"export MIMALLOC_ALLOW_LARGE_OS_PAGES=1"});
  // The 2.1 name set on a 2.0 library does nothing: still advised, with the 2.0 name.
  const process_report p = big_process("mimalloc", {{"MIMALLOC_ALLOW_LARGE_OS_PAGES", "1"}}, "2.0");
  EXPECT_FALSE(p.allocator.asks_for_huge);
  list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "mimalloc_without_large_pages").commands,
            std::vector<std::string>{"export MIMALLOC_LARGE_OS_PAGES=1"});
  EXPECT_TRUE(big_process("mimalloc", {{"MIMALLOC_ALLOW_LARGE_OS_PAGES", "1"}}, "2.1")
                  .allocator.asks_for_huge);
}

TEST(DoctorAdvice, TcmallocIsANoteWithoutAMachineWideCommand) {
  const auto list = advise_process(big_process("tcmalloc"), healthy_system());
  const advice& a = only(list, "tcmalloc_without_thp");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_TRUE(a.commands.empty());
}

// A program linked against musl: no setting of its own, and neither GLIBC_TUNABLES nor a
// glibc-built allocator reaches its heap; THP always and a collapse do.
TEST(DoctorAdvice, MuslIsANoteThatOffersNoGlibcSetting) {
  process_report p = big_process("musl", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}});
  EXPECT_FALSE(p.allocator.asks_for_huge);
  EXPECT_EQ(p.allocator.hugepage_mode, "none (musl's malloc has no huge page setting)");
  p = process_with(p, usage(memory_class::allocator_arenas, 1 * gib));
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "musl_without_thp");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_NE(a.message.find("musl's malloc has no huge page setting, GLIBC_TUNABLES means "
                           "nothing to it"),
            std::string::npos)
      << a.message;
  EXPECT_NE(a.message.find("THP enabled=always (machine-wide) reaches it"), std::string::npos)
      << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{"hugepage-doctor --pid 4242 --collapse"});
  EXPECT_EQ(a.reaches, std::vector<std::string>{"allocator_arenas"});
  EXPECT_EQ(find(list, "allocator_linked_in"), std::nullopt) << ids(list);
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  EXPECT_EQ(all_commands(list).find("LD_PRELOAD"), std::string::npos);
}

TEST(DoctorAdvice, AllocatorAsksButKernelDidNotDeliver) {
  process_report p = big_process("jemalloc", {{"MALLOC_CONF", "thp:always"}});
  p.thp_eligible_anon = 10 * gib;
  system_report s = healthy_system();
  // No fragmentation, no fallbacks: nothing to run (sparse memory, or not faulted yet).
  auto list = advise_process(p, s);
  EXPECT_EQ(find(list, "jemalloc_without_thp"), std::nullopt);
  EXPECT_EQ(find(list, "huge_pages_not_obtained"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("compact_memory"), std::string::npos);
  // Both: compaction, citing them.
  s.zones = std::vector<zone_readiness>{{0, "Normal", 3 * gib, 64 * mib, 32}};
  s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  list = advise_process(p, s);
  EXPECT_EQ(only(list, "huge_pages_not_obtained").commands,
            std::vector<std::string>{"echo 1 > /proc/sys/vm/compact_memory"});
}

TEST(DoctorAdvice, JvmHeapIsNotBlamedOnGlibc) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0-Xmx12g\0Main", 17), {});
  ASSERT_EQ(p.runtime.kind, "jvm");
  EXPECT_EQ(p.runtime.version, "17");
  system_report s = healthy_system();
  s.zones = std::vector<zone_readiness>{{0, "Normal", 3 * gib, 64 * mib, 32}};
  auto list = advise_process(p, s);
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("compact_memory"), std::string::npos);
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  EXPECT_EQ(only(list, "jvm_without_thp").commands,
            std::vector<std::string>{"export JAVA_TOOL_OPTIONS=-XX:+UseTransparentHugePages"});
  // The flag in JAVA_TOOL_OPTIONS: the JVM asks; no advice to add it.
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0Main", 9),
                             {{"JAVA_TOOL_OPTIONS", "-Xmx1g -XX:+UseTransparentHugePages"}});
  EXPECT_TRUE(p.runtime.asks_for_huge);
  EXPECT_EQ(find(advise_process(p, healthy_system()), "jvm_without_thp"), std::nullopt);
  // A later -XX:- on the command line wins.
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0-XX:-UseTransparentHugePages\0Main", 39),
                             {{"JAVA_TOOL_OPTIONS", "-XX:+UseTransparentHugePages"}});
  EXPECT_FALSE(p.runtime.asks_for_huge);
}

TEST(DoctorAdvice, RedisChoiceIsANote) {
  process_report p = big_process("jemalloc");
  p.thp_enabled = false;
  p.runtime = detect_runtime({"/usr/bin/redis-check-rdb"}, "", {});
  ASSERT_EQ(p.runtime.kind, "redis");
  p.allocator = describe_allocator({"jemalloc", "", ""}, true, {}, true);
  const auto list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "redis_disables_thp").level(), advice_level::note);
  EXPECT_EQ(find(list, "process_thp_disabled"), std::nullopt) << ids(list);
  EXPECT_FALSE(has_warning(list)) << ids(list);
}

TEST(DoctorAdvice, OverwrittenEnvironmentIsUnknownNotNone) {
  process_report p = big_process("jemalloc");
  p.allocator = describe_allocator({"jemalloc", "/usr/lib/libjemalloc.so.2", ""}, true, {}, true);
  EXPECT_NE(p.allocator.hugepage_mode.find("unknown"), std::string::npos);
  const auto list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "jemalloc_without_thp"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "allocator_settings_unknown").level(), advice_level::note);
}

TEST(DoctorAdvice, PostgresSharedBuffersNeedAPool) {
  process_report p;
  p.pid = 77;
  p.name = "postgres";
  p.shmem = 14 * mib;  // barely touched yet: the mapping's size counts
  p.largest_shared = 148 * mib;
  p.rss = 30 * mib;
  p.largest.push_back(
      {0x7f0000000000, 148 * mib, 140 * mib, 0, 4096, "/dev/zero (deleted)", "", true, {}, 1});
  p.runtime = detect_runtime({"/usr/lib/postgresql/15/bin/postgres"}, "", {});
  ASSERT_EQ(p.runtime.kind, "postgres");
  EXPECT_EQ(p.runtime.version, "15");
  system_report s = healthy_system();
  s.pools[0].total = 10;
  s.pools[0].free = 10;
  const auto list = advise_process(p, s);
  const advice& a = only(list, "postgres_huge_pages");
  EXPECT_NE(a.message.find("huge_pages = on"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("at least 74 pages of 2 MiB"), std::string::npos) << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=74");
  // Already on the pool: nothing.
  p.hugetlb[2 * mib] = 148 * mib;
  EXPECT_EQ(find(advise_process(p, s), "postgres_huge_pages"), std::nullopt);
}

TEST(DoctorAdvice, FractionsStayInTheirClass) {
  // tmpfs huge=always: shmem THP must not land in the anonymous numerator.
  std::vector<mapping_info> maps(2);
  maps[0].start = 0x1000000;
  maps[0].end = 0x1000000 + 64 * mib;
  maps[0].permissions = "rw-s";
  maps[0].name = "/dev/shm/big";
  maps[0].rss = 64 * mib;
  maps[0].shmem_huge = 64 * mib;
  maps[0].kernel_page_bytes = 4096;
  maps[1].start = 0x9000000;
  maps[1].end = 0x9000000 + 4096;
  maps[1].permissions = "rw-p";
  maps[1].rss = 4096;
  maps[1].anonymous = 4096;
  maps[1].kernel_page_bytes = 4096;
  const process_report p = summarize_mappings(maps, 10);
  EXPECT_EQ(p.thp, 0u);
  EXPECT_EQ(p.shmem, 64 * mib);
  EXPECT_EQ(p.shmem_huge, 64 * mib);
  EXPECT_DOUBLE_EQ(p.huge_fraction(), 0.0);
  EXPECT_DOUBLE_EQ(p.shmem_huge_fraction(), 1.0);
  EXPECT_LE(process_report::share(5, 3), 1.0);
  ASSERT_EQ(p.largest.size(), 2u);
  EXPECT_TRUE(p.largest[0].shared);
}

TEST(DoctorAdvice, SharedMemoryFollowsShmemEnabled) {
  process_report p;
  p.pid = 9;
  p.shmem = 2 * gib;
  p.dev_shm = 2 * gib;
  p.rss = 2 * gib;
  system_report s = healthy_system();  // shmem_enabled never
  auto list = advise_process(p, s);
  const advice a = only(list, "shmem_without_thp");
  EXPECT_EQ(a.commands.at(0), "echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled");
  ASSERT_EQ(a.commands.size(), 4u);  // the last one: the fstab line (DevShmOptionPersists...)
  EXPECT_EQ(a.commands.at(2), "mount -o remount,huge=within_size /dev/shm");
  s.thp.shmem_enabled = "advise";
  EXPECT_EQ(find(advise_process(p, s), "shmem_without_thp"), std::nullopt);
  s.thp.shmem_enabled = "never";
  p.shmem_huge = 2 * gib;  // already huge (tmpfs huge=always)
  EXPECT_EQ(find(advise_process(p, s), "shmem_without_thp"), std::nullopt);
}

TEST(DoctorAdvice, ProcessDisabledThpOrSystemNever) {
  process_report p = big_process("glibc");
  p.thp_enabled = false;
  const auto list = advise_process(p, healthy_system());
  EXPECT_TRUE(only(list, "process_thp_disabled").commands.empty());
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

TEST(DoctorAdvice, ProcessOnAPoolInUseOrShort) {
  process_report p = big_process("glibc");
  p.anonymous = 64 * mib;
  p.hugetlb[2 * mib] = 1200 * mib;
  system_report s = healthy_system();
  s.pools[0].free = 0;
  EXPECT_EQ(find(advise_process(p, s), "pool_exhausted"), std::nullopt);  // exactly used
  s.pools[0].overcommit = 4;
  s.pools[0].surplus = 4;
  const auto list = advise_process(p, s);
  const advice& a = only(list, "pool_exhausted");
  EXPECT_NE(a.message.find("holds 1.17 GiB"), std::string::npos) << a.message;
}

}  // namespace
}  // namespace hugepage::doctor
