// hugepage/arena_resource.hpp - a std::pmr::memory_resource over a node arena (arena.hpp).
//
//   hugepage::unsynchronized_arena nodes;
//   hugepage::pmr::unsynchronized_arena_resource resource(nodes);
//   std::pmr::map<std::uint64_t, std::uint64_t> book(&resource);
//
// Unlike std::pmr::unsynchronized_pool_resource over thp_resource(), the arena gives empty huge
// pages back to the system, has a thread-safe variant, and reports its coverage.
#pragma once

#include <cstddef>
#include <memory_resource>

#include "hugepage/arena.hpp"

namespace hugepage::pmr {

/// A memory_resource that allocates from an `Arena`, which must outlive it and everything
/// allocated through it. Two resources are equal when they use the same arena.
/// Thread safety: that of the arena.
template <class Arena>
class basic_arena_resource : public std::pmr::memory_resource {
 public:
  explicit basic_arena_resource(Arena& source) noexcept : arena_(&source) {}

  /// The arena behind this resource.
  Arena& get_arena() const noexcept { return *arena_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    return arena_->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    arena_->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    if (this == &other) return true;
    const auto* that = dynamic_cast<const basic_arena_resource*>(&other);
    return that != nullptr && that->arena_ == arena_;
  }

  Arena* arena_;
};

/// A resource over a thread-safe arena.
using arena_resource = basic_arena_resource<hugepage::arena>;

/// A resource over an unsynchronized arena: one thread at a time.
using unsynchronized_arena_resource = basic_arena_resource<hugepage::unsynchronized_arena>;

}  // namespace hugepage::pmr
