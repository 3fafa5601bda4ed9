#!/usr/bin/env python3
"""server_bench.py: rnnd against MLServer serving the same model, measured the same way.

MLServer (Seldon's KServe v2 server in Python) has no runtime for recurrent networks; a
user of it serves one through onnxruntime in a runtime of a few lines
(tests/bench/mlserver/onnx_runtime.py).  This script:

  1. writes the demo model digits_lstm (config/models: an LSTM of 64 over 8 steps of 8
     features, a softmax head of 10) as an ONNX graph from its safetensors, with
     onnx.helper (Transpose, LSTM, Squeeze, Gemm, Softmax), so both servers hold the
     same weights;
  2. starts BUILD/daemon/rnnd on the demo model and MLServer on the graph, each on
     loopback, each with its batching on (rnnd's config; MLServer's adaptive batching
     with the same 64 and 200 us);
  3. checks both answer the model's example.json alike (max abs difference of the
     scores <= 1e-5), so a wrong answer is never timed;
  4. runs BUILD/clients/rnnd-load against each (KServe v2 JSON, one sequence of 8 steps
     per request, closed loop) at each concurrency, the servers alternated for --rounds
     rounds, each keeping its best throughput.

Prints a markdown table (requests/s, p50 and p99 ms, and rnnd / MLServer), and with
--json FILE writes the rows for tests/bench/plots.py.

Usage: python3 tests/bench/server_bench.py --build BUILD --mlserver VENV/bin/mlserver
           [--concurrency 1,16,64] [--seconds 5] [--rounds 2] [--json FILE]
Needs, beside rnnd's build: mlserver, onnxruntime, onnx and numpy (PyPI), in the
environment whose `mlserver` is given; this script runs under that environment's Python.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = "digits_lstm"


def log(*a):
    print("server_bench:", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=np.float32).reshape(v["shape"])
    return out


def write_onnx(path):
    """digits_lstm as an ONNX graph: input [B, T, 8] -> scores [B, 10]."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    t = read_safetensors(os.path.join(ROOT, "config", "models", MODEL, "1", "model.safetensors"))
    H = t["rnn.weight_hh_l0"].shape[1]

    def iofc(w):  # PyTorch's gate order i, f, g, o; ONNX's i, o, f, c
        i, f, g, o = np.split(w, 4)
        return np.concatenate([i, o, f, g])
    W, R = iofc(t["rnn.weight_ih_l0"])[None], iofc(t["rnn.weight_hh_l0"])[None]
    B = np.concatenate([iofc(t["rnn.bias_ih_l0"]), iofc(t["rnn.bias_hh_l0"])])[None]
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("W", W), ("R", R), ("B", B), ("fc_w", t["fc.weight"]), ("fc_b", t["fc.bias"]))]
    inits.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "axes0"))
    nodes = [
        helper.make_node("Transpose", ["input"], ["x_t"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["x_t", "W", "R", "B"], ["", "y_h"], hidden_size=H),
        helper.make_node("Squeeze", ["y_h", "axes0"], ["h"]),
        helper.make_node("Gemm", ["h", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["scores"], axis=1),
    ]
    g = helper.make_graph(nodes, MODEL, [helper.make_tensor_value_info(
        "input", TensorProto.FLOAT, ["B", "T", t["rnn.weight_ih_l0"].shape[1]])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["B", t["fc.weight"].shape[0]])],
        inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)


def wait_ready(url, proc, what, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError("%s exited %d" % (what, proc.returncode))
        try:
            with urllib.request.urlopen(url + "/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("%s did not get ready" % what)


def scores(url):
    body = open(os.path.join(ROOT, "config", "models", MODEL, "example.json"), "rb").read()
    req = urllib.request.Request("%s/v2/models/%s/infer" % (url, MODEL), body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        out = json.loads(r.read())
    return [o for o in out["outputs"] if o["name"] == "scores"][0]["data"]


def load(build, url, c, seconds):
    cmd = [os.path.join(build, "clients", "rnnd-load"), "--url=" + url, "--model=" + MODEL,
           "--api=v2", "--format=json", "--input=input:FP32:-1,-1,8", "--outputs=scores",
           "--sequences=1", "--length=8", "--concurrency=%d" % c, "--warmup=1s",
           "--duration=%gs" % seconds, "--json", "--progress=false", "--max-error-rate=0"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-500:]))
    return json.loads(r.stdout)


def start(args, tmp):
    """(servers {name: url}, processes)."""
    rp, mp = free_port(), free_port()
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    os.symlink(os.path.join(ROOT, "config", "models", MODEL), os.path.join(repo, MODEL))
    procs = [subprocess.Popen([os.path.join(args.build, "daemon", "rnnd"),
                               "--listen=127.0.0.1:%d" % rp, "--model_repository", repo,
                               "--log_level=warning"], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(tmp, "rnnd.log"), "w"))]
    ml = os.path.join(tmp, "mlserver")
    os.makedirs(os.path.join(ml, MODEL))
    write_onnx(os.path.join(ml, MODEL, "model.onnx"))
    shutil.copy(os.path.join(ROOT, "tests", "bench", "mlserver", "onnx_runtime.py"), ml)
    with open(os.path.join(ml, "settings.json"), "w") as f:
        json.dump({"http_port": mp, "grpc_port": free_port(), "metrics_port": free_port(),
                   "host": "127.0.0.1"}, f)
    with open(os.path.join(ml, MODEL, "model-settings.json"), "w") as f:
        json.dump({"name": MODEL, "implementation": "onnx_runtime.OnnxRuntime",
                   "parameters": {"uri": "./model.onnx"},
                   "max_batch_size": 64, "max_batch_time": 0.0002}, f)
    procs.append(subprocess.Popen([args.mlserver, "start", ml], cwd=ml, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(tmp, "mlserver.log"), "w")))
    servers = {"rnnd": "http://127.0.0.1:%d" % rp, "MLServer": "http://127.0.0.1:%d" % mp}
    wait_ready(servers["rnnd"], procs[0], "rnnd")
    wait_ready(servers["MLServer"], procs[1], "MLServer")
    return servers, procs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--mlserver", required=True)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json")
    args = ap.parse_args()
    conc = [int(c) for c in args.concurrency.split(",")]
    tmp = tempfile.mkdtemp(prefix="rnnd-server-bench-")
    procs = []
    rows = []
    try:
        servers, procs = start(args, tmp)
        a, b = scores(servers["rnnd"]), scores(servers["MLServer"])
        diff = max(abs(x - y) for x, y in zip(a, b))
        if len(a) != len(b) or diff > 1e-5:
            raise RuntimeError("the servers disagree on example.json: max diff %g" % diff)
        log("example.json: both servers agree within %.2g" % diff)
        for c in conc:
            best = {}
            for _ in range(args.rounds):
                for name, url in servers.items():
                    rep = load(args.build, url, c, args.seconds)
                    if name not in best or rep["throughput"] > best[name]["throughput"]:
                        best[name] = rep
                    log("%s c=%d: %.0f req/s" % (name, c, rep["throughput"]))
            rows.append((c, best["rnnd"], best["MLServer"]))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    import mlserver
    lines = ["## rnnd against MLServer (onnxruntime runtime), same model, same client", "",
             "- date: %s; machine: %s, %d CPUs; MLServer %s" % (
                 datetime.date.today().isoformat(), platform.processor() or platform.machine(),
                 os.cpu_count() or 0, mlserver.__version__),
             "- command: python3 tests/bench/server_bench.py %s" % " ".join(sys.argv[1:]),
             "- digits_lstm (LSTM 64 over 8 x 8, softmax 10); KServe v2 JSON, one sequence a "
             "request, closed loop, %g s a point after 1 s of warm-up; best of %d alternated "
             "rounds" % (args.seconds, args.rounds), "",
             "| clients | rnnd req/s | MLServer req/s | rnnd / MLServer | rnnd p50 / p99 ms "
             "| MLServer p50 / p99 ms |", "|---:|---:|---:|---:|---|---|"]
    out = []
    for c, r, m in rows:
        lines.append("| %d | %.0f | %.0f | %.1fx | %.2f / %.2f | %.2f / %.2f |" % (
            c, r["throughput"], m["throughput"], r["throughput"] / m["throughput"],
            r["latency_ms"]["p50"], r["latency_ms"]["p99"], m["latency_ms"]["p50"],
            m["latency_ms"]["p99"]))
        out.append({"clients": c, "rnnd": r, "mlserver": m})
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"server_bench": out, "header": [l[2:] for l in lines[2:5]]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
