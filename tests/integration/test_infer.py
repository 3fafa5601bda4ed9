#!/usr/bin/env python3
"""test_infer.py: inference through the real rnnd over HTTP (DESIGN.md §4, §5).

Starts $RNND_BIN with the golden repository (tests/golden/models) and checks,
for every golden case, that KServe v2 JSON, KServe v2 binary tensors and TF
Serving :predict give PyTorch's numbers (max abs error <= 1e-5); that bad
requests get a 4xx naming the field while the daemon keeps serving; that a
full queue answers 503 with Retry-After at once and every accepted request is
answered; and, on the bundled demo repository, the digits models' accuracy on
their held-out set.

Python 3 standard library only; reuses test_http.py's Daemon and check().
"""

import array
import concurrent.futures
import json
import os
import sys
import time

import rnndtest as th  # the harness (tests/support)
from rnndtest import (run_test, GOLDEN, SRC, TOL, Daemon, case_inputs, check, compare_case, max_err, outputs_of,
                      read_safetensors)

DEMO = os.path.join(SRC, "config", "models")


def binary_request(inputs):
    """The KServe binary extension: JSON header, then each input's raw bytes."""
    header = {"inputs": [], "parameters": {"binary_data_output": True}}
    blobs = []
    for i in inputs:
        code = "f" if i["datatype"] == "FP32" else "q"
        blob = array.array(code, i["data"]).tobytes()
        header["inputs"].append({"name": i["name"], "datatype": i["datatype"], "shape": i["shape"],
                                 "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    js = json.dumps(header).encode()
    return js + b"".join(blobs), len(js)


def parse_binary_response(h, body):
    n = int(h.get("inference-header-content-length", len(body)))
    resp = json.loads(body[:n])
    off = n
    for o in resp.get("outputs", []):
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            a = array.array("f")
            a.frombytes(body[off:off + size])
            o["data"] = a.tolist()
            off += size
    return resp


def test_goldens(d):
    cases = sorted(e for e in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, e)))
    check(len(cases) >= 80, "the golden repository is there", len(cases))
    for name in cases:
        io = read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
        inputs = case_inputs(io)
        path = "/v2/models/%s/infer" % name
        st, h, resp = d.json("POST", path, body=json.dumps({"id": "g-" + name, "inputs": inputs}))
        if check(st == 200, "%s JSON: 200" % name, (st, resp)):
            check(resp.get("id") == "g-" + name and resp.get("model_name") == name, "%s: id and model echoed" % name,
                  resp)
            compare_case(name, io, outputs_of(resp), "JSON")
        body, jlen = binary_request(inputs)
        st, h, raw = d.request("POST", path, body=body, headers={"Inference-Header-Content-Length": str(jlen),
                                                                "Content-Type": "application/octet-stream"})
        if check(st == 200, "%s binary: 200" % name, (st, raw[:300])):
            check(h.get("content-type") == "application/octet-stream", "%s binary: octet-stream" % name, h)
            compare_case(name, io, outputs_of(parse_binary_response(h, raw)), "binary")
    # TF Serving row format: each instance its own length, cut back to it; a chain's
    # states are one flat row per instance (docs/HTTP.md), a block's [layers x dirs, H].
    for name in ("lstm_l1_bi_ragged_h0", "chain_nobias_lstm_gru_ragged_h0"):
        tfs_rows(d, name)


def tfs_rows(d, name):
    """The golden case name through :predict's row format, h0 and c0 per instance."""
    io = read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
    _, (B, T, I), x = io["x"]
    lengths = io["lengths"][2]

    def state(key, b):
        if key not in io:
            return None
        _, shape, v = io[key]
        n = 1
        for s in shape[1:]:
            n *= s
        row = v[b * n:(b + 1) * n]
        if len(shape) == 2:
            return row
        return [row[k * shape[2]:(k + 1) * shape[2]] for k in range(shape[1])]

    instances = []
    for b in range(B):
        inst = {"input": [x[(b * T + t) * I:(b * T + t + 1) * I] for t in range(lengths[b])]}
        for key in ("h0", "c0"):
            if state(key, b) is not None:
                inst[key] = state(key, b)
        instances.append(inst)
    check("h0" in instances[0], "%s: the case has h0" % name, sorted(io))
    st, h, resp = d.json("POST", "/v1/models/%s:predict" % name, body=json.dumps({"instances": instances}))
    if check(st == 200 and len(resp.get("predictions", [])) == B,
             "%s TF Serving instances: 200, one prediction each" % name, (st, resp)):
        _, (_, _, W), want = io["output"]
        for b, p in enumerate(resp["predictions"]):
            got = [v for row in p["output"] for v in row]
            check(len(p["output"]) == lengths[b], "%s TF Serving: prediction %d cut to its length" % (name, b),
                  len(p["output"]))
            e = max_err(got, want[b * T * W:b * T * W + lengths[b] * W])
            check(e <= TOL, "%s TF Serving: prediction %d within %g" % (name, b, TOL), e)

BAD = [
    # (body, status, substring of the error)
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 4], "data": [0,0,0,0,0,0,0,0]}]}', 400,
     "input"),
    ('{"inputs": [{"name": "nope", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,0]}]}', 400,
     "nope"),
    ('{"inputs": [{"name": "input", "datatype": "INT8", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,0]}]}', 400,
     "INT8"),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0]}]}', 400,
     "data"),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,0]},'
     ' {"name": "lengths", "datatype": "INT32", "shape": [1], "data": [3]}]}', 400, "lengths"),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,0]},'
     ' {"name": "lengths", "datatype": "INT32", "shape": [1], "data": [0]}]}', 400, "lengths"),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,1e39]}]}',
     400, "finite"),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,0]}],'
     ' "outputs": [{"name": "scores"}]}', 400, "scores"),
    ('{"inputs": [', 400, "JSON"),
    ('[' * 100 + ']' * 100, 400, "deep"),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 5000, 5], "data": []}]}', 400, ""),
    ('{"inputs": [{"name": "input", "datatype": "FP32", "shape": [100000, 1000, 5000], "data": []}]}', 400, ""),
]


def test_stats(d):
    """The statistics extension counts what test_goldens and test_bad_requests sent."""
    name = "lstm_l1_bi_ragged_h0"  # 2 successful requests of B = 4 (JSON, binary) + 1 TF Serving
    st, h, b = d.json("GET", "/v2/models/%s/stats" % name)
    if not check(st == 200 and len(b.get("model_stats", [])) == 1, "GET .../stats is 200 with one entry", (st, b)):
        return
    s = b["model_stats"][0]
    check(s["name"] == name and s["version"] == "1", "stats name and version", s)
    check(s["inference_count"] == 12 and s["execution_count"] == 3, "stats count 12 sequences in 3 executions", s)
    inf = s["inference_stats"]
    check(inf["success"]["count"] == 3 and inf["fail"]["count"] == 0, "stats count 3 successes", inf)
    for k in ("queue", "compute_input", "compute_infer", "compute_output"):
        check(inf[k]["count"] == 3 and inf[k]["ns"] > 0, "stats time %s" % k, inf[k])
    check(inf["success"]["ns"] >= inf["compute_infer"]["ns"], "success time covers compute", inf)
    check([e["batch_size"] for e in s["batch_stats"]] == [4] and s["batch_stats"][0]["compute_infer"]["count"] == 3,
          "batch_stats has batch size 4 three times", s["batch_stats"])
    check(s["last_inference"] > 1.7e12, "last_inference is a wall-clock time in ms", s["last_inference"])
    st, h, b = d.json("GET", "/v2/models/%s/versions/1/stats" % name)
    check(st == 200 and b["model_stats"][0]["inference_count"] == 12, "versioned stats", (st, b))
    st, h, b = d.json("GET", "/v2/models/stats")
    n_models = len([e for e in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, e))])
    check(st == 200 and len(b["model_stats"]) == n_models, "GET /v2/models/stats lists every model", (st, len(b)))
    bad = "lstm_l1_uni_equal_h0"
    st, h, b = d.json("GET", "/v2/models/%s/stats" % bad)
    check(st == 200 and b["model_stats"][0]["inference_stats"]["fail"]["count"] == 0,
          "requests refused by validation are not engine failures", b)
    st, h, b = d.json("GET", "/v2/models/nope/stats")
    check(st == 404, "stats of an unknown model is 404", st)
    st, h, b = d.json("POST", "/v2/models/%s/stats" % name, body="{}")
    check(st == 405, "POST to stats is 405", st)


def test_bad_requests(d):
    path = "/v2/models/lstm_l1_uni_equal_h0/infer"
    for body, status, sub in BAD:
        st, h, b = d.json("POST", path, body=body)
        check(st == status and "error" in b and sub.lower() in b["error"].lower(),
              "bad request gets %d naming %r" % (status, sub), (body[:80], st, b))
    # Tokens out of range on an embedding model.
    st, h, b = d.json("POST", "/v2/models/lstm_emb_l1_uni_ragged_noh0_head_softmax_last/infer",
                      body='{"inputs": [{"name": "tokens", "datatype": "INT64", "shape": [1, 2], "data": [1, 40]}]}')
    check(st == 400 and "tokens" in b.get("error", ""), "a token id out of range is 400 naming tokens", (st, b))
    # Binary: the header says more JSON than the body has; the binary section is short.
    st, h, b = d.json("POST", path, body=b'{"inputs": []}', headers={"Inference-Header-Content-Length": "999"})
    check(st == 400 and "error" in b, "Inference-Header-Content-Length past the body is 400", (st, b))
    js = b'{"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "parameters": {"binary_data_size": 40}}]}'
    st, h, b = d.json("POST", path, body=js + b"\0" * 20, headers={"Inference-Header-Content-Length": str(len(js))})
    check(st == 400 and "error" in b, "a truncated binary section is 400", (st, b))
    # Still serving.
    st, _, _ = d.request("GET", "/v2/health/ready")
    check(st == 200, "the daemon still serves after bad requests", st)


def test_lengths_column(d):
    """lengths shaped [B, 1] (Triton's dims [1] before its reshape to []) gives [B]'s numbers;
    any other second dimension is refused naming lengths."""
    name = "lstm_l1_uni_ragged_h0"
    io = read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
    inputs = case_inputs(io)
    for i in inputs:
        if i["name"] == "lengths":
            i["shape"] = [i["shape"][0], 1]
    st, h, resp = d.json("POST", "/v2/models/%s/infer" % name, body=json.dumps({"inputs": inputs}))
    if check(st == 200, "lengths [B, 1]: 200", (st, resp)):
        compare_case(name, io, outputs_of(resp), "lengths [B, 1]")
    for i in inputs:
        if i["name"] == "lengths":
            i["shape"] = [1, i["shape"][0]]
    st, h, resp = d.json("POST", "/v2/models/%s/infer" % name, body=json.dumps({"inputs": inputs}))
    check(st == 400 and "'lengths'" in resp.get("error", "") and "does not match" in resp["error"],
          "lengths [1, B] is 400 naming lengths", (st, resp))


def test_sequence_parameters(d):
    """No model keeps state yet: a request naming a sequence is 400 naming the parameter,
    never a stateless 200; the parameters' neutral values change nothing."""
    path = "/v2/models/lstm_l1_uni_equal_h0/infer"
    inp = '{"name": "input", "datatype": "FP32", "shape": [1, 2, 5], "data": [0,0,0,0,0,0,0,0,0,0]}'
    for params, key in (('{"sequence_id": 7}', "sequence_id"), ('{"sequence_id": "s-1"}', "sequence_id"),
                        ('{"sequence_id": 7, "sequence_start": true}', "sequence_id"),
                        ('{"sequence_start": true}', "sequence_start"), ('{"sequence_end": true}', "sequence_end")):
        st, h, b = d.json("POST", path, body='{"parameters": %s, "inputs": [%s]}' % (params, inp))
        check(st == 400 and ("parameters.%s" % key) in b.get("error", "") and "sequences" in b["error"],
              "sequence parameters %s: 400 naming parameters.%s" % (params, key), (st, b))
    st, h, b = d.json("POST", path, body='{"parameters": {"sequence_id": 0, "sequence_start": false, '
                                         '"sequence_end": false}, "inputs": [%s]}' % inp)
    check(st == 200, "sequence_id 0 and false start/end are no sequence: 200", (st, b))


def test_nonfinite_outputs(d):
    """Finite inputs can drive a ReLU RNN's outputs past float32 (inf, then inf - inf = NaN):
    the 200 stays valid JSON (JSON has no NaN or Infinity; rnnd writes null, docs/HTTP.md)."""
    def refuse(x):
        raise ValueError("not JSON: %s" % x)
    for name in ("rnn_relu_l1_uni_equal_noh0", "rnn_relu_l1_bi_equal_h0"):
        nulls = 0
        for v in (3.4e38, -3.4e38):
            body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5],
                                           "data": [v] * 10}]})
            st, h, raw = d.request("POST", "/v2/models/%s/infer" % name, body=body)
            try:
                doc = json.loads(raw, parse_constant=refuse)
                ok = st == 200
            except ValueError as e:
                doc, ok = str(e), False
            if check(ok, "%s with inputs %g: 200 and valid JSON" % (name, v), (st, str(doc)[:200])):
                nulls += sum(x is None for o in doc["outputs"] for x in o.get("data", []))
        check(nulls > 0, "%s: its non-finite outputs are written as null" % name, nulls)


def test_overload(d):
    """A queue of 4 sequences held for 1 s: a flood gets quick 503s with Retry-After, and every
    accepted one is answered. The batch delay (1 s, below max_batch_size) holds the first four in
    the queue whatever the machine's speed, so the rest are refused."""
    name = "overload"
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 8, 8],
                                   "data": [0.01] * 64}], "outputs": [{"name": "h_n"}]})

    def one(_):
        t0 = time.time()
        st, h, b = d.request("POST", "/v2/models/%s/infer" % name, body=body)
        return st, h, time.time() - t0

    with concurrent.futures.ThreadPoolExecutor(max_workers=24) as ex:
        results = list(ex.map(one, range(48)))
    ok = [r for r in results if r[0] == 200]
    busy = [r for r in results if r[0] == 503]
    check(len(ok) + len(busy) == len(results), "every request is answered 200 or 503",
          sorted(set(r[0] for r in results)))
    print("overload: %d served, %d refused" % (len(ok), len(busy)))
    check(len(ok) >= 4 and len(busy) >= 1, "some are served and some refused", (len(ok), len(busy)))
    check(all(r[2] >= 0.9 for r in ok), "the served ones waited out the 1 s delay",
          sorted(r[2] for r in ok)[:3])
    check(all(r[1].get("retry-after") for r in busy), "each 503 has Retry-After")
    if busy:
        half = sorted(r[2] for r in busy)[len(busy) // 2]
        check(half < 0.5, "503s come back at once: the median within half the 1 s hold", half)


def overload_repo(tmp):
    """One model with a queue of 4 sequences, a fixed 1 s batch delay and one instance, weights from digits_lstm."""
    src = os.path.join(DEMO, "digits_lstm")
    dst = os.path.join(tmp, "overload")
    os.makedirs(os.path.join(dst, "1"))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["batching"] = {"max_batch_size": 64, "max_queue_size": 4, "max_queue_delay_us": 1000000,
                       "adaptive_delay": False}
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    os.symlink(os.path.join(src, "1", "model.safetensors"), os.path.join(dst, "1", "model.safetensors"))
    return tmp


def test_digits():
    """The demo models' accuracy on their held-out set, measured over HTTP."""
    with open(os.path.join(DEMO, "digits_lstm", "test_set.json")) as f:
        ts = json.load(f)
    d = Daemon(repo=DEMO)
    try:
        for model in ("digits_lstm", "digits_gru"):
            correct = 0
            for i in range(0, len(ts["y"]), 60):
                xs, ys = ts["x"][i:i + 60], ts["y"][i:i + 60]
                body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [len(xs), 8, 8], "data": xs}],
                        "outputs": [{"name": "scores"}]}
                st, h, resp = d.json("POST", "/v2/models/%s/infer" % model, body=json.dumps(body))
                if not check(st == 200, "%s: 200" % model, (st, resp)):
                    break
                scores = resp["outputs"][0]["data"]
                for j, y in enumerate(ys):
                    row = scores[j * 10:(j + 1) * 10]
                    correct += row.index(max(row)) == y
            print("%s: %d/%d correct over HTTP" % (model, correct, len(ts["y"])))
            check(correct == 350, "%s gets 350/360 over HTTP, as in PyTorch" % model, correct)
    finally:
        d.close()


def main():
    import tempfile
    t0 = time.time()
    d = Daemon()
    try:
        run_test(test_goldens, d)
        run_test(test_bad_requests, d)
        run_test(test_stats, d)
        run_test(test_lengths_column, d)
        run_test(test_sequence_parameters, d)
        run_test(test_nonfinite_outputs, d)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", rc)
        err = d.stderr()
        check("AddressSanitizer" not in err and "runtime error:" not in err, "no sanitizer report", err[-2000:])
    finally:
        d.close()
    with tempfile.TemporaryDirectory() as tmp:
        d = Daemon(repo=overload_repo(tmp))
        try:
            run_test(test_overload, d)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0 after the flood", rc)
        finally:
            d.close()
    run_test(test_digits)
    print("test_infer: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
