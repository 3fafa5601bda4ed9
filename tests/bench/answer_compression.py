#!/usr/bin/env python3
"""answer_compression.py: what compressed answers cost and save (docs/HTTP.md, "Compressed
requests and answers"; docs/BENCHMARKS.md, "Compressed answers").  Not a test.

Starts BUILD/daemon/rnnd on config/models and sends digits_lstm 64 images asking for every
output, as JSON and as binary tensors, on one keep-alive connection, with no Accept-Encoding,
with `gzip` and with `deflate`: for each, the answer's bytes on the wire and the median
milliseconds a request over ROUNDS rounds (each REQUESTS requests, the three encodings taking
turns).  Beside them, for the same uncompressed answer, zlib level 1 in this process with
Huffman coding alone (what rnnd uses for tensors) and with string matching (zlib's default
strategy): bytes and milliseconds, to show why.

Usage: python3 tests/bench/answer_compression.py [--build BUILD] [--requests N] [--rounds R]
Python 3 standard library only.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import zlib

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(SRC, "config", "models")
PATH = "/v2/models/digits_lstm/infer"
ENCODINGS = (None, "gzip", "deflate")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def bodies():
    ts = json.load(open(os.path.join(DEMO, "digits_lstm", "test_set.json")))
    inputs = [{"name": "input", "datatype": "FP32", "shape": [64, 8, 8], "data": (ts["x"] * 64)[:64]}]
    outs = [{"name": n, "parameters": {"binary_data": True}} for n in ("output", "h_n", "c_n", "scores")]
    binary = json.dumps({"inputs": inputs, "outputs": outs}).encode()
    return (("JSON", json.dumps({"inputs": inputs}).encode(), {}),
            ("binary", binary, {"Inference-Header-Content-Length": str(len(binary))}))


def post(conn, body, headers):
    conn.request("POST", PATH, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        sys.exit("answer %d: %r" % (r.status, data[:200]))
    return data


def zlib_ms(data, strategy, n=20):
    t = time.perf_counter()
    for _ in range(n):
        o = zlib.compressobj(1, zlib.DEFLATED, 31, 8, strategy)
        z = o.compress(data) + o.flush()
    return len(z), (time.perf_counter() - t) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    port = free_port()
    d = subprocess.Popen([os.path.join(a.build, "daemon", "rnnd"), "--listen=127.0.0.1:%d" % port,
                          "--grpc_listen=", "--model_repository", DEMO],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(100):
            try:
                conn.request("GET", "/v2/health/ready")
                r = conn.getresponse()
                r.read()
                if r.status == 200:
                    break
                time.sleep(0.1)
            except OSError:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                time.sleep(0.1)
        print("| answer | Accept-Encoding | bytes | ms a request (median of %d rounds of %d) |"
              % (a.rounds, a.requests))
        print("| --- | --- | ---: | ---: |")
        plain = {}
        for what, body, hdr in bodies():
            times = {e: [] for e in ENCODINGS}
            size = {}
            for e in ENCODINGS:  # warm-up
                post(conn, body, dict(hdr, **({"Accept-Encoding": e} if e else {})))
            for _ in range(a.rounds):
                for e in ENCODINGS:
                    h = dict(hdr, **({"Accept-Encoding": e} if e else {}))
                    t = time.perf_counter()
                    for _ in range(a.requests):
                        data = post(conn, body, h)
                    times[e].append((time.perf_counter() - t) / a.requests * 1e3)
                    size[e] = len(data)
                    if e is None:
                        plain[what] = data
            for e in ENCODINGS:
                print("| %s | %s | %d | %.2f |" % (what, e or "(none)", size[e], statistics.median(times[e])))
        print()
        print("| answer | zlib level 1 | bytes | ms |")
        print("| --- | --- | ---: | ---: |")
        for what, data in plain.items():
            for name, strategy in (("Huffman only", zlib.Z_HUFFMAN_ONLY), ("default (matching)", zlib.Z_DEFAULT_STRATEGY)):
                n, ms = zlib_ms(data, strategy)
                print("| %s (%d bytes) | %s | %d | %.2f |" % (what, len(data), name, n, ms))
    finally:
        d.terminate()
        d.wait()


if __name__ == "__main__":
    main()
