// Internal to the engine: conversions between ActorFlow values (Shape, Tensor, AttrValue)
// and their Cap'n Proto forms (schemas/tensor.capnp, schemas/graph.capnp), and the flat
// byte layout of whole messages. Shared by tensor_codec.cpp and graph_def.cpp; capnp
// stays out of the public headers.
#pragma once
#include <capnp/message.h>
#include <capnp/orphan.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "actorflow/attr_value.h"
#include "actorflow/status.h"
#include "actorflow/tensor.h"
#include "graph.capnp.h"
#include "tensor.capnp.h"

namespace actorflow::wire_convert {

// One capnp Data blob holds at most 2^29 - 1 bytes (its element count has 29 bits).
inline constexpr size_t kMaxBlobBytes = (size_t{1} << 29) - 1;
// Decoded tensors at least this large share the message's storage when aligned; smaller
// ones are cheaper to copy than to pin the whole message.
inline constexpr size_t kZeroCopyMinBytes = 16 * 1024;
// Encoded tensors at least this large are referenced, not copied, while the message is
// built, so that their data is copied once (into the flat bytes).
inline constexpr size_t kExternalMinBytes = 4 * 1024;

// ---- writing ----

void write_dtype(DType t, wire::DType* out);
void write_shape(const Shape& s, wire::TensorShape::Builder b);
// An invalid Tensor() is written with an unknown-rank shape (no real tensor has one).
// `orphanage`, when given, lets large data be referenced in place rather than copied: the
// tensor must then outlive the message builder. Throws af::Error when the tensor does
// not fit one message (a blob over kMaxBlobBytes).
void write_tensor(const Tensor& t, wire::TensorProto::Builder b, const capnp::Orphanage* orphanage = nullptr);
// Its dtype and shape only (a valid tensor).
void write_tensor_head(const Tensor& t, wire::TensorProto::Builder b);
void write_attr(const AttrValue& v, wire::AttrValue::Builder b);
// Why `t` cannot be encoded (not in host memory, too large for one blob), or OK.
Status check_encodable(const Tensor& t);

// The flat byte layout of a message (as capnp::messageToFlatArray), except that every
// segment after the first (a referenced tensor's data) starts 64-byte aligned, padded
// with unreferenced zero words: aligned in memory (so a decoder handed this very buffer
// can share it), or, for reproducible bytes, relative to the first byte. flatten_into
// reuses `out`'s storage.
void flatten_into(capnp::MessageBuilder& message, std::string& out, bool align_in_memory);
std::string flatten(capnp::MessageBuilder& message, bool align_in_memory);

// ---- reading ----

// Storage a decoded tensor may share: the bytes [begin, end) owned by `owner`.
struct SharedBytes {
  std::shared_ptr<void> owner;
  const char* begin = nullptr;
  const char* end = nullptr;
};

Result<DType> read_dtype(wire::DType d);
// Graph-time shape: dims >= -1, unknown rank allowed.
Result<Shape> read_shape(wire::TensorShape::Reader r);
// A tensor; an unknown-rank (or missing) shape gives an invalid Tensor(). With `shared`,
// large aligned data inside it is shared instead of copied.
Result<Tensor> read_tensor(wire::TensorProto::Reader r, const SharedBytes* shared = nullptr);
Result<AttrValue> read_attr(wire::AttrValue::Reader r);

// A validated capnp reader over flat bytes. The bytes must outlive it unless they had to
// be copied (not 8-byte aligned), in which case `copied()` is true and it holds a copy.
class FlatReader {
 public:
  // `what` names the bytes in errors ("GraphDef", "TensorMsg").
  Status open(const void* data, size_t size, const std::string& what, int nesting_limit = 32);
  capnp::MessageReader& reader() { return *reader_; }
  bool copied() const { return copy_.size() != 0; }

 private:
  kj::Array<capnp::word> copy_;
  std::optional<capnp::FlatArrayMessageReader> reader_;
};

// Runs `fn` (returning Status or Result<T>), turning exceptions from capnp (malformed
// messages), from allocation and from our own code into a Status.
template <typename F>
auto guard(const std::string& what, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const kj::Exception& e) {
    return data_loss(what + " is malformed: " + std::string(e.getDescription().cStr()));
  } catch (const Error& e) {
    return e.status();
  } catch (const std::bad_alloc&) {
    return Status(Code::resource_exhausted, what + ": out of memory while decoding");
  } catch (const std::exception& e) {
    return data_loss(what + " could not be decoded: " + e.what());
  }
}

}  // namespace actorflow::wire_convert
