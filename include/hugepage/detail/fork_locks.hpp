// hugepage/detail/fork_locks.hpp - locks of live objects, held by the thread that forks.
//
// A fork() while another thread holds a mutex leaves the child that mutex locked with no thread
// to unlock it: the child's first call that takes it waits for ever. Each synchronized arena
// enters a process-wide list while it lives; a pthread_atfork handler takes the list's mutex and
// every listed object's mutexes before the fork and releases them in both processes after it, so
// the child finds every one unlocked and every structure they guard consistent.
//
// Objects made on first use without a function-local static (shared_arena<Tag>()) are made under
// `making_mutex()`, which the handler takes first: a fork waits for a making in progress, so the
// child finds each such object made or not begun, never half made with no thread to finish it.
//
// Lock order: the making mutex, this list, then each object's own mutexes, then the mapping
// registry's. An arena
// holds one of its mutexes while its strategy takes the registry's, so the registry's mutex must
// be taken after the arenas'. Prepare handlers run in the reverse order of their registration,
// so this handler is registered after the registry's (the constructor makes sure of it).
//
// The list is intrusive (entering it allocates nothing and cannot throw) and immortal: an arena
// with static storage duration may leave it during exit.
#pragma once

#include <pthread.h>

#include <mutex>

#include "hugepage/detail/immortal.hpp"
#include "hugepage/detail/mapping_registry.hpp"

namespace hugepage::detail {

/// One object in the list: `lock(owner)` takes all its mutexes in a fixed order, `unlock(owner)`
/// releases them; `in_child(owner)`, when set, runs in the child first (the threads that were in
/// the middle of something are gone there).
struct fork_lock_entry {
  void* owner = nullptr;
  void (*lock)(void*) noexcept = nullptr;
  void (*unlock)(void*) noexcept = nullptr;
  void (*in_child)(void*) noexcept = nullptr;
  fork_lock_entry* prev = nullptr;
  fork_lock_entry* next = nullptr;
};

class fork_locks {
 public:
  fork_locks() noexcept {
    static_cast<void>(registry());  // its handler first: see the lock order above
    // A failure (no memory at start-up) leaves fork unprotected, as before this handler existed.
    ::pthread_atfork(&before_fork, &after_fork, &after_fork_in_child);
  }

  /// Enters `e`, whose owner must be fully constructed: a fork may lock it at once.
  void add(fork_lock_entry& e) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    e.prev = nullptr;
    e.next = first_;
    if (first_ != nullptr) first_->prev = &e;
    first_ = &e;
  }

  /// Held while an object that a fork must not see half made is made (see the top of this file).
  std::mutex& making_mutex() noexcept { return making_; }

  /// Removes `e`; after it returns no fork touches its owner.
  void remove(fork_lock_entry& e) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (e.prev != nullptr) e.prev->next = e.next;
    if (e.next != nullptr) e.next->prev = e.prev;
    if (first_ == &e) first_ = e.next;
    e.prev = e.next = nullptr;
  }

 private:
  static fork_locks& instance() noexcept;

  static void before_fork() noexcept {
    fork_locks& self = instance();
    self.making_.lock();
    self.mutex_.lock();
    for (fork_lock_entry* e = self.first_; e != nullptr; e = e->next) e->lock(e->owner);
  }

  // In the parent and in the child: the thread that forked holds every lock (before_fork).
  static void after_fork() noexcept {
    fork_locks& self = instance();
    for (fork_lock_entry* e = self.first_; e != nullptr; e = e->next) e->unlock(e->owner);
    self.mutex_.unlock();
    self.making_.unlock();
  }

  static void after_fork_in_child() noexcept {
    fork_locks& self = instance();
    for (fork_lock_entry* e = self.first_; e != nullptr; e = e->next) {
      if (e->in_child != nullptr) e->in_child(e->owner);
    }
    after_fork();
  }

  std::mutex making_;
  std::mutex mutex_;
  fork_lock_entry* first_ = nullptr;
};

inline fork_locks& arena_fork_locks() noexcept {
  static immortal<fork_locks> storage;
  return *storage.get();
}

inline fork_locks& fork_locks::instance() noexcept { return arena_fork_locks(); }

// Initialised at program start, before any thread can fork while another holds the guard of the
// function-local static (see statics_initialised in strategy.hpp).
inline const bool fork_locks_initialised = (static_cast<void>(arena_fork_locks()), true);

}  // namespace hugepage::detail
