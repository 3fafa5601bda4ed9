/*
 * test_placement.c: where a model's instances go (engine/placement.h), for
 * machines this one is not: device counts and the build are passed in.
 */
#include <stdio.h>
#include <string.h>

#include "check-main.h"
#include "backends.h"
#include "placement.h"
#include "rnnd-config.h"

/* A stand-in for the GPU backend's rule: it refuses Keras' reset-before GRU. */
static bool fake_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap)
{
        if (cfg->cell == RNND_CELL_GRU && !cfg->gru_linear_before_reset) {
                snprintf(why, cap, "fake: gru_linear_before_reset=false");
                return false;
        }
        snprintf(why, cap, "fake: never read");
        return true;
}

/* Stand-ins: placement copies the ops pointers and asks qualifies(). */
static const struct rnnd_backend_ops fake_cpu = {.name = "cpu"};
static const struct rnnd_backend_ops fake_gpu = {.name = "cudnn", .qualifies = fake_qualifies};

static struct rnnd_model_config lstm(void)
{
        struct rnnd_model_config c;

        rnnd_modelcfg_defaults(&c);
        c.cell = RNND_CELL_LSTM;
        c.input_size = 8;
        c.hidden_size = 16;
        return c;
}

static struct rnnd_placement_env env_gpus(int n)
{
        struct rnnd_placement_env e = {
                .cpu_ops = &fake_cpu,
                .gpu_ops = &fake_gpu,
                .backend_from = "default",
                .device_count = n,
                .cpu_threads = 3,
        };

        if (n == 0)
                snprintf(e.why_no_gpu, sizeof(e.why_no_gpu), "no CUDA-capable device is detected");
        return e;
}

static struct rnnd_placement place(const struct rnnd_model_config *c,
                                   const struct rnnd_placement_env *e)
{
        struct rnnd_placement p;
        rnnd_error_t err = {0};

        ck_assert_msg(rnnd_placement_resolve(c, e, &p, &err) == 0, "%s", err.msg);
        return p;
}

/* Every instance is on the CPU with the env's threads. */
static void assert_all_cpu(const struct rnnd_placement *p, unsigned n)
{
        ck_assert_uint_eq(p->n, n);
        ck_assert_uint_eq(p->n_gpu, 0);
        for (unsigned i = 0; i < p->n; i++) {
                ck_assert_ptr_eq(p->inst[i].ops, &fake_cpu);
                ck_assert_int_eq(p->inst[i].opts.device, -1);
                ck_assert_uint_eq(p->inst[i].opts.threads, 3);
        }
}

START_TEST(test_two_gpus_default_count)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(2);
        struct rnnd_placement p = place(&c, &e);
        static const int want[] = {0, 0, 1, 1};

        /* No count given: 2 per GPU, so one worker's copy-in overlaps the other's compute. */
        ck_assert_uint_eq(p.n, 4);
        ck_assert_uint_eq(p.n_gpu, 4);
        for (unsigned i = 0; i < 4; i++) {
                ck_assert_ptr_eq(p.inst[i].ops, &fake_gpu);
                ck_assert_int_eq(p.inst[i].opts.device, want[i]);
        }
        ck_assert_str_eq(p.why_not_cudnn, "");
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_count_and_gpus_from_group)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(2);
        struct rnnd_placement p;

        c.instances[0] = (struct rnnd_instance_group){
                .kind = RNND_INST_GPU, .count = 3, .count_set = true, .n_gpus = 2, .gpus = {1, 7}};
        p = place(&c, &e);
        /* GPU 7 is not visible: left out. */
        ck_assert_uint_eq(p.n, 3);
        for (unsigned i = 0; i < 3; i++)
                ck_assert_int_eq(p.inst[i].opts.device, 1);
        rnnd_placement_done(&p);

        /* A group whose GPUs are all invisible runs on the CPU, and says why. */
        c.instances[0].gpus[0] = 9;
        p = place(&c, &e);
        assert_all_cpu(&p, 3);
        ck_assert_str_eq(p.why_not_cudnn, "instance group 0 lists no visible GPU (2 visible)");
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_gru_reset_before)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(2);
        struct rnnd_placement p;

        c.cell = RNND_CELL_GRU;
        c.gru_linear_before_reset = false;
        p = place(&c, &e);
        assert_all_cpu(&p, 1);
        ck_assert_msg(strstr(p.why_not_cudnn, "gru_linear_before_reset=false") != NULL, "%s",
                      p.why_not_cudnn);
        rnnd_placement_done(&p);

        /* The default GRU (reset after) is cuDNN's. */
        c.gru_linear_before_reset = true;
        p = place(&c, &e);
        ck_assert_uint_eq(p.n_gpu, 4);
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_projection_qualifies)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(1);
        struct rnnd_placement p;

        c.proj_size = 8; /* STANDARD runs it; no persistent algorithm is tried */
        p = place(&c, &e);
        ck_assert_uint_eq(p.n_gpu, 2);
        ck_assert_str_eq(p.why_not_cudnn, ""); /* the backend's "" on success is not kept */
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_kind_cpu)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(2);
        struct rnnd_placement p;

        c.instances[0] = (struct rnnd_instance_group){.kind = RNND_INST_CPU, .count = 2};
        p = place(&c, &e);
        assert_all_cpu(&p, 2);
        ck_assert_str_eq(p.why_not_cudnn, "instance group 0 is kind cpu");
        rnnd_placement_done(&p);

        /* Mixed groups: GPU instances first, then the CPU ones, and the reason names the group. */
        c.n_instances = 2;
        c.instances[0] = (struct rnnd_instance_group){.kind = RNND_INST_AUTO, .count = 1};
        c.instances[1] = (struct rnnd_instance_group){.kind = RNND_INST_CPU, .count = 1};
        p = place(&c, &e);
        ck_assert_uint_eq(p.n, 5);
        ck_assert_uint_eq(p.n_gpu, 4);
        ck_assert_int_eq(p.inst[4].opts.device, -1);
        ck_assert_str_eq(p.why_not_cudnn, "instance group 1 is kind cpu");
        /* Where each group's instances are: the config route lists them by group. */
        ck_assert_uint_eq(p.n_groups, 2);
        ck_assert_uint_eq(p.group_end[0], 4);
        ck_assert_uint_eq(p.group_end[1], 5);
        rnnd_placement_done(&p);

        /* CPU first, then GPU: the ranges follow the config's order. */
        c.n_instances = 3;
        c.instances[0] = (struct rnnd_instance_group){.kind = RNND_INST_CPU, .count = 3};
        c.instances[1] = (struct rnnd_instance_group){
                .kind = RNND_INST_GPU, .count = 1, .count_set = true, .n_gpus = 1, .gpus = {1}};
        c.instances[2] = (struct rnnd_instance_group){.kind = RNND_INST_CPU, .count = 1};
        p = place(&c, &e);
        ck_assert_uint_eq(p.n, 5);
        ck_assert_uint_eq(p.n_groups, 3);
        ck_assert_uint_eq(p.group_end[0], 3);
        ck_assert_uint_eq(p.group_end[1], 4);
        ck_assert_uint_eq(p.group_end[2], 5);
        ck_assert_int_eq(p.inst[2].opts.device, -1);
        ck_assert_int_eq(p.inst[3].opts.device, 1);
        ck_assert_int_eq(p.inst[4].opts.device, -1);
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_backend_cpu)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(2);
        struct rnnd_placement p;

        e.backend_cpu = true;
        e.backend_from = "RNND_BACKEND";
        c.instances[0].count = 2;
        p = place(&c, &e);
        assert_all_cpu(&p, 2);
        ck_assert_str_eq(p.why_not_cudnn, "backend = cpu (set by RNND_BACKEND)");
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_no_gpu)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(0);
        struct rnnd_placement p = place(&c, &e);

        assert_all_cpu(&p, 1);
        ck_assert_str_eq(p.why_not_cudnn, "no GPU: no CUDA-capable device is detected");
        rnnd_placement_done(&p);

        /* kind gpu without a GPU serves on the CPU rather than not at all. */
        c.instances[0].kind = RNND_INST_GPU;
        p = place(&c, &e);
        assert_all_cpu(&p, 1);
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_not_built)
{
        struct rnnd_model_config c = lstm();
        struct rnnd_placement_env e = env_gpus(2);
        struct rnnd_placement p;

        e.gpu_ops = NULL;
        p = place(&c, &e);
        assert_all_cpu(&p, 1);
        ck_assert_str_eq(p.why_not_cudnn, "the cuDNN backend is not built in (rnnd --backends)");
        rnnd_placement_done(&p);
}
END_TEST

START_TEST(test_env_default)
{
        struct rnnd_placement_env e;

        rnnd_backends_env(&e, false, "default", 2);
        ck_assert_ptr_eq(e.cpu_ops, &rnnd_cpu_backend);
        ck_assert_uint_eq(e.cpu_threads, 2);
#if RNND_HAVE_CUDA
        ck_assert_ptr_nonnull(e.gpu_ops);
        if (e.device_count == 0)
                ck_assert_str_ne(e.why_no_gpu, "");
#else
        ck_assert_ptr_null(e.gpu_ops);
#endif
}
END_TEST

static Suite *placement_suite(void)
{
        Suite *s = suite_create("placement");
        TCase *tc = tcase_create("resolve");

        tcase_add_test(tc, test_two_gpus_default_count);
        tcase_add_test(tc, test_count_and_gpus_from_group);
        tcase_add_test(tc, test_gru_reset_before);
        tcase_add_test(tc, test_projection_qualifies);
        tcase_add_test(tc, test_kind_cpu);
        tcase_add_test(tc, test_backend_cpu);
        tcase_add_test(tc, test_no_gpu);
        tcase_add_test(tc, test_not_built);
        tcase_add_test(tc, test_env_default);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(placement_suite)
