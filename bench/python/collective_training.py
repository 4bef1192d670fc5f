"""The peers of the `allreduce_training` case: synchronous data-parallel training with an
all-reduce per step, PyTorch DDP (gloo backend) or TensorFlow's MultiWorkerMirroredStrategy.

    collective_training.py --framework torch|tf [--model mlp|cnn] [--workers 2] [--steps 200]
                           [--warmup 20] [--threads 2] [--batch 64] [--compute_type float32|bfloat16]
                           [--data_dir /usr/share/datasets/fashion-mnist]

Starts the workers as separate processes on loopback free ports. Each builds the model of
`samples/fashion_mnist --model mlp` (784-256-128-10, ReLU) or `--model cnn` (conv 5x5x32,
pool, conv 5x5x64, pool, dense 1024, dropout 0.5, dense 10; SAME padding), Adam 1e-3, and
trains on its own shard of the training set (worker i of n takes every n-th example),
--batch examples per worker per step, the gradients averaged over the workers every step:

* torch: `torch.distributed.init_process_group("gloo")` (a TCP store on worker 0) and
  `DistributedDataParallel` (its default 25 MB buckets), `torch.set_num_threads(--threads)`;
* tf: `tf.distribute.MultiWorkerMirroredStrategy` (ring all-reduce) from TF_CONFIG, the
  model's variables mirrored under its scope, a `tf.function` step through
  `strategy.run` whose gradients are all-reduced in one batched collective and applied by
  Adam on each replica (what tf.keras 2's optimizers did; Keras 3's `model.fit` takes no
  tf.distribute strategy), intra/inter-op --threads.

With --compute_type bfloat16 the convolutions and matrix products multiply in bfloat16 and
everything else stays float32, as `samples/fashion_mnist --compute_type bfloat16` does: each
one's operands are cast to bfloat16 and its output back to float32 (torch: each Conv2d and
Linear under `torch.autocast("cpu", torch.bfloat16)`; tf: `tf.cast` around `tf.nn.conv2d`
and the matmuls). Both run oneDNN's bfloat16 kernels on processors that have them.

Each worker runs --warmup steps, waits until every worker has (a barrier through this
script), then times --steps steps. One JSON line on stdout: the total examples per second
(all workers' timed examples over the span from the first timed step's start to the last
one's end) and each worker's report. Every child dies with the script (PR_SET_PDEATHSIG).
"""
import argparse
import json
import os
import select
import subprocess
import sys
import time

from tf_dist_training import die_with_parent, free_ports, load_fashion_mnist


def barrier():
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        raise RuntimeError("the launcher did not say GO")


def torch_worker(args, i, n, x_shard, y_shard):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=i, world_size=n)
    if args.model == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
        shape = (-1, 784)
    else:
        def mixed(layer):
            if args.compute_type == "float32":
                return layer

            class Bf16(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layer = layer

                def forward(self, x):
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return self.layer(x).float()
            return Bf16()

        model = nn.Sequential(mixed(nn.Conv2d(1, 32, 5, padding=2)), nn.ReLU(), nn.MaxPool2d(2),
                              mixed(nn.Conv2d(32, 64, 5, padding=2)), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              mixed(nn.Linear(7 * 7 * 64, 1024)), nn.ReLU(), nn.Dropout(0.5),
                              mixed(nn.Linear(1024, 10)))
        shape = (-1, 1, 28, 28)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    lossf = nn.CrossEntropyLoss()
    xs, ys = torch.from_numpy(x_shard), torch.from_numpy(y_shard)
    b = args.batch
    per_epoch = len(xs) // b
    losses, t0 = [], None
    for s in range(args.warmup + args.steps):
        if s == args.warmup:
            barrier()
            t0 = time.time()
        k = (s % per_epoch) * b
        opt.zero_grad(set_to_none=True)
        loss = lossf(ddp(xs[k:k + b].reshape(shape)), ys[k:k + b])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    t1 = time.time()
    dist.destroy_process_group()
    return t0, t1, losses, "torch %s" % torch.__version__


def tf_worker(args, i, n, x_shard, y_shard):
    """MultiWorkerMirroredStrategy's own path as tf.keras 2's optimizers took it (Keras 3's
    model.fit takes no tf.distribute strategy): per-replica gradients, one batched
    all-reduce of them in a merge_call (strategy.extended.batch_reduce_to), then each
    variable's Adam update on its replica (strategy.extended.update)."""
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": args.worker_hosts.split(",")},
                                          "task": {"type": "worker", "index": i}})
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    opts = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=opts)
    glorot = tf.keras.initializers.GlorotUniform(seed=1)

    def var(shape, zeros=False):
        return tf.Variable(tf.zeros(shape) if zeros else glorot(shape))

    with strategy.scope():
        if args.model == "mlp":
            params = [var([784, 256]), var([256], True), var([256, 128]), var([128], True), var([128, 10]),
                      var([10], True)]
        else:
            params = [var([5, 5, 1, 32]), var([32], True), var([5, 5, 32, 64]), var([64], True),
                      var([7 * 7 * 64, 1024]), var([1024], True), var([1024, 10]), var([10], True)]
        slots = [(tf.Variable(tf.zeros_like(p)), tf.Variable(tf.zeros_like(p))) for p in params]
        t = tf.Variable(0.0)

    def conv2d(h, w):
        if args.compute_type == "float32":
            return tf.nn.conv2d(h, w, 1, "SAME")
        return tf.cast(tf.nn.conv2d(tf.cast(h, tf.bfloat16), tf.cast(w, tf.bfloat16), 1, "SAME"), tf.float32)

    def mm(h, w):
        if args.compute_type == "float32":
            return h @ w
        return tf.cast(tf.cast(h, tf.bfloat16) @ tf.cast(w, tf.bfloat16), tf.float32)

    def forward(x, training):
        if args.model == "mlp":
            h = tf.nn.relu(x @ params[0] + params[1])
            h = tf.nn.relu(h @ params[2] + params[3])
            return h @ params[4] + params[5]
        h = tf.reshape(x, [-1, 28, 28, 1])
        h = tf.nn.max_pool2d(tf.nn.relu(conv2d(h, params[0]) + params[1]), 2, 2, "SAME")
        h = tf.nn.max_pool2d(tf.nn.relu(conv2d(h, params[2]) + params[3]), 2, 2, "SAME")
        h = tf.nn.relu(mm(tf.reshape(h, [-1, 7 * 7 * 64]), params[4]) + params[5])
        if training:
            h = tf.nn.dropout(h, 0.5)
        return mm(h, params[6]) + params[7]

    def adam(v, g, m, s, step):
        m.assign(0.9 * m + 0.1 * g)
        s.assign(0.999 * s + 0.001 * g * g)
        lr = 1e-3 * tf.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
        return v.assign_sub(lr * m / (tf.sqrt(s) + 1e-7))

    def apply(distribution, grads):
        reduced = distribution.extended.batch_reduce_to(tf.distribute.ReduceOp.MEAN, list(zip(grads, params)))
        distribution.extended.update(t, lambda v: v.assign_add(1.0))
        step = t.read_value()
        ops = [distribution.extended.update(p, adam, args=(g, m, s, step))
               for g, p, (m, s) in zip(reduced, params, slots)]
        return tf.group(ops)

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = forward(x, True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, params)
        tf.distribute.get_replica_context().merge_call(apply, args=(grads,))
        return loss

    @tf.function
    def train_step(x, y):
        return strategy.run(replica_step, args=(x, y))

    b = args.batch
    per_epoch = len(x_shard) // b
    losses, t0 = [], None
    for k in range(args.warmup + args.steps):
        if k == args.warmup:
            barrier()
            t0 = time.time()
        j = (k % per_epoch) * b
        loss = train_step(tf.constant(x_shard[j:j + b]), tf.constant(y_shard[j:j + b]))
        losses.append(float(strategy.experimental_local_results(loss)[0]))
    t1 = time.time()
    return t0, t1, losses, "tensorflow %s" % tf.__version__


def task(args):
    i, n = args.task_index, len(args.worker_hosts.split(","))
    x, y = load_fashion_mnist(args.data_dir)
    x_shard, y_shard = x[i::n].copy(), y[i::n].copy()
    run = torch_worker if args.framework == "torch" else tf_worker
    t0, t1, losses, version = run(args, i, n, x_shard, y_shard)
    ok = all(v == v and abs(v) < 1e30 for v in losses[-10:])
    print(json.dumps({"worker": i, "start": t0, "end": t1, "steps": args.steps, "examples": args.steps * args.batch,
                      "examples_per_second": args.steps * args.batch / (t1 - t0), "first_loss": losses[0],
                      "last_loss": losses[-1], "finite": ok, "version": version}), flush=True)
    return 0


def launch(args):
    ports = free_ports(args.workers + 1)
    common = [sys.executable, os.path.abspath(__file__), "--framework", args.framework, "--model", args.model,
              "--worker_hosts", ",".join("127.0.0.1:%d" % p for p in ports[1:]), "--port", str(ports[0]),
              "--threads", str(args.threads), "--steps", str(args.steps), "--warmup", str(args.warmup),
              "--batch", str(args.batch), "--data_dir", args.data_dir, "--compute_type", args.compute_type]
    workers = []
    try:
        for i in range(args.workers):
            workers.append(subprocess.Popen(common + ["--task_index", str(i)], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent))
        deadline = time.monotonic() + args.timeout
        for i, p in enumerate(workers):
            while True:
                r, _, _ = select.select([p.stdout], [], [], max(0.1, deadline - time.monotonic()))
                if not r:
                    raise RuntimeError("worker %d was not ready within %d s" % (i, args.timeout))
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
                raise RuntimeError("worker %d did not finish within %d s" % (i, args.timeout))
            lines = [x for x in out.splitlines() if x.startswith("{")]
            if p.returncode != 0 or not lines:
                raise RuntimeError("worker %d failed (exit %s)" % (i, p.returncode))
            reports.append(json.loads(lines[-1]))
        if not all(r["finite"] for r in reports):
            raise RuntimeError("a worker's loss is not finite: %s" % reports)
        span = max(r["end"] for r in reports) - min(r["start"] for r in reports)
        examples = sum(r["examples"] for r in reports)
        print(json.dumps({"ok": True, "examples_per_second": examples / span, "seconds": span, "examples": examples,
                          "version": reports[0]["version"], "workers": reports}), flush=True)
        return 0
    except Exception as e:  # noqa: BLE001 - reported as the script's answer
        print(json.dumps({"ok": False, "error": str(e)}), flush=True)
        return 1
    finally:
        for p in workers:
            if p.poll() is None:
                p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--framework", choices=["torch", "tf"], required=True)
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200, help="timed steps per worker")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps per worker first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--compute_type", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--worker_hosts", default="")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--task_index", type=int, default=-1)
    args = ap.parse_args()
    if args.task_index >= 0:
        return task(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
