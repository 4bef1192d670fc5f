#!/usr/bin/env python3
"""actorflow-serve's gRPC API against TF Serving's own Python client.

usage: test_serve_grpc.py BUILD_DIR SOURCE_DIR

The client is the PyPI package tensorflow-serving-api (PredictionServiceStub,
ModelServiceStub) with requests built by TensorFlow's tf.make_tensor_proto, from the venv
that scripts/python-venv finds or makes (BUILD_DIR/bench-venv, shared with bench/run).
Without it (no PyPI here) the test exits 77: skipped, never passed; under
AF_REQUIRE_INTEROP=1 it fails instead.

The cancer sample is trained and exported as version 1 and served with batching and a
token, on 127.0.0.1 with port 0 for both APIs. Checked: gRPC predictions equal REST's for
the same rows (one request of 8 rows, 8 of one row, requests built from numpy arrays and
from Python lists, many at once from threads so that REST and gRPC requests share
batches); GetModelMetadata's signature and GetModelStatus's state; and the error codes:
UNAUTHENTICATED without the token or with a wrong one (on all three methods),
NOT_FOUND for an unknown model or version, INVALID_ARGUMENT for a wrong shape, dtype or
input name, a shape of a billion rows filled by one value, an unknown signature and a metadata request without fields, each beside
REST's code for the same mistake. SIGTERM then ends the server with status 0. Then, on
fresh servers: two models from --model_config_file picked by version and version_label; admission (--max_in_flight_requests gives RESOURCE_EXHAUSTED), an 8 MiB
request, a call in flight at SIGTERM answered; TF Serving's warm-up file replayed, and a
failing one failing its version's load. Every server is killed whatever happens.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
VENV_MODULES = ["tensorflow=tensorflow-cpu", "tensorflow_serving=tensorflow-serving-api"]
CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/breast_cancer.csv"


def skip(why):
    if os.environ.get("AF_REQUIRE_INTEROP") == "1":
        print(f"FAIL (AF_REQUIRE_INTEROP=1): {why}", flush=True)
        sys.exit(1)
    print(f"SKIPPED: {why}", flush=True)
    sys.exit(SKIP)


def reexec_in_venv(build, source):
    """Runs this script again with the venv's python, which has the client."""
    venv = os.path.join(build, "bench-venv")
    try:
        r = subprocess.run([os.path.join(source, "scripts", "python-venv"), venv] + VENV_MODULES,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=2700)
    except subprocess.TimeoutExpired:
        skip("scripts/python-venv took over 45 minutes")
    if r.returncode != 0:
        skip("no Python with tensorflow and tensorflow-serving-api: " + r.stderr.strip()[-500:])
    python = r.stdout.strip().splitlines()[-1]
    env = dict(os.environ, AF_SERVE_GRPC_IN_VENV="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1",
               CUDA_VISIBLE_DEVICES="")
    os.execve(python, [python, os.path.abspath(__file__), build, source], env)


FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}", flush=True)
    return cond


def run(cmd, timeout):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stdout[-2000:]}")
    return r.stdout


def train_and_export(sample, work, base, version):
    common = ["--model", "dnn", "--model_network", "16 8", "--seed", str(version), "--checkpoint_path",
              os.path.join(work, f"ckpt{version}"), "--output_path", os.path.join(work, "tb"), "--saved_model_path", base,
              "--model_version", str(version)]
    run([sample, "--mode", "train_from_scratch", "--epoch_number", "2"] + common, 300)
    run([sample, "--mode", "export"] + common, 120)


class Server:
    """actorflow-serve on 127.0.0.1, both ports 0; killed by close() whatever happened."""

    def __init__(self, binary, args, work):
        self.rest_file = os.path.join(work, "rest.port")
        self.grpc_file = os.path.join(work, "grpc.port")
        for f in (self.rest_file, self.grpc_file):
            if os.path.exists(f):
                os.remove(f)
        self.log = open(os.path.join(work, "serve.log"), "w")
        argv = [binary, "--host", "127.0.0.1", "--rest_api_port", "0", "--port", "0", "--port_file", self.rest_file,
                "--grpc_port_file", self.grpc_file, "--access_log=false"] + args
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(self.rest_file):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("actorflow-serve did not start: " + self.log_text()[-2000:])
                time.sleep(0.05)
            # The gRPC port file is written before the REST one.
            self.rest_port = int(open(self.rest_file).read())
            self.grpc_port = int(open(self.grpc_file).read())
        except BaseException:
            self.close()
            raise

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.log.close()


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if os.environ.get("AF_SERVE_GRPC_IN_VENV") != "1":
        serve_bin = os.path.join(build, "tools", "actorflow-serve")
        sample = os.path.join(build, "samples", "cancer_classifier")
        if not os.path.exists(CSV):
            skip(f"python3-sklearn is not installed ({CSV})")
        for path in (serve_bin, sample):
            if not os.access(path, os.X_OK):
                skip(f"{path} is not built")
        helptext = subprocess.run([serve_bin, "--help"], stdout=subprocess.PIPE, text=True, timeout=30).stdout
        if "--grpc_port_file" not in helptext:
            skip("actorflow-serve was built without gRPC (libgrpc++-dev, protobuf-compiler-grpc missing)")
        reexec_in_venv(build, source)
    sys.exit(in_venv(build))


def in_venv(build):
    import numpy as np

    rows = np.loadtxt(CSV, delimiter=",", skiprows=1, usecols=range(30), dtype=np.float32)
    work = tempfile.mkdtemp(prefix="af_serve_grpc_")
    try:
        return serve_and_check(build, work, rows)
    finally:
        subprocess.run(["rm", "-rf", work])


def serve_and_check(build, work, rows):
    import json
    import threading
    import urllib.error
    import urllib.request

    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc, predict_pb2,
                                         prediction_service_pb2_grpc)

    base = os.path.join(work, "cancer")
    train_and_export(os.path.join(build, "samples", "cancer_classifier"), work, base, 1)
    token = "grpc-test-token-0123456789"
    with open(os.path.join(work, "token"), "w") as f:
        f.write(token + "\n")
    server = Server(os.path.join(build, "tools", "actorflow-serve"),
                    ["--model_name", "cancer", "--model_base_path", base, "--auth_token_file", os.path.join(work, "token"),
                     "--enable_batching", "--max_batch_size", "16", "--batch_timeout_micros", "2000"], work)
    try:
        auth = [("authorization", "Bearer " + token)]
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        predictions = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        models = model_service_pb2_grpc.ModelServiceStub(channel)

        def rest(method, path, body=None, token_ok=True):
            req = urllib.request.Request(f"http://127.0.0.1:{server.rest_port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode())
            if token_ok:
                req.add_header("Authorization", "Bearer " + token)
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"{}")

        def predict_request(tensor_proto, name="cancer", version=None, input_name="x", signature=None):
            req = predict_pb2.PredictRequest()
            req.model_spec.name = name
            if version is not None:
                req.model_spec.version.value = version
            if signature is not None:
                req.model_spec.signature_name = signature
            req.inputs[input_name].CopyFrom(tensor_proto)
            return req

        def grpc_code(call, req, metadata=auth):
            try:
                call(req, metadata=metadata, timeout=30)
                return grpc.StatusCode.OK, ""
            except grpc.RpcError as e:
                return e.code(), e.details()

        # ---- predictions: gRPC equals REST ----
        status, doc = rest("POST", "/v1/models/cancer:predict", {"instances": rows[:8].tolist()})
        check(status == 200, f"REST predict: {status} {doc}")
        rest_values = np.array(doc.get("predictions", []), dtype=np.float32)
        resp = predictions.Predict(predict_request(tf.make_tensor_proto(rows[:8])), metadata=auth, timeout=30)
        out = tf.make_ndarray(resp.outputs["probability"])
        check(out.dtype == np.float32 and out.shape == (8,), f"gRPC output is {out.dtype} {out.shape}, not float32 (8,)")
        check(np.array_equal(out, rest_values), f"gRPC predictions {out} differ from REST's {rest_values}")
        check(resp.model_spec.name == "cancer" and resp.model_spec.version.value == 1,
              f"PredictResponse.model_spec: {resp.model_spec}")
        # One row each, from a Python list with an explicit dtype and shape, against REST's
        # answer to the same one-row request. (Exactly equal: one after another, each is a
        # step of its own. A step's rows can differ in their last bits with the number of
        # rows in it, since the kernels block a matrix by its size.)
        for i in range(8):
            s1, d1 = rest("POST", "/v1/models/cancer/versions/1:predict", {"instances": rows[i:i + 1].tolist()})
            tp = tf.make_tensor_proto(rows[i].tolist(), dtype=tf.float32, shape=[1, 30])
            r = predictions.Predict(predict_request(tp, version=1), metadata=auth, timeout=30)
            v = tf.make_ndarray(r.outputs["probability"])
            want1 = np.float32(d1["predictions"][0]) if s1 == 200 else None
            check(v.shape == (1,) and v[0] == want1, f"row {i}: gRPC {v} against REST {want1}")
        # Many at once, REST and gRPC side by side: they share the batcher's steps, whose
        # sizes vary, so equal within float32 rounding of differently blocked sums.
        status, doc = rest("POST", "/v1/models/cancer:predict", {"instances": rows[:64].tolist()})
        want = np.array(doc["predictions"], dtype=np.float32)
        errors = []

        def client(k):
            for j in range(k, 64, 8):
                if k % 2:
                    r = predictions.Predict(predict_request(tf.make_tensor_proto(rows[j:j + 1])), metadata=auth, timeout=60)
                    got = tf.make_ndarray(r.outputs["probability"])[0]
                else:
                    s, d = rest("POST", "/v1/models/cancer:predict", {"instances": rows[j:j + 1].tolist()})
                    got = np.float32(d["predictions"][0]) if s == 200 else None
                if got is None or not np.isclose(got, want[j], rtol=1e-5, atol=1e-9):
                    errors.append(f"row {j} by {'gRPC' if k % 2 else 'REST'}: {got} against {want[j]}")

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        check(not any(t.is_alive() for t in threads), "concurrent clients did not finish within 120 s")
        check(not errors, f"concurrent REST and gRPC predictions differ: {errors[:5]}")

        # The server's threads run under SCHED_BATCH, its main thread's policy before it starts
        # any, gRPC's among them. The server inherits this test's policy, so only from
        # SCHED_OTHER can it show.
        if os.sched_getscheduler(0) == os.SCHED_OTHER:
            grpc_batch, seen = 0, []
            for tid in os.listdir(f"/proc/{server.proc.pid}/task"):
                try:
                    with open(f"/proc/{server.proc.pid}/task/{tid}/comm") as f:
                        name = f.read().strip()
                    policy = os.sched_getscheduler(int(tid))
                except OSError:
                    continue  # the thread ended meanwhile
                seen.append((name, policy))
                if policy == os.SCHED_BATCH and not name.startswith("af-") and name != "serve-batch":
                    grpc_batch += 1
            check(grpc_batch >= 1, f"no gRPC thread runs under SCHED_BATCH: {seen}")
            check(os.sched_getscheduler(server.proc.pid) == os.SCHED_BATCH, "the server's main thread is not under SCHED_BATCH")
            others = [t for t in seen if t[1] != os.SCHED_BATCH]
            check(not others, f"threads of the server not under SCHED_BATCH: {others}")

        # ---- metadata and status ----
        mreq = get_model_metadata_pb2.GetModelMetadataRequest()
        mreq.model_spec.name = "cancer"
        mreq.metadata_field.append("signature_def")
        meta = predictions.GetModelMetadata(mreq, metadata=auth, timeout=30)
        sigs = get_model_metadata_pb2.SignatureDefMap()
        check(meta.metadata["signature_def"].Unpack(sigs), "metadata['signature_def'] is no SignatureDefMap")
        check(meta.model_spec.name == "cancer" and meta.model_spec.version.value == 1, f"metadata model_spec: {meta.model_spec}")
        sig = sigs.signature_def["serving_default"]
        check(sig.method_name == "tensorflow/serving/predict", f"method_name {sig.method_name}")
        x = sig.inputs["x"]
        check(x.dtype == tf.float32.as_datatype_enum and [d.size for d in x.tensor_shape.dim] == [-1, 30],
              f"input x: {x}")
        p = sig.outputs["probability"]
        check(p.dtype == tf.float32.as_datatype_enum and [d.size for d in p.tensor_shape.dim] == [-1], f"output: {p}")
        status, rest_meta = rest("GET", "/v1/models/cancer/metadata")
        rest_sig = rest_meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
        check(set(rest_sig["inputs"]) == set(sig.inputs) and set(rest_sig["outputs"]) == set(sig.outputs),
              f"REST's signature {rest_sig} against gRPC's {sig}")

        sreq = get_model_status_pb2.GetModelStatusRequest()
        sreq.model_spec.name = "cancer"
        st = models.GetModelStatus(sreq, metadata=auth, timeout=30)
        check(len(st.model_version_status) == 1, f"status: {st}")
        v = st.model_version_status[0]
        check(v.version == 1 and v.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE and v.status.error_code == 0,
              f"status of version 1: {v}")

        # ---- error codes, beside REST's for the same mistake ----
        good = tf.make_tensor_proto(rows[:2])
        codes = grpc.StatusCode
        cases = [
            ("no token", predictions.Predict, predict_request(good), [], codes.UNAUTHENTICATED),
            ("wrong token", predictions.Predict, predict_request(good), [("authorization", "Bearer " + token + "x")],
             codes.UNAUTHENTICATED),
            ("metadata without token", predictions.GetModelMetadata, mreq, [], codes.UNAUTHENTICATED),
            ("status without token", models.GetModelStatus, sreq, [], codes.UNAUTHENTICATED),
            ("unknown model", predictions.Predict, predict_request(good, name="other"), auth, codes.NOT_FOUND),
            ("unknown version", predictions.Predict, predict_request(good, version=9), auth, codes.NOT_FOUND),
            ("wrong shape", predictions.Predict, predict_request(tf.make_tensor_proto(rows[:2, :29])), auth,
             codes.INVALID_ARGUMENT),
            ("wrong dtype", predictions.Predict, predict_request(tf.make_tensor_proto(rows[:2].astype(np.float64))), auth,
             codes.INVALID_ARGUMENT),
            # TensorFlow's own rule (the last value repeats) asks for 120 GB in a few bytes.
            ("one value for a billion rows", predictions.Predict,
             predict_request(tf.make_tensor_proto(0.5, dtype=tf.float32, shape=[1_000_000_000, 30])), auth,
             codes.INVALID_ARGUMENT),
            ("wrong input name", predictions.Predict, predict_request(good, input_name="features"), auth,
             codes.INVALID_ARGUMENT),
            ("unknown signature", predictions.Predict, predict_request(good, signature="other"), auth, codes.INVALID_ARGUMENT),
        ]
        unknown_status = get_model_status_pb2.GetModelStatusRequest()
        unknown_status.model_spec.name = "other"
        cases.append(("status of an unknown model", models.GetModelStatus, unknown_status, auth, codes.NOT_FOUND))
        no_fields = get_model_metadata_pb2.GetModelMetadataRequest()
        no_fields.model_spec.name = "cancer"
        cases.append(("metadata without fields", predictions.GetModelMetadata, no_fields, auth, codes.INVALID_ARGUMENT))
        for what, call, req, md, want_code in cases:
            code, details = grpc_code(call, req, md)
            check(code == want_code, f"{what}: {code} ({details}), not {want_code}")
            print(f"ok: {what}: {code.name}: {details}", flush=True)
        for what, code in (("wrong shape", codes.INVALID_ARGUMENT), ("wrong dtype", codes.INVALID_ARGUMENT)):
            _, details = grpc_code(predictions.Predict,
                                   predict_request(tf.make_tensor_proto(rows[:2, :29] if what == "wrong shape" else rows[:2].astype(np.float64))))
            check("input 'x'" in details, f"{what}: the error does not name the input: {details}")
        rest_codes = [
            ("REST no token", rest("POST", "/v1/models/cancer:predict", {"instances": rows[:1].tolist()}, token_ok=False)[0], 401),
            ("REST unknown model", rest("POST", "/v1/models/other:predict", {"instances": rows[:1].tolist()})[0], 404),
            ("REST unknown version", rest("POST", "/v1/models/cancer/versions/9:predict", {"instances": rows[:1].tolist()})[0], 404),
            ("REST wrong shape", rest("POST", "/v1/models/cancer:predict", {"instances": rows[:1, :29].tolist()})[0], 400),
        ]
        for what, got, want_status in rest_codes:
            check(got == want_status, f"{what}: {got}, not {want_status}")

        metrics = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{server.rest_port}/metrics",
                                                                headers={"Authorization": "Bearer " + token}), timeout=30).read().decode()
        check('actorflow_serve_grpc_requests_total{method="Predict",code="0"}' in metrics, "no gRPC predicts in /metrics")

        # ---- SIGTERM: a clean exit ----
        channel.close()
        server.proc.send_signal(signal.SIGTERM)
        try:
            rc = server.proc.wait(timeout=60)
            check(rc == 0, f"actorflow-serve exited {rc} after SIGTERM")
        except subprocess.TimeoutExpired:
            check(False, "actorflow-serve did not exit within 60 s of SIGTERM")
    finally:
        log = server.log_text()
        server.close()
        if FAILURES:
            print("---- server log ----\n" + log[-4000:], flush=True)
    check_config_file(build, work, base, rows)
    check_admission(build, work, base, rows)
    check_warmup_files(build, work, base, rows)
    if FAILURES:
        print(f"{len(FAILURES)} failures", flush=True)
        return 1
    print("all passed", flush=True)
    return 0


def check_config_file(build, work, base, rows):
    """Two models from --model_config_file over gRPC: ModelSpec.version_label and
    .version pick versions, GetModelStatus takes a label, an unknown label is
    INVALID_ARGUMENT, a version the `specific` policy leaves out NOT_FOUND."""
    import shutil

    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc, predict_pb2, prediction_service_pb2_grpc

    other = os.path.join(work, "other")
    for v in (1, 2, 3):
        shutil.copytree(os.path.join(base, "1"), os.path.join(other, str(v)))
    config = os.path.join(work, "models.config")
    with open(config, "w") as f:
        f.write('model_config_list {\n'
                f'  config {{ name: "cancer" base_path: "{base}" model_platform: "tensorflow" '
                '           version_labels { key: "stable" value: 1 } }\n'
                f'  config {{ name: "other" base_path: "{other}" '
                '           model_version_policy { specific { versions: 2 versions: 3 } }\n'
                '           version_labels { key: "canary" value: 3 } }\n'
                '}\n')
    server = Server(os.path.join(build, "tools", "actorflow-serve"), ["--model_config_file", config], work)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def predict(name, version=None, label=None):
            req = predict_pb2.PredictRequest()
            req.model_spec.name = name
            if version is not None:
                req.model_spec.version.value = version
            if label is not None:
                req.model_spec.version_label = label
            req.inputs["x"].CopyFrom(tf.make_tensor_proto(rows[:4]))
            try:
                r = stub.Predict(req, timeout=30)
                return grpc.StatusCode.OK, r.model_spec.version.value, tf.make_ndarray(r.outputs["probability"])
            except grpc.RpcError as e:
                return e.code(), None, None

        code, v, want = predict("cancer", label="stable")
        check(code == grpc.StatusCode.OK and v == 1, f"cancer, label stable: {code} version {v}")
        code, v, got = predict("other")
        check(code == grpc.StatusCode.OK and v == 3, f"other, newest: {code} version {v}")
        check(got is not None and want is not None and np.array_equal(got, want), "other (a copy of cancer's version 1) answers differently")
        code, v, _ = predict("other", label="canary")
        check(code == grpc.StatusCode.OK and v == 3, f"other, label canary: {code} version {v}")
        code, v, _ = predict("other", version=2)
        check(code == grpc.StatusCode.OK and v == 2, f"other, version 2: {code} version {v}")
        code, _, _ = predict("other", version=1)
        check(code == grpc.StatusCode.NOT_FOUND, f"other, version 1 (not in the policy): {code}")
        code, _, _ = predict("other", label="nightly")
        check(code == grpc.StatusCode.INVALID_ARGUMENT, f"other, an unknown label: {code}")
        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = "other"
        req.model_spec.version_label = "canary"
        st = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(req, timeout=30)
        check([s.version for s in st.model_version_status] == [3], f"status of other's canary: {st}")
        channel.close()
        print("ok: two models from a config file over gRPC, versions and labels", flush=True)
    finally:
        log = server.log_text()
        server.close()
        if FAILURES:
            print("---- server log (config file) ----\n" + log[-4000:], flush=True)


def check_admission(build, work, base, rows):
    """--max_in_flight_requests 1 with a one-second batch timeout: while one Predict waits
    in the batch queue, a second gets RESOURCE_EXHAUSTED at once, and the first is answered.
    Then an 8 MiB request (70,000 rows) is answered whole: gRPC's memory quota
    (--max_in_flight_bytes) does not stand in the way of a message under --max_body_bytes.
    Last, SIGTERM while a call waits in the batch queue: the call is answered, exit 0."""
    import grpc
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    server = Server(os.path.join(build, "tools", "actorflow-serve"),
                    ["--model_name", "cancer", "--model_base_path", base, "--max_in_flight_requests", "1", "--enable_batching",
                     "--batch_timeout_micros", "1000000", "--max_batch_size", "64"], work)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

        def request(x):
            req = predict_pb2.PredictRequest()
            req.model_spec.name = "cancer"
            req.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
            return req

        import urllib.request

        def in_flight():
            """The server's count of admitted gRPC Predict calls not yet answered."""
            with urllib.request.urlopen(f"http://127.0.0.1:{server.rest_port}/metrics", timeout=30) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("actorflow_serve_grpc_predicts_in_flight "):
                        return float(line.split()[1])
            return -1

        def wait_in_flight(n):
            deadline = time.monotonic() + 20
            while in_flight() != n and time.monotonic() < deadline:
                time.sleep(0.01)
            return check(in_flight() == n, f"the server never had {n} gRPC call(s) in flight")

        first = stub.Predict.future(request(rows[:1]), timeout=30)
        wait_in_flight(1)  # it waits in the batch queue for the batch timeout
        try:
            stub.Predict(request(rows[1:2]), timeout=30)
            check(False, "a second Predict past --max_in_flight_requests 1 was answered")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "max_in_flight_requests" in e.details(),
                  f"a second Predict past --max_in_flight_requests 1: {e.code()} {e.details()}")
        out = tf.make_ndarray(first.result(timeout=30).outputs["probability"])
        check(out.shape == (1,), f"the first Predict's answer: {out}")
        wait_in_flight(0)
        big = np.tile(rows, (70000 // len(rows) + 1, 1))[:70000]
        r = stub.Predict(request(big), timeout=120)
        out = tf.make_ndarray(r.outputs["probability"])
        check(out.shape == (70000,), f"an 8 MiB Predict: {out.shape}")
        # SIGTERM while a call waits in the batch queue: it is answered, then the server exits 0.
        pending = stub.Predict.future(request(rows[:1]), timeout=30)
        wait_in_flight(1)
        server.proc.send_signal(signal.SIGTERM)
        try:
            out = tf.make_ndarray(pending.result(timeout=30).outputs["probability"])
            check(out.shape == (1,), f"the call in flight at SIGTERM: {out}")
        except grpc.RpcError as e:
            check(False, f"the call in flight at SIGTERM failed: {e.code()} {e.details()}")
        try:
            rc = server.proc.wait(timeout=60)
            check(rc == 0, f"actorflow-serve exited {rc} after SIGTERM with a gRPC call in flight")
        except subprocess.TimeoutExpired:
            check(False, "actorflow-serve did not exit within 60 s of SIGTERM with a gRPC call in flight")
        channel.close()
        print("ok: admission, an 8 MiB request, a call in flight at SIGTERM", flush=True)
    finally:
        log = server.log_text()
        server.close()
        if FAILURES:
            print("---- server log (admission) ----\n" + log[-4000:], flush=True)


def check_warmup_files(build, work, base, rows):
    """TF Serving's warm-up file, written as its documentation says (PredictionLog records
    through tf.io.TFRecordWriter): version 1's three requests are replayed before it is
    served; version 2's, whose request has the wrong shape, fails its load (END with the
    error), and version 1 stays the one served."""
    import shutil

    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc, predict_pb2, prediction_log_pb2

    def write_warmup(version, batch):
        folder = os.path.join(base, str(version), "assets.extra")
        os.makedirs(folder, exist_ok=True)
        with tf.io.TFRecordWriter(os.path.join(folder, "tf_serving_warmup_requests")) as writer:
            for n in (1, 2, 3):
                req = predict_pb2.PredictRequest()
                req.model_spec.name = "cancer"
                req.inputs["x"].CopyFrom(tf.make_tensor_proto(batch[:n]))
                writer.write(prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=req)).SerializeToString())

    write_warmup(1, rows)
    # Version 2: a copy of 1 whose warm-up requests have 29 features, not 30. Copied
    # without signature.txt first, which makes it ready last, as export does.
    staging = os.path.join(work, "v2")
    shutil.copytree(os.path.join(base, "1"), staging)
    write_warmup_dir = os.path.join(staging, "assets.extra")
    shutil.rmtree(write_warmup_dir)
    os.rename(staging, os.path.join(base, "2"))
    write_warmup(2, rows[:, :29])

    server = Server(os.path.join(build, "tools", "actorflow-serve"),
                    ["--model_name", "cancer", "--model_base_path", base, "--file_system_poll_wait_seconds", "0"], work)
    try:
        log = server.log_text()
        check("warmed up version 1 of model 'cancer' with the 3 requests of" in log,
              "version 1's warm-up file was not replayed: " + log[-1500:])
        check("version 2 failed to load" in log and "warm-up" in log, "version 2's broken warm-up did not fail its load: " + log[-1500:])
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        req = get_model_status_pb2.GetModelStatusRequest()
        req.model_spec.name = "cancer"
        st = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(req, timeout=30)
        by_version = {v.version: v for v in st.model_version_status}
        state = get_model_status_pb2.ModelVersionStatus
        check(1 in by_version and by_version[1].state == state.AVAILABLE, f"version 1 is not AVAILABLE: {st}")
        check(2 in by_version and by_version[2].state == state.END and by_version[2].status.error_code == 3 and
              "input 'x'" in by_version[2].status.error_message, f"version 2 is not END with INVALID_ARGUMENT naming x: {st}")
        channel.close()
        print("ok: warm-up files replayed; a failing one fails its version's load", flush=True)
    finally:
        log = server.log_text()
        server.close()
        if FAILURES:
            print("---- server log (warm-up) ----\n" + log[-4000:], flush=True)


if __name__ == "__main__":
    main()
