// Wide & deep on the breast-cancer data: a wide linear part over bucketized and crossed
// sparse features (trained with FTRL) plus a deep part over embeddings of the buckets and
// the dense features (trained with --optimizer, Adagrad by default), joined into one
// logistic output.
//   wide_and_deep --epoch_number 20
// With --hash_bucket_size H the sparse ids are hashed into tables of H rows (the wide
// weights and 16-wide embeddings of every id, as TF's categorical_column_with_hash_bucket
// and embedding_column), split over the ps tasks: a step reads and updates only the rows
// its batch touches, so the wire carries those rows, not the tables.
// Bucket boundaries are training-set quantiles of the raw features; bucketizing, crossing
// and the deep part's standardization run in the graph, so the export takes raw features.
#include <actorflow/actorflow.h>

#include <algorithm>
#include <iostream>

#include "kit/cluster.h"
#include "kit/device.h"
#include "kit/models.h"
#include "kit/trainer.h"

namespace af = actorflow;
namespace L = actorflow::layers;

namespace {

constexpr int kBoundaries = 8;  // -> 9 buckets per feature
constexpr int kBuckets = kBoundaries + 1;
constexpr int64_t kHashedEmbeddingWidth = 16;
// Multiplicative hashing (Knuth): odd and prime to 10, so ids below a power-of-ten table
// size land on distinct rows; the ids here stay far below 2^32, so the product fits int64.
constexpr int64_t kHashMultiplier = 2654435761;

// Per feature, kBoundaries training-set quantiles: f32 [F, kBoundaries].
af::Tensor quantile_boundaries(const af::Tensor& x) {
  int64_t n = x.dim(0), f = x.dim(1);
  af::Tensor b(af::f32, {f, kBoundaries});
  std::vector<float> col(static_cast<size_t>(n));
  for (int64_t c = 0; c < f; ++c) {
    for (int64_t i = 0; i < n; ++i) col[static_cast<size_t>(i)] = x.data<float>()[i * f + c];
    std::sort(col.begin(), col.end());
    for (int k = 0; k < kBoundaries; ++k)
      b.data<float>()[c * kBoundaries + k] = col[static_cast<size_t>((k + 1) * n / kBuckets)];
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  kit::Flags defaults = kit::sample_defaults("wide_and_deep");
  defaults.model = "wide_deep";
  // --optimizer trains the deep part (Adagrad by default, as TF's DNNLinearCombined
  // estimators); the wide part's sparse weights always use FTRL.
  defaults.optimizer = "adagrad";
  defaults.learning_rate = 0.05;
  defaults.batch_size = 32;
  defaults.epoch_number = 20;
  defaults.steps_to_validate = 50;
  defaults.model_network = "64 32";
  defaults.data_dir = kit::kBreastCancerCsv;
  kit::FlagSpec spec{"wide_and_deep", {"wide_deep"}};
  spec.hash_buckets = true;
  kit::Flags f = kit::parse_flags(argc, argv, spec, defaults);
  kit::per_model_paths(f, defaults);
  // An epoch is 15 steps here, and a checkpoint of the hashed tables some 200 MB: unless
  // asked otherwise, a distributed chief checkpoints every 1,000 global steps (and every
  // --save_checkpoint_secs), not every epoch.
  if (f.hash_bucket_size > 0 && !f.given.count("--save_checkpoint_steps")) f.save_checkpoint_steps = 1000;
  // A ps task serves its share of the variables here and exits when training is over.
  auto task = kit::start_task(f, "wide_and_deep");

  auto data = kit::load_breast_cancer(f.data_dir, static_cast<uint64_t>(f.seed));
  if (!data.ok()) {
    std::cerr << data.status().to_string() << "\n";
    return 1;
  }
  int64_t nf = data->x_train.dim(1);
  af::Graph g;
  auto placement = task->place(g);  // variables on the ps tasks when distributed
  auto on_device = kit::device_scope(g, f, task->distributed);  // --device gpu: the model on /gpu:0
  g.set_seed(f.seed);
  kit::Model m;
  m.x = af::placeholder(g, af::f32, {-1, nf}, "x");
  m.y = af::placeholder(g, af::i64, {-1}, "y");
  m.training = af::placeholder_with_default(af::constant(g, af::Tensor::scalar(false)), af::Shape{}, "training");

  // Bucketize: id = number of boundaries below x, offset per feature -> [N, F] in [0, F*B).
  af::Output ids, crossed;
  {
    af::NameScope s(g, "features");
    auto bounds = af::constant(g, quantile_boundaries(data->x_train), "boundaries");
    auto above = af::cast(af::greater(af::expand_dims(m.x, 2), bounds), af::i64);  // [N, F, B]
    auto bucket = af::reduce_sum(above, {2});                                      // [N, F]
    std::vector<int64_t> offsets(static_cast<size_t>(nf));
    for (int64_t c = 0; c < nf; ++c) offsets[static_cast<size_t>(c)] = c * kBuckets;
    ids = bucket + af::constant(g, offsets, af::Shape{nf}, "offsets");
    // Crosses of neighbouring features (0x1, 2x3, ...): bucket_i * B + bucket_j, offset per pair.
    auto pairs = nf / 2;
    auto even = af::slice(bucket, {0, 0}, {-1, pairs * 2});
    auto grid = af::reshape(even, {-1, pairs, 2});
    auto parts = af::split(grid, 2, 2);
    auto cross = af::reshape(parts[0] * af::constant(g, int64_t{kBuckets}) + parts[1], {-1, pairs});
    std::vector<int64_t> cross_offsets(static_cast<size_t>(pairs));
    for (int64_t p = 0; p < pairs; ++p) cross_offsets[static_cast<size_t>(p)] = nf * kBuckets + p * kBuckets * kBuckets;
    crossed = cross + af::constant(g, cross_offsets, af::Shape{pairs}, "cross_offsets");
  }
  int64_t wide_size = nf * kBuckets + (nf / 2) * kBuckets * kBuckets;
  const int64_t hashed = f.hash_bucket_size;
  // Each hashed table in one shard per ps task (TF's fixed_size_partitioner(num_ps)).
  const int64_t shards = std::max<int64_t>(1, static_cast<int64_t>(task->num_ps()));
  auto hash = [&](const af::Output& raw) {
    af::Output h = raw * af::constant(g, kHashMultiplier, "hash_multiplier");
    af::Output size = af::constant(g, hashed, "hash_bucket_size");
    return h - (h / size) * size;  // non-negative: floor mod
  };
  auto all_ids = af::concat({ids, crossed}, 1);  // [N, F + F/2]
  af::Output hashed_ids = hashed > 0 ? hash(all_ids) : af::Output();

  // Wide: one weight per sparse id, summed.
  af::Output wide_logit, wide_b;
  std::vector<af::Output> wide_vars;
  {
    af::VariableScope s(g, "wide");
    af::Output w;                                  // [N, F + F/2, 1]
    if (hashed > 0) {
      auto table = af::get_variable(g, "weights", {hashed, 1}, af::zeros_initializer(), af::fixed_size_partitioner(shards));
      w = af::embedding_lookup(table, hashed_ids, "mod");
      wide_vars = table.parts();
    } else {
      auto wide_w = af::variable(g, af::zeros(g, {wide_size, 1}), "weights");
      w = af::embedding_lookup(wide_w, all_ids);
      wide_vars = {wide_w};
    }
    wide_b = af::variable(g, af::zeros(g, {1}), "bias");
    wide_vars.push_back(wide_b);
    wide_logit = af::reshape(af::reduce_sum(w, {1, 2}), {-1}) + wide_b;  // [N]
  }
  // Deep: embeddings of the buckets (hashed: of every sparse id) plus the dense features
  // through an MLP.
  af::Output deep_logit;
  std::vector<af::Output> deep_vars;
  {
    af::VariableScope s(g, "deep");  // names the layers' variables "deep/..." too
    af::Output e;
    if (hashed > 0) {
      auto table = af::get_variable(g, "embeddings", {hashed, kHashedEmbeddingWidth},
                                    af::truncated_normal_initializer(0, 0.1, f.seed), af::fixed_size_partitioner(shards));
      const int64_t width = (nf + nf / 2) * kHashedEmbeddingWidth;
      e = af::reshape(af::embedding_lookup(table, hashed_ids, "mod"), {-1, width});
    } else {
      auto emb = af::variable(g, af::truncated_normal(g, {nf * kBuckets, 4}, 0, 0.1, f.seed), "embeddings");
      e = af::reshape(af::embedding_lookup(emb, ids), {-1, nf * 4});
    }
    af::Output h = af::concat({e, kit::standardize(m.x, data->standardization)}, 1);
    h = kit::mlp_layers(h, f, m.training);
    deep_logit = af::reshape(L::dense(h, 1, {}, "out"), {-1});
  }
  auto logit = wide_logit + deep_logit;
  auto labels = af::cast(m.y, af::f32);
  m.loss = af::mean(af::sigmoid_cross_entropy_with_logits(logit, labels));
  auto predicted = af::cast(af::greater(logit, af::scalar_like(g, af::f32, 0.0)), af::f32);
  m.accuracy = af::mean(af::cast(af::equal(predicted, labels), af::f32));
  m.prediction = af::sigmoid(logit, "probability");

  for (int id : g.collection("trainable_variables")) {
    af::Output v(&g, id, 0);
    if (v.node().name.rfind("deep/", 0) == 0) deep_vars.push_back(v);
  }
  auto step = af::train::global_step(g);
  int64_t steps_per_epoch = (data->x_train.dim(0) + f.batch_size - 1) / f.batch_size;
  af::optim::Ftrl ftrl(f.learning_rate, 0.001, 0.001);
  auto deep_optimizer = kit::make_optimizer(f, g, step, steps_per_epoch);
  // The loop builds the update (async or sync); the deep part's advances the global step.
  m.optimizers = {{&ftrl, wide_vars}, {deep_optimizer.get(), deep_vars}};
  return kit::run_main(f, g, m, *data, "wide_and_deep", nullptr, task.get());
}
