// _CopyToDevice and _CopyToHost: the copy nodes of an edge that crosses from the host to
// a GPU or back. Both are placed on the GPU whose memory they touch; the value keeps its
// dtype and shape. Their GPU kernels (ops/cuda/gpu_copy.cpp) run on that GPU's copy
// streams; on the CPU (ops/cpu/copy_kernels.cpp) they pass host values through.
#include "actorflow/op_registry.h"

namespace actorflow {
namespace {

Status same_as_input(ShapeContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("_CopyToDevice").inputs(1).shape_fn(same_as_input);
AF_REGISTER_OP("_CopyToHost").inputs(1).shape_fn(same_as_input);

}  // namespace actorflow
