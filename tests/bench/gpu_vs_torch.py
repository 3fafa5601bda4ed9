#!/usr/bin/env python3
"""rnnd's cuDNN backend against PyTorch's nn.LSTM / nn.GRU on cuDNN (DESIGN.md §9).

Same GPU, same run, same shapes:
  - input 512, hidden 512, 2 layers, T = 100, batch 1..256 (STANDARD);
  - input 128, hidden 128, 2 layers, T = 100, batch 1..256 (every batch is
    equal-length, so rnnd may use a persistent algorithm chosen at load);
each for LSTM and GRU, in fp32 (rnnd: FMA math; torch: TF32 off) and fp16.

For each shape it saves the torch module once as an rnnd model (config.json
and 1/model.safetensors, written without the safetensors package) and then:
  1. checks the answer on batch 8: rnnd-engine-bench --backend cudnn --input
     --dump against torch's y on the same input (fp32: max abs error <= 1e-4;
     fp16: <= 1e-2 relative to 1 + |y|), so a wrong answer is never timed;
  2. times rnnd: rnnd-engine-bench --backend cudnn --json (host memory in and
     out, as the engine API is: staging, copies, compute, median per batch);
  3. times torch twice with the same method (3 warm-up runs, then runs until
     --seconds and at least 5, median): host to host (x.to(cuda), forward,
     y.cpu(), which is what rnnd's number includes), and device-resident
     (forward only, synchronized).
     The same row has what opening cost (rnnd-engine-bench opens a second
     plan beside the first): seconds and GPU memory of the first plan
     (weights, workspace, the algorithm timing) and of the second.
Then rnnd itself serves every saved model over HTTP (BUILD/daemon/rnnd,
found beside --bench) under BUILD/clients/rnnd-load with binary tensors:
64 sequences a request with 4 in flight, and 1 with 64 in flight, against
the engine's sequences/s at batch 64.
It prints markdown tables with the ratios, row by row as each is measured;
--out FILE gets each row as it comes too.
Exits 77 when torch sees no GPU or rnnd was built without cuDNN, 1 if a
check failed.

Usage: python3 tests/bench/gpu_vs_torch.py --bench BUILD/tests/bench/rnnd-engine-bench
           [--quick] [--seconds S] [--out FILE]
Needs torch with CUDA (numpy optional).
"""

import argparse
import array
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from load_bench import counters, free_port, get, write_safetensors  # this folder's helpers

SKIP = 77


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def tensor_bytes(t):
    t = t.detach().float().contiguous().cpu()
    try:
        return t.numpy().tobytes()
    except Exception:  # torch without numpy
        return array.array("f", t.flatten().tolist()).tobytes()


def save_model(mod, cell, inp, hidden, layers, precision, max_batch, T, root):
    d = os.path.join(root, "%s_%d_%s" % (cell, hidden, precision))
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    cfg = {
        "cell": cell, "input_size": inp, "hidden_size": hidden, "num_layers": layers,
        "precision": precision, "max_sequence_length": T,
        "batching": {"max_batch_size": max_batch, "max_batch_steps": max_batch * T},
        "weights": {"prefix": "rnn."},
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(d, "1", "model.safetensors"),
                      [("rnn." + k, v.shape, tensor_bytes(v)) for k, v in mod.state_dict().items()])
    return d


class Report:
    """The markdown table, printed and (with --out) appended to a file line
    by line, each flushed as it comes."""

    def __init__(self, path, head):
        self.path = path
        if path:
            open(path, "w").close()
        for l in head:
            self.line(l)

    def line(self, text):
        print(text, flush=True)
        if self.path:
            with open(self.path, "a") as f:
                f.write(text + "\n")


def rnnd_json(bench, model, batch, T, seconds, extra=()):
    cmd = [bench, "--backend", "cudnn", "--model", model, "--batch", str(batch), "--steps", str(T),
           "--threads", "1", "--seconds", str(seconds)] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r.stdout


def time_loop(fn, seconds, sync):
    for _ in range(3):
        fn()
    sync()
    times, t_end = [], time.perf_counter() + seconds
    while len(times) < 5 or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def check_answer(torch, bench, mod, model, shape, root):
    """rnnd's y against torch's on batch 8: (max error, within the bound)."""
    cell, inp, hidden, layers, precision, T = shape
    dev, dtype = next(mod.parameters()).device, next(mod.parameters()).dtype
    x = torch.rand(8, T, inp) * 2 - 1
    xin = os.path.join(root, "x.bin")
    yout = os.path.join(root, "y.bin")
    with open(xin, "wb") as f:
        f.write(tensor_bytes(x))
    rnnd_json(bench, model, 8, T, 0, ["--input", xin, "--dump", yout])
    got = array.array("f")
    with open(yout, "rb") as f:
        got.frombytes(f.read())
    with torch.inference_mode():
        want = mod(x.to(dev, dtype))[0].float().cpu().flatten().tolist()
    if precision == "fp32":
        err = max(abs(a - b) for a, b in zip(got, want))
        return err, len(got) == len(want) and err <= 1e-4
    err = max(abs(a - b) / (1 + abs(b)) for a, b in zip(got, want))
    return err, len(got) == len(want) and err <= 1e-2


def bench_model(torch, bench, report, root, shape, batches, seconds, engine):
    """One model: its answer checked, then a row per batch size.  Returns
    the number of failed checks (0 or 1); engine[(cell, prec, hidden, B)]
    gets rnnd's sequences/s."""
    cell, inp, hidden, layers, precision, T = shape
    dev = torch.device("cuda")
    dtype = torch.float16 if precision == "fp16" else torch.float32
    torch.manual_seed(0)
    ctor = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
    mod = ctor(inp, hidden, layers, batch_first=True).eval()
    model = save_model(mod, cell, inp, hidden, layers, precision, max(batches), T, root)
    mod = mod.to(dev, dtype)
    err, ok = check_answer(torch, bench, mod, model, shape, root)
    log("%s %s h%d: check max error %.3g %s" % (cell, precision, hidden, err, "ok" if ok else "FAILED"))
    if not ok:
        report.line("| %s | %s | %d | - | check FAILED: max error %.3g | | | | | | | |" % (
            cell, precision, hidden, err))
        return 1
    for B in batches:
        r = json.loads(rnnd_json(bench, model, B, T, seconds, ["--json"]))
        xh = (torch.rand(B, T, inp) * 2 - 1).to(dtype).pin_memory()
        xd = xh.to(dev)
        with torch.inference_mode():
            t_h2h = time_loop(lambda: mod(xh.to(dev, non_blocking=True))[0].cpu(),
                              seconds, torch.cuda.synchronize)
            t_dev = time_loop(lambda: mod(xd), seconds, torch.cuda.synchronize)
        t_r = r["median_s"]
        engine[(cell, precision, hidden, B)] = B / t_r
        report.line("| %s | %s | %d | %d | %s | %.3f | %.3f | %.3f | %.2f | %.2f | %s | %s |" % (
            cell, precision, hidden, B, r["algo"], t_r * 1e3, t_h2h * 1e3, t_dev * 1e3,
            t_r / t_h2h, t_r / t_dev, open_cost(r, "open_s", "open_second_s", 1, "%.2f"),
            open_cost(r, "gpu_bytes_first", "gpu_bytes_second", 1 / 1048576, "%.0f")))
    return 0


def open_cost(r, first, second, scale, fmt):
    if first not in r:
        return "-"
    return (fmt + " / " + fmt) % (r[first] * scale, r[second] * scale)


# End to end: (sequences per request, requests in flight).  64 x 4 is the
# goal's batch 64 with the transfers of one request overlapping the compute
# of another; 1 x 64 is many clients whose sequences the batcher gathers.
HTTP_POINTS = [(64, 4), (1, 64)]


def http_phase(args, report, root, engine, T, seconds):
    """rnnd itself, serving the saved models from `root`, under rnnd-load
    (binary tensors, closed loop): sequences/s against the engine's at the
    same batch.  Returns the number of failed points."""
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args.bench))))
    models = sorted(m for m in os.listdir(root) if os.path.exists(os.path.join(root, m, "config.json")))
    if not models:
        return 0
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    errlog = open(os.path.join(root, "rnnd.stderr"), "w+b")
    proc = subprocess.Popen([os.path.join(build, "daemon", "rnnd"), "--listen=127.0.0.1:%d" % port,
                             "--model_repository", root, "--log_level=warning"],
                            stdout=subprocess.DEVNULL, stderr=errlog)
    failed = 0
    report.line("")
    report.line("### End to end over HTTP (rnnd-load, binary tensors, closed loop, %.1f s a point)"
                % max(1.0, 2 * seconds))
    report.line("")
    report.line("| model | backend | sequences x in flight | seq/s | avg server batch | engine seq/s at 64 "
                "| HTTP / engine | p50 ms | p99 ms |")
    report.line("|---|---|---|---|---|---|---|---|---|")
    try:
        t0 = time.time()
        while True:
            try:
                get(base + "/v2/health/ready")
                break
            except OSError:
                if proc.poll() is not None or time.time() - t0 > 300:
                    errlog.seek(0)
                    raise RuntimeError("rnnd did not get ready: %s" % errlog.read()[-500:].decode(errors="replace"))
                time.sleep(0.2)
        for model in models:
            cfg = json.loads(get("%s/v2/models/%s/config" % (base, model)))
            backend = ",".join(sorted({i.get("backend", "?") for g in cfg.get("instance_group", [])
                                       for i in g.get("instances", [])})) or "?"
            cell, hidden, prec = model.split("_")
            for per, inflight in HTTP_POINTS:
                c0 = counters(base, model)
                cmd = [os.path.join(build, "clients", "rnnd-load"), "--url=" + base, "--model=" + model,
                       "--api=v2", "--format=binary", "--sequences=%d" % per, "--length=%d" % T,
                       "--concurrency=%d" % inflight, "--warmup=0.5s",
                       "--duration=%.1fs" % max(1.0, 2 * seconds), "--json", "--progress=false",
                       "--max-error-rate=0"]
                r = subprocess.run(cmd, capture_output=True, text=True)
                c1 = counters(base, model)
                if r.returncode != 0 or not r.stdout.strip():
                    failed += 1
                    report.line("| %s | %s | %d x %d | FAILED: %s | | | | | |" % (
                        model, backend, per, inflight, (r.stderr.strip() or r.stdout.strip())[-200:]))
                    continue
                rep = json.loads(r.stdout)
                batch = (c1[0] - c0[0]) / (c1[1] - c0[1]) if c1[1] > c0[1] else 0
                eng = engine.get((cell, prec, int(hidden), 64))
                report.line("| %s | %s | %d x %d | %.0f | %.1f | %s | %s | %.2f | %.2f |" % (
                    model, backend, per, inflight, rep["sequences_per_s"], batch,
                    "%.0f" % eng if eng else "-", "%.2f" % (rep["sequences_per_s"] / eng) if eng else "-",
                    rep["latency_ms"]["p50"], rep["latency_ms"]["p99"]))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        errlog.close()
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--quick", action="store_true", help="fewer batch sizes, 0.3 s per point")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("SKIP: no torch")
        return SKIP
    if not torch.cuda.is_available():
        print("SKIP: torch sees no GPU")
        return SKIP
    probe = subprocess.run([args.bench, "--help"], capture_output=True, text=True).stdout
    if "--backend" not in probe:
        print("SKIP: rnnd-engine-bench has no --backend")
        return SKIP
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.enabled = True
    seconds = 0.3 if args.quick else args.seconds
    batches = [1, 64, 256] if args.quick else [1, 8, 32, 64, 128, 256]
    T, layers = 100, 2
    shapes = [(512, 512), (128, 128)]
    failed = 0
    engine = {}
    # The table is written row by row as it is measured, so a run cut short
    # (tests/gpu/run-on-gpu.sh bounds it) still returns what it measured.
    report = Report(args.out, [
        "## rnnd cuDNN backend vs PyTorch (cuDNN), same GPU",
        "",
        "- date: %s" % datetime.datetime.now().isoformat(timespec="seconds"),
        "- machine: %s, GPU %s, torch %s, torch's cuDNN %s" % (
            platform.node(), torch.cuda.get_device_name(0), torch.__version__,
            torch.backends.cudnn.version()),
        "- command: %s" % os.environ.get("RNND_BENCH_COMMAND", " ".join(sys.argv)),
        "- shapes: 2 layers, T = %d, equal lengths; times are medians per batch" % T,
        "",
        "- open: the first plan's open (weights, workspace, algorithm timing) and a second plan's"
        " (shares both), seconds and GPU MiB (cudaMemGetInfo), from that row's rnnd-engine-bench",
        "",
        "| cell | prec | input=hidden | batch | rnnd algo | rnnd ms | torch h2h ms | torch dev ms "
        "| rnnd / torch h2h | rnnd / torch dev | open s 1st / 2nd | GPU MiB 1st / 2nd |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ])
    with tempfile.TemporaryDirectory(prefix="rnnd-gpu-bench-") as root:
        for cell in ("lstm", "gru"):
            for inp, hidden in shapes:
                for precision in ("fp32", "fp16"):
                    shape = (cell, inp, hidden, layers, precision, T)
                    try:
                        failed += bench_model(torch, args.bench, report, root, shape, batches, seconds,
                                              engine)
                    except RuntimeError as e:  # one model's failure is a row, not the end
                        failed += 1
                        report.line("| %s | %s | %d | - | rnnd FAILED: %s | | | | | | | |" % (
                            cell, precision, hidden, str(e).replace("|", "/")[:200]))
        try:
            failed += http_phase(args, report, root, engine, T, seconds)
        except (RuntimeError, OSError) as e:
            failed += 1
            report.line("\nend to end over HTTP FAILED: %s" % e)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
