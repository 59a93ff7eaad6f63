// tools/test/doctor_pool_settings_test.cpp - settings that draw on the hugetlb pool are judged by
// the pool (the JVM's -XX:+UseLargePages, MariaDB's --large-pages), and memory under the advice
// threshold that no setting reaches gets a note instead of a quiet all-clear.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_parts.hpp"
#include "advise_process.hpp"
#include "advise_reach.hpp"
#include "allocator_settings.hpp"
#include "doctor_advise_support.hpp"
#include "memory_classes.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "runtime_go.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {
namespace {

using namespace advice_test;

TEST(DoctorPoolSettings, JvmLargePagesAloneDrawOnThePool) {
  runtime_report r =
      detect_runtime({libjvm}, cmdline_of("java\0-XX:+UseLargePages\0-Xmx1g\0Main"), {});
  EXPECT_TRUE(r.asks_for_huge);
  EXPECT_TRUE(r.uses_pool);
  EXPECT_EQ(r.heap_bytes, 1 * gib);
  EXPECT_EQ(r.pool_page_bytes, 0u);
  // With UseTransparentHugePages the JVM madvises: THP, not the pool.
  r = detect_runtime(
      {libjvm}, cmdline_of("java\0-XX:+UseLargePages\0-XX:+UseTransparentHugePages\0-Xmx1g\0Main"),
      {});
  EXPECT_TRUE(r.asks_for_huge);
  EXPECT_FALSE(r.uses_pool);
  // The options variables first, the command line after; the last of each wins; keytool's -J.
  r = detect_runtime({libjvm},
                     cmdline_of("keytool\0-J-XX:MaxHeapSize=512M\0-J-XX:LargePageSizeInBytes=1g"),
                     {{"JAVA_TOOL_OPTIONS", "-XX:+UseLargePages -Xmx2g"}});
  EXPECT_TRUE(r.uses_pool);
  EXPECT_EQ(r.heap_bytes, 512 * mib);
  EXPECT_EQ(r.pool_page_bytes, 1 * gib);
  // A malformed size is ignored, the flag still read.
  r = detect_runtime({libjvm}, cmdline_of("java\0-XX:+UseLargePages\0-Xmx1x\0Main"), {});
  EXPECT_TRUE(r.uses_pool);
  EXPECT_EQ(r.heap_bytes, 0u);
  EXPECT_FALSE(
      detect_runtime({libjvm}, cmdline_of("java\0-XX:+UseLargePages\0-XX:-UseLargePages"), {})
          .uses_pool);
}

// A JVM with -XX:+UseLargePages whose 1 GiB heap fell back to base pages (the pool short at its
// start): the pool, by how many pages, not "the flag does not reach" with --collapse.
process_report jvm_on_base_pages(const char* cmdline, std::size_t n) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({libjvm}, std::string(cmdline, n), {});
  p = process_with(p, usage(memory_class::runtime_heap, 1 * gib));
  p.largest = {{0x7f0000000000, 1 * gib, 1 * gib, 0, 4096, "", "", false, {}, 1}};
  return p;
}

TEST(DoctorPoolSettings, JvmLargePagesWithAShortPoolSaysByHowMuch) {
  const char cmdline[] = "java\0-XX:+UseLargePages\0-Xmx1g\0Main";
  const process_report p = jvm_on_base_pages(cmdline, sizeof cmdline - 1);
  system_report s = healthy_system();  // 600 pages of 2 MiB, 500 free
  auto list = advise_process(p, s);
  const advice& a = only(list, "jvm_pool_short");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a, "the JVM has -XX:+UseLargePages")) << a.message;
  EXPECT_TRUE(mentions(a, "yet its heap (1 GiB) is on base pages")) << a.message;
  // Not the heap alone (512 pages): the code cache (240 MiB, tiered) and G1's bitmaps, block
  // offset table, card table and card counts come from the pool first; 500 free were too few
  // for a 1 GiB heap, whose JVM took 139 pages before its heap.
  EXPECT_TRUE(mentions(a,
                       "it needs about 651 pages of 2 MiB (512 for the heap, 120 for the code "
                       "cache of 240 MiB, about 19 for the garbage collector's structures"))
      << a.message;
  EXPECT_TRUE(mentions(a, "the pool has 500 free, 151 short: reserve 151 more pages of 2 MiB"))
      << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=751");
  EXPECT_EQ(a.reaches, std::vector<std::string>{"runtime_heap"});
  EXPECT_EQ(exit_code_of(list), exit_advice);
  // Not the THP story: the flag does not work by madvise.
  EXPECT_EQ(find(list, "setting_does_not_reach"), std::nullopt) << ids(list);
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  EXPECT_EQ(find(list, "jvm_without_thp"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("--collapse"), std::string::npos) << all_commands(list);
  // An empty pool: all 512 pages.
  s.pools[0].total = 0;
  s.pools[0].free = 0;
  list = advise_process(p, s);
  EXPECT_TRUE(mentions(only(list, "jvm_pool_short"), "the pool has 0 free, 651 short"));
  EXPECT_EQ(only(list, "jvm_pool_short").commands.at(0), "sysctl -w vm.nr_hugepages=651");
  // One page short: "1 more page".
  s.pools[0].total = 650;
  s.pools[0].free = 650;
  list = advise_process(p, s);
  EXPECT_TRUE(mentions(only(list, "jvm_pool_short"), "1 short: reserve 1 more page of 2 MiB"))
      << only(list, "jvm_pool_short").message;
  s.pools[0].total = 0;
  s.pools[0].free = 0;
  // A -XX:LargePageSizeInBytes the kernel has no pool of: no pool command (its sysfs directory
  // cannot exist), the size named as what to change.
  const char odd_size[] = "java\0-XX:+UseLargePages\0-XX:LargePageSizeInBytes=3m\0-Xmx1g\0Main";
  list = advise_process(jvm_on_base_pages(odd_size, sizeof odd_size - 1), s);
  const advice& odd = only(list, "jvm_pool_short");
  EXPECT_TRUE(mentions(odd,
                       "-XX:LargePageSizeInBytes=3 MiB, which is not a huge page size here "
                       "(the kernel lists 2 MiB in /sys/kernel/mm/hugepages)"))
      << odd.message;
  EXPECT_TRUE(odd.commands.empty()) << all_commands(list);
  EXPECT_EQ(all_commands(list).find("hugepages-3072kB"), std::string::npos) << all_commands(list);
  // A smaller code cache, or none tiered: 48 MiB by default.
  const char small_cache[] =
      "java\0-XX:+UseLargePages\0-XX:ReservedCodeCacheSize=64m\0-Xmx1g\0Main";
  list = advise_process(jvm_on_base_pages(small_cache, sizeof small_cache - 1), s);
  EXPECT_TRUE(mentions(only(list, "jvm_pool_short"), "it needs about 563 pages of 2 MiB"))
      << only(list, "jvm_pool_short").message;
  const char untiered[] = "java\0-XX:+UseLargePages\0-XX:-TieredCompilation\0-Xmx1g\0Main";
  list = advise_process(jvm_on_base_pages(untiered, sizeof untiered - 1), s);
  EXPECT_TRUE(mentions(only(list, "jvm_pool_short"), "24 for the code cache of 48 MiB"))
      << only(list, "jvm_pool_short").message;
  // No -Xmx: the heap's mapping gives the size.
  const char plain[] = "java\0-XX:+UseLargePages\0Main";
  list = advise_process(jvm_on_base_pages(plain, sizeof plain - 1), s);
  EXPECT_TRUE(mentions(only(list, "jvm_pool_short"), "it needs about 651 pages of 2 MiB"));
  // The heap on hugetlb pages: no pool advice; the JVM's other memory on base pages is out of
  // the flags' reach, a note.
  process_report huge = p;
  huge.largest[0].kernel_page_bytes = 2 * mib;
  huge.largest[0].huge = 1 * gib;
  huge.hugetlb[2 * mib] = 1 * gib;
  list = advise_process(huge, healthy_system());
  EXPECT_EQ(find(list, "jvm_pool_short"), std::nullopt) << ids(list);
  EXPECT_EQ(only(list, "jvm_memory_beside_heap").level(), advice_level::note);
  // With -XX:+UseTransparentHugePages too: the THP advice, not the pool's.
  const char thp[] = "java\0-XX:+UseLargePages\0-XX:+UseTransparentHugePages\0-Xmx1g\0Main";
  list = advise_process(jvm_on_base_pages(thp, sizeof thp - 1), healthy_system());
  EXPECT_EQ(find(list, "jvm_pool_short"), std::nullopt) << ids(list);
}

TEST(DoctorPoolSettings, MariadbLargePagesWithThpOnIsJudgedByThePool) {
  process_report p = big_process("glibc", {}, "2.36");
  p.runtime = detect_runtime({"/usr/sbin/mariadbd"}, cmdline_of("mariadbd\0--large-pages"), {});
  ASSERT_TRUE(p.runtime.uses_pool);
  p = process_with(p, usage(memory_class::anonymous_mmap, 400 * mib));
  p.largest = {{0x7f0000000000, 528 * mib, 312 * mib, 0, 4096, "", "", false, {}, 1}};
  system_report s = healthy_system();
  s.pools[0].total = 64;
  s.pools[0].free = 11;
  const auto list = advise_process(p, s);
  const advice& a = only(list, "mariadb_pool_short");
  EXPECT_TRUE(mentions(a, "it needs 264 pages of 2 MiB, the pool has 11 free, 253 short"))
      << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=317");
}

// glibc.malloc.hugetlb=2 maps chunks and thread arenas from the pool: a pool too small is the
// fix, not THP or --collapse.
TEST(DoctorPoolSettings, GlibcHugetlb2IsJudgedByThePool) {
  process_report p =
      process_with(big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=2"}}, "2.36"),
                   usage(memory_class::glibc_thread_arenas, 700 * mib));
  system_report s = healthy_system();  // 600 pages of 2 MiB, 500 free
  s.pools[0].free = 100;
  auto list = advise_process(p, s);
  const advice& a = only(list, "glibc_hugetlb_pool_short");
  EXPECT_EQ(a.level(), advice_level::warning);
  EXPECT_TRUE(mentions(a,
                       "glibc's thread arenas (700 MiB), 0.0% huge; GLIBC_TUNABLES has "
                       "glibc.malloc.hugetlb=2"))
      << a.message;
  EXPECT_TRUE(mentions(a, "it needs at least 350 pages of 2 MiB")) << a.message;
  EXPECT_TRUE(mentions(a, "the pool has 100 free, 250 short: reserve 250 more pages of 2 MiB"))
      << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=850");
  EXPECT_EQ(find(list, "advised_but_not_huge"), std::nullopt) << ids(list);
  EXPECT_EQ(all_commands(list).find("--collapse"), std::string::npos) << all_commands(list);
  // On hugetlb pages: nothing.
  p.classes[0].huge = 700 * mib;
  EXPECT_TRUE(advise_process(p, s).empty()) << ids(advise_process(p, s));
}

// glibc.malloc.hugetlb=2 maps each chunk from the pool on its own, rounded up to whole pages:
// a python with a 600 MiB bytearray (a chunk of 600 MiB + 4 KiB: 301 pages) and
// two 132 KiB chunks (a page each) needed 303 pages, not the 301 its bytes make.
TEST(DoctorPoolSettings, GlibcHugetlb2CountsEachChunkInWholePages) {
  const auto anon = [](std::uintptr_t start, std::size_t size) {
    mapping_info m;
    m.start = start;
    m.end = start + size;
    m.permissions = "rw-p";
    m.kernel_page_bytes = 4096;
    m.rss = m.anonymous = size;
    return m;
  };
  const std::uintptr_t at = 0x7f0000000000;
  const std::vector<mapping_info> mappings = {anon(at, 600 * mib + 4096),
                                              anon(at + 700 * mib, 132 * 1024),
                                              anon(at + 800 * mib, 132 * 1024)};
  class_facts facts;
  facts.allocator = "glibc";
  facts.chunks.read = true;
  for (const mapping_info& m : mappings) facts.chunks.mappings.push_back({m.start, {m.size()}});
  const std::vector<memory_class_usage> classes = classify_memory(mappings, facts);
  ASSERT_EQ(classes.size(), 1u);
  EXPECT_EQ(classes[0].kind, memory_class::glibc_mmapped_chunks);
  EXPECT_EQ(classes[0].pool_bytes, 303 * 2 * mib);
  process_report p = process_with(
      big_process("glibc", {{"GLIBC_TUNABLES", "glibc.malloc.hugetlb=2"}}, "2.36"), classes[0]);
  system_report s = healthy_system();
  s.pools[0].total = 0;
  s.pools[0].free = 0;
  const auto list = advise_process(p, s);
  const advice& a = only(list, "glibc_hugetlb_pool_short");
  EXPECT_TRUE(mentions(a, "it needs at least 303 pages of 2 MiB")) << a.message;
  EXPECT_EQ(a.commands.at(0), "sysctl -w vm.nr_hugepages=303");
}

// Under the per-class threshold, hundreds of MiB on base pages that nothing reaches: a note that
// names the memory, says why, and what --collapse would do; never a quiet all-clear.
TEST(DoctorPoolSettings, UnreachedMemoryUnderTheThresholdIsANote) {
  process_report p = big_process("glibc", {}, "2.36");
  p = process_with(p, usage(memory_class::anonymous_mmap, 300 * mib));
  auto list = advise_process(p, healthy_system());
  ASSERT_EQ(list.size(), 1u) << ids(list);
  const advice& a = list[0];
  EXPECT_EQ(a.id(), "base_pages_out_of_reach");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_EQ(exit_code_of(list), exit_healthy);
  EXPECT_TRUE(mentions(a, "the program's own anonymous mappings (300 MiB)")) << a.message;
  EXPECT_TRUE(mentions(a, "300 MiB on base pages that no setting of the process reaches"))
      << a.message;
  EXPECT_TRUE(mentions(a, "without MADV_HUGEPAGE")) << a.message;
  EXPECT_TRUE(mentions(a, "raises it now (MADV_COLLAPSE), but nothing keeps it huge")) << a.message;
  EXPECT_EQ(a.commands, std::vector<std::string>{"hugepage-doctor --pid 4242 --collapse"});
  EXPECT_EQ(a.reaches, std::vector<std::string>{"anonymous_mmap"});
  // Two classes of 150 MiB: together.
  p.classes = {usage(memory_class::anonymous_mmap, 150 * mib),
               usage(memory_class::glibc_thread_arenas, 150 * mib)};
  list = advise_process(p, healthy_system());
  EXPECT_TRUE(
      mentions(only(list, "base_pages_out_of_reach"), "does not reach glibc's thread arenas"))
      << ids(list);
  // Under the floor: nothing to say.
  p.classes = {usage(memory_class::anonymous_mmap, 200 * mib)};
  EXPECT_TRUE(advise_process(p, healthy_system()).empty());
  // Node's heap: its options were checked (--use-largepages remaps code only).
  p.runtime.kind = "node";
  p.runtime.evidence = "executable /usr/bin/node";
  p.classes = {usage(memory_class::runtime_heap, 300 * mib)};
  EXPECT_TRUE(mentions(only(advise_process(p, healthy_system()), "base_pages_out_of_reach"),
                       "--use-largepages remaps its code only"));
  // A JVM's heap: -XX:+UseTransparentHugePages reaches it, so no "nothing reaches" note.
  p.runtime = detect_runtime({libjvm}, cmdline_of("java\0Main"), {});
  EXPECT_EQ(find(advise_process(p, healthy_system()), "base_pages_out_of_reach"), std::nullopt);
  // Advised by the program: its own madvise reaches it.
  p.runtime = {};
  p.classes = {usage(memory_class::anonymous_mmap, 300 * mib, 0, 0, 300 * mib)};
  EXPECT_EQ(find(advise_process(p, healthy_system()), "base_pages_out_of_reach"), std::nullopt);
}

// A static Go program (kubectl's layout: its executable, the first heap arena at 0xc000000000):
// recognised, its GODEBUG read, and a note that says no GODEBUG setting reaches its heap.
// Quiet all-clears seen live: hundreds of MiB on base pages in classes each under the
// 512 MiB threshold, which a setting not in effect would reach. Each gets a note naming the
// memory and the setting (exit 0: a note), never "nothing to change".
TEST(DoctorPoolSettings, ReachableMemoryUnderTheThresholdIsNeverAQuietAllClear) {
  const system_report s = healthy_system();
  // One 400 MiB malloc: glibc.malloc.hugetlb=1 reaches its chunk.
  process_report p = process_with(big_process("glibc", {}, "2.36"),
                                  usage(memory_class::glibc_mmapped_chunks, 400 * mib));
  auto list = advise_process(p, s);
  ASSERT_EQ(list.size(), 1u) << ids(list);
  EXPECT_EQ(list[0].id(), "glibc_without_hugetlb_tunable");
  EXPECT_EQ(list[0].level(), advice_level::note);
  EXPECT_TRUE(mentions(list[0], "glibc's mmapped chunks (400 MiB)")) << list[0].message;
  EXPECT_TRUE(mentions(list[0], "runs without glibc.malloc.hugetlb=1")) << list[0].message;
  EXPECT_EQ(list[0].commands,
            std::vector<std::string>{"export GLIBC_TUNABLES=glibc.malloc.hugetlb=1"});
  EXPECT_EQ(exit_code_of(list), exit_healthy);
  // The same in a static binary: the linked-in allocator's note, with --collapse.
  process_report linked = p;
  linked.allocator = describe_allocator({"unknown", "", ""}, true, {});
  list = advise_process(linked, s);
  EXPECT_EQ(only(list, "allocator_linked_in").level(), advice_level::note) << ids(list);
  // 240 MiB of its own mmap and 240 MiB malloc'd: the setting for the one, why nothing reaches
  // the other; each alone is under the 256 MiB floor.
  p.classes = {usage(memory_class::anonymous_mmap, 240 * mib),
               usage(memory_class::glibc_mmapped_chunks, 240 * mib)};
  list = advise_process(p, s);
  EXPECT_EQ(only(list, "glibc_without_hugetlb_tunable").level(), advice_level::note) << ids(list);
  const advice& own = only(list, "base_pages_out_of_reach");
  EXPECT_TRUE(mentions(own, "the program's own anonymous mappings (240 MiB)")) << own.message;
  EXPECT_NE(std::find(own.evidence.begin(), own.evidence.end(),
                      "each class under 512 MiB, together 480 MiB on base pages"),
            own.evidence.end());
  // Node's Buffer.alloc(400 MiB): a malloc'd chunk, which the glibc tunable reaches.
  p.runtime.kind = "node";
  p.runtime.evidence = "executable /usr/bin/node";
  p.classes = {usage(memory_class::glibc_mmapped_chunks, 400 * mib)};
  EXPECT_EQ(only(advise_process(p, s), "glibc_without_hugetlb_tunable").level(),
            advice_level::note);
  // A JVM with a 450 MiB heap and no flags: -XX:+UseTransparentHugePages.
  p.runtime = detect_runtime({libjvm}, cmdline_of("java\0-Xmx450m\0Sleep"), {});
  p.classes = {usage(memory_class::runtime_heap, 450 * mib)};
  list = advise_process(p, s);
  const advice& jvm = only(list, "jvm_without_thp");
  EXPECT_EQ(jvm.level(), advice_level::note);
  EXPECT_EQ(jvm.commands,
            std::vector<std::string>{"export JAVA_TOOL_OPTIONS=-XX:+UseTransparentHugePages"});
  // A few MiB in a class next to them get no advice of their own.
  p.classes.push_back(usage(memory_class::glibc_main_arena, 1 * mib));
  EXPECT_EQ(advise_process(p, s).size(), 1u) << ids(advise_process(p, s));
}

TEST(DoctorPoolSettings, GoHeapIsToldAndItsGodebugChecked) {
  mapping_info exe, heap, other;
  exe.start = 0x400000;
  exe.end = 0x1d25000;
  exe.permissions = "r-xp";
  exe.name = "/usr/bin/kubectl";
  heap.start = 0xc000000000;
  heap.end = 0xc000c00000;
  heap.permissions = "rw-p";
  other = heap;
  other.start = 0x7f0000000000;
  other.end = 0x7f0000200000;
  runtime_report r;
  detect_go(r, {exe, other}, {});
  EXPECT_EQ(r.kind, "");  // nothing at 0xc000000000
  detect_go(r, {exe, heap, other}, {{"GODEBUG", "madvdontneed=1,disablethp=1"}});
  EXPECT_EQ(r.kind, "go");
  EXPECT_EQ(r.settings, std::vector<std::string>{"GODEBUG=madvdontneed=1,disablethp=1"});
  runtime_report jvm = detect_runtime({libjvm}, cmdline_of("java\0Main"), {});
  detect_go(jvm, {exe, heap}, {});
  EXPECT_EQ(jvm.kind, "jvm");  // a runtime already told is kept
  EXPECT_TRUE(godebug_disables_thp("disablethp=1"));
  EXPECT_FALSE(godebug_disables_thp("disablethp=1,disablethp=0"));
  EXPECT_FALSE(godebug_disables_thp("xdisablethp=1"));

  process_report p = big_process("unknown");
  p.allocator.guess.library.clear();
  p.runtime = r;
  p = process_with(p, usage(memory_class::runtime_heap, 1 * gib));
  auto list = advise_process(p, healthy_system());
  const advice& a = only(list, "go_heap_out_of_reach");
  EXPECT_EQ(a.level(), advice_level::note);
  EXPECT_TRUE(mentions(a, "no GODEBUG setting makes it")) << a.message;
  EXPECT_TRUE(mentions(a, "this process has GODEBUG=madvdontneed=1,disablethp=1")) << a.message;
  // Whether the runtime acted on it is smaps' VmFlags nh on the heap arena, not the environment.
  EXPECT_TRUE(mentions(a, "smaps' VmFlags were not checked")) << a.message;
  p.largest = {{0xc000000000, 1 * gib, 1 * gib, 0, 4096, "", "", false, {}, 1}};
  list = advise_process(p, healthy_system());
  EXPECT_TRUE(mentions(only(list, "go_heap_out_of_reach"),
                       "yet its heap is not marked MADV_NOHUGEPAGE (no nh in smaps VmFlags)"))
      << only(list, "go_heap_out_of_reach").message;
  p.largest[0].flags = "nh";
  list = advise_process(p, healthy_system());
  EXPECT_TRUE(mentions(only(list, "go_heap_out_of_reach"),
                       "marked the heap MADV_NOHUGEPAGE (smaps VmFlags nh)"))
      << only(list, "go_heap_out_of_reach").message;
  // Not the static-binary advice, which would offer GLIBC_TUNABLES.
  EXPECT_EQ(find(list, "allocator_linked_in"), std::nullopt) << ids(list);
  // 300 MiB: under the threshold, still no quiet all-clear, and the Go reason.
  p.runtime.settings.clear();
  p.classes = {usage(memory_class::runtime_heap, 300 * mib)};
  list = advise_process(p, healthy_system());
  EXPECT_TRUE(mentions(only(list, "base_pages_out_of_reach"), "not since Go 1.21.1"));
}

}  // namespace
}  // namespace hugepage::doctor
