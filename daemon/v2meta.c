/*
 * v2meta.c: the KServe v2 bodies that describe models (v2meta.h): server
 * and model metadata, the Triton-style model configuration and the
 * statistics extension, rendered from a pinned model or from the model table
 * read under its lock (models.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "rnnd-config.h"
#include "v2meta.h"

/*
 * The h (c true: c) state's shape after the batch dimension: [layers *
 * dirs, H'] (c: H) for a model of one block; for a chain, whose blocks'
 * widths differ, one row of every block's state (docs/HTTP.md).
 */
static struct rnnd_v2meta_tensor state_tensor(const struct rnnd_model_config *cfg, bool c,
                                              const char *name, bool input)
{
        struct rnnd_v2meta_tensor t = {name, "FP32", {0}, 2, input};
        size_t hf, cf;

        if (cfg->n_blocks > 1) {
                rnnd_modelcfg_state_size(cfg, &hf, &cf);
                t.dims[0] = (int64_t)(c ? cf : hf);
                t.ndims = 1;
                return t;
        }
        t.dims[0] = (int64_t)cfg->num_layers * rnnd_modelcfg_dirs(cfg);
        t.dims[1] = c ? cfg->hidden_size : rnnd_modelcfg_out_size(cfg);
        return t;
}

unsigned rnnd_v2meta_tensors(const struct rnnd_model_config *cfg, bool inputs,
                             struct rnnd_v2meta_tensor io[RNND_V2META_MAX_TENSORS])
{
        int64_t dirs = rnnd_modelcfg_dirs(cfg), hp = rnnd_modelcfg_out_size(cfg);
        bool lstm = rnnd_modelcfg_has_lstm(cfg);
        unsigned n = 0;

        if (inputs) {
                if (cfg->embedding.present)
                        io[n++] = (struct rnnd_v2meta_tensor){"tokens", "INT64", {-1}, 1, false};
                else
                        io[n++] = (struct rnnd_v2meta_tensor){
                                "input", "FP32", {-1, cfg->input_size}, 2, false};
                io[n++] = (struct rnnd_v2meta_tensor){"lengths", "INT64", {0}, 0, true};
                io[n++] = state_tensor(cfg, false, "h0", true);
                if (lstm)
                        io[n++] = state_tensor(cfg, true, "c0", true);
                return n;
        }
        io[n++] = (struct rnnd_v2meta_tensor){"output", "FP32", {-1, dirs * hp}, 2, false};
        io[n++] = state_tensor(cfg, false, "h_n", false);
        if (lstm)
                io[n++] = state_tensor(cfg, true, "c_n", false);
        if (cfg->head.present) {
                if (cfg->head.apply == RNND_HEAD_ALL)
                        io[n++] = (struct rnnd_v2meta_tensor){
                                "scores", "FP32", {-1, cfg->head.units}, 2, false};
                else
                        io[n++] = (struct rnnd_v2meta_tensor){
                                "scores", "FP32", {cfg->head.units}, 1, false};
        }
        return n;
}

/* A tensor's shape with the batch dimension -1 first, as KServe metadata gives it. */
static void put_batched_shape(struct rnnd_strbuf *b, const struct rnnd_v2meta_tensor *t)
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
        struct rnnd_v2meta_tensor io[RNND_V2META_MAX_TENSORS];
        unsigned n = rnnd_v2meta_tensors(cfg, inputs, io), i;

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
        struct rnnd_v2meta_tensor io[RNND_V2META_MAX_TENSORS];
        unsigned n = rnnd_v2meta_tensors(cfg, inputs, io), i, d;

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

void rnnd_v2meta_model(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                       const struct rnnd_served_version *sv)
{
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "name", m->entry->name);
        put_loaded_versions(b, m);
        rnnd_strbuf_json_kv_str(b, "platform", rnnd_models_platform(sv));
        put_metadata_tensors(b, &m->entry->cfg, true);
        put_metadata_tensors(b, &m->entry->cfg, false);
        rnnd_strbuf_putc(b, '}');
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
        struct rnnd_v2meta_tensor io[RNND_V2META_MAX_TENSORS];
        unsigned n = rnnd_v2meta_tensors(cfg, true, io);

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
struct stats_walk {
        struct rnnd_strbuf *b;
        const struct rnnd_served_model *model;     /* only this one, or NULL */
        const struct rnnd_served_version *version; /* only this one, or NULL */
};

static void put_stats(void *arg, struct rnnd_served_model *const *models, size_t n)
{
        struct stats_walk *w = arg;

        for (size_t i = 0; i < n; i++) {
                struct rnnd_served_model *m = models[i];

                if (w->model != NULL && m != w->model)
                        continue;
                for (size_t j = 0; j < m->n_versions; j++) {
                        struct rnnd_served_version *sv = &m->versions[j];

                        if (sv->status < 0 || (w->version != NULL && sv != w->version))
                                continue;
                        put_version_stats(w->b, m, sv);
                }
        }
}

void rnnd_v2meta_stats(struct rnnd_strbuf *b, struct rnnd_models *t,
                       const struct rnnd_served_model *m, const struct rnnd_served_version *sv)
{
        struct stats_walk w = {b, m, sv};

        rnnd_strbuf_puts(b, "{\"model_stats\":[");
        rnnd_models_read(t, put_stats, &w);
        rnnd_strbuf_puts(b, "]}");
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

static void put_version_policy(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg)
{
        rnnd_strbuf_json_key(b, "version_policy");
        if (cfg->version_policy.kind == RNND_VP_ALL) {
                rnnd_strbuf_puts(b, "{\"all\":{}}");
        } else if (cfg->version_policy.kind == RNND_VP_SPECIFIC) {
                rnnd_strbuf_puts(b, "{\"specific\":{\"versions\":[");
                for (uint32_t i = 0; i < cfg->version_policy.n_versions; i++)
                        rnnd_strbuf_printf(b, "%s%" PRIu64, i > 0 ? "," : "",
                                           cfg->version_policy.versions[i]);
                rnnd_strbuf_puts(b, "]}}");
        } else {
                rnnd_strbuf_printf(b, "{\"latest\":{\"num_versions\":%" PRIu32 "}}",
                                   cfg->version_policy.num_versions);
        }
}

static void put_dynamic_batching(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg)
{
        rnnd_strbuf_json_key(b, "dynamic_batching");
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_u64(b, "max_queue_delay_microseconds",
                                cfg->batching.max_queue_delay_us);
        rnnd_strbuf_json_kv_u64(b, "priority_levels", cfg->batching.priority_levels);
        rnnd_strbuf_json_kv_u64(b, "default_priority_level", cfg->batching.default_priority_level);
        rnnd_strbuf_json_key(b, "default_queue_policy");
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_u64(b, "max_queue_size", cfg->batching.max_queue_size);
        rnnd_strbuf_json_kv_u64(b, "default_timeout_microseconds", cfg->batching.queue_timeout_us);
        rnnd_strbuf_json_kv_str(b, "timeout_action", "REJECT");
        rnnd_strbuf_json_kv_bool(b, "allow_timeout_override", true);
        rnnd_strbuf_puts(b, "}}");
}

/* Each group's instances as placed: where each runs, and why not on cuDNN. */
static void put_instance_groups(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                                const struct rnnd_served_version *sv)
{
        const struct rnnd_model_config *cfg = &m->entry->cfg;

        rnnd_strbuf_json_key(b, "instance_group");
        rnnd_strbuf_putc(b, '[');
        for (uint32_t g = 0; g < cfg->n_instances; g++) {
                const struct rnnd_instance_group *ig = &cfg->instances[g];
                const unsigned first = g > 0 ? sv->group_end[g - 1] : 0;

                rnnd_strbuf_json_sep(b);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_printf(b, "\"name\":\"%s_%" PRIu32 "\"", m->entry->name, g);
                rnnd_strbuf_json_kv_str(
                        b, "kind",
                        first < sv->group_end[g] && strcmp(sv->descs[first].backend, "cudnn") == 0
                                ? "KIND_GPU"
                                : "KIND_CPU");
                rnnd_strbuf_json_kv_str(b, "requested_kind", rnnd_instance_kind_name(ig->kind));
                rnnd_strbuf_json_kv_u64(b, "count", ig->count);
                rnnd_strbuf_json_key(b, "gpus");
                rnnd_strbuf_putc(b, '[');
                for (uint32_t k = 0; k < ig->n_gpus; k++)
                        rnnd_strbuf_printf(b, "%s%" PRIu32, k > 0 ? "," : "", ig->gpus[k]);
                rnnd_strbuf_putc(b, ']');
                rnnd_strbuf_json_key(b, "instances");
                rnnd_strbuf_putc(b, '[');
                for (unsigned k = first; k < sv->group_end[g]; k++) {
                        rnnd_strbuf_json_sep(b);
                        put_backend_desc(b, &sv->descs[k]);
                }
                rnnd_strbuf_puts(b, "]}");
        }
        rnnd_strbuf_putc(b, ']');
}

/*
 * A chain's blocks, input first: "lstm(hidden 64, layers 2, bidirectional)
 * -> gru(hidden 32, layers 1)", projections and reset-before GRUs named.
 */
static void put_blocks_param(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg)
{
        char s[RNND_CFG_MAX_BLOCKS * 96], proj[32];
        size_t at = 0;

        for (uint32_t k = 0; k < cfg->n_blocks && at < sizeof(s); k++) {
                const struct rnnd_block_config *bl = &cfg->blocks[k];

                snprintf(proj, sizeof(proj), ", proj %" PRIu32, bl->proj_size);
                at += (size_t)snprintf(
                        s + at, sizeof(s) - at,
                        "%s%s(hidden %" PRIu32 ", layers %" PRIu32 "%s%s%s)", k ? " -> " : "",
                        rnnd_cell_name(bl->cell), bl->hidden_size, bl->num_layers,
                        bl->bidirectional ? ", bidirectional" : "", bl->proj_size ? proj : "",
                        bl->cell == RNND_CELL_GRU && !bl->gru_linear_before_reset ? ", reset before"
                                                                                  : "");
        }
        put_string_param(b, "blocks", s);
}

static void put_model_parameters(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg)
{
        rnnd_strbuf_json_key(b, "parameters");
        rnnd_strbuf_putc(b, '{');
        put_string_param(b, "cell", cfg->n_blocks > 1 ? "chain" : rnnd_cell_name(cfg->cell));
        if (cfg->n_blocks > 1)
                put_blocks_param(b, cfg);
        put_u64_param(b, "input_size", cfg->input_size);
        if (cfg->n_blocks <= 1) {
                put_u64_param(b, "hidden_size", cfg->hidden_size);
                put_u64_param(b, "num_layers", cfg->num_layers);
                put_string_param(b, "bidirectional", cfg->bidirectional ? "true" : "false");
                put_u64_param(b, "proj_size", cfg->proj_size);
        }
        put_string_param(b, "precision", rnnd_precision_name(cfg->precision));
        put_u64_param(b, "max_sequence_length", cfg->max_sequence_length);
        put_u64_param(b, "max_batch_steps", cfg->batching.max_batch_steps);
        put_optional_inputs(b, cfg);
        rnnd_strbuf_putc(b, '}');
}

void rnnd_v2meta_config(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                        const struct rnnd_served_version *sv)
{
        const struct rnnd_model_config *cfg = &m->entry->cfg;

        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "name", m->entry->name);
        rnnd_strbuf_json_kv_str(b, "platform", rnnd_models_platform(sv));
        rnnd_strbuf_json_kv_str(b, "backend", "rnnd");
        put_version_policy(b, cfg);
        rnnd_strbuf_json_kv_u64(b, "max_batch_size", cfg->batching.max_batch_size);
        put_config_tensors(b, cfg, true);
        put_config_tensors(b, cfg, false);
        put_dynamic_batching(b, cfg);
        if (sv->streams != NULL)
                put_sequence_batching(b, cfg);
        put_instance_groups(b, m, sv);
        put_model_parameters(b, cfg);
        rnnd_strbuf_putc(b, '}');
}

void rnnd_v2meta_server(struct rnnd_strbuf *b, const char *const *extensions, bool shm)
{
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "name", "rnnd");
        rnnd_strbuf_json_kv_str(b, "version", RNND_VERSION);
        rnnd_strbuf_json_key(b, "extensions");
        /* Only what is implemented: the /config, /stats and repository routes, and the hook's. */
        rnnd_strbuf_puts(b, "[\"model_configuration\",\"statistics\",\"model_repository\"");
        for (const char *const *e = extensions; e != NULL && *e != NULL; e++) {
                rnnd_strbuf_putc(b, ',');
                rnnd_strbuf_json_str(b, *e);
        }
        if (shm) /* on (max_shm_regions) */
                rnnd_strbuf_puts(b, ",\"system_shared_memory\"");
        rnnd_strbuf_puts(b, "]}");
}
