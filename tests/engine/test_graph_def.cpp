// GraphDef: a graph using every DSL function and every registered op survives
// serialize -> deserialize and save -> load node for node, runs to the same values, and
// broken bytes or files give errors that say what is wrong and where.
#include <doctest/doctest.h>
#include <unistd.h>

#include <actorflow/crc32c.h>
#include <actorflow/op_registry.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <filesystem>
#include <fstream>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "graph.capnp.h"
#include "graph_def_model.h"
#include "test_util.h"

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

using aft::Model;
using aft::build_model;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Node-for-node equality, by name (ids may differ when the message was reordered).
void check_same_graph(const af::Graph& a, const af::Graph& b) {
  REQUIRE(a.num_nodes() == b.num_nodes());
  for (int i = 0; i < a.num_nodes(); ++i) {
    const af::Node& na = a.node(i);
    INFO("node '" << na.name << "'");
    const af::Node* nb = b.find_node(na.name);
    REQUIRE(nb != nullptr);
    CHECK(nb->op == na.op);
    CHECK(nb->device == na.device);
    REQUIRE(nb->inputs.size() == na.inputs.size());
    for (size_t k = 0; k < na.inputs.size(); ++k) {
      CHECK(b.node(nb->inputs[k].node).name == a.node(na.inputs[k].node).name);
      CHECK(nb->inputs[k].index == na.inputs[k].index);
    }
    REQUIRE(nb->control_inputs.size() == na.control_inputs.size());
    for (size_t k = 0; k < na.control_inputs.size(); ++k)
      CHECK(b.node(nb->control_inputs[k]).name == a.node(na.control_inputs[k]).name);
    REQUIRE(nb->attrs.size() == na.attrs.size());
    for (auto& [key, value] : na.attrs) {
      INFO("attribute '" << key << "' = " << value.to_string());
      REQUIRE(nb->has_attr(key));
      CHECK(*nb->find_attr(key) == value);
    }
    CHECK(nb->output_dtypes == na.output_dtypes);
    CHECK(nb->output_shapes == na.output_shapes);
  }
  REQUIRE(a.collections().size() == b.collections().size());
  for (auto& [key, ids] : a.collections()) {
    INFO("collection '" << key << "'");
    const auto& other = b.collection(key);
    REQUIRE(other.size() == ids.size());
    for (size_t k = 0; k < ids.size(); ++k) CHECK(b.node(other[k]).name == a.node(ids[k]).name);
  }
  CHECK(a.seed() == b.seed());
}

// The same fetches by name in another graph, and its feeds.
std::vector<af::Output> outputs_in(af::Graph& g, const std::vector<af::Output>& outs) {
  std::vector<af::Output> r;
  for (auto& o : outs) r.push_back(*g.find_output(o.name()));
  return r;
}
af::FeedDict feeds_in(af::Graph& g, const af::FeedDict& feeds) {
  af::FeedDict r;
  for (auto& [o, t] : feeds) r.emplace_back(*g.find_output(o.name()), t);
  return r;
}

void check_same_values(Model& m, af::Graph& other) {
  auto a = aft::eval(*m.g, m.fetches, m.feeds);
  auto b = aft::eval(other, outputs_in(other, m.fetches), feeds_in(other, m.feeds));
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("fetch " << m.fetches[i].name() << ": " << a[i].debug_string() << " vs " << b[i].debug_string());
    CHECK(a[i].equals(b[i]));
  }
}

// Rewrites serialized bytes through the capnp builder API.
std::string edit(const std::string& bytes, const std::function<void(af::wire::GraphDef::Builder)>& change) {
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / 8);
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words);
  capnp::MallocMessageBuilder mb;
  mb.setRoot(reader.getRoot<af::wire::GraphDef>());
  change(mb.getRoot<af::wire::GraphDef>());
  auto flat = capnp::messageToFlatArray(mb);
  return std::string(reinterpret_cast<const char*>(flat.asBytes().begin()), flat.asBytes().size());
}

int node_index(af::wire::GraphDef::Builder gd, const std::string& name) {
  auto nodes = gd.getNodes();
  for (unsigned i = 0; i < nodes.size(); ++i)
    if (nodes[i].getName() == name.c_str()) return static_cast<int>(i);
  FAIL("no node " << name);
  return -1;
}

std::string deserialize_error(const std::string& bytes) {
  auto r = af::Graph::deserialize(bytes);
  if (r.ok()) return "";
  return r.status().message();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("af_graph_def_test_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace

TEST_CASE("graph def: the model uses every registered op") {
  Model m = build_model();
  std::set<std::string> used;
  for (int i = 0; i < m.g->num_nodes(); ++i) used.insert(m.g->node(i).op);
  std::string missing;
  for (auto& op : af::OpRegistry::global().names())
    if (!used.count(op)) missing += " " + op;
  INFO("registered ops missing from the GraphDef test model (add them to build_model):" << missing);
  CHECK(missing.empty());
}

TEST_CASE("graph def: serialize -> deserialize keeps every node, attribute, collection and the seed") {
  Model m = build_model();
  std::string bytes = m.g->serialize();
  CHECK(bytes.size() % 8 == 0);
  auto back = af::Graph::deserialize(bytes);
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  af::Graph& g2 = **back;
  check_same_graph(*m.g, g2);
  // A message in dependency order keeps node ids, so bytes round-trip exactly.
  for (int i = 0; i < m.g->num_nodes(); ++i) CHECK(g2.node(i).name == m.g->node(i).name);
  CHECK(g2.serialize() == bytes);
  CHECK(g2.to_string() == m.g->to_string());
  CHECK(g2.collection("variables").size() == 14);  // + batch norm gamma, beta, moving mean, variance; global_step
  CHECK(g2.collection("trainable_variables").size() == 10);
  CHECK(g2.collection("init_ops").size() == 18);  // 14 variables + 4 AUC counters

  // The loaded graph keeps growing with fresh names.
  std::string next = m.g->peek_unique_name("Identity");
  CHECK(next != "Identity");
  auto more = af::identity(*g2.find_output("x"));
  CHECK(more.node().name == next);
}

TEST_CASE("graph def: every AttrValue kind round-trips") {
  af::Graph g;
  af::NodeSpec spec;
  spec.op = "NoOp";
  spec.name = "attrs";
  spec.attrs = {
      {"none", af::AttrValue()},
      {"i", af::AttrValue(int64_t{-1} << 62)},
      {"f", af::AttrValue(-1e300)},
      {"inf", af::AttrValue(std::numeric_limits<double>::infinity())},
      {"b", af::AttrValue(true)},
      {"s", af::AttrValue(std::string("text\0with nul", 14))},
      {"empty_s", af::AttrValue(std::string())},
      {"type", af::AttrValue(af::boolean)},
      {"shape", af::AttrValue(af::Shape{-1, 0, 7})},
      {"scalar_shape", af::AttrValue(af::Shape::scalar())},
      {"unknown_rank", af::AttrValue(af::Shape::unknown_rank())},
      {"ints", af::AttrValue(af::AttrValue::Ints{INT64_MIN, 0, INT64_MAX})},
      {"no_ints", af::AttrValue(af::AttrValue::Ints{})},
      {"floats", af::AttrValue(af::AttrValue::Floats{0.5, -0.0, 1e-310})},
      {"strings", af::AttrValue(af::AttrValue::Strings{"a", "", "\xff\xfe"})},
      {"tensor", af::AttrValue(af::Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}))},
      {"string_tensor", af::AttrValue(af::Tensor::scalar("s"))},
      {"empty_tensor", af::AttrValue(af::Tensor(af::u8, af::Shape{0}))},
      {"no_tensor", af::AttrValue(af::Tensor())},
  };
  for (af::DType t : {af::f32, af::f64, af::i32, af::i64, af::u8, af::boolean, af::string})
    spec.attrs["dtype_" + std::string(af::dtype_name(t))] = af::AttrValue(t);
  const size_t count = spec.attrs.size();
  REQUIRE(g.add_node(spec).ok());
  auto back = af::Graph::deserialize(g.serialize());
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  check_same_graph(g, **back);
  const af::Node* n = (*back)->find_node("attrs");
  REQUIRE(n != nullptr);
  CHECK(n->attrs.size() == count);
  CHECK(n->find_attr("none")->empty());
  CHECK(n->attr_shape("unknown_rank") == af::Shape::unknown_rank());
  CHECK(n->attr_shape("scalar_shape").is_scalar());
  CHECK(n->attr_string("s").size() == 14);
  CHECK_FALSE(n->attr_tensor("no_tensor")->valid());
  CHECK(n->attr_tensor("tensor")->to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  CHECK(std::signbit(n->attr_floats("floats")[1]));

  // A graph with no nodes at all, and its seed.
  af::Graph empty;
  empty.set_seed(-7);
  auto none = af::Graph::deserialize(empty.serialize());
  REQUIRE(none.ok());
  CHECK((*none)->num_nodes() == 0);
  CHECK((*none)->seed() == -7);
}

TEST_CASE("graph def: both graphs compute the same values") {
  Model m = build_model();
  auto back = af::Graph::deserialize(m.g->serialize());
  REQUIRE(back.ok());
  check_same_values(m, **back);
}

TEST_CASE("graph def: nodes stored out of order are sorted; control edges added late survive") {
  Model m = build_model();
  af::Graph& g = *m.g;
  // A control edge from a late node to an early one: id order is no longer a valid order.
  // (The late node runs nothing stateful, so fetches stay deterministic.)
  af::Operation late = af::no_op(g, "late");
  auto early = g.find_output("c_f32");
  REQUIRE(early.ok());
  REQUIRE(g.add_control_input(early->node_id(), late.node_id()).ok());
  auto back = af::Graph::deserialize(g.serialize());
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  check_same_graph(g, **back);
  CHECK((*back)->find_node("c_f32")->id > (*back)->find_node("late")->id);
  REQUIRE((*back)->topological_order().ok());

  // The whole node list reversed loads to the same graph.
  std::string reversed = edit(m.g->serialize(), [](af::wire::GraphDef::Builder gd) {
    auto old = gd.asReader().getNodes();
    capnp::MallocMessageBuilder tmp;
    auto copy = tmp.initRoot<af::wire::GraphDef>().initNodes(old.size());
    for (unsigned i = 0; i < old.size(); ++i) copy.setWithCaveats(i, old[old.size() - 1 - i]);
    auto nodes = gd.initNodes(old.size());
    for (unsigned i = 0; i < nodes.size(); ++i) nodes.setWithCaveats(i, copy.asReader()[i]);
  });
  auto rev = af::Graph::deserialize(reversed);
  REQUIRE_MESSAGE(rev.ok(), rev.status().to_string());
  check_same_graph(g, **rev);
  check_same_values(m, **rev);
}

TEST_CASE("graph def: invalid messages give errors naming the node") {
  Model m = build_model();
  std::string bytes = m.g->serialize();

  CHECK(contains(deserialize_error(""), "empty"));
  CHECK(contains(deserialize_error(bytes.substr(0, bytes.size() - 3)), "not a multiple of 8"));
  CHECK(contains(deserialize_error(bytes.substr(0, bytes.size() - 8)), "malformed"));
  CHECK(contains(deserialize_error(bytes + std::string(16, '\0')), "trailing"));

  auto err = [&](const std::function<void(af::wire::GraphDef::Builder)>& change) {
    return deserialize_error(edit(bytes, change));
  };
  CHECK(contains(err([](auto gd) { gd.setVersion(2); }), "version 2"));
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "c_int")].setOp("NoSuchOp"); }), "'c_int': unknown op 'NoSuchOp'"));
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "c_int")].setName("c_float"); }), "two nodes named 'c_float'"));
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "c_int")].setName(""); }), "has no name"));
  // y = MatMul + b: make MatMul read an unknown producer, then a missing output.
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "MatMul")].getInputs()[0].setNode("ghost"); }),
                 "GraphDef node 'MatMul': input 'ghost' is not a node"));
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "MatMul")].getInputs()[0].setIndex(3); }),
                 "'MatMul': input refers to output 3 of 'x'"));
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "MatMul")].initControlInputs(1).set(0, "nobody"); }),
                 "control input 'nobody'"));
  // A cycle: x's placeholder waits on the MatMul that reads it.
  std::string cyc = err([](auto gd) { gd.getNodes()[node_index(gd, "x")].initControlInputs(1).set(0, "Add"); });
  CHECK(contains(cyc, "cycle through node"));
  CHECK((contains(cyc, "'x'") || contains(cyc, "'MatMul'") || contains(cyc, "'Add'")));
  // A self-loop.
  CHECK(contains(err([](auto gd) { gd.getNodes()[node_index(gd, "c_int")].initControlInputs(1).set(0, "c_int"); }),
                 "cycle through node 'c_int'"));
  // Attributes the op's shape function rejects.
  CHECK(contains(err([](auto gd) {
                   auto attrs = gd.getNodes()[node_index(gd, "c_int")].getAttrs();
                   for (auto a : attrs)
                     if (a.getKey() == "value") a.getValue().setI(3);
                 }),
                 "'c_int'"));
  CHECK(contains(err([](auto gd) {
                   auto attrs = gd.getNodes()[node_index(gd, "c_f32")].getAttrs();
                   for (auto a : attrs)
                     if (a.getKey() == "value") a.getValue().getTensor().getShape().getDims().set(0, 5);
                 }),
                 "holds 24 data bytes, expected 60"));
  CHECK(contains(err([](auto gd) {
                   auto attrs = gd.getNodes()[node_index(gd, "x")].getAttrs();
                   for (auto a : attrs)
                     if (a.getKey() == "shape") a.getValue().getShape().getDims().set(0, -2);
                 }),
                 "dimension -2"));
  CHECK(contains(err([](auto gd) {
                   auto attrs = gd.getNodes()[node_index(gd, "x")].getAttrs();
                   for (auto a : attrs)
                     if (a.getKey() == "dtype") a.getValue().setType(static_cast<af::wire::DType>(40));
                 }),
                 "unknown dtype code 40"));
  CHECK(contains(err([](auto gd) {
                   auto attrs = gd.getNodes()[node_index(gd, "x")].initAttrs(2);
                   attrs[0].setKey("dtype");
                   attrs[0].getValue().setType(af::wire::DType::F32);
                   attrs[1].setKey("dtype");
                   attrs[1].getValue().setType(af::wire::DType::F32);
                 }),
                 "attribute 'dtype' twice"));
  CHECK(contains(err([](auto gd) { gd.getCollections()[0].getNodes().set(0, "vanished"); }), "'vanished'"));
}

TEST_CASE("graph def: save -> load through a file") {
  TempDir dir;
  Model m = build_model();
  std::string path = dir.file("model.afg");
  REQUIRE(m.g->save(path).ok());
  auto loaded = af::Graph::load(path);
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().to_string());
  check_same_graph(*m.g, **loaded);
  check_same_values(m, **loaded);

  // Saving again replaces the file atomically and leaves no temp files behind.
  af::Graph small;
  af::constant(small, 1.0f, "only");
  REQUIRE(small.save(path).ok());
  auto reloaded = af::Graph::load(path);
  REQUIRE(reloaded.ok());
  CHECK((*reloaded)->num_nodes() == 1);
  int files = 0;
  for (auto& entry : fs::directory_iterator(dir.path)) {
    (void)entry;
    ++files;
  }
  CHECK(files == 1);

  auto bad_dir = m.g->save(dir.file("no/such/dir/model.afg"));
  CHECK_FALSE(bad_dir.ok());
  CHECK(contains(bad_dir.message(), "no/such/dir/model.afg"));
}

TEST_CASE("graph def: broken files give errors naming the file") {
  TempDir dir;
  Model m = build_model();
  std::string path = dir.file("good.afg");
  REQUIRE(m.g->save(path).ok());
  const std::string good = read_file(path);
  REQUIRE(good.size() > 100);

  auto load_error = [&](const std::string& name, const std::string& bytes) {
    std::string p = dir.file(name);
    write_file(p, bytes);
    auto r = af::Graph::load(p);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == af::Code::data_loss);
    CHECK(contains(r.status().message(), "'" + p + "'"));
    return r.status().message();
  };

  std::string corrupt = good;
  corrupt[good.size() / 2] ^= 0x20;
  CHECK(contains(load_error("corrupt.afg", corrupt), "corrupted: CRC-32C"));
  std::string bad_crc = good;
  bad_crc.back() ^= 1;
  CHECK(contains(load_error("bad_crc.afg", bad_crc), "corrupted"));

  std::string truncated = load_error("truncated.afg", good.substr(0, good.size() - 10));
  CHECK(contains(truncated, "is truncated: header says " + std::to_string(good.size() - 20) + " payload bytes"));
  CHECK(contains(truncated, "file has " + std::to_string(good.size() - 10)));
  CHECK(contains(load_error("header_only.afg", good.substr(0, 12)), "less than the 16-byte header"));

  std::string magic = good;
  magic[3] = 'X';
  CHECK(contains(load_error("magic.afg", magic), "not an ActorFlow graph file"));
  CHECK(contains(load_error("text.afg", "hello world, not a graph\n"), "not an ActorFlow graph file"));
  CHECK(contains(load_error("trailing.afg", good + "garbage!"), "8 trailing bytes"));
  CHECK(contains(load_error("empty.afg", ""), "is empty"));

  // A payload that passes the checksum but is not a GraphDef.
  std::string junk = good.substr(0, 8);
  std::string payload(24, '\x5a');
  uint64_t len = payload.size();
  junk.append(reinterpret_cast<const char*>(&len), 8);
  junk += payload;
  uint32_t crc = af::crc32c(payload);
  junk.append(reinterpret_cast<const char*>(&crc), 4);
  CHECK(contains(load_error("junk.afg", junk), "GraphDef"));

  auto missing = af::Graph::load(dir.file("missing.afg"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == af::Code::not_found);
  CHECK(contains(missing.status().message(), "'" + dir.file("missing.afg") + "'"));

  auto directory = af::Graph::load(dir.path.string());
  CHECK_FALSE(directory.ok());
}

TEST_CASE("graph def: random ops added after loading do not reuse the loaded ops' seeds") {
  af::Graph g;
  g.set_seed(5);
  auto a = af::random_uniform(g, {3});
  auto b = af::random_uniform(g, {3});
  auto loaded = af::Graph::deserialize(g.serialize());
  REQUIRE(loaded.ok());
  auto c = af::random_uniform(**loaded, {3});
  CHECK(c.node().attr_int("seed2") > b.node().attr_int("seed2"));
  CHECK(a.node().attr_int("seed2") != b.node().attr_int("seed2"));
}
