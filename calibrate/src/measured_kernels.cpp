#include "fleetsim/measured_kernels.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {
// Rows of measured kernels a file may hold (a fit over 450,000 took 21 s).
constexpr std::size_t kMaxRows = 100000;
// Problems listed one by one; the rest are counted (a file of bad rows would print a line for each).
constexpr std::size_t kListed = 20;
}  // namespace

std::vector<MeasuredKernel> parse_measured_kernels(std::string_view text, const std::string& file) {
  std::vector<MeasuredKernel> out;
  std::vector<Problem> problems;
  std::size_t unlisted = 0;
  const auto add = [&](Problem p) {
    if (problems.size() < kListed) {
      problems.push_back(std::move(p));
    } else {
      ++unlisted;
    }
  };
  std::istringstream in{std::string(text)};
  std::string line;
  std::size_t number = 0;
  bool header = false, batched = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string at = "line " + std::to_string(number);
    if (out.size() >= kMaxRows) {  // a fit over more rows takes minutes and learns nothing more
      add({file, at, "expected at most " + std::to_string(kMaxRows) + " rows of kernels"});
      break;
    }
    if (!header) {
      header = true;
      batched = line == "name,kernel,m,n,k,batch,time_us";
      if (line != "name,kernel,m,n,k,time_us" && !batched) {
        add({file, at, "expected the header \"name,kernel,m,n,k,time_us\" or \"name,kernel,m,n,k,batch,time_us\", found \"" + line + "\""});
      }
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    const std::size_t columns = batched ? 7 : 6;
    if (cells.size() != columns) {
      add({file, at, "expected " + std::to_string(columns) + " columns, found " + std::to_string(cells.size())});
      continue;
    }
    MeasuredKernel m;
    m.name = cells[0];
    // "attention-cudnn": on cuDNN's kernels; "-causal": under a causal mask; "-fwd-bwd": the forward and backward together.
    std::string_view kind = cells[1];
    const auto suffix = [&kind](std::string_view s) {
      const bool has = kind.starts_with("attention-") && kind.ends_with(s);
      if (has) kind.remove_suffix(s.size());
      return has;
    };
    m.with_backward = suffix("-fwd-bwd");
    const bool causal = suffix("-causal");
    const bool cudnn = suffix("-cudnn");
    const auto cls = parse_kernel_class(kind);
    if (cudnn && m.with_backward) {  // the fit has no cuDNN backward rates to find: its forward constants would take the error
      add({file, at + ", column kernel", "expected attention-cudnn rows of a forward pass alone (cuDNN's backward is not fitted), found \"" + cells[1] + "\""});
      continue;
    }
    if (!cls || *cls == KernelClass::memory || (*cls == KernelClass::attention && !batched)) {
      add({file, at + ", column kernel",
                          "expected gemm, norm, add, activation, gated-activation, rope, softmax, embedding, reduction, broadcast, indexed-copy, or attention (with the batch column) "
                          "followed by -cudnn (cuDNN's kernels), -causal and -fwd-bwd (the backward too) in that order where they apply, "
                          "such as attention-causal-fwd-bwd, found \"" + cells[1] + "\""});
      continue;
    }
    m.call.cls = *cls;
    m.call.causal = causal;
    m.call.backend = cudnn ? AttentionBackend::cudnn : AttentionBackend::flash2;
    m.call.name = m.name;
    const std::vector<const char*> names = batched ? std::vector<const char*>{"m", "n", "k", "batch", "time_us"} : std::vector<const char*>{"m", "n", "k", "time_us"};
    std::vector<double> values(names.size(), 0.0);
    bool good = true;
    // Dimensions are whole numbers a GPU's kernels take (up to 2^31); a time from a nanosecond to 1,000 s.
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string& cell = cells[i + 2];
      values[i] = parse_number(cell).value_or(-1);
      const bool time = i + 1 == names.size();
      const bool zero_ok = i == 2 && *cls != KernelClass::gemm && *cls != KernelClass::attention;
      const bool fits = time ? values[i] >= 1e-3 && values[i] <= 1e9
                             : values[i] == std::floor(values[i]) && (values[i] >= 1 || (zero_ok && values[i] == 0)) && values[i] <= 2147483648.0;
      if (!fits) {
        const std::string expected = time ? "a time from 0.001 to 1e9 microseconds"
                                          : std::string("a whole number from ") + (zero_ok ? "0" : "1") + " to 2^31";
        add({file, at + ", column " + names[i], "expected " + expected + ", found \"" + cell + "\""});
        good = false;
      }
    }
    if (!good) continue;
    m.call.m = values[0];
    m.call.n = values[1];
    m.call.k = values[2];
    if (batched) m.call.batch = values[3];
    m.time_s = values.back() * 1e-6;
    out.push_back(std::move(m));
  }
  if (unlisted > 0) problems.push_back({file, "", "and " + std::to_string(unlisted) + " more problems like these"});
  if (problems.empty() && out.empty()) problems.push_back({file, "", "expected rows of name,kernel,m,n,k,time_us, found none"});
  if (!problems.empty()) throw InputError(std::move(problems));
  return out;
}

KernelEstimate estimate_measured(const KernelModel& model, const MeasuredKernel& m, Dtype dtype) {
  KernelEstimate e = model.estimate(m.call, dtype);
  if (!m.with_backward) return e;
  KernelCall backward = m.call;
  backward.backward = true;
  const KernelEstimate b = model.estimate(backward, dtype);
  e.compute_s += b.compute_s;
  e.memory_s += b.memory_s;
  e.fixed_s += b.fixed_s;
  return e;
}

std::vector<MeasuredKernel> load_measured_kernels(const std::string& path) { return parse_measured_kernels(read_text_file(path), path); }

}  // namespace fleetsim
