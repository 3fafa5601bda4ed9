/*
 * inference.h: inference, from a parsed request to its answer, for both
 * front ends (docs/DESIGN.md §2, §11): the inference hook of the HTTP API
 * (server.h) for KServe v2 infer and TF Serving :predict requests, and the
 * core it shares with the gRPC front end: bind the request to the model
 * version's config, allocate its outputs, schedule it (priority, timeout,
 * stateful sequences) and run it through the version's worker pool.
 */
#ifndef RNND_DAEMON_INFERENCE_H
#define RNND_DAEMON_INFERENCE_H

#include "infer.h"
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

/* One inference: its request, binding, outputs, job and sequence state. */
struct rnnd_inference;

/*
 * What a front end is told of its inference once started.  publish() runs
 * once, on the starting thread, just before the job is handed to the pool
 * (the HTTP side suspends its request there); may be NULL.  alive() runs
 * under the pool's lock (before a batch runs any of its sequences, and when
 * a submit finds the queue full): whether the client still waits; must not
 * block; NULL means always.  done() runs once, on a worker thread, the
 * loop's sweep or the thread whose submit failed, never under a lock, with
 * 0 (the outputs are filled) or a negative RNND_E* and its message; the
 * front end answers, records (rnnd_inference_record) and frees.
 */
struct rnnd_inference_owner {
        void (*publish)(void *cls);
        bool (*alive)(void *cls);
        void (*done)(void *cls, int status, const rnnd_error_t *err);
};

/*
 * A new inference on sv (loaded, pinned by the caller until the inference
 * is freed), its clock started.  Errors: RNND_ENOMEM.  Thread-safe.
 */
int rnnd_inference_new(struct rnnd_server *srv, struct rnnd_served_version *sv,
                       struct rnnd_inference **ret);

/* The request, for the front end's parser to fill.  Borrowed from c. */
struct rnnd_infer_request *rnnd_inference_request(struct rnnd_inference *c);

/* The limits a request's parse must keep (max_tensor_elements, max_json_depth). */
void rnnd_inference_limits(const struct rnnd_server *srv, struct rnnd_infer_limits *ret);

/*
 * Binds the request, allocates the outputs, schedules the job and submits
 * it (a sequence's chunk may first wait behind its sequence's running one).
 * Returns 0: owner->done(cls) will be called exactly once, perhaps before
 * this returns (a submit refused at once); or a negative RNND_E* with reterr
 * set, when nothing was published and done() is never called.  The thread
 * that owns c.
 */
int rnnd_inference_start(struct rnnd_inference *c, const struct rnnd_inference_owner *owner,
                         void *cls, rnnd_error_t *reterr);

/*
 * After done() with 0: writes the outputs the request asked to have in
 * shared memory to their regions (docs/HTTP.md "Shared memory"); 0, or
 * RNND_EINVAL with reterr set (a region unregistered or shrunk meanwhile):
 * the answer is then that error.  Any thread.
 */
int rnnd_inference_write_shm(struct rnnd_inference *c, rnnd_error_t *reterr);

/* The outputs the engine filled (after done() with 0).  Borrowed from c. */
const struct rnnd_infer_outputs *rnnd_inference_outputs(const struct rnnd_inference *c);

/*
 * Records the finished inference in its version's statistics (docs/HTTP.md,
 * "Statistics"): status 0 with the time its answer took to render, or the
 * failure.  Once per inference that was started.
 */
void rnnd_inference_record(struct rnnd_inference *c, int status, uint64_t output_ns);

/* Frees c; accepts NULL; returns NULL.  Not while its job is in a pool. */
struct rnnd_inference *rnnd_inference_free(struct rnnd_inference *c);

#endif
