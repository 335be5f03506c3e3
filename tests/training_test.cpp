// The transformer training template against the published formulas (Narayanan et al. SC21 for
// parameters and FLOP, Korthikanti et al. MLSys 2023 for activation memory), and the pipeline played
// event by event against the closed form of its bubble.
#include <catch2/catch.hpp>
#include <map>
#include <tuple>

#include "fleetsim/error.hpp"
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
      "parallel": {"pp": 4}, "batch": {"global": 16, "micro": 1}})",
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
  CHECK(count_training(job).activation_bytes_per_layer == Approx(23 * sbh));  // 10 + 24/8 + 5as/(ht) = 13 + 10
  job.sequence_parallel = true;
  CHECK(count_training(job).activation_bytes_per_layer == Approx(14.25 * sbh));  // (34 + 80) / 8
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
}
