"""An MLServer runtime serving an ONNX model with onnxruntime: what a user of MLServer
writes for a model MLServer has no runtime of its own for (tests/bench/server_bench.py).
The request's FP32 input `input` [B, T, features] goes through the session; its `scores`
come back as FP32."""

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse
from mlserver.utils import get_model_uri


class OnnxRuntime(MLModel):
    async def load(self) -> bool:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(await get_model_uri(self._settings), opts,
                                             providers=["CPUExecutionProvider"])
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0]).astype(np.float32)
        (scores,) = self._session.run(["scores"], {"input": x})
        return InferenceResponse(model_name=self.name, model_version=self.version,
                                 outputs=[NumpyCodec.encode_output("scores", scores)])
