#!/usr/bin/env python3
"""test_gpu_http.py: the whole daemon serving on the GPU (DESIGN.md §7).

Starts $RNND_BIN on the golden repository and checks, for every golden case,
that /v2/models/{m}/config shows where it runs (backend cudnn for every model
cuDNN qualifies for, cpu with the reason for the reset-before GRUs) and that
inference over HTTP matches the framework's outputs (max abs error <= 1e-5).
Then the switches: RNND_BACKEND=cpu, and CUDA_VISIBLE_DEVICES= (empty), put
everything on the CPU and say why.

Exits 77 (skip) when rnnd has no cuDNN backend or sees no GPU.  Python 3
standard library only; reuses the integration suite's Daemon and helpers.
"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
import rnndtest as th  # the harness (tests/support)
import rnndtest as ti  # the goldens' helpers
from rnndtest import Daemon, check, GOLDEN, run_test

SKIP = 77


def backends():
    return subprocess.run([th.BIN, "--backends"], capture_output=True, text=True).stdout


def instances(d, name):
    """Every instance description in the model's config."""
    st, _, cfg = d.json("GET", "/v2/models/%s/config" % name)
    if not check(st == 200, "%s: config answers" % name, (st, cfg)):
        return []
    return [i for g in cfg.get("instance_group", []) for i in g.get("instances", [])]


def reset_before(name):
    """Whether the model, or a block of its chain, is a reset-before GRU (CPU only)."""
    with open(os.path.join(GOLDEN, name, "config.json")) as f:
        cfg = json.load(f)
    return any(b.get("gru_linear_before_reset") is False for b in cfg.get("blocks", [cfg]))


def test_on_gpu(d):
    cases = sorted(e for e in os.listdir(GOLDEN) if os.path.isdir(os.path.join(GOLDEN, e)))
    check(len(cases) >= 80, "the golden repository is there", len(cases))
    for name in cases:
        inst = instances(d, name)
        if reset_before(name):
            check(inst and all(i["backend"] == "cpu" for i in inst), "%s: on the CPU" % name, inst)
            why = inst[0].get("why_not_cudnn", "") if inst else ""
            check("gru_linear_before_reset" in why and (name.startswith("chain_") == ("blocks[" in why)),
                  "%s: the config says why not cuDNN (a chain: which block)" % name, inst)
            line = "<6>.* model %s version 1: not on cuDNN: .*gru_linear_before_reset" % re.escape(name)
            check(re.search(line, d.stderr()), "%s: the log says why not cuDNN, at info" % name)
        else:
            check(inst and any(i["backend"] == "cudnn" for i in inst), "%s: on cuDNN" % name, inst)
        io = ti.read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
        st, _, resp = d.json("POST", "/v2/models/%s/infer" % name,
                             body=json.dumps({"inputs": ti.case_inputs(io)}))
        if check(st == 200, "%s: infer 200" % name, (st, resp)):
            ti.compare_case(name, io, ti.outputs_of(resp), "over HTTP on the GPU")


def test_switched_off(env, want):
    d = Daemon(env=env)
    try:
        inst = instances(d, "lstm_l1_uni_equal_h0")
        check(inst and all(i["backend"] == "cpu" for i in inst), "%s: on the CPU" % env, inst)
        check(inst and want in inst[0].get("why_not_cudnn", ""), "%s: says %r" % (env, want), inst)
        check(not re.search(r"<6>.*not on cuDNN", d.stderr()),
              "%s: no model repeats the server-wide reason at info" % env, d.stderr()[-2000:])
    finally:
        d.stop()
        d.close()


def test_mixed_groups():
    """A model with a GPU group and a CPU group: the config lists each group's own instances,
    the GPU one's on cuDNN (one per visible GPU by default) and the CPU one's on the CPU."""
    import tempfile
    src = os.path.join(GOLDEN, "lstm_l1_uni_equal_h0")
    with tempfile.TemporaryDirectory(prefix="rnnd-mixed-") as tmp:
        dst = os.path.join(tmp, "mixed")
        os.makedirs(os.path.join(dst, "1"))
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        cfg["instances"] = [{"kind": "gpu", "count": 1, "gpus": [0]}, {"kind": "cpu", "count": 2}]
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(cfg, f)
        os.symlink(os.path.join(src, "1", "model.safetensors"), os.path.join(dst, "1", "model.safetensors"))
        d = Daemon(repo=tmp)
        try:
            st, _, c = d.json("GET", "/v2/models/mixed/config")
            groups = c.get("instance_group", []) if st == 200 else []
            check(len(groups) == 2, "mixed: two instance groups", groups)
            if len(groups) == 2:
                g0, g1 = groups[0].get("instances", []), groups[1].get("instances", [])
                check(groups[0].get("kind") == "KIND_GPU" and len(g0) == 1 and g0[0]["backend"] == "cudnn",
                      "mixed: group 0 is one cuDNN instance", groups[0])
                check(groups[1].get("kind") == "KIND_CPU" and len(g1) == 2 and
                      all(i["backend"] == "cpu" for i in g1), "mixed: group 1 is two CPU instances", groups[1])
            _, _, body = d.request("GET", "/metrics")
            info = sorted(re.findall(r'^rnnd_model_backend_info\{model="mixed",version="1",backend="([^"]*)"'
                                     r'.*\} (\d+)$', body.decode(), re.M))
            check(info == [("cpu", "2"), ("cudnn", "1")], "mixed: rnnd_model_backend_info has a series per "
                  "placement", info)
        finally:
            d.stop()
            d.close()


def main():
    out = backends()
    if "cuDNN backend: built" not in out or "GPUs: none" in out:
        print("SKIP: no cuDNN backend or no GPU:\n" + out)
        return SKIP
    print(out)
    d = Daemon()
    try:
        run_test(test_on_gpu, d)
    finally:
        d.stop()
        d.close()
    run_test(test_mixed_groups)
    run_test(test_switched_off, {"RNND_BACKEND": "cpu"}, "backend = cpu (set by RNND_BACKEND)")
    run_test(test_switched_off, {"CUDA_VISIBLE_DEVICES": ""}, "no GPU")
    print("%d passed, %d failed" % (th.passed, th.failed))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
