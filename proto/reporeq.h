/*
 * repo.h: the bodies of the model repository extension's requests
 * (HTTP.md, Model repository): POST v2/repository/index {"ready": bool},
 * POST v2/repository/models/{m}/load and .../unload {"parameters": {...}}.
 */
#ifndef RNND_PROTO_REPO_H
#define RNND_PROTO_REPO_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* Largest body of a repository request. */
#define RNND_REPOREQ_MAX_BODY 4096u

enum rnnd_reporeq_call {
        RNND_REPOREQ_INDEX = 0,
        RNND_REPOREQ_LOAD,
        RNND_REPOREQ_UNLOAD,
};

struct rnnd_reporeq {
        bool ready; /* index: list only the versions ready for inference (false) */
};

/*
 * Parses body[0..len) of call into *ret; an empty body means the defaults.
 * Errors: RNND_ETOOBIG (over RNND_REPOREQ_MAX_BODY), RNND_EINVAL (not JSON, an
 * unknown key, a wrong type), RNND_EUNSUPPORTED (load's parameters.config or
 * file: overrides: rnnd loads what the repository holds).  Thread-safe.
 */
int rnnd_reporeq_parse(enum rnnd_reporeq_call call, const char *body, size_t len,
                       struct rnnd_reporeq *ret, rnnd_error_t *reterr);

/*
 * One key of a load's or unload's parameters, whatever the wire (JSON, or
 * gRPC's map): 0 for unload_dependents (a boolean: is_bool; rnnd models
 * have none), else why not (got describes the value for the message), as
 * rnnd_reporeq_parse() says it.  Thread-safe.
 */
int rnnd_reporeq_check_param(enum rnnd_reporeq_call call, const char *key, bool is_bool,
                             const char *got, rnnd_error_t *reterr);

#endif
