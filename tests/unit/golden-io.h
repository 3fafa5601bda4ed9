/*
 * golden-io.h: a golden case of tests/golden/models for suites that run a
 * backend on it: the case list, the model, io.safetensors' inputs and the
 * framework's outputs, a batch over them, and the comparison.  Shared by the
 * CPU golden suite and the GPU suite.
 */
#ifndef RNND_TESTS_GOLDEN_IO_H
#define RNND_TESTS_GOLDEN_IO_H

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "check-main.h"
#include "repository.h"
#include "stfile.h"

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

static void golden_load(struct golden *g, const char *name, rnnd_precision_t precision)
{
        char dir[4096], path[4200];
        struct rnnd_model_config cfg;
        const struct rnnd_st_tensor *t;
        rnnd_error_t err = {0};
        uint64_t shape[2];

        memset(g, 0, sizeof(*g));
        snprintf(dir, sizeof(dir), "%s/golden/models/%s", rnnd_test_dir(), name);
        ck_assert_msg(rnnd_repository_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
        cfg.precision = precision;
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
        ck_assert_msg((g->want[2] != NULL) == rnnd_modelcfg_has_lstm(&cfg),
                      "c_n iff an LSTM block");
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
        size_t h_floats, c_floats; /* a sequence's state: every block's (modelcfg.h) */

        rnnd_modelcfg_state_size(cfg, &h_floats, &c_floats);
        memset(q, 0, sizeof(*q));
        q->len = (uint32_t)g->lengths[b];
        if (g->tokens != NULL)
                q->tokens = g->tokens + b * g->T;
        if (g->x != NULL)
                q->x = g->x + b * g->T * cfg->input_size;
        if (g->h0 != NULL)
                q->h0 = g->h0 + b * h_floats;
        if (g->c0 != NULL)
                q->c0 = g->c0 + b * c_floats;
        q->y = g->got[0] + b * g->per_seq[0];
        q->h_n = g->got[1] + b * g->per_seq[1];
        q->c_n = g->got[2] != NULL ? g->got[2] + b * g->per_seq[2] : NULL;
        q->scores = g->got[3] != NULL ? g->got[3] + b * g->per_seq[3] : NULL;
}

/*
 * Fails unless every output is within tol of the golden: max abs error, or
 * with rel, max abs error over the output's largest magnitude (at least 1).
 * Returns the largest error over the outputs.
 */
static double compare(const struct golden *g, const char *name, const char *how, double tol,
                      bool rel)
{
        double most = 0;

        for (int k = 0; k < 4; k++) {
                double worst = 0;
                uint64_t at = 0;

                if (g->want[k] == NULL)
                        continue;
                double scale = 1.0;

                for (uint64_t i = 0; rel && i < g->B * g->per_seq[k]; i++)
                        scale = fmax(scale, fabs((double)g->want[k][i]));
                for (uint64_t i = 0; i < g->B * g->per_seq[k]; i++) {
                        double e = fabs((double)g->got[k][i] - (double)g->want[k][i]) / scale;

                        ck_assert_msg(!isnan(g->got[k][i]), "%s %s: %s[%llu] is NaN", name, how,
                                      out_names[k], (unsigned long long)i);
                        if (e > worst) {
                                worst = e;
                                at = i;
                        }
                }
                ck_assert_msg(worst <= tol,
                              "%s %s: %s max %s error %.3g at %llu (got %.9g, want %.9g)", name,
                              how, out_names[k], rel ? "rel" : "abs", worst, (unsigned long long)at,
                              (double)g->got[k][at], (double)g->want[k][at]);
                most = fmax(most, worst);
        }
        return most;
}

static void clear_outputs(struct golden *g)
{
        for (int k = 0; k < 4; k++)
                if (g->got[k] != NULL)
                        memset(g->got[k], 0, g->B * g->per_seq[k] * sizeof(float));
}

#endif
