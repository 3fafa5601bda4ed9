#!/usr/bin/env python3
"""test_unread.py: clients that do not read their answers hold no more than
max_response_memory (docs/HTTP.md "Limits", tests/hostile/README.md).

An answer can be far larger than its request, and it is held until its client reads it: an
HTTP client whose socket never drains, a gRPC client whose flow control window never
opens.  Here max_response_memory is its least, 1 MiB, and one such client asks a model for
8 MB of binary outputs: that one is let in (nothing else is held), and while it is not read
every other inference, HTTP or gRPC, is answered 503 / UNAVAILABLE at once naming the
setting, rnnd_response_memory_bytes shows what is held, the health and metrics routes
still answer, and once the client reads (HTTP) or leaves (gRPC) the memory is given back
and inference is served again.

Exits 77 (SKIP) without the venv (h2, tritonclient[grpc]).  Environment: RNND_BIN, RNND_SRC.
"""

import json
import re
import shutil
import socket
import sys
import tempfile
import time

try:
    import h2.events
    import h2.settings
    import numpy as np
    import tritonclient.grpc as gc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.utils import InferenceServerException
except ImportError as e:
    print("test_unread (hostile): SKIP: cannot import h2, tritonclient[grpc] (%s); "
          "tests/run.sh makes .venv-test with them" % e)
    sys.exit(77)

import rnndtest as th
from rnndtest import Daemon, check, run_test
from test_grpc import Conn

MODEL = "wide"
B, T, H = 2, 4096, 256  # output [2, 4096, 256]: 8 MiB of binary floats, past any socket buffer


def held(d):
    st, _, body = d.request("GET", "/metrics")
    m = re.search(rb"^rnnd_response_memory_bytes (\d+)$", body, re.M)
    return int(m.group(1)) if st == 200 and m else None


def wait_held(d, want, timeout=30):
    """Polls the gauge until want(value); returns the last value read."""
    deadline = time.time() + timeout
    v = held(d)
    while not want(v) and time.time() < deadline:
        time.sleep(0.05)
        v = held(d)
    return v


def small_http(d):
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 8],
                                   "data": [0.0] * 16}], "outputs": [{"name": "h_n"}]})
    return d.json("POST", "/v2/models/%s/infer" % MODEL, body=body)


def small_grpc(d):
    c = gc.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
    i = gc.InferInput("input", [1, 2, 8], "FP32")
    i.set_data_from_numpy(np.zeros((1, 2, 8), np.float32))
    try:
        c.infer(MODEL, [i], outputs=[gc.InferRequestedOutput("h_n")], client_timeout=10)
        return "OK", ""
    except InferenceServerException as e:
        return e.status(), e.message()
    finally:
        c.close()


def refused_while_held(d, how):
    """Every other inference is refused at once, naming the setting; the rest still answers."""
    t0 = time.time()
    st, h, body = small_http(d)
    took = time.time() - t0
    msg = (body or {}).get("error", "")
    check(st == 503 and "max_response_memory" in msg and took < 2,
          "%s: an HTTP inference is answered 503 at once naming max_response_memory" % how,
          (st, body, took))
    check("retry-after" in h, "%s: the 503 says Retry-After" % how, h)
    code, msg = small_grpc(d)
    check(code == "StatusCode.UNAVAILABLE" and "max_response_memory" in msg,
          "%s: a gRPC inference is UNAVAILABLE naming max_response_memory" % how, (code, msg))
    check(d.request("GET", "/v2/health/ready")[0] == 200, "%s: ready still answers" % how)


def served_again(d, how):
    v = wait_held(d, lambda v: v == 0)
    check(v == 0, "%s: the memory is given back" % how, v)
    st, _, body = small_http(d)
    check(st == 200, "%s: HTTP inference is served again" % how, (st, body))
    check(small_grpc(d)[0] == "OK", "%s: gRPC inference is served again" % how)


def big_body():
    return json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [B, T, 8],
                                   "data": [0.0] * (B * T * 8)}],
                       "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()


def test_http_unread(d):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    body = big_body()
    s.sendall(b"POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % (MODEL.encode(), len(body)) + body)
    v = wait_held(d, lambda v: v and v > B * T * H * 4)
    check(v is not None and v > B * T * H * 4, "HTTP: the unread answer is counted", v)
    time.sleep(1.5)  # its inference has run: the answer waits on the socket
    refused_while_held(d, "HTTP answer unread")
    got = b""
    s.settimeout(30)
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        got += chunk
        head, _, rest = got.partition(b"\r\n\r\n")
        m = re.search(rb"\r\ncontent-length: (\d+)", head, re.I)
        if m and len(rest) >= int(m.group(1)):
            break
    check(got.startswith(b"HTTP/1.1 200") and len(got) > B * T * H * 4,
          "HTTP: the unread answer is whole once read", (len(got), got[:200]))
    s.close()
    served_again(d, "HTTP answer read")


def test_grpc_unread(d):
    c = Conn(d.grpc_port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    c.pump(lambda evs: any(isinstance(e, h2.events.SettingsAcknowledged) for e in evs), 5)
    rq = pb.ModelInferRequest(model_name=MODEL)
    rq.inputs.add(name="input", datatype="FP32", shape=[B, T, 8])
    rq.outputs.add(name="output")
    rq.raw_input_contents.append(np.zeros((B, T, 8), np.float32).tobytes())
    msg = rq.SerializeToString()
    c.headers(1)
    c.data(1, b"\0" + len(msg).to_bytes(4, "big") + msg, end=True)
    v = wait_held(d, lambda v: v and v > B * T * H * 4)
    check(v is not None and v > B * T * H * 4, "gRPC: the unsent answer is counted", v)
    time.sleep(1.5)  # packed and waiting for a window that never opens
    refused_while_held(d, "gRPC answer unsent")
    c.close()
    served_again(d, "gRPC client gone")


def main():
    repo = tempfile.mkdtemp(prefix="rnnd-unread-")
    try:
        th.zero_lstm(repo, MODEL, H, T)
        d = Daemon("--max_response_memory=1M", "--connection_timeout=60", repo=repo)
        try:
            for t in (test_http_unread, test_grpc_unread):
                run_test(t, d)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
            err = d.stderr()
            if th.failed:
                print(err[-3000:])
            check("AddressSanitizer" not in err and "runtime error:" not in err and
                  "ThreadSanitizer" not in err, "no sanitizer report", err[-3000:])
        finally:
            d.close()
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    return th.summary("test_unread (hostile)")


if __name__ == "__main__":
    sys.exit(main())
