// test/arena_support.hpp - what the arena tests (arena_test, arena_pages_test, arena_throws_test)
// share: node allocators over an arena and the operation counts scaled for sanitizers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "hugepage/arena_allocator.hpp"
#include "support.hpp"

namespace hugepage::test {

template <class K, class V>
using node_alloc = arena_allocator<std::pair<const K, V>>;
using u64 = std::uint64_t;
// An order book: a std::map of u64 on an arena.
using book_t = std::map<u64, u64, std::less<u64>, node_alloc<u64, u64>>;

// Sanitizers slow every operation by 10-50x: fewer operations, the same coverage of cases.
constexpr int scaled(int ops) { return under_asan() ? ops / 8 : ops; }

}  // namespace hugepage::test
