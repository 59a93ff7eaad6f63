// test/public_api_test.cpp - the public names the tools and benchmarks use instead of detail/:
// label_mapping()/unlabel_mapping() (label.hpp), record_mapping()/
// take_mapping_record() (mapping_records.hpp) and collapse_growth() (collapse.hpp), each against
// the contract its header states. format_bytes() and prometheus_exposition are covered where the
// library's messages and metrics use them (refusal_test, metrics_test).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "hugepage/collapse.hpp"
#include "hugepage/label.hpp"
#include "hugepage/mapping_records.hpp"
#include "hugepage/os.hpp"
#include "hugepage/process_view.hpp"
#include "support.hpp"

namespace hugepage::test {
namespace {

// `bytes` of anonymous memory starting on a 2 MiB boundary, unmapped at the end of the test.
class aligned_mapping {
 public:
  explicit aligned_mapping(std::size_t bytes) : bytes_(bytes + kHuge) {
    raw_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw_ == MAP_FAILED) raw_ = nullptr;
    const auto at = reinterpret_cast<std::uintptr_t>(raw_);
    start_ = reinterpret_cast<char*>((at + kHuge - 1) & ~(kHuge - 1));
  }
  ~aligned_mapping() {
    if (raw_ != nullptr) ::munmap(raw_, bytes_);
  }
  aligned_mapping(const aligned_mapping&) = delete;
  aligned_mapping& operator=(const aligned_mapping&) = delete;
  bool ok() const { return raw_ != nullptr; }
  char* get() const { return start_; }

 private:
  std::size_t bytes_;
  void* raw_ = nullptr;
  char* start_ = nullptr;
};

std::optional<label_report> report_of(const std::string& label) {
  for (const label_report& r : labels()) {
    if (r.label == label) return r;
  }
  return std::nullopt;
}

TEST(PublicApi, LabelMappingCountsTheMappingUntilUnlabelled) {
  aligned_mapping m(kHuge);
  ASSERT_TRUE(m.ok());
  static constexpr const char* label = "public-api-label";
  label_mapping(m.get(), label, kHuge, backing::thp);
  const std::optional<label_report> live = report_of(label);
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->blocks, 1u);
  EXPECT_EQ(live->requested_thp, kHuge);
  EXPECT_EQ(live->obtained_thp, kHuge);
  EXPECT_EQ(live->fallbacks, 0u);
  EXPECT_EQ(live->coverage.bytes, kHuge);
  EXPECT_EQ(coverage_of(label).bytes, kHuge);

  unlabel_mapping(m.get());
  const std::optional<label_report> gone = report_of(label);
  ASSERT_TRUE(gone.has_value());  // a label seen since start stays listed, with zeroes
  EXPECT_EQ(gone->blocks, 0u);
  EXPECT_EQ(gone->requested_thp, 0u);
  EXPECT_EQ(gone->obtained_thp, 0u);
  EXPECT_EQ(coverage_of(label).bytes, 0u);
  unlabel_mapping(m.get());  // not counted any more: nothing
  EXPECT_EQ(report_of(label)->blocks, 0u);
}

TEST(PublicApi, MappingRecordIsWhatTheMappingObtainedUntilTaken) {
  aligned_mapping m(kHuge);
  ASSERT_TRUE(m.ok());
  record_mapping(m.get(), kHuge, backing::base);
  // A labelled block counts what its record says it obtained, as a strategy's fallback does.
  static constexpr const char* label = "public-api-record";
  label_mapping(m.get(), label, kHuge, backing::thp);
  const std::optional<label_report> r = report_of(label);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->requested_thp, kHuge);
  EXPECT_EQ(r->obtained_base, kHuge);
  EXPECT_EQ(r->obtained_thp, 0u);
  EXPECT_EQ(r->fallbacks, 1u);
  unlabel_mapping(m.get());

  EXPECT_EQ(take_mapping_record(m.get(), backing::thp), backing::base);
  EXPECT_EQ(take_mapping_record(m.get(), backing::thp), backing::thp);  // taken: `otherwise`
}

TEST(PublicApi, CollapseGrowthIsTheFillOfEachChunkWithDataNotYetHuge) {
  aligned_mapping m(2 * kHuge);
  ASSERT_TRUE(m.ok());
  // Base pages whatever the THP mode: a fault never brings a huge page here.
  ASSERT_EQ(::madvise(m.get(), 2 * kHuge, MADV_NOHUGEPAGE), 0);
  m.get()[0] = 1;  // one base page of data in the first chunk; none in the second
  const process_view self;
  const auto lo = reinterpret_cast<std::uintptr_t>(m.get());
  const std::optional<std::size_t> growth = collapse_growth(self, lo, lo + 2 * kHuge);
  if (!growth) HUGEPAGE_SKIP_OR_FAIL("PAGEMAP_SCAN is unavailable (Linux before 6.7)");
  EXPECT_EQ(*growth, kHuge - os::base_page_size());
  EXPECT_EQ(collapse_growth(self, lo + kHuge, lo + 2 * kHuge), std::optional<std::size_t>(0));
}

TEST(PublicApi, CollapseGrowthIsUnknownWithoutThePagemap) {
  const process_view gone(INT_MAX);  // above any pid_max: no such process
  ASSERT_LT(gone.pagemap_fd(), 0);
  EXPECT_EQ(collapse_growth(gone, 0, kHuge), std::nullopt);
}

}  // namespace
}  // namespace hugepage::test
