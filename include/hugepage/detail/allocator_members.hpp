// hugepage/detail/allocator_members.hpp - the member types every allocator of the library
// declares, written once.
//
// The STL allocators (allocator.hpp, arena_allocator.hpp, shared_arena_allocator.hpp) derive from
// allocator_members and so state only what differs between them: whether all instances are equal.
// - A stateless allocator (every instance frees what any other allocated): is_always_equal, and
//   propagate_on_container_move_assignment so a container's move assignment never copies node by
//   node; copy assignment and swap need no propagation since the allocators are equal.
// - A stateful allocator (bound to one arena): not always equal, and it propagates on copy, move
//   and swap: the arena travels with the nodes (arena_allocator.hpp says why).
// The base is empty, so the allocators stay as small as before (empty when stateless).
#pragma once

#include <cstddef>
#include <type_traits>

namespace hugepage::detail {

/// Whether every instance of an allocator type is equal to every other.
enum class allocator_state { stateless, stateful };

/// The member types of `Allocator<T, Param>`: value_type, size_type, difference_type, the three
/// propagate_on_container_* traits, is_always_equal and rebind<U>::other = Allocator<U, Param>.
template <template <class, class> class Allocator, class T, class Param, allocator_state State>
struct allocator_members {
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment =
      std::bool_constant<State == allocator_state::stateful>;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::bool_constant<State == allocator_state::stateful>;
  using is_always_equal = std::bool_constant<State == allocator_state::stateless>;

  template <class U>
  struct rebind {
    using other = Allocator<U, Param>;
  };
};

}  // namespace hugepage::detail
