#!/usr/bin/env python3
"""test_gpu_fleet.py: the daemon on several GPUs, and what it does when one fails
(docs/GPU.md, docs/OPERATIONS.md).

On the CUDA stand-in (tests/cudasim/), whose environment gives it fake GPUs and
injects faults:
  - four GPUs: a model placed by default has two cuDNN instances per GPU, and
    /v2/models/{m}/config describes each on its own GPU; inference is right;
  - out of memory when one GPU opens: the model serves on the other three,
    the config and the log say which instance is out of service and why;
  - a device fault under HTTP load (8 clients), once on a model with GPU and
    CPU instances and once on one with GPU instances only: every request
    answered is a 200 with the golden numbers or a 503 with Retry-After; the
    mixed model's batches go to its CPU instance (its only 503s are the
    drain's); /v2/health/ready says 400 naming the fault; the log says so; the
    daemon drains and exits with status 75 (RNND_EXIT_DEVICE_FAULT).

Exits 77 (skip) when rnnd is not built on the stand-in (these need its fake
devices and faults; a real GPU cannot be made to fail on purpose).
"""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
import rnndtest as th  # the harness (tests/support)
import rnndtest as ti  # the goldens' helpers
from rnndtest import Daemon, check, GOLDEN, run_test

SKIP = 77
EXIT_DEVICE_FAULT = 75
TOL = 1e-4
# The stand-in's knobs (tests/cudasim/README.md).
SIM_DEVICES = "RNND_CUDASIM_DEVICES"  # "4" or "4:8G"
SIM_OOM = "RNND_CUDASIM_OOM"  # "DEVICE:N": the Nth allocation on DEVICE fails
SIM_FAULT = "RNND_CUDASIM_FAULT"  # "N": a device fault at the Nth launch

CASE = "lstm_l1_uni_equal_h0"


def backends():
    return subprocess.run([th.BIN, "--backends"], capture_output=True, text=True,
                          env=dict(os.environ, **{SIM_DEVICES: "1"})).stdout


def make_repo(tmp, models):
    """models: name -> instances list (or None for the default placement), each a copy of CASE."""
    src = os.path.join(GOLDEN, CASE)
    for name, inst in models.items():
        dst = os.path.join(tmp, name)
        os.makedirs(os.path.join(dst, "1"))
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        if inst is not None:
            cfg["instances"] = inst
        with open(os.path.join(dst, "config.json"), "w") as f:
            json.dump(cfg, f)
        shutil.copy(os.path.join(src, "1", "model.safetensors"), os.path.join(dst, "1"))
    return tmp


IO = ti.read_safetensors(os.path.join(GOLDEN, CASE, "io.safetensors"))
BODY = json.dumps({"inputs": ti.case_inputs(IO)}).encode()


def right(body):
    """Whether an inference response carries the golden outputs."""
    try:
        outs = ti.outputs_of(json.loads(body))
    except ValueError:
        return False
    for key in ("output", "h_n", "c_n", "scores"):
        if key in IO:
            o = outs.get(key)
            if o is None or o["shape"] != IO[key][1] or ti.max_err(o["data"], IO[key][2]) > TOL:
                return False
    return True


def find_key(v, key):
    """Every value of key anywhere in a JSON value."""
    if isinstance(v, dict):
        return [x for k, w in v.items() for x in ([w] if k == key else find_key(w, key))]
    if isinstance(v, list):
        return [x for w in v for x in find_key(w, key)]
    return []


def instances(d, name):
    st, _, cfg = d.json("GET", "/v2/models/%s/config" % name)
    if not check(st == 200, "%s: config answers" % name, (st, cfg)):
        return []
    return [i for g in cfg.get("instance_group", []) for i in g.get("instances", [])]


def test_four_gpus():
    with tempfile.TemporaryDirectory(prefix="rnnd-fleet-") as tmp:
        d = Daemon(repo=make_repo(tmp, {"m": None}), env={SIM_DEVICES: "4"})
        try:
            inst = instances(d, "m")
            gpus = sorted(i.get("device", "")[:6] for i in inst)
            check(gpus == ["GPU %d " % g for g in range(4) for _ in range(2)],
                  "4 GPUs: two cuDNN instances on each", inst)
            check(all(i.get("backend") == "cudnn" for i in inst), "4 GPUs: all on cuDNN", inst)
            for _ in range(16):
                st, _, body = d.request("POST", "/v2/models/m/infer", body=BODY)
                check(st == 200 and right(body), "4 GPUs: inference right", (st, body[:200]))
        finally:
            d.stop()
            d.close()


def test_oom_on_one_gpu():
    with tempfile.TemporaryDirectory(prefix="rnnd-fleet-") as tmp:
        d = Daemon(repo=make_repo(tmp, {"m": [{"kind": "gpu", "count": 1}]}),
                   env={SIM_DEVICES: "4", SIM_OOM: "2:1"})
        try:
            inst = instances(d, "m")
            check(len(inst) == 4, "oom: four instances listed", inst)
            out = [i for i in inst if "out of service" in i.get("why_not_cudnn", "")]
            check(len(out) == 1 and out[0].get("device", "").startswith("GPU 2"),
                  "oom: GPU 2's instance is out of service, and says so", inst)
            check(out and "failed to open" in out[0].get("why_not_cudnn", ""),
                  "oom: the reason is the failed open", out)
            st, _, stats = d.json("GET", "/v2/models/m/stats")
            check(st == 200 and find_key(stats, "instances_in_service") == [3],
                  "oom: three instances in service", stats)
            for _ in range(16):
                st, _, body = d.request("POST", "/v2/models/m/infer", body=BODY)
                check(st == 200 and right(body), "oom: the other GPUs serve, right", (st, body[:200]))
            st, _, _ = d.request("GET", "/v2/health/ready")
            check(st == 200, "oom: the server is ready", st)
            check("serving on the others" in d.stderr(), "oom: logged", d.stderr()[-2000:])
        finally:
            d.stop()
            d.close()


def fault_under_load(name, groups, fault_at):
    """8 clients on model name (instance groups groups); a device fault at the stand-in's
    fault_at-th launch, which lands in one of this model's GPU batches.  Returns the
    answers (status, Retry-After, right, body head) and the daemon's log."""
    results = []
    errors = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="rnnd-fleet-") as tmp:
        d = Daemon("--shutdown_timeout=3", repo=make_repo(tmp, {name: groups}),
                   env={SIM_DEVICES: "2", SIM_FAULT: str(fault_at)})
        try:
            # A connection kept open across the fault, for /v2/health/ready during the drain,
            # and a request whose body never ends, which holds the drain open for
            # shutdown_timeout (it is the client's stall, not an accepted request).
            health = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
            st, _, _ = d.request("GET", "/v2/health/ready", conn=health)
            check(st == 200, "%s: ready before" % name, st)
            stall = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
            stall.putrequest("POST", "/v2/models/%s/infer" % name)
            stall.putheader("Content-Length", str(len(BODY) + 100))
            stall.endheaders()
            stall.send(BODY[:10])

            def client():
                while d.proc.poll() is None:
                    try:
                        st, h, body = d.request("POST", "/v2/models/%s/infer" % name, body=BODY)
                    except OSError as e:  # refused or reset once the daemon stops accepting
                        with lock:
                            errors.append(repr(e))
                        time.sleep(0.01)
                        continue
                    with lock:
                        results.append((st, h.get("retry-after"), st == 200 and right(body),
                                        body[:300] if st != 200 else b""))

            threads = [threading.Thread(target=client) for _ in range(8)]
            for t in threads:
                t.start()
            deadline = time.time() + 60
            while "device fault" not in d.stderr() and time.time() < deadline:
                time.sleep(0.005)
            check("device fault" in d.stderr(), "%s: logged" % name, d.stderr()[-2000:])
            st, _, body = d.request("GET", "/v2/health/ready", conn=health)
            check(st == 400 and b"device fault" in body,
                  "%s: ready says 400 with the fault" % name, (st, body[:300]))
            try:
                rc = d.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rc = None
            for t in threads:
                t.join()
            check(rc == EXIT_DEVICE_FAULT, "%s: exit status %d" % (name, EXIT_DEVICE_FAULT), rc)
        finally:
            d.stop()
            log = d.stderr()
            d.close()
    ok = [r for r in results if r[0] == 200]
    unavailable = [r for r in results if r[0] == 503]
    other = [r for r in results if r[0] not in (200, 503)]
    print("%s: %d answered: %d x 200, %d x 503 (%d 'no instance in service'), %d other; "
          "%d connections refused or reset once the drain began" %
          (name, len(results), len(ok), len(unavailable),
           sum(b"no instance in service" in r[3] for r in unavailable), len(other), len(errors)))
    check(len(ok) > 50, "%s: requests ran before the fault" % name, len(ok))
    check(all(r[2] for r in ok), "%s: every 200 has the golden numbers" % name,
          [r for r in ok if not r[2]][:3])
    check(not other, "%s: nothing but 200 and 503" % name, other[:5])
    check(all(r[1] for r in unavailable), "%s: every 503 has Retry-After" % name,
          [r for r in unavailable if not r[1]][:3])
    check("every GPU instance is out of service" in log, "%s: the log says what it did" % name,
          log[-2000:])
    return unavailable


def test_fault_under_load():
    # A model with a CPU instance: the batch that hit the fault and what waited go to the CPU
    # instance, so the only 503s are the drain's ("shutting down"), none the fault's.
    unavailable = fault_under_load("mixed", [{"kind": "gpu", "count": 1},
                                             {"kind": "cpu", "count": 1}], 1500)
    check(all(b"shutting down" in r[3] for r in unavailable),
          "mixed: the fault's batches went to the CPU instance",
          [r for r in unavailable if b"shutting down" not in r[3]][:3])
    # GPU instances only: what waited is answered 503 (with Retry-After, checked above).
    fault_under_load("gpuonly", [{"kind": "gpu", "count": 1}], 1500)


def main():
    out = backends()
    if "stand-in" not in out and "cudasim" not in out:
        print("SKIP: rnnd is not built on the CUDA stand-in (-Dcuda=sim):\n" + out)
        return SKIP
    print(out)
    run_test(test_four_gpus)
    run_test(test_oom_on_one_gpu)
    run_test(test_fault_under_load)
    print("%d passed, %d failed" % (th.passed, th.failed))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
