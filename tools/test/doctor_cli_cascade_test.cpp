// tools/test/doctor_cli_cascade_test.cpp - a block of the 1 GiB cascade listed as one entry.
#include "doctor_cli_support.hpp"

namespace {

using namespace doctor_cli;

using hugepage::units::gib;
using hugepage::units::mib;

constexpr std::size_t kBlock = gib + gib / 2;

// Skips where the 1 GiB allocator lays a 1.5 GiB block on two whole 1 GiB pages (kernels before
// 6.12, strategy.hpp): there is no tail to join.
#define SKIP_WITHOUT_COMPOSITE_BLOCKS()                                                          \
  do {                                                                                           \
    const auto layout_ =                                                                         \
        hugepage::huge_page_allocator<char, hugepage::page_size::huge_1g>::get_strategy()        \
            .layout_of(kBlock);                                                                  \
    if (layout_.head == layout_.length) {                                                        \
      GTEST_SKIP() << "before Linux 6.12 the 1 GiB allocator maps 1.5 GiB on whole 1 GiB pages"; \
    }                                                                                            \
  } while (0)

// The entry of a --pid --json document that starts at `start` (null when none does).
nlohmann::json entry_at(const std::string& out, std::uintptr_t start) {
  const auto doc = nlohmann::json::parse(out);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%jx", static_cast<std::uintmax_t>(start));
  for (const auto& entry : doc.at("process").at("largest_anonymous")) {
    if (entry.at("start") == hex) return entry;
  }
  return nullptr;
}

// A target that could not allocate the block: skipped (or failed under HUGEPAGE_REQUIRE) only
// when another process drained a pool since the check; any other error is the library's.
#define SKIP_IF_POOL_RACED(t)                                                                  \
  do {                                                                                         \
    if (!(t).ready()) {                                                                        \
      ASSERT_NE((t).line().find("pool exhausted"), std::string::npos) << (t).line();           \
      HUGEPAGE_SKIP_OR_FAIL("a pool was drained by another process meanwhile: " + (t).line()); \
    }                                                                                          \
  } while (0)

TEST(DoctorCascadeBlock, OneGiBPageAndTwoMiBPagesAreOneEntry) {
  SKIP_WITHOUT_COMPOSITE_BLOCKS();
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_1g, 1);
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_2m, gib / 2 / (2 * mib));
  target t({"--block-1g", std::to_string(kBlock / mib)});
  SKIP_IF_POOL_RACED(t);
  ASSERT_EQ(t.value("block_1g"), gib) << t.line();
  if (t.value("block_2m") != gib / 2) {
    // The tail went to THP: the 2 MiB pool was short when the block was mapped.
    HUGEPAGE_SKIP_OR_FAIL("the 2 MiB pool was drained by another process meanwhile: " + t.line());
  }
  const std::string pid = std::to_string(t.pid());
  const result json = doctor({"--pid", pid, "--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  const nlohmann::json entry = entry_at(json.out, t.value("block_start"));
  ASSERT_FALSE(entry.is_null()) << t.line() << "\n" << json.out;
  EXPECT_EQ(entry.at("size_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("resident_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("huge_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("mappings_joined"), 2) << entry.dump(2);
  EXPECT_EQ(entry.at("pages"), nlohmann::json::parse(R"json([
    {"page_bytes": 1073741824, "kind": "hugetlb", "bytes": 1073741824},
    {"page_bytes": 2097152, "kind": "hugetlb", "bytes": 536870912}])json"))
      << entry.dump(2);

  const result table = doctor({"--pid", pid});
  ASSERT_TRUE(table.code == 0 || table.code == 1) << table.err;
  char row[64];
  std::snprintf(row, sizeof row, "\n  %-14jx    1.50 GiB    1.50 GiB    1.50 GiB  100.0%% ",
                static_cast<std::uintmax_t>(t.value("block_start")));
  const auto at = table.out.find(row);
  ASSERT_NE(at, std::string::npos) << row << "\n" << table.out;
  // The entry's second line: its split.
  const std::string split =
      "\n                 1G 1 GiB + 2M 512 MiB (2 mappings joined: one block)\n";
  EXPECT_EQ(table.out.compare(table.out.find('\n', at + 1), split.size(), split), 0) << table.out;
}

TEST(DoctorCascadeBlock, OneGiBPageAndThpTailAreOneEntry) {
  // The 2 MiB pool is emptied for the target alone by a hugetlb cgroup limit of 0 (the shared pool
  // is never drained), so the library leaves the tail on THP.
  SKIP_WITHOUT_COMPOSITE_BLOCKS();
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to limit the 2 MiB pool in a cgroup";
  HUGEPAGE_REQUIRE_POOL(hugepage::page_size::huge_1g, 1);
  hugepage::test::scratch_cgroup cgroup("hugetlb");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  if (!cgroup.write("hugetlb.2MB.max", "0") || !cgroup.write("hugetlb.2MB.rsvd.max", "0")) {
    HUGEPAGE_SKIP_OR_FAIL("cannot write the hugetlb limits of " + cgroup.path() + ": " +
                          std::strerror(errno));
  }
  target t({"--cgroup", cgroup.path(), "--block-1g", std::to_string(kBlock / mib)});
  SKIP_IF_POOL_RACED(t);
  ASSERT_EQ(t.value("block_1g"), gib) << t.line();
  ASSERT_EQ(t.value("block_2m"), 0u) << t.line();
  const std::size_t thp = t.value("block_thp");
  if (thp < gib / 2 / 100 * 99) {
    HUGEPAGE_SKIP_OR_FAIL("THP got little of the tail here (memory fragmented?): " + t.line());
  }
  const result json = doctor({"--pid", std::to_string(t.pid()), "--json"});
  ASSERT_TRUE(json.code == 0 || json.code == 1) << json.err;
  const nlohmann::json entry = entry_at(json.out, t.value("block_start"));
  ASSERT_FALSE(entry.is_null()) << t.line() << "\n" << json.out;
  EXPECT_EQ(entry.at("size_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("resident_bytes"), kBlock) << entry.dump(2);
  EXPECT_EQ(entry.at("mappings_joined"), 2) << entry.dump(2);
  EXPECT_EQ(entry.at("flags"), "hg") << entry.dump(2);
  const auto& pages = entry.at("pages");
  ASSERT_GE(pages.size(), 2u) << entry.dump(2);
  EXPECT_EQ(pages[0],
            nlohmann::json::parse(
                R"json({"page_bytes": 1073741824, "kind": "hugetlb", "bytes": 1073741824})json"));
  EXPECT_EQ(pages[1].at("kind"), "thp");
  EXPECT_EQ(pages[1].at("page_bytes"), hugepage::thp_page_bytes());
  // smaps and backing_of() (PAGEMAP_SCAN) count the same THP, within one huge page.
  EXPECT_NEAR(pages[1].at("bytes").get<double>(), static_cast<double>(thp), 2.0 * mib);
  std::size_t sum = 0;
  for (const auto& share : pages) sum += share.at("bytes").get<std::size_t>();
  EXPECT_EQ(sum, kBlock) << entry.dump(2);
}

}  // namespace
