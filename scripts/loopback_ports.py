"""Free loopback ports for a cluster whose flags name every address before any task starts
(the seeds' --ps_hosts/--worker_hosts), shared by scripts/local_cluster, scripts/chaos and
the tests.

Such ports are picked, released, and bound again later by the tasks. A port picked by a
bind to port 0 comes from the kernel's ephemeral range, the range every other port-0
daemon and every outgoing connection on this machine draws from too, so one of those
could take it in between, or while a killed task restarts on its old port. These ports
are drawn at random from below that range instead, where only an explicit bind can land:
no port-0 bind and no connection's local port can take them.
"""

import random
import socket

# Below the ephemeral range, above the ports where system services usually listen.
LOWEST = 10000


def ephemeral_range():
    """The kernel's ephemeral port range (Linux default 32768-60999)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count, host="127.0.0.1"):
    """`count` distinct ports on `host` that were free a moment ago: each was bound (all at
    once) and released. Raises OSError when no port can be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low, high = ephemeral_range()
    draws = random.SystemRandom()
    candidates = range(LOWEST, low) if low - LOWEST >= 1000 else range(high + 1, 65536)
    held = []
    try:
        tries = 0
        while len(held) < count:
            tries += 1
            port = draws.choice(candidates) if tries <= 200 * count and len(candidates) >= 1000 else 0
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                if port == 0:
                    raise
                continue
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()
