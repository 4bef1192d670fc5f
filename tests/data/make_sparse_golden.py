"""Writes tests/data/sparse_updates.json with TensorFlow itself: TF1's optimizers
(tf.compat.v1.train) applying sparse gradients (the gradient of a gather, IndexedSlices
with repeated ids) to a variable, plain and split in 2 shards by fixed_size_partitioner
and read with embedding_lookup "mod" and "div". test_sparse_updates.cpp builds the same
graphs with ActorFlow and asserts every value. Run once, then commit the output:

    build/bench-venv/bin/python tests/data/make_sparse_golden.py tests/data

(bench/run or scripts/python-venv makes that venv with tensorflow-cpu.)
Adam is left out: TF1's AdamOptimizer decays every row's moments on a sparse step (a
dense update), where ActorFlow's sparse Adam is lazy (touched rows only), as LazyAdam.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

ROWS, WIDTH = 7, 2
INITIAL = (np.arange(ROWS * WIDTH, dtype=np.float32).reshape(ROWS, WIDTH) - 5.0) / 10.0
# One batch of ids per step, with repeats, and a weight per id and column: the loss is
# sum(lookup(ids) * weights), so each id's gradient row is its weights.
IDS = [[0, 2, 2], [1, 2, 6], [0, 0, 5]]
WEIGHTS = [[[0.5, -1.0], [0.25, 0.75], [-0.5, 1.5]],
           [[1.0, 0.5], [-0.25, -0.5], [2.0, -1.0]],
           [[0.3, 0.1], [-0.7, 0.2], [0.4, -0.9]]]

OPTIMIZERS = {
    "sgd": lambda: tf1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda: tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "adagrad": lambda: tf1.train.AdagradOptimizer(0.1, initial_accumulator_value=0.1),
    "adadelta": lambda: tf1.train.AdadeltaOptimizer(1.0, rho=0.95, epsilon=1e-6),
    "rmsprop": lambda: tf1.train.RMSPropOptimizer(0.01, decay=0.9, momentum=0.5, epsilon=1e-10),
    "ftrl": lambda: tf1.train.FtrlOptimizer(0.1, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                                            l1_regularization_strength=0.001, l2_regularization_strength=0.001),
}


def run(name, shards, strategy):
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int64, [None])
        weights = tf1.placeholder(tf.float32, [None, WIDTH])
        if shards == 1:
            var = tf1.get_variable("table", initializer=tf.constant(INITIAL))
            rows = tf.gather(var, ids)
        else:
            # Each shard starts as its slice of INITIAL.
            def init(shape, dtype=None, partition_info=None):
                offset = partition_info.var_offset[0] if partition_info is not None else 0
                return tf.constant(INITIAL[offset:offset + shape[0]])

            var = tf1.get_variable("table", shape=[ROWS, WIDTH], initializer=init,
                                   partitioner=tf1.fixed_size_partitioner(shards))
            rows = tf1.nn.embedding_lookup(var, ids, partition_strategy=strategy)
        loss = tf.reduce_sum(rows * weights)
        train = OPTIMIZERS[name]().minimize(loss)
        values = []
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            whole = tf.convert_to_tensor(var) if shards > 1 else var
            for s in range(len(IDS)):
                sess.run(train, {ids: IDS[s], weights: WEIGHTS[s]})
                values.append(sess.run(whole).reshape(-1).tolist())
    return values


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
    tf1.disable_eager_execution()
    cases = []
    for name in OPTIMIZERS:
        for shards, strategy in [(1, "mod"), (2, "mod"), (2, "div")]:
            cases.append({"optimizer": name, "shards": shards, "partition_strategy": strategy,
                          "after_step": run(name, shards, strategy)})
    doc = {"tensorflow": tf.__version__, "rows": ROWS, "width": WIDTH, "initial": INITIAL.reshape(-1).tolist(),
           "ids": IDS, "weights": WEIGHTS, "cases": cases}
    with open(os.path.join(out_dir, "sparse_updates.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {len(cases)} cases with TensorFlow {tf.__version__}")


if __name__ == "__main__":
    main()
