/*
 * cudnn.c: the cuDNN backend's plans, computing DESIGN.md §4 on one GPU:
 * open, run, describe, close (cudnn-chain.c holds the ops table, which runs
 * a chain of blocks as a plan per block).  Beside it, by job: cudnn-status.c
 * (errors and faults), cudnn-info.c (what the machine has), cudnn-weights.c
 * (descriptors and weight spaces), cudnn-probe.c (the algorithm), cudnn-cache.c
 * (what the plans of a model on a GPU share) and layout.c (a batch's layout).
 *
 * DESIGN
 * A plan is built once per model per GPU instance, on the instance's worker
 * thread, and kept.  It owns a stream, a cuDNN handle and a cuBLAS handle
 * bound to that stream, so plans on one GPU overlap (one worker's copy-in
 * with another's compute) and never share a handle (cuDNN's threading rule).
 * The plans of one model on one GPU share (struct shared, built by the
 * first, immutable after):
 *   - the RNN descriptor (cudnnSetRNNDescriptor_v8, DOUBLE_BIAS, PADDED_IO,
 *     fp32 data with FMA math, or fp16 data with fp32 math on tensor ops),
 *     with the weights laid into its weight space through
 *     cudnnGetRNNWeightParams from the canonical layout (model.h, already in
 *     cuDNN's gate order), and maybe a second descriptor with a persistent
 *     algorithm for equal-length batches, chosen by timing once per model
 *     and GPU, never beside another plan's timing on that GPU.
 * Each plan holds:
 *   - one pinned input region and one pinned output region, and their device
 *     mirrors, sized for the largest batch (max_batch_size sequences,
 *     max_batch_steps = n x longest; no x region for token inputs), and a
 *     workspace sized for every batch shape, so run() allocates nothing.
 * run() lays the batch into the input region (layout.c: lengths, gather
 * indexes, x per sequence, h0/c0), copies it with one cudaMemcpyAsync, and
 * on the stream: gathers x (or the embedding rows) into cuDNN's
 * SEQ_MAJOR_UNPACKED layout, converting to fp16 where needed; runs
 * cudnnRNNForward with per-sequence lengths (cuDNN stops each sequence at
 * its own length, so hy/cy are each sequence's own last state and the
 * reverse direction starts there, as PyTorch's packed sequences do); applies
 * the head with cuBLAS and a small kernel; gathers y, h_n, c_n and scores
 * back to batch-major fp32 in the output region; copies it back with one
 * cudaMemcpyAsync and synchronizes.  Then each sequence's outputs are copied
 * to its own buffers.
 * Faults: every CUDA, cuDNN and cuBLAS status goes through GPU_CK, which
 * turns a failure into RNND_EGPU with the library's message; an error that
 * leaves the device unusable (a sticky CUDA error) marks the plan lost, and
 * run() returns RNND_EDEVLOST from then on.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"
#include "cudnn/cudnn.h"

/*
 * Floats of the pinned windows that a batch's inputs and outputs go through
 * (4 MiB each): the pinned staging is these plus the indexes and states of
 * the largest batch, not max_batch_steps x input_size and x outputs.
 */
#define STAGING_WINDOW ((size_t)1 << 20)

_Static_assert(RNND__CUDNN_GPUS == RNND_CUDNN_MAX_DEVICES, "cudnn-int.h and cudnn.h disagree");

/* Where this run's outputs lie in the output region, in floats. */
struct out_layout {
        size_t y, hn, cn, sc, end;
        bool want_y, want_h, want_c, want_s;
};

/* Plans. */

static const char *algo_name(cudnnRNNAlgo_t a)
{
        switch (a) {
        case CUDNN_RNN_ALGO_STANDARD:
                return "STANDARD";
        case CUDNN_RNN_ALGO_PERSIST_STATIC:
                return "PERSIST_STATIC";
        case CUDNN_RNN_ALGO_PERSIST_DYNAMIC:
                return "PERSIST_DYNAMIC";
        case CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H:
                return "PERSIST_STATIC_SMALL_H";
        default:
                return "?";
        }
}

/* Elements of the largest batch: its input region, output region and rows. */
static void plan_sizes(struct plan *p)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint64_t LD = (uint64_t)cfg->num_layers * m->dirs,
                       DP = (uint64_t)m->dirs * m->out_size;
        const uint64_t U = cfg->head.present ? cfg->head.units : 0;
        uint64_t rows = cfg->batching.max_batch_steps, n = cfg->batching.max_batch_size;
        uint32_t T;

        if (rows > n * cfg->max_sequence_length)
                rows = n * cfg->max_sequence_length;
        p->max_n = (uint32_t)n;
        p->max_rows = rows;
        T = (uint32_t)((rows + n - 1) / n);
        p->in_elems = rnnd__cudnn_in_size(m, p->max_n, T > 0 ? T : 1, true);
        p->h_head = rnnd__cudnn_in_size(m, p->max_n, T > 0 ? T : 1, false);
        p->x_win = p->in_elems - p->h_head;
        p->x_win = p->x_win < rnnd__cudnn_staging_window ? p->x_win : rnnd__cudnn_staging_window;
        p->h_elems = p->h_head + p->x_win;
        {
                /* The probe batch (probe_algos) stages x even for a model with an embedding. */
                const uint64_t pt = T < PROBE_STEPS ? T : PROBE_STEPS;
                const uint64_t probe = ((n + 15) & ~15u) + n * (pt > 0 ? pt : 1) * cfg->input_size;

                p->in_elems = p->in_elems > probe ? p->in_elems : probe;
                p->h_elems = p->h_elems > probe ? p->h_elems : probe;
        }
        rows = (uint64_t)p->max_n * (T > 0 ? T : 1);
        p->out_elems = rows * DP + n * LD * (m->out_size + cfg->hidden_size) +
                       (cfg->head.apply == RNND_HEAD_ALL ? rows : n) * U + 64;
        p->max_rows = p->max_rows < rows ? p->max_rows : rows;
        p->out_win = p->out_elems < rnnd__cudnn_staging_window ? p->out_elems
                                                               : rnnd__cudnn_staging_window;
}

static int alloc_buffers(struct plan *p, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const size_t LD = (size_t)cfg->num_layers * m->dirs, n = p->max_n;
        const size_t rows = (size_t)n * ((p->max_rows + n - 1) / n);
        const size_t U = cfg->head.present ? cfg->head.units : 0;
        int r = 0;

        GPU_CK(cudaMallocHost(&p->h_in, p->h_elems * 4));
        GPU_CK(cudaMallocHost((void **)&p->h_out, p->out_win * sizeof(float)));
        GPU_CK(cudaMalloc(&p->d_in, p->in_elems * 4));
        GPU_CK(cudaMalloc((void **)&p->d_out, p->out_elems * sizeof(float)));
        GPU_CK(cudaMalloc(&p->d_x, rows * cfg->input_size * p->esz));
        GPU_CK(cudaMalloc(&p->d_y, rows * m->dirs * m->out_size * p->esz));
        GPU_CK(cudaMalloc(&p->d_hx, LD * n * m->out_size * p->esz));
        GPU_CK(cudaMalloc(&p->d_hy, LD * n * m->out_size * p->esz));
        GPU_CK(cudaMalloc(&p->d_cx, LD * n * cfg->hidden_size * p->esz));
        GPU_CK(cudaMalloc(&p->d_cy, LD * n * cfg->hidden_size * p->esz));
        if (U > 0 && cfg->head.apply == RNND_HEAD_ALL)
                GPU_CK(cudaMalloc((void **)&p->d_head, rows * U * sizeof(float)));
out:
        return r;
}

/* cuDNN's limit on maxSeqLength in cudnnSetRNNDataDescriptor. */
#define CUDNN_MAX_SEQ_LEN 65535u

bool rnnd__cudnn_plan_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap)
{
        const uint64_t H = cfg->hidden_size, in = cfg->input_size,
                       dirs = cfg->bidirectional ? 2 : 1;
        const uint64_t P = cfg->proj_size != 0 ? cfg->proj_size : H;
        const uint64_t B = cfg->batching.max_batch_size;
        const uint64_t rows_all = B * cfg->max_sequence_length;

        const uint64_t rows =
                cfg->batching.max_batch_steps < rows_all ? cfg->batching.max_batch_steps : rows_all;
        /*
         * The 32-bit arguments sizes reach: batch rows (B x longest) are
         * cuBLAS's int m/n, cuDNN's int batch and the gather's int32
         * indexes; a matrix's elements are the weight copy's uint32 count.
         */
        const struct {
                const char *field;
                uint64_t value, max;
        } lim[] = {
                {"batching.max_batch_steps", rows, INT32_MAX},
                {"batching.max_batch_size", B, INT32_MAX},
                {"input_size", H * in, UINT32_MAX},
                {"hidden_size", H * P, UINT32_MAX},
                {"head.units", cfg->head.present ? cfg->head.units * dirs * P : 0, UINT32_MAX},
                {"embedding.num_embeddings",
                 cfg->embedding.present ? (uint64_t)cfg->embedding.num_embeddings * in : 0,
                 UINT32_MAX},
        };

        if (cfg->cell == RNND_CELL_GRU && !cfg->gru_linear_before_reset) {
                snprintf(why, cap,
                         "GRU with gru_linear_before_reset=false (Keras reset_after=False) has no "
                         "cuDNN equivalent");
                return false;
        }
        if (cfg->max_sequence_length > CUDNN_MAX_SEQ_LEN) {
                snprintf(why, cap, "max_sequence_length %u is above cuDNN's limit of %u",
                         cfg->max_sequence_length, CUDNN_MAX_SEQ_LEN);
                return false;
        }
        for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++)
                if (lim[i].value > lim[i].max) {
                        snprintf(why, cap,
                                 "%s: %llu elements or rows would truncate a 32-bit argument of "
                                 "cuDNN or cuBLAS (at most %llu)",
                                 lim[i].field, (unsigned long long)lim[i].value,
                                 (unsigned long long)lim[i].max);
                        return false;
                }
        /* A projection (LSTM proj_size) runs with the STANDARD algorithm only. */
        if (cap > 0)
                why[0] = '\0';
        return true;
}

int rnnd__cudnn_plan_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, struct plan **ret,
                          rnnd_error_t *reterr)
{
        struct plan *p = rnnd_calloc(1, sizeof(*p));
        struct cudaDeviceProp prop;
        char why[256];
        int count = 0, r = 0;

        if (p == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a cuDNN plan");
        p->m = rnnd_model_ref(m);
        p->device = opts != NULL ? opts->device : 0;
        if (!rnnd__cudnn_plan_qualifies(&m->cfg, why, sizeof(why))) {
                r = rnnd_error_set(reterr, RNND_EUNSUPPORTED, "not on cuDNN: %s", why);
                goto out;
        }
        if (rnnd__cudnn_device_fault() != NULL) {
                r = rnnd_error_set(reterr, RNND_EGPU,
                                   "GPU %d: a device fault in this process (%s); restart it",
                                   p->device, rnnd__cudnn_device_fault());
                goto out;
        }
        GPU_CK(cudaGetDeviceCount(&count));
        if (p->device < 0 || p->device >= count) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "GPU %d is not visible (%d visible)",
                                   p->device, count);
                goto out;
        }
        GPU_CK(cudaSetDevice(p->device));
        GPU_CK(cudaGetDeviceProperties(&prop, p->device));
        snprintf(p->device_name, sizeof(p->device_name), "%.95s", prop.name);
        p->cc = prop.major * 10 + prop.minor;
        p->half = m->cfg.precision == RNND_PREC_FP16;
        p->dt = p->half ? RNND__F16 : RNND__F32;
        p->cdt = p->half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
        p->esz = p->half ? 2 : 4;
        plan_sizes(p);

        GPU_CK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
        GPU_CK(cudnnCreate(&p->handle));
        GPU_CK(cudnnSetStream(p->handle, p->stream));
        GPU_CK(cublasCreate(&p->blas));
        GPU_CK(cublasSetStream(p->blas, p->stream));
        /* No TF32 in the head's fp32 GEMM: fp32 results must match the CPU engine. */
        GPU_CK(cublasSetMathMode(p->blas, CUBLAS_DEFAULT_MATH));
        GPU_CK(cudnnCreateRNNDataDescriptor(&p->xdesc));
        GPU_CK(cudnnCreateRNNDataDescriptor(&p->ydesc));
        GPU_CK(cudnnCreateTensorDescriptor(&p->hdesc));
        GPU_CK(cudnnCreateTensorDescriptor(&p->cdesc));
        GPU_CK(cudnnCreateTensorDescriptor(&p->mdesc));
        GPU_CK(cudnnCreateTensorDescriptor(&p->bdesc));
        r = alloc_buffers(p, reterr);
        if (r == 0)
                r = rnnd__cudnn_shared_take(p, reterr);
        if (r < 0)
                goto out;
        GPU_CK(cudaStreamSynchronize(p->stream));
        *ret = p;
        return 0;
out:
        if (r == RNND_EDEVLOST) /* at open the whole instance fails, not a batch */
                r = RNND_EGPU;
        if (reterr != NULL)
                reterr->code = r;
        rnnd__cudnn_plan_close(p);
        return r;
}

void rnnd__cudnn_plan_close(struct plan *p)
{
        if (p == NULL)
                return;
        if (p->stream != NULL) {
                cudaSetDevice(p->device);
                cudaStreamSynchronize(p->stream);
        }
        if (p->sh != NULL)
                rnnd__cudnn_shared_drop(p->sh);
        else /* a build that failed half-way */
                rnnd__cudnn_weights_free(p->dropout, &p->std, &p->fast, p->d_w, p->d_head_w16);
        if (p->xdesc != NULL)
                cudnnDestroyRNNDataDescriptor(p->xdesc);
        if (p->ydesc != NULL)
                cudnnDestroyRNNDataDescriptor(p->ydesc);
        cudnnTensorDescriptor_t *const tds[] = {&p->hdesc, &p->cdesc, &p->mdesc, &p->bdesc};
        for (size_t i = 0; i < sizeof(tds) / sizeof(tds[0]); i++)
                if (*tds[i] != NULL)
                        cudnnDestroyTensorDescriptor(*tds[i]);
        void *const bufs[] = {p->work, p->d_in, p->d_out, p->d_x,  p->d_y,
                              p->d_hx, p->d_cx, p->d_hy,  p->d_cy, p->d_head};
        for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
                if (bufs[i] != NULL)
                        cudaFree(bufs[i]);
        if (p->h_in != NULL)
                cudaFreeHost(p->h_in);
        if (p->h_out != NULL)
                cudaFreeHost(p->h_out);
        if (p->blas != NULL)
                cublasDestroy(p->blas);
        if (p->handle != NULL)
                cudnnDestroy(p->handle);
        if (p->stream != NULL)
                cudaStreamDestroy(p->stream);
        (void)cudaGetLastError();
        rnnd_model_unref(p->m);
        rnnd_free(p);
}

void rnnd__cudnn_plan_describe(const struct plan *p, struct rnnd_backend_desc *d)
{
        int cudnn = (int)cudnnGetVersion(), cudart = 0;

        memset(d, 0, sizeof(*d));
        snprintf(d->backend, sizeof(d->backend), "cudnn");
        /* Not rnnd_cudnn_info(): that asks every GPU for its properties, per instance. */
        cudaRuntimeGetVersion(&cudart);
        snprintf(d->versions, sizeof(d->versions), "cuDNN %d.%d.%d, CUDA runtime %d.%d",
                 cudnn / 10000, cudnn % 10000 / 100, cudnn % 100, cudart / 1000,
                 cudart % 1000 / 10);
        if (p == NULL) {
                snprintf(d->device, sizeof(d->device), "GPU");
                snprintf(d->algo, sizeof(d->algo), "STANDARD");
                snprintf(d->math, sizeof(d->math), "FMA fp32");
                return;
        }
        snprintf(d->device, sizeof(d->device), "GPU %d (%.50s)", p->device, p->device_name);
        if (p->fast.desc != NULL)
                snprintf(d->algo, sizeof(d->algo), "STANDARD; equal: %s", algo_name(p->fast.algo));
        else
                snprintf(d->algo, sizeof(d->algo), "STANDARD");
        snprintf(d->math, sizeof(d->math), "%s", p->half ? "TENSOR_OP fp16/fp32" : "FMA fp32");
}

/* Offsets of this run's outputs in the output region. */
static void out_layout(const struct plan *p, const struct rnnd_batch *b,
                       const struct rnnd__cudnn_layout *o, struct out_layout *ol)
{
        const rnnd_model_t *m = p->m;
        const size_t rows = (size_t)o->n * o->T, LD = o->LD, U = m->cfg.head.units;
        size_t at = 0;

        memset(ol, 0, sizeof(*ol));
        for (uint32_t i = 0; i < b->n; i++) {
                ol->want_y |= b->seqs[i].y != NULL;
                ol->want_h |= b->seqs[i].h_n != NULL;
                ol->want_c |= b->seqs[i].c_n != NULL && m->cfg.cell == RNND_CELL_LSTM;
                ol->want_s |= b->seqs[i].scores != NULL && m->cfg.head.present;
        }
        ol->y = at;
        at += ol->want_y ? rows * m->dirs * m->out_size : 0;
        ol->hn = at;
        at += ol->want_h ? o->n * LD * m->out_size : 0;
        ol->cn = at;
        at += ol->want_c ? o->n * LD * m->cfg.hidden_size : 0;
        ol->sc = at;
        at += ol->want_s ? (m->cfg.head.apply == RNND_HEAD_ALL ? rows : o->n) * U : 0;
        ol->end = at;
}

/* C[U, rows] (column-major) = W[:, col0 : col0 + k] x B[k, rows], cuBLAS. */
static int head_gemm(struct plan *p, size_t col0, uint32_t k, const void *B, uint32_t rows,
                     float beta, float *C, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const int U = (int)m->cfg.head.units, F = (int)(m->dirs * m->out_size);
        const cudaDataType_t t = p->half ? CUDA_R_16F : CUDA_R_32F;
        const void *A = p->half ? (const void *)((const uint16_t *)p->d_head_w16 + col0)
                                : (const void *)(p->d_w + (m->head_w - m->wbuf) + col0);
        const float alpha = 1.0f;
        int r = 0;

        GPU_CK(cublasGemmEx(p->blas, CUBLAS_OP_T, CUBLAS_OP_N, U, (int)rows, (int)k, &alpha, A, t,
                            F, B, t, (int)k, &beta, C, CUDA_R_32F, U, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
out:
        return r;
}

/* The head on the device into d_out's scores (batch-major rows). */
static int run_head(struct plan *p, const struct rnnd__cudnn_layout *o, const struct out_layout *ol,
                    rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const uint32_t U = m->cfg.head.units, P = m->out_size, n = o->n, rows = n * o->T;
        const float *bias = p->d_w + (m->head_b - m->wbuf);
        const int32_t *idx_y = (const int32_t *)p->d_in + o->idx_y;
        float *dst = p->d_out + ol->sc;
        int r = 0;

        if (m->cfg.head.apply == RNND_HEAD_ALL) {
                r = head_gemm(p, 0, m->dirs * P, p->d_y, rows, 0.0f, p->d_head, reterr);
                if (r < 0)
                        return r;
                GPU_CK(rnnd__cuda_head_finish(p->d_head, bias, rows, U, (int)m->cfg.head.activation,
                                              p->stream));
                GPU_CK(rnnd__cuda_gather(p->d_head, RNND__F32, idx_y, rows, U, dst, RNND__F32,
                                         p->stream));
                return 0;
        }
        /* The top layer's final states, one GEMM per direction into the same rows. */
        for (uint32_t d = 0; d < m->dirs; d++) {
                const size_t ld = (size_t)(m->cfg.num_layers - 1) * m->dirs + d;
                const void *hy = (const char *)p->d_hy + ld * n * P * p->esz;

                r = head_gemm(p, (size_t)d * P, P, hy, n, d == 0 ? 0.0f : 1.0f, dst, reterr);
                if (r < 0)
                        return r;
        }
        GPU_CK(rnnd__cuda_head_finish(dst, bias, n, U, (int)m->cfg.head.activation, p->stream));
out:
        return r;
}

/*
 * Copies the part [from, from + count) of the output region, which the
 * pinned window h_out holds, to each sequence's buffers.
 */
static void scatter(const struct plan *p, const struct rnnd_batch *b,
                    const struct rnnd__cudnn_layout *o, const struct out_layout *ol, size_t from,
                    size_t count)
{
        const rnnd_model_t *m = p->m;
        const size_t DP = (size_t)m->dirs * m->out_size, T = o->T, LD = o->LD;
        const size_t P = m->out_size, H = m->cfg.hidden_size, U = m->cfg.head.units;
        const bool all = m->cfg.head.apply == RNND_HEAD_ALL;

        for (uint32_t i = 0; i < b->n; i++) {
                const struct rnnd_seq *q = &b->seqs[i];

                if (q->y != NULL)
                        rnnd__cudnn_window(q->y, ol->y + i * T * DP, q->len * DP, p->h_out, from,
                                           count, false);
                if (q->h_n != NULL)
                        rnnd__cudnn_window(q->h_n, ol->hn + i * LD * P, LD * P, p->h_out, from,
                                           count, false);
                if (q->c_n != NULL && ol->want_c)
                        rnnd__cudnn_window(q->c_n, ol->cn + i * LD * H, LD * H, p->h_out, from,
                                           count, false);
                if (q->scores != NULL && ol->want_s)
                        rnnd__cudnn_window(q->scores, ol->sc + i * (all ? T : 1) * U,
                                           (all ? q->len : 1) * U, p->h_out, from, count, false);
        }
}

size_t rnnd__cudnn_staging_window = STAGING_WINDOW;

/*
 * When STANDARD asks for more workspace for this batch's exact shape than
 * rnnd__cudnn_size_workspace() found (its sizes are not monotonic in the length): the
 * shape with the next longest length it did ask about, which holds the
 * same rows at the same places (padding after).
 */
static int fit_workspace(struct plan *p, const struct rnnd__cudnn_layout *o, rnnd_error_t *reterr)
{
        const uint64_t tm = p->max_rows / o->n;
        const uint32_t Tmax =
                (uint32_t)(tm < p->m->cfg.max_sequence_length ? tm : p->m->cfg.max_sequence_length);
        size_t ws = 0;
        uint32_t T2 = 1;
        int r = 0;

        GPU_CK(cudnnGetRNNTempSpaceSizes(p->handle, p->std.desc, CUDNN_FWD_MODE_INFERENCE, p->xdesc,
                                         &ws, NULL));
        if (ws <= p->work_size)
                return 0;
        while (T2 < o->T)
                T2 *= 2;
        r = rnnd__cudnn_set_shapes(p, o->n, T2 < Tmax ? T2 : Tmax,
                                   (const int32_t *)p->h_in + o->len, reterr);
out:
        return r;
}

/*
 * Copies the batch's inputs into the device input region's x, through the
 * pinned window after the part before x: fill, copy, and wait for the copy
 * to have read the window before filling it again.
 */
static int copy_x(struct plan *p, const struct rnnd_batch *b, const struct rnnd__cudnn_layout *o,
                  rnnd_error_t *reterr)
{
        const size_t total = o->end - o->x;
        float *win = (float *)p->h_in + p->h_head;
        int r = 0;

        for (size_t from = 0; from < total; from += p->x_win) {
                const size_t count = total - from < p->x_win ? total - from : p->x_win;

                if (from > 0)
                        GPU_CK(cudaStreamSynchronize(p->stream));
                rnnd__cudnn_stage_x(p->m, b, o, from, count, win);
                GPU_CK(cudaMemcpyAsync((float *)p->d_in + o->x + from, win, count * 4,
                                       cudaMemcpyHostToDevice, p->stream));
        }
out:
        return r;
}

/*
 * The batch's x into cuDNN's [T, n, in] on the device: the block before's y
 * (a chain, prev), or the inputs through the pinned window, or the
 * embedding's rows, gathered and converted.
 */
static int load_x(struct plan *p, const struct rnnd_batch *b, const struct rnnd__cudnn_layout *o,
                  const struct plan *prev, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const int32_t *din = p->d_in;
        int r = 0;

        if (prev != NULL) { /* the same layout, in = the block before's width */
                GPU_CK(cudaStreamSynchronize(prev->stream));
                GPU_CK(cudaMemcpyAsync(p->d_x, prev->d_y,
                                       (size_t)o->n * o->T * m->cfg.input_size * p->esz,
                                       cudaMemcpyDeviceToDevice, p->stream));
                return 0;
        }
        if (m->embedding == NULL) {
                r = copy_x(p, b, o, reterr);
                if (r < 0)
                        return r;
        }
        GPU_CK(rnnd__cuda_gather(m->embedding != NULL
                                         ? (const void *)(p->d_w + (m->embedding - m->wbuf))
                                         : (const void *)((const float *)din + o->x),
                                 RNND__F32, din + o->idx_x, o->n * o->T, m->cfg.input_size, p->d_x,
                                 p->dt, p->stream));
out:
        return r;
}

int rnnd__cudnn_plan_run(struct plan *p, const struct rnnd_batch *b, const struct plan *prev,
                         rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t P = m->out_size, H = cfg->hidden_size, DP = m->dirs * P;
        struct rnnd__cudnn_layout o;
        struct out_layout ol;
        const int32_t *din;
        struct rnn *rn;
        uint32_t T = 0;
        int r = 0;

        if (p->lost)
                return rnnd_error_set(reterr, RNND_EDEVLOST, "GPU %d is out of service: %s",
                                      p->device, p->lost_msg);
        if (rnnd__cudnn_device_fault() != NULL)
                return rnnd_error_set(reterr, RNND_EDEVLOST,
                                      "GPU %d is out of service: a device fault in this process "
                                      "(%s)",
                                      p->device, rnnd__cudnn_device_fault());
        if (prev == NULL) /* a later block's batch is the first's, checked there */
                r = rnnd__cudnn_check(m, b, p->max_n, p->max_rows, &T, reterr);
        if (r < 0)
                return r;
        GPU_CK(cudaSetDevice(p->device));
        rnnd__cudnn_stage(m, b, p->h_in, &o);
        out_layout(p, b, &o, &ol);
        din = p->d_in;
        GPU_CK(cudaMemcpyAsync(p->d_in, p->h_in, o.x * 4, cudaMemcpyHostToDevice, p->stream));
        r = load_x(p, b, &o, prev, reterr);
        if (r < 0)
                goto out;
        if (o.any_h0)
                GPU_CK(rnnd__cuda_gather((const float *)din + o.h0, RNND__F32, din + o.idx_hin,
                                         o.LD * o.n, P, p->d_hx, p->dt, p->stream));
        if (o.any_c0)
                GPU_CK(rnnd__cuda_gather((const float *)din + o.c0, RNND__F32, din + o.idx_hin,
                                         o.LD * o.n, H, p->d_cx, p->dt, p->stream));
        r = rnnd__cudnn_set_shapes(p, o.n, o.T, (const int32_t *)p->h_in + o.len, reterr);
        if (r < 0)
                goto out;
        rn = &p->std;
        if (o.equal && p->fast.desc != NULL &&
            (p->fast.algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC || p->fast.dyn_batch == (int)o.n))
                rn = &p->fast;
        r = rnnd__cudnn_forward(p, rn, din + o.len, o.any_h0 ? p->d_hx : NULL,
                                o.any_c0 ? p->d_cx : NULL, reterr);
        if (r < 0 && r != RNND_EDEVLOST && rn != &p->std) /* refused this shape: STANDARD */
                rn = &p->std;
        if (r < 0 && r != RNND_EDEVLOST && rn == &p->std) {
                r = fit_workspace(p, &o, reterr);
                if (r == 0)
                        r = rnnd__cudnn_forward(p, &p->std, din + o.len, o.any_h0 ? p->d_hx : NULL,
                                                o.any_c0 ? p->d_cx : NULL, reterr);
        }
        if (r == 0 && ol.want_s)
                r = run_head(p, &o, &ol, reterr);
        if (r < 0)
                goto out;
        if (ol.want_y)
                GPU_CK(rnnd__cuda_gather(p->d_y, p->dt, din + o.idx_y, o.n * o.T, DP,
                                         p->d_out + ol.y, RNND__F32, p->stream));
        if (ol.want_h)
                GPU_CK(rnnd__cuda_gather(p->d_hy, p->dt, din + o.idx_hout, o.n * o.LD, P,
                                         p->d_out + ol.hn, RNND__F32, p->stream));
        if (ol.want_c)
                GPU_CK(rnnd__cuda_gather(p->d_cy, p->dt, din + o.idx_hout, o.n * o.LD, H,
                                         p->d_out + ol.cn, RNND__F32, p->stream));
        /* The outputs come back through the pinned window: copy, wait, hand out. */
        for (size_t from = 0; from < ol.end; from += p->out_win) {
                const size_t count = ol.end - from < p->out_win ? ol.end - from : p->out_win;

                GPU_CK(cudaMemcpyAsync(p->h_out, p->d_out + from, count * sizeof(float),
                                       cudaMemcpyDeviceToHost, p->stream));
                GPU_CK(cudaStreamSynchronize(p->stream));
                scatter(p, b, &o, &ol, from, count);
        }
        if (ol.end == 0)
                GPU_CK(cudaStreamSynchronize(p->stream));
out:
        if (r < 0 && !p->lost) {
                /* Drain what was queued, so the next batch starts clean; it may reveal a fault. */
                cudaError_t e = cudaStreamSynchronize(p->stream);

                if (rnnd__cudnn_sticky(e))
                        r = rnnd__cudnn_check_cuda(p, e, "cudaStreamSynchronize", reterr);
        }
        return r;
}

int rnnd__cudnn_inject_fault(void *plan, int kind)
{
        struct plan *p = plan;

        if (kind == 1) {
                p->fail_next = true;
                return 0;
        }
        cudaSetDevice(p->device);
        return rnnd__cuda_fault(p->stream) == cudaSuccess ? 0 : RNND_EGPU;
}
