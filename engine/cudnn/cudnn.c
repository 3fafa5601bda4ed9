/*
 * cudnn.c: the cuDNN backend, an rnnd_backend_ops computing DESIGN.md §4 on
 * one GPU, and what the build and the machine have (rnnd_cudnn_info).
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

/* Timed forward calls per algorithm at open, after one untimed call. */
#define PROBE_RUNS 5
/* Longest sequences of the probe batch. */
#define PROBE_STEPS 64u
/*
 * Floats of the pinned windows that a batch's inputs and outputs go through
 * (4 MiB each): the pinned staging is these plus the indexes and states of
 * the largest batch, not max_batch_steps x input_size and x outputs.
 */
#define STAGING_WINDOW ((size_t)1 << 20)
/* A persistent algorithm is kept when at least this much faster than STANDARD. */
#define PROBE_GAIN 0.9

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
};

/* Where this run's outputs lie in the output region, in floats. */
struct out_layout {
        size_t y, hn, cn, sc, end;
        bool want_y, want_h, want_c, want_s;
};

static const double zero_fill; /* paddingFill: zero bits read as 0 in fp32 and fp16 */

/* Errors. */

/*
 * CUDA errors after which the context is unusable: every later call fails
 * the same way until the process ends.
 */
static bool sticky(cudaError_t e)
{
        switch (e) {
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorLaunchTimeout:
        case cudaErrorECCUncorrectable:
        case cudaErrorAssert:
        case cudaErrorNvlinkUncorrectable:
        case cudaErrorContextIsDestroyed:
        case cudaErrorDevicesUnavailable:
        case cudaErrorNoDevice:
        case cudaErrorCudartUnloading:
        case cudaErrorUnknown:
                return true;
        default:
                return false;
        }
}

/* The called function's name: the text of the call up to its '('. */
static void call_name(const char *call, char *buf, size_t cap)
{
        size_t n = strcspn(call, "(");

        snprintf(buf, cap, "%.*s", (int)n, call);
}

/*
 * A device fault is process-wide: a sticky error leaves the process's CUDA
 * context unusable (cuda_runtime_api.h: the process must be restarted), so
 * the first plan that sees one marks every plan of the process, on every
 * GPU, out of service.  fault_msg is written once, before fault is set.
 */
static atomic_bool fault;
static atomic_flag fault_claimed = ATOMIC_FLAG_INIT;
static char fault_msg[256];

static void process_fault(int device, const char *fn, const char *what)
{
        if (atomic_flag_test_and_set(&fault_claimed))
                return;
        snprintf(fault_msg, sizeof(fault_msg), "GPU %d: %s: %.100s", device, fn, what);
        atomic_store(&fault, true);
}

static int fail(struct plan *p, bool dead, const char *call, const char *what, rnnd_error_t *reterr)
{
        char fn[64];

        call_name(call, fn, sizeof(fn));
        if (dead && p != NULL && !p->lost) {
                p->lost = true;
                snprintf(p->lost_msg, sizeof(p->lost_msg), "%s: %.90s", fn, what);
        }
        if (dead)
                process_fault(p != NULL ? p->device : -1, fn, what);
        return rnnd_error_set(reterr, dead ? RNND_EDEVLOST : RNND_EGPU, "GPU %d: %s: %s",
                              p != NULL ? p->device : -1, fn, what);
}

static int check_cuda(struct plan *p, cudaError_t e, const char *call, rnnd_error_t *reterr)
{
        if (e == cudaSuccess)
                return 0;
        (void)cudaGetLastError(); /* clears a non-sticky error */
        return fail(p, sticky(e), call, cudaGetErrorString(e), reterr);
}

/*
 * Whether a failed cuDNN or cuBLAS call left the device faulted.  Those
 * libraries carry their own CUDA runtime, so their errors never reach this
 * runtime's cudaPeekAtLastError(); a fault on the device does show in the
 * plan's stream, which they run on.
 */
static bool lib_fault(const struct plan *p)
{
        return p != NULL && p->stream != NULL && sticky(cudaStreamQuery(p->stream));
}

static int check_cudnn(struct plan *p, cudnnStatus_t s, const char *call, rnnd_error_t *reterr)
{
        char detail[128] = "", what[200];

        if (s == CUDNN_STATUS_SUCCESS)
                return 0;
        cudnnGetLastErrorString(detail, sizeof(detail));
        snprintf(what, sizeof(what), "%s%s%s%s", cudnnGetErrorString(s),
                 detail[0] != '\0' ? " (" : "", detail, detail[0] != '\0' ? ")" : "");
        return fail(p, lib_fault(p), call, what, reterr);
}

static int check_cublas(struct plan *p, cublasStatus_t s, const char *call, rnnd_error_t *reterr)
{
        if (s == CUBLAS_STATUS_SUCCESS)
                return 0;
        return fail(p, lib_fault(p), call, cublasGetStatusString(s), reterr);
}

/*
 * The one check for every CUDA, cuDNN and cuBLAS call: a failing status
 * becomes RNND_EGPU (RNND_EDEVLOST when the device is gone) with the
 * library's message, in r, and jumps to out.  Needs p, r and reterr in scope.
 */
#define GPU_CK(call)                                                                               \
        do {                                                                                       \
                r = _Generic((call), cudaError_t                                                   \
                             : check_cuda, cudnnStatus_t                                           \
                             : check_cudnn, cublasStatus_t                                         \
                             : check_cublas)(p, (call), #call, reterr);                            \
                if (r < 0)                                                                         \
                        goto out;                                                                  \
        } while (0)

/* Info. */

void rnnd_cudnn_info(struct rnnd_cudnn_info *ret)
{
        cudaError_t e;
        int n = 0;

        memset(ret, 0, sizeof(*ret));
        ret->cudnn_version = (int)cudnnGetVersion();
        cudaRuntimeGetVersion(&ret->cudart_version);
        if (cudaDriverGetVersion(&ret->driver_version) != cudaSuccess)
                ret->driver_version = 0;
        e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n <= 0) {
                /*
                 * Without a driver the runtime says "CUDA driver version is
                 * insufficient", which sends an operator of a CPU-only host
                 * after an upgrade: say what is missing instead.
                 */
                const int dv = ret->driver_version, rv = ret->cudart_version;

                if (e != cudaSuccess && dv == 0)
                        snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu),
                                 "no NVIDIA driver is installed (%s)", cudaGetErrorName(e));
                else if (e == cudaErrorInsufficientDriver)
                        snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu),
                                 "the NVIDIA driver supports CUDA %d.%d, older than this build's "
                                 "runtime, %d.%d",
                                 dv / 1000, dv % 1000 / 10, rv / 1000, rv % 1000 / 10);
                else
                        snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu), "%s",
                                 e != cudaSuccess ? cudaGetErrorString(e)
                                                  : "no CUDA device is visible");
                (void)cudaGetLastError();
                n = 0;
        }
        ret->device_count = n;
        for (int d = 0; d < n && d < RNND_CUDNN_MAX_DEVICES; d++) {
                struct cudaDeviceProp prop;

                if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
                        continue;
                snprintf(ret->devices[d].name, sizeof(ret->devices[d].name), "%.95s", prop.name);
                ret->devices[d].total_mem = prop.totalGlobalMem;
                ret->devices[d].cc_major = prop.major;
                ret->devices[d].cc_minor = prop.minor;
        }
}

int rnnd_cudnn_device_memory(int device, size_t *free_b, size_t *total_b, rnnd_error_t *reterr)
{
        struct plan tmp = {.device = device}, *p = &tmp;
        int r = 0;

        GPU_CK(cudaSetDevice(device));
        GPU_CK(cudaMemGetInfo(free_b, total_b));
out:
        return r;
}

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

static cudnnRNNMode_t cell_mode(rnnd_cell_t c)
{
        switch (c) {
        case RNND_CELL_LSTM:
                return CUDNN_LSTM;
        case RNND_CELL_GRU:
                return CUDNN_GRU;
        case RNND_CELL_RNN_RELU:
                return CUDNN_RNN_RELU;
        default:
                return CUDNN_RNN_TANH;
        }
}

/*
 * Its dimensions other than 1, in order, are those of [rows, cols]
 * (cudnn-int.h), so a matrix of the right size but transposed is caught,
 * not only a wrong element count.
 */
bool rnnd__cudnn_tensor_is(cudnnTensorDescriptor_t d, size_t rows, size_t cols, char *got,
                           size_t cap)
{
        cudnnDataType_t dt;
        int nd = 0, dims[8], strides[8];
        const size_t want[2] = {rows, cols};
        size_t at = 0, w = 0;
        bool ok = true;

        if (cap > 0)
                got[0] = '\0';
        if (cudnnGetTensorNdDescriptor(d, 8, &dt, &nd, dims, strides) != CUDNN_STATUS_SUCCESS ||
            nd <= 0 || nd > 8) {
                snprintf(got, cap, "no shape");
                return false;
        }
        for (int i = 0; i < nd; i++) {
                at += (size_t)snprintf(got + at, at < cap ? cap - at : 0, "%s%d",
                                       i == 0 ? "[" : ", ", dims[i]);
                if (dims[i] == 1)
                        continue;
                while (w < 2 && want[w] == 1)
                        w++;
                ok = ok && w < 2 && (size_t)dims[i] == want[w];
                w++;
        }
        snprintf(got + (at < cap ? at : cap - 1), at < cap ? cap - at : 1, "]");
        while (w < 2 && want[w] == 1)
                w++;
        return ok && w == 2; /* every dimension of [rows, cols] other than 1 was met */
}

/*
 * Copies count floats of the canonical weights at src (inside m->wbuf) to
 * dst in the weight space, converting to the plan's data type on the device
 * (from the fp32 copy d_w).
 */
static int put_weights(struct plan *p, const float *src, size_t count, void *dst,
                       rnnd_error_t *reterr)
{
        const float *dsrc = p->d_w + (src - p->m->wbuf);
        int r = 0;

        GPU_CK(rnnd__cuda_gather(dsrc, RNND__F32, NULL, 1, (uint32_t)count, dst, p->dt, p->stream));
out:
        return r;
}

/*
 * Lays the model's weights into rn's weight space.  Matrix (linLayerID) k of
 * layer-direction ld (pseudoLayer) is, for G gates: k < G, W_ih's gate k;
 * k < 2G, W_hh's gate k - G; k = 8 (LSTM), the projection W_hr.  Biases
 * follow the same ids (DOUBLE_BIAS: b_ih, b_hh).
 */
static int fill_weights(struct plan *p, struct rnn *rn, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const size_t H = m->cfg.hidden_size, P = m->out_size, G = m->gates;
        const int LD = (int)(m->cfg.num_layers * m->dirs);
        const int mats = (int)(2 * G) + (m->cfg.proj_size != 0 ? 1 : 0);
        int r = 0;

        GPU_CK(cudnnGetRNNWeightSpaceSize(p->handle, rn->desc, &rn->wsize));
        GPU_CK(cudaMalloc(&rn->wspace, rn->wsize));
        GPU_CK(cudaMemsetAsync(rn->wspace, 0, rn->wsize, p->stream));
        for (int ld = 0; ld < LD; ld++) {
                const struct rnnd_layer_weights *lw = &m->layers[ld];

                for (int k = 0; k < mats; k++) {
                        const bool proj = k == (int)(2 * G);
                        const int id = proj ? 8 : k;
                        const float *w, *b;
                        size_t wn, rows, cols;
                        char mgot[64] = "", bgot[64] = "";
                        void *maddr = NULL, *baddr = NULL;

                        if (k < (int)G) {
                                w = lw->w_ih + (size_t)k * H * lw->in;
                                rows = H;
                                cols = lw->in;
                                b = lw->b_ih + (size_t)k * H;
                        } else if (!proj) {
                                w = lw->w_hh + (size_t)(k - G) * H * P;
                                rows = H;
                                cols = P;
                                b = lw->b_hh + (size_t)(k - G) * H;
                        } else {
                                w = lw->w_hr;
                                rows = P;
                                cols = H;
                                b = NULL;
                        }
                        GPU_CK(cudnnGetRNNWeightParams(
                                p->handle, rn->desc, ld, rn->wsize, rn->wspace, id, p->mdesc,
                                &maddr, b != NULL ? p->bdesc : NULL, b != NULL ? &baddr : NULL));
                        wn = rows * cols;
                        if (maddr == NULL ||
                            !rnnd__cudnn_tensor_is(p->mdesc, rows, cols, mgot, sizeof(mgot)) ||
                            (b != NULL &&
                             (baddr == NULL ||
                              !rnnd__cudnn_tensor_is(p->bdesc, H, 1, bgot, sizeof(bgot)))))
                                return rnnd_error_set(
                                        reterr, RNND_EGPU,
                                        "GPU %d: cuDNN's weight %d of layer-direction %d is not "
                                        "the expected matrix [%zu, %zu] and bias [%zu] (matrix "
                                        "%s, bias %s)",
                                        p->device, id, ld, rows, cols, H,
                                        maddr != NULL ? mgot : "absent",
                                        b == NULL       ? "none"
                                        : baddr != NULL ? bgot
                                                        : "absent");
                        r = put_weights(p, w, wn, maddr, reterr);
                        if (r == 0 && b != NULL)
                                r = put_weights(p, b, H, baddr, reterr);
                        if (r < 0)
                                return r;
                }
        }
        GPU_CK(cudaStreamSynchronize(p->stream));
out:
        return r;
}

static void rnn_free(struct rnn *rn)
{
        if (rn->desc != NULL)
                cudnnDestroyRNNDescriptor(rn->desc);
        if (rn->wspace != NULL)
                cudaFree(rn->wspace);
        memset(rn, 0, sizeof(*rn));
}

/*
 * Grows the workspace at open to what rn needs for any batch shape: every
 * batch size and, per size, the longest lengths (powers of two and the
 * largest the size allows), since cuDNN's sizes are not monotonic in the
 * shape (cudnnGetRNNTempSpaceSizes).  run() then allocates nothing.
 */
static int size_workspace(struct plan *p, struct rnn *rn, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const uint32_t maxlen = m->cfg.max_sequence_length;
        int32_t *lens = rnnd_mallocarray(p->max_n, sizeof(*lens));
        size_t need = 0;
        int r = 0;

        if (lens == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory sizing a workspace");
        for (uint32_t n = 1; n <= p->max_n; n++) {
                uint64_t tm = p->max_rows / n;
                const uint32_t Tmax = (uint32_t)(tm < maxlen ? tm : maxlen);

                if (Tmax == 0 ||
                    (rn->algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC && (int)n != rn->dyn_batch))
                        continue;
                for (uint32_t T = 1;; T *= 2) { /* Tmax <= 65535: no overflow */
                        size_t ws = 0;

                        T = T < Tmax ? T : Tmax;
                        for (uint32_t i = 0; i < n; i++)
                                lens[i] = (int32_t)T;
                        GPU_CK(cudnnSetRNNDataDescriptor(
                                p->xdesc, p->cdt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, (int)T,
                                (int)n, (int)m->cfg.input_size, lens, (void *)&zero_fill));
                        GPU_CK(cudnnGetRNNTempSpaceSizes(p->handle, rn->desc,
                                                         CUDNN_FWD_MODE_INFERENCE, p->xdesc, &ws,
                                                         NULL));
                        need = ws > need ? ws : need;
                        if (T == Tmax)
                                break;
                }
        }
        if (need > p->work_size) {
                void *w = NULL;

                GPU_CK(cudaStreamSynchronize(p->stream));
                GPU_CK(cudaMalloc(&w, need));
                if (p->work != NULL)
                        cudaFree(p->work);
                p->work = w;
                p->work_size = need;
        }
out:
        rnnd_free(lens);
        return r;
}

/* Creates rn with algorithm algo and fills its weights. */
static int rnn_init(struct plan *p, struct rnn *rn, cudnnRNNAlgo_t algo, rnnd_error_t *reterr)
{
        const struct rnnd_model_config *cfg = &p->m->cfg;
        int r = 0;

        memset(rn, 0, sizeof(*rn));
        rn->algo = algo;
        GPU_CK(cudnnCreateRNNDescriptor(&rn->desc));
        GPU_CK(cudnnSetRNNDescriptor_v8(
                rn->desc, algo, cell_mode(cfg->cell), CUDNN_RNN_DOUBLE_BIAS,
                p->m->dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
                p->cdt, CUDNN_DATA_FLOAT, p->half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH,
                (int32_t)cfg->input_size, (int32_t)cfg->hidden_size, (int32_t)p->m->out_size,
                (int32_t)cfg->num_layers, p->dropout, CUDNN_RNN_PADDED_IO_ENABLED));
        r = fill_weights(p, rn, reterr);
        if (r == 0 && algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC)
                r = size_workspace(p, rn, reterr);
out:
        return r;
}

/* Sets the data and state descriptors for n sequences of lengths lens, longest T. */
static int set_shapes(struct plan *p, uint32_t n, uint32_t T, const int32_t *lens,
                      rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const int LD = (int)(m->cfg.num_layers * m->dirs), P = (int)m->out_size;
        const int H = (int)m->cfg.hidden_size;
        const int hdims[3] = {LD, (int)n, P}, hstr[3] = {(int)n * P, P, 1};
        const int cdims[3] = {LD, (int)n, H}, cstr[3] = {(int)n * H, H, 1};
        int in = (int)m->cfg.input_size, r = 0;

        if (p->fail_next) { /* test hook: a bad parameter, an ordinary request error */
                p->fail_next = false;
                in = 0;
        }
        GPU_CK(cudnnSetRNNDataDescriptor(p->xdesc, p->cdt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                         (int)T, (int)n, in, lens, (void *)&zero_fill));
        GPU_CK(cudnnSetRNNDataDescriptor(p->ydesc, p->cdt, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                         (int)T, (int)n, (int)m->dirs * P, lens,
                                         (void *)&zero_fill));
        GPU_CK(cudnnSetTensorNdDescriptor(p->hdesc, p->cdt, 3, hdims, hstr));
        GPU_CK(cudnnSetTensorNdDescriptor(p->cdesc, p->cdt, 3, cdims, cstr));
out:
        return r;
}

/*
 * cudnnRNNForward with rn on the shapes set_shapes() set; d_lens is the
 * device copy of the lengths, which stays unchanged until the stream drains.
 * hx, cx may be NULL (zero state).  The workspace was sized at open
 * (size_workspace): nothing is allocated while serving.
 */
static int forward(struct plan *p, struct rnn *rn, const int32_t *d_lens, const void *hx,
                   const void *cx, rnnd_error_t *reterr)
{
        const bool lstm = p->m->cfg.cell == RNND_CELL_LSTM;
        size_t ws = 0;
        int r = 0;

        GPU_CK(cudnnGetRNNTempSpaceSizes(p->handle, rn->desc, CUDNN_FWD_MODE_INFERENCE, p->xdesc,
                                         &ws, NULL));
        if (ws > p->work_size) /* sized at open for every shape: not expected */
                return rnnd_error_set(reterr, RNND_EGPU,
                                      "GPU %d: cuDNN asks for a %zu-byte workspace, more than the "
                                      "%zu bytes sized at open",
                                      p->device, ws, p->work_size);
        GPU_CK(cudnnRNNForward(p->handle, rn->desc, CUDNN_FWD_MODE_INFERENCE, d_lens, p->xdesc,
                               p->d_x, p->ydesc, p->d_y, p->hdesc, hx, p->d_hy, p->cdesc,
                               lstm ? cx : NULL, lstm ? p->d_cy : NULL, rn->wsize, rn->wspace,
                               p->work_size, p->work, 0, NULL));
out:
        return r;
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

/* The model's fp32 weights on the device, and the fp16 head for fp16 data. */
static int upload_weights(struct plan *p, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const size_t U = m->cfg.head.present ? m->cfg.head.units : 0;
        int r = 0;

        GPU_CK(cudaMalloc((void **)&p->d_w, m->wlen * sizeof(float)));
        GPU_CK(cudaMemcpyAsync(p->d_w, m->wbuf, m->wlen * sizeof(float), cudaMemcpyHostToDevice,
                               p->stream));
        if (U > 0 && p->half) {
                const size_t hn = U * m->dirs * m->out_size;

                GPU_CK(cudaMalloc(&p->d_head_w16, hn * 2));
                r = put_weights(p, m->head_w, hn, p->d_head_w16, reterr);
        }
out:
        return r;
}

/* Max abs difference between two fp32 arrays, relative to 1 + |b|. */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
        double worst = 0;

        for (size_t i = 0; i < n; i++) {
                double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));

                worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
        }
        return worst;
}

/*
 * Runs rn on the probe batch (shapes already set): once untimed, then
 * PROBE_RUNS times between two events; y ends in out (fp32, rows x DP).
 */
static int probe_run(struct plan *p, struct rnn *rn, const int32_t *d_lens, size_t rows, float *out,
                     rnnd_error_t *reterr)
{
        const uint32_t DP = p->m->dirs * p->m->out_size;
        cudaEvent_t e0 = NULL, e1 = NULL;
        float ms = 0;
        int r = 0;

        r = forward(p, rn, d_lens, NULL, NULL, reterr);
        if (r < 0)
                return r;
        GPU_CK(rnnd__cuda_gather(p->d_y, p->dt, NULL, (uint32_t)rows, DP, p->d_out, RNND__F32,
                                 p->stream));
        GPU_CK(cudaMemcpyAsync(out, p->d_out, rows * DP * sizeof(float), cudaMemcpyDeviceToHost,
                               p->stream));
        GPU_CK(cudaEventCreate(&e0));
        GPU_CK(cudaEventCreate(&e1));
        GPU_CK(cudaEventRecord(e0, p->stream));
        for (int i = 0; i < PROBE_RUNS && r == 0; i++)
                r = forward(p, rn, d_lens, NULL, NULL, reterr);
        if (r < 0)
                goto out;
        GPU_CK(cudaEventRecord(e1, p->stream));
        GPU_CK(cudaEventSynchronize(e1));
        GPU_CK(cudaEventElapsedTime(&ms, e0, e1));
        rn->ms = ms / PROBE_RUNS;
out:
        if (e0 != NULL)
                cudaEventDestroy(e0);
        if (e1 != NULL)
                cudaEventDestroy(e1);
        return r;
}

/*
 * The persistent algorithms the model may use, fastest first to try.  None
 * supports a projection or half math, all need compute capability 6.0 and
 * DOUBLE_BIAS (which every plan uses), and run equal lengths only (run()
 * uses them for those alone); SMALL_H has hidden-size guards.
 */
static unsigned persist_candidates(const struct plan *p, cudnnRNNAlgo_t *out)
{
        const struct rnnd_model_config *cfg = &p->m->cfg;
        const bool rnn = cfg->cell == RNND_CELL_RNN_TANH || cfg->cell == RNND_CELL_RNN_RELU;
        unsigned n = 0;

        /* Nor half math: fp16 data runs on tensor ops, which they do not take. */
        if (cfg->proj_size != 0 || p->cc < 60 || p->half)
                return 0;
        if (cfg->hidden_size <= (rnn ? 384u : 192u))
                out[n++] = CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
        out[n++] = CUDNN_RNN_ALGO_PERSIST_STATIC;
        out[n++] = CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
        return n;
}

/*
 * Creates rn with persistent algorithm algo; PERSIST_DYNAMIC is built for
 * batches of n sequences (cudnnBuildRNNDynamic, which compiles per batch
 * size), so run() uses it for those only.
 */
static int fast_init(struct plan *p, struct rnn *rn, cudnnRNNAlgo_t algo, int n,
                     rnnd_error_t *reterr)
{
        int r = rnn_init(p, rn, algo, reterr);

        if (r == 0 && algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) {
                r = check_cudnn(p, cudnnBuildRNNDynamic(p->handle, rn->desc, n),
                                "cudnnBuildRNNDynamic", reterr);
                rn->dyn_batch = n;
                if (r == 0)
                        r = size_workspace(p, rn, reterr);
        }
        if (r < 0)
                rnn_free(rn);
        return r;
}

/*
 * Times STANDARD and each persistent candidate on an equal-length batch of
 * the largest size, and keeps the fastest candidate in p->fast when it beats
 * STANDARD by PROBE_GAIN and agrees with it (PERSIST_DYNAMIC thus only when
 * it pays, at the one batch size it is built for).  A candidate cuDNN
 * refuses is skipped; only a lost device fails the open.
 */
static atomic_uint probes, probing[RNND_CUDNN_MAX_DEVICES], probing_most;

void rnnd__cudnn_probe_stats(unsigned *n, unsigned *most_at_once)
{
        *n = atomic_load(&probes);
        *most_at_once = atomic_load(&probing_most);
}

static int probe_algos_timed(struct plan *p, rnnd_error_t *reterr);

/* probe_algos_timed, counted for the test hook. */
static int probe_algos(struct plan *p, rnnd_error_t *reterr)
{
        atomic_uint *now = &probing[p->device % RNND_CUDNN_MAX_DEVICES];
        unsigned at_once = atomic_fetch_add(now, 1) + 1, most = atomic_load(&probing_most);
        int r;

        while (at_once > most && !atomic_compare_exchange_weak(&probing_most, &most, at_once))
                ;
        atomic_fetch_add(&probes, 1);
        r = probe_algos_timed(p, reterr);
        atomic_fetch_sub(now, 1);
        return r;
}

static int probe_algos_timed(struct plan *p, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const uint32_t in = m->cfg.input_size, DP = m->dirs * m->out_size;
        cudnnRNNAlgo_t cand[3];
        unsigned nc = persist_candidates(p, cand);
        uint32_t n = p->max_n, T;
        int32_t *lens = p->h_in, *d_lens = p->d_in;
        float *x, *ref = NULL, *got = NULL;
        size_t rows;
        unsigned seed = 12345;
        int r = 0;

        if (nc == 0)
                return 0;
        T = (uint32_t)(p->max_rows / n);
        if (T == 0) {
                n = (uint32_t)p->max_rows;
                T = 1;
        }
        T = T < PROBE_STEPS ? T : PROBE_STEPS;
        T = T < m->cfg.max_sequence_length ? T : m->cfg.max_sequence_length;
        rows = (size_t)n * T;
        /* The probe input, uniform in [-1, 1), after the lengths in the input region. */
        x = (float *)p->h_in + ((n + 15) & ~15u);
        for (uint32_t i = 0; i < n; i++)
                lens[i] = (int32_t)T;
        for (size_t i = 0; i < rows * in; i++) {
                seed = seed * 1103515245u + 12345u;
                x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
        ref = rnnd_mallocarray(rows * DP, sizeof(float));
        got = rnnd_mallocarray(rows * DP, sizeof(float));
        if (ref == NULL || got == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory probing algorithms");
                goto out;
        }
        GPU_CK(cudaMemcpyAsync(p->d_in, p->h_in, (((n + 15) & ~15u) + rows * in) * 4,
                               cudaMemcpyHostToDevice, p->stream));
        GPU_CK(rnnd__cuda_gather((const float *)p->d_in + ((n + 15) & ~15u), RNND__F32, NULL,
                                 (uint32_t)rows, in, p->d_x, p->dt, p->stream));
        r = set_shapes(p, n, T, lens, reterr);
        if (r == 0)
                r = probe_run(p, &p->std, d_lens, rows, ref, reterr);
        if (r < 0)
                goto out;
        p->std_ms = p->std.ms;
        for (unsigned i = 0; i < nc; i++) {
                struct rnn c;
                rnnd_error_t ignored;
                int rc = fast_init(p, &c, cand[i], (int)n, &ignored);

                if (rc == 0)
                        rc = probe_run(p, &c, d_lens, rows, got, &ignored);
                if (rc == 0 && max_rel_diff(got, ref, rows * DP) > (p->half ? 1e-2 : 1e-4))
                        rc = RNND_EGPU; /* disagrees with STANDARD: not used */
                if (rc == 0 && c.ms < PROBE_GAIN * p->std_ms &&
                    (p->fast.desc == NULL || c.ms < p->fast.ms)) {
                        rnn_free(&p->fast);
                        p->fast = c;
                } else {
                        rnn_free(&c);
                }
                if (p->lost) {
                        r = rnnd_error_set(reterr, RNND_EDEVLOST, "GPU %d: %s", p->device,
                                           p->lost_msg);
                        goto out;
                }
        }
out:
        rnnd_free(ref);
        rnnd_free(got);
        return r;
}

/*
 * What the plans of one model on one GPU share: the immutable weights (the
 * fp32 copy that the embedding and head read, the fp16 head, the RNN
 * descriptors with their weight spaces) and the algorithm choice.  The
 * first plan to open there builds them and times the algorithms; the others
 * take them, so the weights are on each GPU once and the timing is done
 * once per model and GPU.  Builds on one GPU take turns (probe_mu), so that
 * no timing runs beside another plan's probe.  An entry lives while a plan
 * holds it (refs); each plan holds its model, so the model pointer names
 * one model.
 */
struct shared {
        const rnnd_model_t *m; /* immutable */
        int device;            /* immutable */
        unsigned refs;         /* guarded by shared_mu */
        cudnnDropoutDescriptor_t dropout;
        struct rnn std, fast; /* fast.desc NULL: no persistent algorithm won */
        float *d_w;
        void *d_head_w16;
        struct shared *next; /* guarded by shared_mu */
};

static pthread_mutex_t probe_mu[RNND_CUDNN_MAX_DEVICES] = {[0 ... RNND_CUDNN_MAX_DEVICES - 1] =
                                                                   PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shared *shareds; /* guarded by shared_mu */

static struct shared *shared_find(const rnnd_model_t *m, int device)
{
        struct shared *sh;

        pthread_mutex_lock(&shared_mu);
        for (sh = shareds; sh != NULL && (sh->m != m || sh->device != device); sh = sh->next)
                ;
        if (sh != NULL)
                sh->refs++;
        pthread_mutex_unlock(&shared_mu);
        return sh;
}

/* Frees what a plan built and did not hand over, or what the last plan left. */
static void weights_free(cudnnDropoutDescriptor_t dropout, struct rnn *std, struct rnn *fast,
                         float *d_w, void *d_head_w16)
{
        rnn_free(std);
        rnn_free(fast);
        if (dropout != NULL)
                cudnnDestroyDropoutDescriptor(dropout);
        if (d_w != NULL)
                cudaFree(d_w);
        if (d_head_w16 != NULL)
                cudaFree(d_head_w16);
}

/* Drops a reference; the last frees the weights (its GPU is the current device). */
static void shared_drop(struct shared *sh)
{
        struct shared **at;
        bool last;

        if (sh == NULL)
                return;
        pthread_mutex_lock(&shared_mu);
        last = --sh->refs == 0;
        if (last) {
                for (at = &shareds; *at != sh; at = &(*at)->next)
                        ;
                *at = sh->next;
        }
        pthread_mutex_unlock(&shared_mu);
        if (last) {
                weights_free(sh->dropout, &sh->std, &sh->fast, sh->d_w, sh->d_head_w16);
                rnnd_free(sh);
        }
}

/* The plan's own build of what plans share: weights, STANDARD, the probe. */
static int weights_build(struct plan *p, rnnd_error_t *reterr)
{
        int r = 0;

        /* No dropout: what PyTorch passes for inference (p = 0, no states). */
        GPU_CK(cudnnCreateDropoutDescriptor(&p->dropout));
        GPU_CK(cudnnSetDropoutDescriptor(p->dropout, p->handle, 0.0f, NULL, 0, 0));
        r = upload_weights(p, reterr);
        if (r == 0)
                r = rnn_init(p, &p->std, CUDNN_RNN_ALGO_STANDARD, reterr);
        if (r == 0)
                r = probe_algos(p, reterr);
out:
        return r;
}

/*
 * Takes the weights and algorithm of p's model on p's GPU (p->sh), building
 * them first when no plan has; then sizes p's own workspace for them.
 */
static int shared_take(struct plan *p, rnnd_error_t *reterr)
{
        pthread_mutex_t *mu = &probe_mu[p->device % RNND_CUDNN_MAX_DEVICES];
        struct shared *sh;
        int r = 0;

        pthread_mutex_lock(mu);
        sh = shared_find(p->m, p->device);
        if (sh == NULL) {
                r = weights_build(p, reterr);
                sh = r == 0 ? rnnd_calloc(1, sizeof(*sh)) : NULL;
                if (r == 0 && sh == NULL)
                        r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
                if (sh != NULL) {
                        *sh = (struct shared){.m = p->m,
                                              .device = p->device,
                                              .refs = 1,
                                              .dropout = p->dropout,
                                              .std = p->std,
                                              .fast = p->fast,
                                              .d_w = p->d_w,
                                              .d_head_w16 = p->d_head_w16};
                        pthread_mutex_lock(&shared_mu);
                        sh->next = shareds;
                        shareds = sh;
                        pthread_mutex_unlock(&shared_mu);
                }
        }
        pthread_mutex_unlock(mu);
        if (sh == NULL)
                return r; /* the plan frees its partial build */
        p->sh = sh;
        p->dropout = NULL;
        p->std = sh->std;
        p->fast = sh->fast;
        p->d_w = sh->d_w;
        p->d_head_w16 = sh->d_head_w16;
        r = size_workspace(p, &p->std, reterr);
        if (r == 0 && p->fast.desc != NULL)
                r = size_workspace(p, &p->fast, reterr);
        return r;
}

/* cuDNN's limit on maxSeqLength in cudnnSetRNNDataDescriptor. */
#define CUDNN_MAX_SEQ_LEN 65535u

static bool cudnn_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap)
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

static void cudnn_close(void *plan);

static int cudnn_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, void **ret,
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
        if (!cudnn_qualifies(&m->cfg, why, sizeof(why))) {
                r = rnnd_error_set(reterr, RNND_EUNSUPPORTED, "not on cuDNN: %s", why);
                goto out;
        }
        if (atomic_load(&fault)) {
                r = rnnd_error_set(reterr, RNND_EGPU,
                                   "GPU %d: a device fault in this process (%s); restart it",
                                   p->device, fault_msg);
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
                r = shared_take(p, reterr);
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
        cudnn_close(p);
        return r;
}

static void cudnn_close(void *plan)
{
        struct plan *p = plan;

        if (p == NULL)
                return;
        if (p->stream != NULL) {
                cudaSetDevice(p->device);
                cudaStreamSynchronize(p->stream);
        }
        if (p->sh != NULL)
                shared_drop(p->sh);
        else /* a build that failed half-way */
                weights_free(p->dropout, &p->std, &p->fast, p->d_w, p->d_head_w16);
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

static void cudnn_describe(const void *plan, struct rnnd_backend_desc *d)
{
        const struct plan *p = plan;
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
 * size_workspace() found (its sizes are not monotonic in the length): the
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
        r = set_shapes(p, o->n, T2 < Tmax ? T2 : Tmax, (const int32_t *)p->h_in + o->len, reterr);
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

static int cudnn_run(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        struct plan *p = plan;
        const rnnd_model_t *m = p->m;
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t P = m->out_size, H = cfg->hidden_size, DP = m->dirs * P;
        struct rnnd__cudnn_layout o;
        struct out_layout ol;
        const int32_t *din;
        struct rnn *rn;
        uint32_t T = 0;
        int r;

        if (p->lost)
                return rnnd_error_set(reterr, RNND_EDEVLOST, "GPU %d is out of service: %s",
                                      p->device, p->lost_msg);
        if (atomic_load(&fault))
                return rnnd_error_set(reterr, RNND_EDEVLOST,
                                      "GPU %d is out of service: a device fault in this process "
                                      "(%s)",
                                      p->device, fault_msg);
        r = rnnd__cudnn_check(m, b, p->max_n, p->max_rows, &T, reterr);
        if (r < 0)
                return r;
        GPU_CK(cudaSetDevice(p->device));
        rnnd__cudnn_stage(m, b, p->h_in, &o);
        out_layout(p, b, &o, &ol);
        din = p->d_in;
        GPU_CK(cudaMemcpyAsync(p->d_in, p->h_in, o.x * 4, cudaMemcpyHostToDevice, p->stream));
        if (m->embedding == NULL) {
                r = copy_x(p, b, &o, reterr);
                if (r < 0)
                        goto out;
        }
        GPU_CK(rnnd__cuda_gather(
                m->embedding != NULL ? (const void *)(p->d_w + (m->embedding - m->wbuf))
                                     : (const void *)((const float *)din + o.x),
                RNND__F32, din + o.idx_x, o.n * o.T, cfg->input_size, p->d_x, p->dt, p->stream));
        if (o.any_h0)
                GPU_CK(rnnd__cuda_gather((const float *)din + o.h0, RNND__F32, din + o.idx_hin,
                                         o.LD * o.n, P, p->d_hx, p->dt, p->stream));
        if (o.any_c0)
                GPU_CK(rnnd__cuda_gather((const float *)din + o.c0, RNND__F32, din + o.idx_hin,
                                         o.LD * o.n, H, p->d_cx, p->dt, p->stream));
        r = set_shapes(p, o.n, o.T, (const int32_t *)p->h_in + o.len, reterr);
        if (r < 0)
                goto out;
        rn = &p->std;
        if (o.equal && p->fast.desc != NULL &&
            (p->fast.algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC || p->fast.dyn_batch == (int)o.n))
                rn = &p->fast;
        r = forward(p, rn, din + o.len, o.any_h0 ? p->d_hx : NULL, o.any_c0 ? p->d_cx : NULL,
                    reterr);
        if (r < 0 && r != RNND_EDEVLOST && rn != &p->std) /* refused this shape: STANDARD */
                rn = &p->std;
        if (r < 0 && r != RNND_EDEVLOST && rn == &p->std) {
                r = fit_workspace(p, &o, reterr);
                if (r == 0)
                        r = forward(p, &p->std, din + o.len, o.any_h0 ? p->d_hx : NULL,
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

                if (sticky(e))
                        r = check_cuda(p, e, "cudaStreamSynchronize", reterr);
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

const struct rnnd_backend_ops rnnd_cudnn_backend = {
        .name = "cudnn",
        .open = cudnn_open,
        .run = cudnn_run,
        .close = cudnn_close,
        .describe = cudnn_describe,
        .qualifies = cudnn_qualifies,
};
