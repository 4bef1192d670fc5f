"""The worker side of bench/python/driver.py's line protocol, shared by the Python peers.

Requests (one per line on stdin): `hello`, `prepare <case> <params-json>`,
`sample <side>`, `release`, `quit`. Replies: one JSON object per line on stdout, with
"ok": true or "ok": false and "error". A peer module supplies `kinds`: a dict from a
case's params["kind"] to a function(params) -> sampler, where sampler() runs
params["reps"] operations and returns the case's unit (the same formula as ours).
"""
import json
import sys
import time
import traceback

clock = time.perf_counter


def serve(peer_name, version, threads, kinds):
    # Anything the frameworks print must not corrupt the protocol: replies go to the
    # real stdout, stray prints to stderr.
    out = sys.stdout
    sys.stdout = sys.stderr
    sampler = None

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        words = line.split(None, 2)
        if not words:
            continue
        cmd = words[0]
        try:
            if cmd == "hello":
                reply({"ok": True, "peer": peer_name, "version": version, "threads": threads})
            elif cmd == "prepare":
                sampler = None
                params = json.loads(words[2])
                make = kinds.get(params.get("kind"))
                if make is None:
                    reply({"ok": False, "unsupported": True,
                           "error": "%s has no peer for kind %r" % (peer_name, params.get("kind"))})
                    continue
                sampler, detail = make(params)
                reply({"ok": True, "sides": [{"name": peer_name, "threads": threads + ", " + detail}]})
            elif cmd == "sample":
                if sampler is None:
                    raise RuntimeError("sample before prepare")
                reply({"ok": True, "value": float(sampler())})
            elif cmd == "release":
                sampler = None
                reply({"ok": True})
            elif cmd == "quit":
                reply({"ok": True})
                return
            else:
                raise RuntimeError("unknown command " + cmd)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the driver
            traceback.print_exc(file=sys.stderr)
            reply({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})


def check(ok, what):
    if not ok:
        raise RuntimeError("wrong result: " + what)


_fashion = {}


def fashion_mnist(data_dir, split="train"):
    """(x f32 [N, 784] in [0, 1], y i64 [N]) of Debian's dataset-fashion-mnist, read once."""
    import gzip

    import numpy as np

    key = (data_dir, split)
    if key not in _fashion:
        prefix = "train" if split == "train" else "t10k"

        def idx(name):
            with gzip.open("%s/%s-%s-idx%d-ubyte.gz" % (data_dir, prefix, name, 3 if name == "images" else 1)) as f:
                raw = f.read()
            ndim = raw[3]
            dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
            return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)

        x = idx("images").reshape(-1, 784).astype(np.float32) / 255.0
        y = idx("labels").astype(np.int64)
        _fashion[key] = (x, y)
    return _fashion[key]


def batches(p):
    """The batches every side trains on: consecutive rows of params["batch"], in order."""
    x, y = fashion_mnist(p["data_dir"])
    b = p["batch"]
    return [(x[i:i + b], y[i:i + b]) for i in range(0, len(x) - b + 1, b)]


def inference_rows(p):
    """The first params["batch"] Fashion-MNIST test rows (f32 [batch, 784])."""
    return fashion_mnist(p.get("data_dir", "/usr/share/datasets/fashion-mnist"), "test")[0][:p["batch"]]
