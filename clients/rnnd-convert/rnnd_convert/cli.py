"""rnnd-convert SOURCE --repository DIR --name NAME: one command from a Keras, ONNX or
PyTorch file to an rnnd model directory (docs/MODELS.md, "From Keras / ONNX / PyTorch")."""

import argparse
import os
import re
import sys
import textwrap

from .model import ConvertError, HEAD_ACTIVATIONS, write

FORMATS = {".keras": "keras", ".h5": "keras", ".hdf5": "keras", ".onnx": "onnx",
           ".pt": "torch", ".pth": "torch", ".bin": "torch", ".safetensors": "torch"}


SAVED_MODEL = ("a TensorFlow SavedModel, which rnnd-convert does not read: save the Keras "
               "model itself with model.save(\"model.keras\") (tf.keras 2: \"model.h5\"), or "
               "convert the SavedModel to ONNX with tf2onnx")


def _check_is_file(src):
    """Refuses a source that is no file: a SavedModel (tf.keras 2's model.save(DIR), or
    model.export(DIR)) by name, since a Keras user may well give one."""
    if os.path.basename(os.path.normpath(src)) == "saved_model.pb" or \
            os.path.isfile(os.path.join(src, "saved_model.pb")):
        raise ConvertError("%s: %s" % (src, SAVED_MODEL))
    if os.path.isdir(src):
        raise ConvertError("%s: a directory; give the model file" % src)
    if not os.path.isfile(src):
        raise ConvertError("%s: no such file" % src)


def convert(src, fmt=None, **torch_args):
    """The Model of a source file; ConvertError when rnnd cannot compute it exactly."""
    if os.path.exists(src):
        _check_is_file(src)
    fmt = fmt or FORMATS.get(os.path.splitext(src)[1].lower())
    if fmt is None:
        raise ConvertError("%s: unknown format; give --format keras, onnx or torch" % src)
    _check_is_file(src)
    if fmt == "keras":
        from . import keras
        return keras.convert(src)
    if fmt == "onnx":
        from . import onnx_model
        return onnx_model.convert(src)
    from . import torch_model
    return torch_model.convert(src, **torch_args)


EPILOG = """\
Writes <repository>/<name>/config.json and <repository>/<name>/<version>/model.safetensors,
which rnnd loads as they are; nothing is written when the model is refused.  Notes after
a conversion say which request inputs the model needs (lengths for a mask, h0/c0 for ONNX
initial states), which names of the source became rnnd's fixed tensor names (input or
tokens; scores, output, h_n), and which tensors of the source were not used.

An existing model directory takes a new version with --version N when its config.json
describes the same network (cell, sizes, layers, embedding, head); the weights are then
named as that config.json says.  Without --version an existing directory is refused.

PyTorch state_dicts: the recurrent layer is found by its weight_ih_l0 name; an embedding
(a bias-free [N, input_size] weight before it) and a linear head (a [units, directions x
hidden] weight after it, with its bias) are found by shape, or named with --embedding
and --head-weight.  A state_dict does not record the head's activation: give
--head-activation when forward() applies one.  Keras and ONNX files say their head's
activation; --head-activation may add one where the source applies none.

Exit status: 0 written; 1 refused (one line on stderr saying why and what to do
instead); 2 a bad command line.  What converts and what is refused:
docs/MODELS.md, "From Keras / ONNX / PyTorch".
"""


def _block(b):
    return "%s, %d layer%s%s, hidden %d" % (
        b["cell"], b["num_layers"], "s" if b["num_layers"] > 1 else "",
        ", bidirectional" if b["bidirectional"] else "", b["hidden_size"])


def _describe(cfg):
    if "blocks" in cfg:
        desc = "a chain, input %d: %s" % (cfg["input_size"], " -> ".join(
            "(%s)" % _block(b) for b in cfg["blocks"]))
    else:
        desc = "%s, input %d" % (_block(cfg), cfg["input_size"])
    if "embedding" in cfg:
        desc += ", embedding %d x %d" % (cfg["embedding"]["num_embeddings"], cfg["embedding"]["dim"])
    if "head" in cfg:
        desc += ", head %d units %s (%s)" % (cfg["head"]["units"], cfg["head"]["activation"],
                                            cfg["head"]["apply"])
    return desc


def apply_head_activation(m, act, what):
    """--head-activation on a Keras or ONNX model, whose source says its activation: it
    may add one where the source applies none, never change one."""
    if act is None:
        return
    if m.head is None:
        raise ConvertError("--head-activation %s: the %s has no head (a linear layer after the "
                           "recurrent ones); drop the flag" % (act, what))
    if m.head.activation == act:
        return
    if m.head.activation != "none":
        raise ConvertError("--head-activation %s: the %s applies %s after its head; drop the "
                           "flag (rnnd computes what the %s does)" % (
                               act, what, m.head.activation, what))
    m.head.activation = act
    m.notes.append("the head's activation: %s from --head-activation (the %s applies none)"
                   % (act, what))


def _parser():
    ap = argparse.ArgumentParser(prog="rnnd-convert",
                                 description=textwrap.fill(" ".join(__doc__.split()), 79),
                                 epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help=".keras, .h5, .onnx, .pt/.pth (state_dict, or TorchScript: "
                    "traced or scripted) or .safetensors")
    ap.add_argument("--repository", required=True, metavar="DIR", help="rnnd's model repository")
    ap.add_argument("--name", required=True, help="the model's name (its directory)")
    ap.add_argument("--version", type=int, metavar="N",
                    help="version directory (default 1 for a new model; "
                    "required to add a version to an existing one)")
    ap.add_argument("--format", choices=("keras", "onnx", "torch"),
                    help="default: from the file's extension")
    ap.add_argument("--head-activation", choices=HEAD_ACTIVATIONS,
                    help="the activation after the head: PyTorch (a state_dict does not record "
                    "it; default none, with a note), or Keras/ONNX where the source applies "
                    "none")
    g = ap.add_argument_group("PyTorch", "tensor names where they differ from nn.LSTM's or "
                              "cannot be found by shape")
    g.add_argument("--prefix", help="prefix of the recurrent layer's state_dict names, e.g. "
                   "'rnn.'; several, comma-separated in the order forward() runs them, for a "
                   "chain of modules ('lstm1.,lstm2.') (default: the prefixes of the "
                   "*weight_ih_l0 tensors, ordered by their sizes when only one order chains)")
    g.add_argument("--cell", choices=("lstm", "gru", "rnn_tanh", "rnn_relu"),
                   help="default: from weight_hh_l0's rows; an nn.RNN's nonlinearity "
                   "from a TorchScript archive, else tanh (a state_dict does not record it)")
    g.add_argument("--embedding", metavar="NAME",
                   help="the nn.Embedding's weight, e.g. 'emb.weight' (default: "
                   "the one bias-free [N, input_size] weight before the recurrent layer)")
    g.add_argument("--head-weight", metavar="NAME",
                   help="the head nn.Linear's weight, e.g. 'fc.weight' "
                   "(default: the one [units, directions x hidden] weight after it)")
    g.add_argument("--head-bias", metavar="NAME",
                   help="the head nn.Linear's bias, e.g. 'fc.bias' (default: "
                   "the bias beside --head-weight)")
    g.add_argument("--head-apply", choices=("last", "all"),
                   help="last: the head reads the final states (default); all: every step")
    return ap


def main(argv=None):
    ap = _parser()
    a = ap.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,127}", a.name) or a.name.startswith("."):
        ap.error("--name: 1 to 127 characters of [A-Za-z0-9_.-], not starting with '.'")
    if a.version is not None and a.version < 1:
        ap.error("--version: a positive integer")
    fmt = a.format or FORMATS.get(os.path.splitext(a.source)[1].lower())
    torch_args = {}
    if fmt == "torch":
        torch_args = dict(prefix=a.prefix, cell=a.cell, embedding=a.embedding,
                          head_weight=a.head_weight, head_bias=a.head_bias,
                          head_activation=a.head_activation, head_apply=a.head_apply)
    elif any(v is not None for v in (a.prefix, a.cell, a.embedding, a.head_weight, a.head_bias,
                                     a.head_apply)):
        ap.error("--prefix, --cell, --embedding, --head-weight, --head-bias and --head-apply are "
                 "for PyTorch sources; a %s file names its layers itself"
                 % (fmt or "Keras or ONNX"))
    try:
        m = convert(a.source, fmt, **torch_args)
        if fmt != "torch":
            apply_head_activation(m, a.head_activation, "graph" if fmt == "onnx" else "model")
        cfg = write(m, a.repository, a.name, a.version,
                    {"source": os.path.basename(a.source), "converter": "rnnd-convert"})
    except ConvertError as e:
        print("rnnd-convert: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s: %s" % (os.path.join(a.repository, a.name, str(a.version or 1)),
                            _describe(cfg)))
    for n in m.notes:
        print("note: " + n)
    return 0
