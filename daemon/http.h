/*
 * http.h: one HTTP request as the routes and the inference hook see it, and
 * how they answer it (the libmicrohttpd adapter is in http.c).
 *
 * A request is refcounted (DESIGN.md §2): the HTTP side holds one reference
 * from the first handler call until MHD reports it completed; whoever queues
 * it elsewhere (the engine) takes another with rnnd_http_request_ref() and
 * drops it after rnnd_http_resume().  The body and the resolved model stay
 * valid while a reference is held.
 *
 * Answering (DESIGN.md §2): a response is prepared with rnnd_http_respond*()
 * and handed to MHD by http.c, either when the hook returns or, for a
 * suspended request, when MHD calls the handler again after
 * rnnd_http_resume().  Every response gets Content-Type and X-Request-Id.
 */
#ifndef RNND_DAEMON_HTTP_H
#define RNND_DAEMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "error.h"
#include "options.h"

/* Longest request id accepted from X-Request-Id; longer or unsafe ones are replaced. */
#define RNND_REQ_ID_MAX 64

struct rnnd_http_request;
struct rnnd_server;
struct MHD_Daemon;
struct rnnd_conns;
struct rnnd_listener;

/*
 * The route handler the HTTP layer calls (routes.c's rnnd_routes, installed
 * by main), with its own per-request context: ctx_size bytes the HTTP layer
 * allocates with each request, zeroed, aligned for any type, and hands to
 * every call (nginx's module context).  match() at a request's first call
 * resolves its path and method (and model and version), returning 0 to go
 * on reading the body or the status of the error response it prepared
 * (404, 405, ...); serve() at the final call prepares the response, or for
 * the inference routes calls the hook, which may suspend the request;
 * done() when the request is over (answered, or its client gone: status
 * 499) counts it and lets go of what match() holds, returning the level to
 * log the request at.  All on MHD threads.
 */
struct rnnd_route_handler {
        size_t ctx_size;
        unsigned (*match)(struct rnnd_http_request *r, void *ctx);
        void (*serve)(struct rnnd_http_request *r, void *ctx);
        int (*done)(struct rnnd_http_request *r, void *ctx, unsigned status);
        /* A request answered before it had a context (a head MHD refused): counts it. */
        void (*refused)(struct rnnd_server *app, unsigned status);
};

/*
 * The HTTP front end: libmicrohttpd's daemon and what its threads share.  It
 * knows nothing of models: the route handler does.  The server embeds it,
 * starts it, quiesces it when stopping and stops it once nothing is
 * suspended (docs/DESIGN.md §2, §8).
 */
struct rnnd_http {
        struct rnnd_server *app;                  /* rnnd_http_request_server(); immutable */
        const struct rnnd_options *_Atomic *opts; /* the settings in effect; immutable */
        struct rnnd_route_handler routes;         /* immutable after start */
        uint32_t id_seed;                         /* random prefix of request ids; immutable */
        atomic_uint_fast64_t id_counter;          /* atomic */
        struct MHD_Daemon *mhd;         /* set by start, cleared by stop; loop thread only */
        int listen_fd;                  /* the listening socket, or -1; loop thread only */
        int second_fd;                  /* a second socket systemd passed (gRPC's), or -1 */
        struct rnnd_listener *listener; /* it and its accept thread (http-listen.c) */
        char listen_name[300];          /* "127.0.0.1:8000" as bound; immutable after start */
        atomic_bool stopping;           /* atomic: set by rnnd_http_quiesce() */
        atomic_uint inflight;           /* atomic: requests between first call and completion */
        atomic_uint suspended;          /* atomic: requests suspended by the hook */
        struct rnnd_conns *conns;       /* the connections MHD holds (http-conns.c); set by start */
};

/* Sets h up for app with the settings *opts (swapped by reloads).  Before start. */
void rnnd_http_init(struct rnnd_http *h, struct rnnd_server *app,
                    const struct rnnd_options *_Atomic *opts);

/*
 * Starts MHD listening on opts->listen, or on the socket systemd passed.
 * Errors: RNND_EINVAL (address, or the passed socket), RNND_EIO (cannot
 * listen).  Main thread.
 */
int rnnd_http_start(struct rnnd_http *h, rnnd_error_t *reterr);

/*
 * Stopping: new inference is answered 503 by the routes, responses carry
 * Connection: close, and no new connection is accepted (the listening
 * socket stays open, new clients waiting in its backlog, until
 * rnnd_http_stop()).  Loop thread.
 */
void rnnd_http_quiesce(struct rnnd_http *h);

/* Stops MHD for good, only once nothing is suspended; idempotent.  Loop or main thread. */
void rnnd_http_stop(struct rnnd_http *h);

/* How often the loop should call rnnd_http_reap(). */
#define RNND_HTTP_REAP_MS 250

/* What one rnnd_http_reap() shut down, and how many connections are open. */
struct rnnd_http_reaped {
        unsigned slow;    /* not inside a request for header_timeout */
        unsigned gone;    /* closed by their clients */
        unsigned idle;    /* the longest idle, to make room near connection_limit */
        unsigned refused; /* new ones past per_address_limit */
        size_t open;
};

/*
 * Shuts down the connections a client should no longer hold (http-conns.c,
 * docs/OPERATIONS.md "Limits"); libmicrohttpd then closes them.  Loop thread.
 */
void rnnd_http_reap(struct rnnd_http *h, struct rnnd_http_reaped *ret);

/* Whether MHD is running.  Thread-safe once start returned. */
bool rnnd_http_listening(const struct rnnd_http *h);

/* Whether rnnd_http_quiesce() was called: the server is stopping.  Thread-safe. */
bool rnnd_http_stopping(const struct rnnd_http *h);

/* Requests between their first handler call and their completion.  Thread-safe. */
unsigned rnnd_http_inflight(const struct rnnd_http *h);

/* Takes a reference.  Thread-safe. */
struct rnnd_http_request *rnnd_http_request_ref(struct rnnd_http_request *r);

/* Drops a reference, freeing the request with the last; accepts NULL; returns NULL.  Thread-safe.
 */
struct rnnd_http_request *rnnd_http_request_unref(struct rnnd_http_request *r);

/* The request id (client's X-Request-Id if safe, else generated).  Borrowed.  Thread-safe. */
const char *rnnd_http_request_id(const struct rnnd_http_request *r);

/* The method ("POST") and the path without the query ("/v2/models/m/infer").  Borrowed. */
const char *rnnd_http_request_method(const struct rnnd_http_request *r);
const char *rnnd_http_request_path(const struct rnnd_http_request *r);

/*
 * The request header called name (case-insensitive), or NULL.  Borrowed until
 * the handler returns.  MHD thread only, inside the handler or the hook.
 */
const char *rnnd_http_request_header(const struct rnnd_http_request *r, const char *name);

/*
 * The whole body (NUL-terminated after len bytes, for parsers that like it),
 * or NULL with *len 0 when there is none.  Borrowed while a reference is held.
 */
const char *rnnd_http_request_body(const struct rnnd_http_request *r, size_t *len);

/* The server.  Borrowed.  Thread-safe. */
struct rnnd_server *rnnd_http_request_server(const struct rnnd_http_request *r);

/* Whether the hook suspended r and it was not handled again yet.  The request's owner. */
bool rnnd_http_request_suspended(const struct rnnd_http_request *r);

/*
 * Attaches the hook's own state to the request: free_fn(data) runs when the
 * request is freed (after the last reference).  Replaces (and frees) earlier
 * data.  Thread-safe as long as one thread owns the request at a time.
 */
void rnnd_http_request_set_data(struct rnnd_http_request *r, void *data,
                                void (*free_fn)(void *data));
void *rnnd_http_request_data(const struct rnnd_http_request *r);

/*
 * Prepares the response: status, Content-Type and body[0..len), which this
 * steals (it must come from rnnd_malloc; NULL with len 0 for none).  A
 * second call replaces the first.  Returns 0 or RNND_ENOMEM (the body is
 * freed either way).  A 503 gets "Retry-After: 1".  A body of at least 1 KiB
 * goes gzip'd or deflated where the request's Accept-Encoding asks.  Called by the request's
 * current owner: the MHD thread inside the hook, or the worker before
 * rnnd_http_resume().
 */
int rnnd_http_respond(struct rnnd_http_request *r, unsigned status, const char *content_type,
                      void *body, size_t len);

/*
 * rnnd_http_respond() for a body of tensors (an inference answer, JSON or
 * binary): where the client asked for it compressed, it is compressed for
 * numbers, which repeat too little for zlib's matching to pay (docs/HTTP.md
 * "Compressed requests and answers").
 */
int rnnd_http_respond_tensors(struct rnnd_http_request *r, unsigned status,
                              const char *content_type, void *body, size_t len);

/* Adds a header to the prepared response.  Returns 0 or RNND_ENOMEM.  Same thread rule. */
int rnnd_http_respond_header(struct rnnd_http_request *r, const char *name, const char *value);

/*
 * Prepares {"error": message} with status and application/json.  Returns 0
 * (an out-of-memory fallback body is used if need be).  Same thread rule.
 */
/*
 * The model and version (0: none) the request reached, for its access line
 * (option access_log); the route handler's done() says it.
 */
void rnnd_http_request_log_model(struct rnnd_http_request *r, const char *model, uint64_t version);

int rnnd_http_respond_error(struct rnnd_http_request *r, unsigned status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * rnnd_http_respond_error() with the HTTP status that proto/error.h gives
 * the negative RNND_E* code.  Returns that status.  Same thread rule.
 */
int rnnd_http_fail(struct rnnd_http_request *r, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* rnnd_http_fail() with err's message, or the code's own words when err has none. */
int rnnd_http_fail_err(struct rnnd_http_request *r, int code, const rnnd_error_t *err);

/*
 * Suspends the request's connection (MHD_suspend_connection).  Call it from
 * the hook's handle(), on the MHD thread, BEFORE publishing the request to
 * any other thread (DESIGN.md §2: suspend first, publish second).
 */
void rnnd_http_suspend(struct rnnd_http_request *r);

/*
 * Resumes a suspended request after its response was prepared.  After this
 * call the caller must not touch the response; it still holds its reference
 * and drops it with rnnd_http_request_unref().  Thread-safe.
 */
void rnnd_http_resume(struct rnnd_http_request *r);

/*
 * Resumes a suspended request whose response prepare(r) will make, on the
 * MHD thread that handles it again, just before it is queued: the work of
 * rendering leaves the thread that resumes (a model's worker).  prepare is
 * not called if MHD drops the connection first.  Same rules as
 * rnnd_http_resume() otherwise.
 */
void rnnd_http_resume_to_prepare(struct rnnd_http_request *r,
                                 void (*prepare)(struct rnnd_http_request *r));

/*
 * Whether the client of a suspended request has closed its connection or
 * reset it.  MHD does not watch a suspended connection, so this peeks at the
 * socket: end of file or an error means gone; a pipelined next request does
 * not.  (A client that only shuts down its sending side looks gone too.)
 * Never blocks.  Thread-safe while the request is suspended.
 */
bool rnnd_http_request_peer_gone(const struct rnnd_http_request *r);

#endif
