// tools/doctor/process_report.cpp - the names of a process report's kinds (process_report.hpp),
// as JSON and Prometheus carry them.
#include "process_report.hpp"

namespace hugepage::doctor {

const char* name_of(page_kind kind) noexcept {
  switch (kind) {
    case page_kind::hugetlb: return "hugetlb";
    case page_kind::thp: return "thp";
    case page_kind::base: break;
  }
  return "base";
}

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
    case memory_class::file_copies: return "private_file_copies";
  }
  return "unknown";
}

}  // namespace hugepage::doctor
