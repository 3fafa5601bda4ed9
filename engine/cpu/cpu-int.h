/*
 * cpu-int.h: the CPU engine's gate kernels, shared by cpu.c and the tests.
 * Each works on one row of one step: xg holds the input projection W x (no
 * bias), hg the recurrent projection R h (no bias), both in cuDNN gate order.
 */
#ifndef RNND_ENGINE_CPU_INT_H
#define RNND_ENGINE_CPU_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "modelcfg.h"

/*
 * The engine of one block (cpu.c): rnnd_cpu_backend (chain.c) runs a model
 * of one block on it directly and a chain block by block.
 */
struct rnnd_backend_ops;
extern const struct rnnd_backend_ops rnnd__cpu_block_backend;

/*
 * The row kernels work on n hidden units of one row, gate g's values at
 * offset g * stride (stride = H for a whole row, or a slice of it).
 *
 * LSTM, gates i,f,g,o: c = f*c + i*g; h = o*tanh(c).  Updates c[0..n) in
 * place and writes h[0..n) (the projection input when the model projects).
 */
void rnnd__cpu_lstm_row(uint32_t n, uint32_t stride, const float *xg, const float *hg,
                        const float *bi, const float *bh, float *c, float *h);

/*
 * GRU with linear_before_reset, gates r,z,n: reads the old state h_in,
 * n = tanh(W_n x + b_in + r*(R_n h + b_hn)); h_out = (1-z)*n + z*h_in.
 */
void rnnd__cpu_gru_row(uint32_t n, uint32_t stride, const float *xg, const float *hg,
                       const float *bi, const float *bh, const float *h_in, float *h_out);

/*
 * GRU with the reset gate before R_n, first half: computes r and z, stores z
 * into hg[H..2H) and r*h into rh[0..H).
 */
void rnnd__cpu_gru_rz_row(uint32_t H, const float *xg, float *hg, const float *bi, const float *bh,
                          const float *h, float *rh);

/*
 * Second half: hg[2H..3H) now holds R_n (r*h).
 * n = tanh(W_n x + b_in + R_n (r*h) + b_hn); h = (1-z)*n + z*h, in place.
 */
void rnnd__cpu_gru_n_row(uint32_t H, const float *xg, const float *hg, const float *bi,
                         const float *bh, float *h);

/* Elman RNN: h = act(W x + b_ih + R h + b_hh), act tanh or relu, over n units. */
void rnnd__cpu_rnn_row(uint32_t n, bool relu, const float *xg, const float *hg, const float *bi,
                       const float *bh, float *h);

/* Applies a head activation to v[0..n) in place (softmax over the row). */
void rnnd__cpu_activate(rnnd_act_t act, uint32_t n, float *v);

/*
 * The recurrent GEMM with weights packed once.  OpenBLAS repacks its weight
 * operand on every call, which for one call per step and a few rows was a
 * third of the time (perf, batch 8); packing at plan open removes it.
 * Panels of RNND_CPU_NR output columns: P[panel][k][RNND_CPU_NR], the last
 * panel padded with zeros.
 */
#define RNND_CPU_NR 16u

/* Floats needed to pack an [N, K] matrix.  Thread-safe. */
size_t rnnd__cpu_packed_size(uint32_t N, uint32_t K);

/* Packs W [N, K] (row stride ldw) into P (rnnd__cpu_packed_size floats). */
void rnnd__cpu_pack(uint32_t N, uint32_t K, const float *W, uint32_t ldw, float *P);

/* C[M, N] (row stride ldc) = A[M, K] (row stride lda) x W^T, W packed in P. */
void rnnd__cpu_gemm_packed(uint32_t M, uint32_t N, uint32_t K, const float *A, uint32_t lda,
                           const float *P, float *C, uint32_t ldc);

/*
 * The fused steps: the recurrent product, the input projection when X is
 * given, and the gate math in one pass over weights packed in panels of lu
 * hidden units (16 where the CPU has AVX-512, 8 where it has AVX2 and FMA),
 * each panel holding every gate of its units, so that a register block of
 * rows x panels ends with all the gates of the same units.  A GRU with the
 * reset before R_n takes two passes per step, GRU_RZ over all units and then
 * GRU_N, since R_n reads r*h of every unit.
 */
enum rnnd__cpu_kind {
        RNND_CPU_LSTM,   /* i, f, g, o (no projection): rnnd__cpu_lstm_step() */
        RNND_CPU_GRU,    /* reset after: r, z, n = tanh(W_n x + b_in + r*(R_n h + b_hn)) */
        RNND_CPU_GRU_RZ, /* reset before, first pass: writes r*h_old to h and z to z */
        RNND_CPU_GRU_N,  /* second pass, A = r*h_old: n = tanh(W_n x + R_n A + b_in + b_hn) */
        RNND_CPU_TANH,   /* h = tanh(W x + R h + b_ih + b_hh) */
        RNND_CPU_RELU,   /* h = max(W x + R h + b_ih + b_hh, 0) */
};

/*
 * One step.  The packed weights, per panel: the summed biases (the GRU keeps
 * b_in and b_hn apart), then W_ih's KX rows and W_hh's K rows, each as
 * [gate][unit] over the kind's gates (LSTM i,f,g,o; GRU r,z,n; GRU_RZ r,z;
 * the others one); the last panel padded with zeros.
 */
struct rnnd__cpu_step {
        enum rnnd__cpu_kind kind;
        uint32_t lu;    /* units per panel, as packed: 16 or 8 */
        uint32_t M, H;  /* running rows, hidden units */
        uint32_t KX, K; /* x's width (as packed), A's width (= H) */
        const float *P; /* the packed weights */
        const float *X; /* [M, KX] x, row stride ldxin; or NULL when xg is given */
        uint32_t ldxin;
        const float *xg; /* [M, .] W x of the kind's gates, gate g at g*H, row stride ldx */
        uint32_t ldx;
        const float *A; /* [M, K] the product's input (h; GRU_N: r*h), row stride lda */
        uint32_t lda;
        const float *hold; /* GRU kinds: [M, H] the old state h, row stride ldo */
        uint32_t ldo;
        float *c;     /* LSTM: [M, H] the cell state, updated in place */
        float *z;     /* GRU_RZ writes, GRU_N reads: [M, H] z, row stride H */
        float *h, *y; /* [M, H] the new h (GRU_RZ: r*h_old), and y unless NULL (LSTM: never) */
        uint32_t ldh, ldy;
        float *const *ys; /* or, unless NULL, row r's y at ys[r] + yoff (y, ldy unused) */
        size_t yoff;
};

/* Where row r of a step writes its y, or NULL: y + r ldy, or ys[r] + yoff. */
static inline float *rnnd__cpu_yrow(const struct rnnd__cpu_step *s, size_t r)
{
        if (s->ys != NULL)
                return s->ys[r] + s->yoff;
        return s->y != NULL ? s->y + r * s->ldy : NULL;
}

/*
 * The packed weights P of the fused kernels start at a multiple of a vector
 * (lu floats), and so does each panel: a vector then never straddles two
 * cache lines.  The kernels assert it; cpu.c aligns its buffers to
 * RNND_CPU_ALIGN bytes.
 */
#define RNND_CPU_ALIGN 64u

/*
 * Asks for the lines of y that a block of rows [m, m + mr) will write at
 * units [u, u + n), with intent to write, before the block sums: a batch's y
 * is new memory every step (each sequence's own output), whose lines came
 * from L3 or DRAM only when the block stored into them at its end; asked for
 * first, they have arrived by then (docs/BENCHMARKS.md "y fetched before it
 * is written": +4-7% a step for the GRU of hidden 512 at 64 rows).  One line more
 * where a row's units do not start on one.  A lone row's y is one line a
 * block, not worth the instructions.
 */
static inline __attribute__((always_inline)) void
rnnd__cpu_fetch_y(const struct rnnd__cpu_step *s, size_t mr, size_t n, size_t m, size_t u)
{
        const size_t line = RNND_CPU_ALIGN / sizeof(float);

        if (mr == 1 || (s->y == NULL && s->ys == NULL))
                return;
        for (size_t r = 0; r < mr; r++) {
                const float *at = rnnd__cpu_yrow(s, m + r) + u;

                for (size_t j = 0; j < n; j += line)
                        __builtin_prefetch(at + j, 1, 3);
                if ((uintptr_t)at % RNND_CPU_ALIGN != 0)
                        __builtin_prefetch(at + n - 1, 1, 3);
        }
}

/* Floats needed to pack W_ih [4H, KX], W_hh [4H, K] and the biases.  Thread-safe. */
size_t rnnd__cpu_lstm_packed_size(uint32_t lu, uint32_t H, uint32_t KX, uint32_t K);

/* Packs W_ih [4H, KX], W_hh [4H, K] (gate order i,f,g,o) and b_ih + b_hh into P. */
void rnnd__cpu_lstm_pack(uint32_t lu, uint32_t H, uint32_t KX, const float *W_ih, uint32_t K,
                         const float *W_hh, const float *b_ih, const float *b_hh, float *P);

/*
 * The LSTM's step (kind RNND_CPU_LSTM) for hidden units [j0, j1) of every
 * row: j0 a multiple of RNND_CPU_NR, j1 one too or H.  Reads X, xg and A,
 * which must not alias c, h or y.
 */
void rnnd__cpu_lstm_step(const struct rnnd__cpu_step *s, uint32_t j0, uint32_t j1);

/* Floats needed to pack a GRU or RNN kind's weights.  Thread-safe. */
size_t rnnd__cpu_step_packed_size(enum rnnd__cpu_kind kind, uint32_t lu, uint32_t H, uint32_t KX,
                                  uint32_t K);

/*
 * Packs kind's gates of W_ih [., KX], W_hh [., K] and the biases into P:
 * gate g of the kind is rows [g H, (g + 1) H) from the pointers given
 * (GRU_N: pass the n rows and n biases).
 */
void rnnd__cpu_step_pack(enum rnnd__cpu_kind kind, uint32_t lu, uint32_t H, uint32_t KX,
                         const float *W_ih, uint32_t K, const float *W_hh, const float *b_ih,
                         const float *b_hh, float *P);

/*
 * A GRU or RNN kind's step for units [j0, j1) of every row: j0 a multiple of
 * RNND_CPU_NR, j1 one too or H.  Reads X, xg, A, hold (and z for GRU_N),
 * which must not alias h, y (or z for GRU_RZ).
 */
void rnnd__cpu_step(const struct rnnd__cpu_step *s, uint32_t j0, uint32_t j1);

/*
 * The input projection of any kind, LSTM included, from its packed weights:
 * writes xg[M, G*H] = X W_ih^T of the kind's G gates (no bias), all units,
 * row stride ldx, through s->xg (which must be writable and not alias X).
 * Reads lu, kind, M, H, KX, K, P, X and ldxin.
 */
void rnnd__cpu_project(const struct rnnd__cpu_step *s);

/* Vectorisable float sigmoid and tanh (max abs error ~1e-7), over n values. */
void rnnd__cpu_sigmoid(uint32_t n, const float *x, float *y);
void rnnd__cpu_tanh(uint32_t n, const float *x, float *y);

/*
 * The floating-point mode the engine runs in: denormal floats read as zero
 * (DAZ) and results that would be denormal written as zero (FTZ).  An x86
 * core takes a microcode assist of about a hundred cycles for each denormal
 * operand or result, so a batch of them (random bytes sent as FP32 hold many:
 * perf_analyzer's default data does) ran ten times slower than the same batch
 * of zeros, a slowdown any client could buy.  Values below 2^-126 (1.2e-38)
 * become 0, far under the 1e-5 the engine holds against PyTorch.  cpu_run()
 * sets the mode on the calling thread for the run and puts the caller's back
 * after; a team's helpers take the mode of the thread that runs the team
 * (team.c).  Elsewhere (not x86-64) the mode is left as it is.  Thread-safe:
 * the mode is per thread.
 */
#define RNND_CPU_FP_FLUSH 0x8040u /* MXCSR's FTZ (bit 15) and DAZ (bit 6) */

static inline unsigned rnnd__cpu_fp_mode(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
        return __builtin_ia32_stmxcsr();
#else
        return 0;
#endif
}

static inline void rnnd__cpu_fp_set(unsigned mode)
{
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_ia32_ldmxcsr(mode);
#else
        (void)mode;
#endif
}

#endif
