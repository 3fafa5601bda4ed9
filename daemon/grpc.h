/*
 * grpc.h: the gRPC front end's transport (docs/DESIGN.md §11): the listening
 * socket, HTTP/2 connections (nghttp2) on the daemon's loop, and calls, one
 * per HTTP/2 stream, whose request messages it hands to the method table
 * main installs (struct rnnd_grpc_handler: grpcsvc.c's) and whose answers
 * it frames and sends.  It knows nothing of models.
 *
 * A call is refcounted: the transport holds one reference while its stream
 * is open; a method that answers later (from a worker, through
 * rnnd_grpc_call_post) takes its own.  Everything but ref, unref, post and
 * alive runs on the thread of the call's loop ("loop thread" below), which
 * is one of grpc_threads (struct rnnd_grpc).
 */
#ifndef RNND_DAEMON_GRPC_H
#define RNND_DAEMON_GRPC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "error.h"
#include "options.h"

/* gRPC's status codes (its own numbers) that the transport itself sends. */
enum {
        RNND_GRPC_OK = 0,
        RNND_GRPC_CANCELLED = 1,
        RNND_GRPC_INVALID_ARGUMENT = 3,
        RNND_GRPC_DEADLINE_EXCEEDED = 4,
        RNND_GRPC_RESOURCE_EXHAUSTED = 8,
        RNND_GRPC_UNIMPLEMENTED = 12,
        RNND_GRPC_INTERNAL = 13,
        RNND_GRPC_UNAVAILABLE = 14,
};

struct rnnd_grpc_call;
struct rnnd_grpc_conn;
struct rnnd_grpc_post;
struct rnnd_grpc_slot;
struct rnnd_server;

/* What a row of the method table says of its calls. */
enum {
        RNND_GRPC_CLIENT_STREAM = 1u << 0, /* many request messages, each handed on (else one) */
        RNND_GRPC_QUIET = 1u << 1,         /* health checks: logged at debug */
};

/* One method: its path and the function that takes each request message. */
struct rnnd_grpc_method {
        const char *path; /* "/inference.GRPCInferenceService/ModelInfer" */
        unsigned flags;   /* RNND_GRPC_* */
        /*
         * A whole request message, msg[0..len) valid during the call only.
         * The method answers with rnnd_grpc_send() / _reserve() and ends the
         * call with rnnd_grpc_finish(), now or later.  Loop thread.
         */
        void (*message)(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);
        /* A streaming call's client closed its side (may be NULL: finish OK once answered). */
        void (*half_closed)(struct rnnd_grpc_call *c);
};

/*
 * The method table main installs: find() the row of a path (NULL:
 * UNIMPLEMENTED), done() once per call when it is over (answered, reset,
 * or its connection gone; status the gRPC status sent, or CANCELLED), which
 * counts it and returns the level to log it at; tick() (may be NULL) a few
 * times a second on each loop thread, for calls that answer when something
 * changes (health's Watch): it may touch only the calls of the loop it runs
 * on (rnnd_grpc_call_here()).  Loop thread; find() any loop's.
 */
struct rnnd_grpc_handler {
        const struct rnnd_grpc_method *(*find)(const char *path);
        int (*done)(struct rnnd_grpc_call *c, int status);
        void (*tick)(struct rnnd_server *srv);
};

struct rnnd_grpc_loop; /* grpc.c's: a loop carrying connections */

/*
 * The gRPC front end, embedded in the server like struct rnnd_http.  Its
 * connections are spread over grpc_threads loops (docs/DESIGN.md §11): the
 * daemon's, which also accepts, and a thread's own loop for each of the
 * others.  "Daemon's loop" below is the thread that runs the daemon's loop.
 */
struct rnnd_grpc {
        struct rnnd_server *app;                  /* rnnd_grpc_call_server(); immutable */
        const struct rnnd_options *_Atomic *opts; /* the settings in effect; immutable */
        struct rnnd_grpc_handler handler;         /* immutable after start */
        uv_loop_t *loop;                          /* the daemon's; immutable after start */
        struct rnnd_grpc_loop *loops;             /* [n_loops], [0] the daemon's; immutable */
        unsigned n_loops;                         /* immutable after start */
        uv_tcp_t listener;                        /* daemon's loop only */
        bool listening;                           /* the listener is open; daemon's loop only */
        atomic_bool accepting;                    /* atomic: listening and not quiesced */
        char listen_name[300];                    /* as bound; immutable after start */
        pthread_mutex_t conns_mu;                 /* guards all and n_conns; taken last */
        struct rnnd_grpc_conn *all;               /* every loop's connections; conns_mu */
        size_t n_conns;                           /* how many; conns_mu */
        unsigned next_loop;                       /* where the least busy is looked for first */
        int held_fd;                              /* the listening socket kept while quiesced */
        unsigned refused_limit, refused_address;  /* refused since logged; daemon's loop only */
        uint64_t refused_logged_ms;               /* uv_now of that log line; daemon's loop */
        uint32_t id_seed;                         /* random prefix of call ids; immutable */
        char id_prefix[10];                       /* id_seed as "%08x-"; immutable */
        atomic_uint_fast64_t id_counter;          /* atomic: the last call id's number */
        atomic_bool stopping;                     /* atomic: set by rnnd_grpc_quiesce() */
        atomic_uint inflight;                     /* atomic: calls not yet over */
        atomic_uint_fast64_t *answer_bytes;       /* the server's count of what answers hold, which
                                                   * answers waiting in slots add to; or NULL */
        bool started;                             /* daemon's loop only */
};

/* Sets g up for app with the settings *opts.  Before start. */
void rnnd_grpc_init(struct rnnd_grpc *g, struct rnnd_server *app,
                    const struct rnnd_options *_Atomic *opts);

/*
 * Starts listening on fd (a socket systemd passed), or when fd < 0 on
 * opts->grpc_listen, and starts the loop threads; with neither (grpc_listen
 * "") it does nothing and returns 0.  Errors: RNND_EINVAL (the address),
 * RNND_EIO (cannot listen), RNND_EINTERNAL (libuv, a thread).  Main thread,
 * the daemon's loop initialized.
 */
int rnnd_grpc_start(struct rnnd_grpc *g, uv_loop_t *loop, const struct rnnd_grpc_handler *h, int fd,
                    rnnd_error_t *reterr);

/* Whether the front end listens (started and not quiesced).  Thread-safe. */
bool rnnd_grpc_listening(const struct rnnd_grpc *g);

/*
 * Stopping: no new connection is accepted (they wait in the backlog), every
 * connection gets GOAWAY (its calls in flight finish; new ones are refused)
 * and new calls are answered UNAVAILABLE; each loop sends its GOAWAYs
 * soon.  Daemon's loop.
 */
void rnnd_grpc_quiesce(struct rnnd_grpc *g);

/*
 * Closes every connection and handle (their calls end CANCELLED) and joins
 * the loop threads; posts still to come run their functions on the posting
 * thread with the call gone.  Idempotent.  Daemon's loop.
 */
void rnnd_grpc_stop(struct rnnd_grpc *g);

/* Frees what init and start allocated, after stop and once no thread posts.  Main thread. */
void rnnd_grpc_done(struct rnnd_grpc *g);

/* Calls not yet over.  Thread-safe. */
unsigned rnnd_grpc_inflight(const struct rnnd_grpc *g);

/* Calls. */

struct rnnd_grpc_call *rnnd_grpc_call_ref(struct rnnd_grpc_call *c);       /* thread-safe */
struct rnnd_grpc_call *rnnd_grpc_call_unref(struct rnnd_grpc_call *c);     /* thread-safe */
struct rnnd_server *rnnd_grpc_call_server(const struct rnnd_grpc_call *c); /* thread-safe */
const char *rnnd_grpc_call_id(const struct rnnd_grpc_call *c);             /* thread-safe */
const struct rnnd_grpc_method *rnnd_grpc_call_method(const struct rnnd_grpc_call *c);

/* The request header called name (lower case), or NULL: only authorization is kept. */
const char *rnnd_grpc_call_header(const struct rnnd_grpc_call *c, const char *name);

/*
 * The call's deadline (grpc-timeout) as microseconds left from now, at
 * least 1, or 0 when it has none.  Loop thread.
 */
uint64_t rnnd_grpc_call_timeout_us(const struct rnnd_grpc_call *c);

/*
 * Whether the client still waits: false once the stream was reset or
 * closed, its connection gone, or its deadline passed.  Thread-safe (the
 * pool's alive() calls it under its lock).
 */
bool rnnd_grpc_call_alive(const struct rnnd_grpc_call *c);

/* Whether the call can still send (its stream open and not finished).  Loop thread. */
bool rnnd_grpc_call_open(const struct rnnd_grpc_call *c);

/* Whether the calling thread is c's loop thread.  Thread-safe. */
bool rnnd_grpc_call_here(const struct rnnd_grpc_call *c);

/*
 * The method's own state, freed with free_fn when the call's last reference
 * goes (any thread).  Replaces and frees earlier data.
 */
void rnnd_grpc_call_set_data(struct rnnd_grpc_call *c, void *data, void (*free_fn)(void *data));
void *rnnd_grpc_call_data(const struct rnnd_grpc_call *c);

/* The model and version (0: none) the call reached, for its access line. */
void rnnd_grpc_call_log_model(struct rnnd_grpc_call *c, const char *model, uint64_t version);

/*
 * A place for one answer message in the call's stream, in request order:
 * answers go out in the order their places were taken, each once it is
 * filled.  NULL when memory ran out (the call then ends INTERNAL).  Loop
 * thread.
 */
struct rnnd_grpc_slot *rnnd_grpc_reserve(struct rnnd_grpc_call *c);

/*
 * Fills slot with buf, which this steals: from rnnd_malloc with 5 bytes
 * free in front (rnnd_pb_pack(m, 5, &len)), len the message's bytes after
 * them; NULL and 0 for a slot that sends nothing.  Loop thread.
 */
void rnnd_grpc_fill(struct rnnd_grpc_call *c, struct rnnd_grpc_slot *slot, void *buf, size_t len);

/* rnnd_grpc_reserve() and rnnd_grpc_fill() at once; false when memory ran out. */
bool rnnd_grpc_send(struct rnnd_grpc_call *c, void *buf, size_t len);

/*
 * Ends the call with status and message (percent-encoded in grpc-message)
 * once every slot taken was filled and sent.  Later sends are dropped; a
 * second finish is ignored.  Loop thread.
 */
void rnnd_grpc_finish(struct rnnd_grpc_call *c, int status, const char *message);

/* rnnd_grpc_finish() with the gRPC status of a negative RNND_E* and err's message. */
void rnnd_grpc_fail(struct rnnd_grpc_call *c, int code, const rnnd_error_t *err);

/* A post's place, the poster's storage: nothing to allocate on a worker. */
struct rnnd_grpc_post {
        struct rnnd_grpc_post *next;
        struct rnnd_grpc_call *call; /* a reference while posted */
        void (*fn)(struct rnnd_grpc_call *c, void *arg);
        void *arg;
};

/*
 * Runs fn(c, arg) on c's loop thread, soon; from any thread.  p (unused
 * until fn runs) holds the post; it takes a reference on c for it.  After
 * rnnd_grpc_stop() fn runs on the calling thread, the call no longer open.
 */
void rnnd_grpc_call_post(struct rnnd_grpc_call *c, struct rnnd_grpc_post *p,
                         void (*fn)(struct rnnd_grpc_call *c, void *arg), void *arg);

#endif
