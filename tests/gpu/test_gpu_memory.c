/*
 * test_gpu_memory.c: a plan allocates at open and never after: device memory
 * (cudaMemGetInfo) is the same before and after 10,000 batches of varying
 * sizes and lengths, and a plan's close gives back what its open took.
 * Also the faults: a failing cuDNN call is a request error (RNND_EGPU with
 * cuDNN's message) after which the plan still works; a sticky device error
 * makes run() return RNND_EDEVLOST from then on, for every plan of the
 * process, on any GPU.  Skips (77) without a GPU.
 */
#include <string.h>

#include "cudnn/cudnn-int.h"
#include "golden-model.h"
#include "gpu-main.h"
#include "random-model.h"

#define N_BATCHES 10000
/* Slack for the driver's own bookkeeping (allocation granularity is 2 MiB). */
/* Batches: 1..64 sequences of 1..32 steps. */
#define SLACK (4u << 20)

static size_t free_mem(void)
{
        size_t f = 0, t = 0;
        rnnd_error_t err = {0};

        ck_assert_msg(rnnd_cudnn_device_memory(0, &f, &t, &err) == 0, "%s", err.msg);
        return f;
}

START_TEST(test_stable)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_l3_bi_ragged_h0");
        struct rnnd_instance_opts opts = {0};
        rnnd_error_t err = {0};
        size_t before_open, before, after;
        void *plan = NULL;
        unsigned s = 99;

        before_open = free_mem();
        ck_assert_msg(rnnd_cudnn_backend.open(m, &opts, &plan, &err) == 0, "%s", err.msg);
        for (int i = 0; i < N_BATCHES + 100; i++) {
                struct rm_batch rb;
                uint32_t n = rm_int(&s, 1, 64), lens[64];

                for (uint32_t k = 0; k < n; k++)
                        lens[k] = rm_int(&s, 1, 32);

                if (i == 100)
                        before = free_mem(); /* after a warm-up that grew the workspace */
                rm_batch_init(&rb, m, n, lens, (unsigned)i);
                rm_batch_target(&rb, m, 0);
                ck_assert_msg(rnnd_cudnn_backend.run(plan, &rb.b, &err) == 0, "batch %d: %s", i,
                              err.msg);
                rm_batch_done(&rb);
        }
        after = free_mem();
        ck_assert_msg(after + SLACK >= before, "device memory fell by %zu bytes over %d batches",
                      before - after, N_BATCHES);
        rnnd_cudnn_backend.close(plan);
        after = free_mem();
        ck_assert_msg(after + SLACK >= before_open, "close left %zu bytes allocated",
                      before_open - after);
        rnnd_model_unref(m);
}
END_TEST

START_TEST(test_faults)
{
        rnnd_model_t *m = rnnd_test_load_golden("gru_l1_bi_ragged_h0");
        rnnd_model_t *m2 = rnnd_test_load_golden("lstm_l1_uni_equal_h0");
        struct rnnd_instance_opts opts = {0}, opts2 = {0};
        struct rnnd_cudnn_info info;
        rnnd_error_t err = {0};
        struct rm_batch rb, rb2;
        void *plan = NULL, *other = NULL;

        rnnd_cudnn_info(&info);
        opts2.device = info.device_count > 1 ? 1 : 0; /* another GPU where there is one */
        ck_assert_msg(rnnd_cudnn_backend.open(m, &opts, &plan, &err) == 0, "%s", err.msg);
        ck_assert_msg(rnnd_cudnn_backend.open(m2, &opts2, &other, &err) == 0, "%s", err.msg);
        rm_batch_init(&rb2, m2, 2, NULL, 6);
        rm_batch_target(&rb2, m2, 0);
        ck_assert_msg(rnnd_cudnn_backend.run(other, &rb2.b, &err) == 0, "%s", err.msg);
        rm_batch_init(&rb, m, 3, NULL, 5);
        rm_batch_target(&rb, m, 0);

        /* A bad parameter: this batch fails with cuDNN's message, the next one runs. */
        ck_assert_int_eq(rnnd__cudnn_inject_fault(plan, 1), 0);
        ck_assert_int_eq(rnnd_cudnn_backend.run(plan, &rb.b, &err), RNND_EGPU);
        ck_assert_msg(strstr(err.msg, "CUDNN_STATUS_") != NULL, "%s", err.msg);
        ck_assert_msg(rnnd_cudnn_backend.run(plan, &rb.b, &err) == 0, "%s", err.msg);

        /* A sticky fault (the last test of this process: the context is gone after it). */
        ck_assert_int_eq(rnnd__cudnn_inject_fault(plan, 0), 0);
        ck_assert_int_eq(rnnd_cudnn_backend.run(plan, &rb.b, &err), RNND_EDEVLOST);
        ck_assert_int_eq(rnnd_cudnn_backend.run(plan, &rb.b, &err), RNND_EDEVLOST);
        ck_assert_msg(strstr(err.msg, "out of service") != NULL, "%s", err.msg);
        /* Process-wide: the other model's plan, on another GPU, is out of service too. */
        ck_assert_int_eq(rnnd_cudnn_backend.run(other, &rb2.b, &err), RNND_EDEVLOST);
        ck_assert_msg(strstr(err.msg, "a device fault in this process") != NULL, "%s", err.msg);
        rm_batch_done(&rb);
        rm_batch_done(&rb2);
        rnnd_cudnn_backend.close(plan);
        rnnd_cudnn_backend.close(other);
        rnnd_model_unref(m);
        rnnd_model_unref(m2);
}
END_TEST

static Suite *gpu_memory_suite(void)
{
        Suite *s = suite_create("gpu_memory");
        TCase *tc = tcase_create("memory");

        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, test_stable);
        suite_add_tcase(s, tc);
        tc = tcase_create("faults");
        tcase_add_test(tc, test_faults);
        suite_add_tcase(s, tc);
        return s;
}

RNND_GPU_CHECK_MAIN(gpu_memory_suite)
