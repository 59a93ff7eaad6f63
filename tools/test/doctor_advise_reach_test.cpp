// tools/test/doctor_advise_reach_test.cpp - advice by reach: each class of a process's memory is
// advised through a mechanism that reaches it, a setting in place that does not reach it is a
// warning saying why: the table, memcached, node's heap, memfd and /dev/shm files. The settings a
// process has or lacks, and the all-clear: doctor_advise_reach_settings_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "advise_process.hpp"
#include "advise_reach.hpp"
#include "allocator_settings.hpp"
#include "doctor_advise_support.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "system_report.hpp"
#include "thp_disabler.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

const std::string shmem_file = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";

TEST(DoctorReach, TheTable) {
  const process_report glibc = big_process("glibc", {}, "2.36");
  // The malloc tunable: glibc's chunks of 2 MiB and up, nothing in smaller mappings.
  auto chunks = usage(memory_class::glibc_mmapped_chunks, 1 * gib, 0, 1 * gib);
  reach r = reach_of(fix_mechanism::glibc_hugetlb_tunable, chunks, glibc);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_NE(r.limit.find("under 2 MiB"), std::string::npos) << r.limit;
  chunks.in_small_mappings = chunks.in_small_chunks = 256 * mib;
  EXPECT_EQ(reach_of(fix_mechanism::glibc_hugetlb_tunable, chunks, glibc).bytes, 768 * mib);
  // Chunks under 2 MiB that the kernel merged into larger mappings: the tunable judges each chunk
  // and never advises them, while a collapse or THP always works on the merged mapping.
  chunks.in_small_chunks = 1 * gib;
  chunks.in_small_mappings = 0;
  EXPECT_EQ(reach_of(fix_mechanism::glibc_hugetlb_tunable, chunks, glibc).bytes, 0u);
  EXPECT_EQ(reach_of(fix_mechanism::collapse, chunks, glibc).bytes, 1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::thp_always, chunks, glibc).bytes, 1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::glibc_hugetlb_tunable,
                     usage(memory_class::glibc_main_arena, 1 * gib), glibc)
                .bytes,
            1 * gib);
  // Not the thread arenas (advised only at creation, under 2 MiB), unless =2 maps them from the
  // pool; --collapse and THP always reach them.
  const auto threads = usage(memory_class::glibc_thread_arenas, 1 * gib);
  r = reach_of(fix_mechanism::glibc_hugetlb_tunable, threads, glibc);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_NE(r.limit.find("never as it grows"), std::string::npos) << r.limit;
  EXPECT_EQ(reach_of(fix_mechanism::glibc_hugetlb_tunable, threads,
                     big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=2"}}, "2.36"))
                .bytes,
            1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::collapse, threads, glibc).bytes, 1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::thp_always, threads, glibc).bytes, 1 * gib);
  for (const memory_class kind :
       {memory_class::runtime_heap, memory_class::allocator_arenas, memory_class::anonymous_mmap,
        memory_class::shared_anonymous, memory_class::tmpfs_file}) {
    EXPECT_EQ(reach_of(fix_mechanism::glibc_hugetlb_tunable, usage(kind, 1 * gib), glibc).bytes, 0u)
        << name_of(kind);
  }
  // shmem_enabled: advise reaches what the program advises, within_size and always all of it;
  // never a file on a tmpfs mount, except force.
  const auto memfd = usage(memory_class::shared_anonymous, 1 * gib, 0, 0, 256 * mib);
  EXPECT_EQ(reach_of(fix_mechanism::shmem_enabled, memfd, glibc, "advise").bytes, 256 * mib);
  EXPECT_EQ(reach_of(fix_mechanism::shmem_enabled, memfd, glibc, "within_size").bytes, 1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::shmem_enabled, memfd, glibc, "never").bytes, 0u);
  auto shm = usage(memory_class::tmpfs_file, 1 * gib);
  shm.mount = "/dev/shm";
  shm.mount_huge = "never";
  EXPECT_EQ(reach_of(fix_mechanism::shmem_enabled, shm, glibc, "always").bytes, 0u);
  EXPECT_EQ(reach_of(fix_mechanism::shmem_enabled, shm, glibc, "force").bytes, 1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::tmpfs_huge, shm, glibc, "within_size").bytes, 1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::tmpfs_huge, shm, glibc, "never").bytes, 0u);
  // THP always: every private class, no shared memory.
  EXPECT_EQ(
      reach_of(fix_mechanism::thp_always, usage(memory_class::runtime_heap, 1 * gib), glibc).bytes,
      1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::thp_always, memfd, glibc).bytes, 0u);
  // Allocators and runtimes reach only their own.
  EXPECT_EQ(reach_of(fix_mechanism::jemalloc_thp, usage(memory_class::allocator_arenas, 1 * gib),
                     big_process("jemalloc"))
                .bytes,
            1 * gib);
  EXPECT_EQ(reach_of(fix_mechanism::jemalloc_thp, usage(memory_class::allocator_arenas, 1 * gib),
                     big_process("tcmalloc"))
                .bytes,
            0u);
  EXPECT_EQ(
      reach_of(fix_mechanism::jvm_thp, usage(memory_class::runtime_heap, 1 * gib), glibc).bytes,
      0u);
  // --collapse: anything but where THP is off for the process.
  process_report off = glibc;
  off.thp_enabled = false;
  r = reach_of(fix_mechanism::collapse, usage(memory_class::runtime_heap, 1 * gib), off);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_NE(r.limit.find("MADV_COLLAPSE refuses"), std::string::npos);
  EXPECT_EQ(
      reach_of(fix_mechanism::collapse, usage(memory_class::runtime_heap, 1 * gib), glibc).bytes,
      1 * gib);
}

TEST(DoctorReach, MemcachedGetsItsOwnLargePagesNotTheTunable) {
  process_report p = big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36");
  ASSERT_TRUE(p.allocator.asks_for_huge);
  p.runtime = detect_runtime({"/usr/bin/memcached"}, cmdline_of("memcached\0-m\0002048"), {});
  ASSERT_EQ(p.runtime.kind, "memcached");
  EXPECT_FALSE(p.runtime.asks_for_huge);
  // 1 MiB slabs: mmapped chunks in mappings under 2 MiB, 0.3% huge.
  p = process_with(p, usage(memory_class::glibc_mmapped_chunks, 2 * gib, 6 * mib, 2 * gib));
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "memcached_large_pages");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "start memcached with -L")) << a.message;
  EXPECT_TRUE(mentions(a, "glibc.malloc.hugetlb=1 (in the GLIBC_TUNABLES it has) never advises"))
      << a.message;
  EXPECT_TRUE(mentions(a, "-L reaches glibc's mmapped chunks (2 GiB)")) << a.message;
  EXPECT_NE(a.trade.find("whole -m limit is allocated at start"), std::string::npos);
  EXPECT_EQ(a.reaches, std::vector<std::string>{"glibc_mmapped_chunks"});
  EXPECT_TRUE(a.commands.empty());
  EXPECT_EQ(find(list, "glibc_tunable_does_not_reach"), std::nullopt) << ids(list);
  EXPECT_EQ(find(list, "glibc_without_hugetlb_tunable"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  EXPECT_TRUE(has_warning(list));
  // A value glibc does not take as 1, or a later entry that turns it off, is no tunable set.
  for (const char* tunables :
       {"glibc.malloc.hugetlb=10", "glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0"}) {
    SCOPED_TRACE(tunables);
    process_report q = big_process("glibc", {{"GLIBC_TUNABLES", tunables}}, "2.36");
    q.runtime = p.runtime;
    q = process_with(q, usage(memory_class::glibc_mmapped_chunks, 2 * gib, 6 * mib, 2 * gib));
    const auto q_list = advise_process(q, healthy_system());
    const advice& without = only(q_list, "memcached_large_pages");
    EXPECT_TRUE(mentions(without, "glibc.malloc.hugetlb=1 never advises")) << without.message;
  }
  // Under THP always the slabs stay small too: -L again.
  EXPECT_NE(find(advise_process(p, stock_system("always")), "memcached_large_pages"), std::nullopt);
  // Without the classes (a report from stored files) the same advice.
  process_report totals = p;
  totals.classes.clear();
  EXPECT_NE(find(advise_process(totals, healthy_system()), "memcached_large_pages"), std::nullopt);
  // Started with -L (alone or among other flags): it asks; still on base pages is a warning.
  for (const std::string& cmdline :
       {cmdline_of("memcached\0-vL"), cmdline_of("memcached\0--enable-largepages"),
        cmdline_of("memcached\0-m\0002048\0-L")}) {
    p.runtime = detect_runtime({"/usr/bin/memcached"}, cmdline, {});
    EXPECT_TRUE(p.runtime.asks_for_huge) << cmdline;
    const auto with_l = advise_process(p, healthy_system());
    EXPECT_EQ(find(with_l, "memcached_large_pages"), std::nullopt) << ids(with_l);
    EXPECT_EQ(only(with_l, "advised_but_not_huge").commands,
              std::vector<std::string>{collapse_command});
    totals.runtime = p.runtime;
    const auto totals_list = advise_process(totals, healthy_system());
    EXPECT_EQ(
        only(totals_list, "advised_but_not_huge").message.rfind("2 GiB anonymous memory, ", 0), 0u)
        << only(totals_list, "advised_but_not_huge").message;
  }
  // A value that holds an L, or is -L, is not the flag.
  for (const std::string& cmdline :
       {cmdline_of("memcached\0-lLOCAL"), cmdline_of("memcached\0-l\0-L"),
        cmdline_of("memcached\0--listen\0L")}) {
    EXPECT_FALSE(detect_runtime({"/usr/bin/memcached"}, cmdline, {}).asks_for_huge) << cmdline;
  }
  // -L and the slabs huge: nothing.
  p.runtime = detect_runtime({"/usr/bin/memcached"}, cmdline_of("memcached\0-L"), {});
  p = process_with(p, usage(memory_class::glibc_mmapped_chunks, 2 * gib, 2 * gib));
  EXPECT_TRUE(advise_process(p, healthy_system()).empty())
      << ids(advise_process(p, healthy_system()));
}

TEST(DoctorReach, NodeHeapIsANoteWithCollapseNotTheTunable) {
  process_report p = big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=1"}}, "2.36");
  p.runtime = detect_runtime({"/usr/bin/node"}, "", {});
  ASSERT_EQ(p.runtime.kind, "node");
  p = process_with(p, usage(memory_class::runtime_heap, 741 * mib, 2 * mib));
  const auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "node_heap_unreachable");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_EQ(a.commands, std::vector<std::string>{collapse_command});
  EXPECT_TRUE(mentions(a, "reaches only glibc malloc's chunks, not V8's heap")) << a.message;
  EXPECT_TRUE(mentions(a, "khugepaged never collapses unadvised ranges again")) << a.message;
  EXPECT_TRUE(mentions(a, "fork copy-on-write")) << a.message;
  EXPECT_EQ(a.reaches, std::vector<std::string>{"runtime_heap"});
  EXPECT_EQ(all_commands(list).find("GLIBC_TUNABLES"), std::string::npos);
  EXPECT_EQ(list.size(), 1u) << ids(list);
  // Where MADV_COLLAPSE does not work, no command.
  system_report s = healthy_system();
  s.collapse = collapse_support::unsupported;
  EXPECT_TRUE(only(advise_process(p, s), "node_heap_unreachable").commands.empty());
}

TEST(DoctorReach, MemfdUnderShmemAdviseThatTheProgramNeverAdvises) {
  process_report p = process_with(big_process("glibc", {}, "2.36"),
                                  usage(memory_class::shared_anonymous, 1 * gib, 0, 0, 0));
  system_report s = healthy_system();
  s.thp.shmem_enabled = "advise";
  auto list = advise_process(p, s);
  const advice a = only(list, "shmem_not_advised");
  EXPECT_EQ(a.level(), advice_level::warning);
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_EQ(a.commands[0], "echo within_size > " + shmem_file);
  EXPECT_TRUE(mentions(a, "advises 0 B of 1 GiB")) << a.message;
  EXPECT_TRUE(mentions(a, "shmem_enabled=within_size reaches it")) << a.message;
  EXPECT_EQ(a.reaches, std::vector<std::string>{"shared_anonymous"});
  // The program advises it: advise reaches it; huge, nothing.
  p.classes[0].advised = 1 * gib;
  list = advise_process(p, s);
  EXPECT_EQ(find(list, "shmem_not_advised"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "advised_but_not_huge").level(), advice_level::warning);
  p.classes[0].huge = 1 * gib;
  EXPECT_TRUE(advise_process(p, s).empty());
  // shmem_enabled never and the program advises: advise is enough.
  p.classes[0].huge = 0;
  s.thp.shmem_enabled = "never";
  EXPECT_EQ(only(advise_process(p, s), "shmem_without_thp").commands.at(0),
            "echo advise > " + shmem_file);
}

TEST(DoctorReach, DevShmFileFollowsItsMountNotShmemEnabled) {
  auto shm = usage(memory_class::tmpfs_file, 1 * gib);
  shm.mount = "/dev/shm";
  shm.mount_huge = "never";
  process_report p = process_with(big_process("glibc", {}, "2.36"), shm);
  system_report s = healthy_system();
  s.thp.shmem_enabled = "advise";
  s.dev_shm_options = "rw,nosuid,nodev,inode64";
  auto list = advise_process(p, s);
  const advice a = only(list, "tmpfs_mount_without_huge");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_EQ(a.commands, (std::vector<std::string>{"mount -o remount,huge=within_size /dev/shm",
                                                  dev_shm_fstab_command(s)}));
  ASSERT_EQ(a.commands.size(), 2u);
  EXPECT_NE(a.commands[1].find("huge=within_size"), std::string::npos);
  EXPECT_TRUE(mentions(a, "shmem_enabled=advise does not reach them")) << a.message;
  EXPECT_TRUE(mentions(a,
                       "pages already in the files stay on base pages until the files are "
                       "written again: restart the program or re-create the files"))
      << a.message;
  EXPECT_EQ(a.reaches, std::vector<std::string>{"tmpfs_file"});
  EXPECT_EQ(find(list, "shmem_not_advised"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("shmem_enabled"), std::string::npos);
  // Another mount: the remount, and fstab by hand.
  p.classes[0].mount = "/mnt/scratch";
  list = advise_process(p, s);
  EXPECT_EQ(only(list, "tmpfs_mount_without_huge").commands,
            std::vector<std::string>{"mount -o remount,huge=within_size /mnt/scratch"});
  EXPECT_TRUE(mentions(only(list, "tmpfs_mount_without_huge"),
                       "add huge=within_size to /mnt/scratch's line in /etc/fstab by hand"));
  // A mount point with shell syntax is quoted; one with control bytes is in no command.
  p.classes[0].mount = "/mnt/x;reboot";
  EXPECT_EQ(only(advise_process(p, s), "tmpfs_mount_without_huge").commands,
            std::vector<std::string>{"mount -o remount,huge=within_size '/mnt/x;reboot'"});
  p.classes[0].mount = "/mnt/\x1b[2J";
  EXPECT_TRUE(only(advise_process(p, s), "tmpfs_mount_without_huge").commands.empty());
  EXPECT_TRUE(mentions(only(advise_process(p, s), "tmpfs_mount_without_huge"),
                       "no command is printed: the mount point holds characters the doctor will "
                       "not put into a command"));
  // A container's mount: the remount inside its namespace. Where its mount point holds a space
  // there is no command, but the namespace and why there is no command are still said.
  p.own_mount_namespace = true;
  p.pid = 4242;
  p.classes[0].mount = "/tmp/scratch";
  const advice inside = only(advise_process(p, s), "tmpfs_mount_without_huge");
  EXPECT_EQ(inside.commands, std::vector<std::string>{"nsenter -t 4242 -m mount -o "
                                                      "remount,huge=within_size /tmp/scratch"});
  EXPECT_FALSE(mentions(inside, "no command is printed")) << inside.message;
  p.classes[0].mount = "/tmp/my mnt";
  const advice spaced = only(advise_process(p, s), "tmpfs_mount_without_huge");
  EXPECT_TRUE(spaced.commands.empty());
  EXPECT_TRUE(mentions(spaced, "a mount namespace of its own (a container)")) << spaced.message;
  EXPECT_TRUE(mentions(spaced,
                       "a remount of its /tmp/my mnt must run inside that namespace "
                       "(nsenter -t 4242 -m)"))
      << spaced.message;
  EXPECT_TRUE(mentions(spaced, "the host's /etc/fstab does not reach it")) << spaced.message;
  EXPECT_FALSE(mentions(spaced, "/etc/fstab by hand")) << spaced.message;
  EXPECT_TRUE(mentions(spaced, "no command is printed: the mount point holds characters"))
      << spaced.message;
  EXPECT_NE(std::find(spaced.evidence.begin(), spaced.evidence.end(),
                      "/proc/PID/ns/mnt differs from the doctor's: its own mount namespace"),
            spaced.evidence.end());
  p.own_mount_namespace = false;
  // The mount has huge= already: the pages predate it.
  p.classes[0].mount = "/dev/shm";
  p.classes[0].mount_huge = "within_size";
  list = advise_process(p, s);
  EXPECT_EQ(find(list, "tmpfs_mount_without_huge"), std::nullopt) << ids(list);
  EXPECT_TRUE(mentions(only(list, "tmpfs_pages_predate_huge"), "re-create the files"));
  // shmem_enabled=deny overrides every mount; this one is already right, so no remount.
  s.thp.shmem_enabled = "deny";
  list = advise_process(p, s);
  EXPECT_EQ(find(list, "tmpfs_mount_without_huge"), std::nullopt) << ids(list);
  const advice deny = only(list, "shmem_deny_overrides_mount");
  EXPECT_EQ(deny.level(), advice_level::warning);
  EXPECT_EQ(deny.commands.at(0), "echo never > " + shmem_file);
  EXPECT_TRUE(mentions(deny, "/dev/shm already has huge=within_size")) << deny.message;
  EXPECT_TRUE(mentions(deny, "set shmem_enabled to never")) << deny.message;
  EXPECT_FALSE(mentions(deny, "remount")) << deny.message;
  EXPECT_EQ(all_commands(list).find("mount -o"), std::string::npos) << all_commands(list);
  // Under deny a mount without huge= needs both: never, then the remount.
  p.classes[0].mount_huge = "never";
  const advice both = only(advise_process(p, s), "tmpfs_mount_without_huge");
  EXPECT_EQ(both.commands.at(0), "echo never > " + shmem_file);
  EXPECT_TRUE(mentions(both, "remount /dev/shm with huge=within_size")) << both.message;
}

}  // namespace
}  // namespace hugepage::doctor
