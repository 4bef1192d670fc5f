"""The `allreduce_training` case of bench/python/driver.py: synchronous data-parallel
training with an all-reduce of the gradients every step, on loopback.

The Fashion-MNIST MLP (784-256-128-10) and CNN of `samples/fashion_mnist` (Adam 1e-3
without decay, batch 64 per worker) on 2 and 4 workers:

* ours: `samples/fashion_mnist --strategy allreduce`, one process per worker with the
  seeds' worker flags (Gloo's ring all-reduce, the chief's daemon as the rendezvous store);
  the figure is the chief's RESULT steady_examples_per_second: every worker's examples
  after the first 50 global steps, to the end of training (--max_steps);
* PyTorch DDP, gloo backend (bench/python/collective_training.py --framework torch);
* TensorFlow's MultiWorkerMirroredStrategy, ring (the same script, --framework tf);
  each peer runs 50 untimed steps per worker, then times the rest.
* the CNN once more with its convolutions and matrix products in bfloat16 on every side (ours
  `--compute_type bfloat16`; the peers cast each one's operands, collective_training.py
  --compute_type bfloat16), float32 elsewhere;
* and, as internal rows, our ps mode on the same workers (one more process, the ps:
  `scripts/local_cluster --ps 1 --workers n`, async), MLP only; and the bound with no
  communication at all: n single-process trainings of the same model side by side, each
  on its own batches (the sum of their steady figures; all-reduce / bound is the share of
  the machine the collective leaves to the model).

Every process gets BENCH_THREADS threads. The sides alternate for 1 round (--quick) or 2,
and medians are compared. Goals: >= 1.3x PyTorch DDP's examples/s, >= 2x
TensorFlow's.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from dist_training_case import DATA_DIR, _cluster_rate, _die_with_parent, _fields, _run, sample_with_flag
from tf_dist_training import free_ports

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WARMUP = 50  # our RESULT's steady figure leaves out 50 global steps; the peers as many
STEPS = {"mlp": 300, "cnn": 80}  # global steps of ours (the peers: STEPS - WARMUP timed)


def _training_flags(model, threads, compute_type):
    """The sample's flags every line of ours shares: model, optimizer, batch, steps, threads."""
    flags = ["--model", model, "--optimizer", "adam", "--learning_rate", "0.001", "--noenable_lr_decay",
             "--batch_size", "64", "--epoch_number", "1", "--max_steps", str(STEPS[model]), "--steps_to_validate", "0",
             "--threads", str(threads), "--data_dir", DATA_DIR, "--mode", "train_from_scratch"]
    if model == "mlp":
        flags += ["--model_network", "256 128"]
    if compute_type != "float32":
        flags += ["--compute_type", compute_type]
    return flags


def _run_together(commands, log, env=None):
    """Starts every command at once and waits for all; (processes, outputs), every one ended."""
    procs = []
    try:
        for cmd in commands:
            # All in one session, as the peers' workers are (collective_training.py starts them
            # from one launcher): with the kernel's autogroup scheduling each session is one
            # scheduling group, and n sessions on 2 cores slowed the MLP's ring by a third.
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                          preexec_fn=_die_with_parent))
        outs = [p.communicate(timeout=900)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    log.write("\n".join(outs) + "\n")
    return procs, outs


def _ours(sample, model, n, threads, work, log, compute_type="float32"):
    """The chief's steady examples/s of n workers, and its RESULT."""
    for attempt in range(3):  # another process may take a port between picking and binding
        ports = free_ports(n)
        hosts = ",".join("127.0.0.1:%d" % p for p in ports)
        flags = _training_flags(model, threads, compute_type) + [
            "--strategy", "allreduce", "--worker_hosts=" + hosts, "--checkpoint_path", work + "/ckpt",
            "--output_path", work + "/tb"]
        env = dict(os.environ)
        env.setdefault("ACTORFLOW_TOKEN", "bench-allreduce-token-%d" % os.getpid())
        procs, outs = _run_together([[sample] + flags + ["--job_name=worker", "--task_index=%d" % i]
                                     for i in reversed(range(n))], log, env)
        chief = outs[-1]
        if "Address already in use" in "".join(outs) and attempt < 2:
            continue
        res = [_fields(x) for x in chief.splitlines() if x.startswith("RESULT ")]
        if not res or any(p.returncode != 0 for p in procs):
            raise RuntimeError("our %d-worker %s run failed: %s" % (n, model, chief[-500:]))
        r = res[-1]
        return float(r.get("steady_examples_per_second") or 0) or float(r["examples_per_second"]), r
    raise RuntimeError("no free ports")


def _independent(sample, model, n, threads, work, log, compute_type="float32"):
    """The sum of n single-process trainings' steady examples/s, all n started together."""
    flags = _training_flags(model, threads, compute_type)
    procs, outs = _run_together([[sample] + flags + ["--checkpoint_path", "%s/alone%d/ckpt" % (work, i),
                                                     "--output_path", "%s/alone%d/tb" % (work, i)] for i in range(n)], log)
    total = 0.0
    for p, out in zip(procs, outs):
        res = [_fields(x) for x in out.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not res or float(res[-1].get("steady_examples_per_second", 0)) <= 0:
            raise RuntimeError("a single-process %s training failed: %s" % (model, out[-500:]))
        total += float(res[-1]["steady_examples_per_second"])
    return total


def _peer(python, framework, model, n, threads, log, compute_type="float32"):
    out = _run([python, os.path.join(HERE, "collective_training.py"), "--framework", framework, "--model", model,
                "--workers", str(n), "--warmup", str(WARMUP), "--steps", str(STEPS[model] - WARMUP),
                "--threads", str(threads), "--data_dir", DATA_DIR, "--compute_type", compute_type], timeout=900, log=log)
    lines = [x for x in out.splitlines() if x.startswith('{"ok"')]
    r = json.loads(lines[-1]) if lines else {"ok": False, "error": "no result line"}
    if not r.get("ok"):
        raise RuntimeError("collective_training.py --framework %s: %s" % (framework, r.get("error")))
    return r["examples_per_second"], r["version"]


def run(build, quick, fmt, stamp, loadavg, say, python, threads):
    sample = sample_with_flag(build, "fashion_mnist", "--strategy", "allreduce_training", say)
    if not sample:
        return []
    if not os.path.isdir(DATA_DIR):
        say("SKIP allreduce_training: no Fashion-MNIST at %s" % DATA_DIR)
        return []
    if not python:
        say("SKIP allreduce_training's peers: no bench venv python (our figures alone are not a comparison)")
        return []
    rounds = 1 if quick else 2
    load_case = loadavg()
    work = tempfile.mkdtemp(prefix="af-bench-allreduce-")
    os.makedirs(os.path.join(build, "bench"), exist_ok=True)
    log = open(os.path.join(build, "bench", "allreduce_training.log"), "w")
    results = []
    try:
        # The CNN also with its convolutions and products in bfloat16 on every side (--compute_type).
        for model, ctype in (("mlp", "float32"), ("cnn", "float32"), ("cnn", "bfloat16")):
            label = model if ctype == "float32" else model + " bf16"
            for n in (2, 4):
                ours, torch_r, tf_r, ps_r, alone_r, versions, wires = [], [], [], [], [], {}, []
                for k in range(rounds):
                    rate, r = _ours(sample, model, n, threads, os.path.join(work, "%s%s%d_%d" % (model, ctype, n, k)), log,
                                    ctype)
                    ours.append(rate)
                    wires.append((float(r.get("wire_bytes_per_step", 0)), int(r.get("model_bytes", 0))))
                    alone_r.append(_independent(sample, model, n, threads, os.path.join(work, "%s%s%d_%d" % (model, ctype, n, k)),
                                                log, ctype))
                    for framework, vals in (("torch", torch_r), ("tf", tf_r)):
                        try:
                            v, versions[framework] = _peer(python, framework, model, n, threads, log, ctype)
                            vals.append(v)
                        except RuntimeError as e:
                            say("allreduce_training: %s %s %d workers: %s" % (framework, label, n, e))
                    if model == "mlp":
                        d = os.path.join(work, "ps%d_%d" % (n, k))
                        out = _run([os.path.join(ROOT, "scripts", "local_cluster"), "--ps", "1", "--workers", str(n),
                                    "--timeout", "600", "--", sample, "--model", "mlp", "--model_network", "256 128",
                                    "--optimizer", "adam", "--learning_rate", "0.001", "--noenable_lr_decay",
                                    "--batch_size", "64", "--epoch_number", "1", "--max_steps", str(STEPS[model]),
                                    "--steps_to_validate", "0", "--threads", str(threads), "--data_dir", DATA_DIR,
                                    "--mode", "train_from_scratch", "--sync_mode", "async",
                                    "--checkpoint_path", d + "/ckpt", "--output_path", d + "/tb"], timeout=660, log=log)
                        ps_r.append(_cluster_rate(out)[0])
                med = statistics.median(ours)
                w, mb = wires[-1]
                say("# allreduce_training %s, %d workers: ours %s ex/s; chief's wire bytes per step %.0f = %.3f x the "
                    "model (%d B; a ring's bound 2 (n - 1) / n = %.3f)" % (label, n, "/".join(fmt(x) for x in ours), w,
                                                                          w / mb if mb else 0, mb, 2 * (n - 1) / n))
                rows = (("pytorch ddp gloo, %s, %d workers" % (label, n), torch_r, versions.get("torch", ""), False),
                        ("tensorflow multiworkermirrored, %s, %d workers" % (label, n), tf_r, versions.get("tf", ""), False),
                        ("ours ps mode (1 ps + %d async workers), mlp" % n, ps_r, "scripts/local_cluster", True),
                        ("ours without communication (%d single-process trainings side by side), %s" % (n, label), alone_r,
                         "the bound: sum of their steady figures", True))
                for peer_name, vals, desc, internal in rows:
                    if not vals:
                        continue
                    peer = statistics.median(vals)
                    ratio = med / peer
                    say("BENCH allreduce_training ours=%sex/s peer=%sex/s ratio=%s (%s)" % (fmt(med), fmt(peer), fmt(ratio), peer_name))
                    results.append({"case": "allreduce_training", "ours": med, "peer": peer, "unit": "ex/s", "ratio": ratio,
                                    "peer_name": peer_name, "timestamp": stamp, "higher_is_better": True,
                                    "ours_speedup": ratio, "work": "examples/s, %d workers, Fashion-MNIST %s, batch 64 "
                                    "per worker, Adam" % (n, label),
                                    "ours_threads": "--threads %d per worker" % threads, "peer_threads": desc,
                                    "ours_samples": ours, "peer_samples": vals, "pairs": rounds, "warmup_pairs": 0,
                                    "internal": internal, "load_before": load_case})
                if torch_r:
                    say("#   goal >= 1.3x PyTorch DDP: %s" % ("met" if med / statistics.median(torch_r) >= 1.3 else "not met"))
                if tf_r:
                    say("#   goal >= 2x TensorFlow MWMS: %s" % ("met" if med / statistics.median(tf_r) >= 2 else "not met"))
                    if alone_r:
                        say("#   2x TensorFlow asks for %s ex/s; with no communication at all the same processes train %s"
                            % (fmt(2 * statistics.median(tf_r)), fmt(statistics.median(alone_r))))
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    return results
