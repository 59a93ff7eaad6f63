// tools/test/doctor_services_test.cpp - the /proc files of real services (captured by
// scripts/field --capture, that is hugepage-doctor --capture, from Debian's Redis, PostgreSQL,
// OpenJDK, memcached, MariaDB, Node.js, numpy, busybox, shared memory, and perl under glibc,
// jemalloc, tcmalloc and mimalloc), each read back with the doctor's own reader (capture.hpp:
// chunk headers, mounts and parent status included) and checked against the expectations
// scripts/field checks on the live process: advice ids it must and must not give, exact command
// lines, table lines, exit status. (live-table and raises lines are for scripts/field only,
// capture-table and capture-command lines for the fixture only.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "advice.hpp"
#include "advise_process.hpp"
#include "capture.hpp"
#include "collect_process.hpp"
#include "doctor_stored_inputs.hpp"
#include "hugepage/page_size.hpp"
#include "process_report.hpp"
#include "render_table.hpp"
#include "system_report.hpp"

namespace hugepage::doctor {
namespace {

using stored_inputs::services;

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The machine scripts/field runs on (doctor_stored_inputs.hpp): a case's `machine` lines set
// what its state changed (shmem_enabled, the pool).
using stored_inputs::field_system;

TEST(DoctorServices, EveryCaptureMeetsItsExpectations) {
  const auto all = stored_inputs::captures();
  ASSERT_GE(all.size(), 11u) << "fixtures missing under " << services;
  for (const std::string& name : all) {
    SCOPED_TRACE(name);
    const std::string dir = services + "/" + name + "/";
    std::string error;
    const auto captured = read_capture(dir, error);
    ASSERT_TRUE(captured.has_value()) << error;
    const process_report p =
        build_process_report(captured->pid, captured->files, 10, "/nonexistent");
    const auto expect = slurp(dir + "expect");
    ASSERT_TRUE(expect.has_value());
    system_report s = field_system();
    std::istringstream machine(*expect);
    std::string line;
    while (std::getline(machine, line)) {
      std::istringstream words(line);
      std::string kind, key;
      words >> kind >> key;
      if (kind != "machine") continue;
      if (key == "shmem_enabled") {
        std::string value;
        words >> value;
        s.thp.shmem_enabled = value;
      } else if (key == "pool-2m") {  // total, free, reserved pages
        std::uint64_t total = 0, free = 0, reserved = 0;
        ASSERT_TRUE(words >> total >> free >> reserved) << line;
        s.pools[0].total = total;
        s.pools[0].free = free;
        s.pools[0].reserved = reserved;
      } else {
        ADD_FAILURE() << "unknown machine setting: " << line;
      }
    }
    const std::vector<advice> list = advise_process(p, s);
    const std::string table = render_process(p, s, list);
    std::string commands;
    for (const auto& a : list) {
      for (const auto& c : a.commands) commands += c + "\n";
    }
    const auto has = [&](const std::string& id) {
      return std::any_of(list.begin(), list.end(), [&](const advice& a) { return a.id() == id; });
    };
    std::istringstream lines(*expect);
    int checked = 0;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      const auto space = line.find(' ');
      ASSERT_NE(space, std::string::npos) << line;
      std::string kind = line.substr(0, space);
      const std::string arg = line.substr(space + 1);
      ++checked;
      // capture-*: numbers of the captured process that differ from run to run (a mapping the
      // kernel merged with a neighbour), checked on the fixture only.
      if (kind == "capture-table") kind = "table";
      if (kind == "capture-command") kind = "command";
      if (kind == "must") {
        EXPECT_TRUE(has(arg)) << arg << "\n" << table;
      } else if (kind == "must-not") {
        EXPECT_FALSE(has(arg)) << arg << "\n" << table;
      } else if (kind == "command") {
        EXPECT_NE(commands.find(arg + "\n"), std::string::npos) << arg << "\n" << table;
        EXPECT_NE(table.find("     $ " + arg + "\n"), std::string::npos) << arg;
      } else if (kind == "no-command-containing") {
        EXPECT_EQ(commands.find(arg), std::string::npos) << arg << "\n" << commands;
      } else if (kind == "table") {
        EXPECT_NE(table.find(arg), std::string::npos) << arg << "\n" << table;
      } else if (kind == "live-table" || kind == "raises" || kind == "machine") {
        --checked;  // scripts/field only: versions from the live package database, and the
                    // huge share measured before and after the fix state; the machine as the
                    // state left it, which the live run has
      } else if (kind == "no-raise-said") {
        EXPECT_TRUE(has(arg)) << arg << "\n" << table;  // the advance notice; the rest is live
      } else if (kind == "exit") {
        EXPECT_EQ(has_warning(list) ? "1" : "0", arg) << table;
      } else {
        ADD_FAILURE() << "unknown expectation: " << line;
      }
    }
    EXPECT_GE(checked, 3) << "an expect file that checks little";
  }
}

}  // namespace
}  // namespace hugepage::doctor
