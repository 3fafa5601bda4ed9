/*
 * routes.c: the HTTP API (DESIGN.md §5): which path is which route, and the
 * JSON and Prometheus bodies of the routes that only read the model table.
 *
 *   GET  /v2/health/live, /v2/health/ready            200, or 400 when not ready
 *   GET  /v2                                          server metadata
 *   GET  /v2/models/{m}[/versions/{v}]                model metadata
 *   GET  /v2/models/{m}[/versions/{v}]/ready          200, or 400 when not ready
 *   GET  /v2/models/{m}[/versions/{v}]/config         Triton-style model config
 *   POST /v2/models/{m}[/versions/{v}]/infer          the inference hook
 *   GET  /v1/models/{m}[/versions/{v}]                TF Serving model status
 *   POST /v1/models/{m}[/versions/{v}]:predict        the inference hook
 *   GET  /metrics                                     Prometheus text
 *   POST /v2/repository/...                           repoapi.c
 * Unknown paths, models and versions are 404, a wrong method 405 with Allow.
 * Everything here runs on MHD threads and reads the model a request pinned
 * (immutable), atomics, and the table under its read lock.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "decimal.h"
#include "http-int.h"
#include "log.h"
#include "repoapi.h"
#include "routes.h"
#include "rnnd-config.h"
#include "server.h"
#include "strbuf.h"

#define MAX_SEGMENTS 8
#define PATH_MAX_LEN 1024

/* Triton answers "not ready" with 400 (http_server.cc), not with an error code's status. */
#define NOT_READY 400u

static bool parse_version(const char *s, uint64_t *ret);

static bool route_is_repo(enum rnnd_route rt)
{
        return rt == RNND_ROUTE_REPO_INDEX || rt == RNND_ROUTE_REPO_LOAD ||
               rt == RNND_ROUTE_REPO_UNLOAD;
}

static bool route_is_post(enum rnnd_route rt)
{
        return rt == RNND_ROUTE_MODEL_INFER || rt == RNND_ROUTE_TFS_PREDICT ||
               rt == RNND_ROUTE_TFS_CLASSIFY || rt == RNND_ROUTE_TFS_REGRESS || route_is_repo(rt);
}

/* Resolves r->version in the pinned r->model: the named one, or the latest. */
static bool resolve_version(struct rnnd_http_request *r, const char *version_text)
{
        uint64_t v;

        if (version_text == NULL) {
                r->version = rnnd_models_latest(r->model);
                return true;
        }
        r->version_given = true;
        return parse_version(version_text, &v) &&
               (r->version = rnnd_models_find_version(r->model, v)) != NULL;
}

/* A positive decimal version without leading zeros. */
static bool parse_version(const char *s, uint64_t *ret)
{
        return s[0] >= '1' && s[0] <= '9' && rnnd_decimal_parse(s, ret) == 0;
}

/* Strips a trailing TF Serving ":verb" from s: its route, or the model status without one. */
static enum rnnd_route strip_tfs_verb(char *s)
{
        static const struct {
                const char *verb;
                enum rnnd_route rt;
        } verbs[] = {
                {":predict", RNND_ROUTE_TFS_PREDICT},
                {":classify", RNND_ROUTE_TFS_CLASSIFY},
                {":regress", RNND_ROUTE_TFS_REGRESS},
        };
        size_t n = strlen(s);

        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                size_t k = strlen(verbs[i].verb);

                if (n > k && strcmp(s + n - k, verbs[i].verb) == 0) {
                        s[n - k] = '\0';
                        return verbs[i].rt;
                }
        }
        return RNND_ROUTE_TFS_STATUS;
}

/*
 * Splits path ("/v2/models/m") into its segments, in buf[PATH_MAX_LEN + 1];
 * false for a path that is empty, too long, has too many segments or an
 * empty one ("//", a trailing '/').
 */
static bool split_path(const char *path, char *buf, char **seg, size_t *ret_n)
{
        size_t n = 0, len = strlen(path);
        char *p;

        if (len == 0 || path[0] != '/' || len > PATH_MAX_LEN)
                return false;
        memcpy(buf, path + 1, len);
        for (p = buf; n < MAX_SEGMENTS;) {
                char *slash = strchr(p, '/');

                seg[n++] = p;
                if (slash == NULL)
                        break;
                *slash = '\0';
                p = slash + 1;
                if (n == MAX_SEGMENTS)
                        return false;
        }
        for (size_t i = 0; i < n; i++)
                if (seg[i][0] == '\0')
                        return false;
        *ret_n = n;
        return true;
}

/*
 * ".../models/{m}[/versions/{v}]" from segment 2 on: sets *model and
 * *version (NULL when not given) and returns the index of the segment after.
 */
static size_t model_segments(char **seg, size_t n, const char **model, const char **version)
{
        *model = seg[2];
        if (n >= 5 && strcmp(seg[3], "versions") == 0) {
                *version = seg[4];
                return 5;
        }
        return 3;
}

/* The KServe v2 routes: seg[0] is "v2". */
static enum rnnd_route route_v2(char **seg, size_t n, const char **model, const char **version)
{
        size_t i;

        if (n == 1)
                return RNND_ROUTE_SERVER_META;
        if (n == 3 && strcmp(seg[1], "health") == 0 && strcmp(seg[2], "live") == 0)
                return RNND_ROUTE_HEALTH_LIVE;
        if (n == 3 && strcmp(seg[1], "health") == 0 && strcmp(seg[2], "ready") == 0)
                return RNND_ROUTE_HEALTH_READY;
        if (n == 3 && strcmp(seg[1], "models") == 0 && strcmp(seg[2], "stats") == 0)
                return RNND_ROUTE_MODEL_STATS; /* every model's */
        if (n == 3 && strcmp(seg[1], "repository") == 0 && strcmp(seg[2], "index") == 0)
                return RNND_ROUTE_REPO_INDEX;
        if (n == 5 && strcmp(seg[1], "repository") == 0 && strcmp(seg[2], "models") == 0 &&
            strcmp(seg[4], "load") == 0)
                return RNND_ROUTE_REPO_LOAD; /* the name is checked by repoapi.c */
        if (n == 5 && strcmp(seg[1], "repository") == 0 && strcmp(seg[2], "models") == 0 &&
            strcmp(seg[4], "unload") == 0)
                return RNND_ROUTE_REPO_UNLOAD;
        if (n < 3 || strcmp(seg[1], "models") != 0)
                return RNND_ROUTE_NONE;
        i = model_segments(seg, n, model, version);
        if (n == i)
                return RNND_ROUTE_MODEL_META;
        if (n == i + 1 && strcmp(seg[i], "ready") == 0)
                return RNND_ROUTE_MODEL_READY;
        if (n == i + 1 && strcmp(seg[i], "config") == 0)
                return RNND_ROUTE_MODEL_CONFIG;
        if (n == i + 1 && strcmp(seg[i], "infer") == 0)
                return RNND_ROUTE_MODEL_INFER;
        if (n == i + 1 && strcmp(seg[i], "stats") == 0)
                return RNND_ROUTE_MODEL_STATS;
        return RNND_ROUTE_NONE;
}

/* The TF Serving routes: seg[0] is "v1". */
static enum rnnd_route route_v1(char **seg, size_t n, const char **model, const char **version)
{
        size_t i;

        if (n < 3 || strcmp(seg[1], "models") != 0)
                return RNND_ROUTE_NONE;
        i = model_segments(seg, n, model, version);
        if (n == i)
                return strip_tfs_verb(seg[i - 1]);
        if (n == i + 1 && strcmp(seg[i], "metadata") == 0)
                return RNND_ROUTE_TFS_METADATA;
        return RNND_ROUTE_NONE;
}

/*
 * An inference request whose body is on its way tells its version's pool,
 * so that a part batch there waits for it rather than for nothing (the
 * pay-to-wait rule, docs/DESIGN.md §6); the pool hears again when the body
 * is in (serve) or the request ends without it (done).  The pool stays
 * valid while the request pins its model.
 */
static void expect_begin(struct rnnd_http_request *r)
{
        if ((r->route == RNND_ROUTE_MODEL_INFER || r->route == RNND_ROUTE_TFS_PREDICT) &&
            r->version != NULL && r->version->pool != NULL) {
                r->expecting = r->version->pool;
                rnnd_pool_expect(r->expecting, +1);
        }
}

static void expect_end(struct rnnd_http_request *r)
{
        if (r->expecting != NULL)
                rnnd_pool_expect(r->expecting, -1);
        r->expecting = NULL;
}

/*
 * rnnd_routes.match: resolves r->path and r->method into r->route, and pins
 * the model and resolves the version a path names, at the first call.
 * Returns 0 to go on reading the body, or prepares an error response (404,
 * 405, the repository API's 401 and 413) and returns its status.
 */
static unsigned match(struct rnnd_http_request *r)
{
        char buf[PATH_MAX_LEN + 1], *seg[MAX_SEGMENTS];
        const char *model_name = NULL, *version_text = NULL;
        enum rnnd_route rt = RNND_ROUTE_NONE;
        bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
        bool post = strcmp(r->method, "POST") == 0;
        size_t n = 0;

        if (split_path(r->path, buf, seg, &n)) {
                if (n == 1 && strcmp(seg[0], "metrics") == 0)
                        rt = RNND_ROUTE_METRICS;
                else if (strcmp(seg[0], "v2") == 0)
                        rt = route_v2(seg, n, &model_name, &version_text);
                else if (strcmp(seg[0], "v1") == 0)
                        rt = route_v1(seg, n, &model_name, &version_text);
        }
        if (rt == RNND_ROUTE_NONE) {
                rnnd_http_fail(r, RNND_ENOTFOUND, "no route for %s %.200s", r->method, r->path);
                return r->resp_status;
        }
        r->route = rt;

        if (route_is_post(rt) ? !post : !get) {
                rnnd_http_fail(r, RNND_EMETHOD, "method %s is not allowed on %s; use %s", r->method,
                               r->path, route_is_post(rt) ? "POST" : "GET");
                rnnd_http_respond_header(r, MHD_HTTP_HEADER_ALLOW,
                                         route_is_post(rt) ? "POST" : "GET, HEAD");
                return r->resp_status;
        }

        if (route_is_repo(rt))
                return rnnd_repoapi_check(r);
        if (model_name != NULL) {
                r->model = rnnd_models_pin(&r->srv->models, model_name);
                if (r->model == NULL) {
                        rnnd_http_fail(r, RNND_ENOTFOUND, "unknown model '%s'", model_name);
                        return r->resp_status;
                }
                if (!resolve_version(r, version_text)) {
                        rnnd_http_fail(r, RNND_ENOTFOUND, "unknown version '%s' of model '%s'",
                                       version_text, model_name);
                        return r->resp_status;
                }
                expect_begin(r);
        }
        return 0;
}

/* Bodies. */

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
static struct rnnd_served_version *loaded_version(struct rnnd_http_request *r)
{
        struct rnnd_served_model *m = r->model;
        struct rnnd_served_version *v = r->version;

        if (m->unloaded) {
                /* As Triton: an unloaded model is not found until it is loaded again. */
                rnnd_http_fail(r, RNND_ENOTFOUND,
                               "model '%s' is not loaded (unloaded through the "
                               "repository API)",
                               m->entry->name);
                return NULL;
        }
        if (m->entry->status < 0) {
                rnnd_http_fail(r, RNND_EUNAVAIL, "model '%s' is not available: %s", m->entry->name,
                               m->entry->reason);
                return NULL;
        }
        if (v == NULL) {
                rnnd_http_fail(r, RNND_EUNAVAIL, "model '%s' has no loaded version",
                               m->entry->name);
                return NULL;
        }
        if (v->status < 0) {
                rnnd_http_fail(r, RNND_EUNAVAIL,
                               "version %" PRIu64 " of model '%s' is not available: %s", v->version,
                               m->entry->name, v->reason);
                return NULL;
        }
        return v;
}

/* One input or output tensor, as the model's config implies (DESIGN.md §5). */
struct tensor_desc {
        const char *name;
        const char *datatype; /* KServe v2 name */
        int64_t dims[3];      /* after the batch dimension; -1 = variable */
        unsigned ndims;       /* 0 = one scalar per batch item */
        bool optional;
};

/* Fills io[] with the model's inputs (inputs true) or outputs; returns how many. */
static unsigned model_tensors(const struct rnnd_model_config *cfg, bool inputs,
                              struct tensor_desc io[5])
{
        int64_t dirs = rnnd_model_config_dirs(cfg), hp = rnnd_model_config_out_size(cfg);
        int64_t states = (int64_t)cfg->num_layers * dirs, h = cfg->hidden_size;
        bool lstm = cfg->cell == RNND_CELL_LSTM;
        unsigned n = 0;

        if (inputs) {
                if (cfg->embedding.present)
                        io[n++] = (struct tensor_desc){"tokens", "INT64", {-1}, 1, false};
                else
                        io[n++] = (struct tensor_desc){
                                "input", "FP32", {-1, cfg->input_size}, 2, false};
                io[n++] = (struct tensor_desc){"lengths", "INT64", {0}, 0, true};
                io[n++] = (struct tensor_desc){"h0", "FP32", {states, hp}, 2, true};
                if (lstm)
                        io[n++] = (struct tensor_desc){"c0", "FP32", {states, h}, 2, true};
                return n;
        }
        io[n++] = (struct tensor_desc){"output", "FP32", {-1, dirs * hp}, 2, false};
        io[n++] = (struct tensor_desc){"h_n", "FP32", {states, hp}, 2, false};
        if (lstm)
                io[n++] = (struct tensor_desc){"c_n", "FP32", {states, h}, 2, false};
        if (cfg->head.present) {
                if (cfg->head.apply == RNND_HEAD_ALL)
                        io[n++] = (struct tensor_desc){
                                "scores", "FP32", {-1, cfg->head.units}, 2, false};
                else
                        io[n++] =
                                (struct tensor_desc){"scores", "FP32", {cfg->head.units}, 1, false};
        }
        return n;
}

/* A tensor's shape with the batch dimension -1 first, as KServe metadata gives it. */
static void put_batched_shape(struct rnnd_strbuf *b, const struct tensor_desc *t)
{
        rnnd_strbuf_puts(b, "[-1");
        for (unsigned d = 0; d < t->ndims; d++)
                rnnd_strbuf_printf(b, ",%" PRId64, t->dims[d]);
        rnnd_strbuf_putc(b, ']');
}

/*
 * KServe metadata: [{"name","datatype","shape"}], the batch dimension -1
 * first.  Like /config, it lists the inputs every request carries and not the
 * optional ones (lengths, h0, c0): perf_analyzer sends every input the
 * metadata names, filled with rand() bytes or zeros, and neither is a valid
 * length.  /config's parameters describe the optional inputs (docs/HTTP.md).
 */
static void put_metadata_tensors(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg,
                                 bool inputs)
{
        struct tensor_desc io[5];
        unsigned n = model_tensors(cfg, inputs, io), i;

        rnnd_strbuf_json_key(b, inputs ? "inputs" : "outputs");
        rnnd_strbuf_putc(b, '[');
        for (i = 0; i < n; i++) {
                if (io[i].optional)
                        continue;
                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_str(b, "name", io[i].name);
                rnnd_strbuf_json_kv_str(b, "datatype", io[i].datatype);
                rnnd_strbuf_json_key(b, "shape");
                put_batched_shape(b, &io[i]);
                rnnd_strbuf_putc(b, '}');
        }
        rnnd_strbuf_putc(b, ']');
}

/* Triton config: [{"name","data_type","dims"}] without the batch dimension; as the metadata. */
static void put_config_tensors(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg,
                               bool inputs)
{
        struct tensor_desc io[5];
        unsigned n = model_tensors(cfg, inputs, io), i, d;

        rnnd_strbuf_json_key(b, inputs ? "input" : "output");
        rnnd_strbuf_putc(b, '[');
        for (i = 0; i < n; i++) {
                if (io[i].optional)
                        continue;
                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_str(b, "name", io[i].name);
                rnnd_strbuf_json_key(b, "data_type");
                rnnd_strbuf_printf(b, "\"TYPE_%s\"", io[i].datatype);
                rnnd_strbuf_json_key(b, "dims");
                rnnd_strbuf_putc(b, '[');
                for (d = 0; d < io[i].ndims; d++)
                        rnnd_strbuf_printf(b, "%s%" PRId64, d > 0 ? "," : "", io[i].dims[d]);
                rnnd_strbuf_putc(b, ']');
                if (inputs)
                        rnnd_strbuf_json_kv_bool(b, "optional", false);
                rnnd_strbuf_putc(b, '}');
        }
        rnnd_strbuf_putc(b, ']');
}

static void put_loaded_versions(struct rnnd_strbuf *b, const struct rnnd_served_model *m)
{
        size_t i;

        rnnd_strbuf_json_key(b, "versions");
        rnnd_strbuf_putc(b, '[');
        for (i = 0; i < m->n_versions; i++) {
                if (m->versions[i].status < 0)
                        continue;
                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_printf(b, "\"%" PRIu64 "\"", m->versions[i].version);
        }
        rnnd_strbuf_putc(b, ']');
}

static void serve_model_metadata(struct rnnd_http_request *r)
{
        struct rnnd_served_version *sv = loaded_version(r);
        struct rnnd_strbuf b;

        if (sv == NULL)
                return;
        rnnd_strbuf_init(&b);
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_str(&b, "name", r->model->entry->name);
        put_loaded_versions(&b, r->model);
        rnnd_strbuf_json_kv_str(&b, "platform", rnnd_models_platform(sv));
        put_metadata_tensors(&b, &r->model->entry->cfg, true);
        put_metadata_tensors(&b, &r->model->entry->cfg, false);
        rnnd_strbuf_putc(&b, '}');
        respond_json(r, 200, &b);
}

static void put_string_param(struct rnnd_strbuf *b, const char *key, const char *v)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "string_value", v);
        rnnd_strbuf_putc(b, '}');
}

static void put_u64_param(struct rnnd_strbuf *b, const char *key, uint64_t v)
{
        char s[32];

        snprintf(s, sizeof(s), "%" PRIu64, v);
        put_string_param(b, key, s);
}

/* /config's parameters "optional_input.NAME": "DATATYPE [-1,...]", one per optional input. */
static void put_optional_inputs(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg)
{
        struct tensor_desc io[5];
        unsigned n = model_tensors(cfg, true, io);

        for (unsigned i = 0; i < n; i++) {
                struct rnnd_strbuf v;
                char key[32], mem[96];

                if (!io[i].optional)
                        continue;
                snprintf(key, sizeof(key), "optional_input.%s", io[i].name);
                rnnd_strbuf_init_fixed(&v, mem, sizeof(mem));
                rnnd_strbuf_printf(&v, "%s ", io[i].datatype);
                put_batched_shape(&v, &io[i]);
                put_string_param(b, key, mem);
        }
}

static void put_backend_desc(struct rnnd_strbuf *b, const struct rnnd_backend_desc *d)
{
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "backend", d->backend);
        rnnd_strbuf_json_kv_str(b, "device", d->device);
        rnnd_strbuf_json_kv_str(b, "algo", d->algo);
        rnnd_strbuf_json_kv_str(b, "math", d->math);
        rnnd_strbuf_json_kv_str(b, "versions", d->versions);
        rnnd_strbuf_json_kv_str(b, "why_not_cudnn", d->why_not_cudnn);
        rnnd_strbuf_json_kv_str(b, "threading", d->threading);
        rnnd_strbuf_putc(b, '}');
}

static void put_stat(struct rnnd_strbuf *b, const char *key, struct rnnd_metrics_stat *s)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_printf(b, "{\"count\":%llu,\"ns\":%llu}",
                           (unsigned long long)atomic_load(&s->count),
                           (unsigned long long)atomic_load(&s->ns));
}

static void put_count_ns(struct rnnd_strbuf *b, const char *key, uint64_t count, uint64_t ns)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_printf(b, "{\"count\":%llu,\"ns\":%llu}", (unsigned long long)count,
                           (unsigned long long)ns);
}

/*
 * batch_stats: one entry per batch size run, from the pool; compute_infer is
 * the engine's time for batches of that size.  Input and output work is per
 * request, not per batch: those entries carry the count with 0 ns.
 */
static void put_batch_stats(struct rnnd_strbuf *b, struct rnnd_served_version *sv)
{
        uint32_t max = sv->owner->entry->cfg.batching.max_batch_size, n;
        struct rnnd_pool_size_stat *by = rnnd_calloc(max, sizeof(*by));

        rnnd_strbuf_json_key(b, "batch_stats");
        rnnd_strbuf_putc(b, '[');
        n = by != NULL ? rnnd_pool_size_stats(sv->pool, by, max) : 0;
        for (uint32_t i = 0; i < n; i++) {
                if (by[i].count == 0)
                        continue;
                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_u64(b, "batch_size", i + 1);
                put_count_ns(b, "compute_input", by[i].count, 0);
                put_count_ns(b, "compute_infer", by[i].count, by[i].ns);
                put_count_ns(b, "compute_output", by[i].count, 0);
                rnnd_strbuf_putc(b, '}');
        }
        rnnd_strbuf_putc(b, ']');
        rnnd_free(by);
}

/* One entry of model_stats (the statistics extension), plus rnnd's batching figures. */
static void put_version_stats(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                              struct rnnd_served_version *sv)
{
        struct rnnd_version_stats *st = &sv->stats;
        struct rnnd_pool_stats ps;
        struct rnnd_metrics_stat zero = {0};
        char v[24];

        rnnd_pool_stats(sv->pool, &ps);
        snprintf(v, sizeof(v), "%" PRIu64, sv->version);
        rnnd_strbuf_json_sep(b);
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "name", m->entry->name);
        rnnd_strbuf_json_kv_str(b, "version", v);
        rnnd_strbuf_json_kv_u64(b, "last_inference", atomic_load(&st->last_inference_ms));
        rnnd_strbuf_json_kv_u64(b, "inference_count", ps.sequences);
        rnnd_strbuf_json_kv_u64(b, "execution_count", ps.batches);
        rnnd_strbuf_json_key(b, "inference_stats");
        rnnd_strbuf_putc(b, '{');
        put_stat(b, "success", &st->success);
        put_stat(b, "fail", &st->fail);
        put_stat(b, "queue", &st->queue);
        put_stat(b, "compute_input", &st->compute_input);
        put_stat(b, "compute_infer", &st->compute_infer);
        put_stat(b, "compute_output", &st->compute_output);
        put_stat(b, "cache_hit", &zero);
        put_stat(b, "cache_miss", &zero);
        rnnd_strbuf_putc(b, '}');
        put_batch_stats(b, sv);
        rnnd_strbuf_json_key(b, "batching");
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_u64(b, "queued_sequences", ps.queued);
        rnnd_strbuf_json_kv_u64(b, "running_batches", ps.running);
        rnnd_strbuf_json_kv_u64(b, "steps_used", ps.steps_used);
        rnnd_strbuf_json_kv_u64(b, "steps_total", ps.steps_total);
        rnnd_strbuf_json_key(b, "padding_efficiency");
        rnnd_strbuf_printf(b, "%.4f",
                           ps.steps_total > 0 ? (double)ps.steps_used / (double)ps.steps_total
                                              : 1.0);
        rnnd_strbuf_json_kv_u64(b, "expired_sequences", ps.expired);
        rnnd_strbuf_json_kv_u64(b, "canceled_requests", ps.canceled);
        rnnd_strbuf_json_kv_u64(b, "rejected_requests", ps.rejected);
        rnnd_strbuf_json_kv_u64(b, "instances_in_service", ps.in_service);
        rnnd_strbuf_puts(b, "}}");
}

/*
 * GET /v2/models[/{m}[/versions/{v}]]/stats: the statistics extension, for
 * the named version, every loaded version of the model, or every model.
 */
static void serve_model_stats(struct rnnd_http_request *r)
{
        struct rnnd_server *srv = r->srv;
        struct rnnd_strbuf b;

        rnnd_strbuf_init(&b);
        rnnd_strbuf_puts(&b, "{\"model_stats\":[");
        rnnd_models_rdlock(&srv->models);
        for (size_t i = 0; i < srv->models.n_models; i++) {
                struct rnnd_served_model *m = srv->models.models[i];

                if (r->model != NULL && m != r->model)
                        continue;
                for (size_t j = 0; j < m->n_versions; j++) {
                        struct rnnd_served_version *sv = &m->versions[j];

                        if (sv->status < 0 || (r->version_given && sv != r->version))
                                continue;
                        put_version_stats(&b, m, sv);
                }
        }
        rnnd_models_unlock(&srv->models);
        rnnd_strbuf_puts(&b, "]}");
        respond_json(r, 200, &b);
}

/*
 * Triton's sequence_batching for a model that keeps sequences (issue 17):
 * its idle timeout, and no control inputs, since rnnd keeps the state itself
 * and takes start, end and the id as request parameters, as tritonclient
 * and perf_analyzer send them.
 */
static void put_sequence_batching(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg)
{
        rnnd_strbuf_json_key(b, "sequence_batching");
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_u64(b, "max_sequence_idle_microseconds",
                                (uint64_t)cfg->sequence.idle_timeout_ms * 1000u);
        rnnd_strbuf_json_key(b, "control_input");
        rnnd_strbuf_puts(b, "[]");
        rnnd_strbuf_json_key(b, "direct");
        rnnd_strbuf_puts(b, "{}");
        rnnd_strbuf_putc(b, '}');
}

static void serve_model_config(struct rnnd_http_request *r)
{
        struct rnnd_served_version *sv = loaded_version(r);
        const struct rnnd_model_config *cfg;
        struct rnnd_strbuf b;
        uint32_t g, k, i;

        if (sv == NULL)
                return;
        cfg = &r->model->entry->cfg;
        rnnd_strbuf_init(&b);
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_str(&b, "name", r->model->entry->name);
        rnnd_strbuf_json_kv_str(&b, "platform", rnnd_models_platform(sv));
        rnnd_strbuf_json_kv_str(&b, "backend", "rnnd");

        rnnd_strbuf_json_key(&b, "version_policy");
        if (cfg->version_policy.kind == RNND_VP_ALL) {
                rnnd_strbuf_puts(&b, "{\"all\":{}}");
        } else if (cfg->version_policy.kind == RNND_VP_SPECIFIC) {
                rnnd_strbuf_puts(&b, "{\"specific\":{\"versions\":[");
                for (i = 0; i < cfg->version_policy.n_versions; i++)
                        rnnd_strbuf_printf(&b, "%s%" PRIu64, i > 0 ? "," : "",
                                           cfg->version_policy.versions[i]);
                rnnd_strbuf_puts(&b, "]}}");
        } else {
                rnnd_strbuf_printf(&b, "{\"latest\":{\"num_versions\":%" PRIu32 "}}",
                                   cfg->version_policy.num_versions);
        }
        rnnd_strbuf_json_kv_u64(&b, "max_batch_size", cfg->batching.max_batch_size);
        put_config_tensors(&b, cfg, true);
        put_config_tensors(&b, cfg, false);

        rnnd_strbuf_json_key(&b, "dynamic_batching");
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_u64(&b, "max_queue_delay_microseconds",
                                cfg->batching.max_queue_delay_us);
        rnnd_strbuf_json_kv_u64(&b, "priority_levels", cfg->batching.priority_levels);
        rnnd_strbuf_json_kv_u64(&b, "default_priority_level", cfg->batching.default_priority_level);
        rnnd_strbuf_json_key(&b, "default_queue_policy");
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_u64(&b, "max_queue_size", cfg->batching.max_queue_size);
        rnnd_strbuf_json_kv_u64(&b, "default_timeout_microseconds", cfg->batching.queue_timeout_us);
        rnnd_strbuf_json_kv_str(&b, "timeout_action", "REJECT");
        rnnd_strbuf_json_kv_bool(&b, "allow_timeout_override", true);
        rnnd_strbuf_puts(&b, "}}");
        if (sv->streams != NULL)
                put_sequence_batching(&b, cfg);

        /* Each group's instances as placed: where each runs, and why not on cuDNN. */
        rnnd_strbuf_json_key(&b, "instance_group");
        rnnd_strbuf_putc(&b, '[');
        for (g = 0; g < cfg->n_instances; g++) {
                const struct rnnd_instance_group *ig = &cfg->instances[g];
                const unsigned first = g > 0 ? sv->group_end[g - 1] : 0;

                rnnd_strbuf_json_sep(&b);
                rnnd_strbuf_putc(&b, '{');
                rnnd_strbuf_printf(&b, "\"name\":\"%s_%" PRIu32 "\"", r->model->entry->name, g);
                rnnd_strbuf_json_kv_str(
                        &b, "kind",
                        first < sv->group_end[g] && strcmp(sv->descs[first].backend, "cudnn") == 0
                                ? "KIND_GPU"
                                : "KIND_CPU");
                rnnd_strbuf_json_kv_str(&b, "requested_kind", rnnd_instance_kind_name(ig->kind));
                rnnd_strbuf_json_kv_u64(&b, "count", ig->count);
                rnnd_strbuf_json_key(&b, "gpus");
                rnnd_strbuf_putc(&b, '[');
                for (k = 0; k < ig->n_gpus; k++)
                        rnnd_strbuf_printf(&b, "%s%" PRIu32, k > 0 ? "," : "", ig->gpus[k]);
                rnnd_strbuf_putc(&b, ']');
                rnnd_strbuf_json_key(&b, "instances");
                rnnd_strbuf_putc(&b, '[');
                for (k = first; k < sv->group_end[g]; k++) {
                        rnnd_strbuf_json_sep(&b);
                        put_backend_desc(&b, &sv->descs[k]);
                }
                rnnd_strbuf_puts(&b, "]}");
        }
        rnnd_strbuf_putc(&b, ']');

        rnnd_strbuf_json_key(&b, "parameters");
        rnnd_strbuf_putc(&b, '{');
        put_string_param(&b, "cell", rnnd_cell_name(cfg->cell));
        put_u64_param(&b, "input_size", cfg->input_size);
        put_u64_param(&b, "hidden_size", cfg->hidden_size);
        put_u64_param(&b, "num_layers", cfg->num_layers);
        put_string_param(&b, "bidirectional", cfg->bidirectional ? "true" : "false");
        put_u64_param(&b, "proj_size", cfg->proj_size);
        put_string_param(&b, "precision", rnnd_precision_name(cfg->precision));
        put_u64_param(&b, "max_sequence_length", cfg->max_sequence_length);
        put_u64_param(&b, "max_batch_steps", cfg->batching.max_batch_steps);
        put_optional_inputs(&b, cfg);
        rnnd_strbuf_putc(&b, '}');
        rnnd_strbuf_putc(&b, '}');
        respond_json(r, 200, &b);
}

static void serve_model_ready(struct rnnd_http_request *r)
{
        struct rnnd_served_model *m = r->model;
        struct rnnd_served_version *v = r->version;

        if (m->entry->status < 0)
                rnnd_http_respond_error(r, NOT_READY, "model '%s' is not ready: %s", m->entry->name,
                                        m->entry->reason);
        else if (v == NULL)
                rnnd_http_respond_error(r, NOT_READY, "model '%s' has no loaded version",
                                        m->entry->name);
        else if (v->status < 0)
                rnnd_http_respond_error(r, NOT_READY,
                                        "version %" PRIu64 " of model '%s' is not ready: %s",
                                        v->version, m->entry->name, v->reason);
        else
                respond_empty(r, 200);
}

static void serve_server_ready(struct rnnd_http_request *r)
{
        struct rnnd_server *srv = r->srv;

        if (rnnd_server_ready(srv))
                respond_empty(r, 200);
        else if (atomic_load(&srv->device_fault))
                rnnd_http_respond_error(r, NOT_READY,
                                        "a GPU device fault (%s): every GPU instance is out of "
                                        "service; the server is restarting",
                                        srv->fault_msg);
        else if (atomic_load(&srv->http.stopping))
                rnnd_http_respond_error(r, NOT_READY, "the server is shutting down");
        else
                rnnd_http_respond_error(r, NOT_READY,
                                        "not every model loaded: %zu of %zu models are "
                                        "fully loaded",
                                        atomic_load(&srv->models.n_loaded_models),
                                        srv->models.n_models);
}

static void serve_server_metadata(struct rnnd_http_request *r)
{
        const char *const *e;
        struct rnnd_strbuf b;

        rnnd_strbuf_init(&b);
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_str(&b, "name", "rnnd");
        rnnd_strbuf_json_kv_str(&b, "version", RNND_VERSION);
        rnnd_strbuf_json_key(&b, "extensions");
        /* Only what is implemented: the /config, /stats and repository routes, and the hook's. */
        rnnd_strbuf_puts(&b, "[\"model_configuration\",\"statistics\",\"model_repository\"");
        for (e = r->srv->infer.extensions; e != NULL && *e != NULL; e++) {
                rnnd_strbuf_putc(&b, ',');
                rnnd_strbuf_json_str(&b, *e);
        }
        rnnd_strbuf_puts(&b, "]}");
        respond_json(r, 200, &b);
}

/* The TF Serving error code for a load failure. */
static const char *tfs_error_code(int code)
{
        switch (code) {
        case 0:
                return "OK";
        case RNND_ENOTFOUND:
                return "NOT_FOUND";
        case RNND_ENOMEM:
                return "RESOURCE_EXHAUSTED";
        case RNND_EINVAL:
        case RNND_EMODEL:
        case RNND_EUNSUPPORTED:
        case RNND_ELIMIT:
                return "INVALID_ARGUMENT";
        case RNND_EIO:
        case RNND_EGPU:
        case RNND_EINTERNAL:
                return "INTERNAL";
        default:
                return "UNKNOWN";
        }
}

static void put_tfs_version(struct rnnd_strbuf *b, const struct rnnd_served_version *v)
{
        rnnd_strbuf_json_sep(b);
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_key(b, "version");
        rnnd_strbuf_printf(b, "\"%" PRIu64 "\"", v->version);
        rnnd_strbuf_json_kv_str(b, "state", v->status == 0 ? "AVAILABLE" : "END");
        rnnd_strbuf_json_key(b, "status");
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "error_code", tfs_error_code(v->status));
        rnnd_strbuf_json_kv_str(b, "error_message", v->status == 0 ? "" : v->reason);
        rnnd_strbuf_puts(b, "}}");
}

static void serve_tfs_status(struct rnnd_http_request *r)
{
        struct rnnd_served_model *m = r->model;
        struct rnnd_strbuf b;
        size_t i;

        if (m->entry->status < 0) {
                rnnd_http_fail(r, RNND_EUNAVAIL, "model '%s' is not available: %s", m->entry->name,
                               m->entry->reason);
                return;
        }
        rnnd_strbuf_init(&b);
        rnnd_strbuf_puts(&b, "{\"model_version_status\":[");
        if (r->version_given) {
                put_tfs_version(&b, r->version);
        } else {
                /* TF Serving lists the newest first. */
                for (i = m->n_versions; i-- > 0;)
                        put_tfs_version(&b, &m->versions[i]);
        }
        rnnd_strbuf_puts(&b, "]}");
        respond_json(r, 200, &b);
}

/* A TF Serving dtype for a KServe datatype name. */
static const char *tfs_dtype(const char *datatype)
{
        return strcmp(datatype, "INT64") == 0 ? "DT_INT64" : "DT_FLOAT";
}

/* A signature_def's "inputs" or "outputs": {name: {dtype, tensor_shape, name}}. */
static void put_tfs_tensors(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg, bool inputs)
{
        struct tensor_desc io[5];
        unsigned n = model_tensors(cfg, inputs, io);

        rnnd_strbuf_json_key(b, inputs ? "inputs" : "outputs");
        rnnd_strbuf_putc(b, '{');
        for (unsigned i = 0; i < n; i++) {
                rnnd_strbuf_json_key(b, io[i].name);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_str(b, "dtype", tfs_dtype(io[i].datatype));
                /* int64 sizes are strings in TF Serving's JSON (proto3). */
                rnnd_strbuf_puts(b, ",\"tensor_shape\":{\"dim\":[{\"size\":\"-1\",\"name\":\"\"}");
                for (unsigned d = 0; d < io[i].ndims; d++)
                        rnnd_strbuf_printf(b, ",{\"size\":\"%" PRId64 "\",\"name\":\"\"}",
                                           io[i].dims[d]);
                rnnd_strbuf_puts(b, "],\"unknown_rank\":false}");
                rnnd_strbuf_json_kv_str(b, "name", io[i].name);
                rnnd_strbuf_putc(b, '}');
        }
        rnnd_strbuf_putc(b, '}');
}

/*
 * TF Serving's GET .../metadata: the model's one signature, serving_default,
 * a predict signature with every input (the optional ones too: a TF Serving
 * client has no /config to read them from) and every output.
 */
static void serve_tfs_metadata(struct rnnd_http_request *r)
{
        struct rnnd_served_version *sv = loaded_version(r);
        struct rnnd_strbuf b;

        if (sv == NULL)
                return;
        rnnd_strbuf_init(&b);
        rnnd_strbuf_puts(&b, "{\"model_spec\":{");
        rnnd_strbuf_json_kv_str(&b, "name", r->model->entry->name);
        rnnd_strbuf_json_kv_str(&b, "signature_name", "");
        rnnd_strbuf_json_key(&b, "version");
        rnnd_strbuf_printf(&b, "\"%" PRIu64 "\"", sv->version);
        rnnd_strbuf_puts(&b, "},\"metadata\":{\"signature_def\":{\"signature_def\":{"
                             "\"serving_default\":{");
        put_tfs_tensors(&b, &r->model->entry->cfg, true);
        put_tfs_tensors(&b, &r->model->entry->cfg, false);
        rnnd_strbuf_json_kv_str(&b, "method_name", "tensorflow/serving/predict");
        rnnd_strbuf_puts(&b, "}}}}}");
        respond_json(r, 200, &b);
}

/* :classify and :regress: TF Serving's answer for a model whose signature is predict's. */
static void serve_tfs_no_signature(struct rnnd_http_request *r)
{
        bool classify = r->route == RNND_ROUTE_TFS_CLASSIFY;

        if (loaded_version(r) == NULL)
                return;
        rnnd_http_fail(r, RNND_EINVAL,
                       "Expected %s signature method_name to be tensorflow/serving/%s. Was: "
                       "tensorflow/serving/predict",
                       classify ? "classification" : "regression",
                       classify ? "classify" : "regress");
}

/* The model table as the metrics page walks it (metrics.h); under the read lock. */
static void metrics_model(void *cls, size_t i, const char **name,
                          const struct rnnd_metrics_counters **requests, size_t *n_versions)
{
        const struct rnnd_served_model *m = ((struct rnnd_server *)cls)->models.models[i];

        *name = m->entry->name;
        *requests = &m->requests;
        *n_versions = m->n_versions;
}

static void metrics_version(void *cls, size_t i, size_t j, struct rnnd_metrics_version *ret)
{
        struct rnnd_served_version *sv =
                &((struct rnnd_server *)cls)->models.models[i]->versions[j];

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

static void serve_metrics(struct rnnd_http_request *r)
{
        struct rnnd_server *srv = r->srv;
        struct rnnd_metrics_source src = {
                .models_loaded = atomic_load(&srv->models.n_loaded_models),
                .inflight = atomic_load(&srv->http.inflight),
                .other_requests = &srv->models.other_requests,
                .model = metrics_model,
                .version = metrics_version,
                .cls = srv,
        };
        struct rnnd_strbuf b;
        size_t len;
        char *body;

        rnnd_strbuf_init(&b);
        rnnd_models_rdlock(&srv->models);
        src.n_models = srv->models.n_models;
        rnnd_metrics_page(&b, &src);
        rnnd_models_unlock(&srv->models);
        body = rnnd_strbuf_steal(&b, &len);
        if (body == NULL) {
                rnnd_http_fail(r, RNND_ENOMEM, "out of memory");
                return;
        }
        rnnd_http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
}

/*
 * The model r pinned was replaced (SIGHUP, repository API) while its body
 * came in: pins the build now in the table and resolves the version again,
 * so that the request runs on pools that stay open.  false after answering
 * 404.
 */
static bool repin(struct rnnd_http_request *r)
{
        struct rnnd_served_model *old = r->model;
        uint64_t v = r->version_given ? r->version->version : 0;
        char name[RNND_CFG_NAME_MAX];

        snprintf(name, sizeof(name), "%s", old->entry->name);
        r->model = rnnd_models_pin(&r->srv->models, name);
        rnnd_models_unpin(old);
        if (r->model == NULL) {
                rnnd_http_fail(r, RNND_ENOTFOUND,
                               "unknown model '%s' (removed from the repository)", name);
                return false;
        }
        if (!r->version_given) {
                r->version = rnnd_models_latest(r->model);
                return true;
        }
        r->version = rnnd_models_find_version(r->model, v);
        if (r->version == NULL) {
                rnnd_http_fail(r, RNND_ENOTFOUND, "unknown version '%" PRIu64 "' of model '%s'", v,
                               name);
                return false;
        }
        return true;
}

/* The inference routes: everything is checked here, the hook does the rest. */
static void serve_infer(struct rnnd_http_request *r, enum rnnd_infer_protocol proto)
{
        struct rnnd_server *srv = r->srv;
        struct rnnd_served_version *sv;
        rnnd_error_t err = {0};
        const char *enc;
        int ret;

        if (atomic_load(&srv->http.stopping)) {
                rnnd_http_fail(r, RNND_EUNAVAIL, "the server is shutting down");
                return;
        }
        if (atomic_load(&r->model->retired) && !repin(r))
                return;
        sv = loaded_version(r);
        if (sv == NULL)
                return;
        enc = rnnd_http_request_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
        if (enc != NULL && strcasecmp(enc, "identity") != 0) {
                rnnd_http_fail(
                        r, RNND_EMEDIATYPE,
                        "Content-Encoding '%.32s' is not supported; send the body uncompressed",
                        enc);
                return;
        }
        ret = srv->infer.handle(srv->infer.cls, r, sv, proto, &err);
        if (ret < 0) {
                if (r->suspended) {
                        /* A hook must not fail after suspending; answer when resumed. */
                        rnnd_log_req(RNND_LOG_ERR, r->id,
                                     "inference hook failed after suspending: %s", err.msg);
                        return;
                }
                rnnd_http_fail_err(r, ret, &err);
        }
}

/*
 * rnnd_routes.serve: at the final call, prepares the response, or for the
 * inference routes calls the hook, which may suspend the request.
 */
static void serve(struct rnnd_http_request *r)
{
        expect_end(r); /* the body is in */
        switch (r->route) {
        case RNND_ROUTE_HEALTH_LIVE:
                respond_empty(r, 200);
                break;
        case RNND_ROUTE_HEALTH_READY:
                serve_server_ready(r);
                break;
        case RNND_ROUTE_SERVER_META:
                serve_server_metadata(r);
                break;
        case RNND_ROUTE_MODEL_META:
                serve_model_metadata(r);
                break;
        case RNND_ROUTE_MODEL_READY:
                serve_model_ready(r);
                break;
        case RNND_ROUTE_MODEL_CONFIG:
                serve_model_config(r);
                break;
        case RNND_ROUTE_MODEL_INFER:
                serve_infer(r, RNND_INFER_KSERVE_V2);
                break;
        case RNND_ROUTE_MODEL_STATS:
                serve_model_stats(r);
                break;
        case RNND_ROUTE_TFS_STATUS:
                serve_tfs_status(r);
                break;
        case RNND_ROUTE_TFS_PREDICT:
                serve_infer(r, RNND_INFER_TFS_PREDICT);
                break;
        case RNND_ROUTE_TFS_METADATA:
                serve_tfs_metadata(r);
                break;
        case RNND_ROUTE_TFS_CLASSIFY:
        case RNND_ROUTE_TFS_REGRESS:
                serve_tfs_no_signature(r);
                break;
        case RNND_ROUTE_METRICS:
                serve_metrics(r);
                break;
        case RNND_ROUTE_REPO_INDEX:
        case RNND_ROUTE_REPO_LOAD:
        case RNND_ROUTE_REPO_UNLOAD:
                rnnd_repoapi_serve(r);
                break;
        case RNND_ROUTE_NONE:
                rnnd_http_fail(r, RNND_ENOTFOUND, "no route for %s %.200s", r->method, r->path);
                break;
        }
}

/*
 * rnnd_routes.done: the request is over (answered, or its client gone): it
 * is counted under its model and version, and the model it pinned is let
 * go, since the engine is done with it.  Health checks and scrapes are
 * frequent: they are logged at debug.
 */
static int done(struct rnnd_http_request *r, unsigned status)
{
        expect_end(r); /* answered early, or the client left while sending */
        rnnd_models_count(&r->srv->models, r->model, r->model != NULL ? r->version : NULL, status);
        r->model = rnnd_models_unpin(r->model);
        return r->route == RNND_ROUTE_HEALTH_LIVE || r->route == RNND_ROUTE_HEALTH_READY ||
                               r->route == RNND_ROUTE_METRICS || r->route == RNND_ROUTE_MODEL_READY
                       ? RNND_LOG_DEBUG
                       : RNND_LOG_INFO;
}

const struct rnnd_route_handler rnnd_routes = {.match = match, .serve = serve, .done = done};
