"""Runs every benchmark case: ours against each peer, alternately, in one run.

Started by bench/run (standard library only). The C++ programs listed in
<build>/bench/programs.txt run as workers (`prog --serve`): each owns some cases and
gives ours plus its in-process peers (libtorch, memcpy). The Python peers
(torch_peer.py, tf_peer.py) run as workers in the bench venv. For each case and each
peer: a warm-up, then ours and the peer alternate (A B A B ...) for N pairs, and the
medians are compared. Prints one `BENCH` line per case and peer, then a table, and
writes <build>/bench/results.json (and appends to history.jsonl).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

import readme_table

HERE = os.path.dirname(os.path.abspath(__file__))

# Cases the driver runs itself, not through a program's `--serve` protocol (they start
# servers, clusters and load generators): serving (serving_case.py), dist_training
# (dist_training_case.py), allreduce_training (allreduce_training_case.py) and
# sparse_training (sparse_training_case.py). Not in --quick; run when named or in a full run.
DRIVER_CASES = ("serving", "dist_training", "allreduce_training", "sparse_training")


class Worker:
    def __init__(self, name, argv, log=None):
        self.name = name
        self.log = log
        err = open(log, "w") if log else sys.stderr
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     text=True, bufsize=1)
        if log:
            err.close()

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            where = ""
            if self.log:
                try:
                    with open(self.log) as f:
                        lines = [x.strip() for x in f if x.strip()]
                    where = ": %s; see %s" % (lines[-1] if lines else "no output", self.log)
                except OSError:
                    where = "; see " + self.log
            raise RuntimeError("%s exited (code %s) on '%s'%s" % (self.name, self.proc.wait(), line.split()[0], where))
        return json.loads(reply)

    def close(self):
        try:
            if self.proc.poll() is None:
                self.ask("quit")
        except (RuntimeError, OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def fmt(v):
    a = abs(v)
    if a >= 100:
        return "%.1f" % v
    if a >= 10:
        return "%.2f" % v
    if a >= 0.1:
        return "%.3f" % v
    return "%.4g" % v


def cpu_clock_ghz():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1]) / 1000
    except OSError:
        pass
    return 0.0


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def _say(line):
    print(line)
    sys.stdout.flush()


def sample(worker, side):
    r = worker.ask("sample " + side)
    if not r.get("ok"):
        raise RuntimeError("%s/%s: %s" % (worker.name, side, r.get("error")))
    return r["value"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pairs", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=-1)
    ap.add_argument("--python", default="", help="the bench venv's python ('' = no Python peers)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--readme", default="", help="bench/README.md: rewrite its results table with these rows")
    ap.add_argument("--commit", default="?", help="the HEAD commit the programs were built from")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    load_before = loadavg()
    # libtorch and PyTorch run their intra-op pools on libgomp, whose idle workers spin
    # by default: on 2 shared cores a spinning worker steals the core its own main thread
    # needs, and their training steps took 3 to 25x longer (bimodal) than with passive
    # waiting. Every worker inherits this (ours and TensorFlow do not use OpenMP).
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")

    bench_dir = os.path.join(args.build, "bench")
    with open(os.path.join(bench_dir, "programs.txt")) as f:
        programs = [p.strip() for p in f if p.strip()]

    workers, owner, cases = [], {}, []
    failures = 0
    for prog in programs:
        w = Worker(prog, [os.path.join(bench_dir, prog), "--serve"])
        workers.append(w)
        r = w.ask("list %d" % int(args.quick))
        for c in r["cases"]:
            c["program"] = w
            owner[c["name"]] = w
            cases.append(c)

    unknown = [c for c in args.cases if c not in owner and c not in DRIVER_CASES]
    if unknown:
        print("unknown case(s): %s; known: %s" % (" ".join(unknown), " ".join(list(owner) + list(DRIVER_CASES))),
              file=sys.stderr)
        return 2
    if args.cases:
        cases = [c for c in cases if c["name"] in args.cases]
    elif args.quick:
        skipped = [c["name"] for c in cases if c["skip_in_quick"]] + list(DRIVER_CASES)
        cases = [c for c in cases if not c["skip_in_quick"]]
        if skipped:
            print("# --quick skips: %s" % " ".join(skipped))

    py_peers = []
    if args.python:
        for script in ("torch_peer.py", "tf_peer.py"):
            w = None
            try:
                log = os.path.join(bench_dir, script.replace(".py", ".log"))
                w = Worker(script, [args.python, os.path.join(HERE, script), str(args.threads)], log)
                r = w.ask("hello")
                if not r.get("ok"):
                    raise RuntimeError(r.get("error"))
                w.name = r["peer"]
                py_peers.append(w)
                print("# peer %s %s: %s" % (r["peer"], r["version"], r["threads"]))
            except (RuntimeError, OSError, ValueError) as e:
                print("SKIP peer from %s: it did not start (%s)" % (script, e))
                if w is not None:
                    w.close()

    # ---- the network cases: TensorFlow's gRPC runtime as their peer ----
    # bench/python/tf_net_peer.py starts tf.distribute.Server processes, so it is started
    # only when wire_throughput_* or remote_step_latency (bench/net_bench.cpp) runs.
    if args.python and any(c.get("params", {}).get("kind") in ("wire_throughput", "remote_step_latency")
                           for c in cases):
        w = None
        try:
            w = Worker("tf_net_peer.py", [args.python, os.path.join(HERE, "tf_net_peer.py"), str(args.threads)],
                       os.path.join(bench_dir, "tf_net_peer.log"))
            r = w.ask("hello")
            if not r.get("ok"):
                raise RuntimeError(r.get("error"))
            w.name = r["peer"]
            py_peers.append(w)
            print("# peer %s %s: %s" % (r["peer"], r["version"], r["threads"]))
        except (RuntimeError, OSError, ValueError) as e:
            print("SKIP wire_throughput/remote_step_latency vs tensorflow grpc: tf_net_peer.py did not start (%s)" % e)
            if w is not None:
                w.close()
    elif not args.python and any(c.get("params", {}).get("kind") in ("wire_throughput", "remote_step_latency")
                                 for c in cases):
        print("SKIP wire_throughput/remote_step_latency vs tensorflow grpc: no bench venv (--no-python)")

    ghz = cpu_clock_ghz()
    cores = os.cpu_count() or 1
    peak = cores * 32 * ghz
    print("# machine: %d cores, clock %.3f GHz (/proc/cpuinfo), FP32 peak %d x 32 FLOP/cycle x clock = %.0f GFLOP/s"
          % (cores, ghz, cores, peak))
    print("# load average before: %s; OPENBLAS_NUM_THREADS=%s OMP_WAIT_POLICY=%s"
          % (load_before, os.environ.get("OPENBLAS_NUM_THREADS", "(unset)"), os.environ["OMP_WAIT_POLICY"]))
    print("# method: per case and peer, %s warm-up pair(s), then %s alternating pairs (ours, peer); medians"
          % ("1-2" if args.warmup < 0 else args.warmup,
             args.pairs or ("5" if args.quick else "11 (matmul_4096: 5)")))
    sys.stdout.flush()

    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results = []
    for c in cases:
        name, unit, w = c["name"], c["unit"], c["program"]
        own = c.get("params", {})
        warmup = args.warmup if args.warmup >= 0 else own.get(
            "warmup", 1 if name.startswith("matmul_4096") else 2)
        pairs = args.pairs or own.get("pairs") or (5 if args.quick or name.startswith("matmul_4096") else 11)
        internal = bool(c.get("internal"))
        prepared = []  # (worker, side) of every peer
        load_case = loadavg()
        try:
            r = w.ask("prepare %s %d" % (name, int(args.quick)))
            if not r.get("ok"):
                raise RuntimeError(r.get("error"))
            ours = r["sides"][0]
            print("# %s: %s; ours: %s" % (name, c["work"], ours["threads"]))
            if c.get("note"):
                print("#   note: %s" % c["note"])
            prepared += [(w, s) for s in r["sides"][1:]]
            for p in ([] if internal else py_peers):
                pr = p.ask("prepare %s %s" % (name, json.dumps(c["params"], separators=(",", ":"))))
                if pr.get("ok"):
                    prepared += [(p, s) for s in pr["sides"]]
                elif not pr.get("unsupported"):
                    print("SKIP %s vs %s: %s" % (name, p.name, pr.get("error")))
            if not prepared:
                print("BENCH %s ours=n/a peer=n/a ratio=n/a (no peer available)" % name)
            for pw, side in prepared:
                a, b = [], []
                for _ in range(warmup):
                    sample(w, "ours")
                    sample(pw, side["name"])
                for _ in range(pairs):
                    a.append(sample(w, "ours"))
                    b.append(sample(pw, side["name"]))
                ma, mb = statistics.median(a), statistics.median(b)
                ratio = ma / mb
                print("BENCH %s ours=%s%s peer=%s%s ratio=%s (%s)"
                      % (name, fmt(ma), unit, fmt(mb), unit, fmt(ratio),
                         ("internal: " if internal else "") + side["name"]))
                print("#   %s: %s; samples min..max: ours %s..%s, peer %s..%s"
                      % (side["name"], side["threads"], fmt(min(a)), fmt(max(a)), fmt(min(b)), fmt(max(b))))
                if unit == "GFLOP/s" and peak > 0:
                    print("#   of the %.0f GFLOP/s peak: ours %.0f%%, %s %.0f%%"
                          % (peak, 100 * ma / peak, side["name"], 100 * mb / peak))
                sys.stdout.flush()
                faster = ratio if c["higher_is_better"] else 1 / ratio
                res = {"case": name, "ours": ma, "peer": mb, "unit": unit, "ratio": ratio,
                       "peer_name": side["name"], "timestamp": stamp,
                       "higher_is_better": c["higher_is_better"], "ours_speedup": faster,
                       "work": c["work"], "ours_threads": ours["threads"], "peer_threads": side["threads"],
                       "ours_samples": a, "peer_samples": b, "pairs": pairs, "warmup_pairs": warmup,
                       "internal": internal, "load_before": load_case}
                if unit == "GFLOP/s" and peak > 0:
                    res["ours_peak_fraction"] = ma / peak
                    res["peer_peak_fraction"] = mb / peak
                results.append(res)
        except (RuntimeError, OSError, ValueError) as e:
            failures += 1
            print("FAIL %s: %s" % (name, e))
        finally:
            for x in [w] + py_peers:
                try:
                    x.ask("release")
                except (RuntimeError, OSError, ValueError):
                    pass

    # ---- serving and dist_training: run by the driver itself (see DRIVER_CASES) ----
    for name in DRIVER_CASES:
        if not ((name in args.cases) if args.cases else not args.quick):
            continue
        try:
            if name == "serving":
                import serving_case
                results += serving_case.run(args.build, args.quick, fmt, stamp, loadavg, _say)
            elif name == "allreduce_training":
                import allreduce_training_case
                results += allreduce_training_case.run(args.build, args.quick, fmt, stamp, loadavg, _say, args.python,
                                                       args.threads)
            elif name == "dist_training":
                import dist_training_case
                results += dist_training_case.run(args.build, args.quick, fmt, stamp, loadavg, _say, args.python,
                                                  args.threads)
            else:
                import sparse_training_case
                results += sparse_training_case.run(args.build, args.quick, fmt, stamp, loadavg, _say, args.python,
                                                    args.threads)
        except Exception as e:  # noqa: BLE001 - a failed case is reported, the run goes on
            failures += 1
            print("FAIL %s: %s" % (name, e))
            sys.stdout.flush()

    load_after = loadavg()
    for x in workers + py_peers:
        x.close()

    print()
    print(readme_table.HEADER)
    for r in results:
        if not r["internal"]:
            print(readme_table.row(r, fmt, args.commit))
    internal_rows = [r for r in results if r["internal"]]
    if internal_rows:
        print()
        print(readme_table.INTERNAL_HEADER)
        for r in internal_rows:
            print(readme_table.internal_row(r, fmt, args.commit))
    print()
    print("# load average after: %s (2 cores: above ~0.5 before the run means something else was running)" % load_after)

    doc = {"timestamp": stamp, "quick": args.quick, "cores": cores, "clock_ghz": ghz, "peak_gflops": peak,
           "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "threads": args.threads,
           "load_before": load_before, "load_after": load_after, "results": results}
    os.makedirs(bench_dir, exist_ok=True)
    with open(os.path.join(bench_dir, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    with open(os.path.join(bench_dir, "history.jsonl"), "a") as f:
        f.write(json.dumps(doc) + "\n")
    print("# results: %s" % os.path.join(bench_dir, "results.json"))
    if args.readme and results:
        readme_table.update(args.readme, results, fmt, args.commit)
        print("# table rows of %d case(s) written to %s" % (len({r["case"] for r in results}), args.readme))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
