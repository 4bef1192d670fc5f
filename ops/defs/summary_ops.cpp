// TF1's summary ops: ScalarSummary, HistogramSummary, MergeSummary. Each yields a string
// scalar holding a serialized tf.Summary (see actorflow/summary.h).
#include "actorflow/gradients.h"
#include "actorflow/op_registry.h"

namespace actorflow {
namespace {

Status require_string(ShapeContext& c, int i, const char* what) {
  if (c.input_dtype(i) != DType::string) return c.error(std::string(what) + " " + c.describe_input(i) + " must be a string tensor");
  return Status::OK();
}

Status scalar_summary_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(require_string(c, 0, "tags"));
  if (!is_numeric(c.input_dtype(1))) return c.error("values " + c.describe_input(1) + " must be numeric");
  // One tag per value, as TF's op.
  if (!c.input_shape(0).compatible_with(c.input_shape(1)))
    return c.error("tags " + c.describe_input(0) + " and values " + c.describe_input(1) + " must have the same shape");
  c.set_output(0, DType::string, Shape{});
  return Status::OK();
}

Status histogram_summary_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(require_string(c, 0, "tag"));
  if (!c.input_shape(0).compatible_with(Shape{})) return c.error("tag " + c.describe_input(0) + " must be a scalar");
  if (!is_numeric(c.input_dtype(1)) && c.input_dtype(1) != DType::boolean)
    return c.error("values " + c.describe_input(1) + " must be numeric or bool");
  c.set_output(0, DType::string, Shape{});
  return Status::OK();
}

Status merge_summary_shape(ShapeContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) AF_RETURN_IF_ERROR(require_string(c, i, "input"));
  c.set_output(0, DType::string, Shape{});
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("ScalarSummary").inputs(2).shape_fn(scalar_summary_shape);
AF_REGISTER_OP("HistogramSummary").inputs(2).shape_fn(histogram_summary_shape);
AF_REGISTER_OP("MergeSummary").variadic_inputs(1).shape_fn(merge_summary_shape);

// Strings carry no gradient; autodiff stops here, as TF's ops.NotDifferentiable.
AF_NO_GRADIENT("ScalarSummary");
AF_NO_GRADIENT("HistogramSummary");
AF_NO_GRADIENT("MergeSummary");

}  // namespace actorflow
