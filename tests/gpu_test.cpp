// The CUDA backend on a real GPU: each kernel against its CPU twin, cuBLAS GEMMs in every element
// type against a CPU product, and a replayed plan with the same tasks on the same devices as the
// CPU backend's test, and the CUDA calibration's sweeps and profile. Without a CUDA device the program says so and exits 77, which CTest reports
// as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/kernels.hpp"
#include "fleetsim/realexec.hpp"
#include "fleetsim/trace_diff.hpp"

using namespace fleetsim;

namespace {

void ok(cudaError_t e) { REQUIRE(std::string(cudaGetErrorName(e)) == "cudaSuccess"); }
void ok(int code) { ok(static_cast<cudaError_t>(code)); }  // the kernels' launch status

// A device buffer holding a copy of `host`, freed at scope end.
template <typename T>
struct DeviceCopy {
  T* ptr = nullptr;
  std::size_t count;
  explicit DeviceCopy(const std::vector<T>& host) : count(host.size()) {
    ok(cudaMalloc(&ptr, std::max<std::size_t>(count, 1) * sizeof(T)));
    ok(cudaMemcpy(ptr, host.data(), count * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit DeviceCopy(std::size_t n) : DeviceCopy(std::vector<T>(n)) {}
  ~DeviceCopy() { cudaFree(ptr); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  std::vector<T> read() const {
    std::vector<T> host(count);
    ok(cudaDeviceSynchronize());
    ok(cudaMemcpy(host.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
};

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

// Multiples of 1/8 in [-1, 1]: exact in every element type, so only the accumulation differs.
std::vector<float> eighths(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-8, 8);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(value(rng)) / 8;
  return v;
}

// Largest |got - want| over the largest |want|.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace

TEST_CASE("the triad kernel computes a = b + s c") {
  const std::size_t n = (std::size_t{1} << 20) + 3;
  const std::vector<float> b = random_floats(n, 1), c = random_floats(n, 2);
  DeviceCopy<float> da(n), db(b), dc(c);
  ok(gpu::triad(da.ptr, db.ptr, dc.ptr, 3.0f, n, nullptr));
  std::vector<float> want(n);
  gpu::reference::triad(want.data(), b.data(), c.data(), 3.0f, n);
  CHECK(relative_error(da.read(), want) < 1e-6);
}

TEST_CASE("the accumulate kernel adds element-wise") {
  const std::size_t n = 100003;
  std::vector<float> dst = random_floats(n, 3);
  const std::vector<float> src = random_floats(n, 4);
  DeviceCopy<float> dd(dst), ds(src);
  ok(gpu::accumulate(dd.ptr, ds.ptr, n, nullptr));
  gpu::reference::accumulate(dst.data(), src.data(), n);
  CHECK(relative_error(dd.read(), dst) < 1e-6);
}

TEST_CASE("the softmax and layernorm row kernels match their CPU twins") {
  for (const auto& [rows, cols] : {std::pair{64, 1000}, std::pair{3, 7}, std::pair{17, 4096}}) {
    const std::vector<float> in = random_floats(static_cast<std::size_t>(rows) * cols, 5, -4, 4);
    DeviceCopy<float> din(in), dout(in.size());
    std::vector<float> want(in.size());
    ok(gpu::softmax_rows(din.ptr, dout.ptr, rows, cols, nullptr));
    gpu::reference::softmax_rows(in.data(), want.data(), rows, cols);
    CHECK(relative_error(dout.read(), want) < 1e-5);
    ok(gpu::layernorm_rows(din.ptr, dout.ptr, rows, cols, 1e-5f, nullptr));
    gpu::reference::layernorm_rows(in.data(), want.data(), rows, cols, 1e-5f);
    CHECK(relative_error(dout.read(), want) < 1e-5);
  }
}

TEST_CASE("the fill kernel writes the value in each element type") {
  const std::size_t n = 1000;
  DeviceCopy<double> d64(n);
  ok(gpu::fill(d64.ptr, gpu::Element::f64, 0.5, n, nullptr));
  for (double x : d64.read()) REQUIRE(x == 0.5);
  DeviceCopy<float> d32(n);
  ok(gpu::fill(d32.ptr, gpu::Element::f32, 0.25, n, nullptr));
  for (float x : d32.read()) REQUIRE(x == 0.25f);
  DeviceCopy<std::uint16_t> d16(n);
  ok(gpu::fill(d16.ptr, gpu::Element::bf16, 0.5, n, nullptr));
  for (std::uint16_t x : d16.read()) REQUIRE(x == 0x3F00);  // 0.5 in bfloat16
  ok(gpu::fill(d16.ptr, gpu::Element::f16, 0.5, n, nullptr));
  for (std::uint16_t x : d16.read()) REQUIRE(x == 0x3800);  // 0.5 in IEEE half
}

TEST_CASE("the random fill writes random_value in each element type") {
  const std::size_t n = 100003;
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = static_cast<float>(gpu::random_value(9, i));
  double sum = 0;
  for (float x : want) {
    REQUIRE(x >= -1.0f);
    REQUIRE(x <= 1.0f);  // [-1, 1) in double; rounding to fp32 can reach 1
    sum += x;
  }
  CHECK(std::abs(sum / static_cast<double>(n)) < 0.01);  // uniform on [-1, 1): mean 0, standard error 0.0018
  DeviceCopy<double> d64(n);
  ok(gpu::fill_random(d64.ptr, gpu::Element::f64, 9, n, nullptr));
  const std::vector<double> got64 = d64.read();
  for (std::size_t i = 0; i < n; ++i) REQUIRE(got64[i] == gpu::random_value(9, i));
  DeviceCopy<float> d32(n);
  ok(gpu::fill_random(d32.ptr, gpu::Element::f32, 9, n, nullptr));
  CHECK(relative_error(d32.read(), want) == 0);
  DeviceCopy<__nv_bfloat16> d16(n);
  ok(gpu::fill_random(d16.ptr, gpu::Element::bf16, 9, n, nullptr));
  std::vector<float> got16(n);
  const std::vector<__nv_bfloat16> raw = d16.read();
  std::transform(raw.begin(), raw.end(), got16.begin(), [](__nv_bfloat16 x) { return __bfloat162float(x); });
  CHECK(relative_error(got16, want) < 1.0 / 256);  // rounded to 8 significant bits
}

TEST_CASE("cuBLAS GEMMs in every element type match a CPU product") {
  const int m = 70, n = 50, k = 90;
  const std::vector<float> a = eighths(static_cast<std::size_t>(m) * k, 6), b = eighths(static_cast<std::size_t>(k) * n, 7);
  std::vector<float> want(static_cast<std::size_t>(m) * n);
  gpu::reference::gemm(m, n, k, a.data(), b.data(), want.data());
  cublasHandle_t handle = nullptr;
  REQUIRE(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS);
  auto run = [&](gpu::Element e, auto convert, auto back) {
    using T = decltype(convert(0.0f));
    std::vector<T> ha(a.size()), hb(b.size());
    std::transform(a.begin(), a.end(), ha.begin(), convert);
    std::transform(b.begin(), b.end(), hb.begin(), convert);
    DeviceCopy<T> da(ha), db(hb), dc(want.size());
    REQUIRE(gpu::gemm(handle, e, m, n, k, da.ptr, db.ptr, dc.ptr) == 0);
    std::vector<float> got(want.size());
    const std::vector<T> hc = dc.read();
    std::transform(hc.begin(), hc.end(), got.begin(), back);
    return relative_error(got, want);
  };
  CHECK(run(gpu::Element::f64, [](float x) { return static_cast<double>(x); }, [](double x) { return static_cast<float>(x); }) < 1e-12);
  CHECK(run(gpu::Element::f32, [](float x) { return x; }, [](float x) { return x; }) < 1e-6);
  CHECK(run(gpu::Element::tf32, [](float x) { return x; }, [](float x) { return x; }) < 1e-5);
  // The result is rounded to 8 (bf16) or 11 (fp16) significant bits.
  CHECK(run(gpu::Element::bf16, [](float x) { return __float2bfloat16(x); }, [](__nv_bfloat16 x) { return __bfloat162float(x); }) < 1e-2);
  CHECK(run(gpu::Element::f16, [](float x) { return __float2half(x); }, [](__half x) { return __half2float(x); }) < 2e-3);
  cublasDestroy(handle);
}

namespace {

// The source tree: where it was configured, or FLEETSIM_SOURCE_DIR where the test runs from a copy elsewhere (a
// build carried to a GPU machine).
std::string source_dir() {
  const char* moved = std::getenv("FLEETSIM_SOURCE_DIR");
  return moved != nullptr && *moved != '\0' ? moved : FLEETSIM_SOURCE_DIR;
}

const Scenario& validation_scenario() {
  static const Scenario sc = scale_work(load_scenario(source_dir() + "/scenarios/cpu-validate.json"), 0.05);
  return sc;
}

}  // namespace

TEST_CASE("a plan replayed on the GPU runs the same tasks on the same devices, respecting dependencies and devices") {
  const Scenario& sc = validation_scenario();
  const RunResult plan = simulate(sc);
  std::size_t progress_calls = 0;
  const RunResult measured = execute_on_cuda(sc, plan, {.progress = [&](std::size_t, std::size_t) { ++progress_calls; }});
  REQUIRE(measured.trace.tasks.size() == plan.trace.tasks.size());
  CHECK(progress_calls == plan.trace.tasks.size());
  CHECK(measured.summary.tasks.completed == plan.summary.tasks.completed);
  const Workflow& wf = sc.workflows[0];
  for (std::size_t i = 0; i < measured.trace.tasks.size(); ++i) {
    const TaskRecord& m = measured.trace.tasks[i];
    const TaskRecord& p = plan.trace.tasks[i];
    INFO("task " << i << ": " << measured.trace.reasons[m.reason]);
    REQUIRE(m.status == TaskStatus::completed);
    REQUIRE(m.gpu_count == p.gpu_count);
    for (std::uint32_t k = 0; k < m.gpu_count; ++k) REQUIRE(measured.trace.gpus[m.gpu_begin + k] == plan.trace.gpus[p.gpu_begin + k]);
    REQUIRE(m.ready_s <= m.start_s);
    REQUIRE(m.start_s <= m.compute_start_s);
    REQUIRE(m.compute_start_s < m.end_s);
    REQUIRE(m.start_s >= measured.trace.instances[index(m.instance)].arrival_s);
    if (!wf.tasks[m.task].collectives.empty() && m.gpu_count > 1) REQUIRE((m.comm_start_s >= m.compute_start_s && m.comm_start_s <= m.end_s));
    for (std::uint32_t e : wf.inputs(m.task)) {
      const TaskRecord& producer = measured.trace.tasks[i - m.task + wf.edges[e].from];
      REQUIRE(producer.end_s <= m.start_s);
    }
    // No two tasks overlap on a device (within one GPU's clock, so exactly).
    for (std::size_t j = 0; j < i; ++j) {
      const TaskRecord& o = measured.trace.tasks[j];
      bool shared = false;
      for (std::uint32_t a = 0; a < m.gpu_count; ++a) {
        for (std::uint32_t b = 0; b < o.gpu_count; ++b) shared = shared || measured.trace.gpus[m.gpu_begin + a] == measured.trace.gpus[o.gpu_begin + b];
      }
      if (shared) REQUIRE((o.end_s <= m.start_s || m.end_s <= o.start_s));
    }
  }
  REQUIRE(measured.trace.weight_loads.size() == plan.trace.weight_loads.size());
  for (const WeightLoad& load : measured.trace.weight_loads) {
    const TaskRecord& r = measured.trace.tasks[index(load.task)];
    REQUIRE(load.start_s >= r.start_s);
    REQUIRE(load.end_s <= r.compute_start_s);
  }
  const TraceDiff diff = diff_traces(plan.trace, measured.trace);
  CHECK(diff.tasks.size() == plan.trace.tasks.size());
  CHECK(diff.measured_makespan_s > 0);
}

TEST_CASE("a working set larger than the GPU fails its task, naming the task, the device and the CUDA error, and its consumers") {
  const Scenario& sc = validation_scenario();
  const RunResult plan = simulate(sc);
  Scenario huge = sc;
  huge.workflows[0].tasks[2].working_set_bytes = 1e15;  // "stream": 1 PB, more than any GPU holds
  const RunResult measured = execute_on_cuda(huge, plan);
  bool named = false;
  for (const TaskRecord& r : measured.trace.tasks) {
    const std::string& reason = measured.trace.reasons[r.reason];
    if (r.task == 2) {
      REQUIRE(r.status == TaskStatus::failed);
      named = reason.find("graph/stream") != std::string::npos && reason.find("local GPU") != std::string::npos &&
              reason.find("working set") != std::string::npos && reason.find("cudaError") != std::string::npos;
      INFO(reason);
      CHECK(named);
    }
    if (r.task == 3) CHECK(reason.find("did not complete") != std::string::npos);
    if (r.task == 1) CHECK(r.status == TaskStatus::completed);
  }
}

TEST_CASE("the CUDA calibration measures every sweep and fits a profile with its provenance") {
  int count = 0;
  ok(cudaGetDeviceCount(&count));
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0));
  // A GPU the catalog does not name is calibrated as an H100 here: the sweeps are what is tested.
  const std::string gpu_type = catalog_gpu_of_device(prop.name).value_or("h100-sxm");
  std::size_t last_done = 0, total = 0;
  const Profile p = calibrate_cuda({.repeats = 1, .gpu_type = gpu_type, .node_type = "", .progress = [&](std::size_t done, std::size_t all) {
                                      last_done = done;
                                      total = all;
                                    }});
  CHECK(last_done == total);
  auto has = [&](const std::string& key) {
    return std::any_of(p.provenance.begin(), p.provenance.end(), [&](const auto& kv) { return kv.first == key && !kv.second.empty(); });
  };
  for (const char* key : {"backend", "device", "compute capability", "devices", "driver", "runtime", "cublas", "nccl", "date", "gpu type"}) {
    INFO(key);
    CHECK(has(key));
  }
  auto measured = [&](const std::string& kernel) {
    return std::count_if(p.measurements.begin(), p.measurements.end(), [&](const Measurement& m) { return m.kernel == kernel && m.seconds > 0; });
  };
  CHECK(measured("gemm") == 4 * 5);  // 4 tile counts in 5 dtypes
  CHECK(measured("gemm-square") == 6 * 5);
  CHECK(measured("stream") == 3);
  CHECK(measured("launch") == 1);
  CHECK(measured("memcpy-h2d") == measured("memcpy-d2h"));
  CHECK(measured("memcpy-h2d") > 2);
  if (count > 1) {
    CHECK(measured("peer-copy-no-access") > 0);
#if defined(FLEETSIM_TEST_NCCL)
    CHECK(measured("all-reduce") > 2);
#endif
  }
  REQUIRE(p.gpus.size() == 1);
  const GpuCalibration& g = p.gpus[0];
  CHECK(g.id == gpu_type);
  // Within what any GPU of this decade can do: a fit gone wrong is off by orders of magnitude.
  const double bf16 = g.peak_flop_per_s[static_cast<std::size_t>(Dtype::bf16)].value_or(0);
  CHECK(bf16 > 1e12);
  CHECK(bf16 < 2e16);
  CHECK(g.memory_bandwidth_Bps.value_or(0) > 1e11);
  CHECK(g.memory_bandwidth_Bps.value_or(0) < 2e13);
  CHECK(g.launch_overhead_s.value_or(0) > 1e-8);
  CHECK(g.launch_overhead_s.value_or(1) < 1e-3);
}

int main(int argc, char** argv) {
  std::string why;
  if (!cuda_available(&why)) {
    std::cout << "no CUDA device: GPU tests skipped (" << why << ")\n";
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
