// tools/test/doctor_cli_prometheus_test.cpp - --format prometheus: a valid exposition.
#include "doctor_cli_support.hpp"

namespace {

using namespace doctor_cli;

TEST(DoctorCli, PrometheusFormat) {
  const result r = doctor({"--format", "prometheus"});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.err;
  EXPECT_EQ(exposition_problem(r.out), "") << r.out;
  EXPECT_NE(r.out.find("\nhugepage_doctor_hugetlb_pool_pages{size_bytes=\"2097152\",node=\"all\","
                       "state=\"total\"} "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# TYPE hugepage_doctor_vmstat_total counter\n"), std::string::npos);
  const auto at = r.out.find("\nhugepage_doctor_warnings ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(std::strtol(r.out.c_str() + at + 26, nullptr, 10) > 0, r.code == 1) << r.out;
  EXPECT_EQ(exposition_problem("x 1\n"), "no TYPE: x 1");  // the checker itself
  EXPECT_EQ(exposition_problem("# TYPE x gauge\nx{a=\"\x1b\"} 1\n"),
            "control byte in: x{a=\"\x1b\"} 1");
}

}  // namespace
