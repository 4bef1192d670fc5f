"""The `serving` case of bench/python/driver.py.

actorflow-serve (build/tools/actorflow-serve) serves the exported Fashion-MNIST MLP
(784-256-128-10, exported by `build/bench/serving --export`, i.e. af::export_model) on
127.0.0.1, port 0 (it prints `LISTENING host:port`). wrk (Debian's /usr/bin/wrk) posts
one-row predictions (`{"instances": [[784 floats]]}`) over 64 connections for 20 s, once
with batching on and once off:

* saturating load: requests/s (and p50/p99 at that load);
* half the saturating load (each connection waits a random 0..2x a think time before
  each request, through wrk's Lua `delay()`; the think time is the connection's share of
  the interval less the answer time a 3 s probe measured, so that the rate reached is
  half): p50 and p99 latency.

The peer is the limit: the same export loaded in-process by af::ServedModel with the
server's session options, one-row predicts called back to back (`build/bench/serving
--in-process`: best of 1, 2 and 4 calling threads, each with idle scheduler threads
polling and waiting, for throughput; the faster one caller for the latency floor). The limit is measured before, between and after the two server runs, and
each server run is compared with the mean of the two limits around it.

Then the batched server once more on one CPU (taskset), with wrk and the gRPC client on
another, against one caller's in-process predicts on the server's CPU: the server's share
without its load generator's CPU taken out of it (`*_one_core` rows).

Every child (server, wrk) dies with the driver (PR_SET_PDEATHSIG) and is killed in a
`finally`, so a failing case leaves nothing running. Standard library only.
"""
import ctypes
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request

CONNECTIONS = 64
WRK = "/usr/bin/wrk"


def _die_with_parent():
    # Runs in the child between fork and exec: SIGKILL when the driver dies.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _kill(proc, grace=10):
    if proc is None or proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _run_json(argv, timeout, every=False):
    """Runs a helper that prints JSON lines; returns the last one parsed (every: all)."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=_die_with_parent)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv[:2]), p.returncode, p.stderr.strip()[-500:]))
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if not lines:
        raise RuntimeError("%s printed no result: %s" % (" ".join(argv[:2]), p.stdout[-300:]))
    if every:
        return [json.loads(x) for x in lines]
    return json.loads(lines[-1])


class Server:
    """actorflow-serve on 127.0.0.1, REST and gRPC on free ports read from its GRPC_LISTENING
    and LISTENING lines (gRPC's comes first)."""

    def __init__(self, binary, base, batching, log_path, prefix=()):
        argv = list(prefix) + [binary, "--model_name", "fashion", "--model_base_path", base, "--host", "127.0.0.1",
                "--rest_api_port", "0", "--port", "0",
                "--access_log", "false", "--file_system_poll_wait_seconds", "0"]
        if batching:
            argv += ["--enable_batching", "--max_batch_size", str(CONNECTIONS)]
        self.argv = argv[len(prefix):]
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     preexec_fn=_die_with_parent)
        self.port = None
        self.grpc_port = None
        deadline = time.monotonic() + 60
        buf = ""
        # The pipe is read with os.read, not readline: readline may take both lines into
        # the file object's buffer, and select() on the descriptor then waits for more
        # that never comes (the server prints nothing after LISTENING).
        fd = self.proc.stdout.fileno()
        pending = ""
        while time.monotonic() < deadline and self.port is None:
            r, _, _ = select.select([fd], [], [], 1.0)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                pending += chunk.decode(errors="replace")
                *lines, pending = pending.split("\n")
                for line in lines:
                    buf += line + "\n"
                    g = re.match(r"GRPC_LISTENING \S+:(\d+)", line)
                    if g:
                        self.grpc_port = int(g.group(1))
                    m = re.match(r"LISTENING \S+:(\d+)", line)
                    if m:
                        self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("actorflow-serve did not print LISTENING (see %s): %s" % (log_path, buf[-300:]))

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def metrics(self):
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as r:
            text = r.read().decode()
        out = {}
        for name in ("actorflow_serve_batch_size_sum", "actorflow_serve_batch_size_count",
                     "actorflow_serve_session_steps_total", "actorflow_serve_predict_requests_total"):
            m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % name, text, re.M)
            out[name] = float(m.group(1)) if m else 0.0
        return out

    def stop(self):
        try:
            _kill(self.proc)
        finally:
            self.log.close()


def _wrk_script(path, body_path, delay_ms):
    # delay(): a random wait of 0..2*delay_ms (mean delay_ms) before each request, so that
    # the 64 connections do not fire in lockstep; wrk times a request from its write.
    # wrk's delays are whole ms: a draw is rounded down or up at random in proportion
    # (floor(d + u), u uniform in [0, 1)), so that the mean stays delay_ms when that is
    # a fraction of a ms, as half the saturating rate of a fast server asks.
    with open(path, "w") as f:
        f.write("""wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("%s", "rb")
wrk.body = f:read("*a")
f:close()
local mean_delay = %.4f
function init(args)
  math.randomseed(math.floor(os.clock() * 1000003) + os.time())
end
if mean_delay > 0 then
  function delay()
    return math.floor(math.random() * 2 * mean_delay + math.random())
  end
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_JSON {"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, ' ..
    '"connect": %%d, "read": %%d, "write": %%d, "status": %%d, "timeout": %%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
""" % (body_path, delay_ms))


def _wrk(url, script, seconds, threads, log, prefix=()):
    argv = list(prefix) + [WRK, "-t%d" % threads, "-c%d" % CONNECTIONS, "-d%ds" % seconds, "--timeout", "10s", "-s", script, url]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=_die_with_parent)
    try:
        out, _ = p.communicate(timeout=seconds + 60)
    finally:
        _kill(p, grace=2)
    log.write("$ %s\n%s\n" % (" ".join(argv), out))
    log.flush()
    m = re.search(r"^WRK_JSON (.*)$", out, re.M)
    if p.returncode != 0 or not m:
        raise RuntimeError("wrk failed (%s): %s" % (p.returncode, out[-400:]))
    r = json.loads(m.group(1))
    bad = r["connect"] + r["read"] + r["write"] + r["status"] + r["timeout"]
    if bad:
        raise RuntimeError("wrk saw %d failed requests (connect %d, read %d, write %d, non-2xx %d, timeout %d)"
                           % (bad, r["connect"], r["read"], r["write"], r["status"], r["timeout"]))
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    r["p50_ms"] = r["p50_us"] / 1e3
    r["p99_ms"] = r["p99_us"] / 1e3
    return r


def _grpc_load(helper, port, seconds, threads, delay_ms, expect, log, prefix=()):
    """build/bench/serving --grpc-load: TF Serving's Predict over gRPC, CONNECTIONS calls in
    flight; the same JSON fields as _wrk's result (rps, p50_ms, p99_ms)."""
    argv = list(prefix) + [helper, "--grpc-load", str(port), "--seconds", str(seconds), "--concurrency", str(CONNECTIONS),
            "--threads", str(threads), "--delay-ms", "%.4f" % delay_ms, "--expect", str(expect)]
    r = _run_json(argv, timeout=seconds + 60)
    log.write("$ %s\n%s\n" % (" ".join(argv), json.dumps(r)))
    log.flush()
    if not r.get("ok"):
        raise RuntimeError("the gRPC load failed: %s" % json.dumps(r))
    return r


def _half_load(measure, sat_rps):
    """The mean think time per connection (ms, may be a fraction) that offers half the
    saturating rate over CONNECTIONS connections: `measure(delay_ms, seconds)` runs the load
    with that think time. Each connection's cycle, think time plus answer time, must last
    CONNECTIONS / (rate / 2) s; the answer time at that load is not known beforehand (with
    batching it includes the batch timeout), so a short probe with the whole interval as
    think time measures it, and the think time is the interval less that."""
    interval_ms = CONNECTIONS * 1000.0 / (sat_rps / 2)
    probe_ms = interval_ms
    probe = measure(probe_ms, 3)
    answer_ms = max(0.0, CONNECTIONS * 1000.0 / probe["rps"] - probe_ms)
    delay_ms = max(0.05, interval_ms - answer_ms)
    return delay_ms


def run(build, quick, fmt, stamp, loadavg, say):
    """Measures the case; returns the result dicts (the driver's schema). `say` prints a line."""
    serve_bin = os.path.join(build, "tools", "actorflow-serve")
    helper = os.path.join(build, "bench", "serving")
    for path, what in ((serve_bin, "actorflow-serve (libboost-dev missing?)"), (helper, "build/bench/serving"),
                       (WRK, "wrk (apt-get install wrk)")):
        if not os.access(path, os.X_OK):
            say("SKIP serving: %s is not built or installed (%s)" % (path, what))
            return []
    # The gRPC half needs the helper's gRPC client (built where actorflow-serve has gRPC).
    probe = subprocess.run([helper, "--grpc-load", "0", "--seconds", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=60)
    grpc_ok = "built without gRPC" not in probe.stdout
    if not grpc_ok:
        say("SKIP serving over gRPC: build/bench/serving was built without gRPC (libgrpc++-dev)")
    seconds = 5 if quick else 20
    limit_seconds = 2 if quick else 3
    wrk_threads = max(1, min(2, os.cpu_count() or 1))
    load_case = loadavg()
    work = tempfile.mkdtemp(prefix="af-bench-serving-")
    log = open(os.path.join(build, "bench", "serving.log"), "w")
    try:
        _run_json([helper, "--export", work], timeout=300)
        base = os.path.join(work, "model")
        os.makedirs(base)
        shutil.move(os.path.join(work, "1"), os.path.join(base, "1"))
        body = os.path.join(work, "body.json")
        with open(os.path.join(work, "expected.json")) as f:
            expected = json.load(f)

        def in_process(rows, callers="1,2,4", prefix=()):
            # Both ways of idle scheduler threads (polling, the library's default; waiting,
            # the server's): the limit is the faster, whichever the server uses.
            out = []
            for polling in ("standalone", "shared"):
                for r in _run_json(list(prefix) + [helper, "--in-process", os.path.join(base, "1"), "--seconds",
                                                   str(limit_seconds), "--callers", callers, "--rows", str(rows),
                                                   "--polling", polling],
                                   timeout=120, every=True):
                    r["polling"] = polling
                    log.write("in-process limit%s: %s\n" % (" (%s)" % " ".join(prefix) if prefix else "", json.dumps(r)))
                    out.append(r)
            return out

        def limit():
            runs = in_process(1)
            best = max(runs, key=lambda r: r["calls_per_s"])
            lat = max((r for r in runs if r["callers"] == 1), key=lambda r: r["calls_per_s"])
            return best, lat

        limits = [limit()]
        runs = {}
        for mode, batching in (("batched", True), ("unbatched", False)):
            srv = Server(serve_bin, base, batching, os.path.join(build, "bench", "serving-%s.log" % mode))
            try:
                # The answer must be the model's before anything is timed.
                req = urllib.request.Request(srv.url("/v1/models/fashion:predict"), data=open(body, "rb").read(),
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=30) as r:
                    got = json.loads(r.read())["predictions"]
                if got != expected:
                    raise RuntimeError("the server predicts %s, the model %s" % (got, expected))
                url = srv.url("/v1/models/fashion:predict")
                sat_script = os.path.join(work, "sat.lua")
                _wrk_script(sat_script, body, 0)
                _wrk(url, sat_script, 2, wrk_threads, log)  # warm-up: connections, pools, plans
                m0 = srv.metrics()
                sat = _wrk(url, sat_script, seconds, wrk_threads, log)
                m1 = srv.metrics()
                steps = m1["actorflow_serve_session_steps_total"] - m0["actorflow_serve_session_steps_total"]
                rows = m1["actorflow_serve_batch_size_sum"] - m0["actorflow_serve_batch_size_sum"]
                # Half the saturating rate (_half_load; the # line gives the rate reached).
                half_script = os.path.join(work, "half.lua")

                def wrk_at(delay, sec):
                    _wrk_script(half_script, body, delay)
                    return _wrk(url, half_script, sec, wrk_threads, log)

                delay_ms = _half_load(wrk_at, sat["rps"])
                half = wrk_at(delay_ms, seconds)
                runs[mode] = {"sat": sat, "half": half, "delay_ms": delay_ms,
                              "mean_batch": rows / steps if steps else 0.0, "argv": " ".join(srv.argv[1:])}
                # The same over gRPC (TF Serving's Predict, a TensorProto of the same row),
                # with build/bench/serving's C++ client: 64 calls in flight over 2 threads.
                if grpc_ok and srv.grpc_port:
                    expect = expected[0]
                    _grpc_load(helper, srv.grpc_port, 2, wrk_threads, 0, expect, log)  # warm-up
                    m0 = srv.metrics()
                    gsat = _grpc_load(helper, srv.grpc_port, seconds, wrk_threads, 0, expect, log)
                    m1 = srv.metrics()
                    gsteps = m1["actorflow_serve_session_steps_total"] - m0["actorflow_serve_session_steps_total"]
                    grows = m1["actorflow_serve_batch_size_sum"] - m0["actorflow_serve_batch_size_sum"]
                    gdelay = _half_load(lambda d, sec: _grpc_load(helper, srv.grpc_port, sec, wrk_threads, d, expect, log),
                                        gsat["rps"])
                    ghalf = _grpc_load(helper, srv.grpc_port, seconds, wrk_threads, gdelay, expect, log)
                    runs[mode]["grpc"] = {"sat": gsat, "half": ghalf, "delay_ms": gdelay,
                                          "mean_batch": grows / gsteps if gsteps else 0.0}
            finally:
                srv.stop()
            limits.append(limit())
            rows_per_step = int(round(runs[mode]["mean_batch"]))
            if rows_per_step > 1:
                # The limit at the batch shape the server merged into: rows/s of in-process
                # predicts of that many rows (a `#` line; the BENCH peer stays the one-row limit).
                runs[mode]["shaped"] = max(in_process(rows_per_step), key=lambda r: r["rows_per_s"])
        pinned = None
        cpus = sorted(os.sched_getaffinity(0))
        taskset = shutil.which("taskset")
        if taskset and len(cpus) >= 2:
            # One core each: the batched server on one core, its load (wrk, then the gRPC
            # client, one thread each) on another, against the in-process limit on the
            # server's core alone. On shared cores the load generator's CPU (wrk ~20 us a
            # request, the gRPC client ~50 us a call) comes out of the server's; this is
            # the server as it runs with its clients on other machines.
            core_s, core_l = [taskset, "-c", str(cpus[0])], [taskset, "-c", str(cpus[1])]

            def limit_one_core():
                return max(in_process(1, callers="1", prefix=core_s), key=lambda r: r["calls_per_s"])

            # An extra: when it fails (a CPU set taskset may not use), the rows above stand.
            try:
                pinned = {"limits": [limit_one_core()], "cores": (cpus[0], cpus[1])}
                srv = Server(serve_bin, base, True, os.path.join(build, "bench", "serving-one-core.log"), prefix=core_s)
                try:
                    url = srv.url("/v1/models/fashion:predict")
                    # sat_script: the saturating script the runs above wrote.
                    _wrk(url, sat_script, 2, 1, log, prefix=core_l)
                    pinned["rest"] = _wrk(url, sat_script, seconds, 1, log, prefix=core_l)
                    if grpc_ok and srv.grpc_port:
                        _grpc_load(helper, srv.grpc_port, 2, 1, 0, expected[0], log, prefix=core_l)
                        pinned["grpc"] = _grpc_load(helper, srv.grpc_port, seconds, 1, 0, expected[0], log, prefix=core_l)
                finally:
                    srv.stop()
                pinned["limits"].append(limit_one_core())
            except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                say("# serving on one core each: failed (%s); the rows above stand" % str(e)[:300])
                pinned = None
        else:
            say("# serving on one core each: skipped (%s)" % ("no taskset" if not taskset else "fewer than 2 CPUs"))
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    results = []
    peer_threads = "af::ServedModel in-process, the server's session options, 1-row predicts back to back"

    def add(case, ours, peer, unit, higher, work_text, ours_samples, peer_samples, peer_name, ours_threads):
        ratio = ours / peer
        say("BENCH %s ours=%s%s peer=%s%s ratio=%s (%s)" % (case, fmt(ours), unit, fmt(peer), unit, fmt(ratio),
                                                           peer_name))
        results.append({"case": case, "ours": ours, "peer": peer, "unit": unit, "ratio": ratio,
                        "peer_name": peer_name, "timestamp": stamp, "higher_is_better": higher,
                        "ours_speedup": ratio if higher else 1 / ratio, "work": work_text,
                        "ours_threads": ours_threads, "peer_threads": peer_threads,
                        "ours_samples": ours_samples, "peer_samples": peer_samples, "pairs": 1,
                        "warmup_pairs": 1, "internal": False, "load_before": load_case})

    say("# serving: actorflow-serve, exported MLP 784-256-128-10, one-row POST :predict, wrk -t%d -c%d -d%ds; "
        "gRPC: build/bench/serving --grpc-load, the same row as a TensorProto, %d calls in flight over %d threads; "
        "limit: in-process one-row predicts (best of 1/2/4 callers, scheduler polling or waiting)"
        % (wrk_threads, CONNECTIONS, seconds, CONNECTIONS, wrk_threads))
    for i, mode in enumerate(("batched", "unbatched")):
        r = runs[mode]
        before, after = limits[i], limits[i + 1]
        peer_rps = statistics.mean([before[0]["calls_per_s"], after[0]["calls_per_s"]])
        lat50 = statistics.mean([before[1]["p50_ms"], after[1]["p50_ms"]])
        lat99 = statistics.mean([before[1]["p99_ms"], after[1]["p99_ms"]])
        threads = "actorflow-serve %s" % r["argv"]
        add("serving_" + mode, r["sat"]["rps"], peer_rps, "req/s", True,
            "one-row predictions over HTTP, %d connections, %d s, saturating" % (CONNECTIONS, seconds),
            [r["sat"]["rps"]], [before[0]["calls_per_s"], after[0]["calls_per_s"]], "in-process limit", threads)
        say("#   %s: saturated p50 %s ms, p99 %s ms; mean rows per session step %.1f; limit %s..%s req/s "
            "(%d callers %s and %d callers %s); %s%% of the limit%s"
            % (mode, fmt(r["sat"]["p50_ms"]), fmt(r["sat"]["p99_ms"]), r["mean_batch"],
               fmt(before[0]["calls_per_s"]), fmt(after[0]["calls_per_s"]), before[0]["callers"], before[0]["polling"],
               after[0]["callers"], after[0]["polling"], fmt(100 * r["sat"]["rps"] / peer_rps),
               " (goal with batching: >= 50%)" if mode == "batched" else ""))
        if "shaped" in r:
            sh = r["shaped"]
            say("#   %s: in-process at the server's mean batch shape (%d rows per predict, %d callers): %s rows/s; "
                "the server reached %s%% of it" % (mode, sh["rows"], sh["callers"], fmt(sh["rows_per_s"]),
                                                  fmt(100 * r["sat"]["rps"] / sh["rows_per_s"])))
        half = r["half"]
        for q, peer_lat in (("p50", lat50), ("p99", lat99)):
            add("serving_%s_%s" % (mode, q), half[q + "_ms"], peer_lat, "ms", False,
                "%s latency of one-row predictions at half the saturating load (%d connections, %d s)"
                % (q, CONNECTIONS, seconds),
                [half[q + "_ms"]], [before[1][q + "_ms"], after[1][q + "_ms"]], "in-process limit", threads)
        say("#   %s at half load: %s req/s offered by wrk (%.0f%% of saturating; mean delay %.2f ms per connection), "
            "p99 %s ms%s; the in-process latency is one caller's predict"
            % (mode, fmt(half["rps"]), 100 * half["rps"] / r["sat"]["rps"], r["delay_ms"], fmt(half["p99_ms"]),
               " (goal: <= 2 ms)" if mode == "batched" else ""))
        if "grpc" in r:
            g = r["grpc"]
            add("serving_grpc_" + mode, g["sat"]["rps"], peer_rps, "req/s", True,
                "one-row Predict calls over gRPC (TensorProto), %d in flight, %d s, saturating" % (CONNECTIONS, seconds),
                [g["sat"]["rps"]], [before[0]["calls_per_s"], after[0]["calls_per_s"]], "in-process limit", threads)
            say("#   gRPC %s: saturated p50 %s ms, p99 %s ms; mean rows per session step %.1f; %s%% of the limit%s"
                % (mode, fmt(g["sat"]["p50_ms"]), fmt(g["sat"]["p99_ms"]), g["mean_batch"],
                   fmt(100 * g["sat"]["rps"] / peer_rps), " (goal with batching: >= 70%)" if mode == "batched" else ""))
            for q, peer_lat in (("p50", lat50), ("p99", lat99)):
                add("serving_grpc_%s_%s" % (mode, q), g["half"][q + "_ms"], peer_lat, "ms", False,
                    "%s latency of one-row gRPC Predict calls at half the saturating load (%d in flight, %d s)"
                    % (q, CONNECTIONS, seconds),
                    [g["half"][q + "_ms"]], [before[1][q + "_ms"], after[1][q + "_ms"]], "in-process limit", threads)
            say("#   gRPC %s at half load: %s req/s offered (%.0f%% of saturating; mean delay %.2f ms per call slot), p99 %s ms%s"
                % (mode, fmt(g["half"]["rps"]), 100 * g["half"]["rps"] / g["sat"]["rps"], g["delay_ms"],
                   fmt(g["half"]["p99_ms"]), " (goal: <= 2 ms)" if mode == "batched" else ""))
    if pinned:
        lb, la = pinned["limits"]
        peer1 = statistics.mean([lb["calls_per_s"], la["calls_per_s"]])
        say("# serving on one core each: the batched server on CPU %d, wrk -t1 -c%d (then the gRPC client, 1 thread) on "
            "CPU %d, %d s saturating; limit: one caller's one-row predicts on CPU %d alone, %s and %s calls/s before "
            "and after" % (pinned["cores"][0], CONNECTIONS, pinned["cores"][1], seconds, pinned["cores"][0],
                           fmt(lb["calls_per_s"]), fmt(la["calls_per_s"])))
        for key, case, what in (("rest", "serving_batched_one_core", "HTTP"), ("grpc", "serving_grpc_batched_one_core", "gRPC")):
            if key not in pinned:
                continue
            rps = pinned[key]["rps"]
            add(case, rps, peer1, "req/s", True,
                "one-row predictions over %s, the server and its load on a core each, %d in flight, %d s, batching"
                % (what, CONNECTIONS, seconds),
                [rps], [lb["calls_per_s"], la["calls_per_s"]], "in-process limit, one core",
                "actorflow-serve on one core (taskset), batching on")
            say("#   %s on one core: %s%% of one core's limit (the goal on shared cores: %s)"
                % (what, fmt(100 * rps / peer1), ">= 50% batched" if key == "rest" else ">= 70%"))
    return results
