/*
 * pool.h: a model version's instances: worker threads, each with its own
 * backend plan, fed by one bounded queue of jobs.  A job is one request's
 * sequences, run as one batch.  (The batching issue replaces the scheduling
 * behind this interface with the sequence batcher of DESIGN.md §6.)
 */
#ifndef RNND_ENGINE_POOL_H
#define RNND_ENGINE_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "error.h"
#include "model.h"

typedef struct rnnd_pool rnnd_pool_t;
typedef struct rnnd_job rnnd_job_t;

struct rnnd_job {
        struct rnnd_batch batch; /* borrowed by the pool until done() is called */

        /*
         * Called once, on a worker thread (or in rnnd_pool_free() for jobs
         * that never ran), with 0 or a negative RNND_E* and its message.  The
         * pool does not touch the job after calling it.
         */
        void (*done)(rnnd_job_t *job, int status, const rnnd_error_t *err);
        void *udata; /* the submitter's */

        /* Filled by the pool, in nanoseconds of CLOCK_MONOTONIC. */
        uint64_t queued_ns, started_ns, finished_ns;

        rnnd_job_t *next; /* pool private; guarded by the pool's mutex */
};

/*
 * One instance of a pool: which backend and where.  (The batching issue
 * moves rnnd_pool_opts to a list of these, so that one model's instance
 * groups may mix GPUs and CPU threads.)
 */
struct rnnd_pool_instance {
        const struct rnnd_backend_ops *ops;
        struct rnnd_instance_opts opts;
};

struct rnnd_pool_opts {
        const struct rnnd_backend_ops *ops; /* which backend */
        unsigned instances;                 /* worker threads, 1.. */
        struct rnnd_instance_opts inst;     /* per-instance backend options */
        uint32_t max_queue;                 /* sequences waiting, 1.. */
};

/*
 * Starts opts->instances workers for model m; each opens its plan on its own
 * thread, and this waits until all did.  On success *ret is a new pool that
 * holds references on m.  Errors: the first failing open's code and message,
 * RNND_ENOMEM, RNND_EINTERNAL (no thread).  Never writes *ret on failure.
 * Thread-safe.
 */
int rnnd_pool_new(rnnd_model_t *m, const struct rnnd_pool_opts *opts, rnnd_pool_t **ret,
                  rnnd_error_t *reterr);

/*
 * Queues job (steals it until its done() is called).  Errors, returned at
 * once without queueing or calling done(): RNND_EUNAVAIL when the queue holds
 * max_queue sequences or the pool is stopping, RNND_EINVAL for an empty or
 * oversized batch.  Thread-safe.
 */
int rnnd_pool_submit(rnnd_pool_t *p, rnnd_job_t *job, rnnd_error_t *reterr);

/* Describes instance 0's plan.  Thread-safe. */
void rnnd_pool_describe(const rnnd_pool_t *p, struct rnnd_backend_desc *ret);

/* Sequences waiting in the queue now.  Thread-safe. */
uint32_t rnnd_pool_queued(rnnd_pool_t *p);

/* What the pool is doing, for the watchdog and the drain. */
struct rnnd_pool_progress {
        uint32_t queued;    /* sequences waiting */
        uint32_t running;   /* batches on workers now */
        uint64_t completed; /* batches run since the pool started (ok or failed) */
        bool closed;        /* rnnd_pool_close() or rnnd_pool_stop() was called */
};

/* Fills *ret.  Thread-safe. */
void rnnd_pool_progress(rnnd_pool_t *p, struct rnnd_pool_progress *ret);

/*
 * Stops accepting jobs (submit fails with RNND_EUNAVAIL) but runs every job
 * already queued, without waiting for fuller batches.  The caller watches
 * rnnd_pool_progress() until queued and running are 0, or gives up and calls
 * rnnd_pool_stop().  Idempotent.  Thread-safe.
 */
void rnnd_pool_close(rnnd_pool_t *p);

/*
 * Stops accepting jobs, completes the ones still queued with RNND_EUNAVAIL
 * ("shutting down") and waits until the running ones have completed.  The
 * workers stay (rnnd_pool_free() joins them).  Idempotent.  Thread-safe; not
 * from a worker thread.
 */
void rnnd_pool_stop(rnnd_pool_t *p);

/*
 * rnnd_pool_stop(), then joins the workers and closes their plans.  Accepts
 * NULL; returns NULL.  Not from a worker thread.
 */
rnnd_pool_t *rnnd_pool_free(rnnd_pool_t *p);

#endif
