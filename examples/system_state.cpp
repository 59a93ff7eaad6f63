// What this machine offers, and what the library has mapped so far.
#include <cstdio>
#include <hugepage/hugepage.hpp>

int main() {
  const hugepage::system_state state = hugepage::read_system_state();
  std::printf("kernel %s, THP enabled=%s defrag=%s, MADV_COLLAPSE %s\n",
              state.kernel_release.c_str(), state.thp.enabled.value_or("?").c_str(),
              state.thp.defrag.value_or("?").c_str(), hugepage::name_of(state.collapse));
  for (const hugepage::hugetlb_pool& pool : state.pools) {
    std::printf("pool %zu kB: total %llu, available %llu\n", pool.page_bytes / 1024,
                static_cast<unsigned long long>(pool.total.value_or(0)),
                static_cast<unsigned long long>(pool.available().value_or(0)));
  }
  std::printf("library mapped %zu bytes\n", hugepage::stats().mapped_bytes());
}
