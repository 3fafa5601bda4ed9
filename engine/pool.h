/*
 * pool.h: a model version's queue, batcher and instances (DESIGN.md §6).
 *
 * A job is one request: its sequences, each with its own buffers.  The pool
 * queues the sequences (not the job) in a sequence batcher (batcher.h), and
 * its workers, one thread per instance with its own backend plan, run the
 * batches the batcher forms; sequences of one job may run in different
 * batches, and the job completes when all of its sequences have.
 *
 * Admission: a submit that would pass max_queue waiting sequences fails at
 * once (a 503, never a hang).  Each sequence may expire after the queue
 * timeout (the smaller of the pool's and the job's); a job whose client went
 * away is canceled (its sequences that have not started) when one of its
 * sequences would start, or when a submit finds the queue full.  Expiry runs in
 * rnnd_pool_sweep(), which the owner's event loop calls when the pool asks
 * for it through the wakeup callback.
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
struct rnnd_pool_jobseq;

struct rnnd_job {
        struct rnnd_batch batch; /* borrowed by the pool until done() is called */
        uint32_t level;          /* priority level, 0 (highest) .. levels-1 */
        uint64_t timeout_ns;     /* in the queue; 0 = the pool's queue timeout */
        bool held;               /* its place was taken by rnnd_pool_hold(): the submit uses it */
        uint64_t since_ns;       /* 0, or when it began to wait for its turn outside the queue:
                                    its queue time and timeout count from then */

        /*
         * Optional: false when the client has gone.  Called under the pool's
         * lock: once per batch that is about to run any of the job's
         * sequences, and when a submit finds the queue full (every waiting
         * job, at most every 100 ms).  A dead job's waiting sequences are
         * dropped, and it completes with RNND_ECANCELED once its running
         * ones end.  Must not block.
         */
        bool (*alive)(rnnd_job_t *job);

        /*
         * Called once, without the pool's lock, on a worker thread, in
         * rnnd_pool_sweep(), in rnnd_pool_stop(), or in rnnd_pool_submit()
         * of another job (a canceled one), with 0 or a negative
         * RNND_E* and its message.  The pool does not touch the job after.
         */
        void (*done)(rnnd_job_t *job, int status, const rnnd_error_t *err);
        void *udata; /* the submitter's */

        /* Filled by the pool, in nanoseconds of CLOCK_MONOTONIC. */
        uint64_t queued_ns;   /* submitted */
        uint64_t started_ns;  /* its first batch started (0 if none did) */
        uint64_t finished_ns; /* its last sequence finished */

        /* Pool private; guarded by the pool's mutex. */
        struct rnnd_pool_jobseq *seqs_; /* [batch.n] */
        uint32_t remaining_;            /* sequences not finished */
        int status_;
        rnnd_error_t err_;
        rnnd_job_t *next_;
        uint64_t asked_; /* the round alive() was last asked in */
};

/* One instance of a pool: which backend and where. */
struct rnnd_pool_instance {
        const struct rnnd_backend_ops *ops;
        struct rnnd_instance_opts opts;
};

struct rnnd_pool_opts {
        const struct rnnd_pool_instance *instances; /* [n_instances], copied */
        unsigned n_instances;                       /* 1.. */
        uint32_t max_queue;                         /* sequences waiting, 1.. */
        uint32_t max_batch_size;                    /* sequences per batch, 1.. */
        uint64_t max_batch_steps;                   /* B x longest, >= model's max length */
        uint64_t max_queue_delay_ns;                /* wait for a fuller batch */
        uint64_t queue_timeout_ns;                  /* 0 = none */
        uint32_t levels;                            /* priority levels, 1..8 */
        /*
         * true: a part batch waits only when waiting pays (DESIGN.md §6,
         * rnnd_pool_expect); false: the oldest always waits out
         * max_queue_delay_ns (until the daemon announces requests).
         */
        bool adaptive_delay;

        /*
         * Optional: asks the owner to call rnnd_pool_sweep() soon (a new
         * earliest deadline).  Called from any thread, without the lock;
         * must not block (uv_async_send).
         */
        void (*wakeup)(void *arg);
        void *wakeup_arg;

        /*
         * Optional: an instance's run reported a device fault (RNND_EDEVLOST),
         * which is process-wide; the pool has taken its own GPU instances out
         * of service, and the owner should do the same to its other pools
         * (rnnd_pool_gpus_lost).  Called once per pool, on a worker thread,
         * without the lock; must not block.
         */
        void (*fault)(void *arg, const rnnd_error_t *err);
        void *fault_arg;
};

/* Counters since the pool started.  Histograms count batches. */
#define RNND_POOL_SIZE_BUCKETS    12 /* batch size <= 1, 2, 4, ... 1024, +Inf */
#define RNND_POOL_PADDING_BUCKETS 10 /* efficiency <= .5 .6 .7 .8 .85 .9 .95 .99 1 +Inf */

struct rnnd_pool_stats {
        uint64_t batches;     /* run (ok or failed) */
        uint64_t sequences;   /* in those batches */
        uint64_t steps_used;  /* sum of lengths */
        uint64_t steps_total; /* sum of B x longest */
        uint64_t compute_ns;  /* in run() */
        double padding_sum;   /* sum over batches of steps used / (B x longest) */
        uint64_t size_buckets[RNND_POOL_SIZE_BUCKETS];
        uint64_t padding_buckets[RNND_POOL_PADDING_BUCKETS];
        uint64_t expired;  /* sequences past their queue timeout */
        uint64_t canceled; /* jobs whose client had gone */
        uint64_t rejected; /* submits refused (queue full, closed) */
        uint32_t queued;   /* sequences waiting now */
        uint32_t running;  /* batches on workers now */
        unsigned in_service;
};

/* The upper bounds of the histograms' buckets (the last is +Inf). */
extern const double rnnd_pool_size_bounds[RNND_POOL_SIZE_BUCKETS];
extern const double rnnd_pool_padding_bounds[RNND_POOL_PADDING_BUCKETS];

/*
 * Starts a worker per instance for model m; each opens its plan on its own
 * thread, and this waits until all did.  An instance on a GPU (device >= 0)
 * that fails to open stays out of service, its description saying why, and
 * the pool serves on the others.  On success *ret is a new pool that holds
 * references on m.  Errors: RNND_EINVAL for bad opts, the failing open's
 * code and message when a CPU instance or every instance fails,
 * RNND_ENOMEM, RNND_EINTERNAL (no thread).  Never
 * writes *ret on failure.  Thread-safe.
 */
int rnnd_pool_new(rnnd_model_t *m, const struct rnnd_pool_opts *opts, rnnd_pool_t **ret,
                  rnnd_error_t *reterr);

/*
 * Queues job (steals it until its done() is called).  Errors, returned at
 * once without queueing or calling done(): RNND_EUNAVAIL when the queue has
 * no room for the job's sequences, the pool is closed or no instance is in
 * service; RNND_EINVAL for no sequences or more than max_queue, a length
 * outside 1..max_sequence_length or a bad level; RNND_ENOMEM.  Thread-safe.
 */
int rnnd_pool_submit(rnnd_pool_t *p, rnnd_job_t *job, rnnd_error_t *reterr);

/*
 * Tells p that a request for it is on its way (delta +1: its body has
 * started to arrive) or no longer (-1: it was submitted, refused or
 * dropped).  With opts.adaptive_delay, while any is on its way and no
 * other instance is idle, a part batch waits for it, up to max_queue_delay
 * (DESIGN.md §6); without these calls a lone sequence on an idle instance
 * runs at once.  The count never
 * goes below 0.  Thread-safe; cheap (one lock).
 */
void rnnd_pool_expect(rnnd_pool_t *p, int delta);

/*
 * A place in the queue for a one-sequence job that waits outside it for its
 * turn (a stateful sequence's chunk behind its running one, docs/DESIGN.md
 * §6), so that max_queue bounds those too.  delta +1 takes a place, or
 * fails as a submit to a full or closed queue does (RNND_EUNAVAIL; no job
 * is completed here, so a caller may hold its own locks); -1 gives one
 * back.  A job submitted with held set uses its place, and is admitted by a
 * closed pool (it was accepted: the drain runs it) until rnnd_pool_stop().
 * Thread-safe.
 */
int rnnd_pool_hold(rnnd_pool_t *p, int delta, rnnd_error_t *reterr);

/*
 * The deadline (CLOCK_MONOTONIC ns) of a job that began to wait at since:
 * since plus the shorter of the pool's queue timeout and the job's, or 0
 * when it has none.  Thread-safe.
 */
uint64_t rnnd_pool_deadline(const rnnd_pool_t *p, const rnnd_job_t *job, uint64_t since);

/*
 * A held job (rnnd_pool_hold()) that waits outside the queue has deadline:
 * asks the owner for a sweep by then, as a submit does (opts.wakeup), so
 * that it can expire the job with rnnd_pool_held_expired().  Thread-safe.
 */
void rnnd_pool_sweep_by(rnnd_pool_t *p, uint64_t deadline);

/*
 * A held job passed its deadline while it waited outside the queue: gives
 * its place back, counts it expired, and sets *reterr to what a job expired
 * in the queue gets.  Returns RNND_ETIMEDOUT.  Thread-safe.
 */
int rnnd_pool_held_expired(rnnd_pool_t *p, rnnd_job_t *job, uint64_t now, rnnd_error_t *reterr);

/*
 * Expires the sequences past their deadline (their jobs complete with
 * RNND_ETIMEDOUT).  Returns the next deadline (CLOCK_MONOTONIC ns), or
 * UINT64_MAX when none waits.  Thread-safe; not from done().
 */
uint64_t rnnd_pool_sweep(rnnd_pool_t *p);

/*
 * A device fault elsewhere in the process (why): takes every GPU instance
 * out of service.  Queued work stays for the CPU instances; with none, every
 * queued job fails RNND_EUNAVAIL, and so do later submits.  Idempotent.
 * Thread-safe; not from done().
 */
void rnnd_pool_gpus_lost(rnnd_pool_t *p, const char *why);

/* Describes instance i's plan (0 when i is out of range).  Thread-safe. */
void rnnd_pool_describe(const rnnd_pool_t *p, unsigned i, struct rnnd_backend_desc *ret);

/* Sequences waiting in the queue now.  Thread-safe. */
uint32_t rnnd_pool_queued(rnnd_pool_t *p);

/* Fills *ret.  Thread-safe. */
void rnnd_pool_stats(rnnd_pool_t *p, struct rnnd_pool_stats *ret);

/* Compute time of batches of one size, for the statistics extension. */
struct rnnd_pool_size_stat {
        uint64_t count, ns;
};

/*
 * Copies the per-batch-size counters for sizes 1..n into ret[0..n-1], n at
 * most max_batch_size.  Returns how many were copied.  Thread-safe.
 */
uint32_t rnnd_pool_size_stats(rnnd_pool_t *p, struct rnnd_pool_size_stat *ret, uint32_t n);

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
