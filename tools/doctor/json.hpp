// tools/doctor/json.hpp - a minimal JSON value for the doctor's --json output.
//
// Objects keep their keys in insertion order, so the output has the documented field order.
// Numbers are unsigned, signed or double (non-finite doubles become null). Strings are escaped
// per RFC 8259; bytes >= 0x80 pass through (the input is UTF-8 or a path the kernel gave us).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace hugepage::doctor {

class json {
 public:
  enum class kind : unsigned char {
    null,
    boolean,
    unsigned_integer,
    signed_integer,
    number,
    string,
    array,
    object
  };

  json() = default;
  json(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  json(bool value) : kind_(kind::boolean), boolean_(value) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  json(T value) {  // NOLINT
    if constexpr (std::is_signed_v<T>) {
      kind_ = kind::signed_integer;
      signed_ = value;
    } else {
      kind_ = kind::unsigned_integer;
      unsigned_ = value;
    }
  }
  json(double value) : kind_(kind::number), number_(value) {}                  // NOLINT
  json(std::string value) : kind_(kind::string), string_(std::move(value)) {}  // NOLINT
  json(const char* value) : kind_(kind::string), string_(value) {}             // NOLINT
  template <class T>
  json(const std::optional<T>& value) {  // NOLINT
    if (value) *this = json(*value);
  }

  static json array() {
    json j;
    j.kind_ = kind::array;
    return j;
  }
  static json object() {
    json j;
    j.kind_ = kind::object;
    return j;
  }

  /// Appends to an array.
  json& push(json value) {
    items_.emplace_back(std::string(), std::move(value));
    return *this;
  }
  /// Adds a member to an object (keys are not checked for duplicates).
  json& set(std::string key, json value) {
    items_.emplace_back(std::move(key), std::move(value));
    return *this;
  }

  /// Serialises with two-space indentation and a final newline.
  std::string dump() const {
    std::string out;
    write(out, 0);
    out += '\n';
    return out;
  }

 private:
  void write(std::string& out, int depth) const;

  kind kind_ = kind::null;
  bool boolean_ = false;
  std::uint64_t unsigned_ = 0;
  std::int64_t signed_ = 0;
  double number_ = 0;
  std::string string_;
  std::vector<std::pair<std::string, json>> items_;
};

}  // namespace hugepage::doctor
