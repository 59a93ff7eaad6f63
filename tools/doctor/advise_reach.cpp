// tools/doctor/advise_reach.cpp - the table of which fix reaches which memory class.
#include "advise_reach.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "advise_parts.hpp"
#include "advise_process.hpp"
#include "format.hpp"
#include "hugepage/kernel_files.hpp"
#include "runtime_go.hpp"
#include "text.hpp"

namespace hugepage::doctor {

namespace {

bool glibc_class(memory_class kind) noexcept {
  return kind == memory_class::glibc_main_arena || kind == memory_class::glibc_thread_arenas ||
         kind == memory_class::glibc_mmapped_chunks;
}

reach all(const memory_class_usage& c) { return {c.resident, ""}; }

reach none(std::string why) { return {0, std::move(why)}; }

// Only what the program advises MADV_HUGEPAGE.
reach advised_only(const memory_class_usage& c, const std::string& setting) {
  const std::size_t advised = std::min(c.advised, c.resident);
  if (advised >= c.resident) return all(c);
  return {advised, fmt::format("{} reaches only ranges the program advises MADV_HUGEPAGE, and it "
                               "advises {} of {}",
                               setting, format_bytes(advised), format_bytes(c.resident))};
}

// A huge page needs a whole aligned THP inside one mapping: smaller mappings stay on base pages
// under any setting. The test is per mapping (VMA), not per malloc chunk: chunks under the THP
// size that the kernel merged into one larger VMA are reached by THP always and MADV_COLLAPSE,
// while glibc.malloc.hugetlb=1 never advises them (it judges each chunk).
// Memory the program advised MADV_NOHUGEPAGE is left on base pages by both as well.
reach whole_pmds(const memory_class_usage& c, std::size_t thp_bytes) {
  const std::size_t small = std::min(c.in_small_mappings, c.resident);
  const std::size_t refused = std::min(c.refused, c.resident);
  if (small == 0 && refused == 0) return all(c);
  const std::size_t out = std::min(small + refused, c.resident);
  if (refused >= small) {
    return {c.resident - out,
            fmt::format("{} of it lies in mappings advised MADV_NOHUGEPAGE (smaps VmFlags nh), "
                        "which THP enabled=always, khugepaged and MADV_COLLAPSE all leave on base "
                        "pages: the program or its runtime asked for that, and only it can take "
                        "the advice back (MADV_HUGEPAGE, or dropping its MADV_NOHUGEPAGE)",
                        format_bytes(refused)),
            true};
  }
  return {c.resident - out,
          fmt::format("{} of it lies in mappings under {}, which no huge page fits",
                      format_bytes(small), format_bytes(thp_bytes))};
}

// Copies in private file mappings: base pages whatever the settings (checked on Linux 6.18:
// THPeligible 0 in smaps, MADV_COLLAPSE EINVAL, even where the mapping is advised).
reach file_copies_unreached() {
  return {0,
          "copy-on-write copies in a private file mapping are base pages: the kernel copies one "
          "base page per write fault, khugepaged skips file mappings' copies and MADV_COLLAPSE "
          "refuses them (EINVAL), whatever THP enabled= says",
          true};
}

}  // namespace

bool private_anonymous(memory_class kind) noexcept {
  return glibc_class(kind) || kind == memory_class::allocator_arenas ||
         kind == memory_class::runtime_heap || kind == memory_class::anonymous_mmap;
}

reach reach_of(fix_mechanism m, const memory_class_usage& c, const process_report& p,
               const std::string& value, std::size_t thp_bytes) {
  const std::string& allocator = p.allocator.guess.name;
  const std::string& runtime = p.runtime.kind;
  switch (m) {
    case fix_mechanism::glibc_hugetlb_tunable: {
      // glibc advises a chunk, or an arena's growth, only when it spans a whole THP.
      if (!glibc_class(c.kind)) {
        return none("glibc.malloc.hugetlb reaches only glibc malloc's own arenas and chunks");
      }
      // A thread arena's heap is advised once, when glibc creates it (under 2 MiB, so not at
      // all), and never as it grows; =2 maps the whole heap from the hugetlb pool instead.
      if (c.kind == memory_class::glibc_thread_arenas &&
          p.allocator.hugepage_mode.rfind("glibc.malloc.hugetlb=2", 0) != 0) {
        return none(
            "glibc.malloc.hugetlb=1 does not reach glibc's thread arenas: glibc advises a thread "
            "arena's heap only when it creates it, while it is under 2 MiB, and never as it grows "
            "(glibc.malloc.arena_max=1 moves every thread's allocations into the main arena, "
            "which it does advise, at the price of lock contention between threads)");
      }
      // Judged per chunk: glibc advises each chunk as it maps it, whatever the kernel merges.
      const std::size_t small = std::min(c.in_small_chunks, c.resident);
      if (small == 0) return all(c);
      return {c.resident - small,
              fmt::format("{} of it lies in chunks under {}, which glibc.malloc.hugetlb=1 "
                          "never advises (it advises chunks of at least {})",
                          format_bytes(small), format_bytes(thp_bytes), format_bytes(thp_bytes))};
    }
    case fix_mechanism::jemalloc_thp:
      if (c.kind == memory_class::allocator_arenas && allocator == "jemalloc") return all(c);
      return none("MALLOC_CONF reaches only jemalloc's own arenas");
    case fix_mechanism::mimalloc_large_pages:
      if (c.kind == memory_class::allocator_arenas && allocator == "mimalloc") return all(c);
      return none("mimalloc's large OS pages reach only mimalloc's own segments");
    case fix_mechanism::tcmalloc: return none("gperftools tcmalloc has no option that advises THP");
    case fix_mechanism::jvm_thp:
      if (c.kind == memory_class::runtime_heap && runtime == "jvm") return all(c);
      return none("-XX:+UseTransparentHugePages reaches only a JVM's own heap");
    case fix_mechanism::v8_heap:
      return none("no Node.js option advises V8's heap (--use-largepages remaps its code only)");
    case fix_mechanism::shmem_enabled:
      // shmem_enabled governs the kernel's own shmem mount; force and deny override every mount.
      if (value == "force") {
        return c.kind == memory_class::shared_anonymous || c.kind == memory_class::tmpfs_file
                   ? all(c)
                   : none("shmem_enabled reaches only shared memory");
      }
      if (c.kind == memory_class::tmpfs_file) {
        return none(
            fmt::format("a file on the tmpfs mount {} follows that mount's huge= ({}), "
                        "not shmem_enabled (only force and deny override every mount)",
                        c.mount.empty() ? "(unknown)" : c.mount,
                        c.mount_huge.empty() ? "never" : c.mount_huge));
      }
      if (c.kind != memory_class::shared_anonymous) {
        return none("shmem_enabled reaches only shared memory");
      }
      if (value == "always" || value == "within_size") return all(c);
      if (value == "advise") return advised_only(c, "shmem_enabled=advise");
      return none(fmt::format("shmem_enabled={} gives shared memory base pages only", value));
    case fix_mechanism::tmpfs_huge:
      if (c.kind != memory_class::tmpfs_file) return none("a mount's huge= reaches only its files");
      if (value == "always" || value == "within_size") return all(c);
      if (value == "advise") return advised_only(c, "huge=advise");
      return none(fmt::format("huge={} gives the mount's files base pages only",
                              value.empty() ? "never" : value));
    case fix_mechanism::thp_always:
      if (c.kind == memory_class::file_copies) return file_copies_unreached();
      if (!private_anonymous(c.kind)) return none("enabled= governs private anonymous memory only");
      return whole_pmds(c, thp_bytes);
    case fix_mechanism::service_setting:
      if (runtime == "mariadb" &&
          (c.kind == memory_class::anonymous_mmap || c.kind == memory_class::runtime_heap)) {
        return all(c);  // large_pages maps the buffer pool from the hugetlb pool
      }
      if (runtime == "postgres" && c.kind == memory_class::shared_anonymous) return all(c);
      if (runtime == "memcached" && glibc_class(c.kind)) return all(c);  // -L: one block
      if (runtime == "python" && glibc_class(c.kind)) {
        // numpy advises array buffers of 4 MiB and up, each as it allocates it.
        const std::size_t small = std::min(c.in_small_chunks, c.resident);
        return {c.resident - small, small == 0 ? "" : "numpy advises buffers of 4 MiB and up"};
      }
      return none("no setting of this service reaches it");
    case fix_mechanism::collapse:
      if (p.thp_enabled && !*p.thp_enabled) {
        return none("THP is disabled for the process (prctl): MADV_COLLAPSE refuses it too");
      }
      if (c.kind == memory_class::file_copies) return file_copies_unreached();
      if (!private_anonymous(c.kind)) {
        return none(
            "--collapse collapses the process's private anonymous memory, not shared "
            "memory or files");
      }
      return whole_pmds(c, thp_bytes);
  }
  return none("");
}

std::string go_heap_reason(const process_report& p) {
  std::string godebug;
  for (const std::string& s : p.runtime.settings) {
    if (s.rfind("GODEBUG=", 0) == 0) godebug = s.substr(8);
  }
  std::string out =
      "the Go runtime maps its own heap and advises none of it MADV_HUGEPAGE (not since Go "
      "1.21.1), and no GODEBUG setting makes it (GODEBUG=disablethp=1 only keeps THP off it)";
  if (godebug_disables_thp(godebug)) {
    // Only smaps says whether the runtime acted on it (Go 1.21.6 and later do): VmFlags nh on
    // its first heap arena.
    const anon_mapping* arena = nullptr;
    for (const anon_mapping& m : p.largest) {
      if (m.start == 0xc000000000) arena = &m;
    }
    out += "; this process has GODEBUG=" + godebug;
    if (arena != nullptr && arena->flags == "nh") {
      out +=
          ": its runtime marked the heap MADV_NOHUGEPAGE (smaps VmFlags nh), which THP "
          "enabled=always and --collapse respect, so what follows helps only once "
          "disablethp=1 is gone";
    } else if (arena != nullptr) {
      out +=
          ", yet its heap is not marked MADV_NOHUGEPAGE (no nh in smaps VmFlags): this Go "
          "runtime does not act on disablethp";
    } else {
      out +=
          ", which makes Go 1.21.6 and later mark the heap MADV_NOHUGEPAGE (its mapping is "
          "not among those listed, so smaps' VmFlags were not checked)";
    }
  }
  return out;
}

std::string out_of_reach_reason(const memory_class_usage& c, const process_report& p,
                                std::size_t thp_bytes) {
  const std::string& runtime = p.runtime.kind;
  const std::string& allocator = p.allocator.guess.name;
  if (std::min(c.advised, c.resident) * 2 >= c.resident) return "";  // the program's madvise
  if (std::min(c.refused, c.resident) * 2 > c.resident) {
    return "the program advised it MADV_NOHUGEPAGE (smaps VmFlags nh), which no malloc or "
           "runtime setting overrides";
  }
  if (reach_of(fix_mechanism::service_setting, c, p, "", thp_bytes).bytes * 2 >= c.resident) {
    return "";
  }
  // A JVM's or V8's heap is its own anonymous mmap where no class says runtime_heap.
  const bool heap =
      c.kind == memory_class::runtime_heap ||
      (c.kind == memory_class::anonymous_mmap &&
       std::none_of(p.classes.begin(), p.classes.end(),
                    [](const auto& other) { return other.kind == memory_class::runtime_heap; }) &&
       (runtime == "jvm" || runtime == "node"));
  if (heap && runtime == "jvm") return "";     // -XX:+UseTransparentHugePages
  if (heap && runtime == "dotnet") return "";  // DOTNET_GCLargePages
  if (heap && runtime == "node") return reach_of(fix_mechanism::v8_heap, c, p).limit;
  switch (c.kind) {
    case memory_class::glibc_main_arena:
    case memory_class::glibc_thread_arenas:
    case memory_class::glibc_mmapped_chunks: {
      const reach r = reach_of(fix_mechanism::glibc_hugetlb_tunable, c, p, "", thp_bytes);
      return r.bytes * 2 >= c.resident ? "" : r.limit;
    }
    case memory_class::allocator_arenas:
      if (allocator == "jemalloc" || allocator == "mimalloc") return "";
      if (allocator == "tcmalloc") return reach_of(fix_mechanism::tcmalloc, c, p).limit;
      if (allocator == "musl") return "musl's malloc has no huge page setting";
      if (p.allocator.guess.library.empty()) {
        return "its malloc is linked into the executable and cannot be told, so the doctor "
               "knows no setting of it (a static glibc reads GLIBC_TUNABLES, where it is one)";
      }
      return "the doctor knows no huge page setting of its allocator (" + allocator + ")";
    case memory_class::runtime_heap:
      if (runtime == "go") return go_heap_reason(p);
      return "the runtime (" + (runtime.empty() ? std::string("unrecognised") : runtime) +
             ") maps its own heap, which no malloc setting reaches, and the doctor knows no "
             "setting of this runtime that advises it";
    case memory_class::anonymous_mmap:
      return "the program maps it itself without MADV_HUGEPAGE, which no malloc or runtime "
             "setting changes";
    default: return "";
  }
}

std::string class_phrase(memory_class kind) {
  switch (kind) {
    case memory_class::glibc_main_arena: return "glibc's main arena";
    case memory_class::glibc_thread_arenas: return "glibc's thread arenas";
    case memory_class::glibc_mmapped_chunks: return "glibc's mmapped chunks";
    case memory_class::allocator_arenas: return "the allocator's arenas";
    case memory_class::runtime_heap: return "the runtime's own heap";
    case memory_class::anonymous_mmap: return "the program's own anonymous mappings";
    case memory_class::shared_anonymous: return "its memfd, SysV or MAP_SHARED anonymous memory";
    case memory_class::tmpfs_file: return "its files on tmpfs";
    case memory_class::hugetlb: return "its hugetlb pages";
    case memory_class::file: return "its file mappings";
    case memory_class::file_copies: return "its copy-on-write copies in private file mappings";
  }
  return "its memory";
}

std::string classes_phrase(const std::vector<const memory_class_usage*>& classes) {
  std::string out;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    if (i > 0) out += i + 1 == classes.size() ? " and " : ", ";
    out +=
        fmt::format("{} ({})", class_phrase(classes[i]->kind), format_bytes(classes[i]->resident));
  }
  return out;
}

std::vector<std::string> class_names(const std::vector<const memory_class_usage*>& classes) {
  std::vector<std::string> out;
  for (const memory_class_usage* c : classes) out.emplace_back(name_of(c->kind));
  return out;
}

std::size_t advice_threshold(const process_report& p) noexcept {
  const std::string& kind = p.runtime.kind;
  return kind == "memcached" || kind == "mariadb" ? 64 * units::mib : process_advice_threshold;
}

bool wants_huge(const memory_class_usage& c, const process_report& p) noexcept {
  return c.resident >= advice_threshold(p) && c.huge_fraction() < 0.5;
}

bool thp_except_advised(const process_report& p, const system_report& s) {
  const auto version = parse_kernel_version(s.kernel_release);
  if (!version || !version->at_least(6, 18)) return false;
  if (effective_enabled(s, "unknown") != "always" || (p.thp_enabled && !*p.thp_enabled)) {
    return false;
  }
  std::size_t unadvised = 0, advised = 0;
  for (const memory_class_usage& c : p.classes) {
    if (!private_anonymous(c.kind)) continue;
    const std::size_t kept = std::min(c.advised + c.refused + c.in_small_mappings, c.resident);
    unadvised += c.resident - kept;
    advised += std::min(c.advised, c.resident);
  }
  return unadvised >= 64 * units::mib && p.thp_eligible_anon <= advised;
}

std::string always_caveat(const system_report& s) {
  if (effective_enabled(s, "unknown") == "always") return "";
  return " unless THP is disabled for the process except where advised "
         "(PR_THP_DISABLE_EXCEPT_ADVISED, Linux 6.18, often inherited from a launcher; status "
         "THP_enabled does not show it)";
}

collapse_fallback collapse_of(const process_report& p, const system_report& s) {
  collapse_fallback out;
  out.text =
      "hugepage-doctor --pid PID --collapse raises it now (MADV_COLLAPSE), but nothing keeps it "
      "huge: khugepaged never collapses unadvised ranges again, and fork copy-on-write, a "
      "runtime's GC unmapping or MADV_DONTNEED of its pages, and memory freed and mapped again "
      "split it back to base pages";
  if (s.collapse != collapse_support::unsupported) {
    out.commands.push_back(
        shell_line({"hugepage-doctor", "--pid", std::to_string(p.pid), "--collapse"}));
  } else {
    out.text += "; MADV_COLLAPSE does not work on this kernel";
  }
  return out;
}

}  // namespace hugepage::doctor
