/*
 * shm.c: the table of system shared memory regions (shm.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"
#include "shm.h"

struct rnnd_shm_region {
        struct rnnd_shm_region *next;
        char name[RNND_SHM_NAME_MAX];
        struct rnnd_shmreq q; /* its object's key, offset and byte_size, as registered */
        int fd;
        bool writable;
        unsigned refs; /* the table's one, and one per copy under way; guarded by mu */
};

void rnnd_shm_init(struct rnnd_shm *t, unsigned max)
{
        pthread_mutex_init(&t->mu, NULL);
        t->max = max;
        t->n = 0;
        t->head = NULL;
}

static void put_locked(struct rnnd_shm_region *r)
{
        if (--r->refs > 0)
                return;
        close(r->fd);
        rnnd_free(r);
}

static void put(struct rnnd_shm *t, struct rnnd_shm_region *r)
{
        pthread_mutex_lock(&t->mu);
        put_locked(r);
        pthread_mutex_unlock(&t->mu);
}

void rnnd_shm_done(struct rnnd_shm *t)
{
        rnnd_shm_unregister(t, "", NULL);
        pthread_mutex_destroy(&t->mu);
}

static struct rnnd_shm_region **find_locked(struct rnnd_shm *t, const char *name)
{
        struct rnnd_shm_region **pp = &t->head;

        while (*pp != NULL && strcmp((*pp)->name, name) != 0)
                pp = &(*pp)->next;
        return pp;
}

static int off(rnnd_error_t *reterr)
{
        return rnnd_error_set(reterr, RNND_EFORBIDDEN,
                              "system shared memory is off: max_shm_regions is 0 (docs/HTTP.md "
                              "\"Shared memory\")");
}

/* Opens q's object and checks it holds the region; the new descriptor, or -1 after *reterr. */
static int open_object(const char *name, const struct rnnd_shmreq *q, bool *writable,
                       rnnd_error_t *reterr)
{
        struct stat st;
        int fd;

        *writable = true;
        fd = shm_open(q->key, O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
        if (fd < 0 && errno == EACCES) {
                *writable = false;
                fd = shm_open(q->key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
        }
        if (fd < 0) {
                rnnd_error_set(reterr, RNND_EINVAL,
                               "region '%.64s': cannot open shared memory object '%.64s': %s", name,
                               q->key, strerror(errno));
                return -1;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            (uint64_t)st.st_size < q->offset + q->byte_size) {
                rnnd_error_set(reterr, RNND_EINVAL,
                               "region '%.64s': shared memory object '%.64s' holds %" PRIu64
                               " bytes, not the %" PRIu64 " at offset %" PRIu64
                               " + byte_size %" PRIu64,
                               name, q->key, S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0,
                               q->offset + q->byte_size, q->offset, q->byte_size);
                close(fd);
                return -1;
        }
        return fd;
}

int rnnd_shm_register(struct rnnd_shm *t, const char *name, const struct rnnd_shmreq *q,
                      rnnd_error_t *reterr)
{
        struct rnnd_shm_region *r;
        bool writable;
        int fd, ret = 0;

        if (t->max == 0)
                return off(reterr);
        ret = rnnd_shmreq_check(name, RNND_SHM_NAME_MAX, q, reterr);
        if (ret < 0)
                return ret;
        fd = open_object(name, q, &writable, reterr);
        if (fd < 0)
                return RNND_EINVAL;
        r = rnnd_calloc(1, sizeof(*r));
        if (r == NULL) {
                close(fd);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        }
        memcpy(r->name, name, strlen(name) + 1);
        r->q = *q;
        r->fd = fd;
        r->writable = writable;
        r->refs = 1;
        pthread_mutex_lock(&t->mu);
        if (*find_locked(t, name) != NULL)
                ret = rnnd_error_set(reterr, RNND_EINVAL,
                                     "shared memory region '%.64s' is registered already "
                                     "(unregister it first)",
                                     name);
        else if (t->n >= t->max)
                ret = rnnd_error_set(reterr, RNND_ELIMIT,
                                     "max_shm_regions (%u) regions are registered; unregister "
                                     "one first",
                                     t->max);
        if (ret == 0) {
                r->next = t->head;
                t->head = r;
                t->n++;
        } else {
                put_locked(r);
        }
        pthread_mutex_unlock(&t->mu);
        if (ret == 0)
                rnnd_log(RNND_LOG_INFO,
                         "shared memory region '%s' registered: %s, %" PRIu64 " bytes at %" PRIu64
                         "%s",
                         name, q->key, q->byte_size, q->offset, writable ? "" : " (read-only)");
        return ret;
}

unsigned rnnd_shm_count(struct rnnd_shm *t)
{
        unsigned n;

        pthread_mutex_lock(&t->mu);
        n = t->n;
        pthread_mutex_unlock(&t->mu);
        return n;
}

int rnnd_shm_unregister(struct rnnd_shm *t, const char *name, rnnd_error_t *reterr)
{
        struct rnnd_shm_region **pp, *r;

        if (t->max == 0)
                return off(reterr);
        pthread_mutex_lock(&t->mu);
        for (pp = name[0] != '\0' ? find_locked(t, name) : &t->head; (r = *pp) != NULL;) {
                *pp = r->next;
                t->n--;
                rnnd_log(RNND_LOG_INFO, "shared memory region '%s' unregistered", r->name);
                put_locked(r);
                if (name[0] != '\0')
                        break;
        }
        pthread_mutex_unlock(&t->mu);
        return 0;
}

static void put_status(struct rnnd_strbuf *b, const struct rnnd_shm_region *r, bool map)
{
        rnnd_strbuf_json_sep(b);
        if (map) {
                rnnd_strbuf_json_str(b, r->name);
                rnnd_strbuf_putc(b, ':');
        }
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "name", r->name);
        rnnd_strbuf_json_kv_str(b, "key", r->q.key);
        rnnd_strbuf_json_kv_u64(b, "offset", r->q.offset);
        rnnd_strbuf_json_kv_u64(b, "byte_size", r->q.byte_size);
        rnnd_strbuf_putc(b, '}');
}

int rnnd_shm_status(struct rnnd_shm *t, const char *name, bool map, struct rnnd_strbuf *b,
                    rnnd_error_t *reterr)
{
        const struct rnnd_shm_region *r;
        int ret = 0;

        if (t->max == 0)
                return off(reterr);
        pthread_mutex_lock(&t->mu);
        r = name[0] != '\0' ? *find_locked(t, name) : t->head;
        if (name[0] != '\0' && r == NULL)
                ret = rnnd_error_set(reterr, RNND_ENOTFOUND,
                                     "no shared memory region '%.64s' is registered", name);
        rnnd_strbuf_puts(b, map ? "{\"regions\":{" : "[");
        for (; ret == 0 && r != NULL; r = name[0] != '\0' ? NULL : r->next)
                put_status(b, r, map);
        rnnd_strbuf_puts(b, map ? "}}" : "]");
        pthread_mutex_unlock(&t->mu);
        return ret;
}

/*
 * The region ref names, held for a copy of n bytes at ref->offset (put it
 * back with put()), or NULL after *reterr.  exact: n must be ref->byte_size
 * (an input), else at most (an output).
 */
static struct rnnd_shm_region *get(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, size_t n,
                                   bool exact, const char *what, rnnd_error_t *reterr)
{
        struct rnnd_shm_region *r;

        if (exact ? ref->byte_size != n : ref->byte_size < n) {
                rnnd_error_set(reterr, RNND_EINVAL,
                               "%s: parameters.shared_memory_byte_size is %" PRIu64
                               ", but the tensor takes %zu bytes",
                               what, ref->byte_size, n);
                return NULL;
        }
        pthread_mutex_lock(&t->mu);
        r = *find_locked(t, ref->region);
        if (r != NULL)
                r->refs++;
        pthread_mutex_unlock(&t->mu);
        if (r == NULL) {
                rnnd_error_set(reterr, RNND_EINVAL,
                               "%s: parameters.shared_memory_region: no region '%.64s' is "
                               "registered%s",
                               what, ref->region,
                               t->max == 0 ? " (system shared memory is off: max_shm_regions "
                                             "is 0)"
                                           : "");
                return NULL;
        }
        if (ref->offset > r->q.byte_size || ref->byte_size > r->q.byte_size - ref->offset) {
                rnnd_error_set(reterr, RNND_EINVAL,
                               "%s: parameters.shared_memory_byte_size %" PRIu64
                               " at shared_memory_offset %" PRIu64
                               " does not fit region '%.64s' (%" PRIu64 " bytes)",
                               what, ref->byte_size, ref->offset, r->name, r->q.byte_size);
                put(t, r);
                return NULL;
        }
        return r;
}

/* n bytes between r at off and buf, by pread or pwrite; 0 or *reterr. */
static int copy(struct rnnd_shm_region *r, uint64_t off, void *buf, size_t n, bool write,
                const char *what, rnnd_error_t *reterr)
{
        uint64_t at = r->q.offset + off;
        struct stat st;
        size_t done = 0;
        ssize_t k = 0;

        /* A write past the object's end would grow it rather than fail: look first. */
        if (write && (fstat(r->fd, &st) < 0 || (uint64_t)st.st_size < at + n))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "%s: region '%.64s': its object '%.64s' is shorter than "
                                      "when it was registered",
                                      what, r->name, r->q.key);
        while (done < n) {
                k = write ? pwrite(r->fd, (const char *)buf + done, n - done, (off_t)(at + done))
                          : pread(r->fd, (char *)buf + done, n - done, (off_t)(at + done));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                done += (size_t)k;
        }
        if (done == n)
                return 0;
        if (k == 0)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "%s: region '%.64s': its object '%.64s' is shorter than "
                                      "when it was registered",
                                      what, r->name, r->q.key);
        return rnnd_error_set(reterr, RNND_EINVAL, "%s: region '%.64s': cannot %s it: %s", what,
                              r->name, write ? "write" : "read", strerror(errno));
}

int rnnd_shm_read(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, void *buf, size_t n,
                  const char *what, rnnd_error_t *reterr)
{
        struct rnnd_shm_region *r = get(t, ref, n, true, what, reterr);
        int ret;

        if (r == NULL)
                return RNND_EINVAL;
        ret = copy(r, ref->offset, buf, n, false, what, reterr);
        put(t, r);
        return ret;
}

/* The region for a write of n bytes, held, or NULL after *reterr. */
static struct rnnd_shm_region *get_writable(struct rnnd_shm *t, const struct rnnd_shm_ref *ref,
                                            size_t n, const char *what, rnnd_error_t *reterr)
{
        struct rnnd_shm_region *r = get(t, ref, n, false, what, reterr);

        if (r != NULL && !r->writable) {
                rnnd_error_set(reterr, RNND_EINVAL,
                               "%s: region '%.64s': rnnd may only read its object '%.64s' (its "
                               "mode)",
                               what, r->name, r->q.key);
                put(t, r);
                return NULL;
        }
        return r;
}

int rnnd_shm_check_write(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, size_t n,
                         const char *what, rnnd_error_t *reterr)
{
        struct rnnd_shm_region *r = get_writable(t, ref, n, what, reterr);

        if (r == NULL)
                return RNND_EINVAL;
        put(t, r);
        return 0;
}

int rnnd_shm_write(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, const void *buf, size_t n,
                   const char *what, rnnd_error_t *reterr)
{
        struct rnnd_shm_region *r = get_writable(t, ref, n, what, reterr);
        int ret;

        if (r == NULL)
                return RNND_EINVAL;
        ret = copy(r, ref->offset, (void *)(uintptr_t)buf, n, true, what, reterr);
        put(t, r);
        return ret;
}
