#include "json_reader.hpp"

#include <cmath>
#include <functional>
#include <set>

namespace fleetsim::detail {

std::string child_pointer(const std::string& parent, std::string_view key) {
  std::string out = parent;
  out += '/';
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string child_pointer(const std::string& parent, std::size_t index) {
  return parent + '/' + std::to_string(index);
}

std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return value.get<bool>() ? "true" : "false";
    case Json::value_t::string: {
      std::string s = value.get<std::string>();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "\"" + s + "\"";
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "the number " + value.dump();
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    default: return "an unsupported value";
  }
}

namespace {

// Finds keys given twice in one object (JSON keeps the last one silently): the parser's events, with
// the path to where it is.
class DuplicateKeys {
 public:
  explicit DuplicateKeys(Problems& problems) : problems_(problems) {}
  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start: frames_.push_back(Frame{false}); break;
      case Json::parse_event_t::array_start: frames_.push_back(Frame{true}); break;
      case Json::parse_event_t::key: {
        Frame& top = frames_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second) {
          problems_.add_repeated("keys given twice", pointer(),
                                 "the key \"" + top.key + "\" is given twice in one object (JSON keeps only the last): give it once");
        }
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames_.pop_back();
        next_element();
        break;
      case Json::parse_event_t::value: next_element(); break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array;
    std::size_t index = 0;
    std::string key;
    std::set<std::string, std::less<>> keys;
  };
  void next_element() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::string pointer() const {
    std::string out;
    for (const Frame& f : frames_) out = f.array ? child_pointer(out, f.index) : child_pointer(out, f.key);
    return out;
  }
  Problems& problems_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json(std::string_view text, Problems& problems) {
  try {
    DuplicateKeys duplicates(problems);
    return Json::parse(text.begin(), text.end(), std::ref(duplicates));
  } catch (const Json::parse_error& e) {
    // Report line and column: byte offsets are hard to find in an editor.
    std::size_t line = 1, column = 1;
    const std::size_t end = e.byte == 0 ? 0 : std::min<std::size_t>(e.byte - 1, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    const auto colon = what.rfind(": ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    problems.add("", "malformed JSON at line " + std::to_string(line) + ", column " +
                         std::to_string(column) + ": " + what);
    return Json();
  } catch (const Json::exception& e) {
    // Found by fuzzing: a number too large for a double is out_of_range, not parse_error.
    std::string what = e.what();
    const auto bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    problems.add("", "malformed JSON: " + what);
    return Json();
  }
}

std::optional<double> read_quantity(const Json& value, Dimension dim, const std::string& pointer,
                                    Problems& problems) {
  if (!value.is_string()) {
    problems.add(pointer, "expected " + std::string(dimension_example(dim)) + ", found " +
                              describe(value) + (value.is_number() ? " (write the unit)" : ""));
    return std::nullopt;
  }
  try {
    return parse_quantity(value.get<std::string>(), dim);
  } catch (const UnitError& e) {
    problems.add(pointer, e.what());
    return std::nullopt;
  }
}

ObjectReader::ObjectReader(const Json& value, std::string pointer, Problems& problems)
    : pointer_(std::move(pointer)), problems_(problems) {
  if (value.is_object()) {
    object_ = &value;
  } else {
    problems_.add(pointer_, "expected an object, found " + describe(value));
  }
}

const Json* ObjectReader::field(std::string_view key, Need need) {
  known_.emplace_back(key);
  if (object_ == nullptr) return nullptr;
  const auto it = object_->find(key);
  if (it == object_->end()) {
    if (need == Need::required) problems_.add(pointer(key), "missing required field");
    return nullptr;
  }
  return &*it;
}

void ObjectReader::problem(std::string_view key, std::string message) {
  problems_.add(pointer(key), std::move(message));
}

std::optional<double> ObjectReader::quantity(std::string_view key, Dimension dim, Need need) {
  const Json* v = field(key, need);
  if (v == nullptr) return std::nullopt;
  return read_quantity(*v, dim, pointer(key), problems_);
}

double ObjectReader::quantity_or(std::string_view key, Dimension dim, double fallback) {
  return quantity(key, dim, Need::optional).value_or(fallback);
}

std::optional<std::string> ObjectReader::string(std::string_view key, Need need) {
  const Json* v = field(key, need);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    problem(key, "expected a string, found " + describe(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::string ObjectReader::string_or(std::string_view key, std::string fallback) {
  return string(key, Need::optional).value_or(std::move(fallback));
}

std::optional<std::int64_t> ObjectReader::integer(std::string_view key, Need need, std::int64_t min,
                                                  std::int64_t max) {
  const Json* v = field(key, need);
  if (v == nullptr) return std::nullopt;
  const std::string range = " from " + std::to_string(min) + " to " + std::to_string(max);
  if (!v->is_number_integer()) {
    problem(key, "expected an integer" + range + ", found " + describe(*v));
    return std::nullopt;
  }
  // Unsigned values above int64 range would wrap; check before converting.
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
    problem(key, "expected an integer" + range + ", found " + describe(*v));
    return std::nullopt;
  }
  const std::int64_t x = v->get<std::int64_t>();
  if (x < min || x > max) {
    problem(key, "expected an integer" + range + ", found " + describe(*v));
    return std::nullopt;
  }
  return x;
}

std::int64_t ObjectReader::integer_or(std::string_view key, std::int64_t fallback, std::int64_t min,
                                      std::int64_t max) {
  return integer(key, Need::optional, min, max).value_or(fallback);
}

std::optional<double> ObjectReader::number(std::string_view key, Need need, double min, double max) {
  const Json* v = field(key, need);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min ||
      v->get<double>() > max) {
    problem(key, "expected a number from " + Json(min).dump() + (max < 1e300 ? " to " + Json(max).dump() : "") +
                     ", found " + describe(*v));
    return std::nullopt;
  }
  return v->get<double>();
}

bool ObjectReader::boolean_or(std::string_view key, bool fallback) {
  const Json* v = field(key, Need::optional);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    problem(key, "expected true or false, found " + describe(*v));
    return fallback;
  }
  return v->get<bool>();
}

std::size_t ObjectReader::choice(std::string_view key, std::initializer_list<std::string_view> options,
                                 std::size_t fallback) {
  return choice(key, std::span<const std::string_view>(options.begin(), options.size()), fallback);
}

std::size_t ObjectReader::choice(std::string_view key, std::span<const std::string_view> options, std::size_t fallback) {
  const auto value = string(key, Need::optional);
  if (!value) return fallback;
  std::size_t i = 0;
  std::string names;
  for (std::string_view option : options) {
    if (*value == option) return i;
    names += (i++ == 0 ? "\"" : ", \"") + std::string(option) + "\"";
  }
  problem(key, "expected one of " + names + ", found \"" + *value + "\"");
  return fallback;
}

void ObjectReader::finish() {
  if (object_ == nullptr) return;
  for (const auto& [key, value] : object_->items()) {
    bool known = false;
    for (const std::string& k : known_) known = known || k == key;
    if (known) continue;
    std::string valid;
    for (const std::string& k : known_) {
      if (valid.find("\"" + k + "\"") != std::string::npos) continue;
      valid += (valid.empty() ? "" : ", ") + ("\"" + k + "\"");
    }
    problems_.add(pointer(key), "unknown field (expected one of " + valid + ")");
  }
}

}  // namespace fleetsim::detail
