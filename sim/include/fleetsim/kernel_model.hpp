// How long one GPU kernel takes, from its shape: the kernel-time model that layer-level model profiles
// are timed with.
//
// A GEMM is tiled as cuBLAS tiles it: each candidate tile shape (with split-K where the tiles are too
// few to fill the GPU) runs in waves of one tile per SM, each tile at a per-SM rate that depends on
// its shape; the fastest candidate is taken, and never faster than moving its operands through HBM.
// Memory-bound kernels (norms, activations, elementwise, rotary embeddings, softmax, embeddings,
// optimizer steps) move their bytes at the share of HBM bandwidth their class achieves. Attention runs
// at a FlashAttention-class fraction of peak, or at HBM speed where reading the KV cache dominates.
// Every kernel pays a fixed cost. The constants (models/kernels.json) are per GPU architecture, with
// their sources; each estimate says which bound it hit.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"

namespace fleetsim {

enum class KernelClass : std::uint8_t {
  gemm,              // m x k times k x n
  attention,         // batch x heads of (m queries over n keys), head dimension k
  norm,              // LayerNorm / RMSNorm of m rows of n
  add,               // elementwise binary (residual add): reads 2 m x n, writes m x n
  activation,        // elementwise unary (GELU, SiLU): m x n in, m x n out
  gated_activation,  // SwiGLU / GEGLU: m x 2n in, m x n out
  rope,              // rotary embedding of m rows of n (queries and keys), in place
  softmax,           // m rows of n, read and written
  embedding,         // gather m rows of n from a table
  reduction,         // m rows of n reduced to m values, a CTA per row (GroupNorm's statistics)
  memory,            // any other memory-bound kernel: m x n elements read and written in all (0: a launch)
  broadcast,         // elementwise with a broadcast, strided or mixed-dtype operand: m x n out (adaLN's modulation,
                     // a gate, a transpose made contiguous, an upcast to fp32)
  indexed_copy,      // a copy whose every output element computes where it reads (a replication pad): m x n out
};
std::string_view kernel_class_name(KernelClass cls);
std::optional<KernelClass> parse_kernel_class(std::string_view name);

// The fused attention kernels a runtime's attention runs on: FlashAttention-2 (what PyTorch's
// scaled_dot_product_attention picks up to 2.10, and flash-attn ships) or cuDNN's (what it picks from 2.11 on
// Hopper and Blackwell, and what Transformer Engine runs).
enum class AttentionBackend : std::uint8_t { flash2, cudnn };
std::string_view attention_backend_name(AttentionBackend backend);
std::optional<AttentionBackend> parse_attention_backend(std::string_view name);
// "flash2 or cudnn", for messages.
std::string attention_backend_choices();

struct RuntimeKernel;

// One kernel call (or `count` identical ones). Dimensions as KernelClass says.
struct KernelCall {
  KernelClass cls = KernelClass::gemm;
  double m = 0, n = 0, k = 0;
  double batch = 1;     // attention: batch x query heads; gemm: a batched GEMM's count
  double taps = 1;      // gemm: a convolution's kernel taps (k x k), each a column block of K over the one input
  double groups = 1;    // attention: query heads per key/value head (GQA)
  bool causal = false;  // attention
  AttentionBackend backend = AttentionBackend::flash2;  // attention: whose kernels run it
  bool backward = false;  // attention: the backward pass (dQ, dK, dV), as FlashAttention-2 runs it
  bool weight_gradient = false;  // gemm: a backward's weight-gradient GEMM (what a zero-bubble pipeline defers)
  // gemm, fp8: scaled by blocks (1 x 128 activation tiles, 128 x 128 weight blocks, DeepSeek-V3's recipe), the
  // scales applied in the main loop, rather than by one scale a tensor.
  bool block_scaled = false;
  // attention: the values' head dimension where it is not the keys' `k` (0: k); MLA's prefill runs keys
  // of 192 and values of 128.
  double v = 0;
  // attention: keys and values are one cached tensor, read once (MLA's latent, absorbed: the values are
  // its first `v` columns, as FlashMLA reads them).
  bool latent_kv = false;
  double count = 1;
  // Memory-bound kernels: bytes read and written per element of m x n, where they are not what the class
  // and the step's dtype make them (eager code that upcasts to fp32, reads two tensors, writes a third);
  // 0: as the class says.
  double element_bytes = 0;
  // gemm: bytes per element of the k x n operand (the weights) where they are stored narrower than the
  // GEMM computes and widened in registers (weight-only int4); 0: the dtype's.
  double weight_bytes = 0;
  std::string name = {};  // what it is in the model ("qkv", "mlp.down", ...)
  const RuntimeKernel* origin = nullptr;  // the runtime's kernel it is (models/runtimes.json), if one
};

// The estimate and why: the compute-bound time (tiles at their rate), the memory-bound time (bytes
// through HBM), and the fixed cost.
struct KernelEstimate {
  double compute_s = 0;
  double memory_s = 0;
  double fixed_s = 0;
  double time_s() const { return fixed_s + (compute_s > memory_s ? compute_s : memory_s); }
  bool memory_bound() const { return memory_s >= compute_s; }
};

// The constants of models/kernels.json, per GPU architecture.
inline constexpr std::size_t kMemoryKernelClasses = 11;  // norm .. indexed_copy, in KernelClass order
// A memory-bound class: its bytes move at `efficiency` of HBM bandwidth (l2_speedup times faster for
// the share that fits in the GPU's L2 cache, where the previous kernel left it), and no faster than
// rows allow: each row is one CTA moving its bytes at row_GBps, rows_per_sm at once on each SM
// (row_GBps 0: no limit).
struct MemoryKernelConstants {
  double efficiency = 1;
  double fixed_us = 0;
  double row_GBps = 0;
  double rows_per_sm = 1;
  double l2_speedup = 1;
};
// Attention on one backend's kernels: a share of the tensor peak, with a query block's fixed work and the
// softmax's per-key work on top of the products.
struct AttentionConstants {
  double efficiency = 1;
  double key_overhead = 0;   // a query block's prologue and epilogue, in keys
  double head_overhead = 0;  // per-key softmax work, in head-dimension units
  double fixed_us = 0;
};
struct KernelArchConstants {
  std::string source;
  std::string borrowed;  // what of it is borrowed from another architecture, not measured on this one ("": none)
  std::string fitted_on;  // the catalog GPU its measurements were taken on ("": none named)
  std::vector<double> tile_efficiency;  // per tile shape of KernelConstants::tiles
  double k_overhead = 0;                // a tile's prologue and epilogue, in K elements
  double gemm_memory_efficiency = 1;
  double gemm_fixed_us = 0;
  double gemm_fp8_efficiency = 1;       // fp8 GEMMs' tile efficiency as a share of the (bf16) figures above
  double gemm_fp8_blockwise_efficiency = 1;  // the same of fp8 GEMMs scaled by blocks (KernelCall::block_scaled)
  std::array<MemoryKernelConstants, kMemoryKernelClasses> memory{};
  AttentionConstants attention;  // FlashAttention-2's
  // cuDNN's fused attention where it was measured on this architecture, with where from.
  std::optional<AttentionConstants> cudnn_attention;
  std::string cudnn_attention_source;
  // The attention backward's achieved rate over the forward's, where this architecture has its own
  // (0: KernelConstants' figure).
  double attention_backward_rate = 0, attention_backward_rate_causal = 0;
};
struct KernelConstants {
  std::string about, gemm_source;
  std::vector<std::array<double, 2>> tiles;  // (rows, columns) of the output a CTA computes
  std::vector<double> split_k;
  double split_k_min_k = 0;
  double attention_block = 128;  // query rows per CTA
  std::vector<double> attention_head_dims;  // the head dimensions attention kernels are built for, ascending
  std::string attention_head_dims_source;
  // The attention backward pass: its FLOP over the forward's, and its achieved rate over the forward's
  // (causal and not).
  double attention_backward_flop = 2.5, attention_backward_rate = 1, attention_backward_rate_causal = 1;
  std::string attention_backward_source;
  // Host time to launch one kernel from eager PyTorch: Python, module calls, the dispatcher, the
  // launch itself. A compiled step (CUDA graphs) pays none of it.
  double eager_dispatch_us = 0;
  std::string host_source;
  // Adam on a node's CPUs (a training job's offloaded optimizer): parameters stepped a second, by PyTorch's fused
  // CPU AdamW (Megatron-Core's offload) and by DeepSpeed's CPU-Adam, each as one process with the machine's cores.
  double cpu_adam_torch_params_per_s = 0, cpu_adam_deepspeed_params_per_s = 0;
  std::string cpu_adam_source;
  KernelArchConstants ampere, hopper, ada, fallback;
  // The section an architecture uses (architectures without their own use `fallback`).
  const KernelArchConstants& of(GpuArch arch) const;
  KernelArchConstants& of(GpuArch arch);
};
// The constants as JSON of the shape parse_kernel_constants reads.
std::string kernel_constants_json(const KernelConstants& k);
std::shared_ptr<const KernelConstants> builtin_kernel_constants();
// Strict: unknown fields, wrong shapes and non-positive figures are errors naming `file` and the field.
std::shared_ptr<const KernelConstants> parse_kernel_constants(std::string_view text, const std::string& file);

class KernelModel {
 public:
  explicit KernelModel(const GpuType& gpu, std::shared_ptr<const KernelConstants> constants = builtin_kernel_constants());
  // One call (count ignored); the element size is the dtype's.
  KernelEstimate estimate(const KernelCall& call, Dtype dtype) const;
  // Calls in sequence, each `count` times.
  double time_s(const std::vector<KernelCall>& calls, Dtype dtype) const;
  // Where the constants are a guess for this GPU, why, in words ("": they were fitted on it or on a GPU like it):
  // borrowed from another architecture, or fitted on a GPU of its architecture whose tensor cores do half as much
  // again (or less) work an SM, as an H100's against an H20's, where the fitted shares of peak need not hold.
  std::string guess() const;
  // The same for attention on `backend`'s kernels where this architecture has no constants of its own for them
  // (FlashAttention-2's stand in); "" where it has.
  std::string attention_guess(AttentionBackend backend) const;
  const KernelConstants& constants() const { return *k_; }

 private:
  KernelEstimate gemm(const KernelCall& call, Dtype dtype) const;
  // A fitted share of the tensor peak, on this GPU: the time the fitted GPU lost to its peak (1 / share - 1 of the
  // tensor cores' time: epilogues, softmax, stalls) does not shrink or grow with the tensor cores' rate, so where an SM
  // does `ratio` times the fitted GPU's tensor work, the share is 1 / (1 + ratio (1 / share - 1)).
  double share(double fitted_share, Dtype dtype) const;
  GpuType gpu_;
  const GpuType* fitted_ = nullptr;  // the GPU the architecture's constants were fitted on (nullptr: none named)
  // Per dtype, the tensor work an SM of this GPU's design (the catalog's entry of its id: a MIG slice or a calibrated
  // GPU keeps its SMs) against the fitted GPU's; 1 where none is named, an SM count is unknown, or the dtype runs
  // on the CUDA cores (fp32, fp64).
  std::array<double, kDtypeCount> tensor_ratio_{};
  std::shared_ptr<const KernelConstants> k_;
  const KernelArchConstants* arch_ = nullptr;  // the GPU architecture's, within k_
};

double dtype_bytes(Dtype dtype);
// The bytes a kernel moves through HBM: a GEMM's operands, attention's queries, keys, values and output,
// a memory-bound kernel's tensors as its class (or element_bytes) says.
double kernel_bytes(const KernelCall& call, Dtype dtype);

}  // namespace fleetsim
