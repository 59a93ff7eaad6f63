// tools/doctor/memory_classes.cpp - the classes of a process's memory by what maps it.
//
// The class decides which setting can reach the memory, so each rule rests on evidence smaps
// (and a few facts collect_process reads) gives: glibc's thread heaps are 64 MiB reservations
// on 64 MiB boundaries, its mmapped chunks carry a header naming their own length, tmpfs files
// follow the huge= option of the mount they lie on.
#include "memory_classes.hpp"

#include <algorithm>
#include <string_view>

#include "mounts.hpp"
#include "process_report.hpp"

namespace hugepage::doctor {

namespace {

bool is_anonymous_name(std::string_view name) {
  return name.empty() || name == "[heap]" || name == "[stack]" || name.rfind("[anon:", 0) == 0;
}

bool is_shared(const mapping_info& m) {
  return m.permissions.size() >= 4 && m.permissions[3] == 's';
}

// Shared memory on the kernel's internal shmem mount: it follows shmem_enabled.
bool is_internal_shmem(const mapping_info& m) {
  const std::string_view name = m.name;
  return name.rfind("/memfd:", 0) == 0 || name.rfind("/SYSV", 0) == 0 ||
         name == "/dev/zero (deleted)" || name.rfind("[anon_shmem:", 0) == 0 ||
         (is_shared(m) && is_anonymous_name(name));
}

// The mount `path` lies on: the longest mount point that holds it, the later of two on one point.
const mount_entry* mount_of(std::string_view path, const std::vector<mount_entry>& mounts) {
  constexpr std::string_view deleted = " (deleted)";
  if (path.size() > deleted.size() && path.substr(path.size() - deleted.size()) == deleted) {
    path.remove_suffix(deleted.size());
  }
  const mount_entry* best = nullptr;
  for (const mount_entry& m : mounts) {
    const std::string_view point = m.point;
    const bool holds =
        point == "/" || path == point ||
        (path.rfind(point, 0) == 0 && path.size() > point.size() && path[point.size()] == '/');
    if (holds && (best == nullptr || point.size() >= best->point.size())) best = &m;
  }
  return best;
}

constexpr std::size_t heap_max = 64 * units::mib;  // glibc HEAP_MAX_SIZE on 64-bit

bool is_plain_anonymous(const mapping_info& m) {
  return m.name.empty() && !m.is_hugetlb() && !is_shared(m);
}

// Marks the mappings of glibc's thread heaps: the layout of thread_heap_candidates(), and where
// the heap_info headers were read, a header that checks out.
std::vector<bool> thread_arena_parts(const std::vector<mapping_info>& mappings,
                                     const chunk_headers& headers) {
  std::vector<bool> part(mappings.size(), false);
  for (const std::size_t i : thread_heap_candidates(mappings)) {
    if (headers.heaps_read &&
        !std::binary_search(headers.heaps.begin(), headers.heaps.end(), mappings[i].start)) {
      continue;
    }
    part[i] = true;
    if (mappings[i].size() < heap_max) part[i + 1] = true;
  }
  return part;
}

// A runtime with its own heap: a JVM as runtime detection names it, Node by its executable (the
// first file mapped: the main program lies below the libraries and whatever it maps) or
// libnode.so, not by any mapped file that happens to be called node.
std::string runtime_of(const std::vector<mapping_info>& mappings, const std::string& kind) {
  if (kind == "jvm" || kind == "go" || kind == "dotnet") return kind;
  bool first = true;
  for (const mapping_info& m : mappings) {
    const std::string_view name = m.name;
    if (name.empty() || name.front() != '/') continue;
    const std::string_view base = name.substr(name.rfind('/') + 1);
    if ((first && (base == "node" || base == "nodejs")) || base.rfind("libnode.so", 0) == 0) {
      return "node";
    }
    first = false;
  }
  return "";
}

}  // namespace

bool mallocs_with_glibc(std::string_view allocator) noexcept {
  return allocator != "jemalloc" && allocator != "tcmalloc" && allocator != "mimalloc" &&
         allocator != "musl";
}

std::vector<std::size_t> thread_heap_candidates(const std::vector<mapping_info>& mappings) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const mapping_info& m = mappings[i];
    if (m.permissions != "rw-p" || !is_plain_anonymous(m) || m.start % heap_max != 0) continue;
    if (m.size() == heap_max) {
      out.push_back(i);
    } else if (m.size() < heap_max && i + 1 < mappings.size()) {
      const mapping_info& rest = mappings[i + 1];
      if (rest.start == m.end && rest.permissions == "---p" && is_plain_anonymous(rest) &&
          m.size() + rest.size() == heap_max) {
        out.push_back(i);
      }
    }
  }
  return out;
}

bool is_heap_info(const std::uint64_t (&words)[4], std::uintptr_t start, std::size_t rw_bytes,
                  std::size_t page_bytes) noexcept {
  const std::uint64_t ar_ptr = words[0], prev = words[1], size = words[2], mprotect = words[3];
  if (size == 0 || size > mprotect || mprotect > heap_max || page_bytes == 0) return false;
  if ((mprotect + page_bytes - 1) / page_bytes * page_bytes != rw_bytes) return false;
  // The arena sits right after the heap_info of its first heap.
  const std::uint64_t in_heap = ar_ptr % heap_max;
  if (in_heap != 32 && in_heap != 48) return false;
  if (prev == 0) return ar_ptr - in_heap == start;
  return prev % heap_max == 0 && prev != start && ar_ptr - in_heap != start;
}

std::vector<std::size_t> chunk_candidates(const std::vector<mapping_info>& mappings) {
  const std::vector<bool> arena = thread_arena_parts(mappings, chunk_headers{});
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const mapping_info& m = mappings[i];
    if (!arena[i] && m.permissions == "rw-p" && is_plain_anonymous(m) &&
        m.size() >= 128 * units::kib && m.rss > 0) {
      out.push_back(i);
    }
  }
  return out;
}

std::size_t mmapped_chunk_span(std::uint64_t prev_size, std::uint64_t size,
                               std::size_t page_bytes) noexcept {
  constexpr std::uint64_t is_mmapped = 0x2, flags = 0x7;
  // An mmapped chunk has IS_MMAPPED and neither PREV_INUSE nor NON_MAIN_ARENA; prev_size is the
  // offset memalign left before it, and both together are whole pages.
  if ((size & flags) != is_mmapped || size < page_bytes || prev_size % 16 != 0) return 0;
  const std::uint64_t span = prev_size + (size & ~flags);
  if (span < prev_size || span % page_bytes != 0) return 0;
  return static_cast<std::size_t>(span);
}

std::vector<memory_class_usage> classify_memory(const std::vector<mapping_info>& mappings,
                                                const class_facts& facts) {
  const std::vector<bool> arena = thread_arena_parts(mappings, facts.chunks);
  const bool glibc = mallocs_with_glibc(facts.allocator);
  const std::string runtime = runtime_of(mappings, facts.runtime);
  std::vector<memory_class_usage> classes;
  const auto usage = [&](memory_class kind, const std::string& mount) -> memory_class_usage& {
    for (auto& c : classes) {
      if (c.kind == kind && c.mount == mount) return c;
    }
    classes.emplace_back();
    classes.back().kind = kind;
    classes.back().mount = mount;
    return classes.back();
  };
  const auto chunks_of = [&](const mapping_info& m) -> const chunk_mapping* {
    const auto& list = facts.chunks.mappings;
    const auto at = std::lower_bound(
        list.begin(), list.end(), m.start,
        [](const chunk_mapping& c, std::uintptr_t start) { return c.start < start; });
    return at != list.end() && at->start == m.start ? &*at : nullptr;
  };
  std::size_t split_records = 0;
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const mapping_info& m = mappings[i];
    const std::string_view name = m.name;
    std::string mount, mount_huge;
    memory_class kind = memory_class::anonymous_mmap;
    const chunk_mapping* chunks = nullptr;
    if (m.is_hugetlb()) {
      kind = memory_class::hugetlb;
    } else if (is_internal_shmem(m)) {
      kind = memory_class::shared_anonymous;
    } else if (!is_anonymous_name(name)) {
      kind = memory_class::file;
      const mount_entry* on =
          facts.mounts && name.front() == '/' ? mount_of(name, *facts.mounts) : nullptr;
      if (on != nullptr && on->fstype == "tmpfs") {
        kind = memory_class::tmpfs_file;
        mount = on->point;
        mount_huge = on->huge;
      } else if (!facts.mounts && name.rfind("/dev/shm/", 0) == 0) {
        // Stored files carry no mountinfo: /dev/shm is tmpfs everywhere, its option unknown.
        kind = memory_class::tmpfs_file;
        mount = "/dev/shm";
        mount_huge = "unknown";
      }
    } else if (name == "[stack]") {
      kind = memory_class::anonymous_mmap;
    } else if (glibc && name == "[heap]") {
      kind = memory_class::glibc_main_arena;
    } else if (glibc && (arena[i] || name.rfind("[anon: glibc: malloc arena]", 0) == 0)) {
      kind = memory_class::glibc_thread_arenas;
    } else if (glibc && name == "[anon: glibc: malloc]") {
      kind = memory_class::glibc_mmapped_chunks;
    } else if (!glibc && name == "[heap]") {
      kind = memory_class::allocator_arenas;
    } else {
      if (glibc) chunks = chunks_of(m);
      kind = !runtime.empty() ? memory_class::runtime_heap
             : !glibc         ? memory_class::allocator_arenas
                              : memory_class::anonymous_mmap;
    }
    const std::size_t hugetlb = m.private_hugetlb + m.shared_hugetlb;
    // Rss leaves hugetlb pages out; both are added so the classes sum to Rss plus hugetlb.
    const std::size_t resident = m.rss + (m.is_hugetlb() ? hugetlb : 0);
    const std::size_t huge = m.is_hugetlb() ? hugetlb : m.anon_huge + m.shmem_huge + m.file_huge;
    // The bytes of the record in glibc chunks, and of them in chunks under the PMD size.
    std::size_t chunk_bytes = kind == memory_class::glibc_mmapped_chunks ? m.size() : 0;
    std::size_t small_chunk_bytes = 0;
    const auto whole_pages = [&](std::size_t bytes) {
      return (bytes + facts.thp_page_bytes - 1) / facts.thp_page_bytes * facts.thp_page_bytes;
    };
    const bool base_pages = !m.is_hugetlb() && huge == 0;
    std::size_t chunk_pool_bytes =
        kind == memory_class::glibc_mmapped_chunks && base_pages ? whole_pages(m.size()) : 0;
    if (chunks != nullptr) {
      chunk_bytes = 0;
      chunk_pool_bytes = 0;
      for (const std::size_t bytes : chunks->chunks) {
        chunk_bytes += bytes;
        if (base_pages) chunk_pool_bytes += whole_pages(bytes);
        if (bytes < facts.thp_page_bytes) small_chunk_bytes += bytes;
      }
      chunk_bytes = std::min(chunk_bytes, m.size());
      small_chunk_bytes = std::min(small_chunk_bytes, chunk_bytes);
    } else if (kind == memory_class::glibc_mmapped_chunks && m.size() < facts.thp_page_bytes) {
      small_chunk_bytes = m.size();
    }
    // smaps counts per record: a record only partly chunks shares its bytes out by size.
    const auto share = [&](std::size_t bytes, std::size_t part) {
      return static_cast<std::size_t>(static_cast<double>(bytes) * static_cast<double>(part) /
                                      static_cast<double>(m.size()));
    };
    const std::size_t advised = m.advised_huge() ? resident : 0;
    const std::size_t refused = m.has_flag("nh") ? resident : 0;
    const std::size_t small = m.size() < facts.thp_page_bytes ? resident : 0;
    const auto add = [&](memory_class as, std::size_t part) {
      memory_class_usage& c = usage(as, mount);
      const bool whole = part == m.size();
      c.resident += whole ? resident : share(resident, part);
      c.huge += whole ? huge : share(huge, part);
      c.advised += whole ? advised : share(advised, part);
      c.refused += whole ? refused : share(refused, part);
      c.in_small_mappings += whole ? small : share(small, part);
      c.mappings += 1;
      c.largest_mapping = std::max(c.largest_mapping, m.size());
      if (as != memory_class::glibc_mmapped_chunks && base_pages) {
        c.pool_bytes += whole_pages(whole ? resident : share(resident, part));
      }
      if (i < facts.repeated_views.size() && facts.repeated_views[i]) c.views += 1;
      if (as == memory_class::tmpfs_file) c.mount_huge = mount_huge;
      return &c;
    };
    const bool private_copies = (kind == memory_class::shared_anonymous ||
                                 kind == memory_class::file || kind == memory_class::tmpfs_file) &&
                                !is_shared(m) && m.anonymous > 0 && !name.empty() &&
                                name.front() == '/';  // a file's, not [vdso]'s
    if (private_copies) {
      // A MAP_PRIVATE view of a file or of shmem: its written pages are its own copies
      // (Anonymous), process memory that no page cache setting governs; its other pages are
      // the object's. They stay base pages: the kernel copies one base page per write fault,
      // and neither THP enabled= nor MADV_COLLAPSE (EINVAL on a file mapping) reaches them.
      memory_class_usage* c = add(kind, m.size());
      const std::size_t copies = std::min(m.anonymous, c->resident);
      c->resident -= copies;
      c->huge -= std::min(c->huge, m.anon_huge);
      c->advised -= std::min(c->advised, advised != 0 ? copies : 0);
      c->refused -= std::min(c->refused, refused != 0 ? copies : 0);
      c->in_small_mappings -= std::min(c->in_small_mappings, small != 0 ? copies : 0);
      if (base_pages) c->pool_bytes -= whole_pages(resident) - whole_pages(resident - copies);
      memory_class_usage& own = usage(memory_class::file_copies, "");
      own.resident += copies;
      own.huge += m.anon_huge;
      own.advised += advised != 0 ? copies : 0;
      own.refused += refused != 0 ? copies : 0;
      own.in_small_mappings += small != 0 ? copies : 0;
      own.mappings += 1;
      own.largest_mapping = std::max(own.largest_mapping, m.size());
      if (!m.is_hugetlb() && m.anon_huge == 0) own.pool_bytes += whole_pages(copies);
    } else if (chunk_bytes == 0) {
      add(kind, m.size());
    } else {
      memory_class_usage* c = add(memory_class::glibc_mmapped_chunks, chunk_bytes);
      c->in_small_chunks += share(resident, small_chunk_bytes);
      c->pool_bytes += chunk_pool_bytes;
      if (chunk_bytes < m.size()) {
        // The rest gets what the chunk part did not, so the classes still sum to Rss.
        memory_class_usage& rest = usage(kind, mount);
        rest.resident += resident - share(resident, chunk_bytes);
        rest.huge += huge - share(huge, chunk_bytes);
        rest.advised += advised - share(advised, chunk_bytes);
        rest.in_small_mappings += small - share(small, chunk_bytes);
        rest.mappings += 1;
        rest.largest_mapping = std::max(rest.largest_mapping, m.size());
        if (base_pages) rest.pool_bytes += whole_pages(resident - share(resident, chunk_bytes));
        ++split_records;
      }
    }
  }
  for (memory_class_usage& c : classes) {
    switch (c.kind) {
      case memory_class::glibc_main_arena: c.evidence = "[heap]"; break;
      case memory_class::glibc_thread_arenas:
        c.evidence = facts.chunks.heaps_read ? "64 MiB-aligned heaps, heap_info"
                                             : "64 MiB heaps, heap_info unchecked";
        break;
      case memory_class::glibc_mmapped_chunks:
        // A record only partly chunks: its Rss is shared out by size, an estimate.
        c.evidence = split_records == 0 ? "chunk headers" : "chunk headers, by size";
        break;
      case memory_class::allocator_arenas: c.evidence = "malloc is " + facts.allocator; break;
      case memory_class::runtime_heap: c.evidence = "runtime " + runtime; break;
      case memory_class::anonymous_mmap:
        // What kept glibc's mmapped chunks from being told apart, if anything did.
        c.evidence =
            !glibc ? "[stack]"
            : !facts.chunks.read
                ? (facts.chunks.evidence.empty() ? "chunk headers not read" : facts.chunks.evidence)
                : "no chunk header" +
                      (facts.chunks.evidence.empty() ? "" : "; " + facts.chunks.evidence);
        break;
      case memory_class::shared_anonymous: c.evidence = "memfd, SysV, MAP_SHARED"; break;
      case memory_class::tmpfs_file:
        c.evidence = facts.mounts ? "tmpfs mount (mountinfo)" : "path under /dev/shm";
        if (facts.mounts) {
          std::string device;  // of the later mount on the point, the one that is seen
          for (const mount_entry& m : *facts.mounts) {
            if (m.point == c.mount) device = m.device;
          }
          for (const mount_entry& m : *facts.mounts) {
            if (!device.empty() && m.device == device && m.point != c.mount &&
                std::find(c.same_superblock.begin(), c.same_superblock.end(), m.point) ==
                    c.same_superblock.end()) {
              c.same_superblock.push_back(m.point);
            }
          }
        }
        break;
      case memory_class::hugetlb: c.evidence = "KernelPageSize"; break;
      case memory_class::file: c.evidence = "page cache"; break;
      case memory_class::file_copies: c.evidence = "Anonymous in private file maps"; break;
    }
    if (c.views > 0) {
      c.evidence += "; " + std::to_string(c.views) +
                    (c.views == 1 ? " mapping maps" : " mappings map") +
                    " the same memory again (same inode and offsets): counted once";
    }
  }
  classes.erase(std::remove_if(classes.begin(), classes.end(),
                               [](const memory_class_usage& c) { return c.resident == 0; }),
                classes.end());
  std::stable_sort(classes.begin(), classes.end(),
                   [](const memory_class_usage& a, const memory_class_usage& b) {
                     return a.resident > b.resident;
                   });
  return classes;
}

}  // namespace hugepage::doctor
