#!/usr/bin/env python3
"""test_monitoring.py: deploy/monitoring's alerting rules and Grafana dashboard.

- `promtool check rules` on deploy/monitoring/rnnd-alerts.yaml;
- `promtool test rules` on tests/monitoring/rnnd-alerts.test.yaml, which has, for every
  alert of the file, a time where it fires (for its series, and not for the one beside it
  that must stay silent) and a time where nothing fires;
- the dashboard (deploy/monitoring/rnnd-dashboard.json): valid JSON, unique panel ids,
  panels that do not overlap on the grid, the datasource a variable, and every query's
  PromQL accepted by `promtool check rules` (as a recording rule, with the dashboard's
  variables replaced);
- every rnnd metric the rules and the dashboard name is one rnnd exposes, as docs/HTTP.md's
  Metrics section lists them (tests/interop/test_prometheus.py holds HTTP.md to /metrics).

promtool comes from tests/interop/tools.sh (Debian 13's package, unpacked, never
installed); without it the test SKIPs (77).  Python 3 standard library only.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("RNND_SRC", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SRC, "tests", "interop"))
from fetch_tool import fetch_tool  # noqa: E402
import rnndtest as th  # noqa: E402  (the harness, tests/support: its check and counts)
from rnndtest import check  # noqa: E402

RULES = os.path.join(SRC, "deploy", "monitoring", "rnnd-alerts.yaml")
DASHBOARD = os.path.join(SRC, "deploy", "monitoring", "rnnd-dashboard.json")
RULE_TESTS = os.path.join(HERE, "rnnd-alerts.test.yaml")


def documented():
    """The metric names docs/HTTP.md's Metrics section gives."""
    with open(os.path.join(SRC, "docs", "HTTP.md")) as f:
        section = f.read().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(rnnd_[a-z_]+)", section))


def used_names(text, known):
    """The rnnd_ metric names text uses, a histogram's _bucket, _sum and _count as the family."""
    out = set()
    for n in re.findall(r"\brnnd_[a-z_]+", text):
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        out.add(n if n in known or base not in known else base)
    return out


def dashboard_exprs(dash):
    panels = []
    for p in dash["panels"]:
        panels.append(p)
        panels.extend(p.get("panels", []))
    return panels, [(p["title"], t["expr"]) for p in panels for t in p.get("targets", [])]


def check_dashboard(promtool, known):
    with open(DASHBOARD) as f:
        dash = json.load(f)
    panels, exprs = dashboard_exprs(dash)
    ids = [p["id"] for p in panels]
    check(len(ids) == len(set(ids)), "dashboard: panel ids are unique", ids)
    boxes = [(p["title"], p["gridPos"]) for p in panels]
    for i, (ta, a) in enumerate(boxes):
        check(0 <= a["x"] and a["x"] + a["w"] <= 24, "dashboard: %s fits the 24 columns" % ta, a)
        for tb, b in boxes[i + 1:]:
            apart = (a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"] or
                     a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"])
            check(apart, "dashboard: %s and %s do not overlap" % (ta, tb), (a, b))
    check(all(p.get("datasource", {}).get("uid") == "${datasource}" for p in panels
              if p["type"] != "row"), "dashboard: every panel reads the datasource variable")
    names = {v["name"] for v in dash["templating"]["list"]}
    check(names == {"datasource", "instance", "model"}, "dashboard: its variables", names)
    check(len(exprs) >= 20, "dashboard: its queries", len(exprs))
    # Every query through promtool's PromQL parser, the variables replaced.
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for k, (title, e) in enumerate(exprs):
        e = e.replace("$__rate_interval", "5m").replace("$instance", ".*").replace("$model", ".*")
        rules += ["      - record: dashboard:query_%d" % k, "        expr: %s" % json.dumps(e)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("\n".join(rules) + "\n")
    try:
        r = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True,
                           timeout=60)
        check(r.returncode == 0 and "SUCCESS: %d rules found" % len(exprs) in r.stdout,
              "dashboard: every query parses (promtool check rules)", r.stdout + r.stderr)
    finally:
        os.unlink(f.name)
    text = "\n".join(e for _, e in exprs) + "\n".join(
        v.get("definition", "") for v in dash["templating"]["list"])
    unknown = used_names(text, known) - known
    check(not unknown, "dashboard: every metric it reads is one rnnd exposes", sorted(unknown))
    return used_names(text, known)


def main():
    promtool, why = fetch_tool("promtool", SRC)
    if promtool is None:
        print(why[1])
        return 77 if why[0] == 77 else 1
    known = documented()
    check(len(known) >= 25, "docs/HTTP.md lists the metrics", sorted(known))
    r = subprocess.run([promtool, "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "SUCCESS" in r.stdout, "promtool check rules", r.stdout + r.stderr)
    r = subprocess.run([promtool, "test", "rules", os.path.basename(RULE_TESTS)], cwd=HERE,
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "SUCCESS" in r.stdout, "promtool test rules", r.stdout + r.stderr)
    with open(RULES) as f:
        rules_text = f.read()
    with open(RULE_TESTS) as f:
        tests_text = f.read()
    alerts = re.findall(r"^ +- alert: (\w+)$", rules_text, re.M)
    check(len(alerts) >= 7, "the rules file's alerts", alerts)
    for a in alerts:
        fires = re.search(r"alertname: %s\n +exp_alerts:\n +- exp_labels" % a, tests_text)
        silent = re.search(r"alertname: %s\n +exp_alerts: \[\]" % a, tests_text)
        check(fires and silent, "%s: a test case where it fires and one where it does not" % a)
    unknown = used_names(rules_text, known) - known
    check(not unknown, "the rules read only metrics rnnd exposes", sorted(unknown))
    shown = check_dashboard(promtool, known)
    for m in ("rnnd_requests_total", "rnnd_request_duration_seconds", "rnnd_queue_depth",
              "rnnd_batch_size", "rnnd_instances_in_service", "rnnd_model_load_failed",
              "rnnd_sequences_live"):
        check(m in shown, "the dashboard shows %s" % m)
    print("test_monitoring: %d passed, %d failed" % (th.passed, th.failed))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
