#include "trainer.h"

#include <actorflow/data/dataset.h>
#include <actorflow/data/readers.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "progress.h"

namespace kit {

namespace af = actorflow;
namespace ad = actorflow::data;
namespace fs = std::filesystem;

std::unique_ptr<af::optim::Optimizer> make_optimizer(const Flags& f, af::Graph& g, const af::Output& global_step,
                                                     int64_t steps_per_epoch) {
  af::optim::Hyper lr = f.learning_rate;
  if (f.enable_lr_decay) lr = af::train::exponential_decay(f.learning_rate, global_step, steps_per_epoch, f.lr_decay_rate, true);
  (void)g;
  if (f.optimizer == "momentum") return std::make_unique<af::optim::Momentum>(lr, 0.9);
  if (f.optimizer == "adagrad") return std::make_unique<af::optim::Adagrad>(lr);
  if (f.optimizer == "adadelta") return std::make_unique<af::optim::Adadelta>(lr);
  if (f.optimizer == "adam") return std::make_unique<af::optim::Adam>(lr);
  if (f.optimizer == "ftrl") return std::make_unique<af::optim::Ftrl>(lr);
  if (f.optimizer == "rmsprop") return std::make_unique<af::optim::RMSProp>(lr);
  return std::make_unique<af::optim::GradientDescent>(lr);
}

namespace {

af::Tensor rows(const af::Tensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.shape().dims();
  int64_t row = 1;
  for (size_t d = 1; d < dims.size(); ++d) row *= dims[d];
  dims[0] = end - begin;
  size_t base = static_cast<size_t>(static_cast<const char*>(t.raw_data()) - static_cast<const char*>(t.buffer()->data()));
  return af::Tensor(t.dtype(), af::Shape(dims), t.buffer(), base + static_cast<size_t>(begin * row) * af::dtype_size(t.dtype()));
}

af::FeedDict feeds_for(Model& m, const af::Tensor& x, const af::Tensor& y, bool training) {
  af::FeedDict feeds{{m.x, x}, {m.y, y}};
  if (m.training.valid()) feeds.push_back({m.training, af::Tensor::scalar(training)});
  return feeds;
}

}  // namespace

af::Status evaluate(af::Session& sess, Model& m, const af::Tensor& x, const af::Tensor& y, double* loss, double* accuracy) {
  int64_t n = x.dim(0);
  double loss_sum = 0, acc_sum = 0;
  for (int64_t b = 0; b < n; b += 1000) {
    int64_t e = std::min(n, b + 1000);
    std::vector<af::Fetch> fetches{m.loss};
    if (m.accuracy.valid()) fetches.push_back(m.accuracy);
    auto out = sess.run(fetches, feeds_for(m, rows(x, b, e), rows(y, b, e), false));
    if (!out.ok()) return out.status();
    loss_sum += (*out)[0].element_as_double(0) * static_cast<double>(e - b);
    if (m.accuracy.valid()) acc_sum += (*out)[1].element_as_double(0) * static_cast<double>(e - b);
  }
  *loss = n ? loss_sum / static_cast<double>(n) : 0;
  *accuracy = n ? acc_sum / static_cast<double>(n) : 0;
  return af::Status::OK();
}

af::Result<TrainResult> train(af::Graph& g, Model& m, const Split& data, const Flags& f, af::optim::Optimizer* optimizer) {
  int64_t n_train = data.x_train.dim(0);
  int64_t steps_per_epoch = (n_train + f.batch_size - 1) / f.batch_size;
  af::Output step = af::train::global_step(g);
  std::unique_ptr<af::optim::Optimizer> owned;
  af::Operation train_op = m.train_op;
  if (!train_op.valid()) {
    if (!optimizer) {
      owned = make_optimizer(f, g, step, steps_per_epoch);
      optimizer = owned.get();
    }
    train_op = optimizer->minimize(m.loss, {}, step);
  }
  af::Saver saver(g);
  af::SessionOptions opts;
  opts.intra_op_threads = f.threads;
  af::Session sess(g, opts);
  bool resumed = false;
  if (f.mode == "train" && af::latest_checkpoint(f.checkpoint_path).ok()) {
    AF_RETURN_IF_ERROR(saver.restore(sess, f.checkpoint_path));
    resumed = true;
  } else {
    AF_RETURN_IF_ERROR(sess.run_init());
  }
  std::unique_ptr<af::SummaryWriter> writer;
  try {
    writer = std::make_unique<af::SummaryWriter>(f.output_path);
    (void)writer->add_graph(g);
  } catch (const af::Error& e) {
    std::cerr << "summaries disabled: " << e.what() << "\n";
  }
  auto global = [&]() -> int64_t {
    auto v = sess.run({step});
    return v.ok() ? (*v)[0].item<int64_t>() : 0;
  };
  int64_t start_step = global();
  int first_epoch = resumed ? static_cast<int>(start_step / steps_per_epoch) : 0;
  if (resumed) std::cerr << "resumed from " << f.checkpoint_path << " at step " << start_step << "\n";

  TrainResult r;
  af::Tensor val_x = rows(data.x_test, 0, std::min<int64_t>(1000, data.x_test.dim(0)));
  af::Tensor val_y = rows(data.y_test, 0, val_x.dim(0));
  auto started = std::chrono::steady_clock::now();
  int64_t steps = start_step, examples = 0;
  int64_t first_count = 0;
  bool stop = false;
  for (int epoch = first_epoch; epoch < f.epoch_number && !stop; ++epoch) {
    auto ds = ad::Dataset::from_tensors({data.x_train, data.y_train})
                  .shuffle(n_train, static_cast<uint64_t>(f.seed) * 1000003u + static_cast<uint64_t>(epoch))
                  .batch(f.batch_size)
                  .prefetch(8);
    auto it = ds.make_iterator();
    ProgressBar bar(epoch + 1, f.epoch_number, n_train);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    ad::Components batch;
    while (true) {
      auto more = it->next(&batch);
      if (!more.ok()) return more.status();
      if (!*more) break;
      auto out = sess.run({m.loss}, feeds_for(m, batch[0], batch[1], true), {train_op});
      if (!out.ok()) return out.status();
      double loss = (*out)[0].element_as_double(0);
      ++steps;
      ++epoch_steps;
      epoch_loss += loss;
      examples += batch[0].dim(0);
      if (first_count < 20) {
        r.first_loss += loss;
        ++first_count;
      }
      bar.update(batch[0].dim(0), loss);
      if (writer && steps % 10 == 0) (void)writer->add_scalar("loss", static_cast<float>(loss), steps);
      if (f.steps_to_validate > 0 && steps % f.steps_to_validate == 0) {
        double vl, va;
        AF_RETURN_IF_ERROR(evaluate(sess, m, val_x, val_y, &vl, &va));
        if (writer) {
          (void)writer->add_scalar("validation/loss", static_cast<float>(vl), steps);
          (void)writer->add_scalar("validation/accuracy", static_cast<float>(va), steps);
        }
      }
      if (f.max_steps > 0 && steps >= f.max_steps) {
        stop = true;
        break;
      }
    }
    r.last_loss = epoch_steps ? epoch_loss / static_cast<double>(epoch_steps) : 0;
    double tl, ta;
    AF_RETURN_IF_ERROR(evaluate(sess, m, data.x_test, data.y_test, &tl, &ta));
    std::ostringstream extra;
    extra << "test_loss " << tl << "  test_accuracy " << ta;
    bar.finish(extra.str());
    if (writer) {
      (void)writer->add_scalar("test/accuracy", static_cast<float>(ta), steps);
      (void)writer->flush();
    }
    AF_RETURN_IF_ERROR(saver.save(sess, f.checkpoint_path, steps));
    r.epochs = epoch + 1;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.steps = steps;
  r.first_loss = first_count ? r.first_loss / static_cast<double>(first_count) : 0;
  r.examples_per_second = r.seconds > 0 ? static_cast<double>(examples) / r.seconds : 0;
  AF_RETURN_IF_ERROR(evaluate(sess, m, data.x_test, data.y_test, &r.test_loss, &r.test_accuracy));
  if (writer) (void)writer->close();
  return r;
}

// ---- export / inference ----

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

af::Result<af::Tensor> predict_with_export(const std::string& dir, const af::Tensor& x) {
  AF_ASSIGN_OR_RETURN(std::unique_ptr<af::Graph> g, af::Graph::load(dir + "/model.afg"));
  std::ifstream sig(dir + "/signature.txt");
  std::string key, input, output;
  while (sig >> key) {
    if (key == "input") sig >> input;
    else if (key == "output") sig >> output;
  }
  if (input.empty() || output.empty()) return af::data_loss("'" + dir + "/signature.txt' lacks input or output");
  AF_ASSIGN_OR_RETURN(af::Output in, g->find_output(input));
  AF_ASSIGN_OR_RETURN(af::Output pred, g->find_output(output));
  AF_ASSIGN_OR_RETURN(std::vector<af::NamedTensor> weights, af::read_safetensors(dir + "/weights.safetensors"));
  af::FeedDict feeds;
  std::vector<af::Operation> assigns;
  for (auto& w : weights) {
    const af::Node* var = g->find_node(w.name);
    if (!var || var->op != "VariableV2") return af::not_found("exported weights name '" + w.name + "', not a variable of the model");
    af::Output v(g.get(), var->id, 0);
    af::Output p = af::placeholder(*g, w.value.dtype(), w.value.shape(), w.name + "/restore_value");
    assigns.push_back(af::Operation(af::assign(v, p, w.name + "/restore")));
    feeds.push_back({p, w.value});
  }
  af::Session sess(*g);
  AF_RETURN_IF_ERROR(sess.run({}, feeds, assigns).status());
  std::vector<af::Tensor> parts;
  int64_t n = x.dim(0);
  for (int64_t b = 0; b < n; b += 1000) {
    int64_t e = std::min(n, b + 1000);
    auto out = sess.run({pred}, {{in, rows(x, b, e)}});
    if (!out.ok()) return out.status();
    parts.push_back((*out)[0]);
  }
  if (parts.empty()) return af::invalid_argument("no inputs to predict");
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

namespace {

af::Result<af::Tensor> load_inputs(const std::string& path, int64_t features) {
  if (path.find("idx") != std::string::npos) {
    AF_ASSIGN_OR_RETURN(af::Tensor raw, ad::read_idx(path));
    int64_t n = raw.dim(0);
    af::Tensor x(af::f32, {n, raw.num_elements() / std::max<int64_t>(1, n)});
    for (int64_t i = 0; i < raw.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(raw.element_as_double(i) / 255.0);
    return x;
  }
  ad::CsvOptions o;
  o.header = false;
  AF_ASSIGN_OR_RETURN(ad::CsvData d, ad::read_csv(path, o));
  if (d.features.dim(1) != features)
    return af::invalid_argument("'" + path + "' rows have " + std::to_string(d.features.dim(1)) + " values, the model takes " +
                                std::to_string(features));
  return d.features;
}

std::string row_text(const af::Tensor& t, int64_t r) {
  int64_t w = t.num_elements() / std::max<int64_t>(1, t.dim(0));
  std::ostringstream os;
  for (int64_t k = 0; k < w; ++k) os << (k ? " " : "") << t.element_as_double(r * w + k);
  return os.str();
}

}  // namespace

int run_main(const Flags& f, af::Graph& g, Model& m, const Split& data, const std::string& sample_name,
             af::optim::Optimizer* optimizer) {
  std::string export_dir = f.saved_model_path + "/" + std::to_string(f.model_version);
  if (f.mode == "inference") {
    if (f.inference_test_file.empty()) {
      std::cerr << "--mode inference needs --inference_test_file\n";
      return 2;
    }
    auto x = load_inputs(f.inference_test_file, data.x_train.dim(1));
    if (!x.ok()) {
      std::cerr << x.status().to_string() << "\n";
      return 1;
    }
    auto pred = predict_with_export(export_dir, *x);
    if (!pred.ok()) {
      std::cerr << pred.status().to_string() << "\n";
      return 1;
    }
    std::ofstream out(f.inference_result_file);
    for (int64_t r = 0; r < pred->dim(0); ++r) out << row_text(*pred, r) << "\n";
    std::cout << "RESULT mode=inference predictions=" << pred->dim(0) << " file=" << f.inference_result_file << "\n";
    return out ? 0 : 1;
  }
  if (f.mode == "export") {
    af::Output step = af::train::global_step(g);
    auto opt = make_optimizer(f, g, step, 1);
    if (!m.train_op.valid()) (void)(optimizer ? optimizer : opt.get())->minimize(m.loss, {}, step);
    af::Saver saver(g);
    af::Session sess(g);
    af::Status s = saver.restore(sess, f.checkpoint_path);
    if (s.ok()) s = export_model(sess, g, m, export_dir);
    if (!s.ok()) {
      std::cerr << s.to_string() << "\n";
      return 1;
    }
    std::cout << "RESULT mode=export path=" << export_dir << "\n";
    return 0;
  }
  auto r = train(g, m, data, f, optimizer);
  if (!r.ok()) {
    std::cerr << sample_name << ": " << r.status().to_string() << "\n";
    return 1;
  }
  std::printf("RESULT sample=%s model=%s test_accuracy=%.4f test_loss=%.4f epochs=%d steps=%lld seconds=%.1f "
              "examples_per_second=%.0f first_loss=%.4f final_loss=%.4f\n",
              sample_name.c_str(), f.model.c_str(), r->test_accuracy, r->test_loss, r->epochs,
              static_cast<long long>(r->steps), r->seconds, r->examples_per_second, r->first_loss, r->last_loss);
  return 0;
}

}  // namespace kit
