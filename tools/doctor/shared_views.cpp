// tools/doctor/shared_views.cpp - shared mappings of one object counted once (shared_views.hpp).
#include "shared_views.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "hugepage/os.hpp"
#include "hugepage/process_view.hpp"

namespace hugepage::doctor {

namespace {

using interval = std::pair<std::uint64_t, std::uint64_t>;  // [first, second) in file offsets
using object_key = std::pair<std::string, std::uint64_t>;  // device, inode

bool is_shared(const mapping_info& m) {
  return m.permissions.size() >= 4 && m.permissions[3] == 's';
}

// Whether `m` may repeat pages of another mapping of its object: a file-backed, non-empty,
// non-hugetlb mapping, shared, or private with page-cache pages (Rss beyond its copies).
bool is_view(const mapping_info& m) {
  if (m.inode == 0 || m.size() == 0 || m.is_hugetlb()) return false;
  return is_shared(m) || m.rss > m.anonymous;
}

// The file offsets [from, to) of `m`, saturated at the top.
interval offsets_of(const mapping_info& m) {
  const std::uint64_t from = m.offset;
  return {from, from + m.size() < from ? UINT64_MAX : from + m.size()};
}

std::uint64_t total(const std::vector<interval>& v) {
  std::uint64_t bytes = 0;
  for (const interval& i : v) bytes += i.second - i.first;
  return bytes;
}

// The bytes both of `a` and `b` (each sorted and disjoint) hold: one pass over both.
std::uint64_t common(const std::vector<interval>& a, const std::vector<interval>& b) {
  std::uint64_t bytes = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::uint64_t lo = std::max(a[i].first, b[j].first);
    const std::uint64_t hi = std::min(a[i].second, b[j].second);
    if (lo < hi) bytes += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return bytes;
}

// `covered` with `add` (each sorted and disjoint) added, still sorted and disjoint.
void cover(std::vector<interval>& covered, const std::vector<interval>& add) {
  std::vector<interval> all;
  all.reserve(covered.size() + add.size());
  std::merge(covered.begin(), covered.end(), add.begin(), add.end(), std::back_inserter(all));
  std::vector<interval> merged;
  for (const interval& c : all) {
    if (!merged.empty() && c.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, c.second);
    } else {
      merged.push_back(c);
    }
  }
  covered = std::move(merged);
}

std::size_t scaled(std::size_t bytes, std::uint64_t keep, std::uint64_t of) {
  if (keep >= of) return bytes;
  __extension__ using wide = unsigned __int128;  // bytes * keep passes 64 bits
  return static_cast<std::size_t>(static_cast<wide>(bytes) * keep / of);
}

// A share kept of a mapping's counters: keep of `of`.
struct share {
  std::uint64_t keep = 1, of = 1;
};

// The views pagemap is read for at most, in bytes of address space: beyond, the rest are
// counted by offsets (a sparse terabyte view would take seconds of pagemap reads).
constexpr std::uint64_t residency_read_limit = std::uint64_t{64} << 30;

}  // namespace

std::vector<std::size_t> overlapping_views(const std::vector<mapping_info>& mappings) {
  std::map<object_key, std::vector<std::size_t>> objects;
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    if (is_view(mappings[i])) objects[{mappings[i].device, mappings[i].inode}].push_back(i);
  }
  std::vector<std::size_t> out;
  for (const auto& [key, views] : objects) {
    if (views.size() < 2) continue;
    // Some pair overlaps, one of them shared (two private views share no counting): then every
    // view of the object takes part in deciding which page counts where.
    bool overlaps = false;
    for (std::size_t a = 0; a < views.size() && !overlaps; ++a) {
      for (std::size_t b = a + 1; b < views.size() && !overlaps; ++b) {
        const mapping_info &x = mappings[views[a]], &y = mappings[views[b]];
        const interval u = offsets_of(x), v = offsets_of(y);
        overlaps = (is_shared(x) || is_shared(y)) &&
                   std::max(u.first, v.first) < std::min(u.second, v.second);
      }
    }
    if (overlaps) out.insert(out.end(), views.begin(), views.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

view_residency view_residency_of(const process_view& target,
                                 const std::vector<mapping_info>& mappings) {
  view_residency out;
  const std::vector<std::size_t> views = overlapping_views(mappings);
  if (views.empty()) return out;
  const int fd = target.pagemap_fd();
  if (fd < 0) return out;
  const std::size_t page = os::base_page_size();
  constexpr std::uint64_t present = std::uint64_t{1} << 63, file = std::uint64_t{1} << 61;
  std::vector<std::uint64_t> entries(8192);  // 64 KiB of pagemap words a read
  std::uint64_t read_bytes = 0;
  for (const std::size_t i : views) {
    const mapping_info& m = mappings[i];
    if (m.start % page != 0 || m.end % page != 0) continue;
    read_bytes += m.size();
    if (read_bytes > residency_read_limit) break;
    const bool shared = is_shared(m);
    resident_offsets ranges;
    bool whole = true;
    const std::uint64_t pages = m.size() / page;
    for (std::uint64_t first = 0; first < pages && whole; first += entries.size()) {
      const std::uint64_t count = std::min<std::uint64_t>(entries.size(), pages - first);
      const auto at = static_cast<off_t>((m.start / page + first) * sizeof(std::uint64_t));
      const ssize_t got = ::pread(fd, entries.data(), count * sizeof(std::uint64_t), at);
      if (got != static_cast<ssize_t>(count * sizeof(std::uint64_t))) {
        whole = false;  // unmapped since smaps was read, or unreadable: counted by offsets
        break;
      }
      for (std::uint64_t k = 0; k < count; ++k) {
        const std::uint64_t e = entries[k];
        // A private view's own copies are anonymous (no file bit): always its own memory.
        if ((e & present) == 0 || (!shared && (e & file) == 0)) continue;
        const std::uint64_t from = m.offset + (first + k) * page;
        if (!ranges.empty() && ranges.back().second == from) {
          ranges.back().second = from + page;
        } else {
          ranges.emplace_back(from, from + page);
        }
      }
    }
    if (whole) out.emplace(m.start, std::move(ranges));
  }
  return out;
}

std::optional<std::vector<mapping_info>> counted_once(const std::vector<mapping_info>& mappings,
                                                      std::vector<bool>& repeated,
                                                      const view_residency* residency) {
  repeated.assign(mappings.size(), false);
  struct object {
    std::vector<interval> offsets;   // the offsets shared views cover
    std::vector<interval> resident;  // the offsets resident in a shared view seen so far
  };
  std::map<object_key, object> objects;
  std::vector<share> by_offset(mappings.size()), by_residency(mappings.size());
  bool any = false;
  // Shared views first, private ones after: a private view's page-cache pages (Rss less
  // Anonymous) are the object's pages, so an offset a shared view holds is counted there; its
  // Anonymous pages are its own copies (copy-on-write) and always counted. A private view
  // covers no offsets for the shared ones: pages it copied may be resident in the object too.
  for (const bool shared_pass : {true, false}) {
    for (std::size_t i = 0; i < mappings.size(); ++i) {
      const mapping_info& m = mappings[i];
      const bool shared = is_shared(m);
      if (shared != shared_pass || !is_view(m)) continue;
      const interval range = offsets_of(m);
      object& o = objects[{m.device, m.inode}];
      const std::vector<interval> whole{range};
      const std::uint64_t seen = common(o.offsets, whole);
      if (seen > 0) {
        repeated[i] = true;
        any = true;
        by_offset[i] = {m.size() - std::min<std::uint64_t>(seen, m.size()), m.size()};
      }
      // Where this view's pages are: per page where pagemap said, else all of its range.
      const resident_offsets* known = nullptr;
      if (residency != nullptr) {
        if (const auto it = residency->find(m.start); it != residency->end()) known = &it->second;
      }
      if (known != nullptr) {
        const std::uint64_t here = total(*known);
        by_residency[i] = {here - std::min(here, common(o.resident, *known)), here};
      } else {
        const std::uint64_t held = common(o.resident, whole);
        by_residency[i] = {m.size() - std::min<std::uint64_t>(held, m.size()), m.size()};
      }
      if (shared) {
        cover(o.offsets, whole);
        // Unknown per page: all of its range, unless smaps says nothing of it is resident.
        if (known != nullptr) {
          cover(o.resident, *known);
        } else if (m.rss > 0) {
          cover(o.resident, whole);
        }
      }
    }
  }
  if (!any) return std::nullopt;
  std::vector<mapping_info> out = mappings;
  for (std::size_t i = 0; i < out.size(); ++i) {
    mapping_info& m = out[i];
    const share r = by_residency[i], o = by_offset[i];
    if (r.keep >= r.of && o.keep >= o.of) continue;
    if (!is_shared(m)) {
      // Only the page-cache part repeats; the private copies stay.
      m.rss = m.anonymous + scaled(m.rss - m.anonymous, r.keep, r.of);
      for (std::size_t* field : {&m.shmem_huge, &m.file_huge})
        *field = scaled(*field, r.keep, r.of);
      continue;
    }
    for (std::size_t* field : {&m.rss, &m.anonymous, &m.anon_huge, &m.shmem_huge, &m.file_huge,
                               &m.private_hugetlb, &m.shared_hugetlb}) {
      *field = scaled(*field, r.keep, r.of);
    }
    m.swap = scaled(m.swap, o.keep, o.of);  // swapped pages are in no view's page tables
  }
  return out;
}

std::string residency_text(const view_residency& residency) {
  std::string out;
  char word[48];
  for (const auto& [start, ranges] : residency) {
    std::snprintf(word, sizeof word, "%llx", static_cast<unsigned long long>(start));
    out += word;
    for (const interval& r : ranges) {
      std::snprintf(word, sizeof word, " %llx-%llx", static_cast<unsigned long long>(r.first),
                    static_cast<unsigned long long>(r.second));
      out += word;
    }
    out += '\n';
  }
  return out;
}

namespace {

// A whole hex number of at most 16 digits; nullopt for anything else.
std::optional<std::uint64_t> hex(std::string_view word) {
  if (word.empty() || word.size() > 16) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : word) {
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    value = value << 4 | static_cast<std::uint64_t>(digit);
  }
  return value;
}

}  // namespace

std::optional<view_residency> parse_residency(std::string_view text,
                                              const std::vector<mapping_info>& mappings) {
  view_residency out;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    if (newline == std::string_view::npos) return std::nullopt;  // cut short
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline + 1);
    const auto space = line.find(' ');
    const auto start = hex(line.substr(0, space));
    if (!start) return std::nullopt;
    const auto m = std::find_if(mappings.begin(), mappings.end(),
                                [&](const mapping_info& x) { return x.start == *start; });
    if (m == mappings.end() || out.count(m->start) != 0) return std::nullopt;
    const interval range = offsets_of(*m);
    resident_offsets ranges;
    line.remove_prefix(space == std::string_view::npos ? line.size() : space);
    while (!line.empty()) {
      if (line.front() != ' ') return std::nullopt;
      line.remove_prefix(1);
      const auto end = line.find(' ');
      const std::string_view word = line.substr(0, end);
      line.remove_prefix(end == std::string_view::npos ? line.size() : end);
      const auto dash = word.find('-');
      if (dash == std::string_view::npos) return std::nullopt;
      const auto from = hex(word.substr(0, dash)), to = hex(word.substr(dash + 1));
      if (!from || !to || *from >= *to || *from < range.first || *to > range.second ||
          (!ranges.empty() && ranges.back().second > *from)) {
        return std::nullopt;
      }
      ranges.emplace_back(*from, *to);
    }
    out.emplace(m->start, std::move(ranges));
  }
  return out;
}

}  // namespace hugepage::doctor
