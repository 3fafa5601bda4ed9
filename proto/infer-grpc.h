/*
 * infer-grpc.h: the inference messages of the gRPC front end (docs/DESIGN.md
 * §11, docs/HTTP.md "gRPC") to and from the native structs of infer.h: KServe
 * v2's ModelInferRequest and ModelInferResponse, TF Serving's PredictRequest
 * and PredictResponse.  Pure functions, as infer.h's.
 *
 * Lifetimes: a request parsed here borrows the message's tensor bytes (the
 * arena it was unpacked in must outlive the request and its binding); a
 * response built here lives in the given arena and points at the outputs'
 * data, so the outputs must outlive its packing.
 */
#ifndef RNND_PROTO_INFER_GRPC_H
#define RNND_PROTO_INFER_GRPC_H

#include "infer.h"
#include "kserve.pb-c.h"
#include "pbarena.h"
#include "tfs_apis.pb-c.h"

/*
 * A ModelInferRequest (model_name and model_version are the caller's) into
 * *ret: id, parameters (sequence_id, sequence_start, sequence_end, priority,
 * timeout as the JSON parameters of docs/HTTP.md), inputs with typed
 * contents (FP32 fp32_contents, INT32 int_contents, INT64 int64_contents) or
 * raw_input_contents (one entry per input, in order, of exactly the shape's
 * bytes), and requested outputs.  Errors: RNND_EINVAL, RNND_ELIMIT, naming
 * the field ("inputs[1].shape", "raw_input_contents[0]"); RNND_ENOMEM.
 * Never writes *ret on failure.  Thread-safe.
 */
int rnnd_grpc_kserve_parse(const Inference__ModelInferRequest *m,
                           const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                           rnnd_error_t *reterr);

/*
 * The ModelInferResponse of o: model_name, model_version (omitted when 0),
 * id (when not NULL), each output's name, FP32 and shape, and its bytes in
 * raw_output_contents (as Triton answers).  Built in a; *ret points at o's
 * data.  Errors: RNND_ENOMEM.  Thread-safe.
 */
int rnnd_grpc_kserve_render(struct rnnd_pbarena *a, const char *model, uint64_t version,
                            const char *id, const struct rnnd_infer_outputs *o,
                            Inference__ModelInferResponse **ret, rnnd_error_t *reterr);

/*
 * A PredictRequest into *ret, as TF Serving's columnar REST form: each
 * inputs entry a tensor by name (dtype DT_FLOAT, DT_HALF, DT_INT32 or
 * DT_INT64; tensor_shape's dims; tensor_content, or float_val, half_val,
 * int_val or int64_val of exactly the shape's elements); output_filter the
 * outputs asked for.  model_spec.signature_name must be empty or
 * "serving_default".  Same errors and lifetimes as rnnd_grpc_kserve_parse().
 */
int rnnd_grpc_tfs_parse(const Tensorflow__Serving__PredictRequest *m,
                        const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                        rnnd_error_t *reterr);

/*
 * The PredictResponse of o: model_spec (name, version, "serving_default")
 * and each output as a DT_FLOAT TensorProto with its shape and
 * tensor_content.  Same lifetimes and errors as rnnd_grpc_kserve_render().
 */
int rnnd_grpc_tfs_render(struct rnnd_pbarena *a, const char *model, uint64_t version,
                         const struct rnnd_infer_outputs *o,
                         Tensorflow__Serving__PredictResponse **ret, rnnd_error_t *reterr);

#endif
