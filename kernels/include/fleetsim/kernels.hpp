// CUDA kernels and cuBLAS GEMMs that the CUDA backend launches, with CPU twins for the tests. The
// host-side launchers are plain C++ declarations: a translation unit that calls them needs neither
// nvcc nor the CUDA headers. A stream and a cuBLAS handle travel as the opaque pointers that
// cudaStream_t and cublasHandle_t are.
//
// Every launcher only enqueues work on its stream and returns the launch's status code: a
// cudaError_t (gemm: a cublasStatus_t) as an int, 0 on success. The caller turns a non-zero code
// into an error naming its task and device.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

struct CUstream_st;    // cudaStream_t is CUstream_st*
struct cublasContext;  // cublasHandle_t is cublasContext*

namespace fleetsim::gpu {

using Stream = CUstream_st*;
using Blas = cublasContext*;

// Element types of GEMM operands. tf32 is fp32 storage with TF32 tensor-core products; f16 and
// bf16 accumulate in fp32.
enum class Element : std::uint8_t { f64, f32, tf32, f16, bf16 };
std::size_t element_bytes(Element e);

// x[i] = value for i < count, converted to the element type.
int fill(void* x, Element e, double value, std::size_t count, Stream stream);
// x[i] = random_value(seed, i) for i < count, converted to the element type (rounding can make a value just under 1
// exactly 1 in fp32, fp16 or bf16). GEMMs are timed on such operands: a tensor core's power, and so its clock under
// the power limit, depends on the bits it multiplies, and constants (or zeros) run faster than a real model's data.
int fill_random(void* x, Element e, std::uint64_t seed, std::size_t count, Stream stream);

#if defined(__CUDACC__)
#define FLEETSIM_HOST_DEVICE __host__ __device__
#else
#define FLEETSIM_HOST_DEVICE
#endif
// Uniform in [-1, 1) in double: the top 53 bits of the (i + 1)-th output of splitmix64 seeded with `seed`.
FLEETSIM_HOST_DEVICE inline double random_value(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}
#undef FLEETSIM_HOST_DEVICE
// STREAM triad a = b + scalar * c over count floats: 12 bytes of memory traffic per element.
int triad(float* a, const float* b, const float* c, float scalar, std::size_t count, Stream stream);
// dst[i] += src[i]: the reduction step of collectives done as copies (no NCCL).
int accumulate(float* dst, const float* src, std::size_t count, Stream stream);
// Row-wise softmax of a rows x cols row-major matrix (max-subtracted, as attention does).
int softmax_rows(const float* in, float* out, int rows, int cols, Stream stream);
// Row-wise layer normalization without scale and shift: (x - mean) / sqrt(var + epsilon).
int layernorm_rows(const float* in, float* out, int rows, int cols, float epsilon, Stream stream);
// C (m x n) = A (m x k) * B (k x n), column-major with leading dimensions m, k and m, on the
// handle's stream. Returns a cublasStatus_t code.
int gemm(Blas blas, Element e, int m, int n, int k, const void* a, const void* b, void* c);
// 2 m n k: the FLOP of one gemm (one multiply-add is two).
inline double gemm_flop(double m, double n, double k) { return 2 * m * n * k; }

// How the backend runs some FLOP as GEMMs: `tiles` products of tile^3, then one tile x tile x k (k > 0), or, where
// less than a tile x tile x align product is left, one cube of side `cube` (0: none). k and the cube's side are
// multiples of `align`: cuBLAS's tensor-core kernels want 16-byte aligned rows, and on an H200 an odd k ran 3x
// slower (reports/gpu-validation.md).
struct GemmPlan {
  std::size_t tiles = 0;
  int k = 0, cube = 0;
  double flop(int tile) const { return static_cast<double>(tiles) * gemm_flop(tile, tile, tile) + gemm_flop(tile, tile, k) + gemm_flop(cube, cube, cube); }
};
inline GemmPlan plan_gemms(double flop, int tile, int align) {
  GemmPlan p;
  if (!(flop > 0)) return p;
  const double whole = gemm_flop(tile, tile, tile);
  p.tiles = static_cast<std::size_t>(flop / whole);
  const double rest = flop - static_cast<double>(p.tiles) * whole;
  const auto multiple = [align](double x) { return align * static_cast<int>(std::llround(x / align)); };
  if (rest >= gemm_flop(tile, tile, align)) {
    p.k = std::min(multiple(rest / gemm_flop(tile, tile, 1)), tile);
  } else {
    p.cube = multiple(std::cbrt(rest / 2));
  }
  return p;
}
// A task's FLOP in `launches` calls, one plan each: what one call's rounding leaves out (or adds) is carried to the
// next, so the calls together do the FLOP to within half of the last rounding step.
inline std::vector<GemmPlan> plan_launches(double flop, std::uint32_t launches, int tile, int align) {
  const std::uint32_t n = std::max<std::uint32_t>(launches, 1);
  std::vector<GemmPlan> plans;
  plans.reserve(n);
  double carried = 0;
  for (std::uint32_t l = 0; l < n; ++l) {
    const double wanted = flop / n + carried;
    plans.push_back(plan_gemms(wanted, tile, align));
    carried = wanted - plans.back().flop(tile);
  }
  return plans;
}

// The same computations on the CPU, in double precision where it matters, for correctness tests.
namespace reference {
void triad(float* a, const float* b, const float* c, float scalar, std::size_t count);
void accumulate(float* dst, const float* src, std::size_t count);
void softmax_rows(const float* in, float* out, int rows, int cols);
void layernorm_rows(const float* in, float* out, int rows, int cols, float epsilon);
void gemm(int m, int n, int k, const float* a, const float* b, float* c);
}  // namespace reference

}  // namespace fleetsim::gpu
