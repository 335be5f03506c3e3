// How the CUDA backend turns a task's FLOP into cuBLAS GEMMs (gpu::plan_gemms, gpu::plan_launches): plain arithmetic,
// tested here where there is no GPU.
#include <catch2/catch.hpp>

#include <cmath>

#include "fleetsim/kernels.hpp"

using fleetsim::gpu::GemmPlan;
using fleetsim::gpu::gemm_flop;
using fleetsim::gpu::plan_gemms;
using fleetsim::gpu::plan_launches;

namespace {

constexpr int kTile = 4096, kAlign = 16;

double total(const std::vector<GemmPlan>& plans) {
  double flop = 0;
  for (const GemmPlan& p : plans) flop += p.flop(kTile);
  return flop;
}

}  // namespace

TEST_CASE("a GEMM plan is whole tiles then an aligned remainder") {
  const double tile = gemm_flop(kTile, kTile, kTile);
  const GemmPlan p = plan_gemms(14.55 * tile, kTile, kAlign);  // 2 TFLOP: the validation graph's bf16 launches
  CHECK(p.tiles == 14);
  CHECK(p.k == 2256);  // 0.55 x 4096 = 2252.8, the nearest multiple of 16
  CHECK(p.cube == 0);
  CHECK(std::abs(p.flop(kTile) - 14.55 * tile) <= gemm_flop(kTile, kTile, kAlign / 2));
  // An odd remainder (k = 3358 unrounded) becomes a multiple of 16, never more than a tile.
  const GemmPlan odd = plan_gemms(5 * tile + gemm_flop(kTile, kTile, 3358), kTile, kAlign);
  CHECK(odd.tiles == 5);
  CHECK(odd.k == 3360);
  CHECK(plan_gemms(tile - 1, kTile, kAlign).k == kTile);
  // Less than a tile x tile x 16 product: a cube of a side in multiples of 16; nothing for nothing.
  const GemmPlan small = plan_gemms(5e6, kTile, kAlign);
  CHECK(small.tiles == 0);
  CHECK(small.k == 0);
  CHECK(small.cube == 128);  // (2.5e6)^(1/3) = 135.7
  CHECK(plan_gemms(0, kTile, kAlign).flop(kTile) == 0);
  CHECK(plan_gemms(-1, kTile, kAlign).flop(kTile) == 0);
}

TEST_CASE("a task's launches carry their rounding so the task does its FLOP") {
  // Per-launch rounding alone would be the same at every launch and add up: a task of 20 launches of 0.8 GFLOP
  // (k = 23.8) would run k = 16 twenty times, a third too little.
  for (const double flop : {40e12, 16e9, 0.8e9 * 20, 0.1e9, 5e6 * 20, 1e3}) {
    for (const std::uint32_t launches : {1u, 5u, 20u, 200u}) {
      const std::vector<GemmPlan> plans = plan_launches(flop, launches, kTile, kAlign);
      INFO(flop << " FLOP in " << launches << " launches");
      REQUIRE(plans.size() == launches);
      for (const GemmPlan& p : plans) {
        CHECK(p.k % kAlign == 0);
        CHECK(p.cube % kAlign == 0);
        CHECK(p.k <= kTile);
      }
      // Within half of the largest rounding step a launch can take (a cube's step grows with its side).
      const double step = std::max(gemm_flop(kTile, kTile, kAlign), 2 * std::pow(std::cbrt(flop / 2) + kAlign, 3) - 2 * std::pow(std::cbrt(flop / 2), 3));
      CHECK(std::abs(total(plans) - flop) <= step / 2);
      if (flop >= 1e9) CHECK(std::abs(total(plans) - flop) <= 0.01 * flop);
    }
  }
  CHECK(plan_launches(1e12, 0, kTile, kAlign).size() == 1);  // no launches given: one
}
