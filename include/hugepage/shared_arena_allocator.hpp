// hugepage/shared_arena_allocator.hpp - a stateless node allocator over a process-wide arena.
//
//   struct book_tag { static constexpr const char* label = "book"; };   // optional, see below
//   template <class K, class V>
//   using book_map = std::map<K, V, std::less<K>,
//                             hugepage::shared_arena_allocator<std::pair<const K, V>, book_tag>>;
//   struct order_book { book_map<long, int> bids, asks; };   // default-constructible, copyable
//
// arena_allocator (arena_allocator.hpp) is bound to an arena object when made: a container that is
// a class member must be given it in every constructor of its owner, and an arena per owner makes
// the owner uncopyable and keeps slabs of its own. shared_arena_allocator<T, Tag> instead names
// one arena per `Tag` type, made on first use and never destroyed: the allocator is empty,
// default-constructible and always equal (is_always_equal), so a type alias is the whole port,
// and every container of one tag shares the arena's huge pages and slabs.
//
// The tag: any type. It may declare, each optional,
//   static constexpr hugepage::strategy source = ...;   // where pages come from; default THP
//   static constexpr const char* label = "...";          // arena_options::label; default none
//   static constexpr std::size_t retained_pages = ...;  // arena_options::retained_pages; default 1
//   static constexpr hugepage::numa_placement numa = ...;  // the slabs' nodes (numa.hpp); default:
//                                                         // the source's own placement
// Two tags are two arenas, even with equal members.
//
// The arena is a hugepage::arena (arena.hpp), the synchronized variant: one mutex per size class,
// any thread may allocate and free. Same layout, statistics (shared_arena<Tag>().stats(),
// .backing()), labels and fork rules as an arena object: fork() takes and releases its mutexes
// (detail/fork_locks.hpp); over a `dont_fork` strategy a child must not touch its containers.
//
// What it costs beside an arena per object:
// - locks: every allocate and deallocate takes its size class's mutex, where an
//   unsynchronized_arena takes none. Uncontended that is a locked instruction, a full barrier on
//   x86: cheap in a loop of allocations, dearer beside a container's cache-missing stores, which it
//   waits for (an insert into a big tree). Threads that insert into containers of one tag at once
//   also contend per size class; give them different tags.
// - memory: one 2 MiB slab per size class in use, for the whole process, instead of per arena
//   object; the arena lives until exit, and keeps up to `retained_pages` empty huge pages.
// - lifetime: never destroyed (made in static storage, no destructor), so containers with static
// storage duration
//   may free into it during exit, in any order. Its pages stay mapped until the process ends.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <mutex>
#include <new>
#include <type_traits>

#include "hugepage/arena.hpp"
#include "hugepage/detail/allocator_members.hpp"
#include "hugepage/detail/fork_locks.hpp"
#include "hugepage/detail/label_hooks.hpp"
#include "hugepage/errors.hpp"
#include "hugepage/strategy.hpp"

namespace hugepage {

/// The tag of the process-wide arena used when none is named: THP, unlabelled, one retained page.
struct default_arena_tag {};

namespace detail {

template <class Tag, class = void>
struct tag_source {
  static constexpr strategy value = strategy::thp();
};
template <class Tag>
struct tag_source<Tag, std::void_t<decltype(Tag::source)>> {
  static constexpr strategy value = Tag::source;
};

// A tag's `numa` member places the slabs of its source.
template <class Tag, class = void>
struct tag_placed_source {
  static constexpr strategy value = tag_source<Tag>::value;
};
template <class Tag>
struct tag_placed_source<Tag, std::void_t<decltype(Tag::numa)>> {
  static constexpr strategy value = tag_source<Tag>::value.placed(Tag::numa);
};

template <class Tag, class = void>
struct tag_retained_pages {
  static constexpr std::size_t value = arena_options{}.retained_pages;
};
template <class Tag>
struct tag_retained_pages<Tag, std::void_t<decltype(Tag::retained_pages)>> {
  static constexpr std::size_t value = Tag::retained_pages;
};

template <class Tag>
constexpr arena_options arena_options_of() noexcept {
  arena_options o;
  o.retained_pages = tag_retained_pages<Tag>::value;
  o.label = label_of<Tag>;
  return o;
}

// The arena of `Tag`, in storage that is constant-initialised: no function-local static, whose
// guard a thread holds while it makes the object. A fork() from another thread meanwhile would
// leave the child that guard held for ever, and its first shared_arena<Tag>() would wait on it.
template <class Tag>
struct shared_arena_slot {
  static inline std::atomic<arena*> made{nullptr};
  alignas(arena) static inline unsigned char storage[sizeof(arena)];
};

// Makes the arena under fork_locks' making mutex, which fork()'s prepare handler takes first: a
// fork waits for the making, and the child finds the arena made, or not begun and free to make.
template <class Tag>
arena* make_shared_arena() noexcept {
  fork_locks& locks = arena_fork_locks();  // its pthread_atfork handler first
  const std::lock_guard<std::mutex> lock(locks.making_mutex());
  arena* a = shared_arena_slot<Tag>::made.load(std::memory_order_relaxed);
  if (a == nullptr) {
    a = ::new (static_cast<void*>(shared_arena_slot<Tag>::storage))
        arena(tag_placed_source<Tag>::value, arena_options_of<Tag>());
    shared_arena_slot<Tag>::made.store(a, std::memory_order_release);
  }
  return a;
}

}  // namespace detail

/// The process-wide arena of `Tag`, made on the first call (thread-safe, and safe against a fork()
/// from another thread meanwhile) and never destroyed. Its strategy, label and retained pages come
/// from the tag (see the top of this file).
template <class Tag = default_arena_tag>
arena& shared_arena() noexcept {
  arena* const a = detail::shared_arena_slot<Tag>::made.load(std::memory_order_acquire);
  return a != nullptr ? *a : *detail::make_shared_arena<Tag>();
}

/// A stateless allocator of `T` from shared_arena<Tag>(). Default-constructible; all instances
/// of one Tag are equal (rebinding keeps the tag), so containers copy, move and swap as with
/// std::allocator.
///
/// allocate(n): throws std::bad_array_new_length when n * sizeof(T) overflows, otherwise what the
/// arena throws (pool_exhausted, allocation_error, std::bad_alloc). deallocate(p, n): noexcept.
/// Thread-safe.
template <class T, class Tag = default_arena_tag>
class shared_arena_allocator
    : public detail::allocator_members<shared_arena_allocator, T, Tag,
                                       detail::allocator_state::stateless> {
 public:
  using tag = Tag;

  shared_arena_allocator() noexcept = default;
  template <class U>
  shared_arena_allocator(const shared_arena_allocator<U, Tag>& /*other*/) noexcept {}  // NOLINT

  [[nodiscard]] T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      detail::throw_bad_array_new_length();
    }
    return static_cast<T*>(get_arena().allocate(n * sizeof(T), alignof(T)));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    get_arena().deallocate(p, n * sizeof(T), alignof(T));
  }

  /// The arena every allocator of this tag allocates from: shared_arena<Tag>().
  static arena& get_arena() noexcept { return shared_arena<Tag>(); }

  template <class U>
  friend bool operator==(const shared_arena_allocator& /*a*/,
                         const shared_arena_allocator<U, Tag>& /*b*/) noexcept {
    return true;
  }
  template <class U>
  friend bool operator!=(const shared_arena_allocator& /*a*/,
                         const shared_arena_allocator<U, Tag>& /*b*/) noexcept {
    return false;
  }
};

}  // namespace hugepage
