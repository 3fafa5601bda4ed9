#!/usr/bin/env python3
"""plots.py RESULTS OUT: the plots of docs/BENCHMARKS.md, from what `make bench` measured.

    python tests/bench/plots.py BUILD/bench-results docs/bench

RESULTS holds engine.json (engine_vs_torch.py --json), ort.json (engine_vs_ort.py --json),
load.json (load_bench.py --json) and server.json (server_bench.py --json);
a plot whose results are missing is skipped.  OUT gets PNGs:

  engine_vs_torch.png  sequences/s against batch size, rnnd's CPU engine and PyTorch, per
                       cell and thread count
  engine_vs_ort.png    rnnd's speed over ONNX Runtime's and PyTorch's, each row of the
                       matrix of engine_vs_ort.py (ort.json, engine_vs_ort.py --json)
  latency_by_load.png  digits_lstm under an open loop (Poisson arrivals): p50 and p99
                       latency against the rate sent, with the batching rule and the fixed
                       delay
  batching.png         digits_lstm under a closed loop: server throughput and p99 by number
                       of clients, batching on (the rule), on with a fixed delay, and off
  padding.png          an LSTM 256x2 with lengths 1..512: server throughput and padding
                       efficiency by number of clients, batching on and off
  server.png           digits_lstm: rnnd and MLServer (server.json, server_bench.py
                       --json), throughput and p99 by number of clients

Needs matplotlib (run.sh installs it beside torch); the PNGs carry no date or version, so
a rerun changes them only where the figures changed.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

STYLE = {"figure.figsize": (10, 4), "axes.grid": True, "grid.alpha": 0.3, "font.size": 9,
         "legend.fontsize": 8, "axes.titlesize": 10}


PLAIN = FuncFormatter(lambda v, _: "{:,.0f}".format(v) if v >= 1 else "{:g}".format(v))


def log_x(ax, values):
    """A log2 x axis ticked at the values measured, written plainly (1, 8, 32, 128)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(PLAIN)
    ax.xaxis.set_minor_formatter(NullFormatter())


def log_y(ax):
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(PLAIN)
    ax.yaxis.set_minor_formatter(PLAIN)


def save(fig, out, name, header, left=0.0):
    fig.text(0.01, 0.005, "; ".join(header), fontsize=6.5, color="0.35", ha="left", va="bottom")
    fig.tight_layout(rect=(left, 0.04, 1, 1))
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    print("plots: wrote %s" % path, file=sys.stderr)


def engine(res, out):
    rows = [r for r in res["rows"] if r["rnnd_seq_s"] is not None]
    cells = sorted({r["cell"] for r in rows})
    fig, axes = plt.subplots(1, len(cells), squeeze=False)
    for ax, cell in zip(axes[0], cells):
        for threads, color in zip(sorted({r["threads"] for r in rows}), ("C0", "C1", "C2", "C3")):
            rs = sorted((r for r in rows if r["cell"] == cell and r["threads"] == threads),
                        key=lambda r: r["batch"])
            b = [r["batch"] for r in rs]
            ax.plot(b, [r["rnnd_seq_s"] for r in rs], "o-", color=color,
                    label="rnnd, %d thread%s" % (threads, "s" if threads > 1 else ""))
            ax.plot(b, [r["torch_seq_s"] for r in rs], "s--", color=color, alpha=0.7,
                    label="PyTorch, %d thread%s" % (threads, "s" if threads > 1 else ""))
        log_x(ax, [r["batch"] for r in rows])
        log_y(ax)
        ax.set_xlabel("batch (sequences)")
        ax.set_ylabel("sequences/s")
        ax.set_title("%s, input 128, hidden 256, 2 layers, T = 100" % cell.upper())
        ax.legend()
    save(fig, out, "engine_vs_torch.png", [h.lstrip("- ") for h in res["header"][:4]])


def engine_vs_ort(res, out):
    """One bar pair per row: rnnd / ORT and rnnd / PyTorch (log scale, 1 = as fast)."""
    rows = res["rows"]
    labels = ["#%d %s; B %d, %d thr." % (r["row"], r["model"], r["batch"], r["threads"])
              for r in rows]
    y = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.2))
    # Bars from 1x: right for rnnd ahead, left for behind.
    ax.barh([v - 0.2 for v in y], [r["rnnd_vs_ort"] - 1 for r in rows], 0.4, left=1,
            color="C0", label="rnnd / ONNX Runtime")
    ax.barh([v + 0.2 for v in y], [(r["rnnd_vs_torch"] or 1) - 1 for r in rows], 0.4, left=1,
            color="C1", label="rnnd / PyTorch (none: the reset-before GRU)")
    ax.axvline(1.0, color="0.2", linewidth=0.8)
    ax.set_xscale("log")
    times = FuncFormatter(lambda v, _: "{:g}x".format(v))
    ax.xaxis.set_major_formatter(times)
    ax.xaxis.set_minor_formatter(times)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("rnnd's sequences/s over the other's (right of 1x: rnnd faster)")
    ax.set_title("The CPU engine against ONNX Runtime and PyTorch, same weights, same input",
                 pad=20)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    save(fig, out, "engine_vs_ort.png", [h.lstrip("- ") for h in res["header"][:2]], left=0.02)


def scenario(res, name):
    return next((s["points"] for s in res["scenarios"] if s["name"] == name), None)


def clients(p):
    return p["client"]["concurrency"]


def latency_by_load(res, out):
    fig, ax = plt.subplots()
    for name, label, color in (("digits_lstm, open loop", "batching rule (default)", "C0"),
                               ("digits_lstm, open loop, fixed delay", "fixed 200 us delay", "C1")):
        pts = scenario(res, name)
        if not pts:
            continue
        rate = [p["client"]["send_rate"] for p in pts]
        ax.plot(rate, [p["client"]["latency_ms"]["p50"] for p in pts], "o-", color=color,
                label=label + ", p50")
        ax.plot(rate, [p["client"]["latency_ms"]["p99"] for p in pts], "s--", color=color,
                label=label + ", p99")
    ax.set_xlabel("requests/s sent (Poisson arrivals), one 8-step image each")
    ax.set_ylabel("latency from the scheduled send (ms)")
    ax.set_title("digits_lstm: latency by load (open loop)")
    ax.set_ylim(bottom=0)
    ax.legend()
    save(fig, out, "latency_by_load.png", res["header"])


def batching(res, out):
    fig, (a1, a2) = plt.subplots(1, 2)
    for name, label, color in (("digits_lstm, closed loop, batching on", "batching rule (default)", "C0"),
                               ("digits_lstm, closed loop, batching on, fixed delay",
                                "fixed 200 us delay", "C1"),
                               ("digits_lstm, closed loop, batching off", "batching off", "C2")):
        pts = scenario(res, name)
        if not pts:
            continue
        c = [clients(p) for p in pts]
        a1.plot(c, [p["server"]["seq_s"] for p in pts], "o-", color=color, label=label)
        a2.plot(c, [p["client"]["latency_ms"]["p99"] for p in pts], "o-", color=color, label=label)
    ticks = [clients(p) for s in res["scenarios"] if s["name"].startswith("digits_lstm, closed")
             for p in s["points"]]
    for ax, what in ((a1, "sequences/s (server)"), (a2, "p99 latency (ms)")):
        log_x(ax, ticks)
        ax.set_xlabel("clients (closed loop, one image each)")
        ax.set_ylabel(what)
        ax.set_ylim(bottom=0)
        ax.legend()
    a1.set_title("digits_lstm: throughput by clients")
    a2.set_title("digits_lstm: p99 by clients")
    save(fig, out, "batching.png", res["header"])


def padding(res, out):
    fig, (a1, a2) = plt.subplots(1, 2)
    prefix = "LSTM 256x2, lengths 1..512, "
    names = [s["name"] for s in res["scenarios"] if s["name"].startswith(prefix)]
    for k, name in enumerate(names):
        pts = scenario(res, name)
        label = name[len(prefix):]
        style = "o-" if name.endswith("batching on") else "x:"
        color = "C%d" % (k // 2)
        c = [clients(p) for p in pts]
        a1.plot(c, [p["server"]["seq_s"] for p in pts], style, color=color, label=label)
        if name.endswith("batching on"):
            a2.plot(c, [p["server"]["pad"] for p in pts], style, color=color, label=label)
    a1.set_ylabel("sequences/s (server)")
    a1.set_title("LSTM 256x2, lengths 1..512: throughput")
    a2.set_ylabel("padding efficiency (useful steps / batch x longest)")
    a2.set_title("the batches' padding efficiency")
    a2.set_ylim(0, 1)
    ticks = [clients(p) for n in names for p in scenario(res, n)]
    for ax in (a1, a2):
        log_x(ax, ticks)
        ax.set_xlabel("clients (closed loop)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    a1.set_ylim(bottom=0)
    save(fig, out, "padding.png", res["header"])


def server(res, out):
    rows = res["server_bench"]
    c = [r["clients"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2)
    for key, label, color in (("rnnd", "rnnd", "C0"), ("mlserver", "MLServer + onnxruntime", "C1")):
        a1.plot(c, [r[key]["throughput"] for r in rows], "o-", color=color, label=label)
        a2.plot(c, [r[key]["latency_ms"]["p99"] for r in rows], "o-", color=color, label=label)
    for ax, what in ((a1, "requests/s"), (a2, "p99 latency (ms)")):
        log_x(ax, c)
        log_y(ax)
        ax.yaxis.set_minor_formatter(NullFormatter())  # three decades: majors only
        ax.set_xlabel("clients (closed loop, one image each)")
        ax.set_ylabel(what)
        ax.legend()
    a1.set_title("digits_lstm: rnnd and MLServer, throughput")
    a2.set_title("digits_lstm: rnnd and MLServer, p99")
    save(fig, out, "server.png", res.get("header", ["tests/bench/server_bench.py"]))


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    results, out = sys.argv[1:]
    os.makedirs(out, exist_ok=True)
    plt.rcParams.update(STYLE)
    done = 0
    path = os.path.join(results, "engine.json")
    if os.path.exists(path):
        engine(json.load(open(path)), out)
        done += 1
    path = os.path.join(results, "ort.json")
    if os.path.exists(path):
        with open(path) as f:
            engine_vs_ort(json.load(f), out)
        done += 1
    path = os.path.join(results, "load.json")
    if os.path.exists(path):
        res = json.load(open(path))
        latency_by_load(res, out)
        batching(res, out)
        padding(res, out)
        done += 3
    path = os.path.join(results, "server.json")
    if os.path.exists(path):
        server(json.load(open(path)), out)
        done += 1
    if not done:
        print("plots: no results in %s" % results, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
