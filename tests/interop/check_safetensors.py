"""Opens an ActorFlow checkpoint with the real safetensors reader and compares it with
the values the C++ test wrote (a JSON file: name -> {dtype, shape, values}).
Usage: check_safetensors.py CHECKPOINT EXPECTED_JSON"""
import json
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file


def main():
    path, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f)
    tensors = load_file(path)
    errors = []
    if set(tensors) != set(expected):
        errors.append(f"names differ: file has {sorted(tensors)}, expected {sorted(expected)}")
    for name, exp in expected.items():
        if name not in tensors:
            continue
        arr = tensors[name]
        if str(arr.dtype) != exp["dtype"]:
            errors.append(f"{name}: dtype {arr.dtype}, expected {exp['dtype']}")
        if list(arr.shape) != exp["shape"]:
            errors.append(f"{name}: shape {list(arr.shape)}, expected {exp['shape']}")
        want = np.array(exp["values"], dtype=arr.dtype).reshape(exp["shape"])
        if not np.array_equal(arr, want):
            errors.append(f"{name}: values {arr.ravel()[:8]} differ from expected {want.ravel()[:8]}")
    with safe_open(path, framework="np") as f:
        meta = f.metadata() or {}
    for key in ("crc32c.data", "crc32c.header", "step"):
        if key not in meta:
            errors.append(f"__metadata__ lacks {key!r}: {meta}")
    if errors:
        print("\n".join(errors))
        return 1
    print(f"OK: {len(tensors)} tensors match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
