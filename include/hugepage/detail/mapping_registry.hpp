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
//
// Labelled blocks (label.hpp) have a table of their own under the same mutex and fork handlers:
// every mapped block of a labelled allocator or arena, with its label, what it asked for and got,
// and a generation number that no other block ever gets. It is apart from the table above so that
// an unlabelled deallocate() still looks only while that one is non-empty. Upkeep (upkeep.hpp)
// pins a block for the length of one kernel call; remove_labelled() waits until it is unpinned,
// so the range is never unmapped, nor mapped again by anyone, while MADV_COLLAPSE works on it.
#pragma once

#include <pthread.h>
#include <sys/mman.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

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

  // ---- labelled blocks
  // ---------------------------------------------------------------------------

  /// Figures of one label, kept at add and remove: bytes by what was asked and what was got.
  struct label_totals {
    const char* name = nullptr;  ///< the first pointer seen with this text; static storage
    std::size_t blocks = 0;
    std::size_t requested[4] = {};  ///< mapped bytes by asked backing (indexed by `backing`)
    std::size_t obtained[4] = {};   ///< mapped bytes by obtained backing
    std::uint64_t fallbacks = 0;    ///< blocks (since start) that got less than they asked for
  };

  /// One labelled block.
  struct labelled_block {
    std::size_t label = 0;  ///< index into the label list
    std::size_t length = 0;
    std::size_t head = 0;  ///< bytes on the head's pages; the rest is the tail (strategy::layout)
    backing asked = backing::thp;
    backing obtained = backing::thp;  ///< of the head
    backing tail = backing::base;     ///< of the tail; unused when head == length
    std::uint64_t generation = 0;
    unsigned pins = 0;  ///< upkeep calls in the kernel on this block right now
  };

  /// A copy of one labelled block, taken under the lock.
  struct labelled_view {
    void* p = nullptr;
    const char* label = nullptr;
    labelled_block block;
  };

  /// Records the mapped block `p` of `length` bytes under `label` (static storage: an options
  /// member). What backs it is the record above when there is one (a fallback, refused advice),
  /// else what it asked for. May throw std::bad_alloc; the caller then frees the block.
  void add_labelled(void* p, const char* label, std::size_t length, std::size_t head,
                    backing asked) {
    const std::lock_guard<std::mutex> lock(mutex_);
    labelled_block b;
    b.label = intern(label);
    b.length = length;
    b.head = head;
    b.asked = asked;
    b.obtained = asked;
    b.tail = backing::hugetlb_2m;
    if (const auto it = entries_.find(p); it != entries_.end()) {
      b.obtained = it->second.obtained;
      b.tail = it->second.tail;
    }
    b.generation = ++generation_;
    labelled_.emplace(p, b);
    count(b, /*add=*/true);
  }

  /// Forgets the labelled block `p`, first waiting for any upkeep call in the kernel on it (one
  /// MADV_COLLAPSE of 2 MiB). Nothing when `p` is not recorded.
  void remove_labelled(void* p) noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = labelled_.find(p);
    if (it == labelled_.end()) return;
    while (it->second.pins != 0) {
      unpinned_.wait(lock);
      it = labelled_.find(p);  // still there: only this call removes it
    }
    count(it->second, /*add=*/false);
    labelled_.erase(it);
  }

  /// Copies every labelled block (of `label` only, when not null) to `out`.
  void snapshot(const char* label, std::vector<labelled_view>& out) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t wanted = label == nullptr ? SIZE_MAX : find_label(label);
    if (label != nullptr && wanted == SIZE_MAX) return;
    out.reserve(out.size() + labelled_.size());
    for (const auto& [p, b] : labelled_) {
      if (wanted == SIZE_MAX || b.label == wanted) out.push_back({p, labels_[b.label].name, b});
    }
  }

  /// The totals of every label seen so far (labels whose blocks are all freed stay listed).
  std::vector<label_totals> label_list() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return labels_;
  }

  /// Pins `p` when it is still the block of generation `generation`: until unpin(), its
  /// deallocation waits. False when it was freed (or freed and mapped again) since the snapshot.
  bool pin(void* p, std::uint64_t generation) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = labelled_.find(p);
    if (it == labelled_.end() || it->second.generation != generation) return false;
    ++it->second.pins;
    return true;
  }

  void unpin(void* p) noexcept {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto it = labelled_.find(p);
      if (it != labelled_.end() && it->second.pins != 0) --it->second.pins;
    }
    unpinned_.notify_all();
  }

  std::size_t labelled_count() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return labelled_.size();
  }

 private:
  std::size_t find_label(const char* label) const noexcept {
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      if (labels_[i].name == label) return i;
    }
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      if (std::strcmp(labels_[i].name, label) == 0) return i;
    }
    return SIZE_MAX;
  }

  // Labels are few: a linear search, by pointer first (one options type), then by text.
  std::size_t intern(const char* label) {
    const std::size_t found = find_label(label);
    if (found != SIZE_MAX) return found;
    labels_.emplace_back();
    labels_.back().name = label;
    return labels_.size() - 1;
  }

  void count(const labelled_block& b, bool add) noexcept {
    label_totals& t = labels_[b.label];
    const auto at = [](backing x) { return static_cast<int>(x); };
    const std::size_t tail = b.length - b.head;
    if (add) {
      ++t.blocks;
      t.requested[at(b.asked)] += b.length;
      t.obtained[at(b.obtained)] += b.head;
      t.obtained[at(b.tail)] += tail;
      if ((b.head != 0 && b.obtained != b.asked) || (tail != 0 && b.tail != backing::hugetlb_2m)) {
        ++t.fallbacks;
      }
    } else {
      --t.blocks;
      t.requested[at(b.asked)] -= b.length;
      t.obtained[at(b.obtained)] -= b.head;
      t.obtained[at(b.tail)] -= tail;
    }
  }

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
    // The threads that pinned blocks are not in the child: nothing will unpin them there.
    // Nor the threads that waited for an unpin: a fresh condition variable, as the one inherited
    // may count waiters that will never wake (the old one is abandoned, never destroyed).
    for (auto& [p, b] : self.labelled_) b.pins = 0;
    new (&self.unpinned_) std::condition_variable();
    self.mutex_.unlock();  // the thread that forked took it in before_fork()
  }

  mutable std::mutex mutex_;
  std::unordered_map<void*, entry> entries_;
  std::atomic<std::size_t> size_{0};
  std::unordered_map<void*, labelled_block> labelled_;
  std::vector<label_totals> labels_;
  std::uint64_t generation_ = 0;
  std::condition_variable unpinned_;
};

inline mapping_registry& registry() noexcept {
  static immortal<mapping_registry> storage;
  return *storage.get();
}

inline mapping_registry& mapping_registry::instance() noexcept { return registry(); }

}  // namespace hugepage::detail
