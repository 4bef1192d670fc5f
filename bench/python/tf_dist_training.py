"""TensorFlow's own parameter-server training, the peer of the `dist_training` case.

    tf_dist_training.py [--workers 2] [--steps 400] [--warmup 50] [--threads 2]
                        [--batch 64] [--data_dir /usr/share/datasets/fashion-mnist]

Starts, as separate processes on loopback free ports, 1 ps (`tf.compat.v1.train.Server`,
then `server.join()`) and the workers. Each worker builds the Fashion-MNIST MLP of
`samples/fashion_mnist --model mlp` (784-256-128-10, ReLU, sparse softmax cross entropy,
Adam 1e-3, batch 64) under `tf.compat.v1.train.replica_device_setter`, so the variables
and Adam's slots live on the ps and the apply ops run there, and trains in a
`MonitoredTrainingSession` (worker 0 is the chief and initializes; the others wait for
it), asynchronously (each worker's update applied as it arrives), on its own shard of the
training set (worker i of n takes every n-th example), feeding batches with feed_dict and
fetching the loss every step, as TF1 programs do. Each worker runs --warmup steps, waits until
every worker has (a barrier through this script: a non-chief worker starts only once it
sees the chief's initialization, which MonitoredTrainingSession polls for every 30 s), then
times --steps steps. The result, one JSON line on stdout, is the total examples per second:
all workers' timed examples over the span from the first timed step's start to the last
one's end (wall clock of the same machine), plus each worker's own rate.

Every process gets intra-op and inter-op --threads threads. The ps never exits by itself
(TensorFlow's ps processes do not); this script kills it, and every worker left, at the end
(also on error or Ctrl-C), and each child dies with the script (PR_SET_PDEATHSIG).
"""
import argparse
import ctypes
import gzip
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def die_with_parent():
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def load_fashion_mnist(data_dir):
    import numpy as np

    def idx(name):
        with gzip.open(os.path.join(data_dir, name), "rb") as f:
            raw = f.read()
        ndim = raw[3]
        dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
        return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)

    x = idx("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0
    y = idx("train-labels-idx1-ubyte.gz").astype(np.int64)
    return x, y


def task(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    cluster = tf1.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")})
    config = tf1.ConfigProto(intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=args.threads)
    if args.job_name == "ps":
        server = tf1.train.Server(cluster, job_name="ps", task_index=args.task_index, config=config)
        print("ps %d ready" % args.task_index, file=sys.stderr, flush=True)
        server.join()
        return 0

    i, n = args.task_index, len(args.worker_hosts.split(","))
    config.device_filters.extend(["/job:ps", "/job:worker/task:%d" % i])
    server = tf1.train.Server(cluster, job_name="worker", task_index=i, config=config)
    x_all, y_all = load_fashion_mnist(args.data_dir)
    x_shard, y_shard = x_all[i::n], y_all[i::n]
    with tf1.device(tf1.train.replica_device_setter(worker_device="/job:worker/task:%d" % i, cluster=cluster)):
        x = tf1.placeholder(tf.float32, [None, 784], name="x")
        y = tf1.placeholder(tf.int64, [None], name="y")
        def dense(h, width, name, relu=True):
            # tf.compat.v1.layers.dense is gone with Keras 3: the same variables by hand.
            with tf1.variable_scope(name):
                w = tf1.get_variable("kernel", [h.shape[1], width], initializer=tf1.glorot_uniform_initializer())
                bias = tf1.get_variable("bias", [width], initializer=tf1.zeros_initializer())
                h = tf.nn.bias_add(tf.matmul(h, w), bias)
            return tf.nn.relu(h) if relu else h

        h = dense(x, 256, "dense1")
        h = dense(h, 128, "dense2")
        logits = dense(h, 10, "logits", relu=False)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        global_step = tf1.train.get_or_create_global_step()
        train_op = tf1.train.AdamOptimizer(1e-3).minimize(loss, global_step=global_step)
    b = args.batch
    per_epoch = len(x_shard) // b
    total = args.warmup + args.steps
    losses = []
    with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=(i == 0), config=config,
                                            save_checkpoint_secs=None, save_summaries_steps=None,
                                            save_summaries_secs=None, log_step_count_steps=0) as sess:
        t0 = None
        for s in range(total):
            if s == args.warmup:
                # The timed steps start together: a non-chief worker joins only when the
                # chief's initialization is seen (MonitoredTrainingSession polls every 30 s),
                # so the launcher holds every worker here until all are warm (stdin "GO").
                print("READY", flush=True)
                if sys.stdin.readline().strip() != "GO":
                    raise RuntimeError("the launcher did not say GO")
                t0 = time.time()
            k = (s % per_epoch) * b
            _, l = sess.run([train_op, loss], feed_dict={x: x_shard[k:k + b], y: y_shard[k:k + b]})
            losses.append(float(l))
        t1 = time.time()
        gstep = int(sess.run(global_step))
    ok = all(l == l and abs(l) < 1e30 for l in losses[-10:])
    print(json.dumps({"worker": i, "start": t0, "end": t1, "steps": args.steps, "examples": args.steps * b,
                      "examples_per_second": args.steps * b / (t1 - t0), "first_loss": losses[0],
                      "last_loss": losses[-1], "global_step": gstep, "finite": ok}), flush=True)
    return 0


def run_cluster(script, n_ps, n_workers, extra, timeout):
    """Starts `script` as n_ps ps tasks and n_workers workers on loopback free ports (each
    with --ps_hosts/--worker_hosts/--job_name/--task_index and `extra`), holds the workers
    at a barrier until all print READY, says GO, and returns each worker's last JSON line.
    Raises RuntimeError naming the worker that failed; every process is killed on the way
    out."""
    ports = free_ports(n_ps + n_workers)
    ps_hosts = ",".join("127.0.0.1:%d" % p for p in ports[:n_ps])
    worker_hosts = ",".join("127.0.0.1:%d" % p for p in ports[n_ps:])
    common = [sys.executable, script, "--ps_hosts", ps_hosts, "--worker_hosts", worker_hosts] + extra
    procs = []
    try:
        for k in range(n_ps):
            procs.append(subprocess.Popen(common + ["--job_name", "ps", "--task_index", str(k)],
                                          stdout=subprocess.DEVNULL, preexec_fn=die_with_parent))
        workers = []
        for i in range(n_workers):
            p = subprocess.Popen(common + ["--job_name", "worker", "--task_index", str(i)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 preexec_fn=die_with_parent)
            procs.append(p)
            workers.append(p)
        deadline = time.monotonic() + timeout
        # A barrier: every worker warm, then all start their timed steps at once.
        for i, p in enumerate(workers):
            while True:
                r, _, _ = select.select([p.stdout], [], [], max(0.1, deadline - time.monotonic()))
                if not r:
                    raise RuntimeError("worker %d was not ready within %d s" % (i, timeout))
                line = p.stdout.readline()
                if not line:
                    raise RuntimeError("worker %d exited before its timed steps (exit %s)" % (i, p.wait()))
                if line.strip() == "READY":
                    break
        for p in workers:
            p.stdin.write("GO\n")
            p.stdin.flush()
        reports = []
        for i, p in enumerate(workers):
            try:
                out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError("worker %d did not finish within %d s" % (i, timeout))
            lines = [x for x in out.splitlines() if x.startswith("{")]
            if p.returncode != 0 or not lines:
                raise RuntimeError("worker %d failed (exit %s)" % (i, p.returncode))
            reports.append(json.loads(lines[-1]))
        if not all(r["finite"] for r in reports):
            raise RuntimeError("a worker's loss is not finite: %s" % reports)
        return reports
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def summary(reports, **more):
    """The JSON answer: all workers' timed examples over the span of their timed steps."""
    span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    examples = sum(r["examples"] for r in reports)
    doc = {"ok": True, "examples_per_second": examples / span, "seconds": span, "examples": examples}
    doc.update(more)
    doc.update({"workers": reports, "tensorflow": _tf_version()})
    return doc


def launch(args):
    try:
        reports = run_cluster(os.path.abspath(__file__), 1, args.workers,
                              ["--threads", str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup),
                               "--batch", str(args.batch), "--data_dir", args.data_dir], args.timeout)
        print(json.dumps(summary(reports)), flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 - reported as the script's answer
        print(json.dumps({"ok": False, "error": str(e)}), flush=True)
        return 1


def _tf_version():
    try:
        import importlib.metadata as md
        return md.version("tensorflow-cpu")
    except Exception:  # noqa: BLE001
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=400, help="timed steps per worker")
    ap.add_argument("--warmup", type=int, default=50, help="untimed steps per worker first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
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
