// The CUDA calibration runs in the CUDA backend's library (fleetsim/cuda_plugin.hpp).
#include "fleetsim/calibrate.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/cuda_plugin.hpp"
#include "fleetsim/realexec.hpp"

namespace fleetsim {

Profile calibrate_cuda(const CudaCalibrateOptions& options) {
  std::string why;
  const auto calibrate = reinterpret_cast<FleetsimCudaCalibrate>(cuda_backend_entry("fleetsim_cuda_calibrate", &why));
  if (calibrate == nullptr || !cuda_available(&why)) throw DeviceError("calibration on the CUDA backend cannot run here: " + why);
  if (options.repeats < 1) throw InputError({Problem{"--repeats", "", "expected at least 1"}});
  Profile out;
  calibrate(&options, &out);
  return out;
}

}  // namespace fleetsim
