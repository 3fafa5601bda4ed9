"""rnnd-convert: Keras, ONNX and PyTorch recurrent models into rnnd's repository layout."""

from .model import ConvertError, Model, write

__all__ = ["ConvertError", "Model", "write", "convert"]

__version__ = "0.1.0"


def convert(source, fmt=None, **torch_args):
    """The Model of a Keras, ONNX or PyTorch file (cli.convert); write() it to a repository."""
    from .cli import convert as _convert
    return _convert(source, fmt, **torch_args)
