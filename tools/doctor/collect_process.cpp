// tools/doctor/collect_process.cpp - the process report: reading /proc/PID, checking the target
// stayed the same process throughout.
#include "collect_process.hpp"

#include <gnu/libc-version.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>
#include <utility>

#include "allocator_detect.hpp"
#include "allocator_settings.hpp"
#include "collapse_command.hpp"
#include "debian_packages.hpp"
#include "hugepage/kernel_counters.hpp"
#include "hugepage/kernel_files.hpp"
#include "hugepage/process_view.hpp"
#include "hugepage/smaps.hpp"
#include "hugepage/system.hpp"
#include "hugetlb_cgroup.hpp"
#include "mapping_coverage.hpp"
#include "mapping_summary.hpp"
#include "memory_classes.hpp"
#include "mounts.hpp"
#include "numa_files.hpp"
#include "process_access.hpp"
#include "process_environ.hpp"
#include "process_report.hpp"
#include "read_text.hpp"
#include "runtime_detect.hpp"
#include "runtime_go.hpp"
#include "shared_views.hpp"
#include "status_fields.hpp"
#include "test_hook.hpp"
#include "text.hpp"
#include "thp_disabler.hpp"

namespace hugepage::doctor {

std::optional<proc_stat> parse_proc_stat(std::string_view text) {
  // "pid (comm) S ppid ...": comm may hold ") ", so the fields start after the last ')'.
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  std::vector<std::string_view> fields;  // fields[0] is field 3 (state)
  while (!rest.empty()) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const auto space = rest.find(' ');
    if (!rest.empty()) fields.push_back(rest.substr(0, space));
    rest.remove_prefix(space == std::string_view::npos ? rest.size() : space);
  }
  if (fields.size() < 20 || fields[0].size() != 1) return std::nullopt;
  proc_stat st;
  st.state = fields[0][0];
  st.flags = std::strtoull(std::string(fields[6]).c_str(), nullptr, 10);        // field 9
  st.threads = std::strtoull(std::string(fields[17]).c_str(), nullptr, 10);     // field 20
  st.start_time = std::strtoull(std::string(fields[19]).c_str(), nullptr, 10);  // field 22
  return st;
}

namespace {

std::optional<proc_stat> read_proc_stat(const process_view& view, int& err) {
  std::error_code ec;
  const auto text = view.read_text("stat", ec);
  err = ec.value();
  if (!text) return std::nullopt;
  return parse_proc_stat(*text);
}

// The glibc version of a target whose libc is the file this doctor runs with; "" otherwise.
std::string glibc_version_of(const process_view& target, const std::string& library) {
  struct stat theirs {
  }, ours{};
  if (target.stat_of(("root" + library).c_str(), theirs) != 0) return {};
  std::error_code ec;
  const auto self = process_view().maps_text(ec);
  if (!self) return {};
  for (const std::string& path : parse_maps_paths(*self)) {
    const std::string_view base = base_name(path);
    if ((base == "libc.so.6" || base.rfind("libc-2.", 0) == 0) &&
        ::stat(path.c_str(), &ours) == 0 && ours.st_dev == theirs.st_dev &&
        ours.st_ino == theirs.st_ino) {
      return gnu_get_libc_version();
    }
  }
  return {};
}

// Reads 16 bytes at each of `addresses` in `pid` into `out` (one process_vm_readv for all);
// the number read whole, or -1 with errno set when the first cannot be read.
long read_headers(pid_t pid, const std::vector<std::uintptr_t>& addresses,
                  std::vector<std::array<std::uint64_t, 2>>& out) {
  out.assign(addresses.size(), {0, 0});
  std::vector<iovec> local(addresses.size()), remote(addresses.size());
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    local[i] = {out[i].data(), sizeof out[i]};
    remote[i] = {reinterpret_cast<void*>(addresses[i]), sizeof out[i]};
  }
  const ssize_t got =
      ::process_vm_readv(pid, local.data(), local.size(), remote.data(), remote.size(), 0);
  if (got < 0) return -1;
  return static_cast<long>(static_cast<std::size_t>(got) / sizeof out[0]);
}

// Which of the `count` pages from `address` are in memory or in swap, by the view's pagemap (one
// read): a read of a page never touched would fault it in (a page of its own where the kernel maps
// no zero page on read faults), and the doctor changes nothing in the process it reads. Where
// pagemap cannot be read, every page counts as backed.
std::vector<bool> backed_pages(const process_view& view, std::uintptr_t address, std::size_t count,
                               std::size_t page) {
  std::vector<bool> backed(count, true);
  if (view.pagemap_fd() < 0 || count == 0) return backed;
  std::vector<std::uint64_t> entries(count);
  const auto bytes = static_cast<ssize_t>(count * sizeof(std::uint64_t));
  const off_t at = static_cast<off_t>(address / page * sizeof(std::uint64_t));
  if (::pread(view.pagemap_fd(), entries.data(), static_cast<std::size_t>(bytes), at) != bytes) {
    return backed;
  }
  for (std::size_t i = 0; i < count; ++i) backed[i] = (entries[i] >> 62 & 3U) != 0;  // 63, 62
  return backed;
}

bool backed(const process_view& view, std::uintptr_t address, std::size_t page) {
  return backed_pages(view, address, 1, page).front();
}

// Reads the headers of glibc chunks in each chunk candidate of the view's process
// (process_vm_readv, 16 bytes a header, at most `max_reads` calls in all). A record may hold chunks
// in only part of it: the kernel merges a chunk with any anonymous neighbour of the same flags
// (ld.so's small mapping below libc, the program's own mmap). So the walk goes chunk by chunk from
// the record's start, and where a piece is no chunk it looks for the next header at each of the
// `scan_pages` pages after it, in one call (1024 iovecs, IOV_MAX: a program's mmap of up to 4 MiB
// below the chunks).
chunk_headers read_chunk_headers(const process_view& view,
                                 const std::vector<mapping_info>& mappings,
                                 std::size_t max_reads = 4096, std::size_t scan_pages = 1024) {
  chunk_headers out;
  out.read = true;  // with no candidate, no chunk is left among the anonymous mappings
  const std::size_t page = os::base_page_size();
  const pid_t pid = view.pid();  // process_vm_readv; the view's pagemap says what is in memory
  std::size_t reads = 0, unread = 0;
  std::vector<std::uintptr_t> at;
  std::vector<std::array<std::uint64_t, 2>> headers;
  const auto unreadable = [&out] {
    // EPERM (no ptrace attach right), ESRCH: none can be read. The errno name keeps the table
    // row within 100 columns.
    out = chunk_headers{};
    out.evidence = std::string("chunk headers unreadable (") + ::strerrorname_np(errno) + ")";
    return out;
  };
  // A thread heap's heap_info: the 64 MiB-aligned layout alone is also a program's own blocks.
  for (const std::size_t i : thread_heap_candidates(mappings)) {
    if (!backed(view, mappings[i].start, page)) continue;  // never written: no heap_info
    std::uint64_t words[4] = {0, 0, 0, 0};
    iovec local{words, sizeof words};
    iovec remote{reinterpret_cast<void*>(mappings[i].start), sizeof words};
    ++reads;
    if (::process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof words) {
      if (errno == EFAULT) continue;  // unmapped since smaps was read
      return unreadable();
    }
    if (is_heap_info(words, mappings[i].start, mappings[i].size(), page)) {
      out.heaps.push_back(mappings[i].start);
    }
  }
  out.heaps_read = true;
  for (const std::size_t i : chunk_candidates(mappings)) {
    const mapping_info& m = mappings[i];
    chunk_mapping found{m.start, {}};
    std::size_t offset = 0;
    bool gone = false;
    while (offset < m.size() && reads < max_reads && !gone) {
      // The page at `offset` and, in the same call, the pages after it up to the scan's reach.
      // Pages never written hold no header and are not read (see backed()).
      at.clear();
      const std::size_t scanned = std::min(scan_pages, (m.size() - offset + page - 1) / page);
      const std::vector<bool> in_memory = backed_pages(view, m.start + offset, scanned, page);
      for (std::size_t k = 0; k < scanned; ++k) {
        if (in_memory[k]) at.push_back(m.start + offset + k * page);
      }
      long got = 0;
      if (!at.empty()) {
        ++reads;
        got = read_headers(pid, at, headers);
        if (got < 0 && errno != EFAULT) return unreadable();
      }
      std::size_t next = m.size();  // where the next chunk starts; none found: the record's end
      std::size_t first_span = 0;   // the size of the chunk found there, from the same read
      for (long k = 0; k < got; ++k) {
        const std::size_t o = at[static_cast<std::size_t>(k)] - m.start;
        const std::size_t span = mmapped_chunk_span(headers[static_cast<std::size_t>(k)][0],
                                                    headers[static_cast<std::size_t>(k)][1], page);
        if (span != 0 && span <= m.size() - o) {
          next = o;
          first_span = span;
          break;
        }
      }
      if (got < static_cast<long>(at.size()) && next == m.size()) gone = true;  // unmapped since
      if (next == m.size() && scanned * page < m.size() - offset) break;        // beyond the reach
      offset = next;
      if (first_span != 0) {  // the header just read: no second read of it
        offset += first_span;
        found.chunks.push_back(first_span);
      }
      // From a header on, chunk after chunk, one read each.
      while (offset < m.size() && reads < max_reads && backed(view, m.start + offset, page)) {
        std::uint64_t header[2] = {0, 0};
        iovec local{header, sizeof header};
        iovec remote{reinterpret_cast<void*>(m.start + offset), sizeof header};
        ++reads;
        if (::process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof header) {
          gone = true;
          break;
        }
        const std::size_t span = mmapped_chunk_span(header[0], header[1], page);
        if (span == 0 || span > m.size() - offset) break;
        offset += span;
        found.chunks.push_back(span);
      }
    }
    if (gone) continue;  // unmapped since smaps was read: not counted as chunks
    if (!found.chunks.empty()) {
      out.mappings.push_back(std::move(found));
    } else if (reads >= max_reads) {
      ++unread;
    }
  }
  if (unread > 0) {
    out.evidence = std::to_string(unread) + " past " + std::to_string(max_reads) + " reads";
  }
  return out;  // ascending: smaps lists mappings in address order
}

// Where the threads may run (Cpus_allowed_list against each node's CPUs) and how much of the
// memory numa_maps lists lies on other nodes, in all and per largest mapping.
numa_reach numa_reach_of(const process_report& p, const process_files& files) {
  numa_reach r;
  r.cpus_allowed = status_text_field(*files.status, "Cpus_allowed_list").value_or("");
  r.mems_allowed = status_text_field(*files.status, "Mems_allowed_list").value_or("");
  const std::vector<int> cpus = parse_id_list(r.cpus_allowed);
  for (const auto& [node, list] : files.node_cpus) {
    const std::vector<int> node_cpus = parse_id_list(list);
    const bool any = std::any_of(node_cpus.begin(), node_cpus.end(), [&](int cpu) {
      return std::binary_search(cpus.begin(), cpus.end(), cpu);
    });
    if (any) r.run_nodes.push_back(node);
  }
  for (const auto& [node, u] : p.numa) {
    r.resident += u.bytes;
    if (!r.runs_on(node)) {
      r.remote += u.bytes;
      r.remote_hugetlb += u.hugetlb_bytes;
    }
  }
  const auto by_mapping = parse_numa_maps_by_mapping(*files.numa_maps);
  for (const anon_mapping& m : p.largest) {
    std::map<int, std::uint64_t> nodes;
    // A joined cascade block is several numa_maps lines: every one inside it counts.
    for (auto it = by_mapping.lower_bound(m.start);
         it != by_mapping.end() && it->first < m.start + m.size; ++it) {
      for (const auto& [node, bytes] : it->second) nodes[node] += bytes;
    }
    r.largest_nodes.push_back(std::move(nodes));
  }
  return r;
}

}  // namespace

process_identity identify_process(const process_files& files,
                                  const std::vector<mapping_info>& mappings) {
  process_identity id;
  if (files.status) id.status = parse_meminfo(*files.status);
  for (const mapping_info& m : mappings) {
    if (!m.name.empty() && m.name.front() == '/' &&
        std::find(id.paths.begin(), id.paths.end(), m.name) == id.paths.end()) {
      id.paths.push_back(m.name);
    }
  }
  const auto& cmdline = files.cmdline;
  const auto& environ = files.environ;
  const bool overwritten = environ && environ_overwritten(*environ);
  if (environ && !overwritten) id.settings = parse_allocator_environ(*environ);
  id.allocator =
      describe_allocator(detect_allocator(id.paths), environ.has_value(), id.settings, overwritten);
  id.runtime = detect_runtime(id.paths, cmdline.value_or(""), id.settings);
  detect_go(id.runtime, mappings, id.settings);
  if (id.runtime.kind == "jvm" && (!cmdline || !environ || overwritten)) {
    id.runtime.settings_known = false;
  }
  return id;
}

namespace {

// build_process_report() with the smaps parsed and the identity judged: collection has both
// already (they chose which files to read), so it does not parse or judge them twice.
process_report report_of(pid_t pid, const process_files& files,
                         const std::vector<mapping_info>& mappings,
                         const process_identity& identity, std::size_t top,
                         const std::string& root) {
  // The THP shares in the PMD size of this machine (the size smaps' AnonHugePages counts in).
  // Views of one shared object (ZGC maps its heap three times) count their memory once.
  std::vector<bool> repeated;
  const auto once = counted_once(mappings, repeated, files.views ? &*files.views : nullptr);
  const std::vector<mapping_info>& counted = once ? *once : mappings;
  process_report p = summarize_mappings(counted, top, thp_page_bytes());
  p.pid = pid;
  if (files.status) {
    p.name = status_text_field(*files.status, "Name").value_or("");
    if (const auto it = identity.status.find("THP_enabled"); it != identity.status.end()) {
      p.thp_enabled = it->second != 0;
    }
    if (const auto it = identity.status.find("VmLck"); it != identity.status.end()) {
      p.locked = it->second;
    }
  }
  // status Name is the comm (the executable's name, 15 bytes, unless the process renamed
  // itself); the title is the command line, which servers rewrite ("redis-server *:6379",
  // "postgres: checkpointer"). Both are the process's own text: shown escaped, never put in a
  // command.
  if (files.cmdline) {
    std::string title = *files.cmdline;
    while (!title.empty() && title.back() == '\0') title.pop_back();
    std::replace(title.begin(), title.end(), '\0', ' ');
    p.title = std::move(title);
  }
  p.allocator = identity.allocator;
  p.runtime = identity.runtime;
  p.own_mount_namespace = files.own_mount_namespace.value_or(false);
  if (files.numa_maps) {
    p.numa = parse_numa_maps(*files.numa_maps);
    if (!files.node_cpus.empty() && files.status) p.reach = numa_reach_of(p, files);
  } else if (files.numa_node) {
    p.numa = numa_of_one_node(mappings, *files.numa_node);
  }
  if (files.coverage) p.coverage = top_coverage(*files.coverage, top);
  if (p.allocator.guess.name == "glibc" && p.allocator.guess.version.empty()) {
    p.allocator.guess.version = files.glibc_version;
  }
  if (const auto it = files.packages.find(p.allocator.guess.library); it != files.packages.end()) {
    auto& g = p.allocator.guess;
    g.package = it->second.first + " " + it->second.second;
    const std::string upstream = upstream_version(it->second.second);
    // The package's upstream version is more precise than a soname ("2.0" -> "2.0.9"), and
    // must agree with it.
    if (g.version.empty() || upstream.rfind(g.version, 0) == 0) g.version = upstream;
  }
  if (const auto it = files.packages.find(p.runtime.file); it != files.packages.end()) {
    p.runtime.package = it->second.first + " " + it->second.second;
    const std::string upstream = upstream_version(it->second.second);
    if (p.runtime.version.empty() || upstream.rfind(p.runtime.version, 0) == 0) {
      p.runtime.version = upstream;
    }
  }
  class_facts facts;
  facts.allocator = p.allocator.guess.name;
  facts.runtime = p.runtime.kind;
  if (files.mountinfo) facts.mounts = parse_mount_entries(*files.mountinfo);
  facts.chunks = files.chunks;
  facts.thp_page_bytes = thp_page_bytes();
  facts.repeated_views = std::move(repeated);
  p.classes = classify_memory(counted, facts);
  std::optional<bool> parent_thp;
  if (files.parent_status) {
    const auto fields = parse_meminfo(*files.parent_status);
    if (const auto it = fields.find("THP_enabled"); it != fields.end()) {
      parent_thp = it->second != 0;
    }
  }
  p.thp_disabled_by = thp_disabler_of(p.thp_enabled, parent_thp);
  std::vector<std::size_t> sizes;
  for (const std::size_t bytes : pool_page_sizes()) sizes.push_back(bytes);
  if (files.cgroup) {
    p.cgroup = hugetlb_cgroup_report(root, *files.cgroup, sizes);
    p.memory_limit = memory_cgroup_limit(root, *files.cgroup);
    p.collapse_growth = files.collapse_growth;
    p.unit = systemd_unit(*files.cgroup);
  } else {
    p.cgroup.status = "/proc/PID/cgroup unreadable";
  }
  return p;
}

}  // namespace

process_report build_process_report(pid_t pid, const process_files& files, std::size_t top,
                                    const std::string& root) {
  const std::vector<mapping_info> mappings = parse_smaps(files.smaps);
  return report_of(pid, files, mappings, identify_process(files, mappings), top, root);
}

namespace {

// Whether the process whose /proc/PID/stat says `stat` has user memory to report; otherwise
// fills `failure`.
bool reportable(pid_t pid, const proc_stat& stat, collect_failure& failure) {
  const std::string who = "pid " + std::to_string(pid);
  if (stat.state == 'Z' && stat.threads > 1) {
    // The main thread called pthread_exit(); the other threads run on, with the memory, but the
    // kernel shows none of it through /proc/PID (its files describe the exited main thread).
    failure.exit_code = exit_error;
    failure.message = who + ": its main thread has exited while " +
                      std::to_string(stat.threads - 1) + " other thread(s) run on, and /proc/" +
                      std::to_string(pid) + " shows none of the process's memory then: no report";
    return false;
  }
  if (stat.state == 'Z' || stat.state == 'X') {
    failure.exit_code = exit_zombie;
    failure.message = who +
                      " is a zombie: it exited and its parent has not reaped it; it has no "
                      "memory to report";
    return false;
  }
  if (stat.kernel_thread()) {
    failure.exit_code = exit_kernel_thread;
    failure.message = who + " is a kernel thread: it has no user memory to report";
    return false;
  }
  if (stat.exiting()) {
    failure.exit_code = exit_error;
    failure.message = who + " is exiting: its memory is being freed; no report";
    return false;
  }
  return true;
}

// /proc/PID/stat of the target; nullopt, with `failure` saying why, when it cannot be read.
std::optional<proc_stat> read_target_stat(const process_view& target, collect_failure& failure) {
  int err = 0;
  auto stat = read_proc_stat(target, err);
  if (!stat) {
    failure.message =
        explain_unreadable(target.pid(), err == 0 ? ENOENT : err, read_access_facts(target));
  }
  return stat;
}

// The text of the target's `file`; nullopt when it cannot be read.
std::optional<std::string> text_of(const process_view& target, const char* file) {
  std::error_code ec;
  return target.read_text(file, ec);
}

}  // namespace

bool is_reportable_target(const process_view& target, collect_failure& failure) {
  const auto stat = read_target_stat(target, failure);
  return stat && reportable(target.pid(), *stat, failure);
}

bool is_reportable_target(pid_t pid, collect_failure& failure) {
  return is_reportable_target(process_view(pid), failure);
}

std::optional<process_report> collect_process(pid_t pid, std::size_t top, collect_failure& failure,
                                              process_files* files) {
  return collect_process(process_view(pid), top, failure, files);
}

std::optional<process_report> collect_process(const process_view& target, std::size_t top,
                                              collect_failure& failure, process_files* files_out) {
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = target.pid();
  const std::string who = "pid " + std::to_string(pid);
  // stat is read once here and once at the end: the start time must not have changed.
  const auto before = read_target_stat(target, failure);
  if (!before || !reportable(pid, *before, failure)) return std::nullopt;
  // smaps is read once: the page-table walk behind it is most of the cost on a large process.
  std::error_code ec;
  process_files files;
  files.smaps = target.smaps_text(ec);
  if (ec == std::errc::no_such_process) {
    failure.message = who + " exited while being read; no report";
    return std::nullopt;
  }
  if (ec) {
    failure.message = explain_unreadable(pid, ec.value(), read_access_facts(target));
    return std::nullopt;
  }
  const std::vector<mapping_info> mappings = parse_smaps(files.smaps);
  // The text is kept only for a capture (files_out): a large process's smaps is megabytes.
  if (files_out == nullptr) files.smaps = std::string();
  files.status = text_of(target, "status");
  files.cmdline = text_of(target, "cmdline");
  files.environ = text_of(target, "environ");
  files.cgroup = text_of(target, "cgroup");
  // Who the process is, judged once: it decides which of the facts below are read.
  const process_identity identity = identify_process(files, mappings);
  // One NUMA node: numa_maps would say that all of it is there (numa_of_one_node).
  const std::vector<int> nodes = numa_nodes("");
  if (nodes.size() == 1) {
    files.numa_node = nodes.front();
  } else {
    files.numa_maps = text_of(target, "numa_maps");
    for (const int node : nodes) {
      const auto cpus =
          read_text("", "/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
      if (cpus) files.node_cpus[node] = *cpus;
    }
  }
  files.mountinfo = text_of(target, "mountinfo");
  struct stat own_ns {
  }, their_ns{};
  if (::stat("/proc/self/ns/mnt", &own_ns) == 0 && target.stat_of("ns/mnt", their_ns) == 0) {
    files.own_mount_namespace =
        own_ns.st_ino != their_ns.st_ino || own_ns.st_dev != their_ns.st_dev;
  }
  const auto ppid = identity.status.find("PPid");
  // PPid 0: no parent in this pid namespace to ask. PPid 1 (init, or the adopter of an
  // orphan) tells nothing about who set the process's THP: unknown.
  if (ppid != identity.status.end() && ppid->second > 1) {
    // The parent's own directory, its stat and status read through it: one process. Its number
    // may name another by now (the parent exited, the number was reused): that one started
    // after the target, so it is no parent and tells nothing.
    const process_view parent(static_cast<pid_t>(ppid->second));
    int err = 0;
    const auto parent_stat = read_proc_stat(parent, err);
    if (parent_stat && started_no_later(*parent_stat, *before)) {
      files.parent_status = text_of(parent, "status");
    }
  }
  // Only glibc's chunks carry its headers: another malloc's mappings are not read.
  const allocator_guess& allocator = identity.allocator.guess;
  if (mallocs_with_glibc(allocator.name)) files.chunks = read_chunk_headers(target, mappings);
  files.coverage = coverage_of(target, mappings);
  files.views = view_residency_of(target, mappings);
  if (allocator.name == "glibc" && allocator.version.empty()) {
    files.glibc_version = glibc_version_of(target, allocator.library);
  }
  // Versions from the package database, where the target sees the same files as the doctor
  // (not in a container with its own root).
  struct stat ours {
  }, theirs{};
  if (::stat("/", &ours) == 0 && target.stat_of("root", theirs) == 0 &&
      ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino) {
    std::vector<std::string> files_of_interest;
    if (!allocator.library.empty()) files_of_interest.push_back(allocator.library);
    if (!identity.runtime.file.empty()) files_of_interest.push_back(identity.runtime.file);
    files.packages = debian_packages("", files_of_interest);
  }
  // A collapse's growth, weighed against a memory cgroup limit: read (a page walk of the
  // candidate ranges) only where there is one.
  if (files.cgroup && memory_cgroup_limit("", *files.cgroup)) {
    const auto thp = identity.status.find("THP_enabled");
    files.collapse_growth = predicted_collapse_growth(
        target, mappings, thp != identity.status.end() && thp->second == 0);
  }
  process_report p = report_of(pid, files, mappings, identity, top, "");
  test_hook();
  // The same process from start to end: a pid that vanished, or was reused by a process
  // started since, would make a report of two processes or of none.
  int err = 0;
  const auto after = read_proc_stat(target, err);
  if (!after || after->start_time != before->start_time || after->state == 'Z' ||
      after->state == 'X' || after->exiting() || !files.status) {
    failure.message = who + " exited while being read; no report";
    return std::nullopt;
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (files_out != nullptr) *files_out = std::move(files);
  return p;
}

}  // namespace hugepage::doctor
