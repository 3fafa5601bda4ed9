/*
 * repoapi.c: the model repository extension's routes (repoapi.h).
 *
 * Index reads the table under its read lock and answers at once.  Load and
 * unload suspend the request and queue an operation for the loop thread
 * (reload.c), which answers when the table has changed; a load reads the
 * model's directory again and rebuilds the model unless it serves, unchanged
 * since its build (docs/HTTP.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reload.h"
#include "reporeq.h"
#include "repoapi.h"
#include "repository.h"
#include "server.h"
#include "strbuf.h"

unsigned rnnd_repoapi_check(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        const char *auth = rnnd_http_request_header(r, "Authorization");
        const char *cl = rnnd_http_request_header(r, "Content-Length");
        unsigned st;

        if (!rnnd_reload_authorized(rnnd_server_reload(q->srv), auth)) {
                rnnd_log_req(RNND_LOG_WARNING, rnnd_http_request_id(r),
                             "%s %s: %s bearer token; answering 401", rnnd_http_request_method(r),
                             rnnd_http_request_path(r), auth == NULL ? "no" : "a wrong");
                st = (unsigned)rnnd_http_fail(r, RNND_EAUTH,
                                              "this route needs the bearer token of "
                                              "auth_token_file (Authorization: Bearer TOKEN)");
                rnnd_http_respond_header(r, "WWW-Authenticate", "Bearer realm=\"rnnd\"");
                return st;
        }
        if (cl != NULL && strlen(cl) > 0 &&
            (strlen(cl) > 10 || strtoull(cl, NULL, 10) > RNND_REPOREQ_MAX_BODY))
                return (unsigned)rnnd_http_fail(r, RNND_ETOOBIG,
                                                "the body of %s is at most %u bytes",
                                                rnnd_http_request_path(r), RNND_REPOREQ_MAX_BODY);
        return 0;
}

/* One row of the index. */
static void put_row(struct rnnd_strbuf *b, const char *name, uint64_t version, const char *state,
                    const char *reason)
{
        char v[24] = "";

        if (version > 0)
                snprintf(v, sizeof(v), "%" PRIu64, version);
        rnnd_strbuf_json_sep(b);
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "name", name);
        if (version > 0)
                rnnd_strbuf_json_kv_str(b, "version", v);
        rnnd_strbuf_json_kv_str(b, "state", state);
        rnnd_strbuf_json_kv_str(b, "reason", reason);
        rnnd_strbuf_putc(b, '}');
}

/* The rows of model m: one per version it selects (READY, UNAVAILABLE or LOADING). */
static void put_model_rows(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                           bool ready_only, bool loading)
{
        const char *name = m->entry->name;
        char reason[400];
        bool failed_listed = false;

        if (m->unloaded || m->entry->status < 0) {
                const char *why = m->unloaded ? "unloaded" : m->entry->reason;

                if (ready_only)
                        return;
                if (m->unloaded && m->entry->n_versions > 0)
                        for (uint32_t j = 0; j < m->entry->n_versions; j++)
                                put_row(b, name, m->entry->versions[j],
                                        loading ? "LOADING" : "UNAVAILABLE", why);
                else
                        put_row(b, name, 0, loading ? "LOADING" : "UNAVAILABLE", why);
                return;
        }
        for (size_t j = 0; j < m->n_versions; j++) {
                const struct rnnd_served_version *sv = &m->versions[j];
                bool ready = sv->status == 0;

                if (ready_only && !ready)
                        continue;
                reason[0] = '\0';
                if (!ready)
                        snprintf(reason, sizeof(reason), "%s", sv->reason);
                else if (m->load_status < 0)
                        snprintf(reason, sizeof(reason),
                                 "the last load failed (%s); the previous build serves",
                                 m->load_reason);
                failed_listed |= m->load_version == sv->version;
                put_row(b, name, sv->version,
                        loading ? "LOADING"
                        : ready ? "READY"
                                : "UNAVAILABLE",
                        reason);
        }
        if (m->load_status < 0 && m->load_version > 0 && !failed_listed && !ready_only)
                put_row(b, name, m->load_version, "UNAVAILABLE", m->load_reason);
}

struct index_walk {
        struct rnnd_strbuf *b;
        struct rnnd_reload *reload;
        bool ready_only;
};

static void put_index(void *arg, struct rnnd_served_model *const *models, size_t n)
{
        struct index_walk *w = arg;

        for (size_t i = 0; i < n; i++) {
                const struct rnnd_served_model *m = models[i];

                put_model_rows(w->b, m, w->ready_only,
                               atomic_load(&m->loading) ||
                                       rnnd_reload_pending(w->reload, m->entry->name));
        }
}

/* The request's body, parsed for call; false after answering 400. */
static bool parse_body(struct rnnd_http_request *r, enum rnnd_reporeq_call call,
                       struct rnnd_reporeq *ret)
{
        rnnd_error_t err = {0};
        size_t len;
        const char *body = rnnd_http_request_body(r, &len);
        int st = rnnd_reporeq_parse(call, body != NULL ? body : "", body != NULL ? len : 0, ret,
                                    &err);

        if (st < 0)
                rnnd_http_fail(r, st, "%s", err.msg);
        return st == 0;
}

void rnnd_repoapi_index_json(struct rnnd_server *srv, bool ready_only, struct rnnd_strbuf *b)
{
        struct index_walk w = {b, rnnd_server_reload(srv), ready_only};

        rnnd_strbuf_putc(b, '[');
        rnnd_models_read(rnnd_server_models(srv), put_index, &w);
        rnnd_strbuf_putc(b, ']');
}

void rnnd_repoapi_index(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_reporeq rq;
        struct rnnd_strbuf b;
        size_t len;
        char *body;

        if (!parse_body(r, RNND_REPOREQ_INDEX, &rq))
                return;
        rnnd_strbuf_init(&b);
        rnnd_repoapi_index_json(q->srv, rq.ready, &b);
        body = rnnd_strbuf_steal(&b, &len);
        if (body == NULL) {
                rnnd_http_fail(r, RNND_ENOMEM, "out of memory");
                return;
        }
        rnnd_http_respond(r, 200, "application/json", body, len);
}

/*
 * A load or unload's end (reload.h), on the loop thread: answers the
 * suspended request (200 with an empty body, or {"error"}), resumes it and
 * drops the reference submit took.  After MHD stopped (a load outlived the
 * drain) nobody is left to answer.
 */
static void load_done(void *cls, unsigned status, const char *msg)
{
        struct rnnd_http_request *r = cls;

        if (rnnd_http_listening(rnnd_server_http(rnnd_http_request_server(r)))) {
                if (msg == NULL)
                        rnnd_http_respond(r, status, "text/plain; charset=utf-8", NULL, 0);
                else
                        rnnd_http_respond_error(r, status, "%s", msg);
                rnnd_http_resume(r);
        }
        rnnd_http_request_unref(r);
}

int rnnd_repoapi_submit(struct rnnd_server *srv, bool load, const char *name,
                        rnnd_reload_done_fn done, void *cls, void (*publish)(void *cls),
                        rnnd_error_t *reterr)
{
        if (!rnnd_repository_valid_name(name))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "not a model name: the name of a directory of the "
                                      "repository ([A-Za-z0-9_.-], at most %u bytes)",
                                      RNND_CFG_NAME_MAX - 1);
        if (rnnd_http_stopping(rnnd_server_http(srv)))
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "the server is shutting down");
        publish(cls);
        return rnnd_reload_submit(rnnd_server_reload(srv),
                                  load ? RNND_RELOAD_LOAD : RNND_RELOAD_UNLOAD, name, done, cls,
                                  reterr);
}

/* Suspend first, publish second: the loop thread may answer at once. */
static void http_publish(void *cls)
{
        rnnd_http_suspend(rnnd_http_request_ref(cls));
}

/* Load or unload q's model: suspends r until reload.c has done it. */
static void load_or_unload(struct rnnd_http_request *r, struct rnnd_route_req *q,
                           enum rnnd_reporeq_call call)
{
        struct rnnd_reporeq rq;
        rnnd_error_t err = {0};
        int ret;

        if (!parse_body(r, call, &rq))
                return;
        ret = rnnd_repoapi_submit(q->srv, call == RNND_REPOREQ_LOAD, q->name, load_done, r,
                                  http_publish, &err);
        if (ret < 0 && !rnnd_http_request_suspended(r)) {
                rnnd_http_fail(r, ret, "%s", err.msg);
        } else if (ret < 0) {
                rnnd_http_request_unref(r);
                rnnd_http_fail(r, ret, "%s", err.msg);
                rnnd_http_resume(r);
        }
}

void rnnd_repoapi_load(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        load_or_unload(r, q, RNND_REPOREQ_LOAD);
}

void rnnd_repoapi_unload(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        load_or_unload(r, q, RNND_REPOREQ_UNLOAD);
}
