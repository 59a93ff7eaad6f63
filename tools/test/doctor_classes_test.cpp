// tools/test/doctor_classes_test.cpp - a process's memory by the mechanism that maps it: the
// classifier on hand-made mappings and stored captures. The real doctor on a child and --capture:
// doctor_classes_live_test.cpp.
#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "capture.hpp"
#include "collect_process.hpp"
#include "doctor_classes_support.hpp"
#include "doctor_cli_support.hpp"
#include "mapping_summary.hpp"
#include "memory_classes.hpp"
#include "mounts.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "thp_disabler.hpp"

namespace {

namespace hd = hugepage::doctor;
using hd::memory_class;
using hugepage::mapping_info;
using hugepage::units::kib;
using hugepage::units::mib;

using doctor_classes::base;
using doctor_classes::evidence_of;
using doctor_classes::find;
using doctor_classes::glibc_facts;
using doctor_classes::mapping;
using doctor_classes::mount_huge_of;
using doctor_classes::page;
using doctor_classes::resident_of;
using doctor_classes::resident_sum;

// ---- the classifier ----------------------------------------------------------------------------

TEST(DoctorClasses, ThreadArenaIsA64MiBReservationOnA64MiBBoundary) {
  const std::vector<mapping_info> maps = {
      // used part rw-p, the rest of the 64 MiB ---p right after it
      mapping(base, 8 * mib, "rw-p", "", 8 * mib),
      mapping(base + 8 * mib, 56 * mib, "---p", "", 0),
      // a whole 64 MiB heap, all rw-p
      mapping(base + 64 * mib, 64 * mib, "rw-p", "", 3 * mib),
      // 64 MiB, but 2 MiB off a 64 MiB boundary: the program's own mmap
      mapping(base + 130 * mib, 64 * mib, "rw-p", "", 5 * mib),
      // aligned, but the two parts are 66 MiB together
      mapping(base + 256 * mib, 2 * mib, "rw-p", "", 2 * mib),
      mapping(base + 258 * mib, 64 * mib, "---p", "", 0),
  };
  const auto classes = hd::classify_memory(maps, glibc_facts());
  const auto* arenas = find(classes, memory_class::glibc_thread_arenas);
  ASSERT_NE(arenas, nullptr);
  EXPECT_EQ(arenas->resident, 11 * mib);
  EXPECT_EQ(arenas->mappings, 3u);
  EXPECT_EQ(arenas->largest_mapping, 64 * mib);
  EXPECT_EQ(arenas->evidence, "64 MiB heaps, heap_info unchecked");  // stored files
  const auto* other = find(classes, memory_class::anonymous_mmap);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->resident, 7 * mib);
  EXPECT_EQ(other->mappings, 3u);
  // With the heap_info headers read: only a heap whose header checks out is glibc's.
  hd::class_facts read = glibc_facts();
  read.chunks.read = read.chunks.heaps_read = true;
  read.chunks.heaps = {base + 64 * mib};
  const auto checked = hd::classify_memory(maps, read);
  EXPECT_EQ(resident_of(checked, memory_class::glibc_thread_arenas), 3 * mib);
  EXPECT_EQ(evidence_of(checked, memory_class::glibc_thread_arenas),
            "64 MiB-aligned heaps, heap_info");
  EXPECT_EQ(resident_of(checked, memory_class::anonymous_mmap), 15 * mib);
  // Another malloc's 64 MiB-aligned mappings are its own, not glibc arenas.
  hd::class_facts jemalloc;
  jemalloc.allocator = "jemalloc";
  const auto theirs = hd::classify_memory(maps, jemalloc);
  EXPECT_EQ(find(theirs, memory_class::glibc_thread_arenas), nullptr);
  ASSERT_NE(find(theirs, memory_class::allocator_arenas), nullptr);
  EXPECT_EQ(resident_of(theirs, memory_class::allocator_arenas), 18 * mib);
  EXPECT_EQ(evidence_of(theirs, memory_class::allocator_arenas), "malloc is jemalloc");
  // musl's malloc is no glibc either: its [heap] and mappings are its own arenas.
  hd::class_facts musl;
  musl.allocator = "musl";
  const auto its = hd::classify_memory(maps, musl);
  EXPECT_EQ(find(its, memory_class::glibc_thread_arenas), nullptr);
  EXPECT_EQ(resident_of(its, memory_class::allocator_arenas), 18 * mib);
  EXPECT_EQ(evidence_of(its, memory_class::allocator_arenas), "malloc is musl");
}

// heap_info as glibc 2.36 wrote it in a program whose three threads each filled two heaps.
TEST(DoctorClasses, HeapInfoHeader) {
  constexpr std::uintptr_t first = 0x7f4f8c000000, second = 0x7f4f74000000;
  std::uint64_t arena_head[4] = {first + 48, 0, 64 * mib, 64 * mib};
  EXPECT_TRUE(hd::is_heap_info(arena_head, first, 64 * mib, page));
  std::uint64_t later[4] = {first + 48, first, 0x1935000, 0x1935000};
  EXPECT_TRUE(hd::is_heap_info(later, second, 0x1935000, page));
  std::uint64_t old_glibc[4] = {first + 32, 0, 8 * mib, 8 * mib};  // before 2.35: 32 bytes
  EXPECT_TRUE(hd::is_heap_info(old_glibc, first, 8 * mib, page));
  std::uint64_t shrunk[4] = {first + 48, 0, 4 * mib, 8 * mib};  // size below mprotect_size
  EXPECT_TRUE(hd::is_heap_info(shrunk, first, 8 * mib, page));

  std::uint64_t zeros[4] = {0, 0, 0, 0};
  EXPECT_FALSE(hd::is_heap_info(zeros, first, 64 * mib - page, page));
  std::uint64_t ones[4];
  std::memset(ones, 1, sizeof ones);
  EXPECT_FALSE(hd::is_heap_info(ones, first, 64 * mib - page, page));
  std::uint64_t other_rw[4] = {first + 48, 0, 8 * mib, 8 * mib};  // rw-p part is not 8 MiB
  EXPECT_FALSE(hd::is_heap_info(other_rw, first, 64 * mib - page, page));
  std::uint64_t too_big[4] = {first + 48, 0, 9 * mib, 8 * mib};  // size over mprotect_size
  EXPECT_FALSE(hd::is_heap_info(too_big, first, 8 * mib, page));
  std::uint64_t elsewhere[4] = {second + 48, 0, 8 * mib, 8 * mib};  // first heap, arena not here
  EXPECT_FALSE(hd::is_heap_info(elsewhere, first, 8 * mib, page));
  std::uint64_t off[4] = {first + 64, first, 8 * mib, 8 * mib};  // not right after a heap_info
  EXPECT_FALSE(hd::is_heap_info(off, second, 8 * mib, page));
  std::uint64_t self[4] = {second + 48, first, 8 * mib, 8 * mib};  // a later heap's own arena
  EXPECT_FALSE(hd::is_heap_info(self, second, 8 * mib, page));
  std::uint64_t prev_off[4] = {first + 48, first + page, 8 * mib, 8 * mib};
  EXPECT_FALSE(hd::is_heap_info(prev_off, second, 8 * mib, page));
}

TEST(DoctorClasses, HeapStackAndChunksByAllocatorAndRuntime) {
  const std::vector<mapping_info> maps = {
      mapping(0x55000000, 132 * kib, "rw-p", "[heap]", 100 * kib),
      mapping(base, 1028 * kib, "rw-p", "", 1024 * kib),      // a chunk
      mapping(base + 4 * mib, 3 * mib, "rw-p", "", 3 * mib),  // not a chunk
      mapping(0x7ffd0000000, 132 * kib, "rw-p", "[stack]", 12 * kib),
  };
  hd::class_facts f = glibc_facts();
  f.chunks.read = true;
  f.chunks.mappings = {{base, {1028 * kib}}};
  auto classes = hd::classify_memory(maps, f);
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(resident_of(classes, memory_class::glibc_main_arena), 100 * kib);
  const auto* chunks = find(classes, memory_class::glibc_mmapped_chunks);
  ASSERT_NE(chunks, nullptr);
  EXPECT_EQ(chunks->resident, 1024 * kib);
  EXPECT_EQ(chunks->in_small_mappings, 1024 * kib);
  EXPECT_EQ(chunks->in_small_chunks, 1024 * kib);
  EXPECT_EQ(chunks->evidence, "chunk headers");
  EXPECT_EQ(resident_of(classes, memory_class::anonymous_mmap), 3 * mib + 12 * kib);

  // Headers unreadable: the chunk stays in anonymous_mmap, and the evidence says why.
  hd::class_facts unread = glibc_facts();
  unread.chunks.evidence = "chunk headers unreadable (EPERM)";
  classes = hd::classify_memory(maps, unread);
  EXPECT_EQ(find(classes, memory_class::glibc_mmapped_chunks), nullptr);
  EXPECT_EQ(resident_of(classes, memory_class::anonymous_mmap), 4 * mib + 12 * kib);
  EXPECT_EQ(evidence_of(classes, memory_class::anonymous_mmap), unread.chunks.evidence);

  // A JVM: its own mappings are its heap; glibc's [heap] and chunks stay glibc's, stacks too.
  f.runtime = "jvm";
  classes = hd::classify_memory(maps, f);
  EXPECT_EQ(resident_of(classes, memory_class::runtime_heap), 3 * mib);
  EXPECT_EQ(evidence_of(classes, memory_class::runtime_heap), "runtime jvm");
  EXPECT_EQ(resident_of(classes, memory_class::glibc_mmapped_chunks), 1024 * kib);
  EXPECT_EQ(resident_of(classes, memory_class::glibc_main_arena), 100 * kib);
  EXPECT_EQ(resident_of(classes, memory_class::anonymous_mmap), 12 * kib);

  // Node, known only by its binary.
  std::vector<mapping_info> node = maps;
  node.push_back(mapping(0x400000, 40 * mib, "r-xp", "/usr/bin/node", 30 * mib));
  classes = hd::classify_memory(node, glibc_facts());
  ASSERT_NE(find(classes, memory_class::runtime_heap), nullptr);
  EXPECT_EQ(resident_of(classes, memory_class::runtime_heap), 4 * mib);
  EXPECT_EQ(evidence_of(classes, memory_class::runtime_heap), "runtime node");
  EXPECT_EQ(resident_of(classes, memory_class::file), 30 * mib);

  // A file called node that a program maps is no Node: only its executable, the first file
  // mapped, or libnode.so is.
  std::vector<mapping_info> named = maps;
  named.insert(named.begin(), mapping(0x40000000, 1 * mib, "r-xp", "/usr/bin/prog", 1 * mib));
  named.push_back(mapping(0x7f9000000000, 4 * kib, "r--p", "/tmp/x/node", 4 * kib));
  hd::class_facts said_node = glibc_facts();
  said_node.runtime = "node";  // as runtime detection said before it looked at the executable
  classes = hd::classify_memory(named, said_node);
  EXPECT_EQ(find(classes, memory_class::runtime_heap), nullptr);
  EXPECT_EQ(resident_of(classes, memory_class::anonymous_mmap), 4 * mib + 12 * kib);
  const std::vector<std::string> paths = {"/usr/bin/prog", "/usr/lib/libc.so.6", "/tmp/x/node"};
  EXPECT_EQ(hd::detect_runtime(paths, "", {}).kind, "");
  EXPECT_EQ(hd::detect_runtime({"/usr/bin/node", "/usr/lib/libc.so.6"}, "", {}).kind, "node");
  named.push_back(mapping(0x7fa000000000, 4 * mib, "r-xp", "/usr/lib/libnode.so.108", 4 * mib));
  classes = hd::classify_memory(named, glibc_facts());
  EXPECT_EQ(resident_of(classes, memory_class::runtime_heap), 4 * mib);

  // mimalloc: [heap] and every private anonymous mapping but stacks are its own.
  hd::class_facts mi;
  mi.allocator = "mimalloc";
  mi.chunks = f.chunks;  // a header-shaped word means nothing under another malloc
  classes = hd::classify_memory(maps, mi);
  EXPECT_EQ(resident_of(classes, memory_class::allocator_arenas), 4 * mib + 100 * kib);
  EXPECT_EQ(resident_of(classes, memory_class::anonymous_mmap), 12 * kib);
  EXPECT_EQ(find(classes, memory_class::glibc_main_arena), nullptr);
}

TEST(DoctorClasses, MergedChunksShareTheirSmallBytesOutBySize) {
  // Three adjacent chunks the kernel merged: 1 MiB and 3 MiB (small) and 4 MiB (not).
  const std::vector<mapping_info> maps = {mapping(base, 8 * mib, "rw-p", "", 8 * mib)};
  hd::class_facts f = glibc_facts();
  f.chunks.read = true;
  f.chunks.mappings = {{base, {1 * mib, 1 * mib, 2 * mib, 4 * mib}}};
  const auto classes = hd::classify_memory(maps, f);
  const auto* chunks = find(classes, memory_class::glibc_mmapped_chunks);
  ASSERT_NE(chunks, nullptr);
  EXPECT_EQ(chunks->in_small_chunks, 2 * mib);  // the 2 MiB chunk is a THP's size: not small
  // One 8 MiB record: THP always or a collapse reaches all of it, small chunks or not.
  EXPECT_EQ(chunks->in_small_mappings, 0u);
  EXPECT_EQ(chunks->mappings, 1u);
  EXPECT_EQ(chunks->evidence, "chunk headers");
}

// The kernel merges a chunk with any anonymous neighbour of its flags (ld.so's small mapping
// below libc, the program's own mmap): the chunks fill part of the record, whose bytes are shared
// out by size, the rest going where it would without chunks.
TEST(DoctorClasses, ChunksInPartOfARecordShareItBySize) {
  mapping_info merged = mapping(base, 4 * mib + 64 * kib, "rw-p", "", 4 * mib + 64 * kib);
  merged.anon_huge = 2 * mib + 32 * kib;  // not a real count: only to see it shared out
  const std::vector<mapping_info> maps = {
      merged, mapping(base + 100 * mib, 1 * mib, "rw-p", "", 1 * mib),  // the program's own, small
  };
  hd::class_facts f = glibc_facts();
  f.chunks.read = true;
  f.chunks.mappings = {{base, {1 * mib, 3 * mib}}};  // 64 KiB of the record is no chunk
  auto classes = hd::classify_memory(maps, f);
  const auto* chunks = find(classes, memory_class::glibc_mmapped_chunks);
  ASSERT_NE(chunks, nullptr);
  EXPECT_EQ(chunks->resident, 4 * mib);
  EXPECT_EQ(chunks->huge, 2 * mib);
  EXPECT_EQ(chunks->in_small_chunks, 1 * mib);
  EXPECT_EQ(chunks->in_small_mappings, 0u);
  EXPECT_EQ(chunks->mappings, 1u);
  EXPECT_EQ(chunks->evidence, "chunk headers, by size");
  const auto* other = find(classes, memory_class::anonymous_mmap);
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->resident, 1 * mib + 64 * kib);
  EXPECT_EQ(other->huge, 32 * kib);
  EXPECT_EQ(other->in_small_mappings, 1 * mib);
  EXPECT_EQ(other->in_small_chunks, 0u);
  EXPECT_EQ(other->mappings, 2u);
  EXPECT_EQ(resident_sum(classes), 5 * mib + 64 * kib);

  // Node: glibc's chunks beside V8's memory; the rest is the runtime's.
  std::vector<mapping_info> node = maps;
  node.insert(node.begin(), mapping(0x400000, 4 * kib, "r-xp", "/usr/bin/node", 0));
  f.runtime = "node";
  classes = hd::classify_memory(node, f);
  EXPECT_EQ(resident_of(classes, memory_class::glibc_mmapped_chunks), 4 * mib);
  EXPECT_EQ(resident_of(classes, memory_class::runtime_heap), 1 * mib + 64 * kib);
  EXPECT_EQ(resident_sum(classes), 5 * mib + 64 * kib);
}

TEST(DoctorClasses, ChunkHeaderAndCandidates) {
  // size = mapping length, IS_MMAPPED; memalign's offset in prev_size.
  EXPECT_EQ(hd::mmapped_chunk_span(0, 1028 * kib | 2, page), 1028 * kib);
  EXPECT_EQ(hd::mmapped_chunk_span(64, (1028 * kib - 64) | 2, page), 1028 * kib);
  EXPECT_EQ(hd::mmapped_chunk_span(0, 1028 * kib | 3, page), 0u);  // PREV_INUSE: an arena chunk
  EXPECT_EQ(hd::mmapped_chunk_span(0, 1028 * kib | 6, page), 0u);  // NON_MAIN_ARENA
  EXPECT_EQ(hd::mmapped_chunk_span(0, 1028 * kib, page), 0u);      // not mmapped
  EXPECT_EQ(hd::mmapped_chunk_span(0, (1028 * kib + 16) | 2, page), 0u);  // not whole pages
  EXPECT_EQ(hd::mmapped_chunk_span(0, 2, page), 0u);
  EXPECT_EQ(hd::mmapped_chunk_span(~std::uint64_t{0} - 15, 1028 * kib | 2, page), 0u);

  mapping_info named = mapping(base + 600 * mib, 1 * mib, "rw-p", "[anon:cache]", 1 * mib);
  mapping_info hg = mapping(base + 700 * mib, 2 * mib, "rw-p", "", 2 * mib);
  hg.kernel_page_bytes = 2 * mib;
  const std::vector<mapping_info> maps = {
      mapping(base, 8 * mib, "rw-p", "", 8 * mib),  // thread arena
      mapping(base + 8 * mib, 56 * mib, "---p", "", 0),
      mapping(base + 100 * mib, 1028 * kib, "rw-p", "", 1024 * kib),  // candidate
      mapping(base + 200 * mib, 124 * kib, "rw-p", "", 124 * kib),    // below 128 KiB
      mapping(base + 300 * mib, 1028 * kib, "rw-p", "", 0),           // nothing resident
      mapping(base + 400 * mib, 1028 * kib, "r--p", "", 4 * kib),     // not writable
      mapping(base + 500 * mib, 1028 * kib, "rw-s", "", 4 * kib),     // shared
      named,
      hg,
      mapping(0x55000000, 1 * mib, "rw-p", "[heap]", 1 * mib),
  };
  EXPECT_EQ(hd::chunk_candidates(maps), std::vector<std::size_t>{2});
}

TEST(DoctorClasses, SharedMemoryAndTmpfsMounts) {
  const std::string mountinfo =
      "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
      "23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=100k\n"
      "24 23 0:23 / /dev/shm rw shared:3 - tmpfs tmpfs rw,size=4096k\n"
      "25 24 0:24 / /dev/shm rw - tmpfs tmpfs rw,size=8192k,huge=within_size\n"
      "26 22 0:25 / /run rw,nosuid - tmpfs tmpfs rw,mode=755\n"
      "27 22 0:26 / /mnt rw - tmpfs tmpfs rw,huge=always\n"
      "28 27 254:1 / /mnt/disk rw - ext4 /dev/vdb rw\n"
      "29 22 0:27 / /srv/my\\040data rw - tmpfs tmpfs rw,huge=advise\n"
      "30 27 0:24 / /mnt/shm rw - tmpfs tmpfs rw,size=8192k,huge=within_size\n";
  const auto mounts = hd::parse_mount_entries(mountinfo);
  ASSERT_EQ(mounts.size(), 9u);
  EXPECT_EQ(mounts[8].device, "0:24");
  EXPECT_EQ(mounts[0].fstype, "ext4");
  EXPECT_EQ(mounts[0].huge, "");
  EXPECT_EQ(mounts[2].huge, "never");  // tmpfs without huge=: its default
  EXPECT_EQ(mounts[3].huge, "within_size");
  EXPECT_EQ(mounts[7].point, "/srv/my data");
  EXPECT_EQ(mounts[7].huge, "advise");

  mapping_info pmd = mapping(base + 30 * mib, 4 * mib, "rw-s", "/memfd:cache (deleted)", 4 * mib);
  pmd.shmem_huge = 2 * mib;
  const std::vector<mapping_info> maps = {
      mapping(base, 1 * mib, "rw-s", "/dev/shm/queue (deleted)", 1 * mib),
      mapping(base + 10 * mib, 2 * mib, "rw-s", "/run/lock/x", 512 * kib),
      mapping(base + 20 * mib, 3 * mib, "rw-s", "/mnt/disk/log", 3 * mib),  // ext4 over tmpfs
      pmd,
      mapping(base + 40 * mib, 1 * mib, "rw-s", "/SYSV0000abcd (deleted)", 256 * kib),
      mapping(base + 50 * mib, 1 * mib, "rw-s", "/dev/zero (deleted)", 128 * kib),
      mapping(base + 60 * mib, 1 * mib, "rw-s", "", 64 * kib),  // shared anonymous, unnamed
      mapping(base + 70 * mib, 1 * mib, "rw-p", "/mnt/scratch", 32 * kib),
      mapping(base + 80 * mib, 1 * mib, "rw-s", "/srv/my data/f", 16 * kib),
  };
  hd::class_facts f = glibc_facts();
  f.mounts = mounts;
  const auto classes = hd::classify_memory(maps, f);
  const auto* shm = find(classes, memory_class::tmpfs_file, "/dev/shm");
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->resident, 1 * mib);
  EXPECT_EQ(shm->mount_huge, "within_size");  // the later of the two mounts on /dev/shm
  ASSERT_NE(find(classes, memory_class::tmpfs_file, "/run"), nullptr);
  EXPECT_EQ(mount_huge_of(classes, memory_class::tmpfs_file, "/run"), "never");
  ASSERT_NE(find(classes, memory_class::tmpfs_file, "/mnt"), nullptr);
  EXPECT_EQ(resident_of(classes, memory_class::tmpfs_file, "/mnt"), 32 * kib);
  EXPECT_EQ(mount_huge_of(classes, memory_class::tmpfs_file, "/mnt"), "always");
  // /mnt/shm binds the /dev/shm tmpfs (0:24, the later mount on /dev/shm): one superblock, so a
  // remount through either changes huge= for both.
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->same_superblock, std::vector<std::string>{"/mnt/shm"});
  EXPECT_TRUE(find(classes, memory_class::tmpfs_file, "/run")->same_superblock.empty());
  ASSERT_NE(find(classes, memory_class::tmpfs_file, "/srv/my data"), nullptr);
  EXPECT_EQ(resident_of(classes, memory_class::file), 3 * mib);
  const auto* shared = find(classes, memory_class::shared_anonymous);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->resident, 4 * mib + 256 * kib + 128 * kib + 64 * kib);
  EXPECT_EQ(shared->huge, 2 * mib);
  EXPECT_EQ(shared->mappings, 4u);
  EXPECT_EQ(shared->mount, "");

  // Stored files carry no mountinfo: /dev/shm is taken for tmpfs, its option unknown.
  const auto stored = hd::classify_memory(maps, glibc_facts());
  ASSERT_NE(find(stored, memory_class::tmpfs_file, "/dev/shm"), nullptr);
  EXPECT_EQ(mount_huge_of(stored, memory_class::tmpfs_file, "/dev/shm"), "unknown");
  EXPECT_EQ(find(stored, memory_class::tmpfs_file, "/run"), nullptr);
}

TEST(DoctorClasses, SumsOrderAndHugeShares) {
  mapping_info pool = mapping(base + 512 * mib, 64 * mib, "rw-p", "/anon_hugepage (deleted)", 0);
  pool.kernel_page_bytes = 2 * mib;
  pool.private_hugetlb = 32 * mib;
  mapping_info thp = mapping(base + 256 * mib, 16 * mib, "rw-p", "", 16 * mib);
  thp.anon_huge = 12 * mib;
  thp.vm_flags = "rd wr mr mw me ac hg";
  mapping_info lib = mapping(0x7f8000000000, 4 * mib, "r-xp", "/usr/lib/libbig.so", 4 * mib);
  lib.file_huge = 2 * mib;
  const std::vector<mapping_info> maps = {
      mapping(0x55000000, 1 * mib, "rw-p", "[heap]", 1 * mib),
      thp,
      mapping(base + 300 * mib, 1 * mib, "rw-p", "", 0),  // nothing resident
      mapping(base + 310 * mib, 512 * kib, "rw-p", "", 256 * kib),
      pool,
      lib,
      mapping(0x7f9000000000, 8 * kib, "r-xp", "[vdso]", 8 * kib),
  };
  const auto classes = hd::classify_memory(maps, glibc_facts());
  const hd::process_report p = hd::summarize_mappings(maps, 10);
  EXPECT_EQ(resident_sum(classes), p.rss + p.hugetlb_total());
  // Largest first, nothing empty.
  ASSERT_EQ(classes.size(), 4u);
  EXPECT_EQ(classes[0].kind, memory_class::hugetlb);
  EXPECT_EQ(classes[0].resident, 32 * mib);
  EXPECT_EQ(classes[0].huge, 32 * mib);
  EXPECT_EQ(classes[1].kind, memory_class::anonymous_mmap);
  EXPECT_EQ(classes[1].resident, 16 * mib + 256 * kib);
  EXPECT_EQ(classes[1].huge, 12 * mib);
  EXPECT_EQ(classes[1].advised, 16 * mib);
  EXPECT_EQ(classes[1].in_small_mappings, 256 * kib);
  EXPECT_EQ(classes[1].mappings, 3u);
  EXPECT_EQ(classes[1].largest_mapping, 16 * mib);
  EXPECT_DOUBLE_EQ(classes[1].huge_fraction(), 12.0 / 16.25);
  EXPECT_EQ(classes[2].kind, memory_class::file);
  EXPECT_EQ(classes[2].resident, 4 * mib + 8 * kib);
  EXPECT_EQ(classes[2].huge, 2 * mib);
  EXPECT_EQ(classes[3].kind, memory_class::glibc_main_arena);
  for (std::size_t i = 1; i < classes.size(); ++i) {
    EXPECT_GE(classes[i - 1].resident, classes[i].resident);
  }
}

TEST(DoctorClasses, WhoDisabledThp) {
  EXPECT_EQ(hd::thp_disabler_of(true, std::nullopt), hd::thp_disabler::none);
  EXPECT_EQ(hd::thp_disabler_of(false, true), hd::thp_disabler::process);
  EXPECT_EQ(hd::thp_disabler_of(false, false), hd::thp_disabler::inherited);
  EXPECT_EQ(hd::thp_disabler_of(false, std::nullopt), hd::thp_disabler::unknown);
  EXPECT_EQ(hd::thp_disabler_of(std::nullopt, true), hd::thp_disabler::unknown);
  hd::process_files files;
  files.status = "Name:\tx\nPPid:\t1\nTHP_enabled:\t0\n";
  files.parent_status = "Name:\tsh\nTHP_enabled:\t0\n";
  EXPECT_EQ(hd::build_process_report(2, files, 10, "/nonexistent").thp_disabled_by,
            hd::thp_disabler::inherited);
  files.parent_status = "Name:\tsh\nTHP_enabled:\t1\n";
  EXPECT_EQ(hd::build_process_report(2, files, 10, "/nonexistent").thp_disabled_by,
            hd::thp_disabler::process);
  files.parent_status.reset();
  EXPECT_EQ(hd::build_process_report(2, files, 10, "/nonexistent").thp_disabled_by,
            hd::thp_disabler::unknown);
}

// The captures of real services: classes from smaps and names alone, summing exactly.
TEST(DoctorClasses, StoredServicesSumToRssAndHugetlb) {
  const std::string services = std::string(HUGEPAGE_DOCTOR_DATA) + "/services/";
  std::map<std::string, hd::process_report> reports;
  for (const std::string name :
       {"glibc", "jemalloc", "jvm-plain", "postgres-huge-pages-on", "redis", "mimalloc-2.0"}) {
    SCOPED_TRACE(name);
    std::string error;
    const auto captured = hd::read_capture(services + name, error);
    ASSERT_TRUE(captured.has_value()) << error;
    const hd::process_report p =
        hd::build_process_report(captured->pid, captured->files, 10, "/nonexistent");
    ASSERT_FALSE(p.classes.empty());
    EXPECT_EQ(resident_sum(p.classes), p.rss + p.hugetlb_total());
    for (std::size_t i = 0; i < p.classes.size(); ++i) {
      EXPECT_GT(p.classes[i].resident, 0u);
      if (i > 0) {
        EXPECT_GE(p.classes[i - 1].resident, p.classes[i].resident);
      }
    }
    reports[name] = p;
  }
  const auto has = [&](const std::string& name, memory_class kind) {
    return find(reports[name].classes, kind) != nullptr;
  };
  EXPECT_TRUE(has("glibc", memory_class::glibc_main_arena));
  // The capture holds the chunk headers the live doctor read: perl's 600 MiB string is a chunk.
  EXPECT_TRUE(has("glibc", memory_class::glibc_mmapped_chunks));
  EXPECT_TRUE(has("jemalloc", memory_class::allocator_arenas));
  EXPECT_FALSE(has("jemalloc", memory_class::glibc_main_arena));
  EXPECT_TRUE(has("jvm-plain", memory_class::runtime_heap));
  EXPECT_TRUE(has("postgres-huge-pages-on", memory_class::hugetlb));
  EXPECT_TRUE(has("mimalloc-2.0", memory_class::allocator_arenas));
}

}  // namespace
