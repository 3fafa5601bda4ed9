#!/usr/bin/env python3
"""Golden-reference generator for rnnd's recurrent models (DESIGN.md §3, §4).

Writes one rnnd model repository entry per case under tests/golden/models/:

    models/<case>/config.json          rnnd model config
    models/<case>/1/model.safetensors  weights under PyTorch state_dict names
    models/<case>/io.safetensors       inputs and expected outputs, batch-first

Expected outputs come from PyTorch (CPU, float32) with
pack_padded_sequence(enforce_sorted=False) + pad_packed_sequence(total_length=T),
except the GRU cases with gru_linear_before_reset = false (Keras
reset_after=False), which PyTorch cannot compute: those come from the float64
NumPy reference below.  Every torch case is cross-checked three ways before it
is written:
  * torch float64 (module.double()) agrees with the float32 result to 1e-5;
  * the float64 NumPy reference (the same code that produces the
    reset-before-GRU goldens, in its linear-before-reset variant for GRUs)
    agrees with torch to 1e-5, which proves its packed / bidirectional /
    multi-layer / h0 handling on torch's numbers;
  * each sequence run alone through torch, unpacked, cut to its own length and
    given its own h0 row, agrees with its row of the batched packed result
    (so h0/h_n line up per original batch index).

Deterministic: every case draws its weights and inputs from a NumPy Generator
(and seeds torch) with zlib.crc32(case name), so adding a case changes no
other, and the files are written by a canonical safetensors writer (the
safetensors package orders __metadata__ keys differently from run to run), so
two runs give byte-identical files.

Usage (needs `pip install torch numpy safetensors`):
    python3 tests/golden/gen_goldens.py [--out DIR] [--check] [--only PREFIX]
--only writes (or checks) the cases whose names start with PREFIX and leaves
the others as they are (`--only chain_`: the chains of blocks).
--check regenerates into a temporary directory and compares with the
committed files instead of writing: byte for byte, and where a .safetensors
file differs, tensor by tensor, its floats within CHECK_TOL (torch's kernels,
oneDNN's among them, round the last bits differently on another CPU, so goldens
made on one machine are not byte-identical on the next).  Exits 1 on a file
missing, extra, or different beyond that.
"""

import argparse
import filecmp
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import warnings
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
# The per-sequence check runs unpacked inputs, where torch notes that oneDNN
# lacks projections and it falls back to its own kernel: not a problem.
warnings.filterwarnings("ignore", message="LSTM with projections is not supported with oneDNN")

# Shapes shared by every case: strides differ in every dimension.
B, T = 4, 7
INPUT_SIZE, HIDDEN, PROJ = 5, 6, 4
NUM_EMB, EMB_DIM = 11, 5
UNITS = 3
TOL = 1e-5
CHECK_TOL = 1e-6  # --check: a regenerated golden's floats against the committed ones

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_VERSION = torch.__version__.split("+")[0]


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    cell: str  # lstm, gru, rnn_tanh, rnn_relu
    layers: int = 1
    bi: bool = False
    ragged: bool = True
    h0: bool = False
    proj: int = 0
    emb: bool = False
    head_act: Optional[str] = None  # none, sigmoid, tanh, relu, softmax
    head_apply: str = "last"
    wdtype: str = "F32"  # F32, F16, BF16: how model.safetensors stores weights
    bias: bool = True
    lbr: bool = True  # gru_linear_before_reset
    lengths: Optional[list] = None  # fixed ragged lengths (else drawn)
    hidden: int = HIDDEN  # 48 (three 16-wide panels) exercises the sliced CPU recurrence
    notes: list = field(default_factory=list)

    @property
    def dirs(self):
        return 2 if self.bi else 1

    @property
    def out_size(self):
        return self.proj or self.hidden


def base_name(cell, layers, bi, ragged, h0):
    return "%s_l%d_%s_%s_%s" % (cell, layers, "bi" if bi else "uni",
                                "ragged" if ragged else "equal",
                                "h0" if h0 else "noh0")


def all_cases():
    cases = []
    # The grid: every cell x layers {1,3} x {uni,bi} x {equal,ragged} x {h0, no h0}.
    for cell in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
        for layers in (1, 3):
            for bi in (False, True):
                for ragged in (False, True):
                    for h0 in (True, False):
                        cases.append(Case(base_name(cell, layers, bi, ragged, h0), cell,
                                          layers=layers, bi=bi, ragged=ragged, h0=h0))
    # LSTM with projection (proj_size = 4).
    for layers, bi, ragged, h0 in ((1, False, True, True), (3, True, True, True),
                                   (2, True, False, False)):
        cases.append(Case("lstm_proj_" + base_name("", layers, bi, ragged, h0)[1:], "lstm",
                          layers=layers, bi=bi, ragged=ragged, h0=h0, proj=PROJ))
    # Embedding + head.
    for act in ("none", "sigmoid", "tanh", "relu", "softmax"):
        cases.append(Case("lstm_emb_l1_uni_ragged_noh0_head_%s_last" % act, "lstm",
                          emb=True, head_act=act, head_apply="last"))
    cases.append(Case("gru_emb_l2_bi_ragged_noh0_head_softmax_all", "gru", layers=2, bi=True,
                      emb=True, head_act="softmax", head_apply="all"))
    cases.append(Case("lstm_l2_bi_ragged_h0_head_tanh_last", "lstm", layers=2, bi=True,
                      h0=True, head_act="tanh", head_apply="last"))
    # Longest sequence shorter than T: the tail of every row is padding.
    cases.append(Case("rnn_tanh_emb_l1_bi_ragged_h0", "rnn_tanh", bi=True, h0=True, emb=True,
                      lengths=[4, 6, 1, 2],
                      notes=["longest length 6 < T = 7, so step 6 is padding in every row"]))
    # Weight storage dtypes and bias=False.
    cases.append(Case("gru_f16_l1_bi_ragged_noh0", "gru", bi=True, wdtype="F16"))
    cases.append(Case("lstm_bf16_l2_uni_ragged_h0", "lstm", layers=2, h0=True, wdtype="BF16"))
    cases.append(Case("lstm_nobias_l2_bi_ragged_h0", "lstm", layers=2, bi=True, h0=True,
                      bias=False))
    # GRU, Keras reset_after=False (NumPy float64 reference).
    for layers, bi, ragged, h0 in ((1, False, True, True), (2, True, True, False),
                                   (1, False, False, False)):
        cases.append(Case("gru_rbr_" + base_name("", layers, bi, ragged, h0)[1:], "gru",
                          layers=layers, bi=bi, ragged=ragged, h0=h0, lbr=False))
    # Hidden size 48: three panels of the packed recurrence, so the CPU engine's
    # sliced path (threads >= 2) runs uneven slices.
    cases.append(Case("lstm_h48_l2_bi_ragged_h0", "lstm", layers=2, bi=True, h0=True,
                      hidden=48))
    cases.append(Case("gru_h48_l2_bi_ragged_h0", "gru", layers=2, bi=True, h0=True, hidden=48))
    cases.append(Case("rnn_tanh_h48_l1_bi_ragged_noh0", "rnn_tanh", bi=True, hidden=48))
    cases.append(Case("rnn_relu_h48_l2_uni_equal_h0", "rnn_relu", layers=2, ragged=False,
                      h0=True, hidden=48))
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    return cases


# --------------------------------------------------------------------------
# Deterministic safetensors writer
# --------------------------------------------------------------------------

_ST_DTYPES = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
}


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def write_safetensors(path, tensors, metadata):
    """safetensors file with a canonical header: __metadata__ first, keys and
    tensors in name order, data in the same order, header padded with spaces
    to a multiple of 8 bytes (as the safetensors package does)."""
    header = {"__metadata__": {k: metadata[k] for k in sorted(metadata)}}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        data = tensor_bytes(t)
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hdr = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for b in blobs:
            f.write(b)


def verify_safetensors(path, tensors, metadata):
    """Reads the file back with the safetensors package."""
    from safetensors import safe_open
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == metadata, path
        assert sorted(f.keys()) == sorted(tensors), path
        for k, v in tensors.items():
            got = f.get_tensor(k)
            assert got.dtype == v.dtype and got.shape == v.shape, (path, k)
            assert torch.equal(got, v), (path, k)


# --------------------------------------------------------------------------
# NumPy float64 reference (PyTorch packed-sequence semantics)
# --------------------------------------------------------------------------


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def np_cell_step(cell, W, x, h, c, lbr):
    """One step of one direction of one layer, float64.  W holds the layer's
    w_ih, w_hh, b_ih, b_hh (zeros without bias) and w_hr (or None)."""
    gi = W["w_ih"] @ x + W["b_ih"]
    if cell == "lstm":
        g = gi + W["w_hh"] @ h + W["b_hh"]
        i, f, gg, o = np.split(g, 4)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(gg)
        h = _sigmoid(o) * np.tanh(c)
        if W["w_hr"] is not None:
            h = W["w_hr"] @ h
        return h, c
    if cell == "gru":
        H = h.shape[0]
        w_hh, b_hh = W["w_hh"], W["b_hh"]
        gh_rz = w_hh[:2 * H] @ h + b_hh[:2 * H]
        r = _sigmoid(gi[:H] + gh_rz[:H])
        z = _sigmoid(gi[H:2 * H] + gh_rz[H:])
        if lbr:  # PyTorch / cuDNN / Keras reset_after=True
            n = np.tanh(gi[2 * H:] + r * (w_hh[2 * H:] @ h + b_hh[2 * H:]))
        else:  # Keras reset_after=False
            n = np.tanh(gi[2 * H:] + w_hh[2 * H:] @ (r * h) + b_hh[2 * H:])
        return (1.0 - z) * n + z * h, None
    a = gi + W["w_hh"] @ h + W["b_hh"]
    return (np.tanh(a) if cell == "rnn_tanh" else np.maximum(a, 0.0)), None


def np_rnn(case, sd, inp, lengths, h0, c0, prefix="rnn."):
    """inp [B, T, in] float64; h0 [B, L*dirs, H'], c0 [B, L*dirs, H] or None.
    Returns output [B, T, dirs*H'], h_n [B, L*dirs, H'], c_n or None.  case
    is a Case or a chain's Block; its tensors are under prefix."""
    L, D, Hp = case.layers, case.dirs, case.out_size
    nb = inp.shape[0]
    h_n = np.zeros((nb, L * D, Hp))
    c_n = np.zeros((nb, L * D, case.hidden)) if case.cell == "lstm" else None
    x = inp
    for layer in range(L):
        out = np.zeros((nb, T, D * Hp))
        for d in range(D):
            sfx = "_l%d%s" % (layer, "_reverse" if d else "")
            W = {"w_ih": sd[prefix + "weight_ih" + sfx].double().numpy(),
                 "w_hh": sd[prefix + "weight_hh" + sfx].double().numpy(),
                 "w_hr": (sd[prefix + "weight_hr" + sfx].double().numpy()
                          if prefix + "weight_hr" + sfx in sd else None)}
            G = W["w_ih"].shape[0]
            for k in ("b_ih", "b_hh"):
                key = "%s%s%s" % (prefix, "bias_ih" if k == "b_ih" else "bias_hh", sfx)
                W[k] = sd[key].double().numpy() if key in sd else np.zeros(G)
            idx = layer * D + d
            for b in range(nb):
                n = int(lengths[b])
                h = h0[b, idx].copy() if h0 is not None else np.zeros(Hp)
                c = (c0[b, idx].copy() if c0 is not None else np.zeros(case.hidden)) \
                    if case.cell == "lstm" else None
                steps = range(n) if d == 0 else range(n - 1, -1, -1)
                for t in steps:
                    h, c = np_cell_step(case.cell, W, x[b, t], h, c, case.lbr)
                    out[b, t, d * Hp:(d + 1) * Hp] = h
                h_n[b, idx] = h
                if c_n is not None:
                    c_n[b, idx] = c
        x = out
    return x, h_n, c_n


def np_act(act, v):
    if act == "none":
        return v
    if act == "sigmoid":
        return _sigmoid(v)
    if act == "tanh":
        return np.tanh(v)
    if act == "relu":
        return np.maximum(v, 0.0)
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_head(case, sd, output, h_n, lengths):
    w = sd["fc.weight"].double().numpy()
    bias = sd["fc.bias"].double().numpy()
    if case.head_apply == "last":
        top = (case.layers - 1) * case.dirs
        last = np.concatenate([h_n[:, top + d] for d in range(case.dirs)], axis=-1)
        return np_act(case.head_act, last @ w.T + bias)
    s = np_act(case.head_act, output @ w.T + bias)
    s[np.arange(T)[None, :] >= np.asarray(lengths)[:, None]] = 0.0
    return s


# --------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------


def make_module(case, input_size=None):
    if input_size is None:
        input_size = EMB_DIM if case.emb else INPUT_SIZE
    kw = dict(input_size=input_size, hidden_size=case.hidden,
              num_layers=case.layers, bias=case.bias, batch_first=True,
              bidirectional=case.bi)
    if case.cell == "lstm":
        if case.proj:
            kw["proj_size"] = case.proj
        return nn.LSTM(**kw)
    if case.cell == "gru":
        return nn.GRU(**kw)
    return nn.RNN(nonlinearity="tanh" if case.cell == "rnn_tanh" else "relu", **kw)


def torch_act(act, v):
    if act == "none":
        return v
    if act == "sigmoid":
        return torch.sigmoid(v)
    if act == "tanh":
        return torch.tanh(v)
    if act == "relu":
        return torch.relu(v)
    return torch.softmax(v, dim=-1)


class Net(nn.Module):
    """emb (optional) -> rnn (packed) -> fc + activation (optional)."""

    def __init__(self, case):
        super().__init__()
        self.case = case
        if case.emb:
            self.emb = nn.Embedding(NUM_EMB, EMB_DIM)
        self.rnn = make_module(case)
        if case.head_act is not None:
            self.fc = nn.Linear(case.dirs * case.out_size, UNITS)

    def forward(self, x_or_tokens, lengths, h0=None, c0=None):
        case = self.case
        x = self.emb(x_or_tokens) if case.emb else x_or_tokens
        nb = x.shape[0]
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        hx = None
        if h0 is not None:
            # rnnd's states are batch-first [B, L*dirs, .]; torch's are [L*dirs, B, .]
            # in the caller's (unsorted) batch order: torch permutes them itself.
            h = h0.transpose(0, 1).contiguous()
            hx = (h, c0.transpose(0, 1).contiguous()) if case.cell == "lstm" else h
        out_p, hn = self.rnn(packed, hx)
        out, out_len = pad_packed_sequence(out_p, batch_first=True, total_length=T)
        assert torch.equal(out_len, lengths)
        res = {"output": out}
        if case.cell == "lstm":
            res["h_n"] = hn[0].transpose(0, 1).contiguous()
            res["c_n"] = hn[1].transpose(0, 1).contiguous()
        else:
            res["h_n"] = hn.transpose(0, 1).contiguous()
        if case.head_act is not None:
            if case.head_apply == "last":
                top = (case.layers - 1) * case.dirs
                last = torch.cat([res["h_n"][:, top + d] for d in range(case.dirs)], dim=-1)
                res["scores"] = torch_act(case.head_act, self.fc(last))
            else:
                s = torch_act(case.head_act, self.fc(out))
                mask = torch.arange(T)[None, :] < lengths[:, None]
                res["scores"] = s * mask[:, :, None].to(s.dtype)
        assert out.shape == (nb, T, case.dirs * case.out_size)
        return res


# --------------------------------------------------------------------------
# One case
# --------------------------------------------------------------------------


def torch_f64_checks(net64, sd, emb, args, res, ref):
    """net64 (a fresh Net or ChainNet) with sd in float64 agrees with the
    float32 results res, and the NumPy reference ref with them too."""
    inp, lengths, h0, c0 = args
    net64.load_state_dict(sd)
    net64 = net64.double().eval()
    res64 = net64(inp if emb else inp.double(), lengths,
                  h0.double() if h0 is not None else None,
                  c0.double() if c0 is not None else None)
    checks = []
    for k in res:
        checks.append(check("torch f64 vs f32 " + k, res64[k], res[k]))
        checks.append(check("numpy f64 vs torch f32 " + k, ref[k], res[k]))
    return checks


def round_weights(t, wdtype):
    """The stored tensor and the f32 values the reference computes with."""
    if wdtype == "F32":
        return t, t
    stored = t.to(torch.float16 if wdtype == "F16" else torch.bfloat16)
    return stored, stored.to(torch.float32)


def draw_lengths(case, rng):
    if not case.ragged:
        return [T] * B
    if case.lengths is not None:
        return list(case.lengths)
    # A permutation of {7, 3, 1, 5} that is sorted neither way, so the length-1
    # sequence and the longest move about between cases.
    while True:
        ln = [int(v) for v in rng.permutation([7, 3, 1, 5])]
        if ln != sorted(ln) and ln != sorted(ln, reverse=True):
            return ln


def maxdiff(a, b):
    a = a.detach().double().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
    b = b.detach().double().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def check(what, a, b, tol=TOL):
    d = maxdiff(a, b)
    if not d <= tol:
        raise AssertionError("%s: max abs diff %.3g > %g" % (what, d, tol))
    return d


def describe(case, lengths):
    cell = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN tanh", "rnn_relu": "RNN relu"}
    parts = ["%s, %d layer%s, %s" % (cell[case.cell], case.layers, "s" * (case.layers > 1),
                                       "bidirectional" if case.bi else "unidirectional")]
    if case.proj:
        parts.append("proj_size %d" % case.proj)
    if case.cell == "gru":
        parts.append("linear_before_reset %s" % ("true (PyTorch/cuDNN)" if case.lbr
                                                 else "false (Keras reset_after=False)"))
    if not case.bias:
        parts.append("no bias tensors (bias=False, read as zeros)")
    if case.wdtype != "F32":
        parts.append("weights stored %s; reference computed with the rounded weights "
                     "converted back to f32" % case.wdtype)
    if case.emb:
        parts.append("embedding %dx%d on token ids" % (NUM_EMB, EMB_DIM))
    if case.head_act is not None:
        parts.append("head fc %d->%d, activation %s, apply %s"
                     % (case.dirs * case.out_size, UNITS, case.head_act, case.head_apply))
    parts.append("lengths %s (%s)" % (lengths, "ragged" if case.ragged else "equal"))
    parts.append("initial state given (h0%s)" % ("/c0" if case.cell == "lstm" else "")
                 if case.h0 else "zero initial state (no h0 tensor)")
    parts.append("B=%d T=%d, everything batch-first; output past a length is 0" % (B, T))
    parts += case.notes
    return "; ".join(parts)


def config_for(case):
    cfg = {"cell": case.cell,
           "input_size": EMB_DIM if case.emb else INPUT_SIZE,
           "hidden_size": case.hidden,
           "num_layers": case.layers,
           "bidirectional": case.bi}
    if case.proj:
        cfg["proj_size"] = case.proj
    if case.cell == "gru" and not case.lbr:
        cfg["gru_linear_before_reset"] = False
    if case.emb:
        cfg["embedding"] = {"num_embeddings": NUM_EMB, "dim": EMB_DIM}
    if case.head_act is not None:
        cfg["head"] = {"units": UNITS, "activation": case.head_act, "apply": case.head_apply}
    w = {"prefix": "rnn."}
    if case.emb:
        w["embedding"] = "emb.weight"
    if case.head_act is not None:
        w["head_weight"] = "fc.weight"
        w["head_bias"] = "fc.bias"
    cfg["weights"] = w
    return cfg


def case_weights(case, net, rng):
    """Every parameter from the case's Generator, in state_dict order, so the
    weights do not depend on torch's RNG or init scheme; net gets the f32
    values the reference computes with.  Returns the tensors as stored."""
    stored = {}
    with torch.no_grad():
        for name, p in net.state_dict().items():
            if name.startswith("emb."):
                v = rng.uniform(-1.0, 1.0, tuple(p.shape))
            else:
                # sqrt(6 / hidden) is 1 for the base hidden size: those cases
                # keep their bytes; wider layers keep activations unsaturated.
                scale = math.sqrt(HIDDEN / case.hidden)
                v = rng.uniform(-0.5 * scale, 0.5 * scale, tuple(p.shape))
            st, f32 = round_weights(torch.from_numpy(v.astype(np.float32)), case.wdtype)
            p.copy_(f32)
            stored[name] = st
    return stored


def case_inputs(case, rng):
    """(lengths, io): the inputs lengths, tokens or x, and h0 (and c0) as the case
    takes them, drawn from rng."""
    lengths_l = draw_lengths(case, rng)
    io = {"lengths": torch.tensor(lengths_l, dtype=torch.int64)}
    if case.emb:
        io["tokens"] = torch.from_numpy(rng.integers(0, NUM_EMB, size=(B, T)).astype(np.int64))
    else:
        x = rng.uniform(-1.0, 1.0, size=(B, T, INPUT_SIZE))
        x = np.where(np.abs(x) < 1e-2, 0.5, x)  # padding must be non-zero too
        x = torch.from_numpy(x.astype(np.float32))
        assert bool((x != 0).all())
        io["x"] = x
    if case.h0:
        io["h0"] = torch.from_numpy(rng.uniform(-0.5, 0.5, (B, case.layers * case.dirs,
                                                           case.out_size)).astype(np.float32))
        if case.cell == "lstm":
            io["c0"] = torch.from_numpy(rng.uniform(-0.5, 0.5, (B, case.layers * case.dirs,
                                                               case.hidden)).astype(np.float32))
    return lengths_l, io


def reset_before_checks(case, net, sd, io, lengths_l, ref, f64):
    """A GRU with gru_linear_before_reset = false, which PyTorch has not: the
    goldens are the NumPy float64 results.  Checks that the flag matters on
    these very numbers, and that the same NumPy code in its
    linear-before-reset variant is torch's GRU.  f64: the float64 inputs
    (x, h0, c0) ref was computed from.  Returns (goldens, checks)."""
    inp = io.get("tokens", io.get("x"))
    x64, h064, c064 = f64
    res = {k: torch.from_numpy(v.astype(np.float32)) for k, v in ref.items()}
    tres = net(inp, io["lengths"], io.get("h0"), io.get("c0"))
    lbr_case = Case(case.name, case.cell, case.layers, case.bi, case.ragged, case.h0)
    lbr_out, lbr_hn, _ = np_rnn(lbr_case, sd, x64, lengths_l, h064, c064)
    checks = [check("numpy lbr vs torch output", lbr_out, tres["output"]),
              check("numpy lbr vs torch h_n", lbr_hn, tres["h_n"])]
    assert maxdiff(ref["output"], lbr_out) > 1e-2, "reset-before GRU equals torch's GRU?"
    return res, checks


def alone_checks(case, net, io, lengths_l, res):
    """Each sequence alone, unpacked, cut to its length, with its own h0 row,
    agrees with its row of the batched result res."""
    inp, h0, c0 = io.get("tokens", io.get("x")), io.get("h0"), io.get("c0")
    checks = []
    for b in range(B):
        n = lengths_l[b]
        xb = (net.emb(inp[b:b + 1, :n]) if case.emb else inp[b:b + 1, :n])
        hx = None
        if h0 is not None:
            hb = h0[b:b + 1].transpose(0, 1).contiguous()
            hx = ((hb, c0[b:b + 1].transpose(0, 1).contiguous())
                  if case.cell == "lstm" else hb)
        ob, hnb = net.rnn(xb, hx)
        checks.append(check("alone b=%d output" % b, ob[0], res["output"][b, :n]))
        hnb = hnb[0] if case.cell == "lstm" else hnb
        checks.append(check("alone b=%d h_n" % b, hnb[:, 0], res["h_n"][b]))
    return checks


def case_checks(case, net, sd, io, lengths_l):
    """(goldens, checks, source): the goldens and the checks that they are
    right: float64 torch, the float64 NumPy reference, each sequence alone;
    NumPy's own numbers for a reset-before GRU."""
    inp = io.get("tokens", io.get("x"))
    lengths, h0, c0 = io["lengths"], io.get("h0"), io.get("c0")
    x64 = sd["emb.weight"].double().numpy()[inp.numpy()] if case.emb else inp.double().numpy()
    h064 = h0.double().numpy() if h0 is not None else None
    c064 = c0.double().numpy() if c0 is not None else None
    np_out, np_hn, np_cn = np_rnn(case, sd, x64, lengths_l, h064, c064)
    ref = {"output": np_out, "h_n": np_hn}
    if np_cn is not None:
        ref["c_n"] = np_cn
    if case.head_act is not None:
        ref["scores"] = np_head(case, sd, np_out, np_hn, lengths_l)
    with torch.no_grad():
        if case.cell == "gru" and not case.lbr:
            res, checks = reset_before_checks(case, net, sd, io, lengths_l, ref,
                                              (x64, h064, c064))
            return res, checks, ("numpy float64 reference of Keras GRU reset_after=False "
                                 "equations (PyTorch has no such GRU), cast to float32")
        res = net(inp, lengths, h0, c0)
        checks = torch_f64_checks(Net(case), sd, case.emb, (inp, lengths, h0, c0), res, ref)
        checks += alone_checks(case, net, io, lengths_l, res)
    source = "torch %s float32 (CPU)" % TORCH_VERSION
    if case.wdtype != "F32":
        source += ", weights rounded to %s and converted back to float32" % (
            "float16" if case.wdtype == "F16" else "bfloat16")
    return res, checks, source


def add_results(io, res, lengths, padded_scores=False):
    """res into io, once its output (and, with padded_scores, its scores) is
    exactly zero past each length and everything is finite float32."""
    valid = torch.arange(T)[None, :] < lengths[:, None]
    assert bool((res["output"][~valid] == 0).all()), "padding not zero"
    if padded_scores:
        assert bool((res["scores"][~valid] == 0).all())
    for k, v in res.items():
        assert v.dtype == torch.float32 and bool(torch.isfinite(v).all()), k
        io[k] = v.contiguous()


def write_model(outdir, name, kind, config, stored, io, source, description):
    """<outdir>/<name>/: config.json, 1/model.safetensors (the stored weights) and
    io.safetensors, each read back; returns the bytes written.  kind: "case" or
    "chain", for the weights' description."""
    mdir = os.path.join(outdir, name)
    os.makedirs(os.path.join(mdir, "1"), exist_ok=True)
    with open(os.path.join(mdir, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2) + "\n")
    wmeta = {"case": name,
             "description": "weights of golden %s %s (PyTorch state_dict names)" % (kind, name)}
    wpath = os.path.join(mdir, "1", "model.safetensors")
    write_safetensors(wpath, stored, wmeta)
    verify_safetensors(wpath, stored, wmeta)
    iometa = {"case": name, "source": source, "description": description}
    iopath = os.path.join(mdir, "io.safetensors")
    write_safetensors(iopath, io, iometa)
    verify_safetensors(iopath, io, iometa)
    return sum(os.path.getsize(os.path.join(dp, fn))
               for dp, _, fns in os.walk(mdir) for fn in fns)


def seeded(name):
    """Seeds torch with crc32(name); returns a NumPy Generator of the same seed."""
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def eval_state(net):
    """Puts net in eval mode; returns a copy of its state_dict (the f32 values used)."""
    net.eval()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def run_case(case, outdir):
    rng = seeded(case.name)
    net = Net(case)
    stored = case_weights(case, net, rng)
    sd = eval_state(net)
    lengths_l, io = case_inputs(case, rng)
    res, checks, source = case_checks(case, net, sd, io, lengths_l)
    add_results(io, res, io["lengths"],
                padded_scores=case.head_act is not None and case.head_apply == "all")
    size = write_model(outdir, case.name, "case", config_for(case), stored, io, source,
                       describe(case, lengths_l))
    tensors = " ".join("%s%s" % (k, list(v.shape)) for k, v in sorted(io.items()))
    print("%-44s %-4s lengths=%-13s worst=%.1e %6dB  %s"
          % (case.name, case.wdtype, "".join(str(v) for v in lengths_l), max(checks), size,
             tensors))
    return size


# --------------------------------------------------------------------------
# Chains of blocks (config "blocks": docs/MODELS.md)
# --------------------------------------------------------------------------


@dataclass
class Block:
    """One nn.LSTM/nn.GRU/nn.RNN of a chain, its weights under rnn<k>."""
    cell: str
    hidden: int
    layers: int = 1
    bi: bool = False
    proj: int = 0
    lbr: bool = True
    bias: bool = True

    @property
    def dirs(self):
        return 2 if self.bi else 1

    @property
    def out_size(self):
        return self.proj or self.hidden


@dataclass
class Chain:
    name: str
    blocks: list
    ragged: bool = True
    h0: bool = False
    emb: bool = False
    head_act: Optional[str] = None
    head_apply: str = "last"
    lengths: Optional[list] = None
    batch: int = B
    notes: list = field(default_factory=list)

    @property
    def last(self):
        return self.blocks[-1]


def chain_cases():
    L, G, R = "lstm", "gru", "rnn_tanh"
    return [
        Chain("chain_lstm16_lstm8_gru12_ragged_h0",
              [Block(L, 16), Block(L, 8), Block(G, 12)], h0=True,
              notes=["sizes up then down then up: each block's input is the one before's output"]),
        Chain("chain_bilstm2_lstm4_ragged_noh0", [Block(L, 6, layers=2, bi=True), Block(L, 4)],
              notes=["Bidirectional(LSTM) x2 then LSTM, as Keras stacks them"]),
        Chain("chain_lstm_grubi_equal_h0", [Block(L, 6), Block(G, 5, bi=True)], ragged=False,
              h0=True, notes=["c0/c_n hold the LSTM block only"]),
        Chain("chain_lstmproj_rnnrelu_rnntanhbi_ragged_h0",
              [Block(L, 12, proj=5), Block("rnn_relu", 7), Block(R, 4, bi=True)], h0=True,
              notes=["a projection inside a chain: the next block's input is proj_size wide"]),
        Chain("chain_emb_grubi_lstm_head_softmax_last", [Block(G, 6, bi=True), Block(L, 6)],
              emb=True, head_act="softmax", head_apply="last"),
        Chain("chain_emb_lstm48_gru2_head_sigmoid_all", [Block(L, 48), Block(G, 6, layers=2)],
              emb=True, head_act="sigmoid", head_apply="all",
              notes=["hidden 48: the sliced CPU recurrence in the first block"]),
        Chain("chain_b1_gru_lstm_rnn_h0", [Block(G, 8), Block(L, 3), Block(R, 5)], h0=True,
              batch=1, lengths=[5], notes=["a batch of one, shorter than T"]),
        Chain("chain_nobias_lstm_gru_ragged_h0", [Block(L, 6, bias=False), Block(G, 4)], h0=True,
              notes=["the first block has no bias tensors (bias=False), the second has"]),
        Chain("chain_grurbr_lstm_ragged_noh0", [Block(G, 6, lbr=False), Block(L, 5)],
              notes=["a reset-before GRU (Keras reset_after=False) first: NumPy reference"]),
    ]


def state_split(chain, flat, c):
    """A chain's flat state [nb, F] as per-block [nb, L*dirs, width] (c: LSTM blocks)."""
    parts, at = [], 0
    for blk in chain.blocks:
        if c and blk.cell != "lstm":
            parts.append(None)
            continue
        width = blk.hidden if c else blk.out_size
        n = blk.layers * blk.dirs * width
        parts.append(None if flat is None else
                     flat[:, at:at + n].reshape(flat.shape[0], blk.layers * blk.dirs, width))
        at += n
    return parts


class ChainNet(nn.Module):
    """emb (optional) -> rnn0 -> rnn1 -> ... (each packed) -> fc + activation (optional)."""

    def __init__(self, chain):
        super().__init__()
        self.chain = chain
        if chain.emb:
            self.emb = nn.Embedding(NUM_EMB, EMB_DIM)
        width = EMB_DIM if chain.emb else INPUT_SIZE
        for k, blk in enumerate(chain.blocks):
            setattr(self, "rnn%d" % k, make_module(blk, width))
            width = blk.dirs * blk.out_size
        if chain.head_act is not None:
            self.fc = nn.Linear(width, UNITS)

    def forward(self, x_or_tokens, lengths, h0=None, c0=None):
        chain = self.chain
        x = self.emb(x_or_tokens) if chain.emb else x_or_tokens
        hs, cs = state_split(chain, h0, False), state_split(chain, c0, True)
        hn_all, cn_all = [], []
        for k, blk in enumerate(chain.blocks):
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            hx = None
            if hs[k] is not None:
                h = hs[k].transpose(0, 1).contiguous()
                hx = (h, cs[k].transpose(0, 1).contiguous()) if blk.cell == "lstm" else h
            out_p, hn = getattr(self, "rnn%d" % k)(packed, hx)
            x, _ = pad_packed_sequence(out_p, batch_first=True, total_length=T)
            if blk.cell == "lstm":
                hn_all.append(hn[0].transpose(0, 1).reshape(x.shape[0], -1))
                cn_all.append(hn[1].transpose(0, 1).reshape(x.shape[0], -1))
            else:
                hn_all.append(hn.transpose(0, 1).reshape(x.shape[0], -1))
            top = hn[0] if blk.cell == "lstm" else hn
        res = {"output": x, "h_n": torch.cat(hn_all, dim=1)}
        if cn_all:
            res["c_n"] = torch.cat(cn_all, dim=1)
        if chain.head_act is not None:
            last = chain.last
            if chain.head_apply == "last":
                t0 = (last.layers - 1) * last.dirs
                feat = torch.cat([top[t0 + d] for d in range(last.dirs)], dim=-1)
                res["scores"] = torch_act(chain.head_act, self.fc(feat))
            else:
                s = torch_act(chain.head_act, self.fc(x))
                mask = torch.arange(T)[None, :] < lengths[:, None]
                res["scores"] = s * mask[:, :, None].to(s.dtype)
        return res


def np_chain(chain, sd, x64, lengths, h064, c064):
    """The float64 reference of a chain: np_rnn block by block."""
    hs, cs = state_split(chain, h064, False), state_split(chain, c064, True)
    hn_all, cn_all = [], []
    x = x64
    for k, blk in enumerate(chain.blocks):
        x, hn, cn = np_rnn(blk, sd, x, lengths, hs[k], cs[k], prefix="rnn%d." % k)
        hn_all.append(hn.reshape(hn.shape[0], -1))
        if cn is not None:
            cn_all.append(cn.reshape(cn.shape[0], -1))
    ref = {"output": x, "h_n": np.concatenate(hn_all, axis=1)}
    if cn_all:
        ref["c_n"] = np.concatenate(cn_all, axis=1)
    if chain.head_act is not None:
        w, bias = sd["fc.weight"].double().numpy(), sd["fc.bias"].double().numpy()
        last = chain.last
        if chain.head_apply == "last":
            top = (last.layers - 1) * last.dirs
            hn = hn_all[-1].reshape(hn_all[-1].shape[0], last.layers * last.dirs, -1)
            feat = np.concatenate([hn[:, top + d] for d in range(last.dirs)], axis=-1)
            ref["scores"] = np_act(chain.head_act, feat @ w.T + bias)
        else:
            sc = np_act(chain.head_act, x @ w.T + bias)
            sc[np.arange(T)[None, :] >= np.asarray(lengths)[:, None]] = 0.0
            ref["scores"] = sc
    return ref


def chain_config(chain):
    blocks = []
    for k, blk in enumerate(chain.blocks):
        b = {"cell": blk.cell, "hidden_size": blk.hidden, "num_layers": blk.layers,
             "bidirectional": blk.bi, "prefix": "rnn%d." % k}
        if blk.proj:
            b["proj_size"] = blk.proj
        if blk.cell == "gru" and not blk.lbr:
            b["gru_linear_before_reset"] = False
        blocks.append(b)
    cfg = {"input_size": EMB_DIM if chain.emb else INPUT_SIZE, "blocks": blocks}
    w = {}
    if chain.emb:
        cfg["embedding"] = {"num_embeddings": NUM_EMB, "dim": EMB_DIM}
        w["embedding"] = "emb.weight"
    if chain.head_act is not None:
        cfg["head"] = {"units": UNITS, "activation": chain.head_act, "apply": chain.head_apply}
        w["head_weight"] = "fc.weight"
        w["head_bias"] = "fc.bias"
    if w:
        cfg["weights"] = w
    return cfg


def describe_chain(chain, lengths):
    cell = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN tanh", "rnn_relu": "RNN relu"}
    parts = []
    for k, blk in enumerate(chain.blocks):
        p = "rnn%d: %s %d x%d%s" % (k, cell[blk.cell], blk.hidden, blk.layers,
                                    " bidirectional" if blk.bi else "")
        if blk.proj:
            p += " proj %d" % blk.proj
        if blk.cell == "gru" and not blk.lbr:
            p += " reset-before"
        if not blk.bias:
            p += " bias=False"
        parts.append(p)
    desc = ["chain " + " -> ".join(parts)]
    if chain.emb:
        desc.append("embedding %dx%d on token ids" % (NUM_EMB, EMB_DIM))
    if chain.head_act is not None:
        desc.append("head fc -> %d, activation %s, apply %s" % (UNITS, chain.head_act,
                                                                chain.head_apply))
    desc.append("lengths %s" % lengths)
    desc.append("h0/c0: one flat row per sequence, block by block" if chain.h0
                else "zero initial state")
    desc.append("B=%d T=%d, batch-first; output past a length is 0" % (chain.batch, T))
    return "; ".join(desc + chain.notes)


def chain_weights(chain, net, rng):
    stored = {}
    with torch.no_grad():
        for name, p in net.state_dict().items():
            if name.startswith("emb."):
                v = rng.uniform(-1.0, 1.0, tuple(p.shape))
            else:
                v = rng.uniform(-0.5, 0.5, tuple(p.shape))
                if name.startswith("rnn"):
                    blk = chain.blocks[int(name[3:name.index(".")])]
                    v *= math.sqrt(HIDDEN / blk.hidden)
            t = torch.from_numpy(v.astype(np.float32))
            p.copy_(t)
            stored[name] = t
    return stored


def chain_inputs(chain, rng):
    nb = chain.batch
    if chain.lengths is not None:
        lengths_l = list(chain.lengths)
    elif chain.ragged:
        lengths_l = draw_lengths(Case("x", "lstm"), rng)[:nb]
    else:
        lengths_l = [T] * nb
    io = {"lengths": torch.tensor(lengths_l, dtype=torch.int64)}
    if chain.emb:
        io["tokens"] = torch.from_numpy(rng.integers(0, NUM_EMB, size=(nb, T)).astype(np.int64))
    else:
        x = rng.uniform(-1.0, 1.0, size=(nb, T, INPUT_SIZE))
        io["x"] = torch.from_numpy(np.where(np.abs(x) < 1e-2, 0.5, x).astype(np.float32))
    if chain.h0:
        hf = sum(b.layers * b.dirs * b.out_size for b in chain.blocks)
        cf = sum(b.layers * b.dirs * b.hidden for b in chain.blocks if b.cell == "lstm")
        io["h0"] = torch.from_numpy(rng.uniform(-0.5, 0.5, (nb, hf)).astype(np.float32))
        if cf:
            io["c0"] = torch.from_numpy(rng.uniform(-0.5, 0.5, (nb, cf)).astype(np.float32))
    return lengths_l, io


def chain_checks(chain, net, sd, io, lengths_l):
    """The goldens and the checks that they are right: float64 torch, the
    NumPy reference, each sequence alone; NumPy's own numbers for a chain
    with a reset-before GRU, which torch has not."""
    inp = io.get("tokens", io.get("x"))
    lengths, h0, c0 = io["lengths"], io.get("h0"), io.get("c0")
    x64 = sd["emb.weight"].double().numpy()[inp.numpy()] if chain.emb else inp.double().numpy()
    h064 = h0.double().numpy() if h0 is not None else None
    c064 = c0.double().numpy() if c0 is not None else None
    ref = np_chain(chain, sd, x64, lengths_l, h064, c064)
    checks = []
    with torch.no_grad():
        if any(b.cell == "gru" and not b.lbr for b in chain.blocks):
            lbr = Chain(chain.name, [Block(b.cell, b.hidden, b.layers, b.bi, b.proj, True, b.bias)
                                     for b in chain.blocks], emb=chain.emb,
                        head_act=chain.head_act, head_apply=chain.head_apply, batch=chain.batch)
            tres = net(inp, lengths, h0, c0)
            lref = np_chain(lbr, sd, x64, lengths_l, h064, c064)
            for k in tres:
                checks.append(check("numpy lbr chain vs torch " + k, lref[k], tres[k]))
            assert maxdiff(ref["output"], lref["output"]) > 1e-2, "reset-before equals torch?"
            return {k: torch.from_numpy(v.astype(np.float32)) for k, v in ref.items()}, checks, (
                "numpy float64 reference (a reset-before GRU, which PyTorch has not), cast to "
                "float32; the same code with torch's GRU agrees with torch")
        res = net(inp, lengths, h0, c0)
        checks += torch_f64_checks(ChainNet(chain), sd, chain.emb, (inp, lengths, h0, c0), res, ref)
        for b in range(chain.batch):
            n = lengths_l[b]
            one = net(inp[b:b + 1], lengths[b:b + 1], None if h0 is None else h0[b:b + 1],
                      None if c0 is None else c0[b:b + 1])
            checks.append(check("alone b=%d output" % b, one["output"][0, :n],
                                res["output"][b, :n]))
            checks.append(check("alone b=%d h_n" % b, one["h_n"][0], res["h_n"][b]))
    return res, checks, "torch %s float32 (CPU), a module per block" % TORCH_VERSION


def run_chain(chain, outdir):
    rng = seeded(chain.name)
    net = ChainNet(chain)
    stored = chain_weights(chain, net, rng)
    sd = eval_state(net)
    lengths_l, io = chain_inputs(chain, rng)
    res, checks, source = chain_checks(chain, net, sd, io, lengths_l)
    add_results(io, res, io["lengths"])
    size = write_model(outdir, chain.name, "chain", chain_config(chain), stored, io, source,
                       describe_chain(chain, lengths_l))
    tensors = " ".join("%s%s" % (k, list(v.shape)) for k, v in sorted(io.items()))
    print("%-44s chain lengths=%-13s worst=%.1e %6dB  %s"
          % (chain.name, "".join(str(v) for v in lengths_l), max(checks), size, tensors))
    return size


def generate(outdir, only=""):
    os.makedirs(outdir, exist_ok=True)
    cases = [c for c in all_cases() + chain_cases() if c.name.startswith(only)]
    names = {c.name for c in cases}
    for entry in sorted(os.listdir(outdir)):  # drop cases no longer generated
        if (entry.startswith(only) and entry not in names
                and os.path.isdir(os.path.join(outdir, entry))):
            shutil.rmtree(os.path.join(outdir, entry))
    total = sum(run_chain(c, outdir) if isinstance(c, Chain) else run_case(c, outdir)
                for c in cases)
    print("%d cases, %d bytes in %s" % (len(cases), total, outdir))


def read_tensors(path):
    """A safetensors file's tensors as {name: (dtype, shape, bytes)}, by its header."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    head.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], tuple(v["shape"]), body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in head.items()}


def close_enough(p, q):
    """Whether the safetensors files p and q hold the same tensors, floats within CHECK_TOL
    (absolute, or relative to the larger), everything else equal; (bool, the largest gap)."""
    if not p.endswith(".safetensors"):
        return False, None
    a, b = read_tensors(p), read_tensors(q)
    if a.keys() != b.keys():
        return False, None
    worst = 0.0
    for k, (dt, shape, raw) in a.items():
        if b[k][:2] != (dt, shape):
            return False, None
        if dt not in ("F32", "F64", "F16"):
            if raw != b[k][2]:
                return False, None
            continue
        np_dt = {"F32": np.float32, "F64": np.float64, "F16": np.float16}[dt]
        x = np.frombuffer(raw, np_dt).astype(np.float64)
        y = np.frombuffer(b[k][2], np_dt).astype(np.float64)
        gap = np.abs(x - y) / np.maximum(1.0, np.maximum(np.abs(x), np.abs(y)))
        worst = max(worst, float(gap.max()) if gap.size else 0.0)
    return worst <= CHECK_TOL, worst


def check_against(out, only):
    """--check: regenerates into a temporary directory and compares it with out."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp, only)
        bad, close, worst = [], 0, 0.0
        theirs = {e for e in os.listdir(out) if e.startswith(only)}
        bad += sorted(theirs ^ set(os.listdir(tmp)))
        for dp, _, fns in os.walk(tmp):
            for fn in fns:
                p = os.path.join(dp, fn)
                q = os.path.join(out, os.path.relpath(p, tmp))
                if os.path.exists(q) and filecmp.cmp(p, q, shallow=False):
                    continue
                ok, gap = close_enough(p, q) if os.path.exists(q) else (False, None)
                if ok:
                    close, worst = close + 1, max(worst, gap)
                else:
                    bad.append(os.path.relpath(p, tmp) + ("" if gap is None else " (%.2g)" % gap))
        if bad:
            print("differs from %s: %s" % (out, ", ".join(sorted(set(bad)))))
            return 1
        print("identical to %s%s" % (out, "" if not close else
                                     "; %d files only within %g (largest relative gap %.2g)"
                                     % (close, CHECK_TOL, worst)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "models"),
                    help="output directory (default: tests/golden/models)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare with --out")
    ap.add_argument("--only", default="",
                    help="only the cases whose name starts with this (e.g. chain_)")
    args = ap.parse_args()
    if not args.check:
        generate(args.out, args.only)
        return 0
    return check_against(args.out, args.only)


if __name__ == "__main__":
    sys.exit(main())
