// hugepage/detail/shared_text.hpp - an immutable, reference-counted string for exceptions.
//
// An exception object is copied when it is thrown and may be copied again while it propagates
// (std::exception_ptr, catch by value); a copy that throws there calls std::terminate. So the
// library's exceptions hold their text here: built once (that may throw std::bad_alloc, before
// the throw), then shared by every copy, which only counts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <string_view>
#include <utility>

namespace hugepage::detail {

class shared_text {
 public:
  shared_text() noexcept = default;
  explicit shared_text(std::string_view text) {
    // One block: the count, then the characters and their terminating zero.
    void* raw = ::operator new(sizeof(block) + text.size() + 1);
    block_ = new (raw) block{};
    char* chars = reinterpret_cast<char*>(block_ + 1);
    if (!text.empty()) std::memcpy(chars, text.data(), text.size());
    chars[text.size()] = '\0';
    block_->size = text.size();
  }
  shared_text(const shared_text& other) noexcept : block_(other.block_) { retain(); }
  // By value: the copy took its reference; swapping hands ours to it to release.
  shared_text& operator=(shared_text other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~shared_text() { release(); }

  /// The text, zero-terminated; "" when empty.
  const char* c_str() const noexcept {
    return block_ != nullptr ? reinterpret_cast<const char*>(block_ + 1) : "";
  }
  std::size_t size() const noexcept { return block_ != nullptr ? block_->size : 0; }
  std::string_view view() const noexcept { return {c_str(), size()}; }

 private:
  struct block {
    std::atomic<std::size_t> references{1};
    std::size_t size = 0;
  };
  void retain() noexcept {
    if (block_ != nullptr) block_->references.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    if (block_ == nullptr || block_->references.fetch_sub(1, std::memory_order_acq_rel) != 1) {
      return;
    }
    block_->~block();
    ::operator delete(static_cast<void*>(block_));
    block_ = nullptr;
  }

  block* block_ = nullptr;
};

}  // namespace hugepage::detail
