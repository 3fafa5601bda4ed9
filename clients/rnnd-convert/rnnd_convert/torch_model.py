"""PyTorch models: a state_dict saved with torch.save, a TorchScript module
(torch.jit.save of torch.jit.trace or torch.jit.script), or a state_dict in a
`.safetensors` file, read without PyTorch.

torch.save and torch.jit.save write a zip whose data.pkl refers to raw storages in
data/<key>; a restricted unpickler rebuilds the tensors as NumPy arrays and the modules as
dicts (a scripted module's type tags are dropped, as torch does), and nothing else in the
pickle is run.  The recurrent layer's tensors are nn.LSTM's, nn.GRU's or nn.RNN's
state_dict names under a prefix (docs/MODELS.md), so they are rnnd's layout already; an
embedding and a linear head are found by their shapes (or named on the command line), and
every tensor left unused is named in a note.  Several such modules (self.lstm1,
self.lstm2) are a chain of blocks (docs/MODELS.md): in --prefix's order, or in the one
order in which their sizes chain.
"""

import pickle
import re
import zipfile
import zlib

import numpy as np

import itertools

from .model import UNKNOWN_ACTIVATION, Block, ConvertError, Direction, Head, Model, chain_note, \
    unreadable

_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
           "BFloat16Storage": "bf16", "LongStorage": np.int64, "IntStorage": np.int32,
           "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
           "BoolStorage": np.bool_}


class _Storage:
    def __init__(self, name):
        self.name = name


class _Module(dict):
    """A TorchScript module object: its attributes, set by the pickle's BUILD.  Each
    TorchScript class is a subclass naming it (torch_class: its module, its name), so that
    its code in the archive can be found (_nonlinearities)."""

    torch_class = None

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.update(state)


def _rebuild_tensor(storage, offset, size, stride, *_):
    a = storage
    n = int(np.prod(size)) if len(size) else 1
    if n == 0:
        return np.zeros(size, dtype=a.dtype)
    if len(size) != len(stride) or min(stride, default=0) < 0 or offset < 0 or \
            offset + sum((d - 1) * s for d, s in zip(size, stride)) >= len(a):
        # as_strided would read past the storage: a damaged or hand-made archive.
        raise ValueError("a tensor of shape %s (stride %s, offset %d) does not fit its "
                         "storage of %d elements" % (list(size), list(stride), offset, len(a)))
    itemsize = a.dtype.itemsize
    return np.lib.stride_tricks.as_strided(a[offset:], shape=tuple(size),
                                           strides=tuple(s * itemsize for s in stride)).copy()


def _rebuild_parameter(data, *_):
    return data


def _restore_type_tag(value, type_str=None):
    """torch.jit._pickle.restore_type_tag: TorchScript's static type of a list or dict
    attribute (a string such as 'List[str]'), which torch itself drops: the value."""
    return value


def _build_list(data):
    """torch.jit._pickle.build_tensorlist and its kin (older TorchScript archives): the
    list."""
    return data


# What a TorchScript archive's data.pkl calls in torch.jit._pickle: each returns its
# argument, as torch's own does.
_JIT_PICKLE = {"restore_type_tag": _restore_type_tag, "build_tensorlist": _build_list,
               "build_intlist": _build_list, "build_doublelist": _build_list,
               "build_boollist": _build_list}


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, zf, prefix):
        super().__init__(f)
        self.zf, self.prefix = zf, prefix
        self.cache, self.classes = {}, {}

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            import collections
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "torch.jit._pickle" and name in _JIT_PICKLE:
            return _JIT_PICKLE[name]
        if module == "torch" and name in _DTYPES:
            return _Storage(name)
        if module.startswith("__torch__"):
            key = (module, name)
            if key not in self.classes:
                self.classes[key] = type(name, (_Module,), {"torch_class": key})
            return self.classes[key]
        if module == "torch" and name in ("float32", "float16", "float64", "bfloat16"):
            return _Storage(name)
        raise ConvertError("the pickle refers to %s.%s: rnnd-convert reads tensors and "
                           "modules only; save the weights instead, torch.save(model."
                           "state_dict(), PATH), or torch.jit.save(torch.jit.script(model), "
                           "PATH)" % (module, name))

    def persistent_load(self, pid):
        # ('storage', storage type, key, location, numel)
        typ, key = pid[1], str(pid[2])
        if key not in self.cache:
            raw = self.zf.read("%sdata/%s" % (self.prefix, key))
            dt = _DTYPES.get(getattr(typ, "name", ""), None)
            if dt is None:
                raise ConvertError("storage %s: unsupported type %r; save float tensors" % (
                    key, getattr(typ, "name", typ)))
            if dt == "bf16":
                a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(raw, dtype=np.dtype(dt).newbyteorder("<"))
            self.cache[key] = a
        return self.cache[key]


def _flatten(obj, prefix, out):
    if isinstance(obj, np.ndarray):
        out[prefix[:-1]] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and not k.startswith("_"):
                _flatten(v, prefix + k + ".", out)


# The call a traced nn.RNN's code makes, which names its nonlinearity.
_TRACED_RNN = re.compile(r"\btorch\.rnn_(tanh|relu)\(")


def _traced_nonlinearity(zf, prefix, torch_class):
    """'tanh' or 'relu' when the code of the TorchScript class (a traced nn.RNN's) calls
    torch.rnn_tanh or torch.rnn_relu, and only one of them; else None."""
    module, name = torch_class
    try:
        code = zf.read("%scode/%s.py" % (prefix, module.replace(".", "/"))).decode("utf-8")
    except (KeyError, OSError, UnicodeDecodeError, zipfile.BadZipFile, zlib.error):
        return None
    body = re.search(r"^class %s\(.*?(?=^class |\Z)" % re.escape(name), code, re.S | re.M)
    kinds = set(_TRACED_RNN.findall(body.group(0))) if body else set()
    return kinds.pop() if len(kinds) == 1 else None


def _nonlinearities(obj, zf, prefix, path="", out=None):
    """{module prefix: 'tanh' or 'relu'} of the nn.RNN modules of a TorchScript archive:
    a scripted one keeps its `nonlinearity` attribute, a traced one's code calls
    torch.rnn_tanh or torch.rnn_relu.  A state_dict records neither."""
    out = {} if out is None else out
    if isinstance(obj, _Module):
        kind = obj.get("nonlinearity")
        if kind not in ("tanh", "relu") and obj.torch_class and "weight_hh_l0" in obj:
            kind = _traced_nonlinearity(zf, prefix, obj.torch_class)
        if kind in ("tanh", "relu"):
            out[path] = kind
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(k, str) and not k.startswith("_"):
                _nonlinearities(v, zf, prefix, path + k + ".", out)
    return out


class Tensors(dict):
    """{name: array}, and what else the file says of its modules: nonlinearity, {module
    prefix: 'tanh' or 'relu'} of a TorchScript archive's nn.RNN modules."""

    nonlinearity = {}


def load_tensors(path):
    """Tensors ({name: array}) of a torch.save'd state_dict, a TorchScript module's
    parameters and buffers, or a safetensors file."""
    if path.endswith(".safetensors"):
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
        try:
            return Tensors(load_file(path))
        except (SafetensorError, OSError, ValueError) as e:
            raise unreadable(path, "a safetensors file", e)
    if not zipfile.is_zipfile(path):
        raise ConvertError("%s: not a zip: rnnd-convert reads torch.save's zip format "
                           "(PyTorch >= 1.6) and TorchScript, or .safetensors" % path)
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise unreadable(path, "a torch.save or torch.jit.save zip", e)
    pkl = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if not pkl:
        raise ConvertError("%s: no data.pkl in the archive: not torch.save's format; save "
                           "with torch.save(model.state_dict(), PATH)" % path)
    prefix = pkl[0][:-len("data.pkl")]
    import io
    try:
        obj = _Unpickler(io.BytesIO(zf.read(pkl[0])), zf, prefix).load()
    except ConvertError:
        raise
    except Exception as e:  # a damaged zip or pickle: whatever zipfile and pickle raise
        raise unreadable(path, "a torch.save or torch.jit.save archive (its %s)" % pkl[0], e)
    out = Tensors()
    _flatten(obj, "", out)
    out.nonlinearity = _nonlinearities(obj, zf, prefix)
    return out


def _shape(a):
    return "[%s]" % ", ".join(str(d) for d in a.shape)


def _listing(t, names):
    return ", ".join("%s %s" % (n, _shape(t[n])) for n in names)


def _module(name):
    return name[:-len("weight")] if name.endswith("weight") else None


def _widths(t, prefix):
    """(input width, output width) of the module under prefix, from its tensors."""
    hh, hr = t.get(prefix + "weight_hh_l0"), t.get(prefix + "weight_hr_l0")
    dirs = 2 if prefix + "weight_ih_l0_reverse" in t else 1
    out = hr.shape[0] if hr is not None else (hh.shape[1] if hh is not None and hh.ndim == 2 else 0)
    return t[prefix + "weight_ih_l0"].shape[-1], dirs * out


def _prefixes(t, prefix):
    """The recurrent modules' prefixes, input first: --prefix's (one, or a chain's in
    order, comma-separated), or those the file has, ordered by their sizes when only one
    order chains (each module's input the one before's output)."""
    if prefix is not None:
        return [p for p in prefix.split(",")] if "," in prefix else [prefix], None
    found = sorted({k[:-len("weight_ih_l0")] for k in t if k.endswith("weight_ih_l0")})
    if not found:
        raise ConvertError("no tensor named <prefix>weight_ih_l0, so no nn.LSTM, nn.GRU or "
                           "nn.RNN: rnnd-convert converts their state_dict names; the file "
                           "has %s" % ", ".join(sorted(t)[:12]))
    if len(found) == 1:
        return found, None
    w = {p: _widths(t, p) for p in found}
    orders = [] if len(found) > 6 else [
        o for o in itertools.permutations(found)
        if all(w[o[i]][1] == w[o[i + 1]][0] for i in range(len(o) - 1))]
    if len(orders) != 1:
        raise ConvertError(
            "several recurrent modules (%s) %s: give --prefix for the one to serve, or "
            "theirs in order, comma-separated, for a chain (--prefix %s)" % (
                ", ".join("%s: %d in, %d out" % (p, w[p][0], w[p][1]) for p in found),
                "that chain in more than one order" if orders else
                "that do not chain (no order has each one's input the one before's output)",
                ",".join(found)))
    return list(orders[0]), ("the recurrent modules in the order their sizes chain: %s "
                             "(each one's input is the one before's output; --prefix %s "
                             "gives it)" % (" -> ".join(orders[0]), ",".join(orders[0])))


def _chain(t, prefix, cell):
    """(Model with every recurrent module as a block, the names used)."""
    prefixes, note = _prefixes(t, prefix)
    m, used, width = None, [], None
    for k, p in enumerate(prefixes):
        if k and p + "weight_ih_l0" in t and _widths(t, p)[0] != width:
            raise ConvertError("--prefix %s: '%sweight_ih_l0' takes %d inputs, but '%s' gives "
                               "%d: give the modules in the order forward() runs them" % (
                                   ",".join(prefixes), p, _widths(t, p)[0], prefixes[k - 1],
                                   width))
        b, u = _recurrent(t, p, cell if len(prefixes) == 1 or _fits(t, p, cell) else None)
        used += u
        if m is None:
            m = b
        else:
            m.more.append(Block(b.cell, b.layers, b.linear_before_reset))
            m.notes += b.notes
        width = m.last.out_width
    if note:
        m.notes.append(note)
    chain_note(m)
    return m, used


def _fits(t, prefix, cell):
    """Whether --cell cell names the kind of the module under prefix (its gate count)."""
    hh, hr = t.get(prefix + "weight_hh_l0"), t.get(prefix + "weight_hr_l0")
    if cell is None or hh is None or hh.ndim != 2:
        return False
    H = hr.shape[1] if hr is not None else hh.shape[1]
    return {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}.get(cell) * H == hh.shape[0]


def _recurrent(t, prefix, cell):
    """(Model with the recurrent layers under prefix, the names it used) from the tensors t."""
    if prefix + "weight_ih_l0" not in t:
        raise ConvertError("tensor '%sweight_ih_l0': missing (--prefix %r); the file has %s" % (
            prefix, prefix, ", ".join(sorted(t)[:12])))
    hh, hr = t.get(prefix + "weight_hh_l0"), t.get(prefix + "weight_hr_l0")
    if hh is None or hh.ndim != 2:
        raise ConvertError("tensor '%sweight_hh_l0': missing or not 2-D; save the whole "
                           "nn.LSTM/nn.GRU/nn.RNN's state_dict" % prefix)
    H = hr.shape[1] if hr is not None else hh.shape[1]
    G = hh.shape[0] // H
    kind = getattr(t, "nonlinearity", {}).get(prefix)  # a TorchScript nn.RNN's, or None
    auto = {4: "lstm", 3: "gru", 1: "rnn_" + (kind or "tanh")}.get(G) \
        if hh.shape[0] % H == 0 else None
    if cell in ("rnn_tanh", "rnn_relu") and kind and cell != auto:
        raise ConvertError("--cell %s: the archive's nn.RNN%s has nonlinearity='%s'; give "
                           "--cell %s or leave it out" % (cell, " '%s'" % prefix if prefix
                                                          else "", kind, auto))
    if cell is None:
        if auto is None:
            raise ConvertError("tensor '%sweight_hh_l0': %d rows for hidden size %d is no LSTM, "
                               "GRU or RNN; give --prefix for an nn.LSTM/nn.GRU/nn.RNN's tensors"
                               % (prefix, hh.shape[0], H))
        cell = auto
    elif {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}.get(cell) != G:
        raise ConvertError("--cell %s: tensor '%sweight_hh_l0' has %d gates; give --cell %s or "
                           "leave it out" % (cell, prefix, G, auto or "of that kind"))
    layers = sorted(int(m.group(1)) for k in t for m in [re.fullmatch(
        re.escape(prefix) + r"weight_ih_l(\d+)", k)] if m)
    if layers != list(range(len(layers))):
        raise ConvertError("tensors '%sweight_ih_l*': layers %s are not 0..%d; save the whole "
                           "module's state_dict" % (prefix, layers, len(layers) - 1))
    dirs = 2 if prefix + "weight_ih_l0_reverse" in t else 1
    m = Model(cell=cell)
    used = []
    for k in layers:
        row = []
        for d in range(dirs):
            s = "_l%d%s" % (k, "_reverse" if d else "")
            names = {n: prefix + n + s for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                                 "weight_hr")}

            def get(n, required=True):
                name = names[n]
                if name not in t:
                    if required:
                        raise ConvertError("tensor '%s': missing; save the whole "
                                           "nn.LSTM/nn.GRU/nn.RNN's state_dict" % name)
                    return None
                used.append(name)
                return t[name]
            row.append(Direction(get("weight_ih"), get("weight_hh"), get("bias_ih", False),
                                 get("bias_hh", False), get("weight_hr", False), names))
        m.layers.append(row)
    if cell == "rnn_tanh" and auto == "rnn_tanh" and kind is None:
        m.notes.append("an nn.RNN's nonlinearity is not in its state_dict: converted as tanh; "
                       "give --cell rnn_relu for relu")
    return m, used


def _find(t, used, fits, before, flag, what):
    """The one tensor that fits, among those not used; ties are broken by position (the
    embedding before the recurrent tensors, the head after them).  None when none fits."""
    names = list(t)
    rnn_at = [names.index(n) for n in used]
    cands = [n for n in names if n not in used and fits(n)]
    if len(cands) > 1:
        placed = [n for n in cands if (names.index(n) < min(rnn_at)) == before]
        if len(placed) == 1:
            return placed[0]
    if len(cands) > 1:
        raise ConvertError("%s could each be the %s: give %s NAME" % (
            _listing(t, cands), what, flag))
    return cands[0] if cands else None


def _named(t, n, what):
    if n not in t:
        raise ConvertError("tensor '%s' (%s): missing; the file has %s" % (
            n, what, ", ".join(sorted(t)[:12])))
    return t[n]


def _embedding(t, m, used, name):
    in_size = m.layers[0][0].w_ih.shape[1]
    if name is None:
        def fits(n):
            a = t[n]
            return (_module(n) is not None and a.ndim == 2 and a.shape[1] == in_size and
                    a.dtype.kind == "f" and _module(n) + "bias" not in t)
        name = _find(t, used, fits, True, "--embedding", "embedding ([N, %d], no bias)" % in_size)
        if name is None:
            return
        m.notes.append("embedding: '%s' %s, found by its shape (--embedding names another)"
                       % (name, _shape(t[name])))
    w = _named(t, name, "--embedding")
    if w.ndim != 2 or w.shape[1] != in_size:
        raise ConvertError("tensor '%s' (--embedding) has shape %s; the recurrent layer's input "
                           "size is %d, so an embedding is [N, %d]" % (
                               name, _shape(w), in_size, in_size))
    m.embedding = w
    used.append(name)


def _head(t, m, used, weight, bias, activation, apply):
    width = m.last.out_width
    found = weight is None
    if weight is None:
        def fits(n):
            a = t[n]
            return _module(n) is not None and a.ndim == 2 and a.shape[1] == width and \
                a.dtype.kind == "f"
        weight = _find(t, used, fits, False, "--head-weight",
                       "head ([units, %d], an nn.Linear after the recurrent layer)" % width)
        if weight is None:
            if bias is not None:
                raise ConvertError("--head-bias without --head-weight: give both")
            if activation is not None:
                raise ConvertError("--head-activation %s: the file has no head (a [units, %d] "
                                   "weight); give --head-weight" % (activation, width))
            return
    w = _named(t, weight, "--head-weight")
    used.append(weight)
    if bias is None and _module(weight) is not None and _module(weight) + "bias" in t:
        bias = _module(weight) + "bias"
    b = _named(t, bias, "--head-bias") if bias is not None else None
    if b is not None:
        used.append(bias)
    if found:
        m.notes.append("head: '%s' %s%s, found by its shape (--head-weight names another)" % (
            weight, _shape(w), " and '%s'" % bias if bias else ""))
    m.head = Head(w, b, activation or "none", apply or "last",
                  {"weight": weight, "bias": bias} if bias else {"weight": weight})
    if apply is None:
        m.notes.append("the head reads each sequence's final state (--head-apply last): a "
                       "state_dict does not record whether forward() applies '%s' to the last "
                       "step or to every one; give --head-apply all for every step" % weight)
    if activation is None:
        m.head_activation_known = False
        m.notes.append("%s: a state_dict does not record the activation forward() applies "
                       "after '%s'; give --head-activation softmax, sigmoid, tanh or relu if "
                       "it applies one" % (UNKNOWN_ACTIVATION, weight))


def convert(path, prefix=None, cell=None, embedding=None, head_weight=None, head_bias=None,
            head_activation=None, head_apply=None):
    t = load_tensors(path)
    m, used = _chain(t, prefix, cell)
    _embedding(t, m, used, embedding)
    _head(t, m, used, head_weight, head_bias, head_activation, head_apply)
    unused = [n for n in t if n not in used]
    if unused:
        m.notes.append("unused: %s: rnnd serves an embedding, the recurrent layers and one "
                       "linear head; if forward() computes with these, the served model's "
                       "outputs differ" % _listing(t, unused))
    return m
