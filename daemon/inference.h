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
 * suspended, queued, and answered by the worker that ran it.  It has no
 * drain(): every request it holds is a job in a pool, and the server stops
 * the pools (queued jobs get 503, running ones finish).
 */
void rnnd_infer_hook_init(struct rnnd_server *srv, struct rnnd_infer_hook *ret);

#endif
