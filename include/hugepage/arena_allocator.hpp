// hugepage/arena_allocator.hpp - a stateful STL allocator that allocates from a node arena.
//
//   hugepage::arena nodes;                                   // THP; arena.hpp for the options
//   using node_allocator = hugepage::arena_allocator<std::pair<const std::uint64_t, Order>>;
//   std::map<std::uint64_t, Order, std::less<>, node_allocator> book{node_allocator(nodes)};
//
// Propagation and equality (what makes copy, move and swap of containers correct):
// - Two allocators are equal when they point at the same arena: either can free what the other
//   allocated. Allocators of different arenas are never equal (is_always_equal is false).
// - propagate_on_container_copy_assignment, _move_assignment and _swap are all true: the arena
//   travels with the nodes. Move assignment and swap are O(1) and never mix arenas (without
//   propagation, swapping containers of different arenas would be undefined behaviour, and move
//   assignment would copy node by node); after copy assignment the target frees its old nodes
//   into its old arena and holds the copy in the source's arena.
// - A copy-constructed container uses the same arena as the original
//   (select_on_container_copy_construction returns a copy of the allocator).
// So a container may end up in any arena its allocator was ever assigned from: every such arena
// must outlive it. The simplest rule: containers that are assigned or swapped with each other
// share one arena, or their arenas outlive all of them.
//
// There is no default constructor: an allocator is bound to an arena when made.
#pragma once

#include <cstddef>
#include <limits>
#include <type_traits>

#include "hugepage/arena.hpp"
#include "hugepage/detail/allocator_members.hpp"
#include "hugepage/errors.hpp"

namespace hugepage {

/// A stateful allocator of `T` from an `Arena` (`arena` or `unsynchronized_arena`).
///
/// allocate(n): throws std::bad_array_new_length when n * sizeof(T) overflows, otherwise what the
/// arena throws (pool_exhausted, allocation_error, std::bad_alloc). deallocate(p, n): noexcept.
/// Thread safety: that of the arena.
template <class T, class Arena = arena>
class arena_allocator : public detail::allocator_members<arena_allocator, T, Arena,
                                                         detail::allocator_state::stateful> {
 public:
  /// Allocates from `source`, which must outlive every container using this allocator.
  explicit arena_allocator(Arena& source) noexcept : arena_(&source) {}

  template <class U>
  arena_allocator(const arena_allocator<U, Arena>& other) noexcept  // NOLINT: implicit rebind
      : arena_(&other.get_arena()) {}

  [[nodiscard]] T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      detail::throw_bad_array_new_length();
    }
    return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
  }

  void deallocate(T* p, std::size_t n) noexcept {
    arena_->deallocate(p, n * sizeof(T), alignof(T));
  }

  /// The arena this allocator allocates from.
  Arena& get_arena() const noexcept { return *arena_; }

  template <class U>
  friend bool operator==(const arena_allocator& a, const arena_allocator<U, Arena>& b) noexcept {
    return &a.get_arena() == &b.get_arena();
  }
  template <class U>
  friend bool operator!=(const arena_allocator& a, const arena_allocator<U, Arena>& b) noexcept {
    return !(a == b);
  }

 private:
  Arena* arena_;
};

}  // namespace hugepage
