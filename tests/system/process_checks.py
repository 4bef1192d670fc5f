"""What the Python process tests share: failures collected as they happen, free loopback
ports (scripts/loopback_ports.py), and the processes a case left behind (found by a marker in their command line,
such as the case's unique temporary folder)."""

import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from loopback_ports import free_ports  # noqa: E402,F401  (shared with scripts/)

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print(f"FAIL: {message}", flush=True)


def check(condition, message):
    if not condition:
        fail(message)
    return condition


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def leftovers(marker):
    """pids of live processes whose command line names marker (not this one)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


def kill_leftovers(marker):
    """Kills what leftovers(marker) finds; returns their pids."""
    pids = leftovers(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
