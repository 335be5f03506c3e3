// Strict reading of JSON input files (private to the loaders): every problem is collected with its
// file and JSON pointer, unknown fields are errors, and quantities go through the one unit parser.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim::detail {

using Json = nlohmann::json;

class Problems {
 public:
  explicit Problems(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }
  void add(std::string pointer, std::string message) {
    list_.push_back(Problem{file_, std::move(pointer), std::move(message)});
  }
  // A problem that may repeat on many rows of a file (a column of bad cells): the first kListed of a
  // `kind` are listed, the others counted in one line at the end.
  static constexpr std::size_t kListed = 5;
  void add_repeated(const std::string& kind, std::string pointer, std::string message) {
    auto it = std::find_if(repeats_.begin(), repeats_.end(), [&](const Repeat& r) { return r.kind == kind; });
    if (it == repeats_.end()) it = repeats_.insert(repeats_.end(), Repeat{kind, 0});
    if (++it->count <= kListed) add(std::move(pointer), std::move(message));
  }
  bool empty() const { return list_.empty(); }
  std::size_t size() const { return list_.size(); }
  // Takes back a problem already added (one that a later, better one explains); whether there was one.
  bool remove(const std::string& pointer, std::string_view message) {
    const auto it = std::find_if(list_.begin(), list_.end(), [&](const Problem& p) { return p.pointer == pointer && p.message == message; });
    if (it == list_.end()) return false;
    list_.erase(it);
    return true;
  }
  // Takes over the problems of an error thrown while loading another file.
  void absorb(const InputError& error) {
    list_.insert(list_.end(), error.problems().begin(), error.problems().end());
  }
  void throw_if_any() {
    for (const Repeat& r : repeats_) {
      if (r.count > kListed) add("", "and " + std::to_string(r.count - kListed) + " more like the above: " + r.kind);
    }
    repeats_.clear();
    if (!list_.empty()) throw InputError(std::move(list_));
  }

 private:
  struct Repeat {
    std::string kind;
    std::size_t count;
  };
  std::string file_;
  std::vector<Problem> list_;
  std::vector<Repeat> repeats_;
};

std::string child_pointer(const std::string& parent, std::string_view key);
std::string child_pointer(const std::string& parent, std::size_t index);

// A short description of a JSON value for "found ..." in messages.
std::string describe(const Json& value);

// Parses text; a syntax error is recorded with its line and column and yields a null value.
Json parse_json(std::string_view text, Problems& problems);

enum class Need { required, optional };

// Reads the fields of one JSON object. Each accessor records the key as known; finish() reports the
// object's other keys as unknown, so typos never silently become defaults.
class ObjectReader {
 public:
  ObjectReader(const Json& value, std::string pointer, Problems& problems);

  bool ok() const { return object_ != nullptr; }
  const std::string& pointer() const { return pointer_; }
  std::string pointer(std::string_view key) const { return child_pointer(pointer_, key); }
  Problems& problems() { return problems_; }

  // The raw value of a field (nullptr when absent); records the key as known.
  const Json* field(std::string_view key, Need need = Need::optional);

  std::optional<double> quantity(std::string_view key, Dimension dim, Need need);
  double quantity_or(std::string_view key, Dimension dim, double fallback);
  std::optional<std::string> string(std::string_view key, Need need);
  std::string string_or(std::string_view key, std::string fallback);
  std::optional<std::int64_t> integer(std::string_view key, Need need, std::int64_t min = 0,
                                      std::int64_t max = std::numeric_limits<std::int32_t>::max());
  std::int64_t integer_or(std::string_view key, std::int64_t fallback, std::int64_t min = 0,
                          std::int64_t max = std::numeric_limits<std::int32_t>::max());
  // A plain non-negative number (prices, ratios): JSON numbers only.
  std::optional<double> number(std::string_view key, Need need, double min = 0.0,
                               double max = std::numeric_limits<double>::max());
  bool boolean_or(std::string_view key, bool fallback);
  // One of a few names, as its index in `options`; `fallback` when absent or not one of them (reported).
  std::size_t choice(std::string_view key, std::initializer_list<std::string_view> options, std::size_t fallback);
  std::size_t choice(std::string_view key, std::span<const std::string_view> options, std::size_t fallback);

  // Records one problem at a field of this object.
  void problem(std::string_view key, std::string message);
  // Reports unknown fields. Call after every accessor.
  void finish();
  // Ends reading without reporting unknown fields: where a field that decides the others (an arrival's
  // process) was itself wrong, so its fields are not reported again as unknown.
  void finish_without_unknowns() { object_ = nullptr; }

 private:
  const Json* object_ = nullptr;
  std::string pointer_;
  Problems& problems_;
  std::vector<std::string> known_;
};

// Reads a quantity from a JSON value (a string with a unit); records a problem and returns nullopt if bad.
std::optional<double> read_quantity(const Json& value, Dimension dim, const std::string& pointer,
                                    Problems& problems);

}  // namespace fleetsim::detail
