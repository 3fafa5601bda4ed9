/*
 * repoapi.c: the model repository extension's routes (repoapi.h).
 *
 * Index reads the table under its read lock and answers at once.  Load and
 * unload suspend the request and queue an operation for the loop thread
 * (reload.c), which answers when the table has changed; a load reads the
 * model's directory again, whatever the policy of SIGHUP reloads.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reload.h"
#include "repo.h"
#include "repoapi.h"
#include "repository.h"
#include "server.h"
#include "strbuf.h"

/*
 * The model name of /v2/repository/models/{m}/{load,unload} into buf
 * [RNND_CFG_NAME_MAX]; false when it is not a model's name.
 */
static bool path_model(const struct rnnd_http_request *r, char *buf)
{
        static const char prefix[] = "/v2/repository/models/";
        const char *s = r->path + sizeof(prefix) - 1, *end;
        size_t n;

        if (strncmp(r->path, prefix, sizeof(prefix) - 1) != 0 || (end = strchr(s, '/')) == NULL)
                return false;
        n = (size_t)(end - s);
        if (n >= RNND_CFG_NAME_MAX)
                return false;
        memcpy(buf, s, n);
        buf[n] = '\0';
        return rnnd_repository_valid_name(buf);
}

unsigned rnnd_repoapi_check(struct rnnd_http_request *r)
{
        const char *auth = rnnd_http_request_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
        const char *cl = rnnd_http_request_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);

        if (!rnnd_reload_authorized(r->srv->reload, auth)) {
                rnnd_log_req(RNND_LOG_WARNING, r->id, "%s %s: %s bearer token; answering 401",
                             r->method, r->path, auth == NULL ? "no" : "a wrong");
                rnnd_http_fail(r, RNND_EAUTH,
                               "this route needs the bearer token of "
                               "auth_token_file (Authorization: Bearer TOKEN)");
                rnnd_http_respond_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                         "Bearer realm=\"rnnd\"");
                return r->resp_status;
        }
        if (cl != NULL && strlen(cl) > 0 &&
            (strlen(cl) > 10 || strtoull(cl, NULL, 10) > RNND_REPO_MAX_BODY)) {
                rnnd_http_fail(r, RNND_ETOOBIG, "a repository request's body is at most %u bytes",
                               RNND_REPO_MAX_BODY);
                return r->resp_status;
        }
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

static void serve_index(struct rnnd_http_request *r, const struct rnnd_repo_request *q)
{
        struct rnnd_server *srv = r->srv;
        struct rnnd_strbuf b;
        size_t len;
        char *body;

        rnnd_strbuf_init(&b);
        rnnd_strbuf_putc(&b, '[');
        rnnd_models_rdlock(&srv->models);
        for (size_t i = 0; i < srv->models.n_models; i++) {
                const struct rnnd_served_model *m = srv->models.models[i];

                put_model_rows(&b, m, q->ready,
                               atomic_load(&m->loading) ||
                                       rnnd_reload_pending(srv->reload, m->entry->name));
        }
        rnnd_models_unlock(&srv->models);
        rnnd_strbuf_putc(&b, ']');
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

        if (rnnd_http_listening(&r->srv->http)) {
                if (msg == NULL)
                        rnnd_http_respond(r, status, "text/plain; charset=utf-8", NULL, 0);
                else
                        rnnd_http_respond_error(r, status, "%s", msg);
                rnnd_http_resume(r);
        }
        rnnd_http_request_unref(r);
}

void rnnd_repoapi_serve(struct rnnd_http_request *r)
{
        struct rnnd_repo_request q;
        enum rnnd_repo_call call = r->route == RNND_ROUTE_REPO_INDEX  ? RNND_REPO_INDEX
                                   : r->route == RNND_ROUTE_REPO_LOAD ? RNND_REPO_LOAD
                                                                      : RNND_REPO_UNLOAD;
        char name[RNND_CFG_NAME_MAX];
        rnnd_error_t err = {0};
        size_t len;
        const char *body = rnnd_http_request_body(r, &len);
        int ret;

        ret = rnnd_repo_request_parse(call, body != NULL ? body : "", body != NULL ? len : 0, &q,
                                      &err);
        if (ret < 0) {
                rnnd_http_fail(r, ret, "%s", err.msg);
                return;
        }
        if (call == RNND_REPO_INDEX) {
                serve_index(r, &q);
                return;
        }
        if (!path_model(r, name)) {
                rnnd_http_fail(r, RNND_EINVAL,
                               "not a model name: the name of a directory of the "
                               "repository ([A-Za-z0-9_.-], at most %u bytes)",
                               RNND_CFG_NAME_MAX - 1);
                return;
        }
        if (atomic_load(&r->srv->http.stopping)) {
                rnnd_http_fail(r, RNND_EUNAVAIL, "the server is shutting down");
                return;
        }
        /* Suspend first, publish second: the loop thread may answer at once. */
        rnnd_http_suspend(r);
        ret = rnnd_reload_submit(r->srv->reload,
                                 call == RNND_REPO_LOAD ? RNND_RELOAD_LOAD : RNND_RELOAD_UNLOAD,
                                 name, load_done, rnnd_http_request_ref(r), &err);
        if (ret < 0) {
                rnnd_http_request_unref(r);
                rnnd_http_fail(r, ret, "%s", err.msg);
                rnnd_http_resume(r);
        }
}
