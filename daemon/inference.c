/*
 * inference.c: the inference hook.
 *
 * DESIGN
 * On the MHD thread, handle() parses the body (proto/), binds it to the
 * model's config, allocates zeroed outputs, and points one rnnd_seq per
 * sequence at its slices of the inputs and outputs: the engine reads and
 * writes in place, with no gather.  Then it takes a reference on the HTTP
 * request, suspends the connection, and only then submits the job
 * (DESIGN.md §2: suspend first, publish second).  The worker that ran the
 * job resumes the connection and drops its reference; the MHD thread that
 * handles the resumed request renders the response (prepare_outputs).
 * The per-request state lives in the HTTP request's data, so it is freed
 * with the request's last reference, whichever side drops it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "clock.h"
#include "decimal.h"
#include "http.h"
#include "inference.h"
#include "log.h"
#include "infer.h"

struct rnnd_inference {
        struct rnnd_infer_request req;
        struct rnnd_infer_bound bound;
        struct rnnd_infer_outputs outs;
        struct rnnd_seq *seqs; /* [B] */
        rnnd_job_t job;
        struct rnnd_server *srv;                  /* borrowed */
        struct rnnd_served_version *sv;           /* borrowed from the server */
        const struct rnnd_inference_owner *owner; /* the front end's; set by start */
        void *owner_cls;                          /* handed to owner's functions */
        struct rnnd_http_request *http;           /* HTTP's: a reference while queued */
        enum rnnd_server_protocol proto;          /* HTTP's: which API to answer in */
        uint64_t t_start_ns;                      /* the request began */
        uint64_t reserved;                        /* of srv->answer_bytes, until freed */
        uint64_t input_ns;                        /* parse, bind and allocate took */
        /* A chunk of a stateful sequence (issue 17; docs/DESIGN.md §6). */
        struct rnnd_stream *stream;  /* the live sequence, or NULL; guarded by streams_mu */
        bool stream_start;           /* sequence_start: the state starts again here */
        bool stream_end;             /* sequence_end: the state goes after this chunk */
        size_t lh, lc;               /* floats of h and c in the state */
        float *state;                /* [2 * (lh + lc)]: h0, c0, then h_n, c_n when not asked */
        struct rnnd_inference *next; /* queued behind the running chunk; guarded by streams_mu */
        bool stream_held;            /* queued, its owner not yet set: guarded by streams_mu */
        int stream_turn;             /* what came while held: 1 run, RNND_ETIMEDOUT expired,
                                        other < 0 refused; ditto */
        uint64_t wait_deadline;      /* waiting, with a deadline: when; ditto */
        struct rnnd_inference *timed_next, **timed_pprev; /* in sv->streams_timed; ditto */
};

/* Most chunks of one sequence that may wait behind its running chunk. */
#define STREAM_MAX_WAITING 16

void rnnd_inference_record(struct rnnd_inference *c, int status, uint64_t output_ns)
{
        struct rnnd_version_stats *st = &c->sv->stats;
        const rnnd_job_t *j = &c->job;
        uint64_t total = rnnd_now_ns() - c->t_start_ns;
        struct timespec wall;

        if (status < 0) {
                rnnd_metrics_stat_add(&st->fail, total);
                return;
        }
        rnnd_metrics_stat_add(&st->success, total);
        rnnd_metrics_stat_add(&st->queue, j->started_ns - j->queued_ns);
        rnnd_metrics_stat_add(&st->compute_input, c->input_ns);
        rnnd_metrics_stat_add(&st->compute_infer, j->finished_ns - j->started_ns);
        rnnd_metrics_stat_add(&st->compute_output, output_ns);
        rnnd_metrics_hist_add(&st->request_h, total);
        rnnd_metrics_hist_add(&st->queue_h, j->started_ns - j->queued_ns);
        rnnd_metrics_hist_add(&st->compute_h, j->finished_ns - j->started_ns);
        clock_gettime(CLOCK_REALTIME, &wall);
        atomic_store_explicit(&st->last_inference_ms,
                              (uint64_t)wall.tv_sec * 1000u + (uint64_t)wall.tv_nsec / 1000000u,
                              memory_order_relaxed);
}

struct rnnd_inference *rnnd_inference_free(struct rnnd_inference *c)
{
        if (c == NULL)
                return NULL;
        if (c->reserved != 0)
                atomic_fetch_sub_explicit(&c->srv->answer_bytes, c->reserved, memory_order_relaxed);
        rnnd_infer_outputs_done(&c->outs);
        rnnd_infer_bound_done(&c->bound);
        rnnd_infer_request_done(&c->req);
        rnnd_free(c->seqs);
        rnnd_free(c->state);
        rnnd_free(c);
        return NULL;
}

static void ctx_free(void *data)
{
        rnnd_inference_free(data);
}

/* Renders the outputs in the request's protocol; on failure answers 500. */
static void respond_outputs(struct rnnd_inference *c)
{
        const struct rnnd_served_version *sv = c->sv;
        rnnd_error_t err = {0};
        char *body = NULL;
        size_t len = 0, json_len = 0;
        int r;

        if (c->proto == RNND_SERVER_KSERVE_V2)
                r = rnnd_kserve_render(sv->owner->entry->name, sv->version,
                                       c->req.has_id ? c->req.id : NULL, &c->outs, &body, &len,
                                       &json_len, &err);
        else
                r = rnnd_tfs_render(&c->outs, &body, &len, &err);
        if (r < 0) {
                rnnd_log_req(RNND_LOG_ERR, rnnd_http_request_id(c->http),
                             "cannot render the response: %s", err.msg);
                rnnd_http_fail_err(c->http, r, &err);
                return;
        }
        if (c->proto == RNND_SERVER_KSERVE_V2 && json_len < len) {
                char hdr[32];

                snprintf(hdr, sizeof(hdr), "%zu", json_len);
                if (rnnd_http_respond_tensors(c->http, 200, "application/octet-stream", body,
                                              len) == 0)
                        rnnd_http_respond_header(c->http, "Inference-Header-Content-Length", hdr);
                return;
        }
        rnnd_http_respond_tensors(c->http, 200, "application/json", body, len);
}

/* Under the pool's lock, before a batch runs the job's sequences or when the queue is full. */
static bool job_alive(rnnd_job_t *job)
{
        struct rnnd_inference *c = job->udata;

        return c->owner->alive == NULL || c->owner->alive(c->owner_cls);
}

/*
 * The request's priority and timeout parameters (the schedule-policy
 * extension): priority 0 is the model's default level, 1 the highest.
 */
static int schedule(struct rnnd_inference *c, const struct rnnd_model_config *cfg,
                    rnnd_error_t *reterr)
{
        const struct rnnd_infer_params *q = &c->req.params;
        uint32_t levels = cfg->batching.priority_levels;

        if (q->priority < 0 || q->priority > (int64_t)levels)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "parameters.priority: %" PRId64 " is outside 0..%" PRIu32
                                      " (0 = the model's default, %" PRIu32 ", 1 = the highest)",
                                      q->priority, levels, cfg->batching.default_priority_level);
        c->job.level =
                (q->priority == 0 ? cfg->batching.default_priority_level : (uint32_t)q->priority) -
                1;
        /* It only shortens the model's queue_timeout_us: a longer one is as good as none. */
        c->job.timeout_ns = q->timeout_us > UINT64_MAX / 1000 ? UINT64_MAX : q->timeout_us * 1000;
        return 0;
}

/* MHD thread, as the resumed request is handled again: render what the job computed. */
static void prepare_outputs(struct rnnd_http_request *http)
{
        struct rnnd_inference *c = rnnd_http_request_data(http);
        uint64_t t = rnnd_now_ns();
        rnnd_error_t err = {0};
        int r = rnnd_inference_write_shm(c, &err);

        if (r < 0) {
                rnnd_log_req(RNND_LOG_INFO, rnnd_http_request_id(http), "model %s: %s",
                             c->sv->owner->entry->name, err.msg);
                rnnd_http_fail_err(http, r, &err);
                rnnd_inference_record(c, r, 0);
                return;
        }
        respond_outputs(c);
        rnnd_inference_record(c, 0, rnnd_now_ns() - t);
}

static void stream_done(struct rnnd_inference *c, int status);

/*
 * Worker thread (or the loop's sweep, or a submit that canceled it): the job
 * ran, or failed; the front end answers.
 */
static void job_done(rnnd_job_t *job, int status, const rnnd_error_t *err)
{
        struct rnnd_inference *c = job->udata;

        if (c->stream != NULL)
                stream_done(c, status);            /* the next chunk of its sequence may run now */
        c->owner->done(c->owner_cls, status, err); /* may free c */
}

/*
 * Stateful sequences (issue 17; docs/DESIGN.md §6).  The state lives in
 * host memory, in the version's table (engine/seqtab.h): a chunk is bound
 * with it as h0/c0 and runs as an ordinary one-sequence job, so chunks of
 * different sequences batch together on any backend; when it ends, its
 * h_n/c_n become the state, and the next chunk of the same sequence, which
 * waited behind it, is submitted.  The table's lock (streams_mu) is never
 * held across a submit, since a submit may complete other jobs.
 */

/* Between two expiry sweeps of a table. */
#define STREAM_SWEEP_NS UINT64_C(1000000000)

static struct rnnd_seq_id stream_id(const struct rnnd_infer_params *q)
{
        struct rnnd_seq_id id = {.num = q->sequence_id};

        snprintf(id.str, sizeof(id.str), "%s", q->sequence_id_str);
        return id;
}

/*
 * Points the chunk's one sequence at the state: h0/c0 copied from its
 * sequence, h_n/c_n into the outputs asked for or else c->state's second
 * half.  Under streams_mu.
 */
static void stream_load(struct rnnd_inference *c)
{
        struct rnnd_seq *q = &c->seqs[0];
        float *const *out = c->outs.by_kind;
        float *in = c->state, *scratch = c->state + c->lh + c->lc;

        memcpy(in, c->stream->state, (c->lh + c->lc) * sizeof(float));
        q->h0 = in;
        q->c0 = c->lc > 0 ? in + c->lh : NULL;
        q->h_n = out[RNND_OUT_H_N] != NULL ? out[RNND_OUT_H_N] : scratch;
        q->c_n = c->lc == 0                  ? NULL
                 : out[RNND_OUT_C_N] != NULL ? out[RNND_OUT_C_N]
                                             : scratch + c->lh;
}

/* Submits c's job; a refusal answers it at once, as a failed job. */
static void submit(struct rnnd_inference *c)
{
        rnnd_error_t err = {0};
        int r = rnnd_pool_submit(c->sv->pool, &c->job, &err);

        if (r < 0)
                job_done(&c->job, r, &err);
}

/* Appends c to s's chunks waiting behind the running one.  Under streams_mu. */
static int stream_wait(struct rnnd_inference *c, struct rnnd_stream *s, rnnd_error_t *reterr)
{
        struct rnnd_inference **pp = (struct rnnd_inference **)&s->waiting;

        if (s->n_waiting >= STREAM_MAX_WAITING)
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "%d chunks of this sequence wait already behind the running "
                                      "one; send the next when one is answered",
                                      STREAM_MAX_WAITING);
        if (rnnd_pool_hold(c->sv->pool, +1, reterr) < 0)
                return RNND_EUNAVAIL; /* it counts in the model's queue (max_queue_size) */
        c->job.held = true;
        c->job.since_ns = rnnd_now_ns(); /* its timeout counts from its arrival */
        while (*pp != NULL)
                pp = &(*pp)->next;
        *pp = c;
        s->n_waiting++;
        c->stream = s;
        c->stream_held = true; /* until its owner is set: rnnd_inference_start() */
        c->wait_deadline = rnnd_pool_deadline(c->sv->pool, &c->job, c->job.since_ns);
        if (c->wait_deadline != 0) { /* answered at it, not at its turn: infer_sweep() */
                c->timed_next = c->sv->streams_timed;
                if (c->timed_next != NULL)
                        c->timed_next->timed_pprev = &c->timed_next;
                c->timed_pprev = (struct rnnd_inference **)&c->sv->streams_timed;
                c->sv->streams_timed = c;
                rnnd_pool_sweep_by(c->sv->pool, c->wait_deadline);
        }
        return 0;
}

/* c leaves the chunks waiting with a deadline, if it was one.  Under streams_mu. */
static void stream_untime(struct rnnd_inference *c)
{
        if (c->timed_pprev == NULL)
                return;
        *c->timed_pprev = c->timed_next;
        if (c->timed_next != NULL)
                c->timed_next->timed_pprev = c->timed_pprev;
        c->timed_next = NULL;
        c->timed_pprev = NULL;
}

/* A start's state: zeros, or the request's h0/c0.  Under streams_mu. */
static void stream_initial_state(const struct rnnd_inference *c, struct rnnd_stream *s)
{
        const struct rnnd_infer_bound *b = &c->bound;

        if (b->h0 != NULL)
                memcpy(s->state, b->h0, c->lh * sizeof(float));
        if (b->c0 != NULL && c->lc > 0)
                memcpy(s->state + c->lh, b->c0, c->lc * sizeof(float));
}

/*
 * A chunk on the MHD thread, its job ready to submit: starts or finds its
 * sequence and loads the state; *queued when a chunk of it is running (c
 * then waits behind it and is submitted by stream_done()).
 */
static int stream_begin(struct rnnd_inference *c, const struct rnnd_model_config *cfg, bool *queued,
                        rnnd_error_t *reterr)
{
        struct rnnd_served_version *sv = c->sv;
        const struct rnnd_infer_params *q = &c->req.params;
        const struct rnnd_infer_bound *b = &c->bound;
        struct rnnd_seq_id id = stream_id(q);
        uint64_t now = rnnd_now_ns();
        struct rnnd_stream *s = NULL;
        enum rnnd_seq_gone why;
        bool running = false;
        int r = 0;

        *queued = false;
        if (sv->streams == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "this model serves no sequences");
        if (!q->sequence_start && (b->h0 != NULL || b->c0 != NULL))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "h0/c0: only the chunk with sequence_start sets a "
                                      "sequence's state; rnnd keeps it from chunk to chunk");
        rnnd_modelcfg_state_size(cfg, &c->lh, &c->lc);
        c->state = rnnd_calloc(2 * (c->lh + c->lc), sizeof(float));
        if (c->state == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        c->stream_start = q->sequence_start;
        c->stream_end = q->sequence_end;
        pthread_mutex_lock(&sv->streams_mu);
        if (now - sv->streams_swept_ns > STREAM_SWEEP_NS) {
                rnnd_seqtab_expire(sv->streams, now);
                sv->streams_swept_ns = now;
        }
        if (q->sequence_start && (s = rnnd_seqtab_peek(sv->streams, &id)) != NULL && s->busy) {
                running = true; /* a start queues behind its id's running chunk, as in Triton */
        } else if (q->sequence_start) {
                r = rnnd_seqtab_start(sv->streams, &id, now, &s, reterr);
                if (r == 0)
                        stream_initial_state(c, s);
        } else {
                s = rnnd_seqtab_find(sv->streams, &id, now, &running, &why, reterr);
                r = s != NULL ? 0 : RNND_EINVAL;
        }
        if (r == 0 && running) {
                r = stream_wait(c, s, reterr);
                *queued = r == 0;
        } else if (r == 0) {
                c->stream = s;
                stream_load(c);
        }
        pthread_mutex_unlock(&sv->streams_mu);
        return r;
}

/* Answers c (waiting behind a chunk that ended the sequence) 400. */
static void stream_refuse_one(struct rnnd_inference *c)
{
        rnnd_error_t err = {0};

        rnnd_pool_hold(c->sv->pool, -1, NULL); /* its place, taken by stream_wait() */
        c->job.held = false;
        rnnd_error_set(&err, RNND_EINVAL,
                       "this sequence has ended: a chunk before this one had sequence_end");
        job_done(&c->job, RNND_EINVAL, &err);
}

static void stream_expire_one(struct rnnd_inference *c, uint64_t now);

/* Answers every chunk of list: expired (RNND_ETIMEDOUT) or refused 400. */
static void stream_answer(struct rnnd_inference *list, int status, uint64_t now)
{
        while (list != NULL) {
                struct rnnd_inference *c = list;

                list = c->next;
                c->next = NULL;
                if (status == RNND_ETIMEDOUT)
                        stream_expire_one(c, now);
                else
                        stream_refuse_one(c);
        }
}

/*
 * Answers c, which waited behind its sequence's running chunk past its
 * deadline, as a job expired in the queue is (docs/HTTP.md, "timeout"):
 * never run, it leaves its sequence as if it had not come.
 */
static void stream_expire_one(struct rnnd_inference *c, uint64_t now)
{
        rnnd_error_t err = {0};
        int r = rnnd_pool_held_expired(c->sv->pool, &c->job, now, &err);

        job_done(&c->job, r, &err);
}

/*
 * c, out of its sequence's waiting chunks, is past its deadline: onto
 * *expired, or left to stream_unhold() while held.  Under streams_mu.
 */
static void stream_timed_out(struct rnnd_inference *c, struct rnnd_inference **expired)
{
        c->stream = NULL;
        if (c->stream_held) {
                c->stream_turn = RNND_ETIMEDOUT; /* stream_unhold() answers it */
                return;
        }
        c->next = *expired;
        *expired = c;
}

/*
 * The next chunk waiting behind s's running one, out of the list; those
 * past their deadline go to stream_timed_out() instead, never run.  Under
 * streams_mu.
 */
static struct rnnd_inference *stream_pop(struct rnnd_stream *s, uint64_t now,
                                         struct rnnd_inference **expired)
{
        struct rnnd_inference *c;

        while ((c = s->waiting) != NULL) {
                s->waiting = c->next;
                s->n_waiting--;
                c->next = NULL;
                stream_untime(c);
                if (c->wait_deadline == 0 || c->wait_deadline > now)
                        return c;
                stream_timed_out(c, expired);
        }
        return NULL;
}

/* Takes c out of its sequence's waiting chunks.  Under streams_mu. */
static void stream_unwait(struct rnnd_inference *c)
{
        struct rnnd_inference **pp = (struct rnnd_inference **)&c->stream->waiting;

        while (*pp != NULL && *pp != c)
                pp = &(*pp)->next;
        if (*pp == c) {
                *pp = c->next;
                c->stream->n_waiting--;
        }
        c->next = NULL;
        stream_untime(c);
}

/*
 * The loop's queue-timeout sweep of sv (server.h, sweep): answers the chunks
 * that waited behind their sequence's running chunk past their deadline, as
 * the pool's expired jobs are (docs/HTTP.md, "timeout").
 */
static uint64_t infer_sweep(void *cls, struct rnnd_served_version *sv)
{
        struct rnnd_inference *c, *next, *expired = NULL;
        uint64_t now = rnnd_now_ns(), due = UINT64_MAX;

        (void)cls;
        if (sv->streams == NULL)
                return UINT64_MAX;
        pthread_mutex_lock(&sv->streams_mu);
        for (c = sv->streams_timed; c != NULL; c = next) {
                next = c->timed_next;
                if (c->wait_deadline > now) {
                        due = c->wait_deadline < due ? c->wait_deadline : due;
                        continue;
                }
                stream_unwait(c);
                stream_timed_out(c, &expired);
        }
        pthread_mutex_unlock(&sv->streams_mu);
        stream_answer(expired, RNND_ETIMEDOUT, now);
        return due;
}

/*
 * A chunk queued behind its sequence's running one is its owner's now
 * (rnnd_inference_start() set the job and published it): if its turn came
 * meanwhile, stream_done() left it to this, which runs or refuses it.
 */
static void stream_unhold(struct rnnd_inference *c)
{
        int turn;

        pthread_mutex_lock(&c->sv->streams_mu);
        c->stream_held = false;
        turn = c->stream_turn;
        pthread_mutex_unlock(&c->sv->streams_mu);
        if (turn > 0)
                submit(c);
        else if (turn == RNND_ETIMEDOUT)
                stream_expire_one(c, rnnd_now_ns());
        else if (turn < 0)
                stream_refuse_one(c);
}

/*
 * c's job ended (status 0: it ran): its h_n/c_n become the state, and the
 * next chunk of the sequence runs, or the sequence is released (removed
 * after a chunk with sequence_end).  Chunks of one id run in arrival order,
 * as Triton's sequence batcher runs them: after an end, a queued start
 * begins the id again, and queued continuations before it are refused 400.
 * Any thread; not under a pool's lock.
 */
static void stream_done(struct rnnd_inference *c, int status)
{
        struct rnnd_served_version *sv = c->sv;
        struct rnnd_stream *s = c->stream;
        struct rnnd_inference *next = NULL, *refused = NULL, **tail = &refused, *expired = NULL;
        bool ended = status == 0 && c->stream_end;
        uint64_t now = rnnd_now_ns();

        c->stream = NULL;
        pthread_mutex_lock(&sv->streams_mu);
        if (status == 0) {
                memcpy(s->state, c->seqs[0].h_n, c->lh * sizeof(float));
                if (c->lc > 0)
                        memcpy(s->state + c->lh, c->seqs[0].c_n, c->lc * sizeof(float));
        }
        while ((next = stream_pop(s, now, &expired)) != NULL) {
                if (!ended || next->stream_start)
                        break;
                next->stream = NULL; /* a continuation of the sequence that just ended */
                if (next->stream_held) {
                        next->stream_turn = RNND_EINVAL; /* stream_unhold() answers it */
                        continue;
                }
                *tail = next;
                tail = &next->next;
        }
        if (next == NULL) {
                rnnd_seqtab_release(sv->streams, s, ended, now);
        } else {
                if (next->stream_start) {
                        rnnd_seqtab_restart(sv->streams, s, ended, now);
                        stream_initial_state(next, s);
                }
                next->stream = s;
                stream_load(next);
                if (next->stream_held) {
                        next->stream_turn = 1; /* stream_unhold() submits it */
                        next = NULL;
                }
        }
        pthread_mutex_unlock(&sv->streams_mu);
        stream_answer(expired, RNND_ETIMEDOUT, now);
        stream_answer(refused, RNND_EINVAL, now);
        if (next != NULL)
                submit(next);
}

/* Parses a decimal Inference-Header-Content-Length; false when malformed. */
static bool parse_header_len(const char *s, size_t *ret)
{
        uint64_t v;

        if (rnnd_decimal_parse(s, &v) < 0 || v > SIZE_MAX)
                return false;
        *ret = (size_t)v;
        return true;
}

/* Reads the inputs that name a region from it, before bind checks them. */
static int read_shm(struct rnnd_inference *c, rnnd_error_t *reterr)
{
        struct rnnd_infer_request *q = &c->req;
        char what[32];
        int r;

        for (unsigned i = 0; i < q->n_inputs; i++) {
                if (q->input_shm[i].region[0] == '\0')
                        continue;
                snprintf(what, sizeof(what), "inputs[%u]", i);
                r = rnnd_shm_read(&c->srv->shm, &q->input_shm[i], q->inputs[i].data,
                                  q->inputs[i].nbytes, what, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * Marks the outputs the request asked to have in a region (c->outs.shm) and
 * checks that each fits its region, before the inference runs.
 */
static int plan_shm(struct rnnd_inference *c, rnnd_error_t *reterr)
{
        struct rnnd_infer_outputs *o = &c->outs;
        char what[RNND_INFER_NAME_MAX + 32];
        int r;

        for (unsigned i = 0; i < o->n; i++)
                for (unsigned j = 0; j < c->req.n_outputs; j++) {
                        const struct rnnd_requested_output *ro = &c->req.outputs[j];

                        if (ro->shm.region[0] == '\0' || strcmp(ro->name, o->t[i].name) != 0)
                                continue;
                        snprintf(what, sizeof(what), "outputs[%u] '%s'", j, ro->name);
                        r = rnnd_shm_check_write(&c->srv->shm, &ro->shm, o->t[i].nbytes, what,
                                                 reterr);
                        if (r < 0)
                                return r;
                        o->shm[i] = &ro->shm;
                }
        return 0;
}

int rnnd_inference_write_shm(struct rnnd_inference *c, rnnd_error_t *reterr)
{
        const struct rnnd_infer_outputs *o = &c->outs;
        char what[RNND_INFER_NAME_MAX + 32];
        int r;

        for (unsigned i = 0; i < o->n; i++) {
                if (o->shm[i] == NULL)
                        continue;
                snprintf(what, sizeof(what), "output '%s'", o->t[i].name);
                r = rnnd_shm_write(&c->srv->shm, o->shm[i], o->t[i].data, o->t[i].nbytes, what,
                                   reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Fills c->seqs from the bound inputs and the allocated outputs. */
static int make_batch(struct rnnd_inference *c, rnnd_error_t *reterr)
{
        const struct rnnd_infer_bound *b = &c->bound;
        const struct rnnd_infer_outputs *o = &c->outs;

        c->seqs = rnnd_calloc(b->B, sizeof(*c->seqs));
        if (c->seqs == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for %u sequences", b->B);
        for (size_t i = 0; i < b->B; i++) {
                struct rnnd_seq *q = &c->seqs[i];
                float *const *out = o->by_kind;

                q->len = b->lengths[i];
                q->x = b->input != NULL ? b->input + i * b->input_stride : NULL;
                q->tokens = b->tokens != NULL ? b->tokens + i * b->tokens_stride : NULL;
                q->h0 = b->h0 != NULL ? b->h0 + i * b->h0_stride : NULL;
                q->c0 = b->c0 != NULL ? b->c0 + i * b->c0_stride : NULL;
                q->y = out[RNND_OUT_OUTPUT] ? out[RNND_OUT_OUTPUT] + i * o->stride[RNND_OUT_OUTPUT]
                                            : NULL;
                q->h_n = out[RNND_OUT_H_N] ? out[RNND_OUT_H_N] + i * o->stride[RNND_OUT_H_N] : NULL;
                q->c_n = out[RNND_OUT_C_N] ? out[RNND_OUT_C_N] + i * o->stride[RNND_OUT_C_N] : NULL;
                q->scores = out[RNND_OUT_SCORES]
                                    ? out[RNND_OUT_SCORES] + i * o->stride[RNND_OUT_SCORES]
                                    : NULL;
        }
        c->job.batch.seqs = c->seqs;
        c->job.batch.n = b->B;
        return 0;
}

/* The front ends' side: one inference from its request to its answer (inference.h). */

int rnnd_inference_new(struct rnnd_server *srv, struct rnnd_served_version *sv,
                       struct rnnd_inference **ret)
{
        struct rnnd_inference *c = rnnd_calloc(1, sizeof(*c));

        if (c == NULL)
                return RNND_ENOMEM;
        c->srv = srv;
        c->sv = sv;
        c->t_start_ns = rnnd_now_ns();
        *ret = c;
        return 0;
}

struct rnnd_infer_request *rnnd_inference_request(struct rnnd_inference *c)
{
        return &c->req;
}

const struct rnnd_infer_outputs *rnnd_inference_outputs(const struct rnnd_inference *c)
{
        return &c->outs;
}

void rnnd_inference_limits(const struct rnnd_server *srv, struct rnnd_infer_limits *ret)
{
        rnnd_infer_limits_default(ret);
        ret->max_elements = srv->opts->max_tensor_elements;
        ret->max_depth = (unsigned)srv->opts->max_json_depth;
        ret->max_tree = srv->opts->max_json_memory;
}

/*
 * Takes n bytes of max_response_memory for c's answer until c is freed, or
 * fails with 503 (docs/HTTP.md "Limits"); one answer is let in when nothing
 * else is held, however large.
 */
static int reserve(struct rnnd_inference *c, uint64_t n, rnnd_error_t *reterr)
{
        atomic_uint_fast64_t *held = &c->srv->answer_bytes;
        uint64_t max = c->srv->opts->max_response_memory;
        uint_fast64_t cur = atomic_load_explicit(held, memory_order_relaxed);

        do {
                if (cur != 0 && (cur > max || n > max - cur))
                        return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                              "answers not yet read by their clients hold %" PRIu64
                                              " bytes of max_response_memory (%" PRIu64
                                              "), and this one could take %" PRIu64 " more",
                                              (uint64_t)cur, max, n);
        } while (!atomic_compare_exchange_weak_explicit(held, &cur, cur + n, memory_order_relaxed,
                                                        memory_order_relaxed));
        c->reserved = n;
        return 0;
}

int rnnd_inference_start(struct rnnd_inference *c, const struct rnnd_inference_owner *owner,
                         void *owner_cls, rnnd_error_t *reterr)
{
        const struct rnnd_model_config *cfg = &c->sv->owner->entry->cfg;
        bool queued = false;
        uint64_t held = 0;
        int ret;

        ret = read_shm(c, reterr);
        if (ret < 0)
                return ret;
        ret = rnnd_infer_bind(&c->req, cfg, &c->bound, reterr);
        if (ret < 0)
                return ret;
        ret = rnnd_infer_outputs_check(&c->bound, cfg, c->srv->opts->max_response_bytes, &held,
                                       reterr);
        if (ret < 0)
                return ret;
        ret = reserve(c, held, reterr);
        if (ret < 0)
                return ret;
        ret = rnnd_infer_outputs_alloc(&c->bound, cfg, &c->outs, reterr);
        if (ret < 0)
                return ret;
        ret = plan_shm(c, reterr);
        if (ret < 0)
                return ret;
        ret = make_batch(c, reterr);
        if (ret < 0)
                return ret;
        ret = schedule(c, cfg, reterr);
        if (ret < 0)
                return ret;

        /* Last, since a sequence's chunk holds its sequence from here on. */
        if (rnnd_infer_is_sequence(&c->req.params)) {
                ret = stream_begin(c, cfg, &queued, reterr);
                if (ret < 0)
                        return ret;
        }

        c->input_ns = rnnd_now_ns() - c->t_start_ns;
        c->job.done = job_done;
        c->job.alive = job_alive;
        c->job.udata = c;
        c->owner = owner;
        c->owner_cls = owner_cls;
        if (owner->publish != NULL)
                owner->publish(owner_cls);
        if (queued)
                stream_unhold(c); /* its turn may have come since stream_begin() */
        else
                submit(c); /* refused at once (queue full, stopping): answered now */
        return 0;
}

/* The HTTP side: the inference hook (server.h). */

/* Under the pool's lock: whether the client of the suspended request is there. */
static bool http_alive(void *cls)
{
        return !rnnd_http_request_peer_gone(cls);
}

/* Suspend first, publish second (DESIGN.md §2): the engine holds a reference. */
static void http_publish(void *cls)
{
        struct rnnd_http_request *r = cls;
        struct rnnd_inference *c = rnnd_http_request_data(r);

        c->http = rnnd_http_request_ref(r);
        rnnd_http_suspend(r);
}

/*
 * Worker thread (or the loop's sweep, or a submit that canceled it): the job
 * ran, or failed.  Rendering waits for the MHD thread, so that the worker
 * goes back to its queue.
 */
static void http_done(void *cls, int status, const rnnd_error_t *err)
{
        struct rnnd_http_request *http = cls;
        struct rnnd_inference *c = rnnd_http_request_data(http);

        if (status < 0) {
                bool expected = status == RNND_EUNAVAIL || status == RNND_ETIMEDOUT ||
                                status == RNND_ECANCELED;

                rnnd_log_req(expected ? RNND_LOG_INFO : RNND_LOG_ERR, rnnd_http_request_id(http),
                             "model %s: %s", c->sv->owner->entry->name, err->msg);
                rnnd_http_fail_err(http, status, err);
                rnnd_inference_record(c, status, 0);
                rnnd_http_resume(http);
        } else {
                rnnd_http_resume_to_prepare(http, prepare_outputs);
        }
        rnnd_http_request_unref(http); /* may free c */
}

static const struct rnnd_inference_owner http_owner = {
        .publish = http_publish, .alive = http_alive, .done = http_done};

/* The body of an HTTP request into c's request, in the route's API. */
static int http_parse(struct rnnd_inference *c, struct rnnd_http_request *r,
                      const struct rnnd_model_config *cfg, rnnd_error_t *reterr)
{
        struct rnnd_infer_limits lim;
        const char *body, *h;
        size_t len, json_len;

        body = rnnd_http_request_body(r, &len);
        if (body == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "the request has no body");
        rnnd_inference_limits(c->srv, &lim);
        if (c->proto != RNND_SERVER_KSERVE_V2)
                return rnnd_tfs_parse(body, len, cfg, &lim, &c->req, reterr);
        h = rnnd_http_request_header(r, "Inference-Header-Content-Length");
        json_len = len;
        if (h != NULL && !parse_header_len(h, &json_len))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "header Inference-Header-Content-Length: not a "
                                      "number: \"%.32s\"",
                                      h);
        return rnnd_kserve_parse(body, len, json_len, &lim, &c->req, reterr);
}

static int infer_handle(void *cls, struct rnnd_http_request *r, struct rnnd_served_version *sv,
                        enum rnnd_server_protocol proto, rnnd_error_t *reterr)
{
        struct rnnd_inference *c;
        int ret;

        if (rnnd_inference_new(cls, sv, &c) < 0)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        c->proto = proto;
        rnnd_http_request_set_data(r, c, ctx_free);
        ret = http_parse(c, r, &sv->owner->entry->cfg, reterr);
        if (ret < 0)
                return ret;
        return rnnd_inference_start(c, &http_owner, r, reterr);
}

static const char *const infer_extensions[] = {"binary_tensor_data", "schedule_policy", "sequence",
                                               NULL};

/*
 * shutdown_timeout passed with requests still waiting: every pool is
 * stopped, so each job still queued completes 503 through job_done (and
 * resumes its request); running batches finish.  Loop thread.
 */
static void infer_drain(void *cls)
{
        struct rnnd_server *srv = cls;

        rnnd_models_pools_close(&srv->models, true);
}

/* After MHD stopped: nothing to join, since the pools' workers end with their models. */
static void infer_stop(void *cls)
{
        (void)cls;
}

void rnnd_inference_hook_init(struct rnnd_server *srv, struct rnnd_server_hook *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->handle = infer_handle;
        ret->drain = infer_drain;
        ret->stop = infer_stop;
        ret->sweep = infer_sweep;
        ret->extensions = infer_extensions;
        ret->cls = srv;
}
