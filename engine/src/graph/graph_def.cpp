// GraphDef: a Graph as Cap'n Proto bytes (schemas/graph.capnp), and as a checksummed file.
//
// File layout (little-endian):
//   "AFGRAPH1" (8 bytes) | payload length (u64) | payload (GraphDef bytes) | CRC-32C of the payload (u32)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "actorflow/crc32c.h"
#include "actorflow/graph.h"
#include "graph/wire_convert.h"

namespace actorflow {

using namespace wire_convert;

namespace wire_convert {

namespace {
capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader(s.data(), s.size()); }
template <typename T>
std::vector<T> to_vector(typename capnp::List<T>::Reader l) {
  std::vector<T> out(l.size());
  for (unsigned i = 0; i < l.size(); ++i) out[i] = l[i];
  return out;
}
}  // namespace

void write_attr(const AttrValue& v, wire::AttrValue::Builder b) {
  struct Visitor {
    wire::AttrValue::Builder& b;
    void operator()(std::monostate) const { b.setNone(); }
    void operator()(int64_t v) const { b.setI(v); }
    void operator()(double v) const { b.setF(v); }
    void operator()(bool v) const { b.setB(v); }
    void operator()(const std::string& v) const { b.setS(text(v)); }
    void operator()(DType v) const {
      wire::DType d;
      write_dtype(v, &d);
      b.setType(d);
    }
    void operator()(const Shape& v) const { write_shape(v, b.initShape()); }
    void operator()(const AttrValue::Ints& v) const {
      auto l = b.initInts(static_cast<unsigned>(v.size()));
      for (size_t i = 0; i < v.size(); ++i) l.set(static_cast<unsigned>(i), v[i]);
    }
    void operator()(const AttrValue::Floats& v) const {
      auto l = b.initFloats(static_cast<unsigned>(v.size()));
      for (size_t i = 0; i < v.size(); ++i) l.set(static_cast<unsigned>(i), v[i]);
    }
    void operator()(const AttrValue::Strings& v) const {
      auto l = b.initStrings(static_cast<unsigned>(v.size()));
      for (size_t i = 0; i < v.size(); ++i) l.set(static_cast<unsigned>(i), text(v[i]));
    }
    void operator()(const Tensor& v) const { write_tensor(v, b.initTensor()); }
  };
  std::visit(Visitor{b}, v.variant());
}

Result<AttrValue> read_attr(wire::AttrValue::Reader r) {
  switch (r.which()) {
    case wire::AttrValue::NONE: return AttrValue();
    case wire::AttrValue::I: return AttrValue(r.getI());
    case wire::AttrValue::F: return AttrValue(r.getF());
    case wire::AttrValue::B: return AttrValue(r.getB());
    case wire::AttrValue::S: {
      auto s = r.getS();
      return AttrValue(std::string(s.begin(), s.size()));
    }
    case wire::AttrValue::TYPE: {
      AF_ASSIGN_OR_RETURN(DType t, read_dtype(r.getType()));
      return AttrValue(t);
    }
    case wire::AttrValue::SHAPE: {
      AF_ASSIGN_OR_RETURN(Shape s, read_shape(r.getShape()));
      return AttrValue(std::move(s));
    }
    case wire::AttrValue::INTS: {
      return AttrValue(to_vector<int64_t>(r.getInts()));
    }
    case wire::AttrValue::FLOATS: {
      return AttrValue(to_vector<double>(r.getFloats()));
    }
    case wire::AttrValue::STRINGS: {
      AttrValue::Strings out;
      for (auto s : r.getStrings()) out.emplace_back(s.begin(), s.size());
      return AttrValue(std::move(out));
    }
    case wire::AttrValue::TENSOR: {
      AF_ASSIGN_OR_RETURN(Tensor t, read_tensor(r.getTensor()));
      return AttrValue(std::move(t));
    }
  }
  return data_loss("unknown attribute kind " + std::to_string(static_cast<unsigned>(r.which())));
}

}  // namespace wire_convert

namespace {

constexpr uint32_t kGraphDefVersion = 1;
constexpr const char* kGraphDef = "GraphDef";
constexpr const char* kVariableAttr = "variable";
constexpr char kMagic[8] = {'A', 'F', 'G', 'R', 'A', 'P', 'H', '1'};
constexpr size_t kHeaderBytes = 16;
constexpr size_t kTrailerBytes = 4;

std::string str(capnp::Text::Reader t) { return std::string(t.begin(), t.size()); }

// A node as read from the message, before it has an id: inputs refer to message indexes.
struct ParsedNode {
  Node node;
  std::vector<std::pair<int, int>> inputs;  // (producer's message index, output)
  std::vector<int> control_inputs;          // message indexes
  std::vector<int> after;                   // nodes it names in attributes
};

// Walks back from a node stuck behind a cycle to one on it: every stuck node has a
// stuck input, so after n steps the walk is inside a cycle.
int node_on_cycle(const std::vector<ParsedNode>& nodes, const std::vector<int>& pending, int start) {
  int at = start;
  for (size_t step = 0; step < nodes.size(); ++step) {
    const ParsedNode& p = nodes[static_cast<size_t>(at)];
    int next = -1;
    for (auto& in : p.inputs)
      if (pending[static_cast<size_t>(in.first)] > 0) { next = in.first; break; }
    if (next < 0)
      for (int c : p.control_inputs)
        if (pending[static_cast<size_t>(c)] > 0) { next = c; break; }
    if (next < 0)
      for (int c : p.after)
        if (pending[static_cast<size_t>(c)] > 0) { next = c; break; }
    if (next < 0) break;
    at = next;
  }
  return at;
}

Result<std::unique_ptr<Graph>> import_graph_def(wire::GraphDef::Reader gd) {
  if (gd.getVersion() != kGraphDefVersion)
    return invalid_argument("GraphDef has format version " + std::to_string(gd.getVersion()) +
                            "; this build reads version " + std::to_string(kGraphDefVersion));
  auto nodes = gd.getNodes();
  size_t n = nodes.size();
  std::vector<ParsedNode> parsed(n);
  std::unordered_map<std::string, int> index;
  index.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    Node& node = parsed[i].node;
    node.name = str(nodes[i].getName());
    if (node.name.empty()) return invalid_argument("GraphDef node #" + std::to_string(i) + " has no name");
    if (!index.emplace(node.name, static_cast<int>(i)).second)
      return invalid_argument("GraphDef has two nodes named '" + node.name + "'");
  }
  auto lookup = [&](const std::string& name, const std::string& who, const char* what) -> Result<int> {
    auto it = index.find(name);
    if (it == index.end()) return invalid_argument(who + ": " + what + " '" + name + "' is not a node of the GraphDef");
    return it->second;
  };
  std::vector<int> pending(n, 0);
  std::vector<std::vector<int>> consumers(n);
  for (unsigned i = 0; i < n; ++i) {
    auto nd = nodes[i];
    ParsedNode& p = parsed[i];
    std::string who = "GraphDef node '" + p.node.name + "'";
    p.node.op = str(nd.getOp());
    p.node.device = str(nd.getDevice());
    for (auto in : nd.getInputs()) {
      AF_ASSIGN_OR_RETURN(int producer, lookup(str(in.getNode()), who, "input"));
      if (in.getIndex() > static_cast<uint32_t>(INT32_MAX))
        return invalid_argument(who + ": input names output " + std::to_string(in.getIndex()) + " of '" +
                                parsed[static_cast<size_t>(producer)].node.name + "'");
      p.inputs.emplace_back(producer, static_cast<int>(in.getIndex()));
      consumers[static_cast<size_t>(producer)].push_back(static_cast<int>(i));
      ++pending[i];
    }
    for (auto c : nd.getControlInputs()) {
      AF_ASSIGN_OR_RETURN(int dep, lookup(str(c), who, "control input"));
      p.control_inputs.push_back(dep);
      consumers[static_cast<size_t>(dep)].push_back(static_cast<int>(i));
      ++pending[i];
    }
    for (auto attr : nd.getAttrs()) {
      std::string key = str(attr.getKey());
      auto value = read_attr(attr.getValue());
      if (!value.ok()) return value.status().with_context(who + ", attribute '" + key + "'");
      if (!p.node.attrs.emplace(key, std::move(value).value()).second)
        return invalid_argument(who + " has attribute '" + key + "' twice");
    }
    // State updates name their variable in an attribute, not by an edge, and their shape
    // function looks it up: the variable must be added first.
    const AttrValue* var = p.node.find_attr(kVariableAttr);
    if (var && var->is<std::string>()) {
      auto it = index.find(var->get<std::string>());
      if (it != index.end()) {
        p.after.push_back(it->second);
        consumers[static_cast<size_t>(it->second)].push_back(static_cast<int>(i));
        ++pending[i];
      }
    }
  }

  // Kahn's algorithm, lowest message index first: a message already in dependency order
  // (as serialize() writes it) keeps its node order and so its node ids.
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[static_cast<size_t>(i)])
      if (--pending[static_cast<size_t>(c)] == 0) ready.push(c);
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        return invalid_argument("GraphDef has a cycle through node '" +
                                parsed[static_cast<size_t>(node_on_cycle(parsed, pending, static_cast<int>(i)))].node.name + "'");
  }

  auto graph = std::make_unique<Graph>();
  std::vector<int> new_id(n, -1);
  for (int i : order) {
    ParsedNode& p = parsed[static_cast<size_t>(i)];
    for (auto& [producer, output] : p.inputs) p.node.inputs.push_back({new_id[static_cast<size_t>(producer)], output});
    for (int c : p.control_inputs) p.node.control_inputs.push_back(new_id[static_cast<size_t>(c)]);
    auto added = graph->add_node_raw(std::move(p.node));
    if (!added.ok()) return added.status().with_context("invalid GraphDef");
    new_id[static_cast<size_t>(i)] = added->node_id();
  }
  for (auto c : gd.getCollections()) {
    std::string key = str(c.getKey());
    for (auto name : c.getNodes()) {
      AF_ASSIGN_OR_RETURN(int i, lookup(str(name), "GraphDef collection '" + key + "'", "member"));
      graph->add_to_collection(key, new_id[static_cast<size_t>(i)]);
    }
  }
  graph->set_seed(gd.getSeed());
  // Random ops added to the loaded graph must not replay the streams of its own ops.
  for (int id = 0; id < graph->num_nodes(); ++id)
    if (graph->node(id).has_attr("seed2")) graph->skip_op_seeds_to(graph->node(id).attr_int("seed2"));
  return graph;
}

Result<std::unique_ptr<Graph>> deserialize_bytes(const void* data, size_t size) {
  FlatReader flat;
  AF_RETURN_IF_ERROR(flat.open(data, size, kGraphDef));
  return guard(kGraphDef, [&]() -> Result<std::unique_ptr<Graph>> {
    return import_graph_def(flat.reader().getRoot<wire::GraphDef>());
  });
}

// ---- files ----

Status errno_status(const std::string& what, int err) {
  std::string m = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR: return not_found(m);
    case EACCES:
    case EPERM:
    case EROFS: return failed_precondition(m);
    case ENOSPC:
    case EDQUOT: return Status(Code::resource_exhausted, m);
    default: return Status(Code::unavailable, m);
  }
}

Status write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot write graph file '" + path + "'", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

std::string quote(const std::string& path) { return "graph file '" + path + "'"; }

}  // namespace

std::string Graph::serialize() const {
  try {
    capnp::MallocMessageBuilder message;
    auto gd = message.initRoot<wire::GraphDef>();
    gd.setVersion(kGraphDefVersion);
    gd.setSeed(seed_);
    auto nodes = gd.initNodes(static_cast<unsigned>(nodes_.size()));
    for (unsigned i = 0; i < nodes_.size(); ++i) {
      const Node& n = *nodes_[i];
      auto b = nodes[i];
      b.setName(text(n.name));
      b.setOp(text(n.op));
      b.setDevice(text(n.device));
      auto inputs = b.initInputs(static_cast<unsigned>(n.inputs.size()));
      for (unsigned k = 0; k < n.inputs.size(); ++k) {
        inputs[k].setNode(text(node(n.inputs[k].node).name));
        inputs[k].setIndex(static_cast<uint32_t>(n.inputs[k].index));
      }
      auto controls = b.initControlInputs(static_cast<unsigned>(n.control_inputs.size()));
      for (unsigned k = 0; k < n.control_inputs.size(); ++k) controls.set(k, text(node(n.control_inputs[k]).name));
      auto attrs = b.initAttrs(static_cast<unsigned>(n.attrs.size()));
      unsigned k = 0;
      for (auto& [key, value] : n.attrs) {
        attrs[k].setKey(text(key));
        Status s = guard("attribute", [&]() -> Status {
          write_attr(value, attrs[k].initValue());
          return Status::OK();
        });
        if (!s.ok()) throw Error(s.with_context("cannot serialize node '" + n.name + "', attribute '" + key + "'"));
        ++k;
      }
    }
    auto collections = gd.initCollections(static_cast<unsigned>(collections_.size()));
    unsigned c = 0;
    for (auto& [key, ids] : collections_) {
      collections[c].setKey(text(key));
      auto names = collections[c].initNodes(static_cast<unsigned>(ids.size()));
      for (unsigned k = 0; k < ids.size(); ++k) names.set(k, text(node(ids[k]).name));
      ++c;
    }
    return flatten(message, /*align_in_memory=*/false);
  } catch (const kj::Exception& e) {
    throw Error(invalid_argument(std::string("cannot serialize the graph: ") + e.getDescription().cStr()));
  }
}

Result<std::unique_ptr<Graph>> Graph::deserialize(const std::string& bytes) {
  return deserialize_bytes(bytes.data(), bytes.size());
}

Status Graph::save(const std::string& path) const {
  std::string payload;
  try {
    payload = serialize();
  } catch (const Error& e) {
    return e.status().with_context("cannot save " + quote(path));
  }
  char header[kHeaderBytes];
  std::memcpy(header, kMagic, 8);
  uint64_t len = payload.size();
  std::memcpy(header + 8, &len, 8);
  uint32_t crc = crc32c(payload);
  char trailer[kTrailerBytes];
  std::memcpy(trailer, &crc, 4);

  // Write a temp file beside the target and rename it over: readers see the old file or
  // the new one, never a partial one.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("cannot save " + quote(path) + " (creating '" + tmp + "')", errno);
  Status s = write_all(fd, header, sizeof header, path);
  if (s.ok()) s = write_all(fd, payload.data(), payload.size(), path);
  if (s.ok()) s = write_all(fd, trailer, sizeof trailer, path);
  if (s.ok() && ::fsync(fd) != 0) s = errno_status("cannot sync " + quote(path), errno);
  if (::close(fd) != 0 && s.ok()) s = errno_status("cannot close " + quote(path), errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = errno_status("cannot rename '" + tmp + "' to '" + path + "'", errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/') + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::OK();
}

Result<std::unique_ptr<Graph>> Graph::load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found(quote(path) + " does not exist");
    return errno_status("cannot open " + quote(path), errno);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(quote(path) + " is not a regular file");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      ::close(fd);
      return errno_status("cannot read " + quote(path), err);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  bytes.resize(got);

  size_t size = bytes.size();
  if (size == 0) return data_loss(quote(path) + " is empty");
  if (std::memcmp(bytes.data(), kMagic, std::min(size, sizeof kMagic)) != 0)
    return data_loss(quote(path) + " is not an ActorFlow graph file: it does not start with \"AFGRAPH1\"");
  if (size < kHeaderBytes)
    return data_loss(quote(path) + " is truncated: it has " + std::to_string(size) + " bytes, less than the " +
                     std::to_string(kHeaderBytes) + "-byte header");
  uint64_t len;
  std::memcpy(&len, bytes.data() + 8, 8);
  uint64_t room = size - kHeaderBytes;  // payload + checksum present
  if (room < kTrailerBytes || len > room - kTrailerBytes)
    return data_loss(quote(path) + " is truncated: header says " + std::to_string(len) + " payload bytes (" +
                     (len > UINT64_MAX - kHeaderBytes - kTrailerBytes ? std::string("more than 2^64")
                                                                      : std::to_string(len + kHeaderBytes + kTrailerBytes)) +
                     " with header and checksum), file has " + std::to_string(size));
  if (len < room - kTrailerBytes)
    return data_loss(quote(path) + " has " + std::to_string(room - kTrailerBytes - len) +
                     " trailing bytes after the checksum (header says " + std::to_string(len) +
                     " payload bytes, file has " + std::to_string(size) + ")");
  const char* payload = bytes.data() + kHeaderBytes;
  uint32_t stored;
  std::memcpy(&stored, payload + len, 4);
  uint32_t actual = crc32c(payload, len);
  if (stored != actual) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "CRC-32C of the payload is 0x%08x, the file says 0x%08x", actual, stored);
    return data_loss(quote(path) + " is corrupted: " + buf);
  }
  auto graph = deserialize_bytes(payload, len);
  if (!graph.ok()) return graph.status().with_context(quote(path));
  return graph;
}

}  // namespace actorflow
