#include "fleetsim/error.hpp"

namespace fleetsim {
namespace {

std::string describe(const std::vector<Problem>& problems) {
  std::string text;
  for (const Problem& p : problems) {
    if (!text.empty()) text += '\n';
    text += p.file;
    if (!p.pointer.empty()) text += ": " + p.pointer;
    text += ": " + p.message;
  }
  return text;
}

}  // namespace

InputError::InputError(std::vector<Problem> problems)
    : std::runtime_error(describe(problems)), problems_(std::move(problems)) {}

void fail_check(const char* condition, const char* file, int line, const std::string& detail) {
  throw InternalError(std::string("internal check failed: ") + condition + " at " + file + ":" +
                      std::to_string(line) + (detail.empty() ? "" : ": " + detail));
}

}  // namespace fleetsim
