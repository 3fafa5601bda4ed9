/*
 * metrics.c: the counters, the latency histograms and the Prometheus page
 * (metrics.h).  The page writes each family's HELP, TYPE and samples as one
 * group, as text format 0.0.4 wants.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "modelcfg.h"

static const unsigned counted_codes[] = {
#define RNND_CODE_ENTRY(c) c,
        RNND_COUNTED_CODES(RNND_CODE_ENTRY)
#undef RNND_CODE_ENTRY
};

unsigned rnnd_metrics_code_slot(unsigned status)
{
        unsigned i;

        for (i = 0; i < sizeof(counted_codes) / sizeof(counted_codes[0]); i++)
                if (counted_codes[i] == status)
                        return i;
        return RNND_CODE_SLOTS - 1;
}

const char *rnnd_metrics_code_label(unsigned slot)
{
        static const char *const labels[] = {
#define RNND_CODE_LABEL(c) #c,
                RNND_COUNTED_CODES(RNND_CODE_LABEL)
#undef RNND_CODE_LABEL
                        "other",
        };

        return slot < RNND_CODE_SLOTS ? labels[slot] : "other";
}

void rnnd_metrics_count(struct rnnd_metrics_counters *c, unsigned status)
{
        atomic_fetch_add_explicit(&c->n[rnnd_metrics_code_slot(status)], 1, memory_order_relaxed);
}

_Static_assert(sizeof(counted_codes) / sizeof(counted_codes[0]) == RNND_CODE_SLOTS - 1,
               "RNND_CODE_SLOTS must be the counted codes plus one");

void rnnd_metrics_stat_add(struct rnnd_metrics_stat *s, uint64_t ns)
{
        atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->ns, ns, memory_order_relaxed);
}

const double rnnd_metrics_hist_bounds_s[RNND_METRICS_HIST_BUCKETS] = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
        0.025,  0.05,    0.1,    0.25,  1,      5,     __builtin_inf()};

void rnnd_metrics_hist_add(struct rnnd_metrics_hist *h, uint64_t ns)
{
        double s = (double)ns / 1e9;
        unsigned i;

        for (i = 0; i + 1 < RNND_METRICS_HIST_BUCKETS && s > rnnd_metrics_hist_bounds_s[i]; i++)
                ;
        atomic_fetch_add_explicit(&h->b[i], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

static void put_counters(struct rnnd_strbuf *b, const char *model, const char *version,
                         const struct rnnd_metrics_counters *c)
{
        unsigned s;

        for (s = 0; s < RNND_CODE_SLOTS; s++) {
                unsigned long n = atomic_load_explicit(&c->n[s], memory_order_relaxed);

                if (n == 0)
                        continue;
                rnnd_strbuf_printf(
                        b, "rnnd_requests_total{model=\"%s\",version=\"%s\",code=\"%s\"} %lu\n",
                        model, version, rnnd_metrics_code_label(s), n);
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
                        const struct rnnd_metrics_hist *h)
{
        uint64_t counts[RNND_METRICS_HIST_BUCKETS];

        for (unsigned i = 0; i < RNND_METRICS_HIST_BUCKETS; i++)
                counts[i] = atomic_load_explicit(&h->b[i], memory_order_relaxed);
        put_histogram(b, name, labels, rnnd_metrics_hist_bounds_s, counts,
                      RNND_METRICS_HIST_BUCKETS,
                      (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9);
}

/*
 * The per-version metric families.  Text format 0.0.4 wants each family's
 * HELP, TYPE and samples as one group, so each has its own entry: HELP and
 * TYPE once, then every version's samples.
 */
enum version_metric {
        VM_REQUEST_S,
        VM_QUEUE_S,
        VM_COMPUTE_S,
        VM_BATCH_SIZE,
        VM_PADDING,
        VM_INFERENCE_COUNT,
        VM_EXECUTION_COUNT,
        VM_STEPS_USED,
        VM_STEPS_TOTAL,
        VM_COMPUTE_TOTAL,
        VM_EXPIRED,
        VM_CANCELED,
        VM_REJECTED,
        VM_INFO,
        VM_QUEUE_DEPTH,
        VM_BATCHES_RUNNING,
        VM_IN_SERVICE,
        VM_SEQ_LIVE, /* the stateful sequences: only versions that keep them */
        VM_SEQ_STARTED,
        VM_SEQ_ENDED,
        VM_SEQ_EXPIRED,
        VM_SEQ_MAX,
        VM_SEQ_REFUSED, /* the last */
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

/* One sample of a counter or gauge. */
static void put_count(struct rnnd_strbuf *b, const char *name, const char *labels, uint64_t v)
{
        rnnd_strbuf_printf(b, "%s{%s} %llu\n", name, labels, (unsigned long long)v);
}

static void put_version_metric(struct rnnd_strbuf *b, enum version_metric k, const char *labels,
                               const struct rnnd_metrics_version *sv,
                               const struct rnnd_pool_stats *ps)
{
        switch (k) {
        case VM_REQUEST_S:
                put_latency(b, "rnnd_request_duration_seconds", labels, &sv->stats->request_h);
                break;
        case VM_QUEUE_S:
                put_latency(b, "rnnd_queue_duration_seconds", labels, &sv->stats->queue_h);
                break;
        case VM_COMPUTE_S:
                put_latency(b, "rnnd_compute_duration_seconds", labels, &sv->stats->compute_h);
                break;
        case VM_BATCH_SIZE:
                put_histogram(b, "rnnd_batch_size", labels, rnnd_pool_size_bounds, ps->size_buckets,
                              RNND_POOL_SIZE_BUCKETS, (double)ps->sequences);
                break;
        case VM_PADDING:
                put_histogram(b, "rnnd_batch_padding_efficiency", labels, rnnd_pool_padding_bounds,
                              ps->padding_buckets, RNND_POOL_PADDING_BUCKETS, ps->padding_sum);
                break;
        case VM_INFERENCE_COUNT:
                put_count(b, "rnnd_inference_count_total", labels, ps->sequences);
                break;
        case VM_EXECUTION_COUNT:
                put_count(b, "rnnd_execution_count_total", labels, ps->batches);
                break;
        case VM_STEPS_USED:
                put_count(b, "rnnd_batch_steps_used_total", labels, ps->steps_used);
                break;
        case VM_STEPS_TOTAL:
                put_count(b, "rnnd_batch_steps_total", labels, ps->steps_total);
                break;
        case VM_COMPUTE_TOTAL:
                rnnd_strbuf_printf(b, "rnnd_batch_compute_seconds_total{%s} %.9g\n", labels,
                                   (double)ps->compute_ns / 1e9);
                break;
        case VM_EXPIRED:
                put_count(b, "rnnd_queue_expired_total", labels, ps->expired);
                break;
        case VM_CANCELED:
                put_count(b, "rnnd_requests_canceled_total", labels, ps->canceled);
                break;
        case VM_REJECTED:
                put_count(b, "rnnd_queue_rejected_total", labels, ps->rejected);
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
        case VM_QUEUE_DEPTH:
                put_count(b, "rnnd_queue_depth", labels, ps->queued);
                break;
        case VM_BATCHES_RUNNING:
                put_count(b, "rnnd_batches_running", labels, ps->running);
                break;
        case VM_IN_SERVICE:
                put_count(b, "rnnd_instances_in_service", labels, ps->in_service);
                break;
        case VM_SEQ_LIVE:
                put_count(b, "rnnd_sequences_live", labels, sv->seq.live);
                break;
        case VM_SEQ_STARTED:
                put_count(b, "rnnd_sequences_started_total", labels, sv->seq.started);
                break;
        case VM_SEQ_ENDED:
                put_count(b, "rnnd_sequences_ended_total", labels, sv->seq.ended);
                break;
        case VM_SEQ_EXPIRED:
                put_count(b, "rnnd_sequences_expired_total", labels, sv->seq.expired);
                break;
        case VM_SEQ_MAX:
                put_count(b, "rnnd_sequences_max", labels, sv->seq.max);
                break;
        case VM_SEQ_REFUSED:
                put_count(b, "rnnd_sequences_refused_total", labels, sv->seq.refused);
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
        [VM_INFERENCE_COUNT] = "# HELP rnnd_inference_count_total Sequences run.\n"
                               "# TYPE rnnd_inference_count_total counter\n",
        [VM_EXECUTION_COUNT] = "# HELP rnnd_execution_count_total Batches run.\n"
                               "# TYPE rnnd_execution_count_total counter\n",
        [VM_STEPS_USED] = "# HELP rnnd_batch_steps_used_total Sum of the lengths of the sequences "
                          "run.\n"
                          "# TYPE rnnd_batch_steps_used_total counter\n",
        [VM_STEPS_TOTAL] = "# HELP rnnd_batch_steps_total Sum of batch size x longest over batches "
                           "run (steps_used / this = padding efficiency).\n"
                           "# TYPE rnnd_batch_steps_total counter\n",
        [VM_COMPUTE_TOTAL] = "# HELP rnnd_batch_compute_seconds_total Time the instances spent "
                             "running batches.\n"
                             "# TYPE rnnd_batch_compute_seconds_total counter\n",
        [VM_EXPIRED] = "# HELP rnnd_queue_expired_total Sequences whose queue timeout "
                       "expired (503).\n"
                       "# TYPE rnnd_queue_expired_total counter\n",
        [VM_CANCELED] = "# HELP rnnd_requests_canceled_total Requests dropped before they "
                        "started because the client went away.\n"
                        "# TYPE rnnd_requests_canceled_total counter\n",
        [VM_REJECTED] = "# HELP rnnd_queue_rejected_total Requests refused at once: queue full "
                        "or shutting down (503).\n"
                        "# TYPE rnnd_queue_rejected_total counter\n",
        [VM_INFO] = "# HELP rnnd_model_backend_info Where a version's instances run, and why "
                    "not on cuDNN (\"\" when they are); one series per distinct placement, "
                    "the value is how many instances have it.\n"
                    "# TYPE rnnd_model_backend_info gauge\n",
        [VM_QUEUE_DEPTH] = "# HELP rnnd_queue_depth Sequences waiting.\n"
                           "# TYPE rnnd_queue_depth gauge\n",
        [VM_BATCHES_RUNNING] = "# HELP rnnd_batches_running Batches on instances now.\n"
                               "# TYPE rnnd_batches_running gauge\n",
        [VM_IN_SERVICE] = "# HELP rnnd_instances_in_service Instances that can run batches.\n"
                          "# TYPE rnnd_instances_in_service gauge\n",
        [VM_SEQ_LIVE] = "# HELP rnnd_sequences_live Stateful sequences live now.\n"
                        "# TYPE rnnd_sequences_live gauge\n",
        [VM_SEQ_STARTED] = "# HELP rnnd_sequences_started_total Stateful sequences started "
                           "(restarts included).\n"
                           "# TYPE rnnd_sequences_started_total counter\n",
        [VM_SEQ_ENDED] = "# HELP rnnd_sequences_ended_total Stateful sequences ended by "
                         "sequence_end.\n"
                         "# TYPE rnnd_sequences_ended_total counter\n",
        [VM_SEQ_EXPIRED] = "# HELP rnnd_sequences_expired_total Stateful sequences expired "
                           "after sequence.idle_timeout_ms.\n"
                           "# TYPE rnnd_sequences_expired_total counter\n",
        [VM_SEQ_MAX] = "# HELP rnnd_sequences_max Stateful sequences that may be live "
                       "(sequence.max_sequences).\n"
                       "# TYPE rnnd_sequences_max gauge\n",
        [VM_SEQ_REFUSED] = "# HELP rnnd_sequences_refused_total Stateful sequence starts "
                           "refused (503) because max_sequences were live.\n"
                           "# TYPE rnnd_sequences_refused_total counter\n",
};

/* Model i of src, as its model callback gives it. */
struct model_row {
        const struct rnnd_metrics_counters *requests;
        const char *name;
        size_t n_versions;
        bool failed;
};

static void model_row(const struct rnnd_metrics_source *src, size_t i, struct model_row *m)
{
        src->model(src->cls, i, &m->name, &m->requests, &m->n_versions, &m->failed);
}

static void put_version_metrics(struct rnnd_strbuf *b, const struct rnnd_metrics_source *src)
{
        for (unsigned k = VM_REQUEST_S; k <= VM_SEQ_REFUSED; k++) {
                rnnd_strbuf_puts(b, version_metric_help[k]);
                for (size_t i = 0; i < src->n_models; i++) {
                        struct model_row m;

                        model_row(src, i, &m);
                        for (size_t j = 0; j < m.n_versions; j++) {
                                struct rnnd_metrics_version sv;
                                struct rnnd_pool_stats ps;
                                char labels[RNND_CFG_NAME_MAX + 64];

                                src->version(src->cls, i, j, &sv);
                                if (sv.pool == NULL || (k >= VM_SEQ_LIVE && !sv.sequences))
                                        continue;
                                rnnd_pool_stats(sv.pool, &ps);
                                snprintf(labels, sizeof(labels),
                                         "model=\"%s\",version=\"%" PRIu64 "\"", m.name,
                                         sv.version);
                                put_version_metric(b, (enum version_metric)k, labels, &sv, &ps);
                        }
                }
        }
}

/* rnnd_model_load_failed: one sample per model of the table. */
static void put_load_failed(struct rnnd_strbuf *b, const struct rnnd_metrics_source *src)
{
        rnnd_strbuf_puts(b, "# HELP rnnd_model_load_failed 1 when the model's last load failed "
                            "(its config.json, a version it selects, or a reload that left the "
                            "previous build serving), else 0; the reason is in POST "
                            "/v2/repository/index.\n"
                            "# TYPE rnnd_model_load_failed gauge\n");
        for (size_t i = 0; i < src->n_models; i++) {
                struct model_row m;

                model_row(src, i, &m);
                rnnd_strbuf_printf(b, "rnnd_model_load_failed{model=\"%s\"} %d\n", m.name,
                                   m.failed);
        }
}

/* When the process started, for rnnd_start_time_seconds: a restart shows as its change. */
static double start_time_s;

__attribute__((constructor)) static void note_start_time(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        start_time_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void rnnd_metrics_page(struct rnnd_strbuf *b, const struct rnnd_metrics_source *src)
{
        rnnd_strbuf_puts(b, "# HELP rnnd_up Whether the daemon is serving (always 1 when it "
                            "answers).\n"
                            "# TYPE rnnd_up gauge\n"
                            "rnnd_up 1\n"
                            "# HELP rnnd_models_loaded Models with at least one version "
                            "loaded.\n"
                            "# TYPE rnnd_models_loaded gauge\n");
        rnnd_strbuf_printf(b, "rnnd_models_loaded %zu\n", src->models_loaded);
        rnnd_strbuf_puts(b, "# HELP rnnd_start_time_seconds When the process started, in "
                            "seconds since the epoch.\n"
                            "# TYPE rnnd_start_time_seconds gauge\n");
        rnnd_strbuf_printf(b, "rnnd_start_time_seconds %.3f\n", start_time_s);
        rnnd_strbuf_puts(b, "# HELP rnnd_http_requests_in_flight HTTP requests received and not "
                            "yet completed.\n"
                            "# TYPE rnnd_http_requests_in_flight gauge\n");
        rnnd_strbuf_printf(b, "rnnd_http_requests_in_flight %u\n", src->inflight);
        rnnd_strbuf_puts(b, "# HELP rnnd_response_memory_bytes What the answers of inference "
                            "requests hold until their clients read them, against "
                            "max_response_memory.\n"
                            "# TYPE rnnd_response_memory_bytes gauge\n");
        rnnd_strbuf_printf(b, "rnnd_response_memory_bytes %" PRIu64 "\n", src->answer_bytes);
        rnnd_strbuf_puts(b, "# HELP rnnd_shm_regions System shared memory regions clients have "
                            "registered, against max_shm_regions.\n"
                            "# TYPE rnnd_shm_regions gauge\n");
        rnnd_strbuf_printf(b, "rnnd_shm_regions %u\n", src->shm_regions);
        rnnd_strbuf_puts(b, "# HELP rnnd_requests_total HTTP requests answered, by model, "
                            "version and status code (model=\"\" for other paths).\n"
                            "# TYPE rnnd_requests_total counter\n");
        put_counters(b, "", "", src->other_requests);
        for (size_t i = 0; i < src->n_models; i++) {
                struct model_row m;

                model_row(src, i, &m);
                put_counters(b, m.name, "", m.requests);
                for (size_t j = 0; j < m.n_versions; j++) {
                        struct rnnd_metrics_version sv;
                        char v[24];

                        src->version(src->cls, i, j, &sv);
                        snprintf(v, sizeof(v), "%" PRIu64, sv.version);
                        put_counters(b, m.name, v, sv.requests);
                }
        }
        put_load_failed(b, src);
        put_version_metrics(b, src);
}
