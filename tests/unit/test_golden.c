/*
 * test_golden.c: the CPU engine against goldens from PyTorch and NumPy
 * (tests/golden/).  Each case directory is a model repository entry plus
 * io.safetensors with inputs and the framework's outputs; the engine must
 * agree within 1e-5 (max abs), run as one ragged batch and one sequence at a
 * time, and padding past each length must stay exactly 0.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "check-main.h"
#include "repository.h"
#include "stfile.h"

#define TOL       1e-5
#define MAX_CASES 256

static char cases[MAX_CASES][128];
static unsigned n_cases;

/* One case's inputs, expected outputs and the engine's outputs. */
struct golden {
        rnnd_model_t *m;
        rnnd_stfile_t *io;
        uint64_t B, T;
        int64_t *lengths, *tokens;
        float *x, *h0, *c0;
        float *want[4], *got[4]; /* output, h_n, c_n, scores */
        uint64_t per_seq[4];     /* floats per sequence of each output */
};

static const char *const out_names[4] = {"output", "h_n", "c_n", "scores"};

static int cmp_str(const void *a, const void *b)
{
        return strcmp(a, b);
}

static void find_cases(void)
{
        char path[4096];
        struct dirent *e;
        DIR *d;

        snprintf(path, sizeof(path), "%s/golden/models", rnnd_test_dir());
        d = opendir(path);
        if (d == NULL)
                return;
        while ((e = readdir(d)) != NULL && n_cases < MAX_CASES)
                if (e->d_name[0] != '.' && strlen(e->d_name) < sizeof(cases[0]))
                        memcpy(cases[n_cases++], e->d_name, strlen(e->d_name) + 1);
        closedir(d);
        qsort(cases, n_cases, sizeof(cases[0]), cmp_str);
}

/* Reads an optional tensor of io.safetensors as float32, or leaves *dst NULL. */
static void read_opt_f32(struct golden *g, const char *name, float **dst, uint64_t *numel)
{
        const struct rnnd_st_tensor *t = rnnd_stfile_find(g->io, name);
        rnnd_error_t err = {0};

        *dst = NULL;
        if (t == NULL)
                return;
        *dst = calloc(t->numel ? t->numel : 1, sizeof(float));
        ck_assert_int_eq(rnnd_stfile_read_f32(g->io, name, t->ndim, t->shape, *dst, &err), 0);
        if (numel != NULL)
                *numel = t->numel;
}

static void golden_load(struct golden *g, const char *name)
{
        char dir[4096], path[4200];
        struct rnnd_model_config cfg;
        const struct rnnd_st_tensor *t;
        rnnd_error_t err = {0};
        uint64_t shape[2];

        memset(g, 0, sizeof(*g));
        snprintf(dir, sizeof(dir), "%s/golden/models/%s", rnnd_test_dir(), name);
        ck_assert_msg(rnnd_repository_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
        ck_assert_msg(rnnd_model_load(dir, name, 1, &cfg, &g->m, &err) == 0, "%s", err.msg);
        snprintf(path, sizeof(path), "%s/io.safetensors", dir);
        ck_assert_msg(rnnd_stfile_open(path, &g->io, &err) == 0, "%s", err.msg);

        t = rnnd_stfile_find(g->io, "lengths");
        ck_assert_ptr_nonnull(t);
        g->B = t->shape[0];
        g->lengths = calloc(g->B, sizeof(int64_t));
        ck_assert_int_eq(rnnd_stfile_read_i64(g->io, "lengths", 1, t->shape, g->lengths, &err), 0);
        t = rnnd_stfile_find(g->io, "output");
        ck_assert_ptr_nonnull(t);
        g->T = t->shape[1];
        if (cfg.embedding.present) {
                shape[0] = g->B;
                shape[1] = g->T;
                g->tokens = calloc(g->B * g->T, sizeof(int64_t));
                ck_assert_msg(rnnd_stfile_read_i64(g->io, "tokens", 2, shape, g->tokens, &err) == 0,
                              "%s", err.msg);
        } else {
                read_opt_f32(g, "x", &g->x, NULL);
                ck_assert_ptr_nonnull(g->x);
        }
        read_opt_f32(g, "h0", &g->h0, NULL);
        read_opt_f32(g, "c0", &g->c0, NULL);
        for (int k = 0; k < 4; k++) {
                uint64_t numel = 0;

                read_opt_f32(g, out_names[k], &g->want[k], &numel);
                g->per_seq[k] = numel / g->B;
                if (g->want[k] != NULL)
                        g->got[k] = calloc(numel ? numel : 1, sizeof(float));
        }
        ck_assert_msg((g->want[2] != NULL) == (cfg.cell == RNND_CELL_LSTM), "c_n iff LSTM");
        ck_assert_msg((g->want[3] != NULL) == cfg.head.present, "scores iff head");
}

static void golden_done(struct golden *g)
{
        rnnd_model_unref(g->m);
        rnnd_stfile_close(g->io);
        free(g->lengths);
        free(g->tokens);
        free(g->x);
        free(g->h0);
        free(g->c0);
        for (int k = 0; k < 4; k++) {
                free(g->want[k]);
                free(g->got[k]);
        }
}

/* Fills seq for sequence b of the golden, pointing at its slices. */
static void seq_init(const struct golden *g, uint64_t b, struct rnnd_seq *q)
{
        const struct rnnd_model_config *cfg = &g->m->cfg;
        const uint64_t states = (uint64_t)cfg->num_layers * g->m->dirs;

        memset(q, 0, sizeof(*q));
        q->len = (uint32_t)g->lengths[b];
        if (g->tokens != NULL)
                q->tokens = g->tokens + b * g->T;
        if (g->x != NULL)
                q->x = g->x + b * g->T * cfg->input_size;
        if (g->h0 != NULL)
                q->h0 = g->h0 + b * states * g->m->out_size;
        if (g->c0 != NULL)
                q->c0 = g->c0 + b * states * cfg->hidden_size;
        q->y = g->got[0] + b * g->per_seq[0];
        q->h_n = g->got[1] + b * g->per_seq[1];
        q->c_n = g->got[2] != NULL ? g->got[2] + b * g->per_seq[2] : NULL;
        q->scores = g->got[3] != NULL ? g->got[3] + b * g->per_seq[3] : NULL;
}

static void compare(const struct golden *g, const char *name, const char *how)
{
        for (int k = 0; k < 4; k++) {
                double worst = 0;
                uint64_t at = 0;

                if (g->want[k] == NULL)
                        continue;
                for (uint64_t i = 0; i < g->B * g->per_seq[k]; i++) {
                        double e = fabs((double)g->got[k][i] - (double)g->want[k][i]);

                        ck_assert_msg(!isnan(g->got[k][i]), "%s %s: %s[%llu] is NaN", name, how,
                                      out_names[k], (unsigned long long)i);
                        if (e > worst) {
                                worst = e;
                                at = i;
                        }
                }
                ck_assert_msg(worst <= TOL,
                              "%s %s: %s max abs error %.3g at %llu (got %.9g, want %.9g)", name,
                              how, out_names[k], worst, (unsigned long long)at,
                              (double)g->got[k][at], (double)g->want[k][at]);
        }
}

static void clear_outputs(struct golden *g)
{
        for (int k = 0; k < 4; k++)
                if (g->got[k] != NULL)
                        memset(g->got[k], 0, g->B * g->per_seq[k] * sizeof(float));
}

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

        golden_load(&g, name);
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
                compare(&g, name, how);

                /* One sequence at a time, through the same plan. */
                clear_outputs(&g);
                for (uint64_t b = 0; b < g.B; b++) {
                        seq_init(&g, b, &seqs[0]);
                        batch.n = 1;
                        ck_assert_msg(rnnd_cpu_backend.run(plan, &batch, &err) == 0, "%s", err.msg);
                }
                snprintf(how, sizeof(how), "one at a time, %u thread(s)", threads);
                compare(&g, name, how);
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
