"""Keras models: `.keras` (Keras 3) and legacy `.h5` (Keras 2 / tf.keras), read with
h5py and json only.

The model must be a chain: [InputLayer] [Embedding | Masking] RNN layers [Dense or
TimeDistributed(Dense) [Activation]], with Dropout-like layers (identities at inference)
anywhere.  Consecutive RNN layers of one kind, size and direction count stack into one
block; a layer of another
(units=64 after units=128, Bidirectional then not, a GRU on an LSTM) starts the next block
of the chain (docs/MODELS.md).  RNN layers
are LSTM, GRU, SimpleRNN, the legacy CuDNNLSTM and CuDNNGRU, and Bidirectional of one of
them with merge_mode "concat".  Keras stores kernels [in, gates*H] and GRU gates in the
order z, r, h; rnnd wants [gates*H, in] and r, z, n (docs/MODELS.md).  LSTM gates i, f,
c, o are PyTorch's already.
"""

import json
import re
import zipfile
import zlib

import numpy as np

from .model import ConvertError, Direction, Head, Model, chain_note as _chain_note, \
    gru_keras_to_torch, unreadable

RNN_CLASSES = ("LSTM", "GRU", "SimpleRNN", "CuDNNLSTM", "CuDNNGRU")
IDENTITY_CLASSES = ("InputLayer", "Dropout", "SpatialDropout1D", "GaussianNoise",
                    "GaussianDropout", "AlphaDropout", "ActivityRegularization")
DENSE_ACTIVATIONS = {"linear": "none", None: "none", "sigmoid": "sigmoid", "tanh": "tanh",
                     "relu": "relu", "softmax": "softmax"}


def _refuse(layer, attr, value, why):
    raise ConvertError("layer '%s' (%s): %s=%s: %s" % (
        layer["config"].get("name"), layer["class_name"], attr, json.dumps(value), why))


def _check_shape(layer, what, a, *needs):
    """Refuses a weight of none of the shapes needs (tuples; None: any size there)."""
    if not any(a.ndim == len(n) and all(d is None or d == s for d, s in zip(n, a.shape))
               for n in needs):
        raise ConvertError("layer '%s' (%s): %s has shape %s, rnnd needs %s" % (
            layer["config"].get("name"), layer["class_name"], what, list(a.shape), " or ".join(
                "[%s]" % ", ".join("N" if d is None else str(d) for d in n) for n in needs)))


def _weights_of(layer, w, counts, names):
    """w, the weights stored for layer, when they are one of counts in number."""
    if len(w) not in counts:
        raise ConvertError("layer '%s' (%s): %d weights stored, expected %s; save the whole "
                           "model with model.save()" % (layer["config"].get("name"),
                                                        layer["class_name"], len(w), names))
    return w


# --------------------------------------------------------------------------
# Reading the file: the layer configs, and each layer's weights in Keras's order
# --------------------------------------------------------------------------


def _layers_of(model_config):
    """The model's layers in order; a Functional model must be a single chain."""
    cls = model_config.get("class_name")
    cfg = model_config.get("config", {})
    if cls == "Sequential":
        return cfg.get("layers", [])
    if cls in ("Functional", "Model"):
        return _functional_chain(cfg)
    raise ConvertError("model class %r: rnnd-convert reads Sequential and Functional "
                       "models; save it as one of those" % cls)


def _name(layer):
    return layer.get("name") or layer["config"].get("name")


def _one_end(cfg, key, what):
    """Refuses a Functional model of several inputs (or outputs), naming them."""
    ends = cfg.get(key) or []
    if ends and isinstance(ends[0], list) and len(ends) > 1:
        raise ConvertError("model %ss %s: rnnd converts a model of one input and one output "
                           "(it adds lengths, h0 and c0 itself): save the chain from one input "
                           "to one output as a model of its own" % (
                               what, ", ".join("'%s'" % e[0] for e in ends)))


def _functional_chain(cfg):
    """A Functional model's layers, each reading the one before.  Keras 3 writes the mask
    of a Masking or an Embedding(mask_zero=True) as NotEqual and Any layers handed to the
    RNN layers as `mask`; those are left out, since rnnd serves that mask as lengths."""
    _one_end(cfg, "input_layers", "input")
    _one_end(cfg, "output_layers", "output")
    layers = cfg.get("layers", [])
    helpers = _mask_helpers(layers)
    chain, prev = [], None
    for layer in layers:
        if _name(layer) in helpers:
            continue
        ins = sorted(set(_inbound_names(layer.get("inbound_nodes", []))))
        if prev is not None and ins != [prev]:
            raise ConvertError("layer '%s' (%s): inbound_nodes=%s: rnnd converts a chain of "
                               "layers, each reading the one before; save the chain as a "
                               "model of its own" % (
                                   _name(layer), layer.get("class_name"), json.dumps(ins)))
        _check_mask_of(layer, helpers, chain)
        chain.append(layer)
        prev = _name(layer)
    return chain


def _inbound_names(node, masks=False):
    """The layer names a Keras 2 ([name, i, j, {}]) or Keras 3 ({keras_history: [name,
    ...]}) inbound_nodes structure refers to; a Keras 3 `mask` argument's only with masks."""
    if isinstance(node, dict):
        if "keras_history" in node:
            yield node["keras_history"][0]
            return
        for k, v in node.items():
            if k != "mask" or masks:
                yield from _inbound_names(v, masks)
    elif isinstance(node, list):
        if len(node) >= 3 and isinstance(node[0], str) and isinstance(node[1], int):
            yield node[0]
            return
        for v in node:
            yield from _inbound_names(v, masks)


# The operations Keras 3 records for the mask of a Masking or a mask_zero Embedding.
MASK_OPS = ("NotEqual", "Any")


def _mask_helpers(layers):
    """Names of the mask operations whose outputs are read only as masks (or by other
    mask operations)."""
    helpers = {_name(la) for la in layers if la.get("class_name") in MASK_OPS}
    changed = True
    while changed:
        changed = False
        for la in layers:
            read = helpers & set(_inbound_names(la.get("inbound_nodes", [])))
            if read and _name(la) not in helpers:
                helpers -= read
                changed = True
    return helpers


def _mask_names(layer):
    """The layers a Keras 3 layer's inbound nodes read as its `mask`."""
    for node in layer.get("inbound_nodes", []):
        kwargs = node.get("kwargs") if isinstance(node, dict) else None
        if isinstance(kwargs, dict) and "mask" in kwargs:
            yield from _inbound_names(kwargs["mask"], masks=True)


def _check_mask_of(layer, helpers, chain):
    """Refuses a mask handed to layer other than the chain's Masking's or mask_zero
    Embedding's, which rnnd serves as lengths: it can serve no other."""
    masks = set(_mask_names(layer))
    if not masks:
        return
    source = [la for la in chain if la["class_name"] == "Masking" or
              (la["class_name"] == "Embedding" and la["config"].get("mask_zero"))]
    if not source or not masks <= helpers:
        raise ConvertError("layer '%s' (%s): mask=%s: rnnd serves only the mask of a Masking "
                           "or an Embedding(mask_zero=True) layer, as lengths; use one of those"
                           % (_name(layer), layer.get("class_name"), json.dumps(sorted(masks))))


class _H5Weights:
    """Keras 2 `.h5`: model_weights/<layer>/ lists its weight_names in order."""

    def __init__(self, f):
        self.g = f["model_weights"]

    def add(self, layer):
        pass

    def get(self, layer_name, part=None):
        if layer_name not in self.g:
            return []
        g = self.g[layer_name]
        names = [n.decode() if isinstance(n, bytes) else n for n in g.attrs.get("weight_names", [])]
        if part is not None:  # Bidirectional: forward_<x>/... and backward_<x>/...
            names = _direction_names(names, part)
        return [np.asarray(g[n]) for n in names]


def _direction_names(names, part):
    """The weight names of a Bidirectional's forward or backward layer: under forward_<x>/
    and backward_<x>/, but Keras 3 keeps a backward_layer given to it under its own name
    (bidirectional/lstm_1/...), so the backward layer's are then the ones not forward's."""
    def under(prefix):
        return [n for n in names if any(p.startswith(prefix + "_") for p in n.split("/")[:-1])]
    if part == "forward":
        return under("forward")
    forward = set(under("forward"))
    return under("backward") or [n for n in names if n not in forward]


def _snake(name):
    """Keras 3's object path name of a class (keras.src.utils.naming.to_snake_case)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


class _KerasV3Weights:
    """Keras 3 `.keras`: model.weights.h5 has layers/<key>/[cell/ or layer/]vars/<i>, and
    a Bidirectional's forward_layer/ and backward_layer/ below it.  The key is not the
    layer's name but its class's snake_case name, numbered in layer order (gru, gru_1)."""

    def __init__(self, f):
        self.g = f["layers"] if "layers" in f else f
        self.keys = {}
        self.seen = {}

    def add(self, layer):
        base = _snake(layer["class_name"])
        n = self.seen.get(base, 0)
        self.seen[base] = n + 1
        self.keys[layer["config"].get("name")] = base + ("_%d" % n if n else "")

    def get(self, layer_name, part=None):
        key = self.keys.get(layer_name, layer_name)
        if key not in self.g:
            return []
        g = self.g[key]
        if part is not None:
            g = g[part + "_layer"]
        if "cell" in g:
            g = g["cell"]
        elif "layer" in g and not len(g.get("vars", {})):  # TimeDistributed's own layer
            g = g["layer"]
        v = g.get("vars", {})
        return [np.asarray(v[k]) for k in sorted(v, key=int)]


def load(path):
    """(model config dict, weights reader) of a `.keras` or `.h5` file."""
    import h5py

    if zipfile.is_zipfile(path):
        what = "a Keras 3 .keras archive"
        try:
            z = zipfile.ZipFile(path)
            names = set(z.namelist())
            if "config.json" not in names or "model.weights.h5" not in names:
                raise ConvertError("%s: a .keras archive needs config.json and "
                                   "model.weights.h5; save it with model.save(PATH)" % path)
            what = "a Keras 3 .keras archive (its config.json)"
            config = json.loads(z.read("config.json"))
            what = "a Keras 3 .keras archive (its model.weights.h5)"
            import io
            f = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
        except (OSError, ValueError, zipfile.BadZipFile, zlib.error) as e:
            raise unreadable(path, what, e)
        return config, _KerasV3Weights(f)
    what = "a Keras model (a .keras zip or an HDF5 .h5)"
    try:
        f = h5py.File(path, "r")
        if "model_config" not in f.attrs:
            raise ConvertError("%s: no model_config: a weights-only .h5 (save_weights) has no "
                               "architecture; save the whole model" % path)
        what = "a Keras .h5 model (its model_config)"
        raw = f.attrs["model_config"]
        config = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
    except (OSError, ValueError) as e:
        raise unreadable(path, what, e)
    return config, _H5Weights(f)


# --------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------


def _activation_name(v):
    if isinstance(v, dict):  # Keras 3 may serialize {"class_name": ..., "config": {"name": ...}}
        return v.get("config", {}).get("name", v.get("class_name"))
    return v


def _check_rnn(layer, inner=False):
    """Refuses what rnnd cannot compute exactly; returns (cell, units, lbr)."""
    cls, c = layer["class_name"], layer["config"]
    if c.get("stateful"):
        _refuse(layer, "stateful", True, "rnnd keeps no state across requests in a Keras layer; "
                "send h0 (and c0) instead")
    if c.get("go_backwards") and not inner:
        _refuse(layer, "go_backwards", True, "a reverse-only layer is not supported; use "
                "Bidirectional(merge_mode=\"concat\")")
    if c.get("time_major"):
        _refuse(layer, "time_major", True, "rnnd's inputs are batch-major; rebuild the "
                "layer with time_major=False")
    act = _activation_name(c.get("activation", "tanh"))
    rec = _activation_name(c.get("recurrent_activation", "sigmoid"))
    if cls in ("CuDNNLSTM", "CuDNNGRU"):
        return ("lstm" if cls == "CuDNNLSTM" else "gru"), c["units"], True
    if cls == "SimpleRNN":
        if act not in ("tanh", "relu"):
            _refuse(layer, "activation", act, "rnnd's simple RNN computes tanh or relu; "
                    "retrain with one of those")
        return "rnn_" + act, c["units"], True
    if act != "tanh":
        _refuse(layer, "activation", act, "rnnd computes tanh; retrain with "
                "activation=\"tanh\"")
    if rec != "sigmoid":
        _refuse(layer, "recurrent_activation", rec, "rnnd computes sigmoid; retrain "
                "with recurrent_activation=\"sigmoid\"")
    if cls == "LSTM":
        return "lstm", c["units"], True
    return "gru", c["units"], bool(c.get("reset_after", False))


def _direction(layer, cell, units, w):
    """A Direction from Keras's [kernel, recurrent_kernel, (bias)] of one RNN layer."""
    cls = layer["class_name"]
    w = _weights_of(layer, w, (2, 3), "kernel, recurrent_kernel and bias")
    kernel, rec = w[0], w[1]
    bias = w[2] if len(w) == 3 else None
    G = {"lstm": 4, "gru": 3}.get(cell, 1)
    _check_shape(layer, "kernel", kernel, (None, G * units))
    _check_shape(layer, "recurrent_kernel", rec, (units, G * units))
    if bias is not None:  # CuDNN's and GRU reset_after's are input and recurrent biases
        _check_shape(layer, "bias", bias, (2 * G * units,) if cls.startswith("CuDNN") else
                     (G * units,), *([(2, G * units)] if cell == "gru" else []))
    if cls == "CuDNNLSTM":
        # cuDNN's double bias [input 4H, recurrent 4H]; Keras loads it into an LSTM as the sum.
        bias = bias.reshape(2, G * units)
        b_ih, b_hh = bias[0], bias[1]
    elif cls == "CuDNNGRU" or (cell == "gru" and bias is not None and bias.ndim == 2):
        # cuDNN's double bias (or reset_after's [2, 3H]): input biases, then recurrent.
        bias = bias.reshape(2, G * units)
        b_ih, b_hh = bias[0], bias[1]
    elif bias is not None:
        b_ih, b_hh = bias, np.zeros_like(bias)
    else:
        b_ih = b_hh = None
    if cls.startswith("CuDNN"):
        # cuDNN reads each gate's [in, H] slice of the kernel as a row-major [H, in]
        # matrix (Keras's CuDNN layers flatten it into cuDNN's parameters as it is), so
        # the matrix it multiplies by is that reinterpretation, not the transpose.
        w_ih = np.concatenate([k.reshape(-1).reshape(units, -1) for k in np.hsplit(kernel, G)])
        w_hh = np.concatenate([k.reshape(-1).reshape(units, -1) for k in np.hsplit(rec, G)])
    else:
        w_ih, w_hh = kernel.T, rec.T
    if cell == "gru":
        w_ih, w_hh = gru_keras_to_torch(w_ih), gru_keras_to_torch(w_hh)
        b_ih = None if b_ih is None else gru_keras_to_torch(b_ih)
        b_hh = None if b_hh is None else gru_keras_to_torch(b_hh)
    return Direction(w_ih, w_hh, b_ih, b_hh)


def _names_note(m, layers, last_seq):
    """A note of which names of the model became rnnd's fixed tensor names."""
    inp = [la["config"].get("name") or la.get("name") for la in layers
           if la["class_name"] == "InputLayer"]
    last = [la for la in layers if la["class_name"] not in IDENTITY_CLASSES][-1]
    out = "scores" if m.head is not None else "output" if last_seq else "h_n"
    state = out == "h_n" and (m.more or len(m.layers) > 1 or m.bidirectional)
    m.notes.append("names: model input%s is rnnd's `%s`; the output of layer '%s' is rnnd's "
                   "`%s` (rnnd's tensor names are fixed: docs/HTTP.md)%s" % (
                       " '%s'" % inp[0] if inp else "", "tokens" if m.embedding is not None
                       else "input", last["config"].get("name") or last.get("name"), out,
                       "; `h_n` holds every layer's final state, the layer's output is the "
                       "last %d values of each sequence's, flattened" % m.last.out_width
                       if state else ""))


class _Chain:
    """What convert has read of the layer chain so far."""

    def __init__(self):
        self.m = None          # the Model, from the first RNN layer on
        self.rnn_done = False  # an RNN layer without return_sequences ended the recurrence
        self.last_seq = True   # whether the last RNN layer returns every step
        self.masked = None     # the note of a Masking or mask_zero Embedding
        self.emb = None        # the Embedding's weights
        self.head = None       # the Dense head


def _read_activation(chain, layer):
    """A layer after the Dense head: its Activation, or a refusal."""
    cls, c = layer["class_name"], layer["config"]
    if cls == "Activation" and chain.head.activation == "none":
        act = DENSE_ACTIVATIONS.get(_activation_name(c.get("activation")))
        if act is None:
            _refuse(layer, "activation", c.get("activation"),
                    "rnnd's head computes none, sigmoid, tanh, relu or softmax; "
                    "save the model with one of those")
        chain.head.activation = act
        return
    _refuse(layer, "class_name", cls, "rnnd's head is one Dense layer, the model's "
            "last: save the model up to it and run the rest elsewhere")


def _read_embedding(chain, layer, weights):
    c = layer["config"]
    name = c.get("name") or layer.get("name")
    if chain.m is not None or chain.emb is not None or chain.masked:
        _refuse(layer, "class_name", layer["class_name"], "an Embedding must be the first layer: "
                "save the model from the Embedding on")
    (w,) = _weights_of(layer, weights.get(name), (1,), "embeddings")
    _check_shape(layer, "embeddings", w, (None, None))
    chain.emb = w
    if c.get("mask_zero"):
        chain.masked = "Embedding '%s' has mask_zero=true: send each sequence's length as " \
                       "`lengths` (token 0 must appear only as trailing padding)" % name


def _read_masking(chain, layer, weights):
    c = layer["config"]
    name = c.get("name") or layer.get("name")
    if chain.m is not None or chain.masked:
        _refuse(layer, "class_name", layer["class_name"], "Masking must come before the RNN "
                "layers: move it first")
    chain.masked = ("Masking '%s' (mask_value=%s) is served as lengths: send each sequence's "
                    "length as `lengths` (masked steps must be trailing padding)"
                    % (name, c.get("mask_value")))


def _read_dense(chain, layer, weights):
    c = layer["config"]
    name = c.get("name") or layer.get("name")
    if chain.m is None:
        _refuse(layer, "class_name", layer["class_name"], "a Dense layer before the RNN layers "
                "is not supported: run it elsewhere and save the model from the RNN on")
    act = DENSE_ACTIVATIONS.get(_activation_name(c.get("activation")), None)
    if act is None:
        _refuse(layer, "activation", c.get("activation"),
                "rnnd's head computes none (linear), sigmoid, tanh, relu or softmax; "
                "save the model with one of those")
    w = _weights_of(layer, weights.get(name), (1, 2), "kernel and bias")
    _check_shape(layer, "kernel", w[0], (chain.m.last.out_width, None))
    if len(w) > 1:
        _check_shape(layer, "bias", w[1], (w[0].shape[1],))
    chain.head = Head(w[0].T, w[1] if len(w) > 1 else None, act,
                      "all" if chain.last_seq else "last")


def _read_time_distributed(chain, layer, weights):
    """TimeDistributed(Dense): the Dense head on every step, as a Dense on a sequence is."""
    inner = layer["config"]["layer"]
    if inner["class_name"] != "Dense":
        _refuse(layer, "layer", inner["class_name"], "rnnd's head is a Dense layer (alone or "
                "in TimeDistributed): save the model up to the RNN layers and run the rest "
                "elsewhere")
    if chain.m is None or not chain.last_seq:
        _refuse(layer, "class_name", layer["class_name"], "TimeDistributed reads every step: "
                "it must follow an RNN layer with return_sequences=True")
    _read_dense(chain, {"class_name": "Dense", "config": dict(inner["config"],
                                                              name=_name(layer))}, weights)


def _refuse_return_state(layer):
    _refuse(layer, "return_state", True, "rnnd's outputs are output, h_n and c_n: "
            "save the model without return_state; rnnd returns h_n and c_n itself")


def _bidirectional(layer, weights):
    """(cell, units, lbr, return_sequences, [forward, backward Direction]) of a
    Bidirectional layer, or a refusal."""
    c = layer["config"]
    name = c.get("name") or layer.get("name")
    inner = c["layer"]
    if c.get("merge_mode", "concat") != "concat":
        _refuse(layer, "merge_mode", c.get("merge_mode"), "rnnd concatenates the two "
                "directions: retrain with merge_mode=\"concat\"")
    if inner["class_name"] not in RNN_CLASSES:
        _refuse(layer, "layer", inner["class_name"], "not a recurrent layer rnnd "
                "computes (LSTM, GRU, SimpleRNN, CuDNNLSTM, CuDNNGRU)")
    back = c.get("backward_layer")
    if back is not None:
        if back["class_name"] != inner["class_name"] or \
                back["config"].get("units") != inner["config"].get("units"):
            _refuse(layer, "backward_layer", back["class_name"], "the backward layer "
                    "must be the forward layer's kind and size; rebuild it so")
        _check_rnn(back, inner=True)
    cell, units, lbr = _check_rnn(inner, inner=True)
    if inner["config"].get("go_backwards"):
        _refuse(inner, "go_backwards", True, "inside Bidirectional the forward layer "
                "must run forward; rebuild it with go_backwards=False")
    seq = inner["config"].get("return_sequences", False)
    if c.get("return_state") or inner["config"].get("return_state"):
        _refuse_return_state(layer)
    dirs = [_direction(inner, cell, units, weights.get(name, "forward")),
            _direction(back or inner, cell, units, weights.get(name, "backward"))]
    return cell, units, lbr, seq, dirs


def _unidirectional(layer, weights):
    """(cell, units, lbr, return_sequences, [Direction]) of an LSTM, GRU, SimpleRNN,
    CuDNNLSTM or CuDNNGRU layer, or a refusal."""
    c = layer["config"]
    cell, units, lbr = _check_rnn(layer)
    seq = c.get("return_sequences", False)
    if c.get("return_state"):
        _refuse_return_state(layer)
    return cell, units, lbr, seq, [_direction(layer, cell, units,
                                              weights.get(c.get("name") or layer.get("name")))]


def _read_rnn(chain, layer, weights):
    """An RNN layer (or Bidirectional of one) stacked onto the chain's model, or a refusal
    of a layer rnnd does not serve."""
    cls = layer["class_name"]
    inner = None
    if cls == "Bidirectional":
        inner = layer["config"]["layer"]
        cell, units, lbr, seq, dirs = _bidirectional(layer, weights)
    elif cls in RNN_CLASSES:
        cell, units, lbr, seq, dirs = _unidirectional(layer, weights)
    else:
        _refuse(layer, "class_name", cls, "rnnd serves [Embedding|Masking] -> LSTM/GRU/"
                "SimpleRNN/CuDNNLSTM/CuDNNGRU/Bidirectional -> [Dense]: save that part as a "
                "model of its own and run the rest elsewhere")
    if chain.rnn_done:
        _refuse(layer, "class_name", cls, "the RNN layer before it has "
                "return_sequences=false: set return_sequences=True on it")
    if chain.masked and (inner or layer)["class_name"].startswith("CuDNN"):
        _refuse(layer, "mask", True, "Keras's CuDNN layers do not take a mask: "
                "convert it without the mask, or use LSTM/GRU")
    if chain.m is None:
        chain.m = Model(cell=cell, linear_before_reset=lbr, embedding=chain.emb)
    chain.m.stack(cell, lbr, dirs)  # a layer of another kind or size starts a block
    chain.last_seq = seq
    chain.rnn_done = not seq


_READERS = {"Embedding": _read_embedding, "Masking": _read_masking, "Dense": _read_dense,
            "TimeDistributed": _read_time_distributed}


def _read_layer(chain, layer, weights):
    """One layer of the chain, in order: identities pass, the rest add to the chain."""
    cls = layer["class_name"]
    if cls in IDENTITY_CLASSES:
        return
    if chain.head is not None:
        _read_activation(chain, layer)
        return
    _READERS.get(cls, _read_rnn)(chain, layer, weights)


def convert(path):
    config, weights = load(path)
    layers = _layers_of(config)
    chain = _Chain()
    for layer in layers:
        if layer["class_name"] != "InputLayer":
            weights.add(layer)
        _read_layer(chain, layer, weights)
    m = chain.m
    if m is None:
        raise ConvertError("%s: no LSTM, GRU, SimpleRNN, CuDNNLSTM or CuDNNGRU layer: "
                           "rnnd-convert converts models built on those" % path)
    m.head = chain.head
    _names_note(m, layers, chain.last_seq)
    if chain.masked:
        m.notes.append(chain.masked)
    if any(b.cell == "gru" and not b.linear_before_reset for b in m.blocks):
        m.notes.append("GRU reset_after=false: served by the CPU engine only (cuDNN has only "
                       "reset_after=true); GET /v2/models/<name>/config says so")
    _chain_note(m)
    return m
