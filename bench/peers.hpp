// bench/peers.hpp - jemalloc and mimalloc loaded into hugepage_bench beside glibc, for --paired.
//
// As Debian ships them (libjemalloc2, libmimalloc2.0), dlopen()ed with RTLD_LOCAL: their malloc
// does not replace glibc's, and peer_allocator calls their own entry points (jemalloc's
// mallocx/sdallocx, mimalloc's mi_malloc/mi_free_size), so a peer's container runs in the same
// process as ours, batch after batch. Each peer gets its documented huge-page setting from its
// environment variable, set before it is loaded unless the caller set it:
// MALLOC_CONF=thp:always,metadata_thp:auto; MIMALLOC_LARGE_OS_PAGES=1 and, where the 1 GiB pool
// has pages to spare, MIMALLOC_RESERVE_HUGE_OS_PAGES (its documented best: 1 GiB pages at
// start-up). jemalloc's thread-local state needs static TLS that glibc sizes at start-up:
// ensure_static_tls() runs the process again with room for it.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "hugepage/system.hpp"

namespace hugepage_bench {

struct loaded_peer {
  const char* name;
  const char* library;
  void* (*allocate)(std::size_t) = nullptr;
  void (*deallocate)(void*, std::size_t) = nullptr;
  std::string why_not;  // non-empty: not loaded
};

namespace jemalloc_entry {
inline void* (*mallocx)(std::size_t, int) = nullptr;
inline void (*sdallocx)(void*, std::size_t, int) = nullptr;
inline void* allocate(std::size_t n) { return mallocx(n, 0); }
inline void deallocate(void* p, std::size_t n) { sdallocx(p, n, 0); }
}  // namespace jemalloc_entry

/// 1 GiB pages the arena over 1 GiB pages keeps for itself at 1 GiB of nodes (its slab headers
/// spill into a second page); mimalloc may reserve up to two of what is free beyond them.
constexpr std::size_t paired_arena_1g_pages = 2;

inline loaded_peer& jemalloc_peer() {
  static loaded_peer peer = [] {
    loaded_peer p{"jemalloc", "libjemalloc.so.2", nullptr, nullptr, {}};
    ::setenv("MALLOC_CONF", "thp:always,metadata_thp:auto", /*overwrite=*/0);
    void* lib = ::dlopen(p.library, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return p.why_not = ::dlerror(), p;
    jemalloc_entry::mallocx =
        reinterpret_cast<void* (*)(std::size_t, int)>(::dlsym(lib, "mallocx"));
    jemalloc_entry::sdallocx =
        reinterpret_cast<void (*)(void*, std::size_t, int)>(::dlsym(lib, "sdallocx"));
    if (jemalloc_entry::mallocx == nullptr || jemalloc_entry::sdallocx == nullptr) {
      return p.why_not = "no mallocx/sdallocx in libjemalloc.so.2", p;
    }
    p.allocate = jemalloc_entry::allocate;
    p.deallocate = jemalloc_entry::deallocate;
    return p;
  }();
  return peer;
}

inline loaded_peer& mimalloc_peer() {
  static loaded_peer peer = [] {
    loaded_peer p{"mimalloc", "libmimalloc.so.2", nullptr, nullptr, {}};
    ::setenv("MIMALLOC_LARGE_OS_PAGES", "1", /*overwrite=*/0);
    const auto pool = hugepage::read_pool(hugepage::page_size::huge_1g);
    const auto spare = pool ? static_cast<std::size_t>(pool->available().value_or(0)) : 0;
    if (spare > paired_arena_1g_pages) {
      ::setenv("MIMALLOC_RESERVE_HUGE_OS_PAGES",
               std::to_string(std::min<std::size_t>(spare - paired_arena_1g_pages, 2)).c_str(), 0);
    }
    void* lib = ::dlopen(p.library, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return p.why_not = ::dlerror(), p;
    p.allocate = reinterpret_cast<void* (*)(std::size_t)>(::dlsym(lib, "mi_malloc"));
    p.deallocate = reinterpret_cast<void (*)(void*, std::size_t)>(::dlsym(lib, "mi_free_size"));
    if (p.allocate == nullptr || p.deallocate == nullptr) {
      return p.why_not = "no mi_malloc/mi_free_size in libmimalloc.so.2", p;
    }
    return p;
  }();
  return peer;
}

/// A stateless STL allocator over a loaded peer (nodes need at most 16-byte alignment, which both
/// peers give every allocation).
template <class T, loaded_peer& (*Peer)()>
struct peer_allocator {
  using value_type = T;
  peer_allocator() = default;
  template <class U>
  peer_allocator(const peer_allocator<U, Peer>&) noexcept {}  // NOLINT: rebinding converts
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= 16, "the peers align to 16 bytes");
    void* p = Peer().allocate(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept { Peer().deallocate(p, n * sizeof(T)); }
  template <class U>
  struct rebind {
    using other = peer_allocator<U, Peer>;
  };
  friend bool operator==(const peer_allocator&, const peer_allocator&) noexcept { return true; }
  friend bool operator!=(const peer_allocator&, const peer_allocator&) noexcept { return false; }
};

/// glibc dlopen()s jemalloc (initial-exec TLS) only with spare static TLS, which it sizes at
/// start-up: the process runs itself again, once, with glibc's tunable for it added to
/// GLIBC_TUNABLES. Returns only when that is done or cannot be (then jemalloc is left out, and
/// its row's label says why).
inline void ensure_static_tls(char** argv) {
  if (std::getenv("HUGEPAGE_BENCH_STATIC_TLS") != nullptr) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string with_tls =
      tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":" : "";
  with_tls += "glibc.rtld.optional_static_tls=65536";
  ::setenv("GLIBC_TUNABLES", with_tls.c_str(), 1);
  ::setenv("HUGEPAGE_BENCH_STATIC_TLS", "1", 1);
  ::execv("/proc/self/exe", argv);
  std::perror("hugepage_bench: running itself with more static TLS failed; jemalloc left out");
}

}  // namespace hugepage_bench
