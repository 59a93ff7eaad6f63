// test/contents.hpp - what a container holds, checked: value_of(i) written at i (or under key i),
// then every element or key read back.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

namespace hugepage::test {

/// The value the tests store at index or key `i`.
constexpr std::uint64_t value_of(std::uint64_t i) noexcept {
  return (i * 0x9E3779B97F4A7C15ULL) ^ (i >> 7);
}

/// Whether `c` holds exactly value_of(0..n) in order.
template <class Container>
::testing::AssertionResult holds_sequence(const Container& c, std::size_t n) {
  if (c.size() != n) {
    return ::testing::AssertionFailure() << "size " << c.size() << ", expected " << n;
  }
  std::size_t i = 0;
  for (const auto& value : c) {
    if (value != value_of(i)) {
      return ::testing::AssertionFailure()
             << "element " << i << " is " << value << ", expected " << value_of(i);
    }
    ++i;
  }
  return ::testing::AssertionSuccess();
}

/// Whether the map `m` holds exactly {k -> value_of(k)} for k in 0..n.
template <class Map>
::testing::AssertionResult holds_keys(const Map& m, std::size_t n) {
  if (m.size() != n) {
    return ::testing::AssertionFailure() << "size " << m.size() << ", expected " << n;
  }
  for (std::uint64_t k = 0; k < n; ++k) {
    const auto it = m.find(k);
    if (it == m.end()) return ::testing::AssertionFailure() << "key " << k << " missing";
    if (it->second != value_of(k)) {
      return ::testing::AssertionFailure() << "key " << k << " maps to " << it->second;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace hugepage::test
