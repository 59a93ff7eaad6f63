// hugepage/detail/arena_lists.hpp - the lists a node arena (arena.hpp) keeps of its records.
//
// Three intrusive doubly linked lists, linked through the records of detail/arena_slab.hpp: the
// pages with a free slab, every page held, and per size class the slabs with a free slot. None
// allocates or locks: the arena's mutexes guard them.
#pragma once

#include "hugepage/detail/arena_slab.hpp"

namespace hugepage::detail {

/// The pages with a free slab: those in use at the front, empty ones at the back, so that a
/// partly used page fills up before an empty one is touched and empty pages can go back.
/// Linked through arena_page::prev / next.
struct arena_page_list {
  arena_page* first = nullptr;
  arena_page* last = nullptr;

  void push(arena_page* p, bool at_front) noexcept {
    p->prev = p->next = nullptr;
    if (first == nullptr) {
      first = last = p;
    } else if (at_front) {
      p->next = first;
      first->prev = p;
      first = p;
    } else {
      p->prev = last;
      last->next = p;
      last = p;
    }
  }

  void remove(arena_page* p) noexcept {
    if (p->prev != nullptr) p->prev->next = p->next;
    if (p->next != nullptr) p->next->prev = p->prev;
    if (first == p) first = p->next;
    if (last == p) last = p->prev;
    p->prev = p->next = nullptr;
  }
};

/// Puts the new page `p` at the front of the list of every page held, `all`, linked through
/// arena_page::all_prev / all_next.
inline void arena_link_page(arena_page*& all, arena_page* p) noexcept {
  p->all_next = all;
  if (all != nullptr) all->all_prev = p;
  all = p;
}

/// Takes `p` out of the list of every page held, `all`.
inline void arena_unlink_page(arena_page*& all, arena_page* p) noexcept {
  if (p->all_prev != nullptr) p->all_prev->all_next = p->all_next;
  if (p->all_next != nullptr) p->all_next->all_prev = p->all_prev;
  if (all == p) all = p->all_next;
}

/// Puts slab `s` at the front of its class's list of slabs with room, `with_room`.
inline void arena_push_slab(arena_slab*& with_room, arena_slab* s) noexcept {
  s->prev = nullptr;
  s->next = with_room;
  if (with_room != nullptr) with_room->prev = s;
  with_room = s;
  s->has_room = true;
}

/// Takes slab `s` out of its class's list of slabs with room, `with_room`.
inline void arena_remove_slab(arena_slab*& with_room, arena_slab* s) noexcept {
  if (s->prev != nullptr) s->prev->next = s->next;
  if (s->next != nullptr) s->next->prev = s->prev;
  if (with_room == s) with_room = s->next;
  s->prev = s->next = nullptr;
  s->has_room = false;
}

}  // namespace hugepage::detail
