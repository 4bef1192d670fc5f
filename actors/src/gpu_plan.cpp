#include "gpu_plan.h"

#include <cstdio>
#include <map>

#include "actorflow/environment.h"
#include "actorflow/kernel.h"
#include "actorflow/ops/gpu_placement.h"

namespace actorflow::runtime {

bool graph_asks_for_gpu(const Graph& g) {
  for (int i = 0; i < g.num_nodes(); ++i) {
    const std::string& d = g.node(i).device;
    if (d.empty()) continue;
    for (size_t k = 0; k + 2 < d.size(); ++k) {
      const char a = static_cast<char>(d[k] | 0x20), b = static_cast<char>(d[k + 1] | 0x20),
                 c = static_cast<char>(d[k + 2] | 0x20);
      if (a == 'g' && b == 'p' && c == 'u') return true;
    }
  }
  return false;
}

namespace {

std::string device_suffix(DeviceId d) { return d.type == DeviceType::GPU ? "gpu" + std::to_string(d.index) : "cpu"; }

class CopyInserter {
 public:
  CopyInserter(OptimizedPlan& p) : p_(p) {}

  DeviceId device_of(int id) const { return p_.device(id); }

  // The endpoint carrying `e`'s value on `want`, adding copies as needed.
  Endpoint on(const Endpoint& e, DeviceId want) {
    const DeviceId from = device_of(e.node);
    if (from == want) return e;
    auto key = std::make_tuple(e.node, e.index, want.type == DeviceType::GPU ? want.index : -1);
    auto it = copies_.find(key);
    if (it != copies_.end()) return {it->second, 0};
    Endpoint src = e;
    DeviceId src_dev = from;
    if (from.type == DeviceType::GPU && want.type == DeviceType::GPU) {
      // Between two GPUs through the host (no peer copies yet).
      src = on(e, DeviceId{DeviceType::CPU, 0});
      src_dev = DeviceId{DeviceType::CPU, 0};
    }
    const Node& producer = p_.node(e.node);
    Node c;
    const bool to_device = src_dev.type == DeviceType::CPU;
    c.op = to_device ? "_CopyToDevice" : "_CopyToHost";
    c.name = producer.name + ":" + std::to_string(e.index) + "/_copy_to_" + device_suffix(want);
    c.inputs = {src};
    c.output_dtypes = {producer.output_dtypes[static_cast<size_t>(e.index)]};
    c.output_shapes = {producer.output_shapes[static_cast<size_t>(e.index)]};
    c.device = "/" + std::string(to_device ? "gpu:" + std::to_string(want.index) : "gpu:" + std::to_string(src_dev.index));
    const int id = p_.add_node(std::move(c));
    // A copy runs on its GPU: the copy streams of that device.
    p_.set_device(id, to_device ? want : src_dev);
    added_.push_back(id);
    copies_[key] = id;
    return {id, 0};
  }

  const std::vector<int>& added() const { return added_; }

 private:
  OptimizedPlan& p_;
  std::map<std::tuple<int, int, int>, int> copies_;
  std::vector<int> added_;
};

}  // namespace

Status place_plan_on_gpus(const Graph& g, OptimizedPlan& p, const GpuPlanOptions& opts) {
  GpuPlacementOptions po;
  po.num_gpus = opts.num_gpus;
  po.log = false;
  AF_ASSIGN_OR_RETURN(GpuPlacement placed, place_on_gpus(g, po));
  std::vector<std::string> lines = placed.fallbacks;
  StepPlan& plan = p.mutable_plan();
  bool any_gpu = false;
  auto place = [&](int id) {
    if (id < 0 || id >= g.num_nodes()) return;
    DeviceId d = placed.devices[static_cast<size_t>(id)];
    const Node& n = p.node(id);
    if (d.type == DeviceType::GPU && n.op != g.node(id).op && !KernelRegistry::global().has(n.op, DeviceType::GPU)) {
      lines.push_back("soft placement: node '" + n.name + "' (" + n.op + ", rewritten from " + g.node(id).op +
                      ") runs on the CPU: no GPU kernel for " + n.op);
      d = DeviceId{};
    }
    any_gpu = any_gpu || d.type == DeviceType::GPU;
    p.set_device(id, d);
  };
  for (int id : plan.nodes) place(id);
  for (const Endpoint& e : plan.feeds) place(e.node);
  if (opts.logged) {
    std::lock_guard<std::mutex> lock(*opts.logged_mu);
    for (const std::string& l : lines)
      if (opts.logged->insert(l).second) std::fprintf(stderr, "actorflow: %s\n", l.c_str());
  }
  if (!any_gpu) return Status::OK();

  CopyInserter copies(p);
  const std::vector<int> nodes = plan.nodes;
  for (int id : nodes) {
    const DeviceId to = p.device(id);
    const Node& n = p.node(id);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Endpoint e = p.node(id).inputs[k];
      const DeviceId want =
          to.type == DeviceType::GPU && gpu_input_in_host_memory(n.op, static_cast<int>(k)) ? DeviceId{} : to;
      const Endpoint src = copies.on(e, want);
      if (!(src == e)) p.rewrite(id).inputs[k] = src;
    }
  }
  // Fetches come back to the host (a fed value is returned as fed, on the host).
  std::set<Endpoint> fed(plan.feeds.begin(), plan.feeds.end());
  for (Endpoint& f : plan.fetches)
    if (f.node >= 0 && !fed.count(f)) f = copies.on(f, DeviceId{});
  plan.nodes.insert(plan.nodes.end(), copies.added().begin(), copies.added().end());
  // TF's log_device_placement: where every node of the plan runs, copies included.
  if (const char* v = environment_switch(EnvironmentSwitch::log_device_placement); v && std::string(v) == "1") {
    std::string out;
    for (int id : plan.nodes) {
      const Node& n = p.node(id);
      out += "actorflow: placement: node '" + n.name + "' (" + n.op + ") on " + p.device(id).to_string() + "\n";
    }
    std::fputs(out.c_str(), stderr);
  }
  return Status::OK();
}

}  // namespace actorflow::runtime
