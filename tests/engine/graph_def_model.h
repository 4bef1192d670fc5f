// The GraphDef tests' model: one graph calling every function of dsl_core.h, dsl_math.h
// and dsl_array.h, and every registered op, with feeds and deterministic fetches. Shared
// by test_graph_def.cpp and test_graph_def_fuzz.cpp (whose mutations then reach every
// op's shape function).
#pragma once
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/op_registry.h>

#include <memory>
#include <vector>

namespace aft {

namespace af = actorflow;

struct Model {
  std::unique_ptr<af::Graph> g = std::make_unique<af::Graph>();
  af::FeedDict feeds;
  std::vector<af::Output> fetches;  // deterministic values worth comparing across graphs
};

// One graph calling every function of dsl_core.h, dsl_math.h and dsl_array.h.
inline Model build_model() {
  Model m;
  af::Graph& g = *m.g;
  g.set_seed(1234);
  auto keep = [&](af::Output o) {
    m.fetches.push_back(o);
    return o;
  };

  // Sources: placeholders with unknown dims and unknown rank, constants of every dtype.
  auto x = af::placeholder(g, af::f32, {-1, 4}, "x");
  auto anything = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "anything");
  auto idx = af::placeholder(g, af::i64, {3}, "idx");
  m.feeds = {{x, af::Tensor::from_vector<float>({1, -2, 3, -4, 0.5f, 6, -7, 8}, {2, 4})},
             {anything, af::Tensor::from_vector<float>({2, 3}, {2, 1})},
             {idx, af::Tensor::from_vector<int64_t>({2, 0, 1}, {3})}};
  auto with_default = af::placeholder_with_default(af::constant(g, std::vector<float>{1, 2, 3, 4}, {1, 4}), {-1, 4}, "pwd");
  keep(with_default);
  keep(af::constant(g, af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}), "c_f32"));
  keep(af::constant(g, 1.5f, "c_float"));
  keep(af::constant(g, 2.25, af::f64, "c_double"));
  keep(af::constant(g, 7, "c_int"));
  keep(af::constant(g, int64_t{-9}, "c_int64"));
  keep(af::constant(g, "hello", "c_chars"));
  keep(af::constant(g, std::string("nul\0inside\xff", 11), "c_string"));
  keep(af::constant(g, std::vector<int64_t>{1, 2, 3, 4}, {2, 2}, "c_i64"));
  keep(af::constant(g, af::Tensor::from_vector<uint8_t>({0, 127, 255}, {3}), "c_u8"));
  keep(af::constant(g, af::Tensor::from_vector<bool>({true, false, true, true}, {2, 2}), "c_bool"));
  keep(af::constant(g, af::Tensor::from_vector<std::string>({"a", "", "ccc", "dd"}, {2, 2}), "c_strings"));
  keep(af::constant(g, af::Tensor::from_vector<double>({1e-300, -0.0}, {2}), "c_f64"));
  keep(af::constant(g, af::Tensor::from_vector<int32_t>({INT32_MIN, INT32_MAX}, {1, 2}), "c_i32"));
  keep(af::constant(g, af::Tensor(af::f32, af::Shape{0, 3}), "c_empty"));
  keep(af::scalar_like(g, af::f64, 3.0, "c_like"));

  // Variables with each initializer, under a name scope and a device scope.
  af::Output w, b, counter;
  {
    af::NameScope scope(g, "model");
    af::DeviceScope device(g, "/job:worker/task:0/cpu:0");
    w = af::variable(g, {4, 3}, af::glorot_uniform_initializer(11), "w");
    b = af::variable(g, af::zeros(g, {3}), "b");
    af::variable(g, af::ones(g, {2}, af::f64), "ones");
    af::variable(g, {2, 2}, af::constant_initializer(0.5), "half");
    counter = af::variable(g, af::Tensor::from_vector<int64_t>({1, 2, 3}), "counter", false);
    af::variable(g, af::random_normal(g, {5}, 0, 2, 7), "rn");
    af::variable(g, af::random_uniform(g, {5}, -1, 1), "ru");
    af::variable(g, af::truncated_normal(g, {5}, 0, 1, 3), "tn");
    af::variable(g, {3, 3}, af::glorot_normal_initializer(), "gn");
  }
  keep(af::read_variable(counter));
  keep(af::report_uninitialized_variables(g, {w, counter}));
  keep(af::initial_value(g, af::constant_initializer(2.0, af::i32), {2}, "iv"));
  keep(af::random_normal(g, {2, 2}, 1, 2, 5));
  keep(af::random_uniform(g, {3}, 0, 1, -1, af::f64));
  keep(af::truncated_normal(g, {2}));

  // Math.
  auto y = keep(af::matmul(x, w) + b);
  auto z = keep(af::matmul(w, w, true, false, "gram"));
  keep(af::add(y, y) - af::sub(y, y * 1.0) * af::mul(2.0 * y, y) / af::div(af::abs(y) + 1.0, af::constant(g, 4.0f)));
  keep((y - 1.0) / 2.0 + 3.0 / (af::abs(y) + 1.0));
  keep(1.0 + y);
  keep(3.0 - y);
  keep(af::maximum(y, af::minimum(y, 0.5 * y)));
  keep(af::pow(af::abs(y) + 1.0, af::constant(g, 2.0f)));
  keep(af::add_n({y, y, -y}));
  keep(af::neg(af::sign(y)));
  keep(af::exp(af::log(af::sqrt(af::rsqrt(af::square(y) + 1.0)))));
  keep(af::relu(y) + af::sigmoid(y) + af::tanh(y) + af::softplus(y));
  keep(af::softmax(y));
  keep(af::log_softmax(y));
  keep(af::reduce_sum(y, {1}, true));
  keep(af::reduce_mean(y, {-1}));
  keep(af::reduce_max(y));
  keep(af::reduce_min(z, {0}));
  keep(af::reduce_prod(z, {0, 1}, true));
  keep(af::mean(y));
  keep(af::sum(y, {0}));
  keep(af::argmax(y));
  keep(af::argmin(z, 0));
  auto big = keep(af::greater(y, af::constant(g, 0.0f)));
  keep(af::logical_and(af::equal(y, y), af::not_equal(y, 0.0 * y)));
  keep(af::logical_or(af::less(y, b * 0.0 + 1.0), af::less_equal(y, y)));
  keep(af::logical_not(af::greater_equal(y, y)));
  keep(af::where(big, y, -y));
  keep(af::select(y < 0.0, y, y * 2.0));
  keep(af::logical_or(y > 0.5, af::logical_and(y <= y, y >= y)));
  keep(af::logical_and(y < y, y > y));
  keep(af::cast(x, af::i32));

  // Arrays.
  keep(af::reshape(y, {-1}));
  keep(af::reshape(anything, {1, -1}, "reshape_unknown"));
  keep(af::transpose(w));
  keep(af::transpose(z, {1, 0}, "perm"));
  auto e = keep(af::expand_dims(b, 0));
  keep(af::squeeze(e));
  keep(af::squeeze(e, {0}, "squeeze_axis"));
  auto cat = keep(af::concat({w, w}, 0));
  for (auto& part : af::split(cat, 4, 0)) keep(part);
  for (auto& part : af::split(w, std::vector<int64_t>{1, 2}, 1)) keep(part);
  keep(af::slice(w, {1, 0}, {2, -1}));
  keep(af::gather(w, idx));
  keep(af::gather(w, af::constant(g, af::Tensor::from_vector<int32_t>({2, 1}, {2})), 1));
  keep(af::one_hot(idx, 4, 5.0, -1.0, af::f64));
  keep(af::tile(b, {3}));
  keep(af::pad(w, {{1, 0}, {0, 2}}, 0.5));
  keep(af::fill(g, {2, 3}, 1.5, af::f32));
  keep(af::zeros_like(y));
  keep(af::ones_like(counter));
  keep(af::shape_of(x));
  keep(af::identity(af::stop_gradient(y)));

  // Ops registered without a DSL function (used by gradient functions), when present.
  auto raw = [&](const std::string& op, std::vector<af::Output> inputs, std::map<std::string, af::AttrValue> attrs = {}) {
    if (!af::OpRegistry::global().find(op)) return;
    af::NodeSpec spec;
    spec.op = op;
    spec.inputs = std::move(inputs);
    spec.attrs = std::move(attrs);
    auto r = g.add_node(std::move(spec));
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    keep(r->output(0));
  };
  // The partitioner's edge ends (graph_partition.h): attributes only, no kernels.
  if (af::OpRegistry::global().find("_Send")) {
    std::map<std::string, af::AttrValue> ends{{"tensor_name", std::string("y:0")},
                                              {"edge_id", int64_t{0}},
                                              {"send_task", std::string("/job:worker/task:0/cpu:0")},
                                              {"recv_task", std::string("/job:ps/task:0/cpu:0")}};
    af::NodeSpec send;
    send.op = "_Send";
    send.inputs = {y};
    send.attrs = ends;
    send.attrs["dtype"] = af::f32;
    auto s = g.add_node(std::move(send));
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    // Stored and reloaded, never run (a _Recv runs only in a partition executor).
    af::NodeSpec recv;
    recv.op = "_Recv";
    recv.attrs = ends;
    recv.attrs["dtype"] = af::f32;
    auto r = g.add_node(std::move(recv));
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  }
  // The copy nodes of edges between the host and a GPU (ops/defs/copy_ops.cpp): stored
  // and reloaded; on the CPU they pass their value through.
  for (const char* copy : {"_CopyToDevice", "_CopyToHost"}) {
    if (!af::OpRegistry::global().find(copy)) continue;
    af::NodeSpec spec;
    spec.op = copy;
    spec.inputs = {y};
    auto c = g.add_node(std::move(spec));
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    keep(c->output(0));
  }
  raw("SquaredDifference", {y, af::zeros_like(y)});
  raw("SumToShapeOf", {y, b});
  raw("SparseRowsToDense", {af::gather(w, idx), idx, w});
  raw("BroadcastReduced", {af::reduce_sum(y, {1}), y}, {{"axes", af::AttrValue::Ints{1}}, {"mean", true}});
  raw("ReshapeLike", {af::reshape(y, {-1}), y});
  raw("PadLike", {y, af::pad(y, {{1, 0}, {0, 2}})}, {{"begin", af::AttrValue::Ints{1, 0}}});
  raw("SliceLike", {af::pad(y, {{1, 0}, {0, 2}}), y}, {{"begin", af::AttrValue::Ints{1, 0}}});
  raw("SplitLike", {af::concat({y, y}, 1), y, y}, {{"axis", int64_t{1}}});
  raw("TileGrad", {af::tile(b, {3}), b}, {{"multiples", af::AttrValue::Ints{3}}});
  raw("GatherGrad", {af::gather(w, idx), idx, w}, {{"axis", int64_t{0}}});
  raw("GatherGradValues", {af::gather(w, idx), idx});
  raw("ProdOfOthers", {y}, {{"axes", af::AttrValue::Ints{1}}});
  // The data-flow ops of a lookup across shards: rows split by shard and stitched back.
  {
    auto shard_of = af::cast(idx, af::i32);
    auto rows = af::dynamic_partition(af::gather(w, idx), shard_of, 3);
    auto count = af::range(af::constant(g, 0), af::constant(g, 3), af::constant(g, 1));
    keep(af::dynamic_stitch(af::dynamic_partition(count, shard_of, 3), rows));
  }
  // What the plan-time fusion pass writes (graph_passes.cpp): MatMul + BiasAdd + Relu.
  raw("_FusedMatMul", {x, w, b}, {{"relu", true}});
  // And its elementwise fusion (elementwise_fusion.cpp): relu(x * 2).
  raw("_FusedElementwise", {x, af::constant(g, 2.0f)},
      {{"ops", af::AttrValue::Strings{"Mul", "Relu"}}, {"args", af::AttrValue::Ints{0, 1, 2, -1}}});

  // Losses and metrics.
  auto dense = keep(af::bias_add(af::matmul(x, w), b, "dense"));
  keep(af::l2_loss(w, "l2"));
  keep(af::softmax_cross_entropy_with_logits(dense, af::softmax(dense), "xent"));
  keep(af::sparse_softmax_cross_entropy(dense, af::constant(g, std::vector<int64_t>{2, 0}, {2}), "sxent"));
  keep(af::sigmoid_cross_entropy_with_logits(x, af::sigmoid(x), "sig_xent"));
  keep(af::gradients({dense}, {b})[0]);  // BiasAddGrad
  keep(af::auc(af::greater(x, af::constant(g, 0.0f)), af::sigmoid(x), 10, "auc").update);  // AucAccumulate

  // Summary ops: serialized Summaries are deterministic (no wall time); merge_all reads
  // the "summaries" collection.
  {
    af::NameScope s(g, "summaries");
    af::summary::scalar("total", af::reduce_sum(x));
    af::summary::histogram("x", x);
    keep(af::summary::merge_all(g));
  }

  // Convolution, pooling, batch normalization and dropout, with their gradient ops.
  {
    af::NameScope s(g, "conv");
    auto img = af::placeholder(g, af::f32, {-1, 6, 6, 2}, "img");
    af::Tensor iv(af::f32, {2, 6, 6, 2});
    for (int64_t i = 0; i < iv.num_elements(); ++i) iv.data<float>()[i] = static_cast<float>((i * 37) % 11) / 10.0f - 0.5f;
    m.feeds.push_back({img, iv});
    auto filter = af::constant(g, af::Tensor::filled(af::f32, {3, 3, 2, 4}, 0.1), "filter");
    auto c = af::conv2d(img, filter, {1, 1}, "SAME");
    auto mp = af::max_pool2d(c, {2, 2}, {2, 2}, "VALID");
    auto ap = af::avg_pool2d(c, {2, 2}, {2, 2}, "SAME");
    auto bn = af::batch_norm(mp + ap, true);
    auto dr = af::dropout(bn, 0.5, true, 3);
    auto loss = af::reduce_sum(dr * dr);
    keep(loss);
    auto grads = af::gradients({loss}, {img});  // Conv2DBackpropInput, MaxPoolGrad, AvgPoolGrad, FusedBatchNormGrad
    keep(grads[0]);
    auto filter_grad = af::gradients({af::reduce_sum(af::conv2d(img, filter, {2, 2}, "VALID"))}, {filter});
    keep(filter_grad[0]);  // Conv2DBackpropFilter
    auto pooled = af::max_pool2d(c, {2, 2}, {2, 2}, "VALID");
    auto upstream = af::identity(pooled * 2.0, "upstream");
    auto mp_grad = af::gradients({pooled}, {c}, {upstream})[0];
    keep(af::gradients({af::reduce_sum(mp_grad * mp_grad)}, {upstream})[0]);  // MaxPoolGradGrad
    // What the plan-time fusion pass writes for Conv2D + BiasAdd + Relu.
    raw("_FusedConv2D", {img, filter, af::constant(g, af::Tensor::filled(af::f32, {4}, 0.1), "bias")},
        {{"padding", std::string("SAME")}, {"relu", true}});
    // And for a max-pooled Relu's gradient.
    raw("_FusedMaxPoolGrad", {c, pooled, upstream},
        {{"ksize", af::AttrValue::Ints{2, 2}}, {"strides", af::AttrValue::Ints{2, 2}}, {"padding", std::string("VALID")}});
  }

  // Optimizer updates, dense and sparse, on model/rn with model/ru and model/tn as slots.
  {
    auto f = [&](double v) { return af::constant(g, static_cast<float>(v), "hyper"); };
    auto grad = af::fill(g, {5}, 0.1, af::f32, "apply_grad");
    auto rows = af::fill(g, {2}, 0.1, af::f32, "apply_rows");
    auto ix = af::constant(g, std::vector<int64_t>{0, 3}, {2}, "apply_ix");
    auto apply = [&](const std::string& op, std::vector<af::Output> hyper, int grad_at, std::vector<std::string> slots,
                     std::map<std::string, af::AttrValue> extra = {}) {
      for (bool sparse : {false, true}) {
        af::NodeSpec spec;
        spec.op = sparse ? "Sparse" + op : op;
        spec.inputs = hyper;
        if (sparse) spec.inputs.insert(spec.inputs.begin() + grad_at, {rows, ix});
        else spec.inputs.insert(spec.inputs.begin() + grad_at, grad);
        spec.attrs = extra;
        spec.attrs["variable"] = std::string("model/rn");
        const char* slot_vars[] = {"model/ru", "model/tn"};
        for (size_t i = 0; i < slots.size(); ++i) spec.attrs[slots[i]] = std::string(slot_vars[i]);
        auto r = g.add_node(std::move(spec));
        REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      }
    };
    apply("ApplyGradientDescent", {f(0.1)}, 1, {});
    apply("ApplyMomentum", {f(0.1), f(0.9)}, 1, {"accum"}, {{"use_nesterov", true}});
    apply("ApplyAdagrad", {f(0.1)}, 1, {"accum"});
    apply("ApplyAdadelta", {f(1), f(0.95), f(1e-6)}, 3, {"accum", "accum_update"});
    apply("ApplyRMSProp", {f(0.01), f(0.9), f(0.5), f(1e-10)}, 4, {"ms", "mom"});
    apply("ApplyAdam", {f(0.9), f(0.999), f(0.1), f(0.9), f(0.999), f(1e-8)}, 6, {"m", "v"}, {{"use_nesterov", true}});
    apply("ApplyFtrl", {f(0.1), f(0.01), f(0.02), f(-0.5)}, 0, {"accum", "linear"});
  }

  // Distributed training's coordination ops (distributed.h), in the GraphDef only: their
  // kernels wait for other workers, so they are not fetched.
  {
    af::train::WorkerTable table;
    table.device = "";
    table.num_workers = 2;
    auto clock = af::constant(g, int64_t{1}, "clock");
    af::train::worker_clock(g, table, 0, clock, 1, 10);
    af::train::worker_done(g, table, 1);
    af::train::wait_workers_done(g, table, 10);
    af::train::worker_clock_log(g, table);
    af::optim::GradientDescent sgd(0.1);
    af::train::SyncReplicasOptions so;
    so.timeout_ms = 10;
    af::Output sync_loss = af::mean(af::matmul(x, w));
    af::train::sync_replicas_minimize(sgd, sync_loss, af::train::global_step(g), 0, so, {w});
    // A gather's gradient stays sparse: summed by row, then the sparse accumulator ops.
    af::Output sparse_loss = af::mean(af::gather(w, idx));
    af::train::sync_replicas_minimize(sgd, sparse_loss, af::train::global_step(g), 0, so, {w});
    // All-reduce training: a bucket's CollectiveAllReduce and the initial broadcast.
    af::train::allreduce_minimize(sgd, sync_loss, af::train::global_step(g), {}, {w});
    af::train::broadcast_variables(g, {w});
  }

  // State updates, grouping and control dependencies.
  af::Operation init = af::global_variables_initializer(g);
  auto set = af::assign(w, af::fill(g, {4, 3}, 0.25, af::f32));
  auto inc = af::assign_add(counter, af::constant(g, int64_t{1}));
  auto dec = af::assign_sub(b, af::constant(g, std::vector<float>{1, 1, 1}, {3}));
  af::Operation updates = af::group(g, {set, inc, dec}, "updates");
  {
    af::ControlDependencies deps(g, {updates, init});
    af::identity(y, "after_updates");
    af::no_op(g, "barrier");
  }
  af::no_op(g);
  return m;
}

}  // namespace aft
