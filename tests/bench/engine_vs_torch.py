#!/usr/bin/env python3
"""rnnd's CPU engine against PyTorch on the same shapes (DESIGN.md §9).

For each cell (LSTM, GRU) with input 128, hidden 256, 2 layers and T = 100
steps, this builds the torch module (nn.LSTM / nn.GRU, batch_first=True, eval
mode), saves it once as an rnnd model (config.json + 1/model.safetensors, the
state_dict under the prefix "rnn.") into a temporary repository, and then for
every thread count (1, 2) and batch size (1, 8, 32, 128):

  1. checks the answer: writes one input [B, T, 128] to a file, runs
     rnnd-engine-bench --input FILE --dump FILE on it and compares rnnd's y
     with torch's y on the same input (max abs error <= 1e-4), so a wrong
     answer is never benchmarked;
  2. times rnnd: rnnd-engine-bench --json --threads N with OPENBLAS_NUM_THREADS=N;
  3. times torch: torch.set_num_threads(N), torch.inference_mode(), the same
     input shape, the same method as the C program (3 warm-up runs, then runs
     until at least --seconds and 5 runs, median time per batch).
Steps 2 and 3 alternate --rounds times (2 by default) and each side keeps its
fastest median: noise on a small machine only ever slows a run down.  One-thread
rows are timed on the process's CPU time (rnnd-engine-bench's median_cpu_s,
time.process_time() around torch's runs), which other processes on a shared
machine cannot inflate; two-thread rows on the wall clock (--clock changes it).

The machine may be shared: before each pair of measurements the script waits
(up to a minute) until other processes use under 0.1 of a core, measures how
much CPU they used meanwhile (from /proc/stat, less this process and its
children), measures again (3 tries at most) when that was more, and reports
it per row, so a number taken on a busy machine is visible as such.

It prints a markdown report (machine, date, command, one table row per
configuration) to stdout, and with --out FILE also writes it to FILE.
Progress goes to stderr.  Exits 1 if any check failed.

Usage (what `make bench` runs, through tests/bench/run.sh):
    python3 tests/bench/engine_vs_torch.py --bench BUILD/tests/bench/rnnd-engine-bench
        [--quick] [--seconds S] [--rounds R] [--out FILE]
        [--cells lstm,gru] [--batches 1,8,32,128] [--threads 1,2] [--clock auto|cpu|wall]
Needs torch, numpy and safetensors.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np
import torch
import torch.nn as nn
from safetensors.torch import save_file

CELLS = ("lstm", "gru")
INPUT_SIZE = 128
HIDDEN_SIZE = 256
NUM_LAYERS = 2
STEPS = 100
BATCHES = (1, 8, 32, 128)
THREADS = (1, 2)
TOLERANCE = 1e-4
QUIET_CORES = 0.1  # other processes' CPU use (cores) that counts as a quiet machine
ATTEMPTS = 3       # measurements of one configuration at most, while the machine is busy
WARMUP_RUNS = 3  # as rnnd-engine-bench
MIN_RUNS = 5     # as rnnd-engine-bench


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_jiffies():
    """Busy (everything but idle and iowait, steal included) and total jiffies, all CPUs."""
    with open("/proc/stat", encoding="ascii") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = sum(v) - v[3] - v[4]
    return busy, sum(v)


class OtherLoad:
    """
    CPU used by everything but this process and its children while a
    measurement runs, in cores: a busy machine (another build, another
    benchmark) skews the numbers, so the report shows it.
    """

    def __init__(self):
        self.hz = os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        t = os.times()
        self.own = t.user + t.system + t.children_user + t.children_system
        self.busy, _ = cpu_jiffies()
        self.wall = time.monotonic()
        return self

    def __exit__(self, *exc):
        t = os.times()
        own = t.user + t.system + t.children_user + t.children_system - self.own
        busy = (cpu_jiffies()[0] - self.busy) / self.hz
        wall = time.monotonic() - self.wall
        self.cores = max(0.0, busy - own) / wall if wall > 0 else 0.0
        return False


def wait_quiet(limit_s, threshold):
    """Waits (at most limit_s) until other processes use under threshold cores."""
    deadline = time.monotonic() + limit_s
    while True:
        with OtherLoad() as o:
            time.sleep(0.5)
        if o.cores < threshold or time.monotonic() >= deadline:
            return o.cores
        log(f"  waiting: other processes use {o.cores:.2f} cores")
        time.sleep(2.0)


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags():
    """The vector extensions that matter for fp32 GEMM, from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    want = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")
                    return " ".join(x for x in want if x in flags)
    except OSError:
        pass
    return ""


def revision():
    """The checkout's commit, and whether engine/ or proto/ differ from it (no git writes)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    git = ["git", "--no-optional-locks", "-C", root]
    try:
        rev = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(git + ["diff", "--quiet", "HEAD", "--", "engine", "proto"],
                               capture_output=True, check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown revision"
    return rev + (" with uncommitted changes in engine/ or proto/" if dirty else "")


def build_module(cell):
    """The torch module for a cell, with torch's default initialisation."""
    torch.manual_seed(zlib.crc32(cell.encode()))
    cls = nn.LSTM if cell == "lstm" else nn.GRU
    return cls(INPUT_SIZE, HIDDEN_SIZE, NUM_LAYERS, batch_first=True).eval()


def save_model(module, cell, repo):
    """Writes <repo>/<name>/config.json and 1/model.safetensors; returns the model dir."""
    name = "bench_" + cell
    mdir = os.path.join(repo, name)
    os.makedirs(os.path.join(mdir, "1"))
    cfg = {
        "cell": cell,
        "input_size": INPUT_SIZE,
        "hidden_size": HIDDEN_SIZE,
        "num_layers": NUM_LAYERS,
        "weights": {"prefix": "rnn."},
        "batching": {"max_batch_size": 256},
    }
    with open(os.path.join(mdir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    tensors = {"rnn." + k: v.detach().contiguous() for k, v in module.state_dict().items()}
    save_file(tensors, os.path.join(mdir, "1", "model.safetensors"))
    return mdir


def make_input(cell, batch):
    """A deterministic input [B, T, input] in U(-1, 1), float32."""
    rng = np.random.default_rng(zlib.crc32(f"{cell}/{batch}".encode()))
    return rng.uniform(-1.0, 1.0, (batch, STEPS, INPUT_SIZE)).astype(np.float32)


def run_bench(bench, mdir, batch, threads, seconds, extra=(), steps=STEPS):
    """Runs rnnd-engine-bench --json and returns its JSON object."""
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    cmd = [bench, "--model", mdir, "--batch", str(batch), "--steps", str(steps),
           "--threads", str(threads), "--seconds", str(seconds), "--json", *extra]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {shlex.join(cmd)} failed ({p.returncode}):\n"
                 f"{p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def check(bench, module, mdir, cell, batch, threads, tmp):
    """rnnd's y against torch's y on the same input; returns the max abs error."""
    x = make_input(cell, batch)
    xfile = os.path.join(tmp, "x.f32")
    yfile = os.path.join(tmp, "y.f32")
    x.tofile(xfile)
    run_bench(bench, mdir, batch, threads, 0, ("--input", xfile, "--dump", yfile))
    got = np.fromfile(yfile, dtype=np.float32)
    with torch.inference_mode():
        want = module(torch.from_numpy(x))[0].numpy()
    if got.size != want.size:
        sys.exit(f"engine_vs_torch: {yfile}: {got.size} floats, expected {want.size}")
    return float(np.max(np.abs(got.reshape(want.shape) - want)))


def time_fn(fn, seconds, clock):
    """(median seconds per call on clock, "wall" or "cpu"; calls timed), as
    rnnd-engine-bench times run(): 3 warm-up calls, then at least 5 calls and seconds."""
    tick = time.process_time if clock == "cpu" else time.monotonic
    times = []
    for _ in range(WARMUP_RUNS):
        fn()
    start = time.monotonic()
    while len(times) < MIN_RUNS or time.monotonic() - start < seconds:
        t0 = tick()
        fn()
        times.append(tick() - t0)
    return statistics.median(times), len(times)


def time_torch(module, batch, seconds, clock):
    """time_fn() of the module on a batch of batch sequences."""
    x = torch.from_numpy(make_input("torch", batch))
    with torch.inference_mode():
        return time_fn(lambda: module(x), seconds, clock)


def row_clock(args, threads):
    """The clock a row is timed on: --clock, or by default CPU time on one thread."""
    if args.clock != "auto":
        return args.clock
    return "cpu" if threads == 1 else "wall"


def measure(bench, module, mdir, batch, threads, seconds, rounds, wait_s, clock):
    """
    Times rnnd and torch alternately, rounds times with the machine quiet
    (a pair measured while other processes used QUIET_CORES or more is taken
    again, ATTEMPTS - 1 times at most per round).  Background load only ever
    slows a run down, so each side keeps its fastest median.  Returns rnnd's
    JSON object, torch's median and run count, and the worst other load in
    the pairs kept.
    """
    pairs = []
    for _ in range(rounds):
        tries = []
        for _ in range(ATTEMPTS):
            # Also lets torch's OpenMP workers go idle before rnnd runs.
            wait_quiet(wait_s, QUIET_CORES)
            with OtherLoad() as lr:
                r = run_bench(bench, mdir, batch, threads, seconds)
            with OtherLoad() as lt:
                t_med, t_runs = time_torch(module, batch, seconds, clock)
            tries.append((max(lr.cores, lt.cores), r, t_med, t_runs))
            if tries[-1][0] < QUIET_CORES:
                break
            log(f"  other processes used {tries[-1][0]:.2f} cores meanwhile; again")
        pairs.append(min(tries, key=lambda x: x[0]))
    key = "median_cpu_s" if clock == "cpu" else "median_s"
    r = dict(min(pairs, key=lambda x: x[1][key])[1])
    r["median"] = r[key]
    t_med, t_runs = min((p[2], p[3]) for p in pairs)
    return r, t_med, t_runs, max(p[0] for p in pairs)


def fmt(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def parse_args():
    """The command line, with defaults resolved: args gains seconds, rounds, cells,
    batches, thread_counts, wait_s and bench (an absolute path)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="path to rnnd-engine-bench")
    ap.add_argument("--quick", action="store_true",
                    help="a short run: 0.25 s per measurement instead of 2 s")
    ap.add_argument("--seconds", type=float, help="minimum timed seconds per measurement")
    ap.add_argument("--rounds", type=int,
                    help="measurements of each side per configuration, fastest kept "
                         "(2; 1 with --quick)")
    ap.add_argument("--out", help="also write the markdown report to this file")
    ap.add_argument("--json", help="also write the results as JSON to this file (for "
                    "tests/bench/plots.py)")
    ap.add_argument("--cells", default=",".join(CELLS),
                    help="comma-separated cells to run (default: %(default)s)")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)),
                    help="comma-separated batch sizes (default: %(default)s)")
    ap.add_argument("--threads", default=",".join(map(str, THREADS)),
                    help="comma-separated thread counts (default: %(default)s)")
    ap.add_argument("--clock", choices=("auto", "cpu", "wall"), default="auto",
                    help="what times a run: the process's CPU time, the wall clock, or "
                         "auto: CPU time on one thread, the wall clock on more")
    args = ap.parse_args()
    args.seconds = args.seconds if args.seconds is not None else (0.25 if args.quick else 2.0)
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 2)
    if args.rounds < 1 or args.seconds < 0:
        ap.error("--rounds must be at least 1 and --seconds not negative")
    args.cells = [c for c in args.cells.split(",") if c]
    if not args.cells or any(c not in CELLS for c in args.cells):
        ap.error(f"--cells takes a list of {', '.join(CELLS)}")
    try:
        args.batches = [int(v) for v in args.batches.split(",")]
        args.thread_counts = [int(v) for v in args.threads.split(",")]
    except ValueError:
        ap.error("--batches and --threads take comma-separated integers")
    if min(args.batches + args.thread_counts) < 1:
        ap.error("--batches and --threads must be at least 1")
    args.wait_s = 10 if args.quick else 60
    args.bench = os.path.abspath(args.bench)
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"engine_vs_torch: {args.bench} is not an executable (build it first)")
    return args


def run_configuration(args, module, mdir, cell, threads, batch, tmp):
    """Checks then times one configuration: (its table row, rnnd's JSON object or None
    when the answer was wrong)."""
    err = check(args.bench, module, mdir, cell, batch, threads, tmp)
    if not err <= TOLERANCE:
        log(f"{cell} threads={threads} batch={batch}: WRONG ANSWER, "
            f"max abs error {err:.3g} > {TOLERANCE:g}; not timed")
        return (cell, threads, batch, None, None, None, err, None, None), None
    clock = row_clock(args, threads)
    r, t_med, t_runs, load = measure(args.bench, module, mdir, batch, threads,
                                     args.seconds, args.rounds, args.wait_s, clock)
    t_sps, r_sps = batch / t_med, batch / r["median"]
    log(f"{cell} threads={threads} batch={batch:3d}: max|dy| {err:.2e}  "
        f"torch {t_med * 1e3:8.3f} ms ({t_runs} runs)  "
        f"rnnd {r['median'] * 1e3:8.3f} ms ({r['runs']} runs), {clock} time  "
        f"ratio {r_sps / t_sps:.2f}  other load {load:.2f}")
    return (cell, threads, batch, t_sps, r_sps, r_sps * STEPS, err, load, clock), r


def run_all(args):
    """Every configuration: (the table rows, how many gave a wrong answer, the BLAS rnnd
    ran on or None)."""
    rows = []
    failed = 0
    blas = None
    with tempfile.TemporaryDirectory(prefix="rnnd-bench-") as tmp:
        repo = os.path.join(tmp, "models")
        for cell in args.cells:
            module = build_module(cell)
            mdir = save_model(module, cell, repo)
            for threads in args.thread_counts:
                torch.set_num_threads(threads)
                for batch in args.batches:
                    row, r = run_configuration(args, module, mdir, cell, threads, batch, tmp)
                    rows.append(row)
                    if r is None:
                        failed += 1
                    else:
                        blas = r["openblas_config"]
    return rows, failed, blas


def report(args, rows, blas):
    """The markdown report's lines: the header (machine, versions, date, command, model),
    then the table and its note."""
    command = shlex.join([sys.executable] + sys.argv)
    via = os.environ.get("RNND_BENCH_COMMAND")  # set by run.sh
    now = datetime.datetime.now(datetime.timezone.utc)
    out = []
    out.append(f"- Machine: {cpu_model()}, {os.cpu_count()} logical CPUs "
               f"({len(os.sched_getaffinity(0))} usable), {cpu_flags()}; "
               f"{platform.system()} {platform.release()}")
    out.append(f"- PyTorch {torch.__version__}; oneDNN (mkldnn) available: "
               f"{torch.backends.mkldnn.is_available()}; MKL available: "
               f"{torch.backends.mkl.is_available()}")
    out.append(f"- rnnd {revision()}; CPU engine on {blas or 'no run'}")
    out.append(f"- Date: {now.strftime('%Y-%m-%d %H:%M UTC')}")
    out.append(f"- Command: `{via}`, which runs `{command}`" if via else
               f"- Command: `{command}`")
    out.append(f"- Model: input {INPUT_SIZE}, hidden {HIDDEN_SIZE}, {NUM_LAYERS} layers, "
               f"unidirectional, T = {STEPS}, fp32; outputs y and h_n (and c_n); "
               f"time per batch = median of >= {MIN_RUNS} runs and >= {args.seconds:g} s after "
               f"{WARMUP_RUNS} warm-up runs, on the clock of the row's last column (cpu: the "
               f"process's CPU time), rnnd and torch measured alternately "
               f"{args.rounds} time(s), fastest median kept for each; rnnd's y checked against "
               f"torch's (max abs error <= {TOLERANCE:g}) before timing")
    out.append("")
    out.append("| cell | threads | batch | torch seq/s | rnnd seq/s | rnnd/torch "
               "| rnnd steps/s | max abs err | other load | clock |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for cell, threads, batch, t_sps, r_sps, r_steps, err, load, clock in rows:
        if t_sps is None:
            out.append(f"| {cell} | {threads} | {batch} | - | - | WRONG | - | {err:.2e} | - | - |")
            continue
        out.append(f"| {cell} | {threads} | {batch} | {fmt(t_sps)} | {fmt(r_sps)} | "
                   f"{r_sps / t_sps:.2f}x | {fmt(r_steps)} | {err:.1e} | {load:.2f} | {clock} |")
    out.append("")
    out.append(f"other load: CPU cores used by other processes while the row was measured "
               f"(the worst round); a row at {QUIET_CORES:g} or above was measured on a busy "
               f"machine even after {ATTEMPTS} tries.")
    return out


def main():
    args = parse_args()
    rows, failed, blas = run_all(args)
    out = report(args, rows, blas)
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    if args.json:
        keys = ("cell", "threads", "batch", "torch_seq_s", "rnnd_seq_s", "rnnd_steps_s",
                "max_abs_err", "other_load", "clock")
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"header": out[:6], "rows": [dict(zip(keys, r)) for r in rows]}, f, indent=1)
    if failed:
        log(f"engine_vs_torch: {failed} configuration(s) gave a wrong answer")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
