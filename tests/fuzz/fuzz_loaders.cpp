// libFuzzer target for every input loader. The first byte picks the loader; the rest is the file (or,
// for loader 11, the bytes another MPI rank sent).
// A loader may throw InputError (that is its job) and nothing else: any other exception, crash,
// hang or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "fleetsim/catalog.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/import.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/measured_kernels.hpp"
#include "fleetsim/nccl.hpp"
#include "fleetsim/nccl_tests.hpp"
#include "fleetsim/plan.hpp"
#include "fleetsim/policy.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/ranks.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/serving.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/units.hpp"
#include "fleetsim/workflow.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 23) {
      case 0: fleetsim::parse_scenario(text, "fuzz.json", ""); break;
      case 1: fleetsim::parse_workflow(text, "fuzz.json", fleetsim::Catalog::builtin()); break;
      case 2: {
        fleetsim::Catalog catalog;
        catalog.add_json(text, "fuzz.json");
        break;
      }
      case 3:
        for (auto dim : {fleetsim::Dimension::bytes, fleetsim::Dimension::bandwidth, fleetsim::Dimension::flop_rate,
                         fleetsim::Dimension::time, fleetsim::Dimension::rate}) {
          try {
            fleetsim::parse_quantity(text, dim);
          } catch (const fleetsim::UnitError&) {
          }
        }
        break;
      case 4: fleetsim::parse_profile(text, "fuzz.json"); break;
      case 5: fleetsim::parse_nccl_tests_log(text, "fuzz.log"); break;
      case 6: fleetsim::parse_training_job(text, "fuzz.json"); break;
      case 7: fleetsim::parse_plan(text, "fuzz.json", "scenarios"); break;
      case 8: fleetsim::import_comfyui(text, "fuzz.json", fleetsim::Catalog::builtin()); break;
      case 9: fleetsim::import_wfcommons(text, "fuzz.json", *fleetsim::Catalog::builtin().gpu("h100-sxm")); break;
      case 10: {  // a job trace CSV, read through a scenario that replays it
        static const std::string dir = std::filesystem::temp_directory_path() / ("fleetsim-fuzz-" + std::to_string(getpid()));
        std::filesystem::create_directories(dir);
        std::ofstream(dir + "/jobs.csv", std::ios::binary) << text;
        fleetsim::parse_scenario(R"({"name": "f", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
                                    "workload": [{"trace": "jobs.csv", "reference_gpu": "h100-sxm"}]})",
                                 "fuzz.json", dir);
        break;
      }
      case 11:  // a rank's report of measured times, as another MPI rank sent it
        try {
          fleetsim::decode_rank_report(text);
        } catch (const std::invalid_argument&) {
        }
        break;
      case 12: fleetsim::parse_nccl_constants(text, "fuzz.json"); break;
      case 13: fleetsim::parse_measured_collective(text, "fuzz.csv"); break;
      case 14: fleetsim::parse_kernel_constants(text, "fuzz.json"); break;
      case 15: fleetsim::parse_measured_kernels(text, "fuzz.csv"); break;
      case 16: fleetsim::import_philly_trace(text, "fuzz.json"); break;
      case 17:  // a cluster job log in CSV, read as every named log and through a mapping with every key
        for (const fleetsim::JobLogFormat& f : fleetsim::job_log_formats()) {
          try {
            fleetsim::import_job_csv(text, "fuzz.csv", f.mapping());
          } catch (const fleetsim::InputError&) {
          }
        }
        fleetsim::import_job_csv(text, "fuzz.csv",
                                 fleetsim::parse_job_csv_columns("job=a,submit=b,gpus=c,share=d/1000,start=e,end=f,tenant=g,status=h"));
        break;
      case 18: {  // a --set edit, POINTER=VALUE, on a small valid scenario
        const std::size_t eq = text.find('=');
        const std::vector<fleetsim::ScenarioEdit> edits{{text.substr(0, eq), eq == std::string::npos ? "" : text.substr(eq + 1)}};
        fleetsim::parse_scenario(R"({"name": "f", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "tenants": [{"name": "a"}],
                                    "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
                                    "workload": [{"workflow": "w", "arrival": {"process": "once"}}]})",
                                 "fuzz.json", "", edits);
        break;
      }
      case 19:  // a ComfyUI registry file of additions, used on a small graph it can reach
        fleetsim::import_comfyui(R"({"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "m.safetensors"}},
                                     "2": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
                                     "3": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "latent_image": ["2", 0]}},
                                     "4": {"class_type": "Custom", "inputs": {"image": ["3", 0]}}})",
                                 "fuzz.json", fleetsim::Catalog::builtin(), {.registry_json = text, .registry_file = "registry.json"});
        break;
      case 20: {  // a history of job sizes that gittins ranks by (its `sizes` file)
        const std::string path = (std::filesystem::temp_directory_path() / ("fleetsim-fuzz-sizes-" + std::to_string(getpid()))).string();
        std::ofstream(path, std::ios::binary) << text;
        struct Removed {
          const std::string& path;
          ~Removed() { std::error_code ignored; std::filesystem::remove(path, ignored); }
        } removed{path};
        const fleetsim::PolicyInfo* gittins = fleetsim::find_policy("gittins");
        fleetsim::PolicyParams params;
        for (const fleetsim::ParamInfo& p : gittins->params) params.set(p.name, p.default_value);
        params.set("sizes", path);
        gittins->make(params);
        break;
      }
      case 21: fleetsim::parse_serving(text, "fuzz.json"); break;
      case 22: {  // a serving request trace CSV, read through a deployment that replays it
        static const std::string dir = std::filesystem::temp_directory_path() / ("fleetsim-fuzz-serving-" + std::to_string(getpid()));
        std::filesystem::create_directories(dir);
        std::ofstream(dir + "/requests.csv", std::ios::binary) << text;
        fleetsim::parse_serving(R"({"name": "f", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]}, "model": "llama-3-8b",
                                   "requests": {"trace": "requests.csv"}})",
                                (std::filesystem::path(dir) / "fuzz.json").string());
        break;
      }
    }
  } catch (const fleetsim::InputError&) {
  }
  return 0;
}
