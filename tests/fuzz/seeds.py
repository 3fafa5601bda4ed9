#!/usr/bin/env python3
"""seeds.py: writes the seed corpora of tests/fuzz/corpus/ (committed; run it
again after changing a seed here).  Each seed is a valid input, so that the
fuzzer starts from inputs that reach bind, render and the weight import."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(harness, name, data):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def js(o):
    return json.dumps(o, separators=(",", ":"))


# KServe v2 JSON, for the fuzz configs of fuzz-common.h.
lstm_in = {"name": "input", "datatype": "FP32", "shape": [2, 2, 3],
           "data": [0.5, -1, 2, 0, 1e-3, 3.25, 1, 1, 1, -2, 0.125, 7]}
put("kserve", "lstm_all", js({"id": "r1", "inputs": [lstm_in]}))
put("kserve", "lstm_lengths_outputs", js({
    "inputs": [lstm_in, {"name": "lengths", "datatype": "INT64", "shape": [2], "data": [1, 2]},
               {"name": "h0", "datatype": "FP32", "shape": [2, 1, 4], "data": [0.1] * 8},
               {"name": "c0", "datatype": "FP16", "shape": [2, 1, 4], "data": [0] * 8}],
    "outputs": [{"name": "scores"}, {"name": "h_n"}, {"name": "c_n"}],
    "parameters": {"priority": 1, "timeout": 1000, "sequence_id": 0}}))
put("kserve", "gru_tokens", js({"inputs": [
    {"name": "tokens", "datatype": "INT32", "shape": [1, 4], "data": [[1, 2, 3, 9]]}],
    "outputs": [{"name": "output"}, {"name": "h_n"}]}))
put("kserve", "rnn_nested", js({"inputs": [
    {"name": "input", "datatype": "FP32", "shape": [3, 2, 1], "data": [[[1], [2]], [[3], [4]], [[5], [6]]]}]}))
# A finding, kept: integer text beyond int64 in a body long enough for the fast
# paths, which must refuse it as jansson does ("too big integer").
put("kserve", "big_integer", '{"inputs":[{"name":"in%s","datatype":"FP32","shape":[3,2,1],'
    '"data":[[[1],[2]],[[92233720368547758073],[4]],[[5],[6]]]}]}' % ("1" * 40))
put("kserve", "response", js({"model_name": "m", "model_version": "1", "id": "x", "outputs": [
    {"name": "scores", "datatype": "FP32", "shape": [1, 3], "data": [0.1, 0.2, 0.7]}]}))

# KServe v2 binary: 2 bytes of header length, the JSON, the raw tensors.
def binary(name, header, raw):
    h = js(header).encode()
    put("kserve_binary", name, struct.pack("<H", len(h)) + h + raw)


binary("lstm", {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2, 3],
                            "parameters": {"binary_data_size": 24}}],
                "outputs": [{"name": "scores", "parameters": {"binary_data": True}}]},
       struct.pack("<6f", 1, 2, 3, 4, 5, 6))
binary("gru_tokens_i64", {"inputs": [
    {"name": "tokens", "datatype": "INT64", "shape": [1, 3], "parameters": {"binary_data_size": 24}},
    {"name": "lengths", "datatype": "INT32", "shape": [1], "parameters": {"binary_data_size": 4}}],
    "binary_data_output": True}, struct.pack("<3qi", 1, 2, 3, 2))
binary("mixed", {"inputs": [
    {"name": "input", "datatype": "FP16", "shape": [1, 1, 3], "parameters": {"binary_data_size": 6}},
    {"name": "h0", "datatype": "FP32", "shape": [1, 1, 4], "data": [0, 0, 0, 0]}]},
    struct.pack("<3H", 0x3c00, 0x4000, 0xbc00))

# TF Serving: the first byte picks the config (0 lstm, 1 gru, 2 lstm proj, 3 rnn_relu).
put("tfs", "lstm_rows", b"\x00" + js({"signature_name": "serving_default",
                                       "instances": [[[1, 2, 3]], [[1, 2, 3], [4, 5, 6]]]}).encode())
put("tfs", "lstm_objects", b"\x00" + js({"instances": [
    {"input": [[1, 2, 3]], "h0": [[0, 0, 0, 0]], "c0": [[1, 1, 1, 1]]}]}).encode())
put("tfs", "gru_tokens", b"\x01" + js({"instances": [[1, 2, 3], [4]]}).encode())
put("tfs", "proj_columnar", b"\x02" + js({"inputs": {"input": [[[1, 2], [3, 4]]],
                                                     "lengths": [1]}}).encode())
put("tfs", "rnn_bare", b"\x03" + js({"inputs": [[[1], [2], [3]]]}).encode())

# config.json: the demo's, and one using every optional field.
put("modelcfg", "demo", js({"cell": "lstm", "input_size": 8, "hidden_size": 64,
                            "head": {"units": 10, "activation": "softmax", "apply": "last"},
                            "weights": {"prefix": "rnn.", "head_weight": "fc.weight", "head_bias": "fc.bias"},
                            "max_sequence_length": 64,
                            "batching": {"max_batch_size": 64, "max_queue_delay_us": 200}}))
put("modelcfg", "full", js({
    "cell": "gru", "input_size": 4, "hidden_size": 8, "num_layers": 2, "bidirectional": True,
    "gru_linear_before_reset": False, "embedding": {"num_embeddings": 100, "dim": 4},
    "head": {"units": 3, "activation": "sigmoid", "apply": "all"},
    "weights": {"file": "w.safetensors", "prefix": "m.", "embedding": "emb.weight"},
    "precision": "fp16", "max_sequence_length": 128,
    "batching": {"max_batch_size": 8, "max_queue_delay_us": 0, "max_queue_size": 10,
                 "queue_timeout_us": 5000, "max_batch_steps": 1024, "priority_levels": 3,
                 "default_priority_level": 2},
    "instances": [{"kind": "cpu", "count": 2}, {"kind": "gpu", "count": 1, "gpus": [0]}],
    "sequence": {"idle_timeout_ms": 1000, "max_sequences": 5},
    "version_policy": {"specific": {"versions": [1, 3]}}}))
put("modelcfg", "proj", js({"cell": "lstm", "input_size": 2, "hidden_size": 4, "proj_size": 2,
                            "version_policy": {"latest": {"num_versions": 2}}}))

# Repository API: the first byte picks the call (0 index, 1 load, 2 unload).
put("repo", "index_ready", b"\x00" + js({"ready": True}).encode())
put("repo", "load_params", b"\x01" + js({"parameters": {"config": "{}"}}).encode())
put("repo", "unload_empty", b"\x02")
put("repo", "unload_deps", b"\x02" + js({"parameters": {"unload_dependents": False}}).encode())
put("repo", "shm_register", b"\x03" + js({"key": "/triton_shm", "offset": 64, "byte_size": 4096}).encode())


# Encodings: the first byte picks gzip (odd) or deflate, tensors (2) or text; the rest is an
# Accept-Encoding value and the body compressed and read back.
put("encoding", "curl", b"\x01gzip, deflate, br, zstd")
put("encoding", "qvalues", b"\x02gzip;q=0.5, deflate;q=0.8, identity;q=0, *;q=0.001")
put("encoding", "junk", b"\x03 ,;q=,x-gzip;Q=1.000;level=9,, *")
put("encoding", "numbers", b"\x00" + js({"data": [0.25, -1.5, 3e-07] * 40}).encode())

# safetensors: the LSTM of fuzz_safetensors.c (input 2, hidden 1, a 1-unit head).
def st(tensors, meta=None):
    hdr, raw = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for name, dtype, shape, data in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(raw), len(raw) + len(data)]}
        raw += data
    h = js(hdr).encode()
    return struct.pack("<Q", len(h)) + h + raw


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


lstm = [("rnn.weight_ih_l0", "F32", [4, 2], f32(*[0.1 * i for i in range(8)])),
        ("rnn.weight_hh_l0", "F32", [4, 1], f32(0.5, -0.5, 0.25, 1)),
        ("rnn.bias_ih_l0", "F32", [4], f32(0, 0, 0, 0)),
        ("rnn.bias_hh_l0", "F32", [4], f32(1, 1, 1, 1)),
        ("head.weight", "F32", [1, 1], f32(2)),
        ("head.bias", "F32", [1], f32(-1))]
put("safetensors", "lstm_f32", st(lstm, {"format": "pt"}))
put("safetensors", "lstm_f16_nobias", st([
    ("rnn.weight_ih_l0", "F16", [4, 2], struct.pack("<8H", *([0x3c00] * 8))),
    ("rnn.weight_hh_l0", "BF16", [4, 1], struct.pack("<4H", 0x3f80, 0, 0xbf80, 0x4000)),
    ("head.weight", "F64", [1, 1], struct.pack("<d", 0.5)),
    ("head.bias", "F64", [1], struct.pack("<d", 0))]))
put("safetensors", "ints", st([("a", "I64", [2], struct.pack("<2q", -1, 2)),
                               ("b", "I32", [1, 1], struct.pack("<i", 7)),
                               ("c", "I16", [1], struct.pack("<h", -3)),
                               ("d", "I8", [2], b"\x80\x7f"),
                               ("e", "U8", [0], b""),
                               ("f", "BOOL", [1], b"\x01")]))

# The gRPC messages (fuzz_grpc.c: a selector byte, then the message), made with protobuf's
# own Python library and tritonclient's stubs where they are installed (the venv of
# tests/run.sh: .venv-test/bin/python tests/fuzz/seeds.py); skipped otherwise.
try:
    from tritonclient.grpc import service_pb2 as kpb
except ImportError:
    kpb = None
if kpb is not None:
    rq = kpb.ModelInferRequest(model_name="m", id="r1")
    t = rq.inputs.add(name="input", datatype="FP32", shape=[2, 2, 3])
    t.contents.fp32_contents.extend([0.5, -1, 2, 0, 1e-3, 3.25, 1, 1, 1, -2, 0.125, 7])
    t = rq.inputs.add(name="lengths", datatype="INT64", shape=[2])
    t.contents.int64_contents.extend([1, 2])
    rq.outputs.add(name="h_n")
    rq.parameters["sequence_id"].int64_param = 7
    rq.parameters["sequence_start"].bool_param = True
    put("grpc", "kserve_typed", b"\0" + rq.SerializeToString())
    import gzip
    import zlib
    put("grpc", "kserve_typed_gzip", b"\xfe" + gzip.compress(rq.SerializeToString(), mtime=0))
    put("grpc", "kserve_typed_deflate", b"\xff" + zlib.compress(rq.SerializeToString()))
    rq = kpb.ModelInferRequest(model_name="m")
    rq.inputs.add(name="tokens", datatype="INT32", shape=[1, 3])
    rq.raw_input_contents.append(struct.pack("<3i", 1, 2, 3))
    put("grpc", "kserve_raw_tokens", b"\0" + rq.SerializeToString())
    put("grpc", "config_json", b"\2" + js({"config": {
        "name": "m", "max_batch_size": 8, "input": [{"name": "input", "data_type": "TYPE_FP32",
                                                       "dims": [-1, 3]}],
        "dynamic_batching": {"default_queue_policy": {"timeout_action": "REJECT"}},
        "parameters": {"cell": {"string_value": "lstm"}}}}).encode())
