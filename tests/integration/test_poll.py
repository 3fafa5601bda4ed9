#!/usr/bin/env python3
"""test_poll.py: repository_poll_interval (docs/OPERATIONS.md, "Polling the repository").

Starts $RNND_BIN with --repository_poll_interval=2 on a copy of the demo digits_gru and
changes the repository under it, as a volume sync or a slow `cp` would, writing files a
piece at a time, every 0.1 s (well inside the interval):
- a new model (config.json in two pieces, then its weights in forty, over two intervals): neither ready nor
  in the index, nor ever failed in the log, while it is written; served within three
  intervals of the last write, and it answers the example as the demo LSTM does;
- a new version of a served model, written the same way while a client keeps sending to
  the model: every request answered 200, version 1 ready throughout the copy, version 2
  ready after it (and version 1 gone: the latest-1 policy), never failed;
- a model whose directory is removed leaves the index and answers 404;
- without the setting nothing is polled: a model copied in stays 404 until SIGHUP.

Python 3 standard library only.  Prints one line per failed check and a summary
"N passed, N failed"; exits 1 when any check failed.
"""

import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check

INTERVAL = 2  # seconds
DEMO = os.path.join(th.SRC, "config", "models")
EXAMPLE = open(os.path.join(DEMO, "digits_lstm", "example.json"), "rb").read()
SLOW = float(os.environ.get("RNND_TEST_READY_S", "30")) / 30  # the sanitized builds' factor


def index(d):
    st, _, idx = d.json("POST", "/v2/repository/index")
    return {(r["name"], r.get("version")): r for r in idx} if st == 200 else {}


def write_slowly(path, data, pieces, watch=None):
    """Writes data to path in pieces, 0.1 s apart; calls watch() after each piece."""
    with open(path, "wb") as f:
        for k in range(pieces):
            f.write(data[k * len(data) // pieces:(k + 1) * len(data) // pieces])
            f.flush()
            if watch is not None:
                watch()
            time.sleep(0.1)


def wait_for(cond, seconds):
    deadline = time.time() + seconds * SLOW
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def never_failed(d, name, what):
    bad = [line for line in d.stderr().splitlines() if "model %s" % name in line and "not loaded" in line]
    check(not bad, "%s: never attempted half-written (no failed load in the log)" % what, bad)


def test_new_model(d, repo):
    what = "a new model copied in"
    dst = os.path.join(repo, "new_lstm")
    os.makedirs(os.path.join(dst, "1"))
    seen = []

    def watch():
        st, _, _ = d.request("GET", "/v2/models/new_lstm/ready")
        seen.append((st, [k for k in index(d) if k[0] == "new_lstm"]))

    cfg = open(os.path.join(DEMO, "digits_lstm", "config.json"), "rb").read()
    write_slowly(os.path.join(dst, "config.json"), cfg, 2, watch)
    weights = open(os.path.join(DEMO, "digits_lstm", "1", "model.safetensors"), "rb").read()
    write_slowly(os.path.join(dst, "1", "model.safetensors"), weights, 40, watch)
    check(seen and all(st == 404 and not rows for st, rows in seen),
          "%s: not ready, not in the index, while it is written" % what, seen[-3:])
    t0 = time.time()
    ok = wait_for(lambda: d.request("GET", "/v2/models/new_lstm/ready")[0] == 200, 3 * INTERVAL + 1)
    check(ok, "%s: ready within three intervals of the last write" % what, time.time() - t0)
    st, _, b = d.json("POST", "/v2/models/new_lstm/infer", body=EXAMPLE)
    scores = b["outputs"][0]["data"] if st == 200 else []
    check(st == 200 and scores.index(max(scores)) == 7, "%s: reads the example as a 7" % what, (st, b))
    never_failed(d, "new_lstm", what)


def test_new_version(d, repo):
    what = "a new version written under load"
    stop = threading.Event()
    codes = {}

    def client():
        while not stop.is_set():
            st, _, _ = d.request("POST", "/v2/models/digits_gru/infer", body=EXAMPLE)
            codes[st] = codes.get(st, 0) + 1

    states = []

    def watch():
        idx = index(d)
        states.append((idx.get(("digits_gru", "1"), {}).get("state"), ("digits_gru", "2") in idx))

    threads = [threading.Thread(target=client) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        os.makedirs(os.path.join(repo, "digits_gru", "2"))
        weights = open(os.path.join(DEMO, "digits_gru", "1", "model.safetensors"), "rb").read()
        write_slowly(os.path.join(repo, "digits_gru", "2", "model.safetensors"), weights, 40, watch)
        check(states and all(s == ("READY", False) for s in states),
              "%s: version 1 serves and version 2 is not listed while it is written" % what, states)
        ok = wait_for(lambda: index(d).get(("digits_gru", "2"), {}).get("state") == "READY",
                      3 * INTERVAL + 1)
        check(ok, "%s: version 2 ready within three intervals of the last write" % what, index(d))
        check(("digits_gru", "1") not in index(d), "%s: version 1 left (latest-1 policy)" % what,
              index(d))
    finally:
        stop.set()
        for t in threads:
            t.join()
    check(list(codes) == [200] and codes[200] > 10, "%s: every request answered 200" % what, codes)
    never_failed(d, "digits_gru", what)


def test_removed(d, repo):
    shutil.rmtree(os.path.join(repo, "new_lstm"))
    ok = wait_for(lambda: d.request("GET", "/v2/models/new_lstm/ready")[0] == 404, 2 * INTERVAL + 1)
    check(ok and not [k for k in index(d) if k[0] == "new_lstm"],
          "a removed model leaves the index and answers 404", index(d))


def test_off_by_default():
    with tempfile.TemporaryDirectory(prefix="rnnd-nopoll-") as repo:
        d = Daemon(repo=repo, wait_ready=False)
        try:
            shutil.copytree(os.path.join(DEMO, "digits_gru"), os.path.join(repo, "digits_gru"))
            time.sleep(2.5)
            st, _, _ = d.request("GET", "/v2/models/digits_gru/ready")
            check(st == 404, "without repository_poll_interval a copied model stays unknown", st)
            d.proc.send_signal(signal.SIGHUP)
            ok = wait_for(lambda: d.request("GET", "/v2/models/digits_gru/ready")[0] == 200, 10)
            check(ok, "... until SIGHUP reads the repository")
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
        finally:
            d.close()


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rnnd-poll-") as repo:
        shutil.copytree(os.path.join(DEMO, "digits_gru"), os.path.join(repo, "digits_gru"))
        d = Daemon("--repository_poll_interval=%d" % INTERVAL, repo=repo)
        try:
            check("polling %s every %d s" % (repo, INTERVAL) in d.stderr(),
                  "the start log says the repository is polled", d.stderr()[-500:])
            test_new_model(d, repo)
            test_new_version(d, repo)
            test_removed(d, repo)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
            err = d.stderr()
            check("AddressSanitizer" not in err and "runtime error:" not in err, "no sanitizer report",
                  err[-2000:])
        finally:
            d.close()
    test_off_by_default()
    print("test_poll: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
