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
 * buffers work on the same rows.
 *
 * Threads (a plan of cpu_threads > 1; threads_plan() decides per model, by
 * batch size): a batch of at least SPLIT_ROWS sequences per thread is dealt
 * out by sequence, longest first to the thread with the fewest steps, and
 * each thread runs its share as a batch of its own (run_split()).  The
 * threads never wait for each other until the end, so a ragged tail or a
 * thread the OS preempts delays only its own rows.  A smaller batch of a
 * bidirectional model runs each layer's directions side by side
 * (side_part()), meeting once per layer; of a unidirectional one, each step
 * is sliced by hidden unit (sliced_part()), the threads meeting once per
 * step, where each thread's share of a step pays for that (SLICE_MIN_FMAS),
 * and otherwise it runs on one thread.
 *
 * Scratch memory belongs to the plan's lanes (one per thread), grows to the
 * largest batch each has run, and is bounded by max_batch_size x
 * max_batch_steps in all.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cpu/cpu-int.h"
#include "cpu/team.h"

/*
 * Steps per input-projection GEMM: about CHUNK_ROWS rows, so the GEMM stays
 * large while a chunk's gate inputs stay in cache for the steps that read
 * them, and at most CHUNK_STEPS_MAX, which bounds the scratch.
 */
#define CHUNK_ROWS      512u
#define CHUNK_STEPS_MAX 32u

/*
 * Batches of at least this many sequences run the input projection inside a
 * fused step kernel (sliced_part()).
 */
#define FUSE_X_ROWS 4u

/*
 * Batches of at least this many sequences per thread are split across the
 * plan's threads by sequence (cpu_run()): each thread runs its share as a
 * batch of its own, with no barrier between threads.  Fewer rows than this
 * would leave each thread's GEMMs too thin; below it, the recurrence is
 * sliced by hidden unit instead.
 */
#define SPLIT_ROWS 16u

/*
 * A smaller batch is sliced by hidden unit only when each thread's share of
 * a step is at least this many multiply-adds (some microseconds): below it
 * the threads' meeting once per step costs more than the share saves (an
 * LSTM of 64 units at batch 1 ran at 65k sequences/s on one thread and 20k
 * on two, issue 28).
 */
#define SLICE_MIN_FMAS 131072u

/*
 * One layer-direction's recurrent weights, packed for rnnd__cpu_gemm_packed(),
 * or with W_ih and the biases for a fused step.
 */
struct packed {
        const float *rec;  /* W_hh [G*H, H'] (GRU reset-before: its r,z rows [2H, H]) */
        const float *rec2; /* GRU reset-before: W_hh's n rows [H, H]; LSTM: W_hr [H', H] */
        uint32_t lstm_lu;  /* nonzero: rec is W_ih, W_hh and the biases for
                            * rnnd__cpu_lstm_step(), in panels of this many units */
        uint32_t step_lu;  /* nonzero: rec is packed for rnnd__cpu_step() of kind, in
                            * panels of this many units (GRU reset-before: rec for
                            * GRU_RZ, rec2 for GRU_N) */
        enum rnnd__cpu_kind kind;
};

/*
 * Scratch of one thread's batch: lane 0 is the worker's, and in a run split
 * by sequence lane i is team member i's.  Each grows to the largest batch it
 * has run.
 */
struct lane {
        float *scratch; /* [cap]; the buffers start at its first cache line (align()) */
        size_t cap;     /* floats in scratch */
        uint32_t *ibuf; /* order, nt, offs */
        size_t icap;    /* uint32s in ibuf */
        float **ybuf;   /* [ycap] the sorted rows' y (direct_y()) */
        size_t ycap;
        struct rnnd_seq *seqs; /* a split run's share of the batch: [n] of [seqcap] */
        uint32_t n;
        size_t seqcap;
        uint64_t steps; /* the share's steps */
        int rc;         /* a split run's result, with err */
        rnnd_error_t err;
};

struct cpu_plan {
        rnnd_model_t *m;     /* a reference; immutable after open */
        struct packed *pw;   /* [num_layers * dirs]; immutable after open */
        float *pbuf;         /* owns what pw points to, from its first cache line (align()) */
        unsigned n_threads;  /* the worker and its team's helpers; immutable */
        unsigned slices;     /* of them, those that slice a step by hidden unit; immutable */
        uint32_t split_rows; /* batches of this many sequences or more are split by
                              * sequence; immutable (threads_plan()) */
        uint32_t slice_rows; /* smaller ones of this many or more are sliced by hidden
                              * unit (never when >= split_rows); immutable */
        bool side;           /* smaller ones run a bidirectional layer's directions side
                              * by side; immutable */
        rnnd_team_t *team;   /* helpers when n_threads > 1; worker thread only */
        struct lane *lanes;  /* [n_threads]; lane i used by thread i only */
        uint32_t *sorted;    /* a split run's sequence order, [sortcap]; worker thread only */
        size_t sortcap;
};

/* How a batch runs on the plan's threads (threads_plan(), cpu_run()). */
enum mode {
        MODE_ONE,    /* on the worker alone */
        MODE_SLICED, /* each step sliced by hidden unit across the team */
        MODE_SIDE,   /* a bidirectional layer's two directions side by side */
        MODE_SPLIT,  /* the sequences dealt out to the team, a batch each */
};

/* The packed layout of one batch. */
struct pack {
        uint32_t n, T;   /* sequences, longest length */
        uint32_t *order; /* [n] sequence index of sorted row i */
        uint32_t *nt;    /* [T] rows still running at step t */
        uint32_t *offs;  /* [T + 1] first row of step t; offs[T] = S */
};

/*
 * The first cache line of an allocation of n + ALIGN_FLOATS floats.  The
 * kernels' vectors of 16 floats are a cache line each: at malloc's 16-byte
 * alignment every one of them straddled two lines, which cost a third of a
 * lone row's step and more than a tenth of a batch's (issue 28).  The
 * kernels assert it (cpu-int.h).
 */
#define ALIGN_FLOATS (RNND_CPU_ALIGN / sizeof(float))

static float *align(float *raw)
{
        return (float *)(((uintptr_t)raw + RNND_CPU_ALIGN - 1) & ~(uintptr_t)(RNND_CPU_ALIGN - 1));
}

/* Buffers of one run, carved from the plan's scratch. */
struct work {
        float *in, *out;  /* [S, max(in, D*H')] layer input and output (ping-pong) */
        float *xg;        /* [chunk rows, G*H] input projections */
        float *hg;        /* [n, G*H] recurrent projections */
        float *h, *c;     /* [n, H'], [n, H] state */
        float *h2;        /* [n, H'] the other state buffer of the sliced recurrence */
        float *tmp;       /* [n, H]: o*tanh(c) before projection, or r*h */
        float *feat;      /* [n, D*H'] top layer final states (head last) */
        float *head;      /* [S or n, units] */
        float *const *ys; /* the top layer's y: [n] each sorted row's own, or NULL: out */
};

static void cpu_close(void *plan);

/*
 * An LSTM without a projection runs rnnd__cpu_lstm_step(), its weights packed
 * by hidden unit with the four gates side by side: in panels of 16 units
 * where the CPU has AVX-512 (a 6 x 64 register block, 24 of its 32
 * registers), of 8 where it has AVX2 and FMA (2 x 32, 8 of 16 registers, the
 * four weight vectors held too).  Elsewhere the gates go through
 * rnnd__cpu_gemm_packed() and rnnd__cpu_lstm_row().  Returns the panel width,
 * or 0.
 */
static uint32_t fused_width(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
        if (__builtin_cpu_supports("avx512f"))
                return 16;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                return 8;
#endif
        return 0;
}

static uint32_t fused_lstm(const rnnd_model_t *m)
{
        if (m->cfg.cell != RNND_CELL_LSTM || m->cfg.proj_size != 0)
                return 0;
        return fused_width();
}

/*
 * GRUs (either reset) and RNNs run rnnd__cpu_step() where the LSTM runs its
 * fused step: the panel width, or 0.  Sets *kind to the kind of the first
 * pass.
 */
static uint32_t fused_cell(const rnnd_model_t *m, enum rnnd__cpu_kind *kind)
{
        switch (m->cfg.cell) {
        case RNND_CELL_GRU:
                *kind = m->cfg.gru_linear_before_reset ? RNND_CPU_GRU : RNND_CPU_GRU_RZ;
                break;
        case RNND_CELL_RNN_TANH:
                *kind = RNND_CPU_TANH;
                break;
        case RNND_CELL_RNN_RELU:
                *kind = RNND_CPU_RELU;
                break;
        default:
                return 0;
        }
        return fused_width();
}

/* The name describe() gives the fused step of a cell with panels of lu units. */
static void fused_name(rnnd_cell_t cell, uint32_t lu, char *buf, size_t size)
{
        snprintf(buf, size, "fused-%s-step (%s)",
                 cell == RNND_CELL_LSTM  ? "lstm"
                 : cell == RNND_CELL_GRU ? "gru"
                                         : "rnn",
                 lu == 16 ? "AVX-512" : "AVX2");
}

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

/* Floats of layer-direction lw's two packed matrices (*s2 = 0 when there is one). */
static size_t packed_sizes(const rnnd_model_t *m, const struct rnnd_layer_weights *lw, size_t *s2)
{
        const uint32_t lu = fused_lstm(m);
        enum rnnd__cpu_kind kind;
        const uint32_t su = fused_cell(m, &kind);
        uint32_t n1, k1, n2, k2;

        packed_shapes(m, &n1, &k1, &n2, &k2);
        *s2 = 0;
        if (lu != 0)
                return rnnd__cpu_lstm_packed_size(lu, k1, lw->in, k1);
        if (su != 0) {
                if (kind == RNND_CPU_GRU_RZ)
                        *s2 = rnnd__cpu_step_packed_size(RNND_CPU_GRU_N, su, k1, lw->in, k1);
                return rnnd__cpu_step_packed_size(kind, su, k1, lw->in, k1);
        }
        *s2 = n2 ? rnnd__cpu_packed_size(n2, k2) : 0;
        return rnnd__cpu_packed_size(n1, k1);
}

/* Packs layer-direction ld's weights at at, which has packed_sizes() floats. */
static void pack_layer(const rnnd_model_t *m, unsigned ld, struct packed *pw, float *at)
{
        const struct rnnd_layer_weights *lw = &m->layers[ld];
        const uint32_t H = m->cfg.hidden_size;
        uint32_t n1, k1, n2, k2;
        size_t s2;

        packed_shapes(m, &n1, &k1, &n2, &k2);
        pw->rec = at;
        pw->rec2 = at + packed_sizes(m, lw, &s2);
        pw->lstm_lu = fused_lstm(m);
        pw->step_lu = fused_cell(m, &pw->kind);
        if (pw->lstm_lu != 0) {
                rnnd__cpu_lstm_pack(pw->lstm_lu, k1, lw->in, lw->w_ih, k1, lw->w_hh, lw->b_ih,
                                    lw->b_hh, at);
        } else if (pw->step_lu != 0) {
                rnnd__cpu_step_pack(pw->kind, pw->step_lu, H, lw->in, lw->w_ih, H, lw->w_hh,
                                    lw->b_ih, lw->b_hh, at);
                if (pw->kind == RNND_CPU_GRU_RZ) /* the n gate's rows and biases */
                        rnnd__cpu_step_pack(RNND_CPU_GRU_N, pw->step_lu, H, lw->in,
                                            lw->w_ih + (size_t)2 * H * lw->in, H,
                                            lw->w_hh + (size_t)2 * H * H, lw->b_ih + 2 * H,
                                            lw->b_hh + 2 * H, (float *)pw->rec2);
        } else {
                rnnd__cpu_pack(n1, k1, lw->w_hh, k1, at);
                if (lw->w_hr != NULL)
                        rnnd__cpu_pack(n2, k2, lw->w_hr, k2, (float *)pw->rec2);
                else if (n2 != 0) /* GRU reset-before: the n rows of W_hh */
                        rnnd__cpu_pack(n2, k2, lw->w_hh + (size_t)2 * n2 * k2, k2,
                                       (float *)pw->rec2);
        }
}

static int pack_weights(struct cpu_plan *p)
{
        const rnnd_model_t *m = p->m;
        const unsigned n = m->cfg.num_layers * m->dirs;
        size_t total = 0, s1, s2;
        float *at;

        for (unsigned ld = 0; ld < n; ld++) {
                s1 = packed_sizes(m, &m->layers[ld], &s2);
                total += s1 + s2;
        }
        p->pw = rnnd_calloc(n, sizeof(*p->pw));
        p->pbuf = rnnd_mallocarray(total + ALIGN_FLOATS, sizeof(float));
        if (p->pw == NULL || p->pbuf == NULL)
                return RNND_ENOMEM;
        at = align(p->pbuf);
        for (unsigned ld = 0; ld < n; ld++) {
                pack_layer(m, ld, &p->pw[ld], at);
                s1 = packed_sizes(m, &m->layers[ld], &s2);
                at += s1 + s2;
        }
        return 0;
}

/*
 * Cells whose step needs one full-width product per step can be sliced by
 * hidden unit: each slice's gates depend only on its own columns.  An LSTM
 * with a projection, or a GRU with the reset before R_n, needs a second
 * product over the whole first result, and runs on one thread; but the fused
 * step of the latter is sliced, its slices meeting between its two passes.
 */
static bool sliceable(const rnnd_model_t *m)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        enum rnnd__cpu_kind kind;

        if (cfg->cell == RNND_CELL_LSTM)
                return cfg->proj_size == 0;
        if (cfg->cell == RNND_CELL_GRU) /* reset-before: its fused step's two passes */
                return cfg->gru_linear_before_reset || fused_cell(m, &kind) != 0;
        return true;
}

/* Slices of whole packed panels (RNND_CPU_NR units), at most one per thread. */
static unsigned slice_count(const rnnd_model_t *m, unsigned threads)
{
        const uint32_t H = m->cfg.hidden_size;
        unsigned panels = H / RNND_CPU_NR;

        if (threads <= 1 || !sliceable(m) || H % RNND_CPU_NR != 0 || panels < 2)
                return 1;
        return threads < panels ? threads : panels;
}

/*
 * Decides, for this model and each batch size, how a batch uses the plan's
 * threads (batch_mode()): from split_rows sequences up, dealt out by
 * sequence; below, a bidirectional model's directions side by side (they
 * meet once per layer), else each step sliced by hidden unit where each
 * thread's share of it pays for the meeting, else one thread.
 */
static void threads_plan(struct cpu_plan *p)
{
        const rnnd_model_t *m = p->m;
        const uint64_t H = m->cfg.hidden_size;
        const uint64_t per_row = m->gates * H * (m->out_size + m->layers[0].in);
        uint64_t rows;

        p->split_rows = p->n_threads > 1 ? SPLIT_ROWS * p->n_threads : UINT32_MAX;
        p->side = p->n_threads > 1 && m->dirs == 2;
        p->slice_rows = UINT32_MAX;
        if (p->slices > 1 && !p->side) {
                rows = ((uint64_t)SLICE_MIN_FMAS * p->slices + per_row - 1) / per_row;
                if (rows < p->split_rows)
                        p->slice_rows = rows < 1 ? 1 : (uint32_t)rows;
        }
}

/* How a batch of n sequences runs (threads_plan()). */
static enum mode batch_mode(const struct cpu_plan *p, uint32_t n)
{
        if (n >= p->split_rows)
                return MODE_SPLIT;
        if (p->side)
                return MODE_SIDE;
        return n >= p->slice_rows ? MODE_SLICED : MODE_ONE;
}

/* Says what threads_plan() decided, as describe() gives it. */
static void threads_text(const struct cpu_plan *p, char *buf, size_t size)
{
        static const char *const how[] = {"one thread", "hidden units sliced over %u threads",
                                          "the two directions side by side",
                                          "sequences split over %u threads"};
        size_t at = 0;
        uint32_t from = 1;

        if (p->n_threads == 1) {
                snprintf(buf, size, "one thread");
                return;
        }
        buf[0] = '\0';
        while (from != UINT32_MAX && at < size) {
                enum mode md = batch_mode(p, from);
                uint32_t to = md == MODE_SPLIT                                  ? UINT32_MAX
                              : md == MODE_ONE && p->slice_rows < p->split_rows ? p->slice_rows
                                                                                : p->split_rows;
                char what[64];

                snprintf(what, sizeof(what), how[md], p->n_threads);
                if (to == UINT32_MAX)
                        at += (size_t)snprintf(buf + at, size - at, "%sbatch %u+: %s",
                                               at ? "; " : "", from, what);
                else
                        at += (size_t)snprintf(buf + at, size - at, "%sbatch %u-%u: %s",
                                               at ? "; " : "", from, to - 1, what);
                from = to;
        }
}

static int cpu_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, void **ret,
                    rnnd_error_t *reterr)
{
        struct cpu_plan *p = rnnd_calloc(1, sizeof(*p));

        if (p == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a CPU plan");
        p->m = rnnd_model_ref(m);
        if (pack_weights(p) < 0) {
                cpu_close(p);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory packing weights");
        }
        /*
         * The engine makes its own threads (the recurrence is sliced across
         * them), so each BLAS call runs on the thread that makes it.
         */
        openblas_set_num_threads(1);
        p->n_threads = opts != NULL && opts->threads > 1 ? opts->threads : 1;
        p->slices = slice_count(m, p->n_threads);
        threads_plan(p);
        p->lanes = rnnd_calloc(p->n_threads, sizeof(*p->lanes));
        if (p->lanes == NULL) {
                cpu_close(p);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a CPU plan");
        }
        if (p->n_threads > 1) {
                p->team = rnnd_team_new(p->n_threads);
                if (p->team == NULL) {
                        cpu_close(p);
                        return rnnd_error_set(reterr, RNND_ENOMEM, "cannot start %u engine threads",
                                              p->n_threads);
                }
        }
        *ret = p;
        return 0;
}

static void cpu_close(void *plan)
{
        struct cpu_plan *p = plan;

        if (p == NULL)
                return;
        rnnd_team_free(p->team);
        rnnd_model_unref(p->m);
        rnnd_free(p->pw);
        rnnd_free(p->pbuf);
        for (unsigned i = 0; p->lanes != NULL && i < p->n_threads; i++) {
                rnnd_free(p->lanes[i].scratch);
                rnnd_free(p->lanes[i].ibuf);
                rnnd_free(p->lanes[i].ybuf);
                rnnd_free(p->lanes[i].seqs);
        }
        rnnd_free(p->lanes);
        rnnd_free(p->sorted);
        rnnd_free(p);
}

static void cpu_describe(const void *plan, struct rnnd_backend_desc *d)
{
        const struct cpu_plan *p = plan;

        memset(d, 0, sizeof(*d));
        snprintf(d->backend, sizeof(d->backend), "cpu");
        snprintf(d->device, sizeof(d->device), "cpu (%u thread%s)", p != NULL ? p->n_threads : 1,
                 p != NULL && p->n_threads > 1 ? "s" : "");
        /* Which kernel runs the recurrence; without a plan, those it has here. */
        if (p != NULL && (p->pw[0].lstm_lu != 0 || p->pw[0].step_lu != 0))
                fused_name(p->m->cfg.cell, p->pw[0].lstm_lu | p->pw[0].step_lu, d->algo,
                           sizeof(d->algo));
        else if (p == NULL && fused_width() != 0)
                snprintf(d->algo, sizeof(d->algo), "packed-gemm, fused steps (%s)",
                         fused_width() == 16 ? "AVX-512" : "AVX2");
        else
                snprintf(d->algo, sizeof(d->algo), "packed-gemm");
        snprintf(d->math, sizeof(d->math), "fp32");
        if (p != NULL)
                threads_text(p, d->threading, sizeof(d->threading));
        /* OpenBLAS's own text starts with its name (0.3.21: "OpenBLAS 0.3.21 ..."). */
        snprintf(d->versions, sizeof(d->versions), "%s%s",
                 strncmp(openblas_get_config(), "OpenBLAS", 8) == 0 ? "" : "OpenBLAS ",
                 openblas_get_config());
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

/*
 * order[0..n) = b's sequence indexes by length, longest first (stable).
 * Insertion sort: b->n is at most max_batch_size.
 */
static void sort_by_length(const struct rnnd_batch *b, uint32_t *order)
{
        for (uint32_t i = 0; i < b->n; i++) {
                uint32_t j = i, len = b->seqs[i].len;

                while (j > 0 && b->seqs[order[j - 1]].len < len) {
                        order[j] = order[j - 1];
                        j--;
                }
                order[j] = i;
        }
}

/* Sorts sequences by length, longest first (stable), and lays out the steps. */
static void pack_batch(const struct rnnd_batch *b, struct pack *pk)
{
        uint32_t n = b->n;

        sort_by_length(b, pk->order);
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

static uint32_t chunk_steps(const struct pack *pk)
{
        uint32_t s = CHUNK_ROWS / pk->n;

        return s < 1 ? 1 : s > CHUNK_STEPS_MAX ? CHUNK_STEPS_MAX : s;
}

/*
 * Grows a lane's scratch to hold the buffers of this batch and carves them
 * into w[0]; side: w[1] too, the same but for its own state and gate
 * buffers, for a layer's second direction run beside the first.
 */
static int reserve(const rnnd_model_t *m, struct lane *ln, const struct pack *pk, uint64_t S,
                   bool side, struct work w[2], rnnd_error_t *reterr)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        const size_t n = pk->n, H = cfg->hidden_size, P = m->out_size, D = m->dirs;
        const size_t gh = (size_t)m->gates * H;
        size_t in_w = cfg->input_size > D * P ? cfg->input_size : D * P;
        size_t chunk_rows = (size_t)chunk_steps(pk) * n < S ? (size_t)chunk_steps(pk) * n : S;
        size_t units = cfg->head.present ? cfg->head.units : 0;
        size_t head_rows = cfg->head.apply == RNND_HEAD_ALL ? S : n;
        const size_t two = side ? 1 : 0;
        const size_t sizes[] = {S * in_w,
                                S * in_w,
                                chunk_rows * gh,
                                n * gh,
                                n * P,
                                n * H,
                                n * H,
                                n * D * P,
                                head_rows * units,
                                n * P,
                                two * chunk_rows * gh,
                                two * n * gh,
                                two * n * P,
                                two * n * H,
                                two * n * H,
                                two * n * P};
        float **const dst[] = {&w[0].in,  &w[0].out,  &w[0].xg,   &w[0].hg, &w[0].h,  &w[0].c,
                               &w[0].tmp, &w[0].feat, &w[0].head, &w[0].h2, &w[1].xg, &w[1].hg,
                               &w[1].h,   &w[1].c,    &w[1].tmp,  &w[1].h2};
        const int nbuf = (int)(sizeof(sizes) / sizeof(sizes[0]));
        size_t total = 0;

        for (int i = 0; i < nbuf; i++)
                total += (sizes[i] + 15) & ~(size_t)15; /* keep each buffer 64-byte aligned */
        total += ALIGN_FLOATS;                          /* and the first */
        if (total > ln->cap) {
                float *s = rnnd_realloc(ln->scratch, total * sizeof(float));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM,
                                              "out of memory for %zu floats of scratch", total);
                ln->scratch = s;
                ln->cap = total;
        }
        total = 0;
        for (int i = 0; i < nbuf; i++) {
                *dst[i] = align(ln->scratch) + total;
                total += (sizes[i] + 15) & ~(size_t)15;
        }
        w[1].in = w[0].in;
        w[1].out = w[0].out;
        w[1].feat = w[0].feat;
        w[1].head = w[0].head;
        return 0;
}

static int reserve_index(struct lane *ln, uint32_t n, uint32_t T, struct pack *pk,
                         rnnd_error_t *reterr)
{
        size_t need = (size_t)n + 2 * (size_t)T + 1;

        if (need > ln->icap) {
                uint32_t *s = rnnd_realloc(ln->ibuf, need * sizeof(uint32_t));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a batch");
                ln->ibuf = s;
                ln->icap = need;
        }
        pk->order = ln->ibuf;
        pk->nt = ln->ibuf + n;
        pk->offs = ln->ibuf + n + T;
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

/*
 * One step of a cell that is not sliceable, for rows [0, nt), state updated
 * in place: an LSTM with a projection, or a GRU with the reset before R_n.
 */
static void step_serial(const rnnd_model_t *m, const struct rnnd_layer_weights *lw,
                        const struct packed *pw, uint32_t nt, const float *xg, struct work *w)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t H = cfg->hidden_size, P = m->out_size, gh = m->gates * H;
        const float *bi = lw->b_ih, *bh = lw->b_hh;

        if (cfg->cell == RNND_CELL_LSTM) {
                rnnd__cpu_gemm_packed(nt, gh, P, w->h, P, pw->rec, w->hg, gh);
                for (uint32_t i = 0; i < nt; i++)
                        rnnd__cpu_lstm_row(H, H, xg + (size_t)i * gh, w->hg + (size_t)i * gh, bi,
                                           bh, w->c + (size_t)i * H, w->tmp + (size_t)i * H);
                rnnd__cpu_gemm_packed(nt, P, H, w->tmp, H, pw->rec2, w->h, P);
                return;
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
}

/* The chunk of steps [t0, t1) that the ci-th chunk of direction d covers. */
static void chunk_range(const struct pack *pk, unsigned d, uint32_t ci, uint32_t *t0, uint32_t *t1)
{
        const uint32_t cs = chunk_steps(pk), chunks = (pk->T + cs - 1) / cs;
        uint32_t c = d == 0 ? ci : chunks - 1 - ci;

        *t0 = c * cs;
        *t1 = *t0 + cs < pk->T ? *t0 + cs : pk->T;
}

/*
 * Runs layer-direction (l, d) of a non-sliceable cell: w->in holds its
 * input, and its states go to w->out's columns [d*H', (d+1)*H').
 */
static void run_serial(const struct cpu_plan *p, const struct pack *pk, unsigned l, unsigned d,
                       struct work *w)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_layer_weights *lw = &m->layers[l * m->dirs + d];
        const struct packed *pw = &p->pw[l * m->dirs + d];
        const uint32_t P = m->out_size, gh = m->gates * m->cfg.hidden_size;
        const uint32_t ow = m->dirs * P, chunks = (pk->T + chunk_steps(pk) - 1) / chunk_steps(pk);

        for (uint32_t ci = 0; ci < chunks; ci++) {
                uint32_t t0, t1, r0;

                chunk_range(pk, d, ci, &t0, &t1);
                r0 = pk->offs[t0];
                gemm_nt(pk->offs[t1] - r0, gh, lw->in, w->in + (size_t)r0 * lw->in, lw->in,
                        lw->w_ih, lw->in, 0.0f, w->xg, gh);
                for (uint32_t k = 0; k < t1 - t0; k++) {
                        uint32_t t = d == 0 ? t0 + k : t1 - 1 - k, nt = pk->nt[t];

                        step_serial(m, lw, pw, nt, w->xg + (size_t)(pk->offs[t] - r0) * gh, w);
                        for (uint32_t i = 0; i < nt; i++)
                                memcpy(w->out + (size_t)(pk->offs[t] + i) * ow + (size_t)d * P,
                                       w->h + (size_t)i * P, P * sizeof(float));
                }
        }
}

/*
 * The gate math of one step over width units of rows [0, nt): xg, hg (row
 * stride G*H), h_in, h_out, c (row stride H) and y (row stride ldy) all
 * start at the slice's first unit.
 */
static void step_rows(const rnnd_model_t *m, uint32_t nt, uint32_t width, const float *xg,
                      const float *hg, const float *bi, const float *bh, const float *h_in,
                      float *c, float *h_out, float *y, uint32_t ldy)
{
        const size_t H = m->cfg.hidden_size, gh = (size_t)m->gates * H;

        for (size_t i = 0; i < nt; i++) {
                const float *xr = xg + i * gh, *hr = hg + i * gh;
                float *out = h_out + i * H;

                if (m->cfg.cell == RNND_CELL_LSTM)
                        rnnd__cpu_lstm_row(width, (uint32_t)H, xr, hr, bi, bh, c + i * H, out);
                else if (m->cfg.cell == RNND_CELL_GRU)
                        rnnd__cpu_gru_row(width, (uint32_t)H, xr, hr, bi, bh, h_in + i * H, out);
                else
                        rnnd__cpu_rnn_row(width, m->cfg.cell == RNND_CELL_RNN_RELU, xr, hr, bi, bh,
                                          out);
                memcpy(y + i * ldy, out, width * sizeof(float));
        }
}

/* What the participants of a sliced direction share. */
struct sliced {
        const struct cpu_plan *p;
        const struct pack *pk;
        struct work *w;
        unsigned l, d;
        unsigned slices; /* participants: the plan's threads, or 1 */
        struct rnnd_spin_barrier barrier;
};

/* The layer and direction's weights a sliced direction runs. */
static unsigned sliced_ld(const struct sliced *sc)
{
        return sc->l * sc->p->m->dirs + sc->d;
}

/*
 * xg[0, n) = rows [r, r + n) of the layer input x W_ih^T: by the fused step's
 * own packed weights where it has them (OpenBLAS picks its kernels by CPU
 * model, and took SSE3 ones on a newer Xeon it did not know), else OpenBLAS.
 */
static void project(const struct sliced *sc, uint32_t r, uint32_t n, float *xg)
{
        const rnnd_model_t *m = sc->p->m;
        const struct rnnd_layer_weights *lw = &m->layers[sliced_ld(sc)];
        const struct packed *pw = &sc->p->pw[sliced_ld(sc)];
        const uint32_t H = m->cfg.hidden_size, gh = m->gates * H, in = lw->in;
        struct rnnd__cpu_step st = {
                .kind = pw->lstm_lu != 0 ? RNND_CPU_LSTM : pw->kind,
                .lu = pw->lstm_lu | pw->step_lu,
                .M = n,
                .H = H,
                .KX = in,
                .K = H,
                .P = pw->rec,
                .X = sc->w->in + (size_t)r * in,
                .ldxin = in,
                .xg = xg,
                .ldx = gh,
        };

        if (n == 0)
                return;
        if (st.lu == 0) {
                gemm_nt(n, gh, in, st.X, in, lw->w_ih, in, 0.0f, xg, gh);
                return;
        }
        rnnd__cpu_project(&st);
        if (pw->kind == RNND_CPU_GRU_RZ && pw->lstm_lu == 0) { /* and the n gate */
                st.kind = RNND_CPU_GRU_N;
                st.P = pw->rec2;
                st.xg = xg + 2 * H;
                rnnd__cpu_project(&st);
        }
}

/*
 * The chunk's input projection of rows [r0, r0 + rows), split by rows, each
 * participant's once.  Then all meet, since each needs its columns of every
 * row.
 */
static void sliced_project(const struct sliced *sc, unsigned s, uint32_t r0, uint32_t rows,
                           unsigned *sense)
{
        const uint32_t gh = sc->p->m->gates * sc->p->m->cfg.hidden_size;
        const unsigned n_sl = sc->slices;
        const uint32_t a = rows * s / n_sl, e = rows * (s + 1) / n_sl;

        project(sc, r0 + a, e - a, sc->w->xg + (size_t)a * gh);
        if (n_sl > 1)
                rnnd_barrier_wait((struct rnnd_spin_barrier *)&sc->barrier, sense);
}

/*
 * The arguments of a fused step kernel for step t of a sliced direction:
 * reads x (fuse_x) or the chunk's W x, and the state hc; writes hn and y.
 */
static struct rnnd__cpu_step step_args(const struct sliced *sc, uint32_t r0, uint32_t t,
                                       const float *hc, float *hn, bool fuse_x)
{
        const rnnd_model_t *m = sc->p->m;
        const struct pack *pk = sc->pk;
        const struct packed *pw = &sc->p->pw[sliced_ld(sc)];
        const uint32_t H = m->cfg.hidden_size, in = m->layers[sliced_ld(sc)].in;
        const uint32_t gh = m->gates * H, ow = m->dirs * H;

        return (struct rnnd__cpu_step){
                .kind = pw->lstm_lu != 0 ? RNND_CPU_LSTM : pw->kind,
                .lu = pw->lstm_lu != 0 ? pw->lstm_lu : pw->step_lu,
                .M = pk->nt[t],
                .H = H,
                .KX = in,
                .K = H,
                .P = pw->rec,
                .X = fuse_x ? sc->w->in + (size_t)pk->offs[t] * in : NULL,
                .ldxin = in,
                .xg = fuse_x ? NULL : sc->w->xg + (size_t)(pk->offs[t] - r0) * gh,
                .ldx = gh,
                .A = hc,
                .lda = H,
                .hold = hc,
                .ldo = H,
                .c = sc->w->c,
                .z = sc->w->hg,
                .h = hn,
                .ldh = H,
                .y = sc->w->out + (size_t)pk->offs[t] * ow + (size_t)sc->d * H,
                .ldy = ow,
                .ys = sc->w->ys,
                .yoff = (size_t)t * ow + (size_t)sc->d * H,
        };
}

/*
 * Step t of a GRU or RNN on its fused kernel, units [j0, j1) (see
 * sliced_step()).  A GRU with the reset before R_n takes two passes: r*h and
 * z of the slice into w->tmp and w->hg, then, once every slice has written
 * its part (the participants meet), n over the whole of r*h.
 */
static void fused_step(const struct sliced *sc, uint32_t j0, uint32_t j1, uint32_t r0, uint32_t t,
                       const float *hc, float *hn, bool fuse_x, unsigned *sense)
{
        struct rnnd__cpu_step st = step_args(sc, r0, t, hc, hn, fuse_x);
        const struct packed *pw = &sc->p->pw[sliced_ld(sc)];
        float *y = st.y;

        if (pw->kind != RNND_CPU_GRU_RZ) {
                rnnd__cpu_step(&st, j0, j1);
                return;
        }
        st.h = sc->w->tmp;
        st.y = NULL;
        st.ys = NULL;
        rnnd__cpu_step(&st, j0, j1);
        if (sc->slices > 1)
                rnnd_barrier_wait((struct rnnd_spin_barrier *)&sc->barrier, sense);
        st.kind = RNND_CPU_GRU_N;
        st.P = pw->rec2;
        st.xg = st.xg != NULL ? st.xg + 2 * st.H : NULL;
        st.A = sc->w->tmp;
        st.h = hn;
        st.y = y;
        st.ys = sc->w->ys;
        rnnd__cpu_step(&st, j0, j1);
}

/*
 * Step t of hidden units [j0, j1) of every gate: reads the state hc, writes
 * the new state hn and the step's outputs.  The chunk's rows start at r0;
 * fuse_x: the LSTM kernel does the input projection itself.
 */
static void sliced_step(const struct sliced *sc, uint32_t j0, uint32_t j1, uint32_t r0, uint32_t t,
                        const float *hc, float *hn, bool fuse_x, unsigned *sense)
{
        const struct pack *pk = sc->pk;
        struct work *w = sc->w;
        const rnnd_model_t *m = sc->p->m;
        const unsigned ld = sliced_ld(sc), d = sc->d;
        const struct rnnd_layer_weights *lw = &m->layers[ld];
        const struct packed *pw = &sc->p->pw[ld];
        const uint32_t H = m->cfg.hidden_size, G = m->gates, gh = G * H;
        const uint32_t ow = m->dirs * H, nt = pk->nt[t], width = j1 - j0;
        const float *bi = lw->b_ih + j0, *bh = lw->b_hh + j0;
        const float *xg = w->xg + (size_t)(pk->offs[t] - r0) * gh + j0;
        float *hg = w->hg + j0;

        if (pw->lstm_lu != 0) {
                const struct rnnd__cpu_step ls = step_args(sc, r0, t, hc, hn, fuse_x);

                rnnd__cpu_lstm_step(&ls, j0, j1);
                return;
        }
        if (pw->step_lu != 0) {
                fused_step(sc, j0, j1, r0, t, hc, hn, fuse_x, sense);
                return;
        }
        if (width == H)
                rnnd__cpu_gemm_packed(nt, gh, H, hc, H, pw->rec, w->hg, gh);
        else
                for (uint32_t g = 0; g < G; g++)
                        rnnd__cpu_gemm_packed(nt, width, H, hc, H,
                                              pw->rec + (size_t)(g * H + j0) * H,
                                              hg + (size_t)g * H, gh);
        step_rows(m, nt, width, xg, hg, bi, bh, hc + j0, w->c + j0, hn + j0,
                  w->out + (size_t)pk->offs[t] * ow + (size_t)d * H + j0, ow);
}

/*
 * One participant's part of a sliced direction: hidden units [j0, j1) of
 * every gate, for every step.  Its recurrent product and gate math touch only
 * its own columns, so the participants meet once per step, when the whole
 * new state is written and the old one no longer read, and once per chunk,
 * after the input projection.
 * The state is double-buffered (w->h, w->h2): step k reads buffer k & 1 and
 * writes the other.  A row that is not running keeps its state where it was
 * last written: see final_state().
 */
static void sliced_part(void *arg, unsigned s)
{
        const struct sliced *sc = arg;
        const struct pack *pk = sc->pk;
        struct work *w = sc->w;
        const rnnd_model_t *m = sc->p->m;
        const unsigned d = sc->d;
        const struct packed *pw = &sc->p->pw[sliced_ld(sc)];
        const uint32_t H = m->cfg.hidden_size;
        const uint32_t chunks = (pk->T + chunk_steps(pk) - 1) / chunk_steps(pk);
        const uint32_t panels = H / RNND_CPU_NR;
        const unsigned n_sl = sc->slices;
        const uint32_t j0 = n_sl == 1 ? 0 : panels * s / n_sl * RNND_CPU_NR;
        const uint32_t j1 = n_sl == 1 ? H : panels * (s + 1) / n_sl * RNND_CPU_NR;
        float *hb[2] = {w->h, w->h2};
        unsigned sense = 0, k = 0;
        /*
         * A fused step computes the input projection inside its kernel once
         * there are rows enough to reuse each weight panel: no gate inputs go
         * through memory, and no weights are repacked per chunk.
         */
        const bool fuse_x = (pw->lstm_lu != 0 || pw->step_lu != 0) && pk->n >= FUSE_X_ROWS;

        if (s >= n_sl) /* a team member beyond the slices: nothing to do */
                return;
        for (uint32_t ci = 0; ci < chunks; ci++) {
                uint32_t t0, t1, r0;

                chunk_range(pk, d, ci, &t0, &t1);
                r0 = pk->offs[t0];
                if (!fuse_x)
                        sliced_project(sc, s, r0, pk->offs[t1] - r0, &sense);
                for (uint32_t kk = 0; kk < t1 - t0; kk++, k++) {
                        uint32_t t = d == 0 ? t0 + kk : t1 - 1 - kk;

                        sliced_step(sc, j0, j1, r0, t, hb[k & 1], hb[(k + 1) & 1], fuse_x, &sense);
                        if (n_sl > 1)
                                rnnd_barrier_wait((struct rnnd_spin_barrier *)&sc->barrier, &sense);
                }
        }
}

/*
 * After a sliced direction, puts each row's final state in w->h.  Step k
 * wrote buffer (k + 1) & 1.  Forward, a row of length len last ran at step
 * k = len - 1; in reverse every row last ran at step T - 1 (t = 0).
 */
static void final_state(const rnnd_model_t *m, const struct rnnd_batch *b, const struct pack *pk,
                        unsigned d, struct work *w)
{
        const uint32_t P = m->out_size;

        for (uint32_t i = 0; i < pk->n; i++) {
                uint32_t k_last = d == 0 ? b->seqs[pk->order[i]].len - 1 : pk->T - 1;

                if (((k_last + 1) & 1) == 1)
                        memcpy(w->h + (size_t)i * P, w->h2 + (size_t)i * P, P * sizeof(float));
        }
}

/* Runs layer-direction (l, d), sliced across the plan's team when slices > 1. */
static void run_direction(struct cpu_plan *p, const struct rnnd_batch *b, const struct pack *pk,
                          unsigned l, unsigned d, struct work *w, unsigned slices)
{
        struct sliced sc = {p, pk, w, l, d, slices, {0}};

        if (!sliceable(p->m)) {
                run_serial(p, pk, l, d, w);
                return;
        }
        memcpy(w->h2, w->h, (size_t)pk->n * p->m->out_size * sizeof(float));
        if (slices > 1) {
                rnnd_barrier_init(&sc.barrier, slices);
                rnnd_team_run(p->team, sliced_part, &sc);
        } else {
                sliced_part(&sc, 0);
        }
        final_state(p->m, b, pk, d, w);
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
        const bool copy_y = w->ys == NULL; /* else the kernels wrote each row's y */
        const uint32_t ow = m->dirs * m->out_size;
        const uint32_t U = m->cfg.head.present ? m->cfg.head.units : 0;
        const bool head_all = m->cfg.head.present && m->cfg.head.apply == RNND_HEAD_ALL;

        for (uint32_t t = 0; t < pk->T; t++) {
                for (uint32_t i = 0; i < pk->nt[t]; i++) {
                        const struct rnnd_seq *q = &b->seqs[pk->order[i]];
                        size_t row = pk->offs[t] + i;

                        if (copy_y && q->y != NULL && q->y != w->out) /* or written in place */
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

/* One layer of a batch, for its directions. */
struct layer_run {
        struct cpu_plan *p;
        const struct rnnd_batch *b;
        const struct pack *pk;
        unsigned l;
        struct work *w; /* [2]: direction d's buffers are w[d] (w[0] unless side by side) */
        bool side;
};

/* Runs direction d of the layer, sliced across the team when slices > 1. */
static void layer_direction(const struct layer_run *lr, unsigned d, unsigned slices)
{
        const rnnd_model_t *m = lr->p->m;
        const uint32_t P = m->out_size, D = m->dirs, ld = lr->l * D + d;
        struct work *w = &lr->w[lr->side ? d : 0];

        load_state(m, lr->b, lr->pk, ld, w);
        run_direction(lr->p, lr->b, lr->pk, lr->l, d, w, slices);
        store_state(m, lr->b, lr->pk, ld, w);
        if (lr->l == m->cfg.num_layers - 1)
                for (uint32_t i = 0; i < lr->pk->n; i++)
                        memcpy(w->feat + ((size_t)i * D + d) * P, w->h + (size_t)i * P,
                               P * sizeof(float));
}

/*
 * Team member i's part of a layer run side by side: direction i.  The
 * directions share only the layer's input (read) and output (disjoint
 * columns), so they meet once per layer, at its end.
 */
static void side_part(void *arg, unsigned i)
{
        if (i < 2)
                layer_direction(arg, i, 1);
}

/* Runs batch b of S steps on lane ln, as mode says (lane 0 unless MODE_ONE). */
/*
 * The sorted rows' own y, for the top layer's kernels to write each step's
 * rows where their sequences want them (the y of a batch of 64 GRU sequences
 * of 200 steps of 512 units is 26 MB, which the engine wrote and then copied
 * out): where every sequence takes y, no head reads the top layer's rows, and
 * every direction of the top layer runs a fused step kernel.  NULL otherwise,
 * or when the array cannot be had (the rows are then copied).
 */
static float *const *direct_y(const struct cpu_plan *p, struct lane *ln, const struct rnnd_batch *b,
                              const struct pack *pk)
{
        const rnnd_model_t *m = p->m;
        const unsigned top = (m->cfg.num_layers - 1) * m->dirs;

        if (!sliceable(m) || (m->cfg.head.present && m->cfg.head.apply == RNND_HEAD_ALL))
                return NULL;
        for (unsigned d = 0; d < m->dirs; d++)
                if (p->pw[top + d].lstm_lu == 0 && p->pw[top + d].step_lu == 0)
                        return NULL;
        for (uint32_t i = 0; i < b->n; i++)
                if (b->seqs[i].y == NULL)
                        return NULL;
        if (b->n > ln->ycap) {
                float **y = rnnd_realloc(ln->ybuf, b->n * sizeof(*y));

                if (y == NULL)
                        return NULL;
                ln->ybuf = y;
                ln->ycap = b->n;
        }
        for (uint32_t i = 0; i < b->n; i++)
                ln->ybuf[i] = b->seqs[pk->order[i]].y;
        return ln->ybuf;
}

static int run_batch(struct cpu_plan *p, struct lane *ln, const struct rnnd_batch *b, uint64_t S,
                     enum mode mode, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t L = cfg->num_layers;
        const bool side = mode == MODE_SIDE && m->dirs == 2;
        const struct rnnd_seq *q1 = b->n == 1 && m->embedding == NULL ? &b->seqs[0] : NULL;
        struct pack pk = {0};
        struct work w[2];
        float *spare;
        uint32_t T = 0;
        int r;

        for (uint32_t i = 0; i < b->n; i++)
                T = b->seqs[i].len > T ? b->seqs[i].len : T;
        r = reserve_index(ln, b->n, T, &pk, reterr);
        if (r < 0)
                return r;
        pack_batch(b, &pk);
        r = reserve(m, ln, &pk, S, side, w, reterr);
        if (r < 0)
                return r;
        spare = w[0].in;
        w[0].ys = w[1].ys = NULL;

        /*
         * One sequence of x: its packed rows are its own x and y, so layer 0
         * reads x where it is (never writing there) and the top layer writes
         * y in place: no gather, no scatter of y.
         */
        if (q1 != NULL)
                w[0].in = w[1].in = (float *)q1->x;
        else
                gather_input(m, b, &pk, w[0].in);
        for (uint32_t l = 0; l < L; l++) {
                struct layer_run lr = {p, b, &pk, l, w, side};

                if (q1 != NULL && q1->y != NULL && l == L - 1)
                        w[0].out = w[1].out = q1->y;
                else if (q1 == NULL && l == L - 1)
                        w[0].ys = w[1].ys = direct_y(p, ln, b, &pk);
                if (side)
                        rnnd_team_run(p->team, side_part, &lr);
                else
                        for (uint32_t d = 0; d < m->dirs; d++)
                                layer_direction(&lr, d, mode == MODE_SLICED ? p->slices : 1);
                if (l + 1 < L) {
                        float *t = q1 != NULL && l == 0 ? spare : w[0].in;

                        w[0].in = w[1].in = w[0].out;
                        w[0].out = w[1].out = t;
                }
        }
        if (cfg->head.present) {
                if (cfg->head.apply == RNND_HEAD_ALL)
                        apply_head(m, (uint32_t)S, w[0].out, w[0].head);
                else
                        apply_head(m, pk.n, w[0].feat, w[0].head);
        }
        scatter_outputs(m, b, &pk, &w[0]);
        return 0;
}

/* Team member i's part of a run split by sequence: lane i's share, as a batch of its own. */
static void split_part(void *arg, unsigned i)
{
        struct cpu_plan *p = arg;
        struct lane *ln = &p->lanes[i];
        const struct rnnd_batch sub = {ln->seqs, ln->n};

        ln->rc = sub.n > 0 ? run_batch(p, ln, &sub, ln->steps, MODE_ONE, &ln->err) : 0;
}

/*
 * Deals b's sequences to the plan's threads, longest first, each to the lane
 * with the fewest steps so far, and runs the shares side by side.  Each
 * sequence's numbers are those of a one-thread run: rows do not mix.
 */
static int run_split(struct cpu_plan *p, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        if (b->n > p->sortcap) {
                uint32_t *s = rnnd_realloc(p->sorted, (size_t)b->n * sizeof(uint32_t));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a batch");
                p->sorted = s;
                p->sortcap = b->n;
        }
        for (unsigned i = 0; i < p->n_threads; i++) {
                struct lane *ln = &p->lanes[i];

                if (b->n > ln->seqcap) {
                        struct rnnd_seq *s = rnnd_realloc(ln->seqs, (size_t)b->n * sizeof(*s));

                        if (s == NULL)
                                return rnnd_error_set(reterr, RNND_ENOMEM,
                                                      "out of memory for a batch");
                        ln->seqs = s;
                        ln->seqcap = b->n;
                }
                ln->n = 0;
                ln->steps = 0;
        }
        sort_by_length(b, p->sorted);
        for (uint32_t k = 0; k < b->n; k++) {
                const struct rnnd_seq *q = &b->seqs[p->sorted[k]];
                struct lane *best = &p->lanes[0];

                for (unsigned i = 1; i < p->n_threads; i++)
                        if (p->lanes[i].steps < best->steps)
                                best = &p->lanes[i];
                best->seqs[best->n++] = *q;
                best->steps += q->len;
        }
        rnnd_team_run(p->team, split_part, p);
        for (unsigned i = 0; i < p->n_threads; i++)
                if (p->lanes[i].rc < 0) {
                        *reterr = p->lanes[i].err;
                        return p->lanes[i].rc;
                }
        return 0;
}

static int cpu_run(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        struct cpu_plan *p = plan;
        uint64_t S = 0;
        uint32_t longest;
        enum mode mode;
        unsigned fp;
        int r;

        r = rnnd_batch_check(p->m, b, &S, &longest, reterr);
        if (r < 0)
                return r;
        fp = rnnd__cpu_fp_mode();
        rnnd__cpu_fp_set(fp | RNND_CPU_FP_FLUSH); /* denormals as zero (cpu-int.h) */
        mode = batch_mode(p, b->n);
        if (mode == MODE_SPLIT)
                r = run_split(p, b, reterr);
        else
                r = run_batch(p, &p->lanes[0], b, S, mode, reterr);
        rnnd__cpu_fp_set(fp);
        return r;
}

/* One block's engine; rnnd_cpu_backend (chain.c) runs a chain's blocks on it. */
const struct rnnd_backend_ops rnnd__cpu_block_backend = {
        .name = "cpu",
        .open = cpu_open,
        .run = cpu_run,
        .close = cpu_close,
        .describe = cpu_describe,
};
