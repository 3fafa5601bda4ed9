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

/* One forward pass's shapes and scratch (sim_rnn_forward_run). */
struct pass {
        struct rnn_fwd *f;
        const struct rnn_cfg *c;
        bool half;
        int dirs, G, H, P, B, T, W, GH;
        float *gx;        /* [T * B][GH]: the input GEMM of every step */
        float *h, *cst;   /* [dirs * B][P] and [dirs * B][H]: the states */
        float *rec, *hh;  /* [GH] and [H]: one step's recurrent GEMM and LSTM h */
        float *xin;       /* [in_max]: one step's input */
        size_t *step_off; /* [T + 1]: packed rows before step t */
};

/* devSeqLengths is read by the device now: it must still hold the lengths. */
static cudaError_t check_dev_len(const struct rnn_fwd *f)
{
        if (f->dev_len == NULL)
                return cudaSuccess;
        for (int b = 0; b < f->B; b++) {
                if (f->dev_len[b] != f->len[b]) {
                        sim_set_sticky(cudaErrorIllegalAddress,
                                       "cudnnRNNForward: devSeqLengths[%d] = %d when the pass "
                                       "ran, but the descriptor says %d",
                                       b, f->dev_len[b], f->len[b]);
                        return cudaErrorIllegalAddress;
                }
        }
        return cudaSuccess;
}

/* The input GEMM of every step of layer l: gx = W x + bW (x from f->x or prev). */
static void input_gemm(struct pass *ps, const struct layer_w *lw, int l, int in, const float *prev)
{
        const struct rnn_fwd *f = ps->f;

        for (int b = 0; b < ps->B; b++) {
                for (int t = 0; t < f->len[b]; t++) {
                        float *o = ps->gx + ((size_t)t * ps->B + b) * ps->GH;

                        if (l == 0) {
                                size_t r = row_of(f, ps->step_off, t, b);

                                for (int k = 0; k < in; k++)
                                        ps->xin[k] = rd(f->x, r * in + k, ps->half);
                        } else {
                                memcpy(ps->xin, prev + ((size_t)t * ps->B + b) * ps->W,
                                       sizeof(float) * in);
                        }
                        if (lw->WT != NULL) {
                                gemv_t(o, lw->bW, lw->WT, ps->xin, in, ps->GH);
                        } else { /* CUDNN_SKIP_INPUT: x into every gate */
                                for (int g = 0; g < ps->G; g++)
                                        for (int j = 0; j < ps->H; j++)
                                                o[g * ps->H + j] =
                                                        ps->xin[j] + lw->bW[g * ps->H + j];
                        }
                }
        }
}

/* The LSTM's step: cell cb and output hb (through the projection when there is one). */
static void lstm_step(const struct pass *ps, const struct layer_w *lw, const float *gt, float *hb,
                      float *cb)
{
        const int H = ps->H, P = ps->P;
        const float *rec = ps->rec;

        for (int j = 0; j < H; j++) {
                float ig = sigm(gt[j] + rec[j]);
                float fg = sigm(gt[H + j] + rec[H + j]);
                float cg = tanhf(gt[2 * H + j] + rec[2 * H + j]);
                float og = sigm(gt[3 * H + j] + rec[3 * H + j]);

                cb[j] = fg * cb[j] + ig * cg;
                ps->hh[j] = og * tanhf(cb[j]);
        }
        if (lw->projT == NULL) {
                memcpy(hb, ps->hh, sizeof(float) * H);
                return;
        }
        memset(hb, 0, sizeof(float) * P);
        for (int j = 0; j < H; j++)
                for (int k = 0; k < P; k++)
                        hb[k] += ps->hh[j] * lw->projT[(size_t)j * P + k];
}

/* One step of the cell on gt (the input part) and ps->rec (the recurrent part). */
static void cell_step(const struct pass *ps, const struct layer_w *lw, const float *gt, float *hb,
                      float *cb)
{
        const int H = ps->H;
        const float *rec = ps->rec;

        switch (ps->c->cell) {
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
                lstm_step(ps, lw, gt, hb, cb);
                break;
        case CUDNN_GRU:
                for (int j = 0; j < H; j++) {
                        float r = sigm(gt[j] + rec[j]);
                        float z = sigm(gt[H + j] + rec[H + j]);
                        float n = tanhf(gt[2 * H + j] + r * rec[2 * H + j]);

                        hb[j] = (1.0f - z) * n + z * hb[j];
                }
                break;
        }
}

/* The recurrence of sequence b in direction d of layer-direction pl, into out. */
static void recur(struct pass *ps, const struct layer_w *lw, int pl, int d, int b, float *out)
{
        const struct rnn_fwd *f = ps->f;
        const int H = ps->H, P = ps->P, B = ps->B, len = f->len[b];
        float *hb = ps->h + ((size_t)d * B + b) * P;
        float *cb = ps->cst + ((size_t)d * B + b) * H;
        const size_t so = ((size_t)pl * B + b);

        for (int k = 0; k < P; k++)
                hb[k] = f->hx != NULL ? rd(f->hx, so * P + k, ps->half) : 0.0f;
        for (int k = 0; k < H; k++)
                cb[k] = f->cx != NULL ? rd(f->cx, so * H + k, ps->half) : 0.0f;
        for (int s = 0; s < len; s++) {
                const int t = d == 0 ? s : len - 1 - s;

                gemv_t(ps->rec, lw->bR, lw->RT, hb, P, ps->GH);
                cell_step(ps, lw, ps->gx + ((size_t)t * B + b) * ps->GH, hb, cb);
                for (int k = 0; k < P; k++) {
                        /* A half network keeps its layer outputs in half. */
                        float v = ps->half ? sim_h2f(sim_f2h(hb[k])) : hb[k];

                        out[((size_t)t * B + b) * ps->W + (size_t)d * P + k] = v;
                }
        }
        if (f->hy != NULL)
                for (int k = 0; k < P; k++)
                        wr(f->hy, so * P + k, hb[k], ps->half);
        if (f->cy != NULL)
                for (int k = 0; k < H; k++)
                        wr(f->cy, so * H + k, cb[k], ps->half);
}

/* y: the last layer's outputs, the padding fill (or NaN where none was given). */
static void write_y(const struct pass *ps, const float *out)
{
        const struct rnn_fwd *f = ps->f;
        const float pad = f->has_fill ? f->fill : NAN;

        for (int b = 0; b < ps->B; b++) {
                for (int t = 0; t < ps->T; t++) {
                        size_t r;

                        if (t >= f->len[b] && f->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                                break;
                        r = row_of(f, ps->step_off, t, b);
                        for (int k = 0; k < ps->W; k++)
                                wr(f->y, r * ps->W + k,
                                   t < f->len[b] ? out[((size_t)t * ps->B + b) * ps->W + k] : pad,
                                   ps->half);
                }
        }
}

/* The packed rows before each step (sequences sorted longest first). */
static void step_offsets(const struct rnn_fwd *f, size_t *step_off)
{
        step_off[0] = 0;
        for (int t = 0; t < f->T; t++) {
                size_t n = 0;

                while (n < (size_t)f->B && f->len[n] > t)
                        n++;
                step_off[t + 1] = step_off[t] + n;
        }
}

cudaError_t sim_rnn_forward_run(struct sim_op *op)
{
        struct rnn_fwd *f = op->arg;
        const struct rnn_cfg *c = &f->c;
        const int dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1, G = sim_rnn_gates(c->cell);
        struct pass ps = {.f = f,
                          .c = c,
                          .half = c->type == CUDNN_DATA_HALF,
                          .dirs = dirs,
                          .G = G,
                          .H = c->hid,
                          .P = c->proj,
                          .B = f->B,
                          .T = f->T,
                          .W = dirs * c->proj,
                          .GH = G * c->hid};
        const size_t rows = (size_t)f->T * f->B;
        const int in_max = c->in > ps.W ? c->in : ps.W;
        struct layer_w lw = {0};
        cudaError_t e = check_dev_len(f);
        float *buf[2];

        if (e != cudaSuccess)
                return e;
        /* The workspace holds the layer outputs and the gates (work_size in dnn.c). */
        buf[0] = f->work;
        buf[1] = buf[0] + rows * ps.W;
        ps.gx = buf[1] + rows * ps.W;
        ps.h = ps.gx + rows * ps.GH;
        ps.cst = ps.h + (size_t)f->B * dirs * (ps.H + ps.P);
        if ((char *)(ps.cst + (size_t)f->B * dirs * (ps.H + ps.P)) > (char *)f->work + f->work_size)
                abort(); /* work_size and this carving disagree: a stand-in bug */
        ps.rec = malloc(sizeof(float) * (size_t)(ps.GH + ps.H + in_max));
        ps.step_off = malloc(sizeof(size_t) * ((size_t)f->T + 1));
        if (ps.rec == NULL || ps.step_off == NULL) {
                e = cudaErrorMemoryAllocation;
                goto out;
        }
        step_offsets(f, ps.step_off);
        ps.hh = ps.rec + ps.GH;
        ps.xin = ps.hh + ps.H;
        for (int l = 0; l < c->layers; l++) {
                float *out = buf[l % 2];
                const int in = l == 0 ? c->in : ps.W;

                memset(out, 0, sizeof(float) * rows * ps.W);
                for (int d = 0; d < dirs; d++) {
                        if (!layer_fetch(f, l * dirs + d, in, &lw)) {
                                e = cudaErrorMemoryAllocation;
                                goto out;
                        }
                        input_gemm(&ps, &lw, l, in, buf[(l + 1) % 2]);
                        for (int b = 0; b < f->B; b++)
                                recur(&ps, &lw, l * dirs + d, d, b, out);
                        layer_free(&lw);
                }
        }
        write_y(&ps, buf[(c->layers - 1) % 2]);
out:
        layer_free(&lw);
        free(ps.rec);
        free(ps.step_off);
        return e;
}

void sim_rnn_forward_free(struct sim_op *op)
{
        struct rnn_fwd *f = op->arg;

        free(f->w.mat);
        free(f->w.bias);
        free(f->len);
        free(f);
}
