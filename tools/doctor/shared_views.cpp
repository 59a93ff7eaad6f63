// tools/doctor/shared_views.cpp - shared mappings of one object counted once (shared_views.hpp).
#include "shared_views.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace hugepage::doctor {

namespace {

using interval = std::pair<std::uint64_t, std::uint64_t>;  // [first, second) in file offsets

// The bytes of [from, to) that `covered` (sorted, disjoint) holds.
std::uint64_t overlap(const std::vector<interval>& covered, std::uint64_t from, std::uint64_t to) {
  std::uint64_t bytes = 0;
  for (const interval& c : covered) {
    const std::uint64_t lo = std::max(from, c.first), hi = std::min(to, c.second);
    if (lo < hi) bytes += hi - lo;
  }
  return bytes;
}

// `covered` with [from, to) added, still sorted and disjoint.
void cover(std::vector<interval>& covered, std::uint64_t from, std::uint64_t to) {
  covered.emplace_back(from, to);
  std::sort(covered.begin(), covered.end());
  std::vector<interval> merged;
  for (const interval& c : covered) {
    if (!merged.empty() && c.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, c.second);
    } else {
      merged.push_back(c);
    }
  }
  covered = std::move(merged);
}

std::size_t scaled(std::size_t bytes, std::uint64_t keep, std::uint64_t size) {
  if (keep >= size) return bytes;
  __extension__ using wide = unsigned __int128;  // bytes * keep passes 64 bits
  return static_cast<std::size_t>(static_cast<wide>(bytes) * keep / size);
}

}  // namespace

std::optional<std::vector<mapping_info>> counted_once(const std::vector<mapping_info>& mappings,
                                                      std::vector<bool>& repeated) {
  repeated.assign(mappings.size(), false);
  std::map<std::pair<std::string, std::uint64_t>, std::vector<interval>> objects;
  std::vector<std::uint64_t> keep(mappings.size(), 0);
  bool any = false;
  // Shared views first, private ones after: a private view's page-cache pages (Rss less
  // Anonymous) are the object's pages, so an offset a shared view covers is counted there; its
  // Anonymous pages are its own copies (copy-on-write) and always counted. A private view
  // covers no offsets for the shared ones: pages it copied may be resident in the object too.
  for (const bool shared_pass : {true, false}) {
    for (std::size_t i = 0; i < mappings.size(); ++i) {
      const mapping_info& m = mappings[i];
      if (shared_pass) keep[i] = m.size();
      const bool shared = m.permissions.size() >= 4 && m.permissions[3] == 's';
      if (shared != shared_pass || m.inode == 0 || m.size() == 0 || m.is_hugetlb()) continue;
      if (!shared && m.rss <= m.anonymous) continue;  // no page-cache page in the view
      const std::uint64_t from = m.offset;
      const std::uint64_t to = from + m.size() < from ? UINT64_MAX : from + m.size();
      std::vector<interval>& covered = objects[{m.device, m.inode}];
      const std::uint64_t seen = overlap(covered, from, to);
      if (seen > 0) {
        repeated[i] = true;
        any = true;
        keep[i] = m.size() - std::min<std::uint64_t>(seen, m.size());
      }
      if (shared) cover(covered, from, to);
    }
  }
  if (!any) return std::nullopt;
  std::vector<mapping_info> out = mappings;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!repeated[i]) continue;
    mapping_info& m = out[i];
    const std::uint64_t size = m.size();
    if (m.permissions[3] != 's') {
      // Only the page-cache part repeats; the private copies stay.
      m.rss = m.anonymous + scaled(m.rss - m.anonymous, keep[i], size);
      for (std::size_t* field : {&m.shmem_huge, &m.file_huge}) {
        *field = scaled(*field, keep[i], size);
      }
      continue;
    }
    for (std::size_t* field : {&m.rss, &m.anonymous, &m.anon_huge, &m.shmem_huge, &m.file_huge,
                               &m.private_hugetlb, &m.shared_hugetlb, &m.swap}) {
      *field = scaled(*field, keep[i], size);
    }
  }
  return out;
}

}  // namespace hugepage::doctor
