/*
 * body.c: request bodies as segments over one generated payload (body.h).
 *
 * KServe v2 JSON sends input as a flat "data" list: steps 0..B x T of the
 * text, one slice.  Binary sends the same steps' raw bytes after the JSON
 * header, then the lengths as raw INT64.  TF Serving :predict sends one
 * instance per sequence, its own length long: sequence b is steps
 * b x T .. b x T + len_b, each step bracketed when it has features.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "body.h"
#include "rng.h"

int rnnd_load_payload_build(struct rnnd_load_payload *p, rnnd_load_api_t api,
                            rnnd_load_format_t format, const struct rnnd_load_input *in,
                            uint32_t max_seqs, uint32_t max_len, uint64_t max_token, uint64_t seed,
                            unsigned n_outputs, const char (*outputs)[RNND_LOAD_NAME_MAX],
                            rnnd_error_t *reterr)
{
        struct rnnd_load_payload q = {0};
        struct rnnd_strbuf text;
        uint64_t rng = rnnd_rng_init(seed, RNND_RNG_DATA), k;
        bool tokens = in->dtype == RNND_DT_I64 || in->dtype == RNND_DT_I32;
        bool brackets = api == RNND_API_PREDICT && !tokens;
        size_t esize = rnnd_dtype_size(in->dtype);
        int r = 0;

        if (!((in->dtype == RNND_DT_F32 && in->ndim == 3 && in->shape[2] > 0) ||
              (tokens && in->ndim == 2)))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "input '%s': can send FP32 [B, T, F] or INT64/INT32 [B, T], "
                                      "not %s with %u dimensions",
                                      in->name, rnnd_dtype_name(in->dtype), in->ndim);
        q.api = api;
        q.format = format;
        q.input = *in;
        q.features = tokens ? 1 : (uint32_t)in->shape[2];
        q.n_steps = (uint64_t)max_seqs * max_len;
        q.step_bytes = q.features * esize;
        q.n_outputs = n_outputs;
        memcpy(q.outputs, outputs, n_outputs * sizeof(q.outputs[0]));
        if (format == RNND_TENSORS_BINARY) {
                q.raw = rnnd_mallocarray(q.n_steps, q.step_bytes);
                if (q.raw == NULL)
                        goto oom;
                for (k = 0; k < q.n_steps * q.features; k++) {
                        if (in->dtype == RNND_DT_F32) {
                                float f = (float)(2 * rnnd_rng_unit(&rng) - 1);

                                memcpy(q.raw + k * 4, &f, 4);
                        } else {
                                int64_t t = (int64_t)rnnd_rng_range(&rng, 0, max_token);
                                int32_t t32 = (int32_t)t;

                                memcpy(q.raw + k * esize, esize == 8 ? (void *)&t : (void *)&t32,
                                       esize);
                        }
                }
                *p = q;
                return 0;
        }
        q.step_off = rnnd_mallocarray(q.n_steps + 1, sizeof(size_t));
        if (q.step_off == NULL)
                goto oom;
        rnnd_strbuf_init(&text);
        for (k = 0; k < q.n_steps; k++) {
                q.step_off[k] = text.len;
                if (brackets)
                        rnnd_strbuf_putc(&text, '[');
                for (uint32_t f = 0; f < q.features; f++) {
                        if (f > 0)
                                rnnd_strbuf_putc(&text, ',');
                        if (tokens)
                                rnnd_strbuf_printf(&text, "%" PRIu64,
                                                   rnnd_rng_range(&rng, 0, max_token));
                        else
                                rnnd_strbuf_printf(&text, "%.6g",
                                                   (float)(2 * rnnd_rng_unit(&rng) - 1));
                }
                if (brackets)
                        rnnd_strbuf_putc(&text, ']');
                rnnd_strbuf_putc(&text, ',');
        }
        q.step_off[q.n_steps] = text.len;
        q.text = rnnd_strbuf_steal(&text, NULL);
        if (q.text == NULL)
                goto oom;
        *p = q;
        return r;
oom:
        rnnd_load_payload_done(&q);
        return rnnd_error_set(reterr, RNND_ENOMEM,
                              "out of memory for a payload of %" PRIu64 " steps of %u elements",
                              q.n_steps, q.features);
}

void rnnd_load_payload_done(struct rnnd_load_payload *p)
{
        if (p == NULL)
                return;
        rnnd_free(p->raw);
        rnnd_free(p->text);
        rnnd_free(p->step_off);
        memset(p, 0, sizeof(*p));
}

void rnnd_load_body_init(struct rnnd_load_body *b)
{
        memset(b, 0, sizeof(*b));
        rnnd_strbuf_init(&b->head);
        rnnd_strbuf_init(&b->tail);
}

void rnnd_load_body_done(struct rnnd_load_body *b)
{
        if (b == NULL)
                return;
        rnnd_strbuf_done(&b->head);
        rnnd_strbuf_done(&b->tail);
        rnnd_free(b->seg);
        rnnd_load_body_init(b);
}

static void add_seg(struct rnnd_load_body *b, const char *p, size_t n)
{
        b->seg[b->n_seg++] = (struct rnnd_load_seg){p, n};
        b->size += n;
}

/* Steps a..z of the text, without the comma after the last. */
static void add_text(struct rnnd_load_body *b, const struct rnnd_load_payload *p, uint64_t a,
                     uint64_t z)
{
        add_seg(b, p->text + p->step_off[a], p->step_off[z] - p->step_off[a] - 1);
}

/* "shape":[n,T(,F)] of the input. */
static void put_shape(struct rnnd_strbuf *s, const struct rnnd_load_payload *p, uint32_t n,
                      uint32_t T)
{
        rnnd_strbuf_printf(s,
                           "{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":[%" PRIu32 ",%" PRIu32,
                           p->input.name, rnnd_dtype_name(p->input.dtype), n, T);
        if (p->input.ndim == 3)
                rnnd_strbuf_printf(s, ",%" PRIu32, p->features);
        rnnd_strbuf_putc(s, ']');
}

/* The lengths input header, "outputs", and the end of the JSON. */
static void put_lengths_and_outputs(struct rnnd_strbuf *s, const struct rnnd_load_payload *p,
                                    uint32_t n, const uint32_t *lengths)
{
        bool bin = p->format == RNND_TENSORS_BINARY;

        if (n > 1) {
                rnnd_strbuf_printf(
                        s, ",{\"name\":\"lengths\",\"datatype\":\"INT64\",\"shape\":[%" PRIu32 "]",
                        n);
                if (bin) {
                        rnnd_strbuf_printf(s, ",\"parameters\":{\"binary_data_size\":%zu}}",
                                           (size_t)n * 8);
                } else {
                        rnnd_strbuf_puts(s, ",\"data\":[");
                        for (uint32_t i = 0; i < n; i++)
                                rnnd_strbuf_printf(s, "%s%" PRIu32, i ? "," : "", lengths[i]);
                        rnnd_strbuf_puts(s, "]}");
                }
        }
        rnnd_strbuf_putc(s, ']');
        if (p->n_outputs > 0) {
                rnnd_strbuf_puts(s, ",\"outputs\":[");
                for (unsigned i = 0; i < p->n_outputs; i++) {
                        rnnd_strbuf_printf(s, "%s{\"name\":\"%s\"%s}", i ? "," : "", p->outputs[i],
                                           bin ? ",\"parameters\":{\"binary_data\":true}" : "");
                }
                rnnd_strbuf_putc(s, ']');
        }
        rnnd_strbuf_putc(s, '}');
}

int rnnd_load_body_make(struct rnnd_load_body *b, const struct rnnd_load_payload *p, uint32_t n,
                        const uint32_t *lengths, rnnd_error_t *reterr)
{
        uint32_t T = 0, i;
        unsigned need = 2 * n + 3;

        for (i = 0; i < n; i++)
                T = lengths[i] > T ? lengths[i] : T;
        if (need > b->cap) {
                struct rnnd_load_seg *s = rnnd_realloc(b->seg, need * sizeof(*s));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
                b->seg = s;
                b->cap = need;
        }
        rnnd_strbuf_reset(&b->head);
        rnnd_strbuf_reset(&b->tail);
        b->n_seg = 0;
        b->size = 0;
        b->cur = 0;
        b->off = 0;

        switch (p->api) {
        case RNND_API_PREDICT:
                rnnd_strbuf_puts(&b->head, "{\"instances\":[[");
                rnnd_strbuf_puts(&b->tail, "]]}");
                break;
        case RNND_API_V2:
        case RNND_API_GET:
                rnnd_strbuf_putc(&b->head, '{');
                if (b->params[0] != '\0')
                        rnnd_strbuf_printf(&b->head, "\"parameters\":%s,", b->params);
                rnnd_strbuf_puts(&b->head, "\"inputs\":[");
                put_shape(&b->head, p, n, T);
                if (p->format == RNND_TENSORS_BINARY) {
                        rnnd_strbuf_printf(&b->head, ",\"parameters\":{\"binary_data_size\":%zu}}",
                                           (size_t)n * T * p->step_bytes);
                        put_lengths_and_outputs(&b->head, p, n, lengths);
                        for (i = 0; n > 1 && i < n; i++) {
                                int64_t l = lengths[i];

                                rnnd_strbuf_putn(&b->tail, (const char *)&l, 8);
                        }
                } else {
                        rnnd_strbuf_puts(&b->head, ",\"data\":[");
                        rnnd_strbuf_puts(&b->tail, "]}");
                        put_lengths_and_outputs(&b->tail, p, n, lengths);
                }
                break;
        }
        if (b->head.oom || b->tail.oom)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");

        add_seg(b, b->head.data, b->head.len);
        b->json_len = b->head.len;
        if (p->format == RNND_TENSORS_BINARY) {
                add_seg(b, (const char *)p->raw, (size_t)n * T * p->step_bytes);
        } else if (p->api == RNND_API_PREDICT) {
                for (i = 0; i < n; i++) {
                        if (i > 0)
                                add_seg(b, "],[", 3);
                        add_text(b, p, (uint64_t)i * T, (uint64_t)i * T + lengths[i]);
                }
        } else {
                add_text(b, p, 0, (uint64_t)n * T);
        }
        add_seg(b, b->tail.data != NULL ? b->tail.data : "", b->tail.len);
        if (p->format != RNND_TENSORS_BINARY)
                b->json_len = b->size;
        return 0;
}

size_t rnnd_load_body_read(struct rnnd_load_body *b, void *dst, size_t n)
{
        size_t done = 0;

        while (done < n && b->cur < b->n_seg) {
                const struct rnnd_load_seg *s = &b->seg[b->cur];
                size_t k = s->n - b->off;

                if (k > n - done)
                        k = n - done;
                memcpy((char *)dst + done, s->p + b->off, k);
                done += k;
                b->off += k;
                if (b->off == s->n) {
                        b->cur++;
                        b->off = 0;
                }
        }
        return done;
}

int rnnd_load_body_seek(struct rnnd_load_body *b, size_t off)
{
        if (off > b->size)
                return RNND_EINVAL;
        b->cur = 0;
        while (b->cur < b->n_seg && off >= b->seg[b->cur].n) {
                off -= b->seg[b->cur].n;
                b->cur++;
        }
        b->off = off;
        return 0;
}
