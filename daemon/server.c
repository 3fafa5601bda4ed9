/*
 * server.c: the model table, the HTTP server's life and the loop.
 *
 * DESIGN
 * Threads: the main thread builds everything, then becomes the loop thread
 * (libuv), which owns the signals, the systemd watchdog timer, the shutdown
 * timer and the reaper of replaced models.  MHD runs its own pool of threads
 * (epoll, one listening socket shared by all) that call http.c.
 *
 * The model table: srv->models holds one object per model build.  Only the
 * loop thread changes it (reload.c), by swapping the whole array under
 * table_lock's write side; MHD threads find and pin a model under the read
 * side and then read the pinned object, which never changes, without locks.
 * A replaced build is retired: once no request pins it, its pools are closed
 * and, once idle, freed, on the loop thread (never on a pool worker).
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
 * suspended then, every pool is stopped (queued jobs complete 503) and the
 * hook's drain() runs.  Then MHD stops (never with a suspended connection), the
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
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "alloc.h"
#include "http-int.h"
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

void rnnd_server_count(struct rnnd_server *srv, struct rnnd_served_model *m,
                       struct rnnd_served_version *v, unsigned status)
{
        rnnd_metrics_count(v != NULL   ? &v->requests
                           : m != NULL ? &m->requests
                                       : &srv->other_requests,
                           status);
}

/* The model table. */

static int cmp_model_name(const void *key, const void *elem)
{
        const struct rnnd_served_model *const *m = elem;

        return strcmp(key, (*m)->entry->name);
}

struct rnnd_served_model *rnnd_server_find_model(struct rnnd_server *srv, const char *name)
{
        struct rnnd_served_model **m;

        if (srv->n_models == 0)
                return NULL;
        m = bsearch(name, srv->models, srv->n_models, sizeof(srv->models[0]), cmp_model_name);
        return m != NULL ? *m : NULL;
}

void rnnd_server_rdlock(struct rnnd_server *srv)
{
        pthread_rwlock_rdlock(&srv->table_lock);
}

void rnnd_server_unlock(struct rnnd_server *srv)
{
        pthread_rwlock_unlock(&srv->table_lock);
}

struct rnnd_served_model *rnnd_server_pin_model(struct rnnd_server *srv, const char *name)
{
        struct rnnd_served_model *m;

        pthread_rwlock_rdlock(&srv->table_lock);
        m = rnnd_server_find_model(srv, name);
        if (m != NULL)
                atomic_fetch_add_explicit(&m->pins, 1, memory_order_relaxed);
        pthread_rwlock_unlock(&srv->table_lock);
        return m;
}

struct rnnd_served_model *rnnd_server_unpin_model(struct rnnd_served_model *m)
{
        if (m != NULL)
                atomic_fetch_sub_explicit(&m->pins, 1, memory_order_release);
        return NULL;
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
        return atomic_load(&srv->all_loaded) && srv->mhd != NULL && !atomic_load(&srv->stopping) &&
               !atomic_load(&srv->device_fault);
}

const char *rnnd_server_platform(const struct rnnd_served_version *sv)
{
        return strcmp(sv->descs[0].backend, "cudnn") == 0 ? "rnnd_cudnn" : "rnnd_cpu";
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

const struct rnnd_infer_hook rnnd_infer_hook_unimplemented = {
        .handle = infer_unimplemented,
        .drain = NULL, /* nothing is ever suspended */
        .stop = NULL,
        .extensions = NULL,
        .cls = NULL,
};

void rnnd_server_set_infer_hook(struct rnnd_server *srv, const struct rnnd_infer_hook *hook)
{
        srv->infer = *hook;
}

void rnnd_server_set_routes(struct rnnd_server *srv, const struct rnnd_route_handler *routes)
{
        srv->routes = *routes;
}

/* Loading. */

/* What placement sees under options o: this build, this machine, o's backend setting. */
static void placement_env(const struct rnnd_options *o, struct rnnd_placement_env *env)
{
        rnnd_backends_env(env, o->backend == RNND_BACKEND_CPU, o->backend_from,
                          rnnd_options_cpu_threads(o));
}

/* Logs where plans can go, for every model: the setting, the build or the machine. */
static void log_backend(const struct rnnd_options *o)
{
        struct rnnd_placement_env env;
        char why[256];

        placement_env(o, &env);
        if (env.backend_cpu)
                snprintf(why, sizeof(why), "backend = cpu (set by %s)", env.backend_from);
        else if (env.gpu_ops == NULL)
                snprintf(why, sizeof(why), "the cuDNN backend is not built in (rnnd --backends)");
        else if (env.device_count == 0)
                snprintf(why, sizeof(why), "no GPU: %s", env.why_no_gpu);
        else
                snprintf(why, sizeof(why),
                         "%d GPU%s visible: each model goes on cuDNN where it qualifies",
                         env.device_count, env.device_count == 1 ? "" : "s");
        rnnd_log(RNND_LOG_INFO, "backend %s: %s", env.backend_cpu ? "cpu" : "auto", why);
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

/* The pool options of a version: its placed instances and its batching settings. */
static void pool_opts(struct rnnd_server *srv, const struct rnnd_model_config *cfg,
                      const struct rnnd_placement *pl, struct rnnd_pool_opts *po)
{
        *po = (struct rnnd_pool_opts){
                .instances = pl->inst,
                .n_instances = pl->n,
                .max_queue = cfg->batching.max_queue_size,
                .max_batch_size = cfg->batching.max_batch_size,
                .max_batch_steps = cfg->batching.max_batch_steps,
                .max_queue_delay_ns = (uint64_t)cfg->batching.max_queue_delay_us * 1000u,
                .queue_timeout_ns = (uint64_t)cfg->batching.queue_timeout_us * 1000u,
                .levels = cfg->batching.priority_levels,
                .wakeup = pool_wakeup,
                .wakeup_arg = srv,
                .fault = pool_fault,
                .fault_arg = srv,
        };
}

/* Loads one version and starts its instances; a failure stays in sv. */
static void load_version(struct rnnd_server *srv, const struct rnnd_options *o,
                         const struct rnnd_placement_env *env, struct rnnd_served_model *m,
                         struct rnnd_served_version *sv)
{
        struct rnnd_placement pl = {0};
        struct rnnd_pool_opts po = {0};
        rnnd_error_t err = {0};
        int r;

        sv->owner = m;
        r = rnnd_repository_load(o->model_repository, m->entry, sv->version, &sv->model, &err);
        if (r == 0)
                r = rnnd_placement_resolve(&m->entry->cfg, env, &pl, &err);
        if (r == 0) {
                pool_opts(srv, &m->entry->cfg, &pl, &po);
                sv->instances = pl.n;
                r = rnnd_pool_new(sv->model, &po, &sv->pool, &err);
        }
        if (r == 0) {
                sv->descs = rnnd_mallocarray(sv->instances, sizeof(*sv->descs));
                if (sv->descs == NULL)
                        r = rnnd_error_set(&err, RNND_ENOMEM, "out of memory");
        }
        if (r < 0) {
                rnnd_placement_done(&pl);
                sv->status = r;
                snprintf(sv->reason, sizeof(sv->reason), "%s",
                         err.msg[0] != '\0' ? err.msg : rnnd_strerror(r));
                sv->pool = rnnd_pool_free(sv->pool);
                sv->model = rnnd_model_unref(sv->model);
                rnnd_log(RNND_LOG_WARNING, "model %s version %" PRIu64 ": not loaded: %s",
                         m->entry->name, sv->version, sv->reason);
                return;
        }
        for (unsigned i = 0; i < sv->instances; i++) {
                rnnd_pool_describe(sv->pool, i, &sv->descs[i]);
                if (strncmp(sv->descs[i].why_not_cudnn, "out of service", 14) == 0)
                        rnnd_log(RNND_LOG_WARNING,
                                 "model %s version %" PRIu64 ": instance %u: %s; serving on the "
                                 "others",
                                 m->entry->name, sv->version, i, sv->descs[i].why_not_cudnn);
                if (sv->descs[i].why_not_cudnn[0] == '\0')
                        snprintf(sv->descs[i].why_not_cudnn, sizeof(sv->descs[i].why_not_cudnn),
                                 "%s", pl.why_not_cudnn);
        }
        memcpy(sv->group_end, pl.group_end, sizeof(sv->group_end));
        rnnd_placement_done(&pl);
        m->n_loaded++;
        rnnd_log(RNND_LOG_INFO, "model %s version %" PRIu64 ": loaded (%s %s, %s, %s)",
                 m->entry->name, sv->version, rnnd_cell_name(m->entry->cfg.cell),
                 rnnd_server_platform(sv), sv->descs[0].algo, sv->descs[0].math);
        rnnd_log(RNND_LOG_DEBUG, "model %s version %" PRIu64 ": not on cuDNN: %s", m->entry->name,
                 sv->version, sv->descs[0].why_not_cudnn);
}

struct rnnd_served_model *rnnd__server_build_model(struct rnnd_server *srv,
                                                   const struct rnnd_options *o,
                                                   const struct rnnd_repo_model *e,
                                                   const struct rnnd_model_stamp *stamp)
{
        struct rnnd_served_model *m = rnnd_calloc(1, sizeof(*m));
        struct rnnd_placement_env env;

        if (m == NULL)
                return NULL;
        m->own_entry = *e;
        m->entry = &m->own_entry;
        m->stamp = *stamp;
        if (e->status < 0) {
                rnnd_log(RNND_LOG_WARNING, "model %s: not loaded: %s", e->name, e->reason);
                return m;
        }
        m->versions = rnnd_calloc(e->n_versions > 0 ? e->n_versions : 1, sizeof(m->versions[0]));
        if (m->versions == NULL) {
                rnnd_free(m);
                return NULL;
        }
        m->n_versions = e->n_versions;
        placement_env(o, &env);
        for (size_t j = 0; j < e->n_versions; j++) {
                m->versions[j].version = e->versions[j];
                load_version(srv, o, &env, m, &m->versions[j]);
        }
        return m;
}

void rnnd__server_free_model(struct rnnd_served_model *m)
{
        if (m == NULL)
                return;
        for (size_t j = 0; j < m->n_versions; j++) {
                m->versions[j].pool = rnnd_pool_free(m->versions[j].pool);
                rnnd_model_unref(m->versions[j].model);
                rnnd_free(m->versions[j].descs);
        }
        rnnd_free(m->versions);
        rnnd_free(m);
}

/* FNV-1a over n bytes. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * UINT64_C(0x100000001b3);
        return h;
}

/* Hashes what stat says of path (or errno): enough to see a changed or replaced file. */
static uint64_t hash_file(uint64_t h, const char *path)
{
        struct stat st;
        uint64_t v[5] = {0};

        if (stat(path, &st) == 0) {
                v[0] = (uint64_t)st.st_dev;
                v[1] = (uint64_t)st.st_ino;
                v[2] = (uint64_t)st.st_size;
                v[3] = (uint64_t)st.st_mtim.tv_sec;
                v[4] = (uint64_t)st.st_mtim.tv_nsec;
        } else {
                v[0] = (uint64_t)errno;
        }
        return fnv1a(h, v, sizeof(v));
}

void rnnd__server_stamp(const struct rnnd_options *o, const struct rnnd_repo_model *e,
                        struct rnnd_model_stamp *ret)
{
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        uint64_t threads = rnnd_options_cpu_threads(o);
        char path[4096];

        h = fnv1a(h, o->model_repository, strlen(o->model_repository));
        h = fnv1a(h, &o->backend, sizeof(o->backend));
        h = fnv1a(h, &threads, sizeof(threads));
        h = fnv1a(h, &e->status, sizeof(e->status));
        h = fnv1a(h, e->versions, e->n_versions * sizeof(e->versions[0]));
        snprintf(path, sizeof(path), "%s/%s/config.json", o->model_repository, e->name);
        h = hash_file(h, path);
        for (uint32_t j = 0; e->status == 0 && j < e->n_versions; j++) {
                snprintf(path, sizeof(path), "%s/%s/%" PRIu64 "/%s", o->model_repository, e->name,
                         e->versions[j], e->cfg.weights.file);
                h = hash_file(h, path);
        }
        ret->hash = h;
}

static int cmp_model_ptr(const void *a, const void *b)
{
        const struct rnnd_served_model *const *x = a, *const *y = b;

        return strcmp((*x)->entry->name, (*y)->entry->name);
}

/* Recounts what the table serves.  Loop thread, after a change of the table. */
static void recount(struct rnnd_server *srv)
{
        size_t loaded = 0;
        bool all = true;

        for (size_t i = 0; i < srv->n_models; i++) {
                const struct rnnd_served_model *m = srv->models[i];

                if (m->n_loaded > 0)
                        loaded++;
                if (m->unloaded)
                        continue; /* unloaded on purpose: not a reason to be unready */
                if (m->entry->status < 0 || m->n_versions == 0 || m->n_loaded < m->n_versions)
                        all = false;
        }
        atomic_store(&srv->n_loaded_models, loaded);
        atomic_store(&srv->all_loaded, all);
}

static void reap_tick(uv_timer_t *t);

/* Takes m out of service: freed by the reaper once nothing pins it.  Loop thread. */
static void retire(struct rnnd_server *srv, struct rnnd_served_model *m)
{
        atomic_store(&m->retired, true);
        m->next_retired = srv->retired;
        srv->retired = m;
        if (srv->loop_ready && !uv_is_active((uv_handle_t *)&srv->reap_timer) &&
            !uv_is_closing((uv_handle_t *)&srv->reap_timer))
                uv_timer_start(&srv->reap_timer, reap_tick, 0, REAP_POLL_MS);
}

void rnnd__server_swap_table(struct rnnd_server *srv, struct rnnd_served_model **models, size_t n)
{
        struct rnnd_served_model **old;
        size_t old_n, i;

        qsort(models, n, sizeof(models[0]), cmp_model_ptr);
        pthread_rwlock_wrlock(&srv->table_lock);
        old = srv->models;
        old_n = srv->n_models;
        srv->models = models;
        srv->n_models = n;
        pthread_rwlock_unlock(&srv->table_lock);
        for (i = 0; i < n; i++)
                models[i]->mark = true;
        for (i = 0; i < old_n; i++)
                if (!old[i]->mark)
                        retire(srv, old[i]);
        for (i = 0; i < n; i++)
                models[i]->mark = false;
        rnnd_free(old);
        recount(srv);
}

/* Whether every pool of m has nothing queued or running. */
static bool model_idle(struct rnnd_served_model *m)
{
        struct rnnd_pool_progress pr;

        for (size_t j = 0; j < m->n_versions; j++) {
                if (m->versions[j].pool == NULL)
                        continue;
                rnnd_pool_progress(m->versions[j].pool, &pr);
                if (pr.queued > 0 || pr.running > 0)
                        return false;
        }
        return true;
}

/*
 * Frees the retired models that no request pins any more: their pools are
 * closed first (no request can submit to them now) and freed once idle.
 */
static void reap_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;
        struct rnnd_served_model **pp = &srv->retired, *m;

        while ((m = *pp) != NULL) {
                if (atomic_load_explicit(&m->pins, memory_order_acquire) > 0) {
                        pp = &m->next_retired;
                        continue;
                }
                for (size_t j = 0; j < m->n_versions; j++)
                        if (m->versions[j].pool != NULL)
                                rnnd_pool_close(m->versions[j].pool);
                if (!model_idle(m)) {
                        pp = &m->next_retired;
                        continue;
                }
                *pp = m->next_retired;
                rnnd_log(RNND_LOG_DEBUG, "model %s: a replaced build is freed", m->entry->name);
                rnnd__server_free_model(m);
        }
        if (srv->retired == NULL)
                uv_timer_stop(&srv->reap_timer);
}

/* Calls f on every pool of the table and of the retired models.  Loop thread. */
static void each_pool(struct rnnd_server *srv, void (*f)(rnnd_pool_t *p, void *arg), void *arg)
{
        struct rnnd_served_model *m;

        for (size_t i = 0; i < srv->n_models; i++)
                for (size_t j = 0; j < srv->models[i]->n_versions; j++)
                        if (srv->models[i]->versions[j].pool != NULL)
                                f(srv->models[i]->versions[j].pool, arg);
        for (m = srv->retired; m != NULL; m = m->next_retired)
                for (size_t j = 0; j < m->n_versions; j++)
                        if (m->versions[j].pool != NULL)
                                f(m->versions[j].pool, arg);
}

static void pool_close_cb(rnnd_pool_t *p, void *arg)
{
        if (*(bool *)arg)
                rnnd_pool_stop(p);
        else
                rnnd_pool_close(p);
}

void rnnd__server_pools_close(struct rnnd_server *srv, bool stop)
{
        each_pool(srv, pool_close_cb, &stop);
}

static void pool_progress_cb(rnnd_pool_t *p, void *arg)
{
        struct rnnd_pool_progress *sum = arg, pr;

        rnnd_pool_progress(p, &pr);
        sum->queued += pr.queued;
        sum->running += pr.running;
        sum->completed += pr.completed;
}

void rnnd__server_pools_progress(struct rnnd_server *srv, struct rnnd_pool_progress *ret)
{
        memset(ret, 0, sizeof(*ret));
        each_pool(srv, pool_progress_cb, ret);
}

/* The first table: every model of the repository, built on this thread. */
static int load_models(struct rnnd_server *srv, const struct rnnd_repo_index *idx,
                       rnnd_error_t *reterr)
{
        const struct rnnd_options *o = srv->opts;
        struct rnnd_served_model **models;
        struct rnnd_model_stamp stamp;
        size_t i;

        if (idx->n_models == 0)
                rnnd_log(RNND_LOG_WARNING, "model repository %s holds no model",
                         o->model_repository);
        models = rnnd_calloc(idx->n_models > 0 ? idx->n_models : 1, sizeof(models[0]));
        if (models == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for the model table");
        for (i = 0; i < idx->n_models; i++) {
                rnnd__server_stamp(o, &idx->models[i], &stamp);
                models[i] = rnnd__server_build_model(srv, o, &idx->models[i], &stamp);
                if (models[i] == NULL) {
                        while (i-- > 0)
                                rnnd__server_free_model(models[i]);
                        rnnd_free(models);
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for model %s",
                                              idx->models[i].name);
                }
        }
        rnnd__server_swap_table(srv, models, idx->n_models);
        return 0;
}

int rnnd_server_new(const struct rnnd_options *opts, struct rnnd_server **ret, rnnd_error_t *reterr)
{
        struct rnnd_server *srv = rnnd_calloc(1, sizeof(*srv));
        struct rnnd_repo_index idx = {0};
        int r;

        if (srv == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        srv->opts = opts;
        srv->listen_fd = -1;
        pthread_rwlock_init(&srv->table_lock, NULL);
        srv->infer = rnnd_infer_hook_unimplemented;
        if (getrandom(&srv->id_seed, sizeof(srv->id_seed), GRND_NONBLOCK) !=
            (ssize_t)sizeof(srv->id_seed))
                srv->id_seed = (uint32_t)getpid() ^ (uint32_t)time(NULL);
        log_backend(opts);

        r = rnnd_repository_scan(opts->model_repository, &idx, reterr);
        if (r < 0) {
                rnnd_error_prefix(reterr, "model_repository %s", opts->model_repository);
                goto fail;
        }
        r = load_models(srv, &idx, reterr);
        rnnd_repository_index_done(&idx);
        if (r < 0)
                goto fail;
        rnnd_log(RNND_LOG_NOTICE, "%zu of %zu models loaded from %s",
                 atomic_load(&srv->n_loaded_models), srv->n_models, opts->model_repository);
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
        close_handle((uv_handle_t *)&srv->reap_timer);
        rnnd_reload_close(srv);
        for (i = 0; i < sizeof(srv->sig) / sizeof(srv->sig[0]); i++)
                close_handle((uv_handle_t *)&srv->sig[i]);
        rnnd_log(RNND_LOG_NOTICE, "stopped");
}

static void drain_tick(uv_timer_t *t)
{
        struct rnnd_server *srv = t->data;
        uint64_t now = uv_now(&srv->loop);
        struct rnnd_pool_progress pr;

        rnnd__server_pools_progress(srv, &pr);
        if (srv->drain_phase == 0) {
                if ((atomic_load(&srv->inflight) > 0 || pr.queued > 0 || pr.running > 0) &&
                    now < srv->drain_deadline_ms)
                        return;
                if (atomic_load(&srv->suspended) == 0) {
                        finish(srv);
                        return;
                }
                rnnd_log(RNND_LOG_WARNING,
                         "shutdown_timeout passed with %u requests waiting (%" PRIu32
                         " sequences queued, %" PRIu32 " batches running); answering the queued "
                         "ones 503",
                         atomic_load(&srv->suspended), pr.queued, pr.running);
                /* Queued jobs complete with 503; this waits for the running batches. */
                rnnd__server_pools_close(srv, true);
                if (srv->infer.drain != NULL)
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
        rnnd_reload_stop(srv);
        /* What is queued still runs, without waiting for fuller batches. */
        rnnd__server_pools_close(srv, false);
        srv->drain_phase = 0;
        srv->drain_deadline_ms = uv_now(&srv->loop) + srv->opts->shutdown_timeout * 1000;
        uv_timer_start(&srv->drain_timer, drain_tick, 0, DRAIN_POLL_MS);
}

static void on_signal(uv_signal_t *h, int signum)
{
        struct rnnd_server *srv = h->data;

        if (signum == SIGHUP) {
                if (!atomic_load(&srv->stopping))
                        rnnd_reload_signal(srv);
                return;
        }
        begin_stop(srv, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/*
 * Whether the workers make progress: false when some pool has work queued or
 * running and has completed nothing for longer than worker_stall_timeout.
 * An idle pool is never stalled.  Loop thread.
 */
static bool workers_progress(struct rnnd_server *srv, uint64_t now)
{
        uint64_t limit = srv->opts->worker_stall_timeout * 1000;
        struct rnnd_pool_progress pr;
        bool ok = true;

        for (size_t i = 0; i < srv->n_models; i++) {
                struct rnnd_served_model *m = srv->models[i];

                for (size_t j = 0; j < m->n_versions; j++) {
                        struct rnnd_served_version *sv = &m->versions[j];

                        if (sv->pool == NULL)
                                continue;
                        rnnd_pool_progress(sv->pool, &pr);
                        if (pr.completed != sv->wd_completed ||
                            (pr.queued == 0 && pr.running == 0) || sv->wd_moved_ms == 0) {
                                sv->wd_completed = pr.completed;
                                sv->wd_moved_ms = now;
                                continue;
                        }
                        if (now - sv->wd_moved_ms > limit) {
                                if (!srv->watchdog_stalled)
                                        rnnd_log(RNND_LOG_ERR,
                                                 "model %s version %" PRIu64
                                                 ": no batch completed for %" PRIu64
                                                 "s with %" PRIu32 " sequences queued and %" PRIu32
                                                 " batches running; not pinging the watchdog",
                                                 m->entry->name, sv->version,
                                                 (now - sv->wd_moved_ms) / 1000, pr.queued,
                                                 pr.running);
                                ok = false;
                        }
                }
        }
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
 * Queue timeouts: sweeps every pool and sleeps until the earliest deadline
 * left.  A pool wakes the loop (sweep_async) when a submit brings its
 * earliest deadline forward.  libuv timers tick in milliseconds, so a
 * timeout fires up to 1 ms late; the batching delay, which is shorter, is
 * kept by the pools' own workers.
 */
static void sweep_tick(uv_timer_t *t);

static void sweep_cb(rnnd_pool_t *p, void *arg)
{
        uint64_t due = rnnd_pool_sweep(p), *next = arg;

        if (due < *next)
                *next = due;
}

static void sweep(struct rnnd_server *srv)
{
        uint64_t next = UINT64_MAX, now_ns = uv_hrtime();

        /*
         * Every pool, a replaced model's too while requests still wait in it.  The
         * loop thread is the one that swaps the table: no lock needed to read it.
         */
        each_pool(srv, sweep_cb, &next);
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
        each_pool(srv, gpus_lost_cb, srv->fault_msg);
        sd_notifyf(0, "STATUS=Device fault: %s", srv->fault_msg);
        begin_stop(srv, "device fault");
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
        r = rnnd_reload_init(srv, reterr);
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
        sd_notifyf(0, "READY=1\nSTATUS=Serving %zu of %zu models on %s",
                   atomic_load(&srv->n_loaded_models), srv->n_models, srv->listen_name);
        rnnd_log(RNND_LOG_NOTICE, "ready: %zu of %zu models on %s%s",
                 atomic_load(&srv->n_loaded_models), srv->n_models, srv->listen_name,
                 atomic_load(&srv->all_loaded)
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
        struct rnnd_served_model *m;
        size_t i;

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
                close_handle((uv_handle_t *)&srv->reap_timer);
                rnnd_reload_close(srv);
                uv_run(&srv->loop, UV_RUN_DEFAULT);
                uv_loop_close(&srv->loop);
        }
        for (i = 0; i < srv->n_models && srv->models != NULL; i++)
                rnnd__server_free_model(srv->models[i]);
        rnnd_free(srv->models);
        while ((m = srv->retired) != NULL) {
                srv->retired = m->next_retired;
                rnnd__server_free_model(m);
        }
        rnnd_reload_free(srv);
        pthread_rwlock_destroy(&srv->table_lock);
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
