// tools/test/doctor_classes_support.hpp - what the memory class tests (doctor_classes_test,
// doctor_classes_live_test) share: mappings made by hand, and a class read back from a list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hugepage/page_size.hpp"
#include "hugepage/smaps.hpp"
#include "process_report.hpp"

namespace doctor_classes {

namespace hd = hugepage::doctor;
using hd::memory_class;
using hugepage::mapping_info;
using hugepage::units::kib;
using hugepage::units::mib;

inline constexpr std::uintptr_t base = 0x7f0000000000;  // on a 64 MiB boundary
inline constexpr std::size_t page = 4 * kib;

inline mapping_info mapping(std::uintptr_t start, std::size_t size, const std::string& perms,
                            const std::string& name, std::size_t rss) {
  mapping_info m;
  m.start = start;
  m.end = start + size;
  m.permissions = perms;
  m.name = name;
  m.kernel_page_bytes = page;
  m.rss = rss;
  const bool file = !name.empty() && name.front() == '/';
  m.anonymous = file || perms[3] == 's' ? 0 : rss;
  return m;
}

inline hd::class_facts glibc_facts() {
  hd::class_facts f;
  f.allocator = "glibc";
  return f;
}

inline const hd::memory_class_usage* find(const std::vector<hd::memory_class_usage>& classes,
                                          memory_class kind, const std::string& mount = "") {
  for (const auto& c : classes) {
    if (c.kind == kind && c.mount == mount) return &c;
  }
  return nullptr;
}

// A class's field, 0 or "" when the class is missing (so a missing class fails, not crashes).
inline std::size_t resident_of(const std::vector<hd::memory_class_usage>& classes,
                               memory_class kind, const std::string& mount = "") {
  const auto* c = find(classes, kind, mount);
  return c == nullptr ? 0 : c->resident;
}
inline std::string evidence_of(const std::vector<hd::memory_class_usage>& classes,
                               memory_class kind) {
  const auto* c = find(classes, kind);
  return c == nullptr ? "(missing)" : c->evidence;
}
inline std::string mount_huge_of(const std::vector<hd::memory_class_usage>& classes,
                                 memory_class kind, const std::string& mount) {
  const auto* c = find(classes, kind, mount);
  return c == nullptr ? "(missing)" : c->mount_huge;
}

inline std::size_t resident_sum(const std::vector<hd::memory_class_usage>& classes) {
  std::size_t sum = 0;
  for (const auto& c : classes) sum += c.resident;
  return sum;
}

}  // namespace doctor_classes
