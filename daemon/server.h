/*
 * server.h: the daemon's state: the models it serves, the HTTP server
 * (libmicrohttpd) and the loop (libuv) that owns signals and timers.
 *
 * Life cycle (main.c, systemd's run() shape):
 *   rnnd_server_new()    scans the repository, loads every selected version
 *                        and opens a backend plan for it; a model that fails
 *                        is kept with its reason and the others are served;
 *   rnnd_server_start()  starts MHD listening;
 *   rnnd_server_run()    sends READY=1 and runs the loop until SIGTERM/SIGINT
 *                        has drained and stopped MHD;
 *   rnnd_server_free()   frees everything.
 * The parts: the model table (srv->models, models.h) changes on SIGHUP and
 * through the repository API (reload.c); the HTTP front end (srv->http,
 * http.h) runs libmicrohttpd and calls the routes main installed; the
 * inference hook (main installs daemon/inference.c's) runs requests through
 * the pools.  This file owns the process: the loop, signals, the drain, the
 * watchdog, queue sweeps and device faults (docs/DESIGN.md §2, §8).
 */
#ifndef RNND_DAEMON_SERVER_H
#define RNND_DAEMON_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "error.h"
#include "grpc.h"
#include "http.h"
#include "models.h"
#include "options.h"
#include "shm.h"

struct rnnd_http_request;

/* Which API an inference request came in through. */
enum rnnd_server_protocol {
        RNND_SERVER_KSERVE_V2 = 0, /* POST /v2/models/{m}[/versions/{v}]/infer */
        RNND_SERVER_TFS_PREDICT,   /* POST /v1/models/{m}[/versions/{v}]:predict */
};

/*
 * The inference hook: what the infer routes call (DESIGN.md §2).  The HTTP
 * layer has read the whole body (capped at max_body_bytes), resolved the
 * model version (loaded, and the server not stopping) and calls handle() on
 * the MHD thread, once per request.  handle() must not block.  It either
 *   - answers at once: rnnd_http_respond*(req, ...), return 0; or
 *   - goes asynchronous: rnnd_http_suspend(req) FIRST, then publish the
 *     request to the engine (holding rnnd_http_request_ref(req)), return 0;
 *     a worker later calls rnnd_http_respond*() and then rnnd_http_resume();
 *   - or fails: return a negative RNND_E* with reterr set, answered as
 *     {"error": reterr->msg} with rnnd_error_http_status(code).
 * A suspended connection never times out and MHD does not notice its client
 * leaving, so the engine must answer every request it accepted (queue
 * timeouts answer 503), and its queues must be bounded (full: 503 at once).
 * drain() runs on the loop thread when shutdown_timeout has passed with
 * requests still suspended: answer 503 and resume every request the hook
 * holds (daemon/inference.c stops every model's pool, whose queued jobs are
 * answered 503; running batches finish).
 * stop() runs on the loop thread after MHD has stopped: join the hook's
 * workers and close its uv handles so that the loop can end.
 * sweep, optional, runs on the loop thread with each queue-timeout sweep of
 * a version's pool: expire what the hook holds past its deadline outside
 * the pool, and return the next such deadline (CLOCK_MONOTONIC ns) or
 * UINT64_MAX (daemon/inference.c: the chunks that wait behind their
 * sequence's running one).
 * handle, drain and stop are required (rnnd_server_start() checks).
 * extensions (NULL-terminated, may be NULL) are added to GET /v2's list.
 */
struct rnnd_server_hook {
        int (*handle)(void *cls, struct rnnd_http_request *req, struct rnnd_served_version *sv,
                      enum rnnd_server_protocol proto, rnnd_error_t *reterr);
        void (*drain)(void *cls);
        void (*stop)(void *cls);
        uint64_t (*sweep)(void *cls, struct rnnd_served_version *sv);
        const char *const *extensions;
        void *cls;
};

struct rnnd_reload;
struct rnnd_watch;

struct rnnd_server {
        /* The settings in effect: the first borrowed from main, later ones owned by reload.c. */
        const struct rnnd_options *_Atomic opts; /* atomic; swapped by a reload */
        struct rnnd_models models;               /* the model table (models.h) */
        struct rnnd_reload *reload;              /* reload.c's state; loop thread only */
        struct rnnd_server_hook infer;           /* immutable after start */
        struct rnnd_http http;                   /* the HTTP front end (http.h) */
        struct rnnd_grpc grpc;                   /* the gRPC front end (grpc.h) */
        struct rnnd_grpc_handler grpc_methods;   /* immutable after start */
        /* Bytes the answers hold, against max_response_memory (docs/HTTP.md "Limits"):
         * each inference's reservation until it is freed, and gRPC's packed answers until
         * sent.  Atomic. */
        atomic_uint_fast64_t answer_bytes;
        struct rnnd_shm shm; /* registered shared memory regions (shm.h); thread-safe */

        uv_loop_t loop;            /* loop thread only */
        uv_signal_t sig[3];        /* SIGINT, SIGTERM, SIGHUP; loop thread only */
        uv_timer_t drain_timer;    /* shutdown; loop thread only */
        uv_timer_t watchdog_timer; /* systemd watchdog; loop thread only */
        uv_timer_t reap_timer;     /* frees retired models (rnnd_models_reap); loop thread only */
        uv_timer_t conn_timer;     /* rnnd_http_reap(); loop thread only */
        uint64_t conn_logged_ms;   /* uv_now() of the last line about reaped connections */
        struct rnnd_http_reaped conn_reaped; /* shut down since that line; loop thread only */
        bool watchdog_on;                    /* loop thread only */
        bool watchdog_stalled;      /* the last look found a stalled pool; loop thread only */
        struct rnnd_watch *watch;   /* [n_watch]: each pool at the last look; loop thread only */
        size_t n_watch;             /* loop thread only */
        uint64_t drain_deadline_ms; /* uv_now() when drain gives up waiting; loop thread only */
        int drain_phase;            /* 0 waiting, 1 drained the hook; loop thread only */
        bool loop_ready;            /* the loop and its handles are initialized */
        uv_async_t sweep_async;     /* a pool has a new earliest queue deadline */
        uv_timer_t sweep_timer;     /* the earliest queue deadline of every pool; loop thread */
        atomic_bool sweep_ready;    /* sweep_async may be sent; atomic */

        /* A device fault (DESIGN.md §7): process-wide; the daemon drains and exits. */
        atomic_flag fault_claimed; /* the first pool to report one writes fault_msg */
        atomic_bool device_fault;  /* set after fault_msg is written */
        atomic_bool grpc_starting; /* ready waits for gRPC's listener; atomic */
        char fault_msg[256];       /* immutable once device_fault is set */
        bool fault_handled;        /* loop thread only */
        int exit_status;           /* main()'s, 0 or RNND_EXIT_DEVICE_FAULT; loop thread only */
};

/*
 * Builds the server: scans opts->model_repository, loads every version each
 * model's policy selects and opens a CPU plan for it, logging each model's
 * status.  Models that fail are kept with their reason.  Errors: the
 * repository itself cannot be read (RNND_EIO), RNND_ENOMEM.  On success *ret
 * is new; opts must outlive it.  Main thread, before other threads start.
 */
int rnnd_server_new(const struct rnnd_options *opts, struct rnnd_server **ret,
                    rnnd_error_t *reterr);

/* Installs the inference hook (copied).  Before rnnd_server_start(). */
void rnnd_server_set_infer_hook(struct rnnd_server *srv, const struct rnnd_server_hook *hook);

/*
 * Installs the gRPC front end's method table (copied; grpcsvc.c's), without
 * which it does not start.  Before rnnd_server_start().
 */
void rnnd_server_set_grpc(struct rnnd_server *srv, const struct rnnd_grpc_handler *methods);

/* The gRPC front end.  Borrowed for the server's life.  Thread-safe. */
struct rnnd_grpc *rnnd_server_grpc(struct rnnd_server *srv);

/* Installs the route handler (copied).  Before rnnd_server_start(). */
void rnnd_server_set_routes(struct rnnd_server *srv, const struct rnnd_route_handler *routes);

/*
 * Keeps argv (borrowed: it must outlive srv) so that SIGHUP can apply the
 * command line over the config file again (reload.c).  Main thread, before
 * rnnd_server_start().
 */
void rnnd_server_set_command_line(struct rnnd_server *srv, int argc, char **argv);

/*
 * Sets up the loop and its signal handlers, then starts MHD listening on
 * opts->listen (or the socket systemd passed).  Errors: RNND_EINVAL
 * (address), RNND_EIO (cannot listen), RNND_EINTERNAL (libuv, or no
 * inference hook or routes installed).  Main thread.
 */
int rnnd_server_start(struct rnnd_server *srv, rnnd_error_t *reterr);

/*
 * Sends READY=1 and runs the loop until SIGTERM or SIGINT: then stops
 * accepting, waits up to shutdown_timeout for in-flight requests, has the hook
 * answer the rest 503, stops MHD, closes every handle and the loop.  Returns
 * 0, or RNND_EINTERNAL when the loop could not be closed.  Loop thread (the
 * main thread).
 */
int rnnd_server_run(struct rnnd_server *srv, rnnd_error_t *reterr);

/*
 * The exit status after a device fault (docs/OPERATIONS.md): the GPU
 * context is unusable until the process ends, so rnnd drains, exits with
 * this status (EX_TEMPFAIL) and systemd's Restart=on-failure starts it again
 * while rnnd.socket keeps the listening socket.
 */
#define RNND_EXIT_DEVICE_FAULT 75

/* The status main() should exit with once rnnd_server_run() returned 0.  Main thread. */
int rnnd_server_exit_status(const struct rnnd_server *srv);

/* Stops MHD if running and frees everything; accepts NULL; returns NULL.  Main thread. */
struct rnnd_server *rnnd_server_free(struct rnnd_server *srv);

/* Whether the server is ready: every model loaded, listening and not stopping.  Thread-safe. */
bool rnnd_server_ready(const struct rnnd_server *srv);

/*
 * rnnd_server_ready(), and when not, why into why[cap] (a device fault, the
 * drain, or how many models loaded): what /v2/health/ready and gRPC's
 * ServerReady and health check say.  Thread-safe.
 */
bool rnnd_server_ready_why(struct rnnd_server *srv, char *why, size_t cap);

/*
 * The server's parts, for the routes on top of it (docs/DESIGN.md §1): the
 * model table, the HTTP front end and reload.c's state.  Borrowed for the
 * server's life.  Thread-safe.
 */
struct rnnd_models *rnnd_server_models(struct rnnd_server *srv);
struct rnnd_http *rnnd_server_http(struct rnnd_server *srv);
struct rnnd_reload *rnnd_server_reload(struct rnnd_server *srv);

/*
 * The device fault's message once a pool reported one (docs/DESIGN.md §7),
 * else NULL.  Borrowed for the server's life.  Thread-safe.
 */
const char *rnnd_server_device_fault(const struct rnnd_server *srv);

/* The inference hook's handle() (see struct rnnd_server_hook).  MHD thread. */
int rnnd_server_infer(struct rnnd_server *srv, struct rnnd_http_request *req,
                      struct rnnd_served_version *sv, enum rnnd_server_protocol proto,
                      rnnd_error_t *reterr);

/* The hook's extensions for GET /v2's list (NULL-terminated), or NULL.  Thread-safe. */
const char *const *rnnd_server_extensions(const struct rnnd_server *srv);

/*
 * Writes what was built in and what the machine has (--backends) to f:
 * the CPU engine and its OpenBLAS, the cuDNN backend and its versions or
 * "not built", the CUDA driver and GPUs or why there are none, and the
 * backend setting.
 */
void rnnd_server_print_backends(FILE *f, const struct rnnd_options *opts);

#endif
