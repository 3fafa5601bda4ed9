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

static unsigned n_run;

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

static void run(const char *name, int layout, bool half, bool dev_lengths)
{
        char dir[4096], how[128];
        struct golden g;
        const struct rnnd_model_config *cfg;
        cudnnHandle_t h;
        cudaStream_t st;
        cudnnRNNDescriptor_t rnn;
        cudnnRNNDataDescriptor_t xd, yd;
        cudnnTensorDescriptor_t hd, cd;
        const cudnnDataType_t ty = half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
        const size_t es = half ? 2 : 4;
        int B, T, Tmax, I, H, P, D, LD, lens[64], sorted[64], rank[64], order[64];
        size_t wsize, work_size, reserve = 0, rows = 0;
        void *w, *work, *x, *y, *hx = NULL, *cx = NULL, *hy, *cy = NULL, *dlen = NULL;
        float *hostx, *tmp, fill = 0.0f;
        uint16_t fill16 = 0;

        golden_load(&g, name, RNND_PREC_FP32);
        cfg = &g.m->cfg;
        B = (int)g.B;
        T = (int)g.T;
        I = (int)cfg->input_size;
        H = (int)cfg->hidden_size;
        P = cfg->proj_size ? (int)cfg->proj_size : H;
        D = cfg->bidirectional ? 2 : 1;
        LD = (int)cfg->num_layers * D;
        ck_assert_int_le(B, 64);
        snprintf(dir, sizeof(dir), "%s/golden/models/%s", rnnd_test_dir(), name);
        snprintf(how, sizeof(how), "%s, layout %d%s", half ? "fp16" : "fp32", layout,
                 dev_lengths ? ", devSeqLengths" : "");

        /* Lengths; the packed layout wants them longest first (a stable order). */
        for (int b = 0; b < B; b++) {
                lens[b] = (int)g.lengths[b];
                order[b] = b;
        }
        if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                for (int i = 1; i < B; i++)
                        for (int j = i; j > 0 && lens[order[j]] > lens[order[j - 1]]; j--) {
                                int t = order[j];

                                order[j] = order[j - 1];
                                order[j - 1] = t;
                        }
        for (int k = 0; k < B; k++) {
                sorted[k] = lens[order[k]];
                rank[order[k]] = k;
        }
        /* The packed layout's maxSeqLength is the longest length. */
        Tmax = layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED ? sorted[0] : T;

        /* x on the host: io.safetensors' x, or the embedding rows of the tokens. */
        hostx = calloc((size_t)B * T * I, sizeof(float));
        if (g.x != NULL) {
                memcpy(hostx, g.x, sizeof(float) * (size_t)B * T * I);
        } else {
                char path[4200];
                rnnd_stfile_t *f;
                rnnd_error_t err = {0};
                uint64_t n = 0;
                float *emb;

                snprintf(path, sizeof(path), "%s/1/model.safetensors", dir);
                ck_assert_msg(rnnd_stfile_open(path, &f, &err) == 0, "%s", err.msg);
                emb = tensor(f, cfg->weights.embedding, &n);
                ck_assert_ptr_nonnull(emb);
                for (int i = 0; i < B * T; i++)
                        if (g.tokens[i] >= 0 && (uint64_t)(g.tokens[i] + 1) * I <= n)
                                memcpy(hostx + (size_t)i * I, emb + g.tokens[i] * I,
                                       sizeof(float) * I);
                free(emb);
                rnnd_stfile_close(f);
        }

        CUDA(cudaSetDevice(0));
        CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        DNN(cudnnCreate(&h));
        DNN(cudnnSetStream(h, st));
        DNN(cudnnCreateRNNDescriptor(&rnn));
        DNN(cudnnSetRNNDescriptor_v8(
                rnn, CUDNN_RNN_ALGO_STANDARD,
                cfg->cell == RNND_CELL_LSTM       ? CUDNN_LSTM
                : cfg->cell == RNND_CELL_GRU      ? CUDNN_GRU
                : cfg->cell == RNND_CELL_RNN_RELU ? CUDNN_RNN_RELU
                                                  : CUDNN_RNN_TANH,
                CUDNN_RNN_DOUBLE_BIAS, D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                CUDNN_LINEAR_INPUT, ty, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, I, H, P,
                (int)cfg->num_layers, NULL,
                layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED ? 0
                                                                 : CUDNN_RNN_PADDED_IO_ENABLED));
        DNN(cudnnCreateRNNDataDescriptor(&xd));
        DNN(cudnnCreateRNNDataDescriptor(&yd));
        DNN(cudnnSetRNNDataDescriptor(xd, ty, layout, Tmax, B, I, sorted,
                                      half ? (void *)&fill16 : &fill));
        DNN(cudnnSetRNNDataDescriptor(yd, ty, layout, Tmax, B, D * P, sorted,
                                      half ? (void *)&fill16 : &fill));
        DNN(cudnnCreateTensorDescriptor(&hd));
        DNN(cudnnCreateTensorDescriptor(&cd));
        {
                int hdim[3] = {LD, B, P}, hs[3] = {B * P, P, 1}, cdim[3] = {LD, B, H},
                    cs[3] = {B * H, H, 1};

                DNN(cudnnSetTensorNdDescriptor(hd, ty, 3, hdim, hs));
                DNN(cudnnSetTensorNdDescriptor(cd, ty, 3, cdim, cs));
        }

        DNN(cudnnGetRNNWeightSpaceSize(h, rnn, &wsize));
        CUDA(cudaMalloc(&w, wsize));
        place_weights(h, rnn, dir, cfg, wsize, w, half);
        DNN(cudnnGetRNNTempSpaceSizes(h, rnn, CUDNN_FWD_MODE_INFERENCE, xd, &work_size, &reserve));
        ck_assert_uint_eq(reserve, 0);
        CUDA(cudaMalloc(&work, work_size));

        /* x and the states in cuDNN's layouts. */
        for (int b = 0; b < B; b++)
                rows += (size_t)lens[b];
        if (layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                rows = (size_t)B * T;
        tmp = calloc(rows * (size_t)(I > D * P ? I : D * P) + (size_t)LD * B * H + 1,
                     sizeof(float));
        for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) {
                        if (t >= lens[b] && layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                                continue;
                        memcpy(tmp + row(layout, t, b, B, T, sorted, rank) * I,
                               hostx + ((size_t)b * T + t) * I, sizeof(float) * I);
                }
        CUDA(cudaMalloc(&x, rows * I * es));
        put(x, tmp, rows * I, half);
        CUDA(cudaMalloc(&y, rows * D * P * es));
        CUDA(cudaMalloc(&hy, (size_t)LD * B * P * es));
        if (g.h0 != NULL) {
                for (int b = 0; b < B; b++)
                        for (int s = 0; s < LD; s++)
                                memcpy(tmp + ((size_t)s * B + rank[b]) * P,
                                       g.h0 + ((size_t)b * LD + s) * P, sizeof(float) * P);
                CUDA(cudaMalloc(&hx, (size_t)LD * B * P * es));
                put(hx, tmp, (size_t)LD * B * P, half);
        }
        if (cfg->cell == RNND_CELL_LSTM) {
                CUDA(cudaMalloc(&cy, (size_t)LD * B * H * es));
                if (g.c0 != NULL) {
                        for (int b = 0; b < B; b++)
                                for (int s = 0; s < LD; s++)
                                        memcpy(tmp + ((size_t)s * B + rank[b]) * H,
                                               g.c0 + ((size_t)b * LD + s) * H, sizeof(float) * H);
                        CUDA(cudaMalloc(&cx, (size_t)LD * B * H * es));
                        put(cx, tmp, (size_t)LD * B * H, half);
                }
        }
        if (dev_lengths) {
                CUDA(cudaMalloc(&dlen, sizeof(int) * B));
                CUDA(cudaMemcpy(dlen, sorted, sizeof(int) * B, cudaMemcpyHostToDevice));
        }

        DNN(cudnnRNNForward(h, rnn, CUDNN_FWD_MODE_INFERENCE, dlen, xd, x, yd, y, hd, hx, hy, cd,
                            cx, cy, wsize, w, work_size, work, 0, NULL));
        CUDA(cudaStreamSynchronize(st));

        /* Back to the golden's batch-first layout. */
        clear_outputs(&g);
        get(tmp, y, rows * D * P, half);
        for (int b = 0; b < B; b++)
                for (int t = 0; t < lens[b]; t++)
                        memcpy(g.got[0] + ((size_t)b * T + t) * D * P,
                               tmp + row(layout, t, b, B, T, sorted, rank) * D * P,
                               sizeof(float) * D * P);
        if (layout != CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
                for (int b = 0; b < B; b++)
                        for (int t = lens[b]; t < T; t++)
                                for (int k = 0; k < D * P; k++)
                                        ck_assert_msg(
                                                tmp[row(layout, t, b, B, T, sorted, rank) * D * P +
                                                    k] == 0.0f,
                                                "%s %s: padding of sequence %d step %d is "
                                                "not paddingFill",
                                                name, how, b, t);
        get(tmp, hy, (size_t)LD * B * P, half);
        for (int b = 0; b < B; b++)
                for (int s = 0; s < LD; s++)
                        memcpy(g.got[1] + ((size_t)b * LD + s) * P,
                               tmp + ((size_t)s * B + rank[b]) * P, sizeof(float) * P);
        if (cy != NULL) {
                get(tmp, cy, (size_t)LD * B * H, half);
                for (int b = 0; b < B; b++)
                        for (int s = 0; s < LD; s++)
                                memcpy(g.got[2] + ((size_t)b * LD + s) * H,
                                       tmp + ((size_t)s * B + rank[b]) * H, sizeof(float) * H);
        }
        if (g.want[3] != NULL) { /* the head is rnnd's, not cuDNN's */
                free(g.want[3]);
                g.want[3] = NULL;
        }
        compare(&g, name, how, half ? TOL_FP16 : TOL_FP32, half);

        CUDA(cudaFree(w));
        CUDA(cudaFree(work));
        CUDA(cudaFree(x));
        CUDA(cudaFree(y));
        CUDA(cudaFree(hy));
        CUDA(cudaFree(hx));
        CUDA(cudaFree(cx));
        CUDA(cudaFree(cy));
        CUDA(cudaFree(dlen));
        DNN(cudnnDestroyTensorDescriptor(hd));
        DNN(cudnnDestroyTensorDescriptor(cd));
        DNN(cudnnDestroyRNNDataDescriptor(xd));
        DNN(cudnnDestroyRNNDataDescriptor(yd));
        DNN(cudnnDestroyRNNDescriptor(rnn));
        DNN(cudnnDestroy(h));
        CUDA(cudaStreamDestroy(st));
        free(tmp);
        free(hostx);
        golden_done(&g);
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
        ck_assert_msg(n_run + 3 >= n_cases, "only %u of %u goldens ran", n_run, n_cases);
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

int main(void)
{
        SRunner *sr;
        int n = 0, failed;

        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
                printf("SKIP: no CUDA device\n");
                return 77;
        }
        sr = srunner_create(cudasim_golden_suite());
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
