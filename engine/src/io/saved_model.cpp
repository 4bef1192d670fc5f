#include "actorflow/saved_model.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "actorflow/dsl.h"

namespace actorflow {

namespace fs = std::filesystem;

Status export_model(Session& sess, Graph& g, const Output& input, const Output& prediction, const std::string& dir) {
  // Everything the prediction needs through data edges; the feature placeholder ends it.
  std::vector<char> need(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<int> stack{prediction.node_id()};
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (need[static_cast<size_t>(id)]) continue;
    need[static_cast<size_t>(id)] = 1;
    for (auto& e : g.node(id).inputs) stack.push_back(e.node);
  }
  Graph out;
  std::map<int, int> remap;
  std::vector<Output> vars;
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!need[static_cast<size_t>(id)]) continue;
    Node n = g.node(id);
    for (auto& e : n.inputs) e.node = remap.at(e.node);
    std::vector<int> ctrl;
    for (int c : n.control_inputs)
      if (remap.count(c)) ctrl.push_back(remap[c]);
    n.control_inputs = ctrl;
    auto added = out.add_node_raw(n);
    if (!added.ok()) return added.status();
    remap[id] = added->node_id();
    if (n.op == "VariableV2") {
      vars.push_back(Output(&g, id, 0));
      out.add_to_collection("variables", added->node_id());
    }
  }
  if (!remap.count(input.node_id())) return invalid_argument("export: the prediction does not depend on the input placeholder");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status(Code::unavailable, "cannot create '" + dir + "': " + ec.message());
  AF_RETURN_IF_ERROR(out.save(dir + "/model.afg"));
  std::vector<Fetch> fetches(vars.begin(), vars.end());
  auto values = sess.run(fetches);
  if (!values.ok()) return values.status();
  std::vector<NamedTensor> weights;
  for (size_t i = 0; i < vars.size(); ++i) weights.push_back({vars[i].node().name, (*values)[i]});
  AF_RETURN_IF_ERROR(write_safetensors(dir + "/weights.safetensors", weights, {}, true));
  std::ofstream sig(dir + "/signature.txt");
  sig << "input " << input.node().name << "\noutput " << prediction.node().name << ":" << prediction.index() << "\n";
  sig.close();
  if (!sig) return data_loss("cannot write '" + dir + "/signature.txt'");
  return Status::OK();
}

Result<ServedModel> ServedModel::load(const std::string& dir, SessionOptions options) {
  ServedModel s;
  AF_ASSIGN_OR_RETURN(s.graph_, Graph::load(dir + "/model.afg"));
  Graph& g = *s.graph_;
  std::ifstream sig(dir + "/signature.txt");
  std::string key, input, output;
  while (sig >> key) {
    if (key == "input") sig >> input;
    else if (key == "output") sig >> output;
  }
  if (input.empty() || output.empty()) return data_loss("'" + dir + "/signature.txt' lacks input or output");
  AF_ASSIGN_OR_RETURN(s.input_, g.find_output(input));
  AF_ASSIGN_OR_RETURN(s.prediction_, g.find_output(output));
  AF_ASSIGN_OR_RETURN(s.weights_, read_safetensors(dir + "/weights.safetensors"));
  FeedDict feeds;
  std::vector<Operation> assigns;
  for (auto& w : s.weights_) {
    const Node* var = g.find_node(w.name);
    if (!var || var->op != "VariableV2")
      return not_found("'" + dir + "/weights.safetensors' names '" + w.name + "', not a variable of the model");
    Output v(&g, var->id, 0);
    Output p = placeholder(g, w.value.dtype(), w.value.shape(), w.name + "/restore_value");
    assigns.push_back(Operation(assign(v, p, w.name + "/restore")));
    feeds.push_back({p, w.value});
  }
  AF_ASSIGN_OR_RETURN(Session sess, Session::create(g, options));
  s.session_ = std::make_unique<Session>(std::move(sess));
  AF_RETURN_IF_ERROR(s.session_->run({}, feeds, assigns).status());
  return s;
}

Result<Tensor> ServedModel::predict(const Tensor& x) {
  constexpr int64_t kRows = 1000;
  int64_t n = x.dim(0);
  if (n == 0) return invalid_argument("no inputs to predict");
  std::vector<Tensor> parts;
  for (int64_t b = 0; b < n; b += kRows) {
    auto out = session_->run({prediction_}, {{input_, x.slice_rows(b, std::min(n, b + kRows))}});
    if (!out.ok()) return out.status();
    parts.push_back((*out)[0]);
  }
  if (parts.size() == 1) return parts[0];
  std::vector<int64_t> dims = parts[0].shape().dims();
  dims[0] = n;
  Tensor all(parts[0].dtype(), Shape(dims));
  size_t off = 0;
  for (auto& p : parts) {
    std::memcpy(static_cast<char*>(all.raw_data()) + off, p.raw_data(), p.bytes());
    off += p.bytes();
  }
  return all;
}

}  // namespace actorflow
