// tools/test/doctor_cli_report_test.cpp - the system and process reports of the real binary: a
// process with known memory (hugepage-doctor-target) reported within 1%, large processes.
#include <sys/resource.h>

#include <fstream>

#include "doctor_cli_support.hpp"
#include "hugepage/backing.hpp"
#include "hugepage/kernel_counters.hpp"

namespace {

using namespace doctor_cli;

TEST(DoctorCli, SystemReportAndJson) {
  const result table = doctor({});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  EXPECT_NE(table.out.find("Transparent huge pages"), std::string::npos);
  EXPECT_NE(table.out.find("hugetlb pools"), std::string::npos);
  EXPECT_NE(table.out.find("MADV_COLLAPSE"), std::string::npos);
  EXPECT_NE(table.out.find("hardware counters"), std::string::npos);
  // Exit 1 exactly when a warning is printed; notes alone leave it 0.
  EXPECT_EQ(table.code == 1, table.out.find(". warning: ") != std::string::npos) << table.out;

  const result json = doctor({"--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  EXPECT_TRUE(valid_json(json.out)) << json.out;
  EXPECT_NE(json.out.find("\"schema\": \"hugepage-doctor/1\""), std::string::npos);
  EXPECT_NE(json.out.find("\"mode\": \"system\""), std::string::npos);
  EXPECT_NE(json.out.find("\"exit_code\": " + std::to_string(json.code)), std::string::npos);
  EXPECT_TRUE(json.err.empty()) << json.err;
}

// The doctor reports the effective PMD-size THP mode, and advises on it, where the per-size
// switch and the top-level one disagree (set for real; put back when the test ends).
TEST(DoctorCli, ReportsTheEffectiveThpModeOfBothSwitches) {
  const hugepage::test::thp_switches switches;
  if (!switches.why_unusable().empty()) {
    if (::geteuid() != 0 && !switches.per_size_absent()) GTEST_SKIP() << switches.why_unusable();
    if (required()) FAIL() << "HUGEPAGE_REQUIRE=1, but: " << switches.why_unusable();
    GTEST_SKIP() << switches.why_unusable();
  }
  const std::string kb = std::to_string(hugepage::thp_page_bytes() / 1024);
  struct combination {
    const char* top;
    const char* per_size;
    const char* effective;
  };
  for (const combination& c :
       {combination{"madvise", "never", "never"}, combination{"never", "madvise", "madvise"}}) {
    SCOPED_TRACE(std::string("enabled=") + c.top + ", per-size=" + c.per_size);
    ASSERT_TRUE(switches.set(c.top, c.per_size)) << std::strerror(errno);
    const result table = doctor({});
    ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
    EXPECT_NE(table.out.find(kb + "kB enabled  " + c.per_size + "\n"), std::string::npos)
        << table.out;
    EXPECT_NE(table.out.find(std::string("effective       ") + c.effective + " "),
              std::string::npos)
        << table.out;
    const bool off = std::string(c.effective) == "never";
    EXPECT_EQ(table.out.find("THP is off") != std::string::npos, off) << table.out;
    if (off) {
      // The command turns the per-size switch back to the top-level setting.
      EXPECT_NE(table.out.find("echo inherit > /sys/kernel/mm/transparent_hugepage/hugepages-" +
                               kb + "kB/enabled"),
                std::string::npos)
          << table.out;
    }
    const result json = doctor({"--json"});
    ASSERT_TRUE(valid_json(json.out)) << json.out;
    const auto thp = nlohmann::json::parse(json.out).at("system").at("thp");
    EXPECT_EQ(thp.at("enabled"), c.top);
    EXPECT_EQ(thp.at("pmd_enabled"), c.per_size);
    EXPECT_EQ(thp.at("effective"), c.effective);
  }
}

class DoctorKnownProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    process_ = std::make_unique<target>(std::vector<std::string>{"--thp", "64", "--hugetlb", "16"});
    if (!process_->ready()) {
      if (required()) FAIL() << "target failed: " << process_->line();
      GTEST_SKIP() << "target could not map its memory: " << process_->line();
    }
    if (static_cast<double>(process_->value("thp_bytes")) < mib * 64 * 0.99) {
      if (required()) FAIL() << "kernel gave little THP: " << process_->line();
      GTEST_SKIP() << "the kernel gave the target little THP (fragmented?): " << process_->line();
    }
  }
  static constexpr double mib = hugepage::units::mib;
  std::unique_ptr<target> process_;
};

TEST_F(DoctorKnownProcess, TableWithinOnePercent) {
  const result r = doctor({"--pid", std::to_string(process_->pid())});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_NEAR(table_bytes(r.out, "on THP"), 64 * mib, 0.64 * mib) << r.out;
  EXPECT_NEAR(table_bytes(r.out, "on hugetlb 2 MiB"), 16 * mib, 0.16 * mib) << r.out;
  EXPECT_GE(table_bytes(r.out, "resident (RSS)"), 64 * mib) << r.out;
  EXPECT_NE(r.out.find("glibc"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/anon_hugepage"), std::string::npos) << r.out;
}

TEST_F(DoctorKnownProcess, JsonWithinOnePercent) {
  const result r = doctor({"--pid", std::to_string(process_->pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  ASSERT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_NEAR(json_number(r.out, "thp_bytes"), 64 * mib, 0.64 * mib);
  EXPECT_NEAR(json_number(r.out, "bytes", "\"page_bytes\": 2097152,"), 16 * mib, 0.16 * mib);
  EXPECT_NEAR(json_number(r.out, "hugetlb_bytes"), 16 * mib, 0.16 * mib);
  EXPECT_EQ(json_number(r.out, "pid"), process_->pid());
  EXPECT_NE(r.out.find("\"mode\": \"process\""), std::string::npos);
  EXPECT_NE(r.out.find("\"name\": \"glibc\""), std::string::npos);
}

// node -> {all bytes, hugetlb bytes} as /proc/PID/numa_maps of `pid` counts them; empty when
// unreadable.
std::map<int, std::pair<std::size_t, std::size_t>> numa_maps_of(pid_t pid) {
  std::map<int, std::pair<std::size_t, std::size_t>> nodes;
  std::ifstream in("/proc/" + std::to_string(pid) + "/numa_maps");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word;
    std::size_t page_kib = 4;
    std::vector<std::pair<int, std::size_t>> counts;
    while (words >> word) {
      if (word.rfind("kernelpagesize_kB=", 0) == 0) page_kib = std::stoul(word.substr(18));
      if (word.size() > 2 && word[0] == 'N' && std::isdigit(static_cast<unsigned char>(word[1])) &&
          word.find('=') != std::string::npos) {
        counts.emplace_back(std::stoi(word.substr(1)), std::stoul(word.substr(word.find('=') + 1)));
      }
    }
    for (const auto& [node, pages] : counts) {
      nodes[node].first += pages * page_kib * 1024;
      if (page_kib > 4) nodes[node].second += pages * page_kib * 1024;
    }
  }
  return nodes;
}

TEST_F(DoctorKnownProcess, NumaPlacementIsWhatNumaMapsSays) {
  // On a machine with one node the doctor takes the split from smaps instead of walking the
  // page tables again for numa_maps: the numbers must be numa_maps' all the same (THP,
  // hugetlb, and the vdso, which numa_maps leaves out), in JSON and in Prometheus.
  const pid_t pid = process_->pid();
  // The target waits, but a sanitizer's runtime in it may still fault in a page now and then:
  // the doctor's runs are taken again until numa_maps is the same before and after them.
  std::map<int, std::pair<std::size_t, std::size_t>> expected;
  result json, prom;
  bool stable = false;
  for (int attempt = 0; attempt < 10 && !stable; ++attempt) {
    expected = numa_maps_of(pid);
    json = doctor({"--pid", std::to_string(pid), "--json"});
    prom = doctor({"--pid", std::to_string(pid), "--format", "prometheus"});
    stable = numa_maps_of(pid) == expected;
  }
  ASSERT_TRUE(stable) << "the target's memory changed during each of 10 attempts";
  ASSERT_FALSE(expected.empty()) << "/proc/" << pid << "/numa_maps unreadable or empty";
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  std::map<int, std::pair<std::size_t, std::size_t>> reported;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  for (const auto& n : doc.at("process").at("numa")) {
    reported[n.at("node").get<int>()] = {n.at("bytes").get<std::size_t>(),
                                         n.at("hugetlb_bytes").get<std::size_t>()};
  }
  EXPECT_EQ(reported, expected);
  EXPECT_GE(expected.begin()->second.second, 16 * hugepage::units::mib);
  for (const auto& [node, bytes] : expected) {
    const std::string labels =
        "{pid=\"" + std::to_string(pid) + "\",node=\"" + std::to_string(node) + "\",kind=\"";
    EXPECT_NE(prom.out.find("hugepage_doctor_process_node_bytes" + labels + "all\"} " +
                            std::to_string(bytes.first) + "\n"),
              std::string::npos)
        << prom.out;
    EXPECT_NE(prom.out.find("hugepage_doctor_process_node_bytes" + labels + "hugetlb\"} " +
                            std::to_string(bytes.second) + "\n"),
              std::string::npos)
        << prom.out;
  }
}

TEST(DoctorCli, LargeProcessIsFast) {
  // 4000 separate mappings, 1 GiB touched: smaps is read once, pagemap not at all.
  target big({"--mappings", "4000", "--mapping-kib", "256"});
  if (!big.ready()) GTEST_SKIP() << "target failed: " << big.line();
  // The doctor's CPU time (user + system, from the reaped child's rusage), not the wall clock:
  // quiet, both are about 0.25 s, but under load the wall clock also counts the time other work
  // held the CPUs (1.2 s and 8.3 s seen in CI-like runs), which says nothing about the doctor.
  const auto children_cpu = [] {
    rusage u{};
    ::getrusage(RUSAGE_CHILDREN, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const double cpu_before = children_cpu();
  const result r = doctor({"--pid", std::to_string(big.pid()), "--json"});
  const double cpu_seconds = children_cpu() - cpu_before;
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_GE(json_number(r.out, "mappings"), 4000);
  EXPECT_LT(cpu_seconds, 1.0) << "wall " << json_number(r.out, "elapsed_seconds") << " s";
}

// The starts of the per-mapping coverage rows in each format, in order.
std::vector<std::uintptr_t> table_coverage_starts(const std::string& out) {
  std::vector<std::uintptr_t> starts;
  const auto at = out.find("\nHuge pages per mapping (exact, from ");
  if (at == std::string::npos) return starts;
  std::istringstream lines(out.substr(at + 1));
  std::string line;
  std::getline(lines, line);  // the title
  std::getline(lines, line);  // the column names
  while (std::getline(lines, line) && line.rfind("  0x", 0) == 0) {
    starts.push_back(std::strtoull(line.c_str() + 2, nullptr, 16));
  }
  return starts;
}

std::vector<std::uintptr_t> prometheus_coverage_starts(const std::string& out,
                                                       const std::string& kind) {
  std::vector<std::uintptr_t> starts;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("hugepage_doctor_process_mapping_bytes{", 0) != 0) continue;
    if (line.find(",kind=\"" + kind + "\"}") == std::string::npos) continue;
    const auto at = line.find("start=\"");
    if (at != std::string::npos)
      starts.push_back(std::strtoull(line.c_str() + at + 7, nullptr, 16));
  }
  return starts;
}

// The opens of `path` a run of the doctor with `args` makes, as count_opens.cpp writes them: one
// 'o' an open of the path itself (or of the file relative to a descriptor of its directory), one
// 'a' an open of a file under it by a path that names it.
std::string opens_of(const std::string& path, const std::vector<std::string>& args, result& r) {
  const int counter = ::memfd_create("opens", 0);  // inherited across exec
  if (counter < 0) return "memfd_create: " + std::string(std::strerror(errno));
  run_options o;
  o.in_child = [&] {
    std::string asan = "verify_asan_link_order=0";  // the counter goes first, before libasan
    if (const char* old = std::getenv("ASAN_OPTIONS")) asan = std::string(old) + ":" + asan;
    return ::setenv("LD_PRELOAD", HUGEPAGE_COUNT_OPENS, 1) == 0 &&
           ::setenv("HUGEPAGE_COUNT_OPENS_PATH", path.c_str(), 1) == 0 &&
           ::setenv("HUGEPAGE_COUNT_OPENS_FD", std::to_string(counter).c_str(), 1) == 0 &&
           ::setenv("ASAN_OPTIONS", asan.c_str(), 1) == 0;
  };
  r = doctor(args, o);
  std::string bytes(64, '\0');
  const ssize_t n = ::pread(counter, bytes.data(), bytes.size(), 0);
  ::close(counter);
  bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return bytes;
}

// One door to a process: the report, the collapse (dry run and real) and the capture each open
// the target's /proc/PID once, as a process_view, and read every file of it in there: none by
// its number again (a pid reused meanwhile would be read as the same process).
TEST(DoctorCli, EachPidCommandOpensTheProcessDirectoryOnce) {
  target t({"--anon", "64"});
  ASSERT_TRUE(t.ready()) << t.line();
  const std::string pid = std::to_string(t.pid());
  char scratch[] = "/tmp/hugepage-opens-XXXXXX";
  ASSERT_NE(::mkdtemp(scratch), nullptr) << std::strerror(errno);
  const std::string capture = std::string(scratch) + "/capture";
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--pid", pid},
                                             {"--pid", pid, "--json"},
                                             {"--pid", pid, "--collapse", "--dry-run"},
                                             {"--pid", pid, "--collapse"},
                                             {"--pid", pid, "--capture", capture}}) {
    std::string line;
    for (const std::string& a : args) line += " " + a;
    SCOPED_TRACE("hugepage-doctor" + line);
    result r;
    const std::string opens = opens_of("/proc/" + pid, args, r);
    const bool collapses = args.size() == 3 && args[2] == "--collapse";
    if (collapses && ::geteuid() != 0) {  // process_madvise needs CAP_SYS_NICE: refused, said so
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find("needs CAP_SYS_NICE"), std::string::npos) << r.err;
    } else {
      ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
    }
    EXPECT_EQ(opens, "o") << "'o': /proc/" << pid << " opened; 'a': a file under it by its path";
  }
  EXPECT_EQ(std::system(("rm -rf " + std::string(scratch)).c_str()), 0);
}

TEST(DoctorCli, TenThousandMappingsInEveryFormatReadSmapsOnce) {
  // 10,000 mappings of 212 KiB (2 GiB mapped), 8 KiB of each touched. The doctor opens
  // /proc/PID/smaps once in every format (an LD_PRELOAD library counts the opens: smaps is the
  // page-table walk that made the per-mapping table cost the square of the process's size), and
  // every format carries the whole report, the per-mapping coverage included.
  target big({"--mappings", "10000", "--mapping-kib", "212", "--touch-kib", "8"});
  ASSERT_TRUE(big.ready()) << big.line();
  const std::string pid = std::to_string(big.pid());
  const std::string smaps = "/proc/" + pid + "/smaps";
  // The doctor reads; it changes nothing in the process: the pages never touched stay untouched
  // (a kernel without the zero page on read faults gives each page read one of its own).
  const auto rss_before = hugepage::read_smaps_rollup("", big.pid());
  ASSERT_TRUE(rss_before.has_value());
  std::map<std::string, result> out;
  for (const std::string format : {"table", "json", "prometheus"}) {
    const std::string opens = opens_of(smaps, {"--pid", pid, "--format", format}, out[format]);
    const result& r = out[format];
    ASSERT_TRUE(r.code == 0 || r.code == 1) << format << ": " << r.err;
    EXPECT_EQ(opens.size(), 1u) << format << ": opens of " << smaps << ": " << opens;
  }
  const auto rss_after = hugepage::read_smaps_rollup("", big.pid());
  ASSERT_TRUE(rss_after.has_value());
  EXPECT_EQ(rss_after->rss, rss_before->rss) << "the doctor's reads faulted pages of the target in";
  // The table: the header's count, the advice, and the coverage table of the 10 largest.
  const std::string& table = out["table"].out;
  const auto header = table.find(" mappings, read in ");
  ASSERT_NE(header, std::string::npos) << table;
  EXPECT_GE(std::strtoull(table.c_str() + table.rfind(", ", header) + 2, nullptr, 10), 10000u);
  EXPECT_NE(table.find("\nAdvice"), std::string::npos) << table;
  const std::vector<std::uintptr_t> rows = table_coverage_starts(table);
  EXPECT_EQ(rows.size(), 10u) << table;
  // JSON: the same report, the same rows.
  const nlohmann::json doc = nlohmann::json::parse(out["json"].out);
  const nlohmann::json& process = doc.at("process");
  EXPECT_GE(process.at("mappings").get<std::size_t>(), 10000u);
  EXPECT_TRUE(doc.at("advice").is_array());
  std::vector<std::uintptr_t> json_rows;
  for (const auto& row : process.at("mapping_coverage")) {
    json_rows.push_back(std::strtoull(row.at("start").get<std::string>().c_str(), nullptr, 16));
    EXPECT_GT(row.at("resident_bytes").get<std::size_t>(), 0u);
    // A mapping smaps counts no huge page in is taken from smaps, its page tables not walked
    // again; the others come from PAGEMAP_SCAN.
    const bool none_huge = row.at("smaps_huge_bytes").get<std::size_t>() == 0;
    EXPECT_EQ(row.at("source").get<std::string>(), none_huge ? "smaps" : "pagemap_scan");
    EXPECT_EQ(row.at("huge_bytes").get<std::size_t>(),
              row.at("smaps_huge_bytes").get<std::size_t>());
    EXPECT_FALSE(row.at("smaps_disagrees").get<bool>());
    EXPECT_TRUE(row.at("exact").get<bool>());
    // What the page tables say now (the target waits): the same resident and huge bytes.
    const std::uintptr_t start = json_rows.back();
    const std::uintptr_t end = std::strtoull(row.at("end").get<std::string>().c_str(), nullptr, 16);
    const hugepage::backing_report walked =
        hugepage::backing_of(big.pid(), reinterpret_cast<const void*>(start), end - start);
    EXPECT_EQ(row.at("resident_bytes").get<std::size_t>(), walked.resident_bytes());
    EXPECT_EQ(row.at("huge_bytes").get<std::size_t>(), walked.huge_bytes());
  }
  // Each run reads the process anew; the largest mappings do not change while the target waits.
  EXPECT_EQ(json_rows, rows);
  // Prometheus: three samples per row, and the process's other families.
  const std::string& prom = out["prometheus"].out;
  EXPECT_EQ(prometheus_coverage_starts(prom, "resident"), rows);
  EXPECT_EQ(prometheus_coverage_starts(prom, "huge"), rows);
  EXPECT_EQ(prometheus_coverage_starts(prom, "smaps_huge"), rows);
  EXPECT_NE(prom.find("\nhugepage_doctor_process_read_seconds{"), std::string::npos);
  EXPECT_NE(prom.find("\nhugepage_doctor_warnings "), std::string::npos) << prom.substr(0, 2000);
}

}  // namespace
