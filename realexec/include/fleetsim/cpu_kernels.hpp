// The CPU backend's kernels: work of a given size run for real on the calling thread. Used by the
// CPU backend to execute tasks and by calibration to measure this machine.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "fleetsim/catalog.hpp"
#include "fleetsim/collective.hpp"

namespace fleetsim::cpu {

// One worker's scratch memory: GEMM operands and streaming arrays, allocated and written once up
// front so that no kernel pays for first-touch page faults.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // GEMMs totalling `flop` (2 per multiply-add): square tiles of kGemmTile, then one narrower
  // product for the remainder. fp64 runs in double precision, every other dtype in fp32.
  void gemm(double flop, Dtype dtype);
  // A square GEMM of side n, for size sweeps. The first call at a size allocates its operands.
  void gemm_square(int n, Dtype dtype);
  // Moves `bytes` through memory with the STREAM triad a = b + s*c (two reads and one write per
  // element, 12 bytes in fp32), walking on through arrays larger than the caches.
  void stream(double bytes);
  // Called after each GEMM tile and each pass over the streaming arrays (a millisecond or so): a
  // rank of a multi-process run lets its sends move on while it computes.
  void between_tiles(std::function<void()> hook);

  static constexpr int kGemmTile = 256;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Member `rank` of a gang runs its part of a collective over the gang's buffers (one per member,
// each 2 x `count` floats: the data, then room to receive). `step` is a barrier every member passes
// together between the algorithm's steps. all-reduce is a ring reduce-scatter then a ring
// all-gather, so afterwards every buffer's first `count` floats hold the element-wise sum.
void collective(CollectiveOp op, std::span<float* const> buffers, std::size_t count, std::size_t rank,
                const std::function<void()>& step);

}  // namespace fleetsim::cpu
