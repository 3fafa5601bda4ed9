/*
 * metrics.h: the daemon's counters and latency histograms, and the
 * Prometheus page that shows them (GET /metrics, HTTP.md, Metrics).
 *
 * The counters live in the model table's objects (server.h) and are updated
 * with relaxed atomics from any thread.  The page does not know the table:
 * its caller hands it a struct rnnd_metrics_source, which walks the models
 * and versions under the table's read lock, so this module depends on
 * nothing of the daemon.
 */
#ifndef RNND_DAEMON_METRICS_H
#define RNND_DAEMON_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "pool.h"
#include "seqtab.h"
#include "strbuf.h"

/* HTTP statuses counted by rnnd_requests_total; any other is counted as "other". */
#define RNND_COUNTED_CODES(XX)                                                                     \
        XX(200) XX(400) XX(404) XX(405) XX(411) XX(413) XX(415) XX(499) XX(500) XX(501) XX(503)

#define RNND_CODE_SLOTS 12 /* the codes above, plus "other" */

/* Requests answered, by status. */
struct rnnd_metrics_counters {
        atomic_ulong n[RNND_CODE_SLOTS]; /* atomic; by slot (rnnd_metrics_code_slot()) */
};

/* A count and a total duration, as the statistics extension reports them. */
struct rnnd_metrics_stat {
        atomic_ullong count; /* atomic */
        atomic_ullong ns;    /* atomic */
};

/*
 * A latency histogram for /metrics, in seconds: bucket i counts events of
 * at most rnnd_metrics_hist_bounds_s[i] (the last is +Inf); not cumulative.
 */
#define RNND_METRICS_HIST_BUCKETS 14
extern const double rnnd_metrics_hist_bounds_s[RNND_METRICS_HIST_BUCKETS];

struct rnnd_metrics_hist {
        atomic_ullong b[RNND_METRICS_HIST_BUCKETS]; /* atomic */
        atomic_ullong sum_ns;                       /* atomic */
};

/*
 * One version's request statistics (HTTP.md, Statistics):
 * success and fail are whole requests; queue is the time until a request's
 * first sequence started; compute_input parsing and checking, compute_infer
 * from the first sequence's start to the last one's end, compute_output
 * rendering.  Batch counts come from the version's pool (pool.h).
 */
struct rnnd_version_stats {
        struct rnnd_metrics_stat success, fail, queue, compute_input, compute_infer, compute_output;
        atomic_ullong last_inference_ms; /* wall clock of the last success; atomic */
        struct rnnd_metrics_hist request_h, queue_h, compute_h; /* successes only */
};

/* Counts one request answered with status in c.  Thread-safe. */
void rnnd_metrics_count(struct rnnd_metrics_counters *c, unsigned status);

/* The counter slot of an HTTP status, and the label of a slot ("200", "other").  Thread-safe. */
unsigned rnnd_metrics_code_slot(unsigned status);
const char *rnnd_metrics_code_label(unsigned slot);

/* Adds one event of ns nanoseconds to s.  Thread-safe. */
void rnnd_metrics_stat_add(struct rnnd_metrics_stat *s, uint64_t ns);

/* Adds one event of ns nanoseconds to h.  Thread-safe. */
void rnnd_metrics_hist_add(struct rnnd_metrics_hist *h, uint64_t ns);

/* One version as the page shows it; everything borrowed for the call. */
struct rnnd_metrics_version {
        uint64_t version;
        const struct rnnd_metrics_counters *requests;
        const struct rnnd_version_stats *stats;
        rnnd_pool_t *pool;                     /* NULL when not loaded: no families */
        const struct rnnd_backend_desc *descs; /* [instances] */
        unsigned instances;
        bool sequences;                /* the version keeps stateful sequences */
        struct rnnd_seqtab_counts seq; /* then: live, started, ended, expired */
};

/*
 * What the page shows: the gauges, the requests that named no model, and a
 * walk over the models and their versions, which must not change during the
 * call (the caller holds the table's read lock).
 */
struct rnnd_metrics_source {
        size_t models_loaded;
        unsigned inflight;
        uint64_t answer_bytes; /* held against max_response_memory */
        unsigned shm_regions;  /* system shared memory regions registered */
        const struct rnnd_metrics_counters *other_requests;
        size_t n_models;
        /*
         * Model i's name, its requests naming no valid version, its version count, and
         * whether its last load failed (its config, a version it selects, or a reload that
         * left the previous build serving; not a model unloaded on purpose).
         */
        void (*model)(void *cls, size_t i, const char **name,
                      const struct rnnd_metrics_counters **requests, size_t *n_versions,
                      bool *load_failed);
        /* Version j of model i. */
        void (*version)(void *cls, size_t i, size_t j, struct rnnd_metrics_version *ret);
        void *cls;
};

/* Appends the Prometheus text format 0.0.4 page of src to b.  Any thread. */
void rnnd_metrics_page(struct rnnd_strbuf *b, const struct rnnd_metrics_source *src);

#endif
