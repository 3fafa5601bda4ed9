/*
 * test_gpu_fixes.c: the cuDNN backend's review fixes (docs/GPU.md), each on
 * the stand-in or a GPU:
 *   - the plans of one model on one GPU share its weights and its algorithm
 *     choice: the second open takes less device memory than the first by at
 *     least the weights, and times nothing; both answer alike, and as the
 *     CPU engine does;
 *   - opens on one GPU never time algorithms at the same time, even from
 *     many threads and for different models;
 *   - on every visible GPU, a plan of its own (one timing per GPU), each
 *     agreeing with the CPU engine;
 *   - a plan's workspace is sized at open: batches of every size and length
 *     run with no allocation (device memory unchanged to the byte);
 *   - inputs staged through a small pinned window give the same answers.
 * Skips (77) without a GPU.
 */
#include <pthread.h>
#include <string.h>

#include "cudnn/cudnn-int.h"
#include "golden-model.h"
#include "gpu-main.h"
#include "random-model.h"
#include "rnnd-config.h"
#if RNND_CUDA_SIM
#include "cudasim.h"
#endif

#define TOL   1e-4
#define SLACK (4u << 20)

static size_t free_mem(int device)
{
        size_t f = 0, t = 0;
        rnnd_error_t err = {0};

        ck_assert_msg(rnnd_cudnn_device_memory(device, &f, &t, &err) == 0, "%s", err.msg);
        return f;
}

static void *open_on(rnnd_model_t *m, int device)
{
        struct rnnd_instance_opts opts = {.device = device};
        rnnd_error_t err = {0};
        void *plan = NULL;

        ck_assert_msg(rnnd_cudnn_backend.open(m, &opts, &plan, &err) == 0, "GPU %d: %s", device,
                      err.msg);
        return plan;
}

/* Runs rb on plan into output set k. */
static void run_into(rnnd_model_t *m, void *plan, const struct rnnd_backend_ops *ops,
                     struct rm_batch *rb, int k)
{
        rnnd_error_t err = {0};

        rm_batch_target(rb, m, k);
        ck_assert_msg(ops->run(plan, &rb->b, &err) == 0, "%s: %s", ops->name, err.msg);
}

/* A ragged batch of up to 8 sequences of 1..24 steps on gpu and on the CPU engine agree. */
static void agrees_with_cpu(rnnd_model_t *m, void *gpu, unsigned seed)
{
        struct rnnd_instance_opts cpu_opts = {.device = -1, .threads = 1};
        rnnd_error_t err = {0};
        struct rm_batch rb;
        void *cpu = NULL;
        double d;

        const uint32_t n = m->cfg.batching.max_batch_size < 8 ? m->cfg.batching.max_batch_size : 8;
        uint32_t lens[8];
        unsigned r = seed;

        for (uint32_t i = 0; i < n; i++) /* ragged, and short: the stand-in runs on the CPU */
                lens[i] = rm_int(&r, 1, 24);
        ck_assert_int_eq(rnnd_cpu_backend.open(m, &cpu_opts, &cpu, &err), 0);
        rm_batch_init(&rb, m, n, lens, seed);
        run_into(m, cpu, &rnnd_cpu_backend, &rb, 0);
        run_into(m, gpu, &rnnd_cudnn_backend, &rb, 1);
        d = rm_batch_diff(&rb);
        ck_assert_msg(d <= TOL, "seed %u: max diff %.3g against the CPU engine", seed, d);
        rm_batch_done(&rb);
        rnnd_cpu_backend.close(cpu);
}

START_TEST(test_shared_weights)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_l3_bi_ragged_h0");
        const size_t weights = m->wlen * sizeof(float);
        unsigned probes0, probes1, most;
        size_t f0, f1, f2;
        struct rm_batch rb;
        void *a, *b;

        rnnd__cudnn_probe_stats(&probes0, &most);
        f0 = free_mem(0);
        a = open_on(m, 0);
        f1 = free_mem(0);
        b = open_on(m, 0);
        f2 = free_mem(0);
        rnnd__cudnn_probe_stats(&probes1, &most);
        ck_assert_uint_eq(probes1, probes0 + 1); /* the second open timed nothing */
        ck_assert_msg((f0 - f1) >= (f1 - f2) + weights,
                      "the first plan took %zu bytes, the second %zu: the %zu bytes of weights are "
                      "not shared",
                      f0 - f1, f1 - f2, weights);
        {
                struct rnnd_backend_desc da, db;

                rnnd_cudnn_backend.describe(a, &da);
                rnnd_cudnn_backend.describe(b, &db);
                ck_assert_str_eq(da.algo, db.algo);
        }
        /* The same batch on both plans: the same bits. */
        rm_batch_init(&rb, m, 5, NULL, 11);
        run_into(m, a, &rnnd_cudnn_backend, &rb, 0);
        run_into(m, b, &rnnd_cudnn_backend, &rb, 1);
        ck_assert(memcmp(rb.out[0], rb.out[1], (size_t)rb.b.n * rb.per_seq * sizeof(float)) == 0);
        rm_batch_done(&rb);
        /* The first plan goes; the second still has the weights. */
        rnnd_cudnn_backend.close(a);
        agrees_with_cpu(m, b, 3);
        rnnd_cudnn_backend.close(b);
        /* The last plan freed the shared weights (slack: a real driver's 2 MiB granules). */
        ck_assert_msg(free_mem(0) + SLACK >= f0, "closing both plans left %zd bytes",
                      (ssize_t)(f0 - free_mem(0)));
        rnnd_model_unref(m);
}
END_TEST

struct opener {
        rnnd_model_t *m;
        void *plan;
};

static void *open_thread(void *arg)
{
        struct opener *o = arg;
        struct rnnd_instance_opts opts = {.device = 0};
        rnnd_error_t err = {0};

        if (rnnd_cudnn_backend.open(o->m, &opts, &o->plan, &err) < 0)
                o->plan = NULL;
        return NULL;
}

START_TEST(test_probes_take_turns)
{
        static const char *const names[] = {"lstm_l1_uni_equal_h0", "gru_l1_uni_equal_noh0",
                                            "rnn_tanh_l1_uni_equal_noh0", "lstm_l1_uni_equal_h0"};
        struct opener o[4];
        pthread_t t[4];
        unsigned probes0, probes1, most;

        rnnd__cudnn_probe_stats(&probes0, &most);
        for (int i = 0; i < 4; i++) {
                o[i].m = rnnd_test_load_golden(names[i]);
                ck_assert_int_eq(pthread_create(&t[i], NULL, open_thread, &o[i]), 0);
        }
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        rnnd__cudnn_probe_stats(&probes1, &most);
        ck_assert_uint_eq(most, 1);
        /* One timing per model: the fourth is a second load of the first, a model of its own. */
        ck_assert_uint_eq(probes1 - probes0, 4);
        for (int i = 0; i < 4; i++) {
                ck_assert_msg(o[i].plan != NULL, "%s did not open", names[i]);
                agrees_with_cpu(o[i].m, o[i].plan, 20 + (unsigned)i);
                rnnd_cudnn_backend.close(o[i].plan);
                rnnd_model_unref(o[i].m);
        }
}
END_TEST

START_TEST(test_every_gpu)
{
        struct rnnd_cudnn_info info;
        rnnd_model_t *m = rnnd_test_load_golden("gru_l3_bi_ragged_h0");
        unsigned probes0, probes1, most;
        void *plans[RNND_CUDNN_MAX_DEVICES];
        int n;

        rnnd_cudnn_info(&info);
        n = info.device_count < RNND_CUDNN_MAX_DEVICES ? info.device_count : RNND_CUDNN_MAX_DEVICES;
        printf("every_gpu: %d GPUs\n", n);
        rnnd__cudnn_probe_stats(&probes0, &most);
        for (int d = 0; d < n; d++)
                plans[d] = open_on(m, d);
        rnnd__cudnn_probe_stats(&probes1, &most);
        ck_assert_uint_eq(probes1 - probes0, (unsigned)n); /* one timing per GPU */
        for (int d = 0; d < n; d++) {
                struct rnnd_backend_desc desc;
                char want[16];

                rnnd_cudnn_backend.describe(plans[d], &desc);
                snprintf(want, sizeof(want), "GPU %d (", d);
                ck_assert_msg(strncmp(desc.device, want, strlen(want)) == 0, "%s", desc.device);
                agrees_with_cpu(m, plans[d], 40 + (unsigned)d);
                rnnd_cudnn_backend.close(plans[d]);
        }
        rnnd_model_unref(m);
}
END_TEST

/*
 * Every batch size with its longest lengths, and odd ones between: device
 * memory does not move by a byte once the plan is open (the workspace was
 * sized for all of them; nothing is allocated, not even to be freed).
 */
/* Device memory and (on the stand-in) allocation calls when a plan opened. */
struct alloc_mark {
        size_t free_b;
        uint64_t mallocs, frees;
};

static struct alloc_mark alloc_mark(void)
{
        struct alloc_mark a = {.free_b = free_mem(0)};

#if RNND_CUDA_SIM /* the stand-in counts the calls themselves, not only the bytes */
        a.mallocs = cudasim_malloc_count(0);
        a.frees = cudasim_free_count(0);
#endif
        return a;
}

/* Runs a batch of n sequences, the first T long, and checks nothing was allocated. */
static void run_shape(rnnd_model_t *m, void *plan, uint32_t n, uint32_t T, unsigned *s,
                      const struct alloc_mark *at_open)
{
        uint32_t lens[64];
        struct rm_batch rb;
        rnnd_error_t err = {0};
        struct alloc_mark now;

        for (uint32_t i = 0; i < n; i++)
                lens[i] = i == 0 ? T : rm_int(s, 1, T);
        rm_batch_init(&rb, m, n, lens, n * 100 + T);
        rm_batch_target(&rb, m, 0);
        ck_assert_msg(rnnd_cudnn_backend.run(plan, &rb.b, &err) == 0, "n %u T %u: %s", n, T,
                      err.msg);
        rm_batch_done(&rb);
        now = alloc_mark();
        ck_assert_msg(now.free_b == at_open->free_b, "n %u T %u: device memory moved by %zd bytes",
                      n, T, (ssize_t)(at_open->free_b - now.free_b));
        ck_assert_msg(now.mallocs == at_open->mallocs && now.frees == at_open->frees,
                      "n %u T %u: cudaMalloc or cudaFree while serving", n, T);
}

START_TEST(test_no_allocation_serving)
{
        /* A projection: STANDARD alone, so no algorithm probe ran a batch at open. */
        rnnd_model_t *m = rnnd_test_load_golden("lstm_proj_l3_bi_ragged_h0");
        const uint32_t N =
                m->cfg.batching.max_batch_size < 16 ? m->cfg.batching.max_batch_size : 16;
        const uint32_t Tm = m->cfg.max_sequence_length < 40 ? m->cfg.max_sequence_length : 40;
        /* Bigger than the algorithm probe's batch (64 x 64): the longest and the fullest. */
        static const uint32_t big[][2] = {{64, 100}, {1, 4096}, {3, 1500}, {64, 64}, {37, 111}};
        void *plan = open_on(m, 0);
        const struct alloc_mark at_open = alloc_mark();
        unsigned s = 5;

        for (uint32_t n = 1; n <= N; n++)
                for (uint32_t T = 1; T <= Tm; T += 1 + T / 3)
                        run_shape(m, plan, n, T, &s, &at_open);
        ck_assert_uint_ge(m->cfg.batching.max_batch_size, 64);
        ck_assert_uint_ge(m->cfg.max_sequence_length, 4096);
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
                run_shape(m, plan, big[i][0], big[i][1], &s, &at_open);
        rnnd_cudnn_backend.close(plan);
        rnnd_model_unref(m);
}
END_TEST

/*
 * Inputs and outputs through 37-float pinned windows (windows end inside
 * sequences' rows; each refill waits for the last copy): the same answers
 * as the CPU engine.  A missing wait shows on the stand-in, whose copies run
 * late.
 */
START_TEST(test_small_window)
{
        static const char *const names[] = {"lstm_l3_bi_ragged_h0", "gru_l3_bi_ragged_h0",
                                            "lstm_h48_l2_bi_ragged_h0"};

        rnnd__cudnn_staging_window = 37;
        for (unsigned i = 0; i < 3; i++) {
                rnnd_model_t *m = rnnd_test_load_golden(names[i]);
                void *plan = open_on(m, 0);

                agrees_with_cpu(m, plan, 60 + i);
                agrees_with_cpu(m, plan, 70 + i);
                rnnd_cudnn_backend.close(plan);
                rnnd_model_unref(m);
        }
        rnnd__cudnn_staging_window = (size_t)1 << 20;
}
END_TEST

static Suite *gpu_fixes_suite(void)
{
        Suite *s = suite_create("gpu_fixes");
        TCase *tc = tcase_create("shared");

        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, test_shared_weights);
        tcase_add_test(tc, test_probes_take_turns);
        tcase_add_test(tc, test_every_gpu);
        tcase_add_test(tc, test_no_allocation_serving);
        tcase_add_test(tc, test_small_window);
        suite_add_tcase(s, tc);
        return s;
}

RNND_GPU_CHECK_MAIN(gpu_fixes_suite)
