/*
 * layout.c: how a batch is laid into the cuDNN backend's staging buffer
 * (pure host code, no CUDA calls, so it is tested without a GPU).
 *
 * The input region is one block on the device: the lengths, four index
 * arrays that drive the gather kernel, the initial states, then the
 * caller's inputs x, each sequence's rows at i x T (batch-major).  The part
 * before x is staged whole (rnnd__cudnn_stage); x, the bulk, is staged a
 * window at a time (rnnd__cudnn_stage_x), so the pinned host buffer need
 * not hold a whole batch of inputs.  The transposes to cuDNN's
 * sequence-major layout happen on the device.
 */
#include <string.h>

#include "cudnn/cudnn-int.h"

/* 64-byte alignment, in 4-byte elements. */
static size_t align16(size_t v)
{
        return (v + 15) & ~(size_t)15;
}

/* Fills the offsets of *o for n sequences of longest length T. */
static void offsets(const rnnd_model_t *m, uint32_t n, uint32_t T, bool x, bool h0, bool c0,
                    struct rnnd__cudnn_layout *o)
{
        const size_t LD = (size_t)m->cfg.num_layers * m->dirs, rows = (size_t)n * T;
        size_t at = 0;

        o->n = n;
        o->T = T;
        o->LD = (uint32_t)LD;
        o->len = at;
        at = align16(at + n);
        o->idx_x = at;
        at = align16(at + rows);
        o->idx_y = at;
        at = align16(at + rows);
        o->idx_hin = at;
        at = align16(at + LD * n);
        o->idx_hout = at;
        at = align16(at + LD * n);
        o->h0 = at;
        at = align16(at + (h0 ? LD * n * m->out_size : 0));
        o->c0 = at;
        at = align16(at + (c0 ? LD * n * m->cfg.hidden_size : 0));
        o->x = at;
        at = align16(at + (x ? rows * m->cfg.input_size : 0));
        o->end = at;
}

size_t rnnd__cudnn_in_size(const rnnd_model_t *m, uint32_t n, uint32_t T, bool with_x)
{
        struct rnnd__cudnn_layout o;

        offsets(m, n, T, m->embedding == NULL, true, true, &o); /* tokens need no x */
        return with_x ? o.end : o.x;
}

void rnnd__cudnn_window(float *buf, size_t at, size_t n, float *win, size_t from, size_t count,
                        bool to_win)
{
        const size_t a = at > from ? at : from, z = at + n < from + count ? at + n : from + count;

        if (a >= z)
                return;
        if (to_win)
                memcpy(win + (a - from), buf + (a - at), (z - a) * sizeof(float));
        else
                memcpy(buf + (a - at), win + (a - from), (z - a) * sizeof(float));
}

void rnnd__cudnn_stage_x(const rnnd_model_t *m, const struct rnnd_batch *b,
                         const struct rnnd__cudnn_layout *o, size_t from, size_t count, float *dst)
{
        const size_t in = m->cfg.input_size, per = (size_t)o->T * in;

        /* Sequence i's rows are [i * per, i * per + len * in) of the x region. */
        for (uint32_t i = 0; i < b->n; i++)
                rnnd__cudnn_window((float *)b->seqs[i].x, (size_t)i * per,
                                   (size_t)b->seqs[i].len * in, dst, from, count, true);
}

/* Stages one state (h0 or c0) of every sequence: [n, LD, width], zeros where absent. */
static void stage_state(const struct rnnd_batch *b, bool c, size_t LD, size_t width, float *dst)
{
        for (uint32_t i = 0; i < b->n; i++) {
                const float *src = c ? b->seqs[i].c0 : b->seqs[i].h0;
                float *row = dst + (size_t)i * LD * width;

                if (src != NULL)
                        memcpy(row, src, LD * width * sizeof(float));
                else
                        memset(row, 0, LD * width * sizeof(float));
        }
}

void rnnd__cudnn_stage(const rnnd_model_t *m, const struct rnnd_batch *b, void *buf,
                       struct rnnd__cudnn_layout *ret)
{
        const bool emb = m->embedding != NULL, lstm = m->cfg.cell == RNND_CELL_LSTM;
        struct rnnd__cudnn_layout o;
        int32_t *ib = buf;
        float *fb = buf;
        uint32_t n = b->n, T = 0;
        bool equal = true, any_h0 = false, any_c0 = false;

        for (uint32_t i = 0; i < n; i++) {
                T = b->seqs[i].len > T ? b->seqs[i].len : T;
                any_h0 |= b->seqs[i].h0 != NULL;
                any_c0 |= lstm && b->seqs[i].c0 != NULL;
        }
        offsets(m, n, T, !emb, any_h0, any_c0, &o);
        for (uint32_t i = 0; i < n; i++) {
                const struct rnnd_seq *q = &b->seqs[i];

                equal &= q->len == T;
                ib[o.len + i] = (int32_t)q->len;
                for (uint32_t t = 0; t < T; t++) {
                        const size_t sm = (size_t)t * n + i, bm = (size_t)i * T + t;
                        int32_t src = -1;

                        if (t < q->len)
                                src = emb ? (int32_t)q->tokens[t] : (int32_t)bm;
                        ib[o.idx_x + sm] = src;
                        ib[o.idx_y + bm] = t < q->len ? (int32_t)sm : -1;
                }
                for (uint32_t ld = 0; ld < o.LD; ld++) {
                        ib[o.idx_hin + (size_t)ld * n + i] = (int32_t)((size_t)i * o.LD + ld);
                        ib[o.idx_hout + (size_t)i * o.LD + ld] = (int32_t)((size_t)ld * n + i);
                }
        }
        if (any_h0)
                stage_state(b, false, o.LD, m->out_size, fb + o.h0);
        if (any_c0)
                stage_state(b, true, o.LD, m->cfg.hidden_size, fb + o.c0);
        o.equal = equal;
        o.any_h0 = any_h0;
        o.any_c0 = any_c0;
        *ret = o;
}

int rnnd__cudnn_check(const rnnd_model_t *m, const struct rnnd_batch *b, uint32_t max_n,
                      uint64_t max_rows, uint32_t *T, rnnd_error_t *reterr)
{
        uint64_t steps;
        uint32_t longest;
        int r;

        if (b->seqs != NULL && b->n > max_n) /* an empty batch says so first */
                return rnnd_error_set(reterr, RNND_EINVAL, "batch of %u sequences > max %u", b->n,
                                      max_n);
        r = rnnd_batch_check(m, b, &steps, &longest, reterr);
        if (r < 0)
                return r;
        if ((uint64_t)longest * b->n > max_rows)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "batch of %u x %u steps > max_batch_steps %llu", b->n,
                                      longest, (unsigned long long)max_rows);
        *T = longest;
        return 0;
}
