#!/usr/bin/env python3
"""scripts/chaos: a short chaos run of the cancer classifier.

usage: test_chaos.py CASE CHAOS_SCRIPT [SAMPLE_BINARY]

checks   the script's "nothing torn" checkers on made-up files: TFRecord framing with a
         good file, a truncated last record (allowed) and a flipped byte (torn); a whole
         safetensors file and a cut one; a checkpoint dir with files the index does not
         name (a whole one is counted, a cut one is torn); a hang's stacks cut to our own
         frames; usage errors (exit 2) for a flag the script owns.
short    baseline + chaos run of cancer_classifier, 2 ps + 2 workers, a kill every 3 s for
         20 s (seed 1: the victims cycle through ps, worker and chief, so each role is hit
         at least once): passes only when the script exits 0 (hangs = 0, recoveries =
         kills, the accuracy within 1 point of the baseline, every task accounted for,
         nothing torn); prints the RESULT line. The test accuracy is over 114 examples and
         undisturbed runs differ by up to 4 of them, so a run that missed only the accuracy
         goal is run again (said in the output) with the next training seed (a new split and
         initialization for both runs), 3 runs at most; the last one decides.
short_sync  the same in sync mode (--sync_mode sync --sync_timeout_ms 2000, seed 3: ps0,
         which holds the round barrier, is killed right after the chief).
short_stops  the same in async mode with --stop_fraction 0.5: about half the victims are
         stopped (SIGSTOP) for 2 s instead of killed, past a 1 s peer timeout, so the
         others drop them and they reconnect when continued; recoveries = kills + stops.
"""

import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_checks import FAILURES, check  # noqa: E402


def load(script):
    loader = importlib.machinery.SourceFileLoader("chaos_script", script)
    spec = importlib.util.spec_from_loader("chaos_script", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def frame(mod, payload):
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", mod.masked_crc(length)) + payload + struct.pack("<I", mod.masked_crc(payload))


def safetensors_bytes(values):
    data = struct.pack(f"<{len(values)}f", *values)
    header = json.dumps({"__metadata__": {"step": "7"},
                         "w": {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, len(data)]}}).encode()
    return struct.pack("<Q", len(header)) + header + data


def case_checks(script, tmp):
    mod = load(script)
    # CRC-32C's check value, masked as TFRecord masks it.
    check(mod.crc32c(b"123456789") == 0xE3069283, f"crc32c('123456789') = {mod.crc32c(b'123456789'):#x}")
    good = b"".join(frame(mod, f"event {i}".encode()) for i in range(5))
    p = os.path.join(tmp, "events.out.tfevents.1.test")
    for data, want in [(good, (5, None)), (good[:-3], (4, "truncated")), (good[:5], (0, "truncated"))]:
        with open(p, "wb") as f:
            f.write(data)
        check(mod.read_tfrecords(p) == want, f"framing of {len(data)} bytes: {mod.read_tfrecords(p)}, expected {want}")
    flipped = bytearray(good)
    flipped[len(frame(mod, b"event 0")) + 14] ^= 0x01  # a data byte of record 1
    with open(p, "wb") as f:
        f.write(flipped)
    n, problem = mod.read_tfrecords(p)
    check(n == 1 and problem and "data CRC" in problem, f"a flipped byte was not found: {n} {problem}")

    ckpt = os.path.join(tmp, "ckpt")
    os.makedirs(ckpt)
    whole = safetensors_bytes([1.0, 2.0, 3.0])
    for name in ("model.ckpt-7.safetensors", "model.ckpt-9.safetensors"):
        with open(os.path.join(ckpt, name), "wb") as f:
            f.write(whole)
    with open(os.path.join(ckpt, "checkpoint"), "w") as f:
        json.dump({"latest": "model.ckpt-9.safetensors", "all": ["model.ckpt-7.safetensors", "model.ckpt-9.safetensors"]}, f)
    problems, figures = mod.check_checkpoints(ckpt)
    check(problems == [] and figures["checkpoints"] == 2, f"a whole checkpoint dir: {problems}")
    with open(os.path.join(ckpt, "model.ckpt-9.safetensors"), "wb") as f:
        f.write(whole[:-2])
    with open(os.path.join(ckpt, "model.ckpt-11.safetensors"), "wb") as f:
        f.write(whole)
    with open(os.path.join(ckpt, "model.ckpt-13.safetensors"), "wb") as f:
        f.write(whole[:-1])
    problems, figures = mod.check_checkpoints(ckpt)
    check(any("ckpt-9" in x and "torn" in x for x in problems), f"a cut checkpoint was not found: {problems}")
    check(any("ckpt-13" in x and "not named" in x and "torn" in x for x in problems),
          f"a cut unindexed checkpoint was not found: {problems}")
    # A whole one the index does not name (a kill between the rename and the index) is
    # counted, not failed.
    check(figures["unindexed"] == ["model.ckpt-11.safetensors"] and not any("ckpt-11" in x for x in problems),
          f"the whole unindexed checkpoint: {figures['unindexed']} {problems}")

    # A hang's report: gdb's stacks cut to our own frames, identical threads counted.
    bt = """Thread 3 (Thread 0x7f (LWP 12) "af-worker"):
#0  __futex_abstimed_wait_common64 (private=0) at ./nptl/futex-internal.c:57
#1  0x00007f in actorflow::runtime::(anonymous namespace)::EdgeRendezvous::wait<int>(long) () from libactorflow.so
#2  0x00007f in actorflow::net::WorkerPool::loop() () from libactorflow.so
Thread 2 (Thread 0x7e (LWP 11) "af-worker"):
#0  0x00007f in actorflow::runtime::EdgeRendezvous::wait<int>(long) () from libactorflow.so
#1  0x00007f in actorflow::net::WorkerPool::loop() () from libactorflow.so
Thread 1 (Thread 0x7d (LWP 10) "node"):
#0  0x00007f in epoll_wait (epfd=4) at epoll_wait.c:30
#1  0x00007f in actorflow::net::run_io_spinning(asio::io_context&, std::function<bool ()> const&) () from libactorflow.so
"""
    digest = mod.stack_digest(bt)
    check(digest == ["2x runtime::EdgeRendezvous::wait <- net::WorkerPool::loop", "1x net::run_io_spinning"],
          f"stack_digest: {digest}")

    # Steps ended by their deadline are found in the tasks' logs, whichever side said so.
    logs = os.path.join(tmp, "logs")
    os.makedirs(logs)
    with open(os.path.join(logs, "ps0.1.log"), "w") as f:
        f.write("02:11:34.026 [actorflow-node /job:ps/task:0] partition step 9 for 127.0.0.1:5 failed: DeadlineExceeded: "
                "step 9 did not finish at /job:ps/task:0/cpu:0 within 10000 ms (waiting for edges 35 from "
                "/job:ps/task:1/cpu:0)\nglobal step 300/3000  loss 0.1\n")
    with open(os.path.join(logs, "worker0.2.log"), "w") as f:
        f.write("step 4 on /job:ps/task:1 at af://127.0.0.1:6: no answer before the deadline\n")
    with open(os.path.join(logs, "hang.txt"), "w") as f:
        f.write("did not finish at (not a task's log)\n")
    found = mod.stuck_steps(logs)
    check(len(found) == 2 and found[0].startswith("ps0.1.log: ") and "waiting for edges 35" in found[0]
          and found[1].startswith("worker0.2.log: "), f"stuck_steps: {found}")
    check(mod.stuck_steps(os.path.join(tmp, "no-such-dir")) == [], "stuck_steps of a missing dir")

    p = subprocess.run([script, sys.executable, "--", "--checkpoint_path", tmp], capture_output=True, text=True, timeout=30)
    check(p.returncode == 2 and "--checkpoint_path is set by scripts/chaos" in p.stderr,
          f"an owned flag: exit {p.returncode}, {p.stderr!r}")


def chaos_run(script, sample, workdir, seed=1, sample_flags=(), script_flags=()):
    ps = [] if "--strategy" in script_flags else ["--ps", "2"]  # all-reduce training has no ps
    argv = [script, sample, *ps, "--workers", "2", "--interval", "3", "--duration", "20", "--seed", str(seed), *script_flags,
            "--hang_timeout", "30", "--timeout", "100", "--workdir", workdir, "--",
            "--epoch_number", "100", "--slow_step_ms", "10", "--save_checkpoint_secs", "0.5",
            # A step stuck past this fails and its task recovers, inside the hang timeout.
            # Such a step is a bug all the same: the run below reports how many there were.
            "--step_timeout_ms", "10000", *sample_flags]
    t0 = time.time()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    seconds = time.time() - t0
    sys.stdout.write(p.stderr)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    print(lines[0] if lines else "no RESULT line", f"({seconds:.0f} s)", flush=True)
    if seconds > 120:  # about 85 s on an idle 2-core machine; other load stretches it
        print(f"note: the short chaos run took {seconds:.0f} s (more than 2 minutes: a loaded machine?)", flush=True)
    reasons = [l.split("FAILED: ", 1)[1] for l in p.stderr.splitlines() if l.startswith("chaos: FAILED: ")]
    return p, lines, reasons


# Sync training: seed 3 kills ps0 (which holds the round barrier) right after the chief,
# so the chief's restore sends the global step back behind the surviving ps's accumulators.
SYNC = {"seed": 3, "sample_flags": ("--sync_mode", "sync", "--sync_timeout_ms", "2000")}
# Hung tasks: stopped past the peer timeout, the others drop them; continued, they rejoin.
# All-reduce training (no ps): a kill fails every survivor's step; the group forms again
# and the chief restores its last checkpoint into every replica.
ALLREDUCE = {"script_flags": ("--strategy", "allreduce")}
STOPS = {"seed": 5, "script_flags": ("--stop_fraction", "0.5", "--stop_seconds", "2"),
         "sample_flags": ("--heartbeat_ms", "250", "--peer_timeout_ms", "1000")}


def case_short(script, sample, tmp, seed=1, sample_flags=(), script_flags=()):
    if not os.path.exists(sample):
        print(f"SKIP: {sample} is not built", flush=True)
        return 77
    # The test accuracy is over 114 examples (0.88 points each), and undisturbed runs of
    # this configuration already differ by up to 4 examples (async updates race: 0.956 to
    # 0.991 in 8 runs). So a run that missed ONLY the accuracy goal is run again (baseline
    # included), at most 3 runs in all; the last one decides. Any other miss decides at once.
    # Each run trains with its own seed (--seed of the sample: the split and the initial
    # weights): runs with one seed on one machine are not independent draws (a local run
    # once missed three times by the same 2 examples, 0.9649 against 0.9825).
    for attempt in range(1, 4):
        flags = (*sample_flags, "--seed", str(attempt))
        p, lines, reasons = chaos_run(script, sample, os.path.join(tmp, f"run{attempt}"), seed, flags, script_flags)
        if p.returncode == 0 or not reasons or not all("more than 1 point below the baseline" in r for r in reasons):
            break
        if attempt < 3:
            print(f"run {attempt} missed the accuracy goal alone (within the noise of undisturbed runs): again", flush=True)
    check(len(lines) == 1, f"the script printed {len(lines)} RESULT lines: {p.stdout!r}")
    check(p.returncode == 0, f"the chaos run missed its goals (exit {p.returncode}): {reasons}")
    r = dict(kv.split("=", 1) for kv in lines[0].split()[1:]) if lines else {}
    kills, stops = int(r.get("kills", 0)), int(r.get("stops", 0))
    check(kills + stops >= 3 and int(r.get("recoveries", -1)) == kills + stops and r.get("hangs") == "0",
          f"kills {r.get('kills')} stops {r.get('stops')} recoveries {r.get('recoveries')} hangs {r.get('hangs')}")
    if "--stop_fraction" in script_flags:
        check(stops >= 1 and kills >= 1, f"a run with --stop_fraction 0.5 should both stop and kill: {lines}")
    m = re.search(r"kills(?: and stops)? by role ps=(\d+) worker=(\d+) chief=(\d+)", p.stderr)
    roles = m.groups()[1:] if "--strategy" in script_flags else m.groups() if m else ()
    check(m and all(int(x) >= 1 for x in roles), f"not every role was killed: {m.group(0) if m else p.stderr[-500:]}")
    return None


def main():
    case, script = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix=f"af-test-chaos-{case}-")
    code = None
    try:
        if case == "checks":
            case_checks(script, tmp)
        elif case == "short":
            code = case_short(script, sys.argv[3], tmp)
        elif case == "short_stops":
            code = case_short(script, sys.argv[3], tmp, **STOPS)
        elif case == "short_allreduce":
            code = case_short(script, sys.argv[3], tmp, **ALLREDUCE)
        elif case == "short_sync":
            code = case_short(script, sys.argv[3], tmp, **SYNC)
        else:
            print(f"unknown case {case}")
            return 2
    finally:
        if not FAILURES:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"logs kept in {tmp}", flush=True)
    if code is not None:
        return code
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
