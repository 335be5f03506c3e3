// GEMMs through cuBLAS in each element type, on the handle's stream.
#include <cublas_v2.h>

#include "fleetsim/kernels.hpp"

namespace fleetsim::gpu {

int gemm(Blas blas, Element e, int m, int n, int k, const void* a, const void* b, void* c) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  if (e == Element::f64) {
    const double alpha = 1, beta = 0;
    return static_cast<int>(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, static_cast<const double*>(a), m,
                                        static_cast<const double*>(b), k, &beta, static_cast<double*>(c), m));
  }
  const float alpha = 1, beta = 0;
  if (e == Element::f32) {
    return static_cast<int>(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, static_cast<const float*>(a), m,
                                        static_cast<const float*>(b), k, &beta, static_cast<float*>(c), m));
  }
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (e) {
    case Element::tf32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case Element::f16: type = CUDA_R_16F; break;
    case Element::bf16: type = CUDA_R_16BF; break;
    case Element::f64:
    case Element::f32: break;
  }
  return static_cast<int>(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, type, m, b, type, k, &beta, c, type, m,
                                       compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace fleetsim::gpu
