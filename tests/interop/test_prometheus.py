#!/usr/bin/env python3
"""test_prometheus.py: /metrics read by Prometheus's own parsers.

Starts $RNND_BIN with the demo models (config/models), sends inference
requests that succeed and fail, then reads GET /metrics with
prometheus_client's text parser (PyPI prometheus_client, in the venv
tests/run.sh makes) and with promtool (`promtool check metrics`, fetched by
tests/interop/tools.sh; without it that part is reported skipped):

- every family docs/HTTP.md lists is there with its type and samples, and
  nothing undocumented is;
- the samples say what was sent: sequences and requests by code per model.

Exits 77 (meson SKIP) when prometheus_client cannot be imported.
Environment: RNND_BIN, RNND_SRC.
"""

import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as e:
    print("test_prometheus: SKIP: cannot import prometheus_client (%s); tests/run.sh makes .venv-test with it" % e)
    sys.exit(77)

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, SRC, run_test
from fetch_tool import fetch_tool  # noqa: E402

# Every family, as prometheus_client names it (a counter without _total), and its type.
FAMILIES = {
    "rnnd_up": "gauge", "rnnd_models_loaded": "gauge", "rnnd_http_requests_in_flight": "gauge",
    "rnnd_start_time_seconds": "gauge", "rnnd_response_memory_bytes": "gauge", "rnnd_shm_regions": "gauge",
    "rnnd_requests": "counter",
    "rnnd_request_duration_seconds": "histogram", "rnnd_queue_duration_seconds": "histogram",
    "rnnd_compute_duration_seconds": "histogram", "rnnd_batch_size": "histogram",
    "rnnd_batch_padding_efficiency": "histogram",
    "rnnd_inference_count": "counter", "rnnd_execution_count": "counter", "rnnd_batch_steps_used": "counter",
    "rnnd_batch_steps": "counter", "rnnd_batch_compute_seconds": "counter", "rnnd_queue_expired": "counter",
    "rnnd_requests_canceled": "counter", "rnnd_queue_rejected": "counter",
    "rnnd_model_backend_info": "gauge",
    "rnnd_queue_depth": "gauge", "rnnd_batches_running": "gauge", "rnnd_instances_in_service": "gauge",
    "rnnd_sequences_live": "gauge", "rnnd_sequences_started": "counter", "rnnd_sequences_ended": "counter",
    "rnnd_sequences_expired": "counter", "rnnd_sequences_max": "gauge",
    "rnnd_sequences_refused": "counter", "rnnd_model_load_failed": "gauge",
}
DEMO = os.path.join(SRC, "config", "models")
MODELS = tuple(sorted(m for m in os.listdir(DEMO) if os.path.isdir(os.path.join(DEMO, m))))


def documented():
    """The family names docs/HTTP.md's Metrics section gives, as exposed (counters with _total)."""
    with open(os.path.join(SRC, "docs", "HTTP.md")) as f:
        text = f.read()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(rnnd_[a-z_]+)", section))


def exposed_name(fam, typ):
    return fam + "_total" if typ == "counter" else fam


def send(d):
    """Per model: 3 requests of 2 sequences (200) and 2 with a wrong shape (400)."""
    good = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4, 8], "data": [0.5] * 64}]})
    bad = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4, 7], "data": [0.5] * 28}]})
    for m in MODELS:
        for _ in range(3):
            st, _, b = d.json("POST", "/v2/models/%s/infer" % m, body=good)
            check(st == 200, "%s: a good request is 200" % m, (st, b))
        for _ in range(2):
            st, _, b = d.json("POST", "/v2/models/%s/infer" % m, body=bad)
            check(st == 400, "%s: a wrong shape is 400" % m, (st, b))


def test_python_parser(text):
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    check(set(fams) == set(FAMILIES), "the parser sees exactly the known families",
          sorted(set(fams) ^ set(FAMILIES)))
    check({exposed_name(f, t) for f, t in FAMILIES.items()} == documented(),
          "docs/HTTP.md documents exactly the exposed families",
          sorted({exposed_name(f, t) for f, t in FAMILIES.items()} ^ documented()))
    for name, typ in FAMILIES.items():
        f = fams.get(name)
        if not check(f is not None, "family %s is parsed" % name):
            continue
        check(f.type == typ, "family %s is a %s" % (name, typ), f.type)
        if name.startswith("rnnd_sequences_"):
            # Only models with a sequence block have these (test_sequences.py reads them):
            # of the demo models, digits_stream.
            check({x.labels.get("model") for x in f.samples} == {"digits_stream"},
                  "family %s has samples for the model with a sequence block only" % name,
                  f.samples[:3])
            continue
        check(len(f.samples) > 0, "family %s has samples" % name, f.documentation)
        if name not in ("rnnd_up", "rnnd_models_loaded", "rnnd_http_requests_in_flight", "rnnd_requests",
                        "rnnd_model_load_failed", "rnnd_start_time_seconds",
                        "rnnd_response_memory_bytes", "rnnd_shm_regions"):
            for m in MODELS:
                check(any(s.labels.get("model") == m and s.labels.get("version") == "1" for s in f.samples),
                      "family %s has a sample for %s version 1" % (name, m), f.samples[:3])

    def value(fam, sample, **labels):
        f = fams.get(fam)
        for s in f.samples if f is not None else ():
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        return None

    check(value("rnnd_up", "rnnd_up") == 1, "rnnd_up is 1")
    check(value("rnnd_models_loaded", "rnnd_models_loaded") == len(MODELS), "rnnd_models_loaded counts the models")
    for m in MODELS:
        check(value("rnnd_model_load_failed", "rnnd_model_load_failed", model=m) == 0,
              "%s: rnnd_model_load_failed is 0" % m)
        check(value("rnnd_requests", "rnnd_requests_total", model=m, version="1", code="200") == 3,
              "%s: 3 requests answered 200" % m)
        check(value("rnnd_requests", "rnnd_requests_total", model=m, version="1", code="400") == 2,
              "%s: 2 requests answered 400" % m)
        check(value("rnnd_inference_count", "rnnd_inference_count_total", model=m, version="1") == 6,
              "%s: 6 sequences run" % m)
        check(value("rnnd_request_duration_seconds", "rnnd_request_duration_seconds_count", model=m,
                    version="1") == 3, "%s: the request histogram counts the 3 successes" % m)
        check(value("rnnd_batch_steps_used", "rnnd_batch_steps_used_total", model=m, version="1") == 24,
              "%s: 24 steps used (6 sequences of 4)" % m)
        check((value("rnnd_instances_in_service", "rnnd_instances_in_service", model=m, version="1") or 0) >= 1,
              "%s: an instance in service" % m)


def test_promtool(text):
    path, why = fetch_tool("promtool", SRC)
    if path is None:
        print("test_prometheus: promtool part skipped: %s" % why[1])
        return
    p = subprocess.run([path, "check", "metrics"], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    check(p.returncode == 0 and p.stdout.strip() == "", "promtool check metrics: no problem", p.stdout[-2000:])


def main():
    t0 = time.time()
    d = Daemon(repo=DEMO)
    try:
        send(d)
        # The server counts a request once its answer went out, a moment after the client
        # has it (longer under the sanitizers): wait for the last model's last 400.
        last = 'rnnd_requests_total{model="%s",version="1",code="400"} 2\n' % MODELS[-1]
        deadline = time.time() + 5
        while time.time() < deadline and last not in d.request("GET", "/metrics")[2].decode():
            time.sleep(0.05)
        st, h, body = d.request("GET", "/metrics")
        check(st == 200 and h.get("content-type", "").startswith("text/plain; version=0.0.4"),
              "GET /metrics is text format 0.0.4", (st, h))
        text = body.decode()
        run_test(test_python_parser, text)
        run_test(test_promtool, text)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", rc)
    finally:
        d.close()
    print("test_prometheus: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
