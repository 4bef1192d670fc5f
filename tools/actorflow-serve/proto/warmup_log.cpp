#include "warmup_log.h"

#include <actorflow/tfrecord.h>

#include <fstream>
#include <sstream>

#include "tensor_proto.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"

namespace serve {

namespace af = actorflow;

namespace {
// A replayed request's tensor: as large as a request to a server with a generous
// --max_body_bytes could carry, no larger (a record of a few bytes may ask for any size).
constexpr int64_t kMaxWarmupTensorBytes = int64_t{256} << 20;
}  // namespace

af::Result<std::vector<af::Tensor>> read_warmup_requests(const std::string& path, const LoadedModel& m, int64_t max_records) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return af::not_found("cannot read " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string file = bytes.str();
  std::vector<af::Tensor> out;
  size_t offset = 0;
  for (int64_t i = 0; i < max_records && offset < file.size(); ++i) {
    auto r = af::tfrecord::record_at(file, offset);
    if (r.problem != af::tfrecord::RecordAt::Problem::none)
      return af::data_loss(af::tfrecord::record_error("warm-up file " + path, static_cast<size_t>(i), offset, r));
    const std::string where = path + ": record " + std::to_string(i + 1);
    tensorflow::serving::PredictionLog log;
    if (!log.ParseFromArray(r.data.data(), static_cast<int>(r.data.size()))) return af::invalid_argument(where + " is not a PredictionLog");
    if (!log.has_predict_log()) return af::invalid_argument(where + " holds no predict_log (only predict requests are replayed)");
    const auto& req = log.predict_log().request();
    auto input = req.inputs().find(m.input_name);
    if (req.inputs().size() != 1 || input == req.inputs().end())
      return af::invalid_argument(where + ": the request does not have exactly the model's input '" + m.input_name + "'");
    auto x = tensor_from_proto(input->second, TensorSpec{m.input_name, m.input_dtype, m.input_shape}, kMaxWarmupTensorBytes);
    if (!x.ok()) return af::invalid_argument(where + ": " + x.status().message());
    out.push_back(std::move(*x));
    offset = r.end;
  }
  return out;
}

}  // namespace serve
