"""PyTorch (eager, CPU) peer for bench/python/driver.py; see peer_common.py."""
import sys

import peer_common
from peer_common import check, clock

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 2

import torch  # noqa: E402

torch.set_num_threads(THREADS)
torch.set_grad_enabled(False)


def scalar_chain(p):
    n, reps = p["n"], p["reps"]
    one = torch.ones((), dtype=torch.float32)

    def sample():
        total = 0.0
        for _ in range(reps):
            y = torch.zeros((), dtype=torch.float32)
            t0 = clock()
            for _ in range(n):
                y = y + one
            total += clock() - t0
            check(y.item() == n, "scalar chain")
        return total * 1e6 / (n * reps)
    return sample, "eager y = y + one from Python"


def one_op(p):
    reps = p["reps"]
    x = torch.ones((), dtype=torch.float32)

    def sample():
        t0 = clock()
        for _ in range(reps):
            y = torch.neg(x)
        s = clock() - t0
        check(y.item() == -1.0, "neg")
        return s * 1e6 / reps
    return sample, "eager torch.neg on a scalar from Python"


def matmul(p):
    n, reps = p["n"], p["reps"]
    a = torch.full((n, n), 1.0 / n, dtype=torch.float32)
    b = torch.ones((n, n), dtype=torch.float32)

    def sample():
        t0 = clock()
        for _ in range(reps):
            c = torch.mm(a, b)
        s = clock() - t0
        check(abs(c[0, 0].item() - 1.0) < 1e-3, "matmul")
        return 2.0 * n ** 3 * reps / s / 1e9
    return sample, "torch.mm"


def add(p):
    e, reps = p["elements"], p["reps"]
    a = torch.full((e,), 1.0, dtype=torch.float32)
    b = torch.full((e,), 2.0, dtype=torch.float32)

    def sample():
        t0 = clock()
        for _ in range(reps):
            c = a + b
        s = clock() - t0
        check(c[e - 1].item() == 3.0, "add")
        return 12.0 * e * reps / s / 1e9
    return sample, "a + b (allocates the result)"


def reduce_sum(p):
    e, reps = p["elements"], p["reps"]
    a = torch.full((e,), 1.0, dtype=torch.float32)

    def sample():
        t0 = clock()
        for _ in range(reps):
            c = a.sum()
        s = clock() - t0
        check(abs(c.item() - e) < 1e-3 * e, "sum")
        return 4.0 * e * reps / s / 1e9
    return sample, "a.sum()"


if __name__ == "__main__":
    threads = "PyTorch %s, torch.set_num_threads(%d) (interop %d), no grad" % (
        torch.__version__, torch.get_num_threads(), torch.get_num_interop_threads())
    peer_common.serve("pytorch", torch.__version__, threads, {
        "scalar_chain": scalar_chain, "one_op": one_op, "matmul": matmul, "add": add, "sum": reduce_sum})
