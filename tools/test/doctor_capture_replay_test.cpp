// tools/test/doctor_capture_replay_test.cpp - a capture replays to the live report: the report
// built from a process's capture (read_capture, build_process_report) is the JSON document the
// doctor printed live when it took the capture, NUMA split, mapping coverage, glibc version and
// package included.
//
// The one field left out of the comparison is process.elapsed_seconds (the table's "took" time):
// the time the doctor spent reading the live process (tools/README.md), which a replay does not
// spend.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
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
