#!/usr/bin/env python3
"""Tests scripts/local_cluster.

usage: test_local_cluster.py launcher LOCAL_CLUSTER ACTORFLOW_NODE
       test_local_cluster.py sample LOCAL_CLUSTER CANCER_CLASSIFIER
       test_local_cluster.py deploy SOURCE_DIR

launcher: the launcher itself, with small bash programs as tasks and the node daemon:
          flags and ports, prefixed whole lines, the chief's status, --grace, --timeout,
          SIGTERM and SIGINT (tasks that ignore SIGTERM, grandchildren), bad options.
sample:   2 ps + 2 workers of the real cancer classifier; exits 77 (skipped) while the
          sample does not take --ps_hosts.
deploy:   deploy/kubernetes's TFJob parses and has its parts (PyYAML when installed, else
          a line check); deploy/slurm's sbatch passes `bash -n` and, with a stand-in srun,
          exports the token from a mode-600 file, refuses a readable one, and runs srun.

Every process a case starts carries the case's unique temporary folder in its command
line; each case ends by checking that none is left, and kills any it finds.
"""

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from process_checks import FAILURES, alive, check, fail, kill_leftovers, leftovers  # noqa: E402

PREFIX = re.compile(rb"^\[(ps|worker)(\d+)\] ")


def check_none_left(marker, what, within=5.0):
    deadline = time.monotonic() + within
    while leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = kill_leftovers(marker)
    check(not pids, f"{what}: processes left running after the launcher exited: {pids}")


class Case:
    """A temporary folder whose path marks every process of the case."""

    def __init__(self, name):
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"af_local_cluster_{name}_")
        print(f"== {name}", flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        kill_leftovers(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def program(self, body):
        # A task's grandchildren run "$(dirname "$0")/nap" (sleep), which names the folder.
        os.symlink(shutil.which("sleep"), os.path.join(self.dir, "nap"))
        path = os.path.join(self.dir, "task.sh")
        with open(path, "w") as f:
            f.write("#!/bin/bash\n" + body)
        os.chmod(path, 0o755)
        return path


def launch(launcher, args, env=None, timeout=60.0):
    """Runs the launcher to its end: (status, stdout bytes, stderr bytes, seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen([launcher] + args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        fail(f"the launcher ran past {timeout} s: {[launcher] + args}")
    return proc.returncode, out, err, time.monotonic() - start


def env_without_token():
    env = dict(os.environ)
    env.pop("ACTORFLOW_TOKEN", None)
    env.pop("ACTORFLOW_TOKEN_FILE", None)
    return env


def show(out, err):
    """The launcher's output, long lines cut and at most 60 lines a stream."""
    for name, data in (("stdout", out), ("stderr", err)):
        lines = data.decode(errors="replace").splitlines()
        print(f"--- {name} ({len(lines)} lines)")
        for line in lines[:30] + (["..."] if len(lines) > 60 else []) + lines[max(30, len(lines) - 30):]:
            print(line if len(line) <= 200 else line[:200] + f"... ({len(line)} chars)")
    sys.stdout.flush()


def task_lines(data, tasks):
    """{task: [lines without prefix]}; lines from neither a task nor the launcher fail."""
    by_task = {t: [] for t in tasks}
    for line in data.splitlines():
        m = PREFIX.match(line)
        if m and (m.group(1) + m.group(2)).decode() in by_task:
            by_task[(m.group(1) + m.group(2)).decode()].append(line[m.end():])
        elif not line.startswith(b"local_cluster: "):
            fail(f"a line without a task's prefix: {line[:200]!r}")
    return by_task


def launcher_pids(err):
    return [int(p) for p in re.findall(rb"^local_cluster: \S+ pid (\d+) at ", err, re.M)]


# ---------------------------------------------------------------------------- launcher cases

FAKE_TASK = r"""
echo "args: $*"
echo "token: ${ACTORFLOW_TOKEN}"
echo "to stderr" >&2
# 200 lines of 3000 bytes, on both streams at once: they must come out whole. The filler
# is made once: a fork per line took seconds on a loaded machine, and a worker still
# printing 1 s (--grace) after the chief's exit was killed mid-stream.
me="${*: -2:1}/${*: -1}"
xs=$(printf '%3000s' | tr ' ' x)
ys=$(printf '%3000s' | tr ' ' y)
for i in $(seq 1 200); do printf 'long %s %03d %s\n' "$me" "$i" "$xs"; done &
for i in $(seq 1 200); do printf 'long %s %03d %s\n' "$me" "$i" "$ys" >&2; done &
wait
case "$*" in
  *"--job_name=worker --task_index=0") sleep 0.5; printf 'chief partial'; exit 3;;
  *"--job_name=ps --task_index=1") exit 5;;
  *"--job_name=ps --task_index=0") "$(dirname "$0")/nap" 1000 & wait;;  # ignores the chief's end; a grandchild
esac
"""


def case_fake_cluster(launcher):
    with Case("fake") as c:
        prog = c.program(FAKE_TASK)
        rc, out, err, took = launch(launcher, ["--ps", "2", "--workers", "2", "--grace", "1", "--", prog, "--flag",
                                               "value with spaces"], env=env_without_token())
        check(rc == 3, f"the launcher returned {rc}, not the chief's status 3")
        check(took < 30, f"took {took:.1f} s")
        check(b"local_cluster: ACTORFLOW_TOKEN is not set: using a random token" in err,
              "no note on stderr that a random token was made")
        tasks = ["ps0", "ps1", "worker0", "worker1"]
        outs, errs = task_lines(out, tasks), task_lines(err, tasks)
        hosts = set()
        tokens = set()
        ports = []
        for t in tasks:
            job, index = re.match(r"(ps|worker)(\d)", t).groups()
            args = [l for l in outs[t] if l.startswith(b"args: ")]
            if not check(len(args) == 1, f"{t}: {len(args)} 'args:' lines"):
                continue
            m = re.fullmatch(rb"args: --flag value with spaces --ps_hosts=(\S+) --worker_hosts=(\S+) "
                             rb"--job_name=(\w+) --task_index=(\d+)", args[0])
            if not check(m, f"{t}: unexpected command line {args[0]!r}"):
                continue
            check(m.group(3).decode() == job and m.group(4).decode() == index,
                  f"{t}: started as {m.group(3)} {m.group(4)}")
            hosts.add((m.group(1), m.group(2)))
            ps, workers = m.group(1).split(b","), m.group(2).split(b",")
            check(len(ps) == 2 and len(workers) == 2, f"{t}: {len(ps)} ps and {len(workers)} workers in its flags")
            ports = [int(h.rsplit(b":", 1)[1]) for h in ps + workers]
            check(all(h.startswith(b"127.0.0.1:") for h in ps + workers), f"{t}: not on 127.0.0.1: {args[0]!r}")
            tokens.update(l for l in outs[t] if l.startswith(b"token: "))
            check(b"to stderr" in errs[t], f"{t}: its stderr line is missing from stderr")
            for stream, lines, fill in (("stdout", outs[t], b"x"), ("stderr", errs[t], b"y")):
                longs = [l for l in lines if l.startswith(b"long ")]
                want = [b"long %s/%s %03d %s" % (f"--job_name={job}".encode(), f"--task_index={index}".encode(), i,
                                                 fill * 3000) for i in range(1, 201)]
                check(longs == want, f"{t}: its 200 long {stream} lines did not come out whole and in order "
                                     f"({len(longs)} lines)")
        check(len(hosts) == 1, f"the tasks were given different clusters: {hosts}")
        check(len(set(ports)) == 4 and all(1024 <= p <= 65535 for p in ports), f"ports {ports}")
        check(len(tokens) == 1 and len(next(iter(tokens), b"")) > len(b"token: ") + 20,
              f"the tasks did not all get one random token: {tokens}")
        check(outs["worker0"][-1:] == [b"chief partial"], "the chief's last line, without a newline, is missing")
        check(re.search(rb"^local_cluster: ps1 \(pid \d+\) exited with status 5$", err, re.M),
              "ps1's status 5 is not reported")
        check(re.search(rb"^local_cluster: the chief exited with status 3$", err, re.M),
              "the chief's status is not reported")
        check(re.search(rb"^local_cluster: ps0 \(pid \d+\) was still running 1 s \(--grace\) after the chief exited",
                        err, re.M), "ps0, still running after --grace, is not reported")
        check(not re.search(rb"worker1 \(pid", err), "worker1 (exit 0) was reported")
        check(len(launcher_pids(err)) == 4, "the launcher did not name the 4 pids")
        check_none_left(c.dir, "fake cluster")
        if FAILURES:
            show(out, err)


def case_clean_exit(launcher):
    with Case("clean") as c:
        prog = c.program('echo "hello from ${*: -2:1} ${*: -1}"\n')
        env = dict(os.environ, ACTORFLOW_TOKEN="a-token-from-the-caller")
        env.pop("ACTORFLOW_TOKEN_FILE", None)
        rc, out, err, _ = launch(launcher, ["--ps", "0", "--workers", "3", prog], env=env)
        check(rc == 0, f"all tasks exit 0 but the launcher returned {rc}")
        check(b"random token" not in err, "a random token was made although ACTORFLOW_TOKEN is set")
        lines = sorted(out.splitlines())
        want = sorted(b"[worker%d] hello from --job_name=worker --task_index=%d" % (i, i) for i in range(3))
        check(lines == want, f"output {lines}")
        check(set(re.findall(rb"^local_cluster: .*$", err, re.M)) == set(re.findall(rb"^local_cluster: \S+ pid .*$", err, re.M)),
              f"unexpected reports on a clean run: {err!r}")
        check_none_left(c.dir, "clean exit")


def case_timeout(launcher):
    with Case("timeout") as c:
        prog = c.program('"$(dirname "$0")/nap" 1000 & wait\n')
        rc, out, err, took = launch(launcher, ["--workers", "2", "--timeout", "1.5", prog])
        check(rc == 124, f"--timeout returned {rc}, not 124")
        check(b"local_cluster: timed out after 1.5 s (--timeout)" in err, f"no timeout message: {err!r}")
        check(took < 10, f"--timeout 1.5 took {took:.1f} s")
        check_none_left(c.dir, "timeout")


def wait_for_lines(proc, pattern, count, seconds):
    """Reads proc's stdout until count lines match; returns (whether they did, the lines read)."""
    seen, lines, buf = 0, [], b""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + seconds
    while seen < count and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        *done, buf = buf.split(b"\n")
        lines += done
        seen += sum(1 for l in done if re.search(pattern, l))
    return seen >= count, lines


def case_signal(launcher, sig, program_args, ready_pattern, what):
    with Case(f"{signal.Signals(sig).name.lower()}_{what}") as c:
        args = [a.replace("{dir}", c.dir) for a in program_args]
        if args[0] == "{program}":
            args[0] = c.program(args[1])
            args = args[:1] + args[2:]
        errpath = os.path.join(c.dir, "launcher.err")
        with open(errpath, "wb") as errfile:
            proc = subprocess.Popen([launcher, "--ps", "1", "--workers", "2", "--"] + args, env=env_without_token(),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errfile,
                                    start_new_session=True)
        try:
            ready, lines = wait_for_lines(proc, ready_pattern, 3, 30)
            if not check(ready, f"{what}: the 3 tasks did not all start: {lines}"):
                with open(errpath, "rb") as f:
                    show(b"\n".join(lines), f.read())
                return
            pids, named_by = [], time.monotonic() + 10  # a task may print before the launcher names it
            while len(pids) < 3 and time.monotonic() < named_by:
                with open(errpath, "rb") as f:
                    pids = launcher_pids(f.read())
                time.sleep(0.05)
            check(len(pids) == 3, f"{what}: the launcher named {len(pids)} pids")
            start = time.monotonic()
            proc.send_signal(sig)
            try:
                rc = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                rc = None
            took = time.monotonic() - start
            check(rc == 128 + sig, f"{what}: the launcher returned {rc} after {signal.Signals(sig).name}, "
                                   f"not {128 + sig}")
            # The launcher waits 2 s (TERM_WAIT_S) before its SIGKILL; the rest is slack for
            # a loaded machine (7.1 s was seen with other clusters training beside it). A
            # launcher that never killed would take the full 20 s.
            check(took < 12, f"{what}: the launcher took {took:.1f} s to end after {signal.Signals(sig).name}")
            left = [p for p in pids if alive(p)]
            check(not left, f"{what}: tasks still alive after the launcher ended: {left}")
            check_none_left(c.dir, what, within=0.5)
            with open(errpath, "rb") as f:
                err = f.read()
            check(f"local_cluster: got {signal.Signals(sig).name}; killed the cluster".encode() in err,
                  f"{what}: no note of the signal on stderr: {err!r}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()


def case_bad_options(launcher):
    with Case("options") as c:
        prog = c.program("exit 0\n")
        cases = [
            (["--ps", "-1", prog], "--ps -1 is out of range"),
            (["--workers", "0", prog], "--workers 0 is out of range"),
            (["--workers=two", prog], "--workers expects a whole number, not 'two'"),
            (["--timeout", "0", prog], "--timeout 0 must be more than 0 seconds"),
            (["--grace", "soon", prog], "--grace expects a number of seconds, not 'soon'"),
            (["--host", "0.0.0.0", prog], "--host 0.0.0.0 is not a loopback address"),
            (["--host", "localhost", prog], "--host 'localhost' is not an IP address"),
            (["--bogus", prog], "unknown option '--bogus'"),
            (["--ps"], "--ps needs a value"),
            ([], "no PROGRAM given"),
            (["--", os.path.join(c.dir, "missing")], f"PROGRAM '{c.dir}/missing' is not an executable file"),
        ]
        for args, message in cases:
            rc, out, err, _ = launch(launcher, args, timeout=20)
            check(rc == 2, f"{args}: returned {rc}, not 2")
            check(f"local_cluster: {message}".encode() in err, f"{args}: stderr lacks '{message}': {err!r}")
            check(b"usage: scripts/local_cluster" in err, f"{args}: no usage line")
            check(not out, f"{args}: printed on stdout: {out!r}")
        rc, out, _, _ = launch(launcher, ["--help"], timeout=20)
        check(rc == 0 and b"usage: scripts/local_cluster" in out, "--help")


def run_launcher(launcher, node):
    case_bad_options(launcher)
    case_fake_cluster(launcher)
    case_clean_exit(launcher)
    case_timeout(launcher)
    # Tasks that ignore SIGTERM and leave a grandchild: the launcher must SIGKILL the groups.
    stubborn = ["{program}", 'trap "" TERM\n"$(dirname "$0")/nap" 1000 &\necho READY\nwhile :; do sleep 1; done\n']
    case_signal(launcher, signal.SIGTERM, stubborn, rb"^\[\w+\] READY$", "stubborn tasks")
    case_signal(launcher, signal.SIGINT, stubborn, rb"^\[\w+\] READY$", "stubborn tasks")
    if os.access(node, os.X_OK):
        case_signal(launcher, signal.SIGTERM, [node, "--host", "127.0.0.1", "--port_file", "{dir}/port"],
                    rb"^\[\w+\] LISTENING 127\.0\.0\.1:\d+$", "actorflow-node")
    else:
        fail(f"{node} is not built")


# ---------------------------------------------------------------------------- the sample

def run_sample(launcher, sample):
    try:
        usage = subprocess.run([sample, "--help"], capture_output=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        fail(f"{sample} --help: {e}")
        return
    if b"--ps_hosts" not in usage:
        print(f"SKIP: {sample} does not take --ps_hosts yet (its --help lists no cluster flags), so it cannot run "
              f"as a cluster; this test runs once it does", flush=True)
        sys.exit(SKIP)
    with Case("cancer") as c:
        args = ["--ps", "2", "--workers", "2", "--timeout", "300", "--grace", "60", "--", sample,
                "--epoch_number", "3", "--checkpoint_path", os.path.join(c.dir, "checkpoint"),
                "--output_path", os.path.join(c.dir, "tensorboard")]
        if b"--sync_mode" in usage:
            args += ["--sync_mode", "async"]
        rc, out, err, took = launch(args=args, launcher=launcher, env=env_without_token(), timeout=330)
        print(f"the cluster ran {took:.1f} s", flush=True)
        check(rc == 0, f"the launcher returned {rc}, not 0")
        tasks = ["ps0", "ps1", "worker0", "worker1"]
        outs, errs = task_lines(out, tasks), task_lines(err, tasks)
        for t in tasks:
            check(any(l.startswith(b"RESULT ") for l in outs[t]), f"{t} printed no RESULT line")
        results = [l for l in outs["worker0"] if l.startswith(b"RESULT ")]
        m = re.search(rb"\btest_accuracy=([0-9.eE+-]+)", results[-1]) if results else None
        if check(m, f"the chief printed no RESULT line with test_accuracy: {results}"):
            accuracy = float(m.group(1))
            print(f"chief: {results[-1].decode()}", flush=True)
            check(0.0 <= accuracy <= 1.0, f"test_accuracy {accuracy}")
        check(not re.search(rb"still running|exited with status [1-9]|killed by", err),
              "a task failed or did not exit on its own (ps tasks exit when the chief ends training)")
        check_none_left(c.dir, "cancer classifier cluster")
        if FAILURES:
            show(out, err)


# ---------------------------------------------------------------------------- deploy/

def check_tfjob(path):
    text = open(path).read()
    check("\t" not in text, f"{path}: has a tab")
    try:
        import yaml
    except ImportError:
        print(f"PyYAML is not installed: checking {path} line by line only", flush=True)
        for needed in ("apiVersion: kubeflow.org/v1", "kind: TFJob", "PS:", "Worker:", "replicas: 2",
                       "- name: tensorflow", "containerPort: 2222", "name: ACTORFLOW_TOKEN", "secretKeyRef:",
                       "- cancer_classifier", "- --sync_mode", "- async"):
            check(needed in text, f"{path}: lacks '{needed}'")
        return
    doc = yaml.safe_load(text)
    check(doc.get("apiVersion") == "kubeflow.org/v1" and doc.get("kind") == "TFJob", f"{path}: not a kubeflow.org/v1 TFJob")
    specs = doc.get("spec", {}).get("tfReplicaSpecs", {})
    check(sorted(specs) == ["PS", "Worker"], f"{path}: replica specs {sorted(specs)}")
    for kind, spec in specs.items():
        check(spec.get("replicas") == 2, f"{path}: {kind} has {spec.get('replicas')} replicas")
        containers = spec.get("template", {}).get("spec", {}).get("containers", [])
        c = next((c for c in containers if c.get("name") == "tensorflow"), None)
        if not check(c, f"{path}: {kind} has no container named tensorflow"):
            continue
        command = c.get("command", []) + c.get("args", [])
        check(command[:1] == ["cancer_classifier"], f"{path}: {kind} runs {command[:1]}")
        joined = " ".join(command)
        check("--sync_mode async" in joined or "--sync_mode=async" in joined, f"{path}: {kind} is not async")
        check("--ps_hosts" not in joined and "--worker_hosts" not in joined, f"{path}: {kind} names hosts (TF_CONFIG should)")
        check({"name": "tfjob-port", "containerPort": 2222} in c.get("ports", []), f"{path}: {kind} has no tfjob-port 2222")
        env = {e.get("name"): e for e in c.get("env", [])}
        check("TF_CONFIG" not in env, f"{path}: {kind} sets TF_CONFIG itself")
        ref = env.get("ACTORFLOW_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
        check(ref.get("name") and ref.get("key"), f"{path}: {kind}'s ACTORFLOW_TOKEN is not from a Secret")
        check(c.get("image"), f"{path}: {kind} has no image")


def check_sbatch(path):
    r = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    check(r.returncode == 0, f"bash -n {path}: {r.stderr}")
    text = open(path).read()
    for needed in ("#SBATCH --nodes=", "#SBATCH --ntasks-per-node=", "srun ", "--num_ps", "--base_port",
                   "--distribution=block"):
        check(needed in text, f"{path}: lacks '{needed}'")
    with Case("sbatch") as c:
        home, build, bindir = (os.path.join(c.dir, d) for d in ("home", "build", "bin"))
        os.makedirs(os.path.join(build, "samples"))
        os.makedirs(bindir)
        os.makedirs(home)
        program = os.path.join(build, "samples", "cancer_classifier")
        with open(program, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        with open(os.path.join(bindir, "srun"), "w") as f:  # prints what the tasks would get
            f.write('#!/bin/bash\necho "SRUN $* TOKEN=$ACTORFLOW_TOKEN"\n')
        for f in (program, os.path.join(bindir, "srun")):
            os.chmod(f, 0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "ACTORFLOW_"))}
        env.update(HOME=home, PATH=bindir + os.pathsep + env.get("PATH", ""), ACTORFLOW_BUILD=build,
                   WORK_DIR=os.path.join(c.dir, "work"))
        r = subprocess.run(["bash", path], env=env, capture_output=True, text=True, cwd=c.dir, timeout=60)
        token_file = os.path.join(home, ".config", "actorflow", "token")
        check(r.returncode == 0, f"{path} with a stand-in srun: status {r.returncode}: {r.stderr}")
        if check(os.path.isfile(token_file), f"{path} made no token file"):
            check(os.stat(token_file).st_mode & 0o777 == 0o600, f"the token file has mode {os.stat(token_file).st_mode & 0o777:o}")
            token = open(token_file).read().strip()
            srun = [l for l in r.stdout.splitlines() if l.startswith("SRUN ")]
            check(len(srun) == 1 and srun[0].endswith(" TOKEN=" + token) and len(token) >= 32,
                  f"srun did not run once with the file's token: {srun}")
            check(srun and f"{program} --num_ps 2 --base_port 2222 --trusted_network --sync_mode async" in srun[0],
                  f"srun's command: {srun}")
            os.chmod(token_file, 0o644)
            r = subprocess.run(["bash", path], env=env, capture_output=True, text=True, cwd=c.dir, timeout=60)
            check(r.returncode != 0 and "readable by you only" in r.stderr and "SRUN" not in r.stdout,
                  f"a token file others can read was used: {r.returncode} {r.stderr}")


def run_deploy(source):
    check_tfjob(os.path.join(source, "deploy", "kubernetes", "cancer-classifier-tfjob.yaml"))
    check_sbatch(os.path.join(source, "deploy", "slurm", "cancer_classifier.sbatch"))


def main(argv):
    if argv[:1] == ["deploy"] and len(argv) == 2:
        run_deploy(argv[1])
    elif len(argv) != 3 or argv[0] not in ("launcher", "sample"):
        print(__doc__, file=sys.stderr)
        return 2
    elif argv[0] == "launcher":
        launcher, other = argv[1:]
        run_launcher(launcher, other)
    else:
        run_sample(argv[1], argv[2])
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
