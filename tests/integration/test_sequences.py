#!/usr/bin/env python3
"""test_sequences.py: stateful sequences (issue 17) against the real rnnd.

A model with a `sequence` block in its config.json keeps each sequence's
h (and c) between requests.  For golden models (tests/golden: PyTorch's
outputs), sequence 0 of the golden batch is sent in chunks of several lengths
with the sequence parameters; the chunks' outputs, put end to end, and the
last chunk's h_n/c_n must be PyTorch's for the whole sequence.  Then: chunks
sent before the previous one is answered run in order, streams interleave,
and the errors: a continuation of an id never started or ended, h0 on a
continuation, B > 1, a bidirectional model, a model without the block,
expiry after idle_timeout_ms, max_sequences (503 with Retry-After), a
SIGHUP that keeps an unchanged model's sequences, a repository load that keeps
them and the statistics of an unchanged model but drops them for a changed one, and
chunks waiting behind the running one answered at their timeout, leaving the sequence
untouched.  Last, the demo repository as
`make run` serves it (config/rnnd.conf): every model loads, digits_stream's
two example chunks score as digits_gru scores the whole image, and the
README's `rnnd-load --streams` run on it has no error; the start log gives
max_body_bytes as the config spells it; the stop logs the sequences it leaves
live.

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
"""

import array
import http.client
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, GOLDEN, run_test
from rnndtest import read_safetensors, max_err

TOL = 1e-5
SEQ = {"idle_timeout_ms": 1500, "max_sequences": 4}
MODELS = ("lstm_l3_uni_equal_h0", "gru_l3_uni_equal_h0", "lstm_proj_l1_uni_ragged_h0",
          # chains of unidirectional blocks stream as one block does (every block's state kept)
          "chain_lstm16_lstm8_gru12_ragged_h0", "chain_b1_gru_lstm_rnn_h0")


BI = "gru_h48_l2_bi_ragged_h0"


def make_repo(tmp, names=MODELS + ("lstm_l1_uni_equal_h0", BI), src_name=None):
    for name in names:
        src = os.path.join(GOLDEN, src_name or name)
        dst = os.path.join(tmp, name)
        os.makedirs(os.path.join(dst, "1"))
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        if name not in ("lstm_l1_uni_equal_h0", BI):  # the models without the block
            cfg["sequence"] = SEQ
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(cfg, f)
        shutil.copy(os.path.join(src, "1", "model.safetensors"), os.path.join(dst, "1", "model.safetensors"))
    return tmp


def golden_seq(name, b):
    """Sequence b of a golden case: its x [T, I] rows, h0/c0 and the outputs PyTorch gave."""
    io = read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
    _, (B, T, I), x = io["x"]
    length = T
    if "lengths" in io:
        length = io["lengths"][2][b]
    seq = {"x": [x[(b * T + t) * I:(b * T + t + 1) * I] for t in range(length)], "I": I}
    for key in ("h0", "c0", "h_n", "c_n", "output"):
        if key in io:
            _, shape, vals = io[key]
            per = len(vals) // shape[0]
            seq[key] = (shape[1:], vals[b * per:(b + 1) * per])
    if "output" in seq:
        (t_, w), vals = seq["output"]
        seq["output"] = ([t_, w], vals[:length * w])
    return seq


def chunk_body(seq, rows, params, with_state=False):
    inputs = [{"name": "input", "datatype": "FP32", "shape": [1, len(rows), seq["I"]],
               "data": [v for r in rows for v in r]}]
    if with_state:
        for key in ("h0", "c0"):
            if key in seq:
                shape, vals = seq[key]
                inputs.append({"name": key, "datatype": "FP32", "shape": [1] + shape, "data": vals})
    return json.dumps({"parameters": params, "inputs": inputs})


def stream(d, name, sid, seq, cuts):
    """Sends seq in chunks ending at cuts; returns (statuses, outputs end to end, last response)."""
    path = "/v2/models/%s/infer" % name
    out, statuses, last, at = [], [], None, 0
    for i, end in enumerate(cuts):
        params = {"sequence_id": sid}
        if i == 0:
            params["sequence_start"] = True
        if i == len(cuts) - 1:
            params["sequence_end"] = True
        st, _, resp = d.json("POST", path, body=chunk_body(seq, seq["x"][at:end], params, i == 0))
        statuses.append(st)
        if st == 200:
            outs = {o["name"]: o for o in resp["outputs"]}
            out += outs["output"]["data"]
            last = outs
        at = end
    return statuses, out, last


def compare(name, how, seq, statuses, out, last):
    if not check(all(s == 200 for s in statuses), "%s %s: every chunk 200" % (name, how), statuses):
        return
    check(max_err(out, seq["output"][1]) <= TOL,
          "%s %s: the chunks' outputs end to end are PyTorch's for the whole sequence" % (name, how),
          max_err(out, seq["output"][1]))
    for key in ("h_n", "c_n"):
        if key in seq:
            check(max_err(last[key]["data"], seq[key][1]) <= TOL,
                  "%s %s: %s after the last chunk is PyTorch's" % (name, how, key),
                  max_err(last[key]["data"], seq[key][1]))


def test_goldens(d):
    for name in MODELS:
        seq = golden_seq(name, 1 if name == "chain_lstm16_lstm8_gru12_ragged_h0" else 0)
        T = len(seq["x"])
        for cuts in ([T], [1, T], [1, 2, T], list(range(1, T + 1))):
            cuts = sorted(set(c for c in cuts if 1 <= c <= T))
            statuses, out, last = stream(d, name, 100 + len(cuts), seq, cuts)
            compare(name, "in chunks ending at %s" % cuts, seq, statuses, out, last)


def test_id_range(d):
    """Ids are unsigned 64-bit (docs/HTTP.md): 2^64-1 and 2^63 stream as any other, beside each
    other and beside their string forms; 2^64 is a 400 naming sequence_id."""
    name = MODELS[1]
    seq = golden_seq(name, 0)
    T = len(seq["x"])
    for sid in (2 ** 64 - 1, 2 ** 63):
        statuses, out, last = stream(d, name, sid, seq, [1, T])
        compare(name, "as sequence_id %d" % sid, seq, statuses, out, last)
    path = "/v2/models/%s/infer" % name
    one = seq["x"][:1]
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 2 ** 64 - 1, "sequence_start": True}, True))
    st2, _, b2 = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": str(2 ** 64 - 1)}))
    check(st == 200 and st2 == 400 and "never started" in b2.get("error", ""),
          "2^64-1 and \"18446744073709551615\" are different ids", (st, st2, b2))
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 2 ** 64 - 1, "sequence_end": True}))
    check(st == 200, "2^64-1 continues and ends", (st, b))
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 2 ** 64, "sequence_start": True}))
    check(st == 400 and "parameters.sequence_id" in b.get("error", ""), "2^64 is a 400 naming sequence_id",
          (st, b))


def test_order_and_interleave(d):
    """Chunks sent before the previous one is answered run in order; two streams interleave."""
    name = MODELS[0]
    path = "/v2/models/%s/infer" % name
    seqs = [golden_seq(name, 0), golden_seq(name, 1)]
    T = len(seqs[0]["x"])
    results = {}

    def send(key, sid, seq, i, params):
        st, _, resp = d.json("POST", path, body=chunk_body(seq, seq["x"][i:i + 1], params, i == 0))
        results[key] = (st, resp)

    threads = []
    for i in range(T):
        for k, sid in ((0, 7), (1, "s-7")):
            params = {"sequence_id": sid}
            if i == 0:
                params["sequence_start"] = True
            if i == T - 1:
                params["sequence_end"] = True
            if i == 0:  # the start first, alone, so the rest find the sequence live
                send((k, i), sid, seqs[k], i, params)
                continue
            t = threading.Thread(target=send, args=((k, i), sid, seqs[k], i, params))
            t.start()
            threads.append(t)
            time.sleep(0.005)  # arrival order
    for t in threads:
        t.join()
    for k in (0, 1):
        statuses = [results[(k, i)][0] for i in range(T)]
        out = []
        for i in range(T):
            if results[(k, i)][0] == 200:
                out += {o["name"]: o for o in results[(k, i)][1]["outputs"]}["output"]["data"]
        last = {o["name"]: o for o in results[(k, T - 1)][1].get("outputs", [])}
        compare(name, "stream %d, one step a chunk, sent without waiting" % k, seqs[k], statuses, out, last)


def test_pipelined(d):
    """Chunks of one sequence sent together on several connections, over and over: each that
    waits behind the running one is handed on (run, or refused after an end) only once its
    request is published, never before (ThreadSanitizer saw a worker take a chunk whose job
    and owner were still being set), and the daemon serves on."""
    name = MODELS[2]
    path = "/v2/models/%s/infer" % name
    seq = golden_seq(name, 0)
    one = seq["x"][:1]
    bad = []

    def client(k):
        try:
            rounds(k)
        except OSError as e:  # the daemon died
            bad.append(("client %d" % k, repr(e)))

    def rounds(k):
        conns = [http.client.HTTPConnection("127.0.0.1", d.port, timeout=30) for _ in range(3)]
        for rnd in range(40):
            sid = 5000 + 100 * k + rnd
            st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": sid, "sequence_start": True}))
            if st != 200:
                bad.append(("start", st, b))
                continue
            ends = rnd % 2 == 1  # every other round the last chunk ends it: the others may be refused
            for i, c in enumerate(conns):
                params = {"sequence_id": sid}
                if ends and i == 1:
                    params["sequence_end"] = True
                c.request("POST", path, body=chunk_body(seq, one, params))
            for i, c in enumerate(conns):
                r = c.getresponse()
                body = r.read()
                if r.status != 200 and not (ends and r.status == 400 and b"ended" in body):
                    bad.append((r.status, body[:200]))
            if not ends:
                d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": sid, "sequence_end": True}))
        for c in conns:
            c.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]  # max_sequences is 4
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not bad, "chunks sent together: each 200, or 400 behind an end", bad[:3])
    check(d.proc.poll() is None and not th.sanitizer_report(d.stderr()),
          "the daemon serves on, with no sanitizer report", d.stderr()[-3000:])


def steps_lasting(d, path, seconds, most=4096):
    """The steps of a chunk that runs about `seconds` on this build (a sanitized debug build
    runs the model many times slower than a release one), timed on a stateless request of
    200 steps after one to warm up."""
    body = chunk_body({"I": 8}, [[0.0] * 8] * 200, {})
    d.json("POST", path, body=body)
    t0 = time.time()
    d.json("POST", path, body=body)
    per_step = max((time.time() - t0) / 200, 1e-6)
    return max(20, min(most, int(seconds / per_step)))


def pattern_lstm(repo, name, hidden, max_len, **cfg):
    """A one-layer LSTM (input 8) with weights of a fixed pattern of +-0.05: slow per step as
    zero_lstm's, and with a state that depends on every step it ran."""
    th.zero_lstm(repo, name, hidden, max_len, **cfg)
    path = os.path.join(repo, name, "1", "model.safetensors")
    with open(path, "r+b") as f:
        head = int.from_bytes(f.read(8), "little")
        n = (os.path.getsize(path) - 8 - head) // 4
        f.seek(8 + head)
        period = array.array("f", [((i * 7919) % 1001 - 500) * 1e-4 for i in range(1009)])
        vals = period * (n // len(period) + 1)
        f.write(vals[:n].tobytes())


def steps(rows, seed):
    return [[((seed * 31 + t * 7 + i * 3) % 17 - 8) / 8.0 for i in range(8)] for t in range(rows)]


def test_wait_timeout():
    """A chunk waiting behind its sequence's running chunk past its timeout is answered at its
    deadline (the loop's sweep), not when the running chunk ends, 503 "request timeout
    expired" as a request expired in the queue is; it never ran, so it leaves the sequence as
    if it had not come, a start with h0/c0 included; its place in the queue comes back then
    (docs/HTTP.md, "timeout")."""
    with tempfile.TemporaryDirectory(prefix="rnnd-seq-wait-") as tmp:
        pattern_lstm(tmp, "slow", 1024, 16384, sequence={},
                     batching={"max_batch_size": 1, "max_queue_size": 2})
        d = Daemon(repo=tmp)
        try:
            path = "/v2/models/slow/infer"
            long = steps_lasting(d, path, 4.0, most=16384)
            want = [{"name": "h_n"}, {"name": "c_n"}]

            def body(rows, params, extra=()):
                b = json.loads(chunk_body({"I": 8}, rows, params))
                b["inputs"] += list(extra)
                b["outputs"] = want
                return json.dumps(b)

            st, _, b = d.json("POST", path, body=body(steps(3, 1), {"sequence_id": 5, "sequence_start": True}))
            check(st == 200, "the sequence starts", (st, b))
            res = {}

            def send(key, b):
                res[key] = d.json("POST", path, body=b) + (time.time(),)

            running = threading.Thread(target=send, args=("long", body(steps(long, 2), {"sequence_id": 5})))
            running.start()
            time.sleep(0.5)
            state0 = [{"name": k, "datatype": "FP32", "shape": [1, 1, 1024], "data": [0.5] * 1024}
                      for k in ("h0", "c0")]
            t0 = time.time()
            # A start with h0/c0, and a continuation with sequence_end behind it: neither may
            # touch the sequence once expired.
            expiring = [threading.Thread(target=send, args=("start", body(steps(2, 3), {
                "sequence_id": 5, "sequence_start": True, "timeout": 100000}, state0)))]
            expiring.append(threading.Thread(target=send, args=("end", body(steps(2, 4), {
                "sequence_id": 5, "sequence_end": True, "timeout": 100000}))))
            for t in expiring:
                t.start()
                time.sleep(0.05)
            for t in expiring:
                t.join()
            alive = running.is_alive()
            for key in ("start", "end"):
                st, _, b, t = res[key]
                check(st == 503 and "request timeout expired" in b.get("error", ""),
                      "a %s behind the running chunk past its timeout: 503 timeout expired" % key, (st, b))
            check(alive and max(res["start"][3], res["end"][3]) - t0 < 2.0,
                  "... answered at its deadline, while the running chunk still runs",
                  (alive, res["start"][3] - t0, res["end"][3] - t0))
            # Their places came back at their deadlines: the model's two take two more.
            behind = [threading.Thread(target=send, args=("behind", body(steps(4, 5), {"sequence_id": 5}))),
                      threading.Thread(target=send, args=("more", body(steps(1, 6), {"sequence_id": 5})))]
            for t in behind:
                t.start()
                time.sleep(0.05)
            running.join()
            for t in behind:
                t.join()
            st, _, lb, _ = res["long"]
            check(st == 200, "the running chunk: 200", (st, lb))
            check(res["more"][0] == 200, "two chunks behind it after the expiries have their places: 200",
                  (res["behind"][:3], res["more"][:3]))
            st, _, b, _ = res["behind"]
            if st != 200 or res["long"][0] != 200:
                return
            # It continues from the running chunk's state, as a stateless run from there does.
            got = {o["name"]: o["data"] for o in b["outputs"]}
            prev = {o["name"]: o["data"] for o in lb["outputs"]}
            state = [{"name": k[0] + "0", "datatype": "FP32", "shape": [1, 1, 1024], "data": prev[k]}
                     for k in ("h_n", "c_n")]
            st, _, ref = d.json("POST", path, body=body(steps(4, 5), {}, state))
            ref = {o["name"]: o["data"] for o in ref["outputs"]} if st == 200 else {}
            for k in ("h_n", "c_n"):
                check(k in ref and max_err(got[k], ref[k]) <= TOL,
                      "the chunk after the expired ones continues the sequence: %s as a whole run's" % k,
                      max_err(got[k], ref[k]) if k in ref else (st, ref))
            check(max_err(got["h_n"], [0.0] * 1024) > 1e-3, "... a state that depends on its steps")
            st, _, b = d.json("POST", path, body=body(steps(1, 6), {"sequence_id": 5, "sequence_end": True}))
            check(st == 200, "the expired end did not end it: the sequence goes on", (st, b))
            check(not th.sanitizer_report(d.stderr()), "no sanitizer report", d.stderr()[-3000:])
        finally:
            d.close()


def test_queue_bound():
    """Chunks waiting behind their sequence's running chunk take places in the model's queue:
    past batching.max_queue_size waiting, the next is 503 at once, as a stateless request is,
    and each place comes back when its chunk runs (docs/HTTP.md, Limits); their timeout
    counts from their arrival."""
    with tempfile.TemporaryDirectory(prefix="rnnd-seq-queue-") as tmp:
        th.zero_lstm(tmp, "slow", 1024, 4096, batching={"max_batch_size": 1, "max_queue_size": 4}, sequence={})
        d = Daemon(repo=tmp)
        try:
            path = "/v2/models/slow/infer"
            long = steps_lasting(d, path, 1.5)
            st, _, _ = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8], {"sequence_id": 1, "sequence_start": True}))
            check(st == 200, "the sequence starts", st)
            res = []

            def send(params, steps):
                st, h, b = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8] * steps, params))
                res.append((st, h.get("retry-after"), (b or {}).get("error", "")))

            running = threading.Thread(target=send, args=({"sequence_id": 1}, long))  # about 1.5 s
            running.start()
            time.sleep(0.3)
            behind = []
            for _ in range(4):  # the queue's 4 places
                behind.append(threading.Thread(target=send, args=({"sequence_id": 1}, 1)))
                behind[-1].start()
                time.sleep(0.05)
            st, h, b = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8], {"sequence_id": 1}))
            check(st == 503 and h.get("retry-after") == "1" and "queue full" in b.get("error", ""),
                  "a 5th chunk behind the running one, past max_queue_size: 503 queue full", (st, b))
            st, _, b = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8], {}))
            check(st == 503 and "queue full" in b.get("error", ""),
                  "a stateless request finds the queue full of them too: 503", (st, b))
            for t in [running] + behind:
                t.join()
            check([r[0] for r in res] == [200] * 5, "the running chunk and the 4 behind it: 200", res)
            st, _, b = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8], {}))
            check(st == 200, "their places come back: a request runs after them", (st, b))

            # A chunk's timeout counts while it waits behind the running one (its queue time).
            res.clear()
            running = threading.Thread(target=send, args=({"sequence_id": 1}, long))
            running.start()
            time.sleep(0.3)
            st, _, b = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8], {"sequence_id": 1, "timeout": 100000}))
            running.join()
            check(st == 503 and "timeout expired" in b.get("error", ""),
                  "a chunk behind the running one past its timeout: 503 timeout expired", (st, b, res))
            st, _, b = d.json("POST", path, body=chunk_body({"I": 8}, [[0.0] * 8], {"sequence_id": 1}))
            check(st == 200, "... and the sequence goes on", (st, b))
        finally:
            d.close()


def wait_read(d, sock, limit=2.0):
    """Until the daemon has begun to read the request just written on sock (a second request
    in flight beside the scrape) or has answered it."""
    deadline = time.time() + limit
    while time.time() < deadline:
        if select.select([sock], [], [], 0)[0]:
            return
        st, _, text = d.request("GET", "/metrics")
        m = re.search(r"^rnnd_http_requests_in_flight (\d+)", text.decode(), re.M)
        if m and int(m.group(1)) >= 2:
            return
        time.sleep(0.001)


def test_restart_behind(d):
    """As Triton's sequence batcher does, an id's chunks run in arrival order, starts included:
    a new start sent while the id's last chunk still runs waits for it and begins afresh."""
    name = MODELS[0]
    path = "/v2/models/%s/infer" % name
    seq = golden_seq(name, 0)
    T = len(seq["x"])
    for rnd in range(5):
        d.json("POST", path, body=chunk_body(seq, seq["x"][:T - 1], {"sequence_id": 900, "sequence_start": True},
                                             True))
        results = {}

        def send(key, body):
            results[key] = d.json("POST", path, body=body)

        # The end is written whole, and the start sent once the daemon has begun to read
        # it (or answered it), so that it arrives first: on two connections, requests
        # arrive in the order the daemon reads them (docs/HTTP.md), and two HTTP threads
        # woken 1 ms apart can swap on a busy machine.  Its answer is read after.
        end = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
        end.request("POST", path, body=chunk_body(seq, seq["x"][T - 1:], {
            "sequence_id": 900, "sequence_end": True}))
        wait_read(d, end.sock)
        again = threading.Thread(target=send, args=("again", chunk_body(seq, seq["x"], {
            "sequence_id": 900, "sequence_start": True, "sequence_end": True}, True)))
        again.start()
        r = end.getresponse()
        results["end"] = (r.status, None, json.loads(r.read()))
        end.close()
        again.join()
        st_end, st_again = results["end"][0], results["again"][0]
        check(st_end == 200 and st_again == 200,
              "round %d: an end and the id's next start sent together: both 200" % rnd, (results["end"][2],
                                                                                      results["again"][2]))
        if st_again == 200:
            outs = {o["name"]: o for o in results["again"][2]["outputs"]}
            compare(name, "round %d, the start behind an end" % rnd, seq, [200], outs["output"]["data"], outs)


def test_errors(d, tmp):
    seq = golden_seq(MODELS[1], 0)
    path = "/v2/models/%s/infer" % MODELS[1]
    one = seq["x"][:1]
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 999}))
    check(st == 400 and "never started" in b.get("error", ""), "a continuation never started: 400 saying so", (st, b))
    stream(d, MODELS[1], 42, seq, [1, 2])
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 42}))
    check(st == 400 and "has ended" in b.get("error", ""), "a continuation after the end: 400 saying so", (st, b))
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 43, "sequence_start": True}))
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 43}, True))
    check(st == 400 and "h0" in b.get("error", ""), "h0 on a continuation: 400 naming h0", (st, b))
    body = json.dumps({"parameters": {"sequence_id": 44, "sequence_start": True},
                       "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 1, seq["I"]],
                                   "data": one[0] * 2}]})
    st, _, b = d.json("POST", path, body=body)
    check(st == 400 and "B = 1" in b.get("error", ""), "two sequences in a sequence request: 400", (st, b))
    # BI again with the block, as "bi_sequence": refused when it loads
    make_repo(tmp, ("bi_sequence",), BI)
    st, _, b = d.json("POST", "/v2/repository/models/bi_sequence/load")
    check(st == 400 and "only for unidirectional" in b.get("error", ""),
          "a sequence block on a bidirectional model: its load is refused, saying why", (st, b))
    st, _, idx = d.json("POST", "/v2/repository/index")
    why = [m.get("reason", "") for m in idx if m.get("name") == "bi_sequence"]
    check(why and "only for unidirectional" in why[0],
          "a sequence block on a bidirectional model: refused at load, the index says why", idx)
    st, _, b = d.json("POST", "/v2/models/bi_sequence/infer",
                      body=chunk_body(seq, one, {"sequence_id": 1, "sequence_start": True}))
    check(st == 503 and "unidirectional" in b.get("error", ""), "... and its requests get 503 saying why", (st, b))
    plain = "/v2/models/lstm_l1_uni_equal_h0/infer"
    st, _, b = d.json("POST", plain, body=chunk_body(golden_seq("lstm_l1_uni_equal_h0", 0), one,
                                                     {"sequence_id": 1, "sequence_start": True}))
    check(st == 400 and "sequence" in b.get("error", ""), "a model without the block: 400 saying so", (st, b))


def test_limits(d):
    seq = golden_seq(MODELS[1], 0)
    path = "/v2/models/%s/infer" % MODELS[1]
    one = seq["x"][:1]
    time.sleep(1.7)  # every sequence of the tests before has expired
    for sid in range(500, 504):
        st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": sid, "sequence_start": True}))
        check(st == 200, "start of sequence %d of 4" % sid, (st, b))
    st, h, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 504, "sequence_start": True}))
    check(st == 503 and h.get("retry-after") and "max_sequences" in b.get("error", ""),
          "a fifth live sequence: 503 with Retry-After naming max_sequences", (st, h, b))
    text = d.request("GET", "/metrics")[2].decode()
    got = [re.search(r'^rnnd_sequences_%s\{model="%s",version="1"\} (\d+)$' % (k, MODELS[1]), text, re.M)
           for k in ("live", "max", "refused_total")]
    check([int(m.group(1)) if m else None for m in got] == [4, 4, 1],
          "the metrics show 4 live of max 4, and the refused start", [m and m.group(0) for m in got])
    os.kill(d.proc.pid, signal.SIGHUP)  # nothing changed: the sequences stay
    time.sleep(0.5)
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 500}))
    check(st == 200, "after a SIGHUP that changed nothing, a sequence goes on", (st, b))
    time.sleep(1.7)
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 501}))
    check(st == 400 and "expired" in b.get("error", ""), "idle past idle_timeout_ms: 400 saying expired", (st, b))
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": 504, "sequence_start": True}))
    check(st == 200, "expired sequences make room for new ones", (st, b))


def test_reload_changed(d, tmp):
    """New weights (a changed file), or a repository load, drop the model's live sequences; their next
    chunk says so."""
    name = MODELS[2]
    seq = golden_seq(name, 0)
    path = "/v2/models/%s/infer" % name
    one = seq["x"][:1]
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": "kept-then-dropped",
                                                                "sequence_start": True}))
    check(st == 200, "a sequence starts before the reload", (st, b))
    weights = os.path.join(tmp, name, "1", "model.safetensors")
    data = open(weights, "rb").read()
    os.unlink(weights)
    with open(weights, "wb") as f:  # the same bytes in a new file: the model is rebuilt
        f.write(data)
    os.kill(d.proc.pid, signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline and "sequences dropped by the reload" not in d.stderr():
        time.sleep(0.05)
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": "kept-then-dropped"}))
    check(st == 400 and "reloaded" in b.get("error", ""),
          "after a reload with new weights, the next chunk says the sequence was dropped", (st, b))
    test_load_unchanged(d, MODELS[0])
    # A repository load of a changed model rebuilds it: the message says a load dropped it.
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": "dropped-by-load",
                                                                "sequence_start": True}))
    check(st == 200, "a sequence starts before the repository load", (st, b))
    os.unlink(weights)
    with open(weights, "wb") as f:  # the same bytes in a new file: changed, as a SIGHUP judges it
        f.write(data)
    st, _, b = d.json("POST", "/v2/repository/models/%s/load" % name)
    check(st == 200, "the repository load of the changed model", (st, b))
    st, _, b = d.json("POST", path, body=chunk_body(seq, one, {"sequence_id": "dropped-by-load"}))
    check(st == 400 and "was dropped" in b.get("error", "") and "repository load" in b.get("error", ""),
          "after a repository load of a changed model, the next chunk says a load dropped the sequence",
          (st, b))


def success_count(d, name):
    st, _, b = d.json("GET", "/v2/models/%s/stats" % name)
    return sum(m["inference_stats"]["success"]["count"] for m in b["model_stats"]) if st == 200 else None


def test_load_unchanged(d, name):
    """A repository load of a loaded, unchanged model keeps it, as Triton does: a sequence
    started before it goes on to PyTorch's numbers, and its statistics go on counting."""
    seq = golden_seq(name, 0)
    path = "/v2/models/%s/infer" % name
    cuts = [2, 3, len(seq["x"])]
    first = chunk_body(seq, seq["x"][:cuts[0]], {"sequence_id": "kept-by-load", "sequence_start": True}, True)
    st, _, b = d.json("POST", path, body=first)
    check(st == 200, "a sequence starts before the load of the unchanged model", (st, b))
    out = {o["name"]: o for o in b["outputs"]}["output"]["data"] if st == 200 else []
    before = success_count(d, name)
    for k in range(2):
        st, _, b = d.json("POST", "/v2/repository/models/%s/load" % name)
        check(st == 200, "a repository load of the unchanged model: 200 (%d)" % k, (st, b))
    check("model %s: unchanged since its build" % name in d.stderr(), "the log says the load kept the model")
    statuses, at, last = [], cuts[0], None
    for i, end in enumerate(cuts[1:]):
        params = {"sequence_id": "kept-by-load"}
        if i == len(cuts) - 2:
            params["sequence_end"] = True
        st, _, b = d.json("POST", path, body=chunk_body(seq, seq["x"][at:end], params))
        statuses.append(st)
        if st == 200:
            last = {o["name"]: o for o in b["outputs"]}
            out += last["output"]["data"]
        else:
            check(False, "the sequence's next chunk after the load", b)
        at = end
    compare(name, "across a repository load of the unchanged model", seq, statuses, out, last)
    check(success_count(d, name) == before + len(cuts) - 1,
          "the load kept the model's statistics: they count on", (before, success_count(d, name)))


def test_load_streams(d):
    """rnnd-load --streams keeps sequences live in chunks: no error, every chunk's steps counted,
    and the daemon's counters saw the sequences start and end."""
    import subprocess
    load = os.environ.get("RNND_LOAD", "")
    if not os.path.exists(load):
        check(False, "rnnd-load is built ($RNND_LOAD)", load)
        return
    p = subprocess.run([load, "--url", "http://127.0.0.1:%d" % d.port, "--model", MODELS[0], "--streams", "3",
                        "--chunk-length", "2", "--length", "5", "--requests", "60", "--json"],
                       capture_output=True, text=True, timeout=60)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        rep = {}
    check(p.returncode == 0 and rep.get("errors", 1) == 0, "rnnd-load --streams: no error",
          (p.returncode, p.stdout[-500:], p.stderr[-500:]))
    check(rep.get("streams") == 3 and rep.get("useful_steps_per_s", 0) > 0,
          "rnnd-load --streams reports useful steps/s", rep)


def test_demo():
    """config/models as `make run` serves it, and the README's streaming example."""
    demo = os.path.join(th.SRC, "config", "models")
    d = Daemon("--config", "config/rnnd.conf", repo=demo)
    try:
        st, _, idx = d.json("POST", "/v2/repository/index")
        want = sorted(m for m in os.listdir(demo) if os.path.isdir(os.path.join(demo, m)))
        check(st == 200 and sorted(r["name"] for r in idx if r["state"] == "READY") == want,
              "every demo model loads", (st, idx))
        with open(os.path.join(demo, "digits_lstm", "example.json"), "rb") as f:
            st, _, whole = d.json("POST", "/v2/models/digits_gru/infer", body=f.read())
        outs = []
        for k in (1, 2):
            with open(os.path.join(demo, "digits_stream", "chunk%d.json" % k), "rb") as f:
                outs.append(d.json("POST", "/v2/models/digits_stream/infer", body=f.read()))
        got = outs[1][2]["outputs"][0]["data"] if outs[1][0] == 200 else None
        want = whole["outputs"][0]["data"] if st == 200 else None
        check(outs[0][0] == 200 and got and want and max(abs(a - b) for a, b in zip(got, want)) <= 1e-6,
              "digits_stream's two chunks score as digits_gru scores the whole image", (outs, whole))
        load = os.environ.get("RNND_LOAD", "")
        p = subprocess.run([load, "--url", "http://127.0.0.1:%d" % d.port, "--model", "digits_stream",
                            "--streams", "8", "--chunk-length", "4", "--length", "8", "--requests", "200",
                            "--json", "--progress=false"], capture_output=True, text=True, timeout=60)
        try:
            rep = json.loads(p.stdout)
        except ValueError:
            rep = {}
        check(p.returncode == 0 and rep.get("ok") == 200 and rep.get("errors") == 0,
              "the README's rnnd-load --streams run on digits_stream: no error", (p.returncode, p.stderr[-300:]))
        check("max_body_bytes 64M)" in d.stderr(), "the start log gives max_body_bytes as rnnd.conf does",
              d.stderr()[-600:])
        check("grpc_max_message_bytes 64M)" in d.stderr(),
              "the start log gives grpc_max_message_bytes as rnnd.conf does", d.stderr()[-600:])
        check(not re.search(r"\b1 (HTTP )?threads\b|\b1 streams\b", d.stderr()),
              "the start log's counts agree with their nouns", d.stderr()[-600:])
        with open(os.path.join(demo, "digits_stream", "chunk1.json")) as f:
            first = json.load(f)
        for sid in ("left-open-1", "left-open-2"):  # started, never ended
            first["parameters"]["sequence_id"] = sid
            st, _, b = d.json("POST", "/v2/models/digits_stream/infer", body=json.dumps(first).encode())
            check(st == 200, "sequence %s starts" % sid, (st, b))
        st, _, text = d.request("GET", "/metrics")
        live = re.search(r'^rnnd_sequences_live\{model="digits_stream",version="1"\} (\d+)$', text.decode(), re.M)
        live = int(live.group(1)) if live else -1
        check(live >= 2, "/metrics counts the sequences left open live", live)
        rc, _ = d.stop()
        check(rc == 0, "the demo daemon exits 0 on SIGTERM", rc)
        check("model digits_stream version 1: %d live sequences dropped by the stop" % live in d.stderr(),
              "the stop logs the live sequences it drops", (live, d.stderr()[-600:]))
    finally:
        d.close()


def test_server_views(d):
    """/v2, the config and /metrics show the sequence extension, its settings and its counters."""
    st, _, b = d.json("GET", "/v2")
    check(st == 200 and "sequence" in b.get("extensions", []), "/v2 lists the sequence extension", b)
    st, _, b = d.json("GET", "/v2/models/%s/config" % MODELS[0])
    sb = b.get("sequence_batching", {}) if st == 200 else {}
    check(sb.get("max_sequence_idle_microseconds") == SEQ["idle_timeout_ms"] * 1000
          and sb.get("control_input") == [],
          "the config shows sequence_batching with the idle timeout", b)
    st, _, text = d.request("GET", "/metrics")
    text = text.decode()
    for fam, kind in (("rnnd_sequences_live", "gauge"), ("rnnd_sequences_started_total", "counter"),
                      ("rnnd_sequences_ended_total", "counter"), ("rnnd_sequences_expired_total", "counter")):
        check("# TYPE %s %s" % (fam, kind) in text, "/metrics has %s" % fam)
    started = re.search(r'^rnnd_sequences_started_total\{model="%s",version="1"\} (\d+)$' % MODELS[1], text, re.M)
    expired = re.search(r'^rnnd_sequences_expired_total\{model="%s",version="1"\} (\d+)$' % MODELS[1], text, re.M)
    check(started and int(started.group(1)) >= 8 and expired and int(expired.group(1)) >= 1,
          "the sequence counters count %s's starts and expiries" % MODELS[1], (started, expired))
    check('rnnd_sequences_live{model="lstm_l1_uni_equal_h0"' not in text,
          "a model without the block has no sequence series")
    st, _, b = d.json("GET", "/v2/models/lstm_l1_uni_equal_h0/config")
    check(st == 200 and "sequence_batching" not in b, "a model without the block shows none", b)


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rnnd-seq-") as tmp:
        d = Daemon(repo=make_repo(tmp))
        try:
            run_test(test_goldens, d)
            run_test(test_id_range, d)
            run_test(test_order_and_interleave, d)
            run_test(test_pipelined, d)
            run_test(test_restart_behind, d)
            run_test(test_errors, d, tmp)
            run_test(test_limits, d)
            run_test(test_reload_changed, d, tmp)
            run_test(test_load_streams, d)
            run_test(test_server_views, d)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
            err = d.stderr()
            check(not th.sanitizer_report(err), "no sanitizer report", err[-2000:])
        finally:
            d.close()
    run_test(test_queue_bound)
    run_test(test_wait_timeout)
    run_test(test_demo)
    print("test_sequences: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
