"""Reads an ActorFlow event file with TensorBoard's own loaders and checks what the C++
test wrote (a JSON file of expectations).
Usage: check_events.py LOGDIR EXPECTED_JSON"""
import glob
import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.compat.proto import graph_pb2
from tensorboard.util import tensor_util

errors = []


def check(cond, what):
    if not cond:
        errors.append(what)


def close(a, b, tol=1e-6):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def main():
    logdir, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        exp = json.load(f)
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    check(len(files) == 1, f"expected one event file, found {files}")

    # Raw events, each parsed as a tensorboard.Event proto; then as the server loads them
    # (migrated to tensors; a graph event also yields a graph-metadata event).
    events = list(event_file_loader.LegacyEventFileLoader(files[0]).Load())
    check(len(events) > 0, "no events")
    check(events[0].file_version == "brain.Event:2", f"first event: {events[0]}")
    migrated = list(event_file_loader.EventFileLoader(files[0]).Load())
    check(len(migrated) >= len(events), f"{len(migrated)} migrated events for {len(events)} raw ones")

    # The legacy accumulator reads simple_value and histo directly.
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0, event_accumulator.GRAPH: 0})
    acc.Reload()
    for tag, points in exp["scalars"].items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        check(len(got) == len(points), f"scalar {tag}: {got} vs {points}")
        for (s, v), (es, ev) in zip(got, points):
            check(s == es and close(v, ev), f"scalar {tag}: got step {s} value {v}, expected {es} {ev}")
    for tag, hists in exp["histograms"].items():
        got = acc.Histograms(tag)
        check(len(got) == len(hists), f"histogram {tag}: {len(got)} events, expected {len(hists)}")
        for h, e in zip(got, hists):
            hv = h.histogram_value
            check(h.step == e["step"], f"histogram {tag}: step {h.step} vs {e['step']}")
            check(hv.num == e["num"] and sum(hv.bucket) == e["num"], f"histogram {tag}: num {hv.num}, buckets sum {sum(hv.bucket)}")
            check(close(hv.min, e["min"]) and close(hv.max, e["max"]), f"histogram {tag}: min/max {hv.min} {hv.max}")
            check(close(hv.sum, e["sum"]), f"histogram {tag}: sum {hv.sum} vs {e['sum']}")
            check(list(hv.bucket_limit) == sorted(hv.bucket_limit), f"histogram {tag}: edges not increasing")

    # What TensorBoard's server uses: summaries migrated to tensors by data_compat.
    pacc = plugin_event_accumulator.EventAccumulator(logdir, size_guidance={
        plugin_event_accumulator.TENSORS: 0, plugin_event_accumulator.GRAPH: 0})
    pacc.Reload()
    for tag, points in exp["scalars"].items():
        vals = [(t.step, float(tensor_util.make_ndarray(t.tensor_proto))) for t in pacc.Tensors(tag)]
        check([s for s, _ in vals] == [s for s, _ in points], f"plugin scalars {tag}: {vals}")
    for tag, hists in exp["histograms"].items():
        for t, e in zip(pacc.Tensors(tag), hists):
            arr = tensor_util.make_ndarray(t.tensor_proto)
            check(arr.ndim == 2 and arr.shape[1] == 3 and arr[:, 2].sum() == e["num"],
                  f"plugin histogram {tag}: {arr.shape} counts {arr[:, 2].sum() if arr.ndim == 2 else arr}")

    graph = acc.Graph()
    check(isinstance(graph, graph_pb2.GraphDef), "no graph")
    nodes = {n.name: n for n in graph.node}
    for name, want in exp["graph"].items():
        n = nodes.get(name)
        if n is None:
            errors.append(f"graph lacks node {name}; has {sorted(nodes)[:20]}")
            continue
        check(n.op == want["op"], f"node {name}: op {n.op} vs {want['op']}")
        check(list(n.input) == want["input"], f"node {name}: inputs {list(n.input)} vs {want['input']}")
        check(n.device == want.get("device", ""), f"node {name}: device {n.device!r}")
        if "shape" in want:
            shapes = n.attr["_output_shapes"].list.shape
            dims = [d.size for d in shapes[0].dim] if shapes else None
            check(dims == want["shape"], f"node {name}: _output_shapes {dims} vs {want['shape']}")
    check(pacc.Graph() is not None, "the plugin accumulator has no graph")

    if errors:
        print("\n".join(errors))
        return 1
    print(f"OK: {len(events)} events, {len(nodes)} graph nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
