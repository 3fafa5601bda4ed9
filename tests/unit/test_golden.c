/*
 * test_golden.c: the CPU engine against goldens from PyTorch and NumPy
 * (tests/golden/).  Each case directory is a model repository entry plus
 * io.safetensors with inputs and the framework's outputs; the engine must
 * agree within 1e-5 (max abs), run as one ragged batch and one sequence at a
 * time, and padding past each length must stay exactly 0.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "check-main.h"
#include "golden-io.h"

#define TOL 1e-5

/*
 * Each case runs on a plan with one engine thread and on one with two: with
 * a hidden size of whole 16-unit panels (the h48 cases) the second slices
 * the recurrence across threads.
 */
START_TEST(test_case)
{
        const char *name = cases[_i];
        struct rnnd_seq seqs[64];
        struct rnnd_batch batch;
        struct golden g;
        rnnd_error_t err = {0};

        golden_load(&g, name, RNND_PREC_FP32);
        ck_assert_uint_le(g.B, RNND_ELEMENTSOF(seqs));
        for (unsigned threads = 1; threads <= 2; threads++) {
                struct rnnd_instance_opts opts = {-1, threads};
                struct rnnd_backend_desc desc;
                char how[64];
                void *plan = NULL;

                ck_assert_msg(rnnd_cpu_backend.open(g.m, &opts, &plan, &err) == 0, "%s", err.msg);
                rnnd_cpu_backend.describe(plan, &desc);
                if (threads == 2 && strstr(name, "_h48_") != NULL)
                        ck_assert_msg(strcmp(desc.device, "cpu (2 threads)") == 0,
                                      "%s: not sliced: %s", name, desc.device);

                /* The whole ragged batch at once. */
                clear_outputs(&g);
                for (uint64_t b = 0; b < g.B; b++)
                        seq_init(&g, b, &seqs[b]);
                batch.seqs = seqs;
                batch.n = (uint32_t)g.B;
                ck_assert_msg(rnnd_cpu_backend.run(plan, &batch, &err) == 0, "%s: %s", name,
                              err.msg);
                snprintf(how, sizeof(how), "as one batch, %u thread(s)", threads);
                compare(&g, name, how, TOL, false);

                /* One sequence at a time, through the same plan. */
                clear_outputs(&g);
                for (uint64_t b = 0; b < g.B; b++) {
                        seq_init(&g, b, &seqs[0]);
                        batch.n = 1;
                        ck_assert_msg(rnnd_cpu_backend.run(plan, &batch, &err) == 0, "%s", err.msg);
                }
                snprintf(how, sizeof(how), "one at a time, %u thread(s)", threads);
                compare(&g, name, how, TOL, false);
                rnnd_cpu_backend.close(plan);
        }
        golden_done(&g);
}
END_TEST

/* The goldens are there, and cover what the issue asks for. */
START_TEST(test_coverage)
{
        static const char *const must[] = {
                "lstm_l1_uni_equal_noh0",     "lstm_l3_bi_ragged_h0",     "gru_l3_bi_ragged_h0",
                "rnn_tanh_l1_bi_ragged_noh0", "rnn_relu_l3_uni_equal_h0",
        };
        unsigned proj = 0, emb = 0, head = 0, reset_before = 0, wide = 0;

        ck_assert_uint_ge(n_cases, 64 + 3 + 3 + 3);
        for (unsigned i = 0; i < RNND_ELEMENTSOF(must); i++) {
                bool found = false;

                for (unsigned j = 0; j < n_cases; j++)
                        found = found || strcmp(cases[j], must[i]) == 0;
                ck_assert_msg(found, "golden case %s is missing", must[i]);
        }
        for (unsigned j = 0; j < n_cases; j++) {
                proj += strstr(cases[j], "proj") != NULL;
                emb += strstr(cases[j], "emb") != NULL;
                head += strstr(cases[j], "head") != NULL;
                reset_before += strstr(cases[j], "_rbr_") != NULL;
                wide += strstr(cases[j], "_h48_") != NULL;
        }
        ck_assert_uint_ge(proj, 3);
        ck_assert_uint_ge(emb, 2);
        ck_assert_uint_ge(head, 5);
        ck_assert_uint_ge(reset_before, 3);
        ck_assert_uint_ge(wide, 4);
}
END_TEST

static Suite *golden_suite(void)
{
        Suite *s = suite_create("golden");
        TCase *tc;

        find_cases();
        tc = tcase_create("coverage");
        tcase_add_test(tc, test_coverage);
        suite_add_tcase(s, tc);
        tc = tcase_create("cpu");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_case, 0, (int)n_cases);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(golden_suite)
