// Calibration of the CUDA backend: the backend's own kernels (kernels/) and copies, timed with CUDA
// events on this machine's GPUs, fitted by fit_cuda_profile (fit_cuda.cpp) exactly as the CPU
// calibration's points are. Every sweep is a list of points; each point is warmed up, then timed
// `repeats` times, and its median kept.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#if defined(FLEETSIM_HAVE_NCCL)
#include <nccl.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <unistd.h>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/cuda_check.hpp"
#include "fleetsim/cuda_plugin.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernels.hpp"
#include "fleetsim/realexec.hpp"
#include "measure.hpp"

namespace fleetsim {
namespace {

using cuda::blas;
using cuda::kernel;

constexpr int kGemmTile = 4096;                           // the backend's GEMM tile (cuda_backend.cpp)
constexpr int kLargestSquare = 8192;                       // gemm-square sides go up to this
constexpr std::size_t kLargestTriad = std::size_t{1} << 27;  // floats per triad array: 512 MiB, far above any L2
constexpr std::size_t kLargestCopy = std::size_t{256} << 20;  // bytes
constexpr std::size_t kLargestCollective = std::size_t{1} << 30;
constexpr std::size_t kBlasWorkspace = std::size_t{32} << 20;  // as the backend gives its handles
constexpr int kWarmups = 2;
constexpr int kTriadsPerSample = 4;
constexpr int kLaunchesPerSample = 1000;  // back-to-back launches: the per-launch cost, not one event's resolution

struct ElementDtype {
  gpu::Element element;
  Dtype dtype;
};
constexpr ElementDtype kGemmTypes[] = {{gpu::Element::f64, Dtype::fp64},
                                       {gpu::Element::f32, Dtype::fp32},
                                       {gpu::Element::tf32, Dtype::tf32},
                                       {gpu::Element::bf16, Dtype::bf16},
                                       {gpu::Element::f16, Dtype::fp16}};

std::string version_of(int major, int minor, int patch = -1) {
  return std::to_string(major) + "." + std::to_string(minor) + (patch >= 0 ? "." + std::to_string(patch) : "");
}

// One local GPU's stream, timing events, cuBLAS handle and buffers; all given back at destruction.
class Gpu {
 public:
  Gpu(int ordinal, std::string name) : ordinal_(ordinal), name_(std::move(name)) {
    select();
    FLEETSIM_CUDA(name_, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    FLEETSIM_CUDA(name_, cudaEventCreate(&start_));
    FLEETSIM_CUDA(name_, cudaEventCreate(&stop_));
  }
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;
  ~Gpu() {
    (void)cudaSetDevice(ordinal_);
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    for (void* p : buffers_) (void)cudaFree(p);
    if (blas_ != nullptr) (void)cublasDestroy(blas_);
    if (start_ != nullptr) (void)cudaEventDestroy(start_);
    if (stop_ != nullptr) (void)cudaEventDestroy(stop_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }

  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  cudaStream_t stream() const { return stream_; }
  void select() const { FLEETSIM_CUDA(name_, cudaSetDevice(ordinal_)); }

  void* allocate(std::size_t bytes, const std::string& what) {
    select();
    void* p = nullptr;
    FLEETSIM_CUDA(name_ + ": allocating " + std::to_string(bytes >> 20) + " MiB for " + what, cudaMalloc(&p, std::max<std::size_t>(bytes, 1)));
    buffers_.push_back(p);
    return p;
  }

  cublasHandle_t blas() {
    if (blas_ != nullptr) return blas_;
    select();
    FLEETSIM_CUDA(name_, cublasCreate(&blas_));
    FLEETSIM_CUDA(name_, cublasSetStream(blas_, stream_));
    void* workspace = allocate(kBlasWorkspace, "the cuBLAS workspace");
    FLEETSIM_CUDA(name_, cublasSetWorkspace(blas_, workspace, kBlasWorkspace));
    return blas_;
  }

  // Seconds per op: `ops` enqueues of `one` between two events on this GPU's stream, after
  // `kWarmups` untimed samples; the median of `repeats` samples.
  double time_ops(int repeats, int ops, const std::function<void()>& one, const std::string& what) {
    select();
    const std::string where = name_ + ": " + what;
    auto sample = [&] {
      FLEETSIM_CUDA(where, cudaEventRecord(start_, stream_));
      for (int i = 0; i < ops; ++i) one();
      FLEETSIM_CUDA(where, cudaEventRecord(stop_, stream_));
      FLEETSIM_CUDA(where, cudaEventSynchronize(stop_));
      float ms = 0;
      FLEETSIM_CUDA(where, cudaEventElapsedTime(&ms, start_, stop_));
      return static_cast<double>(ms) / 1e3 / ops;
    };
    for (int w = 0; w < kWarmups; ++w) (void)sample();
    std::vector<double> seconds;
    for (int r = 0; r < repeats; ++r) seconds.push_back(sample());
    return measure::median_of(std::move(seconds));
  }

  cudaEvent_t start_event() const { return start_; }
  cudaEvent_t stop_event() const { return stop_; }

 private:
  int ordinal_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::vector<void*> buffers_;
};

// Pinned host memory, given back at destruction.
class PinnedBuffer {
 public:
  PinnedBuffer(std::size_t bytes, const std::string& where) {
    FLEETSIM_CUDA(where + ": pinning " + std::to_string(bytes >> 20) + " MiB of host memory", cudaHostAlloc(&data_, bytes, cudaHostAllocPortable));
    std::memset(data_, 1, bytes);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

// A point of a sweep: what the profile records, and how it is measured (returns seconds).
struct Point {
  Measurement measurement;
  std::function<double()> measure;
};

Measurement measurement(std::string kernel, Dtype dtype, double size, std::string devices = "") {
  return Measurement{.kernel = std::move(kernel), .dtype = dtype, .size = size, .seconds = 0, .devices = std::move(devices)};
}

// Sizes from `first` to `last`, multiplied by `factor` each step.
std::vector<std::size_t> sizes_between(std::size_t first, std::size_t last, std::size_t factor) {
  std::vector<std::size_t> out;
  for (std::size_t s = first; s <= last; s *= factor) out.push_back(s);
  return out;
}

class CudaCalibration {
 public:
  explicit CudaCalibration(const CudaCalibrateOptions& options) : options_(options) {}
  CudaCalibration(const CudaCalibration&) = delete;
  CudaCalibration& operator=(const CudaCalibration&) = delete;
  // Communicators first, while their GPUs' buffers and streams still exist; then host memory, then the GPUs.
  ~CudaCalibration() {
#if defined(FLEETSIM_HAVE_NCCL)
    clique_.reset();
#endif
    pinned_.reset();
    gpus_.clear();
    if (set_nccl_algo_) unsetenv("NCCL_ALGO");  // later communicators in this process choose for themselves
  }

  Profile run() {
    int count = 0;
    FLEETSIM_CUDA(std::string("finding CUDA devices"), cudaGetDeviceCount(&count));
    if (count == 0) throw DeviceError("calibration on the CUDA backend cannot run here: no CUDA device");
    Profile p;
    describe_devices(count, p);
    for (int g = 0; g < count; ++g) gpus_.push_back(std::make_unique<Gpu>(g, device_names_[static_cast<std::size_t>(g)]));
    add_gemm_points();
    add_triad_points();
    add_launch_points();
    add_host_copy_points();
    add_peer_copy_points();
    add_collective_points();
    for (std::size_t i = 0; i < points_.size(); ++i) {
      Measurement m = points_[i].measurement;
      m.seconds = points_[i].measure();
      p.measurements.push_back(std::move(m));
      if (options_.progress) options_.progress(i + 1, points_.size());
    }
    if (gpus_.size() > 1) {
      p.provenance.emplace_back("peer access", without_peer_access_.empty() ? "every pair" : "not possible for " + without_peer_access_);
    }
    p.provenance.emplace_back("date", measure::utc_now());
    p.provenance.emplace_back("repeats", std::to_string(options_.repeats));
    fit_cuda_profile(p, target_);
    return p;
  }

 private:
  // Names, compute capabilities and versions; the catalog entries the profile calibrates.
  void describe_devices(int count, Profile& p) {
    std::string devices;
    for (int g = 0; g < count; ++g) {
      cudaDeviceProp prop{};
      FLEETSIM_CUDA("local GPU " + std::to_string(g), cudaGetDeviceProperties(&prop, g));
      device_names_.push_back(std::string(prop.name) + " (local GPU " + std::to_string(g) + ")");
      devices += (g > 0 ? "; " : "") + std::to_string(g) + ": " + prop.name + ", compute capability " + version_of(prop.major, prop.minor);
      if (g == 0) {
        p.provenance.emplace_back("backend", "cuda");
        p.provenance.emplace_back("device", prop.name);
        p.provenance.emplace_back("compute capability", version_of(prop.major, prop.minor));
        target_.gpu_type = options_.gpu_type.empty() ? catalog_gpu_of_device(prop.name).value_or("") : options_.gpu_type;
        if (target_.gpu_type.empty()) {
          throw InputError({Problem{"--gpu-type", "", std::string("local GPU 0 is a \"") + prop.name +
                                                          "\", which the catalog does not name; say which catalog GPU type to calibrate with --gpu-type (fleetsim catalog lists them)"}});
        }
      }
    }
    if (Catalog::builtin().gpu(target_.gpu_type) == nullptr) {
      throw InputError({Problem{"--gpu-type", "", "unknown GPU type \"" + target_.gpu_type + "\" (fleetsim catalog lists them)"}});
    }
    target_.gpus = static_cast<std::size_t>(count);
    target_.node_type = options_.node_type.empty() ? node_type_for(target_.gpu_type, target_.gpus) : options_.node_type;
    if (!target_.node_type.empty() && Catalog::builtin().node(target_.node_type) == nullptr) {  // before minutes of measuring
      throw InputError({Problem{"--node-type", "", "unknown node type \"" + target_.node_type + "\" (fleetsim catalog lists them)"}});
    }
    int driver = 0, runtime = 0, cublas_major = 0, cublas_minor = 0, cublas_patch = 0;
    FLEETSIM_CUDA(std::string("reading the CUDA driver version"), cudaDriverGetVersion(&driver));
    FLEETSIM_CUDA(std::string("reading the CUDA runtime version"), cudaRuntimeGetVersion(&runtime));
    FLEETSIM_CUDA(std::string("reading the cuBLAS version"), cublasGetProperty(MAJOR_VERSION, &cublas_major));
    FLEETSIM_CUDA(std::string("reading the cuBLAS version"), cublasGetProperty(MINOR_VERSION, &cublas_minor));
    FLEETSIM_CUDA(std::string("reading the cuBLAS version"), cublasGetProperty(PATCH_LEVEL, &cublas_patch));
    p.provenance.emplace_back("devices", devices);
    p.provenance.emplace_back("gpus", std::to_string(count));
    p.provenance.emplace_back("gpu type", target_.gpu_type);
    p.provenance.emplace_back("node type", target_.node_type.empty() ? "none" : target_.node_type);
    p.provenance.emplace_back("driver", version_of(driver / 1000, driver % 1000 / 10));  // CUDA encodes 12.4 as 12040
    p.provenance.emplace_back("runtime", version_of(runtime / 1000, runtime % 1000 / 10));
    p.provenance.emplace_back("cublas", version_of(cublas_major, cublas_minor, cublas_patch));
#if defined(FLEETSIM_HAVE_NCCL)
    int nccl = 0;
    FLEETSIM_CUDA(std::string("reading the NCCL version"), ncclGetVersion(&nccl));
    p.provenance.emplace_back("nccl", version_of(nccl / 10000, nccl % 10000 / 100, nccl % 100));  // 2.21.5 is 22105
    if (count > 1) p.provenance.emplace_back("nccl algo", choose_nccl_algo());
#else
    p.provenance.emplace_back("nccl", "not built (collectives not measured)");
#endif
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) p.provenance.emplace_back("host", host);
  }

#if defined(FLEETSIM_HAVE_NCCL)
  // fleetsim's collective model is fitted per algorithm, so NCCL is told which to run: Ring unless
  // the user set NCCL_ALGO (as NCCL's maintainers advise for measuring link bandwidth; NVLS's bus
  // bandwidth is not the wire's). Set before any communicator exists, which is when NCCL reads it.
  std::string choose_nccl_algo() {
    const char* set = std::getenv("NCCL_ALGO");
    std::string algo = set != nullptr && *set != '\0' ? set : "Ring";
    if (set == nullptr || *set == '\0') set_nccl_algo_ = setenv("NCCL_ALGO", "Ring", 1) == 0;
    std::string lowered = algo;
    for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto parsed = parse_collective_algo(lowered);
    if (parsed && *parsed != CollectiveAlgo::automatic && *parsed != CollectiveAlgo::direct) target_.nccl_algo = parsed;
    return algo + (target_.nccl_algo ? "" : " (not one fleetsim's model fits: the GPU link is not fitted from NCCL)");
  }
#endif

  // GEMMs on local GPU 0 in each dtype: whole 4096^3 tiles, as the backend runs task FLOP ("gemm",
  // fitted), and squares of growing side for the efficiency-versus-size curve ("gemm-square").
  void add_gemm_points() {
    Gpu* g = gpus_.front().get();  // captured by value: the points run after this returns
    const std::size_t elements = static_cast<std::size_t>(kLargestSquare) * kLargestSquare;
    void* a = g->allocate(elements * sizeof(double), "GEMM operands");
    void* b = g->allocate(elements * sizeof(double), "GEMM operands");
    void* c = g->allocate(elements * sizeof(double), "GEMM operands");
    (void)g->blas();  // the handle and its workspace now, not inside a timed sample
    for (const ElementDtype t : kGemmTypes) {
      // Filled before each dtype's points run, in that dtype, with the random values the backend's operands hold.
      auto prepare = [g, a, b, t, elements] {
        g->select();
        const auto seed = 2 * static_cast<std::uint64_t>(t.element);  // the backend's seeds (cuda_backend.cpp)
        FLEETSIM_CUDA(g->name(), kernel(gpu::fill_random(a, t.element, seed + 1, elements, g->stream())));
        FLEETSIM_CUDA(g->name(), kernel(gpu::fill_random(b, t.element, seed + 2, elements, g->stream())));
      };
      // 8 to 64 tiles a sample (1.5 to 12 ms of bf16 on an H200), with no pure-GEMM warm-up beyond kWarmups: under
      // its power limit an H200 ran bf16 tiles at 756-759 TFLOP/s so, and at 700 after a quarter second of nothing but
      // GEMMs, while the GEMMs of a graph that mixes them with other work ran nearer the first figure
      // (reports/gpu-validation.md).
      for (int tiles : {8, 16, 32, 64}) {
        const double flop = tiles * gpu::gemm_flop(kGemmTile, kGemmTile, kGemmTile);
        points_.push_back({measurement("gemm", t.dtype, flop), [this, g, a, b, c, t, tiles, prepare] {
                             prepare();
                             const std::string what = std::to_string(tiles) + " GEMM tiles";
                             return tiles * g->time_ops(options_.repeats, tiles, [&] {
                               FLEETSIM_CUDA(g->name() + ": " + what, blas(gpu::gemm(g->blas(), t.element, kGemmTile, kGemmTile, kGemmTile, a, b, c)));
                             }, what);
                           }});
      }
      for (int side : {256, 512, 1024, 2048, 4096, 8192}) {
        points_.push_back({measurement("gemm-square", t.dtype, side), [this, g, a, b, c, t, side, prepare] {
                             prepare();
                             const std::string what = "a " + std::to_string(side) + "^3 GEMM";
                             return g->time_ops(options_.repeats, 1, [&] {
                               FLEETSIM_CUDA(g->name() + ": " + what, blas(gpu::gemm(g->blas(), t.element, side, side, side, a, b, c)));
                             }, what);
                           }});
      }
    }
  }

  // The triad over arrays past the L2 cache: 12 bytes of traffic per element.
  void add_triad_points() {
    Gpu* g = gpus_.front().get();  // captured by value: the points run after this returns
    auto* a = static_cast<float*>(g->allocate(kLargestTriad * sizeof(float), "triad arrays"));
    auto* b = static_cast<float*>(g->allocate(kLargestTriad * sizeof(float), "triad arrays"));
    auto* c = static_cast<float*>(g->allocate(kLargestTriad * sizeof(float), "triad arrays"));
    FLEETSIM_CUDA(g->name(), kernel(gpu::fill(b, gpu::Element::f32, 1.0, kLargestTriad, g->stream())));
    FLEETSIM_CUDA(g->name(), kernel(gpu::fill(c, gpu::Element::f32, 2.0, kLargestTriad, g->stream())));
    // Back to back, as the backend runs a task's bytes (triads of 2^26 floats an array, one after another), so a
    // launch's start and tail are not charged to every point.
    for (std::size_t n : sizes_between(kLargestTriad / 4, kLargestTriad, 2)) {
      points_.push_back({measurement("stream", Dtype::fp32, static_cast<double>(12 * n)), [this, g, a, b, c, n] {
                           return g->time_ops(options_.repeats, kTriadsPerSample, [&] {
                             FLEETSIM_CUDA(g->name() + ": the triad", kernel(gpu::triad(a, b, c, 3.0f, n, g->stream())));
                           }, "the triad");
                         }});
    }
  }

  // Back-to-back launches of a one-element fill kernel: what each launch costs the GPU's queue.
  void add_launch_points() {
    Gpu* g = gpus_.front().get();  // captured by value: the points run after this returns
    void* x = g->allocate(sizeof(float), "the launch probe");
    points_.push_back({measurement("launch", Dtype::fp32, 0), [this, g, x] {
                         return g->time_ops(options_.repeats, kLaunchesPerSample, [&] {
                           FLEETSIM_CUDA(g->name() + ": an empty launch", kernel(gpu::fill(x, gpu::Element::f32, 0.0, 1, g->stream())));
                         }, "launches");
                       }});
  }

  // Pinned host memory to and from local GPU 0, one copy per sample, so the fixed cost stays visible.
  void add_host_copy_points() {
    Gpu* g = gpus_.front().get();  // captured by value: the points run after this returns
    pinned_ = std::make_unique<PinnedBuffer>(kLargestCopy, g->name());
    void* device = g->allocate(kLargestCopy, "host copies");
    void* host = pinned_->data();
    for (std::size_t bytes : sizes_between(std::size_t{4} << 10, kLargestCopy, 4)) {
      points_.push_back({measurement("memcpy-h2d", Dtype::fp32, static_cast<double>(bytes), "host->0"), [this, g, device, host, bytes] {
                           return g->time_ops(options_.repeats, 1, [&] {
                             FLEETSIM_CUDA(g->name() + ": a host-to-device copy", cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, g->stream()));
                           }, "host-to-device copies");
                         }});
      points_.push_back({measurement("memcpy-d2h", Dtype::fp32, static_cast<double>(bytes), "0->host"), [this, g, device, host, bytes] {
                           return g->time_ops(options_.repeats, 1, [&] {
                             FLEETSIM_CUDA(g->name() + ": a device-to-host copy", cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, g->stream()));
                           }, "device-to-host copies");
                         }});
    }
  }

  // Every ordered pair of local GPUs: copies without peer access, then (where the pair allows it)
  // with peer access enabled both ways, which is disabled again after the pair's points.
  void add_peer_copy_points() {
    if (gpus_.size() < 2) return;
    std::vector<void*> buffers;
    for (auto& g : gpus_) buffers.push_back(g->allocate(kLargestCopy, "peer copies"));
    const std::vector<std::size_t> sizes = sizes_between(std::size_t{64} << 10, kLargestCopy, 4);
    for (std::size_t from = 0; from < gpus_.size(); ++from) {
      for (std::size_t to = 0; to < gpus_.size(); ++to) {
        if (from == to) continue;
        Gpu* src = gpus_[from].get();  // captured by value: the points run after this returns
        const Gpu* dst = gpus_[to].get();
        const std::string pair = std::to_string(from) + "->" + std::to_string(to);
        int can = 0, can_back = 0;
        FLEETSIM_CUDA(src->name(), cudaDeviceCanAccessPeer(&can, src->ordinal(), dst->ordinal()));
        FLEETSIM_CUDA(dst->name(), cudaDeviceCanAccessPeer(&can_back, dst->ordinal(), src->ordinal()));
        for (bool access : {false, true}) {
          if (access && (can == 0 || can_back == 0)) {
            without_peer_access_ += (without_peer_access_.empty() ? "" : ", ") + pair;
            continue;
          }
          for (std::size_t i = 0; i < sizes.size(); ++i) {
            const std::size_t bytes = sizes[i];
            const bool first_of_pair = i == 0, last_of_pair = i + 1 == sizes.size();
            void* to_buffer = buffers[to];
            const void* from_buffer = buffers[from];
            points_.push_back({measurement(access ? "peer-copy" : "peer-copy-no-access", Dtype::fp32, static_cast<double>(bytes), pair),
                               [this, src, dst, to_buffer, from_buffer, bytes, access, first_of_pair, last_of_pair] {
                                 if (access && first_of_pair) set_peer_access(*src, *dst, true);
                                 const double s = src->time_ops(options_.repeats, 1, [&] {
                                   FLEETSIM_CUDA(src->name() + ": a copy to " + dst->name(),
                                                 cudaMemcpyPeerAsync(to_buffer, dst->ordinal(), from_buffer, src->ordinal(), bytes, src->stream()));
                                 }, "peer copies");
                                 if (access && last_of_pair) set_peer_access(*src, *dst, false);
                                 return s;
                               }});
          }
        }
      }
    }
  }

  static void set_peer_access(const Gpu& a, const Gpu& b, bool enable) {
    for (const auto& [self, peer] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      self->select();
      const cudaError_t e = enable ? cudaDeviceEnablePeerAccess(peer->ordinal(), 0) : cudaDeviceDisablePeerAccess(peer->ordinal());
      // Already in the state asked for is fine; anything else is an error naming both GPUs.
      if (e == cudaErrorPeerAccessAlreadyEnabled || e == cudaErrorPeerAccessNotEnabled) {
        (void)cudaGetLastError();
        continue;
      }
      FLEETSIM_CUDA(self->name() + (enable ? ": enabling" : ": disabling") + " peer access to " + peer->name(), e);
    }
  }

#if defined(FLEETSIM_HAVE_NCCL)
  // One clique over every local GPU, with a send and a receive buffer on each.
  struct Clique {
    std::vector<ncclComm_t> comms;
    std::vector<float*> send, recv;
    ~Clique() {
      for (ncclComm_t c : comms) {
        if (c != nullptr) (void)ncclCommDestroy(c);
      }
    }
  };

  // `op` on every rank at once, with nccl-tests' buffer conventions for a size of `count` floats
  // (all-gather: the gathered output; reduce-scatter: the input; all-to-all: each rank's whole send).
  void enqueue_collective(CollectiveOp op, std::size_t count, const std::string& where) {
    const int ranks = static_cast<int>(gpus_.size());
    const std::size_t per = count / gpus_.size();
    FLEETSIM_CUDA(where, ncclGroupStart());
    for (int r = 0; r < ranks; ++r) {
      const auto i = static_cast<std::size_t>(r);
      ncclComm_t comm = clique_->comms[i];
      float* send = clique_->send[i];
      float* recv = clique_->recv[i];
      cudaStream_t stream = gpus_[i]->stream();
      switch (op) {
        case CollectiveOp::all_reduce: FLEETSIM_CUDA(where, ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream)); break;
        case CollectiveOp::all_gather: FLEETSIM_CUDA(where, ncclAllGather(send, recv, per, ncclFloat, comm, stream)); break;
        case CollectiveOp::reduce_scatter: FLEETSIM_CUDA(where, ncclReduceScatter(send, recv, per, ncclFloat, ncclSum, comm, stream)); break;
        case CollectiveOp::broadcast: FLEETSIM_CUDA(where, ncclBroadcast(send, recv, count, ncclFloat, 0, comm, stream)); break;
        case CollectiveOp::reduce: FLEETSIM_CUDA(where, ncclReduce(send, recv, count, ncclFloat, ncclSum, 0, comm, stream)); break;
        case CollectiveOp::all_to_all:
          for (int peer = 0; peer < ranks; ++peer) {
            const std::size_t at = per * static_cast<std::size_t>(peer);
            FLEETSIM_CUDA(where, ncclSend(send + at, per, ncclFloat, peer, comm, stream));
            FLEETSIM_CUDA(where, ncclRecv(recv + at, per, ncclFloat, peer, comm, stream));
          }
          break;
        case CollectiveOp::send_recv:  // nccl-tests' ring: each rank sends to the next, receives from the one before
          FLEETSIM_CUDA(where, ncclSend(send, count, ncclFloat, (r + 1) % ranks, comm, stream));
          FLEETSIM_CUDA(where, ncclRecv(recv, count, ncclFloat, (r + ranks - 1) % ranks, comm, stream));
          break;
      }
    }
    FLEETSIM_CUDA(where, ncclGroupEnd());
  }

  // Seconds per op of `ops` back-to-back collectives: on every GPU, events around its part; the
  // slowest GPU's span is the sample, as nccl-tests takes the slowest rank's time.
  double time_collective(CollectiveOp op, std::size_t count, int ops, const std::string& where) {
    if (!clique_) set_up_clique();
    auto sample = [&] {
      for (auto& g : gpus_) {
        g->select();
        FLEETSIM_CUDA(where, cudaEventRecord(g->start_event(), g->stream()));
      }
      for (int i = 0; i < ops; ++i) enqueue_collective(op, count, where);
      double slowest_s = 0;
      for (auto& g : gpus_) {
        g->select();
        FLEETSIM_CUDA(where, cudaEventRecord(g->stop_event(), g->stream()));
      }
      for (auto& g : gpus_) {
        g->select();
        FLEETSIM_CUDA(where + " on " + g->name(), cudaEventSynchronize(g->stop_event()));
        float ms = 0;
        FLEETSIM_CUDA(where + " on " + g->name(), cudaEventElapsedTime(&ms, g->start_event(), g->stop_event()));
        slowest_s = std::max(slowest_s, static_cast<double>(ms) / 1e3);
      }
      return slowest_s / ops;
    };
    for (int w = 0; w < kWarmups; ++w) (void)sample();
    std::vector<double> seconds;
    for (int r = 0; r < options_.repeats; ++r) seconds.push_back(sample());
    return measure::median_of(std::move(seconds));
  }
#endif

  // nccl-tests' sweep of every collective over all local GPUs, 1 KiB to 1 GiB by 4x.
  void add_collective_points() {
#if defined(FLEETSIM_HAVE_NCCL)
    if (gpus_.size() < 2) return;
    const std::size_t ranks = gpus_.size();
    for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::broadcast,
                            CollectiveOp::reduce, CollectiveOp::all_to_all, CollectiveOp::send_recv}) {
      for (std::size_t bytes : sizes_between(std::size_t{1} << 10, kLargestCollective, 4)) {
        // As nccl-tests: the count is rounded down to a multiple of the ranks, and the size is the count's.
        const std::size_t count = bytes / sizeof(float) / ranks * ranks;
        const int ops = bytes <= (std::size_t{1} << 20) ? 20 : 5;
        const std::string where = "NCCL " + std::string(collective_op_name(op)) + " of " + std::to_string(count * sizeof(float)) + " bytes over " +
                                  std::to_string(ranks) + " local GPUs";
        points_.push_back({measurement(std::string(collective_op_name(op)), Dtype::fp32, static_cast<double>(count * sizeof(float))),
                           [this, op, count, ops, where] { return time_collective(op, count, ops, where); }});
      }
    }
#endif
  }

#if defined(FLEETSIM_HAVE_NCCL)
  // Set up at the first collective point, so that the points before it run without NCCL's threads.
  void set_up_clique() {
    clique_ = std::make_unique<Clique>();
    std::vector<int> ordinals;
    for (auto& g : gpus_) {
      ordinals.push_back(g->ordinal());
      clique_->send.push_back(static_cast<float*>(g->allocate(kLargestCollective, "collective send buffer")));
      clique_->recv.push_back(static_cast<float*>(g->allocate(kLargestCollective, "collective receive buffer")));
      FLEETSIM_CUDA(g->name(), kernel(gpu::fill(clique_->send.back(), gpu::Element::f32, 1.0, kLargestCollective / sizeof(float), g->stream())));
    }
    clique_->comms.assign(gpus_.size(), nullptr);
    FLEETSIM_CUDA("NCCL communicator over " + std::to_string(gpus_.size()) + " local GPUs",
                  ncclCommInitAll(clique_->comms.data(), static_cast<int>(ordinals.size()), ordinals.data()));
  }
  std::unique_ptr<Clique> clique_;
#endif

  const CudaCalibrateOptions& options_;
  CudaFitTarget target_;
  std::vector<std::string> device_names_;
  std::vector<std::unique_ptr<Gpu>> gpus_;
  std::unique_ptr<PinnedBuffer> pinned_;
  std::vector<Point> points_;
  std::string without_peer_access_;  // ordered pairs, "0->2, 2->0"
  bool set_nccl_algo_ = false;       // NCCL_ALGO was set here, and is unset when done
};

}  // namespace
}  // namespace fleetsim

// The library's entry point (fleetsim/cuda_plugin.hpp); calibrate_cuda() has checked the options.
extern "C" void fleetsim_cuda_calibrate(const fleetsim::CudaCalibrateOptions* options, fleetsim::Profile* out) {
  std::string why;
  if (!fleetsim_cuda_available(&why)) throw fleetsim::DeviceError("calibration on the CUDA backend cannot run here: " + why);
  *out = fleetsim::CudaCalibration(*options).run();
}
