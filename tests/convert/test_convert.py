#!/usr/bin/env python3
"""test_convert.py: rnnd-convert against the frameworks (tests/convert/README.md).

Converts every fixture under tests/convert/fixtures with the installed `rnnd-convert`
console script into one temporary repository, serves it with the real rnnd ($RNND_BIN),
and checks that each model's outputs over HTTP are the framework's within 1e-5 (valid
steps only for sequence outputs).  Each refusal fixture must exit 1 with its exact
message on stderr and write nothing.  Runs in the venv tests/run.sh makes (numpy,
safetensors, h5py, onnx and clients/rnnd-convert).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check

FIXTURES = os.path.join(HERE, "fixtures")
TOL = 1e-5
CONVERT = os.path.join(os.path.dirname(sys.executable), "rnnd-convert")


def convert(case, meta, repo):
    src = os.path.join(FIXTURES, case, meta["source"])
    return subprocess.run([CONVERT, src, "--repository", repo, "--name", case] + meta["args"],
                          capture_output=True, text=True, timeout=120)


def infer(d, case, io):
    inputs = []
    for key, name, dt in (("x", "input", "FP32"), ("tokens", "tokens", "INT64"),
                          ("lengths", "lengths", "INT64"), ("h0", "h0", "FP32"),
                          ("c0", "c0", "FP32")):
        if key in io:
            inputs.append({"name": name, "datatype": dt, "shape": list(io[key].shape),
                           "data": io[key].reshape(-1).tolist()})
    st, _, resp = d.json("POST", "/v2/models/%s/infer" % case,
                         body=json.dumps({"inputs": inputs}))
    if not check(st == 200, "%s: 200" % case, (st, resp)):
        return {}
    return {o["name"]: np.asarray(o["data"], dtype=np.float64).reshape(o["shape"])
            for o in resp["outputs"]}


def compare(case, io, outs):
    lengths = io["lengths"]
    steps = (io["x"] if "x" in io else io["tokens"]).shape[1]
    valid = np.arange(steps)[None, :] < lengths[:, None]
    n = 0
    for key in ("scores", "output", "h_n"):
        if key not in io:
            continue
        want = io[key].astype(np.float64)
        got = outs.get(key)
        if not check(got is not None and got.shape == want.shape, "%s: %s shape %s" % (
                case, key, list(want.shape)), None if got is None else got.shape):
            continue
        if want.ndim == 3 and key != "h_n":  # [B, T, .]: the valid steps
            got, want = got[valid], want[valid]
        err = float(np.abs(got - want).max())
        check(err <= TOL, "%s: %s within %g of the framework" % (case, key, TOL), err)
        print("%-34s %-6s max abs err %.2e" % (case, key, err))
        n += 1
    check(n > 0, "%s: something is compared" % case)


def main():
    t0 = time.time()
    import rnnd_convert
    pkg = os.path.realpath(os.path.join(th.SRC, "clients", "rnnd-convert"))
    check(os.path.realpath(rnnd_convert.__file__).startswith(pkg + os.sep),
          "rnnd_convert is the repository's (an editable install)", rnnd_convert.__file__)
    cases = sorted(c for c in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, c)))
    metas = {c: json.load(open(os.path.join(FIXTURES, c, "case.json"))) for c in cases}
    served = [c for c in cases if "refuse" not in metas[c]]
    refused = [c for c in cases if "refuse" in metas[c]]
    check(len(served) >= 20 and len(refused) >= 10, "the fixtures are there",
          (len(served), len(refused)))
    # The name filter (--only) picks fixtures by name.
    served = [c for c in served if th.selected(c)]
    refused = [c for c in refused if th.selected(c)]
    kinds = {metas[c]["source"].rsplit(".", 1)[1] for c in served}
    check(kinds == {"h5", "keras", "onnx", "pt"}, "fixtures of every format", kinds)
    repo = tempfile.mkdtemp(prefix="rnnd-convert-")
    try:
        for c in refused:
            r = convert(c, metas[c], repo)
            want = "rnnd-convert: " + metas[c]["refuse"] + "\n"
            check(r.returncode == 1 and r.stderr == want, "%s: refused with its exact message" % c,
                  (r.returncode, r.stderr, want))
            check(os.listdir(repo) == [], "%s: a refusal writes nothing" % c, os.listdir(repo))
        for c in served:
            r = convert(c, metas[c], repo)
            check(r.returncode == 0 and r.stdout.startswith("wrote "), "%s: converts" % c,
                  (r.returncode, r.stdout, r.stderr))
        # PyTorch names that are not in the file are refused by name.
        sd = "torch_sd_lstm_bi2_emb_softmax"
        listing = ("the file has emb.weight, fc.bias, fc.weight, rnn.bias_hh_l0, "
                   "rnn.bias_hh_l0_reverse, rnn.bias_hh_l1, rnn.bias_hh_l1_reverse, rnn.bias_ih_l0, "
                   "rnn.bias_ih_l0_reverse, rnn.bias_ih_l1, rnn.bias_ih_l1_reverse, rnn.weight_hh_l0")
        for args, msg in (
                (["--prefix", "lstm."], "tensor 'lstm.weight_ih_l0': missing (--prefix 'lstm.'); "),
                (metas[sd]["args"][:4] + ["--head-weight", "head.w"],
                 "tensor 'head.w' (--head-weight): missing; ")):
            r = convert(sd, dict(metas[sd], args=args), repo)
            want = "rnnd-convert: " + msg + listing + "\n"
            check(r.returncode == 1 and r.stderr == want, "%s: refused naming the tensor" % args,
                  (r.returncode, r.stderr))
        r = convert(served[0], metas[served[0]], repo)
        check(r.returncode == 1 and "exists" in r.stderr, "converting over a model is refused",
              (r.returncode, r.stderr))
        check(sorted(os.listdir(repo)) == served, "one directory per converted model, nothing else",
              sorted(os.listdir(repo)))
        d = Daemon(repo=repo)
        try:
            for c in served:
                io = {k: np.asarray(v) for k, v in load_file(os.path.join(FIXTURES, c, "io.safetensors")).items()}
                compare(c, io, infer(d, c, io))
            # reset_after=False GRU is served by the CPU engine, and /config says why not cuDNN.
            st, _, cfg = d.json("GET", "/v2/models/k2_gru_rbr_l2_tanh/config")
            why = [i.get("why_not_cudnn", "") for g in (cfg or {}).get("instance_group", [])
                   for i in g.get("instances", [])]
            # A build without the cuDNN backend says that first (engine/placement.c).
            check(st == 200 and why and all("gru_linear_before_reset=false" in w or
                                            "not built in" in w for w in why),
                  "/config of a reset_after=False GRU says why not cuDNN", (st, why))
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
        finally:
            d.close()
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    print("test_convert: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
