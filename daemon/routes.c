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
#include "http-int.h"
#include "log.h"
#include "repoapi.h"
#include "rnnd-config.h"
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
        return rt == RNND_ROUTE_MODEL_INFER || rt == RNND_ROUTE_TFS_PREDICT || route_is_repo(rt);
}

/* Resolves r->version in the pinned r->model: the named one, or the latest. */
static bool resolve_version(struct rnnd_http_request *r, const char *version_text)
{
        uint64_t v;

        if (version_text == NULL) {
                r->version = rnnd_server_latest(r->model);
                return true;
        }
        r->version_given = true;
        return parse_version(version_text, &v) &&
               (r->version = rnnd_server_find_version(r->model, v)) != NULL;
}

/* A positive decimal version without leading zeros. */
static bool parse_version(const char *s, uint64_t *ret)
{
        uint64_t v = 0;

        if (s[0] < '1' || s[0] > '9')
                return false;
        for (; *s != '\0'; s++) {
                if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
                        return false;
                v = v * 10 + (uint64_t)(*s - '0');
        }
        *ret = v;
        return true;
}

/* Strips a trailing ":predict" from s; true when it was there. */
static bool strip_predict(char *s)
{
        size_t n = strlen(s);

        if (n > 8 && strcmp(s + n - 8, ":predict") == 0) {
                s[n - 8] = '\0';
                return true;
        }
        return false;
}

unsigned rnnd__routes_match(struct rnnd_http_request *r)
{
        char buf[PATH_MAX_LEN + 1], *seg[MAX_SEGMENTS], *p, *model_name = NULL;
        const char *version_text = NULL;
        enum rnnd_route rt = RNND_ROUTE_NONE;
        bool get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
        bool post = strcmp(r->method, "POST") == 0;
        size_t n = 0, len = strlen(r->path);

        if (len == 0 || r->path[0] != '/' || len > PATH_MAX_LEN)
                goto not_found;
        memcpy(buf, r->path + 1, len);
        for (p = buf; n < MAX_SEGMENTS;) {
                char *slash = strchr(p, '/');

                seg[n++] = p;
                if (slash == NULL)
                        break;
                *slash = '\0';
                p = slash + 1;
                if (n == MAX_SEGMENTS)
                        goto not_found;
        }
        for (size_t i = 0; i < n; i++)
                if (seg[i][0] == '\0')
                        goto not_found; /* "//", a trailing '/' */

        if (n == 1 && strcmp(seg[0], "metrics") == 0) {
                rt = RNND_ROUTE_METRICS;
        } else if (strcmp(seg[0], "v2") == 0) {
                size_t i = 3;

                if (n == 1)
                        rt = RNND_ROUTE_SERVER_META;
                else if (n == 3 && strcmp(seg[1], "health") == 0 && strcmp(seg[2], "live") == 0)
                        rt = RNND_ROUTE_HEALTH_LIVE;
                else if (n == 3 && strcmp(seg[1], "health") == 0 && strcmp(seg[2], "ready") == 0)
                        rt = RNND_ROUTE_HEALTH_READY;
                else if (n == 3 && strcmp(seg[1], "models") == 0 && strcmp(seg[2], "stats") == 0)
                        rt = RNND_ROUTE_MODEL_STATS; /* every model's */
                else if (n == 3 && strcmp(seg[1], "repository") == 0 &&
                         strcmp(seg[2], "index") == 0)
                        rt = RNND_ROUTE_REPO_INDEX;
                else if (n == 5 && strcmp(seg[1], "repository") == 0 &&
                         strcmp(seg[2], "models") == 0 && strcmp(seg[4], "load") == 0)
                        rt = RNND_ROUTE_REPO_LOAD; /* the name is checked by repoapi.c */
                else if (n == 5 && strcmp(seg[1], "repository") == 0 &&
                         strcmp(seg[2], "models") == 0 && strcmp(seg[4], "unload") == 0)
                        rt = RNND_ROUTE_REPO_UNLOAD;
                else if (n >= 3 && strcmp(seg[1], "models") == 0) {
                        model_name = seg[2];
                        if (n >= 5 && strcmp(seg[3], "versions") == 0) {
                                version_text = seg[4];
                                i = 5;
                        }
                        if (n == i)
                                rt = RNND_ROUTE_MODEL_META;
                        else if (n == i + 1 && strcmp(seg[i], "ready") == 0)
                                rt = RNND_ROUTE_MODEL_READY;
                        else if (n == i + 1 && strcmp(seg[i], "config") == 0)
                                rt = RNND_ROUTE_MODEL_CONFIG;
                        else if (n == i + 1 && strcmp(seg[i], "infer") == 0)
                                rt = RNND_ROUTE_MODEL_INFER;
                        else if (n == i + 1 && strcmp(seg[i], "stats") == 0)
                                rt = RNND_ROUTE_MODEL_STATS;
                }
        } else if (strcmp(seg[0], "v1") == 0 && n >= 3 && strcmp(seg[1], "models") == 0) {
                model_name = seg[2];
                if (n == 3) {
                        rt = strip_predict(seg[2]) ? RNND_ROUTE_TFS_PREDICT : RNND_ROUTE_TFS_STATUS;
                } else if (n == 5 && strcmp(seg[3], "versions") == 0) {
                        version_text = seg[4];
                        rt = strip_predict(seg[4]) ? RNND_ROUTE_TFS_PREDICT : RNND_ROUTE_TFS_STATUS;
                }
        }
        if (rt == RNND_ROUTE_NONE)
                goto not_found;
        r->route = rt;

        if (route_is_post(rt) ? !post : !get) {
                rnnd_http_fail(r, RNND_EMETHOD, "method %s is not allowed on %s; use %s", r->method,
                               r->path, route_is_post(rt) ? "POST" : "GET");
                rnnd_http_respond_header(r, MHD_HTTP_HEADER_ALLOW,
                                         route_is_post(rt) ? "POST" : "GET, HEAD");
                return r->resp_status;
        }

        if (route_is_repo(rt))
                return rnnd__repoapi_check(r);
        if (model_name != NULL) {
                r->model = rnnd_server_pin_model(r->srv, model_name);
                if (r->model == NULL) {
                        rnnd_http_fail(r, RNND_ENOTFOUND, "unknown model '%s'", model_name);
                        return r->resp_status;
                }
                if (!resolve_version(r, version_text)) {
                        rnnd_http_fail(r, RNND_ENOTFOUND, "unknown version '%s' of model '%s'",
                                       version_text, model_name);
                        return r->resp_status;
                }
        }
        return 0;

not_found:
        rnnd_http_fail(r, RNND_ENOTFOUND, "no route for %s %.200s", r->method, r->path);
        return r->resp_status;
}

/* Bodies. */

/* Prepares b's JSON (stolen) as the response; 500 when b ran out of memory. */
static void respond_json(struct rnnd_http_request *r, unsigned status, struct rnnd_strbuf *b)
{
        size_t len;
        char *body = rnnd_strbuf_steal(b, &len);

        if (body == NULL) {
                rnnd_http_respond_error(r, 500, "out of memory");
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

/* KServe metadata: [{"name","datatype","shape"}], the batch dimension -1 first. */
static void put_metadata_tensors(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg,
                                 bool inputs)
{
        struct tensor_desc io[5];
        unsigned n = model_tensors(cfg, inputs, io), i, d;

        rnnd_strbuf_json_key(b, inputs ? "inputs" : "outputs");
        rnnd_strbuf_putc(b, '[');
        for (i = 0; i < n; i++) {
                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_str(b, "name", io[i].name);
                rnnd_strbuf_json_kv_str(b, "datatype", io[i].datatype);
                rnnd_strbuf_json_key(b, "shape");
                rnnd_strbuf_puts(b, "[-1");
                for (d = 0; d < io[i].ndims; d++)
                        rnnd_strbuf_printf(b, ",%" PRId64, io[i].dims[d]);
                rnnd_strbuf_puts(b, "]}");
        }
        rnnd_strbuf_putc(b, ']');
}

/* Triton config: [{"name","data_type","dims"}] without the batch dimension. */
static void put_config_tensors(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg,
                               bool inputs)
{
        struct tensor_desc io[5];
        unsigned n = model_tensors(cfg, inputs, io), i, d;

        rnnd_strbuf_json_key(b, inputs ? "input" : "output");
        rnnd_strbuf_putc(b, '[');
        for (i = 0; i < n; i++) {
                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_str(b, "name", io[i].name);
                rnnd_strbuf_json_key(b, "data_type");
                rnnd_strbuf_printf(b, "\"TYPE_%s\"", io[i].datatype);
                rnnd_strbuf_json_key(b, "dims");
                rnnd_strbuf_putc(b, '[');
                if (io[i].ndims == 0) {
                        /* A scalar per batch item: Triton spells it dims [1] reshaped to []. */
                        rnnd_strbuf_puts(b, "1],\"reshape\":{\"shape\":[]}");
                } else {
                        for (d = 0; d < io[i].ndims; d++)
                                rnnd_strbuf_printf(b, "%s%" PRId64, d > 0 ? "," : "",
                                                   io[i].dims[d]);
                        rnnd_strbuf_putc(b, ']');
                }
                if (inputs)
                        rnnd_strbuf_json_kv_bool(b, "optional", io[i].optional);
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
        rnnd_strbuf_json_kv_str(&b, "platform", rnnd_server_platform(sv));
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

static void put_backend_desc(struct rnnd_strbuf *b, const struct rnnd_backend_desc *d)
{
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "backend", d->backend);
        rnnd_strbuf_json_kv_str(b, "device", d->device);
        rnnd_strbuf_json_kv_str(b, "algo", d->algo);
        rnnd_strbuf_json_kv_str(b, "math", d->math);
        rnnd_strbuf_json_kv_str(b, "versions", d->versions);
        rnnd_strbuf_json_kv_str(b, "why_not_cudnn", d->why_not_cudnn);
        rnnd_strbuf_putc(b, '}');
}

static void put_stat(struct rnnd_strbuf *b, const char *key, struct rnnd_stat *s)
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
        struct rnnd_stat zero = {0};
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
        rnnd_server_rdlock(srv);
        for (size_t i = 0; i < srv->n_models; i++) {
                struct rnnd_served_model *m = srv->models[i];

                if (r->model != NULL && m != r->model)
                        continue;
                for (size_t j = 0; j < m->n_versions; j++) {
                        struct rnnd_served_version *sv = &m->versions[j];

                        if (sv->status < 0 || (r->version_given && sv != r->version))
                                continue;
                        put_version_stats(&b, m, sv);
                }
        }
        rnnd_server_unlock(srv);
        rnnd_strbuf_puts(&b, "]}");
        respond_json(r, 200, &b);
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
        rnnd_strbuf_json_kv_str(&b, "platform", rnnd_server_platform(sv));
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
        else if (atomic_load(&srv->stopping))
                rnnd_http_respond_error(r, NOT_READY, "the server is shutting down");
        else
                rnnd_http_respond_error(r, NOT_READY,
                                        "not every model loaded: %zu of %zu models are "
                                        "fully loaded",
                                        atomic_load(&srv->n_loaded_models), srv->n_models);
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
        /* Only what is implemented: the /config and /stats routes, and the hook's. */
        rnnd_strbuf_puts(&b, "[\"model_configuration\",\"statistics\"");
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

static void put_counters(struct rnnd_strbuf *b, const char *model, const char *version,
                         const struct rnnd_req_counters *c)
{
        unsigned s;

        for (s = 0; s < RNND_CODE_SLOTS; s++) {
                unsigned long n = atomic_load_explicit(&c->n[s], memory_order_relaxed);

                if (n == 0)
                        continue;
                rnnd_strbuf_printf(
                        b, "rnnd_requests_total{model=\"%s\",version=\"%s\",code=\"%s\"} %lu\n",
                        model, version, rnnd_server_code_label(s), n);
        }
}

/* One histogram series; counts are per bucket (not cumulative), bounds end with +Inf. */
static void put_histogram(struct rnnd_strbuf *b, const char *name, const char *labels,
                          const double *bounds, const uint64_t *counts, unsigned n, double sum)
{
        uint64_t cum = 0;

        for (unsigned i = 0; i < n; i++) {
                cum += counts[i];
                if (i + 1 < n)
                        rnnd_strbuf_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels,
                                           bounds[i], (unsigned long long)cum);
                else
                        rnnd_strbuf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels,
                                           (unsigned long long)cum);
        }
        rnnd_strbuf_printf(b, "%s_sum{%s} %.9g\n%s_count{%s} %llu\n", name, labels, sum, name,
                           labels, (unsigned long long)cum);
}

static void put_latency(struct rnnd_strbuf *b, const char *name, const char *labels,
                        struct rnnd_hist *h)
{
        uint64_t counts[RNND_HIST_BUCKETS];

        for (unsigned i = 0; i < RNND_HIST_BUCKETS; i++)
                counts[i] = atomic_load_explicit(&h->b[i], memory_order_relaxed);
        put_histogram(b, name, labels, rnnd_hist_bounds_s, counts, RNND_HIST_BUCKETS,
                      (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9);
}

/* The per-version series of one metric family (HELP and TYPE once, then each version). */
enum version_metric {
        VM_REQUEST_S,
        VM_QUEUE_S,
        VM_COMPUTE_S,
        VM_BATCH_SIZE,
        VM_PADDING,
        VM_COUNTERS,
        VM_INFO,
        VM_GAUGES,
};

/* A Prometheus label value, quoted, with \\, " and newlines escaped. */
static void put_label_value(struct rnnd_strbuf *b, const char *v)
{
        rnnd_strbuf_putc(b, '"');
        for (; *v != '\0'; v++) {
                if (*v == '\\' || *v == '"')
                        rnnd_strbuf_putc(b, '\\');
                if (*v == '\n')
                        rnnd_strbuf_puts(b, "\\n");
                else
                        rnnd_strbuf_putc(b, *v);
        }
        rnnd_strbuf_putc(b, '"');
}

/* Whether two instances show the same labels in rnnd_model_backend_info. */
static bool same_desc(const struct rnnd_backend_desc *a, const struct rnnd_backend_desc *b)
{
        return strcmp(a->backend, b->backend) == 0 && strcmp(a->device, b->device) == 0 &&
               strcmp(a->algo, b->algo) == 0 && strcmp(a->why_not_cudnn, b->why_not_cudnn) == 0;
}

static void put_version_metric(struct rnnd_strbuf *b, enum version_metric k, const char *labels,
                               struct rnnd_served_version *sv, const struct rnnd_pool_stats *ps)
{
        switch (k) {
        case VM_REQUEST_S:
                put_latency(b, "rnnd_request_duration_seconds", labels, &sv->stats.request_h);
                break;
        case VM_QUEUE_S:
                put_latency(b, "rnnd_queue_duration_seconds", labels, &sv->stats.queue_h);
                break;
        case VM_COMPUTE_S:
                put_latency(b, "rnnd_compute_duration_seconds", labels, &sv->stats.compute_h);
                break;
        case VM_BATCH_SIZE:
                put_histogram(b, "rnnd_batch_size", labels, rnnd_pool_size_bounds, ps->size_buckets,
                              RNND_POOL_SIZE_BUCKETS, (double)ps->sequences);
                break;
        case VM_PADDING:
                put_histogram(b, "rnnd_batch_padding_efficiency", labels, rnnd_pool_padding_bounds,
                              ps->padding_buckets, RNND_POOL_PADDING_BUCKETS, ps->padding_sum);
                break;
        case VM_COUNTERS:
                rnnd_strbuf_printf(
                        b,
                        "rnnd_inference_count_total{%s} %llu\n"
                        "rnnd_execution_count_total{%s} %llu\n"
                        "rnnd_batch_steps_used_total{%s} %llu\n"
                        "rnnd_batch_steps_total{%s} %llu\n"
                        "rnnd_batch_compute_seconds_total{%s} %.9g\n"
                        "rnnd_queue_expired_total{%s} %llu\n"
                        "rnnd_requests_canceled_total{%s} %llu\n"
                        "rnnd_queue_rejected_total{%s} %llu\n",
                        labels, (unsigned long long)ps->sequences, labels,
                        (unsigned long long)ps->batches, labels, (unsigned long long)ps->steps_used,
                        labels, (unsigned long long)ps->steps_total, labels,
                        (double)ps->compute_ns / 1e9, labels, (unsigned long long)ps->expired,
                        labels, (unsigned long long)ps->canceled, labels,
                        (unsigned long long)ps->rejected);
                break;
        case VM_INFO:
                /* One series per distinct placement, the first instance of each counting. */
                for (unsigned i = 0; i < sv->instances; i++) {
                        unsigned n = 0, j;

                        for (j = 0; j < i && !same_desc(&sv->descs[j], &sv->descs[i]); j++)
                                ;
                        if (j < i)
                                continue;
                        for (j = i; j < sv->instances; j++)
                                n += same_desc(&sv->descs[j], &sv->descs[i]);
                        rnnd_strbuf_printf(b, "rnnd_model_backend_info{%s,backend=", labels);
                        put_label_value(b, sv->descs[i].backend);
                        rnnd_strbuf_puts(b, ",device=");
                        put_label_value(b, sv->descs[i].device);
                        rnnd_strbuf_puts(b, ",algo=");
                        put_label_value(b, sv->descs[i].algo);
                        rnnd_strbuf_puts(b, ",why_not_cudnn=");
                        put_label_value(b, sv->descs[i].why_not_cudnn);
                        rnnd_strbuf_printf(b, "} %u\n", n);
                }
                break;
        case VM_GAUGES:
                rnnd_strbuf_printf(b,
                                   "rnnd_queue_depth{%s} %u\n"
                                   "rnnd_batches_running{%s} %u\n"
                                   "rnnd_instances_in_service{%s} %u\n",
                                   labels, ps->queued, labels, ps->running, labels, ps->in_service);
                break;
        }
}

static const char *const version_metric_help[] = {
        [VM_REQUEST_S] = "# HELP rnnd_request_duration_seconds Successful inference requests, "
                         "from parsing to the rendered answer.\n"
                         "# TYPE rnnd_request_duration_seconds histogram\n",
        [VM_QUEUE_S] = "# HELP rnnd_queue_duration_seconds Time until a request's first "
                       "sequence started.\n"
                       "# TYPE rnnd_queue_duration_seconds histogram\n",
        [VM_COMPUTE_S] = "# HELP rnnd_compute_duration_seconds From a request's first sequence's "
                         "start to its last one's end.\n"
                         "# TYPE rnnd_compute_duration_seconds histogram\n",
        [VM_BATCH_SIZE] = "# HELP rnnd_batch_size Sequences per batch run.\n"
                          "# TYPE rnnd_batch_size histogram\n",
        [VM_PADDING] = "# HELP rnnd_batch_padding_efficiency Per batch: sum of lengths / (batch "
                       "size x longest).\n"
                       "# TYPE rnnd_batch_padding_efficiency histogram\n",
        [VM_COUNTERS] = "# HELP rnnd_inference_count_total Sequences run.\n"
                        "# TYPE rnnd_inference_count_total counter\n"
                        "# HELP rnnd_execution_count_total Batches run.\n"
                        "# TYPE rnnd_execution_count_total counter\n"
                        "# HELP rnnd_batch_steps_used_total Sum of the lengths of the sequences "
                        "run.\n"
                        "# TYPE rnnd_batch_steps_used_total counter\n"
                        "# HELP rnnd_batch_steps_total Sum of batch size x longest over batches "
                        "run (steps_used / this = padding efficiency).\n"
                        "# TYPE rnnd_batch_steps_total counter\n"
                        "# HELP rnnd_batch_compute_seconds_total Time the instances spent "
                        "running batches.\n"
                        "# TYPE rnnd_batch_compute_seconds_total counter\n"
                        "# HELP rnnd_queue_expired_total Sequences whose queue timeout "
                        "expired (503).\n"
                        "# TYPE rnnd_queue_expired_total counter\n"
                        "# HELP rnnd_requests_canceled_total Requests dropped before they "
                        "started because the client went away.\n"
                        "# TYPE rnnd_requests_canceled_total counter\n"
                        "# HELP rnnd_queue_rejected_total Requests refused at once: queue full "
                        "or shutting down (503).\n"
                        "# TYPE rnnd_queue_rejected_total counter\n",
        [VM_INFO] = "# HELP rnnd_model_backend_info Where a version's instances run, and why "
                    "not on cuDNN (\"\" when they are); one series per distinct placement, "
                    "the value is how many instances have it.\n"
                    "# TYPE rnnd_model_backend_info gauge\n",
        [VM_GAUGES] = "# HELP rnnd_queue_depth Sequences waiting.\n"
                      "# TYPE rnnd_queue_depth gauge\n"
                      "# HELP rnnd_batches_running Batches on instances now.\n"
                      "# TYPE rnnd_batches_running gauge\n"
                      "# HELP rnnd_instances_in_service Instances that can run batches.\n"
                      "# TYPE rnnd_instances_in_service gauge\n",
};

static void put_version_metrics(struct rnnd_strbuf *b, struct rnnd_server *srv)
{
        for (unsigned k = VM_REQUEST_S; k <= VM_GAUGES; k++) {
                rnnd_strbuf_puts(b, version_metric_help[k]);
                for (size_t i = 0; i < srv->n_models; i++) {
                        struct rnnd_served_model *m = srv->models[i];

                        for (size_t j = 0; j < m->n_versions; j++) {
                                struct rnnd_served_version *sv = &m->versions[j];
                                struct rnnd_pool_stats ps;
                                char labels[RNND_CFG_NAME_MAX + 64];

                                if (sv->pool == NULL)
                                        continue;
                                rnnd_pool_stats(sv->pool, &ps);
                                snprintf(labels, sizeof(labels),
                                         "model=\"%s\",version=\"%" PRIu64 "\"", m->entry->name,
                                         sv->version);
                                put_version_metric(b, (enum version_metric)k, labels, sv, &ps);
                        }
                }
        }
}

static void serve_metrics(struct rnnd_http_request *r)
{
        struct rnnd_server *srv = r->srv;
        struct rnnd_strbuf b;
        size_t i, j, len;
        char *body;

        rnnd_strbuf_init(&b);
        rnnd_strbuf_puts(&b, "# HELP rnnd_up Whether the daemon is serving (always 1 when it "
                             "answers).\n"
                             "# TYPE rnnd_up gauge\n"
                             "rnnd_up 1\n"
                             "# HELP rnnd_models_loaded Models with at least one version "
                             "loaded.\n"
                             "# TYPE rnnd_models_loaded gauge\n");
        rnnd_strbuf_printf(&b, "rnnd_models_loaded %zu\n", atomic_load(&srv->n_loaded_models));
        rnnd_strbuf_puts(&b, "# HELP rnnd_http_requests_in_flight HTTP requests received and not "
                             "yet completed.\n"
                             "# TYPE rnnd_http_requests_in_flight gauge\n");
        rnnd_strbuf_printf(&b, "rnnd_http_requests_in_flight %u\n", atomic_load(&srv->inflight));
        rnnd_strbuf_puts(&b, "# HELP rnnd_requests_total HTTP requests answered, by model, "
                             "version and status code (model=\"\" for other paths).\n"
                             "# TYPE rnnd_requests_total counter\n");
        put_counters(&b, "", "", &srv->other_requests);
        rnnd_server_rdlock(srv);
        for (i = 0; i < srv->n_models; i++) {
                struct rnnd_served_model *m = srv->models[i];

                put_counters(&b, m->entry->name, "", &m->requests);
                for (j = 0; j < m->n_versions; j++) {
                        char v[24];

                        snprintf(v, sizeof(v), "%" PRIu64, m->versions[j].version);
                        put_counters(&b, m->entry->name, v, &m->versions[j].requests);
                }
        }
        put_version_metrics(&b, srv);
        rnnd_server_unlock(srv);
        body = rnnd_strbuf_steal(&b, &len);
        if (body == NULL) {
                rnnd_http_respond_error(r, 500, "out of memory");
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
        r->model = rnnd_server_pin_model(r->srv, name);
        rnnd_server_unpin_model(old);
        r->version = NULL;
        if (r->model == NULL) {
                rnnd_http_fail(r, RNND_ENOTFOUND,
                               "unknown model '%s' (removed from the repository)", name);
                return false;
        }
        if (!r->version_given) {
                r->version = rnnd_server_latest(r->model);
                return true;
        }
        r->version = rnnd_server_find_version(r->model, v);
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

        if (atomic_load(&srv->stopping)) {
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

void rnnd__routes_serve(struct rnnd_http_request *r)
{
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
        case RNND_ROUTE_METRICS:
                serve_metrics(r);
                break;
        case RNND_ROUTE_REPO_INDEX:
        case RNND_ROUTE_REPO_LOAD:
        case RNND_ROUTE_REPO_UNLOAD:
                rnnd__repoapi_serve(r);
                break;
        case RNND_ROUTE_NONE:
                rnnd_http_fail(r, RNND_ENOTFOUND, "no route for %s %.200s", r->method, r->path);
                break;
        }
}
