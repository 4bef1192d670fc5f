"""PyTorch (eager, CPU) peer for bench/python/driver.py; see peer_common.py."""
import math
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
    # A reused output, faulted in once here: ours writes into pooled buffers, so the peer
    # does not pay a fresh page fault per 4 KiB either.
    c = torch.zeros((e,), dtype=torch.float32)

    def sample():
        t0 = clock()
        for _ in range(reps):
            torch.add(a, b, out=c)
        s = clock() - t0
        check(c[e - 1].item() == 3.0, "add")
        return 12.0 * e * reps / s / 1e9
    return sample, "torch.add(a, b, out=c) into a reused, pre-faulted output"


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


# ---- training and inference (Fashion-MNIST; the C++ side sends data_dir and batch) ----

def _train_sampler(p, net, opt, what):
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in peer_common.batches(p)]
    steps, per = p["steps"], p["per"]
    state = {"next": 0}
    loss_fn = torch.nn.CrossEntropyLoss()

    def sample():
        with torch.enable_grad():
            t0 = clock()
            for _ in range(steps):
                x, y = data[state["next"] % len(data)]
                state["next"] += 1
                opt.zero_grad()
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
                last = loss.item()  # fetched every step, as ours fetches it
            s = clock() - t0
        check(math.isfinite(last), what + " loss")
        return s * per / steps
    return sample


def mlp_training(p):
    nn = torch.nn
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    return _train_sampler(p, net, opt, "mlp"), "nn.Sequential of Linear+ReLU, torch.optim.SGD(0.1), eager"


def cnn_training(p):
    nn = torch.nn
    net = nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
                        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
                        nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.5),
                        nn.Linear(1024, 10))
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    return _train_sampler(p, net, opt, "cnn"), "NCHW nn.Conv2d/MaxPool2d/Dropout, torch.optim.Adam(1e-3), eager"


def mlp_inference(p):
    nn = torch.nn
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)).eval()
    x = torch.from_numpy(peer_common.inference_rows(p).copy())
    reps = p["reps"]

    def sample():
        t0 = clock()
        for _ in range(reps):
            pred = net(x).argmax(-1)
        s = clock() - t0
        check(pred.shape == (x.shape[0],) and int(pred.min()) >= 0 and int(pred.max()) < 10, "predictions")
        return s * 1e6 / reps
    return sample, "nn.Sequential forward + argmax, no grad (its own random weights: same work)"


if __name__ == "__main__":
    threads = "PyTorch %s, torch.set_num_threads(%d) (interop %d), no grad" % (
        torch.__version__, torch.get_num_threads(), torch.get_num_interop_threads())
    peer_common.serve("pytorch", torch.__version__, threads, {
        "scalar_chain": scalar_chain, "one_op": one_op, "matmul": matmul, "add": add, "sum": reduce_sum,
        "mlp_training": mlp_training, "cnn_training": cnn_training, "mlp_inference": mlp_inference})
