#!/usr/bin/env python3
"""test_load.py: clients/rnnd-load against the real rnnd (DESIGN.md §9).

Starts $RNND_BIN (the Daemon of test_http.py) on a repository holding the
demo digits_lstm (FP32 input [B, T, 8], a head) and a golden embedding model
(INT64 tokens), runs $RNND_LOAD against it and checks:
- counts: requests sent and 200s (the run's, and the first request sent
  before it, reported as warm-up) equal the server's own counts (inference
  stats success and inference_count from /stats, rnnd_requests_total from
  /metrics), for v2 JSON, v2 binary with several ragged sequences, :predict,
  and tokens learnt from the model's metadata;
- errors: lengths past the model's max_sequence_length give 400s, counted
  by status with the server's whole message, and exit status 1 unless
  --max-error-rate allows them; a run that cannot succeed (every length too
  long, --streams on a model without a sequence block, an input the model
  lacks) is refused after one request, exit 2 with the server's whole
  message; an unknown model exits 2 with the server's answer; bad options
  exit 2; --help shows the defaults;
- the open loop holds its rate: 200 requests/s for 5 s sends 1000 within 5%,
  on a fixed and on a Poisson schedule;
- the client is not the bottleneck: its closed-loop throughput on
  GET /v2/health/ready is at least twice what the daemon serves of the demo
  model's inference at the same concurrency, and within a third of wrk's on
  health (best of 5 runs each, daemon and client pinned to different CPUs
  when there are two; skipped without wrk or under sanitizers, where timings
  mean nothing).

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
Environment: RNND_BIN, RNND_LOAD (the client), RNND_SRC, RNND_SANITIZED.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import rnndtest as h  # the harness (tests/support)

LOAD = os.environ.get("RNND_LOAD", os.path.join("build", "clients", "rnnd-load"))
SANITIZED = os.environ.get("RNND_SANITIZED", "") not in ("", "none")
DIGITS = "digits_lstm"
EMB = "lstm_emb_l1_uni_ragged_noh0_head_softmax_last"
SETTLE = 0.3  # seconds
DIGITS_INPUT = ["--input=input:FP32:-1,-1,8", "--outputs=scores"]


def check(cond, what, detail=""):
    return h.check(cond, what, detail)


def load(d, *args, cpu=None):
    """Runs rnnd-load --json against d; (exit code, report dict or None, stderr)."""
    cmd = [LOAD, "--url=http://127.0.0.1:%d" % d.port, "--json", "--progress=false"] + list(args)
    pre = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, preexec_fn=pre)
    try:
        rep = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        rep = None
    return p.returncode, rep, p.stderr


def stats(d, model):
    st, _, body = d.json("GET", "/v2/models/%s/stats" % model)
    s = body["model_stats"][0]
    return {"success": s["inference_stats"]["success"]["count"],
            "fail": s["inference_stats"]["fail"]["count"],
            "inferences": s["inference_count"]}


def requests_total(d, model, code):
    _, _, body = d.request("GET", "/metrics")
    m = re.search(r'^rnnd_requests_total\{model="%s",version="1",code="%d"\} (\d+)$' % (model, code),
                  body.decode(), re.M)
    return int(m.group(1)) if m else 0


def counted_run(d, model, what, seqs, *args):
    """One run whose counts must equal the server's."""
    # GET .../stats counts as one of the model's requests: read the metric between them.
    # The server counts a request once its answer went out, a moment after the client
    # has it: let the counts settle before reading them.
    s0 = stats(d, model)
    time.sleep(SETTLE)
    m0 = requests_total(d, model, 200)
    rc, rep, err = load(d, "--model=" + model, *args)
    if not check(rc == 0 and rep is not None, what + ": exit 0 with a JSON report", (rc, err[-500:])):
        return
    time.sleep(SETTLE)
    m1 = requests_total(d, model, 200)
    s1 = stats(d, model)
    check(rep["sent"] == rep["completed"] == rep["ok"] and rep["errors"] == 0,
          what + ": every request sent was answered 200", rep)
    # The first request, sent before the run, is reported as warm-up.
    ok = rep["ok"] + rep["warmup"]["ok"]
    check(rep["warmup"]["sent"] >= 1, what + ": the first request is reported as warm-up", rep)
    check(s1["success"] - s0["success"] == ok, what + ": ok equals the server's success count",
          (ok, s1["success"] - s0["success"]))
    check(s1["inferences"] - s0["inferences"] == ok * seqs,
          what + ": sequences sent equal the server's inference_count", (ok * seqs, s1, s0))
    # v2 reads the model's metadata first, one more 200 of the model's.
    meta = 0 if "--api=predict" in args else 1
    check(m1 - m0 == ok + meta, what + ": ok and the metadata read equal rnnd_requests_total{code=200}",
          (ok, meta, m1 - m0))
    check(s1["fail"] == s0["fail"], what + ": no failed inference on the server", s1)


def test_counts(d):
    counted_run(d, DIGITS, "v2 json", 1, "--requests=300", "--concurrency=4", *DIGITS_INPUT)
    counted_run(d, DIGITS, "v2 json, duration", 1, "--duration=1", "--concurrency=8", *DIGITS_INPUT)
    counted_run(d, DIGITS, "v2 binary, 3 ragged sequences", 3, "--requests=200", "--format=binary",
                "--sequences=3", "--length=1..8", *DIGITS_INPUT)
    counted_run(d, DIGITS, ":predict, 2 sequences", 2, "--requests=100", "--api=predict",
                "--sequences=2", "--length=2..8", *DIGITS_INPUT)
    # Warm-up requests are the server's too, but not in the figures.
    s0 = stats(d, DIGITS)
    rc, rep, err = load(d, "--model=" + DIGITS, "--warmup=0.5", "--requests=100", *DIGITS_INPUT)
    s1 = stats(d, DIGITS)
    check(rc == 0 and rep["ok"] == 100 and rep["warmup"]["ok"] > 0 and
          s1["success"] - s0["success"] == rep["ok"] + rep["warmup"]["ok"],
          "warm-up requests are reported apart and counted by the server", (rep, s1, s0, err[-300:]))
    # Tokens: the input (INT64 [B, T]) and the output (scores) come from the metadata.
    s0 = stats(d, EMB)
    rc, rep, err = load(d, "--model=" + EMB, "--requests=50", "--sequences=4", "--length=1..6",
                        "--max-token=5")
    s1 = stats(d, EMB)
    check(rc == 0 and rep and rep["ok"] == 50 and
          s1["inferences"] - s0["inferences"] == 4 * (50 + rep["warmup"]["ok"]),
          "an embedding model's tokens input is read from its metadata", (rc, rep, err[-500:]))
    # The same seed sends the same bytes; another seed other bytes.
    outs = [load(d, "--model=" + DIGITS, "--requests=20", "--concurrency=1", "--seed=%d" % s,
                 "--length=1..60", *DIGITS_INPUT)[1]["bytes_out"] for s in (7, 7, 8)]
    check(outs[0] == outs[1] != outs[2], "runs are reproducible from the seed", outs)


def test_errors(d):
    # 60..100 against max_sequence_length 64: the first request (60) goes through, some fail.
    rc, rep, err = load(d, "--model=" + DIGITS, "--requests=40", "--length=60..100", *DIGITS_INPUT)
    check(rc == 1, "errors above --max-error-rate exit 1", (rc, err[-300:]))
    check(rep and rep["errors"] > 0 and rep["ok"] > 0 and
          rep["errors_by_status"] == {"400": rep["errors"]}, "errors are counted by status", rep)
    check("above --max-error-rate" in err, "the exit is explained on stderr", err[-300:])
    rc, rep, err = load(d, "--model=" + DIGITS, "--requests=40", "--length=60..100",
                        "--max-error-rate=1", *DIGITS_INPUT)
    check(rc == 0, "--max-error-rate=1 tolerates every error", (rc, err[-300:]))
    p = subprocess.run([LOAD, "--url=http://127.0.0.1:%d" % d.port, "--model=" + DIGITS,
                        "--requests=40", "--length=60..100", *DIGITS_INPUT],
                       capture_output=True, text=True, timeout=60)
    msg = re.search(r"^    400 +\d+  \((.*)\)$", p.stdout, re.M)
    check(p.returncode == 1 and msg and msg.group(1).startswith('{"error":"input \'input\': sequence '
                                                                'length ') and
          msg.group(1).endswith('outside 1..64 (max_sequence_length)"}'),
          "the text report shows the server's whole message for a status", p.stdout[-600:])
    # Runs that cannot succeed: refused after one request, with the server's whole answer.
    for what, args, words in (
            ("every length past max_sequence_length", ["--length=100"] + DIGITS_INPUT,
             "sequence length 100 is outside 1..64 (max_sequence_length)"),
            ("--streams on a model without a sequence block", ["--streams=4", "--chunk-length=4"],
             'has no \\"sequence\\" block; every request is stateless: send each sequence whole, '
             'with h0/c0 to carry state)'),
            ("an input the model lacks", ["--input=bogus:FP32:-1,-1,8", "--outputs=scores"],
             "input 'bogus' is not an input of this model (input, lengths, h0, c0)")):
        bad0 = requests_total(d, DIGITS, 400)
        rc, rep, err = load(d, "--model=" + DIGITS, "--duration=2", *args)
        time.sleep(SETTLE)
        check(rc == 2 and rep is None and err.startswith(
            "rnnd-load: the server refused the run's first request (HTTP 400), so none can "
            "succeed: {\"error\":") and err.rstrip().endswith(words + '"}'),
              "%s: refused with the server's whole message, exit 2" % what, (rc, err[-400:]))
        check(requests_total(d, DIGITS, 400) - bad0 == 1,
              "%s: one request sent, not a run of them" % what, requests_total(d, DIGITS, 400) - bad0)
    rc, rep, err = load(d, "--model=no_such_model", "--requests=5")
    check(rc == 2 and err.strip().startswith(
        'rnnd-load: GET http://127.0.0.1:%d/v2/models/no_such_model: HTTP 404: {"error":"unknown '
        'model \'no_such_model\' (a model put into the repository since the last load is served '
        'after a reload: SIGHUP, POST /v2/repository/models/no_such_model/load, or '
        'repository_poll_interval)"}' % d.port),
          "an unknown model is a setup error (exit 2) with the server's answer", (rc, err[-300:]))
    for bad in (["--concurrency=0"], ["--mode=open", "--model=m"], ["--bogus=1"], ["stray"]):
        p = subprocess.run([LOAD] + bad, capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and p.stderr.startswith("rnnd-load: "), "bad options exit 2: %s" % bad,
              (p.returncode, p.stderr))
    p = subprocess.run([LOAD, "--help"], capture_output=True, text=True, timeout=30)
    keys = re.findall(r"^  --([a-z-]+)", p.stdout, re.M)
    check(not re.search(r"\b(issue|bug) #?\d", p.stdout, re.I),
          "--help names no internal tracker issue", re.findall(r".*\bissue.*", p.stdout))
    check(p.returncode == 0 and {"url", "mode", "rate", "length", "input", "max-error-rate",
                                 "spec", "json"} <= set(keys), "--help lists the keys", keys)
    for key, default in (("url", "http://127.0.0.1:8000"), ("mode", "closed"), ("concurrency", "16"),
                         ("duration", "10s"), ("length", "8"), ("chunk-length", "8"),
                         ("timeout", "30s"), ("progress", "true"), ("max-error-rate", "0")):
        m = re.search(r"^  --%s\b.*?\n        Default: (\S+)$" % re.escape(key), p.stdout, re.M | re.S)
        check(m and m.group(1) == default, "--help shows --%s's default %s" % (key, default),
              m and m.group(1))
    # A JSON spec, overridden by the command line.
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"model": DIGITS, "requests": 7, "concurrency": 2, "input": "input:FP32:-1,-1,8"}, f)
    try:
        rc, rep, err = load(d, "--spec", f.name, "--requests=9")
        check(rc == 0 and rep["ok"] == 9 and rep["concurrency"] == 2,
              "a JSON spec applies, and flags override it", (rc, rep, err[-300:]))
    finally:
        os.unlink(f.name)


def test_open_loop(d):
    for arrival, tol in (("fixed", 0.05), ("poisson", 0.10)):
        s0 = stats(d, DIGITS)
        rc, rep, err = load(d, "--model=" + DIGITS, "--mode=open", "--rate=200", "--duration=5",
                            "--arrival=" + arrival, *DIGITS_INPUT)
        s1 = stats(d, DIGITS)
        if not check(rc == 0 and rep, "open loop (%s) runs" % arrival, (rc, err[-300:])):
            continue
        check(abs(rep["sent_in_window"] - 1000) <= 1000 * tol and abs(rep["send_rate"] - 200) <= 200 * tol,
              "open loop (%s) at 200/s for 5 s sends 1000 within %d%%" % (arrival, tol * 100),
              (rep["sent_in_window"], rep["send_rate"]))
        check(s1["success"] - s0["success"] == rep["ok"] + rep["warmup"]["ok"] and
              rep["ok"] == rep["sent"],
              "open loop (%s): the server answered every request sent" % arrival, (rep, s1, s0))
        lat = rep["latency_ms"]
        check(lat["p50"] <= lat["p99"] <= lat["max"] and rep["service_ms"]["p50"] <= lat["p50"],
              "open loop: latency from the schedule is at least the service time", rep)


def pin_daemon(d, cpu):
    """Pins every thread of the daemon to cpu."""
    for tid in os.listdir("/proc/%d/task" % d.proc.pid):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except OSError:
            pass


def test_vs_wrk(d):
    """Is the client the bottleneck?  On one pinned CPU against the daemon on the other, wrk
    and rnnd-load each drive GET /v2/health/ready (the cheapest answer the daemon has) with
    8 connections, best of five 1 s runs, interleaved.  The figure that says whether rnnd-load
    limits a benchmark is its headroom: it must drive health at least twice as fast as the
    daemon serves the demo model's inference at the same concurrency, so in every inference
    scenario the server saturates first.  Against wrk it must stay within a third: libcurl
    costs it about twice wrk's CPU per request (0.5-0.6x measured on the 2-vCPU CI machine),
    and a third catches a per-request cost that grows (a loop over every handle, say)."""
    wrk = shutil.which("wrk")
    if wrk is None or SANITIZED:
        print("SKIP: rnnd-load vs wrk (%s)" % ("no wrk" if wrk is None else "sanitizer build"))
        return
    cpus = sorted(os.sched_getaffinity(0))
    cpu = None
    if len(cpus) >= 2:
        pin_daemon(d, cpus[0])
        cpu = cpus[1]
    url = "http://127.0.0.1:%d/v2/health/ready" % d.port
    best_wrk = best_load = best_infer = 0.0
    for _ in range(5):  # best of five short runs: a busy machine lowers some of them
        p = subprocess.run(["wrk", "-t1", "-c8", "-d1s", url], capture_output=True, text=True, timeout=60,
                           preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None)
        m = re.search(r"Requests/sec:\s+([\d.]+)", p.stdout)
        best_wrk = max(best_wrk, float(m.group(1)) if m else 0.0)
        rc, rep, err = load(d, "--api=get", "--path=/v2/health/ready", "--concurrency=8",
                            "--duration=1", cpu=cpu)
        best_load = max(best_load, rep["throughput"] if rc == 0 and rep else 0.0)
    for _ in range(3):
        rc, rep, err = load(d, "--model=" + DIGITS, "--concurrency=8", "--duration=1", "--length=8",
                            *DIGITS_INPUT, cpu=cpu)
        best_infer = max(best_infer, rep["throughput"] if rc == 0 and rep else 0.0)
    print("GET /v2/health/ready, 8 connections: rnnd-load %.0f req/s, wrk %.0f req/s (%.2fx); "
          "%s inference: %.0f req/s (headroom %.1fx)"
          % (best_load, best_wrk, best_load / best_wrk if best_wrk else 0, DIGITS, best_infer,
             best_load / best_infer if best_infer else 0))
    check(best_infer > 0 and best_load >= 2 * best_infer,
          "rnnd-load drives health at least twice as fast as the daemon serves inference",
          (best_load, best_infer))
    check(best_wrk > 0 and best_load >= best_wrk / 3,
          "rnnd-load's health throughput is within a third of wrk's", (best_load, best_wrk))


def main():
    for exe in (h.BIN, LOAD):
        if not os.access(exe, os.X_OK):
            print("%s is not an executable" % exe)
            return 1
    t0 = time.time()
    repo = tempfile.mkdtemp(prefix="rnnd-load-repo-")
    os.symlink(os.path.join(h.SRC, "config", "models", DIGITS), os.path.join(repo, DIGITS))
    os.symlink(os.path.join(h.GOLDEN, EMB), os.path.join(repo, EMB))
    d = h.Daemon("--log_level=warning", repo=repo)
    try:
        h.run_test(test_counts, d)
        h.run_test(test_errors, d)
        h.run_test(test_open_loop, d)
        h.run_test(test_vs_wrk, d)
        rc, _ = d.stop()
        check(rc == 0, "the daemon exits 0 after the load", rc)
        err = d.stderr()
        check("ERROR: AddressSanitizer" not in err and "runtime error:" not in err, "no sanitizer report",
              err[-3000:])
    finally:
        d.close()
        shutil.rmtree(repo)
    print("test_load: %d passed, %d failed (%.1f s)" % (h.passed, h.failed, time.time() - t0))
    return 1 if h.failed else 0


if __name__ == "__main__":
    sys.exit(main())
