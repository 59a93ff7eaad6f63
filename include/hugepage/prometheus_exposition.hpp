// hugepage/prometheus_exposition.hpp - the Prometheus text exposition format: one writer for the
// library's write_metrics() (metrics.hpp) and hugepage-doctor's --format prometheus.
//
// Contract: samples are grouped by family in first-seen order, each family with its # HELP and
// # TYPE lines once (a scraper rejects a family split in two). Label values are escaped as the
// format asks: backslash, double quote and newline; bytes that are not UTF-8 become U+FFFD.
// Names, types and help text are written as given: the caller passes valid ones.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hugepage/detail/utf8_text.hpp"

namespace hugepage {

/// `text` as a label value between double quotes: \\, \" and \n escaped, bytes that are not
/// UTF-8 (which the format requires) replaced by U+FFFD.
inline std::string prometheus_label_value(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : detail::valid_utf8(text)) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

/// The text of one exposition, built sample by sample; str() writes it out.
class prometheus_exposition {
 public:
  /// A sample's labels, (name, value) in the order written; values are escaped by add().
  using labels = std::vector<std::pair<std::string, std::string>>;

  /// Adds one sample of family `name`; `value` is already formatted ("42", "0.5", "NaN").
  void add(const std::string& name, const char* type, const char* help, const labels& l,
           std::string_view value) {
    family* f = nullptr;
    for (family& existing : families_) {
      if (existing.name == name) f = &existing;
    }
    if (f == nullptr) {
      families_.push_back({name, type, help, {}});
      f = &families_.back();
    }
    std::string line = name;
    if (!l.empty()) {
      line += '{';
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (i != 0) line += ',';
        line += l[i].first + "=\"" + prometheus_label_value(l[i].second) + '"';
      }
      line += '}';
    }
    line += ' ';
    line += value;
    f->samples.push_back(std::move(line));
  }

  /// Declares a family that may get no sample (its HELP and TYPE are still written).
  void declare(const std::string& name, const char* type, const char* help) {
    for (const family& existing : families_) {
      if (existing.name == name) return;
    }
    families_.push_back({name, type, help, {}});
  }

  /// The exposition: every family, HELP and TYPE first, then its samples, one per line.
  std::string str() const {
    std::string out;
    for (const family& f : families_) {
      out += "# HELP " + f.name + ' ' + f.help + "\n# TYPE " + f.name + ' ' + f.type + '\n';
      for (const std::string& s : f.samples) out += s + '\n';
    }
    return out;
  }

 private:
  struct family {
    std::string name;
    const char* type;
    const char* help;
    std::vector<std::string> samples;
  };
  std::vector<family> families_;
};

}  // namespace hugepage
