// tools/doctor/memory_classes.cpp - the classes of a process's memory by what maps it.
#include "report.hpp"

namespace hugepage::doctor {

const char* name_of(memory_class kind) noexcept {
  switch (kind) {
    case memory_class::glibc_main_arena: return "glibc_main_arena";
    case memory_class::glibc_thread_arenas: return "glibc_thread_arenas";
    case memory_class::glibc_mmapped_chunks: return "glibc_mmapped_chunks";
    case memory_class::allocator_arenas: return "allocator_arenas";
    case memory_class::runtime_heap: return "runtime_heap";
    case memory_class::anonymous_mmap: return "anonymous_mmap";
    case memory_class::shared_anonymous: return "shared_anonymous";
    case memory_class::tmpfs_file: return "tmpfs_file";
    case memory_class::hugetlb: return "hugetlb";
    case memory_class::file: return "file";
  }
  return "unknown";
}

const char* name_of(thp_disabler who) noexcept {
  switch (who) {
    case thp_disabler::none: return "none";
    case thp_disabler::process: return "process";
    case thp_disabler::inherited: return "inherited";
    case thp_disabler::unknown: return "unknown";
  }
  return "unknown";
}

}  // namespace hugepage::doctor
