// The CUDA backend is a shared library of its own (libfleetsim_cuda.so, built beside the fleetsim
// binary), opened only by the commands that run on CUDA: loading cuBLAS and NCCL costs every process
// about 0.15 s and 200 MB, which would dominate small simulations. The library resolves fleetsim's
// own symbols against the executable that opens it, so its entry points are plain C with C++ objects
// passed by pointer; exceptions cross them as thrown.
#pragma once

#include <optional>
#include <string>

namespace fleetsim {

struct Scenario;
struct RunResult;
struct ExecOptions;
struct CudaCalibrateOptions;
struct Profile;

// The library's path: $FLEETSIM_CUDA_BACKEND when set, else libfleetsim_cuda.so beside the executable.
std::string cuda_backend_path();

// The entry point `name` of the opened library, or null with `why` saying what is missing (a build
// without CUDA, a library that cannot be found or opened, an entry it lacks).
void* cuda_backend_entry(const char* name, std::string* why);

}  // namespace fleetsim

// What the library exports (realexec/src/cuda_backend.cpp and calibrate/src/calibrate_cuda.cpp).
extern "C" {
using FleetsimCudaAvailable = bool (*)(std::string* why);
using FleetsimCudaExecute = void (*)(const fleetsim::Scenario* scenario, const fleetsim::RunResult* plan,
                                     const fleetsim::ExecOptions* options, std::optional<fleetsim::RunResult>* out);
using FleetsimCudaCalibrate = void (*)(const fleetsim::CudaCalibrateOptions* options, fleetsim::Profile* out);
bool fleetsim_cuda_available(std::string* why);
void fleetsim_cuda_execute(const fleetsim::Scenario* scenario, const fleetsim::RunResult* plan, const fleetsim::ExecOptions* options,
                           std::optional<fleetsim::RunResult>* out);
void fleetsim_cuda_calibrate(const fleetsim::CudaCalibrateOptions* options, fleetsim::Profile* out);
}
