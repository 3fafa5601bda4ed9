#!/usr/bin/env python3
"""test_manifests.py: deploy/'s container build file and Kubernetes manifests,
checked offline (issue 20; docs/OPERATIONS.md "Kubernetes"):

1. every manifest of deploy/kubernetes and deploy/kserve against its published
   schema (tests/kubernetes/manifests.py: kubernetes-validate for Kubernetes'
   kinds, the kserve wheel's models for ServingRuntime and InferenceService),
   and damaged copies of them rejected, so that the check can fail;
2. what the manifests say of rnnd against the daemon itself: each container's
   args are settings rnnd accepts (--dump-config), its port is the one it
   listens on and probes, its repository is what is mounted (or KServe's
   /mnt/models), the GPU image goes with nvidia.com/gpu; then the daemon is
   started with those args (port and repository made local) and every probe
   path and the scrape path answer 200;
3. deploy/container/Containerfile: the runtime packages provide every library
   the daemon links (dpkg -S), the build packages every pkg-config module the
   build uses, the user and port agree with the manifests, and the image's CMD
   parses.

Runs in the venv tests/run.sh makes (kubernetes-validate, kserve without its
dependencies); SKIPs (77) without it.  Prints "N passed, N failed".
"""

import copy
import glob
import os
import re
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import manifests as mf
    checker = mf.Checker()
except (ImportError, RuntimeError) as e:
    print("test_manifests: SKIP: %s; tests/run.sh makes .venv-test with kubernetes-validate "
          "and kserve" % e)
    sys.exit(77)

import rnndtest as th  # the harness (tests/support)
from rnndtest import check, SRC, run_test

DEPLOY = os.path.join(SRC, "deploy")
CONTAINERFILE = os.path.join(DEPLOY, "container", "Containerfile")
USER_ID = 10001
PORT = 8080
GRPC_PORT = 8081  # the gRPC front end's, where a container has one (docs/HTTP.md, "gRPC")


def documents():
    """[(file, document)] of every manifest of deploy/kubernetes and deploy/kserve (not
    deploy/monitoring's Prometheus rules, which tests/monitoring checks)."""
    out = []
    for path in sorted(glob.glob(os.path.join(DEPLOY, "kubernetes", "*.yaml")) +
                       glob.glob(os.path.join(DEPLOY, "kserve", "*.yaml"))):
        out += [(os.path.relpath(path, SRC), d) for d in mf.load(path)]
    return out


def name_of(doc):
    return "%s/%s" % (doc.get("kind"), doc.get("metadata", {}).get("name"))


def test_schemas(docs):
    kinds = sorted(name_of(d) for _, d in docs)
    for want in ("Deployment/rnnd", "Deployment/rnnd-gpu", "Service/rnnd", "ServingRuntime/rnnd",
                 "ServingRuntime/rnnd-gpu", "InferenceService/digits", "InferenceService/digits-gpu"):
        check(want in kinds, "deploy/ has " + want, kinds)
    for path, doc in docs:
        problems = checker.check_document(doc)
        check(not problems, "%s: %s validates" % (path, name_of(doc)), "; ".join(problems))

    # The check must be able to fail: each damage below is rejected.
    by_name = {name_of(d): d for _, d in docs}

    def damaged(name, where, change):
        doc = copy.deepcopy(by_name[name])
        change(doc)
        problems = checker.check_document(doc)
        check(problems, "%s with %s is rejected" % (name, where))
        return problems

    def pod(d):
        return d["spec"]["template"]["spec"]

    damaged("Deployment/rnnd", "a misspelt container field",
            lambda d: pod(d)["containers"][0].update(imagePullPolcy="Always"))
    damaged("Deployment/rnnd", "a string for a port number",
            lambda d: pod(d)["containers"][0]["ports"][0].update(containerPort="8080"))
    damaged("Service/rnnd", "no ports' list", lambda d: d["spec"].update(ports={"port": 8080}))
    damaged("ServingRuntime/rnnd", "autoselect for autoSelect",
            lambda d: d["spec"]["supportedModelFormats"][0].update(autoselect=True))
    damaged("ServingRuntime/rnnd", "a string for protocolVersions",
            lambda d: d["spec"].update(protocolVersions="v2"))
    damaged("ServingRuntime/rnnd", "no containers", lambda d: d["spec"].pop("containers"))
    damaged("ServingRuntime/rnnd", "a bad probe in a container",
            lambda d: d["spec"]["containers"][0]["readinessProbe"]["httpGet"].update(path=["/"]))
    damaged("ServingRuntime/rnnd", "a list for resource limits",
            lambda d: d["spec"]["containers"][0]["resources"].update(limits=["cpu"]))
    damaged("InferenceService/digits", "a model without its format",
            lambda d: d["spec"]["predictor"]["model"].pop("modelFormat"))
    damaged("InferenceService/digits", "storageURI for storageUri",
            lambda d: d["spec"]["predictor"]["model"].update(storageURI="pvc://x"))
    damaged("InferenceService/digits", "the wrong API version",
            lambda d: d.update(apiVersion="serving.kserve.io/v9"))


def settings(args):
    """{key: value} of --key=value args."""
    out = {}
    for a in args:
        m = re.match(r"--([a-z_]+)=(.*)$", a)
        if check(m, "arg %r is --key=value" % a):
            out[m.group(1)] = m.group(2)
    return out


def dump_config(args):
    return subprocess.run([th.BIN] + list(args) + ["--dump-config"], capture_output=True, text=True)


def probe_paths(c):
    """(probe, path, port) of the httpGet probes; a gRPC probe's path is "grpc:SERVICE"."""
    out = []
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = c.get(probe, {}).get("httpGet")
        rpc = c.get(probe, {}).get("grpc")
        if check(get or rpc, "%s has an httpGet or grpc %s" % (c["name"], probe)):
            out.append((probe, get["path"], get["port"]) if get else
                       (probe, "grpc:" + rpc.get("service", ""), rpc["port"]))
    return out


def test_containers(docs):
    for path, doc in docs:
        for where, c in mf.containers(doc):
            what = "%s %s %s" % (path, name_of(doc), where)
            r = dump_config(c["args"])
            check(r.returncode == 0, what + ": rnnd accepts its args", r.stderr[-500:])
            s = settings(c["args"])
            check(s.get("listen") == "0.0.0.0:%d" % PORT, what + ": listens on 0.0.0.0:%d" % PORT, s)
            ports = [p["containerPort"] for p in c.get("ports", [])]
            grpc = s.get("grpc_listen") == "0.0.0.0:%d" % GRPC_PORT
            check(ports == ([PORT, GRPC_PORT] if grpc else [PORT]),
                  what + ": declares port %d (and %d for --grpc_listen)" % (PORT, GRPC_PORT), ports)
            named = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            for probe, ppath, port in probe_paths(c):
                want = GRPC_PORT if ppath.startswith("grpc:") else PORT
                check(named.get(port, port) == want, "%s: %s on port %d" % (what, probe, want), port)
            if doc["kind"] == "ServingRuntime":
                check(s.get("model_repository") == "/mnt/models",
                      what + ": the repository is KServe's /mnt/models", s)
                check(c["name"] == "kserve-container", what + ": named kserve-container")
                ann = doc["spec"].get("annotations", {})
                check(ann.get("prometheus.kserve.io/port") == str(PORT) and
                      ann.get("prometheus.kserve.io/path") == "/metrics", what + ": scraped at :8080/metrics", ann)
            else:
                mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
                check(s.get("model_repository") in mounts, what + ": the repository is a mounted volume",
                      (s.get("model_repository"), mounts))
                ann = doc["spec"]["template"]["metadata"].get("annotations", {})
                check(ann.get("prometheus.io/port") == str(PORT) and ann.get("prometheus.io/path") == "/metrics",
                      what + ": scraped at :8080/metrics", ann)
                sec = doc["spec"]["template"]["spec"].get("securityContext", {})
                check(sec.get("runAsNonRoot") is True and sec.get("runAsUser") == USER_ID,
                      what + ": runs as uid %d, not root" % USER_ID, sec)
            gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            check((c["image"] == "rnnd:gpu") == (gpus is not None),
                  what + ": the gpu image if and only if it asks for nvidia.com/gpu", (c["image"], gpus))
            check(c["image"] in ("rnnd:cpu", "rnnd:gpu"), what + ": an image the Containerfile builds",
                  c["image"])
            serve_like(c, what)
    for path, doc in docs:
        if doc["kind"] == "InferenceService":
            model = doc["spec"]["predictor"]["model"]
            runtimes = [name_of(d).split("/")[1] for _, d in docs if d["kind"] == "ServingRuntime"]
            check(model.get("runtime") in runtimes, "%s: runtime is one of deploy/kserve's" % name_of(doc))
            check(model["modelFormat"]["name"] == "rnnd" and model.get("protocolVersion") == "v2",
                  "%s: format rnnd over v2" % name_of(doc), model)


def serve_like(c, what):
    """rnnd started with the container's args answers its probes and scrape."""
    args = [a for a in c["args"] if not a.startswith(("--listen=", "--grpc_listen=", "--model_repository="))]
    d = th.Daemon(*args, repo=os.path.join(SRC, "config", "models"))
    try:
        paths = [p for _, p, _ in probe_paths(c)] + ["/metrics"]
        for p in paths:
            if p.startswith("grpc:"):
                check(grpc_serving(d.grpc_port, p[5:]),
                      "%s: the gRPC health check of %r is SERVING in rnnd with its args" % (what, p[5:]))
                continue
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (d.port, p), timeout=10) as r:
                check(r.status == 200, "%s: GET %s answers 200 from rnnd with its args" % (what, p), r.status)
    finally:
        rc, _ = d.stop()
        check(rc == 0, what + ": SIGTERM drains and exits 0", rc)
        d.close()


def grpc_serving(port, service):
    """Whether grpc.health.v1's Check (the kubelet's grpc probe) says SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        r = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        return r.status == health_pb2.HealthCheckResponse.SERVING


def containerfile_args():
    """{ARG name: default} of the Containerfile, continuation lines joined."""
    with open(CONTAINERFILE) as f:
        text = f.read().replace("\\\n", " ")
    return {m.group(1): m.group(2).split() for m in re.finditer(r'^ARG (\w+)="([^"]*)"', text, re.M)}, text


def needed_libraries(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def package_of(path):
    """The Debian package that installed path; with /usr merged, a package may have installed
    it under /lib (zlib1g's libz.so.1), which the dynamic linker resolves as /usr/lib."""
    for p in (path, re.sub(r"^/usr/lib/", "/lib/", path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0]
    return None


def depends(pkg):
    """The package names pkg depends on (installed here), alternatives included."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", pkg], capture_output=True, text=True)
    return re.findall(r"([a-z0-9][a-z0-9.+-]+)", re.sub(r"\([^)]*\)", "", r.stdout))


def resolved(lib):
    """Where the dynamic linker finds lib for the daemon (ldd), realpath'd."""
    out = subprocess.run(["ldd", th.BIN], capture_output=True, text=True).stdout
    m = re.search(r"^\s*%s => (\S+)" % re.escape(lib), out, re.M)
    return os.path.realpath(m.group(1)) if m else None


# Libraries the image's base has (Essential: yes in Debian) or that only a
# sanitizer build links; NVIDIA's libraries by their package in NVIDIA's repository.
BASE = ("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2")
SANITIZER = ("libasan", "libubsan")
NVIDIA = {"libcudart.so.13": "cuda-cudart-13-0", "libcublas.so.13": "libcublas-13-0",
          "libcublasLt.so.13": "libcublas-13-0", "libcudnn.so.9": "libcudnn9-cuda-13"}


def test_containerfile():
    args, text = containerfile_args()
    runtime, gpu_runtime = set(args.get("RUNTIME_PACKAGES", [])), set(args.get("GPU_RUNTIME_PACKAGES", []))
    build, gpu_build = set(args.get("BUILD_PACKAGES", [])), set(args.get("GPU_BUILD_PACKAGES", []))
    check(runtime and gpu_runtime and build and gpu_build, "the Containerfile's package lists", args)
    for lib in needed_libraries(th.BIN):
        if lib in BASE or lib.startswith(SANITIZER):
            continue
        if lib in NVIDIA:
            check(NVIDIA[lib] in gpu_runtime, "the gpu image installs %s for %s" % (NVIDIA[lib], lib),
                  gpu_runtime)
            continue
        where = resolved(lib)
        pkg = where and package_of(where)
        check(pkg in runtime, "the runtime packages provide %s (%s, Debian's %s)" % (lib, where, pkg),
              sorted(runtime))
    for module in ("jansson", "openblas", "libuv", "libmicrohttpd", "libsystemd", "libcurl", "zlib", "check"):
        r = subprocess.run(["pkg-config", "--variable=pcfiledir", module], capture_output=True, text=True)
        pc = os.path.join(r.stdout.strip(), module + ".pc")
        pkg = package_of(os.path.realpath(pc)) if r.returncode == 0 else None
        if module == "check":   # only the tests use it, and the image builds with -Dtests=false
            check(pkg not in build, "the build stage leaves Check out (-Dtests=false)", pkg)
        else:
            check(pkg in build or any(pkg in depends(b) for b in build),
                  "the build packages provide pkg-config's %s (%s)" % (module, pkg), sorted(build))
    check(re.search(r"-Dtests=false", text) and text.count("-Dcuda=disabled") == 1
          and text.count("-Dcuda=enabled") == 1, "the cpu build has no cuDNN, the gpu build has it")
    users = re.findall(r"^USER (\S+)", text, re.M)
    check(users and users[-1] == "%d:%d" % (USER_ID, USER_ID) and
          all(u in ("root", "%d:%d" % (USER_ID, USER_ID)) for u in users),
          "both images end as user %d, not root" % USER_ID, users)
    stages = re.split(r"^FROM ", text, flags=re.M)
    for stage in stages:
        if stage.split()[-1:] and re.match(r"\S+ AS (cpu|gpu)\s", stage):
            check(re.search(r"^USER %d:%d\s*$" % (USER_ID, USER_ID), stage, re.M),
                  "stage %s runs as %d" % (stage.split()[2], USER_ID))
            check("VOLUME /models" in stage, "stage %s has the repository volume" % stage.split()[2])
    check(re.search(r"^EXPOSE %d %d$" % (PORT, GRPC_PORT), text, re.M),
          "the image exposes %d and %d (gRPC)" % (PORT, GRPC_PORT))
    m = re.search(r"^CMD (\[.*\])$", text, re.M)
    import json
    cmd = json.loads(m.group(1)) if m else []
    r = dump_config(cmd)
    check(r.returncode == 0 and "model_repository = /models" in r.stdout and "listen = 0.0.0.0:%d" % PORT in r.stdout
          and "grpc_listen = 0.0.0.0:%d" % GRPC_PORT in r.stdout,
          "rnnd accepts the image's CMD: 0.0.0.0:%d, gRPC on %d, the repository /models" % (PORT, GRPC_PORT),
          r.stderr[-400:])
    with open(os.path.join(SRC, ".dockerignore")) as f:
        ignore = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    for p in ("build*", ".venv*", ".git"):
        check(p in ignore, ".dockerignore keeps %s out of the build context" % p, ignore)


def main():
    docs = documents()
    run_test(test_schemas, docs)
    run_test(test_containers, docs)
    run_test(test_containerfile)
    print("test_manifests: %d passed, %d failed" % (th.passed, th.failed))
    sys.exit(1 if th.failed else 0)


if __name__ == "__main__":
    main()
