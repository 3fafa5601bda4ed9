/*
 * infer-bind.c: a parsed request bound to a model's config (infer.h): each
 * input checked against the shape and dtype the config implies, with one
 * shape checker (check_shape), lengths and states resolved, outputs chosen;
 * and the output tensors allocated for a bound request.
 */
#include <assert.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "infer-int.h"
#include "strbuf.h"

/* The model's inputs, as bind knows them. */
enum in_kind { IN_INPUT, IN_TOKENS, IN_LENGTHS, IN_H0, IN_C0, IN_COUNT };
static const char *const in_names[IN_COUNT] = {"input", "tokens", "lengths", "h0", "c0"};

#define DIM_B UINT64_MAX       /* in a wanted shape: any B (printed "B") */
#define DIM_T (UINT64_MAX - 1) /* any T (printed "T") */

/* The one shape checker: t against want, where DIM_B / DIM_T match anything. */
static int check_shape(const struct rnnd_tensor *t, const uint64_t *want, unsigned n,
                       rnnd_error_t *err)
{
        char got[SHAPE_LEN], exp[SHAPE_LEN];
        size_t off = 0;
        bool ok = t->ndim == n;

        for (unsigned i = 0; ok && i < n; i++)
                ok = want[i] >= DIM_T || t->shape[i] == want[i];
        if (ok)
                return 0;
        exp[off++] = '[';
        for (unsigned i = 0; i < n; i++) {
                const char *sep = i ? ", " : "";

                if (want[i] == DIM_B)
                        off += (size_t)snprintf(exp + off, sizeof(exp) - off, "%sB", sep);
                else if (want[i] == DIM_T)
                        off += (size_t)snprintf(exp + off, sizeof(exp) - off, "%sT", sep);
                else
                        off += (size_t)snprintf(exp + off, sizeof(exp) - off, "%s%" PRIu64, sep,
                                                want[i]);
        }
        snprintf(exp + off, sizeof(exp) - off, "]");
        return rnnd_error_set(err, RNND_EINVAL, "input '%s': shape %s does not match %s", t->name,
                              rnnd_shape_format(got, SHAPE_LEN, t->shape, t->ndim), exp);
}

static int check_dtype(const struct rnnd_tensor *t, rnnd_dtype_t a, rnnd_dtype_t b,
                       rnnd_error_t *err)
{
        if (t->dtype == a || t->dtype == b)
                return 0;
        return rnnd_error_set(err, RNND_EINVAL, "input '%s': datatype %s not accepted (%s or %s)",
                              t->name, rnnd_dtype_name(t->dtype), rnnd_dtype_name(a),
                              rnnd_dtype_name(b));
}

/* Element i of an INT32 or INT64 tensor. */
static int64_t int_at(const struct rnnd_tensor *t, size_t i)
{
        if (t->dtype == RNND_DT_I32) {
                int32_t v;

                memcpy(&v, (const char *)t->data + i * 4, 4);
                return v;
        }
        return ((const int64_t *)t->data)[i];
}

/* t (FP32 or FP16) as float32: in place, or converted into a new buffer kept in *owned. */
static int as_f32(const struct rnnd_tensor *t, void **owned, const float **ret, rnnd_error_t *err)
{
        const float *x = t->data;

        if (t->dtype == RNND_DT_F16) {
                const uint16_t *h = t->data;
                float *f = rnnd_mallocarray(t->numel, sizeof(float));

                if (f == NULL)
                        return rnnd__infer_nomem(err, "an FP16 input");
                for (size_t i = 0; i < t->numel; i++)
                        f[i] = rnnd_f16_to_f32(h[i]);
                *owned = f;
                x = f;
        }
        for (size_t i = 0; i < t->numel; i++)
                if (!isfinite(x[i]))
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "input '%s': element %zu is not finite", t->name, i);
        *ret = x;
        return 0;
}

/* B or T from the main input's shape, checked against 1..max. */
static int check_dim(const struct rnnd_tensor *t, uint64_t v, uint32_t max, const char *what,
                     const char *field, uint32_t *ret, rnnd_error_t *err)
{
        if (v == 0 || v > max)
                return rnnd_error_set(err, v == 0 ? RNND_EINVAL : RNND_ELIMIT,
                                      "input '%s': %s %" PRIu64 " is outside 1..%" PRIu32 " (%s)",
                                      t->name, what, v, max, field);
        *ret = (uint32_t)v;
        return 0;
}

/* "gru", or for a chain "a chain without an LSTM block", for messages. */
static const char *cell_words(const struct rnnd_model_config *cfg)
{
        return cfg->n_blocks > 1 ? "a chain without an LSTM block" : rnnd_cell_name(cfg->cell);
}

static int bind_outputs(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg,
                        struct rnnd_infer_bound *b, rnnd_error_t *err)
{
        bool has[RNND_OUT_COUNT] = {true, true, rnnd_modelcfg_has_lstm(cfg), cfg->head.present};

        if (!req->outputs_given || req->n_outputs == 0) {
                for (unsigned k = 0; k < RNND_OUT_COUNT; k++) {
                        if (!has[k])
                                continue;
                        b->out[b->n_out++] = (rnnd_infer_output_t)k;
                        b->want[k] = true;
                        b->binary[k] = req->binary_data_output;
                }
                return 0;
        }
        for (unsigned i = 0; i < req->n_outputs; i++) {
                const struct rnnd_requested_output *ro = &req->outputs[i];
                unsigned k = 0;

                while (k < RNND_OUT_COUNT && strcmp(rnnd_infer_output_name(k), ro->name) != 0)
                        k++;
                if (k == RNND_OUT_COUNT)
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "output '%s' is not an output of this model "
                                              "(output, h_n%s%s)",
                                              ro->name, has[RNND_OUT_C_N] ? ", c_n" : "",
                                              has[RNND_OUT_SCORES] ? ", scores" : "");
                if (k == RNND_OUT_C_N && !has[k])
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "output 'c_n': only LSTM models have c_n (this "
                                              "model is %s)",
                                              cell_words(cfg));
                if (k == RNND_OUT_SCORES && !has[k])
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "output 'scores': this model has no head");
                if (b->want[k])
                        return rnnd_error_set(err, RNND_EINVAL, "output '%s' is requested twice",
                                              ro->name);
                b->out[b->n_out++] = (rnnd_infer_output_t)k;
                b->want[k] = true;
                /*
                 * One written to a region is not in the answer, but its tensor is
                 * held: max_response_bytes counts it as a binary output.
                 */
                b->binary[k] = ro->binary || ro->shm.region[0] != '\0';
        }
        return 0;
}

/*
 * The sequence extension's parameters (docs/HTTP.md): only a model with a
 * "sequence" block in its config.json serves them, never a bidirectional
 * one (its backward direction needs the whole sequence); elsewhere such a
 * request is refused rather than answered as a stateless one.  A sequence
 * request needs its id and holds one sequence (checked once B is known).
 * The one place that decides it.
 */
static int check_sequence_params(const struct rnnd_infer_params *q,
                                 const struct rnnd_model_config *cfg, rnnd_error_t *err)
{
        const char *name = q->sequence_id != 0 || q->sequence_id_str[0] != '\0' ? "sequence_id"
                           : q->sequence_start                                  ? "sequence_start"
                           : q->sequence_end                                    ? "sequence_end"
                                                                                : NULL;

        if (name == NULL)
                return 0;
        if (!cfg->sequence.present)
                return rnnd_error_set(err, RNND_EINVAL,
                                      "parameters.%s: this model does not support sequences (its "
                                      "config.json has no \"sequence\" block; every request is "
                                      "stateless: send each sequence whole, with h0/c0 to carry "
                                      "state)",
                                      name);
        if (rnnd_modelcfg_has_bidirectional(cfg))
                return rnnd_error_set(
                        err, RNND_EINVAL,
                        "parameters.%s: a bidirectional model cannot take a sequence "
                        "in chunks (its backward direction needs the whole sequence): "
                        "send each sequence whole",
                        name);
        if (q->sequence_id == 0 && q->sequence_id_str[0] == '\0')
                return rnnd_error_set(err, RNND_EINVAL,
                                      "parameters.sequence_id: missing (parameters.%s needs it)",
                                      name);
        return 0;
}

/*
 * Names: each known, each once, and the right main input for the model, into
 * in[] by kind; *x is the main input.
 */
static int bind_names(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg,
                      const struct rnnd_tensor **in, const struct rnnd_tensor **x,
                      rnnd_error_t *reterr)
{
        bool emb = cfg->embedding.present;

        for (unsigned i = 0; i < req->n_inputs; i++) {
                const struct rnnd_tensor *t = &req->inputs[i];
                unsigned k = 0;

                while (k < IN_COUNT && strcmp(in_names[k], t->name) != 0)
                        k++;
                if (k == IN_COUNT)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "input '%s' is not an input of this model (%s, "
                                              "lengths, h0%s)",
                                              t->name, emb ? "tokens" : "input",
                                              rnnd_modelcfg_has_lstm(cfg) ? ", c0" : "");
                if (in[k] != NULL)
                        return rnnd_error_set(reterr, RNND_EINVAL, "input '%s' is given twice",
                                              t->name);
                in[k] = t;
        }
        if (emb && in[IN_INPUT] != NULL)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "input 'input': this model has an embedding; send token ids "
                                      "in 'tokens'");
        if (!emb && in[IN_TOKENS] != NULL)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "input 'tokens': this model has no embedding; send 'input'");
        if (in[IN_C0] != NULL && !rnnd_modelcfg_has_lstm(cfg))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "input 'c0': only LSTM models take c0 (this model is %s)",
                                      cell_words(cfg));
        *x = in[emb ? IN_TOKENS : IN_INPUT];
        if (*x == NULL)
                return emb ? rnnd_error_set(reterr, RNND_EINVAL,
                                            "missing input 'tokens' (INT32 or INT64 [B, T])")
                           : rnnd_error_set(reterr, RNND_EINVAL,
                                            "missing input 'input' (FP32 or FP16 [B, T, %" PRIu32
                                            "])",
                                            cfg->input_size);
        return 0;
}

/* Datatypes, then the main input x's shape, which sets b->B and b->T. */
static int bind_batch(const struct rnnd_model_config *cfg, const struct rnnd_tensor *const *in,
                      const struct rnnd_tensor *x, struct rnnd_infer_bound *b, rnnd_error_t *reterr)
{
        bool emb = cfg->embedding.present;
        uint64_t want[3] = {DIM_B, DIM_T, cfg->input_size};
        int r;

        r = emb ? check_dtype(x, RNND_DT_I32, RNND_DT_I64, reterr)
                : check_dtype(x, RNND_DT_F32, RNND_DT_F16, reterr);
        for (unsigned k = IN_LENGTHS; r == 0 && k < IN_COUNT; k++)
                if (in[k] != NULL)
                        r = k == IN_LENGTHS ? check_dtype(in[k], RNND_DT_I32, RNND_DT_I64, reterr)
                                            : check_dtype(in[k], RNND_DT_F32, RNND_DT_F16, reterr);
        if (r == 0)
                r = check_shape(x, want, emb ? 2 : 3, reterr);
        if (r == 0)
                r = check_dim(x, x->shape[0], cfg->batching.max_batch_size, "batch size",
                              "max_batch_size", &b->B, reterr);
        if (r == 0)
                r = check_dim(x, x->shape[1], cfg->max_sequence_length, "sequence length",
                              "max_sequence_length", &b->T, reterr);
        return r;
}

/* Lengths: the tensor t's (may be NULL), or all T. */
static int bind_lengths(const struct rnnd_tensor *t, struct rnnd_infer_bound *b,
                        rnnd_error_t *reterr)
{
        uint64_t want[2] = {b->B, 1};
        int r;

        b->lengths = rnnd_mallocarray(b->B, sizeof(uint32_t));
        if (b->lengths == NULL)
                return rnnd__infer_nomem(reterr, "lengths");
        for (uint32_t i = 0; i < b->B; i++)
                b->lengths[i] = b->T;
        if (t == NULL)
                return 0;
        /* [B], or [B, 1] as /config's dims [1] with reshape [] give it. */
        r = check_shape(t, want, t->ndim == 2 ? 2 : 1, reterr);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < b->B; i++) {
                int64_t v = int_at(t, i);

                if (v < 1 || v > b->T)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "input 'lengths'[%" PRIu32 "]: %" PRId64
                                              " is outside 1..%" PRIu32,
                                              i, v, b->T);
                b->lengths[i] = (uint32_t)v;
        }
        return 0;
}

/* The main input x, as float32 or (with an embedding) int64 tokens within the table. */
static int bind_main(const struct rnnd_tensor *x, const struct rnnd_model_config *cfg,
                     struct rnnd_infer_bound *b, rnnd_error_t *reterr)
{
        if (!cfg->embedding.present) {
                b->input_stride = (size_t)b->T * cfg->input_size;
                return as_f32(x, &b->owned[0], &b->input, reterr);
        }
        b->tokens_stride = b->T;
        if (x->dtype == RNND_DT_I64) {
                b->tokens = x->data;
        } else {
                int64_t *tk = rnnd_mallocarray(x->numel, sizeof(int64_t));

                if (tk == NULL)
                        return rnnd__infer_nomem(reterr, "tokens");
                for (size_t i = 0; i < x->numel; i++)
                        tk[i] = int_at(x, i);
                b->owned[0] = tk;
                b->tokens = tk;
        }
        for (size_t i = 0; i < x->numel; i++)
                if (b->tokens[i] < 0 || b->tokens[i] >= cfg->embedding.num_embeddings)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "input 'tokens'[%zu][%zu]: %" PRId64
                                              " is outside 0..%" PRIu32,
                                              i / b->T, i % b->T, b->tokens[i],
                                              cfg->embedding.num_embeddings - 1);
        return 0;
}

/*
 * The state tensors' shape per sequence (docs/HTTP.md): a model of one
 * block [num_layers * dirs, H'] (c: H); a chain, whose blocks' widths
 * differ, one flat row of every block's state, block by block.  ndim counts B.
 */
static unsigned state_shape(const struct rnnd_model_config *cfg, bool c, uint64_t dims[2])
{
        size_t hf, cf;

        if (cfg->n_blocks <= 1) {
                dims[0] = (uint64_t)cfg->num_layers * rnnd_modelcfg_dirs(cfg);
                dims[1] = c ? cfg->hidden_size : rnnd_modelcfg_out_size(cfg);
                return 3;
        }
        rnnd_modelcfg_state_size(cfg, &hf, &cf);
        dims[0] = c ? cf : hf;
        dims[1] = 1;
        return 2;
}

/* Initial states h0 and c0 (either may be NULL). */
static int bind_states(const struct rnnd_tensor *h0, const struct rnnd_tensor *c0,
                       const struct rnnd_model_config *cfg, struct rnnd_infer_bound *b,
                       rnnd_error_t *reterr)
{
        const struct rnnd_tensor *t[2] = {h0, c0};
        const float **data[2] = {&b->h0, &b->c0};
        size_t *stride[2] = {&b->h0_stride, &b->c0_stride};
        int r;

        for (unsigned i = 0; i < 2; i++) {
                uint64_t dims[2], want[3] = {b->B, 0, 0};
                unsigned nd;

                if (t[i] == NULL)
                        continue;
                nd = state_shape(cfg, i == 1, dims);
                want[1] = dims[0];
                want[2] = dims[1];
                r = check_shape(t[i], want, nd, reterr);
                if (r == 0)
                        r = as_f32(t[i], &b->owned[1 + i], data[i], reterr);
                if (r < 0)
                        return r;
                *stride[i] = dims[0] * dims[1];
        }
        return 0;
}

bool rnnd_infer_is_sequence(const struct rnnd_infer_params *q)
{
        return q->sequence_id != 0 || q->sequence_id_str[0] != '\0' || q->sequence_start ||
               q->sequence_end;
}

int rnnd_infer_bind(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg,
                    struct rnnd_infer_bound *ret, rnnd_error_t *reterr)
{
        const struct rnnd_tensor *in[IN_COUNT] = {0}, *x = NULL;
        struct rnnd_infer_bound b = {.format = req->format};
        int r;

        r = check_sequence_params(&req->params, cfg, reterr);
        if (r == 0)
                r = bind_names(req, cfg, in, &x, reterr);
        if (r == 0)
                r = bind_batch(cfg, in, x, &b, reterr);
        if (r == 0)
                r = bind_lengths(in[IN_LENGTHS], &b, reterr);
        if (r == 0)
                r = bind_main(x, cfg, &b, reterr);
        if (r == 0)
                r = bind_states(in[IN_H0], in[IN_C0], cfg, &b, reterr);
        if (r == 0)
                r = bind_outputs(req, cfg, &b, reterr);
        if (r == 0 && rnnd_infer_is_sequence(&req->params) && b.B != 1)
                r = rnnd_error_set(reterr, RNND_EINVAL,
                                   "parameters.sequence_id: a sequence request holds one sequence "
                                   "(B = 1), got %" PRIu32,
                                   b.B);
        if (r < 0) {
                rnnd_infer_bound_done(&b);
                return r;
        }
        *ret = b;
        return 0;
}

void rnnd_infer_bound_done(struct rnnd_infer_bound *b)
{
        if (b == NULL)
                return;
        rnnd_free(b->lengths);
        for (size_t i = 0; i < RNND_ELEMENTSOF(b->owned); i++)
                rnnd_free(b->owned[i]);
        memset(b, 0, sizeof(*b));
}

/*
 * Outputs
 */

/* The shape of each output kind for b's batch under cfg. */
static void output_shapes(const struct rnnd_infer_bound *b, const struct rnnd_model_config *cfg,
                          uint64_t shapes[RNND_OUT_COUNT][3], unsigned ndims[RNND_OUT_COUNT])
{
        uint64_t hp = rnnd_modelcfg_out_size(cfg), h[2], c[2];
        unsigned nh = state_shape(cfg, false, h), nc = state_shape(cfg, true, c);
        const uint64_t s[RNND_OUT_COUNT][3] = {
                {b->B, b->T, rnnd_modelcfg_dirs(cfg) * hp},
                {b->B, h[0], h[1]},
                {b->B, c[0], c[1]},
                {b->B, b->T, cfg->head.units},
        };

        memcpy(shapes, s, sizeof(s));
        for (unsigned k = 0; k < RNND_OUT_COUNT; k++)
                ndims[k] = 3;
        ndims[RNND_OUT_H_N] = nh;
        ndims[RNND_OUT_C_N] = nc;
        if (cfg->head.apply == RNND_HEAD_LAST) {
                shapes[RNND_OUT_SCORES][1] = cfg->head.units;
                ndims[RNND_OUT_SCORES] = 2;
        }
}

/*
 * Bytes a response may take per element: a JSON float is at most 16
 * characters and a comma (fmtfloat.h); a binary one is 4.  Per tensor and
 * per sequence, room for names, shapes and brackets.
 */
#define JSON_BYTES_PER_FLOAT 17u
#define TENSOR_OVERHEAD      256u
#define SEQUENCE_OVERHEAD    64u

/* a + b, or UINT64_MAX where it would wrap. */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

int rnnd_infer_outputs_check(const struct rnnd_infer_bound *b, const struct rnnd_model_config *cfg,
                             uint64_t max_bytes, uint64_t *ret_held, rnnd_error_t *reterr)
{
        uint64_t shapes[RNND_OUT_COUNT][3], total = 0, tensors = 0;
        unsigned ndims[RNND_OUT_COUNT];

        output_shapes(b, cfg, shapes, ndims);
        for (unsigned i = 0; i < b->n_out; i++) {
                rnnd_infer_output_t k = b->out[i];
                uint64_t n = 1, per = b->binary[k] ? 4 : JSON_BYTES_PER_FLOAT;

                for (unsigned d = 0; d < ndims[k]; d++) /* saturating */
                        n = shapes[k][d] != 0 && n > UINT64_MAX / shapes[k][d] ? UINT64_MAX
                                                                               : n * shapes[k][d];
                tensors = add_sat(tensors, n > UINT64_MAX / 4 ? UINT64_MAX : n * 4);
                n = n > UINT64_MAX / per ? UINT64_MAX : n * per;
                n = add_sat(n, TENSOR_OVERHEAD + (uint64_t)b->B * SEQUENCE_OVERHEAD);
                total = add_sat(total, n);
        }
        if (total <= max_bytes) {
                if (ret_held != NULL)
                        *ret_held = add_sat(total, tensors);
                return 0;
        }
        return rnnd_error_set(reterr, RNND_ELIMIT,
                              "the outputs asked for would take up to %" PRIu64
                              " bytes, more than max_response_bytes (%" PRIu64
                              "); ask for fewer outputs (\"outputs\"), binary_data, or fewer "
                              "or shorter sequences",
                              total, max_bytes);
}

int rnnd_infer_outputs_alloc(const struct rnnd_infer_bound *b, const struct rnnd_model_config *cfg,
                             struct rnnd_infer_outputs *ret, rnnd_error_t *reterr)
{
        struct rnnd_infer_outputs o = {.format = b->format, .B = b->B, .T = b->T};
        uint64_t shapes[RNND_OUT_COUNT][3];
        unsigned ndims[RNND_OUT_COUNT];
        struct rnnd_infer_limits nolimit = {.max_elements = UINT64_MAX};
        struct rnnd_strbuf name;
        int r = 0;

        output_shapes(b, cfg, shapes, ndims);
        o.lengths = rnnd_mallocarray(b->B, sizeof(uint32_t));
        if (o.lengths == NULL) {
                r = rnnd__infer_nomem(reterr, "lengths");
                goto out;
        }
        memcpy(o.lengths, b->lengths, b->B * sizeof(uint32_t));
        for (unsigned i = 0; i < b->n_out; i++) {
                rnnd_infer_output_t k = b->out[i];
                struct rnnd_tensor *t = &o.t[i];

                r = rnnd__infer_set_shape(t, RNND_DT_F32, shapes[k], ndims[k], &nolimit,
                                          rnnd_infer_output_name(k), reterr);
                if (r < 0)
                        goto out;
                rnnd_strbuf_init_fixed(&name, t->name, sizeof(t->name)); /* no printf a request */
                rnnd_strbuf_puts(&name, rnnd_infer_output_name(k));
                r = rnnd__infer_alloc_data(t, reterr);
                if (r < 0)
                        goto out;
                o.n = i + 1;
                o.kind[i] = k;
                o.binary[i] = b->binary[k];
                o.by_kind[k] = t->data;
                o.stride[k] = (size_t)(t->numel / b->B);
        }
        *ret = o;
out:
        if (r < 0)
                rnnd_infer_outputs_done(&o);
        return r;
}

void rnnd_infer_outputs_done(struct rnnd_infer_outputs *o)
{
        if (o == NULL)
                return;
        for (unsigned i = 0; i < o->n; i++)
                rnnd__infer_tensor_done(&o->t[i]);
        rnnd_free(o->lengths);
        memset(o, 0, sizeof(*o));
}
