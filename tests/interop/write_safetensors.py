"""Writes a safetensors file with the real writer, for the C++ reader to restore.
Usage: write_safetensors.py OUT_PATH"""
import sys

import numpy as np
from safetensors.numpy import save_file


def main():
    tensors = {
        "dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5,
        "dense/bias": np.array([-1.25, 2.5, 1e-30], dtype=np.float64),
        "counts": np.array([[1, -2], [3, 2**40]], dtype=np.int64),
        "ids": np.array([7, -8, 9, 2**31 - 1], dtype=np.int32),
        "pixels": np.array([0, 127, 255], dtype=np.uint8),
        "mask": np.array([True, False, True], dtype=np.bool_),
        "global_step": np.array(42, dtype=np.int64),
    }
    save_file(tensors, sys.argv[1], metadata={"written_by": "python safetensors"})
    print("OK")


if __name__ == "__main__":
    main()
