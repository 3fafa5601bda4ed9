/*
 * test_cudasim_golden.c: cuDNN's RNN forward against the PyTorch goldens
 * (tests/golden), driving the cuDNN API directly: weights placed through
 * cudnnGetRNNWeightParams from the safetensors, every golden case in each of
 * the three data layouts (with and without devSeqLengths) in fp32, and in
 * fp16.  Not the backend, not the CPU engine: this checks the library under
 * it.  Built against the stand-in (-Dcuda=sim, tests/cudasim/README.md) and
 * against the real libraries (tests/gpu/run-on-gpu.sh), where it skips (77)
 * without a GPU.
 */
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "golden-io.h"

#define TOL_FP32 1e-5
#define TOL_FP16 2e-3

#define CUDA(call)                                                                                 \
        do {                                                                                       \
                cudaError_t e_ = (call);                                                           \
                ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));         \
        } while (0)
#define DNN(call)                                                                                  \
        do {                                                                                       \
                cudnnStatus_t s_ = (call);                                                         \
                char m_[512] = "";                                                                 \
                if (s_ != CUDNN_STATUS_SUCCESS)                                                    \
                        cudnnGetLastErrorString(m_, sizeof(m_));                                   \
                ck_assert_msg(s_ == CUDNN_STATUS_SUCCESS, "%s: %s (%s)", #call,                    \
                              cudnnGetErrorString(s_), m_);                                        \
        } while (0)

static unsigned n_run, n_skipped;

/* IEEE half from float, round to nearest even (the test's own, not the stand-in's). */
static uint16_t to_half(float f)
{
        uint32_t x, sign, e, m;

        memcpy(&x, &f, 4);
        sign = (x >> 16) & 0x8000;
        e = (x >> 23) & 0xff;
        m = x & 0x7fffff;
        if (e == 0xff || e > 142)
                return (uint16_t)(sign | 0x7c00 | (e == 0xff && m ? 0x200 : 0));
        if (e < 113)
                return (uint16_t)(sign | (uint32_t)nearbyintf(fabsf(f) * 16777216.0f));
        {
                uint32_t h = ((e - 112) << 10) | (m >> 13), rest = m & 0x1fff;

                if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
                        h++;
                return (uint16_t)(sign | h);
        }
}

static float from_half(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
        float f;

        if (e == 0)
                return (sign ? -1.0f : 1.0f) * ldexpf((float)m, -24);
        bits = sign | (e == 0x1f ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
        memcpy(&f, &bits, 4);
        return f;
}

/* Copies n floats to device memory at dst as float or half. */
static void put(void *dst, const float *src, size_t n, bool half)
{
        if (half) {
                uint16_t *h = malloc(n * 2 + 2);

                for (size_t i = 0; i < n; i++)
                        h[i] = to_half(src[i]);
                CUDA(cudaMemcpy(dst, h, n * 2, cudaMemcpyHostToDevice));
                free(h);
        } else {
                CUDA(cudaMemcpy(dst, src, n * 4, cudaMemcpyHostToDevice));
        }
}

static void get(float *dst, const void *src, size_t n, bool half)
{
        if (half) {
                uint16_t *h = malloc(n * 2 + 2);

                CUDA(cudaMemcpy(h, src, n * 2, cudaMemcpyDeviceToHost));
                for (size_t i = 0; i < n; i++)
                        dst[i] = from_half(h[i]);
                free(h);
        } else {
                CUDA(cudaMemcpy(dst, src, n * 4, cudaMemcpyDeviceToHost));
        }
}

/* A tensor of model.safetensors as float32 (NULL when absent), with its element count. */
static float *tensor(rnnd_stfile_t *f, const char *name, uint64_t *numel)
{
        const struct rnnd_st_tensor *t = rnnd_stfile_find(f, name);
        rnnd_error_t err = {0};
        float *v;

        if (t == NULL)
                return NULL;
        v = malloc(sizeof(float) * (t->numel ? t->numel : 1));
        ck_assert_msg(rnnd_stfile_read_f32(f, name, t->ndim, t->shape, v, &err) == 0, "%s: %s",
                      name, err.msg);
        *numel = t->numel;
        return v;
}

/* Places every matrix and bias of the PyTorch state dict through cudnnGetRNNWeightParams. */
static void place_weights(cudnnHandle_t h, cudnnRNNDescriptor_t rnn, const char *dir,
                          const struct rnnd_model_config *cfg, size_t wsize, void *w, bool half)
{
        const int D = cfg->bidirectional ? 2 : 1, H = (int)cfg->hidden_size;
        const int G = cfg->cell == RNND_CELL_LSTM ? 4 : cfg->cell == RNND_CELL_GRU ? 3 : 1;
        const int P = cfg->proj_size ? (int)cfg->proj_size : H;
        cudnnTensorDescriptor_t md, bd;
        char path[4200];
        rnnd_stfile_t *f;
        rnnd_error_t err = {0};

        snprintf(path, sizeof(path), "%s/1/model.safetensors", dir);
        ck_assert_msg(rnnd_stfile_open(path, &f, &err) == 0, "%s", err.msg);
        DNN(cudnnCreateTensorDescriptor(&md));
        DNN(cudnnCreateTensorDescriptor(&bd));
        for (int l = 0; l < (int)cfg->num_layers; l++) {
                for (int d = 0; d < D; d++) {
                        const int in = l == 0 ? (int)cfg->input_size : D * P;
                        static const char *const kinds[5] = {"weight_ih", "weight_hh", "bias_ih",
                                                             "bias_hh", "weight_hr"};
                        float *t[5];
                        uint64_t n[5] = {0};

                        for (int k = 0; k < 5; k++) {
                                char name[256];

                                snprintf(name, sizeof(name), "%s%s_l%d%s", cfg->weights.prefix,
                                         kinds[k], l, d ? "_reverse" : "");
                                t[k] = tensor(f, name, &n[k]);
                        }
                        ck_assert(t[0] != NULL && t[1] != NULL);
                        ck_assert_uint_eq(n[0], (uint64_t)G * H * in);
                        ck_assert_uint_eq(n[1], (uint64_t)G * H * P);
                        for (int lin = 0; lin < 2 * G + (cfg->cell == RNND_CELL_LSTM); lin++) {
                                const bool rec = lin >= G, proj = lin == 2 * G;
                                const int g = lin % G;
                                void *ma = NULL, *ba = NULL;
                                int nb = 0, dim[3] = {0}, stride[3];
                                cudnnDataType_t ty;

                                DNN(cudnnGetRNNWeightParams(h, rnn, l * D + d, wsize, w, lin, md,
                                                            &ma, bd, &ba));
                                DNN(cudnnGetTensorNdDescriptor(md, 3, &ty, &nb, dim, stride));
                                if (proj && P == H) {
                                        ck_assert_ptr_null(ma);
                                        continue;
                                }
                                ck_assert_int_eq(nb, 3);
                                ck_assert_int_eq(dim[0], 1);
                                ck_assert_int_eq(dim[1], proj ? P : H);
                                ck_assert_int_eq(dim[2], proj ? H : rec ? P : in);
                                ck_assert_int_eq(stride[2], 1);
                                if (proj) {
                                        ck_assert(t[4] != NULL && n[4] == (uint64_t)P * H);
                                        put(ma, t[4], (size_t)P * H, half);
                                        ck_assert_ptr_null(ba);
                                        continue;
                                }
                                put(ma, t[rec] + (size_t)g * H * (rec ? P : in),
                                    (size_t)H * (rec ? P : in), half);
                                ck_assert_ptr_nonnull(ba);
                                DNN(cudnnGetTensorNdDescriptor(bd, 3, &ty, &nb, dim, stride));
                                ck_assert_int_eq(nb, 3);
                                ck_assert_int_eq(dim[1], H);
                                if (t[2 + rec] != NULL) {
                                        put(ba, t[2 + rec] + (size_t)g * H, (size_t)H, half);
                                } else {
                                        float zero[4096] = {0};

                                        put(ba, zero, (size_t)H, half);
                                }
                        }
                        for (int k = 0; k < 5; k++)
                                free(t[k]);
                }
        }
        DNN(cudnnDestroyTensorDescriptor(md));
        DNN(cudnnDestroyTensorDescriptor(bd));
        rnnd_stfile_close(f);
}

/* Row of (step t, sequence b) in a layout; order: sequences longest first (packed). */
static size_t row(int layout, int t, int b, int B, int T, const int *len_sorted, const int *rank)
{
        size_t r = 0;

        if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED)
                return (size_t)t * B + b;
        if (layout == CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
                return (size_t)b * T + t;
        for (int s = 0; s < t; s++)
                for (int k = 0; k < B && len_sorted[k] > s; k++)
                        r++;
        return r + rank[b];
}

/* One run of a golden case through cuDNN: its shapes, orders and buffers. */
struct sim_run {
        struct golden g;
        const struct rnnd_model_config *cfg;
        const char *name;
        char dir[4096], how[128];
        int layout;
        bool half;
        size_t es; /* bytes per element */
        int B, T, Tmax, I, H, P, D, LD;
        int lens[64], sorted[64], rank[64], order[64];
        cudnnDataType_t ty;
        cudnnHandle_t h;
        cudaStream_t st;
        cudnnRNNDescriptor_t rnn;
        cudnnRNNDataDescriptor_t xd, yd;
        cudnnTensorDescriptor_t hd, cd;
        size_t wsize, work_size, rows;
        void *w, *work, *x, *y, *hx, *cx, *hy, *cy, *dlen;
        float *hostx, *tmp, fill;
        uint16_t fill16;
};

/* The lengths; the packed layout wants them longest first (a stable order). */
static void order_lengths(struct sim_run *s)
{
        for (int b = 0; b < s->B; b++) {
                s->lens[b] = (int)s->g.lengths[b];
                s->order[b] = b;
        }
        if (s->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                for (int i = 1; i < s->B; i++)
                        for (int j = i; j > 0 && s->lens[s->order[j]] > s->lens[s->order[j - 1]];
                             j--) {
                                int t = s->order[j];

                                s->order[j] = s->order[j - 1];
                                s->order[j - 1] = t;
                        }
        for (int k = 0; k < s->B; k++) {
                s->sorted[k] = s->lens[s->order[k]];
                s->rank[s->order[k]] = k;
        }
        /* The packed layout's maxSeqLength is the longest length. */
        s->Tmax = s->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED ? s->sorted[0] : s->T;
}

/* x on the host: io.safetensors' x, or the embedding rows of the tokens. */
static void host_x(struct sim_run *s)
{
        const int B = s->B, T = s->T, I = s->I;
        char path[4200];
        rnnd_stfile_t *f;
        rnnd_error_t err = {0};
        uint64_t n = 0;
        float *emb;

        s->hostx = calloc((size_t)B * T * I, sizeof(float));
        if (s->g.x != NULL) {
                memcpy(s->hostx, s->g.x, sizeof(float) * (size_t)B * T * I);
                return;
        }
        snprintf(path, sizeof(path), "%s/1/model.safetensors", s->dir);
        ck_assert_msg(rnnd_stfile_open(path, &f, &err) == 0, "%s", err.msg);
        emb = tensor(f, s->cfg->weights.embedding, &n);
        ck_assert_ptr_nonnull(emb);
        for (int i = 0; i < B * T; i++)
                if (s->g.tokens[i] >= 0 && (uint64_t)(s->g.tokens[i] + 1) * I <= n)
                        memcpy(s->hostx + (size_t)i * I, emb + s->g.tokens[i] * I,
                               sizeof(float) * I);
        free(emb);
        rnnd_stfile_close(f);
}

/* The handle on a stream of its own, the RNN, data and state descriptors. */
static void describe(struct sim_run *s)
{
        const struct rnnd_model_config *cfg = s->cfg;
        const bool packed = s->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED;
        void *fill = s->half ? (void *)&s->fill16 : (void *)&s->fill;
        int hdim[3] = {s->LD, s->B, s->P}, hs[3] = {s->B * s->P, s->P, 1},
            cdim[3] = {s->LD, s->B, s->H}, cs[3] = {s->B * s->H, s->H, 1};

        CUDA(cudaSetDevice(0));
        CUDA(cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking));
        DNN(cudnnCreate(&s->h));
        DNN(cudnnSetStream(s->h, s->st));
        DNN(cudnnCreateRNNDescriptor(&s->rnn));
        DNN(cudnnSetRNNDescriptor_v8(
                s->rnn, CUDNN_RNN_ALGO_STANDARD,
                cfg->cell == RNND_CELL_LSTM       ? CUDNN_LSTM
                : cfg->cell == RNND_CELL_GRU      ? CUDNN_GRU
                : cfg->cell == RNND_CELL_RNN_RELU ? CUDNN_RNN_RELU
                                                  : CUDNN_RNN_TANH,
                CUDNN_RNN_DOUBLE_BIAS, s->D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                CUDNN_LINEAR_INPUT, s->ty, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, s->I, s->H, s->P,
                (int)cfg->num_layers, NULL, packed ? 0 : CUDNN_RNN_PADDED_IO_ENABLED));
        DNN(cudnnCreateRNNDataDescriptor(&s->xd));
        DNN(cudnnCreateRNNDataDescriptor(&s->yd));
        DNN(cudnnSetRNNDataDescriptor(s->xd, s->ty, s->layout, s->Tmax, s->B, s->I, s->sorted,
                                      fill));
        DNN(cudnnSetRNNDataDescriptor(s->yd, s->ty, s->layout, s->Tmax, s->B, s->D * s->P,
                                      s->sorted, fill));
        DNN(cudnnCreateTensorDescriptor(&s->hd));
        DNN(cudnnCreateTensorDescriptor(&s->cd));
        DNN(cudnnSetTensorNdDescriptor(s->hd, s->ty, 3, hdim, hs));
        DNN(cudnnSetTensorNdDescriptor(s->cd, s->ty, 3, cdim, cs));
}

/* A state [B, LD, width] of the golden, in cuDNN's [LD, B, width] on the device at *dst. */
static void put_state(struct sim_run *s, const float *state, int width, void **dst)
{
        for (int b = 0; b < s->B; b++)
                for (int k = 0; k < s->LD; k++)
                        memcpy(s->tmp + ((size_t)k * s->B + s->rank[b]) * width,
                               state + ((size_t)b * s->LD + k) * width, sizeof(float) * width);
        CUDA(cudaMalloc(dst, (size_t)s->LD * s->B * width * s->es));
        put(*dst, s->tmp, (size_t)s->LD * s->B * width, s->half);
}

/* The weights, the workspace, x and the states in cuDNN's layouts on the device. */
static void upload(struct sim_run *s, bool dev_lengths)
{
        const int B = s->B, T = s->T, I = s->I, DP = s->D * s->P;
        size_t reserve = 0;

        DNN(cudnnGetRNNWeightSpaceSize(s->h, s->rnn, &s->wsize));
        CUDA(cudaMalloc(&s->w, s->wsize));
        place_weights(s->h, s->rnn, s->dir, s->cfg, s->wsize, s->w, s->half);
        DNN(cudnnGetRNNTempSpaceSizes(s->h, s->rnn, CUDNN_FWD_MODE_INFERENCE, s->xd, &s->work_size,
                                      &reserve));
        ck_assert_uint_eq(reserve, 0);
        CUDA(cudaMalloc(&s->work, s->work_size));
        for (int b = 0; b < B; b++)
                s->rows += (size_t)s->lens[b];
        if (s->layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                s->rows = (size_t)B * T;
        s->tmp = calloc(s->rows * (size_t)(I > DP ? I : DP) + (size_t)s->LD * B * s->H + 1,
                        sizeof(float));
        for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) {
                        if (t >= s->lens[b] && s->layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                                continue;
                        memcpy(s->tmp + row(s->layout, t, b, B, T, s->sorted, s->rank) * I,
                               s->hostx + ((size_t)b * T + t) * I, sizeof(float) * I);
                }
        CUDA(cudaMalloc(&s->x, s->rows * I * s->es));
        put(s->x, s->tmp, s->rows * I, s->half);
        CUDA(cudaMalloc(&s->y, s->rows * DP * s->es));
        CUDA(cudaMalloc(&s->hy, (size_t)s->LD * B * s->P * s->es));
        if (s->g.h0 != NULL)
                put_state(s, s->g.h0, s->P, &s->hx);
        if (s->cfg->cell == RNND_CELL_LSTM) {
                CUDA(cudaMalloc(&s->cy, (size_t)s->LD * B * s->H * s->es));
                if (s->g.c0 != NULL)
                        put_state(s, s->g.c0, s->H, &s->cx);
        }
        if (dev_lengths) {
                CUDA(cudaMalloc(&s->dlen, sizeof(int) * B));
                CUDA(cudaMemcpy(s->dlen, s->sorted, sizeof(int) * B, cudaMemcpyHostToDevice));
        }
}

/* A state from cuDNN's [LD, B, width] at src back to the golden's [B, LD, width] in dst. */
static void get_state(struct sim_run *s, const void *src, int width, float *dst)
{
        get(s->tmp, src, (size_t)s->LD * s->B * width, s->half);
        for (int b = 0; b < s->B; b++)
                for (int k = 0; k < s->LD; k++)
                        memcpy(dst + ((size_t)b * s->LD + k) * width,
                               s->tmp + ((size_t)k * s->B + s->rank[b]) * width,
                               sizeof(float) * width);
}

/* The outputs back in the golden's batch-first layout; the padding must be paddingFill. */
static void read_back(struct sim_run *s)
{
        const int B = s->B, T = s->T, DP = s->D * s->P;

        clear_outputs(&s->g);
        get(s->tmp, s->y, s->rows * DP, s->half);
        for (int b = 0; b < B; b++)
                for (int t = 0; t < s->lens[b]; t++)
                        memcpy(s->g.got[0] + ((size_t)b * T + t) * DP,
                               s->tmp + row(s->layout, t, b, B, T, s->sorted, s->rank) * DP,
                               sizeof(float) * DP);
        if (s->layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                for (int b = 0; b < B; b++)
                        for (int t = s->lens[b]; t < T; t++)
                                for (int k = 0; k < DP; k++)
                                        ck_assert_msg(s->tmp[row(s->layout, t, b, B, T, s->sorted,
                                                                 s->rank) *
                                                                     DP +
                                                             k] == 0.0f,
                                                      "%s %s: padding of sequence %d step %d is "
                                                      "not paddingFill",
                                                      s->name, s->how, b, t);
        get_state(s, s->hy, s->P, s->g.got[1]);
        if (s->cy != NULL)
                get_state(s, s->cy, s->H, s->g.got[2]);
}

static void release(struct sim_run *s)
{
        CUDA(cudaFree(s->w));
        CUDA(cudaFree(s->work));
        CUDA(cudaFree(s->x));
        CUDA(cudaFree(s->y));
        CUDA(cudaFree(s->hy));
        CUDA(cudaFree(s->hx));
        CUDA(cudaFree(s->cx));
        CUDA(cudaFree(s->cy));
        CUDA(cudaFree(s->dlen));
        DNN(cudnnDestroyTensorDescriptor(s->hd));
        DNN(cudnnDestroyTensorDescriptor(s->cd));
        DNN(cudnnDestroyRNNDataDescriptor(s->xd));
        DNN(cudnnDestroyRNNDataDescriptor(s->yd));
        DNN(cudnnDestroyRNNDescriptor(s->rnn));
        DNN(cudnnDestroy(s->h));
        CUDA(cudaStreamDestroy(s->st));
        free(s->tmp);
        free(s->hostx);
        golden_done(&s->g);
}

static void run(const char *name, int layout, bool half, bool dev_lengths)
{
        struct sim_run *s = calloc(1, sizeof(*s));
        const struct rnnd_model_config *cfg;

        ck_assert_ptr_nonnull(s);
        golden_load(&s->g, name, RNND_PREC_FP32);
        cfg = s->cfg = &s->g.m->cfg;
        s->name = name;
        s->layout = layout;
        s->half = half;
        s->es = half ? 2 : 4;
        s->ty = half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
        s->B = (int)s->g.B;
        s->T = (int)s->g.T;
        s->I = (int)cfg->input_size;
        s->H = (int)cfg->hidden_size;
        s->P = cfg->proj_size ? (int)cfg->proj_size : s->H;
        s->D = cfg->bidirectional ? 2 : 1;
        s->LD = (int)cfg->num_layers * s->D;
        ck_assert_int_le(s->B, 64);
        snprintf(s->dir, sizeof(s->dir), "%s/golden/models/%s", rnnd_test_dir(), name);
        snprintf(s->how, sizeof(s->how), "%s, layout %d%s", half ? "fp16" : "fp32", layout,
                 dev_lengths ? ", devSeqLengths" : "");
        order_lengths(s);
        host_x(s);
        describe(s);
        upload(s, dev_lengths);
        DNN(cudnnRNNForward(s->h, s->rnn, CUDNN_FWD_MODE_INFERENCE, s->dlen, s->xd, s->x, s->yd,
                            s->y, s->hd, s->hx, s->hy, s->cd, s->cx, s->cy, s->wsize, s->w,
                            s->work_size, s->work, 0, NULL));
        CUDA(cudaStreamSynchronize(s->st));
        read_back(s);
        if (s->g.want[3] != NULL) { /* the head is rnnd's, not cuDNN's */
                free(s->g.want[3]);
                s->g.want[3] = NULL;
        }
        compare(&s->g, name, s->how, half ? TOL_FP16 : TOL_FP32, half);
        release(s);
        free(s);
}

START_TEST(test_case)
{
        char dir[4096];
        struct rnnd_model_config cfg;
        rnnd_error_t err = {0};

        snprintf(dir, sizeof(dir), "%s/golden/models/%s", rnnd_test_dir(), cases[_i]);
        ck_assert_msg(rnnd_repository_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
        if (cfg.cell == RNND_CELL_GRU && !cfg.gru_linear_before_reset) {
                printf("%s: a reset-before GRU, which cuDNN has not\n", cases[_i]);
                n_skipped++;
                return;
        }
        if (cfg.n_blocks > 1) { /* one RNN descriptor per block: rnnd's plans, gpu_golden */
                printf("%s: a chain of blocks, which gpu_golden runs through rnnd's plans\n",
                       cases[_i]);
                n_skipped++;
                return;
        }
        run(cases[_i], CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, false, false);
        run(cases[_i], CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, false, true);
        run(cases[_i], CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, false, _i % 2 == 0);
        run(cases[_i], CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, true, false);
        n_run++;
}
END_TEST

START_TEST(test_coverage)
{
        ck_assert_uint_ge(n_cases, 80);
        ck_assert_msg(n_run + n_skipped == n_cases && n_skipped <= 3 + 9,
                      "only %u of %u goldens ran (%u skipped)", n_run, n_cases, n_skipped);
}
END_TEST

static Suite *cudasim_golden_suite(void)
{
        Suite *s = suite_create("cudasim_golden");
        TCase *tc;

        find_cases();
        tc = tcase_create("golden");
        tcase_set_timeout(tc, 600);
        tcase_add_loop_test(tc, test_case, 0, (int)n_cases);
        suite_add_tcase(s, tc);
        tc = tcase_create("coverage");
        tcase_add_test(tc, test_coverage);
        suite_add_tcase(s, tc);
        return s;
}

int main(int argc, char **argv)
{
        SRunner *sr;
        int n = 0, failed;

        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
                printf("SKIP: no CUDA device\n");
                return 77;
        }
        sr = srunner_create(cudasim_golden_suite());
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run(sr, NULL, rnnd_check_only(argc, argv), CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
