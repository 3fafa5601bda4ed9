#!/usr/bin/env python3
"""rnnd's CPU engine against ONNX Runtime and PyTorch over a matrix of shapes (DESIGN.md §9).

Each row of MATRIX is a model (cell, input, hidden, layers, directions, T), a
batch size and a thread count.  For each model the script builds the torch
module (nn.LSTM / nn.GRU / nn.RNN, batch_first=True, eval mode, default
initialisation, a seed per model), saves it as an rnnd model (config.json +
1/model.safetensors, the state_dict under "rnn.") and exports it with
torch.onnx.export (opset 17, the batch axis dynamic).  A GRU with the reset
before the recurrent product ("gru_rbr": Keras reset_after=False, which torch
does not have) is the same export with the ONNX GRU's linear_before_reset set
to 0, and the rnnd model's gru_linear_before_reset false; its torch column is
empty and its answers are checked against ONNX Runtime's.

For every row, with the machine quiet (as engine_vs_torch.py waits for it):
  1. the answers: one input [B, T, input] to a file, rnnd-engine-bench --input
     --dump on it, and y from rnnd, from ORT and from torch on the same input
     must agree (max abs error <= 1e-4), or the row is not timed;
  2. the timings, alternated --rounds times (2 by default): rnnd-engine-bench
     --json --threads N (OPENBLAS_NUM_THREADS=N), then ORT (an InferenceSession
     with intra_op_num_threads N, inter_op_num_threads 1, sequential execution,
     all graph optimisations), then torch (torch.set_num_threads(N),
     inference_mode): each 3 warm-up runs, then runs until --seconds and 5 runs,
     median per batch; each keeps its fastest median.  The clock (--clock):
     on one-thread rows the process's CPU time by default (rnnd-engine-bench's
     median_cpu_s; time.process_time() for ORT and torch, whose one-thread
     runs stay on the calling thread), which the preemptions of a busy machine
     do not inflate; on rows of more threads the wall clock, since CPU time
     would count a waiting thread's spinning.
The FMA peak is measured with rnnd-fma-peak (built beside rnnd-engine-bench)
for each thread count before the rows and again after them, the best of 3
runs each time, and the higher kept (on a shared host a neighbour's burst
once read 102 GFLOP/s for a core of 171, and row 2 "108%"): the share of peak of a row is its
useful fp32 flops (2 per multiply-add of x W_ih^T and h W_hh^T, gates not
counted) per second over that peak.

Prints a markdown report to stdout (and --out FILE): machine, versions, date,
command, one row per configuration with seq/s of each engine, rnnd/ORT,
rnnd/torch, rnnd's and ORT's share of peak, and at the end the geometric mean
of rnnd/ORT and the rows where rnnd is below the faster of the other two.
Exits 1 if an answer was wrong.

Usage:
    .venv-bench/bin/python tests/bench/engine_vs_ort.py --bench BUILD/tests/bench/rnnd-engine-bench
        [--quick] [--seconds S] [--rounds R] [--only I,J,...] [--wait S] [--out FILE]
        [--json FILE] [--clock auto|cpu|wall]
Needs torch, onnx, onnxruntime, numpy and safetensors (run.sh's .venv-bench).
"""

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
import zlib

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_vs_torch import (ATTEMPTS, MIN_RUNS, QUIET_CORES, WARMUP_RUNS, OtherLoad,  # noqa: E402
                             cpu_flags, cpu_model, log, revision, row_clock, run_bench,
                             time_fn, wait_quiet)

TOLERANCE = 1e-4

# (cell, input, hidden, layers, bidirectional, T), batch, threads.
# cell: lstm, gru (reset after, PyTorch's), gru_rbr (reset before), rnn_tanh, rnn_relu.
MATRIX = [
    (("gru", 40, 512, 1, False, 200), 8, 1),
    (("gru", 40, 512, 1, False, 200), 64, 1),
    (("gru", 40, 512, 1, False, 200), 64, 2),
    (("gru", 64, 96, 3, False, 40), 8, 1),
    (("gru", 64, 96, 3, False, 40), 64, 1),
    (("lstm", 300, 128, 1, True, 50), 1, 1),
    (("lstm", 300, 128, 1, True, 50), 1, 2),
    (("lstm", 128, 256, 2, False, 100), 1, 1),
    (("lstm", 128, 256, 2, False, 100), 256, 2),
    (("lstm", 8, 64, 1, False, 28), 1, 2),
    (("lstm", 8, 64, 1, False, 28), 64, 1),
    (("gru_rbr", 64, 256, 1, False, 100), 8, 1),
    (("gru", 80, 256, 2, True, 100), 1, 2),
    (("rnn_tanh", 32, 32, 1, False, 500), 256, 2),
    (("rnn_relu", 128, 1024, 2, True, 20), 8, 1),
    (("lstm", 256, 1024, 1, False, 1), 256, 2),
]


def cell_module(cell):
    if cell == "lstm":
        return nn.LSTM, {}
    if cell in ("gru", "gru_rbr"):
        return nn.GRU, {}
    return nn.RNN, {"nonlinearity": "relu" if cell == "rnn_relu" else "tanh"}


def model_name(spec):
    cell, inp, hid, layers, bi, steps = spec
    return f"{cell}_i{inp}_h{hid}_l{layers}_{'bi' if bi else 'uni'}_t{steps}"


def describe(spec):
    cell, inp, hid, layers, bi, steps = spec
    kind = {"lstm": "LSTM", "gru": "GRU", "gru_rbr": "GRU reset-before",
            "rnn_tanh": "RNN tanh", "rnn_relu": "RNN relu"}[cell]
    return (f"{'bi ' if bi else ''}{kind} in {inp}, hidden {hid}"
            f"{f', {layers} layers' if layers > 1 else ''}, T {steps}")


def build_module(spec):
    cell, inp, hid, layers, bi, _ = spec
    torch.manual_seed(zlib.crc32(model_name(spec).encode()))
    cls, extra = cell_module(cell)
    return cls(inp, hid, layers, batch_first=True, bidirectional=bi, **extra).eval()


def save_rnnd(module, spec, repo, max_batch):
    """Writes the rnnd model <repo>/<name>/; returns its directory."""
    cell, inp, hid, layers, bi, steps = spec
    mdir = os.path.join(repo, model_name(spec))
    os.makedirs(os.path.join(mdir, "1"))
    cfg = {
        "cell": "gru" if cell == "gru_rbr" else cell,
        "input_size": inp,
        "hidden_size": hid,
        "num_layers": layers,
        "bidirectional": bi,
        "weights": {"prefix": "rnn."},
        "max_sequence_length": max(steps, 1),
        "batching": {"max_batch_size": max_batch, "max_batch_steps": max_batch * steps},
    }
    if cell == "gru_rbr":
        cfg["gru_linear_before_reset"] = False
    with open(os.path.join(mdir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    tensors = {"rnn." + k: v.detach().contiguous() for k, v in module.state_dict().items()}
    save_file(tensors, os.path.join(mdir, "1", "model.safetensors"))
    return mdir


def export_onnx(module, spec, path):
    """torch.onnx.export with a dynamic batch; the reset moved before R_n for gru_rbr."""
    _, inp, _, _, _, steps = spec
    x = torch.zeros(2, steps, inp)
    with warnings.catch_warnings():  # the legacy exporter's notices, about what is done here
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y", "h_n"],
                          dynamic_axes={"x": {0: "B"}, "y": {0: "B"}, "h_n": {1: "B"}},
                          opset_version=17, dynamo=False)
    model = onnx.load(path)
    ops = [n for n in model.graph.node if n.op_type in ("LSTM", "GRU", "RNN")]
    if not ops:
        sys.exit(f"engine_vs_ort: the export of {model_name(spec)} has no RNN operator "
                 f"(it was unrolled): ORT would not be timed on its RNN kernel")
    if spec[0] == "gru_rbr":
        for n in ops:
            for a in n.attribute:
                if a.name == "linear_before_reset":
                    a.i = 0
        onnx.save(model, path)
    return [n.op_type for n in ops]


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def make_input(spec, batch):
    rng = np.random.default_rng(zlib.crc32(f"{model_name(spec)}/{batch}".encode()))
    return rng.uniform(-1.0, 1.0, (batch, spec[5], spec[1])).astype(np.float32)


def fma_peak(bench, threads, wait_s):
    """The best of 3 runs of rnnd-fma-peak, each after the machine went quiet."""
    tool = os.path.join(os.path.dirname(bench), "rnnd-fma-peak")
    best = None
    for _ in range(3):
        wait_quiet(wait_s, QUIET_CORES)
        p = subprocess.run([tool, "--threads", str(threads), "--json"], capture_output=True,
                           text=True, check=True)
        got = json.loads(p.stdout)
        if best is None or got["gflops"] > best["gflops"]:
            best = got
    return best


def check(bench, module, sess, mdir, spec, batch, threads, tmp):
    """Max abs error of rnnd's y and of ORT's y against the reference (torch, or ORT)."""
    x = make_input(spec, batch)
    xfile, yfile = os.path.join(tmp, "x.f32"), os.path.join(tmp, "y.f32")
    x.tofile(xfile)
    run_bench(bench, mdir, batch, threads, 0, ("--input", xfile, "--dump", yfile), spec[5])
    got = np.fromfile(yfile, dtype=np.float32)
    y_ort = sess.run(["y"], {"x": x})[0]
    # ONNX's Y is [T, dirs, B, H] under the export's batch_first transposes: back to [B, T, dirs*H].
    if y_ort.shape[:2] != (batch, spec[5]):
        y_ort = np.transpose(y_ort, (2, 0, 1, 3))
    y_ort = y_ort.reshape(batch, spec[5], -1)
    if spec[0] == "gru_rbr":
        want = y_ort
        err_ort = 0.0
    else:
        with torch.inference_mode():
            want = module(torch.from_numpy(x))[0].numpy()
        err_ort = float(np.max(np.abs(y_ort - want)))
    if got.size != want.size:
        sys.exit(f"engine_vs_ort: {yfile}: {got.size} floats, expected {want.size}")
    return float(np.max(np.abs(got.reshape(want.shape) - want))), err_ort


def measure(bench, module, sess, mdir, spec, batch, threads, seconds, rounds, wait_s, clock):
    """rnnd, ORT and torch alternately, rounds times; each side's fastest median on clock."""
    x_np = make_input(spec, batch)
    x_t = torch.from_numpy(x_np)
    torch.set_num_threads(threads)

    def torch_run():
        with torch.inference_mode():
            module(x_t)

    best = {"rnnd": math.inf, "ort": math.inf, "torch": math.inf}
    worst_load = 0.0
    algo = ""
    for _ in range(rounds):
        for attempt in range(ATTEMPTS):
            wait_quiet(wait_s, QUIET_CORES)
            got = {}
            with OtherLoad() as lr:
                r = run_bench(bench, mdir, batch, threads, seconds, steps=spec[5])
                got["rnnd"] = r["median_cpu_s" if clock == "cpu" else "median_s"]
                algo = r["algo"]
                time.sleep(0.2)  # let one engine's spinning threads settle before the next
                got["ort"] = time_fn(lambda: sess.run(["y"], {"x": x_np}), seconds, clock)[0]
                time.sleep(0.2)
                if spec[0] != "gru_rbr":
                    got["torch"] = time_fn(torch_run, seconds, clock)[0]
            if lr.cores < QUIET_CORES or attempt == ATTEMPTS - 1:
                worst_load = max(worst_load, lr.cores)
                for k, v in got.items():
                    best[k] = min(best[k], v)
                break
            log(f"  other processes used {lr.cores:.2f} cores meanwhile; again")
    return best, worst_load, algo


def useful_flops(spec, batch):
    """2 x the multiply-adds of x W_ih^T and h W_hh^T over the batch."""
    cell, inp, hid, layers, bi, steps = spec
    gates = {"lstm": 4, "gru": 3, "gru_rbr": 3}.get(cell, 1)
    dirs = 2 if bi else 1
    total = 0
    for layer in range(layers):
        k = inp if layer == 0 else dirs * hid
        total += dirs * gates * hid * (k + hid)
    return 2.0 * total * batch * steps


def fmt(v):
    return "-" if v is None else (f"{v:,.0f}" if v >= 100 else f"{v:,.1f}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="path to rnnd-engine-bench")
    ap.add_argument("--quick", action="store_true", help="0.25 s per measurement, 1 round")
    ap.add_argument("--seconds", type=float, help="minimum timed seconds per measurement (1)")
    ap.add_argument("--rounds", type=int, help="alternated rounds per row, fastest kept (2)")
    ap.add_argument("--only", help="comma-separated row numbers of the matrix (1-based)")
    ap.add_argument("--wait", type=float,
                    help="seconds to wait for a quiet machine before each measurement "
                         "(60; 10 with --quick)")
    ap.add_argument("--out", help="also write the markdown report to this file")
    ap.add_argument("--json", help="also write the rows as JSON to this file (plots.py draws "
                                   "engine_vs_ort.png from it)")
    ap.add_argument("--clock", choices=["auto", "cpu", "wall"], default="auto",
                    help="what a run's time is: the process's CPU time, the wall clock, or "
                         "auto: CPU time on one-thread rows, wall on the others (auto)")
    args = ap.parse_args()
    args.seconds = args.seconds if args.seconds is not None else (0.25 if args.quick else 1.0)
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 2)
    if args.rounds < 1 or args.seconds < 0:
        ap.error("--rounds must be at least 1 and --seconds not negative")
    rows = list(range(len(MATRIX)))
    if args.only:
        try:
            rows = [int(v) - 1 for v in args.only.split(",")]
        except ValueError:
            ap.error("--only takes comma-separated row numbers")
        if any(i < 0 or i >= len(MATRIX) for i in rows):
            ap.error(f"--only: rows are 1..{len(MATRIX)}")
    args.rows = rows
    return args


def json_rows(args, results, peaks):
    """The rows that were timed, for plots.py: seq/s of each engine and rnnd's ratios."""
    rows = []
    for i, spec, batch, threads, res in results:
        if res is None:
            continue
        best, load, algo, _ = res
        sps = {k: (batch / v if v < math.inf else None) for k, v in best.items()}
        rows.append({"row": i + 1, "model": describe(spec), "batch": batch, "threads": threads,
                     "seq_s": sps, "rnnd_vs_ort": sps["rnnd"] / sps["ort"],
                     "rnnd_vs_torch": sps["rnnd"] / sps["torch"] if sps["torch"] else None,
                     "rnnd_peak": useful_flops(spec, batch) / best["rnnd"] /
                                  (peaks[threads]["gflops"] * 1e9),
                     "kernel": algo, "load": load, "clock": row_clock(args, threads)})
    return rows


def report(args, results, peaks, command):
    now = datetime.datetime.now(datetime.timezone.utc)
    out = [f"- Machine: {cpu_model()}, {os.cpu_count()} logical CPUs "
           f"({len(os.sched_getaffinity(0))} usable), {cpu_flags()}; "
           f"{platform.system()} {platform.release()}",
           "- FMA peak (rnnd-fma-peak, " + ", ".join(
               f"{t} thread{'s' if t > 1 else ''}: {p['gflops']:.1f} GFLOP/s"
               for t, p in sorted(peaks.items())) +
           f", {next(iter(peaks.values()))['unit']})",
           f"- onnxruntime {ort.__version__}, PyTorch {torch.__version__}; rnnd {revision()}",
           f"- Date: {now.strftime('%Y-%m-%d %H:%M UTC')}",
           f"- Command: `{command}`",
           f"- Per row: answers checked first (max abs error <= {TOLERANCE:g} against "
           f"torch, or ORT for the reset-before GRU); then rnnd, ORT and torch timed in "
           f"turn {args.rounds} time(s), median of >= {MIN_RUNS} runs and >= "
           f"{args.seconds:g} s after {WARMUP_RUNS} warm-ups, fastest median kept; clock: "
           + {"auto": "CPU time of the process on one-thread rows, wall on the others",
              "cpu": "CPU time of the process", "wall": "wall"}[args.clock] + "; "
           f"peak % = useful flops/s over the FMA peak of that many threads",
           "",
           "| # | model | B | threads | rnnd seq/s | ORT seq/s | torch seq/s | rnnd/ORT "
           "| rnnd/torch | rnnd % peak | ORT % peak | rnnd kernel | max err | load |",
           "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
           "| --- | ---: | ---: |"]
    ratios, behind = [], []
    for i, spec, batch, threads, res in results:
        if res is None:
            out.append(f"| {i + 1} | {describe(spec)} | {batch} | {threads} | WRONG ANSWER "
                       "| | | | | | | | | |")
            continue
        best, load, algo, err = res
        sps = {k: (batch / v if v < math.inf else None) for k, v in best.items()}
        fl = useful_flops(spec, batch)
        peak = peaks[threads]["gflops"] * 1e9
        r_ort = sps["rnnd"] / sps["ort"]
        r_torch = sps["rnnd"] / sps["torch"] if sps["torch"] else None
        ratios.append(r_ort)
        rival = max(v for k, v in sps.items() if k != "rnnd" and v)
        if sps["rnnd"] < rival:
            behind.append(f"#{i + 1} ({sps['rnnd'] / rival:.2f}x)")
        out.append(f"| {i + 1} | {describe(spec)} | {batch} | {threads} | {fmt(sps['rnnd'])} "
                   f"| {fmt(sps['ort'])} | {fmt(sps['torch'])} | {r_ort:.2f} | "
                   f"{'-' if r_torch is None else f'{r_torch:.2f}'} | "
                   f"{100 * fl / best['rnnd'] / peak:.0f}% | "
                   f"{100 * fl / best['ort'] / peak:.0f}% | {algo} | {err:.1e} | {load:.2f} |")
    out.append("")
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        out.append(f"Geometric mean of rnnd/ORT over {len(ratios)} rows: {gm:.2f}x. "
                   f"Rows where rnnd is below the faster of ORT and torch: "
                   f"{', '.join(behind) if behind else 'none'}.")
        out.append("")
    out.append(f"load: CPU cores used by other processes while the row was measured (the "
               f"worst round kept); {QUIET_CORES:g} or more means a busy machine even after "
               f"{ATTEMPTS} tries.")
    return "\n".join(out) + "\n"


def main():
    args = parse_args()
    bench = os.path.abspath(args.bench)
    if not os.access(bench, os.X_OK):
        sys.exit(f"engine_vs_ort: {bench} is not an executable (build it first)")
    wait_s = args.wait if args.wait is not None else (10 if args.quick else 60)
    peaks = {}
    for t in sorted({MATRIX[i][2] for i in args.rows}):
        peaks[t] = fma_peak(bench, t, wait_s)
        log(f"FMA peak, {t} thread(s): {peaks[t]['gflops']:.1f} GFLOP/s ({peaks[t]['unit']})")
    command = shlex.join([sys.executable] + sys.argv)
    results, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="rnnd-ort-") as tmp:
        made = {}
        for i in args.rows:
            spec, batch, threads = MATRIX[i]
            if spec not in made:
                module = build_module(spec)
                max_batch = max(b for s, b, _ in MATRIX if s == spec)
                mdir = save_rnnd(module, spec, os.path.join(tmp, "models"), max_batch)
                path = os.path.join(tmp, model_name(spec) + ".onnx")
                export_onnx(module, spec, path)
                made[spec] = (module, mdir, path)
            module, mdir, path = made[spec]
            sess = ort_session(path, threads)
            torch.set_num_threads(threads)
            err, err_ort = check(bench, module, sess, mdir, spec, batch, threads, tmp)
            if not (err <= TOLERANCE and err_ort <= TOLERANCE):
                log(f"#{i + 1} {describe(spec)} B={batch} threads={threads}: WRONG ANSWER "
                    f"(rnnd {err:.3g}, ORT {err_ort:.3g}); not timed")
                results.append((i, spec, batch, threads, None))
                failed += 1
                continue
            best, load, algo = measure(bench, module, sess, mdir, spec, batch, threads,
                                       args.seconds, args.rounds, wait_s,
                                       row_clock(args, threads))
            log(f"#{i + 1} {describe(spec)} B={batch} threads={threads}: "
                + "  ".join(f"{k} {v * 1e3:.3f} ms" for k, v in best.items() if v < math.inf)
                + f"  rnnd/ORT {best['ort'] / best['rnnd']:.2f}  err {err:.1e}  load {load:.2f}")
            results.append((i, spec, batch, threads, (best, load, algo, err)))
            del sess
    for t in peaks:  # again: a neighbour's burst during the first reading lowered it
        again = fma_peak(bench, t, wait_s)
        log(f"FMA peak again, {t} thread(s): {again['gflops']:.1f} GFLOP/s")
        if again["gflops"] > peaks[t]["gflops"]:
            peaks[t] = again
    text = report(args, results, peaks, command)
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"header": text.splitlines()[:5], "rows": json_rows(args, results, peaks)}, f,
                      indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
