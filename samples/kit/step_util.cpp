#include "step_util.h"

#include <cstring>

namespace kit {

namespace af = actorflow;

af::Tensor gather_rows(const af::Tensor& t, const std::vector<int64_t>& order, size_t b, size_t e) {
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = static_cast<int64_t>(e - b);
  af::Tensor out(t.dtype(), af::Shape(dims));
  size_t row_bytes = static_cast<size_t>(t.dim(0) ? t.num_elements() / t.dim(0) : 0) * af::dtype_size(t.dtype());
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (size_t i = b; i < e; ++i) std::memcpy(dst + (i - b) * row_bytes, src + static_cast<size_t>(order[i]) * row_bytes, row_bytes);
  return out;
}

bool retryable(const af::Status& s) {
  return s.code() == af::Code::unavailable || s.code() == af::Code::failed_precondition ||
         s.code() == af::Code::deadline_exceeded || s.code() == af::Code::cancelled;
}

int64_t model_bytes(const af::Graph& g) {
  int64_t n = 0;
  for (int id : g.collection("trainable_variables")) {
    const af::Node& v = g.node(id);
    n += v.output_shapes[0].num_elements() * static_cast<int64_t>(af::dtype_size(v.output_dtypes[0]));
  }
  return n;
}

}  // namespace kit
