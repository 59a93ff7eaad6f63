// hugepage/detail/backing_nodes.hpp - backing.hpp's per-node figures: on which NUMA node each
// resident page of a range lies, asked of the kernel with move_pages (no target nodes: it moves
// nothing, it answers each page's node). One address per huge page where the page is known to be
// huge, one per base page elsewhere, a batch of addresses per call. Needs the access pagemap needs
// (ptrace-read for another process), no privilege.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "hugepage/backing_report.hpp"
#include "hugepage/detail/backing_sources.hpp"
#include "hugepage/detail/frame_nodes.hpp"
#include "hugepage/detail/pagemap.hpp"
#include "hugepage/detail/proc_file.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/numa.hpp"
#include "hugepage/os.hpp"
#include "hugepage/page_size.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/thp_mode.hpp"

namespace hugepage::detail {

// The pages move_pages names no node for (a negative status): not present, the zero page, or a
// present page the kernel does not follow. Linux 6.1 answers EFAULT for a page NUMA balancing has
// made PROT_NONE to take a hinting fault, THP or not, though it is resident on a node. pagemap says
// whether the page is present; where its frame is known (CAP_SYS_ADMIN) and not a zero page, the
// memory block holding the frame names the node; else its bytes are counted as unattributed.
struct unnamed_pages {
  unnamed_pages(const process_view& of, int pagemap)
      : view(of), pagemap_fd(pagemap), frames(of.root()) {}

  const process_view& view;
  int pagemap_fd;
  frame_nodes frames;
  std::vector<std::uint64_t> zero_frames;
  std::size_t unattributed = 0;  // present, not a zero page, on no node found
  std::size_t hidden = 0;        // present with its frame hidden: resident, or a zero page

  void restart() {
    unattributed = hidden = 0;
    words_.clear();
  }

  // The pagemap word of base page `index`, read a batch's worth at a time: the walk asks pages in
  // order, and a window of base pages that are not present answers no node for each.
  bool entry_of(std::uintptr_t index, std::uint64_t& entry) {
    if (index < first_ || index >= first_ + words_.size()) {
      words_.resize(window);
      const long got = pread_full(pagemap_fd, words_.data(), window * sizeof entry,
                                  static_cast<std::uint64_t>(index) * sizeof entry);
      if (got < static_cast<long>(sizeof entry)) {
        words_.clear();
        return false;
      }
      words_.resize(static_cast<std::size_t>(got) / sizeof entry);
      first_ = index;
    }
    entry = words_[index - first_];
    return true;
  }

 private:
  static constexpr std::size_t window = 512;
  std::uintptr_t first_ = 0;
  std::vector<std::uint64_t> words_;
};

// Addresses waiting for one move_pages call, each with the bytes it stands for.
class node_batch {
 public:
  node_batch(pid_t pid, std::vector<node_bytes>& nodes, unnamed_pages& unnamed)
      : pid_(pid), nodes_(nodes), unnamed_(unnamed) {}

  // Stands `bytes` (huge or not) for the page at `address`. False once a call failed.
  bool add(std::uintptr_t address, std::size_t bytes, bool huge) {
    // move_pages takes addresses as pointers; these come from the kernel's page walk.
    pages_[count_] = reinterpret_cast<const void*>(address);  // NOLINT(performance-no-int-to-ptr)
    weight_[count_] = bytes;
    huge_[count_] = huge;
    return ++count_ < capacity || flush();
  }

  bool flush() {
    if (count_ == 0 || error_) return !error_;
    error_ = numa::nodes_of_pages(pid_, count_, pages_, status_);
    if (error_) return false;
    for (std::size_t i = 0; i < count_; ++i) {
      if (status_[i] >= 0) {
        add_node_bytes(nodes_, status_[i], weight_[i], huge_[i] ? weight_[i] : 0);
      } else {
        place_unnamed(i);
      }
    }
    count_ = 0;
    return true;
  }

  const std::error_code& error() const noexcept { return error_; }

 private:
  static constexpr std::size_t capacity = 512;

  void place_unnamed(std::size_t i) {
    const std::size_t page = os::base_page_size();
    const std::size_t bytes = weight_[i];
    const auto address = reinterpret_cast<std::uintptr_t>(pages_[i]);
    std::uint64_t entry = 0;
    if (!unnamed_.entry_of(address / page, entry)) {
      unnamed_.hidden += bytes;  // unreadable: counted only where the report's totals miss it
      return;
    }
    if ((entry & pagemap_present) == 0) return;  // not resident
    const std::uint64_t pfn = entry & pagemap_pfn_mask;
    if (pfn == 0) {
      unnamed_.hidden += bytes;
      return;
    }
    const int kpageflags_fd = unnamed_.view.kpageflags_fd();
    bool ok = kpageflags_fd >= 0;
    if (ok && is_zero_page(entry, kpageflags_fd, unnamed_.zero_frames, ok)) return;
    if (!ok) {
      unnamed_.hidden += bytes;  // may be a zero page
      return;
    }
    const int node = unnamed_.frames.node_of(pfn);
    if (node < 0) {
      unnamed_.unattributed += bytes;
      return;
    }
    add_node_bytes(nodes_, node, bytes, huge_[i] ? bytes : 0);
  }

  pid_t pid_;
  std::vector<node_bytes>& nodes_;
  unnamed_pages& unnamed_;
  const void* pages_[capacity] = {};
  int status_[capacity] = {};
  std::size_t weight_[capacity] = {};
  bool huge_[capacity] = {};
  std::size_t count_ = 0;
  std::error_code error_;
};

// The huge page step of a query: a PMD. A hugetlb page of 1 GiB is asked once per 2 MiB, which
// answers the same node each time.
inline constexpr std::size_t node_query_step = 2 * units::mib;

// Queries [s, e) one address per `step`-aligned window (clipped to the range), each standing for
// its bytes inside the range.
inline bool query_windows(node_batch& batch, std::uintptr_t s, std::uintptr_t e, std::size_t step,
                          bool huge) {
  for (std::uintptr_t at = s; at < e;) {
    const std::uintptr_t next = std::min<std::uintptr_t>((at & ~(step - 1)) + step, e);
    if (!batch.add(at, next - at, huge)) return false;
    at = next;
  }
  return true;
}

enum class node_walk { done, no_scan, failed };

// Adds to `nodes` the present runs of [lo, hi) that PAGEMAP_SCAN gives: one address per huge page
// where the run is huge, one per base page elsewhere. no_scan: the scan failed (what was added
// is partial); failed: move_pages failed, and r.nodes_note says so.
inline node_walk nodes_by_scan(pid_t pid, int pagemap_fd, std::uintptr_t lo, std::uintptr_t hi,
                               std::vector<node_bytes>& nodes, unnamed_pages& unnamed,
                               backing_report& r) {
  namespace pm = pagemap;
  node_batch batch(pid, nodes, unnamed);
  const std::size_t page = os::base_page_size();
  std::vector<pm::page_region> regions(256);
  for (std::uintptr_t at = lo; at < hi;) {
    std::size_t count = 0;
    std::uintptr_t walk_end = at;
    if (pm::scan(pagemap_fd, at, hi, pm::page_is_present, pm::page_is_huge | pm::page_is_pfnzero,
                 regions.data(), regions.size(), count, walk_end)) {
      return node_walk::no_scan;
    }
    for (std::size_t i = 0; i < count; ++i) {
      const pm::page_region& region = regions[i];
      if ((region.categories & pm::page_is_pfnzero) != 0) continue;
      const bool huge = (region.categories & pm::page_is_huge) != 0;
      if (!query_windows(batch, static_cast<std::uintptr_t>(region.start),
                         static_cast<std::uintptr_t>(region.end), huge ? node_query_step : page,
                         huge)) {
        break;
      }
    }
    if (batch.error() || count < regions.size() || walk_end <= at) break;
    at = walk_end;
  }
  if (!batch.flush()) {
    r.nodes_note = "per-node figures unavailable: move_pages: " + batch.error().message();
    return node_walk::failed;
  }
  return node_walk::done;
}

// How add_nodes learns which resident pages are huge: from PAGEMAP_SCAN's runs, from pagemap and
// kpageflags page by page (root), or only from the report's totals.
enum class huge_pages_from { scan, kpageflags, totals };

// Queries the pieces of [s, e) in the non-hugetlb mapping `m` one address per PMD window that
// kpageflags shows PMD-mapped (huge), one per base page elsewhere. no_scan: the frames could not
// be read (PFNs hidden, a read failed); failed: move_pages failed.
inline node_walk nodes_by_frames(const mapping_info& m, std::uintptr_t s, std::uintptr_t e,
                                 int pagemap_fd, int kpageflags_fd, node_batch& batch) {
  const std::size_t page = os::base_page_size();
  const std::size_t window = thp_page_bytes();
  bool queried = true;
  const bool read = classify_windows(
      m, s, e, pagemap_fd, kpageflags_fd, [&](std::uintptr_t w, const exact_part& part) {
        if (!queried) return;
        const std::uintptr_t from = std::max(w, s);
        const std::uintptr_t to = std::min<std::uintptr_t>((w & ~(window - 1)) + window, e);
        const std::size_t huge = part.thp_anon + part.thp_file;  // the whole window, or nothing
        queried =
            huge != 0 ? batch.add(from, huge, true) : query_windows(batch, from, to, page, false);
      });
  if (!queried || batch.error()) return node_walk::failed;
  return read ? node_walk::done : node_walk::no_scan;
}

// Counts in r.nodes_unattributed, and says in r.nodes_note, the resident bytes of `unnamed` no node
// was found for. A page whose frame is hidden may be a zero page, which the report does not count
// as resident: those count up to the report's resident bytes that `nodes` lacks.
inline void settle_unnamed(const unnamed_pages& unnamed, const std::vector<node_bytes>& nodes,
                           backing_report& r) {
  std::size_t placed = 0;
  for (const node_bytes& n : nodes) placed += n.bytes;
  const std::size_t missing = r.resident_bytes() > placed ? r.resident_bytes() - placed : 0;
  const std::size_t hidden =
      std::min(unnamed.hidden, missing - std::min(missing, unnamed.unattributed));
  r.nodes_unattributed = unnamed.unattributed + hidden;
  if (r.nodes_unattributed == 0) return;
  // No amount in the note: a label's report sums blocks and keeps the first note it sees, and
  // nodes_unattributed carries the amount.
  std::string note =
      "resident bytes on no node named (nodes_unattributed): move_pages answered no node for "
      "present pages (Linux 6.1 answers EFAULT for pages NUMA balancing has marked) and ";
  note += hidden != 0 ? "frame numbers, which would name it, need CAP_SYS_ADMIN"
                      : "no memory block in sysfs names their frames' node";
  r.nodes_note = r.nodes_note.empty() ? note : r.nodes_note + "; " + note;
}

// Fills r.nodes for [lo, hi) of the process of `view`. PAGEMAP_SCAN (Linux 6.7) gives the present
// runs and which are huge; without it kpageflags (the report's source when root) says page by
// page which PMD windows are huge; without either every base page is asked, or one page per
// 2 MiB where the report says every resident byte is huge, and the report's huge bytes are
// shared out by node where it does not: `nodes_estimated` and `nodes_note` say so. A range the
// scan refuses as a whole (one reaching past user space) and every range without the scan are
// walked by mapping (smaps' list): the space between mappings, up to the whole address space,
// holds no page to ask about.
inline void add_nodes(const process_view& view, huge_pages_from from, std::uintptr_t lo,
                      std::uintptr_t hi, backing_report& r) {
  std::vector<node_bytes> nodes;
  const int pagemap_fd = view.pagemap_fd();
  unnamed_pages unnamed(view, pagemap_fd);
  if (from == huge_pages_from::scan) {
    const node_walk whole = nodes_by_scan(view.pid(), pagemap_fd, lo, hi, nodes, unnamed, r);
    if (whole == node_walk::failed) return;
    if (whole == node_walk::done) {
      settle_unnamed(unnamed, nodes, r);
      r.nodes = std::move(nodes);
      return;
    }
    nodes.clear();
    unnamed.restart();
  }
  std::error_code ec;
  const std::vector<mapping_info> mappings = view.read_smaps(ec);
  if (ec) {
    r.nodes_note = "per-node figures unavailable: cannot read smaps: " + ec.message();
    return;
  }
  const std::size_t page = os::base_page_size();
  const bool all_huge = r.base == 0;
  // By mapping: with the scan or the frames while they answer, else page by page (the walk starts
  // over then).
  const auto walk = [&](huge_pages_from how) {
    nodes.clear();
    unnamed.restart();
    for (const mapping_info& m : mappings) {
      if (m.end <= lo || m.start >= hi || m.name == "[vsyscall]") continue;
      const std::uintptr_t s = std::max(m.start, lo);
      const std::uintptr_t e = std::min(m.end, hi);
      if (how == huge_pages_from::scan) {
        const node_walk w = nodes_by_scan(view.pid(), pagemap_fd, s, e, nodes, unnamed, r);
        if (w != node_walk::done) return w;
        continue;
      }
      node_batch pages(view.pid(), nodes, unnamed);
      node_walk w = node_walk::done;
      if (how == huge_pages_from::kpageflags && !m.is_hugetlb() && !all_huge) {
        w = nodes_by_frames(m, s, e, pagemap_fd, view.kpageflags_fd(), pages);
        if (w == node_walk::no_scan) return w;
      } else {
        // A present hugetlb page is huge as a whole: one address per page of it, per 2 MiB of a
        // larger one (arm64 has hugetlb pages of 64 KiB).
        const bool hugetlb = m.is_hugetlb() && (all_huge || how == huge_pages_from::kpageflags);
        const std::size_t step = hugetlb ? std::clamp(m.kernel_page_bytes, page, node_query_step)
                                         : (all_huge ? node_query_step : page);
        if (!query_windows(pages, s, e, step, all_huge || hugetlb)) {
          w = node_walk::failed;
        }
      }
      if (w == node_walk::failed || !pages.flush()) {
        r.nodes_note = "per-node figures unavailable: move_pages: " + pages.error().message();
        return node_walk::failed;
      }
    }
    return node_walk::done;
  };
  node_walk w = from == huge_pages_from::totals ? node_walk::no_scan : walk(from);
  if (w == node_walk::done && from == huge_pages_from::kpageflags && !all_huge) {
    // Read twice (the report's walk, this one): pages faulted or split between the two, or THP
    // folios mapped by PTEs (which the report counts by smaps), leave the sums apart.
    std::size_t huge = 0;
    for (const node_bytes& n : nodes) huge += n.huge_bytes;
    if (huge != r.huge_bytes() && nodes.size() > 1) {
      r.nodes_estimated = true;
      r.nodes_note =
          "huge bytes per node read page by page add up to other than the report's huge bytes "
          "(pages changed between the reads, or THP folios mapped by PTEs)";
    }
  } else if (w == node_walk::no_scan) {
    w = walk(huge_pages_from::totals);
    if (w == node_walk::done && !all_huge) {
      // Shared out over the unattributed bytes too: they may hold the huge pages, so one named
      // node beside them is an estimate as much as two are (a node's huge bytes read above its
      // bytes otherwise).
      settle_unnamed(unnamed, nodes, r);
      std::size_t resident = r.nodes_unattributed;
      for (const node_bytes& n : nodes) resident += n.bytes;
      for (node_bytes& n : nodes) {
        n.huge_bytes = std::min(n.bytes, prorate(r.huge_bytes(), n.bytes, resident));
      }
      if (r.huge_bytes() != 0 && (nodes.size() > 1 || r.nodes_unattributed != 0)) {
        r.nodes_estimated = true;
        const std::string note =
            "huge bytes per node estimated: shared out by bytes per node (no PAGEMAP_SCAN, "
            "which needs Linux 6.7, nor kpageflags, which needs CAP_SYS_ADMIN)";
        r.nodes_note = r.nodes_note.empty() ? note : note + "; " + r.nodes_note;
      }
      r.nodes = std::move(nodes);
      return;
    }
  }
  if (w != node_walk::done) return;
  settle_unnamed(unnamed, nodes, r);
  r.nodes = std::move(nodes);
}

// Whether smaps may count resident pages as not resident here: with NUMA balancing on (and two
// nodes or more, where it runs), Linux 6.1-6.4's smaps leave out a THP it has made PROT_NONE for a
// hinting fault (the lab's two-node guest: a touched 64 MiB block read as not resident), which
// pagemap still shows present. Read each time: the switch changes at run time.
inline bool smaps_may_miss_marked_pages(const std::string& root) {
  const std::optional<std::string> on = read_kernel_text(root, "/proc/sys/kernel/numa_balancing");
  if (!on || on->empty() || (*on)[0] == '0') return false;
  const std::uint64_t online = numa::read_online_nodes(root).mask;
  return (online & (online - 1)) != 0;
}

// A report whose residency came from smaps (pagemap closed) where smaps may miss pages NUMA
// balancing marked: not exact, and the note says so and how pagemap opens again.
inline void note_smaps_blind_spot(const process_view& view, backing_report& r) {
  // Resident hugetlb only: smaps counts it exactly, and NUMA balancing passes over it.
  const bool hugetlb_only = r.thp + r.base + r.not_resident == 0;
  if (view.pagemap_fd() >= 0 || r.source != backing_source::smaps || hugetlb_only ||
      !smaps_may_miss_marked_pages(view.root())) {
    return;
  }
  r.exact = false;
  const std::string note =
      "NUMA balancing is on: smaps may count pages it has marked as not resident (Linux 6.1-6.4 "
      "do for THP), and pagemap, which sees them, is closed (a process that changed its user "
      "is not dumpable: prctl(PR_SET_DUMPABLE, 1) opens it again)";
  r.note = r.note.empty() ? note : r.note + "; " + note;
}

}  // namespace hugepage::detail
