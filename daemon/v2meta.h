/*
 * v2meta.h: the KServe v2 bodies that describe models (docs/HTTP.md), as
 * the routes answer them (routes.c): server metadata, a model's metadata
 * and configuration, and the statistics extension.  Each renders JSON into
 * a growable buffer (strbuf.h; its oom flag says when memory ran out) from a
 * model the request pinned, or from the model table read under its lock.
 */
#ifndef RNND_DAEMON_V2META_H
#define RNND_DAEMON_V2META_H

#include <stdbool.h>
#include <stdint.h>

#include "models.h"
#include "strbuf.h"

/* Most tensors a model has on one side: input, lengths, h0, c0 / output, h_n, c_n, scores. */
#define RNND_V2META_MAX_TENSORS 5

/* One input or output tensor, as the model's config implies (docs/HTTP.md, Tensors). */
struct rnnd_v2meta_tensor {
        const char *name;
        const char *datatype; /* KServe v2 name */
        int64_t dims[3];      /* after the batch dimension; -1 = variable */
        unsigned ndims;       /* 0 = one scalar per batch item */
        bool optional;        /* lengths, h0, c0 */
};

/* Fills io[] with cfg's inputs (inputs true) or outputs; returns how many.  Thread-safe. */
unsigned rnnd_v2meta_tensors(const struct rnnd_model_config *cfg, bool inputs,
                             struct rnnd_v2meta_tensor io[RNND_V2META_MAX_TENSORS]);

/*
 * GET /v2: name, version and extensions (the hook's after rnnd's own, then
 * system_shared_memory when shm: max_shm_regions is not 0).  Thread-safe.
 */
void rnnd_v2meta_server(struct rnnd_strbuf *b, const char *const *extensions, bool shm);

/*
 * GET /v2/models/{m}[/versions/{v}]: m's loaded versions, the platform of
 * sv (loaded) and the tensors every request carries.  m pinned.  Thread-safe.
 */
void rnnd_v2meta_model(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                       const struct rnnd_served_version *sv);

/* GET .../config: Triton's model configuration of m as sv (loaded) placed it.  m pinned. */
void rnnd_v2meta_config(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                        const struct rnnd_served_version *sv);

/*
 * GET /v2/models[/{m}[/versions/{v}]]/stats: every loaded version of every
 * model of t, or of m only (when not NULL), or sv only (when not NULL).
 * Reads t under its lock.  Thread-safe.
 */
void rnnd_v2meta_stats(struct rnnd_strbuf *b, struct rnnd_models *t,
                       const struct rnnd_served_model *m, const struct rnnd_served_version *sv);

#endif
