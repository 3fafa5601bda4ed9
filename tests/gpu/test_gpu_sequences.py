#!/usr/bin/env python3
"""test_gpu_sequences.py: stateful sequences (issue 17) on the cuDNN backend.

The chunks of a sequence run as ordinary one-sequence jobs with the state
as h0/c0 (docs/DESIGN.md §6), so the cuDNN backend needs nothing of its
own; this runs tests/integration/test_sequences.py's golden streams and
ordering on a daemon whose LSTM models are placed on cuDNN (on a real GPU
through tests/gpu/run-on-gpu.sh, in make test on the stand-in of
tests/cudasim), and checks they are.

Exits 77 (skip) when rnnd has no cuDNN backend or sees no GPU.  Python 3
standard library only.
"""

import os
import subprocess
import sys
import tempfile

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, run_test

# The integration suite's sequence cases, run here on cuDNN: a suite of its own, not the harness.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))
import test_sequences as ts  # noqa: E402

SKIP = 77


def main():
    out = subprocess.run([th.BIN, "--backends"], capture_output=True, text=True).stdout
    if "cuDNN backend: built" not in out or "GPUs: none" in out:
        print("SKIP: no cuDNN backend or no GPU:\n" + out)
        return SKIP
    with tempfile.TemporaryDirectory(prefix="rnnd-gpu-seq-") as tmp:
        d = Daemon(repo=ts.make_repo(tmp))
        try:
            for name in ("lstm_l3_uni_equal_h0", "lstm_proj_l1_uni_ragged_h0"):
                st, _, cfg = d.json("GET", "/v2/models/%s/config" % name)
                inst = [i for g in cfg.get("instance_group", []) for i in g.get("instances", [])]
                check(inst and all(i["backend"] == "cudnn" for i in inst), "%s: on cuDNN" % name, inst)
            run_test(ts.test_goldens, d)
            run_test(ts.test_order_and_interleave, d)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
        finally:
            d.close()
    print("test_gpu_sequences: %d passed, %d failed" % (th.passed, th.failed))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
