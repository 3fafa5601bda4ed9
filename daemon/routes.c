/*
 * routes.c: the HTTP API (docs/DESIGN.md §5): the route table, one row per
 * route, and the route handler the HTTP layer calls (http.h).
 *
 * A request's path is matched against the table once, at its first call
 * (route.c, pure); a row that names a model has it pinned and its version
 * resolved there, and an inference's pool hears of the body coming.  At the
 * final call the row's handler serves it: the ones below answer from the
 * model the request pinned, with the bodies of v2meta.c and tfsmeta.c, or
 * hand inference to the hook (daemon/inference.c); the repository API's are
 * in repoapi.c.  Unknown paths, models and versions are 404, a wrong method
 * 405 with Allow.  Everything here runs on MHD threads, in the request's own
 * context (struct rnnd_route_req, route.h), and reads the model table only
 * through models.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "log.h"
#include "repoapi.h"
#include "shmreq.h"
#include "routes.h"
#include "server.h"
#include "strbuf.h"
#include "tfsmeta.h"
#include "v2meta.h"

/* Triton answers "not ready" with 400 (http_server.cc), not with an error code's status. */
#define NOT_READY 400u

static void serve_live(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_ready(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_server_metadata(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_model_metadata(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_model_ready(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_model_config(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_model_stats(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_kserve_infer(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_tfs_status(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_tfs_metadata(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_tfs_predict(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_tfs_classify(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_tfs_regress(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_metrics(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_shm_status(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_shm_register(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_shm_unregister(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_cuda_shm_status(struct rnnd_http_request *r, struct rnnd_route_req *q);
static void serve_shm_nothing(struct rnnd_http_request *r, struct rnnd_route_req *q);

#define POST  RNND_ROUTE_POST
#define MODEL RNND_ROUTE_MODEL
#define INFER RNND_ROUTE_INFER
#define QUIET RNND_ROUTE_QUIET
#define REPO  RNND_ROUTE_REPO

/* The table: the first row whose pattern matches (route.h) names the route. */
const struct rnnd_route rnnd_routes_table[] = {
        {"/v2/health/live", QUIET, serve_live},
        {"/v2/health/ready", QUIET, serve_ready},
        {"/v2", 0, serve_server_metadata},
        {"/v2/models/stats", 0, serve_model_stats}, /* every model's, before {model} */
        {"/v2/models/{model}", MODEL, serve_model_metadata},
        {"/v2/models/{model}/ready", MODEL | QUIET, serve_model_ready},
        {"/v2/models/{model}/config", MODEL, serve_model_config},
        {"/v2/models/{model}/infer", POST | MODEL | INFER, serve_kserve_infer},
        {"/v2/models/{model}/stats", MODEL, serve_model_stats},
        {"/v2/repository/index", POST | REPO, rnnd_repoapi_index},
        {"/v2/repository/models/{name}/load", POST | REPO, rnnd_repoapi_load},
        {"/v2/repository/models/{name}/unload", POST | REPO, rnnd_repoapi_unload},
        /* The shared memory extension: the repository API's token and body cap (repoapi.c). */
        {"/v2/systemsharedmemory/status", REPO, serve_shm_status},
        {"/v2/systemsharedmemory/region/{name}/status", REPO, serve_shm_status},
        {"/v2/systemsharedmemory/region/{name}/register", POST | REPO, serve_shm_register},
        {"/v2/systemsharedmemory/unregister", POST | REPO, serve_shm_unregister},
        {"/v2/systemsharedmemory/region/{name}/unregister", POST | REPO, serve_shm_unregister},
        /* CUDA shared memory: none can be registered, so status lists none, unregister has none to
           drop. */
        {"/v2/cudasharedmemory/status", REPO, serve_cuda_shm_status},
        {"/v2/cudasharedmemory/region/{name}/status", REPO, serve_cuda_shm_status},
        {"/v2/cudasharedmemory/unregister", POST | REPO, serve_shm_nothing},
        {"/v2/cudasharedmemory/region/{name}/unregister", POST | REPO, serve_shm_nothing},
        {"/v1/models/{model}:predict", POST | MODEL | INFER, serve_tfs_predict},
        {"/v1/models/{model}:classify", POST | MODEL, serve_tfs_classify},
        {"/v1/models/{model}:regress", POST | MODEL, serve_tfs_regress},
        {"/v1/models/{model}/metadata", MODEL, serve_tfs_metadata},
        {"/v1/models/{model}", MODEL, serve_tfs_status}, /* after its ":verb" rows */
        {"/metrics", QUIET, serve_metrics},
};

#undef POST
#undef MODEL
#undef INFER
#undef QUIET
#undef REPO

const size_t rnnd_routes_table_len = sizeof(rnnd_routes_table) / sizeof(rnnd_routes_table[0]);

/* Matching, at the first call. */

/*
 * An inference request whose body is on its way tells its version's pool,
 * so that a part batch there waits for it rather than for nothing (the
 * pay-to-wait rule, docs/DESIGN.md §6); the pool hears again when the body
 * is in (serve) or the request ends without it (done).  The pool stays
 * valid while the request pins its model.
 */
static void expect_begin(struct rnnd_route_req *q)
{
        if ((q->route->flags & RNND_ROUTE_INFER) && q->version != NULL &&
            q->version->pool != NULL) {
                q->expecting = q->version->pool;
                rnnd_pool_expect(q->expecting, +1);
        }
}

static void expect_end(struct rnnd_route_req *q)
{
        if (q->expecting != NULL)
                rnnd_pool_expect(q->expecting, -1);
        q->expecting = NULL;
}

/* Pins the model a {model} row names and resolves its version; 0, or the 404 prepared. */
static unsigned pin_model(struct rnnd_http_request *r, struct rnnd_route_req *q,
                          const char *version_text)
{
        rnnd_error_t err = {0};
        int st = rnnd_models_pin_named(rnnd_server_models(q->srv), q->name, version_text, &q->model,
                                       &q->version, &err);

        q->version_given = version_text != NULL;
        if (st < 0)
                return (unsigned)rnnd_http_fail_err(r, st, &err);
        expect_begin(q);
        return 0;
}

/*
 * Whether path is TF Serving's /v1/models/{m}/labels/{l}[...]: rnnd has no
 * version labels, which a client is told as gRPC's version_label tells it
 * (docs/HTTP.md), rather than that the path has no route.
 */
static bool is_tfs_label_path(const char *path)
{
        static const char prefix[] = "/v1/models/", labels[] = "/labels/";
        const char *slash;

        if (strncmp(path, prefix, sizeof(prefix) - 1) != 0)
                return false;
        slash = strchr(path + sizeof(prefix) - 1, '/');
        return slash != NULL && slash > path + sizeof(prefix) - 1 &&
               strncmp(slash, labels, sizeof(labels) - 1) == 0 && slash[sizeof(labels) - 1] != '\0';
}

/*
 * Triton's extensions rnnd does not implement, by the paths tritonclient and
 * perf_analyzer use for them: answered 501 saying so (docs/HTTP.md), where
 * "no route" (404) read as a wrong URL.  The extension's words, or NULL.
 */
static const char *unimplemented_extension(const char *path)
{
        static const struct {
                const char *prefix, *what;
        } ext[] = {
                {"/v2/cudasharedmemory", "CUDA shared memory extension (send tensors in the "
                                         "request body)"},
                {"/v2/trace/", "trace extension"},
                {"/v2/logging", "logging extension (rnnd's logging is its settings: rnnd --help)"},
        };
        size_t n = strlen(path);

        for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
                if (strncmp(path, ext[i].prefix, strlen(ext[i].prefix)) == 0)
                        return ext[i].what;
        if (strncmp(path, "/v2/models/", 11) == 0 && n > 25 &&
            strcmp(path + n - 14, "/trace/setting") == 0)
                return ext[1].what;
        return NULL;
}

/*
 * rnnd_routes.match: finds the request's row, and pins the model and
 * resolves the version a path names, at the first call.  Returns 0 to go on
 * reading the body, or prepares an error response (404, 405, the
 * repository API's 401 and 413) and returns its status.
 */
static unsigned match(struct rnnd_http_request *r, void *ctx)
{
        struct rnnd_route_req *q = ctx;
        const char *path = rnnd_http_request_path(r), *method = rnnd_http_request_method(r);
        const char *ext;
        struct rnnd_route_match m;
        char buf[RNND_ROUTE_PATH_MAX + 1];

        q->srv = rnnd_http_request_server(r);
        rnnd_route_match(rnnd_routes_table, rnnd_routes_table_len, path, method, buf, &m);
        if (m.route == NULL && is_tfs_label_path(path))
                return (unsigned)rnnd_http_fail(r, RNND_EINVAL,
                                                "version label in %.200s: rnnd has no version "
                                                "labels; give the version as "
                                                "/v1/models/{model}/versions/{version}",
                                                path);
        if (m.route == NULL && (ext = unimplemented_extension(path)) != NULL)
                return (unsigned)rnnd_http_fail(r, RNND_ENOTIMPL,
                                                "rnnd does not implement Triton's %s; GET /v2 "
                                                "lists the extensions it has",
                                                ext);
        if (m.route == NULL)
                return (unsigned)rnnd_http_fail(r, RNND_ENOTFOUND, "no route for %s %.200s", method,
                                                path);
        q->route = m.route;
        if (!m.method_ok) {
                unsigned st = (unsigned)rnnd_http_fail(
                        r, RNND_EMETHOD, "method %s is not allowed on %s; use %s", method, path,
                        m.route->flags & RNND_ROUTE_POST ? "POST" : "GET");

                rnnd_http_respond_header(r, "Allow", rnnd_route_allow(m.route));
                return st;
        }
        /* A name longer than any model's stays "": no model has it. */
        if (m.name != NULL && strlen(m.name) < sizeof(q->name))
                memcpy(q->name, m.name, strlen(m.name) + 1);
        if (m.route->flags & RNND_ROUTE_REPO)
                return rnnd_repoapi_check(r, q);
        if (!(m.route->flags & RNND_ROUTE_MODEL))
                return 0;
        if (q->name[0] == '\0')
                return (unsigned)rnnd_http_fail(r, RNND_ENOTFOUND, "unknown model '%.200s'",
                                                m.name);
        return pin_model(r, q, m.version);
}

/* Answering. */

/* Prepares b's JSON (stolen) as the response; 500 when b ran out of memory. */
static void respond_json(struct rnnd_http_request *r, unsigned status, struct rnnd_strbuf *b)
{
        size_t len;
        char *body = rnnd_strbuf_steal(b, &len);

        if (body == NULL) {
                rnnd_http_fail(r, RNND_ENOMEM, "out of memory");
                return;
        }
        rnnd_http_respond(r, status, "application/json", body, len);
}

static void respond_empty(struct rnnd_http_request *r, unsigned status)
{
        rnnd_http_respond(r, status, "text/plain; charset=utf-8", NULL, 0);
}

/* The loaded version a model route works on, or NULL after answering why not. */
static struct rnnd_served_version *loaded_version(struct rnnd_http_request *r,
                                                  struct rnnd_route_req *q)
{
        rnnd_error_t err = {0};
        int st = rnnd_models_check_loaded(q->model, q->version, &err);

        if (st < 0) {
                rnnd_http_fail_err(r, st, &err);
                return NULL;
        }
        return q->version;
}

/* A body that describes the loaded version q resolved, rendered by render; else why not. */
static void serve_described(struct rnnd_http_request *r, struct rnnd_route_req *q,
                            void (*render)(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                                           const struct rnnd_served_version *sv))
{
        struct rnnd_served_version *sv = loaded_version(r, q);
        struct rnnd_strbuf b;

        if (sv == NULL)
                return;
        rnnd_strbuf_init(&b);
        render(&b, q->model, sv);
        respond_json(r, 200, &b);
}

/* The handlers, in the table's order. */

static void serve_live(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        (void)q;
        respond_empty(r, 200);
}

static void serve_ready(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        char why[400];

        if (rnnd_server_ready_why(q->srv, why, sizeof(why)))
                respond_empty(r, 200);
        else
                rnnd_http_respond_error(r, NOT_READY, "%s", why);
}

static void serve_server_metadata(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_strbuf b;

        rnnd_strbuf_init(&b);
        rnnd_v2meta_server(&b, rnnd_server_extensions(q->srv), q->srv->shm.max > 0);
        respond_json(r, 200, &b);
}

static void serve_model_metadata(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_described(r, q, rnnd_v2meta_model);
}

static void serve_model_ready(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        rnnd_error_t err = {0};

        if (rnnd_models_check_ready(q->model, q->version, &err) < 0)
                rnnd_http_respond_error(r, NOT_READY, "%s", err.msg);
        else
                respond_empty(r, 200);
}

static void serve_model_config(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_described(r, q, rnnd_v2meta_config);
}

static void serve_model_stats(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_strbuf b;

        rnnd_strbuf_init(&b);
        rnnd_v2meta_stats(&b, rnnd_server_models(q->srv), q->model,
                          q->version_given ? q->version : NULL);
        respond_json(r, 200, &b);
}

/*
 * The model q pinned was replaced (SIGHUP, repository API) while its body
 * came in: pins the build now in the table and resolves the version again,
 * so that the request runs on pools that stay open.  false after answering
 * 404.
 */
static bool repin(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_served_model *old = q->model;
        uint64_t v = q->version_given ? q->version->version : 0;
        char name[RNND_CFG_NAME_MAX];

        snprintf(name, sizeof(name), "%s", old->entry->name);
        q->model = rnnd_models_pin(rnnd_server_models(q->srv), name);
        rnnd_models_unpin(old);
        if (q->model == NULL) {
                rnnd_http_fail(r, RNND_ENOTFOUND,
                               "unknown model '%s' (removed from the repository)", name);
                return false;
        }
        if (!q->version_given) {
                q->version = rnnd_models_latest(q->model);
                return true;
        }
        q->version = rnnd_models_find_version(q->model, v);
        if (q->version == NULL) {
                rnnd_http_fail(r, RNND_ENOTFOUND, "unknown version '%" PRIu64 "' of model '%s'", v,
                               name);
                return false;
        }
        return true;
}

/* The inference routes: everything is checked here, the hook does the rest. */
static void serve_infer(struct rnnd_http_request *r, struct rnnd_route_req *q,
                        enum rnnd_server_protocol proto)
{
        struct rnnd_served_version *sv;
        rnnd_error_t err = {0};
        int ret;

        if (rnnd_http_stopping(rnnd_server_http(q->srv))) {
                rnnd_http_fail(r, RNND_EUNAVAIL, "the server is shutting down");
                return;
        }
        if (atomic_load(&q->model->retired) && !repin(r, q))
                return;
        sv = loaded_version(r, q);
        if (sv == NULL)
                return;
        ret = rnnd_server_infer(q->srv, r, sv, proto, &err);
        if (ret < 0) {
                if (rnnd_http_request_suspended(r)) {
                        /* A hook must not fail after suspending; answer when resumed. */
                        rnnd_log_req(RNND_LOG_ERR, rnnd_http_request_id(r),
                                     "inference hook failed after suspending: %s", err.msg);
                        return;
                }
                rnnd_http_fail_err(r, ret, &err);
        }
}

static void serve_kserve_infer(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_infer(r, q, RNND_SERVER_KSERVE_V2);
}

static void serve_tfs_predict(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_infer(r, q, RNND_SERVER_TFS_PREDICT);
}

static void serve_tfs_status(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_served_model *m = q->model;
        rnnd_error_t err = {0};
        struct rnnd_strbuf b;

        if (rnnd_models_check_model(m, &err) < 0) {
                rnnd_http_fail_err(r, RNND_EUNAVAIL, &err);
                return;
        }
        rnnd_strbuf_init(&b);
        rnnd_tfsmeta_status(&b, m, q->version_given ? q->version : NULL);
        respond_json(r, 200, &b);
}

static void serve_tfs_metadata(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_described(r, q, rnnd_tfsmeta_metadata);
}

/* :classify and :regress: TF Serving's answer for a model whose signature is predict's. */
static void serve_tfs_no_signature(struct rnnd_http_request *r, struct rnnd_route_req *q,
                                   const char *what, const char *verb)
{
        if (loaded_version(r, q) == NULL)
                return;
        rnnd_http_fail(r, RNND_EINVAL,
                       "Expected %s signature method_name to be tensorflow/serving/%s. Was: "
                       "tensorflow/serving/predict",
                       what, verb);
}

static void serve_tfs_classify(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_tfs_no_signature(r, q, "classification", "classify");
}

static void serve_tfs_regress(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        serve_tfs_no_signature(r, q, "regression", "regress");
}

/* The model table as the metrics page walks it (metrics.h), under its lock (models.h). */
struct metrics_walk {
        struct rnnd_metrics_source src;
        struct rnnd_strbuf *b;
        struct rnnd_served_model *const *models;
};

static void metrics_model(void *cls, size_t i, const char **name,
                          const struct rnnd_metrics_counters **requests, size_t *n_versions,
                          bool *load_failed)
{
        const struct rnnd_served_model *m = ((struct metrics_walk *)cls)->models[i];

        *name = m->entry->name;
        *requests = &m->requests;
        *n_versions = m->n_versions;
        *load_failed = !m->unloaded && (m->entry->status < 0 || m->n_versions == 0 ||
                                        m->n_loaded < m->n_versions || m->load_status < 0);
}

static void metrics_version(void *cls, size_t i, size_t j, struct rnnd_metrics_version *ret)
{
        struct rnnd_served_version *sv = &((struct metrics_walk *)cls)->models[i]->versions[j];

        ret->version = sv->version;
        ret->requests = &sv->requests;
        ret->stats = &sv->stats;
        ret->pool = sv->pool;
        ret->descs = sv->descs;
        ret->instances = sv->instances;
        ret->sequences = sv->streams != NULL;
        if (ret->sequences) {
                pthread_mutex_lock(&sv->streams_mu);
                rnnd_seqtab_counts(sv->streams, &ret->seq);
                pthread_mutex_unlock(&sv->streams_mu);
        }
}

static void metrics_page(void *arg, struct rnnd_served_model *const *models, size_t n)
{
        struct metrics_walk *w = arg;

        w->models = models;
        w->src.n_models = n;
        rnnd_metrics_page(w->b, &w->src);
}

static void serve_metrics(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_models *t = rnnd_server_models(q->srv);
        struct rnnd_strbuf b;
        struct metrics_walk w = {
                .src = {.inflight = rnnd_http_inflight(rnnd_server_http(q->srv)),
                        .answer_bytes = atomic_load(&q->srv->answer_bytes),
                        .shm_regions = rnnd_shm_count(&q->srv->shm),
                        .other_requests = rnnd_models_unmatched(t),
                        .model = metrics_model,
                        .version = metrics_version},
                .b = &b,
        };
        size_t n_models, len;
        char *body;

        w.src.cls = &w;
        rnnd_models_counts(t, &n_models, &w.src.models_loaded);
        rnnd_strbuf_init(&b);
        rnnd_models_read(t, metrics_page, &w);
        body = rnnd_strbuf_steal(&b, &len);
        if (body == NULL) {
                rnnd_http_fail(r, RNND_ENOMEM, "out of memory");
                return;
        }
        rnnd_http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
}

/*
 * The system shared memory extension (docs/HTTP.md "Shared memory"): the
 * region a row's {name} names, or "" for every one.  NULL after answering
 * 400 for a name too long to be one (the match left it "").
 */
static const char *shm_name(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        if (q->name[0] == '\0' && strstr(q->route->pattern, "{name}") != NULL) {
                rnnd_http_fail(r, RNND_EINVAL, "a region's name is at most %u bytes",
                               RNND_SHM_NAME_MAX - 1);
                return NULL;
        }
        return q->name;
}

static void serve_shm_status(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        const char *name = shm_name(r, q);
        rnnd_error_t err = {0};
        struct rnnd_strbuf b;
        int st;

        if (name == NULL)
                return;
        rnnd_strbuf_init(&b);
        st = rnnd_shm_status(&q->srv->shm, name, false, &b, &err);
        if (st < 0) {
                rnnd_strbuf_done(&b);
                rnnd_http_fail_err(r, st, &err);
                return;
        }
        respond_json(r, 200, &b);
}

static void serve_shm_register(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        const char *name = shm_name(r, q), *body;
        struct rnnd_shmreq rq;
        rnnd_error_t err = {0};
        size_t len;
        int st;

        if (name == NULL)
                return;
        body = rnnd_http_request_body(r, &len);
        st = rnnd_shmreq_parse(body != NULL ? body : "", body != NULL ? len : 0, &rq, &err);
        if (st == 0)
                st = rnnd_shm_register(&q->srv->shm, name, &rq, &err);
        if (st < 0)
                rnnd_http_fail_err(r, st, &err);
        else
                respond_empty(r, 200);
}

static void serve_shm_unregister(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        const char *name = shm_name(r, q);
        rnnd_error_t err = {0};
        int st;

        if (name == NULL)
                return;
        st = rnnd_shm_unregister(&q->srv->shm, name, &err);
        if (st < 0)
                rnnd_http_fail_err(r, st, &err);
        else
                respond_empty(r, 200);
}

/*
 * rnnd does not implement CUDA shared memory (register is 501), so no CUDA
 * region is ever registered: the status of all is [], of one 404, and
 * unregistering has nothing to do.  perf_analyzer unregisters both kinds
 * when it ends, and takes an error there for its run's failure.
 */
static void serve_cuda_shm_status(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        struct rnnd_strbuf b;

        if (strstr(q->route->pattern, "{name}") == NULL) {
                rnnd_strbuf_init(&b);
                rnnd_strbuf_puts(&b, "[]");
                respond_json(r, 200, &b);
        } else {
                rnnd_http_fail(r, RNND_ENOTFOUND,
                               "no CUDA shared memory region '%.64s' is registered (rnnd does "
                               "not implement CUDA shared memory)",
                               q->name);
        }
}

static void serve_shm_nothing(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        (void)q;
        respond_empty(r, 200);
}

/* The handler the HTTP layer calls. */

/*
 * rnnd_routes.serve: at the final call, the row's handler prepares the
 * response, or for the inference routes calls the hook, which may suspend
 * the request.
 */
static void serve(struct rnnd_http_request *r, void *ctx)
{
        struct rnnd_route_req *q = ctx;

        expect_end(q); /* the body is in */
        q->route->serve(r, q);
}

/*
 * rnnd_routes.done: the request is over (answered, or its client gone): it
 * is counted under its model and version, and the model it pinned is let
 * go, since the engine is done with it.  Health checks and scrapes (QUIET
 * rows) are frequent: they are logged at debug.
 */
static int done(struct rnnd_http_request *r, void *ctx, unsigned status)
{
        struct rnnd_route_req *q = ctx;

        expect_end(q); /* answered early, or the client left while sending */
        if (q->model != NULL)
                rnnd_http_request_log_model(r, q->model->entry->name,
                                            q->version != NULL ? q->version->version : 0);
        rnnd_models_count(rnnd_server_models(rnnd_http_request_server(r)), q->model,
                          q->model != NULL ? q->version : NULL, status);
        q->model = rnnd_models_unpin(q->model);
        return q->route != NULL && (q->route->flags & RNND_ROUTE_QUIET) ? RNND_LOG_DEBUG
                                                                        : RNND_LOG_INFO;
}

/* rnnd_routes.refused: a request answered before routing, counted under no model. */
static void refused(struct rnnd_server *app, unsigned status)
{
        rnnd_models_count(rnnd_server_models(app), NULL, NULL, status);
}

const struct rnnd_route_handler rnnd_routes = {.ctx_size = sizeof(struct rnnd_route_req),
                                               .match = match,
                                               .serve = serve,
                                               .done = done,
                                               .refused = refused};
