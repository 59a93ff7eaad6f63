// tools/doctor/json.hpp - the doctor's JSON documents, built on nlohmann::ordered_json.
//
// A small builder (set/push chains) over nlohmann's ordered_json, so the documents keep the
// documented field order and the renderers read like the schema in tools/README.md. Strings
// come from the kernel and from processes (titles, paths): serialisation replaces invalid UTF-8
// with U+FFFD instead of throwing, so the output is always valid UTF-8 JSON. Non-finite doubles
// become null.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace hugepage::doctor {

/// The "schema" of every JSON document the doctor prints (tools/README.md, "JSON schema"):
/// renamed or removed fields get a new name.
inline constexpr char json_schema[] = "hugepage-doctor/1";

class json {
 public:
  json() = default;
  json(std::nullptr_t) {}              // NOLINT(google-explicit-constructor)
  json(bool value) : value_(value) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  json(T value) : value_(value) {}                       // NOLINT
  json(double value) : value_(value) {}                  // NOLINT
  json(std::string value) : value_(std::move(value)) {}  // NOLINT
  json(const char* value) : value_(value) {}             // NOLINT
  template <class T>
  json(const std::optional<T>& value) {  // NOLINT
    if (value) *this = json(*value);
  }

  static json array() {
    json j;
    j.value_ = nlohmann::ordered_json::array();
    return j;
  }
  static json object() {
    json j;
    j.value_ = nlohmann::ordered_json::object();
    return j;
  }

  /// Appends to an array.
  json& push(json value) {
    value_.push_back(std::move(value.value_));
    return *this;
  }
  /// Adds (or replaces) a member of an object.
  json& set(const std::string& key, json value) {
    value_[key] = std::move(value.value_);
    return *this;
  }

  /// Serialises with two-space indentation and a final newline; invalid UTF-8 becomes U+FFFD.
  std::string dump() const {
    return value_.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }

 private:
  nlohmann::ordered_json value_;
};

}  // namespace hugepage::doctor
