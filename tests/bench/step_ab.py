#!/usr/bin/env python3
"""step_ab.py: the CPU engine's fused step kernel of two revisions, alternated in one process.

    python3 tests/bench/step_ab.py [--base REV] [--new REV] [--rounds 8] [--steps 30]
                                   [--shape "gru 512 40 64" ...] [--lu 16] [--ys]

A change to engine/cpu/step.c that moves a step by 2-5% cannot be read from two
runs of rnnd-engine-bench on a shared host, whose neighbours move the same
binary by tens of per cent from one minute to the next.  This builds step.c
(with its headers) of --base (default HEAD) and of --new (default: the working
tree) into one program, tests/bench/step_ab.c, their symbols renamed, and for
each shape runs both in turn, round after round, on the process's CPU time, with
the FMA loop of rnnd-fma-peak between rounds.  Each build is compiled as meson
compiles the kernels (-O3 -fno-trapping-math, gcc).

A shape is "KIND H KX M": lstm (step.c's LSTM is a lone row's), gru, tanh or
relu; hidden units; x's width; rows.  --lu 8 runs the AVX2 panels on a CPU with
AVX-512 too.  --ys gives each row its own y buffer, as a batch's top layer
writes each sequence's.  Prints a markdown table: the best GFLOP/s of each
build, b over a, and the FMA loop's best; --json FILE keeps every run.
How it was used: docs/BENCHMARKS.md ("y fetched before it is written").
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHAPES = ["gru 512 40 64", "gru 96 64 64", "gru 96 64 8", "tanh 128 64 64", "gru 256 128 1"]
SYMBOLS = ["rnnd__cpu_step", "rnnd__cpu_step_pack", "rnnd__cpu_step_packed_size", "rnnd__cpu_project"]
SUFFIX = {"rnnd__cpu_step": "step", "rnnd__cpu_step_pack": "pack",
          "rnnd__cpu_step_packed_size": "size", "rnnd__cpu_project": "project"}
CFLAGS = ["-std=gnu11", "-O3", "-g", "-D_GNU_SOURCE", "-fno-trapping-math", "-Wno-psabi",
          "-Wall", "-Wextra", "-Werror"]


def tree(rev, tmp):
    """The directory holding engine/ and proto/ of rev (None: the working tree)."""
    if rev is None:
        return ROOT
    out = os.path.join(tmp, rev.replace("/", "_"))
    os.makedirs(out, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "engine", "proto"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", out], input=archive, check=True)
    return out


def compile_step(src, name, tmp):
    """step.c of the tree src as object name.o, its public symbols prefixed name_."""
    obj = os.path.join(tmp, name + ".o")
    renames = ["-D%s=%s_%s" % (s, name, SUFFIX[s]) for s in SYMBOLS]
    subprocess.run(["gcc"] + CFLAGS + renames +
                   ["-I", os.path.join(src, "engine"), "-I", os.path.join(src, "proto"),
                    "-c", os.path.join(src, "engine", "cpu", "step.c"), "-o", obj], check=True)
    return obj


def build(base, new, tmp):
    objs = [compile_step(tree(base, tmp), "a", tmp), compile_step(tree(new, tmp), "b", tmp)]
    exe = os.path.join(tmp, "rnnd-step-ab")
    subprocess.run(["gcc"] + CFLAGS + ["-I", os.path.join(ROOT, "engine"),
                                        "-I", os.path.join(ROOT, "proto"),
                                        os.path.join(ROOT, "tests", "bench", "step_ab.c")] +
                   objs + ["-o", exe, "-lm"], check=True)
    return exe


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="HEAD", help="revision a (HEAD)")
    ap.add_argument("--new", default=None, help="revision b (the working tree)")
    ap.add_argument("--rounds", type=int, default=8, help="rounds of 3 runs of each (8)")
    ap.add_argument("--steps", type=int, default=30, help="steps a run (30)")
    ap.add_argument("--shape", action="append", help='"KIND H KX M", repeatable')
    ap.add_argument("--lu", type=int, default=16, choices=[16, 8], help="panel width (16)")
    ap.add_argument("--ys", action="store_true", help="each row's y in its own buffer")
    ap.add_argument("--json", help="also write every run as JSON to this file")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="step_ab.") as tmp:
        exe = build(a.base, a.new, tmp)
        for shape in a.shape or SHAPES:
            kind, H, KX, M = shape.split()
            cmd = [exe, kind, H, KX, M, str(a.steps), str(a.rounds), str(a.lu),
                   "1" if a.ys else "0"]
            print("step_ab: %s" % shape, file=sys.stderr)
            rows.append(json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                                  text=True).stdout))
    print("a = %s, b = %s; lu %d, T %d, best of %d rounds of 3%s\n" %
          (a.base, a.new or "working tree", a.lu, a.steps, a.rounds, ", y per row" if a.ys else ""))
    print("| shape | a GFLOP/s | b GFLOP/s | b/a | FMA loop | b % of it |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print("| %s %d, x %d, %d rows | %.1f | %.1f | %.3f | %.1f | %.1f%% |" %
              (r["kind"], r["H"], r["KX"], r["M"], r["a"], r["b"], r["b"] / r["a"], r["peak"],
               100 * r["b"] / r["peak"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
