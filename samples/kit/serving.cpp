#include "serving.h"

#include <actorflow/data/readers.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "trainer.h"

namespace kit {

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;

af::Status export_model(af::Session& sess, af::Graph& g, Model& m, const std::string& dir) {
  // Everything the prediction needs through data edges; the feature placeholder ends it.
  std::vector<char> need(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<int> stack{m.prediction.node_id()};
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (need[static_cast<size_t>(id)]) continue;
    need[static_cast<size_t>(id)] = 1;
    for (auto& e : g.node(id).inputs) stack.push_back(e.node);
  }
  af::Graph out;
  std::map<int, int> remap;
  std::vector<af::Output> vars;
  for (int id = 0; id < g.num_nodes(); ++id) {
    if (!need[static_cast<size_t>(id)]) continue;
    af::Node n = g.node(id);
    for (auto& e : n.inputs) e.node = remap.at(e.node);
    std::vector<int> ctrl;
    for (int c : n.control_inputs)
      if (remap.count(c)) ctrl.push_back(remap[c]);
    n.control_inputs = ctrl;
    auto added = out.add_node_raw(n);
    if (!added.ok()) return added.status();
    remap[id] = added->node_id();
    if (n.op == "VariableV2") {
      vars.push_back(af::Output(&g, id, 0));
      out.add_to_collection("variables", added->node_id());
    }
  }
  if (!remap.count(m.x.node_id())) return af::invalid_argument("export: the prediction does not depend on the input placeholder");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return af::Status(af::Code::unavailable, "cannot create '" + dir + "': " + ec.message());
  AF_RETURN_IF_ERROR(out.save(dir + "/model.afg"));
  std::vector<af::Fetch> fetches(vars.begin(), vars.end());
  auto values = sess.run(fetches);
  if (!values.ok()) return values.status();
  std::vector<af::NamedTensor> weights;
  for (size_t i = 0; i < vars.size(); ++i) weights.push_back({vars[i].node().name, (*values)[i]});
  AF_RETURN_IF_ERROR(af::write_safetensors(dir + "/weights.safetensors", weights, {}, true));
  std::ofstream sig(dir + "/signature.txt");
  sig << "input " << m.x.node().name << "\noutput " << m.prediction.node().name << ":" << m.prediction.index() << "\n";
  sig.close();
  if (!sig) return af::data_loss("cannot write '" + dir + "/signature.txt'");
  return af::Status::OK();
}

af::Result<ServedModel> ServedModel::load(const std::string& dir, af::SessionOptions options) {
  ServedModel s;
  AF_ASSIGN_OR_RETURN(s.graph_, af::Graph::load(dir + "/model.afg"));
  af::Graph& g = *s.graph_;
  std::ifstream sig(dir + "/signature.txt");
  std::string key, input, output;
  while (sig >> key) {
    if (key == "input") sig >> input;
    else if (key == "output") sig >> output;
  }
  if (input.empty() || output.empty()) return af::data_loss("'" + dir + "/signature.txt' lacks input or output");
  AF_ASSIGN_OR_RETURN(s.input_, g.find_output(input));
  AF_ASSIGN_OR_RETURN(s.prediction_, g.find_output(output));
  AF_ASSIGN_OR_RETURN(s.weights_, af::read_safetensors(dir + "/weights.safetensors"));
  af::FeedDict feeds;
  std::vector<af::Operation> assigns;
  for (auto& w : s.weights_) {
    const af::Node* var = g.find_node(w.name);
    if (!var || var->op != "VariableV2")
      return af::not_found("'" + dir + "/weights.safetensors' names '" + w.name + "', not a variable of the model");
    af::Output v(&g, var->id, 0);
    af::Output p = af::placeholder(g, w.value.dtype(), w.value.shape(), w.name + "/restore_value");
    assigns.push_back(af::Operation(af::assign(v, p, w.name + "/restore")));
    feeds.push_back({p, w.value});
  }
  AF_ASSIGN_OR_RETURN(af::Session sess, af::Session::create(g, options));
  s.session_ = std::make_unique<af::Session>(std::move(sess));
  AF_RETURN_IF_ERROR(s.session_->run({}, feeds, assigns).status());
  return s;
}

af::Result<af::Tensor> ServedModel::predict(const af::Tensor& x) {
  constexpr int64_t kRows = 1000;
  int64_t n = x.dim(0);
  if (n == 0) return af::invalid_argument("no inputs to predict");
  std::vector<af::Tensor> parts;
  for (int64_t b = 0; b < n; b += kRows) {
    auto out = session_->run({prediction_}, {{input_, x.slice_rows(b, std::min(n, b + kRows))}});
    if (!out.ok()) return out.status();
    parts.push_back((*out)[0]);
  }
  if (parts.size() == 1) return parts[0];
  std::vector<int64_t> dims = parts[0].shape().dims();
  dims[0] = n;
  af::Tensor all(parts[0].dtype(), af::Shape(dims));
  size_t off = 0;
  for (auto& p : parts) {
    std::memcpy(static_cast<char*>(all.raw_data()) + off, p.raw_data(), p.bytes());
    off += p.bytes();
  }
  return all;
}

af::Result<af::Tensor> predict_with_export(const std::string& dir, const af::Tensor& x, af::SessionOptions options) {
  AF_ASSIGN_OR_RETURN(ServedModel served, ServedModel::load(dir, options));
  return served.predict(x);
}

af::Result<std::string> detect_input_format(const std::string& path) {
  AF_ASSIGN_OR_RETURN(std::string bytes, ad::read_file_maybe_gzip(path));
  auto u8 = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  // No text file starts with two NUL bytes, so IDX's magic cannot be mistaken for CSV.
  bool idx = bytes.size() >= 4 && u8(0) == 0 && u8(1) == 0 && (u8(2) == 0x08 || u8(2) == 0x09 || (u8(2) >= 0x0B && u8(2) <= 0x0E)) &&
             u8(3) >= 1 && u8(3) <= 4;
  return std::string(idx ? "idx" : "csv");
}

af::Result<af::Tensor> load_inference_inputs(const std::string& path, const std::string& format, int64_t features) {
  std::string kind = format;
  if (kind == "auto") {
    AF_ASSIGN_OR_RETURN(kind, detect_input_format(path));
  }
  af::Tensor x;
  if (kind == "idx") {
    AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
    int64_t n = raw.rank() > 0 ? raw.dim(0) : 0;
    x = af::Tensor(af::f32, {n, raw.num_elements() / std::max<int64_t>(1, n)});
    // Bytes are pixels, scaled as the training images were; other types are taken as they are.
    double scale = raw.dtype() == af::u8 ? 1.0 / 255.0 : 1.0;
    for (int64_t i = 0; i < raw.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(raw.element_as_double(i) * scale);
  } else if (kind == "csv") {
    ad::CsvOptions o;
    o.header = false;  // rows of features; sklearn's files are still recognised (their target is dropped)
    AF_ASSIGN_OR_RETURN(ad::CsvData d, ad::read_csv(path, o));
    x = d.features;
  } else {
    return af::invalid_argument("inference input format '" + format + "' is not one of auto, csv, idx");
  }
  if (x.dim(1) != features)
    return af::invalid_argument("'" + path + "' (read as " + kind + ") has rows of " + std::to_string(x.dim(1)) +
                                " values, the model takes " + std::to_string(features));
  return x;
}

}  // namespace kit
