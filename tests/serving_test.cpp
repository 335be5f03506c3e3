// The serving model against hand-worked cases: one request alone is its prefill and its decode steps
// exactly; the KV cache holds what the engine's start-up arithmetic leaves; a saturated replica runs
// max_num_seqs at once; preemption recomputes and loses nothing; bad deployments are refused by field.
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/serving.hpp"
#include "serving/replica_set.hpp"
#include "helpers.hpp"
#include "serving/serving_model.hpp"

using namespace fleetsim;

namespace {

std::string deployment(const std::string& extra = "", const std::string& requests = R"("count": 1, "prompt_tokens": 512, "output_tokens": 64)") {
  return R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "llama-3-8b", "replicas": 1,
             "requests": {)" + requests + "}" + extra + "}";
}

std::string error_of_file(const std::string& json, const std::string& file) {
  try {
    parse_serving(json, file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("one request alone takes its prefill and then one decode iteration a token, exactly", "[serving]") {
  const ServingDeployment d = parse_serving(deployment(), "d.json");
  IterationTimer timer(d);
  const double prefill = timer.time({.prefills = {{512, 0}}}).total_s;
  double e2e = prefill;
  for (int k = 1; k < 64; ++k) e2e += timer.time({.prefills = {}, .decodes = 1, .decode_context = 512.0 + k}).total_s;
  const ServingResult r = simulate_serving(d);
  REQUIRE(r.completed == 1);
  CHECK(r.ttft_s.p50 == Approx(prefill).epsilon(1e-12));
  CHECK(r.e2e_s.p50 == Approx(e2e).epsilon(1e-12));
  CHECK(r.tpot_s.p50 == Approx((e2e - prefill) / 63).epsilon(1e-12));
  CHECK(r.iterations == 64);
  // A prompt longer than the token budget is prefilled in chunks, each over the KV of the ones before.
  const ServingDeployment chunked = parse_serving(deployment(R"(, "knobs": {"max_num_batched_tokens": 200})"), "d.json");
  IterationTimer t2(chunked);
  const double chunks = t2.time({.prefills = {{200, 0}}}).total_s + t2.time({.prefills = {{200, 200}}}).total_s + t2.time({.prefills = {{112, 400}}}).total_s;
  CHECK(simulate_serving(chunked).ttft_s.p50 == Approx(chunks).epsilon(1e-12));
}

TEST_CASE("the KV cache holds what vLLM's start-up arithmetic leaves, in blocks", "[serving]") {
  const ServingDeployment d = parse_serving(deployment(), "d.json");
  const KvCapacity c = kv_capacity(d);
  // Llama 3 8B: 8.03 B parameters (Meta's model card), bf16; 2 x 32 layers x 8 KV heads x 128 x 2 bytes a token.
  CHECK(c.weights_per_gpu_bytes == Approx(2 * 8.03e9).epsilon(0.001));
  CHECK(c.kv_bytes_per_token == 131072);
  const double usable = 80e9 * 0.92 - c.weights_per_gpu_bytes - c.activation_bytes - 1024.0 * 1024 * 1024;
  CHECK(c.usable_bytes == Approx(usable));
  CHECK(c.blocks == static_cast<std::int64_t>(usable / (16 * 131072.0)));
  CHECK(c.tokens == 16 * c.blocks);
  // TP 8 of Llama 3 70B: one KV head a GPU; TP past the KV heads replicates them rather than splitting further.
  const ServingDeployment big = parse_serving(deployment(R"(, "tp": 8)").replace(deployment().find("llama-3-8b"), 10, "llama-3-70b"), "d.json");
  CHECK(kv_capacity(big).kv_bytes_per_token == 2 * 80 * 1 * 128 * 2);
}

TEST_CASE("a saturated replica runs max_num_seqs sequences at once, never more", "[serving]") {
  const ServingDeployment d = parse_serving(deployment(R"(, "knobs": {"max_num_seqs": 8})", R"("count": 64, "prompt_tokens": 16, "output_tokens": 100)"), "d.json");
  const ServingResult r = simulate_serving(d);
  CHECK(r.completed == 64);
  CHECK(r.mean_batch <= 8);
  CHECK(r.mean_batch > 7.5);
  // Eight batches of eight run one after another: each request waits for the batches before its own.
  CHECK(r.e2e_s.max == Approx(r.makespan_s));
  CHECK(r.ttft_s.max > 6 * r.e2e_s.p50 / 8);
}

TEST_CASE("when KV blocks run out the newest request is preempted and recomputed, and every token is still produced", "[serving]") {
  // 1.5% of the VRAM above the weights: a few thousand tokens of KV for 64 requests of 600.
  const std::string knobs = R"(, "knobs": {"gpu_memory_utilization": 0.24})";
  const ServingDeployment d = parse_serving(deployment(knobs, R"("count": 64, "prompt_tokens": 300, "output_tokens": 300)"), "d.json");
  REQUIRE(kv_capacity(d).tokens < 64 * 600);
  const ServingResult r = simulate_serving(d);
  CHECK(r.completed == 64);
  CHECK(r.preemptions > 0);
  CHECK(r.output_tokens_per_s * r.makespan_s == Approx(64 * 300));
  // TensorRT-LLM admits a request only with the KV of its whole output free: nothing is ever preempted.
  const ServingDeployment trt = parse_serving(deployment(knobs + R"(, "engine": "tensorrt-llm")", R"("count": 64, "prompt_tokens": 300, "output_tokens": 300)"), "d.json");
  const ServingResult t = simulate_serving(trt);
  CHECK(t.completed == 64);
  CHECK(t.preemptions == 0);
}

TEST_CASE("with swap preemption a preempted request's KV goes to host memory and back, and its prompt is never prefilled again", "[serving]") {
  const std::string requests = R"("count": 64, "prompt_tokens": 300, "output_tokens": 300)";
  const ServingResult recompute = simulate_serving(parse_serving(deployment(R"(, "knobs": {"gpu_memory_utilization": 0.24})", requests), "d.json"));
  const ServingDeployment d = parse_serving(deployment(R"(, "knobs": {"gpu_memory_utilization": 0.24, "preemption": "swap"})", requests), "d.json");
  REQUIRE(d.engine.swap_space_bytes == Approx(4.0 * (1ull << 30)));  // vLLM V0's default
  const ServingResult swap = simulate_serving(d);
  CHECK(swap.completed == 64);
  CHECK(swap.output_tokens_per_s * swap.makespan_s == Approx(64 * 300));
  CHECK(swap.preemptions > 0);
  CHECK(swap.swapped_out == swap.preemptions);  // a few thousand tokens of KV: 4 GiB holds them all
  CHECK(swap.swap_space_full == 0);
  CHECK(swap.prompt_tokens == 64 * 300);        // every prompt prefilled once
  CHECK(recompute.prompt_tokens > 64 * 300);    // where recomputing prefills them again
  // Every token swapped out came back in, each GPU copying its share over its host link.
  const double host_Bps = d.cluster.groups.front().host_link.bandwidth_Bps;
  CHECK(swap.swap_bytes > 0);
  CHECK(swap.busy.swap_s == Approx(swap.swap_bytes / (d.tp * host_Bps)));
  // The copies keep the GPUs held, not computing: the busy GPU time is the iterations' less them.
  CHECK(swap.gpu_busy_s == Approx((swap.busy.total_s - swap.busy.swap_s) * d.tp));
  // A swap space smaller than any request's KV: every preemption recomputes, as without swapping.
  const ServingResult tiny = simulate_serving(parse_serving(deployment(R"(, "knobs": {"gpu_memory_utilization": 0.24, "preemption": "swap", "swap_space": "1 MiB"})", requests), "d.json"));
  CHECK(tiny.swapped_out == 0);
  CHECK(tiny.swap_space_full == tiny.preemptions);
  CHECK(tiny.iterations == recompute.iterations);
  CHECK(tiny.e2e_s.max == recompute.e2e_s.max);
  CHECK_THAT(test::serving_error(deployment(R"(, "knobs": {"preemption": "evict"})")), Catch::Contains("/knobs/preemption"));
  CHECK_THAT(test::serving_error(deployment(R"(, "knobs": {"swap_space": "-1 GB"})")), Catch::Contains("/knobs/swap_space"));
  // vLLM refuses a swap space over 70% of the node's host memory (2 TB on an HGX H100) over the TP group.
  CHECK(test::serving_error(deployment(R"(, "tp": 8, "knobs": {"preemption": "swap", "swap_space": "175 GB"})")).empty());
  CHECK_THAT(test::serving_error(deployment(R"(, "tp": 8, "knobs": {"preemption": "swap", "swap_space": "176 GB"})")),
             Catch::Contains("/knobs") && Catch::Contains("1.41 TB, over 70% of a hgx-h100-8 node's 2 TB of host memory"));
  CHECK(test::serving_error(deployment(R"(, "tp": 8, "knobs": {"swap_space": "176 GB"})")).empty());  // recomputing: no swap space taken
  // Engines on one node share its host memory: alone, replicas fill the nodes in order, so six of 200 GB a GPU
  // (1.2 TB) fit beside each other and eight (1.6 TB) do not, though each alone would.
  const auto replicas = [](int n) {
    return R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]}, "model": "llama-3-8b", "replicas": )" + std::to_string(n) +
           R"(, "requests": {"count": 1, "prompt_tokens": 8, "output_tokens": 8}, "knobs": {"preemption": "swap", "swap_space": "200 GB"}})";
  };
  CHECK(test::serving_error(replicas(6)).empty());
  CHECK_THAT(test::serving_error(replicas(8)), Catch::Contains("/knobs") && Catch::Contains("the replicas on node 0 pin more swap space than 70% of its 2 TB"));
  CHECK_THAT(test::serving_error(replicas(16)), Catch::Contains("the replicas on node 0"));
}

TEST_CASE("int4 weights hold the linear layers in 4 bits: a third of the memory, decodes read faster, prefills compute as bf16", "[serving]") {
  const ServingDeployment bf16 = parse_serving(deployment(), "d.json");
  const ServingDeployment int4 = parse_serving(deployment(R"(, "weights": "int4")"), "d.json");
  CHECK(int4.weights_name() == "int4");
  CHECK(int4.weights == Dtype::bf16);  // what its GEMMs compute in
  CHECK(int4.kv_cache == Dtype::bf16);
  // Llama 3 8B: each of 32 layers holds q, k, v (4096 x 48 x 128), o (4096 x 4096) and the gated MLP
  // (3 x 4096 x 14336), 218,103,808 linear weights; the embedding, LM head and norms stay 16-bit.
  const double linear = 32 * (4096.0 * 48 * 128 + 4096.0 * 4096 + 3 * 4096.0 * 14336);
  const double all = kv_capacity(bf16).weights_per_gpu_bytes / 2;
  CHECK(kv_capacity(int4).weights_per_gpu_bytes == Approx((all - linear) * 2 + linear * (0.5 + 2.0 / 128)));
  CHECK(kv_capacity(int4).tokens > kv_capacity(bf16).tokens);
  // A decode of 8 sequences reads the weights: int4's linear layers take well under half the time.
  IterationTimer tb(bf16), ti(int4);
  const IterationShape decode{.prefills = {}, .decodes = 8, .decode_context = 8 * 1024.0};
  CHECK(ti.time(decode).linear_s < 0.45 * tb.time(decode).linear_s);
  // An 8,192-token prefill is compute-bound: the same time as bf16 (dequantization in registers is free).
  const IterationShape prefill{.prefills = {{8192, 0}}};
  CHECK(ti.time(prefill).linear_s == Approx(tb.time(prefill).linear_s).epsilon(0.01));
  // Served at low load: time per output token drops with the weights read.
  CHECK(simulate_serving(int4).tpot_s.p50 < 0.6 * simulate_serving(bf16).tpot_s.p50);
}

TEST_CASE("tenants share a deployment: each request is one's by share, with percentiles, goodput and SLOs of its own", "[serving]") {
  const std::string load = R"("rate": "20 /s", "count": 2000, "prompt_tokens": {"uniform": [256, 1024]}, "output_tokens": {"uniform": [16, 128]})";
  const std::string tenants = R"(, "tenants": [{"name": "pro", "share": 0.25}, {"name": "free", "share": 0.75}])";
  const std::string slos = R"(, "slos": [{"metric": "ttft", "percentile": 95, "target": "1 s"}, {"metric": "tpot", "percentile": 99, "target": "1 ms", "tenant": "pro"}])";
  const ServingResult plain = simulate_serving(parse_serving(deployment(slos.substr(0, slos.find(", {\"metric\": \"tpot\"")) + "]", load), "d.json"));
  const ServingResult r = simulate_serving(parse_serving(deployment(slos, load + tenants), "d.json"));
  REQUIRE(r.tenants.size() == 2);
  CHECK(r.tenants[0].name == "pro");
  CHECK(r.tenants[0].completed + r.tenants[1].completed == 2000);
  // About a quarter are pro's (binomial: 3 standard deviations are 3%).
  CHECK(std::abs(static_cast<double>(r.tenants[0].completed) / 2000 - 0.25) < 0.03);
  // Naming tenants draws from a stream of its own: the same arrivals, lengths and schedule.
  CHECK(r.iterations == plain.iterations);
  CHECK(r.ttft_s.p95 == plain.ttft_s.p95);
  // Pro's SLO is judged on pro's requests alone; it cannot be met (1 ms a token), so no pro request is
  // good, and the goodput is free's alone.
  REQUIRE(r.verdicts.size() == 2);
  CHECK(r.verdicts[1].slo.tenant == "pro");
  CHECK(r.verdicts[1].achieved_s == Approx(r.tenants[0].tpot_s.p99));
  CHECK_FALSE(r.verdicts[1].met);
  CHECK(r.tenants[0].goodput_per_s == 0);
  CHECK(r.goodput_per_s == Approx(r.tenants[1].goodput_per_s));
  CHECK(r.tenants[1].goodput_per_s > 0);
  CHECK_THAT(test::serving_error(deployment("", load + R"(, "tenants": [{"name": "a", "share": 0.5}, {"name": "b", "share": 0.4}])")),
             Catch::Contains("/requests/tenants: expected shares summing to 1, found 0.9"));
  CHECK_THAT(test::serving_error(deployment("", load + R"(, "tenants": [{"name": "a", "share": 0.5}, {"name": "a", "share": 0.5}])")),
             Catch::Contains("/requests/tenants/1/name: expected a name no other tenant has"));
  CHECK_THAT(test::serving_error(deployment(R"(, "slos": [{"metric": "ttft", "target": "1 s", "tenant": "gold"}])", load + tenants)),
             Catch::Contains("/slos/0/tenant: expected one of the tenants in /requests/tenants (pro, free), found \"gold\""));
}

TEST_CASE("chunked prefill keeps decodes going where prefill-first stalls them (Sarathi-Serve's point)", "[serving]") {
  const std::string load = R"("rate": "30 /s", "count": 600, "prompt_tokens": {"uniform": [1000, 3000]}, "output_tokens": {"uniform": [100, 300]})";
  const ServingResult chunked = simulate_serving(parse_serving(deployment("", load), "d.json"));
  const ServingResult first = simulate_serving(parse_serving(deployment(R"(, "knobs": {"policy": "prefill-first"})", load), "d.json"));
  CHECK(chunked.tpot_s.p99 < first.tpot_s.p99);
  CHECK(first.ttft_s.p50 < chunked.ttft_s.p99 * 10);  // both served: neither run is wedged
}

TEST_CASE("replicas and routers spread the load, and the same seed gives the same run", "[serving]") {
  const std::string load = R"("rate": "40 /s", "count": 2000, "prompt_tokens": {"uniform": [200, 2000]}, "output_tokens": {"uniform": [50, 500]})";
  const ServingResult one = simulate_serving(parse_serving(deployment("", load), "d.json"));
  const ServingResult four = simulate_serving(parse_serving(deployment(R"(, "router": "least-tokens")", load).replace(deployment().find("\"replicas\": 1"), 13, "\"replicas\": 4"), "d.json"));
  CHECK(four.e2e_s.p50 < one.e2e_s.p50);
  CHECK(four.tpot_s.p50 < one.tpot_s.p50);
  const ServingResult again = simulate_serving(parse_serving(deployment("", load), "d.json"));
  CHECK(again.e2e_s.p99 == one.e2e_s.p99);
  CHECK(again.iterations == one.iterations);
  const ServingResult other = simulate_serving(parse_serving(deployment(R"(, "seed": 2)", load), "d.json"));
  CHECK(other.e2e_s.p99 != one.e2e_s.p99);
}

TEST_CASE("SLOs are met or missed at their percentile, and goodput counts requests meeting every target", "[serving]") {
  const std::string slos = R"(, "slos": [{"metric": "ttft", "percentile": 99, "target": "10 s"}, {"metric": "tpot", "target": "1 ms"}])";
  const ServingResult r = simulate_serving(parse_serving(deployment(slos, R"("rate": "5 /s", "count": 100, "prompt_tokens": 256, "output_tokens": 32)"), "d.json"));
  REQUIRE(r.verdicts.size() == 2);
  CHECK(r.verdicts[0].met);
  CHECK(r.verdicts[0].achieved_s == r.ttft_s.p99);
  CHECK_FALSE(r.verdicts[1].met);  // no H100 decodes a token of an 8B model in a millisecond
  CHECK(r.verdicts[1].achieved_s == r.tpot_s.p95);
  CHECK(r.goodput_per_s == 0);
}

TEST_CASE("bad deployments are refused with the file, the field and what was expected", "[serving][input]") {
  CHECK(test::serving_error(deployment()).empty());
  CHECK_THAT(test::serving_error(deployment().replace(deployment().find("llama-3-8b"), 10, "llama-3-70b")),
             Catch::Contains("d.json: /tp: the model does not fit its TP group") && Catch::Contains("expected a larger tp"));
  CHECK_THAT(test::serving_error(deployment(R"(, "knobs": {"block_size": 0})")), Catch::Contains("d.json: /knobs/block_size"));
  CHECK_THAT(test::serving_error(deployment("", R"("count": 1, "prompt_tokens": -5, "output_tokens": 64)")),
             Catch::Contains("/requests/prompt_tokens: expected a whole number of tokens from 1 to 1,048,576"));
  CHECK_THAT(test::serving_error(deployment(R"(, "engine": "vllm2")")), Catch::Contains("/engine: unknown engine \"vllm2\" (expected one of"));
  CHECK_THAT(test::serving_error(deployment(R"(, "weights": "int5")")), Catch::Contains("/weights: expected bf16, fp16, fp8 or int4, found \"int5\""));
  CHECK_THAT(test::serving_error(deployment(R"(, "kv_cache": "int4")")), Catch::Contains("/kv_cache: expected bf16, fp16, fp8, found \"int4\""));
  CHECK_THAT(test::serving_error(deployment(R"(, "tp": 3)")), Catch::Contains("/tp: expected a divisor of the model's 32 attention heads"));
  CHECK_THAT(test::serving_error(deployment(R"(, "replicas": 9)").replace(deployment().find("\"replicas\": 1,"), 14, "")),
             Catch::Contains("/replicas: expected at most the 8 replicas"));
  CHECK_THAT(test::serving_error(deployment(R"(, "replica": 2)")), Catch::Contains("/replica"));
  CHECK_THAT(test::serving_error(deployment().replace(deployment().find("llama-3-8b"), 10, "sdxl-unet")), Catch::Contains("/model"));
  CHECK_THAT(test::serving_error(deployment("", R"("count": 1, "prompt_tokens": 1000000, "output_tokens": 64)")),
             Catch::Contains("/requests: a request of 1,000,064 tokens") && Catch::Contains("could never run"));
  CHECK_THAT(test::serving_error(deployment(R"(, "slos": [{"metric": "ttft", "percentile": 97, "target": "1 s"}])")), Catch::Contains("/slos/0/percentile: expected 50, 90, 95 or 99"));
}

TEST_CASE("a request trace is replayed row by row, and a bad row is refused with its line and column", "[serving][input]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& rows) { std::ofstream(dir / "r.csv") << "arrival_s,prompt_tokens,output_tokens\n" << rows; };
  const std::string file = (dir / "d.json").string();
  const std::string json = deployment("", R"("trace": "r.csv")");
  write("0,100,10\n0.5,200,20\n2,300,1\n");
  const ServingResult r = simulate_serving(parse_serving(json, file));
  CHECK(r.completed == 3);
  CHECK(r.output_tokens_per_s * r.makespan_s == Approx(31));
  CHECK(r.tpot_s.max > 0);  // the one-token request has no TPOT
  write("0,100,10\n1,-3,5\n0.5,10,inf\n2,10,10\n1.5,10,10\n");
  CHECK_THAT(error_of_file(json, file), Catch::Contains("/requests/trace: ") && Catch::Contains("r.csv line 3: column prompt_tokens: expected a whole number of tokens") &&
                                            Catch::Contains("line 4: column output_tokens") && Catch::Contains("line 6: column arrival_s: expected times in order"));
  write("0,100,10\n1e300,100,10\n");
  CHECK_THAT(error_of_file(json, file), Catch::Contains("r.csv line 3: column arrival_s: expected a time from 0 to 1e9 seconds, found \"1e300\""));
  write("");
  CHECK_THAT(error_of_file(json, file), Catch::Contains("expected request rows, found none"));
  // The public traces as published: Azure's LLM inference traces, BurstGPT, Mooncake; failed requests dropped and said.
  std::ofstream(dir / "azure.csv") << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,4808,10\n2023-11-16 18:15:50.9951690,3180,8\n"
                                      "2023-11-16 18:15:51.1000000,110,0\n";
  const ServingDeployment azure = parse_serving(deployment("", R"("trace": "azure.csv", "format": "azure")"), file);
  REQUIRE(azure.trace.size() == 2);
  CHECK(azure.trace[1].arrival_s == Approx(4.314579));
  CHECK(azure.trace[0].prompt == 4808);
  CHECK(std::any_of(azure.assumptions.begin(), azure.assumptions.end(), [](const std::string& a) { return a.find("replayed 2 of the trace's 3 requests") != std::string::npos && a.find("dropped 1 that generated no token") != std::string::npos; }));
  std::ofstream(dir / "burst.csv") << "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n7.5,GPT-4,1200,300,1500,API log\n";
  const ServingDeployment burst = parse_serving(deployment("", R"("trace": "burst.csv", "format": "burstgpt")"), file);
  REQUIRE(burst.trace.size() == 2);
  CHECK(burst.trace[1].arrival_s == 2.5);
  CHECK(burst.trace[1].output == 300);
  std::ofstream(dir / "moon.jsonl") << R"({"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1]})" "\n"
                                       R"({"timestamp": 3052, "input_length": 2287, "output_length": 316, "hash_ids": [0, 2]})" "\n";
  const ServingDeployment moon = parse_serving(deployment("", R"("trace": "moon.jsonl", "format": "mooncake")"), file);
  REQUIRE(moon.trace.size() == 2);
  CHECK(moon.trace[1].arrival_s == Approx(3.052));
  CHECK(simulate_serving(moon).completed == 2);
  // Their second blocks differ: the second request finds only the first 512 tokens cached.
  const ServingResult moon_run = simulate_serving(moon);
  CHECK(moon_run.prefix_hit_tokens == 512);
  CHECK(moon_run.prompt_tokens == 6755 + 2287);
  std::ofstream(dir / "moon.jsonl") << R"({"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1, 2]})" "\n";
  CHECK_THAT(error_of_file(deployment("", R"("trace": "moon.jsonl", "format": "mooncake")"), file),
             Catch::Contains("line 1: column hash_ids: expected an array of whole numbers, one for each 512-token block"));
  std::ofstream(dir / "moon.jsonl") << R"({"timestamp": 0, "input_length": 6755.5, "output_length": 500})" "\n";
  CHECK_THAT(error_of_file(deployment("", R"("trace": "moon.jsonl", "format": "mooncake")"), file), Catch::Contains("line 1: column input_length: expected a whole number of tokens"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a prompt whose prefix is cached prefills only the rest, over the cached KV, and evicted prefixes lose no token", "[serving]") {
  // Two requests a minute apart with the same 1,000-token prefix before 200 tokens of their own: the
  // second finds 992 tokens (62 whole blocks of 16) cached and prefills the other 208 over them. (Times
  // are compared to 1e-9: the arrivals, ~1,000 s apart, round the differences.)
  const std::string two = R"("rate": "0.001 /s", "count": 2, "prompt_tokens": 200, "output_tokens": 2, "shared_prefix": {"tokens": 1000, "groups": 1})";
  const ServingDeployment d = parse_serving(deployment("", two), "d.json");
  IterationTimer timer(d);
  const ServingResult r = simulate_serving(d);
  REQUIRE(r.completed == 2);
  CHECK(r.prompt_tokens == 2 * 1200);
  CHECK(r.prefix_hit_tokens == 992);
  CHECK(r.ttft_s.max == Approx(timer.time({.prefills = {{1200, 0}}}).total_s).epsilon(1e-9));
  CHECK(r.ttft_s.p50 == Approx((timer.time({.prefills = {{1200, 0}}}).total_s + timer.time({.prefills = {{208, 992}}}).total_s) / 2).epsilon(1e-9));
  // With prefix caching off both prefill all 1,200 tokens.
  const ServingResult off = simulate_serving(parse_serving(deployment(R"(, "knobs": {"prefix_caching": false})", two), "d.json"));
  CHECK(off.prefix_hit_tokens == 0);
  CHECK(off.ttft_s.p50 == Approx(timer.time({.prefills = {{1200, 0}}}).total_s).epsilon(1e-9));
  // Many prefixes in a small cache: cached ones are evicted for running requests, every token is still
  // produced, and the run ends with every block free or cached (checked inside the run).
  const std::string many = R"("rate": "50 /s", "count": 400, "prompt_tokens": 300, "output_tokens": 100, "shared_prefix": {"tokens": 2048, "groups": 40})";
  const ServingResult small = simulate_serving(parse_serving(deployment(R"(, "knobs": {"gpu_memory_utilization": 0.24})", many), "d.json"));
  CHECK(small.completed == 400);
  CHECK(small.prefix_evictions > 0);
  CHECK(small.prefix_hit_tokens > 0);
  CHECK(small.output_tokens_per_s * small.makespan_s == Approx(400 * 100));
  // Shared prefixes cut the time to first token where the prompts are mostly prefix.
  const ServingResult big = simulate_serving(parse_serving(deployment("", many), "d.json"));
  const ServingResult big_off = simulate_serving(parse_serving(deployment(R"(, "knobs": {"prefix_caching": false})", many), "d.json"));
  CHECK(big.ttft_s.p50 < big_off.ttft_s.p50 / 2);
  // Four replicas, eight prefixes: a prefix-aware router sends each prefix where it is cached, so the
  // cache is hit more often than where the least-loaded replica takes each request.
  const std::string spread = R"("rate": "100 /s", "count": 2000, "prompt_tokens": 100, "output_tokens": 50, "shared_prefix": {"tokens": 4096, "groups": 8})";
  const auto four = [&](const std::string& router) {
    return simulate_serving(parse_serving(deployment(R"(, "router": ")" + router + "\"", spread).replace(deployment().find("\"replicas\": 1"), 13, "\"replicas\": 4"), "d.json"));
  };
  const ServingResult aware = four("prefix-aware"), least = four("least-tokens");
  CHECK(aware.prefix_hit_tokens > least.prefix_hit_tokens);
  CHECK(aware.completed == 2000);
  CHECK_THAT(test::serving_error(deployment("", R"("count": 1, "prompt_tokens": 8, "output_tokens": 8, "shared_prefix": {"tokens": 0})")),
             Catch::Contains("/requests/shared_prefix/tokens"));
}

TEST_CASE("disaggregated, a request is prefilled on one replica, its KV moved, and decoded on another, exactly", "[serving]") {
  // One request, prefill on replica 1 and decode on replica 2 of one node: the same iterations as on one
  // replica, plus the KV transfer: 512 tokens x 128 kB a token over one NVLink port's bandwidth.
  const std::string pd = R"(, "disaggregation": {"prefill": 1, "decode": 1})";
  const ServingDeployment d = parse_serving(deployment(pd).replace(deployment().find("\"replicas\": 1,"), 14, ""), "d.json");
  REQUIRE(d.replicas == 2);
  REQUIRE(d.prefill_replicas == 1);
  const ServingResult split = simulate_serving(d);
  const ServingResult together = simulate_serving(parse_serving(deployment(), "d.json"));
  const LinkType& link = d.cluster.groups.front().gpu_link;
  const double transfer = link.latency_s + 512 * kv_capacity(d).kv_bytes_per_token / link.bandwidth_Bps;
  CHECK(split.kv_transfers == 1);
  CHECK(split.kv_transfer_s == Approx(transfer).epsilon(1e-12));
  CHECK(split.ttft_s.p50 == Approx(together.ttft_s.p50).epsilon(1e-12));
  CHECK(split.e2e_s.p50 == Approx(together.e2e_s.p50 + transfer).epsilon(1e-12));
  // Sent layer by layer: each of the 32 layers' KV leaves as the prompt's pass ends that layer; the link keeps up
  // (the whole KV takes far less than the pass), so only the last layer's 1/32 is left once the prompt is through.
  const std::string by_layer = R"(, "disaggregation": {"prefill": 1, "decode": 1, "kv_transfer": "by_layer"})";
  const ServingDeployment layered = parse_serving(deployment(by_layer).replace(deployment().find("\"replicas\": 1,"), 14, ""), "d.json");
  REQUIRE(layered.kv_by_layer);
  const ServingResult streamed = simulate_serving(layered);
  CHECK(512 * kv_capacity(d).kv_bytes_per_token / link.bandwidth_Bps < together.ttft_s.p50 / 10);
  CHECK(streamed.kv_transfer_s == Approx(link.latency_s + 512 * kv_capacity(d).kv_bytes_per_token / 32 / link.bandwidth_Bps).epsilon(1e-12));
  CHECK(streamed.e2e_s.p50 < split.e2e_s.p50);
  CHECK(streamed.ttft_s.p50 == Approx(split.ttft_s.p50).epsilon(1e-12));
  // A link slower than the pass: what it could not carry during the pass is left (the last layer's at least).
  serving::KvTransfer slow{};
  slow.early_s = 0.031;
  slow.last_layer = 1.0 / 32;
  CHECK(serving::kv_bytes_left(100, 1000 * slow.early_s, slow) == Approx(100 - 31));
  CHECK(serving::kv_bytes_left(100, 1e6 * slow.early_s, slow) == Approx(100.0 / 32));
  CHECK(serving::kv_bytes_left(100, 1e6, serving::KvTransfer{}) == 100);
  CHECK_THAT(test::serving_error(deployment(R"(, "disaggregation": {"prefill": 1, "decode": 1, "kv_transfer": "layer"})").replace(deployment().find("\"replicas\": 1,"), 14, "")),
             Catch::Contains("/disaggregation/kv_transfer: expected one of \"after_prefill\", \"by_layer\", found \"layer\""));
  // Under load the decode replicas never wait behind a prompt: the time per output token drops.
  const std::string load = R"("rate": "20 /s", "count": 1000, "prompt_tokens": {"uniform": [1000, 3000]}, "output_tokens": {"uniform": [100, 300]})";
  const ServingResult mixed = simulate_serving(parse_serving(deployment("", load).replace(deployment().find("\"replicas\": 1"), 13, "\"replicas\": 4"), "d.json"));
  const ServingResult apart = simulate_serving(parse_serving(deployment(R"(, "disaggregation": {"prefill": 2, "decode": 2})", load).replace(deployment().find("\"replicas\": 1,"), 14, ""), "d.json"));
  CHECK(apart.completed == 1000);
  CHECK(apart.tpot_s.p50 < mixed.tpot_s.p50);
  CHECK_THAT(test::serving_error(deployment(pd)), Catch::Contains("/replicas: expected the 2 replicas \"disaggregation\" makes"));
  CHECK_THAT(test::serving_error(deployment(R"(, "autoscale": {"min": 1, "max": 2})")), Catch::Contains("/autoscale: autoscaling replicas needs a scenario"));
}

TEST_CASE("a serving plan finds the fewest replicas meeting the SLOs by bisection, as a scan of every count does", "[serving][plan]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-plan-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d.json") << deployment(R"(, "slos": [{"metric": "ttft", "percentile": 95, "target": "300 ms"}, {"metric": "tpot", "target": "30 ms"}])",
                                              R"("rate": "10 /s", "count": 600, "prompt_tokens": {"uniform": [500, 1500]}, "output_tokens": {"uniform": [50, 300]})");
  const auto plan_text = [](int min, int max) {
    return R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "tp": [1, 2], "replicas": {"min": )" + std::to_string(min) + R"(, "max": )" +
           std::to_string(max) + R"(}}, "rates": ["20 /s", "60 /s"], "seeds": 2})";
  };
  const std::string file = (dir / "plan.json").string();
  const ServingPlanResult r = plan_serving(parse_serving_plan(plan_text(1, 8), file), 2);
  REQUIRE(r.lines.size() == 4);
  REQUIRE(r.recommended.size() == 2);
  REQUIRE(r.recommended[0].has_value());
  REQUIRE(r.recommended[1].has_value());
  CHECK(r.recommended[1]->gpus >= r.recommended[0]->gpus);  // three times the load needs at least as many GPUs
  for (const ServingPoint& line : r.lines) {
    if (line.verdict != ServingPoint::Verdict::met) continue;
    for (int k = 1; k < line.replicas; ++k) {  // every smaller count misses (or is not sure of) an SLO
      const ServingPlanResult one = plan_serving(parse_serving_plan(plan_text(k, k), file), 1);
      for (const ServingPoint& p : one.lines) {
        if (p.rate_per_s == line.rate_per_s && p.tp == line.tp) CHECK(p.verdict != ServingPoint::Verdict::met);
      }
    }
  }
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-9"]}})", file),
                    Catch::Contains("plan.json: /search/node_types/0: unknown node type \"hgx-h100-9\""));
  std::ofstream(dir / "noslo.json") << deployment("", R"("rate": "10 /s", "count": 10, "prompt_tokens": 100, "output_tokens": 10)");
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "noslo.json", "search": {"node_types": ["hgx-h100-8"]}})", file), Catch::Contains("has no \"slos\""));
  // Owned rather than rented: each point priced both ways, ranked by owning, its energy at the replicas' utilization.
  const std::string owned = R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "tp": [1, 2], "replicas": {"min": 1, "max": 8}},
      "rates": ["20 /s"], "seeds": 2, "cost": {"basis": "own"}})";
  const ServingPlanResult own = plan_serving(parse_serving_plan(owned, file), 2);
  REQUIRE(own.recommended[0].has_value());
  for (const ServingPoint& p : own.points) {
    CHECK(p.usd_per_month == p.cost.own_usd);
    CHECK(p.cost.rent_usd == cluster_of(p.node_type, p.nodes).usd_per_month());
    CHECK(p.cost.energy_usd >= monthly_cost(OwnershipCost{}, cluster_of(p.node_type, p.nodes), 0).energy_usd);
  }
  CHECK_THAT(serving_plan_json(parse_serving_plan(owned, file), own), Catch::Contains("\"own_usd\""));
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["l40s-pcie-8"]}, "cost": {"basis": "own"}})", file),
                    Catch::Contains("plan.json: /search/node_types/0: no purchase price for \"l40s-pcie-8\""));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a serving plan names the node types whose GPU's kernel constants are a guess", "[serving][plan][kernels]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-guess-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d.json") << deployment(R"(, "slos": [{"metric": "ttft", "percentile": 95, "target": "2 s"}])",
                                              R"("rate": "2 /s", "count": 40, "prompt_tokens": 500, "output_tokens": 50)");
  const std::string file = (dir / "plan.json").string();
  // The H20's SMs do four times the tensor work of the H100 SXM's its constants were fitted on, the A10's 1.7
  // times the A100's: guesses, in the search's order; the H100's own are not.
  const ServingPlan plan = parse_serving_plan(
      R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8", "hgx-h20-8", "a10-pcie-4"], "tp": [8], "replicas": {"min": 1, "max": 1}}, "rates": ["2 /s"], "seeds": 1})", file);
  const ServingPlanResult r = plan_serving(plan, 2);
  REQUIRE(r.kernel_guesses.size() == 2);
  CHECK(r.kernel_guesses[0].first == "hgx-h20-8");
  CHECK(r.kernel_guesses[0].second == borrowed_kernel_constants(cluster_of("hgx-h20-8", 1), {}, true).at(0));
  CHECK_THAT(r.kernel_guesses[0].second, Catch::StartsWith("h20 (hopper): "));
  CHECK(r.kernel_guesses[1].first == "a10-pcie-4");
  CHECK_THAT(r.kernel_guesses[1].second, Catch::StartsWith("a10 (ampere): "));
  CHECK(kernel_guess(r.kernel_guesses, "hgx-h100-8") == nullptr);
  std::ostringstream text;
  write_serving_plan_text(text, plan, r);
  CHECK_THAT(text.str(), Catch::Contains("node types whose GPU's kernel constants are a guess (and so are the times below on them):\n  hgx-h20-8: h20 (hopper): "));
  CHECK_THAT(serving_plan_json(plan, r), Catch::Contains(R"("node_type": "hgx-h20-8")"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a serving plan searches prefill/decode splits and engine knobs, each point the deployment they make", "[serving][plan]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-plan-pd-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d.json") << deployment(R"(, "knobs": {"block_size": 32}, "slos": [{"metric": "ttft", "percentile": 95, "target": "2 s"}, {"metric": "tpot", "target": "30 ms"}])",
                                              R"("rate": "10 /s", "count": 400, "prompt_tokens": {"uniform": [500, 1500]}, "output_tokens": {"uniform": [50, 300]})");
  const std::string file = (dir / "plan.json").string();
  const ServingPlan plan = parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "replicas": {"min": 1, "max": 4},
      "disaggregation": [0, 0.5], "knobs": {"max_num_batched_tokens": [2048, 8192], "policy": ["chunked-prefill", "orca"]}}, "rates": ["30 /s"], "seeds": 1})", file);
  REQUIRE(plan.knob_settings.size() == 4);
  CHECK(plan.knob_settings[0].label == "max_num_batched_tokens 2048, policy chunked-prefill");
  CHECK(plan.knob_settings[0].json.find("\"block_size\":32") != std::string::npos);  // over the deployment's own knobs
  const ServingPlanResult r = plan_serving(plan, 2);
  REQUIRE(r.lines.size() == 8);
  for (const ServingPoint& p : r.points) {
    if (p.prefill_share == 0) CHECK(p.prefill_replicas == 0);
    if (p.prefill_share > 0 && p.replicas == 1) CHECK(p.why == "a prefill/decode split needs 2 replicas at least");
    if (p.prefill_share > 0 && p.replicas >= 2) CHECK(p.prefill_replicas == std::lround(p.replicas * 0.5));
  }
  // A point is the deployment its edits make: simulated directly, the same SLO percentiles.
  int checked = 0;
  for (const ServingPoint& p : r.lines) {
    if (p.verdict != ServingPoint::Verdict::met || p.prefill_replicas == 0) continue;
    const std::size_t k = static_cast<std::size_t>(std::find_if(plan.knob_settings.begin(), plan.knob_settings.end(), [&](const ServingPlan::Knobs& s) { return s.label == p.knobs; }) - plan.knob_settings.begin());
    REQUIRE(k < plan.knob_settings.size());
    const ServingDeployment d = parse_serving(read_text_file((dir / "d.json").string()), "d.json",
        std::vector<ScenarioEdit>{{"/replicas", std::to_string(p.replicas)}, {"/requests/rate", "\"30 /s\""}, {"/knobs", plan.knob_settings[k].json},
                                  {"/disaggregation", R"({"prefill": )" + std::to_string(p.prefill_replicas) + R"(, "decode": )" + std::to_string(p.replicas - p.prefill_replicas) + "}"}});
    CHECK(simulate_serving(d).verdicts[0].achieved_s == Approx(p.slos[0].mean_s));
    ++checked;
  }
  CHECK(checked > 0);
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "knobs": {"block_size": [16, 0]}}})", file),
                    Catch::Contains("plan.json: /search/knobs/block_size/1: /knobs/block_size"));
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "disaggregation": [1]}})", file),
                    Catch::Contains("plan.json: /search/disaggregation: expected a non-empty array of prefill shares"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a serving plan weighs data-parallel attention against attention over TP, each point the deployment it makes", "[serving][plan][dp-attention]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-plan-dp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"name": "ds", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 1}]}, "model": "deepseek-v3", "weights": "fp8",
      "engine": "sglang", "tp": 8, "requests": {"rate": "16 /s", "count": 300, "prompt_tokens": {"uniform": [256, 2048]}, "output_tokens": {"uniform": [64, 256]}},
      "slos": [{"metric": "ttft", "percentile": 95, "target": "1 s"}, {"metric": "tpot", "percentile": 95, "target": "100 ms"}]})";
  const std::string file = (dir / "plan.json").string();
  const ServingPlan plan = parse_serving_plan(R"({"serving": "ds.json", "search": {"node_types": ["hgx-h200-8"], "dp_attention": [false, true],
      "disaggregation": [0, 0.5], "replicas": {"min": 1, "max": 2}}, "rates": ["12 /s"], "seeds": 1})", file);
  REQUIRE(plan.dp_attentions == std::vector<bool>{false, true});
  const ServingPlanResult r = plan_serving(plan, 2);
  // Attention over TP and data-parallel attention, each with and without a split.
  REQUIRE(r.lines.size() == 4);
  CHECK(std::count_if(r.lines.begin(), r.lines.end(), [](const ServingPoint& p) { return p.dp_attention; }) == 2);
  CHECK(std::count_if(r.lines.begin(), r.lines.end(), [](const ServingPoint& p) { return p.dp_attention && p.prefill_share > 0; }) == 1);
  int checked = 0;
  for (const ServingPoint& p : r.lines) {
    if (p.verdict != ServingPoint::Verdict::met || p.prefill_share > 0) continue;
    const ServingDeployment d = parse_serving(read_text_file((dir / "ds.json").string()), "ds.json",
        std::vector<ScenarioEdit>{{"/replicas", std::to_string(p.replicas)}, {"/requests/rate", "\"12 /s\""}, {"/dp_attention", p.dp_attention ? "true" : "false"}});
    CHECK(d.dp_attention == p.dp_attention);
    CHECK(simulate_serving(d).verdicts[0].achieved_s == Approx(p.slos[0].mean_s));
    ++checked;
  }
  CHECK(checked == 2);
  std::ostringstream text;
  write_serving_plan_text(text, plan, r);
  CHECK_THAT(text.str(), Catch::Contains("DP attention; together"));
  CHECK_THAT(serving_plan_json(plan, r), Catch::Contains(R"("dp_attention": true)"));
  // A base with data-parallel attention plans as it is; a dense model cannot have it, said with the field.
  std::ofstream(dir / "dp.json") << read_text_file((dir / "ds.json").string()).replace(0, 1, R"({"dp_attention": true, )");
  CHECK(parse_serving_plan(R"({"serving": "dp.json", "search": {"node_types": ["hgx-h200-8"]}})", file).dp_attentions == std::vector<bool>{true});
  // Its ranks split into prefill and decode replicas are searched too.
  CHECK(parse_serving_plan(R"({"serving": "dp.json", "search": {"node_types": ["hgx-h200-8"], "disaggregation": [0.5]}})", file).prefill_shares == std::vector<double>{0.5});
  std::ofstream(dir / "dense.json") << deployment(R"(, "slos": [{"metric": "ttft", "target": "1 s"}])", R"("rate": "10 /s", "count": 10, "prompt_tokens": 100, "output_tokens": 10)");
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "dense.json", "search": {"node_types": ["hgx-h100-8"], "dp_attention": [false, true]}})", file),
                    Catch::Contains("plan.json: /search/dp_attention/1: /dp_attention: data-parallel attention spreads"));
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "dense.json", "search": {"node_types": ["hgx-h100-8"], "dp_attention": ["yes"]}})", file),
                    Catch::Contains("plan.json: /search/dp_attention: expected a non-empty array of true"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a mixture of experts holds every expert's weights but reads only the experts its tokens reach", "[serving]") {
  CHECK(experts_touched(8, 2, 1) == 2);
  CHECK(experts_touched(8, 2, 2) == Approx(8 * (1 - 0.75 * 0.75)));
  CHECK(experts_touched(8, 2, 10'000) == Approx(8));
  std::string json = deployment(R"(, "tp": 2)");
  json.replace(json.find("llama-3-8b"), 10, "mixtral-8x7b");
  const ServingDeployment d = parse_serving(json, "d.json");
  // 46.7 B parameters (Mistral AI's count), half on each of the two GPUs, in bf16.
  CHECK(kv_capacity(d).weights_per_gpu_bytes * 2 / 2 == Approx(46.7e9).epsilon(0.005));
  // A decode of one sequence reads 2 of the 8 experts; every expert read costs about four times as much.
  ServingDeployment all = d;
  all.model.numbers["experts_per_token"] = 8;
  IterationTimer two(d), eight(all);
  const IterationShape one{.prefills = {}, .decodes = 1, .decode_context = 1000};
  const double ratio = eight.time(one).linear_s / two.time(one).linear_s;
  CHECK(ratio > 2.5);
  CHECK(ratio < 4);
  CHECK(simulate_serving(d).completed == 1);
}

TEST_CASE("a shared expert's weights are held and its GEMMs run for every token", "[serving]") {
  std::string with_shared = deployment(R"(, "tp": 4)");
  with_shared.replace(with_shared.find("llama-3-8b"), 10, "qwen2-57b-a14b");
  const ServingDeployment d = parse_serving(with_shared, "d.json");
  // Qwen2-57B-A14B: 57.4 B parameters with its shared experts, bf16 over TP 4.
  CHECK(kv_capacity(d).weights_per_gpu_bytes == Approx(2 * 57.4e9 / 4).epsilon(0.005));
  // Qwen3-30B-A3B, whose heads (128) are wider than hidden / heads (64): 30.5 B parameters (its model card),
  // and 4 KV heads of 128 a token and layer.
  const ServingDeployment q3 = parse_serving(deployment().replace(deployment().find("llama-3-8b"), 10, "qwen3-30b-a3b"), "d.json");
  CHECK(kv_capacity(q3).weights_per_gpu_bytes / 2 / 1e9 == Approx(30.5).margin(0.05));
  CHECK(kv_capacity(q3).kv_bytes_per_token == 2 * 48 * 4 * 128 * 2);
  const ServingResult r = simulate_serving(d);
  CHECK(r.completed == 1);
}

TEST_CASE("DeepSeek-V3 serves from one latent a token, whole on every TP rank, and decodes read it once", "[serving][mla]") {
  std::string json = deployment(R"(, "tp": 8, "weights": "fp8")");
  json.replace(json.find("llama-3-8b"), 10, "deepseek-v3");
  json.replace(json.find("hgx-h100-8"), 10, "hgx-h200-8");
  const ServingDeployment d = parse_serving(json, "d.json");
  const ModelShape m = ModelShape::of(d.model, 8);
  // The model card's 671 B (the multi-token-prediction module, 11.5 B more, left out).
  CHECK(m.parameters() == Approx(671e9).epsilon(0.002));
  // 61 layers x (512 + 64) bf16 a token, on each of the 8 GPUs: latent attention's heads share it.
  const KvCapacity c = kv_capacity(d);
  CHECK(c.kv_bytes_per_token == 61 * 576 * 2);
  // fp8 weights split over the ranks, but the query and latent down-projections held whole on each.
  const double replicated = 61 * 7168.0 * (1536 + 576);
  CHECK(c.weights_per_gpu_bytes == Approx(m.parameters() / 8 + replicated * 7 / 8));
  CHECK(c.tokens > 100000);
  // 64 sequences decoding over 32k tokens each: each GPU reads every sequence's latents, memory-bound
  // at 16 heads a GPU (about 30 FLOP a byte).
  IterationTimer timer(d);
  const GpuType& h200 = d.cluster.groups.front().gpu;
  const double latents = 64 * 32768.0 * c.kv_bytes_per_token;
  const double attention = timer.time({.prefills = {}, .decodes = 64, .decode_context = 64 * 32768.0}).attention_s;
  CHECK(attention > latents / h200.memory_bandwidth_Bps);
  CHECK(attention < 1.3 * latents / (h200.memory_bandwidth_Bps * h200.kernel_memory_scale));
  const ServingResult r = simulate_serving(d);
  CHECK(r.completed == 1);
}

TEST_CASE("pipeline stages split the layers as vLLM does, each GPU holding its stage's weights and KV", "[serving][pp]") {
  CHECK(stage_layers(80, 2) == std::vector<int>{40, 40});
  CHECK(stage_layers(61, 4) == std::vector<int>{15, 15, 16, 15});   // left over: the last but one
  CHECK(stage_layers(126, 4) == std::vector<int>{31, 32, 32, 31});  // vLLM's get_pp_indices, 405B on 4 stages
  CHECK(stage_layers(7, 7) == std::vector<int>(7, 1));
  // The stages' weights add up to the model's, dense first layers (DeepSeek's) where they fall.
  for (const char* model : {"llama-3-70b", "deepseek-v3"}) {
    INFO(model);
    const ModelShape m = ModelShape::of(*Catalog::builtin().architecture(model), 8);
    const std::vector<int> layers = stage_layers(static_cast<int>(m.layers), 4);
    double all = 0, linear = 0, replicated = 0;
    int first = 0;
    for (int s = 0; s < 4; ++s) {
      const ModelShape::Weights w = m.stage_weights(first, layers[static_cast<std::size_t>(s)], s == 0, s == 3);
      all += w.all;
      linear += w.linear;
      replicated += w.replicated;
      first += layers[static_cast<std::size_t>(s)];
    }
    CHECK(all == Approx(m.parameters()).epsilon(1e-12));
    CHECK(linear == Approx(m.linear_parameters()).epsilon(1e-12));
    CHECK(replicated == Approx(m.replicated_parameters()).epsilon(1e-12));
  }
  // Llama 3 70B over TP 4 x PP 2: each GPU holds half the TP 4 GPU's layers, so half its KV a token, and
  // about half its weights; the lanes split the fewest blocks.
  const ServingDeployment tp4 = parse_serving(deployment(R"(, "tp": 4)").replace(deployment().find("llama-3-8b"), 10, "llama-3-70b"), "d.json");
  const ServingDeployment pp2 = parse_serving(deployment(R"(, "tp": 4, "pp": 2)").replace(deployment().find("llama-3-8b"), 10, "llama-3-70b"), "d.json");
  const KvCapacity a = kv_capacity(tp4), b = kv_capacity(pp2);
  const ModelShape m = ModelShape::of(tp4.model, 4);
  CHECK(b.kv_bytes_per_token == Approx(a.kv_bytes_per_token / 2).epsilon(1e-12));
  // A stage: 40 layers and one of the embedding and the head (the last also the final norm), bf16 over TP 4.
  CHECK(b.weights_per_gpu_bytes == Approx((m.parameters() + (b.bound_stage == 1 ? m.hidden : -m.hidden)) / 2 * 2 / 4).epsilon(1e-12));
  CHECK(b.blocks == static_cast<std::int64_t>(std::floor(b.usable_bytes / (b.kv_bytes_per_token * 16))));
  CHECK(b.lane_blocks == b.blocks / 2);
  CHECK(a.lane_blocks == a.blocks);
}

TEST_CASE("a pipeline lane's iteration is the whole model's kernels and the stage sends, over NVLink in a node and the NICs between nodes", "[serving][pp]") {
  const std::string seventy = deployment().replace(deployment().find("llama-3-8b"), 10, "llama-3-70b");
  const auto with = [&](const std::string& extra, int nodes = 1) {
    std::string text = seventy;
    text.replace(text.find(R"("count": 1}])"), 12, R"("count": )" + std::to_string(nodes) + "}]");
    return parse_serving(text.insert(text.size() - 1, extra), "d.json");
  };
  const ServingDeployment tp4 = with(R"(, "tp": 4)"), in_node = with(R"(, "tp": 4, "pp": 2)"), across = with(R"(, "tp": 8, "pp": 2)", 2);
  IterationTimer t_tp4(tp4), t_in(in_node), t_across(across);
  const IterationShape shape{.prefills = {{1024, 0}}, .decodes = 64, .decode_context = 64 * 2000.0};
  const IterationTimer::Time plain = t_tp4.time(shape), staged = t_in.time(shape), far = t_across.time(shape);
  CHECK(plain.stage_send_s == 0);
  CHECK(staged.linear_s == plain.linear_s);
  CHECK(staged.attention_s == plain.attention_s);
  CHECK(staged.allreduce_s == plain.allreduce_s);
  CHECK(staged.stage_send_s > 0);
  CHECK(staged.total_s == Approx(plain.total_s + staged.stage_send_s).epsilon(1e-12));
  // Between nodes each TP rank sends its 1/8 of the hidden states and residuals (1,088 tokens) over its
  // own NIC: no faster than the NIC's bandwidth allows.
  const NodeGroup& g = across.cluster.groups.front();
  const double bytes = 2.0 * 1088 * 8192 * 2;
  CHECK(far.stage_send_s >= bytes / 8 / g.nic.bandwidth_Bps);
  CHECK(far.stage_send_s > staged.stage_send_s);
}

TEST_CASE("a deployment alone names its GPU where the kernel constants are a guess for it", "[serving]") {
  std::string h20 = deployment();
  h20.replace(h20.find("hgx-h100-8"), 10, "hgx-h20-8");
  for (const bool on_h20 : {true, false}) {
    const ServingDeployment d = parse_serving(on_h20 ? h20 : deployment(), "d.json");
    std::ostringstream out;
    write_serving_text(out, d, simulate_serving(d));
    INFO(on_h20);
    CHECK((out.str().find("borrowed    h20 (hopper): Hopper's constants were fitted on h100-sxm") != std::string::npos) == on_h20);
    CHECK((out.str().find("borrowed") != std::string::npos) == on_h20);
  }
}

TEST_CASE("a pipeline-parallel replica keeps pp batches in flight, one a lane", "[serving][pp]") {
  // 64 long prompts at once on one TP 4 replica, then on TP 4 x PP 2: two lanes, each half the prompts,
  // run side by side on the stages, so prefilling them takes about half as long; no GPU is busier than
  // the run is long. (Decodes gain nothing: a lane's step passes every stage, so 32 sequences a lane
  // step as fast as 64 do on TP 4 alone.)
  const std::string requests = R"("count": 64, "prompt_tokens": 2048, "output_tokens": 2)";
  std::string base = deployment("", requests);
  base.replace(base.find("llama-3-8b"), 10, "llama-3-70b");
  const auto with = [&](const std::string& extra) {
    std::string text = base;
    return parse_serving(text.insert(text.size() - 1, extra), "d.json");
  };
  const ServingResult one = simulate_serving(with(R"(, "tp": 4)")), two = simulate_serving(with(R"(, "tp": 4, "pp": 2)"));
  REQUIRE(two.completed == 64);
  CHECK(two.preemptions == 0);
  CHECK(two.makespan_s < 0.6 * one.makespan_s);
  CHECK(two.makespan_s > 0.45 * one.makespan_s);
  CHECK(two.gpu_busy_s <= 8 * two.last_finish_s * (1 + 1e-12));
  CHECK(two.busy.stage_send_s > 0);
  // The text and JSON say so.
  std::ostringstream text;
  write_serving_text(text, with(R"(, "tp": 4, "pp": 2)"), two);
  CHECK(text.str().find("x TP 4 x PP 2") != std::string::npos);
  CHECK(text.str().find("2 stages of 40 + 40 layers") != std::string::npos);
  CHECK(serving_json(with(R"(, "tp": 4, "pp": 2)"), two).find(R"("pp": 2)") != std::string::npos);
}

TEST_CASE("a TP group over whole nodes all-reduces across their NICs, and holds every layer's KV on each GPU", "[serving][tp-nodes]") {
  // Llama 3.1 405B (810 GB in bf16) on two HGX H100 nodes, as TP 16 or as TP 8 x PP 2.
  const auto on_nodes = [](const std::string& extra, int nodes) {
    return parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": )" + std::to_string(nodes) +
                             R"(}]}, "model": "llama-3.1-405b", "requests": {"count": 2, "prompt_tokens": 512, "output_tokens": 16})" + extra + "}",
                         "d.json");
  };
  const ServingDeployment tp16 = on_nodes(R"(, "tp": 16)", 2), staged = on_nodes(R"(, "tp": 8, "pp": 2)", 2);
  CHECK(tp16.replicas == 1);
  CHECK(on_nodes(R"(, "tp": 16)", 5).replicas == 2);  // whole nodes a replica: the fifth is left over
  // 8 KV heads over 16 ranks: each GPU keeps one (vLLM replicates them), for all 126 layers; a stage of
  // TP 8 keeps one head for its 63 layers.
  const KvCapacity a = kv_capacity(tp16), b = kv_capacity(staged);
  CHECK(a.kv_bytes_per_token == Approx(2 * b.kv_bytes_per_token).epsilon(1e-12));
  CHECK(a.weights_per_gpu_bytes == Approx(ModelShape::of(tp16.model, 16).parameters() * 2 / 16).epsilon(1e-12));
  // Each layer's two all-reduces of T x hidden bf16 values: whatever the algorithm, each node takes in the
  // other's contribution to every value, B bytes over its 8 NICs, so no faster than B / 8 a NIC.
  IterationTimer t16(tp16);
  const ServingDeployment one_node = on_nodes(R"(, "tp": 8, "weights": "fp8")", 1);
  IterationTimer t8(one_node);
  const IterationShape shape{.prefills = {{1024, 0}}, .decodes = 64, .decode_context = 64 * 2000.0};
  const double bytes = 1088.0 * 16384 * 2;
  const NodeGroup& g = tp16.cluster.groups.front();
  const IterationTimer::Time across = t16.time(shape), within = t8.time(shape);
  CHECK(across.allreduce_s >= 2 * 126 * bytes / 8 / g.nic.bandwidth_Bps);
  CHECK(across.allreduce_s > within.allreduce_s);  // the same all-reduces on one node's NVLink
  // It serves, and says its shape.
  const ServingResult r = simulate_serving(tp16);
  CHECK(r.completed == 2);
  std::ostringstream text;
  write_serving_text(text, tp16, r);
  CHECK_THAT(text.str(), Catch::Contains("1 replica x TP 16 on h100-sxm"));
}

TEST_CASE("data-parallel attention: a GPU a rank with its own KV pool, attention whole on each, the routed experts spread", "[serving][dp-attention]") {
  // DeepSeek-V3 in fp8 on an HGX H200 with SGLang, TP 8 or its eight GPUs as data-parallel attention ranks.
  const auto deepseek = [](const std::string& extra, const std::string& requests) {
    return parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 1}]}, "model": "deepseek-v3", "weights": "fp8", "engine": "sglang",
                             "tp": 8, "requests": {)" + requests + "}" + extra + "}",
                         "d.json");
  };
  const std::string one = R"("count": 1, "prompt_tokens": 512, "output_tokens": 16)";
  const ServingDeployment tp = deepseek("", one), dp = deepseek(R"(, "dp_attention": true)", one);
  CHECK(dp.lanes_a_replica() == 8);
  const KvCapacity a = kv_capacity(tp), b = kv_capacity(dp);
  // Every weight whole on each GPU but the routed experts, an eighth of them (fp8: a byte a weight).
  const ModelShape m = ModelShape::of(dp.model, 1);
  CHECK(b.weights_per_gpu_bytes == Approx(m.parameters() - m.routed_expert_parameters() * 7 / 8).epsilon(1e-12));
  CHECK(b.weights_per_gpu_bytes > a.weights_per_gpu_bytes);
  // The latent is whole on every GPU either way; a rank's pool is its GPU's, the replica eight of them.
  CHECK(b.kv_bytes_per_token == a.kv_bytes_per_token);
  CHECK(b.tokens == 8 * b.lane_tokens);
  CHECK(b.lane_tokens == b.lane_blocks * dp.engine.block_size);
  CHECK(b.tokens > 4 * a.tokens);
  // A rank's step: no TP all-reduces; the experts over every rank's tokens; two all-to-alls a mixture
  // layer, each sending T x top-8 x hidden bf16 values, 7/8 of them to other GPUs over its NVLink.
  IterationTimer timer(dp);
  const IterationShape alone{.prefills = {}, .decodes = 32, .decode_context = 32 * 2000.0};
  IterationShape busy = alone;
  busy.replica_tokens = 8 * 32;
  const IterationTimer::Time t1 = timer.time(alone), t8 = timer.time(busy);
  CHECK(t1.allreduce_s == 0);
  CHECK(t8.linear_s > t1.linear_s);
  CHECK(t8.attention_s == t1.attention_s);
  CHECK(t8.expert_alltoall_s == t1.expert_alltoall_s);
  const double sent = 32.0 * 8 * 7168 * 2 * 7 / 8;
  CHECK(t1.expert_alltoall_s >= 2 * 58 * sent / dp.cluster.groups.front().gpu_link.bandwidth_Bps);
  CHECK(t8.total_s == Approx(t8.linear_s + t8.attention_s + t8.logits_s + t8.host_s + t8.expert_alltoall_s).epsilon(1e-12));
  // Where TP 8's KV runs out (16 requests/s of long outputs), the ranks' pools hold every batch.
  const std::string load = R"("rate": "16 /s", "count": 800, "prompt_tokens": {"uniform": [256, 2048]}, "output_tokens": {"uniform": [512, 1024]})";
  const ServingResult under_tp = simulate_serving(deepseek("", load)), under_dp = simulate_serving(deepseek(R"(, "dp_attention": true)", load));
  CHECK(under_tp.preemptions > 0);
  CHECK(under_dp.preemptions == 0);
  CHECK(under_dp.completed == 800);
  CHECK(under_dp.ttft_s.p95 < under_tp.ttft_s.p95);
  // GPU time: a rank's step is one GPU's.
  CHECK(under_dp.gpu_busy_s == Approx(under_dp.busy.total_s - under_dp.busy.swap_s).epsilon(1e-9));
  std::ostringstream text;
  write_serving_text(text, deepseek(R"(, "dp_attention": true)", load), under_dp);
  CHECK_THAT(text.str(), Catch::Contains("attention data-parallel, experts over the 8") && Catch::Contains("expert all-to-alls"));
  CHECK_THAT(serving_json(deepseek(R"(, "dp_attention": true)", load), under_dp), Catch::Contains(R"("dp_attention": true)"));
  // Refused where it means nothing or is not modelled.
  CHECK_THAT(test::serving_error(deployment(R"(, "dp_attention": true)")), Catch::Contains("/dp_attention") && Catch::Contains("has none: expected a mixture-of-experts model"));
  CHECK_THAT(test::serving_error(deployment(R"(, "dp_attention": true, "pp": 2)")), Catch::Contains("/dp_attention") && Catch::Contains("pipeline stages"));
  CHECK_THAT(test::serving_error(deployment(R"(, "dp_attention": 1)")), Catch::Contains("/dp_attention"));
}

TEST_CASE("data-parallel attention split into prefill and decode replicas: a rank hands its request's KV to a decode rank, one GPU's worth", "[serving][dp-attention]") {
  // DeepSeek-V3 in fp8 with SGLang on two HGX H200s: the first node's eight ranks only prefill, the second's
  // only decode. One request: its prompt on a prefill rank, its whole latent KV (512 tokens, on that rank's GPU
  // alone) over one NIC to a decode rank on the other node, its tokens decoded there.
  const auto deepseek = [](const std::string& requests) {
    return parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 2}]}, "model": "deepseek-v3", "weights": "fp8", "engine": "sglang",
                             "tp": 8, "dp_attention": true, "disaggregation": {"prefill": 1, "decode": 1}, "requests": {)" +
                             requests + "}}",
                         "d.json");
  };
  const ServingDeployment d = deepseek(R"("count": 1, "prompt_tokens": 512, "output_tokens": 16)");
  REQUIRE(d.replicas == 2);
  REQUIRE(d.lanes_a_replica() == 8);
  const ServingResult one = simulate_serving(d);
  const double bytes = 512 * kv_capacity(d).kv_bytes_per_token;
  const LinkType& nic = d.cluster.groups.front().nic;
  CHECK(one.completed == 1);
  CHECK(one.kv_transfers == 1);
  CHECK(one.kv_transfer_bytes == Approx(bytes).epsilon(1e-12));  // one rank's, not eight shares
  CHECK(one.kv_transfer_s == Approx(nic.latency_s + bytes / nic.bandwidth_Bps).epsilon(1e-12));
  // Under load every request's KV moves once, and none is rerouted. Round-robin goes round each role's ranks:
  // a cursor shared by prompts and KV caches put nearly every prompt on rank 0 and every decode on rank 8, which
  // the lockstep then made every other rank wait on.
  const std::string load = R"("rate": "8 /s", "count": 400, "prompt_tokens": {"uniform": [256, 2048]}, "output_tokens": {"uniform": [32, 256]})";
  const ServingResult round = simulate_serving(deepseek(load));
  CHECK(round.completed == 400);
  CHECK(round.kv_transfers == 400);
  CHECK(round.requests_rerouted == 0);
  const ServingResult spread = simulate_serving(parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 2}]}, "model": "deepseek-v3", "weights": "fp8",
      "engine": "sglang", "tp": 8, "dp_attention": true, "disaggregation": {"prefill": 1, "decode": 1}, "router": "least-tokens", "requests": {)" + load + "}}",
                                                              "d.json"));
  // (Measured with the shared cursor: TTFT p99 372 ms and TPOT p50 21.1 ms against 296 and 19.9 spread.)
  CHECK(round.ttft_s.p99 == Approx(spread.ttft_s.p99).epsilon(0.05));
  CHECK(round.tpot_s.p50 == Approx(spread.tpot_s.p50).epsilon(0.03));
}

TEST_CASE("data-parallel attention ranks step together: a step lasts as long as its slowest rank", "[serving][dp-attention]") {
  // Two requests at time 0, one a rank (round-robin): a 2,048-token prompt on rank 0, then a 16-token one
  // on rank 1, two output tokens each. SGLang splits its 8,192-token budget among the eight ranks, so
  // rank 0 prefills in two chunks of 1,024. The first request starts step 1 alone; the second, arriving
  // as it began, waits for step 2, which runs rank 0's second chunk beside rank 1's prompt and lasts as
  // long as the slower; step 3 decodes one token on each. Ranks that kept their own pace would give rank
  // 1 its first token long before rank 0.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-lockstep-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "r.csv") << "arrival_s,prompt_tokens,output_tokens\n0,2048,2\n0,16,2\n";
  const ServingDeployment d = parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 1}]}, "model": "deepseek-v3",
                                                "weights": "fp8", "engine": "sglang", "tp": 8, "dp_attention": true, "requests": {"trace": "r.csv"}})",
                                            (dir / "d.json").string());
  const ServingResult r = simulate_serving(d);
  std::filesystem::remove_all(dir);
  REQUIRE(r.completed == 2);
  CHECK(d.engine.lane_token_budget(true, 8) == 1024);
  IterationTimer timer(d);
  const auto time = [&](IterationShape shape) { return timer.time(shape).total_s; };
  const double step1 = time({.prefills = {{1024, 0}}, .decodes = 0, .decode_context = 0, .replica_tokens = 1024});
  const double chunk0 = time({.prefills = {{1024, 1024}}, .decodes = 0, .decode_context = 0, .replica_tokens = 1040});
  const double prompt1 = time({.prefills = {{16, 0}}, .decodes = 0, .decode_context = 0, .replica_tokens = 1040});
  const double decode0 = time({.prefills = {}, .decodes = 1, .decode_context = 2049, .replica_tokens = 2});
  const double decode1 = time({.prefills = {}, .decodes = 1, .decode_context = 17, .replica_tokens = 2});
  const double step2 = std::max(chunk0, prompt1), step3 = std::max(decode0, decode1);
  REQUIRE(chunk0 > 2 * prompt1);
  CHECK(r.ttft_s.p50 == Approx(step1 + step2).epsilon(1e-12));
  CHECK(r.ttft_s.max == Approx(step1 + step2).epsilon(1e-12));
  CHECK(r.e2e_s.p50 == Approx(step1 + step2 + step3).epsilon(1e-12));
  CHECK(r.e2e_s.max == Approx(step1 + step2 + step3).epsilon(1e-12));
  // The faster rank waited for the slower in steps 2 and 3; GPU time counts the whole step on each.
  CHECK(r.busy.lockstep_s == Approx(std::abs(chunk0 - prompt1) + std::abs(decode0 - decode1)).epsilon(1e-9));
  CHECK(r.gpu_busy_s == Approx(step1 + 2 * step2 + 2 * step3).epsilon(1e-9));
  std::ostringstream text;
  write_serving_text(text, d, r);
  CHECK_THAT(text.str(), Catch::Contains("8,192 tokens an iteration (1,024 a data-parallel rank)") && Catch::Contains("waiting for the step's slowest rank"));
}

TEST_CASE("expert parallelism beside TP attention: each GPU holds 1/tp of the routed experts whole, no all-to-all", "[serving][expert-parallel]") {
  // Qwen3-30B-A3B (128 experts, top 8, 48 mixture layers) in bf16 on an HGX H100, TP 8, with and without
  // vLLM's --enable-expert-parallel.
  const auto qwen = [](const std::string& extra) {
    return parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 8,
                             "requests": {"count": 200, "rate": "20 /s", "prompt_tokens": 512, "output_tokens": 64})" + extra + "}",
                         "d.json");
  };
  const ServingDeployment tp = qwen(""), ep = qwen(R"(, "expert_parallel": true)");
  // The same bytes a GPU either way: 1/8 of every expert, or 1/8 of the experts.
  CHECK(kv_capacity(ep).weights_per_gpu_bytes == kv_capacity(tp).weights_per_gpu_bytes);
  // One decode token reaches 8 experts: under TP each GPU runs all 8 at 1/8 of their width, under EP one
  // whole (8 / 8 a GPU). The rest of the step is the same: attention, the TP all-reduces, no all-to-all.
  IterationTimer tp_timer(tp), ep_timer(ep);
  const IterationShape one{.prefills = {}, .decodes = 1, .decode_context = 600};
  const IterationTimer::Time a = tp_timer.time(one), b = ep_timer.time(one);
  CHECK(b.attention_s == a.attention_s);
  CHECK(b.allreduce_s == a.allreduce_s);
  CHECK(b.expert_alltoall_s == 0);
  const KernelModel k(tp.cluster.groups.front().gpu);
  const ModelShape m = ModelShape::of(tp.model, 8);
  REQUIRE(experts_touched(m.experts, m.top_k, 1) == Approx(8));
  const auto grouped = [&](double width, double experts, double activation_rows) {
    return k.estimate({.cls = KernelClass::gemm, .m = 1, .n = 2 * width, .k = m.hidden, .batch = experts}, Dtype::bf16).time_s() +
           k.estimate({.cls = KernelClass::gemm, .m = 1, .n = m.hidden, .k = width, .batch = experts}, Dtype::bf16).time_s() +
           k.estimate({.cls = KernelClass::gated_activation, .m = activation_rows, .n = width}, Dtype::bf16).time_s();
  };
  CHECK(b.linear_s - a.linear_s == Approx(48 * (grouped(768, 1, 1) - grouped(768.0 / 8, 8, 8))).epsilon(1e-9));
  // End to end: the deployment says so in its text and JSON, and serves every request.
  const ServingResult r = simulate_serving(ep);
  CHECK(r.completed == 200);
  std::ostringstream text;
  write_serving_text(text, ep, r);
  CHECK_THAT(text.str(), Catch::Contains("TP 8 (experts over the 8, expert parallel)") && Catch::Contains("experts spread over 8 GPUs"));
  CHECK_THAT(serving_json(ep, r), Catch::Contains(R"("expert_parallel": true)"));
  CHECK_THAT(test::serving_error(deployment(R"(, "expert_parallel": true)")), Catch::Contains("/expert_parallel") && Catch::Contains("has none: expected a mixture-of-experts model"));
}

TEST_CASE("hot experts: the busiest GPU's experts take imbalance times the mean tokens, and its all-to-alls as much more", "[serving][expert-parallel]") {
  const auto qwen = [](const std::string& extra) {
    return parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 8, "expert_parallel": true,
                             "requests": {"count": 200, "rate": "20 /s", "prompt_tokens": 512, "output_tokens": 64})" + extra + "}",
                         "d.json");
  };
  const ServingDeployment even = qwen(""), hot = qwen(R"(, "moe": {"imbalance": 2})");
  CHECK(hot.expert_imbalance == 2);
  IterationTimer even_timer(even), hot_timer(hot);
  // A 512-token prompt reaches every one of the 128 experts (top 8): 32 rows each on average, 16 experts a
  // GPU; the busiest GPU's 16 take 64 rows each. Only the routed experts' GEMMs change.
  const IterationShape prompt{.prefills = {{512, 0}}, .decodes = 0, .decode_context = 0};
  const IterationTimer::Time a = even_timer.time(prompt), b = hot_timer.time(prompt);
  const ModelShape m = ModelShape::of(even.model, 8);
  REQUIRE(experts_touched(m.experts, m.top_k, 512) == Approx(128).epsilon(1e-9));
  const KernelModel k(even.cluster.groups.front().gpu);
  const auto grouped = [&](double rows, double experts) {
    return k.estimate({.cls = KernelClass::gemm, .m = rows, .n = 2 * 768.0, .k = m.hidden, .batch = experts}, Dtype::bf16).time_s() +
           k.estimate({.cls = KernelClass::gemm, .m = rows, .n = m.hidden, .k = 768, .batch = experts}, Dtype::bf16).time_s() +
           k.estimate({.cls = KernelClass::gated_activation, .m = rows * experts, .n = 768}, Dtype::bf16).time_s();
  };
  CHECK(b.linear_s - a.linear_s == Approx(48 * (grouped(64, 16) - grouped(32, 16))).epsilon(1e-9));
  CHECK(b.linear_s > a.linear_s);
  CHECK(b.attention_s == a.attention_s);
  CHECK(b.allreduce_s == a.allreduce_s);
  // One decode token reaches 8 experts, one a GPU: an expert sees it once at most, so no GPU is busier.
  const IterationShape one{.prefills = {}, .decodes = 1, .decode_context = 600};
  CHECK(hot_timer.time(one).linear_s == even_timer.time(one).linear_s);
  // Data-parallel attention: the busiest GPU receives twice the mean of the dispatch and combine, as an even
  // router's at twice the tokens.
  const auto deepseek = [](const std::string& extra) {
    return parse_serving(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 1}]}, "model": "deepseek-v3", "weights": "fp8", "engine": "sglang",
                             "tp": 8, "dp_attention": true, "requests": {"count": 1, "prompt_tokens": 512, "output_tokens": 16})" + extra + "}",
                         "d.json");
  };
  IterationTimer dp_even(deepseek("")), dp_hot(deepseek(R"(, "moe": {"imbalance": 2})"));
  const IterationTimer::Time hot32 = dp_hot.time({.prefills = {}, .decodes = 32, .decode_context = 32 * 2000.0});
  const IterationTimer::Time even64 = dp_even.time({.prefills = {}, .decodes = 64, .decode_context = 64 * 2000.0});
  CHECK(hot32.expert_alltoall_s > 0);
  CHECK(hot32.expert_alltoall_s == Approx(even64.expert_alltoall_s).epsilon(1e-12));
  // End to end: said in the text, the assumptions and the JSON; slower than an even router.
  const ServingResult r = simulate_serving(hot), base = simulate_serving(even);
  CHECK(r.completed == 200);
  // (The median TTFT moves with where arrivals fall between iterations; the means and the whole requests do not.)
  CHECK(r.ttft_s.mean > base.ttft_s.mean);
  CHECK(r.tpot_s.mean > base.tpot_s.mean);
  CHECK(r.e2e_s.p50 > base.e2e_s.p50);
  std::ostringstream text;
  write_serving_text(text, hot, r);
  CHECK_THAT(text.str(), Catch::Contains("hot experts: the busiest GPU 2x the mean tokens") && Catch::Contains("reaching the busiest GPU's experts 2 times as often"));
  CHECK_THAT(serving_json(hot, r), Catch::Contains(R"("expert_imbalance": 2.0)"));
  // Refused where it means nothing, or out of range, with the field.
  CHECK_THAT(test::serving_error(deployment(R"(, "moe": {"imbalance": 2})")), Catch::Contains("/moe") && Catch::Contains("only for a mixture of experts"));
  std::string tp_only = R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 8, "moe": {"imbalance": 2},
                            "requests": {"count": 2, "prompt_tokens": 512, "output_tokens": 64}})";
  CHECK_THAT(test::serving_error(tp_only), Catch::Contains("/moe") && Catch::Contains("expected \"expert_parallel\" or \"dp_attention\""));
  CHECK_THAT(test::serving_error(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 8, "expert_parallel": true,
                          "moe": {"imbalance": 9}, "requests": {"count": 2, "prompt_tokens": 512, "output_tokens": 64}})"),
             Catch::Contains("/moe") && Catch::Contains("at most the 8 GPUs"));
  CHECK_THAT(test::serving_error(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 8, "expert_parallel": true,
                          "moe": {"imbalance": 0.5}, "requests": {"count": 2, "prompt_tokens": 512, "output_tokens": 64}})"),
             Catch::Contains("/moe/imbalance"));
  CHECK_THAT(test::serving_error(R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "qwen3-30b-a3b", "tp": 8, "expert_parallel": true,
                          "moe": {"imbalance": 2, "capacity_factor": 1}, "requests": {"count": 2, "prompt_tokens": 512, "output_tokens": 64}})"),
             Catch::Contains("capacity_factor"));
}

TEST_CASE("disaggregated pipeline stages: each stage's GPUs send their own layers' KV to the same stage of the decode replica, stages side by side", "[serving][pp]") {
  // Llama 3 70B (80 layers, 8 KV heads of 128) at TP 4 x PP 3: stages of 27, 27 and 26 layers, each GPU a
  // token 2 x 2 heads x 128 x 2 bytes a layer. Replicas of 12 GPUs on three 8-GPU nodes, placed as a
  // scenario places them (a node's worth, then the rest, first fit): the prefill replica on node 0 (stages
  // 0 and 1) and node 1's GPUs 0-3 (stage 2), the decode replica on node 2 and node 1's GPUs 4-7. Stages 0
  // and 1 cross the NICs, stage 2 stays on node 1's NVLink: the transfer lasts as long as 27 layers over a
  // NIC; every stage's TP ranks together move the whole model's KV.
  const std::string requests = R"("count": 1, "prompt_tokens": 2048, "output_tokens": 16)";
  std::string base = deployment("", requests);
  base.replace(base.find("llama-3-8b"), 10, "llama-3-70b");
  base.replace(base.find(R"("count": 1}])"), 12, R"("count": 3}])");
  base.erase(base.find(R"("replicas": 1,)"), 14);
  const auto with = [&](const std::string& extra) {
    std::string text = base;
    return parse_serving(text.insert(text.size() - 1, extra), "d.json");
  };
  const ServingDeployment d = with(R"(, "tp": 4, "pp": 3, "replicas": 2, "disaggregation": {"prefill": 1, "decode": 1})");
  REQUIRE(stage_layers(80, 3) == std::vector<int>{27, 27, 26});
  const double per_layer = 2.0 * 2 * 128 * 2;
  REQUIRE(kv_capacity(d).stage_kv_bytes_per_token == std::vector<double>{27 * per_layer, 27 * per_layer, 26 * per_layer});
  REQUIRE(d.placement.size() == 4);
  CHECK((d.placement[0].node == 0 && d.placement[0].gpus == 8 && d.placement[1].node == 1 && d.placement[1].first_gpu == 0 && d.placement[1].gpus == 4));
  CHECK((d.placement[2].node == 2 && d.placement[2].gpus == 8 && d.placement[3].node == 1 && d.placement[3].first_gpu == 4 && d.placement[3].gpus == 4));
  const ServingResult split = simulate_serving(d);
  const ServingResult together = simulate_serving(with(R"(, "tp": 4, "pp": 3, "replicas": 1)"));
  const NodeGroup& g = d.cluster.groups.front();
  const double transfer = g.nic.latency_s + 2048 * 27 * per_layer / g.nic.bandwidth_Bps;
  REQUIRE(transfer > g.gpu_link.latency_s + 2048 * 27 * per_layer / g.gpu_link.bandwidth_Bps);  // the NIC's stages bind
  CHECK(split.completed == 1);
  CHECK(split.kv_transfers == 1);
  CHECK(split.kv_transfer_bytes == Approx(2048.0 * 2 * 80 * 8 * 128 * 2).epsilon(1e-12));  // the whole model's KV: 320 KiB a token
  CHECK(split.kv_transfer_s == Approx(transfer).epsilon(1e-12));
  CHECK(split.ttft_s.p50 == Approx(together.ttft_s.p50).epsilon(1e-12));
  CHECK(split.e2e_s.p50 == Approx(together.e2e_s.p50 + transfer).epsilon(1e-12));
  // Alone as in a scenario: replicas that do not fit whole per node are refused (TP 2 x PP 3 leaves 2 GPUs
  // of each 8-GPU node, so three nodes hold three replicas, not the four their TP groups would make).
  CHECK_THAT(test::serving_error(std::string(base).insert(base.size() - 1, R"(, "tp": 2, "pp": 3, "disaggregation": {"prefill": 2, "decode": 2})")),
             Catch::Contains("/replicas: expected prefill and decode replicas that fit the cluster's 3 nodes whole") && Catch::Contains("3 of the 4 replicas of TP 2 x PP 3 found room"));
  // Under load, decodes apart from prompts step faster, as without stages; every request is served.
  const std::string load = R"("rate": "4 /s", "count": 300, "prompt_tokens": {"uniform": [1000, 3000]}, "output_tokens": {"uniform": [100, 300]})";
  base = deployment("", load);
  base.replace(base.find("llama-3-8b"), 10, "llama-3-70b");
  base.replace(base.find(R"("count": 1}])"), 12, R"("count": 2}])");
  base.erase(base.find(R"("replicas": 1,)"), 14);
  const ServingResult mixed = simulate_serving(with(R"(, "tp": 4, "pp": 2, "replicas": 2)"));
  const ServingResult apart = simulate_serving(with(R"(, "tp": 4, "pp": 2, "replicas": 2, "disaggregation": {"prefill": 1, "decode": 1})"));
  CHECK(apart.completed == 300);
  CHECK(apart.kv_transfers == 300);
  CHECK(apart.tpot_s.p50 < mixed.tpot_s.p50);
}

TEST_CASE("a serving plan searches pipeline stages and TP across nodes, each point the deployment it names on the nodes it needs", "[serving][plan][pp]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-plan-pp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string base = deployment(R"(, "tp": 4, "slos": [{"metric": "ttft", "percentile": 95, "target": "2 s"}, {"metric": "tpot", "target": "60 ms"}])",
                                R"("rate": "2 /s", "count": 120, "prompt_tokens": {"uniform": [500, 1500]}, "output_tokens": {"uniform": [50, 150]})");
  base.replace(base.find("llama-3-8b"), 10, "llama-3-70b");
  std::ofstream(dir / "d.json") << base;
  const std::string file = (dir / "plan.json").string();
  const ServingPlan plan = parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "tp": [4, 8, 16], "pp": [1, 2],
      "replicas": {"min": 1, "max": 2}}, "rates": ["2 /s"], "seeds": 1})", file);
  REQUIRE(plan.pps == std::vector<int>{1, 2});
  const ServingPlanResult r = plan_serving(plan, 2);
  REQUIRE(r.lines.size() == 6);
  // Nodes as a scenario places replicas: pieces of a node's worth, first fit (TP 2 x PP 3 leaves 2 GPUs of a
  // node, which no 6-GPU replica takes; TP 4 x PP 3's 4-GPU pieces pair up on a node).
  CHECK(replica_nodes(2, 3, 8, 4, 0, 0) == 4);
  CHECK(replica_nodes(4, 3, 8, 2, 0, 0) == 3);
  CHECK(replica_nodes(4, 2, 8, 3, 0, 0) == 3);
  CHECK(replica_nodes(2, 1, 8, 5, 0, 0) == 2);
  CHECK(replica_nodes(16, 2, 8, 2, 0, 0) == 8);
  for (const ServingPoint& p : r.points) {
    const int groups = p.replicas * p.pp;  // here TP groups of 4 and 8 fill nodes, one of 16 takes two whole
    CHECK(p.nodes == (p.tp <= 8 ? (groups + 8 / p.tp - 1) / (8 / p.tp) : groups * p.tp / 8));
    CHECK(p.gpus == 8 * p.nodes);
    CHECK(p.verdict != ServingPoint::Verdict::does_not_fit);  // every shape fits: TP 4 alone holds 70B's weights
    // The point is the deployment it names: its SLOs as a run of that deployment gives them.
    const ServingDeployment d = parse_serving(base, (dir / "d.json").string(),
                                              std::vector<ScenarioEdit>{{"/cluster", R"({"nodes": [{"type": "hgx-h100-8", "count": )" + std::to_string(p.nodes) + "}]}"},
                                                                        {"/tp", std::to_string(p.tp)}, {"/pp", std::to_string(p.pp)}, {"/replicas", std::to_string(p.replicas)}});
    const ServingResult run = simulate_serving(d);
    REQUIRE(p.slos.size() == run.verdicts.size());
    CHECK(p.slos[0].mean_s == run.verdicts[0].achieved_s);
  }
  // Split into prefill and decode replicas, TP 2 x PP 3 replicas (6 GPUs, one a node) run at every count.
  const ServingPlan split = parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "tp": [2], "pp": [3], "disaggregation": [0.5],
      "replicas": {"min": 2, "max": 4}}, "rates": ["2 /s"], "seeds": 1})", file);
  for (const ServingPoint& p : plan_serving(split, 2).points) {
    CHECK(p.verdict != ServingPoint::Verdict::does_not_fit);
    CHECK(p.nodes == p.replicas);
  }
  // The text has a stages column, the recommendation its stages where it has some; the JSON each point's.
  std::ostringstream text;
  write_serving_plan_text(text, plan, r);
  CHECK_THAT(text.str(), Catch::Contains(" tp  pp  replicas"));
  CHECK_THAT(serving_plan_json(plan, r), Catch::Contains("\"pp\": 2"));
  CHECK_THROWS_WITH(parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h100-8"], "pp": [0]}})", file),
                    Catch::Contains("plan.json: /search/pp: expected a non-empty array of pipeline stages a replica, each from 1 to 64"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("pipeline stages are refused where they are not modelled, with the field and why", "[serving][pp][input]") {
  std::string seventy = deployment();
  seventy.replace(seventy.find("llama-3-8b"), 10, "llama-3-70b");
  const auto error_with = [&](const std::string& extra) {
    std::string text = seventy;
    return test::serving_error(text.insert(text.size() - 1, extra));
  };
  CHECK(error_with(R"(, "pp": 65)").find("/pp: expected an integer from 1 to 64") != std::string::npos);
  CHECK(error_with(R"(, "tp": 3, "pp": 2)").find("attention heads") != std::string::npos);  // 64 heads: tp 3 refused first
  CHECK(error_with(R"(, "tp": 8, "pp": 2)").find("/replicas: expected at most the 0 replicas of 16 GPUs") != std::string::npos);
  CHECK(error_with(R"(, "pp": 0)").find("/pp") != std::string::npos);
  CHECK(error_with(R"(, "tp": 4, "pp": 2)").empty());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fleetsim-serving-pp-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "d.json") << R"({"name": "t", "cluster": {"nodes": [{"type": "hgx-h200-8", "count": 1}]}, "model": "deepseek-v3", "weights": "fp8", "tp": 8,
      "dp_attention": true, "requests": {"rate": "1 /s", "count": 10, "prompt_tokens": 512, "output_tokens": 64}, "slos": [{"metric": "ttft", "target": "1 s"}]})";
  // A data-parallel attention base plans as it is (search.dp_attention weighs it against TP).
  CHECK(parse_serving_plan(R"({"serving": "d.json", "search": {"node_types": ["hgx-h200-8"]}, "rates": ["1 /s"]})", (dir / "plan.json").string()).dp_attentions ==
        std::vector<bool>{true});
  std::filesystem::remove_all(dir);
}
