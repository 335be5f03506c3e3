// A JSON value written straight to text, byte for byte as nlohmann's dump() writes the same value,
// without building a tree: for the rows of large traces, where making and freeing a small JSON object
// per row costs more than the simulation. Numbers go through nlohmann's own shortest round-trip
// formatter (nlohmann::detail::to_chars); strings are escaped as its dump() escapes valid UTF-8.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace fleetsim {

class JsonWriter {
 public:
  // As dump(indent) (indent < 0: compact) of a value nested `depth` levels deep in an indented document.
  explicit JsonWriter(int indent = -1, int depth = 0) : indent_(indent), depth_(depth) {}

  void clear() {
    text_.clear();
    open_.clear();
  }
  const std::string& text() const { return text_; }

  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }

  // An object's member: its key, then one value (or a nested object or array).
  JsonWriter& key(std::string_view k) {
    element();
    quoted(k);
    text_ += indent_ < 0 ? ":" : ": ";
    keyed_ = true;
    return *this;
  }
  JsonWriter& value(double v) {
    element();
    if (!std::isfinite(v)) {
      text_ += "null";
    } else {
      char buf[64];
      text_.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, v));
    }
    return *this;
  }
  template <typename Int, typename = std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>>>
  JsonWriter& value(Int v) {
    element();
    char buf[24];
    text_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
    return *this;
  }
  JsonWriter& value(std::string_view s) {
    element();
    quoted(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& null() {
    element();
    text_ += "null";
    return *this;
  }
  // A value already written (by a JsonWriter of the same indent at this depth).
  JsonWriter& raw(std::string_view json) {
    element();
    text_ += json;
    return *this;
  }
  // The depth of the next value, for a nested writer whose text goes in through raw().
  int depth() const { return depth_ + static_cast<int>(open_.size()); }

 private:
  JsonWriter& open(char bracket) {
    element();
    text_ += bracket;
    open_.push_back(0);
    return *this;
  }
  JsonWriter& close(char bracket) {
    const bool empty = open_.back() == 0;
    open_.pop_back();
    if (!empty) newline();
    text_ += bracket;
    return *this;
  }
  // Before a value: the comma and line break an array element or an object's key needs.
  void element() {
    if (keyed_) {  // the value of a key just written
      keyed_ = false;
      return;
    }
    if (open_.empty()) return;
    if (open_.back()++ > 0) text_ += ',';
    newline();
  }
  void newline() {
    if (indent_ < 0) return;
    text_ += '\n';
    text_.append(static_cast<std::size_t>(indent_ * (depth_ + static_cast<int>(open_.size()))), ' ');
  }
  void quoted(std::string_view s) {
    text_ += '"';
    const bool plain = std::none_of(s.begin(), s.end(), [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; });
    if (plain) {
      text_.append(s);
      text_ += '"';
      return;
    }
    for (const char c : s) {
      switch (c) {
        case '"': text_ += "\\\""; break;
        case '\\': text_ += "\\\\"; break;
        case '\b': text_ += "\\b"; break;
        case '\f': text_ += "\\f"; break;
        case '\n': text_ += "\\n"; break;
        case '\r': text_ += "\\r"; break;
        case '\t': text_ += "\\t"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            static constexpr char kHex[] = "0123456789abcdef";
            text_ += "\\u00";
            text_ += kHex[(c >> 4) & 0xF];
            text_ += kHex[c & 0xF];
          } else {
            text_ += c;
          }
      }
    }
    text_ += '"';
  }

  int indent_, depth_;
  std::string text_;
  std::vector<std::uint32_t> open_;  // per open object or array: its elements so far
  bool keyed_ = false;
};

}  // namespace fleetsim
