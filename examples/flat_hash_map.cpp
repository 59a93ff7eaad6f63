#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <utility>

using fare_cache = absl::flat_hash_map<
    std::uint64_t, std::uint64_t, absl::Hash<std::uint64_t>, std::equal_to<std::uint64_t>,
    hugepage::collapse_allocator<std::pair<const std::uint64_t, std::uint64_t>>>;

int main() {
  fare_cache fares;
  fares.reserve(4'000'000);  // one ~136 MiB block, on huge pages when reserve() returns
  for (std::uint64_t route = 0; route < 4'000'000; ++route) fares.try_emplace(route, route * 7);
  std::printf("fare of route 42: %llu, collapses: %llu\n",
              static_cast<unsigned long long>(fares.at(42)),
              static_cast<unsigned long long>(hugepage::stats().collapse_attempts));
}
