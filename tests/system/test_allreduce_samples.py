#!/usr/bin/env python3
"""The samples trained with --strategy allreduce (no ps; Gloo all-reduce between the
workers), started as the seeds start a cluster's workers.

usage: test_allreduce_samples.py CASE SAMPLES_DIR

equal        cancer_classifier, SGD, the data in order (--noshuffle): 2, 4 and 6 workers
             reach the weights one process reaches on the combined batch (the chief's last
             checkpoint against the single process's: max difference <= 1e-5); every
             worker's RESULT says it sent at most 2 (n - 1) / n of the model's bytes per
             step, plus 5 %; the chief's says sync_mode=sync and the algorithm auto chose
             (the ring at 2, bcube at 4 and 6).
worker_lost  4 workers of cancer_classifier; worker 2 killed with kill -9 mid-training:
             the others fail their step within --step_timeout_ms, naming
             /job:worker/task:2 (its ring neighbours at once, the chief at its timeout); worker 2 restarted with the same command rejoins, the chief
             restores its last checkpoint into every replica, and all exit 0.
chief_lost   the same for the chief (worker 0): the others wait; the restarted chief
             resumes from its last checkpoint and the run ends normally.
tf_config    the cluster from TF_CONFIG (a worker job only), as Kubeflow's TFJob sets it.
ps_refused   --strategy allreduce with --ps_hosts fails at once saying there is no ps; on an
             address beyond loopback without --trusted_network, saying Gloo's connections
             are not authenticated. --allreduce_algorithm with a ps, or an unknown one, fails
             naming the flag.
fashion      Fashion-MNIST MLP, 4 workers, 10 epochs (Adam's learning rate scaled by sqrt(4) for
             the 4x global batch): test accuracy >= 0.88.
trace        Fashion-MNIST MLP, 2 workers, 60 steps with --trace_path and buckets of 512 KiB: 2 buckets,
             and in most steps the chief's trace shows the first bucket's all-reduce
             running while the backward pass still computes dense1's weight gradient.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_checks import FAILURES, check, free_ports  # noqa: E402
from test_distributed_samples import (CANCER_MIN_ACCURACY, Cluster, finish, latest_checkpoint,  # noqa: E402
                                      read_safetensors, result)


def token(tmp):
    return {"ACTORFLOW_TOKEN": "test-token-allreduce-" + os.path.basename(tmp)}


def allreduce(samples, sample, tmp, n, extra):
    """n workers, each with the seeds' worker flags (no --ps_hosts); returns (cluster,
    names). As in test_distributed_samples.seeds, a task that finds its port taken by
    another test's process makes the cluster start again on new ports (3 tries)."""
    for attempt in range(1, 4):
        ports = free_ports(n)
        workers = ",".join(f"127.0.0.1:{p}" for p in ports)
        c, names = Cluster(tmp), []
        for i in reversed(range(n)):
            c.start(f"worker{i}", [os.path.join(samples, sample), f"--worker_hosts={workers}", "--job_name=worker",
                                   f"--task_index={i}", "--strategy", "allreduce", "--checkpoint_path",
                                   os.path.join(tmp, "ckpt"), "--output_path", os.path.join(tmp, "tb")] + extra, token(tmp))
            names.append(f"worker{i}")
        lost = c.lost_port_race(names)
        if not lost or attempt == 3:
            return c, names
        print(f"{', '.join(lost)} found its port taken by another process: the cluster starts again on new ports", flush=True)
        c.kill_all()


def wire_bound(r, n):
    return 2 * (n - 1) / n * int(r["model_bytes"]) * 1.05


def case_equal(samples, tmp):
    common = ["--noshuffle", "--optimizer", "sgd", "--learning_rate", "0.05", "--epoch_number", "1"]
    # 2 workers run Gloo's ring, 4 and 6 its bcube (--allreduce_algorithm auto); 6 is not a
    # power of 2: a halving round, then a direct exchange among 3.
    for n in (2, 4, 6):
        per_worker = 8 if n <= 4 else 4  # 12 steps within the training split's one epoch
        run = os.path.join(tmp, f"n{n}")
        os.makedirs(run)
        steps = 12
        c, names = allreduce(samples, "cancer_classifier", run, n,
                             common + ["--max_steps", str(steps), "--batch_size", str(per_worker)])
        try:
            r = finish(c, names, 300)
            for name in names:
                w = result(c.output(name)) or {}
                if not check(w.get("strategy") == "allreduce", f"{name}'s RESULT does not say strategy=allreduce"):
                    continue
                sent = float(w.get("wire_bytes_per_step", 1e18))
                check(sent <= wire_bound(w, n),
                      f"{name} sent {sent:.0f} bytes per step, over 2 (n - 1) / n x {w.get('model_bytes')} x 1.05 = "
                      f"{wire_bound(w, n):.0f}")
            expected = "ring" if n == 2 else "bcube"
            check((r or {}).get("allreduce_algorithm") == expected and (r or {}).get("sync_mode") == "sync",
                  f"{n} workers: the chief's RESULT should say allreduce_algorithm={expected} sync_mode=sync: {r}")
            print(f"{n} workers: chief {r}", flush=True)
        finally:
            c.kill_all()
        single = os.path.join(run, "single")
        p = subprocess.run([os.path.join(samples, "cancer_classifier")] + common +
                           ["--max_steps", str(steps), "--batch_size", str(per_worker * n),
                            "--checkpoint_path", os.path.join(single, "ckpt"), "--output_path", os.path.join(single, "tb")],
                           capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"the single process failed: {p.stderr[-2000:]}")
        a_path, b_path = latest_checkpoint(os.path.join(run, "ckpt")), latest_checkpoint(os.path.join(single, "ckpt"))
        if not check(a_path and b_path, "a checkpoint is missing"):
            return
        a, b = read_safetensors(a_path), read_safetensors(b_path)
        check(set(a) == set(b), f"the checkpoints hold different variables: {sorted(set(a) ^ set(b))}")
        worst, where, moved = 0.0, "", 0.0
        for name in set(a) & set(b):
            for x, y in zip(a[name], b[name]):
                if abs(x - y) > worst:
                    worst, where = abs(x - y), name
        check(a.get("global_step") == b.get("global_step") == (steps,),
              f"global steps differ: {a.get('global_step')} vs {b.get('global_step')}")
        print(f"{n} workers vs one process on the combined batch: {len(a)} variables, largest difference "
              f"{worst:.3g} ({where})", flush=True)
        check(worst <= 1e-5, f"{n} workers: the weights differ by {worst} in {where}")


def wait_for(c, name, text, timeout):
    t0 = time.time()
    while text not in c.output(name) and time.time() - t0 < timeout:
        time.sleep(0.02)
    return text in c.output(name)


def kill(c, name):
    p, _ = c.procs[name]
    check(p.poll() is None, f"{name} ended before the test could kill it")
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    c.procs[name + "_killed"] = c.procs.pop(name)
    return list(p.args)


def case_lost(samples, tmp, victim):
    step_timeout_ms = 3000
    extra = ["--epoch_number", "60", "--slow_step_ms", "10", "--step_timeout_ms", str(step_timeout_ms),
             "--save_checkpoint_secs", "0.5"]
    # 4 workers: in the ring worker 2's neighbours (1 and 3) see its connections reset at
    # once, the chief (not a neighbour) only when its collective times out.
    c, names = allreduce(samples, "cancer_classifier", tmp, 4, extra)
    try:
        check(wait_for(c, "worker0", "global step", 120), "the chief reported no progress")
        time.sleep(1.0)  # past a periodic checkpoint
        argv = kill(c, victim)
        killed_at = time.time()
        lost = "/job:worker/task:" + victim[len("worker"):]
        survivors = [n for n in ("worker0", "worker1", "worker2", "worker3") if n != victim]
        for s in survivors:
            seen = False
            while time.time() - killed_at < step_timeout_ms / 1000 + 1.5:
                lines = [l for l in c.output(s).splitlines() if "the step at global step" in l and "failed" in l]
                if lines:
                    seen = True
                    check(lost in lines[0], f"{s}'s failed step does not name {lost}: {lines[0]}")
                    break
                time.sleep(0.02)
            elapsed = time.time() - killed_at
            check(seen, f"{s} did not fail its step within --step_timeout_ms ({step_timeout_ms} ms) of the kill")
            print(f"{s} failed its step {elapsed:.2f} s after the kill", flush=True)
        time.sleep(0.5)
        c.start(victim, argv, token(tmp))
        r = finish(c, ["worker0", "worker1", "worker2", "worker3"], 300)
        print("chief:", r, flush=True)
        check(float(r.get("test_accuracy", 0)) >= CANCER_MIN_ACCURACY, f"test accuracy {r.get('test_accuracy')} after a lost worker")
        chief = c.output("worker0")
        if victim == "worker0":
            check("resuming from" in chief, "the restarted chief did not resume from a checkpoint")
        else:
            check("the group is back at global step" in chief and "restored" in chief,
                  "the chief did not restore its last checkpoint when the group formed again")
        back = c.output(survivors[-1])
        check("the group is back at global step" in back, f"{survivors[-1]} never said the group was back")
    finally:
        c.kill_all()


def case_tf_config(samples, tmp):
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    c = Cluster(tmp)
    names = []
    for i in reversed(range(2)):
        env = dict(token(tmp))
        env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        c.start(f"worker{i}", [os.path.join(samples, "cancer_classifier"), "--strategy", "allreduce", "--epoch_number", "20",
                               "--checkpoint_path", os.path.join(tmp, "ckpt"), "--output_path", os.path.join(tmp, "tb")], env)
        names.append(f"worker{i}")
    try:
        r = finish(c, names, 300)
        print("chief:", r, flush=True)
        check(r.get("strategy") == "allreduce" and r.get("workers") == "2", "the chief's RESULT does not say allreduce, 2 workers")
        check(float(r.get("test_accuracy", 0)) >= CANCER_MIN_ACCURACY, f"test accuracy {r.get('test_accuracy')}")
    finally:
        c.kill_all()


def case_ps_refused(samples, tmp):
    ports = free_ports(2)
    p = subprocess.run([os.path.join(samples, "cancer_classifier"), "--strategy", "allreduce", f"--ps_hosts=127.0.0.1:{ports[0]}",
                        f"--worker_hosts=127.0.0.1:{ports[1]}", "--job_name=worker", "--task_index=0",
                        "--checkpoint_path", os.path.join(tmp, "ckpt")],
                       env={**os.environ, **token(tmp)}, capture_output=True, text=True, timeout=60)
    check(p.returncode == 2, f"exit {p.returncode}, not 2")
    check("has no ps tasks" in p.stderr, f"the error does not say allreduce has no ps: {p.stderr!r}")
    # 192.0.2.x (TEST-NET-1): refused before anything listens or dials.
    p = subprocess.run([os.path.join(samples, "cancer_classifier"), "--strategy", "allreduce",
                        "--worker_hosts=192.0.2.1:2222,192.0.2.2:2222", "--job_name=worker", "--task_index=0",
                        "--checkpoint_path", os.path.join(tmp, "ckpt")],
                       env={**os.environ, **token(tmp)}, capture_output=True, text=True, timeout=60)
    check(p.returncode == 2, f"beyond loopback without --trusted_network: exit {p.returncode}, not 2")
    check("neither authenticated nor encrypted" in p.stderr and "--trusted_network" in p.stderr,
          f"the error does not say why: {p.stderr!r}")
    # The algorithm flag: refused with parameter servers, and an unknown name is named.
    p = subprocess.run([os.path.join(samples, "cancer_classifier"), f"--ps_hosts=127.0.0.1:{ports[0]}",
                        f"--worker_hosts=127.0.0.1:{ports[1]}", "--job_name=worker", "--task_index=0",
                        "--allreduce_algorithm", "bcube", "--checkpoint_path", os.path.join(tmp, "ckpt")],
                       env={**os.environ, **token(tmp)}, capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--allreduce_algorithm applies to --strategy allreduce only" in p.stderr,
          f"--allreduce_algorithm with a ps: exit {p.returncode}, {p.stderr!r}")
    p = subprocess.run([os.path.join(samples, "cancer_classifier"), "--allreduce_algorithm", "tree"],
                       env={**os.environ, **token(tmp)}, capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "'tree' is not an all-reduce algorithm" in p.stderr,
          f"--allreduce_algorithm tree: exit {p.returncode}, {p.stderr!r}")


def case_fashion(samples, tmp):
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        print("SKIP: needs Debian's dataset-fashion-mnist", flush=True)
        return 77
    # 4 workers make a global batch of 4 x 64 and a quarter of the steps per epoch: the
    # learning rate scaled by sqrt(4), as one scales Adam's for a larger batch (1e-3 gives
    # 0.884 here, 2e-3 0.889).
    c, names = allreduce(samples, "fashion_mnist", tmp, 4, ["--epoch_number", "10", "--learning_rate", "0.002"])
    try:
        r = finish(c, names, 900)
        print("chief:", r, flush=True)
        check(float(r.get("test_accuracy", 0)) >= 0.88, f"Fashion-MNIST allreduce: test accuracy {r.get('test_accuracy')} < 0.88")
        check(r.get("epochs") == "10", f"the cluster trained {r.get('epochs')} epochs, not the single process's 10")
        check(float(r.get("wire_bytes_per_step", 1e18)) <= wire_bound(r, 4), f"the chief sent {r.get('wire_bytes_per_step')} per step")
    finally:
        c.kill_all()


def case_trace(samples, tmp):
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        print("SKIP: needs Debian's dataset-fashion-mnist", flush=True)
        return 77
    trace = os.path.join(tmp, "trace.json")
    c, names = allreduce(samples, "fashion_mnist", tmp, 2, ["--max_steps", "60", "--trace_path", trace,
                                                            "--allreduce_bucket_bytes", "524288"])
    try:
        finish(c, names, 300)
    finally:
        c.kill_all()
    check("2 gradient bucket(s)" in c.output("worker0"), "the MLP's gradients are not in 2 buckets (512 KiB each)")
    if not check(os.path.exists(trace) and os.path.exists(trace + ".worker1"), "a task wrote no trace"):
        return
    with open(trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc

    def spans(name):
        return [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("name") == name and e.get("ph") == "X"]
    bucket0 = spans("allreduce/bucket_0")
    backward = spans("gradients/dense1/MatMul_grad/MatMul_1")
    overlapping = sum(1 for a in bucket0 if any(a[0] < b[1] and b[0] < a[1] for b in backward))
    print(f"bucket 0's all-reduce overlaps dense1's weight gradient in {overlapping} of {len(bucket0)} steps", flush=True)
    check(len(bucket0) >= 60, f"the trace holds {len(bucket0)} all-reduces of bucket 0, not one per step")
    check(overlapping >= len(bucket0) // 2, "the first bucket's all-reduce rarely overlaps the backward pass")


CASES = {
    "trace": case_trace,
    "equal": case_equal,
    "worker_lost": lambda s, t: case_lost(s, t, "worker2"),
    "chief_lost": lambda s, t: case_lost(s, t, "worker0"),
    "tf_config": case_tf_config,
    "ps_refused": case_ps_refused,
    "fashion": case_fashion,
}


def main():
    case, samples = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix=f"af-allreduce-{case}-")
    try:
        run = CASES.get(case)
        if run is None:
            print(f"unknown case {case}")
            return 2
        code = run(samples, tmp)
        if code is not None:
            return code
    finally:
        if not FAILURES:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
