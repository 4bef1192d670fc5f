// The split TensorMsg (tensor_codec.h) written into, and read from, a TensorMsg struct of
// an enclosing Cap'n Proto message: the daemon frames of net/ hold their tensors this way,
// so a frame is one message with one reader, with no nested message bytes to copy out and
// decode again. Included only by the codec and net/'s frames (it pulls in capnp).
#pragma once
#include <cstddef>
#include <cstdint>

#include <capnp/orphan.h>

#include "actorflow/tensor_codec.h"
#include "tensor.capnp.h"

namespace actorflow {

// Words a TensorMsg written by write_tensor_message_head adds to its message, about (for
// sizing the builder's first segment so that a frame is one segment).
size_t tensor_message_head_words(const TensorMessage& m);

// Writes `m` into `b` in the split form; returns the tensor whose data then travels
// beside (invalid when it is embedded). A tensor that cannot travel becomes an error
// status naming the producer, as encode_tensor_message does. `orphanage` (the enclosing
// message's) lets large embedded data be referenced rather than copied twice: `m.tensor`
// must then outlive the builder.
Tensor write_tensor_message_head(const TensorMessage& m, wire::TensorMsg::Builder b,
                                 const capnp::Orphanage* orphanage = nullptr);

// Reads a TensorMsg written so. Embedded data is copied into a new tensor; data beside is
// allocated (at most `max_beside` bytes, checked before allocating) and shared with
// `*beside` for the caller to fill. Never throws: malformed input gives data_loss.
Result<TensorMessage> read_tensor_message_head(wire::TensorMsg::Reader r, Tensor* beside, uint64_t max_beside);

}  // namespace actorflow
