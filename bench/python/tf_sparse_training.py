"""TensorFlow's own parameter-server training of the hashed wide & deep model, the peer of
the `sparse_training` case.

    tf_sparse_training.py [--ps 2] [--workers 2] [--steps 400] [--warmup 50] [--threads 2]
                          [--batch 32] [--hash_bucket_size 1000000]

The model of `samples/wide_and_deep --hash_bucket_size H` on the breast-cancer data, op for
op: each of the 30 features bucketized at 8 training-set quantiles (9 buckets), 15 crosses
of neighbouring buckets, the 45 ids hashed into H rows (id * 2654435761 mod H); a wide part
(weights [H, 1], FTRL 0.05, l1 = l2 = 0.001) and a deep part (embeddings [H, 16] of the
45 ids beside the standardized features, ReLU 64-32, one logit; Adagrad 0.05), one
sigmoid cross entropy. Both tables are `tf.compat.v1.get_variable(...,
partitioner=fixed_size_partitioner(num_ps))`, read with `embedding_lookup(...,
partition_strategy="mod")` under `replica_device_setter`, so their shards, their gathers
and their sparse updates live on the ps tasks, and the gradients travel as IndexedSlices.

Starts, as processes on loopback free ports, the ps tasks (`tf.compat.v1.train.Server`,
`join()`) and the workers; each worker trains in a `MonitoredTrainingSession` (worker 0 is
the chief), asynchronously, on its shard of the training set, batches fed with feed_dict.
Each runs --warmup steps, waits for all (a barrier through this script), then times
--steps steps. The result, one JSON line: the total examples per second over the span of
the timed steps, and the chief's socket bytes per step: what its TCP sockets had
acknowledged and received during its timed steps (ss -ti, the kernel's counters), its
connections to its own in-process server left out (both ends are in the process).
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_dist_training import run_cluster, summary  # noqa: E402

CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv"
BOUNDARIES = 8
BUCKETS = BOUNDARIES + 1
WIDTH = 16
MULTIPLIER = 2654435761


def load(path):
    import numpy as np
    with open(path) as f:
        rows = list(csv.reader(f))[1:]
    data = np.array([[float(v) for v in r] for r in rows], dtype=np.float32)
    x, y = data[:, :-1], data[:, -1].astype(np.int64)
    rng = np.random.RandomState(1)
    order = rng.permutation(len(x))
    n_train = len(x) - int(round(len(x) * 0.2))
    return x[order[:n_train]], y[order[:n_train]]


def socket_bytes(pid):
    """Acked + received bytes over this process's TCP sockets, self-connections left out."""
    out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True, timeout=30).stdout
    socks, cur = [], None
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            f = line.split()
            cur = None
            if len(f) >= 5 and ("pid=%d," % pid) in line:
                cur = {"local": f[3], "peer": f[4], "acked": 0, "received": 0}
                socks.append(cur)
        elif cur is not None:
            a = re.search(r"bytes_acked:(\d+)", line)
            r = re.search(r"bytes_received:(\d+)", line)
            cur["acked"] = int(a.group(1)) if a else 0
            cur["received"] = int(r.group(1)) if r else 0
    ends = {(s["local"], s["peer"]) for s in socks}
    total = 0
    for s in socks:
        if (s["peer"], s["local"]) in ends:
            continue
        total += s["acked"] + s["received"]
    return total


def task(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    ps_hosts = args.ps_hosts.split(",")
    cluster = tf1.train.ClusterSpec({"ps": ps_hosts, "worker": args.worker_hosts.split(",")})
    config = tf1.ConfigProto(intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=args.threads)
    if args.job_name == "ps":
        server = tf1.train.Server(cluster, job_name="ps", task_index=args.task_index, config=config)
        print("ps %d ready" % args.task_index, file=sys.stderr, flush=True)
        server.join()
        return 0

    i, n = args.task_index, len(args.worker_hosts.split(","))
    config.device_filters.extend(["/job:ps", "/job:worker/task:%d" % i])
    server = tf1.train.Server(cluster, job_name="worker", task_index=i, config=config)
    x_train, y_train = load(args.data)
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    nf = x_train.shape[1]
    bounds = np.stack([np.sort(x_train[:, c])[[(k + 1) * len(x_train) // BUCKETS for k in range(BOUNDARIES)]]
                       for c in range(nf)]).astype(np.float32)
    x_shard, y_shard = x_train[i::n], y_train[i::n]
    H = args.hash_bucket_size
    shards = len(ps_hosts)
    with tf1.device(tf1.train.replica_device_setter(worker_device="/job:worker/task:%d" % i, cluster=cluster)):
        x = tf1.placeholder(tf.float32, [None, nf], name="x")
        y = tf1.placeholder(tf.int64, [None], name="y")
        above = tf.cast(tf.expand_dims(x, 2) > tf.constant(bounds), tf.int64)
        bucket = tf.reduce_sum(above, 2)
        ids = bucket + tf.constant([c * BUCKETS for c in range(nf)], tf.int64)
        pairs = nf // 2
        grid = tf.reshape(bucket[:, :pairs * 2], [-1, pairs, 2])
        cross = grid[:, :, 0] * BUCKETS + grid[:, :, 1] + tf.constant(
            [nf * BUCKETS + p * BUCKETS * BUCKETS for p in range(pairs)], tf.int64)
        all_ids = tf.concat([ids, cross], 1)
        hashed = tf.math.floormod(all_ids * MULTIPLIER, H)
        partitioner = tf1.fixed_size_partitioner(shards)
        with tf1.variable_scope("wide"):
            table = tf1.get_variable("weights", [H, 1], initializer=tf1.zeros_initializer(), partitioner=partitioner)
            bias = tf1.get_variable("bias", [1], initializer=tf1.zeros_initializer())
            w = tf1.nn.embedding_lookup(table, hashed, partition_strategy="mod")
            wide_logit = tf.reshape(tf.reduce_sum(w, [1, 2]), [-1]) + bias
        with tf1.variable_scope("deep"):
            emb = tf1.get_variable("embeddings", [H, WIDTH], initializer=tf1.truncated_normal_initializer(0, 0.1),
                                   partitioner=partitioner)
            e = tf.reshape(tf1.nn.embedding_lookup(emb, hashed, partition_strategy="mod"), [-1, (nf + pairs) * WIDTH])
            h = tf.concat([e, (x - mean) / std], 1)

            def dense(h, width, name, relu=True):
                with tf1.variable_scope(name):
                    k = tf1.get_variable("kernel", [h.shape[1], width], initializer=tf1.glorot_uniform_initializer())
                    b = tf1.get_variable("bias", [width], initializer=tf1.zeros_initializer())
                    h = tf.nn.bias_add(tf.matmul(h, k), b)
                return tf.nn.relu(h) if relu else h

            h = dense(h, 64, "dense1")
            h = dense(h, 32, "dense2")
            deep_logit = tf.reshape(dense(h, 1, "out", relu=False), [-1])
        logit = wide_logit + deep_logit
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(y, tf.float32), logits=logit))
        global_step = tf1.train.get_or_create_global_step()
        wide_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope="wide")
        deep_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, scope="deep")
        train_op = tf.group(
            tf1.train.FtrlOptimizer(0.05, l1_regularization_strength=0.001,
                                    l2_regularization_strength=0.001).minimize(loss, var_list=wide_vars),
            tf1.train.AdagradOptimizer(0.05).minimize(loss, var_list=deep_vars, global_step=global_step))
    b = args.batch
    per_epoch = max(1, len(x_shard) // b)
    total = args.warmup + args.steps
    losses = []
    with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=(i == 0), config=config,
                                            save_checkpoint_secs=None, save_summaries_steps=None,
                                            save_summaries_secs=None, log_step_count_steps=0) as sess:
        t0, bytes0 = None, 0
        for s in range(total):
            if s == args.warmup:
                print("READY", flush=True)
                if sys.stdin.readline().strip() != "GO":
                    raise RuntimeError("the launcher did not say GO")
                bytes0 = socket_bytes(os.getpid())
                t0 = time.time()
            k = (s % per_epoch) * b
            _, l = sess.run([train_op, loss], feed_dict={x: x_shard[k:k + b], y: y_shard[k:k + b]})
            losses.append(float(l))
        t1 = time.time()
        bytes1 = socket_bytes(os.getpid())
        gstep = int(sess.run(global_step))
    ok = all(l == l and abs(l) < 1e30 for l in losses[-10:])
    print(json.dumps({"worker": i, "start": t0, "end": t1, "steps": args.steps, "examples": args.steps * b,
                      "examples_per_second": args.steps * b / (t1 - t0), "first_loss": losses[0],
                      "last_loss": losses[-1], "global_step": gstep, "finite": ok,
                      "socket_bytes_per_step": (bytes1 - bytes0) / args.steps}), flush=True)
    return 0


def launch(args):
    try:
        reports = run_cluster(os.path.abspath(__file__), args.ps, args.workers,
                              ["--threads", str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup),
                               "--batch", str(args.batch), "--hash_bucket_size", str(args.hash_bucket_size),
                               "--data", args.data], args.timeout)
        print(json.dumps(summary(reports, socket_bytes_per_step=reports[0]["socket_bytes_per_step"])), flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 - reported as the script's answer
        print(json.dumps({"ok": False, "error": str(e)}), flush=True)
        return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=400, help="timed steps per worker")
    ap.add_argument("--warmup", type=int, default=50, help="untimed steps per worker first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hash_bucket_size", type=int, default=1000000)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--data", default=CSV)
    ap.add_argument("--ps_hosts", default="")
    ap.add_argument("--worker_hosts", default="")
    ap.add_argument("--job_name", default="")
    ap.add_argument("--task_index", type=int, default=0)
    args = ap.parse_args()
    if args.job_name:
        return task(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
