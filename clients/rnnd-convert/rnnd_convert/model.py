"""The model every converter produces, and the writer of an rnnd repository entry.

rnnd's layout is docs/MODELS.md: PyTorch's nn.LSTM/nn.GRU/nn.RNN state_dict names
(weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, `_reverse` for the second
direction), gate orders LSTM i,f,g,o and GRU r,z,n, kernels [gates*H, in].  A converter
fills a Model with arrays already in that layout; write() checks the shapes and writes
config.json and <version>/model.safetensors, or nothing at all.
"""

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
HEAD_ACTIVATIONS = ("none", "sigmoid", "tanh", "relu", "softmax")


class ConvertError(Exception):
    """A model rnnd cannot compute exactly: the message names the layer (or operator,
    or tensor) and the attribute."""


@dataclass
class Direction:
    w_ih: np.ndarray  # [G*H, in]
    w_hh: np.ndarray  # [G*H, H]
    b_ih: Optional[np.ndarray] = None  # [G*H]
    b_hh: Optional[np.ndarray] = None  # [G*H]
    w_hr: Optional[np.ndarray] = None  # [proj, H] (LSTM projection)


@dataclass
class Head:
    weight: np.ndarray  # [units, in]
    bias: Optional[np.ndarray]
    activation: str = "none"
    apply: str = "last"


@dataclass
class Model:
    cell: str
    layers: List[List[Direction]] = field(default_factory=list)  # [layer][dir]
    linear_before_reset: bool = True
    embedding: Optional[np.ndarray] = None  # [num_embeddings, dim]
    head: Optional[Head] = None
    notes: List[str] = field(default_factory=list)  # printed after converting

    @property
    def bidirectional(self):
        return len(self.layers[0]) == 2

    @property
    def hidden_size(self):
        return self.layers[0][0].w_hh.shape[0] // GATES[self.cell]

    @property
    def proj_size(self):
        w = self.layers[0][0].w_hr
        return 0 if w is None else w.shape[0]


def gru_keras_to_torch(w, axis=0):
    """Keras's and ONNX's GRU gate order z, r, h to PyTorch's r, z, n along axis."""
    z, r, h = np.split(w, 3, axis=axis)
    return np.concatenate([r, z, h], axis=axis)


def lstm_onnx_to_torch(w, axis=0):
    """ONNX's LSTM gate order i, o, f, c to PyTorch's i, f, g, o along axis."""
    i, o, f, c = np.split(w, 4, axis=axis)
    return np.concatenate([i, f, c, o], axis=axis)


def _f32(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))


def tensors_and_config(m):
    """({name: float32 array}, config dict) in rnnd's layout; ConvertError when the
    parts do not fit together."""
    if m.cell not in GATES:
        raise ConvertError("cell %r is not one of %s" % (m.cell, ", ".join(GATES)))
    if not m.layers:
        raise ConvertError("the model has no recurrent layer")
    G, H, P = GATES[m.cell], m.hidden_size, m.proj_size
    dirs = len(m.layers[0])
    out = P or H
    input_size = m.layers[0][0].w_ih.shape[1]
    has_bias = m.layers[0][0].b_ih is not None
    t = {}
    for k, layer in enumerate(m.layers):
        if len(layer) != dirs:
            raise ConvertError("layer %d has %d directions, layer 0 has %d" % (k, len(layer), dirs))
        want_in = input_size if k == 0 else dirs * out
        for d, dr in enumerate(layer):
            sfx = "_l%d%s" % (k, "_reverse" if d else "")
            shapes = {"weight_ih": (dr.w_ih, (G * H, want_in)),
                      "weight_hh": (dr.w_hh, (G * H, out))}
            if (dr.b_ih is not None) != has_bias or (dr.b_hh is not None) != has_bias:
                raise ConvertError("layer %d: some directions have biases and some not" % k)
            if has_bias:
                shapes["bias_ih"] = (dr.b_ih, (G * H,))
                shapes["bias_hh"] = (dr.b_hh, (G * H,))
            if P:
                shapes["weight_hr"] = (dr.w_hr, (P, H))
            for name, (a, shape) in shapes.items():
                if a is None or tuple(a.shape) != shape:
                    raise ConvertError("%s%s has shape %s, rnnd needs %s" % (
                        name, sfx, None if a is None else list(a.shape), list(shape)))
                t[name + sfx] = _f32(a)
    cfg = {"cell": m.cell, "input_size": int(input_size), "hidden_size": int(H),
           "num_layers": len(m.layers), "bidirectional": dirs == 2}
    if P:
        cfg["proj_size"] = int(P)
    if m.cell == "gru":
        cfg["gru_linear_before_reset"] = bool(m.linear_before_reset)
    if m.embedding is not None:
        num, dim = m.embedding.shape
        if dim != input_size:
            raise ConvertError("the embedding's dim %d is not the first layer's input size %d"
                               % (dim, input_size))
        cfg["embedding"] = {"num_embeddings": int(num), "dim": int(dim)}
        t["embedding.weight"] = _f32(m.embedding)
    if m.head is not None:
        h = m.head
        units = h.weight.shape[0]
        if h.weight.ndim != 2 or h.weight.shape[1] != dirs * out:
            raise ConvertError("the head's weight has shape %s, rnnd needs [units, %d]"
                               % (list(h.weight.shape), dirs * out))
        if h.activation not in HEAD_ACTIVATIONS:
            raise ConvertError("the head's activation %r is not one of %s"
                               % (h.activation, ", ".join(HEAD_ACTIVATIONS)))
        cfg["head"] = {"units": int(units), "activation": h.activation, "apply": h.apply}
        t["head.weight"] = _f32(h.weight)
        t["head.bias"] = _f32(h.bias if h.bias is not None else np.zeros(units))
    return t, cfg


def write(m, repository, name, version=1, metadata=None):
    """Writes <repository>/<name>/config.json and <version>/model.safetensors.  The
    entry is made in a temporary directory beside it and renamed into place, so a
    failure leaves nothing behind; an existing model directory is refused."""
    from safetensors.numpy import save_file

    tensors, cfg = tensors_and_config(m)
    dst = os.path.join(repository, name)
    if os.path.lexists(dst):
        raise ConvertError("%s exists; rnnd-convert writes a new model directory only" % dst)
    os.makedirs(repository, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", dir=repository)
    try:
        os.makedirs(os.path.join(tmp, str(version)))
        with open(os.path.join(tmp, "config.json"), "w") as f:
            f.write(json.dumps(cfg, indent=2) + "\n")
        save_file(tensors, os.path.join(tmp, str(version), "model.safetensors"),
                  metadata={k: str(v) for k, v in (metadata or {}).items()})
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return cfg
