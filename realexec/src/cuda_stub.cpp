// The CUDA backend's entry points in a build without CUDA, so the library's interface is the same
// either way.
#include "fleetsim/realexec.hpp"

namespace fleetsim {

namespace {
constexpr const char* kWhy = "this fleetsim was built without CUDA (no nvcc when CMake ran; see docs/run.md)";
}

bool cuda_available(std::string* why) {
  if (why != nullptr) *why = kWhy;
  return false;
}

RunResult execute_on_cuda(const Scenario&, const RunResult&, const ExecOptions&) {
  throw DeviceError(std::string("the CUDA backend cannot run here: ") + kWhy);
}

}  // namespace fleetsim
