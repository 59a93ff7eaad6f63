// tools/test/doctor_capture_replay_test.cpp - a capture replays to the live report: the report
// built from a process's capture (read_capture, build_process_report) is the JSON document the
// doctor printed live when it took the capture, NUMA split, mapping coverage, glibc version and
// package included.
//
// The one field left out of the comparison is process.elapsed_seconds (the table's "took" time):
// the time the doctor spent reading the live process (tools/README.md), which a replay does not
// spend.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "advise_process.hpp"
#include "capture.hpp"
#include "collect_process.hpp"
#include "collect_system.hpp"
#include "doctor_cli_support.hpp"
#include "process_report.hpp"
#include "read_text.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "system_report.hpp"

namespace {

namespace hd = hugepage::doctor;
using doctor_cli::result;
using hugepage::test::target;

// A directory under /tmp, removed with its files when destroyed (a capture is one level deep).
class capture_dir {
 public:
  capture_dir() {
    char path[] = "/tmp/hugepage-replay-XXXXXX";
    if (::mkdtemp(path) != nullptr) parent_ = path;
  }
  ~capture_dir() {
    if (parent_.empty()) return;
    if (DIR* d = ::opendir(path().c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") ::unlink((path() + "/" + name).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path().c_str());
    ::rmdir(parent_.c_str());
  }
  capture_dir(const capture_dir&) = delete;
  capture_dir& operator=(const capture_dir&) = delete;
  bool made() const { return !parent_.empty(); }
  /// Not there until the doctor creates it.
  std::string path() const { return parent_ + "/capture"; }

 private:
  std::string parent_;
};

// The document without the fields a replay cannot repeat (see the top of this file).
nlohmann::json without_time(nlohmann::json doc) {
  doc.at("process").erase("elapsed_seconds");
  return doc;
}

// The live document's facts that only collection adds: present, so that the comparison covers
// them.
void expect_collected_facts(const nlohmann::json& process) {
  // NUMA: from numa_maps, or from smaps on a machine with one node (a kernel without NUMA has
  // neither, and no split to replay).
  if (::access("/proc/self/numa_maps", R_OK) == 0 ||
      ::access("/sys/devices/system/node/node0", F_OK) == 0) {
    EXPECT_FALSE(process.at("numa").empty()) << process.at("numa").dump();
  }
  EXPECT_FALSE(process.at("mapping_coverage").empty());
  const nlohmann::json& allocator = process.at("allocator");
  EXPECT_EQ(allocator.at("name"), "glibc");
  EXPECT_TRUE(allocator.at("version").is_string()) << allocator.dump();
}

// A target with THP, glibc mmapped chunks and plain anonymous memory.
const std::vector<std::string> target_args{"--thp",       "64",   "--malloc-chunks", "4",
                                           "--chunk-kib", "4096", "--anon",          "8"};

TEST(DoctorCaptureReplay, ACaptureReplaysToTheJsonPrintedWhenItWasTaken) {
  target t(target_args);
  ASSERT_TRUE(t.ready()) << t.line();
  capture_dir dir;
  ASSERT_TRUE(dir.made());
  const result r =
      doctor_cli::doctor({"--pid", std::to_string(t.pid()), "--json", "--capture", dir.path()});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json live = nlohmann::json::parse(r.out);
  expect_collected_facts(live.at("process"));

  std::string error;
  const auto captured = hd::read_capture(dir.path(), error);
  ASSERT_TRUE(captured.has_value()) << error;
  const hd::process_report replayed =
      hd::build_process_report(captured->pid, captured->files, 10, "");
  // The system as it is now: the capture stores the process, not the machine, so its part of
  // the document (counters, free memory) is the machine's at the time of each run, and is left
  // out here; the in-process test below compares whole documents over one system.
  const hd::system_report system = hd::collect_system("", false);
  const nlohmann::json again = nlohmann::json::parse(
      hd::json_process(replayed, system, hd::advise_process(replayed, system)));
  EXPECT_EQ(without_time(again).at("process"), without_time(live).at("process"));
}

// One memfd mapped twice, written only through the view mapped first: the capture keeps where
// each view is resident, and the replay counts the memory once where it is, as the live run did.
TEST(DoctorCaptureReplay, ViewsReplayWithTheResidencyTheLiveRunRead) {
  target t({"--memfd", "64", "--memfd-views", "2", "--memfd-touch-view", "1"});
  ASSERT_TRUE(t.ready()) << t.line();
  capture_dir dir;
  ASSERT_TRUE(dir.made());
  const result r =
      doctor_cli::doctor({"--pid", std::to_string(t.pid()), "--json", "--capture", dir.path()});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json live = nlohmann::json::parse(r.out);
  EXPECT_GE(live.at("process").at("shmem_bytes").get<std::size_t>(), 64u << 20);
  EXPECT_EQ(::access((dir.path() + "/views").c_str(), R_OK), 0);
  std::string error;
  const auto captured = hd::read_capture(dir.path(), error);
  ASSERT_TRUE(captured.has_value()) << error;
  const hd::process_report replayed =
      hd::build_process_report(captured->pid, captured->files, 10, "");
  const hd::system_report system = hd::collect_system("", false);
  const nlohmann::json again = nlohmann::json::parse(
      hd::json_process(replayed, system, hd::advise_process(replayed, system)));
  EXPECT_EQ(without_time(again).at("process"), without_time(live).at("process"));
}

TEST(DoctorCaptureReplay, AWholeDocumentReplaysOverTheSameSystem) {
  target t(target_args);
  ASSERT_TRUE(t.ready()) << t.line();
  capture_dir dir;
  ASSERT_TRUE(dir.made());
  hd::collect_failure failure;
  hd::process_files files;
  const auto live = hd::collect_process(t.pid(), 10, failure, &files);
  ASSERT_TRUE(live.has_value()) << failure.message;
  const std::string stat = hd::read_text("", "/proc/" + std::to_string(t.pid()) + "/stat").value();
  ASSERT_EQ(hd::write_capture(dir.path(), files, stat), "");

  std::string error;
  const auto captured = hd::read_capture(dir.path(), error);
  ASSERT_TRUE(captured.has_value()) << error;
  EXPECT_EQ(captured->pid, t.pid());
  const hd::process_report replayed =
      hd::build_process_report(captured->pid, captured->files, 10, "");
  const hd::system_report system = hd::collect_system("", false);
  const nlohmann::json live_doc =
      nlohmann::json::parse(hd::json_process(*live, system, hd::advise_process(*live, system)));
  const nlohmann::json replayed_doc = nlohmann::json::parse(
      hd::json_process(replayed, system, hd::advise_process(replayed, system)));
  expect_collected_facts(live_doc.at("process"));
  EXPECT_EQ(without_time(replayed_doc), without_time(live_doc));
  // The table too, which shows the allocator's package (the JSON does not): the same text but
  // for the time spent reading.
  hd::process_report timed = replayed;
  timed.seconds = live->seconds;
  EXPECT_EQ(hd::render_process(timed, system, hd::advise_process(timed, system)),
            hd::render_process(*live, system, hd::advise_process(*live, system)));
  if (live->allocator.guess.package.empty()) {
    HUGEPAGE_SKIP_OR_FAIL("this machine's libc is no Debian package: no package to replay");
  }
}

}  // namespace

namespace {

// A capture copied from tools/test/data/services/glibc into `dir`, with `name` holding `text`.
void copy_with(const std::string& dir, const char* name, const std::string& text) {
  const std::string from = std::string(HUGEPAGE_DOCTOR_DATA) + "/services/glibc/";
  for (const char* file : {"smaps", "stat", "status"}) {
    std::ifstream in(from + file, std::ios::binary);
    std::ofstream(dir + "/" + file, std::ios::binary) << in.rdbuf();
  }
  std::ofstream(dir + "/" + name, std::ios::binary) << text;
}

TEST(DoctorCaptureReplay, TheStoredFactsReadBackAsWritten) {
  std::ifstream in(std::string(HUGEPAGE_DOCTOR_DATA) + "/services/glibc/smaps");
  std::ostringstream smaps;
  smaps << in.rdbuf();
  const std::vector<hugepage::mapping_info> mappings = hugepage::parse_smaps(smaps.str());
  ASSERT_GE(mappings.size(), 2u);
  std::vector<hd::mapping_coverage> coverage(2);
  coverage[0].mapping = mappings[0];
  coverage[0].exact.bytes = mappings[0].size();
  coverage[0].exact.base = 8192;
  coverage[0].exact.source = hugepage::backing_source::smaps;
  coverage[0].exact.exact = true;
  coverage[1].mapping = mappings[1];
  coverage[1].exact.thp = 2 * 1024 * 1024;
  coverage[1].exact.source = hugepage::backing_source::pagemap_scan;
  coverage[1].exact.note = "a note with spaces";
  coverage[1].smaps_huge = 4096;
  coverage[1].smaps_disagrees = true;
  const auto back = hd::parse_coverage(hd::coverage_text(coverage), mappings);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*back)[i].mapping.start, coverage[i].mapping.start);
    EXPECT_EQ((*back)[i].exact.bytes, coverage[i].exact.bytes);
    EXPECT_EQ((*back)[i].exact.base, coverage[i].exact.base);
    EXPECT_EQ((*back)[i].exact.thp, coverage[i].exact.thp);
    EXPECT_EQ((*back)[i].exact.source, coverage[i].exact.source);
    EXPECT_EQ((*back)[i].exact.exact, coverage[i].exact.exact);
    EXPECT_EQ((*back)[i].exact.note, coverage[i].exact.note);
    EXPECT_EQ((*back)[i].smaps_huge, coverage[i].smaps_huge);
    EXPECT_EQ((*back)[i].smaps_disagrees, coverage[i].smaps_disagrees);
  }
  const std::map<std::string, std::pair<std::string, std::string>> packages{
      {"/usr/lib/x86_64-linux-gnu/libc.so.6", {"libc6", "2.36-9+deb12u14"}},
      {"/opt/a dir/libjemalloc.so.2", {"libjemalloc2", "5.3.0-1"}}};
  EXPECT_EQ(hd::parse_packages(hd::packages_text(packages)), packages);
}

TEST(DoctorCaptureReplay, AMalformedStoredFactIsAnErrorNamingItsFile) {
  const struct {
    const char* name;
    std::string text;
    std::string error;
  } cases[] = {
      {"coverage", "1000 1 2\n", "/coverage: not the coverage format, or a mapping not in smaps"},
      {"coverage", "1 0 0 0 0 0 0 0 0 0 0 0 smaps exact 0 agrees\n",
       "/coverage: not the coverage format, or a mapping not in smaps"},
      {"numa_node", "zero\n", "/numa_node: not a node number"},
      {"views", "1 0-1000\n", "/views: not the views format, or a mapping not in smaps"},
      {"views", "", "/views: not the views format, or a mapping not in smaps"},
      {"glibc_version", "", "/glibc_version: not one line"},
      {"packages", "libc6 /usr/lib/libc.so.6\n", "/packages: not the packages format"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name + (": " + c.text));
    capture_dir dir;
    ASSERT_TRUE(dir.made());
    ASSERT_EQ(::mkdir(dir.path().c_str(), 0700), 0);
    copy_with(dir.path(), c.name, c.text);
    std::string error;
    EXPECT_FALSE(hd::read_capture(dir.path(), error).has_value());
    EXPECT_EQ(error, dir.path() + c.error);
  }
}

}  // namespace

namespace {

// A target with glibc thread arenas (two threads, arena_max=2) beside mmapped chunks,
// THP and plain anonymous memory.
TEST(DoctorCaptureReplay, ThreadArenasReplayWithTheHeapInfoTheLiveRunRead) {
  const std::vector<std::string> env{"PATH=/usr/bin:/bin",
                                     "GLIBC_TUNABLES=glibc.malloc.arena_max=2"};
  target t({"--thp", "64", "--anon", "32", "--malloc-chunks", "20", "--chunk-kib", "4096",
            "--threads", "2", "--thread-kib", "1024"},
           "", &env);
  ASSERT_TRUE(t.ready()) << t.line();
  capture_dir dir;
  ASSERT_TRUE(dir.made());
  const result r =
      doctor_cli::doctor({"--pid", std::to_string(t.pid()), "--json", "--capture", dir.path()});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json live = nlohmann::json::parse(r.out);
  // The live run read the heaps' heap_info: the class this test is about is there, checked.
  const nlohmann::json& classes = live.at("process").at("memory_classes");
  const auto arenas = std::find_if(classes.begin(), classes.end(), [](const nlohmann::json& c) {
    return c.at("class") == "glibc_thread_arenas";
  });
  ASSERT_NE(arenas, classes.end()) << classes.dump(1);
  EXPECT_EQ(arenas->at("evidence"), "64 MiB-aligned heaps, heap_info");

  std::string error;
  const auto captured = hd::read_capture(dir.path(), error);
  ASSERT_TRUE(captured.has_value()) << error;
  EXPECT_TRUE(captured->files.chunks.heaps_read);
  EXPECT_FALSE(captured->files.chunks.heaps.empty());
  const hd::process_report replayed =
      hd::build_process_report(captured->pid, captured->files, 10, "");
  const hd::system_report system = hd::collect_system("", false);
  const nlohmann::json again = nlohmann::json::parse(
      hd::json_process(replayed, system, hd::advise_process(replayed, system)));
  EXPECT_EQ(without_time(again).at("process"), without_time(live).at("process"));
}

TEST(DoctorCaptureReplay, TheHeapsReadBackAsWritten) {
  hd::chunk_headers chunks;
  chunks.read = true;
  chunks.heaps_read = true;
  chunks.heaps = {0x7f3a28000000, 0x7f3a2c000000};
  chunks.mappings = {{0x7f3a30000000, {4198400, 4198400}}};
  const auto back = hd::parse_chunks(hd::chunks_text(chunks));
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->heaps_read);
  EXPECT_EQ(back->heaps, chunks.heaps);
  ASSERT_EQ(back->mappings.size(), 1u);
  EXPECT_EQ(back->mappings[0].chunks, chunks.mappings[0].chunks);
  // Read, none checked out: still read (the layout alone does not decide).
  chunks.heaps.clear();
  const auto none = hd::parse_chunks(hd::chunks_text(chunks));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->heaps_read);
  EXPECT_TRUE(none->heaps.empty());
  // A capture from before the heaps line: not read.
  const auto older = hd::parse_chunks("read\n7f3a30000000 4198400\n");
  ASSERT_TRUE(older.has_value());
  EXPECT_FALSE(older->heaps_read);
  EXPECT_FALSE(hd::parse_chunks("read\nheaps 7f3a2c000000 7f3a28000000\n").has_value());
  EXPECT_FALSE(hd::parse_chunks("read\nheaps zz\n").has_value());
}

// The smaps of tools/test/data/services/glibc.
std::string glibc_smaps() {
  std::ifstream in(std::string(HUGEPAGE_DOCTOR_DATA) + "/services/glibc/smaps", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DoctorCaptureReplay, ADamagedStoredFileIsAnErrorNamingItsFile) {
  const std::string smaps = glibc_smaps();
  ASSERT_FALSE(smaps.empty());
  const std::string first_line = smaps.substr(0, smaps.find('\n'));
  const struct {
    const char* name;
    std::string text;
    std::string error;
  } cases[] = {
      // Cut mid-number: "4096" read as "40" otherwise.
      {"chunks", "read\n7f3a30000000 40", "/chunks: not the chunks format"},
      {"chunks", "read", "/chunks: not the chunks format"},
      {"coverage", "", "/coverage: not the coverage format, or a mapping not in smaps"},
      {"numa_node", "0", "/numa_node: not a node number"},
      {"glibc_version", "\x1b[2J\x1b]0;pwn\x07 2.36\n",
       "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)"},
      {"glibc_version", "99999999999999999999.36\n",
       "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)"},
      {"glibc_version", "-2.36\n",
       "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)"},
      {"glibc_version", std::string("2.3\0006\n", 6),
       "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)"},
      {"glibc_version", "2.36", "/glibc_version: not one line"},
      {"glibc_version", "2.36.1.2\n",
       "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)"},
      {"glibc_version", "2..36\n",
       "/glibc_version: not a glibc version (digits.digits, or digits.digits.digits)"},
      {"packages",
       "libc6 \x1b]0;pwn\x07"
       "evil /usr/lib/x86_64-linux-gnu/libc.so.6\n",
       "/packages: not the packages format"},
      {"packages", "libc6 2.36-9 /usr/lib/\x1b[2Jlibc.so.6\n",
       "/packages: not the packages format"},
      {"packages", "libc6 2.36-9 libc.so.6\n", "/packages: not the packages format"},
      {"packages", "libc6 2.36-9 /usr/lib/x86_64-linux-gnu/libc.so",
       "/packages: not the packages format"},
      // smaps damaged: smaps is named, not the coverage read against it.
      {"smaps", "", "/smaps: not the smaps format"},
      {"smaps", smaps.substr(0, smaps.size() / 2), "/smaps: not the smaps format"},
      {"smaps", "zz%s\xff\xfe garbage\n", "/smaps: not the smaps format"},
      {"smaps", first_line + "\nRss:  -4 kB\nVmFlags: rd wr\n", "/smaps: not the smaps format"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name + (": " + c.text));
    capture_dir dir;
    ASSERT_TRUE(dir.made());
    ASSERT_EQ(::mkdir(dir.path().c_str(), 0700), 0);
    copy_with(dir.path(), c.name, c.text);
    std::string error;
    EXPECT_FALSE(hd::read_capture(dir.path(), error).has_value());
    EXPECT_EQ(error, dir.path() + c.error);
  }
  // The good stored facts still read (the cases above differ from them in the damage only).
  capture_dir dir;
  ASSERT_TRUE(dir.made());
  ASSERT_EQ(::mkdir(dir.path().c_str(), 0700), 0);
  copy_with(dir.path(), "packages", "libc6 2.36-9+deb12u14 /usr/lib/x86_64-linux-gnu/libc.so.6\n");
  std::ofstream(dir.path() + "/glibc_version") << "2.36\n";
  std::ofstream(dir.path() + "/chunks") << "read\nheaps\n";
  std::string error;
  const auto good = hd::read_capture(dir.path(), error);
  ASSERT_TRUE(good.has_value()) << error;
  EXPECT_EQ(good->files.glibc_version, "2.36");
  // A development glibc reports three groups (gnu_get_libc_version() on a 2.41 snapshot).
  std::ofstream(dir.path() + "/glibc_version", std::ios::trunc) << "2.40.9000\n";
  const auto development = hd::read_capture(dir.path(), error);
  ASSERT_TRUE(development.has_value()) << error;
  EXPECT_EQ(development->files.glibc_version, "2.40.9000");
  EXPECT_EQ(good->files.packages.at("/usr/lib/x86_64-linux-gnu/libc.so.6").second,
            "2.36-9+deb12u14");
}

TEST(DoctorCaptureReplay, AFifoInACaptureIsAnErrorNotAHang) {
  capture_dir dir;
  ASSERT_TRUE(dir.made());
  ASSERT_EQ(::mkdir(dir.path().c_str(), 0700), 0);
  copy_with(dir.path(), "cmdline", "x");
  const std::string fifo = dir.path() + "/status";
  ASSERT_EQ(::unlink(fifo.c_str()), 0);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string error;
  auto read = std::async(std::launch::async, [&] { return hd::read_capture(dir.path(), error); });
  if (read.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Blocked opening the FIFO: a writer that closes at once lets it go on.
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    read.wait();
    FAIL() << "read_capture blocked on a FIFO";
  }
  EXPECT_FALSE(read.get().has_value());
  EXPECT_EQ(error, fifo + ": not a regular file");
}

TEST(DoctorCaptureReplay, StoredTextsReachTheTableOnlyAsPrintableText) {
  hd::process_report p;
  p.pid = 1;
  p.allocator.guess.name = "glibc";
  p.allocator.guess.version = "\x1b[2J";
  p.allocator.guess.package = "libc6 \x1b]0;pwn\x07";
  p.allocator.hugepage_mode = "thp:\x1b[1m";
  p.runtime.kind = "jvm";
  p.runtime.version = "17\x1b[0m";
  p.runtime.package = "openjdk \x9b";
  p.runtime.settings_known = true;
  p.runtime.settings = {"-XX:+UseLargePages\x07"};
  const std::string table = hd::render_process(p, hd::system_report{}, std::vector<hd::advice>{});
  for (const char c : table) {
    EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << static_cast<int>(c);
  }
  EXPECT_NE(table.find("glibc \\x1b[2J"), std::string::npos) << table;
  EXPECT_NE(table.find("libc6 \\x1b]0;pwn\\x07"), std::string::npos) << table;
  EXPECT_NE(table.find("openjdk \\x9b"), std::string::npos) << table;
}

}  // namespace
