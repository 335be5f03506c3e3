// A JSON array written element by element, byte for byte as nlohmann's dump() of the whole array would
// have written it, so that a large document never exists in memory as one tree.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>

namespace fleetsim {

class JsonArrayStream {
 public:
  // indent < 0: compact, as dump(); else as dump(indent), for an array nested `depth` levels deep.
  JsonArrayStream(std::ostream& out, int indent = -1, int depth = 0)
      : out_(out), indent_(indent), element_indent_(indent < 0 ? 0 : static_cast<std::size_t>(indent * (depth + 1)), ' '),
        close_indent_(indent < 0 ? 0 : static_cast<std::size_t>(indent * depth), ' ') {}

  void add(const nlohmann::ordered_json& element) {
    out_ << (count_++ == 0 ? "[" : ",");
    if (indent_ < 0) {
      out_ << element.dump();
      return;
    }
    // JSON strings escape their newlines, so every newline of the dump starts a line to indent.
    const std::string text = element.dump(indent_);
    out_ << '\n' << element_indent_;
    std::size_t from = 0;
    for (std::size_t nl = text.find('\n'); nl != std::string::npos; from = nl + 1, nl = text.find('\n', from)) {
      out_.write(text.data() + from, static_cast<std::streamsize>(nl + 1 - from));
      out_ << element_indent_;
    }
    out_.write(text.data() + from, static_cast<std::streamsize>(text.size() - from));
  }

  // An element already written at this array's element depth: JsonWriter(indent, depth + 1).
  void add_text(std::string_view element) {
    out_ << (count_++ == 0 ? "[" : ",");
    if (indent_ >= 0) out_ << '\n' << element_indent_;
    out_ << element;
  }

  void close() {
    if (count_ == 0) {
      out_ << "[]";
    } else {
      if (indent_ >= 0) out_ << '\n' << close_indent_;
      out_ << ']';
    }
  }

 private:
  std::ostream& out_;
  int indent_;
  std::string element_indent_, close_indent_;
  std::size_t count_ = 0;
};

}  // namespace fleetsim
