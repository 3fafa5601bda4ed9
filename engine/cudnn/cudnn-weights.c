/*
 * cudnn-weights.c: the RNN descriptors, their weight spaces and their runs
 * (cudnn-int.h): the model's canonical weights (model.h, already in cuDNN's
 * gate order) uploaded once and laid into each descriptor's weight space
 * through cudnnGetRNNWeightParams, checked tensor by tensor, the
 * workspace each descriptor needs, and a batch's shapes and forward pass.
 */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"

static const double zero_fill; /* paddingFill: zero bits read as 0 in fp32 and fp16 */

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

void rnnd__cudnn_rnn_free(struct rnn *rn)
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
int rnnd__cudnn_size_workspace(struct plan *p, struct rnn *rn, rnnd_error_t *reterr)
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
int rnnd__cudnn_rnn_init(struct plan *p, struct rnn *rn, cudnnRNNAlgo_t algo, rnnd_error_t *reterr)
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
                r = rnnd__cudnn_size_workspace(p, rn, reterr);
out:
        return r;
}

/* The model's fp32 weights on the device, and the fp16 head for fp16 data. */
int rnnd__cudnn_upload_weights(struct plan *p, rnnd_error_t *reterr)
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

/* Sets the data and state descriptors for n sequences of lengths lens, longest T. */
int rnnd__cudnn_set_shapes(struct plan *p, uint32_t n, uint32_t T, const int32_t *lens,
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
 * cudnnRNNForward with rn on the shapes rnnd__cudnn_set_shapes() set; d_lens is the
 * device copy of the lengths, which stays unchanged until the stream drains.
 * hx, cx may be NULL (zero state).  The workspace was sized at open
 * (size_workspace): nothing is allocated while serving.
 */
int rnnd__cudnn_forward(struct plan *p, struct rnn *rn, const int32_t *d_lens, const void *hx,
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
