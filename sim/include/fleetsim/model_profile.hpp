// Layer-level model profiles: a model's architecture (the catalog's `architectures`, from the model's
// published configuration) and the kernels one step of it runs at a given shape: the GEMMs of its linear
// layers and convolutions (as implicit GEMMs), its attentions, and its memory-bound norms, activations,
// residual adds and layout copies. The kernel-time model (fleetsim/kernel_model.hpp) times them on a GPU
// type, and estimate_step adds the host that launches them.
//
// Families: `transformer` (decoder LLMs, and the CLIP and T5 text encoders), `unet` (Stable Diffusion
// 1.x, 2.x, XL and its refiner), `dit` (FLUX, SD3, HunyuanVideo: joint double-stream and single-stream
// blocks; Wan: blocks with cross-attention to the text), `vae-decoder` (the image VAEs, and a 2D stand-in
// for video ones), `causal-vae-decoder` (Wan 2.1's and 2.2's, a latent frame a call), `conv3d-vae-decoder`
// (HunyuanVideo's, 3D convolutions over the whole clip or each tile), `ltx-vae-decoder` (LTX-Video's, depth-to-
// space upsamplings), `mochi-vae-decoder` (Mochi's, per-frame norms and Conv1x1 upsamplings), and `rrdb` (Real-ESRGAN).
//
// How a step runs matters as much as what it computes. The family code lays out the GEMMs, convolutions
// and attentions and calls the step's small operations by name; a runtime (models/runtimes.json) says
// what each launches. Eager PyTorch (ComfyUI, diffusers) launches a kernel per operator, upcasts to fp32
// where the code does, keeps activations in NCHW around cuDNN's NHWC convolutions, copies where the code
// permutes or concatenates, and spends host time on every launch. A compiled step (torch.compile,
// TensorRT, vLLM's and Megatron's fused kernels, CUDA graphs) fuses the elementwise work into its
// neighbours and launches from a graph.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fleetsim/kernel_model.hpp"

namespace fleetsim {

struct Architecture {
  std::string id, name, family, source;
  std::map<std::string, double, std::less<>> numbers;                // layers, hidden, heads...
  std::map<std::string, std::vector<double>, std::less<>> lists;     // channels, transformer depths...
  double number(std::string_view key, double fallback) const;
  const std::vector<double>& list(std::string_view key) const;
  bool operator==(const Architecture&) const = default;
};

// The numbers and lists a family needs, and the ones it may have (checked when the catalog is read).
struct ArchitectureFields {
  std::vector<std::string_view> numbers, optional_numbers, lists;
};
// No value for an unknown family.
const ArchitectureFields* architecture_fields(std::string_view family);
std::vector<std::string_view> architecture_families();
// Whether a step of the family works on pixels (its shape needs a width and a height), and whether it decodes a
// video's frames together (a 3D VAE decoder) rather than each as an image.
bool works_on_pixels(std::string_view family);
bool decodes_video(std::string_view family);

// How a step's code runs: ComfyUI's or diffusers' eager PyTorch (a kernel per operator, each launched
// by the host), compiled (torch.compile, TensorRT, an engine's fused kernels, launched from a graph), or
// a model's own repository's eager code where it differs from both (hunyuanvideo: Tencent's HunyuanVideo,
// its VAE decoder only).
enum class Runtime : std::uint8_t { comfyui, diffusers, compiled, hunyuanvideo };
std::string_view runtime_name(Runtime runtime);
std::optional<Runtime> parse_runtime(std::string_view name);
// "comfyui, diffusers, compiled or hunyuanvideo", for messages.
std::string runtime_choices();
// An LLM: a transformer with a vocabulary (what serving engines and `train` take).
bool is_llm(const Architecture& architecture);
// The runtime a model runs under when nobody says: LLMs compiled, as vLLM, TensorRT-LLM and Megatron run
// them; everything else as ComfyUI runs it.
Runtime default_runtime(const Architecture& architecture);

// One kernel a runtime launches for one of a step's small operations (an RMSNorm, a rotary embedding,
// adaLN's modulation), from models/runtimes.json: what it reads and writes per element of the
// operation's tensor, in the step's dtype (`act`) or in the dtypes the code names (an fp32 upcast).
struct RuntimeKernel {
  std::string op;                        // the operation as the code calls it
  KernelClass cls = KernelClass::memory;
  double act_tensors = 0;                // tensors of the operation's size in the step's dtype
  double fixed_bytes = 0;                // bytes per element in fixed dtypes
  double launches = 0;                   // > 0: kernels too small to move bytes that matter
  bool per_group = false;                // a CTA per (sample, group), as GroupNorm's statistics
  std::string reads, writes;             // dtypes, "act" for the step's, for reports
  std::string operation, source;         // the operation it belongs to, and where it was read
  double element_bytes(Dtype dtype) const { return act_tensors * dtype_bytes(dtype) + fixed_bytes; }
};
struct RuntimeProfile {
  Runtime runtime = Runtime::comfyui;  // an inference runtime's; a training runtime (torchtitan) leaves it unset
  std::string name, source;
  bool eager = true;  // the host launches each kernel (false: from a graph)
  // A diffusion transformer's attention projections: one GEMM for q, k and v (and, in FLUX's single
  // blocks, the MLP's input) as ComfyUI's modules hold them, or one GEMM each as diffusers' do.
  bool separate_projections = false;
  std::string projections_source;
  std::map<std::string, std::vector<RuntimeKernel>, std::less<>> ops;
  // The architecture families it runs (a model's own code runs that model's); empty: every family.
  std::vector<std::string> families;
};
// The kernels `runtime` launches for one small operation over rows x width in `dtype`; `groups`: the rows
// of a kernel that runs a CTA per (sample, group).
std::vector<KernelCall> operation_kernels(const RuntimeProfile& runtime, std::string_view operation, double rows, double width, Dtype dtype,
                                          double groups = 0);
// The built-in profiles (models/runtimes.json), indexed by Runtime.
const RuntimeProfile& runtime_profile(Runtime runtime);
// The eager training runtime `train`'s "runtime": "torchtitan" times a transformer layer by (models/runtimes.json
// "training"): the small operations of its forward and backward, as sim/src/training.cpp calls them.
const RuntimeProfile& torchtitan_profile();
// Strict: every runtime defines exactly the operations the model code (or the training code) calls, or those
// it changes of a runtime before it that it runs "like"; errors name `file`.
struct RuntimeProfiles {
  std::vector<RuntimeProfile> inference;  // indexed by Runtime
  std::vector<RuntimeProfile> training;   // torchtitan
};
RuntimeProfiles parse_runtimes(std::string_view text, const std::string& file);

// What one step works on and how it runs. Image and video models: the output's pixels and frames (the
// VAE's factors make the latent; an upscaler: the input image's pixels) and the text tokens they attend
// to (`context`; 0: the architecture's default); LLMs: new tokens per sequence over `context` tokens
// already cached; text encoders: the text length.
struct StepShape {
  double batch = 1;              // images, videos or sequences (classifier-free guidance doubles it)
  double width = 0, height = 0;  // pixels
  double frames = 1;
  double tokens = 0;
  double context = 0;            // text tokens of a diffusion model, cached tokens of an LLM
  bool training = false;         // logits for every token (a training step), not the last only
  Runtime runtime = Runtime::comfyui;
  // Whose kernels run its attention: FlashAttention-2's (PyTorch up to 2.10, as the runtimes' sources read) or
  // cuDNN's (PyTorch 2.11 on Hopper and Blackwell).
  AttentionBackend attention = AttentionBackend::flash2;
  // Sequence parallelism over a gang of this many GPUs (a diffusion transformer, as xDiT's USP runs it):
  // each GPU's kernels on its share of the tokens; in attention, Ulysses' all-to-alls give each GPU of a
  // group its share of the heads over the group's tokens, and ring attention passes keys and values round
  // rings of `ring_degree` GPUs, a block a pass (xDiT's ring degree: 1 is Ulysses alone, the whole
  // sequence_parallel ring attention alone).
  double sequence_parallel = 1;
  double ring_degree = 1;
  double ulysses_degree() const { return sequence_parallel / ring_degree; }
  // Classifier-free guidance parallelism: the guidance batch's halves on this many GPUs (1 or 2), as
  // xDiT's CFG parallel and ComfyUI's multi-GPU nodes run them; each GPU's kernels on its share.
  double cfg_parallel = 1;
  // PipeFusion (xDiT): the transformer's blocks in `pipeline_stages` stages of consecutive blocks, a GPU each,
  // and the image's tokens in `patches` bands of latent rows, each band sent through the stages after the one
  // before; each attention layer keeps every token's keys and values, the other bands' a band's time stale. The
  // first `pipeline_warmup` steps of a run pass the whole image through the stages one stage at a time.
  double pipeline_stages = 1;
  double patches = 1;
  double pipeline_warmup = 0;
  double gpus() const { return sequence_parallel * cfg_parallel * pipeline_stages; }  // the gang one step runs on
  // A VAE's decode in tiles, as ComfyUI's tiled decode cuts the latent (comfy/utils.py
  // tiled_scale_multidim): tiles of `size` latent pixels a side overlapping by `overlap`, and of `frames`
  // latent frames overlapping by `frame_overlap`, each tile a whole decoder call. Size 0: one call over
  // the whole clip. A video VAE takes tiles (decodes_video_in_tiles), and a 2D image VAE (a vae-decoder, not a
  // video VAE's stand-in), whose tiles have no frames (0) and whose decode runs three passes of them (comfy/sd.py decode_tiled_).
  // `vram_below` (ComfyUI's fallback once a whole decode runs out of memory): the tiles only on a GPU with less
  // memory than that, the whole decode's peak with its weights; a larger GPU decodes in one call. 0: on every GPU.
  struct Tiles {
    double size = 0, overlap = 0, frames = 0, frame_overlap = 0;
    double vram_below = 0;
    bool operator==(const Tiles&) const = default;
  } tiles = {};
  bool operator==(const StepShape&) const = default;
};

// What is wrong with `tiles` for `architecture`, by the Tiles field at fault; nullopt where nothing is
// (no tiles, a 3D video VAE's each overlapping the next by less than itself, or a 2D VAE's
// overlapping by less than the narrow passes' half a tile, without frames).
struct ShapeProblem {
  std::string field, message;
};
std::optional<ShapeProblem> tiles_problem(const Architecture& architecture, const StepShape::Tiles& tiles);
// What is wrong with the shape's split over GPUs (sequence, ring, cfg, pipefusion, patches) for `architecture`,
// by the field at fault of a task's "parallel"; nullopt where nothing is.
std::optional<ShapeProblem> parallel_problem(const Architecture& architecture, const StepShape& shape);
// Where `runtime` is one model's own code and `architecture` is not of the families it runs: the problem, as
// of the field "runtime"; nullopt where it runs it.
std::optional<ShapeProblem> runtime_problem(const Architecture& architecture, Runtime runtime);
// A 2D image VAE's decoder (a vae-decoder that is not a video VAE's stand-in), which ComfyUI tiles image by
// image in three passes.
bool decodes_images_in_tiles(const Architecture& architecture);
// A 3D video VAE's decoder (every family decodes_video names: Wan's causal-vae-decoder, HunyuanVideo's
// conv3d-vae-decoder, LTX-Video's ltx-vae-decoder, Mochi's mochi-vae-decoder): tiles of latent frames and pixels,
// each a whole decode.
bool decodes_video_in_tiles(const Architecture& architecture);
// Tiles' `frames` where none is given: every frame in each tile for a 3D video VAE, none for a 2D one.
double default_tile_frames(const Architecture& architecture);

// The tiles' latent extents along one side of `extent` latent pixels or frames, as ComfyUI places them
// (a start every tile - overlap from 0 while short of extent - overlap; the last tile shorter where the
// extent ends within it), each extent with how many tiles have it; one of the whole extent where a tile
// covers it.
std::vector<std::pair<double, double>> tile_extents(double extent, double tile, double overlap);

// The most bytes one decoder call of a video VAE that decodes in 3D tiles (decodes_video_in_tiles) holds at once
// for `shape` (an estimate: a level's block input, its normalized copy, the padded copy a 3x3x3 convolution makes
// and its output, at the widest of the level's channels, the largest level's; Mochi's upsamplings' Conv1x1 output
// and its rearranged copy too, LTX-Video's depth-to-space ones; for Wan's, which decodes a latent frame a call, the
// largest call's and the video so far, twice): one sample's whole clip, or its largest tile. 0 for other families.
double video_decode_peak_bytes(const Architecture& architecture, const StepShape& shape, Dtype dtype);

// The shape the catalog lists an architecture's profile at: one 1024x1024 image (an upscaler's input
// 512x512), 512 text tokens, an LLM's 2048-token prompt; the architecture's default runtime.
StepShape reference_shape(const Architecture& architecture);

// What one sequence-parallel step exchanges (DeepSpeed-Ulysses, as xDiT's USP and yunchang run it): each
// attention layer moves its queries, keys and values to head shards and its output back, four
// all-to-alls over each Ulysses group, each rank's buffer its share of the tokens times the hidden size.
struct SequenceExchange {
  double calls = 0;  // all-to-alls (ring attention: sends) per step
  double bytes = 0;  // each rank's buffers, summed over the calls
};
SequenceExchange sequence_exchange(const Architecture& architecture, const StepShape& shape, Dtype dtype);
// What one ring-attention step passes (xDiT's ring attention): each self-attention layer sends its block of
// keys and values to the next GPU of its ring r - 1 times, each send its share of the tokens (of the
// whole sequence-parallel gang's) times 2 x hidden: after Ulysses' exchange a GPU holds 1/r of the
// tokens and 1/u of the heads, u x r the gang.
SequenceExchange ring_exchange(const Architecture& architecture, const StepShape& shape, Dtype dtype);
// What a guidance-parallel step gathers: the denoiser's output for the whole batch, in `dtype` (one
// all-gather over the gang per step).
double guidance_exchange_bytes(const Architecture& architecture, const StepShape& shape, Dtype dtype);

// A PipeFusion step (StepShape::pipeline_stages above 1), as xDiT splits and runs it.
struct PipelineStage {
  double doubles = 0, singles = 0;  // the first stage's blocks: ceil(blocks / stages), the double ones first
  double blocks = 0;                // the model's
  double share() const { return (doubles + singles) / blocks; }
};
// The first stage's blocks (xDiT's _split_transformer_blocks gives each stage but the last ceil(blocks /
// stages) consecutive blocks, the double-stream ones first): the most of any stage, the heaviest, and the
// embeddings besides. step_kernels of a pipelined shape are this stage's, one GPU's.
PipelineStage first_pipeline_stage(const Architecture& architecture, const StepShape& shape);
// The wall time of a PipeFusion run of `steps` steps from one GPU's steps (the first stage's, the pipeline's
// slowest): `patched_step_s` of its bands' kernels at their `patches`, `whole_step_s` of its kernels on the
// whole image (patches 1). Its first pipeline_warmup steps pass the whole image through the stages one at a
// time, each stage timed as the first per block; the rest take max(patches, stages) bands' times a step (fewer
// bands than stages leave stage 0 waiting for its first band to come round the ring), and the last step's last
// band leaves min(patches, stages) - 1 bands' times after its first: the pipeline's fill and drain, once a run.
double pipefusion_run_s(const Architecture& architecture, const StepShape& shape, double steps, double patched_step_s, double whole_step_s);
// What one GPU of a PipeFusion step sends the next stage: each band's hidden states as it leaves the
// stage and the text's once a step (`patches` + 1 sends, the batch's every token times the hidden size in
// `dtype`). A warm-up step sends the same bytes at once, the whole image and the text, at each of its
// stages - 1 hand-overs.
struct PipelineExchange {
  double calls = 0, bytes = 0;  // a patched step's
};
PipelineExchange pipeline_exchange(const Architecture& architecture, const StepShape& shape, Dtype dtype);
// The keys and values of every image token each GPU of a PipeFusion step keeps for its stage's attention
// layers (xDiT's cache manager), in `dtype`.
double pipeline_buffer_bytes(const Architecture& architecture, const StepShape& shape, Dtype dtype);

// Multi-head latent attention (DeepSeek-V2 section 2.1, DeepSeek-V3): a token caches one latent of
// `kv_rank` plus a rotary key of `rope` a layer, shared by every head; queries (through a latent of
// `q_rank`; 0: projected directly) and keys are `nope` + `rope` wide a head, values `v`. Engines (vLLM's
// MLA backends, SGLang) run a prompt as multi-head attention over keys and values up-projected from the
// latent, and a decode step absorbed: each head's query projected into the latent, one multi-query
// attention over the cached latents (FlashMLA), and the result projected out per head.
struct LatentAttention {
  double q_rank = 0, kv_rank = 0, nope = 0, rope = 0, v = 0;
  // None for an architecture without `kv_lora_rank`.
  static std::optional<LatentAttention> of(const Architecture& architecture);
  double qk() const { return nope + rope; }          // a query's or key's head dimension
  double cached() const { return kv_rank + rope; }   // elements a token caches a layer
  // The weights of a layer's attention for `heads` heads of a `hidden`-wide model: the down- and
  // up-projections of queries and latent, and the output.
  double parameters(double hidden, double heads) const;
  // Of them, the down-projections every TP rank holds whole (vLLM's ReplicatedLinear).
  double replicated_parameters(double hidden) const;
};

// Experts a batch of `tokens` reaches when each token goes to `top_k` of `experts` at random, as a
// router spreads them on average: experts x (1 - (1 - top_k / experts)^tokens). Each expert reached reads
// its weights once.
double experts_touched(double experts, double top_k, double tokens);

// The kernels of one forward step in `dtype`, in launch order: the model's GEMMs, convolutions and
// attentions, and its small operations as the shape's runtime runs them.
std::vector<KernelCall> step_kernels(const Architecture& architecture, const StepShape& shape, Dtype dtype);

// One step on a GPU: its kernels back to back, launched by a host that spends `eager_dispatch_us`
// (models/kernels.json) on each under an eager runtime and runs ahead of the GPU, which waits where
// the host falls behind (short kernels); compiled steps launch from a graph.
struct StepEstimate {
  std::vector<KernelCall> calls;
  std::vector<KernelEstimate> kernels;  // one per call
  double time_s = 0;
  double compute_bound_s = 0, memory_bound_s = 0;  // kernels' time beyond their fixed costs
  double fixed_s = 0;                              // the kernels' fixed costs
  double host_wait_s = 0;                          // the GPU idle, waiting for launches
};
StepEstimate estimate_step(const Architecture& architecture, const StepShape& shape, const KernelModel& model, Dtype dtype);

// FLOP of the calls (2 m n k per GEMM, 4 m n k per attention head, less the causal half) and the
// bytes the memory-bound ones move: for reports and utilisation.
double kernels_flop(const std::vector<KernelCall>& calls);
double kernels_bytes(const std::vector<KernelCall>& calls, Dtype dtype);

}  // namespace fleetsim
