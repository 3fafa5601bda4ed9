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

/* Vectorisable float sigmoid and tanh (max abs error ~1e-7), over n values. */
void rnnd__cpu_sigmoid(uint32_t n, const float *x, float *y);
void rnnd__cpu_tanh(uint32_t n, const float *x, float *y);

#endif
