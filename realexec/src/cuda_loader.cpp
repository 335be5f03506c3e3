// Opens the CUDA backend's library on first use (cuda_plugin.hpp) and forwards to it.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "fleetsim/cuda_plugin.hpp"
#include "fleetsim/realexec.hpp"

namespace fleetsim {

std::string cuda_backend_path() {
  if (const char* path = std::getenv("FLEETSIM_CUDA_BACKEND"); path != nullptr && *path != '\0') return path;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (error ? std::filesystem::path("libfleetsim_cuda.so") : self.parent_path() / "libfleetsim_cuda.so").string();
}

void* cuda_backend_entry(const char* name, std::string* why) {
#if FLEETSIM_CUDA_BUILT
  static std::once_flag once;
  static void* library = nullptr;
  static std::string open_error;
  std::call_once(once, [] {
    const std::string path = cuda_backend_path();
    // RTLD_NODELETE: CUDA's own teardown at exit expects its code still mapped.
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == nullptr) open_error = std::string("cannot open the CUDA backend's library: ") + dlerror();
  });
  if (library == nullptr) {
    if (why != nullptr) *why = open_error;
    return nullptr;
  }
  void* entry = dlsym(library, name);
  if (entry == nullptr && why != nullptr) *why = cuda_backend_path() + " has no entry point " + name + ": a library from another fleetsim build?";
  return entry;
#else
  (void)name;
  if (why != nullptr) *why = "this fleetsim was built without CUDA (no nvcc when CMake ran; see docs/run.md)";
  return nullptr;
#endif
}

bool cuda_available(std::string* why) {
  const auto available = reinterpret_cast<FleetsimCudaAvailable>(cuda_backend_entry("fleetsim_cuda_available", why));
  return available != nullptr && available(why);
}

RunResult execute_on_cuda(const Scenario& scenario, const RunResult& plan, const ExecOptions& options) {
  std::string why;
  const auto execute = reinterpret_cast<FleetsimCudaExecute>(cuda_backend_entry("fleetsim_cuda_execute", &why));
  if (execute == nullptr) throw DeviceError("the CUDA backend cannot run here: " + why);
  std::optional<RunResult> out;
  execute(&scenario, &plan, &options, &out);
  return std::move(*out);
}

}  // namespace fleetsim
