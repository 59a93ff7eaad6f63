// tools/test/doctor_advise_reach_settings_test.cpp - advice by reach for the settings a process
// has or lacks (glibc's tunable, MariaDB's --large-pages, jemalloc, numpy, the JVM's flags, a
// PR_SET_THP_DISABLE and THP never): a setting in place that does not reach a class is a warning
// saying why, and no all-clear is given while a reachable class is on base pages. The table and
// the mechanisms by class: doctor_advise_reach_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "advise_process.hpp"
#include "advise_reach.hpp"
#include "allocator_settings.hpp"
#include "doctor_advise_support.hpp"
#include "process_environ.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "system_report.hpp"
#include "thp_disabler.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

process_report mariadb(thp_disabler who) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({"/usr/sbin/mariadbd"}, "", {});
  p.thp_enabled = false;
  p.thp_disabled_by = who;
  p.anonymous = 2200 * mib;
  p.thp = 0;
  p.rss = 2300 * mib;
  // The buffer pool: one private anonymous mapping of 2 GiB + 1 MiB.
  p.largest.push_back({0x7f0000000000, 2 * gib + 1 * mib, 2 * gib, 0, 4096, "", "", false, {}, 1});
  return p;
}

TEST(DoctorReach, MariadbThatDisablesThpGetsLargePagesAndThePoolItNeeds) {
  EXPECT_EQ(detect_runtime({"/usr/sbin/mysqld"}, "", {}).kind, "mariadb");
  process_report p = mariadb(thp_disabler::process);
  ASSERT_EQ(p.runtime.kind, "mariadb");
  const system_report s = healthy_system();  // 600 pages of 2 MiB, 500 free
  auto list = advise_process(p, s);
  const advice& a = only(list, "mariadb_large_pages");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "large_pages=ON")) << a.message;
  // 2 GiB + 1 MiB in 2 MiB pages: 1025; 500 free: 525 short.
  EXPECT_TRUE(mentions(a, "it needs 1025 pages of 2 MiB, the pool has 500 free, 525 short"))
      << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=1125");
  EXPECT_EQ(find(list, "process_thp_disabled"), std::nullopt) << ids(list);
  // A pool with room: the setting, no pool command.
  system_report roomy = s;
  roomy.pools[0].total = 2000;
  roomy.pools[0].free = 2000;
  const advice b = only(advise_process(p, roomy), "mariadb_large_pages");
  EXPECT_TRUE(mentions(b, "the pool has 2000 free, enough")) << b.message;
  EXPECT_TRUE(b.commands.empty());
  // The buffer pool already on hugetlb pages: nothing.
  const auto base_pool = p.largest;
  p.largest = {{0x7f0000000000,
                2 * gib + 2 * mib,
                2 * gib + 2 * mib,
                2 * gib + 2 * mib,
                2 * mib,
                "/anon_hugepage (deleted)",
                "",
                false,
                {},
                1}};
  p.hugetlb[2 * mib] = 2 * gib + 2 * mib;
  EXPECT_TRUE(advise_process(p, s).empty()) << ids(advise_process(p, s));
  p.largest = base_pool;
  p.hugetlb.clear();
  // Set by its launcher: the large pages, and who set it.
  EXPECT_TRUE(mentions(a, "MariaDB turned THP off for itself")) << a.message;
  list = advise_process(mariadb(thp_disabler::inherited), s);
  EXPECT_TRUE(mentions(only(list, "mariadb_large_pages"), "THP is off for MariaDB"));
  EXPECT_TRUE(mentions(only(list, "process_thp_disabled"), "launcher, systemd unit or shell"));
}

TEST(DoctorReach, ThpDisabledSaysWhoAndWhatItCosts) {
  process_report p = big_process("glibc", {}, "2.36");
  p.thp_enabled = false;
  p.thp_disabled_by = thp_disabler::inherited;
  p = process_with(p, usage(memory_class::glibc_thread_arenas, 4 * gib));
  p.thp_enabled = false;
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "process_thp_disabled");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(a.commands.empty());
  EXPECT_TRUE(mentions(a, "inherited across fork and exec")) << a.message;
  EXPECT_TRUE(mentions(a, "launcher, systemd unit or shell")) << a.message;
  EXPECT_TRUE(mentions(a, "every TLB miss on it pays a page walk")) << a.message;
  EXPECT_TRUE(mentions(a, "MADV_COLLAPSE (--collapse) refuses it too")) << a.message;
  // Nothing reaches it: no malloc advice, no --collapse.
  EXPECT_EQ(list.size(), 1u) << ids(list);
  // Off for it but not for its parent: the process, or a launcher that exec'd it.
  p.thp_disabled_by = thp_disabler::process;
  const advice own = only(advise_process(p, healthy_system()), "process_thp_disabled");
  EXPECT_TRUE(mentions(own,
                       "THP is off for the process (prctl(PR_SET_THP_DISABLE)) but not for "
                       "its parent: the process turned it off, or a launcher that exec'd "
                       "it did (the setting survives exec)"))
      << own.message;
  EXPECT_FALSE(mentions(own, "disabled THP for itself")) << own.message;
  // A parent that cannot tell (unreadable, or PID 1): says so.
  p.thp_disabled_by = thp_disabler::unknown;
  EXPECT_TRUE(mentions(only(advise_process(p, healthy_system()), "process_thp_disabled"),
                       "its parent cannot tell which (unreadable, or PID 1"));
}

// 300 MiB on base pages with THP off: under the advice threshold, yet no quiet all-clear: a note
// naming who disabled it and what it costs. Under the floor (200 MiB): nothing.
TEST(DoctorReach, ThpDisabledUnderTheThresholdIsANoteNotAnAllClear) {
  process_report p = big_process("glibc", {}, "2.36");
  p = process_with(p, usage(memory_class::anonymous_mmap, 300 * mib));
  p.thp_enabled = false;
  p.thp_disabled_by = thp_disabler::process;
  p.anonymous = 300 * mib;
  p.thp = 0;
  p.rss = 310 * mib;
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "process_thp_disabled");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_TRUE(mentions(a, "300 MiB anonymous memory, 0.0% huge")) << a.message;
  EXPECT_TRUE(mentions(a, "prctl(PR_SET_THP_DISABLE)")) << a.message;
  EXPECT_TRUE(mentions(a, "every TLB miss on it pays a page walk")) << a.message;
  p = process_with(p, usage(memory_class::anonymous_mmap, 200 * mib));
  p.thp_enabled = false;
  p.anonymous = 200 * mib;
  EXPECT_EQ(find(advise_process(p, healthy_system()), "process_thp_disabled"), std::nullopt);
}

TEST(DoctorReach, GlibcTunableMergedAndNamingTheClassItReaches) {
  process_report p = big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.arena_max=2"}}, "2.36");
  p = process_with(p, usage(memory_class::glibc_main_arena, 2 * gib, 4 * mib));
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "glibc_without_hugetlb_tunable");
  EXPECT_EQ(a.commands,
            std::vector<std::string>{
                "export GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"});
  EXPECT_TRUE(mentions(a, "; the setting reaches glibc's main arena (2 GiB)")) << a.message;
  EXPECT_EQ(a.reaches, std::vector<std::string>{"glibc_main_arena"});
  EXPECT_EQ(list.size(), 1u) << ids(list);
}

// glibc advises a thread arena's heap when it creates it (under 2 MiB) and never as it grows:
// glibc.malloc.hugetlb=1 leaves thread arenas on base pages. --collapse and THP always reach them.
TEST(DoctorReach, TunableDoesNotReachThreadArenas) {
  process_report p = process_with(big_process("glibc", {}, "2.36"),
                                  usage(memory_class::glibc_thread_arenas, 700 * mib));
  auto list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos) << all_commands(list);
  const advice note = only(list, "glibc_chunks_out_of_reach");
  EXPECT_EQ(note.level(), advice_level::note);
  EXPECT_TRUE(mentions(note,
                       "glibc.malloc.hugetlb=1 does not reach glibc's thread arenas: glibc "
                       "advises a thread arena's heap only when it creates it"))
      << note.message;
  EXPECT_TRUE(mentions(note,
                       "THP enabled=always (machine-wide) reaches it unless THP is disabled "
                       "for the process except where advised"))
      << note.message;
  EXPECT_TRUE(mentions(note,
                       "glibc.malloc.arena_max=1 moves every thread's allocations into "
                       "the main arena, which it does advise, at the price of lock "
                       "contention"))
      << note.message;
  EXPECT_EQ(note.commands, std::vector<std::string>{collapse_command});
  // The tunable set: it did not reach them, a warning with --collapse, no "faulted before".
  p = process_with(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36"),
                   usage(memory_class::glibc_thread_arenas, 700 * mib));
  list = advise_process(p, healthy_system());
  const advice warn = only(list, "glibc_tunable_does_not_reach");
  EXPECT_EQ(warn.level(), advice_level::warning);
  EXPECT_EQ(warn.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  // =2 maps a thread arena's whole heap from the hugetlb pool: that reaches them.
  p = process_with(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=2"}}, "2.36"),
                   usage(memory_class::glibc_thread_arenas, 700 * mib));
  list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "glibc_tunable_does_not_reach"), std::nullopt) << ids(list);
}

// A setting in place that advises MADV_HUGEPAGE, and none of the class is advised: the setting
// did not reach it (not "pages faulted before it took effect"). Advised and partly huge: the
// honest reasons, and a note from 40% huge (alignment permits no more for unaligned chunks).
TEST(DoctorReach, AdvisedBytesSayWhetherTheSettingReachedTheMemory) {
  const process_report tuned =
      big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36");
  auto list = advise_process(
      process_with(tuned, usage(memory_class::glibc_mmapped_chunks, 700 * mib, 0, 0, 0)),
      healthy_system());
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  const advice none = only(list, "setting_does_not_reach");
  EXPECT_EQ(none.level(), advice_level::warning);
  EXPECT_TRUE(mentions(none,
                       "glibc.malloc.hugetlb=1 (THP madvise) is set, but only 0 B of this "
                       "memory is advised MADV_HUGEPAGE: the setting does not reach the rest"))
      << none.message;
  EXPECT_EQ(none.evidence, std::vector<std::string>{"0 B of 700 MiB advised"});
  EXPECT_EQ(none.commands, std::vector<std::string>{collapse_command});
  for (const advice& a : list) EXPECT_FALSE(mentions(a, "faulted before")) << a.message;
  // 4 MiB chunks at 4 KiB offsets: 343 of 700 MiB huge, all advised: a note.
  list = advise_process(process_with(tuned, usage(memory_class::glibc_mmapped_chunks, 700 * mib,
                                                  343 * mib, 0, 700 * mib)),
                        healthy_system());
  const advice partly = only(list, "advised_but_not_huge");
  EXPECT_EQ(partly.level(), advice_level::note);
  EXPECT_FALSE(has_warning(list)) << ids(list);
  EXPECT_TRUE(mentions(partly, "is huge only in its whole 2 MiB-aligned parts")) << partly.message;
  EXPECT_FALSE(mentions(partly, "faulted before")) << partly.message;
  EXPECT_EQ(partly.evidence, std::vector<std::string>{"700 MiB of 700 MiB advised"});
  // Advised and barely huge: a warning, with the same reasons.
  list = advise_process(process_with(tuned, usage(memory_class::glibc_mmapped_chunks, 700 * mib,
                                                  20 * mib, 0, 700 * mib)),
                        healthy_system());
  EXPECT_EQ(only(list, "advised_but_not_huge").level(), advice_level::warning);
  EXPECT_TRUE(mentions(only(list, "advised_but_not_huge"), "THP faults that found no free"));
}

// Under jemalloc a program's own direct mmap is taken for jemalloc's arenas; thp:always advises
// every extent of jemalloc's, so unadvised memory under thp:always is not jemalloc's.
TEST(DoctorReach, JemallocThpAlwaysAndUnadvisedMemoryIsNotJemallocs) {
  // As seen live: jemalloc's own 6 MiB advised and huge, the program's 700 MiB mmap not.
  process_report p =
      process_with(big_process("jemalloc", {{"MALLOC_CONF", "thp:always"}}),
                   usage(memory_class::allocator_arenas, 706 * mib, 6 * mib, 0, 6 * mib));
  auto list = advise_process(p, healthy_system());
  const advice a = only(list, "setting_does_not_reach");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a,
                       "yet only 6 MiB of this memory is advised: the rest is not "
                       "jemalloc's, the program maps it itself"))
      << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("MALLOC_CONF"), std::string::npos);
  // jemalloc's own arenas, advised: the setting reached them.
  p.classes[0].advised = 706 * mib;
  list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "setting_does_not_reach"), std::nullopt) << ids(list);
  EXPECT_NE(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  // Before the setting: it reaches jemalloc's own arenas, not the program's own mappings.
  p = process_with(big_process("jemalloc"), usage(memory_class::allocator_arenas, 700 * mib));
  EXPECT_TRUE(mentions(only(advise_process(p, healthy_system()), "jemalloc_without_thp"),
                       "thp:always reaches jemalloc's own arenas, not memory the program maps "
                       "itself"));
}

TEST(DoctorReach, TunableInPlaceThatDoesNotReachIsAWarning) {
  process_report p = big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36");
  p = process_with(p, usage(memory_class::glibc_thread_arenas, 1 * gib, 3 * mib, 1 * gib));
  auto list = advise_process(p, healthy_system());
  const advice a = only(list, "glibc_tunable_does_not_reach");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "1 GiB of it lies in mappings under 2 MiB")) << a.message;
  // A mapping under 2 MiB holds no huge page whatever the setting: no --collapse either.
  EXPECT_TRUE(mentions(a, "neither THP enabled=always nor MADV_COLLAPSE makes such a mapping huge"))
      << a.message;
  EXPECT_TRUE(a.commands.empty());
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  // The tunable absent and nothing it could reach: a note, not the tunable.
  p = process_with(big_process("glibc", {}, "2.36"),
                   usage(memory_class::glibc_thread_arenas, 1 * gib, 3 * mib, 1 * gib));
  list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "glibc_chunks_out_of_reach").level(), advice_level::note);
  EXPECT_TRUE(only(list, "glibc_chunks_out_of_reach").commands.empty());
  // The tunable reaches the memory and it is huge: nothing (exit 0 is right).
  p = process_with(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36"),
                   usage(memory_class::glibc_mmapped_chunks, 1 * gib, 1 * gib));
  EXPECT_TRUE(advise_process(p, healthy_system()).empty());
}

TEST(DoctorReach, NumpyWithItsMadviseTurnedOff) {
  EXPECT_EQ(parse_allocator_environ(std::string("NUMPY_MADVISE_HUGEPAGE=0\0HOME=/\0", 31)),
            (std::vector<std::pair<std::string, std::string>>{{"NUMPY_MADVISE_HUGEPAGE", "0"}}));
  const std::vector<std::string> paths{"/usr/bin/python3.11",
                                       "/usr/lib/python3/dist-packages/numpy/core/"
                                       "_multiarray_umath.cpython-311-x86_64-linux-gnu.so"};
  process_report p = big_process("glibc", {{"NUMPY_MADVISE_HUGEPAGE", "0"}}, "2.36");
  p.runtime = detect_runtime(paths, "", p.allocator.settings);
  ASSERT_EQ(p.runtime.kind, "python");
  EXPECT_FALSE(p.runtime.asks_for_huge);
  p = process_with(p, usage(memory_class::glibc_mmapped_chunks, 2 * gib));
  auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "numpy_madvise_disabled");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "NUMPY_MADVISE_HUGEPAGE=0 in its environment")) << a.message;
  EXPECT_EQ(a.reaches, std::vector<std::string>{"glibc_mmapped_chunks"});
  // numpy without the variable asks; python without numpy is no runtime of the doctor's.
  EXPECT_TRUE(detect_runtime(paths, "", {}).asks_for_huge);
  EXPECT_EQ(detect_runtime({"/usr/bin/python3.11"}, "", {}).kind, "");
  p.runtime = detect_runtime(paths, "", {{"NUMPY_MADVISE_HUGEPAGE", "1"}});
  EXPECT_EQ(find(advise_process(p, healthy_system()), "numpy_madvise_disabled"), std::nullopt);
}

TEST(DoctorReach, StaticBinaryAllocatorIsUnknown) {
  process_report p = big_process("glibc");
  p.allocator = describe_allocator({"unknown", "", ""}, true, {});
  p = process_with(p, usage(memory_class::anonymous_mmap, 1 * gib));
  auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "allocator_linked_in");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_TRUE(mentions(a, "linked into the executable")) << a.message;
  // A static glibc reads GLIBC_TUNABLES (busybox-static with glibc.malloc.hugetlb=1 measured
  // 0% -> 99.7% huge): the note says so rather than that it cannot tell.
  EXPECT_TRUE(mentions(a,
                       "a static glibc (Debian's busybox-static, for one) reads GLIBC_TUNABLES "
                       "as a shared one does, so GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in its "
                       "environment reaches its malloc chunks of 2 MiB and up"))
      << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(list.size(), 1u) << ids(list);
  // Without the classes, the same.
  p.classes.clear();
  EXPECT_NE(find(advise_process(p, healthy_system()), "allocator_linked_in"), std::nullopt);
}

TEST(DoctorReach, NumpyBuffersWhoseChunkHeadersWereNotToldGetNumpysSetting) {
  // numpy-no-madvise: its 600 MiB array reads as the program's own mapping (no chunk header
  // told); numpy's madvise reaches it all the same (0% -> 97% without the variable).
  const std::vector<std::string> paths{"/usr/bin/python3.11",
                                       "/usr/lib/python3/dist-packages/numpy/core/"
                                       "_multiarray_umath.cpython-311-x86_64-linux-gnu.so"};
  process_report p = big_process("glibc", {{"NUMPY_MADVISE_HUGEPAGE", "0"}}, "2.36");
  p.runtime = detect_runtime(paths, "", p.allocator.settings);
  p = process_with(p, usage(memory_class::anonymous_mmap, 600 * mib));
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "numpy_madvise_disabled");
  EXPECT_EQ(a.reaches, std::vector<std::string>{"anonymous_mmap"});
  EXPECT_EQ(find(list, "anonymous_mmap_out_of_reach"), std::nullopt) << ids(list);
  EXPECT_EQ(list.size(), 1u) << ids(list);
}

TEST(DoctorReach, ServicesUnderHalfAGibStillGetTheirOwnSetting) {
  // memcached -m 600 holding 480 MiB of slabs: -L, not an all-clear.
  process_report m = big_process("glibc", {}, "2.36");
  m.runtime = detect_runtime({"/usr/bin/memcached"}, cmdline_of("memcached\0-m\000600"), {});
  m = process_with(m, usage(memory_class::glibc_mmapped_chunks, 480 * mib, 0, 480 * mib));
  auto list = advise_process(m, healthy_system());
  EXPECT_EQ(only(list, "memcached_large_pages").level(), advice_level::warning);
  EXPECT_TRUE(has_warning(list));
  // A plain program of that size is under the threshold, but 480 MiB on base pages that no
  // setting reaches is no all-clear: a note that says which memory, why, and that --collapse
  // cannot help chunks under 2 MiB either.
  process_report plain = m;
  plain.runtime = {};
  list = advise_process(plain, healthy_system());
  EXPECT_EQ(list.size(), 1u) << ids(list);
  const advice& unreached = only(list, "base_pages_out_of_reach");
  EXPECT_EQ(unreached.level(), advice_level::note);
  EXPECT_TRUE(mentions(unreached, "glibc's mmapped chunks (480 MiB)")) << unreached.message;
  EXPECT_TRUE(mentions(unreached, "chunks under 2 MiB, which glibc.malloc.hugetlb=1 never advises"))
      << unreached.message;
  EXPECT_TRUE(mentions(unreached,
                       "neither THP enabled=always nor MADV_COLLAPSE makes such a "
                       "mapping huge"))
      << unreached.message;
  // MariaDB with 400 MiB of its 528 MiB buffer pool resident, THP off by itself.
  process_report d = mariadb(thp_disabler::process);
  d.anonymous = 400 * mib;
  d.rss = 430 * mib;
  d.largest = {{0x7f0000000000, 528 * mib, 312 * mib, 0, 4096, "", "", false, {}, 1}};
  // It also reserves terabytes of address space it never touches: not the buffer pool.
  auto reserved = usage(memory_class::anonymous_mmap, 400 * mib);
  reserved.largest_mapping = 8192 * gib;
  d.classes = {reserved};
  list = advise_process(d, healthy_system());
  EXPECT_TRUE(mentions(only(list, "mariadb_large_pages"), "it needs 264 pages of 2 MiB"))
      << only(list, "mariadb_large_pages").message;
}

TEST(DoctorReach, MariadbWithLargePagesAndAShortPoolSaysByHowMuch) {
  for (const std::string& cmdline :
       {cmdline_of("mariadbd\0--large-pages"), cmdline_of("mariadbd\0--large_pages=ON"),
        cmdline_of("mariadbd\0--loose-large-pages=1")}) {
    const runtime_report r = detect_runtime({"/usr/sbin/mariadbd"}, cmdline, {});
    EXPECT_TRUE(r.asks_for_huge) << cmdline;
  }
  EXPECT_FALSE(detect_runtime({"/usr/sbin/mariadbd"},
                              cmdline_of("mariadbd\0--large-pages\0--skip-large-pages"), {})
                   .asks_for_huge);
  EXPECT_FALSE(detect_runtime({"/usr/sbin/mariadbd"}, cmdline_of("mariadbd\0--large-pages=OFF"), {})
                   .asks_for_huge);
  process_report p = mariadb(thp_disabler::process);
  p.runtime = detect_runtime({"/usr/sbin/mariadbd"}, cmdline_of("mariadbd\0--large-pages"), {});
  p.anonymous = 400 * mib;
  p.largest = {{0x7f0000000000, 528 * mib, 312 * mib, 0, 4096, "", "", false, {}, 1}};
  // The pool shrunk to 64 pages, 53 of them reserved by another of its mappings: 11 free.
  system_report s = healthy_system();
  s.pools[0].total = 64;
  s.pools[0].free = 64;
  s.pools[0].reserved = 53;
  const auto list = advise_process(p, s);
  EXPECT_EQ(find(list, "mariadb_large_pages"), std::nullopt) << ids(list);
  const advice& a = only(list, "mariadb_pool_short");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a,
                       "MariaDB has --large-pages, yet its buffer pool (528 MiB) is on base "
                       "pages"))
      << a.message;
  EXPECT_TRUE(mentions(a,
                       "it needs 264 pages of 2 MiB, the pool has 11 free, 253 short: grow "
                       "the pool by 253 pages"))
      << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=317");
  // A smaller hugetlb mapping of the server (2 MiB resident of 124 MiB) beside a buffer pool on
  // base pages: still short (a CI run, whose pool held 185 free pages, gave an all-clear here).
  const anon_mapping log_buffer{
      0x7f1000000000, 124 * mib, 2 * mib, 2 * mib, 2 * mib, "/anon_hugepage (deleted)", "",
      false,          {},        1};
  p.largest.push_back(log_buffer);
  p.hugetlb[2 * mib] = 2 * mib;
  EXPECT_EQ(only(advise_process(p, s), "mariadb_pool_short").level(), advice_level::warning);
  // The buffer pool on hugetlb pages (a pool with room at start): nothing.
  p.largest = {{0x7f0000000000,
                528 * mib,
                528 * mib,
                528 * mib,
                2 * mib,
                "/anon_hugepage (deleted)",
                "",
                false,
                {},
                1},
               log_buffer};
  p.hugetlb[2 * mib] = 530 * mib;
  EXPECT_TRUE(advise_process(p, s).empty()) << ids(advise_process(p, s));
}

TEST(DoctorReach, JvmHeapFromItsAnonymousMappingsWhereNoClassSaysHeap) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             cmdline_of("java\0Main"), {});
  p = process_with(p, usage(memory_class::anonymous_mmap, 4 * gib));
  auto list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "jvm_without_thp").reaches, std::vector<std::string>{"anonymous_mmap"});
  EXPECT_EQ(find(list, "anonymous_mmap_out_of_reach"), std::nullopt) << ids(list);
  // With a runtime_heap class, the rest is the program's own.
  p.classes.push_back(usage(memory_class::runtime_heap, 1 * gib));
  list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "jvm_without_thp").reaches, std::vector<std::string>{"runtime_heap"});
  EXPECT_NE(find(list, "anonymous_mmap_out_of_reach"), std::nullopt) << ids(list);
}

TEST(DoctorReach, JvmFlagInPlaceButHeapNotHuge) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"},
                             std::string("java\0-XX:+UseTransparentHugePages\0Main", 39), {});
  ASSERT_TRUE(p.runtime.asks_for_huge);
  p = process_with(p, usage(memory_class::runtime_heap, 4 * gib, 100 * mib, 0, 4 * gib));
  const auto list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "advised_but_not_huge").commands,
            std::vector<std::string>{collapse_command});
  EXPECT_EQ(find(list, "jvm_without_thp"), std::nullopt);
}

TEST(DoctorReach, ProgramsOwnMappingsAreANoteWithCollapse) {
  process_report p =
      process_with(big_process("glibc", {}, "2.36"), usage(memory_class::anonymous_mmap, 1 * gib));
  auto list = advise_process(p, healthy_system());
  const advice a = only(list, "anonymous_mmap_out_of_reach");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(a.evidence, std::vector<std::string>{"0 B of 1 GiB advised"});
  EXPECT_TRUE(mentions(a,
                       "THP enabled=always (machine-wide) reaches it unless THP is disabled "
                       "for the process except where advised"))
      << a.message;
  EXPECT_FALSE(has_warning(list)) << ids(list);
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  // The program advises it: the setting is its own; not huge is a warning.
  p.classes[0].advised = 1 * gib;
  list = advise_process(p, healthy_system());
  EXPECT_EQ(only(list, "advised_but_not_huge").level(), advice_level::warning);
}

// No all-clear while a class a fix reaches is on base pages: for every class with its setting in
// place (or none to set), something is said; with the class huge, nothing.
TEST(DoctorReach, NoAllClearWhileAReachableClassIsOnBasePages) {
  struct scenario {
    memory_class kind;
    process_report p;
  };
  std::vector<scenario> all{
      {memory_class::glibc_main_arena,
       big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36")},
      {memory_class::glibc_thread_arenas, big_process("glibc", {}, "2.36")},
      {memory_class::glibc_mmapped_chunks,
       big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36")},
      {memory_class::allocator_arenas, big_process("jemalloc", {{"MALLOC_CONF", "thp:always"}})},
      {memory_class::allocator_arenas, big_process("mimalloc", {}, "2.1")},
      {memory_class::anonymous_mmap, big_process("glibc", {}, "2.36")},
      {memory_class::shared_anonymous, big_process("glibc", {}, "2.36")},
      {memory_class::tmpfs_file, big_process("glibc", {}, "2.36")},
  };
  for (const char* shmem : {"never", "advise", "within_size"}) {
    for (const scenario& one : all) {
      SCOPED_TRACE(std::string(name_of(one.kind)) + " shmem_enabled=" + shmem);
      system_report s = healthy_system();
      s.thp.shmem_enabled = shmem;
      auto c = usage(one.kind, 1 * gib);
      c.mount = "/dev/shm";
      const auto low = advise_process(process_with(one.p, c), s);
      EXPECT_FALSE(low.empty());
      for (const advice& a : low) EXPECT_FALSE(a.reaches.empty()) << a.id();
      c.huge = 1 * gib;
      EXPECT_TRUE(advise_process(process_with(one.p, c), s).empty());
    }
  }
}

TEST(DoctorReach, ThpNeverReachesEveryPrivateClass) {
  system_report s = healthy_system();
  s.thp.enabled = "never";
  process_report p = big_process("glibc", {}, "2.36");
  p.classes = {usage(memory_class::runtime_heap, 1 * gib),
               usage(memory_class::glibc_thread_arenas, 1 * gib)};
  const auto list = advise_process(p, s);
  EXPECT_EQ(only(list, "thp_never").reaches,
            (std::vector<std::string>{"runtime_heap", "glibc_thread_arenas"}));
  EXPECT_EQ(list.size(), 1u) << ids(list);
}

// Linux 6.18's PR_THP_DISABLE_EXCEPT_ADVISED leaves status THP_enabled at 1 (checked on 6.18):
// under enabled=always the process's unadvised memory, none of it THP-eligible, tells it. The
// process is not told that enabled=always reaches it; what advises, and --collapse (MADV_COLLAPSE
// collapses under this prctl: checked on 6.18), do.
TEST(DoctorReach, ThpDisabledExceptAdvisedIsNotToldThatAlwaysReachesIt) {
  process_report p =
      process_with(big_process("glibc", {}, "2.36"), usage(memory_class::anonymous_mmap, 1 * gib));
  p.thp_eligible_anon = 0;
  system_report s = stock_system("always");
  s.kernel_release = "6.18.0-test";
  auto list = advise_process(p, s);
  const advice a = only(list, "thp_disabled_except_advised");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "PR_THP_DISABLE_EXCEPT_ADVISED")) << a.message;
  EXPECT_FALSE(mentions(a, "enabled=always (machine-wide) reaches it")) << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  // Eligible memory, or a kernel before 6.18 (no such prctl): enabled=always is what it seems.
  p.thp_eligible_anon = 1 * gib;
  EXPECT_EQ(find(advise_process(p, s), "thp_disabled_except_advised"), std::nullopt);
  p.thp_eligible_anon = 0;
  s.kernel_release = "6.12.0";
  EXPECT_EQ(find(advise_process(p, s), "thp_disabled_except_advised"), std::nullopt);
  // Under madvise nothing tells it: the advice that names enabled=always says when it does not.
  const advice note = only(advise_process(p, healthy_system()), "anonymous_mmap_out_of_reach");
  EXPECT_TRUE(mentions(note,
                       "reaches it unless THP is disabled for the process except where "
                       "advised (PR_THP_DISABLE_EXCEPT_ADVISED"))
      << note.message;
}

// Memory the program advised MADV_NOHUGEPAGE: neither THP enabled=always nor --collapse reaches
// it (MADV_COLLAPSE answers EINVAL on such a mapping: checked on 6.18), so neither is advised.
TEST(DoctorReach, NoHugepageMemoryIsNotAdvisedAlwaysOrCollapse) {
  memory_class_usage c = usage(memory_class::anonymous_mmap, 700 * mib);
  c.refused = 700 * mib;
  const process_report p = process_with(big_process("glibc", {}, "2.36"), c);
  const auto list = advise_process(p, healthy_system());
  const advice a = only(list, "anonymous_mmap_out_of_reach");
  EXPECT_TRUE(a.commands.empty()) << all_commands(list);
  EXPECT_TRUE(mentions(a, "advises it MADV_NOHUGEPAGE")) << a.message;
  EXPECT_EQ(a.evidence, (std::vector<std::string>{"0 B of 700 MiB advised",
                                                  "700 MiB advised MADV_NOHUGEPAGE"}));
  EXPECT_TRUE(mentions(a,
                       "which THP enabled=always, khugepaged and MADV_COLLAPSE all leave on "
                       "base pages"))
      << a.message;
  EXPECT_FALSE(mentions(a, "enabled=always (machine-wide) reaches it")) << a.message;
  EXPECT_EQ(all_commands(list).find("--collapse"), std::string::npos) << all_commands(list);
  // Under the threshold, the no-all-clear note: the same reach.
  memory_class_usage small = c;
  small.resident = small.refused = 300 * mib;
  const auto notes =
      advise_process(process_with(big_process("glibc", {}, "2.36"), small), healthy_system());
  const advice b = only(notes, "base_pages_out_of_reach");
  EXPECT_TRUE(b.commands.empty()) << all_commands(notes);
  EXPECT_TRUE(mentions(b, "MADV_NOHUGEPAGE")) << b.message;
}

// Copy-on-write copies in private file mappings: their own class, never page cache, and no
// setting or --collapse named for them (MADV_COLLAPSE answers EINVAL: checked on 6.18).
TEST(DoctorReach, PrivateFileCopiesAreANoteWithoutCollapseOrAlways) {
  const process_report p =
      process_with(big_process("glibc", {}, "2.36"), usage(memory_class::file_copies, 300 * mib));
  const auto list = advise_process(p, healthy_system());
  const advice a = only(list, "file_copies_out_of_reach");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_TRUE(a.commands.empty()) << all_commands(list);
  EXPECT_TRUE(mentions(a, "not page cache")) << a.message;
  EXPECT_TRUE(mentions(a, "MADV_COLLAPSE refuses them (EINVAL)")) << a.message;
  EXPECT_FALSE(mentions(a, "reaches it")) << a.message;
  EXPECT_EQ(all_commands(list).find("--collapse"), std::string::npos) << all_commands(list);
  EXPECT_EQ(a.reaches, std::vector<std::string>{"private_file_copies"});
}

// mlockall(MCL_FUTURE): each mapping is faulted in on base pages as it is made, before glibc
// advises it, so glibc.malloc.hugetlb=1 in place does not reach it and no fallback is blamed;
// --collapse does (MADV_COLLAPSE collapses locked memory: checked on 6.18).
TEST(DoctorReach, LockedMemoryIsNamedNotBlamedOnFallbacks) {
  process_report p =
      process_with(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36"),
                   usage(memory_class::glibc_mmapped_chunks, 1 * gib));
  p.locked = 1 * gib + 20 * mib;
  system_report s = healthy_system();
  s.vmstat = {{"thp_fault_alloc", 100}, {"thp_fault_fallback", 5000}};
  const auto list = advise_process(p, s);
  const advice a = only(list, "locked_before_advice");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "mlockall(MCL_FUTURE)")) << a.message;
  EXPECT_TRUE(mentions(a, "THP fallbacks are not the cause")) << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(find(list, "huge_pages_not_obtained"), std::nullopt) << ids(list);
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  // Not locked: the advice it had.
  p.locked = 0;
  EXPECT_EQ(find(advise_process(p, s), "locked_before_advice"), std::nullopt);
}

// .NET: the GC maps its own heap; its documented switch is GCLargePages with a heap hard limit
// (hugetlb pool pages), named where no malloc setting reaches the heap.
TEST(DoctorReach, DotnetIsToldItsGcLargePagesSwitch) {
  const std::string coreclr = "/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.1/libcoreclr.so";
  runtime_report rt = detect_runtime({"/usr/bin/dotnet", coreclr}, "", {});
  EXPECT_EQ(rt.kind, "dotnet");
  EXPECT_EQ(rt.version, "8");  // the major version, as for the JVM
  EXPECT_FALSE(rt.asks_for_huge);
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = rt;
  p = process_with(p, usage(memory_class::runtime_heap, 1 * gib));
  const auto list = advise_process(p, healthy_system());
  const advice a = only(list, "dotnet_gc_large_pages");
  EXPECT_TRUE(mentions(a, "DOTNET_GCLargePages=1 together with a heap hard limit")) << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_EQ(find(list, "runtime_heap_out_of_reach"), std::nullopt) << ids(list);
  // Both set: it asks, and the advice says where the pages come from.
  rt = detect_runtime({coreclr}, "",
                      {{"DOTNET_GCLargePages", "1"}, {"DOTNET_GCHeapHardLimit", "0x40000000"}});
  EXPECT_TRUE(rt.asks_for_huge);
  EXPECT_TRUE(rt.uses_pool);
  // The switch without a hard limit does nothing.
  EXPECT_FALSE(detect_runtime({coreclr}, "", {{"DOTNET_GCLargePages", "1"}}).asks_for_huge);
  // Its environment variables are read from the process.
  const std::string environ = std::string("DOTNET_GCLargePages=1\0PATH=/bin\0", 32);
  const auto settings = parse_allocator_environ(environ);
  ASSERT_EQ(settings.size(), 1u);
  EXPECT_EQ(settings[0].first, "DOTNET_GCLargePages");
}

// Advice that grows RSS, weighed against the memory cgroup's limit by the version in use: a
// glibc tunable for 700 MiB of chunks whose whole huge pages need 100 MiB more, in a cgroup with
// 24 MiB left, does not fit.
TEST(DoctorReach, GrowthIsWeighedAgainstTheMemoryCgroupLimit) {
  process_report p = big_process("glibc", {}, "2.36");
  memory_class_usage c = usage(memory_class::glibc_mmapped_chunks, 700 * mib);
  c.pool_bytes = 800 * mib;
  p = process_with(p, c);
  p.memory_limit =
      cgroup_limit{"/sys/fs/cgroup/system.slice/app.service/memory.max", 1 * gib, 1000 * mib, 0};
  auto list = advise_process(p, healthy_system());
  ASSERT_TRUE(find(list, "glibc_without_hugetlb_tunable").has_value()) << ids(list);
  const advice a = only(list, "memory_cgroup_limit");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a,
                       "has 24 MiB left before its limit (1000 MiB of 1 GiB charged, "
                       "memory.max)"))
      << a.message;
  EXPECT_TRUE(mentions(a, "by at least 100 MiB")) << a.message;
  EXPECT_TRUE(mentions(a, "which does not fit; raise memory.max first")) << a.message;
  // cgroup v1: its own file.
  p.memory_limit->file = "/sys/fs/cgroup/memory/app/memory.limit_in_bytes";
  EXPECT_TRUE(mentions(only(advise_process(p, healthy_system()), "memory_cgroup_limit"),
                       "raise memory.limit_in_bytes first"));
  // Room enough: nothing.
  p.memory_limit->limit = 4 * gib;
  EXPECT_EQ(find(advise_process(p, healthy_system()), "memory_cgroup_limit"), std::nullopt);
}

// Sparse memory that --collapse would fill: the growth weighed is the one its dry run predicts
// (298 MiB of filling), not whole pages over each mapping's resident memory (nothing here), in a
// cgroup with 124 MiB left of 1 GiB (over a tenth: only the growth makes it not fit).
TEST(DoctorReach, ACollapsesGrowthIsTheOneItsDryRunPredicts) {
  process_report p = big_process("glibc", {}, "2.36");
  memory_class_usage c = usage(memory_class::anonymous_mmap, 300 * mib);
  c.pool_bytes = 300 * mib;
  p = process_with(p, c);
  p.memory_limit =
      cgroup_limit{"/sys/fs/cgroup/memory/app/memory.limit_in_bytes", 1 * gib, 900 * mib, 0};
  p.collapse_growth = 298 * mib;
  auto list = advise_process(p, healthy_system());
  ASSERT_EQ(only(list, "base_pages_out_of_reach").commands,
            std::vector<std::string>{"hugepage-doctor --pid 4242 --collapse"});
  const advice a = only(list, "memory_cgroup_limit");
  EXPECT_TRUE(mentions(a, "(base_pages_out_of_reach) grows its RSS, by at least 298 MiB"))
      << a.message;
  EXPECT_TRUE(mentions(a, "which does not fit; raise memory.limit_in_bytes first")) << a.message;
  // Filling nothing: room enough.
  p.collapse_growth = 0;
  list = advise_process(p, healthy_system());
  EXPECT_EQ(find(list, "memory_cgroup_limit"), std::nullopt) << ids(list);
}

}  // namespace
}  // namespace hugepage::doctor
