// A trained model as it is served: export_model writes the graph pruned to one input ->
// one prediction with the variables' current values, and ServedModel loads that back into
// a session of its own and predicts (what `--mode export` / `--mode inference` of the
// samples and actorflow-serve use). The directory holds
//   model.afg             the pruned graph (Graph::save)
//   weights.safetensors   every variable the prediction reads, by node name
//   signature.txt         "input <node>" and "output <node>:<index>"
#pragma once
#include "actorflow/api.h"
#include <memory>
#include <string>
#include <vector>

#include "actorflow/saver.h"
#include "actorflow/session.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// Writes `prediction` of `g`, pruned to what it reads through data edges (ending at the
// `input` placeholder), with the values the variables hold in `sess`, into `dir` (created
// when missing). invalid_argument when the prediction does not depend on `input`.
Status export_model(Session& sess, Graph& g, const Output& input, const Output& prediction, const std::string& dir);

// An exported model loaded back: its graph, a session with the weights assigned, and the
// signature's input and output. Movable, not copyable.
class ServedModel {
 public:
  // Reads `dir` as export_model wrote it and creates the session with `options`.
  static Result<ServedModel> load(const std::string& dir, SessionOptions options = {});
  // The prediction for every row of x (its first dimension), run in batches of at most
  // 1000 rows. Safe to call from several threads at once (Session::run is).
  Result<Tensor> predict(const Tensor& x);
  // The variables' values as the export wrote them.
  const std::vector<NamedTensor>& weights() const { return weights_; }
  Output input() const { return input_; }
  Output prediction() const { return prediction_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Session> session_;
  Output input_, prediction_;
  std::vector<NamedTensor> weights_;
};

}  // namespace actorflow

AF_PUBLIC_END
