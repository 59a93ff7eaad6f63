// tools/test/doctor_classes_test.cpp - a process's memory by the mechanism that maps it: the
// classifier on hand-made mappings and stored captures, and the real doctor on a child whose
// glibc chunks, thread arenas, memfd and /dev/shm file are known.
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

constexpr std::uintptr_t base = 0x7f0000000000;  // on a 64 MiB boundary
constexpr std::size_t page = 4 * kib;

mapping_info mapping(std::uintptr_t start, std::size_t size, const std::string& perms,
                     const std::string& name, std::size_t rss) {
  mapping_info m;
  m.start = start;
  m.end = start + size;
  m.permissions = perms;
  m.name = name;
  m.kernel_page_bytes = page;
  m.rss = rss;
  const bool file = !name.empty() && name.front() == '/';
  m.anonymous = file || perms[3] == 's' ? 0 : rss;
  return m;
}

hd::class_facts glibc_facts() {
  hd::class_facts f;
  f.allocator = "glibc";
  return f;
}

const hd::memory_class_usage* find(const std::vector<hd::memory_class_usage>& classes,
                                   memory_class kind, const std::string& mount = "") {
  for (const auto& c : classes) {
    if (c.kind == kind && c.mount == mount) return &c;
  }
  return nullptr;
}

// A class's field, 0 or "" when the class is missing (so a missing class fails, not crashes).
std::size_t resident_of(const std::vector<hd::memory_class_usage>& classes, memory_class kind,
                        const std::string& mount = "") {
  const auto* c = find(classes, kind, mount);
  return c == nullptr ? 0 : c->resident;
}
std::string evidence_of(const std::vector<hd::memory_class_usage>& classes, memory_class kind) {
  const auto* c = find(classes, kind);
  return c == nullptr ? "(missing)" : c->evidence;
}
std::string mount_huge_of(const std::vector<hd::memory_class_usage>& classes, memory_class kind,
                          const std::string& mount) {
  const auto* c = find(classes, kind, mount);
  return c == nullptr ? "(missing)" : c->mount_huge;
}

std::size_t resident_sum(const std::vector<hd::memory_class_usage>& classes) {
  std::size_t sum = 0;
  for (const auto& c : classes) sum += c.resident;
  return sum;
}

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
  const auto mounts = hd::parse_mountinfo(mountinfo);
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

// ---- the real doctor on a child ----------------------------------------------------------------

using doctor_cli::doctor;
using doctor_cli::result;
using doctor_cli::target;

const nlohmann::json* json_class(const nlohmann::json& process, const std::string& name,
                                 const std::string& mount = "") {
  for (const auto& c : process.at("memory_classes")) {
    if (c.at("class") == name && (mount.empty() || c.value("mount", "") == mount)) return &c;
  }
  return nullptr;
}

// The process part of the doctor's JSON for `pid`.
nlohmann::json process_json(pid_t pid, const doctor_cli::run_options& o = {}) {
  const result r = doctor({"--pid", std::to_string(pid), "--json"}, o);
  EXPECT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const nlohmann::json& p = doc.at("process");
  std::size_t sum = 0;
  for (const auto& c : p.at("memory_classes")) sum += c.at("resident_bytes").get<std::size_t>();
  EXPECT_EQ(sum, p.at("rss_bytes").get<std::size_t>() + p.at("hugetlb_bytes").get<std::size_t>());
  return p;
}

std::size_t bytes_of(const nlohmann::json* c, const char* key = "resident_bytes") {
  return c == nullptr ? 0 : c->at(key).get<std::size_t>();
}

// The least resident memory a class of mmapped chunks holding `bytes` shows. Exact when each
// chunk record is chunks only (evidence "chunk headers"). Where mmap put a chunk beside an
// anonymous neighbour the kernel merged them, which depends on the address layout of the run
// (about 1 run in 150 here): the record's Rss is then shared out by size (evidence "chunk
// headers, by size"), and a neighbour less resident than the chunks (ld.so's few pages below
// libc) takes a little of theirs.
std::size_t least_chunk_bytes(const std::string& evidence, std::size_t bytes) {
  if (evidence == "chunk headers") return bytes;
  EXPECT_EQ(evidence, "chunk headers, by size");
  return bytes - 16 * page;
}

// Under ASan the sanitizer's own mappings lie between and beside the target's glibc chunks and
// arenas, so records merge and their bytes are shared out by size: these exact layouts do not hold.
constexpr const char* asan_malloc = "the sanitizer's mappings merge with the target's glibc memory";

TEST(DoctorClassesLive, GlibcChunksAreToldByTheirHeaders) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "8", "--chunk-kib", "1024", "--malloc-chunks", "4", "--chunk-kib",
            "4096"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* chunks = json_class(p, "glibc_mmapped_chunks");
  ASSERT_NE(chunks, nullptr) << p.at("memory_classes").dump(1);
  // Every page of each block touched; the page holding a chunk's tail may not be.
  EXPECT_GE(bytes_of(chunks), least_chunk_bytes(chunks->at("evidence"), 24 * mib));
  EXPECT_LE(bytes_of(chunks), 24 * mib + 12 * page);
  // The eight 1 MiB chunks are under the THP size, the four 4 MiB ones not.
  EXPECT_NEAR(static_cast<double>(bytes_of(chunks, "small_chunk_bytes")), 8.0 * mib, 16.0 * page);
  EXPECT_FALSE(chunks->contains("mount"));
  EXPECT_LT(bytes_of(json_class(p, "anonymous_mmap")), 1 * mib);
}

// A program's own mmap of 1 MiB right below the chunks, merged with them into one record: the
// search for the first header reaches past it, so the chunks are still glibc's.
TEST(DoctorClassesLive, ChunksBehindAMebibyteOfTheProgramsOwnAreFound) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "6", "--chunk-kib", "1024", "--beside-kib", "1024"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* chunks = json_class(p, "glibc_mmapped_chunks");
  ASSERT_NE(chunks, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(chunks->at("evidence"), "chunk headers, by size");
  EXPECT_GE(bytes_of(chunks), least_chunk_bytes(chunks->at("evidence"), 6 * mib));
  EXPECT_LE(bytes_of(chunks), 6 * mib + 12 * page);
  EXPECT_GE(bytes_of(json_class(p, "anonymous_mmap")), 1 * mib) << "its own below the chunks";
}

// Chunks the kernel merged with anonymous neighbours, one below the lowest chunk (the headers
// start past a piece that is none) and one above the highest: still chunks, the neighbours not.
TEST(DoctorClassesLive, ChunksMergedWithNeighboursAreFound) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "6", "--chunk-kib", "1024", "--beside-kib", "40"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* chunks = json_class(p, "glibc_mmapped_chunks");
  ASSERT_NE(chunks, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(chunks->at("evidence"), "chunk headers, by size");
  EXPECT_GE(bytes_of(chunks), least_chunk_bytes(chunks->at("evidence"), 6 * mib));
  EXPECT_LE(bytes_of(chunks), 6 * mib + 12 * page);
  // Six 1 MiB chunks in one record over 2 MiB: under the size the tunable advises, not under
  // the size THP always or a collapse needs.
  EXPECT_EQ(bytes_of(chunks, "small_chunk_bytes"), bytes_of(chunks));
  EXPECT_EQ(bytes_of(chunks, "small_mapping_bytes"), 0u);
  EXPECT_GE(bytes_of(json_class(p, "anonymous_mmap")), 40 * kib);
}

TEST(DoctorClassesLive, ThreadArenasFromMallocInThreads) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--threads", "3", "--thread-kib", "8192"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* arenas = json_class(p, "glibc_thread_arenas");
  ASSERT_NE(arenas, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(bytes_of(arenas), 24 * mib);
  EXPECT_LE(bytes_of(arenas), 24 * mib + 3 * 32 * page);  // each arena's header and top chunk
  EXPECT_EQ(arenas->at("mappings"), 6);                   // a used part and a reserved part each
  EXPECT_LT(arenas->at("largest_mapping_bytes").get<std::size_t>(), 64 * mib);
  EXPECT_EQ(arenas->at("evidence"), "64 MiB-aligned heaps, heap_info");
}

// A program's own 64 MiB blocks on 64 MiB boundaries with a guard page: glibc's layout, but no
// heap_info at their start.
TEST(DoctorClassesLive, AlignedBlocksOfTheProgramAreNoArenas) {
  target t({"--aligned-blocks", "2"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  EXPECT_EQ(json_class(p, "glibc_thread_arenas"), nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(bytes_of(json_class(p, "anonymous_mmap")), 4 * mib);
}

// huge= of the /dev/shm this test sees (the target shares its mounts): read here by hand.
std::string dev_shm_huge() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, huge;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    const auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() < 5 || w[4] != "/dev/shm" || dash == w.end() || w.end() - dash < 4) continue;
    huge = "";
    if (dash[1] != "tmpfs") continue;
    const std::string& options = dash[3];
    const auto at = options.find("huge=");
    huge =
        at == std::string::npos ? "never" : options.substr(at + 5, options.find(',', at) - at - 5);
  }
  return huge;
}

// The "Memory by mechanism" section of a table, each of its lines within 100 columns.
std::string mechanism_section(const std::string& table) {
  const auto from = table.find("\nMemory by mechanism");
  if (from == std::string::npos) return "";
  const auto to = table.find("\n\n", from + 1);
  const std::string section = table.substr(from + 1, to - from - 1);
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
  return section;
}

TEST(DoctorClassesLive, MemfdIsSharedAnonymousDevShmFollowsItsMount) {
  const std::string huge = dev_shm_huge();
  if (huge.empty()) HUGEPAGE_SKIP_OR_FAIL("/dev/shm is not a tmpfs mount here");
  target t({"--memfd", "4", "--dev-shm", "6"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* shared = json_class(p, "shared_anonymous");
  ASSERT_NE(shared, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(bytes_of(shared), 4 * mib);
  EXPECT_LE(bytes_of(shared), 4 * mib + 4 * page);
  EXPECT_FALSE(shared->contains("mount"));
  const auto* shm = json_class(p, "tmpfs_file", "/dev/shm");
  ASSERT_NE(shm, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(bytes_of(shm), 6 * mib);
  EXPECT_EQ(shm->at("mount_huge"), huge);
  EXPECT_EQ(shm->at("mappings"), 1);

  const result prom = doctor({"--pid", std::to_string(t.pid()), "--format", "prometheus"});
  ASSERT_TRUE(prom.code == 0 || prom.code == 1) << prom.err;
  EXPECT_EQ(doctor_cli::exposition_problem(prom.out), "") << prom.out;
  const std::string pid = std::to_string(t.pid());
  EXPECT_NE(prom.out.find("hugepage_doctor_process_class_resident_bytes{pid=\"" + pid +
                          "\",class=\"tmpfs_file\",mount=\"/dev/shm\"} 6291456\n"),
            std::string::npos)
      << prom.out;
  EXPECT_NE(prom.out.find("hugepage_doctor_process_class_huge_bytes{pid=\"" + pid +
                          "\",class=\"shared_anonymous\"} "),
            std::string::npos)
      << prom.out;

  const result table = doctor({"--pid", pid});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  const std::string section = mechanism_section(table.out);
  EXPECT_NE(section.find("tmpfs_file"), std::string::npos) << table.out;
  EXPECT_NE(section.find("/dev/shm huge=" + huge), std::string::npos) << table.out;
  EXPECT_NE(section.find("shared_anonymous"), std::string::npos) << table.out;
}

// The target's own mounts, not the doctor's: a tmpfs with huge=within_size over /dev/shm in a
// mount namespace of the target's.
TEST(DoctorClassesLive, TmpfsOptionComesFromTheTargetsMounts) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("mounting a tmpfs needs root");
  target t({"--shm-mount", "huge=within_size,size=16m", "--shm-bind", "/mnt", "--dev-shm", "2"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* shm = json_class(p, "tmpfs_file", "/dev/shm");
  ASSERT_NE(shm, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(shm->at("mount_huge"), "within_size");
  EXPECT_EQ(bytes_of(shm), 2 * mib);
  // Bound on /mnt too: a remount there changes this /dev/shm.
  EXPECT_EQ(shm->at("same_superblock"), nlohmann::json::array({"/mnt"}));
}

TEST(DoctorClassesLive, SmallChunksAreSaidInTheTable) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "6", "--chunk-kib", "1024"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result table = doctor({"--pid", std::to_string(t.pid())});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  const std::string section = mechanism_section(table.out);
  const auto row = section.find("  glibc_mmapped_chunks ");
  ASSERT_NE(row, std::string::npos) << table.out;
  const std::string line = section.substr(row, section.find('\n', row) - row);
  EXPECT_NE(line.find("chunks under 2 MiB"), std::string::npos) << line;
}

// A doctor whose process_vm_readv fails (a seccomp filter makes it EPERM, as for a target it may
// read the smaps of but not attach to) still classifies, and says why chunks are not told apart.
TEST(DoctorClassesLive, UnreadableHeadersLeaveChunksInAnonymousMmap) {
  target t({"--malloc-chunks", "4", "--chunk-kib", "4096"});
  ASSERT_TRUE(t.ready()) << t.line();
  doctor_cli::run_options o;
  o.in_child = [] {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
    return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
  };
  const nlohmann::json p = process_json(t.pid(), o);
  EXPECT_EQ(json_class(p, "glibc_mmapped_chunks"), nullptr) << p.at("memory_classes").dump(1);
  const auto* anon = json_class(p, "anonymous_mmap");
  ASSERT_NE(anon, nullptr);
  EXPECT_GE(bytes_of(anon), 16 * mib);
  EXPECT_EQ(anon->at("evidence"), "chunk headers unreadable (EPERM)");
}

TEST(DoctorClassesLive, SaysWhoDisabledThp) {
  {
    target t({"--anon", "1"});
    ASSERT_TRUE(t.ready()) << t.line();
    EXPECT_EQ(process_json(t.pid()).at("thp_disabled_by"), "none");
  }
  {
    target t({"--thp-disable", "1"});
    ASSERT_TRUE(t.ready()) << t.line();
    EXPECT_EQ(process_json(t.pid()).at("thp_disabled_by"), "process");
    const result table = doctor({"--pid", std::to_string(t.pid())});
    EXPECT_NE(table.out.find("THP disabled by             the process"), std::string::npos)
        << table.out;
  }
  {
    // Set in this test process, the target's parent, while it starts the target and while the
    // doctor reads both: the target inherits it.
    ASSERT_EQ(::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0);
    target t({"--anon", "1"});
    const bool ready = t.ready();
    const nlohmann::json p = ready ? process_json(t.pid()) : nlohmann::json{};
    ::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    ASSERT_TRUE(ready) << t.line();
    EXPECT_EQ(p.at("thp_enabled"), false);
    EXPECT_EQ(p.at("thp_disabled_by"), "inherited");
  }
}

// ---- --capture ---------------------------------------------------------------------------------

// A fresh directory under /tmp, removed with what is in it (one level) at the end.
class scratch_dir {
 public:
  scratch_dir() {
    char path[] = "/tmp/hugepage-capture.XXXXXX";
    if (::mkdtemp(path) != nullptr) path_ = path;
  }
  ~scratch_dir() { remove_tree(path_); }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  static void remove_tree(const std::string& dir) {
    if (dir.empty()) return;
    for (const std::string& name : entries(dir)) {
      const std::string p = dir + "/" + name;
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(p);
      } else {
        ::unlink(p.c_str());
      }
    }
    ::rmdir(dir.c_str());
  }
  std::string path_;

 public:
  // The names in `dir` but . and .., sorted; empty when it cannot be read.
  static std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") out.push_back(name);
      }
      ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DoctorCapture, ALiveCaptureRebuildsTheLiveClasses) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  const std::vector<std::string> env{"PATH=/usr/bin:/bin", "CAPTURE_TEST_SECRET=s3cret"};
  target t({"--malloc-chunks", "8", "--chunk-kib", "4096"}, "", &env);
  ASSERT_TRUE(t.ready()) << t.line();
  scratch_dir scratch;
  ASSERT_FALSE(scratch.path().empty());
  const std::string dir = scratch.path() + "/capture";  // not there yet: the doctor creates it
  const result captured = doctor({"--pid", std::to_string(t.pid()), "--json", "--capture", dir});
  ASSERT_TRUE(captured.code == 0 || captured.code == 1) << captured.err;
  EXPECT_TRUE(nlohmann::json::accept(captured.out)) << captured.out;  // printed as usual
  const nlohmann::json live = process_json(t.pid());

  std::string error;
  const auto loaded = hd::read_capture(dir, error);
  ASSERT_TRUE(loaded.has_value()) << error;
  EXPECT_EQ(loaded->pid, t.pid());
  ASSERT_TRUE(loaded->files.chunks.read) << loaded->files.chunks.evidence;
  const hd::process_report p = hd::build_process_report(loaded->pid, loaded->files, 10, "");
  ASSERT_EQ(p.classes.size(), live.at("memory_classes").size())
      << live.at("memory_classes").dump(1);
  for (const auto& c : live.at("memory_classes")) {
    const std::string name = c.at("class");
    SCOPED_TRACE(name);
    const hd::memory_class_usage* mine = nullptr;
    for (const auto& m : p.classes) {
      if (name == hd::name_of(m.kind) && m.mount == c.value("mount", "")) mine = &m;
    }
    ASSERT_NE(mine, nullptr);
    EXPECT_NEAR(static_cast<double>(mine->resident),
                static_cast<double>(c.at("resident_bytes").get<std::size_t>()), 8.0 * page);
    EXPECT_EQ(mine->evidence, c.at("evidence"));
  }
  const auto* chunks = find(p.classes, memory_class::glibc_mmapped_chunks);
  ASSERT_NE(chunks, nullptr);
  EXPECT_GE(chunks->resident, least_chunk_bytes(chunks->evidence, 32 * mib));

  // The files, private: the environment holds secrets.
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  const std::vector<std::string> names = scratch_dir::entries(dir);
  for (const char* expected : {"smaps", "status", "stat", "cmdline", "environ", "cgroup",
                               "mountinfo", "parent_status", "chunks"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const std::string& name : names) {
    ASSERT_EQ(::lstat((dir + "/" + name).c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << name;
    EXPECT_EQ(st.st_mode & 07777, 0600u) << name;
  }
  EXPECT_NE(read_all(dir + "/environ").find("CAPTURE_TEST_SECRET=s3cret"), std::string::npos);
  EXPECT_EQ(read_all(dir + "/chunks").rfind("read\n", 0), 0u) << read_all(dir + "/chunks");
}

TEST(DoctorCapture, RefusesWhatItCannotWriteWhollyAndKeepsNothing) {
  target t({"--anon", "1"});
  ASSERT_TRUE(t.ready()) << t.line();
  const std::string pid = std::to_string(t.pid());
  scratch_dir scratch;
  ASSERT_FALSE(scratch.path().empty());
  const auto expect_refused = [&](const std::string& dir, const std::string& why,
                                  const doctor_cli::run_options& o = {}) {
    const result r = doctor({"--pid", pid, "--capture", dir}, o);
    EXPECT_EQ(r.code, hd::exit_error) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("hugepage-doctor: --capture " + dir + ": " + why), std::string::npos)
        << r.err;
  };
  // Not empty: one process per capture, never files of two mixed.
  const std::string full = scratch.path() + "/full";
  ASSERT_EQ(::mkdir(full.c_str(), 0700), 0);
  std::ofstream(full + "/mine") << "x";
  expect_refused(full, "not empty");
  EXPECT_EQ(scratch_dir::entries(full), std::vector<std::string>{"mine"});
  // A symbolic link planted where the directory goes is not followed.
  const std::string real = scratch.path() + "/real", link = scratch.path() + "/link";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  expect_refused(link, "not a directory (a symbolic link is refused)");
  EXPECT_TRUE(scratch_dir::entries(real).empty());
  // A parent that is a file.
  expect_refused(full + "/mine/capture", "Not a directory");
  // A write that fails midway (files limited to 4 KiB, smaps is larger): nothing is kept, and
  // the directory the doctor made is gone; an empty directory it was given stays, empty.
  doctor_cli::run_options small;
  small.in_child = [] {
    const rlimit limit{4096, 4096};
    return std::signal(SIGXFSZ, SIG_IGN) != SIG_ERR && ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  };
  const std::string fresh = scratch.path() + "/fresh";
  expect_refused(fresh, "cannot write smaps: File too large (nothing kept)", small);
  EXPECT_NE(::access(fresh.c_str(), F_OK), 0);
  const std::string given = scratch.path() + "/given";
  ASSERT_EQ(::mkdir(given.c_str(), 0700), 0);
  expect_refused(given, "cannot write smaps: File too large (nothing kept)", small);
  EXPECT_TRUE(scratch_dir::entries(given).empty());
  // --capture without --pid is a usage error.
  const result alone = doctor({"--capture", given});
  EXPECT_EQ(alone.code, hd::exit_error);
  EXPECT_NE(alone.err.find("--capture requires --pid"), std::string::npos) << alone.err;
}

}  // namespace
