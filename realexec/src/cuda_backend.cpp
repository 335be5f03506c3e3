// The CUDA backend: the plan replayed on local GPUs with the CPU backend's rules (cpu_backend.cpp),
// one host thread and one stream per device of the plan. The host threads only enqueue: a task
// waits for its producers through CUDA events, a gang's members meet at every phase through events
// each member's stream waits on, and every phase boundary is an event whose time, read once the
// run is over, goes into the measured trace.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#if defined(FLEETSIM_HAVE_NCCL)
#include <nccl.h>
#endif
#if defined(FLEETSIM_NCCL_OVER_MPI)
#include "cuda_ranks.hpp"
#endif

#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <latch>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <unistd.h>

#include "fleetsim/cuda_check.hpp"
#include "fleetsim/cuda_plugin.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernels.hpp"
#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"
#include "replay.hpp"
#include "fleetsim/units.hpp"
#include "rank_replay.hpp"

namespace fleetsim {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kGemmTile = 4096;                                  // square GEMMs of this side, then one for the remainder
constexpr int kGemmAlign = 16;  // GEMM dimensions in multiples of this (gpu::GemmPlan)
// 256 MiB per triad array, far above any GPU's L2: each triad long enough that its launch and tail cost little, as
// in the CUDA calibration's stream points (calibrate_cuda.cpp).
constexpr std::size_t kStreamFloats = std::size_t{1} << 26;
constexpr std::size_t kBlasWorkspace = std::size_t{32} << 20;    // cuBLAS workspace per device, given up front

using cuda::blas;
using cuda::kernel;

gpu::Element element_of(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp64: return gpu::Element::f64;
    case Dtype::fp32: return gpu::Element::f32;
    case Dtype::tf32: return gpu::Element::tf32;
    case Dtype::fp16: return gpu::Element::f16;
    case Dtype::bf16:
    case Dtype::fp8:   // cuBLAS runs fp8 and int8 only through cublasLt with its own layouts:
    case Dtype::int8:  // these run as bf16 GEMMs (docs/run.md)
      return gpu::Element::bf16;
  }
  return gpu::Element::bf16;
}

// The phase boundaries of one gang member's task, as events on its stream.
enum Mark : std::uint8_t { kArrived, kLoaded, kComputed, kDone, kMarks };

// One local GPU: the origin of its clock.
struct LocalGpu {
  int ordinal = 0;
  cudaStream_t clock = nullptr;  // idle stream the start event is recorded on
  cudaEvent_t start = nullptr;
  double offset_s = 0;  // host time of the start event, seconds after t0
};

// One device of the plan, on a local GPU. Buffers are allocated and written before the clock starts.
struct Device {
  int gpu = 0;  // local ordinal
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void* workspace = nullptr;
  // GEMM operands, kGemmTile^2 elements: a and b of each element type its tasks use (random values, each in its
  // own type, as real data has), c of the widest.
  std::array<void*, 5> a{}, b{};
  void* c = nullptr;
  float *sa = nullptr, *sb = nullptr, *sc = nullptr;  // triad arrays
  std::size_t cursor = 0;                             // where the next triad begins
  void *outbox = nullptr, *inbox = nullptr, *weights = nullptr;
  float* collective = nullptr;  // 2 x count floats: the data, then room to receive
  std::vector<std::uint32_t> order;
  std::vector<cudaEvent_t> steps;  // events of collectives run as copies
  std::array<bool, 5> elements{};  // gpu::Element values its tasks use
  // Sizes from the plan.
  double outbox_bytes = 0, inbox_bytes = 0, weights_bytes = 0;
  std::size_t collective_floats = 0;
};

// One multi-GPU task's rendezvous. Members meet on the host only to exchange events; the waiting
// itself happens on the GPUs.
struct Gang {
  std::barrier<> barrier;
  std::vector<cudaEvent_t> published;
  bool nccl = false;
#if defined(FLEETSIM_HAVE_NCCL)
  const std::vector<ncclComm_t>* comms = nullptr;
#endif
  explicit Gang(std::ptrdiff_t members) : barrier(members), published(static_cast<std::size_t>(members), nullptr) {}
};

void* device_alloc(double bytes, const std::string& what, const Device& d) {
  void* p = nullptr;
  const auto n = static_cast<std::size_t>(bytes) + 1;
  FLEETSIM_CUDA(d.name + ": allocating " + format_quantity(static_cast<double>(n), Dimension::bytes) + " of " + what +
                    " (scale the work down, e.g. fleetsim run --work-scale 0.1)",
                cudaMalloc(&p, n));
  return p;
}

// The GEMMs of `plan` on the operands of element type `e`.
void gemm(Device& d, const gpu::GemmPlan& plan, gpu::Element e, const std::string& where) {
  void *a = d.a[static_cast<std::size_t>(e)], *b = d.b[static_cast<std::size_t>(e)];
  for (std::size_t t = 0; t < plan.tiles; ++t) FLEETSIM_CUDA(where, blas(gpu::gemm(d.blas, e, kGemmTile, kGemmTile, kGemmTile, a, b, d.c)));
  if (plan.k > 0) FLEETSIM_CUDA(where, blas(gpu::gemm(d.blas, e, kGemmTile, kGemmTile, plan.k, a, b, d.c)));
  if (plan.cube > 0) FLEETSIM_CUDA(where, blas(gpu::gemm(d.blas, e, plan.cube, plan.cube, plan.cube, a, b, d.c)));
}

// `bytes` of memory traffic as triads walking on through the arrays.
void stream(Device& d, double bytes, const std::string& where) {
  if (!(bytes > 0)) return;
  auto left = static_cast<std::size_t>(std::llround(bytes / (3 * sizeof(float))));
  while (left > 0) {
    if (d.cursor == kStreamFloats) d.cursor = 0;
    const std::size_t n = std::min(left, kStreamFloats - d.cursor);
    FLEETSIM_CUDA(where, kernel(gpu::triad(d.sa + d.cursor, d.sb + d.cursor, d.sc + d.cursor, 3.0f, n, d.stream)));
    d.cursor += n;
    left -= n;
  }
}

// A task's FLOP and bytes as `launches` calls of GEMMs (gpu::plan_launches), each then a share of the triads.
void run_work(Device& d, double flop, double bytes, gpu::Element e, std::uint32_t launches, const std::string& where) {
  const std::vector<gpu::GemmPlan> plans = gpu::plan_launches(flop, launches, kGemmTile, kGemmAlign);
  for (const gpu::GemmPlan& plan : plans) {
    gemm(d, plan, e, where);
    stream(d, bytes / static_cast<double>(plans.size()), where);
  }
}

// Freed working sets stay in the GPU's pool instead of going back to the driver at each synchronization.
void keep_freed_memory(int ordinal, const std::string& where) {
  cudaMemPool_t pool = nullptr;
  FLEETSIM_CUDA(where, cudaDeviceGetDefaultMemPool(&pool, ordinal));
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  FLEETSIM_CUDA(where, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
}

// Everything set_up_device made, given back; errors are ignored, as the run's outcome is already known.
void release_device(Device& d) noexcept {
  (void)cudaSetDevice(d.gpu);
  for (cudaEvent_t e : d.steps) (void)cudaEventDestroy(e);
  d.steps.clear();
  for (std::size_t e = 0; e < d.a.size(); ++e) {
    if (d.a[e] != nullptr) (void)cudaFree(d.a[e]);
    if (d.b[e] != nullptr) (void)cudaFree(d.b[e]);
  }
  for (void* p : {d.workspace, d.c, static_cast<void*>(d.sa), static_cast<void*>(d.sb), static_cast<void*>(d.sc), d.outbox, d.inbox,
                  d.weights, static_cast<void*>(d.collective)}) {
    if (p != nullptr) (void)cudaFree(p);
  }
  if (d.blas != nullptr) (void)cublasDestroy(d.blas);
  if (d.stream != nullptr) (void)cudaStreamDestroy(d.stream);
  d = Device{};
}

// One device's stream, cuBLAS handle and workspace and its buffers, allocated and written before the
// clock starts; then a warm-up of every GEMM type and the triad it will run, so no task pays for lazy loading.
void set_up_device(Device& d) {
  FLEETSIM_CUDA(d.name, cudaSetDevice(d.gpu));
  keep_freed_memory(d.gpu, d.name);
  FLEETSIM_CUDA(d.name, cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  FLEETSIM_CUDA(d.name, cublasCreate(&d.blas));
  FLEETSIM_CUDA(d.name, cublasSetStream(d.blas, d.stream));
  d.workspace = device_alloc(static_cast<double>(kBlasWorkspace), "cuBLAS workspace", d);
  FLEETSIM_CUDA(d.name, cublasSetWorkspace(d.blas, d.workspace, kBlasWorkspace));
  const double tile_elements = static_cast<double>(kGemmTile) * kGemmTile;
  std::size_t widest = 0;
  for (std::size_t e = 0; e < d.elements.size(); ++e) {
    if (!d.elements[e]) continue;
    const std::size_t size = gpu::element_bytes(static_cast<gpu::Element>(e));
    widest = std::max(widest, size);
    d.a[e] = device_alloc(tile_elements * static_cast<double>(size), "GEMM operands", d);
    d.b[e] = device_alloc(tile_elements * static_cast<double>(size), "GEMM operands", d);
  }
  if (widest > 0) d.c = device_alloc(tile_elements * static_cast<double>(widest), "GEMM operands", d);
  const double stream_bytes = static_cast<double>(kStreamFloats * sizeof(float));
  d.sa = static_cast<float*>(device_alloc(stream_bytes, "triad arrays", d));
  d.sb = static_cast<float*>(device_alloc(stream_bytes, "triad arrays", d));
  d.sc = static_cast<float*>(device_alloc(stream_bytes, "triad arrays", d));
  d.outbox = device_alloc(d.outbox_bytes, "edge tensors out", d);
  d.inbox = device_alloc(d.inbox_bytes, "edge tensors in", d);
  d.weights = device_alloc(d.weights_bytes, "weights", d);
  d.collective = static_cast<float*>(device_alloc(2.0 * sizeof(float) * static_cast<double>(d.collective_floats), "collective buffers", d));
  // Written once, so nothing in the run reads uninitialized memory or pays for first touch.
  FLEETSIM_CUDA(d.name, cudaMemsetAsync(d.outbox, 1, static_cast<std::size_t>(d.outbox_bytes) + 1, d.stream));
  FLEETSIM_CUDA(d.name, cudaMemsetAsync(d.inbox, 0, static_cast<std::size_t>(d.inbox_bytes) + 1, d.stream));
  FLEETSIM_CUDA(d.name, cudaMemsetAsync(d.weights, 0, static_cast<std::size_t>(d.weights_bytes) + 1, d.stream));
  FLEETSIM_CUDA(d.name, kernel(gpu::fill(d.collective, gpu::Element::f32, 1.0, 2 * d.collective_floats, d.stream)));
  FLEETSIM_CUDA(d.name, kernel(gpu::fill(d.sa, gpu::Element::f32, 0.0, kStreamFloats, d.stream)));
  FLEETSIM_CUDA(d.name, kernel(gpu::fill(d.sb, gpu::Element::f32, 1.0, kStreamFloats, d.stream)));
  FLEETSIM_CUDA(d.name, kernel(gpu::fill(d.sc, gpu::Element::f32, 2.0, kStreamFloats, d.stream)));
  for (std::size_t e = 0; e < d.elements.size(); ++e) {
    if (!d.elements[e]) continue;
    const auto element = static_cast<gpu::Element>(e);
    const auto n = static_cast<std::size_t>(tile_elements);
    FLEETSIM_CUDA(d.name, kernel(gpu::fill_random(d.a[e], element, 2 * e + 1, n, d.stream)));
    FLEETSIM_CUDA(d.name, kernel(gpu::fill_random(d.b[e], element, 2 * e + 2, n, d.stream)));
    FLEETSIM_CUDA(d.name, blas(gpu::gemm(d.blas, element, kGemmTile, kGemmTile, kGemmTile, d.a[e], d.b[e], d.c)));
    FLEETSIM_CUDA(d.name, blas(gpu::gemm(d.blas, element, kGemmTile, kGemmTile, 64, d.a[e], d.b[e], d.c)));
    FLEETSIM_CUDA(d.name, blas(gpu::gemm(d.blas, element, 64, 64, 64, d.a[e], d.b[e], d.c)));
  }
  FLEETSIM_CUDA(d.name, kernel(gpu::triad(d.sa, d.sb, d.sc, 3.0f, kStreamFloats, d.stream)));
  void* scratch = nullptr;  // the first stream-ordered allocation sets up the pool
  FLEETSIM_CUDA(d.name, cudaMallocAsync(&scratch, 1, d.stream));
  FLEETSIM_CUDA(d.name, cudaFreeAsync(scratch, d.stream));
}

#if defined(FLEETSIM_HAVE_NCCL)
// Member `rank`'s part of `op` over `count` floats (nccl-tests' size convention) on its stream.
void nccl_collective(CollectiveOp op, ncclComm_t comm, float* buf, std::size_t count, int rank, int members, cudaStream_t stream,
                     const std::string& where) {
  const std::size_t per = count / static_cast<std::size_t>(members);
  const std::size_t mine = per * static_cast<std::size_t>(rank);
  switch (op) {
    case CollectiveOp::all_reduce: FLEETSIM_CUDA(where, ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream)); break;
    case CollectiveOp::all_gather: FLEETSIM_CUDA(where, ncclAllGather(buf + mine, buf, per, ncclFloat, comm, stream)); break;
    case CollectiveOp::reduce_scatter:
      FLEETSIM_CUDA(where, ncclReduceScatter(buf, buf + count, per, ncclFloat, ncclSum, comm, stream));
      break;
    case CollectiveOp::broadcast: FLEETSIM_CUDA(where, ncclBroadcast(buf, buf, count, ncclFloat, 0, comm, stream)); break;
    case CollectiveOp::reduce: FLEETSIM_CUDA(where, ncclReduce(buf, buf + count, count, ncclFloat, ncclSum, 0, comm, stream)); break;
    case CollectiveOp::all_to_all:
      FLEETSIM_CUDA(where, ncclGroupStart());
      for (int j = 0; j < members; ++j) {
        const std::size_t at = per * static_cast<std::size_t>(j);
        FLEETSIM_CUDA(where, ncclSend(buf + at, per, ncclFloat, j, comm, stream));
        FLEETSIM_CUDA(where, ncclRecv(buf + count + at, per, ncclFloat, j, comm, stream));
      }
      FLEETSIM_CUDA(where, ncclGroupEnd());
      break;
    case CollectiveOp::send_recv:
      // As the CPU backend: every member but the first receives from the one before it.
      FLEETSIM_CUDA(where, ncclGroupStart());
      if (rank + 1 < members) FLEETSIM_CUDA(where, ncclSend(buf, count, ncclFloat, rank + 1, comm, stream));
      if (rank > 0) FLEETSIM_CUDA(where, ncclRecv(buf + count, count, ncclFloat, rank - 1, comm, stream));
      FLEETSIM_CUDA(where, ncclGroupEnd());
      break;
  }
}
#endif

class CudaRun {
 public:
  CudaRun(const Scenario& sc, const RunResult& plan, const ExecOptions& options)
      : sc_(sc), plan_(plan), options_(options), trace_(plan.trace) {}

  CudaRun(const CudaRun&) = delete;
  CudaRun& operator=(const CudaRun&) = delete;
  ~CudaRun() { release(); }

  RunResult run() {
    int count = 0;
    FLEETSIM_CUDA(std::string("finding CUDA devices"), cudaGetDeviceCount(&count));
    if (count == 0) throw DeviceError("the CUDA backend cannot run here: no CUDA device");
    index_plan(count);
    check_host_memory();
    set_up();

    std::latch go(1);
    std::vector<std::jthread> threads;
    for (std::uint32_t g = 0; g < devices_.size(); ++g) {
      if (!devices_[g]) continue;
      threads.emplace_back([this, g, &go] {
        go.wait();
        Device& d = *devices_[g];
        try {
          FLEETSIM_CUDA(d.name, cudaSetDevice(d.gpu));
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex_);
          if (fatal_.empty()) fatal_ = e.what();
        }
        for (std::uint32_t rec : d.order) run_task(g, rec);
      });
    }
    try {
      start_clocks();
    } catch (const std::exception& e) {  // the threads still run through, so none waits forever
      std::lock_guard lock(mutex_);
      fatal_ = e.what();
    }
    go.count_down();
    watch_progress();
    threads.clear();  // joins: every task is enqueued
    finish();
    return result();
  }

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  // As it ran: an elastic training iteration at its gang's degree (its work and collectives there).
  const TaskSpec& spec(std::uint32_t rec) const {
    const TaskRecord& r = trace_.tasks[rec];
    return sc_.workflows[r.workflow].tasks[r.task].as_run_on(r.gpu_count);
  }
  GpuId gpu(std::uint32_t rec, std::uint32_t member) const { return trace_.gpus[trace_.tasks[rec].gpu_begin + member]; }
  std::uint32_t record_of(InstanceId instance, std::uint32_t task) const { return plan_index_.record_of(instance, task); }
  cudaEvent_t& mark(std::uint32_t rec, std::uint32_t member, Mark m) { return marks_[trace_.tasks[rec].gpu_begin + member][m]; }
  std::string task_name(std::uint32_t rec) const {
    const TaskRecord& r = trace_.tasks[rec];
    return sc_.workflows[r.workflow].id + "/" + spec(rec).name;
  }

  // Which device runs what, in which order, on which local GPU; what each device must hold.
  void index_plan(int local_gpus) {
    const std::size_t gpus = plan_.cluster.gpu_count();
    devices_.resize(gpus);
    plan_index_ = replay::index_plan(sc_, plan_, trace_);
    replayed_ = plan_index_.replayed;
    gangs_.resize(trace_.tasks.size());
    for (std::uint32_t rec : replayed_) {
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) {
        if (!devices_[index(gpu(rec, m))]) devices_[index(gpu(rec, m))] = std::make_unique<Device>();
      }
    }
    for (std::uint32_t rec : replayed_) {
      const TaskRecord& r = trace_.tasks[rec];
      const TaskSpec& s = spec(rec);
      if (r.gpu_count > 1) gangs_[rec] = std::make_unique<Gang>(r.gpu_count);
      for (std::uint32_t m = 0; m < r.gpu_count; ++m) {
        const std::uint32_t g = index(gpu(rec, m));
        Device& d = *devices_[g];
        d.order.push_back(rec);
        d.weights_bytes = std::max(d.weights_bytes, s.weights_bytes / s.gpus);
        if (s.flop > 0) d.elements[static_cast<std::size_t>(element_of(s.dtype))] = true;
        if (r.gpu_count > 1) d.collective_floats = std::max(d.collective_floats, replay::collective_floats(s));
      }
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const GpuId from = gpu(record_of(r.instance, wf.edges[e].from), 0);
        if (from == gpu(rec, 0)) continue;
        devices_[index(from)]->outbox_bytes = std::max(devices_[index(from)]->outbox_bytes, wf.edges[e].bytes);
        devices_[index(gpu(rec, 0))]->inbox_bytes = std::max(devices_[index(gpu(rec, 0))]->inbox_bytes, wf.edges[e].bytes);
      }
    }
    for (WeightLoad& load : trace_.weight_loads) {
      load.start_s = load.end_s = kNever;  // measured, or never run
      host_weights_ = std::max(host_weights_, load.bytes);
    }
    // The devices that run work take the local GPUs round-robin, in index order.
    int next = 0, used = 0;
    for (std::uint32_t g = 0; g < gpus; ++g) {
      if (!devices_[g]) continue;
      Device& d = *devices_[g];
      d.gpu = next;
      d.name = plan_.cluster.gpu_name(make_id<GpuId>(g)) + " (local GPU " + std::to_string(next) + ")";
      next = (next + 1) % local_gpus;
      ++used;
    }
    for (int p = 0; p < std::min(used, local_gpus); ++p) locals_.push_back(LocalGpu{.ordinal = p});
    // NCCL needs one GPU per member; with shared GPUs every collective runs as copies, so that no two
    // NCCL kernels of different gangs ever wait on each other on one GPU.
#if defined(FLEETSIM_HAVE_NCCL)
    const bool nccl = used <= local_gpus;
#else
    const bool nccl = false;
#endif
    for (std::uint32_t rec : replayed_) {
      if (gangs_[rec]) gangs_[rec]->nccl = nccl && replay::communicates(spec(rec));
    }
    marks_.assign(trace_.gpus.size(), {});
    load_marks_.assign(trace_.weight_loads.size(), {});
    loaded_.assign(trace_.weight_loads.size(), 0);
    ended_.assign(trace_.tasks.size(), 0);
    total_ = replayed_.size();
  }



  // Pinned host memory holds the largest weight load; refuse one larger than half this machine's memory.
  void check_host_memory() const {
    const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    if (host_weights_ > physical / 2) {
      throw InputError({Problem{sc_.file, "", "the CUDA backend would pin " + format_quantity(host_weights_, Dimension::bytes) +
                                                  " of host memory for weight loads; this machine has " + format_quantity(physical, Dimension::bytes) +
                                                  " (scale the work down, e.g. fleetsim run --work-scale 0.1)"}});
    }
  }

  // Streams, handles, buffers, events and NCCL communicators, all before the clock starts; then a
  // warm-up of every kernel and GEMM type each device will run, so no task pays for lazy loading.
  void set_up() {
    for (LocalGpu& l : locals_) {
      const std::string where = "local GPU " + std::to_string(l.ordinal);
      FLEETSIM_CUDA(where, cudaSetDevice(l.ordinal));
      FLEETSIM_CUDA(where, cudaStreamCreateWithFlags(&l.clock, cudaStreamNonBlocking));
      FLEETSIM_CUDA(where, cudaEventCreate(&l.start));
      for (const LocalGpu& peer : locals_) {
        int can = 0;
        if (peer.ordinal == l.ordinal) continue;
        FLEETSIM_CUDA(where, cudaDeviceCanAccessPeer(&can, l.ordinal, peer.ordinal));
        if (can == 0) continue;  // peer copies go through the host
        const cudaError_t e = cudaDeviceEnablePeerAccess(peer.ordinal, 0);
        if (e != cudaErrorPeerAccessAlreadyEnabled) FLEETSIM_CUDA(where, e);
        (void)cudaGetLastError();
      }
    }
    if (host_weights_ > 0) {
      const auto n = static_cast<std::size_t>(host_weights_);
      FLEETSIM_CUDA("pinning " + format_quantity(host_weights_, Dimension::bytes) + " of host memory for weight loads",
                    cudaHostAlloc(&host_store_, n, cudaHostAllocPortable));
      std::memset(host_store_, 1, n);
    }
    for (auto& dp : devices_) {
      if (dp) set_up_device(*dp);
    }
    for (std::uint32_t rec : replayed_) {
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) {
        const Device& d = *devices_[index(gpu(rec, m))];
        FLEETSIM_CUDA(d.name, cudaSetDevice(d.gpu));
        for (cudaEvent_t& e : marks_[trace_.tasks[rec].gpu_begin + m]) FLEETSIM_CUDA(d.name, cudaEventCreate(&e));
      }
      for (std::uint32_t i : plan_index_.loads_of[rec]) {
        const Device& d = *devices_[index(trace_.weight_loads[i].gpu)];
        FLEETSIM_CUDA(d.name, cudaSetDevice(d.gpu));
        for (cudaEvent_t& e : load_marks_[i]) FLEETSIM_CUDA(d.name, cudaEventCreate(&e));
      }
    }
    set_up_nccl();
    for (auto& dp : devices_) {
      if (!dp) continue;
      FLEETSIM_CUDA(dp->name, cudaSetDevice(dp->gpu));
      FLEETSIM_CUDA(dp->name, cudaStreamSynchronize(dp->stream));
    }
  }

  // One communicator clique per distinct ordered set of a gang's GPUs, warmed up with each
  // operation its gangs run (NCCL connects peers lazily, at the first operation that needs them).
  void set_up_nccl() {
#if defined(FLEETSIM_HAVE_NCCL)
    std::map<std::vector<int>, std::vector<CollectiveOp>> ops;
    for (std::uint32_t rec : replayed_) {
      if (!gangs_[rec] || !gangs_[rec]->nccl) continue;
      std::vector<int> key;
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) key.push_back(devices_[index(gpu(rec, m))]->gpu);
      std::vector<CollectiveOp>& list = ops[key];
      for (const CollectiveSpec& c : spec(rec).collectives) {
        if (replay::replays(c) && std::find(list.begin(), list.end(), c.op) == list.end()) list.push_back(c.op);
      }
    }
    for (const auto& [key, list] : ops) {
      std::string where = "NCCL communicator over local GPUs";
      for (int p : key) where += " " + std::to_string(p);
      std::vector<ncclComm_t>& comms = comms_[key];
      comms.assign(key.size(), nullptr);
      FLEETSIM_CUDA(where, ncclCommInitAll(comms.data(), static_cast<int>(key.size()), key.data()));
      // Warm-up on each member's first device of the plan with those GPUs: its stream and buffer.
      std::vector<Device*> members(key.size(), nullptr);
      for (auto& dp : devices_) {
        if (!dp) continue;
        for (std::size_t m = 0; m < key.size(); ++m) {
          if (members[m] == nullptr && dp->gpu == key[m] && dp->collective_floats > 0) members[m] = dp.get();
        }
      }
      if (std::find(members.begin(), members.end(), nullptr) != members.end()) continue;
      std::size_t count = std::numeric_limits<std::size_t>::max();
      for (const Device* d : members) count = std::min(count, d->collective_floats);
      count = std::min<std::size_t>(count, 1 << 16);
      for (CollectiveOp op : list) {
        FLEETSIM_CUDA(where, ncclGroupStart());
        for (std::size_t m = 0; m < key.size(); ++m) {
          nccl_collective(op, comms[m], members[m]->collective, count, static_cast<int>(m), static_cast<int>(key.size()), members[m]->stream, where);
        }
        FLEETSIM_CUDA(where, ncclGroupEnd());
      }
    }
    for (std::uint32_t rec : replayed_) {
      if (!gangs_[rec] || !gangs_[rec]->nccl) continue;
      std::vector<int> key;
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) key.push_back(devices_[index(gpu(rec, m))]->gpu);
      gangs_[rec]->comms = &comms_.at(key);
    }
#endif
  }

  // The run's time origin: a start event on every local GPU, recorded while the GPU is idle, at a
  // known host time.
  void start_clocks() {
    t0_ = Clock::now();
    for (LocalGpu& l : locals_) {
      const std::string where = "local GPU " + std::to_string(l.ordinal);
      FLEETSIM_CUDA(where, cudaSetDevice(l.ordinal));
      l.offset_s = now();
      FLEETSIM_CUDA(where, cudaEventRecord(l.start, l.clock));
    }
  }

  // Blocks until the task's instance has arrived and every producer is enqueued. Returns the reason
  // the task cannot run ("" when it can) and its producers' records.
  std::pair<std::string, std::vector<std::uint32_t>> wait_ready(std::uint32_t rec) {
    std::vector<std::uint32_t> producers;
    std::unique_lock lock(mutex_);
    std::string reason = replay::wait_for_inputs(sc_, trace_, plan_index_, rec, t0_, lock, changed_, ended_,
                                                 [&](std::uint32_t p) { producers.push_back(p); });
    return {std::move(reason), std::move(producers)};
  }

  // Every member's stream waits for every other member's `mine`; the host barriers only make sure
  // each event is recorded before it is waited on, and not replaced before everyone has waited.
  void meet(Gang& gang, std::uint32_t member, cudaEvent_t mine, Device& d, std::string& failure) {
    gang.published[member] = mine;
    gang.barrier.arrive_and_wait();
    for (std::size_t m = 0; m < gang.published.size(); ++m) {
      if (m == member) continue;
      try {
        FLEETSIM_CUDA(d.name, cudaStreamWaitEvent(d.stream, gang.published[m], 0));
      } catch (const std::exception& e) {
        if (failure.empty()) failure = e.what();
      }
    }
    gang.barrier.arrive_and_wait();
  }

  // A collective without NCCL: the CPU backend's ring steps, each a peer copy into the receive half
  // of the buffer (and a reduction kernel), with the gang meeting between steps.
  void copy_collective(const CollectiveSpec& collective, std::uint32_t rec, std::uint32_t member, Gang& gang, Device& d, std::string& failure,
                       const std::string& where) {
    const std::size_t k = trace_.tasks[rec].gpu_count, count = replay::collective_floats(collective), rank = member;
    auto peer = [&](std::size_t m) -> Device& { return *devices_[index(gpu(rec, static_cast<std::uint32_t>(m)))]; };
    Device& left = peer((rank + k - 1) % k);
    float* mine = d.collective;
    auto chunk_begin = [&](std::size_t c) { return c * count / k; };
    auto chunk_size = [&](std::size_t c) { return chunk_begin(c + 1) - chunk_begin(c); };
    auto attempt = [&](auto&& work) {
      try {
        work();
      } catch (const std::exception& e) {
        if (failure.empty()) failure = e.what();
      }
    };
    auto copy = [&](float* to, const Device& from, const float* src, std::size_t floats) {
      attempt([&] { FLEETSIM_CUDA(where, cudaMemcpyPeerAsync(to, d.gpu, src, from.gpu, floats * sizeof(float), d.stream)); });
    };
    auto add = [&](float* to, const float* src, std::size_t floats) {
      attempt([&] { FLEETSIM_CUDA(where, kernel(gpu::accumulate(to, src, floats, d.stream))); });
    };
    auto step = [&] {
      cudaEvent_t e = nullptr;
      attempt([&] {
        FLEETSIM_CUDA(where, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        d.steps.push_back(e);
        FLEETSIM_CUDA(where, cudaEventRecord(e, d.stream));
      });
      meet(gang, member, e, d, failure);
    };
    auto reduce_scatter = [&] {
      for (std::size_t st = 0; st + 1 < k; ++st) {
        const std::size_t c = (rank + 2 * k - st - 1) % k;
        copy(mine + count + chunk_begin(c), left, left.collective + chunk_begin(c), chunk_size(c));
        add(mine + chunk_begin(c), mine + count + chunk_begin(c), chunk_size(c));
        step();
      }
    };
    auto all_gather = [&](std::size_t owned_shift) {
      for (std::size_t st = 0; st + 1 < k; ++st) {
        const std::size_t c = (rank + owned_shift + 2 * k - 1 - st) % k;
        copy(mine + chunk_begin(c), left, left.collective + chunk_begin(c), chunk_size(c));
        step();
      }
    };
    switch (collective.op) {
      case CollectiveOp::all_reduce:
        reduce_scatter();
        all_gather(1);
        break;
      case CollectiveOp::all_gather: all_gather(0); break;
      case CollectiveOp::reduce_scatter: reduce_scatter(); break;
      case CollectiveOp::broadcast:
        if (rank != 0) copy(mine, peer(0), peer(0).collective, count);
        step();
        break;
      case CollectiveOp::reduce:
        if (rank == 0) {
          for (std::size_t j = 1; j < k; ++j) {
            copy(mine + count, peer(j), peer(j).collective, count);
            add(mine, mine + count, count);
          }
        }
        step();
        break;
      case CollectiveOp::all_to_all:
        for (std::size_t j = 0; j < k; ++j) {
          copy(mine + count + chunk_begin(j), peer(j), peer(j).collective + chunk_begin(rank), std::min(chunk_size(j), chunk_size(rank)));
        }
        step();
        break;
      case CollectiveOp::send_recv:
        if (rank != 0) copy(mine + count, left, left.collective, count);
        step();
        break;
    }
  }

  void run_task(std::uint32_t g, std::uint32_t rec) {
    const TaskSpec& s = spec(rec);
    std::uint32_t member = 0;
    while (index(gpu(rec, member)) != g) ++member;
    Gang* gang = gangs_[rec].get();
    Device& d = *devices_[g];
    const std::string where = task_name(rec) + " on " + d.name;

    std::string failure;
    std::vector<std::uint32_t> producers;
    std::tie(failure, producers) = wait_ready(rec);
    auto attempt = [&](auto&& work) {
      if (!failure.empty()) return;
      try {
        work();
      } catch (const std::exception& e) {
        failure = e.what();
      }
    };
    // A phase boundary: this member's event, then (in a gang) every member waits for all the others.
    auto pass = [&](Mark m) {
      cudaEvent_t e = mark(rec, member, m);
      try {
        FLEETSIM_CUDA(where, cudaEventRecord(e, d.stream));
      } catch (const std::exception& ex) {
        if (failure.empty()) failure = ex.what();
      }
      if (gang != nullptr) meet(*gang, member, e, d, failure);
    };
    for (std::uint32_t p : producers) {
      for (std::uint32_t m = 0; m < trace_.tasks[p].gpu_count; ++m) attempt([&] { FLEETSIM_CUDA(where, cudaStreamWaitEvent(d.stream, mark(p, m, kDone), 0)); });
    }
    pass(kArrived);
    void* working_set = nullptr;
    attempt([&] {
      const auto n = static_cast<std::size_t>(s.working_set_bytes) + 1;
      FLEETSIM_CUDA(where + ": allocating its working set of " + format_quantity(static_cast<double>(n), Dimension::bytes),
                    cudaMallocAsync(&working_set, n, d.stream));
      for (std::uint32_t i : plan_index_.loads_of[rec]) {
        const WeightLoad& load = trace_.weight_loads[i];
        if (index(load.gpu) != g) continue;
        const Device* peer = load.peer ? devices_[index(*load.peer)].get() : nullptr;
        const bool from_peer = peer != nullptr && peer->weights_bytes >= load.bytes;  // else the peer ran nothing this big
        const auto bytes = static_cast<std::size_t>(load.bytes);
        FLEETSIM_CUDA(where, cudaEventRecord(load_marks_[i][0], d.stream));
        if (from_peer) {
          FLEETSIM_CUDA(where + ": loading weights from " + peer->name, cudaMemcpyPeerAsync(d.weights, d.gpu, peer->weights, peer->gpu, bytes, d.stream));
        } else {
          FLEETSIM_CUDA(where + ": loading weights from host memory", cudaMemcpyAsync(d.weights, host_store_, bytes, cudaMemcpyHostToDevice, d.stream));
        }
        FLEETSIM_CUDA(where, cudaEventRecord(load_marks_[i][1], d.stream));
        loaded_[i] = 1;
      }
      if (member != 0) return;
      const TaskRecord& r = trace_.tasks[rec];
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const GpuId from = gpu(record_of(r.instance, wf.edges[e].from), 0);
        if (index(from) == g) continue;
        const Device& producer = *devices_[index(from)];
        FLEETSIM_CUDA(where + ": copying its input from " + producer.name,
                      cudaMemcpyPeerAsync(d.inbox, d.gpu, producer.outbox, producer.gpu, static_cast<std::size_t>(wf.edges[e].bytes), d.stream));
      }
    });
    pass(kLoaded);
    attempt([&] {
      const double share = trace_.tasks[rec].work_scale / s.gpus;
      const TaskWork w = work_on(s, plan_.cluster.gpu_type(gpu(rec, member)));
      run_work(d, w.flop * share, w.bytes * share, element_of(s.dtype), w.launches, where);
    });
    const bool communicates = replay::communicates(s) && gang != nullptr;
    if (communicates) pass(kComputed);
    // Every member takes part even after a failure, so no member waits forever; a task's collectives
    // run one after another.
    for (const CollectiveSpec& c : s.collectives) {
      if (!communicates) break;
      if (!replay::replays(c)) continue;
#if defined(FLEETSIM_HAVE_NCCL)
      if (gang->nccl) {
        try {
          nccl_collective(c.op, (*gang->comms)[member], d.collective, replay::collective_floats(c), static_cast<int>(member),
                          static_cast<int>(trace_.tasks[rec].gpu_count), d.stream, where);
        } catch (const std::exception& e) {
          if (failure.empty()) failure = e.what();
        }
      } else {
        copy_collective(c, rec, member, *gang, d, failure, where);
      }
#else
      copy_collective(c, rec, member, *gang, d, failure, where);
#endif
    }
    if (working_set != nullptr) {
      const cudaError_t e = cudaFreeAsync(working_set, d.stream);
      if (e != cudaSuccess && failure.empty()) {
        try {
          FLEETSIM_CUDA(where, e);
        } catch (const std::exception& ex) {
          failure = ex.what();
        }
      }
    }
    TaskRecord& r = trace_.tasks[rec];
    if (!failure.empty()) {
      std::lock_guard lock(mutex_);
      r.status = TaskStatus::failed;
      r.reason = trace_.add_reason(failure);
    }
    pass(kDone);  // after every member's failure is recorded
    if (member != 0) return;
    std::lock_guard lock(mutex_);
    if (r.status != TaskStatus::failed) r.status = TaskStatus::completed;
    ended_[rec] = 1;
    changed_.notify_all();
  }

  // Reports each task's end as its last event completes, until every task has ended.
  void watch_progress() {
    std::vector<std::uint32_t> pending = replayed_;
    std::size_t done = 0;
    while (!pending.empty()) {
      std::vector<std::uint32_t> still;
      for (std::uint32_t rec : pending) {
        bool ended = false;
        {
          std::lock_guard lock(mutex_);
          ended = ended_[rec] != 0;
        }
        for (std::uint32_t m = 0; ended && m < trace_.tasks[rec].gpu_count; ++m) {
          const Device& d = *devices_[index(gpu(rec, m))];
          (void)cudaSetDevice(d.gpu);
          const cudaError_t e = cudaEventQuery(mark(rec, m, kDone));
          if (e == cudaErrorNotReady) {
            ended = false;
          } else if (e != cudaSuccess) {
            (void)cudaGetLastError();
            std::lock_guard lock(mutex_);
            if (fatal_.empty()) fatal_ = d.name + ": cudaEventQuery failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
          }
        }
        if (!ended) {
          still.push_back(rec);
        } else if (options_.progress) {
          options_.progress(++done, total_);
        }
      }
      pending.swap(still);
      {
        std::lock_guard lock(mutex_);
        if (!fatal_.empty()) return;  // the threads still enqueue everything; finish() reports it
      }
      if (!pending.empty()) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

  // Waits for every GPU, then reads the events into the trace.
  void finish() {
    for (LocalGpu& l : locals_) {
      const std::string where = "local GPU " + std::to_string(l.ordinal) + " at the end of the run";
      FLEETSIM_CUDA(where, cudaSetDevice(l.ordinal));
      FLEETSIM_CUDA(where, cudaDeviceSynchronize());
    }
    if (!fatal_.empty()) throw DeviceError(fatal_);
    auto time_of = [&](const Device& d, cudaEvent_t e) {
      const LocalGpu& l = locals_[static_cast<std::size_t>(d.gpu)];
      float ms = 0;
      FLEETSIM_CUDA(d.name + ": reading the run's events", cudaEventElapsedTime(&ms, l.start, e));
      return l.offset_s + static_cast<double>(ms) / 1e3;
    };
    // Each member's phase boundaries, merged as a multi-node run's ranks are (ranks.hpp): a phase
    // ends for the task when its last member ends it.
    auto communicates = [&](std::uint32_t rec) { return replay::communicates(spec(rec)) && gangs_[rec]; };
    RankReport report;
    for (std::uint32_t rec : replayed_) {
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) {
        const Device& d = *devices_[index(gpu(rec, m))];
        report.members.push_back({.record = rec, .member = m, .arrived_s = time_of(d, mark(rec, m, kArrived)),
                                  .loaded_s = time_of(d, mark(rec, m, kLoaded)),
                                  .computed_s = communicates(rec) ? time_of(d, mark(rec, m, kComputed)) : 0.0,  // recorded only then
                                  .done_s = time_of(d, mark(rec, m, kDone)), .failure = {}});  // failures are in the trace already
      }
      for (std::uint32_t i : plan_index_.loads_of[rec]) {
        if (loaded_[i] == 0) continue;  // its task failed before the load
        const Device& d = *devices_[index(trace_.weight_loads[i].gpu)];
        report.loads.push_back({.load = i, .start_s = time_of(d, load_marks_[i][0]), .end_s = time_of(d, load_marks_[i][1])});
      }
    }
    merge_rank_reports(trace_, std::span(&report, 1), communicates);
    replay::order_phases(sc_, plan_index_, trace_);  // the GPUs' clocks agree with the host's to within microseconds
  }

  RunResult result() { return replay::measured_result(sc_, plan_, std::move(trace_)); }


  // Everything set up is given back; errors here are ignored, as the run's outcome is already known.
  void release() noexcept {
    auto destroy = [](cudaEvent_t& e) {
      if (e != nullptr) (void)cudaEventDestroy(e);
      e = nullptr;
    };
    for (auto& dp : devices_) {
      if (!dp) continue;
      Device& d = *dp;
      (void)cudaSetDevice(d.gpu);
      if (d.stream != nullptr) (void)cudaStreamSynchronize(d.stream);
    }
#if defined(FLEETSIM_HAVE_NCCL)
    for (auto& [key, comms] : comms_) {
      for (ncclComm_t c : comms) {
        if (c != nullptr) (void)ncclCommDestroy(c);
      }
    }
#endif
    for (std::size_t slot = 0; slot < marks_.size(); ++slot) {
      for (cudaEvent_t& e : marks_[slot]) destroy(e);
    }
    for (auto& pair : load_marks_) {
      for (cudaEvent_t& e : pair) destroy(e);
    }
    for (auto& dp : devices_) {
      if (dp) release_device(*dp);
    }
    for (LocalGpu& l : locals_) {
      (void)cudaSetDevice(l.ordinal);
      destroy(l.start);
      if (l.clock != nullptr) (void)cudaStreamDestroy(l.clock);
    }
    if (host_store_ != nullptr) (void)cudaFreeHost(host_store_);
    (void)cudaGetLastError();
  }

  const Scenario& sc_;
  const RunResult& plan_;
  const ExecOptions& options_;
  Trace trace_;
  Clock::time_point t0_;
  std::vector<LocalGpu> locals_;
  std::vector<std::unique_ptr<Device>> devices_;  // per GPU of the plan; null when it runs nothing
  std::vector<std::uint32_t> replayed_;           // the records run, in the plan's start order
  replay::PlanIndex plan_index_;
  std::vector<std::unique_ptr<Gang>> gangs_;
  std::vector<std::array<cudaEvent_t, kMarks>> marks_;      // per Trace::gpus slot: one member of one task
  std::vector<std::array<cudaEvent_t, 2>> load_marks_;      // per weight load: start, end
  std::vector<std::uint8_t> loaded_;                         // per weight load: its events were recorded
#if defined(FLEETSIM_HAVE_NCCL)
  std::map<std::vector<int>, std::vector<ncclComm_t>> comms_;  // by the gang's local GPUs, in member order
#endif
  double host_weights_ = 0;
  void* host_store_ = nullptr;  // pinned: weights in host memory, the source of loads
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::uint8_t> ended_;  // enqueued to the end, status final
  std::string fatal_;                // a failure outside any task
  std::size_t total_ = 0;
};

// One GPU as the device of one rank of several (rank_replay.hpp). Each call waits for the GPU, so the
// replay times it on the host clock, microseconds later than CUDA events would. Tensors to other ranks
// go through pinned host memory: a device-to-host copy, an MPI message, a host-to-device copy (the message
// carries a host buffer written once, as the content is not what is measured). A gang's collective runs on
// NCCL where every rank has a GPU of its own (NCCL refuses two ranks on one GPU), else through host memory
// over MPI.
class CudaRankDevice final : public replay::RankDevice {
 public:
  CudaRankDevice(int ordinal, std::string name) {
    d_.gpu = ordinal;
    d_.name = std::move(name);
  }
  CudaRankDevice(const CudaRankDevice&) = delete;
  CudaRankDevice& operator=(const CudaRankDevice&) = delete;
  ~CudaRankDevice() override {
    // After an error the other ranks may never reach this rank's collectives again: abort the
    // communicators rather than wait for them, so this rank can exit and mpirun stop the job.
    const bool failing = std::uncaught_exceptions() > 0;
    (void)cudaSetDevice(d_.gpu);
#if defined(FLEETSIM_NCCL_OVER_MPI)
    for (ncclComm_t c : comms_) {
      if (c != nullptr) (void)(failing ? ncclCommAbort(c) : ncclCommDestroy(c));
    }
#endif
    if (d_.stream != nullptr && !failing) (void)cudaStreamSynchronize(d_.stream);
    release_device(d_);
    for (void* p : {send_, sink_, receive_, staging_, host_weights_}) {
      if (p != nullptr) (void)cudaFreeHost(p);
    }
    (void)cudaGetLastError();
  }

  void set_up(const replay::Buffers& z, std::span<const std::vector<int>> groups, ranks::Transport& transport) override {
    transport_ = &transport;
    d_.outbox_bytes = z.outbox;
    d_.inbox_bytes = z.inbox;
    d_.weights_bytes = z.weights;
    d_.collective_floats = z.collective_floats;
    for (Dtype t : z.dtypes) d_.elements[static_cast<std::size_t>(element_of(t))] = true;
    set_up_device(d_);
    send_ = pinned(z.outbox, "tensors out");
    sink_ = pinned(z.outbox, "tensors out");
    receive_ = pinned(z.inbox, "tensors in");
    host_weights_ = pinned(z.host_weights, "weight loads");
    staging_ = pinned(2.0 * sizeof(float) * static_cast<double>(z.collective_floats), "collectives over MPI");
    wait();
    const int me = ranks::mpi_world().rank;
    for (const std::vector<int>& members : groups) {
      const auto at = std::find(members.begin(), members.end(), me);
      member_.push_back(at == members.end() ? -1 : static_cast<int>(at - members.begin()));
      size_.push_back(static_cast<int>(members.size()));
    }
#if defined(FLEETSIM_NCCL_OVER_MPI)
    // NCCL takes one rank per GPU: compare the GPUs' PCI addresses (ranks may each see only their own GPU).
    char bus[32] = {};
    FLEETSIM_CUDA(d_.name, cudaDeviceGetPCIBusId(bus, sizeof bus, d_.gpu));
    std::vector<std::string> buses = ranks::gather_on_machine(bus);
    std::sort(buses.begin(), buses.end());
    nccl_ = ranks::everywhere(std::adjacent_find(buses.begin(), buses.end()) == buses.end());
    for (std::size_t i = 0; nccl_ && i < groups.size(); ++i) {  // every rank makes every communicator, in order
      comms_.push_back(ranks::join_communicator(groups[i].front(), size_[i], member_[i], d_.gpu, d_.name + ": a gang's NCCL communicator"));
    }
#endif
  }

  void hold_working_set(double bytes) override {
    const auto n = static_cast<std::size_t>(bytes) + 1;
    FLEETSIM_CUDA(d_.name + ": allocating a working set of " + format_quantity(static_cast<double>(n), Dimension::bytes),
                  cudaMallocAsync(&working_set_, n, d_.stream));
    wait();
  }
  void release_working_set() override {
    if (working_set_ == nullptr) return;
    void* p = std::exchange(working_set_, nullptr);
    FLEETSIM_CUDA(d_.name, cudaFreeAsync(p, d_.stream));
    wait();
  }
  void load_weights(double bytes) override {
    FLEETSIM_CUDA(d_.name + ": loading weights from host memory",
                  cudaMemcpyAsync(d_.weights, host_weights_, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice, d_.stream));
    wait();
  }
  void compute(double flop, double bytes, Dtype dtype, std::uint32_t launches) override {
    run_work(d_, flop, bytes, element_of(dtype), launches, d_.name);
    wait();
  }
  void collective(std::size_t group, CollectiveOp op, std::size_t count) override {
#if defined(FLEETSIM_NCCL_OVER_MPI)
    if (nccl_) {
      nccl_collective(op, comms_.at(group), d_.collective, count, member_.at(group), size_.at(group), d_.stream, d_.name);
      wait();
      return;
    }
#endif
    const std::size_t n = 2 * count * sizeof(float);
    FLEETSIM_CUDA(d_.name, cudaMemcpyAsync(staging_, d_.collective, n, cudaMemcpyDeviceToHost, d_.stream));
    wait();
    transport_->collective(group, op, static_cast<float*>(staging_), count);
    FLEETSIM_CUDA(d_.name, cudaMemcpyAsync(d_.collective, staging_, n, cudaMemcpyHostToDevice, d_.stream));
    wait();
  }
  const void* outgoing(double bytes) override {
    FLEETSIM_CUDA(d_.name + ": copying a tensor out", cudaMemcpyAsync(sink_, d_.outbox, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost, d_.stream));
    wait();
    return send_;
  }
  void* incoming(double) override { return receive_; }
  void arrived(double bytes) override {
    FLEETSIM_CUDA(d_.name + ": copying a tensor in", cudaMemcpyAsync(d_.inbox, receive_, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice, d_.stream));
    wait();
  }

 private:
  void* pinned(double bytes, const std::string& what) {
    void* p = nullptr;
    const auto n = static_cast<std::size_t>(bytes) + 1;
    FLEETSIM_CUDA(d_.name + ": pinning " + format_quantity(static_cast<double>(n), Dimension::bytes) + " of host memory for " + what,
                  cudaHostAlloc(&p, n, cudaHostAllocDefault));
    std::memset(p, 1, n);
    return p;
  }
  // Waits for the GPU, letting the rank's sends move on meanwhile; an NCCL failure (a peer gone) stops it.
  void wait() {
    for (;;) {
      const cudaError_t e = cudaStreamQuery(d_.stream);
      if (e != cudaErrorNotReady) {
        FLEETSIM_CUDA(d_.name, e);
        return;
      }
#if defined(FLEETSIM_NCCL_OVER_MPI)
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        if (c != nullptr) FLEETSIM_CUDA(d_.name + ": a gang's NCCL communicator", ncclCommGetAsyncError(c, &async));
        FLEETSIM_CUDA(d_.name + ": a gang's NCCL communicator", async);
      }
#endif
      transport_->progress();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Device d_;
  ranks::Transport* transport_ = nullptr;
  void *send_ = nullptr, *sink_ = nullptr, *receive_ = nullptr, *staging_ = nullptr, *host_weights_ = nullptr;  // pinned
  void* working_set_ = nullptr;
  std::vector<int> member_, size_;  // per group: this rank's member index (-1: none), the member count
#if defined(FLEETSIM_NCCL_OVER_MPI)
  bool nccl_ = false;
  std::vector<ncclComm_t> comms_;  // per group; null where this rank is not a member
#endif
};

bool device_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (e != cudaSuccess || count == 0) {
    if (why != nullptr) {
      *why = e != cudaSuccess ? std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ", " + cudaGetErrorString(e) + ")"
                              : std::string("no CUDA device (cudaGetDeviceCount found none)");
    }
    return false;
  }
  return true;
}

RunResult execute(const Scenario& scenario, const RunResult& plan, const ExecOptions& options) {
  std::string why;
  if (!device_available(&why)) throw DeviceError("the CUDA backend cannot run here: " + why);
  if (ranks::mpi_world().size > 1) {  // one rank per device: the ranks on a machine take its GPUs round-robin
    int count = 0;
    FLEETSIM_CUDA(std::string("finding CUDA devices"), cudaGetDeviceCount(&count));
    const int ordinal = ranks::on_this_machine().rank % count;
    CudaRankDevice device(ordinal, "local GPU " + std::to_string(ordinal) + " of rank " + std::to_string(ranks::mpi_world().rank));
    return replay::execute_as_rank(scenario, plan, options, device);
  }
  return CudaRun(scenario, plan, options).run();
}

}  // namespace
}  // namespace fleetsim

// The library's entry points (fleetsim/cuda_plugin.hpp).
extern "C" bool fleetsim_cuda_available(std::string* why) { return fleetsim::device_available(why); }

extern "C" void fleetsim_cuda_execute(const fleetsim::Scenario* scenario, const fleetsim::RunResult* plan,
                                      const fleetsim::ExecOptions* options, std::optional<fleetsim::RunResult>* out) {
  out->emplace(fleetsim::execute(*scenario, *plan, *options));
}
