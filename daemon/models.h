/*
 * models.h: the model table (docs/DESIGN.md §2): the models the daemon
 * serves, each built once per load and immutable after, found and pinned by
 * requests, swapped whole by reload.c, and freed once no request pins a
 * replaced build.  It knows nothing of HTTP or of the loop: the server gives
 * it callbacks for what the pools report and for "a build was retired".
 *
 * The table: t->models holds one object per model build.  Only the loop
 * thread changes it (reload.c), by swapping the whole array under lock's
 * write side; MHD threads find and pin a model under the read side and then
 * read the pinned object, which never changes, without locks.  A replaced
 * build is retired: once no request pins it, its pools are closed and, once
 * idle, it is freed by rnnd_models_reap() on the loop thread (never on a pool
 * worker).
 */
#ifndef RNND_DAEMON_MODELS_H
#define RNND_DAEMON_MODELS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "error.h"
#include "metrics.h"
#include "options.h"
#include "pool.h"
#include "repository.h"
#include "seqtab.h"

struct rnnd_served_model;

/* One version of a model: loaded, or the reason it is not. */
struct rnnd_served_version {
        uint64_t version;    /* immutable */
        int status;          /* 0 = loaded, else a negative RNND_E*; immutable */
        char reason[256];    /* why, when status < 0; immutable */
        rnnd_model_t *model; /* a reference, NULL when not loaded; immutable */
        rnnd_pool_t *pool;   /* the instances, NULL when not loaded; immutable */
        unsigned instances;  /* worker threads in pool; immutable */
        /* [instances], describe() of each, why_not_cudnn filled; immutable */
        struct rnnd_backend_desc *descs;
        /* Instance group g holds descs[group_end[g - 1] .. group_end[g]); immutable. */
        unsigned group_end[RNND_CFG_MAX_INSTANCE_GROUPS];
        struct rnnd_served_model *owner; /* immutable */
        /*
         * The live stateful sequences (issue 17, daemon/inference.c), when the
         * model has a sequence block and is unidirectional; else NULL.  A
         * reload that keeps the model keeps them.
         */
        rnnd_seqtab_t *streams;     /* guarded by streams_mu */
        pthread_mutex_t streams_mu; /* initialized with the version */
        uint64_t streams_swept_ns;  /* the last expiry sweep; guarded by streams_mu */
        void *streams_timed;        /* inference.c's: chunks waiting behind their sequence's running
                                       one that have a deadline; guarded by streams_mu */
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
 * pin it (rnnd_models_pin()); the loop thread frees it once it has left
 * the table and nothing pins it.
 */
struct rnnd_served_model {
        const struct rnnd_repository_model *entry; /* = &own_entry; immutable */
        struct rnnd_served_version *versions;      /* [n_versions], ascending; immutable */
        size_t n_versions;                         /* immutable */
        size_t n_loaded;                           /* versions with status 0; immutable */
        struct rnnd_metrics_counters requests;     /* requests naming no valid version; atomic */
        struct rnnd_repository_model own_entry;    /* name, status, reason, cfg; immutable */
        struct rnnd_model_stamp stamp;             /* immutable */
        bool unloaded;       /* unloaded through the repository API; immutable */
        atomic_uint pins;    /* requests holding it; atomic */
        atomic_bool retired; /* left the table; atomic */
        atomic_bool loading; /* a load of this name is running; atomic */
        int load_status; /* the last failed (re)load, kept serving; guarded by the table's lock */
        char load_reason[256]; /* why; guarded by the table's lock */
        uint64_t load_version; /* the version that failed, 0 = the model; guarded by the table's
                                  lock */
        struct rnnd_served_model *next_retired; /* loop thread only */
        bool mark;                              /* scratch for swaps; loop thread only */
};

/*
 * What the table tells its owner (the server), and what its pools report:
 * any thread may call them.
 */
struct rnnd_models_events {
        void (*retired)(void *arg);                          /* a build waits to be reaped */
        void (*pool_wakeup)(void *arg);                      /* rnnd_pool_opts.wakeup */
        void (*pool_fault)(void *arg, const rnnd_error_t *); /* rnnd_pool_opts.fault */
        void *arg;
};

struct rnnd_models {
        /* Lock order: lock, then a pool's own lock.  Written by the loop thread only. */
        pthread_rwlock_t lock;
        struct rnnd_served_model **models; /* [n_models], sorted by name; guarded by lock */
        size_t n_models;                   /* guarded by lock */
        atomic_size_t n_loaded_models;     /* models with a loaded version; atomic */
        atomic_bool all_loaded;            /* every model and selected version loaded; atomic */
        struct rnnd_served_model *retired; /* left the table, not yet freed; loop thread only */
        struct rnnd_metrics_counters other_requests; /* requests not naming a known model; atomic */
        struct rnnd_models_events ev;                /* immutable */
        uint64_t skipped_hash; /* what the last scan skipped (rnnd_models_log_skipped()) */
};

/* An empty table reporting to ev. */
void rnnd_models_init(struct rnnd_models *t, const struct rnnd_models_events *ev);

/* Frees every model of the table and every retired one.  Nothing may pin them. */
void rnnd_models_done(struct rnnd_models *t);

/*
 * The first table: every model of the repository idx, built on this
 * thread with the settings o.  Errors: RNND_ENOMEM.  Main thread.
 */
int rnnd_models_load(struct rnnd_models *t, const struct rnnd_options *o,
                     const struct rnnd_repository_index *idx, rnnd_error_t *reterr);

/*
 * Logs what the scan idx passed over, one line each with the reason: a
 * directory of the repository that is no model, at notice, as a model's
 * directory that is no version; a file at the root, at debug.  what starts
 * each line ("model repository", "SIGHUP", ...); only, when not NULL, keeps
 * the lines of that model.  With quiet_if_same, a scan that skipped what the
 * one before did logs at debug (a repository poll).  Main or loop thread.
 */
void rnnd_models_log_skipped(struct rnnd_models *t, const struct rnnd_repository_index *idx,
                             const char *what, const char *only, bool quiet_if_same);

/*
 * The model called name in the table, or NULL.  Borrowed while the caller
 * holds the lock (rnnd_models_rdlock()), or on the loop thread until it
 * changes the table.
 */
struct rnnd_served_model *rnnd_models_find(struct rnnd_models *t, const char *name);

/*
 * Read-locks / unlocks the table, for reload.c's look at a model while it
 * builds another.  Thread-safe; not recursive.
 */
void rnnd_models_rdlock(struct rnnd_models *t);
void rnnd_models_unlock(struct rnnd_models *t);

/*
 * Calls f(arg, models, n) with the table read-locked: models[0..n), sorted
 * by name, and their versions are borrowed until f returns.  f must not
 * change the table or pin.  Thread-safe.
 */
void rnnd_models_read(struct rnnd_models *t,
                      void (*f)(void *arg, struct rnnd_served_model *const *models, size_t n),
                      void *arg);

/* The counters of requests that named no model of the table (atomic).  Thread-safe. */
const struct rnnd_metrics_counters *rnnd_models_unmatched(struct rnnd_models *t);

/* How many models the table holds, and how many have a loaded version, at one time.  Thread-safe.
 */
void rnnd_models_counts(struct rnnd_models *t, size_t *n_models, size_t *n_loaded);

/*
 * The model called name, pinned: it and its versions stay valid, and its
 * pools keep running, until rnnd_models_unpin().  NULL when no such model
 * is in the table.  Thread-safe.
 */
struct rnnd_served_model *rnnd_models_pin(struct rnnd_models *t, const char *name);

/* Drops a pin; accepts NULL; returns NULL.  Thread-safe. */
struct rnnd_served_model *rnnd_models_unpin(struct rnnd_served_model *m);

/* Version v of m, or NULL.  Borrowed while m is pinned.  Thread-safe. */
struct rnnd_served_version *rnnd_models_find_version(struct rnnd_served_model *m, uint64_t v);

/* m's highest loaded version, or NULL.  Borrowed while m is pinned.  Thread-safe. */
struct rnnd_served_version *rnnd_models_latest(struct rnnd_served_model *m);

/* Counts a finished request under m and v (either may be NULL) and status.  Thread-safe. */
void rnnd_models_count(struct rnnd_models *t, struct rnnd_served_model *m,
                       struct rnnd_served_version *v, unsigned status);

/*
 * The model called name, pinned (*model), and the version version_text names
 * ("3"; NULL or "": the highest loaded one) in it (*version, NULL when it
 * has none loaded), as both front ends resolve a model (routes.c,
 * grpcsvc.c).  RNND_ENOTFOUND saying why when the model is not in the table
 * (*model NULL) or has no such version (*model pinned all the same, for the
 * caller to count the request under it and unpin).  Thread-safe.
 */
int rnnd_models_pin_named(struct rnnd_models *t, const char *name, const char *version_text,
                          struct rnnd_served_model **model, struct rnnd_served_version **version,
                          rnnd_error_t *reterr);

/*
 * 0 when v of the pinned m serves: else RNND_ENOTFOUND (m unloaded through
 * the repository API, as Triton) or RNND_EUNAVAIL (m failed to load, v is
 * NULL or failed), saying why.  Thread-safe.
 */
int rnnd_models_check_loaded(const struct rnnd_served_model *m, const struct rnnd_served_version *v,
                             rnnd_error_t *reterr);

/* 0 unless the pinned m failed to load (RNND_EUNAVAIL, saying why).  Thread-safe. */
int rnnd_models_check_model(const struct rnnd_served_model *m, rnnd_error_t *reterr);

/*
 * 0 when v of the pinned m is ready, else RNND_EUNAVAIL with the reason
 * (a model's or version's readiness: HTTP's .../ready, gRPC's ModelReady).
 * Thread-safe.
 */
int rnnd_models_check_ready(const struct rnnd_served_model *m, const struct rnnd_served_version *v,
                            rnnd_error_t *reterr);

/* "rnnd_cpu" or "rnnd_cudnn" for a version's backend.  Borrowed, static. */
const char *rnnd_models_platform(const struct rnnd_served_version *sv);

/*
 * Builds one model object for repository entry e, loading every version it
 * selects with the settings o, and keeps stamp (rnnd_models_stamp() of o
 * and e); a version that fails keeps its reason.  NULL only out of memory.
 * The result is new, in no table.  Any thread (reload.c calls it on libuv's
 * thread pool).
 */
struct rnnd_served_model *rnnd_models_build(struct rnnd_models *t, const struct rnnd_options *o,
                                            const struct rnnd_repository_model *e,
                                            const struct rnnd_model_stamp *stamp);

/* Frees a model object that no table holds and nothing pins.  Not from a pool worker. */
void rnnd_models_free_model(struct rnnd_served_model *m);

/* Computes the stamp of entry e under o's repository.  Thread-safe. */
void rnnd_models_stamp(const struct rnnd_options *o, const struct rnnd_repository_model *e,
                       struct rnnd_model_stamp *ret);

/*
 * Replaces the table with models[n] (sorted here; stolen, with their
 * objects): models that left it are retired (ev.retired is called) and freed
 * by rnnd_models_reap() once unpinned, their pools closed.  Recounts what is
 * loaded.  Loop thread only.
 */
void rnnd_models_swap(struct rnnd_models *t, struct rnnd_served_model **models, size_t n);

/*
 * Frees the retired models that no request pins any more and whose pools
 * are idle (closing their pools first).  Returns whether some are left.
 * Loop thread.
 */
bool rnnd_models_reap(struct rnnd_models *t);

/* Calls f on every pool of the table and of the retired models.  Loop thread. */
void rnnd_models_each_pool(struct rnnd_models *t, void (*f)(rnnd_pool_t *p, void *arg), void *arg);

/* Calls f on every version with a pool, of the table and of the retired models.  Loop thread. */
void rnnd_models_each_version(struct rnnd_models *t,
                              void (*f)(struct rnnd_served_version *v, void *arg), void *arg);

/*
 * Logs, per version, how many stateful sequences are live, as dropped by why
 * ("the stop"): their state goes with the process (docs/OPERATIONS.md, Stop).
 */
void rnnd_models_log_live(struct rnnd_models *t, const char *why);

/* Closes (stop false) or stops every pool of the table and of retired models.  Loop thread. */
void rnnd_models_pools_close(struct rnnd_models *t, bool stop);

/* Sums the progress of every pool of the table and of retired models.  Loop thread. */
void rnnd_models_pools_progress(struct rnnd_models *t, struct rnnd_pool_progress *ret);

#endif
