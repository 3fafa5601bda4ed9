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
 * The model table (srv->models) changes on SIGHUP and through the repository
 * API (reload.c): the loop thread builds new model objects beside the old,
 * swaps the table under table_lock, and frees a replaced model once no request
 * pins it.  A model object itself is immutable after it is built, so a request
 * that pinned one (rnnd_server_pin_model()) reads it without locks.
 */
#ifndef RNND_DAEMON_SERVER_H
#define RNND_DAEMON_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "backend.h"
#include "error.h"
#include "metrics.h"
#include "options.h"
#include "pool.h"
#include "repository.h"

struct rnnd_served_model;

/* One version of a model: loaded, or the reason it is not. */
struct rnnd_served_version {
        uint64_t wd_completed; /* pool's completed at the last look; loop thread only */
        uint64_t wd_moved_ms;  /* uv_now() when it last moved; loop thread only */
        uint64_t version;      /* immutable */
        int status;            /* 0 = loaded, else a negative RNND_E*; immutable */
        char reason[256];      /* why, when status < 0; immutable */
        rnnd_model_t *model;   /* a reference, NULL when not loaded; immutable */
        rnnd_pool_t *pool;     /* the instances, NULL when not loaded; immutable */
        unsigned instances;    /* worker threads in pool; immutable */
        /* [instances], describe() of each, why_not_cudnn filled; immutable */
        struct rnnd_backend_desc *descs;
        /* Instance group g holds descs[group_end[g - 1] .. group_end[g]); immutable. */
        unsigned group_end[RNND_CFG_MAX_INSTANCE_GROUPS];
        struct rnnd_served_model *owner;       /* immutable */
        struct rnnd_metrics_counters requests; /* atomic */
        struct rnnd_version_stats stats;       /* atomic */
};

/*
 * What a model's files on disk were when it was built: a SIGHUP reload
 * rebuilds a model only when this, or a setting models depend on, changed.
 */
struct rnnd_model_stamp {
        uint64_t hash; /* FNV-1a of config.json's and every selected weights file's stat */
};

/*
 * A model of the repository and its selected versions: one object per build,
 * immutable once in the table but for the fields marked otherwise.  Requests
 * pin it (rnnd_server_pin_model()); the loop thread frees it once it has left
 * the table and nothing pins it.
 */
struct rnnd_served_model {
        const struct rnnd_repo_model *entry;   /* = &own_entry; immutable */
        struct rnnd_served_version *versions;  /* [n_versions], ascending; immutable */
        size_t n_versions;                     /* immutable */
        size_t n_loaded;                       /* versions with status 0; immutable */
        struct rnnd_metrics_counters requests; /* requests naming no valid version; atomic */
        struct rnnd_repo_model own_entry;      /* name, status, reason, cfg; immutable */
        struct rnnd_model_stamp stamp;         /* immutable */
        bool unloaded;                         /* unloaded through the repository API; immutable */
        atomic_uint pins;                      /* requests holding it; atomic */
        atomic_bool retired;                   /* left the table; atomic */
        atomic_bool loading;                   /* a load of this name is running; atomic */
        int load_status;       /* the last failed (re)load, kept serving; guarded by table_lock */
        char load_reason[256]; /* why; guarded by table_lock */
        uint64_t load_version; /* the version that failed, 0 = the model; guarded by table_lock */
        struct rnnd_served_model *next_retired; /* loop thread only */
        bool mark;                              /* scratch for swaps; loop thread only */
};

struct rnnd_http_request;

/* Which API an inference request came in through. */
enum rnnd_infer_protocol {
        RNND_INFER_KSERVE_V2 = 0, /* POST /v2/models/{m}[/versions/{v}]/infer */
        RNND_INFER_TFS_PREDICT,   /* POST /v1/models/{m}[/versions/{v}]:predict */
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
 * drain() (may be NULL) runs on the loop thread when shutdown_timeout has
 * passed with requests still suspended, after the server has stopped every
 * model's pool (their queued jobs answered 503): answer 503 and resume any
 * other request the hook holds.
 * stop() (may be NULL) runs on the loop thread after MHD has stopped: join
 * workers and close the hook's uv handles so that the loop can end.
 * extensions (NULL-terminated, may be NULL) are added to GET /v2's list.
 */
struct rnnd_infer_hook {
        int (*handle)(void *cls, struct rnnd_http_request *req, struct rnnd_served_version *sv,
                      enum rnnd_infer_protocol proto, rnnd_error_t *reterr);
        void (*drain)(void *cls);
        void (*stop)(void *cls);
        const char *const *extensions;
        void *cls;
};

/*
 * The route handler the HTTP layer calls (routes.c's rnnd_routes, installed
 * by main): match() at a request's first call resolves its path and method
 * (and model and version), returning 0 to go on reading the body or the
 * status of the error response it prepared (404, 405, ...); serve() at the
 * final call prepares the response, or for the inference routes calls the
 * hook, which may suspend the request.  Both on MHD threads.
 */
struct rnnd_route_handler {
        unsigned (*match)(struct rnnd_http_request *r);
        void (*serve)(struct rnnd_http_request *r);
};

/* The hook installed until inference lands: answers 501 "not implemented yet". */
extern const struct rnnd_infer_hook rnnd_infer_hook_unimplemented;

struct MHD_Daemon;

struct rnnd_reload;

struct rnnd_server {
        /* The settings in effect: the first borrowed from main, later ones owned by reload.c. */
        const struct rnnd_options *_Atomic opts; /* atomic; swapped by a reload */
        /* Lock order: table_lock, then a pool's own lock.  Written by the loop thread only. */
        pthread_rwlock_t table_lock;
        struct rnnd_served_model **models; /* [n_models], sorted by name; guarded by table_lock */
        size_t n_models;                   /* guarded by table_lock */
        atomic_size_t n_loaded_models;     /* models with a loaded version; atomic */
        atomic_bool all_loaded;            /* every model and selected version loaded; atomic */
        struct rnnd_served_model *retired; /* left the table, not yet freed; loop thread only */
        struct rnnd_reload *reload;        /* reload.c's state; loop thread only */
        struct rnnd_infer_hook infer;      /* immutable after start */
        struct rnnd_route_handler routes;  /* immutable after start */
        struct rnnd_metrics_counters other_requests; /* requests not naming a known model; atomic */
        uint32_t id_seed;                            /* random prefix of request ids; immutable */
        atomic_uint_fast64_t id_counter;             /* atomic */

        struct MHD_Daemon *mhd; /* set by start, cleared by stop; loop thread only */
        int listen_fd;          /* returned by MHD_quiesce_daemon, or -1; loop thread only */
        char listen_name[300];  /* "127.0.0.1:8000" as bound; immutable after start */
        atomic_bool stopping;   /* atomic: set on SIGTERM/SIGINT */
        atomic_uint inflight;   /* atomic: requests between first call and completion */
        atomic_uint suspended;  /* atomic: requests suspended by the hook */

        uv_loop_t loop;             /* loop thread only */
        uv_signal_t sig[3];         /* SIGINT, SIGTERM, SIGHUP; loop thread only */
        uv_timer_t drain_timer;     /* shutdown; loop thread only */
        uv_timer_t watchdog_timer;  /* systemd watchdog; loop thread only */
        uv_timer_t reap_timer;      /* frees retired models; loop thread only */
        bool watchdog_on;           /* loop thread only */
        bool watchdog_stalled;      /* the last look found a stalled pool; loop thread only */
        uint64_t drain_deadline_ms; /* uv_now() when drain gives up waiting; loop thread only */
        int drain_phase;            /* 0 waiting, 1 drained the hook; loop thread only */
        bool loop_ready;            /* the loop and its handles are initialized */
        uv_async_t sweep_async;     /* a pool has a new earliest queue deadline */
        uv_timer_t sweep_timer;     /* the earliest queue deadline of every pool; loop thread */
        atomic_bool sweep_ready;    /* sweep_async may be sent; atomic */

        /* A device fault (DESIGN.md §7): process-wide; the daemon drains and exits. */
        atomic_flag fault_claimed; /* the first pool to report one writes fault_msg */
        atomic_bool device_fault;  /* set after fault_msg is written */
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
void rnnd_server_set_infer_hook(struct rnnd_server *srv, const struct rnnd_infer_hook *hook);

/* Installs the route handler (copied).  Before rnnd_server_start(). */
void rnnd_server_set_routes(struct rnnd_server *srv, const struct rnnd_route_handler *routes);

/*
 * Sets up the loop and its signal handlers, then starts MHD listening on
 * opts->listen (or the socket systemd passed).  Errors: RNND_EINVAL
 * (address), RNND_EIO (cannot listen), RNND_EINTERNAL (libuv).  Main thread.
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

/*
 * The model called name in the table, or NULL.  Borrowed while the caller
 * holds table_lock (rnnd_server_rdlock()), or on the loop thread until it
 * changes the table.
 */
struct rnnd_served_model *rnnd_server_find_model(struct rnnd_server *srv, const char *name);

/* Read-locks / unlocks the table, e.g. to walk srv->models.  Thread-safe; not recursive. */
void rnnd_server_rdlock(struct rnnd_server *srv);
void rnnd_server_unlock(struct rnnd_server *srv);

/*
 * The model called name, pinned: it and its versions stay valid, and its
 * pools keep running, until rnnd_server_unpin_model().  NULL when no such
 * model is in the table.  Thread-safe.
 */
struct rnnd_served_model *rnnd_server_pin_model(struct rnnd_server *srv, const char *name);

/* Drops a pin; accepts NULL; returns NULL.  Thread-safe. */
struct rnnd_served_model *rnnd_server_unpin_model(struct rnnd_served_model *m);

/* Version v of m, or NULL.  Borrowed while m is pinned.  Thread-safe. */
struct rnnd_served_version *rnnd_server_find_version(struct rnnd_served_model *m, uint64_t v);

/* m's highest loaded version, or NULL.  Borrowed while m is pinned.  Thread-safe. */
struct rnnd_served_version *rnnd_server_latest(struct rnnd_served_model *m);

/*
 * Builds one model object for repository entry e, loading every version it
 * selects with the settings o, and keeps stamp (rnnd__server_stamp() of o
 * and e); a version that fails keeps its reason.  NULL
 * only out of memory.  The result is new, in no table.  Any thread (reload.c
 * calls it on libuv's thread pool).
 */
struct rnnd_served_model *rnnd__server_build_model(struct rnnd_server *srv,
                                                   const struct rnnd_options *o,
                                                   const struct rnnd_repo_model *e,
                                                   const struct rnnd_model_stamp *stamp);

/* Frees a model object that no table holds and nothing pins.  Not from a pool worker. */
void rnnd__server_free_model(struct rnnd_served_model *m);

/*
 * Replaces the table with models[n] (sorted by name; stolen, with their
 * objects): models that left it are retired and freed once unpinned, their
 * pools closed.  Recounts what is loaded.  Loop thread only.
 */
void rnnd__server_swap_table(struct rnnd_server *srv, struct rnnd_served_model **models, size_t n);

/* Computes the stamp of entry e under root.  Thread-safe. */
void rnnd__server_stamp(const struct rnnd_options *o, const struct rnnd_repo_model *e,
                        struct rnnd_model_stamp *ret);

/* Closes (close true) or stops every pool of the table and of retired models.  Loop thread. */
void rnnd__server_pools_close(struct rnnd_server *srv, bool stop);

/* Sums the progress of every pool of the table and of retired models.  Loop thread. */
void rnnd__server_pools_progress(struct rnnd_server *srv, struct rnnd_pool_progress *ret);

/* Whether the server is ready: every model loaded, listening and not stopping.  Thread-safe. */
bool rnnd_server_ready(const struct rnnd_server *srv);

/* Counts a finished request under m and v (either may be NULL) and status.  Thread-safe. */
void rnnd_server_count(struct rnnd_server *srv, struct rnnd_served_model *m,
                       struct rnnd_served_version *v, unsigned status);

/* "rnnd_cpu" or "rnnd_cudnn" for a version's backend.  Borrowed, static. */
const char *rnnd_server_platform(const struct rnnd_served_version *sv);

/*
 * Writes what was built in and what the machine has (--backends) to f:
 * the CPU engine and its OpenBLAS, the cuDNN backend and its versions or
 * "not built", the CUDA driver and GPUs or why there are none, and the
 * backend setting.
 */
void rnnd_server_print_backends(FILE *f, const struct rnnd_options *opts);

#endif
