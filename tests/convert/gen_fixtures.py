#!/usr/bin/env python3
"""Fixture generator for rnnd-convert (tests/convert/README.md).  Not run in CI.

Builds small models in the frameworks themselves, saves them as users do, and records
each one's outputs on fixed inputs as the framework computes them:

    python gen_fixtures.py keras2   # tensorflow-cpu 2.15 (tf.keras 2): .h5, CuDNNGRU/CuDNNLSTM
    python gen_fixtures.py keras3   # keras 3 (any backend): .keras
    python gen_fixtures.py torch    # torch + onnx + onnxruntime: .onnx, state_dict, TorchScript
    python gen_fixtures.py torch CASE ...   # only those cases

Each run writes fixtures/<case>/ for its cases:

    model.<ext>        the framework's file
    io.safetensors     inputs (x or tokens, lengths) and the framework's outputs under rnnd's
                       output names (scores, output, h_n), batch-first float32
    case.json          {"source", "args" (extra rnnd-convert arguments), "reference" (how the
                       outputs were computed), "refuse" (for a model rnnd-convert must refuse:
                       the exact message), "description"}

Steps at or past a sequence's length are 0 in x (Keras's Masking reads that) and token 0
with an Embedding(mask_zero=True); the test compares only valid steps of `output` and of an
apply-all head.  Weights are drawn from a NumPy Generator seeded with crc32(case name).
"""

import functools
import json
import os
import struct
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
B, T, IN, H, UNITS, NUM_EMB, EMB = 4, 7, 5, 8, 3, 11, 5
RAGGED = [7, 3, 1, 5]
EQUAL = [T] * B


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def write_safetensors(path, tensors, metadata):
    """Canonical safetensors (sorted names), so that reruns give the same bytes."""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header = {"__metadata__": {k: metadata[k] for k in sorted(metadata)}}
    blobs, off = [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": codes[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + b"".join(blobs))


# gen_fixtures.py MODE [CASE ...]: only the named cases are written (all without names);
# the others are still built, into a directory that is thrown away.
ONLY = set(sys.argv[2:]) - {"--tf2onnx"}
SCRATCH = None


def selected(name):
    return not ONLY or name in ONLY


def case_dir(name):
    global SCRATCH
    if not selected(name):
        import tempfile
        SCRATCH = SCRATCH or tempfile.mkdtemp(prefix="gen_fixtures.")
        d = os.path.join(SCRATCH, name)
        os.makedirs(d, exist_ok=True)
        return d
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    return d


def finish(name, source, io, reference, description, args=(), refuse=None, extra=None):
    if not selected(name):
        return
    d = os.path.join(OUT, name)
    meta = {"source": source, "args": list(args), "reference": reference,
            "description": description}
    meta.update(extra or {})
    if refuse is not None:
        meta["refuse"] = refuse
    elif io is not None:
        io = {k: (v.astype(np.float32) if v.dtype.kind == "f" else v.astype(np.int64))
              for k, v in io.items()}
        write_safetensors(os.path.join(d, "io.safetensors"), io,
                          {"case": name, "reference": reference})
    with open(os.path.join(d, "case.json"), "w") as f:
        f.write(json.dumps(meta, indent=2) + "\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-34s %6d B  %s" % (name, size, "refused" if refuse else "converted only"
                               if io is None else ", ".join(
                                   "%s%s" % (k, list(v.shape)) for k, v in sorted(io.items()))))


def inputs(rng, lengths, emb=False, zero_pad=True):
    """x [B, T, IN] U(-1, 1), never 0 at valid steps, 0 past the length (Masking's
    mask_value); or tokens [B, T] in 1..NUM_EMB-1, 0 past the length."""
    valid = np.arange(T)[None, :] < np.asarray(lengths)[:, None]
    if emb:
        tok = rng.integers(1, NUM_EMB, size=(B, T))
        return {"tokens": np.where(valid | (not zero_pad), tok, 0).astype(np.int64),
                "lengths": np.asarray(lengths, dtype=np.int64)}
    x = rng.uniform(-1, 1, size=(B, T, IN))
    x = np.where(np.abs(x) < 1e-2, 0.5, x)
    if zero_pad:
        x = np.where(valid[:, :, None], x, 0.0)
    return {"x": x.astype(np.float32), "lengths": np.asarray(lengths, dtype=np.int64)}


def randomize(model, rng):
    """Every weight U(-0.5, 0.5) (embeddings U(-1, 1)) from the case's Generator."""
    for layer in model.layers:
        ws = layer.get_weights()
        if not ws:
            continue
        scale = 1.0 if type(layer).__name__ == "Embedding" else 0.5
        layer.set_weights([rng.uniform(-scale, scale, w.shape).astype(np.float32) for w in ws])


# --------------------------------------------------------------------------
# Keras (2 and 3 share the model descriptions)
# --------------------------------------------------------------------------


def keras_cases(L, cudnn=None):
    """(name, layers builder, lengths, emb, rnnd output name, refuse) of the Keras cases;
    L is keras.layers (or tf.keras.layers)."""
    def masked(*layers):
        return [L.Masking(0.0, name="masking")] + list(layers)
    c = [
        ("lstm_mask_softmax", lambda: masked(L.LSTM(H, name="lstm"),
                                             L.Dense(UNITS, activation="softmax", name="dense")),
         RAGGED, False, "scores", None),
        ("gru_bi2_seq_sigmoid_all", lambda: masked(
            L.Bidirectional(L.GRU(H, return_sequences=True, name="gru_a"), name="bi_a"),
            L.Bidirectional(L.GRU(H, return_sequences=True, name="gru_b"), name="bi_b"),
            L.Dense(UNITS, activation="sigmoid", name="dense")),
         RAGGED, False, "scores", None),
        ("gru_rbr_l2_tanh", lambda: masked(
            L.GRU(H, reset_after=False, return_sequences=True, name="gru_a"),
            L.GRU(H, reset_after=False, name="gru_b"),
            L.Dense(UNITS, activation="tanh", name="dense")),
         RAGGED, False, "scores", None),
        ("simplernn_emb_mask_relu", lambda: [
            L.Embedding(NUM_EMB, EMB, mask_zero=True, name="embedding"),
            L.SimpleRNN(H, activation="relu", name="rnn"),
            L.Dense(UNITS, activation="relu", name="dense")],
         RAGGED, True, "scores", None),
        ("lstm_bi_seq", lambda: masked(
            L.Bidirectional(L.LSTM(H, return_sequences=True, name="lstm"), name="bi"),
            L.Dropout(0.5, name="dropout")),
         RAGGED, False, "output", None),
        ("gru_emb_linear", lambda: [
            L.Embedding(NUM_EMB, EMB, name="embedding"),
            L.GRU(H, name="gru"), L.Dense(UNITS, name="dense")],
         EQUAL, True, "scores", None),
        # Chains of blocks (docs/MODELS.md): layers of different sizes, cells, directions.
        ("chain_mask_lstm19_lstm11_softmax", lambda: masked(
            L.LSTM(19, return_sequences=True, name="lstm"), L.LSTM(11, name="lstm_1"),
            L.Dense(4, activation="softmax", name="dense")),
         RAGGED, False, "scores", None),
        ("chain_bilstm_lstm_seq", lambda: masked(
            L.Bidirectional(L.LSTM(H, return_sequences=True, name="lstm"), name="bi"),
            L.LSTM(5, return_sequences=True, name="lstm_b")),
         RAGGED, False, "output", None),
        ("chain_emb_lstm_gru_linear", lambda: [
            L.Embedding(NUM_EMB, EMB, name="embedding"),
            L.LSTM(H, return_sequences=True, name="lstm"), L.GRU(6, name="gru"),
            L.Dense(UNITS, name="dense")],
         EQUAL, True, "scores", None),
        ("chain_gru_dropout_simplernn_tanh", lambda: masked(
            L.GRU(H, return_sequences=True, name="gru"), L.Dropout(0.3, name="dropout"),
            L.SimpleRNN(6, name="rnn"), L.Dense(UNITS, activation="tanh", name="dense")),
         RAGGED, False, "scores", None),
        # Refused.
        ("refuse_hard_sigmoid", lambda: [L.LSTM(H, recurrent_activation="hard_sigmoid", name="lstm")],
         EQUAL, False, None,
         "layer 'lstm' (LSTM): recurrent_activation=\"hard_sigmoid\": rnnd computes sigmoid; "
         "retrain with recurrent_activation=\"sigmoid\""),
        ("refuse_merge_sum", lambda: [L.Bidirectional(L.GRU(H, name="gru"), merge_mode="sum",
                                                      name="bi")],
         EQUAL, False, None,
         "layer 'bi' (Bidirectional): merge_mode=\"sum\": rnnd concatenates the two directions: "
         "retrain with merge_mode=\"concat\""),
        ("refuse_conv", lambda: [L.LSTM(H, return_sequences=True, name="lstm"),
                                 L.Conv1D(4, 3, name="conv"), L.Dense(UNITS, name="dense")],
         EQUAL, False, None,
         "layer 'conv' (Conv1D): class_name=\"Conv1D\": rnnd serves [Embedding|Masking] -> "
         "LSTM/GRU/SimpleRNN/CuDNNLSTM/CuDNNGRU/Bidirectional -> [Dense]: save that part as a "
         "model of its own and run the rest elsewhere"),
        ("refuse_go_backwards", lambda: [L.GRU(H, go_backwards=True, name="gru")],
         EQUAL, False, None,
         "layer 'gru' (GRU): go_backwards=true: a reverse-only layer is not supported; use "
         "Bidirectional(merge_mode=\"concat\")"),
        ("refuse_activation", lambda: [L.LSTM(H, activation="relu", name="lstm")],
         EQUAL, False, None, "layer 'lstm' (LSTM): activation=\"relu\": rnnd computes tanh; "
         "retrain with activation=\"tanh\""),
        ("refuse_stateful", lambda: [L.GRU(H, stateful=True, name="gru")],
         EQUAL, False, None, "layer 'gru' (GRU): stateful=true: rnnd keeps no state across "
         "requests in a Keras layer; send h0 (and c0) instead"),
    ]
    return c


def keras3_cases(keras):
    """(name, model builder, lengths, emb, rnnd output name, refuse) of the Keras 3 only
    cases: Functional models (Keras 3 writes the mask of a Masking or an
    Embedding(mask_zero=True) in one as NotEqual and Any layers handed to the RNN layers as
    `mask`), TimeDistributed(Dense) heads, and a Keras 3 .h5 (the names ending _h5)."""
    L, ops = keras.layers, keras.ops

    def seq(*layers):
        return keras.Sequential([keras.Input((None, IN), name="input")] + list(layers))

    def masked_chain():
        i = keras.Input((None, IN), name="input")
        x = L.Masking(0.0, name="masking")(i)
        x = L.GRU(H, return_sequences=True, name="gru")(x)
        x = L.LSTM(6, name="lstm")(x)
        return keras.Model(i, L.Dense(UNITS, activation="softmax", name="dense")(x))

    def emb_mask_bi_all():
        i = keras.Input((None,), dtype="int32", name="input")
        x = L.Embedding(NUM_EMB, EMB, mask_zero=True, name="embedding")(i)
        x = L.Bidirectional(L.LSTM(H, return_sequences=True, name="lstm"), name="bi")(x)
        return keras.Model(i, L.Dense(UNITS, activation="sigmoid", name="dense")(x))

    def two_outputs():
        i = keras.Input((None, IN), name="input")
        x = L.LSTM(H, name="lstm")(i)
        return keras.Model(i, [L.Dense(2, name="dense_a")(x), L.Dense(3, name="dense_b")(x)])

    def own_mask():
        i = keras.Input((None, IN), name="input")
        mask = ops.any(ops.not_equal(i, 0.5), axis=-1)
        return keras.Model(i, L.LSTM(H, name="lstm")(i, mask=mask))
    return [
        ("functional_mask_gru_lstm_softmax", masked_chain, RAGGED, False, "scores", None),
        ("functional_emb_mask_bilstm_all_sigmoid", emb_mask_bi_all, RAGGED, True, "scores",
         None),
        ("refuse_functional_two_outputs", two_outputs, EQUAL, False, None,
         "model outputs 'dense_a', 'dense_b': rnnd converts a model of one input and one "
         "output (it adds lengths, h0 and c0 itself): save the chain from one input to one "
         "output as a model of its own"),
        ("refuse_functional_own_mask", own_mask, EQUAL, False, None,
         "layer 'lstm' (LSTM): mask=[\"any\"]: rnnd serves only the mask of a Masking or an "
         "Embedding(mask_zero=True) layer, as lengths; use one of those"),
        ("timedistributed_mask_lstm_softmax", lambda: seq(
            L.Masking(0.0, name="masking"), L.LSTM(H, return_sequences=True, name="lstm"),
            L.TimeDistributed(L.Dense(UNITS, activation="softmax", name="dense"), name="td")),
         RAGGED, False, "scores", None),
        # Keras 3 writes an explicit backward_layer's weights in an .h5 under its own name.
        ("bi_backward_layer_all_h5", lambda: seq(
            L.Bidirectional(L.LSTM(H, return_sequences=True, name="lstm"), name="bi",
                            backward_layer=L.LSTM(H, return_sequences=True, go_backwards=True,
                                                  name="lstm_back")),
            L.Dense(UNITS, name="dense")),
         EQUAL, False, "scores", None),
        ("chain_bigru_lstm_state_notes", lambda: seq(
            L.Bidirectional(L.GRU(H, return_sequences=True, name="gru"), name="bi"),
            L.LSTM(5, name="lstm")),
         EQUAL, False, None, None),
        ("refuse_timedistributed_first", lambda: seq(
            L.TimeDistributed(L.Dense(UNITS, name="dense"), name="td"), L.LSTM(H, name="lstm")),
         EQUAL, False, None, "layer 'td' (TimeDistributed): class_name=\"TimeDistributed\": "
         "TimeDistributed reads every step: it must follow an RNN layer with "
         "return_sequences=True"),
    ]


def save_keras_case(name, model, lengths, emb, out, refuse, ext, ref):
    """Saves a Keras case's model with its inputs and model.predict's outputs (or its
    refusal)."""
    rng = rng_for(name)
    d = case_dir(name)
    randomize(model, rng)
    io = inputs(rng, lengths, emb=emb)
    model.save(os.path.join(d, "model" + ext))
    if refuse:
        finish(name, "model" + ext, {}, ref, "refused", refuse=refuse)
        return
    if out is None:
        finish(name, "model" + ext, None, ref, "%s: converted only, for its notes" % name,
               extra={"convert_only": True})
        return
    feed = io["tokens"] if emb else io["x"]
    io[out] = np.asarray(model.predict(feed, verbose=0))
    finish(name, "model" + ext, io, ref, "%s, lengths %s" % (name, lengths))


def gen_keras(version):
    if version == 2:
        import tensorflow as tf
        keras = tf.keras
        ext, tag = ".h5", "k2_"
        ref = "tf.keras (TensorFlow %s, CPU) model.predict" % tf.__version__
    else:
        import keras
        ext, tag = ".keras", "k3_"
        ref = "Keras %s (%s backend, CPU) model.predict" % (keras.__version__,
                                                            keras.backend.backend())
    L = keras.layers
    for name, build, lengths, emb, out, refuse in keras_cases(L):
        shape = (T,) if emb else (T, IN)
        # A stateful layer needs a fixed batch size.
        inp = keras.Input(batch_shape=(B,) + shape if "stateful" in name else (None,) + shape,
                          name="input")
        save_keras_case(tag + name, keras.Sequential([inp] + build()), lengths, emb, out,
                        refuse, ext, ref)
    if version == 3:
        for name, build, lengths, emb, out, refuse in keras3_cases(keras):
            keras.backend.clear_session()  # the layer names the refusals give
            save_keras_case(tag + name, build(), lengths, emb, out, refuse,
                            ".h5" if name.endswith("_h5") else ext, ref)
    if version == 2:
        gen_keras2_cudnn(tf, keras, ref)
    if version == 2 and "--tf2onnx" in sys.argv:
        gen_tf2onnx(tf, keras, ref)


def gen_keras2_cudnn(tf, keras, ref):
    """CuDNNGRU/CuDNNLSTM models: saved from the legacy layers (which cannot run on a
    CPU), with the outputs of the equivalent CPU model that Keras itself loads the
    CuDNN weights into (GRU(reset_after=True, recurrent_activation="sigmoid"), LSTM):
    Keras converts the weights in its h5 loader."""
    L = keras.layers
    C = tf.compat.v1.keras.layers
    cases = [
        ("k2_cudnngru_bi_softmax",
         lambda: [L.Bidirectional(C.CuDNNGRU(H, name="gru"), name="bi"),
                  L.Dense(UNITS, activation="softmax", name="dense")],
         lambda: [L.Bidirectional(L.GRU(H, reset_after=True, recurrent_activation="sigmoid",
                                        name="gru"), name="bi"),
                  L.Dense(UNITS, activation="softmax", name="dense")], "scores"),
        ("k2_cudnnlstm_l2_seq",
         lambda: [C.CuDNNLSTM(H, return_sequences=True, name="lstm_a"),
                  C.CuDNNLSTM(H, return_sequences=True, name="lstm_b")],
         lambda: [L.LSTM(H, return_sequences=True, name="lstm_a"),
                  L.LSTM(H, return_sequences=True, name="lstm_b")], "output"),
    ]
    for name, cudnn, plain, out in cases:
        rng = rng_for(name)
        d = case_dir(name)
        model = keras.Sequential([keras.Input(shape=(T, IN), name="input")] + cudnn())
        randomize(model, rng)
        io = inputs(rng, EQUAL)
        path = os.path.join(d, "model.h5")
        model.save(path)
        cpu = keras.Sequential([keras.Input(shape=(T, IN), name="input")] + plain())
        cpu.load_weights(path)  # Keras's own CuDNN -> CPU weight conversion
        io[out] = np.asarray(cpu.predict(io["x"], verbose=0))
        finish(name, "model.h5", io, ref + " of the CPU layers Keras loads the CuDNN weights "
               "into (CuDNN layers do not run on a CPU)", "%s, lengths all %d" % (name, T))


def gen_tf2onnx(tf, keras, ref):
    import tf2onnx
    L = keras.layers
    name = "onnx_tf2onnx_lstm_bi"
    rng = rng_for(name)
    d = case_dir(name)
    model = keras.Sequential([keras.Input(shape=(T, IN), name="input"),
                              L.Bidirectional(L.LSTM(H, name="lstm"), name="bi"),
                              L.Dense(UNITS, activation="softmax", name="dense")])
    randomize(model, rng)
    io = inputs(rng, EQUAL)
    spec = (tf.TensorSpec((None, T, IN), tf.float32, name="input"),)
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=13,
                               output_path=os.path.join(d, "model.onnx"))
    io["scores"] = np.asarray(model.predict(io["x"], verbose=0))
    finish(name, "model.onnx", io, ref + ", exported by tf2onnx %s" % tf2onnx.__version__,
           "%s, lengths all %d" % (name, T))


# --------------------------------------------------------------------------
# PyTorch: ONNX exports, state_dict, TorchScript; hand-made ONNX graphs
# --------------------------------------------------------------------------


def torch_ref():
    import torch
    return "torch %s (CPU)" % torch.__version__.split("+")[0]


def ort_ref():
    import onnxruntime as ort
    return "onnxruntime %s (CPU)" % ort.__version__


def fill(module, rng):
    """Every parameter U(-0.5, 0.5) (embeddings U(-1, 1)) from the case's Generator."""
    import torch
    with torch.no_grad():
        for n, p in module.named_parameters():
            s = 1.0 if "emb" in n else 0.5
            p.copy_(torch.from_numpy(rng.uniform(-s, s, tuple(p.shape)).astype(np.float32)))


@functools.lru_cache(maxsize=None)
def torch_nets():
    """(Net, ChainNet): the modules of the PyTorch cases, made once (torch is imported
    only by the torch mode)."""
    import torch
    import torch.nn as nn
    from torch.nn.utils.rnn import pack_padded_sequence

    class Net(nn.Module):
        def __init__(self, rnn, emb=False, units=UNITS, act=None, apply="last"):
            super().__init__()
            self.emb = nn.Embedding(NUM_EMB, EMB) if emb else None
            self.rnn = rnn
            dirs = 2 if rnn.bidirectional else 1
            self.fc = nn.Linear(dirs * rnn.hidden_size, units) if act else None
            self.act, self.apply = act, apply

        def forward(self, x):
            if self.emb is not None:
                x = self.emb(x)
            y, h = self.rnn(x)
            if self.fc is None:
                return y
            if isinstance(h, tuple):
                h = h[0]
            if self.apply == "all":
                s = self.fc(y)
            elif self.apply == "last_step":  # Y's last step, batch_first
                s = self.fc(y[:, -1])
            elif self.rnn.bidirectional:
                s = self.fc(torch.cat([h[-2], h[-1]], dim=1))
            else:
                s = self.fc(h[-1])
            return {"softmax": lambda v: torch.softmax(v, -1), "sigmoid": torch.sigmoid,
                    "tanh": torch.tanh, "relu": torch.relu, "none": lambda v: v}[self.act](s)

    class ChainNet(nn.Module):
        """Recurrent modules one after the other (self.rnn_a, self.rnn_b, ...), as users
        write them, then an optional linear head on the last one's final state."""

        def __init__(self, rnns, act=None):
            super().__init__()
            self.names = sorted(rnns)
            for k, v in rnns.items():
                setattr(self, k, v)
            last = rnns[self.names[-1]]
            dirs = 2 if last.bidirectional else 1
            self.fc = nn.Linear(dirs * last.hidden_size, UNITS) if act else None
            self.act = act

        def forward(self, x, lengths=None):
            h = None
            for k in self.names:
                rnn = getattr(self, k)
                if lengths is not None:
                    x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
                x, h = rnn(x)
                if lengths is not None:
                    x = nn.utils.rnn.pad_packed_sequence(x, batch_first=True, total_length=T)[0]
            if self.fc is None:
                return x
            h = h[0] if isinstance(h, tuple) else h
            last = getattr(self, self.names[-1])
            s = self.fc(torch.cat([h[-2], h[-1]], 1) if last.bidirectional else h[-1])
            return {"softmax": lambda v: torch.softmax(v, -1), "sigmoid": torch.sigmoid,
                    "none": lambda v: v}[self.act](s)

    return Net, ChainNet


def torch_start(name, build, lengths, emb):
    """The case's directory, its module with drawn weights, its inputs and the tensor
    fed to the module."""
    import torch
    rng = rng_for(name)
    d = case_dir(name)
    net = build().eval()
    fill(net, rng)
    io = inputs(rng, lengths, emb=emb, zero_pad=False)
    return d, net, io, torch.from_numpy(io["tokens"] if emb else io["x"])


def torch_onnx_export(name, d, net, io, feed, out):
    """torch.onnx.export of net to d/model.onnx; io[out] is what onnxruntime computes
    from it (checked against torch's own)."""
    import onnxruntime as ort
    import torch
    path = os.path.join(d, "model.onnx")
    torch.onnx.export(net, (feed,), path, input_names=["input"], output_names=["out"],
                      dynamic_axes={"input": {0: "B"}}, opset_version=14, dynamo=False)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    io[out] = sess.run(None, {"input": feed.numpy()})[0]
    with torch.no_grad():
        assert np.abs(net(feed).numpy() - io[out]).max() < 1e-5
    finish(name, "model.onnx", io, ort_ref() + " of torch %s's torch.onnx.export" % torch_ref(),
           "%s, lengths all %d" % (name, T))


def strip_onnx_paths(path):
    """Rewrites the ONNX file without the metadata torch's dynamo exporter stamps on
    every node (pkg.torch.onnx.stack_trace holds the paths of this machine's torch and of
    this script), and checks that no machine path is left in it."""
    import re
    import onnx
    m = onnx.load(path)
    graphs = [m.graph] + [f for f in m.functions]
    del m.metadata_props[:]
    for g in graphs:
        del g.metadata_props[:]
        for n in g.node:
            del n.metadata_props[:]
            n.doc_string = ""
        for v in list(getattr(g, "value_info", [])) + list(getattr(g, "input", [])) + \
                list(getattr(g, "output", [])):
            del v.metadata_props[:]
    onnx.save(m, path)
    data = open(path, "rb").read()
    left = re.findall(rb"(?:/work|/tmp|/home|/root|/usr)/[^\s\"']*", data)
    assert not left, (path, left[:3])


def torch_dynamo_export(name, d, net, io, feed, out, batch=None, dynamic=False):
    """torch.onnx.export as torch 2.9+ does it by default (the dynamo exporter), one file
    (no external data), its metadata stripped (strip_onnx_paths).  The graph has the
    example's fixed sizes, or a dynamic batch with dynamic; with batch, the example has
    that many sequences, and the reference is torch's own on all of io's (onnxruntime
    runs the graph a batch at a time, checked against torch)."""
    import onnxruntime as ort
    import torch
    path = os.path.join(d, "model.onnx")
    ex = feed[:batch] if batch else feed
    kw = {}
    if dynamic:
        kw["dynamic_shapes"] = {"x": {0: torch.export.Dim("B")}}
    torch.onnx.export(net, (ex,), path, input_names=["input"], output_names=["out"],
                      external_data=False, **kw)
    strip_onnx_paths(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    step = batch or feed.shape[0]
    got = np.concatenate([sess.run(None, {"input": feed[k:k + step].numpy()})[0]
                          for k in range(0, feed.shape[0], step)])
    with torch.no_grad():
        want = net(feed).numpy()
    assert np.abs(want - got).max() < 1e-5
    io[out] = want if batch else got
    how = "torch.onnx.export (dynamo, its default%s)" % (
        ", at batch %d" % batch if batch else ", dynamic batch" if dynamic else "")
    if batch:
        ref = "%s, exported by %s; onnxruntime agrees, %d sequence(s) at a time" % (
            torch_ref(), how, batch)
    else:
        ref = "%s of %s's %s" % (ort_ref(), torch_ref(), how)
    finish(name, "model.onnx", io, ref, "%s, lengths all %d" % (name, T))


def packed_scores(net, io, emb):
    """The head's output (softmax, or sigmoid) on the last layer's final state, with
    pack_padded_sequence over io's ragged lengths."""
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence
    with torch.no_grad():
        feed = torch.from_numpy(io["tokens"] if emb else io["x"])
        x = net.emb(feed) if emb else feed
        packed = pack_padded_sequence(x, torch.from_numpy(io["lengths"]), batch_first=True,
                                      enforce_sorted=False)
        _, h = net.rnn(packed)
        h = h[0] if isinstance(h, tuple) else h
        last = torch.cat([h[-2], h[-1]], 1) if net.rnn.bidirectional else h[-1]
        s = net.fc(last)
        return (torch.softmax(s, -1) if net.act == "softmax" else torch.sigmoid(s)).numpy()


def gen_torch_exports():
    """torch.onnx.export of nn modules: equal lengths (an export has no packed sequences)."""
    import torch.nn as nn
    Net, _ = torch_nets()
    exports = [
        ("onnx_torch_lstm_l2_softmax", lambda: Net(nn.LSTM(IN, H, 2, batch_first=True),
                                                   act="softmax"), False, "scores"),
        ("onnx_torch_gru_bi_emb_sigmoid", lambda: Net(nn.GRU(EMB, H, 1, batch_first=True,
                                                             bidirectional=True),
                                                      emb=True, act="sigmoid"), True, "scores"),
        ("onnx_torch_rnn_relu_seq", lambda: Net(nn.RNN(IN, H, 2, nonlinearity="relu",
                                                       batch_first=True)), False, "output"),
        ("onnx_torch_lstm_bi_all_tanh", lambda: Net(nn.LSTM(IN, H, 1, batch_first=True,
                                                            bidirectional=True),
                                                    act="tanh", apply="all"), False, "scores"),
        # A linear head: --head-activation may add the softmax the graph does not apply.
        ("onnx_torch_gru_linear", lambda: Net(nn.GRU(IN, H, 1, batch_first=True), act="none"),
         False, "scores"),
    ]
    for name, build, emb, out in exports:
        d, net, io, feed = torch_start(name, build, EQUAL, emb)
        torch_onnx_export(name, d, net, io, feed, out)


def gen_torch_dynamo():
    """torch.onnx.export's default exporter (dynamo=True since torch 2.9): LSTM and GRU
    operators with the outputs' batch_first/bidirectional layout changes written as
    Transpose and Reshape to the example's fixed sizes; nn.RNN unrolled step by step,
    which is refused."""
    import torch.nn as nn
    Net, _ = torch_nets()
    for name, build, out, kw in [
        ("onnx_dynamo_gru_bi2_all_sigmoid", lambda: Net(nn.GRU(IN, H, 2, batch_first=True,
                                                               bidirectional=True),
                                                        act="sigmoid", apply="all"),
         "scores", {}),
        ("onnx_dynamo_lstm_all_softmax", lambda: Net(nn.LSTM(IN, H, 1, batch_first=True),
                                                     act="softmax", apply="all"), "scores", {}),
        ("onnx_dynamo_lstm_b1_all_tanh", lambda: Net(nn.LSTM(IN, H, 1, batch_first=True),
                                                     act="tanh", apply="all"), "scores",
         {"batch": 1}),
        ("onnx_dynamo_gru_dynb_bi_all", lambda: Net(nn.GRU(IN, H, 1, batch_first=True,
                                                           bidirectional=True),
                                                    act="none", apply="all"), "scores",
         {"dynamic": True}),
        ("onnx_dynamo_lstm_last_step", lambda: Net(nn.LSTM(IN, H, 1, batch_first=True),
                                                   act="sigmoid", apply="last_step"),
         "scores", {}),
        ("onnx_dynamo_lstm2_h_softmax", lambda: Net(nn.LSTM(IN, H, 2, batch_first=True),
                                                    act="softmax"), "scores", {}),
        ("onnx_dynamo_gru_bi_seq", lambda: Net(nn.GRU(IN, H, 1, batch_first=True,
                                                      bidirectional=True)), "output", {}),
    ]:
        d, net, io, feed = torch_start(name, build, EQUAL, False)
        torch_dynamo_export(name, d, net, io, feed, out, **kw)
    for name, build, refuse in [
        ("onnx_dynamo_refuse_rnn", lambda: Net(nn.RNN(IN, H, 1, batch_first=True), act="none",
                                               apply="all"),
         "{source}: no LSTM, GRU or RNN operator: rnnd-convert converts those, not a recurrence "
         "unrolled into per-step operators, which torch.onnx.export's default (dynamo) exporter "
         "writes for nn.RNN; export with torch.onnx.export(..., dynamo=False), which writes "
         "nn.LSTM/nn.GRU/nn.RNN as those operators"),
        ("onnx_dynamo_refuse_bi_last_step",
         lambda: Net(nn.GRU(IN, H, 1, batch_first=True, bidirectional=True), act="none",
                     apply="last_step"),
         "operator 'node_linear' (Gemm): input=select: the head reads Y's last step, the "
         "forward direction's final state but not the backward one's (Y's first step): read "
         "Y_h instead; rnnd's head reads every step of Y as [B, T, dirs*H] or [T, B, dirs*H], "
         "or the final states as [B, dirs*H]; export a head on one of those"),
    ]:
        d, net, io, feed = torch_start(name, build, EQUAL, False)
        import torch
        path = os.path.join(d, "model.onnx")
        torch.onnx.export(net, (feed,), path, input_names=["input"], output_names=["out"],
                          external_data=False)
        strip_onnx_paths(path)
        finish(name, "model.onnx", {}, torch_ref() + " torch.onnx.export (dynamo)", "refused",
               refuse=refuse)


def gen_torch_packed():
    """A state_dict and a TorchScript module, with ragged lengths (packed sequences)."""
    import torch
    import torch.nn as nn
    Net, _ = torch_nets()
    for name, build, args, emb, kind in [
        ("torch_sd_lstm_bi2_emb_softmax",
         lambda: Net(nn.LSTM(EMB, H, 2, batch_first=True, bidirectional=True), emb=True,
                     act="softmax"),
         ["--prefix", "rnn.", "--embedding", "emb.weight", "--head-weight", "fc.weight",
          "--head-bias", "fc.bias", "--head-activation", "softmax"], True, "state_dict"),
        ("torch_jit_trace_gru_l2",
         lambda: Net(nn.GRU(IN, H, 2, batch_first=True), act="sigmoid"),
         ["--head-weight", "fc.weight", "--head-bias", "fc.bias", "--head-activation",
          "sigmoid"], False, "torch.jit.trace"),
        # relu is in the traced code (torch.rnn_relu), not in the state_dict: no --cell.
        ("torch_jit_trace_rnn_relu",
         lambda: Net(nn.RNN(IN, H, 2, nonlinearity="relu", batch_first=True), act="sigmoid"),
         ["--head-activation", "sigmoid"], False, "torch.jit.trace"),
    ]:
        d, net, io, feed = torch_start(name, build, RAGGED, emb)
        io["scores"] = packed_scores(net, io, emb)
        if kind == "state_dict":
            torch.save(net.state_dict(), os.path.join(d, "model.pt"))
        else:
            traced = torch.jit.trace(net, (feed,))
            jit_save_without_paths(traced, os.path.join(d, "model.pt"), feed)
        finish(name, "model.pt", io, torch_ref() + " with pack_padded_sequence",
               "%s (%s), lengths %s" % (name, kind, RAGGED), args=args)


def jit_save_without_paths(module, path, feed):
    """torch.jit.save, less the code's *.debug_pkl members: they hold the paths of this
    machine's source files (torch's and this script's; a traced module's, its whole
    stack).  torch.jit.load reads the archive without them (checked on feed), and no
    member is left with a machine path."""
    import re
    import torch
    import zipfile
    from io import BytesIO
    buf = BytesIO()
    torch.jit.save(module, buf)
    with zipfile.ZipFile(buf) as zin, zipfile.ZipFile(path, "w") as z:
        for i in zin.infolist():
            if not i.filename.endswith(".debug_pkl"):
                z.writestr(i, zin.read(i.filename))
    with zipfile.ZipFile(path) as z:
        left = [n for n in z.namelist()
                if re.search(rb"(?:/work|/tmp|/home|/root|/usr)/", z.read(n))]
    assert not left, (path, left)
    with torch.no_grad():
        assert np.array_equal(torch.jit.load(path)(feed).numpy(), module(feed).numpy())


def gen_torch_jit_script():
    """torch.jit.save(torch.jit.script(model)): a 2-layer LSTM and a linear head, softmax in
    forward(), ragged lengths (the reference packs them; the scripted module and the file
    torch.jit.load reads are checked against the eager one), converted with no names
    given.  A scripted archive's pickle
    tags its list attributes with torch.jit._pickle.restore_type_tag, which a traced one
    has not.  And an nn.RNN with relu, whose scripted module keeps its `nonlinearity`
    attribute: converted with no --cell, and refused with a --cell that contradicts it."""
    import torch
    import torch.nn as nn

    class ScriptNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(IN, H, 2, batch_first=True)
            self.fc = nn.Linear(H, UNITS)
            self.act = "softmax"

        def forward(self, x):
            _, (h, _) = self.rnn(x)
            return torch.softmax(self.fc(h[-1]), -1)

    class ScriptRnnNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.RNN(IN, H, 2, nonlinearity="relu", batch_first=True)
            self.fc = nn.Linear(H, UNITS)
            self.act = "sigmoid"

        def forward(self, x):
            _, h = self.rnn(x)
            return torch.sigmoid(self.fc(h[-1]))

    for name, build, args, refuse in [
        ("torch_jit_script_lstm_l2_softmax", ScriptNet, ["--head-activation", "softmax"], None),
        ("torch_jit_script_rnn_relu", ScriptRnnNet, ["--head-activation", "sigmoid"], None),
        ("torch_refuse_script_rnn_cell", ScriptRnnNet, ["--cell", "rnn_tanh"],
         "--cell rnn_tanh: the archive's nn.RNN 'rnn.' has nonlinearity='relu'; give --cell "
         "rnn_relu or leave it out"),
    ]:
        d, net, io, feed = torch_start(name, build, RAGGED, False)
        io["scores"] = packed_scores(net, io, False)
        scripted = torch.jit.script(net)
        with torch.no_grad():
            assert np.abs(scripted(feed).numpy() - net(feed).numpy()).max() < 1e-6
        jit_save_without_paths(scripted, os.path.join(d, "model.pt"), feed)
        if refuse:
            finish(name, "model.pt", {}, torch_ref(), "refused", args=args, refuse=refuse)
            continue
        finish(name, "model.pt", io, torch_ref() + " with pack_padded_sequence",
               "%s (torch.jit.script), lengths %s" % (name, RAGGED), args=args)


def gen_torch_chains():
    """State_dicts of recurrent modules one after the other, found in the order their
    sizes chain or given by --prefix (or refused when it is ambiguous); and
    torch.onnx.export of a chain."""
    import torch
    import torch.nn as nn
    _, ChainNet = torch_nets()
    tref = torch_ref()
    for name, rnns, args, act, refuse in [
        # Found in the one order their sizes chain: 5 -> 12 -> 6.
        ("torch_sd_chain_lstm1_lstm2", {"lstm2": nn.LSTM(12, 6, batch_first=True),
                                        "lstm1": nn.LSTM(IN, 12, batch_first=True)},
         ["--head-activation", "softmax"], "softmax", None),
        # Both orders chain (5 -> 5 -> 5): the order is given.
        ("torch_sd_chain_order_given", {"rnn_a": nn.GRU(IN, IN, batch_first=True,
                                                        bidirectional=False),
                                        "rnn_b": nn.LSTM(IN, IN, 2, batch_first=True)},
         ["--prefix", "rnn_a.,rnn_b.", "--head-activation", "sigmoid"], "sigmoid", None),
        ("torch_refuse_chain_order", {"rnn_a": nn.GRU(IN, IN, batch_first=True),
                                      "rnn_b": nn.LSTM(IN, IN, 2, batch_first=True)},
         [], None, "several recurrent modules (rnn_a.: 5 in, 5 out, rnn_b.: 5 in, 5 out) that "
         "chain in more than one order: give --prefix for the one to serve, or theirs in order, "
         "comma-separated, for a chain (--prefix rnn_a.,rnn_b.)"),
    ]:
        d, net, io, feed = torch_start(name, lambda: ChainNet(rnns, act), RAGGED, False)
        torch.save(net.state_dict(), os.path.join(d, "model.pt"))
        if refuse:
            finish(name, "model.pt", {}, tref, "refused", refuse=refuse)
            continue
        with torch.no_grad():
            io["scores"] = net(feed, torch.from_numpy(io["lengths"])).numpy()
        finish(name, "model.pt", io, tref + " with pack_padded_sequence per module",
               "%s (state_dict of a chain of modules), lengths %s" % (name, RAGGED), args=args)

    # torch.onnx.export of a chain: an LSTM then a bidirectional GRU, a softmax head.
    name = "onnx_torch_chain_lstm_grubi_softmax"
    d, net, io, feed = torch_start(name, lambda: ChainNet(
        {"a": nn.LSTM(IN, H, batch_first=True), "b": nn.GRU(H, 6, batch_first=True,
                                                            bidirectional=True)}, "softmax"),
        EQUAL, False)
    torch_onnx_export(name, d, net, io, feed, "scores")


def gen_torch_found_by_shape():
    """Issue 32's first day: Embedding + 2-layer GRU + Linear, softmax in forward(), saved
    as a state_dict with no names given: rnnd-convert finds the embedding and the head by
    shape.  model_v2.pt is the same network with other weights (io_v2: its outputs), for
    --version 2."""
    import torch
    import torch.nn as nn
    Net, _ = torch_nets()
    tref = torch_ref()
    name = "torch_sd_emb_gru2_found"
    d, net, io, _ = torch_start(name, lambda: Net(nn.GRU(EMB, H, 2, batch_first=True),
                                                  emb=True, act="softmax"), RAGGED, True)
    io["scores"] = packed_scores(net, io, True)
    torch.save(net.state_dict(), os.path.join(d, "model.pt"))
    fill(net, rng_for(name + "_v2"))
    v2 = {k: io[k] for k in ("tokens", "lengths")}
    v2["scores"] = packed_scores(net, v2, True)
    if selected(name):
        torch.save(net.state_dict(), os.path.join(d, "model_v2.pt"))
        write_safetensors(os.path.join(d, "io_v2.safetensors"), v2,
                          {"case": name + " model_v2.pt", "reference": tref})
    finish(name, "model.pt", io, tref + " with pack_padded_sequence",
           "%s (state_dict, no names given), lengths %s" % (name, RAGGED),
           args=["--head-activation", "softmax"])


def gen_torch_notes_and_pickle():
    """A head of two nn.Linear (converted for its notes: the first is taken as the head,
    the second is named unused), and torch.save(model), which pickles the class: refused,
    saying to save the state_dict."""
    import torch
    import torch.nn as nn
    Net, _ = torch_nets()
    tref = torch_ref()
    name = "torch_sd_lstm_mlp_head"
    d, net, io, _ = torch_start(name, lambda: Net(nn.LSTM(IN, H, 1, batch_first=True),
                                                  act="none"), EQUAL, False)
    net.fc2 = nn.Linear(UNITS, 2)
    fill(net, rng_for(name))
    torch.save(net.state_dict(), os.path.join(d, "model.pt"))
    finish(name, "model.pt", None, tref, "%s: converted only, for its notes" % name,
           extra={"convert_only": True})

    # torch.save(model) pickles a module-level class by name.
    global Whole
    Whole = type("Whole", (Net,), {"__module__": "__main__"})
    name = "torch_refuse_whole_model"
    d, net, io, _ = torch_start(name, lambda: Whole(nn.LSTM(IN, H, 1, batch_first=True),
                                                    act="none"), EQUAL, False)
    torch.save(net, os.path.join(d, "model.pt"))
    finish(name, "model.pt", {}, tref, "refused", refuse=(
        "the pickle refers to __main__.Whole: rnnd-convert reads tensors and modules only; "
        "save the weights instead, torch.save(model.state_dict(), PATH), or "
        "torch.jit.save(torch.jit.script(model), PATH)"))


def onnx_model_of(g):
    """An ONNX model (opset 14, IR version 8) of graph g."""
    from onnx import helper
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def onnx_rnn_graph(name, op, attrs, dirs, rng, layout, P, states):
    """(graph, names of its state inputs): one LSTM/GRU/RNN operator with weights drawn
    from rng, sequence_lens, and initial_h (and initial_c) as graph inputs [dirs, B, H]
    with states, a peephole P initializer with P."""
    from onnx import TensorProto, helper, numpy_helper
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    W = rng.uniform(-0.5, 0.5, (dirs, G * H, IN)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (dirs, G * H, H)).astype(np.float32)
    Bb = rng.uniform(-0.5, 0.5, (dirs, 2 * G * H)).astype(np.float32)
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"),
             numpy_helper.from_array(Bb, "B")]
    node_in = ["X", "W", "R", "B", "seq_lens"]
    state_in = []
    if states:
        state_in = ["h0"] + (["c0"] if op == "LSTM" else [])
        node_in += state_in
    if P:
        inits.append(numpy_helper.from_array(
            rng.uniform(-0.5, 0.5, (dirs, 3 * H)).astype(np.float32), "P"))
        node_in += ["", "", "P"]
    xshape = ["B", T, IN] if layout else [T, "B", IN]
    node = helper.make_node(op, node_in, ["Y", "Y_h"], name=op.lower() + "_0", hidden_size=H,
                            layout=layout, **attrs)
    g = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, xshape),
         helper.make_tensor_value_info("seq_lens", TensorProto.INT32, ["B"])] +
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [dirs, "B", H])
         for n in state_in],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)], inits)
    return g, state_in


def onnx_graph_outputs(model, io, rng, state_in, dirs):
    """Runs model in onnxruntime on io's x and lengths (and h0/c0 drawn from rng, added
    to io): io gains output and h_n."""
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x = io["x"].transpose(1, 0, 2)
    feed = {"X": np.ascontiguousarray(x), "seq_lens": io["lengths"].astype(np.int32)}
    for n in state_in:  # rnnd's h0/c0 are batch-first [B, L*dirs, H]
        io[n] = rng.uniform(-0.5, 0.5, (B, dirs, H)).astype(np.float32)
        feed[n] = np.ascontiguousarray(io[n].transpose(1, 0, 2))
    Y, Y_h = sess.run(None, feed)
    # Y [T, dirs, B, H] (layout 0) or [B, T, dirs, H]; Y_h [dirs, B, H] or [B, dirs, H].
    io["output"] = Y.transpose(2, 0, 1, 3).reshape(B, T, dirs * H)
    io["h_n"] = Y_h.transpose(1, 0, 2)


def onnx_graph_case(name, op, attrs, lengths, dirs, refuse=None, layout=0, P=False,
                    states=False):
    """A hand-made ONNX graph of one recurrent operator, as tf2onnx writes them; its
    outputs from onnxruntime, or the message rnnd-convert must refuse it with."""
    import onnx
    from onnx import TensorProto, helper
    rng = rng_for(name)
    d = case_dir(name)
    g, state_in = onnx_rnn_graph(name, op, attrs, dirs, rng, layout, P, states)
    model = onnx_model_of(g)
    onnx.save(model, os.path.join(d, "model.onnx"))
    io = inputs(rng, lengths, zero_pad=False)
    oref = ort_ref()
    if refuse:
        finish(name, "model.onnx", {}, oref, "refused", refuse=refuse)
        return
    if layout:
        # onnxruntime has no layout 1: the reference is the same graph in layout 0.
        g.node[0].ClearField("attribute")
        g.node[0].attribute.extend(helper.make_node(op, [], [], hidden_size=H, **attrs).attribute)
        g.input[0].CopyFrom(helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                                          [T, "B", IN]))
        model = onnx_model_of(g)
    onnx_graph_outputs(model, io, rng, state_in, dirs)
    finish(name, "model.onnx", io, oref + (" of the same graph with layout 0 (onnxruntime has "
                                           "no layout 1)" if layout else ""),
           "%s, lengths %s, layout %d" % (name, lengths, layout))


def gen_onnx_graphs():
    """Hand-made ONNX graphs: sequence_lens, layout, GRU linear_before_reset=0, initial
    states as inputs, and the refusals."""
    onnx_graph_case("onnx_lstm_bi_seqlens", "LSTM", {"direction": "bidirectional"}, RAGGED, 2)
    onnx_graph_case("onnx_gru_rbr_layout1", "GRU", {"linear_before_reset": 0}, RAGGED, 1,
                    layout=1)
    onnx_graph_case("onnx_gru_lbr_bi", "GRU", {"linear_before_reset": 1,
                                                "direction": "bidirectional"}, RAGGED, 2)
    onnx_graph_case("onnx_rnn_seqlens", "RNN", {}, RAGGED, 1)
    onnx_graph_case("onnx_lstm_bi_initial_states", "LSTM", {"direction": "bidirectional"},
                    RAGGED, 2, states=True)
    onnx_graph_case("onnx_refuse_peephole", "LSTM", {}, EQUAL, 1, P=True,
                    refuse="operator 'lstm_0' (LSTM): input P=P: rnnd's LSTM has no peepholes; "
                    "export an LSTM without P")
    onnx_graph_case("onnx_refuse_clip", "GRU", {"clip": 3.0, "linear_before_reset": 1}, EQUAL,
                    1, refuse="operator 'gru_0' (GRU): clip=3.0: rnnd does not clip cell "
                    "inputs; export the RNN without clip")
    onnx_graph_case("onnx_refuse_reverse", "LSTM", {"direction": "reverse"}, EQUAL, 1,
                    refuse="operator 'lstm_0' (LSTM): direction=reverse: a reverse-only RNN is "
                    "not supported; rnnd runs forward or bidirectional: reverse each sequence "
                    "within its length and export a forward RNN")
    onnx_graph_case("onnx_refuse_activations", "GRU", {"activations": ["Sigmoid", "Relu"]},
                    EQUAL, 1, refuse="operator 'gru_0' (GRU): activations=['Sigmoid', 'Relu']: "
                    "rnnd computes the defaults ['sigmoid', 'tanh']; export the RNN with those")


def gen_torch():
    """The PyTorch cases, kind by kind: ONNX exports, state_dicts and TorchScript, chains,
    names found by shape, a state_dict for its notes and a pickled model, hand-made ONNX
    graphs."""
    import torch
    torch.set_num_threads(1)
    gen_torch_exports()
    gen_torch_dynamo()
    gen_torch_packed()
    gen_torch_jit_script()
    gen_torch_chains()
    gen_torch_found_by_shape()
    gen_torch_notes_and_pickle()
    gen_onnx_graphs()


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else ""
    os.makedirs(OUT, exist_ok=True)
    if which == "keras2":
        gen_keras(2)
    elif which == "keras3":
        gen_keras(3)
    elif which == "torch":
        gen_torch()
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
