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

#include <stdbool.h>

#include "http.h"
#include "reload.h"
#include "route.h"
#include "strbuf.h"

/*
 * At the first call of a repository route: checks the token and the
 * declared body length.  Returns 0 to go on, or prepares 401/413 and returns
 * its status.  MHD thread.
 */
unsigned rnnd_repoapi_check(struct rnnd_http_request *r, struct rnnd_route_req *q);

/*
 * The index as both front ends answer it: [{name, version, state, reason}]
 * into b, every model's rows (ready_only: the READY ones).  Reads the model
 * table under its lock.  Thread-safe.
 */
void rnnd_repoapi_index_json(struct rnnd_server *srv, bool ready_only, struct rnnd_strbuf *b);

/*
 * A load (load true) or unload of the model called name, as both front ends
 * ask for it: checks the name and that the server is not stopping, calls
 * publish(cls) (the caller's suspend: the loop thread may answer at once),
 * and queues the operation, whose end reaches done(cls, status, msg) on the
 * loop thread (reload.h).  A negative RNND_E* with reterr: refused, done()
 * never called (publish() was called when it failed after the checks).
 */
int rnnd_repoapi_submit(struct rnnd_server *srv, bool load, const char *name,
                        rnnd_reload_done_fn done, void *cls, void (*publish)(void *cls),
                        rnnd_error_t *reterr);

/* The rows' handlers, at the final call (load and unload suspend r).  MHD thread. */
void rnnd_repoapi_index(struct rnnd_http_request *r, struct rnnd_route_req *q);
void rnnd_repoapi_load(struct rnnd_http_request *r, struct rnnd_route_req *q);
void rnnd_repoapi_unload(struct rnnd_http_request *r, struct rnnd_route_req *q);

#endif
