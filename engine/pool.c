/*
 * pool.c: a model version's sequence queue and its workers (see pool.h).
 *
 * DESIGN
 * One mutex guards the batcher, every job's private fields, the workers'
 * states and the counters.  Idle workers wait on one condition variable,
 * with a timeout at the batcher's next due time, so the batching delay is
 * kept to the microsecond by the worker that will run the batch (an event
 * loop timer ticks in milliseconds).  A submit that brings that due time
 * before every idle worker's wakeup wakes one of them, which forms a batch if
 * one is due or goes back to sleep until one will be; a sequence that joins
 * a batch still waiting out its delay wakes nobody.  The due time is the
 * batcher's given what the pool knows of the work to come: idle workers,
 * requests the owner announced (rnnd_pool_expect), requests answered lately
 * whose clients have not yet come back, the mean gap between submits and the
 * mean run time, measured here (DESIGN.md §6).
 * Queue timeouts must fire while every worker is busy, so they are swept by
 * the owner's loop (rnnd_pool_sweep), which the pool wakes through
 * opts.wakeup whenever a submit brings the earliest deadline forward.
 *
 * A job's sequences are batcher nodes in one array (struct
 * rnnd_pool_jobseq).  A job completes when its last sequence finishes or
 * leaves the queue; the first error wins and cancels its waiting sequences,
 * but sequences already running are waited for, since they write into the
 * job's buffers.  Whether a job's client is still there is asked once per
 * batch that holds any of its sequences, and of every waiting job when a
 * submit finds the queue full (at most every REAP_INTERVAL_NS), so that the
 * sequences of clients that left neither run nor hold the room of live ones.
 * done() is always called without the mutex, from a list collected under
 * it.  A run that returns RNND_EDEVLOST means a device fault, which is
 * process-wide: every GPU instance of the pool goes out of service (the
 * owner is told through opts.fault, to do the same to its other pools), the
 * batch is pushed back at its old place in the queue for the CPU instances,
 * and when none is left every queued job fails RNND_EUNAVAIL.  An instance
 * on a GPU that fails to open stays out of service while the others serve.
 * Lock order: only pool->mu, never nested.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "batcher.h"
#include "clock.h"
#include "pool.h"

struct rnnd_pool_jobseq {
        struct rnnd_bseq node; /* first: the batcher hands back node pointers */
        rnnd_job_t *job;
        uint32_t index; /* into job->batch.seqs */
};

struct worker {
        rnnd_pool_t *pool;                /* immutable */
        struct rnnd_pool_instance inst;   /* immutable */
        pthread_t thread;                 /* immutable after start */
        void *plan;                       /* worker thread only after open */
        struct rnnd_backend_desc desc;    /* immutable after new */
        struct rnnd_pool_jobseq **picked; /* [max_batch_size]; worker only */
        struct rnnd_seq *seqs;            /* [max_batch_size]; worker only */
        uint64_t wait_due;                /* when its wait ends, while waiting; guarded by mu */
        bool waiting;                     /* in cond_wait; guarded by mu */
        bool in_service;                  /* guarded by mu */
};

/*
 * How often a full queue may be searched for jobs whose client has gone: a
 * recv() per waiting job under the lock, so about 2 ms for a queue of 4096.
 */
#define REAP_INTERVAL_NS 100000000u

/* Answers remembered as clients that may come back (adaptive_delay). */
#define POOL_RETURNING   256u
#define RETURNING_DELAYS 8u

struct rnnd_pool {
        rnnd_model_t *m;            /* a reference; immutable */
        struct rnnd_pool_opts opts; /* immutable; instances points into workers */
        struct worker *workers;     /* [opts.n_instances]; immutable */
        unsigned started;           /* threads created; creator only */

        pthread_mutex_t mu;
        pthread_cond_t work;                 /* submit, stop, close, a batch pushed back */
        pthread_cond_t opened;               /* a worker's open ended */
        pthread_cond_t idle;                 /* running dropped to 0 */
        rnnd_batcher_t *batcher;             /* guarded by mu */
        struct rnnd_pool_stats st;           /* guarded by mu */
        struct rnnd_pool_size_stat *by_size; /* [max_batch_size]; guarded by mu */
        uint64_t sweep_due; /* deadline the owner was last told of; guarded by mu */
        uint64_t round;     /* numbers the alive() checks; guarded by mu */
        uint64_t reaped_ns; /* the last search for gone clients; guarded by mu */
        uint64_t last_ns;   /* the last submit; guarded by mu */
        uint64_t gap_ns;    /* mean time between submits (EWMA), 0 unknown; guarded by mu */
        uint64_t run_ns;    /* mean batch run time (EWMA), 0 unknown; guarded by mu */
        uint32_t expected;  /* requests on their way (rnnd_pool_expect); guarded by mu */
        uint32_t held;      /* places taken by rnnd_pool_hold(); guarded by mu */
        uint32_t backlog;   /* 0..1024, EWMA of "a run ended with work waiting"; guarded by mu */
        /* When jobs were answered, oldest first from ans_head (a ring); an
         * announced request takes the oldest off (its client came back), and
         * an answer older than the delay is no longer counted.  Guarded by mu. */
        uint64_t answered[POOL_RETURNING];
        uint32_t ans_head, ans_n;
        unsigned n_open;       /* opens finished; guarded by mu */
        unsigned waiting;      /* workers in cond_wait; guarded by mu */
        int open_status;       /* first failing open; guarded by mu */
        rnnd_error_t open_err; /* guarded by mu */
        unsigned n_failed_gpu; /* GPU instances whose open failed; guarded by mu */
        bool gpus_lost;        /* a device fault took the GPU instances; guarded by mu */
        bool closed;           /* guarded by mu */
        bool stopping;         /* guarded by mu */
};

const double rnnd_pool_size_bounds[RNND_POOL_SIZE_BUCKETS] = {
        1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, __builtin_inf()};
const double rnnd_pool_padding_bounds[RNND_POOL_PADDING_BUCKETS] = {
        0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1, __builtin_inf()};

static struct rnnd_pool_jobseq *jobseq(struct rnnd_bseq *node)
{
        return (struct rnnd_pool_jobseq *)node;
}

/*
 * Finishes count sequences of job; when none remains, links the job into
 * *done for completion after the unlock.  Called with mu held.
 */
static void finish_seqs(rnnd_job_t *job, uint32_t count, rnnd_job_t **done)
{
        job->remaining_ -= count;
        if (job->remaining_ == 0) {
                job->finished_ns = rnnd_now_ns();
                job->next_ = *done;
                *done = job;
        }
}

/*
 * Fails job with code (the first error wins) and takes its waiting sequences
 * out of the queue.  Called with mu held.
 */
static void fail_job(rnnd_pool_t *p, rnnd_job_t *job, const rnnd_error_t *err, rnnd_job_t **done)
{
        uint32_t removed = 0;

        if (job->status_ == 0) {
                job->status_ = err->code;
                job->err_ = *err;
        }
        for (uint32_t i = 0; i < job->batch.n; i++) {
                struct rnnd_bseq *node = &job->seqs_[i].node;

                if (node->queued) {
                        rnnd_batcher_remove(p->batcher, node);
                        removed++;
                }
        }
        if (removed > 0)
                finish_seqs(job, removed, done);
}

static void complete(rnnd_job_t *list)
{
        while (list != NULL) {
                rnnd_job_t *next = list->next_;
                struct rnnd_pool_jobseq *seqs = list->seqs_;

                list->seqs_ = NULL;
                rnnd_free(seqs);
                list->done(list, list->status_, &list->err_);
                list = next;
        }
}

/*
 * Asks whether job's client is still there, once per round; if it has gone,
 * cancels the job's waiting sequences.  Returns false for a canceled job.
 * Called with mu held.
 */
static bool check_alive_locked(rnnd_pool_t *p, rnnd_job_t *job, rnnd_job_t **done)
{
        rnnd_error_t err;

        if (job->status_ != 0 || job->alive == NULL || job->asked_ == p->round)
                return job->status_ == 0;
        job->asked_ = p->round;
        if (job->alive(job))
                return true;
        p->st.canceled++;
        rnnd_error_set(&err, RNND_ECANCELED, "model '%s': the client went away", p->m->name);
        fail_job(p, job, &err, done);
        return false;
}

/*
 * Cancels the waiting jobs whose client has gone, when the last search is
 * REAP_INTERVAL_NS old.  Called with mu held, when the queue is full.
 */
static void reap_gone_locked(rnnd_pool_t *p, uint64_t now, rnnd_job_t **done)
{
        struct rnnd_bseq *node, *next;

        if (now < p->reaped_ns + REAP_INTERVAL_NS) /* now was read before the lock */
                return;
        p->reaped_ns = now;
        p->round++;
        for (node = rnnd_batcher_next(p->batcher, NULL); node != NULL; node = next) {
                rnnd_job_t *job = jobseq(node)->job;

                /* Canceling removes the job's nodes: go on from another job's. */
                next = rnnd_batcher_next(p->batcher, node);
                while (next != NULL && jobseq(next)->job == job)
                        next = rnnd_batcher_next(p->batcher, next);
                (void)check_alive_locked(p, job, done);
        }
}

/* The message of a job expired after waiting since arrival. */
static int expired_error(const rnnd_pool_t *p, uint64_t now, uint64_t arrival, rnnd_error_t *reterr)
{
        return rnnd_error_set(reterr, RNND_ETIMEDOUT,
                              "model '%s': request timeout expired after %llu us in the queue",
                              p->m->name, (unsigned long long)((now - arrival) / 1000));
}

/* Expires what is past its deadline.  Called with mu held. */
static void expire_locked(rnnd_pool_t *p, uint64_t now, rnnd_job_t **done)
{
        struct rnnd_bseq *node;

        while (rnnd_batcher_pop_expired(p->batcher, now, &node, 1) == 1) {
                rnnd_job_t *job = jobseq(node)->job;
                rnnd_error_t err;

                p->st.expired++;
                expired_error(p, now, node->arrival_ns, &err);
                /* The expired node is out of the queue already: count it here. */
                fail_job(p, job, &err, done);
                finish_seqs(job, 1, done);
        }
}

/* A moving average that follows the last eight samples or so. */
static uint64_t ewma(uint64_t avg, uint64_t sample)
{
        if (avg == 0)
                return sample != 0 ? sample : 1;
        return sample >= avg ? avg + (sample - avg) / 8 : avg - (avg - sample) / 8;
}

/* How long an answer counts as a client that may come back. */
static uint64_t returning_ns(const rnnd_pool_t *p)
{
        return p->opts.max_queue_delay_ns * RETURNING_DELAYS;
}

/* How many answers still count at now (their clients may come back). */
static uint32_t returning_locked(const rnnd_pool_t *p, uint64_t now)
{
        uint32_t i = 0;

        while (i < p->ans_n &&
               p->answered[(p->ans_head + i) % POOL_RETURNING] + returning_ns(p) <= now)
                i++;
        return p->ans_n - i;
}

/* Forgets the oldest n answers. */
static void returned_locked(rnnd_pool_t *p, uint32_t n)
{
        n = n < p->ans_n ? n : p->ans_n;
        p->ans_head = (p->ans_head + n) % POOL_RETURNING;
        p->ans_n -= n;
}

/* Notes that jobs requests were answered at now (the oldest make room). */
static void answered_locked(rnnd_pool_t *p, uint64_t now, uint32_t jobs)
{
        returned_locked(p, p->ans_n - returning_locked(p, now));
        for (uint32_t i = 0; i < jobs; i++) {
                if (p->ans_n == POOL_RETURNING)
                        returned_locked(p, 1);
                p->answered[(p->ans_head + p->ans_n++) % POOL_RETURNING] = now;
        }
}

/*
 * When a batch is due for an instance that finds idle_others others idle
 * (DESIGN.md §6: the batcher waits only when waiting pays).  Called with mu
 * held.
 */
static uint64_t due_locked(const rnnd_pool_t *p, uint64_t now, unsigned idle_others)
{
        struct rnnd_batcher_outlook o;

        if (!p->opts.adaptive_delay)
                return rnnd_batcher_next_due(p->batcher);
        o = (struct rnnd_batcher_outlook){.idle_others = idle_others,
                                          .expected = p->expected,
                                          .last_ns = p->last_ns,
                                          .gap_ns = p->gap_ns,
                                          .run_ns = p->run_ns,
                                          .backlog = p->backlog,
                                          .returning = returning_locked(p, now)};
        if (o.returning > 0)
                o.returning_until = p->answered[(p->ans_head + p->ans_n - 1) % POOL_RETURNING] +
                                    returning_ns(p);

        return rnnd_batcher_due(p->batcher, now, &o);
}

/*
 * Forms a batch for w if one is due, dropping the sequences of jobs whose
 * client has gone (and the rest of those jobs' waiting sequences).  Returns
 * how many sequences w->picked holds.  Called with mu held.
 */
static uint32_t form_locked(rnnd_pool_t *p, struct worker *w, uint64_t now, rnnd_job_t **done)
{
        struct rnnd_bseq **nodes = (struct rnnd_bseq **)w->picked;
        uint32_t n, kept = 0;

        expire_locked(p, now, done);
        n = rnnd_batcher_pop(p->batcher, now, p->closed || due_locked(p, now, p->waiting) <= now,
                             nodes);
        if (n > 0)
                p->round++;
        for (uint32_t i = 0; i < n; i++) {
                struct rnnd_pool_jobseq *s = jobseq(nodes[i]);
                rnnd_job_t *job = s->job;

                if (check_alive_locked(p, job, done) && job->started_ns == 0)
                        job->started_ns = now;
                if (job->status_ != 0) {
                        finish_seqs(job, 1, done); /* popped: no longer queued */
                        continue;
                }
                w->picked[kept++] = s;
        }
        return kept;
}

static void record_batch(rnnd_pool_t *p, struct worker *w, uint32_t n, uint64_t ns)
{
        uint64_t used = 0, longest = 0, total;
        unsigned b;

        for (uint32_t i = 0; i < n; i++) {
                uint32_t len = w->picked[i]->node.len;

                used += len;
                if (len > longest)
                        longest = len;
        }
        total = longest * n;
        p->st.batches++;
        p->st.sequences += n;
        p->st.steps_used += used;
        p->st.steps_total += total;
        p->st.compute_ns += ns;
        p->st.padding_sum += (double)used / (double)total;
        for (b = 0; b + 1 < RNND_POOL_SIZE_BUCKETS && n > rnnd_pool_size_bounds[b]; b++)
                ;
        p->st.size_buckets[b]++;
        for (b = 0; b + 1 < RNND_POOL_PADDING_BUCKETS &&
                    (double)used > rnnd_pool_padding_bounds[b] * (double)total;
             b++)
                ;
        p->st.padding_buckets[b]++;
        p->by_size[n - 1].count++;
        p->by_size[n - 1].ns += ns;
}

/* Completes every queued job with err.  Called with mu held. */
static void fail_queued_locked(rnnd_pool_t *p, const rnnd_error_t *err, rnnd_job_t **done)
{
        struct rnnd_bseq *node;

        while ((node = rnnd_batcher_oldest(p->batcher)) != NULL)
                fail_job(p, jobseq(node)->job, err, done);
}

/*
 * Takes every GPU instance out of service after a device fault (why); with
 * none left in service, fails every queued job.  Called with mu held.
 */
static void gpus_lost_locked(rnnd_pool_t *p, const char *why, rnnd_job_t **done)
{
        p->gpus_lost = true;
        for (unsigned i = 0; i < p->started; i++) {
                struct worker *w = &p->workers[i];

                if (w->inst.opts.device >= 0 && w->in_service) {
                        w->in_service = false;
                        p->st.in_service--;
                }
        }
        if (p->st.in_service == 0) {
                rnnd_error_t e;

                rnnd_error_set(&e, RNND_EUNAVAIL, "model '%s': no instance in service (%s)",
                               p->m->name, why);
                fail_queued_locked(p, &e, done);
        }
        pthread_cond_broadcast(&p->work);
}

/* The run of w's batch ended with r.  Called with mu held. */
static void ran_locked(rnnd_pool_t *p, struct worker *w, uint32_t n, int r, const rnnd_error_t *err,
                       rnnd_job_t **done)
{
        if (r == RNND_EDEVLOST) {
                if (w->in_service) { /* the reporting instance, whatever its kind */
                        w->in_service = false;
                        p->st.in_service--;
                }
                for (uint32_t i = 0; i < n; i++)
                        rnnd_batcher_push(p->batcher, &w->picked[i]->node);
                gpus_lost_locked(p, err->msg, done);
                return;
        }
        for (uint32_t i = 0; i < n; i++) {
                rnnd_job_t *job = w->picked[i]->job;

                if (r < 0)
                        fail_job(p, job, err, done);
                finish_seqs(job, 1, done);
        }
}

/* Points w->seqs at the picked sequences' buffers. */
static void gather(struct worker *w, uint32_t n, struct rnnd_batch *b)
{
        for (uint32_t i = 0; i < n; i++) {
                const struct rnnd_pool_jobseq *s = w->picked[i];

                w->seqs[i] = s->job->batch.seqs[s->index];
        }
        b->seqs = w->seqs;
        b->n = n;
}

/*
 * Whether the next due time, for one of the waiting workers, comes before
 * the wakeup of every waiting worker, so that one must be woken.  A worker
 * that wakes by then anyway forms the batch itself: a sequence that joins a
 * batch still waiting out its delay wakes nobody.  Called with mu held, some
 * worker waiting.
 */
static bool due_before_waits_locked(const rnnd_pool_t *p)
{
        uint64_t due = due_locked(p, rnnd_now_ns(), p->waiting - 1);

        for (unsigned i = 0; i < p->started; i++) {
                const struct worker *w = &p->workers[i];

                if (w->waiting && w->wait_due <= due)
                        return false;
        }
        return true;
}

static void wait_work(rnnd_pool_t *p, struct worker *w, uint64_t due)
{
        p->waiting++;
        w->waiting = true;
        w->wait_due = due;
        if (due == UINT64_MAX) {
                pthread_cond_wait(&p->work, &p->mu);
        } else {
                struct timespec ts = {.tv_sec = (time_t)(due / 1000000000u),
                                      .tv_nsec = (long)(due % 1000000000u)};

                pthread_cond_timedwait(&p->work, &p->mu, &ts);
        }
        w->waiting = false;
        p->waiting--;
}

/*
 * Opens w's instance on its worker and tells the pool how that went (a GPU
 * instance that fails is out of service; rnnd_pool_new serves on the
 * others).  Returns 0 or the open's error, with the pool's mu held.
 */
static int open_instance(struct worker *w)
{
        rnnd_pool_t *p = w->pool;
        rnnd_error_t err = {0};
        int r = w->inst.ops->open(p->m, &w->inst.opts, &w->plan, &err);

        if (r == 0) {
                w->inst.ops->describe(w->plan, &w->desc);
        } else if (w->inst.opts.device >= 0) {
                snprintf(w->desc.backend, sizeof(w->desc.backend), "%s", w->inst.ops->name);
                snprintf(w->desc.device, sizeof(w->desc.device), "GPU %d", w->inst.opts.device);
                snprintf(w->desc.why_not_cudnn, sizeof(w->desc.why_not_cudnn),
                         "out of service: GPU %d failed to open: %.200s", w->inst.opts.device,
                         err.msg);
        }
        pthread_mutex_lock(&p->mu);
        if (r < 0 && w->inst.opts.device >= 0) {
                w->in_service = false;
                if (p->n_failed_gpu++ == 0)
                        p->open_err = err; /* reported if no instance opens */
        } else if (r < 0 && p->open_status == 0) {
                p->open_status = r;
                p->open_err = err;
        }
        p->n_open++;
        pthread_cond_broadcast(&p->opened);
        return r;
}

/*
 * Runs the n sequences form_locked() gave w, outside the lock, and answers
 * the jobs that ended.  Called and returns with mu held.
 */
static void run_formed_locked(rnnd_pool_t *p, struct worker *w, uint32_t n)
{
        rnnd_job_t *done = NULL;
        struct rnnd_batch batch;
        rnnd_error_t err = {0};
        uint64_t t0, t1;
        bool tell;
        int r;

        p->st.running++;
        /*
         * What is left may be due before any idle worker wakes (a burst, a
         * flush, or a remainder this worker would have waited for): pass the
         * word.
         */
        if (p->waiting > 0 && rnnd_batcher_count(p->batcher) > 0 &&
            (p->closed || due_before_waits_locked(p)))
                pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->mu);

        gather(w, n, &batch);
        t0 = rnnd_now_ns();
        r = w->inst.ops->run(w->plan, &batch, &err);
        t1 = rnnd_now_ns();
        if (r < 0 && err.code == 0)
                rnnd_error_set(&err, r, "model '%s': %s", p->m->name, rnnd_strerror(r));

        pthread_mutex_lock(&p->mu);
        record_batch(p, w, n, t1 - t0);
        p->run_ns = ewma(p->run_ns, t1 - t0);
        /* Whether this instance would have been busy anyway: work came while it ran. */
        if (rnnd_batcher_count(p->batcher) > 0)
                p->backlog += (1024 - p->backlog) / 8;
        else
                p->backlog -= p->backlog / 8;
        tell = r == RNND_EDEVLOST && !p->gpus_lost;
        ran_locked(p, w, n, r, &err, &done);
        if (p->opts.adaptive_delay) {
                uint32_t jobs = 0;

                for (const rnnd_job_t *j = done; j != NULL; j = j->next_)
                        jobs++;
                answered_locked(p, t1, jobs);
        }
        if (--p->st.running == 0)
                pthread_cond_broadcast(&p->idle);
        if (done != NULL || tell) {
                pthread_mutex_unlock(&p->mu);
                if (tell && p->opts.fault != NULL)
                        p->opts.fault(p->opts.fault_arg, &err);
                complete(done);
                pthread_mutex_lock(&p->mu);
        }
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        rnnd_pool_t *p = w->pool;

        if (open_instance(w) < 0) {
                pthread_mutex_unlock(&p->mu);
                return NULL;
        }
        while (!p->stopping && w->in_service) {
                rnnd_job_t *done = NULL;
                uint32_t n = form_locked(p, w, rnnd_now_ns(), &done);

                if (done != NULL) {
                        /* Canceled or expired jobs: answer them, then look again. */
                        pthread_mutex_unlock(&p->mu);
                        complete(done);
                        pthread_mutex_lock(&p->mu);
                        if (n == 0)
                                continue;
                }
                if (n == 0) {
                        wait_work(p, w, due_locked(p, rnnd_now_ns(), p->waiting));
                        continue;
                }
                run_formed_locked(p, w, n);
        }
        pthread_mutex_unlock(&p->mu);
        return NULL;
}

static int check_opts(const rnnd_model_t *m, const struct rnnd_pool_opts *o, rnnd_error_t *reterr)
{
        if (o->n_instances == 0 || o->instances == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "a pool needs at least one instance");
        for (unsigned i = 0; i < o->n_instances; i++)
                if (o->instances[i].ops == NULL)
                        return rnnd_error_set(reterr, RNND_EINVAL, "instance %u has no backend", i);
        if (o->max_queue == 0 || o->max_batch_size == 0)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "a pool needs a queue and a batch of at least 1");
        if (o->levels == 0 || o->levels > RNND_BATCHER_MAX_LEVELS)
                return rnnd_error_set(reterr, RNND_EINVAL, "priority levels %u outside 1..%u",
                                      o->levels, RNND_BATCHER_MAX_LEVELS);
        if (o->max_batch_steps < m->cfg.max_sequence_length)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "max_batch_steps %llu is less than max_sequence_length %u",
                                      (unsigned long long)o->max_batch_steps,
                                      m->cfg.max_sequence_length);
        return 0;
}

int rnnd_pool_new(rnnd_model_t *m, const struct rnnd_pool_opts *opts, rnnd_pool_t **ret,
                  rnnd_error_t *reterr)
{
        struct rnnd_batcher_params bp = {
                .max_batch_size = opts->max_batch_size,
                .max_batch_steps = opts->max_batch_steps,
                .delay_ns = opts->max_queue_delay_ns,
                .max_len = m->cfg.max_sequence_length,
                .levels = opts->levels,
                /* Room for batches pushed back after a device failed. */
                .capacity = opts->max_queue + opts->n_instances * opts->max_batch_size,
        };
        rnnd_pool_t *p;
        int r;

        r = check_opts(m, opts, reterr);
        if (r < 0)
                return r;
        p = rnnd_calloc(1, sizeof(*p));
        if (p == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a pool");
        p->m = rnnd_model_ref(m);
        p->opts = *opts;
        p->sweep_due = UINT64_MAX;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->opened, NULL);
        pthread_cond_init(&p->idle, NULL);
        {
                pthread_condattr_t ca;

                pthread_condattr_init(&ca);
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                pthread_cond_init(&p->work, &ca);
                pthread_condattr_destroy(&ca);
        }
        p->workers = rnnd_calloc(opts->n_instances, sizeof(*p->workers));
        p->by_size = rnnd_calloc(opts->max_batch_size, sizeof(*p->by_size));
        if (p->workers == NULL || p->by_size == NULL || rnnd_batcher_new(&bp, &p->batcher) < 0) {
                rnnd_pool_free(p);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a pool");
        }
        for (unsigned i = 0; i < opts->n_instances; i++) {
                struct worker *w = &p->workers[i];

                w->pool = p;
                w->inst = opts->instances[i];
                w->in_service = true;
                w->picked = rnnd_calloc(opts->max_batch_size, sizeof(*w->picked));
                w->seqs = rnnd_calloc(opts->max_batch_size, sizeof(*w->seqs));
                if (w->picked == NULL || w->seqs == NULL) {
                        r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a pool");
                        break;
                }
        }
        p->opts.instances = NULL; /* copied into the workers */
        for (unsigned i = 0; r == 0 && i < opts->n_instances; i++) {
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
        /* A GPU that failed to open leaves the model on the others; a CPU failure fails it. */
        if (r == 0 && (p->open_status < 0 || p->n_failed_gpu == p->started)) {
                r = p->open_status < 0 ? p->open_status : p->open_err.code;
                r = r < 0 ? r : RNND_EGPU;
                if (reterr != NULL)
                        *reterr = p->open_err;
        }
        p->st.in_service = p->started - p->n_failed_gpu;
        pthread_mutex_unlock(&p->mu);
        if (r < 0) {
                rnnd_pool_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

static int check_job(const rnnd_pool_t *p, const rnnd_job_t *job, rnnd_error_t *reterr)
{
        uint32_t n = job->batch.n;

        if (n == 0 || n > p->opts.max_queue)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "%u sequences: a job has 1..%u (the queue's size)", n,
                                      p->opts.max_queue);
        if (job->level >= p->opts.levels)
                return rnnd_error_set(reterr, RNND_EINVAL, "priority level %u is outside 0..%u",
                                      job->level, p->opts.levels - 1);
        for (uint32_t i = 0; i < n; i++) {
                uint32_t len = job->batch.seqs[i].len;

                if (len == 0 || len > p->m->cfg.max_sequence_length)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "sequence %u: length %u is outside 1..%u", i, len,
                                              p->m->cfg.max_sequence_length);
        }
        return 0;
}

/*
 * Whether n more sequences fit.  A batch pushed back after a device failed
 * may leave more than max_queue waiting.  Called with mu held.
 */
static bool room_locked(const rnnd_pool_t *p, uint32_t n)
{
        uint32_t q = rnnd_batcher_count(p->batcher) + p->held;

        return q < p->opts.max_queue && n <= p->opts.max_queue - q;
}

/*
 * Why a submit of n sequences is refused, or 0.  A full queue is first rid
 * of the jobs whose client has gone.  Called with mu held.
 */
static int admit_locked(rnnd_pool_t *p, uint32_t n, bool held, uint64_t now, rnnd_job_t **done,
                        rnnd_error_t *reterr)
{
        if (!p->closed && !room_locked(p, n))
                reap_gone_locked(p, now, done);
        /*
         * A closed pool still runs what it accepted (the drain, docs/OPERATIONS.md),
         * and a job that held its place was accepted when it took it: only a
         * stopped pool refuses it.
         */
        if (p->closed && (!held || p->stopping))
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "model '%s' is shutting down",
                                      p->m->name);
        if (p->st.in_service == 0)
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "model '%s': no instance in service",
                                      p->m->name);
        if (!room_locked(p, n))
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "model '%s': queue full (%u of %u sequences waiting)",
                                      p->m->name, rnnd_batcher_count(p->batcher),
                                      p->opts.max_queue);
        return 0;
}

uint64_t rnnd_pool_deadline(const rnnd_pool_t *p, const rnnd_job_t *job, uint64_t since)
{
        uint64_t timeout = p->opts.queue_timeout_ns;

        if (job->timeout_ns != 0 && (timeout == 0 || job->timeout_ns < timeout))
                timeout = job->timeout_ns;
        if (timeout == 0)
                return 0;
        /* A timeout of centuries saturates rather than wraps. */
        return timeout < UINT64_MAX - 1 - since ? since + timeout : UINT64_MAX - 1;
}

void rnnd_pool_sweep_by(rnnd_pool_t *p, uint64_t deadline)
{
        bool wake = false;

        pthread_mutex_lock(&p->mu);
        if (deadline != 0 && deadline < p->sweep_due) {
                p->sweep_due = deadline;
                wake = true;
        }
        pthread_mutex_unlock(&p->mu);
        if (wake && p->opts.wakeup != NULL)
                p->opts.wakeup(p->opts.wakeup_arg);
}

int rnnd_pool_held_expired(rnnd_pool_t *p, rnnd_job_t *job, uint64_t now, rnnd_error_t *reterr)
{
        pthread_mutex_lock(&p->mu);
        if (job->held)
                p->held -= p->held > 0;
        job->held = false;
        p->st.expired++;
        pthread_mutex_unlock(&p->mu);
        return expired_error(p, now, job->since_ns < now ? job->since_ns : now, reterr);
}

int rnnd_pool_submit(rnnd_pool_t *p, rnnd_job_t *job, rnnd_error_t *reterr)
{
        uint32_t n = job->batch.n;
        uint64_t now, since, deadline;
        rnnd_job_t *done = NULL;
        bool wake = false, held;
        int r;

        r = check_job(p, job, reterr);
        if (r == 0 && (job->seqs_ = rnnd_calloc(n, sizeof(*job->seqs_))) == NULL)
                r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for %u sequences", n);
        if (r < 0) {
                if (job->held) /* refused: its place goes back */
                        rnnd_pool_hold(p, -1, NULL);
                job->held = false;
                return r;
        }
        now = rnnd_now_ns();
        since = job->since_ns != 0 && job->since_ns < now ? job->since_ns : now;
        deadline = rnnd_pool_deadline(p, job, since);
        job->queued_ns = since;
        job->started_ns = job->finished_ns = 0;
        job->remaining_ = n;
        job->status_ = 0;
        memset(&job->err_, 0, sizeof(job->err_));
        job->next_ = NULL;
        job->asked_ = 0;
        for (uint32_t i = 0; i < n; i++) {
                struct rnnd_pool_jobseq *s = &job->seqs_[i];

                s->job = job;
                s->index = i;
                s->node.len = job->batch.seqs[i].len;
                s->node.level = job->level;
                s->node.arrival_ns = since; /* past its deadline: expired at once */
                s->node.deadline_ns = deadline;
        }

        pthread_mutex_lock(&p->mu);
        held = job->held;
        if (held) { /* its place is in the queue now */
                p->held -= p->held > 0;
                job->held = false;
        }
        r = admit_locked(p, n, held, now, &done, reterr);
        if (r < 0) {
                p->st.rejected++;
                pthread_mutex_unlock(&p->mu);
                complete(done);
                rnnd_free(job->seqs_);
                job->seqs_ = NULL;
                return r;
        }
        for (uint32_t i = 0; i < n; i++)
                rnnd_batcher_push(p->batcher, &job->seqs_[i].node);
        if (p->last_ns != 0)
                p->gap_ns = ewma(p->gap_ns, now - p->last_ns);
        p->last_ns = now;
        if (deadline != 0 && deadline < p->sweep_due) {
                p->sweep_due = deadline;
                wake = true;
        }
        if (p->waiting > 0 && due_before_waits_locked(p))
                pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->mu);
        complete(done);
        if (wake && p->opts.wakeup != NULL)
                p->opts.wakeup(p->opts.wakeup_arg);
        return 0;
}

int rnnd_pool_hold(rnnd_pool_t *p, int delta, rnnd_error_t *reterr)
{
        int r = 0;

        pthread_mutex_lock(&p->mu);
        if (delta < 0)
                p->held -= p->held > 0;
        else if (p->closed)
                r = rnnd_error_set(reterr, RNND_EUNAVAIL, "model '%s' is shutting down",
                                   p->m->name);
        else if (!room_locked(p, 1))
                r = rnnd_error_set(reterr, RNND_EUNAVAIL,
                                   "model '%s': queue full (%u of %u sequences waiting, %u of "
                                   "them chunks behind their sequence's running one)",
                                   p->m->name, rnnd_batcher_count(p->batcher) + p->held,
                                   p->opts.max_queue, p->held);
        else
                p->held++;
        if (r < 0)
                p->st.rejected++;
        pthread_mutex_unlock(&p->mu);
        return r;
}

void rnnd_pool_expect(rnnd_pool_t *p, int delta)
{
        pthread_mutex_lock(&p->mu);
        /* A request begun may be a client answered lately coming back. */
        if (delta > 0)
                returned_locked(p, p->ans_n - returning_locked(p, rnnd_now_ns()) + (uint32_t)delta);
        if (delta >= 0)
                p->expected += (uint32_t)delta;
        else
                p->expected -= (uint32_t)-delta <= p->expected ? (uint32_t)-delta : p->expected;
        /* Less to come: a part batch kept waiting for it may be due now. */
        if (delta < 0 && p->waiting > 0 && rnnd_batcher_count(p->batcher) > 0 &&
            due_before_waits_locked(p))
                pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->mu);
}

uint64_t rnnd_pool_sweep(rnnd_pool_t *p)
{
        rnnd_job_t *done = NULL;
        uint64_t next;

        pthread_mutex_lock(&p->mu);
        expire_locked(p, rnnd_now_ns(), &done);
        next = rnnd_batcher_next_deadline(p->batcher);
        p->sweep_due = next;
        pthread_mutex_unlock(&p->mu);
        complete(done);
        return next;
}

void rnnd_pool_gpus_lost(rnnd_pool_t *p, const char *why)
{
        rnnd_job_t *done = NULL;

        pthread_mutex_lock(&p->mu);
        if (!p->gpus_lost)
                gpus_lost_locked(p, why, &done);
        pthread_mutex_unlock(&p->mu);
        complete(done);
}

void rnnd_pool_describe(const rnnd_pool_t *p, unsigned i, struct rnnd_backend_desc *ret)
{
        *ret = p->workers[i < p->started ? i : 0].desc;
}

uint32_t rnnd_pool_queued(rnnd_pool_t *p)
{
        uint32_t q;

        pthread_mutex_lock(&p->mu);
        q = rnnd_batcher_count(p->batcher);
        pthread_mutex_unlock(&p->mu);
        return q;
}

void rnnd_pool_stats(rnnd_pool_t *p, struct rnnd_pool_stats *ret)
{
        pthread_mutex_lock(&p->mu);
        *ret = p->st;
        ret->queued = rnnd_batcher_count(p->batcher);
        pthread_mutex_unlock(&p->mu);
}

uint32_t rnnd_pool_size_stats(rnnd_pool_t *p, struct rnnd_pool_size_stat *ret, uint32_t n)
{
        if (n > p->opts.max_batch_size)
                n = p->opts.max_batch_size;
        pthread_mutex_lock(&p->mu);
        memcpy(ret, p->by_size, n * sizeof(*ret));
        pthread_mutex_unlock(&p->mu);
        return n;
}

void rnnd_pool_progress(rnnd_pool_t *p, struct rnnd_pool_progress *ret)
{
        pthread_mutex_lock(&p->mu);
        ret->queued = rnnd_batcher_count(p->batcher);
        ret->running = p->st.running;
        ret->completed = p->st.batches; /* ok or failed: record_batch counts both */
        ret->closed = p->closed;
        pthread_mutex_unlock(&p->mu);
}

void rnnd_pool_close(rnnd_pool_t *p)
{
        pthread_mutex_lock(&p->mu);
        p->closed = true;
        pthread_cond_broadcast(&p->work); /* flush: no waiting for fuller batches */
        pthread_mutex_unlock(&p->mu);
}

void rnnd_pool_stop(rnnd_pool_t *p)
{
        rnnd_job_t *done = NULL;
        rnnd_error_t err;

        rnnd_error_set(&err, RNND_EUNAVAIL, "model '%s' is shutting down", p->m->name);
        pthread_mutex_lock(&p->mu);
        p->closed = true;
        p->stopping = true;
        if (p->batcher != NULL)
                fail_queued_locked(p, &err, &done);
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        complete(done);
        pthread_mutex_lock(&p->mu);
        while (p->st.running > 0)
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
                p->workers[i].inst.ops->close(p->workers[i].plan);
        }
        for (unsigned i = 0; p->workers != NULL && i < p->opts.n_instances; i++) {
                rnnd_free(p->workers[i].picked);
                rnnd_free(p->workers[i].seqs);
        }
        pthread_cond_destroy(&p->idle);
        pthread_cond_destroy(&p->opened);
        pthread_cond_destroy(&p->work);
        pthread_mutex_destroy(&p->mu);
        rnnd_batcher_free(p->batcher);
        rnnd_model_unref(p->m);
        rnnd_free(p->by_size);
        rnnd_free(p->workers);
        rnnd_free(p);
        return NULL;
}
