/*
 * test_cpu.c: the CPU engine's own behaviour, beyond the goldens: accuracy
 * of its exp-based kernels, validation of a batch, outputs written only
 * within each length, scratch reuse across batch sizes, and allocation
 * failure.  Models come from the golden repository (tests/golden/models).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "backend.h"
#include "check-main.h"
#include "golden-model.h"
#include "tensor.h"
#include "cpu/cpu-int.h"
#include "repository.h"

static float frand(unsigned *s)
{
        *s = *s * 1103515245u + 12345u;
        return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

START_TEST(test_kernels)
{
        static float x[20001], y[20001];
        double worst_s = 0, worst_t = 0;

        for (int i = 0; i <= 20000; i++)
                x[i] = (float)(i - 10000) / 500.0f; /* -20 .. 20 */
        rnnd__cpu_sigmoid(20001, x, y);
        for (int i = 0; i <= 20000; i++) {
                double e = fabs(y[i] - 1.0 / (1.0 + exp(-(double)x[i])));
                worst_s = e > worst_s ? e : worst_s;
        }
        rnnd__cpu_tanh(20001, x, y);
        for (int i = 0; i <= 20000; i++) {
                double e = fabs(y[i] - tanh((double)x[i]));
                worst_t = e > worst_t ? e : worst_t;
        }
        ck_assert_msg(worst_s < 3e-7, "sigmoid max abs error %g", worst_s);
        ck_assert_msg(worst_t < 3e-7, "tanh max abs error %g", worst_t);

        /* Saturation and extremes stay finite and exact. */
        x[0] = -1e30f;
        x[1] = 1e30f;
        x[2] = -0.0f;
        rnnd__cpu_tanh(3, x, y);
        ck_assert_float_eq(y[0], -1.0f);
        ck_assert_float_eq(y[1], 1.0f);
        ck_assert_float_eq(y[2], 0.0f);
        rnnd__cpu_sigmoid(2, x, y);
        ck_assert_float_lt(y[0], 1e-30f);
        ck_assert_float_eq(y[1], 1.0f);
}
END_TEST

START_TEST(test_softmax)
{
        float v[3] = {1000.0f, 1000.0f, -1000.0f};

        rnnd__cpu_activate(RNND_ACT_SOFTMAX, 3, v);
        ck_assert_float_eq_tol(v[0], 0.5f, 1e-7f);
        ck_assert_float_eq_tol(v[1], 0.5f, 1e-7f);
        ck_assert_float_eq(v[2], 0.0f);
}
END_TEST

/* Rows of bad batches: what is wrong, and what the message must say. */
static const struct {
        uint32_t len;
        int64_t token;
        bool no_input;
        const char *msg;
} bad[] = {
        {0, 1, false, "length 0 is outside 1..4096"},
        {4097, 1, false, "length 4097 is outside 1..4096"},
        {3, 11, false, "token 11 at step 0 is outside 0..10"},
        {3, -1, false, "token -1 at step 0 is outside 0..10"},
        {3, 1, true, "no tokens"},
};

START_TEST(test_validate)
{
        rnnd_model_t *m = rnnd_test_load_golden("rnn_tanh_emb_l1_bi_ragged_h0");
        static int64_t tokens[4097];
        struct rnnd_seq q = {0};
        struct rnnd_batch b = {&q, 1};
        rnnd_error_t err = {0};
        void *plan;
        float y[8 * 16];

        for (int i = 0; i < 4097; i++)
                tokens[i] = 2;
        tokens[0] = bad[_i].token;
        q.len = bad[_i].len;
        q.tokens = bad[_i].no_input ? NULL : tokens;
        q.y = bad[_i].len <= 8 ? y : NULL;
        ck_assert_int_eq(rnnd_cpu_backend.open(m, NULL, &plan, &err), 0);
        ck_assert_int_eq(rnnd_cpu_backend.run(plan, &b, &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, bad[_i].msg) != NULL, "message '%s'", err.msg);
        b.n = 0;
        ck_assert_int_eq(rnnd_cpu_backend.run(plan, &b, &err), RNND_EINVAL);
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/*
 * The engine writes y and scores only within each length, leaves other
 * memory alone, and gives every sequence the same answer whatever batch it
 * runs in and whatever ran before on the plan (scratch is reused).
 */
START_TEST(test_batches)
{
        rnnd_model_t *m = rnnd_test_load_golden(
                "gru_emb_l2_bi_ragged_noh0_head_softmax_all"); /* head apply all */
        const uint32_t ow = m->dirs * m->out_size, U = m->cfg.head.units, T = 40, N = 24;
        static int64_t tokens[24][40];
        static float y1[24][40 * 16 + 1], s1[24][40 * 8 + 1], hn1[24][64];
        static float y2[24][40 * 16 + 1], s2[24][40 * 8 + 1], hn2[24][64];
        struct rnnd_seq seqs[24];
        struct rnnd_batch b = {seqs, 0};
        rnnd_error_t err = {0};
        unsigned seed = 7;
        void *plan;

        ck_assert_uint_le(ow, 16);
        ck_assert_uint_le(U, 8);
        for (uint32_t i = 0; i < N; i++)
                for (uint32_t t = 0; t < T; t++)
                        tokens[i][t] = (int64_t)((frand(&seed) + 1.0f) * 5.0f) % 11;
        for (uint32_t i = 0; i < N; i++)
                for (uint32_t k = 0; k < RNND_ELEMENTSOF(y1[0]); k++)
                        y1[i][k] = y2[i][k] = NAN; /* sentinels */
        for (uint32_t i = 0; i < N; i++)
                for (uint32_t k = 0; k < RNND_ELEMENTSOF(s1[0]); k++)
                        s1[i][k] = s2[i][k] = NAN;
        ck_assert_int_eq(rnnd_cpu_backend.open(m, NULL, &plan, &err), 0);

        /* All together, with lengths 1..T in a scrambled order. */
        for (uint32_t i = 0; i < N; i++) {
                memset(&seqs[i], 0, sizeof(seqs[i]));
                seqs[i].len = 1 + (i * 7) % T;
                seqs[i].tokens = tokens[i];
                seqs[i].y = y1[i];
                seqs[i].scores = s1[i];
                seqs[i].h_n = hn1[i];
        }
        b.n = N;
        ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);

        /* Then in batches of 1, 5 and 18, on the same (now large) scratch. */
        for (uint32_t i = 0, size = 1; i < N; i += size, size = size == 1 ? 5 : 18) {
                b.n = i + size <= N ? size : N - i;
                for (uint32_t k = 0; k < b.n; k++) {
                        seqs[k] = (struct rnnd_seq){0};
                        seqs[k].len = 1 + ((i + k) * 7) % T;
                        seqs[k].tokens = tokens[i + k];
                        seqs[k].y = y2[i + k];
                        seqs[k].scores = s2[i + k];
                        seqs[k].h_n = hn2[i + k];
                }
                ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
        }
        for (uint32_t i = 0; i < N; i++) {
                uint32_t len = 1 + (i * 7) % T;

                for (uint32_t k = 0; k < RNND_ELEMENTSOF(y1[0]); k++) {
                        if (k < len * ow) {
                                ck_assert(!isnan(y1[i][k]));
                                ck_assert_float_eq_tol(y1[i][k], y2[i][k], 1e-6f);
                        } else {
                                ck_assert_msg(isnan(y1[i][k]) && isnan(y2[i][k]),
                                              "seq %u: y[%u] written past length %u", i, k, len);
                        }
                }
                for (uint32_t k = 0; k < RNND_ELEMENTSOF(s1[0]); k++)
                        ck_assert(k < len * U ? fabsf(s1[i][k] - s2[i][k]) < 1e-6f
                                              : isnan(s1[i][k]) && isnan(s2[i][k]));
                for (uint32_t k = 0; k < m->cfg.num_layers * ow; k++)
                        ck_assert_float_eq_tol(hn1[i][k], hn2[i][k], 1e-6f);
        }
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/*
 * Models of any size, which no golden has: a random model written as a
 * repository entry would be (config.json, 1/model.safetensors with
 * PyTorch's names under "rnn."), loaded and the directory removed.  spec is
 * "CELL H I LAYERS DIRS LBR [BIAS]" ("gru 48 5 2 2 0": a reset-before GRU of 48
 * units, input 5, 2 layers, bidirectional); weights in [-0.3, 0.3), biases too
 * unless BIAS is 0, which makes them zero.
 */
static void put_tensor(FILE *hdr, FILE *data, size_t *off, const char *name, uint32_t rows,
                       uint32_t cols, float scale, unsigned *seed)
{
        const size_t n = (size_t)rows * (cols ? cols : 1);

        if (cols)
                fprintf(hdr,
                        "%s\"rnn.%s\":{\"dtype\":\"F32\",\"shape\":[%u,%u],"
                        "\"data_offsets\":[%zu,%zu]}",
                        *off ? "," : "", name, rows, cols, *off, *off + n * 4);
        else
                fprintf(hdr,
                        "%s\"rnn.%s\":{\"dtype\":\"F32\",\"shape\":[%u],"
                        "\"data_offsets\":[%zu,%zu]}",
                        *off ? "," : "", name, rows, *off, *off + n * 4);
        {
                float *v = malloc(n * sizeof(float));

                ck_assert_ptr_nonnull(v);
                for (size_t i = 0; i < n; i++)
                        v[i] = scale * frand(seed);
                ck_assert_uint_eq(fwrite(v, 4, n, data), n);
                free(v);
        }
        *off += n * 4;
}

static rnnd_model_t *load_random(const char *spec)
{
        char cell[16], dir[] = "/tmp/rnnd-test-model-XXXXXX", path[4200], *hbuf = NULL,
                       *dbuf = NULL;
        unsigned H, I, L, D, lbr, bias = 1, seed = 3;
        size_t hlen = 0, dlen = 0, off = 0;
        struct rnnd_model_config cfg;
        rnnd_error_t err = {0};
        rnnd_model_t *m = NULL;
        FILE *f, *hdr = open_memstream(&hbuf, &hlen), *data = open_memstream(&dbuf, &dlen);

        ck_assert_int_ge(sscanf(spec, "%15s %u %u %u %u %u %u", cell, &H, &I, &L, &D, &lbr, &bias),
                         6);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/config.json", dir);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "{\"cell\": \"%s\", \"input_size\": %u, \"hidden_size\": %u, \"num_layers\": %u, "
                "\"bidirectional\": %s, %s\"weights\": {\"prefix\": \"rnn.\"}}\n",
                cell, I, H, L, D == 2 ? "true" : "false",
                lbr ? "" : "\"gru_linear_before_reset\": false, ");
        ck_assert_int_eq(fclose(f), 0);
        fputc('{', hdr);
        for (unsigned l = 0; l < L; l++)
                for (unsigned d = 0; d < D; d++) {
                        const uint32_t g = strcmp(cell, "lstm") == 0  ? 4
                                           : strcmp(cell, "gru") == 0 ? 3
                                                                      : 1;
                        char n[4][64];
                        const char *sfx = d ? "_reverse" : "";

                        snprintf(n[0], sizeof(n[0]), "weight_ih_l%u%s", l, sfx);
                        snprintf(n[1], sizeof(n[1]), "weight_hh_l%u%s", l, sfx);
                        snprintf(n[2], sizeof(n[2]), "bias_ih_l%u%s", l, sfx);
                        snprintf(n[3], sizeof(n[3]), "bias_hh_l%u%s", l, sfx);
                        put_tensor(hdr, data, &off, n[0], g * H, l ? D * H : I, 0.3f, &seed);
                        put_tensor(hdr, data, &off, n[1], g * H, H, 0.3f, &seed);
                        put_tensor(hdr, data, &off, n[2], g * H, 0, bias ? 0.3f : 0, &seed);
                        put_tensor(hdr, data, &off, n[3], g * H, 0, bias ? 0.3f : 0, &seed);
                }
        fputc('}', hdr);
        ck_assert_int_eq(fclose(hdr), 0);
        ck_assert_int_eq(fclose(data), 0);
        snprintf(path, sizeof(path), "%s/1", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof(path), "%s/1/model.safetensors", dir);
        f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        {
                uint64_t n = hlen;

                ck_assert_int_eq(fwrite(&n, 8, 1, f), 1);
                ck_assert_int_eq(fwrite(hbuf, 1, hlen, f), hlen);
                ck_assert_int_eq(fwrite(dbuf, 1, dlen, f), dlen);
        }
        ck_assert_int_eq(fclose(f), 0);
        free(hbuf);
        free(dbuf);
        ck_assert_msg(rnnd_repository_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
        ck_assert_msg(rnnd_model_load(dir, "random", 1, &cfg, &m, &err) == 0, "%s", err.msg);
        unlink(path);
        snprintf(path, sizeof(path), "%s/1", dir);
        rmdir(path);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        unlink(path);
        rmdir(dir);
        return m;
}

/*
 * A batch gives the same numbers on one engine thread as on two or three,
 * its initial states included, and nothing is written past a length.  With
 * 9 long ragged sequences (many input-projection chunks) the recurrence is
 * sliced by hidden unit, where the cell allows, and the threads meet per chunk
 * and per step; with 40 or 52 the batch is split by sequence, each thread
 * running its share alone, whatever the cell.
 */
static const struct {
        const char *model;
        unsigned threads;
        uint32_t n, T;
} agree_cases[] = {
        {"lstm_h48_l2_bi_ragged_h0", 2, 9, 300},
        {"gru_h48_l2_bi_ragged_h0", 2, 9, 300},
        {"lstm_h48_l2_bi_ragged_h0", 2, 52, 120},
        {"gru_h48_l2_bi_ragged_h0", 2, 52, 120},
        {"lstm_h48_l2_bi_ragged_h0", 3, 52, 120},
        {"gru_h48_l2_bi_ragged_h0", 3, 52, 120},
        /* Cells that cannot be sliced by hidden unit: split by sequence, or one thread. */
        {"lstm_proj_l3_bi_ragged_h0", 2, 40, 50},
        {"gru_rbr_l2_bi_ragged_noh0", 3, 52, 50},
        {"rnn_tanh_l3_bi_ragged_h0", 2, 40, 50},
        {"lstm_proj_l3_bi_ragged_h0", 2, 9, 50},
        /* Random models of sizes that take each mode (their threading texts below). */
        {"random:gru 48 5 2 2 0", 2, 9, 300},  /* reset-before, directions side by side */
        {"random:gru 64 8 2 1 0", 2, 20, 120}, /* reset-before, sliced: passes meet */
        {"random:gru 64 8 2 1 0", 3, 30, 120}, /* 3 threads, uneven slices of 4 panels */
        {"random:lstm 64 8 2 1 1", 2, 20, 120},
        {"random:rnn_tanh 128 8 1 1 1", 2, 20, 120},
        {"random:lstm 64 8 1 2 1", 3, 9, 120}, /* side by side, a third thread idle */
};

START_TEST(test_threads_agree)
{
        const char *const model = agree_cases[_i].model;
        rnnd_model_t *m = strncmp(model, "random:", 7) == 0 ? load_random(model + 7)
                                                            : rnnd_test_load_golden(model);
        const unsigned threads = agree_cases[_i].threads;
        const uint32_t N = agree_cases[_i].n, T = agree_cases[_i].T, I = m->cfg.input_size;
        const uint32_t ow = m->dirs * m->out_size;
        const size_t states = (size_t)m->cfg.num_layers * m->dirs * m->out_size;
        const size_t cells = (size_t)m->cfg.num_layers * m->dirs * m->cfg.hidden_size;
        const bool lstm = m->cfg.cell == RNND_CELL_LSTM;
        float *x = calloc((size_t)N * T * I, sizeof(float));
        float *h0 = calloc(N * states, sizeof(float)), *c0 = calloc(N * cells, sizeof(float));
        float *y[2], *hn[2], *cn[2];
        struct rnnd_seq seqs[52];
        struct rnnd_batch b = {seqs, N};
        rnnd_error_t err = {0};
        unsigned seed = 13;

        for (size_t k = 0; k < (size_t)N * T * I; k++)
                x[k] = frand(&seed);
        for (size_t k = 0; k < N * states; k++)
                h0[k] = frand(&seed) * 0.5f;
        for (size_t k = 0; k < N * cells; k++)
                c0[k] = frand(&seed) * 0.5f;
        for (unsigned t = 0; t < 2; t++) {
                struct rnnd_instance_opts o = {-1, t == 0 ? 1 : threads};
                struct rnnd_backend_desc d;
                char want[32];
                void *plan;

                y[t] = malloc((size_t)N * T * ow * sizeof(float));
                hn[t] = calloc(N * states, sizeof(float));
                cn[t] = calloc(N * cells, sizeof(float));
                for (size_t k = 0; k < (size_t)N * T * ow; k++)
                        y[t][k] = NAN;
                for (uint32_t i = 0; i < N; i++)
                        seqs[i] =
                                (struct rnnd_seq){.len = 1 + (i * 37) % T,
                                                  .x = x + (size_t)i * T * I,
                                                  .h0 = i % 3 != 0 ? h0 + i * states : NULL,
                                                  .c0 = lstm && i % 3 != 0 ? c0 + i * cells : NULL,
                                                  .y = y[t] + (size_t)i * T * ow,
                                                  .h_n = hn[t] + i * states,
                                                  .c_n = lstm ? cn[t] + i * cells : NULL};
                ck_assert_int_eq(rnnd_cpu_backend.open(m, &o, &plan, &err), 0);
                rnnd_cpu_backend.describe(plan, &d);
                snprintf(want, sizeof(want), "cpu (%u thread%s)", o.threads,
                         o.threads > 1 ? "s" : "");
                ck_assert_str_eq(d.device, want);
                ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
                /* Again on the grown scratch, in a smaller batch that is sliced, not split. */
                b.n = 5;
                ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
                b.n = N;
                rnnd_cpu_backend.close(plan);
        }
        for (uint32_t i = 0; i < N; i++)
                for (size_t k = 0; k < (size_t)T * ow; k++) {
                        float a = y[0][(size_t)i * T * ow + k], c = y[1][(size_t)i * T * ow + k];

                        if (k < (size_t)seqs[i].len * ow)
                                ck_assert_msg(fabsf(a - c) <= 1e-5f,
                                              "%s, %u threads: seq %u y[%zu] %g vs %g", model,
                                              threads, i, k, a, c);
                        else
                                ck_assert_msg(isnan(a) && isnan(c), "seq %u: y[%zu] past length", i,
                                              k);
                }
        for (size_t k = 0; k < N * states; k++)
                ck_assert_float_eq_tol(hn[0][k], hn[1][k], 1e-5f);
        for (size_t k = 0; lstm && k < N * cells; k++)
                ck_assert_float_eq_tol(cn[0][k], cn[1][k], 1e-5f);
        for (int t = 0; t < 2; t++) {
                free(y[t]);
                free(hn[t]);
                free(cn[t]);
        }
        free(x);
        free(h0);
        free(c0);
        rnnd_model_unref(m);
}
END_TEST

/*
 * The plan decides how each batch size uses its threads by the model, and
 * describe() says so: a second thread only where it pays (a small model at
 * batch 1 stays on one), a bidirectional model's directions side by side, a
 * step sliced by hidden unit once each thread's share of it is large enough
 * (ceil(131072 x slices / (gates x H x (H + input))) sequences), and large
 * batches split by sequence from 16 per thread.
 */
static const struct {
        const char *spec;
        unsigned threads;
        const char *want;
} threading_cases[] = {
        {"lstm 64 8 1 1 1", 1, "one thread"},
        {"lstm 16 8 1 1 1", 2, "batch 1-31: one thread; batch 32+: sequences split over 2 threads"},
        {"gru 64 8 2 1 0", 2,
         "batch 1-18: one thread; batch 19-31: hidden units sliced over 2 threads; batch 32+: "
         "sequences split over 2 threads"},
        {"gru 320 40 1 1 1", 2,
         "batch 1-31: hidden units sliced over 2 threads; batch 32+: sequences split over 2 "
         "threads"},
        {"lstm 64 8 1 2 1", 3,
         "batch 1-47: the two directions side by side; batch 48+: sequences split over 3 "
         "threads"},
};

START_TEST(test_threading)
{
        rnnd_model_t *m = load_random(threading_cases[_i].spec);
        struct rnnd_instance_opts o = {-1, threading_cases[_i].threads};
        struct rnnd_backend_desc d;
        rnnd_error_t err = {0};
        void *plan;

        ck_assert_int_eq(rnnd_cpu_backend.open(m, &o, &plan, &err), 0);
        rnnd_cpu_backend.describe(plan, &d);
        ck_assert_str_eq(d.threading, threading_cases[_i].want);
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/*
 * A chain's blocks decide their threads each: the text names each block
 * where they differ (an LSTM of 6 units, then a bidirectional GRU).
 */
START_TEST(test_chain_threading)
{
        rnnd_model_t *m = rnnd_test_load_golden("chain_lstm_grubi_equal_h0");
        struct rnnd_instance_opts o = {-1, 2};
        struct rnnd_backend_desc d;
        rnnd_error_t err = {0};
        void *plan;

        ck_assert_int_eq(rnnd_cpu_backend.open(m, &o, &plan, &err), 0);
        rnnd_cpu_backend.describe(plan, &d);
        ck_assert_str_eq(d.threading,
                         "blocks[0]: batch 1-31: one thread; batch 32+: sequences split over 2 "
                         "threads; blocks[1]: batch 1-31: the two directions side by side; batch "
                         "32+: sequences split over 2 threads");
        /* each block's kernel, whichever this CPU runs (test_describe) */
        ck_assert_msg(strstr(d.algo, ", ") != NULL && strstr(d.algo, "...") == NULL, "algo %s",
                      d.algo);
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/* A description that does not fit ends in "...", and nothing is added after. */
START_TEST(test_desc_append)
{
        char b[16] = "";

        rnnd_backend_desc_append(b, sizeof(b), ", ", "abc");
        rnnd_backend_desc_append(b, sizeof(b), ", ", "def");
        ck_assert_str_eq(b, "abc, def");
        rnnd_backend_desc_append(b, sizeof(b), ", ", "ghijkl");
        ck_assert_str_eq(b, "abc, def, gh...");
        rnnd_backend_desc_append(b, sizeof(b), ", ", "x");
        ck_assert_str_eq(b, "abc, def, gh...");
}
END_TEST

/*
 * A batch of one sequence reads its x in place and writes y in place (no
 * gather, no scatter): x is left as it was, however many layers ping-pong,
 * and y is what the same sequence gets in a batch of three.
 */
START_TEST(test_single)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_l3_bi_ragged_h0");
        const uint32_t T = 30, I = m->cfg.input_size, ow = m->dirs * m->out_size;
        static float x[3][30 * 16], x0[30 * 16], y1[30 * 16 + 1], y3[3][30 * 16 + 1];
        struct rnnd_seq seqs[3];
        struct rnnd_batch b = {seqs, 3};
        rnnd_error_t err = {0};
        unsigned seed = 21;
        void *plan;

        ck_assert_uint_le(I, 16);
        ck_assert_uint_le(ow, 16);
        for (uint32_t i = 0; i < 3; i++)
                for (uint32_t k = 0; k < T * I; k++)
                        x[i][k] = frand(&seed);
        memcpy(x0, x[0], sizeof(x0));
        for (uint32_t k = 0; k < RNND_ELEMENTSOF(y1); k++)
                y1[k] = NAN;
        ck_assert_int_eq(rnnd_cpu_backend.open(m, NULL, &plan, &err), 0);
        for (uint32_t i = 0; i < 3; i++)
                seqs[i] = (struct rnnd_seq){.len = T - 7 * i, .x = x[i], .y = y3[i]};
        ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
        seqs[0].y = y1;
        b.n = 1;
        ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(memcmp(x0, x[0], sizeof(x0)), 0);
        for (uint32_t k = 0; k < T * ow; k++)
                ck_assert_float_eq_tol(y1[k], y3[0][k], 1e-6f);
        ck_assert(isnan(y1[T * ow]));
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/*
 * A sequence's y and h_n alone and beside one or two others are the same to
 * the bit: below FUSE_X_ROWS (cpu.c) a batch's rows sum in the lone row's
 * order, and their gate math is the same text (a client that sends the same
 * sequence twice gets the same answer whatever else the batcher put beside
 * it: tests/hostile/test_grpc.py compares them exactly).  The LSTM's batches
 * run gates.c's kernel and its lone row step.c's.
 */
static const char *const paired_models[] = {"lstm_l1_uni_equal_noh0", "gru_l1_uni_equal_noh0",
                                            "lstm_l1_bi_equal_noh0", "gru_l1_bi_equal_noh0"};

START_TEST(test_alone_and_paired)
{
        rnnd_model_t *m = rnnd_test_load_golden(paired_models[_i]);
        const uint32_t T = 6, I = m->cfg.input_size, ow = m->dirs * m->out_size;
        static float x[3][6 * 16], y[2][3][6 * 16], h[2][3][64];
        struct rnnd_seq seqs[3];
        struct rnnd_batch b = {seqs, 1};
        rnnd_error_t err = {0};
        unsigned seed = 5;
        void *plan;

        ck_assert_uint_le(I, 16);
        ck_assert_uint_le(ow, 16);
        ck_assert_uint_le(m->cfg.num_layers * ow, 64);
        for (uint32_t i = 0; i < 3; i++)
                for (uint32_t k = 0; k < T * I; k++)
                        x[i][k] = frand(&seed);
        ck_assert_int_eq(rnnd_cpu_backend.open(m, NULL, &plan, &err), 0);
        for (b.n = 1; b.n <= 3; b.n++) {
                for (uint32_t i = 0; i < b.n; i++)
                        seqs[i] = (struct rnnd_seq){
                                .len = T - i, .x = x[i], .y = y[b.n > 1][i], .h_n = h[b.n > 1][i]};
                ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
                ck_assert_msg(b.n == 1 || (memcmp(y[0][0], y[1][0], T * ow * sizeof(float)) == 0 &&
                                           memcmp(h[0][0], h[1][0], ow * sizeof(float)) == 0),
                              "%s: sequence 0 alone and in a batch of %u differ", paired_models[_i],
                              b.n);
        }
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/*
 * Denormal floats run as zeros (cpu-int.h: an x86 core takes a slow assist
 * for each, which a client could buy by the batch): a ReLU RNN without biases
 * on inputs of 1e-39 gives exactly 0 everywhere, where products of denormals
 * would give denormals, on one thread and on the helpers of a split batch;
 * and the caller's floating-point mode is its own again after the run.
 */
START_TEST(test_denormals)
{
        rnnd_model_t *m = load_random("rnn_relu 32 8 2 1 1 0");
        const uint32_t N = 40, T = 6, I = 8, H = 32;
        static float x[40 * 6 * 8], y[40 * 6 * 32];
        struct rnnd_seq seqs[40];
        struct rnnd_batch b = {seqs, N};
        struct rnnd_instance_opts o = {-1, 1 + (unsigned)_i};
        rnnd_error_t err = {0};
        unsigned before;
        void *plan;

        for (size_t k = 0; k < RNND_ELEMENTSOF(x); k++)
                x[k] = k % 2 ? 1e-39f : -1e-39f;
        ck_assert(fpclassify(x[0]) == FP_SUBNORMAL);
        for (uint32_t i = 0; i < N; i++)
                seqs[i] = (struct rnnd_seq){.len = T, .x = x + i * T * I, .y = y + i * T * H};
        ck_assert_int_eq(rnnd_cpu_backend.open(m, &o, &plan, &err), 0);
        before = rnnd__cpu_fp_mode();
        ck_assert_msg(rnnd_cpu_backend.run(plan, &b, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(rnnd__cpu_fp_mode(), before);
        for (size_t k = 0; k < RNND_ELEMENTSOF(y); k++)
                ck_assert_msg(y[k] == 0.0f, "%u thread(s): y[%zu] = %g, not 0", o.threads, k,
                              (double)y[k]);
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/* Failing every allocation in turn gives ENOMEM, never a crash or a leak. */
START_TEST(test_oom)
{
        char dir[4096];
        struct rnnd_model_config cfg;
        rnnd_error_t err = {0};
        float x[5 * 30], y[30 * 12], hn[6 * 6];
        struct rnnd_seq q = {.len = 30, .x = x, .y = y, .h_n = hn};
        struct rnnd_batch b = {&q, 1};
        int r = -1;

        memset(x, 0, sizeof(x));
        snprintf(dir, sizeof(dir), "%s/golden/models/lstm_l3_bi_ragged_h0", rnnd_test_dir());
        ck_assert_int_eq(rnnd_repository_read_config(dir, &cfg, &err), 0);
        for (long n = 0; r != 0; n++) {
                rnnd_model_t *m = NULL;
                void *plan = NULL;

                ck_assert_int_lt(n, 10000);
                rnnd_alloc_fail_after(n);
                r = rnnd_model_load(dir, "m", 1, &cfg, &m, &err);
                if (r == 0) {
                        r = rnnd_cpu_backend.open(m, NULL, &plan, &err);
                        if (r == 0) {
                                r = rnnd_cpu_backend.run(plan, &b, &err);
                                rnnd_cpu_backend.close(plan);
                        }
                        rnnd_model_unref(m);
                }
                rnnd_alloc_fail_after(-1);
                ck_assert_msg(r == 0 || r == RNND_ENOMEM, "n=%ld: %d %s", n, r, err.msg);
        }
}
END_TEST

/*
 * The fused LSTM step against a double-precision step, for each panel width
 * this CPU can run (16 everywhere, as plain vectors where there is no
 * AVX-512; 8 with AVX2 and FMA), whichever the engine would pick here: the
 * goldens reach only that one.  Every row count up to 10 (blocks of 6, 4, 2
 * and a lone row; the four-row cell update of the AVX2 kernel), widths that
 * leave a partial panel, the input projection fused or given as xg, all
 * units at once or split at RNND_CPU_NR, and strides wider than the rows.
 */
static const uint32_t step_lus[] = {16, 8};

static double sig(double v)
{
        return 1.0 / (1.0 + exp(-v));
}

/* One step of M rows, H units, input width KX; returns the largest error. */
static void fill_rand(float *p, size_t n, float scale, unsigned *seed)
{
        for (size_t i = 0; i < n; i++)
                p[i] = scale * frand(seed);
}

/* Room for n floats of packed weights, aligned as the kernels assert (cpu-int.h). */
static float *packed_alloc(size_t n)
{
        return aligned_alloc(RNND_CPU_ALIGN, (n * sizeof(float) + RNND_CPU_ALIGN - 1) /
                                                     RNND_CPU_ALIGN * RNND_CPU_ALIGN);
}

static double check_step(uint32_t lu, bool fuse_x, uint32_t H, uint32_t KX, uint32_t M, bool split,
                         unsigned *seed)
{
        const uint32_t G = 4 * H, lda = H + 3, ldh = H + 1, ldy = 2 * H;
        float *Wi = malloc(sizeof(float) * G * KX), *Wh = malloc(sizeof(float) * G * H);
        float *bi = malloc(sizeof(float) * G), *bh = malloc(sizeof(float) * G);
        float *P = packed_alloc(rnnd__cpu_lstm_packed_size(lu, H, KX, H));
        float *X = malloc(sizeof(float) * M * KX), *xg = malloc(sizeof(float) * M * G);
        float *A = malloc(sizeof(float) * M * lda);
        float *c = malloc(sizeof(float) * M * H), *c0 = malloc(sizeof(float) * M * H);
        float *h = calloc((size_t)M * ldh, sizeof(float));
        float *y = calloc((size_t)M * ldy, sizeof(float));
        struct rnnd__cpu_step st = {.lu = lu,
                                    .M = M,
                                    .H = H,
                                    .KX = KX,
                                    .K = H,
                                    .P = P,
                                    .X = fuse_x ? X : NULL,
                                    .ldxin = KX,
                                    .xg = fuse_x ? NULL : xg,
                                    .ldx = G,
                                    .A = A,
                                    .lda = lda,
                                    .c = c,
                                    .h = h,
                                    .y = y,
                                    .ldh = ldh,
                                    .ldy = ldy};
        double worst = 0;

        fill_rand(Wi, G * KX, 0.5f, seed);
        fill_rand(Wh, G * H, 0.5f, seed);
        fill_rand(bi, G, 1.0f, seed);
        fill_rand(bh, G, 1.0f, seed);
        fill_rand(X, M * KX, 1.0f, seed);
        fill_rand(A, M * lda, 1.0f, seed);
        fill_rand(c, M * H, 2.0f, seed);
        memcpy(c0, c, sizeof(float) * M * H);
        for (uint32_t r = 0; r < M; r++)
                for (uint32_t j = 0; j < G; j++) {
                        float v = 0;

                        for (uint32_t k = 0; k < KX; k++)
                                v += Wi[j * KX + k] * X[r * KX + k];
                        xg[r * G + j] = v;
                }
        rnnd__cpu_lstm_pack(lu, H, KX, Wi, H, Wh, bi, bh, P);
        if (split && H > RNND_CPU_NR) {
                rnnd__cpu_lstm_step(&st, 0, RNND_CPU_NR);
                rnnd__cpu_lstm_step(&st, RNND_CPU_NR, H);
        } else {
                rnnd__cpu_lstm_step(&st, 0, H);
        }
        for (uint32_t r = 0; r < M; r++)
                for (uint32_t u = 0; u < H; u++) {
                        double g[4], cn, hn, e;

                        for (int q = 0; q < 4; q++) {
                                const uint32_t j = q * H + u;

                                g[q] = (double)bi[j] + bh[j];
                                for (uint32_t k = 0; k < KX; k++)
                                        g[q] += (double)Wi[j * KX + k] * X[r * KX + k];
                                for (uint32_t k = 0; k < H; k++)
                                        g[q] += (double)Wh[j * H + k] * A[r * lda + k];
                        }
                        cn = sig(g[1]) * c0[r * H + u] + sig(g[0]) * tanh(g[2]);
                        hn = sig(g[3]) * tanh(cn);
                        e = fmax(fabs(c[r * H + u] - cn), fabs(h[r * ldh + u] - hn));
                        ck_assert_msg(h[r * ldh + u] == y[r * ldy + u], "lu %u H %u M %u: y != h",
                                      lu, H, M);
                        ck_assert_msg(e < 2e-5,
                                      "lu %u H %u KX %u M %u fuse_x %d split %d row %u unit %u: "
                                      "error %g",
                                      lu, H, KX, M, fuse_x, split, r, u, e);
                        worst = fmax(worst, e);
                }
        /* Nothing written past the rows' widths. */
        for (uint32_t r = 0; r < M; r++) {
                for (uint32_t u = H; u < ldh; u++)
                        ck_assert_float_eq(h[r * ldh + u], 0.0f);
                for (uint32_t u = H; u < ldy; u++)
                        ck_assert_float_eq(y[r * ldy + u], 0.0f);
        }
        free(Wi);
        free(Wh);
        free(bi);
        free(bh);
        free(P);
        free(X);
        free(xg);
        free(A);
        free(c);
        free(c0);
        free(h);
        free(y);
        return worst;
}

START_TEST(test_lstm_step)
{
        static const uint32_t Hs[] = {5, 8, 13, 16, 24, 37, 64}, KXs[] = {3, 8};
        const uint32_t lu = step_lus[_i / 2];
        const bool fuse_x = _i % 2 == 0;
        unsigned seed = 7u + (unsigned)_i;
        double worst = 0;

#if defined(__x86_64__) && defined(__GNUC__)
        if (lu == 8 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
                return; /* the 8-unit kernel is built for AVX2 alone */
#else
        if (lu == 8)
                return;
#endif
        for (size_t hi = 0; hi < RNND_ELEMENTSOF(Hs); hi++)
                for (size_t ki = 0; ki < RNND_ELEMENTSOF(KXs); ki++)
                        for (uint32_t M = 1; M <= 10; M++)
                                for (int split = 0; split < 2; split++)
                                        worst = fmax(worst, check_step(lu, fuse_x, Hs[hi], KXs[ki],
                                                                       M, split, &seed));
        fprintf(stderr, "test_lstm_step: lu %u, fuse_x %d: worst error %.3g\n", lu, fuse_x, worst);
}
END_TEST

/*
 * The fused GRU and RNN steps against a double-precision step, as the LSTM's
 * above: every panel width this CPU can run (16 with AVX-512, 8 with AVX2 and
 * FMA; these kernels have no plain-vector form), every row count up to 14
 * (blocks of 6, 4, 2 and 1 rows, 8 and 9 as 4 + 4 (+ 1), a lone row over
 * groups of panels) and 203 (several groups of rows), x and h long enough
 * for several chunks of k, widths that leave a partial panel or a partial group,
 * the input projection fused or given as xg, all units at once or split at
 * RNND_CPU_NR, strides wider than the rows, and nothing written past them.
 * The GRU with the reset before R_n runs as its two passes, GRU_RZ over all
 * units and then GRU_N.
 */
enum step_cell { CELL_GRU, CELL_GRU_RBR, CELL_TANH, CELL_RELU };

static bool can_run_lu(uint32_t lu)
{
#if defined(__x86_64__) && defined(__GNUC__)
        if (lu == 16)
                return __builtin_cpu_supports("avx512f");
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
        return true;
#endif
}

/* Gate g's pre-activation parts of unit u: W_g x + b_ig (xi) and R_g hv + b_hg (hh). */
static void ref_gate(uint32_t H, uint32_t KX, const float *Wi, const float *Wh, const float *bi,
                     const float *bh, const float *x, const double *hv, uint32_t g, uint32_t u,
                     double *xi, double *hh)
{
        const uint32_t j = g * H + u;

        *xi = bi[j];
        *hh = bh[j];
        for (uint32_t k = 0; k < KX; k++)
                *xi += (double)Wi[j * KX + k] * x[k];
        for (uint32_t k = 0; k < H; k++)
                *hh += (double)Wh[j * H + k] * hv[k];
}

/* The new state of one row, in double precision: out[0..H). */
static void ref_row(enum step_cell cell, uint32_t H, uint32_t KX, const float *Wi, const float *Wh,
                    const float *bi, const float *bh, const float *x, const float *h, double *out)
{
        double *hv = malloc(sizeof(double) * H), *rh = malloc(sizeof(double) * H);

        for (uint32_t k = 0; k < H; k++)
                hv[k] = h[k];
        if (cell == CELL_GRU_RBR)
                for (uint32_t u = 0; u < H; u++) {
                        double xi, hh;

                        ref_gate(H, KX, Wi, Wh, bi, bh, x, hv, 0, u, &xi, &hh);
                        rh[u] = sig(xi + hh) * hv[u];
                }
        for (uint32_t u = 0; u < H; u++) {
                double xi, hh, r, z, n;

                if (cell == CELL_TANH || cell == CELL_RELU) {
                        ref_gate(H, KX, Wi, Wh, bi, bh, x, hv, 0, u, &xi, &hh);
                        out[u] = cell == CELL_TANH ? tanh(xi + hh) : fmax(xi + hh, 0.0);
                        continue;
                }
                ref_gate(H, KX, Wi, Wh, bi, bh, x, hv, 0, u, &xi, &hh);
                r = sig(xi + hh);
                ref_gate(H, KX, Wi, Wh, bi, bh, x, hv, 1, u, &xi, &hh);
                z = sig(xi + hh);
                ref_gate(H, KX, Wi, Wh, bi, bh, x, cell == CELL_GRU ? hv : rh, 2, u, &xi, &hh);
                n = cell == CELL_GRU ? tanh(xi + r * hh) : tanh(xi + hh);
                out[u] = (1.0 - z) * n + z * hv[u];
        }
        free(hv);
        free(rh);
}

/* The buffers of one step check. */
struct step_case {
        uint32_t G, H, KX, M, lda, ldh, ldy;
        float *Wi, *Wh, *bi, *bh, *X, *xg, *A, *h, *y, *rh, *z, *P, *P2;
};

static void step_case_init(struct step_case *c, enum step_cell cell, uint32_t H, uint32_t KX,
                           uint32_t M, unsigned *seed)
{
        /* weights of 0.5 at most, less where x and h are thousands wide (fp32 sums of them) */
        const float ws = KX + H > 256 ? 4.0f / sqrtf((float)(KX + H)) : 0.5f;

        c->G = cell == CELL_TANH || cell == CELL_RELU ? 1 : 3;
        c->H = H;
        c->KX = KX;
        c->M = M;
        c->lda = H + 3;
        c->ldh = H + 1;
        c->ldy = 2 * H;
        c->Wi = malloc(sizeof(float) * c->G * H * KX);
        c->Wh = malloc(sizeof(float) * c->G * H * H);
        c->bi = malloc(sizeof(float) * c->G * H);
        c->bh = malloc(sizeof(float) * c->G * H);
        c->X = malloc(sizeof(float) * M * KX);
        c->xg = malloc(sizeof(float) * M * c->G * H);
        c->A = malloc(sizeof(float) * M * c->lda);
        c->h = calloc((size_t)M * c->ldh, sizeof(float));
        c->y = calloc((size_t)M * c->ldy, sizeof(float));
        c->rh = calloc((size_t)M * H, sizeof(float));
        c->z = calloc((size_t)M * H, sizeof(float));
        for (uint32_t i = 0; i < c->G * H * KX; i++)
                c->Wi[i] = ws * frand(seed);
        for (uint32_t i = 0; i < c->G * H * H; i++)
                c->Wh[i] = ws * frand(seed);
        for (uint32_t i = 0; i < c->G * H; i++) {
                c->bi[i] = frand(seed);
                c->bh[i] = frand(seed);
        }
        for (uint32_t i = 0; i < M * KX; i++)
                c->X[i] = frand(seed);
        for (uint32_t i = 0; i < M * c->lda; i++)
                c->A[i] = frand(seed);
        for (uint32_t r = 0; r < M; r++)
                for (uint32_t j = 0; j < c->G * H; j++) {
                        float v = 0;

                        for (uint32_t k = 0; k < KX; k++)
                                v += c->Wi[j * KX + k] * c->X[r * KX + k];
                        c->xg[r * c->G * H + j] = v;
                }
}

static void step_case_done(struct step_case *c)
{
        float *all[] = {c->Wi, c->Wh, c->bi, c->bh, c->X, c->xg, c->A,
                        c->h,  c->y,  c->rh, c->z,  c->P, c->P2};

        for (size_t i = 0; i < RNND_ELEMENTSOF(all); i++)
                free(all[i]);
}

/* Runs pass s over [0, H), or [0, RNND_CPU_NR) and [RNND_CPU_NR, H) when split. */
static void run_pass(const struct rnnd__cpu_step *s, bool split)
{
        if (split && s->H > RNND_CPU_NR) {
                rnnd__cpu_step(s, 0, RNND_CPU_NR);
                rnnd__cpu_step(s, RNND_CPU_NR, s->H);
        } else {
                rnnd__cpu_step(s, 0, s->H);
        }
}

/* Packs and runs the fused step of cell on c (lu, fuse_x, split). */
static void run_fused(enum step_cell cell, uint32_t lu, bool fuse_x, bool split,
                      struct step_case *c)
{
        const uint32_t H = c->H, KX = c->KX, gh = c->G * H;
        const enum rnnd__cpu_kind kinds[] = {RNND_CPU_GRU, RNND_CPU_GRU_RZ, RNND_CPU_TANH,
                                             RNND_CPU_RELU};
        struct rnnd__cpu_step s = {.kind = kinds[cell],
                                   .lu = lu,
                                   .M = c->M,
                                   .H = H,
                                   .KX = KX,
                                   .K = H,
                                   .X = fuse_x ? c->X : NULL,
                                   .ldxin = KX,
                                   .xg = fuse_x ? NULL : c->xg,
                                   .ldx = gh,
                                   .A = c->A,
                                   .lda = c->lda,
                                   .hold = c->A,
                                   .ldo = c->lda,
                                   .z = c->z,
                                   .h = c->h,
                                   .y = c->y,
                                   .ldh = c->ldh,
                                   .ldy = c->ldy};

        c->P = packed_alloc(rnnd__cpu_step_packed_size(s.kind, lu, H, KX, H));
        rnnd__cpu_step_pack(s.kind, lu, H, KX, c->Wi, H, c->Wh, c->bi, c->bh, c->P);
        s.P = c->P;
        if (cell != CELL_GRU_RBR) {
                run_pass(&s, split);
                return;
        }
        /* Reset before: r*h and z over every unit, then n over r*h. */
        s.h = c->rh;
        s.ldh = H;
        s.y = NULL;
        run_pass(&s, split);
        c->P2 = packed_alloc(rnnd__cpu_step_packed_size(RNND_CPU_GRU_N, lu, H, KX, H));
        rnnd__cpu_step_pack(RNND_CPU_GRU_N, lu, H, KX, c->Wi + (size_t)2 * H * KX, H,
                            c->Wh + (size_t)2 * H * H, c->bi + 2 * H, c->bh + 2 * H, c->P2);
        s.kind = RNND_CPU_GRU_N;
        s.P = c->P2;
        s.xg = fuse_x ? NULL : c->xg + 2 * H;
        s.A = c->rh;
        s.lda = H;
        s.h = c->h;
        s.ldh = c->ldh;
        s.y = c->y;
        run_pass(&s, split);
}

/* One step of M rows, H units, input width KX; returns the largest error. */
static double check_cell_step(enum step_cell cell, uint32_t lu, bool fuse_x, uint32_t H,
                              uint32_t KX, uint32_t M, bool split, unsigned *seed)
{
        struct step_case c = {0};
        double *want = malloc(sizeof(double) * H), worst = 0;

        step_case_init(&c, cell, H, KX, M, seed);
        run_fused(cell, lu, fuse_x, split, &c);
        for (uint32_t r = 0; r < M; r++) {
                ref_row(cell, H, KX, c.Wi, c.Wh, c.bi, c.bh, c.X + r * KX, c.A + r * c.lda, want);
                for (uint32_t u = 0; u < H; u++) {
                        double e = fabs(c.h[r * c.ldh + u] - want[u]);

                        ck_assert_msg(c.h[r * c.ldh + u] == c.y[r * c.ldy + u],
                                      "cell %d lu %u H %u M %u: y != h", cell, lu, H, M);
                        ck_assert_msg(e < 2e-5,
                                      "cell %d lu %u H %u KX %u M %u fuse_x %d split %d row %u "
                                      "unit %u: error %g",
                                      cell, lu, H, KX, M, fuse_x, split, r, u, e);
                        worst = fmax(worst, e);
                }
                /* Nothing written past the rows' widths. */
                for (uint32_t u = H; u < c.ldh; u++)
                        ck_assert_float_eq(c.h[r * c.ldh + u], 0.0f);
                for (uint32_t u = H; u < c.ldy; u++)
                        ck_assert_float_eq(c.y[r * c.ldy + u], 0.0f);
        }
        free(want);
        step_case_done(&c);
        return worst;
}

/* A row count and the widths of one step check. */
struct cell_shape {
        uint32_t H, KX, M;
};

/* Loop case i (cell, panel width, fuse_x) over the shapes, each split and not. */
static void check_cell_shapes(int i, unsigned seed, const struct cell_shape *sh, size_t n,
                              const char *what)
{
        const enum step_cell cell = (enum step_cell)(i / 4);
        const uint32_t lu = step_lus[i / 2 % 2];
        const bool fuse_x = i % 2 == 0;
        double worst = 0;

        if (!can_run_lu(lu))
                return;
        for (size_t k = 0; k < n; k++)
                for (int split = 0; split < 2; split++)
                        worst = fmax(worst, check_cell_step(cell, lu, fuse_x, sh[k].H, sh[k].KX,
                                                            sh[k].M, split, &seed));
        fprintf(stderr, "%s: cell %d, lu %u, fuse_x %d: worst error %.3g\n", what, cell, lu, fuse_x,
                worst);
}

START_TEST(test_cell_step)
{
        static const uint32_t Hs[] = {5, 13, 16, 24, 37, 136}, KXs[] = {3, 8};
        struct cell_shape sh[6 * 2 * 14];
        size_t n = 0;

        for (size_t hi = 0; hi < RNND_ELEMENTSOF(Hs); hi++)
                for (size_t ki = 0; ki < RNND_ELEMENTSOF(KXs); ki++)
                        for (uint32_t M = 1; M <= (Hs[hi] > 64 ? 9 : 14); M++)
                                sh[n++] = (struct cell_shape){Hs[hi], KXs[ki], M};
        check_cell_shapes(_i, 11u + (unsigned)_i, sh, n, "test_cell_step");
}
END_TEST

/*
 * The same, on the shapes where the kernel's blocking changes: x (fused) or h
 * longer than the weights of k a block sums before it stores its partial sums
 * (256 KiB of a group of panels: 1,365 k of a GRU panel of 16 units, 1,024 of
 * an RNN's group of 4), so that both are summed in several chunks, the last
 * one short; and batches of 63 to 65 rows and 203 (several groups of rows),
 * with weights over 1 MiB, whose blocks prefetch their share of the next
 * group's (a hint: no answer depends on it).
 */
START_TEST(test_cell_step_long)
{
        static const struct cell_shape sh[] = {
                {136, 3000, 1},  {136, 3000, 9},  {136, 3000, 17}, {1400, 8, 9},
                {136, 1000, 63}, {136, 1000, 64}, {136, 1000, 65}, {136, 1000, 203},
        };

        check_cell_shapes(_i, 23u + (unsigned)_i, sh, RNND_ELEMENTSOF(sh), "test_cell_step_long");
}
END_TEST

/*
 * The input projection from a fused step's packed weights, for every kind
 * (the LSTM's packing included) and panel width the CPU runs: xg = X W_ih^T
 * of the kind's gates, no bias, against double precision (relative to the
 * terms' magnitude: x is up to 300 wide), for row counts
 * that take every block and x wide enough for several chunks of k; nothing
 * written past the gates' columns.
 */
static const enum rnnd__cpu_kind project_kinds[] = {RNND_CPU_LSTM, RNND_CPU_GRU, RNND_CPU_GRU_RZ,
                                                    RNND_CPU_GRU_N, RNND_CPU_TANH};

static double check_project(enum rnnd__cpu_kind kind, uint32_t lu, uint32_t H, uint32_t KX,
                            uint32_t M, unsigned *seed)
{
        const uint32_t G = kind == RNND_CPU_LSTM     ? 4
                           : kind == RNND_CPU_GRU    ? 3
                           : kind == RNND_CPU_GRU_RZ ? 2
                                                     : 1;
        const uint32_t ld = G * H + 5;
        float *Wi = malloc(sizeof(float) * G * H * KX), *Wh = calloc((size_t)G * H * H, 4);
        float *b = calloc((size_t)G * H, sizeof(float)), *X = malloc(sizeof(float) * M * KX);
        float *xg = malloc(sizeof(float) * M * ld);
        float *P = packed_alloc(kind == RNND_CPU_LSTM
                                        ? rnnd__cpu_lstm_packed_size(lu, H, KX, H)
                                        : rnnd__cpu_step_packed_size(kind, lu, H, KX, H));
        struct rnnd__cpu_step st = {.kind = kind,
                                    .lu = lu,
                                    .M = M,
                                    .H = H,
                                    .KX = KX,
                                    .K = H,
                                    .P = P,
                                    .X = X,
                                    .ldxin = KX,
                                    .xg = xg,
                                    .ldx = ld};
        double worst = 0;

        for (uint32_t i = 0; i < G * H * KX; i++)
                Wi[i] = 0.5f * frand(seed);
        for (uint32_t i = 0; i < G * H; i++) /* packed, and left out of xg */
                b[i] = frand(seed);
        for (uint32_t i = 0; i < M * KX; i++)
                X[i] = frand(seed);
        for (uint32_t i = 0; i < M * ld; i++)
                xg[i] = NAN;
        if (kind == RNND_CPU_LSTM)
                rnnd__cpu_lstm_pack(lu, H, KX, Wi, H, Wh, b, b, P);
        else
                rnnd__cpu_step_pack(kind, lu, H, KX, Wi, H, Wh, b, b, P);
        rnnd__cpu_project(&st);
        for (uint32_t r = 0; r < M; r++) {
                for (uint32_t j = 0; j < G * H; j++) {
                        double want = 0, mag = 0, e;

                        for (uint32_t k = 0; k < KX; k++) {
                                want += (double)Wi[j * KX + k] * X[r * KX + k];
                                mag += fabs((double)Wi[j * KX + k] * X[r * KX + k]);
                        }
                        /* fp32 sums of KX terms: within a few ulp of their magnitude */
                        e = fabs(xg[r * ld + j] - want) / (1.0 + mag);
                        ck_assert_msg(e < 1e-6, "kind %d lu %u H %u KX %u M %u row %u col %u: %g",
                                      kind, lu, H, KX, M, r, j, e);
                        worst = fmax(worst, e);
                }
                for (uint32_t j = G * H; j < ld; j++)
                        ck_assert_msg(isnan(xg[r * ld + j]), "written past the gates");
        }
        free(Wi);
        free(Wh);
        free(b);
        free(X);
        free(xg);
        free(P);
        return worst;
}

START_TEST(test_project)
{
        static const uint32_t Hs[] = {5, 37, 136}, KXs[] = {3, 300},
                              Ms[] = {1, 2, 5, 8, 9, 13, 203};
        const enum rnnd__cpu_kind kind = project_kinds[_i / 2];
        const uint32_t lu = step_lus[_i % 2];
        unsigned seed = 5u + (unsigned)_i;
        double worst = 0;

        if (!can_run_lu(lu))
                return;
        for (size_t hi = 0; hi < RNND_ELEMENTSOF(Hs); hi++)
                for (size_t ki = 0; ki < RNND_ELEMENTSOF(KXs); ki++)
                        for (size_t mi = 0; mi < RNND_ELEMENTSOF(Ms); mi++)
                                if (KXs[ki] < 100 || Ms[mi] < 100) /* bounded under ASan */
                                        worst = fmax(worst, check_project(kind, lu, Hs[hi], KXs[ki],
                                                                          Ms[mi], &seed));
        fprintf(stderr, "test_project: kind %d, lu %u: worst error %.3g\n", kind, lu, worst);
}
END_TEST

/*
 * describe() names the kernel that runs each cell's recurrence: the fused
 * step and the vector unit it uses where the CPU has one (an LSTM with a
 * projection always takes the packed GEMM), and why a GRU with the reset
 * before R_n is not on cuDNN.
 */
static const struct {
        const char *model;
        const char *fused; /* the cell's fused step, or NULL */
        bool rbr;
} describe_cases[] = {
        {"gru_rbr_l1_uni_ragged_h0", "gru", true},  {"lstm_h48_l2_bi_ragged_h0", "lstm", false},
        {"gru_h48_l2_bi_ragged_h0", "gru", false},  {"rnn_tanh_l3_bi_ragged_h0", "rnn", false},
        {"lstm_proj_l3_bi_ragged_h0", NULL, false},
};

START_TEST(test_describe)
{
        rnnd_model_t *m = rnnd_test_load_golden(describe_cases[_i].model);
        const char *unit = NULL;
        struct rnnd_backend_desc d;
        rnnd_error_t err = {0};
        char want[64] = "packed-gemm";
        void *plan;

#if defined(__x86_64__) && defined(__GNUC__)
        if (__builtin_cpu_supports("avx512f"))
                unit = "AVX-512";
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                unit = "AVX2";
#endif
        if (unit != NULL && describe_cases[_i].fused != NULL)
                snprintf(want, sizeof(want), "fused-%s-step (%s)", describe_cases[_i].fused, unit);
        ck_assert_int_eq(rnnd_cpu_backend.open(m, NULL, &plan, &err), 0);
        rnnd_cpu_backend.describe(plan, &d);
        ck_assert_str_eq(d.backend, "cpu");
        ck_assert_str_eq(d.algo, want);
        if (describe_cases[_i].rbr)
                ck_assert_ptr_nonnull(strstr(d.why_not_cudnn, "gru_linear_before_reset=false"));
        else
                ck_assert_str_eq(d.why_not_cudnn, "");
        rnnd_cpu_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

static Suite *cpu_suite(void)
{
        Suite *s = suite_create("cpu");
        TCase *tc;

        tc = tcase_create("kernels");
        tcase_add_test(tc, test_kernels);
        tcase_add_test(tc, test_softmax);
        suite_add_tcase(s, tc);
        tc = tcase_create("validate");
        tcase_add_loop_test(tc, test_validate, 0, RNND_ELEMENTSOF(bad));
        suite_add_tcase(s, tc);
        tc = tcase_create("batches");
        tcase_set_timeout(tc, 60); /* the kernels against double precision, under ASan too */
        tcase_add_test(tc, test_batches);
        tcase_add_test(tc, test_single);
        tcase_add_loop_test(tc, test_alone_and_paired, 0, RNND_ELEMENTSOF(paired_models));
        tcase_add_loop_test(tc, test_denormals, 0, 2);
        tcase_add_loop_test(tc, test_describe, 0, RNND_ELEMENTSOF(describe_cases));
        tcase_add_loop_test(tc, test_lstm_step, 0, 2 * RNND_ELEMENTSOF(step_lus));
        tcase_add_loop_test(tc, test_cell_step, 0, 4 * 2 * RNND_ELEMENTSOF(step_lus));
        tcase_add_loop_test(tc, test_cell_step_long, 0, 4 * 2 * RNND_ELEMENTSOF(step_lus));
        tcase_add_loop_test(tc, test_project, 0, 2 * RNND_ELEMENTSOF(project_kinds));
        tcase_add_loop_test(tc, test_threading, 0, RNND_ELEMENTSOF(threading_cases));
        tcase_add_test(tc, test_chain_threading);
        tcase_add_test(tc, test_desc_append);
        tcase_add_loop_test(tc, test_threads_agree, 0, RNND_ELEMENTSOF(agree_cases));
        suite_add_tcase(s, tc);
        tc = tcase_create("oom");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_oom);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(cpu_suite)
