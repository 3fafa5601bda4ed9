/*
 * rnn.c: the stand-in's cudnnRNNForward pass, run on the handle's stream
 * thread (dnn.c checked the arguments and queued it).  fp32 math for fp32
 * and fp16 data: RNN relu/tanh, LSTM with an optional projection, GRU with
 * the reset gate applied after the recurrent product (cuDNN's form), both
 * directions, any number of layers, the three data layouts with
 * per-sequence lengths.  Weights are read through the layout dnn.c handed
 * out; intermediate layers and gates live in the caller's workspace.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

static float rd(const void *p, size_t i, bool half)
{
        return half ? sim_h2f(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static void wr(void *p, size_t i, float v, bool half)
{
        if (half)
                ((uint16_t *)p)[i] = sim_f2h(v);
        else
                ((float *)p)[i] = v;
}

static float sigm(float x)
{
        return 1.0f / (1.0f + expf(-x));
}

/* The row of (step t, sequence b) in x or y, in its layout; step_off: rows before each step
 * (packed). */
static size_t row_of(const struct rnn_fwd *f, const size_t *step_off, int t, int b)
{
        switch (f->layout) {
        case CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED:
                return (size_t)t * f->B + b;
        case CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED:
                return (size_t)b * f->T + t;
        default:
                return step_off[t] +
                       b; /* step t holds the sequences longer than t, longest first */
        }
}

/*
 * One pseudo-layer's weights as fp32, transposed so that every product is a
 * sum of contiguous rows (which the compiler vectorises): WT [in][G*H] (NULL
 * with CUDNN_SKIP_INPUT's identity), RT [P][G*H], the biases [G*H] (zeros
 * where the bias mode has none), projT [H][P] (NULL without a projection).
 */
struct layer_w {
        float *WT, *RT, *bW, *bR, *projT;
};

/* Adds block blk (rows x cols, row-major in the weight space) transposed into dst [cols][ld] at
 * column c0. */
static void fetch_t(const struct rnn_fwd *f, const struct wblock *blk, bool half, float *dst,
                    int ld, int c0)
{
        const char *src = (const char *)f->wspace + blk->off;

        for (int r = 0; r < blk->rows; r++)
                for (int k = 0; k < blk->cols; k++)
                        dst[(size_t)k * ld + c0 + r] = rd(src, (size_t)r * blk->cols + k, half);
}

static bool layer_fetch(const struct rnn_fwd *f, int pl, int in, struct layer_w *lw)
{
        const struct rnn_cfg *c = &f->c;
        const bool half = c->type == CUDNN_DATA_HALF;
        const int G = sim_rnn_gates(c->cell), H = c->hid, P = c->proj, GH = G * H;
        const struct wblock *mb = &f->w.mat[pl * f->w.n_lin], *bb = &f->w.bias[pl * f->w.n_lin];

        memset(lw, 0, sizeof(*lw));
        lw->RT = calloc((size_t)P * GH, sizeof(float));
        lw->bW = calloc((size_t)GH, sizeof(float));
        lw->bR = calloc((size_t)GH, sizeof(float));
        if (mb[0].rows != 0)
                lw->WT = calloc((size_t)in * GH, sizeof(float));
        if (c->cell == CUDNN_LSTM && mb[2 * G].rows != 0)
                lw->projT = calloc((size_t)H * P, sizeof(float));
        if (lw->RT == NULL || lw->bW == NULL || lw->bR == NULL ||
            (mb[0].rows != 0 && lw->WT == NULL) ||
            (c->cell == CUDNN_LSTM && mb[2 * G].rows != 0 && lw->projT == NULL))
                return false;
        for (int g = 0; g < G; g++) {
                if (lw->WT != NULL)
                        fetch_t(f, &mb[g], half, lw->WT, GH, g * H);
                fetch_t(f, &mb[G + g], half, lw->RT, GH, g * H);
                if (bb[g].rows != 0)
                        fetch_t(f, &bb[g], half, lw->bW, GH, g * H);
                if (bb[G + g].rows != 0)
                        fetch_t(f, &bb[G + g], half, lw->bR, GH, g * H);
        }
        if (lw->projT != NULL)
                fetch_t(f, &mb[2 * G], half, lw->projT, P, 0);
        return true;
}

static void layer_free(struct layer_w *lw)
{
        free(lw->WT);
        free(lw->RT);
        free(lw->bW);
        free(lw->bR);
        free(lw->projT);
        memset(lw, 0, sizeof(*lw));
}

/* y[0..n) = b + sum_k x[k] * M[k][0..n) */
static void gemv_t(float *y, const float *b, const float *M, const float *x, int k_n, int n)
{
        memcpy(y, b, sizeof(float) * (size_t)n);
        for (int k = 0; k < k_n; k++) {
                const float xk = x[k], *row = M + (size_t)k * n;

                for (int j = 0; j < n; j++)
                        y[j] += xk * row[j];
        }
}

cudaError_t sim_rnn_forward_run(struct sim_op *op)
{
        struct rnn_fwd *f = op->arg;
        const struct rnn_cfg *c = &f->c;
        const bool half = c->type == CUDNN_DATA_HALF;
        const int dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1, G = sim_rnn_gates(c->cell);
        const int H = c->hid, P = c->proj, B = f->B, T = f->T, W = dirs * P, GH = G * H;
        const size_t rows = (size_t)T * B;
        float *buf[2], *gx, *h, *cst, *rec, *hh, *xin;
        size_t *step_off;
        const int *len = f->len;
        const int in_max = c->in > W ? c->in : W;
        struct layer_w lw = {0};

        /* devSeqLengths is read by the device now: it must still hold the lengths. */
        if (f->dev_len != NULL) {
                for (int b = 0; b < B; b++) {
                        if (f->dev_len[b] != f->len[b]) {
                                sim_set_sticky(cudaErrorIllegalAddress,
                                               "cudnnRNNForward: devSeqLengths[%d] = %d when the "
                                               "pass ran, but the descriptor says %d",
                                               b, f->dev_len[b], f->len[b]);
                                return cudaErrorIllegalAddress;
                        }
                }
        }
        /* The workspace holds the layer outputs and the gates (work_size in dnn.c). */
        buf[0] = f->work;
        buf[1] = buf[0] + rows * W;
        gx = buf[1] + rows * W;
        h = gx + rows * GH;
        cst = h + (size_t)B * dirs * (H + P);
        if ((char *)(cst + (size_t)B * dirs * (H + P)) > (char *)f->work + f->work_size)
                abort(); /* work_size and this carving disagree: a stand-in bug */
        rec = malloc(sizeof(float) * (size_t)(GH + H + in_max));
        step_off = malloc(sizeof(size_t) * ((size_t)T + 1));
        if (rec == NULL || step_off == NULL) {
                free(rec);
                free(step_off);
                return cudaErrorMemoryAllocation;
        }
        step_off[0] = 0;
        for (int t = 0; t < T; t++) {
                size_t n = 0;

                while (n < (size_t)B && len[n] > t)
                        n++;
                step_off[t + 1] = step_off[t] + n;
        }
        hh = rec + GH;
        xin = hh + H;

        for (int l = 0; l < c->layers; l++) {
                float *out = buf[l % 2];
                const float *prev = buf[(l + 1) % 2];
                const int in = l == 0 ? c->in : W;

                memset(out, 0, sizeof(float) * rows * W);
                for (int d = 0; d < dirs; d++) {
                        const int pl = l * dirs + d;

                        if (!layer_fetch(f, pl, in, &lw)) {
                                layer_free(&lw);
                                free(rec);
                                free(step_off);
                                return cudaErrorMemoryAllocation;
                        }

                        /* The input GEMM of every step: gx = W x + bW. */
                        for (int b = 0; b < B; b++) {
                                for (int t = 0; t < len[b]; t++) {
                                        float *o = gx + ((size_t)t * B + b) * GH;

                                        if (l == 0) {
                                                size_t r = row_of(f, step_off, t, b);

                                                for (int k = 0; k < in; k++)
                                                        xin[k] = rd(f->x, r * in + k, half);
                                        } else {
                                                memcpy(xin, prev + ((size_t)t * B + b) * W,
                                                       sizeof(float) * in);
                                        }
                                        if (lw.WT != NULL) {
                                                gemv_t(o, lw.bW, lw.WT, xin, in, GH);
                                        } else { /* CUDNN_SKIP_INPUT: x into every gate */
                                                for (int g = 0; g < G; g++)
                                                        for (int j = 0; j < H; j++)
                                                                o[g * H + j] =
                                                                        xin[j] + lw.bW[g * H + j];
                                        }
                                }
                        }

                        /* The recurrence, one sequence at a time. */
                        for (int b = 0; b < B; b++) {
                                float *hb = h + ((size_t)d * B + b) * P;
                                float *cb = cst + ((size_t)d * B + b) * H;
                                const size_t so = ((size_t)pl * B + b);

                                for (int k = 0; k < P; k++)
                                        hb[k] = f->hx != NULL ? rd(f->hx, so * P + k, half) : 0.0f;
                                for (int k = 0; k < H; k++)
                                        cb[k] = f->cx != NULL ? rd(f->cx, so * H + k, half) : 0.0f;
                                for (int s = 0; s < len[b]; s++) {
                                        const int t = d == 0 ? s : len[b] - 1 - s;
                                        const float *gt = gx + ((size_t)t * B + b) * GH;

                                        gemv_t(rec, lw.bR, lw.RT, hb, P, GH);
                                        switch (c->cell) {
                                        case CUDNN_RNN_RELU:
                                                for (int j = 0; j < H; j++) {
                                                        float v = gt[j] + rec[j];

                                                        hb[j] = v > 0.0f ? v : 0.0f;
                                                }
                                                break;
                                        case CUDNN_RNN_TANH:
                                                for (int j = 0; j < H; j++)
                                                        hb[j] = tanhf(gt[j] + rec[j]);
                                                break;
                                        case CUDNN_LSTM:
                                                for (int j = 0; j < H; j++) {
                                                        float ig = sigm(gt[j] + rec[j]);
                                                        float fg = sigm(gt[H + j] + rec[H + j]);
                                                        float cg = tanhf(gt[2 * H + j] +
                                                                         rec[2 * H + j]);
                                                        float og = sigm(gt[3 * H + j] +
                                                                        rec[3 * H + j]);

                                                        cb[j] = fg * cb[j] + ig * cg;
                                                        hh[j] = og * tanhf(cb[j]);
                                                }
                                                if (lw.projT != NULL) {
                                                        memset(hb, 0, sizeof(float) * P);
                                                        for (int j = 0; j < H; j++)
                                                                for (int k = 0; k < P; k++)
                                                                        hb[k] +=
                                                                                hh[j] *
                                                                                lw.projT[(size_t)j *
                                                                                                 P +
                                                                                         k];
                                                } else {
                                                        memcpy(hb, hh, sizeof(float) * H);
                                                }
                                                break;
                                        case CUDNN_GRU:
                                                for (int j = 0; j < H; j++) {
                                                        float r = sigm(gt[j] + rec[j]);
                                                        float z = sigm(gt[H + j] + rec[H + j]);
                                                        float n = tanhf(gt[2 * H + j] +
                                                                        r * rec[2 * H + j]);

                                                        hb[j] = (1.0f - z) * n + z * hb[j];
                                                }
                                                break;
                                        }
                                        for (int k = 0; k < P; k++) {
                                                float v = hb[k];

                                                /* A half network keeps its layer outputs in half.
                                                 */
                                                if (half)
                                                        v = sim_h2f(sim_f2h(v));
                                                out[((size_t)t * B + b) * W + (size_t)d * P + k] =
                                                        v;
                                        }
                                }
                                if (f->hy != NULL)
                                        for (int k = 0; k < P; k++)
                                                wr(f->hy, so * P + k, hb[k], half);
                                if (f->cy != NULL)
                                        for (int k = 0; k < H; k++)
                                                wr(f->cy, so * H + k, cb[k], half);
                        }
                        layer_free(&lw);
                }
        }

        /* y: the last layer's outputs, the padding fill (or NaN where none was given). */
        {
                const float *out = buf[(c->layers - 1) % 2];
                const float pad = f->has_fill ? f->fill : NAN;

                for (int b = 0; b < B; b++) {
                        for (int t = 0; t < T; t++) {
                                size_t r;

                                if (t >= len[b] &&
                                    f->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                                        break;
                                r = row_of(f, step_off, t, b);
                                for (int k = 0; k < W; k++)
                                        wr(f->y, r * W + k,
                                           t < len[b] ? out[((size_t)t * B + b) * W + k] : pad,
                                           half);
                        }
                }
        }
        free(rec);
        free(step_off);
        return cudaSuccess;
}

void sim_rnn_forward_free(struct sim_op *op)
{
        struct rnn_fwd *f = op->arg;

        free(f->w.mat);
        free(f->w.bias);
        free(f->len);
        free(f);
}
