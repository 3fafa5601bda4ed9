/*
 * infer-grpc.c: KServe v2's and TF Serving's inference messages to and from
 * infer.h's structs (infer-grpc.h).  The messages were unpacked by
 * protobuf-c (pbarena.h); tensor bytes are used where they lie, as the HTTP
 * side uses its binary tensors, and converted only where the wire form is
 * not the tensor's own (TF Serving's half_val, one half per int32).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "infer-grpc.h"
#include "infer-int.h"
#include "strbuf.h"

/*
 * Parameters of a request (the sequence and schedule-policy extensions).
 * triton_enable_empty_final_response is the one triton_ parameter a client
 * may send: Triton's gRPC front end reads it for decoupled models, and
 * perf_analyzer sends it on every request; each of rnnd's answers is
 * final, so it changes nothing.
 */

typedef Inference__InferParameter param_t;

static int param_bool(const param_t *v, bool *dst, const char *path, rnnd_error_t *err)
{
        if (v->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "must be a bool_param");
        *dst = v->bool_param;
        return 0;
}

/* An unsigned value of int64_param (>= 0) or uint64_param. */
static int param_uint(const param_t *v, uint64_t *dst, const char *path, rnnd_error_t *err)
{
        if (v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM) {
                *dst = v->uint64_param;
                return 0;
        }
        if (v->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM ||
            v->int64_param < 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "must be an int64_param of at least 0 or a "
                                              "uint64_param");
        *dst = (uint64_t)v->int64_param;
        return 0;
}

static int param_sequence_id(const param_t *v, struct rnnd_infer_params *q, const char *path,
                             rnnd_error_t *err)
{
        if (v->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
                return param_uint(v, &q->sequence_id, path, err);
        if (strlen(v->string_param) >= sizeof(q->sequence_id_str))
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "longer than %zu bytes",
                                              sizeof(q->sequence_id_str) - 1);
        memcpy(q->sequence_id_str, v->string_param, strlen(v->string_param) + 1);
        return 0;
}

static int param_priority(const param_t *v, int64_t *dst, const char *path, rnnd_error_t *err)
{
        uint64_t u = 0;

        if (v->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM) {
                *dst = v->int64_param;
                return 0;
        }
        if (param_uint(v, &u, path, err) < 0 || u > INT64_MAX)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "must be an integer");
        *dst = (int64_t)u;
        return 0;
}

static int parse_params(Inference__ModelInferRequest__ParametersEntry *const *ps, size_t n,
                        struct rnnd_infer_request *req, rnnd_error_t *err)
{
        struct rnnd_infer_params *q = &req->params;
        char path[PATH_LEN];
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                const char *key = ps[i]->key;
                const param_t *v = ps[i]->value;

                rnnd__infer_pathf(path, "parameters.%.64s", key);
                if (v == NULL)
                        r = rnnd__infer_path_error(err, RNND_EINVAL, path, "has no value");
                else if (strcmp(key, "sequence_id") == 0)
                        r = param_sequence_id(v, q, path, err);
                else if (strcmp(key, "sequence_start") == 0)
                        r = param_bool(v, &q->sequence_start, path, err);
                else if (strcmp(key, "sequence_end") == 0)
                        r = param_bool(v, &q->sequence_end, path, err);
                else if (strcmp(key, "priority") == 0)
                        r = param_priority(v, &q->priority, path, err);
                else if (strcmp(key, "timeout") == 0)
                        r = param_uint(v, &q->timeout_us, path, err);
                else if (strcmp(key, "triton_enable_empty_final_response") == 0)
                        r = param_bool(v, &(bool){false}, path, err); /* see below */
                else if (strcmp(key, "headers") == 0 || strncmp(key, "triton_", 7) == 0)
                        r = rnnd__infer_path_error(err, RNND_EINVAL, path,
                                                   "reserved parameter name");
                /* Other parameters (binary_data_output among them) are accepted. */
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Tensors. */

/* A tensor name into dst (non-empty, shorter than RNND_INFER_NAME_MAX). */
static int tensor_name(const char *name, char *dst, const char *path, rnnd_error_t *err)
{
        if (name[0] == '\0')
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "missing");
        if (strlen(name) >= RNND_INFER_NAME_MAX)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "longer than %d bytes",
                                              RNND_INFER_NAME_MAX - 1);
        memcpy(dst, name, strlen(name) + 1);
        return 0;
}

/*
 * One of a tensor's parameters (path the tensor's): the shared memory ones
 * (Triton's extension) into ref, their bit added to *seen.  Triton's
 * classification (class_count: the top classes as strings) asks for what
 * rnnd does not serve: refused with HTTP's words (infer-kserve.c), where it
 * was ignored and the client got other data than it asked for.  Others are
 * ignored.
 */
static int tensor_param(const char *key, const param_t *v, struct rnnd_shm_ref *ref, unsigned *seen,
                        const char *path, rnnd_error_t *err)
{
        char sub[PATH_LEN];
        int k;

        if (key == NULL) /* never from protobuf-c; said for gcc's -fsanitize builds */
                return 0;
        rnnd__infer_pathf(sub, "%s.parameters.%.64s", path, key);
        if (strcmp(key, "classification") == 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "not supported");
        k = rnnd__infer_shm_key(key);
        if (k == 0)
                return 0;
        if (k < 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub,
                                              "unknown shared memory parameter");
        if (v == NULL)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "has no value");
        *seen |= (unsigned)k;
        if (k != RNND__SHM_REGION)
                return param_uint(v, k == RNND__SHM_OFFSET ? &ref->offset : &ref->byte_size, sub,
                                  err);
        if (v->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM ||
            v->string_param[0] == '\0')
                return rnnd__infer_path_error(err, RNND_EINVAL, sub,
                                              "must be a non-empty string_param");
        if (strlen(v->string_param) >= sizeof(ref->region))
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "longer than %zu bytes",
                                              sizeof(ref->region) - 1);
        memcpy(ref->region, v->string_param, strlen(v->string_param) + 1);
        return 0;
}

/* Whether input in names a shared memory region (its raw_input_contents has no entry). */
static bool input_in_shm(const Inference__ModelInferRequest__InferInputTensor *in)
{
        for (size_t k = 0; k < in->n_parameters; k++)
                if (in->parameters[k]->key != NULL &&
                    strcmp(in->parameters[k]->key, "shared_memory_region") == 0)
                        return true;
        return false;
}

/* t's dtype and shape from signed dims; checked against the element limit. */
static int tensor_shape(struct rnnd_tensor *t, rnnd_dtype_t dt, const int64_t *dims, size_t ndim,
                        const struct rnnd_infer_limits *lim, const char *path, rnnd_error_t *err)
{
        uint64_t shape[RNND_MAX_DIMS];

        if (ndim > RNND_MAX_DIMS)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "more than %d dimensions",
                                              RNND_MAX_DIMS);
        for (size_t d = 0; d < ndim; d++) {
                if (dims[d] < 0)
                        return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                                      "dimension %zu is %" PRId64 ", below 0", d,
                                                      dims[d]);
                shape[d] = (uint64_t)dims[d];
        }
        return rnnd__infer_set_shape(t, dt, shape, (unsigned)ndim, lim, path, err);
}

/* t's data from a typed array of n elements of elt bytes each, used in place. */
static int take_typed(struct rnnd_tensor *t, const void *data, size_t n, const char *path,
                      rnnd_error_t *err)
{
        if (n != t->numel)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "%zu values, but the shape holds %" PRIu64, n,
                                              t->numel);
        t->data = t->numel > 0 ? (void *)(uintptr_t)data : NULL;
        return 0;
}

/* t's data from raw bytes, used in place when aligned for its dtype, else copied. */
static int take_raw(struct rnnd_tensor *t, const ProtobufCBinaryData *b, const char *path,
                    rnnd_error_t *err)
{
        char s[SHAPE_LEN];
        int r;

        if (b->len != t->nbytes)
                return rnnd__infer_path_error(
                        err, RNND_EINVAL, path, "%zu bytes, but %s %s takes %zu", b->len,
                        rnnd_dtype_name(t->dtype),
                        rnnd_shape_format(s, SHAPE_LEN, t->shape, t->ndim), t->nbytes);
        if (b->len == 0)
                return 0;
        if ((uintptr_t)b->data % rnnd_dtype_size(t->dtype) == 0) {
                t->data = b->data;
                return 0;
        }
        r = rnnd__infer_alloc_data(t, err);
        if (r == 0)
                memcpy(t->data, b->data, b->len);
        return r;
}

/* Typed contents of a KServe input: the field its datatype reads. */
static int kserve_contents(struct rnnd_tensor *t, const Inference__InferTensorContents *c,
                           const char *path, rnnd_error_t *err)
{
        char sub[PATH_LEN];

        if (c == NULL)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "has no contents (and the request no "
                                              "raw_input_contents)");
        switch (t->dtype) {
        case RNND_DT_F32:
                rnnd__infer_pathf(sub, "%s.contents.fp32_contents", path);
                return take_typed(t, c->fp32_contents, c->n_fp32_contents, sub, err);
        case RNND_DT_I32:
                rnnd__infer_pathf(sub, "%s.contents.int_contents", path);
                return take_typed(t, c->int_contents, c->n_int_contents, sub, err);
        case RNND_DT_I64:
                rnnd__infer_pathf(sub, "%s.contents.int64_contents", path);
                return take_typed(t, c->int64_contents, c->n_int64_contents, sub, err);
        default:
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "%s has no typed contents rnnd reads: send it in "
                                              "raw_input_contents",
                                              rnnd_dtype_name(t->dtype));
        }
}

/* Input i of m into t; raw: its raw_input_contents entry, or NULL when it has none. */
static int kserve_input(const Inference__ModelInferRequest *m, size_t i,
                        const ProtobufCBinaryData *raw, const struct rnnd_infer_limits *lim,
                        struct rnnd_tensor *t, struct rnnd_shm_ref *ref, rnnd_error_t *err)
{
        const Inference__ModelInferRequest__InferInputTensor *in = m->inputs[i];
        char path[PATH_LEN], sub[PATH_LEN];
        unsigned seen = 0;
        bool has_contents;
        rnnd_dtype_t dt;
        int r;

        rnnd__infer_pathf(path, "inputs[%zu]", i);
        rnnd__infer_pathf(sub, "%s.name", path);
        r = tensor_name(in->name, t->name, sub, err);
        for (size_t k = 0; r == 0 && k < in->n_parameters; k++)
                r = tensor_param(in->parameters[k]->key, in->parameters[k]->value, ref, &seen, path,
                                 err);
        rnnd__infer_pathf(sub, "%s.parameters", path);
        if (r == 0)
                r = rnnd__infer_shm_done(seen, sub, err);
        if (r < 0)
                return r;
        rnnd__infer_pathf(sub, "%s.datatype", path);
        dt = rnnd_dtype_from_name(in->datatype);
        if (dt == RNND_DT_BYTES) /* HTTP's words (infer-kserve.c) */
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "BYTES is not supported");
        if (dt == RNND_DT_INVALID)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "unknown datatype \"%.32s\"",
                                              in->datatype);
        rnnd__infer_pathf(sub, "%s.shape", path);
        r = tensor_shape(t, dt, in->shape, in->n_shape, lim, sub, err);
        if (r < 0)
                return r;
        has_contents =
                in->contents != NULL && protobuf_c_message_get_packed_size(&in->contents->base) > 0;
        if (ref->region[0] != '\0')
                return rnnd__infer_shm_input(t, ref, has_contents, path, err);
        if (raw == NULL)
                return kserve_contents(t, in->contents, path, err);
        if (has_contents)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "has contents, but the request carries "
                                              "raw_input_contents");
        rnnd__infer_pathf(sub, "raw_input_contents[%zu]", (size_t)(raw - m->raw_input_contents));
        return take_raw(t, raw, sub, err);
}

static int kserve_outputs(const Inference__ModelInferRequest *m, struct rnnd_infer_request *req,
                          rnnd_error_t *err)
{
        char sub[PATH_LEN], params[PATH_LEN];
        int r;

        if (m->n_outputs > RNND_INFER_MAX_TENSORS)
                return rnnd__infer_path_error(err, RNND_EINVAL, "outputs", "more than %d tensors",
                                              RNND_INFER_MAX_TENSORS);
        req->outputs_given = m->n_outputs > 0;
        for (size_t i = 0; i < m->n_outputs; i++) {
                const Inference__ModelInferRequest__InferRequestedOutputTensor *o = m->outputs[i];
                struct rnnd_requested_output *ro = &req->outputs[i];
                unsigned seen = 0;

                rnnd__infer_pathf(sub, "outputs[%zu].name", i);
                r = tensor_name(o->name, ro->name, sub, err);
                rnnd__infer_pathf(sub, "outputs[%zu]", i);
                for (size_t k = 0; r == 0 && k < o->n_parameters; k++)
                        r = tensor_param(o->parameters[k]->key, o->parameters[k]->value, &ro->shm,
                                         &seen, sub, err);
                rnnd__infer_pathf(params, "%s.parameters", sub);
                if (r == 0)
                        r = rnnd__infer_shm_done(seen, params, err);
                if (r < 0)
                        return r;
                req->n_outputs = (unsigned)i + 1;
        }
        return 0;
}

static int kserve_request(const Inference__ModelInferRequest *m,
                          const struct rnnd_infer_limits *lim, struct rnnd_infer_request *req,
                          rnnd_error_t *err)
{
        size_t plain = 0;
        int r;

        if (strlen(m->id) >= RNND_INFER_ID_MAX)
                return rnnd__infer_path_error(err, RNND_EINVAL, "id", "longer than %d bytes",
                                              RNND_INFER_ID_MAX - 1);
        req->has_id = m->id[0] != '\0';
        memcpy(req->id, m->id, strlen(m->id) + 1);
        r = parse_params(m->parameters, m->n_parameters, req, err);
        if (r < 0)
                return r;
        /* No inputs is HTTP's "inputs": []: binding names the missing one (infer-bind.c). */
        if (m->n_inputs > RNND_INFER_MAX_TENSORS)
                return rnnd__infer_path_error(err, RNND_EINVAL, "inputs", "more than %d tensors",
                                              RNND_INFER_MAX_TENSORS);
        /* Inputs in shared memory have no entry (Triton's way, tritonclient's too). */
        for (size_t i = 0; i < m->n_inputs; i++)
                plain += !input_in_shm(m->inputs[i]);
        if (m->n_raw_input_contents > 0 && m->n_raw_input_contents != plain)
                return rnnd__infer_path_error(err, RNND_EINVAL, "raw_input_contents",
                                              "%zu entries for %zu inputs not in shared memory: "
                                              "one per input, in order",
                                              m->n_raw_input_contents, plain);
        for (size_t i = 0, j = 0; i < m->n_inputs; i++) {
                const ProtobufCBinaryData *raw = NULL;

                if (m->n_raw_input_contents > 0 && !input_in_shm(m->inputs[i]))
                        raw = &m->raw_input_contents[j++];
                req->n_inputs = (unsigned)i + 1; /* counted first, to be freed on failure */
                r = kserve_input(m, i, raw, lim, &req->inputs[i], &req->input_shm[i], err);
                if (r < 0)
                        return r;
        }
        return kserve_outputs(m, req, err);
}

int rnnd_grpc_kserve_parse(const Inference__ModelInferRequest *m,
                           const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                           rnnd_error_t *reterr)
{
        struct rnnd_infer_limits buf;
        struct rnnd_infer_request req;

        memset(&req, 0, sizeof(req));
        req.format = RNND_FMT_KSERVE;
        return rnnd__infer_parsed(kserve_request(m, rnnd__infer_limits(limits, &buf), &req, reterr),
                                  &req, NULL, ret);
}

/* Responses. */

static int nomem(rnnd_error_t *err)
{
        return rnnd__infer_nomem(err, "a response message");
}

/* t's shape as int64s in a. */
static int64_t *shape_of(struct rnnd_pbarena *a, const struct rnnd_tensor *t)
{
        int64_t *s = rnnd_pbarena_alloc(a, t->ndim * sizeof(int64_t));

        for (unsigned d = 0; s != NULL && d < t->ndim; d++)
                s[d] = (int64_t)t->shape[d];
        return s;
}

static int kserve_output(struct rnnd_pbarena *a, const struct rnnd_tensor *t,
                         Inference__ModelInferResponse__InferOutputTensor **ret)
{
        Inference__ModelInferResponse__InferOutputTensor *o = rnnd_pbarena_alloc(a, sizeof(*o));

        if (o == NULL)
                return RNND_ENOMEM;
        inference__model_infer_response__infer_output_tensor__init(o);
        o->name = rnnd_pbarena_strndup(a, t->name, strlen(t->name));
        o->datatype = (char *)rnnd_dtype_name(t->dtype);
        o->n_shape = t->ndim;
        o->shape = shape_of(a, t);
        *ret = o;
        return o->name != NULL && o->shape != NULL ? 0 : RNND_ENOMEM;
}

/* "1" for version 1, "" for 0, in a; NULL out of memory. */
static char *version_text(struct rnnd_pbarena *a, uint64_t version)
{
        char v[24] = "";
        struct rnnd_strbuf b;

        rnnd_strbuf_init_fixed(&b, v, sizeof(v)); /* no printf a call (docs/DESIGN.md §11) */
        if (version > 0)
                rnnd_strbuf_put_u64(&b, version);
        return rnnd_pbarena_strndup(a, v, strlen(v));
}

int rnnd_grpc_kserve_render(struct rnnd_pbarena *a, const char *model, uint64_t version,
                            const char *id, const struct rnnd_infer_outputs *o,
                            Inference__ModelInferResponse **ret, rnnd_error_t *reterr)
{
        Inference__ModelInferResponse *m = rnnd_pbarena_alloc(a, sizeof(*m));

        if (m == NULL)
                return nomem(reterr);
        inference__model_infer_response__init(m);
        m->model_name = rnnd_pbarena_strndup(a, model, strlen(model));
        m->model_version = version_text(a, version);
        if (id != NULL)
                m->id = rnnd_pbarena_strndup(a, id, strlen(id));
        m->outputs = rnnd_pbarena_alloc(a, o->n * sizeof(*m->outputs));
        m->raw_output_contents = rnnd_pbarena_alloc(a, o->n * sizeof(*m->raw_output_contents));
        if (m->model_name == NULL || m->model_version == NULL || m->id == NULL ||
            m->outputs == NULL || m->raw_output_contents == NULL)
                return nomem(reterr);
        for (unsigned i = 0; i < o->n; i++) {
                if (kserve_output(a, &o->t[i], &m->outputs[i]) < 0)
                        return nomem(reterr);
                /* In a region (as HTTP's JSON says it): an empty entry keeps the others' places. */
                m->raw_output_contents[i].len = o->shm[i] != NULL ? 0 : o->t[i].nbytes;
                m->raw_output_contents[i].data = o->shm[i] != NULL ? NULL : o->t[i].data;
        }
        m->n_outputs = o->n;
        m->n_raw_output_contents = o->n;
        *ret = m;
        return 0;
}

/* TF Serving. */

/* DT_HALF's half_val: one half per int32, widened into a buffer of t's own. */
static int take_halves(struct rnnd_tensor *t, const int32_t *v, size_t n, const char *path,
                       rnnd_error_t *err)
{
        uint16_t *h;
        int r;

        if (n != t->numel)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "%zu values, but the shape holds %" PRIu64, n,
                                              t->numel);
        r = rnnd__infer_alloc_data(t, err);
        for (size_t i = 0; r == 0 && i < n; i++) {
                h = t->data;
                h[i] = (uint16_t)v[i];
        }
        return r;
}

/* The values of a TensorProto: tensor_content, else the field its dtype reads. */
static int tfs_values(struct rnnd_tensor *t, const Tensorflow__TensorProto *p, const char *path,
                      rnnd_error_t *err)
{
        char sub[PATH_LEN];

        if (p->tensor_content.len > 0) {
                rnnd__infer_pathf(sub, "%s.tensor_content", path);
                return take_raw(t, &p->tensor_content, sub, err);
        }
        switch (p->dtype) {
        case TENSORFLOW__DATA_TYPE__DT_FLOAT:
                rnnd__infer_pathf(sub, "%s.float_val", path);
                return take_typed(t, p->float_val, p->n_float_val, sub, err);
        case TENSORFLOW__DATA_TYPE__DT_HALF:
                rnnd__infer_pathf(sub, "%s.half_val", path);
                return take_halves(t, p->half_val, p->n_half_val, sub, err);
        case TENSORFLOW__DATA_TYPE__DT_INT32:
                rnnd__infer_pathf(sub, "%s.int_val", path);
                return take_typed(t, p->int_val, p->n_int_val, sub, err);
        default:
                rnnd__infer_pathf(sub, "%s.int64_val", path);
                return take_typed(t, p->int64_val, p->n_int64_val, sub, err);
        }
}

/*
 * The error for a TensorProto dtype rnnd does not take, named as TensorFlow
 * names it: numpy's default float64 through tf.make_tensor_proto is
 * DT_DOUBLE, which a bare 2 would not tell its sender.
 */
static int refuse_tf_dtype(int dtype, const char *path, rnnd_error_t *err)
{
        const ProtobufCEnumValue *v =
                protobuf_c_enum_descriptor_get_value(&tensorflow__data_type__descriptor, dtype);

        return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                      "%s (%d) is not DT_FLOAT, DT_HALF, DT_INT32 or DT_INT64",
                                      v != NULL ? v->name : "unknown", dtype);
}

static int tfs_input(const Tensorflow__Serving__PredictRequest__InputsEntry *e,
                     const struct rnnd_infer_limits *lim, struct rnnd_tensor *t, rnnd_error_t *err)
{
        const Tensorflow__TensorProto *p = e->value;
        const Tensorflow__TensorShapeProto *s;
        int64_t dims[RNND_MAX_DIMS];
        char path[PATH_LEN], sub[PATH_LEN];
        rnnd_dtype_t dt;
        int r;

        rnnd__infer_pathf(path, "inputs[\"%.64s\"]", e->key);
        r = tensor_name(e->key, t->name, path, err);
        if (r < 0)
                return r;
        if (p == NULL)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "has no tensor");
        rnnd__infer_pathf(sub, "%s.dtype", path);
        dt = p->dtype == TENSORFLOW__DATA_TYPE__DT_FLOAT   ? RNND_DT_F32
             : p->dtype == TENSORFLOW__DATA_TYPE__DT_HALF  ? RNND_DT_F16
             : p->dtype == TENSORFLOW__DATA_TYPE__DT_INT32 ? RNND_DT_I32
             : p->dtype == TENSORFLOW__DATA_TYPE__DT_INT64 ? RNND_DT_I64
                                                           : RNND_DT_INVALID;
        if (dt == RNND_DT_INVALID)
                return refuse_tf_dtype(p->dtype, sub, err);
        rnnd__infer_pathf(sub, "%s.tensor_shape", path);
        s = p->tensor_shape;
        if (s == NULL || s->unknown_rank)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "missing or of unknown rank");
        if (s->n_dim > RNND_MAX_DIMS)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "more than %d dimensions",
                                              RNND_MAX_DIMS);
        for (size_t d = 0; d < s->n_dim; d++)
                dims[d] = s->dim[d]->size;
        r = tensor_shape(t, dt, dims, s->n_dim, lim, sub, err);
        return r < 0 ? r : tfs_values(t, p, path, err);
}

static int tfs_request(const Tensorflow__Serving__PredictRequest *m,
                       const struct rnnd_infer_limits *lim, struct rnnd_infer_request *req,
                       rnnd_error_t *err)
{
        const char *sig = m->model_spec != NULL ? m->model_spec->signature_name : "";
        char sub[PATH_LEN];
        int r;

        if (sig[0] != '\0' && strcmp(sig, "serving_default") != 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, "model_spec.signature_name",
                                              "\"%.64s\" is not a signature of this model: it "
                                              "has serving_default",
                                              sig);
        if (m->n_inputs == 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, "inputs", "missing");
        if (m->n_inputs > RNND_INFER_MAX_TENSORS || m->n_output_filter > RNND_INFER_MAX_TENSORS)
                return rnnd__infer_path_error(
                        err, RNND_EINVAL,
                        m->n_inputs > RNND_INFER_MAX_TENSORS ? "inputs" : "output_filter",
                        "more than %d tensors", RNND_INFER_MAX_TENSORS);
        for (size_t i = 0; i < m->n_inputs; i++) {
                req->n_inputs = (unsigned)i + 1;
                r = tfs_input(m->inputs[i], lim, &req->inputs[i], err);
                if (r < 0)
                        return r;
        }
        req->outputs_given = m->n_output_filter > 0;
        for (size_t i = 0; i < m->n_output_filter; i++) {
                rnnd__infer_pathf(sub, "output_filter[%zu]", i);
                r = tensor_name(m->output_filter[i], req->outputs[i].name, sub, err);
                if (r < 0)
                        return r;
                req->n_outputs = (unsigned)i + 1;
        }
        return 0;
}

int rnnd_grpc_tfs_parse(const Tensorflow__Serving__PredictRequest *m,
                        const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                        rnnd_error_t *reterr)
{
        struct rnnd_infer_limits buf;
        struct rnnd_infer_request req;

        memset(&req, 0, sizeof(req));
        req.format = RNND_FMT_TFS_COLUMNAR;
        return rnnd__infer_parsed(tfs_request(m, rnnd__infer_limits(limits, &buf), &req, reterr),
                                  &req, NULL, ret);
}

/* One output as a DT_FLOAT TensorProto whose tensor_content is t's data. */
static Tensorflow__Serving__PredictResponse__OutputsEntry *tfs_output(struct rnnd_pbarena *a,
                                                                      const struct rnnd_tensor *t)
{
        Tensorflow__Serving__PredictResponse__OutputsEntry *e = rnnd_pbarena_alloc(a, sizeof(*e));
        Tensorflow__TensorProto *p = rnnd_pbarena_alloc(a, sizeof(*p));
        Tensorflow__TensorShapeProto *s = rnnd_pbarena_alloc(a, sizeof(*s));
        Tensorflow__TensorShapeProto__Dim *dims = rnnd_pbarena_alloc(a, t->ndim * sizeof(*dims));
        Tensorflow__TensorShapeProto__Dim **dimp = rnnd_pbarena_alloc(a, t->ndim * sizeof(*dimp));

        if (e == NULL || p == NULL || s == NULL || dims == NULL || dimp == NULL)
                return NULL;
        tensorflow__serving__predict_response__outputs_entry__init(e);
        tensorflow__tensor_proto__init(p);
        tensorflow__tensor_shape_proto__init(s);
        for (unsigned d = 0; d < t->ndim; d++) {
                tensorflow__tensor_shape_proto__dim__init(&dims[d]);
                dims[d].size = (int64_t)t->shape[d];
                dimp[d] = &dims[d];
        }
        s->n_dim = t->ndim;
        s->dim = dimp;
        p->dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
        p->tensor_shape = s;
        p->tensor_content.len = t->nbytes;
        p->tensor_content.data = t->data;
        e->key = rnnd_pbarena_strndup(a, t->name, strlen(t->name));
        e->value = p;
        return e->key != NULL ? e : NULL;
}

int rnnd_grpc_tfs_render(struct rnnd_pbarena *a, const char *model, uint64_t version,
                         const struct rnnd_infer_outputs *o,
                         Tensorflow__Serving__PredictResponse **ret, rnnd_error_t *reterr)
{
        Tensorflow__Serving__PredictResponse *m = rnnd_pbarena_alloc(a, sizeof(*m));
        Tensorflow__Serving__ModelSpec *spec = rnnd_pbarena_alloc(a, sizeof(*spec));
        Google__Protobuf__Int64Value *v = rnnd_pbarena_alloc(a, sizeof(*v));

        if (m == NULL || spec == NULL || v == NULL)
                return nomem(reterr);
        tensorflow__serving__predict_response__init(m);
        tensorflow__serving__model_spec__init(spec);
        google__protobuf__int64_value__init(v);
        v->value = (int64_t)version;
        spec->name = rnnd_pbarena_strndup(a, model, strlen(model));
        spec->signature_name = "serving_default";
        spec->version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
        spec->version = v;
        m->model_spec = spec;
        m->outputs = rnnd_pbarena_alloc(a, o->n * sizeof(*m->outputs));
        if (spec->name == NULL || m->outputs == NULL)
                return nomem(reterr);
        for (unsigned i = 0; i < o->n; i++)
                if ((m->outputs[i] = tfs_output(a, &o->t[i])) == NULL)
                        return nomem(reterr);
        m->n_outputs = o->n;
        *ret = m;
        return 0;
}
