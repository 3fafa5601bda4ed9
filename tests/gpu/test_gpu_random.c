/*
 * test_gpu_random.c: the cuDNN backend against the CPU engine on 100 random
 * models (every cell, 1-3 layers, both directions, projections, embeddings,
 * heads, odd sizes) and 40 random chains of 2-3 such blocks (config
 * "blocks"), each on a ragged batch, a batch of one, a batch of
 * length-1 sequences, and an equal-length full batch (which may take a
 * persistent algorithm).  fp32; max abs error relative to 1 + |cpu| <= 1e-4
 * (the engines sum in different orders over up to 3 layers).  Skips (77)
 * without a GPU.
 */
#include "gpu-main.h"
#include "random-model.h"

#define N_MODELS 100
#define N_CHAINS 40
#define TOL      1e-4

/* Runs rb on both backends and compares. */
static void compare_backends(rnnd_model_t *m, void *cpu, void *gpu, struct rm_batch *rb,
                             unsigned seed, const char *what)
{
        rnnd_error_t err = {0};
        double d;

        rm_batch_target(rb, m, 0);
        ck_assert_msg(rnnd_cpu_backend.run(cpu, &rb->b, &err) == 0, "seed %u %s: cpu: %s", seed,
                      what, err.msg);
        rm_batch_target(rb, m, 1);
        ck_assert_msg(rnnd_cudnn_backend.run(gpu, &rb->b, &err) == 0, "seed %u %s: cudnn: %s", seed,
                      what, err.msg);
        d = rm_batch_diff(rb);
        ck_assert_msg(d <= TOL,
                      "seed %u (%u block(s), last %s, H %u, L %u, dirs %u, proj %u) %s: max "
                      "diff %.3g",
                      seed, m->n_blocks, rnnd_cell_name(m->cfg.cell), m->cfg.hidden_size,
                      m->cfg.num_layers, m->dirs, m->cfg.proj_size, what, d);
}

START_TEST(test_random)
{
        const unsigned seed = (unsigned)_i + 1;
        rnnd_model_t *m = seed > N_MODELS ? rm_chain(seed) : rm_model(seed);
        struct rnnd_instance_opts cpu_opts = {.device = -1, .threads = 1}, gpu_opts = {0};
        const uint32_t N = m->cfg.batching.max_batch_size, Tm = m->cfg.max_sequence_length;
        uint32_t lens[16] = {0};
        rnnd_error_t err = {0};
        struct rm_batch rb;
        void *cpu = NULL, *gpu = NULL;

        ck_assert_int_eq(rnnd_cpu_backend.open(m, &cpu_opts, &cpu, &err), 0);
        ck_assert_msg(rnnd_cudnn_backend.open(m, &gpu_opts, &gpu, &err) == 0, "seed %u: %s", seed,
                      err.msg);

        rm_batch_init(&rb, m, N, NULL, seed);
        compare_backends(m, cpu, gpu, &rb, seed, "ragged");
        rm_batch_done(&rb);

        rm_batch_init(&rb, m, 1, NULL, seed + 1000);
        compare_backends(m, cpu, gpu, &rb, seed, "batch of 1");
        rm_batch_done(&rb);

        for (uint32_t i = 0; i < N; i++)
                lens[i] = 1;
        rm_batch_init(&rb, m, N, lens, seed + 2000);
        compare_backends(m, cpu, gpu, &rb, seed, "length 1");
        rm_batch_done(&rb);

        for (uint32_t i = 0; i < N; i++)
                lens[i] = Tm;
        rm_batch_init(&rb, m, N, lens, seed + 3000);
        compare_backends(m, cpu, gpu, &rb, seed, "equal lengths");
        rm_batch_done(&rb);

        rnnd_cpu_backend.close(cpu);
        rnnd_cudnn_backend.close(gpu);
        rnnd_model_unref(m);
}
END_TEST

static Suite *gpu_random_suite(void)
{
        Suite *s = suite_create("gpu_random");
        TCase *tc = tcase_create("random");

        tcase_set_timeout(tc, 900);
        tcase_add_loop_test(tc, test_random, 0, N_MODELS + N_CHAINS);
        suite_add_tcase(s, tc);
        return s;
}

RNND_GPU_CHECK_MAIN(gpu_random_suite)
