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

#include <cublas_v2.h>
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

/*
 * A plan's and its descriptors' state (cudnn.c's DESIGN comment): one per
 * model per GPU instance, on the instance's worker thread.
 */
/* One RNN descriptor with its own weight space. */
struct rnn {
        cudnnRNNDescriptor_t desc; /* immutable after open */
        cudnnRNNAlgo_t algo;       /* immutable after open */
        void *wspace;              /* device; immutable after open */
        size_t wsize;              /* bytes */
        int dyn_batch;             /* PERSIST_DYNAMIC: the batch size it was built for */
        double ms;                 /* time of the probe batch at open */
};

struct shared;

struct plan {
        rnnd_model_t *m;      /* a reference; immutable after open */
        int device;           /* GPU ordinal; immutable */
        char device_name[96]; /* immutable */
        int cc;               /* compute capability, major * 10 + minor */
        bool half;            /* fp16 data (precision fp16) */
        int dt;               /* RNND__F32 or RNND__F16: cuDNN data */
        cudnnDataType_t cdt;  /* the same for cuDNN */
        size_t esz;           /* bytes per cuDNN data element */
        uint32_t max_n;       /* max_batch_size */
        uint64_t max_rows;    /* n x longest, at most */
        cudaStream_t stream;  /* the worker's */
        cudnnHandle_t handle; /* bound to stream */
        cublasHandle_t blas;  /* bound to stream */
        cudnnDropoutDescriptor_t dropout;
        cudnnRNNDataDescriptor_t xdesc, ydesc;
        cudnnTensorDescriptor_t hdesc, cdesc;
        cudnnTensorDescriptor_t mdesc, bdesc; /* for cudnnGetRNNWeightParams */
        struct rnn std;                       /* STANDARD: every batch; sh's */
        struct rnn fast;  /* a persistent algorithm for equal lengths, or desc NULL; sh's */
        double std_ms;    /* STANDARD's probe time, 0 when not probed */
        void *work;       /* cuDNN workspace */
        size_t work_size; /* bytes */
        void *h_in;       /* pinned: the input region up to x, then a window of x */
        size_t h_elems;   /* its 4-byte elements */
        size_t h_head;    /* where the window starts: the largest batch's part before x */
        size_t x_win;     /* the window's floats */
        size_t in_elems;  /* the device input region's 4-byte elements */
        float *h_out;     /* pinned: a window of the output region */
        size_t out_win;   /* its floats */
        size_t out_elems; /* the device output region's floats */
        void *d_in;       /* the device input region (layout.c) */
        float *d_out;     /* the device output region */
        void *d_x, *d_y;  /* cuDNN x [T, n, in] and y [T, n, D*H'] */
        void *d_hx, *d_cx, *d_hy, *d_cy; /* cuDNN states [LD, n, H'] / [LD, n, H] */
        float *d_head;                   /* head rows before the gather (apply all) */
        float *d_w;         /* the model's fp32 weights (embedding and head point in); sh's */
        void *d_head_w16;   /* fp16 head weights, or NULL; sh's */
        bool lost;          /* the device failed; worker thread only */
        char lost_msg[160]; /* why */
        bool fail_next;     /* test hook: fail the next run (non-sticky) */
        struct shared *sh; /* the weights of the model on this GPU, a reference; NULL until taken */
        struct chain *chain; /* a chain's first block only: the others (cudnn-chain.c); else NULL */
};

/*
 * The one check for every CUDA, cuDNN and cuBLAS call: a failing status
 * becomes RNND_EGPU (RNND_EDEVLOST when the device is gone) with the
 * library's message, in r, and jumps to out.  Needs p, r and reterr in scope.
 */
#define GPU_CK(call)                                                                               \
        do {                                                                                       \
                r = _Generic((call), cudaError_t                                                   \
                             : rnnd__cudnn_check_cuda, cudnnStatus_t                               \
                             : rnnd__cudnn_check_cudnn, cublasStatus_t                             \
                             : rnnd__cudnn_check_cublas)(p, (call), #call, reterr);                \
                if (r < 0)                                                                         \
                        goto out;                                                                  \
        } while (0)

/*
 * GPUs the per-GPU tables of cudnn-probe.c and cudnn-cache.c hold: cudnn.h's
 * RNND_CUDNN_MAX_DEVICES (cudnn.c checks), here so that those files need not
 * include the ops' public header.
 */
#define RNND__CUDNN_GPUS 16

/* Longest sequences of the probe batch (cudnn-probe.c), which the plan's buffers hold. */
#define PROBE_STEPS      64u

/* status (cudnn-status.c): each returns 0, or fails as GPU_CK says; p may be NULL. */
/* Whether e leaves the process's CUDA context unusable until it ends. */
bool rnnd__cudnn_sticky(cudaError_t e);
int rnnd__cudnn_check_cuda(struct plan *p, cudaError_t e, const char *call, rnnd_error_t *reterr);
int rnnd__cudnn_check_cudnn(struct plan *p, cudnnStatus_t s, const char *call,
                            rnnd_error_t *reterr);
int rnnd__cudnn_check_cublas(struct plan *p, cublasStatus_t s, const char *call,
                             rnnd_error_t *reterr);
/* Why the process's CUDA context is unusable, once a sticky error was seen; else NULL. */
const char *rnnd__cudnn_device_fault(void);

/* weights (cudnn-weights.c). */
/* Creates rn with algorithm algo on p's descriptors and lays the weights in. */
int rnnd__cudnn_rnn_init(struct plan *p, struct rnn *rn, cudnnRNNAlgo_t algo, rnnd_error_t *reterr);
/* Frees rn's descriptor and weight space; accepts an empty rn. */
void rnnd__cudnn_rnn_free(struct rnn *rn);
/* Grows p's workspace to what rn needs for any batch shape of the plan. */
int rnnd__cudnn_size_workspace(struct plan *p, struct rnn *rn, rnnd_error_t *reterr);
/* The model's fp32 weights on p's device, and the fp16 head for fp16 data. */
int rnnd__cudnn_upload_weights(struct plan *p, rnnd_error_t *reterr);

/* Running a descriptor (cudnn-weights.c): the shapes of a batch, then the forward pass. */
int rnnd__cudnn_set_shapes(struct plan *p, uint32_t n, uint32_t T, const int32_t *lens,
                           rnnd_error_t *reterr);
int rnnd__cudnn_forward(struct plan *p, struct rnn *rn, const int32_t *d_lens, const void *hx,
                        const void *cx, rnnd_error_t *reterr);

/* probe (cudnn-probe.c): times the algorithms and keeps the fastest in p->fast. */
int rnnd__cudnn_probe_algos(struct plan *p, rnnd_error_t *reterr);

/*
 * Plans (cudnn.c), one per block: a model of one block is one plan; a chain
 * (cudnn-chain.c) a plan per block.  plan_run() runs batch b; prev, when
 * not NULL, is the plan of the block before, whose y (on the device, from
 * its last run) is this block's x, and then b's x is not read.
 */
int rnnd__cudnn_plan_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, struct plan **ret,
                          rnnd_error_t *reterr);
int rnnd__cudnn_plan_run(struct plan *p, const struct rnnd_batch *b, const struct plan *prev,
                         rnnd_error_t *reterr);
void rnnd__cudnn_plan_close(struct plan *p);
void rnnd__cudnn_plan_describe(const struct plan *p, struct rnnd_backend_desc *d);
bool rnnd__cudnn_plan_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap);

/*
 * Chains (cudnn-chain.c): a plan per block on one GPU, each sharing its
 * block's weights with the chain's other instances there, the activations
 * passed from block to block on the device.  open() returns the first
 * block's plan, holding the chain.
 */
int rnnd__cudnn_chain_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts,
                           struct plan **ret, rnnd_error_t *reterr);
int rnnd__cudnn_chain_run(struct plan *p, const struct rnnd_batch *b, rnnd_error_t *reterr);
void rnnd__cudnn_chain_close(struct plan *p);
void rnnd__cudnn_chain_describe(const struct plan *p, struct rnnd_backend_desc *d);
bool rnnd__cudnn_chain_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap);

/* cache (cudnn-cache.c). */
/* Takes (or builds and shares) the weights and algorithm of p's model on p's GPU. */
int rnnd__cudnn_shared_take(struct plan *p, rnnd_error_t *reterr);
/* Drops a plan's reference; the last frees what was shared.  Accepts NULL. */
void rnnd__cudnn_shared_drop(struct shared *sh);
/* Frees a plan's own partial build (never shared). */
void rnnd__cudnn_weights_free(cudnnDropoutDescriptor_t dropout, struct rnn *std, struct rnn *fast,
                              float *d_w, void *d_head_w16);

#endif

#endif
