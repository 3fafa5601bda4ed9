#!/usr/bin/env python3
"""test_tritonclient.py: Triton's own Python client against the real rnnd (DESIGN.md §5, §9).

rnnd speaks KServe v2 / Open Inference Protocol so that `tritonclient` works
unchanged (DESIGN.md §5).  This suite starts $RNND_BIN on a
free loopback port with the golden repository (tests/golden/models) and drives
it only through `tritonclient.http` (PyPI `tritonclient[http]`):

- health, server/model metadata and the Triton-style model config, checked
  against what each golden case really takes and gives, and against what
  perf_analyzer reads from them (the metadata and config routes of HTTP.md);
- `infer()` on every golden case, with inputs sent as JSON and as binary
  tensors, outputs asked for as JSON, as binary, mixed, and not at all (the
  client then asks for binary_data_output), INT32 and INT64 lengths/tokens, a
  version, a request id, a batch of 64; `as_numpy()` must give PyTorch's
  numbers within 1e-5 (max abs);
- errors: a wrong shape raises InferenceServerException with status "400" and
  exactly the daemon's message; unknown models and versions are 404;
- compressed request bodies (`request_compression_algorithm` gzip and deflate, JSON and
  binary tensors): decompressed, the right numbers, as Triton does; compressed answers
  (`response_compression_algorithm`): the encoding asked for, the right numbers;
- the async APIs: `async_infer` with several requests in flight over several
  connections, and `tritonclient.http.aio` when aiohttp is there.

Exits 77 (meson SKIP) when tritonclient or numpy cannot be imported (run it
with the venv made by tests/run.sh: tests/interop/run.sh picks it).  Prints one
line per failed check and "test_tritonclient: N passed, N failed"; exits 1 when
any check failed.  Environment: RNND_BIN (the daemon), RNND_SRC (the tree).
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import numpy as np
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:  # meson reads 77 as SKIP
    print("test_tritonclient: SKIP: cannot import tritonclient[http]/numpy (%s); "
          "tests/run.sh makes .venv-test with them" % e)
    sys.exit(77)

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, GOLDEN, run_test
from rnndtest import read_safetensors

TOL = 1e-5
OUTPUT_KEYS = ("output", "h_n", "c_n", "scores")

# Cases run through the full matrix (input format x output format x index
# dtype); every other golden case runs JSON-in/JSON-out and binary/binary.
FULL = [
    "lstm_l1_bi_ragged_h0",  # LSTM, bidirectional, ragged, h0 and c0
    "lstm_l3_bi_ragged_h0",
    "gru_l3_bi_ragged_h0",  # GRU, 3 layers
    "gru_l3_uni_ragged_noh0",
    "rnn_relu_l3_bi_ragged_h0",  # rnn_relu
    "rnn_relu_l1_uni_ragged_noh0",
    "lstm_emb_l1_uni_ragged_noh0_head_none_last",  # embedding + head
    "lstm_emb_l1_uni_ragged_noh0_head_sigmoid_last",
    "lstm_emb_l1_uni_ragged_noh0_head_tanh_last",
    "lstm_emb_l1_uni_ragged_noh0_head_relu_last",
    "lstm_emb_l1_uni_ragged_noh0_head_softmax_last",
    "gru_emb_l2_bi_ragged_noh0_head_softmax_all",
    "rnn_tanh_emb_l1_bi_ragged_h0",
    "lstm_l2_bi_ragged_h0_head_tanh_last",
    "lstm_h48_l2_bi_ragged_h0",  # hidden 48
    "gru_h48_l2_bi_ragged_h0",
    "rnn_relu_h48_l2_uni_equal_h0",
    "rnn_tanh_h48_l1_bi_ragged_noh0",
    "lstm_proj_l3_bi_ragged_h0",
]


# ---------------------------------------------------------------- goldens

class Golden:
    """One golden case: its inputs and PyTorch's outputs as numpy arrays."""

    def __init__(self, name):
        self.name = name
        raw = read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
        self.t = {}
        for key, (dtype, shape, vals) in raw.items():
            self.t[key] = np.array(vals, dtype=np.float32 if dtype == "F32" else np.int64).reshape(shape)
        with open(os.path.join(GOLDEN, name, "config.json")) as f:
            self.cfg = json.load(f)
        self.outputs = [k for k in OUTPUT_KEYS if k in self.t]

    def inputs(self, binary, index_dtype=np.int64):
        """InferInputs for the case; tokens and lengths in index_dtype."""
        ins = []
        for key, name in (("x", "input"), ("tokens", "tokens"), ("lengths", "lengths"), ("h0", "h0"), ("c0", "c0")):
            if key not in self.t:
                continue
            a = self.t[key]
            if a.dtype == np.int64:
                a = a.astype(index_dtype)
            ins.append(make_input(name, a, binary))
        return ins


def make_input(name, a, binary):
    dt = {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16",
          np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32"}[a.dtype]
    i = httpclient.InferInput(name, list(a.shape), dt)
    i.set_data_from_numpy(a, binary_data=binary)
    return i


def compare(g, result, how, keys=None, want=None):
    """as_numpy() of each output against the golden: shape, dtype, max abs error."""
    want = want or g.t
    for key in keys or g.outputs:
        got = result.as_numpy(key)
        if not check(got is not None, "%s %s: output %s is answered" % (g.name, how, key)):
            continue
        if not check(got.shape == want[key].shape and got.dtype == np.float32,
                     "%s %s: %s shape and dtype" % (g.name, how, key), (got.shape, got.dtype, want[key].shape)):
            continue
        err = float(np.max(np.abs(got.astype(np.float64) - want[key].astype(np.float64)), initial=0.0))
        check(err <= TOL, "%s %s: %s within %g of the golden" % (g.name, how, key, TOL), err)


def format_of(result, key):
    """'binary' or 'json': how the response carried an output."""
    o = result.get_output(key) or {}
    if "binary_data_size" in (o.get("parameters") or {}):
        return "binary"
    return "json" if "data" in o else "none"


# ---------------------------------------------------------------- checks

def test_health_and_metadata(c, goldens):
    check(c.is_server_live() is True, "is_server_live")
    check(c.is_server_ready() is True, "is_server_ready")
    meta = c.get_server_metadata()
    check(meta.get("name") == "rnnd" and isinstance(meta.get("version"), str) and meta["version"],
          "get_server_metadata: name and version", meta)
    ext = meta.get("extensions", [])
    check("binary_tensor_data" in ext and "model_configuration" in ext,
          "get_server_metadata lists binary_tensor_data and model_configuration", ext)
    # What the server advertises must work through the client (perf_analyzer
    # trusts the list: it queries /stats only when "statistics" is listed).
    if "statistics" in ext:
        try:
            st = c.get_inference_statistics(FULL[0])
            check(isinstance(st.get("model_stats"), list), "statistics is listed: get_inference_statistics works", st)
        except InferenceServerException as e:
            check(False, "statistics is listed: get_inference_statistics works", e)
    if "model_repository" in ext:
        try:
            idx = c.get_model_repository_index()
            check(isinstance(idx, list) and any(m.get("name") == FULL[0] for m in idx),
                  "model_repository is listed: get_model_repository_index works", idx)
        except InferenceServerException as e:
            check(False, "model_repository is listed: get_model_repository_index works", e)

    check(c.is_model_ready("no_such_model") is False, "is_model_ready of an unknown model is False")
    check(c.is_model_ready(FULL[0], "1") is True, "is_model_ready with version 1")
    check(c.is_model_ready(FULL[0], "7") is False, "is_model_ready of an unknown version is False")
    try:
        c.get_model_metadata("no_such_model")
        check(False, "get_model_metadata of an unknown model raises")
    except InferenceServerException as e:
        check(e.status() == "404" and "no_such_model" in e.message(),
              "get_model_metadata of an unknown model raises 404 naming it", (e.status(), e.message()))

    for g in goldens.values():
        n = g.name
        check(c.is_model_ready(n) is True, "%s: is_model_ready" % n)
        m = c.get_model_metadata(n)
        check(m.get("name") == n and "1" in m.get("versions", []), "%s: metadata name and versions" % n, m)
        ins = {t["name"]: t for t in m.get("inputs", [])}
        outs = {t["name"]: t for t in m.get("outputs", [])}
        first = "tokens" if "tokens" in g.t else "input"
        # The required input only: perf_analyzer fills every input the metadata names.
        check(set(ins) == {first}, "%s: metadata inputs" % n, sorted(ins))
        check(set(outs) == set(g.outputs), "%s: metadata outputs are the golden's" % n, (sorted(outs), g.outputs))
        if first == "input":
            check(ins["input"]["datatype"] == "FP32" and ins["input"]["shape"] == [-1, -1, g.cfg["input_size"]],
                  "%s: metadata input FP32 [-1,-1,input_size]" % n, ins["input"])
        else:
            check(ins["tokens"]["datatype"] in ("INT64", "INT32") and ins["tokens"]["shape"] == [-1, -1],
                  "%s: metadata tokens [-1,-1]" % n, ins["tokens"])
        # The optional inputs are in /config's parameters; every golden tensor fits them.
        cfg = c.get_model_config(n)
        opt = {k[len("optional_input."):]: v.get("string_value", "").split(" ", 1)
               for k, v in cfg.get("parameters", {}).items() if k.startswith("optional_input.")}
        lstm = any(b.get("cell") == "lstm" for b in g.cfg.get("blocks", [g.cfg]))  # a chain's too
        want_opt = {"lengths", "h0"} | ({"c0"} if lstm else set())
        check(set(opt) == want_opt, "%s: config parameters name the optional inputs" % n, sorted(opt))
        for key in ("lengths", "h0", "c0"):
            if key in opt and key in g.t:
                check(fits(json.loads(opt[key][1]), g.t[key].shape),
                      "%s: optional input %s's shape fits the golden's" % (n, key), opt[key])
        for key in g.outputs:
            o = outs.get(key, {})
            check(o.get("datatype") == "FP32" and fits(o.get("shape", []), g.t[key].shape),
                  "%s: metadata output %s FP32 and its shape fits" % (n, key), (o, g.t[key].shape))

        check(cfg.get("name") == n and isinstance(cfg.get("max_batch_size"), int) and cfg["max_batch_size"] > 0,
              "%s: config name and max_batch_size" % n, cfg.get("max_batch_size"))
        # perf_analyzer: config inputs must match the metadata's names.
        check([i.get("name") for i in cfg.get("input", [])] == [t["name"] for t in m.get("inputs", [])],
              "%s: config inputs are the metadata inputs, in order" % n, cfg.get("input"))
        check([o.get("name") for o in cfg.get("output", [])] == [t["name"] for t in m.get("outputs", [])],
              "%s: config outputs are the metadata outputs, in order" % n, cfg.get("output"))
        for ci in cfg.get("input", []) + cfg.get("output", []):
            mt = ins.get(ci.get("name")) or outs.get(ci.get("name")) or {}
            check(ci.get("data_type") == "TYPE_" + mt.get("datatype", "?"),
                  "%s: config %s data_type matches the metadata" % (n, ci.get("name")), (ci, mt))
            # With max_batch_size > 0 the metadata shape is [-1] + dims.
            check(mt.get("shape") == [-1] + ci.get("dims", []), "%s: config %s dims agree with the metadata shape" % (n, ci.get("name")),
                  (ci, mt))
        check("dynamic_batching" in cfg or "sequence_batching" in cfg,
              "%s: config has a batching section" % n, sorted(cfg))
    n = FULL[0]
    check(c.get_model_metadata(n, "1").get("name") == n, "get_model_metadata with version 1")
    check(c.get_model_config(n, "1") == c.get_model_config(n), "get_model_config with version 1 equals the latest")


def fits(shape, real):
    return len(shape) == len(real) and all(s == -1 or s == r for s, r in zip(shape, real))


def test_infer_matrix(c, g, full):
    """infer() of one case, each way the client can send and receive tensors."""
    combos = []
    if full:
        for in_bin in (False, True):
            for out_bin in (False, True):
                for idx in (np.int64, np.int32):
                    combos.append((in_bin, out_bin, idx))
    else:
        combos = [(False, False, np.int64), (True, True, np.int64)]
    for in_bin, out_bin, idx in combos:
        how = "in=%s out=%s %s" % ("bin" if in_bin else "json", "bin" if out_bin else "json", np.dtype(idx).name)
        outs = [httpclient.InferRequestedOutput(k, binary_data=out_bin) for k in g.outputs]
        rid = "%s/%s" % (g.name, how)
        try:
            r = c.infer(g.name, g.inputs(in_bin, idx), outputs=outs, request_id=rid)
        except InferenceServerException as e:
            check(False, "%s %s: infer" % (g.name, how), e)
            continue
        resp = r.get_response()
        check(resp.get("model_name") == g.name and resp.get("id") == rid, "%s %s: model_name and id" % (g.name, how),
              {k: resp.get(k) for k in ("model_name", "id")})
        fmts = {k: format_of(r, k) for k in g.outputs}
        check(all(f == ("binary" if out_bin else "json") for f in fmts.values()),
              "%s %s: outputs come back in the format asked for" % (g.name, how), fmts)
        compare(g, r, how)
    if not full:
        return
    # No outputs listed: the client asks for binary_data_output and gets them all.
    r = c.infer(g.name, g.inputs(True))
    check(sorted(o["name"] for o in r.get_response().get("outputs", [])) == sorted(g.outputs),
          "%s default outputs: all of them, nothing else" % g.name, r.get_response().get("outputs"))
    check(all(format_of(r, k) == "binary" for k in g.outputs), "%s default outputs: binary" % g.name)
    compare(g, r, "default outputs")
    # Mixed: the first output binary, the others JSON, inputs mixed too, and
    # only a subset asked for, in reverse order, with an explicit version.
    keys = g.outputs[::-1][:2]
    outs = [httpclient.InferRequestedOutput(k, binary_data=(j == 0)) for j, k in enumerate(keys)]
    ins = g.inputs(False)
    ins[0] = g.inputs(True)[0]
    r = c.infer(g.name, ins, outputs=outs, model_version="1")
    got = [o["name"] for o in r.get_response().get("outputs", [])]
    check(sorted(got) == sorted(keys), "%s subset of outputs: just those" % g.name, (got, keys))
    check([format_of(r, k) for k in keys] == ["binary"] + ["json"] * (len(keys) - 1),
          "%s mixed output formats honoured" % g.name, [format_of(r, k) for k in keys])
    compare(g, r, "mixed, version 1", keys=keys)


def test_big_batch(c, g):
    """The golden batch tiled 16 times (B=64, max_batch_size) gives the tiled goldens."""
    reps = 16
    tiled = {k: np.concatenate([v] * reps, axis=0) for k, v in g.t.items()}
    ins = []
    for key, name in (("x", "input"), ("tokens", "tokens"), ("lengths", "lengths"), ("h0", "h0"), ("c0", "c0")):
        if key in tiled:
            ins.append(make_input(name, tiled[key], True))
    r = c.infer(g.name, ins, outputs=[httpclient.InferRequestedOutput(k) for k in g.outputs])
    compare(g, r, "B=%d" % (4 * reps), want=tiled)


def test_fp16_input(c, g):
    """FP16 input (DESIGN.md §5) gives what the same values in FP32 give."""
    x16 = g.t["x"].astype(np.float16)
    ref = Golden.__new__(Golden)
    ref.name, ref.cfg, ref.outputs = g.name, g.cfg, g.outputs
    ref.t = dict(g.t, x=x16.astype(np.float32))
    want = c.infer(g.name, ref.inputs(True))
    for binary in (True, False):
        ins = ref.inputs(binary)
        ins[0] = make_input("input", x16, binary)
        r = c.infer(g.name, ins)
        compare(g, r, "FP16 input %s" % ("bin" if binary else "json"),
                want={k: want.as_numpy(k) for k in g.outputs})


def test_errors(c, d):
    g_name = "lstm_l1_uni_equal_h0"
    bad = np.zeros((1, 2, 4), np.float32)  # input_size is 5
    # The daemon's own message for this request, straight from HTTP.
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 4], "data": [0.0] * 8}]})
    st, _, raw = d.json("POST", "/v2/models/%s/infer" % g_name, body=body)
    want = raw.get("error") if isinstance(raw, dict) else None
    check(st == 400 and want, "wrong shape over plain HTTP is 400 with an error", (st, raw))
    for binary in (False, True):
        how = "binary" if binary else "JSON"
        try:
            c.infer(g_name, [make_input("input", bad, binary)])
            check(False, "wrong shape (%s) raises InferenceServerException" % how)
        except InferenceServerException as e:
            check(e.status() == "400", "wrong shape (%s): status 400" % how, e.status())
            check(e.message() == want and "input" in e.message(),
                  "wrong shape (%s): the daemon's message" % how, (e.message(), want))
    x = np.zeros((1, 2, 5), np.float32)
    for model, version, what in (("no_such_model", "", "model"), (g_name, "7", "version")):
        try:
            c.infer(model, [make_input("input", x, True)], model_version=version)
            check(False, "infer of an unknown %s raises" % what)
        except InferenceServerException as e:
            check(e.status() == "404" and what in e.message(), "infer of an unknown %s: 404 naming it" % what,
                  (e.status(), e.message()))
    # An unknown input among good ones; a missing required input; a datatype
    # the model does not take.
    i8 = httpclient.InferInput("input", [1, 2, 5], "INT8")
    i8.set_data_from_numpy(np.zeros((1, 2, 5), np.int8), binary_data=True)
    for ins, sub in (([make_input("input", x, True), make_input("nope", np.zeros((1,), np.int64), True)], "nope"),
                     ([make_input("lengths", np.array([1], np.int64), False)], "input"),
                     ([i8], "INT8")):
        try:
            c.infer(g_name, ins)
            check(False, "a bad request naming %r raises" % sub)
        except InferenceServerException as e:
            check(e.status() == "400" and sub in e.message(), "a bad request is 400 naming %r" % sub,
                  (e.status(), e.message()))
    # Triton's extensions rnnd lacks: 501 saying so (they were 404 "no route", as for a typo).
    # (System shared memory: tests/interop/test_shm.py.)
    for call, what in ((lambda: c.register_cuda_shared_memory("r", b"\0" * 64, 0, 64), "CUDA shared memory"),
                       (lambda: c.get_trace_settings(), "trace"),
                       (lambda: c.get_trace_settings(model_name=g_name), "trace"),
                       (lambda: c.update_log_settings({"log_verbose_level": 1}), "logging")):
        try:
            call()
            check(False, "the %s extension is refused" % what)
        except InferenceServerException as e:
            check(e.status() == "501" and ("Triton's %s extension" % what) in e.message(),
                  "the %s extension: 501 naming it" % what, (e.status(), e.message()))
    check(c.is_server_ready(), "the daemon still serves after the errors")


def test_compression(c, g):
    """request/response_compression_algorithm: the client's Content-Encoding and Accept-Encoding.

    rnnd decompresses gzip and deflate request bodies, as Triton does (it refused them with
    415), JSON and binary tensors alike, and compresses its answers as the client's
    Accept-Encoding asks, as Triton does: the client sees the Content-Encoding it asked for
    and reads the right numbers, outputs as JSON and binary.
    """
    seen, post = [], c._post

    def recording_post(*args, **kw):
        resp = post(*args, **kw)
        seen.append(resp.get("Content-Encoding"))
        return resp

    c._post = recording_post  # the client's own POST, watched for the answer's header
    try:
        for algo in ("gzip", "deflate"):
            for binary in (True, False):
                r = c.infer(g.name, g.inputs(binary), request_compression_algorithm=algo)
                compare(g, r, "request %s%s" % (algo, " binary" if binary else ""))
                outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in g.outputs]
                del seen[:]
                r = c.infer(g.name, g.inputs(binary), outputs=outs, response_compression_algorithm=algo)
                compare(g, r, "response %s%s" % (algo, " binary" if binary else ""))
                check(seen == [algo], "response %s%s: the answer came %s" %
                      (algo, " binary" if binary else "", algo), seen)
    finally:
        del c._post


def test_async(url, goldens):
    """async_infer: many requests in flight over several connections, each its own answer."""
    names = [n for n in FULL if n in goldens]
    c = httpclient.InferenceServerClient(url, concurrency=8, network_timeout=120)
    try:
        jobs = []
        for j in range(3 * len(names)):
            g = goldens[names[j % len(names)]]
            in_bin, out_bin = bool(j & 1), bool(j & 2)
            rid = "async-%d" % j
            h = c.async_infer(g.name, g.inputs(in_bin), request_id=rid,
                              outputs=[httpclient.InferRequestedOutput(k, binary_data=out_bin) for k in g.outputs])
            jobs.append((g, rid, h))
        t0 = time.time()
        for g, rid, h in jobs:
            try:
                r = h.get_result(timeout=120)
            except InferenceServerException as e:
                check(False, "%s: async_infer %s" % (g.name, rid), e)
                continue
            check(r.get_response().get("id") == rid, "%s: async_infer %s answers its own request" % (g.name, rid),
                  r.get_response().get("id"))
            compare(g, r, "async " + rid)
        check(True, "%d async_infer requests answered in %.2f s" % (len(jobs), time.time() - t0))
    finally:
        c.close()


def test_aio(url, goldens):
    """tritonclient.http.aio (aiohttp): concurrent infers with asyncio.gather."""
    try:
        import asyncio
        import tritonclient.http.aio as aioclient
    except ImportError as e:
        print("test_tritonclient: note: tritonclient.http.aio not importable (%s); skipping its checks" % e)
        return
    names = [n for n in FULL if n in goldens][:8]

    async def run():
        async with aioclient.InferenceServerClient(url) as c:
            ready = await c.is_server_ready()
            check(ready is True, "aio is_server_ready")
            meta = await c.get_model_metadata(names[0])
            check(meta.get("name") == names[0], "aio get_model_metadata", meta)
            reqs = []
            for j, n in enumerate(names * 2):
                g = goldens[n]
                reqs.append((g, "aio-%d" % j, c.infer(g.name, g.inputs(bool(j & 1)), request_id="aio-%d" % j,
                                                      outputs=[aioclient.InferRequestedOutput(k, binary_data=bool(j & 2))
                                                               for k in g.outputs])))
            results = await asyncio.gather(*(r for _, _, r in reqs), return_exceptions=True)
            for (g, rid, _), r in zip(reqs, results):
                if not check(not isinstance(r, Exception), "%s: aio infer %s" % (g.name, rid), r):
                    continue
                check(r.get_response().get("id") == rid, "%s: aio infer %s answers its own request" % (g.name, rid))
                compare(g, r, "aio " + rid)
            try:
                await c.infer(names[0], [make_input("input", np.zeros((1, 2, 4), np.float32), False)])
                check(False, "aio: a wrong shape raises")
            except InferenceServerException as e:
                check(e.status() == "400", "aio: a wrong shape is 400", (e.status(), e.message()))

    asyncio.run(run())


def test_sequence_api():
    """tritonclient's sequence_id / sequence_start / sequence_end against a model with a
    sequence block (issue 17): a digit streamed in three chunks scores as the whole image does,
    with string and integer ids, and the config shows sequence_batching."""
    import shutil
    import tempfile
    demo = os.path.join(th.SRC, "config", "models")
    with tempfile.TemporaryDirectory(prefix="rnnd-seq-tc-") as tmp:
        shutil.copytree(os.path.join(demo, "digits_lstm"), os.path.join(tmp, "digits_lstm"))
        path = os.path.join(tmp, "digits_lstm", "config.json")
        with open(path) as f:
            cfg = json.load(f)
        cfg["sequence"] = {}
        with open(path, "w") as f:
            json.dump(cfg, f)
        with open(os.path.join(demo, "digits_lstm", "test_set.json")) as f:
            ts = json.load(f)
        d = Daemon(repo=tmp)
        try:
            c = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
            sb = c.get_model_config("digits_lstm").get("sequence_batching")
            check(sb is not None and sb.get("max_sequence_idle_microseconds") == 60000000,
                  "tritonclient sees sequence_batching in the config", sb)
            for k, sid in enumerate((77, "digit-stream-1")):
                x = np.array(ts["x"][k], dtype=np.float32)[None]
                whole_in = httpclient.InferInput("input", list(x.shape), "FP32")
                whole_in.set_data_from_numpy(x)
                whole = c.infer("digits_lstm", [whole_in]).as_numpy("scores")
                got = None
                for i, (a, b) in enumerate(((0, 3), (3, 5), (5, x.shape[1]))):
                    part = httpclient.InferInput("input", [1, b - a, x.shape[2]], "FP32")
                    part.set_data_from_numpy(np.ascontiguousarray(x[:, a:b]))
                    got = c.infer("digits_lstm", [part], sequence_id=sid, sequence_start=i == 0,
                                  sequence_end=i == 2).as_numpy("scores")
                check(float(np.abs(got - whole).max()) <= 1e-5,
                      "tritonclient sequence %r: three chunks score as the whole image" % (sid,),
                      float(np.abs(got - whole).max()))
            try:
                c.infer("digits_lstm", [whole_in], sequence_id=77)
                check(False, "tritonclient: a continuation after sequence_end is refused")
            except InferenceServerException as e:
                check("has ended" in str(e), "tritonclient: a continuation after sequence_end is "
                      "refused, saying it ended", str(e))
            c.close()
            d.stop()
        finally:
            d.close()


def main():
    t0 = time.time()
    names = sorted(e for e in os.listdir(GOLDEN) if os.path.isfile(os.path.join(GOLDEN, e, "io.safetensors")))
    goldens = {n: Golden(n) for n in names}
    missing = [n for n in FULL if n not in goldens]
    check(not missing, "the representative golden cases are there", missing)
    d = Daemon()
    try:
        url = "127.0.0.1:%d" % d.port
        c = httpclient.InferenceServerClient(url, network_timeout=120)
        try:
            run_test(test_health_and_metadata, c, goldens)
            for n in names:
                run_test(test_infer_matrix, c, goldens[n], n in FULL)
            run_test(test_big_batch, c, goldens["lstm_h48_l2_bi_ragged_h0"])
            run_test(test_big_batch, c, goldens["gru_emb_l2_bi_ragged_noh0_head_softmax_all"])
            run_test(test_fp16_input, c, goldens["lstm_l1_bi_ragged_h0"])
            run_test(test_errors, c, d)
            run_test(test_compression, c, goldens["gru_l3_bi_ragged_h0"])
        finally:
            c.close()
        run_test(test_async, url, goldens)
        run_test(test_aio, url, goldens)
        run_test(test_sequence_api)
        check(d.request("GET", "/v2/health/ready")[0] == 200, "the daemon still serves at the end")
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", rc)
        err = d.stderr()
        check("AddressSanitizer" not in err and "runtime error:" not in err and "LeakSanitizer" not in err,
              "no sanitizer report from the daemon", err[-3000:])
    finally:
        d.close()
    print("test_tritonclient: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
