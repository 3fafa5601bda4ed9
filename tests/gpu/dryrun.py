#!/usr/bin/env python3
"""dryrun.py WORKDIR: the GPU check rehearsed on a bare machine without a GPU.

A GPU machine is lent for one short window, bare: none of rnnd's Debian
libraries, another meson, another Python, no /usr/local/cuda, no network.
This test makes such a machine and runs the check there as the device tool
would, so that the window is not spent finding out what is missing:

  1. `make gpu-prep`'s script (tests/gpu/prep.sh) builds the carry set;
  2. a Debian trixie root (debootstrap minbase with python3 and trixie's own
     meson, so not the version that configured build-gpu) gets the work
     tree as the device tool copies it (git's tracked and untracked, not
     ignored, files) plus build-gpu, .gpu-debs and .gpu-wheels, at another
     path than here; meson-logs of an earlier run are planted in build-gpu;
     the CUDA toolkit's libraries appear where pip's NVIDIA packages put them
     (a namespace package `nvidia` on PYTHONPATH); nvidia-smi hangs;
  3. tests/gpu/run-on-gpu.sh runs there, in new mount and PID namespaces,
     with short limits.

It passes when the script ends by itself within its limit, exits 0, every
library of every binary resolves, rnnd says plainly that there is no GPU,
meson (the carried one) reaches every GPU suite, which skips, the hung
nvidia-smi is cut, and what comes back is at most 6 files, none of them a
planted log.  Then each trap that once spent a GPU window is planted in
turn (a carried package or the wheel removed, a line of run_on_gpu.py marked
`# trap:NAME` undone), and the same checks must fail, at the named check.

Needs root, debootstrap, unshare and Debian's mirror, apt and PyPI for the
carry set, and the CUDA toolkit; exits 77 (skip) without them.  About 8
minutes on the 2-core development host, so `make test` runs it once, in the
normal tree.  Prints "N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tests", "container"))
from build_rootfs import Builder, MIRROR, sh  # noqa: E402  (the container suite's roots)
SUITE = "trixie"
CUDA_LIB = "/usr/local/cuda/lib64"
CARRY = ("build-gpu", ".gpu-debs", ".gpu-wheels")
HOME = "/root/gpu/rnnd"       # the work tree inside the root: not where it was built
LIMIT = 60                    # RNND_GPU_TOTAL_S inside the root
STALE = "STALE-CARRIED-LOG"
SKIP = 77

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok: " + what, flush=True)
    else:
        failed += 1
        print("FAIL: %s: %s" % (what, str(detail)[-1500:]), flush=True)
    return ok


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


# How a marked line is undone where not by `pass`.
UNDO = {
    "bounded": ("timeout=max(1.0, limit)", "timeout=None"),
    "meson-version": ("out.strip() != want", "False"),
}


def mutate(text, trap):
    """run_on_gpu.py with the lines marked `# trap:TRAP` undone."""
    lines = []
    for line in text.splitlines(True):
        if "# trap:" + trap in line:
            if trap in UNDO:
                line = line.replace(*UNDO[trap])
            else:
                line = line[:len(line) - len(line.lstrip())] + "pass\n"
        lines.append(line)
    out = "".join(lines)
    assert out != text, "no line of run_on_gpu.py is marked trap:" + trap
    return out


def unmount_under(root):
    """Unmounts whatever this mount namespace has under root, deepest first: what a run
    killed before its namespace ended may have left there."""
    prefix = os.path.realpath(root) + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def remove_machine(root):
    if os.path.exists(root):
        unmount_under(root)
        sh(["rm", "-rf", "--one-file-system", root])


def make_machine(work, base, plant):
    """A fresh copy of the base root holding what the device tool carries."""
    root = os.path.join(work, "machine")
    remove_machine(root)
    sh(["cp", "-a", base, root])
    home = root + HOME
    os.makedirs(home)
    sh("git -C %s ls-files -z --cached --others --exclude-standard | tar -C %s --null -T - -cf - "
       "| tar -C %s -xf -" % (SRC, SRC, home))
    for d in CARRY:
        sh(["cp", "-a", os.path.join(SRC, d), home])
    logs = os.path.join(home, "build-gpu", "meson-logs")
    os.makedirs(logs, exist_ok=True)
    for name in ["testlog"] + [s for s in suites_of()]:
        with open(os.path.join(logs, name + ".json"), "w") as f:
            f.write(json.dumps({"name": "rnnd:gpu / " + name, "result": "OK", "duration": 1.0,
                                "stdout": STALE + "\n"}) + "\n")
        with open(os.path.join(logs, name + ".txt"), "w") as f:
            f.write(STALE + "\n")
    for path in plant.get("remove", []):
        for f in os.listdir(os.path.join(home, os.path.dirname(path) or ".")):
            if re.fullmatch(os.path.basename(path), f):
                sh(["rm", "-rf", os.path.join(home, os.path.dirname(path), f)])
    if plant.get("other meson"):
        # The bare machine's own meson, packed as if it were build-gpu's wheel.
        whl = [f for f in os.listdir(home + "/.gpu-wheels") if f.endswith(".whl")][0]
        os.unlink(os.path.join(home, ".gpu-wheels", whl))
        sh("cd %s/usr/lib/python3/dist-packages && python3 -m zipfile -c %s/.gpu-wheels/%s mesonbuild"
           % (root, home, whl))
    for trap in plant.get("traps", []):
        p = os.path.join(home, "tests", "gpu", "run_on_gpu.py")
        with open(p) as f:
            text = mutate(f.read(), trap)
        with open(p, "w") as f:
            f.write(text)
    os.makedirs(root + "/opt/pip-nvidia/nvidia/cu13/lib")
    with open(root + "/usr/local/bin/nvidia-smi", "w") as f:
        f.write("#!/bin/sh\n# a driver that never answers\nsleep 600\n")
    os.chmod(root + "/usr/local/bin/nvidia-smi", 0o755)
    return root


# The machine's process group while it runs: in a session of its own, so that a signal to
# this script does not reach it; on_signal ends it, and with it its mount namespace, so
# that no mount outlives a killed run (a root still mounted is what the next run copies
# over).
RUNNING = []


def on_signal(signum, frame):
    for p in RUNNING:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(128 + signum)


def suites_of():
    sys.path.insert(0, os.path.join(SRC, "tests", "gpu"))
    import run_on_gpu
    return [name for name, _ in run_on_gpu.SUITES]


def run_machine(root):
    """Runs the one command in the root; returns (exit or None, seconds, results)."""
    env = ("env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "
           "OUT=/root/gpu-out PYTHONPATH=/opt/pip-nvidia RNND_GPU_TOTAL_S=%d RNND_GPU_STEP_S=10 "
           "RNND_GPU_BENCH_S=15" % LIMIT)
    script = ("mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && "
              "mount --bind {cuda} {r}/opt/pip-nvidia/nvidia/cu13/lib && "
              "exec chroot {r} {env} sh -c 'cd {home} && sh tests/gpu/run-on-gpu.sh build-gpu'").format(
                  r=root, cuda=os.path.realpath(CUDA_LIB), env=env, home=HOME)
    t = time.time()
    p = subprocess.Popen(["unshare", "-m", "-p", "-f", "--propagation", "private", "sh", "-ec", script],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    RUNNING.append(p)
    try:
        out, _ = p.communicate(timeout=LIMIT + 30)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        rc = None
    finally:
        RUNNING.remove(p)
    secs = time.time() - t
    print(out.decode(errors="replace"), flush=True)
    results = {}
    outdir = root + "/root/gpu-out"
    for f in sorted(os.listdir(outdir)) if os.path.isdir(outdir) else []:
        with open(os.path.join(outdir, f), errors="replace") as fh:
            results[f] = fh.read()
    return rc, secs, results


def verdicts(rc, secs, results, build_meson, suites):
    """Each check's name and whether it held."""
    s = results.get("summary.txt", "")
    return {
        "limits": rc is not None and secs < LIMIT + 10 and re.search(r"^run-on-gpu: \w+ in \d+ s of %d s" % LIMIT, s, re.M),
        "exit": rc == 0,
        "meson": "meson: %s from .gpu-wheels/" % build_meson in s,
        "libraries": re.search(r"^libraries: every one of \d+ binaries resolves", s, re.M) is not None,
        "no gpu": "cuDNN backend: built" in s and "GPUs: none (no NVIDIA driver is installed" in s,
        "suites": all(re.search(r"^suite %s +SKIP " % n, s, re.M) for n in suites),
        "nvidia-smi cut": "nvidia-smi: no answer in" in s,
        "results": 0 < len(results) <= 6 and not any(STALE in v for v in results.values()),
    }


PLANTS = [
    # (what, how, the check that must then fail)
    ("the meson wheel left behind", {"remove": [".gpu-wheels"]}, "suites"),
    ("the OpenBLAS alternative link not made", {"traps": ["openblas-link"]}, "libraries"),
    ("libquadmath0 not carried", {"remove": [".gpu-debs/libquadmath0_.*\\.deb"]}, "libraries"),
    ("GnuTLS not carried", {"remove": [".gpu-debs/libgnutls30_.*\\.deb"]}, "libraries"),
    ("the recorded Python left as it is", {"traps": ["interpreter"]}, "suites"),
    ("another meson in the wheel, unchecked", {"other meson": True, "traps": ["meson-version"]}, "suites"),
    ("... and the carried logs kept", {"other meson": True, "traps": ["meson-version", "stale-logs"]},
     "results"),
    ("no time limits", {"traps": ["bounded"]}, "limits"),
]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    work = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0:
        skip("needs root (chroot, mounts)")
    for tool in ("debootstrap", "unshare", "chroot", "apt-get", "dpkg"):
        if shutil.which(tool) is None:
            skip("no %s" % tool)
    if not os.path.exists(os.path.join(CUDA_LIB, "libcudnn.so.9")):
        skip("no CUDA toolkit with cuDNN 9 in /usr/local/cuda to build build-gpu with")
    os.makedirs(work, exist_ok=True)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        base = Builder(work).debootstrap(SUITE, include=("python3", "meson"))
    except subprocess.CalledProcessError as e:
        skip("debootstrap %s from %s failed (no mirror?): %s" % (SUITE, MIRROR, e))
    r = subprocess.run(["sh", os.path.join(SRC, "tests", "gpu", "prep.sh")], cwd=SRC,
                       capture_output=True, text=True)
    print(r.stdout + r.stderr, flush=True)
    if not check(r.returncode == 0, "make gpu-prep builds the carry set", r.stderr):
        return 1
    m = re.search(r"with the work tree ([\d.]+) MiB of 64", r.stdout)
    check(m and float(m.group(1)) < 48, "gpu-prep prints the carry's size, well under 64 MiB", r.stdout)
    with open(os.path.join(SRC, "build-gpu", "meson-info", "meson-info.json")) as f:
        build_meson = json.load(f)["meson_version"]["full"]
    theirs = subprocess.run(["chroot", base, "meson", "--version"], capture_output=True, text=True).stdout.strip()
    check(theirs and theirs != build_meson, "the bare machine's meson (%s) is not build-gpu's (%s)"
          % (theirs, build_meson))
    suites = suites_of()

    rc, secs, results = run_machine(make_machine(work, base, {}))
    v = verdicts(rc, secs, results, build_meson, suites)
    for name, ok in v.items():
        check(ok, "bare machine: " + name, results.get("summary.txt", "(no summary)"))
    print("bare machine: %.0f s, limit %d s; results: %s" % (secs, LIMIT, ", ".join(results)))

    for what, plant, must_fail in PLANTS:
        rc, secs, results = run_machine(make_machine(work, base, plant))
        v = verdicts(rc, secs, results, build_meson, suites)
        check(not v[must_fail], "%s: the dry run fails at '%s'" % (what, must_fail),
              results.get("summary.txt", "(no summary)"))
    remove_machine(os.path.join(work, "machine"))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
