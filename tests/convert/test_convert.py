#!/usr/bin/env python3
"""test_convert.py: rnnd-convert against the frameworks (tests/convert/README.md).

Converts every fixture under tests/convert/fixtures with the installed `rnnd-convert`
console script into one temporary repository, serves it with the real rnnd ($RNND_BIN),
and checks that each model's outputs over HTTP are the framework's within 1e-5 (valid
steps only for sequence outputs).  Each refusal fixture must exit 1 with its exact
message on stderr and write nothing.  Runs in the venv tests/run.sh makes (numpy,
safetensors, h5py, onnx and clients/rnnd-convert).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
import rnndtest as th  # the harness (tests/support)
from rnndtest import Daemon, check

FIXTURES = os.path.join(HERE, "fixtures")
TOL = 1e-5
CONVERT = os.path.join(os.path.dirname(sys.executable), "rnnd-convert")


def convert(case, meta, repo, name=None, source=None):
    src = os.path.join(FIXTURES, case, source or meta["source"])
    return subprocess.run([CONVERT, src, "--repository", repo, "--name", name or case] +
                          meta["args"], capture_output=True, text=True, timeout=120)


def notes(r):
    return [line[len("note: "):] for line in r.stdout.splitlines() if line.startswith("note: ")]


# The notes of a conversion, exactly: what was found by shape, what was left unused, which
# names of the source became rnnd's, and where an activation came from (issue 32).
SAVED_MODEL = ("a TensorFlow SavedModel, which rnnd-convert does not read: save the Keras "
               "model itself with model.save(\"model.keras\") (tf.keras 2: \"model.h5\"), or "
               "convert the SavedModel to ONNX with tf2onnx")
NAMES = "(rnnd's tensor names are fixed: docs/HTTP.md)"
UNKNOWN = ("the head's activation: none (a linear head): a state_dict does not record the "
           "activation forward() applies after 'fc.weight'; give --head-activation softmax, "
           "sigmoid, tanh or relu if it applies one")
FOUND = ["embedding: 'emb.weight' [11, 5], found by its shape (--embedding names another)",
         "head: 'fc.weight' [3, 8] and 'fc.bias', found by its shape (--head-weight names "
         "another)"]
LAST = ("the head reads each sequence's final state (--head-apply last): a state_dict does "
        "not record whether forward() applies 'fc.weight' to the last step or to every one; "
        "give --head-apply all for every step")
WANT_NOTES = {
    "torch_sd_emb_gru2_found": FOUND + [LAST],
    # torch.jit.script: the module's other attributes (act, training) are not tensors.
    "torch_jit_script_lstm_l2_softmax": ["head: 'fc.weight' [3, 8] and 'fc.bias', found by its "
                                         "shape (--head-weight names another)", LAST],
    "torch_sd_lstm_mlp_head": [
        FOUND[1], LAST, UNKNOWN,
        "unused: fc2.weight [2, 3], fc2.bias [2]: rnnd serves an embedding, the recurrent layers "
        "and one linear head; if forward() computes with these, the served model's outputs "
        "differ"],
    "onnx_torch_gru_linear": ["names: graph input 'input' is rnnd's `input`; graph output 'out' "
                              "is rnnd's `scores` " + NAMES],
    "onnx_lstm_bi_initial_states": [
        "names: graph input 'X' is rnnd's `input`, 'seq_lens' is rnnd's `lengths`, 'h0' is "
        "rnnd's `h0`, 'c0' is rnnd's `c0`; graph output 'Y' is rnnd's `output`, 'Y_h' is rnnd's "
        "`h_n` " + NAMES,
        "sequence_lens is the request's `lengths` input",
        "initial_h/initial_c are the request's `h0`/`c0` inputs, batch-first "
        "[B, num_layers*dirs, H] (ONNX's are [dirs, B, H] per layer)"],
    "onnx_tf2onnx_lstm_bi": ["names: graph input 'input' is rnnd's `input`; graph output 'dense' "
                             "is rnnd's `scores` " + NAMES],
    "k2_gru_emb_linear": ["names: model input 'input' is rnnd's `tokens`; the output of layer "
                          "'dense' is rnnd's `scores` " + NAMES],
    "k3_chain_bigru_lstm_state_notes": [
        "names: model input 'input' is rnnd's `input`; the output of layer 'lstm' is rnnd's "
        "`h_n` " + NAMES + "; `h_n` holds every layer's final state, the layer's output is the "
        "last 5 values of each sequence's, flattened",
        "a chain of 2 blocks (config.json \"blocks\"): gru 8 bidirectional -> lstm 5"],
    "k3_lstm_bi_seq": [
        "names: model input 'input' is rnnd's `input`; the output of layer 'bi' is rnnd's "
        "`output` " + NAMES,
        "Masking 'masking' (mask_value=0.0) is served as lengths: send each sequence's length "
        "as `lengths` (masked steps must be trailing padding)"],
}


def infer(d, case, io, version=None):
    inputs = []
    for key, name, dt in (("x", "input", "FP32"), ("tokens", "tokens", "INT64"),
                          ("lengths", "lengths", "INT64"), ("h0", "h0", "FP32"),
                          ("c0", "c0", "FP32")):
        if key in io:
            inputs.append({"name": name, "datatype": dt, "shape": list(io[key].shape),
                           "data": io[key].reshape(-1).tolist()})
    path = "/v2/models/%s%s/infer" % (case, "/versions/%d" % version if version else "")
    st, _, resp = d.json("POST", path, body=json.dumps({"inputs": inputs}))
    if not check(st == 200, "%s: 200" % case, (st, resp)):
        return {}
    return {o["name"]: np.asarray(o["data"], dtype=np.float64).reshape(o["shape"])
            for o in resp["outputs"]}


def compare(case, io, outs):
    lengths = io["lengths"]
    steps = (io["x"] if "x" in io else io["tokens"]).shape[1]
    valid = np.arange(steps)[None, :] < lengths[:, None]
    n = 0
    for key in ("scores", "output", "h_n"):
        if key not in io:
            continue
        want = io[key].astype(np.float64)
        got = outs.get(key)
        if not check(got is not None and got.shape == want.shape, "%s: %s shape %s" % (
                case, key, list(want.shape)), None if got is None else got.shape):
            continue
        if want.ndim == 3 and key != "h_n":  # [B, T, .]: the valid steps
            got, want = got[valid], want[valid]
        err = float(np.abs(got - want).max())
        check(err <= TOL, "%s: %s within %g of the framework" % (case, key, TOL), err)
        print("%-34s %-6s max abs err %.2e" % (case, key, err))
        n += 1
    check(n > 0, "%s: something is compared" % case)


def load_io(case, name="io.safetensors"):
    return {k: np.asarray(v) for k, v in load_file(os.path.join(FIXTURES, case, name)).items()}


def check_refused(r, want, what):
    check(r.returncode == 1 and r.stderr == "rnnd-convert: " + want + "\n", what,
          (r.returncode, r.stderr, want))


def check_notes(case, r, extra=()):
    if case in WANT_NOTES:
        want = WANT_NOTES[case] + list(extra)
        check(notes(r) == want, "%s: its notes, exactly" % case, (notes(r), want))


def set_policy_all(repo, name):
    """version_policy all in a model's config.json: a serving setting, not the network."""
    p = os.path.join(repo, name, "config.json")
    cfg = json.load(open(p))
    cfg["version_policy"] = {"all": {}}
    cfg.setdefault("batching", {})["max_queue_size"] = 512
    open(p, "w").write(json.dumps(cfg, indent=2) + "\n")


def check_flags(metas, repo, scratch):
    """--head-activation on ONNX, PyTorch flags on other formats, a state_dict without names."""
    r = convert("onnx_torch_gru_linear", dict(metas["onnx_torch_gru_linear"],
                                              args=["--head-activation", "softmax"]),
                repo, name="onnx_torch_gru_linear_softmax")
    check(r.returncode == 0 and notes(r)[-1] == "the head's activation: softmax from "
          "--head-activation (the graph applies none)", "ONNX: --head-activation adds softmax "
          "to a linear head, with a note", (r.returncode, r.stdout, r.stderr))
    r = convert("onnx_torch_lstm_l2_softmax", dict(metas["onnx_torch_lstm_l2_softmax"],
                                                   args=["--head-activation", "sigmoid"]), scratch)
    check_refused(r, "--head-activation sigmoid: the graph applies softmax after its head; drop "
                  "the flag (rnnd computes what the graph does)",
                  "ONNX: --head-activation that differs from the graph's is refused")
    r = convert("onnx_torch_gru_linear", dict(metas["onnx_torch_gru_linear"],
                                              args=["--head-weight", "fc.weight"]), scratch)
    check(r.returncode == 2 and "for PyTorch sources" in r.stderr,
          "PyTorch's flags on an ONNX file are a usage error", (r.returncode, r.stderr))
    sd = "torch_sd_emb_gru2_found"
    r = convert(sd, dict(metas[sd], args=[]), scratch, name="no_flags")
    cfg = json.load(open(os.path.join(scratch, "no_flags", "config.json")))
    check(r.returncode == 0 and notes(r) == FOUND + [LAST, UNKNOWN] and
          cfg.get("embedding") == {"num_embeddings": 11, "dim": 5} and
          cfg.get("head") == {"units": 3, "activation": "none", "apply": "last"},
          "a state_dict with no names: embedding and head found, apply and activation noted",
          (r.returncode, notes(r), cfg))
    # The cases converted only for their notes (a head of two layers; a Keras encoder's
    # final state in a chain's h_n).
    for c in sorted(c for c in metas if metas[c].get("convert_only")):
        r = convert(c, metas[c], scratch)
        check(r.returncode == 0, "%s converts, with notes" % c, (r.returncode, r.stderr))
        check_notes(c, r)


def check_versions(metas, repo):
    """--version N adds a version to a model of the same network; what is refused."""
    sd = "torch_sd_emb_gru2_found"
    dst = os.path.join(repo, sd)
    r = convert(sd, metas[sd], repo, source="model_v2.pt")
    check_refused(r, "%s exists (versions 1); give --version 2 to add this as a new version of it "
                  "(the same network), or another --name" % dst,
                  "an existing model without --version: refused, saying how to add a version")
    set_policy_all(repo, sd)
    v2 = dict(metas[sd], args=metas[sd]["args"] + ["--version", "2"])
    r = convert(sd, v2, repo, source="model_v2.pt")
    check(r.returncode == 0 and r.stdout.startswith("wrote %s/2: " % dst) and
          notes(r)[-1].startswith("version 2 added beside 1; rnnd serves it after a reload"),
          "--version 2 adds a version to a model of the same network",
          (r.returncode, r.stdout, r.stderr))
    r = convert(sd, v2, repo, source="model_v2.pt")
    check_refused(r, "%s/2 exists; give --version 3, the next free one" % dst,
                  "--version of an existing version: refused, naming the next free one")
    other = "torch_sd_lstm_bi2_emb_softmax"
    r = convert(other, dict(metas[other], args=metas[other]["args"] + ["--version", "3"]), repo,
                name=sd)
    check_refused(r, "%s/config.json says cell \"gru\", the converted model has \"lstm\": a "
                  "version must be the same network; give another --name for a new model" % dst,
                  "a version of another network: refused, naming the field")
    # A version of a model whose config.json names its tensors (the demo's rnn. and fc.), from
    # a .safetensors state_dict: renamed as that config says, its softmax taken from there.
    demo = os.path.join(th.SRC, "config", "models", "digits_gru")
    shutil.copytree(demo, os.path.join(repo, "digits_gru"), symlinks=True,
                    ignore=shutil.ignore_patterns("*.py", "*.json", "*.md"))
    shutil.copy(os.path.join(demo, "config.json"), os.path.join(repo, "digits_gru"))
    set_policy_all(repo, "digits_gru")
    r = subprocess.run([CONVERT, os.path.join(demo, "1", "model.safetensors"), "--repository", repo,
                        "--name", "digits_gru", "--version", "2"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "the head's activation: softmax, as %s/digits_gru/config.json "
          "says (the source does not record it)" % repo in notes(r),
          "a version of the demo model: its activation from its config.json",
          (r.returncode, r.stdout, r.stderr))
    names = [sorted(load_file(os.path.join(repo, "digits_gru", v, "model.safetensors")))
             for v in ("1", "2")]
    check(names[0] == names[1], "the new version's tensors are named as config.json says", names)


def check_served(d, metas, served):
    for c in served:
        io = load_io(c)
        compare(c, io, infer(d, c, io, version=1))
    io = load_io("torch_sd_emb_gru2_found", "io_v2.safetensors")
    compare("torch_sd_emb_gru2_found v2", io, infer(d, "torch_sd_emb_gru2_found", io, version=2))
    io = load_io("onnx_torch_gru_linear")
    e = np.exp(io["scores"] - io["scores"].max(axis=1, keepdims=True))
    io["scores"] = e / e.sum(axis=1, keepdims=True)
    compare("onnx_torch_gru_linear_softmax", io, infer(d, "onnx_torch_gru_linear_softmax", io))
    x = np.random.default_rng(32).uniform(-1, 1, (3, 6, 8)).astype(np.float32)
    outs = [infer(d, "digits_gru", {"x": x, "lengths": np.array([6, 2, 4])}, version=v)
            for v in (1, 2)]
    check(outs[0] and outs[1] and all(np.array_equal(outs[0][k], outs[1][k]) for k in outs[0]),
          "digits_gru version 2 (converted from version 1's file) answers as version 1")
    # reset_after=False GRU is served by the CPU engine, and /config says why not cuDNN.
    st, _, cfg = d.json("GET", "/v2/models/k2_gru_rbr_l2_tanh/config")
    why = [i.get("why_not_cudnn", "") for g in (cfg or {}).get("instance_group", [])
           for i in g.get("instances", [])]
    # A build without the cuDNN backend says that first (engine/placement.c).
    check(st == 200 and why and all("gru_linear_before_reset=false" in w or
                                    "not built in" in w for w in why),
          "/config of a reset_after=False GRU says why not cuDNN", (st, why))


def check_unreadable(scratch):
    """A file its library cannot parse is refused in one line naming the file and the
    format it was read as (exit 1, no traceback, nothing written): garbage under each
    extension, a truncated ONNX file, a state_dict read as ONNX, damaged archives; a
    TensorFlow SavedModel (the directory or its saved_model.pb) and a directory by what
    they are."""
    d = tempfile.mkdtemp(prefix="rnnd-convert-junk-", dir=scratch)
    repo = os.path.join(d, "repo")

    def put(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
        return os.path.join(d, name)

    def rezip(name, src, member, data):  # src's archive with one member replaced
        import zipfile
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(d, name), "w") as z:
            for n in zin.namelist():
                z.writestr(n, data if n.endswith(member) else zin.read(n))
        return os.path.join(d, name)

    onnx_src = os.path.join(FIXTURES, "onnx_torch_gru_linear", "model.onnx")
    pt_src = os.path.join(FIXTURES, "torch_sd_emb_gru2_found", "model.pt")
    keras = "not a Keras model (a .keras zip or an HDF5 .h5): "
    saved_model = os.path.join(d, "exported")  # tf.keras 2's model.save("exported")
    os.makedirs(os.path.join(saved_model, "variables"))
    put(os.path.join("exported", "saved_model.pb"), b"\x08\x01")
    for path, args, want in (
            (put("junk.onnx", b"garbage\n"), [], "not an ONNX model: "),
            (put("truncated.onnx", open(onnx_src, "rb").read()[:300]), [], "not an ONNX model: "),
            (put("empty.onnx", b""), [], "not an ONNX model: no ir_version (an empty file, or "
             "one of another kind)"),
            (pt_src, ["--format", "onnx"], "not an ONNX model: "),
            (put("junk.keras", b"garbage\n"), [], keras),
            (put("junk.h5", b"garbage\n"), [], keras),
            (rezip("config.keras", os.path.join(FIXTURES, "k3_lstm_bi_seq", "model.keras"),
                   "config.json", b"{garbage"),
             [], "not a Keras 3 .keras archive (its config.json): "),
            (put("junk.safetensors", b"garbage\n"), [], "not a safetensors file: "),
            (put("junk.pt", b"garbage\n"), [], "not a zip: rnnd-convert reads torch.save's zip "
             "format (PyTorch >= 1.6) and TorchScript, or .safetensors"),
            (rezip("pickle.pt", pt_src, "data.pkl", b"garbage"), [],
             "not a torch.save or torch.jit.save archive (its model/data.pkl): "),
            (saved_model, [], SAVED_MODEL), (saved_model, ["--format", "keras"], SAVED_MODEL),
            (os.path.join(saved_model, "saved_model.pb"), [], SAVED_MODEL),
            (d, ["--format", "keras"], "a directory; give the model file")):
        r = subprocess.run([CONVERT, path, "--repository", repo, "--name", "junk"] + args,
                           capture_output=True, text=True, timeout=120)
        # The library's own words follow a want that ends with ": "; the others are exact.
        head = "rnnd-convert: %s: %s" % (path, want)
        check(r.returncode == 1 and r.stderr.startswith(head) and r.stderr.count("\n") == 1 and
              (want.endswith(": ") or r.stderr == head + "\n") and not os.path.exists(repo),
              "%s%s: refused in one line naming the file and the format" % (
                  os.path.basename(path), " " + " ".join(args) if args else ""),
              (r.returncode, r.stderr, head))


def check_misshapen(metas, scratch):
    """A tensor of the wrong shape is refused by its name in the source: a state_dict's
    full name (as a missing one is), an ONNX operator's input, a Keras layer's weight.
    The files are fixtures with one tensor cut short, made here."""
    import h5py
    import onnx
    from onnx import numpy_helper
    from safetensors.numpy import save_file
    from rnnd_convert.torch_model import load_tensors
    d = tempfile.mkdtemp(prefix="rnnd-convert-misshapen-", dir=scratch)
    sd = "torch_sd_lstm_bi2_emb_softmax"
    t = load_tensors(os.path.join(FIXTURES, sd, "model.pt"))
    cases = []
    for name, cut, msg in (("rnn.bias_ih_l1", 10, "tensor 'rnn.bias_ih_l1' has shape [10], rnnd "
                            "needs [32]"),
                           ("fc.bias", 2, "tensor 'fc.bias' has shape [2], rnnd needs [3] (one "
                            "per row of the head's weight)")):
        path = os.path.join(d, "%s.safetensors" % name)
        save_file(dict(t, **{name: np.ascontiguousarray(t[name][:cut])}), path)
        cases.append((path, metas[sd]["args"], msg))
    m = onnx.load(os.path.join(FIXTURES, "onnx_lstm_bi_seqlens", "model.onnx"))
    b = next(i for i in m.graph.initializer if i.name == "B")
    b.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(b)[:, :60], "B"))
    onnx.save(m, os.path.join(d, "B.onnx"))
    cases.append((os.path.join(d, "B.onnx"), [], "operator 'lstm_0' (LSTM): tensor 'B' (input B) "
                  "has shape [2, 60], rnnd needs [2, 64] (2 directions, hidden_size 8)"))
    path = os.path.join(d, "recurrent_kernel.h5")
    shutil.copy(os.path.join(FIXTURES, "k2_gru_emb_linear", "model.h5"), path)
    with h5py.File(path, "r+") as f:
        g = f["model_weights/gru/gru/gru_cell"]
        del g["recurrent_kernel:0"]
        g["recurrent_kernel:0"] = np.zeros((8, 20), np.float32)
    cases.append((path, [], "layer 'gru' (GRU): recurrent_kernel has shape [8, 20], rnnd needs "
                  "[8, 24]"))
    for path, args, msg in cases:
        r = subprocess.run([CONVERT, path, "--repository", os.path.join(d, "repo"), "--name",
                            "x"] + args, capture_output=True, text=True, timeout=120)
        check_refused(r, msg, "%s: a misshapen tensor refused by its name" %
                      os.path.basename(path))


def check_new_repository(metas, scratch):
    """A --repository that does not exist is made, and a note says so (a typo in it would
    otherwise leave the model where rnnd never looks)."""
    new = os.path.join(scratch, "new", "models")
    case = "torch_sd_lstm_bi2_emb_softmax"
    r = convert(case, metas[case], new)
    want = ("created the repository %s, which did not exist: rnnd serves it only where its "
            "model_repository names it" % new)
    check(r.returncode == 0 and want in notes(r), "a new --repository: a note names it",
          (r.returncode, notes(r), r.stderr))
    check(os.path.isfile(os.path.join(new, case, "config.json")), "a new --repository: made")
    r = convert(case, metas[case], new, name="again")
    check(not any(n.startswith("created the repository") for n in notes(r)),
          "an existing --repository: no such note", notes(r))


def check_help():
    r = subprocess.run([CONVERT, "--help"], capture_output=True, text=True, timeout=60)
    opts = ["--repository", "--name", "--version", "--format", "--head-activation", "--prefix",
            "--cell", "--embedding", "--head-weight", "--head-bias", "--head-apply"]
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    check(r.returncode == 0 and all(o in r.stdout for o in opts) and
          lines[-1].endswith('"From Keras / ONNX / PyTorch".') and
          "ONNX or PyTorch file to an rnnd model directory" in " ".join(r.stdout.split()),
          "--help lists every option and ends with whole sentences", r.stdout[-300:])


def main():
    t0 = time.time()
    import rnnd_convert
    pkg = os.path.realpath(os.path.join(th.SRC, "clients", "rnnd-convert"))
    check(os.path.realpath(rnnd_convert.__file__).startswith(pkg + os.sep),
          "rnnd_convert is the repository's (an editable install)", rnnd_convert.__file__)
    check_help()
    cases = sorted(c for c in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, c)))
    metas = {c: json.load(open(os.path.join(FIXTURES, c, "case.json"))) for c in cases}
    served = [c for c in cases if "refuse" not in metas[c] and not metas[c].get("convert_only")]
    refused = [c for c in cases if "refuse" in metas[c]]
    check(len(served) >= 20 and len(refused) >= 10, "the fixtures are there",
          (len(served), len(refused)))
    # The name filter (--only) picks fixtures by name.
    served = [c for c in served if th.selected(c)]
    refused = [c for c in refused if th.selected(c)]
    kinds = {metas[c]["source"].rsplit(".", 1)[1] for c in served}
    check(kinds == {"h5", "keras", "onnx", "pt"}, "fixtures of every format", kinds)
    repo = tempfile.mkdtemp(prefix="rnnd-convert-")
    scratch = tempfile.mkdtemp(prefix="rnnd-convert-scratch-")
    try:
        for c in refused:
            r = convert(c, metas[c], repo)
            # {source}: the file's path, which a refusal of the whole file starts with.
            want = metas[c]["refuse"].replace("{source}", os.path.join(FIXTURES, c,
                                                                       metas[c]["source"]))
            check_refused(r, want, "%s: refused with its exact message" % c)
            check(os.listdir(repo) == [], "%s: a refusal writes nothing" % c, os.listdir(repo))
        for c in served:
            r = convert(c, metas[c], repo)
            check(r.returncode == 0 and r.stdout.startswith("wrote "), "%s: converts" % c,
                  (r.returncode, r.stdout, r.stderr))
            check_notes(c, r)
        # PyTorch names that are not in the file are refused by name.
        sd = "torch_sd_lstm_bi2_emb_softmax"
        listing = ("the file has emb.weight, fc.bias, fc.weight, rnn.bias_hh_l0, "
                   "rnn.bias_hh_l0_reverse, rnn.bias_hh_l1, rnn.bias_hh_l1_reverse, rnn.bias_ih_l0, "
                   "rnn.bias_ih_l0_reverse, rnn.bias_ih_l1, rnn.bias_ih_l1_reverse, rnn.weight_hh_l0")
        for args, msg in (
                (["--prefix", "lstm."], "tensor 'lstm.weight_ih_l0': missing (--prefix 'lstm.'); "),
                (metas[sd]["args"][:4] + ["--head-weight", "head.w"],
                 "tensor 'head.w' (--head-weight): missing; ")):
            r = convert(sd, dict(metas[sd], args=args), scratch)
            check_refused(r, msg + listing, "%s: refused naming the tensor" % args)
        check_flags(metas, repo, scratch)
        check_unreadable(scratch)
        check_misshapen(metas, scratch)
        check_new_repository(metas, scratch)
        check_versions(metas, repo)
        check(sorted(os.listdir(repo)) == sorted(served + ["onnx_torch_gru_linear_softmax",
                                                           "digits_gru"]),
              "one directory per converted model, nothing else", sorted(os.listdir(repo)))
        d = Daemon(repo=repo)
        try:
            check_served(d, metas, served)
            rc, _ = d.stop()
            check(rc == 0, "SIGTERM exits 0", rc)
        finally:
            d.close()
    finally:
        shutil.rmtree(repo, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    print("test_convert: %d passed, %d failed (%.1f s)" % (th.passed, th.failed, time.time() - t0))
    return 1 if th.failed else 0


if __name__ == "__main__":
    sys.exit(main())
