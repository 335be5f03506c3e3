// The memory-bound kernels. Grid-stride loops, so one launch covers any count; launch errors are
// returned, never thrown, so the caller can name the task and device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "fleetsim/kernels.hpp"

namespace fleetsim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr std::size_t kMaxBlocks = 65535;

unsigned blocks_for(std::size_t count) {
  return static_cast<unsigned>(std::min<std::size_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

int launched() { return static_cast<int>(cudaGetLastError()); }

template <typename T>
__device__ T convert(double v);
template <>
__device__ double convert<double>(double v) { return v; }
template <>
__device__ float convert<float>(double v) { return static_cast<float>(v); }
template <>
__device__ __half convert<__half>(double v) { return __float2half(static_cast<float>(v)); }
template <>
__device__ __nv_bfloat16 convert<__nv_bfloat16>(double v) { return __float2bfloat16(static_cast<float>(v)); }

template <typename T>
__global__ void fill_kernel(T* x, double value, std::size_t count) {
  const T v = convert<T>(value);
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x) x[i] = v;
}

template <typename T>
__global__ void fill_random_kernel(T* x, std::uint64_t seed, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x) {
    x[i] = convert<T>(random_value(seed, i));
  }
}

__global__ void triad_kernel(float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c, float scalar,
                             std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x) {
    a[i] = b[i] + scalar * c[i];
  }
}

__global__ void accumulate_kernel(float* __restrict__ dst, const float* __restrict__ src, std::size_t count) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x) {
    dst[i] += src[i];
  }
}

// Block-wide reduction over kThreads threads; every thread gets the result.
template <typename Op>
__device__ float block_reduce(float v, float* shared, Op op) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const float result = shared[0];
  __syncthreads();  // shared[] is reused by the next reduction
  return result;
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// One block per row.
__global__ void softmax_kernel(const float* __restrict__ in, float* __restrict__ out, int cols) {
  __shared__ float shared[kThreads];
  const float* row = in + static_cast<std::size_t>(blockIdx.x) * cols;
  float* dst = out + static_cast<std::size_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += kThreads) m = fmaxf(m, row[j]);
  m = block_reduce(m, shared, Max{});
  float s = 0;
  for (int j = threadIdx.x; j < cols; j += kThreads) s += expf(row[j] - m);
  s = block_reduce(s, shared, Sum{});
  for (int j = threadIdx.x; j < cols; j += kThreads) dst[j] = expf(row[j] - m) / s;
}

// One block per row; the variance from a second pass over the row, not E[x^2] - E[x]^2.
__global__ void layernorm_kernel(const float* __restrict__ in, float* __restrict__ out, int cols, float epsilon) {
  __shared__ float shared[kThreads];
  const float* row = in + static_cast<std::size_t>(blockIdx.x) * cols;
  float* dst = out + static_cast<std::size_t>(blockIdx.x) * cols;
  float s = 0;
  for (int j = threadIdx.x; j < cols; j += kThreads) s += row[j];
  const float mean = block_reduce(s, shared, Sum{}) / static_cast<float>(cols);
  float q = 0;
  for (int j = threadIdx.x; j < cols; j += kThreads) q += (row[j] - mean) * (row[j] - mean);
  const float inv = rsqrtf(block_reduce(q, shared, Sum{}) / static_cast<float>(cols) + epsilon);
  for (int j = threadIdx.x; j < cols; j += kThreads) dst[j] = (row[j] - mean) * inv;
}

// Calls launch(T{}) with T the storage type of element type `e` (nothing for no elements); the launch's status.
template <typename Launch>
int by_element(Element e, std::size_t count, Launch launch) {
  if (count == 0) return 0;
  switch (e) {
    case Element::f64: launch(double{}); return launched();
    case Element::f32:
    case Element::tf32: launch(float{}); return launched();
    case Element::f16: launch(__half{}); return launched();
    case Element::bf16: launch(__nv_bfloat16{}); return launched();
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace

std::size_t element_bytes(Element e) {
  switch (e) {
    case Element::f64: return 8;
    case Element::f32:
    case Element::tf32: return 4;
    case Element::f16:
    case Element::bf16: return 2;
  }
  return 4;
}

int fill(void* x, Element e, double value, std::size_t count, Stream stream) {
  return by_element(e, count, [&](auto zero) {
    using T = decltype(zero);
    fill_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(x), value, count);
  });
}

int fill_random(void* x, Element e, std::uint64_t seed, std::size_t count, Stream stream) {
  return by_element(e, count, [&](auto zero) {
    using T = decltype(zero);
    fill_random_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<T*>(x), seed, count);
  });
}

int triad(float* a, const float* b, const float* c, float scalar, std::size_t count, Stream stream) {
  if (count == 0) return 0;
  triad_kernel<<<blocks_for(count), kThreads, 0, stream>>>(a, b, c, scalar, count);
  return launched();
}

int accumulate(float* dst, const float* src, std::size_t count, Stream stream) {
  if (count == 0) return 0;
  accumulate_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, src, count);
  return launched();
}

int softmax_rows(const float* in, float* out, int rows, int cols, Stream stream) {
  if (rows <= 0 || cols <= 0) return 0;
  softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, out, cols);
  return launched();
}

int layernorm_rows(const float* in, float* out, int rows, int cols, float epsilon, Stream stream) {
  if (rows <= 0 || cols <= 0) return 0;
  layernorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(in, out, cols, epsilon);
  return launched();
}

}  // namespace fleetsim::gpu
