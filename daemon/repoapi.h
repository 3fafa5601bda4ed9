/*
 * repoapi.h: the model repository extension (Triton's; HTTP.md, Model
 * repository), on MHD threads:
 *   POST /v2/repository/index               [{name, version, state, reason}]
 *   POST /v2/repository/models/{m}/load     200, or 400 saying why
 *   POST /v2/repository/models/{m}/unload   200, or 400 saying why
 * With auth_token_file set, each needs `Authorization: Bearer TOKEN` (401
 * with WWW-Authenticate otherwise).  Load and unload run through reload.c.
 */
#ifndef RNND_DAEMON_REPOAPI_H
#define RNND_DAEMON_REPOAPI_H

#include "http.h"
#include "route.h"

/*
 * At the first call of a repository route: checks the token and the
 * declared body length.  Returns 0 to go on, or prepares 401/413 and returns
 * its status.  MHD thread.
 */
unsigned rnnd_repoapi_check(struct rnnd_http_request *r, struct rnnd_route_req *q);

/* The rows' handlers, at the final call (load and unload suspend r).  MHD thread. */
void rnnd_repoapi_index(struct rnnd_http_request *r, struct rnnd_route_req *q);
void rnnd_repoapi_load(struct rnnd_http_request *r, struct rnnd_route_req *q);
void rnnd_repoapi_unload(struct rnnd_http_request *r, struct rnnd_route_req *q);

#endif
