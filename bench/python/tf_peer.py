"""TensorFlow (CPU, tf.function = graph mode) peer for bench/python/driver.py.

Grappler's rewrites are off: it would fold the 1,000 chained adds into one AddN, so
TensorFlow would not run the graph ours runs. Every case is one tf.function called with
tensors, TensorFlow's analogue of Session::run with feeds.
"""
import os
import sys

import peer_common
from peer_common import check, clock

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
tf.config.set_visible_devices([], "GPU")


def scalar_chain(p):
    n, reps = p["n"], p["reps"]

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float32)])
    def chain(x, one):
        y = x
        for _ in range(n):
            y = y + one
        return y

    x, one = tf.constant(0.0), tf.constant(1.0)
    chain(x, one)  # traces

    def sample():
        total = 0.0
        for _ in range(reps):
            t0 = clock()
            y = chain(x, one)
            total += clock() - t0
            check(float(y.numpy()) == n, "scalar chain")
        return total * 1e6 / (n * reps)
    return sample, "tf.function of %d chained adds" % n


def one_op(p):
    reps = p["reps"]
    f = tf.function(lambda x: tf.identity(x), input_signature=[tf.TensorSpec([], tf.float32)])
    x = tf.constant(1.0)
    f(x)

    def sample():
        t0 = clock()
        for _ in range(reps):
            y = f(x)
        s = clock() - t0
        check(float(y.numpy()) == 1.0, "identity")
        return s * 1e6 / reps
    return sample, "tf.function(tf.identity) on a scalar"


def matmul(p):
    n, reps = p["n"], p["reps"]
    spec = tf.TensorSpec([n, n], tf.float32)
    f = tf.function(lambda a, b: tf.linalg.matmul(a, b), input_signature=[spec, spec])
    a = tf.fill([n, n], 1.0 / n)
    b = tf.ones([n, n], tf.float32)
    f(a, b)

    def sample():
        t0 = clock()
        for _ in range(reps):
            c = f(a, b)
        s = clock() - t0
        check(abs(float(c[0, 0].numpy()) - 1.0) < 1e-3, "matmul")
        return 2.0 * n ** 3 * reps / s / 1e9
    return sample, "tf.function(tf.linalg.matmul)"


def add(p):
    e, reps = p["elements"], p["reps"]
    spec = tf.TensorSpec([e], tf.float32)
    f = tf.function(lambda a, b: a + b, input_signature=[spec, spec])
    a = tf.fill([e], 1.0)
    b = tf.fill([e], 2.0)
    f(a, b)

    def sample():
        t0 = clock()
        for _ in range(reps):
            c = f(a, b)
        s = clock() - t0
        check(float(c[e - 1].numpy()) == 3.0, "add")
        return 12.0 * e * reps / s / 1e9
    return sample, "tf.function(a + b)"


def reduce_sum(p):
    e, reps = p["elements"], p["reps"]
    f = tf.function(lambda a: tf.reduce_sum(a), input_signature=[tf.TensorSpec([e], tf.float32)])
    a = tf.fill([e], 1.0)
    f(a)

    def sample():
        t0 = clock()
        for _ in range(reps):
            c = f(a)
        s = clock() - t0
        check(abs(float(c.numpy()) - e) < 1e-3 * e, "sum")
        return 4.0 * e * reps / s / 1e9
    return sample, "tf.function(tf.reduce_sum)"


if __name__ == "__main__":
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)")
    threads = "TensorFlow %s, intra_op=%d inter_op=%d, grappler off, TF_ENABLE_ONEDNN_OPTS=%s" % (
        tf.__version__, tf.config.threading.get_intra_op_parallelism_threads(),
        tf.config.threading.get_inter_op_parallelism_threads(), onednn)
    peer_common.serve("tensorflow", tf.__version__, threads, {
        "scalar_chain": scalar_chain, "one_op": one_op, "matmul": matmul, "add": add, "sum": reduce_sum})
