#include "fleetsim/cpu_kernels.hpp"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

namespace fleetsim::cpu {
namespace {

// Each streaming array is larger than a core's share of any current last-level cache.
constexpr std::size_t kStreamFloats = std::size_t{1} << 22;  // 16 MiB per array

template <typename Scalar>
struct Operands {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  Matrix a, b, c;
  explicit Operands(int n) : a(Matrix::Constant(n, n, Scalar(0.5))), b(Matrix::Constant(n, n, Scalar(0.25))), c(Matrix::Zero(n, n)) {}

  void run(double flop, const std::function<void()>& between) {
    const auto n = static_cast<double>(a.rows());
    const double tile = 2 * n * n * n;
    for (double done = tile; done <= flop; done += tile) {
      c.noalias() = a * b;
      if (between) between();
    }
    // The remainder as an n x n x k product: 2 n^2 k FLOP.
    const auto k = static_cast<Eigen::Index>(std::llround(std::fmod(flop, tile) / (2 * n * n)));
    if (k > 0) c.leftCols(k).noalias() = a * b.leftCols(k);
  }
};

// Operands of the last size asked for, kept so that only the first call at a size allocates.
template <typename Scalar>
void square(std::optional<Operands<Scalar>>& ops, int n) {
  if (!ops || ops->a.rows() != n) ops.emplace(n);
  ops->c.noalias() = ops->a * ops->b;
}

}  // namespace

struct Scratch::Impl {
  Operands<float> f32{kGemmTile};
  Operands<double> f64{kGemmTile};
  std::vector<float> a = std::vector<float>(kStreamFloats, 0.0f), b = std::vector<float>(kStreamFloats, 1.0f),
                     c = std::vector<float>(kStreamFloats, 2.0f);
  std::size_t cursor = 0;  // where the next triad begins
  std::optional<Operands<float>> square32;
  std::optional<Operands<double>> square64;
  std::function<void()> between;
};

Scratch::Scratch() : impl_(std::make_unique<Impl>()) {}
Scratch::~Scratch() = default;

void Scratch::between_tiles(std::function<void()> hook) { impl_->between = std::move(hook); }

void Scratch::gemm(double flop, Dtype dtype) {
  if (!(flop > 0)) return;
  if (dtype == Dtype::fp64) {
    impl_->f64.run(flop, impl_->between);
  } else {
    impl_->f32.run(flop, impl_->between);
  }
}

void Scratch::gemm_square(int n, Dtype dtype) {
  if (dtype == Dtype::fp64) {
    square(impl_->square64, n);
  } else {
    square(impl_->square32, n);
  }
}

void Scratch::stream(double bytes) {
  if (!(bytes > 0)) return;
  Impl& m = *impl_;
  auto left = static_cast<std::size_t>(std::llround(bytes / (3 * sizeof(float))));
  const float s = 3.0f;
  while (left > 0) {
    if (m.cursor == kStreamFloats) m.cursor = 0;
    const std::size_t n = std::min(left, kStreamFloats - m.cursor);
    float* __restrict a = m.a.data() + m.cursor;
    const float* __restrict b = m.b.data() + m.cursor;
    const float* __restrict c = m.c.data() + m.cursor;
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    m.cursor += n;
    left -= n;
    if (m.between) m.between();
  }
}

void collective(CollectiveOp op, std::span<float* const> buffers, std::size_t count, std::size_t rank,
                const std::function<void()>& step) {
  const std::size_t k = buffers.size();
  float* mine = buffers[rank];
  const float* left = buffers[(rank + k - 1) % k];
  auto chunk_begin = [&](std::size_t c) { return c * count / k; };  // c in [0, k]
  auto chunk_size = [&](std::size_t c) { return chunk_begin(c + 1) - chunk_begin(c); };
  // Ring steps: in step s every rank works on one chunk of its left neighbour, never the chunk
  // that neighbour is writing in the same step.
  auto reduce_scatter = [&] {
    for (std::size_t s = 0; s + 1 < k; ++s) {
      const std::size_t c = (rank + 2 * k - s - 1) % k;
      for (std::size_t i = chunk_begin(c), e = i + chunk_size(c); i < e; ++i) mine[i] += left[i];
      step();
    }
  };
  // Rank r starts owning chunk r + owned_shift.
  auto all_gather = [&](std::size_t owned_shift) {
    for (std::size_t s = 0; s + 1 < k; ++s) {
      const std::size_t c = (rank + owned_shift + 2 * k - 1 - s) % k;
      std::memcpy(mine + chunk_begin(c), left + chunk_begin(c), chunk_size(c) * sizeof(float));
      step();
    }
  };
  switch (op) {
    case CollectiveOp::all_reduce:
      reduce_scatter();  // leaves rank r owning the whole sum of chunk r + 1
      all_gather(1);
      break;
    case CollectiveOp::all_gather: all_gather(0); break;
    case CollectiveOp::reduce_scatter: reduce_scatter(); break;
    case CollectiveOp::broadcast:
      if (rank != 0) std::memcpy(mine, buffers[0], count * sizeof(float));
      step();
      break;
    case CollectiveOp::reduce:
      if (rank == 0) {
        for (std::size_t j = 1; j < k; ++j) {
          for (std::size_t i = 0; i < count; ++i) mine[i] += buffers[j][i];
        }
      }
      step();
      break;
    case CollectiveOp::all_to_all:
      // Chunk j of rank r goes to chunk r of rank j, received into the second half of the buffer.
      for (std::size_t j = 0; j < k; ++j) {
        std::memcpy(mine + count + chunk_begin(j), buffers[j] + chunk_begin(rank), std::min(chunk_size(j), chunk_size(rank)) * sizeof(float));
      }
      step();
      break;
    case CollectiveOp::send_recv:
      if (rank != 0) std::memcpy(mine + count, left, count * sizeof(float));
      step();
      break;
  }
}

}  // namespace fleetsim::cpu
