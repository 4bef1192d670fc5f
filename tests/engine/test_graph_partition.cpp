// The partitioner (engine/graph_partition.h) and device names: random DAGs placed over
// three locations split into pieces that hold every node once, at its location, with one
// _Send/_Recv pair per (producer output, consumer location) that crosses, data and
// control; every consumer's inputs lead back to the same producers as in the original.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/device_name.h>
#include <actorflow/graph_partition.h>

#include <set>
#include <tuple>

#include "random_dag.h"

namespace af = actorflow;

TEST_CASE("device names parse, complete and print canonically") {
  auto d = af::parse_device_name("/job:worker/replica:0/task:1/device:CPU:0");
  REQUIRE(d.ok());
  CHECK(d->job == "worker");
  CHECK(d->task == 1);
  CHECK(d->type == "cpu");
  CHECK(d->index == 0);
  CHECK(d->to_string() == "/job:worker/task:1/cpu:0");
  CHECK(d->task_name() == "/job:worker/task:1");
  auto g = af::parse_device_name("/gpu:1");
  REQUIRE(g.ok());
  CHECK_FALSE(g->has_job());
  auto dflt = af::parse_device_name("/job:ps/task:0/cpu:0");
  REQUIRE(dflt.ok());
  CHECK(g->completed_by(*dflt).to_string() == "/job:ps/task:0/gpu:1");
  auto empty = af::parse_device_name("");
  REQUIRE(empty.ok());
  CHECK(empty->completed_by(*dflt) == *dflt);
  CHECK(af::parse_device_name("/job:w/task:2")->completed_by(*dflt).to_string() == "/job:w/task:2/cpu:0");
  auto bad = af::parse_device_name("/job:w/task:x");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("task:x") != std::string::npos);
  CHECK_FALSE(af::parse_device_name("job:w").ok());
  CHECK_FALSE(af::parse_device_name("/tpu:0").ok());
  CHECK_FALSE(af::parse_device_name("/job:a b").ok());
}

namespace {

// The original endpoint a partition-graph input stands for: itself, or through a _Recv
// and its edge, the producer on the other side.
struct Resolver {
  const af::Partitions& p;
  std::tuple<std::string, int> operator()(const af::Graph& part, af::Endpoint in) const {
    const af::Node& n = part.node(in.node);
    if (n.op != "_Recv") return {n.name, in.index};
    const af::PartitionEdge& e = p.edges.at(static_cast<size_t>(n.attr_int("edge_id")));
    return {"@" + std::to_string(e.src.node), e.src.index};
  }
};

}  // namespace

TEST_CASE("random DAGs over 3 locations: every node once, one Send/Recv pair per crossing edge") {
  const std::vector<std::string> devices = {"", "/job:worker/task:0", "/job:worker/task:1/cpu:0"};
  af::PartitionOptions opts;
  opts.default_location = "/job:ps/task:0/cpu:0";
  std::mt19937 rng(97);
  int crossing_total = 0;
  for (int gi = 0; gi < 60; ++gi) {
    INFO("graph " << gi);
    aftpart::PlacedDag d;
    aftpart::build_placed_dag(d, rng, devices, 4);
    auto parts = af::partition(d.g, opts);
    REQUIRE_MESSAGE(parts.ok(), parts.status().to_string());
    CHECK(parts->graphs.size() <= 3);

    // Every original node in exactly one partition, at its location, unchanged.
    std::map<std::string, int> seen;
    for (auto& [loc, pg] : parts->graphs) {
      CHECK(pg->check_acyclic().ok());
      for (int i = 0; i < pg->num_nodes(); ++i) {
        const af::Node& n = pg->node(i);
        if (n.op == "_Send" || n.op == "_Recv" || n.name.rfind("_Ctrl/", 0) == 0) continue;
        ++seen[n.name];
        const af::Node* orig = d.g.find_node(n.name);
        REQUIRE(orig != nullptr);
        CHECK(orig->op == n.op);
        CHECK(af::node_location(*orig, opts).value() == loc);
        CHECK(n.output_dtypes == orig->output_dtypes);
        CHECK(n.inputs.size() == orig->inputs.size());
      }
    }
    CHECK(seen.size() == static_cast<size_t>(d.g.num_nodes()));
    for (auto& [name, count] : seen) CHECK_MESSAGE(count == 1, name);

    // The crossing (producer output, consumer location) pairs of the original graph.
    std::set<std::tuple<int, int, std::string>> crossing;
    for (int i = 0; i < d.g.num_nodes(); ++i) {
      const af::Node& n = d.g.node(i);
      std::string loc = af::node_location(n, opts).value();
      for (auto& in : n.inputs)
        if (af::node_location(d.g.node(in.node), opts).value() != loc) crossing.insert({in.node, in.index, loc});
      for (int c : n.control_inputs)
        if (af::node_location(d.g.node(c), opts).value() != loc) crossing.insert({c, -1, loc});
    }
    crossing_total += static_cast<int>(crossing.size());
    REQUIRE(parts->edges.size() == crossing.size());
    std::map<std::string, int> sends, recvs;  // tensor_name -> count
    for (auto& [loc, pg] : parts->graphs)
      for (int i = 0; i < pg->num_nodes(); ++i) {
        const af::Node& n = pg->node(i);
        if (n.op == "_Send") {
          ++sends[n.attr_string("tensor_name")];
          CHECK(n.attr_string("send_task") == loc);
        }
        if (n.op == "_Recv") {
          ++recvs[n.attr_string("tensor_name")];
          CHECK(n.attr_string("recv_task") == loc);
        }
      }
    for (const af::PartitionEdge& e : parts->edges) {
      CHECK(crossing.count({e.src.node, e.src.index, e.recv_location}) == 1);
      CHECK(e.send_location == af::node_location(d.g.node(e.src.node), opts).value());
      CHECK(sends[e.tensor_name] == 1);
      CHECK(recvs[e.tensor_name] == 1);
    }
    CHECK(sends.size() == crossing.size());
    CHECK(recvs.size() == crossing.size());

    // Every input of every placed node leads back to the original producer.
    Resolver resolve{*parts};
    for (int i = 0; i < d.g.num_nodes(); ++i) {
      const af::Node& orig = d.g.node(i);
      const af::Graph& pg = *parts->graphs.at(parts->location_of.at(orig.name));
      const af::Node& placed = *pg.find_node(orig.name);
      for (size_t k = 0; k < orig.inputs.size(); ++k) {
        auto [name, index] = resolve(pg, placed.inputs[k]);
        const af::Endpoint want = orig.inputs[k];
        if (name[0] == '@') CHECK(name == "@" + std::to_string(want.node));
        else CHECK(name == d.g.node(want.node).name);
        CHECK(index == want.index);
      }
      std::set<std::string> want_ctrl, got_ctrl;
      for (int c : orig.control_inputs) want_ctrl.insert(d.g.node(c).name);
      for (int c : placed.control_inputs) {
        const af::Node& cn = pg.node(c);
        if (cn.op == "_Recv") {
          const af::PartitionEdge& e = parts->edges.at(static_cast<size_t>(cn.attr_int("edge_id")));
          CHECK(e.src.index == -1);
          got_ctrl.insert(d.g.node(e.src.node).name);
        } else {
          got_ctrl.insert(cn.name);
        }
      }
      CHECK(want_ctrl == got_ctrl);
    }
  }
  CHECK(crossing_total > 100);  // the placement really does cut
}

TEST_CASE("a node subset, a custom placement, and errors that name the node") {
  af::Graph g;
  auto a = af::constant(g, 1.0f, "a");
  auto b = af::constant(g, 2.0f, "b");
  auto c = af::add(a, b);
  auto unused = af::mul(a, a);
  af::PartitionOptions opts;
  opts.nodes = g.prune({c.node_id()});
  opts.node_to_loc = [](const af::Node& n) -> af::Result<std::string> { return std::string(n.name == "a" ? "/job:w/task:0/cpu:0" : "/job:w/task:1/cpu:0"); };
  auto p = af::partition(g, opts);
  REQUIRE(p.ok());
  CHECK(p->graphs.size() == 2);
  CHECK(p->location_of.count(unused.node().name) == 0);
  CHECK(p->edges.size() == 1);
  CHECK(p->edges[0].dtype == af::f32);

  af::PartitionOptions only_c;
  only_c.nodes = {c.node_id()};
  auto missing = af::partition(g, only_c);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find(c.node().name) != std::string::npos);

  af::Graph h;
  af::Output bad;
  {
    af::DeviceScope s(h, "/job:w/task:zero");
    bad = af::constant(h, 1.0f, "bad");
  }
  auto err = af::partition(h);
  REQUIRE_FALSE(err.ok());
  CHECK(err.status().message().find("'bad'") != std::string::npos);
}

TEST_CASE("an op on a variable runs where the variable lives and brings it along") {
  af::Graph g;
  af::Output v, x, bump;
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    v = af::variable(g, af::Tensor::from_vector(std::vector<float>{1, 2}, {2}), "v");
  }
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  bump = af::assign_add(v, x, "bump");  // no device of its own: colocated with v
  af::PartitionOptions opts;
  opts.nodes = g.prune({bump.node_id()});
  auto p = af::partition(g, opts);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  CHECK(p->location_of.at("bump") == "/job:ps/task:0/cpu:0");
  CHECK(p->location_of.at("v") == "/job:ps/task:0/cpu:0");
  REQUIRE(p->edges.size() == 1);  // x crosses to the ps
  CHECK(p->edges[0].src.node == x.node_id());
}

TEST_CASE("an explicit placement that contradicts colocation is an error naming both") {
  af::Graph g;
  af::Output v, bump;
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    v = af::variable(g, af::Tensor::from_vector(std::vector<float>{1, 2}, {2}), "v");
  }
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    bump = af::assign_add(v, af::constant(g, af::Tensor::from_vector(std::vector<float>{1, 1}, {2})), "bump");
  }
  af::PartitionOptions opts;
  opts.nodes = g.prune({bump.node_id()});
  auto p = af::partition(g, opts);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().message().find("'bump'") != std::string::npos);
  CHECK(p.status().message().find("'v'") != std::string::npos);
  CHECK(p.status().message().find("/job:worker/task:0") != std::string::npos);
  CHECK(p.status().message().find("/job:ps/task:0") != std::string::npos);
}

TEST_CASE("report_uninitialized_variables asks each variable's task: only a bool per variable crosses") {
  af::Graph g;
  af::Output v0, v1, report;
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    v0 = af::variable(g, af::zeros(g, {1000}), "v0");
  }
  {
    af::DeviceScope d(g, "/job:ps/task:1");
    v1 = af::variable(g, af::zeros(g, {1000}), "v1");
  }
  {
    // Inside a worker's scope: the questions still run beside their variables.
    af::DeviceScope d(g, "/job:worker/task:0");
    report = af::report_uninitialized_variables(g);
  }
  af::PartitionOptions opts;
  opts.nodes = g.prune({report.node_id()});
  auto p = af::partition(g, opts);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  CHECK(p->location_of.at("report_uninitialized_variables") == "/job:worker/task:0/cpu:0");
  CHECK(p->location_of.at("report_uninitialized_variables/is_initialized") == "/job:ps/task:0/cpu:0");
  CHECK(p->location_of.at("report_uninitialized_variables/is_initialized_1") == "/job:ps/task:1/cpu:0");
  REQUIRE(p->edges.size() == 2);
  for (auto& e : p->edges) CHECK(g.node(e.src.node).op == "IsVariableInitialized");
}
