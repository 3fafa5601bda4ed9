/*
 * dnn.h: the stand-in's cuDNN objects, shared by dnn.c (handles,
 * descriptors, the weight space, cudnnRNNForward's checks) and rnn.c (the
 * forward pass that runs on the stream).
 */
#ifndef RNND_CUDASIM_DNN_H
#define RNND_CUDASIM_DNN_H

#include <cudnn.h>

#include "sim.h"

struct cudnnContext {
        unsigned magic;
        int dev;
        cudaStream_t stream;
};

struct cudnnTensorStruct {
        unsigned magic;
        bool set;
        cudnnDataType_t type;
        int nb;
        int dim[CUDNN_DIM_MAX], stride[CUDNN_DIM_MAX];
};

struct cudnnDropoutStruct {
        unsigned magic;
        bool set;
        float dropout;
};

struct rnn_cfg {
        cudnnRNNAlgo_t algo;
        cudnnRNNMode_t cell;
        cudnnRNNBiasMode_t bias;
        cudnnDirectionMode_t dir;
        cudnnRNNInputMode_t input;
        cudnnDataType_t type, math_prec;
        cudnnMathType_t math;
        int32_t in, hid, proj, layers;
        uint32_t aux;
};

struct cudnnRNNStruct {
        unsigned magic;
        bool set;
        struct rnn_cfg c;
        cudnnDropoutDescriptor_t dropout;
        int built_batch; /* PERSIST_DYNAMIC: cudnnBuildRNNDynamic's miniBatch, 0 before */
        int built_dev;
};

struct cudnnRNNDataStruct {
        unsigned magic;
        bool set;
        cudnnDataType_t type;
        cudnnRNNDataLayout_t layout;
        int T, B, V;
        int *len;
        bool has_fill;
        double fill;
        unsigned char fill_raw[8]; /* as given, for cudnnGetRNNDataDescriptor */
};

/* One matrix or bias in the weight space. */
struct wblock {
        size_t off;     /* bytes */
        int rows, cols; /* cols 1: a bias; rows 0: absent */
};

/* The weight space's layout for one (device, settings, algorithm). */
struct wlayout {
        size_t size; /* bytes */
        int n_pl, n_lin;
        struct wblock *mat, *bias; /* [pl * n_lin + lin] */
};

/* Gates per cell: 1 (RELU, TANH), 4 (LSTM), 3 (GRU). */
int sim_rnn_gates(cudnnRNNMode_t cell);
size_t sim_dtype_size(cudnnDataType_t t);

/* Everything the forward pass needs, copied at cudnnRNNForward time. */
struct rnn_fwd {
        struct rnn_cfg c;
        struct wlayout w;
        cudnnRNNDataLayout_t layout;
        int T, B, in_v, out_v;
        int *len;               /* the descriptor's (host) lengths */
        const int32_t *dev_len; /* may be NULL */
        bool has_fill;
        float fill;
        const void *x;
        void *y;
        const void *hx, *cx;
        void *hy, *cy;
        const void *wspace;
        void *work;
        size_t work_size;
};

/* Runs on the stream thread (rnn.c). */
cudaError_t sim_rnn_forward_run(struct sim_op *op);
void sim_rnn_forward_free(struct sim_op *op);

#endif
