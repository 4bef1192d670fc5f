// A trained model as served: export writes the graph pruned to x -> prediction with its
// weights; ServedModel loads that back and predicts; the inference mode reads its inputs
// as CSV or IDX, told by a flag or by the file's first bytes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <actorflow/actorflow.h>

namespace kit {

struct Model;

// export: the graph pruned to m.x -> m.prediction, with the current weights, into `dir`
// (model.afg, weights.safetensors, signature.txt).
actorflow::Status export_model(actorflow::Session& sess, actorflow::Graph& g, Model& m, const std::string& dir);

// An exported model loaded back: its graph, a session with the weights assigned, and the
// signature's input and output.
class ServedModel {
 public:
  static actorflow::Result<ServedModel> load(const std::string& dir, actorflow::SessionOptions options = {});
  // Predictions for every row of x (f32 [N, F]), run in batches of at most 1000 rows.
  actorflow::Result<actorflow::Tensor> predict(const actorflow::Tensor& x);
  const std::vector<actorflow::NamedTensor>& weights() const { return weights_; }
  actorflow::Output input() const { return input_; }
  actorflow::Output prediction() const { return prediction_; }

 private:
  std::unique_ptr<actorflow::Graph> graph_;
  std::unique_ptr<actorflow::Session> session_;
  actorflow::Output input_, prediction_;
  std::vector<actorflow::NamedTensor> weights_;
};

// Loads an exported model and predicts every row of x (f32 [N, F]).
actorflow::Result<actorflow::Tensor> predict_with_export(const std::string& dir, const actorflow::Tensor& x,
                                                         actorflow::SessionOptions options = {});

// "idx" when the file (gunzipped) starts with IDX's magic bytes: 0, 0, an element type
// (0x08, 0x09, 0x0B-0x0E) and a rank from 1 to 4; "csv" otherwise.
actorflow::Result<std::string> detect_input_format(const std::string& path);

// --inference_test_file as f32 [N, features]: `format` is "csv", "idx" or "auto"
// (detect_input_format). IDX bytes are scaled to [0, 1] as the training images were.
actorflow::Result<actorflow::Tensor> load_inference_inputs(const std::string& path, const std::string& format,
                                                           int64_t features);

}  // namespace kit
