// std::pmr: the same strategies as memory resources.
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <memory_resource>
#include <vector>

int main() {
  std::pmr::vector<long> ticks(hugepage::pmr::thp_resource());
  ticks.resize(4 << 20);  // 32 MiB

  hugepage::allocation_options options;
  options.prefault = true;  // pay the page faults now, not on the first requests
  hugepage::pmr::collapse_memory_resource warm(options);
  std::pmr::vector<long> book(8 << 20, &warm);  // 64 MiB, resident and huge already

  const auto report = hugepage::backing_of(book.data(), book.size() * sizeof(long));
  std::printf("book: %.1f%% huge, ticks: %zu entries\n", 100 * report.huge_fraction(),
              ticks.size());
}
