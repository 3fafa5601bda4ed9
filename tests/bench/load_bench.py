#!/usr/bin/env python3
"""load_bench.py: rnnd under rnnd-load, one markdown table per scenario (make bench).

    python3 tests/bench/load_bench.py [--build BUILD] [--scenarios FILE] [--quick]
                                      [--only SUBSTRING]

For each scenario of tests/bench/scenarios.json it makes a temporary model
repository (the demo model linked from config/models, or a model generated
here with deterministic weights: PyTorch nn.LSTM/nn.GRU state_dict names in a
safetensors file written by hand), starts BUILD/daemon/rnnd on a free port,
and runs BUILD/clients/rnnd-load --json once per load point (closed-loop
concurrencies or open-loop rates).  During each point it reads the server's
counters twice, after the warm-up and a fifth of the duration and just before
the end, so each row's server figures are that point's steady state:

- server seq/s = delta inference_count / seconds, and useful steps/s = delta
  rnnd_batch_steps_used_total / seconds;
- avg batch = delta inference_count / delta execution_count
  (GET /v2/models/{m}/stats, model_stats[0]);
- padding efficiency = delta rnnd_batch_steps_used_total / delta
  rnnd_batch_steps_total for the model (GET /metrics).

A scenario's "daemon" object gives rnnd settings (--KEY=VALUE).  A scenario of a
bundled model may replace its config's "batching" object (batching off is
max_batch_size 1).

Stdout is markdown (machine, date, command, one table per scenario, and for
each pair of scenarios "X, batching on" / "X, batching off" the ratio of
their best server throughputs); progress goes to stderr.  Python 3 standard library
only; nothing generated is kept.  Exits 1 when a point's errors pass 1%.
"""

import argparse
import json
import os
import platform
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(*a):
    print("load_bench:", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_safetensors(path, tensors):
    """tensors: [(name, shape, little-endian float32 bytes)]: 8-byte LE header length, JSON,
    data.  gpu_vs_torch.py writes its models with it too."""
    header, off = {}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, data in tensors:
            f.write(data)


def generate_model(dirname, cfg, seed=1):
    """config.json and 1/model.safetensors: PyTorch's init, U(-1/sqrt(H), 1/sqrt(H)), seeded."""
    gates = {"lstm": 4, "gru": 3}.get(cfg["cell"], 1)
    H, L, I = cfg["hidden_size"], cfg.get("num_layers", 1), cfg["input_size"]
    rng, k = random.Random(seed), 1.0 / H ** 0.5
    tensors = []
    for layer in range(L):
        fan_in = I if layer == 0 else H
        for name, shape in (("weight_ih_l%d", [gates * H, fan_in]), ("weight_hh_l%d", [gates * H, H]),
                            ("bias_ih_l%d", [gates * H]), ("bias_hh_l%d", [gates * H])):
            n = shape[0] * (shape[1] if len(shape) > 1 else 1)
            tensors.append((name % layer, shape, struct.pack("<%df" % n, *(rng.uniform(-k, k) for _ in range(n)))))
    os.makedirs(os.path.join(dirname, "1"))
    with open(os.path.join(dirname, "config.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(dirname, "1", "model.safetensors"), tensors)


def bundled_with_batching(src, dirname, batching):
    """A bundled model with its config's batching object replaced; the rest is linked."""
    os.makedirs(dirname)
    for name in os.listdir(src):
        if name != "config.json":
            os.symlink(os.path.join(src, name), os.path.join(dirname, name))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["batching"] = batching
    with open(os.path.join(dirname, "config.json"), "w") as f:
        json.dump(cfg, f)


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def counters(base, model):
    """(inference_count, execution_count, steps used, steps total or None)."""
    s = json.loads(get("%s/v2/models/%s/stats" % (base, model)))["model_stats"][0]
    text = get(base + "/metrics")

    def metric(name):
        v = [float(m.group(1)) for m in re.finditer(r'^%s\{[^}]*model="%s"[^}]*\} ([0-9.e+]+)$'
                                                    % (name, re.escape(model)), text, re.M)]
        return sum(v) if v else None
    return s["inference_count"], s["execution_count"], metric("rnnd_batch_steps_used_total"), \
        metric("rnnd_batch_steps_total")


def seconds(v):
    """rnnd-load's duration syntax: 2, 2s, 500ms, 1m."""
    m = re.fullmatch(r"([0-9.]+)(ms|s|m)?", str(v))
    if m is None:
        raise RuntimeError("not a duration: %r" % v)
    return float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[m.group(2)]


def flags(d):
    return ["--%s=%s" % (k.replace("_", "-"), v) for k, v in d.items()]


def run_scenario(sc, build, defaults, tmp):
    repo = tempfile.mkdtemp(prefix="repo-", dir=tmp)
    model = sc["model"]
    if "generate" in sc:
        generate_model(os.path.join(repo, model), sc["generate"])
    elif "batching" in sc:
        bundled_with_batching(os.path.join(ROOT, "config", "models", model), os.path.join(repo, model),
                              sc["batching"])
    else:
        os.symlink(os.path.join(ROOT, "config", "models", model), os.path.join(repo, model))
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    errlog = open(os.path.join(tmp, "rnnd.stderr"), "ab")
    daemon = ["--%s=%s" % kv for kv in sorted(sc.get("daemon", {}).items())]
    proc = subprocess.Popen([os.path.join(build, "daemon", "rnnd"), "--listen=127.0.0.1:%d" % port,
                             "--model_repository", repo, "--log_level=warning"] + daemon,
                            stdout=subprocess.DEVNULL, stderr=errlog, cwd=ROOT)
    rows = []
    try:
        for _ in range(300):
            try:
                get(base + "/v2/health/ready")
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("rnnd exited %d (see its stderr)" % proc.returncode)
                time.sleep(0.1)
        for point in sc["points"]:
            args = dict(defaults)
            args.update(sc.get("args", {}))
            args.update(point)
            cmd = [os.path.join(build, "clients", "rnnd-load"), "--url=" + base, "--model=" + model,
                   "--json", "--progress=false", "--max-error-rate=1"] + flags(args)
            log(sc["name"], " ".join(flags(point)))
            # The server's counters are read over the steady part of the run: from the end of
            # the warm-up plus a fifth of the duration to just before its end.  A closed loop
            # at high concurrency has latencies of seconds; the client's own count, by send
            # time, mixes in its start and its drain.
            warm, dur = seconds(args["warmup"]), seconds(args["duration"])
            t_start = time.time()
            lp = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(warm + dur / 5)
            c0, t0 = counters(base, model), time.time()
            time.sleep(max(0.0, t_start + warm + dur - 0.2 - time.time()))
            c1, t1 = counters(base, model), time.time()
            out, err = lp.communicate()
            if lp.returncode != 0 or not out.strip():
                raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), lp.returncode, err[-500:]))
            rep = json.loads(out)
            win = {"seq_s": (c1[0] - c0[0]) / (t1 - t0), "batch": None, "pad": None, "steps_s": None}
            if c1[1] > c0[1]:
                win["batch"] = (c1[0] - c0[0]) / (c1[1] - c0[1])
            if c1[2] is not None and c0[2] is not None:
                win["steps_s"] = (c1[2] - c0[2]) / (t1 - t0)
                if c1[3] is not None and c1[3] > (c0[3] or 0):
                    win["pad"] = (c1[2] - c0[2]) / (c1[3] - (c0[3] or 0))
            rows.append((point, rep, win))
    finally:
        proc.terminate()
        proc.wait()
        errlog.close()
    return rows


def table(sc, rows):
    out = ["### %s" % sc["name"], ""]
    out.append("| load | sent/s | client seq/s | p50 (ms) | p90 (ms) | p99 (ms) | p99.9 (ms) | errors "
               "| server seq/s | useful steps/s | avg batch | padding eff. |")
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for point, rep, win in rows:
        load = ("open %g/s" % rep["rate"]) if rep["mode"] == "open" else ("closed c=%d" % rep["concurrency"])
        lat = rep["latency_ms"]
        out.append("| %s | %.0f | %.1f | %.2f | %.2f | %.2f | %.2f | %d | %.1f | %s | %s | %s |" % (
            load, rep["send_rate"], rep["sequences_per_s"], lat["p50"], lat["p90"], lat["p99"],
            lat["p99.9"], rep["errors"], win["seq_s"],
            "{:,.0f}".format(win["steps_s"]) if win["steps_s"] is not None else "-",
            "%.2f" % win["batch"] if win["batch"] else "-",
            "%.3f" % win["pad"] if win["pad"] is not None else "-"))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--scenarios", default=os.path.join(ROOT, "tests", "bench", "scenarios.json"))
    ap.add_argument("--quick", action="store_true", help="0.5 s warm-up, 2 s per point")
    ap.add_argument("--only", default="", help="scenarios whose name contains this")
    ap.add_argument("--json", help="also write every point's results as JSON to this file "
                    "(for tests/bench/plots.py)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    spec = json.load(open(a.scenarios))
    defaults = {"warmup": "0.5s" if a.quick else spec.get("warmup", "1s"),
                "duration": "2s" if a.quick else spec.get("duration", "5s")}
    tmp = tempfile.mkdtemp(prefix="rnnd-load-bench-")
    results, bad = [], False
    try:
        for sc in spec["scenarios"]:
            if a.only in sc["name"]:
                results.append((sc, run_scenario(sc, build, defaults, tmp)))
    except RuntimeError as e:
        log(str(e))
        try:
            sys.stderr.write(open(os.path.join(tmp, "rnnd.stderr")).read()[-2000:])
        except OSError:
            pass
        return 1
    finally:
        shutil.rmtree(tmp)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    header = ["Machine: %s, %d logical CPUs; Linux %s" % (cpu, os.cpu_count(), platform.release()),
              "Date: %s" % time.strftime("%Y-%m-%d %H:%M %Z"), "rnnd: %s (%s)" % (commit, a.build)]
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"header": header, "scenarios": [
                {"name": sc["name"], "points": [{"client": rep, "server": win} for _, rep, win in rows]}
                for sc, rows in results]}, f, indent=1)
    print("## rnnd under rnnd-load\n")
    print("- **Machine**: %s, %d logical CPUs; Linux %s" % (cpu, os.cpu_count(), platform.release()))
    print("- **Date**: %s" % time.strftime("%Y-%m-%d %H:%M %Z"))
    print("- **rnnd**: %s (%s)" % (commit, a.build))
    print("- **Command**: `%s`" % " ".join(["python3", "tests/bench/load_bench.py"] + sys.argv[1:]))
    print("- **Per point**: %s warm-up, then %s. Client columns (rnnd-load): sends, completed "
          "sequences per second and latency from the send (closed loop) or from the scheduled send "
          "(open loop), successes only. Server columns, from its counters over the steady part "
          "(warm-up plus a fifth of the duration, to the end): sequences and useful (unpadded) "
          "steps per second, avg batch, padding efficiency. Ratios use server seq/s.\n"
          % (defaults["warmup"], defaults["duration"]))
    best = {}
    for sc, rows in results:
        if "duration" in sc.get("args", {}) or "warmup" in sc.get("args", {}):
            print("(This scenario: %s warm-up, then %s per point.)\n" % (
                sc["args"].get("warmup", defaults["warmup"]), sc["args"].get("duration", defaults["duration"])))
        print(table(sc, rows))
        print()
        best[sc["name"]] = max(r[2]["seq_s"] for r in rows)
        bad = bad or any(r[1]["errors"] > 0.01 * max(r[1]["completed"], 1) for r in rows)
    for name, seqs in best.items():
        if name.endswith("batching on") and name[:-2] + "off" in best and best[name[:-2] + "off"] > 0:
            print("%s: best %.1f seq/s batched vs %.1f unbatched (%.2fx)" % (
                name[:-len(", batching on")], seqs, best[name[:-2] + "off"], seqs / best[name[:-2] + "off"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
