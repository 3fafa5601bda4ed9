#!/usr/bin/env python3
"""test_grpc.py: gRPC clients, unchanged, against the real rnnd (docs/DESIGN.md §11, docs/HTTP.md
"gRPC").

Starts $RNND_BIN (HTTP and gRPC on free loopback ports) and drives its gRPC front end with:

- Triton's `tritonclient.grpc` (PyPI `tritonclient[grpc]`): every method of
  inference.GRPCInferenceService rnnd serves (live, ready, server and model metadata, model
  ready, config, statistics, the repository index, load and unload), each answer held to what
  the HTTP route of the same name answers; ModelInfer on every golden case with raw tensors
  (raw_input_contents / raw_output_contents) and, through tritonclient's own generated stubs,
  with typed contents (fp32_contents, int64_contents, int_contents), each output within 1e-5
  of PyTorch; errors (NOT_FOUND, INVALID_ARGUMENT with the HTTP 400's very message,
  UNIMPLEMENTED); ModelStreamInfer with `start_stream` / `async_stream_infer`: four stateful
  sequences of the demo digits_stream interleaved chunk by chunk on one stream, with a
  stateless request and a request that fails among them, answered in order, each sequence's
  scores equal to the whole image's within 1e-5, the failing one's error its own; a sequence
  across RepositoryModelLoad of the unchanged model (kept: it scores as the whole image, the
  statistics count on), and one dropped by the load of a changed one;
- grpcio-health-checking's client: Check and Watch of grpc.health.v1;
- TF Serving's PredictionService and ModelService through stubs generated here with
  grpcio-tools from rnnd's own proto/pb/*.proto (tensorflow-serving-api pulls TensorFlow:
  docs/HTTP.md says what running the real package once showed): Predict with float_val and
  with tensor_content against the goldens, GetModelMetadata's signature_def, GetModelStatus,
  Classify and Regress (INVALID_ARGUMENT in TF Serving's words, as for a predict signature);
- grpc-timeout: a deadline shorter than the queue's wait ends the call DEADLINE_EXCEEDED and the
  daemon keeps serving;
- loops: with grpc_threads 3, connections in turn on each loop, each serving inference, repository
  loads and a health Watch that sees the drain;
- metrics and the drain: gRPC calls in rnnd_requests_total; SIGTERM answers the call in
  flight, turns health Watch NOT_SERVING, refuses new calls, exits 0.

Exits 77 (meson SKIP) without the venv tests/run.sh makes (tritonclient[grpc], grpcio-tools,
grpcio-health-checking).  Environment: RNND_BIN, RNND_SRC.
"""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import grpc
    import numpy as np
    import tritonclient.grpc as gc
    import tritonclient.http as httpclient
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg
    from tritonclient.utils import InferenceServerException
    import grpc_tools
except ImportError as e:  # meson reads 77 as SKIP
    print("test_grpc: SKIP: cannot import tritonclient[grpc], grpcio-tools or "
          "grpcio-health-checking (%s); tests/run.sh makes .venv-test with them" % e)
    sys.exit(77)

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, GOLDEN, run_test
from test_tritonclient import FULL, Golden

TOL = 1e-5
DT = {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32",
      np.dtype(np.float16): "FP16"}
INPUTS = (("x", "input"), ("tokens", "tokens"), ("lengths", "lengths"), ("h0", "h0"), ("c0", "c0"))


def grpc_inputs(g, index_dtype=np.int64):
    ins = []
    for key, name in INPUTS:
        if key in g.t:
            a = g.t[key].astype(index_dtype) if g.t[key].dtype == np.int64 else g.t[key]
            i = gc.InferInput(name, list(a.shape), DT[a.dtype])
            i.set_data_from_numpy(a)
            ins.append(i)
    return ins


def close_to(g, key, got, how):
    want = g.t[key]
    if not check(got is not None and got.shape == want.shape, "%s %s: %s shape" % (g.name, how, key),
                 (None if got is None else got.shape, want.shape)):
        return
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0))
    check(err <= TOL, "%s %s: %s within %g of PyTorch" % (g.name, how, key, TOL), err)


# ---------------------------------------------------------------- the control methods

def test_control(c, d):
    """Each method's answer is the HTTP route's (the same functions render both)."""
    h = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
    m = th.MODEL
    check(c.is_server_live() is True and c.is_server_ready() is True, "ServerLive, ServerReady")
    meta = c.get_server_metadata(as_json=True)
    check(meta == h.get_server_metadata(), "ServerMetadata is GET /v2's", (meta, h.get_server_metadata()))
    check(c.is_model_ready(m) is True and c.is_model_ready("no_such") is False,
          "ModelReady: true for a loaded model, false for an unknown one")
    gm, hm = c.get_model_metadata(m, as_json=True), h.get_model_metadata(m)
    check(gm["name"] == hm["name"] and gm["versions"] == hm["versions"] and gm["platform"] == hm["platform"]
          and [(t["name"], t["datatype"], [int(x) for x in t["shape"]]) for t in gm["inputs"]]
          == [(t["name"], t["datatype"], t["shape"]) for t in hm["inputs"]]
          and len(gm["outputs"]) == len(hm["outputs"]), "ModelMetadata is GET /v2/models/M's", (gm, hm))
    gcfg, hcfg = c.get_model_config(m, as_json=True)["config"], h.get_model_config(m)
    check(gcfg["max_batch_size"] == hcfg["max_batch_size"] and gcfg["name"] == m
          and [i["name"] for i in gcfg["input"]] == [i["name"] for i in hcfg["input"]]
          and gcfg["input"][0]["data_type"] == hcfg["input"][0]["data_type"]
          and gcfg["parameters"] == hcfg["parameters"]
          and gcfg["instance_group"][0]["kind"] == hcfg["instance_group"][0]["kind"]
          and int(gcfg["dynamic_batching"]["max_queue_delay_microseconds"])
          == hcfg["dynamic_batching"]["max_queue_delay_microseconds"],
          "ModelConfig is GET .../config's", (gcfg, hcfg))
    before = h.get_inference_statistics(m)["model_stats"][0]["inference_stats"]["success"]["count"]
    c.infer(m, grpc_inputs(Golden(m)))
    gs = c.get_inference_statistics(m, as_json=True)["model_stats"][0]
    check(int(gs["inference_stats"]["success"]["count"]) == before + 1 and gs["version"] == "1",
          "ModelStatistics counts the gRPC inference", gs)
    check(len(c.get_inference_statistics(as_json=True)["model_stats"])
          == len(h.get_inference_statistics()["model_stats"]), "ModelStatistics of every model")
    gi = [(r["name"], r.get("version", ""), r["state"]) for r in c.get_model_repository_index(as_json=True)["models"]]
    hi = [(r["name"], r.get("version", ""), r["state"]) for r in h.get_model_repository_index()]
    check(gi == hi and len(gi) > 50, "RepositoryIndex is POST /v2/repository/index's", (gi[:3], hi[:3]))
    c.unload_model(m)
    check(c.is_model_ready(m) is False, "RepositoryModelUnload: the model is no longer ready")
    try:
        c.infer(m, grpc_inputs(Golden(m)))
        check(False, "inference on an unloaded model fails")
    except InferenceServerException as e:
        check(e.status() == "StatusCode.NOT_FOUND" and "unloaded" in e.message(),
              "inference on an unloaded model is NOT_FOUND, as HTTP's 404", (e.status(), e.message()))
    c.load_model(m)
    check(c.is_model_ready(m) is True and h.is_model_ready(m), "RepositoryModelLoad serves it again")
    try:
        c.load_model(m, config="{}")
        check(False, "a load with a config override is refused")
    except InferenceServerException as e:
        check(e.status() == "StatusCode.INVALID_ARGUMENT" and "parameters.config" in e.message(),
              "a load with a config override is INVALID_ARGUMENT naming parameters.config", e.message())
    h.close()


# ---------------------------------------------------------------- inference

def test_goldens(c, goldens):
    """Raw tensors both ways on every golden case (tritonclient's way)."""
    for g in goldens.values():
        try:
            r = c.infer(g.name, grpc_inputs(g), request_id="gold-" + g.name[:40])
        except InferenceServerException as e:
            check(False, "%s: ModelInfer" % g.name, e)
            continue
        check(r.get_response().id == "gold-" + g.name[:40], "%s: the id comes back" % g.name)
        check(len(r.get_response().raw_output_contents) == len(g.outputs),
              "%s: every output in raw_output_contents" % g.name)
        for key in g.outputs:
            close_to(g, key, r.as_numpy(key), "raw")


def test_compression(c, goldens):
    """compression_algorithm gzip and deflate (grpc-encoding): rnnd decompresses the request, as
    Triton does (it answered UNIMPLEMENTED), and answers uncompressed, which the client reads."""
    for algo in ("gzip", "deflate"):
        for name in FULL[:3]:
            g = goldens[name]
            r = c.infer(g.name, grpc_inputs(g), compression_algorithm=algo)
            for key in g.outputs:
                close_to(g, key, r.as_numpy(key), "compressed %s" % algo)


def test_typed_contents(url, goldens):
    """Typed contents in, through tritonclient's own generated stubs (service_pb2)."""
    stub = pbg.GRPCInferenceServiceStub(grpc.insecure_channel(url))
    for name in FULL:
        g = goldens[name]
        for index_dtype in (np.int64, np.int32):
            rq = pb.ModelInferRequest(model_name=g.name)
            for key, tname in INPUTS:
                if key not in g.t:
                    continue
                a = g.t[key]
                t = rq.inputs.add(name=tname, shape=list(a.shape))
                if a.dtype == np.float32:
                    t.datatype = "FP32"
                    t.contents.fp32_contents.extend(a.ravel().tolist())
                elif index_dtype == np.int64:
                    t.datatype = "INT64"
                    t.contents.int64_contents.extend(a.ravel().tolist())
                else:
                    t.datatype = "INT32"
                    t.contents.int_contents.extend(a.ravel().tolist())
            r = stub.ModelInfer(rq, timeout=60)
            for i, o in enumerate(r.outputs):
                got = np.frombuffer(r.raw_output_contents[i], np.float32).reshape(list(o.shape))
                if o.name in g.t:
                    close_to(g, o.name, got, "typed %s" % np.dtype(index_dtype).name)


def test_errors(c, d):
    g = Golden(th.MODEL)
    x = g.t["x"][:, :, :2]
    i = gc.InferInput("input", list(x.shape), "FP32")
    i.set_data_from_numpy(np.ascontiguousarray(x))
    hi = httpclient.InferInput("input", list(x.shape), "FP32")
    hi.set_data_from_numpy(np.ascontiguousarray(x), binary_data=True)
    h = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
    try:
        h.infer(th.MODEL, [hi])
        http_msg = None
    except InferenceServerException as e:
        http_msg = e.message()
    try:
        c.infer(th.MODEL, [i])
        check(False, "a wrong shape is refused")
    except InferenceServerException as e:
        check(e.status() == "StatusCode.INVALID_ARGUMENT" and e.message() == http_msg,
              "a wrong shape is INVALID_ARGUMENT with HTTP's 400 message", (e.status(), e.message(), http_msg))
    for model, version in (("no_such_model", ""), (th.MODEL, "7")):
        try:
            c.infer(model, grpc_inputs(g), model_version=version)
            check(False, "unknown model/version %s/%s is refused" % (model, version))
        except InferenceServerException as e:
            check(e.status() == "StatusCode.NOT_FOUND", "unknown model/version is NOT_FOUND", e.status())
    # No inputs: HTTP's message, naming the input (was "inputs: missing").
    try:
        h.infer(th.MODEL, [])
        http_msg = None
    except InferenceServerException as e:
        http_msg = e.message()
    try:
        c.infer(th.MODEL, [])
        check(False, "a request without inputs is refused")
    except InferenceServerException as e:
        check(e.status() == "StatusCode.INVALID_ARGUMENT" and e.message() == http_msg and "'input'" in e.message(),
              "no inputs: INVALID_ARGUMENT with HTTP's message naming the input", (e.message(), http_msg))
    # A BYTES input: HTTP's message (was 'unknown datatype "BYTES"', a type Triton has).
    strings = np.array([b"x"] * int(np.prod(g.t["x"].shape)), dtype=np.object_).reshape(g.t["x"].shape)
    bi = gc.InferInput("input", list(strings.shape), "BYTES")
    bi.set_data_from_numpy(strings)
    hb = httpclient.InferInput("input", list(strings.shape), "BYTES")
    hb.set_data_from_numpy(strings, binary_data=True)
    msgs = []
    for cl, inp in ((h, hb), (c, bi)):
        try:
            cl.infer(th.MODEL, [inp])
            msgs.append(None)
        except InferenceServerException as e:
            msgs.append(e.message())
    check(msgs[0] is not None and msgs[1] == msgs[0] and "BYTES" in msgs[0],
          "a BYTES input: INVALID_ARGUMENT with HTTP's message", msgs)
    # class_count (Triton's classification extension) is refused as over HTTP: it was
    # ignored, and the client got the raw FP32 scores where it asked for the top classes.
    i = gc.InferInput("input", list(g.t["x"].shape), "FP32")
    i.set_data_from_numpy(g.t["x"])
    hi = httpclient.InferInput("input", list(g.t["x"].shape), "FP32")
    hi.set_data_from_numpy(g.t["x"], binary_data=True)
    for cl, mod, inp, code in ((c, gc, i, "StatusCode.INVALID_ARGUMENT"), (h, httpclient, hi, "400")):
        try:
            cl.infer(th.MODEL, [inp], outputs=[mod.InferRequestedOutput("h_n", class_count=2)])
            check(False, "class_count is refused (%s)" % code)
        except InferenceServerException as e:
            check(e.status() == code and e.message() == "outputs[0].parameters.classification: not supported",
                  "class_count: %s naming outputs[0].parameters.classification" % code, (e.status(), e.message()))
    stub = pbg.GRPCInferenceServiceStub(grpc.insecure_channel("127.0.0.1:%d" % d.grpc_port))
    try:
        stub.TraceSetting(pb.TraceSettingRequest(), timeout=5)
        check(False, "an unserved method is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNIMPLEMENTED, "an unserved method is UNIMPLEMENTED", e.code())
    h.close()


# ---------------------------------------------------------------- streams of sequences

def test_nul_strings(url):
    """protobuf-c reads strings up to a NUL: "a\\0b" would be the sequence id "a" (another
    client's sequence), "digits_lstm\\0x" digits_lstm.  A string holding a NUL byte is
    INVALID_ARGUMENT naming the field."""
    stub = pbg.GRPCInferenceServiceStub(grpc.insecure_channel(url))

    def infer(model, sid, start):
        r = pb.ModelInferRequest(model_name=model)
        r.parameters["sequence_id"].string_param = sid
        r.parameters["sequence_start"].bool_param = start
        i = r.inputs.add()
        i.name, i.datatype = "input", "FP32"
        i.shape.extend([1, 1, 8])
        i.contents.fp32_contents.extend([0.0] * 8)
        try:
            stub.ModelInfer(r, timeout=10)
            return "OK", ""
        except grpc.RpcError as e:
            return e.code().name, e.details()

    got = infer("digits_stream", "nul\0a", True)
    check(got[0] == "INVALID_ARGUMENT" and "string_param" in got[1] and "NUL" in got[1],
          "a sequence_id string holding a NUL: INVALID_ARGUMENT naming string_param", got)
    got = infer("digits_stream", "nul", False)
    check(got[0] == "INVALID_ARGUMENT" and "never started" in got[1],
          "... and the id cut at its NUL was not started", got)
    got = infer("digits_stream\0x", "other", True)
    check(got[0] == "INVALID_ARGUMENT" and "model_name" in got[1], "a model_name holding a NUL: INVALID_ARGUMENT", got)
    # Not UTF-8 (grpcio's own messages cannot hold it: the bytes are patched), in the id rnnd
    # would echo, which the client's protobuf would then refuse to parse.
    r = pb.ModelInferRequest(model_name="digits_stream", id="QQQQ")
    i = r.inputs.add()
    i.name, i.datatype = "input", "FP32"
    i.shape.extend([1, 1, 8])
    i.contents.fp32_contents.extend([0.0] * 8)
    raw = grpc.insecure_channel(url).unary_unary("/inference.GRPCInferenceService/ModelInfer")
    try:
        raw(r.SerializeToString().replace(b"QQQQ", b"Q\xffQQ"), timeout=10)
        got = "OK", ""
    except grpc.RpcError as e:
        got = e.code().name, e.details()
    check(got[0] == "INVALID_ARGUMENT" and got[1].startswith("id:") and "UTF-8" in got[1],
          "an id that is not UTF-8: INVALID_ARGUMENT naming id", got)


def stream_repo(tmp):
    shutil.copytree(os.path.join(th.SRC, "config", "models", "digits_stream"), os.path.join(tmp, "digits_stream"))
    with open(os.path.join(th.SRC, "config", "models", "digits_lstm", "test_set.json")) as f:
        return json.load(f)


def stream_round(c, xs, whole, algo):
    """One round of test_stream_sequences' stream, its messages compressed with algo or not."""
    how = " (%s)" % algo if algo else ""
    got, lock, done = [], threading.Lock(), threading.Event()
    T = xs[0].shape[1]
    cuts = [0, 2, 3, 5, T]
    n_sent = 4 * (len(cuts) - 1) + 2

    def cb(result, error):
        with lock:
            got.append((result, error))
            if len(got) == n_sent:
                done.set()

    sent = []
    c.start_stream(callback=cb, compression_algorithm=algo)
    for j in range(len(cuts) - 1):
        for k, x in enumerate(xs):
            part = gc.InferInput("input", [1, cuts[j + 1] - cuts[j], x.shape[2]], "FP32")
            part.set_data_from_numpy(np.ascontiguousarray(x[:, cuts[j]:cuts[j + 1]]))
            rid = "s%d-c%d" % (k, j)
            c.async_stream_infer("digits_stream", [part], request_id=rid, sequence_id=1000 + k,
                                 sequence_start=j == 0, sequence_end=j == len(cuts) - 2)
            sent.append(rid)
        if j == 1:
            i = gc.InferInput("input", list(xs[0].shape), "FP32")
            i.set_data_from_numpy(xs[0])
            c.async_stream_infer("digits_stream", [i], request_id="stateless")
            sent.append("stateless")
            c.async_stream_infer("digits_stream", [i], request_id="bad", sequence_id=999)
            sent.append("bad")
    check(len(sent) == n_sent, "the test sent what it counts", len(sent))
    check(done.wait(60), "every request on the stream is answered" + how, len(got))
    c.stop_stream()
    ids = [r.get_response().id if r is not None else "error" for r, e in got]
    check(ids == [s if s != "bad" else "error" for s in sent], "answers in request order" + how, ids)
    errs = [str(e) for r, e in got if e is not None]
    check(len(errs) == 1 and "never started" in errs[0], "the failing request's error is its own" + how, errs)
    by_id = {r.get_response().id: r for r, e in got if r is not None}
    for k in range(4):
        last = by_id["s%d-c%d" % (k, len(cuts) - 2)].as_numpy("scores")
        err = float(np.abs(last - whole[k]).max())
        check(err <= TOL, "sequence %d in chunks on the stream scores as the whole image%s" % (k, how), err)
    err = float(np.abs(by_id["stateless"].as_numpy("scores") - whole[0]).max())
    check(err <= TOL, "a stateless request on the stream" + how, err)


def chunk(c, x, a, b, sid, **kw):
    i = gc.InferInput("input", [1, b - a, x.shape[2]], "FP32")
    i.set_data_from_numpy(np.ascontiguousarray(x[:, a:b]))
    return c.infer("digits_stream", [i], sequence_id=sid, **kw)


def load_mid_sequence(c, d, tmp, x, whole):
    """RepositoryModelLoad of the loaded, unchanged digits_stream keeps it, as Triton does: a
    sequence mid-way goes on to score as its whole image, the statistics count on; a load
    after its weights changed (a new file, as a SIGHUP judges it) rebuilds it and drops the
    sequence (INVALID_ARGUMENT, "was dropped")."""
    def count():
        s = c.get_inference_statistics("digits_stream", as_json=True)["model_stats"][0]
        return int(s["inference_stats"]["success"].get("count", 0))

    T = x.shape[1]
    chunk(c, x, 0, 3, 77, sequence_start=True)
    before = count()
    c.load_model("digits_stream")
    c.load_model("digits_stream")
    try:
        chunk(c, x, 3, 5, 77)
        last = chunk(c, x, 5, T, 77, sequence_end=True).as_numpy("scores")
        err = float(np.abs(last - whole).max())
    except InferenceServerException as e:
        err = e.message()
    check(err <= TOL if isinstance(err, float) else False, "a sequence across RepositoryModelLoad of the unchanged model scores as its whole "
          "image", err)
    check(count() == before + 2, "the load kept the statistics: they count on", (before, count()))
    chunk(c, x, 0, 3, 78, sequence_start=True)
    w = os.path.join(tmp, "digits_stream", "1", "model.safetensors")
    data = open(w, "rb").read()
    os.unlink(w)
    with open(w, "wb") as f:
        f.write(data)
    c.load_model("digits_stream")
    try:
        chunk(c, x, 3, 5, 78)
        check(False, "after RepositoryModelLoad of a changed model, the sequence is dropped")
    except InferenceServerException as e:
        check(e.status() == "StatusCode.INVALID_ARGUMENT" and "was dropped" in e.message(),
              "after RepositoryModelLoad of a changed model, the next chunk: INVALID_ARGUMENT, "
              "was dropped", (e.status(), e.message()))


def test_stream_sequences():
    """Four sequences interleaved chunk by chunk on one ModelStreamInfer stream, a stateless
    request and a failing one among them: answers in request order, each sequence's last
    chunk scoring as its whole image, the failure its own; again with the stream's messages
    compressed (compression_algorithm gzip)."""
    with tempfile.TemporaryDirectory(prefix="rnnd-grpc-seq-") as tmp:
        ts = stream_repo(tmp)
        d = Daemon(repo=tmp)
        try:
            url = "127.0.0.1:%d" % d.grpc_port
            c = gc.InferenceServerClient(url)
            check("sequence_batching" in c.get_model_config("digits_stream", as_json=True)["config"],
                  "ModelConfig of a sequence model has sequence_batching")
            test_nul_strings(url)
            xs = [np.array(ts["x"][k], dtype=np.float32)[None] for k in range(4)]
            whole = []
            for x in xs:
                i = gc.InferInput("input", list(x.shape), "FP32")
                i.set_data_from_numpy(x)
                whole.append(c.infer("digits_stream", [i]).as_numpy("scores"))
            for algo in (None, "gzip"):
                stream_round(c, xs, whole, algo)
            load_mid_sequence(c, d, tmp, xs[0], whole[0])
            c.close()
        finally:
            d.close()


# ---------------------------------------------------------------- health

def test_health(d):
    ch = grpc.insecure_channel("127.0.0.1:%d" % d.grpc_port)
    stub = health_pb2_grpc.HealthStub(ch)
    S = health_pb2.HealthCheckResponse
    for svc in ("", "inference.GRPCInferenceService", "tensorflow.serving.PredictionService", "live"):
        r = stub.Check(health_pb2.HealthCheckRequest(service=svc), timeout=5)
        check(r.status == S.SERVING, "health Check(%r) is SERVING" % svc, r.status)
    try:
        stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=5)
        check(False, "health Check of an unknown service fails")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND, "health Check of an unknown service is NOT_FOUND", e.code())
    watch = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=2)
    first = next(watch)
    check(first.status == S.SERVING, "health Watch says SERVING at once", first.status)
    try:
        next(watch)
        check(False, "health Watch sends nothing while nothing changes")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, "health Watch waits for a change", e.code())
    ch.close()


# ---------------------------------------------------------------- TF Serving

def tfs_stubs(tmp):
    """Python stubs from rnnd's proto/pb, with protobuf's own well-known types."""
    src = os.path.join(th.SRC, "proto", "pb")
    for f in ("tf_framework.proto", "tf_error_codes.proto", "tfs_apis.proto"):
        with open(os.path.join(src, f)) as fi, open(os.path.join(tmp, f), "w") as fo:
            fo.write(fi.read().replace('import "wellknown.proto";',
                                       'import "google/protobuf/any.proto";\n'
                                       'import "google/protobuf/wrappers.proto";'))
    inc = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", tmp, "-I", inc, "--python_out=" + tmp,
                    "--grpc_python_out=" + tmp, "tf_framework.proto", "tf_error_codes.proto", "tfs_apis.proto"],
                   check=True)
    sys.path.insert(0, tmp)
    import tfs_apis_pb2
    import tfs_apis_pb2_grpc
    import tf_framework_pb2
    return tfs_apis_pb2, tfs_apis_pb2_grpc, tf_framework_pb2


def test_tfs(d, goldens):
    with tempfile.TemporaryDirectory(prefix="rnnd-tfs-stubs-") as tmp:
        apis, apis_grpc, fw = tfs_stubs(tmp)
        ch = grpc.insecure_channel("127.0.0.1:%d" % d.grpc_port)
        pred = apis_grpc.PredictionServiceStub(ch)
        ms = apis_grpc.ModelServiceStub(ch)
        for name in FULL[:6]:
            g = goldens[name]
            for how in ("float_val", "tensor_content"):
                rq = apis.PredictRequest()
                rq.model_spec.name = g.name
                rq.model_spec.signature_name = "serving_default"
                for key, tname in INPUTS:
                    if key not in g.t:
                        continue
                    a = g.t[key]
                    t = rq.inputs[tname]
                    t.dtype = fw.DT_FLOAT if a.dtype == np.float32 else fw.DT_INT64
                    t.tensor_shape.dim.extend([fw.TensorShapeProto.Dim(size=s) for s in a.shape])
                    if how == "tensor_content":
                        t.tensor_content = a.tobytes()
                    elif a.dtype == np.float32:
                        t.float_val.extend(a.ravel().tolist())
                    else:
                        t.int64_val.extend(a.ravel().tolist())
                r = pred.Predict(rq, timeout=60)
                check(r.model_spec.name == g.name and r.model_spec.version.value == 1,
                      "%s Predict: model_spec answered" % g.name)
                for key in g.outputs:
                    t = r.outputs[key]
                    got = np.frombuffer(t.tensor_content, np.float32).reshape([x.size for x in t.tensor_shape.dim])
                    close_to(g, key, got, "Predict %s" % how)
        rq = apis.GetModelMetadataRequest(metadata_field=["signature_def"])
        rq.model_spec.name = th.MODEL
        r = pred.GetModelMetadata(rq, timeout=10)
        any_ = r.metadata["signature_def"]
        sigs = apis.SignatureDefMap.FromString(any_.value)
        sd = sigs.signature_def["serving_default"]
        check(any_.type_url.endswith("tensorflow.serving.SignatureDefMap")
              and sd.method_name == "tensorflow/serving/predict"
              and set(sd.inputs) >= {"input", "lengths", "h0", "c0"} and "h_n" in sd.outputs
              and [x.size for x in sd.inputs["input"].tensor_shape.dim] == [-1, -1, 5],
              "GetModelMetadata: the signature_def of GET /v1/models/M/metadata", sd)
        rq = apis.GetModelStatusRequest()
        rq.model_spec.name = th.MODEL
        r = ms.GetModelStatus(rq, timeout=10)
        check(len(r.model_version_status) == 1 and r.model_version_status[0].version == 1
              and r.model_version_status[0].state == apis.ModelVersionStatus.AVAILABLE,
              "GetModelStatus: version 1 AVAILABLE", r)
        try:
            rq = apis.PredictRequest()
            rq.model_spec.name = th.MODEL
            rq.model_spec.signature_name = "other"
            rq.inputs["input"].dtype = fw.DT_FLOAT
            pred.Predict(rq, timeout=10)
            check(False, "Predict with another signature fails")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "signature_name" in e.details(),
                  "Predict with another signature is INVALID_ARGUMENT naming it", e.details())
        test_tfs_classify(ch, apis)
        ch.close()


def test_tfs_classify(ch, apis):
    """Classify and Regress, as TF Serving answers them for a predict signature (and as
    :classify and :regress do): INVALID_ARGUMENT in its words; an unknown model NOT_FOUND.
    The request goes as raw bytes with TF Serving's field 2 (input: the examples), which rnnd
    skips."""
    for method, what, verb in (("Classify", "classification", "classify"), ("Regress", "regression", "regress")):
        call = ch.unary_unary("/tensorflow.serving.PredictionService/" + method,
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for model, code, words in ((th.MODEL, grpc.StatusCode.INVALID_ARGUMENT,
                                    "Expected %s signature method_name to be tensorflow/serving/%s. "
                                    "Was: tensorflow/serving/predict" % (what, verb)),
                                   ("nope", grpc.StatusCode.NOT_FOUND, "nope")):
            spec = apis.ModelSpec(name=model).SerializeToString()
            examples = b"\x0a\x04\x0a\x02\x0a\x00"  # input { example_list { examples {} } }
            body = b"\x0a" + bytes([len(spec)]) + spec + b"\x12" + bytes([len(examples)]) + examples
            try:
                call(body, timeout=10)
                check(False, "%s on %s fails" % (method, model))
            except grpc.RpcError as e:
                check(e.code() == code and words in e.details(),
                      "%s on %s: %s with %r" % (method, model, code, words), (e.code(), e.details()))


# ---------------------------------------------------------------- deadlines

@contextlib.contextmanager
def slow_daemon():
    """rnnd on one model, "slow": a zero LSTM of 1024 units, one sequence a batch (about 1 ms a step)."""
    with tempfile.TemporaryDirectory(prefix="rnnd-grpc-slow-") as tmp:
        th.zero_lstm(tmp, "slow", 1024, 4096, batching={"max_batch_size": 1})
        d = Daemon(repo=tmp)
        try:
            yield d
        finally:
            d.close()


def zeros_input(steps):
    x = np.zeros((1, steps, 8), np.float32)
    i = gc.InferInput("input", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return i


def test_deadline():
    """A deadline shorter than the queue's wait: DEADLINE_EXCEEDED at it, and the daemon serves on."""
    with slow_daemon() as d:
        url = "127.0.0.1:%d" % d.grpc_port
        c = gc.InferenceServerClient(url)
        i = zeros_input(2000)
        slow = [c.async_infer("slow", [i], callback=lambda result, error: None) for _ in range(3)]
        t0 = time.time()
        try:
            c.infer("slow", [i], client_timeout=0.3)
            check(False, "a call past its deadline fails")
        except InferenceServerException as e:
            check("DEADLINE_EXCEEDED" in e.status(), "a call past its deadline is DEADLINE_EXCEEDED", e.status())
        check(time.time() - t0 < 2.0, "answered at the deadline, not when the queue reached it",
              time.time() - t0)
        time.sleep(0.5)
        check(c.is_server_ready(), "the daemon serves after the deadline")
        del slow
        c.close()
        log = d.stderr()
        check("runtime error" not in log and "AddressSanitizer" not in log, "no sanitizer report", log[-2000:])


def test_stream_half_close():
    """A client that sends its requests and half-closes at once still gets every answer: the
    call ends OK after the last one (docs/HTTP.md, ModelStreamInfer), none dropped as gone."""
    with slow_daemon() as d:
        n = 6

        def requests():
            for k in range(n):
                r = pb.ModelInferRequest(model_name="slow", id="r%d" % k)
                i = r.inputs.add()
                i.name, i.datatype = "input", "FP32"
                i.shape.extend([1, 50, 8])
                r.raw_input_contents.append(np.zeros((50, 8), np.float32).tobytes())
                yield r  # then the client half-closes, its answers still to come

        with grpc.insecure_channel("127.0.0.1:%d" % d.grpc_port) as ch:
            got = [(m.error_message, m.infer_response.id)
                   for m in pbg.GRPCInferenceServiceStub(ch).ModelStreamInfer(requests(), timeout=60)]
        check(got == [("", "r%d" % k) for k in range(n)],
              "a stream half-closed after its requests: every one answered, in order", got)
        st, _, text = d.request("GET", "/metrics")
        check('code="499"' not in text.decode(), "none counted as a client gone (499)",
              [l for l in text.decode().splitlines() if l.startswith("rnnd_requests_total")])


# ---------------------------------------------------------------- loops

def watch_to_end(watch):
    """The statuses a health Watch sends until it ends, then the code it ended with."""
    statuses = []
    try:
        for m in watch:
            statuses.append(m.status)
    except grpc.RpcError as e:
        statuses.append(e.code())
    return statuses


def test_loops():
    """grpc_threads 3: each new connection goes to the loop with the fewest, the daemon's or one
    of two threads' own (docs/DESIGN.md §11), and every loop serves all of it: inference, a
    repository unload and load (whose end the daemon's loop posts to the call's), a health Watch
    that sees the drain; SIGTERM ends them all and exits 0."""
    d = Daemon("--grpc_threads=3", "--log_level=debug")
    try:
        url = "127.0.0.1:%d" % d.grpc_port
        m = th.MODEL
        g = Golden(m)
        own = [("grpc.use_local_subchannel_pool", 1)]  # else grpc shares one connection
        clients = [gc.InferenceServerClient(url, channel_args=own) for _ in range(6)]
        for k, c in enumerate(clients):  # each opens its connection at its first call
            r = c.infer(m, grpc_inputs(g))
            for key in g.outputs:
                close_to(g, key, r.as_numpy(key), "client %d" % k)
        # (after a call: HTTP may be ready before the gRPC front end's line is written)
        check("(3 threads," in d.stderr(), "the log says gRPC runs on 3 threads", d.stderr()[-500:])
        on = [int(x) for x in re.findall(r"gRPC connection from \S+ on loop (\d+) of 3", d.stderr())]
        check(on == [0, 1, 2, 0, 1, 2], "six connections in turn on loops 0, 1, 2", on)
        for k in range(3):
            clients[k].unload_model(m)
            check(clients[k].is_model_ready(m) is False, "loop %d: RepositoryModelUnload answered" % k)
            clients[k].load_model(m)
            check(clients[k].is_model_ready(m) is True, "loop %d: RepositoryModelLoad answered" % k)
        S = health_pb2.HealthCheckResponse
        chans = [grpc.insecure_channel(url, options=own) for _ in range(3)]
        watches = [health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
                   for ch in chans]
        check([next(w).status for w in watches] == [S.SERVING] * 3, "a health Watch on each loop: SERVING")
        d.proc.send_signal(15)
        for k, w in enumerate(watches):
            statuses = watch_to_end(w)
            check(S.NOT_SERVING in statuses, "Watch %d: NOT_SERVING at the drain" % k, statuses)
        try:
            rc = d.proc.wait(20)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, "SIGTERM with connections on three loops exits 0", rc)
        for c in clients:
            c.close()
        for ch in chans:
            ch.close()
        log = d.stderr()
        check("AddressSanitizer" not in log and "runtime error:" not in log and "ThreadSanitizer" not in log,
              "no sanitizer report", log[-3000:])
    finally:
        d.close()


# ---------------------------------------------------------------- metrics and the drain

def requests_total(d, model, code):
    """rnnd_requests_total of a model (any version; "" for requests naming none) and an HTTP
    status (docs/OPERATIONS.md)."""
    text = d.request("GET", "/metrics")[2].decode()
    pat = r'^rnnd_requests_total\{model="%s",version="[^"]*",code="%d"\} (\d+)$' % (model, code)
    return sum(int(n) for n in re.findall(pat, text, re.M))


def test_metrics_and_drain():
    """gRPC calls count in rnnd_requests_total under the HTTP status theirs stands for; SIGTERM
    with a call in flight and a health Watch open: the call is answered, Watch says
    NOT_SERVING, a new call is refused, and the daemon exits 0 (docs/DESIGN.md §11, "Drain")."""
    with slow_daemon() as d:
        url = "127.0.0.1:%d" % d.grpc_port
        c = gc.InferenceServerClient(url)
        i = zeros_input(2)
        ok0, nf0 = requests_total(d, "slow", 200), requests_total(d, "", 404)
        for _ in range(3):
            c.infer("slow", [i])
        try:
            c.infer("nope", [i])
        except InferenceServerException:
            pass
        ok, nf = requests_total(d, "slow", 200) - ok0, requests_total(d, "", 404) - nf0
        check(ok == 3, "3 gRPC calls OK: rnnd_requests_total of slow, code 200, += 3", ok)
        check(nf == 1, "a call to no such model, NOT_FOUND: code 404 += 1", nf)

        ch = grpc.insecure_channel(url)
        watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=30)
        S = health_pb2.HealthCheckResponse
        check(next(watch).status == S.SERVING, "health Watch: SERVING before the drain")
        # The call in flight must outlast the 0.4 s before SIGTERM and end well before the drain's
        # 30 s. How fast a step runs differs by build and machine (a sanitizer build may run it at
        # native speed or many times slower), so time 200 steps here and ask for about 2 s of them.
        t = time.time()
        c.infer("slow", [zeros_input(200)])
        per_step = max((time.time() - t) / 200, 1e-5)
        bi = zeros_input(int(min(4096, max(400, 2.0 / per_step))))
        done = []
        # Kept: grpc cancels a call whose future is collected.  h_n only: the whole output of
        # 4096 steps of 1024 units could pass max_response_bytes (a 400 at once).
        ctx = c.async_infer("slow", [bi], callback=lambda result, error: done.append((result, error)),
                            outputs=[gc.InferRequestedOutput("h_n")], client_timeout=30)
        time.sleep(0.3)  # the call is in flight
        check(not done, "the long call is in flight at SIGTERM", [(r, e and (e.status(), e.message())) for r, e in done])
        d.proc.send_signal(15)
        t0 = time.time()
        time.sleep(0.1)
        try:  # after GOAWAY grpc opens a new connection, which waits in the backlog until the end
            gc.InferenceServerClient(url).infer("slow", [i], client_timeout=60)
            check(False, "a call during the drain is refused")
        except InferenceServerException as e:
            check("UNAVAILABLE" in e.status(), "a call during the drain: UNAVAILABLE", e.status())
        statuses = watch_to_end(watch)
        check(S.NOT_SERVING in statuses, "health Watch: NOT_SERVING at the drain", statuses)
        try:
            rc = d.proc.wait(25)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0 and time.time() - t0 < 25, "SIGTERM exits 0 once the call is answered, not at the "
              "drain's 30 s", (rc, time.time() - t0))
        for _ in range(50):
            if not done:
                time.sleep(0.1)
        check(len(done) == 1 and done[0][1] is None and done[0][0].as_numpy("h_n") is not None,
              "the call in flight at SIGTERM is answered", done)
        del ctx
        ch.close()
        c.close()


def main():
    names = sorted(e for e in os.listdir(GOLDEN) if os.path.isfile(os.path.join(GOLDEN, e, "io.safetensors")))
    goldens = {n: Golden(n) for n in names}
    d = Daemon()
    try:
        url = "127.0.0.1:%d" % d.grpc_port
        c = gc.InferenceServerClient(url)
        run_test(test_goldens, c, goldens)
        run_test(test_typed_contents, url, goldens)
        run_test(test_compression, c, goldens)
        run_test(test_errors, c, d)
        run_test(test_health, d)
        run_test(test_tfs, d, goldens)
        run_test(test_control, c, d)
        c.close()
        check(d.request("GET", "/v2/health/ready")[0] == 200, "HTTP still serves at the end")
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", rc)
        err = d.stderr()
        check("AddressSanitizer" not in err and "runtime error:" not in err and "LeakSanitizer" not in err
              and "ThreadSanitizer" not in err, "no sanitizer report from the daemon", err[-3000:])
    finally:
        d.close()
    run_test(test_stream_sequences)  # test_nul_strings too
    run_test(test_loops)
    run_test(test_deadline)
    run_test(test_stream_half_close)
    run_test(test_metrics_and_drain)
    return th.summary("test_grpc")


if __name__ == "__main__":
    sys.exit(main())
