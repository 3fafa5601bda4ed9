#!/usr/bin/env python3
"""test_http.py: the real rnnd over HTTP (DESIGN.md §5, §8).

Starts $RNND_BIN on a free loopback port with tests/golden/models (about 80
small models), waits for /v2/health/ready, and checks every route's status,
headers and body, the body limits (413 for a declared Content-Length and for a
chunked body over the cap), the command line (--help, --version, --backends,
--dump-config, bad config files and flags), a repository with broken models,
JSON logs, and that SIGTERM and SIGINT exit 0 within a few seconds.

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
Environment: RNND_BIN (the daemon), RNND_SRC (the source tree).
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import rnndtest
from rnndtest import (BIN, BODY_CAP, GOLDEN, HEAD_MODEL, MODEL, SRC, Daemon, check, error_body,
                      free_port, notifications, notify_socket, raw, run_test, sanitizer_report,
                      status_of)

def routes_health_and_server(d):
    """Health and server metadata: GET /v2/health/*, GET /v2."""
    # Health.
    st, h, body = d.request("GET", "/v2/health/live")
    check(st == 200 and body == b"", "live is 200 with an empty body", (st, body))
    check("content-type" in h and "x-request-id" in h, "live has Content-Type and X-Request-Id", h)
    st, h, body = d.request("GET", "/v2/health/ready")
    check(st == 200 and body == b"", "ready is 200", (st, body))

    # Server metadata.
    st, h, meta = d.json("GET", "/v2")
    check(st == 200 and h.get("content-type", "").startswith("application/json"), "GET /v2 is JSON 200", (st, h))
    check(meta.get("name") == "rnnd" and re.match(r"^\d+\.\d+\.\d+", meta.get("version", "")),
          "GET /v2 has name and version", meta)
    check(meta.get("extensions") == ["model_configuration", "statistics", "model_repository", "binary_tensor_data",
                                     "schedule_policy", "sequence"],
          "GET /v2 lists exactly the implemented extensions", meta)


def routes_model_metadata(d):
    """Model metadata (KServe v2), with and without a version."""
    # Model metadata, with and without a version.
    for path in ("/v2/models/" + MODEL, "/v2/models/%s/versions/1" % MODEL):
        st, h, m = d.json("GET", path)
        check(st == 200, "metadata %s is 200" % path, (st, m))
        check(m.get("name") == MODEL and m.get("versions") == ["1"] and m.get("platform") in ("rnnd_cpu", "rnnd_cudnn"),
              "metadata %s names the model, versions and platform" % path, m)
        ins = {t["name"]: t for t in m.get("inputs", [])}
        outs = {t["name"]: t for t in m.get("outputs", [])}
        check(ins.get("input") == {"name": "input", "datatype": "FP32", "shape": [-1, -1, 5]},
              "metadata input is FP32 [-1,-1,5]", ins.get("input"))
        # Only what every request carries: perf_analyzer fills every input named here.
        check(set(ins) == {"input"}, "metadata lists the required input only", sorted(ins))
        check(set(outs) == {"output", "h_n", "c_n"} and outs["output"]["shape"] == [-1, -1, 6],
              "metadata outputs of an LSTM", outs)
    st, h, m = d.json("GET", "/v2/models/" + HEAD_MODEL)
    ins = {t["name"]: t for t in m.get("inputs", [])}
    outs = {t["name"]: t for t in m.get("outputs", [])}
    check(st == 200 and "tokens" in ins and "input" not in ins and ins["tokens"]["shape"] == [-1, -1],
          "an embedding model takes tokens [-1,-1]", m)
    check(outs.get("scores", {}).get("shape") == [-1, 3], "a head (apply last) gives scores [-1, units]", outs)
    st, h, m = d.json("GET", "/v2/models/gru_emb_l2_bi_ragged_noh0_head_softmax_all")
    outs = {t["name"]: t for t in m.get("outputs", [])}
    check(outs.get("scores", {}).get("shape") == [-1, -1, 3] and "c_n" not in outs,
          "a GRU with head apply all: scores [-1,-1,units], no c_n", outs)
    check(outs.get("output", {}).get("shape") == [-1, -1, 12], "a bidirectional GRU's output is dirs*H", outs)


def routes_model_config(d):
    """Model readiness and the Triton-style model config."""
    # Model readiness.
    for path in ("/v2/models/%s/ready" % MODEL, "/v2/models/%s/versions/1/ready" % MODEL):
        st, h, body = d.request("GET", path)
        check(st == 200, "%s is 200" % path, (st, body))

    # Model config (Triton-style).
    st, h, cfg = d.json("GET", "/v2/models/%s/config" % MODEL)
    check(st == 200, "config is 200", (st, cfg))
    check(cfg.get("name") == MODEL and cfg.get("max_batch_size") == 64, "config name and max_batch_size", cfg)
    check([i["name"] for i in cfg.get("input", [])] == ["input"], "config inputs are the metadata's",
          cfg.get("input"))
    check(cfg.get("input", [{}])[0].get("dims") == [-1, 5] and cfg["input"][0].get("data_type") == "TYPE_FP32",
          "config input dims exclude the batch dimension", cfg.get("input"))
    check(cfg.get("input", [{}])[0].get("optional") is False, "config's input is not optional", cfg.get("input"))
    params = {k: v.get("string_value") for k, v in cfg.get("parameters", {}).items()}
    check(params.get("optional_input.lengths") == "INT64 [-1]" and params.get("optional_input.h0") == "FP32 [-1,1,6]"
          and params.get("optional_input.c0") == "FP32 [-1,1,6]",
          "config parameters describe the optional inputs", params)
    check(cfg.get("dynamic_batching", {}).get("max_queue_delay_microseconds") == 200,
          "config dynamic_batching.max_queue_delay_microseconds", cfg.get("dynamic_batching"))
    groups = cfg.get("instance_group", [])
    check(len(groups) >= 1 and groups[0].get("kind") in ("KIND_CPU", "KIND_GPU") and groups[0].get("count", 0) >= 1,
          "config instance_group", groups)
    inst = groups[0].get("instances", [{}])[0] if groups else {}
    check(inst.get("backend") in ("cpu", "cudnn") and "why_not_cudnn" in inst and inst.get("algo"),
          "config instances carry the resolved backend", inst)
    if inst.get("backend") == "cpu":
        check(inst.get("why_not_cudnn", "") != "", "a CPU instance says why not cuDNN", inst)
        check(inst.get("threading") == "one thread", "a CPU instance of one thread says so", inst)
    check("sequence_batching" not in cfg, "config has no sequence_batching until it is implemented", cfg)
    st, h, cfg1 = d.json("GET", "/v2/models/%s/versions/1/config" % MODEL)
    check(st == 200 and cfg1 == cfg, "versioned config equals the latest's", (st, cfg1))


def routes_inference_and_tf_serving(d):
    """The inference routes, and TF Serving's model status and metadata."""
    # Inference routes answer (the numbers are test_infer.py's): 200 for a
    # good request, 400 naming the field for a bad one.
    body = json.dumps({"inputs": [{"name": "input", "shape": [1, 2, 5], "datatype": "FP32", "data": [0.0] * 10}]})
    for path in ("/v2/models/%s/infer" % MODEL, "/v2/models/%s/versions/1/infer" % MODEL):
        st, h, b = d.json("POST", path, body=body, headers={"Content-Type": "application/json"})
        check(st == 200 and b.get("model_name") == MODEL, "%s answers 200" % path, (st, b))
    st, h, b = d.json("POST", "/v1/models/%s:predict" % MODEL, body='{"instances": [[[0,0,0,0,0]]]}')
    check(st == 200 and "predictions" in b, "TF Serving :predict answers 200", (st, b))
    st, h, b = d.json("POST", "/v1/models/%s/versions/1:predict" % MODEL, body="{}")
    check(st == 400 and error_body(b), "TF Serving :predict of {} is 400", (st, b))

    # TF Serving model status.
    st, h, b = d.json("GET", "/v1/models/" + MODEL)
    check(st == 200 and b == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]},
        "TF Serving model status", (st, b))
    st, h, b = d.json("GET", "/v1/models/%s/versions/1" % MODEL)
    check(st == 200 and b["model_version_status"][0]["state"] == "AVAILABLE", "TF Serving versioned status", (st, b))

    # TF Serving model metadata: one predict signature with every input and output.
    for path in ("/v1/models/%s/metadata" % MODEL, "/v1/models/%s/versions/1/metadata" % MODEL):
        st, h, b = d.json("GET", path)
        sig = b.get("metadata", {}).get("signature_def", {}).get("signature_def", {}).get("serving_default", {})
        dims = {k: [int(x["size"]) for x in v["tensor_shape"]["dim"]] for k, v in
                list(sig.get("inputs", {}).items()) + list(sig.get("outputs", {}).items())}
        check(st == 200 and b.get("model_spec") == {"name": MODEL, "signature_name": "", "version": "1"},
              "GET %s: model_spec" % path, (st, b))
        check(sig.get("method_name") == "tensorflow/serving/predict"
              and sig["inputs"]["input"]["dtype"] == "DT_FLOAT" and sig["inputs"]["lengths"]["dtype"] == "DT_INT64"
              and dims == {"input": [-1, -1, 5], "lengths": [-1], "h0": [-1, 1, 6], "c0": [-1, 1, 6],
                           "output": [-1, -1, 6], "h_n": [-1, 1, 6], "c_n": [-1, 1, 6]},
              "GET %s: serving_default's tensors, dtypes and shapes" % path, sig)
    st, h, b = d.json("GET", "/v1/models/no_such_model/metadata")
    check(st == 404 and error_body(b), "TF Serving metadata of an unknown model is 404", (st, b))
    for method, path in (("GET", "/v1/models/%s/labels/stable" % MODEL),
                         ("GET", "/v1/models/%s/labels/stable/metadata" % MODEL),
                         ("POST", "/v1/models/%s/labels/stable:predict" % MODEL)):
        st, h, b = d.json(method, path, body='{"instances": [[[0,0,0,0,0]]]}' if method == "POST" else None)
        check(st == 400 and b.get("error") == "version label in %s: rnnd has no version labels; give the "
              "version as /v1/models/{model}/versions/{version}" % path,
              "%s %s: TF Serving's version label is a 400 saying rnnd has none" % (method, path), (st, b))
    for verb, sig in (("classify", "classification"), ("regress", "regression")):
        st, h, b = d.json("POST", "/v1/models/%s:%s" % (MODEL, verb), body='{"examples": [{}]}')
        check(st == 400 and b.get("error") == "Expected %s signature method_name to be tensorflow/serving/%s. "
              "Was: tensorflow/serving/predict" % (sig, verb),
              "TF Serving :%s answers as for a model without that signature" % verb, (st, b))


def routes_errors(d):
    """404s (unknown routes, models and versions) and 405s with Allow."""
    # 404s.
    for path in ("/", "/v2/", "/v3", "/v2/health", "/v2/health/lively", "/v2/models", "/v2/models/",
                 "/v2/models/%s/versions" % MODEL,
                 "/v2/models/%s/versions/1/bogus" % MODEL, "/metrics/x", "//v2", "/v1/models"):
        st, h, b = d.json("GET", path)
        check(st == 404 and error_body(b), "GET %s is 404 with a JSON error" % path, (st, b))
    for path, what in (("/v2/models/no_such_model", "unknown model"), ("/v2/models/no_such_model/ready", "unknown model"),
                       ("/v2/models/no_such_model/config", "unknown model"), ("/v1/models/no_such_model", "unknown model"),
                       ("/v2/models/%s/versions/2" % MODEL, "unknown version"),
                       ("/v2/models/%s/versions/0" % MODEL, "unknown version"),
                       ("/v2/models/%s/versions/01" % MODEL, "unknown version"),
                       ("/v2/models/%s/versions/abc/ready" % MODEL, "unknown version"),
                       ("/v2/models/%s/versions/99999999999999999999999" % MODEL, "unknown version"),
                       ("/v1/models/%s/versions/7" % MODEL, "unknown version")):
        st, h, b = d.json("GET", path)
        check(st == 404 and error_body(b) and what in b["error"], "GET %s is 404 (%s)" % (path, what), (st, b))
    st, h, b = d.json("POST", "/v2/models/no_such_model/infer", body="{}")
    check(st == 404 and error_body(b), "infer on an unknown model is 404", (st, b))
    msg = b.get("error", "") if isinstance(b, dict) else ""
    check("POST /v2/repository/models/no_such_model/load" in msg and "SIGHUP" in msg,
          "the 404 says how a model copied in since is loaded", b)

    # 405 with Allow.
    for method, path, allow in (("POST", "/v2/health/live", "GET, HEAD"), ("DELETE", "/v2", "GET, HEAD"),
                                ("PUT", "/v2/models/%s" % MODEL, "GET, HEAD"), ("POST", "/metrics", "GET, HEAD"),
                                ("GET", "/v2/models/%s/infer" % MODEL, "POST"),
                                ("GET", "/v1/models/%s:predict" % MODEL, "POST"),
                                ("GET", "/v1/models/%s:classify" % MODEL, "POST"),
                                ("POST", "/v1/models/%s/metadata" % MODEL, "GET, HEAD")):
        st, h, b = d.json(method, path, body="{}" if method in ("POST", "PUT") else None)
        check(st == 405 and h.get("allow") == allow and error_body(b),
              "%s %s is 405 with Allow: %s" % (method, path, allow), (st, h.get("allow"), b))


def routes_headers(d):
    """HEAD, request ids, keep-alive after a 404, percent-decoded paths, and the headers
    every response has."""
    # HEAD is GET without the body.
    st, h, b = d.request("HEAD", "/v2")
    check(st == 200 and b == b"" and h.get("content-type", "").startswith("application/json"), "HEAD /v2", (st, h))

    # Request ids: echoed when safe, replaced when not, generated when absent.
    st, h, _ = d.request("GET", "/v2/health/live", headers={"X-Request-Id": "client-id.42:x_y"})
    check(h.get("x-request-id") == "client-id.42:x_y", "a safe X-Request-Id is echoed", h.get("x-request-id"))
    for bad in ("has space", "x" * 65, "semi;colon"):
        st, h, _ = d.request("GET", "/v2/health/live", headers={"X-Request-Id": bad})
        rid = h.get("x-request-id", "")
        check(rid != bad and re.fullmatch(r"[0-9a-f]{16}", rid), "an unsafe X-Request-Id is replaced", (bad, rid))
    ids = set()
    for _ in range(5):
        ids.add(d.request("GET", "/v2/health/live")[1].get("x-request-id"))
    check(len(ids) == 5, "generated request ids differ", ids)

    # Keep-alive survives a 404 (answered without closing).
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    try:
        a = d.request("GET", "/v2/models/no_such_model", conn=c)[0]
        b = d.request("GET", "/v2/health/live", conn=c)[0]
        check(a == 404 and b == 200, "a 404 keeps the connection alive", (a, b))
    finally:
        c.close()

    # Paths are percent-decoded by MHD; whatever they hold, errors stay valid JSON.
    for path, want in (("/v2/models/a%22b%5Cc%0Ad", 'a"b\\c\nd'), ("/v2/models/%FF%FE", "\ufffd")):
        st, h, b = d.json("GET", path)
        check(st == 404 and error_body(b) and want in b["error"], "GET %s: a JSON-escaped 404" % path, (st, b))

    # Every response has Content-Type and X-Request-Id.
    for method, path in (("GET", "/v2/models/nope"), ("GET", "/metrics"), ("POST", "/v2/health/ready"),
                         ("GET", "/v1/models/" + MODEL), ("POST", "/v2/models/%s/infer" % MODEL)):
        st, h, _ = d.request(method, path, body="{}" if method == "POST" else None)
        check("content-type" in h and "x-request-id" in h, "%s %s has Content-Type and X-Request-Id" % (method, path), h)


def test_routes(d):
    """Every route's status, headers and body."""
    routes_health_and_server(d)
    routes_model_metadata(d)
    routes_model_config(d)
    routes_inference_and_tf_serving(d)
    routes_errors(d)
    routes_headers(d)


def test_limits(d):
    """413s: declared Content-Length over the cap (at once), chunked body over the cap (at its end)."""
    path = "/v2/models/%s/infer" % MODEL
    # Declared: answered before any body byte is sent.
    resp = raw(d.port, ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: %d\r\n\r\n" % (path, BODY_CAP + 1)).encode(), read_timeout=5)
    check(status_of(resp) == 413, "a declared Content-Length over max_body_bytes is 413 at once", resp[:200])
    check(b'"error"' in resp and b"max_body_bytes" in resp, "the 413 says which limit", resp[-200:])
    # Exactly at the cap reaches the route (which finds it is not JSON: 400).
    st, h, b = d.json("POST", path, body=b"x" * BODY_CAP)
    check(st == 400 and "JSON" in b.get("error", ""), "a body of exactly max_body_bytes is accepted", (st, b))
    # Chunked: the whole body streams in, the answer comes at its end.
    chunk = b"y" * 1000
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(6)) + b"0\r\n\r\n"
    resp = raw(d.port, ("POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" % path).encode() + body)
    check(status_of(resp) == 413, "a chunked body over max_body_bytes is 413", resp[:200])
    # A chunked body under the cap reaches the route.
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2)) + b"0\r\n\r\n"
    resp = raw(d.port, ("POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                        % path).encode() + body)
    check(status_of(resp) == 400 and b"JSON" in resp, "a chunked body under the cap is accepted", resp[:300])
    # A bad Content-Length is 400 (MHD's or ours).
    resp = raw(d.port, ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n" % path).encode(), read_timeout=3)
    check(status_of(resp) == 400, "an invalid Content-Length is 400", resp[:200])
    # The daemon still serves.
    check(d.request("GET", "/v2/health/live")[0] == 200, "still live after the limit checks")


def test_metrics(d):
    for _ in range(3):
        d.request("GET", "/v2/models/%s/config" % MODEL)
    d.request("GET", "/v2/models/no_such_model")
    st, h, body = d.request("GET", "/metrics")
    text = body.decode()
    check(st == 200 and h.get("content-type", "").startswith("text/plain"), "metrics is text/plain 200", (st, h))
    check(re.search(r"^rnnd_up 1$", text, re.M), "metrics has rnnd_up 1", text[:300])
    m = re.search(r"^rnnd_models_loaded (\d+)$", text, re.M)
    n_models = len([e for e in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, e))])
    check(m and int(m.group(1)) == n_models, "rnnd_models_loaded counts every golden model", (m and m.group(0), n_models))
    m = re.search(r'^rnnd_requests_total\{model="%s",version="1",code="200"\} (\d+)$' % MODEL, text, re.M)
    check(m and int(m.group(1)) >= 3, "rnnd_requests_total counts the model's 200s", text)
    m = re.search(r'^rnnd_requests_total\{model="%s",version="1",code="400"\} (\d+)$' % MODEL, text, re.M)
    check(m and int(m.group(1)) >= 2, "rnnd_requests_total counts the model's 400s", text)
    m = re.search(r'^rnnd_requests_total\{model="",version="",code="404"\} (\d+)$', text, re.M)
    check(m and int(m.group(1)) >= 1, "requests for unknown models are counted without a model", text)
    check("# TYPE rnnd_requests_total counter" in text, "rnnd_requests_total is a counter", text[:400])
    # Text format 0.0.4: each family's HELP, TYPE and samples are one group.
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))

    def family(line):
        if line.startswith("#"):
            return line.split()[2]
        name = re.split(r"[{ ]", line)[0]
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        return base if types.get(base) == "histogram" else name

    seen, broken, last = set(), set(), None
    for line in filter(None, text.splitlines()):
        fam = family(line)
        if fam != last:
            if fam in seen or fam not in types:
                broken.add(fam)
            seen.add(fam)
            last = fam
    check(not broken, "every metrics family is one group, with a TYPE", sorted(broken))
    for line in text.splitlines():
        if line and not line.startswith("#"):
            check(re.fullmatch(r'[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? (\d+(\.\d+)?([eE][-+]?\d+)?)', line),
                  "metrics line is Prometheus text", line)


def test_log(d):
    text = d.stderr()
    check(re.search(r"^<6>.*model %s version 1: loaded" % MODEL, text, re.M), "the log says each model loaded", text[:500])
    check(re.search(r"^<5>.*listening on 127\.0\.0\.1:%d" % d.port, text, re.M), "the log says where it listens", text[:2000])
    check(re.search(r"^<6>.*\[client-id\.42:x_y\] GET /v2/health/live 200|^<6>.*\] GET /v2 200 [0-9.]+ms", text, re.M),
          "requests are logged with id, method, path, status and duration", text[-2000:])
    check(re.search(r"^<6>.*\[[0-9a-f]{16}\] POST /v2/models/%s/infer 200 [0-9.]+ms" % MODEL, text, re.M),
          "an infer request is logged at info with its id", text[-3000:])


def test_command_line():
    def run(*args, env=None, cwd=SRC):
        e = dict(os.environ)
        e.pop("RNND_BACKEND", None)
        if env:
            e.update(env)
        p = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=60, env=e, cwd=cwd)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = run("--help")
    keys = re.findall(r"^([a-z_]+) = ", open(os.path.join(SRC, "config", "rnnd.conf")).read(), re.M)
    check(rc == 0 and len(keys) >= 15, "--help exits 0; rnnd.conf has every key", (rc, keys))
    for k in keys:
        check(("  --%s=" % k) in out, "--help lists %s" % k)
    check("Default: 127.0.0.1:8000" in out and "RNND_BACKEND" in out, "--help shows defaults and the environment")
    check(not re.search(r"\b(issue|bug) #?\d", out, re.I), "--help names no internal tracker issue",
          re.findall(r".*\bissue.*", out))

    rc, out, err = run("--version")
    check(rc == 0 and re.fullmatch(r"rnnd \d+\.\d+\.\d+\n", out), "--version", (rc, out))

    rc, out, err = run("--backends")
    check(rc == 0 and re.search(r"^CPU engine: built \(.*OpenBLAS", out, re.M), "--backends shows the CPU engine", (rc, out, err))
    check(re.search(r"^cuDNN backend: (built \(cuDNN \d+\.\d+\.\d+, CUDA runtime \d+\.\d+\)|not built)$", out, re.M),
          "--backends shows the cuDNN backend", out)
    check(re.search(r"^GPUs: (\d+|none \(.+\)|not probed .*)$", out, re.M), "--backends shows the GPUs or why none", out)
    rc, out, err = run("--backends", env={"RNND_BACKEND": "cpu"})
    check(rc == 0 and "backend setting: cpu (from RNND_BACKEND)" in out, "RNND_BACKEND=cpu overrides backend", out)

    rc, out, err = run("--dump-config")
    with open(os.path.join(SRC, "config", "rnnd.conf")) as f:
        check(rc == 0 and out == f.read(), "config/rnnd.conf is exactly `rnnd --dump-config`")

    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write("# comment\nthreads = 2\nno_such_key = 1\n")
        bad = f.name
    try:
        rc, out, err = run("--config", bad)
        check(rc != 0 and ("%s:3: unknown key 'no_such_key'" % bad) in err, "a bad config file names its line", (rc, err))
        with open(bad, "w") as f:
            f.write("listen = 127.0.0.1:1\n\nmax_body_bytes = lots\n")
        rc, out, err = run("--config=" + bad)
        check(rc != 0 and ("%s:3: max_body_bytes: 'lots'" % bad) in err, "a bad value names the file, line and key", (rc, err))
    finally:
        os.unlink(bad)
    rc, out, err = run("--config", "/nonexistent/rnnd.conf")
    check(rc != 0 and "rnnd: --config: /nonexistent/rnnd.conf: No such file" in err,
          "a missing config file is an error naming --config", (rc, err))
    rc, out, err = run("--threads=lots")
    check(rc != 0 and "--threads: 'lots'" in err, "a bad flag value names the flag", (rc, err))
    rc, out, err = run("--no-such-flag=1")
    check(rc != 0 and "unknown option '--no-such-flag'" in err, "an unknown flag is an error", (rc, err))
    rc, out, err = run("--model-repositry=x")
    check(rc == 1 and err == "rnnd: unknown option '--model-repositry'; did you mean --model_repository? "
          "(rnnd --help lists them)\n", "a usage error is plain text on stderr with the nearest setting",
          (rc, err))
    rc, out, err = run("--log_level=loud")
    check(rc != 0 and "log_level" in err, "a bad enum names the key", (rc, err))
    rc, out, err = run("--model_repository=/nonexistent/models", "--listen=127.0.0.1:%d" % free_port())
    check(rc != 0 and "/nonexistent/models" in err, "a missing repository is fatal and named", (rc, err))
    check(err.count("/nonexistent/models") == 1 and "relative to" not in err,
          "an absolute repository is named once, and not called relative", err)
    # The compiled default, config/models, outside the source tree: relative to the working
    # directory, said once, with the installed settings' --config as the way out.
    elsewhere = tempfile.mkdtemp(prefix="rnnd-cwd-")
    try:
        rc, out, err = run("--listen=127.0.0.1:%d" % free_port(), "--grpc_listen=", cwd=elsewhere)
        check(rc == 1 and "model_repository config/models (relative to the working directory %s): "
              "cannot open repository: No such file or directory" % os.path.realpath(elsewhere) in err
              and err.count("config/models") == 1,
              "a relative repository that is not there says where it was looked for", (rc, err))
        check(re.search(r"; the installed settings: rnnd --config /\S*rnnd/rnnd\.conf$", err, re.M),
              "... and how to read the installed settings", err)
    finally:
        os.rmdir(elsewhere)
    # A listen address that does not resolve names its setting, before any model loads.
    for key, other in (("listen", "--grpc_listen="), ("grpc_listen", "--listen=127.0.0.1:%d" % free_port())):
        rc, out, err = run("--model_repository", GOLDEN, "--%s=nosuchhost.invalid:1" % key, other)
        check(rc == 1 and re.search(r"^<3>.*%s nosuchhost\.invalid:1: cannot resolve 'nosuchhost\.invalid'"
                                    % key, err, re.M),
              "an address that does not resolve names %s" % key, (rc, err[-500:]))
        check("loaded" not in err, "... and is found before the models load", err[-500:])

    # A port in use is a clear error.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        rc, out, err = run("--model_repository", GOLDEN, "--listen=127.0.0.1:%d" % s.getsockname()[1])
        check(rc != 0 and "listen 127.0.0.1:%d: cannot listen: Address already in use" % s.getsockname()[1]
              in err, "a port in use is an error naming listen", (rc, err[-300:]))
        check("loaded" not in err, "... and is found before the models load (they may take minutes)", err[-500:])
        rc, out, err = run("--model_repository", GOLDEN, "--listen=127.0.0.1:%d" % free_port(),
                           "--grpc_listen=127.0.0.1:%d" % s.getsockname()[1])
        check(rc != 0 and "grpc_listen 127.0.0.1:%d: cannot listen: Address already in use" % s.getsockname()[1]
              in err and "loaded" not in err, "the same for grpc_listen", (rc, err[-300:]))


def test_one_port():
    """listen and grpc_listen on one port: each is free alone, so only trying them together
    finds it before the models load; the error names both settings."""
    port = free_port()
    for host in ("127.0.0.1", "0.0.0.0"):
        p = subprocess.run([BIN, "--model_repository", GOLDEN, "--listen=127.0.0.1:%d" % port,
                            "--grpc_listen=%s:%d" % (host, port)], capture_output=True, text=True, timeout=60)
        rc, err = p.returncode, p.stderr
        check(rc == 1 and "grpc_listen %s:%d: listen 127.0.0.1:%d takes that port (HTTP and gRPC need "
              "a port each)" % (host, port, port) in err and "loaded" not in err,
              "listen and grpc_listen on one port (%s) fail at once, naming both" % host, (rc, err[-300:]))


def test_broken_repository():
    """A repository where some models fail: the daemon serves the rest and says why."""
    repo = tempfile.mkdtemp(prefix="rnnd-repo-")
    try:
        shutil.copytree(os.path.join(GOLDEN, MODEL), os.path.join(repo, "good"))
        os.makedirs(os.path.join(repo, "badcfg", "1"))
        with open(os.path.join(repo, "badcfg", "config.json"), "w") as f:
            f.write('{"cell": "lstm", "input_size": 5, "hidden_size": 6, "colour": "blue"}')
        shutil.copytree(os.path.join(GOLDEN, MODEL), os.path.join(repo, "noweights"))
        os.unlink(os.path.join(repo, "noweights", "1", "model.safetensors"))
        # Passed over, each with a log line: a model directory whose name is no model name,
        # and a model whose only version directory has a leading zero.
        shutil.copytree(os.path.join(GOLDEN, MODEL), os.path.join(repo, "my model"))
        shutil.copytree(os.path.join(GOLDEN, MODEL), os.path.join(repo, "zeros"))
        os.rename(os.path.join(repo, "zeros", "1"), os.path.join(repo, "zeros", "007"))
        d = Daemon(repo=repo, wait_ready=False)
        try:
            st, h, b = d.json("GET", "/v2/health/ready")
            check(st == 400 and error_body(b), "ready is 400 when a model failed", (st, b))
            check(d.request("GET", "/v2/health/live")[0] == 200, "live is 200 with broken models")
            check(d.request("GET", "/v2/models/good/ready")[0] == 200, "the good model is ready")
            st, h, b = d.json("GET", "/v2/models/good")
            check(st == 200 and b.get("name") == "good", "the good model serves metadata", (st, b))
            st, h, b = d.json("GET", "/v2/models/badcfg/ready")
            check(st == 400 and "colour" in b.get("error", ""), "a bad config's model is not ready and says why", (st, b))
            st, h, b = d.json("GET", "/v2/models/badcfg")
            check(st == 503 and "colour" in b.get("error", "") and h.get("retry-after") == "1",
                  "a bad config's metadata is 503 with the reason and Retry-After", (st, h, b))
            st, h, b = d.json("GET", "/v2/models/noweights/versions/1/ready")
            check(st == 400 and error_body(b), "a version without weights is not ready", (st, b))
            st, h, b = d.json("POST", "/v2/models/noweights/infer", body="{}")
            check(st == 503 and error_body(b) and h.get("retry-after") == "1",
                  "infer on a model with no loaded version is 503 with Retry-After", (st, h, b))
            # The client hears why, as docs/MODELS.md says, not only the repository index.
            why = "model 'noweights' has no loaded version: version 1 failed to load: noweights/1/model.safetensors: "
            check(b.get("error", "").startswith(why), "the 503 says why the version failed", b)
            st, h, b = d.json("GET", "/v2/models/noweights/ready")
            check(st == 400 and b.get("error", "").startswith(why), "so does the model's ready", (st, b))
            st, h, b = d.json("GET", "/v2/models/zeros/ready")
            check(st == 400 and "zeros/ holds no directory named by a version number (a positive integer "
                  "without leading zeros)" in b.get("error", "") and "not versions: 007/" in b.get("error", ""),
                  "a model without a version names the directories it passed over", (st, b))
            st, h, b = d.json("GET", "/v1/models/badcfg")
            check(st == 503 and "colour" in b.get("error", "") and h.get("retry-after") == "1",
                  "TF Serving status of a bad config's model is 503 with Retry-After", (st, h, b))
            st, h, b = d.json("GET", "/v1/models/noweights")
            vs = b.get("model_version_status", [{}])[0] if st == 200 else {}
            check(st == 200 and vs.get("state") == "END" and vs.get("status", {}).get("error_code") != "OK"
                  and vs.get("status", {}).get("error_message"), "TF status shows the failed version", (st, b))
            page = d.request("GET", "/metrics")[2].decode()
            m = re.search(r"^rnnd_models_loaded (\d+)$", page, re.M)
            check(m and m.group(1) == "1", "rnnd_models_loaded counts only the good model", m and m.group(0))
            failed = dict(re.findall(r'^rnnd_model_load_failed\{model="([^"]+)"\} (\d)$', page, re.M))
            check(failed == {"good": "0", "badcfg": "1", "noweights": "1", "zeros": "1"},
                  "rnnd_model_load_failed is 1 for the models that failed", failed)
            st, _, b = d.json("GET", "/v2/models/noweights/versions/1/ready")
            check(repo not in json.dumps(b) and "noweights/1/model.safetensors" in json.dumps(b),
                  "a reason names files relative to the repository, not the server's paths", b)
            run_test(test_ready_while_swapping, d)
            log = d.stderr()
            check(re.search(r"^<4>.*model badcfg: not loaded: .*colour", log, re.M), "the log says why badcfg failed", log)
            check(re.search(r"^<4>.*model noweights version 1: not loaded", log, re.M), "the log says why noweights failed", log)
            check(re.search(r"^<5>.*model repository: my model/ skipped: not a valid model name", log, re.M),
                  "the log names a directory passed over for its name, and why", log)
            check(re.search(r"^<5>.*model repository: model zeros: directory 007/ ignored: not a version number "
                            r"\(a positive integer without leading zeros", log, re.M),
                  "the log names a version directory passed over, and why", log)
            # A model gone from the repository leaves with a line naming it.
            shutil.rmtree(os.path.join(repo, "badcfg"))
            d.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 10
            while time.time() < deadline and "SIGHUP: reloaded" not in d.stderr()[len(log):]:
                time.sleep(0.05)
            check(re.search(r"^<5>.*SIGHUP: model badcfg is no longer in the repository: it leaves",
                            d.stderr()[len(log):], re.M), "SIGHUP logs a model that left", d.stderr()[len(log):])
            check(d.request("GET", "/v2/models/badcfg/ready")[0] == 404, "... and it is gone")
            rc, secs = d.stop(signal.SIGINT)
            check(rc == 0 and secs < 5, "SIGINT exits 0 quickly", (rc, secs, d.stderr()[-500:]))
            check(not sanitizer_report(d.stderr()), "no sanitizer report", d.stderr()[-3000:])
        finally:
            d.close()
    finally:
        shutil.rmtree(repo)


def test_start_log():
    """The start log's counts agree with their nouns, and byte limits read as rnnd.conf has them."""
    d = Daemon("--threads=1", "--grpc_threads=1", "--grpc_max_streams=1", "--grpc_max_message_bytes=2M")
    try:
        log = d.stderr()
        check(re.search(r"^<5>.*listening on 127\.0\.0\.1:\d+ \(1 HTTP thread, ", log, re.M),
              "one HTTP thread is a thread", log)
        check(re.search(r"^<5>.*gRPC listening on .* \(1 thread, 1 stream a connection, "
                        r"grpc_max_message_bytes 2M\)$", log, re.M),
              "one gRPC thread and stream, and the message limit as rnnd.conf spells it", log)
        rc, _ = d.stop()
        check(rc == 0, "exits 0", rc)
    finally:
        d.close()


def test_model_dir_as_repository():
    """model_repository naming a model's own directory (a new user's mistake) says so at
    start, rather than only that a model '1' has no config.json."""
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, MODEL)
        shutil.copytree(os.path.join(GOLDEN, MODEL), model)
        d = Daemon(repo=model, wait_ready=False)
        try:
            log = d.stderr()
            want = ("model_repository %s holds a config.json: it is a model's directory; "
                    "model_repository is the directory above it, with one directory a model"
                    % model)
            check(re.search(r"^<4>.*" + re.escape(want) + "$", log, re.M),
                  "a model's directory as the repository is named, with the way out", log)
            check(d.request("GET", "/v2/health/live")[0] == 200, "it keeps serving")
        finally:
            d.close()


def test_ready_while_swapping(d):
    """/v2/health/ready, while not every model loaded, counts the table's models while SIGHUP
    and the repository API swap the table.  Under ThreadSanitizer (tests/run.sh's build-tsan)
    the count must be read under the table's lock: it was not (a data race, found this way).
    Two clients poll, each on a connection of its own kept open, so that nothing else the
    daemon does for a new connection orders the read after the swap."""
    stop, seen = [], []

    def poll():
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        try:
            while not stop:
                c.request("GET", "/v2/health/ready")
                r = c.getresponse()
                seen.append((r.status, r.read()))
        except (OSError, http.client.HTTPException) as e:
            seen.append((0, str(e).encode()))
        finally:
            c.close()

    threads = [threading.Thread(target=poll) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        # Twelve rounds: ThreadSanitizer saw the race in 3 of 3 runs of twelve, 1 of 3 of four.
        for _ in range(12):
            d.proc.send_signal(signal.SIGHUP)
            time.sleep(0.3)
            for verb in ("unload", "load"):
                try:
                    st, _, b = d.json("POST", "/v2/repository/models/good/" + verb)
                except OSError as e:
                    st, b = 0, e
                if not check(st == 200, "%s of good while ready is polled: 200" % verb,
                             (st, b, d.stderr()[-3000:])):
                    return
    finally:
        stop.append(1)
        for t in threads:
            t.join()
    check(seen and all(st == 400 and b"models are fully loaded" in b for st, b in seen),
          "ready stays 400 and counts the models throughout", [x for x in seen if x[0] != 400][:3])


def test_json_log():
    d = Daemon("--log_format=json", "--log_level=debug", "--access_log=all")
    try:
        d.request("GET", "/v2/health/live", headers={"X-Request-Id": "json-log-1"})
        d.request("GET", "/v2/models/%s" % MODEL, headers={"X-Request-Id": 'quote"and\\back'})
        rc, secs = d.stop()
        check(rc == 0, "the JSON-log daemon exits 0", rc)
        lines = [l for l in d.stderr().splitlines() if l]
        objs = []
        for l in lines:
            try:
                objs.append(json.loads(l))
            except ValueError:
                check(False, "a json log line parses", l)
        check(len(objs) == len(lines) and len(objs) > 10, "every log line is one JSON object", len(objs))
        check(all({"time", "level", "message"} <= set(o) for o in objs), "JSON lines carry time, level and message")
        check(all(o["level"] in ("err", "warning", "notice", "info", "debug") for o in objs), "JSON levels are syslog names")
        req = [o for o in objs if o.get("request_id") == "json-log-1"]
        check(len(req) == 1 and "GET /v2/health/live 200" in req[0]["message"] and req[0]["level"] == "debug",
              "a request line carries its request_id", req)
    finally:
        d.close()


def test_access_log():
    """access_log: off by default (no line per request), errors (4xx/5xx with their
    reason and the response's bytes), all (json: every part a field)."""
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 5],
                                   "data": [0.5] * 10}]})
    bad = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 4],
                                  "data": [0.5] * 8}]})
    for mode in ("off", "errors", "all"):
        args = ["--log_format=json"] if mode == "all" else []
        d = Daemon(*args + (["--access_log=%s" % mode] if mode != "off" else []))
        try:
            st_ok, _, ok_body = d.request("POST", "/v2/models/%s/infer" % MODEL, body=body,
                                          headers={"X-Request-Id": "access-ok"})
            st_bad, _, bad_body = d.request("POST", "/v2/models/%s/infer" % MODEL, body=bad,
                                            headers={"X-Request-Id": "access-bad"})
            check(st_ok == 200 and st_bad == 400, "access_log %s: the requests are answered" % mode,
                  (st_ok, st_bad))
            d.stop()
            log = d.stderr()
            if mode == "off":
                check("access-ok" not in log and "access-bad" not in log and "/infer" not in log,
                      "access_log off (the default): no line per request", log[-1500:])
            elif mode == "errors":
                m = re.search(r"^<5>.*\[access-bad\] POST /v2/models/%s/infer 400 [0-9.]+ms (\d+)B "
                              r"model=%s version=1: (.*)$" % (MODEL, MODEL), log, re.M)
                check(m and int(m.group(1)) == len(bad_body) and "input 'input'" in m.group(2),
                      "access_log errors: a 400 at notice with the response's bytes and its reason",
                      log[-1500:])
                check("access-ok" not in log, "access_log errors: no line for a 200", log[-1500:])
            else:
                objs = [json.loads(l) for l in log.splitlines() if l.startswith("{")]
                ok = [o for o in objs if o.get("request_id") == "access-ok"]
                check(len(ok) == 1 and ok[0].get("status") == 200 and ok[0].get("model") == MODEL
                      and ok[0].get("version") == 1 and ok[0].get("bytes") == len(ok_body)
                      and ok[0].get("method") == "POST" and isinstance(ok[0].get("duration_ms"), float)
                      and ok[0]["level"] == "info",
                      "access_log all, json: status, model, version, bytes, duration_ms as fields", ok)
                b = [o for o in objs if o.get("request_id") == "access-bad"]
                check(len(b) == 1 and b[0].get("status") == 400 and "input 'input'" in b[0].get("reason", ""),
                      "access_log all, json: a 400's reason as a field", b)
        finally:
            d.close()


def test_shutdown():
    """sd_notify, SIGTERM with an idle keep-alive connection and with a stalled upload."""
    ns, path, tmp = notify_socket()
    d = Daemon(env={"NOTIFY_SOCKET": path})
    try:
        msgs = notifications(ns)
        check(any(m.startswith("READY=1") and "STATUS=Serving" in m for m in msgs), "READY=1 is sent when ready", msgs)
        c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        check(d.request("GET", "/v2/health/live", conn=c)[0] == 200, "keep-alive request before SIGTERM")
        rc, secs = d.stop(signal.SIGTERM)
        check(rc == 0 and secs < 5, "SIGTERM with an idle keep-alive connection exits 0 within 5 s", (rc, secs))
        check(any(m.startswith("STOPPING=1") for m in notifications(ns)), "STOPPING=1 is sent on SIGTERM")
        c.close()
        log = d.stderr()
        check("SIGTERM: stopping" in log and "stopped" in log, "the log says it stopped", log[-500:])
        check("ERROR: AddressSanitizer" not in log and "runtime error:" not in log, "no sanitizer report", log[-2000:])
    finally:
        d.close()

    ns.close()
    shutil.rmtree(tmp)

    d = Daemon("--shutdown_timeout=1")
    try:
        s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
        s.sendall(("POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{" % MODEL).encode())
        time.sleep(0.3)
        rc, secs = d.stop(signal.SIGTERM)
        check(rc == 0 and 0.8 < secs < 5, "SIGTERM waits up to shutdown_timeout for a stalled upload, then exits 0",
              (rc, secs, d.stderr()[-500:]))
        s.close()
    finally:
        d.close()


def test_socket_activation():
    """systemd socket activation: the daemon serves on the socket it is given as fd 3."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    port = ls.getsockname()[1]
    log = tempfile.NamedTemporaryFile(prefix="rnnd-log-", delete=False)

    def as_systemd():
        # In the child, after fork: LISTEN_PID must be the daemon's own pid, so the
        # environment is changed here and inherited by exec (env=None below).
        os.dup2(ls.fileno(), 3)
        os.environ["LISTEN_FDS"] = "1"
        os.environ["LISTEN_PID"] = str(os.getpid())
        os.environ.pop("RNND_BACKEND", None)
        os.environ.pop("NOTIFY_SOCKET", None)

    p = subprocess.Popen([BIN, "--model_repository", GOLDEN, "--listen=127.0.0.1:0",
                          "--grpc_listen=127.0.0.1:0"], stdout=subprocess.DEVNULL,
                         stderr=log, cwd=SRC, close_fds=False, preexec_fn=as_systemd)
    ls.close()
    try:
        st = None
        deadline = time.time() + 30
        while time.time() < deadline and p.poll() is None:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/v2/health/ready")
                st = c.getresponse().status
                c.close()
                if st == 200:
                    break
            except OSError:
                time.sleep(0.05)
        check(st == 200, "serves on the socket systemd passed (LISTEN_FDS), ignoring listen", st)
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
        check(rc == 0, "socket-activated daemon exits 0 on SIGTERM", rc)
        with open(log.name, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        check("listening on fd 3 from systemd, port %d" % port in text, "the log names the passed socket", text[-800:])
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.unlink(log.name)


def main():
    if not os.access(BIN, os.X_OK):
        print("RNND_BIN=%s is not an executable" % BIN)
        return 1
    t0 = time.time()
    d = Daemon("--max_body_bytes=%d" % BODY_CAP, "--log_level=info", "--access_log=all")
    try:
        run_test(test_routes, d)
        run_test(test_limits, d)
        run_test(test_metrics, d)
        run_test(test_log, d)
        rc, secs = d.stop(signal.SIGTERM)
        check(rc == 0 and secs < 5, "SIGTERM exits 0 within 5 s", (rc, secs))
        err = d.stderr()
        check("ERROR: AddressSanitizer" not in err and "runtime error:" not in err, "no sanitizer report",
              err[-3000:])
        if rc != 0:
            print(err[-3000:])
    finally:
        d.close()
    run_test(test_command_line)
    run_test(test_one_port)
    run_test(test_broken_repository)
    run_test(test_start_log)
    run_test(test_model_dir_as_repository)
    run_test(test_json_log)
    run_test(test_access_log)
    run_test(test_shutdown)
    run_test(test_socket_activation)
    print("test_http: %d passed, %d failed (%.1f s)" % (rnndtest.passed, rnndtest.failed, time.time() - t0))
    return 1 if rnndtest.failed else 0


if __name__ == "__main__":
    sys.exit(main())
