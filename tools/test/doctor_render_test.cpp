// tools/test/doctor_render_test.cpp - what the table and JSON print of an advice: the classes of
// memory its fix reaches ("reaches:" under its message, with the process's bytes; "reaches" in
// JSON, always present); the title of the per-mapping coverage table.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "advice.hpp"
#include "mapping_coverage.hpp"
#include "process_report.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {
namespace {

using hugepage::units::gib;
using hugepage::units::mib;

memory_class_usage resident(memory_class kind, std::size_t bytes) {
  memory_class_usage c;
  c.kind = kind;
  c.resident = bytes;
  c.mappings = 1;
  return c;
}

// A process with glibc thread arenas and mmapped chunks, and two pieces of advice: one whose
// fix reaches both classes, one that reaches no class.
struct two_advice {
  process_report process;
  std::vector<advice> list;
  two_advice() {
    process.pid = 4242;
    process.classes = {resident(memory_class::glibc_thread_arenas, gib + gib / 5),
                       resident(memory_class::glibc_mmapped_chunks, 300 * mib)};
    advice reaching{rule_id::glibc_without_hugetlb_tunable,
                    "glibc does not ask for huge pages",
                    {"GLIBC_TUNABLES unset"}};
    reaching.reaches = {"glibc_thread_arenas", "glibc_mmapped_chunks"};
    advice plain{rule_id::max_ptes_none, "max_ptes_none is 511"};
    list = {reaching, plain};
  }
};

TEST(DoctorRender, TableNamesTheClassesAnAdviceReachesWithTheirBytes) {
  const two_advice t;
  const std::string table = render_process(t.process, system_report{}, t.list);
  EXPECT_NE(table.find("  1. warning: glibc does not ask for huge pages "
                       "[glibc_without_hugetlb_tunable]\n"
                       "     reaches: glibc thread arenas (1.20 GiB), glibc mmapped chunks "
                       "(300 MiB)\n"
                       "     - GLIBC_TUNABLES unset\n"),
            std::string::npos)
      << table;
  // The advice that reaches no class has no such line.
  const auto second = table.find("  2. note: max_ptes_none is 511 [max_ptes_none]\n");
  ASSERT_NE(second, std::string::npos) << table;
  EXPECT_EQ(table.find("reaches:", second), std::string::npos) << table;
  EXPECT_EQ(table.find("reaches:"), table.rfind("reaches:")) << table;
}

TEST(DoctorRender, TableOfTheSystemNamesTheClassesWithoutBytes) {
  const two_advice t;
  const std::string table = render_system(system_report{}, t.list);
  EXPECT_NE(table.find("\n     reaches: glibc thread arenas, glibc mmapped chunks\n"),
            std::string::npos)
      << table;
}

TEST(DoctorRender, JsonCarriesReachesOnEveryAdvice) {
  const two_advice t;
  for (const std::string& text :
       {json_process(t.process, system_report{}, t.list), json_system(system_report{}, t.list)}) {
    const nlohmann::json doc = nlohmann::json::parse(text);
    const nlohmann::json& advice = doc.at("advice");
    ASSERT_EQ(advice.size(), 2u) << text;
    EXPECT_EQ(advice[0].at("reaches"),
              nlohmann::json::parse(R"(["glibc_thread_arenas", "glibc_mmapped_chunks"])"));
    EXPECT_TRUE(advice[1].at("reaches").is_array()) << text;
    EXPECT_TRUE(advice[1].at("reaches").empty()) << text;
  }
}

// A coverage row of `resident` bytes, `huge` of them huge, from `source`; smaps counts
// `smaps_huge`.
mapping_coverage row(std::uintptr_t start, std::size_t resident, std::size_t huge,
                     std::size_t smaps_huge, backing_source source) {
  mapping_coverage c;
  c.mapping.start = start;
  c.mapping.end = start + 64 * mib;
  c.exact.bytes = 64 * mib;
  c.exact.thp = huge;
  c.exact.base = resident - huge;
  c.exact.source = source;
  c.exact.exact = true;
  c.smaps_huge = smaps_huge;
  c.smaps_disagrees = huge != smaps_huge;
  return c;
}

TEST(DoctorRender, CoverageTitleNamesEverySourceOfItsRows) {
  // Rows of mappings smaps counts no huge page in come from smaps; the title says so beside the
  // page tables' source, and the '!' stays with the walked row that disagrees.
  const std::vector<mapping_coverage> mixed = {
      row(0x100000000, 32 * mib, 0, 0, backing_source::smaps),
      row(0x200000000, 16 * mib, 4 * mib, 2 * mib, backing_source::pagemap_scan)};
  const std::string table = render_coverage(mixed, 10);
  EXPECT_NE(
      table.find("Huge pages per mapping (exact, from pagemap_scan; smaps where it counts no huge "
                 "page):\n"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("     32 MiB        0 B        0 B  [anon]\n"), std::string::npos) << table;
  EXPECT_NE(table.find("     16 MiB      4 MiB      2 MiB! [anon]\n"), std::string::npos) << table;
  // Only smaps rows: smaps alone.
  const std::string only = render_coverage({mixed[0]}, 10);
  EXPECT_NE(only.find("Huge pages per mapping (exact, from smaps):\n"), std::string::npos) << only;
  EXPECT_EQ(only.find('!'), std::string::npos) << only;
}

}  // namespace
}  // namespace hugepage::doctor
