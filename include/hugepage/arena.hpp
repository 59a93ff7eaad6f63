// hugepage/arena.hpp - a node arena: small objects carved from huge pages.
//
//   hugepage::arena nodes;                                     // THP chunks, thread-safe
//   std::map<K, V, std::less<K>, hugepage::arena_allocator<std::pair<const K, V>>> book(
//       hugepage::arena_allocator<std::pair<const K, V>>(nodes));
//
// Node-based containers (std::map, std::unordered_map, std::list, absl::node_hash_map) make one
// allocation of a few dozen bytes per element. Through the STL allocators of allocator.hpp such
// requests are below the small-request threshold and go to ::operator new: a multi-GiB std::map
// gets no huge pages at all. An arena takes whole huge pages from a strategy (THP, a hugetlb pool
// with its pool policy, or collapse) and carves them into slots.
//
// Design (detail/arena_slab.hpp has the layout):
// - One huge page ("slab") serves one size class: 8-byte classes up to 256 bytes, 64-byte classes
//   up to 1 KiB. Slots carry no header and sit side by side, so a tree or hash chain walks densely
//   packed nodes on few TLB entries.
// - allocate and deallocate are O(1): a class's slabs with room form a list; a slab hands out its
//   freed slots (a free list through the slots) before never-used ones (a bump pointer). The slab
//   of an object is found by masking its address (slabs are aligned to their size); its header
//   sits at one of 32 cache-line offsets chosen by the slab's address, so that the headers of
//   many slabs do not all compete for one cache set.
// - Requests above 1 KiB or aligned above 256 bytes go straight to the strategy, which maps them
//   when they reach its threshold and passes smaller ones to ::operator new.
// - A slab whose last object is freed becomes empty. Up to `retained_pages` empty slabs are kept
//   for any class to reuse; beyond that the slab goes back to the system whole (the strategy
//   unmaps the aligned huge page: a THP page is not split, a hugetlb page returns to the pool). So
//   the resident size follows the live bytes when a container shrinks, except for slabs pinned by
//   a few survivors, as in any allocator that cannot move objects.
// - The destructor unmaps every slab. Destroy the containers first.
//
// Two variants: `arena` locks one mutex per size class (any thread may allocate, and any thread
// may free what another allocated); `unsynchronized_arena` takes no lock at all, for containers
// owned by one thread at a time.
//
// fork(): the arena's mutexes have no pthread_atfork handler. A child forked while another thread
// holds one (is inside allocate or deallocate of that arena) must not use the arena; a child that
// only execs, or a process forked from a single thread, is unaffected.
//
// Under AddressSanitizer freed slots are poisoned, so a use-after-free of a node is reported.
//
// Kernel: as for the strategy in use (strategy.hpp). Coverage of the slabs: backing().
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/detail/arena_slab.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage {

/// Options of an arena.
struct arena_options {
  /// Empty huge pages kept for reuse; more than this go back to the system at once. Keeping one
  /// or two avoids an unmap and a fresh fault when a container oscillates around a page boundary.
  std::size_t retained_pages = 1;
};

/// One size class in an arena_stats snapshot.
struct arena_class_stats {
  std::size_t slot_bytes = 0;  ///< size of each slot
  std::size_t live_slots = 0;  ///< slots handed out and not freed
  std::size_t live_bytes = 0;  ///< bytes asked for by those allocations
  std::size_t pages = 0;       ///< huge pages serving this class
};

/// A snapshot of an arena. Consistent per size class; the totals are summed class by class.
struct arena_stats {
  std::size_t live_bytes = 0;      ///< bytes asked for by live allocations served from slabs
  std::size_t slot_bytes = 0;      ///< bytes of the slots those occupy
  std::size_t large_bytes = 0;     ///< bytes of live allocations passed to the strategy
  std::size_t page_bytes = 0;      ///< size of one slab (the strategy's huge page, at least 2 MiB)
  std::size_t mapped_bytes = 0;    ///< slabs held: pages * page_bytes
  std::size_t pages = 0;           ///< slabs held, in use or retained empty
  std::size_t retained_pages = 0;  ///< empty slabs kept for reuse
  std::uint64_t released_pages = 0;        ///< slabs given back to the system so far
  std::vector<arena_class_stats> classes;  ///< every size class, smallest first
};

namespace detail {
/// A mutex that does nothing: the unsynchronized arena.
struct no_mutex {
  void lock() noexcept {}
  void unlock() noexcept {}
};
}  // namespace detail

/// A node arena over a strategy; `Mutex` is std::mutex (`arena`) or a no-op
/// (`unsynchronized_arena`). Neither copyable nor movable: allocators point at it.
///
/// Thread safety: with std::mutex every member function may be called concurrently, and memory
/// may be freed by a thread other than the one that allocated it. Without, one thread at a time.
template <class Mutex>
class basic_arena {
 public:
  /// An arena that takes its huge pages from `source`. Maps nothing yet.
  explicit basic_arena(strategy source = strategy::thp(), arena_options options = {}) noexcept
      : strategy_(source),
        chunks_(chunk_strategy(source)),
        slab_bytes_(std::max(chunks_.page_bytes(), std::size_t{1} << 21)),
        options_(options) {
    for (unsigned c = 0; c < detail::arena_class_count; ++c) {
      classes_[c].slot_bytes = static_cast<std::uint32_t>(detail::arena_class_bytes(c));
    }
  }

  basic_arena(const basic_arena&) = delete;
  basic_arena& operator=(const basic_arena&) = delete;

  /// Unmaps every slab, live objects included: destroy the containers first.
  ~basic_arena() {
    detail::arena_slab* s = all_;
    while (s != nullptr) {
      detail::arena_slab* next = s->all_next;
      unmap_slab(s);
      s = next;
    }
  }

  /// Returns `bytes` bytes aligned to `alignment` (a power of two). Small requests come from a
  /// slab, others from the strategy. Throws what the strategy throws when a new huge page is
  /// needed (pool_exhausted, allocation_error, std::bad_alloc); nothing changes when it throws.
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment) {
    if (detail::arena_is_small(bytes, alignment)) {
      return allocate_slot(detail::arena_class_of(bytes, alignment), bytes);
    }
    void* p = strategy_.allocate(bytes, alignment);
    large_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return p;
  }

  /// Frees `p` from allocate() on this arena with the same `bytes` and `alignment`. Never throws.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p == nullptr) return;
    if (detail::arena_is_small(bytes, alignment)) return free_slot(p, bytes);
    strategy_.deallocate(p, bytes, alignment);
    large_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  /// The strategy large requests go to; slabs come from the same strategy at its page size.
  const strategy& get_strategy() const noexcept { return strategy_; }

  /// Size of one slab: the strategy's huge page size, at least 2 MiB.
  std::size_t page_bytes() const noexcept { return slab_bytes_; }

  /// Options given at construction.
  const arena_options& options() const noexcept { return options_; }

  /// A snapshot of what the arena holds. Allocates the class vector.
  arena_stats stats() const {
    arena_stats out;
    out.classes.resize(detail::arena_class_count);
    for (unsigned c = 0; c < detail::arena_class_count; ++c) {
      const size_class& cls = classes_[c];
      const std::lock_guard<Mutex> lock(cls.mutex);
      arena_class_stats& s = out.classes[c];
      s.slot_bytes = cls.slot_bytes;
      s.live_slots = cls.live_slots;
      s.live_bytes = cls.live_bytes;
      s.pages = cls.pages;
      out.live_bytes += s.live_bytes;
      out.slot_bytes += s.live_slots * s.slot_bytes;
    }
    out.large_bytes = large_bytes_.load(std::memory_order_relaxed);
    out.page_bytes = slab_bytes_;
    const std::lock_guard<Mutex> lock(pages_mutex_);
    out.pages = pages_;
    out.mapped_bytes = pages_ * slab_bytes_;
    out.retained_pages = retained_;
    out.released_pages = released_;
    return out;
  }

  /// The address ranges of the slabs held now, adjacent slabs merged, in address order.
  std::vector<std::pair<const void*, std::size_t>> mapped_ranges() const {
    std::vector<const char*> starts;
    {
      const std::lock_guard<Mutex> lock(pages_mutex_);
      starts.reserve(pages_);
      for (const detail::arena_slab* s = all_; s != nullptr; s = s->all_next) {
        starts.push_back(base_of(s));
      }
    }
    std::sort(starts.begin(), starts.end(), std::less<>());
    std::vector<std::pair<const void*, std::size_t>> ranges;
    for (std::size_t i = 0; i < starts.size();) {
      std::size_t j = i + 1;
      while (j < starts.size() && starts[j] == starts[j - 1] + slab_bytes_) ++j;
      ranges.emplace_back(starts[i], (j - i) * slab_bytes_);
      i = j;
    }
    return ranges;
  }

  /// What backs the slabs held now, read from the kernel with backing_of(): one report summed
  /// over mapped_ranges(). Large allocations passed to the strategy are not included. The source
  /// and note are those of the first range (all ranges are read the same way).
  backing_report backing() const {
    backing_report total;
    bool first = true;
    for (const auto& range : mapped_ranges()) {
      const backing_report r = backing_of(range.first, range.second);
      if (first) {
        total.source = r.source;
        total.exact = r.exact;
        total.note = r.note;
        first = false;
      }
      total.exact = total.exact && r.exact;
      total.bytes += r.bytes;
      total.thp += r.thp;
      total.hugetlb_2m += r.hugetlb_2m;
      total.hugetlb_1g += r.hugetlb_1g;
      total.base += r.base;
      total.not_resident += r.not_resident;
      total.unmapped += r.unmapped;
    }
    return total;
  }

 private:
  using slab = detail::arena_slab;

  struct alignas(64) size_class {
    mutable Mutex mutex;
    slab* with_room = nullptr;  // slabs of this class with a free or never-used slot
    std::size_t live_slots = 0;
    std::size_t live_bytes = 0;
    std::size_t pages = 0;
    std::uint32_t slot_bytes = 0;
  };

  // Slabs are whole huge pages, mapped whatever the caller's small-request threshold says.
  static strategy chunk_strategy(const strategy& s) noexcept {
    allocation_options o = s.options();
    o.small_threshold = 0;
    switch (s.how()) {
      case method::hugetlb: return strategy::hugetlb(s.size(), s.policy(), o);
      case method::collapse: return strategy::collapse(o);
      case method::thp: break;
    }
    return strategy::thp(o);
  }

  // The slab holding `p`: slabs are aligned to their size, so its offset in the slab is the low
  // bits of its address.
  slab* slab_of(void* p) const noexcept {
    const std::size_t offset = reinterpret_cast<std::uintptr_t>(p) & (slab_bytes_ - 1);
    char* base = static_cast<char*>(p) - offset;
    return reinterpret_cast<slab*>(base + detail::arena_header_offset(base, slab_bytes_));
  }

  // The start of the slab whose header is `s`.
  char* base_of(slab* s) const noexcept {
    return reinterpret_cast<char*>(s) - (reinterpret_cast<std::uintptr_t>(s) & (slab_bytes_ - 1));
  }
  const char* base_of(const slab* s) const noexcept {
    return reinterpret_cast<const char*>(s) -
           (reinterpret_cast<std::uintptr_t>(s) & (slab_bytes_ - 1));
  }

  static void push_room(size_class& cls, slab* s) noexcept {
    s->prev = nullptr;
    s->next = cls.with_room;
    if (cls.with_room != nullptr) cls.with_room->prev = s;
    cls.with_room = s;
    s->has_room = true;
  }

  static void remove_room(size_class& cls, slab* s) noexcept {
    if (s->prev != nullptr) s->prev->next = s->next;
    if (s->next != nullptr) s->next->prev = s->prev;
    if (cls.with_room == s) cls.with_room = s->next;
    s->prev = s->next = nullptr;
    s->has_room = false;
  }

  void* allocate_slot(unsigned c, std::size_t bytes) {
    size_class& cls = classes_[c];
    const std::lock_guard<Mutex> lock(cls.mutex);
    slab* s = cls.with_room;
    if (s == nullptr) {
      s = take_slab(c);  // may throw: nothing has changed yet
      push_room(cls, s);
      ++cls.pages;
    }
    void* p = s->free;
    if (p != nullptr) {
      detail::arena_unpoison(p, sizeof(void*));
      s->free = *static_cast<void**>(p);
      detail::arena_poison(p, s->slot_bytes);
    } else {
      p = s->bump;
      s->bump += s->slot_bytes;
    }
    if (++s->used == s->capacity) remove_room(cls, s);
    ++cls.live_slots;
    cls.live_bytes += bytes;
    detail::arena_unpoison(p, bytes == 0 ? 1 : bytes);  // a 0-byte slot is live too
    return p;
  }

  void free_slot(void* p, std::size_t bytes) noexcept {
    slab* s = slab_of(p);
    size_class& cls = classes_[s->cls];
    std::unique_lock<Mutex> lock(cls.mutex);
    if (s->owner != this) std::abort();  // not from this arena: memory corruption ahead
    detail::arena_check_not_freed(p);
    detail::arena_unpoison(p, sizeof(void*));
    *static_cast<void**>(p) = s->free;
    s->free = p;
    detail::arena_poison(p, s->slot_bytes);
    --cls.live_slots;
    cls.live_bytes -= bytes;
    if (--s->used == 0) {
      if (s->has_room) remove_room(cls, s);
      --cls.pages;
      lock.unlock();
      give_back(s);
      return;
    }
    if (!s->has_room) push_room(cls, s);
  }

  // A slab for class `c`: a retained empty one, or a new huge page from the strategy.
  slab* take_slab(unsigned c) {
    slab* s = nullptr;
    {
      const std::lock_guard<Mutex> lock(pages_mutex_);
      if (empty_ != nullptr) {
        s = empty_;
        empty_ = s->next;
        --retained_;
      }
    }
    if (s == nullptr) {
      void* chunk = chunks_.allocate(slab_bytes_, slab_bytes_);
      s = ::new (static_cast<char*>(chunk) + detail::arena_header_offset(chunk, slab_bytes_))
          slab();
      s->owner = this;
      const std::lock_guard<Mutex> lock(pages_mutex_);
      s->all_next = all_;
      if (all_ != nullptr) all_->all_prev = s;
      all_ = s;
      ++pages_;
    }
    const std::uint32_t slot = classes_[c].slot_bytes;
    char* data = base_of(s) + detail::arena_slab_data_offset;
    s->capacity = static_cast<std::uint32_t>((slab_bytes_ - detail::arena_slab_data_offset) / slot);
    s->slot_bytes = slot;
    s->cls = c;
    s->used = 0;
    s->free = nullptr;
    s->bump = data;
    s->end = data + std::size_t{s->capacity} * slot;
    s->prev = s->next = nullptr;
    s->has_room = false;
    detail::arena_poison(data, slab_bytes_ - detail::arena_slab_data_offset);
    return s;
  }

  // An empty slab: retained for reuse, or given back to the system.
  void give_back(slab* s) noexcept {
    {
      const std::lock_guard<Mutex> lock(pages_mutex_);
      if (retained_ < options_.retained_pages) {
        s->next = empty_;
        empty_ = s;
        ++retained_;
        return;
      }
      if (s->all_prev != nullptr) s->all_prev->all_next = s->all_next;
      if (s->all_next != nullptr) s->all_next->all_prev = s->all_prev;
      if (all_ == s) all_ = s->all_next;
      --pages_;
      ++released_;
    }
    unmap_slab(s);  // the syscall outside the lock
  }

  void unmap_slab(slab* s) noexcept {
    // The address range may be mapped again for anything: leave no poison behind.
    void* base = base_of(s);
    detail::arena_unpoison(base, slab_bytes_);
    chunks_.deallocate(base, slab_bytes_, slab_bytes_);
  }

  strategy strategy_;
  strategy chunks_;
  std::size_t slab_bytes_;
  arena_options options_;
  size_class classes_[detail::arena_class_count];
  std::atomic<std::size_t> large_bytes_{0};

  mutable Mutex pages_mutex_;  // guards the members below; taken after a class's mutex
  slab* all_ = nullptr;        // every slab held, linked through all_prev / all_next
  slab* empty_ = nullptr;      // retained empty slabs, linked through next
  std::size_t pages_ = 0;
  std::size_t retained_ = 0;
  std::uint64_t released_ = 0;
};

/// A thread-safe node arena: one mutex per size class; frees from any thread.
using arena = basic_arena<std::mutex>;

/// A node arena without locks: the fastest, for containers used by one thread at a time.
using unsynchronized_arena = basic_arena<detail::no_mutex>;

}  // namespace hugepage
