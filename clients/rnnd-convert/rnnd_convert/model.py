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
# How the note on a head whose activation the source does not record begins.
UNKNOWN_ACTIVATION = "the head's activation: none (a linear head)"


class ConvertError(Exception):
    """A model rnnd cannot compute exactly: the message names the layer (or operator,
    or tensor) and the attribute."""


def unreadable(path, what, err):
    """The ConvertError for a file that its library cannot parse: the file, the format it
    was read as, and the library's words (their first line; its type when it has none)."""
    words = str(err).strip().splitlines()
    return ConvertError("%s: not %s: %s" % (path, what, words[0] if words else
                                             type(err).__name__))


@dataclass
class Direction:
    w_ih: np.ndarray  # [G*H, in]
    w_hh: np.ndarray  # [G*H, H]
    b_ih: Optional[np.ndarray] = None  # [G*H]
    b_hh: Optional[np.ndarray] = None  # [G*H]
    w_hr: Optional[np.ndarray] = None  # [proj, H] (LSTM projection)
    # The source's names of the tensors above, by rnnd's (weight_ih, ..., weight_hr), where
    # they are the source's tensors as they are (a state_dict's): messages name them.
    names: Optional[dict] = None


@dataclass
class Head:
    weight: np.ndarray  # [units, in]
    bias: Optional[np.ndarray]
    activation: str = "none"
    apply: str = "last"
    names: Optional[dict] = None  # the source's names of weight and bias (a state_dict's)


@dataclass
class Block:
    """Layers of one cell kind, size and direction count: one nn.LSTM, one Keras layer
    (or several stacked alike), one ONNX operator (or several)."""
    cell: str
    layers: List[List[Direction]] = field(default_factory=list)  # [layer][dir]
    linear_before_reset: bool = True

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

    @property
    def out_width(self):
        """The width of its output: directions x (projection or hidden size)."""
        return len(self.layers[0]) * (self.proj_size or self.hidden_size)

    def same_kind(self, cell, hidden, dirs, lbr):
        """Whether a layer of these could stack on this block's."""
        return (self.cell == cell and self.hidden_size == hidden and len(self.layers[0]) == dirs
                and self.linear_before_reset == lbr)


@dataclass
class Model(Block):
    """The first block's fields, the blocks after it (a chain: docs/MODELS.md), and
    what surrounds them."""
    more: List[Block] = field(default_factory=list)  # the chain's blocks after the first
    embedding: Optional[np.ndarray] = None  # [num_embeddings, dim]
    head: Optional[Head] = None
    notes: List[str] = field(default_factory=list)  # printed after converting
    # False when the source does not record the head's activation (a state_dict).
    head_activation_known: bool = True

    @property
    def blocks(self):
        return [self] + self.more

    @property
    def last(self):
        return self.blocks[-1]

    def stack(self, cell, lbr, dirs):
        """Adds a layer (its directions): on the last block when it is of that block's
        kind, size and direction count, else as a new block of the chain."""
        hidden = dirs[0].w_hh.shape[0] // GATES[cell]
        if not self.layers:
            self.cell, self.linear_before_reset = cell, lbr
            self.layers.append(dirs)
        elif self.last.same_kind(cell, hidden, len(dirs), lbr):
            self.last.layers.append(dirs)
        else:
            self.more.append(Block(cell, [dirs], lbr))


def chain_note(m):
    """A note on a chain's blocks, when the model has more than one."""
    if m.more:
        m.notes.append("a chain of %d blocks (config.json \"blocks\"): %s" % (
            len(m.blocks), " -> ".join("%s %d%s%s" % (
                b.cell, b.hidden_size, " x%d" % len(b.layers) if len(b.layers) > 1 else "",
                " bidirectional" if b.bidirectional else "") for b in m.blocks)))


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


def _label(names, key, fallback):
    """How a message names a tensor: by the source's name where it has one (names, from
    a state_dict), else by fallback (rnnd's name or role)."""
    return "tensor '%s'" % names[key] if names and key in names else fallback


def _block_tensors(b, k, input_size, prefix, t):
    """Block b's tensors into t under prefix; ConvertError when they do not fit."""
    if b.cell not in GATES:
        raise ConvertError("cell %r is not one of %s" % (b.cell, ", ".join(GATES)))
    G, H, P = GATES[b.cell], b.hidden_size, b.proj_size
    dirs = len(b.layers[0])
    out = P or H
    has_bias = b.layers[0][0].b_ih is not None
    where = "block %d: " % k if k is not None else ""
    for n, layer in enumerate(b.layers):
        if len(layer) != dirs:
            raise ConvertError("%slayer %d has %d directions, layer 0 has %d" % (
                where, n, len(layer), dirs))
        want_in = input_size if n == 0 else dirs * out
        for d, dr in enumerate(layer):
            sfx = "_l%d%s" % (n, "_reverse" if d else "")
            shapes = {"weight_ih": (dr.w_ih, (G * H, want_in)),
                      "weight_hh": (dr.w_hh, (G * H, out))}
            if (dr.b_ih is not None) != has_bias or (dr.b_hh is not None) != has_bias:
                raise ConvertError("%slayer %d: some directions have biases and some not" % (
                    where, n))
            if has_bias:
                shapes["bias_ih"] = (dr.b_ih, (G * H,))
                shapes["bias_hh"] = (dr.b_hh, (G * H,))
            if P:
                shapes["weight_hr"] = (dr.w_hr, (P, H))
            for name, (a, shape) in shapes.items():
                if a is None or tuple(a.shape) != shape:
                    raise ConvertError("%s has shape %s, rnnd needs %s" % (
                        _label(dr.names, name, where + name + sfx),
                        None if a is None else list(a.shape), list(shape)))
                t[prefix + name + sfx] = _f32(a)
    cfg = {"cell": b.cell, "hidden_size": int(H), "num_layers": len(b.layers),
           "bidirectional": dirs == 2}
    if P:
        cfg["proj_size"] = int(P)
    if b.cell == "gru":
        cfg["gru_linear_before_reset"] = bool(b.linear_before_reset)
    return cfg


def tensors_and_config(m):
    """({name: float32 array}, config dict) in rnnd's layout; ConvertError when the
    parts do not fit together.  A chain's blocks are written under block0., block1.,
    ... with config.json's "blocks"; one block as rnnd has always written it."""
    if not m.layers:
        raise ConvertError("the model has no recurrent layer")
    input_size = m.layers[0][0].w_ih.shape[1]
    t = {}
    if not m.more:
        cfg = {"cell": m.cell, "input_size": int(input_size)}
        block = _block_tensors(m, None, input_size, "", t)
        del block["cell"]
        cfg.update(block)
    else:
        cfg = {"input_size": int(input_size), "blocks": []}
        width = input_size
        for k, b in enumerate(m.blocks):
            block = _block_tensors(b, k, width, "block%d." % k, t)
            block["prefix"] = "block%d." % k
            cfg["blocks"].append(block)
            width = b.out_width
    if m.embedding is not None:
        num, dim = m.embedding.shape
        if dim != input_size:
            raise ConvertError("the embedding's dim %d is not the first layer's input size %d"
                               % (dim, input_size))
        cfg["embedding"] = {"num_embeddings": int(num), "dim": int(dim)}
        t["embedding.weight"] = _f32(m.embedding)
    if m.head is not None:
        h = m.head
        width = m.last.out_width
        if h.weight.ndim != 2 or h.weight.shape[1] != width:
            raise ConvertError("%s has shape %s, rnnd needs [units, %d]" % (
                _label(h.names, "weight", "the head's weight"), list(h.weight.shape), width))
        units = h.weight.shape[0]
        if h.bias is not None and h.bias.shape != (units,):
            raise ConvertError("%s has shape %s, rnnd needs [%d] (one per row of the head's "
                               "weight)" % (_label(h.names, "bias", "the head's bias"),
                                            list(h.bias.shape), units))
        if h.activation not in HEAD_ACTIVATIONS:
            raise ConvertError("the head's activation %r is not one of %s"
                               % (h.activation, ", ".join(HEAD_ACTIVATIONS)))
        cfg["head"] = {"units": int(units), "activation": h.activation, "apply": h.apply}
        t["head.weight"] = _f32(h.weight)
        t["head.bias"] = _f32(h.bias if h.bias is not None else np.zeros(units))
    return t, cfg


# What a version of an existing model must share with its config.json: the network.
# The rest (batching, instances, sequence, version_policy ...) is how it is served.
_NETWORK_DEFAULTS = {"num_layers": 1, "bidirectional": False, "proj_size": 0,
                     "gru_linear_before_reset": True}


def _block_network(b):
    """A block's fields (or a one-block config's), with rnnd's defaults filled in."""
    net = {k: b.get(k) for k in ("cell", "hidden_size")}
    net.update({k: b.get(k, d) for k, d in _NETWORK_DEFAULTS.items()})
    if net["cell"] != "gru":
        del net["gru_linear_before_reset"]
    return net


def _network(cfg):
    """The fields of a config that describe the network, with rnnd's defaults filled in."""
    net = {"input_size": cfg.get("input_size")}
    if "blocks" in cfg:
        net["blocks"] = [_block_network(b) for b in cfg["blocks"] if isinstance(b, dict)]
    else:
        net.update(_block_network(cfg))
    net.update({k: cfg.get(k) for k in ("embedding", "head")})
    if net["head"] is not None:
        net["head"] = {"units": net["head"].get("units"),
                       "activation": net["head"].get("activation", "none"),
                       "apply": net["head"].get("apply", "last")}
    return net


def _versions(dst):
    return sorted(int(v) for v in os.listdir(dst) if v.isdigit() and not v.startswith("0"))


def _renamed(tensors, have):
    """The tensors under the names an existing config.json gives: its weights block's,
    and a chain's blocks' prefixes for the converter's block0., block1., ..."""
    w = have.get("weights") or {}
    prefix = w.get("prefix", "")
    special = {"embedding.weight": w.get("embedding", "embedding.weight"),
               "head.weight": w.get("head_weight", "head.weight"),
               "head.bias": w.get("head_bias", "head.bias")}
    blocks = {"block%d." % k: b.get("prefix", "") for k, b in enumerate(have.get("blocks", []))}

    def name(k):
        if k in special:
            return special[k]
        head, dot, rest = k.partition(".")
        return blocks[head + dot] + rest if dot and head + dot in blocks else prefix + k
    return {name(k): v for k, v in tensors.items()}


def _check_same_network(m, cfg, have_path, have):
    """ConvertError unless the converted cfg is the network config.json at have_path
    describes; an activation the source could not say (m.head_activation_known False)
    is taken from there."""
    if m.head is not None and not m.head_activation_known and isinstance(have.get("head"), dict):
        act = have["head"].get("activation", "none")
        cfg["head"]["activation"] = act
        m.notes = [n for n in m.notes if not n.startswith(UNKNOWN_ACTIVATION)]
        m.notes.append("the head's activation: %s, as %s says (the source does not record "
                       "it)" % (act, have_path))
    want, got = _network(have), _network(cfg)
    for k in want:
        if want[k] != got[k]:
            raise ConvertError(
                "%s says %s %s, the converted model has %s: a version must be the same "
                "network; give another --name for a new model" % (
                    have_path, k, json.dumps(want[k]), json.dumps(got[k])))


def write(m, repository, name, version=None, metadata=None):
    """Writes <repository>/<name>/config.json and <version>/model.safetensors.  The
    entry is made in a temporary directory beside it and renamed into place, so a
    failure leaves nothing behind.  An existing model directory takes the new version
    (an explicit version not there yet) when its config.json describes the same network;
    the tensors are then named as that config.json's weights block says."""
    from safetensors.numpy import save_file

    tensors, cfg = tensors_and_config(m)
    dst = os.path.join(repository, name)
    meta = {k: str(v) for k, v in (metadata or {}).items()}
    if os.path.lexists(dst):
        return _add_version(m, tensors, cfg, dst, version, meta)
    if not os.path.isdir(repository):
        # A typo in --repository would otherwise leave the model where rnnd never looks.
        m.notes.append("created the repository %s, which did not exist: rnnd serves it "
                       "only where its model_repository names it" % repository)
    os.makedirs(repository, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="." + name + ".", dir=repository)
    try:
        os.makedirs(os.path.join(tmp, str(version or 1)))
        with open(os.path.join(tmp, "config.json"), "w") as f:
            f.write(json.dumps(cfg, indent=2) + "\n")
        save_file(tensors, os.path.join(tmp, str(version or 1), "model.safetensors"),
                  metadata=meta)
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return cfg


def _add_version(m, tensors, cfg, dst, version, meta):
    from safetensors.numpy import save_file

    have_path = os.path.join(dst, "config.json")
    if not os.path.isdir(dst) or not os.path.isfile(have_path):
        raise ConvertError("%s exists and is not a model directory (no config.json); give "
                           "another --name" % dst)
    versions = _versions(dst)
    nxt = (versions[-1] + 1) if versions else 1
    if version is None:
        raise ConvertError("%s exists (versions %s); give --version %d to add this as a new "
                           "version of it (the same network), or another --name" % (
                               dst, ", ".join(map(str, versions)) or "none", nxt))
    if os.path.lexists(os.path.join(dst, str(version))):
        raise ConvertError("%s exists; give --version %d, the next free one" % (
            os.path.join(dst, str(version)), nxt))
    try:
        with open(have_path) as f:
            have = json.load(f)
    except (OSError, ValueError) as e:
        raise ConvertError("%s: cannot read it (%s); fix it or give another --name" % (
            have_path, e))
    if not isinstance(have, dict):
        raise ConvertError("%s is not a JSON object; fix it or give another --name" % have_path)
    _check_same_network(m, cfg, have_path, have)
    weights = have.get("weights") or {}
    tmp = tempfile.mkdtemp(prefix=".%d." % version, dir=dst)
    try:
        save_file(_renamed(tensors, have),
                  os.path.join(tmp, weights.get("file", "model.safetensors")), metadata=meta)
        os.rename(tmp, os.path.join(dst, str(version)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    m.notes.append("version %d added beside %s; rnnd serves it after a reload (SIGHUP, POST "
                   "/v2/repository/models/%s/load, or with repository_poll_interval set) as "
                   "its version_policy selects" % (
                       version, ", ".join(map(str, versions)) or "none",
                       os.path.basename(dst)))
    return cfg
