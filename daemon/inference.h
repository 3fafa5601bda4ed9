/*
 * inference.h: the inference hook (server.h): KServe v2 infer and TF Serving
 * :predict requests, parsed and checked by proto/, run by the model
 * version's worker pool, answered on the suspended connection.
 */
#ifndef RNND_DAEMON_INFERENCE_H
#define RNND_DAEMON_INFERENCE_H

#include "server.h"

/*
 * Fills *ret with the hook for srv (which must outlive it).  handle() answers
 * bad requests at once with the proto/ error's status; a full queue or a
 * stopping model is a 503 with Retry-After; otherwise the request is
 * suspended, queued, and answered by the worker that ran it.  drain(), when
 * shutdown_timeout has passed, stops every pool: every request the hook
 * holds is a job in one, so queued jobs are answered 503 and running ones
 * finish.  stop() has nothing to join: the pools' workers end with their
 * models.
 */
void rnnd_inference_hook_init(struct rnnd_server *srv, struct rnnd_server_hook *ret);

#endif
