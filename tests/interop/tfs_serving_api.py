#!/usr/bin/env python3
"""tfs_serving_api.py: TF Serving's own published Python API (PyPI `tensorflow-serving-api`,
which pulls TensorFlow) against the real rnnd's gRPC front end, once, by hand: the package
is too heavy for `make test`, where tests/interop/test_grpc.py uses stubs generated from
rnnd's proto/pb instead.  docs/HTTP.md records what this showed.

- PredictionService/Predict on golden cases, the inputs made by `tf.make_tensor_proto`
  (tensor_content) and as float_val / int64_val, every output within 1e-5 of PyTorch and
  read back with `tf.make_ndarray`;
- PredictionService/GetModelMetadata: the signature_def unpacked as the package's
  SignatureDefMap;
- ModelService/GetModelStatus: version 1 AVAILABLE;
- a signature rnnd does not have: INVALID_ARGUMENT.

Usage (any Python with tensorflow-serving-api and numpy; none of it in the repository):
    python3 -m venv /tmp/tfs && /tmp/tfs/bin/pip install tensorflow-serving-api
    RNND_BIN=build/daemon/rnnd RNND_SRC=. PYTHONPATH=tests/support \\
        /tmp/tfs/bin/python tests/interop/tfs_serving_api.py
"""

import importlib.metadata
import os
import sys

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc,
                                     predict_pb2, prediction_service_pb2_grpc)

import rnndtest as th
from rnndtest import Daemon, check, GOLDEN, read_safetensors

CASES = ["lstm_l1_uni_equal_noh0", "lstm_l3_bi_ragged_h0", "gru_l1_uni_equal_noh0", "rnn_tanh_l3_bi_ragged_h0"]
INPUTS = (("x", "input"), ("lengths", "lengths"), ("h0", "h0"), ("c0", "c0"))
OUTPUTS = ("y", "h_n", "c_n")


def golden(name):
    raw = read_safetensors(os.path.join(GOLDEN, name, "io.safetensors"))
    return {k: np.array(v, dtype=np.float32 if dt == "F32" else np.int64).reshape(shape)
            for k, (dt, shape, v) in raw.items()}


def predict(stub, name, t, how):
    rq = predict_pb2.PredictRequest()
    rq.model_spec.name = name
    rq.model_spec.signature_name = "serving_default"
    for key, tname in INPUTS:
        if key not in t:
            continue
        if how == "make_tensor_proto":
            rq.inputs[tname].CopyFrom(tf.make_tensor_proto(t[key]))
            continue
        p = rq.inputs[tname]
        p.dtype = tf.float32.as_datatype_enum if t[key].dtype == np.float32 else tf.int64.as_datatype_enum
        p.tensor_shape.dim.extend([p.tensor_shape.Dim(size=s) for s in t[key].shape])
        (p.float_val if t[key].dtype == np.float32 else p.int64_val).extend(t[key].ravel().tolist())
    r = stub.Predict(rq, timeout=60)
    check(r.model_spec.name == name and r.model_spec.version.value == 1, "%s Predict: model_spec" % name)
    for key in OUTPUTS:
        if key not in t:
            continue
        got = tf.make_ndarray(r.outputs[key])
        err = float(np.max(np.abs(got.astype(np.float64) - t[key]), initial=0.0)) \
            if got.shape == t[key].shape else float("inf")
        check(err <= 1e-5, "%s Predict (%s): %s within 1e-5 of PyTorch" % (name, how, key), (got.shape, err))


def control(ch):
    pred = prediction_service_pb2_grpc.PredictionServiceStub(ch)
    rq = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
    rq.model_spec.name = th.MODEL
    any_ = pred.GetModelMetadata(rq, timeout=10).metadata["signature_def"]
    sigs = get_model_metadata_pb2.SignatureDefMap()
    check(any_.Unpack(sigs), "GetModelMetadata: signature_def is a SignatureDefMap", any_.type_url)
    sd = sigs.signature_def["serving_default"]
    check(sd.method_name == "tensorflow/serving/predict" and "input" in sd.inputs and "h_n" in sd.outputs,
          "GetModelMetadata: serving_default's inputs and outputs", sd)
    rq = get_model_status_pb2.GetModelStatusRequest()
    rq.model_spec.name = th.MODEL
    st = model_service_pb2_grpc.ModelServiceStub(ch).GetModelStatus(rq, timeout=10).model_version_status
    check(len(st) == 1 and st[0].version == 1 and st[0].state == get_model_status_pb2.ModelVersionStatus.AVAILABLE,
          "GetModelStatus: version 1 AVAILABLE", st)
    rq = predict_pb2.PredictRequest()
    rq.model_spec.name = th.MODEL
    rq.model_spec.signature_name = "other"
    rq.inputs["input"].CopyFrom(tf.make_tensor_proto(np.zeros((1, 2, 5), np.float32)))
    try:
        pred.Predict(rq, timeout=10)
        check(False, "Predict with another signature fails")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "another signature: INVALID_ARGUMENT", e.details())


def main():
    print("tensorflow-serving-api %s, tensorflow %s, grpcio %s" % (
        importlib.metadata.version("tensorflow-serving-api"), tf.__version__, grpc.__version__))
    d = Daemon()
    try:
        ch = grpc.insecure_channel("127.0.0.1:%d" % d.grpc_port)
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        for name in CASES:
            t = golden(name)
            for how in ("make_tensor_proto", "float_val"):
                predict(stub, name, t, how)
        control(ch)
        ch.close()
    finally:
        d.close()
    return th.summary("tfs_serving_api")


if __name__ == "__main__":
    sys.exit(main())
