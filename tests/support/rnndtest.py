"""rnndtest: the library the Python suites share (docs/TESTING.md): the real daemon
(Daemon: one rnnd on a free loopback port, its log in a file), raw HTTP, the goldens'
files, systemd's notify socket, the check() counter every suite reports through, and
run_test(), which runs a suite's test functions by name.

Every suite takes a name filter: `--only=NAME[,NAME...]` among its arguments runs only the
test functions whose names contain one of them, as in

    meson test -C build http --test-args=--only=test_routes

(the suites find this module through PYTHONPATH, which tests/meson.build sets to
tests/support; by hand: `PYTHONPATH=tests/support python3 tests/integration/test_http.py`).
Python 3 standard library only.
"""

import array
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("RNND_BIN", "build/daemon/rnnd")
SRC = os.environ.get("RNND_SRC", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GOLDEN = os.path.join(SRC, "tests", "golden", "models")
MODEL = "lstm_l1_uni_equal_h0"  # LSTM, input 5, hidden 6, one layer
HEAD_MODEL = "lstm_emb_l1_uni_ragged_noh0_head_softmax_last"  # embedding + head
BODY_CAP = 4096

TOL = 1e-5  # the goldens' tolerance, fp32 against PyTorch (DESIGN.md §4)

passed = 0
failed = 0
skipped = 0


def check(cond, what, detail=""):
    """Counts one check; prints it when it fails."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: %s%s" % (what, (": " + str(detail)) if detail else ""), flush=True)
    return cond


def _take_filter(argv):
    """The --only=NAME[,NAME] arguments, taken out of argv so that a suite's own stay."""
    names = []
    for a in list(argv[1:]):
        if a.startswith("--only="):
            names += [n for n in a[len("--only="):].split(",") if n]
            argv.remove(a)
    return names


ONLY = _take_filter(sys.argv)


def selected(name):
    """Whether the name filter (--only) lets the test function called name run."""
    return not ONLY or any(n in name for n in ONLY)


def run_test(fn, *args, **kw):
    """fn(*args, **kw) when the name filter lets it run; None otherwise (counted skipped)."""
    global skipped
    if not selected(fn.__name__):
        skipped += 1
        return None
    return fn(*args, **kw)


def summary(suite):
    """Prints the suite's line of counts; returns its exit status (77: the filter ran nothing)."""
    print("%s: %d passed, %d failed%s" % (suite, passed, failed,
                                          ", %d tests left out by --only" % skipped if ONLY else ""))
    if failed:
        return 1
    return 77 if ONLY and passed == 0 else 0


def free_port():
    """A port nobody listens on: bind port 0 and give it back."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def zero_lstm(repo, name, hidden, max_len, input_size=8, **cfg):
    """A one-layer LSTM (input 8 by default) whose weights are all zero: slow enough per step to
    hold a worker, and quick to write.  The time a step takes does not depend on the values.
    cfg: more config.json fields."""
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict({"cell": "lstm", "input_size": input_size, "hidden_size": hidden, "num_layers": 1,
                        "max_sequence_length": max_len}, **cfg), f)
    shapes = [("weight_ih_l0", [4 * hidden, input_size]), ("weight_hh_l0", [4 * hidden, hidden]),
              ("bias_ih_l0", [4 * hidden]), ("bias_hh_l0", [4 * hidden])]
    header, off = {}, 0
    for n, shape in shapes:
        size = 4 * shape[0] * (shape[1] if len(shape) > 1 else 1)
        header[n] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + size]}
        off += size
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "1", "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        f.truncate(8 + len(h) + off)


def zero_body(steps):
    return json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, steps, 8],
                                   "data": [0.0] * (steps * 8)}], "outputs": [{"name": "h_n"}]})


class Daemon:
    """One rnnd process on a free loopback port; stderr goes to a file."""

    def __init__(self, *args, repo=GOLDEN, wait_ready=True, env=None):
        self.port = free_port()
        self.grpc_port = free_port()  # the gRPC front end's (docs/HTTP.md, "gRPC")
        self.log = tempfile.NamedTemporaryFile(prefix="rnnd-log-", suffix=".txt", delete=False)
        cmd = [BIN, "--listen=127.0.0.1:%d" % self.port, "--grpc_listen=127.0.0.1:%d" % self.grpc_port,
               "--model_repository", repo, "--threads=2"]
        cmd += list(args)
        e = dict(os.environ)
        e.pop("RNND_BACKEND", None)
        e.pop("NOTIFY_SOCKET", None)
        if env:
            e.update(env)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=e, cwd=SRC)
        self.wait_up(wait_ready)

    def wait_up(self, ready):
        """Polls until the daemon answers (200 on ready, or anything on live)."""
        # RNND_TEST_READY_S: a slower backend (the GPU suites on the CPU stand-in
        # of tests/cudasim, which time cuDNN's algorithms on the CPU) takes longer.
        deadline = time.time() + float(os.environ.get("RNND_TEST_READY_S", "30"))
        path = "/v2/health/ready" if ready else "/v2/health/live"
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rnnd exited with %d:\n%s" % (self.proc.returncode, self.stderr()))
            try:
                st, _, _ = self.request("GET", path)
                if st == 200 or not ready:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("rnnd did not get ready:\n" + self.stderr())

    def request(self, method, path, body=None, headers=None, conn=None):
        """(status, headers dict with lower-case names, body bytes)."""
        own = conn is None
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            if own:
                c.close()

    def json(self, method, path, **kw):
        st, h, body = self.request(method, path, **kw)
        try:
            return st, h, json.loads(body) if body else None
        except ValueError:
            return st, h, {"__not_json__": body[:200]}

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Sends sig; returns (exit code or None if it hung, seconds taken)."""
        t0 = time.time()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        return rc, time.time() - t0

    def stderr(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if os.environ.get("RNND_KEEP_LOGS"):
            print("daemon log kept: %s" % self.log.name, file=sys.stderr)
        else:
            os.unlink(self.log.name)


def raw(port, data, read_timeout=5.0, shut=False):
    """Sends bytes on a fresh socket; returns everything read until close or timeout."""
    s = socket.create_connection(("127.0.0.1", port), timeout=read_timeout)
    out = b""
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    return out


def status_of(raw_response):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw_response)
    return int(m.group(1)) if m else None


def error_body(body):
    return isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"] != ""


def notify_socket():
    """A datagram socket standing in for systemd's NOTIFY_SOCKET: (socket, path, tmpdir)."""
    tmp = tempfile.mkdtemp(prefix="rnnd-notify-")
    path = os.path.join(tmp, "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    return s, path, tmp


def notifications(s):
    out = []
    while True:
        try:
            out.append(s.recv(4096).decode())
        except socket.timeout:
            return out


def sanitizer_report(log):
    return any(s in log for s in ("AddressSanitizer", "ThreadSanitizer", "LeakSanitizer", "runtime error:"))


def read_safetensors(path):
    """{name: (dtype, shape, list of values)} for F32 and I64 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[base + b:base + e]
        code = {"F32": "f", "I64": "q"}.get(t["dtype"])
        if code is None:
            continue
        a = array.array(code)
        a.frombytes(raw)
        if sys.byteorder != "little":
            a.byteswap()
        out[name] = (t["dtype"], t["shape"], a.tolist())
    return out


def max_err(got, want):
    if len(got) != len(want):
        return float("inf")
    return max((abs(a - b) for a, b in zip(got, want)), default=0.0)


def case_inputs(io):
    """KServe inputs for a golden case (JSON data)."""
    inputs = []
    for name, kname, dt in (("x", "input", "FP32"), ("tokens", "tokens", "INT64"),
                            ("lengths", "lengths", "INT64"), ("h0", "h0", "FP32"), ("c0", "c0", "FP32")):
        if name in io:
            _, shape, vals = io[name]
            inputs.append({"name": kname, "datatype": dt, "shape": shape, "data": vals})
    return inputs


def outputs_of(resp):
    return {o["name"]: o for o in resp.get("outputs", [])}


def compare_case(name, io, outs, how):
    for key in ("output", "h_n", "c_n", "scores"):
        if key not in io:
            continue
        o = outs.get(key)
        if not check(o is not None, "%s %s: output %s is answered" % (name, how, key)):
            continue
        check(o["shape"] == io[key][1], "%s %s: %s shape" % (name, how, key), (o["shape"], io[key][1]))
        e = max_err(o["data"], io[key][2])
        check(e <= TOL, "%s %s: %s within %g of the golden" % (name, how, key, TOL), e)
