/*
 * body.h: the request bodies rnnd-load sends, without building each one.
 *
 * A payload holds the pseudo-random input of the largest request the spec can
 * make (sequences x longest length steps), generated once from the seed: raw
 * little-endian bytes for binary tensors, or the numbers as JSON text with the
 * offset of every step for JSON.  A request's body is then a list of
 * segments: a small head written per request (the JSON around the data, the
 * shape, the lengths), slices of the payload, and a tail.  So a body costs no
 * generation, its input data is the same for the same seed and lengths, and
 * memory is the payload plus a little per slot, however long the run.
 */
#ifndef RNND_CLIENTS_BODY_H
#define RNND_CLIENTS_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "loadspec.h"
#include "strbuf.h"

/* The shared input data.  Immutable after rnnd_load_payload_build(). */
struct rnnd_load_payload {
        rnnd_load_api_t api;
        rnnd_load_format_t format;
        struct rnnd_load_input input; /* the tensor sent */
        uint32_t features;            /* elements per step: shape[2], or 1 for tokens */
        uint64_t n_steps;             /* sequences x longest length */
        size_t step_bytes;            /* binary: bytes per step */
        unsigned char *raw;           /* binary: n_steps x step_bytes */
        char *text;                   /* JSON: steps separated by ',' */
        size_t *step_off;   /* JSON: [n_steps + 1] start of step k; the last is the text length */
        unsigned n_outputs; /* v2: outputs asked for */
        char outputs[RNND_LOAD_MAX_OUTPUTS][RNND_LOAD_NAME_MAX];
};

struct rnnd_load_seg {
        const char *p;
        size_t n;
};

/* One request's body: reused, request after request, by one slot. */
struct rnnd_load_body {
        struct rnnd_strbuf head;   /* JSON before the data */
        struct rnnd_strbuf tail;   /* JSON (or lengths bytes) after the data */
        struct rnnd_load_seg *seg; /* [cap] */
        unsigned n_seg, cap;
        size_t size;      /* total bytes */
        size_t json_len;  /* binary: Inference-Header-Content-Length; else size */
        unsigned cur;     /* read cursor: segment and offset in it */
        char params[192]; /* v2: the request's "parameters" object, or "" (set before make) */
        size_t off;
};

/*
 * Generates the payload for requests of up to max_seqs sequences of up to
 * max_len steps of input in (FP32 values uniform in [-1, 1), or token ids in
 * 0..max_token), from seed, for api and format; outputs (n_outputs names) are
 * what v2 requests ask for.  Fills *p (new; release with
 * rnnd_load_payload_done()).  Errors: RNND_EINVAL for an input it cannot
 * send, RNND_ENOMEM.  Thread-safe.
 */
int rnnd_load_payload_build(struct rnnd_load_payload *p, rnnd_load_api_t api,
                            rnnd_load_format_t format, const struct rnnd_load_input *in,
                            uint32_t max_seqs, uint32_t max_len, uint64_t max_token, uint64_t seed,
                            unsigned n_outputs, const char (*outputs)[RNND_LOAD_NAME_MAX],
                            rnnd_error_t *reterr);

/* Frees *p's buffers and zeroes it; accepts NULL.  Thread-safe. */
void rnnd_load_payload_done(struct rnnd_load_payload *p);

/* Initializes an empty body (caller-provided storage).  Thread-safe. */
void rnnd_load_body_init(struct rnnd_load_body *b);

/* Frees what b holds; accepts NULL.  Thread-safe. */
void rnnd_load_body_done(struct rnnd_load_body *b);

/*
 * Makes *b the body of a request of n sequences with lengths[0..n), each
 * 1..max_len and n <= max_seqs of the payload's build; it borrows from p,
 * which must outlive it.  Errors: RNND_ENOMEM.  Not thread-safe on one b.
 */
int rnnd_load_body_make(struct rnnd_load_body *b, const struct rnnd_load_payload *p, uint32_t n,
                        const uint32_t *lengths, rnnd_error_t *reterr);

/* Copies up to n bytes of the body from the cursor into dst; returns the count (0 at the end). */
size_t rnnd_load_body_read(struct rnnd_load_body *b, void *dst, size_t n);

/* Moves the cursor to byte off of the body; returns 0, or RNND_EINVAL past the end. */
int rnnd_load_body_seek(struct rnnd_load_body *b, size_t off);

#endif
