// hugepage/detail/small_blocks.hpp - requests below a strategy's threshold (strategy.hpp): the
// standard allocator's path, over-alignment included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

namespace hugepage::detail {

/// ::operator new for `bytes` at `alignment` (a power of two). Throws std::bad_alloc.
inline void* allocate_small(std::size_t bytes, std::size_t alignment) {
  // Only reachable with a huge `bytes` under a threshold set above it; says so to the compiler,
  // which otherwise warns that such a size reaches ::operator new.
  if (bytes > static_cast<std::size_t>(PTRDIFF_MAX)) throw std::bad_alloc();
  if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    return ::operator new (bytes, std::align_val_t{alignment});
  }
  return ::operator new(bytes);
}

/// Releases a block from allocate_small() with the same `bytes` and `alignment`.
inline void deallocate_small(void* p, std::size_t bytes, std::size_t alignment) noexcept {
#if defined(__cpp_sized_deallocation)
  if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    return ::operator delete (p, bytes, std::align_val_t{alignment});
  }
  ::operator delete(p, bytes);
#else
  (void)bytes;
  if (alignment > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    return ::operator delete (p, std::align_val_t{alignment});
  }
  ::operator delete(p);
#endif
}

}  // namespace hugepage::detail
