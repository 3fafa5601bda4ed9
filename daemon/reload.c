/*
 * reload.c: SIGHUP and the repository API's load and unload.
 *
 * DESIGN
 * Every change of the model table is an operation in one FIFO (guarded by
 * mu), run one at a time by the loop thread, which is the table's only
 * writer.  An operation runs in three steps:
 *   1. loop thread: SIGHUP reads the settings again (the config file, then
 *      the command line and environment over it) and swaps them in, keeping
 *      the ones that cannot change while running; unload is done here;
 *   2. libuv's thread pool: scan the repository and build the new model
 *      objects (weights, pools) beside the ones still serving; a SIGHUP
 *      rebuilds only models whose files or settings changed (their stamp),
 *      a load its model unless it serves all it selects, unchanged (keeps());
 *   3. loop thread: for each model, the new build replaces the old one only
 *      if every version it selects loaded, or if there was no old build that
 *      serves; else the old build stays, with the failure as its
 *      load_reason, and the new one is freed.  The table is swapped
 *      (rnnd_models_swap()); replaced builds are retired and freed
 *      once no request pins them.
 * Requests that pinned a replaced build finish on it; the infer routes pin
 * the newest build again at dispatch (routes.c), so no request is refused
 * because of a reload.
 * systemd hears RELOADING=1 with MONOTONIC_USEC at step 1 of a SIGHUP and
 * READY=1 after step 3 (sd_notify(3); systemd 252 has no notify-reload).
 * With repository_poll_interval, a timer queues a poll: steps 2 and 3 of a
 * SIGHUP, where a model is rebuilt only when its stamp equals the one the
 * previous poll saw (unchanged for a whole interval: a copy in progress
 * changes sizes and mtimes), and a new model not settled yet stays out of
 * the table (docs/OPERATIONS.md, "Polling the repository").
 */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <uv.h>

#include "alloc.h"
#include "log.h"
#include "reload.h"

/* A model's stamp as a poll saw it. */
struct seen {
        char name[RNND_CFG_NAME_MAX];
        uint64_t hash;
};

struct op {
        struct rnnd_reload *rl;
        enum rnnd_reload_kind kind;
        char name[RNND_CFG_NAME_MAX]; /* load, unload */
        rnnd_reload_done_fn done;     /* NULL for SIGHUP, and once called */
        void *done_cls;
        const struct rnnd_options *o;     /* the settings it loads with */
        struct rnnd_repository_index idx; /* the scan (step 2) */
        int status;                       /* of the scan or the lookup */
        rnnd_error_t err;                 /* its message */
        struct rnnd_served_model **built; /* [idx.n_models]: new builds, NULL = keep the old */
        struct seen *seen;                /* poll: [idx.n_models], the stamps it saw */
        bool kept;                        /* load: the model was unchanged and stays */
        size_t unsettled;                 /* poll: changed models left for the next poll */
        struct op *next;                  /* guarded by mu while queued */
};

struct rnnd_reload {
        struct rnnd_models *models;               /* the table it changes; immutable */
        const struct rnnd_options *_Atomic *opts; /* the settings in effect, swapped here */
        uv_loop_t *loop;                          /* immutable after init */
        int argc;                                 /* immutable */
        char **argv;                              /* borrowed; immutable */
        bool stopped;                             /* rnnd_reload_stop() ran; loop thread only */

        pthread_mutex_t mu;                 /* guards the fields below it up to the next comment */
        struct op *head, *tail;             /* waiting operations */
        unsigned n_pending;                 /* waiting, plus the running one */
        bool closed;                        /* stopping: refuse new operations */
        char token[RNND_OPT_TOKEN_MAX + 1]; /* zero-padded; never logged */
        size_t token_len;                   /* 0 = no token required */

        /* Loop thread only. */
        uv_async_t async;
        bool async_ready;
        uv_work_t work;
        struct op *cur;              /* running, or NULL */
        struct rnnd_options **owned; /* settings made by reloads, freed at the end */
        size_t n_owned;
        uv_timer_t poll;   /* repository_poll_interval */
        bool poll_ready;   /* poll is initialized */
        struct seen *seen; /* the last poll's stamps, sorted by name; read by a poll's work */
        size_t n_seen;
};

struct rnnd_reload *rnnd_reload_new(struct rnnd_models *models,
                                    const struct rnnd_options *_Atomic *opts)
{
        struct rnnd_reload *rl = rnnd_calloc(1, sizeof(*rl));

        if (rl == NULL)
                return NULL;
        rl->models = models;
        rl->opts = opts;
        pthread_mutex_init(&rl->mu, NULL);
        return rl;
}

void rnnd_reload_set_command_line(struct rnnd_reload *rl, int argc, char **argv)
{
        rl->argc = argc;
        rl->argv = argv;
}

/* The token. */

static int read_token(struct rnnd_reload *rl, const struct rnnd_options *o, rnnd_error_t *reterr)
{
        char buf[sizeof(rl->token)] = {0};
        size_t len = 0;
        int r = 0;

        if (o->auth_token_file[0] != '\0')
                r = rnnd_options_read_token(o->auth_token_file, buf, sizeof(buf), &len, reterr);
        if (r == 0) {
                pthread_mutex_lock(&rl->mu);
                memcpy(rl->token, buf, sizeof(buf));
                rl->token_len = len;
                pthread_mutex_unlock(&rl->mu);
        }
        explicit_bzero(buf, sizeof(buf));
        return r;
}

bool rnnd_reload_authorized(struct rnnd_reload *rl, const char *authorization)
{
        char given[sizeof(rl->token)] = {0};
        unsigned char diff = 0;
        size_t n, want;

        if (rl == NULL)
                return true;
        pthread_mutex_lock(&rl->mu);
        want = rl->token_len;
        if (want == 0) {
                pthread_mutex_unlock(&rl->mu);
                return true;
        }
        if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0 ||
            (n = strlen(authorization + 7)) >= sizeof(given)) {
                pthread_mutex_unlock(&rl->mu);
                return false;
        }
        memcpy(given, authorization + 7, n);
        /* Every byte of both zero-padded buffers, whatever differs where. */
        for (size_t i = 0; i < sizeof(given); i++)
                diff |= (unsigned char)(given[i] ^ rl->token[i]);
        diff |= (unsigned char)(n != want);
        pthread_mutex_unlock(&rl->mu);
        explicit_bzero(given, sizeof(given));
        return diff == 0;
}

/* Answering. */

/* Reports op's end (if anyone waits for it): status, and a message (NULL: none). */
static void answer(struct op *op, unsigned status, const char *msg)
{
        rnnd_reload_done_fn done = op->done;

        if (done == NULL)
                return;
        op->done = NULL;
        done(op->done_cls, status, msg);
}

static void op_free(struct op *op)
{
        if (op == NULL)
                return;
        answer(op, 503, "the server is shutting down");
        for (size_t i = 0; op->built != NULL && i < op->idx.n_models; i++)
                rnnd_models_free_model(op->built[i]);
        rnnd_free(op->built);
        rnnd_free(op->seen);
        rnnd_repository_index_done(&op->idx);
        rnnd_free(op);
}

/* Queueing. */

static void kick(struct rnnd_reload *rl);
static void schedule_poll(struct rnnd_reload *rl, bool restart);

/*
 * Queues op; returns 0, or 1 without queueing when coalesce is set and a
 * SIGHUP waits (or, for a poll, another poll), which will see the same files.
 */
static int enqueue(struct rnnd_reload *rl, struct op *op, bool coalesce, rnnd_error_t *reterr)
{
        pthread_mutex_lock(&rl->mu);
        if (rl->closed) {
                pthread_mutex_unlock(&rl->mu);
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "the server is shutting down");
        }
        if (coalesce) {
                for (struct op *q = rl->head; q != NULL; q = q->next)
                        if (q->kind == RNND_RELOAD_ALL || q->kind == op->kind) {
                                pthread_mutex_unlock(&rl->mu);
                                return 1; /* that one will see this SIGHUP's changes too */
                        }
        }
        if (rl->n_pending >= RNND_RELOAD_MAX_PENDING) {
                pthread_mutex_unlock(&rl->mu);
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "%u repository operations are waiting already; try again",
                                      RNND_RELOAD_MAX_PENDING);
        }
        op->next = NULL;
        if (rl->tail != NULL)
                rl->tail->next = op;
        else
                rl->head = op;
        rl->tail = op;
        rl->n_pending++;
        pthread_mutex_unlock(&rl->mu);
        uv_async_send(&rl->async);
        return 0;
}

/* Queues a SIGHUP or a poll, coalesced with one waiting: 0 queued, 1 coalesced, or an error. */
static int queue_scan(struct rnnd_reload *rl, enum rnnd_reload_kind kind, rnnd_error_t *err)
{
        struct op *op = rnnd_calloc(1, sizeof(*op));
        int r;

        if (op == NULL)
                return rnnd_error_set(err, RNND_ENOMEM, "out of memory");
        op->rl = rl;
        op->kind = kind;
        r = enqueue(rl, op, true, err);
        if (r != 0)
                rnnd_free(op);
        return r;
}

void rnnd_reload_signal(struct rnnd_reload *rl)
{
        rnnd_error_t err = {0};
        int r = queue_scan(rl, RNND_RELOAD_ALL, &err);

        if (r < 0)
                rnnd_log(RNND_LOG_WARNING, "SIGHUP: %s, ignoring", err.msg);
        else if (r > 0)
                rnnd_log(RNND_LOG_NOTICE, "SIGHUP: a reload is waiting already");
}

/* repository_poll_interval's timer: queues a poll, unless one or a SIGHUP waits. */
static void poll_cb(uv_timer_t *h)
{
        struct rnnd_reload *rl = h->data;
        rnnd_error_t err = {0};
        int r = queue_scan(rl, RNND_RELOAD_POLL, &err);

        if (r < 0)
                rnnd_log(RNND_LOG_DEBUG, "repository poll: %s; trying again later", err.msg);
        if (r != 0)
                schedule_poll(rl, false); /* else the queued one re-arms it when it ends */
}

/*
 * Arms the poll timer for the interval in effect (stops it when 0); restart:
 * from now even if it runs (after a poll or SIGHUP), else only if it does not.
 */
static void schedule_poll(struct rnnd_reload *rl, bool restart)
{
        uint64_t s = (*rl->opts)->repository_poll_interval;

        if (!rl->poll_ready || rl->stopped)
                return;
        if (s == 0) {
                uv_timer_stop(&rl->poll);
                return;
        }
        if (restart || !uv_is_active((uv_handle_t *)&rl->poll))
                uv_timer_start(&rl->poll, poll_cb, s * 1000u, 0);
}

int rnnd_reload_submit(struct rnnd_reload *rl, enum rnnd_reload_kind kind, const char *name,
                       rnnd_reload_done_fn done, void *done_cls, rnnd_error_t *reterr)
{
        struct op *op;
        int r;

        if (rl == NULL || !rl->async_ready)
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "the server is not running");
        op = rnnd_calloc(1, sizeof(*op));
        if (op == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        op->rl = rl;
        op->kind = kind;
        snprintf(op->name, sizeof(op->name), "%s", name);
        op->done = done;
        op->done_cls = done_cls;
        r = enqueue(rl, op, false, reterr);
        if (r < 0)
                rnnd_free(op);
        return r;
}

bool rnnd_reload_pending(struct rnnd_reload *rl, const char *name)
{
        bool found = false;

        if (rl == NULL)
                return false;
        pthread_mutex_lock(&rl->mu);
        for (struct op *q = rl->head; q != NULL && !found; q = q->next)
                found = q->kind == RNND_RELOAD_ALL ||
                        (q->kind == RNND_RELOAD_LOAD && strcmp(q->name, name) == 0);
        pthread_mutex_unlock(&rl->mu);
        return found;
}

/* Step 1 of SIGHUP: the settings. */

/*
 * Puts back in o the running value of every row marked RNND_OPT_FIXED
 * (options.c): what the running daemon cannot take, its sockets, threads,
 * connection limits and log format.  --help, rnnd.conf, rnnd.conf(5) and
 * rnnd(8) list them from the same flag.
 */
static void keep_fixed(const struct rnnd_options *old, struct rnnd_options *o)
{
        size_t n_rows;
        const struct rnnd_option *rows = rnnd_options_table(&n_rows);
        rnnd_error_t err = {0};
        char a[512], b[512];

        for (size_t i = 0; i < n_rows; i++) {
                const struct rnnd_option *row = &rows[i];

                if (!(row->flags & RNND_OPT_FIXED))
                        continue;
                rnnd_options_format(old, row, a, sizeof(a));
                rnnd_options_format(o, row, b, sizeof(b));
                if (strcmp(a, b) == 0)
                        continue;
                rnnd_log(RNND_LOG_WARNING,
                         "SIGHUP: %s cannot change while running (%s -> %s); keeping %s until "
                         "restart",
                         row->name, a, b, a);
                if (a[0] == '"')
                        snprintf(a, sizeof(a), "%s", "");
                if (rnnd_options_set(o, row, a, row->name, &err) < 0)
                        rnnd_log(RNND_LOG_ERR, "SIGHUP: %s: %s", row->name, err.msg);
        }
}

/* Reads the settings again; on success swaps them in and returns 0. */
static int reload_settings(struct rnnd_reload *rl)
{
        const struct rnnd_options *old = *rl->opts;
        struct rnnd_options *o = NULL, **owned;
        enum rnnd_command cmd;
        rnnd_error_t err = {0};
        int r;

        owned = rnnd_realloc(rl->owned, (rl->n_owned + 1) * sizeof(rl->owned[0]));
        if (owned == NULL)
                goto oom;
        rl->owned = owned;
        o = rnnd_calloc(1, sizeof(*o));
        if (o == NULL || rnnd_options_init(o) < 0)
                goto oom;
        r = rl->argv != NULL ? rnnd_options_parse_args(o, rl->argc, rl->argv, &cmd, &err) : 0;
        if (r == 0 && rl->argv == NULL)
                r = rnnd_error_set(&err, RNND_EINVAL, "the command line is unknown");
        if (r < 0) {
                rnnd_log(RNND_LOG_ERR,
                         "SIGHUP: the settings are not valid (%s); keeping the "
                         "running ones",
                         err.msg);
                goto fail;
        }
        keep_fixed(old, o);
        r = read_token(rl, o, &err);
        if (r < 0) {
                rnnd_log(RNND_LOG_ERR, "SIGHUP: auth_token_file: %s; keeping the running settings",
                         err.msg);
                goto fail;
        }
        atomic_store(&rnnd_log_max_level, o->log_level);
        rl->owned[rl->n_owned++] = o;
        *rl->opts = o;
        rnnd_log(RNND_LOG_NOTICE, "SIGHUP: settings read again%s%s",
                 o->config_file != NULL ? " from " : "",
                 o->config_file != NULL ? o->config_file : "");
        return 0;
oom:
        rnnd_log(RNND_LOG_ERR, "SIGHUP: out of memory; keeping the running settings");
fail:
        if (o != NULL)
                rnnd_options_done(o);
        rnnd_free(o);
        return -1;
}

/* Step 2: scan and build, on libuv's thread pool. */

static int cmp_seen(const void *a, const void *b)
{
        return strcmp(((const struct seen *)a)->name, ((const struct seen *)b)->name);
}

/* Whether the poll before saw model name with the stamp hash (rl->seen is sorted by name). */
static bool settled(const struct rnnd_reload *rl, const char *name, uint64_t hash)
{
        struct seen key;
        const struct seen *s;

        snprintf(key.name, sizeof(key.name), "%s", name);
        s = rl->seen != NULL ? bsearch(&key, rl->seen, rl->n_seen, sizeof(key), cmp_seen) : NULL;
        return s != NULL && s->hash == hash;
}

/* Whether build m loaded all it selects. */
static bool complete(const struct rnnd_served_model *m)
{
        return m->entry->status == 0 && m->n_versions > 0 && m->n_loaded == m->n_versions;
}

/*
 * Whether the scan keeps build old (may be NULL) of a model whose stamp is
 * now stamp.  A SIGHUP or poll keeps a model unchanged since its build, and
 * one unloaded on purpose; a repository load keeps a model unchanged since
 * its build that serves every version it selects, with its sequences and
 * statistics, as Triton leaves a loaded, unmodified model alone
 * (docs/HTTP.md, "Model repository").
 */
static bool keeps(enum rnnd_reload_kind kind, const struct rnnd_served_model *old,
                  const struct rnnd_model_stamp *stamp)
{
        if (old == NULL)
                return false;
        if (kind != RNND_RELOAD_LOAD)
                return old->unloaded || old->stamp.hash == stamp->hash;
        return !old->unloaded && old->stamp.hash == stamp->hash && old->load_status == 0 &&
               complete(old);
}

static void work_cb(uv_work_t *w)
{
        struct op *op = w->data;
        struct rnnd_models *tab = op->rl->models;
        struct rnnd_model_stamp stamp;
        size_t i;

        op->status = rnnd_repository_scan(op->o->model_repository, &op->idx, &op->err);
        if (op->status < 0)
                return;
        op->built = rnnd_calloc(op->idx.n_models > 0 ? op->idx.n_models : 1, sizeof(op->built[0]));
        if (op->kind == RNND_RELOAD_POLL)
                op->seen = rnnd_calloc(op->idx.n_models > 0 ? op->idx.n_models : 1,
                                       sizeof(op->seen[0]));
        if (op->built == NULL || (op->kind == RNND_RELOAD_POLL && op->seen == NULL)) {
                op->status = rnnd_error_set(&op->err, RNND_ENOMEM, "out of memory");
                return;
        }
        for (i = 0; i < op->idx.n_models; i++) {
                const struct rnnd_repository_model *e = &op->idx.models[i];
                struct rnnd_served_model *old;
                bool keep;

                if (op->kind == RNND_RELOAD_LOAD && strcmp(e->name, op->name) != 0)
                        continue;
                rnnd_models_stamp(op->o, e, &stamp);
                if (op->seen != NULL) {
                        snprintf(op->seen[i].name, sizeof(op->seen[i].name), "%s", e->name);
                        op->seen[i].hash = stamp.hash;
                }
                /* The table changes only on the loop thread, which waits for this. */
                rnnd_models_rdlock(tab);
                old = rnnd_models_find(tab, e->name);
                keep = keeps(op->kind, old, &stamp);
                rnnd_models_unlock(tab);
                op->kept |= keep && op->kind == RNND_RELOAD_LOAD;
                if (keep)
                        continue;
                if (op->kind == RNND_RELOAD_POLL && !settled(op->rl, e->name, stamp.hash)) {
                        rnnd_log(RNND_LOG_DEBUG,
                                 "repository poll: model %s changed on disk; building it once "
                                 "unchanged for a poll",
                                 e->name);
                        op->unsettled++;
                        continue;
                }
                if (old != NULL)
                        atomic_store(&old->loading, true); /* alive: only this op retires */
                op->built[i] = rnnd_models_build(tab, op->o, e, &stamp);
                if (op->built[i] == NULL) {
                        op->status = rnnd_error_set(&op->err, RNND_ENOMEM,
                                                    "out of memory for model %s", e->name);
                        return;
                }
        }
}

/* Step 3: choose and swap, on the loop thread. */

/* The first failure of build m: its status, reason and version (0: the model itself). */
static int failure_of(const struct rnnd_served_model *m, char *reason, size_t cap,
                      uint64_t *version)
{
        *version = 0;
        if (m->entry->status < 0) {
                snprintf(reason, cap, "%s", m->entry->reason);
                return m->entry->status;
        }
        for (size_t j = 0; j < m->n_versions; j++) {
                if (m->versions[j].status < 0) {
                        *version = m->versions[j].version;
                        snprintf(reason, cap, "version %" PRIu64 ": %s", m->versions[j].version,
                                 m->versions[j].reason);
                        return m->versions[j].status;
                }
        }
        snprintf(reason, cap, "no version to serve");
        return RNND_EMODEL;
}

/*
 * Between the build in the table (old, may be NULL) and the new build *nb:
 * returns the one to serve.  The new one wins when it is complete or when
 * old serves nothing; else old stays, with the failure as its load_reason,
 * and *nb is freed.  *nb is NULL afterwards.  why gets the failure, or "".
 */
static struct rnnd_served_model *choose(struct rnnd_models *tab, struct rnnd_served_model *old,
                                        struct rnnd_served_model **nb, char *why, size_t cap)
{
        struct rnnd_served_model *m = *nb;
        uint64_t version;
        int status;

        *nb = NULL;
        why[0] = '\0';
        if (complete(m))
                return m;
        status = failure_of(m, why, cap, &version);
        if (old == NULL || old->unloaded || old->n_loaded == 0)
                return m;
        pthread_rwlock_wrlock(&tab->lock);
        old->load_status = status;
        old->load_version = version;
        snprintf(old->load_reason, sizeof(old->load_reason), "%s", why);
        pthread_rwlock_unlock(&tab->lock);
        rnnd_log(RNND_LOG_WARNING,
                 "model %s: the new build failed (%s); the previous one serves on", m->entry->name,
                 why);
        rnnd_models_free_model(m);
        return old;
}

/* A copy of the table with model m in place of the one of its name (or added). */
static struct rnnd_served_model **table_with(struct rnnd_models *tab, struct rnnd_served_model *m,
                                             size_t *ret_n)
{
        struct rnnd_served_model **t;
        size_t n = tab->n_models, i;
        bool found = false;

        t = rnnd_calloc(n + 1, sizeof(t[0]));
        if (t == NULL)
                return NULL;
        for (i = 0; i < n; i++) {
                t[i] = tab->models[i];
                if (strcmp(t[i]->entry->name, m->entry->name) == 0) {
                        t[i] = m;
                        found = true;
                }
        }
        if (!found)
                t[n++] = m;
        *ret_n = n;
        return t;
}

/* Installs m for its name; on no memory frees m and returns false. */
static bool install(struct rnnd_models *tab, struct rnnd_served_model *m)
{
        struct rnnd_served_model **t;
        size_t n;

        if (m == rnnd_models_find(tab, m->entry->name))
                return true;
        t = table_with(tab, m, &n);
        if (t == NULL) {
                rnnd_log(RNND_LOG_ERR, "model %s: out of memory for the table", m->entry->name);
                rnnd_models_free_model(m);
                return false;
        }
        rnnd_models_swap(tab, t, n);
        return true;
}

static void clear_loading(struct rnnd_models *tab)
{
        for (size_t i = 0; i < tab->n_models; i++)
                atomic_store(&tab->models[i]->loading, false);
}

static void finish_load(struct rnnd_models *tab, struct op *op)
{
        struct rnnd_served_model *old = rnnd_models_find(tab, op->name), *m = NULL;
        char why[300], msg[700];
        size_t i;

        if (op->status < 0) {
                snprintf(msg, sizeof(msg), "failed to load '%s': %s", op->name, op->err.msg);
                answer(op, (unsigned)rnnd_error_http_status(op->status), msg);
                return;
        }
        rnnd_models_log_skipped(tab, &op->idx, "repository API", op->name, false);
        if (op->kept && old != NULL) {
                rnnd_log(RNND_LOG_NOTICE,
                         "model %s: unchanged since its build; the repository API load keeps "
                         "it, its sequences and its statistics",
                         op->name);
                answer(op, 200, NULL);
                return;
        }
        for (i = 0; i < op->idx.n_models && m == NULL; i++)
                if (op->built[i] != NULL)
                        m = choose(tab, old, &op->built[i], why, sizeof(why));
        if (m == NULL) {
                snprintf(msg, sizeof(msg),
                         "failed to load '%s': no model directory of that name in the "
                         "repository",
                         op->name);
                answer(op, 400, msg);
                return;
        }
        if (!install(tab, m)) {
                answer(op, 500, "out of memory");
                return;
        }
        if (why[0] != '\0') {
                snprintf(msg, sizeof(msg), "failed to load '%s': %s%s", op->name, why,
                         m == old ? "; the previous build serves on" : "");
                answer(op, 400, msg);
                return;
        }
        rnnd_log(RNND_LOG_NOTICE, "model %s: loaded through the repository API", op->name);
        answer(op, 200, NULL);
}

static void finish_unload(struct rnnd_models *tab, struct op *op)
{
        struct rnnd_served_model *old = rnnd_models_find(tab, op->name), *stub;
        char msg[400];

        if (old == NULL || old->unloaded) {
                snprintf(msg, sizeof(msg), "failed to unload '%s': %s", op->name,
                         old == NULL ? "no such model" : "it is not loaded");
                answer(op, 400, msg);
                return;
        }
        stub = rnnd_calloc(1, sizeof(*stub));
        if (stub == NULL) {
                answer(op, 500, "out of memory");
                return;
        }
        stub->own_entry = old->own_entry;
        stub->entry = &stub->own_entry;
        stub->unloaded = true;
        if (!install(tab, stub)) {
                answer(op, 500, "out of memory");
                return;
        }
        rnnd_log(RNND_LOG_NOTICE,
                 "model %s: unloaded through the repository API; requests in flight finish",
                 op->name);
        answer(op, 200, NULL);
}

/* Logs each model of the table that the scan idx no longer has: it leaves the table. */
static void log_removed(struct rnnd_models *tab, const struct rnnd_repository_index *idx,
                        const char *what)
{
        for (size_t i = 0; i < tab->n_models; i++)
                if (rnnd_repository_find(idx, tab->models[i]->entry->name) == NULL)
                        rnnd_log(RNND_LOG_NOTICE,
                                 "%s: model %s is no longer in the repository: it leaves "
                                 "(requests in flight finish)",
                                 what, tab->models[i]->entry->name);
}

static void finish_reload(struct rnnd_models *tab, struct op *op)
{
        const char *what = op->kind == RNND_RELOAD_POLL ? "repository poll" : "SIGHUP";
        struct rnnd_served_model **t, *old;
        size_t i, n = 0, rebuilt = 0, failed = 0;
        char why[300];
        bool quiet;

        if (op->status < 0) {
                rnnd_log(RNND_LOG_ERR,
                         "%s: cannot read the repository (%s); the models served stay", what,
                         op->err.msg);
                return;
        }
        rnnd_models_log_skipped(tab, &op->idx, what, NULL, op->kind == RNND_RELOAD_POLL);
        t = rnnd_calloc(op->idx.n_models > 0 ? op->idx.n_models : 1, sizeof(t[0]));
        if (t == NULL) {
                rnnd_log(RNND_LOG_ERR, "%s: out of memory; the models served stay", what);
                return;
        }
        log_removed(tab, &op->idx, what);
        for (i = 0; i < op->idx.n_models; i++) {
                old = rnnd_models_find(tab, op->idx.models[i].name);
                if (op->built[i] == NULL) {
                        /* Unchanged, unloaded on purpose, or (a poll) not settled yet. */
                        if (old != NULL)
                                t[n++] = old;
                        continue;
                }
                rebuilt++;
                t[n++] = choose(tab, old, &op->built[i], why, sizeof(why));
                failed += why[0] != '\0';
        }
        /* A poll that found nothing to do says so only at debug level. */
        quiet = op->kind == RNND_RELOAD_POLL && rebuilt == 0 && n == tab->n_models;
        rnnd_models_swap(tab, t, n);
        rnnd_log(quiet ? RNND_LOG_DEBUG : RNND_LOG_NOTICE,
                 "%s: reloaded: %zu models, %zu rebuilt (%zu failed), %zu loaded%s", what, n,
                 rebuilt, failed, atomic_load(&tab->n_loaded_models),
                 op->unsettled > 0 ? "; changes still being written wait for the next poll" : "");
}

static void after_work_cb(uv_work_t *w, int status)
{
        struct rnnd_reload *rl =
                (struct rnnd_reload *)((char *)w - offsetof(struct rnnd_reload, work));
        struct rnnd_models *tab = rl->models;
        struct op *op = rl->cur;

        (void)status;
        clear_loading(tab); /* before answering, so that the client's next index is current */
        if (!rl->stopped) {
                if (op->kind == RNND_RELOAD_LOAD)
                        finish_load(tab, op);
                else
                        finish_reload(tab, op);
        }
        if (op->kind == RNND_RELOAD_ALL && !rl->stopped)
                sd_notifyf(0, "READY=1\nSTATUS=Serving %zu of %zu models (reloaded)",
                           atomic_load(&tab->n_loaded_models), tab->n_models);
        if (op->kind == RNND_RELOAD_POLL && op->status == 0) {
                rnnd_free(rl->seen); /* what this poll saw, for the next one */
                rl->seen = op->seen;
                rl->n_seen = op->idx.n_models;
                op->seen = NULL;
        }
        if (op->kind == RNND_RELOAD_POLL || op->kind == RNND_RELOAD_ALL)
                schedule_poll(rl, true);
        rl->cur = NULL;
        op_free(op);
        pthread_mutex_lock(&rl->mu);
        rl->n_pending--;
        pthread_mutex_unlock(&rl->mu);
        kick(rl);
}

/* Starts the next operation, if none runs.  Loop thread. */
static void kick(struct rnnd_reload *rl)
{
        struct rnnd_models *tab = rl->models;
        struct op *op;
        int r;

        while (rl->cur == NULL) {
                pthread_mutex_lock(&rl->mu);
                op = rl->head;
                if (op != NULL) {
                        rl->head = op->next;
                        if (rl->head == NULL)
                                rl->tail = NULL;
                }
                pthread_mutex_unlock(&rl->mu);
                if (op == NULL)
                        return;
                if (rl->stopped || op->kind == RNND_RELOAD_UNLOAD) {
                        if (!rl->stopped)
                                finish_unload(tab, op);
                        op_free(op);
                        pthread_mutex_lock(&rl->mu);
                        rl->n_pending--;
                        pthread_mutex_unlock(&rl->mu);
                        continue;
                }
                if (op->kind == RNND_RELOAD_POLL) {
                        /* The repository only: no settings, nothing for systemd. */
                } else if (op->kind == RNND_RELOAD_ALL) {
                        struct timespec ts;

                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        sd_notifyf(0,
                                   "RELOADING=1\nMONOTONIC_USEC=%" PRIu64
                                   "\nSTATUS=Reloading the settings and the repository",
                                   (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
                        rnnd_log(RNND_LOG_NOTICE, "SIGHUP: reloading the settings and the "
                                                  "repository");
                        reload_settings(rl);
                } else {
                        struct rnnd_served_model *old = rnnd_models_find(tab, op->name);

                        if (old != NULL)
                                atomic_store(&old->loading, true);
                }
                op->o = *rl->opts;
                rl->cur = op;
                rl->work.data = op;
                r = uv_queue_work(rl->loop, &rl->work, work_cb, after_work_cb);
                if (r < 0) {
                        rnnd_log(RNND_LOG_ERR, "cannot queue a reload: %s", uv_strerror(r));
                        rl->cur = NULL;
                        answer(op, 500, "cannot start the load");
                        op_free(op);
                        pthread_mutex_lock(&rl->mu);
                        rl->n_pending--;
                        pthread_mutex_unlock(&rl->mu);
                }
        }
}

static void async_cb(uv_async_t *h)
{
        kick(h->data);
}

int rnnd_reload_init(struct rnnd_reload *rl, uv_loop_t *loop, rnnd_error_t *reterr)
{
        int r;

        rl->loop = loop;
        r = read_token(rl, *rl->opts, reterr);
        if (r < 0) {
                rnnd_error_prefix(reterr, "auth_token_file");
                return r;
        }
        r = uv_async_init(rl->loop, &rl->async, async_cb);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_async_init: %s", uv_strerror(r));
        rl->async.data = rl;
        rl->async_ready = true;
        r = uv_timer_init(rl->loop, &rl->poll);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_timer_init: %s", uv_strerror(r));
        rl->poll.data = rl;
        rl->poll_ready = true;
        schedule_poll(rl, true);
        if ((*rl->opts)->repository_poll_interval > 0)
                rnnd_log(RNND_LOG_NOTICE,
                         "polling %s every %" PRIu64 " s (repository_poll_interval): a model "
                         "is loaded once its files are unchanged for a poll",
                         (*rl->opts)->model_repository, (*rl->opts)->repository_poll_interval);
        if (rl->token_len > 0)
                rnnd_log(RNND_LOG_INFO, "the repository API needs the bearer token of %s",
                         (*rl->opts)->auth_token_file);
        return 0;
}

void rnnd_reload_drain(struct rnnd_reload *rl)
{
        if (rl != NULL && rl->cur != NULL)
                answer(rl->cur, 503,
                       "the server is shutting down: the operation did not finish within "
                       "shutdown_timeout");
}

void rnnd_reload_stop(struct rnnd_reload *rl)
{

        if (rl == NULL)
                return;
        rl->stopped = true;
        if (rl->poll_ready)
                uv_timer_stop(&rl->poll);
        pthread_mutex_lock(&rl->mu);
        rl->closed = true;
        pthread_mutex_unlock(&rl->mu);
        if (rl->async_ready)
                kick(rl); /* answers what waits 503 */
}

static void async_close_cb(uv_handle_t *h)
{
        (void)h; /* Embedded in struct rnnd_reload. */
}

void rnnd_reload_close(struct rnnd_reload *rl)
{

        if (rl == NULL || !rl->async_ready)
                return;
        rnnd_reload_stop(rl);
        if (!uv_is_closing((uv_handle_t *)&rl->async))
                uv_close((uv_handle_t *)&rl->async, async_close_cb);
        if (rl->poll_ready && !uv_is_closing((uv_handle_t *)&rl->poll))
                uv_close((uv_handle_t *)&rl->poll, async_close_cb);
}

void rnnd_reload_free(struct rnnd_reload *rl)
{
        struct op *op;

        if (rl == NULL)
                return;
        while ((op = rl->head) != NULL) {
                rl->head = op->next;
                op_free(op);
        }
        for (size_t i = 0; i < rl->n_owned; i++) {
                rnnd_options_done(rl->owned[i]);
                rnnd_free(rl->owned[i]);
        }
        rnnd_free(rl->owned);
        rnnd_free(rl->seen);
        explicit_bzero(rl->token, sizeof(rl->token));
        pthread_mutex_destroy(&rl->mu);
        rnnd_free(rl);
}
