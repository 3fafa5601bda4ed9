#!/usr/bin/env python3
"""test_broken_files.py: the hostile-client suite's broken model files, against
the real rnnd (docs/TESTING.md): what an operator's mistake or an attacker
with write access to the repository puts there must cost a load, never the
daemon, and never the models beside it.

- a FIFO as config.json or as the weights, at start-up, under SIGHUP and
  through the repository API: refused at once as "not a regular file" (it
  hung the loader, every reload behind it and start-up);
- weights holding NaN or Inf: refused at load, naming tensor and element;
- weights truncated, or cut and rewritten by cp, while reloads race them:
  the daemon lives, the old build answers right throughout (a mapped file
  read past its new end raised SIGBUS);
- files that were always refused stay refused: a header length past the
  end, a config that is not JSON, a directory as the weights file;
- a chain of blocks whose second block's weights are sized for another
  input (a unidirectional first block) is refused naming the block, its
  input size and the tensor; two blocks with one prefix are refused.

The cases of issue 18 that wait for the daemon's restructuring (issue 15)
are in tests/hostile/README.md, not here.

Python 3 standard library only.  Prints one line per failed check and a
summary "N passed, N failed"; exits 1 when any check failed.
"""

import json
import os
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time

import rnndtest  # the harness (tests/support)

check = rnndtest.check
DEMO = os.path.join(rnndtest.SRC, "config", "models")
EXAMPLE = open(os.path.join(DEMO, "digits_lstm", "example.json"), "rb").read()


def good_model(repo, name="digits_lstm", demo=None):
    """A copy of demo model demo (default: name) as name (files, not links, since the tests
    rewrite them)."""
    d, src = os.path.join(repo, name), os.path.join(DEMO, demo or name)
    os.makedirs(os.path.join(d, "1"))
    shutil.copy(os.path.join(src, "config.json"), d)
    shutil.copy(os.path.join(src, "1", "model.safetensors"), os.path.join(d, "1"))
    return d


def big_lstm(repo, name, hidden=384):
    """A one-layer LSTM (input 8) with small non-zero weights, a few MB: long enough to load
    that a copy can race the load."""
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"cell": "lstm", "input_size": 8, "hidden_size": hidden, "max_sequence_length": 16}, f)
    shapes = [("weight_ih_l0", [4 * hidden, 8]), ("weight_hh_l0", [4 * hidden, hidden]),
              ("bias_ih_l0", [4 * hidden]), ("bias_hh_l0", [4 * hidden])]
    header, blobs, off = {}, [], 0
    for n, shape in shapes:
        count = shape[0] * (shape[1] if len(shape) > 1 else 1)
        blob = struct.pack("<%df" % count, *([0.001] * count))
        header[n] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    h = json.dumps(header).encode()
    data = len(h).to_bytes(8, "little") + h + b"".join(blobs)
    with open(os.path.join(d, "1", "model.safetensors"), "wb") as f:
        f.write(data)
    return data


def index(d):
    st, _, rows = d.json("POST", "/v2/repository/index")
    return {(r["name"], r.get("version")): r for r in rows} if st == 200 else {}


def reason(d, name):
    return " ".join(r.get("reason", "") for (n, _), r in index(d).items() if n == name)


def infer(d, model="digits_lstm", body=EXAMPLE):
    st, _, data = d.request("POST", "/v2/models/%s/infer" % model, body=body)
    return st, data


def hup_done(d, n_before):
    """Waits until the log shows one more finished reload than n_before."""
    deadline = time.time() + 20
    while time.time() < deadline:
        if reloads(d) > n_before:
            return True
        time.sleep(0.05)
    return False


def reloads(d):
    return d.stderr().count("SIGHUP: reloaded:")


def test_fifos():
    """FIFOs as config.json and as the weights: refused at once at start, on SIGHUP, by the API."""
    tmp = tempfile.mkdtemp(prefix="rnnd-hostile-")
    repo = os.path.join(tmp, "models")
    good_model(repo)
    os.makedirs(os.path.join(repo, "fifo_cfg", "1"))
    os.mkfifo(os.path.join(repo, "fifo_cfg", "config.json"))
    d2 = good_model(repo, "digits_gru")
    os.unlink(os.path.join(d2, "1", "model.safetensors"))
    os.mkfifo(os.path.join(d2, "1", "model.safetensors"))
    d = None
    try:
        t0 = time.time()
        d = rnndtest.Daemon(repo=repo, wait_ready=False)
        st, _ = infer(d)
        check(st == 200, "with FIFOs in the repository, start-up finishes and serves the good model", st)
        check(time.time() - t0 < 15, "start-up is not held by a FIFO", time.time() - t0)
        r = reason(d, "fifo_cfg")
        check("config.json: not a regular file" in r, "a FIFO config.json is refused as not a regular file", r)
        r = reason(d, "digits_gru")
        check("model.safetensors: not a regular file" in r, "a FIFO weights file is refused as not a regular file",
              r)
        t0 = time.time()
        st, _, body = d.json("POST", "/v2/repository/models/digits_gru/load")
        check(st == 400 and "not a regular file" in json.dumps(body),
              "loading the model through the API answers 400 with the reason", (st, body))
        check(time.time() - t0 < 10, "the API load is not held by the FIFO", time.time() - t0)
        n = reloads(d)
        d.proc.send_signal(signal.SIGHUP)
        check(hup_done(d, n), "a SIGHUP with FIFOs in the repository finishes", d.stderr()[-600:])
        st, _ = infer(d)
        check(st == 200, "after the SIGHUP the good model serves", st)
    finally:
        if d:
            d.close()
        shutil.rmtree(tmp)


def put_nonfinite(path, tensor, element, value):
    """Overwrites element of tensor (F32) in the safetensors file at path with value."""
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        begin = header[tensor]["data_offsets"][0]
        f.seek(8 + n + begin + 4 * element)
        f.write(struct.pack("<f", value))


def test_nonfinite_weights():
    """NaN and Inf weights: refused at load (start and API), naming tensor and element."""
    tmp = tempfile.mkdtemp(prefix="rnnd-hostile-")
    repo = os.path.join(tmp, "models")
    good_model(repo)
    d2 = good_model(repo, "digits_gru")
    w = os.path.join(d2, "1", "model.safetensors")
    put_nonfinite(w, "rnn.weight_hh_l0", 5, float("nan"))
    d = None
    try:
        d = rnndtest.Daemon(repo=repo, wait_ready=False)
        r = reason(d, "digits_gru")
        check("tensor 'rnn.weight_hh_l0' element 5 (of " in r and "is NaN; weights must be finite" in r,
              "NaN weights are refused at start, naming tensor and element", r)
        st, _ = infer(d, "digits_gru")
        check(st in (404, 503), "the refused model does not answer inference", st)
        shutil.copy(os.path.join(DEMO, "digits_gru", "1", "model.safetensors"), w)
        put_nonfinite(w, "rnn.bias_ih_l0", 0, float("-inf"))
        st, _, body = d.json("POST", "/v2/repository/models/digits_gru/load")
        text = json.dumps(body)
        check(st == 400 and "tensor 'rnn.bias_ih_l0' element 0 (of" in text and "is -Inf" in text,
              "-Inf weights are refused by the API load with 400, naming tensor and element", (st, body))
        shutil.copy(os.path.join(DEMO, "digits_gru", "1", "model.safetensors"), w)
        st, _, body = d.json("POST", "/v2/repository/models/digits_gru/load")
        check(st == 200, "finite weights load again", (st, body))
        st, _ = infer(d, "digits_gru")
        check(st == 200, "and serve", st)
    finally:
        if d:
            d.close()
        shutil.rmtree(tmp)


def test_truncated_under_reload():
    """Weights cut and rewritten (as cp does) for 4 s while SIGHUPs and API loads race them: the
    daemon lives, and the model answers the same throughout."""
    tmp = tempfile.mkdtemp(prefix="rnnd-hostile-")
    repo = os.path.join(tmp, "models")
    good_model(repo)
    data = big_lstm(repo, "big", hidden=768)
    w = os.path.join(repo, "big", "1", "model.safetensors")
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4, 8],
                                   "data": [0.5] * 32}], "outputs": [{"name": "h_n"}]}).encode()
    d = None
    stop = threading.Event()
    answers = []

    def client():
        while not stop.is_set():
            try:
                answers.append(infer(d, "big", body))
            except OSError as e:
                answers.append((0, repr(e).encode()))

    def reloader():
        i = 0
        while not stop.is_set() and d.proc.poll() is None:
            if i % 3:
                d.proc.send_signal(signal.SIGHUP)
            else:
                try:
                    d.request("POST", "/v2/repository/models/big/load")
                except OSError:
                    pass
            i += 1
            time.sleep(0.03)

    try:
        d = rnndtest.Daemon(repo=repo)
        st, ref = infer(d, "big", body)
        check(st == 200, "the big model serves", (st, ref[:200]))
        threads = [threading.Thread(target=client), threading.Thread(target=reloader)]
        for t in threads:
            t.start()
        copies = 0
        deadline = time.time() + 4
        while time.time() < deadline and d.proc.poll() is None:
            with open(w, "r+b") as f:
                f.truncate(len(data) // 2)
                time.sleep(0.003)
                f.truncate(0)
                f.write(data)
            copies += 1
            time.sleep(0.005)
        stop.set()
        for t in threads:
            t.join()
        check(d.proc.poll() is None, "rnnd lives through %d copies over weights it reloads" % copies,
              "exit %s: %s" % (d.proc.poll(), d.stderr()[-600:]))
        if d.proc.poll() is not None:
            return
        st, _, b = d.json("POST", "/v2/repository/models/big/load")
        check(st == 200, "a load after the copies loads the whole file", (st, b))
        log = d.stderr()
        refused = log.count("shrank while being read") + log.count("changed while being read")
        bad = [a for a in answers if a[0] != 200 or a[1] != ref]
        check(not bad, "every answer during the copies is the model's (%d answers, %d loads refused as the "
              "file changed underneath)" % (len(answers), refused), bad[:3])
        check(len(answers) > 0, "the client got answers during the copies")
    finally:
        stop.set()
        if d:
            d.close()
        shutil.rmtree(tmp)


def test_always_refused():
    """Broken files that were always refused stay refused, each with its reason, and the good model serves."""
    tmp = tempfile.mkdtemp(prefix="rnnd-hostile-")
    repo = os.path.join(tmp, "models")
    good_model(repo)
    a = good_model(repo, "past_end", "digits_gru")
    with open(os.path.join(a, "1", "model.safetensors"), "r+b") as f:
        f.write(struct.pack("<Q", 1 << 40))
    b = good_model(repo, "not_json", "digits_gru")
    with open(os.path.join(b, "config.json"), "w") as f:
        f.write('{"cell": "lstm",')
    c = good_model(repo, "dir_weights", "digits_gru")
    os.unlink(os.path.join(c, "1", "model.safetensors"))
    os.mkdir(os.path.join(c, "1", "model.safetensors"))
    d = None
    try:
        d = rnndtest.Daemon(repo=repo, wait_ready=False)
        check(infer(d)[0] == 200, "the good model serves beside broken ones")
        for name, want in (("past_end", "header length 1099511627776 is over the limit"),
                           ("not_json", "config.json"), ("dir_weights", "not a regular file")):
            r = reason(d, name)
            check(want in r, "%s is refused with its reason" % name, r)
    finally:
        if d:
            d.close()
        shutil.rmtree(tmp)


def chain_model(repo, name, block1_input):
    """A chain (input 8): a bidirectional LSTM of 16, then an LSTM of 4 whose
    weight_ih is [16, block1_input] (32 fits: two directions of 16)."""
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"input_size": 8, "max_sequence_length": 16, "blocks": [
            {"cell": "lstm", "hidden_size": 16, "bidirectional": True, "prefix": "a."},
            {"cell": "lstm", "hidden_size": 4, "prefix": "b."}]}, f)
    shapes = []
    for sfx in ("_l0", "_l0_reverse"):
        shapes += [("a.weight_ih" + sfx, [64, 8]), ("a.weight_hh" + sfx, [64, 16])]
    shapes += [("b.weight_ih_l0", [16, block1_input]), ("b.weight_hh_l0", [16, 4])]
    header, blobs, off = {}, [], 0
    for n, shape in shapes:
        blob = struct.pack("<%df" % (shape[0] * shape[1]), *([0.01] * (shape[0] * shape[1])))
        header[n] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        off += len(blob)
        blobs.append(blob)
    h = json.dumps(header).encode()
    with open(os.path.join(d, "1", "model.safetensors"), "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
    return d


def test_chain_misfits():
    """A chain whose weights do not fit a block is refused naming the block; the rest serve."""
    tmp = tempfile.mkdtemp(prefix="rnnd-hostile-")
    repo = os.path.join(tmp, "models")
    good_model(repo)
    chain_model(repo, "chain_ok", 32)
    chain_model(repo, "chain_misfit", 16)
    dup = chain_model(repo, "chain_dup_prefix", 32)
    with open(os.path.join(dup, "config.json")) as f:
        cfg = json.load(f)
    cfg["blocks"][1]["prefix"] = "a."
    with open(os.path.join(dup, "config.json"), "w") as f:
        json.dump(cfg, f)
    d = None
    try:
        d = rnndtest.Daemon(repo=repo, wait_ready=False)
        check(infer(d)[0] == 200, "the good model serves beside broken chains")
        body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 8],
                                       "data": [0.5] * 24}]}).encode()
        st, data = infer(d, "chain_ok", body)
        check(st == 200 and b'"h_n"' in data, "a chain that fits serves", (st, data[:300]))
        r = reason(d, "chain_misfit")
        check("blocks[1] (lstm, input 32, hidden 4)" in r and
              "tensor 'b.weight_ih_l0' has shape [16, 16], the config needs [16, 32]" in r,
              "a misfit in a chain names the block, its input and the tensor", r)
        r = reason(d, "chain_dup_prefix")
        check("blocks[0] and blocks[1] have the same prefix" in r, "two blocks with one prefix are refused", r)
    finally:
        if d:
            d.close()
        shutil.rmtree(tmp)


def main():
    for t in (test_fifos, test_nonfinite_weights, test_truncated_under_reload, test_always_refused,
              test_chain_misfits):
        try:
            rnndtest.run_test(t)
        except Exception as e:  # a crash of the test is a failed check, and the others still run
            check(False, "%s raised" % t.__name__, repr(e))
    print("%d passed, %d failed" % (rnndtest.passed, rnndtest.failed))
    sys.exit(1 if rnndtest.failed else 0)


if __name__ == "__main__":
    main()
