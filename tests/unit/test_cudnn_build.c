/*
 * test_cudnn_build.c: the cuDNN backend as far as it goes without a GPU:
 * the library reports cuDNN 9; a batch's staging layout, its inputs staged
 * window by window, and the gather indexes the kernels follow (checked by
 * running the gathers on the host);
 * batch validation; and open() failing cleanly where no GPU is visible.
 * The GPU suite (tests/gpu/) runs the rest.
 */
#include <string.h>

#include "check-main.h"
#include "cudnn/cudnn-int.h"
#include "cudnn/cudnn.h"
#include "golden-model.h"

START_TEST(test_versions)
{
        struct rnnd_cudnn_info info;

        rnnd_cudnn_info(&info);
        ck_assert_int_ge(info.cudnn_version, 90000);
        ck_assert_int_lt(info.cudnn_version, 100000);
        ck_assert_int_ge(info.cudart_version, 11000);
        if (info.device_count == 0)
                ck_assert_str_ne(info.why_no_gpu, "");
        else
                ck_assert_str_ne(info.devices[0].name, "");
        /* Where there is no driver at all (this CI), the reason says so. */
        if (info.device_count == 0 && info.driver_version == 0)
                ck_assert_msg(strncmp(info.why_no_gpu, "no NVIDIA driver is installed", 29) == 0,
                              "why no GPU: %s", info.why_no_gpu);
}
END_TEST

/* What the gather kernel does, on the host: dst row r = src row idx[r], or zeros. */
static void host_gather(const float *src, const int32_t *idx, uint32_t rows, uint32_t width,
                        float *dst)
{
        for (uint32_t r = 0; r < rows; r++)
                for (uint32_t j = 0; j < width; j++)
                        dst[(size_t)r * width + j] =
                                idx[r] < 0 ? 0.0f : src[(size_t)idx[r] * width + j];
}

/* x[t][k] of sequence s: a value that names all three. */
static float mark(uint32_t s, uint32_t t, uint32_t k)
{
        return (float)(s * 10000 + t * 100 + k + 1);
}

START_TEST(test_stage_ragged)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_h48_l2_bi_ragged_h0"); /* in 5, H 48, LD 4 */
        const uint32_t in = m->cfg.input_size, H = m->cfg.hidden_size, LD = 4;
        static const uint32_t lens[3] = {3, 1, 2};
        struct rnnd_seq seqs[3];
        struct rnnd_batch b = {seqs, 3};
        struct rnnd__cudnn_layout o;
        float x[3][3 * 5], h0[LD * 48], xs[9 * 5], back[9 * 5];
        void *buf = calloc(rnnd__cudnn_in_size(m, 3, 3, true), 4);
        const int32_t *ib = buf;
        const float *fb = buf;

        ck_assert_uint_eq(in, 5);
        for (uint32_t i = 0; i < LD * H; i++)
                h0[i] = (float)i;
        memset(seqs, 0, sizeof(seqs));
        for (uint32_t s = 0; s < 3; s++) {
                for (uint32_t t = 0; t < lens[s]; t++)
                        for (uint32_t k = 0; k < in; k++)
                                x[s][t * in + k] = mark(s, t, k);
                seqs[s].len = lens[s];
                seqs[s].x = x[s];
        }
        seqs[1].h0 = h0;
        rnnd__cudnn_stage(m, &b, buf, &o);
        ck_assert_uint_eq(o.n, 3);
        ck_assert_uint_eq(o.T, 3);
        ck_assert_uint_eq(o.LD, LD);
        ck_assert(!o.equal);
        ck_assert(o.any_h0);
        ck_assert(!o.any_c0);
        ck_assert_uint_le(o.end, rnnd__cudnn_in_size(m, 3, 3, true));
        for (uint32_t s = 0; s < 3; s++)
                ck_assert_int_eq(ib[o.len + s], (int)lens[s]);
        ck_assert_uint_le(o.x, rnnd__cudnn_in_size(m, 3, 3, false));

        /* x goes in windows (7 floats: a window ends inside a sequence's row), to the same place.
         */
        for (size_t from = 0; from < o.end - o.x; from += 7) {
                float win[7];
                const size_t count = o.end - o.x - from < 7 ? o.end - o.x - from : 7;

                memcpy(win, fb + o.x + from, count * sizeof(float));
                rnnd__cudnn_stage_x(m, &b, &o, from, count, win);
                memcpy((float *)buf + o.x + from, win, count * sizeof(float));
        }

        /* x in cuDNN's [T, n, in]: step t of sequence s at row t * n + s, zeros past its length. */
        host_gather(fb + o.x, ib + o.idx_x, 9, in, xs);
        for (uint32_t t = 0; t < 3; t++)
                for (uint32_t s = 0; s < 3; s++)
                        for (uint32_t k = 0; k < in; k++)
                                ck_assert_float_eq(xs[(t * 3 + s) * in + k],
                                                   t < lens[s] ? mark(s, t, k) : 0.0f);

        /* y back to batch-major: the same values where valid, zeros after each length. */
        host_gather(xs, ib + o.idx_y, 9, in, back);
        for (uint32_t s = 0; s < 3; s++)
                for (uint32_t t = 0; t < 3; t++)
                        ck_assert_float_eq(back[(s * 3 + t) * in],
                                           t < lens[s] ? mark(s, t, 0) : 0.0f);

        /* h0: cuDNN's row ld * n + s is the caller's row s * LD + ld; absent h0 is zeros. */
        for (uint32_t ld = 0; ld < LD; ld++)
                for (uint32_t s = 0; s < 3; s++) {
                        int32_t src = ib[o.idx_hin + ld * 3 + s];

                        ck_assert_int_eq(src, (int)(s * LD + ld));
                        ck_assert_int_eq(ib[o.idx_hout + s * LD + ld], (int)(ld * 3 + s));
                        ck_assert_float_eq(fb[o.h0 + (size_t)src * H + 7],
                                           s == 1 ? h0[ld * H + 7] : 0.0f);
                }
        free(buf);
        rnnd_model_unref(m);
}
END_TEST

START_TEST(test_stage_tokens_equal)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_emb_l1_uni_ragged_noh0_head_tanh_last");
        int64_t tok[2][2] = {{3, 1}, {0, 2}};
        struct rnnd_seq seqs[2] = {{.len = 2, .tokens = tok[0]}, {.len = 2, .tokens = tok[1]}};
        struct rnnd_batch b = {seqs, 2};
        struct rnnd__cudnn_layout o;
        void *buf = calloc(rnnd__cudnn_in_size(m, 2, 2, true), 4);
        const int32_t *ib = buf;

        rnnd__cudnn_stage(m, &b, buf, &o);
        ck_assert(o.equal);
        ck_assert(!o.any_h0);
        /* With an embedding, the x index is the token: the gather reads the table. */
        ck_assert_int_eq(ib[o.idx_x + 0], 3); /* t 0, s 0 */
        ck_assert_int_eq(ib[o.idx_x + 1], 0); /* t 0, s 1 */
        ck_assert_int_eq(ib[o.idx_x + 2], 1); /* t 1, s 0 */
        ck_assert_int_eq(ib[o.idx_x + 3], 2); /* t 1, s 1 */
        free(buf);
        rnnd_model_unref(m);
}
END_TEST

START_TEST(test_check)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_emb_l1_uni_ragged_noh0_head_tanh_last");
        int64_t tok[3] = {0, 1, 99};
        struct rnnd_seq seqs[2] = {{.len = 2, .tokens = tok}, {.len = 3, .tokens = tok}};
        struct rnnd_batch b = {seqs, 2};
        rnnd_error_t err = {0};
        uint32_t T = 0;

        ck_assert_int_eq(rnnd__cudnn_check(m, &b, 8, 64, &T, &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "sequence 1: token 99 at step 2 is outside 0..10");
        seqs[1].len = 2;
        ck_assert_int_eq(rnnd__cudnn_check(m, &b, 8, 64, &T, &err), 0);
        ck_assert_uint_eq(T, 2);
        ck_assert_int_eq(rnnd__cudnn_check(m, &b, 1, 64, &T, &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "batch of 2 sequences > max 1");
        ck_assert_int_eq(rnnd__cudnn_check(m, &b, 8, 3, &T, &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "batch of 2 x 2 steps > max_batch_steps 3");
        seqs[0].len = 0;
        ck_assert_int_eq(rnnd__cudnn_check(m, &b, 8, 64, &T, &err), RNND_EINVAL);
        rnnd_model_unref(m);
}
END_TEST

START_TEST(test_open_without_gpu)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_l1_uni_equal_h0");
        struct rnnd_instance_opts opts = {.device = 0};
        struct rnnd_cudnn_info info;
        struct rnnd_backend_desc d;
        rnnd_error_t err = {0};
        void *plan = NULL;

        rnnd_cudnn_info(&info);
        if (info.device_count == 0) {
                ck_assert_int_lt(rnnd_cudnn_backend.open(m, &opts, &plan, &err), 0);
                ck_assert_ptr_null(plan);
                ck_assert_str_ne(err.msg, "");
        }
        rnnd_cudnn_backend.describe(NULL, &d);
        ck_assert_str_eq(d.backend, "cudnn");
        ck_assert_msg(strncmp(d.versions, "cuDNN 9.", 8) == 0, "%s", d.versions);
        rnnd_model_unref(m);
}
END_TEST

/* The weight check reads shapes, not element counts: a transposed matrix is refused. */
START_TEST(test_weight_shape)
{
        cudnnTensorDescriptor_t d;
        const int mat[3] = {1, 16, 8}, mstr[3] = {128, 8, 1};
        const int bias[3] = {1, 16, 1}, bstr[3] = {16, 1, 1};
        const int one[3] = {1, 1, 1}, ostr[3] = {1, 1, 1};
        const int row[3] = {1, 1, 35}, rstr[3] = {35, 35, 1};
        char got[64];

        ck_assert_int_eq(cudnnCreateTensorDescriptor(&d), CUDNN_STATUS_SUCCESS);
        ck_assert_int_eq(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 3, mat, mstr),
                         CUDNN_STATUS_SUCCESS);
        ck_assert(rnnd__cudnn_tensor_is(d, 16, 8, got, sizeof(got)));
        ck_assert_str_eq(got, "[1, 16, 8]");
        ck_assert(!rnnd__cudnn_tensor_is(d, 8, 16, got, sizeof(got))); /* same count */
        ck_assert(!rnnd__cudnn_tensor_is(d, 16, 16, got, sizeof(got)));
        ck_assert_int_eq(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 3, bias, bstr),
                         CUDNN_STATUS_SUCCESS);
        ck_assert(rnnd__cudnn_tensor_is(d, 16, 1, got, sizeof(got)));
        ck_assert(!rnnd__cudnn_tensor_is(d, 8, 1, got, sizeof(got)));
        /*
         * Hidden size 1 (a random model had it): the bias is {1, 1, 1}, a matrix {1, 1, 35}
         * (a vector: its orientation does not change where its elements lie).
         */
        ck_assert_int_eq(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 3, one, ostr),
                         CUDNN_STATUS_SUCCESS);
        ck_assert(rnnd__cudnn_tensor_is(d, 1, 1, got, sizeof(got)));
        ck_assert(!rnnd__cudnn_tensor_is(d, 2, 1, got, sizeof(got)));
        ck_assert_int_eq(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 3, row, rstr),
                         CUDNN_STATUS_SUCCESS);
        ck_assert(rnnd__cudnn_tensor_is(d, 1, 35, got, sizeof(got)));
        ck_assert(!rnnd__cudnn_tensor_is(d, 1, 34, got, sizeof(got)));
        cudnnDestroyTensorDescriptor(d);
}
END_TEST

/* Which configs the backend takes, and a refusal names the config field. */
START_TEST(test_qualifies)
{
        const struct rnnd_backend_ops *ops = &rnnd_cudnn_backend;
        struct rnnd_model_config c;
        char why[256];

        rnnd_modelcfg_defaults(&c);
        c.cell = RNND_CELL_LSTM;
        c.input_size = 8;
        c.hidden_size = 16;
        c.proj_size = 8; /* STANDARD runs it; no persistent algorithm is tried */
        ck_assert(ops->qualifies(&c, why, sizeof(why)));
        ck_assert_str_eq(why, "");

        c.max_sequence_length = 70000;
        ck_assert(!ops->qualifies(&c, why, sizeof(why)));
        ck_assert_str_eq(why, "max_sequence_length 70000 is above cuDNN's limit of 65535");
        c.max_sequence_length = 4096;

        /* 2^20 x 4096 rows are more than cuBLAS's int m can hold. */
        c.batching.max_batch_size = 1u << 20;
        c.batching.max_batch_steps = UINT64_MAX;
        ck_assert(!ops->qualifies(&c, why, sizeof(why)));
        ck_assert_str_eq(why, "batching.max_batch_steps: 4294967296 elements or rows would "
                              "truncate a 32-bit argument of cuDNN or cuBLAS (at most 2147483647)");
        c.batching.max_batch_steps = 1u << 20; /* the smaller of the two bounds counts */
        ck_assert(ops->qualifies(&c, why, sizeof(why)));

        /* A 65536 x 65536 matrix has 2^32 elements: one more than a uint32 count. */
        c.hidden_size = c.input_size = 65536;
        c.proj_size = 0;
        ck_assert(!ops->qualifies(&c, why, sizeof(why)));
        ck_assert_msg(strncmp(why, "input_size: 4294967296 elements", 31) == 0, "%s", why);

        c.hidden_size = c.input_size = 16;
        c.cell = RNND_CELL_GRU;
        c.gru_linear_before_reset = false;
        ck_assert(!ops->qualifies(&c, why, sizeof(why)));
        ck_assert_msg(strstr(why, "gru_linear_before_reset=false") != NULL, "%s", why);
}
END_TEST

static Suite *cudnn_build_suite(void)
{
        Suite *s = suite_create("cudnn_build");
        TCase *tc = tcase_create("versions");

        tcase_add_test(tc, test_versions);
        suite_add_tcase(s, tc);
        tc = tcase_create("layout");
        tcase_add_test(tc, test_stage_ragged);
        tcase_add_test(tc, test_stage_tokens_equal);
        tcase_add_test(tc, test_check);
        suite_add_tcase(s, tc);
        tc = tcase_create("open");
        tcase_add_test(tc, test_open_without_gpu);
        tcase_add_test(tc, test_qualifies);
        tcase_add_test(tc, test_weight_shape);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(cudnn_build_suite)
