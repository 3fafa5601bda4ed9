#!/usr/bin/env python3
"""grpc_bench.py: gRPC against HTTP on the same model and client (issue 31; docs/BENCHMARKS.md,
"gRPC").  Not a test: `make bench-grpc`, and the last part of `make bench`.

Starts BUILD/daemon/rnnd on two demo models (digits_lstm; digits_stream, the demo GRU with a
sequence block) and drives it with Triton's perf_analyzer (tests/interop/tools.sh fetches
it), the same client for both protocols, one run after the other, the order alternated
over rounds:

- "binary-64": 64 clients, one [1, 8, 8] image a request to digits_lstm, as `-i grpc`
  (ModelInfer, raw_input_contents / raw_output_contents), `-i http` with binary input and
  output tensors, and `-i http` with JSON tensors; the data a file of fixed values in
  [0, 1) (perf_analyzer's own random bytes held denormal floats, which slowed the engine's
  arithmetic tenfold for every protocol alike before it read them as zeros, and would
  hide the front ends' cost);
- "binary-4000/s": the same requests sent at a fixed 4,000 a second, so that every protocol
  gets the same batches and the daemon's CPU per request compares the front ends alone;
- "sequences-32": 32 clients each running sequences of 8 chunks of one step on
  digits_stream (the sequence_id / start / end parameters), as gRPC `--streaming`
  (ModelStreamInfer, one stream a client) and HTTP (one request a chunk).

perf_analyzer's gRPC client (gRPC's C++ library) costs more CPU a request than its HTTP
one (libcurl), and on a host where client and daemon share the CPUs that alone decides
"binary-64".  So the same requests also go out through h2load (nghttp2's load client,
Debian's nghttp2-client; one client thread), which speaks HTTP/1.1 and HTTP/2 with the
same code and sends a fixed body: "binary-64-h2load" sends the digits_lstm image as HTTP
binary tensors (--h1, 64 connections), and as a gRPC ModelInfer (its body packed by
BUILD/tests/bench/rnnd-grpc-body) on one connection of 64 streams, as a gRPC channel
shared by 64 callers; on 8 connections of 8 streams, about as perf_analyzer's 64 clients
share channels (it opened 11 connections); and on 64 connections of one stream.  h2load reads no gRPC status,
so every h2load run also checks that the daemon counted as many successes as h2load had
answers and no failure.

For each run: the throughput perf_analyzer measures (requests, i.e. chunks, a second), its
p50 and p99, the daemon's CPU time per request (utime + stime of /proc/PID/stat over the
run over the requests its statistics counted) and perf_analyzer's (its rusage), and the
load average.  Each (case, protocol) keeps its best round, since noise only slows a run
and adds CPU time: the highest throughput, or at a fixed rate the lowest daemon CPU.
Stdout: markdown (the machine, the table, the issue's targets); --json FILE the figures.

--split-cpus runs the daemon on the first half of the CPUs and the client on the rest, so that
the rate is the daemon's own and not what the client leaves it (on a 2-CPU host: one each; the
daemon's threads and grpc_threads "auto" then count one CPU).

Usage: python3 tests/bench/grpc_bench.py [--build BUILD] [--seconds S] [--rounds R]
                                         [--quick] [--only CASE,...] [--json FILE] [--split-cpus]
Python 3 standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
from fetch_tool import fetch_tool  # noqa: E402
from load_bench import free_port  # noqa: E402  (tests/bench, beside this file)

# case: (model, perf_analyzer arguments, {protocol: its own arguments})
CASES = {
    "binary-64": ("digits_lstm", ["--shape", "input:8,8", "--concurrency-range", "64", "--input-data", "DATA"],
                  {"grpc": [],
                   "http": ["--input-tensor-format", "binary", "--output-tensor-format", "binary"],
                   "http-json": ["--input-tensor-format", "json", "--output-tensor-format", "json"]}),
    "binary-4000/s": ("digits_lstm", ["--shape", "input:8,8", "--request-rate-range", "4000", "--input-data",
                                      "DATA"],
                      {"grpc": [],
                       "http": ["--input-tensor-format", "binary", "--output-tensor-format", "binary"],
                       "http-json": ["--input-tensor-format", "json", "--output-tensor-format", "json"]}),
    "sequences-32": ("digits_stream", ["--shape", "input:1,8", "--sequence-length", "8", "--concurrency-range",
                                       "32", "--input-data", "zero"],
                     {"grpc": ["--streaming"], "http": ["--sync"]}),
}


# case: (model, {protocol: (h2load arguments, body kind)}); 64 requests in flight each.
H2LOAD_CASES = {
    "binary-64-h2load": ("digits_lstm", {"grpc": (["-c", "1", "-m", "64"], "grpc"),
                                         "grpc-8conn": (["-c", "8", "-m", "8"], "grpc"),
                                         "grpc-64conn": (["-c", "64", "-m", "1"], "grpc"),
                                         "http": (["--h1", "-c", "64", "-m", "1"], "http")}),
}


# --split-cpus: (the daemon's CPUs, the client's) as taskset lists, else None.
SPLIT = None


def pinned(cmd, who):
    """cmd under taskset on its side's CPUs with --split-cpus, else cmd."""
    return ["taskset", "-c", SPLIT[who]] + cmd if SPLIT else cmd


def log(*a):
    print("grpc_bench:", *a, file=sys.stderr, flush=True)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def served(port, model):
    with urllib.request.urlopen("http://127.0.0.1:%d/v2/models/%s/stats" % (port, model), timeout=10) as r:
        return json.load(r)["model_stats"][0]["inference_stats"]["success"]["count"]


def write_data(tmp):
    """perf_analyzer's --input-data file: 16 images of fixed values in [0, 1)."""
    rng = random.Random(31)
    data = [{"input": {"content": [round(rng.random(), 6) for _ in range(64)], "shape": [8, 8]}}
            for _ in range(16)]
    path = os.path.join(tmp, "data.json")
    with open(path, "w") as f:
        json.dump({"data": data}, f)
    return path


def answered(port, model):
    """{HTTP code: count} of rnnd_requests_total for model (a gRPC call under the HTTP code its
    status stands for: OK 200, CANCELLED 499, ...)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    return {int(c): int(n) for c, n in
            re.findall(r'^rnnd_requests_total\{model="%s",version="[^"]*",code="(\d+)"\} (\d+)$' % model, text,
                       re.M)}


def write_bodies(build, tmp):
    """h2load's bodies: the first image of write_data's file as HTTP binary tensors (the JSON
    header, then the floats) and as a framed gRPC ModelInferRequest; both ask for scores."""
    rng = random.Random(31)
    raw = struct.pack("<64f", *[round(rng.random(), 6) for _ in range(64)])
    head = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 8, 8],
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "outputs": [{"name": "scores", "parameters": {"binary_data": True}}]}).encode()
    bodies = {"http": os.path.join(tmp, "http.bin"), "grpc": os.path.join(tmp, "grpc.bin"),
              "http_header_len": len(head)}
    with open(bodies["http"], "wb") as f:
        f.write(head + raw)
    with open(bodies["grpc"], "wb") as f:
        subprocess.run([os.path.join(build, "tests", "bench", "rnnd-grpc-body"), "digits_lstm", "input",
                        "1,8,8", "scores"], input=raw, stdout=f, check=True)
    return bodies


def h2load_args(d, case, proto):
    """h2load's arguments after -D/-n and -t: the body file, connections and streams,
    headers and URL of (case, proto) against daemon d (also tests/bench/front_cost.py's)."""
    model, protos = H2LOAD_CASES[case]
    args, kind = protos[proto]
    if kind == "grpc":
        url = "http://127.0.0.1:%d/inference.GRPCInferenceService/ModelInfer" % d["grpc"]
        headers = ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    else:
        url = "http://127.0.0.1:%d/v2/models/%s/infer" % (d["http"], model)
        headers = ["-H", "content-type: application/octet-stream", "-H",
                   "inference-header-content-length: %d" % d["bodies"]["http_header_len"]]
    return ["-d", d["bodies"][kind]] + args + headers + [url]


def run_h2load(h2load, d, case, proto, seconds):
    model = H2LOAD_CASES[case][0]
    cmd = pinned([h2load, "-D", str(int(seconds)), "-t", "1"] + h2load_args(d, case, proto), 1)
    load = os.getloadavg()[0]
    a0, c0, k0 = answered(d["http"], model), cpu_seconds(d["pid"]), children_cpu()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600).stdout
    time.sleep(0.5)  # the calls h2load left in flight end
    a1, c1, k1 = answered(d["http"], model), cpu_seconds(d["pid"]), children_cpu()
    m = re.search(r"finished in ([0-9.]+)s, ([0-9.]+) req/s", out)
    ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored",
                   out)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+(\S+)", out)
    if m is None or ok is None:
        raise RuntimeError("h2load %s %s:\n%s" % (proto, case, out[-2000:]))
    succeeded, failed = int(ok.group(1)), int(ok.group(2)) + int(ok.group(3))
    delta = {c: a1.get(c, 0) - a0.get(c, 0) for c in set(a0) | set(a1)}
    delta = {c: v for c, v in delta.items() if v}
    # h2load ends a run with up to 64 calls in flight and leaves them: the daemon answers
    # them (200), or counts them CANCELLED (499) when it sees the client gone first.
    n = delta.get(200, 0)
    if failed or set(delta) - {200, 499} or not succeeded <= n <= succeeded + 64 or delta.get(499, 0) > 64:
        raise RuntimeError("h2load %s %s: %d answers (%d failed), the daemon counted %s" % (
            proto, case, succeeded, failed, delta))
    n = max(1, n)
    return {"throughput": float(m.group(2)), "mean_ms": h2load_ms(mean.group(1)) if mean else None,
            "requests": n, "daemon_cpu_us": (c1 - c0) * 1e6 / n, "client_cpu_us": (k1 - k0) * 1e6 / n,
            "load": round(max(load, os.getloadavg()[0]), 2)}


def h2load_ms(text):
    """h2load's "1.23ms", "456us", "1.2s" in ms."""
    for unit, scale in (("us", 1e-3), ("ms", 1.0), ("s", 1e3)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * scale
    return None


def run_one(pa, d, case, proto, seconds):
    model, args, extra = CASES[case]
    port = d["grpc"] if proto == "grpc" else d["http"]
    args = [d["data"] if a == "DATA" else a for a in args]
    # Three windows of S/3 s, all taken as stable: perf_analyzer reports their mean.
    cmd = [pa, "-m", model, "-u", "127.0.0.1:%d" % port, "-i", proto.split("-")[0], "--measurement-mode",
           "time_windows", "--measurement-interval", str(int(seconds * 1000 / 3)), "--stability-percentage",
           "1000", "--max-trials", "3", "--percentile", "99"] + args + extra[proto]
    cmd = pinned(cmd, 1)
    load = os.getloadavg()[0]
    n0, c0, k0 = served(d["http"], model), cpu_seconds(d["pid"]), children_cpu()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600).stdout
    n1, c1, k1 = served(d["http"], model), cpu_seconds(d["pid"]), children_cpu()
    m = re.search(r"Throughput: ([0-9.]+) infer/sec", out)
    p50 = re.search(r"p50 latency: (\d+) usec", out)
    p99 = re.search(r"p99 latency: (\d+) usec", out)
    if m is None:
        raise RuntimeError("perf_analyzer %s %s:\n%s" % (proto, case, out[-2000:]))
    n = max(1, n1 - n0)
    return {"throughput": float(m.group(1)), "p50_us": int(p50.group(1)) if p50 else None,
            "p99_us": int(p99.group(1)) if p99 else None, "requests": n1 - n0,
            "daemon_cpu_us": (c1 - c0) * 1e6 / n, "client_cpu_us": (k1 - k0) * 1e6 / n,
            "load": round(max(load, os.getloadavg()[0]), 2)}


def start(build, tmp, wrap=()):
    """The daemon on two demo models copied into tmp, ready; wrap prefixes its command
    (tests/bench/front_cost.py: valgrind)."""
    for name in ("digits_lstm", "digits_stream"):
        shutil.copytree(os.path.join(SRC, "config", "models", name), os.path.join(tmp, name))
    http, grpc = free_port(), free_port()
    proc = subprocess.Popen(pinned(list(wrap) + [os.path.join(build, "daemon", "rnnd"), "--listen=127.0.0.1:%d" % http,
                                    "--grpc_listen=127.0.0.1:%d" % grpc, "--model_repository", tmp,
                                    "--log_level=warning"], 0),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/v2/health/ready" % http, timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError("rnnd did not become ready")
    return {"http": http, "grpc": grpc, "pid": proc.pid, "proc": proc, "data": write_data(tmp),
            "bodies": write_bodies(build, tmp)}


def better(case, a, b):
    """Whether round a beats round b: at a fixed rate the lower daemon CPU, else the higher throughput."""
    if case in CASES and "--request-rate-range" in CASES[case][1]:
        return a["daemon_cpu_us"] < b["daemon_cpu_us"]
    return a["throughput"] > b["throughput"]


def measure(pa, h2load, build, seconds, rounds, only):
    """{(case, protocol): best round}, the rounds alternating the protocols' order."""
    best = {}
    cases = [c for c in list(CASES) + (list(H2LOAD_CASES) if h2load else []) if not only or c in only]
    with tempfile.TemporaryDirectory(prefix="rnnd-grpc-bench-") as tmp:
        d = start(build, tmp)
        try:
            for case in cases:
                protos = list(CASES[case][2] if case in CASES else H2LOAD_CASES[case][1])
                for r in range(rounds):
                    for proto in (protos if r % 2 == 0 else protos[::-1]):
                        res = (run_one(pa, d, case, proto, seconds) if case in CASES
                               else run_h2load(h2load, d, case, proto, seconds))
                        log("%s %s round %d: %.0f/s, daemon %.1f us, client %.1f us CPU a request, "
                            "load %.2f" % (case, proto, r, res["throughput"], res["daemon_cpu_us"],
                                           res["client_cpu_us"], res["load"]))
                        if (case, proto) not in best or better(case, res, best[case, proto]):
                            best[case, proto] = res
        finally:
            d["proc"].terminate()
            d["proc"].wait(30)
    return best


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def report(best, a, command):
    print("## gRPC against HTTP\n")
    print("%s, %d CPUs (%s), the clients and rnnd on the same host; %s; best of %d rounds of %g s; "
          "`%s`.\n" % (cpu_model(), os.cpu_count(), platform.platform(), datetime.date.today().isoformat(),
                       a.rounds, a.seconds, command))
    print("| case | client | protocol | throughput /s | latency ms: p50 / p99 (h2load: mean) | daemon CPU us "
          "/ request | client CPU us / request | load avg |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | ---: |")
    for (case, proto), r in best.items():
        if case in H2LOAD_CASES:
            client, lat = "h2load", "%.2f" % (r["mean_ms"] or 0)
        else:
            client, lat = "perf_analyzer", "%.2f / %.2f" % ((r["p50_us"] or 0) / 1e3, (r["p99_us"] or 0) / 1e3)
        print("| %s | %s | %s | %.0f | %s | %.1f | %.1f | %.2f |" % (
            case, client, proto, r["throughput"], lat, r["daemon_cpu_us"], r["client_cpu_us"], r["load"]))
    targets = (("binary ModelInfer at 64 clients / HTTP binary tensors, throughput (perf_analyzer)", "binary-64",
                "grpc", "http", "throughput", True),
               ("the same, h2load for both, gRPC on one connection of 64 streams", "binary-64-h2load", "grpc",
                "http", "throughput", True),
               ("the same, h2load for both, gRPC on 8 connections of 8 streams", "binary-64-h2load",
                "grpc-8conn", "http", "throughput", True),
               ("the same, h2load for both, gRPC on 64 connections", "binary-64-h2load", "grpc-64conn", "http",
                "throughput", True),
               ("daemon CPU per request at 64 clients, h2load, gRPC on one connection / HTTP binary",
                "binary-64-h2load", "grpc", "http", "daemon_cpu_us", False),
               ("daemon CPU per request at 4,000/s, gRPC binary / HTTP JSON", "binary-4000/s", "grpc", "http-json",
                "daemon_cpu_us", False),
               ("daemon CPU per request at 4,000/s, gRPC binary / HTTP binary", "binary-4000/s", "grpc", "http",
                "daemon_cpu_us", False),
               ("streamed sequence chunks/s / HTTP sequence requests/s", "sequences-32", "grpc", "http",
                "throughput", True))
    print("\nTargets (issue 31):")
    for what, case, p1, p2, key, more_is_better in targets:
        if (case, p1) not in best or (case, p2) not in best:
            continue
        x, y = best[case, p1][key], best[case, p2][key]
        met = x >= y if more_is_better else x <= y
        print("- %s: %.2f (%s)" % (what, x / y, "met" if met else "missed by %.0f%%" % (abs(x / y - 1) * 100)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="3 s runs, 2 rounds")
    ap.add_argument("--only", help="CASE[,CASE]: these cases alone")
    ap.add_argument("--json")
    ap.add_argument("--split-cpus", action="store_true",
                    help="the daemon on the first half of this process's CPUs, the client on the rest "
                         "(taskset), so that neither takes the other's CPU time")
    a = ap.parse_args()
    if a.split_cpus:
        global SPLIT
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            log("--split-cpus needs two CPUs")
            return 1
        half = len(cpus) // 2
        SPLIT = (",".join(map(str, cpus[:half])), ",".join(map(str, cpus[half:])))
    if a.quick:
        a.seconds, a.rounds = 3, 2
    pa, why = fetch_tool("perf_analyzer", SRC)
    if pa is None:
        log("no perf_analyzer: %s" % why[1])
        return 1
    h2load = shutil.which("h2load")
    if h2load is None:
        log("no h2load (Debian's nghttp2-client): no binary-64-h2load")
    best = measure(pa, h2load, a.build, a.seconds, a.rounds, a.only.split(",") if a.only else None)
    command = os.environ.get("RNND_BENCH_COMMAND") or " ".join(["python3", "tests/bench/grpc_bench.py"] + sys.argv[1:])
    report(best, a, command)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"%s/%s" % k: v for k, v in best.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
