// hugepage/metrics.hpp - the library's figures from inside the service, for /metrics.
//
//   hugepage::write_metrics(out);        // Prometheus text exposition format 0.0.4
//   hugepage::write_metrics_json(out);   // the same figures as one JSON object
//
// Names start with hugepage_ (the doctor's are hugepage_doctor_: tools/README.md). Every family
// has its # HELP and # TYPE lines once, before its samples; byte figures end in _bytes, counters
// in _total. A container's label is written as label_text() gives it (the same in the JSON): a
// backslash doubled, bytes that are not UTF-8 and control characters as \xHH, so that distinct
// labels stay distinct series, and the empty label as \(empty) (label="" would read as no label
// at all); then escaped as the format says (\\, \"). Both writers build the text and write it
// unformatted: the stream's flags, width and locale do not change it.
//
//   hugepage_label_blocks{label}                            gauge   live mapped blocks
//   hugepage_label_requested_bytes{label,backing}           gauge   mapped bytes by what was asked
//   hugepage_label_obtained_bytes{label,backing}            gauge   ... by what was got at map time
//   hugepage_label_fallbacks_total{label}                   counter blocks that got less
//   hugepage_label_coverage_bytes{label,backing}            gauge   what backs them now (kernel):
//       backing = thp, hugetlb_2m, hugetlb_1g, base, not_resident, unmapped, unknown
//   hugepage_label_huge_ratio{label}                        gauge   huge bytes / mapped bytes, 0..1
//   hugepage_label_coverage_exact{label}                    gauge   1: read exactly; 0: some of it
//       prorated from smaps, or smaps may miss pages (backing_report::exact; the JSON's "note"
//       says why)
//   hugepage_label_node_bytes{label,node}                   gauge   resident bytes per NUMA node
//   hugepage_label_node_huge_bytes{label,node}              gauge   ... of them on huge pages
//       (backing_report::nodes, from the kernel; only nodes holding some). Where the huge bytes
//       per node are an estimate (nodes_estimated: no PAGEMAP_SCAN and no kpageflags), each
//       node's huge bytes are NaN, null in the JSON, whose "nodes_note" says why.
//   hugepage_label_node_unattributed_bytes{label}          gauge   resident bytes on no node the
//       kernel named (backing_report::nodes_unattributed: Linux 6.1's move_pages answers EFAULT
//       for a page NUMA balancing marked, and the frame is hidden without root); with the node
//       bytes, the label's resident bytes. NaN where the coverage could not be read.
// A label whose coverage could not be read (/proc/self/smaps and pagemap closed: its report has
// `unknown` bytes) exports NaN for every coverage part but `unknown` and for its ratio, and null
// in the JSON: never 0, which reads as "nothing is huge".
//   hugepage_requested_bytes{method}                        gauge   stats(): thp, collapse,
//                                                                   hugetlb_2m, hugetlb_1g
//   hugepage_obtained_bytes{backing}                        gauge   stats(): by obtained backing
//   hugepage_live_mappings                                  gauge
//   hugepage_fallbacks_total{to}                            counter to = thp, base, hugetlb_2m,
//                                                                   other_node (NUMA preferred)
//   hugepage_collapse_attempts_total, hugepage_collapse_failures_total   counter (allocation)
//   hugepage_collapse_unsupported                           gauge   1 while MADV_COLLAPSE is off
//                                                                   (EINVAL, or THP disabled)
//   hugepage_prefaulted_bytes_total                         counter
//   hugepage_upkeep_calls_total                             counter upkeep() calls
//   hugepage_upkeep_restored_bytes_total                    counter bytes collapsed by them
//   hugepage_upkeep_refused_chunks_total{errno}             counter by errno name (ENOMEM, ...)
//   hugepage_upkeep_backed_off_total                        counter calls skipped by a back-off
//   hugepage_upkeep_thp_disabled_total                      counter calls that could not act
//
// Cost: one backing_of() per labelled block (the coverage), read from the kernel at each call.
#pragma once

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "hugepage/detail/errno_text.hpp"
#include "hugepage/detail/utf8_text.hpp"
#include "hugepage/label.hpp"
#include "hugepage/prometheus_exposition.hpp"
#include "hugepage/stats.hpp"
#include "hugepage/upkeep.hpp"

namespace hugepage {

namespace detail {

inline std::string errno_label(int error) {
  const char* name = errno_symbol(error);
  return name != nullptr ? name : std::to_string(error);
}

/// A container's label as the metrics write it: escaped_text() (utf8_text.hpp: injective, valid
/// UTF-8, no control character), and the empty label as \(empty), which no other label gives (a
/// backslash is doubled in every other one). Distinct labels give distinct texts.
inline std::string label_text(const std::string& label) {
  return label.empty() ? std::string("\\(empty)") : escaped_text(label);
}

// Escapes a string for JSON; bytes that are not UTF-8 (which JSON requires) become U+FFFD.
inline std::string json_string_value(const std::string& text) {
  std::string out;
  for (const char c : valid_utf8(text)) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", static_cast<unsigned>(c));
      out += code;
    } else {
      out += c;
    }
  }
  return out;
}

// Six significant digits, as %.6g gives them but with a '.' whatever the C locale.
inline std::string format_ratio(double value) {
  char text[32];
  const std::to_chars_result r =
      std::to_chars(text, text + sizeof text, value, std::chars_format::general, 6);
  return std::string(text, r.ptr);
}

// Families in the order written, over the one Prometheus writer (prometheus_exposition.hpp).
class metric_writer {
 public:
  explicit metric_writer(std::ostream& out) : out_(out) {}

  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    type_ = type;
    help_ = help;
    text_.declare(name_, type_, help_);
  }

  void sample(const std::vector<std::pair<const char*, std::string>>& labels,
              const std::string& value) {
    prometheus_exposition::labels named;
    for (const auto& [key, text] : labels) named.emplace_back(key, text);
    text_.add(name_, type_, help_, named, value);
  }

  void sample(const std::vector<std::pair<const char*, std::string>>& labels, std::uint64_t value) {
    sample(labels, std::to_string(value));
  }

  /// Writes what was added to the stream, unformatted: its flags, width and locale change nothing.
  void finish() {
    const std::string text = text_.str();
    out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  }

 private:
  std::ostream& out_;
  prometheus_exposition text_;
  std::string name_;
  const char* type_ = "";
  const char* help_ = "";
};

}  // namespace detail

/// Writes the labels' figures (label.hpp, coverage read from the kernel now), the library's
/// statistics (stats.hpp) and upkeep's (upkeep.hpp) in the Prometheus text format; the names are
/// at the top of this file. Throws what the stream throws (std::bad_alloc otherwise).
inline void write_metrics(std::ostream& out) {
  std::vector<label_report> list = labels();
  for (label_report& l : list) l.label = detail::label_text(l.label);
  const statistics s = stats();
  const upkeep_statistics u = upkeep_stats();
  detail::metric_writer w(out);
  using sample_labels = std::vector<std::pair<const char*, std::string>>;
  w.family("hugepage_label_blocks", "gauge", "live mapped blocks of the labelled container");
  for (const auto& l : list) w.sample({{"label", l.label}}, l.blocks);
  w.family("hugepage_label_requested_bytes", "gauge",
           "mapped bytes of the labelled container by the backing asked for");
  for (const auto& l : list) {
    w.sample({{"label", l.label}, {"backing", "thp"}}, l.requested_thp);
    w.sample({{"label", l.label}, {"backing", "hugetlb_2m"}}, l.requested_hugetlb_2m);
    w.sample({{"label", l.label}, {"backing", "hugetlb_1g"}}, l.requested_hugetlb_1g);
  }
  w.family("hugepage_label_obtained_bytes", "gauge",
           "mapped bytes of the labelled container by the backing obtained at map time");
  for (const auto& l : list) {
    w.sample({{"label", l.label}, {"backing", "thp"}}, l.obtained_thp);
    w.sample({{"label", l.label}, {"backing", "hugetlb_2m"}}, l.obtained_hugetlb_2m);
    w.sample({{"label", l.label}, {"backing", "hugetlb_1g"}}, l.obtained_hugetlb_1g);
    w.sample({{"label", l.label}, {"backing", "base"}}, l.obtained_base);
  }
  w.family("hugepage_label_fallbacks_total", "counter",
           "blocks of the labelled container that obtained less than they asked for");
  for (const auto& l : list) w.sample({{"label", l.label}}, l.fallbacks);
  w.family("hugepage_label_coverage_bytes", "gauge",
           "what backs the labelled container now, from the kernel");
  for (const auto& l : list) {
    const backing_report& c = l.coverage;
    const std::pair<const char*, std::size_t> parts[] = {
        {"thp", c.thp},   {"hugetlb_2m", c.hugetlb_2m},     {"hugetlb_1g", c.hugetlb_1g},
        {"base", c.base}, {"not_resident", c.not_resident}, {"unmapped", c.unmapped}};
    for (const auto& [name, bytes] : parts) {
      // Unknown coverage is NaN, not 0: the parts that could not be read are not "none".
      if (c.known()) {
        w.sample({{"label", l.label}, {"backing", name}}, bytes);
      } else {
        w.sample({{"label", l.label}, {"backing", name}}, std::string("NaN"));
      }
    }
    w.sample({{"label", l.label}, {"backing", "unknown"}}, c.unknown);
  }
  w.family("hugepage_label_huge_ratio", "gauge",
           "share of the labelled container's mapped bytes on huge pages now, 0 to 1");
  for (const auto& l : list) {
    const double ratio = l.coverage.huge_fraction();  // NaN where unknown
    w.sample({{"label", l.label}}, ratio == ratio ? detail::format_ratio(ratio) : "NaN");
  }
  w.family("hugepage_label_coverage_exact", "gauge",
           "1 where the labelled container's coverage was read exactly, 0 where part of it is "
           "prorated or may be missed (the JSON's note says why); NaN where it could not be read");
  for (const auto& l : list) {
    if (l.coverage.known()) {
      w.sample({{"label", l.label}}, std::uint64_t{l.coverage.exact ? 1U : 0U});
    } else {
      w.sample({{"label", l.label}}, std::string("NaN"));
    }
  }
  w.family("hugepage_label_node_bytes", "gauge",
           "resident bytes of the labelled container per NUMA node now, from the kernel");
  for (const auto& l : list) {
    for (const node_bytes& n : l.coverage.nodes) {
      w.sample({{"label", l.label}, {"node", std::to_string(n.node)}}, n.bytes);
    }
  }
  w.family("hugepage_label_node_huge_bytes", "gauge",
           "of those, bytes on huge pages, per NUMA node now, from the kernel");
  for (const auto& l : list) {
    for (const node_bytes& n : l.coverage.nodes) {
      // An estimate is no figure from the kernel: NaN, as for coverage that could not be read.
      if (l.coverage.nodes_estimated) {
        w.sample({{"label", l.label}, {"node", std::to_string(n.node)}}, std::string("NaN"));
      } else {
        w.sample({{"label", l.label}, {"node", std::to_string(n.node)}}, n.huge_bytes);
      }
    }
  }
  w.family("hugepage_label_node_unattributed_bytes", "gauge",
           "resident bytes of the labelled container on no NUMA node the kernel named");
  for (const auto& l : list) {
    if (l.coverage.known()) {
      w.sample({{"label", l.label}}, l.coverage.nodes_unattributed);
    } else {
      w.sample({{"label", l.label}}, std::string("NaN"));
    }
  }
  w.family("hugepage_requested_bytes", "gauge", "bytes mapped by the library, by method asked");
  w.sample(sample_labels{{"method", "thp"}}, s.requested_thp);
  w.sample(sample_labels{{"method", "collapse"}}, s.requested_collapse);
  w.sample(sample_labels{{"method", "hugetlb_2m"}}, s.requested_hugetlb_2m);
  w.sample(sample_labels{{"method", "hugetlb_1g"}}, s.requested_hugetlb_1g);
  w.family("hugepage_obtained_bytes", "gauge", "bytes mapped by the library, by backing obtained");
  w.sample(sample_labels{{"backing", "thp"}}, s.obtained_thp);
  w.sample(sample_labels{{"backing", "hugetlb_2m"}}, s.obtained_hugetlb_2m);
  w.sample(sample_labels{{"backing", "hugetlb_1g"}}, s.obtained_hugetlb_1g);
  w.sample(sample_labels{{"backing", "base"}}, s.obtained_base);
  w.family("hugepage_live_mappings", "gauge", "mappings the library holds");
  w.sample({}, s.live_mappings);
  w.family("hugepage_fallbacks_total", "counter", "hugetlb requests served (in part) otherwise");
  w.sample(sample_labels{{"to", "thp"}}, s.fallbacks_to_thp);
  w.sample(sample_labels{{"to", "base"}}, s.fallbacks_to_base);
  w.sample(sample_labels{{"to", "hugetlb_2m"}}, s.fallbacks_to_hugetlb_2m);
  w.sample(sample_labels{{"to", "other_node"}}, s.fallbacks_to_other_node);
  w.family("hugepage_collapse_attempts_total", "counter", "MADV_COLLAPSE calls at allocation");
  w.sample({}, s.collapse_attempts);
  w.family("hugepage_collapse_failures_total", "counter",
           "MADV_COLLAPSE at allocation that failed or could not be tried");
  w.sample({}, s.collapse_failures);
  w.family("hugepage_collapse_unsupported", "gauge",
           "1 while MADV_COLLAPSE at allocation is suspended after EINVAL or THP is disabled");
  w.sample({}, s.collapse_unsupported ? 1 : 0);
  w.family("hugepage_prefaulted_bytes_total", "counter", "bytes populated at allocation");
  w.sample({}, s.prefaulted_bytes);
  w.family("hugepage_upkeep_calls_total", "counter", "upkeep() calls");
  w.sample({}, u.calls);
  w.family("hugepage_upkeep_restored_bytes_total", "counter", "bytes upkeep() collapsed");
  w.sample({}, u.restored_bytes);
  w.family("hugepage_upkeep_refused_chunks_total", "counter",
           "2 MiB chunks the kernel refused to upkeep(), by errno");
  for (const collapse_refusal& r : u.refusals) {
    if (r.error != 0) w.sample({{"errno", detail::errno_label(r.error)}}, r.chunks);
  }
  w.family("hugepage_upkeep_backed_off_total", "counter",
           "upkeep() calls that collapsed nothing during a back-off");
  w.sample({}, u.backed_off);
  w.family("hugepage_upkeep_thp_disabled_total", "counter",
           "upkeep() calls that could not act: THP disabled for the process");
  w.sample({}, u.thp_disabled);
  w.finish();
}

/// The same figures as write_metrics(), as one JSON object:
///   {"labels": [{"label", "blocks", "requested_bytes": {...}, "obtained_bytes": {...},
///                "fallbacks", "nodes": {node: {"bytes", "huge_bytes"}},
///                "nodes_unattributed", "nodes_note",
///                "coverage_bytes": {...},
///                "huge_ratio", "exact", "note"}],
///    "stats": {stats() by field name}, "upkeep": {upkeep_stats() by field name}}
inline void write_metrics_json(std::ostream& out) {
  std::vector<label_report> list = labels();
  for (label_report& l : list) l.label = detail::label_text(l.label);
  const statistics s = stats();
  const upkeep_statistics u = upkeep_stats();
  // Built as text and written unformatted: the stream's flags, width and locale change nothing.
  std::string j = "{\"labels\":[";
  const auto field = [&j](const char* name, std::uint64_t value) {
    j += ",\"";
    j += name;
    j += "\":";
    j += std::to_string(value);
  };
  // A field that opens an object: no comma before it.
  const auto first = [&j](const char* name, std::uint64_t value) {
    j += '"';
    j += name;
    j += "\":";
    j += std::to_string(value);
  };
  for (std::size_t i = 0; i < list.size(); ++i) {
    const label_report& l = list[i];
    const backing_report& c = l.coverage;
    j += i == 0 ? "{\"label\":\"" : ",{\"label\":\"";
    j += detail::json_string_value(l.label);
    j += '"';
    field("blocks", l.blocks);
    j += ",\"requested_bytes\":{";
    first("thp", l.requested_thp);
    field("hugetlb_2m", l.requested_hugetlb_2m);
    field("hugetlb_1g", l.requested_hugetlb_1g);
    j += "},\"obtained_bytes\":{";
    first("thp", l.obtained_thp);
    field("hugetlb_2m", l.obtained_hugetlb_2m);
    field("hugetlb_1g", l.obtained_hugetlb_1g);
    field("base", l.obtained_base);
    j += '}';
    field("fallbacks", l.fallbacks);
    j += ",\"nodes\":{";  // resident bytes per NUMA node: {"0":{"bytes":..,"huge_bytes":..}}
    for (std::size_t n = 0; n < c.nodes.size(); ++n) {
      j += n == 0 ? "\"" : ",\"";
      j += std::to_string(c.nodes[n].node);
      j += "\":{";
      first("bytes", c.nodes[n].bytes);
      if (c.nodes_estimated) {
        j += ",\"huge_bytes\":null";
      } else {
        field("huge_bytes", c.nodes[n].huge_bytes);
      }
      j += '}';
    }
    j += '}';
    if (c.known()) {
      field("nodes_unattributed", c.nodes_unattributed);
    } else {
      j += ",\"nodes_unattributed\":null";
    }
    j += ",\"nodes_note\":\"" + detail::json_string_value(c.nodes_note) + '"';
    j += ",\"coverage_bytes\":{";
    if (c.known()) {
      first("thp", c.thp);
      field("hugetlb_2m", c.hugetlb_2m);
      field("hugetlb_1g", c.hugetlb_1g);
      field("base", c.base);
      field("not_resident", c.not_resident);
      field("unmapped", c.unmapped);
      j += ",\"unknown\":0},\"huge_ratio\":" + detail::format_ratio(c.huge_fraction());
    } else {  // not read: null, never 0
      j += "\"thp\":null,\"hugetlb_2m\":null,\"hugetlb_1g\":null,\"base\":null,";
      j += "\"not_resident\":null,\"unmapped\":null";
      field("unknown", c.unknown);
      j += "},\"huge_ratio\":null";
    }
    j += c.exact ? ",\"exact\":true" : ",\"exact\":false";
    j += ",\"note\":\"" + detail::json_string_value(c.note) + "\"}";
  }
  j += "],\"stats\":{";
  first("requested_thp", s.requested_thp);
  field("requested_collapse", s.requested_collapse);
  field("requested_hugetlb_2m", s.requested_hugetlb_2m);
  field("requested_hugetlb_1g", s.requested_hugetlb_1g);
  field("obtained_hugetlb_2m", s.obtained_hugetlb_2m);
  field("obtained_hugetlb_1g", s.obtained_hugetlb_1g);
  field("obtained_thp", s.obtained_thp);
  field("obtained_base", s.obtained_base);
  field("live_mappings", s.live_mappings);
  field("fallbacks_to_thp", s.fallbacks_to_thp);
  field("fallbacks_to_base", s.fallbacks_to_base);
  field("fallbacks_to_hugetlb_2m", s.fallbacks_to_hugetlb_2m);
  field("fallbacks_to_other_node", s.fallbacks_to_other_node);
  field("collapse_attempts", s.collapse_attempts);
  field("collapse_failures", s.collapse_failures);
  j +=
      s.collapse_unsupported ? ",\"collapse_unsupported\":true" : ",\"collapse_unsupported\":false";
  field("prefaulted_bytes", s.prefaulted_bytes);
  j += "},\"upkeep\":{";
  first("calls", u.calls);
  field("restored_bytes", u.restored_bytes);
  field("refused_chunks", u.refused_chunks);
  field("backed_off", u.backed_off);
  field("thp_disabled", u.thp_disabled);
  j += ",\"refusals\":{";
  bool none = true;
  for (const collapse_refusal& r : u.refusals) {
    if (r.error == 0) continue;
    const std::string name = detail::errno_label(r.error);
    if (none) {
      first(name.c_str(), r.chunks);
    } else {
      field(name.c_str(), r.chunks);
    }
    none = false;
  }
  j += "}}}\n";
  out.write(j.data(), static_cast<std::streamsize>(j.size()));
}

}  // namespace hugepage
