#include "json_reader.hpp"

#include "fleetsim/suggest.hpp"

#include <cmath>
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

// Finds keys given twice in one object (JSON keeps the last one silently), with the path to where it
// is. A second, DOM-less pass over the parsed text: the DOM parser's own callback hook rescans the
// parent object at every nested object's end, which made a 100,000-node ComfyUI graph take minutes.
class DuplicateKeys final : public nlohmann::json_sax<Json> {
 public:
  explicit DuplicateKeys(Problems& problems) : problems_(problems) {}

  bool null() override { return value(); }
  bool boolean(bool /*v*/) override { return value(); }
  bool number_integer(number_integer_t /*v*/) override { return value(); }
  bool number_unsigned(number_unsigned_t /*v*/) override { return value(); }
  bool number_float(number_float_t /*v*/, const string_t& /*text*/) override { return value(); }
  bool string(string_t& /*v*/) override { return value(); }
  bool binary(binary_t& /*v*/) override { return value(); }
  bool start_object(std::size_t /*size*/) override {
    frames_.emplace_back(false);
    return true;
  }
  bool start_array(std::size_t /*size*/) override {
    frames_.emplace_back(true);
    return true;
  }
  bool end_object() override { return end(); }
  bool end_array() override { return end(); }
  bool key(string_t& key) override {
    Frame& top = frames_.back();
    top.key = key;
    if (!top.keys.insert(top.key).second) {
      problems_.add_repeated("keys given twice", pointer(),
                             "the key \"" + top.key + "\" is given twice in one object (JSON keeps only the last): give it once");
    }
    return true;
  }
  // The DOM parse before this one has already reported any syntax error.
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/, const nlohmann::detail::exception& /*e*/) override {
    return false;
  }

 private:
  struct Frame {
    explicit Frame(bool is_array) : array(is_array) {}
    bool array;
    std::size_t index = 0;
    std::string key;
    std::set<std::string, std::less<>> keys;
  };
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  bool end() {
    frames_.pop_back();
    return value();
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
    Json doc = Json::parse(text.begin(), text.end());
    DuplicateKeys duplicates(problems);
    Json::sax_parse(text.begin(), text.end(), &duplicates);
    return doc;
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
  std::vector<std::string> known;
  for (std::string_view option : options) {
    if (*value == option) return i;
    names += (i++ == 0 ? "\"" : ", \"") + std::string(option) + "\"";
    known.emplace_back(option);
  }
  problem(key, "expected one of " + names + ", found \"" + *value + "\"" + did_you_mean(*value, known));
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
    // A misspelt required field is one mistake: its "missing" goes, the unknown name says which it meant.
    if (const std::string close = closest_name(key, known_); !close.empty()) problems_.remove(pointer(close), "missing required field");
    problems_.add(pointer(key), "unknown field (expected one of " + valid + ")" + did_you_mean(key, known_));
  }
}

}  // namespace fleetsim::detail
