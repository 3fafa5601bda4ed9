/*
 * repository.c: scans the model repository on disk (DESIGN.md §3).
 *
 * A scan lists root's model directories, sorts them by name, then reads each
 * model's config.json and lists its version directories, keeping the ones
 * the version_policy selects.  A model that cannot be used keeps its status
 * and reason and the scan goes on; only a problem with root itself (or
 * running out of memory) fails the scan.  Nothing here keeps state between
 * calls, so every function is thread-safe.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "repository.h"

/* "<dir>/<name>" into buf[PATH_MAX]; RNND_ELIMIT when it does not fit. */
static int join_path(char *buf, const char *dir, const char *name, rnnd_error_t *reterr)
{
        int n = snprintf(buf, PATH_MAX, "%s/%s", dir, name);

        if (n < 0 || n >= PATH_MAX)
                return rnnd_error_set(reterr, RNND_ELIMIT, "%s/%s: path longer than %d bytes", dir,
                                      name, PATH_MAX - 1);
        return 0;
}

bool rnnd_repository_valid_name(const char *s)
{
        static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789_.-";
        size_t n = strlen(s);

        return n >= 1 && n <= RNND_CFG_NAME_MAX - 1 && s[0] != '.' && strspn(s, ok) == n;
}

/* A positive decimal integer without leading zeros that fits uint64_t. */
static bool parse_version(const char *s, uint64_t *out)
{
        uint64_t v = 0;

        if (s[0] < '1' || s[0] > '9')
                return false;
        for (; *s != '\0'; s++) {
                if (*s < '0' || *s > '9')
                        return false;
                if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
                        return false;
                v = v * 10 + (uint64_t)(*s - '0');
        }
        *out = v;
        return true;
}

/* Whether name in the open directory dfd is a directory, following symlinks. */
static bool is_dir_at(int dfd, const char *name)
{
        struct stat st;

        return fstatat(dfd, name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

/* Why a directory is passed over: as the daemon logs it, and docs/MODELS.md has it. */
#define NOT_A_MODEL_NAME                                                                           \
        "not a valid model name (letters, digits, '_', '.' and '-', not starting with '.')"
#define NOT_A_VERSION "not a version number (a positive integer without leading zeros: 1, 2, 10)"

/* The entries a scan passes over, for rnnd_repository_index's skipped list. */
struct skips {
        struct rnnd_repository_skipped *v; /* RNND_REPOSITORY_MAX_SKIPPED, or NULL */
        size_t n, more;
};

/* Notes entry (of model, or of root when model is NULL) as skipped; RNND_ENOMEM. */
static int skip(struct skips *sk, const char *model, const char *entry, bool is_dir,
                const char *reason)
{
        struct rnnd_repository_skipped *s;

        if (sk->n == RNND_REPOSITORY_MAX_SKIPPED) {
                sk->more++;
                return 0;
        }
        if (sk->v == NULL) {
                sk->v = rnnd_calloc(RNND_REPOSITORY_MAX_SKIPPED, sizeof(sk->v[0]));
                if (sk->v == NULL)
                        return RNND_ENOMEM;
        }
        s = &sk->v[sk->n++];
        snprintf(s->name, sizeof(s->name), "%s%s%s", model != NULL ? model : "",
                 model != NULL ? "/" : "", entry);
        snprintf(s->reason, sizeof(s->reason), "%s", reason);
        s->is_dir = is_dir;
        return 0;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static int cmp_model(const void *a, const void *b)
{
        return strcmp(((const struct rnnd_repository_model *)a)->name,
                      ((const struct rnnd_repository_model *)b)->name);
}

/*
 * Rewrites the paths in e's message relative to the repository root: a
 * model's reason reaches clients (the index, a 503), and where the server
 * keeps its repository is not theirs to know; the daemon logs the root at
 * start (docs/MODELS.md).  "<root>/m/1/model.safetensors: ..." becomes
 * "m/1/model.safetensors: ...".
 */
static void relative_to(rnnd_error_t *e, const char *root)
{
        size_t n = strlen(root);
        char *p;

        while (n > 1 && root[n - 1] == '/')
                n--;
        if (n == 0)
                return;
        for (p = e->msg; (p = strstr(p, root)) != NULL;) {
                if (p[n] != '/') {
                        p += n;
                        continue;
                }
                memmove(p, p + n + 1, strlen(p + n + 1) + 1);
        }
}

/* Sets m's status and reason; the reason is the message of e. */
static void model_fail(struct rnnd_repository_model *m, const rnnd_error_t *e)
{
        m->status = e->code;
        snprintf(m->reason, sizeof(m->reason), "%s", e->msg);
        m->n_versions = 0;
}

/*
 * Lists the version directories of model_dir and stores the ones m's policy
 * selects in m, ascending.  A problem with the model is returned as an error
 * in *e that the caller records on m.
 */
static int select_versions(const char *model_dir, struct rnnd_repository_model *m, struct skips *sk,
                           rnnd_error_t *e)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        uint64_t top[RNND_CFG_MAX_VERSIONS]; /* the highest seen, ascending */
        bool wanted[RNND_CFG_MAX_VERSIONS] = {false};
        size_t n_top = 0, total = 0, want_n, rlen = 0;
        char rejected[96] = ""; /* "007/, v1/": directories that are no version */
        struct dirent *de;
        uint64_t v;
        DIR *d;

        d = opendir(model_dir);
        if (d == NULL)
                return rnnd_error_set(e, RNND_EIO, "%s: cannot open: %s", model_dir,
                                      strerror(errno));
        for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
                if (de->d_name[0] == '.' || !is_dir_at(dirfd(d), de->d_name))
                        continue; /* hidden, or a file (config.json, a README) */
                if (!parse_version(de->d_name, &v)) {
                        if (skip(sk, m->name, de->d_name, true, NOT_A_VERSION) < 0) {
                                closedir(d);
                                return rnnd_error_set(e, RNND_ENOMEM, "out of memory");
                        }
                        if (rlen < sizeof(rejected))
                                rlen += (size_t)snprintf(rejected + rlen, sizeof(rejected) - rlen,
                                                         "%s%s/", rlen > 0 ? ", " : "", de->d_name);
                        continue;
                }
                total++;
                for (uint32_t i = 0; i < cfg->version_policy.n_versions; i++)
                        if (cfg->version_policy.versions[i] == v)
                                wanted[i] = true;
                /* Keep the RNND_CFG_MAX_VERSIONS highest, in ascending order. */
                if (n_top == RNND_CFG_MAX_VERSIONS) {
                        if (v <= top[0])
                                continue;
                        memmove(top, top + 1, --n_top * sizeof(top[0]));
                }
                size_t i = n_top++;
                for (; i > 0 && top[i - 1] > v; i--)
                        top[i] = top[i - 1];
                top[i] = v;
        }
        if (errno != 0) {
                int err = errno;

                closedir(d);
                return rnnd_error_set(e, RNND_EIO, "%s: cannot read: %s", model_dir, strerror(err));
        }
        closedir(d);

        if (total == 0)
                return rnnd_error_set(e, RNND_EMODEL,
                                      "no version directory: %s/ holds no directory named by a "
                                      "version number (a positive integer without leading "
                                      "zeros), such as %s/1/ with %s in it%s%s",
                                      m->name, m->name, cfg->weights.file,
                                      rlen > 0 ? "; not versions: " : "", rejected);
        switch (cfg->version_policy.kind) {
        case RNND_VP_LATEST:
                want_n = cfg->version_policy.num_versions < n_top ? cfg->version_policy.num_versions
                                                                  : n_top;
                memcpy(m->versions, top + (n_top - want_n), want_n * sizeof(top[0]));
                m->n_versions = (uint32_t)want_n;
                return 0;
        case RNND_VP_ALL:
                if (total > RNND_CFG_MAX_VERSIONS)
                        return rnnd_error_set(e, RNND_ELIMIT,
                                              "%zu version directories, more than the %u the "
                                              "'all' version_policy can serve",
                                              total, RNND_CFG_MAX_VERSIONS);
                memcpy(m->versions, top, n_top * sizeof(top[0]));
                m->n_versions = (uint32_t)n_top;
                return 0;
        case RNND_VP_SPECIFIC:
                for (uint32_t i = 0; i < cfg->version_policy.n_versions; i++)
                        if (!wanted[i])
                                return rnnd_error_set(e, RNND_EMODEL,
                                                      "version %" PRIu64
                                                      " requested by version_policy is missing",
                                                      cfg->version_policy.versions[i]);
                memcpy(m->versions, cfg->version_policy.versions,
                       cfg->version_policy.n_versions * sizeof(m->versions[0]));
                m->n_versions = cfg->version_policy.n_versions;
                qsort(m->versions, m->n_versions, sizeof(m->versions[0]), cmp_u64);
                return 0;
        }
        return rnnd_error_set(e, RNND_EINTERNAL, "unknown version_policy kind");
}

/*
 * Fills in the model m (whose name is set): config and versions, or a status
 * and reason.  Returns an error only for what fails the whole scan.
 */
static int scan_model(const char *root, struct rnnd_repository_model *m, struct skips *sk,
                      rnnd_error_t *reterr)
{
        char dir[PATH_MAX];
        rnnd_error_t e = {0};
        int r;

        r = join_path(dir, root, m->name, &e);
        if (r == 0)
                r = rnnd_repository_read_config(dir, &m->cfg, &e);
        if (r == 0)
                r = select_versions(dir, m, sk, &e);
        if (r == RNND_ENOMEM)
                return rnnd_error_set(reterr, r, "%s", e.msg);
        if (r < 0) {
                memset(&m->cfg, 0, sizeof(m->cfg));
                relative_to(&e, root);
                model_fail(m, &e);
        }
        return 0;
}

int rnnd_repository_scan(const char *root, struct rnnd_repository_index *ret, rnnd_error_t *reterr)
{
        struct rnnd_repository_model *models = NULL, *grown;
        struct skips sk = {0};
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        d = opendir(root);
        if (d == NULL)
                return rnnd_error_set(reterr, RNND_EIO, "%s: cannot open repository: %s", root,
                                      strerror(errno));
        for (errno = 0; (de = readdir(d)) != NULL; errno = 0) {
                bool is_dir;

                if (de->d_name[0] == '.')
                        continue; /* hidden: ".", "..", a copy's staging directory */
                is_dir = is_dir_at(dirfd(d), de->d_name);
                if (!is_dir || !rnnd_repository_valid_name(de->d_name)) {
                        if (skip(&sk, NULL, de->d_name, is_dir,
                                 is_dir ? NOT_A_MODEL_NAME : "not a directory") < 0) {
                                r = rnnd_error_set(reterr, RNND_ENOMEM,
                                                   "%s: out of memory listing models", root);
                                goto out;
                        }
                        continue;
                }
                if (n == RNND_REPOSITORY_MAX_MODELS) {
                        r = rnnd_error_set(reterr, RNND_ELIMIT,
                                           "%s: more than %u models in the repository", root,
                                           RNND_REPOSITORY_MAX_MODELS);
                        goto out;
                }
                if (n == cap) {
                        cap = cap == 0 ? 16 : cap * 2;
                        grown = rnnd_realloc(models, cap * sizeof(models[0]));
                        if (grown == NULL) {
                                r = rnnd_error_set(reterr, RNND_ENOMEM,
                                                   "%s: out of memory listing models", root);
                                goto out;
                        }
                        models = grown;
                }
                memset(&models[n], 0, sizeof(models[n]));
                /* rnnd_repository_valid_name() checked that it fits. */
                memcpy(models[n].name, de->d_name, strlen(de->d_name) + 1);
                n++;
        }
        if (errno != 0) {
                r = rnnd_error_set(reterr, RNND_EIO, "%s: cannot read repository: %s", root,
                                   strerror(errno));
                goto out;
        }
        closedir(d);
        d = NULL;

        if (n > 0)
                qsort(models, n, sizeof(models[0]), cmp_model);
        for (size_t i = 0; i < n; i++) {
                r = scan_model(root, &models[i], &sk, reterr);
                if (r < 0)
                        goto out;
        }
        *ret = (struct rnnd_repository_index){.models = models,
                                              .n_models = n,
                                              .skipped = sk.v,
                                              .n_skipped = sk.n,
                                              .n_skipped_more = sk.more};
        models = NULL;
        sk.v = NULL;
out:
        if (d != NULL)
                closedir(d);
        rnnd_free(models);
        rnnd_free(sk.v);
        return r;
}

void rnnd_repository_index_done(struct rnnd_repository_index *idx)
{
        if (idx == NULL)
                return;
        rnnd_free(idx->models);
        rnnd_free(idx->skipped);
        *idx = (struct rnnd_repository_index){0};
}

const struct rnnd_repository_model *rnnd_repository_find(const struct rnnd_repository_index *idx,
                                                         const char *name)
{
        size_t lo = 0, hi = idx->n_models;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(name, idx->models[mid].name);

                if (c == 0)
                        return &idx->models[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

int rnnd_repository_read_config(const char *model_dir, struct rnnd_model_config *ret,
                                rnnd_error_t *reterr)
{
        char path[PATH_MAX], *buf = NULL;
        size_t got = 0;
        struct stat st;
        ssize_t k;
        int fd, r;

        r = join_path(path, model_dir, "config.json", reterr);
        if (r < 0)
                return r;
        /* O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
         */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return rnnd_error_set(reterr, RNND_EIO, "%s: cannot open: %s", path,
                                      strerror(errno));
        if (fstat(fd, &st) < 0) {
                r = rnnd_error_set(reterr, RNND_EIO, "%s: cannot stat: %s", path, strerror(errno));
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                r = rnnd_error_set(reterr, RNND_EIO, "%s: not a regular file", path);
                goto out;
        }
        if ((uint64_t)st.st_size > RNND_CFG_MAX_FILE_BYTES) {
                r = rnnd_error_set(reterr, RNND_ELIMIT, "%s: %jd bytes, more than the %u allowed",
                                   path, (intmax_t)st.st_size, RNND_CFG_MAX_FILE_BYTES);
                goto out;
        }
        buf = rnnd_malloc((size_t)st.st_size + 1);
        if (buf == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        /* Read at most the size fstat saw; a file that shrank meanwhile is parsed as it is. */
        while (got < (size_t)st.st_size) {
                k = read(fd, buf + got, (size_t)st.st_size - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = rnnd_error_set(reterr, RNND_EIO, "%s: cannot read: %s", path,
                                           strerror(errno));
                        goto out;
                }
                if (k == 0)
                        break;
                got += (size_t)k;
        }
        r = rnnd_modelcfg_parse(buf, got, path, ret, reterr);
out:
        rnnd_free(buf);
        close(fd);
        return r;
}

int rnnd_repository_load(const char *root, const struct rnnd_repository_model *m, uint64_t version,
                         rnnd_model_t **ret, rnnd_error_t *reterr)
{
        char dir[PATH_MAX];
        int r;

        if (m->status < 0)
                return rnnd_error_set(reterr, m->status, "model '%s' is unusable: %s", m->name,
                                      m->reason);
        r = join_path(dir, root, m->name, reterr);
        if (r == 0)
                r = rnnd_model_load(dir, m->name, version, &m->cfg, ret, reterr);
        if (r < 0 && reterr != NULL)
                relative_to(reterr, root);
        return r;
}
