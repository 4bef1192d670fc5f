// Tensors as bytes: the Cap'n Proto TensorMsg / TensorProto of schemas/tensor.capnp, for
// edges that cross hosts (or are made to, SessionOptions::encode_all_edges).
//
// Numeric data travels as raw little-endian bytes. Encoding copies a tensor's data once,
// into the returned string, placing large data 64-byte aligned in that string's memory.
// Decoding shares the storage of the bytes it is given when the data lies 64-byte aligned
// in memory (the alignment every Tensor buffer has) and is large (>= 16 KiB): so
// decode(encode(t)) of a large tensor copies once. Otherwise it copies once into a pooled
// tensor. Message strings handed to the decoders are recycled by the encoders.
// Decoding validates everything and never crashes on bad input: corrupt bytes give
// data_loss (resource_exhausted when memory runs out).
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <memory>
#include <string>

#include "actorflow/status.h"
#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// One tensor on one edge for one step. A failed step sends its error in `status`, with
// an empty (invalid) tensor.
struct TensorMessage {
  int64_t step_id = 0;
  uint32_t edge = 0;
  std::string producer;  // "node:output", for error messages
  Tensor tensor;
  Status status;
};

// Encodes host tensors only. A tensor that cannot travel (in device memory, or data over
// 512 MiB) is sent as an error status naming the producer instead, failing the step at
// the receiver rather than throwing in the runtime.
std::string encode_tensor_message(const TensorMessage& m);
Result<TensorMessage> decode_tensor_message(std::string bytes);
// Decodes bytes held by `owner`, which the decoded tensor keeps alive when it shares
// them (and, being a mutable tensor, may write to): a transport that receives into its
// own buffers avoids the copy when it places the bytes at the sender's alignment.
Result<TensorMessage> decode_tensor_message(std::shared_ptr<void> owner, void* data, size_t size);

// The split form, for a transport that writes a tensor's data straight from its buffer
// and reads it straight into a new tensor (the daemon frames of net/ carry it beside the
// message): the head is a TensorMsg whose TensorProto states the data's size instead of
// holding it. Only host tensors of f32, f64, i32, i64 and u8 of at least kBesideMinBytes
// travel beside: every bit pattern is a valid value of those dtypes, so bytes a peer
// fills in need no check. Anything else is embedded, as encode_tensor_message does.
inline constexpr size_t kBesideMinBytes = 512;
struct TensorMessageHead {
  std::string bytes;  // the TensorMsg
  Tensor beside;      // valid when the data travels beside: beside.bytes() from raw_data()
};
TensorMessageHead encode_tensor_message_head(const TensorMessage& m);
// Decodes a head. When its data travels beside, the message's tensor is allocated but
// not filled, and `*beside` shares its buffer: the caller writes beside->bytes() there.
// A head claiming more than `max_beside` bytes is refused before anything is allocated.
Result<TensorMessage> decode_tensor_message_head(std::string bytes, Tensor* beside, uint64_t max_beside);

// A TensorProto alone. An invalid Tensor() round-trips as itself. encode_tensor throws
// af::Error for a tensor that cannot travel.
std::string encode_tensor(const Tensor& t);
Result<Tensor> decode_tensor(std::string bytes);

// Calls of the encoders and decoders above in this process so far (never decreasing):
// lets a test prove that an edge really travelled as bytes.
struct CodecCounts {
  int64_t encodes = 0;
  int64_t decodes = 0;
};
CodecCounts codec_counts();

}  // namespace actorflow

AF_PUBLIC_END
