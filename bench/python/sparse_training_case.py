"""The `sparse_training` case of bench/python/driver.py.

`samples/wide_and_deep --hash_bucket_size 1000000` (the breast-cancer wide & deep model
with its 45 sparse ids per example hashed into a 1,000,000 x 1 wide table and a
1,000,000 x 16 embedding, FTRL for the wide part and Adagrad for the deep part, batch 32)
on 2 ps + 2 async workers on loopback, the tables split over the two ps, against
TensorFlow's own parameter-server training of the same model
(bench/python/tf_sparse_training.py: `tf.compat.v1` partitioned variables,
`replica_device_setter`, `MonitoredTrainingSession`).

Ours runs as users run it: `scripts/local_cluster --ps 2 --workers 2 -- wide_and_deep ...`
for --max_steps global steps (the chief checkpoints once at the end, as TF's script does
not at all: --save_checkpoint_steps beyond the run); its examples/s is the chief's
steady_examples_per_second (the cluster's, after each worker's first 50 steps) and its
bytes per step the chief's socket_bytes_per_step (its sockets' TCP counters from the kernel).
TF's: all workers' examples over the span of their timed steps after 50 warm-up steps, and
the chief's TCP bytes (ss -ti: acknowledged + received) per timed step. Both are the TCP
payload a worker step moves. The two alternate for 1 round (--quick) or 2; medians.
"""
import json
import os
import shutil
import statistics
import tempfile

from dist_training_case import HERE, ROOT, _run, _cluster_rate, _fields, sample_with_flag

CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv"
HASH_BUCKET_SIZE = 1000000
BATCH = 32
GLOBAL_STEPS = 1600  # 800 per worker
TF_STEPS = 800       # timed steps per TF worker, after 50 untimed


def _chief_sockets(out):
    for line in out.splitlines():
        if line.startswith("[worker0]") and "RESULT " in line:
            f = _fields(line.split("RESULT ", 1)[1])
            if "socket_bytes_per_step" in f:
                return float(f["socket_bytes_per_step"])
    return None


def run(build, quick, fmt, stamp, loadavg, say, python, threads):
    sample = sample_with_flag(build, "wide_and_deep", "--hash_bucket_size", "sparse_training", say)
    cluster = os.path.join(ROOT, "scripts", "local_cluster")
    if not sample:
        return []
    if not os.path.exists(CSV):
        say("SKIP sparse_training: no breast-cancer data at %s (apt-get install python3-sklearn)" % CSV)
        return []
    rounds = 1 if quick else 2
    load_case = loadavg()
    work = tempfile.mkdtemp(prefix="af-bench-sparse-")
    log = open(os.path.join(build, "bench", "sparse_training.log"), "w")
    flags = ["--hash_bucket_size", str(HASH_BUCKET_SIZE), "--batch_size", str(BATCH), "--max_steps", str(GLOBAL_STEPS),
             "--epoch_number", "100000", "--steps_to_validate", "0", "--threads", str(threads),
             "--save_checkpoint_steps", str(10 * GLOBAL_STEPS), "--mode", "train_from_scratch", "--sync_mode", "async"]
    ours, ours_bytes, tf_r, tf_bytes, how, tf_desc = [], [], [], [], "", ""
    try:
        for k in range(rounds):
            d = os.path.join(work, "cluster%d" % k)
            out = _run([cluster, "--ps", "2", "--workers", "2", "--timeout", "600", "--", sample] + flags +
                       ["--checkpoint_path", d + "/ckpt", "--output_path", d + "/tb"], timeout=660, log=log)
            rate, _, how = _cluster_rate(out)
            ours.append(rate)
            b = _chief_sockets(out)
            if b is not None:
                ours_bytes.append(b)
            if python:
                out = _run([python, os.path.join(HERE, "tf_sparse_training.py"), "--ps", "2", "--workers", "2",
                            "--steps", str(TF_STEPS), "--warmup", "50", "--threads", str(threads), "--batch", str(BATCH),
                            "--hash_bucket_size", str(HASH_BUCKET_SIZE), "--data", CSV], timeout=660, log=log)
                lines = [x for x in out.splitlines() if x.startswith('{"ok"')]
                r = json.loads(lines[-1]) if lines else {"ok": False, "error": "no result line"}
                if not r.get("ok"):
                    raise RuntimeError("tf_sparse_training.py: %s" % r.get("error"))
                tf_r.append(r["examples_per_second"])
                tf_bytes.append(r["socket_bytes_per_step"])
                tf_desc = ("tensorflow-cpu %s, 2 ps + 2 workers, async, partitioned tables, MonitoredTrainingSession, "
                           "intra/inter-op %d" % (r["tensorflow"], threads))
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    results = []
    mine = statistics.median(ours)
    say("# sparse_training: wide & deep, 1,000,000-row hashed tables over 2 ps, 2 async workers, batch %d, loopback; "
        "%d round(s); ours %s ex/s (%s)" % (BATCH, rounds, "/".join(fmt(x) for x in ours), how))
    if not tf_r:
        say("SKIP sparse_training vs tensorflow ps: no bench venv python")
        return results
    peer = statistics.median(tf_r)
    ratio = mine / peer
    say("BENCH sparse_training ours=%sex/s peer=%sex/s ratio=%s (tensorflow ps)" % (fmt(mine), fmt(peer), fmt(ratio)))
    say("#   tensorflow ps: %s; samples: ours %s, peer %s" % (tf_desc, "/".join(fmt(x) for x in ours),
                                                           "/".join(fmt(x) for x in tf_r)))
    say("#   goal: >= 1.5x TensorFlow's examples/s: %s" % ("met" if ratio >= 1.5 else "not met"))
    results.append({"case": "sparse_training", "ours": mine, "peer": peer, "unit": "ex/s", "ratio": ratio,
                    "peer_name": "tensorflow ps", "timestamp": stamp, "higher_is_better": True, "ours_speedup": ratio,
                    "work": "examples/s, 2 ps + 2 async workers, wide & deep with 1M-row hashed tables, batch 32",
                    "ours_threads": "local_cluster 2 ps + 2 workers, --threads %d each" % threads,
                    "peer_threads": tf_desc, "ours_samples": ours, "peer_samples": tf_r, "pairs": rounds,
                    "warmup_pairs": 0, "internal": False, "load_before": load_case})
    if ours_bytes and tf_bytes:
        ob, tb = statistics.median(ours_bytes), statistics.median(tf_bytes)
        say("BENCH sparse_training_wire ours=%sB peer=%sB ratio=%s (tensorflow ps)" % (fmt(ob), fmt(tb), fmt(ob / tb)))
        say("#   TCP payload per worker step, the chief's: ours %s, peer %s; the tables are %d bytes; goal: at most "
            "TensorFlow's: %s" % ("/".join(fmt(x) for x in ours_bytes), "/".join(fmt(x) for x in tf_bytes),
                                  HASH_BUCKET_SIZE * 17 * 4, "met" if ob <= tb else "not met"))
        results.append({"case": "sparse_training_wire", "ours": ob, "peer": tb, "unit": "B", "ratio": ob / tb,
                        "peer_name": "tensorflow ps", "timestamp": stamp, "higher_is_better": False,
                        "ours_speedup": tb / ob, "work": "TCP bytes per worker step (the chief's)",
                        "ours_threads": "", "peer_threads": tf_desc, "ours_samples": ours_bytes,
                        "peer_samples": tf_bytes, "pairs": rounds, "warmup_pairs": 0, "internal": False,
                        "load_before": load_case})
    return results
