// replica_device_setter and the graph side of sync replicas and worker clocks; the
// kernels that keep their state on the ps are in ops/cpu/coordination_kernels.cpp.
#include "actorflow/distributed.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>

#include "dsl/dsl_build.h"
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"

namespace actorflow::train {
namespace {

// Puts the nodes made in its scope on `device` when there is one (an empty device would
// otherwise undo the scopes outside it).
class OnDevice {
 public:
  OnDevice(Graph& g, const std::string& device) {
    if (!device.empty()) scope_.emplace(g, device);
  }

 private:
  std::optional<DeviceScope> scope_;
};

}  // namespace

std::function<std::string(const Node&)> replica_device_setter(int num_ps_tasks, const std::string& worker_device,
                                                              PsStrategy strategy, const std::string& ps_job) {
  if (num_ps_tasks < 0) throw Error(invalid_argument("replica_device_setter: num_ps_tasks must be at least 0"));
  struct State {
    int next = 0;
    std::vector<int64_t> bytes;
    std::set<std::string> placed;  // the variables placed here
  };
  auto st = std::make_shared<State>();
  st->bytes.assign(static_cast<size_t>(num_ps_tasks), 0);
  return [st, num_ps_tasks, worker_device, strategy, ps_job](const Node& n) -> std::string {
    if (n.op == "VariableV2" && num_ps_tasks > 0) {
      int task = 0;
      if (strategy == PsStrategy::round_robin) {
        task = st->next;
        st->next = (st->next + 1) % num_ps_tasks;
      } else {
        task = static_cast<int>(std::min_element(st->bytes.begin(), st->bytes.end()) - st->bytes.begin());
      }
      const Shape& s = n.output_shapes.empty() ? Shape{} : n.output_shapes[0];
      int64_t elems = s.is_fully_defined() ? s.num_elements() : 1;
      st->bytes[static_cast<size_t>(task)] += elems * static_cast<int64_t>(std::max<size_t>(1, dtype_size(n.output_dtypes[0])));
      std::string device = "/job:" + ps_job + "/task:" + std::to_string(task) + "/cpu:0";
      st->placed.insert(n.name);
      return device;
    }
    // An op that names a variable (Assign, Apply*, ReadVariable) gets no device: the
    // partitioner runs it where the variable ends up (a scope inside this one, such as
    // the optimizer's for slots, may have moved the variable).
    for (auto& [key, value] : n.attrs)
      if (value.is<std::string>() && st->placed.count(value.get<std::string>())) return std::string();
    return n.device.empty() ? worker_device : n.device;
  };
}

Operation apply_gradients(const std::vector<OptimizerVars>& parts, const std::vector<optim::GradsAndVars>& grads,
                          const Output& global_step, const std::string& name) {
  if (parts.empty() || parts.size() != grads.size())
    throw Error(invalid_argument(name + ": " + std::to_string(parts.size()) + " optimizers for " +
                                 std::to_string(grads.size()) + " lists of gradients"));
  if (parts.size() == 1) return parts[0].optimizer->apply_gradients(grads[0], global_step, name);
  std::vector<Operation> updates;
  for (size_t p = 0; p < parts.size(); ++p)
    if (!grads[p].empty()) updates.push_back(parts[p].optimizer->apply_gradients(grads[p], Output(), name));
  Graph& g = *updates.at(0).graph();
  const std::string base = name.empty() ? "train" : name;
  if (!global_step.valid()) return group(g, updates, base);
  ControlDependencies after(g, updates);
  return Operation(assign_add(global_step, scalar_like(g, global_step.dtype(), 1, base + "_step/one"), base + "_step"));
}

Operation minimize(const std::vector<OptimizerVars>& parts, const Output& loss, const Output& global_step) {
  std::vector<optim::GradsAndVars> grads;
  for (const OptimizerVars& p : parts) {
    if (!p.optimizer) throw Error(invalid_argument("minimize: a part has no optimizer"));
    grads.push_back(p.optimizer->compute_gradients(loss, p.var_list));
  }
  return apply_gradients(parts, grads, global_step, "");
}

SyncReplicasOps sync_replicas_minimize(optim::Optimizer& opt, const Output& loss, const Output& global_step,
                                       int worker_index, const SyncReplicasOptions& options,
                                       const std::vector<Output>& var_list) {
  return sync_replicas_minimize({{&opt, var_list}}, loss, global_step, worker_index, options);
}

SyncReplicasOps sync_replicas_minimize(const std::vector<OptimizerVars>& parts, const Output& loss, const Output& global_step,
                                       int worker_index, const SyncReplicasOptions& options) {
  if (!global_step.valid()) throw Error(invalid_argument("sync_replicas_minimize: needs the global step variable"));
  if (options.replicas_to_aggregate < 1)
    throw Error(invalid_argument("sync_replicas_minimize: replicas_to_aggregate must be at least 1"));
  if (parts.empty()) throw Error(invalid_argument("sync_replicas_minimize: no optimizer given"));
  Graph& g = *loss.graph();
  std::vector<optim::GradsAndVars> grads;
  for (const OptimizerVars& p : parts) {
    if (!p.optimizer) throw Error(invalid_argument("sync_replicas_minimize: a null optimizer"));
    grads.push_back(p.optimizer->compute_gradients(loss, p.var_list));
  }
  SyncReplicasOps out;
  // The apply step is built outside this scope, so that its slots are named as a plain
  // minimize() names them and checkpoints move between sync and async training.
  std::optional<NameScope> scope(std::in_place, g, "sync_replicas");
  const std::string scope_name = g.current_name_scope();
  out.local_step = placeholder(g, DType::i64, Shape{}, "local_step");
  std::vector<Operation> deposits;
  std::vector<Output> stale;
  std::vector<optim::GradsAndVars> averaged(parts.size());
  for (size_t part = 0; part < parts.size(); ++part) {
    for (auto& [gr, v] : grads[part]) {
      if (!gr.valid()) continue;
      const std::string& var = v.node().name;
      // A sparse gradient (a gather's) stays sparse on its way to the ps and there: the
      // wire and the accumulator carry the rows touched, not the variable.
      const bool sparse = gr.sparse();
      Output indices, values;
      if (sparse) {
        const std::vector<int64_t>& dims = v.shape().dims();
        if (dims.empty()) throw Error(invalid_argument("sync_replicas_minimize: a sparse gradient for scalar variable '" + var + "'"));
        // Each row this worker's batch touched, once.
        Gradient rows = sum_duplicate_rows(gr, std::vector<int64_t>(dims.begin() + 1, dims.end()));
        values = rows.values;
        indices = rows.indices;
      }
      OnDevice on_ps(g, v.node().device);
      NodeSpec put;
      put.op = sparse ? "SparseAccumulatorApplyGradient" : "AccumulatorApplyGradient";
      put.name = "accumulate";
      put.inputs = sparse ? std::vector<Output>{out.local_step, values, indices} : std::vector<Output>{out.local_step, gr.dense};
      put.attrs = {{"accumulator", var}, {"worker", int64_t{worker_index}}};
      Operation deposit = dsl::add_op(g, std::move(put));
      deposits.push_back(deposit);
      NodeSpec take;
      take.op = sparse ? "SparseAccumulatorTakeGradient" : "AccumulatorTakeGradient";
      take.name = "take";
      take.inputs = {out.local_step};
      take.control_inputs = {deposit};  // the chief's own gradient is in before it takes
      take.attrs["accumulator"] = var;
      take.attrs["dtype"] = v.dtype();
      take.attrs["shape"] = v.shape();
      take.attrs["num_required"] = int64_t{options.replicas_to_aggregate};
      take.attrs["timeout_ms"] = options.timeout_ms;
      Operation taken = dsl::add_op(g, std::move(take));
      Gradient mean;
      if (sparse) {
        mean.indices = taken.output(0);
        mean.values = taken.output(1);
      } else {
        mean.dense = taken.output(0);
      }
      averaged[part].emplace_back(mean, v);
      stale.push_back(dsl::add(g, "AccumulatorNumStale", "num_stale", {}, {{"accumulator", var}}));
    }
  }
  if (deposits.empty()) throw Error(invalid_argument("sync_replicas_minimize: no gradients for any variable"));
  scope.reset();
  Output new_step = apply_gradients(parts, averaged, global_step, "sync_replicas_apply").output(0);
  scope.emplace(g, scope_name);  // ends in "/": re-entered as it stands
  const std::string& step_device = global_step.node().device;
  Operation advance;
  {
    OnDevice on_ps(g, step_device);
    NodeSpec adv;
    adv.op = "SyncRoundAdvance";
    adv.name = "advance";
    adv.inputs = {new_step};
    adv.attrs = {{"barrier", std::string("sync_round")}};
    advance = dsl::add_op(g, std::move(adv));
    NodeSpec wait;
    wait.op = "SyncRoundWait";
    wait.name = "wait";
    wait.inputs = {out.local_step};
    wait.control_inputs = deposits;
    wait.attrs = {{"barrier", std::string("sync_round")}, {"timeout_ms", options.timeout_ms}};
    out.worker_step = dsl::add_op(g, std::move(wait)).output(0);
  }
  {
    ControlDependencies after(g, {advance});
    out.chief_step = identity(new_step, "chief_step");
  }
  out.num_stale = stale.size() == 1 ? stale[0] : add_n(stale, "num_stale_total");
  return out;
}

Output worker_clock(Graph& g, const WorkerTable& table, int worker, const Output& clock, int64_t staleness,
                    int64_t timeout_ms) {
  OnDevice on(g, table.device);
  return dsl::add(g, "WorkerClock", "worker_clock", {clock},
                  {{"table", table.name},
                   {"worker", int64_t{worker}},
                   {"num_workers", int64_t{table.num_workers}},
                   {"staleness", staleness},
                   {"timeout_ms", timeout_ms}});
}

Operation worker_done(Graph& g, const WorkerTable& table, int worker) {
  OnDevice on(g, table.device);
  NodeSpec spec;
  spec.op = "WorkerDone";
  spec.name = "worker_done";
  spec.attrs = {{"table", table.name}, {"worker", int64_t{worker}}, {"num_workers", int64_t{table.num_workers}}};
  return dsl::add_op(g, std::move(spec));
}

Output wait_workers_done(Graph& g, const WorkerTable& table, int64_t timeout_ms) {
  OnDevice on(g, table.device);
  return dsl::add(g, "WaitWorkersDone", "wait_workers_done", {},
                  {{"table", table.name}, {"num_workers", int64_t{table.num_workers}}, {"timeout_ms", timeout_ms}});
}

Output worker_clock_log(Graph& g, const WorkerTable& table) {
  OnDevice on(g, table.device);
  return dsl::add(g, "WorkerClockLog", "worker_clock_log", {}, {{"table", table.name}});
}

}  // namespace actorflow::train
