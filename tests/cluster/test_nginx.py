#!/usr/bin/env python3
"""test_nginx.py: nginx (Debian's) in front of three real rnnd on loopback, with
config/nginx/rnnd.conf as committed (only its ports and paths replaced), under
rnnd-load (issue 20; docs/OPERATIONS.md "More than one host"):

1. through nginx: health, an inference, X-Request-Id passed through both ways,
   each instance's /metrics, and a stateful sequence kept on one instance by
   its X-Sequence-Id header;
2. a rolling restart under steady load: each instance in turn drained with
   SIGTERM and started again, nginx kept running: every request answered 200
   (rnnd's 503s while draining and refused connections are retried by nginx);
3. one instance killed with SIGKILL under load: the failures are counted, and
   once nginx has marked it down every request is answered.

The figures are printed.  Exits 77 (skip) without nginx.  Python 3 standard
library only; prints one line per failed check and "N passed, N failed".
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
import rnndtest as th  # the harness (tests/support)
from rnndtest import check, free_port, run_test

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
LOAD = os.environ.get("RNND_LOAD", os.path.join("build", "clients", "rnnd-load"))
DEMO = os.path.join(th.SRC, "config", "models")


class Instance:
    """One rnnd on a fixed port: started, stopped and started again."""

    def __init__(self, n, port, repo, tmp):
        self.n, self.port, self.repo = n, port, repo
        self.log = os.path.join(tmp, "rnnd%d.log" % n)
        self.proc = None

    def start(self):
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([th.BIN, "--listen=127.0.0.1:%d" % self.port, "--grpc_listen=127.0.0.1:0",
                                          "--model_repository",
                                          self.repo, "--threads=2", "--shutdown_timeout=10",
                                          "--access_log=all"],
                                         stdout=subprocess.DEVNULL, stderr=log, cwd=th.SRC)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("rnnd %d exited: %s" % (self.n, open(self.log).read()[-2000:]))
            if get(self.port, "/v2/health/ready")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("rnnd %d did not get ready" % self.n)

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


def get(port, path, headers=None, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()
    except OSError as e:
        return 0, {}, str(e).encode()


def nginx_conf(tmp, port, ports):
    """The committed config with the test's ports, inside a main config of the test's own."""
    with open(os.path.join(th.SRC, "config", "nginx", "rnnd.conf")) as f:
        text = f.read()
    for i, p in enumerate(ports):
        text = text.replace("127.0.0.1:%d" % (8110 + 10 * i), "127.0.0.1:%d" % p)  # rnnd@.socket's
    text = text.replace("listen 8000;", "listen 127.0.0.1:%d;" % port)
    with open(os.path.join(tmp, "rnnd.conf"), "w") as f:
        f.write(text)
    for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    main = """worker_processes 1;
pid %(t)s/nginx.pid;
error_log %(t)s/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log %(t)s/logs/access.log;
    client_body_temp_path %(t)s/body;
    proxy_temp_path %(t)s/proxy;
    fastcgi_temp_path %(t)s/fastcgi;
    uwsgi_temp_path %(t)s/uwsgi;
    scgi_temp_path %(t)s/scgi;
    include %(t)s/rnnd.conf;
}
""" % {"t": tmp}
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(main)
    return path


def load(port, seconds, concurrency=8):
    """rnnd-load through nginx, in the background: returns the process (JSON report on stdout)."""
    return subprocess.Popen([LOAD, "--url", "http://127.0.0.1:%d" % port, "--model", "digits_lstm",
                             "--concurrency", str(concurrency), "--duration", str(seconds), "--warmup", "0",
                             "--length", "8", "--timeout", "20", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report(p):
    out, err = p.communicate(timeout=120)
    try:
        return json.loads(out)
    except ValueError:
        return {"errors": -1, "raw": (out + err)[-1500:]}


def test_through(port, insts, nginx_tmp):
    body = open(os.path.join(DEMO, "digits_lstm", "example.json"), "rb").read()
    st, h, b = get(port, "/v2/health/ready")
    check(st == 200, "nginx -> rnnd: ready", (st, b[:200]))
    st, h, b = get(port, "/v2/models/digits_lstm/infer", {"X-Request-Id": "through-nginx-1"}, body)
    check(st == 200 and h.get("X-Request-Id") == "through-nginx-1",
          "an inference through nginx, X-Request-Id back", (st, h.get("X-Request-Id")))
    time.sleep(0.2)
    logs = "".join(open(i.log).read() for i in insts)
    check("through-nginx-1" in logs, "rnnd logs the client's X-Request-Id passed by nginx")
    for i in insts:
        st, _, b = get(port, "/instances/%d/metrics" % i.n)
        check(st == 200 and b"rnnd_up 1" in b, "instance %d's /metrics through nginx" % i.n, (st, b[:100]))
    # A stateful sequence: its chunks follow X-Sequence-Id to one instance.
    ts = json.load(open(os.path.join(DEMO, "digits_lstm", "test_set.json")))
    x = ts["x"][0]
    statuses = []
    for k, (a, e) in enumerate(((0, 3), (3, 5), (5, 8))):
        chunk = {"parameters": {"sequence_id": "nginx-seq", "sequence_start": k == 0, "sequence_end": k == 2},
                 "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, e - a, 8],
                             "data": [v for row in x[a:e] for v in row]}]}
        st, _, b = get(port, "/v2/models/digits_lstm/infer", {"X-Sequence-Id": "nginx-seq"},
                       json.dumps(chunk).encode())
        statuses.append(st if st == 200 else (st, b[:200]))
    check(statuses == [200, 200, 200], "a sequence's chunks with X-Sequence-Id reach its instance", statuses)


# config/nginx/rnnd.conf's fail_timeout: how long nginx leaves a failed instance alone.
FAIL_TIMEOUT_S = 5


def test_rolling_restart(port, insts):
    """Each instance in turn: SIGTERM (it drains), started again, and the next one only once
    nginx tries the restarted one again (after fail_timeout), as an operator's script does."""
    p = load(port, 2 + len(insts) * (FAIL_TIMEOUT_S + 2))
    time.sleep(2)
    restarted = 0
    for i in insts:
        rc = i.stop(signal.SIGTERM)
        check(rc == 0, "instance %d drains and exits 0 on SIGTERM" % i.n, rc)
        i.start()
        restarted += 1
        time.sleep(FAIL_TIMEOUT_S + 1)
    r = report(p)
    print("rolling restart of %d instances under 8 clients: %s requests ok, %s errors, %.0f req/s, "
          "p99 %.1f ms" % (restarted, r.get("ok"), r.get("errors"), r.get("throughput", 0),
                           r.get("latency_ms", {}).get("p99", 0)))
    check(r.get("errors") == 0 and r.get("ok", 0) > 0,
          "a rolling restart under load: every request answered 200 (nginx retries)", r)


def test_sigkill(port, insts):
    p = load(port, 6)
    time.sleep(2)
    victim = insts[1]
    victim.stop(signal.SIGKILL)
    r = report(p)
    print("SIGKILL of one instance under 8 clients: %s ok, %s failed" % (r.get("ok"), r.get("errors")))
    check(r.get("ok", 0) > 0 and r.get("errors", -1) >= 0, "SIGKILL under load: the failures are counted", r)
    after = report(load(port, 3))
    print("after nginx marked it down: %s ok, %s failed" % (after.get("ok"), after.get("errors")))
    check(after.get("errors") == 0 and after.get("ok", 0) > 0,
          "after nginx marked the killed instance down, every request is answered", after)
    victim.start()


def main():
    if not os.path.exists(NGINX):
        print("test_nginx: SKIP: no nginx (make deps installs nginx-light)")
        return 77
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rnnd-cluster-") as tmp:
        repo = os.path.join(tmp, "models")
        shutil.copytree(DEMO, repo)
        cfg_path = os.path.join(repo, "digits_lstm", "config.json")
        cfg = json.load(open(cfg_path))
        cfg["sequence"] = {}
        json.dump(cfg, open(cfg_path, "w"))
        ports = [free_port() for _ in range(3)]
        insts = [Instance(n + 1, p, repo, tmp) for n, p in enumerate(ports)]
        port = free_port()
        nginx_tmp = os.path.join(tmp, "nginx")
        os.makedirs(nginx_tmp)
        conf = nginx_conf(nginx_tmp, port, ports)
        ng = None
        try:
            for i in insts:
                i.start()
            test_out = subprocess.run([NGINX, "-t", "-p", nginx_tmp, "-c", conf], capture_output=True, text=True)
            check(test_out.returncode == 0, "nginx -t accepts config/nginx/rnnd.conf", test_out.stderr[-1000:])
            ng = subprocess.Popen([NGINX, "-p", nginx_tmp, "-c", conf, "-g", "daemon off;"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.time() + 10
            while time.time() < deadline and get(port, "/v2/health/live")[0] != 200:
                time.sleep(0.05)
            run_test(test_through, port, insts, nginx_tmp)
            run_test(test_rolling_restart, port, insts)
            run_test(test_sigkill, port, insts)
        finally:
            if ng is not None:
                ng.terminate()
                ng.wait(timeout=10)
            for i in insts:
                if i.proc is not None and i.proc.poll() is None:
                    i.stop(signal.SIGTERM)
    print("test_nginx: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
