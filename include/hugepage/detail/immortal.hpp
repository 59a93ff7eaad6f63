// hugepage/detail/immortal.hpp - an object that is constructed in place and never destroyed.
//
// Process-wide objects (the pmr resources, the fallback registry) must outlive every container
// with static storage duration, which may free memory through them during exit. Storage in place
// also means creating one allocates nothing and cannot throw std::bad_alloc.
#pragma once

#include <new>
#include <utility>

namespace hugepage::detail {

template <class T>
class immortal {
 public:
  template <class... Args>
  explicit immortal(Args&&... args) noexcept(noexcept(T(std::forward<Args>(args)...))) {
    ::new (static_cast<void*>(storage_)) T(std::forward<Args>(args)...);
  }
  immortal(const immortal&) = delete;
  immortal& operator=(const immortal&) = delete;
  ~immortal() = default;  // deliberately leaves the object alive

  T* get() noexcept { return std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace hugepage::detail
