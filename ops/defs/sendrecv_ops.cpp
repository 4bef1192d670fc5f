// _Send and _Recv: the two ends of a graph edge that the partitioner cut between two
// locations (graph_partition.h). A _Send consumes the tensor in the producer's partition,
// the matching _Recv (same edge_id and tensor_name) produces it in the consumer's. They
// have no kernels: the runtime moves the bytes between them over its RemoteEdges seam.
#include "actorflow/op_registry.h"

namespace actorflow {
namespace {

Status check_endpoints(ShapeContext& c) {
  for (const char* key : {"tensor_name", "send_task", "recv_task"}) {
    const AttrValue* v = c.node().find_attr(key);
    if (!v || !v->is<std::string>() || v->get<std::string>().empty())
      return c.error(std::string("attribute '") + key + "' must be a non-empty string");
  }
  const AttrValue* id = c.node().find_attr("edge_id");
  if (!id || !id->is<int64_t>() || id->get<int64_t>() < 0) return c.error("attribute 'edge_id' must be a non-negative int");
  return Status::OK();
}

Status send_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(check_endpoints(c));
  DType want = c.node().attr_dtype("dtype");
  // Always set by the partitioner (float32 for a control edge): a graph read from bytes
  // whose _Send lacks it could never be written back.
  if (want == DType::invalid) return c.error("attribute 'dtype' must be set");
  if (c.num_inputs() == 1 && want != c.input_dtype(0))
    return c.error(std::string("attribute 'dtype' is ") + dtype_name(want) + " but the input is " + c.describe_input(0));
  return Status::OK();
}

Status recv_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(check_endpoints(c));
  DType t = c.node().attr_dtype("dtype");
  if (t == DType::invalid) return c.error("attribute 'dtype' must be set");
  const AttrValue* s = c.node().find_attr("shape");
  c.set_output(0, t, s && s->is<Shape>() ? s->get<Shape>() : Shape::unknown_rank());
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("_Send")
    .inputs(0, 1)  // none for a control edge: it waits for the producer as a control input
    .outputs(0)
    .stateful()
    .required_attr("tensor_name")
    .required_attr("edge_id")
    .required_attr("send_task")
    .required_attr("recv_task")
    .attr("dtype", DType::invalid)
    .shape_fn(send_shape);

AF_REGISTER_OP("_Recv")
    .inputs(0)
    .outputs(1)
    .stateful()
    .required_attr("tensor_name")
    .required_attr("edge_id")
    .required_attr("send_task")
    .required_attr("recv_task")
    .required_attr("dtype")
    .attr("shape", Shape::unknown_rank())
    .shape_fn(recv_shape);

}  // namespace actorflow
