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

struct infer_ctx {
        struct rnnd_infer_request req;
        struct rnnd_infer_bound bound;
        struct rnnd_infer_outputs outs;
        struct rnnd_seq *seqs; /* [B] */
        rnnd_job_t job;
        struct rnnd_http_request *http; /* a reference while the job is queued */
        struct rnnd_served_version *sv; /* borrowed from the server */
        enum rnnd_infer_protocol proto;
        uint64_t t_start_ns; /* handle() began */
        uint64_t input_ns;   /* parse, bind and allocate took */
};

/* Records a finished job in its version's statistics. */
static void record(struct infer_ctx *c, int status, uint64_t output_ns)
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

static void ctx_free(void *data)
{
        struct infer_ctx *c = data;

        rnnd_infer_outputs_done(&c->outs);
        rnnd_infer_bound_done(&c->bound);
        rnnd_infer_request_done(&c->req);
        rnnd_free(c->seqs);
        rnnd_free(c);
}

/* Renders the outputs in the request's protocol; on failure answers 500. */
static void respond_outputs(struct infer_ctx *c)
{
        const struct rnnd_served_version *sv = c->sv;
        rnnd_error_t err = {0};
        char *body = NULL;
        size_t len = 0, json_len = 0;
        int r;

        if (c->proto == RNND_INFER_KSERVE_V2)
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
        if (c->proto == RNND_INFER_KSERVE_V2 && json_len < len) {
                char hdr[32];

                snprintf(hdr, sizeof(hdr), "%zu", json_len);
                if (rnnd_http_respond(c->http, 200, "application/octet-stream", body, len) == 0)
                        rnnd_http_respond_header(c->http, "Inference-Header-Content-Length", hdr);
                return;
        }
        rnnd_http_respond(c->http, 200, "application/json", body, len);
}

/* Under the pool's lock, before a batch runs the job's sequences or when the queue is full. */
static bool job_alive(rnnd_job_t *job)
{
        struct infer_ctx *c = job->udata;

        return !rnnd_http_request_peer_gone(c->http);
}

/*
 * The request's priority and timeout parameters (the schedule-policy
 * extension): priority 0 is the model's default level, 1 the highest.
 */
static int schedule(struct infer_ctx *c, const struct rnnd_model_config *cfg, rnnd_error_t *reterr)
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
        if (q->timeout_us > UINT64_MAX / 1000)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "parameters.timeout: %" PRIu64 " microseconds is too long",
                                      q->timeout_us);
        c->job.timeout_ns = q->timeout_us * 1000;
        return 0;
}

/* MHD thread, as the resumed request is handled again: render what the job computed. */
static void prepare_outputs(struct rnnd_http_request *http)
{
        struct infer_ctx *c = rnnd_http_request_data(http);
        uint64_t t = rnnd_now_ns();

        respond_outputs(c);
        record(c, 0, rnnd_now_ns() - t);
}

/*
 * Worker thread (or the loop's sweep, or a submit that canceled it): the job
 * ran, or failed.  Rendering waits for the MHD thread, so that the worker
 * goes back to its queue.
 */
static void job_done(rnnd_job_t *job, int status, const rnnd_error_t *err)
{
        struct infer_ctx *c = job->udata;
        struct rnnd_http_request *http = c->http;

        if (status < 0) {
                bool expected = status == RNND_EUNAVAIL || status == RNND_ETIMEDOUT ||
                                status == RNND_ECANCELED;

                rnnd_log_req(expected ? RNND_LOG_INFO : RNND_LOG_ERR, rnnd_http_request_id(http),
                             "model %s: %s", c->sv->owner->entry->name, err->msg);
                rnnd_http_fail_err(http, status, err);
                record(c, status, 0);
                rnnd_http_resume(http);
        } else {
                rnnd_http_resume_to_prepare(http, prepare_outputs);
        }
        rnnd_http_request_unref(http); /* may free c */
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

/* Fills c->seqs from the bound inputs and the allocated outputs. */
static int make_batch(struct infer_ctx *c, rnnd_error_t *reterr)
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

static int infer_handle(void *cls, struct rnnd_http_request *r, struct rnnd_served_version *sv,
                        enum rnnd_infer_protocol proto, rnnd_error_t *reterr)
{
        struct rnnd_server *srv = cls;
        const struct rnnd_model_config *cfg = &sv->owner->entry->cfg;
        struct rnnd_infer_limits lim;
        struct infer_ctx *c;
        const char *body;
        size_t len, json_len;
        int ret;

        body = rnnd_http_request_body(r, &len);
        if (body == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "the request has no body");
        rnnd_infer_limits_default(&lim);
        lim.max_elements = srv->opts->max_tensor_elements;
        lim.max_depth = (unsigned)srv->opts->max_json_depth;

        c = rnnd_calloc(1, sizeof(*c));
        if (c == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        c->sv = sv;
        c->proto = proto;
        c->t_start_ns = rnnd_now_ns();
        rnnd_http_request_set_data(r, c, ctx_free);

        if (proto == RNND_INFER_KSERVE_V2) {
                const char *h = rnnd_http_request_header(r, "Inference-Header-Content-Length");

                json_len = len;
                if (h != NULL && !parse_header_len(h, &json_len))
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "header Inference-Header-Content-Length: not a "
                                              "number: \"%.32s\"",
                                              h);
                ret = rnnd_kserve_parse(body, len, json_len, &lim, &c->req, reterr);
        } else {
                ret = rnnd_tfs_parse(body, len, cfg, &lim, &c->req, reterr);
        }
        if (ret < 0)
                return ret;
        ret = rnnd_infer_bind(&c->req, cfg, &c->bound, reterr);
        if (ret < 0)
                return ret;
        ret = rnnd_infer_outputs_check(&c->bound, cfg, srv->opts->max_response_bytes, reterr);
        if (ret < 0)
                return ret;
        ret = rnnd_infer_outputs_alloc(&c->bound, cfg, &c->outs, reterr);
        if (ret < 0)
                return ret;
        ret = make_batch(c, reterr);
        if (ret < 0)
                return ret;
        ret = schedule(c, cfg, reterr);
        if (ret < 0)
                return ret;

        c->input_ns = rnnd_now_ns() - c->t_start_ns;
        c->job.done = job_done;
        c->job.alive = job_alive;
        c->job.udata = c;
        c->http = rnnd_http_request_ref(r);
        rnnd_http_suspend(r);
        ret = rnnd_pool_submit(sv->pool, &c->job, reterr);
        if (ret < 0) {
                rnnd_metrics_stat_add(&sv->stats.fail, rnnd_now_ns() - c->t_start_ns);
                /* Refused at once (queue full, stopping): answer now. */
                rnnd_log_req(RNND_LOG_INFO, rnnd_http_request_id(r), "model %s: %s",
                             sv->owner->entry->name, reterr != NULL ? reterr->msg : "");
                rnnd_http_fail_err(r, ret, reterr);
                rnnd_http_resume(r);
                rnnd_http_request_unref(c->http);
        }
        return 0;
}

static const char *const infer_extensions[] = {"binary_tensor_data", "schedule_policy", NULL};

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

void rnnd_infer_hook_init(struct rnnd_server *srv, struct rnnd_infer_hook *ret)
{
        memset(ret, 0, sizeof(*ret));
        ret->handle = infer_handle;
        ret->drain = infer_drain;
        ret->stop = infer_stop;
        ret->extensions = infer_extensions;
        ret->cls = srv;
}
