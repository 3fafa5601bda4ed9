#!/usr/bin/env python3
"""run_on_gpu.py [BUILD]: the GPU check, on a bare GPU machine (docs/GPU.md).

tests/gpu/run-on-gpu.sh runs this with the machine's python3, from a work
tree carried with BUILD (build-gpu), .gpu-debs and .gpu-wheels as `make
gpu-prep` left them.  It assumes nothing of the machine but Python 3 and,
for the numbers, PyTorch with its pip NVIDIA packages; each step is bounded
and writes its result as soon as it has one, so a run cut short still says
what it saw.  In order:

  1. machine: OS, glibc, nvidia-smi, the pip NVIDIA packages, torch;
  2. meson: the carried wheel of the version that configured BUILD;
  3. libraries: the pip packages' CUDA libraries on LD_LIBRARY_PATH, then
     every library a binary of the check lacks (ldd) taken from .gpu-debs;
  4. paths: BUILD's recorded source folder reaches this work tree, and the
     recorded Python of the Python suites is this machine's;
  5. rnnd --backends;
  6. the GPU suites, one meson test each, most telling first, each under its
     own limit (carried meson-logs are deleted first);
  7. tests/bench/gpu_vs_torch.py --quick, its table written row by row.

Results, under $OUT (./gpu-out): summary.txt (read it first), tests.txt
(meson's output), testlog.txt (each suite's own output: errors against
PyTorch, algorithms), bench.md and bench.log.  Exit 0 when every step passed
or skipped (no GPU), 1 otherwise.

Limits, in seconds, from the environment: RNND_GPU_TOTAL_S (420: the whole
run), RNND_GPU_STEP_S (60: each machine, library or rnnd step),
RNND_GPU_BENCH_S (120: kept for the benchmark), RNND_GPU_SUITES
("gpu_random=200,gpu_fleet=0": a suite's own limit; 0 leaves it out).
RNND_GPU_BENCH_ARGS adds arguments to the benchmark; RNND_GPU_WORK (/tmp/rnnd-gpu)
is where the wheel and debs are unpacked.

`python3 tests/gpu/run_on_gpu.py --binaries BUILD` lists the programs the check
runs (tests/gpu/prep.sh takes the packages to carry from their ldd).
"""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (meson test name, limit in seconds): the suites in the order they run.
SUITES = [
    ("cudasim_golden", 60),  # the real cuDNN against the goldens, with no rnnd code between
    ("gpu_golden", 60),
    ("gpu_http", 90),
    ("gpu_fixes", 60),
    ("gpu_memory", 60),
    ("gpu_sequences", 45),
    ("gpu_random", 120),
    ("gpu_fleet", 45),
]
SUITE_NAMES = {"rnnd:gpu", "rnnd:cudasim"}
NV_LIBS = ("libcudnn", "libcublas", "libcudart", "libnvrtc")


def env_seconds(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


class Run:
    """The run's budget, its results folder and its summary."""

    def __init__(self, build, out):
        self.build = build
        self.out = out
        self.t0 = time.time()
        self.total = env_seconds("RNND_GPU_TOTAL_S", 420)
        self.step = env_seconds("RNND_GPU_STEP_S", 60)
        self.bench_reserve = env_seconds("RNND_GPU_BENCH_S", 120)
        self.work = os.environ.get("RNND_GPU_WORK", "/tmp/rnnd-gpu")
        self.failed = []
        os.makedirs(out, exist_ok=True)
        for f in ("summary.txt", "tests.txt", "testlog.txt", "bench.md", "bench.log"):
            if os.path.exists(os.path.join(out, f)):
                os.unlink(os.path.join(out, f))

    def left(self):
        return self.total - (time.time() - self.t0)

    def say(self, text, fail=None):
        """One line (or an indented block) in summary.txt, flushed at once."""
        if fail:
            self.failed.append(fail)
        with open(os.path.join(self.out, "summary.txt"), "a") as f:
            f.write(text.rstrip("\n") + "\n")
        print(text.rstrip("\n"), flush=True)

    def append(self, name, text):
        with open(os.path.join(self.out, name), "a") as f:
            f.write(text)


def bounded(cmd, limit, env=None, stdout=None):
    """Runs cmd in a session of its own for at most `limit` seconds.
    Returns (exit status or None when cut, its output, seconds)."""
    t = time.time()
    try:
        p = subprocess.Popen(cmd, stdout=stdout or subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True, cwd=ROOT)
    except OSError as e:
        return 127, "%s: %s\n" % (cmd[0], e.strerror), 0.0
    try:
        out, _ = p.communicate(timeout=max(1.0, limit))  # trap:bounded
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, _ = p.communicate(timeout=5)
                break
            except subprocess.TimeoutExpired:
                out = None
        return None, (out or b"").decode(errors="replace"), time.time() - t
    return p.returncode, (out or b"").decode(errors="replace"), time.time() - t


def ancestors():
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def sweep(paths):
    """Kills what a cut suite left running: any process whose command line
    names the build or the work tree (a daemon holding GPU memory)."""
    mine = ancestors()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in mine:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if any(p in cmd for p in paths):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


# -- 1. The machine ---------------------------------------------------------

def machine(run):
    osname = "?"
    if os.path.exists("/etc/os-release"):
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)', open("/etc/os-release").read(), re.M)
        osname = m.group(1) if m else "?"
    import platform
    run.say("machine: %s; %s; glibc %s; Python %s (%s); %d CPUs" % (
        platform.node(), osname, platform.libc_ver()[1], platform.python_version(),
        sys.executable, os.cpu_count() or 0))
    rc, out, secs = bounded(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                             "--format=csv,noheader"], min(run.step, 30))
    if rc is None:
        run.say("nvidia-smi: no answer in %.0f s (a wedged driver?)" % secs)
    else:
        run.say("nvidia-smi: " + (out.strip().replace("\n", "; ") or "exit %d" % rc))
    try:
        from importlib import metadata
        nv = sorted("%s %s" % (d.metadata["Name"], d.version) for d in metadata.distributions()
                    if (d.metadata["Name"] or "").lower().startswith(("nvidia-", "torch", "onnxruntime")))
    except Exception as e:  # a broken site-packages must not stop the check
        nv = ["(cannot list: %s)" % e]
    run.say("pip packages: " + (", ".join(nv) or "no NVIDIA or torch packages"))
    rc, out, secs = bounded([sys.executable, "-c",
                             "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda,"
                             " 'cuDNN', torch.backends.cudnn.version(), 'GPU', torch.cuda.is_available())"],
                            run.step)
    run.say("torch: " + ("no answer in %.0f s" % secs if rc is None else
                         out.strip().splitlines()[-1] if out.strip() else "exit %d" % rc))


# -- 2. meson, from the carried wheel ---------------------------------------

def meson_info(build):
    with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
        return json.load(f)


def meson_from_wheel(run):
    """The command that runs the carried meson, or None."""
    want = meson_info(run.build)["meson_version"]["full"]
    wheels = sorted(os.listdir(os.path.join(ROOT, ".gpu-wheels"))) \
        if os.path.isdir(os.path.join(ROOT, ".gpu-wheels")) else []
    whl = [w for w in wheels if w.startswith("meson-%s-" % want) and w.endswith(".whl")]
    if not whl:
        have = shutil.which("meson")
        mine = bounded([have, "--version"], 20)[1].strip() if have else "none"
        run.say("meson: FAILED: no meson %s wheel in .gpu-wheels (it holds: %s); this machine's meson (%s) "
                "cannot read a build folder made by meson %s: run `make gpu-prep` and carry .gpu-wheels"
                % (want, ", ".join(wheels) or "nothing", mine, want), fail="meson")
        return None
    dest = os.path.join(run.work, "meson")
    shutil.rmtree(dest, ignore_errors=True)
    try:
        with zipfile.ZipFile(os.path.join(ROOT, ".gpu-wheels", whl[0])) as z:
            z.extractall(dest)
    except (OSError, zipfile.BadZipFile) as e:
        run.say("meson: FAILED: cannot unpack .gpu-wheels/%s: %s" % (whl[0], e), fail="meson")
        return None
    cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, %r); "
           "from mesonbuild.mesonmain import main; sys.exit(main())" % dest]
    rc, out, _ = bounded(cmd + ["--version"], run.step)
    if rc != 0 or out.strip() != want:  # trap:meson-version
        run.say("meson: FAILED: the wheel's meson says %r (exit %s), not %s" % (out.strip(), rc, want),
                fail="meson")
        return None
    run.say("meson: %s from .gpu-wheels/%s (the version that configured %s)" % (
        want, whl[0], os.path.basename(run.build)))
    return cmd


# -- 3. Libraries -------------------------------------------------------------

def binaries(build):
    """The programs the check runs: the GPU and cudasim suites' own, the
    daemon and the load client the Python suites start, the engine benchmark
    (under `build`, wherever the build was configured)."""
    build = os.path.abspath(build)
    recorded = meson_info(build)["directories"]["build"]
    found = {os.path.join(build, p) for p in ("daemon/rnnd", "clients/rnnd-load",
                                              "tests/bench/rnnd-engine-bench")}
    with open(os.path.join(build, "meson-info", "intro-tests.json")) as f:
        for t in json.load(f):
            if SUITE_NAMES & set(t["suite"]) and t["cmd"][0].startswith(recorded + "/"):
                found.add(build + t["cmd"][0][len(recorded):])
    return sorted(found)


def unpack_deb(path, dest):
    """dpkg -x without dpkg: a .deb is an ar archive holding data.tar.*."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"!<arch>\n":
        raise ValueError("%s is not a Debian package" % path)
    pos = 8
    while pos + 60 <= len(data):
        name = data[pos:pos + 16].decode().strip().rstrip("/")
        size = int(data[pos + 48:pos + 58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if name.startswith("data.tar"):
            if name.endswith(".zst"):  # Python's tarfile has no zstd before 3.14
                subprocess.run(["dpkg-deb", "-x", path, dest], check=True)
                return
            with tarfile.open(fileobj=io.BytesIO(body)) as t:
                if hasattr(tarfile, "fully_trusted_filter"):  # our own packages: links kept as they are
                    t.extractall(dest, filter="fully_trusted")
                else:
                    t.extractall(dest)
            return
    raise ValueError("%s has no data.tar" % path)


def nvidia_lib_dirs():
    """Folders of the pip NVIDIA packages that hold cuDNN, cuBLAS, the CUDA
    runtime or NVRTC (PERSIST_DYNAMIC compiles with it)."""
    try:
        import nvidia
    except ImportError:
        return []
    dirs = set()
    for base in nvidia.__path__:
        for d, _, files in os.walk(base):
            if any(f.startswith(NV_LIBS) and ".so" in f for f in files):
                dirs.add(d)
    return sorted(dirs)


def missing_libs(binary, env):
    """The sonames ldd cannot find for binary, and those found without a
    version it needs (which a carried copy may have)."""
    ldd = shutil.which("ldd")
    cmd = [ldd, binary] if ldd else ["/lib64/ld-linux-x86-64.so.2", "--list", binary]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env).stdout
    gone = set(re.findall(r"^\s*(\S+) => not found", out, re.M))
    gone |= {os.path.basename(p) for p in
             re.findall(r"^\s*\S+: (\S+): version `[^']+' not found", out, re.M)}
    return gone, out


def libraries(run, bins):
    """Sets LD_LIBRARY_PATH so that every binary loads; returns True when so."""
    staged = os.path.join(run.work, "debs")
    lib = os.path.join(run.work, "lib")
    for d in (staged, lib):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    debdir = os.path.join(ROOT, ".gpu-debs")
    debs = sorted(f for f in os.listdir(debdir) if f.endswith(".deb")) if os.path.isdir(debdir) else []
    for f in debs:
        try:
            unpack_deb(os.path.join(debdir, f), staged)
        except (OSError, ValueError, tarfile.TarError, subprocess.CalledProcessError) as e:
            run.say("libraries: cannot unpack .gpu-debs/%s: %s" % (f, e))
    multi = os.path.join(staged, "usr", "lib", "x86_64-linux-gnu")
    # What Debian's install script would do: the OpenBLAS alternative.
    if os.path.exists(os.path.join(multi, "openblas-pthread", "libopenblas.so.0")):
        os.symlink("openblas-pthread/libopenblas.so.0", os.path.join(multi, "libopenblas.so.0"))  # trap:openblas-link
    index = {}
    for d in (multi, os.path.join(staged, "lib", "x86_64-linux-gnu")):
        if os.path.isdir(d):
            for f in os.listdir(d):
                index.setdefault(f, os.path.join(d, f))
    nv = nvidia_lib_dirs()
    path = [lib] + nv + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    os.environ["LD_LIBRARY_PATH"] = ":".join(path)
    run.say("CUDA libraries: " + (", ".join(nv) if nv else
                                  "no pip NVIDIA package folder (import nvidia failed)"))
    taken = {}
    for _ in range(10):  # a carried library may itself need another
        new = False
        for b in bins:
            for so in missing_libs(b, os.environ)[0]:
                if so in index and so not in taken:
                    shutil.copy2(os.path.realpath(index[so]), os.path.join(lib, so))
                    taken[so] = True
                    new = True
        if not new:
            break
    bad = []
    for b in bins:
        gone, out = missing_libs(b, os.environ)
        if gone:
            bad.append("%s: %s" % (os.path.relpath(b, run.build), ", ".join(sorted(gone))))
    if bad:
        run.say("libraries: FAILED: missing on this machine and not in .gpu-debs (%d packages): %s"
                % (len(debs), "; ".join(bad)), fail="libraries")
        return False
    run.say("libraries: every one of %d binaries resolves; from .gpu-debs: %s" % (
        len(bins), ", ".join(sorted(taken)) or "nothing (the machine has them all)"))
    return True


# -- 4. Paths -----------------------------------------------------------------

def paths(run):
    """BUILD records absolute paths (its source, its programs, the Python of
    the Python suites): make each reach this machine's copy."""
    dirs = meson_info(run.build)["directories"]
    src, bld = dirs["source"], dirs["build"]
    for recorded, here in ((src, ROOT), (bld, run.build)):
        if os.path.realpath(recorded) == os.path.realpath(here) or os.path.exists(recorded):
            continue
        try:
            os.makedirs(os.path.dirname(recorded), exist_ok=True)
            os.symlink(here, recorded)
            run.say("paths: %s (where %s was configured) -> %s" % (recorded, os.path.basename(here), here))
        except OSError as e:
            run.say("paths: FAILED: cannot link %s to %s: %s" % (recorded, here, e), fail="paths")
            return False
    with open(os.path.join(run.build, "meson-info", "intro-tests.json")) as f:
        tests = [t for t in json.load(f) if SUITE_NAMES & set(t["suite"])]
    for t in tests:
        prog = t["cmd"][0]
        if os.path.exists(prog):
            continue
        if os.path.basename(prog).startswith("python"):
            os.makedirs(os.path.dirname(prog), exist_ok=True)  # trap:interpreter
            os.symlink(sys.executable, prog)  # trap:interpreter
            run.say("paths: the Python suites' interpreter %s -> %s" % (prog, sys.executable))
        else:
            run.say("paths: FAILED: %s runs %s, which is not here" % (t["name"], prog), fail="paths")
            return False
    return True


# -- 5-7. rnnd, the suites, the benchmark --------------------------------------

def backends(run):
    rc, out, secs = bounded([os.path.join(run.build, "daemon", "rnnd"), "--backends"], run.step)
    state = "cut after %.0f s" % secs if rc is None else "exit %d" % rc
    run.say("rnnd --backends (%s):\n%s" % (state, "".join("    " + l + "\n" for l in out.splitlines())),
            fail=None if rc == 0 else "rnnd")


def suite_limits():
    limits = dict(SUITES)
    for item in filter(None, os.environ.get("RNND_GPU_SUITES", "").split(",")):
        name, _, secs = item.partition("=")
        if name.strip() in limits:
            limits[name.strip()] = float(secs)
    return limits


def suites(run, meson):
    limits = suite_limits()
    with open(os.path.join(run.build, "meson-info", "intro-tests.json")) as f:
        timeouts = {t["name"]: t["timeout"] for t in json.load(f) if SUITE_NAMES & set(t["suite"])}
    logs = os.path.join(run.build, "meson-logs")
    shutil.rmtree(logs, ignore_errors=True)  # trap:stale-logs
    os.makedirs(logs, exist_ok=True)
    for name, _ in SUITES:
        limit = min(limits[name], run.left() - run.bench_reserve)
        if name not in timeouts or limits[name] <= 0:
            run.say("suite %-15s not run (%s)" % (name, "not in this build" if name not in timeouts
                                                  else "RNND_GPU_SUITES"))
            continue
        if meson is None or limit < 5:
            run.say("suite %-15s not run (%s)" % (name, "no meson" if meson is None else "out of time"),
                    fail=name)
            continue
        # meson's own timeout cuts the test at the limit and logs it; ours
        # is the backstop should meson itself hang.
        cmd = meson + ["test", "-C", run.build, "--no-rebuild", "--print-errorlogs", "--logbase", name,
                       "--timeout-multiplier", "%.3f" % (limit / max(1, timeouts[name])), name]
        rc, out, secs = bounded(cmd, limit + 20)
        sweep([run.build, os.path.join(ROOT, "tests")])
        run.append("tests.txt", "=== %s (exit %s, %.1f s)\n%s\n" % (name, rc, secs, out))
        result, detail = suite_result(run, name)
        if rc is None:
            result = "CUT"
        run.say("suite %-15s %-7s %6.1f s (limit %.0f s)%s" % (name, result, secs, limit, detail),
                fail=None if result in ("OK", "SKIP") else name)


def suite_result(run, name):
    """The result meson logged for `name` in this run, and the test's output
    into testlog.txt."""
    log = os.path.join(run.build, "meson-logs", name + ".json")
    if not os.path.exists(log):
        return "NONE", ": meson logged nothing (tests.txt says why)"
    for line in open(log, errors="replace"):
        t = json.loads(line)
        if t.get("name", "").split(" / ")[-1] == name:
            run.append("testlog.txt", "=== %s: %s in %.1f s\n%s%s\n" % (
                name, t.get("result"), t.get("duration") or 0, t.get("stdout") or "", t.get("stderr") or ""))
            res = {"OK": "OK", "SKIP": "SKIP", "EXPECTEDFAIL": "OK"}.get(t.get("result"), t.get("result"))
            first = (t.get("stdout") or "").strip().splitlines()
            return res, (": " + first[0][:120]) if res == "SKIP" and first else ""
    return "NONE", ": not in meson's log"


def bench(run):
    limit = run.left() - 5
    if limit < 20:
        run.say("bench: not run (out of time)", fail="bench")
        return
    cmd = [sys.executable, os.path.join(ROOT, "tests", "bench", "gpu_vs_torch.py"),
           "--bench", os.path.join(run.build, "tests", "bench", "rnnd-engine-bench"), "--quick",
           "--out", os.path.join(run.out, "bench.md")] + os.environ.get("RNND_GPU_BENCH_ARGS", "").split()
    env = dict(os.environ, RNND_BENCH_COMMAND="sh tests/gpu/run-on-gpu.sh %s" % os.path.basename(run.build))
    with open(os.path.join(run.out, "bench.log"), "ab") as log:
        rc, _, secs = bounded(cmd, limit, env=env, stdout=log)
    sweep([run.build])
    state = {None: "CUT at its limit (bench.md has the rows measured)", 0: "OK", 77: "SKIP (no torch or no GPU)"}
    run.say("bench: %s in %.0f s (limit %.0f s)" % (state.get(rc, "FAILED (exit %s; bench.log)" % rc), secs, limit),
            fail=None if rc in (0, 77) else "bench")


def main(argv):
    if len(argv) > 2 and argv[1] == "--binaries":
        print("\n".join(binaries(argv[2])))
        return 0
    build = os.path.abspath(os.path.join(ROOT, argv[1] if len(argv) > 1 else "build-gpu"))
    run = Run(build, os.path.abspath(os.environ.get("OUT") or os.path.join(ROOT, "gpu-out")))
    run.say("run-on-gpu: %s, limit %.0f s (RNND_GPU_TOTAL_S), build %s" % (
        time.strftime("%Y-%m-%d %H:%M:%S %Z"), run.total, build))
    if not os.path.exists(os.path.join(build, "meson-info", "meson-info.json")):
        run.say("build: FAILED: %s is not a meson build folder: carry build-gpu (make gpu-prep)" % build,
                fail="build")
        return 1
    # Every step runs even after one failed: the window on a GPU is short,
    # and what the later steps say is still worth having.
    machine(run)
    meson = meson_from_wheel(run)
    libraries(run, binaries(build))
    paths(run)
    backends(run)
    suites(run, meson)
    bench(run)
    run.say("run-on-gpu: %s in %.0f s of %.0f s%s" % (
        "FAILED" if run.failed else "passed", time.time() - run.t0, run.total,
        " (failed: %s)" % ", ".join(run.failed) if run.failed else ""))
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
