// metrics_test.cpp - the metrics of labelled containers: Prometheus text a strict parser accepts,
// JSON, label text that is not UTF-8 or holds control bytes, and the stream state of the caller.
#include "hugepage/metrics.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <locale>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hugepage/backing.hpp"
#include "hugepage/detail/utf8_text.hpp"
#include "hugepage/label.hpp"
#include "hugepage/upkeep.hpp"
#include "support.hpp"
#include "upkeep_support.hpp"

namespace {

using hugepage::test::Block;
using hugepage::units::mib;

struct fares_opts : hugepage::default_options {
  static constexpr const char* label = "upkeep-fares";
};
struct odd_opts : hugepage::default_options {
  static constexpr const char* label = "odd \"name\" \\ here";
};
struct latin1_opts : hugepage::default_options {
  static constexpr const char* label = "upkeep-caf\xe9 \xf0\x9f\x99\x82 \xed\xa0\x80";
};

struct parsed_metrics {
  std::map<std::string, std::string> type;  // family -> gauge/counter
  std::map<std::string, double> samples;    // name{labels} -> value
  std::vector<std::string> errors;
};

// A parser of the Prometheus text format, strict enough to fail on anything the format forbids:
// every line a HELP, a TYPE or a sample; HELP and TYPE once per family, before its samples;
// sample names and label names valid identifiers, label values properly escaped, values numbers.
parsed_metrics parse_prometheus(const std::string& text) {
  parsed_metrics m;
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]*)");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? (-?[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?|NaN|[+-]Inf))");
  std::map<std::string, bool> helped;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  if (text.empty() || text.back() != '\n') m.errors.push_back("does not end with a newline");
  while (std::getline(in, line)) {
    ++number;
    std::smatch g;
    const std::string where = "line " + std::to_string(number) + ": " + line;
    if (std::regex_match(line, g, help)) {
      if (helped[g[1]]) m.errors.push_back("second HELP: " + where);
      helped[g[1]] = true;
    } else if (std::regex_match(line, g, type)) {
      if (m.type.count(g[1]) != 0) m.errors.push_back("second TYPE: " + where);
      if (!helped[g[1]]) m.errors.push_back("TYPE before HELP: " + where);
      m.type[g[1]] = g[2];
    } else if (std::regex_match(line, g, sample)) {
      if (m.type.count(g[1]) == 0) m.errors.push_back("sample before its TYPE: " + where);
      const std::string key = g[1].str() + g[2].str();
      if (m.samples.count(key) != 0) m.errors.push_back("duplicate sample: " + where);
      m.samples[key] = std::stod(g[3]);
    } else {
      m.errors.push_back("not a valid line: " + where);
    }
  }
  return m;
}

TEST(Metrics, PrometheusTextParsesAndMatchesTheKernel) {
  REQUIRE_THP_AND_COLLAPSE();
  Block<fares_opts> fares(8 * mib);
  Block<odd_opts> odd(4 * mib);
  hugepage::upkeep();
  const auto coverage = hugepage::coverage_of(fares_opts::label);
  std::ostringstream out;
  hugepage::write_metrics(out);
  const parsed_metrics m = parse_prometheus(out.str());
  for (const auto& e : m.errors) ADD_FAILURE() << e;
  const auto at = [&](const std::string& key) {
    const auto it = m.samples.find(key);
    EXPECT_NE(it, m.samples.end()) << key << " missing from\n" << out.str();
    return it == m.samples.end() ? -1.0 : it->second;
  };
  const std::string fares_label = "label=\"upkeep-fares\"";
  EXPECT_EQ(at("hugepage_label_blocks{" + fares_label + "}"), 1.0);
  EXPECT_EQ(at("hugepage_label_coverage_bytes{" + fares_label + ",backing=\"thp\"}"),
            static_cast<double>(coverage.thp));
  EXPECT_EQ(at("hugepage_label_coverage_bytes{" + fares_label + ",backing=\"base\"}"),
            static_cast<double>(coverage.base));
  EXPECT_EQ(at("hugepage_label_requested_bytes{" + fares_label + ",backing=\"thp\"}"), 8.0 * mib);
  EXPECT_DOUBLE_EQ(at("hugepage_label_huge_ratio{" + fares_label + "}"), coverage.huge_fraction());
  // The label's backslash is doubled (label_text), then each of the two escaped for the format.
  EXPECT_EQ(at(R"(hugepage_label_blocks{label="odd \"name\" \\\\ here"})"), 1.0);
  EXPECT_EQ(m.type.at("hugepage_upkeep_calls_total"), "counter");
  EXPECT_GE(at("hugepage_upkeep_calls_total"), 1.0);
  EXPECT_EQ(at("hugepage_live_mappings"), static_cast<double>(hugepage::stats().live_mappings));
  for (const auto& [family, kind] : m.type) {
    EXPECT_EQ(family.rfind("hugepage_", 0), 0u) << family;
    EXPECT_EQ(kind == "counter", family.size() > 6 && family.substr(family.size() - 6) == "_total")
        << family;
  }
}

TEST(Metrics, JsonCarriesEachLabel) {
  Block<odd_opts> odd(4 * mib);
  std::ostringstream out;
  hugepage::write_metrics_json(out);
  const std::string text = out.str();
  EXPECT_NE(text.find(R"({"label":"odd \"name\" \\\\ here","blocks":1,)"), std::string::npos)
      << text;
  EXPECT_EQ(text.rfind("}}}\n"), text.size() - 4) << text;
}

struct hidden_opts : hugepage::default_options {
  static constexpr const char* label = "upkeep-hidden";
};

// Hides the file at `path` behind an empty file of mode 0 (a bind mount in a mount namespace of
// the calling child's own). Once the child is `nobody`, opening `path` fails with EACCES.
bool hide(const char* path) {
  char blank[] = "/tmp/hugepage-hidden-XXXXXX";
  const int fd = ::mkstemp(blank);
  if (fd < 0) return false;
  ::close(fd);
  const bool hidden =
      ::chmod(blank, 0) == 0 && ::mount(blank, path, nullptr, MS_BIND, nullptr) == 0;
  ::unlink(blank);  // the mount keeps the inode
  return hidden;
}

// With /proc/self/smaps and /proc/self/pagemap unreadable, coverage is unknown, and every output
// says so: backing_of and coverage_of carry the bytes as `unknown` with a NaN fraction, the
// Prometheus text NaN for each coverage part and the ratio (never 0), the JSON null.
TEST(Metrics, UnreadableProcIsUnknownNotZero) {
  if (::geteuid() != 0) HUGEPAGE_SKIP_OR_FAIL("hiding /proc files needs root (mount namespace)");
  const int code = hugepage::test::run_in_child([]() -> int {
    if (::unshare(CLONE_NEWNS) != 0) return 2;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 3;
    if (!hide("/proc/self/smaps") || !hide("/proc/self/pagemap")) return 4;
    if (!hugepage::test::become_nobody()) return 5;
    if (::open("/proc/self/smaps", O_RDONLY) >= 0 || ::open("/proc/self/pagemap", O_RDONLY) >= 0) {
      return 6;
    }
    Block<hidden_opts> block(4 * mib);
    const hugepage::backing_report r = hugepage::backing_of(block.get(), 4 * mib);
    std::fprintf(stderr, "child: source %s, unknown %zu, note %s\n", hugepage::name_of(r.source),
                 r.unknown, r.note.c_str());
    if (r.source != hugepage::backing_source::unavailable || r.known()) return 10;
    if (r.unknown != 4 * mib || r.bytes != 4 * mib) return 11;
    if (r.thp + r.hugetlb_2m + r.hugetlb_1g + r.base + r.not_resident + r.unmapped != 0) return 12;
    if (!std::isnan(r.huge_fraction())) return 13;
    const hugepage::backing_report c = hugepage::coverage_of(hidden_opts::label);
    if (c.unknown != 4 * mib || c.known() || !std::isnan(c.huge_fraction())) return 20;

    std::ostringstream prom, json;
    hugepage::write_metrics(prom);
    hugepage::write_metrics_json(json);
    std::fprintf(stderr, "child: prometheus:\n%s\nchild: json: %s\n", prom.str().c_str(),
                 json.str().c_str());
    const parsed_metrics m = parse_prometheus(prom.str());
    if (!m.errors.empty()) return 30;
    const std::string label = "{label=\"upkeep-hidden\"";
    for (const char* part :
         {"thp", "hugetlb_2m", "hugetlb_1g", "base", "not_resident", "unmapped"}) {
      const auto it =
          m.samples.find("hugepage_label_coverage_bytes" + label + ",backing=\"" + part + "\"}");
      if (it == m.samples.end() || !std::isnan(it->second)) return 31;
    }
    const auto unknown =
        m.samples.find("hugepage_label_coverage_bytes" + label + ",backing=\"unknown\"}");
    if (unknown == m.samples.end() || unknown->second != 4.0 * mib) return 32;
    const auto ratio = m.samples.find("hugepage_label_huge_ratio" + label + "}");
    if (ratio == m.samples.end() || !std::isnan(ratio->second)) return 33;
    const auto unattributed =
        m.samples.find("hugepage_label_node_unattributed_bytes" + label + "}");
    if (unattributed == m.samples.end() || !std::isnan(unattributed->second)) return 35;
    if (json.str().find("\"nodes_unattributed\":null") == std::string::npos) return 36;
    const auto exact = m.samples.find("hugepage_label_coverage_exact" + label + "}");
    if (exact == m.samples.end() || !std::isnan(exact->second)) return 37;
    const std::string expected =
        "\"coverage_bytes\":{\"thp\":null,\"hugetlb_2m\":null,\"hugetlb_1g\":null,\"base\":null,"
        "\"not_resident\":null,\"unmapped\":null,\"unknown\":4194304},\"huge_ratio\":null,"
        "\"exact\":false,\"note\":\"";
    if (json.str().find(expected) == std::string::npos) return 34;
    return 0;
  });
  EXPECT_EQ(code, 0) << "child check " << code << " failed; see its output above";
}

// Groups digits in threes with '.' and writes ',' as the decimal point.
struct grouping_punct : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

// The text each writer gives into a stream set up by `setup`, and into a plain one just before
// and just after (coverage is read from the kernel: khugepaged may change it in between).
template <class Setup>
void expect_unchanged_by(const char* what, Setup setup) {
  for (const bool json : {false, true}) {
    const auto write = [json](std::ostream& out) {
      if (json) {
        hugepage::write_metrics_json(out);
      } else {
        hugepage::write_metrics(out);
      }
    };
    std::ostringstream before, odd, after;
    write(before);
    setup(odd);
    write(odd);
    write(after);
    EXPECT_TRUE(odd.str() == before.str() || odd.str() == after.str())
        << what << (json ? " json" : " prometheus") << ":\n"
        << odd.str() << "\nplain:\n"
        << before.str();
  }
}

TEST(Metrics, StreamStateOfTheCallerChangesNothing) {
  Block<fares_opts> fares(8 * mib);
  expect_unchanged_by("hex", [](std::ostream& o) { o << std::hex << std::showbase; });
  expect_unchanged_by("showpos, scientific", [](std::ostream& o) {
    o << std::showpos << std::scientific << std::setprecision(1);
  });
  expect_unchanged_by("setw, setfill",
                      [](std::ostream& o) { o << std::setw(12) << std::setfill('*'); });
  // Wider than the whole text: a formatted write of it would be padded.
  expect_unchanged_by("setw(1 MiB)", [](std::ostream& o) { o << std::setw(1 << 20); });
  expect_unchanged_by("grouping locale", [](std::ostream& o) {
    o.imbue(std::locale(std::locale::classic(), new grouping_punct));
  });
}

// Whether `text` holds a control character as a raw byte (a newline ends each line: allowed).
bool has_raw_control(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b < 0x20 && b != '\n') || b == 0x7F) return true;
    if (b == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      return true;  // U+0080 to U+009F
    }
  }
  return false;
}

TEST(Metrics, LabelBytesThatAreNotUtf8AreWrittenVisibly) {
  Block<latin1_opts> odd(2 * mib);
  // Valid text passes unchanged (the four-byte sequence); the Latin-1 byte and the surrogate's
  // three bytes become \xHH, whose backslash the format escapes once more.
  const std::string expected = R"(upkeep-caf\\xE9 )"
                               "\xf0\x9f\x99\x82"
                               R"( \\xED\\xA0\\x80)";
  std::ostringstream prom, json;
  hugepage::write_metrics(prom);
  hugepage::write_metrics_json(json);
  for (const std::string& text : {prom.str(), json.str()}) {
    EXPECT_EQ(hugepage::detail::valid_utf8(text), text) << "not valid UTF-8:\n" << text;
  }
  const parsed_metrics m = parse_prometheus(prom.str());
  for (const auto& e : m.errors) ADD_FAILURE() << e;
  EXPECT_EQ(m.samples.count("hugepage_label_blocks{label=\"" + expected + "\"}"), 1u) << prom.str();
  EXPECT_NE(json.str().find("{\"label\":\"" + expected + "\",\"blocks\":1,"), std::string::npos)
      << json.str();
}

struct t_ff_opts : hugepage::default_options {
  static constexpr const char* label = "t\xff";
};
struct t_fe_opts : hugepage::default_options {
  static constexpr const char* label = "t\xfe";
};
struct t_replacement_opts : hugepage::default_options {
  static constexpr const char* label = "t\xEF\xBF\xBD";  // "t" U+FFFD
};
struct t_escape_opts : hugepage::default_options {
  static constexpr const char* label = "t\x1b[31m";  // ESC: a terminal colour
};
struct t_backslash_opts : hugepage::default_options {
  static constexpr const char* label = "t\\xFF";  // the four characters \xFF, as typed
};
struct empty_opts : hugepage::default_options {
  static constexpr const char* label = "";
};

// Labels that differ only in bytes that are not UTF-8, in a control byte, or in being empty are
// distinct series: each parses, none is a duplicate (Prometheus rejects a scrape with one), the
// text is valid UTF-8 without a raw control byte, and the JSON names each label once.
TEST(Metrics, DistinctLabelsAreDistinctValidSeries) {
  Block<t_ff_opts> ff(2 * mib);
  Block<t_fe_opts> fe(2 * mib);
  Block<t_replacement_opts> replacement(2 * mib);
  Block<t_escape_opts> escape(2 * mib);
  Block<t_backslash_opts> backslash(2 * mib);
  Block<empty_opts> empty(2 * mib);
  // The label values as the Prometheus text carries them (label_text, then the format's escapes).
  const std::vector<std::string> prometheus = {R"(t\\xFF)",     R"(t\\xFE)",   "t\xEF\xBF\xBD",
                                               R"(t\\x1B[31m)", R"(t\\\\xFF)", R"(\\(empty))"};
  std::ostringstream prom, json;
  hugepage::write_metrics(prom);
  hugepage::write_metrics_json(json);
  const parsed_metrics m = parse_prometheus(prom.str());
  for (const auto& e : m.errors) ADD_FAILURE() << e;
  for (const std::string& text : {prom.str(), json.str()}) {
    EXPECT_EQ(hugepage::detail::valid_utf8(text), text) << "not valid UTF-8:\n" << text;
    EXPECT_FALSE(has_raw_control(text)) << text;
  }
  for (const std::string& value : prometheus) {
    EXPECT_EQ(m.samples.count("hugepage_label_blocks{label=\"" + value + "\"}"), 1u)
        << value << " in\n"
        << prom.str();
    // JSON escapes a backslash as the Prometheus text does: the same text, once.
    const std::string key = "{\"label\":\"" + value + "\",";
    const std::size_t at = json.str().find(key);
    EXPECT_NE(at, std::string::npos) << key << " in\n" << json.str();
    EXPECT_EQ(json.str().find(key, at + 1), std::string::npos) << key << " twice";
  }
  EXPECT_EQ(m.samples.count(R"(hugepage_label_blocks{label=""})"), 0u) << prom.str();
}

// escaped_text() is undone by reading "\\" as a backslash and "\xHH" as a byte: distinct texts
// stay distinct. Every byte alone and every pair of bytes, and a few longer texts.
TEST(Metrics, EscapedTextIsInjectiveValidUtf8WithoutControls) {
  using hugepage::detail::escaped_text;
  const auto unescape = [](const std::string& t) {
    std::string out;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\' && i + 1 < t.size() && t[i + 1] == '\\') {
        out += '\\';
        ++i;
      } else if (t[i] == '\\' && i + 3 < t.size() && t[i + 1] == 'x') {
        out += static_cast<char>(std::stoi(t.substr(i + 2, 2), nullptr, 16));
        i += 3;
      } else {
        out += t[i];
      }
    }
    return out;
  };
  std::vector<std::string> texts = {"",
                                    "plain",
                                    "\\",
                                    "\\\\xFF",
                                    "\xEF\xBF\xBD",
                                    "caf\xc3\xa9",
                                    "\xc2\x85",
                                    "\xf0\x9f\x99\x82",
                                    "\xed\xa0\x80"};
  for (int a = 0; a < 256; ++a) {
    texts.push_back(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) {
      texts.push_back(std::string{static_cast<char>(a), static_cast<char>(b)});
    }
  }
  for (const std::string& text : texts) {
    const std::string e = escaped_text(text);
    ASSERT_EQ(unescape(e), text) << e;
    ASSERT_EQ(hugepage::detail::valid_utf8(e), e) << e;
    ASSERT_FALSE(has_raw_control(e)) << e;
  }
  EXPECT_EQ(escaped_text("t\xff"), R"(t\xFF)");
  EXPECT_EQ(escaped_text("\xEF\xBF\xBD"), "\xEF\xBF\xBD");  // U+FFFD stays U+FFFD
  EXPECT_EQ(escaped_text("a\x1b"), R"(a\x1B)");
  EXPECT_EQ(escaped_text("a\\b"), R"(a\\b)");
}

TEST(Metrics, Utf8CheckFollowsTheStandardsDefinition) {
  using hugepage::detail::valid_utf8;
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(valid_utf8("plain"), "plain");
  EXPECT_EQ(valid_utf8("\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf"),
            "\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf");
  EXPECT_EQ(valid_utf8("\xc0\xaf"), r + r);                  // overlong '/'
  EXPECT_EQ(valid_utf8("\xe0\x80\xaf"), r + r + r);          // overlong, three bytes
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), r + r + r + r);  // past U+10FFFF
  EXPECT_EQ(valid_utf8("a\xe2\x82"), "a" + r + r);           // cut short
  EXPECT_EQ(valid_utf8("\xff"), r);
}

}  // namespace
