#!/usr/bin/env python3
"""front_cost.py: what one request costs the daemon's front ends, counted, not timed
(docs/BENCHMARKS.md, "gRPC against HTTP").  Not a test.

On a host whose CPUs the client and the daemon share, or whose neighbours take them, a
timed rate moves by a fifth between runs; instructions and system calls do not.  For each
protocol of grpc_bench.py's "binary-64-h2load" case (the digits_lstm image as a gRPC
ModelInfer on 64 connections of one stream, and as HTTP/1.1 binary tensors on 64
connections), h2load sends N requests after a warm-up, and:

- the daemon runs under valgrind's callgrind, instrumented for the N requests only
  (callgrind_control): instructions a request in all, in the worker pool (engine/pool.c's
  worker_main: batching and the engine) and in the rest (the front end: reading, parsing,
  scheduling, answering);
- the daemon runs again under `strace -c -f` for the N requests: system calls a request,
  by name.

The worker's share depends on how the requests batched, which differs between runs; the
front end's does not.  Valgrind runs AVX2 code where the host has AVX-512 (it has no
AVX-512), which changes the engine's count, not the front end's.

Usage: python3 tests/bench/front_cost.py [--build BUILD] [--requests N] [--json FILE]
Needs valgrind, strace and h2load (Debian: valgrind, strace, nghttp2-client).
Python 3 standard library only.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc_bench  # noqa: E402 (its daemon start, bodies and h2load arguments)

PROTOCOLS = ("grpc-64conn", "http")


def h2load_cmd(d, proto, n):
    return ["h2load", "-n", str(n), "-t", "1"] + grpc_bench.h2load_args(d, "binary-64-h2load", proto)


def drive(d, proto, n):
    out = subprocess.run(h2load_cmd(d, proto, n), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=3600).stdout
    ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out)
    if ok is None or int(ok.group(1)) != n:
        raise RuntimeError("h2load %s:\n%s" % (proto, out[-2000:]))


def start(build, tmp, wrap):
    """grpc_bench.start()'s daemon under wrap (a command prefix), ready."""
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    return grpc_bench.start(build, repo, wrap)


def stop(d):
    d["proc"].terminate()
    try:
        d["proc"].wait(timeout=120)
    except subprocess.TimeoutExpired:
        d["proc"].kill()


def callgrind(build, proto, n):
    """{"all": Ir a request, "worker": ..., "front": ...} under callgrind."""
    with tempfile.TemporaryDirectory(prefix="rnnd-cost-") as tmp:
        out = os.path.join(tmp, "cg.out")
        d = start(build, tmp, ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                               "--callgrind-out-file=" + out + ".%p", "-q"])
        try:
            drive(d, proto, 640)  # warm-up: connections, allocator, branch history
            pid = str(d["proc"].pid)  # valgrind's, which runs rnnd in its own process
            subprocess.run(["callgrind_control", "-i", "on", pid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            drive(d, proto, n)
            subprocess.run(["callgrind_control", "-i", "off", pid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            subprocess.run(["callgrind_control", "-d", pid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        finally:
            stop(d)
        dumps = sorted(f for f in os.listdir(tmp) if re.match(r"cg\.out\.\d+\.\d+$", f))
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", os.path.join(tmp, dumps[-1])],
                              stdout=subprocess.PIPE, text=True, check=True).stdout
    total = re.search(r"^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text, re.M)
    worker = re.search(r"^\s*([\d,]+) \([\d.]+%\)\s+\S*engine/pool\.c:worker_main", text, re.M)
    total = int(total.group(1).replace(",", ""))
    worker = int(worker.group(1).replace(",", "")) if worker else 0
    return {"all": total / n, "worker": worker / n, "front": (total - worker) / n}


def syscalls(build, proto, n):
    """(system calls a request, {name: calls a request}) under strace -c -f."""
    with tempfile.TemporaryDirectory(prefix="rnnd-cost-") as tmp:
        d = start(build, tmp, [])
        log = os.path.join(tmp, "strace")
        try:
            drive(d, proto, 640)
            st = subprocess.Popen(["strace", "-c", "-f", "-o", log, "-p", str(d["proc"].pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # attached to every thread
            drive(d, proto, n)
            st.send_signal(2)
            st.wait(timeout=60)
        finally:
            stop(d)
        with open(log) as f:
            text = f.read()
    calls = {}
    for m in re.finditer(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", text, re.M):
        if m.group(2) != "total":
            calls[m.group(2)] = int(m.group(1)) / n
    return sum(calls.values()), calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--requests", type=int, default=3200)
    ap.add_argument("--json")
    a = ap.parse_args()
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate", "strace", "h2load"):
        if shutil.which(tool) is None:
            sys.exit("front_cost: %s is missing (Debian: valgrind, strace, nghttp2-client)" % tool)
    build = os.path.abspath(a.build)
    res = {}
    for proto in PROTOCOLS:
        ir = callgrind(build, proto, a.requests)
        total, calls = syscalls(build, proto, a.requests)
        res[proto] = {"instructions": ir, "syscalls": total, "by_call": calls}
        print("front_cost: %s done" % proto, file=sys.stderr, flush=True)
    names = {"grpc-64conn": "gRPC ModelInfer, 64 connections x 1", "http": "HTTP/1.1 binary tensors, 64 connections"}
    print("| protocol | front end, instructions a request | worker pool | system calls a request | the most |")
    print("| --- | ---: | ---: | ---: | --- |")
    for proto in PROTOCOLS:
        r = res[proto]
        top = sorted(r["by_call"].items(), key=lambda kv: -kv[1])[:4]
        print("| %s | %s | %s | %.1f | %s |" % (
            names[proto], format(round(r["instructions"]["front"]), ","), format(round(r["instructions"]["worker"]), ","),
            r["syscalls"], ", ".join("%s %.1f" % kv for kv in top)))
    print()
    print("%d requests a protocol after 640 to warm up; `python3 tests/bench/front_cost.py --build %s --requests %d`"
          % (a.requests, a.build, a.requests))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
