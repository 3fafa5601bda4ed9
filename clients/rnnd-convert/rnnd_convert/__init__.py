"""rnnd-convert: Keras, ONNX and PyTorch recurrent models into rnnd's repository layout."""

from .model import ConvertError, Model, write  # noqa: F401

__version__ = "0.1.0"
