// The CUDA calibration in a build without CUDA, so the library's interface is the same either way.
#include "fleetsim/calibrate.hpp"
#include "fleetsim/realexec.hpp"

namespace fleetsim {

Profile calibrate_cuda(const CudaCalibrateOptions&) {
  throw DeviceError("calibration on the CUDA backend cannot run here: this fleetsim was built without CUDA (no nvcc when CMake ran; see docs/run.md)");
}

}  // namespace fleetsim
