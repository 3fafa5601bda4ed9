/*
 * cpu-int.h: the CPU engine's gate kernels, shared by cpu.c and the tests.
 * Each works on one row of one step: xg holds the input projection W x (no
 * bias), hg the recurrent projection R h (no bias), both in cuDNN gate order.
 */
#ifndef RNND_ENGINE_CPU_INT_H
#define RNND_ENGINE_CPU_INT_H

#include <stdbool.h>
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
 * The fused LSTM step (no projection): the recurrent product and the cell
 * update in one pass, and optionally the input projection too.  Weights
 * packed by rnnd__cpu_lstm_pack() in panels of the four gates of lu hidden
 * units (16 where the CPU has AVX-512, 8 where it has AVX2 and FMA): per
 * panel the summed biases, then W_ih's KX rows, then W_hh's K rows, each as
 * [gate][unit]; the last panel padded with zeros.
 */
struct rnnd__cpu_lstm_step {
        uint32_t lu;    /* units per panel, as packed: 16 or 8 */
        uint32_t M, H;  /* running rows, hidden units */
        uint32_t KX, K; /* x's width (as packed), h's width (= H) */
        const float *P; /* the packed weights */
        const float *X; /* [M, KX] x, row stride ldxin; or NULL when xg is given */
        uint32_t ldxin;
        const float *xg; /* [M, 4H] W x in gate order i,f,g,o, row stride ldx; or NULL */
        uint32_t ldx;
        const float *A; /* [M, K] the state h, row stride lda */
        uint32_t lda;
        float *c;     /* [M, H] the cell state, updated in place */
        float *h, *y; /* [M, H] the new h, written to both (row strides ldh, ldy) */
        uint32_t ldh, ldy;
};

/* Floats needed to pack W_ih [4H, KX], W_hh [4H, K] and the biases.  Thread-safe. */
size_t rnnd__cpu_lstm_packed_size(uint32_t lu, uint32_t H, uint32_t KX, uint32_t K);

/* Packs W_ih [4H, KX], W_hh [4H, K] (gate order i,f,g,o) and b_ih + b_hh into P. */
void rnnd__cpu_lstm_pack(uint32_t lu, uint32_t H, uint32_t KX, const float *W_ih, uint32_t K,
                         const float *W_hh, const float *b_ih, const float *b_hh, float *P);

/*
 * One step for hidden units [j0, j1) of every row: j0 a multiple of
 * RNND_CPU_NR, j1 one too or H.  Reads X, xg and A, which must not alias c,
 * h or y.
 */
void rnnd__cpu_lstm_step(const struct rnnd__cpu_lstm_step *s, uint32_t j0, uint32_t j1);

/* Vectorisable float sigmoid and tanh (max abs error ~1e-7), over n values. */
void rnnd__cpu_sigmoid(uint32_t n, const float *x, float *y);
void rnnd__cpu_tanh(uint32_t n, const float *x, float *y);

#endif
