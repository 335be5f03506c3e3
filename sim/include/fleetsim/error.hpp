// Typed errors thrown by the libraries. Only the CLI turns them into messages and exit codes.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fleetsim {

// One thing wrong with an input file: where (file + JSON pointer) and what was expected.
struct Problem {
  std::string file;
  std::string pointer;  // RFC 6901 JSON pointer, "" for the whole document
  std::string message;  // "expected ..., found ..."
};

// Bad input: every problem found in a file (loaders collect them all before throwing).
class InputError : public std::runtime_error {
 public:
  explicit InputError(std::vector<Problem> problems);
  const std::vector<Problem>& problems() const { return problems_; }

 private:
  std::vector<Problem> problems_;
};

// A scheduling policy answered with a decision that breaks a rule (GPU busy, wrong gang size...).
class PolicyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken internal invariant: a bug in fleetsim, never the user's input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void fail_check(const char* condition, const char* file, int line, const std::string& detail);

}  // namespace fleetsim

// An invariant check that stays on in release builds.
#define FLEETSIM_CHECK(cond, detail) \
  do {                               \
    if (!(cond)) ::fleetsim::fail_check(#cond, __FILE__, __LINE__, (detail)); \
  } while (false)
