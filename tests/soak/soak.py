#!/usr/bin/env python3
"""soak.py: rnnd under steady load while everything an operator (or a crash)
does to it happens at once, for a bounded time (make soak; docs/TESTING.md).

- load: WORKERS threads send at a steady total --rate, a new connection per
  request, mixing KServe v2 JSON, KServe v2 binary tensors (binary output
  too), TF Serving :predict on digits_lstm, and v2 JSON on digits_gru;
- SIGHUP every --hup seconds;
- repository storms every --storm seconds: digits_gru unloaded and loaded
  again, several times in a row;
- files replaced underneath every --swap seconds, alternately by rename
  (write beside, then mv) and by cp in place (truncate, then write in small
  pieces) of digits_lstm's weights, each followed by a SIGHUP so that a load
  races the copy;
- SIGKILL every --kill seconds, the daemon started again at once on the same
  listening socket, which this script holds and passes as systemd's socket
  activation does (LISTEN_FDS, LISTEN_PID), so connections queue in the
  backlog meanwhile.  (systemd-socket-activate execs the daemon and the socket
  dies with it, so it cannot stand in for PID 1 across a SIGKILL.)

Every answer is classified: right (200 with the numbers of the first answer
of its kind), 503, 404 while digits_gru is unloaded, failed (an error or a
reset), of which those within 2 s of a SIGKILL are expected, wrong (a 200
with other numbers, or another status) and lost (no answer in 30 s).  It
prints the counts, RSS and open fds of the daemon over time, and the load
failures the log shows.  Exits 1 when anything is lost or wrong, a failure
happens away from a kill, or RSS or fds grow without bound.

Python 3 standard library only.
"""

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(SRC, "config", "models")
EXAMPLE = json.load(open(os.path.join(DEMO, "digits_lstm", "example.json")))
X = EXAMPLE["inputs"][0]["data"]  # [1, 8, 8]
WORKERS = 8
TIMEOUT = 30.0
KILL_WINDOW = 2.0


def request_for(kind):
    """(path, body bytes, headers) of one request of kind."""
    if kind == "v2_json":
        return "/v2/models/digits_lstm/infer", json.dumps(EXAMPLE).encode(), {}
    if kind == "v2_binary":
        raw = struct.pack("<%df" % len(X), *X)
        h = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 8, 8],
                                    "parameters": {"binary_data_size": len(raw)}}],
                        "outputs": [{"name": "scores", "parameters": {"binary_data": True}}]}).encode()
        return ("/v2/models/digits_lstm/infer", h + raw,
                {"Inference-Header-Content-Length": str(len(h)), "Content-Type": "application/octet-stream"})
    if kind == "tfs":
        rows = [X[i * 8:(i + 1) * 8] for i in range(8)]
        return "/v1/models/digits_lstm:predict", json.dumps({"instances": [rows]}).encode(), {}
    if kind == "gru_json":
        return "/v2/models/digits_gru/infer", json.dumps(EXAMPLE).encode(), {}
    raise ValueError(kind)


KINDS = ["v2_json", "v2_binary", "tfs", "gru_json"]
REQUESTS = {k: request_for(k) for k in KINDS}


def scores(kind, headers, body):
    """The 10 scores of an answer, as a tuple of floats."""
    if kind == "v2_binary":
        n = int(headers.get("inference-header-content-length", "0"))
        raw = body[n:]
        return struct.unpack("<%df" % (len(raw) // 4), raw)
    doc = json.loads(body)
    if kind == "tfs":
        return tuple(doc["predictions"][0]["scores"])
    return tuple(next(o for o in doc["outputs"] if o["name"] == "scores")["data"])


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-6 + 1e-5 * abs(y) for x, y in zip(a, b))


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {k: 0 for k in ("sent", "right", "503", "404_unloaded", "failed_at_kill", "failed",
                                 "wrong", "lost")}
        self.examples = {}

    def add(self, what, detail=None):
        with self.lock:
            self.c[what] += 1
            if detail is not None and what not in self.examples:
                self.examples[what] = detail


class Soak:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="rnnd-soak-")
        self.repo = os.path.join(self.tmp, "models")
        for m in ("digits_lstm", "digits_gru"):
            os.makedirs(os.path.join(self.repo, m, "1"))
            shutil.copy(os.path.join(DEMO, m, "config.json"), os.path.join(self.repo, m))
            shutil.copy(os.path.join(DEMO, m, "1", "model.safetensors"), os.path.join(self.repo, m, "1"))
        self.weights = open(os.path.join(DEMO, "digits_lstm", "1", "model.safetensors"), "rb").read()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1024)
        self.port = self.lsock.getsockname()[1]
        self.log = open(os.path.join(self.tmp, "rnnd.log"), "wb")
        self.proc = None
        self.proc_lock = threading.Lock()
        self.kills = []  # monotonic times of SIGKILLs
        self.gru_unloaded = threading.Event()
        self.gru_changed_at = 0.0
        self.stop = threading.Event()
        self.stats = Stats()
        self.ref = {}
        self.samples = []  # (t, pid, rss_kib, fds)
        self.events = {"sighup": 0, "storm_calls": 0, "storm_errors": 0, "swap_rename": 0, "swap_cp": 0,
                       "sigkill": 0}
        self.t0 = time.monotonic()

    # The daemon, on our listening socket.
    def start(self):
        fd = self.lsock.fileno()
        env = dict(os.environ, LISTEN_FDS="1")
        for k in ("RNND_BACKEND", "NOTIFY_SOCKET", "LISTEN_FDNAMES"):
            env.pop(k, None)
        move = "" if fd == 3 else " 3<&%d %d<&-" % (fd, fd)  # the socket as fd 3
        cmd = ["sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$@"' + move, "sh",
               self.args.rnnd, "--model_repository", self.repo, "--threads=2", "--listen=127.0.0.1:1",
               "--grpc_listen=127.0.0.1:0", "--shutdown_timeout=10s"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, env=env, pass_fds=(fd,),
                                     cwd=SRC)

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                st, _, _ = self.http("GET", "/v2/health/ready", timeout=5)
                if st == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def http(self, method, path, body=None, headers=None, timeout=TIMEOUT):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def near_kill(self, t0, t1):
        return any(t0 - KILL_WINDOW <= k <= t1 + KILL_WINDOW for k in self.kills)

    # Load.
    def one(self, kind):
        path, body, headers = REQUESTS[kind]
        self.stats.add("sent")
        t0 = time.monotonic()
        gru_flux = kind == "gru_json" and (self.gru_unloaded.is_set() or t0 - self.gru_changed_at < 1.0)
        try:
            st, h, data = self.http("POST", path, body, headers)
        except socket.timeout:
            self.stats.add("lost", "%s: no answer in %.0f s" % (kind, TIMEOUT))
            return
        except (OSError, http.client.HTTPException) as e:
            if self.near_kill(t0, time.monotonic()):
                self.stats.add("failed_at_kill")
            else:
                self.stats.add("failed", "%s at %.1f s: %r" % (kind, t0 - self.t0, e))
            return
        if st == 503:
            self.stats.add("503")
        elif st == 404 and (gru_flux or self.gru_unloaded.is_set()):
            self.stats.add("404_unloaded")
        elif st == 200:
            try:
                got = scores(kind, h, data)
            except (ValueError, KeyError, StopIteration, struct.error) as e:
                self.stats.add("wrong", "%s: unreadable 200: %r %r" % (kind, e, data[:200]))
                return
            if close(got, self.ref[kind]):
                self.stats.add("right")
            else:
                self.stats.add("wrong", "%s: %r != %r" % (kind, got, self.ref[kind]))
        else:
            self.stats.add("wrong", "%s: HTTP %d %r" % (kind, st, data[:200]))

    def worker(self, i):
        rng = random.Random(i)
        period = WORKERS / self.args.rate
        nxt = time.monotonic() + rng.random() * period
        while not self.stop.is_set():
            now = time.monotonic()
            if nxt > now:
                time.sleep(nxt - now)
            nxt += period
            self.one(KINDS[rng.randrange(len(KINDS))])

    # Disruptions.
    def hup(self):
        with self.proc_lock:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGHUP)
                self.events["sighup"] += 1

    def storm(self):
        for _ in range(3):
            for op in ("unload", "load"):
                if op == "unload":
                    self.gru_unloaded.set()
                try:
                    st, _, _ = self.http("POST", "/v2/repository/models/digits_gru/" + op, timeout=TIMEOUT)
                    self.events["storm_calls"] += 1
                    if st != 200:
                        self.events["storm_errors"] += 1
                except (OSError, http.client.HTTPException):
                    self.events["storm_errors"] += 1
                if op == "load":
                    self.gru_changed_at = time.monotonic()
                    self.gru_unloaded.clear()

    def swap(self, n):
        dst = os.path.join(self.repo, "digits_lstm", "1", "model.safetensors")
        if n % 2 == 0:
            tmp = dst + ".new"
            with open(tmp, "wb") as f:
                f.write(self.weights)
            os.replace(tmp, dst)
            self.events["swap_rename"] += 1
            self.hup()
        else:
            # As cp does: truncate, then write; the SIGHUP lands while the file is short.
            with open(dst, "r+b") as f:
                f.truncate(0)
                self.hup()
                for i in range(0, len(self.weights), 1024):
                    f.write(self.weights[i:i + 1024])
                    f.flush()
                    time.sleep(0.005)
            self.events["swap_cp"] += 1

    def kill_and_restart(self):
        with self.proc_lock:
            self.kills.append(time.monotonic())
            self.proc.kill()
            self.proc.wait()
            self.events["sigkill"] += 1
            self.start()
        self.wait_ready()

    def disrupt(self):
        a = self.args
        nxt = {"hup": a.hup, "storm": a.storm, "swap": a.swap, "kill": a.kill}
        n_swap = 0
        while not self.stop.is_set():
            t = time.monotonic() - self.t0
            due = [k for k, v in nxt.items() if v > 0 and t >= v]
            for k in due:
                if k == "hup":
                    self.hup()
                elif k == "storm":
                    self.storm()
                elif k == "swap":
                    self.swap(n_swap)
                    n_swap += 1
                else:
                    self.kill_and_restart()
                nxt[k] += getattr(a, k)
            self.stop.wait(0.05)

    def sample(self):
        while not self.stop.wait(1.0):
            with self.proc_lock:
                pid = self.proc.pid
            try:
                with open("/proc/%d/status" % pid) as f:
                    rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
                fds = len(os.listdir("/proc/%d/fd" % pid))
            except (OSError, StopIteration):
                continue
            self.samples.append((time.monotonic() - self.t0, pid, rss, fds))

    def run(self):
        a = self.args
        self.start()
        if not self.wait_ready():
            print("rnnd did not get ready")
            return 1
        for k in KINDS:
            path, body, headers = REQUESTS[k]
            st, h, data = self.http("POST", path, body, headers)
            if st != 200:
                print("reference %s: HTTP %d %r" % (k, st, data[:300]))
                return 1
            self.ref[k] = scores(k, h, data)
        if not close(self.ref["v2_json"], self.ref["tfs"]) or not close(self.ref["v2_json"], self.ref["v2_binary"]):
            print("the three wire formats disagree: %r" % self.ref)
            return 1
        self.t0 = time.monotonic()
        threads = [threading.Thread(target=self.worker, args=(i,)) for i in range(WORKERS)]
        threads += [threading.Thread(target=self.disrupt), threading.Thread(target=self.sample)]
        for t in threads:
            t.start()
        try:
            while time.monotonic() - self.t0 < a.seconds:
                time.sleep(min(10, a.seconds - (time.monotonic() - self.t0)) if a.seconds > 0 else 1)
                c = self.stats.c
                s = self.samples[-1] if self.samples else (0, 0, 0, 0)
                print("%5.0f s: sent %d right %d 503 %d failed %d (at kill %d) lost %d; rss %d MiB fds %d"
                      % (time.monotonic() - self.t0, c["sent"], c["right"], c["503"], c["failed"],
                         c["failed_at_kill"], c["lost"], s[2] // 1024, s[3]), flush=True)
        finally:
            self.stop.set()
            for t in threads:
                t.join()
        with self.proc_lock:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = "hung"
        return self.report(code)

    def report(self, code):
        a, c = self.args, self.stats.c
        elapsed = time.monotonic() - self.t0
        log = open(os.path.join(self.tmp, "rnnd.log"), "rb").read().decode("utf-8", "replace")
        shrank = log.count("shrank while being read")
        changed = log.count("changed while being read")
        refused = log.count("model digits_lstm: the new build failed")
        print("\nrnnd soak: %.0f s at %.0f req/s (asked %g), %d SIGHUP, %d repository calls (%d not 200), "
              "%d swaps by rename, %d by cp, %d SIGKILL" % (
                  elapsed, c["sent"] / elapsed, a.rate, self.events["sighup"], self.events["storm_calls"],
                  self.events["storm_errors"], self.events["swap_rename"], self.events["swap_cp"],
                  self.events["sigkill"]))
        print("requests: sent %d, answered right %d, 503 %d, 404 while unloaded %d, failed %d at a SIGKILL "
              "and %d otherwise, wrong %d, lost %d" % (
                  c["sent"], c["right"], c["503"], c["404_unloaded"], c["failed_at_kill"], c["failed"],
                  c["wrong"], c["lost"]))
        print("reloads of digits_lstm refused while its file was being copied (the old build served on): %d, "
              "of which 'shrank while being read' %d, 'changed while being read' %d; exit on SIGTERM: %s"
              % (refused, shrank, changed, code))
        for k, v in self.stats.examples.items():
            print("  first %s: %s" % (k, v))
        # RSS and fds over time, per daemon life.
        lives = {}
        for t, pid, rss, fds in self.samples:
            lives.setdefault(pid, []).append((t, rss, fds))
        print("daemon lives (pid: seconds, RSS MiB first/max/last, fds first/max/last):")
        ok_mem = True
        for pid, s in lives.items():
            rss = [x[1] for x in s]
            fds = [x[2] for x in s]
            print("  %d: %.0f-%.0f s, RSS %.1f/%.1f/%.1f, fds %d/%d/%d" % (
                pid, s[0][0], s[-1][0], rss[0] / 1024, max(rss) / 1024, rss[-1] / 1024, fds[0], max(fds),
                fds[-1]))
            # Bounded: the second half of a long life holds no more than the first half plus a margin.
            if len(s) >= 40:
                half = len(s) // 2
                if max(rss[half:]) > 1.25 * max(rss[:half]) + 16 * 1024:
                    ok_mem = False
                    print("    RSS grows: %d KiB in the first half, %d in the second" % (max(rss[:half]),
                                                                                      max(rss[half:])))
                if max(fds[half:]) > max(fds[:half]) + 16:
                    ok_mem = False
                    print("    fds grow: %d in the first half, %d in the second" % (max(fds[:half]),
                                                                                   max(fds[half:])))
        step = max(1, len(self.samples) // 12)
        print("RSS over time (s: MiB, fds): " + ", ".join(
            "%.0f: %.1f, %d" % (t, rss / 1024, fds) for t, _, rss, fds in self.samples[::step]))
        ok = c["lost"] == 0 and c["wrong"] == 0 and c["failed"] == 0 and ok_mem and code == 0
        print("PASS" if ok else "FAIL")
        if ok:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print("kept %s (the daemon's log is rnnd.log)" % self.tmp)
        return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--rnnd", help="the binary (default BUILD/daemon/rnnd)")
    p.add_argument("--seconds", type=float, default=600)
    p.add_argument("--rate", type=float, default=100, help="requests per second, all workers together")
    p.add_argument("--hup", type=float, default=3, help="seconds between SIGHUPs (0: none)")
    p.add_argument("--storm", type=float, default=7, help="seconds between repository storms")
    p.add_argument("--swap", type=float, default=5, help="seconds between weight file swaps")
    p.add_argument("--kill", type=float, default=60, help="seconds between SIGKILLs")
    a = p.parse_args()
    a.rnnd = a.rnnd or os.path.join(a.build, "daemon", "rnnd")
    if not os.path.isabs(a.rnnd):
        a.rnnd = os.path.join(os.getcwd(), a.rnnd)
    sys.exit(Soak(a).run())


if __name__ == "__main__":
    main()
