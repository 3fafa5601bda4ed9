/*
 * test_gpu_golden.c: the cuDNN backend against the goldens (DESIGN.md §4):
 * every golden case the backend qualifies for, as one ragged batch and one
 * sequence at a time, in fp32 (FMA math, max abs error <= 1e-5) and in fp16
 * (<= 2e-3 relative to the output's largest magnitude).  Prints a line per
 * case and precision (the algorithm the plan got, the errors) and the largest
 * error per cell, which a GPU run records (docs/GPU.md).  Skips (77) without
 * a GPU.
 */
#include "golden-io.h"
#include "gpu-main.h"

#define TOL_FP32 1e-5
#define TOL_FP16 2e-3

static unsigned n_run, n_refused;
/* The largest error against the golden per cell ([rnnd_cell_t]) and precision (fp16 1). */
static double worst[8][2];
static char worst_case[8][2][128];

static void note_worst(const struct golden *g, const char *name, bool half, double e)
{
        const unsigned c = (unsigned)g->m->cfg.cell & 7;

        if (e >= worst[c][half]) {
                worst[c][half] = e;
                snprintf(worst_case[c][half], sizeof(worst_case[c][half]), "%s", name);
        }
}

static void run_case(const char *name, rnnd_precision_t prec)
{
        struct rnnd_instance_opts opts = {.device = 0};
        struct rnnd_seq seqs[64];
        struct rnnd_batch batch = {seqs, 0};
        struct rnnd_backend_desc desc;
        struct golden g;
        rnnd_error_t err = {0};
        const bool half = prec == RNND_PREC_FP16;
        void *plan = NULL;
        char how[sizeof(desc.algo) + 64];
        double e_batch, e_one;

        golden_load(&g, name, prec);
        ck_assert_uint_le(g.B, 64);
        ck_assert_msg(rnnd_cudnn_backend.open(g.m, &opts, &plan, &err) == 0, "%s: %s", name,
                      err.msg);
        rnnd_cudnn_backend.describe(plan, &desc);
        ck_assert_str_eq(desc.backend, "cudnn");

        clear_outputs(&g);
        for (uint64_t b = 0; b < g.B; b++)
                seq_init(&g, b, &seqs[b]);
        batch.n = (uint32_t)g.B;
        ck_assert_msg(rnnd_cudnn_backend.run(plan, &batch, &err) == 0, "%s: %s", name, err.msg);
        snprintf(how, sizeof(how), "cudnn %s (%s), one batch", half ? "fp16" : "fp32", desc.algo);
        e_batch = compare(&g, name, how, half ? TOL_FP16 : TOL_FP32, half);
        note_worst(&g, name, half, e_batch);

        clear_outputs(&g);
        for (uint64_t b = 0; b < g.B; b++) {
                seq_init(&g, b, &seqs[0]);
                batch.n = 1;
                ck_assert_msg(rnnd_cudnn_backend.run(plan, &batch, &err) == 0, "%s", err.msg);
        }
        snprintf(how, sizeof(how), "cudnn %s (%s), one at a time", half ? "fp16" : "fp32",
                 desc.algo);
        e_one = compare(&g, name, how, half ? TOL_FP16 : TOL_FP32, half);
        note_worst(&g, name, half, e_one);
        printf("%s %s: %s, %s; error %.3g as one batch, %.3g one at a time\n", name,
               half ? "fp16" : "fp32", desc.algo, desc.math, e_batch, e_one);
        rnnd_cudnn_backend.close(plan);
        golden_done(&g);
}

START_TEST(test_case)
{
        char dir[4096], why[256];
        struct rnnd_model_config cfg;
        rnnd_error_t err = {0};

        snprintf(dir, sizeof(dir), "%s/golden/models/%s", rnnd_test_dir(), cases[_i]);
        ck_assert_msg(rnnd_repository_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
        if (!rnnd_cudnn_backend.qualifies(&cfg, why, sizeof(why))) {
                printf("%s: not on cuDNN: %s\n", cases[_i], why);
                /* Only a reset-before GRU, alone or as a chain's block, has no cuDNN form. */
                ck_assert_msg(strstr(why, "gru_linear_before_reset=false") != NULL, "%s: %s",
                              cases[_i], why);
                n_refused++;
                return;
        }
        run_case(cases[_i], RNND_PREC_FP32);
        run_case(cases[_i], RNND_PREC_FP16);
        n_run++;
}
END_TEST

/* Every golden but the reset-before GRUs ran (this TCase runs after the cases). */
START_TEST(test_coverage)
{
        for (int c = 0; c < 8; c++)
                for (int h = 0; h < 2; h++)
                        if (worst_case[c][h][0] != '\0')
                                printf("largest error against PyTorch: %s %s: %.3g (%s)\n",
                                       rnnd_cell_name((rnnd_cell_t)c), h ? "fp16 (rel)" : "fp32",
                                       worst[c][h], worst_case[c][h]);
        ck_assert_uint_ge(n_cases, 80);
        ck_assert_msg(n_run + n_refused == n_cases && n_refused <= 4,
                      "only %u of %u goldens ran on cuDNN (%u refused)", n_run, n_cases, n_refused);
}
END_TEST

static Suite *gpu_golden_suite(void)
{
        Suite *s = suite_create("gpu_golden");
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

RNND_GPU_CHECK_MAIN(gpu_golden_suite)
