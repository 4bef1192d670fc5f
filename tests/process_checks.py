"""What the Python process tests share: failures collected as they happen, free loopback
ports, and the processes a case left behind (found by a marker in their command line,
such as the case's unique temporary folder)."""

import os
import signal
import socket

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print(f"FAIL: {message}", flush=True)


def check(condition, message):
    if not condition:
        fail(message)
    return condition


def free_ports(n):
    """n distinct free loopback ports (bound at once, then released)."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


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
