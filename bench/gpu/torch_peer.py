#!/usr/bin/env python3
"""PyTorch's side of scripts/gpu-check's GPU benchmarks, run by the GPU
machine's own python3 (torch 2.11 with CUDA; no numpy needed).

  torch_peer.py makedata DIR     synthetic Fashion-MNIST-shaped IDX files (random pixels
                                 and labels, gzip) for both sides: the machine has no
                                 network and the bundle does not carry the data set; an
                                 epoch's time does not depend on the pixel values.
  torch_peer.py mlp DIR          one epoch of samples/fashion_mnist's MLP (784-256-128-10,
                                 relu, Adam 0.001, batch 64, shuffled) on cuda:0
  torch_peer.py cnn DIR          one epoch of its CNN (conv 5x5x32 SAME, max pool 2x2,
                                 conv 5x5x64 SAME, max pool 2x2, dense 1024, dropout 0.5,
                                 dense 10; Adam 0.001, batch 64)
  torch_peer.py overhead         eager launch overhead: us per op of a chain of relu on a
                                 one-element tensor, synchronized once at the end

Each prints one line: PEER <what> seconds=<s> peak_bytes=<torch.cuda.max_memory_allocated>
(overhead: PEER overhead us_per_op=<us>). The epoch does what samples/fashion_mnist's
does: batches read from host memory each step (bytes, scaled on the GPU), as our input
pipeline feeds the host's batches; the loss read each step; then the test set evaluated
in batches of 1000 and a checkpoint saved. It is timed from its first step to a
synchronize after the checkpoint.
"""
import gzip
import os
import struct
import sys
import time


def makedata(d):
    os.makedirs(d, exist_ok=True)
    for part, n in (("train", 60000), ("t10k", 10000)):
        with gzip.open(os.path.join(d, part + "-images-idx3-ubyte.gz"), "wb", compresslevel=1) as f:
            f.write(struct.pack(">IIII", 0x803, n, 28, 28))
            f.write(os.urandom(n * 784))
        with gzip.open(os.path.join(d, part + "-labels-idx1-ubyte.gz"), "wb", compresslevel=1) as f:
            f.write(struct.pack(">II", 0x801, n))
            f.write(bytes(b % 10 for b in os.urandom(n)))
    print("PEER makedata dir=%s" % d)


def read_idx(torch, path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def epoch(model_name, d):
    import torch
    import torch.nn as nn

    dev = torch.device("cuda:0")
    torch.manual_seed(1)
    images = read_idx(torch, os.path.join(d, "train-images-idx3-ubyte.gz"))
    labels = read_idx(torch, os.path.join(d, "train-labels-idx1-ubyte.gz")).long()
    test_images = read_idx(torch, os.path.join(d, "t10k-images-idx3-ubyte.gz"))
    test_labels = read_idx(torch, os.path.join(d, "t10k-labels-idx1-ubyte.gz")).long()
    torch.cuda.init()
    torch.cuda.reset_peak_memory_stats(dev)
    if model_name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.5), nn.Linear(1024, 10))
    model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    loss_fn = nn.CrossEntropyLoss()
    batch = 64
    n = images.shape[0]
    order = torch.randperm(n)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model.train()
    loss_sum = 0.0
    for start in range(0, n, batch):
        idx = order[start:start + batch]
        x = images[idx].to(dev).float().div_(255.0).unsqueeze(1)
        y = labels[idx].to(dev)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        # The loss each step, as our loop reads it for its progress line.
        loss_sum += loss.item()
    # Then, as our sample's epoch does: the test set in batches of 1000, and a checkpoint.
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, test_images.shape[0], 1000):
            x = test_images[start:start + 1000].to(dev).float().div_(255.0).unsqueeze(1)
            y = test_labels[start:start + 1000].to(dev)
            correct += int((model(x).argmax(1) == y).sum())
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, os.path.join(d, model_name + ".ckpt"))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    print("PEER %s seconds=%.3f peak_bytes=%d final_loss=%.4f test_accuracy=%.4f" %
          (model_name, seconds, torch.cuda.max_memory_allocated(dev), float(loss), correct / test_images.shape[0]))


def overhead():
    import torch

    x = torch.zeros(1, device="cuda:0")
    for _ in range(1000):
        x = torch.relu(x)
    torch.cuda.synchronize()
    best = None
    for _ in range(5):
        n = 20000
        t0 = time.perf_counter()
        for _ in range(n):
            x = torch.relu(x)
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / n * 1e6
        best = us if best is None else min(best, us)
    print("PEER overhead us_per_op=%.3f" % best)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "makedata":
        makedata(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] in ("mlp", "cnn"):
        epoch(sys.argv[1], sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "overhead":
        overhead()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
