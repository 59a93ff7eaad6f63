// tools/test/target_process.cpp - a process with known memory for hugepage-doctor's tests.
//
//   hugepage-doctor-target [--thp MIB] [--hugetlb MIB] [--mappings N --mapping-kib KIB
//                          [--touch-kib KIB]] [--anon MIB] [--memfd-name NAME] [--comm NAME]
//                          [--block-1g MIB] [--cgroup DIR] [--malloc-chunks N --chunk-kib KIB]...
//                          [--threads N --thread-kib KIB] [--memfd MIB] [--dev-shm MIB]
//                          [--shm-mount OPTIONS] [--thp-disable 1] [--beside-kib KIB]
//                          [--aligned-blocks N] [--shm-bind DIR] [--memfd-views N]
//                          [--memfd-touch-view K] [--private-file MIB] [--nohuge MIB]
//
// Maps MIB of THP through hugepage::thp_allocator and MIB of 2 MiB hugetlb pages through
// hugepage::huge_page_allocator (touching every page), and/or N separate anonymous mappings of
// KIB each (alternately MADV_HUGEPAGE and MADV_NOHUGEPAGE, so the kernel cannot merge them; every
// page touched, or with --touch-kib only the first KIB of each, for a large address space that is
// mostly not resident), MIB of plain private anonymous memory (no advice, every page touched), and
// a 2 MiB shared mapping of a memfd called NAME (a name the process chooses, for the hostile-target
// tests, as is the comm NAME; argv[0] and the environment come from whoever execs it).
// --block-1g allocates one block of MIB through the 1 GiB allocator (strict policy: whole 1 GiB
// pages over its head, the rest on 2 MiB pages, as the cascade lays it out), after joining the
// cgroup DIR first where --cgroup names one (a hugetlb limit there empties the 2 MiB pool for this
// process only). --malloc-chunks N --chunk-kib KIB (repeatable) mallocs N blocks of KIB each,
// above glibc's mmap threshold, so each is an mmapped chunk; --threads N starts N threads that
// each malloc KIB in 4 KiB blocks while all are alive, so each gets its own arena; --memfd maps
// MIB of a memfd shared (--memfd-views N times, each view of all of it, as ZGC maps its heap;
// with --memfd-touch-view K only the K-th view mapped is touched, the others map it untouched),
// --dev-shm MIB of a POSIX shm file (unlinked at once, so a killed
// target leaves nothing behind); all touched. --shm-mount mounts a tmpfs with OPTIONS over
// /dev/shm in a mount namespace of its own first (root), --thp-disable sets PR_SET_THP_DISABLE.
// --private-file MIB maps a file of MIB (unlinked at once, in /tmp) MAP_PRIVATE and writes every
// page: copy-on-write copies in a file mapping. --nohuge MIB maps MIB of private anonymous memory
// advised MADV_NOHUGEPAGE, touched.
// --beside-kib maps KIB of anonymous memory (touched) right below the lowest malloc'd chunk and
// KIB right above the highest where that is free, so the kernel merges them with the chunks into
// one record, as it merges ld.so's small mapping below libc with the first chunk.
// --shm-bind binds that /dev/shm on DIR too (one superblock, two mount points).
// --aligned-blocks maps N blocks of its own laid out as glibc's thread heaps are (64 MiB on a
// 64 MiB boundary, a PROT_NONE guard page at the end), the first 2 MiB of each touched.
// Then prints one line
//   ready thp_bytes=T hugetlb_bytes=H mapped_bytes=M block_start=S block_1g=G block_2m=B
//         block_thp=P block_base=L
// where T and H are what backing_of() found, S the block's address (decimal) and G, B, P, L what
// backing_of() found in it, and waits until stdin closes. On failure it prints "error <reason>"
// and exits with 3.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hugepage/allocator.hpp"
#include "hugepage/backing.hpp"

namespace {

int fail(const std::string& message) {
  std::printf("error %s\n", message.c_str());
  std::fflush(stdout);
  return 3;
}

void touch(char* p, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 4096) p[i] = 1;
}

// Maps `mib` of `fd` shared `views` times and touches it through each view, or only through
// view `touched` (1: the first mapped) where it is not 0; false with errno set on failure.
bool map_shared(int fd, std::size_t mib, std::size_t views = 1, std::size_t touched = 0) {
  const std::size_t bytes = mib << 20;
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return false;
  for (std::size_t i = 0; i < views; ++i) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return false;
    if (touched == 0 || touched == i + 1) touch(static_cast<char*>(p), bytes);
  }
  return true;
}

// glibc's malloc itself: under a sanitizer std::malloc is the sanitizer's, whose blocks carry no
// glibc chunk header and live in no glibc arena, while the doctor's tests need glibc's layout.
extern "C" void* __libc_malloc(std::size_t bytes);
extern "C" void __libc_free(void* p);

// The malloc'd blocks, held to the end and freed then (so a leak checker stays quiet).
std::vector<void*> kept;
std::mutex kept_mutex;

}  // namespace

int main(int argc, char** argv) {
  std::size_t thp_mib = 0, hugetlb_mib = 0, mappings = 0, mapping_kib = 0, anon_mib = 0,
              block_mib = 0, touch_kib = SIZE_MAX, chunk_count = 0, threads = 0, thread_kib = 0,
              memfd_mib = 0, memfd_views = 1, memfd_touched = 0, private_file_mib = 0,
              nohuge_mib = 0, shm_mib = 0, beside_kib = 0, aligned_blocks = 0;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // count, KiB
  const char* memfd_name = nullptr;
  const char* cgroup = nullptr;
  const char* shm_mount = nullptr;
  const char* shm_bind = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::size_t value = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--memfd-name") == 0) {
      memfd_name = argv[i + 1];
    } else if (std::strcmp(argv[i], "--comm") == 0) {
      // The name in /proc/PID/status and comm (15 bytes), as prctl(PR_SET_NAME) sets it.
      ::prctl(PR_SET_NAME, argv[i + 1], 0, 0, 0);
    } else if (std::strcmp(argv[i], "--block-1g") == 0) {
      block_mib = value;
    } else if (std::strcmp(argv[i], "--cgroup") == 0) {
      cgroup = argv[i + 1];
    } else if (std::strcmp(argv[i], "--anon") == 0) {
      anon_mib = value;
    } else if (std::strcmp(argv[i], "--thp") == 0) {
      thp_mib = value;
    } else if (std::strcmp(argv[i], "--hugetlb") == 0) {
      hugetlb_mib = value;
    } else if (std::strcmp(argv[i], "--mappings") == 0) {
      mappings = value;
    } else if (std::strcmp(argv[i], "--mapping-kib") == 0) {
      mapping_kib = value;
    } else if (std::strcmp(argv[i], "--touch-kib") == 0) {
      touch_kib = value;
    } else if (std::strcmp(argv[i], "--malloc-chunks") == 0) {
      chunk_count = value;
    } else if (std::strcmp(argv[i], "--chunk-kib") == 0) {
      chunks.emplace_back(chunk_count, value);
    } else if (std::strcmp(argv[i], "--threads") == 0) {
      threads = value;
    } else if (std::strcmp(argv[i], "--thread-kib") == 0) {
      thread_kib = value;
    } else if (std::strcmp(argv[i], "--memfd") == 0) {
      memfd_mib = value;
    } else if (std::strcmp(argv[i], "--memfd-views") == 0) {
      memfd_views = value;
    } else if (std::strcmp(argv[i], "--memfd-touch-view") == 0) {
      memfd_touched = value;
    } else if (std::strcmp(argv[i], "--private-file") == 0) {
      private_file_mib = value;
    } else if (std::strcmp(argv[i], "--nohuge") == 0) {
      nohuge_mib = value;
    } else if (std::strcmp(argv[i], "--dev-shm") == 0) {
      shm_mib = value;
    } else if (std::strcmp(argv[i], "--shm-bind") == 0) {
      shm_bind = argv[i + 1];
    } else if (std::strcmp(argv[i], "--aligned-blocks") == 0) {
      aligned_blocks = value;
    } else if (std::strcmp(argv[i], "--beside-kib") == 0) {
      beside_kib = value;
    } else if (std::strcmp(argv[i], "--shm-mount") == 0) {
      shm_mount = argv[i + 1];
    } else if (std::strcmp(argv[i], "--thp-disable") == 0) {
      if (::prctl(PR_SET_THP_DISABLE, value, 0, 0, 0) != 0) return fail("PR_SET_THP_DISABLE");
    } else {
      return fail(std::string("unknown argument ") + argv[i]);
    }
  }
  using hugepage::units::mib;
  if (cgroup != nullptr) {
    const std::string procs = std::string(cgroup) + "/cgroup.procs";
    const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    const bool joined = fd >= 0 && ::write(fd, "0", 1) == 1;
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (!joined) return fail("cannot join " + procs + ": " + std::strerror(err));
  }
  if (shm_mount != nullptr && (::unshare(CLONE_NEWNS) != 0 ||
                               ::mount("", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                               ::mount("tmpfs", "/dev/shm", "tmpfs", 0, shm_mount) != 0)) {
    return fail("tmpfs on /dev/shm: " + std::string(std::strerror(errno)));
  }
  if (shm_mount != nullptr && shm_bind != nullptr &&
      ::mount("/dev/shm", shm_bind, nullptr, MS_BIND, nullptr) != 0) {
    return fail("bind /dev/shm: " + std::string(std::strerror(errno)));
  }
  std::size_t thp_bytes = 0, hugetlb_bytes = 0, mapped_bytes = 0;
  hugepage::backing_report block;
  std::uintptr_t block_start = 0;
  try {
    if (thp_mib != 0) {
      hugepage::thp_allocator<char> allocator;
      char* p = allocator.allocate(thp_mib * mib);
      touch(p, thp_mib * mib);
      thp_bytes = hugepage::backing_of(p, thp_mib * mib).thp;
      mapped_bytes += thp_mib * mib;
    }
    if (hugetlb_mib != 0) {
      hugepage::huge_page_allocator<char> allocator;
      char* p = allocator.allocate(hugetlb_mib * mib);
      touch(p, hugetlb_mib * mib);
      hugetlb_bytes = hugepage::backing_of(p, hugetlb_mib * mib).hugetlb_2m;
      mapped_bytes += hugetlb_mib * mib;
    }
    if (block_mib != 0) {
      hugepage::huge_page_allocator<char, hugepage::page_size::huge_1g> allocator;
      char* p = allocator.allocate(block_mib * mib);
      touch(p, block_mib * mib);
      block = hugepage::backing_of(p, block_mib * mib);
      block_start = reinterpret_cast<std::uintptr_t>(p);
      mapped_bytes += block_mib * mib;
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  for (std::size_t i = 0; i < mappings; ++i) {
    const std::size_t bytes = mapping_kib * 1024;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail("mmap: " + std::string(std::strerror(errno)));
    ::madvise(p, bytes, i % 2 == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    touch(static_cast<char*>(p), touch_kib == SIZE_MAX ? bytes : std::min(bytes, touch_kib * 1024));
    mapped_bytes += bytes;
  }
  if (anon_mib != 0) {
    const std::size_t bytes = anon_mib << 20;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail("mmap: " + std::string(std::strerror(errno)));
    touch(static_cast<char*>(p), bytes);
    mapped_bytes += bytes;
  }
  if (memfd_name != nullptr) {
    const int fd = ::memfd_create(memfd_name, MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, 2 << 20) != 0) {
      return fail("memfd_create: " + std::string(std::strerror(errno)));
    }
    void* p = ::mmap(nullptr, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fail("mmap memfd: " + std::string(std::strerror(errno)));
    touch(static_cast<char*>(p), 2 << 20);
  }
  for (const auto& [count, kib] : chunks) {
    for (std::size_t i = 0; i < count; ++i) {
      char* p = static_cast<char*>(__libc_malloc(kib * 1024));
      if (p == nullptr) return fail("malloc failed");
      kept.push_back(p);
      touch(p, kib * 1024);
    }
  }
  if (beside_kib != 0 && !kept.empty()) {
    // An mmapped chunk's mapping starts at its header (16 bytes before the block) and its size
    // field holds the mapping's length.
    std::uintptr_t low = UINTPTR_MAX, high = 0;
    for (void* p : kept) {
      const auto* header = static_cast<const std::uint64_t*>(p) - 2;
      const auto start = reinterpret_cast<std::uintptr_t>(header);
      low = std::min(low, start);
      high = std::max(high, start + (header[1] & ~std::uint64_t{7}));
    }
    const std::size_t bytes = beside_kib * 1024;
    for (const std::uintptr_t at : {low - bytes, high}) {
      void* p = ::mmap(reinterpret_cast<void*>(at), bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED && at == low - bytes) return fail("mmap below the chunks");
      if (p != MAP_FAILED) touch(static_cast<char*>(p), bytes);
    }
  }
  if (threads != 0) {
    // Every thread allocates before any ends: a thread that found an ended thread's arena free
    // would take it instead of making its own.
    std::atomic<std::size_t> allocated{0};
    kept.reserve(kept.size() + threads * (thread_kib / 4 + 1));  // no growth in the arenas
    std::vector<std::thread> running;
    for (std::size_t t = 0; t < threads; ++t) {
      running.emplace_back([&] {
        for (std::size_t done = 0; done < thread_kib; done += 4) {
          char* p = static_cast<char*>(__libc_malloc(4096 - 16));
          touch(p, 4096 - 16);
          const std::lock_guard<std::mutex> lock(kept_mutex);
          kept.push_back(p);
        }
        ++allocated;
        while (allocated.load() < threads) std::this_thread::yield();
      });
    }
    for (auto& t : running) t.join();
  }
  for (std::size_t i = 0; i < aligned_blocks; ++i) {
    constexpr std::size_t heap_span = 64 * mib;
    char* reserved = static_cast<char*>(
        ::mmap(nullptr, 2 * heap_span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (reserved == MAP_FAILED) return fail("mmap: " + std::string(std::strerror(errno)));
    const auto at =
        (reinterpret_cast<std::uintptr_t>(reserved) + heap_span - 1) / heap_span * heap_span;
    char* p = reinterpret_cast<char*>(at);
    if (p > reserved) ::munmap(reserved, static_cast<std::size_t>(p - reserved));
    ::munmap(p + heap_span, static_cast<std::size_t>(reserved + 2 * heap_span - (p + heap_span)));
    ::mprotect(p + heap_span - 4096, 4096, PROT_NONE);
    touch(p, 2 * mib);
  }
  if (memfd_mib != 0 && !map_shared(::memfd_create("hugepage-doctor-target", MFD_CLOEXEC),
                                    memfd_mib, memfd_views, memfd_touched)) {
    return fail("memfd: " + std::string(std::strerror(errno)));
  }
  if (private_file_mib != 0) {
    const std::size_t bytes = private_file_mib << 20;
    const int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      return fail("private file: " + std::string(std::strerror(errno)));
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return fail("mmap private file: " + std::string(std::strerror(errno)));
    touch(static_cast<char*>(p), bytes);
    mapped_bytes += bytes;
  }
  if (nohuge_mib != 0) {
    const std::size_t bytes = nohuge_mib << 20;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || ::madvise(p, bytes, MADV_NOHUGEPAGE) != 0) {
      return fail("nohuge: " + std::string(std::strerror(errno)));
    }
    touch(static_cast<char*>(p), bytes);
    mapped_bytes += bytes;
  }
  if (shm_mib != 0) {
    const std::string name = "/hugepage-doctor-target-" + std::to_string(::getpid());
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    const int err = errno;
    ::shm_unlink(name.c_str());
    errno = err;
    if (!map_shared(fd, shm_mib)) return fail("shm_open: " + std::string(std::strerror(errno)));
  }
  std::printf(
      "ready thp_bytes=%zu hugetlb_bytes=%zu mapped_bytes=%zu block_start=%ju block_1g=%zu "
      "block_2m=%zu block_thp=%zu block_base=%zu\n",
      thp_bytes, hugetlb_bytes, mapped_bytes, static_cast<std::uintmax_t>(block_start),
      block.hugetlb_1g, block.hugetlb_2m, block.thp, block.base);
  std::fflush(stdout);
  char buffer[64];
  while (::read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
  }
  for (void* p : kept) __libc_free(p);
  return 0;
}
