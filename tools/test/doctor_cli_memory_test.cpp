// tools/test/doctor_cli_memory_test.cpp - the real doctor on targets whose memory the report
// must count and speak of honestly: one memfd mapped three times (ZGC's heap views), and
// hundreds of MiB under the per-class threshold that no setting reaches.
#include <fstream>

#include "doctor_cli_support.hpp"

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
