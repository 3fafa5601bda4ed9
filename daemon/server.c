/*
 * server.c: the process: the loop, signals, the drain, the watchdog, queue
 * sweeps and device faults, around the model table (models.c), the HTTP
 * front end (http.c) and reload.c.
 *
 * DESIGN
 * Threads: the main thread builds everything, then becomes the loop thread
 * (libuv), which owns the signals, the systemd watchdog timer, the shutdown
 * timer and the reaper of replaced models.  MHD runs its own pool of threads
 * (epoll, one listening socket shared by all) that call http.c.
 *
 * Watchdog: WATCHDOG=1 goes out at half of WATCHDOG_USEC while every pool
 * with work queued or running has completed a batch within
 * worker_stall_timeout.
 *
 * Shutdown (DESIGN.md §8, drain): SIGTERM or SIGINT sets stopping (ready turns
 * 400, new inference is answered 503, responses carry Connection: close),
 * sends STOPPING=1, quiesces MHD (no new connections) and closes every pool
 * (queued work still runs).  A timer then polls the requests in flight and
 * the pools' progress, up to shutdown_timeout; if some requests are still
 * suspended then, the hook's drain() answers them (the inference hook stops
 * every pool: queued jobs complete 503).  Then MHD stops (never with a suspended connection), the
 * hook's stop() ends its workers, the listening socket is closed, every
 * handle is closed and the loop ends.  A second signal skips the wait.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "backends.h"
#include "rnnd-config.h"
#include "reload.h"
#include "server.h"

#if RNND_HAVE_CUDA
#include "cudnn/cudnn.h"
#endif

/* How often the shutdown timer looks at the requests in flight. */
#define DRAIN_POLL_MS 20
/* How long drained requests get to be answered before MHD stops regardless. */
#define DRAIN_GRACE_MS 2000
/* How often retired models are checked for being unpinned and idle. */
#define REAP_POLL_MS 50

bool rnnd_server_ready(const struct rnnd_server *srv)
{
        return atomic_load(&srv->models.all_loaded) && rnnd_http_listening(&srv->http) &&
               !atomic_load(&srv->grpc_starting) && !atomic_load(&srv->http.stopping) &&
               !atomic_load(&srv->device_fault);
}

bool rnnd_server_ready_why(struct rnnd_server *srv, char *why, size_t cap)
{
        const char *fault = rnnd_server_device_fault(srv);
        size_t n_models, n_loaded;

        if (rnnd_server_ready(srv))
                return true;
        if (fault != NULL) {
                snprintf(why, cap,
                         "a GPU device fault (%s): every GPU instance is out of service; the "
                         "server is restarting",
                         fault);
        } else if (rnnd_http_stopping(&srv->http)) {
                snprintf(why, cap, "the server is shutting down");
        } else if (atomic_load(&srv->grpc_starting)) {
                snprintf(why, cap, "the gRPC front end is not listening yet");
        } else {
                rnnd_models_counts(&srv->models, &n_models, &n_loaded);
                snprintf(why, cap, "not every model loaded: %zu of %zu models are fully loaded",
                         n_loaded, n_models);
        }
        return false;
}

struct rnnd_models *rnnd_server_models(struct rnnd_server *srv)
{
        return &srv->models;
}

struct rnnd_http *rnnd_server_http(struct rnnd_server *srv)
{
        return &srv->http;
}

struct rnnd_reload *rnnd_server_reload(struct rnnd_server *srv)
{
        return srv->reload;
}

const char *rnnd_server_device_fault(const struct rnnd_server *srv)
{
        return atomic_load(&srv->device_fault) ? srv->fault_msg : NULL;
}

int rnnd_server_infer(struct rnnd_server *srv, struct rnnd_http_request *req,
                      struct rnnd_served_version *sv, enum rnnd_server_protocol proto,
                      rnnd_error_t *reterr)
{
        return srv->infer.handle(srv->infer.cls, req, sv, proto, reterr);
}

const char *const *rnnd_server_extensions(const struct rnnd_server *srv)
{
        return srv->infer.extensions;
}

void rnnd_server_set_infer_hook(struct rnnd_server *srv, const struct rnnd_server_hook *hook)
{
        srv->infer = *hook;
}

void rnnd_server_set_grpc(struct rnnd_server *srv, const struct rnnd_grpc_handler *methods)
{
        srv->grpc_methods = *methods;
}

struct rnnd_grpc *rnnd_server_grpc(struct rnnd_server *srv)
{
        return &srv->grpc;
}

void rnnd_server_set_routes(struct rnnd_server *srv, const struct rnnd_route_handler *routes)
{
        srv->http.routes = *routes;
}

/* Any thread: a pool has a new earliest deadline; have the loop sweep. */
static void pool_wakeup(void *arg)
{
        struct rnnd_server *srv = arg;

        if (atomic_load(&srv->sweep_ready))
                uv_async_send(&srv->sweep_async);
}

/*
 * A worker thread: an instance reported a device fault.  The first report
 * is kept and the loop woken to act on it (device_fault_stop).
 */
static void pool_fault(void *arg, const rnnd_error_t *err)
{
        struct rnnd_server *srv = arg;

        if (atomic_flag_test_and_set(&srv->fault_claimed))
                return;
        snprintf(srv->fault_msg, sizeof(srv->fault_msg), "%s", err->msg);
        atomic_store(&srv->device_fault, true);
        pool_wakeup(srv);
}

static void reap_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;

        if (!rnnd_models_reap(&srv->models))
                uv_timer_stop(&srv->reap_timer);
}

/* The table retired a build: the loop frees it once nothing pins it.  Loop thread. */
static void model_retired(void *arg)
{
        struct rnnd_server *srv = arg;

        if (srv->loop_ready && !uv_is_active((uv_handle_t *)&srv->reap_timer) &&
            !uv_is_closing((uv_handle_t *)&srv->reap_timer))
                uv_timer_start(&srv->reap_timer, reap_tick, 0, REAP_POLL_MS);
}

/*
 * The scan's error for a repository it cannot open, said once and with where
 * to look: a relative model_repository is under the working directory (the
 * compiled default, config/models, is the source tree's), and without
 * --config the installed settings are not read.
 */
static void repository_error(const struct rnnd_options *o, rnnd_error_t *err)
{
        const char *dir = o->model_repository, *rest = err->msg;
        size_t n = strlen(dir);
        char cwd[PATH_MAX] = "", why[sizeof(err->msg)];

        /* The scan's message starts with the directory: "config/models: cannot open ...". */
        if (strncmp(rest, dir, n) == 0 && rest[n] == ':')
                rest += n + (rest[n + 1] == ' ' ? 2 : 1);
        memmove(why, rest, strlen(rest) + 1);
        if (dir[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL)
                snprintf(cwd, sizeof(cwd), "?");
        rnnd_error_set(err, err->code, "model_repository %s%s%s%s: %s%s%s", dir,
                       cwd[0] != '\0' ? " (relative to the working directory " : "", cwd,
                       cwd[0] != '\0' ? ")" : "", why,
                       o->config_file == NULL ? "; the installed settings: rnnd --config " : "",
                       o->config_file == NULL ? RNND_CONFIG_FILE : "");
}

/*
 * Whether another socket listens on ai already: a bind tried as the real one
 * will be (http-listen.c, grpc.c), so that a port in use fails before the
 * models load, which may take minutes, not after.  With keep, the socket
 * stays open and listening in *keep (a later check then sees its port as
 * taken); else it is closed at once.  Other errors are left to the real bind.
 */
static int check_free(const struct addrinfo *ai, int *keep, rnnd_error_t *reterr)
{
        int fd = rnnd_options_bind(ai, 0);

        if (fd >= 0 && keep != NULL && listen(fd, 1) == 0)
                *keep = fd;
        else if (fd >= 0)
                close(fd);
        else if (errno == EADDRINUSE)
                return rnnd_error_set(reterr, RNND_EIO,
                                      "cannot listen: %s (another rnnd, or another server, "
                                      "listens there)",
                                      strerror(errno));
        return 0;
}

/*
 * Whether host:port of a listen setting resolves and is free (see check_free()
 * for keep); the setting's name in the error.
 */
static int check_address(const char *name, const char *value, int *keep, rnnd_error_t *reterr)
{
        struct addrinfo *ai = NULL;
        char host[256];
        unsigned p;
        int r = rnnd_options_split_listen(value, host, sizeof(host), &p, reterr);

        if (r < 0) {
                rnnd_error_prefix(reterr, "%s", name);
                return r;
        }
        r = rnnd_options_resolve_listen(NULL, host, p, &ai, reterr);
        if (r == 0)
                r = check_free(ai, keep, reterr);
        if (ai != NULL)
                freeaddrinfo(ai);
        if (r < 0)
                rnnd_error_prefix(reterr, "%s %s", name, value);
        return r;
}

/*
 * The addresses rnnd will bind, resolved (and tried) before any model loads,
 * so that a typo or a port in use fails at once and names its setting; those systemd's sockets
 * replace (http.c's activated_socket()) are not looked at.  listen stays open
 * while grpc_listen is tried: the two on one port would otherwise pass here
 * and fail only when gRPC binds, after the models.
 */
static int check_addresses(const struct rnnd_options *o, rnnd_error_t *reterr)
{
        int passed = sd_listen_fds(0), held = -1, r = 0;

        if (passed < 1)
                r = check_address("listen", o->listen, &held, reterr);
        if (r == 0 && passed < 2 && o->grpc_listen[0] != '\0') {
                r = check_address("grpc_listen", o->grpc_listen, NULL, reterr);
                if (r < 0 && held >= 0) {
                        close(held);
                        held = -1;
                        /* Free once listen's socket is gone: the two settings collide. */
                        if (check_address("grpc_listen", o->grpc_listen, NULL, NULL) == 0)
                                r = rnnd_error_set(reterr, RNND_EINVAL,
                                                   "grpc_listen %s: listen %s takes that port "
                                                   "(HTTP and gRPC need a port each)",
                                                   o->grpc_listen, o->listen);
                }
        }
        if (held >= 0)
                close(held);
        return r;
}

int rnnd_server_new(const struct rnnd_options *opts, struct rnnd_server **ret, rnnd_error_t *reterr)
{
        struct rnnd_server *srv = rnnd_calloc(1, sizeof(*srv));
        struct rnnd_repository_index idx = {0};
        int r;

        if (srv == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        srv->opts = opts;
        rnnd_shm_init(&srv->shm, (unsigned)opts->max_shm_regions);
        rnnd_models_init(&srv->models, &(struct rnnd_models_events){
                                               .retired = model_retired,
                                               .pool_wakeup = pool_wakeup,
                                               .pool_fault = pool_fault,
                                               .arg = srv,
                                       });
        rnnd_http_init(&srv->http, srv, &srv->opts);
        rnnd_grpc_init(&srv->grpc, srv, &srv->opts);
        srv->grpc.answer_bytes = &srv->answer_bytes;
        srv->reload = rnnd_reload_new(&srv->models, &srv->opts);
        if (srv->reload == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
                goto fail;
        }

        r = check_addresses(opts, reterr);
        if (r < 0)
                goto fail;
        r = rnnd_repository_scan(opts->model_repository, &idx, reterr);
        if (r < 0) {
                if (reterr != NULL)
                        repository_error(opts, reterr);
                goto fail;
        }
        r = rnnd_models_load(&srv->models, opts, &idx, reterr);
        rnnd_repository_index_done(&idx);
        if (r < 0)
                goto fail;
        rnnd_log(RNND_LOG_NOTICE, "%zu of %zu models loaded from %s",
                 atomic_load(&srv->models.n_loaded_models), srv->models.n_models,
                 opts->model_repository);
        *ret = srv;
        return 0;
fail:
        rnnd_server_free(srv);
        return r;
}

void rnnd_server_set_command_line(struct rnnd_server *srv, int argc, char **argv)
{
        rnnd_reload_set_command_line(srv->reload, argc, argv);
}

/* The loop: signals, watchdog, shutdown. */

static void close_cb(uv_handle_t *h)
{
        (void)h; /* Every handle is embedded in struct rnnd_server. */
}

static void close_handle(uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, close_cb);
}

/* After MHD stopped, no submit can wake the loop any more. */
static void close_sweep(struct rnnd_server *srv)
{
        atomic_store(&srv->sweep_ready, false);
        if (srv->sweep_timer.loop != NULL)
                close_handle((uv_handle_t *)&srv->sweep_timer);
        if (srv->sweep_async.loop != NULL)
                close_handle((uv_handle_t *)&srv->sweep_async);
}

static void finish(struct rnnd_server *srv)
{
        unsigned left = atomic_load(&srv->http.suspended);
        unsigned calls = rnnd_grpc_inflight(&srv->grpc);
        size_t i;

        if (left > 0)
                rnnd_log(RNND_LOG_ERR,
                         "%u requests are still suspended after the drain; stopping anyway", left);
        if (calls > 0)
                rnnd_log(RNND_LOG_ERR, "%u gRPC calls are still open after the drain; closing them",
                         calls);
        rnnd_http_stop(&srv->http);
        rnnd_grpc_stop(&srv->grpc);
        srv->infer.stop(srv->infer.cls);
        uv_timer_stop(&srv->drain_timer);
        close_handle((uv_handle_t *)&srv->drain_timer);
        close_handle((uv_handle_t *)&srv->watchdog_timer);
        close_sweep(srv);
        close_handle((uv_handle_t *)&srv->reap_timer);
        close_handle((uv_handle_t *)&srv->conn_timer);
        rnnd_reload_close(srv->reload);
        for (i = 0; i < sizeof(srv->sig) / sizeof(srv->sig[0]); i++)
                close_handle((uv_handle_t *)&srv->sig[i]);
        rnnd_models_log_live(&srv->models, "the stop");
        rnnd_log(RNND_LOG_NOTICE, "stopped");
}

static void drain_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;
        uint64_t now = uv_now(&srv->loop);
        struct rnnd_pool_progress pr;

        rnnd_models_pools_progress(&srv->models, &pr);
        if (srv->drain_phase == 0) {
                if ((atomic_load(&srv->http.inflight) > 0 || rnnd_grpc_inflight(&srv->grpc) > 0 ||
                     pr.queued > 0 || pr.running > 0) &&
                    now < srv->drain_deadline_ms)
                        return;
                if (atomic_load(&srv->http.suspended) == 0 && rnnd_grpc_inflight(&srv->grpc) == 0) {
                        finish(srv);
                        return;
                }
                rnnd_log(RNND_LOG_WARNING,
                         "shutdown_timeout passed with %u requests waiting (%" PRIu32
                         " sequences queued, %" PRIu32 " batches running); answering the queued "
                         "ones 503",
                         atomic_load(&srv->http.suspended), pr.queued, pr.running);
                /* The hook answers what it holds 503 (the real one stops every pool). */
                srv->infer.drain(srv->infer.cls);
                /* A repository load still running: its client hears 503 now. */
                rnnd_reload_drain(srv->reload);
                srv->drain_phase = 1;
                srv->drain_deadline_ms = now + DRAIN_GRACE_MS;
                return;
        }
        /* Let the drained requests' 503s go out before MHD closes their connections. */
        if ((atomic_load(&srv->http.suspended) > 0 || atomic_load(&srv->http.inflight) > 0 ||
             rnnd_grpc_inflight(&srv->grpc) > 0) &&
            now < srv->drain_deadline_ms)
                return;
        finish(srv);
}

static void begin_stop(struct rnnd_server *srv, const char *why)
{
        if (atomic_load(&srv->http.stopping)) {
                /* A second signal: stop waiting. */
                rnnd_log(RNND_LOG_NOTICE, "%s again: stopping now", why);
                srv->drain_deadline_ms = 0;
                return;
        }
        rnnd_http_quiesce(&srv->http);
        rnnd_grpc_quiesce(&srv->grpc);
        sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
        rnnd_log(RNND_LOG_NOTICE,
                 "%s: stopping; in-flight requests get up to %" PRIu64 "s (send it again to "
                 "stop at once)",
                 why, srv->opts->shutdown_timeout);
        uv_timer_stop(&srv->watchdog_timer);
        rnnd_reload_stop(srv->reload);
        /* What is queued still runs, without waiting for fuller batches. */
        rnnd_models_pools_close(&srv->models, false);
        srv->drain_phase = 0;
        srv->drain_deadline_ms = uv_now(&srv->loop) + srv->opts->shutdown_timeout * 1000;
        uv_timer_start(&srv->drain_timer, drain_tick, 0, DRAIN_POLL_MS);
}

static void on_signal(uv_signal_t *h, int signum)
{
        struct rnnd_server *srv = h->data;

        if (signum == SIGHUP) {
                if (!atomic_load(&srv->http.stopping))
                        rnnd_reload_signal(srv->reload);
                return;
        }
        begin_stop(srv, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* What the watchdog last saw of one pool (server.h). */
struct rnnd_watch {
        const rnnd_pool_t *pool;
        uint64_t completed; /* the pool's completed batches then */
        uint64_t moved_ms;  /* uv_now() when they last moved */
};

/* The record of pool in the previous look's watch[0..n), or NULL. */
static const struct rnnd_watch *watched(const struct rnnd_watch *watch, size_t n,
                                        const rnnd_pool_t *pool)
{
        for (size_t i = 0; i < n; i++)
                if (watch[i].pool == pool)
                        return &watch[i];
        return NULL;
}

/*
 * One version's pool: whether it made progress since the last look (w, or
 * none), recorded into *ret.  An idle pool is never stalled.
 */
static bool version_progress(struct rnnd_server *srv, const struct rnnd_served_model *m,
                             const struct rnnd_served_version *sv, const struct rnnd_watch *w,
                             uint64_t now, struct rnnd_watch *ret)
{
        uint64_t limit = srv->opts->worker_stall_timeout * 1000;
        struct rnnd_pool_progress pr;

        rnnd_pool_progress(sv->pool, &pr);
        *ret = (struct rnnd_watch){sv->pool, pr.completed, now};
        if (w == NULL || pr.completed != w->completed || (pr.queued == 0 && pr.running == 0))
                return true;
        ret->moved_ms = w->moved_ms;
        if (now - w->moved_ms <= limit)
                return true;
        if (!srv->watchdog_stalled)
                rnnd_log(RNND_LOG_ERR,
                         "model %s version %" PRIu64 ": no batch completed for %" PRIu64
                         "s with %" PRIu32 " sequences queued and %" PRIu32
                         " batches running; not pinging the watchdog",
                         m->entry->name, sv->version, (now - w->moved_ms) / 1000, pr.queued,
                         pr.running);
        return false;
}

/*
 * Whether the workers make progress: false when some pool has work queued or
 * running and has completed nothing for longer than worker_stall_timeout.
 * The table is read without its lock: the loop thread is its only writer.
 * Loop thread.
 */
static bool workers_progress(struct rnnd_server *srv, uint64_t now)
{
        struct rnnd_models *t = &srv->models;
        struct rnnd_watch *next;
        size_t n = 0, cap = 0;
        bool ok = true;

        for (size_t i = 0; i < t->n_models; i++)
                cap += t->models[i]->n_versions;
        next = rnnd_mallocarray(cap > 0 ? cap : 1, sizeof(*next));
        if (next == NULL)
                return true; /* out of memory: no verdict */
        for (size_t i = 0; i < t->n_models; i++) {
                const struct rnnd_served_model *m = t->models[i];

                for (size_t j = 0; j < m->n_versions; j++) {
                        const struct rnnd_served_version *sv = &m->versions[j];

                        if (sv->pool == NULL)
                                continue;
                        ok &= version_progress(srv, m, sv,
                                               watched(srv->watch, srv->n_watch, sv->pool), now,
                                               &next[n]);
                        n++;
                }
        }
        rnnd_free(srv->watch);
        srv->watch = next;
        srv->n_watch = n;
        return ok;
}

/* systemd's watchdog: pinged while the loop runs and the workers make progress. */
static void watchdog_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;
        bool ok = workers_progress(srv, uv_now(&srv->loop));

        if (ok) {
                if (srv->watchdog_stalled)
                        rnnd_log(RNND_LOG_NOTICE, "workers make progress again; pinging the "
                                                  "watchdog");
                sd_notify(0, "WATCHDOG=1");
        }
        srv->watchdog_stalled = !ok;
}

/*
 * Queue timeouts: sweeps every pool, and the chunks that wait behind their
 * sequence's running one (daemon/inference.c), and sleeps until the
 * earliest deadline left.  A pool wakes the loop (sweep_async) when a
 * submit, or such a chunk (rnnd_pool_sweep_by()), brings its earliest
 * deadline forward.  libuv timers tick in milliseconds, so a
 * timeout fires up to 1 ms late; the batching delay, which is shorter, is
 * kept by the pools' own workers.
 */
static void sweep_tick(uv_timer_t *t);

struct sweep_arg {
        struct rnnd_server *srv;
        uint64_t next;
};

static void sweep_cb(struct rnnd_served_version *v, void *arg)
{
        struct sweep_arg *a = arg;
        uint64_t due = rnnd_pool_sweep(v->pool);

        if (due < a->next)
                a->next = due;
        if (a->srv->infer.sweep == NULL)
                return;
        due = a->srv->infer.sweep(a->srv->infer.cls, v); /* what waits outside the pool */
        if (due < a->next)
                a->next = due;
}

static void sweep(struct rnnd_server *srv)
{
        struct sweep_arg a = {.srv = srv, .next = UINT64_MAX};
        uint64_t next, now_ns = uv_hrtime();

        /*
         * Every pool, a replaced model's too while requests still wait in it.  The
         * loop thread is the one that swaps the table: no lock needed to read it.
         */
        rnnd_models_each_version(&srv->models, sweep_cb, &a);
        next = a.next;
        uv_timer_stop(&srv->sweep_timer);
        if (next != UINT64_MAX) {
                uint64_t ms = next > now_ns ? (next - now_ns + 999999) / 1000000 : 0;

                uv_timer_start(&srv->sweep_timer, sweep_tick, ms, 0);
        }
}

static void sweep_tick(uv_timer_t *t)
{
        sweep(t->data);
}

static void gpus_lost_cb(rnnd_pool_t *p, void *arg)
{
        rnnd_pool_gpus_lost(p, arg);
}

/*
 * After a device fault: every GPU instance of every pool goes out of
 * service (their queued work goes to CPU instances, or is answered 503 with
 * Retry-After where a model has none), and the daemon drains and exits
 * with RNND_EXIT_DEVICE_FAULT for systemd to restart it.  Loop thread.
 */
static void device_fault_stop(struct rnnd_server *srv)
{
        if (srv->fault_handled || !atomic_load(&srv->device_fault))
                return;
        srv->fault_handled = true;
        srv->exit_status = RNND_EXIT_DEVICE_FAULT;
        rnnd_log(RNND_LOG_ERR,
                 "device fault: %s; every GPU instance is out of service, queued work goes to "
                 "CPU instances or is answered 503; draining, then exiting with status %d for "
                 "a restart",
                 srv->fault_msg, RNND_EXIT_DEVICE_FAULT);
        rnnd_models_each_pool(&srv->models, gpus_lost_cb, srv->fault_msg);
        sd_notifyf(0, "STATUS=Device fault: %s", srv->fault_msg);
        begin_stop(srv, "device fault");
}

/*
 * Connections a client should no longer hold (http-conns.c): shut down every
 * RNND_HTTP_REAP_MS; what was shut down is logged at most every 10 s.
 */
static void conn_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;
        struct rnnd_http_reaped r, *sum = &srv->conn_reaped;
        uint64_t now = uv_now(&srv->loop);

        rnnd_http_reap(&srv->http, &r);
        sum->slow += r.slow;
        sum->gone += r.gone;
        sum->idle += r.idle;
        sum->refused += r.refused;
        if (sum->slow + sum->gone + sum->idle + sum->refused == 0 ||
            now - srv->conn_logged_ms < 10000)
                return;
        rnnd_log(RNND_LOG_NOTICE,
                 "closed %u connections without a request for header_timeout, %u closed by their "
                 "clients, %u idle ones to make room, %u past per_address_limit (%zu open)",
                 sum->slow, sum->gone, sum->idle, sum->refused, r.open);
        memset(sum, 0, sizeof(*sum));
        srv->conn_logged_ms = now;
}

static void sweep_wake(uv_async_t *a)
{
        device_fault_stop(a->data);
        sweep(a->data);
}

static int init_loop(struct rnnd_server *srv, rnnd_error_t *reterr)
{
        static const int signums[] = {SIGINT, SIGTERM, SIGHUP};
        uint64_t usec = 0;
        size_t i;
        int r;

        r = uv_loop_init(&srv->loop);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_loop_init: %s", uv_strerror(r));
        srv->loop_ready = true;
        uv_timer_init(&srv->loop, &srv->drain_timer);
        uv_timer_init(&srv->loop, &srv->watchdog_timer);
        uv_timer_init(&srv->loop, &srv->reap_timer);
        uv_timer_init(&srv->loop, &srv->conn_timer);
        srv->conn_timer.data = srv;
        srv->drain_timer.data = srv;
        srv->watchdog_timer.data = srv;
        uv_timer_init(&srv->loop, &srv->sweep_timer);
        srv->sweep_timer.data = srv;
        r = uv_async_init(&srv->loop, &srv->sweep_async, sweep_wake);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_async_init: %s", uv_strerror(r));
        srv->sweep_async.data = srv;
        atomic_store(&srv->sweep_ready, true);
        srv->reap_timer.data = srv;
        r = rnnd_reload_init(srv->reload, &srv->loop, reterr);
        if (r < 0)
                return r;
        for (i = 0; i < sizeof(signums) / sizeof(signums[0]); i++) {
                uv_signal_init(&srv->loop, &srv->sig[i]);
                srv->sig[i].data = srv;
                r = uv_signal_start(&srv->sig[i], on_signal, signums[i]);
                if (r < 0)
                        return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_signal_start: %s",
                                              uv_strerror(r));
        }
        if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
                uv_timer_start(&srv->watchdog_timer, watchdog_tick, 0, usec / 2000);
                rnnd_log(RNND_LOG_INFO, "systemd watchdog: pinging every %" PRIu64 "ms",
                         usec / 2000);
        }
        return 0;
}

int rnnd_server_start(struct rnnd_server *srv, rnnd_error_t *reterr)
{
        int r;

        if (srv->infer.handle == NULL || srv->infer.drain == NULL || srv->infer.stop == NULL ||
            srv->http.routes.match == NULL || srv->http.routes.serve == NULL ||
            srv->http.routes.done == NULL)
                return rnnd_error_set(reterr, RNND_EINTERNAL,
                                      "rnnd_server_start without an inference hook or routes");
        /* Own the signals before any MHD thread exists. */
        r = init_loop(srv, reterr);
        if (r < 0)
                return r;
        /*
         * The gRPC front end, where main installed its methods (DESIGN.md §11),
         * starts after HTTP's, which finds its systemd socket: until it listens
         * HTTP says not ready, so that ready means both listen.
         */
        atomic_store(&srv->grpc_starting, srv->grpc_methods.find != NULL);
        r = rnnd_http_start(&srv->http, reterr);
        if (r < 0)
                return r;
        if (srv->grpc_methods.find != NULL) {
                r = rnnd_grpc_start(&srv->grpc, &srv->loop, &srv->grpc_methods, srv->http.second_fd,
                                    reterr);
                if (r < 0)
                        return r;
                atomic_store(&srv->grpc_starting, false);
        }
        uv_timer_start(&srv->conn_timer, conn_tick, RNND_HTTP_REAP_MS, RNND_HTTP_REAP_MS);
        return 0;
}

int rnnd_server_run(struct rnnd_server *srv, rnnd_error_t *reterr)
{
        int r;

        if (!srv->loop_ready || !rnnd_http_listening(&srv->http))
                return rnnd_error_set(reterr, RNND_EINTERNAL, "rnnd_server_run before start");
        sd_notifyf(0, "READY=1\nSTATUS=Serving %zu of %zu models on %s",
                   atomic_load(&srv->models.n_loaded_models), srv->models.n_models,
                   srv->http.listen_name);
        rnnd_log(RNND_LOG_NOTICE, "ready: %zu of %zu models on %s%s",
                 atomic_load(&srv->models.n_loaded_models), srv->models.n_models,
                 srv->http.listen_name,
                 atomic_load(&srv->models.all_loaded)
                         ? ""
                         : " (not every model loaded: /v2/health/ready says 400)");
        device_fault_stop(srv); /* one while loading: no loop to wake then */
        uv_run(&srv->loop, UV_RUN_DEFAULT);
        r = uv_loop_close(&srv->loop);
        srv->loop_ready = false;
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_loop_close: %s", uv_strerror(r));
        return 0;
}

int rnnd_server_exit_status(const struct rnnd_server *srv)
{
        return srv->exit_status;
}

struct rnnd_server *rnnd_server_free(struct rnnd_server *srv)
{
        size_t i;

        if (srv == NULL)
                return NULL;
        rnnd_http_stop(&srv->http);
        if (srv->loop_ready) {
                rnnd_grpc_stop(&srv->grpc);
                /* run() failed half-way: close what was opened and end the loop. */
                for (i = 0; i < sizeof(srv->sig) / sizeof(srv->sig[0]); i++)
                        if (srv->sig[i].loop != NULL)
                                close_handle((uv_handle_t *)&srv->sig[i]);
                close_handle((uv_handle_t *)&srv->drain_timer);
                close_handle((uv_handle_t *)&srv->watchdog_timer);
                close_sweep(srv);
                close_handle((uv_handle_t *)&srv->reap_timer);
                close_handle((uv_handle_t *)&srv->conn_timer);
                rnnd_reload_close(srv->reload);
                uv_run(&srv->loop, UV_RUN_DEFAULT);
                uv_loop_close(&srv->loop);
        }
        rnnd_models_done(&srv->models);
        rnnd_grpc_done(&srv->grpc); /* after the pools, whose workers post to its loops */
        rnnd_shm_done(&srv->shm);   /* after the pools: their jobs' answers write to regions */
        rnnd_reload_free(srv->reload);
        rnnd_free(srv->watch);
        rnnd_free(srv);
        return NULL;
}

/* --backends. */

#if RNND_HAVE_CUDA
/* cuDNN 9 encodes 9.19.0 as 91900; cuDNN 8 encoded 8.9.7 as 8907. */
static void cudnn_version_text(int v, char *buf, size_t cap)
{
        if (v >= 90000)
                snprintf(buf, cap, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
        else
                snprintf(buf, cap, "%d.%d.%d", v / 1000, (v % 1000) / 100, v % 100);
}
#endif

void rnnd_server_print_backends(FILE *f, const struct rnnd_options *opts)
{
        struct rnnd_backend_desc cpu;

        rnnd_cpu_backend.describe(NULL, &cpu);
        fprintf(f, "rnnd %s\n", RNND_VERSION);
        fprintf(f, "CPU engine: built (%s, %s, %s)\n", cpu.algo, cpu.math, cpu.versions);
#if RNND_HAVE_CUDA
        {
                struct rnnd_cudnn_info info;
                char cudnn[32];

                rnnd_cudnn_info(&info);
                cudnn_version_text(info.cudnn_version, cudnn, sizeof(cudnn));
                fprintf(f, "cuDNN backend: built (cuDNN %s, CUDA runtime %d.%d)\n", cudnn,
                        info.cudart_version / 1000, (info.cudart_version % 1000) / 10);
                if (info.driver_version > 0)
                        fprintf(f, "CUDA driver: supports CUDA %d.%d\n", info.driver_version / 1000,
                                (info.driver_version % 1000) / 10);
                else
                        fprintf(f, "CUDA driver: none\n");
                if (info.device_count > 0) {
                        fprintf(f, "GPUs: %d\n", info.device_count);
                        for (int d = 0; d < info.device_count && d < RNND_CUDNN_MAX_DEVICES; d++)
                                fprintf(f, "  GPU %d: %s, %.1f GiB, compute capability %d.%d\n", d,
                                        info.devices[d].name,
                                        (double)info.devices[d].total_mem / (1024.0 * 1024 * 1024),
                                        info.devices[d].cc_major, info.devices[d].cc_minor);
                } else
                        fprintf(f, "GPUs: none (%s)\n", info.why_no_gpu);
        }
#else
        fprintf(f, "cuDNN backend: not built\n");
        fprintf(f, "GPUs: not probed (the cuDNN backend is not built)\n");
#endif
        fprintf(f, "backend setting: %s (from %s)\n",
                opts->backend == RNND_BACKEND_CPU ? "cpu" : "auto", opts->backend_from);
}
