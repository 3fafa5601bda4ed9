#!/usr/bin/env python3
"""test_perf_analyzer.py: Triton's perf_analyzer, unchanged, against the real rnnd.

perf_analyzer builds its requests from the model metadata and /config alone:
every input the metadata names gets perf_analyzer's own data (rand() bytes by
default, zeros with --input-data zero), and `--shape` sets the variable dims.
tests/interop/tools.sh fetches it (PyPI's perf-analyzer wheel, run through
Debian 13's glibc where the host's is older); without it this test exits 77
(meson SKIP) with the reason.

Starts $RNND_BIN with the two demo models (config/models: digits_lstm,
digits_gru) and one embedding model of the golden repository, and checks:

- the demo models with perf_analyzer's default (random) data, `--shape
  input:8,8`, JSON and binary tensors both ways: exit 0, its throughput table
  ("Client" with "Throughput", "Concurrency: 1, throughput: ..."), every
  request a success on the server's side (statistics: success count equal to
  perf_analyzer's request count, no failure; /metrics: no 4xx for the model);
- the embedding model with `--input-data zero` (token id 0), JSON and binary:
  the same;
- `--shared-memory system` (rnnd started with --max_shm_regions), HTTP and gRPC: the same,
  and no region left registered after it;
- `-i grpc` on the same models, and `--streaming` with sequences on a model
  with a sequence block (ModelStreamInfer): the same.  With random data its INT64 token ids are out of range and rnnd
  refuses them (400 naming tokens), which perf_analyzer reports and exits
  non-zero: that is checked too, since a 200 there would be a wrong answer.

Standard library only.  Environment: RNND_BIN, RNND_SRC.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, GOLDEN, SRC, run_test
from fetch_tool import fetch_tool  # noqa: E402

EMB = "lstm_emb_l1_uni_ragged_noh0_head_softmax_last"
REQUESTS = 100  # --request-count: a fixed count, no stability search (a loaded CI machine)


def perf_analyzer_path():
    path, why = fetch_tool("perf_analyzer", SRC)
    if path is None:
        print("test_perf_analyzer: %s" % why[1])
        sys.exit(77 if why[0] == 77 else 1)
    return path


SEQ_MODEL = "digits_lstm_seq"


def repo(tmp):
    for name in ("digits_lstm", "digits_gru"):
        shutil.copytree(os.path.join(SRC, "config", "models", name), os.path.join(tmp, name))
    shutil.copytree(os.path.join(GOLDEN, EMB), os.path.join(tmp, EMB))
    # The demo LSTM with a sequence block: perf_analyzer's sequence mode (issue 17).
    shutil.copytree(os.path.join(SRC, "config", "models", "digits_lstm"), os.path.join(tmp, SEQ_MODEL))
    path = os.path.join(tmp, SEQ_MODEL, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    cfg["sequence"] = {}
    with open(path, "w") as f:
        json.dump(cfg, f)
    return tmp


def sequence_counters(d, model):
    _, _, body = d.request("GET", "/metrics")
    text = body.decode()
    return [int(re.search(r'^rnnd_sequences_%s_total\{model="%s",version="1"\} (\d+)$' % (k, model),
                          text, re.M).group(1)) for k in ("started", "ended")]


def test_sequences(pa, d):
    """perf_analyzer --sequence-length against a model with a sequence block: it sees
    sequence_batching in the config and streams sequences of 4 chunks, all served.  --sync:
    in its async mode perf_analyzer may send a sequence's next chunk before the previous one
    is answered, on another connection, and the two can reach rnnd's two HTTP threads out of
    order (seen under ASan): a chunk that overtakes its sequence's start gets a 400."""
    started0, ended0 = sequence_counters(d, SEQ_MODEL)
    rc, out = run(pa, d, SEQ_MODEL, ["--sync", "--shape", "input:2,8", "--sequence-length", "4",
                                     "--concurrency-range", "2"])
    what = "perf_analyzer --sequence-length 4 on %s" % SEQ_MODEL
    check(rc == 0 and "error" not in out.lower(), "%s: exit 0, no error" % what, out[-1500:])
    started, ended = sequence_counters(d, SEQ_MODEL)
    check(started - started0 >= REQUESTS // 4 and ended - ended0 >= REQUESTS // 4 - 2,
          "%s: rnnd started and ended its sequences" % what, (started0, started, ended0, ended))
    check(client_errors(d, SEQ_MODEL) == 0, "%s: no 4xx/5xx answered" % what, client_errors(d, SEQ_MODEL))


def stats(d, model):
    st, _, b = d.json("GET", "/v2/models/%s/stats" % model)
    inf = b["model_stats"][0]["inference_stats"] if st == 200 else {}
    return inf.get("success", {}).get("count", -1), inf.get("fail", {}).get("count", -1)


def client_errors(d, model):
    """The model's 4xx and 5xx answers so far, from /metrics."""
    _, _, body = d.request("GET", "/metrics")
    return sum(int(n) for code, n in re.findall(
        r'^rnnd_requests_total\{model="%s",version="[^"]*",code="([45]\d\d)"\} (\d+)$' % model,
        body.decode(), re.M))


def run(pa, d, model, args, grpc=False):
    url = "127.0.0.1:%d" % (d.grpc_port if grpc else d.port)
    cmd = [pa, "-m", model, "-u", url, "-i", "grpc" if grpc else "http", "--request-count", str(REQUESTS)] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return r.returncode, r.stdout


def test_runs(pa, d):
    cases = [(m, ["--shape", "input:8,8"], "default data") for m in ("digits_lstm", "digits_gru")]
    cases.append((EMB, ["--shape", "tokens:8", "--input-data", "zero"], "--input-data zero"))
    for model, args, data in cases:
        for fmt in ("json", "binary"):
            what = "perf_analyzer %s, %s, %s tensors" % (model, data, fmt)
            ok0, _ = stats(d, model)
            err0 = client_errors(d, model)
            rc, out = run(pa, d, model, args + ["--input-tensor-format", fmt, "--output-tensor-format", fmt])
            check(rc == 0, "%s: exit 0" % what, out[-1500:])
            m = re.search(r"Client:\s+Request count: (\d+)\s+Throughput: ([0-9.]+) infer/sec", out)
            check(m is not None and int(m.group(1)) >= REQUESTS and float(m.group(2)) > 0,
                  "%s: the Client table with a throughput" % what, out[-1500:])
            check(re.search(r"^Concurrency: 1, throughput: [0-9.]+ infer/sec, latency \d+ usec$", out, re.M),
                  "%s: the summary line" % what, out[-800:])
            check("error" not in out.lower(), "%s: no error printed" % what, out[-800:])
            ok1, fail1 = stats(d, model)
            sent = int(m.group(1)) if m else REQUESTS
            # perf_analyzer's warm-up and its own count: at least what it reports, all successes.
            check(ok1 - ok0 >= sent and fail1 == 0, "%s: rnnd served every request" % what, (ok0, ok1, fail1, sent))
            check(client_errors(d, model) == err0, "%s: no 4xx/5xx answered" % what, client_errors(d, model))

    # Random INT64 token ids cannot be valid: rnnd refuses them, perf_analyzer says so and fails.
    rc, out = run(pa, d, EMB, ["--shape", "tokens:8"])
    check(rc != 0 and "input 'tokens'" in out and "is outside 0..10" in out,
          "perf_analyzer %s with random token ids: rnnd's 400 naming tokens, non-zero exit" % EMB, out[-800:])


def test_grpc(pa, d):
    """perf_analyzer -i grpc (ModelInfer, raw tensors) on the demo models and the embedding
    model, and --streaming (ModelStreamInfer) with sequences of 4 chunks on the sequence model:
    exit 0, the throughput table, every request a success in rnnd's statistics."""
    cases = [(m, ["--shape", "input:8,8"]) for m in ("digits_lstm", "digits_gru")]
    cases.append((EMB, ["--shape", "tokens:8", "--input-data", "zero"]))
    cases.append((SEQ_MODEL, ["--shape", "input:2,8", "--streaming", "--sequence-length", "4"]))
    for model, args in cases:
        what = "perf_analyzer -i grpc %s %s" % (model, " ".join(args))
        ok0, _ = stats(d, model)
        err0 = client_errors(d, model)
        started0, ended0 = sequence_counters(d, SEQ_MODEL)
        rc, out = run(pa, d, model, args, grpc=True)
        check(rc == 0 and "error" not in out.lower(), "%s: exit 0, no error" % what, out[-1500:])
        m = re.search(r"Client:\s+Request count: (\d+)\s+(?:Sequence count: [^\n]*\s+)?"
                      r"Throughput: ([0-9.]+) infer/sec", out)
        check(m is not None and int(m.group(1)) >= REQUESTS and float(m.group(2)) > 0,
              "%s: the Client table with a throughput" % what, out[-1500:])
        ok1, fail1 = stats(d, model)
        sent = int(m.group(1)) if m else REQUESTS
        check(ok1 - ok0 >= sent and fail1 == 0, "%s: rnnd served every request" % what, (ok0, ok1, fail1, sent))
        check(client_errors(d, model) == err0, "%s: no errors counted" % what, client_errors(d, model))
        if model == SEQ_MODEL:
            started, ended = sequence_counters(d, SEQ_MODEL)
            check(started - started0 >= REQUESTS // 4 and ended - ended0 >= REQUESTS // 4 - 2,
                  "%s: rnnd started and ended its sequences" % what, (started0, started, ended0, ended))


def test_shared_memory(pa, d):
    """--shared-memory system (inputs and outputs through POSIX shared memory regions it makes
    and registers, docs/HTTP.md "Shared memory"), over HTTP and gRPC, JSON and binary tensors:
    exit 0, every request a success, and every region it registered unregistered at its end
    (it unregisters CUDA regions too, and takes an error there for a failed run)."""
    for grpc in (False, True):
        for fmt in (("json",) if grpc else ("json", "binary")):
            what = "perf_analyzer -i %s --shared-memory system%s" % (
                "grpc" if grpc else "http", "" if grpc else ", %s tensors" % fmt)
            ok0, _ = stats(d, "digits_lstm")
            err0 = client_errors(d, "digits_lstm")
            args = ["--shape", "input:8,8", "--shared-memory", "system", "--output-shared-memory-size", "409600"]
            if not grpc:
                args += ["--input-tensor-format", fmt, "--output-tensor-format", fmt]
            rc, out = run(pa, d, "digits_lstm", args, grpc=grpc)
            check(rc == 0 and "error" not in out.lower() and "unable" not in out.lower(),
                  "%s: exit 0, no error" % what, out[-1500:])
            m = re.search(r"Client:\s+Request count: (\d+)", out)
            ok1, fail1 = stats(d, "digits_lstm")
            sent = int(m.group(1)) if m else REQUESTS
            check(m is not None and ok1 - ok0 >= sent and fail1 == 0, "%s: rnnd served every request" % what,
                  (ok0, ok1, fail1, sent))
            check(client_errors(d, "digits_lstm") == err0, "%s: no 4xx/5xx answered" % what,
                  client_errors(d, "digits_lstm"))
            st, _, body = d.json("GET", "/v2/systemsharedmemory/status")
            check(st == 200 and body == [], "%s: no region left registered" % what, (st, body))


def main():
    pa = perf_analyzer_path()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        d = Daemon("--max_shm_regions=16", repo=repo(tmp))
        try:
            run_test(test_runs, pa, d)
            run_test(test_sequences, pa, d)
            run_test(test_grpc, pa, d)
            run_test(test_shared_memory, pa, d)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
        finally:
            d.close()
    print("test_perf_analyzer: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
