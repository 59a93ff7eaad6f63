// tools/test/doctor_classes_live_test.cpp - a process's memory by the mechanism that maps it: the
// real doctor on a child whose glibc chunks, thread arenas, memfd and /dev/shm file are known, and
// a --capture of it. The classifier on hand-made mappings: doctor_classes_test.cpp.
#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "capture.hpp"
#include "collect_process.hpp"
#include "doctor_classes_support.hpp"
#include "doctor_cli_support.hpp"
#include "mapping_summary.hpp"
#include "memory_classes.hpp"
#include "mounts.hpp"
#include "process_report.hpp"
#include "runtime_detect.hpp"
#include "thp_disabler.hpp"

namespace {

namespace hd = hugepage::doctor;
using hd::memory_class;
using hugepage::units::kib;
using hugepage::units::mib;

using doctor_classes::find;
using doctor_classes::page;

// ---- the real doctor on a child ----------------------------------------------------------------

using doctor_cli::doctor;
using doctor_cli::result;
using doctor_cli::target;

const nlohmann::json* json_class(const nlohmann::json& process, const std::string& name,
                                 const std::string& mount = "") {
  for (const auto& c : process.at("memory_classes")) {
    if (c.at("class") == name && (mount.empty() || c.value("mount", "") == mount)) return &c;
  }
  return nullptr;
}

// The process part of the doctor's JSON for `pid`.
nlohmann::json process_json(pid_t pid, const doctor_cli::run_options& o = {}) {
  const result r = doctor({"--pid", std::to_string(pid), "--json"}, o);
  EXPECT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const nlohmann::json& p = doc.at("process");
  std::size_t sum = 0;
  for (const auto& c : p.at("memory_classes")) sum += c.at("resident_bytes").get<std::size_t>();
  EXPECT_EQ(sum, p.at("rss_bytes").get<std::size_t>() + p.at("hugetlb_bytes").get<std::size_t>());
  return p;
}

std::size_t bytes_of(const nlohmann::json* c, const char* key = "resident_bytes") {
  return c == nullptr ? 0 : c->at(key).get<std::size_t>();
}

// The least resident memory a class of mmapped chunks holding `bytes` shows. Exact when each
// chunk record is chunks only (evidence "chunk headers"). Where mmap put a chunk beside an
// anonymous neighbour the kernel merged them, which depends on the address layout of the run
// (about 1 run in 150 here): the record's Rss is then shared out by size (evidence "chunk
// headers, by size"), and a neighbour less resident than the chunks (ld.so's few pages below
// libc) takes a little of theirs.
std::size_t least_chunk_bytes(const std::string& evidence, std::size_t bytes) {
  if (evidence == "chunk headers") return bytes;
  EXPECT_EQ(evidence, "chunk headers, by size");
  return bytes - 16 * page;
}

// Under ASan the sanitizer's own mappings lie between and beside the target's glibc chunks and
// arenas, so records merge and their bytes are shared out by size: these exact layouts do not hold.
constexpr const char* asan_malloc = "the sanitizer's mappings merge with the target's glibc memory";

TEST(DoctorClassesLive, GlibcChunksAreToldByTheirHeaders) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "8", "--chunk-kib", "1024", "--malloc-chunks", "4", "--chunk-kib",
            "4096"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* chunks = json_class(p, "glibc_mmapped_chunks");
  ASSERT_NE(chunks, nullptr) << p.at("memory_classes").dump(1);
  // Every page of each block touched; the page holding a chunk's tail may not be.
  EXPECT_GE(bytes_of(chunks), least_chunk_bytes(chunks->at("evidence"), 24 * mib));
  EXPECT_LE(bytes_of(chunks), 24 * mib + 12 * page);
  // The eight 1 MiB chunks are under the THP size, the four 4 MiB ones not.
  EXPECT_NEAR(static_cast<double>(bytes_of(chunks, "small_chunk_bytes")), 8.0 * mib, 16.0 * page);
  EXPECT_FALSE(chunks->contains("mount"));
  EXPECT_LT(bytes_of(json_class(p, "anonymous_mmap")), 1 * mib);
}

// A program's own mmap of 1 MiB right below the chunks, merged with them into one record: the
// search for the first header reaches past it, so the chunks are still glibc's.
TEST(DoctorClassesLive, ChunksBehindAMebibyteOfTheProgramsOwnAreFound) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "6", "--chunk-kib", "1024", "--beside-kib", "1024"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* chunks = json_class(p, "glibc_mmapped_chunks");
  ASSERT_NE(chunks, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(chunks->at("evidence"), "chunk headers, by size");
  EXPECT_GE(bytes_of(chunks), least_chunk_bytes(chunks->at("evidence"), 6 * mib));
  EXPECT_LE(bytes_of(chunks), 6 * mib + 12 * page);
  EXPECT_GE(bytes_of(json_class(p, "anonymous_mmap")), 1 * mib) << "its own below the chunks";
}

// Chunks the kernel merged with anonymous neighbours, one below the lowest chunk (the headers
// start past a piece that is none) and one above the highest: still chunks, the neighbours not.
TEST(DoctorClassesLive, ChunksMergedWithNeighboursAreFound) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "6", "--chunk-kib", "1024", "--beside-kib", "40"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* chunks = json_class(p, "glibc_mmapped_chunks");
  ASSERT_NE(chunks, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(chunks->at("evidence"), "chunk headers, by size");
  EXPECT_GE(bytes_of(chunks), least_chunk_bytes(chunks->at("evidence"), 6 * mib));
  EXPECT_LE(bytes_of(chunks), 6 * mib + 12 * page);
  // Six 1 MiB chunks in one record over 2 MiB: under the size the tunable advises, not under
  // the size THP always or a collapse needs.
  EXPECT_EQ(bytes_of(chunks, "small_chunk_bytes"), bytes_of(chunks));
  EXPECT_EQ(bytes_of(chunks, "small_mapping_bytes"), 0u);
  EXPECT_GE(bytes_of(json_class(p, "anonymous_mmap")), 40 * kib);
}

TEST(DoctorClassesLive, ThreadArenasFromMallocInThreads) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--threads", "3", "--thread-kib", "8192"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* arenas = json_class(p, "glibc_thread_arenas");
  ASSERT_NE(arenas, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(bytes_of(arenas), 24 * mib);
  EXPECT_LE(bytes_of(arenas), 24 * mib + 3 * 32 * page);  // each arena's header and top chunk
  EXPECT_EQ(arenas->at("mappings"), 6);                   // a used part and a reserved part each
  EXPECT_LT(arenas->at("largest_mapping_bytes").get<std::size_t>(), 64 * mib);
  EXPECT_EQ(arenas->at("evidence"), "64 MiB-aligned heaps, heap_info");
}

// A program's own 64 MiB blocks on 64 MiB boundaries with a guard page: glibc's layout, but no
// heap_info at their start.
TEST(DoctorClassesLive, AlignedBlocksOfTheProgramAreNoArenas) {
  target t({"--aligned-blocks", "2"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  EXPECT_EQ(json_class(p, "glibc_thread_arenas"), nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(bytes_of(json_class(p, "anonymous_mmap")), 4 * mib);
}

// huge= of the /dev/shm this test sees (the target shares its mounts): read here by hand.
std::string dev_shm_huge() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line, huge;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
    const auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() < 5 || w[4] != "/dev/shm" || dash == w.end() || w.end() - dash < 4) continue;
    huge = "";
    if (dash[1] != "tmpfs") continue;
    const std::string& options = dash[3];
    const auto at = options.find("huge=");
    huge =
        at == std::string::npos ? "never" : options.substr(at + 5, options.find(',', at) - at - 5);
  }
  return huge;
}

// The "Memory by mechanism" section of a table, each of its lines within 100 columns.
std::string mechanism_section(const std::string& table) {
  const auto from = table.find("\nMemory by mechanism");
  if (from == std::string::npos) return "";
  const auto to = table.find("\n\n", from + 1);
  const std::string section = table.substr(from + 1, to - from - 1);
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
  return section;
}

TEST(DoctorClassesLive, MemfdIsSharedAnonymousDevShmFollowsItsMount) {
  const std::string huge = dev_shm_huge();
  if (huge.empty()) HUGEPAGE_SKIP_OR_FAIL("/dev/shm is not a tmpfs mount here");
  target t({"--memfd", "4", "--dev-shm", "6"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* shared = json_class(p, "shared_anonymous");
  ASSERT_NE(shared, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(bytes_of(shared), 4 * mib);
  EXPECT_LE(bytes_of(shared), 4 * mib + 4 * page);
  EXPECT_FALSE(shared->contains("mount"));
  const auto* shm = json_class(p, "tmpfs_file", "/dev/shm");
  ASSERT_NE(shm, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(bytes_of(shm), 6 * mib);
  EXPECT_EQ(shm->at("mount_huge"), huge);
  EXPECT_EQ(shm->at("mappings"), 1);

  const result prom = doctor({"--pid", std::to_string(t.pid()), "--format", "prometheus"});
  ASSERT_TRUE(prom.code == 0 || prom.code == 1) << prom.err;
  EXPECT_EQ(doctor_cli::exposition_problem(prom.out), "") << prom.out;
  const std::string pid = std::to_string(t.pid());
  EXPECT_NE(prom.out.find("hugepage_doctor_process_class_resident_bytes{pid=\"" + pid +
                          "\",class=\"tmpfs_file\",mount=\"/dev/shm\"} 6291456\n"),
            std::string::npos)
      << prom.out;
  EXPECT_NE(prom.out.find("hugepage_doctor_process_class_huge_bytes{pid=\"" + pid +
                          "\",class=\"shared_anonymous\"} "),
            std::string::npos)
      << prom.out;

  const result table = doctor({"--pid", pid});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  const std::string section = mechanism_section(table.out);
  EXPECT_NE(section.find("tmpfs_file"), std::string::npos) << table.out;
  EXPECT_NE(section.find("/dev/shm huge=" + huge), std::string::npos) << table.out;
  EXPECT_NE(section.find("shared_anonymous"), std::string::npos) << table.out;
}

// The target's own mounts, not the doctor's: a tmpfs with huge=within_size over /dev/shm in a
// mount namespace of the target's.
TEST(DoctorClassesLive, TmpfsOptionComesFromTheTargetsMounts) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("mounting a tmpfs needs root");
  target t({"--shm-mount", "huge=within_size,size=16m", "--shm-bind", "/mnt", "--dev-shm", "2"});
  ASSERT_TRUE(t.ready()) << t.line();
  const nlohmann::json p = process_json(t.pid());
  const auto* shm = json_class(p, "tmpfs_file", "/dev/shm");
  ASSERT_NE(shm, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_EQ(shm->at("mount_huge"), "within_size");
  EXPECT_EQ(bytes_of(shm), 2 * mib);
  // Bound on /mnt too: a remount there changes this /dev/shm.
  EXPECT_EQ(shm->at("same_superblock"), nlohmann::json::array({"/mnt"}));
}

// A container's /dev/shm (a mount namespace of the target's, huge=never): the remount acts in
// the target's namespace (nsenter), and no line goes into the host's /etc/fstab.
TEST(DoctorClassesLive, AContainersMountIsRemountedInsideItsNamespace) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("mounting a tmpfs needs root");
  target t({"--shm-mount", "size=400m", "--dev-shm", "300"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const nlohmann::json* a = nullptr;
  for (const auto& one : doc.at("advice")) {
    if (one.at("id") == "tmpfs_mount_without_huge") a = &one;
  }
  ASSERT_NE(a, nullptr) << doc.at("advice").dump(1);
  EXPECT_EQ(a->at("commands"),
            nlohmann::json::array({"nsenter -t " + std::to_string(t.pid()) +
                                   " -m mount -o remount,huge=within_size /dev/shm"}));
  const std::string message = a->at("message");
  EXPECT_NE(message.find("a mount namespace of its own"), std::string::npos) << message;
  EXPECT_NE(message.find("the host's /etc/fstab does not reach it"), std::string::npos) << message;
}

TEST(DoctorClassesLive, SmallChunksAreSaidInTheTable) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  target t({"--malloc-chunks", "6", "--chunk-kib", "1024"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result table = doctor({"--pid", std::to_string(t.pid())});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  const std::string section = mechanism_section(table.out);
  const auto row = section.find("  glibc_mmapped_chunks ");
  ASSERT_NE(row, std::string::npos) << table.out;
  const std::string line = section.substr(row, section.find('\n', row) - row);
  EXPECT_NE(line.find("chunks under 2 MiB"), std::string::npos) << line;
}

// A doctor whose process_vm_readv fails (a seccomp filter makes it EPERM, as for a target it may
// read the smaps of but not attach to) still classifies, and says why chunks are not told apart.
TEST(DoctorClassesLive, UnreadableHeadersLeaveChunksInAnonymousMmap) {
  target t({"--malloc-chunks", "4", "--chunk-kib", "4096"});
  ASSERT_TRUE(t.ready()) << t.line();
  doctor_cli::run_options o;
  o.in_child = [] {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
    return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
  };
  const nlohmann::json p = process_json(t.pid(), o);
  EXPECT_EQ(json_class(p, "glibc_mmapped_chunks"), nullptr) << p.at("memory_classes").dump(1);
  const auto* anon = json_class(p, "anonymous_mmap");
  ASSERT_NE(anon, nullptr);
  EXPECT_GE(bytes_of(anon), 16 * mib);
  EXPECT_EQ(anon->at("evidence"), "chunk headers unreadable (EPERM)");
}

TEST(DoctorClassesLive, SaysWhoDisabledThp) {
  {
    target t({"--anon", "1"});
    ASSERT_TRUE(t.ready()) << t.line();
    EXPECT_EQ(process_json(t.pid()).at("thp_disabled_by"), "none");
  }
  {
    target t({"--thp-disable", "1"});
    ASSERT_TRUE(t.ready()) << t.line();
    EXPECT_EQ(process_json(t.pid()).at("thp_disabled_by"), "process");
    const result table = doctor({"--pid", std::to_string(t.pid())});
    EXPECT_NE(table.out.find("THP disabled by             the process"), std::string::npos)
        << table.out;
  }
  {
    // Set in this test process, the target's parent, while it starts the target and while the
    // doctor reads both: the target inherits it.
    ASSERT_EQ(::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), 0);
    target t({"--anon", "1"});
    const bool ready = t.ready();
    const nlohmann::json p = ready ? process_json(t.pid()) : nlohmann::json{};
    ::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
    ASSERT_TRUE(ready) << t.line();
    EXPECT_EQ(p.at("thp_enabled"), false);
    EXPECT_EQ(p.at("thp_disabled_by"), "inherited");
  }
}

// ---- --capture ---------------------------------------------------------------------------------

// A fresh directory under /tmp, removed with what is in it (one level) at the end.
class scratch_dir {
 public:
  scratch_dir() {
    char path[] = "/tmp/hugepage-capture.XXXXXX";
    if (::mkdtemp(path) != nullptr) path_ = path;
  }
  ~scratch_dir() { remove_tree(path_); }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  static void remove_tree(const std::string& dir) {
    if (dir.empty()) return;
    for (const std::string& name : entries(dir)) {
      const std::string p = dir + "/" + name;
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(p);
      } else {
        ::unlink(p.c_str());
      }
    }
    ::rmdir(dir.c_str());
  }
  std::string path_;

 public:
  // The names in `dir` but . and .., sorted; empty when it cannot be read.
  static std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") out.push_back(name);
      }
      ::closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DoctorCapture, ALiveCaptureRebuildsTheLiveClasses) {
  if (hugepage::test::under_asan()) GTEST_SKIP() << asan_malloc;
  const std::vector<std::string> env{"PATH=/usr/bin:/bin", "CAPTURE_TEST_SECRET=s3cret"};
  target t({"--malloc-chunks", "8", "--chunk-kib", "4096"}, "", &env);
  ASSERT_TRUE(t.ready()) << t.line();
  scratch_dir scratch;
  ASSERT_FALSE(scratch.path().empty());
  const std::string dir = scratch.path() + "/capture";  // not there yet: the doctor creates it
  const result captured = doctor({"--pid", std::to_string(t.pid()), "--json", "--capture", dir});
  ASSERT_TRUE(captured.code == 0 || captured.code == 1) << captured.err;
  EXPECT_TRUE(nlohmann::json::accept(captured.out)) << captured.out;  // printed as usual
  const nlohmann::json live = process_json(t.pid());

  std::string error;
  const auto loaded = hd::read_capture(dir, error);
  ASSERT_TRUE(loaded.has_value()) << error;
  EXPECT_EQ(loaded->pid, t.pid());
  ASSERT_TRUE(loaded->files.chunks.read) << loaded->files.chunks.evidence;
  const hd::process_report p = hd::build_process_report(loaded->pid, loaded->files, 10, "");
  ASSERT_EQ(p.classes.size(), live.at("memory_classes").size())
      << live.at("memory_classes").dump(1);
  for (const auto& c : live.at("memory_classes")) {
    const std::string name = c.at("class");
    SCOPED_TRACE(name);
    const hd::memory_class_usage* mine = nullptr;
    for (const auto& m : p.classes) {
      if (name == hd::name_of(m.kind) && m.mount == c.value("mount", "")) mine = &m;
    }
    ASSERT_NE(mine, nullptr);
    EXPECT_NEAR(static_cast<double>(mine->resident),
                static_cast<double>(c.at("resident_bytes").get<std::size_t>()), 8.0 * page);
    EXPECT_EQ(mine->evidence, c.at("evidence"));
  }
  const auto* chunks = find(p.classes, memory_class::glibc_mmapped_chunks);
  ASSERT_NE(chunks, nullptr);
  EXPECT_GE(chunks->resident, least_chunk_bytes(chunks->evidence, 32 * mib));

  // The files, private: the environment holds secrets.
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  const std::vector<std::string> names = scratch_dir::entries(dir);
  for (const char* expected : {"smaps", "status", "stat", "cmdline", "environ", "cgroup",
                               "mountinfo", "parent_status", "chunks"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const std::string& name : names) {
    ASSERT_EQ(::lstat((dir + "/" + name).c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << name;
    EXPECT_EQ(st.st_mode & 07777, 0600u) << name;
  }
  EXPECT_NE(read_all(dir + "/environ").find("CAPTURE_TEST_SECRET=s3cret"), std::string::npos);
  EXPECT_EQ(read_all(dir + "/chunks").rfind("read\n", 0), 0u) << read_all(dir + "/chunks");
}

TEST(DoctorCapture, RefusesWhatItCannotWriteWhollyAndKeepsNothing) {
  target t({"--anon", "1"});
  ASSERT_TRUE(t.ready()) << t.line();
  const std::string pid = std::to_string(t.pid());
  scratch_dir scratch;
  ASSERT_FALSE(scratch.path().empty());
  const auto expect_refused = [&](const std::string& dir, const std::string& why,
                                  const doctor_cli::run_options& o = {}) {
    const result r = doctor({"--pid", pid, "--capture", dir}, o);
    EXPECT_EQ(r.code, hd::exit_error) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("hugepage-doctor: --capture " + dir + ": " + why), std::string::npos)
        << r.err;
  };
  // Not empty: one process per capture, never files of two mixed.
  const std::string full = scratch.path() + "/full";
  ASSERT_EQ(::mkdir(full.c_str(), 0700), 0);
  std::ofstream(full + "/mine") << "x";
  expect_refused(full, "not empty");
  EXPECT_EQ(scratch_dir::entries(full), std::vector<std::string>{"mine"});
  // A symbolic link planted where the directory goes is not followed.
  const std::string real = scratch.path() + "/real", link = scratch.path() + "/link";
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  expect_refused(link, "not a directory (a symbolic link is refused)");
  EXPECT_TRUE(scratch_dir::entries(real).empty());
  // "link/": the kernel would follow the link whatever O_NOFOLLOW says.
  expect_refused(link + "/", "a path that ends in '/' (name the directory without it)");
  EXPECT_TRUE(scratch_dir::entries(real).empty());
  // A parent that is a file.
  expect_refused(full + "/mine/capture", "Not a directory");
  // A write that fails midway (files limited to 4 KiB, smaps is larger): nothing is kept, and
  // the directory the doctor made is gone; an empty directory it was given stays, empty.
  doctor_cli::run_options small;
  small.in_child = [] {
    const rlimit limit{4096, 4096};
    return std::signal(SIGXFSZ, SIG_IGN) != SIG_ERR && ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  };
  const std::string fresh = scratch.path() + "/fresh";
  expect_refused(fresh, "cannot write smaps: File too large (nothing kept)", small);
  EXPECT_NE(::access(fresh.c_str(), F_OK), 0);
  const std::string given = scratch.path() + "/given";
  ASSERT_EQ(::mkdir(given.c_str(), 0700), 0);
  expect_refused(given, "cannot write smaps: File too large (nothing kept)", small);
  EXPECT_TRUE(scratch_dir::entries(given).empty());
  // --capture without --pid is a usage error.
  const result alone = doctor({"--capture", given});
  EXPECT_EQ(alone.code, hd::exit_error);
  EXPECT_NE(alone.err.find("--capture requires --pid"), std::string::npos) << alone.err;
}

}  // namespace
