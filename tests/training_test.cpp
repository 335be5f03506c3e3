// The transformer training template against the published formulas (Narayanan et al. SC21 for
// parameters and FLOP, Korthikanti et al. MLSys 2023 for activation memory), and the pipeline played
// event by event against the closed form of its bubble.
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "fleetsim/catalog.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/training.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

// GPT-3 175B as Narayanan et al. train it (their table 1, 1024 A100s).
TrainingJob gpt3(int tp = 8, int pp = 8, int dp = 16) {
  return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-a100-8", "count": 128}]},
      "model": {"layers": 96, "hidden": 12288, "heads": 96, "vocab": 51200, "seq_len": 2048},
      "parallel": {"tp": )" + std::to_string(tp) + R"(, "pp": )" + std::to_string(pp) + R"(, "dp": )" + std::to_string(dp) + R"(},
      "batch": {"global": 1536, "micro": 1}, "recompute": "full"})",
                            "gpt3.json");
}

// A small model on one H100 node, vocabulary 1 so that every stage does the same work.
TrainingJob small(int pp, int global, PipelineSchedule schedule) {
  TrainingJob job = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 16, "hidden": 2048, "heads": 16, "vocab": 1, "seq_len": 2048},
      "parallel": {"pp": 4}, "batch": {"global": 16, "micro": 1}, "compute_efficiency": 0.5})",
                                       "small.json");
  job.pp = pp;
  job.global_batch = global;
  job.schedule = schedule;
  return job;
}

std::string job_error(const std::string& json) {
  try {
    parse_training_job(json, "job.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a job timed on kernel constants that are a guess for its GPU says why", "[training]") {
  for (const char* node : {"hgx-h20-8", "hgx-h100-8"}) {
    const TrainingJob job = parse_training_job(R"({"cluster": {"nodes": [{"type": ")" + std::string(node) + R"(", "count": 1}]},
        "model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 1000, "seq_len": 1024}, "parallel": {"dp": 8}, "batch": {"global": 8, "micro": 1}})",
                                               "j.json");
    std::ostringstream text;
    write_training_text(text, job, simulate_training_step(job));
    INFO(node);
    const bool h20 = std::string(node) == "hgx-h20-8";
    CHECK((text.str().find("constants a guess for this GPU, why below)\n  borrowed: h20 (hopper): Hopper's constants were fitted on h100-sxm") != std::string::npos) == h20);
    CHECK((text.str().find("constants measured for this GPU's architecture)\n\n") != std::string::npos) == !h20);
  }
}

TEST_CASE("parameters and FLOP match Narayanan et al.'s formulas", "[training]") {
  const TrainingJob job = gpt3();
  const TrainingCounts c = count_training(job);
  const double l = 96, h = 12288, s = 2048, V = 51200, B = 1536;
  // P = 12 l h^2 (1 + 13 / 12h + (V + s) / 12lh), plus the final layer norm's 2h.
  CHECK(c.parameters == Approx(12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h)) + 2 * h).epsilon(1e-12));
  CHECK(c.parameters / 1e9 == Approx(174.6).epsilon(0.001));
  // With full recomputation: F = 96 B s l h^2 (1 + s / 6h + V / 16lh).
  CHECK(c.hardware_flop == Approx(96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))).epsilon(1e-12));
  // Without it, the model's own FLOP: 72 B s l h^2 (1 + s / 6h + V / 12lh).
  CHECK(c.model_flop == Approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))).epsilon(1e-12));
}

TEST_CASE("activation memory matches Korthikanti et al.'s table for each recomputation mode", "[training]") {
  TrainingJob job = gpt3();
  const double sbh = 2048.0 * 1 * 12288;
  job.recompute = Recompute::none;
  job.attention = AttentionKernel::unfused;  // the table's attention: the scores kept
  CHECK(count_training(job).activation_bytes_per_layer == Approx(23 * sbh));  // 10 + 24/8 + 5as/(ht) = 13 + 10
  job.sequence_parallel = true;
  CHECK(count_training(job).activation_bytes_per_layer == Approx(14.25 * sbh));  // (34 + 80) / 8
  // FlashAttention keeps no scores, only an fp32 log-sum-exp per head and token: 34 + 4a/h, over 8.
  job.attention = AttentionKernel::flash;
  CHECK(count_training(job).activation_bytes_per_layer == Approx((34 + 4.0 * 96 / 12288) / 8 * sbh));
  job.recompute = Recompute::selective;
  CHECK(count_training(job).activation_bytes_per_layer == Approx(4.25 * sbh));  // 34 / 8
  job.recompute = Recompute::full;
  CHECK(count_training(job).activation_bytes_per_layer == Approx(0.25 * sbh));  // 2 / 8
}

TEST_CASE("memory per GPU: 16 bytes per parameter and the micro-batches each stage holds", "[training]") {
  TrainingJob job = gpt3();
  job.recompute = Recompute::selective;
  job.sequence_parallel = true;
  const TrainingCounts c = count_training(job);
  const double per_layer = c.activation_bytes_per_layer;
  // Stage 1 holds 12 layers' parameters over 8 TP ranks.
  const double params = 12 * job.model.layer_parameters() / 8;
  CHECK(c.stage_parameters[1] == Approx(params));
  CHECK(c.stage_memory[1].weights + c.stage_memory[1].gradients + c.stage_memory[1].optimizer == Approx(16 * params));
  CHECK(c.dp_allreduce_bytes[1] == Approx(2 * params));
  // 1F1B: stage k holds p - k micro-batches, so stage 0 holds all 96 layers' worth (p x l / p).
  CHECK(c.stage_memory[0].activations == Approx(96 * per_layer));
  CHECK(c.stage_memory[7].activations == Approx(12 * per_layer));
  // GPipe holds every micro-batch: 1536 / 16 = 96 of them.
  job.schedule = PipelineSchedule::gpipe;
  CHECK(count_training(job).stage_memory[7].activations == Approx(96 * 12 * per_layer));
  // A distributed optimizer shards the 12 bytes over DP.
  job.distributed_optimizer = true;
  CHECK(count_training(job).stage_memory[1].optimizer == Approx(12 * params / 16));
  // TP all-reduces: 2 forward, 2 backward, 2 more when whole layers are recomputed.
  job.recompute = Recompute::full;
  CHECK(count_training(job).tp_allreduces_per_layer == 6);
  CHECK(count_training(job).tp_allreduce_bytes == Approx(2 * 2048.0 * 12288));  // b s h in 16 bits
}

TEST_CASE("the pipeline played event by event has the closed-form bubble", "[training]") {
  for (int m : {4, 16, 64}) {
    const TrainingStep gpipe = simulate_training_step(small(4, m, PipelineSchedule::gpipe));
    const double f = gpipe.forward_s, b = gpipe.backward_s, d = gpipe.pp_send_s, p = 4;
    REQUIRE(d > 0);
    // GPipe: (m + p - 1) passes' time, plus a send each way across the p - 1 boundaries, and each
    // stage idle for (p - 1) / (m + p - 1) of it (to the sends).
    CHECK(gpipe.iteration_s == Approx((m + p - 1) * (f + b) + 2 * (p - 1) * d).epsilon(1e-3));
    CHECK(gpipe.bubble == Approx((p - 1) / (m + p - 1)).epsilon(0.05));
    CHECK(gpipe.ops.size() == static_cast<std::size_t>(2 * 4 * m));
    // 1F1B has the same bubble in passes; in its steady state a stage's next backward waits for a
    // round trip through the later stages, so the sends cost it a little more than GPipe.
    const TrainingStep one_f_one_b = simulate_training_step(small(4, m, PipelineSchedule::one_f_one_b));
    CHECK(one_f_one_b.iteration_s >= gpipe.iteration_s * (1 - 1e-9));
    CHECK(one_f_one_b.iteration_s <= gpipe.iteration_s * 1.02);
  }
  // More micro-batches, a smaller bubble.
  CHECK(simulate_training_step(small(4, 64, PipelineSchedule::one_f_one_b)).bubble <
        simulate_training_step(small(4, 16, PipelineSchedule::one_f_one_b)).bubble);
  CHECK(simulate_training_step(small(4, 16, PipelineSchedule::one_f_one_b)).bubble <
        simulate_training_step(small(4, 4, PipelineSchedule::one_f_one_b)).bubble);
}

TEST_CASE("every pass waits for its input and its stage", "[training]") {
  const TrainingStep step = simulate_training_step(small(4, 8, PipelineSchedule::one_f_one_b));
  std::map<std::tuple<int, int, bool>, PipelineOp> by_key;
  for (const PipelineOp& op : step.ops) by_key[{op.stage, op.micro_batch, op.backward}] = op;
  for (const PipelineOp& op : step.ops) {
    if (!op.backward && op.stage > 0) CHECK(op.start_s >= by_key[{op.stage - 1, op.micro_batch, false}].end_s + step.pp_send_s - 1e-12);
    if (op.backward && op.stage < 3) CHECK(op.start_s >= by_key[{op.stage + 1, op.micro_batch, true}].end_s + step.pp_send_s - 1e-12);
    if (op.backward && op.stage == 3) CHECK(op.start_s >= by_key[{3, op.micro_batch, false}].end_s);
  }
  // 1F1B on the first stage: 3 forwards to warm up, then one forward, one backward.
  std::vector<bool> first;
  for (const PipelineOp& op : step.ops) {
    if (op.stage == 0) first.push_back(op.backward);
  }
  CHECK(first == std::vector<bool>{false, false, false, false, true, false, true, false, true, false, true, false, true, true, true, true});
}

TEST_CASE("interleaved 1F1B: the bubble shrinks to (p - 1) / (v m) of the passes, the first stage holds p + (p - 1) / v micro-batches", "[training]") {
  // Narayanan et al. (SC21), section 2.2.2: with v model chunks a GPU, the pipeline's idle time is
  // (p - 1) / v passes of a micro-batch's forward and backward, against m of them of work. Every stage does
  // the same work (vocabulary 1); the sends (a few microseconds against milliseconds of passes) are the rest.
  const double p = 4;
  for (int m : {8, 16}) {
    for (int v : {1, 2, 4}) {
      TrainingJob job = small(4, m, PipelineSchedule::one_f_one_b);
      job.vp = v;
      const TrainingStep step = simulate_training_step(job);
      const double f = step.forward_s, b = step.backward_s, d = step.pp_send_s;
      const double pipeline = *std::max_element(step.stage_end_s.begin(), step.stage_end_s.end());
      const double passes = m * (f + b) * (1 + (p - 1) / (v * m));
      if (v == 1) {
        // Plain 1F1B: in its steady state a stage's next backward waits for a round trip through the later
        // stages, so sends add up along the micro-batches (the GPipe comparison above bounds them).
        CHECK(pipeline >= passes - 1e-9);
        CHECK(pipeline <= passes + 2 * (m + p) * d);
      } else {
        // Interleaved, the critical path crosses a stage boundary 2 (p v - 1) times: once each way per chunk.
        CHECK(pipeline == Approx(passes + 2 * (p * v - 1) * d).epsilon(1e-5));
      }
      CHECK(step.ops.size() == static_cast<std::size_t>(2 * 4 * m * v));
      // Each forward of a chunk after the first waits for the chunk before it (on the previous GPU), each
      // backward for the chunk after it.
      std::map<std::tuple<int, int, bool>, PipelineOp> by_chunk;  // (virtual stage, micro-batch, backward)
      for (const PipelineOp& op : step.ops) by_chunk[{op.chunk * 4 + op.stage, op.micro_batch, op.backward}] = op;
      for (const auto& [key, op] : by_chunk) {
        const auto [k, i, backward] = key;
        if (!backward && k > 0) CHECK(op.start_s >= by_chunk[{k - 1, i, false}].end_s + d - 1e-12);
        if (backward && k < 4 * v - 1) CHECK(op.start_s >= by_chunk[{k + 1, i, true}].end_s + d - 1e-12);
        if (backward && k == 4 * v - 1) CHECK(op.start_s >= by_chunk[{k, i, false}].end_s);
      }
      // Activation memory of the first stage: p micro-batches of its layers under 1F1B, p + (p - 1) / v
      // interleaved (Korthikanti et al., MLSys 2023).
      const TrainingCounts c = count_training(job);
      const double held = v == 1 ? p : p + (p - 1) / v;
      CHECK(c.stage_memory[0].activations == Approx(held * 4 * c.activation_bytes_per_layer).epsilon(1e-12));
    }
  }
  // Megatron-LM's order on the first GPU at p 4, v 2, m 8: 10 warm-up forwards (2 (p - 1) + (v - 1) p), chunk 0
  // of micro-batches 0-3, then chunk 1 of 0-3, then chunk 0 of 4 and 5 before the first backward (chunk 1 of 0).
  TrainingJob job = small(4, 8, PipelineSchedule::one_f_one_b);
  job.vp = 2;
  std::vector<std::tuple<int, int, bool>> first;  // (chunk, micro-batch, backward)
  for (const PipelineOp& op : simulate_training_step(job).ops) {
    if (op.stage == 0 && first.size() < 12) first.emplace_back(op.chunk, op.micro_batch, op.backward);
  }
  CHECK(first == std::vector<std::tuple<int, int, bool>>{{0, 0, false}, {0, 1, false}, {0, 2, false}, {0, 3, false}, {1, 0, false}, {1, 1, false},
                                                         {1, 2, false}, {1, 3, false}, {0, 4, false}, {0, 5, false}, {0, 6, false}, {1, 0, true}});
}

TEST_CASE("interleaved 1F1B in groups of micro-batches and an uneven layout of virtual stages, by hand", "[training][layout]") {
  // Megatron-Core's schedule table for PP 2, VP 2, 5 micro-batches in groups of 3 (its own comment in
  // schedules.py): micro-batches 0 1 2 0 1 2 3 4 3 4, chunks 0 0 0 1 1 1 0 0 1 1. Forwards on each GPU run in
  // that order, the backwards too with the chunks reversed.
  TrainingJob job = small(2, 5, PipelineSchedule::one_f_one_b);
  job.vp = 2;
  job.microbatch_group = 3;
  check_training_job(job);
  const TrainingStep step = simulate_training_step(job);
  CHECK(step.ops.size() == 2u * 2 * 5 * 2);
  for (int stage : {0, 1}) {
    std::vector<std::pair<int, int>> forwards, backwards;  // (micro-batch, chunk)
    for (const PipelineOp& op : step.ops) {
      if (op.stage == stage) (op.backward ? backwards : forwards).emplace_back(op.micro_batch, op.chunk);
    }
    const std::vector<std::pair<int, int>> table{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
    CHECK(forwards == table);
    std::vector<std::pair<int, int>> reversed = table;
    for (auto& [i, chunk] : reversed) chunk = 1 - chunk;
    CHECK(backwards == reversed);
  }
  // Groups as Megatron-Core refuses them: below pp, above the micro-batches, a last group of 1 < pp; none without VP.
  for (const auto& [group, message] : std::vector<std::pair<int, std::string>>{
           {1, "expected pp (2) to the 5 micro-batches, found 1"}, {6, "expected pp (2) to the 5 micro-batches, found 6"}, {4, "expected the last group (5 mod 4 = 1 micro-batches) empty or at least pp (2)"}}) {
    job.microbatch_group = group;
    CHECK_THROWS_WITH(check_training_job(job), Catch::Contains("/parallel/microbatch_group: " + message));
  }
  job.vp = 1;
  job.microbatch_group = 2;
  CHECK_THROWS_WITH(check_training_job(job), Catch::Contains("expected microbatch_group only with virtual stages"));

  // A layout: 16 layers as 2, 6 | 6, 2 over PP 2 x VP 2 (GPU 0 holds virtual stages 0 and 2, GPU 1 1 and 3).
  TrainingJob uneven = small(2, 4, PipelineSchedule::one_f_one_b);
  uneven.vp = 2;
  uneven.virtual_stage_layers = {2, 6, 6, 2};
  check_training_job(uneven);
  CHECK(uneven.stage_layers() == std::vector<int>{8, 8});
  // Activations at the most a GPU's order holds. GPU 0: 2 (p - 1) + (v - 1) p = 4 warm-up forwards (chunks 0, 0, 1,
  // 1: 2 + 2 + 6 + 6) and a fifth (chunk 0 of micro-batch 2) before its first backward frees anything: 18 layers.
  // GPU 1: 2 warm-up forwards of chunk 0 (6 + 6), then forward and backward in turn: chunk 1 (+2, -2), chunk 1
  // (+2, -2), then chunk 0 of micro-batch 2 (+6) before a chunk 0 backward: 18 again, not the 14 of its warm-up.
  const TrainingCounts c = count_training(uneven);
  CHECK(c.stage_memory[0].activations == Approx(18 * c.activation_bytes_per_layer).epsilon(1e-12));
  CHECK(c.stage_memory[1].activations == Approx(18 * c.activation_bytes_per_layer).epsilon(1e-12));
  // Each chunk's passes take its layers' time (vocabulary 1: the head costs nothing): a 6-layer chunk three
  // times a 2-layer one.
  const TrainingStep played = simulate_training_step(uneven);
  std::map<int, double> pass_s;  // virtual stage -> a forward's duration
  for (const PipelineOp& op : played.ops) {
    if (!op.backward) pass_s[op.chunk * 2 + op.stage] = op.end_s - op.start_s;
  }
  CHECK(pass_s[1] == Approx(3 * pass_s[0]).epsilon(0.02));
  CHECK(pass_s[2] == Approx(pass_s[1]).epsilon(0.02));
  std::ostringstream text;
  write_training_text(text, uneven, played);
  CHECK_THAT(text.str(), Catch::Contains("PP 2 (virtual stages of 2, 2 x 6, 2 layers)"));

  const std::string head = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 16, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 2048}, "batch": {"global": 8}, "parallel": {"pp": 2, "vp": 2, )";
  CHECK_THAT(job_error(head + R"("virtual_stage_layers": [2, 6, 8]}})"), Catch::Contains("/parallel/virtual_stage_layers: expected pp x vp (4) entries, one a virtual stage, found 3"));
  CHECK_THAT(job_error(head + R"("virtual_stage_layers": [2, 6, 6, 1]}})"), Catch::Contains("/parallel/virtual_stage_layers: expected the 16 layers in all, found 15"));
  CHECK_THAT(job_error(head + R"("virtual_stage_layers": [2, -6, 6, 2]}})"), Catch::Contains("/parallel/virtual_stage_layers/1: expected a count of layers, 0 to 16, found the number -6"));
  CHECK_THAT(job_error(head + R"("virtual_stage_layers": "2, 6"}})"), Catch::Contains("/parallel/virtual_stage_layers: expected an array of layer counts"));
  CHECK_THAT(job_error(head + R"("virtual_stage_layers": [2, 6, 6, 2], "first_stage_layers": 8}})"), Catch::Contains("not both"));
  CHECK(job_error(head + R"("virtual_stage_layers": [0, 7, 8, 1]}})") == "");  // an empty chunk, as Megatron-Core's layouts allow
  // and its passes timed kernel by kernel: the empty chunk only the embedding's.
  const TrainingStep empty = simulate_training_step(parse_training_job(head + R"("virtual_stage_layers": [0, 7, 8, 1]}})", "empty.json"));
  CHECK(empty.iteration_s > 0);
  CHECK(empty.ops.size() == 2u * 4 * 8);

  // The search keeps the job's layout where its shape is the job's (PP 2, VP 2), and times it as played alone.
  TrainingJob base = uneven;
  base.global_batch = 16;
  const TrainingSearch search = search_training(base, 1);
  const auto own = std::find_if(search.ranked.begin(), search.ranked.end(), [](const TrainingCandidate& candidate) { return !candidate.job.virtual_stage_layers.empty(); });
  REQUIRE(own != search.ranked.end());
  CHECK(own->job.pp == 2);
  CHECK(own->job.vp == 2);
  CHECK(own->job.virtual_stage_layers == uneven.virtual_stage_layers);
  CHECK(own->step.iteration_s == simulate_training_step(own->job).iteration_s);
}

TEST_CASE("DualPipe: both directions' passes, its README's bubble (PP/2 - 1)(F&B + B - 3W) and PP + 1 stages of activations", "[training][dualpipe]") {
  // Every stage alike (vocabulary 1) at a given efficiency: B = 2F, W = F (the weight gradients' FLOP are the
  // forward's), and with no all-to-all to hide a pair takes F&B = F + B. deepseek-ai/DualPipe's README: bubble
  // (PP/2 - 1)(F&B + B - 3W) = (PP/2 - 1) 2F, against 1F1B's (PP - 1)(F + B); each GPU works m(F + B), half the
  // micro-batches through each of its two stages.
  for (int p : {4, 8}) {
    for (int m : {2 * p, 40}) {
      TrainingJob job = small(p, m, PipelineSchedule::dualpipe);
      check_training_job(job);
      const TrainingStep step = simulate_training_step(job);
      const double d = step.pp_send_s;
      // One micro-batch through a stage, from the 1F1B job's passes (the same stages).
      const TrainingStep plain = simulate_training_step(small(p, m, PipelineSchedule::one_f_one_b));
      const double f = plain.forward_s, b = plain.backward_s;
      REQUIRE(b == Approx(2 * f).epsilon(1e-9));
      const double pipeline = *std::max_element(step.stage_end_s.begin(), step.stage_end_s.end());
      const double expected = m * (f + b) + (p / 2 - 1) * (f + b + b - 3 * f);
      CHECK(pipeline >= expected - 1e-9);
      INFO("p " << p << ", m " << m << ": pipeline " << pipeline << ", expected " << expected << ", F " << f << ", send " << d);
      // As in 1F1B's steady state, a pass waits on a round trip through other GPUs: the sends add up along the micro-batches.
      CHECK(pipeline <= expected + 2 * (m + p) * d);
      // Each GPU: m / 2 forwards and backwards of each direction, and as many weight passes as input-only backwards.
      for (int gpu = 0; gpu < p; ++gpu) {
        std::map<std::pair<int, bool>, int> passes;  // (direction, backward) -> count
        int weights = 0;
        for (const PipelineOp& op : step.ops) {
          if (op.stage != gpu) continue;
          if (op.weight) ++weights;
          else ++passes[{op.chunk, op.backward}];
        }
        CHECK(passes == std::map<std::pair<int, bool>, int>{{{0, false}, m / 2}, {{0, true}, m / 2}, {{1, false}, m / 2}, {{1, true}, m / 2}});
        CHECK(weights == p - 1 - std::min(gpu, p - 1 - gpu));  // steps 3, 7 and 8 of DualPipe.step
      }
      // Each GPU holds two stages' weights, and at its peak pp + 1 stages' activations of a micro-batch (the README).
      const TrainingCounts c = count_training(job), one = count_training(small(p, m, PipelineSchedule::one_f_one_b));
      CHECK(c.stage_parameters[1] == Approx(2 * one.stage_parameters[1]).epsilon(1e-12));
      CHECK(c.stage_memory[1].activations == Approx((p + 1) * (16 / p) * c.activation_bytes_per_layer).epsilon(1e-12));
      // GPUs r and p - 1 - r hold the same two stages and sum their gradients, even without DP.
      CHECK(plain.dp_allreduce_s == 0);
      CHECK(step.dp_allreduce_s > 0);
    }
  }
  // Its own asserts: an even pp, at least 2 pp micro-batches, an even number of them; no virtual stages; its pairs, not ep_overlap's.
  TrainingJob job = small(4, 16, PipelineSchedule::dualpipe);
  job.pp = 2;
  job.global_batch = 3;
  CHECK_THROWS_WITH(check_training_job(job), Catch::Contains("/batch/global: expected an even number of micro-batches, at least 2 x pp (4), with dualpipe, found 3"));
  job.pp = 1;
  job.global_batch = 16;
  CHECK_THROWS_WITH(check_training_job(job), Catch::Contains("/parallel/pp: expected an even number of pipeline stages with dualpipe, found 1"));
  job.pp = 4;
  job.vp = 2;
  CHECK_THROWS_WITH(check_training_job(job), Catch::Contains("/parallel/vp: expected no virtual stages with dualpipe"));
}

TEST_CASE("virtual stages that cannot run as Megatron runs them are refused with the field", "[training]") {
  const std::string base = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 16, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 2048}, )";
  CHECK_THAT(job_error(base + R"("parallel": {"vp": 2}, "batch": {"global": 8}})"), Catch::Contains("/parallel/vp: expected virtual stages only with pipeline stages"));
  CHECK_THAT(job_error(base + R"("parallel": {"pp": 4, "vp": 3}, "batch": {"global": 8}})"), Catch::Contains("/parallel/vp: expected pp x vp (12) to divide the 16 layers"));
  CHECK_THAT(job_error(base + R"("parallel": {"pp": 4, "vp": 2}, "batch": {"global": 6}})"),
             Catch::Contains("/batch/global: expected micro-batches a multiple of pp (4) with virtual stages, found 6"));
  CHECK_THAT(job_error(base + R"("parallel": {"pp": 4, "vp": 2}, "batch": {"global": 8}, "schedule": "gpipe"})"),
             Catch::Contains("/schedule: expected 1f1b with virtual stages"));
}

TEST_CASE("context parallelism: a GPU's share of the sequence, ring attention's blocks and passes counted by hand", "[training]") {
  // Llama 3 8B at 128k tokens, TP 8 inside a node, CP 4 across four nodes (Megatron's order: CP after TP).
  auto job = [](int cp, const std::string& nic, const std::string& recompute) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 4, "node_overrides": {"nic": ")" + nic + R"("}}]},
        "model": {"architecture": "llama-3-8b", "seq_len": 131072}, "parallel": {"tp": 8, "cp": )" + std::to_string(cp) +
                                  R"(, "sequence_parallel": true}, "batch": {"global": 4}, "recompute": ")" + recompute + R"("})",
                              "cp.json");
  };
  const TrainingJob cp4 = job(4, "ib-ndr", "full");
  CHECK(cp4.gpus() == 32);
  CHECK(cp4.local_tokens() == 32768);
  const TrainingCounts c = count_training(cp4);
  // One ring step passes a GPU's keys and values: 2 tensors x 2 bytes x 32,768 tokens x (8 KV heads / TP 8) x 128.
  CHECK(c.cp_send_bytes == 2.0 * 2 * 32768 * 1 * 128);
  // Activations (full recomputation: each layer's input, 2 s b h / t bytes) are a GPU's share of the sequence.
  CHECK(c.activation_bytes_per_layer == Approx(count_training(job(1, "ib-ndr", "full")).activation_bytes_per_layer / 4).epsilon(1e-12));
  // Attention per layer: the GPU's own causal block of 32,768 queries and keys, then 3 blocks of 16,384 keys
  // (the load-balanced causal mask keeps half of each other rank's pair of chunks).
  const KernelModel model(*Catalog::builtin().gpu("h100-sxm"));
  const double heads = 32.0 / 8, d = 128;
  const KernelCall own{.cls = KernelClass::attention, .m = 32768, .n = 32768, .k = d, .batch = heads, .causal = true};
  const KernelCall ring{.cls = KernelClass::attention, .m = 32768, .n = 16384, .k = d, .batch = heads};
  const TrainingStep step = simulate_training_step(cp4);
  CHECK(step.forward_kernels.attention_s == Approx(32 * (model.estimate(own, Dtype::bf16).time_s() + 3 * model.estimate(ring, Dtype::bf16).time_s())).epsilon(1e-9));
  // On NDR the sends hide behind the blocks; on 25 GbE they do not, and each of the 3 steps a layer adds what
  // its send takes beyond its block, twice the bytes in the backward, whose full recomputation runs the
  // forward's ring again first.
  CHECK(step.cp_comm_s == 0);
  const TrainingStep slow = simulate_training_step(job(4, "eth-25g", "full"));
  KernelCall ring_backward = ring;
  ring_backward.backward = true;
  const double exposed = 3 * (2 * std::max(0.0, slow.cp_send_s - model.estimate(ring, Dtype::bf16).time_s()) +
                              std::max(0.0, 2 * slow.cp_send_s - model.estimate(ring_backward, Dtype::bf16).time_s()));
  CHECK(exposed > 0);
  CHECK(slow.cp_comm_s == Approx(32 * exposed).epsilon(1e-9));
  CHECK(slow.iteration_s > step.iteration_s);
  // The gradients are reduced over DP x CP: four replicas of the weights here, with DP 1.
  CHECK(step.dp_allreduce_s > 0);
  CHECK(simulate_training_step(job(1, "ib-ndr", "full")).dp_allreduce_s == 0);
}

TEST_CASE("context parallelism that Megatron-Core cannot run is refused with the field", "[training]") {
  const std::string base = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 2050}, "batch": {"global": 8}, )";
  CHECK_THAT(job_error(base + R"("parallel": {"cp": 4}})"), Catch::Contains("/parallel/cp: expected 2 x cp (8) to divide the sequence of 2050 tokens"));
  const std::string even = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 8, "seq_len": 2048}, "batch": {"global": 8}, )";
  CHECK_THAT(job_error(even + R"("parallel": {"cp": 2}, "attention": "unfused"})"), Catch::Contains("/attention: expected flash attention with context parallelism"));
  CHECK_THAT(job_error(even + R"("parallel": {"cp": 2, "dp": 2, "zero": 3}})"), Catch::Contains("/parallel/zero: expected ZeRO 0 to 2 with context parallelism"));
  CHECK_THAT(job_error(even + R"("parallel": {"cp": 16}})"), Catch::Contains("/parallel: tp x cp x pp x dp = 16 GPUs, more than the cluster's 8"));
}

TEST_CASE("data parallelism scales sub-linearly: the gradient all-reduce costs more across nodes", "[training]") {
  auto at = [](int dp) {
    TrainingJob job = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 8}]},
        "model": {"layers": 32, "hidden": 4096, "heads": 32, "vocab": 51200, "seq_len": 2048},
        "parallel": {"dp": 1}, "batch": {"global": 8, "micro": 1}, "recompute": "full"})",
                                         "dp.json");
    job.dp = dp;
    job.global_batch = 8 * dp;
    return simulate_training_step(job);
  };
  const TrainingStep one = at(1), eight = at(8), sixty_four = at(64);
  CHECK(one.dp_allreduce_s == 0);
  CHECK(eight.dp_allreduce_s > 0);
  CHECK(sixty_four.dp_allreduce_s > eight.dp_allreduce_s);  // NICs instead of NVLink
  const double speedup_8 = eight.tokens_per_s / one.tokens_per_s, speedup_64 = sixty_four.tokens_per_s / one.tokens_per_s;
  CHECK(speedup_8 < 8);
  CHECK(speedup_64 < 64);
  CHECK(speedup_64 / 64 < speedup_8 / 8);
  CHECK(speedup_64 > 8);  // still faster than one node
}

TEST_CASE("malformed training jobs are refused with the field named", "[training]") {
  const std::string cluster = R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "batch": {"global": 8})";
  const std::string model = R"("model": {"layers": 30, "hidden": 4096, "heads": 32, "vocab": 51200, "seq_len": 2048})";
  CHECK(job_error("{" + cluster + ", " + model + R"(, "parallel": {"tp": 2, "pp": 3}})").empty());
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {"pp": 4}})"), Catch::Contains("job.json: /parallel/pp: expected a divisor of the 30 layers"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {"tp": 3}})"), Catch::Contains("/parallel/tp: expected a divisor of the 32 heads"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {"tp": 8, "dp": 2}})"), Catch::Contains("16 GPUs, more than the cluster's 8"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {"dp": 3}})"), Catch::Contains("/batch/global: expected a multiple of dp x micro"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {}, "schedule": "zigzag"})"), Catch::Contains("/schedule"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {}, "optimiser": "adam"})"), Catch::Contains("/optimiser"));
  CHECK_THAT(job_error("{" + cluster + R"(, "parallel": {}})"), Catch::Contains("/model"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {}, "attention": "sparse"})"), Catch::Contains("/attention"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {"dp_overlap": 1}})"), Catch::Contains("/parallel/dp_overlap"));
  CHECK_THAT(job_error("{" + cluster + ", " + model + R"(, "parallel": {}, "compute_efficiency": 0})"), Catch::Contains("/compute_efficiency"));
  // Sizes that multiply are refused before anything is allocated, with the limit.
  const std::string big = R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2048}]})";
  CHECK_THAT(job_error("{" + big + ", " + model + R"(, "parallel": {"dp": 16384}, "batch": {"global": 16384}})"),
             Catch::Contains("/parallel/dp: expected at most 8192 data-parallel replicas, found 16384"));
  CHECK_THAT(job_error("{" + big + ", " + model + R"(, "parallel": {"pp": 2}, "batch": {"global": 1048576}})"),
             Catch::Contains("/batch/global: expected at most 1048576 micro-batches x pipeline stages x virtual stages a step, found 2,097,152"));
}

namespace {

// A 4096-wide layer (Llama-2-7B's shape, GPT MLP) on H100s, one micro-batch of 2 x 2048 tokens.
TrainingJob layer_job(int tp, const std::string& extra = "") {
  return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 32, "hidden": 4096, "heads": 32, "vocab": 32000, "seq_len": 2048},
      "parallel": {"tp": )" + std::to_string(tp) + R"(}, "batch": {"global": 2, "micro": 2})" + extra + "}",
                            "layer.json");
}

}  // namespace

TEST_CASE("training passes are the kernel model's GEMMs, attention and memory-bound kernels", "[training]") {
  const TrainingJob job = layer_job(1);
  const TrainingStep step = simulate_training_step(job);
  const KernelModel model(*Catalog::builtin().gpu("h100-sxm"));
  auto gemm = [&](double m, double n, double k) { return model.estimate({.cls = KernelClass::gemm, .m = m, .n = n, .k = k}, Dtype::bf16).time_s(); };
  // Hand-listed: per layer QKV 4096 -> 12288, out 4096 -> 4096, MLP 4096 -> 16384 -> 4096, over 4096
  // tokens; the logits 4096 -> 32000 on the last (only) stage.
  const double t = 4096, layer = gemm(t, 12288, 4096) + gemm(t, 4096, 4096) + gemm(t, 16384, 4096) + gemm(t, 4096, 16384);
  CHECK(step.forward_kernels.gemm_s == Approx(32 * layer + gemm(t, 32000, 4096)).epsilon(1e-9));
  // Backward: each GEMM's data gradient (same FLOP) and weight gradient (K = the tokens).
  const double backward = gemm(t, 4096, 12288) + gemm(4096, 12288, t) + gemm(t, 4096, 4096) + gemm(4096, 4096, t) + gemm(t, 4096, 16384) +
                          gemm(4096, 16384, t) + gemm(t, 16384, 4096) + gemm(16384, 4096, t);
  CHECK(step.backward_kernels.gemm_s == Approx(32 * backward + gemm(t, 4096, 32000) + gemm(4096, 32000, t)).epsilon(1e-9));
  CHECK(step.backward_kernels.gemm_s == Approx(2 * step.forward_kernels.gemm_s).epsilon(0.15));
  // FlashAttention: 32 causal heads x 2 sequences; the backward 2.5x the FLOP of the average block (its key blocks
  // even out), at the rate models/kernels.json gives it: 64 heads of 16 query blocks in ceil(1024 / 132) waves.
  const KernelCall fa{.cls = KernelClass::attention, .m = 2048, .n = 2048, .k = 128, .batch = 64, .causal = true};
  KernelCall fa_backward = fa;
  fa_backward.backward = true;
  CHECK(step.forward_kernels.attention_s == Approx(32 * model.estimate(fa, Dtype::bf16).time_s()).epsilon(1e-9));
  CHECK(step.backward_kernels.attention_s == Approx(32 * model.estimate(fa_backward, Dtype::bf16).time_s()).epsilon(1e-9));
  const KernelEstimate f = model.estimate(fa, Dtype::bf16), b = model.estimate(fa_backward, Dtype::bf16);
  const AttentionConstants& a = model.constants().hopper.attention;
  const double per_key = 2 * 128 * (256 + 2 * a.head_overhead) / (989.4e12 / 132 * a.efficiency);
  const double average = std::ceil(1024 / 132.0) * (2048 - 1024 + 64 + a.key_overhead) * per_key;
  CHECK(b.compute_s == Approx(average * 2.5 / model.constants().attention_backward_rate_causal));
  CHECK(f.compute_s > average);  // the forward waits for its longest blocks, dispatched last
  // The pass is the kernels back to back; one stage, no TP: nothing else.
  CHECK(step.forward_s == Approx(step.forward_kernels.total()));
  CHECK(step.backward_s == Approx(step.backward_kernels.total()));
  CHECK(step.forward_kernels.memory_s > 0);
  CHECK(step.forward_kernels.memory_s < 0.2 * step.forward_s);
  // Iteration: one forward and backward, then the optimizer step over all 6.7 B parameters.
  CHECK(step.iteration_s == Approx(step.forward_s + step.backward_s + step.optimizer_s));
  CHECK(step.optimizer_s > 34 * step.counts.parameters / 3.35e12);  // 34 bytes each, no faster than HBM
}

TEST_CASE("torchtitan's eager layer: its projections one GEMM each, its small operations kernel by kernel, counted by hand", "[training][eager]") {
  // Llama 3 8B at sequence 2048 on one H100, once as Megatron-Core's layer and once as torchtitan's.
  const auto job = [](const std::string& extra) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 2048},
        "parallel": {}, "batch": {"global": 1, "micro": 1})" + extra + "}", "eager.json");
  };
  const TrainingStep megatron = simulate_training_step(job("")), eager = simulate_training_step(job(R"(, "runtime": "torchtitan", "norm": "fused_rmsnorm")"));
  const KernelModel model(*Catalog::builtin().gpu("h100-sxm"));
  const auto time = [&](const KernelCall& c) { return c.count * model.estimate(c, Dtype::bf16).time_s(); };
  const auto gemm = [&](double m, double n, double k) { return time({.cls = KernelClass::gemm, .m = m, .n = n, .k = k}); };
  const auto memory = [&](KernelClass cls, double rows, double width) { return time({.cls = cls, .m = rows, .n = width}); };
  const auto op = [&](std::string_view operation, double rows, double width) {
    double s = 0;
    for (const KernelCall& c : operation_kernels(torchtitan_profile(), operation, rows, width, Dtype::bf16)) s += time(c);
    return s;
  };
  const double t = 2048, h = 4096, q = 4096, kv = 1024, f = 14336;
  // GEMMs: wq, wk and wv one each where Megatron-Core runs one QKV; w1 and w3 one each where it runs one of 2f.
  const double megatron_gemms = gemm(t, q + 2 * kv, h) + gemm(t, h, q) + gemm(t, 2 * f, h) + gemm(t, h, f);
  const double eager_gemms = gemm(t, q, h) + 2 * gemm(t, kv, h) + gemm(t, h, q) + 2 * gemm(t, f, h) + gemm(t, h, f);
  CHECK(eager.forward_kernels.gemm_s - megatron.forward_kernels.gemm_s == Approx(32 * (eager_gemms - megatron_gemms)).epsilon(1e-6));
  CHECK(eager.forward_kernels.attention_s == megatron.forward_kernels.attention_s);  // SDPA's flash kernel either way
  // Forward: two fused norms, the rotary embeddings of q and k (fp32), K and V repeated to 32 heads, two residual
  // adds and the SwiGLU's two kernels, where Megatron-Core runs two norms, two bias-dropout-adds and one SwiGLU.
  const double megatron_forward = 2 * memory(KernelClass::norm, t, h) + 2 * memory(KernelClass::add, t, h) + memory(KernelClass::add, t, f);
  const double eager_forward = 2 * op("fused_rms_norm", t, h) + op("rope", t, q) + op("rope", t, kv) + 2 * op("repeat_kv", t, q) +
                               2 * op("residual_add", t, h) + op("swiglu", t, f);
  CHECK(eager.forward_kernels.memory_s - megatron.forward_kernels.memory_s == Approx(32 * (eager_forward - megatron_forward)).epsilon(1e-6));
  // Backward, nothing recomputed: autograd's kernels, with the gradients of tensors read more than once added.
  const double megatron_backward = 2 * memory(KernelClass::activation, t, h) + 2 * memory(KernelClass::add, t, f) + 2 * memory(KernelClass::add, t, h);
  const double eager_backward = op("swiglu_backward", t, f) + 5 * op("gradient_add", t, h) + 2 * op("fused_rms_norm_backward", t, h) +
                                2 * op("repeat_kv_backward", t, q) + op("rope_backward", t, q) + op("rope_backward", t, kv);
  CHECK(eager.backward_kernels.memory_s - megatron.backward_kernels.memory_s == Approx(32 * (eager_backward - megatron_backward)).epsilon(1e-6));
  CHECK(eager.iteration_s > megatron.iteration_s);
  // The composite RMSNorm: eight kernels forward (fp32 inside), sixteen backward, where the fused one runs one and three.
  CHECK(operation_kernels(torchtitan_profile(), "rms_norm", t, h, Dtype::bf16).size() == 7);  // six that move bytes, one of two launches
  const TrainingStep composite = simulate_training_step(job(R"(, "runtime": "torchtitan")"));
  CHECK(composite.forward_kernels.memory_s - eager.forward_kernels.memory_s == Approx(64 * (op("rms_norm", t, h) - op("fused_rms_norm", t, h))).epsilon(1e-6));
  CHECK(composite.backward_kernels.memory_s - eager.backward_kernels.memory_s ==
        Approx(64 * (op("rms_norm_backward", t, h) - op("fused_rms_norm_backward", t, h))).epsilon(1e-6));
  // Selective recomputation by op re-runs what torchtitan's policy does not keep: the norms, wk, the rotary
  // embeddings, the repeats, wo, the residual add, w3 and the SwiGLU.
  const TrainingStep by_op = simulate_training_step(job(R"(, "runtime": "torchtitan", "norm": "fused_rmsnorm", "recompute": "selective_op")"));
  const double again = 2 * op("fused_rms_norm", t, h) + gemm(t, kv, h) + op("rope", t, q) + op("rope", t, kv) + 2 * op("repeat_kv", t, q) + gemm(t, h, q) +
                       op("residual_add", t, h) + gemm(t, f, h) + op("swiglu", t, f);
  CHECK(by_op.backward_kernels.total() - eager.backward_kernels.total() == Approx(32 * again).epsilon(1e-6));
  // FSDP: each gather's copy-out, the layer's parameters, before the forward and the backward.
  const auto fsdp = [&](const std::string& runtime) {
    return simulate_training_step(parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 2048},
        "parallel": {"dp": 8, "zero": 3}, "batch": {"global": 8, "micro": 1}, "runtime": ")" + runtime + R"("})", "fsdp.json"));
  };
  const TrainingStep sharded = fsdp("torchtitan"), sharded_megatron = fsdp("megatron");
  const double layer_parameters = 2 * h * q + 2 * h * kv + 3 * h * f + 2 * h;
  const double composite_forward = eager_forward + 2 * (op("rms_norm", t, h) - op("fused_rms_norm", t, h));
  CHECK(sharded.forward_kernels.memory_s - sharded_megatron.forward_kernels.memory_s ==
        Approx(32 * (composite_forward - megatron_forward + op("fsdp_copy_out", layer_parameters / h, h))).epsilon(1e-6));
}

TEST_CASE("a search of a torchtitan job ranks what torchtitan ran: FSDP with or without TP, its norm fused only without TP", "[training][eager][search]") {
  const TrainingJob base = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"dp": 16, "zero": 3}, "batch": {"global": 16, "micro": 1}, "recompute": "selective_op", "runtime": "torchtitan", "norm": "fused_rmsnorm"})",
                                              "search.json");
  const TrainingSearch found = search_training(base, 1);
  REQUIRE(!found.ranked.empty());
  bool tp = false, by_op = false;
  for (const TrainingCandidate& c : found.ranked) {
    CHECK(c.job.runtime == TrainingJob::Runtime::torchtitan);
    CHECK(c.job.zero_stage() == 3);
    CHECK(c.job.pp == 1);
    CHECK(c.job.fused_rms_norm == (c.job.tp == 1));
    CHECK(c.job.recompute != Recompute::selective);
    tp = tp || c.job.tp > 1;
    by_op = by_op || c.job.recompute == Recompute::selective_op;
  }
  CHECK(tp);
  CHECK(by_op);
}

TEST_CASE("a runtime torchtitan job is refused where its layer was not read", "[training][eager][input]") {
  const auto error = [](const std::string& extra, const std::string& model = R"({"architecture": "llama-3-8b", "seq_len": 2048})", const std::string& parallel = "{}") {
    try {
      parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": )" + model + R"(, "parallel": )" + parallel +
                             R"(, "batch": {"global": 2, "micro": 1})" + extra + "}",
                         "eager.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(R"(, "runtime": "torchtitan")").empty());
  CHECK_THAT(error(R"(, "runtime": "torchtitan")", R"({"architecture": "mixtral-8x7b", "seq_len": 2048})"), Catch::Contains("eager.json: /runtime"));
  CHECK_THAT(error(R"(, "runtime": "torchtitan", "recompute": "selective")"), Catch::Contains("/recompute") && Catch::Contains("selective_op"));
  CHECK_THAT(error(R"(, "norm": "fused_rmsnorm")"), Catch::Contains("/norm") && Catch::Contains("only with \"runtime\": \"torchtitan\""));
  CHECK_THAT(error(R"(, "norm": "rmsnorm")"), Catch::Contains("/norm"));
  CHECK_THAT(error(R"(, "runtime": "torchtitan", "compute_efficiency": 0.5)"), Catch::Contains("/compute_efficiency"));
  CHECK_THAT(error(R"(, "runtime": "torchtitan", "norm": "fused_rmsnorm")", R"({"architecture": "llama-3-8b", "seq_len": 2048})", R"({"tp": 2})"),
             Catch::Contains("/norm") && Catch::Contains("TP"));
  CHECK_THAT(error(R"(, "runtime": "torchtitan", "dtype": "fp8")"), Catch::Contains("/dtype"));
  CHECK_THAT(error(R"(, "runtime": "eager")"), Catch::Contains("/runtime") && Catch::Contains("torchtitan"));
}

TEST_CASE("TP splits the GEMMs, recomputation and unfused attention cost what they re-run", "[training]") {
  const TrainingStep one = simulate_training_step(layer_job(1)), two = simulate_training_step(layer_job(2));
  CHECK(two.forward_kernels.gemm_s == Approx(one.forward_kernels.gemm_s / 2).epsilon(0.1));
  // Half the heads a GPU: half the attention, and more besides, the fewer query blocks ending less evenly.
  CHECK(two.forward_kernels.attention_s > one.forward_kernels.attention_s / 2);
  CHECK(two.forward_kernels.attention_s < 0.6 * one.forward_kernels.attention_s);
  CHECK(two.backward_kernels.attention_s == Approx(one.backward_kernels.attention_s / 2).epsilon(0.1));
  CHECK(two.tp_comm_s > 0);
  CHECK(two.forward_s > two.forward_kernels.total());  // TP all-reduces are exposed
  const TrainingStep selective = simulate_training_step(layer_job(1, R"(, "recompute": "selective")"));
  const TrainingStep full = simulate_training_step(layer_job(1, R"(, "recompute": "full")"));
  CHECK(selective.backward_s == Approx(one.backward_s));  // FlashAttention recomputes the scores anyway
  // Full recomputation re-runs every layer's forward (all but the logits and embedding) in the backward.
  CHECK(full.backward_s - one.backward_s > 0.9 * one.forward_s);
  CHECK(full.backward_s - one.backward_s < one.forward_s);
  const TrainingStep unfused = simulate_training_step(layer_job(1, R"(, "attention": "unfused")"));
  const TrainingStep unfused_selective = simulate_training_step(layer_job(1, R"(, "attention": "unfused", "recompute": "selective")"));
  CHECK(unfused.forward_kernels.attention_s == 0);
  CHECK(unfused.forward_s > one.forward_s);  // scores and probabilities through HBM at 2048 tokens
  CHECK(unfused_selective.backward_s > unfused.backward_s);
}

TEST_CASE("compute_efficiency overrides the kernel model, DP overlap hides the gradient all-reduce", "[training]") {
  const TrainingJob job = layer_job(1, R"(, "compute_efficiency": 0.5)");
  const TrainingStep step = simulate_training_step(job);
  const TrainingCounts c = count_training(job);
  const double peak = Catalog::builtin().gpu("h100-sxm")->peak_for(Dtype::bf16);
  CHECK(step.forward_s + step.backward_s == Approx(c.hardware_flop / (0.5 * peak)).epsilon(1e-9));
  CHECK(step.kernel_model_iteration_s == Approx(simulate_training_step(layer_job(1)).iteration_s));

  auto dp8 = [](const std::string& overlap) {
    TrainingJob j = layer_job(1, R"(, "recompute": "full")");
    j.dp = 8;
    j.global_batch = 16 * 8;
    j.dp_overlap = overlap == "yes";
    return simulate_training_step(j);
  };
  const TrainingStep exposed = dp8("no"), hidden = dp8("yes");
  REQUIRE(exposed.dp_allreduce_s > 0);
  CHECK(exposed.iteration_s == Approx(exposed.stage_end_s[0] + exposed.dp_allreduce_s + exposed.optimizer_s));
  // Beside the last backward: what the backward does not cover stays exposed.
  CHECK(hidden.iteration_s == Approx(std::max(hidden.stage_end_s[0], hidden.stage_end_s[0] - hidden.backward_s + hidden.dp_allreduce_s) +
                                     hidden.optimizer_s));
  CHECK(hidden.iteration_s < exposed.iteration_s);
}

TEST_CASE("Llama 3 from the catalog: GQA and a SwiGLU MLP counted by hand, and a configuration that does not fit refused", "[training]") {
  const auto llama = [](int tp, int dp, const std::string& extra = "") {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
        "parallel": {"tp": )" + std::to_string(tp) + R"(, "dp": )" + std::to_string(dp) + R"(, "distributed_optimizer": true}, "batch": {"global": 8, "micro": 1},
        "recompute": "selective")" + extra + "}",
                              "llama.json");
  };
  const TrainingJob job = llama(1, 8);
  // 8.03 B parameters (Meta's model card): 32 layers of QKV 4096 x 6144, output 4096^2, three 4096 x 14336
  // MLP matrices and two RMSNorm weights; the embedding and an untied head of 128,256 x 4096; the final norm.
  const double h = 4096, f = 14336, V = 128256, s = 8192;
  const double layer = h * (h + 2 * 8 * 128) + h * h + 3 * h * f + 2 * h;
  CHECK(job.model.layer_parameters() == layer);
  CHECK(job.model.parameters() == 32 * layer + 2 * V * h + h);
  CHECK(job.model.parameters() == Approx(8.03e9).epsilon(0.001));
  const TrainingCounts c = count_training(job);
  // Model FLOP: three times the forward of every token: 2 x (QKV, output, MLP) + 4sh a layer, 2hV logits.
  const double forward = 32 * (2 * (h * 6144 + h * h + 3 * h * f) + 4 * s * h) + 2 * h * V;
  CHECK(c.model_flop == Approx(3 * 8 * s * forward).epsilon(1e-12));
  // Activations with selective recomputation, no TP: sbh (10 + 4 + 4 x 8/32 + 6 f/h) = 36 sbh a layer.
  CHECK(c.activation_bytes_per_layer == Approx(36 * s * h).epsilon(1e-12));
  // 16 + 16 GB of weights and gradients, 12 GB of optimizer state sharded 8 ways, 38.7 GB of
  // activations: 2.8 GB more than an H100 has.
  const std::optional<OutOfMemory> oom = out_of_memory(job, c);
  REQUIRE(oom.has_value());
  CHECK(oom->stage == 0);
  CHECK(oom->needed_bytes == Approx(c.stage_memory[0].total()));
  CHECK(oom->vram_bytes == 80e9);
  // TP 2 halves the weights and most activations: it fits.
  CHECK_FALSE(out_of_memory(llama(2, 4), count_training(llama(2, 4))).has_value());
  const TrainingStep step = simulate_training_step(llama(2, 4));
  CHECK(step.mfu > 0.2);
  CHECK(step.mfu < 0.8);
  // Refused with the field: TP past the KV heads, dimensions beside the architecture.
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
      "parallel": {"tp": 16}, "batch": {"global": 1}})"), Catch::Contains("/parallel/tp: expected a divisor of the model's 8 KV heads"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "layers": 2, "seq_len": 4096},
      "parallel": {}, "batch": {"global": 1}})"), Catch::Contains("/model/layers: comes from the architecture"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "sdxl-unet", "seq_len": 4096},
      "parallel": {}, "batch": {"global": 1}})"), Catch::Contains("/model/architecture: expected an LLM of the catalog"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 2, "hidden": 64, "heads": 8, "kv_heads": 3, "vocab": 10, "seq_len": 16},
      "parallel": {}, "batch": {"global": 1}})"), Catch::Contains("/model/kv_heads: expected a divisor of the 8 heads"));
}

TEST_CASE("ZeRO-2 shards the gradients and ZeRO-3 / FSDP the weights, gathering each layer (bytes by hand)", "[training]") {
  const auto job = [](int zero) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
        "parallel": {"dp": 8, "zero": )" + std::to_string(zero) + R"(}, "batch": {"global": 8, "micro": 1}, "recompute": "selective"})",
                              "zero.json");
  };
  const TrainingCounts one = count_training(job(1)), two = count_training(job(2)), three = count_training(job(3));
  const double params = one.stage_parameters[0], layer = job(3).model.layer_parameters();
  CHECK(one.stage_memory[0].weights == 2 * params);
  CHECK(one.stage_memory[0].gradients == 2 * params);
  CHECK(one.stage_memory[0].optimizer == 12 * params / 8);
  CHECK(two.stage_memory[0].gradients == 2 * params / 8);
  CHECK(two.stage_memory[0].weights == 2 * params);
  // ZeRO-3: a shard of the 16-bit weights, and two layers whole (the one computing, the one prefetched).
  CHECK(three.stage_memory[0].weights == Approx(2 * params / 8 + 4 * layer).epsilon(1e-12));
  CHECK(three.zero_gather_bytes_per_layer == 2 * layer);
  CHECK(one.zero_gather_bytes_per_layer == 0);
  // Llama 3 8B does not fit 8 H100s with ZeRO-1 (82.8 GB), does with ZeRO-2 (68.8 GB) and ZeRO-3 (55.6 GB).
  CHECK(out_of_memory(job(1), one).has_value());
  CHECK_FALSE(out_of_memory(job(2), two).has_value());
  CHECK_FALSE(out_of_memory(job(3), three).has_value());
  // FSDP's gathers, 436 MB a layer over NVLink, hide behind a layer's compute: no slower than ZeRO-1's
  // all-reduce after the backward, and no faster than the compute alone.
  const TrainingStep z1 = simulate_training_step(job(1)), z3 = simulate_training_step(job(3));
  CHECK(z3.zero_gather_s > 0);
  CHECK(z3.iteration_s <= z1.iteration_s);
  CHECK(z3.iteration_s >= z3.forward_kernels.total() + z3.backward_kernels.total());
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"pp": 2, "dp": 4, "zero": 3}, "batch": {"global": 8}})"), Catch::Contains("/parallel/zero: expected ZeRO-3 / FSDP without pipeline stages"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"zero": 4}, "batch": {"global": 8}})"), Catch::Contains("/parallel/zero"));
}

TEST_CASE("train --search ranks every way to run a job that fits, fastest first, the same on any threads", "[training]") {
  const TrainingJob base = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 4, "distributed_optimizer": true}, "batch": {"global": 16, "micro": 1}, "recompute": "selective"})",
                                              "search.json");
  const TrainingSearch one = search_training(base, 1);
  // Progress: each configuration once (threads may report out of order), up to the total.
  std::size_t calls = 0, most = 0, total = 0;
  const TrainingSearch two = search_training(base, 2, [&](std::size_t done, std::size_t of) {
    ++calls;
    most = std::max(most, done);
    total = of;
  });
  CHECK(calls == two.searched);
  CHECK(most == two.searched);
  CHECK(total == two.searched);
  REQUIRE_FALSE(one.ranked.empty());
  CHECK(one.searched == two.searched);
  REQUIRE(one.ranked.size() == two.ranked.size());
  for (std::size_t k = 0; k < one.ranked.size(); ++k) {
    CHECK(one.ranked[k].step.iteration_s == two.ranked[k].step.iteration_s);
    CHECK(one.ranked[k].job.gpus() == 8);  // every GPU of the cluster
    CHECK_FALSE(out_of_memory(one.ranked[k].job, one.ranked[k].step.counts).has_value());
    if (k > 0) CHECK(one.ranked[k - 1].step.iteration_s <= one.ranked[k].step.iteration_s);
  }
  CHECK(one.searched == one.ranked.size() + one.out_of_memory);  // nothing here is refused by the checks
  // The job as written is one of the candidates: the best is at least as fast.
  CHECK(one.ranked.front().step.iteration_s <= simulate_training_step(base).iteration_s);
  // TP never past the 8 KV heads or a node's 8 GPUs; FSDP never with pipeline stages.
  for (const TrainingCandidate& c : one.ranked) {
    CHECK(c.job.tp <= 8);
    CHECK((c.job.zero_stage() < 3 || c.job.pp == 1));
  }
  // Each candidate timed as `train` times it alone (the search lends its threads one network, whose routes
  // it keeps, instead of building one a candidate).
  for (std::size_t k = 0; k < one.ranked.size(); k += 7) {
    CHECK(one.ranked[k].step.iteration_s == simulate_training_step(one.ranked[k].job).iteration_s);
    CHECK(one.ranked[k].step.ops.size() == simulate_training_step(one.ranked[k].job).ops.size());
  }
}

namespace {

// Mixtral 8x7B on two HGX H100 nodes, TP 2 with sequence parallelism, the experts over `ep` GPUs.
TrainingJob mixtral(int ep, const std::string& extra = "") {
  return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": )" + std::to_string(ep) + R"(, "sequence_parallel": true, "distributed_optimizer": true},
      "batch": {"global": 16, "micro": 1}, "recompute": "full")" + extra + "}",
                            "mixtral.json");
}

}  // namespace

TEST_CASE("a mixture of experts: Mixtral's parameters, the ones a token passes through and its FLOP counted by hand", "[training][moe]") {
  const TrainingJob job = mixtral(1);
  const double h = 4096, qkv = 4096 + 2 * 8 * 128, f = 14336, E = 8, k = 2, V = 32000, L = 32, s = 4096, B = 16;
  const double experts = E * 3 * h * f;
  const double layer = h * qkv + h * h + h * E + experts + 2 * h;  // attention, the router, every expert, two RMSNorms
  CHECK(job.model.expert_parameters() == experts);
  CHECK(job.model.layer_parameters() == Approx(layer).epsilon(1e-12));
  CHECK(job.model.parameters() == Approx(L * layer + 2 * V * h + h).epsilon(1e-12));
  // Mistral AI's figures: 46.7 B parameters, 12.9 B active a token.
  CHECK(job.model.parameters() / 1e9 == Approx(46.7).epsilon(0.002));
  CHECK(job.model.active_parameters() / 1e9 == Approx(12.9).epsilon(0.002));
  // Model FLOP: a token's forward passes the router and top-2 experts only.
  const TrainingCounts c = count_training(job);
  CHECK(c.model_flop == Approx(3 * B * s * (L * (2 * (h * qkv + h * h + h * E + k * 3 * h * f) + 4 * s * h) + 2 * h * V)).epsilon(1e-12));
  CHECK(c.active_parameters == job.model.active_parameters());
}

TEST_CASE("expert parallelism: experts split over EP, an all-to-all's bytes per GPU for top-k routing, gradients reduced among their holders", "[training][moe]") {
  const TrainingJob ep4 = mixtral(4);
  const TrainingCounts c = count_training(ep4);
  const double h = 4096, f = 14336, E = 8, L = 32, V = 32000;
  const double experts = L * E * 3 * h * f, dense = L * (ep4.model.layer_parameters() - ep4.model.expert_parameters()) + 2 * V * h + h;
  // Each GPU holds 1/tp of 1/ep of the experts, 1/tp of the rest (one stage: the embedding and the head).
  CHECK(c.stage_expert_parameters[0] == Approx(experts / (2 * 4)).epsilon(1e-12));
  CHECK(c.stage_parameters[0] == Approx((dense - h) / 2 + h + experts / 8).epsilon(1e-12));
  // The distributed optimizer shards the dense weights' state over DP 8, the experts' over the 8 / 4 = 2 GPUs
  // holding the same experts; their gradients are reduced over those groups.
  CHECK(ep4.expert_dp() == 2);
  const double dense_gpu = c.stage_parameters[0] - c.stage_expert_parameters[0];
  CHECK(c.stage_memory[0].optimizer == Approx(12 * (dense_gpu / 8 + c.stage_expert_parameters[0] / 2)).epsilon(1e-12));
  CHECK(c.dp_allreduce_bytes[0] == Approx(2 * dense_gpu).epsilon(1e-12));
  CHECK(c.expert_allreduce_bytes[0] == Approx(2 * c.stage_expert_parameters[0]).epsilon(1e-12));
  // One dispatch a layer: the GPU's 4,096 / TP 2 tokens, twice each (top 2), 4,096 wide, 16-bit.
  CHECK(c.ep_alltoall_bytes == 2.0 * (4096 / 2) * 2 * 4096);
  // Dispatch and combine forward, both again for the backward, and again where the layer is recomputed.
  const TrainingStep step = simulate_training_step(ep4);
  CHECK(step.ep_alltoall_s > 0);
  CHECK(step.ep_comm_s == Approx(L * (2 + 4) * step.ep_alltoall_s).epsilon(1e-12));
  // EP 4 of TP 2 stays inside a node (NVLink); EP 8 spans both nodes and crosses InfiniBand with the same bytes a GPU.
  const TrainingStep ep8 = simulate_training_step(mixtral(8));
  CHECK(count_training(mixtral(8)).ep_alltoall_bytes == c.ep_alltoall_bytes);
  CHECK(ep8.ep_alltoall_s > 2 * step.ep_alltoall_s);
  // Without EP every GPU holds every expert: no all-to-all, and the most memory.
  const TrainingStep ep1 = simulate_training_step(mixtral(1));
  CHECK(ep1.ep_comm_s == 0);
  CHECK(count_training(mixtral(1)).stage_memory[0].weights > c.stage_memory[0].weights);
}

TEST_CASE("DeepEP's dispatch: a copy a node over the network to the same local rank, then over NVLink to the experts' GPUs", "[training][moe]") {
  // Mixtral 8x7B, TP 2 x DP 8 on two HGX H100s, EP 8: the expert TP groups' two EP groups are GPUs e, e + 2,
  // ..., e + 14 (e = 0, 1), four on each node, one expert each. A token (2,048 a GPU under sequence
  // parallelism) picks 2 of the 8 experts: it reaches 2 (1 - C(4, 2) / C(8, 2)) = 11/7 nodes and always 2 GPUs.
  const TrainingJob flat = mixtral(8), bf16 = mixtral(8, R"(, "moe": {"dispatcher": "deepep"})");
  const TrainingJob fp8 = mixtral(8, R"(, "moe": {"dispatcher": "deepep", "dispatch_dtype": "fp8"})");
  const TrainingJob one_node = mixtral(8, R"(, "moe": {"dispatcher": "deepep", "max_nodes": 1})");
  const Cluster cluster(flat.cluster);
  const Topology topology(cluster, flat.cluster.fabric);
  const auto gpu = [](int i) { return make_id<GpuId>(static_cast<std::uint32_t>(i)); };
  const double token_bytes = 2048.0 * 4096 * 2;
  // Both groups' legs at once: the network leg as an all-to-all between the two GPUs of each local rank (a
  // copy a node reached), the NVLink leg among each node's four (a copy a GPU reached); the slower sets it.
  const auto legs = [&](double nodes_reached, double gpus_reached, double wire) {
    std::vector<CollectivePlan> network, nvlink;
    for (int e = 0; e < 2; ++e) {
      for (int r = 0; r < 4; ++r) {
        const std::vector<GpuId> rail{gpu(e + 2 * r), gpu(e + 2 * r + 8)};
        network.push_back(plan_collective(cluster, topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, rail, token_bytes / 2 * wire * nodes_reached));
      }
      for (int node = 0; node < 2; ++node) {
        const std::vector<GpuId> local{gpu(e + 8 * node), gpu(e + 8 * node + 2), gpu(e + 8 * node + 4), gpu(e + 8 * node + 6)};
        nvlink.push_back(plan_collective(cluster, topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, local, token_bytes / 2 * wire * gpus_reached));
      }
    }
    const auto a = simulated_times_s(topology, network), b = simulated_times_s(topology, nvlink);
    return std::max(*std::max_element(a.begin(), a.end()), *std::max_element(b.begin(), b.end()));
  };
  const TrainingStep f = simulate_training_step(flat), d = simulate_training_step(bf16), q = simulate_training_step(fp8), m = simulate_training_step(one_node);
  CHECK(d.ep_alltoall_s == Approx(legs(11.0 / 7, 2, 2)).epsilon(1e-12));
  CHECK(d.ep_combine_s == d.ep_alltoall_s);
  // fp8: a byte an element and a 4-byte scale a 128 on the wire; the combine stays 16-bit.
  CHECK(q.ep_alltoall_s == Approx(legs(11.0 / 7, 2, 1 + 4.0 / 128)).epsilon(1e-12));
  CHECK(q.ep_combine_s == d.ep_combine_s);
  // Node-limited to one node: one network copy a token; its two experts among that node's four GPUs.
  CHECK(m.ep_alltoall_s == Approx(legs(1, 4 * (1 - 3.0 / 6), 2)).epsilon(1e-12));
  // A node that holds fewer experts than a token picks: the router needs more nodes than max_nodes (Mixtral's
  // top 2 with one expert a node, EP 8 over eight nodes: two, as if max_nodes were 2).
  const auto spread = [](int max_nodes) {
    return simulate_training_step(parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 8}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
        "parallel": {"tp": 8, "dp": 8, "ep": 8, "sequence_parallel": true}, "batch": {"global": 8}, "recompute": "full",
        "moe": {"dispatcher": "deepep", "max_nodes": )" + std::to_string(max_nodes) + "}}", "spread.json"));
  };
  const TrainingStep one_of_one = spread(1);
  CHECK(std::isfinite(one_of_one.ep_alltoall_s));
  CHECK(one_of_one.ep_alltoall_s == spread(2).ep_alltoall_s);
  // A flat all-to-all: a copy an expert, dispatch and combine alike; forward and backward (recomputed) count both.
  CHECK(f.ep_combine_s == f.ep_alltoall_s);
  CHECK(d.ep_comm_s == Approx(32 * 3 * (d.ep_alltoall_s + d.ep_combine_s)).epsilon(1e-12));
  CHECK(d.ep_alltoall_s < f.ep_alltoall_s);
  CHECK(q.iteration_s < d.iteration_s);
  std::ostringstream text;
  write_training_text(text, fp8, q);
  CHECK_THAT(text.str(), Catch::Contains("each layer's DeepEP dispatch") && Catch::Contains("(fp8) and combine"));
  // Refused where it means nothing, with the field and why.
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true}, "batch": {"global": 16}, "moe": {"max_nodes": 1}})"),
             Catch::Contains("/moe/max_nodes: expected \"dispatcher\": \"deepep\""));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true}, "batch": {"global": 16}, "moe": {"dispatch_dtype": "fp8"}})"),
             Catch::Contains("/moe/dispatch_dtype: expected \"dispatcher\": \"deepep\""));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true}, "batch": {"global": 16}, "moe": {"dispatcher": "nccl"}})"),
             Catch::Contains("/moe/dispatcher"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-a100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {"tp": 2, "dp": 8, "ep": 8, "sequence_parallel": true}, "batch": {"global": 16}, "moe": {"dispatcher": "deepep", "dispatch_dtype": "fp8"}})"),
             Catch::Contains("/moe/dispatch_dtype: expected a dtype the GPU runs"));
}

TEST_CASE("multi-token prediction: a layer, a projection from 2h and the head again on the last stage, counted by hand", "[training][mtp]") {
  // A GPT-layout model of 4 layers on two stages (TP 1), with and without one module, at a given share of peak.
  const auto job = [](int mtp, const std::string& rest) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 32000, "seq_len": 2048, "mtp_layers": )" + std::to_string(mtp) + R"(},
        "parallel": {"pp": 2}, "batch": {"global": 4, "micro": 1})" + rest + "}",
                              "mtp.json");
  };
  const TrainingJob plain = job(0, R"(, "compute_efficiency": 0.5)"), mtp = job(1, R"(, "compute_efficiency": 0.5)");
  const double h = 1024, s = 2048, V = 32000, tokens = 4 * s;
  // A module's FLOP a token: its layer (GEMMs 2(4h^2 + 8h^2), attention 4sh), the projection 2 x 2h x h, the logits 2hV.
  const double module = 2 * (4 * h * h + 8 * h * h) + 4 * s * h + 4 * h * h + 2 * h * V;
  const TrainingCounts a = count_training(plain), b = count_training(mtp);
  CHECK(b.model_flop - a.model_flop == Approx(3 * tokens * module).epsilon(1e-12));
  // The last stage holds the module's layer, projection and three norms; its tied embedding is the head it
  // already holds.
  CHECK(mtp.model.mtp_parameters() == Approx(plain.model.layer_parameters(false) + 2 * h * h + 3 * h).epsilon(1e-12));
  CHECK(b.stage_parameters[1] - a.stage_parameters[1] == Approx(mtp.model.mtp_parameters()).epsilon(1e-12));
  CHECK(b.stage_parameters[0] == a.stage_parameters[0]);
  CHECK(b.stage_memory[1].activations > a.stage_memory[1].activations);
  // The last stage's forward grows by the module's FLOP at half of peak; the first stage is unchanged.
  const double peak = Catalog::builtin().gpu("h100-sxm")->peak_for(Dtype::bf16);
  const TrainingStep x = simulate_training_step(plain), y = simulate_training_step(mtp);
  CHECK(y.forward_s - x.forward_s == Approx(s * module / (0.5 * peak)).epsilon(1e-9));
  // Under the kernel model the module's kernels run too, forward and backward.
  const TrainingStep k0 = simulate_training_step(job(0, "")), k1 = simulate_training_step(job(1, ""));
  CHECK(k1.forward_s > k0.forward_s);
  CHECK(k1.backward_s > k0.backward_s);
  std::ostringstream text;
  write_training_text(text, mtp, y);
  CHECK_THAT(text.str(), Catch::Contains("multi-token prediction: 1 module of") && Catch::Contains("2+1"));
  // DeepSeek-V3's model card: 685 B in all, 671 B of main model and 14 B of MTP module, which holds its own copies
  // of the embedding and the head; figures rounded to the billion, so the module is known to about 1 B.
  const TrainingJob v3 = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 1}]}, "model": {"architecture": "deepseek-v3", "seq_len": 4096, "mtp_layers": 1},
      "parallel": {"dp": 8, "ep": 8}, "batch": {"global": 8}})",
                                            "v3.json");
  CHECK((v3.model.mtp_parameters() + 2.0 * 129280 * 7168) / 1e9 == Approx(14).margin(1));
  // An untied model's last stage holds a copy of the embedding for the module, beside its own head.
  const auto untied = [](int modules) {
    return count_training(parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096, "mtp_layers": )" +
                                                 std::to_string(modules) + R"(}, "parallel": {"pp": 2}, "batch": {"global": 4}})",
                                             "untied.json"));
  };
  const TrainingJob llama = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096, "mtp_layers": 1},
      "parallel": {"pp": 2}, "batch": {"global": 4}})", "untied.json");
  CHECK(untied(1).stage_parameters[1] - untied(0).stage_parameters[1] == Approx(llama.model.mtp_parameters() + 128256.0 * 4096).epsilon(1e-12));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 32000, "seq_len": 2048, "mtp_layers": 17},
      "parallel": {}, "batch": {"global": 4}})"),
             Catch::Contains("/model/mtp_layers"));
}

TEST_CASE("an unbalanced router slows the busiest GPU, and a capacity factor caps it", "[training][moe]") {
  const TrainingStep balanced = simulate_training_step(mixtral(4));
  const TrainingStep skewed = simulate_training_step(mixtral(4, R"(, "moe": {"imbalance": 2})"));
  const TrainingStep capped = simulate_training_step(mixtral(4, R"(, "moe": {"imbalance": 2, "capacity_factor": 1.25})"));
  const TrainingStep at_cap = simulate_training_step(mixtral(4, R"(, "moe": {"imbalance": 1.25})"));
  CHECK(skewed.iteration_s > balanced.iteration_s);
  CHECK(skewed.ep_alltoall_s > balanced.ep_alltoall_s);
  CHECK(capped.iteration_s < skewed.iteration_s);
  CHECK(capped.iteration_s == at_cap.iteration_s);
  // The busiest GPU keeps twice the routed copies' activations.
  TrainingJob kept = mixtral(4, R"(, "moe": {"imbalance": 2})"), even = mixtral(4);
  kept.recompute = even.recompute = Recompute::none;
  CHECK(count_training(kept).activation_bytes_per_layer > count_training(even).activation_bytes_per_layer);
}

TEST_CASE("experts that Megatron-Core cannot run as given are refused with the field", "[training][moe]") {
  const std::string cluster = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096}, )";
  CHECK_THAT(job_error(cluster + R"("parallel": {"dp": 6, "ep": 3}, "batch": {"global": 6}})"),
             Catch::Contains("/parallel/ep: expected a divisor of the model's 8 experts, found 3"));
  CHECK_THAT(job_error(cluster + R"("parallel": {"dp": 2, "ep": 4}, "batch": {"global": 2}})"), Catch::Contains("/parallel/ep: expected etp x ep (4) to divide a stage's tp x cp x dp GPUs (2)"));
  CHECK_THAT(job_error(cluster + R"("parallel": {"tp": 2, "etp": 3, "dp": 3, "sequence_parallel": true}, "batch": {"global": 3}})"),
             Catch::Contains("/parallel/etp: expected a divisor of the experts' 14336 hidden size, found 3"));
  CHECK_THAT(job_error(cluster + R"("parallel": {"tp": 2, "dp": 2}, "batch": {"global": 2}})"), Catch::Contains("/parallel/sequence_parallel: expected sequence parallelism"));
  CHECK_THAT(job_error(cluster + R"("parallel": {"dp": 2, "zero": 3}, "batch": {"global": 2}})"), Catch::Contains("/parallel/zero: expected ZeRO 0 to 2 with experts"));
  CHECK_THAT(job_error(cluster + R"("parallel": {}, "batch": {"global": 2}, "moe": {"imbalance": 0.5}})"), Catch::Contains("/moe/imbalance"));
  const std::string dense = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, )";
  CHECK_THAT(job_error(dense + R"("parallel": {"dp": 2, "ep": 2}, "batch": {"global": 2}})"), Catch::Contains("/parallel/ep: expected ep 1 for a dense model"));
  CHECK_THAT(job_error(dense + R"("parallel": {"tp": 2, "etp": 1}, "batch": {"global": 2}})"), Catch::Contains("/parallel/etp: expected no etp for a dense model"));
  CHECK_THAT(job_error(dense + R"("parallel": {}, "batch": {"global": 2}, "moe": {"imbalance": 1.5}})"), Catch::Contains("/moe: expected \"moe\" only for a mixture of experts"));
  const std::string custom = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "parallel": {}, "batch": {"global": 2}, "model": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 8, "seq_len": 16, )";
  CHECK_THAT(job_error(custom + R"("experts": 2, "experts_per_token": 3}})"), Catch::Contains("/model/experts_per_token: expected 1 to the 2 experts, found 3"));
  CHECK_THAT(job_error(custom + R"("experts": 2}})"), Catch::Contains("/model/experts_per_token"));
  CHECK_THAT(job_error(custom + R"("shared_ffn": 128}})"), Catch::Contains("/model/shared_ffn: expected \"shared_ffn\" only beside \"experts\""));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "mixtral-8x7b", "experts": 4, "seq_len": 16},
      "parallel": {}, "batch": {"global": 1}})"), Catch::Contains("/model/experts: comes from the architecture"));
}

TEST_CASE("a shared expert runs on every token beside the routed ones", "[training][moe]") {
  auto job = [](int shared) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "parallel": {"dp": 8, "ep": 8}, "batch": {"global": 8},
        "model": {"layers": 4, "hidden": 2048, "heads": 16, "vocab": 1024, "seq_len": 4096, "gated": true, "ffn_hidden": 1408,
                  "experts": 64, "experts_per_token": 4, "shared_ffn": )" + std::to_string(shared) + "}}",
                              "shared.json");
  };
  const TrainingJob plain = job(0), shared = job(5632);
  // A shared expert of 5,632 adds its three 2,048 x 5,632 matrices a layer and (GPT's layout) its biases, 2 x 5,632
  // gated and 2,048, to each of the 4 layers and to what every token passes through.
  const double one = 3.0 * 2048 * 5632 + 2 * 5632 + 2048;
  CHECK(shared.model.layer_parameters() - plain.model.layer_parameters() == Approx(one).epsilon(1e-12));
  CHECK(shared.model.active_parameters() - plain.model.active_parameters() == Approx(4 * one).epsilon(1e-12));
  CHECK(simulate_training_step(shared).iteration_s > simulate_training_step(plain).iteration_s);
}

TEST_CASE("train --search tries EP and expert TP for a mixture of experts, where they divide the experts and a stage's GPUs", "[training][moe]") {
  const TrainingJob base = mixtral(1);
  const TrainingSearch search = search_training(base, 2);
  REQUIRE_FALSE(search.ranked.empty());
  bool expert_parallel = false, whole_experts = false;
  for (const TrainingCandidate& c : search.ranked) {
    CHECK(8 % c.job.ep == 0);
    CHECK((c.job.tp * c.job.cp * c.job.dp) % (c.job.expert_tp() * c.job.ep) == 0);
    CHECK(c.job.zero_stage() < 3);
    expert_parallel = expert_parallel || c.job.ep > 1;
    whole_experts = whole_experts || (c.job.tp > 1 && c.job.expert_tp() == 1);
  }
  CHECK(expert_parallel);
  CHECK(whole_experts);
}

TEST_CASE("expert TP 1 folds an EP group of TP 2 into one node: experts whole, no expert TP traffic, the all-to-all on NVLink", "[training][moe]") {
  // TP 2 x DP 8 on two nodes; EP 8 with expert TP 2 takes GPUs 0, 2, ..., 14 (both nodes), with expert TP 1
  // GPUs 0 to 7 (one node), as Megatron-Core's parallel folding groups them.
  const TrainingJob split = mixtral(8);
  TrainingJob whole = split;
  whole.etp = 1;
  const TrainingCounts c = count_training(whole);
  const double experts = 32 * 8 * 3 * 4096.0 * 14336;
  CHECK(c.stage_expert_parameters[0] == Approx(experts / 8).epsilon(1e-12));  // 1 of 8 experts, whole
  CHECK(whole.expert_dp() == 2);                                              // 16 GPUs / (expert TP 1 x EP 8)
  CHECK(c.ep_alltoall_bytes == count_training(split).ep_alltoall_bytes);      // a GPU's own tokens either way
  const TrainingStep one = simulate_training_step(whole), two = simulate_training_step(split);
  CHECK(one.ep_alltoall_s < two.ep_alltoall_s);
  // Only the attention's TP all-reduces remain (no gather and scatter of the routed copies).
  CHECK(one.tp_comm_s < two.tp_comm_s);
  // But each expert's gradients now live on two GPUs, one a node, and are reduced across them; with expert TP 2
  // the 16 GPUs hold 16 different shares and reduce none.
  CHECK(split.expert_dp() == 1);
  CHECK(one.dp_allreduce_s > two.dp_allreduce_s);
}

TEST_CASE("fp8: the layers' GEMMs at the fp8 rate with their operands quantized, the logits and everything else in bf16", "[training][fp8]") {
  const TrainingJob bf16 = layer_job(1), fp8 = layer_job(1, R"(, "dtype": "fp8")");
  const TrainingStep step = simulate_training_step(fp8), base = simulate_training_step(bf16);
  const KernelModel model(*Catalog::builtin().gpu("h100-sxm"));
  auto gemm = [&](double m, double n, double k, Dtype d) { return model.estimate({.cls = KernelClass::gemm, .m = m, .n = n, .k = k}, d).time_s(); };
  // The four layer GEMMs of layer_job at fp8, the logits at bf16.
  const double t = 4096;
  const double layer = gemm(t, 12288, 4096, Dtype::fp8) + gemm(t, 4096, 4096, Dtype::fp8) + gemm(t, 16384, 4096, Dtype::fp8) + gemm(t, 4096, 16384, Dtype::fp8);
  CHECK(step.forward_kernels.gemm_s == Approx(32 * layer + gemm(t, 32000, 4096, Dtype::bf16)).epsilon(1e-9));
  CHECK(step.forward_kernels.attention_s == base.forward_kernels.attention_s);  // attention stays bf16
  // Each fp8 GEMM's input is cast in the forward (read 2 bytes, write the fp8 tensor and its transpose):
  // 4 bytes an element of 4096 tokens by 4096, 4096, 4096 and 16384 a layer; memory-bound work grows by that.
  const double cast_bytes = 32 * 4.0 * t * (4096 + 4096 + 4096 + 16384);
  CHECK(step.forward_kernels.memory_s - base.forward_kernels.memory_s > cast_bytes / 3.35e12);
  // The layers' weights are held again as fp8 and its transpose: 2 bytes a parameter beside the 16.
  const TrainingCounts c = count_training(fp8), b = count_training(bf16);
  CHECK(c.stage_fp8_weights[0] == Approx(32 * fp8.model.layer_parameters()).epsilon(1e-12));
  CHECK(c.stage_memory[0].weights - b.stage_memory[0].weights == Approx(2 * c.stage_fp8_weights[0]).epsilon(1e-12));
  CHECK(step.iteration_s < base.iteration_s);
  // MFU is against the fp8 peak.
  const double peak = Catalog::builtin().gpu("h100-sxm")->peak_for(Dtype::fp8);
  CHECK(step.mfu == Approx(c.model_flop / (step.iteration_s * 1 * peak)).epsilon(1e-12));
}

TEST_CASE("fp8 scaled by blocks: the same GEMMs at the blockwise rate, the casts writing their scales", "[training][fp8]") {
  const TrainingJob tensorwise = layer_job(1, R"(, "dtype": "fp8")"), blockwise = layer_job(1, R"(, "dtype": "fp8", "fp8_recipe": "blockwise")");
  const TrainingStep t = simulate_training_step(tensorwise), b = simulate_training_step(blockwise);
  const KernelModel model(*Catalog::builtin().gpu("h100-sxm"));
  auto gemm = [&](double n, double k, bool blocks) {
    return model.estimate({.cls = KernelClass::gemm, .m = 4096, .n = n, .k = k, .block_scaled = blocks}, Dtype::fp8).time_s();
  };
  // A large GEMM: blockwise at 0.733 of bf16's tile efficiency at twice the peak, 1.47x bf16 (FBGEMM's 1.44-1.49x); per tensor 0.883, 1.77x.
  const double bf16 = model.estimate({.cls = KernelClass::gemm, .m = 8192, .n = 8192, .k = 8192}, Dtype::bf16).time_s();
  const double blocks = model.estimate({.cls = KernelClass::gemm, .m = 8192, .n = 8192, .k = 8192, .block_scaled = true}, Dtype::fp8).time_s();
  CHECK(bf16 / blocks == Approx(2 * 0.733).epsilon(0.02));
  // The four layer GEMMs of layer_job, each at the blockwise rate; the logits stay bf16 and alike.
  const auto layer = [&](bool scaled) { return gemm(12288, 4096, scaled) + gemm(4096, 4096, scaled) + gemm(16384, 4096, scaled) + gemm(4096, 16384, scaled); };
  CHECK(b.forward_kernels.gemm_s - t.forward_kernels.gemm_s == Approx(32 * (layer(true) - layer(false))).epsilon(1e-9));
  // The casts write an fp32 scale a 128 elements of each of their two copies: 4 + 8/128 bytes an element, not 4.
  CHECK(b.forward_kernels.memory_s > t.forward_kernels.memory_s);
  CHECK(b.iteration_s > t.iteration_s);
  // The recipe applies to fp8 only: a bf16 job with it (a dtype swapped on an fp8 job's file) times as without.
  const TrainingJob plain = layer_job(1), plain_recipe = layer_job(1, R"(, "fp8_recipe": "blockwise")");
  CHECK(simulate_training_step(plain_recipe).iteration_s == simulate_training_step(plain).iteration_s);
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"tp": 8}, "batch": {"global": 1}, "dtype": "fp8", "fp8_recipe": "mxfp8"})"),
             Catch::Contains("/fp8_recipe: expected one of"));
}

TEST_CASE("fp8 is refused where the GPU has no fp8 tensor cores, and with FSDP", "[training][fp8]") {
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-a100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"tp": 8}, "batch": {"global": 1}, "dtype": "fp8"})"),
             Catch::Contains("/dtype: expected a dtype the GPU runs: a100-sxm-80gb has no fp8 tensor cores"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096},
      "parallel": {"dp": 8, "zero": 3}, "batch": {"global": 8}, "dtype": "fp8"})"),
             Catch::Contains("/parallel/zero: expected ZeRO 0 to 2 with fp8"));
}

TEST_CASE("Qwen's mixtures of experts from the catalog: shared experts counted, totals and active parameters as their names say", "[training][moe]") {
  auto model = [](const std::string& id) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": ")" + id + R"(", "seq_len": 4096},
        "parallel": {"dp": 4, "ep": 4}, "batch": {"global": 4}})",
                              "qwen.json")
        .model;
  };
  // Qwen2-57B-A14B: 57 B parameters, 14 B active; Qwen1.5-MoE-A2.7B: 14.3 B, 2.7 B active (Qwen's model cards).
  const TransformerModel big = model("qwen2-57b-a14b"), small = model("qwen1.5-moe-a2.7b");
  CHECK(big.shared_ffn == 20480);
  CHECK(big.parameters() / 1e9 == Approx(57.4).epsilon(0.005));
  CHECK(big.active_parameters() / 1e9 == Approx(14.2).epsilon(0.01));
  CHECK(small.parameters() / 1e9 == Approx(14.3).epsilon(0.005));
  CHECK(small.active_parameters() / 1e9 == Approx(2.7).epsilon(0.01));
  // The shared expert: three 3,584 x 20,480 matrices a layer, in every token's path.
  const double shared = 3.0 * 3584 * 20480, routed = 64 * 3.0 * 3584 * 2560, router = 3584.0 * 64;
  CHECK(big.layer_parameters() == Approx(3584.0 * big.qkv_width() + 3584.0 * 3584 + router + routed + shared + 2 * 3584).epsilon(1e-12));
}

TEST_CASE("Qwen3's heads are wider than hidden / heads: counts, FLOP and kernels follow head_dim, and the totals are the model cards'", "[training][moe]") {
  auto model = [](const std::string& id) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": ")" + id + R"(", "seq_len": 4096},
        "parallel": {"dp": 8, "ep": 8}, "batch": {"global": 8}})",
                              "qwen3.json");
  };
  // Qwen's model cards: 30.5 B parameters, 3.3 B activated; 235 B, 22 B.
  const TrainingJob small = model("qwen3-30b-a3b"), big = model("qwen3-235b-a22b");
  CHECK(small.model.head_dim == 128);
  CHECK(small.model.parameters() / 1e9 == Approx(30.5).margin(0.05));
  CHECK(small.model.active_parameters() / 1e9 == Approx(3.3).epsilon(0.02));  // 3.35 B from the config's shapes
  CHECK(big.model.parameters() / 1e9 == Approx(235).margin(0.5));
  CHECK(big.model.active_parameters() / 1e9 == Approx(22).margin(0.5));
  // A layer's attention: q 2,048 to 32 x 128, k and v to 4 x 128 each, the output 4,096 back to 2,048.
  CHECK(small.model.qkv_width() == 40 * 128);
  CHECK(small.model.attention_width() == 4096);
  // The header says so: 32 heads of 128, 4 of them KV heads.
  std::ostringstream text;
  write_training_text(text, small, simulate_training_step(small));
  CHECK_THAT(text.str(), Catch::Contains("hidden 2048, 32 heads of 128 (4 KV)"));
  // Written out with the same head_dim, the same attention; without it, heads of 64.
  const std::string written = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4,
      "ffn_hidden": 768, "gated": true, "vocab": 151936, "seq_len": 4096, "experts": 128, "experts_per_token": 8HEAD},
      "parallel": {"dp": 8, "ep": 8}, "batch": {"global": 8}})";
  auto with = [&](const std::string& head) { return parse_training_job(std::string(written).replace(written.find("HEAD"), 4, head), "w.json"); };
  CHECK(with(R"(, "head_dim": 128)").model.qkv_width() == small.model.qkv_width());
  CHECK(with(R"(, "head_dim": 128)").model.attention_width() == small.model.attention_width());
  CHECK(with("").model.qkv_width() == 40 * 64);
  // Model FLOP by hand: q, k, v and the output over the 4,096-wide attention, the router and 8 experts, and
  // attention's scores and values at 32 heads of 128.
  const double h = 2048, aw = 32 * 128, qkv = 40 * 128, f = 768, E = 128, k = 8, V = 151936, L = 48, s = 4096, B = 8;
  CHECK(count_training(small).model_flop == Approx(3 * B * s * (L * (2 * (h * qkv + h * aw + h * E + k * 3 * h * f) + 4 * s * aw) + 2 * h * V)).epsilon(1e-12));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "qwen3-30b-a3b", "head_dim": 64, "seq_len": 4096},
      "parallel": {"dp": 8, "ep": 8}, "batch": {"global": 8}})"),
             Catch::Contains("/model/head_dim: comes from the architecture"));
  // Context parallelism passes each KV head's keys and values at its 128 width, not hidden / heads (64).
  TrainingJob cp = small;
  cp.dp = 4;
  cp.cp = 2;
  CHECK(count_training(cp).cp_send_bytes == Approx(2 * 2 * 1 * (4096 / 2) * 4 * 128.0).epsilon(1e-12));
}

namespace {

// DeepSeek-V3 as its report trains it: 16 pipeline stages (the 61 layers as 3, 14 x 4 and 2), EP 64 over
// 2,048 H800s, ZeRO-1, fp8; `extra` goes into "parallel".
TrainingJob deepseek(const std::string& extra = "", const std::string& rest = "") {
  return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 256}], "fabric": {"topology": "fat-tree"}},
      "model": {"architecture": "deepseek-v3", "seq_len": 4096},
      "parallel": {"pp": 16, "first_stage_layers": 3, "last_stage_layers": 2, "dp": 128, "ep": 64, "distributed_optimizer": true)" + extra + R"(},
      "batch": {"global": 15360, "micro": 1}, "dtype": "fp8", "recompute": "full")" + rest + "}",
                            "deepseek.json");
}

}  // namespace

TEST_CASE("DeepSeek-V3: latent attention, dense first layers and uneven stages counted by hand, totals the model card's", "[training][moe][mla]") {
  const TrainingJob job = deepseek();
  const TransformerModel& m = job.model;
  REQUIRE(m.latent);
  CHECK(m.dense_layers == 3);
  CHECK(m.dense_ffn == 18432);
  // A layer's attention: q 7,168 -> 1,536 -> 128 x 192; the latent 7,168 -> 512 + 64, then 512 -> 128 x (128 + 128);
  // the output 128 x 128 -> 7,168.
  const double h = 7168, heads = 128, attention = h * 1536 + 1536 * heads * 192 + h * 576 + 512 * heads * 256 + heads * 128 * h;
  CHECK(m.attention_parameters() == attention);
  const double expert = 3 * h * 2048, router = h * 256;
  CHECK(m.layer_parameters(false) == attention + 3 * h * 18432 + 2 * h);
  CHECK(m.layer_parameters(true) == attention + router + 257 * expert + 2 * h);
  // The model card: 671 B in all, 37 B activated a token (36.6 B without the 0.93 B embedding, which a token
  // looks up rather than multiplies).
  const double V = 129280;
  CHECK(m.parameters() == 3 * m.layer_parameters(false) + 58 * m.layer_parameters(true) + 2 * V * h + h);
  CHECK(m.parameters() / 1e9 == Approx(671).margin(0.5));
  CHECK((m.active_parameters() - V * h) / 1e9 == Approx(36.6).margin(0.1));
  // FLOP by hand: each layer's projections and MLP twice a token, the scores over 128 heads of 192 and values of 128.
  const double s = 4096, tokens = 15360 * s;
  const double scores = 2 * s * heads * (192 + 128);
  const double dense = 2 * (attention + 3 * h * 18432) + scores, mixture = 2 * (attention + router + 9 * expert) + scores;
  const TrainingCounts c = count_training(job);
  CHECK(c.model_flop == Approx(3 * tokens * (3 * dense + 58 * mixture + 2 * h * V)).epsilon(1e-12));
  CHECK(c.hardware_flop == Approx(c.model_flop + tokens * (3 * dense + 58 * mixture)).epsilon(1e-12));  // full recomputation
  // The stages: 3 dense layers and the embedding first, 4 mixtures on each of the 14 in the middle, 2 and the head last.
  CHECK(job.stage_layers() == std::vector<int>{3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2});
  const double experts_per_gpu = 4 * expert;  // 256 experts over EP 64, TP 1
  CHECK(c.stage_parameters[0] == Approx(3 * m.layer_parameters(false) + V * h).epsilon(1e-12));
  CHECK(c.stage_expert_parameters[0] == 0);
  CHECK(c.stage_parameters[1] == Approx(4 * (m.layer_parameters(true) - 256 * expert) + 4 * experts_per_gpu).epsilon(1e-12));
  CHECK(c.stage_expert_parameters[1] == Approx(4 * experts_per_gpu).epsilon(1e-12));
  CHECK(c.stage_parameters[15] == Approx(2 * (m.layer_parameters(true) - 256 * expert) + 2 * experts_per_gpu + V * h + h).epsilon(1e-12));
  // Each stage's activations: full recomputation keeps each layer's input (2 s h bytes) for each micro-batch in flight.
  CHECK(c.stage_memory[0].activations == Approx(16 * 3 * 2 * s * h).epsilon(1e-12));
  CHECK(c.stage_memory[15].activations == Approx(1 * 2 * 2 * s * h).epsilon(1e-12));
  // The step fits and runs: every stage busy, the all-to-alls on the 58 mixtures only.
  const TrainingStep step = simulate_training_step(job);
  CHECK_FALSE(out_of_memory(job, c));
  CHECK(step.iteration_s > 0);
  CHECK(step.ep_comm_s == Approx(4 * 3 * 2 * step.ep_alltoall_s).epsilon(1e-12));  // 4 mixtures, forward and twice backward (recomputed)
  std::ostringstream text;
  write_training_text(text, job, step);
  CHECK_THAT(text.str(), Catch::Contains("128 heads of latent attention (q latent 1536, kv latent 512, heads of 192 for scores and 128 for values)") &&
                             Catch::Contains("the first 3 layers dense (MLP of 18432)") && Catch::Contains("PP 16 (3 + 14 x 4 + 2 layers)"));
}

TEST_CASE("DualPipe hides a mixture's all-to-alls behind the other direction's compute", "[training][dualpipe][moe]") {
  // DeepSeek-V3's layout on its 2,048 H800s: 1F1B pays the all-to-alls; DualPipe's pairs hide them.
  const TrainingStep plain = simulate_training_step(deepseek());
  const TrainingStep dual = simulate_training_step(deepseek("", R"(, "schedule": "dualpipe")"));
  REQUIRE(plain.ep_comm_s > 0);
  CHECK(dual.iteration_s < plain.iteration_s);
  // GPU 4 (stages 4 and 11, 4 mixtures each; no TP or CP traffic): a pair of its two directions takes the longer of its
  // compute (a forward and a backward played alone, less their all-to-alls) and its all-to-alls (ep_comm_s: a
  // stage's forward and backward; here, NCCL's flat bf16 all-to-alls, the longer; their SMs are not modelled).
  struct Passes {
    double forward_alone = 0, backward_alone = 0, pair = 0;
  };
  const auto gpu4 = [](const TrainingStep& step) {
    std::map<double, std::vector<PipelineOp>> at;  // GPU 4's passes by start
    for (const PipelineOp& op : step.ops) {
      if (op.stage == 4) at[op.start_s].push_back(op);
    }
    Passes p;
    for (const auto& [start, ops] : at) {
      const double length = ops.front().end_s - ops.front().start_s;
      if (ops.size() == 2) p.pair = length;
      else if (!ops.front().backward && ops.front().chunk == 0) p.forward_alone = length;
      else if (ops.front().backward && !ops.front().weight && ops.front().chunk == 1) p.backward_alone = std::max(p.backward_alone, length);
    }
    return p;
  };
  const Passes flat = gpu4(dual);
  REQUIRE(flat.pair > 0);
  CHECK(flat.pair == Approx(std::max(flat.forward_alone + flat.backward_alone - dual.ep_comm_s, dual.ep_comm_s)).epsilon(1e-9));
  // DeepEP's kernels hold 20 of the H800's 132 SMs while they run: the compute beside them runs at 112/132, so the
  // pair takes max(A, C + 20/132 A) (C its compute at full speed, A its all-to-alls; here C is the longer).
  const std::string fast = R"(, "schedule": "dualpipe", "moe": {"dispatcher": "deepep", "dispatch_dtype": "fp8", "max_nodes": 4)";
  const TrainingStep deepep = simulate_training_step(deepseek("", fast + "}"));
  const Passes ep = gpu4(deepep);
  const double exchanges = deepep.ep_comm_s, compute = ep.forward_alone + ep.backward_alone - exchanges;
  REQUIRE(compute > exchanges);
  CHECK(ep.pair == Approx(compute + 20.0 / 132 * exchanges).epsilon(1e-9));
  CHECK(simulate_training_step(deepseek("", fast + R"(, "dispatcher_sms": 40})")).iteration_s > deepep.iteration_s);
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 4}]}, "model": {"architecture": "deepseek-v3", "seq_len": 4096},
      "parallel": {"dp": 32, "ep": 32}, "batch": {"global": 64}, "moe": {"dispatcher_sms": 24}})"),
             Catch::Contains("/moe/dispatcher_sms: expected \"dispatcher\": \"deepep\" with dispatcher_sms"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 4}]}, "model": {"architecture": "deepseek-v3", "seq_len": 4096},
      "parallel": {"dp": 32, "ep": 32}, "batch": {"global": 64}, "moe": {"dispatcher": "deepep", "dispatcher_sms": 132}})"),
             Catch::Contains("/moe/dispatcher_sms: expected fewer SMs than h800-sxm's 132, found 132"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 4}]}, "model": {"architecture": "deepseek-v3", "seq_len": 4096},
      "parallel": {"pp": 2, "first_stage_layers": 31, "dp": 16, "ep": 16, "ep_overlap": true}, "batch": {"global": 64}, "schedule": "dualpipe"})"),
             Catch::Contains("/parallel/ep_overlap: expected ep_overlap with the 1f1b schedule, whose backwards it pairs with forwards, found dualpipe (which pairs its own)"));
}

TEST_CASE("selective recomputation by module frees and re-runs what Megatron-Core's modules do, counted by hand", "[training][mla][recompute]") {
  const TrainingJob base = deepseek();
  const auto with = [&](Recompute recompute, unsigned modules, Dtype dtype = Dtype::bf16) {
    TrainingJob j = base;
    j.recompute = recompute;
    j.recompute_modules = modules;
    j.dtype = dtype;
    check_training_job(j);
    return j;
  };
  const double h = 7168, s = 4096, sbh = s * h, heads = 128, f = 2048, tokens = 15360 * s;
  const auto per_layer = [&](Recompute recompute, unsigned modules) { return count_training(with(recompute, modules)).activation_bytes_per_layer / sbh; };
  // TP 1, FlashAttention: the attention core keeps its fp32 log-sum-exp (4a/h), which core_attn frees.
  const double attention = per_layer(Recompute::none, 0) - per_layer(Recompute::selective, kRecomputeCoreAttention);
  CHECK(attention == Approx(4 * heads / h));
  const double base_layer = per_layer(Recompute::selective, kRecomputeCoreAttention);
  // layernorm: the input norm's output (latent attention's down-projections read it) and the pre-MLP norm's
  // (the router and the dispatch read it), 2 sbh each.
  CHECK(base_layer - per_layer(Recompute::selective, kRecomputeCoreAttention | kRecomputeLayerNorm) == Approx(4));
  // mla_up_proj: the queries and keys (128 heads of 192) and values (of 128), and the normed latents (1,536 and 512).
  CHECK(base_layer - per_layer(Recompute::selective, kRecomputeCoreAttention | kRecomputeLatentUpProjection) ==
        Approx(2 * heads * (192 + 192 + 128) / h + 2 * (1536 + 512) / h));
  // moe_act: each of a token's 8 copies' SwiGLU output, fc2's input (2,048 wide).
  CHECK(base_layer - per_layer(Recompute::selective, kRecomputeCoreAttention | kRecomputeExpertActivation) == Approx(8 * 2 * f / h));
  // moe: the whole MLP side: every copy's gathered input and expert tensors, and the shared expert's.
  CHECK(base_layer - per_layer(Recompute::selective, kRecomputeCoreAttention | kRecomputeMoe) == Approx(8 * (2 + 6 * f / h) + 6 * f / h));
  CHECK(base_layer - per_layer(Recompute::selective, kRecomputeCoreAttention | kRecomputeSharedExperts) == Approx(6 * f / h));

  // fp8: each fp8 GEMM's input kept as a byte where nothing else keeps it in 16 bits. Against bf16: the shared
  // expert's fp8 copy of the pre-MLP norm's output beside the router's (+1), its fc2's input and each of the 8
  // copies' fc1 and fc2 inputs halved, the output projection's input (FlashAttention's output, which core_attn
  // leaves to the projection alone) halved, the normed latents the up-projections read halved. The input
  // norm's output, read by both down-projections, keeps a byte for each: no change.
  const auto fp8_change = [&](unsigned modules) {
    const auto layer = [&](Dtype dtype) { return count_training(with(Recompute::selective, modules, dtype)).activation_bytes_per_layer / sbh; };
    return layer(Dtype::fp8) - layer(Dtype::bf16);
  };
  CHECK(fp8_change(kRecomputeCoreAttention) == Approx(1 - f / h - 8 * (1 + f / h) - heads * 128 / h - (1536 + 512) / h));
  // The SwiGLU input kept in fp8 (bf16 job): each of the 8 routed copies' and the shared expert's gate and up
  // outputs (2 x 2,048 wide) a byte instead of two; nothing where full recomputation keeps no SwiGLU input.
  const auto store_change = [&](Recompute recompute, unsigned modules) {
    TrainingJob stored = with(recompute, modules);
    stored.activation_fp8_input_store = true;
    return (count_training(with(recompute, modules)).activation_bytes_per_layer - count_training(stored).activation_bytes_per_layer) / sbh;
  };
  CHECK(store_change(Recompute::selective, kRecomputeCoreAttention) == Approx(8 * 2 * f / h + 2 * f / h));
  CHECK(store_change(Recompute::selective, kRecomputeMoe) == 0);
  CHECK(store_change(Recompute::full, 0) == 0);
  // DeepSeek-V3's recipe: the norms and the up-projections recomputed, fc2's input freed by moe_act; without
  // core_attn FlashAttention keeps its output and the projection an fp8 copy beside it.
  CHECK(fp8_change(kRecomputeLayerNorm | kRecomputeLatentUpProjection | kRecomputeExpertActivation) == Approx(-f / h - 8 + heads * 128 / h));

  // FLOP re-run: mla_up_proj's up-projections on all 61 layers, moe's router and 9 experts on the 58 mixtures,
  // mlp's dense MLP on the 3 dense layers.
  const auto added = [&](unsigned modules) {
    const TrainingCounts c = count_training(with(Recompute::selective, modules));
    return (c.hardware_flop - c.model_flop) / tokens;
  };
  CHECK(added(kRecomputeLatentUpProjection) == Approx(61 * 2 * (1536 * heads * 192 + 512 * heads * 256)).epsilon(1e-12));
  CHECK(added(kRecomputeMoe) == Approx(58 * 2 * (h * 256 + 9 * 3 * h * f)).epsilon(1e-12));
  CHECK(added(kRecomputeMlp) == Approx(3 * 2 * 3 * h * 18432).epsilon(1e-12));
  CHECK(added(kRecomputeLayerNorm | kRecomputeExpertActivation) == 0);  // memory-bound kernels only

  // moe re-runs the dispatch and the combine in the backward, as full recomputation does; the norms do not.
  const TrainingStep moe = simulate_training_step(with(Recompute::selective, kRecomputeMoe));
  const TrainingStep norms = simulate_training_step(with(Recompute::selective, kRecomputeLayerNorm));
  const TrainingStep none = simulate_training_step(with(Recompute::none, 0));
  CHECK(moe.ep_comm_s == Approx(4 * 3 * 2 * moe.ep_alltoall_s).epsilon(1e-12));
  CHECK(norms.ep_comm_s == Approx(4 * 2 * 2 * norms.ep_alltoall_s).epsilon(1e-12));
  // The re-run kernels lengthen the backward: the norms a little, the whole mixture by about its forward.
  CHECK(norms.backward_kernels.memory_s > none.backward_kernels.memory_s);
  CHECK(norms.backward_kernels.gemm_s == Approx(none.backward_kernels.gemm_s));
  CHECK(moe.backward_kernels.gemm_s > none.backward_kernels.gemm_s);

  TrainingJob recipe = with(Recompute::selective, kRecomputeLayerNorm | kRecomputeLatentUpProjection | kRecomputeExpertActivation);
  std::ostringstream text;
  write_training_text(text, recipe, simulate_training_step(recipe));
  CHECK_THAT(text.str(), Catch::Contains("recompute selective (layernorm, mla_up_proj, moe_act)"));
}

TEST_CASE("Adam's moments in bf16 and the SwiGLU input kept in fp8 save what they say, counted by hand", "[training][recompute]") {
  const auto llama = [](const std::string& extra) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
        "parallel": {"dp": 8, "distributed_optimizer": true}, "batch": {"global": 8}, "recompute": "selective")" + extra + "}",
                              "llama.json");
  };
  const TrainingJob plain = llama(""), stored = llama(R"(, "activation_func_fp8_input_store": true, "optimizer": {"moments": "bf16"})");
  const TrainingCounts a = count_training(plain), b = count_training(stored);
  // The master weight (4) and two moments (2 each) a parameter, sharded 8 ways: 8 bytes where fp32 moments take 12.
  CHECK(b.stage_memory[0].optimizer == Approx(a.stage_memory[0].optimizer * 8 / 12).epsilon(1e-12));
  // The SwiGLU's input, gate and up (2 x 14,336 wide), a byte an element instead of two: 2f/h sbh less a layer.
  const double h = 4096, f = 14336, s = 8192;
  CHECK(a.activation_bytes_per_layer - b.activation_bytes_per_layer == Approx(2 * f / h * s * h).epsilon(1e-12));
  // The casts cost memory-bound time each way; the optimizer step moves 26 bytes a parameter where it moved 34.
  const TrainingStep one = simulate_training_step(plain), two = simulate_training_step(stored);
  CHECK(two.forward_kernels.memory_s > one.forward_kernels.memory_s);
  CHECK(two.backward_kernels.memory_s > one.backward_kernels.memory_s);
  CHECK(two.optimizer_s < one.optimizer_s);
  std::ostringstream text;
  write_training_text(text, stored, two);
  CHECK_THAT(text.str(), Catch::Contains("Adam's moments in bf16, SwiGLU inputs kept in fp8"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 8, "seq_len": 1024},
      "parallel": {}, "batch": {"global": 8}, "activation_func_fp8_input_store": true})"),
             Catch::Contains("job.json: /activation_func_fp8_input_store: expected activation_func_fp8_input_store only for a gated MLP (SwiGLU)"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 8, "seq_len": 1024},
      "parallel": {}, "batch": {"global": 8}, "optimizer": {"moments": "fp8"}})"),
             Catch::Contains("job.json: /optimizer/moments: expected fp32, bf16 or fp16 (Adam's moments), found \"fp8\""));
}

TEST_CASE("recompute_modules that name nothing the model has, or come without selective, are refused with the field", "[training][recompute]") {
  const std::string head = R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 4}]}, "model": {"architecture": ")";
  const auto job = [&](const std::string& model, const std::string& rest, const std::string& parallel = "") {
    const std::string ep = model == "llama-3-8b" ? "" : R"(, "ep": 32)";
    return job_error(head + model + R"(", "seq_len": 4096}, "parallel": {"dp": 32)" + ep + parallel + R"(}, "batch": {"global": 32})" + rest + "}");
  };
  CHECK_THAT(job("deepseek-v3", R"(, "recompute": "full", "recompute_modules": ["moe"])"),
             Catch::Contains("job.json: /recompute_modules: expected recompute_modules only with \"recompute\": \"selective\""));
  CHECK_THAT(job("deepseek-v3", R"(, "recompute": "selective", "recompute_modules": [])"), Catch::Contains("/recompute_modules: expected a non-empty array of module names"));
  CHECK_THAT(job("deepseek-v3", R"(, "recompute": "selective", "recompute_modules": ["moe", "attn"])"),
             Catch::Contains("/recompute_modules/1: expected a module name (core_attn, layernorm, mla_up_proj, moe_act, mlp, moe, shared_experts), found \"attn\""));
  CHECK_THAT(job("deepseek-v3", R"(, "recompute": "selective", "recompute_modules": ["moe", "moe"])"), Catch::Contains("/recompute_modules/1: expected each module once"));
  CHECK_THAT(job("deepseek-v3", R"(, "recompute": "selective", "recompute_modules": ["moe"])", R"(, "ep_overlap": true)"),
             Catch::Contains("expected no moe recomputation with ep_overlap"));
  CHECK(job("deepseek-v3", R"(, "recompute": "selective", "recompute_modules": ["layernorm", "mla_up_proj", "moe_act", "mlp", "shared_experts"])") == "");
  CHECK_THAT(job("llama-3-8b", R"(, "recompute": "selective", "recompute_modules": ["mla_up_proj"])"), Catch::Contains("expected mla_up_proj only for a model with latent attention"));
  CHECK_THAT(job("llama-3-8b", R"(, "recompute": "selective", "recompute_modules": ["moe_act"])"), Catch::Contains("expected moe_act only for a mixture of experts"));
  CHECK_THAT(job("llama-3-8b", R"(, "recompute": "selective", "recompute_modules": ["layernorm"])"), Catch::Contains("Transformer Engine fuses the other norms"));
  CHECK(job("llama-3-8b", R"(, "recompute": "selective", "recompute_modules": ["core_attn", "mlp"])") == "");
}

TEST_CASE("torchtitan's recomputation by op re-runs every second matrix product and the ops between, counted by hand", "[training][recompute]") {
  const auto llama = [](const std::string& recompute, int tp = 1, const std::string& extra = "") {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
        "parallel": {"tp": )" + std::to_string(tp) + R"(, "dp": )" + std::to_string(8 / tp) + R"(, "distributed_optimizer": true)" + extra + R"(}, "batch": {"global": 8},
        "recompute": ")" + recompute + "\"}",
                              "llama.json");
  };
  const double h = 4096, f = 14336, s = 8192, kv = 8 * 128, a = 32, sbh = s * h, tokens = 8 * s;
  const TrainingJob op = llama("selective_op");
  const TrainingCounts c = count_training(op);
  // Of wq, wk, wv, wo, w1, w3 and w2 the policy saves the odd ones: wk, wo and w3 run again, on all 32 layers.
  CHECK((c.hardware_flop - c.model_flop) / tokens == Approx(32 * 2 * h * (kv + h + f)).epsilon(1e-12));
  // Kept a layer: its input 2, wq's and attention's outputs 2 each, wv's 2 kv/h, w1's 2f/h, w2's 2, the
  // log-sum-exp 4a/h (fp32 a head and token): 15.5 sbh, against 36 with nothing recomputed and 2 with everything.
  CHECK(c.activation_bytes_per_layer / sbh == Approx(2 + 2 + 2 + 2 * kv / h + 2 * f / h + 2 + 4 * a / h).epsilon(1e-12));
  CHECK(count_training(llama("none")).activation_bytes_per_layer / sbh == Approx(36 + 4 * a / h).epsilon(1e-12));
  // TP 2 with sequence parallelism: the input and the two reduce-scatters' outputs split, wq, wv, attention and
  // w1 split, w2's partial sums whole on each rank; one all-reduce's worth of all-gathers re-run a layer.
  const TrainingCounts tp = count_training(llama("selective_op", 2, R"(, "sequence_parallel": true)"));
  CHECK(tp.activation_bytes_per_layer / sbh == Approx((2 + 4 + 4 + 2 * kv / h + 2 * f / h + 4 * a / h) / 2 + 2).epsilon(1e-12));
  CHECK(tp.tp_allreduces_per_layer == 5);
  // The backward runs the re-run GEMMs and memory-bound ops: between none and full, which re-runs attention too.
  const TrainingStep none = simulate_training_step(llama("none")), by_op = simulate_training_step(op), full = simulate_training_step(llama("full"));
  CHECK(by_op.backward_kernels.gemm_s > none.backward_kernels.gemm_s);
  CHECK(by_op.backward_kernels.gemm_s < full.backward_kernels.gemm_s);
  CHECK(by_op.backward_kernels.memory_s > none.backward_kernels.memory_s);
  CHECK(by_op.backward_kernels.attention_s == Approx(none.backward_kernels.attention_s));
  CHECK(by_op.iteration_s > none.iteration_s);
  CHECK(by_op.iteration_s < full.iteration_s);
  std::ostringstream text;
  write_training_text(text, op, by_op);
  CHECK_THAT(text.str(), Catch::Contains("recompute selective_op"));
  // Refused with the field where torchtitan's policy would meet other ops.
  const std::string head = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "parallel": {"dp": 8}, "batch": {"global": 8}, "recompute": "selective_op", )";
  CHECK_THAT(job_error(head + R"("model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 8, "seq_len": 1024}})"),
             Catch::Contains("job.json: /recompute: expected selective_op only for a dense Llama-layout model"));
  CHECK_THAT(job_error(head + R"("model": {"architecture": "mixtral-8x7b", "seq_len": 4096}})"), Catch::Contains("/recompute: expected selective_op only for a dense Llama-layout model"));
  CHECK_THAT(job_error(head + R"("model": {"architecture": "qwen2-7b", "seq_len": 4096}})"), Catch::Contains("/recompute: expected selective_op only for a dense Llama-layout model"));
  CHECK_THAT(job_error(head + R"("model": {"architecture": "llama-3-8b", "seq_len": 4096}, "activation_func_fp8_input_store": true})"),
             Catch::Contains("/activation_func_fp8_input_store: expected no activation_func_fp8_input_store with selective_op"));
  CHECK_THAT(job_error(head + R"("model": {"architecture": "llama-3-8b", "seq_len": 4096}, "attention": "unfused"})"),
             Catch::Contains("/attention: expected flash attention with selective_op"));
  CHECK_THAT(job_error(head + R"("model": {"architecture": "llama-3-8b", "seq_len": 4096}, "dtype": "fp8"})"), Catch::Contains("/dtype: expected bf16 or fp16 with selective_op"));
  CHECK_THAT(job_error(head + R"("model": {"architecture": "llama-3-8b", "seq_len": 4096}, "recompute_modules": ["core_attn"]})"),
             Catch::Contains("/recompute_modules: expected recompute_modules only with \"recompute\": \"selective\""));
}

TEST_CASE("full recomputation of the first layers of each chunk: those re-run, the others keep their activations (by hand)", "[training][recompute]") {
  const auto llama = [](const std::string& recompute, int tp = 1) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 8192},
        "parallel": {"tp": )" + std::to_string(tp) + R"(, "dp": )" + std::to_string(8 / tp) + R"(, "distributed_optimizer": true, "sequence_parallel": )" +
                                  (tp > 1 ? "true" : "false") + R"(}, "batch": {"global": 8}, "recompute": )" + recompute + "}",
                              "llama.json");
  };
  const TrainingCounts none = count_training(llama(R"("none")")), full = count_training(llama(R"("full")"));
  for (int layers : {1, 12, 31}) {
    INFO(layers);
    const TrainingJob partial = llama(R"("full", "recompute_layers": )" + std::to_string(layers));
    const TrainingCounts c = count_training(partial);
    // One stage of 32 layers, one micro-batch in flight: `layers` of them re-run their forward and keep their
    // input; the others keep everything.
    CHECK(c.hardware_flop - c.model_flop == Approx((full.hardware_flop - full.model_flop) * layers / 32).epsilon(1e-12));
    CHECK(c.stage_memory[0].activations == Approx(layers * full.activation_bytes_per_layer + (32 - layers) * none.activation_bytes_per_layer).epsilon(1e-12));
  }
  CHECK(count_training(llama(R"("full", "recompute_layers": 12)")).kept_layer_activation_bytes == Approx(none.activation_bytes_per_layer).epsilon(1e-12));
  CHECK(full.kept_layer_activation_bytes == 0);
  // All 32: full recomputation, to the byte and the nanosecond.
  const TrainingJob all = llama(R"("full", "recompute_layers": 32)");
  CHECK(count_training(all).stage_memory[0].activations == full.stage_memory[0].activations);
  CHECK(simulate_training_step(all).iteration_s == simulate_training_step(llama(R"("full")")).iteration_s);
  // Time grows with the layers re-run, between none and full; with TP, so do the exchanges (6 a layer re-run, 4 the others).
  double last = simulate_training_step(llama(R"("none")")).iteration_s;
  for (int layers : {8, 16, 24}) {
    const double now = simulate_training_step(llama(R"("full", "recompute_layers": )" + std::to_string(layers))).iteration_s;
    CHECK(now > last);
    last = now;
  }
  CHECK(last < simulate_training_step(llama(R"("full")")).iteration_s);
  const TrainingStep tp_none = simulate_training_step(llama(R"("none")", 2)), tp_full = simulate_training_step(llama(R"("full")", 2));
  const TrainingStep tp_half = simulate_training_step(llama(R"("full", "recompute_layers": 16)", 2));
  CHECK(tp_half.tp_comm_s == Approx((tp_none.tp_comm_s + tp_full.tp_comm_s) / 2).epsilon(1e-12));
  CHECK(tp_full.tp_comm_s == Approx(tp_none.tp_comm_s * 6 / 4).epsilon(1e-12));
  std::ostringstream text;
  write_training_text(text, llama(R"("full", "recompute_layers": 12)"), simulate_training_step(llama(R"("full", "recompute_layers": 12)")));
  CHECK_THAT(text.str(), Catch::Contains("recompute full (the first 12 layers of each model chunk; the others keep their activations)"));

  // Interleaved, per chunk: 16 layers on 4 stages of 2 virtual stages is 8 chunks of 2; the first of each re-runs.
  TrainingJob gpt = small(4, 16, PipelineSchedule::one_f_one_b);
  gpt.vp = 2;
  gpt.recompute = Recompute::full;
  check_training_job(gpt);
  const TrainingCounts whole = count_training(gpt);
  gpt.recompute_layers = 1;
  check_training_job(gpt);
  const TrainingCounts half = count_training(gpt);
  CHECK(half.hardware_flop - half.model_flop == Approx((whole.hardware_flop - whole.model_flop) / 2).epsilon(1e-12));

  // A multi-token prediction module's layer is never recomputed under the block method (Megatron-Core skips it).
  const auto mtp = [](const std::string& recompute) {
    return count_training(parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64, "experts": 4, "experts_per_token": 2, "mtp_layers": 1},
        "parallel": {"dp": 8}, "batch": {"global": 8}, "recompute": )" + recompute + "}",
                                             "mtp.json"));
  };
  const TrainingCounts mtp_full = mtp(R"("full")"), mtp_layers = mtp(R"("full", "recompute_layers": 4)");
  CHECK(mtp_layers.hardware_flop - mtp_layers.model_flop == Approx((mtp_full.hardware_flop - mtp_full.model_flop) * 4 / 5).epsilon(1e-12));

  // Refused with the field: without full recomputation, past the model's layers, not a positive count, with DualPipe.
  const std::string head = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": {"dp": 8}, "batch": {"global": 8}, )";
  CHECK_THAT(job_error(head + R"("recompute": "selective", "recompute_layers": 4})"),
             Catch::Contains("job.json: /recompute_layers: expected recompute_layers only with \"recompute\": \"full\""));
  CHECK_THAT(job_error(head + R"("recompute_layers": 4})"), Catch::Contains("/recompute_layers: expected recompute_layers only with \"recompute\": \"full\""));
  CHECK_THAT(job_error(head + R"("recompute": "full", "recompute_layers": 33})"), Catch::Contains("/recompute_layers: expected at most the model's 32 layers, found 33"));
  CHECK_THAT(job_error(head + R"("recompute": "full", "recompute_layers": 0})"), Catch::Contains("/recompute_layers"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-8b", "seq_len": 4096}, "parallel": {"pp": 4, "dp": 2},
      "batch": {"global": 16}, "schedule": "dualpipe", "recompute": "full", "recompute_layers": 4})"),
             Catch::Contains("/recompute_layers: expected every layer recomputed under dualpipe"));
}

TEST_CASE("latent attention's kernels: down-projections whole on every TP rank, up-projections split, heads of 192 and 128", "[training][mla]") {
  // One dense DeepSeek-style layer would need a hand-written model; the catalog's on 8 GPUs, TP 2, compares the
  // GEMMs of TP 2 with TP 1 at compute_efficiency: the FLOP are the same, the parameters per GPU are not halved
  // where the down-projections are held whole.
  const auto job = [](int tp) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h800-8", "count": 32}]}, "model": {"architecture": "deepseek-v3", "seq_len": 4096},
        "parallel": {"tp": )" + std::to_string(tp) + R"(, "pp": 16, "first_stage_layers": 3, "last_stage_layers": 2, "dp": )" + std::to_string(16 / tp) +
                                  R"(, "ep": 16, "etp": 1, "sequence_parallel": true, "distributed_optimizer": true}, "batch": {"global": 64}, "recompute": "full"})",
                              "tp.json");
  };
  const TrainingJob one = job(1), two = job(2);
  const TransformerModel& m = one.model;
  const double h = 7168, replicated = h * 1536 + h * 576;
  CHECK(m.latent->replicated_parameters(h) == replicated);
  const double stage0_one = count_training(one).stage_parameters[0], stage0_two = count_training(two).stage_parameters[0];
  const double V = 129280;
  CHECK(stage0_two == Approx((3 * (m.layer_parameters(false) - replicated) + V * h) / 2 + 3 * replicated).epsilon(1e-12));
  CHECK(stage0_one > stage0_two);
  // Activations without recomputation (Korthikanti's terms per s b h, TP 2 with sequence parallelism): the dense
  // layer's 10, the heads' q and k (192) and v and output input (128) 4 x 128 x 320 / h, the MLP's 6 f / h, FlashAttention's
  // 4 a / h, all over TP, and the latents every rank holds whole: 2 (2 x 1536 + 2 x 512 + 64) / h.
  TrainingJob none = two;
  none.recompute = Recompute::none;
  const double s = 4096, sbh = s * h, split = 4.0 * 128 * 320 / h + 6.0 * 18432 / h, whole = 2.0 * (2 * 1536 + 2 * 512 + 64) / h;
  CHECK(count_training(none).dense_layer_activation_bytes == Approx(sbh * (10 + split + 4 * 128 / h) / 2 + whole * sbh).epsilon(1e-12));
  // The kernel model's forward of the first stage at TP 2 is faster than at TP 1, but not twice: the
  // down-projections and the latents' norms are not split.
  const TrainingStep a = simulate_training_step(one), b = simulate_training_step(two);
  CHECK(b.forward_kernels.gemm_s < a.forward_kernels.gemm_s);
  CHECK(b.forward_kernels.gemm_s > a.forward_kernels.gemm_s / 2);
}

TEST_CASE("uneven pipeline stages that cannot split the layers are refused with the field", "[training][mla]") {
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 10, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64},
      "parallel": {"pp": 4, "first_stage_layers": 2}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel: expected the 10 layers less the first and last stages' 2 to split evenly over the other 3 stages"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 10, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64},
      "parallel": {"pp": 1, "first_stage_layers": 2}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel/pp: expected pipeline stages"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 12, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64},
      "parallel": {"pp": 4, "vp": 2, "first_stage_layers": 3, "last_stage_layers": 3}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel/vp: expected no virtual stages"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 10, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64},
      "parallel": {"pp": 4}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel/pp: expected a divisor of the 10 layers, found 4 (first_stage_layers and last_stage_layers"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 10, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64},
      "parallel": {"pp": 4, "first_stage_layers": 11}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel/first_stage_layers"));
  // Dense first layers belong to a mixture of experts and need their width; the architecture's are its own.
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 10, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64,
      "dense_layers": 2}, "parallel": {}, "batch": {"global": 8}})"),
             Catch::Contains("/model/dense_layers: expected \"dense_layers\" only beside \"experts\""));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 10, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64,
      "experts": 4, "experts_per_token": 2, "dense_layers": 2}, "parallel": {}, "batch": {"global": 8}})"),
             Catch::Contains("/model/dense_ffn"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "deepseek-v3", "dense_layers": 1, "seq_len": 4096},
      "parallel": {"tp": 8}, "batch": {"global": 8}})"),
             Catch::Contains("/model/dense_layers: comes from the architecture"));
  // Uneven stages play out: the first stage, with a layer more, is the slowest, and each stage's last backward
  // follows its load.
  const TrainingJob job = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 10, "hidden": 2048, "heads": 16, "vocab": 1, "seq_len": 2048},
      "parallel": {"pp": 4, "first_stage_layers": 4, "last_stage_layers": 2}, "batch": {"global": 16}, "compute_efficiency": 0.5})",
                                             "uneven.json");
  CHECK(job.stage_layers() == std::vector<int>{4, 2, 2, 2});
  const TrainingStep step = simulate_training_step(job);
  const auto pass = [&](int stage) {
    for (const PipelineOp& op : step.ops) {
      if (op.stage == stage && !op.backward) return op.end_s - op.start_s;
    }
    return 0.0;
  };
  CHECK(pass(0) == Approx(2 * pass(1)).epsilon(1e-9));
  CHECK(pass(2) == Approx(pass(1)).epsilon(1e-12));
  CHECK(pass(3) == Approx(pass(1)).epsilon(1e-4));  // and the (one-word) head
  CHECK(step.forward_s == Approx(pass(0)).epsilon(1e-12));
}

TEST_CASE("train --search splits layers unevenly where the stages do not divide them", "[training][mla]") {
  TrainingJob base = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 7, "hidden": 1024, "heads": 8, "vocab": 1000, "seq_len": 1024},
      "parallel": {"dp": 8}, "batch": {"global": 16}})",
                                        "seven.json");
  const TrainingSearch search = search_training(base, 1);
  bool uneven = false;
  for (const TrainingCandidate& c : search.ranked) {
    if (c.job.pp == 4) {
      // 7 over 4: the middle stages 2 each, the ends 2 and 1.
      CHECK(c.job.stage_layers() == std::vector<int>{2, 2, 2, 1});
      uneven = true;
    }
    if (c.job.pp == 7) CHECK(c.job.first_stage_layers == 0);
  }
  CHECK(uneven);
}

TEST_CASE("combined 1F1B: each steady backward runs with the next forward, the shorter of their compute and all-to-alls hidden", "[training][moe]") {
  // Mixtral 8x7B on two nodes, no pipeline: EP 16 across the nodes, so the all-to-alls matter.
  const auto job = [](bool overlap) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
        "parallel": {"dp": 16, "ep": 8, "etp": 1, "distributed_optimizer": true, "ep_overlap": )" + std::string(overlap ? "true" : "false") + R"(},
        "batch": {"global": 64}, "recompute": "selective"})",
                              "overlap.json");
  };
  const TrainingJob plain = job(false), paired = job(true);
  const TrainingStep a = simulate_training_step(plain), b = simulate_training_step(paired);
  // The passes are the same; the schedule differs: F0, then B0 with F1, ..., B2 with F3, then B3 (4 micro-batches).
  REQUIRE(plain.micro_batches() == 4);
  CHECK(b.forward_s == a.forward_s);
  CHECK(b.backward_s == a.backward_s);
  const double F = a.forward_s, B = a.backward_s;
  const double alltoalls = a.ep_comm_s;                          // a micro-batch's, forward and backward
  const double compute = F + B - alltoalls;                      // no TP, no CP: the rest is compute
  const double pair = F + B - std::min(compute, alltoalls);
  const double tail = b.iteration_s - b.stage_end_s[0];           // the DP reduction and the optimizer, as before
  CHECK(tail == Approx(a.iteration_s - a.stage_end_s[0]).epsilon(1e-12));
  CHECK(a.stage_end_s[0] == Approx(4 * (F + B)).epsilon(1e-12));
  CHECK(b.stage_end_s[0] == Approx(F + 3 * pair + B).epsilon(1e-12));
  CHECK(b.iteration_s < a.iteration_s);
  // A forward starts beside the backward before it: a stage holds one micro-batch more.
  const TrainingCounts ca = count_training(plain), cb = count_training(paired);
  CHECK(cb.stage_memory[0].activations == Approx(2 * ca.stage_memory[0].activations).epsilon(1e-12));
  // Interleaved stages pair passes without waiting on each other (every pass played once, in dependency order).
  TrainingJob piped = paired;
  piped.pp = 2;
  piped.vp = 2;
  piped.dp = 8;
  const TrainingStep c = simulate_training_step(piped);
  CHECK(c.ops.size() == static_cast<std::size_t>(2 * 2 * 2 * piped.micro_batches()));
  // Refused where Megatron-Core cannot run it, each naming the field.
  const std::string base = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": {"architecture": "mixtral-8x7b", "seq_len": 4096},
      "parallel": {PARALLEL, "ep_overlap": true}, "batch": {"global": 64}SCHEDULE})";
  auto with = [&](const std::string& parallel, const std::string& schedule = "") {
    std::string text = base;
    text.replace(text.find("PARALLEL"), 8, parallel);
    text.replace(text.find("SCHEDULE"), 8, schedule);
    return job_error(text);
  };
  CHECK_THAT(with(R"("dp": 16)"), Catch::Contains("/parallel/ep_overlap: expected ep_overlap only with expert parallelism"));
  CHECK_THAT(with(R"("dp": 16, "ep": 8)", R"(, "recompute": "full")"), Catch::Contains("/recompute: expected no full recomputation with ep_overlap"));
  CHECK_THAT(with(R"("pp": 2, "dp": 8, "ep": 8)"), Catch::Contains("/parallel/ep_overlap: expected virtual stages (vp above 1)"));
  CHECK_THAT(with(R"("dp": 16, "ep": 8)", R"(, "schedule": "gpipe")"), Catch::Contains("/parallel/ep_overlap: expected ep_overlap with the 1f1b schedule"));
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 64},
      "parallel": {"dp": 8, "ep_overlap": true}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel/ep_overlap: expected ep_overlap only for a mixture of experts"));
}

TEST_CASE("CPU offload of the optimizer: memory moves to the host, and the step is the copies and the node's CPU (by hand)", "[training][offload]") {
  // GPT-2 1.3B-like on one 8x H100 node, DP 8 with a distributed optimizer: each GPU's shard is an eighth.
  // pcie5-x16: 63 GB/s a GPU; the node's host memory: 614.4 GB/s, 2 TB (models/hardware.json).
  const auto job = [](const std::string& optimizer) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "model": {"layers": 24, "hidden": 2048, "heads": 16, "vocab": 51200, "seq_len": 2048},
        "parallel": {"dp": 8, "distributed_optimizer": true}, "batch": {"global": 8, "micro": 1},
        "compute_efficiency": 0.5, "optimizer": )" + optimizer + "}",
                              "offload.json");
  };
  const TrainingJob none = job("{}");
  const TrainingJob torch = job(R"({"offload": 1})");
  const TrainingCounts c0 = count_training(none), c = count_training(torch);
  const double shard = c.stage_parameters[0] / 8;
  CHECK(c.stage_offloaded_parameters[0] == Approx(shard));
  CHECK(c0.stage_memory[0].optimizer == Approx(12 * shard));
  CHECK(c.stage_memory[0].optimizer == Approx(0).margin(1e-6));
  CHECK(c.stage_memory[0].host == Approx(16 * shard));  // fp32 master and moments, and the fp32 gradients copied down
  CHECK(c.stage_memory[0].gradients == c0.stage_memory[0].gradients);  // Megatron-Core keeps them on the GPU

  // Under compute_efficiency the GPU's own step is not timed: the optimizer is the offload alone. The node's eight
  // GPUs step eight shards on its CPUs: at 0.7 G parameters a second (models/kernels.json), slower than host
  // memory moves Adam's 30 bytes each; each GPU's copies at its own link's 63 GB/s, the eight together under
  // host memory's 614.4 GB/s.
  const double all = 8 * shard;
  const double down = std::max(shard * 4 / 63e9, all * 4 / 614.4e9), cpu = std::max(all / 7e8, all * 30 / 614.4e9),
               up = std::max(shard * 2 / 63e9, all * 2 / 614.4e9);
  const TrainingStep s0 = simulate_training_step(none), s = simulate_training_step(torch);
  CHECK(s0.optimizer_s == 0);
  CHECK(s.offload_down_s == Approx(down));
  CHECK(s.offload_cpu_s == Approx(cpu));
  CHECK(s.offload_up_s == Approx(up));
  CHECK(s.optimizer_s == Approx(down + cpu + up));
  CHECK(s.iteration_s == Approx(s0.iteration_s + down + cpu + up));
  // Pipelined tensor by tensor: the slowest of the three.
  CHECK(simulate_training_step(job(R"({"offload": 1, "offload_overlap": true})")).optimizer_s == Approx(cpu));
  // Half: half the parameters, the CPU's step half as long.
  CHECK(simulate_training_step(job(R"({"offload": 0.5})")).offload_cpu_s == Approx(cpu / 2));

  // DeepSpeed: its CPU-Adam's rate (its logged step holds the copy up), and the GPU keeps one reduce bucket of gradients.
  const TrainingJob ds = job(R"({"offload": 1, "cpu_adam": "deepspeed"})");
  const TrainingStep sd = simulate_training_step(ds);
  CHECK(sd.offload_cpu_s == Approx(std::max(all / 1.6e9, all * 30 / 614.4e9)));
  CHECK(sd.offload_up_s == 0);
  CHECK(count_training(ds).stage_memory[0].gradients == Approx(std::min(c0.stage_memory[0].gradients, 2 * 5e8)));
}

TEST_CASE("train --search keeps the optimizer on the GPU where it fits: an offloading job that fits searches as one without", "[training][offload]") {
  const std::string job = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 4, "hidden": 1024, "heads": 8, "vocab": 1000, "seq_len": 1024},
      "parallel": {"dp": 8, "distributed_optimizer": true}, "batch": {"global": 16, "micro": 1}, "compute_efficiency": 0.5)";
  const TrainingSearch with = search_training(parse_training_job(job + R"(, "optimizer": {"offload": 1}})", "with.json"), 1);
  const TrainingSearch without = search_training(parse_training_job(job + "}", "without.json"), 1);
  CHECK(with.searched == without.searched);
  REQUIRE(with.ranked.size() == without.ranked.size());
  CHECK(with.searched == with.ranked.size() + with.out_of_memory);  // no FSDP candidate refused for the offload
  CHECK(with.offloaded == 0);
  for (std::size_t k = 0; k < with.ranked.size(); ++k) {
    CHECK(with.ranked[k].job.optimizer_offload == 0);
    CHECK(with.ranked[k].step.iteration_s == without.ranked[k].step.iteration_s);
  }
}

TEST_CASE("train --search offloads what the job offloads where a candidate does not fit otherwise", "[training][offload]") {
  // Llama 3 70B on one 8x H100 node: its weights, gradients and Adam's state (16 bytes a parameter) are 1.1 TB,
  // more than the node's 640 GB of VRAM, so no candidate fits on the GPUs; with the optimizer in host memory some do.
  const std::string job = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-70b", "seq_len": 4096},
      "batch": {"global": 32}, "recompute": "full", )";
  const TrainingSearch kept = search_training(parse_training_job(job + R"("parallel": {"dp": 8, "zero": 3}})", "kept.json"), 2);
  const TrainingSearch offloading = search_training(
      parse_training_job(job + R"("parallel": {"dp": 8, "zero": 3, "offload_parameters": true}, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}})", "offloading.json"), 2);
  CHECK(kept.ranked.empty());
  CHECK(kept.out_of_memory == kept.searched);
  CHECK(offloading.searched == kept.searched);
  REQUIRE(!offloading.ranked.empty());
  CHECK(offloading.offloaded == offloading.ranked.size());
  CHECK(offloading.searched == offloading.ranked.size() + offloading.out_of_memory);
  for (const TrainingCandidate& c : offloading.ranked) {
    CHECK(c.job.optimizer_offload == 1);
    // ZeRO-3 Offload is DeepSpeed's; a ZeRO-1 candidate offloads as Megatron-Core, which runs every such shape.
    CHECK(c.job.cpu_adam == (c.job.zero_stage() >= 3 ? TrainingJob::CpuAdam::deepspeed : TrainingJob::CpuAdam::torch));
    // Each needed what it offloads: without the weights' offload (where it took it), or without any, it does not fit.
    TrainingJob less = c.job;
    if (less.offload_parameters) {
      less.offload_parameters = false;
    } else {
      less.optimizer_offload = 0;
    }
    CHECK(out_of_memory(less, count_training(less)).has_value());
    CHECK_FALSE(out_of_memory(c.job, count_training(c.job)).has_value());
  }
}

TEST_CASE("an offloaded optimizer that does not fit in host memory is refused, and offload settings are checked", "[training][offload]") {
  // GPT-3 175B on TP 8 alone: each GPU's 21.9 B parameters; with DeepSpeed's offload the GPU holds the weights and
  // a gradient bucket (fits in 80 GB), the host 16 bytes each of every GPU's: 2.8 TB, over the node's 2 TB.
  TrainingJob big = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 96, "hidden": 12288, "heads": 96, "vocab": 51200, "seq_len": 2048},
      "parallel": {"tp": 8, "zero": 1}, "batch": {"global": 1, "micro": 1}, "recompute": "full",
      "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}})",
                                       "big.json");
  const TrainingCounts c = count_training(big);
  const std::optional<OutOfMemory> oom = out_of_memory(big, c);
  REQUIRE(oom.has_value());
  CHECK(oom->host);
  CHECK(oom->needed_bytes == Approx(8 * 16 * c.stage_parameters[0]));
  CHECK(oom->vram_bytes == Approx(2e12));
  big.optimizer_offload = 0;
  const std::optional<OutOfMemory> on_gpu = out_of_memory(big, count_training(big));
  REQUIRE(on_gpu.has_value());
  CHECK_FALSE(on_gpu->host);

  const std::string base = R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "model": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 128}, "batch": {"global": 8}, )";
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8}, "optimizer": {"offload": 1}})"),
             Catch::Contains("/optimizer/offload: expected a sharded optimizer beside it"));
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 1}, "optimizer": {"offload": 0.5, "cpu_adam": "deepspeed"}})"),
             Catch::Contains("/optimizer/offload: expected 1 with cpu_adam \"deepspeed\""));
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 1}, "optimizer": {"offload": 1, "cpu_adam": "deepspeed", "offload_overlap": true}})"),
             Catch::Contains("/optimizer/offload_overlap: expected it only with cpu_adam \"torch\""));
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 1}, "optimizer": {"cpu_adam": "torch"}})"),
             Catch::Contains("/optimizer/cpu_adam: expected \"cpu_adam\" only beside \"offload\" above 0"));
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 1}, "optimizer": {"offload": 2}})"), Catch::Contains("/optimizer/offload"));
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 3}, "optimizer": {"offload": 1}})"),
             Catch::Contains("/optimizer/cpu_adam: expected \"deepspeed\" with ZeRO-3"));
  CHECK(job_error(base + R"("parallel": {"dp": 8, "zero": 3}, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}})").empty());
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 2, "offload_parameters": true}, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}})"),
             Catch::Contains("/parallel/offload_parameters: expected \"zero\": 3 with it"));
  CHECK_THAT(job_error(base + R"("parallel": {"dp": 8, "zero": 3, "offload_parameters": true}})"),
             Catch::Contains("/parallel/offload_parameters: expected the optimizer offloaded too"));
}

TEST_CASE("ZeRO-3's parameter offload: the weights' shard in host memory, copied up before each layer (by hand)", "[training][offload]") {
  // GPT-2 1.3B-like on one 8x H100 node under ZeRO-3 with DeepSpeed's CPU optimizer; the node's host links carry
  // 63 GB/s a GPU, its host memory 614.4 GB/s (models/hardware.json).
  const auto job = [](int dp, bool offload) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "model": {"layers": 24, "hidden": 2048, "heads": 16, "vocab": 51200, "seq_len": 128},
        "parallel": {"dp": )" + std::to_string(dp) + R"(, "zero": 3, "offload_parameters": )" + (offload ? "true" : "false") + R"(},
        "batch": {"global": 8, "micro": 1}, "compute_efficiency": 0.5, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}})",
                              "zero-infinity.json");
  };
  const TrainingCounts kept = count_training(job(8, false)), offloaded = count_training(job(8, true));
  const double shard = 2 * kept.stage_parameters[0] / 8;  // 16-bit weights, an eighth a GPU
  CHECK(offloaded.stage_memory[0].weights == Approx(kept.stage_memory[0].weights - shard));
  CHECK(offloaded.stage_memory[0].host == Approx(kept.stage_memory[0].host + shard));
  // Eight GPUs each copy an eighth of a layer up at once: each at its own link's 63 GB/s, together under host
  // memory's 614.4 GB/s (the links bind).
  const double layer = kept.zero_gather_bytes_per_layer;
  const TrainingStep with = simulate_training_step(job(8, true)), without = simulate_training_step(job(8, false));
  CHECK(with.zero_fetch_s == Approx(std::max(layer / 8 / 63e9, layer / 614.4e9)));
  CHECK(without.zero_fetch_s == 0);
  // At 128 tokens a micro-batch a layer computes in less than a gather takes: the gathers bind, 24 a pass and
  // the first. With the weights offloaded each layer's shard is copied up before its gather (the next layer's
  // copy and gather beside the compute, one layer ahead): each of the 25 waits takes a copy more.
  REQUIRE(without.forward_s == Approx(25 * with.zero_gather_s));
  REQUIRE(without.backward_s == Approx(25 * with.zero_gather_s));
  CHECK(with.forward_s == Approx(25 * (with.zero_gather_s + with.zero_fetch_s)));
  CHECK(with.backward_s == Approx(25 * (with.zero_gather_s + with.zero_fetch_s)));
  // The reduce-scatters beside the last backward hide behind its longer layers: a copy's worth less of them a layer.
  CHECK(with.dp_allreduce_s == Approx(without.dp_allreduce_s - 24 * with.zero_fetch_s));
  // One GPU (DP 1: nothing gathered): the whole layer comes up its link, before each layer, the next one's
  // beside the compute; the copies bind, and each pass takes one more than it has layers.
  const TrainingStep alone = simulate_training_step(job(1, true)), alone_kept = simulate_training_step(job(1, false));
  const double fetch = std::max(layer / 63e9, layer / 614.4e9);
  CHECK(alone.zero_fetch_s == Approx(fetch));
  REQUIRE(alone_kept.forward_s / 24 < fetch);
  CHECK(alone.forward_s == Approx(25 * fetch));
  CHECK(alone.backward_s == Approx(25 * std::max(fetch, alone_kept.backward_s / 24)));
}

TEST_CASE("a search shared by two ranks ranks what one process ranks, offload included", "[training][offload][search]") {
  const TrainingJob job = parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"architecture": "llama-3-70b", "seq_len": 4096},
      "batch": {"global": 32}, "recompute": "full", "parallel": {"dp": 8, "zero": 3, "offload_parameters": true}, "optimizer": {"offload": 1, "cpu_adam": "deepspeed"}})",
                                             "offload.json");
  const TrainingSearch one = search_training(job, 1);
  std::array<TrainingSearch, 2> shared;
  test::on_two_ranks([&](unsigned rank, const test::Exchange& exchange) {
    shared[rank] = search_training(job, 1, {}, {.rank = rank, .ranks = 2, .exchange = exchange, .keep = 12});
  });
  for (const TrainingSearch& s : shared) {
    CHECK(s.searched == one.searched);
    CHECK(s.out_of_memory == one.out_of_memory);
    CHECK(s.ranked_total == one.ranked_total);
    CHECK(s.offloaded == one.offloaded);
    REQUIRE(s.ranked.size() == std::min<std::size_t>(12, one.ranked_total));
    for (std::size_t k = 0; k < s.ranked.size(); ++k) {
      CHECK(s.ranked[k].step.iteration_s == one.ranked[k].step.iteration_s);
      CHECK(s.ranked[k].step.mfu == one.ranked[k].step.mfu);
      CHECK(s.ranked[k].job.tp == one.ranked[k].job.tp);
      CHECK(s.ranked[k].job.optimizer_offload == one.ranked[k].job.optimizer_offload);
      CHECK(s.ranked[k].job.cpu_adam == one.ranked[k].job.cpu_adam);
      CHECK(s.ranked[k].job.offload_parameters == one.ranked[k].job.offload_parameters);
    }
  }
}

TEST_CASE("gradients reduced in fp32: twice the bytes reduced and kept, the gathers unchanged (by hand)", "[training][reduce]") {
  // GPT-2 1.3B-like on one 8x H100 node, DP 8, under ZeRO-1 (an all-reduce) and FSDP (gathers and reduce-scatters).
  const auto job = [](int zero, const std::string& reduce) {
    return parse_training_job(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
        "model": {"layers": 24, "hidden": 2048, "heads": 16, "vocab": 51200, "seq_len": 2048},
        "parallel": {"dp": 8, "zero": )" + std::to_string(zero) + R"(, "reduce_dtype": ")" + reduce + R"("}, "batch": {"global": 8, "micro": 1}})",
                              "reduce.json");
  };
  for (int zero : {1, 3}) {
    INFO("zero " << zero);
    const TrainingCounts bf16 = count_training(job(zero, "bf16")), fp32 = count_training(job(zero, "fp32"));
    CHECK(fp32.dp_allreduce_bytes[0] == Approx(2 * bf16.dp_allreduce_bytes[0]));
    CHECK(fp32.stage_memory[0].gradients == Approx(2 * bf16.stage_memory[0].gradients));  // a fp32 buffer (ZeRO-1) or shard (FSDP)
    CHECK(fp32.stage_memory[0].weights == bf16.stage_memory[0].weights);
    CHECK(fp32.zero_gather_bytes_per_layer == bf16.zero_gather_bytes_per_layer);  // the weights still gathered in bf16
  }
  // ZeRO-1's all-reduce after the backward moves twice the bytes: on one node's NVLink, bandwidth-bound, about twice the time.
  const TrainingStep a = simulate_training_step(job(1, "bf16")), b = simulate_training_step(job(1, "fp32"));
  CHECK(b.dp_allreduce_s == Approx(2 * a.dp_allreduce_s).epsilon(0.1));
  CHECK(b.iteration_s > a.iteration_s);
  // FSDP: the gathers as before; the reduce-scatters beside the last backward carry twice the bytes.
  const TrainingStep f = simulate_training_step(job(3, "bf16")), g = simulate_training_step(job(3, "fp32"));
  CHECK(g.zero_gather_s == f.zero_gather_s);
  CHECK(g.dp_allreduce_s >= f.dp_allreduce_s);
  CHECK_THAT(job_error(R"({"cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": {"layers": 2, "hidden": 256, "heads": 4, "vocab": 100, "seq_len": 128},
      "parallel": {"dp": 8, "reduce_dtype": "fp16"}, "batch": {"global": 8}})"),
             Catch::Contains("/parallel/reduce_dtype: expected bf16 or fp32 (the dtype gradients are reduced in), found \"fp16\""));
}
