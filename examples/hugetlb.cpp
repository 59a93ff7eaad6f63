// Guaranteed huge pages from the hugetlb pool, and what happens when the pool is short.
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <vector>

int main() {
  using strict_vector = std::vector<char, hugepage::huge_page_allocator<char>>;
  try {
    strict_vector book(32 << 20);  // 16 pages of 2 MiB, or pool_exhausted
    std::printf("order book on hugetlb: %zu bytes\n", book.size());
  } catch (const hugepage::pool_exhausted& e) {
    std::printf("%s\n", e.what());  // says how many pages, how many free, and the fix
  }
  using lenient =
      hugepage::huge_page_allocator<char, hugepage::page_size::huge_2m, hugepage::fallback>;
  std::vector<char, lenient> cache(32 << 20);  // never throws for a short pool: THP instead
  std::printf("fallbacks to THP so far: %llu\n",
              static_cast<unsigned long long>(hugepage::stats().fallbacks_to_thp));
}
