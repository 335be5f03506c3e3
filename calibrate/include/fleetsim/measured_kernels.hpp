// Measured kernel times from elsewhere (a profiler, a benchmark), to check the kernel-time model
// against: a CSV whose header is "name,kernel,m,n,k,time_us" (or with a batch column before time_us),
// one kernel call per row. `name` is a free label ("Llama-2-7b/tp1/mlp_up_proj"); `kernel` a kernel
// class (fleetsim/kernel_model.hpp) other than memory; m, n, k its dimensions as that class reads them
// (k 0 for the memory-bound classes); batch a batched GEMM's count or attention's batch x heads
// (attention needs the batch column). Attention's kind takes `-cudnn` (on cuDNN's kernels, not FlashAttention-2's),
// `-causal` (under a causal mask) and `-fwd-bwd` (a forward and a backward pass together, as FlashAttention's
// benchmark reports them) in that order: `attention-cudnn-causal`, `attention-causal-fwd-bwd` (cuDNN's rows are forwards alone).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/kernel_model.hpp"

namespace fleetsim {

struct MeasuredKernel {
  std::string name;
  KernelCall call;
  bool with_backward = false;  // attention: the time is of the forward and the backward pass together
  double time_s = 0;
};

// What the model predicts for a measured row: the call's estimate, or with `with_backward` the sum of the
// two passes' (each compute-bound at the shapes attention is benchmarked at, so their times add).
KernelEstimate estimate_measured(const KernelModel& model, const MeasuredKernel& m, Dtype dtype);

// Strict: a wrong header, a malformed or non-positive number, an unknown class is an InputError
// naming the file, the line and the column.
std::vector<MeasuredKernel> parse_measured_kernels(std::string_view text, const std::string& file);
std::vector<MeasuredKernel> load_measured_kernels(const std::string& path);

}  // namespace fleetsim

namespace fleetsim {

// The kernel-model constants of `gpu`'s architecture fitted to measured kernels: the GEMM figures to
// the GEMM rows, each memory-bound class's to its rows (classes without rows keep `base`'s), attention's
// to its rows (with the causal backward's rate where causal rows time both passes), by
// least squares on log(predicted / measured) with a soft-L1 loss, so a few odd rows do not pull the
// fit. The rest of `base` is kept. `source` is written into the fitted section.
std::shared_ptr<const KernelConstants> fit_kernel_constants(const GpuType& gpu, Dtype dtype, const std::vector<MeasuredKernel>& measured,
                                                            const KernelConstants& base, const std::string& source);

}  // namespace fleetsim
