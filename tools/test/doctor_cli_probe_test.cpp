// tools/test/doctor_cli_probe_test.cpp - --probe: its JSON, and working sets sized to the memory
// cgroup.
#include "doctor_cli_support.hpp"

namespace {

using namespace doctor_cli;

TEST(DoctorCli, ProbeJson) {
  const result r = doctor({"--probe", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_NE(r.out.find("\"mode\": \"probe\""), std::string::npos);
  EXPECT_NE(r.out.find("\"working_set_bytes\": 1073741824"), std::string::npos) << r.out;
  EXPECT_GT(json_number(r.out, "base_ns_per_access"), 0);
  // The huge buffers were checked with backing_of(): MADV_COLLAPSE works on this kernel, so they
  // are (nearly) all huge; where it does not, the row still runs and says so.
  EXPECT_GE(json_number(r.out, "huge_huge_fraction"), 0.0);
}

// In a memory cgroup too small for the 1 GiB row, --probe shrinks that row to fit the headroom
// and says so, instead of being OOM-killed while it populates.
TEST(DoctorCli, ProbeSizesItselfToTheMemoryCgroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a memory cgroup";
  const hugepage::test::scratch_cgroup cgroup("memory");
  if (!cgroup.error().empty()) HUGEPAGE_SKIP_OR_FAIL(cgroup.error());
  const std::string limit = std::to_string(std::size_t{320} << 20);
  ASSERT_TRUE(cgroup.write("memory.max", limit) || cgroup.write("memory.limit_in_bytes", limit));
  run_options o;
  o.in_child = [&cgroup] { return cgroup.join(); };
  const result r = doctor({"--probe", "--json"}, o);
  ASSERT_EQ(r.code, 0) << "137 is an OOM kill; stderr: " << r.err;
  EXPECT_TRUE(valid_json(r.out)) << r.out;
  EXPECT_NE(r.out.find("1 GiB reduced to "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(cgroup.path()), std::string::npos) << "names the limit file: " << r.out;
  EXPECT_EQ(r.out.find("\"working_set_bytes\": 1073741824"), std::string::npos) << r.out;
  EXPECT_GT(json_number(r.out, "base_ns_per_access"), 0);
}

// The Prometheus text exposition format, checked line by line: every sample's family declared
// by # HELP and # TYPE before it, valid metric and label names, label values with only the
// format's escapes, a number as value, no control byte, valid UTF-8. "" when it is fine.

}  // namespace
