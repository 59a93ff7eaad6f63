// tools/doctor/mapping_summary.cpp - a process's parsed smaps summed up: memory classes, their
// huge shares, its largest mappings (a 1 GiB cascade block joined into one entry).
#include "mapping_summary.hpp"

#include <algorithm>
#include <string_view>

#include "hugepage/os.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

namespace {

bool is_private_anonymous(const mapping_info& m) {
  if (m.is_hugetlb()) return true;
  const std::string_view name = m.name;
  return name.empty() || name == "[heap]" || name == "[stack]" || name.rfind("[anon:", 0) == 0;
}

// Shared memory: MAP_SHARED|MAP_ANONYMOUS ("/dev/zero (deleted)", "[anon_shmem:...]"), SysV
// ("/SYSV0000..."), memfd ("/memfd:..."), POSIX shm and other tmpfs files under /dev/shm, and any
// mapping with PMD-mapped shmem. hugetlb mappings are counted apart.
bool is_shared_memory(const mapping_info& m) {
  if (m.is_hugetlb()) return false;
  if (m.shmem_huge > 0) return true;
  const std::string_view name = m.name;
  const bool shared = m.permissions.size() >= 4 && m.permissions[3] == 's';
  return name.rfind("/dev/zero", 0) == 0 || name.rfind("/SYSV", 0) == 0 ||
         name.rfind("/memfd:", 0) == 0 || name.rfind("[anon_shmem", 0) == 0 ||
         (shared && name.rfind("/dev/shm/", 0) == 0);
}

bool is_private(const mapping_info& m) {
  return m.permissions.size() >= 4 && m.permissions[3] == 'p';
}

// Adds `bytes` on pages of `page_bytes` and `kind` to `pages`, keeping the order of
// anon_mapping::pages (largest page first, hugetlb before THP of one size) and one share per
// size and kind.
void add_share(std::vector<page_share>& pages, std::size_t page_bytes, page_kind kind,
               std::size_t bytes) {
  if (bytes == 0) return;
  const auto before = [](const page_share& a, std::size_t size, page_kind k) {
    return a.page_bytes != size ? a.page_bytes > size : a.kind < k;
  };
  auto at = std::find_if(pages.begin(), pages.end(),
                         [&](const page_share& s) { return !before(s, page_bytes, kind); });
  if (at != pages.end() && at->page_bytes == page_bytes && at->kind == kind) {
    at->bytes += bytes;
  } else {
    pages.insert(at, page_share{page_bytes, kind, bytes});
  }
}

// `next`, a listed entry made of the record right after `block`'s last one, added to `block`.
void join(anon_mapping& block, const anon_mapping& next) {
  block.size += next.size;
  block.resident += next.resident;
  block.huge += next.huge;
  for (const page_share& s : next.pages) add_share(block.pages, s.page_bytes, s.kind, s.bytes);
  // The flags of any part: a THP tail is advised, its hugetlb head has nothing to advise.
  if (block.flags.empty() || (block.flags == "nh" && next.flags == "hg")) block.flags = next.flags;
  block.shared = block.shared || next.shared;  // pages a forked child maps too
  block.mappings_joined += next.mappings_joined;
}

}  // namespace

bool joins_cascade(const mapping_info& head, const mapping_info& next) noexcept {
  if (head.end != next.start || !is_private(head) || head.permissions != next.permissions) {
    return false;
  }
  const std::size_t page = head.kernel_page_bytes;
  // Private is the 'p' of the permissions, not Shared_Hugetlb: the kernel counts a private page
  // as shared while a forked child maps it too, or while it is not present (being migrated).
  if (!head.is_hugetlb() || head.start % page != 0) return false;
  if (next.size() >= page) return false;
  if (next.is_hugetlb()) return next.kernel_page_bytes < page;
  const std::string_view name = next.name;
  return (name.empty() || name.rfind("[anon:", 0) == 0) && next.advised_huge() &&
         !is_shared_memory(next);
}

process_report summarize_mappings(const std::vector<mapping_info>& mappings, std::size_t top,
                                  std::size_t thp_page_bytes) {
  process_report p;
  p.mappings = mappings.size();
  std::vector<anon_mapping> listed;
  const mapping_info* previous = nullptr;  // the record of listed.back()'s last part
  for (const mapping_info& m : mappings) {
    p.rss += m.rss;
    const std::size_t hugetlb = m.private_hugetlb + m.shared_hugetlb;
    if (m.is_hugetlb()) p.hugetlb[m.kernel_page_bytes] += hugetlb;
    if (m.advised_huge()) p.thp_advised += m.size();
    const bool shared = is_shared_memory(m);
    const bool anonymous = !shared && is_private_anonymous(m);
    // Each class gets its own numerator and denominator, so no fraction passes 100%.
    p.anonymous += m.anonymous;
    p.thp += m.anon_huge;
    if (shared) {
      p.largest_shared = std::max(p.largest_shared, m.size());
      if (m.name.rfind("/dev/shm/", 0) == 0) p.dev_shm += m.rss;
      // A MAP_PRIVATE view's Anonymous pages are its own copies: private memory, not shared.
      p.shmem += is_private(m) ? m.rss - std::min(m.anonymous, m.rss) : m.rss;
      p.shmem_huge += m.shmem_huge;
    } else if (!anonymous) {
      p.file += m.rss > m.anonymous ? m.rss - m.anonymous : 0;
      p.file_huge += m.file_huge;
    }
    if (anonymous && m.thp_eligible && !m.is_hugetlb()) p.thp_eligible_anon += m.anonymous;
    if (!anonymous && !shared) {
      previous = nullptr;
      continue;
    }
    anon_mapping a;
    a.start = m.start;
    a.size = m.size();
    a.kernel_page_bytes = m.kernel_page_bytes;
    a.resident = m.is_hugetlb() ? hugetlb : m.rss;
    a.huge = m.is_hugetlb() ? hugetlb : m.anon_huge + m.shmem_huge;
    if (m.is_hugetlb()) {
      add_share(a.pages, m.kernel_page_bytes, page_kind::hugetlb, hugetlb);
    } else {
      add_share(a.pages, thp_page_bytes, page_kind::thp, a.huge);
      add_share(a.pages, m.kernel_page_bytes != 0 ? m.kernel_page_bytes : os::base_page_size(),
                page_kind::base, a.resident > a.huge ? a.resident - a.huge : 0);
    }
    a.name = m.name;
    a.flags = m.has_flag("hg") ? "hg" : m.has_flag("nh") ? "nh" : "";
    a.shared = shared || (m.is_hugetlb() && m.shared_hugetlb > 0);
    // A cascade block's tail joins the entry of its head (a head joins one tail: the library
    // maps one).
    if (previous != nullptr && listed.back().mappings_joined == 1 && joins_cascade(*previous, m)) {
      join(listed.back(), a);
    } else {
      listed.push_back(std::move(a));
    }
    previous = &m;
  }
  const std::size_t pmd = p.thp + p.shmem_huge + p.file_huge;
  p.base = p.rss >= pmd ? p.rss - pmd : 0;
  const std::size_t n = std::min(top, listed.size());
  std::partial_sort(listed.begin(), listed.begin() + static_cast<std::ptrdiff_t>(n), listed.end(),
                    [](const anon_mapping& a, const anon_mapping& b) {
                      return a.resident != b.resident ? a.resident > b.resident : a.size > b.size;
                    });
  listed.resize(n);
  p.largest = std::move(listed);
  return p;
}

std::map<int, numa_usage> numa_of_one_node(const std::vector<mapping_info>& mappings, int node) {
  // numa_maps counts the pages of each mapping that have a struct page of their own: what smaps
  // counts in Rss (the zero page and VM_PFNMAP left out in both), and hugetlb pages at their
  // size (smaps: Private_Hugetlb + Shared_Hugetlb). It leaves out reserved pages, which smaps
  // counts: in a process, the vdso's, which are the kernel's own. THP counts as base pages in
  // numa_maps; as bytes it is the same.
  numa_usage u;
  for (const mapping_info& m : mappings) {
    if (m.is_hugetlb()) {
      u.bytes += m.private_hugetlb + m.shared_hugetlb;
      u.hugetlb_bytes += m.private_hugetlb + m.shared_hugetlb;
    } else if (m.name != "[vdso]") {
      u.bytes += m.rss;
    }
  }
  std::map<int, numa_usage> nodes;
  if (u.bytes != 0) nodes[node] = u;
  return nodes;
}

}  // namespace hugepage::doctor
