/*
 * cudnn-int.h: what the cuDNN backend's files share: the CUDA kernels of
 * kernels.cu (row gathers with type conversion, the head's bias and
 * activation, a fault for tests) and the host-side layout of a batch
 * (layout.c).  Included only inside engine/cudnn/ and by tests.
 */
#ifndef RNND_ENGINE_CUDNN_INT_H
#define RNND_ENGINE_CUDNN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types the kernels read and write. */
enum rnnd__dtype {
        RNND__F32 = 0,
        RNND__F16 = 1,
};

/*
 * dst row r = src row idx[r] converted from src_t to dst_t, or zeros where
 * idx[r] < 0; idx NULL means idx[r] = r.  Rows are width elements.  Queued
 * on stream s; returns the launch status.
 */
cudaError_t rnnd__cuda_gather(const void *src, int src_t, const int32_t *idx, uint32_t rows,
                              uint32_t width, void *dst, int dst_t, cudaStream_t s);

/*
 * v [rows, units] float32: adds bias (may be NULL) to every row, then applies
 * act (an rnnd_act_t) per row, softmax over each row's units.  Returns the
 * launch status.
 */
cudaError_t rnnd__cuda_head_finish(float *v, const float *bias, uint32_t rows, uint32_t units,
                                   int act, cudaStream_t s);

/* Writes through a bad address on stream s: a sticky fault, for tests. */
cudaError_t rnnd__cuda_fault(cudaStream_t s);

#ifdef __cplusplus
}

#else

#include <cudnn.h>

#include "backend.h"

/*
 * The layout of one batch in the input region: int32 arrays then float32
 * arrays, each starting on 64 bytes, x last (staged a window at a time).  Offsets are in 4-byte
 * elements from the start of the input region.  A sequence-major row of step t and sequence b is t
 * * n + b; a batch-major row is b * T + t; a state row of layer-direction ld is ld * n + b in
 * cuDNN's hx/hy and b * LD + ld in the caller's h0/h_n.
 */
struct rnnd__cudnn_layout {
        uint32_t n, T;   /* sequences, longest length */
        uint32_t LD;     /* num_layers * dirs */
        bool equal;      /* every length is T */
        bool any_h0;     /* some sequence has h0 */
        bool any_c0;     /* some sequence has c0 (LSTM) */
        size_t len;      /* int32 [n] lengths */
        size_t idx_x;    /* int32 [T * n]: seq-major row -> token or staged row, -1 pad */
        size_t idx_y;    /* int32 [n * T]: batch-major row -> seq-major row, -1 pad */
        size_t idx_hin;  /* int32 [LD * n]: cuDNN state row -> caller row */
        size_t idx_hout; /* int32 [n * LD]: caller row -> cuDNN state row */
        size_t h0;       /* float [n * LD * H'] staged h0, zeros where absent */
        size_t c0;       /* float [n * LD * H] staged c0 */
        size_t x;        /* float [n * T * in] inputs, batch-major (no embedding); the last */
        size_t end;      /* elements used */
};

/*
 * The input region's size in 4-byte elements for a batch of n sequences of
 * longest length T (an upper bound: every optional part counted), with x
 * or up to x.
 */
size_t rnnd__cudnn_in_size(const rnnd_model_t *m, uint32_t n, uint32_t T, bool with_x);

/*
 * Lays batch b (already validated) into buf up to x (ret->x elements, at
 * most rnnd__cudnn_in_size(m, b->n, T, false)), and fills *ret.  Pure: no
 * CUDA.
 */
void rnnd__cudnn_stage(const rnnd_model_t *m, const struct rnnd_batch *b, void *buf,
                       struct rnnd__cudnn_layout *ret);

/*
 * Where a region's elements [at, at + n), held in buf, overlap a window
 * [from, from + count) held in win: copies that overlap into win (to_win)
 * or out of it into buf.  Pure.
 */
void rnnd__cudnn_window(float *buf, size_t at, size_t n, float *win, size_t from, size_t count,
                        bool to_win);

/*
 * Copies elements [from, from + count) of the x region of layout o (a model
 * without an embedding) to dst: each sequence's inputs where they lie,
 * padding left as it is (the gather reads zeros there).  Pure.
 */
void rnnd__cudnn_stage_x(const rnnd_model_t *m, const struct rnnd_batch *b,
                         const struct rnnd__cudnn_layout *o, size_t from, size_t count, float *dst);

/*
 * Checks batch b against model m and the plan's bounds (at most max_n
 * sequences and max_rows = n x longest).  Returns 0 with *T the longest
 * length, or RNND_EINVAL naming the sequence.  Pure.
 */
int rnnd__cudnn_check(const rnnd_model_t *m, const struct rnnd_batch *b, uint32_t max_n,
                      uint64_t max_rows, uint32_t *T, rnnd_error_t *reterr);

/*
 * Whether weight or bias descriptor d has the shape [rows, cols] (cuDNN
 * reports {1, rows, cols}; a bias is [rows, 1]); got receives its
 * dimensions ("[1, 16, 8]").  The weight check of open().
 */
bool rnnd__cudnn_tensor_is(cudnnTensorDescriptor_t d, size_t rows, size_t cols, char *got,
                           size_t cap);

/*
 * Floats of the pinned windows a batch's inputs and outputs go through,
 * read at open (a test sets it small to exercise the windows).
 */
extern size_t rnnd__cudnn_staging_window;

/*
 * Test hook: how many algorithm probes (timings) ran in this process, and
 * the most that ever ran at once on one GPU.
 */
void rnnd__cudnn_probe_stats(unsigned *probes, unsigned *most_at_once);

/* Test hook: kind 0 makes the plan's device fail (sticky); kind 1 fails its next run. */
int rnnd__cudnn_inject_fault(void *plan, int kind);

#endif

#endif
