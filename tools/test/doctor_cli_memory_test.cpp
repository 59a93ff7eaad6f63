// tools/test/doctor_cli_memory_test.cpp - the real doctor on targets whose memory the report
// must count and speak of honestly: one memfd mapped three times (ZGC's heap views), and
// hundreds of MiB under the per-class threshold that no setting reaches.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "doctor_cli_support.hpp"
#include "hugepage/process_view.hpp"

namespace {

using namespace doctor_cli;
using hugepage::units::kib;
using hugepage::units::mib;
constexpr std::size_t page = 4 * kib;

const nlohmann::json* json_class(const nlohmann::json& process, const std::string& name) {
  for (const auto& c : process.at("memory_classes")) {
    if (c.at("class") == name) return &c;
  }
  return nullptr;
}

// One memfd mapped three times, as ZGC maps its heap: 32 MiB of memory, not 96 MiB.
TEST(DoctorCliMemory, MemfdMappedThreeTimesCountsOnce) {
  target t({"--memfd", "32", "--memfd-views", "3"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json p = nlohmann::json::parse(r.out).at("process");
  const auto* shared = json_class(p, "shared_anonymous");
  ASSERT_NE(shared, nullptr) << p.at("memory_classes").dump(1);
  const auto bytes = shared->at("resident_bytes").get<std::size_t>();
  EXPECT_GE(bytes, 32 * mib);
  EXPECT_LE(bytes, 32 * mib + 4 * page);
  EXPECT_EQ(shared->at("mappings"), 3);
  EXPECT_EQ(shared->at("repeated_views"), 2);
  EXPECT_GE(p.at("shmem_bytes").get<std::size_t>(), 32 * mib);
  EXPECT_LE(p.at("shmem_bytes").get<std::size_t>(), 32 * mib + 4 * page);
  std::size_t sum = 0;
  for (const auto& c : p.at("memory_classes")) sum += c.at("resident_bytes").get<std::size_t>();
  EXPECT_EQ(sum, p.at("rss_bytes").get<std::size_t>() + p.at("hugetlb_bytes").get<std::size_t>());
  const result table = doctor({"--pid", std::to_string(t.pid())});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  EXPECT_NE(table.out.find("2 repeat views counted once"), std::string::npos) << table.out;
}

// One memfd mapped twice, written only through the view mapped first (the higher address): its
// pages are resident in the later view in address order and in none of the earlier one. The
// report counts them once, where they are, in every format.
TEST(DoctorCliMemory, MemfdResidentOnlyInALaterViewCountsOnce) {
  target t({"--memfd", "64", "--memfd-views", "2", "--memfd-touch-view", "1"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const nlohmann::json p = nlohmann::json::parse(r.out).at("process");
  const auto* shared = json_class(p, "shared_anonymous");
  ASSERT_NE(shared, nullptr) << p.at("memory_classes").dump(1);
  const auto bytes = shared->at("resident_bytes").get<std::size_t>();
  EXPECT_GE(bytes, 64 * mib);
  EXPECT_LE(bytes, 64 * mib + 4 * page);
  EXPECT_EQ(shared->at("repeated_views"), 1);
  EXPECT_GE(p.at("shmem_bytes").get<std::size_t>(), 64 * mib);
  EXPECT_LE(p.at("shmem_bytes").get<std::size_t>(), 64 * mib + 4 * page);
  const result prom = doctor({"--pid", std::to_string(t.pid()), "--format", "prometheus"});
  ASSERT_TRUE(prom.code == 0 || prom.code == 1) << prom.err;
  const std::string key =
      "hugepage_doctor_process_bytes{pid=\"" + std::to_string(t.pid()) + "\",kind=\"shmem\"} ";
  const auto at = prom.out.find(key);
  ASSERT_NE(at, std::string::npos) << prom.out;
  const double shmem = std::strtod(prom.out.c_str() + at + key.size(), nullptr);
  EXPECT_GE(shmem, static_cast<double>(64 * mib)) << prom.out.substr(at, 100);
}

// The commands of every piece of advice in a --json document, one a line.
std::string advice_commands(const nlohmann::json& doc) {
  std::string out;
  for (const auto& a : doc.at("advice")) {
    for (const auto& c : a.at("commands")) out += c.get<std::string>() + "\n";
  }
  return out;
}

const nlohmann::json* advice_of(const nlohmann::json& doc, const std::string& id) {
  for (const auto& a : doc.at("advice")) {
    if (a.at("id") == id) return &a;
  }
  return nullptr;
}

// What this kernel does with copy-on-write copies in a private file mapping, written after
// MADV_HUGEPAGE: THPeligible 0, and MADV_COLLAPSE refuses them with EINVAL (Linux 6.18). The
// doctor's advice for them rests on it.
TEST(DoctorCliMemory, ThisKernelLeavesPrivateFileCopiesOnBasePages) {
  const std::size_t bytes = 8 * mib;
  const int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  void* at = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(at, MAP_FAILED);
  char* p = static_cast<char*>(at);
  EXPECT_EQ(::madvise(p, bytes, MADV_HUGEPAGE), 0);
  for (std::size_t i = 0; i < bytes; i += page) p[i] = 1;
  errno = 0;
  EXPECT_EQ(::madvise(p, bytes, 25 /* MADV_COLLAPSE */), -1);
  EXPECT_EQ(errno, EINVAL);
  std::error_code ec;
  for (const hugepage::mapping_info& m : hugepage::process_view().read_smaps(ec)) {
    if (m.start > reinterpret_cast<std::uintptr_t>(p) ||
        m.end <= reinterpret_cast<std::uintptr_t>(p))
      continue;
    EXPECT_EQ(m.anonymous, bytes);
    EXPECT_EQ(m.anon_huge, 0u);
    EXPECT_FALSE(m.thp_eligible);
  }
  ASSERT_FALSE(ec) << ec.message();
  ::munmap(p, bytes);
}

// 300 MiB of copies in a private file mapping and 300 MiB advised MADV_NOHUGEPAGE: neither is
// page cache or an all-clear, and no advice names --collapse or enabled=always for them, as the
// doctor's own dry run agrees (nothing it can collapse).
TEST(DoctorCliMemory, AdviceMatchesWhatReachesCopiesAndNoHugepageMemory) {
  target t({"--private-file", "300", "--nohuge", "300"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;  // notes only
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const nlohmann::json& p = doc.at("process");
  const auto* copies = json_class(p, "private_file_copies");
  ASSERT_NE(copies, nullptr) << p.at("memory_classes").dump(1);
  EXPECT_GE(copies->at("resident_bytes").get<std::size_t>(), 300 * mib);
  const auto* file = json_class(p, "file");
  if (file != nullptr) {
    EXPECT_LT(file->at("resident_bytes").get<std::size_t>(), 100 * mib);
  }
  const auto* copies_note = advice_of(doc, "file_copies_out_of_reach");
  ASSERT_NE(copies_note, nullptr) << doc.at("advice").dump(1);
  EXPECT_EQ(copies_note->at("level"), "note");
  const auto* nohuge_note = advice_of(doc, "base_pages_out_of_reach");
  ASSERT_NE(nohuge_note, nullptr) << doc.at("advice").dump(1);
  const std::string message = nohuge_note->at("message");
  EXPECT_NE(message.find("MADV_NOHUGEPAGE"), std::string::npos) << message;
  EXPECT_EQ(message.find("enabled=always (machine-wide) reaches it"), std::string::npos) << message;
  EXPECT_EQ(advice_commands(doc).find("--collapse"), std::string::npos) << advice_commands(doc);
  const result table = doctor({"--pid", std::to_string(t.pid())});
  EXPECT_EQ(table.out.find("nothing to change"), std::string::npos) << table.out;
  // The dry run's rows for the two 300 MiB mappings say why they cannot collapse. The target's
  // own small pieces (a malloc heap, a stack) may be candidates on another machine: the exit
  // code and the summary line speak of them too, so only the rows are judged.
  const result dry = doctor({"--pid", std::to_string(t.pid()), "--collapse", "--dry-run"});
  ASSERT_TRUE(dry.code == 0 || dry.code == 1) << dry.out << dry.err;
  EXPECT_NE(dry.out.find("(cannot collapse: private file mapping)"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("(cannot collapse: VM_NOHUGEPAGE)"), std::string::npos) << dry.out;
  int large_rows = 0;
  std::istringstream rows(dry.out);
  for (std::string row; std::getline(rows, row);) {
    std::uintptr_t start = 0, end = 0;
    if (std::sscanf(row.c_str(), " 0x%" SCNxPTR "-0x%" SCNxPTR, &start, &end) != 2) continue;
    if (end - start < 256 * mib) continue;  // not one of the two 300 MiB mappings
    ++large_rows;
    EXPECT_NE(row.find("(cannot collapse: "), std::string::npos) << row;
  }
  EXPECT_GE(large_rows, 2) << dry.out;
}

// THP disabled for the process (prctl) with 300 MiB on base pages: under the advice threshold,
// yet no quiet all-clear: a note naming who disabled it and what it costs.
TEST(DoctorCliMemory, ThpDisabledUnderTheThresholdIsNoQuietAllClear) {
  target t({"--thp-disable", "1", "--anon", "300"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const auto* note = advice_of(doc, "process_thp_disabled");
  ASSERT_NE(note, nullptr) << doc.at("advice").dump(1);
  EXPECT_EQ(note->at("level"), "note");
  const std::string message = note->at("message");
  EXPECT_NE(message.find("prctl(PR_SET_THP_DISABLE)"), std::string::npos) << message;
  EXPECT_NE(message.find("stays on base pages"), std::string::npos) << message;
  const result table = doctor({"--pid", std::to_string(t.pid())});
  EXPECT_EQ(table.out.find("nothing to change"), std::string::npos) << table.out;
}

// 300 MiB the program maps itself, unadvised, under THP madvise: under the per-class threshold,
// yet no quiet all-clear: a note naming it, why nothing reaches it, and --collapse.
TEST(DoctorCliMemory, UnreachedMemoryIsNoQuietAllClear) {
  std::string enabled;
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::getline(in, enabled);
  if (enabled.find("[madvise]") == std::string::npos) {
    HUGEPAGE_SKIP_OR_FAIL("THP enabled is not madvise here: " + enabled);
  }
  target t({"--anon", "300"});
  ASSERT_TRUE(t.ready()) << t.line();
  const result r = doctor({"--pid", std::to_string(t.pid()), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;  // a note, no warning (exit_codes.hpp)
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  const nlohmann::json* note = nullptr;
  for (const auto& a : doc.at("advice")) {
    if (a.at("id") == "base_pages_out_of_reach") note = &a;
  }
  ASSERT_NE(note, nullptr) << doc.at("advice").dump(1);
  EXPECT_EQ(note->at("level"), "note");
  const std::string message = note->at("message");
  EXPECT_NE(message.find("the program's own anonymous mappings ("), std::string::npos) << message;
  EXPECT_NE(message.find("without MADV_HUGEPAGE"), std::string::npos) << message;
  EXPECT_NE(message.find("--collapse raises it now (MADV_COLLAPSE)"), std::string::npos) << message;
  const result table = doctor({"--pid", std::to_string(t.pid())});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(table.out.find("nothing to change"), std::string::npos) << table.out;
}

}  // namespace
