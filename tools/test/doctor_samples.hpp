// tools/test/doctor_samples.hpp - the stored kernel samples of tools/test/data, read by name.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace hugepage::doctor {

/// The text of tools/test/data/`name` (HUGEPAGE_DOCTOR_DATA); a missing file fails the test.
inline std::string sample(const std::string& name) {
  std::ifstream in(std::string(HUGEPAGE_DOCTOR_DATA) + "/" + name);
  EXPECT_TRUE(in) << "missing sample " << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace hugepage::doctor
