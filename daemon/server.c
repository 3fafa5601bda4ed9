/*
 * server.c: the model table, the HTTP server's life and the loop.
 *
 * DESIGN
 * Threads: the main thread builds everything, then becomes the loop thread
 * (libuv), which owns the signals, the systemd watchdog timer and the
 * shutdown timer.  MHD runs its own pool of threads (epoll, one listening
 * socket shared by all) that call http.c; they read the model table, which is
 * immutable from rnnd_server_new() to rnnd_server_free(), and touch only
 * atomics in struct rnnd_server.
 *
 * Shutdown (ecosystem.md §3): SIGTERM or SIGINT sets stopping (ready turns
 * 400, new inference is answered 503, responses carry Connection: close),
 * sends STOPPING=1 and quiesces MHD (no new connections).  A timer then waits
 * for the requests in flight to complete, up to shutdown_timeout; if some are
 * still suspended by the inference hook, the hook's drain() answers them 503
 * and resumes them.  Then MHD stops (never with a suspended connection), the
 * hook's stop() ends its workers, the listening socket is closed, every
 * handle is closed and the loop ends.  A second signal skips the wait.
 */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "alloc.h"
#include "http-int.h"
#include "log.h"
#include "rnnd-config.h"
#include "server.h"

#if RNND_HAVE_CUDA
#include "cudnn/cudnn.h"
#endif

/* How often the shutdown timer looks at the requests in flight. */
#define DRAIN_POLL_MS 20
/* How long drained requests get to be answered before MHD stops regardless. */
#define DRAIN_GRACE_MS 2000

/* Counters. */

static const unsigned counted_codes[] = {
#define RNND_CODE_ENTRY(c) c,
        RNND_COUNTED_CODES(RNND_CODE_ENTRY)
#undef RNND_CODE_ENTRY
};

unsigned rnnd_server_code_slot(unsigned status)
{
        unsigned i;

        for (i = 0; i < sizeof(counted_codes) / sizeof(counted_codes[0]); i++)
                if (counted_codes[i] == status)
                        return i;
        return RNND_CODE_SLOTS - 1;
}

const char *rnnd_server_code_label(unsigned slot)
{
        static const char *const labels[] = {
#define RNND_CODE_LABEL(c) #c,
                RNND_COUNTED_CODES(RNND_CODE_LABEL)
#undef RNND_CODE_LABEL
                        "other",
        };

        return slot < RNND_CODE_SLOTS ? labels[slot] : "other";
}

_Static_assert(sizeof(counted_codes) / sizeof(counted_codes[0]) == RNND_CODE_SLOTS - 1,
               "RNND_CODE_SLOTS must be the counted codes plus one");

void rnnd_server_count(struct rnnd_server *srv, struct rnnd_served_model *m,
                       struct rnnd_served_version *v, unsigned status)
{
        struct rnnd_req_counters *c = v != NULL   ? &v->requests
                                      : m != NULL ? &m->requests
                                                  : &srv->other_requests;

        atomic_fetch_add_explicit(&c->n[rnnd_server_code_slot(status)], 1, memory_order_relaxed);
}

/* The model table. */

static int cmp_model_name(const void *key, const void *elem)
{
        const struct rnnd_served_model *m = elem;

        return strcmp(key, m->entry->name);
}

struct rnnd_served_model *rnnd_server_find_model(struct rnnd_server *srv, const char *name)
{
        if (srv->n_models == 0)
                return NULL;
        return bsearch(name, srv->models, srv->n_models, sizeof(srv->models[0]), cmp_model_name);
}

struct rnnd_served_version *rnnd_server_find_version(struct rnnd_served_model *m, uint64_t v)
{
        size_t i;

        for (i = 0; i < m->n_versions; i++)
                if (m->versions[i].version == v)
                        return &m->versions[i];
        return NULL;
}

struct rnnd_served_version *rnnd_server_latest(struct rnnd_served_model *m)
{
        size_t i;

        for (i = m->n_versions; i-- > 0;)
                if (m->versions[i].status == 0)
                        return &m->versions[i];
        return NULL;
}

bool rnnd_server_ready(const struct rnnd_server *srv)
{
        return srv->all_loaded && srv->mhd != NULL && !atomic_load(&srv->stopping);
}

const char *rnnd_server_platform(const struct rnnd_served_version *sv)
{
        return strcmp(sv->desc.backend, "cudnn") == 0 ? "rnnd_cudnn" : "rnnd_cpu";
}

/* The inference hook, until inference lands. */

/*
 * ===== PLACEHOLDER: inference is not implemented yet. =====
 * The real hook (KServe v2 parse/bind/render from proto/infer.h, the batcher
 * and the workers) replaces this with rnnd_server_set_infer_hook() in main.c.
 */
static int infer_unimplemented(void *cls, struct rnnd_http_request *req,
                               struct rnnd_served_version *sv, enum rnnd_infer_protocol proto,
                               rnnd_error_t *reterr)
{
        (void)cls;
        (void)reterr;
        rnnd_http_respond_error(req, 501,
                                "not implemented yet: %s for model '%s' version %" PRIu64
                                " is not served by this build",
                                proto == RNND_INFER_TFS_PREDICT ? ":predict" : "inference",
                                sv->owner->entry->name, sv->version);
        return 0;
}

static void infer_unimplemented_drain(void *cls)
{
        (void)cls; /* Nothing is ever suspended. */
}

const struct rnnd_infer_hook rnnd_infer_hook_unimplemented = {
        .handle = infer_unimplemented,
        .drain = infer_unimplemented_drain,
        .stop = NULL,
        .extensions = NULL,
        .cls = NULL,
};

void rnnd_server_set_infer_hook(struct rnnd_server *srv, const struct rnnd_infer_hook *hook)
{
        srv->infer = *hook;
}

/* Loading. */

/* Why plans are not on cuDNN, for every model: the setting, the build or the machine. */
static void resolve_why_not_cudnn(struct rnnd_server *srv)
{
        const struct rnnd_options *o = srv->opts;

        if (o->backend == RNND_BACKEND_CPU) {
                snprintf(srv->why_not_cudnn, sizeof(srv->why_not_cudnn),
                         "backend = cpu (set by %s)", o->backend_from);
                return;
        }
#if RNND_HAVE_CUDA
        {
                struct rnnd_cudnn_info info;

                rnnd_cudnn_info(&info);
                if (info.device_count == 0)
                        snprintf(srv->why_not_cudnn, sizeof(srv->why_not_cudnn), "no GPU: %s",
                                 info.why_no_gpu);
                else
                        snprintf(srv->why_not_cudnn, sizeof(srv->why_not_cudnn),
                                 "the daemon does not run models on cuDNN yet (%d GPU%s visible)",
                                 info.device_count, info.device_count == 1 ? "" : "s");
        }
#else
        snprintf(srv->why_not_cudnn, sizeof(srv->why_not_cudnn),
                 "the cuDNN backend is not built in (rnnd --backends)");
#endif
}

void rnnd_stat_add(struct rnnd_stat *s, uint64_t ns)
{
        atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->ns, ns, memory_order_relaxed);
}

const double rnnd_hist_bounds_s[RNND_HIST_BUCKETS] = {
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
        0.025,  0.05,    0.1,    0.25,  1,      5,     __builtin_inf()};

void rnnd_hist_add(struct rnnd_hist *h, uint64_t ns)
{
        double s = (double)ns / 1e9;
        unsigned i;

        for (i = 0; i + 1 < RNND_HIST_BUCKETS && s > rnnd_hist_bounds_s[i]; i++)
                ;
        atomic_fetch_add_explicit(&h->b[i], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

/* Every instance of every group of cfg; all run on the CPU engine for now. */
static unsigned count_instances(const struct rnnd_model_config *cfg)
{
        unsigned n = 0;

        for (uint32_t g = 0; g < cfg->n_instances; g++)
                n += cfg->instances[g].count;
        return n > 0 ? n : 1;
}

/* Any thread: a pool has a new earliest deadline; have the loop sweep. */
static void pool_wakeup(void *arg)
{
        struct rnnd_server *srv = arg;

        if (atomic_load(&srv->sweep_ready))
                uv_async_send(&srv->sweep_async);
}

/* The pool options of a version: its instances and its batching settings. */
static int pool_opts(struct rnnd_server *srv, const struct rnnd_model_config *cfg,
                     struct rnnd_pool_opts *po, rnnd_error_t *reterr)
{
        unsigned n = count_instances(cfg);
        struct rnnd_pool_instance *inst = rnnd_calloc(n, sizeof(*inst));

        if (inst == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for %u instances", n);
        for (unsigned i = 0; i < n; i++) {
                inst[i].ops = &rnnd_cpu_backend;
                inst[i].opts.device = -1;
                inst[i].opts.threads = rnnd_options_cpu_threads(srv->opts);
        }
        *po = (struct rnnd_pool_opts){
                .instances = inst,
                .n_instances = n,
                .max_queue = cfg->batching.max_queue_size,
                .max_batch_size = cfg->batching.max_batch_size,
                .max_batch_steps = cfg->batching.max_batch_steps,
                .max_queue_delay_ns = (uint64_t)cfg->batching.max_queue_delay_us * 1000u,
                .queue_timeout_ns = (uint64_t)cfg->batching.queue_timeout_us * 1000u,
                .levels = cfg->batching.priority_levels,
                .wakeup = pool_wakeup,
                .wakeup_arg = srv,
        };
        return 0;
}

/* Loads one version and starts its instances; a failure stays in sv. */
static void load_version(struct rnnd_server *srv, struct rnnd_served_model *m,
                         struct rnnd_served_version *sv)
{
        const struct rnnd_options *o = srv->opts;
        struct rnnd_pool_opts po = {0};
        rnnd_error_t err = {0};
        int r;

        sv->owner = m;
        r = rnnd_repository_load(o->model_repository, m->entry, sv->version, &sv->model, &err);
        if (r == 0)
                r = pool_opts(srv, &m->entry->cfg, &po, &err);
        if (r == 0) {
                sv->ops = po.instances[0].ops;
                sv->instances = po.n_instances;
                r = rnnd_pool_new(sv->model, &po, &sv->pool, &err);
        }
        rnnd_free((void *)po.instances);
        if (r < 0) {
                sv->status = r;
                snprintf(sv->reason, sizeof(sv->reason), "%s",
                         err.msg[0] != '\0' ? err.msg : rnnd_strerror(r));
                sv->model = rnnd_model_unref(sv->model);
                rnnd_log(RNND_LOG_WARNING,
                         "model %s version %" PRIu64 ": not loaded: %s; serving the others",
                         m->entry->name, sv->version, sv->reason);
                return;
        }
        rnnd_pool_describe(sv->pool, 0, &sv->desc);
        if (sv->desc.why_not_cudnn[0] == '\0' && strcmp(sv->desc.backend, "cudnn") != 0)
                snprintf(sv->desc.why_not_cudnn, sizeof(sv->desc.why_not_cudnn), "%s",
                         srv->why_not_cudnn);
        m->n_loaded++;
        rnnd_log(RNND_LOG_INFO, "model %s version %" PRIu64 ": loaded (%s %s, %s, %s)",
                 m->entry->name, sv->version, rnnd_cell_name(m->entry->cfg.cell),
                 rnnd_server_platform(sv), sv->desc.algo, sv->desc.math);
        rnnd_log(RNND_LOG_DEBUG, "model %s version %" PRIu64 ": not on cuDNN: %s", m->entry->name,
                 sv->version, sv->desc.why_not_cudnn);
}

static int load_models(struct rnnd_server *srv, rnnd_error_t *reterr)
{
        size_t i, j;

        srv->n_models = srv->index.n_models;
        if (srv->n_models == 0) {
                rnnd_log(RNND_LOG_WARNING, "model repository %s holds no model",
                         srv->opts->model_repository);
                return 0;
        }
        srv->models = rnnd_calloc(srv->n_models, sizeof(srv->models[0]));
        if (srv->models == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for the model table");
        for (i = 0; i < srv->n_models; i++) {
                struct rnnd_served_model *m = &srv->models[i];
                const struct rnnd_repo_model *e = &srv->index.models[i];

                m->entry = e;
                if (e->status < 0) {
                        srv->all_loaded = false;
                        rnnd_log(RNND_LOG_WARNING, "model %s: not loaded: %s; serving the others",
                                 e->name, e->reason);
                        continue;
                }
                m->versions =
                        rnnd_calloc(e->n_versions > 0 ? e->n_versions : 1, sizeof(m->versions[0]));
                if (m->versions == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for model %s",
                                              e->name);
                m->n_versions = e->n_versions;
                for (j = 0; j < e->n_versions; j++) {
                        m->versions[j].version = e->versions[j];
                        load_version(srv, m, &m->versions[j]);
                        if (m->versions[j].status < 0)
                                srv->all_loaded = false;
                }
                if (m->n_loaded > 0)
                        srv->n_loaded_models++;
                else
                        srv->all_loaded = false;
        }
        return 0;
}

int rnnd_server_new(const struct rnnd_options *opts, struct rnnd_server **ret, rnnd_error_t *reterr)
{
        struct rnnd_server *srv = rnnd_calloc(1, sizeof(*srv));
        int r;

        if (srv == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        srv->opts = opts;
        srv->listen_fd = -1;
        srv->all_loaded = true;
        srv->infer = rnnd_infer_hook_unimplemented;
        if (getrandom(&srv->id_seed, sizeof(srv->id_seed), GRND_NONBLOCK) !=
            (ssize_t)sizeof(srv->id_seed))
                srv->id_seed = (uint32_t)getpid() ^ (uint32_t)time(NULL);
        resolve_why_not_cudnn(srv);
        rnnd_log(RNND_LOG_INFO, "backend %s: %s",
                 opts->backend == RNND_BACKEND_CPU ? "cpu" : "auto", srv->why_not_cudnn);

        r = rnnd_repository_scan(opts->model_repository, &srv->index, reterr);
        if (r < 0) {
                rnnd_error_prefix(reterr, "model_repository %s", opts->model_repository);
                goto fail;
        }
        r = load_models(srv, reterr);
        if (r < 0)
                goto fail;
        rnnd_log(RNND_LOG_NOTICE, "%zu of %zu models loaded from %s", srv->n_loaded_models,
                 srv->n_models, opts->model_repository);
        *ret = srv;
        return 0;
fail:
        rnnd_server_free(srv);
        return r;
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

/* Stops MHD for good; only once nothing is suspended.  Loop thread. */
static void stop_mhd(struct rnnd_server *srv)
{
        if (srv->mhd == NULL)
                return;
        MHD_stop_daemon(srv->mhd);
        srv->mhd = NULL;
        if (srv->listen_fd >= 0) {
                close(srv->listen_fd);
                srv->listen_fd = -1;
        }
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
        unsigned left = atomic_load(&srv->suspended);
        size_t i;

        if (left > 0)
                rnnd_log(RNND_LOG_ERR,
                         "%u requests are still suspended after the drain; stopping anyway", left);
        stop_mhd(srv);
        if (srv->infer.stop != NULL)
                srv->infer.stop(srv->infer.cls);
        uv_timer_stop(&srv->drain_timer);
        close_handle((uv_handle_t *)&srv->drain_timer);
        close_handle((uv_handle_t *)&srv->watchdog_timer);
        close_sweep(srv);
        for (i = 0; i < sizeof(srv->sig) / sizeof(srv->sig[0]); i++)
                close_handle((uv_handle_t *)&srv->sig[i]);
        rnnd_log(RNND_LOG_NOTICE, "stopped");
}

static void drain_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;
        uint64_t now = uv_now(&srv->loop);

        if (srv->drain_phase == 0) {
                if (atomic_load(&srv->inflight) > 0 && now < srv->drain_deadline_ms)
                        return;
                if (atomic_load(&srv->suspended) == 0) {
                        finish(srv);
                        return;
                }
                rnnd_log(RNND_LOG_WARNING,
                         "shutdown_timeout passed with %u requests waiting; answering them 503",
                         atomic_load(&srv->suspended));
                srv->infer.drain(srv->infer.cls);
                srv->drain_phase = 1;
                srv->drain_deadline_ms = now + DRAIN_GRACE_MS;
                return;
        }
        /* Let the drained requests' 503s go out before MHD closes their connections. */
        if ((atomic_load(&srv->suspended) > 0 || atomic_load(&srv->inflight) > 0) &&
            now < srv->drain_deadline_ms)
                return;
        finish(srv);
}

static void begin_stop(struct rnnd_server *srv, const char *why)
{
        MHD_socket fd;

        if (atomic_exchange(&srv->stopping, true)) {
                /* A second signal: stop waiting. */
                rnnd_log(RNND_LOG_NOTICE, "%s again: stopping now", why);
                srv->drain_deadline_ms = 0;
                return;
        }
        sd_notify(0, "STOPPING=1\nSTATUS=Stopping");
        rnnd_log(RNND_LOG_NOTICE,
                 "%s: stopping; in-flight requests get up to %" PRIu64 "s (send it again to "
                 "stop at once)",
                 why, srv->opts->shutdown_timeout);
        if (srv->mhd != NULL) {
                fd = MHD_quiesce_daemon(srv->mhd);
                if (fd != MHD_INVALID_SOCKET)
                        srv->listen_fd = fd;
        }
        uv_timer_stop(&srv->watchdog_timer);
        srv->drain_phase = 0;
        srv->drain_deadline_ms = uv_now(&srv->loop) + srv->opts->shutdown_timeout * 1000;
        uv_timer_start(&srv->drain_timer, drain_tick, 0, DRAIN_POLL_MS);
}

static void on_signal(uv_signal_t *h, int signum)
{
        struct rnnd_server *srv = h->data;

        if (signum == SIGHUP) {
                rnnd_log(RNND_LOG_NOTICE, "SIGHUP: reloading is not implemented yet, ignoring");
                return;
        }
        begin_stop(srv, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/*
 * systemd's watchdog.  For now the loop being alive is the only evidence;
 * once workers exist this must check that they make progress (DESIGN.md §8).
 */
static void watchdog_tick(uv_timer_t *t)
{
        (void)t;
        sd_notify(0, "WATCHDOG=1");
}

/*
 * Queue timeouts: sweeps every pool and sleeps until the earliest deadline
 * left.  A pool wakes the loop (sweep_async) when a submit brings its
 * earliest deadline forward.  libuv timers tick in milliseconds, so a
 * timeout fires up to 1 ms late; the batching delay, which is shorter, is
 * kept by the pools' own workers.
 */
static void sweep_tick(uv_timer_t *t);

static void sweep(struct rnnd_server *srv)
{
        uint64_t next = UINT64_MAX, now_ns = uv_hrtime();

        for (size_t i = 0; i < srv->n_models; i++)
                for (size_t j = 0; j < srv->models[i].n_versions; j++) {
                        rnnd_pool_t *p = srv->models[i].versions[j].pool;
                        uint64_t due;

                        if (p == NULL)
                                continue;
                        due = rnnd_pool_sweep(p);
                        if (due < next)
                                next = due;
                }
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

static void sweep_wake(uv_async_t *a)
{
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
        srv->drain_timer.data = srv;
        srv->watchdog_timer.data = srv;
        uv_timer_init(&srv->loop, &srv->sweep_timer);
        srv->sweep_timer.data = srv;
        r = uv_async_init(&srv->loop, &srv->sweep_async, sweep_wake);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_async_init: %s", uv_strerror(r));
        srv->sweep_async.data = srv;
        atomic_store(&srv->sweep_ready, true);
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

/* Listening. */

/* The socket systemd passed (socket activation), -1 for none, or a negative RNND_E*. */
static int activated_socket(rnnd_error_t *reterr)
{
        int n = sd_listen_fds(1);

        if (n < 0)
                return rnnd_error_set(reterr, RNND_EIO, "sd_listen_fds: %s", strerror(-n));
        if (n == 0)
                return -1;
        if (n > 1)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "systemd passed %d sockets; rnnd listens on one", n);
        if (sd_is_socket(SD_LISTEN_FDS_START, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "the socket systemd passed is not a listening stream "
                                      "socket");
        return SD_LISTEN_FDS_START;
}

int rnnd_server_start(struct rnnd_server *srv, rnnd_error_t *reterr)
{
        const struct rnnd_options *o = srv->opts;
        unsigned flags =
                MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        unsigned threads = rnnd_options_threads(o), port = 0;
        struct MHD_OptionItem where[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
        struct addrinfo hints = {0}, *ai = NULL;
        const union MHD_DaemonInfo *info;
        char host[256], portstr[8];
        int fd, r;

        /* Own the signals before any MHD thread exists. */
        r = init_loop(srv, reterr);
        if (r < 0)
                return r;
        fd = activated_socket(reterr);
        if (fd < -1)
                return fd;
        if (fd >= 0) {
                where[0] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
        } else {
                r = rnnd_options_split_listen(o->listen, host, sizeof(host), &port, reterr);
                if (r < 0) {
                        rnnd_error_prefix(reterr, "listen");
                        return r;
                }
                snprintf(portstr, sizeof(portstr), "%u", port);
                hints.ai_family = AF_UNSPEC;
                hints.ai_socktype = SOCK_STREAM;
                hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
                r = getaddrinfo(host, portstr, &hints, &ai);
                if (r != 0)
                        return rnnd_error_set(reterr, RNND_EINVAL, "listen %s: %s", o->listen,
                                              gai_strerror(r));
                if (ai->ai_family == AF_INET6)
                        flags |= MHD_USE_IPv6;
                where[0] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr};
        }

        /* The logger first, so that MHD reports problems with the rest through it. */
        srv->mhd = MHD_start_daemon(
                flags, (uint16_t)port, NULL, NULL, rnnd__http_access, srv,
                MHD_OPTION_EXTERNAL_LOGGER, rnnd__http_mhd_log, NULL, MHD_OPTION_ARRAY, where,
                MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)threads, MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned int)o->connection_timeout, MHD_OPTION_CONNECTION_LIMIT,
                (unsigned int)o->connection_limit, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (size_t)o->per_connection_memory, MHD_OPTION_NOTIFY_COMPLETED, rnnd__http_completed,
                srv, MHD_OPTION_END);
        if (ai != NULL)
                freeaddrinfo(ai);
        if (srv->mhd == NULL)
                return rnnd_error_set(reterr, RNND_EIO, "cannot listen on %s (see above)",
                                      fd >= 0 ? "the socket systemd passed" : o->listen);

        info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
        if (fd >= 0)
                snprintf(srv->listen_name, sizeof(srv->listen_name), "fd %d from systemd, port %u",
                         fd, info != NULL ? (unsigned)info->port : 0u);
        else if (strchr(host, ':') != NULL)
                snprintf(srv->listen_name, sizeof(srv->listen_name), "[%s]:%u", host,
                         info != NULL ? (unsigned)info->port : port);
        else
                snprintf(srv->listen_name, sizeof(srv->listen_name), "%s:%u", host,
                         info != NULL ? (unsigned)info->port : port);
        rnnd_log(RNND_LOG_NOTICE,
                 "listening on %s (%u HTTP threads, %" PRIu64 " connections, %" PRIu64
                 "s timeout, body up to %" PRIu64 " bytes)",
                 srv->listen_name, threads, o->connection_limit, o->connection_timeout,
                 o->max_body_bytes);
        return 0;
}

int rnnd_server_run(struct rnnd_server *srv, rnnd_error_t *reterr)
{
        int r;

        if (!srv->loop_ready || srv->mhd == NULL)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "rnnd_server_run before start");
        sd_notifyf(0, "READY=1\nSTATUS=Serving %zu of %zu models on %s", srv->n_loaded_models,
                   srv->n_models, srv->listen_name);
        rnnd_log(RNND_LOG_NOTICE, "ready: %zu of %zu models on %s%s", srv->n_loaded_models,
                 srv->n_models, srv->listen_name,
                 srv->all_loaded ? "" : " (not every model loaded: /v2/health/ready says 400)");
        uv_run(&srv->loop, UV_RUN_DEFAULT);
        r = uv_loop_close(&srv->loop);
        srv->loop_ready = false;
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_loop_close: %s", uv_strerror(r));
        return 0;
}

struct rnnd_server *rnnd_server_free(struct rnnd_server *srv)
{
        size_t i, j;

        if (srv == NULL)
                return NULL;
        stop_mhd(srv);
        if (srv->loop_ready) {
                /* run() failed half-way: close what was opened and end the loop. */
                for (i = 0; i < sizeof(srv->sig) / sizeof(srv->sig[0]); i++)
                        if (srv->sig[i].loop != NULL)
                                close_handle((uv_handle_t *)&srv->sig[i]);
                close_handle((uv_handle_t *)&srv->drain_timer);
                close_handle((uv_handle_t *)&srv->watchdog_timer);
                close_sweep(srv);
                uv_run(&srv->loop, UV_RUN_DEFAULT);
                uv_loop_close(&srv->loop);
        }
        for (i = 0; i < srv->n_models && srv->models != NULL; i++) {
                struct rnnd_served_model *m = &srv->models[i];

                for (j = 0; j < m->n_versions; j++) {
                        struct rnnd_served_version *sv = &m->versions[j];

                        sv->pool = rnnd_pool_free(sv->pool);
                        rnnd_model_unref(sv->model);
                }
                rnnd_free(m->versions);
        }
        rnnd_free(srv->models);
        rnnd_repository_index_done(&srv->index);
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
