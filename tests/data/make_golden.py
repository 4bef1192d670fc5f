"""Writes the golden files under tests/data with TensorFlow itself, so the C++ tests prove
that our record reader, Example codec and event-file reader read what TensorFlow writes
(not only what our own writers write). Run once, then commit the outputs:

    python3 -m venv build/.venv-golden
    build/.venv-golden/bin/pip install tensorflow-cpu==2.21.0 tensorboard==2.21.0
    build/.venv-golden/bin/python tests/data/make_golden.py tests/data

Outputs (the tests assert every value listed here):
  examples.tfrecord  three tf.train.Examples written by tf.io.TFRecordWriter
  events.tfevents    an event file written by tf.summary (TF2 scalars and a histogram
                     as tensors) plus a legacy Summary with simple_value and a
                     HistogramProto, written through tf.summary.experimental.write_raw_pb
"""
import glob
import os
import shutil
import sys
import tempfile

import numpy as np
import tensorflow as tf


def feature_int64(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def feature_float(values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def feature_bytes(values):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


# Kept in step with tests/actors/test_data.cpp ("golden TFRecord file written by TensorFlow").
EXAMPLES = [
    {
        "id": feature_int64([0]),
        "ints": feature_int64([-1, 0, 1, 2**40, -(2**63)]),
        "floats": feature_float([0.5, -1.25, 3.0e-5, 1e30]),
        "name": feature_bytes([b"alpha"]),
    },
    {
        "id": feature_int64([1]),
        "ints": feature_int64([]),
        "floats": feature_float([2.0]),
        "name": feature_bytes([b"", b"\x00\xffbinary", "caf\u00e9".encode("utf-8")]),
    },
    {
        "id": feature_int64([2]),
        "ints": feature_int64([7] * 20),
        "floats": feature_float([float(i) / 4 for i in range(12)]),
        "name": feature_bytes([b"gamma"]),
    },
]


def write_records(path):
    with tf.io.TFRecordWriter(path) as w:
        for features in EXAMPLES:
            w.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())


def write_events(path):
    logdir = tempfile.mkdtemp()
    try:
        writer = tf.summary.create_file_writer(logdir)
        with writer.as_default():
            for step, loss in enumerate([0.5, 0.25, 0.125]):
                tf.summary.scalar("loss", loss, step=step)
            tf.summary.histogram("weights", np.array([1.0, 2.0, 2.0, 3.0, 3.0, 3.0]), step=7, buckets=3)
            legacy = tf.compat.v1.Summary(value=[
                tf.compat.v1.Summary.Value(tag="legacy/accuracy", simple_value=0.875),
                tf.compat.v1.Summary.Value(tag="legacy/histo", histo=tf.compat.v1.HistogramProto(
                    min=-1.0, max=4.0, num=5.0, sum=7.5, sum_squares=31.25,
                    bucket_limit=[0.0, 2.0, 1.7976931348623157e308], bucket=[1.0, 2.0, 2.0])),
            ])
            tf.summary.experimental.write_raw_pb(legacy.SerializeToString(), step=9)
        writer.close()
        files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
        assert len(files) == 1, files
        shutil.copyfile(files[0], path)
    finally:
        shutil.rmtree(logdir)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    write_records(os.path.join(out, "examples.tfrecord"))
    write_events(os.path.join(out, "events.tfevents"))
    print(f"tensorflow {tf.__version__}: wrote examples.tfrecord and events.tfevents to {out}")


if __name__ == "__main__":
    main()
