"""Writes tests/data/partitioned_variables.json with TensorFlow itself: what TF1's
partitioners make of several shapes (each shard's name, shape and save_slice_info spec),
and what embedding_lookup returns over uneven shards with the "mod" and "div" strategies.
test_partitioned_variables.cpp asserts every value. Run once, then commit the output:

    build/bench-venv/bin/python tests/data/make_partition_golden.py tests/data
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

# (name, shape, dtype, partitioner kind, its arguments)
PARTITIONS = [
    ("fixed_10x4_3", [10, 4], "float32", "fixed", {"num_shards": 3, "axis": 0}),
    ("fixed_7x2_2", [7, 2], "float32", "fixed", {"num_shards": 2, "axis": 0}),
    ("fixed_5x3_8", [5, 3], "float32", "fixed", {"num_shards": 8, "axis": 0}),
    ("fixed_4x6_axis1", [4, 6], "float32", "fixed", {"num_shards": 4, "axis": 1}),
    ("minmax_1000x64", [1000, 64], "float32", "min_max", {"max_partitions": 4, "axis": 0, "min_slice_size": 64 << 10}),
    ("minmax_1000x64_many", [1000, 64], "float32", "min_max", {"max_partitions": 100, "axis": 0, "min_slice_size": 16 << 10}),
    ("minmax_small", [10, 4], "float32", "min_max", {"max_partitions": 4, "axis": 0, "min_slice_size": 256 << 10}),
    ("minmax_f64", [300, 10], "float64", "min_max", {"max_partitions": 8, "axis": 0, "min_slice_size": 4 << 10}),
]

SHARD_ROWS = [4, 3, 3]  # 10 rows of width 2, uneven as the partitioners make them
IDS = [[0, 9, 3], [5, 5, 1]]


def partitions():
    out = []
    for name, shape, dtype, kind, a in PARTITIONS:
        g = tf.Graph()
        with g.as_default():
            if kind == "fixed":
                p = tf1.fixed_size_partitioner(a["num_shards"], axis=a["axis"])
            else:
                p = tf1.min_max_variable_partitioner(a["max_partitions"], axis=a["axis"], min_slice_size=a["min_slice_size"])
            v = tf1.get_variable(name, shape=shape, dtype=dtype, initializer=tf1.zeros_initializer(), partitioner=p)
            parts = list(v._get_variable_list()) if hasattr(v, "_get_variable_list") else [v]
            out.append({"name": name, "shape": shape, "dtype": dtype, "kind": kind, "args": a,
                        "parts": [{"name": x.op.name, "shape": x.shape.as_list(), "spec": x._save_slice_info.spec}
                                  for x in parts]})
    return out


def lookups():
    out = []
    whole = np.arange(sum(SHARD_ROWS) * 2, dtype=np.float32).reshape(-1, 2)
    for strategy in ("mod", "div"):
        g = tf.Graph()
        with g.as_default():
            # Shard k holds the rows the strategy gives it, in order.
            n = len(SHARD_ROWS)
            if strategy == "div":
                starts = np.cumsum([0] + SHARD_ROWS)
                shards = [whole[starts[k]:starts[k + 1]] for k in range(n)]
            else:
                shards = [whole[k::n] for k in range(n)]
            params = [tf.constant(s) for s in shards]
            r = tf1.nn.embedding_lookup(params, tf.constant(IDS, tf.int64), partition_strategy=strategy)
            with tf1.Session(graph=g) as sess:
                out.append({"strategy": strategy, "shards": [s.reshape(-1).tolist() for s in shards],
                            "shard_rows": [len(s) for s in shards], "ids": IDS,
                            "result": sess.run(r).reshape(-1).tolist()})
    return out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
    tf1.disable_eager_execution()
    doc = {"tensorflow": tf.__version__, "partitions": partitions(), "lookups": lookups()}
    with open(os.path.join(out_dir, "partitioned_variables.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %d partitions and %d lookups with TensorFlow %s" % (len(doc["partitions"]), len(doc["lookups"]),
                                                                      tf.__version__))


if __name__ == "__main__":
    main()
