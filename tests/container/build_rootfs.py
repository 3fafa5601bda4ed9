#!/usr/bin/env python3
"""build_rootfs.py [--keep] WORKDIR: builds deploy/container/Containerfile's cpu
target without a container engine, and runs the result as the image would run.

There is no Docker engine on the machines this project is built and tested on,
so this follows the Containerfile itself: each stage a Debian root made by
debootstrap (--variant=minbase, the closest to the debian images), each RUN
executed in it by chroot with the stage's ARGs in the environment, COPY . from
the git-tracked files (as .dockerignore leaves them), COPY --from between the
stage roots, USER, ENV, VOLUME, ENTRYPOINT and CMD recorded.  Then the cpu
stage's root is checked as a container would run it: in new mount and network
namespaces, as its USER, ENTRYPOINT + CMD exactly:

- no library missing (ldd), no compiler or -dev package in the image;
- /v2/health/live and /v2/health/ready answer 200 and the demo model in /models
  answers an inference (the first held-out image is a 7);
- the process runs as uid 10001;
- with another repository mounted over /models, that is what is served;
- SIGTERM: exit 0.

Needs root, debootstrap and Debian's mirror (apt); exits 77 (skip) without
them.  The suite `container` of make test (about 70 s and 150 MB of packages
on the 2-core development host; docs/OPERATIONS.md says what it shows and what
only a real engine and cluster can).  Prints "N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTAINERFILE = os.path.join(SRC, "deploy", "container", "Containerfile")
MIRROR = os.environ.get("RNND_DEBIAN_MIRROR", "http://deb.debian.org/debian")
import rnndtest as th  # the harness (tests/support)
from rnndtest import check

def sh(cmd, **kw):
    print("+ " + (cmd if isinstance(cmd, str) else " ".join(cmd)), flush=True)
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def parse(path):
    """[(stage name, base, [(instruction, text)])], continuation lines joined."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    stages, global_args = [], {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            m = re.match(r"(\S+) AS (\S+)$", rest)
            stages.append((m.group(2), m.group(1), []))
        elif not stages and instr == "ARG":
            k, _, v = rest.partition("=")
            global_args[k] = v.strip('"')
        else:
            stages[-1][2].append((instr, rest))
    return global_args, stages


class Builder:
    def __init__(self, work):
        self.work = work
        self.roots = {}
        self.meta = {}

    def debootstrap(self, suite, include=()):
        """A minbase root of SUITE (with the packages INCLUDE), made once per
        work folder (the packages kept in a tarball across runs); each stage
        copies it.  tests/gpu/dryrun.py makes its bare GPU machine with it."""
        name = suite + "".join("+" + p for p in include)
        base = os.path.join(self.work, "base-%s" % name)
        if os.path.exists(os.path.join(base, "etc", "debian_version")):
            return base
        tarball = os.path.join(self.work, "debootstrap-%s.tgz" % name)
        opts = ["--variant=minbase"] + (["--include=" + ",".join(include)] if include else [])
        if not os.path.exists(tarball):
            sh(["debootstrap"] + opts + ["--make-tarball=" + tarball + ".part", suite,
                                         os.path.join(self.work, "tarball-tmp"), MIRROR],
               stdout=subprocess.DEVNULL)
            os.rename(tarball + ".part", tarball)
        if os.path.exists(base):
            sh(["rm", "-rf", "--one-file-system", base])
        sh(["debootstrap"] + opts + ["--unpack-tarball=" + tarball, suite, base, MIRROR],
           stdout=subprocess.DEVNULL)
        return base

    def base_root(self, image, dest, args):
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        if image in self.roots:
            sh(["cp", "-a", self.roots[image] + "/.", dest])
            return dict(self.meta[image])
        m = re.match(r"debian:(\w+)(-slim)?$", image)
        if not m:
            raise RuntimeError("base image %s: only debian:SUITE[-slim] and earlier stages" % image)
        sh(["cp", "-a", self.debootstrap(m.group(1)) + "/.", dest])
        return {"env": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                "user": "0:0", "volumes": [], "entrypoint": [], "cmd": []}

    def chroot_run(self, root, command, env):
        for d in ("proc", "dev", "sys"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        shutil.copy("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
        script = ("mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && "
                  "exec chroot {r} /bin/sh -ec \"$RNND_RUN\"").format(r=root)
        e = dict(env)
        e["RNND_RUN"] = command
        sh(["unshare", "-m", "--propagation", "private", "sh", "-ec", script], env=e)

    def build(self, target, global_args, stages):
        by_name = {s[0]: s for s in stages}
        order, seen = [], set()

        def need(name):
            if name in seen:
                return
            seen.add(name)
            _, base, instrs = by_name[name]
            if base in by_name:
                need(base)
            for instr, rest in instrs:
                m = re.match(r"--from=(\S+)", rest)
                if instr == "COPY" and m:
                    need(m.group(1))
            order.append(name)
        need(target)
        for name in order:
            self.build_stage(by_name[name], global_args)
        return self.roots[target], self.meta[target]

    def build_stage(self, stage, global_args):
        name, base, instrs = stage
        root = os.path.join(self.work, "stage-" + name)
        if os.path.exists(root):
            sh(["rm", "-rf", "--one-file-system", root])
        os.makedirs(root)
        t0 = time.time()
        meta = self.base_root(base, root, global_args)
        args = dict(global_args)
        for instr, rest in instrs:
            if instr == "ARG":
                k, _, v = rest.partition("=")
                args[k] = v.strip('"')
            elif instr == "ENV":
                for k, v in re.findall(r"(\w+)=(\S+)", rest):
                    meta["env"][k] = v
            elif instr == "RUN":
                self.chroot_run(root, rest, {**meta["env"], **args})
            elif instr == "COPY":
                self.copy(root, rest)
            elif instr == "USER":
                meta["user"] = rest
            elif instr == "VOLUME":
                meta["volumes"].append(rest)
            elif instr in ("ENTRYPOINT", "CMD"):
                meta[instr.lower()] = json.loads(rest)
            elif instr in ("EXPOSE", "STOPSIGNAL"):
                meta[instr.lower()] = rest
            elif instr == "ADD":
                raise RuntimeError("ADD (a download) in a stage of this target: " + rest)
            else:
                raise RuntimeError("instruction %s is not followed here" % instr)
        self.roots[name], self.meta[name] = root, meta
        print("stage %s: %.0f s" % (name, time.time() - t0), flush=True)

    def copy(self, root, rest):
        words = rest.split()
        opts = [w for w in words if w.startswith("--")]
        src, dst = [w for w in words if not w.startswith("--")]
        dest = os.path.join(root, dst.lstrip("/"))
        frm = [o.split("=", 1)[1] for o in opts if o.startswith("--from=")]
        if frm:
            origin = os.path.join(self.roots[frm[0]], src.lstrip("/"))
            os.makedirs(os.path.dirname(dest.rstrip("/")), exist_ok=True)
            if os.path.isdir(origin):
                sh(["cp", "-a", origin + "/.", dest + "/"] if os.path.isdir(dest)
                   else ["cp", "-a", origin, dest])
            else:
                sh(["cp", "-a", origin, dest])
        elif src == ".":
            os.makedirs(dest, exist_ok=True)
            # The build context as .dockerignore leaves it: the tracked files
            # (outside a git checkout, the tree less .dockerignore's patterns).
            if os.path.isdir(os.path.join(SRC, ".git")):
                sh("git -C %s ls-files -z | tar -C %s --null -T - -cf - | tar -C %s -xf -" % (SRC, SRC, dest))
            else:
                with open(os.path.join(SRC, ".dockerignore")) as f:
                    pats = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
                excl = " ".join("--exclude='./%s'" % p.replace("**/", "") for p in pats)
                sh("tar -C %s %s -cf - . | tar -C %s -xf -" % (SRC, excl, dest))
        else:
            raise RuntimeError("COPY %s: only . and --from= are followed here" % rest)
        chown = [o.split("=", 1)[1] for o in opts if o.startswith("--chown=")]
        if chown:
            sh(["chown", "-R", chown[0], dest])


def get(port, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def run_image(root, meta, models=None):
    """Runs ENTRYPOINT + CMD as USER in new mount and network namespaces; returns
    (checks' results) through a small in-namespace driver (this script again)."""
    uid, gid = meta["user"].split(":")
    mounts = "mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && ".format(r=root)
    if models:
        mounts += "mount --bind -o ro %s %s/models && " % (models, root)
    env = " ".join("%s=%s" % kv for kv in meta["env"].items())
    argv = " ".join("'%s'" % a for a in meta["entrypoint"] + meta["cmd"])
    script = (mounts + "ip link set lo up && "
              "exec %s %s --probe-inside %s -- env -i %s chroot --userspec=%s:%s %s %s"
              % (sys.executable, os.path.abspath(__file__), root, env, uid, gid, root, argv))
    r = subprocess.run(["unshare", "-m", "-n", "--propagation", "private", "sh", "-ec", script],
                       capture_output=True, text=True, timeout=120)
    print(r.stderr[-3000:], end="")
    return json.loads(r.stdout.strip().splitlines()[-1])


def probe_inside(root, argv):
    """In the namespaces: start the daemon, probe it, SIGTERM it; print JSON."""
    out = {}
    log = open(os.path.join("/tmp", "rnnd-image.log"), "w+")
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    port = 8080
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            out["ready"] = get(port, "/v2/health/ready")[0]
            if out["ready"] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    out["live"] = get(port, "/v2/health/live")[0]
    st, body = get(port, "/v2/repository/index", b"{}")
    out["models"] = sorted(m["name"] for m in json.loads(body) if m.get("state") == "READY") if st == 200 else st
    example = os.path.join(root, "models", "digits_lstm", "example.json")
    if os.path.exists(example):
        st, body = get(port, "/v2/models/digits_lstm/infer", open(example, "rb").read())
        out["infer"] = st
        if st == 200:
            scores = json.loads(body)["outputs"][0]["data"][:10]
            out["digit"] = scores.index(max(scores))
    out["uid"] = [int(x) for x in open("/proc/%d/status" % proc.pid).read().split("Uid:")[1].split()[:2]]
    proc.send_signal(signal.SIGTERM)
    out["exit"] = proc.wait(timeout=40)
    log.seek(0)
    out["log"] = log.read()[-1500:]
    print(json.dumps(out))


def cannot_build(work):
    """Why this host cannot do what a container engine does here, or None.

    A sandbox may be root and make namespaces yet refuse a mount of proc or of
    /dev, a device node, or debootstrap itself: none of that is about rnnd's
    Containerfile, so it skips rather than fails.  Debian's own base (the
    tarball of debootstrap, the stand-in for `FROM debian:bookworm`) is made
    here too, once: every later step is the Containerfile's and counts."""
    probe = os.path.join(work, "probe")
    for d in ("proc", "dev"):
        os.makedirs(os.path.join(probe, d), exist_ok=True)
    script = "mount -t proc proc {r}/proc && mount --rbind /dev {r}/dev && ip link set lo up".format(r=probe)
    r = subprocess.run(["unshare", "-m", "-n", "--propagation", "private", "sh", "-ec", script],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot mount proc and /dev in new namespaces (%s)" % r.stderr.strip()[-300:]
    try:
        Builder(work).debootstrap("bookworm")
    except subprocess.CalledProcessError as e:
        return "debootstrap cannot make a Debian bookworm base here (%s)" % e
    return None


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--probe-inside":
        return probe_inside(sys.argv[2], sys.argv[4:])
    keep = "--keep" in sys.argv
    work = [a for a in sys.argv[1:] if not a.startswith("--")]
    work = os.path.abspath(work[0] if work else "/var/tmp/rnnd-rootfs")
    if os.geteuid() != 0 or not shutil.which("debootstrap") or not shutil.which("unshare"):
        print("build_rootfs: SKIP: needs root, debootstrap and unshare")
        sys.exit(77)
    if subprocess.run(["unshare", "-m", "-n", "true"], capture_output=True).returncode != 0:
        print("build_rootfs: SKIP: cannot make mount and network namespaces (unshare -m -n)")
        sys.exit(77)
    try:
        urllib.request.urlopen(MIRROR + "/dists/bookworm/Release", timeout=20).close()
    except OSError as e:
        print("build_rootfs: SKIP: Debian's mirror %s cannot be reached (%s)" % (MIRROR, e))
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    why = cannot_build(work)
    if why:
        print("build_rootfs: SKIP: " + why)
        sys.exit(77)
    t0 = time.time()
    global_args, stages = parse(CONTAINERFILE)
    b = Builder(work)
    root, meta = b.build("cpu", global_args, stages)
    build_s = time.time() - t0
    size = subprocess.run(["du", "-sm", "--exclude=proc", root], capture_output=True, text=True).stdout.split()[0]
    print("cpu image root: %s MB, built in %.0f s" % (size, build_s))

    # What is in the image.
    ldd = subprocess.run(["chroot", root, "ldd", "/usr/bin/rnnd"], capture_output=True, text=True)
    check(ldd.returncode == 0 and "not found" not in ldd.stdout, "every library the daemon links is in the image",
          ldd.stdout + ldd.stderr)
    dpkg = subprocess.run(["chroot", root, "dpkg-query", "-W", "-f=${Package}\\n"], capture_output=True,
                          text=True).stdout.split()
    check(not [p for p in dpkg if p.endswith("-dev") or p in ("gcc", "g++", "meson", "cpp")],
          "no compiler or -dev package in the image", [p for p in dpkg if p.endswith("-dev")])
    check(meta["user"] == "10001:10001" and meta["volumes"] == ["/models"], "USER 10001, VOLUME /models", meta)

    r = run_image(root, meta)
    check(r.get("live") == 200 and r.get("ready") == 200, "the image answers /v2/health/live and /ready", r)
    demo = os.path.join(SRC, "config", "models")
    check(r.get("models") == sorted(m for m in os.listdir(demo) if os.path.isdir(os.path.join(demo, m))),
          "serves the demo models from /models", r)
    check(r.get("infer") == 200 and r.get("digit") == 7, "the demo LSTM reads the example as a 7", r)
    check(r.get("uid") == [10001, 10001], "runs as uid 10001", r)
    check(r.get("exit") == 0, "SIGTERM: exit 0", r)

    # A repository mounted over /models: only its model is served.
    other = os.path.join(work, "mounted-repo")
    if os.path.exists(other):
        shutil.rmtree(other)
    os.makedirs(other)
    shutil.copytree(os.path.join(SRC, "config", "models", "digits_gru"), os.path.join(other, "digits_gru"))
    r = run_image(root, meta, models=other)
    check(r.get("ready") == 200 and r.get("models") == ["digits_gru"], "a repository mounted over /models is served",
          r)
    if not keep:
        sh(["rm", "-rf", "--one-file-system"] + [os.path.join(work, d) for d in os.listdir(work)
                                                  if d.startswith(("stage-", "base-"))])
    print("build_rootfs: %d passed, %d failed (%.0f s)" % (th.passed, th.failed, time.time() - t0))
    sys.exit(1 if th.failed else 0)


if __name__ == "__main__":
    main()
