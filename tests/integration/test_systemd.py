#!/usr/bin/env python3
"""test_systemd.py: the real rnnd as systemd runs it (DESIGN.md §8, issue 7).

- sd_notify: READY=1, RELOADING=1 with MONOTONIC_USEC then READY=1 on SIGHUP,
  WATCHDOG=1 with WATCHDOG_USEC and WATCHDOG_PID set, STOPPING=1, read from a
  datagram socket standing in for systemd's NOTIFY_SOCKET;
- the watchdog stall: no WATCHDOG=1 while a batch runs past
  worker_stall_timeout, logged with the model's name, and the pings again once
  it completes;
- socket activation through systemd-socket-activate (skipped if missing);
- SIGHUP several times under load, also with a new model version on disk:
  no request fails, and the new version serves;
- SIGTERM under load: every request the daemon saw is answered 200 or 503,
  none is lost, and it exits 0;
- the repository API: index, unload (inference is then 404), load, a broken
  new version that keeps the old one serving with the reason in the index,
  bad names and bodies, and the bearer token (401, never logged).

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
"""

import concurrent.futures
import contextlib
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

import rnndtest  # the harness (tests/support)
from rnndtest import zero_body, zero_lstm, run_test

BIN = rnndtest.BIN
SRC = rnndtest.SRC
DEMO = os.path.join(SRC, "config", "models")
EXAMPLE = open(os.path.join(DEMO, "digits_lstm", "example.json"), "rb").read()

check = rnndtest.check  # one count of passed and failed checks, kept in test_http


def demo_repo(tmp, overrides=None):
    """A copy of the demo models in tmp (weights linked); overrides: model -> config changes."""
    repo = os.path.join(tmp, "models")
    for m in ("digits_lstm", "digits_gru"):
        os.makedirs(os.path.join(repo, m, "1"))
        with open(os.path.join(DEMO, m, "config.json")) as f:
            cfg = json.load(f)
        cfg.update((overrides or {}).get(m, {}))
        with open(os.path.join(repo, m, "config.json"), "w") as f:
            json.dump(cfg, f)
        os.symlink(os.path.join(DEMO, m, "1", "model.safetensors"), os.path.join(repo, m, "1", "model.safetensors"))
    return repo


def wait_for(pred, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False


def collect(sock, into, stop):
    """Appends every datagram of sock to into until stop is set."""
    while not stop.is_set():
        try:
            into.append(sock.recv(4096).decode())
        except socket.timeout:
            pass


def infer(port, model="digits_lstm", rid=None, body=EXAMPLE, timeout=30):
    """(status, body) of one inference on a fresh connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"X-Request-Id": rid} if rid else {}
        c.request("POST", "/v2/models/%s/infer" % model, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@contextlib.contextmanager
def notified_rnnd(repo, *flags):
    """rnnd on repo, its NOTIFY_SOCKET a datagram socket of ours and WATCHDOG_USEC 200 ms:
    yields (process, the messages so far, port, stderr log path); kills and cleans up after."""
    ns, path, tmp = rnndtest.notify_socket()
    msgs, stop = [], threading.Event()
    t = threading.Thread(target=collect, args=(ns, msgs, stop))
    t.start()
    port = rnndtest.free_port()
    log = tempfile.NamedTemporaryFile(prefix="rnnd-log-", delete=False)
    env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")
    env.pop("RNND_BACKEND", None)
    # WATCHDOG_PID must be the daemon's own pid: the shell's, which exec keeps.
    p = subprocess.Popen(["sh", "-c", 'WATCHDOG_PID=$$ exec "$@"', "sh", BIN, "--listen=127.0.0.1:%d" % port,
                          "--grpc_listen=127.0.0.1:0", "--model_repository", repo] + list(flags), stdout=subprocess.DEVNULL, stderr=log,
                         env=env, cwd=SRC)
    try:
        yield p, msgs, port, log.name
    finally:
        stop.set()
        t.join()
        if p.poll() is None:
            p.kill()
            p.wait()
        ns.close()
        shutil.rmtree(tmp)
        os.unlink(log.name)


def test_notify():
    """READY, RELOADING + MONOTONIC_USEC + READY on SIGHUP, WATCHDOG, STOPPING."""
    with notified_rnnd(DEMO, "--threads=2") as (p, msgs, port, _):
        check(wait_for(lambda: any(m.startswith("READY=1") for m in msgs)), "READY=1 is sent", msgs)
        ready = [m for m in msgs if m.startswith("READY=1")][0]
        n = len([m for m in os.listdir(DEMO) if os.path.isdir(os.path.join(DEMO, m))])
        check("STATUS=Serving %d of %d models" % (n, n) in ready, "READY=1 comes with a STATUS", ready)
        check(infer(port)[0] == 200, "it serves once READY=1 is sent")
        check(wait_for(lambda: sum(m == "WATCHDOG=1" for m in msgs) >= 3, 3),
              "WATCHDOG=1 every WATCHDOG_USEC/2 with WATCHDOG_PID set, while idle", msgs[-5:])
        n = len(msgs)
        p.send_signal(signal.SIGHUP)
        check(wait_for(lambda: any(m.startswith("READY=1") for m in msgs[n:])), "READY=1 again after SIGHUP",
              msgs[n:])
        after = [m for m in msgs[n:] if m != "WATCHDOG=1"]
        check(len(after) >= 2 and after[0].startswith("RELOADING=1\n") and
              re.search(r"^MONOTONIC_USEC=\d+$", after[0], re.M) is not None and after[1].startswith("READY=1"),
              "SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1", after)
        if after and (m := re.search(r"^MONOTONIC_USEC=(\d+)$", after[0], re.M)):
            now_us = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
            check(0 <= now_us - int(m.group(1)) < 10_000_000, "MONOTONIC_USEC is CLOCK_MONOTONIC now",
                  (now_us, m.group(1)))
        n = len(msgs)
        check(wait_for(lambda: "WATCHDOG=1" in msgs[n:], 3), "WATCHDOG=1 goes on after the reload")
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
        check(rc == 0, "exit 0 on SIGTERM", rc)
        time.sleep(0.3)
        check(any(m.startswith("STOPPING=1") for m in msgs), "STOPPING=1 on SIGTERM", msgs[-3:])
        stopping = next(i for i, m in enumerate(msgs) if m.startswith("STOPPING=1")) if any(
            m.startswith("STOPPING=1") for m in msgs) else len(msgs)
        check("WATCHDOG=1" not in msgs[stopping + 1:], "no WATCHDOG=1 after STOPPING=1")


def test_watchdog_stall():
    """A batch that runs past worker_stall_timeout stops the WATCHDOG=1 pings (so systemd would
    restart a daemon whose worker hangs), with an error naming the model; once the batch
    completes the pings come back.  The batch is one long sequence through a wide LSTM, its
    length chosen from a timed short one so that it runs about 4 s on any build."""
    repo = tempfile.mkdtemp(prefix="rnnd-wide-")
    zero_lstm(repo, "wide", 1024, 200000)
    try:
        with notified_rnnd(repo, "--worker_stall_timeout=1s", "--backend=cpu") as (p, msgs, port, log):
            check(wait_for(lambda: any(m.startswith("READY=1") for m in msgs)), "READY=1 is sent", msgs)
            # The time per step, without the request's own cost: the difference of two lengths.
            took = []
            for n in (100, 1100):
                t0 = time.time()
                st, _ = infer(port, "wide", body=zero_body(n))
                took.append(time.time() - t0)
                check(st == 200, "the wide model serves %d steps" % n, st)
            # At least half the long request's average, should the two timings cross.
            per_step = max((took[1] - took[0]) / 1000, took[1] / 1100 / 2)
            steps = max(2000, min(200000, int(4.0 / max(per_step, 1e-6))))
            res = {}
            worker = threading.Thread(target=lambda: res.setdefault("r", infer(port, "wide", body=zero_body(steps),
                                                                                timeout=300)))
            started = time.time()
            worker.start()

            def quiet_since(seconds):
                # True once no WATCHDOG=1 came for this long while the batch runs.
                n = len(msgs)
                time.sleep(seconds)
                return "WATCHDOG=1" not in msgs[n:]
            stalled = wait_for(lambda: worker.is_alive() and quiet_since(0.5), 60)
            check(stalled, "no WATCHDOG=1 while a batch runs past worker_stall_timeout",
                  (steps, round(per_step * 1e6, 1), msgs[-3:]))
            worker.join(300)
            took = time.time() - started
            check(res.get("r", (0,))[0] == 200, "the long batch is still answered 200", res.get("r", (None,))[0])
            n = len(msgs)
            check(wait_for(lambda: "WATCHDOG=1" in msgs[n:], 3), "WATCHDOG=1 comes back once the batch completes",
                  round(took, 1))
            err = open(log).read()
            check(re.search(r"model wide version 1: no batch completed for \d+s with 0 sequences queued and "
                            r"1 batches running; not pinging the watchdog", err) is not None,
                  "the stall is logged naming the model", err[-600:])
            check("workers make progress again" in err, "the recovery is logged", err[-600:])
            p.send_signal(signal.SIGTERM)
            check(p.wait(timeout=30) == 0, "exit 0 on SIGTERM")
    finally:
        shutil.rmtree(repo)


def socket_activated(ports, check_more):
    """systemd-socket-activate -l 127.0.0.1:P for each of ports, then rnnd (its own addresses
    unusable): inference on the first socket, check_more(log text), and SIGTERM exits 0."""
    tool = shutil.which("systemd-socket-activate")
    if tool is None:
        print("SKIP: systemd-socket-activate is not installed")
        return
    log = tempfile.NamedTemporaryFile(prefix="rnnd-log-", delete=False)
    env = dict(os.environ)
    env.pop("RNND_BACKEND", None)
    env.pop("NOTIFY_SOCKET", None)
    listen = [a for port in ports for a in ("-l", "127.0.0.1:%d" % port)]
    # With one socket, gRPC binds grpc_listen: a free port here.
    grpc_listen = "127.0.0.1:1" if len(ports) > 1 else "127.0.0.1:0"
    p = subprocess.Popen([tool] + listen + [BIN, "--model_repository", DEMO, "--threads=2",
                                            "--listen=127.0.0.1:1", "--grpc_listen=" + grpc_listen],
                         stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=SRC)
    try:
        st = None
        deadline = time.time() + 30
        while time.time() < deadline and p.poll() is None:
            try:
                st = infer(ports[0], timeout=5)[0]
                break
            except OSError:
                time.sleep(0.1)
        check(st == 200, "serves inference on the socket systemd-socket-activate passed", st)
        check_more()
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=10) == 0, "exits 0 on SIGTERM")
        text = open(log.name, "rb").read().decode("utf-8", "replace")
        check("listening on fd 3 from systemd, port %d" % ports[0] in text, "the log names the passed socket",
              text[-800:])
        if len(ports) > 1:
            check("gRPC listening on fd 4 from systemd, port %d" % ports[1] in text,
                  "the log names the second passed socket as gRPC's", text[-800:])
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.unlink(log.name)


def test_socket_activate():
    """systemd-socket-activate -l 127.0.0.1:PORT rnnd ...: serves on the passed socket."""
    socket_activated([rnndtest.free_port()], lambda: None)


def http2_settings(port):
    """Whether an HTTP/2 server answers on port: the client preface and an empty SETTINGS
    bring the server's SETTINGS frame (type 4) first, as gRPC's transport does."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        head = s.recv(9)
    return len(head) == 9 and head[3] == 4


def test_socket_activate_grpc():
    """Two sockets, as rnnd.socket passes them: HTTP on fd 3, gRPC on fd 4."""
    ports = [rnndtest.free_port(), rnndtest.free_port()]
    socket_activated(ports, lambda: check(http2_settings(ports[1]),
                                          "serves gRPC (HTTP/2) on the second socket passed"))


def test_reload_under_load():
    """SIGHUP five times while clients send, with a new version on disk: no request fails."""
    tmp = tempfile.mkdtemp(prefix="rnnd-reload-")
    repo = demo_repo(tmp)
    ns, path, ntmp = rnndtest.notify_socket()
    msgs, stop_n = [], threading.Event()
    tn = threading.Thread(target=collect, args=(ns, msgs, stop_n))
    tn.start()
    d = rnndtest.Daemon(repo=repo, env={"NOTIFY_SOCKET": path})
    stop = threading.Event()
    results = []
    lock = threading.Lock()

    def client(k):
        model = ("digits_lstm", "digits_gru")[k % 2]
        while not stop.is_set():
            try:
                st, body = infer(d.port, model)
            except OSError as e:
                st, body = "error", str(e)
            with lock:
                results.append((st, body[:200]))

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as ex:
            futs = [ex.submit(client, k) for k in range(8)]
            time.sleep(0.5)
            for i in range(5):
                if i == 2:
                    # A new version of digits_lstm: the latest policy serves it after the reload.
                    os.makedirs(os.path.join(repo, "digits_lstm", "2"))
                    os.symlink(os.path.join(DEMO, "digits_lstm", "1", "model.safetensors"),
                               os.path.join(repo, "digits_lstm", "2", "model.safetensors"))
                if i == 3:
                    with open(os.path.join(repo, "digits_gru", "config.json")) as f:
                        cfg = json.load(f)
                    cfg["batching"]["max_queue_delay_us"] = 300
                    with open(os.path.join(repo, "digits_gru", "config.json"), "w") as f:
                        json.dump(cfg, f)
                d.proc.send_signal(signal.SIGHUP)
                time.sleep(0.6)
            time.sleep(0.5)
            stop.set()
            for f in futs:
                f.result()
        bad = [r for r in results if r[0] != 200]
        check(len(results) > 50 and not bad, "every request during 5 reloads is answered 200",
              (len(results), bad[:5]))
        st, _, meta = d.json("GET", "/v2/models/digits_lstm")
        check(st == 200 and meta.get("versions") == ["2"], "the new version 2 serves after the reload", meta)
        st, body = infer(d.port, "digits_lstm")
        check(st == 200 and json.loads(body).get("model_version") == "2", "inference runs on version 2", body[:200])
        log = d.stderr()
        check(log.count("SIGHUP: reloaded") >= 3, "the log says each reload finished", log[-1500:])
        check(re.search(r"SIGHUP: reloaded: 2 models, [12] rebuilt", log) is not None,
              "a reload rebuilds only the changed models", log[-1500:])
        rel = [m for m in msgs if m.startswith("RELOADING=1")]
        check(len(rel) >= 3, "RELOADING=1 for the reloads", len(rel))
        rc, _ = d.stop()
        check(rc == 0, "exit 0 after the reloads", rc)
        check("runtime error:" not in log and "AddressSanitizer" not in d.stderr(), "no sanitizer report")
    finally:
        stop.set()
        stop_n.set()
        tn.join()
        d.close()
        ns.close()
        shutil.rmtree(ntmp)
        shutil.rmtree(tmp)


def test_drain_under_load():
    """SIGTERM while clients send: every request the daemon saw is answered 200 or 503; exit 0.

    With shutdown_timeout 30 the queue (the demo model, long sequences, one instance) drains
    in time.  With 1 s it must not: there twice as many clients use a wider model whose queue
    holds about 15 s of work on the CI machine, so that even a machine ten times faster
    still has some queued at the deadline; each batch (about 0.35 s here) stays well under
    the 2 s the daemon grants running batches after it."""
    tmp = tempfile.mkdtemp(prefix="rnnd-drain-")
    repo = demo_repo(tmp, {"digits_lstm": {"max_sequence_length": 4096,
                                           "batching": {"max_batch_size": 4, "max_queue_size": 256},
                                           "instances": [{"kind": "cpu", "count": 1}]}})
    zero_lstm(repo, "wide", 512, 4096, batching={"max_batch_size": 4, "max_queue_size": 256},
              instances=[{"kind": "cpu", "count": 1}])
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [4, 4000, 8],
                                   "data": [0.01] * (4 * 4000 * 8)}], "outputs": [{"name": "h_n"}]}).encode()
    for timeout, want_503, model, clients in ((30, False, "digits_lstm", 24), (1, True, "wide", 48)):
        # access_log all: the log's lines name the requests the daemon saw
        d = rnndtest.Daemon("--shutdown_timeout=%d" % timeout, "--access_log=all", repo=repo)
        results = {}
        lock = threading.Lock()

        def client(k):
            for j in range(1000):
                rid = "drain-%d-%d-%d" % (timeout, k, j)
                try:
                    st, _ = infer(d.port, model, rid=rid, body=body, timeout=60)
                except OSError as e:
                    st = "error: %s" % type(e).__name__
                with lock:
                    results[rid] = st
                if not isinstance(st, int):
                    return

        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as ex:
                futs = [ex.submit(client, k) for k in range(clients)]
                time.sleep(1.5)
                t0 = time.time()
                d.proc.send_signal(signal.SIGTERM)
                rc = d.proc.wait(timeout=timeout + 20)
                secs = time.time() - t0
                for f in futs:
                    f.result()
            log = d.stderr()
            seen = set(re.findall(r"\[(drain-[0-9-]+)\] POST", log))
            answered = {k: v for k, v in results.items() if isinstance(v, int)}
            lost = [k for k, v in results.items() if not isinstance(v, int) and k in seen]
            check(rc == 0, "SIGTERM under load (shutdown_timeout=%d): exit 0" % timeout, (rc, log[-1500:]))
            check(set(answered.values()) <= {200, 503}, "every answer is 200 or 503", set(answered.values()))
            check(not lost, "no request the daemon saw is left without an answer", (lost[:5], log[-2000:]))
            check(sum(v == 200 for v in answered.values()) > 0, "requests were served before the stop")
            if want_503:
                # The batches already running finish first: slower under sanitizers, whose
                # run has meson's --timeout-multiplier 4 too (tests/run.sh).
                slack = 20 if "address" in os.environ.get("RNND_SANITIZED", "") else 5
                check(any(v == 503 for v in answered.values()) and secs < timeout + slack,
                      "past shutdown_timeout the queued rest is answered 503", (secs, sorted(set(answered.values()))))
                check("answering the queued ones 503" in log, "the log says so", log[-1500:])
            else:
                inflight = [k for k in seen if k in answered and answered[k] == 200]
                check(len(inflight) > 0 and "answering the queued ones 503" not in log,
                      "within shutdown_timeout queued and running work finishes", log[-1000:])
        finally:
            d.close()
    shutil.rmtree(tmp)


def repository_index_unload_load(d):
    """The index of the demo repository, unload and load of digits_gru."""
    st, _, idx = d.json("POST", "/v2/repository/index")
    check(st == 200 and idx == [{"name": "digits_gru", "version": "1", "state": "READY", "reason": ""},
                                {"name": "digits_lstm", "version": "1", "state": "READY", "reason": ""}],
          "index lists every model with version, state and reason", idx)
    st, _, _ = d.json("GET", "/v2/repository/index")
    check(st == 405, "index is POST only", st)

    st, _, b = d.json("POST", "/v2/repository/models/digits_gru/unload")
    check(st == 200, "unload answers 200", (st, b))
    st, body = infer(d.port, "digits_gru")
    check(st == 404 and b"not loaded" in body, "inference on an unloaded model is 404", (st, body))
    st, _, _ = d.json("GET", "/v2/models/digits_gru/ready")
    check(st == 400, "an unloaded model is not ready", st)
    st, _, idx = d.json("POST", "/v2/repository/index", body=b'{"ready": false}')
    check({"name": "digits_gru", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"} in idx,
          "index shows the unloaded model UNAVAILABLE", idx)
    st, _, idx = d.json("POST", "/v2/repository/index", body=b'{"ready": true}')
    check([e["name"] for e in idx] == ["digits_lstm"], "ready:true lists only ready models", idx)
    st, _, _ = d.json("GET", "/v2/health/ready")
    check(st == 200, "an unloaded model does not make the server unready", st)
    st, _, b = d.json("POST", "/v2/repository/models/digits_gru/unload")
    check(st == 400, "unloading it again is 400", (st, b))

    st, _, b = d.json("POST", "/v2/repository/models/digits_gru/load")
    check(st == 200, "load answers 200", (st, b))
    check(infer(d.port, "digits_gru")[0] == 200, "load brings inference back")


def repository_broken_version(d, repo):
    """A broken new version: the load fails, version 1 serves on, the index says why;
    the same through SIGHUP; the repaired model loads."""
    os.makedirs(os.path.join(repo, "digits_lstm", "2"))
    with open(os.path.join(repo, "digits_lstm", "2", "model.safetensors"), "wb") as f:
        f.write(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    st, _, b = d.json("POST", "/v2/repository/models/digits_lstm/load")
    check(st == 400 and "version 2" in b.get("error", "") and "previous build serves" in b.get("error", ""),
          "loading a broken version is 400 saying why", (st, b))
    st, body = infer(d.port, "digits_lstm")
    check(st == 200 and json.loads(body)["model_version"] == "1", "the previous version serves on", body[:200])
    st, _, idx = d.json("POST", "/v2/repository/index")
    v1 = [e for e in idx if e["name"] == "digits_lstm" and e["version"] == "1"]
    v2 = [e for e in idx if e["name"] == "digits_lstm" and e["version"] == "2"]
    check(v1 and v1[0]["state"] == "READY" and "last load failed" in v1[0]["reason"] and
          v2 and v2[0]["state"] == "UNAVAILABLE" and v2[0]["reason"],
          "index: version 1 READY, version 2 UNAVAILABLE with the reason", idx)
    # The same through SIGHUP.
    d.proc.send_signal(signal.SIGHUP)
    check(wait_for(lambda: "SIGHUP: reloaded" in d.stderr()), "SIGHUP reload finishes")
    check(infer(d.port, "digits_lstm")[0] == 200, "after SIGHUP with the broken version, version 1 serves")
    st, _, _ = d.json("GET", "/v2/health/ready")
    check(st == 200, "and the server stays ready", st)
    shutil.rmtree(os.path.join(repo, "digits_lstm", "2"))
    st, _, b = d.json("POST", "/v2/repository/models/digits_lstm/load")
    check(st == 200, "loading the repaired model is 200", (st, b))
    st, _, idx = d.json("POST", "/v2/repository/index")
    check({"name": "digits_lstm", "version": "1", "state": "READY", "reason": ""} in idx,
          "the failure is gone from the index", idx)


def repository_bad_requests(d):
    """Unknown and bad model names, parameters and bodies are 4xx; unload takes
    parameters.unload_dependents."""
    st, _, b = d.json("POST", "/v2/repository/models/nosuch/load")
    check(st == 400 and "nosuch" in b.get("error", ""), "loading an unknown model is 400", (st, b))
    st, _, b = d.json("POST", "/v2/repository/models/nosuch/unload")
    check(st == 400, "unloading an unknown model is 400", (st, b))
    st, _, b = d.json("POST", "/v2/repository/models/..hidden/load")
    check(st == 400, "a name that is no model directory is 400", (st, b))
    st, _, b = d.json("POST", "/v2/repository/models/%s/load" % ("x" * 300))
    check(st == 400, "an overlong name is 400", (st, b))
    st, _, b = d.json("POST", "/v2/repository/models/digits_gru/load",
                      body=json.dumps({"parameters": {"config": "{}"}}))
    check(st == 400 and "not supported" in b.get("error", ""), "parameters.config is refused", (st, b))
    st, _, b = d.json("POST", "/v2/repository/index", body=b'{"ready": 1}')
    check(st == 400, "a bad index body is 400", (st, b))
    st, _, b = d.json("POST", "/v2/repository/index", body=b"{" + b" " * 5000 + b"}")
    check(st == 413, "a repository body over 4 KiB is 413", st)
    st, _, b = d.json("POST", "/v2/repository/models/digits_gru/unload",
                      body=b'{"parameters": {"unload_dependents": true}}')
    check(st == 200, "unload takes parameters.unload_dependents", (st, b))


def repository_bearer_token():
    """--auth_token_file: the repository API needs the token, inference does not, and
    the token is never logged."""
    tmp = tempfile.mkdtemp(prefix="rnnd-token-")
    token = "s3cret-Token_" + os.urandom(8).hex()
    tf = os.path.join(tmp, "token")
    with open(tf, "w") as f:
        f.write(token + "\n")
    os.chmod(tf, 0o600)
    d = rnndtest.Daemon("--auth_token_file=" + tf, repo=DEMO)
    try:
        st, h, b = d.json("POST", "/v2/repository/index")
        check(st == 401 and h.get("www-authenticate", "").startswith("Bearer"),
              "no token: 401 with WWW-Authenticate: Bearer", (st, h))
        st, h, _ = d.json("POST", "/v2/repository/models/digits_gru/unload",
                          headers={"Authorization": "Bearer " + token[:-1] + "x"})
        check(st == 401, "a wrong token: 401", st)
        st, h, _ = d.json("POST", "/v2/repository/index", headers={"Authorization": "Basic " + token})
        check(st == 401, "another scheme: 401", st)
        st, _, idx = d.json("POST", "/v2/repository/index", headers={"Authorization": "Bearer " + token})
        n = len([m for m in os.listdir(DEMO) if os.path.isdir(os.path.join(DEMO, m))])
        check(st == 200 and len(idx) == n, "the right token: 200", (st, idx))
        check(infer(d.port)[0] == 200, "inference needs no token")
        check(infer(d.port, "digits_gru")[0] == 200, "nothing was unloaded by the wrong token")
        d.stop()
        check(token not in d.stderr(), "the token is never logged")
    finally:
        d.close()
    shutil.rmtree(tmp)


def test_repository_api():
    tmp = tempfile.mkdtemp(prefix="rnnd-repoapi-")
    repo = demo_repo(tmp)
    d = rnndtest.Daemon(repo=repo)
    try:
        repository_index_unload_load(d)
        repository_broken_version(d, repo)
        repository_bad_requests(d)
        check(d.stop()[0] == 0, "exit 0")
    finally:
        d.close()
    shutil.rmtree(tmp)
    repository_bearer_token()


def main():
    if not os.access(BIN, os.X_OK):
        print("RNND_BIN=%s is not an executable" % BIN)
        return 1
    t0 = time.time()
    run_test(test_notify)
    run_test(test_watchdog_stall)
    run_test(test_socket_activate)
    run_test(test_socket_activate_grpc)
    run_test(test_repository_api)
    run_test(test_reload_under_load)
    run_test(test_drain_under_load)
    print("test_systemd: %d passed, %d failed (%.1f s)" % (rnndtest.passed, rnndtest.failed, time.time() - t0))
    return 1 if rnndtest.failed else 0


if __name__ == "__main__":
    sys.exit(main())
