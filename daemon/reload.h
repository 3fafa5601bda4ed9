/*
 * reload.h: changing what the daemon serves while it serves: SIGHUP (the
 * settings and the whole repository) and the repository API's load and
 * unload of one model.  Operations run one at a time, in order, driven by
 * the loop thread; the slow part (reading weights, starting pools) runs on
 * libuv's thread pool, beside the models still serving.
 */
#ifndef RNND_DAEMON_RELOAD_H
#define RNND_DAEMON_RELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "error.h"
#include "models.h"
#include "options.h"

/* Repository operations waiting at most; more are answered 503. */
#define RNND_RELOAD_MAX_PENDING 64u

enum rnnd_reload_kind {
        RNND_RELOAD_ALL = 0, /* SIGHUP: settings and repository */
        RNND_RELOAD_LOAD,    /* POST /v2/repository/models/{m}/load */
        RNND_RELOAD_UNLOAD,  /* POST /v2/repository/models/{m}/unload */
        RNND_RELOAD_POLL,    /* repository_poll_interval: SIGHUP's scan, settled models only */
};

struct rnnd_reload;

/*
 * The reload state of table models, whose settings in effect are *opts: a
 * reload swaps *opts (the old settings stay valid until
 * rnnd_reload_free()).  NULL out of memory.  Main thread.
 */
struct rnnd_reload *rnnd_reload_new(struct rnnd_models *models,
                                    const struct rnnd_options *_Atomic *opts);

/*
 * Keeps argv (borrowed: it must outlive rl) so that SIGHUP can apply the
 * command line over the config file again.  Main thread, before run.
 */
void rnnd_reload_set_command_line(struct rnnd_reload *rl, int argc, char **argv);

/*
 * Sets rl up on loop and reads auth_token_file.  Errors: RNND_EINTERNAL
 * (libuv), RNND_EINVAL (the token file).  Loop thread (the main thread,
 * from rnnd_server_start()).
 */
int rnnd_reload_init(struct rnnd_reload *rl, uv_loop_t *loop, rnnd_error_t *reterr);

/* SIGHUP: queues a reload of everything (coalesced with one still waiting).  Loop thread. */
void rnnd_reload_signal(struct rnnd_reload *rl);

/*
 * With repository_poll_interval set, rnnd_reload_init() arms a timer that
 * queues a RNND_RELOAD_POLL every that many seconds (re-armed when each
 * poll or SIGHUP ends, with the interval then in effect).  A poll is a
 * SIGHUP's repository step without the settings: it rebuilds a changed or
 * new model only once its stamp (rnnd_models_stamp()) is the one the poll
 * before saw, so files still being copied are never loaded; removed models
 * leave as on SIGHUP.
 */

/*
 * How a load or unload ends: status 200 with msg NULL, or an error status
 * (400, 500, 503) and its message.  Called once, on the loop thread; also
 * for an operation dropped at shutdown (503).
 */
typedef void (*rnnd_reload_done_fn)(void *cls, unsigned status, const char *msg);

/*
 * Queues a load or unload of model name; done(done_cls, ...) reports its end
 * (whoever waits publishes done_cls first: suspend first, publish second).
 * Errors, without queueing, and done is never called: RNND_EUNAVAIL
 * (RNND_RELOAD_MAX_PENDING waiting, or stopping), RNND_ENOMEM.  Thread-safe.
 */
int rnnd_reload_submit(struct rnnd_reload *rl, enum rnnd_reload_kind kind, const char *name,
                       rnnd_reload_done_fn done, void *done_cls, rnnd_error_t *reterr);

/* Whether the name of a model has a load running or waiting.  Thread-safe. */
bool rnnd_reload_pending(struct rnnd_reload *rl, const char *name);

/*
 * Whether authorization (the Authorization header, or NULL) carries the
 * token of auth_token_file; true when no token is set.  Compares in
 * constant time.  Thread-safe.
 */
bool rnnd_reload_authorized(struct rnnd_reload *rl, const char *authorization);

/*
 * At shutdown, once shutdown_timeout has passed: answers the running
 * operation's waiter 503 (the operation itself finishes on libuv's thread
 * pool and is then dropped), so that no request stays suspended when
 * libmicrohttpd stops.  Loop thread.
 */
void rnnd_reload_drain(struct rnnd_reload *rl);

/* At shutdown: answers operations still waiting 503.  Loop thread. */
void rnnd_reload_stop(struct rnnd_reload *rl);

/* Closes the loop handles (after stop).  Loop thread. */
void rnnd_reload_close(struct rnnd_reload *rl);

/* Frees the reload state and the settings reloads made.  After the loop ended. */
void rnnd_reload_free(struct rnnd_reload *rl);

#endif
