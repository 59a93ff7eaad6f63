// tools/test/doctor_rule_catalog_test.cpp - the catalog of rules (rule_catalog.hpp) against what
// the doctor prints and what tools/README.md lists: every piece of advice in the table, JSON and
// Prometheus outputs over the stored inputs (doctor_stored_inputs.hpp) is a row, at no more than
// the row's level; every row is given by some stored input, or is named below as out of their reach
// with the reason (and then given by none); the README's table of identifiers is the catalog, row
// for row.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_process.hpp"
#include "advise_system.hpp"
#include "doctor_stored_inputs.hpp"
#include "prometheus.hpp"
#include "render_json.hpp"
#include "render_table.hpp"
#include "rule_catalog.hpp"

namespace hugepage::doctor {
namespace {

// The rows no stored input reaches, and why: each needs a state of a process that no capture of
// tools/test/data/services holds (the captures are of services as Debian starts them, on one NUMA
// node, without memory limits). The hand-made reports of the test file named give each.
const std::map<std::string, std::string> out_of_stored_reach = {
    {"process_thp_disabled",
     "no capture has THP disabled by prctl but MariaDB, which did it itself (its own advice); "
     "doctor_advise_process_test"},
    {"redis_disables_thp",
     "the Redis capture is from THP madvise, where Redis leaves THP on (THP_enabled 1); "
     "doctor_advise_process_test"},
    {"glibc_too_old_for_thp",
     "no capture names a glibc older than 2.35 (none stores a glibc_version); "
     "doctor_advise_process_test"},
    {"allocator_settings_unknown",
     "the captures whose environment is overwritten by their title (Redis) hold a few MiB, under "
     "the advice threshold; doctor_advise_process_test"},
    {"locked_before_advice",
     "no capture has locked memory (VmLck 0); doctor_advise_reach_settings_test"},
    {"thp_disabled_except_advised",
     "needs PR_THP_DISABLE_EXCEPT_ADVISED (Linux 6.18) under THP always; the captures are from "
     "Linux 6.1; doctor_advise_reach_settings_test"},
    {"dotnet_gc_large_pages", "no capture of a .NET runtime; doctor_advise_reach_settings_test"},
    {"go_heap_out_of_reach", "no capture of a Go program; doctor_pool_settings_test"},
    {"runtime_heap_out_of_reach",
     "every runtime captured (JVM, Node.js) has advice of its own; "
     "doctor_advise_reach_settings_test"},
    {"jvm_memory_beside_heap",
     "the JVM captured with -XX:+UseLargePages has its heap on base pages (a short pool), and its "
     "other memory is small; doctor_pool_settings_test"},
    {"memory_cgroup_limit",
     "captures are read without a memory cgroup limit (build_process_report with no root); "
     "doctor_advise_reach_settings_test"},
    {"numa_remote_memory", "the captures are from a machine with one NUMA node; doctor_numa_test"},
    {"numa_pool_wrong_node",
     "the captures are from a machine with one NUMA node; doctor_numa_test"},
    {"file_copies_out_of_reach",
     "no capture writes 256 MiB into private file mappings; doctor_advise_reach_settings_test"},
    {"glibc_tunable_does_not_reach",
     "the captures with glibc.malloc.hugetlb=1 keep their memory in chunks it reaches; "
     "doctor_advise_reach_settings_test"},
    {"glibc_hugetlb_pool_short",
     "no capture has glibc.malloc.hugetlb=2; doctor_pool_settings_test"},
    {"glibc_chunks_out_of_reach",
     "the glibc captures keep their large memory in chunks of at least 2 MiB, which the tunable "
     "reaches; doctor_advise_reach_settings_test"},
    {"setting_does_not_reach",
     "the captures whose setting works by MADV_HUGEPAGE have most of their memory advised; "
     "doctor_advise_reach_settings_test"},
    {"anonymous_mmap_out_of_reach",
     "no capture maps much memory itself without malloc; doctor_advise_reach_settings_test"},
    {"base_pages_out_of_reach",
     "no capture has 256 MiB on base pages in classes under the threshold that no setting reaches; "
     "doctor_advise_reach_settings_test"},
    {"tmpfs_pages_predate_huge",
     "the capture with huge=within_size on /dev/shm wrote its file after the remount (65 to 100% "
     "huge); doctor_advise_reach_test"},
    {"shmem_deny_overrides_mount",
     "needs a tmpfs mount with huge= under shmem_enabled=deny, which the capture with "
     "huge=within_size reaches already; doctor_advise_reach_test"},
};

const rule* row_named(const std::string& id) {
  for (const rule& r : rule_catalog()) {
    if (id == r.id) return &r;
  }
  return nullptr;
}

// One piece of advice as an output prints it.
struct printed {
  std::string id, level, where;
};

// Every piece of advice in the three outputs of each stored input.
std::vector<printed> printed_advice() {
  std::vector<printed> out;
  const std::regex table_line(R"(^  \d+\. (warning|note): .* \[([a-z0-9_]+)\]$)");
  const std::regex metric(R"re(^hugepage_doctor_advice\{id="([^"]*)",level="([^"]*)"\} 1$)re");
  const auto collect = [&](const std::string& where, const std::string& table,
                           const std::string& json, const std::string& prometheus) {
    std::istringstream lines(table);
    std::string line;
    std::smatch m;
    while (std::getline(lines, line)) {
      if (std::regex_match(line, m, table_line)) out.push_back({m[2], m[1], where + " (table)"});
    }
    const nlohmann::json doc = nlohmann::json::parse(json);
    for (const auto& a : doc.at("advice")) {
      out.push_back(
          {a.at("id").get<std::string>(), a.at("level").get<std::string>(), where + " (json)"});
    }
    std::istringstream metrics(prometheus);
    while (std::getline(metrics, line)) {
      if (std::regex_match(line, m, metric)) out.push_back({m[1], m[2], where + " (prometheus)"});
    }
  };
  for (const auto& [machine, change] : stored_inputs::machines()) {
    system_report s = stored_inputs::field_system();
    change(s);
    const std::vector<advice> list = advise_system(s);
    collect("system on " + machine, render_system(s, list), json_system(s, list),
            prometheus_system(s, list));
  }
  for (const std::string& name : stored_inputs::captures()) {
    const process_report p = stored_inputs::capture_report(name);
    for (const auto& [machine, change] : stored_inputs::machines()) {
      system_report s = stored_inputs::field_system_of(name);
      change(s);
      const std::vector<advice> list = advise_process(p, s);
      collect(name + " on " + machine, render_process(p, s, list), json_process(p, s, list),
              prometheus_process(p, s, list));
    }
  }
  return out;
}

TEST(DoctorRuleCatalog, IdsAreUniqueAndWordsOfLowerCase) {
  std::set<std::string> seen;
  const std::regex word("[a-z0-9]+(_[a-z0-9]+)*");
  for (const rule& r : rule_catalog()) {
    EXPECT_TRUE(seen.insert(r.id).second) << "twice: " << r.id;
    EXPECT_TRUE(std::regex_match(std::string(r.id), word)) << r.id;
    EXPECT_STREQ(rule_of(r.key).id, r.id);
    const std::string what = r.what;
    EXPECT_FALSE(what.empty()) << r.id;
    EXPECT_EQ(what.find('\n'), std::string::npos) << r.id;
    EXPECT_NE(what.back(), '.') << r.id << ": one sentence, as the advice's own, without a stop";
  }
}

TEST(DoctorRuleCatalog, EveryAdvicePrintedIsARowAtMostAtItsLevel) {
  const std::vector<printed> all = printed_advice();
  ASSERT_GT(all.size(), 100u) << "stored inputs missing under " << stored_inputs::services;
  for (const printed& a : all) {
    const rule* r = row_named(a.id);
    ASSERT_NE(r, nullptr) << a.id << " in " << a.where << " is no row of rule_catalog.cpp";
    ASSERT_TRUE(a.level == "warning" || a.level == "note") << a.level << " in " << a.where;
    // A warning's row may come as a note; a note's row never as a warning.
    if (a.level == "warning") {
      EXPECT_EQ(r->level, advice_level::warning)
          << a.id << " is a note in the catalog, a warning in " << a.where;
    }
  }
}

TEST(DoctorRuleCatalog, EveryRowIsGivenByAStoredInputOrSaysWhyNot) {
  std::set<std::string> given;
  for (const printed& a : printed_advice()) given.insert(a.id);
  for (const rule& r : rule_catalog()) {
    const auto why = out_of_stored_reach.find(r.id);
    if (why == out_of_stored_reach.end()) {
      EXPECT_EQ(given.count(r.id), 1u)
          << r.id << ": no stored input gives it; add one, or name it in out_of_stored_reach "
          << "with the reason";
    } else {
      EXPECT_EQ(given.count(r.id), 0u)
          << r.id << " is given by a stored input now: take it out of out_of_stored_reach";
    }
  }
  for (const auto& [id, why] : out_of_stored_reach) {
    EXPECT_NE(row_named(id), nullptr) << id << " in out_of_stored_reach is no row";
  }
}

// The README's table of identifiers, each id with its level, in the table's order. A row of the
// table may name several ids (`a`, `b`): each gets the row's level.
std::vector<std::pair<std::string, std::string>> readme_rules(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(text);
  std::string line;
  bool in_table = false;
  const std::regex row(R"(^\| ([^|]+) \| ([a-z]+) \| .*\|$)");
  const std::regex id("`([a-z0-9_]+)`");
  while (std::getline(lines, line)) {
    if (line == "| id | level | when |") {
      in_table = true;
      continue;
    }
    if (!in_table || line == "|---|---|---|") continue;
    std::smatch m;
    if (!std::regex_match(line, m, row)) break;
    const std::string ids = m[1], level = m[2];
    for (auto it = std::sregex_iterator(ids.begin(), ids.end(), id); it != std::sregex_iterator();
         ++it) {
      out.emplace_back((*it)[1], level);
    }
  }
  return out;
}

TEST(DoctorRuleCatalog, TheReadmeListsTheCatalogInItsOrder) {
  const std::string path = std::string(HUGEPAGE_DOCTOR_DATA) + "/../../README.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  const auto listed = readme_rules(text.str());
  std::vector<std::pair<std::string, std::string>> catalog;
  for (const rule& r : rule_catalog()) catalog.emplace_back(r.id, name_of(r.level));
  // The first place they differ, by name.
  for (std::size_t i = 0; i < std::max(listed.size(), catalog.size()); ++i) {
    const auto at = [i](const std::vector<std::pair<std::string, std::string>>& list) {
      return i < list.size() ? list[i].first + " " + list[i].second : std::string("(none)");
    };
    ASSERT_EQ(at(listed), at(catalog))
        << "id " << i + 1 << " of tools/README.md's table of identifiers (`| id | level | when |`) "
        << "against tools/doctor/rule_catalog.cpp: the table lists the catalog's rows, in order, "
        << "with their levels";
  }
}

}  // namespace
}  // namespace hugepage::doctor
