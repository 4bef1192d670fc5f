// Message <-> Frame (schemas/net.capnp) conversion. Bodies are flat Cap'n Proto messages.
// A frame is hostile until read: its reader traverses a small multiple of the frame's own
// words (so a list of zero-sized structs cannot claim millions of entries), every list is
// checked against what the frame can hold before anything is allocated for it, and what
// decoding allocates is charged to a budget of about the frame's size. Every Cap'n Proto
// exception becomes data_loss here, before it could cross a thread.
#include "frame_messages.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <tuple>

#include "actorflow/tensor_codec_capnp.h"
#include "net.capnp.h"

namespace actorflow::net {
namespace {

kj::ArrayPtr<const kj::byte> bytes_of(const std::string& s) {
  return kj::arrayPtr(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}
std::string to_string(capnp::Data::Reader d) { return std::string(reinterpret_cast<const char*>(d.begin()), d.size()); }
std::string str(capnp::Text::Reader t) { return std::string(t.begin(), t.size()); }
capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }

void write_status(const Status& s, wire::StepStatus::Builder b) {
  b.setCode(static_cast<int32_t>(s.code()));
  b.setMessage(text(s.message()));
}
Status read_status(wire::StepStatus::Reader r) {
  int32_t code = r.getCode();
  if (code == 0) return Status::OK();
  if (code < 0 || code > static_cast<int32_t>(Code::resource_exhausted))
    return internal_error("peer sent unknown status code " + std::to_string(code) + ": " + str(r.getMessage()));
  return Status(static_cast<Code>(code), str(r.getMessage()));
}

// The heads of a message's tensors go into its body, as TensorMsg structs; the data of
// those that travel beside is gathered for the payload.
struct TensorSink {
  std::vector<Tensor> beside;
  const capnp::Orphanage* orphanage = nullptr;
  void head(const TensorMessage& m, wire::TensorMsg::Builder b) {
    Tensor t = write_tensor_message_head(m, b, orphanage);
    if (t.valid()) beside.push_back(std::move(t));
  }
};

struct Writer {
  wire::Frame::Builder f;
  TensorSink& tensors;
  void operator()(const HelloMsg& m) {
    auto b = f.initHello();
    b.setProtoVersion(m.proto_version);
    b.setRole(text(m.role));
    b.setTask(text(m.task));
    b.setIncarnation(m.incarnation);
    b.setNonce(bytes_of(m.nonce));
  }
  void operator()(const AuthProofMsg& m) { f.initAuthProof().setMac(bytes_of(m.mac)); }
  void operator()(const WelcomeMsg& m) { f.initWelcome().setMaxMessageBytes(m.max_message_bytes); }
  void operator()(const RegisterGraphMsg& m) {
    auto b = f.initRegisterGraph();
    b.setRequestId(m.request_id);
    b.setGraphDef(bytes_of(m.graph_def));
    b.setLocation(text(m.location));
    b.setSession(m.session);
    b.setEdgeCapacity(m.edge_capacity);
    b.setVariableScope(m.variable_scope);
    b.setContainer(text(m.container));
    auto peers = b.initPeers(static_cast<unsigned>(m.peers.size()));
    for (unsigned i = 0; i < peers.size(); ++i) {
      peers[i].setLocation(text(m.peers[i].first));
      peers[i].setAddress(text(m.peers[i].second));
    }
  }
  void operator()(const RegisteredMsg& m) {
    auto b = f.initRegistered();
    b.setRequestId(m.request_id);
    b.setHandle(m.handle);
    write_status(m.status, b.initStatus());
  }
  void operator()(const RunStepMsg& m) {
    auto b = f.initRunStep();
    b.setHandle(m.handle);
    b.setStepId(m.step_id);
    b.setTimeoutMs(m.timeout_ms);
    auto feeds = b.initFeeds(static_cast<unsigned>(m.feeds.size()));
    for (unsigned i = 0; i < feeds.size(); ++i) {
      feeds[i].setName(text(m.feeds[i].first));
      tensors.head(m.feeds[i].second, feeds[i].initTensor());
    }
    auto fetches = b.initFetches(static_cast<unsigned>(m.fetches.size()));
    for (unsigned i = 0; i < fetches.size(); ++i) fetches.set(i, text(m.fetches[i]));
    auto targets = b.initTargets(static_cast<unsigned>(m.targets.size()));
    for (unsigned i = 0; i < targets.size(); ++i) targets.set(i, text(m.targets[i]));
  }
  void operator()(const StepDoneMsg& m) {
    auto b = f.initStepDone();
    b.setStepId(m.step_id);
    write_status(m.status, b.initStatus());
    auto fetched = b.initFetched(static_cast<unsigned>(m.fetched.size()));
    for (unsigned i = 0; i < fetched.size(); ++i) tensors.head(m.fetched[i], fetched[i]);
  }
  void operator()(const CloseGraphMsg& m) { f.initCloseGraph().setHandle(m.handle); }
  void operator()(const HeartbeatMsg& m) { f.initHeartbeat().setSentAtMs(m.sent_at_ms); }
  void operator()(const EdgeFrameMsg& m) {
    auto b = f.initEdge();
    b.setSession(m.session);
    b.setStepId(m.step_id);
    b.setEdge(m.edge);
    b.setToLocation(text(m.to_location));
    tensors.head(m.value, b.initTensor());
  }
  void operator()(const CleanupStepMsg& m) {
    auto b = f.initCleanupStep();
    b.setHandle(m.handle);
    b.setStepId(m.step_id);
    write_status(m.status, b.initStatus());
  }
  void operator()(const ShutdownMsg& m) { f.initShutdown().setReason(text(m.reason)); }
  void operator()(const StoreRequestMsg& m) {
    auto b = f.initStoreRequest();
    b.setRequestId(m.request_id);
    b.setSet(m.set);
    b.setErasePrefix(m.erase_prefix);
    b.setSpace(text(m.space));
    b.setKey(text(m.key));
    b.setValue(bytes_of(m.value));
  }
  void operator()(const StoreReplyMsg& m) {
    auto b = f.initStoreReply();
    b.setRequestId(m.request_id);
    write_status(m.status, b.initStatus());
    b.setValue(bytes_of(m.value));
  }
  void operator()(const CreditMsg& m) {
    auto b = f.initCredit();
    b.setSession(m.session);
    b.setEdge(m.edge);
    b.setToLocation(text(m.to_location));
  }
};

// In the order of Message's alternatives, which is the Frame union's.
constexpr const char* kMessageNames[] = {"Hello",   "AuthProof", "Welcome",    "RegisterGraph", "Registered",
                                         "RunStep", "StepDone",  "CloseGraph", "Heartbeat", "Edge", "Credit", "CleanupStep",
                                         "Shutdown", "StoreRequest", "StoreReply"};
static_assert(std::size(kMessageNames) == std::variant_size_v<Message>);

const char* frame_name(wire::Frame::Reader f) {
  auto i = static_cast<size_t>(f.which());
  return i < std::size(kMessageNames) ? kMessageNames[i] : "unknown frame";
}

// What decoding one frame may allocate besides the tensors its payload fills: the body's
// size again plus this much. Decoded, a small tensor or a short string takes two to three
// times its wire bytes: the constant lets a genuine frame of some 50,000 scalar tensors or
// 500,000 short strings through; a hostile one is refused before it costs more than twice
// its bytes and this.
constexpr uint64_t kDecodeSlackBytes = uint64_t{16} << 20;
// What one decoded tensor costs beyond its data: the TensorMessage, the Tensor's buffer
// and shape, and the allocator's rounding.
constexpr uint64_t kTensorOverheadBytes = sizeof(TensorMessage) + 192;

// The allocations a frame's decoding may still make.
class DecodeBudget {
 public:
  DecodeBudget(uint64_t frame_bytes, const char* message)
      : left_(frame_bytes + kDecodeSlackBytes), frame_bytes_(frame_bytes), message_(message) {}
  // Before a list is read: `count` entries of at least `each` bytes must fit.
  Status list(const char* what, uint64_t count, uint64_t each) {
    if (count == 0 || count <= left_ / std::max<uint64_t>(each, 1)) return Status::OK();
    return data_loss(std::string("the ") + message_ + "'s " + what + " list claims " + std::to_string(count) +
                     " entries, more than a frame of " + std::to_string(frame_bytes_) + " bytes can hold");
  }
  Status take(uint64_t bytes, const char* what) {
    if (bytes <= left_) {
      left_ -= bytes;
      return Status::OK();
    }
    return data_loss(std::string("the ") + message_ + "'s " + what + " would take more memory than a frame of " +
                     std::to_string(frame_bytes_) + " bytes can justify");
  }
  // A Text field copied into a std::string.
  Result<std::string> text(capnp::Text::Reader t, const char* what) {
    AF_RETURN_IF_ERROR(take(t.size(), what));
    return std::string(t.begin(), t.size());
  }

 private:
  uint64_t left_;
  uint64_t frame_bytes_;
  const char* message_;
};

// Decodes tensor heads, allocating the tensors whose data is in the payload.
struct TensorSource {
  std::vector<PayloadTarget>* payload;
  uint64_t left;  // payload bytes the header announced and no tensor has claimed yet
  DecodeBudget* budget;
  // `what` names the tensor in an error (only then is it called).
  template <typename What>
  Result<TensorMessage> read(wire::TensorMsg::Reader r, What&& what) {
    // A string tensor's entries become std::strings, larger than the pointers that claim
    // them: checked before read_tensor_message_head allocates them.
    if (r.hasTensor() && r.getTensor().getDtype() == wire::DType::STRING) {
      auto strings = r.getTensor().getStrings();
      if (Status s = budget->list("string tensor", strings.size(), sizeof(std::string)); !s.ok())
        return s.with_context(what());
    }
    Tensor beside;
    auto m = read_tensor_message_head(r, &beside, left);
    if (!m.ok()) return m.status().with_context(what());
    uint64_t cost = kTensorOverheadBytes + m->producer.size() + m->status.message().size();
    if (m->tensor.valid()) cost += std::max(0, m->tensor.rank()) * sizeof(int64_t);
    if (beside.valid()) {
      payload->push_back({static_cast<char*>(beside.raw_data()), beside.bytes()});
      left -= beside.bytes();
    } else if (m->tensor.valid()) {
      cost += m->tensor.bytes();
      if (m->tensor.dtype() == DType::string)
        for (int64_t i = 0; i < m->tensor.num_elements(); ++i) cost += m->tensor.data<std::string>()[i].size();
    }
    if (Status s = budget->take(cost, "tensors"); !s.ok()) return s.with_context(what());
    return m;
  }
};

Result<Message> read_frame(wire::Frame::Reader f, TensorSource& tensors) {
  DecodeBudget& budget = *tensors.budget;
  switch (f.which()) {
    case wire::Frame::HELLO: {
      auto r = f.getHello();
      return Message{HelloMsg{r.getProtoVersion(), str(r.getRole()), str(r.getTask()), r.getIncarnation(), to_string(r.getNonce())}};
    }
    case wire::Frame::AUTH_PROOF: return Message{AuthProofMsg{to_string(f.getAuthProof().getMac())}};
    case wire::Frame::WELCOME: return Message{WelcomeMsg{f.getWelcome().getMaxMessageBytes()}};
    case wire::Frame::REGISTER_GRAPH: {
      auto r = f.getRegisterGraph();
      AF_RETURN_IF_ERROR(budget.take(r.getGraphDef().size(), "graph"));
      RegisterGraphMsg m{r.getRequestId(), to_string(r.getGraphDef())};
      AF_ASSIGN_OR_RETURN(m.location, budget.text(r.getLocation(), "location"));
      m.session = r.getSession();
      m.edge_capacity = r.getEdgeCapacity();
      m.variable_scope = r.getVariableScope();
      AF_ASSIGN_OR_RETURN(m.container, budget.text(r.getContainer(), "container"));
      auto peers = r.getPeers();
      AF_RETURN_IF_ERROR(budget.list("peers", peers.size(), sizeof(m.peers[0])));
      m.peers.reserve(peers.size());
      for (auto p : peers) {
        AF_ASSIGN_OR_RETURN(std::string location, budget.text(p.getLocation(), "peers"));
        AF_ASSIGN_OR_RETURN(std::string address, budget.text(p.getAddress(), "peers"));
        m.peers.emplace_back(std::move(location), std::move(address));
      }
      return Message{std::move(m)};
    }
    case wire::Frame::REGISTERED: {
      auto r = f.getRegistered();
      return Message{RegisteredMsg{r.getRequestId(), r.getHandle(), read_status(r.getStatus())}};
    }
    case wire::Frame::RUN_STEP: {
      auto r = f.getRunStep();
      RunStepMsg m;
      m.handle = r.getHandle();
      m.step_id = r.getStepId();
      m.timeout_ms = r.getTimeoutMs();
      auto feeds = r.getFeeds();
      AF_RETURN_IF_ERROR(budget.list("feeds", feeds.size(), sizeof(m.feeds[0]) + kTensorOverheadBytes));
      m.feeds.reserve(feeds.size());
      for (auto feed : feeds) {
        AF_ASSIGN_OR_RETURN(std::string name, budget.text(feed.getName(), "feeds"));
        AF_ASSIGN_OR_RETURN(TensorMessage t, tensors.read(feed.getTensor(), [&] { return "the feed " + name; }));
        m.feeds.emplace_back(std::move(name), std::move(t));
      }
      for (auto [list, out, what] : {std::tuple{r.getFetches(), &m.fetches, "fetches"}, std::tuple{r.getTargets(), &m.targets, "targets"}}) {
        AF_RETURN_IF_ERROR(budget.list(what, list.size(), sizeof(std::string)));
        out->reserve(list.size());
        for (auto name : list) {
          AF_ASSIGN_OR_RETURN(std::string n, budget.text(name, what));
          out->push_back(std::move(n));
        }
      }
      return Message{std::move(m)};
    }
    case wire::Frame::STEP_DONE: {
      auto r = f.getStepDone();
      StepDoneMsg m;
      m.step_id = r.getStepId();
      m.status = read_status(r.getStatus());
      auto fetched = r.getFetched();
      AF_RETURN_IF_ERROR(budget.list("fetched", fetched.size(), kTensorOverheadBytes));
      m.fetched.reserve(fetched.size());
      for (auto d : fetched) {
        AF_ASSIGN_OR_RETURN(TensorMessage t, tensors.read(d, [] { return std::string("a fetched tensor"); }));
        m.fetched.push_back(std::move(t));
      }
      return Message{std::move(m)};
    }
    case wire::Frame::CLOSE_GRAPH: return Message{CloseGraphMsg{f.getCloseGraph().getHandle()}};
    case wire::Frame::HEARTBEAT: return Message{HeartbeatMsg{f.getHeartbeat().getSentAtMs()}};
    case wire::Frame::EDGE: {
      auto r = f.getEdge();
      AF_ASSIGN_OR_RETURN(TensorMessage t, tensors.read(r.getTensor(), [] { return std::string("an edge's tensor"); }));
      return Message{EdgeFrameMsg{r.getSession(), r.getStepId(), r.getEdge(), str(r.getToLocation()), std::move(t)}};
    }
    case wire::Frame::CLEANUP_STEP: {
      auto r = f.getCleanupStep();
      return Message{CleanupStepMsg{r.getHandle(), r.getStepId(), read_status(r.getStatus())}};
    }
    case wire::Frame::SHUTDOWN: return Message{ShutdownMsg{str(f.getShutdown().getReason())}};
    case wire::Frame::STORE_REQUEST: {
      auto r = f.getStoreRequest();
      StoreRequestMsg m;
      m.request_id = r.getRequestId();
      m.set = r.getSet();
      m.erase_prefix = r.getErasePrefix();
      AF_ASSIGN_OR_RETURN(m.space, budget.text(r.getSpace(), "store namespace"));
      AF_ASSIGN_OR_RETURN(m.key, budget.text(r.getKey(), "store key"));
      AF_RETURN_IF_ERROR(budget.take(r.getValue().size(), "store value"));
      m.value = to_string(r.getValue());
      return Message{std::move(m)};
    }
    case wire::Frame::STORE_REPLY: {
      auto r = f.getStoreReply();
      StoreReplyMsg m;
      m.request_id = r.getRequestId();
      m.status = read_status(r.getStatus());
      AF_RETURN_IF_ERROR(budget.take(r.getValue().size(), "store value"));
      m.value = to_string(r.getValue());
      return Message{std::move(m)};
    }
    case wire::Frame::CREDIT: {
      auto r = f.getCredit();
      return Message{CreditMsg{r.getSession(), r.getEdge(), str(r.getToLocation())}};
    }
  }
  return data_loss("frame holds an unknown message (union member " + std::to_string(static_cast<int>(f.which())) + ")");
}

}  // namespace

const char* message_name(const Message& m) { return kMessageNames[m.index()]; }

namespace {

// Words a message's Frame needs, about: enough that it is one segment (tensor data
// referenced in place aside).
struct SizeEstimate {
  size_t bytes = 64;
  void str(const std::string& s) { bytes += s.size() + 16; }
  void tensor(const TensorMessage& t) { bytes += tensor_message_head_words(t) * 8 + 16; }
  void operator()(const HelloMsg& m) { str(m.role), str(m.task), str(m.nonce); }
  void operator()(const AuthProofMsg& m) { str(m.mac); }
  void operator()(const WelcomeMsg&) {}
  void operator()(const RegisterGraphMsg& m) {
    str(m.graph_def), str(m.location), str(m.container);
    for (auto& p : m.peers) bytes += 16, str(p.first), str(p.second);
  }
  void operator()(const RegisteredMsg& m) { str(m.status.message()); }
  void operator()(const RunStepMsg& m) {
    for (auto& f : m.feeds) bytes += 16, str(f.first), tensor(f.second);
    for (auto& f : m.fetches) str(f);
    for (auto& t : m.targets) str(t);
  }
  void operator()(const StepDoneMsg& m) {
    str(m.status.message());
    for (auto& t : m.fetched) tensor(t);
  }
  void operator()(const CloseGraphMsg&) {}
  void operator()(const HeartbeatMsg&) {}
  void operator()(const EdgeFrameMsg& m) { str(m.to_location), tensor(m.value); }
  void operator()(const CreditMsg& m) { str(m.to_location); }
  void operator()(const CleanupStepMsg& m) { str(m.status.message()); }
  void operator()(const ShutdownMsg& m) { str(m.reason); }
  void operator()(const StoreRequestMsg& m) { str(m.space), str(m.key), str(m.value); }
  void operator()(const StoreReplyMsg& m) { str(m.status.message()), str(m.value); }
};

// A thread's first segment for small frames: no calloc per frame. MallocMessageBuilder
// zeroes what it used again when it is destroyed, as it requires of a given segment.
constexpr size_t kScratchWords = 512;
thread_local uint64_t t_scratch[kScratchWords] = {};

OutFrame flatten_frame(capnp::MessageBuilder& builder, uint16_t type, std::shared_ptr<TensorSink> tensors) {
  OutFrame out;
  for (auto& t : tensors->beside) out.payload.push_back({static_cast<const char*>(t.raw_data()), t.bytes()});
  uint64_t payload_bytes = out.payload_bytes();
  // The flat layout of capnp::messageToFlatArray, written straight behind the header.
  auto segments = builder.getSegmentsForOutput();
  size_t n = segments.size();
  size_t table_words = n / 2 + 1;  // u32 count-1, n u32 sizes, padded to a word
  size_t words = table_words;
  for (auto& seg : segments) words += seg.size();
  size_t head = frame_head_bytes(payload_bytes);
  out.head.resize(head + words * sizeof(capnp::word));
  char* body = out.head.data() + head;
  auto put32 = [&](size_t at, size_t v) {
    uint32_t x = static_cast<uint32_t>(v);
    std::memcpy(body + at, &x, 4);
  };
  put32(0, n - 1);
  for (size_t i = 0; i < n; ++i) put32(4 + 4 * i, segments[i].size());
  if (n % 2 == 0) put32(4 + 4 * n, 0);
  char* p = body + table_words * sizeof(capnp::word);
  for (auto& seg : segments) {
    if (seg.size()) std::memcpy(p, seg.begin(), seg.size() * sizeof(capnp::word));
    p += seg.size() * sizeof(capnp::word);
  }
  write_frame_head(out.head.data(), type, words * sizeof(capnp::word), payload_bytes);
  if (!out.payload.empty()) out.keep = std::move(tensors);
  return out;
}

OutFrame build_frame(capnp::MallocMessageBuilder& builder, const Message& m) {
  auto tensors = std::make_shared<TensorSink>();
  capnp::Orphanage orphanage = builder.getOrphanage();
  tensors->orphanage = &orphanage;
  std::visit(Writer{builder.initRoot<wire::Frame>(), *tensors}, m);
  tensors->orphanage = nullptr;
  return flatten_frame(builder, frame_type(m), std::move(tensors));
}

}  // namespace

OutFrame encode_message(const Message& m) {
  SizeEstimate size;
  std::visit(size, m);
  size_t words = size.bytes / sizeof(capnp::word) + 1;
  if (words <= kScratchWords) {
    capnp::MallocMessageBuilder builder(kj::arrayPtr(reinterpret_cast<capnp::word*>(t_scratch), kScratchWords));
    return build_frame(builder, m);
  }
  capnp::MallocMessageBuilder builder(static_cast<unsigned>(std::min<size_t>(words, size_t{1} << 28)));
  return build_frame(builder, m);
}

Result<Message> decode_message(const RawFrame& frame, uint64_t max_bytes, std::vector<PayloadTarget>* payload) {
  payload->clear();
  if (frame.size == 0 || frame.size % 8 != 0 || frame.words.size() * 8 < frame.size)
    return data_loss("frame body of " + std::to_string(frame.size) + " bytes is not a Cap'n Proto message");
  if (frame.size > max_bytes)
    return data_loss("frame body of " + std::to_string(frame.size) + " bytes is over the limit of " + std::to_string(max_bytes));
  capnp::ReaderOptions options;
  // From the frame's own size, not the connection's limit: Cap'n Proto charges a list of
  // zero-sized structs a word an entry, so a 100-byte frame claims at most a few thousand.
  // Four times the words, as a checked list may be read twice (its count, then its entries).
  options.traversalLimitInWords = frame.size / 2 + 4096;
  options.nestingLimit = 16;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(reinterpret_cast<const capnp::word*>(frame.words.data()), frame.size / 8), options);
    if (reader.getEnd() != reinterpret_cast<const capnp::word*>(frame.words.data()) + frame.size / 8)
      return data_loss("frame body has trailing bytes after its message");
    auto root = reader.getRoot<wire::Frame>();
    if (static_cast<uint16_t>(root.which()) + 1 != frame.type)
      return data_loss("frame header says type " + std::to_string(frame.type) + " but the body holds union member " +
                       std::to_string(static_cast<int>(root.which())));
    DecodeBudget budget(frame.size, frame_name(root));
    TensorSource tensors{payload, frame.payload_bytes, &budget};
    auto m = read_frame(root, tensors);
    if (!m.ok()) return m;
    uint64_t described = 0;
    for (auto& p : *payload) described += p.size;
    if (described != frame.payload_bytes)
      return data_loss("the frame's body describes " + std::to_string(described) + " payload bytes but its header announces " +
                       std::to_string(frame.payload_bytes));
    return m;
  } catch (const kj::Exception& e) {
    return data_loss(std::string("malformed frame body: ") + e.getDescription().cStr());
  } catch (const std::exception& e) {
    return data_loss(std::string("malformed frame body: ") + e.what());
  }
}

}  // namespace actorflow::net
