/*
 * dnn.c: the stand-in's cuDNN (tests/cudasim/README.md): handles,
 * tensor/dropout/RNN/RNN-data descriptors with the checks cuDNN 9 documents,
 * the weight space with a randomised layout served only through
 * cudnnGetRNNWeightParams, temp-space sizes, cudnnBuildRNNDynamic, and
 * cudnnRNNForward's checks before the pass (rnn.c) is queued on the
 * handle's stream.  cuDNN has its own CUDA runtime: its errors never reach
 * the application's cudaGetLastError(); each thread keeps cuDNN's last
 * message for cudnnGetLastErrorString().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dnn.h"

#define MAGIC_DNN     0x444e4e48u
#define MAGIC_TENSOR  0x54454e53u
#define MAGIC_DROPOUT 0x44524f50u
#define MAGIC_RNN     0x524e4e44u
#define MAGIC_RNNDATA 0x524e4e58u

static __thread char last_msg[512];

/* Records the message of a failing call and returns its status. */
static cudnnStatus_t err(cudnnStatus_t st, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static cudnnStatus_t err(cudnnStatus_t st, const char *fmt, ...)
{
        va_list ap;
        int n = snprintf(last_msg, sizeof(last_msg), "%s: ", cudnnGetErrorString(st));

        va_start(ap, fmt);
        if (n > 0 && (size_t)n < sizeof(last_msg))
                vsnprintf(last_msg + n, sizeof(last_msg) - (size_t)n, fmt, ap);
        va_end(ap);
        return st;
}

size_t cudnnGetVersion(void)
{
        return CUDNN_VERSION;
}

size_t cudnnGetCudartVersion(void)
{
        return CUDART_VERSION;
}

const char *cudnnGetErrorString(cudnnStatus_t s)
{
        switch (s) {
#define S(x)                                                                                       \
        case x:                                                                                    \
                return #x
                S(CUDNN_STATUS_SUCCESS);
                S(CUDNN_STATUS_NOT_INITIALIZED);
                S(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH);
                S(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH);
                S(CUDNN_STATUS_DEPRECATED);
                S(CUDNN_STATUS_LICENSE_ERROR);
                S(CUDNN_STATUS_RUNTIME_IN_PROGRESS);
                S(CUDNN_STATUS_RUNTIME_FP_OVERFLOW);
                S(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED);
                S(CUDNN_STATUS_BAD_PARAM);
                S(CUDNN_STATUS_BAD_PARAM_NULL_POINTER);
                S(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER);
                S(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED);
                S(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND);
                S(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT);
                S(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH);
                S(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH);
                S(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES);
                S(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE);
                S(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH);
                S(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE);
                S(CUDNN_STATUS_NOT_SUPPORTED);
                S(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN);
                S(CUDNN_STATUS_NOT_SUPPORTED_SHAPE);
                S(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE);
                S(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT);
                S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER);
                S(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART);
                S(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH);
                S(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING);
                S(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE);
                S(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT);
                S(CUDNN_STATUS_NOT_SUPPORTED_PADDING);
                S(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM);
                S(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API);
                S(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE);
                S(CUDNN_STATUS_INTERNAL_ERROR);
                S(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED);
                S(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE);
                S(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED);
                S(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED);
                S(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM);
                S(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED);
                S(CUDNN_STATUS_EXECUTION_FAILED);
                S(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER);
                S(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS);
                S(CUDNN_STATUS_EXECUTION_FAILED_CUDART);
                S(CUDNN_STATUS_EXECUTION_FAILED_CURAND);
#undef S
        default:
                break;
        }
        return "CUDNN_STATUS_UNKNOWN";
}

void cudnnGetLastErrorString(char *message, size_t max_size)
{
        if (message == NULL || max_size == 0)
                return;
        snprintf(message, max_size, "%s", last_msg);
        last_msg[0] = '\0';
}

/* ---- the handle ---- */

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
        struct cudnnContext *c;

        if (h == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreate: handle is NULL");
        if (sim_device_count() == 0)
                return err(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate: no CUDA device");
        if (sim_sticky() != cudaSuccess)
                return err(CUDNN_STATUS_NOT_INITIALIZED, "cudnnCreate: the device failed (%s)",
                           cudaGetErrorName(sim_sticky()));
        c = calloc(1, sizeof(*c));
        if (c == NULL)
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "cudnnCreate");
        c->magic = MAGIC_DNN;
        c->dev = sim_current_device();
        *h = c;
        return CUDNN_STATUS_SUCCESS;
}

static bool handle_ok(cudnnHandle_t h)
{
        return h != NULL && h->magic == MAGIC_DNN;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
        if (!handle_ok(h))
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnDestroy: not a handle");
        sim_stream_sync(sim_stream_of(h->stream, h->dev));
        h->magic = 0;
        free(h);
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
        struct sim_stream *st;

        if (!handle_ok(h))
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: not a handle");
        st = sim_stream_of(s, h->dev);
        if (st == NULL)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetStream: not a live stream");
        if (st->dev != h->dev)
                return err(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
                           "cudnnSetStream: the stream is on device %d, the handle on %d", st->dev,
                           h->dev);
        h->stream = s;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *s)
{
        if (!handle_ok(h) || s == NULL)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetStream");
        *s = h->stream;
        return CUDNN_STATUS_SUCCESS;
}

size_t sim_dtype_size(cudnnDataType_t t)
{
        switch (t) {
        case CUDNN_DATA_HALF:
        case CUDNN_DATA_BFLOAT16:
                return 2;
        case CUDNN_DATA_FLOAT:
                return 4;
        case CUDNN_DATA_DOUBLE:
                return 8;
        default:
                return 0;
        }
}

/* ---- tensor descriptors ---- */

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d)
{
        if (d == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateTensorDescriptor");
        *d = calloc(1, sizeof(**d));
        if (*d == NULL)
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        (*d)->magic = MAGIC_TENSOR;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d)
{
        if (d == NULL)
                return CUDNN_STATUS_SUCCESS;
        if (d->magic != MAGIC_TENSOR)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnDestroyTensorDescriptor: not one");
        d->magic = 0;
        free(d);
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type, int nb,
                                         const int dim[], const int stride[])
{
        if (d == NULL || d->magic != MAGIC_TENSOR)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensorNdDescriptor: no descriptor");
        if (dim == NULL || stride == NULL)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensorNdDescriptor: dimA or strideA "
                                                   "is NULL");
        if (sim_dtype_size(type) == 0 && type != CUDNN_DATA_INT8 && type != CUDNN_DATA_INT32 &&
            type != CUDNN_DATA_UINT8 && type != CUDNN_DATA_INT64)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetTensorNdDescriptor: dataType %d",
                           (int)type);
        /* What the real cuDNN 9 answers (the conformance transcript, README.md). */
        if (nb < 2)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnSetTensorNdDescriptor: nbDims %d is less than 2", nb);
        if (nb > CUDNN_DIM_MAX)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetTensorNdDescriptor: nbDims %d over CUDNN_DIM_MAX", nb);
        for (int i = 0; i < nb; i++)
                if (dim[i] <= 0 || stride[i] == 0)
                        return err(CUDNN_STATUS_BAD_PARAM,
                                   "cudnnSetTensorNdDescriptor: dimA[%d] = %d, strideA[%d] = %d", i,
                                   dim[i], i, stride[i]);
        d->type = type;
        d->nb = nb;
        memcpy(d->dim, dim, sizeof(int) * (size_t)nb);
        memcpy(d->stride, stride, sizeof(int) * (size_t)nb);
        d->set = true;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t d, int nbDimsRequested,
                                         cudnnDataType_t *type, int *nb, int dim[], int stride[])
{
        if (d == NULL || d->magic != MAGIC_TENSOR)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensorNdDescriptor: no descriptor");
        if (nbDimsRequested < 0 || type == NULL || nb == NULL ||
            (nbDimsRequested > 0 && (dim == NULL || stride == NULL)))
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetTensorNdDescriptor: bad argument");
        *type = d->type;
        *nb = d->nb;
        for (int i = 0; i < nbDimsRequested && i < d->nb; i++) {
                dim[i] = d->dim[i];
                stride[i] = d->stride[i];
        }
        return CUDNN_STATUS_SUCCESS;
}

/* ---- dropout ---- */

cudnnStatus_t cudnnCreateDropoutDescriptor(cudnnDropoutDescriptor_t *d)
{
        if (d == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateDropoutDescriptor");
        *d = calloc(1, sizeof(**d));
        if (*d == NULL)
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        (*d)->magic = MAGIC_DROPOUT;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyDropoutDescriptor(cudnnDropoutDescriptor_t d)
{
        if (d == NULL)
                return CUDNN_STATUS_SUCCESS;
        if (d->magic != MAGIC_DROPOUT)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnDestroyDropoutDescriptor: not one");
        d->magic = 0;
        free(d);
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t h, size_t *size)
{
        if (!handle_ok(h) || size == NULL)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnDropoutGetStatesSize");
        *size = 132 * 2048 * 48; /* a random state per thread of every SM */
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t h, float dropout,
                                        void *states, size_t state_size, unsigned long long seed)
{
        (void)seed;
        if (d == NULL || d->magic != MAGIC_DROPOUT)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetDropoutDescriptor: no descriptor");
        if (!handle_ok(h))
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetDropoutDescriptor: no handle");
        if (!(dropout >= 0.0f && dropout < 1.0f))
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnSetDropoutDescriptor: dropout %g outside [0, 1)", dropout);
        /* States are initialised on the GPU: they must be device memory of the right size. */
        if (states != NULL) {
                if (state_size < 132 * 2048 * 48)
                        return err(CUDNN_STATUS_BAD_PARAM,
                                   "cudnnSetDropoutDescriptor: stateSizeInBytes %zu is less than "
                                   "cudnnDropoutGetStatesSize",
                                   state_size);
                if (!sim_reachable(h->dev, states, state_size))
                        return err(CUDNN_STATUS_BAD_PARAM,
                                   "cudnnSetDropoutDescriptor: states is not device memory");
        } else if (dropout > 0.0f) {
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnSetDropoutDescriptor: dropout %g without states", dropout);
        }
        d->dropout = dropout;
        d->set = true;
        return CUDNN_STATUS_SUCCESS;
}

/* ---- RNN descriptors ---- */

int sim_rnn_gates(cudnnRNNMode_t cell)
{
        return cell == CUDNN_LSTM ? 4 : cell == CUDNN_GRU ? 3 : 1;
}

cudnnStatus_t cudnnCreateRNNDescriptor(cudnnRNNDescriptor_t *d)
{
        if (d == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateRNNDescriptor");
        *d = calloc(1, sizeof(**d));
        if (*d == NULL)
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        (*d)->magic = MAGIC_RNN;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyRNNDescriptor(cudnnRNNDescriptor_t d)
{
        if (d == NULL)
                return CUDNN_STATUS_SUCCESS;
        if (d->magic != MAGIC_RNN)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnDestroyRNNDescriptor: not one");
        d->magic = 0;
        free(d);
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t algo,
                                       cudnnRNNMode_t cell, cudnnRNNBiasMode_t bias,
                                       cudnnDirectionMode_t dir, cudnnRNNInputMode_t input,
                                       cudnnDataType_t type, cudnnDataType_t math_prec,
                                       cudnnMathType_t math, int32_t in, int32_t hid, int32_t proj,
                                       int32_t layers, cudnnDropoutDescriptor_t dropout,
                                       uint32_t aux)
{
        const bool persist = algo != CUDNN_RNN_ALGO_STANDARD;

        if (d == NULL || d->magic != MAGIC_RNN)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: no descriptor");
        if ((unsigned)algo > CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: algo %d", algo);
        if ((unsigned)cell > CUDNN_GRU)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: cellMode %d", cell);
        if ((unsigned)bias > CUDNN_RNN_SINGLE_REC_BIAS)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: biasMode %d", bias);
        if ((unsigned)dir > CUDNN_BIDIRECTIONAL)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: dirMode %d", dir);
        if ((unsigned)input > CUDNN_SKIP_INPUT)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: inputMode %d", input);
        if ((unsigned)math > CUDNN_FMA_MATH)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: mathType %d", math);
        if (in <= 0 || hid <= 0 || layers <= 0)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnSetRNNDescriptor_v8: inputSize %d, hiddenSize %d, numLayers %d "
                           "must be positive",
                           in, hid, layers);
        /* The order of these checks is the real library's (the transcript). */
        if (persist && bias != CUDNN_RNN_DOUBLE_BIAS)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetRNNDescriptor_v8: the persistent algorithms need "
                           "CUDNN_RNN_DOUBLE_BIAS");
        if (proj <= 0)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: projSize %d", proj);
        if (proj > hid || (proj < hid && (cell != CUDNN_LSTM || persist)))
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetRNNDescriptor_v8: projSize %d: a projection is smaller than "
                           "hiddenSize %d and only for CUDNN_LSTM with CUDNN_RNN_ALGO_STANDARD",
                           proj, hid);
        if (aux & ~(uint32_t)CUDNN_RNN_PADDED_IO_ENABLED)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: auxFlags 0x%x", aux);
        if (dropout != NULL && dropout->magic != MAGIC_DROPOUT)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDescriptor_v8: dropoutDesc");
        if (!((type == CUDNN_DATA_FLOAT && math_prec == CUDNN_DATA_FLOAT) ||
              (type == CUDNN_DATA_DOUBLE && math_prec == CUDNN_DATA_DOUBLE) ||
              (type == CUDNN_DATA_HALF &&
               (math_prec == CUDNN_DATA_HALF || math_prec == CUDNN_DATA_FLOAT)) ||
              (type == CUDNN_DATA_BFLOAT16 && math_prec == CUDNN_DATA_FLOAT)))
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetRNNDescriptor_v8: dataType %d with mathPrec %d", type,
                           math_prec);
        if (persist && math_prec == CUDNN_DATA_HALF)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetRNNDescriptor_v8: half math needs CUDNN_RNN_ALGO_STANDARD");
        if ((algo == CUDNN_RNN_ALGO_PERSIST_STATIC ||
             algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H) &&
            type == CUDNN_DATA_DOUBLE)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetRNNDescriptor_v8: no double with the static persistent "
                           "algorithms");
        d->c = (struct rnn_cfg){algo, cell, bias, dir,  input,  type, math_prec,
                                math, in,   hid,  proj, layers, aux};
        d->dropout = dropout;
        d->built_batch = 0;
        d->set = true;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t *algo,
                                       cudnnRNNMode_t *cell, cudnnRNNBiasMode_t *bias,
                                       cudnnDirectionMode_t *dir, cudnnRNNInputMode_t *input,
                                       cudnnDataType_t *type, cudnnDataType_t *math_prec,
                                       cudnnMathType_t *math, int32_t *in, int32_t *hid,
                                       int32_t *proj, int32_t *layers,
                                       cudnnDropoutDescriptor_t *dropout, uint32_t *aux)
{
        if (d == NULL || d->magic != MAGIC_RNN)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetRNNDescriptor_v8: no descriptor");
#define OUT(p, v)                                                                                  \
        if ((p) != NULL)                                                                           \
        *(p) = (v)
        OUT(algo, d->c.algo);
        OUT(cell, d->c.cell);
        OUT(bias, d->c.bias);
        OUT(dir, d->c.dir);
        OUT(input, d->c.input);
        OUT(type, d->c.type);
        OUT(math_prec, d->c.math_prec);
        OUT(math, d->c.math);
        OUT(in, d->c.in);
        OUT(hid, d->c.hid);
        OUT(proj, d->c.proj);
        OUT(layers, d->c.layers);
        OUT(dropout, d->dropout);
        OUT(aux, d->c.aux);
#undef OUT
        return CUDNN_STATUS_SUCCESS;
}

/* ---- RNN data descriptors ---- */

cudnnStatus_t cudnnCreateRNNDataDescriptor(cudnnRNNDataDescriptor_t *d)
{
        if (d == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "cudnnCreateRNNDataDescriptor");
        *d = calloc(1, sizeof(**d));
        if (*d == NULL)
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        (*d)->magic = MAGIC_RNNDATA;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyRNNDataDescriptor(cudnnRNNDataDescriptor_t d)
{
        if (d == NULL)
                return CUDNN_STATUS_SUCCESS;
        if (d->magic != MAGIC_RNNDATA)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnDestroyRNNDataDescriptor: not one");
        d->magic = 0;
        free(d->len);
        free(d);
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t type,
                                        cudnnRNNDataLayout_t layout, int T, int B, int V,
                                        const int len[], void *fill)
{
        int *copy;

        if (d == NULL || d->magic != MAGIC_RNNDATA)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDataDescriptor: no descriptor");
        if (type != CUDNN_DATA_HALF && type != CUDNN_DATA_FLOAT && type != CUDNN_DATA_DOUBLE &&
            type != CUDNN_DATA_BFLOAT16)
                return err(CUDNN_STATUS_NOT_SUPPORTED, "cudnnSetRNNDataDescriptor: dataType %d",
                           type);
        if ((unsigned)layout > CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDataDescriptor: layout %d", layout);
        if (T <= 0 || B <= 0 || V <= 0)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnSetRNNDataDescriptor: maxSeqLength %d, batchSize %d, vectorSize "
                           "%d must be positive",
                           T, B, V);
        if (len == NULL)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnSetRNNDataDescriptor: seqLengthArray is "
                                                   "NULL");
        if (T > 65535)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "cudnnSetRNNDataDescriptor: maxSeqLength %d over 65535", T);
        for (int b = 0; b < B; b++) {
                if (len[b] < 0 || len[b] > T)
                        return err(CUDNN_STATUS_BAD_PARAM,
                                   "cudnnSetRNNDataDescriptor: seqLengthArray[%d] = %d outside "
                                   "[0, maxSeqLength %d]",
                                   b, len[b], T);
                if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED &&
                    (len[b] == 0 || (b > 0 && len[b] > len[b - 1])))
                        return err(CUDNN_STATUS_BAD_PARAM,
                                   "cudnnSetRNNDataDescriptor: the packed layout needs lengths "
                                   "sorted longest first, none 0 (seqLengthArray[%d] = %d)",
                                   b, len[b]);
        }
        if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED && len[0] != T)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnSetRNNDataDescriptor: the packed layout needs maxSeqLength %d "
                           "== the longest length %d",
                           T, len[0]);
        copy = malloc(sizeof(int) * (size_t)B);
        if (copy == NULL)
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        memcpy(copy, len, sizeof(int) * (size_t)B);
        free(d->len);
        d->len = copy;
        d->type = type;
        d->layout = layout;
        d->T = T;
        d->B = B;
        d->V = V;
        d->has_fill = fill != NULL;
        if (fill != NULL)
                memcpy(d->fill_raw, fill, sim_dtype_size(type));
        if (fill != NULL) {
                if (type == CUDNN_DATA_DOUBLE)
                        d->fill = *(const double *)fill;
                else if (type == CUDNN_DATA_FLOAT)
                        d->fill = *(const float *)fill;
                else if (type == CUDNN_DATA_HALF)
                        d->fill = sim_h2f(*(const uint16_t *)fill);
                else {
                        uint32_t bits = (uint32_t) * (const uint16_t *)fill << 16;
                        float f;

                        memcpy(&f, &bits, 4);
                        d->fill = f;
                }
        }
        d->set = true;
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t *type,
                                        cudnnRNNDataLayout_t *layout, int *T, int *B, int *V,
                                        int arrayLengthRequested, int len[], void *fill)
{
        if (d == NULL || d->magic != MAGIC_RNNDATA || !d->set)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetRNNDataDescriptor: no descriptor");
        if (type == NULL || layout == NULL || T == NULL || B == NULL || V == NULL ||
            arrayLengthRequested < 0 || (arrayLengthRequested > 0 && len == NULL))
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetRNNDataDescriptor: bad argument");
        *type = d->type;
        *layout = d->layout;
        *T = d->T;
        *B = d->B;
        *V = d->V;
        for (int b = 0; b < arrayLengthRequested && b < d->B; b++)
                len[b] = d->len[b];
        if (fill != NULL && d->has_fill)
                memcpy(fill, d->fill_raw, sim_dtype_size(d->type));
        return CUDNN_STATUS_SUCCESS;
}

/* ---- the weight space ---- */

static uint64_t seed;

static void pick_seed(void)
{
        const char *env = getenv("RNND_CUDASIM_SEED");

        if (env != NULL)
                seed = strtoull(env, NULL, 0);
        else
                seed = (uint64_t)sim_now_ns() ^ ((uint64_t)getpid() << 32);
        fprintf(stderr, "cudasim: weight layouts from RNND_CUDASIM_SEED=%llu\n",
                (unsigned long long)seed);
}

static uint64_t layout_seed(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;

        pthread_once(&once, pick_seed);
        return seed;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
        h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h ^= h >> 31;
        h *= 0xbf58476d1ce4e5b9ull;
        return h ^ (h >> 29);
}

static uint64_t rnd(uint64_t *s)
{
        *s = mix(*s, 0x2545f4914f6cdd1dull);
        return *s;
}

/* Matrices per pseudo-layer: W and R per gate, plus LSTM's projection. */
static int n_lin(const struct rnn_cfg *c)
{
        int g = sim_rnn_gates(c->cell);

        return c->cell == CUDNN_LSTM ? 2 * g + 1 : 2 * g;
}

/*
 * The layout for (device, settings, algorithm) with the process's seed: the
 * blocks in a shuffled order with gaps between them, so nothing but
 * cudnnGetRNNWeightParams can find a weight.  Not per handle: handles on one
 * device share one weight space (README.md).  Returns false without memory.
 */
static bool wlayout(int dev, const struct rnn_cfg *c, struct wlayout *w)
{
        const int dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1, g = sim_rnn_gates(c->cell);
        const size_t es = sim_dtype_size(c->type);
        uint64_t s = layout_seed();
        size_t n, *order, off = 0;

        s = mix(s, (uint64_t)dev);
        s = mix(s, (uint64_t)c->algo);
        s = mix(s, (uint64_t)c->cell);
        s = mix(s, (uint64_t)c->bias);
        s = mix(s, (uint64_t)c->dir);
        s = mix(s, (uint64_t)c->input);
        s = mix(s, (uint64_t)c->type);
        s = mix(s, (uint64_t)c->math_prec);
        s = mix(s, (uint64_t)c->math);
        s = mix(s, (uint64_t)c->in);
        s = mix(s, (uint64_t)c->hid);
        s = mix(s, (uint64_t)c->proj);
        s = mix(s, (uint64_t)c->layers);
        w->n_pl = c->layers * dirs;
        w->n_lin = n_lin(c);
        n = (size_t)w->n_pl * (size_t)w->n_lin;
        w->mat = calloc(n, sizeof(*w->mat));
        w->bias = calloc(n, sizeof(*w->bias));
        order = malloc(sizeof(*order) * 2 * n);
        if (w->mat == NULL || w->bias == NULL || order == NULL) {
                free(w->mat);
                free(w->bias);
                free(order);
                return false;
        }
        for (int pl = 0; pl < w->n_pl; pl++) {
                const int layer = pl / dirs;

                for (int lin = 0; lin < w->n_lin; lin++) {
                        struct wblock *m = &w->mat[pl * w->n_lin + lin];
                        struct wblock *b = &w->bias[pl * w->n_lin + lin];
                        const bool rec = lin >= g && lin < 2 * g, proj = lin == 2 * g;

                        if (proj) {
                                if (c->proj < c->hid)
                                        *m = (struct wblock){0, c->proj, c->hid};
                                continue; /* the projection has no bias */
                        }
                        if (!rec && layer == 0 && c->input == CUDNN_SKIP_INPUT)
                                ; /* no input matrix: the input goes straight in */
                        else
                                *m = (struct wblock){0, c->hid,
                                                     rec          ? c->proj
                                                     : layer == 0 ? c->in
                                                                  : dirs * c->proj};
                        if (c->bias == CUDNN_RNN_DOUBLE_BIAS ||
                            (c->bias == CUDNN_RNN_SINGLE_INP_BIAS && !rec) ||
                            (c->bias == CUDNN_RNN_SINGLE_REC_BIAS && rec))
                                *b = (struct wblock){0, c->hid, 1};
                }
        }
        for (size_t i = 0; i < 2 * n; i++)
                order[i] = i;
        for (size_t i = 2 * n; i > 1; i--) {
                size_t j = rnd(&s) % i, t = order[i - 1];

                order[i - 1] = order[j];
                order[j] = t;
        }
        for (size_t i = 0; i < 2 * n; i++) {
                struct wblock *blk = order[i] < n ? &w->mat[order[i]] : &w->bias[order[i] - n];

                if (blk->rows == 0)
                        continue;
                off += (rnd(&s) % 4) * 16 * es; /* a gap, still aligned for every type */
                blk->off = off;
                off += (size_t)blk->rows * (size_t)blk->cols * es;
        }
        w->size = off + (rnd(&s) % 4) * 16 * es;
        free(order);
        return true;
}

static void wlayout_free(struct wlayout *w)
{
        free(w->mat);
        free(w->bias);
}

static cudnnStatus_t rnn_ok(cudnnHandle_t h, cudnnRNNDescriptor_t d, const char *fn)
{
        if (!handle_ok(h))
                return err(CUDNN_STATUS_BAD_PARAM, "%s: not a handle", fn);
        if (d == NULL || d->magic != MAGIC_RNN)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: not an RNN descriptor", fn);
        if (!d->set)
                return err(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "%s: RNN descriptor not set", fn);
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t h, cudnnRNNDescriptor_t d, size_t *size)
{
        struct wlayout w;
        cudnnStatus_t st = rnn_ok(h, d, "cudnnGetRNNWeightSpaceSize");

        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        if (size == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                           "cudnnGetRNNWeightSpaceSize: weightSpaceSize is NULL");
        if (!wlayout(h->dev, &d->c, &w))
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        *size = w.size;
        wlayout_free(&w);
        return CUDNN_STATUS_SUCCESS;
}

/* Describes a block as cuDNN does: [1, rows, cols] packed, or 0 dimensions when absent. */
static void describe(cudnnTensorDescriptor_t t, const struct wblock *b, cudnnDataType_t type)
{
        t->type = type;
        if (b->rows == 0) {
                t->nb = 0;
        } else {
                t->nb = 3;
                t->dim[0] = 1;
                t->dim[1] = b->rows;
                t->dim[2] = b->cols;
                t->stride[0] = b->rows * b->cols;
                t->stride[1] = b->cols;
                t->stride[2] = 1;
        }
        t->set = true;
}

cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t h, cudnnRNNDescriptor_t d, int32_t pl,
                                      size_t wsize, const void *wspace, int32_t lin,
                                      cudnnTensorDescriptor_t mDesc, void **mAddr,
                                      cudnnTensorDescriptor_t bDesc, void **bAddr)
{
        struct wlayout w;
        const struct wblock *m, *b;
        cudnnStatus_t st = rnn_ok(h, d, "cudnnGetRNNWeightParams");

        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        if ((mDesc != NULL && mDesc->magic != MAGIC_TENSOR) ||
            (bDesc != NULL && bDesc->magic != MAGIC_TENSOR))
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnGetRNNWeightParams: mDesc or bDesc is "
                                                   "not a tensor descriptor");
        if (!wlayout(h->dev, &d->c, &w))
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        if (pl < 0 || pl >= w.n_pl || lin < 0 || lin >= w.n_lin) {
                st = err(CUDNN_STATUS_BAD_PARAM,
                         "cudnnGetRNNWeightParams: pseudoLayer %d outside [0, %d) or linLayerID "
                         "%d outside [0, %d)",
                         pl, w.n_pl, lin, w.n_lin);
                goto out;
        }
        if (wsize < w.size) {
                st = err(CUDNN_STATUS_BAD_PARAM,
                         "cudnnGetRNNWeightParams: weightSpaceSize %zu is less than "
                         "cudnnGetRNNWeightSpaceSize's %zu",
                         wsize, w.size);
                goto out;
        }
        if ((uintptr_t)wspace % sim_dtype_size(d->c.type) != 0) {
                st = err(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                         "cudnnGetRNNWeightParams: weightSpace %p is not aligned", wspace);
                goto out;
        }
        m = &w.mat[pl * w.n_lin + lin];
        b = &w.bias[pl * w.n_lin + lin];
        if (mDesc != NULL)
                describe(mDesc, m, d->c.type);
        if (mAddr != NULL)
                *mAddr = m->rows == 0 ? NULL : (char *)(uintptr_t)wspace + m->off;
        if (bDesc != NULL)
                describe(bDesc, b, d->c.type);
        if (bAddr != NULL)
                *bAddr = b->rows == 0 ? NULL : (char *)(uintptr_t)wspace + b->off;
out:
        wlayout_free(&w);
        return st;
}

/* ---- temp space and the persistent algorithms' limits ---- */

static cudnnStatus_t data_ok(cudnnRNNDataDescriptor_t x, const char *fn, const char *what)
{
        if (x == NULL || x->magic != MAGIC_RNNDATA)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: %s is not an RNN data descriptor", fn,
                           what);
        if (!x->set)
                return err(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED, "%s: %s is not set", fn, what);
        return CUDNN_STATUS_SUCCESS;
}

/* What the settings and the input's shape must satisfy, in every call that sees both. */
static cudnnStatus_t shape_ok(const struct rnn_cfg *c, cudnnRNNDataDescriptor_t x, const char *fn)
{
        bool equal = true;
        int limit;

        if (x->type != c->type)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: xDesc's dataType %d is not the RNN's %d",
                           fn, x->type, c->type);
        if (c->input == CUDNN_SKIP_INPUT && c->in != c->hid)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: CUDNN_SKIP_INPUT needs inputSize %d == hiddenSize %d", fn, c->in,
                           c->hid);
        if (x->V != c->in)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: xDesc's vectorSize %d is not inputSize %d",
                           fn, x->V, c->in);
        if ((x->layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED) !=
            ((c->aux & CUDNN_RNN_PADDED_IO_ENABLED) != 0))
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: the unpacked layouts need CUDNN_RNN_PADDED_IO_ENABLED in auxFlags, "
                           "the packed one needs it clear",
                           fn);
        for (int b = 0; b < x->B; b++)
                equal = equal && x->len[b] == x->T;
        if (c->algo == CUDNN_RNN_ALGO_STANDARD)
                return CUDNN_STATUS_SUCCESS;
        if (!equal)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "%s: the persistent algorithms need every sequence of maxSeqLength", fn);
        /* The stand-in's persistent limits (README.md): hidden sizes a GPU's registers hold. */
        if (c->algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H)
                limit = c->cell == CUDNN_LSTM || c->cell == CUDNN_GRU ? 192 : 384;
        else if (c->algo == CUDNN_RNN_ALGO_PERSIST_STATIC)
                limit = c->cell == CUDNN_LSTM || c->cell == CUDNN_GRU ? 512 : 1024;
        else
                limit = c->cell == CUDNN_LSTM || c->cell == CUDNN_GRU ? 1536 : 2560;
        if (c->hid > limit)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "%s: hiddenSize %d over this algorithm's limit %d", fn, c->hid, limit);
        if (c->algo == CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H && x->B > 256)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "%s: batchSize %d over CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H's 256", fn,
                           x->B);
        return CUDNN_STATUS_SUCCESS;
}

/*
 * The workspace: two layer-output buffers and the gates of every step of a
 * layer in fp32, plus an amount that depends on the shape and algorithm
 * (cuDNN's sizes are not monotonic), all of which the pass really uses.
 */
static size_t work_size(const struct rnn_cfg *c, int T, int B)
{
        const size_t dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
        const size_t rows = (size_t)T * (size_t)B;
        size_t n = 2 * rows * dirs * (size_t)c->proj +
                   rows * (size_t)sim_rnn_gates(c->cell) * (size_t)c->hid +
                   (size_t)B * dirs * (size_t)(c->hid + c->proj) * 2;

        n = n * 4 + ((size_t)(T * 7 + B * 13 + c->algo * 5) % 23) * 256;
        return (n + 255) & ~(size_t)255;
}

cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t h, cudnnRNNDescriptor_t d,
                                        cudnnForwardMode_t mode, cudnnRNNDataDescriptor_t x,
                                        size_t *work, size_t *reserve)
{
        const char *fn = "cudnnGetRNNTempSpaceSizes";
        cudnnStatus_t st = rnn_ok(h, d, fn);

        if (st == CUDNN_STATUS_SUCCESS)
                st = data_ok(x, fn, "xDesc");
        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        if (mode != CUDNN_FWD_MODE_INFERENCE && mode != CUDNN_FWD_MODE_TRAINING)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: fwdMode %d", fn, mode);
        if (work == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "%s: workSpaceSize is NULL", fn);
        if (mode == CUDNN_FWD_MODE_TRAINING && reserve == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                           "%s: reserveSpaceSize is NULL in training mode", fn);
        st = shape_ok(&d->c, x, fn);
        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        *work = work_size(&d->c, x->T, x->B);
        if (reserve != NULL) {
                const size_t dirs = d->c.dir == CUDNN_BIDIRECTIONAL ? 2 : 1;

                *reserve = mode == CUDNN_FWD_MODE_INFERENCE
                                   ? 0
                                   : (size_t)x->T * (size_t)x->B * dirs * (size_t)d->c.layers *
                                             (size_t)(sim_rnn_gates(d->c.cell) + 2) *
                                             (size_t)d->c.hid * 4;
        }
        return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBuildRNNDynamic(cudnnHandle_t h, cudnnRNNDescriptor_t d, int batch)
{
        cudnnStatus_t st = rnn_ok(h, d, "cudnnBuildRNNDynamic");

        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        if (d->c.algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "cudnnBuildRNNDynamic: the RNN's algorithm is not "
                           "CUDNN_RNN_ALGO_PERSIST_DYNAMIC");
        if (batch <= 0)
                return err(CUDNN_STATUS_BAD_PARAM, "cudnnBuildRNNDynamic: miniBatch %d", batch);
        d->built_batch = batch;
        d->built_dev = h->dev;
        return CUDNN_STATUS_SUCCESS;
}

/* ---- the forward pass ---- */

static cudnnStatus_t state_ok(cudnnTensorDescriptor_t t, const char *fn, const char *what,
                              cudnnDataType_t type, int ld, int B, int size)
{
        if (t == NULL || t->magic != MAGIC_TENSOR || !t->set)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: %s is not a set tensor descriptor", fn,
                           what);
        if (t->type != type || t->nb != 3 || t->dim[0] != ld || t->dim[1] != B ||
            t->dim[2] != size || t->stride[2] != 1 || t->stride[1] != size ||
            t->stride[0] != B * size)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: %s must be a packed 3-D [numLayers*dirs %d, batch %d, %d] "
                           "tensor of the RNN's type",
                           fn, what, ld, B, size);
        return CUDNN_STATUS_SUCCESS;
}

/* Bytes the data in layout/lengths occupies. */
static size_t data_bytes(cudnnRNNDataDescriptor_t x, int V, size_t es)
{
        size_t rows = 0;

        if (x->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                for (int b = 0; b < x->B; b++)
                        rows += (size_t)x->len[b];
        else
                rows = (size_t)x->T * (size_t)x->B;
        return rows * (size_t)V * es;
}

/* The descriptors of a forward pass: x and y agree, the states fit. */
static cudnnStatus_t fwd_descs_ok(cudnnRNNDescriptor_t d, cudnnForwardMode_t mode,
                                  cudnnRNNDataDescriptor_t xDesc, cudnnRNNDataDescriptor_t yDesc,
                                  cudnnTensorDescriptor_t hDesc, bool h_used,
                                  cudnnTensorDescriptor_t cDesc, bool c_used)
{
        const char *fn = "cudnnRNNForward";
        const struct rnn_cfg *c = &d->c;
        int dirs = c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1;
        cudnnStatus_t st;

        if (mode != CUDNN_FWD_MODE_INFERENCE && mode != CUDNN_FWD_MODE_TRAINING)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: fwdMode %d", fn, mode);
        st = shape_ok(c, xDesc, fn);
        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        if (yDesc->type != xDesc->type || yDesc->layout != xDesc->layout || yDesc->T != xDesc->T ||
            yDesc->B != xDesc->B ||
            memcmp(yDesc->len, xDesc->len, sizeof(int) * (size_t)xDesc->B) != 0)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: xDesc and yDesc differ in type, layout, maxSeqLength, batchSize "
                           "or lengths",
                           fn);
        if (yDesc->V != dirs * c->proj)
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: yDesc's vectorSize %d is not dirs * projSize = %d", fn, yDesc->V,
                           dirs * c->proj);
        for (int b = 0; b < xDesc->B; b++)
                if (xDesc->len[b] == 0)
                        return err(CUDNN_STATUS_NOT_SUPPORTED,
                                   "%s: sequence %d has length 0 (cuDNN versions differ on "
                                   "zero-length sequences; the stand-in refuses them)",
                                   fn, b);
        if (c->type == CUDNN_DATA_DOUBLE || c->type == CUDNN_DATA_BFLOAT16)
                return err(CUDNN_STATUS_NOT_SUPPORTED,
                           "%s: the stand-in runs fp32 and fp16 data only", fn);
        if (h_used) {
                st = state_ok(hDesc, fn, "hDesc", c->type, c->layers * dirs, xDesc->B, c->proj);
                if (st != CUDNN_STATUS_SUCCESS)
                        return st;
        }
        if (c->cell == CUDNN_LSTM && c_used)
                return state_ok(cDesc, fn, "cDesc", c->type, c->layers * dirs, xDesc->B, c->hid);
        return CUDNN_STATUS_SUCCESS;
}

/* The plan, the spaces and the pointers of a forward pass. */
static cudnnStatus_t fwd_spaces_ok(cudnnHandle_t h, cudnnRNNDescriptor_t d, cudnnForwardMode_t mode,
                                   cudnnRNNDataDescriptor_t xDesc, const void *x, const void *y,
                                   const void *wspace, size_t work_sz, const void *work,
                                   size_t reserve_sz, const void *reserve)
{
        const char *fn = "cudnnRNNForward";
        const struct rnn_cfg *c = &d->c;
        size_t es = sim_dtype_size(c->type);

        if (c->algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC &&
            (d->built_batch != xDesc->B || d->built_dev != h->dev))
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: CUDNN_RNN_ALGO_PERSIST_DYNAMIC needs cudnnBuildRNNDynamic for "
                           "miniBatch %d on this device first",
                           fn, xDesc->B);
        if (work_sz < work_size(c, xDesc->T, xDesc->B))
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: workSpaceSize %zu is less than cudnnGetRNNTempSpaceSizes' %zu", fn,
                           work_sz, work_size(c, xDesc->T, xDesc->B));
        if (mode == CUDNN_FWD_MODE_TRAINING) {
                size_t need = 0;

                cudnnGetRNNTempSpaceSizes(h, d, mode, xDesc, &(size_t){0}, &need);
                if (reserve_sz < need || reserve == NULL)
                        return err(CUDNN_STATUS_BAD_PARAM,
                                   "%s: reserveSpaceSize %zu is less than %zu in training mode", fn,
                                   reserve_sz, need);
        }
        if (x == NULL || y == NULL || wspace == NULL || work == NULL)
                return err(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                           "%s: x, y, weightSpace and workSpace must not be NULL", fn);
        if ((uintptr_t)wspace % es != 0 || (uintptr_t)x % es != 0 || (uintptr_t)y % es != 0)
                return err(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                           "%s: weightSpace, x or y is not aligned to the element size", fn);
        if (sim_sticky() != cudaSuccess)
                return err(CUDNN_STATUS_EXECUTION_FAILED_CUDART, "%s: %s", fn,
                           cudaGetErrorString(sim_sticky()));
        return CUDNN_STATUS_SUCCESS;
}

/*
 * Every buffer must be memory this device reaches, whole: anything else is an
 * illegal address when the pass runs (a sticky fault).
 */
static bool fwd_reachable(int dev, const struct rnn_fwd *f, cudnnRNNDataDescriptor_t xDesc,
                          cudnnRNNDataDescriptor_t yDesc)
{
        const struct rnn_cfg *c = &f->c;
        size_t es = sim_dtype_size(c->type);
        size_t ld = (size_t)c->layers * (size_t)(c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1);
        size_t B = (size_t)f->B, hb = ld * B * (size_t)c->proj * es,
               cb = ld * B * (size_t)c->hid * es;

        return sim_reachable(dev, f->x, data_bytes(xDesc, c->in, es)) &&
               sim_reachable(dev, f->y, data_bytes(yDesc, f->out_v, es)) &&
               sim_reachable(dev, f->wspace, f->w.size) &&
               sim_reachable(dev, f->work, f->work_size) &&
               (f->hx == NULL || sim_reachable(dev, f->hx, hb)) &&
               (f->hy == NULL || sim_reachable(dev, f->hy, hb)) &&
               (f->cx == NULL || sim_reachable(dev, f->cx, cb)) &&
               (f->cy == NULL || sim_reachable(dev, f->cy, cb)) &&
               (f->dev_len == NULL || sim_reachable(dev, f->dev_len, B * sizeof(int32_t)));
}

cudnnStatus_t cudnnRNNForward(cudnnHandle_t h, cudnnRNNDescriptor_t d, cudnnForwardMode_t mode,
                              const int32_t devSeqLengths[], cudnnRNNDataDescriptor_t xDesc,
                              const void *x, cudnnRNNDataDescriptor_t yDesc, void *y,
                              cudnnTensorDescriptor_t hDesc, const void *hx, void *hy,
                              cudnnTensorDescriptor_t cDesc, const void *cx, void *cy, size_t wsize,
                              const void *wspace, size_t work_sz, void *work, size_t reserve_sz,
                              void *reserve)
{
        const char *fn = "cudnnRNNForward";
        struct rnn_fwd *f;
        struct sim_op *op;
        struct sim_stream *s;
        cudnnStatus_t st = rnn_ok(h, d, fn);
        const struct rnn_cfg *c = &d->c;
        int fate;

        if (st == CUDNN_STATUS_SUCCESS)
                st = data_ok(xDesc, fn, "xDesc");
        if (st == CUDNN_STATUS_SUCCESS)
                st = data_ok(yDesc, fn, "yDesc");
        if (st == CUDNN_STATUS_SUCCESS)
                st = fwd_descs_ok(d, mode, xDesc, yDesc, hDesc,
                                  hx != NULL || hy != NULL || hDesc != NULL, cDesc,
                                  cx != NULL || cy != NULL || cDesc != NULL);
        if (st == CUDNN_STATUS_SUCCESS)
                st = fwd_spaces_ok(h, d, mode, xDesc, x, y, wspace, work_sz, work, reserve_sz,
                                   reserve);
        if (st != CUDNN_STATUS_SUCCESS)
                return st;
        s = sim_stream_of(h->stream, h->dev);
        if (s == NULL)
                return err(CUDNN_STATUS_BAD_PARAM, "%s: the handle's stream is gone", fn);
        f = calloc(1, sizeof(*f));
        op = calloc(1, sizeof(*op));
        if (f == NULL || op == NULL || !wlayout(h->dev, c, &f->w)) {
                free(f);
                free(op);
                return err(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, "out of memory");
        }
        if (wsize < f->w.size) {
                size_t need = f->w.size;

                wlayout_free(&f->w);
                free(f);
                free(op);
                return err(CUDNN_STATUS_BAD_PARAM,
                           "%s: weightSpaceSize %zu is less than cudnnGetRNNWeightSpaceSize's %zu",
                           fn, wsize, need);
        }
        f->c = *c;
        f->layout = xDesc->layout;
        f->T = xDesc->T;
        f->B = xDesc->B;
        f->in_v = c->in;
        f->out_v = (c->dir == CUDNN_BIDIRECTIONAL ? 2 : 1) * c->proj;
        f->len = malloc(sizeof(int) * (size_t)xDesc->B);
        if (f->len != NULL)
                memcpy(f->len, xDesc->len, sizeof(int) * (size_t)xDesc->B);
        f->dev_len = devSeqLengths;
        f->has_fill = yDesc->has_fill;
        f->fill = (float)yDesc->fill;
        f->x = x;
        f->y = y;
        f->hx = hx;
        f->hy = hy;
        f->cx = c->cell == CUDNN_LSTM ? cx : NULL;
        f->cy = c->cell == CUDNN_LSTM ? cy : NULL;
        f->wspace = wspace;
        f->work = work;
        f->work_size = work_size(c, xDesc->T, xDesc->B);
        if (!fwd_reachable(h->dev, f, xDesc, yDesc)) {
                op->fault = true;
                op->fault_why = "a buffer is not memory of this device (or runs past its "
                                "allocation)";
        }
        fate = sim_launch_fate();
        if (fate == 1 || f->len == NULL) {
                op->arg = f;
                sim_rnn_forward_free(op);
                free(op);
                return err(CUDNN_STATUS_EXECUTION_FAILED_CUDART,
                           "%s: the kernel launch failed (injected: RNND_CUDASIM_LAUNCH_FAIL)", fn);
        }
        if (fate == 2)
                op->fault = true;
        if (getenv("RNND_CUDASIM_TRACE") != NULL)
                fprintf(stderr,
                        "cudasim: cudnnRNNForward algo %d layout %d maxSeqLength %d batch %d\n",
                        c->algo, xDesc->layout, xDesc->T, xDesc->B);
        op->fn = sim_rnn_forward_run;
        op->free = sim_rnn_forward_free;
        op->arg = f;
        op->what = "cudnnRNNForward";
        sim_enqueue(s, op);
        return CUDNN_STATUS_SUCCESS;
}
