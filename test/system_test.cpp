// system_test.cpp - read_system_state() and its parsers against this machine and constructed
// values.
#include "hugepage/system.hpp"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "hugepage/detail/proc_file.hpp"
#include "support.hpp"

namespace {

using hugepage::collapse_support;
using hugepage::hugetlb_pool;

// Returns the value of `key` in /proc/meminfo ("HugePages_Total:     600" -> 600).
std::optional<std::uint64_t> meminfo_value(const std::string& key) {
  std::error_code ec;
  const std::string text = hugepage::detail::read_file("/proc/meminfo", ec);
  if (ec) return std::nullopt;
  const std::string needle = key + ":";
  const auto at = text.find(needle);
  if (at == std::string::npos) return std::nullopt;
  return hugepage::detail::parse_u64(std::string_view(text).substr(at + needle.size()));
}

TEST(SystemState, KernelReleaseMatchesUname) {
  const hugepage::system_state state = hugepage::read_system_state(/*probe=*/false);
  utsname names{};
  ASSERT_EQ(::uname(&names), 0);
  EXPECT_FALSE(state.kernel_release.empty());
  EXPECT_EQ(state.kernel_release, names.release);
  EXPECT_EQ(state.collapse, collapse_support::unknown) << "probe=false must not probe";
}

TEST(SystemState, ThpEnabledMatchesSysfs) {
  std::error_code ec;
  const std::string text =
      hugepage::detail::read_file("/sys/kernel/mm/transparent_hugepage/enabled", ec);
  if (ec) HUGEPAGE_SKIP_OR_FAIL("no THP on this kernel: " + ec.message());
  const auto open = text.find('[');
  const auto close = text.find(']');
  ASSERT_NE(open, std::string::npos) << text;
  ASSERT_NE(close, std::string::npos) << text;
  const std::string bracketed = text.substr(open + 1, close - open - 1);

  const hugepage::system_state state = hugepage::read_system_state(/*probe=*/false);
  ASSERT_TRUE(state.thp.enabled.has_value());
  EXPECT_TRUE(*state.thp.enabled == "always" || *state.thp.enabled == "madvise" ||
              *state.thp.enabled == "never")
      << *state.thp.enabled;
  EXPECT_EQ(*state.thp.enabled, bracketed);
  ASSERT_TRUE(state.thp.pmd_bytes.has_value());
  EXPECT_EQ(*state.thp.pmd_bytes, hugepage::thp_page_bytes());
}

TEST(SystemState, PoolsContainTheDefaultPoolWithMeminfoTotal) {
  const auto page_kib = meminfo_value("Hugepagesize");
  const auto total = meminfo_value("HugePages_Total");
  if (!page_kib || !total) HUGEPAGE_SKIP_OR_FAIL("no hugetlb lines in /proc/meminfo");
  if (*page_kib != 2048) GTEST_SKIP() << "default huge page size is " << *page_kib << " kB";

  const hugepage::system_state state = hugepage::read_system_state(/*probe=*/false);
  const hugetlb_pool* pool_2m = nullptr;
  for (std::size_t i = 0; i < state.pools.size(); ++i) {
    const hugetlb_pool& pool = state.pools[i];
    EXPECT_FALSE(pool.node.has_value());
    if (i > 0) {
      EXPECT_LT(state.pools[i - 1].page_bytes, pool.page_bytes) << "not ascending";
    }
    if (pool.page_bytes == std::size_t{2} << 20) pool_2m = &pool;
  }
  ASSERT_NE(pool_2m, nullptr) << "no 2 MiB pool in read_system_state().pools";
  ASSERT_TRUE(pool_2m->total.has_value());
  // Nobody resizes the pool while the tests run, so the two reads agree.
  EXPECT_EQ(*pool_2m->total, *total);
  ASSERT_TRUE(pool_2m->free.has_value());
  ASSERT_TRUE(pool_2m->reserved.has_value());
  EXPECT_LE(*pool_2m->free, *pool_2m->total + pool_2m->surplus.value_or(0));
  ASSERT_TRUE(pool_2m->available().has_value());
  EXPECT_LE(*pool_2m->available(), *pool_2m->free + pool_2m->overcommit.value_or(0));
}

TEST(SystemState, ReadPoolOfMissingSizeIsEmpty) {
  // 4 MiB pages exist on no x86-64 or arm64/4K kernel.
  EXPECT_FALSE(hugepage::read_pool(std::size_t{4} << 20).has_value());
  EXPECT_TRUE(hugepage::pool_page_sizes("/nonexistent/hugepages").empty());
}

TEST(SystemState, ProbeCollapseWorks) {
  const collapse_support support = hugepage::probe_collapse();
  if (support != collapse_support::works) {
    HUGEPAGE_SKIP_OR_FAIL(std::string("MADV_COLLAPSE probe: ") + hugepage::name_of(support));
  }
  EXPECT_EQ(hugepage::read_system_state(/*probe=*/true).collapse, collapse_support::works);
}

TEST(HugetlbPool, AvailableIsFreeMinusReserved) {
  hugetlb_pool pool;
  EXPECT_FALSE(pool.available().has_value()) << "no free count: unknown, not zero";

  pool.free = 10;
  EXPECT_EQ(pool.available(), 10u) << "reserved unknown counts as 0";
  pool.reserved = 3;
  EXPECT_EQ(pool.available(), 7u);
  pool.reserved = 10;
  EXPECT_EQ(pool.available(), 0u);
  pool.reserved = 12;  // transiently possible while counters are read one by one
  EXPECT_EQ(pool.available(), 0u) << "no wrap-around";
}

TEST(HugetlbPool, AvailableAddsOvercommitRoom) {
  hugetlb_pool pool;
  pool.free = 4;
  pool.reserved = 1;
  pool.overcommit = 5;
  EXPECT_EQ(pool.available(), 3u) << "surplus unknown: no room assumed";
  pool.surplus = 2;
  EXPECT_EQ(pool.available(), 6u);
  pool.surplus = 5;
  EXPECT_EQ(pool.available(), 3u);
  pool.surplus = 9;
  EXPECT_EQ(pool.available(), 3u) << "surplus above overcommit adds nothing";
  pool.free = 0;
  pool.reserved = 0;
  pool.surplus = 0;
  pool.overcommit = UINT64_C(1) << 40;
  EXPECT_EQ(pool.available(), UINT64_C(1) << 40);
}

TEST(SelectedMode, PicksTheBracketedWord) {
  using hugepage::detail::selected_mode;
  EXPECT_EQ(selected_mode("always [madvise] never\n"), "madvise");
  EXPECT_EQ(selected_mode("[always] madvise never\n"), "always");
  EXPECT_EQ(selected_mode("always madvise [never]"), "never");
  EXPECT_EQ(selected_mode("always defer defer+madvise [madvise] never\n"), "madvise");
  EXPECT_EQ(selected_mode("always within_size advise [never] deny force\n"), "never");
}

TEST(SelectedMode, WithoutBracketsReturnsTrimmedText) {
  using hugepage::detail::selected_mode;
  EXPECT_EQ(selected_mode("never\n"), "never");
  EXPECT_EQ(selected_mode("madvise  \n\n"), "madvise");
  EXPECT_EQ(selected_mode(""), "");
  EXPECT_EQ(selected_mode("\n"), "");
  EXPECT_EQ(selected_mode("always [madvise"), "always [madvise") << "unclosed bracket";
  EXPECT_EQ(selected_mode("[]"), "");
}

TEST(ParseU64, Numbers) {
  using hugepage::detail::parse_u64;
  EXPECT_EQ(parse_u64("0"), UINT64_C(0));
  EXPECT_EQ(parse_u64("600\n"), UINT64_C(600));
  EXPECT_EQ(parse_u64("2048 kB"), UINT64_C(2048));
  EXPECT_EQ(parse_u64("12abc"), UINT64_C(12)) << "a leading number";
  EXPECT_EQ(parse_u64("007"), UINT64_C(7));
}

TEST(ParseU64, LeadingSpacesAndTabs) {
  using hugepage::detail::parse_u64;
  EXPECT_EQ(parse_u64("     600"), UINT64_C(600));
  EXPECT_EQ(parse_u64("\t\t42 kB"), UINT64_C(42));
  EXPECT_EQ(parse_u64(" \t 9"), UINT64_C(9));
  EXPECT_FALSE(parse_u64("\n5").has_value()) << "only spaces and tabs are skipped";
}

TEST(ParseU64, EmptyAndNonNumeric) {
  using hugepage::detail::parse_u64;
  EXPECT_FALSE(parse_u64("").has_value());
  EXPECT_FALSE(parse_u64("   ").has_value());
  EXPECT_FALSE(parse_u64("kB").has_value());
  EXPECT_FALSE(parse_u64("-1").has_value());
  EXPECT_FALSE(parse_u64("+1").has_value());
  EXPECT_FALSE(parse_u64(std::string_view()).has_value());
}

TEST(ParseU64, Overflow) {
  using hugepage::detail::parse_u64;
  EXPECT_EQ(parse_u64("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_u64("18446744073709551614"), UINT64_MAX - 1);
  EXPECT_FALSE(parse_u64("18446744073709551616").has_value());
  EXPECT_FALSE(parse_u64("18446744073709551620").has_value());
  EXPECT_FALSE(parse_u64("99999999999999999999").has_value());
  EXPECT_FALSE(parse_u64("184467440737095516150").has_value());
  EXPECT_EQ(parse_u64("1844674407370955161"), UINT64_C(1844674407370955161));
}

TEST(ParseU64, IsConstexpr) {
  static_assert(*hugepage::detail::parse_u64(" 123") == 123);
  static_assert(!hugepage::detail::parse_u64("x").has_value());
  SUCCEED();
}

TEST(CollapseSupport, Names) {
  EXPECT_STREQ(hugepage::name_of(collapse_support::works), "works");
  EXPECT_STREQ(hugepage::name_of(collapse_support::unsupported), "unsupported");
  EXPECT_STREQ(hugepage::name_of(collapse_support::transient), "transient failure");
  EXPECT_STREQ(hugepage::name_of(collapse_support::unknown), "unknown");
}

// ---- the effective PMD-size THP mode (thp_mode) ------------------------------------------------

TEST(ThpMode, PerSizeSwitchOverridesTheTopLevelUnlessItInherits) {
  using hugepage::thp_mode;
  using hugepage::detail::effective_thp_mode;
  struct top_file {
    const char* text;
    thp_mode mode;
  };
  const top_file tops[] = {{"[always] madvise never\n", thp_mode::always},
                           {"always [madvise] never\n", thp_mode::madvise},
                           {"always madvise [never]\n", thp_mode::never}};
  struct per_size_file {
    const char* text;
    std::optional<thp_mode> mode;  // empty: inherit
  };
  const per_size_file sizes[] = {{"[always] inherit madvise never\n", thp_mode::always},
                                 {"always [inherit] madvise never\n", std::nullopt},
                                 {"always inherit [madvise] never\n", thp_mode::madvise},
                                 {"always inherit madvise [never]\n", thp_mode::never}};
  for (const top_file& top : tops) {
    // No per-size file (before Linux 6.8): the top-level file alone.
    EXPECT_EQ(effective_thp_mode(top.text, std::nullopt), top.mode) << top.text;
    for (const per_size_file& size : sizes) {
      SCOPED_TRACE(std::string(top.text) + " / " + size.text);
      EXPECT_EQ(effective_thp_mode(top.text, std::string_view(size.text)),
                size.mode.value_or(top.mode));
    }
  }
  // A per-size setting decides even where the top-level file says nothing readable.
  EXPECT_EQ(effective_thp_mode("", std::string_view("always inherit [madvise] never")),
            thp_mode::madvise);
  // Nothing to decide from: empty, not a guess.
  EXPECT_EQ(effective_thp_mode("", std::nullopt), std::nullopt);
  EXPECT_EQ(effective_thp_mode("", std::string_view("always [inherit] madvise never")),
            std::nullopt);
  EXPECT_EQ(effective_thp_mode("always [madvise] never", std::string_view("[sometimes]")),
            std::nullopt);
  EXPECT_EQ(effective_thp_mode("[inherit]", std::nullopt), std::nullopt) << "no top-level word";
  static_assert(effective_thp_mode("always [madvise] never", std::string_view("[never]")) ==
                hugepage::thp_mode::never);
}

TEST(ThpMode, ReaderTakesTheTopLevelFileAloneWhereThePerSizeFileIsAbsent) {
  char dir[] = "/tmp/hugepage-thp-mode-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string top = std::string(dir) + "/enabled";
  const std::string per_size = std::string(dir) + "/hugepages-2048kB-enabled";
  const auto write = [](const std::string& path, const char* text) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  using hugepage::thp_mode;
  using hugepage::detail::read_thp_mode_at;
  write(top, "always madvise [never]\n");
  EXPECT_EQ(read_thp_mode_at(top.c_str(), per_size.c_str()), thp_mode::never);
  write(per_size, "always inherit [madvise] never\n");
  EXPECT_EQ(read_thp_mode_at(top.c_str(), per_size.c_str()), thp_mode::madvise);
  write(per_size, "always [inherit] madvise never\n");
  EXPECT_EQ(read_thp_mode_at(top.c_str(), per_size.c_str()), thp_mode::never);
  std::remove(top.c_str());
  EXPECT_EQ(read_thp_mode_at(top.c_str(), per_size.c_str()), std::nullopt) << "inherit, no top";
  std::remove(per_size.c_str());
  ::rmdir(dir);
}

TEST(ThpMode, SystemStateReportsBothFilesAndTheEffectiveMode) {
  std::error_code ec;
  const std::string top =
      hugepage::detail::read_file("/sys/kernel/mm/transparent_hugepage/enabled", ec);
  if (ec) HUGEPAGE_SKIP_OR_FAIL("no THP on this kernel: " + ec.message());
  const std::string path = "/sys/kernel/mm/transparent_hugepage/hugepages-" +
                           std::to_string(hugepage::thp_page_bytes() / 1024) + "kB/enabled";
  const std::string per_size = hugepage::detail::read_file(path.c_str(), ec);
  const bool has_per_size = !ec;  // absent before Linux 6.8: the top-level file decides alone
  const hugepage::system_state state = hugepage::read_system_state(/*probe=*/false);
  const auto expected = hugepage::detail::effective_thp_mode(
      top, has_per_size ? std::optional<std::string_view>(per_size) : std::nullopt);
  ASSERT_TRUE(expected.has_value()) << top << " / " << per_size;
  EXPECT_EQ(state.thp.pmd_mode, expected);
  EXPECT_EQ(hugepage::read_thp_mode(), expected);
  if (has_per_size) {
    EXPECT_EQ(state.thp.pmd_enabled, hugepage::detail::selected_mode(per_size));
  } else {
    EXPECT_EQ(state.thp.pmd_enabled, std::nullopt);
  }
}

}  // namespace
