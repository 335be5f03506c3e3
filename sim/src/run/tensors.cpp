#include "tensors.hpp"

namespace fleetsim::run {

Tensors::Tensors(const Scenario& scenario, const Trace& trace, const Workload& workload, GpuMemory& memory,
                 std::function<void(GpuId)> freed)
    : sc_(scenario), trace_(trace), workload_(workload), memory_(memory), freed_(std::move(freed)) {}

void Tensors::size_tasks(const RecordCounts& n) {
  inputs_left_.reserve(n.most_tasks);
  first_edge_.reserve(n.most_instances);
  for (std::size_t i = first_edge_.size(); i < n.instances; ++i) {
    const Workflow& wf = sc_.workflows[trace_.instance(static_cast<std::uint32_t>(i)).workflow];
    first_edge_.push_back(static_cast<std::uint32_t>(held_.size()));
    held_.resize(held_.size() + wf.edges.size(), 0.0);
    for (std::uint32_t t = 0; t < wf.tasks.size(); ++t) inputs_left_.push_back(static_cast<std::uint32_t>(wf.inputs(t).size()));
  }
}

const std::vector<TaskId>& Tensors::produced(TaskId task, double now_s) {
  const TaskRecord& r = trace_.task(task);
  const Workflow& wf = sc_.workflows[r.workflow];
  const std::uint32_t instance = index(r.instance);
  for (std::uint32_t e : wf.outputs(r.task)) {
    if (wf.edges[e].bytes > 0) held(instance, e) = memory_.hold(trace_.gpus[r.gpu_begin], wf.edges[e].bytes, now_s);
  }
  ready_.clear();
  for (std::uint32_t e : wf.outputs(r.task)) {
    const TaskId consumer = workload_.task_id(instance, wf.edges[e].to);
    if (--inputs_left_[index(consumer)] == 0 && trace_.task(consumer).status == TaskStatus::queued) ready_.push_back(consumer);
  }
  return ready_;
}

GpuId Tensors::holder(std::uint32_t instance, std::uint32_t edge) const {
  const Workflow& wf = sc_.workflows[trace_.instance(instance).workflow];
  const TaskRecord& producer = trace_.task(workload_.task_id(instance, wf.edges[edge].from));
  return trace_.gpus[producer.gpu_begin];
}

void Tensors::release(std::uint32_t instance, std::uint32_t edge, double now_s) {
  double& bytes = held(instance, edge);
  if (bytes <= 0) return;
  const GpuId gpu = holder(instance, edge);
  memory_.unhold(gpu, bytes, now_s);
  bytes = 0;
  freed_(gpu);
}

void Tensors::release_inputs(TaskId task, double now_s) {
  const TaskRecord& r = trace_.task(task);
  const Workflow& wf = sc_.workflows[r.workflow];
  const std::uint32_t instance = index(r.instance);
  for (std::uint32_t e : wf.inputs(r.task)) {
    if (trace_.task(workload_.task_id(instance, wf.edges[e].from)).status == TaskStatus::completed) release(instance, e, now_s);
  }
}

void Tensors::lose(GpuId gpu, const std::function<void(TaskId, TaskId)>& lost) {
  for (const TaskRecord& producer : trace_.tasks) {
    const TaskId t = trace_.id_of(producer);
    if (producer.status != TaskStatus::completed || trace_.gpus[producer.gpu_begin] != gpu) continue;
    const std::uint32_t instance = index(producer.instance);
    const Workflow& wf = sc_.workflows[producer.workflow];
    for (std::uint32_t e : wf.outputs(producer.task)) {
      if (held(instance, e) <= 0) continue;
      held(instance, e) = 0;
      const TaskId consumer = workload_.task_id(instance, wf.edges[e].to);
      if (trace_.task(consumer).status == TaskStatus::queued) lost(consumer, t);
    }
  }
}

}  // namespace fleetsim::run
