/*
 * pool.c: worker threads running a model's jobs through a backend.
 *
 * DESIGN
 * One mutex guards the queue (a singly linked FIFO with a tail pointer), the
 * count of waiting sequences and the stopping flag; workers wait on one
 * condition variable.  A submit that would pass max_queue sequences fails at
 * once, so overload is a quick 503 and never a hang.  Each worker opens its
 * own plan at start (a GPU plan must be made on the thread that uses its
 * stream) and reports to the creator through a second condition.  done() is
 * called without the mutex held.  Lock order: only pool->mu, never nested.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "pool.h"

struct worker {
        rnnd_pool_t *pool; /* immutable */
        pthread_t thread;  /* immutable after start */
        void *plan;        /* worker thread only after open */
};

struct rnnd_pool {
        rnnd_model_t *m;               /* a reference; immutable */
        struct rnnd_pool_opts opts;    /* immutable */
        struct worker *workers;        /* [opts.instances]; immutable */
        unsigned started;              /* threads created; creator only */
        struct rnnd_backend_desc desc; /* immutable after new */

        pthread_mutex_t mu;
        pthread_cond_t work;     /* signalled on submit and stop */
        pthread_cond_t opened;   /* signalled when a worker's open ends */
        pthread_cond_t idle;     /* signalled when running drops to 0 */
        unsigned running;        /* jobs between dequeue and done(); guarded by mu */
        rnnd_job_t *head, *tail; /* guarded by mu */
        uint32_t queued;         /* sequences waiting; guarded by mu */
        unsigned n_open;         /* opens finished; guarded by mu */
        int open_status;         /* first failing open; guarded by mu */
        rnnd_error_t open_err;   /* guarded by mu */
        uint64_t completed;      /* jobs done; guarded by mu */
        bool closed;             /* no new jobs; guarded by mu */
        bool stopping;           /* guarded by mu */
};

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        rnnd_pool_t *p = w->pool;
        rnnd_error_t err = {0};
        int r;

        r = p->opts.ops->open(p->m, &p->opts.inst, &w->plan, &err);
        pthread_mutex_lock(&p->mu);
        if (r < 0 && p->open_status == 0) {
                p->open_status = r;
                p->open_err = err;
        }
        p->n_open++;
        pthread_cond_broadcast(&p->opened);
        pthread_mutex_unlock(&p->mu);
        if (r < 0)
                return NULL;

        for (;;) {
                rnnd_job_t *job;

                pthread_mutex_lock(&p->mu);
                while (p->head == NULL && !p->stopping)
                        pthread_cond_wait(&p->work, &p->mu);
                if (p->head == NULL) { /* stopping and drained */
                        pthread_mutex_unlock(&p->mu);
                        break;
                }
                job = p->head;
                p->head = job->next;
                if (p->head == NULL)
                        p->tail = NULL;
                p->queued -= job->batch.n;
                p->running++;
                pthread_mutex_unlock(&p->mu);

                memset(&err, 0, sizeof(err));
                job->started_ns = now_ns();
                r = p->opts.ops->run(w->plan, &job->batch, &err);
                job->finished_ns = now_ns();
                job->done(job, r, &err);

                pthread_mutex_lock(&p->mu);
                p->completed++;
                if (--p->running == 0)
                        pthread_cond_broadcast(&p->idle);
                pthread_mutex_unlock(&p->mu);
        }
        return NULL;
}

/* Completes every queued job with EUNAVAIL.  Called with mu held; releases it. */
static void drain_locked(rnnd_pool_t *p)
{
        rnnd_job_t *list = p->head;
        rnnd_error_t err;

        p->head = p->tail = NULL;
        p->queued = 0;
        pthread_mutex_unlock(&p->mu);
        rnnd_error_set(&err, RNND_EUNAVAIL, "model '%s' is shutting down", p->m->name);
        while (list != NULL) {
                rnnd_job_t *next = list->next;

                list->done(list, RNND_EUNAVAIL, &err);
                list = next;
        }
}

int rnnd_pool_new(rnnd_model_t *m, const struct rnnd_pool_opts *opts, rnnd_pool_t **ret,
                  rnnd_error_t *reterr)
{
        rnnd_pool_t *p;
        int r = 0;

        if (opts->instances == 0 || opts->max_queue == 0 || opts->ops == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "a pool needs instances and a queue");
        p = rnnd_calloc(1, sizeof(*p));
        if (p == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a pool");
        p->workers = rnnd_calloc(opts->instances, sizeof(*p->workers));
        if (p->workers == NULL) {
                rnnd_free(p);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a pool");
        }
        p->m = rnnd_model_ref(m);
        p->opts = *opts;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->work, NULL);
        pthread_cond_init(&p->opened, NULL);
        pthread_cond_init(&p->idle, NULL);

        for (unsigned i = 0; i < opts->instances; i++) {
                p->workers[i].pool = p;
                if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
                        r = rnnd_error_set(reterr, RNND_EINTERNAL,
                                           "cannot start worker %u of model '%s'", i, m->name);
                        break;
                }
                p->started++;
        }
        pthread_mutex_lock(&p->mu);
        while (p->n_open < p->started)
                pthread_cond_wait(&p->opened, &p->mu);
        if (r == 0 && p->open_status < 0) {
                r = p->open_status;
                if (reterr != NULL)
                        *reterr = p->open_err;
        }
        pthread_mutex_unlock(&p->mu);
        if (r < 0) {
                rnnd_pool_free(p);
                return r;
        }
        p->opts.ops->describe(p->workers[0].plan, &p->desc);
        *ret = p;
        return 0;
}

int rnnd_pool_submit(rnnd_pool_t *p, rnnd_job_t *job, rnnd_error_t *reterr)
{
        uint32_t n = job->batch.n;

        if (n == 0 || n > p->m->cfg.batching.max_batch_size)
                return rnnd_error_set(reterr, RNND_EINVAL, "batch of %u sequences is outside 1..%u",
                                      n, p->m->cfg.batching.max_batch_size);
        job->next = NULL;
        job->queued_ns = now_ns();
        pthread_mutex_lock(&p->mu);
        if (p->closed) {
                pthread_mutex_unlock(&p->mu);
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "model '%s' is shutting down",
                                      p->m->name);
        }
        if (n > p->opts.max_queue - p->queued) {
                uint32_t q = p->queued;

                pthread_mutex_unlock(&p->mu);
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "model '%s': queue full (%u of %u sequences waiting)",
                                      p->m->name, q, p->opts.max_queue);
        }
        if (p->tail != NULL)
                p->tail->next = job;
        else
                p->head = job;
        p->tail = job;
        p->queued += n;
        pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->mu);
        return 0;
}

void rnnd_pool_describe(const rnnd_pool_t *p, struct rnnd_backend_desc *ret)
{
        *ret = p->desc;
}

uint32_t rnnd_pool_queued(rnnd_pool_t *p)
{
        uint32_t q;

        pthread_mutex_lock(&p->mu);
        q = p->queued;
        pthread_mutex_unlock(&p->mu);
        return q;
}

void rnnd_pool_progress(rnnd_pool_t *p, struct rnnd_pool_progress *ret)
{
        pthread_mutex_lock(&p->mu);
        ret->queued = p->queued;
        ret->running = p->running;
        ret->completed = p->completed;
        ret->closed = p->closed;
        pthread_mutex_unlock(&p->mu);
}

void rnnd_pool_close(rnnd_pool_t *p)
{
        pthread_mutex_lock(&p->mu);
        p->closed = true;
        pthread_mutex_unlock(&p->mu);
}

void rnnd_pool_stop(rnnd_pool_t *p)
{
        pthread_mutex_lock(&p->mu);
        p->closed = true;
        p->stopping = true;
        pthread_cond_broadcast(&p->work);
        drain_locked(p);
        pthread_mutex_lock(&p->mu);
        while (p->running > 0)
                pthread_cond_wait(&p->idle, &p->mu);
        pthread_mutex_unlock(&p->mu);
}

rnnd_pool_t *rnnd_pool_free(rnnd_pool_t *p)
{
        if (p == NULL)
                return NULL;
        rnnd_pool_stop(p);
        for (unsigned i = 0; i < p->started; i++) {
                pthread_join(p->workers[i].thread, NULL);
                p->opts.ops->close(p->workers[i].plan);
        }
        pthread_cond_destroy(&p->idle);
        pthread_cond_destroy(&p->opened);
        pthread_cond_destroy(&p->work);
        pthread_mutex_destroy(&p->mu);
        rnnd_model_unref(p->m);
        rnnd_free(p->workers);
        rnnd_free(p);
        return NULL;
}
