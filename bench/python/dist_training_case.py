"""The `dist_training` case of bench/python/driver.py.

Examples per second of 1 ps + 2 workers training the Fashion-MNIST MLP of
`samples/fashion_mnist --model mlp` (784-256-128-10, Adam 1e-3 without decay, batch 64),
asynchronously, on loopback, against:

* TensorFlow's own parameter-server training (bench/python/tf_dist_training.py: 1 ps and 2
  workers as processes, `tf.compat.v1.train.Server` + `replica_device_setter`,
  MonitoredTrainingSession; 50 warm-up steps, then 400 timed steps per worker);
* our single process (`build/samples/fashion_mnist` with no cluster flags).

Ours runs as users run it: `scripts/local_cluster --ps 1 --workers 2 -- build/samples/fashion_mnist
... --sync_mode async`, one epoch (938 global steps in all, each worker on its half of the training set);
its figure is read from the workers' RESULT lines (see _cluster_rate). The single process
trains the same epoch (938 steps). Every process gets BENCH_THREADS threads (--threads for
ours, intra/inter-op for TF). The three runs alternate (ours cluster, TF, ours single) for
1 round (--quick) or 2, and medians are compared. Until the sample has the cluster flags
(`--help` lists --ps_hosts) the case prints SKIP and no figure.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile

from serving_case import _die_with_parent  # noqa: F401 - the same child hygiene

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA_DIR = "/usr/share/datasets/fashion-mnist"  # kit::kFashionMnistDir (samples/kit/datasets.h)
# 784x256 + 256 + 256x128 + 128 + 128x10 + 10 f32 parameters.
MODEL_PARAMS = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
MODEL_BYTES = 4 * MODEL_PARAMS


def _run(argv, timeout, log, env=None):
    log.write("$ %s\n" % " ".join(argv))
    log.flush()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         preexec_fn=_die_with_parent, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = ""
        raise RuntimeError("%s ran past %d s" % (os.path.basename(argv[0]), timeout))
    finally:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)  # local_cluster kills its own tasks on SIGTERM
                p.wait(timeout=10)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
    log.write(out + "\n")
    log.flush()
    if p.returncode != 0:
        tail = "\n".join(out.splitlines()[-5:])
        raise RuntimeError("%s exited %d: %s" % (os.path.basename(argv[0]), p.returncode, tail))
    return out


def _fields(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


def _cluster_rate(out):
    """Total examples/s of the cluster and the chief's wire bytes per step (or None).

    The chief's RESULT (`role=chief`) gives the cluster's figure: its
    steady_examples_per_second is every worker's examples (global steps x batch) over the
    time from the end of the warm-up (the first 50 steps of each worker, as TensorFlow's
    script leaves out) to the end of the chief's training (net/src/training/ps_loop.cpp);
    a sample without it gives its examples_per_second, the same from the first step.
    Without a chief's figure, the workers' own examples_per_second are summed."""
    results = {}
    for line in out.splitlines():
        m = re.match(r"\[(worker\d+|ps\d+|chief\d*)\]\s*(RESULT .*)$", line)
        if m:
            results[m.group(1)] = _fields(m.group(2))
    chief = results.get("worker0") or results.get("chief") or results.get("chief0")
    if not chief:
        raise RuntimeError("the chief printed no RESULT line")
    wire = float(chief["wire_bytes_per_step"]) if "wire_bytes_per_step" in chief else None
    for key in ("cluster_examples_per_second", "total_examples_per_second"):
        if key in chief:
            return float(chief[key]), wire, "chief's %s" % key
    if chief.get("role") == "chief" and float(chief.get("steady_examples_per_second", 0)) > 0:
        return (float(chief["steady_examples_per_second"]), wire,
                "the chief's RESULT steady_examples_per_second (the cluster's, after 50 steps of each worker)")
    if chief.get("role") == "chief" and "examples_per_second" in chief:
        return float(chief["examples_per_second"]), wire, "the chief's RESULT examples_per_second (the cluster's)"
    rates = [float(r["examples_per_second"]) for name, r in results.items()
             if not name.startswith("ps") and "examples_per_second" in r]
    if not rates:
        raise RuntimeError("no worker's RESULT has examples_per_second")
    return sum(rates), wire, "sum of %d workers' examples_per_second" % len(rates)


def sample_with_flag(build, name, flag, case, say):
    """The path of build/samples/NAME when it is built and its --help lists FLAG; else None,
    having said why the case CASE skips."""
    sample = os.path.join(build, "samples", name)
    if not os.access(sample, os.X_OK):
        say("SKIP %s: %s is not built" % (case, sample))
        return None
    try:
        helptext = subprocess.run([sample, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        say("SKIP %s: %s --help failed (%s)" % (case, sample, e))
        return None
    if flag not in helptext:
        say("SKIP %s: %s has no %s (its --help does not list it); no figure" % (case, sample, flag))
        return None
    return sample


def run(build, quick, fmt, stamp, loadavg, say, python, threads):
    sample = sample_with_flag(build, "fashion_mnist", "--ps_hosts", "dist_training", say)
    cluster = os.path.join(ROOT, "scripts", "local_cluster")
    if not sample:
        return []
    if not os.access(cluster, os.X_OK):
        say("SKIP dist_training: %s is missing" % cluster)
        return []
    if not os.path.isdir(DATA_DIR):
        say("SKIP dist_training: no Fashion-MNIST at %s (apt-get install dataset-fashion-mnist)" % DATA_DIR)
        return []
    have_tf = bool(python)
    if not have_tf:
        say("SKIP dist_training vs tensorflow ps: no bench venv python")

    rounds = 1 if quick else 2
    load_case = loadavg()
    work = tempfile.mkdtemp(prefix="af-bench-dist-")
    log = open(os.path.join(build, "bench", "dist_training.log"), "w")
    model_flags = ["--model", "mlp", "--model_network", "256 128", "--optimizer", "adam", "--learning_rate", "0.001",
                   "--noenable_lr_decay", "--batch_size", "64", "--epoch_number", "1", "--steps_to_validate", "0",
                   "--threads", str(threads), "--data_dir", DATA_DIR, "--mode", "train_from_scratch"]
    ours_d, ours_s, tf_r, wires, how = [], [], [], [], ""
    tf_desc = ""
    try:
        for k in range(rounds):
            d = os.path.join(work, "cluster%d" % k)
            out = _run([cluster, "--ps", "1", "--workers", "2", "--timeout", "600", "--", sample] + model_flags +
                       ["--sync_mode", "async", "--checkpoint_path", d + "/ckpt", "--output_path", d + "/tb"],
                       timeout=660, log=log)
            rate, wire, how = _cluster_rate(out)
            ours_d.append(rate)
            if wire is not None:
                wires.append(wire)
            if have_tf:
                out = _run([python, os.path.join(HERE, "tf_dist_training.py"), "--workers", "2", "--steps", "400",
                            "--warmup", "50", "--threads", str(threads), "--data_dir", DATA_DIR],
                           timeout=660, log=log)
                lines = [x for x in out.splitlines() if x.startswith('{"ok"')]
                r = json.loads(lines[-1]) if lines else {"ok": False, "error": "no result line"}
                if not r.get("ok"):
                    raise RuntimeError("tf_dist_training.py: %s" % r.get("error"))
                tf_r.append(r["examples_per_second"])
                tf_desc = "tensorflow-cpu %s, 1 ps + 2 workers, async, intra/inter-op %d" % (r["tensorflow"], threads)
            d = os.path.join(work, "single%d" % k)
            out = _run([sample] + model_flags + ["--checkpoint_path", d + "/ckpt", "--output_path", d + "/tb"],
                       timeout=600, log=log)
            res = [_fields(x) for x in out.splitlines() if x.startswith("RESULT ")]
            if not res or "examples_per_second" not in res[-1]:
                raise RuntimeError("the single process printed no RESULT examples_per_second")
            # After the same warm-up as the cluster's figure, when the sample reports it.
            ours_s.append(float(res[-1].get("steady_examples_per_second") or 0) or float(res[-1]["examples_per_second"]))
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    results = []
    ours = statistics.median(ours_d)
    ours_threads = "local_cluster 1 ps + 2 workers, async, --threads %d each (%s)" % (threads, how)
    say("# dist_training: Fashion-MNIST MLP 784-256-128-10, Adam 1e-3, batch 64, 1 ps + 2 workers on loopback; "
        "%d round(s); ours %s ex/s" % (rounds, "/".join(fmt(x) for x in ours_d)))
    for peer_name, vals, desc in (("tensorflow ps", tf_r, tf_desc),
                                  ("ours, single process", ours_s, "samples/fashion_mnist, no cluster flags, "
                                   "--threads %d, one epoch" % threads)):
        if not vals:
            continue
        peer = statistics.median(vals)
        ratio = ours / peer
        say("BENCH dist_training ours=%sex/s peer=%sex/s ratio=%s (%s)" % (fmt(ours), fmt(peer), fmt(ratio), peer_name))
        say("#   %s: %s; samples: ours %s, peer %s" % (peer_name, desc, "/".join(fmt(x) for x in ours_d),
                                                      "/".join(fmt(x) for x in vals)))
        results.append({"case": "dist_training", "ours": ours, "peer": peer, "unit": "ex/s", "ratio": ratio,
                        "peer_name": peer_name, "timestamp": stamp, "higher_is_better": True, "ours_speedup": ratio,
                        "work": "examples/s, 1 ps + 2 async workers, Fashion-MNIST MLP, batch 64",
                        "ours_threads": ours_threads, "peer_threads": desc, "ours_samples": ours_d,
                        "peer_samples": vals, "pairs": rounds, "warmup_pairs": 0, "internal": False,
                        "load_before": load_case})
    if tf_r:
        say("#   goal: >= 1.5x TensorFlow's examples/s: %s" % ("met" if ours / statistics.median(tf_r) >= 1.5 else "not met"))
    if wires:
        w = statistics.median(wires)
        say("#   wire bytes per worker step: %.0f (chief's wire_bytes_per_step) against twice the model, %d B "
            "(%d f32 parameters pulled and their gradients pushed): %.2fx" % (w, 2 * MODEL_BYTES, MODEL_PARAMS,
                                                                            w / (2 * MODEL_BYTES)))
    else:
        say("#   wire bytes per worker step: not reported (the chief's RESULT has no wire_bytes_per_step); "
            "twice the model would be %d B" % (2 * MODEL_BYTES))
    return results
