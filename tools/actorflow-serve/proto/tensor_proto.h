// TensorFlow's TensorProto <-> our tensors, for the gRPC API: a request's input checked
// against the model's input spec as the REST readers check theirs, and an answer's
// output written as TF Serving writes it (typed value fields, which every client reads).
#pragma once
#include <actorflow/actorflow.h>

#include "tensor_json.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/tensor_shape.pb.h"
#include "tensorflow/core/framework/types.pb.h"

namespace serve {

// DT_FLOAT for f32 and so on; DT_INVALID for what TensorFlow has no name for.
tensorflow::DataType tf_dtype(actorflow::DType t);
void shape_to_proto(const actorflow::Shape& shape, tensorflow::TensorShapeProto* out);

// The tensor a TensorProto holds, if it is what `spec` asks for: the same dtype, the
// spec's rank and dims (-1 takes any size), at least one row. Values come from
// tensor_content or the dtype's typed field, as TensorFlow reads them (a typed field
// shorter than the tensor repeats its last value). The tensor takes at most `max_bytes`
// (what the largest message could carry in tensor_content): by that rule a few bytes
// could otherwise ask for any size. Every failure is invalid_argument and names the
// input.
actorflow::Result<actorflow::Tensor> tensor_from_proto(const tensorflow::TensorProto& proto, const TensorSpec& spec,
                                                       int64_t max_bytes);

// The output as a TensorProto with its dtype, shape and typed values.
actorflow::Status tensor_to_proto(const actorflow::Tensor& t, tensorflow::TensorProto* out);

}  // namespace serve
