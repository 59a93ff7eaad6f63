// hugepage/detail/mapping_registry.hpp - the few mappings deallocate() cannot work out alone.
//
// deallocate() recomputes a block's mapped length and backing from its size: no header, no lookup.
// Two kinds of mapping need a record:
//   - a mapping whose backing differs from what its strategy asked for (a hugetlb request served
//     by THP, THP advice refused), so the statistics stay exact;
//   - every MADV_DONTFORK mapping, for fork() below.
// A hash table holds them (O(1) expected at any count); deallocate() looks only while it is
// non-empty, one relaxed load on the common path.
//
// fork(): a pthread_atfork handler takes the mutex before the fork and releases it in both
// processes, so a fork while another thread is inside add() or take() cannot leave the child a
// lock nobody will release. A MADV_DONTFORK mapping is not inherited: the child would find a hole
// where the parent's container points, and a later mmap in the child may land in it, where a stray
// access through the inherited container would read or corrupt the child's own data. So the child
// handler maps an inaccessible placeholder (PROT_NONE, never backed by memory) over each such
// range: any access raises SIGSEGV, nothing new is placed there, and a deallocate() of the block
// unmaps only the placeholder. The inherited container itself cannot be read, cleared or destroyed
// in the child (allocation_options::dont_fork).
#pragma once

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>

#include "hugepage/detail/immortal.hpp"
#include "hugepage/stats.hpp"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

namespace hugepage::detail {

class mapping_registry {
 public:
  struct entry {
    backing obtained;  ///< what backs the block, or its head (strategy::layout) when it has a tail
    std::size_t length;
    bool dont_fork;
    backing tail = backing::base;  ///< what backs the block's tail; unused when it has none
  };

  mapping_registry() noexcept {
    // Runs once per process (the registry is immortal). A failure leaves fork unprotected, as
    // before this handler existed; it needs memory glibc has at start-up, so it does not happen.
    ::pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child);
  }

  /// Records `p`. May throw std::bad_alloc; the caller then unmaps.
  void add(void* p, entry e) {
    const std::lock_guard<std::mutex> lock(mutex_);
    entries_.emplace(p, e);
    size_.store(entries_.size(), std::memory_order_relaxed);
  }

  /// Removes `p` and returns how it was obtained, or `otherwise` when `p` has no record.
  backing take(void* p, backing otherwise) noexcept {
    entry e{otherwise, 0, false};
    take(p, e);
    return e.obtained;
  }

  /// Removes `p` and copies its record to `out`; false (and `out` untouched) when it has none.
  bool take(void* p, entry& out) noexcept {
    if (size_.load(std::memory_order_relaxed) == 0) return false;
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(p);
    if (it == entries_.end()) return false;
    out = it->second;
    entries_.erase(it);
    size_.store(entries_.size(), std::memory_order_relaxed);
    return true;
  }

  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

 private:
  static mapping_registry& instance() noexcept;

  static void before_fork() noexcept { instance().mutex_.lock(); }
  static void after_fork_in_parent() noexcept { instance().mutex_.unlock(); }
  static void after_fork_in_child() noexcept {
    mapping_registry& self = instance();
    for (const auto& [p, e] : self.entries_) {
      if (!e.dont_fork) continue;
      // The range is free in the child (the mapping was not inherited) and the child has one
      // thread, so nothing can race for it. MAP_NORESERVE + PROT_NONE: no memory, no commit.
      void* placeholder =
          ::mmap(p, e.length, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      (void)placeholder;  // on failure the range stays a hole, as it was before this handler
    }
    self.mutex_.unlock();  // the thread that forked took it in before_fork()
  }

  std::mutex mutex_;
  std::unordered_map<void*, entry> entries_;
  std::atomic<std::size_t> size_{0};
};

inline mapping_registry& registry() noexcept {
  static immortal<mapping_registry> storage;
  return *storage.get();
}

inline mapping_registry& mapping_registry::instance() noexcept { return registry(); }

}  // namespace hugepage::detail
