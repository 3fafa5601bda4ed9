/*
 * infer-render.c: the responses (infer.h): KServe v2 (JSON, with the binary
 * tensor extension), TF Serving :predict (columns and rows), and the error
 * body, written through strbuf.h.  A jansson tree costs a malloc and ~40
 * bytes per float, so float arrays are printed straight, each float as the
 * shortest decimal that reads back as the same float32 (fmtfloat.h).  JSON
 * has no NaN or infinity: an output the engine made non-finite is written
 * as null (docs/HTTP.md), so the body stays valid JSON.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fmtfloat.h"
#include "infer-int.h"
#include "strbuf.h"

static void put_float(struct rnnd_strbuf *b, float f)
{
        if (rnnd_strbuf_reserve(b, RNND_FMTFLOAT_LEN) >= RNND_FMTFLOAT_LEN)
                b->len += rnnd_fmtfloat(f, b->data + b->len);
}

/*
 * A row of n floats as a JSON list: room for all of it is made once (a
 * float takes at most RNND_FMTFLOAT_LEN - 1 bytes and a comma), so that each
 * float is printed straight into the buffer.
 */
static void put_row(struct rnnd_strbuf *b, const float *x, uint64_t n)
{
        char *p;

        if (n > (SIZE_MAX - 3) / RNND_FMTFLOAT_LEN ||
            rnnd_strbuf_reserve(b, (size_t)n * RNND_FMTFLOAT_LEN + 2) <
                    (size_t)n * RNND_FMTFLOAT_LEN + 2) {
                b->oom = true;
                return;
        }
        p = b->data + b->len;
        *p++ = '[';
        for (uint64_t i = 0; i < n; i++) {
                if (i > 0)
                        *p++ = ',';
                p += rnnd_fmtfloat(x[i], p);
        }
        *p++ = ']';
        *p = '\0';
        b->len = (size_t)(p - b->data);
}

/* x as nested lists of shape[0..ndim) (a bare number when ndim is 0). */
static void put_floats(struct rnnd_strbuf *b, const float *x, const uint64_t *shape, unsigned ndim)
{
        uint64_t inner = 1;

        if (ndim == 0) {
                put_float(b, x[0]);
                return;
        }
        if (ndim == 1) {
                put_row(b, x, shape[0]);
                return;
        }
        for (unsigned d = 1; d < ndim; d++)
                inner *= shape[d];
        rnnd_strbuf_putc(b, '[');
        for (uint64_t i = 0; i < shape[0] && !b->oom; i++) {
                if (i > 0)
                        rnnd_strbuf_putc(b, ',');
                put_floats(b, x + i * inner, shape + 1, ndim - 1);
        }
        rnnd_strbuf_putc(b, ']');
}

static void put_shape(struct rnnd_strbuf *b, const uint64_t *shape, unsigned ndim)
{
        rnnd_strbuf_putc(b, '[');
        for (unsigned d = 0; d < ndim; d++) {
                if (d > 0)
                        rnnd_strbuf_putc(b, ',');
                rnnd_strbuf_put_u64(b, shape[d]);
        }
        rnnd_strbuf_putc(b, ']');
}

/* Hands b over as a NUL-terminated body, or frees it and fails. */
static int finish(struct rnnd_strbuf *b, char **body, size_t *len, rnnd_error_t *err)
{
        char *p = rnnd_strbuf_steal(b, len);

        if (p == NULL)
                return rnnd__infer_nomem(err, "the response");
        *body = p;
        return 0;
}

int rnnd_kserve_render(const char *model_name, uint64_t version, const char *id,
                       const struct rnnd_infer_outputs *o, char **body, size_t *body_len,
                       size_t *json_len, rnnd_error_t *reterr)
{
        struct rnnd_strbuf b;
        size_t est = 256 + 6 * (strlen(model_name) + (id ? strlen(id) : 0)), jl;
        int r;

        rnnd_strbuf_init(&b);
        for (unsigned i = 0; i < o->n; i++)
                est += o->shm[i] != NULL ? 128
                       : o->binary[i]    ? o->t[i].nbytes + 128
                                         : o->t[i].numel * 16 + 128;
        rnnd_strbuf_reserve(&b, est);
        rnnd_strbuf_puts(&b, "{\"model_name\":");
        rnnd_strbuf_json_str(&b, model_name);
        if (version != 0) {
                rnnd_strbuf_puts(&b, ",\"model_version\":\"");
                rnnd_strbuf_put_u64(&b, version);
                rnnd_strbuf_putc(&b, '"');
        }
        if (id != NULL && id[0] != '\0') {
                rnnd_strbuf_puts(&b, ",\"id\":");
                rnnd_strbuf_json_str(&b, id);
        }
        rnnd_strbuf_puts(&b, ",\"outputs\":[");
        for (unsigned i = 0; i < o->n; i++) {
                const struct rnnd_tensor *t = &o->t[i];

                rnnd_strbuf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
                rnnd_strbuf_json_str(&b, t->name);
                rnnd_strbuf_puts(&b, ",\"datatype\":\"FP32\",\"shape\":");
                put_shape(&b, t->shape, t->ndim);
                if (o->shm[i] != NULL) {
                        /*
                         * Its bytes are in the region: no data, and no parameters,
                         * as Triton answers (Triton's C++ client reads
                         * binary_data_size from any output that has parameters).
                         */
                        rnnd_strbuf_putc(&b, '}');
                } else if (o->binary[i]) {
                        rnnd_strbuf_puts(&b, ",\"parameters\":{\"binary_data_size\":");
                        rnnd_strbuf_put_u64(&b, t->nbytes);
                        rnnd_strbuf_puts(&b, "}}");
                } else {
                        rnnd_strbuf_puts(&b, ",\"data\":");
                        put_floats(&b, t->data, &t->numel, 1);
                        rnnd_strbuf_putc(&b, '}');
                }
        }
        rnnd_strbuf_puts(&b, "]}");
        jl = b.len;
        for (unsigned i = 0; i < o->n; i++)
                if (o->binary[i] && o->shm[i] == NULL)
                        rnnd_strbuf_putn(&b, o->t[i].data, o->t[i].nbytes);
        r = finish(&b, body, body_len, reterr);
        if (r < 0)
                return r;
        *json_len = jl;
        return 0;
}

/* The columns: {"outputs": {name: nested lists, ...}}. */
static void put_columns(struct rnnd_strbuf *b, const struct rnnd_infer_outputs *o)
{
        rnnd_strbuf_puts(b, "{\"outputs\":{");
        for (unsigned i = 0; i < o->n; i++) {
                rnnd_strbuf_puts(b, i ? "," : "");
                rnnd_strbuf_json_str(b, o->t[i].name);
                rnnd_strbuf_putc(b, ':');
                put_floats(b, o->t[i].data, o->t[i].shape, o->t[i].ndim);
        }
        rnnd_strbuf_puts(b, "}}");
}

/* The rows: {"predictions": [{name: one instance's part, ...}, ...]}. */
static void put_rows(struct rnnd_strbuf *b, const struct rnnd_infer_outputs *o)
{
        rnnd_strbuf_puts(b, "{\"predictions\":[");
        for (uint32_t s = 0; s < o->B && !b->oom; s++) {
                rnnd_strbuf_puts(b, s ? ",{" : "{");
                for (unsigned i = 0; i < o->n; i++) {
                        const struct rnnd_tensor *t = &o->t[i];
                        uint64_t shape[RNND_MAX_DIMS];

                        /* One instance's part; per-step outputs cut to its own length. */
                        memcpy(shape, t->shape + 1, (t->ndim - 1) * sizeof(shape[0]));
                        if (t->ndim == 3 &&
                            (o->kind[i] == RNND_OUT_OUTPUT || o->kind[i] == RNND_OUT_SCORES))
                                shape[0] = o->lengths[s];
                        rnnd_strbuf_puts(b, i ? "," : "");
                        rnnd_strbuf_json_str(b, t->name);
                        rnnd_strbuf_putc(b, ':');
                        put_floats(b, (const float *)t->data + s * o->stride[o->kind[i]], shape,
                                   t->ndim - 1);
                }
                rnnd_strbuf_putc(b, '}');
        }
        rnnd_strbuf_puts(b, "]}");
}

int rnnd_tfs_render(const struct rnnd_infer_outputs *o, char **body, size_t *len,
                    rnnd_error_t *reterr)
{
        struct rnnd_strbuf b;
        size_t est = 64;

        rnnd_strbuf_init(&b);
        for (unsigned i = 0; i < o->n; i++)
                est += o->t[i].numel * 16 + 64;
        rnnd_strbuf_reserve(&b, est);
        if (o->format != RNND_FMT_TFS_ROW)
                put_columns(&b, o);
        else
                put_rows(&b, o);
        return finish(&b, body, len, reterr);
}

int rnnd_error_render(int code, const char *msg, char **body, size_t *len)
{
        struct rnnd_strbuf b;

        rnnd_strbuf_init(&b);
        rnnd_strbuf_puts(&b, "{\"error\":");
        rnnd_strbuf_json_str(&b, msg != NULL && msg[0] != '\0' ? msg : rnnd_strerror(code));
        rnnd_strbuf_putc(&b, '}');
        return finish(&b, body, len, NULL);
}
