// tools/test/doctor_stored_inputs.hpp - the stored inputs the doctor's rules run over: each
// capture of a real service (tools/test/data/services) on each of a set of machines. The field
// machine is the one scripts/field runs on, as the DoctorServices test assumes it, with the
// capture's own `machine` lines; the others change one thing of it each (THP mode, defrag,
// shmem_enabled, fragmentation, fallbacks, the pool, the hugetlb cgroup, 1 GiB pages), so that
// the system's rules and the process's see every state they judge.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "capture.hpp"
#include "collect_process.hpp"
#include "hugepage/page_size.hpp"
#include "process_report.hpp"
#include "system_report.hpp"

namespace hugepage::doctor::stored_inputs {

inline const std::string services = std::string(HUGEPAGE_DOCTOR_DATA) + "/services";

// THP madvise, shmem_enabled never, a 2 MiB pool of 700 free pages, unfragmented memory, no
// fallbacks (as doctor_services_test.cpp's field_system()).
inline system_report field_system() {
  using hugepage::units::gib;
  using hugepage::units::mib;
  system_report s;
  s.kernel_release = "6.1.0-fixture";
  s.thp.enabled = "madvise";
  s.thp.defrag = "madvise";
  s.thp.max_ptes_none = 511;
  s.thp.shmem_enabled = "never";
  hugetlb_pool pool;
  pool.page_bytes = 2 * mib;
  pool.total = 700;
  pool.free = 700;
  pool.reserved = 0;
  pool.surplus = 0;
  pool.overcommit = 0;
  s.pools.push_back(pool);
  s.zones = std::vector<zone_readiness>{{0, "Normal", 4 * gib, 3 * gib, 1536}};
  s.vmstat = {{"thp_fault_alloc", 10000}, {"thp_fault_fallback", 0}};
  s.vmstat_readable = true;
  s.meminfo = {{"MemTotal", 23 * gib}, {"Hugepagesize", 2 * mib}};
  s.meminfo_readable = true;
  return s;
}

// The machines: a name and what it changes of the field machine.
using machine = std::pair<std::string, std::function<void(system_report&)>>;

inline std::vector<machine> machines() {
  using hugepage::units::gib;
  using hugepage::units::mib;
  const auto fragmented = [](system_report& s) {
    s.zones = std::vector<zone_readiness>{{0, "Normal", 3 * gib, 64 * mib, 32}};
  };
  const auto falling_back = [](system_report& s) {
    s.vmstat = {{"thp_fault_alloc", 1000}, {"thp_fault_fallback", 400}};
  };
  return {
      {"field", [](system_report&) {}},
      {"thp-never", [](system_report& s) { s.thp.enabled = "never"; }},
      {"thp-always-defrag-always",
       [](system_report& s) {
         s.thp.enabled = "always";
         s.thp.defrag = "always";
       }},
      {"defrag-never", [](system_report& s) { s.thp.defrag = "never"; }},
      {"fragmented", fragmented},
      {"fragmented-falling-back",
       [=](system_report& s) {
         fragmented(s);
         falling_back(s);
       }},
      {"thp-always-fragmented-falling-back",
       [=](system_report& s) {
         s.thp.enabled = "always";
         fragmented(s);
         falling_back(s);
       }},
      {"falling-back-defer",
       [=](system_report& s) {
         falling_back(s);
         s.thp.defrag = "defer";
       }},
      {"falling-back", falling_back},
      {"shmem-advise", [](system_report& s) { s.thp.shmem_enabled = "advise"; }},
      {"shmem-deny", [](system_report& s) { s.thp.shmem_enabled = "deny"; }},
      {"pool-in-use", [](system_report& s) { s.pools[0].free = 0; }},
      {"pool-exhausted",
       [](system_report& s) {
         s.pools[0].free = 0;
         s.vmstat["htlb_buddy_alloc_fail"] = 3;
       }},
      {"pool-idle-large", [](system_report& s) { s.meminfo["MemTotal"] = 4 * gib; }},
      {"no-1g-pages", [](system_report& s) { s.cpu_1g_pages = false; }},
      {"cgroup-v2-limit-at-fault",
       [](system_report& s) {
         hugetlb_limit limit;
         limit.page_bytes = 2 * mib;
         limit.version = "v2";
         limit.directory = "/sys/fs/cgroup/system.slice/doctor.service";
         limit.has_max = true;
         limit.max = 256 * mib;  // the pool is 1400 MiB
         limit.has_rsvd_max = true;
         limit.rsvd_max = std::nullopt;  // "max"
         s.cgroup.status = "v2";
         s.cgroup.limits.push_back(limit);
       }},
  };
}

// The captures' names, sorted.
inline std::vector<std::string> captures() {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(services.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The process report of a capture; throws naming the file when it cannot be read.
inline process_report capture_report(const std::string& name) {
  std::string error;
  const auto captured = read_capture(services + "/" + name + "/", error);
  if (!captured) throw std::runtime_error(name + ": " + error);
  return build_process_report(captured->pid, captured->files, 10, "/nonexistent");
}

// The field machine as a capture's `machine` lines (in its expect file) set it.
inline system_report field_system_of(const std::string& name) {
  system_report s = field_system();
  std::ifstream in(services + "/" + name + "/expect");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, key;
    words >> kind >> key;
    if (kind != "machine") continue;
    if (key == "shmem_enabled") {
      words >> s.thp.shmem_enabled.emplace();
    } else if (key == "pool-2m") {
      std::uint64_t total = 0, free = 0, reserved = 0;
      words >> total >> free >> reserved;
      s.pools[0].total = total;
      s.pools[0].free = free;
      s.pools[0].reserved = reserved;
    }
  }
  return s;
}

}  // namespace hugepage::doctor::stored_inputs
