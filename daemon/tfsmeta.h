/*
 * tfsmeta.h: TF Serving's REST bodies that describe a model (docs/HTTP.md),
 * as the routes answer them (routes.c): its version status and its
 * metadata, rendered as JSON into a growable buffer (strbuf.h) from a model
 * the request pinned.
 */
#ifndef RNND_DAEMON_TFSMETA_H
#define RNND_DAEMON_TFSMETA_H

#include "models.h"
#include "strbuf.h"

/*
 * GET /v1/models/{m}[/versions/{v}]: model_version_status of sv, or of
 * every version of m, newest first, when sv is NULL.  m pinned.  Thread-safe.
 */
void rnnd_tfsmeta_status(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                         const struct rnnd_served_version *sv);

/* GET .../metadata: model_spec and the serving_default signature of sv (loaded).  m pinned. */
void rnnd_tfsmeta_metadata(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                           const struct rnnd_served_version *sv);

#endif
