// Tensors <-> Cap'n Proto (schemas/tensor.capnp), and the flat message layout shared with
// graph_def.cpp.
#include "actorflow/tensor_codec.h"
#include "actorflow/tensor_codec_capnp.h"

#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <vector>

#include "graph/wire_convert.h"

namespace actorflow {

// Numeric data is copied as raw bytes both ways; the wire format is little-endian.
static_assert(std::endian::native == std::endian::little, "the tensor codec assumes a little-endian host");

namespace wire_convert {

// ---- dtypes and shapes ----

void write_dtype(DType t, wire::DType* out) {
  switch (t) {
    case DType::f32: *out = wire::DType::F32; return;
    case DType::f64: *out = wire::DType::F64; return;
    case DType::i32: *out = wire::DType::I32; return;
    case DType::i64: *out = wire::DType::I64; return;
    case DType::u8: *out = wire::DType::U8; return;
    case DType::boolean: *out = wire::DType::BOOLEAN; return;
    case DType::string: *out = wire::DType::STRING; return;
    default: break;
  }
  throw Error(invalid_argument("cannot encode the invalid dtype"));
}

Result<DType> read_dtype(wire::DType d) {
  switch (d) {
    case wire::DType::F32: return DType::f32;
    case wire::DType::F64: return DType::f64;
    case wire::DType::I32: return DType::i32;
    case wire::DType::I64: return DType::i64;
    case wire::DType::U8: return DType::u8;
    case wire::DType::BOOLEAN: return DType::boolean;
    case wire::DType::STRING: return DType::string;
  }
  return data_loss("unknown dtype code " + std::to_string(static_cast<unsigned>(d)));
}

void write_shape(const Shape& s, wire::TensorShape::Builder b) {
  if (!s.has_rank()) {
    b.setUnknownRank(true);
    return;
  }
  auto dims = b.initDims(static_cast<unsigned>(s.dims().size()));
  for (size_t i = 0; i < s.dims().size(); ++i) dims.set(static_cast<unsigned>(i), s.dims()[i]);
}

namespace {

std::string dims_string(capnp::List<int64_t>::Reader dims) {
  std::string s = "[";
  for (unsigned i = 0; i < dims.size() && i < 16; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + (dims.size() > 16 ? ",...]" : "]");
}

// Reads dims >= min_dim. Rejects shapes whose known dims multiply past int64, which no
// tensor can have and which would overflow Shape::num_elements() and shape functions.
Result<std::vector<int64_t>> read_dims(capnp::List<int64_t>::Reader dims, int64_t min_dim) {
  std::vector<int64_t> out(dims.size());
  int64_t bound = 1;
  for (unsigned i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d < min_dim)
      return data_loss("shape " + dims_string(dims) + " has dimension " + std::to_string(d) + " at index " +
                       std::to_string(i) + (min_dim == 0 ? " (tensor dims must be >= 0)" : " (dims must be >= -1)"));
    if (__builtin_mul_overflow(bound, d > 1 ? d : int64_t{1}, &bound))
      return data_loss("shape " + dims_string(dims) + " has more elements than fit in 64 bits");
    out[i] = d;
  }
  return out;
}

}  // namespace

Result<Shape> read_shape(wire::TensorShape::Reader r) {
  if (r.getUnknownRank()) return Shape::unknown_rank();
  AF_ASSIGN_OR_RETURN(std::vector<int64_t> dims, read_dims(r.getDims(), -1));
  return Shape(std::move(dims));
}

// ---- tensors ----

Status check_encodable(const Tensor& t) {
  if (!t.valid()) return Status::OK();
  if (t.buffer() && t.device().type != DeviceType::CPU)
    return invalid_argument("tensor " + std::string(dtype_name(t.dtype())) + t.shape().to_string() + " is on " +
                            t.device().to_string() + "; only host tensors can be encoded");
  if (t.dtype() == DType::string) {
    if (static_cast<uint64_t>(t.num_elements()) > kMaxBlobBytes)
      return invalid_argument("string tensor of shape " + t.shape().to_string() + " has more than 2^29 elements");
    const std::string* s = t.data<std::string>();
    for (int64_t i = 0; i < t.num_elements(); ++i)
      if (s[i].size() >= kMaxBlobBytes)
        return invalid_argument("string " + std::to_string(i) + " of a tensor is " + std::to_string(s[i].size()) +
                                " bytes; one message holds strings below 512 MiB");
    return Status::OK();
  }
  if (t.bytes() > kMaxBlobBytes)
    return invalid_argument("tensor " + std::string(dtype_name(t.dtype())) + t.shape().to_string() + " is " +
                            std::to_string(t.bytes()) + " bytes; one message holds tensors below 512 MiB");
  return Status::OK();
}

void write_tensor_head(const Tensor& t, wire::TensorProto::Builder b) {
  wire::DType d;
  write_dtype(t.dtype(), &d);
  b.setDtype(d);
  write_shape(t.shape(), b.initShape());
}

void write_tensor(const Tensor& t, wire::TensorProto::Builder b, const capnp::Orphanage* orphanage) {
  if (!t.valid()) {
    b.initShape().setUnknownRank(true);
    return;
  }
  throw_if_error(check_encodable(t));
  write_tensor_head(t, b);
  if (t.dtype() == DType::string) {
    auto list = b.initStrings(static_cast<unsigned>(t.num_elements()));
    const std::string* s = t.data<std::string>();
    for (int64_t i = 0; i < t.num_elements(); ++i)
      list.set(static_cast<unsigned>(i), capnp::Text::Reader(s[i].data(), s[i].size()));
    return;
  }
  size_t bytes = t.bytes();
  if (bytes == 0) return;
  const auto* p = static_cast<const kj::byte*>(t.raw_data());
  // capnp reads an external blob in whole words, so only word-sized data is referenced.
  if (orphanage && bytes >= kExternalMinBytes && bytes % 8 == 0 && reinterpret_cast<uintptr_t>(p) % 8 == 0) {
    b.adoptData(orphanage->referenceExternalData(capnp::Data::Reader(p, bytes)));
  } else {
    std::memcpy(b.initData(static_cast<unsigned>(bytes)).begin(), p, bytes);
  }
}

namespace {
void release_shared(void*, void* arg) { delete static_cast<std::shared_ptr<void>*>(arg); }
}  // namespace

Result<Tensor> read_tensor(wire::TensorProto::Reader r, const SharedBytes* shared) {
  if (!r.hasShape() || r.getShape().getUnknownRank()) return Tensor();
  AF_ASSIGN_OR_RETURN(DType dtype, read_dtype(r.getDtype()));
  AF_ASSIGN_OR_RETURN(std::vector<int64_t> dims, read_dims(r.getShape().getDims(), 0));
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // cannot overflow: read_dims bounded the product
  Shape shape(std::move(dims));
  std::string what = std::string("tensor ") + dtype_name(dtype) + shape.to_string();

  if (dtype == DType::string) {
    auto strings = r.getStrings();
    if (static_cast<uint64_t>(strings.size()) != static_cast<uint64_t>(n))
      return data_loss(what + " holds " + std::to_string(strings.size()) + " strings, expected " + std::to_string(n));
    Tensor t(dtype, std::move(shape));
    std::string* out = t.data<std::string>();
    for (unsigned i = 0; i < strings.size(); ++i) {
      auto s = strings[i];
      out[i].assign(s.begin(), s.size());
    }
    return t;
  }

  if (r.getBesideBytes() != 0)
    return data_loss(what + " says its " + std::to_string(r.getBesideBytes()) +
                     " data bytes travel beside the message, which this reader was not given");
  size_t esize = dtype_size(dtype);
  auto data = r.getData();
  // Compare without multiplying n (a hostile shape may claim more than memory holds).
  if (static_cast<uint64_t>(n) > data.size() / esize || static_cast<size_t>(n) * esize != data.size())
    return data_loss(what + " holds " + std::to_string(data.size()) + " data bytes, expected " +
                     (static_cast<uint64_t>(n) > data.size() ? std::string("more") : std::to_string(n * static_cast<int64_t>(esize))));
  if (dtype == DType::boolean) {
    for (size_t i = 0; i < data.size(); ++i)
      if (data[i] > 1)
        return data_loss(what + " holds byte " + std::to_string(data[i]) + " at element " + std::to_string(i) +
                         "; a bool is 0 or 1");
  }
  const kj::byte* p = data.begin();
  if (shared && shared->owner && data.size() >= kZeroCopyMinBytes &&
      reinterpret_cast<uintptr_t>(p) % kTensorAlignment == 0 && reinterpret_cast<const char*>(p) >= shared->begin &&
      reinterpret_cast<const char*>(p) + data.size() <= shared->end) {
    auto keep = std::make_unique<std::shared_ptr<void>>(shared->owner);
    auto buffer = std::make_shared<Buffer>(const_cast<kj::byte*>(p), data.size(), DeviceId{}, release_shared, keep.get());
    keep.release();  // now owned by the buffer
    return Tensor(dtype, std::move(shape), std::move(buffer));
  }
  Tensor t(dtype, std::move(shape));
  if (!data.size()) return t;
  std::memcpy(t.raw_data(), p, data.size());
  return t;
}

// ---- flat messages ----

void flatten_into(capnp::MessageBuilder& message, std::string& out, bool align_in_memory) {
  auto segments = message.getSegmentsForOutput();
  size_t n = segments.size();
  constexpr size_t kWord = sizeof(capnp::word);
  constexpr size_t kAlignWords = kTensorAlignment / kWord;
  size_t header_words = n / 2 + 1;  // u32 count-1, n u32 sizes, padded to a word
  size_t max_words = header_words + (n - 1) * (kAlignWords - 1);
  for (auto& seg : segments) max_words += seg.size();
  // Grow first: padding is chosen for the final addresses of the buffer.
  out.resize(max_words * kWord);
  char* p = out.data();
  uintptr_t base = align_in_memory ? reinterpret_cast<uintptr_t>(p) : 0;
  std::vector<size_t> sizes(n), pads(n, 0);
  size_t total = header_words;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && base % kWord == 0) {
      // Unreferenced words at a segment's end are valid; they align the next segment
      // (a referenced tensor's data) in memory, so a decoder of this very buffer can
      // share it.
      size_t misalign = (base + total * kWord) % kTensorAlignment;
      pads[i - 1] = misalign ? (kTensorAlignment - misalign) / kWord : 0;
      total += pads[i - 1];
    }
    sizes[i] = segments[i].size();
    total += sizes[i];
  }
  auto put32 = [&](size_t at, size_t v) {
    uint32_t x = static_cast<uint32_t>(v);
    std::memcpy(p + at, &x, 4);
  };
  put32(0, n - 1);
  for (size_t i = 0; i < n; ++i) put32(4 + 4 * i, sizes[i] + pads[i]);
  if (n % 2 == 0) put32(4 + 4 * n, 0);
  size_t offset = header_words * kWord;
  for (size_t i = 0; i < n; ++i) {
    if (sizes[i]) std::memcpy(p + offset, segments[i].begin(), sizes[i] * kWord);
    offset += sizes[i] * kWord;
    // The buffer may be recycled: padding must not show an old message's bytes.
    if (pads[i]) std::memset(p + offset, 0, pads[i] * kWord);
    offset += pads[i] * kWord;
  }
  out.resize(total * kWord);
}

std::string flatten(capnp::MessageBuilder& message, bool align_in_memory) {
  std::string out;
  flatten_into(message, out, align_in_memory);
  return out;
}

Status FlatReader::open(const void* data, size_t size, const std::string& what, int nesting_limit) {
  if (size == 0) return data_loss(what + " is empty (0 bytes)");
  if (size % sizeof(capnp::word))
    return data_loss(what + " is " + std::to_string(size) +
                     " bytes, not a multiple of 8: it is truncated or not a Cap'n Proto message");
  size_t words = size / sizeof(capnp::word);
  const capnp::word* w = static_cast<const capnp::word*>(data);
  if (reinterpret_cast<uintptr_t>(data) % alignof(capnp::word)) {
    copy_ = kj::heapArray<capnp::word>(words);
    std::memcpy(copy_.begin(), data, size);
    w = copy_.begin();
  }
  capnp::ReaderOptions options;
  // Every object is read about once; the slack bounds what aliasing pointers can amplify.
  options.traversalLimitInWords = words * 8 + 1024;
  options.nestingLimit = nesting_limit;
  return guard(what, [&]() -> Status {
    reader_.emplace(kj::arrayPtr(w, words), options);
    const capnp::word* end = reader_->getEnd();
    if (end != w + words)
      return data_loss(what + " has " + std::to_string((w + words - end) * sizeof(capnp::word)) +
                       " trailing bytes after the message");
    return Status::OK();
  });
}

}  // namespace wire_convert

// ---- public API ----

using namespace wire_convert;

namespace {

// Message buffers handed back by decoders, reused by encoders: a fresh large string costs
// a page fault per 4 KiB, and glibc maps blocks over 32 MiB afresh on every malloc.
class StringPool {
 public:
  static StringPool& global() {
    static auto* pool = new StringPool();  // never destroyed: decoders may run at exit
    return *pool;
  }
  std::string take(size_t bytes) {
    if (bytes >= kMinPooled) {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i) {
        size_t cap = free_[i].capacity();
        if (cap >= bytes && cap <= 2 * bytes + kMinPooled && (best == free_.size() || cap < free_[best].capacity())) best = i;
      }
      if (best < free_.size()) {
        std::string s = std::move(free_[best]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
        cached_ -= s.capacity();
        return s;
      }
    }
    std::string s;
    s.reserve(bytes);
    return s;
  }
  void give(std::string&& s) {
    size_t cap = s.capacity();
    if (cap < kMinPooled) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() >= kMaxStrings || cached_ + cap > kMaxCachedBytes) return;
    cached_ += cap;
    free_.push_back(std::move(s));
  }

 private:
  static constexpr size_t kMinPooled = 64 * 1024;
  static constexpr size_t kMaxStrings = 16;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 30;
  std::mutex mu_;
  std::vector<std::string> free_;
  size_t cached_ = 0;
};

// Owns a message's bytes while they are decoded (and while a tensor shares them), then
// recycles them.
std::shared_ptr<std::string> hold(std::string&& bytes) {
  return std::shared_ptr<std::string>(new std::string(std::move(bytes)), [](std::string* s) {
    StringPool::global().give(std::move(*s));
    delete s;
  });
}

std::string flatten_pooled(capnp::MessageBuilder& message) {
  size_t words = 0;
  for (auto& seg : message.getSegmentsForOutput()) words += seg.size() + kTensorAlignment / sizeof(capnp::word);
  std::string out = StringPool::global().take((words + 1) * sizeof(capnp::word));
  flatten_into(message, out, /*align_in_memory=*/true);
  return out;
}

constexpr const char* kTensorMsg = "TensorMsg";
constexpr const char* kTensorProto = "TensorProto";

// First segment big enough for everything but referenced data, so the message is one
// segment (plus one for a large tensor's data).
unsigned estimate_words(const Tensor& t, size_t extra_bytes) {
  size_t bytes = 256 + extra_bytes;
  if (t.valid()) {
    bytes += 8 * static_cast<size_t>(t.rank());
    if (t.dtype() == DType::string) {
      const std::string* s = t.data<std::string>();
      for (int64_t i = 0; i < t.num_elements(); ++i) bytes += s[i].size() + 16;
    } else if (t.bytes() < kExternalMinBytes || t.bytes() % 8 != 0) {
      bytes += t.bytes();
    }
  }
  size_t words = bytes / 8 + 1;
  return static_cast<unsigned>(std::min<size_t>(words, size_t{1} << 28));
}

std::atomic<int64_t> g_encodes{0};
std::atomic<int64_t> g_decodes{0};

}  // namespace

CodecCounts codec_counts() {
  return {g_encodes.load(std::memory_order_relaxed), g_decodes.load(std::memory_order_relaxed)};
}

namespace {

// A tensor that cannot travel fails the step at the receiver, with a reason, rather than
// throwing inside the runtime: the status and tensor to write instead of m's.
struct Outgoing {
  Status status;
  const Tensor* tensor;
};
Outgoing outgoing(const TensorMessage& m, bool beside) {
  static const Tensor kNone;
  if (!beside)
    if (Status s = check_encodable(m.tensor); !s.ok()) return {s.with_context("cannot send the output '" + m.producer + "'"), &kNone};
  return {m.status, &m.tensor};
}

unsigned message_words(const TensorMessage& m, const Outgoing& o, bool beside) {
  static const Tensor kNone;
  return estimate_words(beside ? kNone : *o.tensor,
                        m.producer.size() + o.status.message().size() + (beside ? 8 * static_cast<size_t>(o.tensor->rank()) : 0));
}

// The one TensorMsg writer. With `beside`, the tensor's data is left out and its size
// written in its place (the split form); the caller checked that it can travel so.
void write_message(const TensorMessage& m, const Outgoing& o, bool beside, wire::TensorMsg::Builder root,
                   const capnp::Orphanage* orphanage) {
  g_encodes.fetch_add(1, std::memory_order_relaxed);
  const Status& status = o.status;
  const Tensor* tensor = o.tensor;
  root.setStepId(m.step_id);
  root.setEdge(m.edge);
  root.setProducer(capnp::Text::Reader(m.producer.data(), m.producer.size()));
  if (!status.ok()) {
    auto s = root.initStatus();
    s.setCode(static_cast<int32_t>(status.code()));
    s.setMessage(capnp::Text::Reader(status.message().data(), status.message().size()));
  }
  if (beside) {
    auto proto = root.initTensor();
    write_tensor_head(*tensor, proto);
    proto.setBesideBytes(tensor->bytes());
  } else if (tensor->valid()) {
    write_tensor(*tensor, root.initTensor(), orphanage);
  }
}

std::string encode_message_impl(const TensorMessage& m, bool beside) {
  Outgoing o = outgoing(m, beside);
  capnp::MallocMessageBuilder message(message_words(m, o, beside));
  capnp::Orphanage orphanage = message.getOrphanage();
  write_message(m, o, beside, message.initRoot<wire::TensorMsg>(), &orphanage);
  return flatten_pooled(message);
}

}  // namespace

std::string encode_tensor_message(const TensorMessage& m) { return encode_message_impl(m, false); }

namespace {

// A tensor whose data travels beside its message: allocated from the head, to be filled.
Result<Tensor> allocate_beside(wire::TensorProto::Reader r, uint64_t max_beside) {
  AF_ASSIGN_OR_RETURN(DType dtype, read_dtype(r.getDtype()));
  if (!r.hasShape() || r.getShape().getUnknownRank()) return data_loss("data beside a tensor of unknown shape");
  AF_ASSIGN_OR_RETURN(std::vector<int64_t> dims, read_dims(r.getShape().getDims(), 0));
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);  // cannot overflow: read_dims bounded it
  Shape shape(std::move(dims));
  uint64_t want = r.getBesideBytes();
  if (want > max_beside)
    return data_loss("it claims " + std::to_string(want) + " data bytes beside it, more than the " +
                     std::to_string(max_beside) + " that follow");
  uint64_t esize = dtype_size(dtype);
  if (dtype == DType::string || dtype == DType::boolean || n > want / esize || n * esize != want)
    return data_loss(std::string("tensor ") + dtype_name(dtype) + shape.to_string() + " cannot have " +
                     std::to_string(want) + " data bytes beside it");
  return Tensor(dtype, std::move(shape));
}

// `beside` null: data beside the message is an error (read_tensor says so). `shared`:
// storage large embedded data may share. Throws kj::Exception on malformed input.
Result<TensorMessage> read_message(wire::TensorMsg::Reader root, const SharedBytes* shared, Tensor* beside,
                                   uint64_t max_beside) {
  g_decodes.fetch_add(1, std::memory_order_relaxed);
  TensorMessage m;
  m.step_id = root.getStepId();
  m.edge = root.getEdge();
  auto producer = root.getProducer();
  m.producer.assign(producer.begin(), producer.size());
  if (root.hasStatus()) {
    auto s = root.getStatus();
    int32_t code = s.getCode();
    if (code < 0 || code > static_cast<int32_t>(Code::resource_exhausted))
      return data_loss("TensorMsg from '" + m.producer + "' carries unknown status code " + std::to_string(code));
    auto message = s.getMessage();
    if (code != 0) m.status = Status(static_cast<Code>(code), std::string(message.begin(), message.size()));
  }
  if (root.hasTensor()) {
    bool split = beside && root.getTensor().getBesideBytes() != 0;
    if (split && !m.status.ok()) return data_loss("TensorMsg from '" + m.producer + "' carries both a failed status and data");
    auto t = split ? allocate_beside(root.getTensor(), max_beside) : read_tensor(root.getTensor(), shared);
    if (!t.ok())
      return t.status().with_context("TensorMsg from '" + m.producer + "' (step " + std::to_string(m.step_id) + ", edge " +
                                     std::to_string(m.edge) + ")");
    m.tensor = std::move(t).value();
    if (split) *beside = m.tensor;
  }
  return m;
}

Result<TensorMessage> decode_message_impl(std::shared_ptr<void> owner, void* data, size_t size, Tensor* beside,
                                          uint64_t max_beside) {
  FlatReader flat;
  AF_RETURN_IF_ERROR(flat.open(data, size, kTensorMsg));
  return guard(kTensorMsg, [&]() -> Result<TensorMessage> {
    SharedBytes shared{std::move(owner), static_cast<const char*>(data), static_cast<const char*>(data) + size};
    return read_message(flat.reader().getRoot<wire::TensorMsg>(), flat.copied() ? nullptr : &shared, beside, max_beside);
  });
}

}  // namespace

Result<TensorMessage> decode_tensor_message(std::shared_ptr<void> owner, void* data, size_t size) {
  return decode_message_impl(std::move(owner), data, size, nullptr, 0);
}

Result<TensorMessage> decode_tensor_message(std::string bytes) {
  // The string moves to the heap with its buffer, which the tensor may then share.
  auto holder = hold(std::move(bytes));
  char* p = holder->data();
  size_t n = holder->size();
  return decode_tensor_message(std::shared_ptr<void>(holder, holder->data()), p, n);
}

namespace {

bool travels_beside(const Tensor& t) {
  if (!t.valid() || t.bytes() < kBesideMinBytes || !t.buffer() || t.device().type != DeviceType::CPU) return false;
  switch (t.dtype()) {
    case DType::f32: case DType::f64: case DType::i32: case DType::i64: case DType::u8: return true;
    default: return false;
  }
}

}  // namespace

TensorMessageHead encode_tensor_message_head(const TensorMessage& m) {
  bool beside = m.status.ok() && travels_beside(m.tensor);
  return {encode_message_impl(m, beside), beside ? m.tensor : Tensor()};
}

size_t tensor_message_head_words(const TensorMessage& m) {
  bool beside = m.status.ok() && travels_beside(m.tensor);
  return message_words(m, outgoing(m, beside), beside);
}

Tensor write_tensor_message_head(const TensorMessage& m, wire::TensorMsg::Builder b, const capnp::Orphanage* orphanage) {
  bool beside = m.status.ok() && travels_beside(m.tensor);
  write_message(m, outgoing(m, beside), beside, b, orphanage);
  return beside ? m.tensor : Tensor();
}

Result<TensorMessage> read_tensor_message_head(wire::TensorMsg::Reader r, Tensor* beside, uint64_t max_beside) {
  *beside = Tensor();
  return guard(kTensorMsg, [&]() -> Result<TensorMessage> { return read_message(r, nullptr, beside, max_beside); });
}

Result<TensorMessage> decode_tensor_message_head(std::string bytes, Tensor* beside, uint64_t max_beside) {
  *beside = Tensor();
  auto holder = hold(std::move(bytes));
  return decode_message_impl(std::shared_ptr<void>(holder, holder->data()), holder->data(), holder->size(), beside,
                             max_beside);
}

std::string encode_tensor(const Tensor& t) {
  g_encodes.fetch_add(1, std::memory_order_relaxed);
  capnp::MallocMessageBuilder message(estimate_words(t, 0));
  capnp::Orphanage orphanage = message.getOrphanage();
  write_tensor(t, message.initRoot<wire::TensorProto>(), &orphanage);
  return flatten_pooled(message);
}

Result<Tensor> decode_tensor(std::string bytes) {
  g_decodes.fetch_add(1, std::memory_order_relaxed);
  auto holder = hold(std::move(bytes));
  FlatReader flat;
  AF_RETURN_IF_ERROR(flat.open(holder->data(), holder->size(), kTensorProto));
  return guard(kTensorProto, [&]() -> Result<Tensor> {
    SharedBytes shared{std::shared_ptr<void>(holder, holder->data()), holder->data(), holder->data() + holder->size()};
    return read_tensor(flat.reader().getRoot<wire::TensorProto>(), flat.copied() ? nullptr : &shared);
  });
}

}  // namespace actorflow
