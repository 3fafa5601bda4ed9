#!/usr/bin/env python3
"""cpu_ab.py: rnnd's CPU per request, builds alternated, rounds repeated.

    python3 tests/bench/cpu_ab.py BUILD [BUILD...] [--rounds 3] [--seconds 5]
                                  [--connections "16 64"] [--images "1 8"]
                                  [--repository DIR]

One figure of http_bench.sh (the daemon's CPU time per request, pinned),
taken so that a change of a few microseconds can be read on a noisy host:
each round measures every build at every point in turn, so drift of the host
falls on all builds alike, and the report gives each run and the median.

A measure: a fresh BUILD/daemon/rnnd under `taskset -c 0` (--listen on a free
port of 127.0.0.1, --model_repository config/models or --repository, log
level warning); after a 2 s warm-up, `wrk -t1 -cC -dS` under `taskset -c 1`
POSTs the first B images of digits_lstm's test set to its infer route, asking
for `scores` (the bodies of http_bench.sh); CPU/request is the user + system
time of the rnnd process over the run (/proc/PID/stat) over the requests wrk
completed.  Every answer must be 2xx: a run with non-2xx answers or socket
errors stops the script.  Needs wrk, taskset and curl (http_bench.sh installs
them).  Stdout is a markdown table; progress goes to stderr.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def bodies(out):
    with open(os.path.join(ROOT, "config/models/digits_lstm/test_set.json")) as f:
        d = json.load(f)
    for b in (1, 8):
        data = [v for img in d["x"][:b] for row in img for v in row]
        body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [b, 8, 8],
                                       "data": data}],
                           "outputs": [{"name": "scores"}]}, separators=(",", ":"))
        with open(os.path.join(out, "infer%d.lua" % b), "w") as f:
            f.write('wrk.method = "POST"\nwrk.body = [==[%s]==]\n'
                    'wrk.headers["Content-Type"] = "application/json"\n' % body)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)


def wrk(lua, conns, seconds, url):
    r = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds,
                        "-s", lua, url], capture_output=True, text=True, check=True)
    if "Non-2xx" in r.stdout or "Socket errors" in r.stdout:
        sys.exit("cpu_ab.py: errors under load:\n" + r.stdout)
    return float(re.search(r"^Requests/sec:\s+([\d.]+)", r.stdout, re.M).group(1))


def measure(build, repo, lua, conns, seconds):
    port = free_port()
    rnnd = subprocess.Popen(["taskset", "-c", "0", os.path.join(build, "daemon/rnnd"),
                             "--listen=127.0.0.1:%d" % port, "--model_repository", repo,
                             "--log_level=warning"], cwd=ROOT)
    try:
        base = "http://127.0.0.1:%d" % port
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/v2/health/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("cpu_ab.py: %s did not become ready" % build)
        url = base + "/v2/models/digits_lstm/infer"
        wrk(lua, conns, 2, url)
        t0 = cpu_ticks(rnnd.pid)
        rps = wrk(lua, conns, seconds, url)
        t1 = cpu_ticks(rnnd.pid)
    finally:
        rnnd.terminate()
        rnnd.wait()
    hz = os.sysconf("SC_CLK_TCK")
    return rps, (t1 - t0) / hz / (rps * seconds) * 1e6


def commit(build):
    """The commit of the tree BUILD was configured from (as http_bench.sh says it)."""
    try:
        with open(os.path.join(build, "meson-info/meson-info.json")) as f:
            src = json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError):
        return "unknown"
    r = subprocess.run(["git", "-C", src, "rev-parse", "--short", "HEAD"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", default="16 64")
    ap.add_argument("--images", default="1 8")
    ap.add_argument("--repository", default=os.path.join(ROOT, "config/models"))
    a = ap.parse_args()
    builds = [os.path.abspath(b) for b in a.builds]
    points = [(int(b), int(c)) for b in a.images.split() for c in a.connections.split()]
    if any(b not in (1, 8) for b, _ in points):
        sys.exit("cpu_ab.py: --images takes 1 and 8")
    runs = {(bd, p): [] for bd in builds for p in points}
    with tempfile.TemporaryDirectory() as tmp:
        bodies(tmp)
        for r in range(a.rounds):
            for p in points:
                for bd in builds:
                    rps, us = measure(bd, a.repository, os.path.join(tmp, "infer%d.lua" % p[0]),
                                      p[1], a.seconds)
                    print("cpu_ab.py: round %d %s %d image(s) c=%d: %.0f req/s, %.1f us" %
                          (r + 1, bd, p[0], p[1], rps, us), file=sys.stderr)
                    runs[(bd, p)].append((rps, us))
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), "unknown CPU")
    print("Machine: %s, %d CPUs; %s" % (model, os.cpu_count(),
                                        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    print("Builds: " + ", ".join("%d = %s (%s)" % (i + 1, name, commit(bd))
                                 for i, (name, bd) in enumerate(zip(a.builds, builds))))
    print("Command: python3 tests/bench/cpu_ab.py %s\n" % " ".join(sys.argv[1:]))
    head = "| images | conns |"
    rule = "| ---: | ---: |"
    for i, bd in enumerate(builds):
        head += " build %d: CPU/req (us), each run | median | req/s, median |" % (i + 1)
        rule += " --- | ---: | ---: |"
    print(head)
    print(rule)
    for p in points:
        row = "| %d | %d |" % p
        for bd in builds:
            rs = runs[(bd, p)]
            row += " %s | %.1f | %s |" % (" / ".join("%.1f" % us for _, us in rs),
                                          statistics.median(us for _, us in rs),
                                          format(round(statistics.median(q for q, _ in rs)), ","))
        print(row)


if __name__ == "__main__":
    main()
