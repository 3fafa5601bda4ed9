"""PyTorch models: a state_dict saved with torch.save, a TorchScript module
(torch.jit.save), or a state_dict in a `.safetensors` file, read without PyTorch.

torch.save and torch.jit.save write a zip whose data.pkl refers to raw storages in
data/<key>; a restricted unpickler rebuilds the tensors as NumPy arrays and the modules as
dicts, and nothing else in the pickle is run.  The recurrent layer's tensors are nn.LSTM's,
nn.GRU's or nn.RNN's state_dict names under a prefix (docs/MODELS.md), so they are rnnd's
layout already; the embedding and the head are named on the command line.
"""

import pickle
import re
import zipfile

import numpy as np

from .model import ConvertError, Direction, Head, Model

_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
           "BFloat16Storage": "bf16", "LongStorage": np.int64, "IntStorage": np.int32,
           "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
           "BoolStorage": np.bool_}


class _Storage:
    def __init__(self, name):
        self.name = name


class _Module(dict):
    """A TorchScript module object: its attributes, set by the pickle's BUILD."""

    def __setstate__(self, state):
        if isinstance(state, dict):
            self.update(state)


def _rebuild_tensor(storage, offset, size, stride, *_):
    a = storage
    n = int(np.prod(size)) if len(size) else 1
    if n == 0:
        return np.zeros(size, dtype=a.dtype)
    itemsize = a.dtype.itemsize
    return np.lib.stride_tricks.as_strided(a[offset:], shape=tuple(size),
                                           strides=tuple(s * itemsize for s in stride)).copy()


def _rebuild_parameter(data, *_):
    return data


class _Unpickler(pickle.Unpickler):
    def __init__(self, f, zf, prefix):
        super().__init__(f)
        self.zf, self.prefix = zf, prefix
        self.cache = {}

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            import collections
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return _rebuild_parameter
        if module == "torch" and name in _DTYPES:
            return _Storage(name)
        if module.startswith("__torch__"):
            return _Module
        if module == "torch" and name in ("float32", "float16", "float64", "bfloat16"):
            return _Storage(name)
        raise ConvertError("the pickle refers to %s.%s: rnnd-convert reads tensors and "
                           "modules only" % (module, name))

    def persistent_load(self, pid):
        # ('storage', storage type, key, location, numel)
        typ, key = pid[1], str(pid[2])
        if key not in self.cache:
            raw = self.zf.read("%sdata/%s" % (self.prefix, key))
            dt = _DTYPES.get(getattr(typ, "name", ""), None)
            if dt is None:
                raise ConvertError("storage %s: unsupported type %r" % (key, getattr(typ, "name", typ)))
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


def load_tensors(path):
    """{name: array} of a torch.save'd state_dict, a TorchScript module's parameters and
    buffers, or a safetensors file."""
    if path.endswith(".safetensors"):
        from safetensors.numpy import load_file
        return dict(load_file(path))
    if not zipfile.is_zipfile(path):
        raise ConvertError("%s: not a zip: rnnd-convert reads torch.save's zip format "
                           "(PyTorch >= 1.6) and TorchScript, or .safetensors" % path)
    zf = zipfile.ZipFile(path)
    pkl = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
    if not pkl:
        raise ConvertError("%s: no data.pkl in the archive" % path)
    prefix = pkl[0][:-len("data.pkl")]
    import io
    obj = _Unpickler(io.BytesIO(zf.read(pkl[0])), zf, prefix).load()
    out = {}
    _flatten(obj, "", out)
    return out


def convert(path, prefix=None, cell=None, embedding=None, head_weight=None, head_bias=None,
            head_activation="none", head_apply="last"):
    t = load_tensors(path)
    if prefix is None:
        found = sorted({k[:-len("weight_ih_l0")] for k in t if k.endswith("weight_ih_l0")})
        if len(found) != 1:
            raise ConvertError("%s: %s tensors named <prefix>weight_ih_l0 (%s): give --prefix" % (
                path, "no" if not found else "several", ", ".join(found)))
        prefix = found[0]
    if prefix + "weight_ih_l0" not in t:
        raise ConvertError("tensor '%sweight_ih_l0': missing (--prefix %r); the file has %s" % (
            prefix, prefix, ", ".join(sorted(t)[:12])))
    hh, hr = t[prefix + "weight_hh_l0"], t.get(prefix + "weight_hr_l0")
    H = hr.shape[1] if hr is not None else hh.shape[1]
    G = hh.shape[0] // H
    auto = {4: "lstm", 3: "gru", 1: "rnn_tanh"}.get(G)
    if cell is None:
        if auto is None:
            raise ConvertError("tensor '%sweight_hh_l0': %d rows for hidden size %d is no LSTM, "
                               "GRU or RNN" % (prefix, t[prefix + "weight_hh_l0"].shape[0], H))
        cell = auto
    elif {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}.get(cell) != G:
        raise ConvertError("--cell %s: tensor '%sweight_hh_l0' has %d gates" % (cell, prefix, G))
    layers = sorted(int(m.group(1)) for k in t for m in [re.fullmatch(
        re.escape(prefix) + r"weight_ih_l(\d+)", k)] if m)
    if layers != list(range(len(layers))):
        raise ConvertError("tensors '%sweight_ih_l*': layers %s are not 0..%d" % (prefix, layers, len(layers) - 1))
    dirs = 2 if prefix + "weight_ih_l0_reverse" in t else 1
    m = Model(cell=cell)
    for k in layers:
        row = []
        for d in range(dirs):
            s = "_l%d%s" % (k, "_reverse" if d else "")

            def get(n, required=True):
                name = prefix + n + s
                if name not in t:
                    if required:
                        raise ConvertError("tensor '%s': missing" % name)
                    return None
                return t[name]
            row.append(Direction(get("weight_ih"), get("weight_hh"), get("bias_ih", False),
                                 get("bias_hh", False), get("weight_hr", False)))
        m.layers.append(row)

    def named(n, what):
        if n is None:
            return None
        if n not in t:
            raise ConvertError("tensor '%s' (%s): missing; the file has %s" % (n, what, ", ".join(sorted(t)[:12])))
        return t[n]
    m.embedding = named(embedding, "--embedding")
    w = named(head_weight, "--head-weight")
    if w is not None:
        m.head = Head(w, named(head_bias, "--head-bias"), head_activation, head_apply)
    elif head_bias is not None:
        raise ConvertError("--head-bias without --head-weight")
    if cell == "rnn_tanh" and auto == "rnn_tanh":
        m.notes.append("an nn.RNN's nonlinearity is not in its state_dict: converted as tanh; "
                       "give --cell rnn_relu for relu")
    return m
