/*
 * shm.h: the system shared memory regions clients register (Triton's
 * shared memory extension; docs/HTTP.md "Shared memory", docs/DESIGN.md).
 *
 * A region is a named part [offset, offset + byte_size) of a POSIX shared
 * memory object (shm_open(3) key, in /dev/shm) that a client made.  The
 * table holds at most max_shm_regions of them (0: the extension is off),
 * each with the object open.  Inputs are read from a region and outputs
 * written to one with pread/pwrite through that descriptor, never through
 * a mapping: a client that shrinks its object would make a read of a
 * mapping past its end kill the daemon (SIGBUS); pread just comes up short,
 * and the request gets a 400.  A region in use by a copy stays open until
 * the copy ends, even when it is unregistered meanwhile.  Every function is
 * thread-safe (one mutex; the copies run outside it).
 */
#ifndef RNND_SHM_H
#define RNND_SHM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "infer.h"
#include "shmreq.h"
#include "strbuf.h"

struct rnnd_shm_region;

struct rnnd_shm {
        pthread_mutex_t mu;
        unsigned max;                 /* max_shm_regions; 0: off */
        unsigned n;                   /* registered; guarded by mu */
        struct rnnd_shm_region *head; /* guarded by mu */
};

void rnnd_shm_init(struct rnnd_shm *t, unsigned max);

/* Closes every region (nothing may copy any more). */
void rnnd_shm_done(struct rnnd_shm *t);

/*
 * Registers region name: opens q->key (read-write, or read-only where the
 * object's mode allows no more) and checks that it is a regular object
 * that holds [offset, offset + byte_size).  Errors: RNND_EFORBIDDEN (the
 * extension is off), RNND_ELIMIT (max_shm_regions are registered),
 * RNND_EINVAL (the name is registered, the key cannot be opened, the object
 * is too small).
 */
int rnnd_shm_register(struct rnnd_shm *t, const char *name, const struct rnnd_shmreq *q,
                      rnnd_error_t *reterr);

/* How many regions are registered. */
unsigned rnnd_shm_count(struct rnnd_shm *t);

/* Unregisters region name ("": every one); one that is not registered is no error.  */
int rnnd_shm_unregister(struct rnnd_shm *t, const char *name, rnnd_error_t *reterr);

/*
 * The status of region name ("": every one) as JSON into b: HTTP's list of
 * {"name", "key", "offset", "byte_size"}, or with map, gRPC's
 * {"regions": {name: {...}}}.  Errors: RNND_EFORBIDDEN (off), RNND_ENOTFOUND
 * (name is not registered).
 */
int rnnd_shm_status(struct rnnd_shm *t, const char *name, bool map, struct rnnd_strbuf *b,
                    rnnd_error_t *reterr);

/*
 * Copies n bytes between the region ref names, at ref->offset, and buf:
 * rnnd_shm_read() into buf, rnnd_shm_write() from it.  ref->byte_size must
 * be n for a read and at least n for a write (Triton's rule for outputs).
 * what names the tensor in errors ("inputs[0]").  Errors: RNND_EINVAL (no
 * such region, out of its bounds, the object shrank or cannot be written).
 */
int rnnd_shm_read(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, void *buf, size_t n,
                  const char *what, rnnd_error_t *reterr);
int rnnd_shm_write(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, const void *buf, size_t n,
                   const char *what, rnnd_error_t *reterr);

/* Whether a write of n bytes to ref would fit, checked before the inference runs; as above. */
int rnnd_shm_check_write(struct rnnd_shm *t, const struct rnnd_shm_ref *ref, size_t n,
                         const char *what, rnnd_error_t *reterr);

#endif
