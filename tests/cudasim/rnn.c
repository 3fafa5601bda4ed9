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

/* The row of (step t, sequence b) in x or y, in its layout. */
static size_t row_of(const struct rnn_fwd *f, const int *len, int t, int b)
{
        size_t r = 0;

        switch (f->layout) {
        case CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED:
                return (size_t)t * f->B + b;
        case CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED:
                return (size_t)b * f->T + t;
        default:
                /* Packed: step t holds the sequences longer than t, longest first. */
                for (int s = 0; s < t; s++)
                        for (int k = 0; k < f->B && len[k] > s; k++)
                                r++;
                return r + b;
        }
}

/* One matrix (or bias) of the weight space as fp32, or NULL where absent. */
static float *fetch(const struct rnn_fwd *f, const struct wblock *blk, bool half)
{
        size_t n = (size_t)blk->rows * blk->cols;
        float *m;

        if (blk->rows == 0)
                return NULL;
        m = malloc(sizeof(float) * n);
        if (m == NULL)
                return NULL;
        for (size_t i = 0; i < n; i++)
                m[i] = rd((const char *)f->wspace + blk->off, i, half);
        return m;
}

struct layer_w {
        float *W[4], *R[4], *bW[4], *bR[4], *proj;
};

static void layer_free(struct layer_w *lw)
{
        for (int g = 0; g < 4; g++) {
                free(lw->W[g]);
                free(lw->R[g]);
                free(lw->bW[g]);
                free(lw->bR[g]);
        }
        free(lw->proj);
        memset(lw, 0, sizeof(*lw));
}

static float dot(const float *a, const float *b, int n)
{
        float s = 0.0f;

        for (int k = 0; k < n; k++)
                s += a[k] * b[k];
        return s;
}

cudaError_t sim_rnn_forward_run(struct sim_op *op)
{
        struct rnn_fwd *f = op->arg;
        const struct rnn_cfg *c = &f->c;
        const bool half = c->type == CUDNN_DATA_HALF;
        const int dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1, G = sim_rnn_gates(c->cell);
        const int H = c->hid, P = c->proj, B = f->B, T = f->T, W = dirs * P;
        const size_t rows = (size_t)T * B;
        float *buf[2], *gx, *h, *cst, *rec, *hh;
        int *len = f->len;
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
        h = gx + rows * G * H;
        cst = h + (size_t)B * dirs * (H + P);
        if ((char *)(cst + (size_t)B * dirs * (H + P)) > (char *)f->work + f->work_size)
                abort(); /* work_size and this carving disagree: a stand-in bug */
        rec = malloc(sizeof(float) * (size_t)(G * H + H));
        if (rec == NULL)
                return cudaErrorMemoryAllocation;
        hh = rec + G * H;

        for (int l = 0; l < c->layers; l++) {
                float *out = buf[l % 2];
                const float *prev = buf[(l + 1) % 2];
                const int in = l == 0 ? c->in : W;

                for (size_t i = 0; i < rows * W; i++)
                        out[i] = 0.0f;
                for (int d = 0; d < dirs; d++) {
                        const int pl = l * dirs + d;
                        const struct wblock *mb = &f->w.mat[pl * f->w.n_lin];
                        const struct wblock *bb = &f->w.bias[pl * f->w.n_lin];

                        for (int g = 0; g < G; g++) {
                                lw.W[g] = fetch(f, &mb[g], half);
                                lw.R[g] = fetch(f, &mb[G + g], half);
                                lw.bW[g] = fetch(f, &bb[g], half);
                                lw.bR[g] = fetch(f, &bb[G + g], half);
                        }
                        if (c->cell == CUDNN_LSTM)
                                lw.proj = fetch(f, &mb[2 * G], half);

                        /* The input GEMM of every step: gx = W x + bW. */
                        for (int b = 0; b < B; b++) {
                                for (int t = 0; t < len[b]; t++) {
                                        float xin_buf[4096], *xin = xin_buf;
                                        float *o = gx + ((size_t)t * B + b) * G * H;

                                        if (in > 4096 && (xin = malloc(sizeof(float) * in)) == NULL)
                                                abort();
                                        if (l == 0) {
                                                size_t r = row_of(f, len, t, b);

                                                for (int k = 0; k < in; k++)
                                                        xin[k] = rd(f->x, r * in + k, half);
                                        } else {
                                                memcpy(xin, prev + ((size_t)t * B + b) * W,
                                                       sizeof(float) * in);
                                        }
                                        for (int g = 0; g < G; g++)
                                                for (int j = 0; j < H; j++)
                                                        o[g * H + j] =
                                                                (lw.W[g] != NULL
                                                                         ? dot(lw.W[g] + (size_t)j *
                                                                                                 in,
                                                                               xin, in)
                                                                         : xin[j]) +
                                                                (lw.bW[g] != NULL ? lw.bW[g][j]
                                                                                  : 0.0f);
                                        if (xin != xin_buf)
                                                free(xin);
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
                                        const float *gt = gx + ((size_t)t * B + b) * G * H;

                                        for (int g = 0; g < G; g++)
                                                for (int j = 0; j < H; j++)
                                                        rec[g * H + j] =
                                                                dot(lw.R[g] + (size_t)j * P, hb,
                                                                    P) +
                                                                (lw.bR[g] != NULL ? lw.bR[g][j]
                                                                                  : 0.0f);
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
                                                for (int k = 0; k < P; k++)
                                                        hb[k] = lw.proj != NULL
                                                                        ? dot(lw.proj +
                                                                                      (size_t)k * H,
                                                                              hh, H)
                                                                        : hh[k];
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
                                r = row_of(f, len, t, b);
                                for (int k = 0; k < W; k++)
                                        wr(f->y, r * W + k,
                                           t < len[b] ? out[((size_t)t * B + b) * W + k] : pad,
                                           half);
                        }
                }
        }
        free(rec);
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
