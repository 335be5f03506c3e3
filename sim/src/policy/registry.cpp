// The one table of scheduling policies: name, one-line summary, reference, parameters, factory.
// Adding a policy means adding a row here; a test checks that names are unique.
#include "fleetsim/error.hpp"
#include "backfill.hpp"
#include "list_policies.hpp"
#include "preemptive.hpp"
#include "tiresias.hpp"

namespace fleetsim {

namespace {

std::vector<ParamInfo> tiresias_params(bool gittins) {
  std::vector<ParamInfo> params{
      {"thresholds", ParamType::string, std::string("3250, 7200"),
       "GPU-seconds received at which a job moves down a queue (increasing, comma-separated); the published simulator's"},
      {"starvation", ParamType::number, 0.0, "a job that waited this many times as long as it last ran goes back to queue 0; 0: never"},
      {"preempt", ParamType::boolean, true, "suspend running jobs of lower queues for waiting jobs of higher ones"},
      {"restore", ParamType::number, 0.0, "seconds a suspended job spends restoring its checkpoint when it runs again"}};
  if (gittins) {
    params.push_back({"quantum", ParamType::number, 3250.0, "GPU-seconds of service the index looks ahead; 0: the best over all"});
    params.push_back({"sizes", ParamType::path, std::string(""),
                      "a file of past job sizes in GPU-seconds, one per line (a header line allowed), that the index is computed over, "
                      "as Tiresias learns it from history; empty: the replayed workload's own sizes"});
  }
  return params;
}

ParamInfo overestimate_param() {
  return {"overestimate", ParamType::number, 1.0,
          "each task's run-time estimate is its predicted time times a factor drawn from [1, overestimate] (1: exact)"};
}

std::deque<PolicyInfo>& table() {
  using namespace policies;
  static std::deque<PolicyInfo> registry{
      {"fifo", "first in, first out on the lowest-numbered free GPUs; the oldest ready task blocks the rest",
       "the baseline of every batch scheduler", {}, make_fifo},
      {"sjf", "shortest predicted job (workflow instance) first; tasks that do not fit are skipped",
       "Smith 1956; SJF can starve long jobs", {}, make_sjf},
      {"priority", "highest tenant priority first (interactive before batch at equal priority); with backfill, lower-priority tasks "
                   "may use GPUs the head cannot; with preempt, a task that cannot be placed stops lower-ranked running tasks",
       "strict priority queueing; preemptive priority", {{"backfill", ParamType::boolean, false, "let tasks behind a blocked one go first"},
                                                          {"preempt", ParamType::boolean, false, "stop lower-priority (or, at equal priority, batch) running tasks in one node to make room"}},
       make_priority},
      {"least-loaded", "ready order; each task on the node with the most free GPUs (spreads load)",
       "least-loaded placement", {}, make_least_loaded},
      {"memory-aware", "ready order; prefer GPUs where the model's weights are resident, then best-fit VRAM",
       "model affinity as in serving systems that cache weights", {}, make_memory_aware},
      {"locality", "ready order; place a task on (or next to) the GPU holding most of its inputs",
       "data locality, as in Hadoop/Spark delay-free locality placement", {}, make_locality},
      {"critical-path", "the task with the longest remaining critical path of its workflow first",
       "Kwok & Ahmad 1999 (critical-path list scheduling)", {}, make_critical_path},
      {"heft", "upward rank order; each task on the free GPU where it finishes earliest (compute, inputs, weights)",
       "Topcuoglu, Hariri & Wu 2002 (HEFT), online variant over free GPUs", {}, make_heft},
      {"drf", "fair share across tenants: the tenant with the fewest GPUs for its quota goes first",
       "Ghodsi et al. 2011 (DRF), over GPUs; tenant quota is the weight", {}, make_drf},
      {"las", "Tiresias' discretized 2D-LAS: queues by GPU-seconds received, FIFO within a queue; jobs of higher queues suspend "
              "those of lower ones",
       "Gu et al. 2019 (Tiresias), as in its published simulator (dlas-gpu)", tiresias_params(false), make_las},
      {"gittins", "Tiresias-G: the queues of las, ordered within each by the Gittins index over the workload's job sizes; preemptive",
       "Gu et al. 2019 (Tiresias, dlas-gpu-gittins); Gittins 1979; Aalto, Ayesta & Righter 2009", tiresias_params(true), make_gittins},
      {"time-slice", "Gandiva-style time slicing: while jobs wait, running jobs give up their GPUs in turn at the end of each "
                     "quantum (suspended, their work kept) and queue behind the jobs already waiting; a gang holds its turn "
                     "until slice ends free its GPUs",
       "Xiao et al. 2018 (Gandiva), its suspend-resume time slicing only",
       {{"quantum", ParamType::number, 60.0, "seconds a job runs before it yields to jobs waiting longer"},
        {"restore", ParamType::number, 0.0, "seconds a suspended job spends restoring its state when it runs again"}},
       make_time_slice},
      {"srtf", "shortest remaining time first, preemptive: the jobs with the least predicted time left hold the GPUs; others are "
               "suspended (their work kept)",
       "Schrage 1968; the oracle baseline of Tiresias (Gu et al. 2019) and Helios (Hu et al. 2021)",
       {{"restore", ParamType::number, 0.0, "seconds a suspended job spends restoring its state when it runs again"}},
       make_srtf},
      {"ftf", "finish-time fairness: the instance slowed most relative to running alone goes first",
       "Mahajan et al. 2020 (Themis)", {}, make_ftf},
      {"gang-backfill", "FIFO gangs with EASY backfilling over run-time estimates: the blocked head gets a reservation; later tasks "
                        "start if they end before it or use GPUs it does not need",
       "Lifka 1995 (EASY); Mu'alem & Feitelson 2001", {overestimate_param()}, make_easy_backfill},
      {"conservative-backfill", "FIFO gangs with conservative backfilling: every waiting task (up to depth) gets a reservation; a "
                                "later task starts only if it delays none",
       "Mu'alem & Feitelson 2001; Slurm's sched/backfill (bf_max_job_test)",
       {{"depth", ParamType::integer, std::int64_t{100}, "waiting tasks looked at and given reservations per round (Slurm's bf_max_job_test)"},
        overestimate_param()},
       make_conservative_backfill},
  };
  return registry;
}

}  // namespace

const std::deque<PolicyInfo>& policy_registry() { return table(); }

void register_policy(PolicyInfo info, const std::string& origin) {
  if (find_policy(info.name) != nullptr) {
    throw InputError({Problem{origin, "", "a policy named \"" + info.name + "\" is already registered"}});
  }
  if (info.name.empty() || info.make == nullptr) {
    throw InputError({Problem{origin, "", "a policy needs a name and a factory"}});
  }
  table().push_back(std::move(info));
}

}  // namespace fleetsim
