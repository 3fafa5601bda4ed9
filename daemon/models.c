/*
 * models.c: the model table (models.h; docs/DESIGN.md §2): building a
 * model's versions (repository load, placement, pools), finding and pinning
 * them for requests, swapping the table, and reaping replaced builds.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "backends.h"
#include "clock.h"
#include "decimal.h"
#include "log.h"
#include "models.h"

void rnnd_models_init(struct rnnd_models *t, const struct rnnd_models_events *ev)
{
        memset(t, 0, sizeof(*t));
        pthread_rwlock_init(&t->lock, NULL);
        t->ev = *ev;
}

void rnnd_models_done(struct rnnd_models *t)
{
        struct rnnd_served_model *m;

        for (size_t i = 0; i < t->n_models && t->models != NULL; i++)
                rnnd_models_free_model(t->models[i]);
        rnnd_free(t->models);
        t->models = NULL;
        t->n_models = 0;
        while ((m = t->retired) != NULL) {
                t->retired = m->next_retired;
                rnnd_models_free_model(m);
        }
        pthread_rwlock_destroy(&t->lock);
}

void rnnd_models_count(struct rnnd_models *t, struct rnnd_served_model *m,
                       struct rnnd_served_version *v, unsigned status)
{
        rnnd_metrics_count(v != NULL   ? &v->requests
                           : m != NULL ? &m->requests
                                       : &t->other_requests,
                           status);
}

/* The model table. */

static int cmp_model_name(const void *key, const void *elem)
{
        const struct rnnd_served_model *const *m = elem;

        return strcmp(key, (*m)->entry->name);
}

struct rnnd_served_model *rnnd_models_find(struct rnnd_models *t, const char *name)
{
        struct rnnd_served_model **m;

        if (t->n_models == 0)
                return NULL;
        m = bsearch(name, t->models, t->n_models, sizeof(t->models[0]), cmp_model_name);
        return m != NULL ? *m : NULL;
}

void rnnd_models_rdlock(struct rnnd_models *t)
{
        pthread_rwlock_rdlock(&t->lock);
}

void rnnd_models_unlock(struct rnnd_models *t)
{
        pthread_rwlock_unlock(&t->lock);
}

void rnnd_models_read(struct rnnd_models *t,
                      void (*f)(void *arg, struct rnnd_served_model *const *models, size_t n),
                      void *arg)
{
        pthread_rwlock_rdlock(&t->lock);
        f(arg, t->models, t->n_models);
        pthread_rwlock_unlock(&t->lock);
}

const struct rnnd_metrics_counters *rnnd_models_unmatched(struct rnnd_models *t)
{
        return &t->other_requests;
}

void rnnd_models_counts(struct rnnd_models *t, size_t *n_models, size_t *n_loaded)
{
        pthread_rwlock_rdlock(&t->lock);
        *n_models = t->n_models;
        *n_loaded = atomic_load(&t->n_loaded_models);
        pthread_rwlock_unlock(&t->lock);
}

struct rnnd_served_model *rnnd_models_pin(struct rnnd_models *t, const char *name)
{
        struct rnnd_served_model *m;

        pthread_rwlock_rdlock(&t->lock);
        m = rnnd_models_find(t, name);
        if (m != NULL)
                atomic_fetch_add_explicit(&m->pins, 1, memory_order_relaxed);
        pthread_rwlock_unlock(&t->lock);
        return m;
}

struct rnnd_served_model *rnnd_models_unpin(struct rnnd_served_model *m)
{
        if (m != NULL)
                atomic_fetch_sub_explicit(&m->pins, 1, memory_order_release);
        return NULL;
}

struct rnnd_served_version *rnnd_models_find_version(struct rnnd_served_model *m, uint64_t v)
{
        size_t i;

        for (i = 0; i < m->n_versions; i++)
                if (m->versions[i].version == v)
                        return &m->versions[i];
        return NULL;
}

struct rnnd_served_version *rnnd_models_latest(struct rnnd_served_model *m)
{
        size_t i;

        for (i = m->n_versions; i-- > 0;)
                if (m->versions[i].status == 0)
                        return &m->versions[i];
        return NULL;
}

/* A positive decimal version without leading zeros. */
static bool parse_version(const char *s, uint64_t *ret)
{
        return s[0] >= '1' && s[0] <= '9' && rnnd_decimal_parse(s, ret) == 0;
}

int rnnd_models_pin_named(struct rnnd_models *t, const char *name, const char *version_text,
                          struct rnnd_served_model **model, struct rnnd_served_version **version,
                          rnnd_error_t *reterr)
{
        struct rnnd_served_model *m = rnnd_models_pin(t, name);
        uint64_t v;

        *model = m;
        *version = NULL;
        if (m == NULL) /* a model copied in since the last load is not seen yet */
                return rnnd_error_set(
                        reterr, RNND_ENOTFOUND,
                        "unknown model '%s' (a model put into the repository since the last load "
                        "is served after a reload: SIGHUP, POST /v2/repository/models/%s/load, or "
                        "repository_poll_interval)",
                        name, name);
        if (version_text == NULL || version_text[0] == '\0') {
                *version = rnnd_models_latest(m);
                return 0;
        }
        if (!parse_version(version_text, &v) || (*version = rnnd_models_find_version(m, v)) == NULL)
                return rnnd_error_set(reterr, RNND_ENOTFOUND, "unknown version '%s' of model '%s'",
                                      version_text, name);
        return 0;
}

/* The highest version of m that failed to load, or NULL. */
static const struct rnnd_served_version *latest_failed(const struct rnnd_served_model *m)
{
        for (size_t i = m->n_versions; i-- > 0;)
                if (m->versions[i].status < 0)
                        return &m->versions[i];
        return NULL;
}

/*
 * Why m or its version v does not serve: "is not <word>: reason"; 0 when it
 * does.  With no loaded version, the reason the highest one failed: the
 * client sees why, as docs/MODELS.md says, not only the repository index.
 */
static int why_not(const struct rnnd_served_model *m, const struct rnnd_served_version *v,
                   const char *word, rnnd_error_t *reterr)
{
        if (m->entry->status < 0)
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "model '%s' is not %s: %s",
                                      m->entry->name, word, m->entry->reason);
        if (v == NULL) {
                const struct rnnd_served_version *f = latest_failed(m);

                if (f == NULL)
                        return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                              "model '%s' has no loaded version", m->entry->name);
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "model '%s' has no loaded version: version %" PRIu64
                                      " failed to load: %s",
                                      m->entry->name, f->version, f->reason);
        }
        if (v->status < 0)
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "version %" PRIu64 " of model '%s' is not %s: %s", v->version,
                                      m->entry->name, word, v->reason);
        return 0;
}

int rnnd_models_check_loaded(const struct rnnd_served_model *m, const struct rnnd_served_version *v,
                             rnnd_error_t *reterr)
{
        if (m->unloaded) /* as Triton: not found until it is loaded again */
                return rnnd_error_set(reterr, RNND_ENOTFOUND,
                                      "model '%s' is not loaded (unloaded through the "
                                      "repository API)",
                                      m->entry->name);
        return why_not(m, v, "available", reterr);
}

int rnnd_models_check_model(const struct rnnd_served_model *m, rnnd_error_t *reterr)
{
        return m->entry->status < 0 ? why_not(m, NULL, "available", reterr) : 0;
}

int rnnd_models_check_ready(const struct rnnd_served_model *m, const struct rnnd_served_version *v,
                            rnnd_error_t *reterr)
{
        return why_not(m, v, "ready", reterr);
}

const char *rnnd_models_platform(const struct rnnd_served_version *sv)
{
        return strcmp(sv->descs[0].backend, "cudnn") == 0 ? "rnnd_cudnn" : "rnnd_cpu";
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

/* The pool options of a version: its placed instances and its batching settings. */
static void pool_opts(struct rnnd_models *t, const struct rnnd_model_config *cfg,
                      const struct rnnd_placement *pl, struct rnnd_pool_opts *po)
{
        *po = (struct rnnd_pool_opts){
                .instances = pl->inst,
                .n_instances = pl->n,
                .max_queue = cfg->batching.max_queue_size,
                .max_batch_size = cfg->batching.max_batch_size,
                .max_batch_steps = cfg->batching.max_batch_steps,
                .max_queue_delay_ns = (uint64_t)cfg->batching.max_queue_delay_us * 1000u,
                .adaptive_delay = cfg->batching.adaptive_delay, /* docs/DESIGN.md §6 */
                .queue_timeout_ns = (uint64_t)cfg->batching.queue_timeout_us * 1000u,
                .levels = cfg->batching.priority_levels,
                .wakeup = t->ev.pool_wakeup,
                .wakeup_arg = t->ev.arg,
                .fault = t->ev.pool_fault,
                .fault_arg = t->ev.arg,
        };
}

/*
 * The table of live sequences of a version whose model serves them: a
 * sequence block, one direction (docs/DESIGN.md §6).  Its state is h then,
 * for an LSTM, c: every layer of every block (rnnd_modelcfg_state_size()).
 */
static int make_streams(const struct rnnd_model_config *cfg, struct rnnd_served_version *sv,
                        rnnd_error_t *err)
{
        struct rnnd_seqtab_params sp = {
                .max_sequences = cfg->sequence.max_sequences,
                .idle_timeout_ns = (uint64_t)cfg->sequence.idle_timeout_ms * 1000000u,
        };
        size_t h, c;

        if (!cfg->sequence.present || rnnd_modelcfg_has_bidirectional(cfg))
                return 0;
        rnnd_modelcfg_state_size(cfg, &h, &c);
        sp.state_floats = h + c;
        return rnnd_seqtab_new(&sp, &sv->streams, err);
}

/*
 * Logs where a loaded version runs.  Why it is not on cuDNN is logged at
 * info when cuDNN was open to it (the reason is the model's own: its cell,
 * its size, an instance group), and at debug when it only repeats the
 * server-wide reason log_backend() gave.
 */
static void log_loaded(const struct rnnd_placement_env *env, const struct rnnd_served_model *m,
                       const struct rnnd_served_version *sv)
{
        const char *why = sv->descs[0].why_not_cudnn;
        bool own = env->gpu_ops != NULL && env->device_count > 0 && !env->backend_cpu;

        rnnd_log(RNND_LOG_INFO, "model %s version %" PRIu64 ": loaded (%s %s, %s, %s)",
                 m->entry->name, sv->version, rnnd_cell_name(m->entry->cfg.cell),
                 rnnd_models_platform(sv), sv->descs[0].algo, sv->descs[0].math);
        if (why[0] != '\0')
                rnnd_log(own ? RNND_LOG_INFO : RNND_LOG_DEBUG,
                         "model %s version %" PRIu64 ": not on cuDNN: %s", m->entry->name,
                         sv->version, why);
}

/* Loads one version and starts its instances; a failure stays in sv. */
static void load_version(struct rnnd_models *t, const struct rnnd_options *o,
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
                pool_opts(t, &m->entry->cfg, &pl, &po);
                sv->instances = pl.n;
                r = rnnd_pool_new(sv->model, &po, &sv->pool, &err);
        }
        if (r == 0) {
                sv->descs = rnnd_mallocarray(sv->instances, sizeof(*sv->descs));
                if (sv->descs == NULL)
                        r = rnnd_error_set(&err, RNND_ENOMEM, "out of memory");
        }
        if (r == 0)
                r = make_streams(&m->entry->cfg, sv, &err);
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
        log_loaded(env, m, sv);
}

struct rnnd_served_model *rnnd_models_build(struct rnnd_models *t, const struct rnnd_options *o,
                                            const struct rnnd_repository_model *e,
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
                pthread_mutex_init(&m->versions[j].streams_mu, NULL);
                load_version(t, o, &env, m, &m->versions[j]);
        }
        return m;
}

void rnnd_models_free_model(struct rnnd_served_model *m)
{
        if (m == NULL)
                return;
        for (size_t j = 0; j < m->n_versions; j++) {
                m->versions[j].pool = rnnd_pool_free(m->versions[j].pool);
                m->versions[j].streams = rnnd_seqtab_free(m->versions[j].streams);
                pthread_mutex_destroy(&m->versions[j].streams_mu);
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

void rnnd_models_stamp(const struct rnnd_options *o, const struct rnnd_repository_model *e,
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
static void recount(struct rnnd_models *t)
{
        size_t loaded = 0;
        bool all = true;

        for (size_t i = 0; i < t->n_models; i++) {
                const struct rnnd_served_model *m = t->models[i];

                if (m->n_loaded > 0)
                        loaded++;
                if (m->unloaded)
                        continue; /* unloaded on purpose: not a reason to be unready */
                if (m->entry->status < 0 || m->n_versions == 0 || m->n_loaded < m->n_versions)
                        all = false;
        }
        atomic_store(&t->n_loaded_models, loaded);
        atomic_store(&t->all_loaded, all);
}

/* Takes m out of service: freed by rnnd_models_reap() once nothing pins it.  Loop thread. */
static void retire(struct rnnd_models *t, struct rnnd_served_model *m)
{
        atomic_store(&m->retired, true);
        m->next_retired = t->retired;
        t->retired = m;
        if (t->ev.retired != NULL)
                t->ev.retired(t->ev.arg);
}

/* Logs that k live sequences of m's version v were dropped by why ("the reload"). */
static void log_dropped(const struct rnnd_served_model *m, const struct rnnd_served_version *v,
                        size_t k, const char *why)
{
        if (k > 0)
                rnnd_log(RNND_LOG_NOTICE,
                         "model %s version %" PRIu64 ": %zu live sequences dropped by %s",
                         m->entry->name, v->version, k, why);
}

/*
 * The sequences live in a replaced build's versions are remembered as
 * dropped by the versions of its replacement (new weights, new tables), so
 * that their next chunks say why.  Loop thread.
 */
static void hand_over_streams(struct rnnd_served_model *old, struct rnnd_served_model **models,
                              size_t n)
{
        struct rnnd_served_model **m =
                bsearch(old->entry->name, models, n, sizeof(models[0]), cmp_model_name);

        for (size_t j = 0; m != NULL && j < old->n_versions; j++) {
                struct rnnd_served_version *from = &old->versions[j];
                struct rnnd_served_version *to = rnnd_models_find_version(*m, from->version);
                size_t k;

                if (from->streams == NULL || to == NULL || to->streams == NULL)
                        continue;
                pthread_mutex_lock(&from->streams_mu);
                pthread_mutex_lock(&to->streams_mu);
                k = rnnd_seqtab_note_dropped(from->streams, to->streams);
                pthread_mutex_unlock(&to->streams_mu);
                pthread_mutex_unlock(&from->streams_mu);
                log_dropped(old, from, k, "the reload");
        }
}

void rnnd_models_swap(struct rnnd_models *t, struct rnnd_served_model **models, size_t n)
{
        struct rnnd_served_model **old;
        size_t old_n, i;

        qsort(models, n, sizeof(models[0]), cmp_model_ptr);
        pthread_rwlock_wrlock(&t->lock);
        old = t->models;
        old_n = t->n_models;
        t->models = models;
        t->n_models = n;
        pthread_rwlock_unlock(&t->lock);
        for (i = 0; i < n; i++)
                models[i]->mark = true;
        for (i = 0; i < old_n; i++)
                if (!old[i]->mark) {
                        hand_over_streams(old[i], models, n);
                        retire(t, old[i]);
                }
        for (i = 0; i < n; i++)
                models[i]->mark = false;
        rnnd_free(old);
        recount(t);
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
bool rnnd_models_reap(struct rnnd_models *t)
{
        struct rnnd_served_model **pp = &t->retired, *m;

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
                rnnd_models_free_model(m);
        }
        return t->retired != NULL;
}

/* Calls f on every pool of the table and of the retired models.  Loop thread. */
void rnnd_models_each_version(struct rnnd_models *t,
                              void (*f)(struct rnnd_served_version *v, void *arg), void *arg)
{
        struct rnnd_served_model *m;

        for (size_t i = 0; i < t->n_models; i++)
                for (size_t j = 0; j < t->models[i]->n_versions; j++)
                        if (t->models[i]->versions[j].pool != NULL)
                                f(&t->models[i]->versions[j], arg);
        for (m = t->retired; m != NULL; m = m->next_retired)
                for (size_t j = 0; j < m->n_versions; j++)
                        if (m->versions[j].pool != NULL)
                                f(&m->versions[j], arg);
}

struct each_pool {
        void (*f)(rnnd_pool_t *p, void *arg);
        void *arg;
};

static void each_pool_cb(struct rnnd_served_version *v, void *arg)
{
        const struct each_pool *e = arg;

        e->f(v->pool, e->arg);
}

void rnnd_models_each_pool(struct rnnd_models *t, void (*f)(rnnd_pool_t *p, void *arg), void *arg)
{
        struct each_pool e = {.f = f, .arg = arg};

        rnnd_models_each_version(t, each_pool_cb, &e);
}

void rnnd_models_log_live(struct rnnd_models *t, const char *why)
{
        struct rnnd_seqtab_counts n;

        pthread_rwlock_rdlock(&t->lock);
        for (size_t i = 0; i < t->n_models; i++)
                for (size_t j = 0; j < t->models[i]->n_versions; j++) {
                        struct rnnd_served_version *v = &t->models[i]->versions[j];

                        if (v->streams == NULL)
                                continue;
                        pthread_mutex_lock(&v->streams_mu);
                        /* Those idle past their timeout expired; the stop drops the rest. */
                        rnnd_seqtab_expire(v->streams, rnnd_now_ns());
                        rnnd_seqtab_counts(v->streams, &n);
                        pthread_mutex_unlock(&v->streams_mu);
                        log_dropped(t->models[i], v, (size_t)n.live, why);
                }
        pthread_rwlock_unlock(&t->lock);
}

static void pool_close_cb(rnnd_pool_t *p, void *arg)
{
        if (*(bool *)arg)
                rnnd_pool_stop(p);
        else
                rnnd_pool_close(p);
}

void rnnd_models_pools_close(struct rnnd_models *t, bool stop)
{
        rnnd_models_each_pool(t, pool_close_cb, &stop);
}

static void pool_progress_cb(rnnd_pool_t *p, void *arg)
{
        struct rnnd_pool_progress *sum = arg, pr;

        rnnd_pool_progress(p, &pr);
        sum->queued += pr.queued;
        sum->running += pr.running;
        sum->completed += pr.completed;
}

void rnnd_models_pools_progress(struct rnnd_models *t, struct rnnd_pool_progress *ret)
{
        memset(ret, 0, sizeof(*ret));
        rnnd_models_each_pool(t, pool_progress_cb, ret);
}

/* Whether the skipped entry s belongs to model only (NULL: every entry does). */
static bool skipped_of(const struct rnnd_repository_skipped *s, const char *only)
{
        size_t n = only != NULL ? strlen(only) : 0;

        return only == NULL || (strncmp(s->name, only, n) == 0 && s->name[n] == '/');
}

void rnnd_models_log_skipped(struct rnnd_models *t, const struct rnnd_repository_index *idx,
                             const char *what, const char *only, bool quiet_if_same)
{
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        int level;

        for (size_t i = 0; i < idx->n_skipped; i++)
                h = fnv1a(h, idx->skipped[i].name, strlen(idx->skipped[i].name) + 1);
        h = fnv1a(h, &idx->n_skipped_more, sizeof(idx->n_skipped_more));
        level = quiet_if_same && h == t->skipped_hash ? RNND_LOG_DEBUG : RNND_LOG_NOTICE;
        if (only == NULL)
                t->skipped_hash = h;
        for (size_t i = 0; i < idx->n_skipped; i++) {
                const struct rnnd_repository_skipped *s = &idx->skipped[i];
                const char *slash = strchr(s->name, '/');

                if (!skipped_of(s, only))
                        continue;
                if (slash != NULL) /* a model's directory that is no version */
                        rnnd_log(level, "%s: model %.*s: directory %s/ ignored: %s", what,
                                 (int)(slash - s->name), s->name, slash + 1, s->reason);
                else
                        rnnd_log(s->is_dir ? level : RNND_LOG_DEBUG, "%s: %s%s skipped: %s", what,
                                 s->name, s->is_dir ? "/" : "", s->reason);
        }
        if (idx->n_skipped_more > 0 && only == NULL)
                rnnd_log(level, "%s: %zu more entries skipped", what, idx->n_skipped_more);
}

/* A model's own directory given as model_repository: its version directories would be
 * taken for models that have no config.json (docs/OPERATIONS.md, "Installing"). */
static void warn_model_dir(const char *repository)
{
        char path[4096];
        struct stat st;

        snprintf(path, sizeof(path), "%s/config.json", repository);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
                rnnd_log(RNND_LOG_WARNING,
                         "model_repository %s holds a config.json: it is a model's directory; "
                         "model_repository is the directory above it, with one directory a model",
                         repository);
}

/* The first table: every model of the repository, built on this thread. */
int rnnd_models_load(struct rnnd_models *t, const struct rnnd_options *o,
                     const struct rnnd_repository_index *idx, rnnd_error_t *reterr)
{
        struct rnnd_served_model **models;
        struct rnnd_model_stamp stamp;
        size_t i;

        log_backend(o);
        warn_model_dir(o->model_repository);
        rnnd_models_log_skipped(t, idx, "model repository", NULL, false);
        if (idx->n_models == 0)
                rnnd_log(RNND_LOG_WARNING, "model repository %s holds no model",
                         o->model_repository);
        models = rnnd_calloc(idx->n_models > 0 ? idx->n_models : 1, sizeof(models[0]));
        if (models == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for the model table");
        for (i = 0; i < idx->n_models; i++) {
                rnnd_models_stamp(o, &idx->models[i], &stamp);
                models[i] = rnnd_models_build(t, o, &idx->models[i], &stamp);
                if (models[i] == NULL) {
                        rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for model %s",
                                       idx->models[i].name);
                        while (i-- > 0)
                                rnnd_models_free_model(models[i]);
                        rnnd_free(models);
                        return RNND_ENOMEM;
                }
        }
        rnnd_models_swap(t, models, idx->n_models);
        return 0;
}
