#!/usr/bin/env python3
"""test_shm.py: Triton's system shared memory extension, through tritonclient, against the real rnnd.

tritonclient's own shared memory utilities (tritonclient.utils.shared_memory: POSIX objects
in /dev/shm) make the regions; tritonclient.http and tritonclient.grpc register them and
infer with inputs read from them and outputs written to them (docs/HTTP.md "Shared
memory").  Checks, on a daemon started with --max_shm_regions=8:

- register, status (all and one), unregister (one, all, one not registered: no error),
  over HTTP and gRPC, and GET /v2 listing system_shared_memory;
- inference with every input in a region and every output written to one, on golden cases
  (an LSTM with h0/c0 and three outputs, an embedding model with INT64 tokens), the
  region's numbers PyTorch's within 1e-5; the answer's outputs have shape and datatype but
  no data; inputs and outputs mixed between regions, JSON, binary tensors (HTTP) and raw
  contents (gRPC, whose raw_input_contents skip inputs in regions), at offsets in shared
  regions;
- errors, each a 400 (gRPC INVALID_ARGUMENT) naming the field: an unknown region, a
  byte_size that is not the tensor's, an output region too small, a region past its
  object's end at register, a key that is no object's name or no object, a name taken,
  the limit of regions; an object the client shrank after registering (a 400, where a
  daemon that mapped it would die of SIGBUS), and the daemon serving on after each;
- a daemon with the default (max_shm_regions 0): 403 / PERMISSION_DENIED naming the
  setting, no system_shared_memory in /v2, an inference naming a region refused;
- with auth_token_file, the shared memory routes need the token, as the repository's do;
- CUDA shared memory: status lists none, unregister has nothing to do, register is 501.

Exits 77 (meson SKIP) when tritonclient or numpy cannot be imported.  Environment:
RNND_BIN, RNND_SRC.
"""

import os
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

try:
    import numpy as np
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import InferenceServerException
except ImportError as e:  # meson reads 77 as SKIP
    print("test_shm: SKIP: cannot import tritonclient[http,grpc]/numpy (%s); "
          "tests/run.sh makes .venv-test with them" % e)
    sys.exit(77)

import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check, run_test
from test_tritonclient import Golden, TOL

LSTM = "lstm_l1_bi_ragged_h0"  # input, lengths, h0, c0 -> output, h_n, c_n
EMB = "lstm_emb_l1_uni_ragged_noh0_head_softmax_last"  # INT64 tokens -> scores ...
INPUTS = (("x", "input"), ("tokens", "tokens"), ("lengths", "lengths"), ("h0", "h0"), ("c0", "c0"))
TAG = uuid.uuid4().hex[:8]


def key(name):
    return "/rnnd-%s-%s" % (TAG, name)


class Regions:
    """Objects made with tritonclient's utilities, destroyed at the end."""

    def __init__(self):
        self.handles = {}

    def make(self, name, size):
        self.handles[name] = shm.create_shared_memory_region(name, key(name), size)
        return self.handles[name]

    def close(self):
        for h in self.handles.values():
            shm.destroy_shared_memory_region(h)
        self.handles = {}


def dtype_name(a):
    return {np.dtype(np.float32): "FP32", np.dtype(np.int64): "INT64", np.dtype(np.int32): "INT32"}[a.dtype]


def err_of(fn, *args, **kw):
    """The InferenceServerException fn raises (or None)."""
    try:
        fn(*args, **kw)
    except InferenceServerException as e:
        return e
    return None


def layout(g, keys, base=0):
    """Offsets of the arrays of g named by keys, packed from base; and the end."""
    offs, off = {}, base
    for k in keys:
        offs[k] = off
        off += g.t[k].nbytes
    return offs, off


def infer_case(mod, c, g, regions, how):
    """Every input in region "in" (at offsets, after 64 bytes of nothing), every output in
    region "out"; the outputs read back from the region against the golden."""
    in_keys = [k for k, _ in INPUTS if k in g.t]
    offs, end = layout(g, in_keys, base=64)
    h = regions.handles["in"]
    for k in in_keys:
        shm.set_shared_memory_region(h, [g.t[k]], offset=offs[k])
    ins = []
    for k, name in INPUTS:
        if k in g.t:
            i = mod.InferInput(name, list(g.t[k].shape), dtype_name(g.t[k]))
            i.set_shared_memory("in", g.t[k].nbytes, offset=offs[k])
            ins.append(i)
    out_offs, _ = layout(g, g.outputs, base=128)
    shm.set_shared_memory_region(regions.handles["out"], [np.full(4096, -7.0, np.float32)])
    outs = []
    for k in g.outputs:
        o = mod.InferRequestedOutput(k)
        o.set_shared_memory("out", g.t[k].nbytes, offset=out_offs[k])
        outs.append(o)
    r = c.infer(g.name, ins, outputs=outs)
    for k in g.outputs:
        o = r.get_output(k)
        shape = list(o["shape"] if isinstance(o, dict) else o.shape)
        check(shape == list(g.t[k].shape), "%s %s: %s's shape in the answer" % (how, g.name, k), shape)
        if isinstance(o, dict):
            check("data" not in o and "parameters" not in o,
                  "%s %s: %s has no data in the answer (it is in the region)" % (how, g.name, k), o)
        got = shm.get_contents_as_numpy(regions.handles["out"], np.float32, list(g.t[k].shape),
                                        offset=out_offs[k])
        e = float(np.max(np.abs(got.astype(np.float64) - g.t[k]), initial=0.0))
        check(e <= TOL, "%s %s: %s in the region within %g of PyTorch" % (how, g.name, k, TOL), e)


def test_register_and_status(d, hc, gc):
    check(hc.get_server_metadata()["extensions"][-1] == "system_shared_memory",
          "GET /v2 lists system_shared_memory", hc.get_server_metadata())
    hc.register_system_shared_memory("in", key("in"), 4096)
    gc.register_system_shared_memory("out", key("out"), 16384, offset=0)
    st = sorted(hc.get_system_shared_memory_status(), key=lambda s: s["name"])
    check(st == [{"name": "in", "key": key("in"), "offset": 0, "byte_size": 4096},
                 {"name": "out", "key": key("out"), "offset": 0, "byte_size": 16384}],
          "HTTP status lists both regions", st)
    gs = gc.get_system_shared_memory_status(region_name="in")
    check(list(gs.regions) == ["in"] and gs.regions["in"].key == key("in") and gs.regions["in"].byte_size == 4096,
          "gRPC status of one region", gs)
    metrics = d.request("GET", "/metrics")[2].decode()
    check("\nrnnd_shm_regions 2\n" in metrics, "/metrics: rnnd_shm_regions 2",
          [l for l in metrics.splitlines() if "shm" in l])
    st, _, body = d.json("GET", "/v2/systemsharedmemory/region/nope/status")
    check(st == 404 and body["error"] == "no shared memory region 'nope' is registered",
          "status of a region not registered: 404 naming it", (st, body))
    check(err_of(hc.unregister_system_shared_memory, "nope") is None, "unregistering one not registered is no error")


def test_infer(hc, gc, goldens, regions):
    for g in goldens:
        infer_case(httpclient, hc, g, regions, "HTTP")
        infer_case(grpcclient, gc, g, regions, "gRPC")


def test_mixed(hc, gc, g, regions):
    """h0 in a region, the rest in the body; output in a region, h_n binary, c_n JSON (HTTP) or raw (gRPC)."""
    shm.set_shared_memory_region(regions.handles["in"], [g.t["h0"]], offset=8)
    for mod, c, how in ((httpclient, hc, "HTTP"), (grpcclient, gc, "gRPC")):
        ins = []
        for k, name in INPUTS:
            if k not in g.t:
                continue
            i = mod.InferInput(name, list(g.t[k].shape), dtype_name(g.t[k]))
            if k == "h0":
                i.set_shared_memory("in", g.t[k].nbytes, offset=8)
            elif mod is httpclient:
                i.set_data_from_numpy(g.t[k], binary_data=(k != "lengths"))
            else:
                i.set_data_from_numpy(g.t[k])
            ins.append(i)
        outs = [mod.InferRequestedOutput("output"), mod.InferRequestedOutput("h_n"), mod.InferRequestedOutput("c_n")]
        outs[0].set_shared_memory("out", g.t["output"].nbytes + 100)  # room to spare is fine
        if mod is httpclient:
            outs = [outs[0], httpclient.InferRequestedOutput("h_n", binary_data=True),
                    httpclient.InferRequestedOutput("c_n", binary_data=False)]
        r = c.infer(g.name, ins, outputs=outs)
        got = shm.get_contents_as_numpy(regions.handles["out"], np.float32, list(g.t["output"].shape))
        check(float(np.max(np.abs(got - g.t["output"]))) <= TOL, "%s mixed: output in the region" % how)
        for k in ("h_n", "c_n"):
            a = r.as_numpy(k)
            check(a is not None and float(np.max(np.abs(a - g.t[k]))) <= TOL,
                  "%s mixed: %s in the answer" % (how, k), a)


def expect_400(fn, what, msg, code="400"):
    e = err_of(fn)
    check(e is not None and code in str(e.status()) and msg in e.message(), what,
          (e.status(), e.message()) if e else "no error")


def shm_input(mod, name, shape, region, size, offset=0, dt="FP32"):
    i = mod.InferInput(name, shape, dt)
    i.set_shared_memory(region, size, offset=offset)
    return i


def test_errors(d, hc, gc, g, regions):
    x = g.t["x"]
    lengths = httpclient.InferInput("lengths", list(g.t["lengths"].shape), "INT64")
    lengths.set_data_from_numpy(g.t["lengths"])
    glengths = grpcclient.InferInput("lengths", list(g.t["lengths"].shape), "INT64")
    glengths.set_data_from_numpy(g.t["lengths"])
    shape = list(x.shape)
    cases = [
        ("an unknown region", [("r", "nope", x.nbytes, 0)], None,
         "inputs[0]: parameters.shared_memory_region: no region 'nope' is registered"),
        ("a byte_size that is not the tensor's", [("r", "in", x.nbytes - 4, 0)], None,
         "inputs[0]: parameters.shared_memory_byte_size is %d, but FP32 [%s] takes %d"
         % (x.nbytes - 4, ", ".join(map(str, shape)), x.nbytes)),
        ("a tensor past the region's end", [("r", "in", x.nbytes, 4096 - 8)], None,
         "does not fit region 'in' (4096 bytes)"),
        ("an output region too small", [("r", "in", x.nbytes, 0)], ("output", 8),
         "parameters.shared_memory_byte_size is 8, but the tensor takes %d bytes" % g.t["output"].nbytes),
    ]
    for what, ins, out, msg in cases:
        for mod, c, code in ((httpclient, hc, "400"), (grpcclient, gc, "INVALID_ARGUMENT")):
            inputs = [shm_input(mod, "input", shape, r, n, off) for _, r, n, off in ins]
            inputs.append(lengths if mod is httpclient else glengths)
            outputs = None
            if out:
                o = mod.InferRequestedOutput(out[0])
                o.set_shared_memory("out", out[1])
                outputs = [o]
            expect_400(lambda: c.infer(g.name, inputs, outputs=outputs),
                       "%s: %s names it" % (code, what), msg, code)
    # Registering: a name taken, no such object, a key that is no object's name, past the end, the limit.
    for mod, c, code in ((httpclient, hc, "400"), (grpcclient, gc, "INVALID_ARGUMENT")):
        expect_400(lambda: c.register_system_shared_memory("in", key("in"), 16), "%s: a name taken" % code,
                   "shared memory region 'in' is registered already", code)
        expect_400(lambda: c.register_system_shared_memory("x", key("none"), 16), "%s: no such object" % code,
                   "cannot open shared memory object '%s': No such file or directory" % key("none"), code)
        expect_400(lambda: c.register_system_shared_memory("x", "/etc/passwd", 16),
                   "%s: a path is no object's name" % code, "is not a shared memory object's name", code)
        expect_400(lambda: c.register_system_shared_memory("x", key("in"), 4096, offset=1),
                   "%s: a region past its object's end" % code,
                   "holds 4096 bytes, not the 4097 at offset 1 + byte_size 4096", code)
    for i in range(6):
        hc.register_system_shared_memory("extra%d" % i, key("in"), 16)
    expect_400(lambda: hc.register_system_shared_memory("one_more", key("in"), 16), "the limit of regions",
               "max_shm_regions (8) regions are registered; unregister one first")
    for i in range(6):
        gc.unregister_system_shared_memory("extra%d" % i)
    st, _, body = d.json("POST", "/v2/systemsharedmemory/region/r/register", body=b'{"key": "/a", "size": 1}')
    check(st == 400 and "unknown key 'size'" in body["error"], "a body with an unknown key: 400 naming it", body)
    check(d.request("GET", "/v2/health/ready")[0] == 200, "the daemon serves on after the errors")


def test_shrunk(d, hc, g, regions):
    """The client shrinks its object after registering it: the inference gets a 400, the daemon lives."""
    h = regions.make("small", 4096)
    hc.register_system_shared_memory("small", key("small"), 4096)
    os.truncate("/dev/shm" + key("small"), 16)
    x = g.t["x"]
    i = shm_input(httpclient, "input", list(x.shape), "small", x.nbytes, 64)
    lengths = httpclient.InferInput("lengths", list(g.t["lengths"].shape), "INT64")
    lengths.set_data_from_numpy(g.t["lengths"])
    expect_400(lambda: hc.infer(g.name, [i, lengths]), "an object shrunk after register: 400",
               "region 'small': its object '%s' is shorter than when it was registered" % key("small"))
    check(d.request("GET", "/v2/health/ready")[0] == 200 and d.proc.poll() is None,
          "the daemon lives on (no SIGBUS)")
    hc.unregister_system_shared_memory("small")
    del h


def test_cuda(d, hc, gc):
    check(hc.get_cuda_shared_memory_status() == [], "CUDA status lists none")
    check(err_of(hc.unregister_cuda_shared_memory) is None and err_of(gc.unregister_cuda_shared_memory) is None,
          "CUDA unregister has nothing to do (HTTP and gRPC)")
    st, _, body = d.json("POST", "/v2/cudasharedmemory/region/r/register", body=b"{}")
    check(st == 501 and "CUDA shared memory" in body["error"], "CUDA register: 501", (st, body))


def test_unregister_all(hc, gc):
    gc.unregister_system_shared_memory()
    check(hc.get_system_shared_memory_status() == [], "unregister all leaves none")


def test_off(g):
    """The default: the extension is off."""
    d = Daemon()
    try:
        hc = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
        gc = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
        check("system_shared_memory" not in hc.get_server_metadata()["extensions"], "off: /v2 does not list it")
        expect_400(lambda: hc.register_system_shared_memory("r", key("in"), 16), "off: register is 403",
                   "system shared memory is off: max_shm_regions is 0", "403")
        expect_400(lambda: gc.register_system_shared_memory("r", key("in"), 16), "off: gRPC PERMISSION_DENIED",
                   "system shared memory is off", "PERMISSION_DENIED")
        expect_400(lambda: hc.get_system_shared_memory_status(), "off: status is 403", "max_shm_regions", "403")
        i = shm_input(httpclient, "input", list(g.t["x"].shape), "r", g.t["x"].nbytes)
        expect_400(lambda: hc.infer(g.name, [i]), "off: an inference naming a region is 400",
                   "no region 'r' is registered (system shared memory is off: max_shm_regions is 0)")
        d.stop()
    finally:
        d.close()


def test_token():
    """With auth_token_file, the shared memory routes need the token, as the repository's do."""
    with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as f:
        f.write("s3cret\n")
    try:
        d = Daemon("--auth_token_file=" + f.name, "--max_shm_regions=2")
        try:
            st, h, _ = d.request("GET", "/v2/systemsharedmemory/status")
            check(st == 401 and "www-authenticate" in h, "no token: 401", st)
            st, _, _ = d.request("GET", "/v2/systemsharedmemory/status", headers={"Authorization": "Bearer s3cret"})
            check(st == 200, "the token: 200", st)
            d.stop()
        finally:
            d.close()
    finally:
        os.unlink(f.name)


def main():
    t0 = time.time()
    goldens = [Golden(LSTM), Golden(EMB)]
    regions = Regions()
    regions.make("in", 4096)
    regions.make("out", 16384)
    d = Daemon("--max_shm_regions=8")
    try:
        hc = httpclient.InferenceServerClient("127.0.0.1:%d" % d.port)
        gc = grpcclient.InferenceServerClient("127.0.0.1:%d" % d.grpc_port)
        hc.unregister_system_shared_memory()
        run_test(test_register_and_status, d, hc, gc)
        run_test(test_infer, hc, gc, goldens, regions)
        run_test(test_mixed, hc, gc, goldens[0], regions)
        run_test(test_errors, d, hc, gc, goldens[0], regions)
        run_test(test_shrunk, d, hc, goldens[0], regions)
        run_test(test_cuda, d, hc, gc)
        run_test(test_unregister_all, hc, gc)
        rc, _ = d.stop()
        check(rc == 0, "SIGTERM exits 0", rc)
        err = d.stderr()
        check("AddressSanitizer" not in err and "runtime error:" not in err and "ThreadSanitizer" not in err,
              "no sanitizer report from the daemon", err[-3000:])
    finally:
        d.close()
        regions.close()
    run_test(test_off, goldens[0])
    run_test(test_token)
    print("test_shm: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
