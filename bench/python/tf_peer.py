"""TensorFlow (CPU, tf.function = graph mode) peer for bench/python/driver.py.

TensorFlow runs as users run it: Grappler on (remapper fusions, constant folding) and
oneDNN at its default, except for `executor_overhead` (kind scalar_chain), where its
arithmetic optimizer would fold the 1,000 chained adds into one AddN and TensorFlow would
not run the graph ours runs: Grappler is off while that function is traced and first
called (a function's graph is optimized once, when it is instantiated), then back on.
Every case is one tf.function called with tensors, TensorFlow's analogue of
Session::run with feeds.
"""
import math
import os
import sys

import peer_common
from peer_common import check, clock

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(THREADS)
tf.config.threading.set_inter_op_parallelism_threads(THREADS)
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
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        chain(x, one)  # traces and instantiates without Grappler
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})

    def sample():
        total = 0.0
        for _ in range(reps):
            t0 = clock()
            y = chain(x, one)
            total += clock() - t0
            check(float(y.numpy()) == n, "scalar chain")
        return total * 1e6 / (n * reps)
    return sample, "tf.function of %d chained adds, Grappler off for this function only" % n


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
    # TensorFlow has no `out=`: a tf.function returns a fresh tensor. Its CPU allocator
    # keeps freed 64 MiB blocks (no page fault per op once warm), which is the nearest
    # equivalent of the reused outputs the other peers get.
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
    return sample, "tf.function(a + b), no out= in TensorFlow (its allocator reuses the freed result)"


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


# ---- training and inference (Fashion-MNIST; the C++ side sends data_dir and batch) ----
# TF1-style: tf.Variables, a tf.function step with the gradients from a GradientTape and
# the optimizers' fused update ops (ResourceApplyGradientDescent / ResourceApplyAdam, what
# tf.compat.v1.train's optimizers run and ours mirrors).

def _glorot(shape, fan_in, fan_out):
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    return tf.Variable(tf.random.uniform(shape, -limit, limit, seed=1))


def _dense_vars(sizes):
    return [(_glorot([a, b], a, b), tf.Variable(tf.zeros([b]))) for a, b in zip(sizes, sizes[1:])]


def _mlp_logits(layers, x):
    h = x
    for i, (w, b) in enumerate(layers):
        h = tf.matmul(h, w) + b
        if i + 1 < len(layers):
            h = tf.nn.relu(h)
    return h


def _train_sampler(p, step, what):
    b = p["batch"]
    data = [(tf.constant(x), tf.constant(y)) for x, y in peer_common.batches(p)]
    steps, per = p["steps"], p["per"]
    state = {"next": 0}
    f = tf.function(step, input_signature=[tf.TensorSpec([b, 784], tf.float32), tf.TensorSpec([b], tf.int64)])
    f(*data[0])  # traces (one extra step before any timing)

    def sample():
        t0 = clock()
        for _ in range(steps):
            x, y = data[state["next"] % len(data)]
            state["next"] += 1
            last = float(f(x, y).numpy())  # fetched every step, as ours fetches it
        s = clock() - t0
        check(math.isfinite(last), what + " loss")
        return s * per / steps
    return sample


def _loss(logits, y):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def mlp_training(p):
    layers = _dense_vars([784, 256, 128, 10])
    variables = [v for wb in layers for v in wb]
    lr = tf.constant(0.1)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = _loss(_mlp_logits(layers, x), y)
        for v, g in zip(variables, tape.gradient(loss, variables)):
            tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=lr, delta=g)
        return loss
    return _train_sampler(p, step, "mlp"), "tf.function training step, ResourceApplyGradientDescent(0.1)"


def cnn_training(p):
    k1 = _glorot([5, 5, 1, 32], 25, 25 * 32)
    k2 = _glorot([5, 5, 32, 64], 25 * 32, 25 * 64)
    b1, b2 = tf.Variable(tf.zeros([32])), tf.Variable(tf.zeros([64]))
    dense = _dense_vars([7 * 7 * 64, 1024, 10])
    variables = [k1, b1, k2, b2] + [v for wb in dense for v in wb]
    slots = [(tf.Variable(tf.zeros_like(v)), tf.Variable(tf.zeros_like(v))) for v in variables]
    beta1, beta2, eps, lr = tf.constant(0.9), tf.constant(0.999), tf.constant(1e-8), tf.constant(1e-3)
    b1_power, b2_power = tf.Variable(0.9), tf.Variable(0.999)

    def step(x, y):
        with tf.GradientTape() as tape:
            h = tf.reshape(x, [-1, 28, 28, 1])
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, k1, 1, "SAME") + b1), 2, 2, "SAME")
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, k2, 1, "SAME") + b2), 2, 2, "SAME")
            h = tf.reshape(h, [-1, 7 * 7 * 64])
            h = tf.nn.dropout(tf.nn.relu(tf.matmul(h, dense[0][0]) + dense[0][1]), rate=0.5)
            loss = _loss(tf.matmul(h, dense[1][0]) + dense[1][1], y)
        for v, (m, s), g in zip(variables, slots, tape.gradient(loss, variables)):
            tf.raw_ops.ResourceApplyAdam(var=v.handle, m=m.handle, v=s.handle, beta1_power=b1_power,
                                         beta2_power=b2_power, lr=lr, beta1=beta1, beta2=beta2, epsilon=eps, grad=g)
        b1_power.assign(b1_power * beta1)
        b2_power.assign(b2_power * beta2)
        return loss
    return _train_sampler(p, step, "cnn"), "tf.function training step, NHWC, ResourceApplyAdam(1e-3)"


def mlp_inference(p):
    layers = _dense_vars([784, 256, 128, 10])
    x = tf.constant(peer_common.inference_rows(p))
    f = tf.function(lambda x: tf.argmax(_mlp_logits(layers, x), -1),
                    input_signature=[tf.TensorSpec([p["batch"], 784], tf.float32)])
    f(x)
    reps = p["reps"]

    def sample():
        t0 = clock()
        for _ in range(reps):
            pred = f(x)
        s = clock() - t0
        v = pred.numpy()
        check(v.shape == (p["batch"],) and v.min() >= 0 and v.max() < 10, "predictions")
        return s * 1e6 / reps
    return sample, "tf.function forward + argmax (its own random weights: same work)"


if __name__ == "__main__":
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)")
    threads = "TensorFlow %s, intra_op=%d inter_op=%d, grappler on (off for executor_overhead only), TF_ENABLE_ONEDNN_OPTS=%s" % (
        tf.__version__, tf.config.threading.get_intra_op_parallelism_threads(),
        tf.config.threading.get_inter_op_parallelism_threads(), onednn)
    peer_common.serve("tensorflow", tf.__version__, threads, {
        "scalar_chain": scalar_chain, "one_op": one_op, "matmul": matmul, "add": add, "sum": reduce_sum,
        "mlp_training": mlp_training, "cnn_training": cnn_training, "mlp_inference": mlp_inference})
