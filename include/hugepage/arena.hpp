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
// - One 2 MiB slab serves one size class: 8-byte classes up to 256 bytes, 64-byte classes up to
//   1 KiB. A slab is a whole 2 MiB huge page, or a 2 MiB piece of a 1 GiB page: all the classes a
//   container touches share one 1 GiB page, instead of pinning a 1 GiB page each. Slots carry no
//   header and sit side by side, so a tree or hash chain walks densely packed nodes on few TLB
//   entries.
// - allocate and deallocate are O(1): a class's slabs with room form a list; a slab hands out its
//   freed slots (a free list through the slots) before never-used ones (a bump pointer). The slab
//   of an object is found by masking its address (slabs are aligned to their size); its header
//   sits at one of 32 cache-line offsets chosen by the slab's address, so that the headers of
//   many slabs do not all compete for one cache set.
// - Requests above 1 KiB or aligned above 256 bytes go to the strategy, which maps them when they
//   reach its threshold and passes smaller ones to ::operator new. Over 1 GiB pages, those the
//   strategy would map, that fit in one page and are aligned to at most 2 MiB take a run of
//   adjacent free slabs instead, so a hash table's bucket array shares the 1 GiB pages with its
//   nodes. When no page held has such a run and no new page can be had, the block goes to the
//   strategy after all (2 MiB pages by its cascade), as it would without runs.
// - A slab whose last object is freed becomes free for any class. A huge page whose slabs are all
//   free is empty: up to `retained_pages` empty pages are kept for reuse; beyond that the page goes
//   back to the system whole (the strategy unmaps the aligned huge page: a THP page is not split,
//   a hugetlb page returns to the pool). So the resident size follows the live bytes when a
//   container shrinks, except for pages pinned by a few survivors, as in any allocator that cannot
//   move objects.
// - The destructor unmaps every page, runs included. Destroy the containers first.
//
// Two variants: `arena` locks one mutex per size class (any thread may allocate, and any thread
// may free what another allocated); `unsynchronized_arena` takes no lock at all, for containers
// owned by one thread at a time.
//
// fork(): a synchronized arena's mutexes are taken by the thread that forks and released in both
// processes after the fork (detail/fork_locks.hpp), so a child of a threaded parent never finds
// one held by a thread it does not have. fork() waits for every arena's operations in progress.
// An arena over a `dont_fork` strategy: its pages, and the slab headers in them, are not in the
// child (strategy.hpp, allocation_options::dont_fork). A child must not read, clear or destroy a
// container on such an arena, nor allocate from the arena; it may use a new arena of its own.
// The arena's own records are outside its pages: stats() works in the child, and the destructor
// unmaps the placeholders without reading them.
//
// Under AddressSanitizer freed slots and freed runs are poisoned, so a use-after-free of a node or
// of a block in a run is reported.
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
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/detail/arena_lists.hpp"
#include "hugepage/detail/arena_slab.hpp"
#include "hugepage/detail/fork_locks.hpp"
#include "hugepage/detail/label_hooks.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage {

/// Options of an arena.
struct arena_options {
  /// Empty huge pages kept for reuse; more than this go back to the system at once. Keeping one
  /// or two avoids an unmap and a fresh fault when a container oscillates around a page boundary.
  std::size_t retained_pages = 1;
  /// Lists the arena's huge pages under this label (label.hpp): static storage, e.g. a string
  /// literal. nullptr: not listed.
  const char* label = nullptr;
};

/// One size class in an arena_stats snapshot.
struct arena_class_stats {
  std::size_t slot_bytes = 0;  ///< size of each slot
  std::size_t live_slots = 0;  ///< slots handed out and not freed
  std::size_t live_bytes = 0;  ///< bytes asked for by those allocations
  std::size_t slabs = 0;       ///< 2 MiB slabs serving this class
};

/// A snapshot of an arena. Consistent per size class; the totals are summed class by class.
struct arena_stats {
  std::size_t live_bytes = 0;  ///< bytes asked for by live allocations served from slabs
  std::size_t slot_bytes = 0;  ///< bytes of the slots those occupy
  /// Bytes of live allocations above the slot classes: passed to the strategy, or (an arena over
  /// 1 GiB pages) held in runs of slabs of its pages.
  std::size_t large_bytes = 0;
  std::size_t page_bytes = 0;        ///< size of one huge page (the strategy's, at least 2 MiB)
  std::size_t mapped_bytes = 0;      ///< huge pages held: pages * page_bytes
  std::size_t pages = 0;             ///< huge pages held, in use or retained empty
  std::size_t slabs = 0;             ///< 2 MiB slabs serving a size class, over all classes
  std::size_t run_slabs = 0;         ///< 2 MiB slabs holding large allocations (1 GiB pages only)
  std::size_t retained_pages = 0;    ///< empty huge pages kept for reuse
  std::uint64_t released_pages = 0;  ///< huge pages given back to the system so far
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
// The padding is deliberate: each size class sits on cache lines of its own (alignas(64)), so
// threads on different classes do not share a line.
template <class Mutex>
class basic_arena {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  /// An arena that takes its huge pages from `source`. Maps nothing yet.
  explicit basic_arena(strategy source = strategy::thp(), arena_options options = {}) noexcept
      : strategy_(source),
        chunks_(chunk_strategy(source)),
        page_bytes_(std::max(chunks_.page_bytes(), detail::arena_slab_bytes)),
        options_(options) {
    for (unsigned c = 0; c < detail::arena_class_count; ++c) {
      classes_[c].slot_bytes = static_cast<std::uint32_t>(detail::arena_class_bytes(c));
    }
    if constexpr (synchronized) {  // last: a fork may lock the arena from here on
      fork_entry_.owner = this;
      fork_entry_.lock = &lock_for_fork;
      fork_entry_.unlock = &unlock_after_fork;
      fork_entry_.in_child = &forget_unmapping;
      detail::arena_fork_locks().add(fork_entry_);
    }
  }

  basic_arena(const basic_arena&) = delete;
  basic_arena& operator=(const basic_arena&) = delete;

  /// Unmaps every huge page, live objects included: destroy the containers first.
  ~basic_arena() {
    if constexpr (synchronized) detail::arena_fork_locks().remove(fork_entry_);
    page* p = all_;
    while (p != nullptr) {
      page* next = p->all_next;
      unmap_page(p);
      p = next;
    }
  }

  /// Returns `bytes` bytes aligned to `alignment` (a power of two). Small requests come from a
  /// slab, large ones from a run of slabs (over 1 GiB pages: see the top of this file) or the
  /// strategy. Throws what the strategy throws when a new huge page is needed (pool_exhausted,
  /// allocation_error, std::bad_alloc); nothing changes when it throws.
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment) {
    if (detail::arena_is_small(bytes, alignment)) {
      return allocate_slot(detail::arena_class_of(bytes, alignment), bytes);
    }
    void* p = is_run(bytes, alignment) ? allocate_run(bytes, alignment)
                                       : strategy_.allocate(bytes, alignment);
    large_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return p;
  }

  /// Frees `p` from allocate() on this arena with the same `bytes` and `alignment`. Never throws.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p == nullptr) return;
    if (detail::arena_is_small(bytes, alignment)) return free_slot(p, bytes);
    if (!is_run(bytes, alignment) || !free_run(p, bytes)) strategy_.deallocate(p, bytes, alignment);
    large_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  /// The strategy large requests that are not runs go to; pages come from the same strategy at
  /// its page size.
  const strategy& get_strategy() const noexcept { return strategy_; }

  /// Size of the huge pages the arena maps: the strategy's huge page size, at least 2 MiB.
  std::size_t page_bytes() const noexcept { return page_bytes_; }

  /// Size of a slab, the unit that serves one size class: 2 MiB, carved from the huge pages.
  static constexpr std::size_t slab_bytes() noexcept { return detail::arena_slab_bytes; }

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
      s.slabs = cls.slabs;
      out.live_bytes += s.live_bytes;
      out.slabs += s.slabs;
      out.slot_bytes += s.live_slots * s.slot_bytes;
    }
    out.large_bytes = large_bytes_.load(std::memory_order_relaxed);
    out.page_bytes = page_bytes_;
    const std::lock_guard<Mutex> lock(pages_mutex_);
    out.pages = pages_;
    out.run_slabs = run_slabs_;
    out.mapped_bytes = pages_ * page_bytes_;
    out.retained_pages = retained_;
    out.released_pages = released_;
    return out;
  }

  /// The address ranges of the huge pages held now, adjacent pages merged, in address order.
  std::vector<std::pair<const void*, std::size_t>> mapped_ranges() const {
    std::vector<const char*> starts;
    {
      const std::lock_guard<Mutex> lock(pages_mutex_);
      starts.reserve(pages_);
      for (const page* p = all_; p != nullptr; p = p->all_next) starts.push_back(p->base);
    }
    std::sort(starts.begin(), starts.end(), std::less<>());
    std::vector<std::pair<const void*, std::size_t>> ranges;
    for (std::size_t i = 0; i < starts.size();) {
      std::size_t j = i + 1;
      while (j < starts.size() && starts[j] == starts[j - 1] + page_bytes_) ++j;
      ranges.emplace_back(starts[i], (j - i) * page_bytes_);
      i = j;
    }
    return ranges;
  }

  /// What backs the huge pages held now, read from the kernel with backing_of(): one report summed
  /// over mapped_ranges(). Large allocations passed to the strategy are not included. The source
  /// is the first range's (all ranges are read the same way), the note the first one given.
  backing_report backing() const {
    backing_report total;
    bool first = true;
    for (const auto& range : mapped_ranges()) {
      detail::add_report(total, backing_of(range.first, range.second), first);
      first = false;
    }
    return total;
  }

 private:
  using slab = detail::arena_slab;
  using page = detail::arena_page;

  static constexpr bool synchronized = !std::is_same_v<Mutex, detail::no_mutex>;

  // Every mutex of the arena in one fixed order: the classes, then the growth's, then the pages'.
  // No other thread holds two classes' mutexes at once, or takes a class's while it holds the
  // growth's or the pages', or the growth's while it holds the pages'.
  static void lock_for_fork(void* self) noexcept {
    auto& a = *static_cast<basic_arena*>(self);
    for (size_class& cls : a.classes_) cls.mutex.lock();
    a.grow_mutex_.lock();
    a.pages_mutex_.lock();
  }
  static void unlock_after_fork(void* self) noexcept {
    auto& a = *static_cast<basic_arena*>(self);
    a.pages_mutex_.unlock();
    a.grow_mutex_.unlock();
    for (size_class& cls : a.classes_) cls.mutex.unlock();
  }
  // In the child, no thread finishes the munmap of a page another thread had unlinked: the child
  // keeps that page's mapping (unlisted), and must not wait for it (take_slabs).
  static void forget_unmapping(void* self) noexcept {
    static_cast<basic_arena*>(self)->unmapping_ = 0;
  }

  struct alignas(64) size_class {
    mutable Mutex mutex;
    slab* with_room = nullptr;  // slabs of this class with a free or never-used slot
    std::size_t live_slots = 0;
    std::size_t live_bytes = 0;
    std::size_t slabs = 0;
    std::uint32_t slot_bytes = 0;
  };

  // Huge pages are mapped whole, whatever the caller's small-request threshold says.
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
    const std::size_t offset = reinterpret_cast<std::uintptr_t>(p) & (slab_bytes() - 1);
    char* base = static_cast<char*>(p) - offset;
    return reinterpret_cast<slab*>(base + detail::arena_header_offset(base, slab_bytes()));
  }

  // The start of the slab whose header is `s`.
  static char* base_of(slab* s) noexcept {
    return reinterpret_cast<char*>(s) - (reinterpret_cast<std::uintptr_t>(s) & (slab_bytes() - 1));
  }

  void* allocate_slot(unsigned c, std::size_t bytes) {
    size_class& cls = classes_[c];
    const std::lock_guard<Mutex> lock(cls.mutex);
    slab* s = cls.with_room;
    if (s == nullptr) {
      s = take_slab(c);  // may throw: nothing has changed yet
      detail::arena_push_slab(cls.with_room, s);
      ++cls.slabs;
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
    if (++s->used == s->capacity) detail::arena_remove_slab(cls.with_room, s);
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
      if (s->has_room) detail::arena_remove_slab(cls.with_room, s);
      --cls.slabs;
      lock.unlock();
      give_back(s);
      return;
    }
    if (!s->has_room) detail::arena_push_slab(cls.with_room, s);
  }

  // A slab for class `c`: a free one from a page the arena holds, or the first of a new huge page
  // from the strategy.
  slab* take_slab(unsigned c) {
    page* from = nullptr;
    char* base = take_slabs(1, /*run=*/false, from);  // may throw: nothing has changed yet
    detail::arena_unpoison(base, detail::arena_slab_data_offset);  // a run's poison, if it was one
    slab* s = ::new (base + detail::arena_header_offset(base, slab_bytes())) slab();
    s->owner = this;
    s->page = from;
    const std::uint32_t slot = classes_[c].slot_bytes;
    char* data = base + detail::arena_slab_data_offset;
    s->capacity =
        static_cast<std::uint32_t>((slab_bytes() - detail::arena_slab_data_offset) / slot);
    s->slot_bytes = slot;
    s->cls = c;
    s->bump = data;
    s->end = data + std::size_t{s->capacity} * slot;
    detail::arena_poison(data, slab_bytes() - detail::arena_slab_data_offset);
    return s;
  }

  // Whether a large request is served as a run of slabs of the arena's pages: on pages bigger than
  // a slab (1 GiB), for what the strategy would map (2 MiB and more) that fits in one page. A hash
  // table's bucket or slot array then sits on the 1 GiB pages with the nodes, where the strategy
  // would put it on 2 MiB pages (absl::node_hash_map lookups at 1 GiB: 1% faster, bench/README).
  bool is_run(std::size_t bytes, std::size_t alignment) const noexcept {
    return page_bytes_ > slab_bytes() && alignment <= slab_bytes() && bytes <= page_bytes_ &&
           strategy_.is_mapped(bytes);
  }

  static std::size_t slabs_for(std::size_t bytes) noexcept {
    return (bytes + slab_bytes() - 1) / slab_bytes();
  }

  void* allocate_run(std::size_t bytes, std::size_t alignment) {
    page* from = nullptr;
    char* p = nullptr;
    try {
      p = take_slabs(slabs_for(bytes), /*run=*/true, from);
    } catch (const allocation_error&) {
      // No page held has room and no new page can be had (pool or cgroup limit): the strategy
      // serves the block as it would without the arena (its cascade: 2 MiB pages), so a block
      // below 1 GiB never meets pool_exhausted for want of a 1 GiB page.
      return strategy_.allocate(bytes, alignment);
    }
    detail::arena_unpoison(p, bytes);
    return p;
  }

  // Frees a block is_run() chose: false when it is not on a page of the arena (allocate_run
  // passed it to the strategy).
  bool free_run(void* p, std::size_t bytes) noexcept {
    const std::size_t count = slabs_for(bytes);
    char* start = static_cast<char*>(p);
    const char* base = start - (reinterpret_cast<std::uintptr_t>(start) & (page_bytes_ - 1));
    page* owner = nullptr;
    bool drop = false;
    {
      const std::lock_guard<Mutex> lock(pages_mutex_);
      owner = all_;
      while (owner != nullptr && owner->base != base) owner = owner->all_next;  // one per GiB held
      if (owner == nullptr) return false;
      // A run freed twice would count its slabs free twice (the page's in_use wraps): report it
      // under AddressSanitizer, as for a slot; a live run's first byte is never poisoned.
      detail::arena_check_not_freed(p);
      detail::arena_poison(p, count * slab_bytes());
      run_slabs_ -= count;
      drop = put_slabs(owner, static_cast<std::size_t>(start - owner->base) / slab_bytes(), count);
    }
    if (drop) drop_page(owner);  // the syscall outside the lock
    return true;
  }

  // `count` adjacent free slabs (for a class, or a `run` holding one large block), from a page the
  // arena holds (one in use first), else from a new huge page from the strategy. Returns the first
  // slab's start and sets `from` to its page. May throw what the strategy throws: nothing has
  // changed then.
  //
  // One thread at a time maps a page, and only once no page is being unmapped: threads that find
  // no room at once would otherwise each map a page, and with a pool (or a hugetlb cgroup limit)
  // of one page all but one would be refused although the first page has room for all of them,
  // as would a thread that asks while another gives the only page back. So a refusal is final.
  char* take_slabs(std::size_t count, bool run, page*& from) {
    if (char* first = take_held_slabs(count, run, from)) return first;
    const std::lock_guard<Mutex> grow(grow_mutex_);
    if (char* first = take_held_slabs(count, run, from)) return first;  // mapped meanwhile
    wait_for_unmapping();
    // A new page: its record first, so that a failed mapping leaves nothing behind.
    auto record = std::make_unique<page>(nullptr, page_bytes_ / slab_bytes());
    record->base = static_cast<char*>(chunks_.allocate(page_bytes_, page_bytes_));
    // ---- labelled arena (label.hpp): the page enters its label's list ----
    if (options_.label != nullptr) {
      detail::record_labelled(chunks_, options_.label, record->base, page_bytes_, page_bytes_);
    }
    page* p = record.release();
    const std::lock_guard<Mutex> lock(pages_mutex_);
    detail::arena_link_page(all_, p);
    ++pages_;
    with_slab_.push(p, /*at_front=*/true);
    return use_slabs(from = p, 0, count, run);
  }

  // `count` adjacent free slabs of a page the arena holds; nullptr when none has them.
  char* take_held_slabs(std::size_t count, bool run, page*& from) {
    const std::lock_guard<Mutex> lock(pages_mutex_);
    for (page* p = with_slab_.first; p != nullptr; p = p->next) {
      if (p->slabs - p->in_use < count) continue;
      const std::size_t first = p->find_free(count);
      if (first != p->slabs) return use_slabs(from = p, first, count, run);
    }
    return nullptr;
  }

  // Until the pages other threads unlinked are unmapped (back in their pool).
  void wait_for_unmapping() const noexcept {
    for (;;) {
      {
        const std::lock_guard<Mutex> lock(pages_mutex_);
        if (unmapping_ == 0) return;
      }
      std::this_thread::yield();
    }
  }

  // Marks slabs [first, first + count) of `p` in use. Called with pages_mutex_ held.
  char* use_slabs(page* p, std::size_t first, std::size_t count, bool run) noexcept {
    p->mark(first, count, true);
    if (run) run_slabs_ += count;
    if (p->retained) {  // an empty page is in use again
      p->retained = false;
      --retained_;
    }
    p->in_use += count;
    if (p->in_use == p->slabs) with_slab_.remove(p);
    return p->base + first * slab_bytes();
  }

  // Marks slabs [first, first + count) of `p` free. A page left with no slab in use is retained
  // for reuse, or unlinked: then true, and the caller unmaps it outside the lock. Called with
  // pages_mutex_ held.
  bool put_slabs(page* p, std::size_t first, std::size_t count) noexcept {
    const bool listed = p->in_use < p->slabs;  // a page is listed while it has a free slab
    p->mark(first, count, false);
    p->in_use -= count;
    if (p->in_use != 0) {
      if (!listed) with_slab_.push(p, /*at_front=*/true);
      return false;
    }
    if (listed) with_slab_.remove(p);
    if (retained_ < options_.retained_pages) {
      with_slab_.push(p, /*at_front=*/false);
      p->retained = true;
      ++retained_;
      return false;
    }
    detail::arena_unlink_page(all_, p);
    --pages_;
    ++released_;
    ++unmapping_;
    return true;
  }

  // A slab whose last object was freed goes back to its page.
  void give_back(slab* s) noexcept {
    page* p = s->page;
    char* base = base_of(s);
    bool drop = false;
    {
      const std::lock_guard<Mutex> lock(pages_mutex_);
      drop = put_slabs(p, static_cast<std::size_t>(base - p->base) / slab_bytes(), 1);
    }
    if (drop) drop_page(p);  // the syscall outside the lock
  }

  // Unmaps a page put_slabs() unlinked, then says so to a take_slabs() that waits for the page to
  // be back in its pool.
  void drop_page(page* p) noexcept {
    unmap_page(p);
    const std::lock_guard<Mutex> lock(pages_mutex_);
    --unmapping_;
  }

  void unmap_page(page* p) noexcept {
    // The address range may be mapped again for anything: leave no poison behind.
    detail::arena_unpoison(p->base, page_bytes_);
    // ---- labelled arena (label.hpp): the page leaves its label's list before the unmap ----
    if (options_.label != nullptr) detail::unrecord_labelled(chunks_, p->base, page_bytes_);
    chunks_.deallocate(p->base, page_bytes_, page_bytes_);
    delete p;
  }

  strategy strategy_;
  strategy chunks_;
  std::size_t page_bytes_;
  arena_options options_;
  size_class classes_[detail::arena_class_count];
  std::atomic<std::size_t> large_bytes_{0};

  Mutex grow_mutex_;  // held while a new page is mapped: after a class's, before the pages'
  mutable Mutex pages_mutex_;          // guards the members below; taken after a class's mutex
  page* all_ = nullptr;                // every huge page held, linked through all_prev / all_next
  detail::arena_page_list with_slab_;  // pages with a slab to give: in use first, then empty ones
  std::size_t pages_ = 0;
  std::size_t run_slabs_ = 0;  // slabs in runs of large allocations
  std::size_t retained_ = 0;
  std::uint64_t released_ = 0;
  std::size_t unmapping_ = 0;  // pages unlinked whose munmap is in progress

  struct no_fork_entry {};
  std::conditional_t<synchronized, detail::fork_lock_entry, no_fork_entry> fork_entry_;
};

/// A thread-safe node arena: one mutex per size class; frees from any thread.
using arena = basic_arena<std::mutex>;

/// A node arena without locks: the fastest, for containers used by one thread at a time.
using unsynchronized_arena = basic_arena<detail::no_mutex>;

}  // namespace hugepage
