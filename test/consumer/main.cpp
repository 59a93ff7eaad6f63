// A consumer of the installed or embedded package: must compile, link and get THP-advised memory.
#include <cstdio>
#include <hugepage/hugepage.hpp>
#include <vector>

int main() {
  std::vector<int, hugepage::thp_allocator<int>> v(4u << 20, 7);  // 16 MiB: mapped, not small
  const hugepage::statistics s = hugepage::stats();
  if (v[12345] != 7 || s.requested_thp < v.size() * sizeof(int)) {
    std::puts("consumer: unexpected state");
    return 1;
  }
  std::puts("consumer: ok");
  return 0;
}
