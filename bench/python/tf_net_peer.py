"""TensorFlow's gRPC runtime as the peer of the network cases (bench/net_bench.cpp).

Started by bench/python/driver.py in the bench venv when a network case runs. TensorFlow
runs as a TF1 user runs a cluster: `tf.distribute.Server`s as separate processes on
127.0.0.1 (free ports), a `tf.compat.v1.Session("grpc://...")` in this process, graph mode,
Grappler on.

* kind `wire_throughput`: two servers (/job:worker/task:0 and 1); an f32 resource variable
  of `bytes` on task 0, read there, and a Slice of its first element on task 1, so the
  whole tensor goes from task 0 to task 1 over gRPC each step; the session's master is task
  1, the client fetches one element. GB/s = bytes x reps / time (1e9 B/s).
* kind `remote_step_latency`: one server; x + 1 on a fed f32 scalar placed on it;
  `session.run(y, {x: 2})`; a sample is the median of `reps` runs, in us.

The servers of a case are killed when the driver releases it (the sampler is dropped),
and die with this process (PR_SET_PDEATHSIG).
"""
import ctypes
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import peer_common
from peer_common import check, clock

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()

SERVER = r"""
import json, sys
import tensorflow as tf
spec, index, threads = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads)
server = tf.distribute.Server(tf.train.ClusterSpec(spec), job_name="worker", task_index=index, config=cfg, start=True)
print("READY", flush=True)
server.join()
"""


def _die_with_parent():
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _config():
    return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=THREADS, inter_op_parallelism_threads=THREADS)


class Cluster:
    """`n` tf.distribute.Server processes of job 'worker' on loopback; killed on close/GC."""

    def __init__(self, n):
        self.procs = []
        self.session = None
        self.hosts = ["127.0.0.1:%d" % _free_port() for _ in range(n)]
        spec = json.dumps({"worker": self.hosts})
        try:
            for i in range(n):
                p = subprocess.Popen([sys.executable, "-c", SERVER, spec, str(i), str(THREADS)],
                                     stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
                                     preexec_fn=_die_with_parent)
                self.procs.append(p)
            deadline = time.time() + 120
            for p in self.procs:
                line = p.stdout.readline()  # "READY", or "" if it died
                if line.strip() != "READY" or time.time() > deadline:
                    raise RuntimeError("a tf.distribute.Server did not start (code %s)" % p.poll())
        except BaseException:
            self.close()
            raise

    def target(self, i):
        return "grpc://" + self.hosts[i]

    def close(self):
        if self.session is not None:
            try:
                self.session.close()
            except Exception:  # noqa: BLE001 - the servers go anyway
                pass
            self.session = None
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.procs = []

    def __del__(self):
        self.close()


def wire_throughput(p):
    nbytes, reps = p["bytes"], p["reps"]
    n = nbytes // 4
    c = Cluster(2)
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:0"):
            v = tf.compat.v1.Variable(tf.fill([n], 1.5), name="payload", use_resource=True)
            value = v.value()
        with tf.device("/job:worker/task:1"):
            y = tf.slice(value, [0], [1], name="take_one")
        init = tf.compat.v1.global_variables_initializer()
    c.session = tf.compat.v1.Session(c.target(1), graph=g, config=_config())
    c.session.run(init)

    def sample():
        t0 = clock()
        for _ in range(reps):
            out = c.session.run(y)
        s = clock() - t0
        check(float(out[0]) == 1.5, "payload value")
        return nbytes * reps / s / 1e9
    sample.cluster = c  # the servers live as long as the sampler
    return sample, "2 tf.distribute.Server processes on loopback (intra/inter %d), session on task 1's master, grpc" % THREADS


def remote_step_latency(p):
    reps = p["reps"]
    c = Cluster(1)
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:0"):
            x = tf.compat.v1.placeholder(tf.float32, [], name="x")
            y = x + tf.constant(1.0, name="one")
    c.session = tf.compat.v1.Session(c.target(0), graph=g, config=_config())

    def sample():
        t = []
        for _ in range(reps):
            t0 = clock()
            out = c.session.run(y, {x: 2.0})
            t.append((clock() - t0) * 1e6)
        check(float(out) == 3.0, "x + 1")
        return statistics.median(t)
    sample.cluster = c
    return sample, "1 tf.distribute.Server process on loopback, tf.compat.v1.Session('grpc://...').run(y, {x: 2}); median of %d" % reps


if __name__ == "__main__":
    threads = "TensorFlow %s gRPC runtime, intra_op=%d inter_op=%d, graph mode, grappler on" % (tf.__version__, THREADS, THREADS)
    peer_common.serve("tensorflow grpc", tf.__version__, threads, {
        "wire_throughput": wire_throughput, "remote_step_latency": remote_step_latency})
