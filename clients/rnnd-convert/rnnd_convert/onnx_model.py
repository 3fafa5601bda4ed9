"""ONNX models: the LSTM, GRU and RNN operators (opset 7+), read with the onnx package.

The graph's shape must be: [Gather embedding] -> one or more LSTM/GRU/RNN operators of one
kind -> [Gemm, or MatMul + Add, head] -> [Sigmoid/Tanh/Relu/Softmax], with only reshaping
operators (Transpose, Squeeze, Reshape, Concat, ...) between them, as torch.onnx.export
and tf2onnx write it.  ONNX's W is [dirs, gates*H, in] with LSTM gates i, o, f, c and GRU
z, r, h; B is [dirs, 2*gates*H], the input biases then the recurrent ones.  rnnd's order is
PyTorch's, LSTM i, f, g, o and GRU r, z, n (docs/MODELS.md).
"""

import numpy as np

from .model import chain_note as _chain_note
from .model import ConvertError, Direction, Head, Model, gru_keras_to_torch, lstm_onnx_to_torch, \
    unreadable

RNN_OPS = {"LSTM": "lstm", "GRU": "gru", "RNN": "rnn"}
DEFAULT_ACTS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"], "RNN": ["tanh"]}
# Operators that only move data around: allowed between the parts.
PLUMBING = {"Transpose", "Squeeze", "Unsqueeze", "Reshape", "Concat", "Shape", "Gather", "Slice",
            "Constant", "Identity", "Cast", "ConstantOfShape", "Expand", "Flatten", "Split",
            "Dropout", "Tile", "Range", "Size", "Equal", "Where", "Not", "ReduceSum",
            "ReduceMax", "Less", "Greater", "NonZero", "Sub", "Add"}
# Arithmetic allowed on shapes (Graph.shape_only), not on the data.
SHAPE_MATH = {"Mul", "Div", "Add", "Sub", "Max", "Min", "Abs", "Neg", "Mod"}
HEAD_ACTS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu", "Softmax": "softmax",
             "LogSoftmax": None}


def _name(node):
    return node.name or node.output[0]


def _refuse(node, attr, value, why):
    raise ConvertError("operator '%s' (%s): %s=%s: %s" % (_name(node), node.op_type, attr, value, why))


class _Graph:
    def __init__(self, g, shapes_from=None):
        """g: the GraphProto; shapes_from: value_info of its shapes inferred."""
        from onnx import numpy_helper

        self.g = g
        self.const = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.producer = {}
        self.consumers = {}
        for n in g.node:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value":
                        self.const[n.output[0]] = numpy_helper.to_array(a.t)
        self.inputs = {i.name for i in g.input} - set(self.const)
        self.shapes = {}  # tensor name: [int, or None where symbolic or unknown]
        for v in list(shapes_from or ()) + list(g.value_info) + list(g.input) + list(g.output):
            t = v.type.tensor_type
            if t.HasField("shape"):
                self.shapes[v.name] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0
                                       else None for d in t.shape.dim]

    def attrs(self, node):
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def is_zero(self, name, depth=0):
        """Whether a tensor is all zeros whatever the graph's inputs (torch's default h0)."""
        if name in self.const:
            return not np.any(self.const[name])
        n = self.producer.get(name)
        if n is None or depth > 16:
            return False
        if n.op_type == "ConstantOfShape":
            v = self.attrs(n).get("value")
            from onnx import numpy_helper
            return v is None or not np.any(numpy_helper.to_array(v))
        if n.op_type in ("Expand", "Tile", "Reshape", "Unsqueeze", "Squeeze", "Transpose",
                         "Cast", "Identity", "Slice", "Gather"):
            return self.is_zero(n.input[0], depth + 1)
        if n.op_type == "Concat":
            return all(self.is_zero(i, depth + 1) for i in n.input)
        return False

    def shape_only(self, name, depth=0):
        """Whether a tensor is computed from constants and Shape/Size outputs alone (the
        arithmetic of a reshape's target shape, as torch's dynamo exporter writes it for
        dynamic sizes), never from the data."""
        if name in self.const:
            return True
        n = self.producer.get(name)
        if n is None or depth > 32:
            return False
        if n.op_type in ("Shape", "Size"):
            return True
        return all(self.shape_only(i, depth + 1) for i in n.input if i)

    def path_to(self, name, targets, seen=None):
        """The nodes on a path from a target node's output back to `name`: (target node,
        output index, [nodes between]) or None."""
        seen = seen if seen is not None else set()
        if name in seen:
            return None
        seen.add(name)
        n = self.producer.get(name)
        if n is None:
            return None
        if tuple(n.output) in targets:
            return n, list(n.output).index(name), []
        for i in n.input:
            if i in self.const:
                continue
            r = self.path_to(i, targets, seen)
            if r is not None:
                return r[0], r[1], r[2] + [n]
        return None


def _opt_input(node, k):
    return node.input[k] if len(node.input) > k and node.input[k] else None


def _weights(graph, node, k, what):
    name = _opt_input(node, k)
    if name is None:
        return None
    if name not in graph.const:
        _refuse(node, "input %s" % what, name, "rnnd needs the weights as initializers; "
                "export with constant folding (torch.onnx.export's default)")
    return graph.const[name].astype(np.float64)


def _check_shapes(node, dirs, G, H, W, R, B):
    """Refuses W, R or B of another shape than the operator's direction count, gate count
    G and hidden size H make (ONNX: W [dirs, G*H, in], R [dirs, G*H, H], B [dirs, 2*G*H])."""
    n_in = W.shape[-1] if W.ndim == 3 else "input_size"
    for k, (a, shape) in enumerate(((W, [dirs, G * H, n_in]), (R, [dirs, G * H, H]),
                                    (B, [dirs, 2 * G * H]))):
        if a is not None and list(a.shape) != shape:
            raise ConvertError("operator '%s' (%s): tensor '%s' (input %s) has shape %s, rnnd "
                               "needs %s (%d direction%s, hidden_size %d)" % (
                                   _name(node), node.op_type, node.input[k + 1], "WRB"[k],
                                   list(a.shape), "[%s]" % ", ".join(str(d) for d in shape),
                                   dirs, "s" if dirs > 1 else "", H))


def _rnn(graph, node):
    a = graph.attrs(node)
    op = node.op_type
    direction = a.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction == "reverse":
        _refuse(node, "direction", "reverse", "a reverse-only RNN is not supported; rnnd runs "
                "forward or bidirectional: reverse each sequence within its length and export a "
                "forward RNN")
    if "clip" in a:
        _refuse(node, "clip", a["clip"], "rnnd does not clip cell inputs; export the RNN "
                "without clip")
    if a.get("input_forget", 0):
        _refuse(node, "input_forget", a["input_forget"], "rnnd's LSTM has no coupled "
                "input/forget gate; export an LSTM with input_forget=0")
    acts = [s.decode() if isinstance(s, bytes) else s for s in a.get("activations", [])]
    cell = RNN_OPS[op]
    want = DEFAULT_ACTS[op]
    dirs = 2 if direction == "bidirectional" else 1
    if acts:
        lower = [s.lower() for s in acts]
        if op == "RNN" and set(lower) <= {"relu"}:
            cell = "rnn_relu"
        elif lower != want * (len(lower) // len(want)):
            _refuse(node, "activations", acts, "rnnd computes the defaults %s; export the "
                    "RNN with those" % want)
    if cell == "rnn":
        cell = "rnn_tanh"
    if any(k.startswith("activation_") for k in a):
        _refuse(node, "activation_alpha/beta", "set", "rnnd computes the default activations; "
                "export the RNN without activation_alpha/beta")
    if op == "LSTM" and _opt_input(node, 7) is not None:
        P = graph.const.get(node.input[7])
        if P is None or np.any(P):
            _refuse(node, "input P", node.input[7], "rnnd's LSTM has no peepholes; export an "
                    "LSTM without P")
    W = _weights(graph, node, 1, "W")
    R = _weights(graph, node, 2, "R")
    B = _weights(graph, node, 3, "B")
    for k, what in ((5, "initial_h"), (6, "initial_c")):
        name = _opt_input(node, k)
        if name is not None and name not in graph.inputs and not graph.is_zero(name):
            _refuse(node, "input " + what, name, "a non-zero constant initial state; rnnd takes "
                    "h0/c0 from the request (zeros without them)")
    if W is None or R is None:
        raise ConvertError("operator '%s' (%s): input %s is missing: an ONNX %s has W and R"
                           % (_name(node), op, "W" if W is None else "R", op))
    H = int(a["hidden_size"]) if "hidden_size" in a else R.shape[-1]
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    _check_shapes(node, dirs, G, H, W, R, B)
    lbr = bool(a.get("linear_before_reset", 0)) if op == "GRU" else True
    out = []
    for d in range(dirs):
        w_ih, w_hh = W[d], R[d]
        b_ih = b_hh = None
        if B is not None:
            b_ih, b_hh = B[d][:G * H], B[d][G * H:]
        if op == "LSTM":
            w_ih, w_hh = lstm_onnx_to_torch(w_ih), lstm_onnx_to_torch(w_hh)
            b_ih = None if b_ih is None else lstm_onnx_to_torch(b_ih)
            b_hh = None if b_hh is None else lstm_onnx_to_torch(b_hh)
        elif op == "GRU":
            w_ih, w_hh = gru_keras_to_torch(w_ih), gru_keras_to_torch(w_hh)
            b_ih = None if b_ih is None else gru_keras_to_torch(b_ih)
            b_hh = None if b_hh is None else gru_keras_to_torch(b_hh)
        out.append(Direction(w_ih, w_hh, b_ih, b_hh))
    return cell, lbr, out


def _trace_seeds(graph, last, B, T, dirs, H):
    """The element ids _trace starts from: the constants, the last RNN's Y and Y_h, ids
    below zero for the other recurrent outputs, zeros for the graph's inputs."""
    a = graph.attrs(last)
    layout = a.get("layout", 0)
    ids = np.arange(1, T * dirs * B * H + 1).reshape(T, dirs, B, H)
    if _opt_input(last, 4) is None:
        yh = np.stack([ids[T - 1 if d == 0 else 0, d] for d in range(dirs)])
    else:
        yh = np.arange(ids.size + 1, ids.size + 1 + dirs * B * H).reshape(dirs, B, H)
    val = dict(graph.const)
    val[last.output[0]] = ids.transpose(2, 0, 1, 3) if layout else ids
    if len(last.output) > 1 and last.output[1]:
        val[last.output[1]] = yh.transpose(1, 0, 2) if layout else yh
    # Other recurrent outputs (earlier layers, Y_c) get ids of their own, below zero.
    nxt = -1
    for n in graph.g.node:
        if n.op_type not in RNN_OPS:
            continue
        lay = graph.attrs(n).get("layout", 0)
        shapes = [(T, dirs, B, H), (dirs, B, H), (dirs, B, H)]
        for k, o in enumerate(n.output):
            if o and o not in val:
                sh = shapes[k] if not lay else (shapes[k][2], shapes[k][0], shapes[k][1],
                                                shapes[k][3]) if k == 0 else (B, dirs, H)
                size = int(np.prod(sh))
                val[o] = np.arange(nxt, nxt - size, -1).reshape(sh)
                nxt -= size
    for i in graph.g.input:
        if i.name not in val:
            dims = [d.dim_value or (B if k == (1 if layout == 0 else 0) else T)
                    for k, d in enumerate(i.type.tensor_type.shape.dim)]
            val[i.name] = np.zeros(dims, dtype=np.int64)
    return val, ids, yh


def _ints(x):
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _squeeze(op, x, ins, at):
    """Squeeze or Unsqueeze, with the axes as an input (opset 13+) or an attribute."""
    axes = _ints(ins[1]) if len(ins) > 1 and ins[1] is not None else at.get("axes")
    if op == "Squeeze":
        return np.squeeze(x, tuple(axes)) if axes else np.squeeze(x)
    r = x
    for ax in sorted(v % (x.ndim + len(axes)) for v in axes):
        r = np.expand_dims(r, ax)
    return r


def _slice(x, ins, at):
    """Slice, with starts, ends, axes and steps as inputs (opset 10+) or attributes."""
    if len(ins) > 1:
        st, en = _ints(ins[1]), _ints(ins[2])
        axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else range(len(st))
        steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(st)
    else:
        st, en = at["starts"], at["ends"]
        axes = at.get("axes", range(len(st)))
        steps = [1] * len(st)
    sl = [slice(None)] * x.ndim
    for ax, b0, e0, s0 in zip(axes, st, en, steps):
        sl[ax] = slice(b0, e0 if abs(e0) < 2 ** 62 else None, s0)
    return x[tuple(sl)]


_NOT_TRACED = object()


def _plumbing_value(op, ins, at):
    """The output of one reshaping operator on its inputs' values, or _NOT_TRACED for an
    operator _trace does not run."""
    from onnx import numpy_helper

    x = ins[0] if ins else None
    if op in ("Identity", "Cast", "Dropout"):
        return x
    if op == "Transpose":
        return np.transpose(x, at.get("perm"))
    if op in ("Squeeze", "Unsqueeze"):
        return _squeeze(op, x, ins, at)
    if op == "Concat":
        return np.concatenate(ins, axis=at["axis"])
    if op == "Slice":
        return _slice(x, ins, at)
    if op == "Gather":
        return np.take(x, np.asarray(ins[1]), axis=at.get("axis", 0))
    if op == "Reshape":
        shape = _ints(ins[1])
        shape = [x.shape[k] if v == 0 and not at.get("allowzero") else v
                 for k, v in enumerate(shape)]
        return x.reshape(shape)
    if op == "Flatten":
        ax = at.get("axis", 1)
        return x.reshape(int(np.prod(x.shape[:ax])), -1)
    if op == "Shape":
        return np.asarray(x.shape, dtype=np.int64)
    if op == "ConstantOfShape":
        v = at.get("value")
        return np.full(_ints(x), numpy_helper.to_array(v).reshape(-1)[0] if v else 0)
    if op == "Expand":
        return x * np.ones(_ints(ins[1]), dtype=x.dtype)
    if op in ("Add", "Sub", "Mul") and x.dtype.kind == "i" and ins[1].dtype.kind == "i":
        return {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](x, ins[1])
    return _NOT_TRACED


def _trace(graph, last, B, T, dirs, H):
    """Runs the reshaping operators on tensors of element ids: the last RNN's Y holds
    1..N in its own layout, Y_h the ids of the Y elements it equals (the last step
    forward, the first backward) when the node has no sequence_lens, or its own ids.
    Returns {tensor name: array} for every tensor this can compute."""
    val, ids, yh = _trace_seeds(graph, last, B, T, dirs, H)
    for n in graph.g.node:
        if n.op_type in RNN_OPS or any(o in val for o in n.output):
            continue
        ins = [val.get(i) if i else None for i in n.input]
        if any(v is None for k, v in enumerate(ins) if n.input[k]):
            continue
        at = graph.attrs(n)
        try:
            r = _plumbing_value(n.op_type, ins, at)
        except (ValueError, IndexError, KeyError, TypeError):
            continue
        if r is _NOT_TRACED:
            continue
        val[n.output[0]] = np.asarray(r)
    return val, ids, yh


def _head_apply(graph, last, lin, dirs, H):
    """'last' when the head's input is the last RNN's final states [B, dirs*H] (each
    direction's, concatenated), 'all' when it is every step [B or T, T or B, dirs*H].
    The element-id trace runs at B=2, T=3; a graph exported with fixed sizes (reshapes to
    constant shapes, as torch's dynamo exporter writes them) cannot run there, and is
    traced at the sizes it was exported with when both are above 1, and otherwise its
    path from the RNN to the head is read axis by axis (_layout_apply)."""
    T0, B0 = _export_sizes(graph, last)
    sizes = [(2, 3)] + ([(B0, T0)] if B0 and T0 and B0 > 1 and T0 > 1 else [])
    for B, T in sizes:
        val, ids, yh = _trace(graph, last, B, T, dirs, H)
        x = val.get(lin.input[0])
        if x is None:
            continue
        if np.array_equal(x, np.concatenate(list(yh), axis=-1)):
            return "last"
        allv = ids.transpose(0, 2, 1, 3).reshape(T, B, dirs * H)  # [T, B, dirs*H]
        if np.array_equal(x, allv) or np.array_equal(x, allv.transpose(1, 0, 2)):
            return "all"
        break
    apply, why = _layout_apply(graph, last, lin.input[0], dirs, H)
    if apply is not None:
        return apply
    _refuse(lin, "input", lin.input[0], why or "the head reads neither the last RNN's final "
            "states (Y_h, or the last step of Y without sequence_lens) nor every step of Y; "
            "export a head on one of those")


# _layout_apply's axes: every dimension of a tensor is a tuple of atoms, the axes of the
# RNN's output it holds in order (T steps, B sequences, D directions, H units; a dimension
# of size 1 that holds none is ()).
_ATOM_NAMES = {"T": "T", "B": "B", "D": "dirs", "H": "H"}
_SERVED = "rnnd's head reads every step of Y as [B, T, dirs*H] or [T, B, dirs*H], or the " \
    "final states as [B, dirs*H]; export a head on one of those"


_MIXES = "mixes its axes (a reshape that does more than merge neighbouring axes or " \
    "split them back)"


class _NotLayout(Exception):
    pass


def _export_sizes(graph, last):
    """(T, B) the graph was exported with, from the shapes recorded for the last RNN's
    Y or Y_h (torch's exporters and onnx's shape inference record them); None where a
    size is symbolic or not recorded."""
    layout = graph.attrs(last).get("layout", 0)
    for k, (ti, bi) in ((0, (1, 0) if layout else (0, 2)), (1, (None, 0 if layout else 1))):
        dims = graph.shapes.get(last.output[k]) if len(last.output) > k else None
        if dims and len(dims) == (4 if k == 0 else 3):
            return (dims[ti] if ti is not None else None), dims[bi]
    return None, None


def _regroup(atoms, size, target):
    """The atoms split into consecutive groups of the target sizes (None: one group of
    unknown size, -1's), or _NotLayout.  A target of 1 takes the next atom when that is
    of size 1 (B or T of an export at batch or length 1); otherwise atoms are taken until
    their product is the target's size: with every size above 1 this is the only split."""
    def take(atoms, targets):
        groups, i = [], 0
        for t in targets:
            g, prod = [], 1
            if t == 1:
                if i < len(atoms) and size[atoms[i]] == 1:
                    g, i = [atoms[i]], i + 1
            else:
                while prod != t:
                    if i >= len(atoms) or size[atoms[i]] is None or prod > t:
                        raise _NotLayout(_MIXES)
                    prod *= size[atoms[i]]
                    g.append(atoms[i])
                    i += 1
            groups.append(tuple(g))
        return groups, atoms[i:]
    if None in target:
        k = target.index(None)
        left, rest = take(list(atoms), target[:k])
        right, mid = take(rest[::-1], target[:k:-1])
        return left + [tuple(mid)] + [g[::-1] for g in right[::-1]]
    groups, rest = take(list(atoms), target)
    if rest:
        raise _NotLayout(_MIXES)
    return groups


def _layout_step(graph, n, dims, size, state):
    """The dimensions of n's output from its data input's (n a layout operator), or
    _NotLayout; state["last_step"] is set by a Gather of Y's last step."""
    at = graph.attrs(n)
    op = n.op_type
    if op in ("Identity", "Cast", "Dropout"):
        return dims
    if op == "Transpose":
        perm = at.get("perm", list(range(len(dims)))[::-1])
        return [dims[p] for p in perm]
    if op in ("Squeeze", "Unsqueeze"):
        if len(n.input) > 1 and n.input[1]:
            if n.input[1] not in graph.const:
                raise _NotLayout("axes computed at run time")
            axes = _ints(graph.const[n.input[1]])
        else:
            axes = at.get("axes")
        if op == "Unsqueeze":
            out = list(dims)
            for ax in sorted(a % (len(dims) + len(axes)) for a in axes):
                out.insert(ax, ())
            return out
        axes = {a % len(dims) for a in axes} if axes else \
            {k for k, d in enumerate(dims) if all(size[a] == 1 for a in d)}
        dropped = [a for k in sorted(axes) for a in dims[k] if a in ("T", "B")]
        if dropped:
            raise _NotLayout("drops the %s axis" % dropped[0])
        return [d for k, d in enumerate(dims) if k not in axes]
    if op == "Flatten":
        ax = at.get("axis", 1) % (len(dims) + 1)
        return [sum(dims[:ax], ()), sum(dims[ax:], ())]
    if op == "Reshape":
        if n.input[1] not in graph.const:
            raise _NotLayout("a shape computed at run time")
        target = _ints(graph.const[n.input[1]])
        atoms = [a for d in dims for a in d if a != "D" or size["D"] > 1]
        sizes = []
        for k, v in enumerate(target):
            if v == 0 and not at.get("allowzero"):
                v = int(np.prod([size[a] for a in dims[k]])) if all(
                    size[a] is not None for a in dims[k]) else None
                if v is None:  # an unknown size copied: its own atoms, if they line up
                    raise _NotLayout("a copied axis of unknown size")
            sizes.append(None if v == -1 else v)
        if sizes.count(None) > 1:
            raise _NotLayout("an unknown size")
        known = [size[a] for a in atoms]
        if None in sizes and None not in known:
            rest = int(np.prod(known)) // max(1, int(np.prod([v for v in sizes if v])))
            sizes[sizes.index(None)] = rest
        return _regroup(atoms, size, sizes)
    if op == "Gather" and n.input[1] in graph.const and graph.const[n.input[1]].ndim == 0:
        ax = at.get("axis", 0) % len(dims)
        idx = int(graph.const[n.input[1]])
        if dims[ax] == ("T",) and idx == -1:  # Y's last step
            state["last_step"] = True
            return [d for k, d in enumerate(dims) if k != ax]
        if all(size[a] == 1 for a in dims[ax]) and "B" not in dims[ax] and "T" not in dims[ax]:
            return [d for k, d in enumerate(dims) if k != ax]
        raise _NotLayout("takes one %s" % ("step" if "T" in dims[ax] else "element of an "
                                           "axis"))
    raise _NotLayout("computes")


def _dims_text(dims):
    return "[%s]" % ", ".join("*".join(_ATOM_NAMES[a] for a in d) or "1" for d in dims)


def _layout_apply(graph, last, name, dirs, H):
    """(apply, None) when tensor name is the last RNN's Y or Y_h through layout operators
    only (Transpose, Reshape, Squeeze, Unsqueeze, Flatten, Identity; a Gather of Y's last
    step) that leave it as a layout rnnd serves, worked out axis by axis; (None, why)
    when such a path gives another layout, (None, None) when there is no such path."""
    path = []
    while name not in last.output:
        n = graph.producer.get(name)
        if n is None or n.op_type in RNN_OPS or not n.input:
            return None, None
        path.append(n)
        name = n.input[0]
    k = list(last.output).index(name)
    if k == 2:
        return None, None
    T0, B0 = _export_sizes(graph, last)
    size = {"T": T0, "B": B0, "D": dirs, "H": H}
    layout = graph.attrs(last).get("layout", 0)
    if k == 0:
        dims = [("B",), ("T",), ("D",), ("H",)] if layout else [("T",), ("D",), ("B",), ("H",)]
    else:
        dims = [("B",), ("D",), ("H",)] if layout else [("D",), ("B",), ("H",)]
    what = "Y" if k == 0 else "Y_h"
    state = {}
    for n in reversed(path):
        try:
            dims = _layout_step(graph, n, dims, size, state)
        except _NotLayout as e:
            return None, "the head reads %s through operator '%s' (%s), which %s: %s" % (
                what, _name(n), n.op_type, e, _SERVED)
        except (IndexError, ValueError, TypeError, KeyError):
            return None, None
    last_step = state.get("last_step", False)
    got = [tuple(a for a in d if a != "D" or dirs > 1) for d in dims]
    dh = ("D", "H") if dirs > 1 else ("H",)
    if k == 0 and not last_step and got in ([("B",), ("T",), dh], [("T",), ("B",), dh]):
        return "all", None
    if got == [("B",), dh] and k == 1:
        return "last", None
    if got == [("B",), dh] and last_step:
        if dirs > 1:
            return None, "the head reads Y's last step, the forward direction's final state " \
                "but not the backward one's (Y's first step): read Y_h instead; " + _SERVED
        if _opt_input(last, 4):
            return None, "the head reads Y's last step, which with sequence_lens is not " \
                "each sequence's final state: read Y_h instead; " + _SERVED
        return "last", None
    return None, "the head reads %s as %s%s: %s" % (
        what + "'s last step" if last_step else what, _dims_text(dims),
        " (after operator '%s' (%s))" % (_name(path[0]), path[0].op_type) if path else "",
        _SERVED)


def _reaches(graph, name, source, seen=None):
    """Whether tensor name is computed from tensor source (or is it)."""
    seen = seen if seen is not None else set()
    if name == source:
        return True
    if name in seen:
        return False
    seen.add(name)
    n = graph.producer.get(name)
    return n is not None and any(_reaches(graph, i, source, seen) for i in n.input if i)


def _io_note(graph, m, rnns, head_out):
    """A note of which graph inputs and outputs became which of rnnd's fixed names."""
    first, last = rnns[0], rnns[-1]
    ins, outs = [], []
    for i in graph.g.input:
        if i.name in graph.const:
            continue
        role = None
        if _reaches(graph, first.input[0], i.name):
            role = "tokens" if m.embedding is not None else "input"
        for k, r in ((4, "lengths"), (5, "h0"), (6, "c0")):
            if role is None and any(_opt_input(n, k) and _reaches(graph, n.input[k], i.name)
                                    for n in rnns):
                role = r
        ins.append("'%s' is %s" % (i.name, "rnnd's `%s`" % role if role else "not used"))
    for o in graph.g.output:
        role = None
        if head_out is not None and _reaches(graph, o.name, head_out):
            role = "scores"
        for k, r in ((0, "output"), (1, "h_n"), (2, "c_n")):
            if role is None and len(last.output) > k and last.output[k] and \
                    _reaches(graph, o.name, last.output[k]):
                role = r
        outs.append("'%s' is %s" % (o.name, "rnnd's `%s`" % role if role else "not served"))
    m.notes.append("names: graph input %s; graph output %s (rnnd's tensor names are fixed: "
                   "docs/HTTP.md)" % (", ".join(ins), ", ".join(outs)))


def _unused_note(graph, m, used):
    """A note naming the float initializers and constants the conversion left unused."""
    left = ["%s [%s]" % (k, ", ".join(str(d) for d in a.shape)) for k, a in graph.const.items()
            if k not in used and np.asarray(a).dtype.kind == "f"]
    if left:
        m.notes.append("unused: %s: rnnd serves an embedding, the recurrent operators and one "
                       "linear head; if the graph computes with these, the served model's "
                       "outputs differ" % ", ".join(left))


def _stack(graph, rnns):
    """The Model of the recurrent operators, each reading the one before it."""
    m = None
    for k, n in enumerate(rnns):
        if k and graph.path_to(n.input[0], {tuple(rnns[k - 1].output)}) is None:
            _refuse(n, "input X", n.input[0], "does not read the recurrent operator before it; "
                    "rnnd stacks layers one on the other: serve the branches as separate models")
        cell, lbr, dirs = _rnn(graph, n)
        if m is not None and dirs[0].w_ih.shape[1] != m.last.out_width:
            raise ConvertError("operator '%s' (%s): tensor '%s' (input W) takes %d inputs, but "
                               "the operator before gives %d: rnnd stacks each operator on all "
                               "of the one before's output" % (
                                   _name(n), n.op_type, n.input[1], dirs[0].w_ih.shape[1],
                                   m.last.out_width))
        if m is None:
            m = Model(cell=cell, linear_before_reset=lbr)
        m.stack(cell, lbr, dirs)  # an operator of another kind or size starts a block
    return m


def _used_by_rnns(graph, rnns):
    """The constants the recurrent operators read: their weights, and the constants that
    make sequence_lens and zero initial states (checked by _rnn)."""
    used = {i for n in rnns for i in n.input if i in graph.const}
    for n in rnns:
        for k in (4, 5, 6):
            if _opt_input(n, k):
                used |= {c for c in graph.const if _reaches(graph, n.input[k], c)}
    return used


def _find_embedding(graph, first, m, used):
    """Embedding: a Gather of a 2-D initializer by a graph input, feeding the first RNN."""
    for n in graph.g.node:
        if n.op_type == "Gather" and n.input[0] in graph.const and graph.const[n.input[0]].ndim == 2:
            if graph.path_to(first.input[0], {tuple(n.output)}) is not None:
                m.embedding = graph.const[n.input[0]]
                used.add(n.input[0])


def _head_nodes(graph):
    """Operators that compute: anything but plumbing and the recurrences must be part of
    the head (a refusal otherwise)."""
    head_nodes = []
    for n in graph.g.node:
        if n.op_type in RNN_OPS or n.op_type in PLUMBING and n.op_type not in ("Add", "Sub"):
            continue
        if n.op_type in SHAPE_MATH and all(graph.shape_only(i) for i in n.input if i):
            continue
        if n.op_type in ("Gemm", "MatMul", "Add", "Sub") or n.op_type in HEAD_ACTS:
            head_nodes.append(n)
            continue
        _refuse(n, "op_type", n.op_type, "rnnd serves [Gather] -> LSTM/GRU/RNN -> [Gemm or "
                "MatMul+Add] -> [Sigmoid/Tanh/Relu/Softmax]: export that part alone and run "
                "the rest elsewhere")
    return head_nodes


def _head_linear(graph, n, used, done):
    """(weight [units, in], bias or None, output tensor) of the head's Gemm, or of its MatMul
    and the Add of a constant after it."""
    a = graph.attrs(n)
    W = graph.const[n.input[1]].astype(np.float64)
    bias = None
    if n.op_type == "Gemm":
        if a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0 or a.get("transA", 0):
            _refuse(n, "alpha/beta/transA", (a.get("alpha"), a.get("beta"), a.get("transA")),
                    "rnnd's head is x W^T + b; export an nn.Linear head")
        weight = W if a.get("transB", 0) else W.T
        if _opt_input(n, 2) is not None:
            bias = graph.const[n.input[2]].astype(np.float64).reshape(-1)
            used.add(n.input[2])
        out = n.output[0]
    else:
        weight = W.T
        out = n.output[0]
        adds = [c for c in graph.consumers.get(out, []) if c.op_type == "Add"]
        if adds:
            other = [i for i in adds[0].input if i != out]
            if other and other[0] in graph.const:
                bias = graph.const[other[0]].astype(np.float64).reshape(-1)
                used.add(other[0])
                done.add(tuple(adds[0].output))
                out = adds[0].output[0]
    used.add(n.input[1])
    done.add(tuple(n.output))
    return weight, bias, out


def _head_activation(graph, out, done):
    """(rnnd's activation name, output tensor) of the activation reading the head's output
    out ("none" and out itself without one)."""
    act = "none"
    for c in graph.consumers.get(out, []):
        if c.op_type in HEAD_ACTS:
            if HEAD_ACTS[c.op_type] is None:
                _refuse(c, "op_type", c.op_type, "rnnd's head computes none, sigmoid, tanh, "
                        "relu or softmax: export with Softmax and take the log of the "
                        "scores")
            if c.op_type == "Softmax":
                ax = graph.attrs(c).get("axis", -1)
                if ax not in (-1, 1, 2):
                    _refuse(c, "axis", ax, "rnnd's softmax is over the units; export "
                            "softmax over the last axis")
            act = HEAD_ACTS[c.op_type]
            done.add(tuple(c.output))
            out = c.output[0]
    return act, out


def _read_head(graph, m, last, head_nodes, used):
    """Sets m.head from a Gemm or MatMul with a constant weight that reads the last RNN;
    returns the head's output tensor (None without a head).  Refuses any other operator
    that computes."""
    lin = [n for n in head_nodes if n.op_type in ("Gemm", "MatMul") and
           any(i in graph.const for i in n.input[1:2]) and
           graph.path_to(n.input[0], {tuple(last.output)}) is not None]
    if len(lin) > 1:
        _refuse(lin[1], "op_type", lin[1].op_type, "rnnd's head is one linear layer: "
                "export the model up to the first and run the rest elsewhere")
    done = set()
    head_out = None
    if lin:
        n = lin[0]
        weight, bias, out = _head_linear(graph, n, used, done)
        act, head_out = _head_activation(graph, out, done)
        m.head = Head(weight, bias, act, _head_apply(graph, last, n, len(m.last.layers[0]),
                                                     m.last.hidden_size))
    for n in head_nodes:
        if tuple(n.output) in done or n.op_type in ("Add", "Sub"):
            continue
        _refuse(n, "op_type", n.op_type, "not part of a head rnnd computes: export the "
                "model up to the head and run the rest elsewhere")
    return head_out


def _inputs_note(graph, m, rnns):
    """Notes on the request inputs the graph's sequence_lens and initial states become."""
    if any(_opt_input(n, 4) for n in rnns):
        m.notes.append("sequence_lens is the request's `lengths` input")
    if any(_opt_input(n, k) in graph.inputs for n in rnns for k in (5, 6)):
        m.notes.append("initial_h/initial_c are the request's `h0`/`c0` inputs, batch-first "
                       "[B, num_layers*dirs, H] (ONNX's are [dirs, B, H] per layer)%s" % (
                           "; of a chain, one row [B, F] of every block's, block by block "
                           "(docs/HTTP.md)" if m.more else ""))


def load(path):
    """The ModelProto of an .onnx file (its external data beside it)."""
    import onnx

    try:
        model = onnx.load(path)
    except Exception as e:  # protobuf's DecodeError, external data's OSError or ValueError
        raise unreadable(path, "an ONNX model", e)
    if not model.ir_version:
        raise ConvertError("%s: not an ONNX model: no ir_version (an empty file, or one of "
                           "another kind)" % path)
    return model


def _inferred_shapes(model):
    """The value_info onnx's shape inference gives the model, or none where it cannot."""
    try:
        from onnx import shape_inference
        return list(shape_inference.infer_shapes(model).graph.value_info)
    except Exception:  # an operator or domain it does not know: the sizes stay unknown
        return []


def _no_rnn(path, model):
    """The refusal of a graph without a recurrent operator; torch's dynamo exporter (the
    default of torch.onnx.export since torch 2.9) writes nn.RNN unrolled, one MatMul, Add
    and Tanh/Relu per step of the example input, which holds no recurrence rnnd could serve
    at other lengths."""
    if model.producer_name == "pytorch":
        return ConvertError("%s: no LSTM, GRU or RNN operator: rnnd-convert converts those, not "
                            "a recurrence unrolled into per-step operators, which "
                            "torch.onnx.export's default (dynamo) exporter writes for nn.RNN; "
                            "export with torch.onnx.export(..., dynamo=False), which writes "
                            "nn.LSTM/nn.GRU/nn.RNN as those operators" % path)
    return ConvertError("%s: no LSTM, GRU or RNN operator: rnnd-convert converts those (a "
                        "scan or loop of its own is not one); export nn.LSTM/nn.GRU/nn.RNN"
                        % path)


def convert(path):
    model = load(path)
    graph = _Graph(model.graph)
    rnns = [n for n in graph.g.node if n.op_type in RNN_OPS]
    if not rnns:
        raise _no_rnn(path, model)
    if any(o and o not in graph.shapes for o in rnns[-1].output[:2]):
        graph = _Graph(model.graph, _inferred_shapes(model))
    m = _stack(graph, rnns)
    used = _used_by_rnns(graph, rnns)
    _find_embedding(graph, rnns[0], m, used)
    head_out = _read_head(graph, m, rnns[-1], _head_nodes(graph), used)
    _io_note(graph, m, rnns, head_out)
    _unused_note(graph, m, used)
    _inputs_note(graph, m, rnns)
    _chain_note(m)
    return m
