// Checked CUDA, cuBLAS and NCCL calls for the CUDA translation units (backend, calibration, ranks):
// a failure throws DeviceError naming where the call was made, the call and the library's error.
// Include only where CUDA is built.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#if defined(FLEETSIM_HAVE_NCCL)
#include <nccl.h>
#endif

#include <string>

#include "fleetsim/realexec.hpp"

namespace fleetsim::cuda {

// The thread's last-error state is cleared, so a later kernel launch does not report this failure again.
inline void check(cudaError_t e, const char* call, const std::string& where) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw DeviceError(where + ": " + call + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
inline void check(cublasStatus_t s, const char* call, const std::string& where) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  (void)cudaGetLastError();
  throw DeviceError(where + ": " + call + " failed: " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}
#if defined(FLEETSIM_HAVE_NCCL)
inline void check(ncclResult_t r, const char* call, const std::string& where) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw DeviceError(where + ": " + call + " failed: " + ncclGetErrorString(r) +
                    (last != nullptr && *last ? std::string(" (") + last + ")" : ""));
}
#endif
// The kernels library returns codes as ints (its header carries no CUDA types).
inline cudaError_t kernel(int code) { return static_cast<cudaError_t>(code); }
inline cublasStatus_t blas(int code) { return static_cast<cublasStatus_t>(code); }

}  // namespace fleetsim::cuda

// Every CUDA, cuBLAS and NCCL call goes through this: `where` names the task or the device.
#define FLEETSIM_CUDA(where, call) ::fleetsim::cuda::check((call), #call, (where))
