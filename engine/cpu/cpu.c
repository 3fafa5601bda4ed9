/*
 * cpu.c: the CPU engine, an rnnd_backend_ops computing DESIGN.md §4 in fp32.
 *
 * DESIGN
 * A batch runs in PyTorch's packed-sequence layout.  The sequences are sorted
 * by length, longest first, so that at step t the n_t sequences still running
 * are the first n_t rows, and the rows of all steps lie one after another
 * (step t's rows start at offs[t]).  For each layer and direction:
 *   - the input projection of a chunk of steps is one GEMM, [rows, in] x
 *     W_ih^T, where the rows are contiguous by construction;
 *   - each step is one GEMM for the recurrence, h[0..n_t) x W_hh^T, followed
 *     by one fused loop over the gates that also updates the state in place;
 *   - the forward direction runs steps 0..T-1 and a sequence stops changing
 *     once its length is passed, so its state is the state at its last step;
 *     the reverse direction runs T-1..0 and a sequence joins at its own last
 *     step with its initial state, which is exactly PyTorch's packed
 *     semantics.
 * The layer's output [S, dirs * H'] is the next layer's input.  The head, the
 * embedding gather and the scatter of outputs back to each sequence's own
 * buffers work on the same rows.  Scratch memory belongs to the plan, grows to
 * the largest batch seen, and is bounded by max_batch_size x max_batch_steps.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cpu/cpu-int.h"

/* Steps per input-projection GEMM: bounds the scratch for gates. */
#define CHUNK_STEPS 32u

/* One layer-direction's recurrent weights, packed for rnnd__cpu_gemm_packed(). */
struct packed {
        const float *rec;  /* W_hh [G*H, H'] (GRU reset-before: its r,z rows [2H, H]) */
        const float *rec2; /* GRU reset-before: W_hh's n rows [H, H]; LSTM: W_hr [H', H] */
};

struct cpu_plan {
        rnnd_model_t *m;   /* a reference; immutable after open */
        unsigned threads;  /* BLAS threads; immutable after open */
        struct packed *pw; /* [num_layers * dirs]; immutable after open */
        float *pbuf;       /* owns what pw points to */
        float *scratch;    /* worker thread only */
        size_t cap;        /* floats in scratch; worker thread only */
        uint32_t *ibuf;    /* order, nt, offs; worker thread only */
        size_t icap;       /* uint32s in ibuf; worker thread only */
};

/* The packed layout of one batch. */
struct pack {
        uint32_t n, T;   /* sequences, longest length */
        uint32_t *order; /* [n] sequence index of sorted row i */
        uint32_t *nt;    /* [T] rows still running at step t */
        uint32_t *offs;  /* [T + 1] first row of step t; offs[T] = S */
};

/* Buffers of one run, carved from the plan's scratch. */
struct work {
        float *in, *out; /* [S, max(in, D*H')] layer input and output (ping-pong) */
        float *xg;       /* [chunk rows, G*H] input projections */
        float *hg;       /* [n, G*H] recurrent projections */
        float *h, *c;    /* [n, H'], [n, H] state */
        float *tmp;      /* [n, H]: o*tanh(c) before projection, or r*h */
        float *feat;     /* [n, D*H'] top layer final states (head last) */
        float *head;     /* [S or n, units] */
};

static void cpu_close(void *plan);

/*
 * The shapes of one layer-direction's packed matrices: rec is [n1, k1] from
 * W_hh rows 0.., rec2 is [n2, k2] (n2 = 0 when absent).
 */
static void packed_shapes(const rnnd_model_t *m, uint32_t *n1, uint32_t *k1, uint32_t *n2,
                          uint32_t *k2)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t H = cfg->hidden_size, P = m->out_size;

        *n1 = m->gates * H;
        *k1 = P;
        *n2 = *k2 = 0;
        if (cfg->cell == RNND_CELL_GRU && !cfg->gru_linear_before_reset) {
                *n1 = 2 * H;
                *n2 = H;
                *k2 = H;
        } else if (cfg->proj_size != 0) {
                *n2 = P;
                *k2 = H;
        }
}

static int pack_weights(struct cpu_plan *p)
{
        const rnnd_model_t *m = p->m;
        const unsigned n = m->cfg.num_layers * m->dirs;
        uint32_t n1, k1, n2, k2;
        size_t s1, s2;
        float *at;

        packed_shapes(m, &n1, &k1, &n2, &k2);
        s1 = rnnd__cpu_packed_size(n1, k1);
        s2 = n2 ? rnnd__cpu_packed_size(n2, k2) : 0;
        p->pw = rnnd_calloc(n, sizeof(*p->pw));
        p->pbuf = rnnd_mallocarray((s1 + s2) * n, sizeof(float));
        if (p->pw == NULL || p->pbuf == NULL)
                return RNND_ENOMEM;
        at = p->pbuf;
        for (unsigned ld = 0; ld < n; ld++) {
                const struct rnnd_layer_weights *lw = &m->layers[ld];

                rnnd__cpu_pack(n1, k1, lw->w_hh, k1, at);
                p->pw[ld].rec = at;
                at += s1;
                if (n2 == 0)
                        continue;
                if (lw->w_hr != NULL)
                        rnnd__cpu_pack(n2, k2, lw->w_hr, k2, at);
                else /* GRU reset-before: the n rows of W_hh */
                        rnnd__cpu_pack(n2, k2, lw->w_hh + (size_t)2 * n2 * k2, k2, at);
                p->pw[ld].rec2 = at;
                at += s2;
        }
        return 0;
}

static int cpu_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, void **ret,
                    rnnd_error_t *reterr)
{
        struct cpu_plan *p = rnnd_calloc(1, sizeof(*p));

        if (p == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a CPU plan");
        p->m = rnnd_model_ref(m);
        p->threads = opts != NULL ? opts->threads : 0;
        if (pack_weights(p) < 0) {
                cpu_close(p);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory packing weights");
        }
        if (p->threads > 0)
                openblas_set_num_threads((int)p->threads);
        *ret = p;
        return 0;
}

static void cpu_close(void *plan)
{
        struct cpu_plan *p = plan;

        if (p == NULL)
                return;
        rnnd_model_unref(p->m);
        rnnd_free(p->pw);
        rnnd_free(p->pbuf);
        rnnd_free(p->scratch);
        rnnd_free(p->ibuf);
        rnnd_free(p);
}

static void cpu_describe(const void *plan, struct rnnd_backend_desc *d)
{
        const struct cpu_plan *p = plan;

        memset(d, 0, sizeof(*d));
        snprintf(d->backend, sizeof(d->backend), "cpu");
        snprintf(d->device, sizeof(d->device), "cpu");
        snprintf(d->algo, sizeof(d->algo), "packed-gemm");
        snprintf(d->math, sizeof(d->math), "fp32");
        snprintf(d->versions, sizeof(d->versions), "OpenBLAS %s", openblas_get_config());
        if (p != NULL && p->m->cfg.cell == RNND_CELL_GRU && !p->m->cfg.gru_linear_before_reset)
                snprintf(d->why_not_cudnn, sizeof(d->why_not_cudnn),
                         "GRU with gru_linear_before_reset=false (Keras reset_after=False) "
                         "has no cuDNN equivalent");
}

/* C[M,N] = A[M,K] (row stride lda) x B[N,K]^T (row stride ldb) + beta C. */
static void gemm_nt(uint32_t M, uint32_t N, uint32_t K, const float *A, uint32_t lda,
                    const float *B, uint32_t ldb, float beta, float *C, uint32_t ldc)
{
        if (M == 0)
                return;
        if (M == 1) { /* one running sequence: a matrix-vector product */
                cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, 1.0f, B, (int)ldb, A, 1,
                            beta, C, 1);
                return;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A,
                    (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* Sorts sequences by length, longest first (stable), and lays out the steps. */
static void pack_batch(const struct rnnd_batch *b, struct pack *pk)
{
        uint32_t n = b->n;

        for (uint32_t i = 0; i < n; i++) {
                uint32_t j = i, len = b->seqs[i].len;

                while (j > 0 && b->seqs[pk->order[j - 1]].len < len) {
                        pk->order[j] = pk->order[j - 1];
                        j--;
                }
                pk->order[j] = i;
        }
        pk->n = n;
        pk->T = b->seqs[pk->order[0]].len;
        for (uint32_t t = 0, i = n; t < pk->T; t++) {
                while (i > 0 && b->seqs[pk->order[i - 1]].len <= t)
                        i--;
                pk->nt[t] = i;
        }
        pk->offs[0] = 0;
        for (uint32_t t = 0; t < pk->T; t++)
                pk->offs[t + 1] = pk->offs[t] + pk->nt[t];
}

static int validate(const rnnd_model_t *m, const struct rnnd_batch *b, uint64_t *steps,
                    rnnd_error_t *reterr)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        uint64_t s = 0;

        if (b->n == 0 || b->seqs == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "empty batch");
        for (uint32_t i = 0; i < b->n; i++) {
                const struct rnnd_seq *q = &b->seqs[i];

                if (q->len == 0 || q->len > cfg->max_sequence_length)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "sequence %u: length %u is outside 1..%u", i, q->len,
                                              cfg->max_sequence_length);
                if (cfg->embedding.present) {
                        if (q->tokens == NULL)
                                return rnnd_error_set(reterr, RNND_EINVAL, "sequence %u: no tokens",
                                                      i);
                        for (uint32_t t = 0; t < q->len; t++)
                                if (q->tokens[t] < 0 ||
                                    q->tokens[t] >= (int64_t)cfg->embedding.num_embeddings)
                                        return rnnd_error_set(
                                                reterr, RNND_EINVAL,
                                                "sequence %u: token %lld at step %u is outside "
                                                "0..%u",
                                                i, (long long)q->tokens[t], t,
                                                cfg->embedding.num_embeddings - 1);
                } else if (q->x == NULL) {
                        return rnnd_error_set(reterr, RNND_EINVAL, "sequence %u: no input", i);
                }
                s += q->len;
        }
        *steps = s;
        return 0;
}

/* Grows the plan's scratch to hold the buffers of this batch and carves them. */
static int reserve(struct cpu_plan *p, const struct pack *pk, uint64_t S, struct work *w,
                   rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const size_t n = pk->n, H = cfg->hidden_size, P = m->out_size, D = m->dirs;
        const size_t gh = (size_t)m->gates * H;
        size_t in_w = cfg->input_size > D * P ? cfg->input_size : D * P;
        size_t chunk_rows = (size_t)CHUNK_STEPS * n < S ? (size_t)CHUNK_STEPS * n : S;
        size_t units = cfg->head.present ? cfg->head.units : 0;
        size_t head_rows = cfg->head.apply == RNND_HEAD_ALL ? S : n;
        size_t sizes[9] = {S * in_w, S * in_w, chunk_rows * gh, n * gh,           n * P,
                           n * H,    n * H,    n * D * P,       head_rows * units};
        float **dst[9] = {&w->in, &w->out, &w->xg,   &w->hg,  &w->h,
                          &w->c,  &w->tmp, &w->feat, &w->head};
        size_t total = 0;

        for (int i = 0; i < 9; i++)
                total += (sizes[i] + 15) & ~(size_t)15; /* keep each buffer 64-byte aligned */
        if (total > p->cap) {
                float *s = rnnd_realloc(p->scratch, total * sizeof(float));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM,
                                              "out of memory for %zu floats of scratch", total);
                p->scratch = s;
                p->cap = total;
        }
        total = 0;
        for (int i = 0; i < 9; i++) {
                *dst[i] = p->scratch + total;
                total += (sizes[i] + 15) & ~(size_t)15;
        }
        return 0;
}

static int reserve_index(struct cpu_plan *p, uint32_t n, uint32_t T, struct pack *pk,
                         rnnd_error_t *reterr)
{
        size_t need = (size_t)n + 2 * (size_t)T + 1;

        if (need > p->icap) {
                uint32_t *s = rnnd_realloc(p->ibuf, need * sizeof(uint32_t));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a batch");
                p->ibuf = s;
                p->icap = need;
        }
        pk->order = p->ibuf;
        pk->nt = p->ibuf + n;
        pk->offs = p->ibuf + n + T;
        return 0;
}

/* Layer 0's input rows: each sequence's x, or its tokens' embeddings. */
static void gather_input(const rnnd_model_t *m, const struct rnnd_batch *b, const struct pack *pk,
                         float *in)
{
        const uint32_t in_w = m->cfg.input_size;

        for (uint32_t t = 0; t < pk->T; t++) {
                for (uint32_t i = 0; i < pk->nt[t]; i++) {
                        const struct rnnd_seq *q = &b->seqs[pk->order[i]];
                        float *row = in + (size_t)(pk->offs[t] + i) * in_w;
                        const float *src = m->embedding != NULL
                                                   ? m->embedding + (size_t)q->tokens[t] * in_w
                                                   : q->x + (size_t)t * in_w;

                        memcpy(row, src, in_w * sizeof(float));
                }
        }
}

/* Loads the initial state of layer-direction ld for every row (zeros when absent). */
static void load_state(const rnnd_model_t *m, const struct rnnd_batch *b, const struct pack *pk,
                       unsigned ld, struct work *w)
{
        const uint32_t H = m->cfg.hidden_size, P = m->out_size;

        for (uint32_t i = 0; i < pk->n; i++) {
                const struct rnnd_seq *q = &b->seqs[pk->order[i]];

                if (q->h0 != NULL)
                        memcpy(w->h + (size_t)i * P, q->h0 + (size_t)ld * P, P * sizeof(float));
                else
                        memset(w->h + (size_t)i * P, 0, P * sizeof(float));
                if (m->cfg.cell != RNND_CELL_LSTM)
                        continue;
                if (q->c0 != NULL)
                        memcpy(w->c + (size_t)i * H, q->c0 + (size_t)ld * H, H * sizeof(float));
                else
                        memset(w->c + (size_t)i * H, 0, H * sizeof(float));
        }
}

/* One step of one layer-direction for rows [0, nt): gates in, state updated in place. */
static void step(const rnnd_model_t *m, const struct rnnd_layer_weights *lw,
                 const struct packed *pw, uint32_t nt, const float *xg, struct work *w)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t H = cfg->hidden_size, P = m->out_size, gh = m->gates * H;
        const float *bi = lw->b_ih, *bh = lw->b_hh;

        if (nt == 0)
                return;
        switch (cfg->cell) {
        case RNND_CELL_LSTM:
                rnnd__cpu_gemm_packed(nt, gh, P, w->h, P, pw->rec, w->hg, gh);
                for (uint32_t i = 0; i < nt; i++)
                        rnnd__cpu_lstm_row(H, xg + (size_t)i * gh, w->hg + (size_t)i * gh, bi, bh,
                                           w->c + (size_t)i * H,
                                           lw->w_hr != NULL ? w->tmp + (size_t)i * H
                                                            : w->h + (size_t)i * P);
                if (lw->w_hr != NULL)
                        rnnd__cpu_gemm_packed(nt, P, H, w->tmp, H, pw->rec2, w->h, P);
                break;
        case RNND_CELL_GRU:
                if (cfg->gru_linear_before_reset) {
                        rnnd__cpu_gemm_packed(nt, gh, H, w->h, H, pw->rec, w->hg, gh);
                        for (uint32_t i = 0; i < nt; i++)
                                rnnd__cpu_gru_row(H, xg + (size_t)i * gh, w->hg + (size_t)i * gh,
                                                  bi, bh, w->h + (size_t)i * H);
                        break;
                }
                /* Reset before: R_n applies to r * h, so r must be known first. */
                rnnd__cpu_gemm_packed(nt, 2 * H, H, w->h, H, pw->rec, w->hg, gh);
                for (uint32_t i = 0; i < nt; i++)
                        rnnd__cpu_gru_rz_row(H, xg + (size_t)i * gh, w->hg + (size_t)i * gh, bi, bh,
                                             w->h + (size_t)i * H, w->tmp + (size_t)i * H);
                rnnd__cpu_gemm_packed(nt, H, H, w->tmp, H, pw->rec2, w->hg + 2 * H, gh);
                for (uint32_t i = 0; i < nt; i++)
                        rnnd__cpu_gru_n_row(H, xg + (size_t)i * gh, w->hg + (size_t)i * gh, bi, bh,
                                            w->h + (size_t)i * H);
                break;
        case RNND_CELL_RNN_TANH:
        case RNND_CELL_RNN_RELU:
                rnnd__cpu_gemm_packed(nt, H, H, w->h, H, pw->rec, w->hg, H);
                for (uint32_t i = 0; i < nt; i++)
                        rnnd__cpu_rnn_row(H, cfg->cell == RNND_CELL_RNN_RELU, xg + (size_t)i * H,
                                          w->hg + (size_t)i * H, bi, bh, w->h + (size_t)i * H);
                break;
        }
}

/*
 * Runs layer-direction (l, d) over the packed rows: w->in holds its input,
 * and its states go to w->out's columns [d*H', (d+1)*H').
 */
static void run_direction(const struct cpu_plan *p, const struct pack *pk, unsigned l, unsigned d,
                          struct work *w)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_layer_weights *lw = &m->layers[l * m->dirs + d];
        const struct packed *pw = &p->pw[l * m->dirs + d];
        const uint32_t P = m->out_size, gh = m->gates * m->cfg.hidden_size;
        const uint32_t ow = m->dirs * P, T = pk->T;
        const uint32_t chunks = (T + CHUNK_STEPS - 1) / CHUNK_STEPS;

        for (uint32_t ci = 0; ci < chunks; ci++) {
                uint32_t c = d == 0 ? ci : chunks - 1 - ci;
                uint32_t t0 = c * CHUNK_STEPS, t1 = t0 + CHUNK_STEPS < T ? t0 + CHUNK_STEPS : T;
                uint32_t r0 = pk->offs[t0];

                gemm_nt(pk->offs[t1] - r0, gh, lw->in, w->in + (size_t)r0 * lw->in, lw->in,
                        lw->w_ih, lw->in, 0.0f, w->xg, gh);
                for (uint32_t k = 0; k < t1 - t0; k++) {
                        uint32_t t = d == 0 ? t0 + k : t1 - 1 - k, nt = pk->nt[t];

                        step(m, lw, pw, nt, w->xg + (size_t)(pk->offs[t] - r0) * gh, w);
                        for (uint32_t i = 0; i < nt; i++)
                                memcpy(w->out + (size_t)(pk->offs[t] + i) * ow + (size_t)d * P,
                                       w->h + (size_t)i * P, P * sizeof(float));
                }
        }
}

/* Copies the final states of layer-direction ld back to each sequence. */
static void store_state(const rnnd_model_t *m, const struct rnnd_batch *b, const struct pack *pk,
                        unsigned ld, const struct work *w)
{
        const uint32_t H = m->cfg.hidden_size, P = m->out_size;

        for (uint32_t i = 0; i < pk->n; i++) {
                const struct rnnd_seq *q = &b->seqs[pk->order[i]];

                if (q->h_n != NULL)
                        memcpy(q->h_n + (size_t)ld * P, w->h + (size_t)i * P, P * sizeof(float));
                if (q->c_n != NULL && m->cfg.cell == RNND_CELL_LSTM)
                        memcpy(q->c_n + (size_t)ld * H, w->c + (size_t)i * H, H * sizeof(float));
        }
}

/* The dense head over rows [0, rows) of src: dst = act(src W^T + b). */
static void apply_head(const rnnd_model_t *m, uint32_t rows, const float *src, float *dst)
{
        const uint32_t U = m->cfg.head.units, F = m->dirs * m->out_size;

        for (uint32_t r = 0; r < rows; r++)
                memcpy(dst + (size_t)r * U, m->head_b, U * sizeof(float));
        gemm_nt(rows, U, F, src, F, m->head_w, F, 1.0f, dst, U);
        for (uint32_t r = 0; r < rows; r++)
                rnnd__cpu_activate(m->cfg.head.activation, U, dst + (size_t)r * U);
}

static void scatter_outputs(const rnnd_model_t *m, const struct rnnd_batch *b,
                            const struct pack *pk, const struct work *w)
{
        const uint32_t ow = m->dirs * m->out_size;
        const uint32_t U = m->cfg.head.present ? m->cfg.head.units : 0;
        const bool head_all = m->cfg.head.present && m->cfg.head.apply == RNND_HEAD_ALL;

        for (uint32_t t = 0; t < pk->T; t++) {
                for (uint32_t i = 0; i < pk->nt[t]; i++) {
                        const struct rnnd_seq *q = &b->seqs[pk->order[i]];
                        size_t row = pk->offs[t] + i;

                        if (q->y != NULL)
                                memcpy(q->y + (size_t)t * ow, w->out + row * ow,
                                       ow * sizeof(float));
                        if (head_all && q->scores != NULL)
                                memcpy(q->scores + (size_t)t * U, w->head + row * U,
                                       U * sizeof(float));
                }
        }
        if (m->cfg.head.present && !head_all)
                for (uint32_t i = 0; i < pk->n; i++)
                        if (b->seqs[pk->order[i]].scores != NULL)
                                memcpy(b->seqs[pk->order[i]].scores, w->head + (size_t)i * U,
                                       U * sizeof(float));
}

static int cpu_run(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        struct cpu_plan *p = plan;
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t P = m->out_size, D = m->dirs, L = cfg->num_layers;
        struct pack pk = {0};
        struct work w;
        uint64_t S = 0;
        uint32_t T = 0;
        int r;

        r = validate(m, b, &S, reterr);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < b->n; i++)
                T = b->seqs[i].len > T ? b->seqs[i].len : T;
        r = reserve_index(p, b->n, T, &pk, reterr);
        if (r < 0)
                return r;
        pack_batch(b, &pk);
        r = reserve(p, &pk, S, &w, reterr);
        if (r < 0)
                return r;

        gather_input(m, b, &pk, w.in);
        for (uint32_t l = 0; l < L; l++) {
                for (uint32_t d = 0; d < D; d++) {
                        load_state(m, b, &pk, l * D + d, &w);
                        run_direction(p, &pk, l, d, &w);
                        store_state(m, b, &pk, l * D + d, &w);
                        if (l == L - 1)
                                for (uint32_t i = 0; i < pk.n; i++)
                                        memcpy(w.feat + ((size_t)i * D + d) * P,
                                               w.h + (size_t)i * P, P * sizeof(float));
                }
                if (l + 1 < L) {
                        float *t = w.in;

                        w.in = w.out;
                        w.out = t;
                }
        }
        if (cfg->head.present) {
                if (cfg->head.apply == RNND_HEAD_ALL)
                        apply_head(m, (uint32_t)S, w.out, w.head);
                else
                        apply_head(m, pk.n, w.feat, w.head);
        }
        scatter_outputs(m, b, &pk, &w);
        return 0;
}

const struct rnnd_backend_ops rnnd_cpu_backend = {
        .name = "cpu",
        .open = cpu_open,
        .run = cpu_run,
        .close = cpu_close,
        .describe = cpu_describe,
};
