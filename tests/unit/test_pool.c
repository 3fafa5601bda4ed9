/*
 * test_pool.c: the worker pool: jobs run through the real CPU engine and
 * give what a direct run gives; a full queue refuses at once; stopping
 * completes queued jobs with EUNAVAIL; a failing open is reported.  A gated
 * backend (its run waits for the test) makes the queue states deterministic.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check-main.h"
#include "golden-model.h"
#include "pool.h"
#include "repository.h"

/* Completion bookkeeping shared by the tests. */
static sem_t done_sem;
static atomic_int done_ok, done_unavail, done_other;

static void on_done(rnnd_job_t *job, int status, const rnnd_error_t *err)
{
        (void)job;
        if (status == 0)
                atomic_fetch_add(&done_ok, 1);
        else if (status == RNND_EUNAVAIL && strstr(err->msg, "shutting down") != NULL)
                atomic_fetch_add(&done_unavail, 1);
        else
                atomic_fetch_add(&done_other, 1);
        sem_post(&done_sem);
}

static void reset_counts(void)
{
        sem_init(&done_sem, 0, 0);
        atomic_store(&done_ok, 0);
        atomic_store(&done_unavail, 0);
        atomic_store(&done_other, 0);
}

START_TEST(test_runs)
{
        rnnd_model_t *m = rnnd_test_load_golden("lstm_l1_uni_ragged_h0");
        struct rnnd_pool_opts o = {&rnnd_cpu_backend, 2, {-1, 1}, 64};
        static float x[16][7 * 5], y[16][7 * 6], want[16][7 * 6];
        struct rnnd_seq seqs[16];
        rnnd_job_t jobs[16];
        rnnd_error_t err = {0};
        struct rnnd_backend_desc d;
        rnnd_pool_t *p;
        void *plan;

        reset_counts();
        for (int i = 0; i < 16; i++)
                for (int k = 0; k < 7 * 5; k++)
                        x[i][k] = (float)((i * 31 + k * 7) % 13) / 13.0f - 0.5f;
        /* Reference: each sequence run directly. */
        ck_assert_int_eq(rnnd_cpu_backend.open(m, NULL, &plan, &err), 0);
        for (int i = 0; i < 16; i++) {
                struct rnnd_seq q = {.len = 1 + i % 7, .x = x[i], .y = want[i]};
                struct rnnd_batch b = {&q, 1};

                ck_assert_int_eq(rnnd_cpu_backend.run(plan, &b, &err), 0);
        }
        rnnd_cpu_backend.close(plan);

        ck_assert_msg(rnnd_pool_new(m, &o, &p, &err) == 0, "%s", err.msg);
        rnnd_pool_describe(p, &d);
        ck_assert_str_eq(d.backend, "cpu");
        for (int i = 0; i < 16; i++) {
                memset(&seqs[i], 0, sizeof(seqs[i]));
                seqs[i].len = 1 + i % 7;
                seqs[i].x = x[i];
                seqs[i].y = y[i];
                memset(&jobs[i], 0, sizeof(jobs[i]));
                jobs[i].batch = (struct rnnd_batch){&seqs[i], 1};
                jobs[i].done = on_done;
                ck_assert_int_eq(rnnd_pool_submit(p, &jobs[i], &err), 0);
        }
        for (int i = 0; i < 16; i++)
                sem_wait(&done_sem);
        ck_assert_int_eq(atomic_load(&done_ok), 16);
        for (int i = 0; i < 16; i++) {
                ck_assert(jobs[i].queued_ns <= jobs[i].started_ns);
                ck_assert(jobs[i].started_ns <= jobs[i].finished_ns);
                ck_assert_mem_eq(y[i], want[i], sizeof(y[i]));
        }
        p = rnnd_pool_free(p);
        ck_assert_ptr_null(p);
        rnnd_model_unref(m);
}
END_TEST

/* The gated backend: run() blocks until the test posts gate. */
static sem_t gate, entered;
static int open_fails;

static int gated_open(rnnd_model_t *m, const struct rnnd_instance_opts *o, void **ret,
                      rnnd_error_t *reterr)
{
        (void)m;
        (void)o;
        if (open_fails)
                return rnnd_error_set(reterr, RNND_EGPU, "device 3 is gone");
        *ret = &gate;
        return 0;
}

static int gated_run(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        (void)plan;
        (void)b;
        (void)reterr;
        sem_post(&entered);
        sem_wait(&gate);
        return 0;
}

static void gated_close(void *plan)
{
        (void)plan;
}

static void gated_describe(const void *plan, struct rnnd_backend_desc *d)
{
        (void)plan;
        memset(d, 0, sizeof(*d));
        snprintf(d->backend, sizeof(d->backend), "gated");
}

static const struct rnnd_backend_ops gated = {"gated", gated_open, gated_run, gated_close,
                                              gated_describe};

static void *stop_pool(void *p)
{
        rnnd_pool_free(p);
        return NULL;
}

START_TEST(test_queue_full_and_stop)
{
        rnnd_model_t *m = rnnd_test_load_golden("gru_l1_uni_equal_noh0");
        struct rnnd_pool_opts o = {&gated, 1, {-1, 0}, 4};
        struct rnnd_seq seqs[3];
        rnnd_job_t jobs[4];
        rnnd_error_t err = {0};
        pthread_t stopper;
        rnnd_pool_t *p;

        reset_counts();
        sem_init(&gate, 0, 0);
        sem_init(&entered, 0, 0);
        memset(seqs, 0, sizeof(seqs));
        memset(jobs, 0, sizeof(jobs));
        ck_assert_int_eq(rnnd_pool_new(m, &o, &p, &err), 0);
        for (int i = 0; i < 4; i++) {
                jobs[i].batch = (struct rnnd_batch){seqs, i == 0 ? 1 : 2};
                jobs[i].done = on_done;
        }
        /* Job 0 runs and blocks; jobs 1 and 2 (2 sequences each) fill the queue of 4. */
        ck_assert_int_eq(rnnd_pool_submit(p, &jobs[0], &err), 0);
        sem_wait(&entered);
        ck_assert_int_eq(rnnd_pool_submit(p, &jobs[1], &err), 0);
        ck_assert_int_eq(rnnd_pool_submit(p, &jobs[2], &err), 0);
        ck_assert_uint_eq(rnnd_pool_queued(p), 4);
        ck_assert_int_eq(rnnd_pool_submit(p, &jobs[3], &err), RNND_EUNAVAIL);
        ck_assert_ptr_nonnull(strstr(err.msg, "queue full (4 of 4 sequences waiting)"));
        ck_assert_int_eq(rnnd_error_http_status(err.code), 503);

        /* Oversized batches are refused before queueing. */
        jobs[3].batch.n = m->cfg.batching.max_batch_size + 1;
        ck_assert_int_eq(rnnd_pool_submit(p, &jobs[3], &err), RNND_EINVAL);
        jobs[3].batch.n = 0;
        ck_assert_int_eq(rnnd_pool_submit(p, &jobs[3], &err), RNND_EINVAL);

        /*
         * Release job 0: job 1 starts and blocks.  Stop the pool from another
         * thread while job 2 is still queued; it must complete with EUNAVAIL,
         * and only then is job 1 let go, so the stop waits for running work.
         */
        sem_post(&gate);
        sem_wait(&entered);
        ck_assert_int_eq(pthread_create(&stopper, NULL, stop_pool, p), 0);
        while (atomic_load(&done_unavail) == 0)
                usleep(1000);
        ck_assert_int_eq(atomic_load(&done_ok), 1);
        sem_post(&gate);
        pthread_join(stopper, NULL);
        ck_assert_int_eq(atomic_load(&done_ok), 2);
        ck_assert_int_eq(atomic_load(&done_unavail), 1);
        ck_assert_int_eq(atomic_load(&done_other), 0);
        rnnd_model_unref(m);
}
END_TEST

START_TEST(test_open_fails)
{
        rnnd_model_t *m = rnnd_test_load_golden("gru_l1_uni_equal_noh0");
        struct rnnd_pool_opts o = {&gated, 3, {-1, 0}, 4};
        rnnd_error_t err = {0};
        rnnd_pool_t *p = NULL;

        open_fails = 1;
        ck_assert_int_eq(rnnd_pool_new(m, &o, &p, &err), RNND_EGPU);
        ck_assert_str_eq(err.msg, "device 3 is gone");
        ck_assert_ptr_null(p);
        open_fails = 0;
        o.instances = 0;
        ck_assert_int_eq(rnnd_pool_new(m, &o, &p, &err), RNND_EINVAL);
        rnnd_model_unref(m);
}
END_TEST

static Suite *pool_suite(void)
{
        Suite *s = suite_create("pool");
        TCase *tc;

        tc = tcase_create("runs");
        tcase_add_test(tc, test_runs);
        suite_add_tcase(s, tc);
        tc = tcase_create("queue");
        tcase_add_test(tc, test_queue_full_and_stop);
        tcase_add_test(tc, test_open_fails);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(pool_suite)
