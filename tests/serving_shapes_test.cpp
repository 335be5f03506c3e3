// Prefill and decode replicas of different TP: which GPUs send a KV cache's shares to which, worked by
// hand; one request alone is the narrow replica's prefill, the transfer over the busiest NIC and the wide
// replica's decode, exactly; in a scenario the shares are flows on the network; bad shapes are refused by
// field.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/serving.hpp"
#include "helpers.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/units.hpp"
#include "serving/replica_set.hpp"

using namespace fleetsim;
using serving::KvShare;

namespace {

std::vector<KvShare> shares(int p, int q, double kv_heads) {
  std::vector<KvShare> out;
  serving::add_kv_shares(p, q, kv_heads, 1.0, 0, out);
  return out;
}

bool has(const std::vector<KvShare>& s, std::uint32_t from, std::uint32_t to, double bytes) {
  return std::any_of(s.begin(), s.end(), [&](const KvShare& k) { return k.from == from && k.to == to && k.bytes == Approx(bytes); });
}

// Llama 3 70B (8 KV heads) on two HGX H100 nodes: one prefill replica of TP `prefill_tp`, one decode
// replica, one request of 2,048 prompt tokens and 16 output tokens at once.
std::string pd(int prefill_tp, const std::string& decode_tp) {
  return R"({"name": "pd", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": "llama-3-70b", "tp": )" + std::to_string(prefill_tp) +
         R"(, "disaggregation": {"prefill": 1, "decode": 1)" + decode_tp + R"(}, "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 16}})";
}

}  // namespace

TEST_CASE("a decode GPU reads its own KV heads from the prefill GPUs that hold them", "[serving][pd-shapes]") {
  // Equal TP: rank to rank.
  const std::vector<KvShare> same = shares(4, 4, 8);
  REQUIRE(same.size() == 4);
  for (std::uint32_t j = 0; j < 4; ++j) CHECK(has(same, j, j, 1));
  // Decode TP 8 over prefill TP 4 (8 KV heads): decode rank j's one head is half of prefill rank j / 2's two.
  const std::vector<KvShare> wider = shares(4, 8, 8);
  REQUIRE(wider.size() == 8);
  for (std::uint32_t j = 0; j < 8; ++j) CHECK(has(wider, j / 2, j, 1));
  // Decode TP 2 under prefill TP 8: decode rank j's four heads from prefill ranks 4j to 4j + 3, a quarter each.
  const std::vector<KvShare> narrower = shares(8, 2, 8);
  REQUIRE(narrower.size() == 8);
  for (std::uint32_t i = 0; i < 8; ++i) CHECK(has(narrower, i, i / 4, 0.25));
  // Prefill TP 16 over 8 heads holds two copies of each: decode rank j (TP 8, head j) reads one of them,
  // by its rank, so that the reads spread over both copies' GPUs.
  const std::vector<KvShare> copies = shares(16, 8, 8);
  REQUIRE(copies.size() == 8);
  for (std::uint32_t j = 0; j < 8; ++j) CHECK(has(copies, 2 * j + j % 2, j, 1));
  // Latent attention: one latent whole on every rank; each decode rank reads it from one prefill rank.
  const std::vector<KvShare> latent = shares(8, 2, 1);
  REQUIRE(latent.size() == 2);
  CHECK(has(latent, 0, 0, 1));
  CHECK(has(latent, 1, 1, 1));
  // A later stage's GPUs follow the earlier stages' on both sides.
  std::vector<KvShare> stage;
  serving::add_kv_shares(4, 8, 8, 1.0, 1, stage);
  CHECK(has(stage, 4 + 3, 8 + 7, 1));
}

TEST_CASE("a request prefilled at TP 4 and decoded at TP 8 takes the TP 4 prefill, the KV over the busiest NIC and the TP 8 decode, exactly", "[serving][pd-shapes]") {
  const ServingDeployment d = parse_serving(pd(4, R"(, "decode_tp": 8)"), "d.json");
  REQUIRE(d.decode_tp == 8);
  REQUIRE(d.placement.size() == 2);
  CHECK(d.placement[0].gpus == 4);
  CHECK(d.placement[1].node == 1);  // 8 GPUs: the other node
  CHECK(d.placement[1].gpus == 8);
  const ServingDeployment narrow = parse_serving(pd(4, ""), "d.json"), wide = parse_serving(pd(8, ""), "d.json");
  const ServingResult mixed = simulate_serving(d), four = simulate_serving(narrow), eight = simulate_serving(wide);
  REQUIRE(mixed.completed == 1);
  CHECK(mixed.ttft_s.p50 == Approx(four.ttft_s.p50).epsilon(1e-12));
  // From its first token: the transfer, then the 15 decode steps (TP 8's).
  const auto decoding_s = [](const ServingResult& r) { return 15 * r.tpot_s.p50 - r.kv_transfer_s; };
  CHECK(decoding_s(mixed) == Approx(decoding_s(eight)).epsilon(1e-9));
  // Each prefill GPU sends its two heads (to two decode GPUs) over its NIC; each decode GPU receives one.
  const double per_gpu_four = kv_capacity(narrow).kv_bytes_per_token, per_gpu_eight = kv_capacity(wide).kv_bytes_per_token;
  REQUIRE(per_gpu_four == 2 * per_gpu_eight);
  const LinkType& nic = d.cluster.groups.front().nic;
  CHECK(mixed.kv_transfer_s == Approx(nic.latency_s + 2048 * per_gpu_four / nic.bandwidth_Bps).epsilon(1e-12));
  CHECK(mixed.kv_transfer_bytes == Approx(2048 * 8 * per_gpu_eight));
  REQUIRE(mixed.decode_capacity.has_value());
  CHECK(mixed.decode_capacity->kv_bytes_per_token == per_gpu_eight);
  CHECK(mixed.capacity.kv_bytes_per_token == per_gpu_four);
  // GPU time: the prefill iteration (its TTFT) on 4 GPUs, the decode iterations on 8.
  const double decode_s = eight.busy.total_s - eight.ttft_s.p50;
  CHECK(mixed.gpu_busy_s == Approx(4 * mixed.ttft_s.p50 + 8 * decode_s).epsilon(1e-9));

  // The other way, prefill TP 8 and decode TP 4: each decode GPU receives two heads, from two prefill GPUs.
  const ServingResult reverse = simulate_serving(parse_serving(pd(8, R"(, "decode_tp": 4)"), "d.json"));
  CHECK(reverse.ttft_s.p50 == Approx(eight.ttft_s.p50).epsilon(1e-12));
  CHECK(decoding_s(reverse) == Approx(decoding_s(four)).epsilon(1e-9));
  CHECK(reverse.kv_transfer_s == Approx(nic.latency_s + 2048 * per_gpu_four / nic.bandwidth_Bps).epsilon(1e-12));
  CHECK(reverse.kv_transfer_bytes == Approx(2048 * 4 * per_gpu_four));

  // decode_tp equal to tp is one shape.
  CHECK(parse_serving(pd(4, R"(, "decode_tp": 4)"), "d.json").decode_tp == 0);
}

TEST_CASE("replicas of different TP across nodes or over pipeline stages take their own pieces and send each head once", "[serving][pd-shapes]") {
  // Prefill TP 16 over two nodes (two copies of each of the 8 KV heads), decode TP 8 on the third: each
  // decode GPU reads its head from one copy, so each prefill GPU sends at most one share.
  std::string wide = pd(16, R"(, "decode_tp": 8)");
  wide.replace(wide.find("\"count\": 2"), 10, "\"count\": 3");
  const ServingDeployment d = parse_serving(wide, "d.json");
  REQUIRE(d.placement.size() == 3);
  CHECK(d.first_piece(1) == 2);
  CHECK(d.placement[2].node == 2);
  const ServingResult r = simulate_serving(d);
  REQUIRE(r.completed == 1);
  const double head = 2048 * r.decode_capacity->kv_bytes_per_token;
  CHECK(r.capacity.kv_bytes_per_token == r.decode_capacity->kv_bytes_per_token);  // one head a GPU both sides
  const LinkType& nic = d.cluster.groups.front().nic;
  CHECK(r.kv_transfer_s == Approx(nic.latency_s + head / nic.bandwidth_Bps).epsilon(1e-12));
  CHECK(r.kv_transfer_bytes == Approx(8 * head));

  // Two stages: TP 4 x PP 2 prefill on node 0, TP 8 x PP 2 decode on nodes 1 and 2; each stage's GPUs
  // send their 40 layers' heads to the decode replica's same stage, two shares a prefill GPU.
  std::string staged = pd(4, R"(, "decode_tp": 8)");
  staged.replace(staged.find("\"count\": 2"), 10, "\"count\": 3");
  staged.replace(staged.find("\"tp\": 4"), 7, "\"tp\": 4, \"pp\": 2");
  const ServingDeployment s2 = parse_serving(staged, "d.json");
  REQUIRE(s2.placement.size() == 3);
  CHECK(s2.placement[1].node == 1);
  CHECK(s2.placement[2].node == 2);
  const ServingResult q = simulate_serving(s2);
  REQUIRE(q.completed == 1);
  const std::vector<double>& layers = q.decode_capacity->stage_kv_bytes_per_token;
  REQUIRE(layers.size() == 2);
  CHECK(layers[0] == layers[1]);
  CHECK(q.kv_transfer_s == Approx(nic.latency_s + 2 * 2048 * layers[0] / nic.bandwidth_Bps).epsilon(1e-12));
  CHECK(q.kv_transfer_bytes == Approx(2048 * 8 * (layers[0] + layers[1])));
}

TEST_CASE("decode replicas of another TP are refused with the field where they cannot run", "[serving][pd-shapes]") {
  CHECK_THAT(test::serving_error(pd(4, R"(, "decode_tp": 3)")), Catch::Contains("/disaggregation: the decode replicas (decode_tp 3): expected a divisor of the model's 64 attention heads"));
  CHECK_THAT(test::serving_error(pd(4, R"(, "decode_tp": 1)")), Catch::Contains("/disaggregation: the decode replicas (decode_tp 1): the model does not fit its TP group"));
  CHECK_THAT(test::serving_error(pd(4, R"(, "decode_tp": 0)")), Catch::Contains("/disaggregation/decode_tp"));
  CHECK_THAT(test::serving_error(pd(8, R"(, "decode_tp": 16)").replace(pd(8, "").find("\"count\": 2"), 10, "\"count\": 1")),
             Catch::Contains("/replicas: expected prefill and decode replicas that fit the cluster's 1 nodes whole"));
  const std::string moe = R"({"name": "pd", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 2, "dp_attention": true,
      "disaggregation": {"prefill": 1, "decode": 1, "decode_tp": 4}, "requests": {"count": 1, "prompt_tokens": 64, "output_tokens": 4}})";
  CHECK_THAT(test::serving_error(moe), Catch::Contains("/disaggregation: decode replicas of another TP beside data-parallel attention are not modelled yet"));
}

TEST_CASE("in a scenario a TP 4 prefill replica's KV reaches a TP 8 decode replica as flows, two from each prefill GPU's NIC", "[serving][scenario][pd-shapes]") {
  const std::string json = R"({"name": "s", "seed": 3, "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "serving": [{"name": "pd", "model": "llama-3-70b", "tp": 4,
      "disaggregation": {"prefill": 1, "decode": 1, "decode_tp": 8}, "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 16}}]})";
  const Scenario sc = parse_scenario(json, "s.json", ".");
  const ServingDeployment& d = *sc.serving[0];
  REQUIRE(d.placement.size() == 2);
  CHECK(d.placement[1].node == 1);
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 1);
  CHECK(r.kv_on_shared_network);
  const double head_share = 2048 * kv_capacity(d.decode_shape()).kv_bytes_per_token;  // one decode GPU's
  std::vector<std::uint32_t> route;
  run.topology.route(run.topology.gpu_vertex(make_id<GpuId>(0)), run.topology.gpu_vertex(make_id<GpuId>(8)), 0, route);
  // Prefill GPU 0 sends two shares (to decode GPUs 0 and 1) through its NIC at once.
  CHECK(r.kv_transfer_s == Approx(run.topology.latency_s(route) + 2 * head_share / run.topology.bottleneck_Bps(route)).epsilon(1e-9));
  double sent = 0;
  for (std::uint32_t l = 0; l < run.topology.links().size(); ++l) {
    if (run.topology.links()[l].cls == LinkClass::nic && run.topology.vertex_name(run.topology.links()[l].from).rfind("n0.", 0) == 0) sent += run.link_bytes[l];
  }
  CHECK(sent == Approx(8 * head_share));
  CHECK(r.kv_transfer_bytes == Approx(8 * head_share));
  // The decode replica's GPUs hold half the weights each, so more KV.
  REQUIRE(r.decode_capacity.has_value());
  CHECK(r.decode_capacity->tokens > r.capacity.tokens);
}

TEST_CASE("in a scenario a failed GPU of a TP 8 decode replica stops it, and it restarts with its own weights", "[serving][scenario][pd-shapes]") {
  const std::string json = R"({"name": "s", "seed": 3, "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "serving": [{"name": "pd", "model": "llama-3-70b", "tp": 4,
      "disaggregation": {"prefill": 1, "decode": 1, "decode_tp": 8}, "requests": {"count": 1, "prompt_tokens": 2048, "output_tokens": 400}}],
      "faults": {"events": [{"at": "1 s", "gpu": "n1.g5", "for": "1 s"}]}})";
  const Scenario sc = parse_scenario(json, "s.json", ".");
  const ServingDeployment& d = *sc.serving[0];
  const RunResult run = simulate(sc);
  const ServingResult& r = run.summary.serving.front();
  CHECK(r.completed == 1);
  CHECK(r.replica_failures == 1);
  // Decoding when the GPU failed: prefilled again, then decoded once the decode replica is back, after its
  // start-up and its own weights (half a TP 4 GPU's) over the host link.
  const double startup = d.engine.startup_s + kv_capacity(d.decode_shape()).weights_per_gpu_bytes / d.cluster.groups.front().host_link.bandwidth_Bps;
  CHECK(r.e2e_s.max > 2 + startup);
  CHECK(r.prompt_tokens > 2048);
  CHECK(std::any_of(r.notes.begin(), r.notes.end(), [&](const std::string& n) { return n.find("a decode replica " + format_quantity(startup, Dimension::time)) != std::string::npos; }));
}

TEST_CASE("a serving plan searches the decode replicas' TP beside each split, on the nodes both shapes take", "[serving][plan][pd-shapes]") {
  // Nodes as a scenario places them: prefill replicas' pieces first, then the decode replicas'.
  CHECK(replica_nodes(4, 1, 8, 3, 2, 8) == 2);   // two TP 4 on node 0, one TP 8 on node 1
  CHECK(replica_nodes(4, 1, 8, 3, 1, 8) == 3);   // one TP 4 on node 0 (half empty), two TP 8
  CHECK(replica_nodes(16, 1, 8, 2, 1, 8) == 3);  // TP 16 over two nodes, TP 8 on a third
  CHECK(replica_nodes(8, 1, 8, 3, 1, 4) == 2);   // TP 8, then two TP 4 sharing a node
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-plan-decode-tp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d.json") << R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "llama-3-70b", "tp": 4,
      "requests": {"rate": "2 /s", "count": 60, "prompt_tokens": {"uniform": [500, 1500]}, "output_tokens": {"uniform": [50, 150]}},
      "slos": [{"metric": "ttft", "percentile": 95, "target": "2 s"}, {"metric": "tpot", "target": "60 ms"}]})";
  const std::string file = (dir / "plan.json").string();
  const ServingPlan plan = parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "disaggregation": [0, 0.5, 0.6], "decode_tp": [4, 8],
      "replicas": {"min": 2, "max": 3}}, "rates": ["2 /s"], "seeds": 1})", file);
  const ServingPlanResult r = plan_serving(plan, 2);
  // Together; split at TP 4 both sides (decode_tp 4 is tp's own: one line, not two); split with TP 8 decodes; the
  // same two at a share of 0.6, which rounds to the same splits of 2 and 3 replicas as 0.5.
  REQUIRE(r.lines.size() == 5);
  CHECK(r.lines[0].prefill_share == 0);
  CHECK(r.lines[1].decode_tp == 0);
  CHECK(r.lines[2].decode_tp == 8);
  CHECK(r.lines[3].prefill_replicas == r.lines[1].prefill_replicas);
  CHECK(r.lines[3].replicas == r.lines[1].replicas);
  for (const ServingPoint& p : r.points) {
    CHECK(p.nodes == replica_nodes(4, 1, 8, p.replicas, p.prefill_replicas, p.decode_tp));
    CHECK(p.verdict != ServingPoint::Verdict::does_not_fit);
  }
  std::ostringstream text;
  write_serving_plan_text(text, plan, r);
  CHECK_THAT(text.str(), Catch::Contains("P+1D, D at TP 8"));
  // The table lists each deployment once: three rows for five lines.
  std::istringstream rows(text.str());
  int listed = 0;
  for (std::string row; std::getline(rows, row);) listed += row.rfind("  hgx-h100-8", 0) == 0 ? 1 : 0;
  CHECK(listed == 3);
  // The points simulated TP 8 decodes: at 3 replicas (2 prefill, 1 decode) a token is faster than at TP 4.
  const auto tpot_at_three = [&](int decode_tp) {
    for (const ServingPoint& p : r.points) {
      if (p.replicas == 3 && p.prefill_replicas == 2 && p.decode_tp == decode_tp) return p.slos.at(1).mean_s;
    }
    FAIL("no point of 2 prefill and 1 decode replicas");
    return 0.0;
  };
  CHECK(tpot_at_three(8) < 0.8 * tpot_at_three(0));
  CHECK_THAT(serving_plan_json(plan, r), Catch::Contains("\"decode_tp\": 8"));
  // Without a split there is no decode replica to size.
  try {
    parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "decode_tp": [8]}, "rates": ["2 /s"]})", file);
    FAIL("a decode TP without a split was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/search/decode_tp: the decode replicas' TP applies to prefill/decode splits"));
  }
  // Nor beside data-parallel attention on every line.
  std::ofstream(dir / "moe.json") << R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 2, "dp_attention": true,
      "requests": {"rate": "2 /s", "count": 60, "prompt_tokens": 512, "output_tokens": 64}, "slos": [{"metric": "ttft", "target": "2 s"}]})";
  try {
    parse_serving_plan(R"({"serving": "moe.json", "search": {"node_types": ["hgx-h100-8"], "disaggregation": [0.5], "decode_tp": [4]}, "rates": ["2 /s"]})", file);
    FAIL("a decode TP beside data-parallel attention was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/search/decode_tp: decode replicas of another TP beside data-parallel attention are not modelled yet"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a serving plan tries each split's KV sent after the prompt and layer by layer", "[serving][plan][pd-shapes]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-plan-kv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d.json") << R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "llama-3-70b", "tp": 4,
      "requests": {"rate": "2 /s", "count": 30, "prompt_tokens": {"uniform": [1000, 3000]}, "output_tokens": {"uniform": [50, 150]}},
      "slos": [{"metric": "ttft", "percentile": 95, "target": "2 s"}, {"metric": "e2e", "percentile": 50, "target": "30 s"}]})";
  const std::string file = (dir / "plan.json").string();
  // At a request every 10 s the decode replica is idle when each KV cache lands: a request's decode starts then.
  const ServingPlan plan = parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "disaggregation": [0, 0.5],
      "kv_transfer": ["after_prefill", "by_layer"], "replicas": {"min": 2, "max": 2}}, "rates": ["0.1 /s"], "seeds": 1})", file);
  const ServingPlanResult r = plan_serving(plan, 2);
  // Together (no transfer: one line), then the split with each transfer.
  REQUIRE(r.lines.size() == 3);
  CHECK_FALSE(r.lines[0].kv_by_layer);
  CHECK(r.lines[1].prefill_replicas == 1);
  CHECK_FALSE(r.lines[1].kv_by_layer);
  CHECK(r.lines[2].prefill_replicas == 1);
  CHECK(r.lines[2].kv_by_layer);
  // The same requests; by layer each decode starts as the prompt ends, not a transfer later, and TTFT (the prefill's) is the same.
  REQUIRE(r.lines[1].slos.size() == 2);
  REQUIRE(r.lines[1].slos[1].slo.metric == "e2e");
  CHECK(r.lines[2].slos[0].mean_s == Approx(r.lines[1].slos[0].mean_s).epsilon(1e-9));
  CHECK(r.lines[2].slos[1].mean_s < r.lines[1].slos[1].mean_s);
  std::ostringstream text;
  write_serving_plan_text(text, plan, r);
  CHECK_THAT(text.str(), Catch::Contains("1P+1D, KV by layer"));
  CHECK_THAT(serving_plan_json(plan, r), Catch::Contains("\"kv_transfer\": \"by_layer\"") && Catch::Contains("\"kv_transfer\": \"none\""));
  // Without a split there is nothing to send; a transfer the deployment does not know is named.
  const auto refusal = [&](const std::string& search) {
    try {
      parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], )" + search + R"(}, "rates": ["2 /s"]})", file);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refusal(R"("kv_transfer": ["by_layer"])"), Catch::Contains("/search/kv_transfer: a KV transfer applies to prefill/decode splits"));
  CHECK_THAT(refusal(R"("disaggregation": [0.5], "kv_transfer": ["by_token"])"), Catch::Contains("/search/kv_transfer: expected a non-empty array of \"after_prefill\" and \"by_layer\""));
  std::filesystem::remove_all(dir);
}
