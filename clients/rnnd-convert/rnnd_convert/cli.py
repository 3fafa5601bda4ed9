"""rnnd-convert SOURCE --repository DIR --name NAME: one command from a Keras, ONNX or
PyTorch file to an rnnd model directory (docs/MODELS.md, "From Keras / ONNX / PyTorch")."""

import argparse
import os
import re
import sys

from .model import ConvertError, HEAD_ACTIVATIONS, write

FORMATS = {".keras": "keras", ".h5": "keras", ".hdf5": "keras", ".onnx": "onnx",
           ".pt": "torch", ".pth": "torch", ".bin": "torch", ".safetensors": "torch"}


def convert(src, fmt=None, **torch_args):
    """The Model of a source file; ConvertError when rnnd cannot compute it exactly."""
    fmt = fmt or FORMATS.get(os.path.splitext(src)[1].lower())
    if fmt is None:
        raise ConvertError("%s: unknown format; give --format keras, onnx or torch" % src)
    if not os.path.isfile(src):
        raise ConvertError("%s: no such file" % src)
    if fmt == "keras":
        from . import keras
        return keras.convert(src)
    if fmt == "onnx":
        from . import onnx_model
        return onnx_model.convert(src)
    from . import torch_model
    return torch_model.convert(src, **torch_args)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="rnnd-convert", description=__doc__.split("\n")[0])
    ap.add_argument("source", help=".keras, .h5, .onnx, .pt/.pth (state_dict or TorchScript) "
                    "or .safetensors")
    ap.add_argument("--repository", required=True, help="rnnd's model repository")
    ap.add_argument("--name", required=True, help="the model's name (its directory)")
    ap.add_argument("--version", type=int, default=1, help="version directory (default 1)")
    ap.add_argument("--format", choices=("keras", "onnx", "torch"),
                    help="default: from the file's extension")
    g = ap.add_argument_group("PyTorch", "tensor names where they differ from nn.LSTM's")
    g.add_argument("--prefix", help="prefix of the recurrent layer's state_dict names, e.g. "
                   "'rnn.' (default: the one prefix of a *weight_ih_l0 tensor)")
    g.add_argument("--cell", choices=("lstm", "gru", "rnn_tanh", "rnn_relu"),
                   help="default: from weight_hh_l0's rows (an nn.RNN is taken as tanh)")
    g.add_argument("--embedding", help="the nn.Embedding's weight, e.g. 'emb.weight'")
    g.add_argument("--head-weight", help="the head nn.Linear's weight, e.g. 'fc.weight'")
    g.add_argument("--head-bias", help="the head nn.Linear's bias, e.g. 'fc.bias'")
    g.add_argument("--head-activation", choices=HEAD_ACTIVATIONS, default="none")
    g.add_argument("--head-apply", choices=("last", "all"), default="last")
    a = ap.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,127}", a.name) or a.name.startswith("."):
        ap.error("--name: 1 to 127 characters of [A-Za-z0-9_.-], not starting with '.'")
    if a.version < 1:
        ap.error("--version: a positive integer")
    fmt = a.format or FORMATS.get(os.path.splitext(a.source)[1].lower())
    torch_args = {}
    if fmt == "torch":
        torch_args = dict(prefix=a.prefix, cell=a.cell, embedding=a.embedding,
                          head_weight=a.head_weight, head_bias=a.head_bias,
                          head_activation=a.head_activation, head_apply=a.head_apply)
    elif any(v is not None for v in (a.prefix, a.cell, a.embedding, a.head_weight, a.head_bias)):
        ap.error("--prefix, --cell, --embedding and --head-* are for PyTorch sources")
    try:
        m = convert(a.source, fmt, **torch_args)
        cfg = write(m, a.repository, a.name, a.version,
                    {"source": os.path.basename(a.source), "converter": "rnnd-convert"})
    except ConvertError as e:
        print("rnnd-convert: %s" % e, file=sys.stderr)
        return 1
    desc = "%s, %d layer%s%s, input %d, hidden %d" % (
        cfg["cell"], cfg["num_layers"], "s" if cfg["num_layers"] > 1 else "",
        ", bidirectional" if cfg["bidirectional"] else "", cfg["input_size"], cfg["hidden_size"])
    if "embedding" in cfg:
        desc += ", embedding %d x %d" % (cfg["embedding"]["num_embeddings"], cfg["embedding"]["dim"])
    if "head" in cfg:
        desc += ", head %d units %s (%s)" % (cfg["head"]["units"], cfg["head"]["activation"],
                                            cfg["head"]["apply"])
    print("wrote %s: %s" % (os.path.join(a.repository, a.name), desc))
    for n in m.notes:
        print("note: " + n)
    return 0
