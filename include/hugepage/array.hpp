// hugepage/array.hpp - an owning, sized array on huge pages: the port of `new T[n]`.
//
//   auto ranks = hugepage::make_array<double>(nodes);                  // new double[nodes]()
//   auto edges = hugepage::make_array_for_overwrite<std::uint32_t>(m); // new std::uint32_t[m]
//   ranks[v] = 1.0 / nodes;  edges.data();  edges.size();  for (auto e : edges) ...
//   hugepage::array_block<std::uint32_t> b = edges.release();          // hand the storage on
//   auto again = hugepage::array<std::uint32_t>::adopt(b);             // and take it back
//
// Big arrays of real programs are often `new T[n]`, freed with `delete[] p` elsewhere. The STL
// allocators of allocator.hpp serve them, but allocate() does not construct and deallocate()
// needs the exact n. array<T, Alloc> keeps both: it owns n elements allocated by Alloc
// (thp_allocator<T> by default), constructed as `new T[n]()` (make_array: value-initialised) or
// `new T[n]` (make_array_for_overwrite: default-initialised, so an int array is not written
// until the program writes it, and its pages are first touched there), and destroys them in
// reverse order and frees them when it dies. Movable, not copyable, like std::unique_ptr<T[]>.
//
// Where the size is not known at the delete site: the owner keeps it. An array replaces the
// `T*` member or variable (operator[] as before; data() where a T* is passed on), and its
// destructor is the delete[]. For code that hands raw storage on, release() gives the pointer
// with its size (array_block), and adopt() or delete_array() take both back. For
// std::unique_ptr<T[]>, array_deleter<T> carries the size: make_unique_array<T>(n) is the port.
// There is deliberately no size-less `delete_array(p)`. A header in front of the elements would
// move them off the huge-page boundary and make an array of whole huge pages map one more; a
// lookup table of live arrays would cost a process-wide lock per array, a record to keep across
// fork(), and still not know blocks the strategy passed to ::operator new. A size that travels
// with the pointer costs none of that.
//
// Construction: placement new (std::uninitialized_value_construct_n or _default_construct_n),
// not Alloc::construct, exactly as new T[n] and new T[n]() do. A throwing constructor destroys the
// elements constructed so far and frees the memory; the exception passes on.
//
// Kernel: as for the allocator (allocator.hpp); an array below the allocator's threshold is served
// by ::operator new. Coverage: backing_of(a.data(), a.size() * sizeof(T)).
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "hugepage/allocator.hpp"

namespace hugepage {

/// Storage handed from one owner to the next: `size` constructed elements at `data`, allocated
/// by an allocator equal to `Alloc()`. The allocator is part of the type, so a block cannot be
/// adopted by an array of another allocator (that does not compile). Nothing frees it on its own:
/// give it to array::adopt() or delete_array() exactly as release() gave it (another `size` or
/// `data` is undefined behaviour: the allocator frees by size and nothing can check it).
template <class T, class Alloc = thp_allocator<T>>
struct array_block {
  T* data = nullptr;
  std::size_t size = 0;
};

namespace detail {

// Destroys `n` elements at `p` in reverse order (as delete[] does) and frees them with `alloc`.
template <class T, class Alloc>
void destroy_and_free(Alloc& alloc, T* p, std::size_t n) noexcept {
  if (p == nullptr) return;
  if constexpr (!std::is_trivially_destructible_v<T>) {
    for (std::size_t i = n; i > 0; --i) p[i - 1].~T();
  }
  std::allocator_traits<Alloc>::deallocate(alloc, p, n);
}

// Allocates `n` elements with `alloc` and constructs them: value-initialised when `value`, else
// default-initialised. A throwing constructor: what was constructed is destroyed, the memory
// freed, and the exception passes on.
template <class T, class Alloc>
T* allocate_and_construct(Alloc& alloc, std::size_t n, bool value) {
  if (n == 0) return nullptr;
  T* p = std::allocator_traits<Alloc>::allocate(alloc, n);
  std::size_t built = 0;
  try {
    for (; built < n; ++built) {
      if (value) {
        ::new (static_cast<void*>(p + built)) T();
      } else {
        ::new (static_cast<void*>(p + built)) T;
      }
    }
  } catch (...) {  // as new T[n]: what was built is destroyed, last first
    while (built > 0) p[--built].~T();
    std::allocator_traits<Alloc>::deallocate(alloc, p, n);
    throw;
  }
  return p;
}

}  // namespace detail

/// An owning array of `size()` elements of `T` from `Alloc` (an allocator of T, e.g.
/// thp_allocator<T>, huge_page_allocator<T>, arena_allocator<T>). Movable (the allocator moves
/// with the storage), not copyable. Empty when default-constructed or moved from.
///
/// Thread safety: as a std::vector: const members from any thread, others from one at a time.
template <class T, class Alloc = thp_allocator<T>>
class array {
  static_assert(std::is_same_v<typename std::allocator_traits<Alloc>::value_type, T>,
                "Alloc must allocate T");

 public:
  using value_type = T;
  using allocator_type = Alloc;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  /// An empty array (no allocation).
  array() noexcept(std::is_nothrow_default_constructible_v<Alloc>) : s_(Alloc()) {}
  explicit array(const Alloc& alloc) noexcept : s_(alloc) {}

  /// Takes ownership of `block`: `block.size` constructed elements allocated by `alloc` (or an
  /// allocator equal to it) with exactly that count, e.g. from release().
  static array adopt(array_block<T, Alloc> block, const Alloc& alloc = Alloc()) noexcept {
    array a(alloc);
    a.s_.data = block.data;
    a.s_.size = block.size;
    return a;
  }

  array(array&& other) noexcept : s_(std::move(other.s_)) {
    other.s_.data = nullptr;
    other.s_.size = 0;
  }
  array& operator=(array&& other) noexcept {
    if (this != &other) {
      reset();
      static_cast<Alloc&>(s_) = std::move(static_cast<Alloc&>(other.s_));
      s_.data = std::exchange(other.s_.data, nullptr);
      s_.size = std::exchange(other.s_.size, 0);
    }
    return *this;
  }
  array(const array&) = delete;
  array& operator=(const array&) = delete;

  /// Destroys the elements (last first) and frees the memory: the `delete[]`.
  ~array() { reset(); }

  /// Destroys and frees the elements now; the array is empty afterwards.
  void reset() noexcept {
    detail::destroy_and_free(static_cast<Alloc&>(s_), s_.data, s_.size);
    s_.data = nullptr;
    s_.size = 0;
  }

  /// Gives up ownership: returns the pointer and the exact size, and leaves the array empty. The
  /// caller frees the block with delete_array() or adopt()s it into another array with an equal
  /// allocator.
  [[nodiscard]] array_block<T, Alloc> release() noexcept {
    array_block<T, Alloc> block{s_.data, s_.size};
    s_.data = nullptr;
    s_.size = 0;
    return block;
  }

  size_type size() const noexcept { return s_.size; }
  bool empty() const noexcept { return s_.size == 0; }
  T* data() noexcept { return s_.data; }
  const T* data() const noexcept { return s_.data; }
  /// Element `i`; unchecked, like the raw array it replaces (i < size()).
  T& operator[](size_type i) noexcept { return s_.data[i]; }
  const T& operator[](size_type i) const noexcept { return s_.data[i]; }
  iterator begin() noexcept { return s_.data; }
  iterator end() noexcept { return s_.data + s_.size; }
  const_iterator begin() const noexcept { return s_.data; }
  const_iterator end() const noexcept { return s_.data + s_.size; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  allocator_type get_allocator() const noexcept { return static_cast<const Alloc&>(s_); }

  friend void swap(array& a, array& b) noexcept {
    using std::swap;
    swap(static_cast<Alloc&>(a.s_), static_cast<Alloc&>(b.s_));
    swap(a.s_.data, b.s_.data);
    swap(a.s_.size, b.s_.size);
  }

 private:
  // The allocator as an empty base: a stateless one costs an array no space (16 bytes, as a
  // pointer and a size).
  struct storage : Alloc {
    explicit storage(const Alloc& a) noexcept : Alloc(a) {}
    T* data = nullptr;
    std::size_t size = 0;
  };
  storage s_;
};

/// `new T[n]()`: an array of `n` value-initialised elements (zero for arithmetic types).
/// Throws std::bad_array_new_length when n * sizeof(T) overflows, what the allocator throws
/// (pool_exhausted, allocation_error, std::bad_alloc), or what T's constructor throws; nothing is
/// left allocated or constructed then.
template <class T, class Alloc = thp_allocator<T>>
array<T, Alloc> make_array(std::size_t n, const Alloc& alloc = Alloc()) {
  Alloc a(alloc);
  T* p = detail::allocate_and_construct<T>(a, n, /*value=*/true);
  return array<T, Alloc>::adopt({p, n}, a);
}

/// `new T[n]`: an array of `n` default-initialised elements (indeterminate for arithmetic types:
/// nothing is written, so pages are first touched by the program's own writes). Throws as
/// make_array().
template <class T, class Alloc = thp_allocator<T>>
array<T, Alloc> make_array_for_overwrite(std::size_t n, const Alloc& alloc = Alloc()) {
  Alloc a(alloc);
  T* p = detail::allocate_and_construct<T>(a, n, /*value=*/false);
  return array<T, Alloc>::adopt({p, n}, a);
}

/// The `delete[]` of storage given up by array::release(): destroys the `block.size` elements
/// (last first) and frees them with `alloc`, which must equal the allocator that allocated them.
/// The block is left empty, so a second delete_array() of it does nothing (a copy of the block
/// made before is still a dangling pointer, as with delete[]). Never throws.
template <class T, class Alloc>
void delete_array(array_block<T, Alloc>& block, Alloc alloc = Alloc()) noexcept {
  detail::destroy_and_free(alloc, block.data, block.size);
  block = {};
}

/// delete_array() of a block straight from release(): `delete_array(a.release())`.
template <class T, class Alloc>
void delete_array(array_block<T, Alloc>&& block, Alloc alloc = Alloc()) noexcept {
  detail::destroy_and_free(alloc, block.data, block.size);
}

/// A std::unique_ptr<T[], array_deleter<T>> deleter: it holds the element count, which the
/// allocator needs to free the block, and the allocator.
template <class T, class Alloc = thp_allocator<T>>
struct array_deleter {
  std::size_t size = 0;
  Alloc alloc = Alloc();

  void operator()(T* p) noexcept { detail::destroy_and_free(alloc, p, size); }
};

/// A std::unique_ptr owning `n` elements of `T` from `Alloc`.
template <class T, class Alloc = thp_allocator<T>>
using unique_array = std::unique_ptr<T[], array_deleter<T, Alloc>>;

/// The port of `std::unique_ptr<T[]>(new T[n]())` (std::make_unique<T[]>(n)): value-initialised.
/// Throws as make_array().
template <class T, class Alloc = thp_allocator<T>>
unique_array<T, Alloc> make_unique_array(std::size_t n, const Alloc& alloc = Alloc()) {
  array_block<T, Alloc> b = make_array<T, Alloc>(n, alloc).release();
  return unique_array<T, Alloc>(b.data, array_deleter<T, Alloc>{b.size, alloc});
}

/// The port of `std::unique_ptr<T[]>(new T[n])` (std::make_unique_for_overwrite<T[]>):
/// default-initialised. Throws as make_array().
template <class T, class Alloc = thp_allocator<T>>
unique_array<T, Alloc> make_unique_array_for_overwrite(std::size_t n,
                                                       const Alloc& alloc = Alloc()) {
  array_block<T, Alloc> b = make_array_for_overwrite<T, Alloc>(n, alloc).release();
  return unique_array<T, Alloc>(b.data, array_deleter<T, Alloc>{b.size, alloc});
}

}  // namespace hugepage
