#!/usr/bin/env python3
"""shm_bench.py: what Triton's system shared memory extension saves (docs/HTTP.md "Shared
memory"; docs/BENCHMARKS.md "Shared memory").  Not a test.

Starts BUILD/daemon/rnnd with --max_shm_regions on one model, "wide": a zero-weight LSTM of
input_size 512 and 16 units, so that a request of T = 128 steps carries 256 KiB of input and
its compute is small beside moving it.  Drives it with Triton's perf_analyzer (fetched by
tests/interop/tools.sh) over HTTP with JSON and binary tensors and over gRPC with raw
tensors, each with and without --shared-memory system (inputs and outputs through regions),
--input-data zero, CONCURRENCY requests in flight, a fixed measurement window.  For each:
perf_analyzer's throughput and p50 latency, and the daemon's CPU time per request (utime +
stime from /proc/PID/stat over the run, divided by the requests perf_analyzer counted).

Usage: python3 tests/bench/shm_bench.py [--build BUILD] [--steps T] [--concurrency N]
       [--window MS]
Python 3 standard library only (and perf_analyzer).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tests", "support"))

import rnndtest as th  # noqa: E402  (the test harness: zero_lstm, Daemon)


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(pa, d, grpc, fmt, shm, args):
    cmd = [pa, "-m", "wide", "-u", "127.0.0.1:%d" % (d.grpc_port if grpc else d.port), "-i",
           "grpc" if grpc else "http", "--shape", "input:%d,512" % args.steps, "--input-data", "zero",
           "--concurrency-range", str(args.concurrency), "--measurement-interval", str(args.window),
           "--stability-percentage", "100", "--max-trials", "3"]
    if not grpc:
        cmd += ["--input-tensor-format", fmt, "--output-tensor-format", fmt]
    if shm:
        cmd += ["--shared-memory", "system", "--output-shared-memory-size", str(1 << 20)]
    c0 = cpu_seconds(d.proc.pid)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    c1 = cpu_seconds(d.proc.pid)
    if r.returncode != 0:
        sys.exit("perf_analyzer failed:\n" + r.stdout[-2000:])
    thr = float(re.search(r"Throughput: ([0-9.]+) infer/sec", r.stdout).group(1))
    p50 = int(re.search(r"p50 latency: (\d+) usec", r.stdout).group(1))
    # Every request of the run (the trials and the warm-up), as rnnd counted them.
    return thr, p50, c1 - c0


def served(d):
    st, _, b = d.json("GET", "/v2/models/wide/stats")
    return b["model_stats"][0]["inference_stats"]["success"]["count"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--window", type=int, default=4000)
    args = ap.parse_args()
    os.environ["RNND_BIN"] = os.path.join(args.build, "daemon", "rnnd")
    pa = subprocess.run(["sh", os.path.join(SRC, "tests", "interop", "tools.sh"), "perf_analyzer"],
                        stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    if not os.path.exists(pa):
        sys.exit("no perf_analyzer: %s" % pa)
    with tempfile.TemporaryDirectory(prefix="rnnd-shm-bench-") as tmp:
        th.zero_lstm(tmp, "wide", 16, 512, input_size=512, batching={"max_batch_size": 8})
        d = th.Daemon("--max_shm_regions=16", repo=tmp)
        try:
            print("| protocol | tensors | shared memory | infer/s | p50 latency (us) | daemon CPU per request (us) |")
            print("| --- | --- | --- | ---: | ---: | ---: |")
            for grpc, fmt in ((False, "json"), (False, "binary"), (True, "raw")):
                for shm in (False, True):
                    n0 = served(d)
                    thr, p50, cpu = run(pa, d, grpc, fmt, shm, args)
                    n = served(d) - n0
                    print("| %s | %s | %s | %.0f | %d | %.0f |" % ("gRPC" if grpc else "HTTP", fmt,
                          "system" if shm else "no", thr, p50, 1e6 * cpu / max(n, 1)))
                    sys.stdout.flush()
            d.stop()
        finally:
            d.close()


if __name__ == "__main__":
    main()
