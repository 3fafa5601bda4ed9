#!/usr/bin/env python3
"""chain_bench.py: a chain of blocks against its blocks run alone (issue 30).

A chain (config "blocks", docs/MODELS.md) should cost no more than the sum of
its blocks, each run alone on the same batch: the chain adds only the hand
over of one block's y to the next.  For each chain below this writes the
chain as one model and each of its blocks as a model of its own (the same
weights, deterministic; no framework needed), then times, with
rnnd-engine-bench on the CPU engine, the chain and every block in alternated
rounds (each side keeps its fastest median, since noise only slows a run),
and prints a markdown table: chain ms, sum of the blocks ms, and their ratio
(target: at most 1.05).

On one thread it times the process's CPU time per run (rnnd-engine-bench's
median_cpu_s), which preemption on a busy machine does not inflate; --clock
wall times the wall clock instead (the default on more threads, where a
run's threads wait for each other).

Usage: python3 tests/bench/chain_bench.py --bench BUILD/tests/bench/rnnd-engine-bench
           [--rounds R] [--seconds S] [--threads N] [--batches 1,8,64] [--clock cpu|wall]
           [--out FILE]
Python 3 standard library only.  Exits 1 when a run fails.
"""

import argparse
import datetime
import json
import os
import platform
import random
import struct
import subprocess
import sys
import tempfile

from load_bench import write_safetensors  # this folder's one safetensors writer

T = 100
# (name, input size, blocks as (cell, hidden, layers, bidirectional))
CHAINS = [
    ("lstm256-lstm128", 64, [("lstm", 256, 1, False), ("lstm", 128, 1, False)]),
    ("bilstm128-lstm64", 40, [("lstm", 128, 1, True), ("lstm", 64, 1, False)]),
    ("lstm128-gru128x2", 64, [("lstm", 128, 1, False), ("gru", 128, 2, False)]),
    ("gru64-rnn32-lstm96", 32, [("gru", 64, 1, False), ("rnn_tanh", 32, 1, False),
                                ("lstm", 96, 1, False)]),
]
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def block_tensors(prefix, cell, inp, hidden, layers, bi, rng):
    k = 1.0 / hidden ** 0.5
    out = []
    for layer in range(layers):
        fan_in = inp if layer == 0 else hidden * (2 if bi else 1)
        for d in range(2 if bi else 1):
            sfx = "_l%d%s" % (layer, "_reverse" if d else "")
            g = GATES[cell] * hidden
            for name, shape in (("weight_ih", [g, fan_in]), ("weight_hh", [g, hidden]),
                                ("bias_ih", [g]), ("bias_hh", [g])):
                n = shape[0] * (shape[1] if len(shape) > 1 else 1)
                out.append((prefix + name + sfx, shape,
                            struct.pack("<%df" % n, *(rng.uniform(-k, k) for _ in range(n)))))
    return out


def write_model(d, cfg, tensors):
    os.makedirs(os.path.join(d, "1"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(d, "1", "model.safetensors"), tensors)


def make_models(root, name, inp, blocks, max_batch):
    """The chain, and each block alone under the same weights."""
    batching = {"max_batch_size": max_batch, "max_batch_steps": max_batch * T}
    rng = random.Random(name)
    chain_blocks, all_tensors, alone = [], [], []
    width = inp
    for k, (cell, hidden, layers, bi) in enumerate(blocks):
        prefix = "b%d." % k
        t = block_tensors(prefix, cell, width, hidden, layers, bi, rng)
        all_tensors += t
        chain_blocks.append({"cell": cell, "hidden_size": hidden, "num_layers": layers,
                             "bidirectional": bi, "prefix": prefix})
        d = os.path.join(root, "%s.block%d" % (name, k))
        write_model(d, {"cell": cell, "input_size": width, "hidden_size": hidden,
                        "num_layers": layers, "bidirectional": bi, "weights": {"prefix": prefix},
                        "max_sequence_length": T, "batching": batching}, t)
        alone.append(d)
        width = hidden * (2 if bi else 1)
    chain = os.path.join(root, name)
    write_model(chain, {"input_size": inp, "blocks": chain_blocks, "max_sequence_length": T,
                        "batching": batching}, all_tensors)
    return chain, alone


def median_s(bench, model, batch, threads, seconds, clock):
    cmd = [bench, "--model", model, "--batch", str(batch), "--steps", str(T), "--threads",
           str(threads), "--seconds", str(seconds), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return json.loads(r.stdout)["median_cpu_s" if clock == "cpu" else "median_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="1,8,64")
    ap.add_argument("--clock", choices=["cpu", "wall"],
                    help="what is timed: the process's CPU time per run (the default on one "
                         "thread, where a busy machine's preemptions do not count) or wall time "
                         "(the default on more)")
    ap.add_argument("--out")
    args = ap.parse_args()
    clock = args.clock or ("cpu" if args.threads == 1 else "wall")
    batches = [int(b) for b in args.batches.split(",")]
    lines = ["## A chain against its blocks run alone (CPU engine)", "",
             "- date: %s; machine: %s, %s, %d CPUs" % (
                 datetime.date.today().isoformat(), platform.node(), platform.processor() or
                 platform.machine(), os.cpu_count() or 0),
             "- command: python3 tests/bench/chain_bench.py %s" % " ".join(sys.argv[1:]),
             "- T = %d, equal lengths, %d thread(s); %s time; best of %d alternated rounds of "
             "medians" % (T, args.threads, clock, args.rounds), "",
             "| chain | batch | chain ms | blocks alone, sum ms | chain / sum |",
             "|---|---:|---:|---:|---:|"]
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="rnnd-chain-bench-") as root:
        for name, inp, blocks in CHAINS:
            chain, alone = make_models(root, name, inp, blocks, max(batches))
            for B in batches:
                best_c, best_a = float("inf"), [float("inf")] * len(alone)
                for _ in range(args.rounds):
                    best_c = min(best_c, median_s(args.bench, chain, B, args.threads, args.seconds,
                                                    clock))
                    for i, m in enumerate(alone):
                        best_a[i] = min(best_a[i], median_s(args.bench, m, B, args.threads,
                                                            args.seconds, clock))
                ratio = best_c / sum(best_a)
                worst = max(worst, ratio)
                lines.append("| %s | %d | %.3f | %.3f | %.3f |" % (name, B, best_c * 1e3,
                                                                   sum(best_a) * 1e3, ratio))
                print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", "Worst ratio: %.3f (target <= 1.05)." % worst]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
